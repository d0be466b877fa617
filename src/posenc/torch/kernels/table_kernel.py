"""The Triton kernels of a table on CUDA by angle addition, certified per element (imported on first use; it
needs triton): the device twin of the core's :mod:`posenc.core.addition`.

Row r of a table of positions ``start ..`` is z(start + aB + b) = z(start + aB) · z(b), with a = r // B and
b = r mod B: ``anchors`` holds the exact rows of positions start + a·B, ``first`` those of 0 .. B - 1, both in
float64 as [sin | cos] (the encode kernel's float64 output: within 1 ulp each). :func:`table_kernel`
computes, in float64 and with no fused multiply-add,

    S = sA cB + cA sB,    C = cA cB - sA sB,

within a per-frequency error band (:func:`_bands`, the core's bound). A value is *certain* when both ends of
v ± band round to the same bits of the output format: then so does the true value, which lies between. The
rounding of a float64 to float32 is the hardware's; to float16 and bfloat16 it goes through float32
rounded to odd (:func:`_odd32`), which gives the direct rounding (no double-rounding error). The certain
values are stored; a program whose block holds an uncertain one (a few in a million, and the zero sines of
position 0) counts them, and :func:`settle_kernel` recomputes just those blocks with the exact algorithm
(:func:`posenc.torch.kernels.encode_kernel.encode_block`), in a second launch: no host read, and the exact
code stays out of the fast kernel (its registers would cost the fast one its occupancy). The launcher is
:mod:`posenc.torch.kernels.table_launch`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .algorithm import _load, _store
from .encode_kernel import encode_block


@triton.jit
def _odd32(x):
    """The float32 bits of float64 ``x`` rounded to odd (inexact: the neighbour of RN32(x) toward x when
    RN32(x)'s last bit is even): rounding that to 16 bits gives x's own rounding (at least 2 bits more)."""
    t = x.to(tl.float32)
    back = t.to(tl.float64)
    bits = t.to(tl.int32, bitcast=True)
    even = (back != x) & ((bits & 1) == 0)
    away = (x > back) == (t > 0)  # x lies beyond t: the neighbour of larger magnitude
    return tl.where(even, tl.where(away, bits + 1, bits - 1), bits)


@triton.jit
def _rounded_bits(x, OUT_KIND: tl.constexpr):
    """The bits of float64 ``x`` rounded to nearest, ties to even, in the output format: 0 float32 (int32),
    1 float16 and 2 bfloat16 (int16, from :func:`_odd32`; bfloat16 on the bits, as the interpreter's own
    conversion truncates)."""
    if OUT_KIND == 0:
        return x.to(tl.float32).to(tl.int32, bitcast=True)
    elif OUT_KIND == 1:
        return _odd32(x).to(tl.float32, bitcast=True).to(tl.float16).to(tl.int16, bitcast=True)
    else:
        bits = _odd32(x)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).to(tl.int16)  # finite: no carry past the sign


@triton.jit
def _certified(v, band, OUT_KIND: tl.constexpr):
    """(bits, certain): the rounding of every real in v ± band, certain when both ends round alike."""
    high = _rounded_bits(v + band, OUT_KIND)
    return high, high == _rounded_bits(v - band, OUT_KIND)


@triton.jit
def _bands(rate_ptr, freqs, freq_ok, largest, block):
    """The error bands of the combined sine and cosine of each frequency (core.addition.addition_plan's): with
    |sA| <= min(1, |p| ω), |sB| <= min(1, (B - 1) ω) and every exact row within 1 ulp of float64 (relative)
    plus 2**-100, S and C are within 2**-50.4 (|sA cB| + |cA sB|) and 2**-50.4 (|cA cB| + |sA sB|); the
    bands are 2**-48 times bounds of those sums (ω from the turn rate's float32, 0.1% over), plus 2**-80."""
    omega = _load(rate_ptr + freqs, freq_ok, 0.0) * 6.2895  # 2π, 0.1% over
    small = 2.0 * tl.minimum(omega * (block - 1), 1.0)
    sin_band = 3.552713678800501e-15 * (tl.minimum(omega * largest, 1.0) + small) + 8.271806125530277e-25
    cos_band = 3.552713678800501e-15 * (1.0 + small) + 8.271806125530277e-25
    return sin_band.to(tl.float64), cos_band.to(tl.float64)


@triton.jit
def _store_bits(ptrs, bits, mask, OUT_KIND: tl.constexpr):
    """Store :func:`_rounded_bits` into the output as the settling kernel has it: float32, float16, or the
    int16 bits of bfloat16."""
    if OUT_KIND == 0:
        _store(ptrs, bits.to(tl.float32, bitcast=True), mask)
    elif OUT_KIND == 1:
        _store(ptrs, bits.to(tl.float16, bitcast=True), mask)
    else:
        _store(ptrs, bits, mask)


@triton.jit(do_not_specialize=["rows", "block", "largest"])  # one compile for all lengths
def table_kernel(
    anchor_ptr, first_ptr, rate_ptr, out_ptr, uncertain_ptr,
    rows, block, largest, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, width, d_model,
    band_floor,
    OUT_KIND: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr,
):  # fmt: skip
    """out (rows, d_model): program (r, f) combines rows r·BLOCK_R.. and frequencies f·BLOCK_F.. of the
    anchors (count, 2·n_freq) and first rows (block, 2·n_freq), stores the certain values where the layout
    puts them and the count of uncertain ones in ``uncertain_ptr[program]`` (:func:`settle_kernel` redoes
    those programs' blocks). ``largest``: the largest |position|; ``band_floor`` widens the bands (tests)."""
    pid_r = tl.program_id(0)
    pid_f = tl.program_id(1)
    row = pid_r.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    freqs = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    row_ok = row < rows
    freq_ok = freqs < n_freq
    live = row_ok[:, None] & freq_ok[None, :]
    a = row // block
    b = row - a * block
    anchor = anchor_ptr + (a * 2 * n_freq)[:, None] + freqs[None, :]
    first = first_ptr + (b * 2 * n_freq)[:, None] + freqs[None, :]
    sa = _load(anchor, live, 0.0)
    ca = _load(anchor + n_freq, live, 0.0)
    sb = _load(first, live, 0.0)
    cb = _load(first + n_freq, live, 0.0)
    sin_band, cos_band = _bands(rate_ptr, freqs, freq_ok, largest, block)
    sin_band = tl.maximum(sin_band, band_floor)[None, :]
    cos_band = tl.maximum(cos_band, band_floor)[None, :]
    sin, sin_ok = _certified(sa * cb + ca * sb, sin_band, OUT_KIND)
    cos, cos_ok = _certified(ca * cb - sa * sb, cos_band, OUT_KIND)
    uncertain = tl.sum(tl.sum((live & ~(sin_ok & cos_ok)).to(tl.int32), 1), 0)
    tl.store(uncertain_ptr + pid_r * tl.num_programs(1) + pid_f, uncertain)
    base = out_ptr + row[:, None] * d_model + stride * freqs[None, :]
    _store_bits(base + sin_offset, sin, live & (freqs < sin_columns)[None, :], OUT_KIND)
    _store_bits(base + cos_offset, cos, live & (freqs < cos_columns)[None, :], OUT_KIND)
    if pid_f == 0:  # odd="zero": +0 past the sines and cosines
        zero = tl.zeros((BLOCK_R,), dtype=tl.int32)
        if OUT_KIND != 0:
            zero = zero.to(tl.int16)
        for column in range(width, d_model):
            _store_bits(out_ptr + row * d_model + column, zero, row_ok, OUT_KIND)


@triton.jit(do_not_specialize=["start", "rows"])  # one compile for all lengths and starts
def settle_kernel(
    out_ptr, uncertain_ptr,
    reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
    sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    start, rows, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, d_model,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
    DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr, OUT_KIND: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr, SUB_R: tl.constexpr,
):  # fmt: skip
    """The blocks of :func:`table_kernel`'s programs that counted an uncertain value, recomputed exactly
    (positions start + row, SUB_R rows at a time) over what it stored; every other program reads its count
    and stops."""
    consts = (
        reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
        sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    )  # fmt: skip
    pid_r = tl.program_id(0)
    pid_f = tl.program_id(1)
    count = tl.load(uncertain_ptr + pid_r * tl.num_programs(1) + pid_f)
    if count > 0:
        freqs = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
        for sub in range(0, BLOCK_R, SUB_R):
            row = pid_r.to(tl.int64) * BLOCK_R + sub + tl.arange(0, SUB_R)
            row_ok = row < rows
            p = start + row
            encode_block(
                p, p, row, row_ok, freqs, out_ptr, consts, n_freq, sin_columns, cos_columns, sin_offset,
                cos_offset, stride, d_model, M, TERMS, M_SETTLE, TERMS_SETTLE, True, DELTA, PRECISION, EMIN,
                OUT_KIND, False, False, False, False,
            )  # fmt: skip
