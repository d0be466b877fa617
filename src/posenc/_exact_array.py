"""The exact per-element algorithm, written once over an array namespace: NumPy, torch (any device, eager,
compiled or exported) and jax.numpy (under ``jit``, with x64 on or off).

It needs no float64 and no host: every step is elementwise integer arithmetic on int32 arrays, plus a few
float operations that are exact (scaling by powers of two, ``floor``, summing at most 24 significant bits),
so compilers that fuse or contract floating-point operations cannot change a bit, and the results are the
core's (:mod:`posenc.core`) on every backend.

A value is held in *fixed point*: an int32 array whose last axis holds ``m + 1`` limbs,
``L[0] + L[1] 2**-12 + ... + L[m] 2**-12m`` (``L[0]`` the integer part, the others 12-bit digits), so a
product of two limbs needs 24 bits and a column of products fits in an int32. The loops over limbs go
through :meth:`Backend.loop` (a ``fori_loop`` under JAX on the CPU, which keeps programs small to compile).
For a position ``p`` and a frequency ``ω_i``, with ``c = ω_i / 2π`` (turns per position):

1. **Reduction.** ``p = σ (I + f)`` with ``I`` an integer < 2**31 (the offset is added here, exactly) and
   ``|f| < 1``. ``frac(I c)`` is a sum of 11-bit pieces of ``I`` times the host's digits of
   ``frac(2**11j c)``: exact to ``2**-12(m+1)``. ``f c`` is a fixed-point product. Their sum mod 1 is the turn
   ``r``. Tiny turns (``I = 0`` and ``|f| c < 2**-12``) are carried scaled by ``2**e`` (``e`` a multiple of
   12), so that they keep their relative precision down to the smallest floats.
2. **Evaluation.** ``k = round(256 r)``, ``s = r - k/256`` (|s| <= 1/512), ``x = 2π s``; sin x and cos x by
   their Taylor series; then ``sin 2πr = S_k cos x + C_k sin x`` and ``cos 2πr = C_k cos x - S_k sin x`` with
   the host's digits of ``S_k, C_k = sin, cos(2πk/256)``.
3. **Certified rounding.** The fixed-point result is within ``Δ`` units of ``2**-12m`` of the exact value;
   it is rounded to the output format (exact integer bit operations, ties to even) and the rounding is
   *certain* when no rounding midpoint lies within ``Δ``. With ``m = 5`` (60 bits; more for very low
   frequencies, :func:`limbs_for`) about one value in 2**30 is not; those (up to :data:`SETTLE_CAPACITY` per
   call) are recomputed with 60 more bits on a fixed-capacity compaction of their indices (``nonzero`` with
   a static size): on the device, no host. Beyond the capacity they keep the first rounding.

Invalid positions (NaN, ±inf, |p| >= 2**31, or an offset that takes a position there) give rows of NaN:
a device cannot raise without a sync, and a NaN row is never mistaken for an encoding.

Domain (checked on the host from the options, :func:`check_options`): ``ω_0 = scale < 1600`` and the
lowest frequency >= 2**-45, which covers every model we know of; :func:`posenc.encode` has none of these
limits.
"""

from __future__ import annotations

import decimal
import functools
import math
from typing import Any, NamedTuple

import numpy as np

from .core import highprec

#: Bits per limb, and the limb base.
LIMB_BITS = 12
_BASE = 1 << LIMB_BITS
_MASK = _BASE - 1
#: Fraction limbs of the first evaluation (60 bits), more for very low frequencies (:func:`limbs_for`),
#: and what the settling evaluation adds.
FIRST_LIMBS = 5
SETTLE_EXTRA = 5
#: Digits the host keeps of every constant (the most limbs any evaluation uses, plus guard limbs).
_DIGITS = 16
#: Values whose first rounding is uncertain that one call settles on the device; more keep the first
#: rounding (each one must lie within 2**-54 of a rounding midpoint: no natural input comes close).
SETTLE_CAPACITY = 512
#: Error bound of the fixed-point evaluation, in units of its last digit (the analysis in :func:`_evaluate`
#: gives < 24; the margin is for safety).
_DELTA_UNITS = 64
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
    """Refuse (ValueError) options outside the device algorithm's domain, naming the fix."""
    if len(omegas) and omegas.max() / (2 * math.pi) > MAX_TURN_RATE:
        raise ValueError(
            f"the highest frequency scale = {omegas.max():g} is above {2 * math.pi * MAX_TURN_RATE:.0f}, "
            "the limit of posenc's device algorithm; compute on the host with posenc.encode"
        )
    if len(omegas) and omegas.min() < MIN_FREQUENCY:
        raise ValueError(
            f"the lowest frequency {omegas.min():.3g} is below 2**-45, the limit of posenc's device "
            "algorithm; use a smaller base, or compute on the host with posenc.encode"
        )


# --- host constants ---------------------------------------------------------------------------------


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
    bits, turns = highprec.turn_rates(n, base, twice_half, shift, scale)
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
        while turn << (LIMB_BITS * (u + 1)) < 1 << bits:  # c 2**12(u+1) < 1
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


# --- backends ---------------------------------------------------------------------------------------


class Backend:
    """The few operations whose spelling differs between NumPy, torch and jax.numpy."""

    def __init__(self, xp: Any, name: str):
        self.xp, self.name = xp, name
        self.int32 = xp.int32
        self.float32 = xp.float32

    def asarray(self, value: np.ndarray, like: Any) -> Any:
        """A host constant as an array where ``like`` lives."""
        if self.name == "torch":
            return self.xp.as_tensor(value, device=like.device)
        return self.xp.asarray(value)

    def cast(self, value: Any, dtype: Any) -> Any:
        return value.to(dtype) if self.name == "torch" else value.astype(dtype)

    def clip(self, value: Any, low: Any = None, high: Any = None) -> Any:
        if self.name == "torch":
            return self.xp.clamp(value, min=low, max=high)
        return self.xp.clip(value, low, high)

    def where(self, condition: Any, a: Any, b: Any) -> Any:
        return self.xp.where(condition, a, b)

    def loop(self, count: int, body: Any, state: Any) -> Any:
        """``state = body(i, state)`` for i in 0 .. count - 1: a Python loop, or under JAX on the CPU one
        ``fori_loop`` (its body compiles once: a program that unrolled every limb loop took ~4x longer to
        compile); on JAX accelerators unrolled (their while loops read the predicate on the host)."""
        if self.name == "jax":
            import jax

            unroll = jax.default_backend() != "cpu"
            return jax.lax.fori_loop(0, count, body, state, unroll=unroll or None)
        for i in range(count):
            state = body(i, state)
        return state

    def index_last(self, value: Any, index: Any) -> Any:
        """``value[..., index]`` for an int or (under JAX) a traced index."""
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_index_in_dim(value, index, axis=value.ndim - 1, keepdims=False)
        return value[..., index]

    def index_first(self, value: Any, index: Any) -> Any:
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_index_in_dim(value, index, axis=0, keepdims=False)
        return value[index]

    def set_last(self, value: Any, index: Any, item: Any) -> Any:
        """``value`` with ``value[..., index] = item`` (a new array)."""
        if self.name == "jax":
            import jax

            return jax.lax.dynamic_update_slice_in_dim(value, item[..., None], index, axis=value.ndim - 1)
        return self.concat([value[..., :index], item[..., None], value[..., index + 1 :]], -1)

    def shift_last(self, value: Any, count: Any) -> Any:
        """``value`` moved ``count`` places up the last axis, zeros in front, the top dropped."""
        if self.name == "jax":
            columns = self.xp.arange(value.shape[-1])
            return self.xp.where(columns >= count, self.xp.roll(value, count, axis=-1), 0)
        if count == 0:
            return value
        return self.pad_last(value[..., : value.shape[-1] - count], count, 0)

    def swap01(self, value: Any) -> Any:
        return value.transpose(0, 1) if self.name == "torch" else self.xp.swapaxes(value, 0, 1)

    def is_integer(self, dtype: Any) -> bool:
        if self.name == "torch":
            return not (dtype.is_floating_point or dtype.is_complex or dtype == self.xp.bool)
        return bool(self.xp.issubdtype(dtype, self.xp.integer))

    def stack(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.stack(arrays, axis)

    def pad_last(self, value: Any, left: int, right: int) -> Any:
        """Zeros before and after the last axis."""
        if self.name == "torch":
            return self.xp.nn.functional.pad(value, (left, right))
        return self.xp.pad(value, [(0, 0)] * (value.ndim - 1) + [(left, right)])

    def min_last(self, value: Any) -> Any:
        return self.xp.amin(value, -1) if self.name == "torch" else self.xp.min(value, -1)

    def sum_last(self, value: Any) -> Any:
        return self.xp.sum(value, -1, dtype=value.dtype)

    def any_last(self, value: Any) -> Any:
        return self.xp.any(value, -1)

    def concat(self, arrays: list[Any], axis: int) -> Any:
        return self.xp.cat(arrays, axis) if self.name == "torch" else self.xp.concatenate(arrays, axis)

    def nonzero_static(self, flags: Any, size: int, fill: int) -> Any:
        """Indices of the true entries of a 1-D array, padded with ``fill`` (or cut) to ``size``."""
        if self.name == "torch":
            return self.xp.nonzero_static(flags, size=size, fill_value=fill)[:, 0]
        if self.name == "jax":
            return self.xp.nonzero(flags, size=size, fill_value=fill)[0]
        found = np.flatnonzero(flags)[:size]
        return np.concatenate([found, np.full(size - len(found), fill, dtype=found.dtype)])

    def scatter(self, flat: Any, index: Any, values: Any) -> Any:
        """``flat`` with ``flat[index] = values``; indices equal to ``len(flat)`` are dropped."""
        if self.name == "jax":
            return flat.at[index].set(values, mode="drop")
        padded = self.concat([flat, flat[:1]], 0)
        if self.name == "torch":
            return padded.index_put((index,), values)[:-1]
        padded[index] = values
        return padded[:-1]


def backend_of(array: Any) -> Backend:
    """The :class:`Backend` of an array (NumPy, torch or JAX)."""
    module = type(array).__module__
    if module.startswith("torch"):
        import torch

        return Backend(torch, "torch")
    if module.startswith(("jax", "jaxlib")):
        import jax.numpy as jnp

        return Backend(jnp, "jax")
    return Backend(np, "numpy")


# --- fixed-point arithmetic: int32 arrays with a trailing limb axis ------------------------------------
#
# A value is an array ``v`` of shape (..., m + 1): v[..., 0] the integer part, v[..., t] the digit of
# 2**-12t. Arithmetic keeps digits *nearly* normalised (|digit| <= 4096 + 32, two carry rounds per
# operation, enough for the next product to fit an int32); :func:`_normalize` carries exactly, for the
# decisions (signs, the table index, the rounding).


def _carry_round(ops: Backend, v: Any) -> Any:
    """One round of carries: every digit to [0, 4096) plus the carry of the digit below it."""
    carry = v >> LIMB_BITS
    carry = ops.concat([carry[..., :1] * 0, carry[..., 1:]], -1)  # the integer part keeps its value
    low = v - (carry << LIMB_BITS)
    return low + ops.concat([carry[..., 1:], carry[..., :1] * 0], -1)


def _lazy(ops: Backend, v: Any) -> Any:
    return _carry_round(ops, _carry_round(ops, v))


def _normalize(ops: Backend, v: Any) -> Any:
    """Exact carries: digits 1..m in [0, 4096), the integer part (any sign) in v[..., 0]."""
    last = v.shape[-1] - 1

    def step(j: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        v, carry = state
        value = ops.index_last(v, last - j) + carry
        return ops.set_last(v, last - j, value & _MASK), value >> LIMB_BITS

    v, carry = ops.loop(last, step, (v, v[..., 0] * 0))
    return ops.set_last(v, 0, v[..., 0] + carry)


def _mul(ops: Backend, a: Any, b: Any, m: int) -> Any:
    """a · b to m fraction limbs (one guard limb, truncated): error < 1.02 units of 2**-12m."""
    a = a[..., : m + 1]
    b = ops.pad_last(b[..., : m + 1], 0, 1)  # (..., m + 2): the guard column

    def column(i: Any, columns: Any) -> Any:
        return columns + ops.shift_last(ops.index_last(a, i)[..., None] * b, i)

    columns = ops.loop(m + 1, column, (a[..., :1] * b) * 0)
    return _lazy(ops, columns)[..., : m + 1]


def _magnitude(ops: Backend, v: Any) -> tuple[Any, Any]:
    """(v < 0, |v| normalised) of a signed fixed-point value."""
    v = _normalize(ops, v)
    negative = v[..., 0] < 0
    return negative, ops.where(negative[..., None], _normalize(ops, -v), v)


def _signed_sum(ops: Backend, terms: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """(negative, magnitude) of Σ ±|t| for (negative, magnitude) terms."""
    total = None
    for negative, magnitude in terms:
        signed = ops.where(negative[..., None], -magnitude, magnitude)
        total = signed if total is None else total + signed
    return _magnitude(ops, total)


def _shift_down(ops: Backend, v: Any, limbs: Any, m: int) -> Any:
    """v · 2**(-12 limbs) for a per-element whole number of limbs >= 0 (more than m gives 0)."""
    out = v
    for k in range(1, m + 1):
        moved = ops.pad_last(v[..., : m + 1 - k], k, 0)
        out = ops.where((limbs == k)[..., None], moved, out)
    out = ops.where((limbs > m)[..., None], 0, out)
    return _lazy(ops, out)


class Positions(NamedTuple):
    """Positions split for the reduction: ``p = (-1)**negative (whole + fraction)``, broadcastable arrays."""

    negative: Any  # bool: the sign of p
    whole: Any  # int32 >= 0, < 2**31
    fraction: Any  # float >= 0 in the positions' float dtype (< 1), or None for integer positions
    fraction_negative: Any  # bool: the fraction's sign is opposite to the whole part's (or None)
    valid: Any  # bool


def split_positions(ops: Backend, positions: Any, offset: Any = None) -> Positions:
    """Split positions (any integer or float dtype) plus an optional integer ``offset`` (added exactly)
    into :class:`Positions`; NaN, ±inf and |p + offset| >= 2**31 are marked invalid (and computed as 0)."""
    xp = ops.xp
    limit = float(2**31)
    fraction = finite = clean = None
    if is_floating(ops, positions.dtype):
        if positions.dtype.itemsize < 4:  # float16, bfloat16: float32 holds them exactly
            positions = ops.cast(positions, ops.float32)
        finite = xp.isfinite(positions) & (xp.abs(positions) < limit)
        clean = ops.where(finite, positions, 0)
        whole = xp.trunc(clean)
        fraction = clean - whole  # exact
        positions = whole
    whole = _wide_int(ops, positions)
    if offset is None:
        total, wrapped = whole, None
    else:
        added = _wide_int(ops, offset)
        total = whole + added
        # int32 (JAX without x64) wraps around: the sum's sign then differs from both operands'
        wrapped = ((whole < 0) == (added < 0)) & ((total < 0) != (whole < 0))
    valid = (total < 2**31) & (total > -(2**31)) if total.dtype != ops.int32 else total != -(2**31)
    if wrapped is not None:
        valid = valid & ~wrapped
    if finite is not None:
        valid = valid & finite
    total = ops.where(valid, total, 0)
    negative_whole = total < 0
    magnitude = ops.cast(ops.where(negative_whole, -total, total), ops.int32)
    if fraction is None:
        return Positions(negative_whole, magnitude, None, None, valid)
    fraction = ops.where(valid, fraction, 0)
    # p = whole + fraction: its sign is the whole part's, or the fraction's when the whole part is 0, and
    # -0.0 is negative (IEEE: sin(-0) = -0; an offset of 0 keeps it, a nonzero one cannot sum to zero)
    negative_zero = (clean == 0) & xp.signbit(clean)
    negative = ops.where(total == 0, (fraction < 0) | negative_zero, negative_whole)
    fraction_negative = (fraction < 0) != negative
    return Positions(negative, magnitude, xp.abs(fraction), fraction_negative, valid)


def is_floating(ops: Backend, dtype: Any) -> bool:
    """Whether ``dtype`` (of the backend's arrays) is a floating-point dtype (bfloat16 included)."""
    if ops.name == "torch":
        return bool(dtype.is_floating_point)
    if ops.name == "jax":
        return bool(ops.xp.issubdtype(dtype, ops.xp.floating))
    return np.dtype(dtype).kind == "f" or np.dtype(dtype).name == "bfloat16"


def _wide_int(ops: Backend, values: Any) -> Any:
    """Integers as the widest integer dtype at hand (int64; int32 under JAX without x64)."""
    if ops.name == "jax":
        import jax

        return values.astype(ops.xp.int64 if jax.config.jax_enable_x64 else ops.xp.int32)
    return ops.cast(values, ops.xp.int64)


def _fraction_digits(ops: Backend, fraction: Any, m: int) -> Any:
    """(..., m + 2): the integer limb 0, then digits 1..m+1 of a float in [0, 1) (exact as far as kept)."""
    digits = [ops.cast(fraction * 0, ops.int32)]
    rest = fraction
    for _ in range(m + 1):
        rest = rest * float(_BASE)
        digit = ops.xp.floor(rest)
        rest = rest - digit
        digits.append(ops.cast(digit, ops.int32))
    return ops.stack(digits, -1)


def _evaluate(
    ops: Backend, whole: Any, fraction: Any, fraction_negative: Any, freq: dict[str, Any], m: int
) -> tuple[tuple[Any, Any], tuple[Any, Any], Any]:
    """sin and cos of 2π (whole + fraction) c in fixed point: ((neg, |sin| 2**e), (neg, |cos|), e).

    Error analysis (units of 2**-12m): the reduction is exact to < 1 unit (truncated digits of frac(2**11j c)
    times 11-bit pieces, plus the fraction's product); x = 2π|s| adds < 8; sin x, cos x < 4 more (each
    product < 1.02 unit, |x| < 0.0123, the series' tails < 2**-12m-8); the table products and the sum < 4.
    Tiny turns are computed scaled by 2**e and the same bounds hold in the scaled units.
    """
    xp = ops.xp
    reduce = freq["reduce"]  # (pieces, ..., digits)
    columns = None
    for j in range(_PIECES):
        piece = (whole >> (_PIECE_BITS * j)) & ((1 << _PIECE_BITS) - 1)
        part = piece[..., None] * reduce[j][..., : m + 2]
        columns = part if columns is None else columns + part
    turn = _lazy(ops, columns)[..., : m + 1]
    zero = whole * 0
    tiny = None
    e = zero
    if fraction is not None:
        # tiny turns: whole = 0 and |f| c < 2**-12, scaled by 2**e = 2**12(s + u)
        tiny = (whole == 0) & (fraction * freq["rate_float"] < 2.0**-13)
        _, exponent = xp.frexp(fraction)
        s = ops.where(tiny & (exponent < 0), (-exponent) // LIMB_BITS, 0)
        # float64 fractions reach 2**-1074 (s <= 89), narrower ones 2**-149 (s <= 12)
        wide = fraction.dtype == xp.float64
        s = ops.clip(s, 0, 127 if wide else 15)
        scaled = fraction
        for bit in (1, 2, 4, 8, 16, 32, 64) if wide else (1, 2, 4, 8):
            scaled = ops.where((s & bit) != 0, scaled * float(2.0 ** (LIMB_BITS * bit)), scaled)
        u = ops.where(tiny, freq["steps"], 0)
        e = (s + u) * LIMB_BITS
        digits = _fraction_digits(ops, scaled, m)
        rate = ops.where(tiny[..., None], freq["scaled_rate"], freq["rate"])
        product = _mul(ops, digits, rate, m)
        turn = turn + ops.where(fraction_negative[..., None], -product, product)
    turn = _normalize(ops, turn)
    keep = zero != 0 if tiny is None else tiny
    turn = ops.concat([ops.where(keep, turn[..., 0], 0)[..., None], turn[..., 1:]], -1)  # mod 1
    # k = round(256 r), s = r - k/256
    k = (turn[..., 1] + 8) >> 4
    if tiny is not None:
        k = ops.where(tiny, 0, k)
    zk = k * 0
    step = ops.stack([zk, 16 * k] + [zk] * (m - 1), -1)
    s_negative, s_magnitude = _magnitude(ops, turn - step)
    x = _mul(ops, s_magnitude, freq["two_pi"], m)
    z = _mul(ops, x, x, m)
    if tiny is not None:
        z = _shift_down(ops, z, 2 * (e // LIMB_BITS), m)
    sin_x, cos_x = _series(ops, x, z, m, freq["factorials"])
    index = k & 255
    table = freq["table"]
    sk, ck = table["sin_digits"][index], table["cos_digits"][index]
    sk_neg, ck_neg = table["sin_neg"][index], table["cos_neg"][index]
    sin = _signed_sum(
        ops, [(sk_neg, _mul(ops, sk, cos_x, m)), (ck_neg != s_negative, _mul(ops, ck, sin_x, m))]
    )
    cos = _signed_sum(
        ops, [(ck_neg, _mul(ops, ck, cos_x, m)), (sk_neg == s_negative, _mul(ops, sk, sin_x, m))]
    )
    return sin, cos, e


def _series(ops: Backend, x: Any, z: Any, m: int, factorials: Any) -> tuple[Any, Any]:
    """sin x = x (1 - z (1/3! - z (1/5! - ...))) and cos x = 1 - z (1/2! - z (1/4! - ...)), z = x²
    (z may be scaled down with x scaled up, for tiny turns); terms to x**(2K+1) with the tail < 2**-12m-8."""
    terms = 1
    while -6.35 * (2 * terms + 2) - math.log2(math.factorial(2 * terms + 2)) > -(LIMB_BITS * m + 8):
        terms += 1
    zero = z * 0
    start = (factorials[2 * terms + 1][: m + 1] + zero, factorials[2 * terms][: m + 1] + zero)

    def step(j: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        p, q = state
        k = terms - 1 - j
        p = _lazy(ops, ops.index_first(factorials, 2 * k + 1)[: m + 1] - _mul(ops, z, p, m))
        q = _lazy(ops, ops.index_first(factorials, 2 * k)[: m + 1] - _mul(ops, z, q, m))
        return p, q

    p, q = ops.loop(terms, step, start)
    return _mul(ops, x, p, m), q


def round_fixed(ops: Backend, magnitude: Any, e: Any, m: int, fmt: str, float_dtype: Any) -> tuple[Any, Any]:
    """Round the normalised fixed-point ``magnitude · 2**-e`` to ``fmt`` (to nearest, ties to even):
    (value as ``float_dtype``, certain). Certain: no rounding midpoint lies within _DELTA_UNITS of it."""
    precision, emin = FORMATS[fmt]
    limbs = ops.asarray(np.arange(m + 1, dtype=np.int32), magnitude)
    nonzero = magnitude != 0
    top = ops.min_last(ops.where(nonzero, limbs, m + 1))
    found = top <= m
    top_value = ops.sum_last(ops.where(limbs == top[..., None], magnitude, 0))
    powers = ops.asarray(np.array([1 << b for b in range(1, 23)], dtype=np.int32), magnitude)
    bit = ops.sum_last(ops.cast(top_value[..., None] >= powers, ops.int32))
    # bit positions counted from the last digit (2**-12m = bit 0)
    leading = LIMB_BITS * (m - top) + bit
    exponent = leading - LIMB_BITS * m - e
    quantum = ops.clip(exponent, emin) - (precision - 1) + e + LIMB_BITS * m
    low = ops.clip(quantum, 0)[..., None]
    starts = ops.asarray(np.array([LIMB_BITS * (m - t) for t in range(m + 1)], dtype=np.int32), magnitude)
    widths = ops.asarray(np.array([30] + [LIMB_BITS] * m, dtype=np.int32), magnitude)
    drop = ops.clip(ops.clip(low - starts, 0), None, widths)
    kept = (magnitude >> drop) << drop
    at = low - 1 - starts
    inside = (at >= 0) & (at < widths)
    half = ops.where(inside, 1 << ops.clip(ops.clip(at, 0), None, widths - 1), 0)
    distance_negative, distance = _magnitude(ops, magnitude - kept - half)
    beyond = ops.any_last(distance[..., :m] != 0) | (distance[..., m] > _DELTA_UNITS)
    up = ~distance_negative & ops.any_last(distance != 0)
    certain = beyond & (quantum >= 1) & found
    # far below the smallest subnormal: rounds to 0, certainly
    underflow = (leading + 8 < quantum) & (quantum >= 9) & found
    certain = certain | underflow
    up = up & ~underflow
    kept = ops.where(underflow[..., None], 0, kept)
    at = low - starts
    bump = ops.where(
        up[..., None] & (at >= 0) & (at < widths), 1 << ops.clip(ops.clip(at, 0), None, widths - 1), 0
    )
    rounded = _normalize(ops, kept + bump)
    weights = ops.asarray(np.array([2.0 ** (-LIMB_BITS * t) for t in range(m + 1)]), magnitude)
    value = ops.sum_last(ops.cast(rounded, float_dtype) * ops.cast(weights, float_dtype))
    steps = e // LIMB_BITS
    for b in (1, 2, 4, 8, 16, 32, 64, 128):
        scaled = value
        for _ in range(max(1, b // 8)):  # 2**-192 is below float32's range: two steps of 2**-96
            scaled = scaled * float(2.0 ** (-LIMB_BITS * min(b, 8)))
        value = ops.where((steps & b) != 0, scaled, value)
    return value, certain


# --- the whole request ------------------------------------------------------------------------------


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


def encode(ops: Backend, positions: Any, request: Request, offset: Any = None) -> Any:
    """The encodings of ``positions (+ offset)``: shape ``positions.shape + (d_model,)``, dtype ``fmt``.

    Bit-identical to :func:`posenc.encode` for float32/float16/bfloat16 (float64: within 1 ulp);
    rows of NaN for invalid positions.
    """
    xp = ops.xp
    split = split_positions(ops, positions, offset)
    shape = tuple(split.valid.shape)
    flat = [None if a is None else a.reshape(-1) for a in split]
    negative, whole, fraction, fraction_negative, valid = flat
    count = request.count
    host = request.constants
    shared = request.shared
    freq = {
        "reduce": ops.asarray(host.reduce, whole),
        "rate": ops.asarray(host.rate, whole),
        "scaled_rate": ops.asarray(host.scaled_rate, whole),
        "steps": ops.asarray(host.steps, whole),
        "rate_float": ops.asarray(host.rate_float, whole),
        "two_pi": ops.asarray(shared["two_pi"], whole),
        "factorials": ops.asarray(shared["factorials"], whole),
        "table": {
            name: ops.asarray(shared[name], whole)
            for name in ("sin_neg", "sin_digits", "cos_neg", "cos_digits")
        },
    }
    float_dtype = xp.float64 if request.fmt == "float64" else ops.float32
    first = request.limbs + SETTLE_EXTRA if request.fmt == "float64" else request.limbs

    def column(a: Any) -> Any:
        return None if a is None else a[:, None]

    sin, cos, certain = _values(
        ops,
        column(negative),
        column(whole),
        column(fraction),
        column(fraction_negative),
        freq,
        first,
        request.fmt,
        float_dtype,
    )
    zero = whole == 0 if fraction is None else (whole == 0) & (fraction == 0)
    certain = certain | column(zero)
    total = int(whole.shape[0]) * count
    if request.fmt != "float64" and total:
        sin, cos = _settle(
            ops,
            split_flat=flat,
            freq=freq,
            sin=sin,
            cos=cos,
            certain=certain,
            request=request,
            float_dtype=float_dtype,
        )
    out = _layout(ops, sin, cos, request)
    nan = float("nan")
    out = ops.where(column(valid), out, nan)
    out = out.reshape((*shape, request.d_model))
    return ops.cast(out, _dtype(ops, request.fmt))


def _values(
    ops: Backend,
    negative: Any,
    whole: Any,
    fraction: Any,
    fraction_negative: Any,
    freq: dict[str, Any],
    m: int,
    fmt: str,
    float_dtype: Any,
) -> tuple[Any, Any, Any]:
    """Rounded sin and cos (with the position's sign) and whether both roundings are certain."""
    (sin_neg, sin_mag), (cos_neg, cos_mag), e = _evaluate(ops, whole, fraction, fraction_negative, freq, m)
    sin, sin_ok = round_fixed(ops, sin_mag, e, m, fmt, float_dtype)
    cos, cos_ok = round_fixed(ops, cos_mag, e * 0, m, fmt, float_dtype)
    sin = ops.where(sin_neg != negative, -sin, sin)
    cos = ops.where(cos_neg, -cos, cos)
    return sin, cos, sin_ok & cos_ok


def _settle(
    ops: Backend,
    *,
    split_flat: list[Any],
    freq: dict[str, Any],
    sin: Any,
    cos: Any,
    certain: Any,
    request: Request,
    float_dtype: Any,
) -> tuple[Any, Any]:
    """Recompute the (up to SETTLE_CAPACITY) uncertain values with SETTLE_EXTRA more limbs, on a compaction
    of their indices of static size: no host sync."""
    negative, whole, fraction, fraction_negative, _ = split_flat
    rows, count = sin.shape
    total = rows * count
    index = ops.nonzero_static(~certain.reshape(-1), SETTLE_CAPACITY, total)
    safe = ops.clip(index, 0, total - 1)
    row, col = safe // count, safe % count

    def gather(a: Any) -> Any:
        return None if a is None else a[row]

    picked = {
        **freq,
        "reduce": freq["reduce"][:, col],
        "rate": freq["rate"][col],
        "scaled_rate": freq["scaled_rate"][col],
        "steps": freq["steps"][col],
        "rate_float": freq["rate_float"][col],
    }
    new_sin, new_cos, _ = _values(
        ops,
        gather(negative),
        gather(whole),
        gather(fraction),
        gather(fraction_negative),
        picked,
        request.limbs + SETTLE_EXTRA,
        request.fmt,
        float_dtype,
    )
    sin = ops.scatter(sin.reshape(-1), index, new_sin).reshape(rows, count)
    cos = ops.scatter(cos.reshape(-1), index, new_cos).reshape(rows, count)
    return sin, cos


def _layout(ops: Backend, sin: Any, cos: Any, request: Request) -> Any:
    """(rows, count) sines and cosines placed into (rows, d_model) columns, as the core places them."""
    xp = ops.xp
    sin = sin[:, : request.sin_columns]
    cos = cos[:, : request.cos_columns]
    rows = sin.shape[0]
    if request.layout == "interleaved":
        pairs = xp.stack([sin[:, : request.cos_columns], cos], -1).reshape(rows, 2 * request.cos_columns)
        parts = [pairs] + (
            [sin[:, request.cos_columns :]] if request.sin_columns > request.cos_columns else []
        )
    elif request.layout == "sin_cos":
        parts = [sin, cos]
    else:
        parts = [cos, sin]
    width = request.sin_columns + request.cos_columns
    parts += [xp.abs(sin[:, :1]) * 0.0] * (request.d_model - width)  # odd="zero": +0 columns
    return ops.concat(parts, 1) if len(parts) > 1 else parts[0]


def _dtype(ops: Backend, fmt: str) -> Any:
    if ops.name == "numpy":
        from . import _validate

        return _validate.dtype(fmt)
    return getattr(ops.xp, fmt)


def request_for(options: Any, fmt: str) -> Request:
    """The :class:`Request` of validated core options (:class:`posenc.core.Options`) and a format name;
    ValueError for options outside the device algorithm's domain."""
    from . import _validate, core

    count, twice_half = _validate.plan(options.d_model, options.odd)
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
    lowest = float(omegas.min()) / (2 * math.pi) if len(omegas) else 1.0
    return FIRST_LIMBS + max(0, math.ceil((-math.log2(lowest) - 20) / LIMB_BITS))
