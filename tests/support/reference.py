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


def omega(
    i: int, d_model: int, base: float, shift: float, scale: float = 1.0, odd: str = "zero"
) -> mpmath.mpf:
    """The exact ω_i = scale · base ** (-i / denominator); the denominator follows the odd-width rule."""
    if d_model % 2 == 0 or odd == "zero":
        half = mpmath.mpf(d_model // 2)
    else:
        half = mpmath.mpf(d_model if odd == "literal" else d_model + 1) / 2
    return mpmath.mpf(scale) * mpmath.power(mpmath.mpf(base), -mpmath.mpf(i) / (half - mpmath.mpf(shift)))


def frequency_count(d_model: int, odd: str = "zero") -> int:
    return d_model // 2 + (1 if d_model % 2 and odd in ("literal", "drop") else 0)


def sincos(position: float, i: int, d_model: int, base=10000.0, shift=0.0, scale=1.0, odd="zero"):
    """Exact (45-digit) sin and cos of position * ω_i."""
    angle = mpmath.mpf(position) * omega(i, d_model, base, shift, scale, odd)
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


def column(i: int, d_model: int, layout: str, odd: str = "zero") -> tuple[int | None, int | None]:
    """(sin column, cos column) of frequency i; None where the column falls off an odd width."""
    n = frequency_count(d_model, odd)
    if layout == "interleaved":
        pair = (2 * i, 2 * i + 1)
    elif layout == "sin_cos":
        pair = (i, n + i)
    else:
        pair = (n + i, i)
    return tuple(c if c < d_model else None for c in pair)


def ulp_distance(got: float, exact: mpmath.mpf) -> float:
    """|got - exact| in units of the float64 spacing at ``exact``."""
    spacing = float(np.spacing(abs(float(exact)))) if exact != 0 else 5e-324
    return float(abs(mpmath.mpf(got) - exact) / spacing)


def tutorial_table(length: int, d_model: int, base: float = 10000.0, rows=None) -> np.ndarray:
    """The PyTorch tutorial's float32 formula, in NumPy: the inexact code users copy. ``rows`` (integer
    positions below 2**24 + 1, exact in float32) gives only those rows of the table, without building it."""
    position = (np.arange(length) if rows is None else np.asarray(rows)).astype(np.float32)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(base) / d_model))
    pe = np.zeros((len(position), d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


def slope(
    position: float, d_model: int, layout: str = "interleaved", base=10000.0, shift=0.0, scale=1.0, odd="zero"
):
    """The exact d PE / dp of every column at ``position``: ω_i cos(p ω_i) at sin ω_i's column,
    −ω_i sin(p ω_i) at cos ω_i's, 0 at odd="zero"'s zero column (mpmath values, a list of ``d_model``)."""
    row = [mpmath.mpf(0)] * d_model
    for i in range(frequency_count(d_model, odd)):
        w = omega(i, d_model, base, shift, scale, odd)
        sin, cos = sincos(position, i, d_model, base, shift, scale, odd)
        sin_column, cos_column = column(i, d_model, layout, odd)
        if sin_column is not None:
            row[sin_column] = w * cos
        if cos_column is not None:
            row[cos_column] = -w * sin
    return row
