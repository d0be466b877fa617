"""What the host computes once per set of options, before any position is seen: the digits of every constant
the devices multiply by (frequencies, 2π, 1/k!, the sine/cosine table), the domain check, and the
:class:`Request` that :func:`posenc.portable.encode` runs with. NumPy and Python integers only: exact."""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any, NamedTuple

import numpy as np

from ..core import highprec
from .fixed_point import _MASK, LIMB_BITS

#: Fraction limbs of the first evaluation (60 bits), more for very low frequencies (:func:`limbs_for`),
#: and what the settling evaluation adds.
FIRST_LIMBS = 5
SETTLE_EXTRA = 5
#: Digits the host keeps of every constant (the most limbs any evaluation uses, plus guard limbs).
_DIGITS = 16
#: Largest turn rate ω/2π the fixed point holds (the integer limb of 2π c stays below 2**11).
MAX_TURN_RATE = 255.0
#: Smallest frequency: below it the first evaluation's 60 bits would hold too few of the frequency's.
MIN_FREQUENCY = 2.0**-45
#: ``I`` is split into pieces of this many bits (a piece times a digit fits 23 bits).
_PIECE_BITS = 11
_PIECES = 3
#: Output formats: (significand bits incl. the implicit one, smallest normal exponent).
FORMATS = highprec.FORMATS


class Constants(NamedTuple):
    """Host constants of one set of options (NumPy int32 arrays; frequency axis, then the limb axis).

    ``reduce[j, t]``: digit t (t = 1 .. _DIGITS) of frac(2**11j c_i); ``rate[t]``: c_i in fixed point
    (``rate[0]`` its integer part); ``scaled_rate``: c_i 2**(12 u_i) with ``u_i`` the steps that bring c_i
    to [2**-12, 1) when it is smaller; ``steps``: u_i; ``rate_float``: c_i as float32 (to pick the branch).
    """

    reduce: np.ndarray  # (_PIECES, n, _DIGITS + 1)
    rate: np.ndarray  # (n, _DIGITS + 1)
    scaled_rate: np.ndarray  # (n, _DIGITS + 1)
    steps: np.ndarray  # (n,)
    rate_float: np.ndarray  # (n,) float32


def check_options(omegas: np.ndarray) -> None:
    """Refuse (ValueError) options outside the portable algorithm's domain, naming the fix. (A frequency of
    exactly 0, as the rotary "proportional" type has, is in the domain: its sines are 0, its cosines 1.)"""
    omegas = omegas[omegas > 0]
    if len(omegas) and omegas.max() / (2 * math.pi) > MAX_TURN_RATE:
        raise ValueError(
            f"the highest frequency scale = {omegas.max():g} is above {2 * math.pi * MAX_TURN_RATE:.0f}, "
            "the limit of posenc's portable algorithm; compute on the host with posenc.encode"
        )
    if len(omegas) and omegas.min() < MIN_FREQUENCY:
        raise ValueError(
            f"the lowest frequency {omegas.min():.3g} is below 2**-45, the limit of posenc's device "
            "algorithm; use a smaller base, or compute on the host with posenc.encode"
        )


def _digits(value: int, bits: int, count: int) -> list[int]:
    """The fixed-point value ``value / 2**bits`` as [integer part, digit 1, ..., digit count] (truncated)."""
    whole = value >> bits
    fraction = value - (whole << bits)
    shift = LIMB_BITS * count - bits
    fraction = fraction << shift if shift >= 0 else fraction >> -shift
    return [whole] + [(fraction >> (LIMB_BITS * (count - 1 - t))) & _MASK for t in range(count)]


@functools.lru_cache(maxsize=64)
def constants(n: int, base: float, twice_half: int, shift: float, scale: float) -> Constants:
    """The :class:`Constants` of ω_i = scale · base**(-i / (twice_half/2 - shift)), i < n (cached)."""
    return constants_of_turns(*highprec.turn_rates(n, base, twice_half, shift, scale))


def constants_of_turns(bits: int, turns: list[int]) -> Constants:
    """The :class:`Constants` of the turn rates ``turns[i] / 2**bits`` = ω_i / 2π."""
    n = len(turns)
    reduce = np.zeros((_PIECES, n, _DIGITS + 1), np.int32)
    rate = np.zeros((n, _DIGITS + 1), np.int32)
    scaled = np.zeros((n, _DIGITS + 1), np.int32)
    steps = np.zeros(n, np.int32)
    for i, turn in enumerate(turns):
        for j in range(_PIECES):
            reduce[j, i] = _digits(turn << (_PIECE_BITS * j), bits, _DIGITS)
            reduce[j, i, 0] = 0  # only the fraction matters
        rate[i] = _digits(turn, bits, _DIGITS)
        u = 0
        while turn and turn << (LIMB_BITS * (u + 1)) < 1 << bits:  # c 2**12(u+1) < 1
            u += 1
        steps[i] = u
        scaled[i] = _digits(turn << (LIMB_BITS * u), bits, _DIGITS)
    rate_float = np.array([t / (1 << bits) for t in turns], dtype=np.float32)
    return Constants(reduce, rate, scaled, steps, rate_float)


@functools.cache
def _shared_constants() -> dict[str, Any]:
    """Constants of every request: 2π, 1/k!, and the table S_k, C_k = sin, cos(2πk/256) (sign, digits)."""
    bits = LIMB_BITS * _DIGITS + 8
    with decimal.localcontext(highprec.context(80)):
        two_pi = 2 * highprec.pi(80)
        one = decimal.Decimal(1 << bits)
        angles = [two_pi * k / 256 for k in range(256)]
        sines = [highprec.taylor_sincos(a - two_pi * round(k / 256)) for k, a in enumerate(angles)]
        table_sin = [int((s * one).to_integral_value(decimal.ROUND_FLOOR)) for s, _ in sines]
        table_cos = [int((c * one).to_integral_value(decimal.ROUND_FLOOR)) for _, c in sines]
        two_pi_fixed = int((two_pi * one).to_integral_value(decimal.ROUND_FLOOR))
    exact = {0: (0, 1), 64: (1, 0), 128: (0, -1), 192: (-1, 0)}
    for k, (s, c) in exact.items():
        table_sin[k], table_cos[k] = s << bits, c << bits

    def split(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
        signs = np.array([v < 0 for v in values])
        digits = np.array([_digits(abs(v), bits, _DIGITS) for v in values], dtype=np.int32)
        return signs, digits

    sin_neg, sin_digits = split(table_sin)
    cos_neg, cos_digits = split(table_cos)
    factorials = np.array(
        [_digits((1 << bits) // math.factorial(k), bits, _DIGITS) for k in range(24)], dtype=np.int32
    )
    return {
        "two_pi": np.array(_digits(two_pi_fixed, bits, _DIGITS), dtype=np.int32),
        "factorials": factorials,
        "sin_neg": sin_neg,
        "sin_digits": sin_digits,  # (256, _DIGITS + 1)
        "cos_neg": cos_neg,
        "cos_digits": cos_digits,
    }


class Request(NamedTuple):
    """What :func:`encode` needs besides the positions: the validated options and the output format."""

    d_model: int
    layout: str
    count: int  # frequencies
    sin_columns: int  # columns that hold a sine (count, or count - 1 when the last one falls off)
    cos_columns: int
    constants: Constants
    fmt: str  # "float32", "float16", "bfloat16" or "float64"
    limbs: int  # fraction limbs of the first evaluation
    shared: dict[str, Any]  # :func:`_shared_constants`
    amplitude: np.ndarray | None = None  # the digits of A (every value is A sin, A cos), None for A = 1


def request_for(options: Any, fmt: str) -> Request:
    """The :class:`Request` of validated core options (:class:`posenc.core.Options`) and a format name;
    ValueError for options outside the portable algorithm's domain."""
    from .. import core, validation

    count, twice_half = validation.plan(options.d_model, options.odd)
    spec = core.Spec(options, np.dtype(np.float32))
    check_options(spec.omegas)
    plan = spec.column_plan()
    host = constants(count, options.base, twice_half, options.shift, options.scale)
    return Request(
        options.d_model,
        options.layout,
        count,
        int(plan[3]),
        int(plan[4]),
        host,
        fmt,
        limbs_for(spec.omegas),
        _shared_constants(),
    )


def limbs_for(omegas: np.ndarray) -> int:
    """Fraction limbs of the first evaluation: 5 (60 bits), plus one per 12 bits that the lowest turn rate
    lies below 2**-20, so that small turns (low frequency, small position) keep >= 40 significant bits."""
    positive = omegas[omegas > 0]
    lowest = float(positive.min()) / (2 * math.pi) if len(positive) else 1.0
    return FIRST_LIMBS + max(0, math.ceil((-math.log2(lowest) - 20) / LIMB_BITS))


#: Largest amplitude A the device's error bound allows (the fixed-point error grows by the factor A).
MAX_AMPLITUDE = 2.0


@functools.lru_cache(maxsize=64)
def request_for_law(law: Any, fmt: str) -> Request:
    """The :class:`Request` of frequencies given as exact reals (an
    :class:`~posenc.core.explicit.ExactFrequencies`): columns [sin ω_0 .. sin ω_n-1 | cos ω_0 .. cos ω_n-1],
    every value times the law's amplitude A."""
    omegas, _ = law.constants()
    check_options(omegas)
    amplitude = None
    if law.amplitude is not None:
        bits = LIMB_BITS * _DIGITS
        with decimal.localcontext(highprec.context(80)):
            value = law.amplitude(70)
            if not 0 < value < MAX_AMPLITUDE:
                raise ValueError(
                    f"the amplitude (attention scaling) {float(value):g} is outside (0, {MAX_AMPLITUDE:g}), "
                    "the range of posenc's portable algorithm; compute on the host"
                )
            fixed = int((value * (1 << bits)).to_integral_value(decimal.ROUND_FLOOR))
        amplitude = np.array(_digits(fixed, bits, _DIGITS), dtype=np.int32)
    n = len(omegas)
    return Request(
        2 * n,
        "sin_cos",
        n,
        n,
        n,
        constants_of_turns(*law.turn_rates()),
        fmt,
        limbs_for(omegas),
        _shared_constants(),
        amplitude,
    )
