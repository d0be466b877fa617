"""The Triton kernel of :func:`posenc.torch.apply_rotary` by position ids: q and k rotated by the exact
rotary cos/sin of their positions, read as float32 [sin | cos] rows of the distinct positions (computed just
before by angle addition or the exact kernel: :func:`posenc.torch.fused_rotary.launch`), in one pass over q
and k at the speed of a copy (imported on first use; it needs triton).

One program takes ``BLOCK_L`` positions of one batch row and ``BLOCK_H`` heads of q or of k: it loads the
rows' cos/sin once, then for each head loads the pairs (features i and i + n for "half", 2i and 2i + 1 for
"interleaved"), rotates them, stores them, and copies the features past ``rotary_dim``. The tile's addresses
are a 64-bit base (batch row, head, first position) plus 32-bit offsets within the tile (the launcher checks
they fit), so a thread holds few registers and many loads are in flight. The rotation is
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

# --- the rotation ----------------------------------------------------------------------------------------


@triton.jit
def _load_float(ptr, mask, KIND: tl.constexpr):
    """float32 values from a tensor's bit patterns: KIND 0 float32 (int32 bits), 1 float16, 2 bfloat16
    (int16 bits); every conversion exact. Plain loads and stores here (not fixed_point's loop-carried ones,
    which keep the exact algorithm's compile quick): the coalescing pass makes them wide, and the grid's
    third axis is the batch row, not the 0 those helpers count on."""
    bits = tl.load(ptr, mask=mask, other=0)
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
        tl.store(ptr, value.to(tl.int32, bitcast=True), mask=mask)
    elif KIND == 1:
        tl.store(ptr, value.to(tl.float16).to(tl.int16, bitcast=True), mask=mask)
    else:
        # torch's float -> bfloat16 (c10 round_to_nearest_even): add 0x7FFF plus the kept lowest bit
        bits = value.to(tl.int32, bitcast=True)
        rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
        rounded = tl.where(value != value, 0x7FC0, rounded & 0xFFFF)
        tl.store(ptr, rounded.to(tl.int16), mask=mask)


@triton.jit
def _rotate_tile(x_ptr, out_ptr, heads, stride_h, stride_l, stride_d, out_h, out_l, out_d, local, first,
                 second, n_freq, pairs_ok, row_ok, cos, sin, rest, INTERLEAVED: tl.constexpr,
                 KIND: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr):  # fmt: skip
    """``heads`` (<= BLOCK_H) heads from the 64-bit bases ``x_ptr``/``out_ptr`` (the tile's first head and
    position): the pairs (features ``first``, ``second``) of rows ``local`` rotated, the ``rest`` features
    past them copied; offsets within the tile are 32-bit. The heads are unrolled, one after another."""
    at1 = local[:, None] * stride_l + first[None, :] * stride_d
    at2 = local[:, None] * stride_l + second[None, :] * stride_d
    out1 = local[:, None] * out_l + first[None, :] * out_d
    out2 = local[:, None] * out_l + second[None, :] * out_d
    for h in tl.static_range(BLOCK_H):
        if h < heads:
            x_h = x_ptr + h * stride_h
            o_h = out_ptr + h * out_h
            x1 = _load_float(x_h + at1, pairs_ok, KIND)
            x2 = _load_float(x_h + at2, pairs_ok, KIND)
            # turn(x) = (-x2, x1): x1·cos + (-x2)·sin is x1·cos - x2·sin, bit for bit
            _store_float(o_h + out1, x1 * cos - x2 * sin, pairs_ok, KIND)
            _store_float(o_h + out2, x2 * cos + x1 * sin, pairs_ok, KIND)
            for start in range(0, rest, BLOCK_P):
                features = 2 * n_freq + start + tl.arange(0, BLOCK_P)
                keep = row_ok[:, None] & (features < 2 * n_freq + rest)[None, :]
                at = local[:, None] * stride_l + features[None, :] * stride_d
                bits = tl.load(x_h + at, mask=keep, other=0)
                tl.store(o_h + local[:, None] * out_l + features[None, :] * out_d, bits, mask=keep)


@triton.jit(do_not_specialize=["L", "q_rest", "k_rest"])  # one compile for all sequence lengths
def rotate_kernel(
    q_ptr, k_ptr, q_out_ptr, k_out_ptr, cs_ptr,
    L, HQ, HK, q_rest, k_rest, n_freq,
    q_sb, q_sh, q_sl, q_sd, k_sb, k_sh, k_sl, k_sd,
    qo_sb, qo_sh, qo_sl, qo_sd, ko_sb, ko_sh, ko_sl, ko_sd,
    cs_sb, cs_sl,
    INTERLEAVED: tl.constexpr, Q_KIND: tl.constexpr, K_KIND: tl.constexpr, BLOCK_L: tl.constexpr,
    BLOCK_F: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_P: tl.constexpr,
):  # fmt: skip
    """q, k (B, H, L, D) views rotated by the float32 [sin | cos] rows ``cs`` ((B or 1) x L rows of
    2·n_freq, batch stride ``cs_sb``, 0 where the rows share their positions): program (l-block, head
    block, b) rotates BLOCK_H heads of q (head blocks first) or of k at positions l-block·BLOCK_L .. of
    batch row b."""
    pid_l = tl.program_id(0)
    pid_h = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)  # bases in int64: tensors may pass 2**31 elements
    first_row = pid_l.to(tl.int64) * BLOCK_L
    local = tl.arange(0, BLOCK_L)
    freqs = tl.arange(0, BLOCK_F)
    row_ok = first_row + local < L
    pairs_ok = row_ok[:, None] & (freqs < n_freq)[None, :]
    at = cs_ptr + b * cs_sb + first_row * cs_sl + (local[:, None] * cs_sl + freqs[None, :])
    sin = tl.load(at, mask=pairs_ok, other=0.0)
    cos = tl.load(at + n_freq, mask=pairs_ok, other=0.0)
    if INTERLEAVED:
        first = 2 * freqs
        second = 2 * freqs + 1
    else:
        first = freqs
        second = freqs + n_freq
    q_blocks = tl.cdiv(HQ, BLOCK_H)
    if pid_h < q_blocks:
        h0 = (pid_h * BLOCK_H).to(tl.int64)
        _rotate_tile(
            q_ptr + b * q_sb + h0 * q_sh + first_row * q_sl,
            q_out_ptr + b * qo_sb + h0 * qo_sh + first_row * qo_sl,
            HQ - h0, q_sh, q_sl, q_sd, qo_sh, qo_sl, qo_sd, local, first, second, n_freq, pairs_ok, row_ok,
            cos, sin, q_rest, INTERLEAVED, Q_KIND, BLOCK_H, BLOCK_P,
        )  # fmt: skip
    else:
        h0 = ((pid_h - q_blocks) * BLOCK_H).to(tl.int64)
        _rotate_tile(
            k_ptr + b * k_sb + h0 * k_sh + first_row * k_sl,
            k_out_ptr + b * ko_sb + h0 * ko_sh + first_row * ko_sl,
            HK - h0, k_sh, k_sl, k_sd, ko_sh, ko_sl, ko_sd, local, first, second, n_freq, pairs_ok, row_ok,
            cos, sin, k_rest, INTERLEAVED, K_KIND, BLOCK_H, BLOCK_P,
        )  # fmt: skip
