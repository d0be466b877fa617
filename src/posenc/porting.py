"""Porting tools: reorder a stored table's columns, and find out which variant a stored table is.

>>> import posenc
>>> stored = posenc.presets.get("fairseq", padding_idx=1).table(64, 32)
>>> match = identify(stored)[0]
>>> match.name, match.matches
('fairseq(padding_idx=1)', True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from . import _validate, core, grids, presets

__all__ = ["Match", "convert_layout", "identify", "load_table"]


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
        options: the core options (base, shift, scale, layout, odd), or the grid function's arguments.
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

    ``table`` is ``(rows, d_model)`` (leading axes of size 1 are dropped; an N-D grid is flattened to rows).
    The search fits the frequencies from the table itself (so any base works), tries every layout, odd-width
    rule and shift 0/1, the position of row 0, zero padding rows, and the named 2-D grids; each candidate is
    recomputed exactly and compared element by element. ``tolerance`` defaults to what float32 code of that
    length can be off by.
    """
    stored = np.asarray(table, dtype=np.float64)
    while stored.ndim > 2 and stored.shape[0] == 1:
        stored = stored[0]
    if stored.ndim > 2:
        stored = stored.reshape(-1, stored.shape[-1])
    if stored.ndim != 2 or stored.shape[0] < 2 or stored.shape[1] < 2:
        raise ValueError(f"table must have shape (rows >= 2, d_model >= 2); got shape {np.shape(table)}")
    if not np.isfinite(stored).all():
        raise ValueError("table holds NaN or inf values; it is not an encoding table")
    rows = stored.shape[0]
    limit = tolerance if tolerance is not None else 1e-5 + 16 * rows * 2.0**-24
    head = min(rows, 64)
    scored = []  # first on the head of the table, then the promising ones in full
    for candidate in _candidates(stored):
        error = _error(candidate[-1], stored, head)
        if error is not None:
            scored.append((error, candidate))
    scored.sort(key=lambda item: item[0])
    found: dict[tuple, Match] = {}
    for _, (name, options, start, padding, build) in scored[: max(12, 4 * candidates)]:
        error = _error(build, stored, rows)
        key = (name, tuple(sorted(options.items())), start, padding)
        found[key] = Match(name, options, start, padding, error, error <= limit)
    ranked = sorted(
        found.values(),
        key=lambda m: (
            not m.matches,
            0.0 if m.matches else m.max_error,
            m.name is None,
            _plainness(m),
            m.max_error,
        ),
    )
    return ranked[:candidates]


def _error(build: Callable[[int], np.ndarray], stored: np.ndarray, rows: int) -> float | None:
    """The largest difference between a candidate's first ``rows`` rows and the stored ones (None: n/a)."""
    try:
        values = build(rows)
    except (ValueError, TypeError):
        return None
    if values.shape != (rows, stored.shape[1]):
        return None
    return float(np.max(np.abs(values - stored[:rows])))


def _plainness(match: Match) -> float:
    """Prefer round numbers between equal fits (base 10000, shift 1 over base 10000.92, shift 0)."""
    base = match.options.get("base", 10000.0)
    mantissa = base / 10 ** math.floor(math.log10(base)) if base > 0 else 0
    return abs(mantissa - round(mantissa)) + abs(match.options.get("scale", 1.0) - 1)


def _candidates(stored: np.ndarray) -> Iterator[tuple[str | None, dict[str, Any], int, int | None, Callable]]:
    """(name, options, first position, padding row, build(rows) -> the candidate's first rows)."""
    rows, d_model = stored.shape
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
                    yield _one_dimensional(options, first, padding, d_model)
    for _, preset in _named_presets(padding):  # the presets themselves, for tables that are close
        for first in sorted(fitted_starts):
            yield _one_dimensional(preset.options, first, padding, d_model)
    yield from _grid_candidates(rows, d_model)


def _one_dimensional(
    options: dict[str, Any], start: int, padding: int | None, d_model: int
) -> tuple[str | None, dict[str, Any], int, int | None, Callable]:
    if d_model % 2 == 0:
        options = {**options, "odd": "zero"}  # the odd-width rule means nothing for an even width

    def build(rows: int) -> np.ndarray:
        return _with_zero_row(core.table(rows, d_model, start=start, dtype="float64", **options), padding)

    return _preset_name(options, padding, d_model), options, start, padding, build


def _with_zero_row(values: np.ndarray, padding: int | None) -> np.ndarray:
    if padding is not None and padding < len(values):
        values[padding] = 0
    return values


def _fit(stored: np.ndarray, layout: str, odd: str, zero_rows: np.ndarray) -> tuple[float, float, int] | None:
    """Fit ω_i = scale · r**i and the position of row 0 from the sine/cosine column pairs of ``layout``."""
    rows, d_model = stored.shape
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
    if value <= 0 or not math.isfinite(value):
        return value
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1.0, 0.5, 0.25, 0.1):
        snapped = round(value / (magnitude * step)) * magnitude * step
        if abs(snapped - value) <= 1e-4 * value:
            return float(snapped)
    return value


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


def _grid_candidates(rows: int, d_model: int) -> Iterator[tuple[str, dict[str, Any], int, None, Callable]]:
    for extra in (0, 1):
        side = math.isqrt(rows - extra)
        if side * side != rows - extra or side < 2:
            continue
        yield (
            "mae-2d",
            {"grid_size": side, "cls_token": bool(extra)},
            0,
            None,
            lambda n, s=side, e=extra: grids.mae_2d(d_model, s, cls_token=bool(e), dtype="float64")[:n],
        )
        for reverse in (False, True):
            for interleave in (False, True):
                if extra:
                    continue
                options = {
                    "feat_shape": (side, side),
                    "reverse_coord": reverse,
                    "interleave_sin_cos": interleave,
                }
                yield (
                    "timm-2d",
                    options,
                    0,
                    None,
                    lambda n, o=options: grids.timm_2d(dim=d_model, dtype="float64", **o)[:n],
                )
        if not extra:
            for base_size in sorted({16, side}):
                options = {"grid_size": side, "base_size": base_size}
                yield (
                    "diffusers-2d",
                    options,
                    0,
                    None,
                    lambda n, o=options: grids.diffusers_2d(d_model, dtype="float64", **o)[:n],
                )


def load_table(path: str | Path, *, key: str | None = None) -> np.ndarray:
    """A stored table from ``.npy``, ``.pt``/``.pth`` (a tensor or a state dict) or ``.safetensors``.

    In a state dict, ``key`` names the tensor; without it the single 2-D (or ``(1, L, D)``) floating tensor
    whose name mentions a position is taken, and a clear error lists the candidates otherwise.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no such file: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if suffix in (".pt", ".pth", ".bin"):
        try:
            import torch
        except ImportError:
            raise ImportError("reading .pt files needs PyTorch: pip install 'posenc[torch]'") from None
        loaded = torch.load(path, map_location="cpu", weights_only=True)
        tensors = _flatten(loaded) if not isinstance(loaded, torch.Tensor) else {"": loaded}
        tensors = {k: v.detach().float().numpy() for k, v in tensors.items() if isinstance(v, torch.Tensor)}
        return _pick(tensors, key, path)
    if suffix == ".safetensors":
        try:
            from safetensors import safe_open
        except ImportError:
            raise ImportError(
                "reading .safetensors files needs safetensors: pip install safetensors"
            ) from None
        tensors = {}
        with safe_open(path, framework="numpy") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                tensors[name] = handle.get_tensor(name)
        return _pick(tensors, key, path)
    raise ValueError(f"unknown file type {suffix!r} for {path}; use .npy, .pt/.pth or .safetensors")


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        result = {}
        for name, value in tree.items():
            result.update(_flatten(value, f"{prefix}{name}."))
        return result
    return {prefix[:-1]: tree}


def _pick(tensors: dict[str, np.ndarray], key: str | None, path: Path) -> np.ndarray:
    if key is not None:
        if key not in tensors:
            raise ValueError(f"{path} has no tensor {key!r}; it has: {', '.join(sorted(tensors)) or 'none'}")
        return tensors[key]
    tables = {
        name: value
        for name, value in tensors.items()
        if np.squeeze(value).ndim == 2 and np.issubdtype(np.asarray(value).dtype, np.floating)
    }
    named = {k: v for k, v in tables.items() if any(w in k.lower() for w in ("pos", "pe", "sinus", "timing"))}
    chosen = named or tables
    if len(chosen) != 1:
        raise ValueError(
            f"{path} holds {len(chosen)} candidate tables ({', '.join(sorted(chosen)) or 'none'}); "
            "name one with --key"
        )
    return next(iter(chosen.values()))
