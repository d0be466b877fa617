"""Rounding float64 values to the output dtype once, and certifying each rounding against an error band."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from . import highprec


@functools.lru_cache(maxsize=8)
def rounder(dtype: np.dtype) -> Callable[[np.ndarray], np.ndarray]:
    """Round float64 values to ``dtype``, to nearest with ties to even, in one step (no double rounding)."""
    if dtype.name in ("float64", "float32", "float16"):
        # NumPy converts float64 to float32 and float16 directly from the float64 bits.
        return lambda values: values.astype(dtype)
    precision, emin = highprec.FORMATS["bfloat16"]

    def to_bfloat16(values: np.ndarray) -> np.ndarray:
        exponent = np.maximum(np.frexp(values)[1], emin + 1) - precision
        return np.ldexp(np.rint(np.ldexp(values, -exponent)), exponent).astype(dtype)

    return to_bfloat16


def round_certified(
    values: np.ndarray,
    band: np.ndarray,
    round_: Callable[[np.ndarray], np.ndarray],
    *,
    signed_zeros: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Round ``values``; flag those whose interval ``values ± band`` holds a rounding midpoint. A value that
    rounds to zero keeps its sign (IEEE: a negative value gives -0.0); ``signed_zeros=False`` skips that
    pass where no value can round to zero."""
    high = round_(values + band)
    low = round_(values - band)
    if not signed_zeros:
        return high, high != low
    bits = high.view(np.uint16 if high.itemsize == 2 else np.uint32 if high.itemsize == 4 else np.uint64)
    zero = (bits << np.uint8(1)) == 0  # ±0 (on the bits: faster than comparing bfloat16 values)
    if zero.any():  # rare: give those the sign of their value
        high[zero] = np.copysign(0.0, values[zero])
    return high, high != low
