"""The Triton kernel of ``torch.ops.posenc.exact`` on CUDA: the exact encodings of a block of positions in
one launch (imported on first use; it needs triton).

Each program takes ``BLOCK_R`` positions and ``BLOCK_F`` frequencies: it splits the positions (plus their
offsets, added exactly in int64), computes the correctly rounded sin and cos of every (position, frequency)
with :mod:`posenc.torch.kernels.algorithm` (the portable algorithm, bit for bit, the uncertain roundings
settled in the kernel) and stores them where the layout puts them: the sine of frequency i in column
``sin_offset + stride · i`` (i < sin_columns), its cosine in ``cos_offset + stride · i`` (i < cos_columns),
then +0 in the columns past them (odd="zero"). Invalid positions (NaN, ±inf, |p + offset| >= 2**31) give
rows of NaN. The launcher is :mod:`posenc.torch.kernels.encode_launch`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .algorithm import _load, _nan, _store, exact_values, split_positions


@triton.jit
def _store_values(ptrs, value, mask, OUT_KIND: tl.constexpr):
    """Store values the output format holds exactly: OUT_KIND 0 float32, 1 float16, 2 bfloat16 (as its
    bits: the top half of the float32's; the Triton interpreter's own cast truncates), 3 float64."""
    if OUT_KIND == 2:
        bits = (value.to(tl.int32, bitcast=True) >> 16).to(tl.int16)
        _store(ptrs, bits, mask)
    elif OUT_KIND == 1:
        _store(ptrs, value.to(tl.float16), mask)
    else:
        _store(ptrs, value, mask)


@triton.jit
def encode_block(
    p, offset, row, row_ok, freqs, out_ptr, consts, n_freq, sin_columns, cos_columns, sin_offset, cos_offset,
    stride, d_model,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
    SETTLE: tl.constexpr, DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr,
    OUT_KIND: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, HAS_FRACTION: tl.constexpr, WIDE: tl.constexpr,
    HAS_OFFSET: tl.constexpr,
):  # fmt: skip
    """The exact encodings of a (positions x frequencies) block, stored in ``out`` rows ``row`` (those with
    ``row_ok``): positions ``p`` (+ ``offset``) split, evaluated and rounded by
    :func:`~posenc.torch.kernels.algorithm.exact_values`, invalid ones as NaN. (count of values settled,
    valid positions). Also the body of :func:`posenc.torch.kernels.table_kernel.settle_kernel`."""
    freq_ok = freqs < n_freq
    negative, whole, fraction, fraction_negative, valid = split_positions(
        p, offset, row_ok, HAS_FRACTION, HAS_OFFSET
    )
    if HAS_FRACTION:
        fraction = fraction[:, None]
        fraction_negative = fraction_negative[:, None]
    live = row_ok[:, None] & freq_ok[None, :]
    sin, cos, count = exact_values(
        negative[:, None], whole[:, None], fraction, fraction_negative, freqs[None, :], freq_ok[None, :],
        live, consts, n_freq, M, TERMS, M_SETTLE, TERMS_SETTLE, SETTLE, DELTA, PRECISION, EMIN,
        OUT_KIND == 3, HAS_AMPLITUDE, HAS_FRACTION, WIDE,
    )  # fmt: skip
    sin = tl.where(valid[:, None], sin, _nan())
    cos = tl.where(valid[:, None], cos, _nan())
    base = out_ptr + row[:, None] * d_model
    sin_at = base + sin_offset + stride * freqs[None, :]
    cos_at = base + cos_offset + stride * freqs[None, :]
    _store_values(sin_at, sin, row_ok[:, None] & (freqs < sin_columns)[None, :], OUT_KIND)
    _store_values(cos_at, cos, row_ok[:, None] & (freqs < cos_columns)[None, :], OUT_KIND)
    return count, valid


@triton.jit(do_not_specialize=["rows"])  # one compile for every row count (see encode_launch)
def encode_kernel(
    pos_ptr, off_ptr, out_ptr,
    reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
    sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    uncertain_ptr,
    rows, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, width, d_model,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
    SETTLE: tl.constexpr, DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr,
    OUT_KIND: tl.constexpr, HAS_AMPLITUDE: tl.constexpr, HAS_FRACTION: tl.constexpr, WIDE: tl.constexpr,
    HAS_OFFSET: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr,
):  # fmt: skip
    """out (rows, d_model) = the encodings of positions (rows,) (+ offsets (rows,), int64): program
    (r, f) computes rows r·BLOCK_R.. and frequencies f·BLOCK_F..; ``uncertain_ptr[program]`` gets the
    count of values its block settled (recomputed with M_SETTLE limbs)."""
    consts = (
        reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
        sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    )  # fmt: skip
    pid_r = tl.program_id(0)
    pid_f = tl.program_id(1)
    row = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)  # int64: outputs may pass 2**31 elements
    freqs = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    row_ok = row < rows
    p = _load(pos_ptr + row, row_ok, 0)
    offset = p
    if HAS_OFFSET:
        offset = _load(off_ptr + row, row_ok, 0)
    count, valid = encode_block(
        p, offset, row, row_ok, freqs, out_ptr, consts, n_freq, sin_columns, cos_columns, sin_offset,
        cos_offset, stride, d_model, M, TERMS, M_SETTLE, TERMS_SETTLE, SETTLE, DELTA, PRECISION, EMIN,
        OUT_KIND, HAS_AMPLITUDE, HAS_FRACTION, WIDE, HAS_OFFSET,
    )  # fmt: skip
    tl.store(uncertain_ptr + pid_r * tl.num_programs(1) + pid_f, count)
    if pid_f == 0:  # odd="zero": +0 past the sines and cosines (NaN for an invalid position)
        zero = tl.where(valid, 0.0, _nan())
        if OUT_KIND == 3:
            zero = zero.to(tl.float64)
        for column in range(width, d_model):
            _store_values(out_ptr + row * d_model + column, zero, row_ok, OUT_KIND)
