// posenc explore: the page. Hand-written, no library. It asks this server only (/api/* on the same origin)
// and draws every view on a <canvas> by hand.
(() => {
  "use strict";

  const byId = (id) => document.getElementById(id);
  const DEBOUNCE_MS = 150; // control changes
  const HOVER_MS = 40; // mouse moves over the heatmap

  // The options every table view takes: query parameter -> control id.
  const OPTIONS = [
    ["d_model", "d-model"],
    ["base", "base"],
    ["shift", "shift"],
    ["scale", "scale"],
    ["layout", "layout"],
    ["odd", "odd"],
    ["dtype", "dtype"],
    ["start", "start"],
    ["length", "length"],
  ];

  const state = {
    caps: { MAX_VALUES: 262144, MAX_DOT: 512, MAX_DIMS: 16, MAX_UPLOAD: 32 * 1024 * 1024 },
    table: null, // the last /api/table answer
    heatImage: null, // its cells, one pixel each (an offscreen canvas)
    selected: { position: 1, column: 0 },
    rope: null,
    identify: null,
    draws: 0,
  };

  // --- requests: one in flight per view (a newer one aborts it), a count for the status ------------------

  let inFlight = 0;
  const timers = new Map(); // debounced work not started yet (it counts as loading)
  const controllers = new Map(); // view -> AbortController of its request in flight

  function updateStatus() {
    const busy = inFlight > 0 || timers.size > 0;
    const text = busy ? "loading" : "ready";
    const el = byId("status");
    if (el.textContent !== text) el.textContent = text;
    document.body.classList.toggle("busy", busy);
  }

  function debounce(key, fn, ms) {
    if (timers.has(key)) clearTimeout(timers.get(key));
    timers.set(
      key,
      setTimeout(() => {
        timers.delete(key);
        try {
          fn();
        } finally {
          updateStatus();
        }
      }, ms),
    );
    updateStatus();
  }

  function showError(message) {
    byId("error").textContent = message;
  }

  function clearError() {
    byId("error").textContent = "";
  }

  // Fetch `path` (same origin only) for `view`, abort the view's older request, and hand the JSON to
  // `onData` before the request stops counting as in flight (so "ready" means drawn). A 4xx/5xx answer's
  // `error` goes to the error line; an aborted request is dropped silently.
  async function load(view, path, onData, init = {}) {
    if (!path.startsWith("/api")) throw new Error(`not an endpoint of this server: ${path}`);
    const old = controllers.get(view);
    if (old) old.abort();
    const controller = new AbortController();
    controllers.set(view, controller);
    inFlight += 1;
    updateStatus();
    const section = viewSection(view);
    try {
      const response = await fetch(path, {
        ...init,
        signal: controller.signal,
        credentials: "same-origin",
        cache: "no-store",
        redirect: "error",
      });
      let data = null;
      try {
        data = await response.json();
      } catch (_) {
        data = null;
      }
      if (controller.signal.aborted) return;
      if (!response.ok) {
        const message = data && data.error ? data.error : `${path.split("?")[0]}: HTTP ${response.status}`;
        showError(message);
        if (section) section.classList.add("stale");
        return;
      }
      if (section) section.classList.remove("stale");
      onData(data);
    } catch (error) {
      if (error && error.name === "AbortError") return;
      showError(`${path.split("?")[0]}: ${error && error.message ? error.message : error}`);
      if (section) section.classList.add("stale");
    } finally {
      if (controllers.get(view) === controller) controllers.delete(view);
      inFlight -= 1;
      updateStatus();
    }
  }

  function viewSection(view) {
    const id = { table: "heatmap", value: "heatmap", sinusoids: "sinusoids", dot: "dot" }[view] || view;
    return byId(`view-${id}`);
  }

  // --- options ------------------------------------------------------------------------------------------

  function optionParams() {
    const params = new URLSearchParams();
    for (const [name, id] of OPTIONS) params.set(name, byId(id).value.trim());
    return params;
  }

  function intOf(id) {
    const text = byId(id).value.trim();
    return /^\d+$/.test(text) ? Number(text) : null;
  }

  // --- colours ------------------------------------------------------------------------------------------

  // A diverging map (blue, white, red) as a 256-entry table over [-1, 1].
  const ANCHORS = [
    [-1.0, [5, 48, 97]],
    [-0.6, [33, 102, 172]],
    [-0.3, [146, 197, 222]],
    [0.0, [247, 247, 247]],
    [0.3, [244, 165, 130]],
    [0.6, [178, 24, 43]],
    [1.0, [103, 0, 31]],
  ];
  const LUT = (() => {
    const lut = new Uint8ClampedArray(256 * 3);
    for (let k = 0; k < 256; k += 1) {
      const v = (k / 255) * 2 - 1;
      let j = 0;
      while (j < ANCHORS.length - 2 && v > ANCHORS[j + 1][0]) j += 1;
      const [v0, c0] = ANCHORS[j];
      const [v1, c1] = ANCHORS[j + 1];
      const t = Math.min(1, Math.max(0, (v - v0) / (v1 - v0)));
      for (let ch = 0; ch < 3; ch += 1) lut[k * 3 + ch] = Math.round(c0[ch] + t * (c1[ch] - c0[ch]));
    }
    return lut;
  })();

  function lutIndex(v) {
    if (!Number.isFinite(v)) return -1;
    return Math.max(0, Math.min(255, Math.round(((v + 1) / 2) * 255)));
  }

  const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];

  // --- drawing helpers ----------------------------------------------------------------------------------

  const FONT = "12px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
  const INK = "#222";
  const GRID = "#e3e3e3";

  function context(canvas) {
    const ctx = canvas.getContext("2d");
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    ctx.font = FONT;
    return ctx;
  }

  function niceTicks(lo, hi, count = 6) {
    if (!(hi > lo)) return [lo];
    const raw = (hi - lo) / count;
    const mag = 10 ** Math.floor(Math.log10(raw));
    const norm = raw / mag;
    const step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
    const ticks = [];
    for (let t = Math.ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) {
      ticks.push(Math.abs(t) < step * 1e-9 ? 0 : t);
    }
    return ticks;
  }

  function fmtTick(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a >= 1e6 || a < 1e-3) return v.toExponential(1).replace("e+", "e").replace(".0e", "e");
    return String(Number(v.toPrecision(4)));
  }

  const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };
  const power10 = (k) => `10${String(k).replace(/./g, (c) => SUPERSCRIPT[c] || c)}`;

  function axisLabels(ctx, box, xLabel, yLabel) {
    ctx.fillStyle = INK;
    ctx.textAlign = "center";
    ctx.textBaseline = "alphabetic";
    if (xLabel) ctx.fillText(xLabel, box.l + box.w / 2, box.t + box.h + 34);
    if (yLabel) {
      ctx.save();
      ctx.translate(14, box.t + box.h / 2);
      ctx.rotate(-Math.PI / 2);
      ctx.textBaseline = "middle";
      ctx.fillText(yLabel, 0, 0);
      ctx.restore();
    }
  }

  function noData(canvas, text) {
    const ctx = context(canvas);
    ctx.fillStyle = "#777";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(text, canvas.width / 2, canvas.height / 2);
  }

  // A line plot: series [{name, xs, ys, color, dash, width}], optional log-scale y.
  function linePlot(canvas, { series, xLabel, yLabel, logY = false, yRange = null, legend = true, hlines = [] }) {
    const ctx = context(canvas);
    const box = { l: 66, t: 12, r: 14, b: 42 };
    box.w = canvas.width - box.l - box.r;
    box.h = canvas.height - box.t - box.b;
    let xmin = Infinity;
    let xmax = -Infinity;
    let ymin = Infinity;
    let ymax = -Infinity;
    for (const s of series) {
      for (let i = 0; i < s.xs.length; i += 1) {
        const x = s.xs[i];
        const y = s.ys[i];
        if (!Number.isFinite(x) || !Number.isFinite(y) || (logY && y <= 0)) continue;
        xmin = Math.min(xmin, x);
        xmax = Math.max(xmax, x);
        ymin = Math.min(ymin, y);
        ymax = Math.max(ymax, y);
      }
    }
    if (!Number.isFinite(xmin)) {
      noData(canvas, "nothing to draw");
      return;
    }
    if (yRange) [ymin, ymax] = yRange;
    if (xmin === xmax) {
      xmin -= 0.5;
      xmax += 0.5;
    }
    const ty = logY ? Math.log10 : (v) => v;
    let y0 = ty(ymin);
    let y1 = ty(ymax);
    if (logY) {
      y0 = Math.floor(y0);
      y1 = Math.max(Math.ceil(y1), y0 + 1);
    } else if (y0 === y1) {
      const pad = Math.abs(y0) > 0 ? Math.abs(y0) * 0.1 : 1;
      y0 -= pad;
      y1 += pad;
    } else if (!yRange) {
      const pad = (y1 - y0) * 0.05;
      y0 -= pad;
      y1 += pad;
    }
    const X = (x) => box.l + ((x - xmin) / (xmax - xmin)) * box.w;
    const Y = (y) => box.t + (1 - (ty(y) - y0) / (y1 - y0)) * box.h;

    // grid and ticks
    ctx.strokeStyle = GRID;
    ctx.lineWidth = 1;
    ctx.fillStyle = INK;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of niceTicks(xmin, xmax, 8)) {
      const px = Math.round(X(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(px, box.t);
      ctx.lineTo(px, box.t + box.h);
      ctx.stroke();
      ctx.fillText(fmtTick(t), px, box.t + box.h + 5);
    }
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    const yTicks = [];
    if (logY) {
      const step = Math.max(1, Math.ceil((y1 - y0) / 8));
      for (let k = Math.ceil(y0); k <= y1; k += step) yTicks.push([10 ** k, power10(k)]);
    } else {
      for (const t of niceTicks(y0, y1, 6)) yTicks.push([t, fmtTick(t)]);
    }
    for (const [t, label] of yTicks) {
      const py = Math.round(Y(t)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(box.l, py);
      ctx.lineTo(box.l + box.w, py);
      ctx.stroke();
      ctx.fillText(label, box.l - 6, py);
    }
    ctx.strokeStyle = "#999";
    ctx.strokeRect(box.l + 0.5, box.t + 0.5, box.w, box.h);

    ctx.save();
    ctx.beginPath();
    ctx.rect(box.l, box.t, box.w, box.h);
    ctx.clip();
    for (const h of hlines) {
      ctx.strokeStyle = h.color || "#888";
      ctx.setLineDash([4, 4]);
      ctx.beginPath();
      ctx.moveTo(box.l, Y(h.y));
      ctx.lineTo(box.l + box.w, Y(h.y));
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = h.color || "#888";
      ctx.textAlign = "right";
      ctx.textBaseline = "bottom";
      ctx.fillText(h.label, box.l + box.w - 4, Y(h.y) - 2);
    }
    for (const s of series) {
      ctx.strokeStyle = s.color;
      ctx.lineWidth = s.width || 1.5;
      ctx.setLineDash(s.dash || []);
      ctx.beginPath();
      let pen = false;
      for (let i = 0; i < s.xs.length; i += 1) {
        const x = s.xs[i];
        const y = s.ys[i];
        if (!Number.isFinite(x) || !Number.isFinite(y) || (logY && y <= 0)) {
          pen = false;
          continue;
        }
        if (pen) ctx.lineTo(X(x), Y(y));
        else ctx.moveTo(X(x), Y(y));
        pen = true;
      }
      ctx.stroke();
      if (s.xs.length === 1 && Number.isFinite(s.ys[0])) {
        ctx.fillStyle = s.color;
        ctx.fillRect(X(s.xs[0]) - 2, Y(s.ys[0]) - 2, 4, 4);
      }
    }
    ctx.restore();
    ctx.setLineDash([]);

    if (legend && series.length) {
      const rowH = 16;
      const widths = series.map((s) => ctx.measureText(s.name).width);
      const w = Math.max(...widths) + 36;
      const h = series.length * rowH + 8;
      const lx = box.l + 8;
      const ly = box.t + 8;
      ctx.fillStyle = "rgba(255,255,255,0.88)";
      ctx.fillRect(lx, ly, w, h);
      ctx.strokeStyle = "#bbb";
      ctx.lineWidth = 1;
      ctx.strokeRect(lx + 0.5, ly + 0.5, w, h);
      series.forEach((s, i) => {
        const y = ly + 4 + rowH * i + rowH / 2;
        ctx.strokeStyle = s.color;
        ctx.lineWidth = s.width || 2;
        ctx.setLineDash(s.dash || []);
        ctx.beginPath();
        ctx.moveTo(lx + 6, y);
        ctx.lineTo(lx + 26, y);
        ctx.stroke();
        ctx.setLineDash([]);
        ctx.fillStyle = INK;
        ctx.textAlign = "left";
        ctx.textBaseline = "middle";
        ctx.fillText(s.name, lx + 30, y);
      });
    }
    axisLabels(ctx, box, xLabel, yLabel);
  }

  // A matrix as an image, one pixel per cell (colour of value / scale), ready to scale onto a plot.
  function matrixImage(nx, ny, valueAt, scale) {
    const image = document.createElement("canvas");
    image.width = Math.max(1, nx);
    image.height = Math.max(1, ny);
    const ctx = image.getContext("2d");
    const pixels = ctx.createImageData(image.width, image.height);
    const data = pixels.data;
    for (let y = 0; y < ny; y += 1) {
      for (let x = 0; x < nx; x += 1) {
        const k = lutIndex(valueAt(x, y) / scale);
        const o = (y * nx + x) * 4;
        if (k < 0) {
          data[o] = 0;
          data[o + 1] = 0;
          data[o + 2] = 0; // NaN and infinities: black
        } else {
          data[o] = LUT[k * 3];
          data[o + 1] = LUT[k * 3 + 1];
          data[o + 2] = LUT[k * 3 + 2];
        }
        data[o + 3] = 255;
      }
    }
    ctx.putImageData(pixels, 0, 0);
    return image;
  }

  // Draw `image` into the plot box of `canvas` with axes (x0 + x across, y0 + y down) and a colour bar.
  function matrixPlot(canvas, image, { box, x0, nx, y0, ny, xLabel, yLabel, scale, barLabel }) {
    const ctx = context(canvas);
    ctx.imageSmoothingEnabled = nx > box.w || ny > box.h; // blend when shrinking, sharp cells when growing
    ctx.drawImage(image, box.l, box.t, box.w, box.h);
    ctx.imageSmoothingEnabled = true;
    ctx.strokeStyle = "#999";
    ctx.strokeRect(box.l + 0.5, box.t + 0.5, box.w, box.h);
    ctx.fillStyle = INK;
    ctx.strokeStyle = INK;
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    for (const t of niceTicks(0, nx - 1, 8)) {
      if (t !== Math.round(t)) continue;
      const px = box.l + ((t + 0.5) / nx) * box.w;
      ctx.beginPath();
      ctx.moveTo(px, box.t + box.h);
      ctx.lineTo(px, box.t + box.h + 4);
      ctx.stroke();
      ctx.fillText(String(x0 + t), px, box.t + box.h + 6);
    }
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (const t of niceTicks(0, ny - 1, 6)) {
      if (t !== Math.round(t)) continue;
      const py = box.t + ((t + 0.5) / ny) * box.h;
      ctx.beginPath();
      ctx.moveTo(box.l - 4, py);
      ctx.lineTo(box.l, py);
      ctx.stroke();
      ctx.fillText(String(y0 + t), box.l - 6, py);
    }
    axisLabels(ctx, box, xLabel, yLabel);
    // colour bar
    const bx = box.l + box.w + 16;
    const bw = 12;
    for (let i = 0; i < box.h; i += 1) {
      const k = lutIndex(1 - (2 * i) / Math.max(1, box.h - 1));
      ctx.fillStyle = `rgb(${LUT[k * 3]},${LUT[k * 3 + 1]},${LUT[k * 3 + 2]})`;
      ctx.fillRect(bx, box.t + i, bw, 1);
    }
    ctx.strokeStyle = "#999";
    ctx.strokeRect(bx + 0.5, box.t + 0.5, bw, box.h);
    ctx.fillStyle = INK;
    ctx.textAlign = "left";
    ctx.textBaseline = "middle";
    ctx.fillText(fmtTick(scale), bx + bw + 4, box.t + 4);
    ctx.fillText("0", bx + bw + 4, box.t + box.h / 2);
    ctx.fillText(fmtTick(-scale), bx + bw + 4, box.t + box.h - 4);
    if (barLabel) {
      ctx.save();
      ctx.translate(bx + bw + 34, box.t + box.h / 2);
      ctx.rotate(Math.PI / 2);
      ctx.textAlign = "center";
      ctx.fillText(barLabel, 0, 0);
      ctx.restore();
    }
    return ctx;
  }

  // --- heatmap and the selected value -------------------------------------------------------------------

  const HEAT_BOX = { l: 52, t: 10, r: 74, b: 42 };

  function heatBox(canvas) {
    const box = { ...HEAT_BOX };
    box.w = canvas.width - box.l - box.r;
    box.h = canvas.height - box.t - box.b;
    return box;
  }

  function loadTable() {
    load("table", `/api/table?${optionParams()}`, (data) => {
      state.table = data;
      const [length, width] = data.shape;
      const values = data.values;
      state.heatImage = matrixImage(length, width, (x, y) => values[x][y], 1);
      renderHeatmap();
      byId("collisions-posenc").textContent = String(data.collisions.posenc);
      byId("collisions-usual").textContent = String(data.collisions.usual);
      byId("table-range").textContent = `${data.dtype}, min ${data.min}, max ${data.max}`;
    });
  }

  function renderHeatmap() {
    const canvas = byId("heatmap");
    const table = state.table;
    if (!table || !state.heatImage) return;
    const [length, width] = table.shape;
    const box = heatBox(canvas);
    const ctx = matrixPlot(canvas, state.heatImage, {
      box,
      x0: table.start,
      nx: length,
      y0: 0,
      ny: width,
      xLabel: "position",
      yLabel: "column",
      scale: 1,
      barLabel: "PE",
    });
    const { position, column } = state.selected;
    const i = position - table.start;
    if (i >= 0 && i < length && column >= 0 && column < width) {
      const cw = box.w / length;
      const ch = box.h / width;
      const x = box.l + i * cw;
      const y = box.t + column * ch;
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#000";
      ctx.strokeRect(x - 1, y - 1, Math.max(cw, 2) + 2, Math.max(ch, 2) + 2);
      ctx.strokeStyle = "#ffd400";
      ctx.lineWidth = 1;
      ctx.strokeRect(x - 2.5, y - 2.5, Math.max(cw, 2) + 5, Math.max(ch, 2) + 5);
    }
    state.draws += 1;
    canvas.dataset.shape = `${length},${width}`;
    canvas.dataset.plot = `${box.l},${box.t},${box.w},${box.h}`;
    canvas.dataset.start = String(table.start);
    canvas.dataset.dtype = table.dtype;
    canvas.dataset.draws = String(state.draws);
    canvas.setAttribute("aria-label", `heatmap of ${length} positions from ${table.start} by ${width} columns, ${table.dtype}`);
  }

  function cellAt(event) {
    const canvas = byId("heatmap");
    const table = state.table;
    if (!table) return null;
    const rect = canvas.getBoundingClientRect();
    const cx = ((event.clientX - rect.left) * canvas.width) / rect.width;
    const cy = ((event.clientY - rect.top) * canvas.height) / rect.height;
    const box = heatBox(canvas);
    const [length, width] = table.shape;
    if (cx < box.l || cy < box.t || cx >= box.l + box.w || cy >= box.t + box.h) return null;
    const i = Math.min(length - 1, Math.floor(((cx - box.l) / box.w) * length));
    const c = Math.min(width - 1, Math.floor(((cy - box.t) / box.h) * width));
    return { position: table.start + i, column: c };
  }

  function select(cell, ms) {
    if (!cell) return;
    const same = cell.position === state.selected.position && cell.column === state.selected.column;
    state.selected = cell;
    byId("value-position").textContent = String(cell.position);
    byId("value-column").textContent = String(cell.column);
    if (same && byId("value").textContent !== "") return;
    renderHeatmap();
    debounce("value", loadValue, ms);
  }

  // Keep the selected cell inside the options' range (when they are numbers at all).
  function clampSelection() {
    const width = intOf("d-model");
    const start = intOf("start");
    const length = intOf("length");
    if (width === null || start === null || length === null || width < 1 || length < 1) return false;
    const sel = state.selected;
    sel.position = Math.min(Math.max(sel.position, start), start + length - 1);
    sel.column = Math.min(Math.max(sel.column, 0), width - 1);
    byId("value-position").textContent = String(sel.position);
    byId("value-column").textContent = String(sel.column);
    return true;
  }

  function loadValue() {
    const params = optionParams();
    params.set("position", String(state.selected.position));
    params.set("column", String(state.selected.column));
    load("value", `/api/value?${params}`, (data) => {
      if (Number(data.position) !== state.selected.position || Number(data.column) !== state.selected.column) return;
      byId("value").textContent = data.value;
      byId("value-bits").textContent = data.bits;
      byId("value-float64").textContent = data.float64;
    });
  }

  // --- sinusoids ----------------------------------------------------------------------------------------

  function loadSinusoids() {
    const params = optionParams();
    params.set("dims", byId("dims").value.replace(/\s+/g, ""));
    load("sinusoids", `/api/sinusoids?${params}`, (data) => {
      const series = data.series.map((s, k) => ({
        name: `column ${s.dim}`,
        xs: data.positions,
        ys: s.values,
        color: PALETTE[k % PALETTE.length],
      }));
      linePlot(byId("sinusoids"), { series, xLabel: "position", yLabel: "PE", yRange: [-1.08, 1.08] });
      byId("sinusoids").dataset.dims = data.series.map((s) => s.dim).join(",");
    });
  }

  // --- dot products -------------------------------------------------------------------------------------

  function loadDot() {
    const params = optionParams();
    const length = intOf("length");
    const cap = state.caps.MAX_DOT;
    let note = "";
    if (length !== null && length > cap) {
      params.set("length", String(cap));
      note = `The first ${cap} of the ${length} positions (the dot view's cap).`;
    }
    byId("dot-note").textContent = note;
    load("dot", `/api/dot?${params}`, (data) => {
      const n = data.positions.length;
      const matrix = data.matrix;
      let scale = 0;
      for (const row of matrix) for (const v of row) if (Number.isFinite(v)) scale = Math.max(scale, Math.abs(v));
      scale = scale || 1;
      const canvas = byId("dot-matrix");
      const box = { l: 52, t: 10, r: 84, b: 42 };
      box.w = canvas.width - box.l - box.r;
      box.h = canvas.height - box.t - box.b;
      const image = matrixImage(n, n, (x, y) => matrix[y][x], scale);
      matrixPlot(canvas, image, {
        box,
        x0: data.positions[0] || 0,
        nx: n,
        y0: data.positions[0] || 0,
        ny: n,
        xLabel: "q",
        yLabel: "p",
        scale,
        barLabel: "PE(p)·PE(q)",
      });
      canvas.dataset.shape = `${n},${n}`;
      const by = data.by_offset;
      linePlot(byId("dot-offset"), {
        series: [
          { name: "measured PE(start)·PE(start+k)", xs: by.offsets, ys: by.dot, color: "#1f77b4", width: 2 },
          { name: "closed form Σ cos(k ωᵢ)", xs: by.offsets, ys: by.closed_form, color: "#d62728", dash: [5, 4] },
        ],
        xLabel: "offset k",
        yLabel: "dot product",
      });
      let worst = 0;
      by.dot.forEach((v, k) => {
        worst = Math.max(worst, Math.abs(v - by.closed_form[k]));
      });
      byId("dot-diff").textContent = `(largest difference ${worst.toExponential(2)})`;
    });
  }

  // --- criteria -----------------------------------------------------------------------------------------

  function loadCriteria() {
    load("criteria", `/api/criteria?${optionParams()}`, (data) => {
      const body = byId("criteria").tBodies[0];
      body.replaceChildren();
      for (const c of data.criteria || []) {
        const row = document.createElement("tr");
        row.dataset.testid = `criterion-${c.name}`;
        row.className = c.passed ? "pass" : "fail";
        const cells = [
          c.title && c.title.toLowerCase() !== c.name.toLowerCase() ? `${c.name}: ${c.title}` : c.name,
          c.passed ? "PASS" : "FAIL",
          c.figure === null || c.figure === undefined ? "" : fmtFigure(c.figure),
          c.detail || "",
        ];
        cells.forEach((text, k) => {
          const cell = document.createElement(k === 0 ? "th" : "td");
          if (k === 0) cell.scope = "row";
          if (k === 1) cell.className = "verdict-cell";
          if (k === 2) cell.className = "mono";
          cell.textContent = text;
          row.append(cell);
        });
        body.append(row);
      }
      const all = data.criteria || [];
      const passed = all.filter((c) => c.passed).length;
      byId("criteria-summary").textContent = `${passed} of ${all.length} criteria pass.`;
    });
  }

  function fmtFigure(v) {
    if (typeof v !== "number") return String(v);
    if (v === 0 || (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6)) return String(Number(v.toPrecision(6)));
    return v.toExponential(3);
  }

  // --- RoPE ---------------------------------------------------------------------------------------------

  const ROPE_COLORS = { default: "#222222", linear: "#1f77b4", dynamic: "#2ca02c", yarn: "#9467bd", llama3: "#ff7f0e" };

  function ropeParams() {
    const params = new URLSearchParams();
    for (const id of ["rope-head-dim", "rope-base", "rope-factor", "rope-original"]) {
      const el = byId(id);
      params.set(el.name, el.value.trim());
    }
    return params;
  }

  function loadRope() {
    load("rope", `/api/rope?${ropeParams()}`, drawRope);
  }

  function applyRopeConfig() {
    const text = byId("rope-config").value;
    if (!text.trim()) {
      showError("rope-config: paste a model's config.json (a JSON object) first");
      return;
    }
    if (timers.has("rope")) {
      clearTimeout(timers.get("rope"));
      timers.delete("rope");
    }
    clearError();
    load("rope", "/api/rope", drawRope, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: text,
    });
  }

  function drawRope(data) {
    state.rope = data;
    const series = [];
    for (const [name, values] of Object.entries(data.lines || {})) {
      series.push({
        name,
        xs: values.map((_, i) => i),
        ys: values,
        color: ROPE_COLORS[name] || PALETTE[series.length % PALETTE.length],
        width: 1.5,
      });
    }
    if (data.config) {
      const values = data.config.wavelengths;
      series.push({
        name: `config (${data.config.rope_type})`,
        xs: values.map((_, i) => i),
        ys: values,
        color: "#e0005a",
        width: 2.5,
        dash: [6, 3],
      });
    }
    const factor = Number(byId("rope-factor").value);
    const original = Number(byId("rope-original").value);
    const hlines = [];
    if (!data.config && Number.isFinite(original) && original > 0) {
      hlines.push({ y: original, label: `trained context ${original}`, color: "#888" });
      if (Number.isFinite(factor) && factor > 1) {
        hlines.push({ y: original * factor, label: `extended ${original * factor}`, color: "#b58900" });
      }
    }
    linePlot(byId("rope-wavelengths"), {
      series,
      xLabel: "frequency index i",
      yLabel: "wavelength 2π/θᵢ (positions)",
      logY: true,
      hlines,
    });
    byId("rope-types").textContent = series.map((s) => s.name).join(", ");
  }

  // --- identify -----------------------------------------------------------------------------------------

  function identify(file) {
    if (!file) return;
    clearError();
    byId("identify-file").textContent = `${file.name} (${file.size.toLocaleString("en")} bytes)`;
    const cap = state.caps.MAX_UPLOAD;
    if (file.size > cap) {
      showError(`file: ${file.name} is ${file.size} bytes, over the ${cap}-byte upload cap; save a smaller table`);
      return;
    }
    load(
      "identify",
      `/api/identify?filename=${encodeURIComponent(file.name)}`,
      (data) => {
        state.identify = data;
        const head = `${data.tensor ? `${data.tensor}: ` : ""}shape ${JSON.stringify(data.shape)}, ${data.dtype}`;
        byId("identify-file").textContent = `${file.name}: ${head}`;
        byId("verdict").textContent = data.verdict;
        byId("paste").textContent = (data.paste || []).join("\n");
        const list = byId("audit-findings");
        list.replaceChildren();
        const findings = (data.audit && data.audit.findings) || [];
        for (const line of findings) {
          const item = document.createElement("li");
          item.textContent = line;
          list.append(item);
        }
        if (!findings.length) {
          const item = document.createElement("li");
          item.className = "none";
          item.textContent = data.audit && data.audit.passed ? "none: the audit passed" : "none";
          list.append(item);
        }
        drawErrors((data.audit && data.audit.errors) || {});
      },
      { method: "POST", headers: { "Content-Type": "application/octet-stream" }, body: file },
    );
  }

  // The audit's largest error per band of positions: a step over each band [first, last].
  function drawErrors(errors) {
    const last = errors.positions || [];
    const worst = errors.max_error || [];
    const bands = errors.bands && errors.bands.length === worst.length ? errors.bands : last.map((p) => [p, p]);
    const xs = [];
    const ys = [];
    bands.forEach(([first, end], k) => {
      xs.push(first, end);
      ys.push(worst[k], worst[k]);
    });
    const canvas = byId("identify-errors");
    if (!xs.length) {
      noData(canvas, "no band of positions was audited");
      return;
    }
    const largest = Math.max(...worst.filter(Number.isFinite));
    const positive = worst.every((v) => v > 0);
    linePlot(canvas, {
      series: [{ name: largest === 0 ? "0 in every band: posenc's values, bit for bit" : "largest |difference| in the band",
        xs, ys, color: "#d62728", width: 2 }],
      xLabel: "position",
      yLabel: "largest |difference| from posenc",
      logY: positive,
      yRange: largest === 0 ? [-0.1, 1] : null,
    });
  }

  // --- wiring -------------------------------------------------------------------------------------------

  function refreshAll() {
    clearError();
    loadTable();
    if (clampSelection()) loadValue();
    loadSinusoids();
    loadDot();
    loadCriteria();
  }

  function scheduleRefresh() {
    debounce("all", refreshAll, DEBOUNCE_MS);
  }

  function loadCaps() {
    load("caps", "/api", (data) => {
      const caps = (data && data.caps) || {};
      for (const key of Object.keys(state.caps)) {
        const v = caps[key] ?? caps[key.toLowerCase()];
        if (Number.isFinite(v)) state.caps[key] = v;
      }
      byId("dims-help").textContent = `comma list of columns, at most ${state.caps.MAX_DIMS}`;
    });
  }

  function init() {
    const form = byId("options");
    form.addEventListener("submit", (e) => e.preventDefault());
    form.addEventListener("input", scheduleRefresh);
    form.addEventListener("change", scheduleRefresh);

    const rope = byId("rope-options");
    rope.addEventListener("submit", (e) => e.preventDefault());
    const ropeChanged = () => debounce("rope", () => {
      clearError();
      loadRope();
    }, DEBOUNCE_MS);
    rope.addEventListener("input", ropeChanged);
    rope.addEventListener("change", ropeChanged);
    byId("rope-apply").addEventListener("click", applyRopeConfig);
    // a config.json dropped on the text area is read into it and applied
    const ropeText = byId("rope-config");
    ropeText.addEventListener("dragover", (e) => e.preventDefault());
    ropeText.addEventListener("drop", (e) => {
      e.preventDefault();
      e.stopPropagation();
      const file = e.dataTransfer && e.dataTransfer.files[0];
      if (!file) return;
      file.text().then((text) => {
        ropeText.value = text;
        applyRopeConfig();
      });
    });

    const heat = byId("heatmap");
    heat.addEventListener("mousemove", (e) => select(cellAt(e), HOVER_MS));
    heat.addEventListener("click", (e) => select(cellAt(e), 0));
    heat.addEventListener("keydown", (e) => {
      const table = state.table;
      if (!table) return;
      const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
      const move = moves[e.key];
      if (!move) return;
      e.preventDefault();
      const [length, width] = table.shape;
      const p = Math.min(Math.max(state.selected.position + move[0], table.start), table.start + length - 1);
      const c = Math.min(Math.max(state.selected.column + move[1], 0), width - 1);
      select({ position: p, column: c }, HOVER_MS);
    });

    const zone = byId("drop-zone");
    const input = byId("file-input");
    input.addEventListener("change", () => identify(input.files[0]));
    zone.addEventListener("dragover", (e) => {
      e.preventDefault();
      zone.classList.add("over");
    });
    zone.addEventListener("dragleave", () => zone.classList.remove("over"));
    zone.addEventListener("drop", (e) => {
      e.preventDefault();
      zone.classList.remove("over");
      if (e.dataTransfer && e.dataTransfer.files.length) identify(e.dataTransfer.files[0]);
    });
    // a file dropped anywhere else must not navigate away from the page
    window.addEventListener("dragover", (e) => e.preventDefault());
    window.addEventListener("drop", (e) => e.preventDefault());

    noData(byId("identify-errors"), "drop a table above to see its errors");
    loadCaps();
    refreshAll();
    loadRope();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
