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
from typing import NamedTuple

import numpy as np

from .. import defaults, layouts, validation

__all__ = [
    "Fit",
    "base_candidates",
    "digits",
    "fit_frequencies",
    "line",
    "nice",
    "position_step",
    "round_number",
    "rounded",
    "shortest",
    "simple_fraction",
    "unchanged_rows",
]


class Fit(NamedTuple):
    """Frequencies ω_i = exp(log_scale − rate·i) fitted to a table, and the position of its row 0.

    ``spread``: the uncertainty of ``rate`` (one standard deviation, scaled up by the fit's own residuals
    when they are larger than the values' rounding explains); ``grid``: the 16-bit type whose grid the
    frequencies read lie on (:func:`coarse_grid`: a buffer after ``.half()``), else None."""

    rate: float
    log_scale: float
    start: int
    spread: float
    grid: str | None = None


def fit_frequencies(
    stored: np.ndarray, layout: str, odd: str, zero_rows: np.ndarray, unit: float = 2.0**-24
) -> Fit | None:
    """Fit ω_i = scale · r**i and the position of row 0 from the sine/cosine column pairs of ``layout``.

    None when the table does not fit (too few usable frequencies, frequencies that do not fall).
    ``zero_rows`` (padding rows) are left out; ``unit``: the rounding of the values (float32's 2⁻²⁴ by
    default). Each ω_i is first the median increment of its angle over the first 1024 rows, then read
    across the whole table (:func:`_across`): a base fitted from the first rows alone is off by parts in
    10⁵ (base 10001 read as 10001.0016), which a long table shows.
    """
    rows, d_model = stored.shape
    pairs = d_model // 2
    if odd == "zero":
        sin_cols, cos_cols = layouts.pair_columns(layout, pairs)
    else:  # computed one column wider, the last column dropped: keep the columns that are there
        sin_cols, cos_cols = layouts.pair_columns(layout, (d_model + 1) // 2)
        sin_cols, cos_cols = sin_cols[sin_cols < d_model][:pairs], cos_cols[cos_cols < d_model][:pairs]
    keep = np.setdiff1d(np.arange(rows), zero_rows)
    head = keep[keep < 1024]
    if len(head) < 2:
        return None
    angles = np.arctan2(stored[head][:, sin_cols], stored[head][:, cos_cols])
    steps = np.diff(head)
    increments = np.angle(np.exp(1j * np.diff(angles, axis=0))) / steps[:, None]
    omegas = np.median(increments, axis=0)
    usable = (omegas > 1e-6) & (omegas < 3.0)
    if usable.sum() < 2:
        return None
    omegas, sigma = _across(stored, keep, sin_cols, cos_cols, omegas, usable, unit)
    usable &= omegas > 0  # a column that is no sinusoid (a grid's other axis) can read as none
    if usable.sum() < 2:
        return None
    coarse = coarse_grid(omegas[usable], sigma[usable])
    spacing = None if coarse is None else coarse[1]
    if spacing is not None:  # frequencies rounded to a 16-bit type (a buffer after .half()): each one is
        sigma = sigma.copy()  # uncertain by its rounding, which the reading shows far more finely
        sigma[usable] = np.hypot(sigma[usable], spacing / math.sqrt(12.0))
    index = np.arange(len(omegas), dtype=np.float64)[usable]
    y = np.log(omegas[usable])
    relative = sigma[usable] / omegas[usable]
    slope, intercept, variance = line(index, y, 1.0 / relative**2)
    if not slope < 0:
        return None
    residual = (y - intercept - slope * index) / relative
    excess = math.sqrt(max(1.0, float(np.sum(residual**2)) / max(1, len(y) - 2)))
    if spacing is not None and abs(intercept) <= 6 * math.sqrt(variance[1]) * excess:
        # scale 1 within the rounded frequencies' scatter (it moves the intercept by parts in 10³): fitted
        # again through ω_0 = 1, as the base is then read with it
        weights = 1.0 / relative**2
        slope, intercept = float((weights * index * y).sum() / (weights * index**2).sum()), 0.0
        variance = (1.0 / float((weights * index**2).sum()), 0.0, 0.0)
        residual = (y - slope * index) / relative
        excess = math.sqrt(max(1.0, float(np.sum(residual**2)) / max(1, len(y) - 1)))
    fitted = np.exp(intercept + slope * np.arange(len(omegas)))
    lowest = int(np.argmin(fitted))
    start = round(float(angles[0, lowest] / fitted[lowest]) - head[0])
    return Fit(
        -slope, intercept, start, math.sqrt(variance[0]) * excess, None if coarse is None else coarse[0]
    )


#: The 16-bit types frequencies are rounded to, coarsest first: (significand bits, smallest normal exponent).
_COARSE = (("bfloat16", 8, -126), ("float16", 11, -14))


def coarse_grid(omegas: np.ndarray, sigma: np.ndarray) -> tuple[str, np.ndarray] | None:
    """The 16-bit type (bfloat16, else float16) whose grid every frequency read finely enough to tell
    (``sigma`` under an eighth of the spacing; at least four of them, not all powers of two) lies on, and
    its spacing at each of ``omegas``; None when they lie on neither.

    >>> import ml_dtypes; omegas = (10000.0 ** -np.linspace(0, 1, 16)).astype(ml_dtypes.bfloat16)
    >>> coarse_grid(omegas.astype(np.float64), np.full(16, 1e-12))[0]
    'bfloat16'
    """
    exponents = np.frexp(omegas)[1]
    for name, bits, lowest in _COARSE:
        spacing = np.ldexp(1.0, np.maximum(exponents, lowest + 1) - bits)
        telling = sigma < spacing / 8
        steps = omegas / spacing
        on_grid = np.abs(steps - np.round(steps)) * spacing <= 2 * sigma + 1e-9 * spacing
        powers = np.frexp(omegas)[0] == 0.5
        if telling.sum() >= 4 and not powers[telling].all() and on_grid[telling].all():
            return name, spacing
    return None


def rounded(values: np.ndarray, grid: str) -> np.ndarray:
    """``values`` rounded to ``grid`` (a dtype name; "float32>bfloat16": to float32, then to bfloat16), as
    float64.

    >>> float(rounded(np.array([1 / 3]), "bfloat16")[0])
    0.333984375
    """
    for step in grid.split(">"):
        values = np.asarray(values).astype(validation.dtype(step)).astype(np.float64)
    return values


def _across(
    stored: np.ndarray,
    keep: np.ndarray,
    sin_cols: np.ndarray,
    cos_cols: np.ndarray,
    omegas: np.ndarray,
    usable: np.ndarray,
    unit: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Each ω_i read from the angle between the first kept row and rows ever further from it (twice as far
    each time), its turn count predicted by the estimate so far, and each one's uncertainty.

    The angle of a row is uncertain by the values' rounding (``unit``) plus the rounding of the angle p·ω
    (2⁻²⁴ of it: float32 code; a float64 table's own unit u), so ω_i read at distance Δ by
    (unit + u·|p·ω_i|) / Δ. The
    reading stops, every frequency keeping the last estimate, where a usable frequency's prediction misses
    by more than 0.5 rad: rows that break off (a clamped tail, angles formed in bfloat16) are not read."""
    first = keep[0]
    origin = np.arctan2(stored[first, sin_cols], stored[first, cos_cols])
    angle = min(unit, 2.0**-24)  # the rounding of p·ω: float32 code's, or float64's for a float64 table
    sigma = unit * math.sqrt(2.0) + angle * np.abs(omegas) * (first + 1)  # the increments: distance 1
    distance = 2
    while first + distance <= keep[-1]:
        row = int(keep[np.searchsorted(keep, first + distance)])
        delta = row - first
        wrapped = np.arctan2(stored[row, sin_cols], stored[row, cos_cols]) - origin
        turns = np.round((omegas * delta - wrapped) / (2 * math.pi))
        read = (wrapped + 2 * math.pi * turns) / delta
        if np.any(np.abs(read - omegas)[usable] * delta > 0.5):
            break
        omegas = read
        sigma = (unit * math.sqrt(2.0) + angle * np.abs(omegas) * row) / delta
        distance = 2 * (row - first)
    return omegas, sigma


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


def line(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float, tuple[float, float, float]]:
    """Weighted least squares y = intercept + slope·x: slope, intercept, (var slope, var intercept, cov)."""
    total, mean = w.sum(), (w * x).sum() / w.sum()
    spread = (w * (x - mean) ** 2).sum()
    slope = float((w * (x - mean) * y).sum() / spread)
    intercept = float((w * y).sum() / total - slope * mean)
    var_slope = 1.0 / spread
    var_intercept = 1.0 / total + mean**2 / spread
    return slope, intercept, (var_slope, var_intercept, -mean / spread)


def base_candidates(base: float, spread: float) -> list[float]:
    """The round numbers within the fit's uncertainty ``spread`` (of ln base; coarsest first), the fit as an
    integer, the fit: the first two of them."""
    tolerance = max(6 * spread, 2e-7)
    found = [round_number(base, tolerance), round_number(base, tolerance / 30)]
    if base > 100 and abs(round(base) - base) <= tolerance * base:
        found.append(float(round(base)))
    found.append(base)
    return list(dict.fromkeys(b for b in found if b is not None and b > 1.0))[:2]


def shortest(value: float, rtol: float) -> float:
    """The decimal with the fewest significant digits within ``rtol`` of ``value`` (12345.6 for
    12345.600000013 at 10⁻⁹), else ``value``."""
    for count in range(1, 17):
        short = float(f"{value:.{count}g}")
        if abs(short - value) <= rtol * abs(value):
            return short
    return value


def digits(value: float) -> int:
    """The significant digits ``value`` is written with (10001.003: 8; at most 17)."""
    return next((count for count in range(1, 18) if float(f"{value:.{count}g}") == value), 17)
