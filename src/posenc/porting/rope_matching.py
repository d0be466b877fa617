"""identify_rope: which rotary embedding (RoPE type and parameters) a stored buffer holds.

Two kinds of buffer are read:

* ``inv_freq``: the ``rotary_dim // 2`` frequencies θ_i (1-D, positive, decreasing; trailing zeros for
  Gemma 4's proportional type), as Hugging Face rotary modules hold them;
* a cos or sin cache: ``(positions, rotary_dim)`` (leading axes of size 1 dropped) holding A·cos(pθ_i) or
  A·sin(pθ_i) for p = 0, 1, ..., in the half layout ``[θ_0 .. θ_{n-1}, θ_0 .. θ_{n-1}]`` or the
  interleaved one ``[θ_0, θ_0, θ_1, θ_1, ...]``. Row 0 tells cos (every value A, the attention scaling)
  from sin (every value 0); θ_i is read off the rows (:func:`.rope_fitting.cache_frequencies`).

The candidate parameter sets of :mod:`.rope_fitting` (then, when none matches, :mod:`.rope_longrope`'s
LongRoPE factors and, for a merged M-RoPE cache, :mod:`.rope_sections`' sections) are recomputed exactly
with :mod:`posenc.rope` and compared with every stored value: relative error for ``inv_freq``, absolute
for a cache. The limit is what float32 code (transformers computes RoPE in float32) and the storage type
can be off by. The best match comes first; its evidence says what in the buffer points to it, and
:attr:`RopeMatch.code` is the ``posenc.rope.config(...)`` call that builds it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import rope
from . import rope_fitting as fitted
from .fitting import round_number
from .readers import host_values
from .records import RopeMatch, rope_match
from .rope_fitting import F32, PRECISIONS, candidate_configs, checked, precision_of
from .rope_longrope import longrope_candidates
from .rope_sections import identify_sections, plain_note

__all__ = ["identify_rope", "looks_like_rope", "rope_matches"]

#: Rows compared at a time (bounds memory on long caches).
_CHUNK = 4096
#: How much simpler each type counts when two parameter sets both match.


def identify_rope(array: Any, *, head_dim: int | None = None, tolerance: float | None = None) -> RopeMatch:
    """The RoPE type and parameters of a stored ``inv_freq`` vector or cos/sin cache (module docstring).

    ``array``: a NumPy array, a torch tensor (bfloat16 welcome) or nested lists. ``head_dim``: the
    attention head width when it is wider than the rotated part (partial rotary embeddings): the buffer
    only tells rotary_dim. ``tolerance``: the largest difference that still matches (relative for
    inv_freq, absolute for a cache); default: what float32 code and the storage type can be off by.

    Raises ValueError when ``array`` is neither kind of buffer. The result may be a non-match (the
    nearest candidate): check :attr:`RopeMatch.matches`.

    >>> from posenc import rope
    >>> llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
    ...           "original_max_position_embeddings": 8192}
    >>> stored = rope.inv_freq(rope.config(head_dim=128, base=500000.0, scaling=llama3)).astype("float32")
    >>> found = identify_rope(stored)  # Llama 3.1's inv_freq buffer
    >>> found.name, found.source, found.matches, found.options["base"], found.options["scaling"]["factor"]
    ('rope-llama3', 'inv_freq', True, 500000.0, 8.0)
    """
    return rope_matches(array, head_dim=head_dim, tolerance=tolerance, candidates=1)[0]


def rope_matches(
    array: Any, *, head_dim: int | None = None, tolerance: float | None = None, candidates: int = 3
) -> list[RopeMatch]:
    """The best candidate of each RoPE type, best first (``candidates`` of them): :func:`identify_rope`."""
    values, declared = _values(array)
    if head_dim is not None and (isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2):
        raise TypeError(f"head_dim must be an integer >= 2 or None; got {head_dim!r}")
    kind = looks_like_rope(values)
    if kind is None:
        raise ValueError(
            f"array of shape {tuple(np.shape(array))} is neither a RoPE inv_freq vector nor a cos/sin cache: "
            f"{_why_not(values)}"
        )
    precision = precision_of(values, declared)
    unit = PRECISIONS[precision]
    if kind == "inv_freq":
        which = None
        theta = values.reshape(-1)
        sigma = np.full(theta.shape, max(unit, 16 * F32))
        check = _inv_freq_checker(theta, unit, tolerance)
        source, layout, amplitude, cache = "inv_freq", None, None, None
        amplitude_error = 0.0
    else:
        cache, layout, which, amplitude = _cache(values)
        # sin: the amplitude from the best-known column, then θ once more
        theta, sigma, amplitude = fitted.fitted_frequencies(
            fitted.frequency_columns(cache, layout), which, amplitude, unit
        )
        sigma = np.maximum(sigma, 16 * F32)
        # cos: A is row 0 (float32 code rounds it once); sin: fitted, to about 1e-5
        amplitude_error = 2 * unit + 2 * F32 if which == "cos" else max(2 * unit, 1e-5)
        check = _cache_checker(cache, which, layout, amplitude, unit, tolerance)
        source = f"{which} cache"
    plain = candidate_configs(theta, sigma, head_dim=head_dim)
    found = checked([(_with_amplitude(k, amplitude, amplitude_error), e) for k, e in plain], check)
    if not any(item[0] for item in found) and precision in ("float32", "float64"):  # LongRoPE's own factors
        measured = None if cache is None else sigma
        extra = longrope_candidates(
            theta, measured, unit, head_dim=head_dim, amplitude=amplitude, amplitude_error=amplitude_error
        )
        found += checked(extra, check)
    sections = []
    if cache is not None and not any(item[0] for item in found):  # a merged M-RoPE cache?
        mrope = identify_sections(cache, which, layout, precision, head_dim=head_dim, tolerance=tolerance)
        sections = [mrope] if mrope else []
    if not found and not sections:
        raise ValueError(
            f"no RoPE type fits these {len(theta)} frequencies (θ_0 = {theta[0]:.6g}): they do not fall as "
            "base^(-2i/d) does"
        )
    found.sort(key=lambda item: (not item[0], _plainness(item[2]) if item[0] else 0.0, item[4]))
    best_of_type: dict[str, tuple] = {}
    for item in found:
        best_of_type.setdefault(item[1].rope_type, item)
    ranked = sorted(best_of_type.values(), key=lambda item: found.index(item))
    ranked = ranked[: max(1, candidates) - len(sections)]
    return sections + [_result(item, source, layout, precision, cache, _also(item, found)) for item in ranked]


def looks_like_rope(table: Any) -> str | None:
    """ "inv_freq", "cache" or None: whether ``table`` reads as a RoPE buffer (what :func:`identify` routes
    here). An inv_freq is 1-D (size-1 axes dropped), finite, θ_0 in (0, π), non-negative, falling; a cache
    has two equal halves or equal column pairs, a row 0 of one non-zero value (cos) or of zeros (sin), and
    a first column that changes."""
    try:
        values = table if isinstance(table, np.ndarray) and table.dtype == np.float64 else _values(table)[0]
    except (TypeError, ValueError):
        return None
    if values.size < 2 or not np.isfinite(values).all():
        return None
    squeezed = values.reshape([s for s in values.shape if s != 1])
    if squeezed.ndim == 1:
        positive = squeezed[squeezed > 0]
        ok = (
            0 < squeezed[0] < math.pi
            and (squeezed >= 0).all()
            and np.all(np.diff(squeezed) <= 0)
            and np.all(np.diff(positive) < 0)
        )
        return "inv_freq" if ok else None
    try:
        _cache(values)
    except ValueError:
        return None
    return "cache"


# --- reading the buffer ---------------------------------------------------------------------------------


def _values(array: Any) -> tuple[np.ndarray, str | None]:
    """``array`` as float64, and its storage type when the array says (torch bfloat16/float16, NumPy)."""
    declared = None
    if hasattr(array, "detach") and hasattr(array, "dtype"):  # a torch tensor: NumPy has no bfloat16
        declared = str(array.dtype).removeprefix("torch.")
    given = host_values(array)
    if given.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 (posenc's own bfloat16 tables)
        declared, given = "bfloat16", given.astype(np.float32)
    if given.dtype.kind not in "fiu":
        raise TypeError(f"a RoPE buffer holds real numbers; got {given.dtype} values")
    if given.dtype.kind == "f" and declared is None:
        declared = {2: "float16", 4: None, 8: None}.get(given.dtype.itemsize)
    return given.astype(np.float64), declared


def _cache(values: np.ndarray) -> tuple[np.ndarray, str, str, float]:
    """A cache as ``(positions, rotary_dim)``, its layout, "cos" or "sin", and A (cos: row 0)."""
    cache = values
    while cache.ndim > 2 and cache.shape[0] == 1:
        cache = cache[0]
    if cache.ndim != 2 or cache.shape[0] < 2 or cache.shape[1] < 2 or cache.shape[1] % 2:
        raise ValueError(f"a cos/sin cache has shape (positions >= 2, even rotary_dim); got {values.shape}")
    half = cache.shape[1] // 2
    if np.array_equal(cache[:, :half], cache[:, half:]):
        layout = "half"
    elif np.array_equal(cache[:, 0::2], cache[:, 1::2]):
        layout = "interleaved"
    else:
        raise ValueError(
            "its two halves differ and so do its column pairs: posenc reads a cos/sin cache of the full "
            "rotary width, each θ_i in two columns (halves, or pairs side by side); a cache of each θ_i once "
            "(flash-attn's (positions, rotary_dim / 2)) is not one it reads: give its inv_freq, or the cache "
            "concatenated with itself (`torch.cat((cos, cos), -1)`)"
        )
    first, column = cache[0], cache[:, 0]
    if np.all(first == first[0]) and first[0] != 0 and not np.all(column == column[0]):
        if np.max(np.abs(cache)) > abs(first[0]) * (1 + 1e-2):
            raise ValueError("it holds values larger than its row 0 (a cos cache is at most A = row 0)")
        return cache, layout, "cos", float(first[0])
    if not first.any() and column.any():
        return cache, layout, "sin", float(np.max(np.abs(cache)))
    raise ValueError("row 0 is neither one value (cos at position 0) nor zeros (sin at position 0)")


def _why_not(values: np.ndarray) -> str:
    """Why ``values`` is not a RoPE buffer, in a few words."""
    squeezed = values.reshape([s for s in values.shape if s != 1]) if values.size else values
    if squeezed.ndim == 1:
        return "an inv_freq vector holds finite frequencies θ_0 in (0, π) that fall (θ_i > θ_i+1 >= 0)"
    try:
        _cache(values)
    except ValueError as error:
        return str(error)
    return "it holds NaN or inf"


# --- comparing ------------------------------------------------------------------------------------------


def _inv_freq_checker(theta: np.ndarray, unit: float, tolerance: float | None) -> Any:
    """Relative error of a candidate's exact frequencies, its limit and the storage's rounding alone."""

    def check(params: rope.RopeParameters) -> tuple[float, float, float]:
        exact = rope.inv_freq(params)
        if exact.shape != theta.shape:
            return math.inf, 0.0, 0.0
        scale = np.where(exact > 0, exact, 1.0)
        error = float(np.max(np.abs(theta - exact) / scale))
        limit = tolerance if tolerance is not None else fitted.inv_freq_limit(unit, params.base)
        return error, limit, unit

    return check


def _cache_checker(
    cache: np.ndarray, which: str, layout: str, amplitude: float, unit: float, tolerance: float | None
) -> Any:
    """Largest absolute difference of a candidate's cache (float64) from the stored one, its limit (the
    storage's rounding plus float32's angle error, which grows with the position) and the rounding alone.

    The first 64 rows, 64 spread over the rest and the last 64 are compared first: a candidate over the
    limit there is not compared further (its error there is what is reported)."""
    count = cache.shape[0]
    wave = np.cos if which == "cos" else np.sin
    sample = np.unique(
        np.concatenate(
            [
                np.arange(min(count, 64)),
                np.geomspace(1, count, 64).astype(int) - 1,
                np.arange(max(0, count - 64), count),
            ]
        )
    )

    def error_on(rows: np.ndarray, columns: np.ndarray, scale: float) -> float:
        error = 0.0
        for first in range(0, len(rows), _CHUNK):
            chosen = rows[first : first + _CHUNK]
            exact = scale * wave(chosen.astype(np.float64)[:, None] * columns)
            error = max(error, float(np.max(np.abs(exact - cache[chosen]))))
        return error

    def check(params: rope.RopeParameters) -> tuple[float, float, float]:
        theta = rope.inv_freq(params)
        scale = rope.attention_scaling(params)
        if 2 * len(theta) != cache.shape[1]:
            return math.inf, 0.0, 0.0
        columns = np.concatenate([theta, theta]) if layout == "half" else np.repeat(theta, 2)
        limit, rounding = fitted.cache_limits(params, float(theta[0]), count - 1, unit, tolerance)
        error = error_on(sample, columns, scale)
        if error <= limit:
            error = error_on(np.arange(count), columns, scale)
        return error, limit, rounding

    return check


def _with_amplitude(keywords: dict[str, Any], amplitude: float | None, error: float) -> dict[str, Any]:
    """yarn's keywords with ``attention_factor`` when the cache's A is not yarn's formula for its factor."""
    scaling = keywords.get("scaling")
    kind = rope.kinds.TYPES.get(scaling.get("rope_type", "default")) if scaling else None
    if amplitude is None or kind is None or kind.scaling is None or not kind.uses("attention_factor"):
        return keywords
    try:
        formula = rope.attention_scaling(rope.config(**keywords))
    except (ValueError, TypeError):
        return keywords
    if abs(amplitude - formula) <= error * amplitude + 1e-12:
        return keywords
    value = round_number(amplitude, error) or amplitude
    return {**keywords, "scaling": {**scaling, "attention_factor": value}}


def _plainness(keywords: dict[str, Any]) -> float:
    """How far from round numbers a parameter set is (0: all round), plus the type's complexity."""
    scaling = keywords.get("scaling", {})
    kind = rope.kinds.TYPES.get(scaling.get("rope_type", "default"))
    score = 0.1 * (kind.rarity if kind is not None else max(k.rarity for k in rope.kinds.TYPES.values()))
    score += 0.0 if round_number(keywords["base"], 1e-12) else 1.0
    if "factor" in scaling:
        score += 0.0 if round_number(scaling["factor"], 1e-12) else 1.0
    length = scaling.get("original_max_position_embeddings")
    if length is not None:
        score += 0.0 if length & (length - 1) == 0 else 0.5
    if kind is not None and any(scaling.get(name, value) != value for name, value in kind.usual.items()):
        score += 0.5  # not the published values of the type's fields
    if scaling.get("truncate") is False:
        score += 0.3
    return score


def _also(item: tuple, found: list[tuple]) -> str:
    """Other matching parameter sets of the same type (what the buffer cannot tell apart), in words."""
    if not item[0]:
        return ""
    shown_as = {_short_keywords(item[2])}
    others = []
    for other in found:
        if other[0] and other[1].kind is item[1].kind:
            text = _short_keywords(other[2])
            if text not in shown_as:
                shown_as.add(text)
                others.append(text)
    if not others:
        return ""
    shown = "; ".join(others[:2])
    more = f" and {len(others) - 2} more" if len(others) > 2 else ""
    return f"; equally consistent: {shown}{more}"


def _short_keywords(keywords: dict[str, Any]) -> str:
    """The base and scaling of a parameter set, numbers to 4 digits (nearer ones count as the same)."""
    scaling = {k: v for k, v in keywords.get("scaling", {}).items() if k != "rope_type"}
    parts = [f"base={keywords['base']:.4g}"] + [
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in scaling.items()
    ]
    return ", ".join(parts)


def _result(
    item: tuple, source: str, layout: str | None, precision: str, cache: np.ndarray | None, also: str
) -> RopeMatch:
    matches, params, keywords, evidence, error, limit, rounding = item
    if cache is not None:  # the error reported: against posenc's own exact table
        index = 0 if source == "cos cache" else 1
        exact = rope.cos_sin(np.arange(cache.shape[0]), params, dtype="float64", layout=layout)[index]
        error = float(np.max(np.abs(exact - cache)))
    note = ""
    if params.kind.unfixed is not None:
        note = f"; the buffer fixes only {params.kind.unfixed(params)}"
    elif params.kind.scaling is not None and source == "inv_freq":
        note = f"; inv_freq does not hold the attention scaling: {params.rope_type}'s formula assumed"
    plain = not params.kind.fields  # no scaling: the default type
    if matches and plain and not round_number(params.base, 1e-9):
        note += (
            "; a base this far from round numbers is what dynamic NTK scaling stores once a sequence "
            "outgrows max_position_embeddings (base·s^(d/(d-2)))"
        )
    if keywords.get("scaling", {}).get("attention_factor") is not None:
        note += (
            "; the cache's amplitude is not yarn's formula, so attention_factor is given (DeepSeek's mscale)"
        )
    if matches and plain:
        note += plain_note(source)
    if params.rotary_dim == params.head_dim and not params.kind.full_head:
        note += (
            f"; head_dim={params.head_dim} assumed (a wider head with partial rotary gives the same buffer)"
        )
    return rope_match(
        params,
        keywords,
        (source, layout, precision),
        (error, limit, rounding),
        evidence + note + also,
        matches,
    )
