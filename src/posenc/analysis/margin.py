"""How close the closest two encodings are: :func:`uniqueness_margin`, exact over all pairs without O(L²).

The exact distance between PE(p) and PE(p + k) depends on the offset k only (it is
:func:`~posenc.analysis.properties.closed_form_distance`), and rounding moves each row by at most ε
(:func:`~posenc.analysis.rounding.row_error_bound`). So only offsets whose exact distance is within 2ε of the
best distance found so far can hold the minimum: the search measures those offsets on the rounded rows,
smallest exact distance first, and stops when the next one cannot beat the best.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import validation
from ..core import encode, frequencies, table
from ..core.isolated import isolated
from ..core.options import frequency_options, takes_options
from ._work import Rows, check_memory, chunks, span
from .properties import closed_form_distance, split_pairs
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

    >>> margin = uniqueness_margin(16, 8, dtype="float64")
    >>> round(margin.distance, 6), margin.a, margin.b, margin.complete
    (0.657741, 1, 7, True)
    """

    distance: float
    a: int | None
    b: int | None
    complete: bool = True


@takes_options(dtype="float64")
@isolated
def uniqueness_margin(
    length: int, d_model: int, *, start: int = 0, **options: Unpack[TableOptions]
) -> Margin:
    """The smallest distance |PE(a) - PE(b)| over all distinct positions a, b in the range, in ``dtype``.

    Exact over all pairs without an O(length²) search: the exact distance depends on the offset k = b - a
    only (:func:`~posenc.analysis.properties.closed_form_distance`), and rounding moves each encoding by at
    most ε = u √n (u the dtype's relative rounding error), so only offsets whose exact distance is within 2ε
    of the best distance found so far can hold the minimum. Those offsets are measured on the rounded table
    itself, smallest first.

    >>> m = uniqueness_margin(2048, 512, dtype="float32")
    >>> print(f"{m.distance:.4f}, offset {m.b - m.a}")  # neighbours: every offset-1 pair is this far apart
    3.7143, offset 1
    """
    length, start = span("length", length, start, d_model, options)  # before the table is allocated
    rows = table(length, d_model, start=start, **options)
    eps = row_error_bound(rows.dtype, rows.shape[1], options["odd"])
    return closest_pair(rows, start, eps, **frequency_options(options))


def closest_pair(rows: np.ndarray, start: int, eps: float, **options: Unpack[OptionKeywords]) -> Margin:
    """The smallest distance between two of ``rows`` (positions start, start + 1, ...), each within ``eps``
    of its exact encoding with the options given (base, shift, scale, odd): see :func:`uniqueness_margin`."""
    length, d_model = rows.shape
    if length < 2:
        return Margin(math.inf, None, None)
    # Every offset with an exact distance above that of offset 1 plus 4 eps comes after offset 1 and is
    # never measured (best <= its distance + 2 eps by then): its bound need only show that.
    upper = float(closed_form_distance(1, d_model, **options))
    if validation.plan(d_model, options["odd"])[0] > d_model // 2:  # a lone sine adds at most 2 to it
        upper = math.sqrt(upper**2 + 4.0)
    within = upper * (1 + 1e-9) + 4 * eps + 1e-9
    lower = distance_lower_bounds(length - 1, d_model, within=within, **options)
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


def distance_lower_bounds(
    count: int, d_model: int, *, within: float = math.inf, **options: Unpack[OptionKeywords]
) -> np.ndarray:
    """Lower bounds of the exact distances |PE(p) - PE(p + k)|, k = 1 .. count, shape ``(count,)``, for the
    options given (base, shift, scale, odd).

    |PE(p) - PE(p + k)|² = 2 Σ_i (1 - cos(k ω_i)) over the n full pairs (an odd width's lone sine only adds),
    from float32 cosines, less their rounding: n · 2 · 2⁻²⁴ and a margin. Only bounds up to ``within`` are
    needed this tight: when there are many offsets, each is first bounded by its :data:`FIRST_PAIRS`
    fastest pairs alone (float64 cosines, less their rounding), and only the offsets whose bound is then
    at most ``within`` get the bound over all n pairs; the others keep a looser bound, above ``within``.
    """
    count = validation.integer("count", count, minimum=0)
    validation.at_most("count", count, validation.MAX_POSITION, "offsets between positions below 2**31")
    d_model = validation.d_model(d_model)
    check_memory(f"count={count}", 8 * count, "lower count")
    n = d_model // 2
    out = np.empty(count)
    if count * n <= TIGHT_WORK or not math.isfinite(within):
        _tight_bounds(np.arange(1, count + 1), d_model, options, out)
        return out
    m = min(n, FIRST_PAIRS)
    omegas = frequencies(d_model, **options)[:m]
    # each cos(k ω_i) within k ω_i 2⁻⁵¹ (ω_i and the product rounded) + 2⁻⁴⁹ (cos) of the exact value
    slack = 2 * m * (count * float(omegas.max(initial=0.0)) * 2.0**-50 + 2.0**-48) + 1e-12
    for lo, hi in chunks(count, m * 64):
        k = np.arange(lo + 1, hi + 1, dtype=np.float64)
        cos_sum = np.cos(k[:, None] * omegas).sum(axis=1)
        out[lo:hi] = np.sqrt(np.maximum(0.0, 2.0 * (m - cos_sum) - slack))
    close = np.flatnonzero(out <= within)
    for lo in range(0, len(close), 1 << 14):
        part = close[lo : lo + (1 << 14)]
        out[part] = _tight_bounds(part + 1, d_model, options, None)
    return out


#: Offsets × pairs up to which :func:`distance_lower_bounds` bounds every offset over all pairs.
TIGHT_WORK = 1 << 24
#: The fastest pairs that bound every offset first, when there are more offsets.
FIRST_PAIRS = 16


def _tight_bounds(offsets: np.ndarray, d_model: int, options: Any, out: np.ndarray | None) -> np.ndarray:
    """The lower bounds of :func:`distance_lower_bounds` over all n pairs for ``offsets`` (increasing)."""
    n = d_model // 2
    result = np.empty(len(offsets)) if out is None else out
    slack = 2 * n * 2.0**-24 * 1.01 + 1e-9
    contiguous = len(offsets) == 0 or int(offsets[-1]) - int(offsets[0]) == len(offsets) - 1
    for lo, hi in chunks(len(offsets), d_model):
        if contiguous:
            first = int(offsets[lo])
            pe = table(hi - lo, d_model, start=first, layout="sin_cos", dtype="float32", **options)
        else:
            pe = encode(offsets[lo:hi], d_model, layout="sin_cos", dtype="float32", **options)
        cos_sum = split_pairs(pe, d_model, options["odd"])[1].astype(np.float64).sum(axis=1)
        result[lo:hi] = np.sqrt(np.maximum(0.0, 2.0 * (n - cos_sum) - slack))
    return result


def _closest_at_offset(rows: Any, k: int) -> tuple[float, int]:
    """min over p of |rows[p + k] - rows[p]| and its p (float64 arithmetic, in chunks; for offset 1 of
    :class:`~posenc.analysis._work.Rows`, the distances its pass kept)."""
    best, where = math.inf, 0
    if k == 1 and isinstance(rows, Rows) and rows.stats is not None and rows.hi <= len(rows.stats.norms):
        squared = rows.stats.step[rows.lo : rows.hi - 1]
        i = int(np.argmin(squared))
        return math.sqrt(float(squared[i])), i
    for lo, hi in chunks(len(rows) - k, rows.shape[1]):
        diff = rows[lo + k : hi + k].astype(np.float64) - rows[lo:hi].astype(np.float64)
        squared = np.einsum("ij,ij->i", diff, diff)
        i = int(np.argmin(squared))
        if squared[i] < best:
            best, where = float(squared[i]), lo + i
    return math.sqrt(best), where
