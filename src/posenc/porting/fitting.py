"""Read a variant's numbers off a stored table: its frequencies, its position step, where its blocks change.

identify does not search the option space blindly: the 1-D frequencies ω_i = scale · r**i and the position
of row 0 are fitted from the angles of the sine/cosine column pairs, a grid's axis sizes are read from
where each block of columns first changes, and its position scale from the angles of one block. The fitted
values are then snapped to the round numbers libraries use (10000, 1.0, 0.5, 1.875, ...); every candidate
built from them is still recomputed exactly and compared in full.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .. import defaults, layouts

__all__ = ["fit_frequencies", "nice", "position_step", "round_number", "simple_fraction", "unchanged_rows"]


def fit_frequencies(
    stored: np.ndarray, layout: str, odd: str, zero_rows: np.ndarray
) -> tuple[float, float, int] | None:
    """Fit ω_i = scale · r**i and the position of row 0 from the sine/cosine column pairs of ``layout``.

    Returns ``(-log r, log scale, position of row 0)``, or None when the table does not fit (too few
    usable frequencies, frequencies that do not fall). ``zero_rows`` (padding rows) are left out. The first
    1024 rows are enough (every increment is measured on each row pair; the median is kept).
    """
    rows, d_model = stored.shape
    rows = min(rows, 1024)
    pairs = d_model // 2
    if odd == "zero":
        sin_cols, cos_cols = layouts.pair_columns(layout, pairs)
    else:  # computed one column wider, the last column dropped: keep the columns that are there
        sin_cols, cos_cols = layouts.pair_columns(layout, (d_model + 1) // 2)
        sin_cols, cos_cols = sin_cols[sin_cols < d_model][:pairs], cos_cols[cos_cols < d_model][:pairs]
    keep = np.setdiff1d(np.arange(rows), zero_rows)
    if len(keep) < 2:
        return None
    angles = np.arctan2(stored[keep][:, sin_cols], stored[keep][:, cos_cols])
    steps = np.diff(keep)
    if not np.all(steps > 0):
        return None
    increments = np.angle(np.exp(1j * np.diff(angles, axis=0))) / steps[:, None]
    omegas = np.median(increments, axis=0)
    usable = (omegas > 1e-6) & (omegas < 3.0)
    if usable.sum() < 2:
        return None
    index = np.arange(len(omegas))[usable]
    slope, intercept = np.polyfit(index, np.log(omegas[usable]), 1)
    if not slope < 0:
        return None
    fitted = np.exp(intercept + slope * np.arange(len(omegas)))
    lowest = int(np.argmin(fitted))
    start = round(float(angles[0, lowest] / fitted[lowest]) - keep[0])
    return -slope, intercept, start


def nice(value: float) -> float:
    """``value`` snapped to a round number when within float32 noise of one (10000, 1.0, 0.5, 5000, ...)."""
    snapped = round_number(value, 1e-4)
    return value if snapped is None else snapped


def round_number(value: float, rtol: float) -> float | None:
    """``value`` as a round number (k·10^e · 1, 0.5, 0.25 or 0.1) when within ``rtol`` of one, else None."""
    if not (math.isfinite(value) and value > 0):
        return None
    exponent = math.floor(math.log10(value))
    for step in (1, Fraction(1, 2), Fraction(1, 4), Fraction(1, 10)):
        unit = Fraction(10) ** exponent * step
        snapped = float(round(Fraction(value) / unit) * unit)  # 0.7, not 7 * 0.1 = 0.7000000000000001
        if abs(snapped - value) <= rtol * value:
            return snapped
    return None


def simple_fraction(value: float) -> float | None:
    """``value`` as a simple fraction k/q, q in 1, 2, 4, 8, 10, 16, 20, 100, when within 1e-5 of one.

    These are the interpolation scales configurations use (2, 1.5, 1.875, 1.3, ...); None otherwise.
    """
    if not (math.isfinite(value) and value > 0):
        return None
    for q in (1, 2, 4, 8, 10, 16, 20, 100):
        k = round(value * q)
        if k >= 1 and abs(k / q - value) <= 1e-5 * value:
            return k / q
    return None


def unchanged_rows(stored: np.ndarray, columns: slice | np.ndarray) -> int:
    """How many rows from the top keep row 0's values in ``columns`` (all of them: the table's length).

    Scans 64 rows, then 8 times as many, ...: a grid's blocks change early, so long tables cost little.
    """
    top = stored[0, columns]
    first, stop = 1, 64
    while first < len(stored):
        changed = np.flatnonzero((stored[first:stop][:, columns] != top).any(axis=1))
        if len(changed):
            return first + int(changed[0])
        first, stop = stop, stop * 8
    return len(stored)


def position_step(block: np.ndarray) -> float | None:
    """The position step between consecutive rows of one axis' [sin | cos] block (paper frequencies).

    With ω_i = 10000^(-i/n) (n = width / 2; Vaswani et al. 2017, as every named grid uses them), row j
    holds sin(j·step·ω_i), cos(j·step·ω_i). The lowest frequency's angle, unwrapped along the rows, gives a
    first estimate; each higher frequency refines it, its turn count predicted by the estimate so far:
    step = angle_i(J - 1) / ((J - 1)·ω_i).
    """
    count, width = block.shape
    n = width // 2
    if count < 2 or n < 1:
        return None
    omegas = defaults.BASE ** (-np.arange(n) / n)
    last = count - 1
    angles = np.arctan2(block[:, n - 1], block[:, 2 * n - 1])
    step = float(np.unwrap(angles)[-1]) / (last * omegas[-1])
    final = np.arctan2(block[-1, :n], block[-1, n : 2 * n])
    for i in range(n - 2, -1, -1):
        predicted = step * last * omegas[i]
        turns = round((predicted - final[i]) / (2 * math.pi))
        step = (final[i] + 2 * math.pi * turns) / (last * omegas[i])
    step = float(step)
    return step if math.isfinite(step) and step > 0 else None
