"""The Triton kernel of :func:`posenc.torch.apply_rotary_exact`: exact rotary cos/sin computed inside the
rotation of q and k, so no cos/sin table is written or read (imported on first use; it needs triton).

It is :mod:`posenc.device`'s algorithm for integer positions, step for step and bit for bit, written over
Triton blocks instead of an array namespace. A fixed-point value is a tuple of ``m + 1`` int32 blocks (the
limbs ``L[0] + L[1] 2**-12 + ... + L[m] 2**-12m``), so every limb loop is unrolled (``tl.static_range``)
and every helper below is the function of the same name in :mod:`posenc.device.fixed_point`,
:mod:`posenc.device.evaluate` or :mod:`posenc.device.rounding`, which hold the error analysis.

One program takes ``BLOCK_L`` positions of one batch row and every frequency: it evaluates A·sin, A·cos of
each (position, frequency) with ``M`` limbs, recomputes the whole block with ``M_SETTLE`` limbs when any of
its roundings is uncertain (a scalar branch: about one value in 2**30 is; :mod:`posenc.device.settle`, but
with no capacity limit), then rotates the pairs of every head of q and of k and writes them, and copies the
features past ``rotary_dim``. The rotation is :func:`posenc.rope.arrays.rotate`'s float32 arithmetic,
``x1·cos - x2·sin`` and ``x2·cos + x1·sin``, each product and the sum rounded (the launcher turns
floating-point contraction off: a fused multiply-add would round once), then rounded once to the tensor's
dtype. Tensors travel as their integer bit patterns (float32 as int32, float16 and bfloat16 as int16):
features past ``rotary_dim`` are copied bit for bit, and bfloat16 is rounded here with integer operations
(ties to even, as torch does; the Triton interpreter's own float32 -> bfloat16 cast truncates).
"""

# Triton's compiler builds tuples by concatenation (no starred items) and decides constexpr conditions in
# if statements, not in conditional expressions:
# ruff: noqa: RUF005, SIM102, SIM108

from __future__ import annotations

import triton
import triton.language as tl

#: fixed_point.LIMB_BITS and its mask; host._PIECE_BITS; host._DIGITS + 1 (digits per host constant).
_LIMB_BITS = tl.constexpr(12)
_MASK = tl.constexpr(4095)
_PIECE_BITS = tl.constexpr(11)
_PIECE_MASK = tl.constexpr(2047)
_ROW = tl.constexpr(17)
#: float32's significand bits (with the implicit one) and smallest normal exponent (host.FORMATS).
_PRECISION = tl.constexpr(24)
_EMIN = tl.constexpr(-126)
_NAN = tl.constexpr(float("nan"))


# --- fixed_point.py --------------------------------------------------------------------------------------


@triton.jit
def _carry_round(v, N: tl.constexpr):
    """fixed_point._carry_round: one round of carries, every digit to [0, 4096) plus the carry of the digit
    below it (the integer part v[0] keeps its value)."""
    out = ()
    for t in tl.static_range(N):
        if t == 0:
            low = v[0]
        else:
            low = v[t] & _MASK  # v - ((v >> 12) << 12)
        if t + 1 < N:
            low = low + (v[t + 1] >> _LIMB_BITS)
        out = out + (low,)
    return out


@triton.jit
def _lazy(v, N: tl.constexpr):
    """fixed_point._lazy: two carry rounds."""
    return _carry_round(_carry_round(v, N), N)


@triton.jit
def _normalize(v, N: tl.constexpr):
    """fixed_point._normalize: exact carries, digits 1..N-1 in [0, 4096), the integer part in v[0]."""
    carry = v[0] * 0
    out = ()
    for j in tl.static_range(N - 1):
        value = v[N - 1 - j] + carry
        out = (value & _MASK,) + out
        carry = value >> _LIMB_BITS
    return (v[0] + carry,) + out


@triton.jit
def _mul(a, b, M: tl.constexpr):
    """fixed_point._mul: a · b to M fraction limbs (the column sums of the limb products, one guard
    column, two carry rounds, truncated)."""
    zero = a[0] * b[0] * 0
    columns = ()
    for c in tl.static_range(M + 2):
        column = zero
        for i in tl.static_range(M + 1):
            if c - i >= 0:
                if c - i <= M:
                    column = column + a[i] * b[c - i]
        columns = columns + (column,)
    return _lazy(columns, M + 2)[: M + 1]


@triton.jit
def _negate(v, N: tl.constexpr):
    out = ()
    for t in tl.static_range(N):
        out = out + (-v[t],)
    return out


@triton.jit
def _select(condition, a, b, N: tl.constexpr):
    """``ops.where(condition[..., None], a, b)`` limb by limb."""
    out = ()
    for t in tl.static_range(N):
        out = out + (tl.where(condition, a[t], b[t]),)
    return out


@triton.jit
def _magnitude(v, N: tl.constexpr):
    """fixed_point._magnitude: (v < 0, |v| normalised)."""
    v = _normalize(v, N)
    negative = v[0] < 0
    return negative, _select(negative, _normalize(_negate(v, N), N), v, N)


@triton.jit
def _signed_sum(negative_a, a, negative_b, b, N: tl.constexpr):
    """fixed_point._signed_sum of two (negative, magnitude) terms."""
    total = ()
    for t in tl.static_range(N):
        total = total + (tl.where(negative_a, -a[t], a[t]) + tl.where(negative_b, -b[t], b[t]),)
    return _magnitude(total, N)


@triton.jit
def _load(ptrs, mask, other):
    """``tl.load(ptrs, mask, other)`` for a block of pointers, the pointers carried through a loop of one
    iteration. Triton's coalescing pass (TritonGPUCoalesce) takes, for each load and store whose pointers
    an operation computes, the whole connected slice of the program around it: quadratic in the size of
    this kernel's unrolled arithmetic (minutes of compile time). Pointers that are loop arguments skip it."""
    opaque = tl.program_id(2)  # 0, unknown to the compiler
    carried = ptrs
    value = tl.full(ptrs.shape, other, ptrs.dtype.element_ty)
    for _ in range(opaque + 1):
        value = tl.load(carried, mask=mask, other=other)
        carried = carried + opaque
    return value


@triton.jit
def _store(ptrs, value, mask):
    """``tl.store(ptrs, value, mask)``, the pointers carried through a one-iteration loop (:func:`_load`)."""
    opaque = tl.program_id(2)
    carried = ptrs
    for _ in range(opaque + 1):
        tl.store(carried, value, mask=mask)
        carried = carried + opaque


@triton.jit
def _gather(ptr, row, N: tl.constexpr):
    """Digits 0..N-1 of the rows ``row`` (a block) of a host constant table (rows of 17 digits)."""
    out = ()
    for t in tl.static_range(N):
        out = out + (_load(ptr + row * _ROW + t, row >= 0, 0),)
    return out


@triton.jit
def _digits(ptr, row, N: tl.constexpr):
    """Digits 0..N-1 of row ``row`` (a number) of a host constant table (rows of 17 digits)."""
    out = ()
    for t in tl.static_range(N):
        out = out + (tl.load(ptr + row * _ROW + t),)
    return out


# --- evaluate.py ---------------------------------------------------------------------------------------


@triton.jit
def _evaluate(whole, freqs, freq_ok, reduce_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr, cos_neg_ptr,
              cos_ptr, n_freq, M: tl.constexpr, TERMS: tl.constexpr):  # fmt: skip
    """evaluate._evaluate for integer positions (no fraction, so no tiny turns and e = 0): sin and cos of
    2π · whole · c_i in fixed point, ((negative, |sin|), (negative, |cos|))."""
    # the reduction: frac(whole c) = Σ_j piece_j(whole) · digits of frac(2**11j c) (host.constants.reduce)
    columns = ()
    for t in tl.static_range(M + 2):
        column = whole * 0
        for j in tl.static_range(3):
            piece = (whole >> (_PIECE_BITS * j)) & _PIECE_MASK
            digit = _load(reduce_ptr + (j * n_freq + freqs) * _ROW + t, freq_ok, 0)
            column = column + piece * digit
        columns = columns + (column,)
    turn = _normalize(_lazy(columns, M + 2)[: M + 1], M + 1)
    turn = (turn[0] * 0,) + turn[1:]  # mod 1
    # k = round(256 r), s = r - k/256
    k = (turn[1] + 8) >> 4
    s_negative, s = _magnitude((turn[0], turn[1] - 16 * k) + turn[2:], M + 1)
    x = _mul(s, _digits(two_pi_ptr, 0, M + 1), M)
    z = _mul(x, x, M)
    sin_x, cos_x = _series(x, z, fact_ptr, M, TERMS)
    index = k & 255
    sk, ck = _gather(sin_ptr, index, M + 1), _gather(cos_ptr, index, M + 1)
    sk_negative = _load(sin_neg_ptr + index, index >= 0, 0) != 0
    ck_negative = _load(cos_neg_ptr + index, index >= 0, 0) != 0
    sin = _signed_sum(sk_negative, _mul(sk, cos_x, M), ck_negative != s_negative, _mul(ck, sin_x, M), M + 1)
    cos = _signed_sum(ck_negative, _mul(ck, cos_x, M), sk_negative == s_negative, _mul(sk, sin_x, M), M + 1)
    return sin, cos


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
def _round_fixed(magnitude, M: tl.constexpr, DELTA: tl.constexpr):
    """rounding.round_fixed to float32 with e = 0: (value, certain). Certain: no rounding midpoint lies
    within DELTA units of 2**-12M of the fixed-point value."""
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
    exponent = leading - _LIMB_BITS * M
    quantum = tl.maximum(exponent, _EMIN) - (_PRECISION - 1) + _LIMB_BITS * M
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
    # at most 24 significant bits: the float32 sum is exact, in any order
    value = rounded[0].to(tl.float32)
    for t in tl.static_range(1, M + 1):
        value = value + rounded[t].to(tl.float32) * (2.0 ** (-12 * t))
    return value, certain


@triton.jit
def _values(negative, whole, freqs, freq_ok, reduce_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr,
            cos_neg_ptr, cos_ptr, amplitude_ptr, n_freq, M: tl.constexpr, TERMS: tl.constexpr,
            DELTA: tl.constexpr, HAS_AMPLITUDE: tl.constexpr):  # fmt: skip
    """rounding._values: the rounded A·sin, A·cos (with the position's sign) and whether both roundings
    are certain."""
    (sin_negative, sin_magnitude), (cos_negative, cos_magnitude) = _evaluate(
        whole, freqs, freq_ok, reduce_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr, cos_neg_ptr, cos_ptr,
        n_freq, M, TERMS,
    )  # fmt: skip
    if HAS_AMPLITUDE:  # A sin, A cos: one more fixed-point product each
        amplitude = _digits(amplitude_ptr, 0, M + 1)
        sin_magnitude = _normalize(_mul(sin_magnitude, amplitude, M), M + 1)
        cos_magnitude = _normalize(_mul(cos_magnitude, amplitude, M), M + 1)
    sin, sin_ok = _round_fixed(sin_magnitude, M, DELTA)
    cos, cos_ok = _round_fixed(cos_magnitude, M, DELTA)
    sin = tl.where(sin_negative != negative, -sin, sin)
    cos = tl.where(cos_negative, -cos, cos)
    return sin, cos, sin_ok & cos_ok


# --- the rotation ----------------------------------------------------------------------------------------


@triton.jit
def _load_float(ptr, mask, KIND: tl.constexpr):
    """float32 values from a tensor's bit patterns: KIND 0 float32 (int32 bits), 1 float16, 2 bfloat16
    (int16 bits); every conversion exact."""
    bits = _load(ptr, mask, 0)
    if KIND == 0:
        return bits.to(tl.float32, bitcast=True)
    elif KIND == 1:
        return bits.to(tl.float16, bitcast=True).to(tl.float32)
    else:
        return ((bits.to(tl.int32) & 0xFFFF) << 16).to(tl.float32, bitcast=True)


@triton.jit
def _store_float(ptr, value, mask, KIND: tl.constexpr):
    """Store float32 values rounded once to the tensor's dtype (to nearest, ties to even) as bit patterns."""
    if KIND == 0:
        _store(ptr, value.to(tl.int32, bitcast=True), mask)
    elif KIND == 1:
        _store(ptr, value.to(tl.float16).to(tl.int16, bitcast=True), mask)
    else:
        # torch's float -> bfloat16 (c10 round_to_nearest_even): add 0x7FFF plus the kept lowest bit
        bits = value.to(tl.int32, bitcast=True)
        rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
        rounded = tl.where(value != value, 0x7FC0, rounded & 0xFFFF)
        _store(ptr, rounded.to(tl.int16), mask)


@triton.jit
def _rotate_heads(x_ptr, out_ptr, heads, stride_h, out_h, zero, rows, row_ok, freqs, freq_ok, cos, sin,
                  stride_l, stride_d, out_l, out_d, rest, n_freq, INTERLEAVED: tl.constexpr,
                  KIND: tl.constexpr, BLOCK_P: tl.constexpr):  # fmt: skip
    """Every head's rows (of q, or of k): rotary.rotate's ``x·cos + turn(x)·sin`` on the pairs (features i
    and i + n for "half", 2i and 2i + 1 for "interleaved"), the ``rest`` features past rotary_dim copied.
    ``zero`` is an int64 0, so that the head offsets are int64."""
    for h in range(heads):
        head = zero + h
        x_ptr_h = x_ptr + head * stride_h
        out_ptr_h = out_ptr + head * out_h
        mask = row_ok[:, None] & freq_ok[None, :]
        if INTERLEAVED:
            first = 2 * freqs
            second = 2 * freqs + 1
        else:
            first = freqs
            second = freqs + n_freq
        at1 = rows[:, None] * stride_l + first[None, :] * stride_d
        at2 = rows[:, None] * stride_l + second[None, :] * stride_d
        x1 = _load_float(x_ptr_h + at1, mask, KIND)
        x2 = _load_float(x_ptr_h + at2, mask, KIND)
        # turn(x) = (-x2, x1): x1·cos + (-x2)·sin is x1·cos - x2·sin, bit for bit
        y1 = x1 * cos - x2 * sin
        y2 = x2 * cos + x1 * sin
        out1 = rows[:, None] * out_l + first[None, :] * out_d
        out2 = rows[:, None] * out_l + second[None, :] * out_d
        _store_float(out_ptr_h + out1, y1, mask, KIND)
        _store_float(out_ptr_h + out2, y2, mask, KIND)
        for start in range(0, rest, BLOCK_P):
            features = 2 * n_freq + start + tl.arange(0, BLOCK_P)
            keep = row_ok[:, None] & (features < 2 * n_freq + rest)[None, :]
            bits = _load(x_ptr_h + rows[:, None] * stride_l + features[None, :] * stride_d, keep, 0)
            _store(out_ptr_h + rows[:, None] * out_l + features[None, :] * out_d, bits, keep)


@triton.jit
def rotary_kernel(
    q_ptr, k_ptr, q_out_ptr, k_out_ptr, pos_ptr,
    reduce_ptr, rate_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    uncertain_ptr,
    L, HQ, HK, q_rest, k_rest, n_freq,
    q_sb, q_sh, q_sl, q_sd, k_sb, k_sh, k_sl, k_sd,
    qo_sb, qo_sh, qo_sl, qo_sd, ko_sb, ko_sh, ko_sl, ko_sd,
    pos_sb, pos_sl,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr,
    TERMS_SETTLE: tl.constexpr, DELTA: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, INTERLEAVED: tl.constexpr,
    Q_KIND: tl.constexpr, K_KIND: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_F: tl.constexpr,
    BLOCK_P: tl.constexpr,
):  # fmt: skip
    """q, k (B, H, L, D) views rotated by the exact rotary angles of the positions (B, L): program
    (l-block, b) evaluates its BLOCK_L x n_freq cos/sin once and rotates every head of q and of k with
    them. ``uncertain_ptr[program]`` gets the count of values the block settled (recomputed with
    M_SETTLE limbs)."""
    pid_l = tl.program_id(0)
    b = tl.program_id(1).to(tl.int64)  # offsets in int64: tensors may pass 2**31 elements
    rows = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    freqs = tl.arange(0, BLOCK_F)
    row_ok = rows < L
    freq_ok = freqs < n_freq
    # positions.split_positions for integers: |p| < 2**31 is valid, the others compute as 0 and give NaN
    p = _load(pos_ptr + b * pos_sb + rows.to(tl.int64) * pos_sl, row_ok, 0).to(tl.int64)
    valid = (p < 2147483648) & (p > -2147483648)
    p = tl.where(valid, p, 0)
    negative = (p < 0)[:, None]
    whole = tl.where(p < 0, -p, p).to(tl.int32)[:, None]
    fmask = freq_ok[None, :]
    sin, cos, certain = _values(
        negative, whole, freqs[None, :], fmask, reduce_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr,
        cos_neg_ptr, cos_ptr, amplitude_ptr, n_freq, M, TERMS, DELTA, HAS_AMPLITUDE,
    )  # fmt: skip
    # pipeline.encode: a zero angle is exact (position 0, or a frequency of 0)
    zero_rate = _load(rate_ptr + freqs, freq_ok, 0.0) == 0.0
    certain = certain | (whole == 0) | zero_rate[None, :]
    uncertain = ~certain & row_ok[:, None] & fmask
    count = tl.sum(uncertain.to(tl.int32))
    if count > 0:  # settle.py: the block again with more limbs, the uncertain values taken from it
        sin_settled, cos_settled, _ = _values(
            negative, whole, freqs[None, :], fmask, reduce_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr, sin_ptr,
            cos_neg_ptr, cos_ptr, amplitude_ptr, n_freq, M_SETTLE, TERMS_SETTLE, DELTA, HAS_AMPLITUDE,
        )  # fmt: skip
        sin = tl.where(uncertain, sin_settled, sin)
        cos = tl.where(uncertain, cos_settled, cos)
    tl.store(uncertain_ptr + tl.program_id(1) * tl.num_programs(0) + pid_l, count)
    sin = tl.where(valid[:, None], sin, _NAN)
    cos = tl.where(valid[:, None], cos, _NAN)
    rows = rows.to(tl.int64)
    zero = b * 0  # int64
    _rotate_heads(
        q_ptr + b * q_sb, q_out_ptr + b * qo_sb, HQ, q_sh, qo_sh, zero, rows, row_ok, freqs, freq_ok,
        cos, sin, q_sl, q_sd, qo_sl, qo_sd, q_rest, n_freq, INTERLEAVED, Q_KIND, BLOCK_P,
    )  # fmt: skip
    _rotate_heads(
        k_ptr + b * k_sb, k_out_ptr + b * ko_sb, HK, k_sh, ko_sh, zero, rows, row_ok, freqs, freq_ok,
        cos, sin, k_sl, k_sd, ko_sl, ko_sd, k_rest, n_freq, INTERLEAVED, K_KIND, BLOCK_P,
    )  # fmt: skip
