"""The proofs behind :func:`posenc.torch.patch`: whether an original positional component computes posenc's
values up to its own rounding error. Pure functions over tensors, arrays, rope parameters and identified
table variants; they know no library's classes. :mod:`posenc.torch.patching` finds the components, reads
their buffers, runs their forwards and hands the values here.

Every allowance is derived from the original's own error at the compared values, and none reaches :data:`CAP`
= 2⁻⁴ of the values' amplitude (a sixteenth of a radian of rotation: a component whose own error is larger
there cannot be told from a wrong one, so such values prove nothing and are not compared).

* rotary: (1) its ``attention_scaling`` equals the config's within float32's rounding
  (:func:`scaling_matches`); (2) each frequency buffer, read in float64, equals posenc's frequencies within
  its storage type's rounding of each (half an ulp) plus what float32 code forming them errs
  (:data:`FREQUENCY_ULPS` ulps of float32: :func:`check_frequencies`); (3) its cos/sin, on every position
  below :data:`PROBE`, a spread up to ``max_position_embeddings`` and a spread past it
  (:func:`far_positions`), equal posenc's within A·(p·|Δθ_i| +
  4·p·θ_i·2⁻²⁴ + 8·2⁻²⁴) at position p and frequency θ_i (:func:`check_cos_sin`): the gap of its frequencies
  Δθ_i (as measured in (2); for the types whose frequencies change with the length, the bound of (2)),
  float32's angle p·θ, and the rounding of cos/sin and of A;
* tables: each value within 2⁻²⁴·(4 + 4·p·ω·(1 + |ln(ω/s)|)) of the exact value at its position p and
  frequency ω (scale s), plus the storage type's rounding (:func:`beyond`): float32 code rounds ω =
  s·base^(−x), which costs |x| = |ln(ω/s)| float32 ulps of ω, and the angle p·ω (the libraries' own tables
  measure at most 1.4 times the part that grows with p·ω; 2⁻⁵³ instead of 2⁻²⁴ for float64 tables). 2-D/3-D
  grids, whose frequencies are at most 1, use their largest position for p at every value;
* timesteps: diffusers' embedding of t = 0..1000 (divided by its scale, where it scales them) within
  float32's rounding of its angles, up to 1000 (:func:`timesteps_probe`);
* the rotary apply: a function ``(q, k, cos, sin) -> (q, k)`` run on float32 probes must give posenc's bits
  (:func:`probe_apply`: 0 is the largest difference).

>>> import numpy as np, torch
>>> from posenc import rope
>>> params = rope.config(head_dim=8, base=10000.0)
>>> stored = torch.from_numpy(rope.inv_freq(params)).float()  # float32 code's frequencies
>>> check = check_frequencies(stored.double().numpy(), torch.float32, frequency_sets(params))
>>> check.within, check.relative < 2**-24
(True, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from .. import layouts, presets, rope, validation
from ..core import frequencies
from ..porting.verdict import GRIDS, grid_values
from .rotary import cos_sin, rotate

__all__ = [
    "BLOCK",
    "CAP",
    "FAR",
    "FREQUENCY_ULPS",
    "PROBE",
    "UNIT",
    "CosSinCheck",
    "FrequencyCheck",
    "beyond",
    "check_cos_sin",
    "check_frequencies",
    "exact_rows",
    "far_positions",
    "frequency_bound",
    "frequency_sets",
    "grid_reach",
    "grown_lengths",
    "grown_positions",
    "half_ulp",
    "per_column",
    "probe_apply",
    "probe_positions",
    "rotary_reach",
    "scaling_matches",
    "table_bound",
    "table_precision",
    "table_search_tolerance",
    "table_tolerance",
    "timesteps_probe",
    "zero_rows",
]

#: The largest allowance of any proof, as a fraction of the values' amplitude: a sixteenth of a radian of
#: rotation. Float32 code stays within it up to angles of ~10⁵-10⁶ rad; a value whose own error may be
#: larger cannot tell a right formula from a wrong one, so it is not compared (module docstring).
CAP = 2.0**-4
#: float32's unit roundoff, the relative error of one rounding to float32.
UNIT = 2.0**-24
#: What float32 code forming RoPE frequencies errs, in float32 ulps (relative 2⁻²⁴): the exponent rounded
#: to float32 costs ln(base)/2 ≤ 10.4 ulps for base ≤ 1e9, pow/exp and the reciprocal ~2, Llama 3's and
#: YaRN's blends a few more (transformers' own: 1.1 to 5.4 ulps, measured); 32 leaves a margin. A frequency
#: zeroed, halved or off by more than 2·10⁻⁶ (relative) is not the config's.
FREQUENCY_ULPS = 32
#: Positions below this are all probed (rotary); a spread of positions above, up to the config's maximum.
PROBE = 256
#: Past a config's ``max_position_embeddings`` L, rotary values are also compared up to FAR·L (at least 2²⁰).
FAR = 4
#: Rows of a table compared at a time (what the proof holds beyond the table: a few such blocks).
BLOCK = 1024
#: Significant bits of the 16-bit floating types a frequency buffer or a table may be stored in.
_SIGNIFICAND = {torch.bfloat16: 8, torch.float16: 11}


# --- rotary ----------------------------------------------------------------------------------------------


def scaling_matches(value: float, want: float) -> bool:
    """Whether a module's ``attention_scaling`` ``value`` is ``want`` (its config's) within float32's
    rounding of it (2⁻²⁴ relative: below what float32 cos/sin can hold)."""
    return abs(value - want) <= UNIT * abs(want)


def frequency_sets(params: rope.RopeParameters, *, length: int | None = None) -> list[np.ndarray]:
    """The frequencies a module of ``params`` may hold: its config's at the start, and for the types that
    change with the length those of the lengths it may have run at (the second set past the type's switch;
    the set of ``length``, the length it last ran at, for a type whose frequencies grow with it).

    >>> [len(s) for s in frequency_sets(rope.config(head_dim=8, base=100.0))]
    [4]
    """
    sets = [rope.inv_freq(params)]
    kind = params.kind
    if kind.switch is not None:  # the second set, past the switch (LongRoPE's long factors)
        sets.append(rope.inv_freq(params, seq_len=kind.switch(params) + 1))
    if kind.grows_with_length and isinstance(length, int) and not isinstance(length, bool) and length > 0:
        sets.append(rope.inv_freq(params, seq_len=length))
    return sets


def half_ulp(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Half an ulp of ``dtype`` at each of ``values`` (subnormals: half the smallest step).

    >>> float(half_ulp(np.array([1.0]), torch.bfloat16)[0]) == 2.0**-8
    True
    """
    info = torch.finfo(dtype)
    return np.maximum(np.abs(values), info.tiny) * info.eps / 2


def frequency_bound(theta: np.ndarray, dtype: torch.dtype, unit: float = UNIT) -> np.ndarray:
    """What a frequency θ stored in ``dtype`` may be off by when float32 code formed it (``unit``: the unit
    roundoff of the code's arithmetic, 2⁻⁵³ for float64 code): half an ulp of its storage plus
    :data:`FREQUENCY_ULPS` ulps of that arithmetic."""
    return half_ulp(theta, dtype) + FREQUENCY_ULPS * unit * theta


@dataclasses.dataclass(frozen=True)
class FrequencyCheck:
    """A frequency buffer against the nearest of the sets it may hold: the largest relative difference,
    |stored − exact| per frequency (``gap``), whether every one is within :func:`frequency_bound`, and the
    largest relative allowance."""

    relative: float
    gap: np.ndarray
    within: bool
    allowed: float


def check_frequencies(
    stored: np.ndarray, dtype: torch.dtype, sets: Sequence[np.ndarray]
) -> FrequencyCheck | None:
    """``stored`` (a frequency buffer of ``dtype``, read in float64, flat) against the nearest of ``sets``
    (:func:`frequency_sets`) of its size; None where no set has its size."""
    nearest = None
    for want in sets:
        if want.shape != stored.shape:
            continue
        gap = np.abs(stored - want)
        allowed = frequency_bound(want, dtype)
        finite = np.isfinite(stored).all()
        relative = float(np.max(_per(gap, want, np.inf), initial=0.0)) if finite else math.inf
        if nearest is None or relative < nearest.relative:
            within = bool((gap <= allowed).all())
            nearest = FrequencyCheck(
                relative, gap, within, float(np.max(_per(allowed, want, 0.0), initial=0.0))
            )
    return nearest


def _per(part: np.ndarray, whole: np.ndarray, of_zero: float) -> np.ndarray:
    """``part / whole`` elementwise; where ``whole`` is 0 (a frequency a partial rotary leaves at zero):
    0 for a zero ``part``, else ``of_zero``."""
    nonzero = whole != 0
    ratio = np.divide(part, whole, out=np.zeros_like(part, dtype=np.float64), where=nonzero)
    return np.where(nonzero, ratio, np.where(part > 0, of_zero, 0.0))


def probe_positions(limit: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions a rotary module is compared at, for a config of ``limit`` (``max_position_embeddings``):
    every one below :data:`PROBE` (the short rule of the length-dependent types), then those with a spread
    of 64 up to ``limit`` − 1 (past it: :func:`far_positions`)."""
    spread = np.unique(np.geomspace(PROBE, max(limit - 1, PROBE), 64).astype(np.int64))
    short = np.arange(min(PROBE, limit))
    return short, np.concatenate([short, spread[spread < limit]])


def far_positions(limit: int) -> np.ndarray:
    """Positions past a config's ``limit`` (``max_position_embeddings``) a rotary module is also compared at,
    in one call (a length-dependent type runs at the length of the last): ``limit``, ``limit`` + 1 and a
    spread of 16 up to max(:data:`FAR` × ``limit``, 2²⁰) − 1. A module may compute another function past
    the length it was trained to (a clamp, a scaling its config no longer names) that no position below it
    shows; only the values its own float32 error leaves comparable (the lower frequencies) are compared
    there (:func:`check_cos_sin` with ``partial``).

    >>> far_positions(2048)[:3].tolist(), int(far_positions(2048)[-1])
    ([2048, 2049, 2050], 1048575)
    """
    top = max(FAR * limit, 2**20) - 1
    spread = np.geomspace(limit + 2, top, 15).astype(np.int64)
    return np.unique(np.concatenate([[limit, limit + 1], spread, [top]]))


def grown_lengths(limit: int) -> tuple[int, ...]:
    """The lengths past a config's ``limit`` a rotary whose frequencies grow with the length (Hugging Face's
    "dynamic") is also compared at, each in a call of its own: a law that is right at 2²⁰ may be wrong
    between (only lengths up to 1024 scaled otherwise went unseen).

    >>> grown_lengths(256)
    (384, 512, 1024, 4096)
    """
    return (limit + limit // 2, 2 * limit, 4 * limit, 16 * limit)


def grown_positions(limit: int, length: int) -> np.ndarray:
    """The positions of a call that grows a rotary to ``length``: 0, 1, 2, around ``limit`` and a spread of
    16 up to ``length`` − 1 (its last, the one that sets the length).

    >>> grown_positions(256, 1024)[[0, -1]].tolist()
    [0, 1023]
    """
    spread = np.geomspace(3, length - 1, 16).astype(np.int64)
    return np.unique(np.concatenate([[0, 1, 2, limit - 1, limit], spread, [length - 1]]))


def rotary_reach(
    params: rope.RopeParameters, sets: Sequence[np.ndarray], gap: np.ndarray | None, storage: torch.dtype
) -> tuple[np.ndarray, np.ndarray]:
    """(θ, Δθ) per frequency for :func:`check_cos_sin`: the largest frequency of ``sets`` and the measured
    gap of the module's frequencies, or (where there is none, or the frequencies change with the length: the
    set of another length) the bound of its ``storage`` type and float32 code."""
    theta = np.max(np.stack(list(sets)), axis=0)
    if gap is None or params.kind.depends_on_length:
        bound = frequency_bound(theta, storage)
        gap = bound if gap is None or gap.shape != theta.shape else np.maximum(gap, bound)
    return theta, gap


def per_column(per_frequency: np.ndarray, width: int, layout: str = "half") -> np.ndarray:
    """A per-frequency quantity at each of ``width`` cos/sin columns: [θ | θ] (Hugging Face's rotate-half
    cos/sin, posenc's "half" layout), [θ0, θ0, θ1, θ1, ...] (``layout="interleaved"``), θ alone, else the
    largest at every column.

    >>> theta = np.array([1.0, 0.5])
    >>> per_column(theta, 4).tolist(), per_column(theta, 4, "interleaved").tolist()
    ([1.0, 0.5, 1.0, 0.5], [1.0, 1.0, 0.5, 0.5])
    """
    n = per_frequency.shape[0]
    if width == 2 * n:
        if layout == "interleaved":
            return np.repeat(per_frequency, 2)
        return np.concatenate([per_frequency, per_frequency])
    if width == n:
        return per_frequency
    return np.full(width, float(np.max(per_frequency, initial=0.0)))


@dataclasses.dataclass(frozen=True)
class CosSinCheck:
    """One cos or sin of an original against posenc's: ``difference`` (the largest |original − posenc| over
    the compared values), ``allowed`` (the largest allowance there), ``compared`` of ``total`` values,
    ``over`` (the value furthest beyond its allowance: (row of the positions, column, difference,
    allowance), or None) and ``provable`` (False where some frequency is compared at no position but 0:
    nothing proven)."""

    difference: float
    allowed: float
    compared: int
    total: int
    over: tuple[int, int, float, float] | None
    provable: bool
    #: at the values not compared (their own error may exceed the cap): the largest difference, the row of
    #: the positions it is at (-1: none), and the largest allowance there
    elsewhere: float = 0.0
    elsewhere_row: int = -1
    elsewhere_allowed: float = 0.0


def check_cos_sin(
    mine: torch.Tensor,
    ours: torch.Tensor,
    positions: np.ndarray,
    theta: np.ndarray,
    gap: np.ndarray,
    amplitude: float,
    layout: str = "half",
    unit: float = UNIT,
    partial: bool = False,
) -> CosSinCheck:
    """The original's cos (or sin) ``mine`` against posenc's ``ours`` at ``positions`` (their last two axes:
    positions × columns), each value within A·(p·(Δθ_i + 4·θ_i·u) + 8·u) (module docstring) of amplitude A,
    u the ``unit`` roundoff of the code's arithmetic (float32's 2⁻²⁴ by default); values whose allowance
    exceeds :data:`CAP`·A are not compared. Unless ``partial`` (positions checked beside others that prove
    every frequency: :func:`far_positions`), a frequency compared at no position but 0 proves nothing
    (``provable`` False)."""
    a, b = (t.detach().to("cpu", torch.float64) for t in (mine, ours))
    a, b = torch.broadcast_tensors(a, b)
    difference = (a - b).abs().numpy()
    width = difference.shape[-1]
    column_theta, column_gap = per_column(theta, width, layout), per_column(gap, width, layout)
    p = np.abs(positions.astype(np.float64))[:, None]
    allowance = amplitude * (p * (column_gap + 4 * unit * column_theta) + 8 * unit)
    within_cap = allowance <= CAP * amplitude
    if not partial and not within_cap[p[:, 0] > 0].any(axis=0).all():
        return CosSinCheck(math.nan, math.nan, 0, 0, None, False)
    mask = np.broadcast_to(within_cap, difference.shape)
    beyond_allowance = (difference > allowance) & mask
    if beyond_allowance.any():
        index = np.unravel_index(
            int(np.argmax(np.where(beyond_allowance, difference - allowance, -np.inf))), difference.shape
        )
        row, column = int(index[-2]), int(index[-1])
        over = (row, column, float(difference[index]), float(allowance[row, column]))
        return CosSinCheck(math.nan, math.nan, 0, 0, over, True)
    worst = float(np.max(difference, where=mask, initial=0.0))
    allowances = np.broadcast_to(allowance, difference.shape)
    allowed = float(np.max(allowances, where=mask, initial=0.0))
    rest = np.where(mask, -np.inf, difference)
    index = np.unravel_index(int(np.argmax(rest)), difference.shape)
    elsewhere = max(float(rest[index]), 0.0)
    row = int(index[-2]) if np.isfinite(rest[index]) else -1
    beyond_cap = float(np.max(allowances, where=~mask, initial=0.0))
    return CosSinCheck(worst, allowed, int(mask.sum()), mask.size, None, True, elsewhere, row, beyond_cap)


def probe_apply(function: Callable[..., Any], params: rope.RopeParameters) -> float:
    """The largest |function(q, k, cos, sin) − posenc's apply| on float32 probes (0: the same bits; inf: not
    a ``(q, k, cos, sin) -> (q, k)`` of the probes' shapes and dtypes), for Hugging Face's half layout."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, params.head_dim, generator=generator) * 4
    k = torch.randn(2, 1, 5, params.head_dim, generator=generator) * 4
    ids = torch.tensor([[0, 1, 7, 100, 4095], [3, 2, 1, 0, 65537]])
    cos, sin = cos_sin(ids.expand(3, -1, -1) if params.mrope_section else ids, params, dtype=torch.float32)
    try:
        with torch.no_grad():
            theirs = function(q, k, cos, sin)
    except Exception:  # not (q, k, cos, sin) -> (q, k)
        return math.inf
    ours = rotate(q, k, cos, sin)
    try:
        pairs = list(zip(theirs, ours, strict=True))
    except (TypeError, ValueError):
        return math.inf
    if any(not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype for a, b in pairs):
        return math.inf
    return max(float((a.double() - b.double()).abs().max()) for a, b in pairs)


# --- timesteps -------------------------------------------------------------------------------------------


def timesteps_probe(scale: float) -> tuple[torch.Tensor, float]:
    """The timesteps a diffusers ``Timesteps`` of ``scale`` is compared at, and what its float32 embedding
    errs there: t = 0..1000, divided by ``scale`` where it is above 1 (a model that scales its timesteps,
    Qwen-Image's 1000, is fed fractions of one: its angles reach 1000, as everyone's); the rounding of
    angles up to 1000·max(``scale``, 1)·(t's largest) (of t·ω, of the scaling and of ω) and of sin/cos; at
    most :data:`CAP`."""
    t = torch.arange(0, 1001, dtype=torch.float32)
    if scale > 1:
        t = t / scale
    reach = 1000 * max(abs(scale) * float(t[-1]) / 1000, 1.0)
    return t, min(4 * reach * UNIT + 4 * UNIT, CAP)


# --- tables ----------------------------------------------------------------------------------------------


def table_precision(dtype: torch.dtype) -> tuple[float, float]:
    """(unit, storage) of a table of ``dtype``: the precision of the code that built it (2⁻⁵³ for float64,
    else float32's 2⁻²⁴) and the relative rounding of a 16-bit storage type beyond it (else 0)."""
    bits = _SIGNIFICAND.get(dtype)
    storage = 2.0**-bits if bits else 0.0  # a value rounded once more to a 16-bit type (u: ≥ half an ulp)
    return (2.0**-53 if dtype == torch.float64 else UNIT), storage


def table_search_tolerance(count: int, storage: float) -> float:
    """The tolerance of :func:`posenc.porting.identify`'s search over a table of ``count`` rows: which
    variants to try. Whether the table is one is decided value by value (:func:`beyond`)."""
    return min(1e-5 + 16 * count * UNIT + storage, CAP)


def zero_rows(rows: np.ndarray) -> int:
    """How many rows at the start of ``rows`` are zeros (+0 and -0) only.

    >>> zero_rows(np.array([[0.0, -0.0], [0.0, 1.0]]))
    1
    """
    nonzero = np.flatnonzero(np.any(rows != 0, axis=1))
    return int(nonzero[0]) if len(nonzero) else len(rows)


def exact_rows(best: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """posenc's exact rows of an identified variant ``best`` (a :func:`posenc.porting.identify` match) in
    ``dtype`` (each value rounded once), as many as ``shape`` has."""
    count, width = shape
    name = next((n for n in (best.name or "").split(" = ") if n in GRIDS), None)
    if name is not None:  # a named grid: built by its function of posenc.grids, d_model by keyword or first
        return grid_values(name, width, best.options, validation.dtype(dtype)).reshape(count, width)
    preset = presets.Preset("patch", **best.options, padding_idx=best.padding_idx)
    return preset.table(count, width, start=best.start, dtype=validation.dtype(dtype))


def beyond(
    best: Any, stored: np.ndarray, unit: float, storage: float
) -> tuple[tuple[int, int], float, float] | None:
    """The value of ``stored`` furthest beyond what the code that builds ``best`` errs there, as (row,
    column), its difference from posenc's exact value and its allowance: ``unit`` · (4 + 4·|p|·ω·(1 +
    |ln(ω/s)|)) + ``storage`` (module docstring); None where every value is within. Values whose allowance
    passes :data:`CAP` are not compared. Block by block: a few rows' worth of memory beyond the tables."""
    want = exact_rows(best, stored.shape, "float64")
    per_row, per_col = table_bound(best, stored.shape)
    worst, excess = None, 0.0
    for start in range(0, len(stored), BLOCK):
        block = slice(start, start + BLOCK)
        allowance = unit * (4 + 4 * per_row[block, None] * per_col) + storage
        difference = np.abs(want[block] - stored[block])
        over = np.where((difference > allowance) & (allowance <= CAP), difference - allowance, 0.0)
        row, column = np.unravel_index(int(np.argmax(over)), over.shape)
        if over[row, column] > excess:
            excess = float(over[row, column])
            worst = (
                (start + int(row), int(column)),
                float(difference[row, column]),
                float(allowance[row, column]),
            )
    return worst


def table_tolerance(best: Any, shape: tuple[int, int], unit: float, storage: float) -> float:
    """The largest allowance of :func:`beyond` over a table of ``shape``, at most :data:`CAP`."""
    per_row, per_col = table_bound(best, shape)
    reach = float(np.max(per_row, initial=0.0)) * float(np.max(per_col, initial=0.0))
    return min(unit * (4 + 4 * reach) + storage, CAP)


def table_bound(best: Any, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(per row, per column) such that the angle term of the allowance at (r, c) is their product: |p_r| and
    ω_c·(1 + |ln(ω_c/s)|) for a 1-D variant (float32 code rounds ω = s·base^(−x) to |x| = |ln(ω/s)| ulps of
    ω, then the angle p·ω: module docstring); a 2-D/3-D grid (frequencies ≤ 1, ω·(1 + |ln ω|) ≤ 1) its
    largest position at every row, and 1 at every column."""
    count, width = shape
    name = next((n for n in (best.name or "").split(" = ") if n in GRIDS), None)
    if name is not None:
        return np.full(count, grid_reach(best.options, count)), np.ones(width)
    options = best.options
    layout, odd = options.get("layout", "interleaved"), options.get("odd", "zero")
    scale = abs(float(options.get("scale", 1.0)))
    wide = width + 1 if width % 2 and odd in ("literal", "drop") else width
    kept = {k: options[k] for k in ("base", "shift", "scale", "odd") if k in options}
    omega = np.abs(frequencies(wide - wide % 2, **kept))
    column = np.zeros(wide)
    for columns in layouts.pair_columns(layout, len(omega)):
        column[columns] = omega
    column = column[:width]
    exponent = np.abs(np.log(np.where(column > 0, column, scale) / scale))
    return np.abs(best.start + np.arange(count, dtype=np.float64)), column * (1 + exponent)


def grid_reach(options: dict[str, Any], rows: int) -> float:
    """The largest position of an identified grid (its options: sizes, ``base_size``, interpolation scales),
    at most ``rows``·(base_size / the smallest side)/(the smallest scale) and at least 1.

    >>> grid_reach({"grid_size": 14}, 196)
    14.0
    """
    sizes = []
    for key in ("grid_size", "feat_shape", "shape", "spatial_size", "temporal_size"):
        value = options.get(key)
        if value is not None:
            sizes += list(value) if isinstance(value, (tuple, list)) else [value]
    sizes = [float(s) for s in sizes if isinstance(s, (int, float)) and s > 0] or [float(rows)]
    stretch = float(options.get("base_size", 0) or 0) / min(sizes)
    scales = [float(v) for k, v in options.items() if k.endswith("interpolation_scale") and v and v > 0]
    return max(sizes) * max(1.0, stretch) / min([1.0, *scales])
