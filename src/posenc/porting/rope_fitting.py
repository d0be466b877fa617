"""Read rotary-embedding (RoPE) parameters off stored buffers: the frequencies θ_i of a cos/sin cache, the
precision a buffer was stored in, and the parameter sets of each RoPE type that could have made θ.

Every set proposed here is only a candidate: :mod:`.rope_matching` recomputes each one exactly
(:mod:`posenc.rope`) and compares it with the stored buffer element by element.

How the types show in θ (d = rotary_dim = 2n, δ_i = b^(-2i/d) the unscaled frequencies, t_i = θ_i / δ_i):

* default (and "dynamic" NTK scaling before a sequence outgrows it): t_i = 1;
* linear: t_i = 1/factor for every i (so θ_0 = 1/factor);
* llama3: t_i = 1 for wavelengths 2π/δ_i < M/high, 1/factor beyond M/low, and in between
  t_i = (1-s)/factor + s with s linear in 1/wavelength: only the two bounds M/low and M/high are fixed by θ;
* yarn: t_i = 1 - ρ_i (1 - 1/factor), ρ_i a linear ramp over the index i between the correction dims of
  beta_fast and beta_slow (floored/ceiled unless truncate=False), which M fixes;
* proportional (Gemma 4): default or divided frequencies, then exact zeros;
* longrope: t_i = 1/λ_i, a factor of its own per frequency (:mod:`.rope_longrope` reads them when no other
  type matches).

The first frequencies are unscaled by every type but linear (which divides them all alike), so the base is
the slope of ln θ_i over the leading run of indices that lie on one line.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import rope
from .fitting import base_candidates, line, round_number
from .limits import capped

__all__ = [
    "PRECISIONS",
    "cache_frequencies",
    "cache_limits",
    "candidate_configs",
    "checked",
    "fit_bases",
    "inv_freq_limit",
    "precision_of",
    "shape_keywords",
]

#: Storage types and their unit roundoff (the largest relative rounding error of one value).
PRECISIONS = {"bfloat16": 2.0**-8, "float16": 2.0**-11, "float32": 2.0**-24, "float64": 2.0**-53}
#: The relative error float32 code (Hugging Face's) leaves in θ_i beyond one rounding, per unit of ln(base).
F32 = 2.0**-24
#: Relative uncertainty below which a frequency counts as well measured.
_PRECISE = 1e-3
_TWO_PI = 2 * math.pi


def precision_of(values: np.ndarray, declared: str | None = None) -> str:
    """The narrowest storage type that holds every value exactly (``declared`` wins when it is one of
    :data:`PRECISIONS`): a bfloat16 buffer read as float32 has zero low mantissa bits."""
    if declared in PRECISIONS:
        return declared
    finite = values[np.isfinite(values)].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        single = finite.astype(np.float32)
        if not np.array_equal(single.astype(np.float64), finite):
            return "float64"
        if not (single.view(np.uint32) & 0xFFFF).any():
            return "bfloat16"
        if np.array_equal(single.astype(np.float16).astype(np.float32), single):
            return "float16"
    return "float32"


def frequency_columns(cache: np.ndarray, layout: str) -> np.ndarray:
    """The columns of a ``(positions, rotary_dim)`` cache that hold one value per frequency: the first half
    (``layout="half"``) or every other column (interleaved)."""
    return cache[:, : cache.shape[1] // 2] if layout == "half" else cache[:, 0::2]


def fitted_frequencies(
    columns: np.ndarray, kind: str, amplitude: float, unit: float, refits: int = 1
) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`cache_frequencies`, and for a sin cache ``refits`` times: the amplitude A fitted on the
    best-known column, and θ read again. Returns (θ, its relative uncertainty, A)."""
    theta, sigma = cache_frequencies(columns, kind, amplitude, unit)
    for _ in range(refits if kind == "sin" else 0):
        best = int(np.argmin(np.where(theta > 0, sigma, np.inf)))
        waves = np.sin(np.arange(len(columns)) * theta[best])
        amplitude = float((columns[:, best] * waves).sum() / (waves**2).sum())
        theta, sigma = cache_frequencies(columns, kind, amplitude, unit)
    return theta, sigma, amplitude


def cache_frequencies(
    columns: np.ndarray, kind: str, amplitude: float, unit: float
) -> tuple[np.ndarray, np.ndarray]:
    """θ_i and its relative uncertainty from the columns ``A·cos(pθ_i)`` or ``A·sin(pθ_i)`` (``kind``),
    rows p = 0, 1, ..., one column per frequency (0 <= θ_i < π; < π/2 for a sin cache).

    Row 1 gives each angle roughly; rows 2, 4, 8, ..., then the last each multiply the angle, and the
    estimate so far picks which of the angles the reading allows (±arccos + 2πk, or arcsin and π − arcsin)
    it is: the angle at row p is known to the same absolute accuracy, so θ to p times better.
    """
    count = columns.shape[0]
    x = np.clip(columns / amplitude, -1.0, 1.0)
    noise = 2 * unit + 1e-15

    def reading(row: int) -> tuple[np.ndarray, np.ndarray]:
        value = x[row]
        spread = 2 * noise / np.sqrt(np.maximum(1 - value**2, 2 * noise))
        return (np.arccos(value) if kind == "cos" else np.arcsin(value)), spread

    theta, error = reading(1)
    theta = np.abs(theta)
    rows = [2**k for k in range(1, max(1, (count - 1).bit_length())) if 2**k < count - 1] + [count - 1]
    for row in rows:
        if row <= 1:
            continue
        base, spread = reading(row)
        predicted = theta * row
        if kind == "cos":
            first, second = base, -base
        else:
            first, second = base, math.pi - base
        first = first + _TWO_PI * np.round((predicted - first) / _TWO_PI)
        second = second + _TWO_PI * np.round((predicted - second) / _TWO_PI)
        angle = np.where(np.abs(first - predicted) <= np.abs(second - predicted), first, second)
        better = (spread / row < error) & (error * row < 2.0)
        theta = np.where(better, np.abs(angle) / row, theta)
        error = np.where(better, spread / row, error)
    # θ = 0: a sin column of zeros is exactly 0; a cos column of A may hold a frequency too low to show
    unknown = 0.0 if kind == "sin" else np.inf
    relative = np.where(theta > 0, error / np.where(theta > 0, theta, 1.0), unknown)
    return theta, relative


def candidate_configs(
    theta: np.ndarray, sigma: np.ndarray, *, head_dim: int | None
) -> list[tuple[dict[str, Any], str]]:
    """Keyword sets for :func:`posenc.rope.config` that may reproduce the frequencies ``theta`` (relative
    uncertainty ``sigma``), each with a line saying what in θ points to it."""
    n = len(theta)
    rotated = int(np.flatnonzero(theta > 0)[-1]) + 1 if (theta > 0).any() else 0
    if rotated < 1 or not np.all(theta[rotated:] == 0):
        return []
    d, zeros = 2 * n, n - rotated
    # Zeros read off a cache can be frequencies too low to show (sigma inf): then every type is tried
    # on the known ones; zeros known to be zeros (inv_freq, a sin cache) leave the proportional type only.
    exact_zeros = zeros > 0 and bool(np.all(np.isfinite(sigma[rotated:])))
    positive, weights = theta[:rotated], sigma[:rotated]
    bases, fitted = fit_bases(positive, weights, d)
    out = []
    for proportional in (True, False) if zeros else (False,):
        if not proportional and exact_zeros:
            continue
        shape = shape_keywords(d, rotated if proportional else None, head_dim)
        if shape is not None:
            out += _with_bases(bases, positive, weights, d, shape, zeros if proportional else 0, fitted)
    return out


def inv_freq_limit(unit: float, base: float) -> float:
    """What a stored inv_freq may be off by, relatively: the storage's rounding ``unit`` plus what float32
    code leaves in b^(-2i/d)."""
    return unit + F32 * (8 + 2 * math.log(base))


def cache_limits(
    params: rope.RopeParameters, theta0: float, last: int, unit: float, tolerance: float | None
) -> tuple[float, float]:
    """What a stored cos/sin cache may be off by, absolutely (``tolerance`` when given, else the storage's
    rounding plus float32's angle error at the last position ``last``, θ_0 = ``theta0`` the fastest
    frequency, never above :data:`.limits.CAP` times the amplitude), and what the rounding alone costs."""
    scale = abs(rope.attention_scaling(params))
    angle = F32 * (6 + math.log(params.base)) * last * theta0
    return (tolerance if tolerance is not None else scale * capped(unit + angle)), scale * unit / 2


def checked(candidates: list[tuple[dict[str, Any], str]], check: Any) -> list[tuple]:
    """Each candidate that builds, with whether it matches, its parameters, error, limit and rounding."""
    found = []
    for keywords, evidence in candidates:
        try:
            params = rope.config(**keywords)
        except (ValueError, TypeError):
            continue
        error, limit, rounding = check(params)
        found.append((error <= limit, params, keywords, evidence, error, limit, rounding))
    return found


def fit_bases(theta: np.ndarray, sigma: np.ndarray, d: int) -> tuple[list[float], str | None]:
    """The bases the slope of ln θ_i gives (round numbers within its uncertainty first) and a line saying
    how it was fitted; one frequency has no slope: 10000 is assumed (line None)."""
    if len(theta) == 1:  # one frequency: θ_0 = 1/factor, and no slope to give the base
        return [10000.0], None
    ln_base, spread, run = _fit_base(theta, sigma, d)
    fitted = f"base fitted {math.exp(ln_base):.7g} (±{spread * 100:.2g}%) from the first {run} frequencies"
    return base_candidates(math.exp(ln_base), spread), fitted


def shape_keywords(d: int, rotated: int | None, head_dim: int | None) -> dict[str, Any] | None:
    """head_dim and partial_rotary_factor for rotary_dim ``d`` (``rotated`` pairs of a proportional type)."""
    if rotated is not None:  # proportional: the exponents run over the whole head
        if head_dim is not None and head_dim != d:
            return None
        factor = rotated / (d // 2)
        while int(factor * d // 2) < rotated:
            factor = math.nextafter(factor, math.inf)
        return {"head_dim": d, "partial_rotary_factor": factor}
    if head_dim is None or head_dim == d:
        return {"head_dim": d}
    if head_dim < d:
        return None
    factor = d / head_dim
    while int(head_dim * factor) < d:
        factor = math.nextafter(factor, math.inf)
    return {"head_dim": head_dim, "partial_rotary_factor": factor}


def _fit_base(theta: np.ndarray, sigma: np.ndarray, d: int) -> tuple[float, float, int]:
    """ln(base), its relative uncertainty and the length of the leading run of ln θ_i on one line."""
    y = np.log(theta)
    w = 1.0 / np.maximum(sigma, 1e-12) ** 2
    index = np.arange(len(theta), dtype=np.float64)
    run = 2
    for m in range(2, len(theta)):
        slope, intercept, variance = line(index[:m], y[:m], w[:m])
        predicted = intercept + slope * m
        spread = math.sqrt(variance[0] * m * m + variance[1] + 2 * m * variance[2])
        if abs(y[m] - predicted) > 4 * (sigma[m] + spread) + 1e-12:
            break
        run = m + 1
    slope, _, variance = line(index[:run], y[:run], w[:run])
    return -slope * d / 2, math.sqrt(max(variance[0], 0.0)) * d / 2, run


def snap(value: float, rtol: float) -> list[float]:
    """Round numbers near ``value`` (a factor, a length), plainest first, then ``value`` itself."""
    found = []
    for q in (1, 2, 4, 8, 10, 16, 20, 100):
        k = round(value * q)
        if k >= 1 and abs(k / q - value) <= rtol * value:
            found.append(k / q)
            break
    found.append(round_number(value, rtol))
    found.append(value)
    return list(dict.fromkeys(v for v in found if v is not None))[:3]


def _with_bases(
    bases: list[float],
    theta: np.ndarray,
    sigma: np.ndarray,
    d: int,
    shape: dict[str, Any],
    zeros: int,
    fitted: str | None,
) -> list[tuple[dict[str, Any], str]]:
    """The candidates of every type for each base."""
    out: list[tuple[dict[str, Any], str]] = []
    rtol = max(4 * float(np.min(sigma)), 1e-6)
    for base in bases:
        index = np.arange(len(theta))
        ratio = theta / np.exp(-2 * index * math.log(base) / d)  # t_i
        note = f"; {fitted}" if fitted else "; one frequency: the base cannot be told (10000 assumed)"

        def add(scaling: dict[str, Any] | None, why: str, base: float = base, note: str = note) -> None:
            keywords = {**shape, "base": base}
            if scaling:
                keywords["scaling"] = scaling
            out.append((keywords, why + note))

        first = float(ratio[0])
        if zeros:
            for factor in snap(1 / first, rtol):
                add(
                    {"rope_type": "proportional", "factor": factor},
                    f"{len(theta)} frequencies b^(-2i/{d}) / {factor:g}, then {zeros} zero frequencies",
                )
            continue
        add(None, "every frequency is b^(-2i/d) (dynamic NTK scaling stores the same until it grows)")
        if 1 / first > 1 + 3 * sigma[0]:
            mean = float(np.average(ratio, weights=1 / np.maximum(sigma, 1e-12) ** 2))
            for factor in snap(1 / mean, rtol):
                add({"rope_type": "linear", "factor": factor}, f"every frequency divided by {factor:g}")
        if np.all(np.abs(ratio - 1) <= 4 * sigma + 1e-12) or abs(first - 1) > 4 * sigma[0] + 1e-9:
            continue
        _llama3(theta, ratio, sigma, d, base, rtol, add)
        _yarn(ratio, sigma, d, base, rtol, add)
    return out


def _tail_factors(ratio: np.ndarray, sigma: np.ndarray) -> list[float]:
    """Factors that may divide the lowest frequencies: 1/t of the last measured ones (snapped), and the
    usual factors within a factor 2 of them when those are poorly measured."""
    known = np.flatnonzero(sigma <= 0.05)
    if not len(known) or ratio[known[-1]] >= 1:
        return []
    last = known[-3:]
    weights = 1 / np.maximum(sigma[last], 1e-12) ** 2
    estimates = [1 / float(ratio[known[-1]]), 1 / float(np.average(ratio[last], weights=weights))]
    rtol = max(4 * float(sigma[known[-1]]), 1e-6)
    found = [value for estimate in estimates for value in snap(estimate, rtol)]
    if sigma[known[-1]] > _PRECISE:  # the lowest frequencies are poorly measured: try the usual factors
        found += [2.0, 4.0, 8.0, 16.0, 32.0, 40.0, 64.0]
    return [f for f in dict.fromkeys(found) if f > 1]


def _llama3(
    theta: np.ndarray, ratio: np.ndarray, sigma: np.ndarray, d: int, base: float, rtol: float, add: Any
) -> None:
    """llama3 candidates: the factor of the tail; the wavelength bounds M/low and M/high from the blended
    frequencies (or Llama 3.1's 8192/1/4 and other powers of two when too few are blended)."""
    wavelength = 2 * math.pi / np.exp(-2 * np.arange(len(theta)) * math.log(base) / d)
    for factor in _tail_factors(ratio, sigma):
        blend = (ratio - 1 / factor) / (1 - 1 / factor)
        margin = 4 * sigma * factor
        inside = np.flatnonzero((blend > margin) & (blend < 1 - margin) & (sigma <= _PRECISE))
        sets = [(8192, 1.0, 4.0)]
        if len(inside) >= 2:
            weights = 1 / np.maximum(sigma[inside], 1e-12) ** 2
            slope, intercept, _ = line(1 / wavelength[inside], blend[inside], weights)
            if slope > 0 and intercept < 0:
                low_bound, high_bound = slope / -intercept, slope / (1 - intercept)
                for length in _lengths(low_bound):
                    for high in snap(length / high_bound, 1e-2):
                        sets.append((length, 1.0, high))
        else:
            sets += [(2**k, 1.0, 4.0) for k in range(11, 18) if 2**k != 8192]
        for length, low, high in dict.fromkeys(sets):
            if high <= low:
                continue
            scaling = {
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": low,
                "high_freq_factor": high,
                "original_max_position_embeddings": int(length),
            }
            unscaled = int(np.sum(wavelength < length / high))
            scaled = int(np.sum(wavelength > length / low))
            add(
                scaling,
                f"frequencies 0-{unscaled - 1} unscaled, the last {scaled} divided by {factor:g}, blended "
                f"between wavelengths {length / high:g} and {length / low:g}",
            )


def _lengths(value: float) -> list[int]:
    """Context lengths near ``value``: the power of two within 3%, a multiple of 1024 within 1%, the value."""
    found = []
    power = 2 ** round(math.log2(value))
    if abs(power - value) <= 0.03 * value:
        found.append(power)
    kilo = 1024 * round(value / 1024)
    if kilo and abs(kilo - value) <= 0.01 * value:
        found.append(kilo)
    found.append(max(1, round(value)))
    return list(dict.fromkeys(found))


def _yarn(ratio: np.ndarray, sigma: np.ndarray, d: int, base: float, rtol: float, add: Any) -> None:
    """yarn candidates: for each original context M (powers of two, and what the ramp's ends give), the ramp
    it implies (beta_fast 32, beta_slow 1, truncated or not) and the factor that fits the blend best; kept
    when every frequency agrees."""
    ln_base = math.log(base)
    index = np.arange(len(ratio))
    weights = 1 / np.maximum(sigma, 1e-12) ** 2
    lengths: list[float] = [2.0**k for k in range(8, 22)]
    tails = _tail_factors(ratio, sigma)
    if tails:
        tail = tails[0]
        ramp = (1 - ratio) / (1 - 1 / tail)
        inside = np.flatnonzero((ramp > 0.02) & (ramp < 0.98) & (sigma <= _PRECISE))
        if len(inside) >= 2:
            slope, intercept, _ = line(index[inside].astype(float), ramp[inside], weights[inside])
            if slope > 0:
                low, high = -intercept / slope, (1 - intercept) / slope
                lengths.append(_TWO_PI * 32 * math.exp(2 * ln_base * low / d))
                lengths.append(_TWO_PI * math.exp(2 * ln_base * high / d))
    kept = []
    for length in lengths:
        for truncate in (True, False):
            low = d * math.log(length / (_TWO_PI * 32)) / (2 * ln_base)
            high = d * math.log(length / _TWO_PI) / (2 * ln_base)
            if truncate:
                low, high = math.floor(low), math.ceil(high)
            low, high = max(low, 0), min(high, d - 1)
            if low == high:
                high += 0.001
            ramp = np.clip((index - low) / (high - low), 0, 1)
            if not ramp.any():
                continue
            c = float((weights * ramp * (1 - ratio)).sum() / (weights * ramp**2).sum())
            if not 0 < c < 1:
                continue
            spread = math.sqrt(1 / float((weights * ramp**2).sum())) / (1 - c)  # relative, of the factor
            residual = np.max(np.abs(1 - ratio - ramp * c) / np.maximum(sigma, 1e-12))
            if residual > 8:
                continue
            kept.append((residual, truncate, length, 1 / (1 - c), low, high, spread))
    kept.sort(key=lambda item: (not item[1], _length_plainness(item[2]), item[0]))
    seen = set()
    for _, truncate, length, factor, low, high, spread in kept:
        key = (truncate, low, high)
        if key in seen:
            continue
        seen.add(key)
        for value in snap(factor, max(rtol, 1e-4, 4 * spread)):
            if value <= 1:
                continue
            scaling: dict[str, Any] = {
                "rope_type": "yarn",
                "factor": value,
                "original_max_position_embeddings": round(length),
            }
            if not truncate:
                scaling["truncate"] = False
            add(
                scaling,
                f"frequencies before {low:g} unscaled, from {high:g} on divided by {value:g}, a linear ramp "
                f"between (yarn's correction dims for beta_fast 32 and beta_slow 1)",
            )
        if len(seen) >= 3:
            break


def _length_plainness(length: float) -> int:
    """0 for a power of two, 1 for a multiple of 1000 or 1024, 2 otherwise."""
    value = round(length)
    if value > 0 and value & (value - 1) == 0:
        return 0
    return 1 if value % 1000 == 0 or value % 1024 == 0 else 2
