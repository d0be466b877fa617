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
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ..errors import PosencValueError

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


#: The traps of :func:`context`: Python's defaults, named here so that a program's changes to
#: ``decimal.DefaultContext`` (which a new Context copies) reach no computation of posenc.
_TRAPS = [decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow]


def context(digits: int) -> decimal.Context:
    """A :mod:`decimal` context of ``digits`` significant digits, rounding half to even, with room for any
    exponent these computations reach; nothing of it taken from the caller's or the default context."""
    return decimal.Context(
        prec=digits, rounding=decimal.ROUND_HALF_EVEN, Emin=-999999, Emax=999999, traps=_TRAPS, flags=[]
    )


#: π to 500 decimals, so that the usual precisions need no series (a test checks it against Machin's formula).
_PI_500 = (
    "3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706"
    "7982148086513282306647093844609550582231725359408128481117450284102701938521105559644622948954930381"
    "9644288109756659334461284756482337867831652712019091456485669234603486104543266482133936072602491412"
    "7372458700660631558817488152092096282925409171536436789259036001133053054882046652138414695194151160"
    "9433057270365759591953092186117381932611793105118548074462379962749567351885752724891227938183011949"
    "12"
)


def pi(digits: int) -> decimal.Decimal:
    """π to ``digits`` significant digits: the stored 500 decimals rounded, or beyond 490 digits Machin's
    formula π = 16 atan(1/5) - 4 atan(1/239)."""
    if digits <= 490:
        return context(digits).plus(decimal.Decimal(_PI_500))
    return machin_pi(digits)


def machin_pi(digits: int) -> decimal.Decimal:
    """π to ``digits`` significant digits by Machin's formula, in :mod:`decimal`."""
    with decimal.localcontext(context(digits + 10)):
        eps = decimal.Decimal(10) ** -(digits + 8)

        def atan_inverse(x: int) -> decimal.Decimal:
            total, power, k = decimal.Decimal(0), 1 / decimal.Decimal(x), 0
            while abs(power) > eps:
                total += power / (2 * k + 1)
                power /= -x * x
                k += 1
            return total

        value = 16 * atan_inverse(5) - 4 * atan_inverse(239)
    return context(digits).plus(value)


def frequency_constants(
    n: int, base: float, twice_half: int, shift: float, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The n frequencies ω_i = scale · base**(-i / (twice_half / 2 - shift)) (float64, nearest) and the limbs
    of c_i = ω_i / 2π (shape ``(LIMB_COUNT, n)``)."""
    return constants_of(*_fixed_frequencies(n, base, twice_half, shift, scale))


def constants_of(bits: int, fixed: list[int], turns: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The frequencies (float64, nearest) and the limbs of the turn rates, from their fixed-point values
    ``fixed[i] ≈ ω_i · 2**bits`` and ``turns[i] ≈ c_i · 2**bits`` (:func:`fixed_frequencies_of`)."""
    if bits < 1000:  # float(f) is exact to rounding and fast
        omegas = np.ldexp(np.array([float(f) for f in fixed]), -bits)
    else:  # f would overflow a float: int / int is correctly rounded at any size
        omegas = np.array([f / (1 << bits) for f in fixed])
    # the top 130 bits of each (a zero frequency, of the rotary family's "proportional" type, stays 0)
    lows = np.maximum(np.array([t.bit_length() for t in turns], dtype=np.int64) - LIMB_BITS * LIMB_COUNT, 0)
    tops = [
        t >> int(low) for t, low in zip(turns, lows, strict=True)
    ]  # the top 130 bits of c_i: five limbs of 26
    mask = (1 << LIMB_BITS) - 1
    pairs = [
        np.array([t >> shift & ((1 << 2 * LIMB_BITS) - 1) for t in tops], dtype=np.int64)
        for shift in (78, 26)
    ]
    last = np.array([t & mask for t in tops], dtype=np.int64)
    chunks = np.stack([pairs[0] >> LIMB_BITS, pairs[0] & mask, pairs[1] >> LIMB_BITS, pairs[1] & mask, last])
    exponents = lows + (LIMB_BITS * np.arange(LIMB_COUNT - 1, -1, -1))[:, None] - bits
    return omegas, np.ldexp(chunks.astype(np.float64), exponents)


def fixed_frequencies_of(
    exact: Callable[[int], Sequence[decimal.Decimal]],
) -> tuple[int, list[int], list[int]]:
    """``(bits, ω_i · 2**bits, c_i · 2**bits)`` as integers for frequencies given as exact reals:
    ``exact(digits)`` returns every ω_i (>= 0) to ``digits`` significant decimal digits.

    ``bits`` is chosen as for the geometric frequencies: even the smallest positive one keeps ~190
    significant bits.
    """
    rough = [float(w) for w in exact(20)]
    if any(w < 0 for w in rough):
        raise ValueError(f"frequencies must be >= 0; got {min(rough)}")
    positive = [w for w in rough if w > 0]
    if not positive:
        return _GUARD_BITS, [0] * len(rough), [0] * len(rough)
    smallest_log2 = math.log2(min(positive))
    if smallest_log2 < -900:
        raise ValueError(
            f"the lowest frequency 2**{smallest_log2:.0f} is below 2**-900, the smallest posenc computes; "
            "use larger frequencies"
        )
    bits = _GUARD_BITS + max(0, math.ceil(-smallest_log2)) + len(rough).bit_length()
    # relative precision of the largest frequency down to 2**-bits, with guard digits
    digits = math.ceil((bits + max(0.0, math.log2(max(rough)))) * 0.30103) + 10
    with decimal.localcontext(context(digits + 10)) as ctx:
        scale_fixed = decimal.Decimal(1 << bits)
        fixed = [int((w * scale_fixed).to_integral_value()) for w in exact(digits)]
        inverse_two_pi = int((scale_fixed / (2 * pi(ctx.prec))).to_integral_value())
    turns = [(f * inverse_two_pi) >> bits for f in fixed]
    return bits, fixed, turns


def turn_rates(
    n: int, base: float, twice_half: int, shift: float, scale: float = 1.0
) -> tuple[int, list[int]]:
    """``(bits, turns)``: the turn rates c_i = ω_i / 2π as integers ``turns[i] ≈ c_i · 2**bits`` (~190
    significant bits), for algorithms that keep the frequencies in fixed point."""
    bits, _, turns = _fixed_frequencies(n, base, twice_half, shift, scale)
    return bits, turns


def _fixed_frequencies(
    n: int, base: float, twice_half: int, shift: float, scale: float
) -> tuple[int, list[int], list[int]]:
    """``(bits, ω_i · 2**bits, c_i · 2**bits)`` as integers.

    The denominator is exact (a Decimal); ω_i = scale · r**i with r = base**(-1/denominator) is computed
    in fixed point with ``bits`` fraction bits, chosen so that even the smallest frequency keeps ~190
    significant bits after n rounded multiplications.
    """
    smallest_log2 = math.log2(scale) - (n - 1) / (twice_half / 2 - shift) * math.log2(base)
    if smallest_log2 < -900:
        by_scale = math.log2(scale) <= smallest_log2 / 2  # most of it is the scale's
        raise PosencValueError(
            f"the lowest frequency scale * base**(-(n-1)/(n-shift)) = 2**{smallest_log2:.0f} is below "
            "2**-900, the smallest posenc computes "
            f"(scale={scale!r}, base={base!r}, shift={shift!r}); "
            + ("use a larger scale" if by_scale else "use a smaller base or a shift further from n"),
            parameter="scale" if by_scale else "base",
        )
    bits = _GUARD_BITS + max(0, math.ceil(-smallest_log2)) + n.bit_length()
    with decimal.localcontext(context(math.ceil(bits * 0.30103) + 10)) as ctx:
        scale_fixed = decimal.Decimal(1 << bits)
        ratio_real = (-decimal.Decimal(base).ln() / _denominator(twice_half, shift)).exp()
        ratio = int((ratio_real * scale_fixed).to_integral_value())
        inverse_two_pi = int((scale_fixed / (2 * pi(ctx.prec))).to_integral_value())
        first = int((decimal.Decimal(scale) * scale_fixed).to_integral_value())
    fixed = [first]  # ω_0 = scale, then ω_i = ω_(i-1) · r, each rounded down to `bits` fraction bits
    for _ in range(n - 1):
        fixed.append((fixed[-1] * ratio) >> bits)
    turns = [(f * inverse_two_pi) >> bits for f in fixed]  # c_i in fixed point
    return bits, fixed, turns


#: The relative error below which :func:`wavelengths` trusts 1/c_i from the ~190-bit turn rates.
_WAVELENGTH_ERROR_BITS = 160


def wavelengths(n: int, base: float, twice_half: int, shift: float, scale: float = 1.0) -> np.ndarray:
    """The wavelengths 2π/ω_i of the n frequencies of :func:`frequency_constants`, each the exact real
    rounded once to float64 (not 2π/ω_i in float64, which rounds 2π, ω_i and the quotient: ~1 in 3 off by
    an ulp).

    From the turn rates c_i = ω_i / 2π (:func:`turn_rates`, ~190 significant bits), λ_i = 1/c_i is known to
    2**-160 relative; a value whose rounding that leaves uncertain is recomputed by :func:`wavelength_exact`.
    """
    bits, turns = turn_rates(n, base, twice_half, shift, scale)
    one, k = 1 << bits, 1 << _WAVELENGTH_ERROR_BITS
    out = np.empty(n, dtype=np.float64)
    for i, t in enumerate(turns):
        low = one * (k - 1) / (t * k)  # int / int: correctly rounded
        high = one * (k + 1) / (t * k)
        out[i] = low if low == high else wavelength_exact(i, base, twice_half, shift, scale)
    return out


def wavelength_exact(i: int, base: float, twice_half: int, shift: float, scale: float = 1.0) -> float:
    """2π/ω_i = 2π · base**(i / (twice_half/2 - shift)) / scale correctly rounded to float64, in
    :mod:`decimal` (:func:`rounded_reals`): the slow path of :func:`wavelengths`."""

    def at(digits: int) -> tuple[decimal.Decimal]:
        with decimal.localcontext(context(digits + 20)):
            exponent = i * decimal.Decimal(base).ln() / _denominator(twice_half, shift)
            return (2 * pi(digits + 20) * exponent.exp() / decimal.Decimal(scale),)

    return rounded_reals(at)[0]


def rounded_reals(values_at: Callable[[int], Sequence[decimal.Decimal]], digits: int = 40) -> list[float]:
    """The reals that ``values_at(digits)`` gives to relative error below 10**-digits (a zero exactly),
    each correctly rounded to float64 (to nearest, ties to even): asked for twice the digits while one lies
    too close to a rounding boundary to be sure (Ziv's strategy)."""
    while True:
        rounded = [nearest_double(Fraction(v), abs(Fraction(v)) / 10**digits) for v in values_at(digits)]
        if None not in rounded:
            return rounded  # type: ignore[return-value]
        digits *= 2
        if digits > 5000:  # pragma: no cover - would need a value within 10**-5000 of a boundary
            raise RuntimeError("could not round a value to float64: it lies on a rounding boundary")


def nearest_double(value: Fraction, error: Fraction) -> float | None:
    """The float64 that every real within ``error`` (>= 0) of ``value`` rounds to (to nearest, ties to
    even), or None when the interval holds a rounding boundary.

    >>> third = Fraction(1, 3)
    >>> nearest_double(third, Fraction(1, 10**30)), nearest_double(third, Fraction(1, 10**10))
    (0.3333333333333333, None)
    """
    low, high = value - error, value + error
    lowest = low.numerator / low.denominator  # int / int: correctly rounded
    return lowest if lowest == high.numerator / high.denominator else None


def _denominator(twice_half: int, shift: float) -> decimal.Decimal:
    """twice_half / 2 - shift, exactly (in the current decimal context's precision, which exceeds it)."""
    return decimal.Decimal(twice_half) / 2 - decimal.Decimal(shift)


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
    # a negative value that rounds to zero gives -0.0 (IEEE), like the fast paths' roundings
    return math.copysign(math.ldexp(round(value / Fraction(2) ** quantum), quantum), value)


def sincos_exact(
    position: float, i: int, base: float, twice_half: int, shift: float, scale: float, fmt: str
) -> tuple[float, float]:
    """sin and cos of ``position · scale · base**(-i / (twice_half/2 - shift))``, correctly rounded."""

    def omega() -> decimal.Decimal:  # in the caller's decimal context
        exponent = -i * decimal.Decimal(base).ln() / _denominator(twice_half, shift)
        return decimal.Decimal(scale) * exponent.exp()

    return sincos_exact_of(position, omega, fmt)


def sincos_exact_of(
    position: float,
    omega: Callable[[], decimal.Decimal],
    fmt: str,
    amplitude: Callable[[], decimal.Decimal] | None = None,
) -> tuple[float, float]:
    """``A · sin(position · ω)`` and ``A · cos(position · ω)`` correctly rounded to ``fmt``, for ω (and the
    amplitude A, 1 if None) computed by ``omega()`` (``amplitude()``) to the precision of the current
    :mod:`decimal` context.

    Evaluates in :mod:`decimal` with a known error bound and doubles the precision until the bound no longer
    straddles a rounding midpoint (it always ends: the exact values are transcendental, never midpoints).
    """
    digits = 60
    while True:
        with decimal.localcontext(context(digits + 20)):
            angle = decimal.Decimal(position) * omega()
            if angle == 0:  # exactly: sin 0 = 0, cos 0 = 1 (times A)
                return 0.0, round_fraction(Fraction(amplitude()) if amplitude else Fraction(1), fmt)
            two_pi = 2 * pi(digits + 20)
            angle -= two_pi * (angle / two_pi).to_integral_value()
            sin, cos = taylor_sincos(angle)
            if amplitude is not None:
                factor = amplitude()
                sin, cos = sin * factor, cos * factor
        error = Fraction(10) ** -(digits - 12)
        results = []
        for value in (sin, cos):
            exact = Fraction(value)
            low, high = round_fraction(exact - error, fmt), round_fraction(exact + error, fmt)
            results.append(round_fraction(exact, fmt) if low == high else None)  # keeps the sign of 0
        if None not in results:
            return results[0], results[1]
        digits *= 2
        if digits > 5000:  # pragma: no cover - would need a value within 10**-5000 of a midpoint
            raise RuntimeError(f"could not round sin/cos of position {position}")


def taylor_sincos(x: decimal.Decimal) -> tuple[decimal.Decimal, decimal.Decimal]:
    """sin(x) and cos(x) by their Taylor series, |x| <= π, in the current decimal context."""
    eps = decimal.Decimal(10) ** -(decimal.getcontext().prec + 2)
    square = x * x
    sin, cos = decimal.Decimal(0), decimal.Decimal(0)
    term_s, term_c, k = x, decimal.Decimal(1), 0
    while abs(term_s) > eps or abs(term_c) > eps:
        sin, cos = sin + term_s, cos + term_c
        term_s = -term_s * square / ((2 * k + 2) * (2 * k + 3))
        term_c = -term_c * square / ((2 * k + 1) * (2 * k + 2))
        k += 1
    return sin, cos
