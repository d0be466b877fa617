"""Multimodal RoPE (M-RoPE: Qwen2-VL's ``mrope_section``, Qwen3-VL's interleaved sections) read off a merged
cos/sin cache.

Each token has three positions, t (time), h (height), w (width): equal for text tokens, different for
vision tokens. transformers rotates with ``(3, batch, tokens, n)`` angles, n = rotary_dim / 2, and merges
them before use: frequency i takes the position of its axis a(i),

    cache[r, i] = A · cos(p_a(i)(r) · θ_i)      (sin for a sin cache; both layouts repeat each θ_i twice)

* contiguous (Qwen2-VL, Qwen2.5-VL; ``mrope_section = [s_t, s_h, s_w]``, [16, 24, 24] for n = 64):
  a(i) = t for i < s_t, h for i < s_t + s_h, w after;
* interleaved (Qwen3-VL, ``mrope_interleaved``; [24, 20, 20]): a(i) = h for i ≡ 1 (mod 3) and i < 3·s_h,
  w for i ≡ 2 (mod 3) and i < 3·s_w, t otherwise.

An ``inv_freq`` holds no positions, and a cache of text tokens alone (t = h = w) is a plain cache: neither
shows the sections (:func:`plain_note`). A merged cache with vision tokens is read in steps:

1. the leading rows that form a plain cache (row r at position r: the text before the first image) give
   θ and the type and base, as any cache does (:mod:`.rope_fitting`);
2. each row's t position: among the integers 0 <= p <= 2r + 64 that column 0 allows (A·cos(pθ_0) is the
   stored value to the storage's precision and float32's angle error), the one that reproduces the most
   columns; then once more, counting only the columns the first choice reproduces in 90% of the rows (so
   that another axis's many columns cannot win a row by a coincidence). The columns t reproduces in every
   row follow t;
3. h likewise from the first column t does not reproduce, w from the first column neither does;
4. every section, contiguous or interleaved, whose axes agree with what each column allows is a candidate;
   the plainest (Qwen2-VL's, Qwen3-VL's, then equal h and w) is recomputed exactly with the positions found
   (:func:`posenc.rope.cos_sin`) and compared with every stored value.

Low frequencies that turn too little at the cache's positions show no axis (a cos cache hides them first):
those columns fit several sections, which the evidence says. Caches of more than :data:`MAX_ROWS` rows are
not read (each row's candidate positions are about as many as the rows).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .. import rope
from ..rope.arrays import mrope_axes
from .limits import CAP
from .records import RopeMatch, rope_match
from .rope_fitting import (
    F32,
    PRECISIONS,
    cache_limits,
    candidate_configs,
    fitted_frequencies,
    frequency_columns,
)

__all__ = ["identify_sections", "plain_note"]

#: The sections of the released models, (sections, interleaved): Qwen2-VL/Qwen2.5-VL, Qwen3-VL.
KNOWN = {((16, 24, 24), False): "Qwen2-VL's", ((24, 20, 20), True): "Qwen3-VL's"}
#: Candidate positions handled at a time (bounds memory on long caches).
_CHUNK = 1 << 21
#: Plain-prefix candidates tried (each costs a decoding).
_TRIED = 3
#: Share of the rows in which a column must follow an axis to count in the second scoring pass.
_MOSTLY = 0.9
#: The longest cache read (the work grows as rows²: about 1.5 s at 4096 rows, 7 s at 16384).
MAX_ROWS = 16384


def plain_note(source: str) -> str:
    """What a default verdict adds: M-RoPE's sections do not show in this buffer."""
    if source == "inv_freq":
        return "; M-RoPE (Qwen2-VL, Qwen3-VL) stores this same inv_freq: mrope_section cannot be seen in it"
    return (
        "; an M-RoPE cache of text tokens alone (t = h = w) is this same plain cache: mrope_section cannot "
        "be seen in it"
    )


def identify_sections(
    cache: np.ndarray,
    which: str,
    layout: str,
    precision: str,
    *,
    head_dim: int | None = None,
    tolerance: float | None = None,
) -> RopeMatch | None:
    """The M-RoPE verdict of a merged cache ``(positions, rotary_dim)`` (module docstring): sections, their
    positions, and how far the exact recomputation is from the stored values; None when the cache does not
    read as M-RoPE (no plain leading rows, a column no axis explains, one position sequence for all, more
    than :data:`MAX_ROWS` rows)."""
    if cache.shape[0] > MAX_ROWS:
        return None
    columns = frequency_columns(cache, layout)
    unit = PRECISIONS[precision]
    for keywords, evidence, amplitude, prefix in _plain_prefixes(columns, which, unit, head_dim)[:_TRIED]:
        params = rope.config(**keywords)
        read = _read_axes(_Stored(columns, rope.inv_freq(params), which, amplitude, unit))
        if read is None:
            continue
        positions, allowed, shown = read
        for sections, interleaved, others in _sections(allowed)[:_TRIED]:
            scaling = {"rope_type": params.rope_type, **keywords.get("scaling", {})}
            scaling["mrope_section"] = list(sections)
            if interleaved:
                scaling["mrope_interleaved"] = True
            found = {**keywords, "scaling": scaling}
            result = _compare(cache, which, layout, found, positions, unit, tolerance)
            if result is None:
                continue
            said = _evidence(sections, interleaved, (others, shown), allowed, positions, prefix, evidence)
            return _match(found, result, f"{which} cache", layout, precision, said, positions)
    return None


def _match(
    keywords: dict[str, Any],
    result: tuple[float, float, float, rope.RopeParameters],
    source: str,
    layout: str,
    precision: str,
    evidence: str,
    positions: np.ndarray,
) -> RopeMatch:
    """The verdict: ``result`` is :func:`_compare`'s (error, limit, rounding, parameters)."""
    *numbers, params = result
    axes = tuple(tuple(int(p) for p in axis) for axis in positions)
    return rope_match(params, keywords, (source, layout, precision), tuple(numbers), evidence, positions=axes)


# --- step 1: the plain leading rows ---------------------------------------------------------------------


def _plain_prefixes(
    columns: np.ndarray, which: str, unit: float, head_dim: int | None
) -> list[tuple[dict, str, float, int]]:
    """Parameter sets that reproduce the longest leading run of rows read as positions 0, 1, ... (rows
    2^k, largest first): (keywords, evidence, A, rows)."""
    count = columns.shape[0]
    rows = [2**k for k in range(count.bit_length() - 1, 1, -1) if 2**k < count]
    largest = float(np.max(np.abs(columns)))  # a sin cache's A, roughly: some position turns near π/2
    for prefix in rows:
        head = columns[:prefix]
        amplitude = float(head[0, 0]) if which == "cos" else largest
        theta, sigma, amplitude = fitted_frequencies(head, which, amplitude, unit, refits=3)
        kept = []
        for keywords, evidence in candidate_configs(theta, np.maximum(sigma, 16 * F32), head_dim=head_dim):
            try:
                params = rope.config(**keywords)
            except (ValueError, TypeError):
                continue
            if params.kind.depends_on_length or params.kind.full_head:  # not a fit of one θ set
                continue
            scale = rope.attention_scaling(params)
            if _Stored(head, rope.inv_freq(params), which, scale, unit).explained(np.arange(prefix)).all():
                kept.append((keywords, evidence, scale, prefix))
        if kept:
            return kept
    return []


def _limit(scale: float, theta: Any, position: Any, stored: Any, unit: float) -> Any:
    """What a stored value A·cos(pθ) may be off by: float32's angle error (p·θ·2^-24·(4 + |ln θ|): the
    rounding of θ, which grows with the exponent, and of the product; never above :data:`.limits.CAP`)
    plus the storage's and float32's rounding of the value (relative)."""
    angle = np.minimum(F32 * (4 + np.abs(np.log(theta))) * np.maximum(position, 1) * theta, CAP)
    return abs(scale) * (angle + 2.0**-40) + (unit + 2 * F32) * np.abs(stored)


# --- steps 2 and 3: the positions of each axis ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Stored:
    """The frequency columns ``(rows, n)`` of a merged cache with what reading them needs."""

    columns: np.ndarray
    theta: np.ndarray
    which: str
    amplitude: float
    unit: float

    def explained(self, positions: np.ndarray, rows: Any = slice(None), scored: Any = slice(None)) -> Any:
        """Whether A·cos(p θ_i) (sin) reproduces each stored value of ``rows`` × ``scored`` columns, p the
        row's position (``positions``: one per row, or ``(m, 1)`` for m (row, position) pairs)."""
        wave = np.cos if self.which == "cos" else np.sin
        theta, stored = self.theta[scored], self.columns[rows][:, scored]
        p = np.asarray(positions, dtype=np.float64).reshape(-1, 1)
        error = np.abs(self.amplitude * wave(p * theta) - stored)
        return error <= _limit(self.amplitude, theta, p, stored, self.unit)


def _read_axes(stored: _Stored) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The (3, rows) positions t, h, w; for each column, the axes whose positions reproduce it in every
    row (``allowed``, (columns, 3) bool); how many axes show (3, or 2 when w is found in no column: it gets
    h's positions). None when one sequence explains every column, or some column none."""
    n = stored.columns.shape[1]
    positions: list[np.ndarray] = []
    allowed = np.zeros((n, 3), dtype=bool)
    unexplained = np.arange(n)
    for axis in range(3):
        if not len(unexplained):
            break
        prior = positions[0] if positions else None  # on a tie, t's position (text tokens: t = h = w)
        found = _decode(stored, int(unexplained[0]), unexplained, prior)
        if found is None:
            return None
        positions.append(found)
        allowed[:, axis] = stored.explained(found).all(axis=0)
        unexplained = np.flatnonzero(~allowed[:, : axis + 1].any(axis=1))
        if axis == 0 and not len(unexplained):
            return None  # one position sequence for every column: a plain cache
    if len(unexplained):
        return None
    shown = len(positions)
    while len(positions) < 3:  # w shows nowhere: it may be h's (its columns fit either)
        positions.append(positions[-1])
        allowed[:, len(positions) - 1] = allowed[:, len(positions) - 2]
    return np.stack(positions), allowed, shown


def _decode(
    stored: _Stored, reference: int, scored: np.ndarray, prior: np.ndarray | None
) -> np.ndarray | None:
    """Each row's position for the axis of column ``reference``: of the integers that column allows, the
    one that reproduces the most ``scored`` columns (on a tie: ``prior``'s, else the lowest); then again
    counting only the columns that position reproduces in most rows (so that another axis's many columns
    cannot win a row by a coincidence)."""
    rows, candidates = _allowed(stored, reference)
    if not len(rows) or len(np.unique(rows)) < stored.columns.shape[0]:
        return None
    chosen = _best(stored, rows, candidates, scored, prior)
    mostly = scored[stored.explained(chosen)[:, scored].mean(axis=0) >= _MOSTLY]
    if len(mostly):
        chosen = _best(stored, rows, candidates, mostly, prior)
    return chosen


def _allowed(stored: _Stored, column: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, position) pairs: the integers 0 <= p <= 2r + 64 (r the row) for which A·cos(pθ) (sin) is the
    value of ``column`` to within :func:`_limit`. Angles: ±arccos + 2πk (arcsin and π − arcsin + 2πk)."""
    values, theta = stored.columns[:, column], float(stored.theta[column])
    x = np.clip(values / stored.amplitude, -1.0, 1.0)
    first = np.arccos(x) if stored.which == "cos" else np.arcsin(x)
    second = -first if stored.which == "cos" else math.pi - first
    rows_out, positions_out = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    start = 0
    while start < len(x):
        step = len(x) - start  # rows at a time: about _CHUNK angles (their positions grow with the row)
        while step > 1 and 2 * step * (2 * (start + step) + 64) * theta / (2 * math.pi) > _CHUNK:
            step //= 2
        stop = start + step
        turns = np.arange(-1, int((2 * stop + 64) * theta / (2 * math.pi)) + 2)
        top = (2 * np.arange(start, stop) + 64)[:, None, None]  # each row's largest position
        real = (
            np.stack([first[start:stop], second[start:stop]], 1)[:, :, None] + 2 * math.pi * turns
        ) / theta
        here = x[start:stop, None, None]
        slack = _limit(1.0, theta, np.abs(real), here, stored.unit)  # at each real's own position
        width = (slack / np.sqrt(np.maximum(1 - here**2, slack)) + 1e-12) / theta  # angle → positions
        reach = int(min(math.ceil(float(np.max(width))), 16))
        for offset in range(-reach, reach + 1):
            q = np.round(real) + offset
            ok = (np.abs(q - real) <= width) & (q >= 0) & (q <= top)
            rows_out.append(np.nonzero(ok)[0] + start)
            positions_out.append(q[ok].astype(np.int64))
        start = stop
    rows, positions = np.concatenate(rows_out), np.concatenate(positions_out)
    span = 2 * len(x) + 65
    key = np.unique(rows * span + positions)
    return key // span, key % span


def _best(
    stored: _Stored, rows: np.ndarray, candidates: np.ndarray, scored: np.ndarray, prior: np.ndarray | None
) -> np.ndarray:
    """Per row, of the (row, candidate position) pairs, the position that reproduces the most ``scored``
    columns; on a tie the row's ``prior`` position (if not None), else the lowest."""
    counts = np.empty(len(rows), dtype=np.int64)
    step = max(1, _CHUNK // len(scored))
    for start in range(0, len(rows), step):
        part = slice(start, start + step)
        counts[part] = stored.explained(candidates[part], rows[part], scored).sum(axis=1)
    other = np.zeros(len(rows), dtype=bool) if prior is None else candidates != prior[rows]
    order = np.lexsort((candidates, other, -counts, rows))  # by row, most columns, the prior, the lowest
    first = np.unique(rows[order], return_index=True)[1]
    return candidates[order][first]


# --- step 4: the sections -------------------------------------------------------------------------------


def _sections(allowed: np.ndarray) -> list[tuple[tuple[int, int, int], bool, int]]:
    """Every (sections, interleaved) whose axis for each column is one ``allowed`` says, plainest first,
    each with how many others are as consistent."""
    n = allowed.shape[0]
    found = []
    for a in range(1, n):
        for b in range(0, n - a + 1):
            if _fits(allowed, mrope_axes((a, b, n - a - b), False)):
                found.append(((a, b, n - a - b), False))
    for h in range(0, (n + 1) // 3 + 1):
        for w in range(0, n // 3 + 1):
            if n - h - w >= 1 and _fits(allowed, mrope_axes((n - h - w, h, w), True)):
                found.append(((n - h - w, h, w), True))
    found.sort(key=_plainness)
    return [(sections, interleaved, len(found) - 1) for sections, interleaved in found]


def _fits(allowed: np.ndarray, axes: np.ndarray) -> bool:
    """Whether every column's axis is one it allows."""
    return bool(allowed[np.arange(len(axes)), axes].all())


def _plainness(item: tuple[tuple[int, int, int], bool]) -> tuple:
    """The released models' sections first; then three non-empty sections, h = w, round sizes."""
    sections, _ = item
    twos = min((s & -s) if s else 64 for s in sections)
    return (item not in KNOWN, 0 in sections, sections[1] != sections[2], -twos, sections)


# --- checking and saying --------------------------------------------------------------------------------


def _compare(
    cache: np.ndarray,
    which: str,
    layout: str,
    keywords: dict[str, Any],
    positions: np.ndarray,
    unit: float,
    tolerance: float | None,
) -> tuple[float, float, float, rope.RopeParameters] | None:
    """The largest difference of posenc's exact merged cache from the stored one, its limit (as for a plain
    cache: the storage's rounding plus float32's angle error at the largest position), the rounding alone
    and the parameters; None when over the limit."""
    try:
        params = rope.config(**keywords)
    except (ValueError, TypeError):
        return None
    exact = rope.cos_sin(positions, params, dtype="float64", layout=layout)[which == "sin"]
    error = float(np.max(np.abs(exact - cache)))
    theta0 = float(rope.inv_freq(params)[0])
    limit, rounding = cache_limits(params, theta0, max(int(positions.max()), 1), unit, tolerance)
    return (error, limit, rounding, params) if error <= limit else None


def _evidence(
    sections: tuple[int, int, int],
    interleaved: bool,
    counts: tuple[int, int],
    allowed: np.ndarray,
    positions: np.ndarray,
    prefix: int,
    plain: str,
) -> str:
    """The line of evidence: the columns of each axis, the positions, what cannot be told (``counts``: how
    many other sections fit, how many axes show), the fit."""
    others, shown = counts
    kind = "interleaved (Qwen3-VL style)" if interleaved else "contiguous (Qwen2-VL style)"
    known = KNOWN.get((sections, interleaved))
    said = f"multimodal RoPE: the columns follow 3 position sequences (t, h, w), {kind} mrope_section="
    said += f"{list(sections)}" + (f" ({known})" if known else "")
    vague = np.flatnonzero(allowed.sum(axis=1) > 1)
    if others:
        said += (
            f"; {len(vague)} columns ({_ranges(vague)}) turn too little at these positions to show their "
            f"axis (nor their positions): {others} other sections fit as well, this is the plainest"
        )
    if shown < 3:
        said += "; no column shows w apart from h at this precision: w's positions are h's"
    said += f"; positions (t, h, w; RopeMatch.positions, --json): {_summary(positions)}"
    return said + f"; θ from the first {prefix} rows (text, t = h = w = row): {plain}"


def _ranges(values: np.ndarray) -> str:
    """1, 2, 3, 7 as '1-3, 7'."""
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(f"{start}" if start == v else f"{start}-{v}")
            start = None
    return ", ".join(out)


def _summary(positions: np.ndarray, shown: int = 6) -> str:
    """The positions as runs of rows: text runs (t = h = w) and vision runs (each axis's range)."""
    same = (positions[0] == positions[1]) & (positions[1] == positions[2])
    edges = np.flatnonzero(np.diff(same.astype(np.int8))) + 1
    starts = [0, *edges.tolist()]
    ends = [*edges.tolist(), len(same)]
    parts = []
    for a, b in zip(starts, ends, strict=True):
        where = f"row {a}" if b == a + 1 else f"rows {a}-{b - 1}"
        if same[a]:
            parts.append(f"{where} t = h = w = {_span(positions[0, a:b])}")
        else:
            spans = ", ".join(f"{n} {_span(positions[i, a:b])}" for i, n in enumerate("thw"))
            parts.append(f"{where} {spans}")
    more = f"; ... ({len(parts)} runs)" if len(parts) > shown else ""
    return "; ".join(parts[:shown]) + more


def _span(values: np.ndarray) -> str:
    """A run's positions as 'low..high' (or the one value)."""
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}..{high}"
