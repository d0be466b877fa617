"""The criteria of a good positional encoding, as data: the table :data:`CRITERIA`, one pure function each.

A positional encoding should give each position a unique encoding, keep the distance between two positions
the same whatever the sequence length, generalise to sequences longer than those seen, stay bounded and be
deterministic (the usual list, e.g. Kazemnejad 2019, "Transformer Architecture: The Positional Encoding");
the sinusoids add shift invariance, dot products that depend on the offset only (Vaswani et al. 2017 §3.5).

Each criterion is measured by a function of the :class:`Evidence` (the encodings of positions
0 .. 2L - 1, built once by :func:`posenc.analysis.check.check`) that returns a :class:`Finding`: its figure,
its tolerance, pass or fail and a sentence. :data:`CRITERIA` lists them in report order with their names and
titles; the report, the command line and the documentation read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import validation
from ..core import table
from ..core.options import frequency_options
from ._work import chunks, max_abs, nonfinite_rows, row_norms
from .collisions import collisions, first_repeat
from .hashes import bits
from .margin import closest_pair
from .properties import closed_form_dot_product, differing_values, recomputed_windows, wrap_length
from .rounding import dot_product_tolerance, row_error_bound


@dataclass(frozen=True)
class Criterion:
    """One measured criterion of :func:`~posenc.analysis.check.check`: its ``figure`` (a number), ``passed``,
    and a sentence; ``tolerance`` is the bound the figure was judged by.

    >>> from posenc.analysis import check
    >>> unique = check(4096, 64, dtype="bfloat16", compute="dtype").criteria[0]  # the usual code
    >>> unique.name, unique.passed, unique.figure, unique.tolerance
    ('unique', False, 0.0, 0.0)
    >>> unique.detail
    'position 257 has the same bfloat16 encoding as position 256; 769 distinct encodings for 4,096 positions'
    """

    name: str
    title: str
    passed: bool
    figure: float | None
    detail: str
    data: dict[str, Any] = field(default_factory=dict)
    tolerance: float | None = None


@dataclass(frozen=True)
class Evidence:
    """What the criteria look at, built once: the encodings of positions 0 .. 2 ``length`` - 1 (``rows``,
    shape ``(2 length, d_model)``), their 128-bit hashes (``hashes``, ``(2 length, 2)``), and
    ``build(lo, hi)`` to compute rows lo .. hi - 1 again. ``options`` are those of :func:`posenc.table`
    (base, shift, scale, layout, odd, and dtype as a NumPy dtype); ``compute`` is ``"exact"`` (posenc) or
    ``"dtype"`` (the usual code)."""

    length: int
    d_model: int
    options: dict[str, Any]
    compute: str
    rows: np.ndarray
    hashes: np.ndarray
    build: Callable[[int, int], np.ndarray]

    @property
    def dtype_name(self) -> str:
        """The dtype judged, by name: "float32", "bfloat16", ..."""
        return str(self.options["dtype"].name)

    @property
    def pairs(self) -> int:
        """n = d_model // 2, the number of (sin, cos) pairs."""
        return self.d_model // 2

    @property
    def lone_sine(self) -> bool:
        """Whether the last column is a sine without its cosine (an odd width under odd="literal"/"drop")."""
        return validation.plan(self.d_model, self.options["odd"])[0] > self.pairs

    @property
    def frequency_options(self) -> dict[str, Any]:
        """The options that fix the frequencies ω_i: base, shift, scale, odd (the closed forms take these)."""
        return frequency_options(self.options)

    @property
    def dot_tolerance(self) -> float:
        """How far a measured PE(p)·PE(p+k) may be from Σ cos(k ω_i): the bound for the dtype's rounding."""
        return dot_product_tolerance(self.d_model, self.options["dtype"])


@dataclass(frozen=True)
class Finding:
    """What measuring one criterion found: pass or fail, the figure and its tolerance, a sentence, and data
    for the JSON report."""

    passed: bool
    figure: float | None
    detail: str
    data: dict[str, Any]
    tolerance: float


@dataclass(frozen=True)
class Definition:
    """One criterion: its ``name`` (in the JSON report), ``title`` (in the text report), what it ``checks``
    and what it ``tolerates`` (sentences for the documentation), and the function that ``measure``-s it."""

    name: str
    title: str
    checks: str
    tolerates: str
    measure: Callable[[Evidence], Finding]

    def judge(self, evidence: Evidence) -> Criterion:
        """Measure this criterion on ``evidence``."""
        f = self.measure(evidence)
        return Criterion(self.name, self.title, f.passed, f.figure, f.detail, f.data, f.tolerance)


# --- the criteria --------------------------------------------------------------------------------------


def unique(e: Evidence) -> Finding:
    """No two of positions 0 .. L - 1 share an encoding; the figure is the smallest distance between two."""
    length, name = e.length, e.dtype_name
    found = first_repeat(e.hashes[:length], e.build, 0, limit=length)
    data: dict[str, Any] = {
        "first_collision": found.first,
        "equals": found.earlier,
        "distinct": found.distinct,
    }
    if found.first is not None:
        detail = (
            f"position {found.first} has the same {name} encoding as position {found.earlier}; "
            f"{found.distinct:,} distinct encodings for {length:,} positions"
        )
        return Finding(False, 0.0, detail, data, 0.0)
    broken = _not_finite(e, 0, length)
    if broken is not None:
        return Finding(False, None, f"{broken}: such an encoding is at no distance from any other", data, 0.0)
    rows = e.rows[:length]
    if e.compute == "exact":
        eps = row_error_bound(e.options["dtype"], e.d_model, e.options["odd"])
    else:
        eps = _naive_error(e, rows)
    margin = closest_pair(rows, 0, eps, **e.frequency_options)
    data.update(margin_positions=[margin.a, margin.b])
    if length < 2:
        return Finding(True, None, "a single position: nothing to tell apart", data, 0.0)
    bound = "" if margin.complete else "at most "
    detail = (
        f"all {length:,} encodings differ; the closest two, positions {margin.a} and {margin.b}, "
        f"are {bound}{margin.distance:.4g} apart (every encoding has norm {_exact_norm(e, 4)})"
    )
    wrap = wrap_length(e.d_model, **e.frequency_options)
    if length > wrap:
        detail += f"; past position {wrap:,.0f} every pair has wrapped, the pairs together still differ"
    if e.compute == "exact" and name != "float64":
        usual = collisions(length, e.d_model, **e.options, compute="dtype")
        data["usual_code_first_collision"] = usual.first
        if usual.first is not None:
            detail += (
                f". (The usual code, computing the angles in {name}, gives position {usual.first} the "
                f'encoding of position {usual.earlier}: see compute="dtype")'
            )
    return Finding(True, margin.distance, detail, data, 0.0)


#: The most bytes the consistent criterion's table(2L) may take: a longer check compares the longest pair of
#: tables that fits (table(L') and table(2L'), L' < L), and says so.
PAIR_BYTES = 1 << 28
#: The most bytes of float64 rows a step of the dot-product deviation holds (two rows a pair).
DOT_BYTES = 1 << 25
#: The most bytes of the distinct rows the dot-product deviation holds, in their dtype, to read each once.
HELD_BYTES = 1 << 27


def pair_length(length: int, d_model: int, dtype: np.dtype) -> int:
    """L', the length the consistent criterion compares: L, or the longest whose table(2L') fits in
    :data:`PAIR_BYTES`."""
    return max(1, min(length, PAIR_BYTES // (2 * d_model * np.dtype(dtype).itemsize)))


def consistent(e: Evidence) -> Finding:
    """table(L) equals the first L rows of table(2L) bit for bit (both computed, each as one call; past
    :data:`PAIR_BYTES`, the longest L' that fits); the figure counts the values that differ."""
    length = pair_length(e.length, e.d_model, e.options["dtype"])
    longer = e.build(0, 2 * length)
    differ = int(np.count_nonzero(bits(e.build(0, length)) != bits(longer[:length])))
    detail = f"table({length}) and the first {length} rows of table({2 * length}) " + (
        "are identical bit for bit: every distance is the same at any length"
        if not differ
        else f"differ in {differ:,} values"
    )
    if length < e.length:
        detail += (
            f" (L = {length:,}, not {e.length:,}: the longest pair of tables whose longer one fits in "
            f"{PAIR_BYTES >> 20} MiB)"
        )
    return Finding(differ == 0, float(differ), detail, {}, 0.0)


def generalises(e: Evidence) -> Finding:
    """Positions L .. 2L - 1 are bounded, distinct from all before them, and their dot products follow the
    closed form; the figure is the dot-product deviation there."""
    length, tolerance = e.length, e.dot_tolerance
    broken = _not_finite(e, length, 2 * length)
    top = max_abs(e.rows[length:])
    found = first_repeat(e.hashes, e.build, 0, limit=2 * length, after=length)
    deviation, pairs = _dot_deviation(e, length, 2 * length)
    where = f"positions {length}..{2 * length - 1}"
    problems = []
    if broken is not None:
        problems.append(broken)
    elif top > 1.0:
        problems.append(f"max |PE| = {top:.6g} > 1")
    if found.first is not None:
        problems.append(f"position {found.first} has the encoding of position {found.earlier}")
    if broken is None and deviation > tolerance:
        problems.append(f"dot products off the closed form by {deviation:.3g} (tolerance {tolerance:.3g})")
    if not problems:
        detail = (
            f"{where}, beyond this length: bounded by 1, distinct from each other and from "
            f"0..{length - 1}, dot products within {deviation:.3g} of Σ cos(k ω_i) ({pairs:,} "
            f"pair{'' if pairs == 1 else 's'})"
        )
    else:
        detail = f"{where}, beyond this length: " + "; ".join(problems)
    finite = broken is None
    data = {"first_collision": found.first, "equals": found.earlier, "max_abs": top if finite else None}
    return Finding(not problems, deviation if finite else None, detail, data, tolerance)


def bounded(e: Evidence) -> Finding:
    """max |PE| ≤ 1 over positions 0 .. L - 1; the figure is max |PE|."""
    rows = e.rows[: e.length]
    broken = _not_finite(e, 0, e.length)
    if broken is not None:
        return Finding(False, None, broken, {"max_norm": None}, 1.0)
    top = max_abs(rows)
    norms = row_norms(rows)
    exactly = "" if e.lone_sine else "exactly "
    detail = (
        f"max |PE| = {top:.6g} ≤ 1; row norms from {norms.min():.6g} to {norms.max():.6g} ({exactly}"
        f"{_exact_norm(e, 6)} before rounding)"
    )
    return Finding(top <= 1.0, top, detail, {"max_norm": float(norms.max())}, 1.0)


def deterministic(e: Evidence) -> Finding:
    """Recomputing gives the same bits; the figure counts the values that differ."""
    length = e.length
    reference = e.rows[:length]
    if e.compute == "exact":
        differ = differing_values(reference, 0, e.d_model, e.options)
    else:
        differ = sum(  # recomputed block by block, as the rows were first computed
            int(np.count_nonzero(bits(e.build(lo, hi)) != bits(reference[lo:hi])))
            for lo, hi in chunks(length, e.d_model)
        )
    how = "again"
    if e.compute == "exact":  # as differing_values recomputes it
        rows = min(length, 64)
        one_by_one = f"{rows} rows spread over it one by one"
        windows = recomputed_windows(length, e.d_model)
        how = (
            f"whole, in two halves, and {one_by_one}"
            if windows is None
            else f"{len(windows)} windows of it, each alone and inside a longer table, and {one_by_one}"
        )
    same = "identical bit for bit" if not differ else f"different in {differ:,} places"
    return Finding(differ == 0, float(differ), f"recomputed ({how}), the values are {same}", {}, 0.0)


def shift_invariant(e: Evidence) -> Finding:
    """PE(p)·PE(p+k) = Σ_i cos(k ω_i) on sampled pairs in 0 .. L - 1; the figure is the largest deviation."""
    tolerance = e.dot_tolerance
    deviation, pairs = _dot_deviation(e, 0, e.length)
    data = {"tolerance": tolerance, "pairs": pairs}
    broken = _not_finite(e, 0, e.length)
    if broken is not None:
        return Finding(False, None, f"{broken}: its dot products are no numbers", data, tolerance)
    detail = (
        f"PE(p)·PE(p+k) differs from Σ cos(k ω_i) by at most {deviation:.3g} over {pairs:,} sampled "
        f"pair{'' if pairs == 1 else 's'} in 0..{e.length - 1} (tolerance {tolerance:.3g}, the bound for "
        f"{e.dtype_name} rounding)"
    )
    return Finding(deviation <= tolerance, deviation, detail, data, tolerance)


#: The criteria, in report order. L is the length checked, n = d_model // 2, u the dtype's unit roundoff.
CRITERIA: tuple[Definition, ...] = (
    Definition(
        "unique",
        "unique encoding for each position",
        "no two of positions 0 .. L - 1 share an encoding (bit for bit, ±0 equal); figure: the smallest "
        "distance between two positions' encodings (0 when two coincide)",
        "the figure must be above 0: no repeated encoding",
        unique,
    ),
    Definition(
        "consistent",
        "consistent distance across sequence lengths",
        "table(L) is bit-identical to the first L rows of table(2L), both computed, so distances do not "
        "depend on the sequence length (where table(2L) passes 256 MiB, the longest L that fits, named in "
        "the report); figure: the number of values that differ",
        "no value may differ",
        consistent,
    ),
    Definition(
        "generalises",
        "generalises to longer sequences",
        "positions L .. 2L - 1, never seen at this length, are bounded by 1, distinct from each other and "
        "from positions 0 .. L - 1, and their dot products follow Σ_i cos(k ω_i); figure: the dot-product "
        "deviation there",
        "the tolerance of shift_invariant",
        generalises,
    ),
    Definition(
        "bounded",
        "bounded values",
        "max |PE| over positions 0 .. L - 1; figure: that maximum (none where a value is a NaN or an "
        "infinity, which fails this criterion and every one that measures values)",
        "at most 1",
        bounded,
    ),
    Definition(
        "deterministic",
        "deterministic",
        "recomputing (again, in two halves, 64 rows by encode) gives the same bits; figure: the number of "
        "values that differ",
        "no value may differ",
        deterministic,
    ),
    Definition(
        "shift_invariant",
        "shift invariance: dot products depend on the offset only",
        "PE(p) · PE(p + k) = Σ_i cos(k ω_i) for up to 4096 distinct sampled pairs 0 ≤ p < p + k < L (fixed "
        "seed; offsets 1 .. 16 always included); figure: the largest deviation",
        "n (2u + u²) for values with relative error ≤ u (u = 2⁻²⁴ in float32, 2⁻⁸ in bfloat16), plus "
        "float64 summation",
        shift_invariant,
    ),
)


# --- shared by the criteria ----------------------------------------------------------------------------


def _dot_deviation(e: Evidence, lo: int, hi: int) -> tuple[float, int]:
    """max |PE(p)·PE(p+k) - Σ cos(k ω)| over sampled lo <= p < p + k < hi, and the number of pairs: up
    to 64 distinct starts p for each of up to 64 distinct offsets k (all of them where there are fewer), so
    the count is of distinct pairs."""
    span = hi - lo
    if span < 2:
        return 0.0, 0
    rng = np.random.default_rng(20240601 + lo)
    offsets = np.unique(np.concatenate([np.arange(1, min(16, span - 1) + 1), rng.integers(1, span, 48)]))
    starts = [
        np.arange(span - k) if span - k <= 64 else rng.choice(span - k, 64, replace=False) for k in offsets
    ]
    p = lo + np.concatenate(starts)
    k = np.repeat(offsets, [len(s) for s in starts])
    # each distinct row read once where they fit in HELD_BYTES (a row not kept is computed again when read:
    # the pairs name each row ~20 times), else each step's rows read as they come
    needed, index = np.unique(np.concatenate([p, p + k]), return_inverse=True)
    held = None
    if len(needed) * e.d_model * e.rows.dtype.itemsize <= HELD_BYTES:
        held, first, second = np.asarray(e.rows[needed]), index[: len(p)], index[len(p) :]
    measured = np.empty(len(p))
    step = max(1, DOT_BYTES // (16 * e.d_model))  # pairs a step: two float64 rows each
    for at in range(0, len(p), step):
        part = slice(at, at + step)
        if held is not None:
            a, b = held[first[part]].astype(np.float64), held[second[part]].astype(np.float64)
        else:
            a, b = e.rows[p[part]].astype(np.float64), e.rows[p[part] + k[part]].astype(np.float64)
        measured[part] = np.einsum("ij,ij->i", a, b)
    expected = closed_form_dot_product(offsets, e.d_model, **e.frequency_options)
    expected = np.repeat(expected, [len(s) for s in starts])
    return float(np.abs(measured - expected).max()), len(p)


def _not_finite(e: Evidence, lo: int, hi: int) -> str | None:
    """None where the encodings of positions lo .. hi - 1 are all finite; else a sentence naming the first
    that holds a NaN or an infinity, and how many do."""
    count, first = nonfinite_rows(e.rows[lo:hi])
    if first is None:
        return None
    row = e.rows[lo + first : lo + first + 1].astype(np.float64)
    what = "a NaN" if np.isnan(row).any() else "an infinity"
    cause = f" (computed in {e.dtype_name}, its angles overflow)" if e.compute == "dtype" else ""
    return (
        f"the encoding of position {lo + first} holds {what}{cause}; {count:,} of positions {lo}..{hi - 1} "
        "hold a NaN or an infinity"
    )


def _naive_error(e: Evidence, rows: np.ndarray) -> float:
    """The largest distance of a row of the usual code from the exact encoding (for the margin search)."""
    worst = 0.0
    for lo, hi in chunks(len(rows), e.d_model):
        exact = table(hi - lo, e.d_model, start=lo, **{**e.options, "dtype": "float64"})
        worst = max(worst, float(row_norms(rows[lo:hi].astype(np.float64) - exact).max(initial=0.0)))
    return worst * (1 + 1e-9) + 1e-15


def _exact_norm(e: Evidence, digits: int) -> str:
    """The norm of every exact encoding: √n, or between √n and √(n + 1) with a lone sine column."""
    n = e.pairs
    if e.lone_sine:
        return f"between √{n} = {math.sqrt(n):.{digits}g} and √{n + 1} = {math.sqrt(n + 1):.{digits}g}"
    return f"√{n} = {math.sqrt(n):.{digits}g}"
