"""Independent slow references: mpmath at 40+ digits, rounded once to the output format.

Nothing here shares code with posenc: the frequency is the exact real base ** (-i / (n - shift)), evaluated
by mpmath, and the rounding to float32/float16/bfloat16 is mpmath's own round-to-nearest-even at the
format's precision (with the format's subnormal quantum below its smallest normal number).
"""

from __future__ import annotations

import mpmath
import numpy as np

mpmath.mp.dps = 45

# (significand bits, smallest normal exponent)
FORMATS = {
    "float64": (53, -1022),
    "float32": (24, -126),
    "float16": (11, -14),
    "bfloat16": (8, -126),
}


def omega(i: int, d_model: int, base: float, shift: float) -> mpmath.mpf:
    n = d_model // 2
    return mpmath.power(mpmath.mpf(base), -mpmath.mpf(i) / (n - mpmath.mpf(shift)))


def sincos(position: float, i: int, d_model: int, base: float = 10000.0, shift: float = 0.0):
    """Exact (45-digit) sin and cos of position * ω_i."""
    angle = mpmath.mpf(position) * omega(i, d_model, base, shift)
    return mpmath.sin(angle), mpmath.cos(angle)


def round_to(value: mpmath.mpf, fmt: str) -> float:
    """``value`` rounded to nearest, ties to even, in the binary format ``fmt`` (as a Python float)."""
    precision, emin = FORMATS[fmt]
    if value == 0:
        return 0.0
    if abs(value) >= mpmath.ldexp(1, emin):
        return float(mpmath.mpf(mpmath.fadd(value, 0, prec=precision, rounding="n")))
    quantum = emin - precision + 1
    return float(mpmath.ldexp(mpmath.nint(mpmath.ldexp(value, -quantum)), quantum))


def column(i: int, d_model: int, layout: str) -> tuple[int, int]:
    """(sin column, cos column) of frequency i in a row of the given layout."""
    n = d_model // 2
    if layout == "interleaved":
        return 2 * i, 2 * i + 1
    if layout == "sin_cos":
        return i, n + i
    return n + i, i


def ulp_distance(got: float, exact: mpmath.mpf) -> float:
    """|got - exact| in units of the float64 spacing at ``exact``."""
    spacing = float(np.spacing(abs(float(exact)))) if exact != 0 else 5e-324
    return float(abs(mpmath.mpf(got) - exact) / spacing)


def tutorial_table(length: int, d_model: int, base: float = 10000.0) -> np.ndarray:
    """The PyTorch tutorial's float32 formula, in NumPy: the inexact code users copy."""
    position = np.arange(length, dtype=np.float32)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(base) / d_model))
    pe = np.zeros((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe
