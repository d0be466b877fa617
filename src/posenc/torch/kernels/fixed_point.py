"""Fixed-point arithmetic and memory access for posenc's Triton kernels: the twins of
:mod:`posenc.portable.fixed_point` (which holds the error analysis) over Triton blocks.

A fixed-point value is a tuple of ``m + 1`` int32 blocks (the limbs ``L[0] + L[1] 2**-12 + ... + L[m]
2**-12m``), so every limb loop is unrolled (``tl.static_range``); each helper is the function of the same
name in :mod:`posenc.portable.fixed_point`. Host constants are rows of ``_ROW`` digits.
"""

# Triton's compiler builds tuples by concatenation (no starred items) and decides constexpr conditions in
# if statements, not in conditional expressions:
# ruff: noqa: RUF005, SIM102, SIM108

from __future__ import annotations

import triton
import triton.language as tl

_LIMB_BITS = tl.constexpr(12)
_MASK = tl.constexpr(4095)
_PIECE_BITS = tl.constexpr(11)
_PIECE_MASK = tl.constexpr(2047)
_ROW = tl.constexpr(17)
#: float32's quiet NaN as bits: a NaN constexpr global would stop every launch (Triton checks at each call
#: that the globals a kernel read are unchanged, and NaN != NaN)
_NAN_BITS = tl.constexpr(0x7FC00000)


@triton.jit
def _nan():
    """A float32 quiet NaN (a scalar)."""
    return tl.full((), _NAN_BITS, tl.int32).to(tl.float32, bitcast=True)


# --- memory ------------------------------------------------------------------------------------------------


@triton.jit
def _load_all(ptrs, mask, other, N: tl.constexpr):
    """``tl.load(ptrs[t], mask, other)`` for each of the N blocks of pointers of the tuple ``ptrs``, the
    pointers carried through a loop of one iteration. Triton's coalescing pass (TritonGPUCoalesce) takes, for
    each load and store whose pointers an operation computes, the whole connected slice of the program
    around it: quadratic in the size of these kernels' unrolled arithmetic (minutes of compile time).
    Pointers that are loop arguments skip it. One loop for all N: LLVM's loop passes take time per loop
    over the whole kernel (a loop per load made the exact encode kernel's LLVM stage 30 s of its 40)."""
    opaque = tl.program_id(2)  # 0, unknown to the compiler
    values = ()
    for t in tl.static_range(N):
        values = values + (tl.full(ptrs[t].shape, other, ptrs[t].dtype.element_ty),)
    carried = ptrs
    for _ in range(opaque + 1):
        loaded = ()
        moved = ()
        for t in tl.static_range(N):
            loaded = loaded + (tl.load(carried[t], mask=mask, other=other),)
            moved = moved + (carried[t] + opaque,)
        values = loaded
        carried = moved
    return values


@triton.jit
def _load(ptrs, mask, other):
    """``tl.load(ptrs, mask, other)`` for a block of pointers, through :func:`_load_all`."""
    return _load_all((ptrs,), mask, other, 1)[0]


@triton.jit
def _store(ptrs, value, mask):
    """``tl.store(ptrs, value, mask)``, the pointers carried through a loop of one iteration (see
    :func:`_load_all`)."""
    opaque = tl.program_id(2)
    carried = ptrs
    for _ in range(opaque + 1):
        tl.store(carried, value, mask=mask)
        carried = carried + opaque


@triton.jit
def _row_pointers(ptr, row, N: tl.constexpr):
    """The pointers to digits 0..N-1 of the rows ``row`` (a block) of a host constant table."""
    out = ()
    for t in tl.static_range(N):
        out = out + (ptr + row * _ROW + t,)
    return out


@triton.jit
def _two_values_two_rows(a_ptr, b_ptr, a_rows, b_rows, row, ok, N: tl.constexpr):
    """``a_ptr[row]``, ``b_ptr[row]``, then digits 0..N-1 of the rows ``row`` of the host constant tables
    ``a_rows`` and ``b_rows``: one flat tuple of 2 + 2N blocks, loaded in one loop (:func:`_load_all`)."""
    pointers = (a_ptr + row, b_ptr + row) + _row_pointers(a_rows, row, N) + _row_pointers(b_rows, row, N)
    return _load_all(pointers, ok, 0, 2 * N + 2)


@triton.jit
def _digits(ptr, row, N: tl.constexpr):
    """Digits 0..N-1 of row ``row`` (a number) of a host constant table (rows of 17 digits)."""
    out = ()
    for t in tl.static_range(N):
        out = out + (tl.load(ptr + row * _ROW + t),)
    return out


# --- fixed_point.py ----------------------------------------------------------------------------------------


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
def _shift_down(v, limbs, M: tl.constexpr):
    """fixed_point._shift_down: v · 2**(-12 limbs) for a per-element whole number of limbs >= 0 (more
    than M gives 0)."""
    out = v
    for k in tl.static_range(1, M + 1):
        moved = ()
        for t in tl.static_range(M + 1):
            if t < k:
                moved = moved + (v[0] * 0,)
            else:
                moved = moved + (v[t - k],)
        out = _select(limbs == k, moved, out, M + 1)
    out = _select(limbs > M, _zeros(v, M + 1), out, M + 1)
    return _lazy(out, M + 1)


@triton.jit
def _zeros(v, N: tl.constexpr):
    out = ()
    for _ in tl.static_range(N):
        out = out + (v[0] * 0,)
    return out


@triton.jit
def _power_of_two(k, WIDE: tl.constexpr):
    """2**k (k an int32 block) as float64 when WIDE, else float32, built from its bits (Triton's float
    literals are float32: 2**768 is not one)."""
    if WIDE:
        return ((k.to(tl.int64) + 1023) << 52).to(tl.float64, bitcast=True)
    else:
        return ((k + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def _frexp_exponent(x, WIDE: tl.constexpr):
    """The exponent of ``frexp(x)`` for x >= 0 (x = f 2**exponent, f in [0.5, 1); 0 for x = 0), from the
    bits of x; a subnormal's from the bits of its significand converted (exactly) to a float."""
    if WIDE:
        bits = x.to(tl.int64, bitcast=True)
        biased = ((bits >> 52) & 0x7FF).to(tl.int32)
        significand = (bits & 0xFFFFFFFFFFFFF).to(tl.float64).to(tl.int64, bitcast=True)
        length = ((significand >> 52) & 0x7FF).to(tl.int32) - 1022  # bit length of the significand
        exponent = tl.where(biased == 0, length - 1074, biased - 1022)
    else:
        bits = x.to(tl.int32, bitcast=True)
        biased = (bits >> 23) & 0xFF
        significand = (bits & 0x7FFFFF).to(tl.float32).to(tl.int32, bitcast=True)
        length = ((significand >> 23) & 0xFF) - 126
        exponent = tl.where(biased == 0, length - 149, biased - 126)
    return tl.where(x == 0, 0, exponent)


@triton.jit
def _fraction_digits(fraction, M: tl.constexpr):
    """fixed_point._fraction_digits cut to M + 1 limbs (what _mul reads): 0, then digits 1..M of a float
    in [0, 1), each step exact."""
    out = (fraction.to(tl.int32) * 0,)
    rest = fraction
    for _ in tl.static_range(M):
        rest = rest * 4096.0
        digit = tl.floor(rest)
        rest = rest - digit
        out = out + (digit.to(tl.int32),)
    return out
