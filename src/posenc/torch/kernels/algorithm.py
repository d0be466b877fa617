"""The portable algorithm (:mod:`posenc.portable`) in Triton: the exact per-element computation that the CUDA
kernels run, step for step and bit for bit (imported on first use; it needs triton).

Every helper below is the function of the same name in :mod:`posenc.portable.split`,
:mod:`posenc.portable.evaluate` or :mod:`posenc.portable.rounding`, which hold the error analysis, over Triton
blocks; fixed-point values are tuples of limb blocks (:mod:`posenc.torch.kernels.fixed_point`). The kernels
built on it: :mod:`posenc.torch.kernels.encode_kernel` (the encodings themselves) and
:mod:`posenc.torch.kernels.fused_kernel` (the fused rotary apply). Both take the host constants of
:func:`posenc.portable.host.constants` as int32 tensors (:func:`posenc.torch.kernels.common.constants_on`),
rows of ``_ROW`` digits.

Positions come as blocks ``(negative, whole, fraction, fraction_negative)`` (:func:`split_positions`, the
twin of :func:`posenc.portable.split_positions`): integer positions have no fraction (``HAS_FRACTION``
false); real ones carry their fraction in float32, or in float64 for float64 positions (``WIDE``).
"""

# Triton's compiler builds tuples by concatenation (no starred items) and decides constexpr conditions in
# if statements, not in conditional expressions:
# ruff: noqa: RUF005, SIM102

from __future__ import annotations

import triton
import triton.language as tl

from .fixed_point import (
    _LIMB_BITS,
    _PIECE_BITS,
    _PIECE_MASK,
    _ROW,
    _digits,
    _fraction_digits,
    _frexp_exponent,
    _lazy,
    _load,
    _load_all,
    _magnitude,
    _mul,
    _nan,
    _normalize,
    _power_of_two,
    _row_pointers,
    _select,
    _shift_down,
    _signed_sum,
    _store,
    _two_values_two_rows,
)

__all__ = ["_load", "_nan", "_store", "exact_values", "split_positions"]


# --- positions.py --------------------------------------------------------------------------------------


@triton.jit
def split_positions(p, offset, ok, HAS_FRACTION: tl.constexpr, HAS_OFFSET: tl.constexpr):
    """positions.split_positions of a block ``p`` (int64, or float32/float64 for real positions) plus an
    int64 ``offset`` block: (negative, whole (int32), fraction, fraction_negative, valid); NaN, ±inf,
    |p + offset| >= 2**31 and a sum that wraps around int64 are invalid (and computed as 0). For integer
    positions the fraction and its sign are placeholders (0 and False; triton 3.6 cannot return None in a
    tuple)."""
    if HAS_FRACTION:
        finite = (p == p) & (tl.abs(p) < 2147483648.0)
        clean = tl.where(finite & ok, p, 0.0)
        whole_float = tl.where(clean < 0, -tl.floor(-clean), tl.floor(clean))  # trunc
        fraction = clean - whole_float  # exact
        whole = whole_float.to(tl.int64)
    else:
        whole = tl.where(ok, p, 0)
    total = whole
    valid = (total < 2147483648) & (total > -2147483648)
    if HAS_OFFSET:
        total = whole + offset
        # int64 wraps around (ids and offsets of any int64 value): the sum's sign then differs from both
        # operands' (the portable twin's rule); 2**63 - 1 + 2**63 - 1 would otherwise be position -2
        kept = ((whole < 0) != (offset < 0)) | ((total < 0) == (whole < 0))
        valid = (total < 2147483648) & (total > -2147483648) & kept
    if HAS_FRACTION:
        valid = valid & finite
    total = tl.where(valid, total, 0)
    negative_whole = total < 0
    magnitude = tl.where(negative_whole, -total, total).to(tl.int32)
    if HAS_FRACTION:
        fraction = tl.where(valid, fraction, 0.0)
        # sign: the whole part's, or the fraction's when the whole part is 0; -0.0 is negative (IEEE)
        negative_zero = (clean == 0) & _sign_bit(clean)
        negative = tl.where(total == 0, (fraction < 0) | negative_zero, negative_whole)
        fraction_negative = (fraction < 0) != negative
        return negative, magnitude, tl.abs(fraction), fraction_negative, valid
    else:
        return negative_whole, magnitude, magnitude * 0, negative_whole & False, valid


@triton.jit
def _sign_bit(x):
    """signbit(x) for a float32 or float64 block."""
    if x.dtype == tl.float64:
        return x.to(tl.int64, bitcast=True) < 0
    else:
        return x.to(tl.int32, bitcast=True) < 0


# --- evaluate.py ---------------------------------------------------------------------------------------


@triton.jit
def _evaluate(whole, fraction, fraction_negative, freqs, freq_ok, consts, n_freq, M: tl.constexpr,
              TERMS: tl.constexpr, HAS_FRACTION: tl.constexpr, WIDE: tl.constexpr):  # fmt: skip
    """evaluate._evaluate: sin and cos of 2π (whole + fraction) c_i in fixed point,
    ((negative, |sin| 2**e), (negative, |cos|), e); e = 0 for integer positions. ``consts`` is
    (reduce, rate, scaled_rate, steps, rate_float, 2π, 1/k!, sin signs, sin digits, cos signs,
    cos digits, amplitude) pointers."""
    reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr = consts[0:5]
    two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr, cos_neg_ptr, cos_ptr = consts[5:11]
    # the reduction: frac(whole c) = Σ_j piece_j(whole) · digits of frac(2**11j c) (host.constants.reduce)
    reduce_digits = _load_all(
        _row_pointers(reduce_ptr, freqs, M + 2)
        + _row_pointers(reduce_ptr, n_freq + freqs, M + 2)
        + _row_pointers(reduce_ptr, 2 * n_freq + freqs, M + 2),
        freq_ok, 0, 3 * (M + 2),
    )  # fmt: skip
    columns = ()
    for t in tl.static_range(M + 2):
        column = whole * 0
        for j in tl.static_range(3):
            piece = (whole >> (_PIECE_BITS * j)) & _PIECE_MASK
            column = column + piece * reduce_digits[j * (M + 2) + t]
        columns = columns + (column,)
    turn = _lazy(columns, M + 2)[: M + 1]
    e = whole * 0
    if HAS_FRACTION:
        # tiny turns: whole = 0 and |f| c < 2**-12, scaled by 2**e = 2**12(s + u)
        loaded = _two_values_two_rows(
            rate_float_ptr, steps_ptr, scaled_rate_ptr, rate_ptr, freqs, freq_ok, M + 1
        )
        rate_float = loaded[0]
        tiny = (whole == 0) & (fraction * rate_float < 0.0001220703125)  # 2**-13
        exponent = _frexp_exponent(fraction, WIDE)
        s = tl.where(tiny & (exponent < 0), (-exponent) // _LIMB_BITS, 0)
        scaled = fraction
        if WIDE:
            s = tl.minimum(s, 127)
            for b in tl.static_range(7):
                up = _power_of_two(s * 0 + _LIMB_BITS * (1 << b), WIDE)
                scaled = tl.where((s & (1 << b)) != 0, scaled * up, scaled)
        else:
            s = tl.minimum(s, 15)
            for b in tl.static_range(4):
                up = _power_of_two(s * 0 + _LIMB_BITS * (1 << b), WIDE)
                scaled = tl.where((s & (1 << b)) != 0, scaled * up, scaled)
        u = tl.where(tiny, loaded[1], 0)
        e = (s + u) * _LIMB_BITS
        digits = _fraction_digits(scaled, M)
        rate = _select(tiny, loaded[2 : M + 3], loaded[M + 3 :], M + 1)
        product = _mul(digits, rate, M)
        summed = ()
        for t in tl.static_range(M + 1):
            summed = summed + (turn[t] + tl.where(fraction_negative, -product[t], product[t]),)
        turn = _normalize(summed, M + 1)
        turn = (tl.where(tiny, turn[0], 0),) + turn[1:]  # mod 1 (a tiny turn keeps its scaled whole part)
        k = tl.where(tiny, 0, (turn[1] + 8) >> 4)
    else:
        turn = _normalize(turn, M + 1)
        turn = (turn[0] * 0,) + turn[1:]  # mod 1
        k = (turn[1] + 8) >> 4
    # k = round(256 r), s = r - k/256
    s_negative, s_magnitude = _magnitude((turn[0], turn[1] - 16 * k) + turn[2:], M + 1)
    x = _mul(s_magnitude, _digits(two_pi_ptr, 0, M + 1), M)
    z = _mul(x, x, M)
    if HAS_FRACTION:
        z = _shift_down(z, 2 * (e // _LIMB_BITS), M)
    sin_x, cos_x = _series(x, z, fact_ptr, M, TERMS)
    index = k & 255
    always = index >= 0
    loaded = _two_values_two_rows(sin_neg_ptr, cos_neg_ptr, sin_ptr, cos_ptr, index, always, M + 1)
    sk_negative, ck_negative = loaded[0] != 0, loaded[1] != 0
    sk, ck = loaded[2 : M + 3], loaded[M + 3 :]
    sin = _signed_sum(sk_negative, _mul(sk, cos_x, M), ck_negative != s_negative, _mul(ck, sin_x, M), M + 1)
    cos = _signed_sum(ck_negative, _mul(ck, cos_x, M), sk_negative == s_negative, _mul(sk, sin_x, M), M + 1)
    return sin, cos, e


@triton.jit
def _series(x, z, fact_ptr, M: tl.constexpr, TERMS: tl.constexpr):
    """evaluate._series: sin x = x (1 - z (1/3! - z (1/5! - ...))), cos x = 1 - z (1/2! - z (1/4! - ...)),
    TERMS terms (the host counts them: the tail below 2**-12M-8)."""
    zero = z[0] * 0
    p = ()
    q = ()
    for t in tl.static_range(M + 1):
        p = p + (tl.load(fact_ptr + (2 * TERMS + 1) * _ROW + t) + zero,)
        q = q + (tl.load(fact_ptr + 2 * TERMS * _ROW + t) + zero,)
    for j in tl.static_range(TERMS):
        zp = _mul(z, p, M)
        zq = _mul(z, q, M)
        p_next = ()
        q_next = ()
        for t in tl.static_range(M + 1):
            p_next = p_next + (tl.load(fact_ptr + (2 * (TERMS - 1 - j) + 1) * _ROW + t) - zp[t],)
            q_next = q_next + (tl.load(fact_ptr + 2 * (TERMS - 1 - j) * _ROW + t) - zq[t],)
        p = _lazy(p_next, M + 1)
        q = _lazy(q_next, M + 1)
    return _mul(x, p, M), q


# --- rounding.py ---------------------------------------------------------------------------------------


@triton.jit
def _limb_width(t: tl.constexpr):
    """round_fixed's ``widths``: the bits a limb holds (the integer part 30, a digit 12)."""
    if t == 0:
        return 30
    else:
        return 12


@triton.jit
def _round_fixed(magnitude, e, M: tl.constexpr, DELTA: tl.constexpr, PRECISION: tl.constexpr,
                 EMIN: tl.constexpr, OUT_WIDE: tl.constexpr, HAS_FRACTION: tl.constexpr):  # fmt: skip
    """rounding.round_fixed of ``magnitude · 2**-e`` to the format of PRECISION significand bits and
    smallest normal exponent EMIN: (value, certain), the value a float32 (float64 when OUT_WIDE) that holds
    it exactly. Certain: no rounding midpoint lies within DELTA units of 2**-12M of the fixed-point value."""
    top = magnitude[0] * 0 + (M + 1)
    for j in tl.static_range(M + 1):
        top = tl.where(magnitude[M - j] != 0, M - j, top)
    found = top <= M
    top_value = magnitude[0] * 0
    for t in tl.static_range(M + 1):
        top_value = top_value + tl.where(top == t, magnitude[t], 0)
    bit = top_value * 0
    for b in tl.static_range(1, 23):
        bit = bit + (top_value >= (1 << b)).to(tl.int32)
    # bit positions counted from the last digit (2**-12M = bit 0)
    leading = _LIMB_BITS * (M - top) + bit
    exponent = leading - _LIMB_BITS * M - e
    quantum = tl.maximum(exponent, EMIN) - (PRECISION - 1) + e + _LIMB_BITS * M
    low = tl.maximum(quantum, 0)
    kept = ()
    difference = ()
    for t in tl.static_range(M + 1):
        start = _LIMB_BITS * (M - t)
        width = _limb_width(t)
        drop = tl.minimum(tl.maximum(low - start, 0), width)
        kept_t = (magnitude[t] >> drop) << drop
        at = low - 1 - start
        half = tl.where((at >= 0) & (at < width), 1 << tl.minimum(tl.maximum(at, 0), width - 1), 0)
        kept = kept + (kept_t,)
        difference = difference + (magnitude[t] - kept_t - half,)
    distance_negative, distance = _magnitude(difference, M + 1)
    beyond = distance[M] > DELTA
    nonzero = distance[M] != 0
    for t in tl.static_range(M):
        beyond = beyond | (distance[t] != 0)
        nonzero = nonzero | (distance[t] != 0)
    up = ~distance_negative & nonzero
    certain = beyond & (quantum >= 1) & found
    # far below the smallest subnormal: rounds to 0, certainly
    underflow = (leading + 8 < quantum) & (quantum >= 9) & found
    certain = certain | underflow
    up = up & ~underflow
    rounded = ()
    for t in tl.static_range(M + 1):
        start = _LIMB_BITS * (M - t)
        width = _limb_width(t)
        at = low - start
        bump = tl.where(up & (at >= 0) & (at < width), 1 << tl.minimum(tl.maximum(at, 0), width - 1), 0)
        rounded = rounded + (tl.where(underflow, 0, kept[t]) + bump,)
    rounded = _normalize(rounded, M + 1)
    # at most PRECISION significant bits: the float sum is exact, in any order
    if OUT_WIDE:
        value = rounded[0].to(tl.float64)
        for t in tl.static_range(1, M + 1):
            value = value + rounded[t].to(tl.float64) * (2.0 ** (-12 * t))
    else:
        value = rounded[0].to(tl.float32)
        for t in tl.static_range(1, M + 1):
            value = value + rounded[t].to(tl.float32) * (2.0 ** (-12 * t))
    if HAS_FRACTION:  # the tiny turns' scale 2**-e, in steps that stay in float32's range (exact)
        steps = e // _LIMB_BITS
        for b in tl.static_range(8):
            scaled = value
            for _ in tl.static_range(max(1, (1 << b) // 8)):
                scaled = scaled * (2.0 ** (-12 * min(1 << b, 8)))
            value = tl.where((steps & (1 << b)) != 0, scaled, value)
    return value, certain


@triton.jit
def _values(negative, whole, fraction, fraction_negative, freqs, freq_ok, consts, n_freq, M: tl.constexpr,
            TERMS: tl.constexpr, DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr,
            OUT_WIDE: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, HAS_FRACTION: tl.constexpr,
            WIDE: tl.constexpr):  # fmt: skip
    """rounding._values: the rounded A·sin, A·cos (with the position's sign) and whether both roundings
    are certain."""
    sin_pair, cos_pair, e = _evaluate(
        whole, fraction, fraction_negative, freqs, freq_ok, consts, n_freq, M, TERMS, HAS_FRACTION, WIDE
    )  # triton 3.6 cannot unpack nested tuples in one assignment
    sin_negative, sin_magnitude = sin_pair
    cos_negative, cos_magnitude = cos_pair
    if HAS_AMPLITUDE:  # A sin, A cos: one more fixed-point product each
        amplitude = _digits(consts[11], 0, M + 1)
        sin_magnitude = _normalize(_mul(sin_magnitude, amplitude, M), M + 1)
        cos_magnitude = _normalize(_mul(cos_magnitude, amplitude, M), M + 1)
    sin, sin_ok = _round_fixed(sin_magnitude, e, M, DELTA, PRECISION, EMIN, OUT_WIDE, HAS_FRACTION)
    # the cosine is not scaled by the tiny turns' 2**-e (so no rescaling block: False)
    cos, cos_ok = _round_fixed(cos_magnitude, e * 0, M, DELTA, PRECISION, EMIN, OUT_WIDE, False)
    sin = tl.where(sin_negative != negative, -sin, sin)
    cos = tl.where(cos_negative, -cos, cos)
    return sin, cos, sin_ok & cos_ok


@triton.jit
def exact_values(negative, whole, fraction, fraction_negative, freqs, freq_ok, live, consts, n_freq,
                 M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
                 SETTLE: tl.constexpr, DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr,
                 OUT_WIDE: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, HAS_FRACTION: tl.constexpr,
                 WIDE: tl.constexpr):  # fmt: skip
    """The correctly rounded A·sin, A·cos of a (positions x frequencies) block, and how many of its
    ``live`` values were uncertain after the first evaluation (M limbs). pipeline.encode: a zero angle is
    exact; settle.py: when any value is uncertain the block is evaluated again with M_SETTLE limbs and the
    uncertain values are taken from it (a scalar branch, about one value in 2**30; no capacity limit)."""
    sin, cos, certain = _values(
        negative, whole, fraction, fraction_negative, freqs, freq_ok, consts, n_freq, M, TERMS, DELTA,
        PRECISION, EMIN, OUT_WIDE, HAS_AMPLITUDE, HAS_FRACTION, WIDE,
    )  # fmt: skip
    zero = whole == 0
    if HAS_FRACTION:
        zero = zero & (fraction == 0)
    zero_rate = _load(consts[4] + freqs, freq_ok, 0.0) == 0.0
    certain = certain | zero | zero_rate
    uncertain = ~certain & live
    count = tl.sum(tl.sum(uncertain.to(tl.int32), 1), 0)
    if SETTLE:
        if count > 0:
            sin_settled, cos_settled, _ = _values(
                negative, whole, fraction, fraction_negative, freqs, freq_ok, consts, n_freq, M_SETTLE,
                TERMS_SETTLE, DELTA, PRECISION, EMIN, OUT_WIDE, HAS_AMPLITUDE, HAS_FRACTION, WIDE,
            )  # fmt: skip
            sin = tl.where(uncertain, sin_settled, sin)
            cos = tl.where(uncertain, cos_settled, cos)
    return sin, cos, count
