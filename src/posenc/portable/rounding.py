"""Step 3: the fixed-point sine and cosine rounded to the output format (exact integer bit operations, ties
to even), each with whether its rounding is certain (no rounding midpoint within the error bound)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .backend import Backend
from .evaluate import _evaluate
from .fixed_point import LIMB_BITS, _magnitude, _mul, _normalize
from .host import FORMATS

#: Error bound of the fixed-point evaluation, in units of its last digit (the analysis in :func:`_evaluate`
#: gives < 24; the margin is for safety).
DELTA_UNITS = 64


def round_fixed(ops: Backend, magnitude: Any, e: Any, m: int, fmt: str, float_dtype: Any) -> tuple[Any, Any]:
    """Round the normalised fixed-point ``magnitude · 2**-e`` to ``fmt`` (to nearest, ties to even):
    (value as ``float_dtype``, certain). Certain: no rounding midpoint lies within DELTA_UNITS of it."""
    precision, emin = FORMATS[fmt]
    limbs = ops.asarray(np.arange(m + 1, dtype=np.int32), magnitude)
    nonzero = magnitude != 0
    top = ops.min_last(ops.where(nonzero, limbs, m + 1))
    found = top <= m
    top_value = ops.sum_last(ops.where(limbs == top[..., None], magnitude, 0))
    powers = ops.asarray(np.array([1 << b for b in range(1, 23)], dtype=np.int32), magnitude)
    bit = ops.sum_last(ops.cast(top_value[..., None] >= powers, ops.int32))
    # bit positions counted from the last digit (2**-12m = bit 0)
    leading = LIMB_BITS * (m - top) + bit
    exponent = leading - LIMB_BITS * m - e
    quantum = ops.clip(exponent, emin) - (precision - 1) + e + LIMB_BITS * m
    low = ops.clip(quantum, 0)[..., None]
    starts = ops.asarray(np.array([LIMB_BITS * (m - t) for t in range(m + 1)], dtype=np.int32), magnitude)
    widths = ops.asarray(np.array([30] + [LIMB_BITS] * m, dtype=np.int32), magnitude)
    drop = ops.clip(ops.clip(low - starts, 0), None, widths)
    kept = (magnitude >> drop) << drop
    at = low - 1 - starts
    inside = (at >= 0) & (at < widths)
    half = ops.where(inside, 1 << ops.clip(ops.clip(at, 0), None, widths - 1), 0)
    distance_negative, distance = _magnitude(ops, magnitude - kept - half)
    beyond = ops.any_last(distance[..., :m] != 0) | (distance[..., m] > DELTA_UNITS)
    up = ~distance_negative & ops.any_last(distance != 0)
    certain = beyond & (quantum >= 1) & found
    # far below the smallest subnormal: rounds to 0, certainly
    underflow = (leading + 8 < quantum) & (quantum >= 9) & found
    certain = certain | underflow
    up = up & ~underflow
    kept = ops.where(underflow[..., None], 0, kept)
    at = low - starts
    bump = ops.where(
        up[..., None] & (at >= 0) & (at < widths), 1 << ops.clip(ops.clip(at, 0), None, widths - 1), 0
    )
    rounded = _normalize(ops, kept + bump)
    weights = ops.asarray(np.array([2.0 ** (-LIMB_BITS * t) for t in range(m + 1)]), magnitude)
    value = ops.sum_last(ops.cast(rounded, float_dtype) * ops.cast(weights, float_dtype))
    steps = e // LIMB_BITS
    for b in (1, 2, 4, 8, 16, 32, 64, 128):
        scaled = value
        for _ in range(max(1, b // 8)):  # 2**-192 is below float32's range: two steps of 2**-96
            scaled = scaled * float(2.0 ** (-LIMB_BITS * min(b, 8)))
        value = ops.where((steps & b) != 0, scaled, value)
    return value, certain


def _values(
    ops: Backend,
    negative: Any,
    whole: Any,
    fraction: Any,
    fraction_negative: Any,
    freq: dict[str, Any],
    m: int,
    fmt: str,
    float_dtype: Any,
) -> tuple[Any, Any, Any]:
    """Rounded sin and cos (with the position's sign) and whether both roundings are certain."""
    (sin_neg, sin_mag), (cos_neg, cos_mag), e = _evaluate(ops, whole, fraction, fraction_negative, freq, m)
    amplitude = freq.get("amplitude")
    if amplitude is not None:  # A sin, A cos: one more fixed-point product each (A < 2 keeps the bound)
        sin_mag = _normalize(ops, _mul(ops, sin_mag, amplitude, m))
        cos_mag = _normalize(ops, _mul(ops, cos_mag, amplitude, m))
    sin, sin_ok = round_fixed(ops, sin_mag, e, m, fmt, float_dtype)
    cos, cos_ok = round_fixed(ops, cos_mag, e * 0, m, fmt, float_dtype)
    sin = ops.where(sin_neg != negative, -sin, sin)
    cos = ops.where(cos_neg, -cos, cos)
    return sin, cos, sin_ok & cos_ok
