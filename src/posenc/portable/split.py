"""Step 1's split of the positions: sign, integer part and fraction, with an integer offset added exactly
(in int64, or in int32 under JAX without x64, overflow detected); NaN, ±inf and |p| >= 2**31 are marked
invalid."""

from __future__ import annotations

from typing import Any, NamedTuple

from .backend import Backend


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
    if ops.is_floating(positions.dtype):
        if positions.dtype.itemsize < 4:  # float16, bfloat16: float32 holds them exactly
            positions = ops.cast(positions, ops.float32)
        finite = xp.isfinite(positions) & (xp.abs(positions) < limit)
        clean = ops.where(finite, positions, 0)
        whole = xp.trunc(clean)
        fraction = clean - whole  # exact
        positions = whole
    whole, beyond = ops.wide_int(positions), ops.beyond_wide(positions)
    if offset is None:
        total, wrapped = whole, beyond
    else:
        added = ops.wide_int(offset)
        total = whole + added
        # int32 (JAX without x64) wraps around: the sum's sign then differs from both operands'
        wrapped = ((whole < 0) == (added < 0)) & ((total < 0) != (whole < 0))
        for past in (beyond, ops.beyond_wide(offset)):
            wrapped = wrapped if past is None else wrapped | past
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
