"""How close the closest two encodings are: :func:`uniqueness_margin`, exact over all pairs without O(L²).

The exact distance between PE(p) and PE(p + k) depends on the offset k only (it is
:func:`~posenc.see.properties.closed_form_distance`), and rounding moves each row by at most ε
(:func:`~posenc.see.rounding.row_error_bound`). So only offsets whose exact distance is within 2ε of the best
distance found so far can hold the minimum: the search measures those offsets on the rounded rows, smallest
exact distance first, and stops when the next one cannot beat the best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core import table
from ..core.options import frequency_options, takes_options
from ._work import chunks
from .properties import split_pairs
from .rounding import row_error_bound

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords, TableOptions

#: The most values (offsets × rows × d_model) the margin search reads.
MARGIN_WORK = 1 << 31


@dataclass(frozen=True)
class Margin:
    """The smallest distance between the encodings of two distinct positions: :func:`uniqueness_margin`.

    ``distance`` is min |PE(a) - PE(b)| over a ≠ b in the range (``inf`` for fewer than two positions),
    attained at positions ``a`` < ``b``. ``complete`` is False when the search stopped at its cap on offsets
    (then ``distance`` is an upper bound).
    """

    distance: float
    a: int | None
    b: int | None
    complete: bool = True


@takes_options(dtype="float64")
def uniqueness_margin(
    length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]
) -> Margin:
    """The smallest distance |PE(a) - PE(b)| over all distinct positions a, b in the range, in ``dtype``.

    Exact over all pairs without an O(length²) search: the exact distance depends on the offset k = b - a
    only (:func:`~posenc.see.properties.closed_form_distance`), and rounding moves each encoding by at most
    ε = u √n (u the dtype's relative rounding error), so only offsets whose exact distance is within 2ε of the
    best distance found so far can hold the minimum. Those offsets are measured on the rounded table itself,
    smallest first.

    >>> m = uniqueness_margin(2048, 512, dtype="float32")
    >>> print(f"{m.distance:.4f}, offset {m.b - m.a}")  # neighbours: every offset-1 pair is this far apart
    3.7143, offset 1
    """
    rows = table(length, d_model, start=start, **options)
    eps = row_error_bound(rows.dtype, rows.shape[1], options["odd"])
    return closest_pair(rows, start, eps, **frequency_options(options))


def closest_pair(rows: np.ndarray, start: int, eps: float, **options: Unpack[OptionKeywords]) -> Margin:
    """The smallest distance between two of ``rows`` (positions start, start + 1, ...), each within ``eps``
    of its exact encoding with the options given (base, shift, scale, odd): see :func:`uniqueness_margin`."""
    length, d_model = rows.shape
    if length < 2:
        return Margin(math.inf, None, None)
    lower = distance_lower_bounds(length - 1, d_model, **options)
    order = np.argsort(lower, kind="stable")
    best, where = math.inf, (None, None)
    most = max(16, MARGIN_WORK // (length * d_model))
    for count, index in enumerate(order.tolist()):
        if best == 0.0 or lower[index] - 2 * eps > best:
            return Margin(best, *where)
        if count == most:
            return Margin(best, *where, complete=False)
        k = index + 1
        distance, p = _closest_at_offset(rows, k)
        if distance < best:
            best, where = distance, (start + p, start + p + k)
    return Margin(best, *where)


def distance_lower_bounds(count: int, d_model: int, **options: Unpack[OptionKeywords]) -> np.ndarray:
    """Lower bounds of the exact distances |PE(p) - PE(p + k)|, k = 1 .. count, shape ``(count,)``, for the
    options given (base, shift, scale, odd).

    |PE(p) - PE(p + k)|² = 2 Σ_i (1 - cos(k ω_i)) over the n full pairs (an odd width's lone sine only adds),
    from float32 cosines, less their rounding: n · 2 · 2⁻²⁴ and a margin.
    """
    n = d_model // 2
    out = np.empty(count)
    slack = 2 * n * 2.0**-24 * 1.01 + 1e-9
    for lo, hi in chunks(count, d_model):
        pe = table(hi - lo, d_model, start=lo + 1, layout="sin_cos", dtype="float32", **options)
        cos_sum = split_pairs(pe, d_model, options["odd"])[1].astype(np.float64).sum(axis=1)
        out[lo:hi] = np.sqrt(np.maximum(0.0, 2.0 * (n - cos_sum) - slack))
    return out


def _closest_at_offset(rows: np.ndarray, k: int) -> tuple[float, int]:
    """min over p of |rows[p + k] - rows[p]| and its p (float64 arithmetic, in chunks)."""
    best, where = math.inf, 0
    for lo, hi in chunks(len(rows) - k, rows.shape[1]):
        diff = rows[lo + k : hi + k].astype(np.float64) - rows[lo:hi].astype(np.float64)
        squared = np.einsum("ij,ij->i", diff, diff)
        i = int(np.argmin(squared))
        if squared[i] < best:
            best, where = float(squared[i]), lo + i
    return math.sqrt(best), where
