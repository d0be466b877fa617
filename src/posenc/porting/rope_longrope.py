"""LongRoPE (Phi-3, Phi-3.5; ``rope_type="longrope"``) read off a stored ``inv_freq`` or cos/sin cache.

LongRoPE divides each frequency by a factor of its own (d = rotary_dim, b = base, i = 0 .. d/2 - 1):

    θ_i = 1 / (λ_i · b^(2i/d)),   λ = short_factor, or long_factor once a sequence outgrows
                                    original_max_position_embeddings M₀ (transformers' rule)

and a cache is multiplied by A = sqrt(1 + ln F / ln M₀), F = factor or max_position_embeddings / M₀.

Any positive list λ fits any decreasing θ with any base, so the reading rests on what configurations hold:
factors written as short decimals (Phi-3's 1.05, 1.07, 15.41, 50.94: at most :data:`_FACTOR_DIGITS`
significant digits, stored as float32). For each base tried (the fitted ones, the one that makes the
smallest factor 1, the usual round ones) the factors λ_i = b^(-2i/d) / θ_i are snapped to the shortest
decimal within the buffer's precision; the base whose factors are all short decimals is the answer. Only a
buffer precise enough to tell (float32, float64) is read so: bfloat16 rounding hides the decimals.

What a buffer does not hold is said in the evidence: whether the list is short_factor or long_factor, and
(inv_freq) M₀ and the attention scaling; a cache's A fixes only ln F / ln M₀ = A² - 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .fitting import round_number
from .rope_fitting import F32, fit_bases, inv_freq_limit, shape_keywords

__all__ = ["longrope_candidates", "shortest_decimal"]

#: The most significant digits a configuration's factor has (Phi-3's 1.07, 15.41, 50.94).
_FACTOR_DIGITS = 4
#: A factor known to this relative precision shows whether it is a short decimal (a random value is
#: within it of one of at most 4 digits about once in 20).
_TELLING = 1e-5
#: The fewest telling factors that make a reading (fewer if the buffer has fewer frequencies).
_ENOUGH = 6
#: Round bases tried besides the fitted ones (a list of factors that all differ hides the slope).
_USUAL_BASES = (10000.0, 50000.0, 100000.0, 500000.0, 1000000.0, 5000000.0, 10000000.0)
#: Phi-3's pretraining context and its 128k context: the placeholders a buffer that does not hold them gets.
PHI3_ORIGINAL, PHI3_MAX = 4096, 131072
#: Context lengths M₀ tried when reading A = sqrt(1 + ln F / ln M₀), most usual first.
_ORIGINALS = (4096, 8192, 2048, 16384, 32768, 1024, 65536, 131072, 512, 262144)


def shortest_decimal(value: float, rtol: float) -> tuple[float, int]:
    """The decimal with the fewest significant digits within ``rtol`` (relative) of ``value``, and that
    number of digits (17: ``value`` itself).

    >>> shortest_decimal(1.0700000524520874, 1e-6)  # float32(1.07), as Phi-3's config.json writes it
    (1.07, 3)
    >>> shortest_decimal(1.0700000524520874, 1e-9)
    (1.070000052, 10)
    """
    for digits in range(1, 17):
        candidate = float(f"{value:.{digits}g}")
        if abs(candidate - value) <= rtol * abs(value):
            return candidate, digits
    return value, 17


def longrope_candidates(
    theta: np.ndarray,
    sigma: np.ndarray | None,
    unit: float,
    *,
    head_dim: int | None,
    amplitude: float | None = None,
    amplitude_error: float = 0.0,
) -> list[tuple[dict[str, Any], str]]:
    """The longrope keyword set for :func:`posenc.rope.config` that reproduces ``theta`` with factors that
    are short decimals, with the line of evidence; [] when no base gives such factors (or when they are all
    equal: linear scaling, or none).

    ``sigma``: the relative uncertainty of each θ_i read off a cache (None for an inv_freq, whose values are
    the frequencies); ``unit``: the storage's unit roundoff; ``amplitude``: a cache's A (None: inv_freq).
    """
    n = len(theta)
    if n < 2 or not np.all(theta > 0) or (sigma is not None and not np.all(np.isfinite(sigma))):
        return []
    d = 2 * n
    shape = shape_keywords(d, None, head_dim)
    if shape is None:
        return []
    best = None
    for base in _bases(theta, np.full(n, max(unit, 16 * F32)) if sigma is None else sigma, d):
        factors, fails, digits = _factors(theta, sigma, unit, base)
        if fails is not None and (best is None or (fails, digits) < best[0]):
            best = ((fails, digits), base, factors)
    if best is None or best[0][0] > 0 or len(set(best[2])) == 1:
        return []
    _, base, factors = best
    loose = "" if sigma is None else _loose(sigma)
    scaling: dict[str, Any] = {"rope_type": "longrope", "short_factor": factors, "long_factor": factors}
    top, context, said = _context(amplitude, amplitude_error)
    keywords = {**shape, "base": base, **top, "scaling": {**scaling, **context}}
    evidence = (
        f"every frequency b^(-2i/{d}) divided by a factor of its own: {len(set(factors))} distinct, "
        f"{min(factors):g} to {max(factors):g}, each a decimal of at most {_FACTOR_DIGITS} digits at base "
        f"{base:g} (other bases give factors of many more digits); a buffer cannot tell "
        "short_factor from long_factor (transformers uses long_factor once a sequence outgrows "
        "original_max_position_embeddings): the line gives this list to both, replace the other from "
        f"config.json{loose}; {said}"
    )
    return [(keywords, evidence)]


def _bases(theta: np.ndarray, sigma: np.ndarray, d: int) -> list[float]:
    """The bases to try: the fitted ones, the one that makes the smallest factor 1 (λ_i >= 1, Phi-3),
    rounded, and :data:`_USUAL_BASES`."""
    fitted, _ = fit_bases(theta, sigma, d)
    index = np.arange(1, len(theta))
    bound = float(np.min(-np.log(theta[1:]) * d / (2 * index)))  # λ_i >= 1: b <= θ_i^(-d/2i)
    rounded = round_number(math.exp(min(bound, 700.0)), 1e-4)
    found = [*fitted, *([rounded] if rounded else []), *_USUAL_BASES]
    return [b for b in dict.fromkeys(found) if b > 1.0]


def _factors(
    theta: np.ndarray, sigma: np.ndarray | None, unit: float, base: float
) -> tuple[list[float], int | None, int]:
    """λ_i = b^(-2i/d) / θ_i snapped to short decimals; how many telling ones are not short (None: too few
    telling ones to judge); their total digits."""
    n = len(theta)
    rtol = inv_freq_limit(unit, base)  # what float32 code leaves in θ
    rtols = np.full(n, rtol) if sigma is None else np.maximum(2 * sigma, rtol)
    ratio = np.exp(-2 * np.arange(n) * math.log(base) / (2 * n)) / theta
    factors, fails, digits, telling = [], 0, 0, 0
    for value, tolerance in zip(ratio.tolist(), rtols.tolist(), strict=True):
        snapped, count = shortest_decimal(value, tolerance)
        factors.append(snapped)
        if tolerance <= _TELLING:
            telling += 1
            fails += count > _FACTOR_DIGITS
            digits += count
    return factors, (fails if telling >= min(n, _ENOUGH) else None), digits


def _loose(sigma: np.ndarray) -> str:
    """What the evidence says of the factors a cache measures too coarsely to tell their decimals."""
    vague = np.flatnonzero(2 * sigma > _TELLING)
    if not len(vague):
        return ""
    worst = 2 * float(np.max(sigma[vague]))
    return (
        f"; {len(vague)} factors (from index {vague[0]}: low frequencies turn little over the cache) are "
        f"known to ±{worst:.2g} (relative) only, and rounded to what the cache shows"
    )


def _context(amplitude: float | None, error: float) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The keywords that give the attention scaling A: config's own (max_position_embeddings) and the
    scaling dict's; and a line saying how they were read.

    inv_freq (A None): Phi-3's M₀ = 4096 and max_position_embeddings = 131072, said to be placeholders. A
    cache: A² - 1 = ln F / ln M₀; the first usual M₀ for which F = M₀^(A² - 1) is a whole number gives
    max_position_embeddings = F·M₀ (Phi-3 keeps F so); else attention_factor = A."""
    if amplitude is None:
        said = (
            "inv_freq holds neither original_max_position_embeddings nor the attention scaling: the line's "
            f"{PHI3_ORIGINAL} and max_position_embeddings={PHI3_MAX} are Phi-3's, take yours from config.json"
        )
        return (
            {"max_position_embeddings": PHI3_MAX},
            {"original_max_position_embeddings": PHI3_ORIGINAL},
            said,
        )
    ratio = amplitude**2 - 1
    spread = 2 * amplitude * error + 4 * F32
    for original in _ORIGINALS:
        factor = original ** max(ratio, 0.0)
        whole = round(factor)
        if whole >= 1 and abs(whole - factor) <= math.log(original) * spread * factor + 1e-9:
            said = (
                f"the cache's amplitude A = {amplitude:.7g} fixes only ln(factor) / "
                f"ln(original_max_position_embeddings) = A² - 1 = {ratio:.5g}: read as "
                f"max_position_embeddings {whole * original} / original {original} (factor {whole})"
            )
            top = {"max_position_embeddings": whole * original}
            return top, {"original_max_position_embeddings": original}, said
    value, _ = shortest_decimal(amplitude, max(error, F32))
    said = (
        f"the cache's amplitude A = {amplitude:.7g} is attention_factor (no usual context length gives it "
        f"as sqrt(1 + ln F / ln M₀)); original_max_position_embeddings {PHI3_ORIGINAL} is Phi-3's, a "
        "placeholder"
    )
    return {}, {"attention_factor": value, "original_max_position_embeddings": PHI3_ORIGINAL}, said
