"""Error-free float64 arithmetic and the exact evaluation of sin(p ω) and cos(p ω), in NumPy.

* :func:`two_sum` (Knuth) and :func:`two_prod` (Dekker 1971, with Veltkamp's splitter: no FMA needed)
  return a result and its rounding error, exactly;
* :func:`turns` computes the fractional turn frac(p c) from the 26-bit limbs of the turn rate c = ω / 2π as
  a double-double with error < 2**-98 (every partial product is exact);
* :func:`sincos_turns` reduces the turn to a quarter turn, multiplies by 2π in double-double and evaluates
  Taylor polynomials (:func:`sincos_small`): < 1 ulp of float64;
* :func:`direct` is the whole evaluation. The compiled kernels (``posenc.core._kernels``) perform the very
  same IEEE operations, in this order;
* :func:`direct_double_double` is the same evaluation left unrounded (sin and cos as double-doubles, within
  2**-54 relative), and :func:`scaled` multiplies such a value by an amplitude A given as a double-double and
  rounds once: A · sin and A · cos within 1 ulp of float64 (NumPy only).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

TWO_PI_HI = 6.283185307179586
TWO_PI_LO = 2.4492935982947064e-16  # 2π as a double-double: TWO_PI_HI + TWO_PI_LO
SPLITTER = 134217729.0  # 2**27 + 1, Dekker's split into two 26-bit halves

# Taylor coefficients (-1)**k / (2k+1)! and (-1)**k / (2k)!; |x| <= π/4 needs terms to x**17 and x**18.
SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9)]
COS = [(-1) ** k / math.factorial(2 * k) for k in range(2, 10)]
# 1/6 as a double-double: SIXTH_HI + SIXTH_LO (error < 2**-110)
SIXTH_HI = 1.0 / 6.0
SIXTH_LO = float(Fraction(1, 6) - Fraction(SIXTH_HI))


def direct(p: np.ndarray, limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of p ω (float64, < 1 ulp) for p broadcast against each limb row ``limbs[k]``."""
    hi, lo = turns(p, limbs)
    return sincos_turns(hi, lo)


def turns(p: np.ndarray, limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """frac(p c) as a double-double (hi, lo), |hi| <= 1/2, error < 2**-98, for |p| < 2**31.

    c = l0 + l1 + l2 + l3 + l4 (26-bit limbs, c < 2**-2) and p = ph + pl (26-bit halves, |pl| <= 2**5), so
    every product below is exact; only the three that can exceed 1/2 need their integer part removed.
    """
    l0, l1, l2, l3, l4 = limbs
    scaled = p * SPLITTER
    ph = scaled - (scaled - p)
    pl = p - ph
    a = ph * l0
    a -= np.rint(a)
    b = ph * l1
    b -= np.rint(b)
    c = pl * l0
    c -= np.rint(c)
    s, e1 = two_sum(a, b)
    s -= np.rint(s)
    s, e2 = two_sum(s, c)
    s -= np.rint(s)
    u, e3 = two_sum(ph * l2, pl * l1)  # each < 2**-23
    rest = (ph * l3 + pl * l2) + (ph * l4 + pl * l3) + pl * l4 + (e1 + e2 + e3)  # each < 2**-48
    hi, e4 = two_sum(s, u)
    whole = np.rint(hi)
    hi -= whole
    return two_sum(hi, e4 + rest)


def sincos_turns(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of 2π (hi + lo), |hi| <= 1/2, accurate to < 1 ulp of float64."""
    quarter, x, xl = quarter_turn(hi, lo)
    sin, cos = sincos_small(x, xl)
    return in_quadrant(quarter, sin, cos)


def quarter_turn(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(quarter, x, xl)``: 2π (hi + lo) = quarter · π/2 + (x + xl), |x| <= π/4 (+ tiny), x + xl a
    double-double (error < 2**-104 absolute beyond the turn's)."""
    quarter = np.rint(4.0 * hi)
    r, rl = two_sum(hi - 0.25 * quarter, lo)  # the subtraction is exact (Sterbenz)
    x, xl = two_prod(r, TWO_PI_HI)
    xl += r * TWO_PI_LO + rl * TWO_PI_HI
    x, xl = two_sum(x, xl)
    return quarter, x, xl


def in_quadrant(quarter: np.ndarray, sin: np.ndarray, cos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of quarter · π/2 + x from sin x and cos x (swaps and sign changes: exact)."""
    q = np.mod(quarter, 4.0)  # 0, 1, 2, 3: the angle is q π/2 + x
    odd = (q == 1.0) | (q == 3.0)
    s = np.where(odd, cos, sin)
    c = np.where(odd, sin, cos)
    np.negative(s, out=s, where=q >= 2.0)
    np.negative(c, out=c, where=(q == 1.0) | (q == 2.0))
    return s, c


def sincos_small(x: np.ndarray, xl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The polynomial kernel: sin and cos of x + xl for |x| <= π/4 (+ tiny), |xl| <= ulp(x), by Taylor
    polynomials, < 1 ulp."""
    z = x * x
    ps = horner(z, SIN)
    sin = x + (xl * (1.0 - 0.5 * z) + x * ps)
    zh, zl = two_prod(x, x)
    half = 0.5 * zh
    w = 1.0 - half
    pc = zh * horner(zh, COS[1:], first=COS[0]) * zh
    cos = w + ((((1.0 - w) - half) - 0.5 * zl) + (pc - x * xl))
    return sin, cos


def direct_double_double(
    p: np.ndarray, limbs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sin and cos of p ω as double-doubles ``(sin_hi, sin_lo, cos_hi, cos_lo)``, for p broadcast against
    each limb row ``limbs[k]``: :func:`direct` without its last rounding. Each sum hi + lo is within
    0.3 · 2**-53 relative of the exact value of the reduced angle (:func:`sincos_small_double_double`), plus
    the turn's error (< 2**-98 turns: relevant only to values near a zero of sin or cos)."""
    quarter, x, xl = quarter_turn(*turns(p, limbs))
    sin_hi, sin_lo, cos_hi, cos_lo = sincos_small_double_double(x, xl)
    sin_hi, cos_hi = in_quadrant(quarter, sin_hi, cos_hi)
    sin_lo, cos_lo = in_quadrant(quarter, sin_lo, cos_lo)
    return sin_hi, sin_lo, cos_hi, cos_lo


def sincos_small_double_double(
    x: np.ndarray, xl: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """sin and cos of x + xl for |x| <= π/4 (+ tiny), |xl| <= ulp(x), as double-doubles
    ``(sin_hi, sin_lo, cos_hi, cos_lo)`` (|lo| <= ulp(hi)/2), each within 0.3 · 2**-53 relative.

    With z = x², exact as zh + zl: sin = x + xl (1 - z/2) - x³/6 + x⁵ (1/120 - z/5040 + ...), where x³/6 is
    a double-double (exact products by the 1/6 of :data:`SIXTH_HI` + :data:`SIXTH_LO`) and only the tail
    x⁵ (...) <= 0.0032 |x| is evaluated in float64 (error < 0.03 · 2**-53 |x|); cos = (1 - zh/2, exact as a
    double-double) - zl/2 - x xl + z² (1/24 - z/720 + ...), the tail <= 0.016 in float64 (error
    < 0.12 · 2**-53), as in :func:`sincos_small` but without its final rounding.
    """
    zh, zl = two_prod(x, x)
    cube, cube_lo = two_prod(x, zh)
    cube_lo += x * zl
    sixth, sixth_lo = two_prod(cube, SIXTH_HI)
    sixth_lo += cube * SIXTH_LO + cube_lo * SIXTH_HI  # x³/6 = sixth + sixth_lo
    tail = (x * zh) * horner(zh, SIN[1:])  # x⁵/120 - x⁷/5040 + ...
    sin, error = two_sum(x, -sixth)
    sin_lo = error + ((xl * (1.0 - 0.5 * zh) - sixth_lo) + tail)
    half = 0.5 * zh
    cos, error = two_sum(1.0, -half)  # 1 - zh/2, exactly
    tail = zh * horner(zh, COS[1:], first=COS[0]) * zh  # z²/24 - z³/720 + ...
    cos_lo = error + ((tail - 0.5 * zl) - x * xl)
    sin, sin_lo = two_sum(sin, sin_lo)
    cos, cos_lo = two_sum(cos, cos_lo)
    return sin, sin_lo, cos, cos_lo


def scaled(hi: np.ndarray, lo: np.ndarray, amplitude: float, amplitude_lo: float) -> np.ndarray:
    """A · (hi + lo) rounded once to float64, A = amplitude + amplitude_lo (a double-double): before that
    rounding, the error is below 2**-52 |A lo| + 2**-104 |A hi| (two_prod's part is exact)."""
    product, error = two_prod(hi, amplitude)
    return product + (error + (hi * amplitude_lo + lo * amplitude))


def horner(z: np.ndarray, coefficients: list[float], first: float | None = None) -> np.ndarray:
    """With first=None: z (a1 + z (a2 + ...)); else first + z (a1 + z (a2 + ...))."""
    acc = np.full_like(z, coefficients[-1])
    for a in reversed(coefficients[:-1]):
        acc *= z
        acc += a
    if first is None:
        return acc * z
    acc *= z
    acc += first
    return acc


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e = a + b exactly, s = fl(a + b) (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def two_prod(a: np.ndarray, b: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e = a b exactly, p = fl(a b) (Dekker, no FMA needed)."""
    p = a * b
    ta = a * SPLITTER
    ah = ta - (ta - a)
    al = a - ah
    tb = b * SPLITTER
    bh = tb - (tb - b)
    bl = b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl
