"""The optional compiled path: angle addition into a float32 table in one fused pass (numba).

Used by :func:`posenc.core.table` for large float32 tables when numba is installed (``pip install
'posenc[fast]'``); never imported by ``import posenc``. It computes the same products as the NumPy path,
certifies each rounding with the same error bands, writes the rounded values, and counts per row the values
whose band straddles a midpoint; a second, serial pass settles those on the exact path (the same operations
as the NumPy path's), and the rare rest goes to the arbitrary-precision evaluation. So the output is the
correctly rounded table either way, bit for bit — whether or not the compiler fuses a multiply-add (that
only shrinks the error the bands allow for).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, cache=True, nogil=True)
def combine_float32(
    sin_a: np.ndarray,
    cos_a: np.ndarray,
    sin_b: np.ndarray,
    cos_b: np.ndarray,
    sin_band: np.ndarray,
    cos_band: np.ndarray,
    columns: np.ndarray,
    out: np.ndarray,
    unsure: np.ndarray,
) -> None:  # pragma: no cover - compiled; exercised through core.table
    """Row r = a·B + b of ``out`` gets z(anchor a) · z(b) rounded to float32; ``unsure[r]`` counts the
    values of that row whose band straddles a rounding midpoint.

    ``columns`` = (sin offset, cos offset, stride, sin count, cos count): the sine of frequency i goes to
    column ``sin offset + stride · i`` when i < sin count (likewise the cosine). Stride 2 (interleaved) and
    stride 1 (the half layouts) each get a loop of their own with unit-stride or pairwise stores, which the
    compiler turns into vector code.
    """
    block = sin_b.shape[0]
    n = sin_b.shape[1]
    sin_offset, cos_offset, stride, sin_count, cos_count = columns
    both = min(sin_count, cos_count)
    for r in numba.prange(out.shape[0]):
        a = r // block
        b = r - a * block
        sa, ca, sb, cb, row = sin_a[a], cos_a[a], sin_b[b], cos_b[b], out[r]
        count = 0
        if stride == 2:
            for i in range(both):
                s = sa[i] * cb[i] + ca[i] * sb[i]
                c = ca[i] * cb[i] - sa[i] * sb[i]
                s_high = np.float32(s + sin_band[i])
                c_high = np.float32(c + cos_band[i])
                count += (s_high != np.float32(s - sin_band[i])) | (c_high != np.float32(c - cos_band[i]))
                row[2 * i] = s_high
                row[2 * i + 1] = c_high
        else:
            sin_row = row[sin_offset : sin_offset + both]
            cos_row = row[cos_offset : cos_offset + both]
            for i in range(both):
                s = sa[i] * cb[i] + ca[i] * sb[i]
                c = ca[i] * cb[i] - sa[i] * sb[i]
                s_high = np.float32(s + sin_band[i])
                c_high = np.float32(c + cos_band[i])
                count += (s_high != np.float32(s - sin_band[i])) | (c_high != np.float32(c - cos_band[i]))
                sin_row[i] = s_high
                cos_row[i] = c_high
        for i in range(both, n):  # odd widths: one value whose partner has no column
            s = sa[i] * cb[i] + ca[i] * sb[i]
            c = ca[i] * cb[i] - sa[i] * sb[i]
            if i < sin_count:
                s_high = np.float32(s + sin_band[i])
                count += s_high != np.float32(s - sin_band[i])
                row[sin_offset + stride * i] = s_high
            if i < cos_count:
                c_high = np.float32(c + cos_band[i])
                count += c_high != np.float32(c - cos_band[i])
                row[cos_offset + stride * i] = c_high
        unsure[r] = count


@numba.njit(cache=True, nogil=True)
def resolve_float32(
    rows: np.ndarray,
    start: float,
    sin_a: np.ndarray,
    cos_a: np.ndarray,
    sin_b: np.ndarray,
    cos_b: np.ndarray,
    sin_band: np.ndarray,
    cos_band: np.ndarray,
    limbs: np.ndarray,
    absolute_error: float,
    columns: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled; exercised through core.table
    """Settle the values :func:`combine_float32` was unsure of, in the listed ``rows``, as core._Spec.emit
    does: recompute each on the exact path (< 1 ulp of float64) and keep it if its band is clear of a
    midpoint (position 0 is exact). Returns the (row, frequency, 0 = sin | 1 = cos) triples still unsure,
    for the arbitrary-precision evaluation."""
    block = sin_b.shape[0]
    n = sin_b.shape[1]
    sin_offset, cos_offset, stride, sin_count, cos_count = columns
    pending = np.empty((64, 3), dtype=np.int64)
    k = 0
    for r in rows:
        a = r // block
        b = r - a * block
        p = start + r
        for i in range(n):
            s = sin_a[a, i] * cos_b[b, i] + cos_a[a, i] * sin_b[b, i]
            c = cos_a[a, i] * cos_b[b, i] - sin_a[a, i] * sin_b[b, i]
            s_unsure = np.float32(s + sin_band[i]) != np.float32(s - sin_band[i])
            c_unsure = np.float32(c + cos_band[i]) != np.float32(c - cos_band[i])
            if not (s_unsure or c_unsure):
                continue
            if p == 0.0:
                exact_s, exact_c = 0.0, 1.0
            else:
                exact_s, exact_c = _sincos(p, limbs[0, i], limbs[1, i], limbs[2, i], limbs[3, i], limbs[4, i])
            for which in range(2):
                if which == 0 and not (s_unsure and i < sin_count):
                    continue
                if which == 1 and not (c_unsure and i < cos_count):
                    continue
                value = exact_s if which == 0 else exact_c
                band = abs(value) * 2.0**-50 + absolute_error
                high = np.float32(value + band)
                column = (sin_offset if which == 0 else cos_offset) + stride * i
                if p == 0.0 or high == np.float32(value - band):
                    out[r, column] = high if p != 0.0 else np.float32(value)
                else:
                    if k == len(pending):
                        grown = np.empty((2 * k, 3), dtype=np.int64)
                        grown[:k] = pending
                        pending = grown
                    pending[k, 0], pending[k, 1], pending[k, 2] = r, i, which
                    k += 1
    return pending[:k]


_SPLITTER = 134217729.0
_TWO_PI_HI = 6.283185307179586
_TWO_PI_LO = 2.4492935982947064e-16
_SIN = (
    -1 / 6,
    1 / 120,
    -1 / 5040,
    1 / 362880,
    -1 / 39916800,
    1 / 6227020800,
    -1 / 1307674368000,
    1 / 355687428096000,
)
_COS = (
    1 / 24,
    -1 / 720,
    1 / 40320,
    -1 / 3628800,
    1 / 479001600,
    -1 / 87178291200,
    1 / 20922789888000,
    -1 / 6402373705728000,
)


@numba.njit(inline="always")
def _two_sum(a: float, b: float) -> tuple[float, float]:  # pragma: no cover - compiled
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(inline="always")
def _two_prod(a: float, b: float) -> tuple[float, float]:  # pragma: no cover - compiled
    p = a * b
    ta = a * _SPLITTER
    ah = ta - (ta - a)
    al = a - ah
    tb = b * _SPLITTER
    bh = tb - (tb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.njit(inline="always")
def _sincos(p: float, l0: float, l1: float, l2: float, l3: float, l4: float) -> tuple[float, float]:
    """core._turns, core._sincos_turns and core._kernel for one element, operation for operation."""
    scaled = p * _SPLITTER  # pragma: no cover - compiled
    ph = scaled - (scaled - p)
    pl = p - ph
    a = ph * l0
    a -= np.rint(a)
    b = ph * l1
    b -= np.rint(b)
    c = pl * l0
    c -= np.rint(c)
    s, e1 = _two_sum(a, b)
    s -= np.rint(s)
    s, e2 = _two_sum(s, c)
    s -= np.rint(s)
    u, e3 = _two_sum(ph * l2, pl * l1)
    rest = (ph * l3 + pl * l2) + (ph * l4 + pl * l3) + pl * l4 + (e1 + e2 + e3)
    hi, e4 = _two_sum(s, u)
    hi -= np.rint(hi)
    hi, lo = _two_sum(hi, e4 + rest)
    quarter = np.rint(4.0 * hi)
    r, rl = _two_sum(hi - 0.25 * quarter, lo)
    x, xl = _two_prod(r, _TWO_PI_HI)
    xl += r * _TWO_PI_LO + rl * _TWO_PI_HI
    x, xl = _two_sum(x, xl)
    z = x * x
    acc = _SIN[7]
    for k in range(6, -1, -1):
        acc = acc * z + _SIN[k]
    ps = acc * z
    sin = x + (xl * (1.0 - 0.5 * z) + x * ps)
    zh, zl = _two_prod(x, x)
    half = 0.5 * zh
    w = 1.0 - half
    acc = _COS[7]
    for k in range(6, 0, -1):
        acc = acc * zh + _COS[k]
    acc = acc * zh + _COS[0]
    pc = zh * acc * zh
    cos = w + ((((1.0 - w) - half) - 0.5 * zl) + (pc - x * xl))
    q = quarter % 4.0
    if q == 1.0 or q == 3.0:
        sin, cos = cos, sin
    if q >= 2.0:
        sin = -sin
    if q == 1.0 or q == 2.0:
        cos = -cos
    return sin, cos


@numba.njit(parallel=True, cache=True, nogil=True)
def direct(
    positions: np.ndarray, limbs: np.ndarray, sin_out: np.ndarray, cos_out: np.ndarray
) -> None:  # pragma: no cover - compiled; exercised through core.table
    """core._direct for every (position, frequency) pair: sin_out[j, i], cos_out[j, i]."""
    for j in numba.prange(positions.shape[0]):
        p = positions[j]
        for i in range(limbs.shape[1]):
            s, c = _sincos(p, limbs[0, i], limbs[1, i], limbs[2, i], limbs[3, i], limbs[4, i])
            sin_out[j, i] = s
            cos_out[j, i] = c
