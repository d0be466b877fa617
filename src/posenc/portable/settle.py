"""The uncertain values (about one in 2**30) recomputed with more limbs, on the device: a compaction of their
indices of static size (``nonzero`` with a size), so no host sync; beyond its capacity a value keeps its
first rounding."""

from __future__ import annotations

from typing import Any

from .backend import Backend
from .host import SETTLE_EXTRA, Request
from .rounding import _values

#: Values whose first rounding is uncertain that one call settles on the device; more keep the first
#: rounding (each one must lie within 2**-54 of a rounding midpoint: no natural input comes close).
SETTLE_CAPACITY = 512


def _settle(
    ops: Backend, split_flat: list[Any], freq: dict[str, Any], values: tuple[Any, Any, Any], request: Request,
    float_dtype: Any,
) -> tuple[Any, Any]:  # fmt: skip
    """Recompute the (up to SETTLE_CAPACITY) uncertain values with SETTLE_EXTRA more limbs, on a compaction
    of their indices of static size: no host sync. ``values`` is (sin, cos, certain) of the first pass."""
    sin, cos, certain = values
    negative, whole, fraction, fraction_negative, _ = split_flat
    rows, count = sin.shape
    total = rows * count
    index = ops.nonzero_static(~certain.reshape(-1), SETTLE_CAPACITY, total)
    safe = ops.clip(index, 0, total - 1)
    row, col = safe // count, safe % count

    def gather(a: Any) -> Any:
        return None if a is None else a[row]

    picked = {
        **freq,
        "reduce": freq["reduce"][:, col],
        "rate": freq["rate"][col],
        "scaled_rate": freq["scaled_rate"][col],
        "steps": freq["steps"][col],
        "rate_float": freq["rate_float"][col],
    }
    new_sin, new_cos, _ = _values(
        ops,
        gather(negative),
        gather(whole),
        gather(fraction),
        gather(fraction_negative),
        picked,
        request.limbs + SETTLE_EXTRA,
        request.fmt,
        float_dtype,
    )
    sin = ops.scatter(sin.reshape(-1), index, new_sin).reshape(rows, count)
    cos = ops.scatter(cos.reshape(-1), index, new_cos).reshape(rows, count)
    return sin, cos
