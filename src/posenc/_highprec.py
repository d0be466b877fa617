"""Arbitrary-precision pieces of the exact core, in Python integers and :mod:`decimal`.

Three jobs, none of them on a hot path:

* the frequency constants, once per call: ω_i and the turn rate c_i = ω_i / 2π, to ~200 bits, split into
  float64 *limbs* short enough that ``position * limb`` is exact in float64;
* the slow exact evaluation of sin/cos for the rare outputs whose fast value lies too close to a rounding
  midpoint to be certain (a handful per million);
* rounding an exact rational to a binary floating-point format, ties to even.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np

#: Bits in one limb: a position split in two 26-bit halves times a 26-bit limb is exact in float64.
LIMB_BITS = 26
#: Limbs per turn rate: 130 significant bits of c_i.
LIMB_COUNT = 5
#: Fraction bits kept in the fixed-point frequency computation beyond the smallest frequency's exponent.
_GUARD_BITS = 200

# (significand bits incl. the implicit one, smallest normal exponent) of each output format.
FORMATS = {
    "float64": (53, -1022),
    "float32": (24, -126),
    "float16": (11, -14),
    "bfloat16": (8, -126),
}


def _context(digits: int) -> decimal.Context:
    return decimal.Context(prec=digits, rounding=decimal.ROUND_HALF_EVEN, Emin=-999999, Emax=999999)


def pi(digits: int) -> decimal.Decimal:
    """π to ``digits`` significant digits, from Machin's formula π = 16 atan(1/5) - 4 atan(1/239)."""
    ctx = _context(digits + 10)

    def atan_inverse(x: int) -> decimal.Decimal:
        total, power, k = decimal.Decimal(0), ctx.divide(1, x), 0
        square = x * x
        eps = decimal.Decimal(10) ** -(digits + 8)
        while abs(power) > eps:
            total = ctx.add(total, ctx.divide(power, 2 * k + 1))
            power = ctx.divide(-power, square)
            k += 1
        return total

    return _context(digits).plus(ctx.subtract(16 * atan_inverse(5), 4 * atan_inverse(239)))


def _ratio_decimal(base: float, shift: float, n: int, digits: int) -> decimal.Decimal:
    """r = base ** (-1 / (n - shift)), so that ω_i = r ** i."""
    ctx = _context(digits)
    exponent = ctx.divide(-ctx.ln(decimal.Decimal(base)), decimal.Decimal(n) - decimal.Decimal(shift))
    return ctx.exp(exponent)


def frequency_constants(n: int, base: float, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """The frequencies ω_i (float64, nearest) and the limbs of c_i = ω_i / 2π (shape ``(LIMB_COUNT, n)``).

    ω_i = r**i with r = base**(-1/(n - shift)) is computed in fixed point with ``P`` fraction bits, P chosen
    so that even the smallest frequency keeps ~190 significant bits after n rounded multiplications.
    """
    smallest_log2 = -(n - 1) / (n - shift) * math.log2(base)
    if smallest_log2 < -900:
        raise ValueError(
            f"the lowest frequency base**(-(n-1)/(n-shift)) = 2**{smallest_log2:.0f} underflows; "
            "use a smaller base or a shift further from n"
        )
    bits = _GUARD_BITS + math.ceil(-smallest_log2) + n.bit_length()
    digits = math.ceil(bits * 0.30103) + 10
    scale = decimal.Decimal(2) ** bits
    ctx = _context(digits)
    ratio = int(ctx.multiply(_ratio_decimal(base, shift, n, digits), scale).to_integral_value())
    inverse_two_pi = int(ctx.divide(scale, 2 * pi(digits)).to_integral_value())
    omegas = np.empty(n)
    chunks = np.empty((LIMB_COUNT, n))
    exponents = np.empty((LIMB_COUNT, n), dtype=np.int64)
    mask = (1 << LIMB_BITS) - 1
    top = LIMB_BITS * LIMB_COUNT
    fixed = 1 << bits  # ω_0 = 1
    for i in range(n):
        if i:
            fixed = (fixed * ratio) >> bits
        omegas[i] = math.ldexp(float(fixed), -bits)
        turns = (fixed * inverse_two_pi) >> bits  # c_i in fixed point
        low = turns.bit_length() - top  # c_i keeps its top 130 bits, cut into 5 limbs of 26
        for k in range(LIMB_COUNT):
            at = low + LIMB_BITS * (LIMB_COUNT - 1 - k)
            chunks[k, i] = (turns >> at) & mask
            exponents[k, i] = at - bits
    return omegas, np.ldexp(chunks, exponents)


def round_fraction(value: Fraction, fmt: str) -> float:
    """``value`` rounded to nearest (ties to even) in the binary format ``fmt``, returned as a float."""
    precision, emin = FORMATS[fmt]
    if value == 0:
        return 0.0
    exponent = math.frexp(float(value))[1]  # |value| in [2**(e-1), 2**e), maybe off by one
    magnitude = abs(value)
    while magnitude >= Fraction(2) ** exponent:
        exponent += 1
    while magnitude < Fraction(2) ** (exponent - 1):
        exponent -= 1
    quantum = max(exponent, emin + 1) - precision
    return math.ldexp(round(value / Fraction(2) ** quantum), quantum)


def sincos_exact(position: float, i: int, n: int, base: float, shift: float, fmt: str) -> tuple[float, float]:
    """sin and cos of ``position * base**(-i/(n-shift))`` correctly rounded to ``fmt``, by brute force.

    Evaluates in :mod:`decimal` with a known error bound and doubles the precision until the bound no longer
    straddles a rounding midpoint (it always ends: the exact values are transcendental, never midpoints).
    """
    digits = 60
    while True:
        ctx = _context(digits + 20)
        omega = ctx.exp(
            ctx.divide(
                ctx.multiply(-i, ctx.ln(decimal.Decimal(base))),
                decimal.Decimal(n) - decimal.Decimal(shift),
            )
        )
        angle = ctx.multiply(decimal.Decimal(position), omega)
        two_pi = 2 * pi(digits + 20)
        turns = ctx.to_integral_value(ctx.divide(angle, two_pi))
        angle = ctx.subtract(angle, ctx.multiply(two_pi, turns))
        sin, cos = _taylor_sincos(angle, ctx)
        error = Fraction(10) ** -(digits - 12)
        results = []
        for value in (sin, cos):
            exact = Fraction(value)
            low, high = round_fraction(exact - error, fmt), round_fraction(exact + error, fmt)
            results.append(low if low == high else None)
        if None not in results:
            return results[0], results[1]
        digits *= 2
        if digits > 5000:  # pragma: no cover - would need a value within 10**-5000 of a midpoint
            raise RuntimeError(f"could not round sin/cos of position {position}, frequency {i}")


def _taylor_sincos(x: decimal.Decimal, ctx: decimal.Context) -> tuple[decimal.Decimal, decimal.Decimal]:
    """sin(x) and cos(x) by their Taylor series, |x| <= π, in the precision of ``ctx``."""
    eps = decimal.Decimal(10) ** -(ctx.prec + 2)
    square = ctx.multiply(x, x)
    sin, cos = decimal.Decimal(0), decimal.Decimal(0)
    term_s, term_c, k = x, decimal.Decimal(1), 0
    while abs(term_s) > eps or abs(term_c) > eps:
        sin, cos = ctx.add(sin, term_s), ctx.add(cos, term_c)
        term_s = ctx.divide(ctx.multiply(-term_s, square), (2 * k + 2) * (2 * k + 3))
        term_c = ctx.divide(ctx.multiply(-term_c, square), (2 * k + 1) * (2 * k + 2))
        k += 1
    return sin, cos
