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
position 0) flags the sub-blocks that hold them, and :func:`settle_kernel` recomputes just those with the
exact algorithm (:func:`posenc.torch.kernels.encode_kernel.encode_block`), in a second launch: no host
read, and the exact code stays out of the fast kernel (its registers would cost the fast one its
occupancy). The launcher is :mod:`posenc.torch.kernels.table_launch`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .algorithm import _load, split_positions
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
    omega = tl.load(rate_ptr + freqs, mask=freq_ok, other=0.0) * 6.2895  # 2π, 0.1% over
    small = 2.0 * tl.minimum(omega * (block - 1), 1.0)
    sin_band = 3.552713678800501e-15 * (tl.minimum(omega * largest, 1.0) + small) + 8.271806125530277e-25
    cos_band = 3.552713678800501e-15 * (1.0 + small) + 8.271806125530277e-25
    return sin_band.to(tl.float64), cos_band.to(tl.float64)


@triton.jit
def _store_bits(ptrs, bits, mask, OUT_KIND: tl.constexpr):
    """Store :func:`_rounded_bits` into the output as the settling kernel has it: float32, float16, or the
    int16 bits of bfloat16. Plain loads and stores in the combining kernels (no exact algorithm there, so
    the coalescing pass is quick and makes them wide); the exact code keeps fixed_point's."""
    if OUT_KIND == 0:
        tl.store(ptrs, bits.to(tl.float32, bitcast=True), mask=mask)
    elif OUT_KIND == 1:
        tl.store(ptrs, bits.to(tl.float16, bitcast=True), mask=mask)
    else:
        tl.store(ptrs, bits, mask=mask)


@triton.jit(do_not_specialize=["rows", "block", "largest"])  # one compile for all lengths
def table_kernel(
    anchor_ptr, first_ptr, rate_ptr, out_ptr, uncertain_ptr,
    rows, block, largest, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, width, d_model,
    band_floor,
    OUT_KIND: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr, SUB_R: tl.constexpr,
):  # fmt: skip
    """out (rows, d_model): program (r, f) combines rows r·BLOCK_R.. and frequencies f·BLOCK_F.. of the
    anchors (count, 2·n_freq) and first rows (block, 2·n_freq), stores the certain values where the layout
    puts them and which of its sub-blocks hold uncertain ones in ``uncertain_ptr[program]``
    (:func:`settle_kernel` redoes them). ``largest``: the largest |position|; ``band_floor`` widens the
    bands (tests)."""
    row, freqs, row_ok, freq_ok, live = _block(rows, n_freq, BLOCK_R, BLOCK_F)
    a = row // block
    b = row - a * block
    anchor = anchor_ptr + (a * 2 * n_freq)[:, None] + freqs[None, :]
    first = first_ptr + (b * 2 * n_freq)[:, None] + freqs[None, :]
    sa = tl.load(anchor, mask=live, other=0.0)
    ca = tl.load(anchor + n_freq, mask=live, other=0.0)
    sb = tl.load(first, mask=live, other=0.0)
    cb = tl.load(first + n_freq, mask=live, other=0.0)
    sin_band, cos_band = _bands(rate_ptr, freqs, freq_ok, largest, block)
    sin_band = tl.maximum(sin_band, band_floor)[None, :]
    cos_band = tl.maximum(cos_band, band_floor)[None, :]
    sin, sin_ok = _certified(sa * cb + ca * sb, sin_band, OUT_KIND)
    cos, cos_ok = _certified(ca * cb - sa * sb, cos_band, OUT_KIND)
    _store_block(
        out_ptr, uncertain_ptr, row, row_ok, freqs, live, sin, sin_ok, cos, cos_ok, sin_columns, cos_columns,
        sin_offset, cos_offset, stride, width, d_model, OUT_KIND, BLOCK_R, SUB_R,
    )  # fmt: skip


@triton.jit
def _block(rows, n_freq, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr):
    """A combining program's (rows, frequencies, row_ok, freq_ok, live): rows r·BLOCK_R.. and frequencies
    f·BLOCK_F.. of program (r, f)."""
    row = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    freqs = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    row_ok = row < rows
    freq_ok = freqs < n_freq
    return row, freqs, row_ok, freq_ok, row_ok[:, None] & freq_ok[None, :]


#: The bits of a combining program's flags (:func:`_store_block`): one a group of sub-blocks.
FLAG_BITS = tl.constexpr(31)


@triton.jit
def _either(a, b):
    return a | b


@triton.jit
def _flags(bad, BLOCK_R: tl.constexpr, SUB_R: tl.constexpr):
    """The flags of a block whose rows ``bad`` (BLOCK_R,) hold an uncertain value: bit g set where a row of
    sub-blocks g·G .. (g + 1)·G - 1 (SUB_R rows each, G = ceil(sub-blocks / FLAG_BITS)) does."""
    subs: tl.constexpr = (BLOCK_R + SUB_R - 1) // SUB_R
    group: tl.constexpr = (subs + FLAG_BITS - 1) // FLAG_BITS
    bit = tl.arange(0, BLOCK_R) // SUB_R // group
    return tl.reduce(bad.to(tl.int32) << bit, 0, _either)


@triton.jit
def _store_block(out_ptr, uncertain_ptr, row, row_ok, freqs, live, sin, sin_ok, cos, cos_ok, sin_columns,
                 cos_columns, sin_offset, cos_offset, stride, width, d_model, OUT_KIND: tl.constexpr,
                 BLOCK_R: tl.constexpr, SUB_R: tl.constexpr):  # fmt: skip
    """A combining program's end: its flags (:func:`_flags`: which of its sub-blocks of SUB_R rows hold an
    uncertain value; 0 for none) to ``uncertain_ptr[program]``, the sines and cosines where the layout puts
    them, and (the first column block) +0 past them."""
    pid_r = tl.program_id(0)
    pid_f = tl.program_id(1)
    bad = tl.max((live & ~(sin_ok & cos_ok)).to(tl.int32), 1)
    tl.store(uncertain_ptr + pid_r * tl.num_programs(1) + pid_f, _flags(bad, BLOCK_R, SUB_R))
    base = out_ptr + row[:, None] * d_model + stride * freqs[None, :]
    _store_bits(base + sin_offset, sin, live & (freqs < sin_columns)[None, :], OUT_KIND)
    _store_bits(base + cos_offset, cos, live & (freqs < cos_columns)[None, :], OUT_KIND)
    if pid_f == 0:  # odd="zero": +0 past the sines and cosines
        zero = tl.zeros((BLOCK_R,), dtype=tl.int32)
        if OUT_KIND != 0:
            zero = zero.to(tl.int16)
        for column in range(width, d_model):
            _store_bits(out_ptr + row * d_model + column, zero, row_ok, OUT_KIND)


@triton.jit
def _ids_at(
    row,
    row_ok,
    pos_ptr,
    off_ptr,
    inner,
    p_sb,
    p_sl,
    o_sb,
    o_sl,
    HAS_OFFSET: tl.constexpr,
    PLAIN: tl.constexpr,
):
    """(p, offset) of flat rows ``row`` of (outer, inner) ids: element (row // inner, row % inner) of the
    positions and offsets, each read through its own strides (0 where it is broadcast). ``PLAIN`` loads
    keep the coalescing pass (fast kernels); otherwise fixed_point's loop-carried loads (exact kernels)."""
    b = row // inner
    i = row - b * inner
    at = pos_ptr + b * p_sb + i * p_sl
    if PLAIN:  # noqa: SIM108 - Triton decides constexpr conditions in if statements
        p = tl.load(at, mask=row_ok, other=0).to(tl.int64)
    else:
        p = _load(at, row_ok, 0).to(tl.int64)
    offset = p
    if HAS_OFFSET:
        at = off_ptr + b * o_sb + i * o_sl
        if PLAIN:
            offset = tl.load(at, mask=row_ok, other=0).to(tl.int64)
        else:
            offset = _load(at, row_ok, 0).to(tl.int64)
    return p, offset


#: The position ids' levels: |p| < 2**31 is the sum of LEVELS parts of LEVEL_BITS bits each (the last part
#: has 7), part k from the exact rows of (0 .. 255)·256**k (ids_launch.levels).
LEVELS = tl.constexpr(4)
LEVEL_BITS = tl.constexpr(8)


@triton.jit(do_not_specialize=["rows"])  # one compile for every count of positions
def ids_kernel(
    pos_ptr, off_ptr, levels_ptr, rate_ptr, out_ptr, uncertain_ptr,
    rows, inner, p_sb, p_sl, o_sb, o_sl, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride,
    width, d_model, band_floor,
    OUT_KIND: tl.constexpr, HAS_OFFSET: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr,
    SUB_R: tl.constexpr,
):  # fmt: skip
    """out (rows, d_model) of integer positions (+ offsets) of (rows / inner, inner) ids (:func:`_ids_at`):
    program (r, f)
    forms z(|p|) = z(p0) z(p1·2**8) z(p2·2**16) z(p3·2**24) (p = Σ pk·256**k) from the levels' exact rows
    (``levels_ptr``: (LEVELS·256, 2·n_freq) float64 [sin | cos]), negates the sine of negative positions
    (exact), certifies each value against its error band and stores it as :func:`table_kernel` does
    (uncertain ones flagged for :func:`settle_kernel`; invalid positions NaN).

    The band: every level row is within 1 ulp (relative) + 2**-100 of its exact value and the products
    round each operation (no fused multiply-add), so S and C are within 7·2**-52 of the sum of the
    absolute terms of the expanded product plus 2**-97; that sum is at most min(e**(ω|p|) - 1, 4) <= 4
    min(1, ω|p|) for the sine and 4 for the cosine (|sin x| <= x, Σ pk = |p|, |c| + |s| <= √2). The bands
    are 2**-46 min(1, ω|p|) and 2**-46 (ω from the turn rate's float32, 0.1% over), plus 2**-96: over
    twice the bound. Invalid positions (|p + offset| >= 2**31) count as uncertain: the settling kernel
    stores their NaN rows."""
    row, freqs, row_ok, freq_ok, live = _block(rows, n_freq, BLOCK_R, BLOCK_F)
    p, offset = _ids_at(row, row_ok, pos_ptr, off_ptr, inner, p_sb, p_sl, o_sb, o_sl, HAS_OFFSET, True)
    negative, magnitude, _, _, valid = split_positions(p, offset, row_ok, False, HAS_OFFSET)
    width2 = 2 * n_freq
    at = levels_ptr + ((magnitude & 255).to(tl.int64) * width2)[:, None] + freqs[None, :]
    s = tl.load(at, mask=live, other=0.0)
    c = tl.load(at + n_freq, mask=live, other=0.0)
    for level in tl.static_range(1, LEVELS):
        part = (magnitude >> (LEVEL_BITS * level)) & 255
        # a part 0 is the row of position 0, (+0, 1): not read, and where every row of the block has it (a
        # prefill's ids have two such levels) the product is skipped, which leaves s and c as they are (s·1
        # + c·(+0) = s and c·1 - s·(+0) = c exactly: s is never -0 here)
        if tl.max(part, 0) != 0:
            at = levels_ptr + ((level * 256 + part).to(tl.int64) * width2)[:, None] + freqs[None, :]
            needed = live & (part != 0)[:, None]
            s_k = tl.load(at, mask=needed, other=0.0)
            c_k = tl.load(at + n_freq, mask=needed, other=1.0)
            s, c = s * c_k + c * s_k, c * c_k - s * s_k
    s = tl.where(negative[:, None], -s, s)
    omega = tl.load(rate_ptr + freqs, mask=freq_ok, other=0.0) * 6.2895  # 2π, 0.1% over
    turns = tl.minimum(omega[None, :] * magnitude.to(tl.float32)[:, None], 1.0)
    sin_band = tl.maximum(1.4210854715202004e-14 * turns + 1.262177448353619e-29, band_floor)
    cos_band = tl.maximum(1.4210854715202004e-14 + 1.262177448353619e-29 + turns * 0, band_floor)
    sin, sin_ok = _certified(s, sin_band.to(tl.float64), OUT_KIND)
    cos, cos_ok = _certified(c, cos_band.to(tl.float64), OUT_KIND)
    # sin 0 = +0 exactly (cos 0 = 1 is certain); invalid positions are left to the settling kernel, which
    # stores the encode kernel's NaN rows
    zero = (magnitude == 0)[:, None]
    sin = tl.where(zero, sin * 0, sin)
    sin_ok = (sin_ok | zero) & valid[:, None]
    cos_ok = cos_ok & valid[:, None]
    _store_block(
        out_ptr, uncertain_ptr, row, row_ok, freqs, live, sin, sin_ok, cos, cos_ok, sin_columns, cos_columns,
        sin_offset, cos_offset, stride, width, d_model, OUT_KIND, BLOCK_R, SUB_R,
    )  # fmt: skip


@triton.jit(do_not_specialize=["start", "rows"])  # one compile for all lengths and starts
def settle_kernel(
    out_ptr, uncertain_ptr, pos_ptr, off_ptr, inner, p_sb, p_sl, o_sb, o_sl,
    reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
    sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    start, rows, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, d_model,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
    DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr, OUT_KIND: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_F: tl.constexpr, SUB_R: tl.constexpr, SPLIT: tl.constexpr,
    HAS_IDS: tl.constexpr, HAS_OFFSET: tl.constexpr,
):  # fmt: skip
    """The sub-blocks of :func:`table_kernel`'s (or :func:`ids_kernel`'s) programs that flagged an
    uncertain value, recomputed exactly (positions start + row, or with ``HAS_IDS`` the ids of
    :func:`_ids_at`) over what it stored, SUB_R rows at a time: SPLIT programs a block (axis 0) share its
    sub-blocks, side by side (one program a block, a single uncertain value cost the block's serial
    evaluation, 0.3 ms on an H200: the tail of the call), and settle only those its flags name (each
    one's whole exact evaluation); every other program reads its block's flags (0) and stops."""
    consts = (
        reduce_ptr, rate_ptr, scaled_rate_ptr, steps_ptr, rate_float_ptr, two_pi_ptr, fact_ptr, sin_neg_ptr,
        sin_ptr, cos_neg_ptr, cos_ptr, amplitude_ptr,
    )  # fmt: skip
    subs: tl.constexpr = (BLOCK_R + SUB_R - 1) // SUB_R
    group: tl.constexpr = (subs + FLAG_BITS - 1) // FLAG_BITS
    pid_r = tl.program_id(0) // SPLIT
    share = tl.program_id(0) % SPLIT
    pid_f = tl.program_id(1)
    flags = tl.load(uncertain_ptr + pid_r * tl.num_programs(1) + pid_f)
    if flags != 0:
        freqs = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
        for sub in range(share, subs, SPLIT):
            if (flags >> (sub // group)) & 1:
                _settle_sub(
                    sub, pid_r, freqs, out_ptr, pos_ptr, off_ptr, inner, p_sb, p_sl, o_sb, o_sl, consts,
                    start, rows, n_freq, sin_columns, cos_columns, sin_offset, cos_offset, stride, d_model, M,
                    TERMS, M_SETTLE, TERMS_SETTLE, DELTA, PRECISION, EMIN, OUT_KIND, BLOCK_R, SUB_R, HAS_IDS,
                    HAS_OFFSET,
                )  # fmt: skip


@triton.jit
def _settle_sub(
    sub, pid_r, freqs, out_ptr, pos_ptr, off_ptr, inner, p_sb, p_sl, o_sb, o_sl, consts, start, rows, n_freq,
    sin_columns, cos_columns, sin_offset, cos_offset, stride, d_model,
    M: tl.constexpr, TERMS: tl.constexpr, M_SETTLE: tl.constexpr, TERMS_SETTLE: tl.constexpr,
    DELTA: tl.constexpr, PRECISION: tl.constexpr, EMIN: tl.constexpr, OUT_KIND: tl.constexpr,
    BLOCK_R: tl.constexpr, SUB_R: tl.constexpr, HAS_IDS: tl.constexpr, HAS_OFFSET: tl.constexpr,
):  # fmt: skip
    """Sub-block ``sub`` (SUB_R rows) of block ``pid_r``, recomputed exactly over what was stored."""
    local = sub * SUB_R + tl.arange(0, SUB_R)
    row = pid_r.to(tl.int64) * BLOCK_R + local
    row_ok = (row < rows) & (local < BLOCK_R)
    if HAS_IDS:
        p, offset = _ids_at(row, row_ok, pos_ptr, off_ptr, inner, p_sb, p_sl, o_sb, o_sl, HAS_OFFSET, False)
    else:
        p = start + row
        offset = p
    encode_block(
        p, offset, row, row_ok, freqs, out_ptr, consts, n_freq, sin_columns, cos_columns, sin_offset,
        cos_offset, stride, d_model, M, TERMS, M_SETTLE, TERMS_SETTLE, True, DELTA, PRECISION, EMIN,
        OUT_KIND, False, False, False, HAS_OFFSET,
    )  # fmt: skip
