"""The measurement: the target against the exact values, band by band of positions.

Bands are log-spaced, with edges 0, 2¹⁰, 2¹², 2¹⁵, 2¹⁷, 2²⁰, 2²², 2²⁴, 2²⁶, 2²⁸, 2³¹ (so "up to 4k / 32k /
131k / 1M" are unions of bands), cut to the positions asked for and to the target's range. A band of at
most ``samples`` positions is measured whole; a longer one at ``samples`` positions: its first and last
and the rest drawn uniformly (a fixed seed), so a 2³¹ range costs ~10 · samples rows.

Per band: the largest absolute error |target − exact| and the largest error in ulps of the target's dtype
(ulp(x) = 2^(e − p) for the exact x ∈ [2^(e−1), 2^e), p the dtype's precision, subnormals flat), the distinct
rows among the sampled ones (128-bit hashes of their bits, :mod:`posenc.see.hashes`) against the exact
values', the rows holding NaN or inf, and the error a call raised (a length cliff). Over all sampled
positions: the first whose error passes each of :data:`THRESHOLDS`, and the first repeated row.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from ..see.hashes import earliest_equal, row_hashes
from .targets import Target
from .variant import Variant

__all__ = ["EDGES", "THRESHOLDS", "Band", "Measurement", "measure", "ulps"]

EDGES = (0, 1 << 10, 1 << 12, 1 << 15, 1 << 17, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 31)
THRESHOLDS = (1e-3, 1e-2, 0.1)
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

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Measurement:
    """All bands, and over every sampled position (sorted): ``positions``, the largest absolute error of
    each row (``row_errors``; inf for a row holding NaN/inf), ``first_over`` {threshold: position or None},
    ``first_repeat`` (position, earlier position) or None, ``exact_repeat`` likewise for posenc's values."""

    bands: list[Band]
    positions: np.ndarray
    row_errors: np.ndarray
    first_over: dict[float, int | None]
    first_repeat: tuple[int, int] | None
    exact_repeat: tuple[int, int] | None
    values: np.ndarray


def ulps(difference: np.ndarray, exact: np.ndarray, dtype: str) -> np.ndarray:
    """``difference`` in ulps of ``dtype`` at the exact values (elementwise)."""
    precision, lowest = _FORMAT[dtype]
    _, exponent = np.frexp(exact)
    exponent = np.where(exact == 0, lowest, np.maximum(exponent, lowest))
    return difference / np.ldexp(1.0, exponent - precision)


def sample_positions(lo: int, hi: int, samples: int, seed: int = 0) -> np.ndarray:
    """Positions of band ``lo .. hi - 1``: all of them, or ``samples`` (first, last, the rest uniform)."""
    if hi - lo <= samples:
        return np.arange(lo, hi, dtype=np.int64)
    drawn = np.random.default_rng(seed + lo).integers(lo, hi, size=samples - 2, dtype=np.int64)
    return np.unique(np.concatenate([[lo, hi - 1], drawn]))


def measure(target: Target, variant: Variant, dtype: str, span: tuple[int, int], samples: int) -> Measurement:
    """Sample ``target`` over ``span`` (positions ``a .. b - 1``) band by band; compare with ``variant``."""
    width = target.width or 0
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
            continue
        if values.shape != exact.shape:
            raise ValueError(
                f"the target gives rows of shape {values.shape[1:]} where the variant has {exact.shape[1:]}"
            )
        finite = np.isfinite(values).all(axis=1)
        with np.errstate(invalid="ignore"):
            difference = np.abs(values - exact)
        row_error = np.where(finite, np.max(difference, axis=1, initial=0.0), np.inf)
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
    first_over = {}
    for threshold in THRESHOLDS:
        over = np.flatnonzero(errors > threshold)
        first_over[threshold] = int(positions[over[0]]) if len(over) else None
    repeat, exact_repeat = _first_repeat(positions, values), _first_repeat(positions, None, exact_hashes)
    return Measurement(bands, positions, errors, first_over, repeat, exact_repeat, values)


def _first_repeat(
    positions: np.ndarray, rows: np.ndarray | None, hashes: np.ndarray | None = None
) -> tuple[int, int] | None:
    """The first sampled position whose row equals an earlier one's (bits, ±0 alike), and that earlier one
    (from the rows, or from their ``hashes``)."""
    hashes = row_hashes(np.nan_to_num(rows)) if hashes is None else hashes
    if not len(hashes):
        return None
    earliest, _ = earliest_equal(hashes)
    repeats = np.flatnonzero(earliest != np.arange(len(hashes)))
    if not len(repeats):
        return None
    return int(positions[repeats[0]]), int(positions[earliest[repeats[0]]])
