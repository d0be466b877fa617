"""The Triton kernel of :func:`posenc.torch.apply_rotary`: exact rotary cos/sin computed inside the
rotation of q and k, so no cos/sin table is written or read (imported on first use; it needs triton).

The cos/sin are :mod:`posenc.torch.kernels.algorithm`'s (the portable algorithm in Triton, bit for bit) for
integer positions. One program takes ``BLOCK_L`` positions of one batch row and every frequency: it
evaluates A·sin, A·cos of each (position, frequency), settles the block's uncertain roundings in the kernel
(:func:`~posenc.torch.kernels.algorithm.exact_values`), then rotates the pairs of every head of q and of k,
a tile of heads at a time, writes them, and copies the features past ``rotary_dim``. Where the batch rows
share their positions (ids of shape (1, L), or expanded), one program rotates several batch rows with the
same cos/sin, so the exact evaluation is not repeated per row. The rotation is
:func:`posenc.rope.arrays.rotate`'s float32 arithmetic, ``x1·cos - x2·sin`` and ``x2·cos + x1·sin``, each
product and the sum rounded (the launcher turns floating-point contraction off: a fused multiply-add would
round once), then rounded once to the tensor's dtype. Tensors travel as their integer bit patterns (float32
as int32, float16 and bfloat16 as int16): features past ``rotary_dim`` are copied bit for bit, and bfloat16
is rounded here with integer operations (ties to even, as torch does; the Triton interpreter's own float32
-> bfloat16 cast truncates).
"""

from __future__ import annotations

import triton
import triton.language as tl

from .algorithm import _load, _nan, _store, exact_values, split_positions

#: float32's significand bits (with the implicit one) and smallest normal exponent (host.FORMATS).
_PRECISION = tl.constexpr(24)
_EMIN = tl.constexpr(-126)


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
                  KIND: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):  # fmt: skip
    """Every head's rows (of q, or of k), ``BLOCK_H`` heads at a time: rotary.rotate's ``x·cos +
    turn(x)·sin`` on the pairs (features i and i + n for "half", 2i and 2i + 1 for "interleaved"), the
    ``rest`` features past rotary_dim copied. ``zero`` is an int64 0, so that the head offsets are int64.
    A tile of heads makes each iteration's loads many and independent: one head at a time, a program would
    wait for one small load after another."""
    if INTERLEAVED:
        first = 2 * freqs
        second = 2 * freqs + 1
    else:
        first = freqs
        second = freqs + n_freq
    at1 = (rows[:, None] * stride_l + first[None, :] * stride_d)[None, :, :]
    at2 = (rows[:, None] * stride_l + second[None, :] * stride_d)[None, :, :]
    out1 = (rows[:, None] * out_l + first[None, :] * out_d)[None, :, :]
    out2 = (rows[:, None] * out_l + second[None, :] * out_d)[None, :, :]
    pairs_ok = (row_ok[:, None] & freq_ok[None, :])[None, :, :]
    cos = cos[None, :, :]
    sin = sin[None, :, :]
    for h0 in range(0, heads, BLOCK_H):
        head = zero + h0 + tl.arange(0, BLOCK_H)
        head_ok = (head < heads)[:, None, None]
        x_ptr_h = x_ptr + (head * stride_h)[:, None, None]
        out_ptr_h = out_ptr + (head * out_h)[:, None, None]
        mask = head_ok & pairs_ok
        x1 = _load_float(x_ptr_h + at1, mask, KIND)
        x2 = _load_float(x_ptr_h + at2, mask, KIND)
        # turn(x) = (-x2, x1): x1·cos + (-x2)·sin is x1·cos - x2·sin, bit for bit
        y1 = x1 * cos - x2 * sin
        y2 = x2 * cos + x1 * sin
        _store_float(out_ptr_h + out1, y1, mask, KIND)
        _store_float(out_ptr_h + out2, y2, mask, KIND)
        for start in range(0, rest, BLOCK_P):
            features = 2 * n_freq + start + tl.arange(0, BLOCK_P)
            keep = head_ok & row_ok[None, :, None] & (features < 2 * n_freq + rest)[None, None, :]
            at = rows[None, :, None] * stride_l + features[None, None, :] * stride_d
            bits = _load(x_ptr_h + at, keep, 0)
            _store(out_ptr_h + rows[None, :, None] * out_l + features[None, None, :] * out_d, bits, keep)


@triton.jit(do_not_specialize=["B", "batch_group", "L", "q_rest", "k_rest"])  # one compile for all sizes
def rotary_kernel(
    q_ptr, k_ptr, q_out_ptr, k_out_ptr, pos_ptr,
    reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
    sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    uncertain_ptr,
    B, batch_group, L, HQ, HK, q_rest, k_rest, n_freq,
    q_sb, q_sh, q_sl, q_sd, k_sb, k_sh, k_sl, k_sd,
    qo_sb, qo_sh, qo_sl, qo_sd, ko_sb, ko_sh, ko_sl, ko_sd,
    pos_sb, pos_sl,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr,
    TERMS_SETTLE: tl.constexpr, DELTA: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, INTERLEAVED: tl.constexpr,
    Q_KIND: tl.constexpr, K_KIND: tl.constexpr, BLOCK_L: tl.constexpr, BLOCK_F: tl.constexpr,
    BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    """q, k (B, H, L, D) views rotated by the exact rotary angles of the positions (B, L): program
    (l-block, g) evaluates its BLOCK_L x n_freq cos/sin once and rotates every head of q and of k of the
    batch rows g·batch_group .. (g + 1)·batch_group - 1 with them (batch_group > 1 only where the rows share
    their positions: a batch stride of 0). ``uncertain_ptr[program]`` gets the count of values the block
    settled (recomputed with M_SETTLE limbs)."""
    consts = (
        reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
        sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    )  # fmt: skip
    pid_l = tl.program_id(0)
    first_b = tl.program_id(1).to(tl.int64) * batch_group  # offsets in int64: tensors may pass 2**31 elements
    rows = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    freqs = tl.arange(0, BLOCK_F)
    row_ok = rows < L
    freq_ok = freqs < n_freq
    # |p| < 2**31 is valid, the others compute as 0 and give NaN
    p = _load(pos_ptr + first_b * pos_sb + rows.to(tl.int64) * pos_sl, row_ok, 0).to(tl.int64)
    negative, whole, _, _, valid = split_positions(p, p, row_ok, False, False)
    live = row_ok[:, None] & freq_ok[None, :]
    sin, cos, count = exact_values(
        negative[:, None], whole[:, None], None, None, freqs[None, :], freq_ok[None, :], live, consts, n_freq,
        M, TERMS, M_SETTLE, TERMS_SETTLE, True, DELTA, _PRECISION, _EMIN, False, HAS_AMPLITUDE, False, False,
    )  # fmt: skip
    tl.store(uncertain_ptr + tl.program_id(1) * tl.num_programs(0) + pid_l, count)
    sin = tl.where(valid[:, None], sin, _nan())
    cos = tl.where(valid[:, None], cos, _nan())
    rows = rows.to(tl.int64)
    zero = first_b * 0  # int64
    for g in range(batch_group):
        b = first_b + g
        if b < B:
            _rotate_heads(
                q_ptr + b * q_sb, q_out_ptr + b * qo_sb, HQ, q_sh, qo_sh, zero, rows, row_ok, freqs, freq_ok,
                cos, sin, q_sl, q_sd, qo_sl, qo_sd, q_rest, n_freq, INTERLEAVED, Q_KIND, BLOCK_HQ, BLOCK_P,
            )  # fmt: skip
            _rotate_heads(
                k_ptr + b * k_sb, k_out_ptr + b * ko_sb, HK, k_sh, ko_sh, zero, rows, row_ok, freqs, freq_ok,
                cos, sin, k_sl, k_sd, ko_sl, ko_sd, k_rest, n_freq, INTERLEAVED, K_KIND, BLOCK_HK, BLOCK_P,
            )  # fmt: skip
