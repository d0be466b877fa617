"""Fixed-point arithmetic on int32 arrays with a trailing limb axis.

A value is an array ``v`` of shape (..., m + 1): ``v[..., 0]`` the integer part, ``v[..., t]`` the 12-bit
digit of 2**-12t, so ``v = L[0] + L[1] 2**-12 + ... + L[m] 2**-12m``; a product of two limbs needs 24 bits
and a column of products fits an int32. Arithmetic keeps digits *nearly* normalised (|digit| <= 4096 + 32,
two carry rounds per operation, enough for the next product to fit an int32); :func:`_normalize` carries
exactly, for the decisions (signs, the table index, the rounding). The loops over limbs go through
:meth:`Backend.loop <posenc.portable.backend.Backend.loop>`.
"""

from __future__ import annotations

from typing import Any

from .backend import Backend

#: Bits per limb, and the limb base.
LIMB_BITS = 12
_BASE = 1 << LIMB_BITS
_MASK = _BASE - 1


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
