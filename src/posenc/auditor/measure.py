"""The measurement: the target against the exact values, band by band of positions.

Bands are log-spaced, with edges 0, 2¹⁰, 2¹², 2¹⁵, 2¹⁷, 2²⁰, 2²², 2²⁴, 2²⁶, 2²⁸, 2³¹ (so "up to 4k / 32k /
131k / 1M" are unions of bands), cut to the positions asked for and to the target's range. A band of at
most ``samples`` positions is measured whole; a longer one at ``samples`` positions: its first and last
and the rest drawn uniformly (a fixed seed), so a 2³¹ range costs ~10 · samples rows. A stored table (its
rows in memory) of at most :data:`WHOLE_TABLE_VALUES` values in the span is measured at every row whatever
``samples`` says: one wrong value among 100,000 rows would otherwise pass unseen, every time.

Per band: the largest absolute error |target − exact| and the largest error in ulps of the target's dtype
(ulp(x) = 2^(e − p) for the exact x ∈ [2^(e−1), 2^e), p the dtype's precision, subnormals flat), the distinct
rows among the sampled ones (128-bit hashes of their bits, :mod:`posenc.analysis.hashes`) against the exact
values', the rows holding NaN or inf, and the error a call raised (a length cliff). Over all sampled
positions: the first repeated row, and for each of :data:`THRESHOLDS` the first position whose error passes
it. That position is refined: the target is a function of position, so every position between the last
sampled one under the threshold and the first sampled one over it is evaluated (in chunks, stopping at the
first over; at most :data:`REFINE_ROWS` rows per threshold, else the sampled position is kept and marked
unrefined). When the first sampled position over is within 2¹⁵ of the start, every position from the start
is evaluated instead: the error is not monotonic in position (it follows the rounding of each angle), so an
unsampled position before the last sampled one under the threshold may pass it.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from ..analysis.hashes import earliest_equal, row_hashes
from .targets import Target
from .variant import Variant

__all__ = [
    "EDGES",
    "REFINE_ROWS",
    "THRESHOLDS",
    "WHOLE_TABLE_VALUES",
    "Band",
    "Measurement",
    "measure",
    "sample_positions",
    "ulps",
]

EDGES = (0, 1 << 10, 1 << 12, 1 << 15, 1 << 17, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 31)
THRESHOLDS = (1e-3, 1e-2, 0.1)
#: The most values (rows × columns in the span) of a stored table measured at every row (16M: ~0.5 GB of
#: float64 at work); a larger one is sampled as a function is.
WHOLE_TABLE_VALUES = 1 << 24
#: Positions evaluated at most, per threshold, to refine the first position past it (module docstring).
REFINE_ROWS = 1 << 16
#: A first sampled position at most this far from the start is refined from the start, not only in its gap.
_WHOLE = 1 << 15
#: Rows evaluated per call while refining, at most (and at most 2²⁴ values).
_CHUNK = 2048
#: (precision p, frexp exponent of the smallest normal) per dtype.
_FORMAT = {"float64": (53, -1021), "float32": (24, -125), "float16": (11, -13), "bfloat16": (8, -125)}


@dataclasses.dataclass
class Band:
    """One band of positions ``lo .. hi - 1``: ``sampled`` of them measured."""

    lo: int
    hi: int
    sampled: int
    max_abs: float = 0.0
    max_ulp: float = 0.0
    worst_position: int | None = None
    distinct: int = 0
    exact_distinct: int = 0
    nan_rows: int = 0
    raised: str | None = None
    #: the first sampled position the call raised at (the rows before it, if any, are measured)
    raises_from: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Measurement:
    """All bands, and over every sampled position (sorted): ``positions``, the largest absolute error of
    each row (``row_errors``; inf for a row holding NaN/inf), ``first_over`` {threshold: position or None},
    ``first_repeat`` (position, earlier position) or None, ``exact_repeat`` likewise for posenc's values;
    ``first_over_refined`` {threshold: whether every position between the last sampled one under it and
    ``first_over`` was checked, so ``first_over`` is the true first position past it there};
    ``first_over_from`` {threshold: the position that check began at, where it is not the first position
    measured (then a position before it, unsampled, may pass the threshold too)}."""

    bands: list[Band]
    positions: np.ndarray
    row_errors: np.ndarray
    first_over: dict[float, int | None]
    first_repeat: tuple[int, int] | None
    exact_repeat: tuple[int, int] | None
    values: np.ndarray
    first_over_refined: dict[float, bool] = dataclasses.field(default_factory=dict)
    first_over_from: dict[float, int] = dataclasses.field(default_factory=dict)


def ulps(difference: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """``difference`` in ulps of ``dtype`` at the exact values (elementwise)."""
    precision, lowest = _FORMAT[dtype]
    _, exponent = np.frexp(exact)
    exponent = np.where(exact == 0, lowest, np.maximum(exponent, lowest))
    return difference / np.ldexp(1.0, exponent - precision)


def sample_positions(lo: int, hi: int, samples: int, seed: int = 0) -> np.ndarray:
    """Positions of band ``lo .. hi - 1``, sorted: all of them, or exactly ``samples`` distinct ones (the
    first, the last and ``samples - 2`` drawn uniformly without replacement from those between)."""
    if hi - lo <= samples:
        return np.arange(lo, hi, dtype=np.int64)
    rng = np.random.default_rng(seed + lo)
    drawn = lo + 1 + rng.choice(hi - lo - 2, size=samples - 2, replace=False).astype(np.int64)
    return np.sort(np.concatenate([np.array([lo, hi - 1], np.int64), drawn]))


def measure(target: Target, variant: Variant, dtype: str, span: tuple[int, int], samples: int) -> Measurement:
    """Sample ``target`` over ``span`` (positions ``a .. b - 1``) band by band; compare with ``variant``."""
    width = target.width or 0
    if target.kind == "table" and (span[1] - span[0]) * max(width, 1) <= WHOLE_TABLE_VALUES:
        samples = max(samples, span[1] - span[0])  # every row of a table held in memory
    bands, kept_p, kept_v, kept_e, kept_h = [], [], [], [], []
    for lo, hi in itertools.pairwise(EDGES):
        lo, hi = max(lo, span[0]), min(hi, span[1])
        if lo >= hi:
            continue
        positions = sample_positions(lo, hi, samples)
        band = Band(lo, hi, len(positions))
        bands.append(band)
        exact = variant.exact(positions, dtype, width)
        try:
            values = target.sample(positions)
        except Exception as error:  # a length cliff that raises: kept as the band's evidence
            band.raised = f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"
            kept = target.rows_before_raise(positions)  # the band's rows before the call raises
            band.raises_from = int(positions[kept])
            if not kept:
                continue
            positions, band.sampled = positions[:kept], kept
            values = target.sample(positions)
            exact = exact[:kept]
        if values.shape != exact.shape:
            raise ValueError(
                f"the target gives rows of shape {values.shape[1:]} where the variant has {exact.shape[1:]}"
            )
        finite, difference, row_error = _errors(values, exact)
        band.nan_rows = int((~finite).sum())
        if finite.any():
            band.max_abs = float(row_error[finite].max())
            band.max_ulp = float(ulps(difference[finite], exact[finite], dtype).max(initial=0.0))
            band.worst_position = int(positions[finite][int(np.argmax(row_error[finite]))])
        band.distinct = earliest_equal(row_hashes(np.nan_to_num(values)))[1]
        hashes = row_hashes(exact)
        band.exact_distinct = earliest_equal(hashes)[1]
        kept_h.append(hashes)
        kept_p.append(positions)
        kept_v.append(values)
        kept_e.append(row_error)
    positions = np.concatenate(kept_p) if kept_p else np.zeros(0, np.int64)
    values = np.concatenate(kept_v) if kept_v else np.zeros((0, width))
    errors = np.concatenate(kept_e) if kept_e else np.zeros(0)
    exact_hashes = np.concatenate(kept_h) if kept_h else np.zeros((0, 2), np.uint64)
    first_over, refined, checked_from = {}, {}, {}
    for threshold in THRESHOLDS:
        over = np.flatnonzero(errors > threshold)
        if not len(over):
            first_over[threshold], refined[threshold] = None, True
            continue
        first = int(positions[over[0]])
        # every position from the start when that is short (the error is not monotonic), else the gap
        after = span[0] if over[0] == 0 or first - span[0] <= _WHOLE else int(positions[over[0] - 1]) + 1
        first_over[threshold], refined[threshold] = _refine(
            target, variant, dtype, width, threshold, after, first
        )
        if refined[threshold] and after > span[0]:
            checked_from[threshold] = after
    repeat, exact_repeat = _first_repeat(positions, values), _first_repeat(positions, None, exact_hashes)
    return Measurement(
        bands, positions, errors, first_over, repeat, exact_repeat, values, refined, checked_from
    )


def _errors(values: np.ndarray, exact: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows all finite, |values − exact|, and each row's largest error (inf for a row with NaN/inf)."""
    finite = np.isfinite(values).all(axis=1)
    with np.errstate(invalid="ignore"):
        difference = np.abs(values - exact)
    row_error = np.where(finite, np.max(difference, axis=1, initial=0.0), np.inf)
    return finite, difference, row_error


def _refine(
    target: Target, variant: Variant, dtype: str, width: int, threshold: float, lo: int, over: int
) -> tuple[int, bool]:
    """The first position of ``lo .. over`` whose error passes ``threshold`` (``over``, sampled, does),
    evaluating every position from ``lo`` in chunks, and whether the whole gap could be checked (at most
    :data:`REFINE_ROWS` positions; a call that raises leaves the sampled position, unrefined)."""
    if over - lo > REFINE_ROWS:
        return over, False
    chunk = max(1, min(_CHUNK, (1 << 24) // max(width, 1)))
    for start in range(lo, over, chunk):
        positions = np.arange(start, min(start + chunk, over), dtype=np.int64)
        try:
            values = target.sample(positions)
        except Exception:  # a call that raises inside the gap: the sampled position stands, unrefined
            return over, False
        _, _, row_error = _errors(values, variant.exact(positions, dtype, width))
        past = np.flatnonzero(row_error > threshold)
        if len(past):
            return int(positions[past[0]]), True
    return over, True


def _first_repeat(
    positions: np.ndarray, rows: np.ndarray | None, hashes: np.ndarray | None = None
) -> tuple[int, int] | None:
    """The first sampled position whose row equals an earlier one's (bits, ±0 alike), and that earlier one
    (from the rows, or from their ``hashes``)."""
    if hashes is None and (rows is None or not rows.size):
        return None
    hashes = row_hashes(np.nan_to_num(rows)) if hashes is None else hashes
    if not len(hashes):
        return None
    earliest, _ = earliest_equal(hashes)
    repeats = np.flatnonzero(earliest != np.arange(len(hashes)))
    if not len(repeats):
        return None
    return int(positions[repeats[0]]), int(positions[earliest[repeats[0]]])
