"""The optional compiled path: angle addition into a float32 table in one fused pass (numba).

Used by :func:`posenc.core.table` for large float32 tables when numba is installed (``pip install
'posenc[fast]'``); never imported by ``import posenc``. It computes the same products as the NumPy path,
certifies each rounding with the same error bands, writes the rounded values, and counts per row the values
whose band straddles a midpoint; those rows are redone by the NumPy path, which resolves them exactly. So
the output is the correctly rounded table either way, bit for bit — whether or not the compiler fuses a
multiply-add (that only shrinks the error the bands allow for).
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
    sin_columns: np.ndarray,
    cos_columns: np.ndarray,
    out: np.ndarray,
    unsure: np.ndarray,
) -> None:  # pragma: no cover - compiled; exercised through core.table
    """Row r = a·B + b of ``out`` gets z(anchor a) · z(b) rounded to float32; ``unsure[r]`` counts the
    values of that row whose band straddles a rounding midpoint. Column index -1: not stored."""
    rows = out.shape[0]
    block = sin_b.shape[0]
    n = sin_b.shape[1]
    for r in numba.prange(rows):
        a = r // block
        b = r - a * block
        count = 0
        for i in range(n):
            sa = sin_a[a, i]
            ca = cos_a[a, i]
            sb = sin_b[b, i]
            cb = cos_b[b, i]
            s = sa * cb + ca * sb
            c = ca * cb - sa * sb
            s_high = np.float32(s + sin_band[i])
            c_high = np.float32(c + cos_band[i])
            count += (s_high != np.float32(s - sin_band[i])) + (c_high != np.float32(c - cos_band[i]))
            if sin_columns[i] >= 0:
                out[r, sin_columns[i]] = s_high
            if cos_columns[i] >= 0:
                out[r, cos_columns[i]] = c_high
        unsure[r] = count


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
