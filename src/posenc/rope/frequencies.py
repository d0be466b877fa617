"""Exact rotary frequencies θ_i and attention scaling of each RoPE type.

A rotary embedding (Su et al. 2021, RoFormer) rotates pair i of a query/key head by the angle p·θ_i at
position p, and multiplies cos and sin by an attention scaling m. With d = rotary_dim, b = base (θ of the
paper, ``rope_theta``), i = 0 .. d/2 - 1 and the fields of :class:`~posenc.rope.RopeParameters`:

* ``default``:  θ_i = b^(-2i/d), m = 1.
* ``linear`` (position interpolation):  θ_i = b^(-2i/d) / factor, m = 1.
* ``dynamic`` (bloc97's NTK-aware scaling, dynamic form):  with M = max_position_embeddings and
  L = max(seq_len, M), the base grows to b' = b·s^(d/(d-2)), s = factor·L/M − (factor − 1);
  θ_i = b'^(-2i/d), m = 1. For L = M (and seq_len None) s = 1: the default frequencies.
* ``yarn`` (Peng et al. 2023):  with M₀ = original_max_position_embeddings, the dimension index at which
  a frequency turns r times over M₀ positions is c(r) = d·ln(M₀ / (2π r)) / (2 ln b); the ramp runs from
  lo = max(c(beta_fast), 0) to hi = min(c(beta_slow), d − 1) (lo = ⌊lo⌋, hi = ⌈hi⌉ when truncate; hi + 0.001
  if lo = hi); ρ_i = clamp((i − lo)/(hi − lo), 0, 1) and θ_i = b^(-2i/d)·(1 − ρ_i + ρ_i/factor). m is
  attention_factor if given, else g(factor, mscale)/g(factor, mscale_all_dim) if both are given (and
  nonzero: DeepSeek-V2/V3), else g(factor, 1), where g(s, μ) = 0.1·μ·ln s + 1 for s > 1 and 1 otherwise.
* ``longrope`` (Ding et al. 2024, LongRoPE; Phi-3):  θ_i = b^(-2i/d) / λ_i with λ = long_factor when
  seq_len > M₀ and short_factor otherwise (seq_len None: short, as transformers builds the model). m is
  attention_factor if given, else with F = factor (or max_position_embeddings / M₀ when absent)
  m = sqrt(1 + ln F / ln M₀) for F > 1 and 1 otherwise.
* ``llama3`` (Meta's Llama 3.1):  with λ_i = 2π/θ_i the wavelength of θ_i = b^(-2i/d), M₀ as above,
  λ_lo = M₀/low_freq_factor and λ_hi = M₀/high_freq_factor: θ_i/factor where λ_i > λ_lo; θ_i where
  λ_i < λ_hi; in between θ_i·((1 − σ_i)/factor + σ_i), σ_i = (M₀/λ_i − low_freq_factor)/(high_freq_factor −
  low_freq_factor). m = 1.
* ``proportional`` (Gemma 4, in Hugging Face transformers):  with h = head_dim and
  k = int(partial_rotary_factor·h // 2) rotated pairs, θ_i = b^(-2i/h)/factor for i < k and θ_i = 0
  for k <= i < h/2 (those pairs are not rotated); m = 1. Its rotary_dim is h.

Every formula is evaluated exactly: the config's numbers are float64s and taken at their exact binary
values; the transcendental parts (ln, exp, sqrt, π) are computed in :mod:`decimal` with guard digits, and
each result is rounded once. Hugging Face transformers evaluates the same formulas in float32 (with float64
for a few scalars), so its values agree with these to float32 accuracy, not bit for bit.

The piecewise choices are decided on the exact reals. Only yarn's truncation (⌊lo⌋, ⌈hi⌉) and its
lo = hi guard are discontinuous: the llama3 branches and the clamps of the yarn ramp meet continuously,
so a float computation that decides a boundary differently changes the value by a rounding error, not by a
jump. A float computation could floor c(beta_fast) or ceil c(beta_slow) differently only if c(r) lay
within its rounding error (~1e-15 relative in transformers' float64 ``math.log``) of an integer; the tests
check that c(r) of the realistic configs is farther than 1e-6 from any integer.

Shapes: :func:`inv_freq` returns ``(rotary_dim // 2,)`` float64; :func:`exact_inv_freq` a tuple of as many
:class:`decimal.Decimal`.
"""

from __future__ import annotations

import decimal
import functools
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from .. import validation
from ..core.highprec import context
from ..errors import PosencTypeError, PosencValueError
from .kinds import MAX_CONTEXT, Ambiguous
from .parameters import RopeParameters

#: Digits of the first try when rounding to float64 (a retry doubles them).
_FLOAT_DIGITS = 40
#: Digits beyond which a value is taken as an exact rounding tie (ties to even, as ``float`` does).
_MAX_FLOAT_DIGITS = 640
#: The largest ``digits`` :func:`exact_inv_freq` accepts.
MAX_DIGITS = 10000
#: The range of a nonzero frequency θ_i: the bounds of :mod:`.parameters` keep every type within it
#: (θ_i <= 2**20, θ_i >= 2**-186); a value outside it is refused, never rounded to inf or 0.
MIN_FREQUENCY, MAX_FREQUENCY = context(40).power(2, -1000), Decimal(2**24)  # not in the importer's context


def inv_freq(params: RopeParameters, *, seq_len: int | None = None) -> np.ndarray:
    """The ``rotary_dim // 2`` rotary frequencies θ_i of ``params`` (float64, shape ``(rotary_dim // 2,)``),
    each the exact value of its type's formula (module docstring) correctly rounded to float64.

    ``seq_len`` (the current sequence length) matters for "dynamic" (the base grows once seq_len >
    max_position_embeddings) and "longrope" (long factors once seq_len > original_max_position_embeddings);
    None gives what transformers builds a model with: the unscaled dynamic base and the short factors.

    >>> from posenc import rope
    >>> inv_freq(rope.config(head_dim=8, base=100.0))  # θ_i = 100 ** (-2i / 8)
    array([1.        , 0.31622777, 0.1       , 0.03162278])
    >>> inv_freq(rope.config(head_dim=8, base=100.0, scaling={"rope_type": "linear", "factor": 2.0}))
    array([0.5       , 0.15811388, 0.05      , 0.01581139])
    """
    _check_params(params)
    key = _seq_key(params, _check_seq_len(seq_len))
    return np.array(_rounded_frequencies(params, key), dtype=np.float64)


def attention_scaling(params: RopeParameters, *, seq_len: int | None = None) -> float:
    """The factor m that multiplies cos and sin (module docstring), correctly rounded to float64.

    It does not depend on ``seq_len`` for any type; the keyword is accepted so that both functions take the
    same arguments.

    >>> from posenc import rope
    >>> attention_scaling(rope.config(head_dim=8))  # no scaling: 1
    1.0
    >>> yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}
    >>> round(attention_scaling(rope.config(head_dim=8, scaling=yarn)), 6)  # yarn: 0.1 ln(factor) + 1
    1.138629
    """
    _check_params(params)
    _check_seq_len(seq_len)
    return _rounded_scaling(params)


def exact_inv_freq(params: RopeParameters, seq_len: int | None, digits: int) -> tuple[Decimal, ...]:
    """The ``rotary_dim // 2`` frequencies θ_i as Decimals with relative error below ``10**-digits``
    (rounded to ``digits + 2`` significant digits; a zero frequency is exactly 0). Cached per
    ``(params, effective seq_len, digits)``."""
    _check_params(params)
    key = _seq_key(params, _check_seq_len(seq_len))
    return _exact_frequencies(params, key, _check_digits(digits))


def exact_attention_scaling(params: RopeParameters, seq_len: int | None, digits: int) -> Decimal:
    """The attention scaling m as a Decimal with relative error below ``10**-digits`` (``digits + 2``
    significant digits). ``seq_len`` does not change it (see :func:`attention_scaling`)."""
    _check_params(params)
    _check_seq_len(seq_len)
    return _exact_scaling(params, _check_digits(digits))


# --- arguments ------------------------------------------------------------------------------------------


def _check_params(params: Any) -> None:
    if not isinstance(params, RopeParameters):
        raise PosencTypeError(
            f"params must be a RopeParameters (from posenc.rope.config(...)); got {type(params).__name__}",
            parameter="params",
        )


def _check_seq_len(seq_len: Any) -> int | None:
    if seq_len is None:
        return None
    return validation.integer(
        "seq_len", seq_len, minimum=1, maximum=MAX_CONTEXT, why="positions are below 2**31"
    )


def _check_digits(digits: Any) -> int:
    return validation.integer("digits", digits, minimum=1, maximum=MAX_DIGITS)


def _seq_key(params: RopeParameters, seq_len: int | None) -> int | None:
    """What of ``seq_len`` changes the frequencies (:meth:`~posenc.rope.kinds.RopeType.seq_key`)."""
    return params.kind.seq_key(params, seq_len)


# --- correctly rounded float64 --------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _rounded_frequencies(params: RopeParameters, key: int | None) -> tuple[float, ...]:
    return _round_all(lambda digits: _exact_frequencies(params, key, digits))


@functools.lru_cache(maxsize=256)
def _rounded_scaling(params: RopeParameters) -> float:
    return _round_all(lambda digits: (_exact_scaling(params, digits),))[0]


def _round_all(values_at: Any) -> tuple[float, ...]:
    """Round values known to relative error 10**-digits to the nearest float64, asking ``values_at`` for
    more digits while one lies too close to a rounding midpoint to be sure (Ziv's strategy)."""
    digits = _FLOAT_DIGITS
    while True:
        values = values_at(digits)
        rounded = tuple(float(v) for v in values)  # Decimal -> float rounds correctly (to nearest, ties even)
        if digits >= _MAX_FLOAT_DIGITS or all(
            _certain(v, f, digits) for v, f in zip(values, rounded, strict=True)
        ):
            return rounded
        digits *= 2


def _certain(value: Decimal, rounded: float, digits: int) -> bool:
    """Whether every real within relative 10**-digits of ``value`` rounds to ``rounded`` in float64."""
    if value == 0:
        return True  # the zero frequencies of "proportional" are exact
    exact = Fraction(value)
    error = abs(exact) / 10**digits
    low = (Fraction(rounded) + Fraction(math.nextafter(rounded, -math.inf))) / 2
    high = (Fraction(rounded) + Fraction(math.nextafter(rounded, math.inf))) / 2
    return low < exact - error and exact + error < high


# --- the exact values -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _exact_frequencies(params: RopeParameters, key: int | None, digits: int) -> tuple[Decimal, ...]:
    out = context(digits + 2)
    return tuple(out.plus(v) for v in _with_retries(_frequencies, params, key, digits))


@functools.lru_cache(maxsize=256)
def _exact_scaling(params: RopeParameters, digits: int) -> Decimal:
    return context(digits + 2).plus(_with_retries(_scaling, params, None, digits))


def _with_retries(compute: Any, params: RopeParameters, key: int | None, digits: int) -> Any:
    """``compute`` at ``digits`` plus guard digits, with more guard digits if a floor/ceil was ambiguous."""
    # Guard digits: the exponents (2i/d)·ln b reach ~ln b'; yarn's ramp divides by hi − lo and its blend
    # (1 − ρ + ρ/factor) can be as small as 1/factor; each costs as many digits as its magnitude.
    d, factor = params.rotary_dim, max(params.factor or 1.0, 1.0)
    scale = d * factor * (math.log(params.base) + math.log1p(key or 0) + 1.0)
    guard = 12 + len(str(int(scale)))
    while True:
        try:
            with decimal.localcontext(context(digits + guard)):
                return compute(params, key)
        except Ambiguous:
            if guard > 4 * digits + 400:
                raise
            guard *= 2


def _frequencies(p: RopeParameters, key: int | None) -> list[Decimal]:
    """The θ_i of ``p`` (its type's formula) at the current decimal context's precision, each nonzero one
    checked to lie within what posenc computes."""
    theta = p.kind.frequencies(p, key)
    for i, t in enumerate(theta):  # the last guard: no frequency rounds to inf or 0 in float64
        if t and not MIN_FREQUENCY <= t <= MAX_FREQUENCY:
            raise PosencValueError(
                f"the rotary parameters give the frequency θ_{i} = {float(t):.6g} "
                f"(rope_type={p.rope_type!r}, rope_theta={p.base:g}, factor={p.factor}"
                f"{'' if key is None else f', seq_len={key}'}), "
                "outside the range 2**-1000 .. 2**24 posenc computes; check rope_theta and the scaling "
                "fields",
                parameter="params",
            )
    return theta


def _scaling(p: RopeParameters, key: int | None) -> Decimal:
    """The attention scaling m of ``p`` (its type's; 1 for most) at the current decimal context's
    precision."""
    return Decimal(1) if p.kind.scaling is None else p.kind.scaling(p)
