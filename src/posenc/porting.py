"""Porting tools: reorder a stored table's columns, and find out which variant a stored table is.

>>> import posenc
>>> stored = posenc.presets.get("fairseq", padding_idx=1).table(64, 32)
>>> match = identify(stored)[0]
>>> match.name, match.matches
('fairseq(padding_idx=1)', True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import math
import pickle
import struct
import warnings
import zipfile
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _validate, core, grids, presets

__all__ = ["Match", "convert_layout", "identify", "load_table"]

#: What the search yields: (name, options, position of row 0, zero padding row, error), where
#: ``error(rows, rough)`` is the largest difference between the candidate's first rows and the stored
#: ones (None: the candidate does not apply to this table); ``rough``: float32 will do (a known mismatch).
_Candidate = tuple[str | None, dict[str, Any], int, int | None, Callable[[int, bool], float | None]]

#: Rows compared at a time: bounds the memory a comparison takes on long tables.
_CHUNK = 4096


def convert_layout(table: npt.ArrayLike, source: str, target: str) -> np.ndarray:
    """The same encodings with their columns reordered from layout ``source`` to ``target``.

    Works on any ``(..., d_model)`` array; an odd width keeps its last (zero) column in place.

    >>> convert_layout([[0.1, 0.2, 0.9, 0.8]], "sin_cos", "interleaved")
    array([[0.1, 0.9, 0.2, 0.8]])
    """
    array = np.asarray(table)
    source, target = _validate.layout(source), _validate.layout(target)
    if array.ndim == 0 or array.shape[-1] < 2:
        raise ValueError(f"table must have shape (..., d_model) with d_model >= 2; got shape {array.shape}")
    d_model = array.shape[-1]
    result = array.copy()
    for function in (0, 1):
        result[..., _columns(d_model, target)[function]] = array[..., _columns(d_model, source)[function]]
    return result


def _columns(d_model: int, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the sine and the cosine columns of a ``d_model``-wide row (zero rule for odd widths)."""
    n = d_model // 2
    if layout == "interleaved":
        return np.arange(0, 2 * n, 2), np.arange(1, 2 * n, 2)
    first, second = np.arange(n), np.arange(n, 2 * n)
    return (first, second) if layout == "sin_cos" else (second, first)


@dataclasses.dataclass(frozen=True)
class Match:
    """What :func:`identify` found.

    Attributes:
        name: the preset (or grid function) that reproduces the table, or None when only the generic options
            do.
        options: the core options (base, shift, scale, layout, odd), or the arguments of the grid function
            in :mod:`posenc.grids` (``diffusers-2d``: ``grids.diffusers_2d(d_model, **options)``; likewise
            ``diffusers-3d``, ``timm-2d`` with ``dim=d_model``, ``positional-encodings-2d``/``3d`` with
            ``channels=d_model``).
        start: the position of row 0 (for 1-D tables).
        padding_idx: the position whose row is zero (fairseq), or None.
        max_error: the largest difference between the stored table and this candidate.
        matches: whether ``max_error`` is within the tolerance for the table's length and dtype.
    """

    name: str | None
    options: dict[str, Any]
    start: int
    padding_idx: int | None
    max_error: float
    matches: bool

    def describe(self) -> str:
        what = self.name or "generic"
        options = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        extra = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        start = f", rows from position {self.start}" if self.start else ""
        verdict = "matches" if self.matches else "does NOT match; nearest candidate"
        return f"{verdict}: {what} ({options}{extra}{start}); max error {self.max_error:.3g}"


def identify(table: npt.ArrayLike, *, tolerance: float | None = None, candidates: int = 3) -> list[Match]:
    """The variants that best reproduce a stored table, best first (``candidates`` of them).

    ``table`` is ``(rows, d_model)``; leading axes of size 1 are dropped, and an unflattened grid (diffusers'
    3-D ``(T, H·W, D)``, positional-encodings' ``(X, Y[, Z], C)``) is read row-major, its axes kept as a hint.

    The 1-D search fits the frequencies from the table itself (so any base works) and tries every layout,
    odd-width rule and shift 0/1, the position of row 0 and zero padding rows. The named grids are MAE /
    diffusers 2-D (any H×W, cls / extra zero rows, base_size and interpolation_scale fitted), diffusers 3-D
    (interpolation scales fitted), timm 2-D (both orders) and positional-encodings 2-D/3-D: a grid's
    axis sizes are read from where each axis' block of columns first changes, and a position scale s from
    the angles of its block (lowest frequency first, refined by the higher ones: s = angle / (row · ω)).
    Every candidate is recomputed exactly and compared element by element: on the first 64 rows, then on
    8 times as many, ..., then on all of them. ``tolerance`` defaults to what float32 code of that length
    can be off by.

    Names that build the same table are joined by ``" = "`` (``"mae-2d = diffusers-2d"``: the options are
    then diffusers'). A diffusers 2-D table fixes only base_size / interpolation_scale, so one table can be
    listed with two pairs (PixArt at 1024 px: base_size=32, interpolation_scale=1.0 and 64, 2.0).

    >>> best = identify(grids.diffusers_2d(64, (6, 10), base_size=7, interpolation_scale=1.5))[0]
    >>> best.name, best.options["grid_size"], best.options["base_size"], best.options["interpolation_scale"]
    ('diffusers-2d', (6, 10), 7, 1.5)
    """
    candidates = _validate.integer("candidates", candidates, minimum=1)
    if tolerance is not None:
        tolerance = _validate.real(
            "tolerance", tolerance, usual="leave it out for what float32 code of the length can be off by"
        )
        if tolerance < 0:
            raise ValueError(
                f"tolerance must be >= 0 (the largest difference that still matches); got {tolerance}"
            )
    given = np.asarray(table)
    if given.dtype.kind == "c":
        raise TypeError(
            f"table must hold real numbers; got {given.dtype} values (the imaginary parts would be lost)"
        )
    try:
        stored = given.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"table must hold real numbers; got {given.dtype} values") from None
    while stored.ndim > 2 and stored.shape[0] == 1:
        stored = stored[0]
    shape = stored.shape[:-1]  # a grid's own axes, when the table comes unflattened
    if stored.ndim > 2:
        stored = stored.reshape(-1, stored.shape[-1])
    if stored.ndim != 2 or stored.shape[0] < 2 or stored.shape[1] < 2:
        raise ValueError(f"table must have shape (rows >= 2, d_model >= 2); got shape {np.shape(table)}")
    if not np.isfinite(stored).all():
        raise ValueError("table holds NaN or inf values; it is not an encoding table")
    rows = stored.shape[0]
    limit = tolerance if tolerance is not None else 1e-5 + 16 * rows * 2.0**-24
    pool = list({_key(c): c for c in _candidates(stored, shape)}.values())
    # Compare on the first 64 rows, then on 8 times as many, ..., then in full. An error only grows with
    # the rows, so a candidate over the limit never matches: each step keeps those within it, and enough
    # of the best others to fill ``candidates`` (the nearest, when nothing matches; more after the first).
    size, widest, mismatches = min(rows, 64), max(12, 4 * candidates), set()
    while True:
        errors = ((c[-1](size, id(c) in mismatches), c) for c in pool)
        scored = sorted(((e, c) for e, c in errors if e is not None), key=lambda item: item[0])
        if size == rows:
            break
        within = [c for e, c in scored if e <= limit][:widest]
        others = [c for e, c in scored if e > limit]
        others = others[: widest if size == 64 else max(0, candidates - len(within))]
        pool, mismatches = within + others, {id(c) for c in others}
        size = min(rows, size * 8)
    found = [Match(*candidate[:4], error, error <= limit) for error, candidate in scored]
    ranked = sorted(
        found,
        key=lambda m: (
            not m.matches,
            0.0 if m.matches else m.max_error,
            m.name is None,
            _plainness(m),
            m.max_error,
        ),
    )
    return ranked[:candidates]


def _key(candidate: _Candidate) -> tuple:
    name, options, start, padding, _ = candidate
    return name, tuple(sorted(options.items())), start, padding


def _plainness(match: Match) -> float:
    """Prefer round numbers between equal fits (base 10000, shift 1 over base 10000.92, shift 0)."""
    base = match.options.get("base", 10000.0)
    mantissa = base / 10 ** math.floor(math.log10(base)) if base > 0 else 0
    scales = (match.options.get(name, 1.0) for name in ("scale", "interpolation_scale"))
    return abs(mantissa - round(mantissa)) + sum(abs(scale - 1) for scale in scales)


def _candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[_Candidate]:
    """Every candidate for ``stored``: the fitted and the named 1-D variants, then the named grids."""
    d_model = stored.shape[1]
    zero_rows = np.flatnonzero(~stored.any(axis=1))
    padding = int(zero_rows[0]) if len(zero_rows) == 1 else None
    odd_rules = ("zero", "literal", "drop") if d_model % 2 else ("zero",)
    fitted_starts = {0, 1, 2}
    for layout in _validate.LAYOUTS:
        for odd in odd_rules:
            fit = _fit(stored, layout, odd, zero_rows)
            if fit is None:
                continue
            log_base_per_step, log_scale, start = fit
            fitted_starts.add(start)
            count, twice_half = _validate.plan(d_model, odd)
            for shift in (0.0, 1.0):
                if twice_half / 2 - shift <= 0 or count < 2:
                    continue
                base = _nice(math.exp(log_base_per_step * (twice_half / 2 - shift)))
                scale = _nice(math.exp(log_scale))
                options = {"base": base, "shift": shift, "scale": scale, "layout": layout, "odd": odd}
                for first in dict.fromkeys((start, 0, 1, 2)):  # the fit, and the usual first positions
                    yield _one_dimensional(stored, options, first, padding)
    for _, preset in _named_presets(padding):  # the presets themselves, for tables that are close
        for first in sorted(fitted_starts):
            yield _one_dimensional(stored, preset.options, first, padding)
    yield from _grid_candidates(stored, shape)


def _one_dimensional(
    stored: np.ndarray, options: dict[str, Any], start: int, padding: int | None
) -> _Candidate:
    """The 1-D table with ``options`` whose row 0 is position ``start`` (row ``padding`` zero)."""
    d_model = stored.shape[1]
    if d_model % 2 == 0:
        options = {**options, "odd": "zero"}  # the odd-width rule means nothing for an even width

    def error(rows: int, rough: bool = False) -> float | None:
        worst, dtype = 0.0, "float32" if rough else "float64"
        for first in range(0, rows, _CHUNK):
            count = min(_CHUNK, rows - first)
            try:
                values = core.table(count, d_model, start=start + first, dtype=dtype, **options)
            except (ValueError, TypeError):
                return None
            if padding is not None and first <= padding < first + count:
                values[padding - first] = 0
            worst = max(worst, float(np.max(np.abs(values - stored[first : first + count]))))
        return worst

    return _preset_name(options, padding, d_model), options, start, padding, error


def _fit(stored: np.ndarray, layout: str, odd: str, zero_rows: np.ndarray) -> tuple[float, float, int] | None:
    """Fit ω_i = scale · r**i and the position of row 0 from the sine/cosine column pairs of ``layout``.

    The first 1024 rows are enough (every increment is measured on each row pair; the median is kept).
    """
    rows, d_model = stored.shape
    rows = min(rows, 1024)
    count = _validate.plan(d_model, odd)[0] if not (d_model % 2 and odd == "error") else d_model // 2
    pairs = d_model // 2
    if odd == "zero":
        sin_cols, cos_cols = _columns(d_model, layout)
    else:
        sin_cols, cos_cols = _columns(d_model + 1, layout)
        sin_cols, cos_cols = sin_cols[sin_cols < d_model][:pairs], cos_cols[cos_cols < d_model][:pairs]
    del count
    keep = np.setdiff1d(np.arange(rows), zero_rows)
    if len(keep) < 2:
        return None
    angles = np.arctan2(stored[keep][:, sin_cols], stored[keep][:, cos_cols])
    steps = np.diff(keep)
    if not np.all(steps > 0):
        return None
    increments = np.angle(np.exp(1j * np.diff(angles, axis=0))) / steps[:, None]
    omegas = np.median(increments, axis=0)
    usable = (omegas > 1e-6) & (omegas < 3.0)
    if usable.sum() < 2:
        return None
    index = np.arange(len(omegas))[usable]
    slope, intercept = np.polyfit(index, np.log(omegas[usable]), 1)
    if not slope < 0:
        return None
    fitted = np.exp(intercept + slope * np.arange(len(omegas)))
    lowest = int(np.argmin(fitted))
    start = round(float(angles[0, lowest] / fitted[lowest]) - keep[0])
    return -slope, intercept, start


def _nice(value: float) -> float:
    """``value`` snapped to a round number when within float32 noise of one (10000, 1.0, 0.5, 5000, ...)."""
    snapped = _round_number(value, 1e-4)
    return value if snapped is None else snapped


def _named_presets(padding: int | None) -> list[tuple[str, presets.Preset]]:
    """The presets identify names, with the library parameters that distinguish them."""
    if padding is not None:
        return [(f"fairseq(padding_idx={padding})", presets.get("fairseq", padding_idx=padding))]
    named = [
        (name, presets.get(name)) for name in presets.names() if name not in ("fairseq", "diffusers-timestep")
    ]
    named.append(("fairseq", presets.get("fairseq")))
    for flip in (False, True):
        for shift in (1, 0):
            label = f"diffusers-timestep(flip_sin_to_cos={flip}, downscale_freq_shift={shift})"
            named.append(
                (label, presets.get("diffusers-timestep", flip_sin_to_cos=flip, downscale_freq_shift=shift))
            )
    return named


def _preset_name(options: dict[str, Any], padding: int | None, d_model: int) -> str | None:
    """The names of every preset with these options, joined by ' = ' (an even width ignores the odd rule)."""

    def relevant(o: dict[str, Any]) -> dict[str, Any]:
        return o if d_model % 2 else {k: v for k, v in o.items() if k != "odd"}

    names = [
        label for label, preset in _named_presets(padding) if relevant(preset.options) == relevant(options)
    ]
    return " = ".join(dict.fromkeys(names)) or None


# --- the named grids --------------------------------------------------------------------------------
#
# A grid table's rows run over the cells row-major, one block of columns per axis. Each block is constant
# while its axis stands still, so where a block first changes gives the sizes of the axes inside it: the
# shape is read from the table, not searched for. The scale of the positions (diffusers' base_size and
# interpolation_scale) is fitted from the angles of one block and snapped to round numbers; every
# candidate is then recomputed and compared in full by identify.


def _grid_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[_Candidate]:
    """The named grids whose structure the table has (``shape``: the table's own leading axes)."""
    d_model = stored.shape[1]
    if d_model % 4 == 0:
        yield from _diffusers_2d_candidates(stored)
        yield from _timm_candidates(stored)
    if d_model % 16 == 0:
        yield from _diffusers_3d_candidates(stored, shape)
    yield from _positional_encodings_candidates(stored, shape)


def _grid(
    stored: np.ndarray,
    name: str,
    options: dict[str, Any],
    make: Callable[[], np.ndarray],
    origin: tuple[int, np.ndarray],
) -> _Candidate:
    """A grid candidate: ``make()`` builds the whole grid in float64, once, and each row's error is kept.

    ``origin`` is (row, values): the family's cell at position 0 and the row of the table that holds it.
    A table whose row differs from it by more than 0.5 somewhere (a 0 where a 1 belongs) is of another
    family, and nothing is built.
    """
    row_errors: list[np.ndarray | None] = []

    def error(rows: int, rough: bool = False) -> float | None:
        del rough  # the grid is built once, exactly
        if not row_errors:
            row, values = origin
            same = row < len(stored) and float(np.max(np.abs(stored[row] - values))) <= 0.5
            row_errors.append(_row_errors(stored, make) if same else None)
        return None if row_errors[0] is None else float(np.max(row_errors[0][:rows]))

    return name, options, 0, None, error


def _row_errors(stored: np.ndarray, make: Callable[[], np.ndarray]) -> np.ndarray | None:
    """Each row's largest difference between the grid ``make()`` builds and the stored table."""
    try:
        values = make()
    except (ValueError, TypeError):
        return None
    if values.size != stored.size:
        return None
    values = values.reshape(stored.shape)
    return np.concatenate(
        [
            np.max(np.abs(values[i : i + _CHUNK] - stored[i : i + _CHUNK]), axis=1)
            for i in range(0, len(stored), _CHUNK)
        ]
    )


def _run(stored: np.ndarray, columns: slice | np.ndarray) -> int:
    """How many rows from the top keep row 0's values in ``columns`` (all of them: the table's length).

    Scans 64 rows, then 8 times as many, ...: a grid's blocks change early, so long tables cost little.
    """
    top = stored[0, columns]
    first, stop = 1, 64
    while first < len(stored):
        changed = np.flatnonzero((stored[first:stop][:, columns] != top).any(axis=1))
        if len(changed):
            return first + int(changed[0])
        first, stop = stop, stop * 8
    return len(stored)


def _position_step(block: np.ndarray) -> float | None:
    """The position step between consecutive rows of one axis' [sin | cos] block (paper frequencies).

    With ω_i = 10000^(-i/n) (n = width / 2), row j holds sin(j·step·ω_i), cos(j·step·ω_i). The lowest
    frequency's angle, unwrapped along the rows, gives a first estimate; each higher frequency refines it,
    its turn count predicted by the estimate so far: step = angle_i(J - 1) / ((J - 1)·ω_i).
    """
    count, width = block.shape
    n = width // 2
    if count < 2 or n < 1:
        return None
    omegas = 10000.0 ** (-np.arange(n) / n)
    last = count - 1
    angles = np.arctan2(block[:, n - 1], block[:, 2 * n - 1])
    step = float(np.unwrap(angles)[-1]) / (last * omegas[-1])
    final = np.arctan2(block[-1, :n], block[-1, n : 2 * n])
    for i in range(n - 2, -1, -1):
        predicted = step * last * omegas[i]
        turns = round((predicted - final[i]) / (2 * math.pi))
        step = (final[i] + 2 * math.pi * turns) / (last * omegas[i])
    step = float(step)
    return step if math.isfinite(step) and step > 0 else None


def _round_number(value: float, rtol: float) -> float | None:
    """``value`` as a round number (k·10^e · 1, 0.5, 0.25 or 0.1) when within ``rtol`` of one, else None."""
    if not (math.isfinite(value) and value > 0):
        return None
    exponent = math.floor(math.log10(value))
    for step in (1, Fraction(1, 2), Fraction(1, 4), Fraction(1, 10)):
        unit = Fraction(10) ** exponent * step
        snapped = float(round(Fraction(value) / unit) * unit)  # 0.7, not 7 * 0.1 = 0.7000000000000001
        if abs(snapped - value) <= rtol * value:
            return snapped
    return None


def _simple(value: float) -> float | None:
    """``value`` as a simple fraction k/q, q in 1, 2, 4, 8, 10, 16, 20, 100, when within 1e-5 of one.

    These are the interpolation scales configurations use (2, 1.5, 1.875, 1.3, ...); None otherwise.
    """
    if not (math.isfinite(value) and value > 0):
        return None
    for q in (1, 2, 4, 8, 10, 16, 20, 100):
        k = round(value * q)
        if k >= 1 and abs(k / q - value) <= 1e-5 * value:
            return k / q
    return None


def _interpolation_scale(step: float | None) -> float:
    """diffusers' ``interpolation_scale`` from a fitted step ``1 / interpolation_scale`` (1 when unknown)."""
    if step is None:
        return 1.0
    return _simple(1 / step) or 1 / step


def _diffusers_sizes(ratio: float, side: int | None) -> list[tuple[int, float]]:
    """The (base_size, interpolation_scale) pairs with ``base_size / interpolation_scale = ratio``.

    The table fixes only the ratio (the position step is ratio / side), so equal tables get more than one
    name. Tried, plainest first: an integer base_size with scale 1 (DiT, SD3); base_size = the (square)
    grid's side with a simple scale (PatchEmbed's rule: PixArt at 1024 has 64 and 2); when the ratio is
    not an integer, base_size 16 (the default), then the smallest integer base_size with a simple scale;
    else base_size 16 with the fitted scale.
    """
    sizes = []
    whole = abs(ratio - round(ratio)) <= 1e-5 * ratio and round(ratio) >= 1
    if whole:
        sizes.append((round(ratio), 1.0))
    for base_size in (side,) if whole else (side, 16):
        if base_size is not None and (scale := _simple(base_size / ratio)) is not None:
            sizes.append((base_size, scale))
    if not sizes:
        for base_size in range(1, 1025):
            if (scale := _simple(base_size / ratio)) is not None:
                sizes.append((base_size, scale))
                break
        else:
            sizes.append((16, 16 / ratio))
    return list(dict.fromkeys(sizes))


def _diffusers_2d_candidates(stored: np.ndarray) -> Iterator[_Candidate]:
    """diffusers ``get_2d_sincos_pos_embed`` (= MAE when base_size is the side): any H×W, fitted scale.

    Rows: ``extra_tokens`` zero rows, then the cells row-major over (h, w); columns [w block | h block].
    W is where the h block first changes; the position steps base_size / (H or W · interpolation_scale)
    are fitted from each block's angles, so base_size / interpolation_scale = step_w · W = step_h · H.
    Square tables without that structure still get the plain MAE/DiT and base_size-16 candidates.
    """
    rows, d_model = stored.shape
    half = d_model // 2
    extra = int(np.argmax(stored.any(axis=1)))  # the leading zero rows (cls / extra tokens)
    origin = grids.diffusers_2d(d_model, 1, dtype="float64")[0]
    yielded = set()

    def candidate(shape: tuple[int, int], base_size: int, scale: float, zeros: int) -> Iterator[_Candidate]:
        h, w = shape
        options: dict[str, Any] = {
            "grid_size": h if h == w else (h, w),
            "base_size": base_size,
            "interpolation_scale": scale,
        }
        if zeros:
            options.update(cls_token=True, extra_tokens=zeros)
        key = tuple(options.items())
        if key in yielded:
            return
        yielded.add(key)
        mae = h == w == base_size and scale == 1 and zeros <= 1
        yield _grid(
            stored,
            "mae-2d = diffusers-2d" if mae else "diffusers-2d",
            options,
            lambda: grids.diffusers_2d(d_model, dtype="float64", **options),
            (zeros, origin),
        )

    body = stored[extra:]
    cells = len(body)
    if cells >= 2:
        w = min(_run(body, slice(half, None)), cells)
        if cells % w == 0 and 2 <= w < cells:
            h = cells // w
            step_w = _position_step(body[:w, :half])
            step_h = _position_step(body[::w, half:])
            ratios = [s * n for s, n in ((step_w, w), (step_h, h)) if s is not None]
            if ratios and max(ratios) - min(ratios) <= 1e-4 * max(ratios):
                for base_size, scale in _diffusers_sizes(ratios[0], h if h == w else None):
                    yield from candidate((h, w), base_size, scale, extra)
    for zeros in () if yielded else (0, 1):  # tables without the structure: the nearest square grids
        side = math.isqrt(rows - zeros)
        if side * side == rows - zeros and side >= 2:
            for base_size in dict.fromkeys((side, 16)):
                yield from candidate((side, side), base_size, 1.0, zeros)


def _diffusers_3d_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[_Candidate]:
    """diffusers ``get_3d_sincos_pos_embed`` (CogVideoX), ``(T, H·W, D)`` or flattened to rows.

    Columns [t (D/4) | w (3D/8) | h (3D/8)], rows over (t, h, w): W is where the h block first changes,
    H·W where the t block does (or the table's own second axis). The interpolation scales are
    1 / the fitted position steps.
    """
    rows, d_model = stored.shape
    t_end, w_end = d_model // 4, d_model // 4 + 3 * d_model // 8
    plane = min(_run(stored, slice(t_end)), rows)
    if len(shape) == 2 and shape[0] * shape[1] == rows:
        plane = shape[1]
    w = min(_run(stored, slice(w_end, None)), plane)
    if rows % plane or plane % w or plane < 2:
        return
    t, h = rows // plane, plane // w
    spatial = _position_step(stored[:w, t_end:w_end]) or _position_step(stored[:plane:w, w_end:])
    options = {
        "spatial_size": w if w == h else (w, h),
        "temporal_size": t,
        "spatial_interpolation_scale": _interpolation_scale(spatial),
        "temporal_interpolation_scale": _interpolation_scale(_position_step(stored[::plane, :t_end])),
    }
    origin = grids.diffusers_3d(d_model, 1, 1, dtype="float64")[0, 0]
    yield _grid(
        stored,
        "diffusers-3d",
        options,
        lambda: grids.diffusers_3d(d_model, dtype="float64", **options),
        (0, origin),
    )


def _timm_candidates(stored: np.ndarray) -> Iterator[_Candidate]:
    """timm ``build_sincos2d_pos_embed``, both column orders: the outer axis' columns set the inner size.

    ``reverse_coord=True`` with feat_shape (a, b) builds the same table as (b, a) without it; identify
    reports the latter.
    """
    rows, d_model = stored.shape
    quarter = d_model // 4
    outer_columns = {
        False: np.r_[0:quarter, 2 * quarter : 3 * quarter],  # [sin h | sin w | cos h | cos w]
        True: np.arange(2 * quarter),  # interleave_sin_cos: [sin h | cos h | sin w | cos w]
    }
    for interleave, columns in outer_columns.items():
        shapes = []
        inner = _run(stored, columns)
        if rows % inner == 0 and 2 <= inner < rows:
            shapes.append((rows // inner, inner))
        side = math.isqrt(rows)
        if side * side == rows and side >= 2:
            shapes.append((side, side))
        origin = grids.timm_2d((1, 1), d_model, interleave_sin_cos=interleave, dtype="float64")[0]
        for feat_shape in dict.fromkeys(shapes):
            options = {"feat_shape": feat_shape, "interleave_sin_cos": interleave}
            yield _grid(
                stored,
                "timm-2d",
                options,
                lambda o=options: grids.timm_2d(dim=d_model, dtype="float64", **o),
                (0, origin),
            )


def _positional_encodings_candidates(stored: np.ndarray, shape: tuple[int, ...]) -> Iterator[_Candidate]:
    """positional-encodings ``PositionalEncoding2D`` / ``3D``, ``(X, Y[, Z], C)`` or flattened to rows.

    Columns: one block of ceil(C / 2k)·2 interleaved columns per axis (k axes), x first, cut to C; rows
    over (x, y[, z]). The sizes come from where each block first changes, or from the table's own shape.
    """
    rows, channels = stored.shape
    for ndim in (2, 3):
        per_axis = math.ceil(channels / (2 * ndim)) * 2
        origin = grids.positional_encodings_nd((1,) * ndim, channels, dtype="float64").reshape(channels)
        shapes = []
        if len(shape) == ndim and math.prod(shape) == rows:
            shapes.append(tuple(shape))
        inner = [rows]  # rows per step of each axis, outermost first
        for axis in range(ndim - 1):
            start = axis * per_axis
            if start >= channels:
                break
            inner.append(min(_run(stored, slice(start, min(start + per_axis, channels))), inner[-1]))
        else:
            found = (*(a // b for a, b in itertools.pairwise(inner)), inner[-1])
            if all(a % b == 0 for a, b in itertools.pairwise(inner)) and min(found) >= 2:
                shapes.append(found)
        for found in dict.fromkeys(shapes):
            options = {"shape": found}
            yield _grid(
                stored,
                f"positional-encodings-{ndim}d",
                options,
                lambda s=found: grids.positional_encodings_nd(s, channels, dtype="float64"),
                (0, origin),
            )


# --- loading stored tables --------------------------------------------------------------------------

#: What load_table reads, in the words of its messages.
_EXPECTED = "a table of shape (positions, d_model) of real numbers"
_SUFFIXES = ".npy, .pt/.pth or .safetensors"
#: How deep the dicts and lists of a .pt file may nest, and how many entries they may hold in all. A state
#: dict nests a few levels and holds thousands; a crafted file whose dicts contain or share each other is
#: refused instead of walked for ever (each container is walked once).
_MAX_DEPTH = 64
_MAX_ENTRIES = 1_000_000
#: Arrays smaller than this are read without asking how much memory is available.
_CHECKED_BYTES = 64 << 20


@dataclasses.dataclass(frozen=True)
class _Stored:
    """One array of a file before it is read: its shape, its dtype as the file names it, its kind ("float",
    "int", or None: not real numbers), its bytes per value, and how to read it."""

    shape: tuple[int, ...]
    dtype: str
    kind: str | None
    itemsize: int
    read: Callable[[], np.ndarray]
    hint: str = ""  # what to do about a dtype that is not read


def load_table(path: str | Path, *, key: str | None = None) -> np.ndarray:
    """A stored table from ``.npy``, ``.pt``/``.pth`` (a tensor or a state dict) or ``.safetensors``.

    In a state dict, ``key`` names the tensor; without it the single 2-D (or ``(1, L, D)``) floating tensor
    whose name mentions a position is taken, and a clear error lists the candidates otherwise.

    Only the chosen array is read, once its dtype, its shape and the memory it needs are checked. ``.pt``
    files are read with ``torch.load(weights_only=True)``: tensors and plain containers, never code. A file
    that is empty, cut short, damaged, of another format than its suffix says, or that holds no such table
    raises ValueError naming the file, what is wrong with it and what is expected.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    if not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file"
        raise ValueError(f"{path} is {what}; name a {_SUFFIXES} file holding {_EXPECTED}")
    suffix = path.suffix.lower()
    readers = {
        ".npy": _npy_arrays,
        ".pt": _torch_arrays,
        ".pth": _torch_arrays,
        ".bin": _torch_arrays,
        ".safetensors": _safetensors_arrays,
    }
    if suffix not in readers:
        hint = (
            " (to identify a table of an .npz archive, np.save it alone as .npy)" if suffix == ".npz" else ""
        )
        raise ValueError(f"unknown file type {suffix!r} for {path}; use {_SUFFIXES}{hint}")
    try:
        if path.stat().st_size == 0:
            raise ValueError(f"{path} is empty; expected a {suffix} file holding {_EXPECTED}")
        with contextlib.ExitStack() as stack:
            arrays, others = readers[suffix](path, stack)
            name, stored = _pick(arrays, others, key, path)
            where = f"{path}, tensor {name!r}," if name else str(path)
            _check_stored(stored, where)
            try:
                return stored.read()
            except Exception as error:  # a tensor of a layout NumPy cannot take, a damaged zip member, ...
                raise ValueError(f"{where} cannot be read: {_reason(error)}") from None
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None


def _reason(error: BaseException) -> str:
    """The first line of an error's message (a library's long explanations cut), or what its type says."""
    if isinstance(error, EOFError):
        return "the file ends before its data does"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    end = text.find(". ", 40)  # the first sentence of a long explanation
    text = text[: end + 1] if end > 0 else text
    return text if len(text) <= 200 else text[:197] + "..."


def _npy_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, _Stored], dict[str, str]]:
    """The array of a .npy file, from its header (the data is read only by ``read``)."""
    del stack
    fmt = np.lib.format
    expected = f"expected a file written by np.save holding {_EXPECTED}"
    with open(path, "rb") as stream:
        try:
            version = fmt.read_magic(stream)
        except ValueError:
            raise ValueError(
                f"{path} is not a .npy file: it does not begin with the .npy signature; {expected}"
            ) from None
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(
                f"{path} claims .npy format version {version[0]}.{version[1]}, which is not 1.0, 2.0 or 3.0; "
                f"{expected}"
            )
        try:  # 2.0 and 3.0 differ only in the header's encoding, and a header of numbers is ASCII
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read_header(stream)
        except Exception as error:
            raise ValueError(f"{path} has a damaged .npy header ({_reason(error)}); {expected}") from None
        offset = stream.tell()
    count = math.prod(shape)
    if dtype.hasobject:
        hint = " (an array of pickled Python objects, which is never unpickled)"
        return {"": _Stored(shape, "object", None, dtype.itemsize, lambda: np.empty(0), hint)}, {}
    size = count * dtype.itemsize
    present = path.stat().st_size - offset
    if present < size:
        raise ValueError(
            f"{path} is cut short: its header declares {dtype} values of shape {shape}, {size:,} bytes, but "
            f"only {present:,} follow; the file was not completely written or copied"
        )

    def read() -> np.ndarray:
        with open(path, "rb") as stream:
            values = np.fromfile(stream, dtype=dtype, count=count, offset=offset)
        return values.reshape(shape, order="F" if fortran_order else "C")

    kind = {"f": "float", "i": "int", "u": "int"}.get(dtype.kind)
    hint = ""
    if dtype.kind == "V" and dtype.itemsize == 2:
        hint = " (posenc table --format npy stores bfloat16 so: save the table as float32 to identify it)"
    return {"": _Stored(shape, str(dtype), kind, dtype.itemsize, read, hint)}, {}


def _torch_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, _Stored], dict[str, str]]:
    """The tensors of a .pt file, read with ``torch.load(weights_only=True)`` (memory-mapped when it is a
    zip archive, so that only the chosen tensor is converted); the other entries by their type."""
    del stack
    try:
        import torch
    except ImportError:
        raise ImportError("reading .pt files needs PyTorch: pip install 'posenc[torch]'") from None
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols; only the outcome matters here
            warnings.simplefilter("ignore")
            loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except OSError:
        raise
    except pickle.UnpicklingError as error:
        raise ValueError(
            f"{path} cannot be read safely: torch.load(weights_only=True) refuses it "
            f"({_weights_only_reason(error)}); posenc reads tensors and dicts or lists of tensors only, and "
            "runs no code from a file"
        ) from None
    except Exception as error:  # EOFError (cut short), RuntimeError (a damaged zip archive), ...
        raise ValueError(
            f"{path} is not a readable PyTorch file ({_reason(error)}); expected {_EXPECTED} saved with "
            "torch.save, alone or in a state dict"
        ) from None
    arrays, others = {}, {}
    for name, value in _flatten(loaded, path).items():
        if isinstance(value, torch.Tensor):
            arrays[name] = _torch_stored(value, torch)
        else:
            others[name] = type(value).__name__
    return arrays, others


def _torch_stored(tensor: Any, torch: Any) -> _Stored:
    """A tensor as a _Stored: float64 is read as float64, any other real dtype as float32."""
    dtype = tensor.dtype
    integers = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    kind = "float" if dtype.is_floating_point else "int" if dtype in integers else None
    target = torch.float64 if dtype == torch.float64 else torch.float32

    def read() -> np.ndarray:
        return tensor.detach().to(target).numpy()

    return _Stored(tuple(tensor.shape), str(dtype).removeprefix("torch."), kind, dtype.itemsize, read)


def _weights_only_reason(error: BaseException) -> str:
    """What torch's weights-only unpickler refused, without its paragraphs of advice."""
    boilerplate = (
        "Weights only load failed",
        "Please file an issue",
        "Check the documentation",
        "Re-running",
    )
    lines = [line.strip() for line in str(error).splitlines()]
    kept = [line for line in lines if line and not line.startswith(boilerplate)]
    text = " ".join(kept).replace("WeightsUnpickler error:", "").strip()
    if not text:
        return _reason(error)
    return text if len(text) <= 200 else text[:197] + "..."


def _flatten(tree: Any, path: Path) -> dict[str, Any]:
    """The leaves of nested dicts, lists and tuples, named by their keys joined with dots (``""``: the
    tree is one leaf). Each container is walked once, however often it is referred to."""
    leaves: dict[str, Any] = {}
    walked: set[int] = set()
    entries = 0

    def walk(node: Any, prefix: str, depth: int) -> None:
        nonlocal entries
        if not isinstance(node, dict | list | tuple):
            leaves[prefix[:-1]] = node
            return
        if id(node) in walked:
            return
        walked.add(id(node))
        entries += len(node)
        if depth >= _MAX_DEPTH or entries > _MAX_ENTRIES:
            what = (
                f"nests dicts or lists more than {_MAX_DEPTH} deep"
                if depth >= _MAX_DEPTH
                else (f"holds more than {_MAX_ENTRIES:,} entries in its dicts and lists")
            )
            raise ValueError(f"{path} {what}; expected {_EXPECTED}, alone or in a state dict")
        for name, value in node.items() if isinstance(node, dict) else enumerate(node):
            walk(value, f"{prefix}{name}.", depth + 1)

    walk(tree, "", 0)
    return leaves


#: safetensors dtypes: those NumPy reads (and BF16, widened here), by kind
_SAFETENSORS_KINDS = {
    "F64": "float",
    "F32": "float",
    "F16": "float",
    "BF16": "float",
    **{f"{sign}{bits}": "int" for sign in "IU" for bits in (8, 16, 32, 64)},
}


def _safetensors_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, _Stored], dict[str, str]]:
    """The tensors of a .safetensors file, from its header (safetensors checks that the data covers it)."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError("reading .safetensors files needs safetensors: pip install safetensors") from None
    try:
        handle = stack.enter_context(safe_open(path, framework="numpy"))
        specs = {}
        for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
            spec = handle.get_slice(name)
            specs[name] = tuple(spec.get_shape()), spec.get_dtype()
    except OSError:
        raise
    except Exception as error:  # SafetensorError: a bad header length, a header that is not JSON, ...
        raise ValueError(
            f"{path} is not a readable .safetensors file ({_reason(error)}); expected a file written by "
            f"safetensors' save_file holding {_EXPECTED}"
        ) from None
    arrays = {}
    for name, (shape, dtype) in specs.items():
        kind = _SAFETENSORS_KINDS.get(dtype)
        itemsize = int("".join(filter(str.isdigit, dtype)) or 8) // 8
        read = _bfloat16_reader(path, name, shape) if dtype == "BF16" else _tensor_reader(handle, name)
        hint = "" if kind else " (save the table as float32)"
        arrays[name] = _Stored(shape, dtype, kind, max(itemsize, 1), read, hint)
    return arrays, {}


def _tensor_reader(handle: Any, name: str) -> Callable[[], np.ndarray]:
    return lambda: handle.get_tensor(name)


def _bfloat16_reader(path: Path, name: str, shape: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """Read a BF16 tensor as float32 (exactly: a bfloat16 is the top half of a float32), which NumPy has
    no type for. Its place comes from the header, which safe_open has already checked."""

    def read() -> np.ndarray:
        with open(path, "rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            begin, _ = json.loads(stream.read(length))[name]["data_offsets"]
            raw = np.fromfile(stream, dtype="<u2", count=math.prod(shape), offset=begin)
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)

    return read


def _pick(
    arrays: dict[str, _Stored], others: dict[str, str], key: str | None, path: Path
) -> tuple[str, _Stored]:
    """The array ``key`` names; without it, the one floating 2-D table (by its name, when there are more)."""
    if key is not None:
        if key in arrays:
            return key, arrays[key]
        if key in others:
            raise ValueError(f"{path}: {key!r} is {_a(others[key])}, not a tensor; expected {_EXPECTED}")
        if list(arrays) == [""]:
            raise ValueError(f"{path} holds one array, not a state dict: leave out the key ({key!r})")
        raise ValueError(f"{path} has no tensor {key!r}; it has: {_names(arrays) or 'none'}")
    if list(arrays) == [""]:
        return "", arrays[""]
    tables = {
        name: stored
        for name, stored in arrays.items()
        if stored.kind == "float" and sum(size != 1 for size in stored.shape) == 2
    }
    named = {k: v for k, v in tables.items() if any(w in k.lower() for w in ("pos", "pe", "sinus", "timing"))}
    chosen = named or tables
    if len(chosen) == 1:
        return next(iter(chosen.items()))
    if chosen:
        raise ValueError(
            f"{path} holds {len(chosen)} candidate tables ({_names(chosen)}); name one with --key"
        )
    if not arrays:
        if not others:
            held = "it holds an empty dict or list"
        elif list(others) == [""]:
            held = f"it holds {_a(others[''])}"
        else:
            held = f"its entries: {_names(others, others)}"
        raise ValueError(f"{path} holds no tensor ({held}); expected {_EXPECTED}, alone or in a state dict")
    listing = {name: f"{stored.dtype} {stored.shape}" for name, stored in arrays.items()}
    raise ValueError(
        f"{path} holds no floating-point tensor of shape (positions, d_model); it has: "
        f"{_names(arrays, listing)}; name the table with --key if it is one of these"
    )


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: 'an int', 'a str'."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _names(entries: dict[str, Any], details: dict[str, str] | None = None, most: int = 20) -> str:
    """Sorted names (with their details), at most ``most`` of them, then how many more there are."""
    names = sorted(entries)
    shown = [f"{name} ({details[name]})" if details else name for name in names[:most]]
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(shown) + more


def _check_stored(stored: _Stored, where: str) -> None:
    """Refuse, before reading it, an array that is not a table of real numbers or that memory cannot hold
    (as stored, and as the float64 copy identify compares)."""
    if stored.kind is None:
        raise ValueError(
            f"{where} holds {stored.dtype} values, not real numbers{stored.hint}; expected {_EXPECTED}"
        )
    shape = stored.shape
    if len(shape) < 2 or shape[-1] < 2 or math.prod(shape[:-1]) < 2:
        raise ValueError(
            f"{where} holds an array of shape {shape}; expected {_EXPECTED}, with at least 2 positions and "
            "d_model >= 2"
        )
    needed = math.prod(shape) * (stored.itemsize + 8)
    available = _validate.available_memory() if needed >= _CHECKED_BYTES else None
    if available is not None and needed > available:
        raise ValueError(
            f"{where} holds {stored.dtype} values of shape {shape}: reading and comparing them needs "
            f"{needed / 2**30:.1f} GiB, but only {available / 2**30:.1f} GiB of memory is available"
        )
