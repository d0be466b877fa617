"""Error-free float64 arithmetic and the exact evaluation of sin(p ω) and cos(p ω), in NumPy.

* :func:`two_sum` (Knuth) and :func:`two_prod` (Dekker 1971, with Veltkamp's splitter: no FMA needed)
  return a result and its rounding error, exactly;
* :func:`turns` computes the fractional turn frac(p c) from the 26-bit limbs of the turn rate c = ω / 2π as
  a double-double with error < 2**-98 (every partial product is exact);
* :func:`sincos_turns` reduces the turn to a quarter turn, multiplies by 2π in double-double and evaluates
  Taylor polynomials (:func:`sincos_small`): < 1 ulp of float64;
* :func:`direct` is the whole evaluation. The compiled kernels (``posenc.core._kernels``) perform the very
  same IEEE operations, in this order.
"""

from __future__ import annotations

import math

import numpy as np

TWO_PI_HI = 6.283185307179586
TWO_PI_LO = 2.4492935982947064e-16  # 2π as a double-double: TWO_PI_HI + TWO_PI_LO
SPLITTER = 134217729.0  # 2**27 + 1, Dekker's split into two 26-bit halves

# Taylor coefficients (-1)**k / (2k+1)! and (-1)**k / (2k)!; |x| <= π/4 needs terms to x**17 and x**18.
SIN = [(-1) ** k / math.factorial(2 * k + 1) for k in range(1, 9)]
COS = [(-1) ** k / math.factorial(2 * k) for k in range(2, 10)]


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
    quarter = np.rint(4.0 * hi)
    r, rl = two_sum(hi - 0.25 * quarter, lo)  # the subtraction is exact (Sterbenz)
    x, xl = two_prod(r, TWO_PI_HI)
    xl += r * TWO_PI_LO + rl * TWO_PI_HI
    x, xl = two_sum(x, xl)
    sin, cos = sincos_small(x, xl)
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
