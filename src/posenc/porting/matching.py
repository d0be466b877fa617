"""identify: which variant a stored table is, found by recomputing every candidate exactly and comparing.

The candidates come from :mod:`.candidates` (the fitted 1-D variants and the preset registry's named ones)
and :mod:`.grid_candidates` (the N-D grids of :mod:`posenc.grids`); this module narrows them down on ever
more rows and ranks what is left into :class:`Match` es.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from .. import defaults, validation
from .candidates import Candidate, one_dimensional_candidates
from .fitting import digits
from .grid_candidates import grid_candidates
from .limits import table_limit
from .readers import host_values
from .records import Match
from .rope_fitting import PRECISIONS, precision_of
from .rope_matching import looks_like_rope, rope_matches

__all__ = ["Match", "identify"]

#: Rows of the first comparison; each later one takes this many times more, until the table is covered.
_FIRST_ROWS, _GROWTH = 64, 8


def identify(table: npt.ArrayLike, *, tolerance: float | None = None, candidates: int = 3) -> list[Match]:
    """The variants that best reproduce a stored table, best first (``candidates`` of them).

    A rotary-embedding buffer (a RoPE ``inv_freq`` vector, or a cos/sin cache: equal halves or equal column
    pairs, row 0 all one value or all zero) is handed to :func:`.rope_matching.rope_matches`, and the
    matches are :class:`.records.RopeMatch` es (the type and the ``posenc.rope.config`` keywords).

    ``table`` is ``(rows, d_model)``; leading axes of size 1 are dropped, and an unflattened grid (diffusers'
    3-D ``(T, H·W, D)``, positional-encodings' ``(X, Y[, Z], C)``) is read row-major, its axes kept as a hint.

    The 1-D search fits the frequencies from the table itself (so any base works) and tries every layout,
    odd-width rule and shift 0/1, the position of row 0 and zero padding rows. The named grids are MAE /
    diffusers 2-D (any H×W, cls / extra zero rows, base_size and interpolation_scale fitted), diffusers 3-D
    (interpolation scales fitted), timm 2-D (both orders) and positional-encodings 2-D/3-D: a grid's
    axis sizes are read from where each axis' block of columns first changes, and a position scale s from
    the angles of its block (lowest frequency first, refined by the higher ones: s = angle / (row · ω)).
    Every candidate is recomputed exactly and compared element by element: on the first 64 rows, then on
    8 times as many, ..., then on all of them. ``tolerance`` defaults to what the candidate's own float32
    code can be off by at the table's positions, plus the rounding of the type the values are stored in
    (:func:`.limits.table_limit`: from the largest angle |p·ω| the candidate reaches there, and never above
    2⁻⁴, so that no table far from every variant, all zeros or noise, of any length, matches). Candidates
    that do not match are ranked by their error, those within that limit of each other by the position of
    row 0 nearest 0: a table with no signal is no evidence of an offset.

    Names that build the same table are joined by ``" = "`` (``"mae-2d = diffusers-2d"``: the options are
    then diffusers'). A diffusers 2-D table fixes only base_size / interpolation_scale, so one table can be
    listed with two pairs (PixArt at 1024 px: base_size=32, interpolation_scale=1.0 and 64, 2.0).

    >>> from posenc import grids
    >>> best = identify(grids.diffusers_2d(64, (6, 10), base_size=7, interpolation_scale=1.5))[0]
    >>> best.name, best.options["grid_size"], best.options["base_size"], best.options["interpolation_scale"]
    ('diffusers-2d', (6, 10), 7, 1.5)
    """
    candidates = validation.integer("candidates", candidates, minimum=1)
    if tolerance is not None:
        tolerance = validation.real(
            "tolerance",
            tolerance,
            usual="leave it out for what float32 code can be off by at the table's positions",
        )
        if tolerance < 0:
            raise ValueError(
                f"tolerance must be >= 0 (the largest difference that still matches); got {tolerance}"
            )
    if looks_like_rope(table):  # an inv_freq vector or a cos/sin cache: the RoPE search answers
        return rope_matches(table, tolerance=tolerance, candidates=candidates)
    stored, shape = _as_rows(table)
    rows = stored.shape[0]
    unit = PRECISIONS[precision_of(stored)]  # a bfloat16 tensor read as float32 has bfloat16's values

    def limit(candidate: Candidate) -> float:
        """What ``candidate`` may be off by over the whole table (its own float32 error there)."""
        return tolerance if tolerance is not None else table_limit(candidate.reach, unit)

    every = itertools.chain(one_dimensional_candidates(stored, unit), grid_candidates(stored, shape))
    # equal variants: the last one, in the first's place
    pool = everything = list({_key(c): c for c in every}.values())
    # Compare on the first 64 rows, then on 8 times as many, ..., then in full. An error only grows with
    # the rows, so a candidate over its limit for the whole table never matches: each step keeps those
    # within it, and enough of the nearest others to fill ``candidates`` (the nearest, when nothing
    # matches; more after the first).
    size, widest, mismatches = min(rows, _FIRST_ROWS), max(12, 4 * candidates), set()
    while True:
        # a known mismatch is measured against a float32 copy until the last pass, whose errors are shown:
        # those are against the candidate's exact values (a float32 copy's is off by up to its rounding)
        errors = ((c.error(size, id(c) in mismatches and size < rows), c) for c in pool)
        scored = [(e, c) for e, c in errors if e is not None]
        within = sorted(((e, c) for e, c in scored if e <= limit(c)), key=lambda item: item[0])
        others = _nearest_first([(e, c) for e, c in scored if e > limit(c)], limit)
        if size == rows:
            break
        kept = others[: widest if size == _FIRST_ROWS else max(0, candidates - len(within[:widest]))]
        within = _thinned(within, unit)
        named = [item for item in within[widest:] if item[1].name is not None]  # ranked first when they match
        pool, mismatches = [c for _, c in within[:widest] + named + kept], {id(c) for _, c in kept}
        size = min(rows, size * _GROWTH)
    # a named variant that matches first (float32 code's table is its library's, whatever a fit absorbs of
    # its rounding); then the plainest of the fits within 4 times the closest one's error and one rounding
    # of the values (float32 code of base 500000 is 1.9 times farther from 500000 than from a fit that
    # absorbs some of its rounding; a plainer fit off by 1600 times more — base 82684 for an exact table
    # of base 82684.3257 — comes after them)
    # — unless a fit closer by a quarter is nearly as plain (within two digits' worth): base 14337, shift 0
    # (five digits) was named for Whisper's table of base 12345.6, shift 1 (six), which fits it 2.6 times
    # closer
    equal = 4 * min((e for e, _ in within), default=0.0) + unit
    fits = [Match(c.name, c.options, c.start, c.padding_idx, error, True) for error, c in within]
    plain = {id(m): _plainness(m) for m in fits}

    def outranked(m: Match) -> bool:
        return m.name is None and (
            m.max_error > equal
            or any(1.25 * o.max_error < m.max_error and plain[id(o)] < plain[id(m)] + 0.02 for o in fits)
        )

    matched = sorted(fits, key=lambda m: (m.name is None, outranked(m), plain[id(m)], m.max_error))
    nearest = [Match(c.name, c.options, c.start, c.padding_idx, error, False) for error, c in others]
    cast = None if within else _cast(everything, rows, limit)
    if cast is not None:  # the variant whose frequencies, rounded, make the table: first of the nearest
        nearest = [cast, *(m for m in nearest if _key(m) != _key(cast))]
    if not matched and not nearest:  # every candidate refused this table: no answer, not an empty one
        raise ValueError(
            f"no variant applies to a table of shape {stored.shape}: a fit needs d_model >= 4 (two "
            "sine/cosine pairs), and no named variant builds this width"
            + (" with a zero padding row" if np.any(~stored.any(axis=1)) else "")
        )
    return (matched + nearest)[:candidates]


def _cast(pool: list[Candidate], rows: int, limit: Callable[[Candidate], float]) -> Match | None:
    """The candidate that reproduces the table with its frequencies rounded to the 16-bit type a fit found
    them on (a buffer after ``.half()`` or ``.to(bfloat16)``, directly or from float32), within its limit,
    as a non-matching :class:`Match` whose ``cast`` names that type; None when there is none.

    Such a table matches no variant (its frequencies are off by up to a unit of the 16-bit type, its angles
    by that times p) and is about as far from a base 2% off as from its own: the error of the cast model
    tells them apart. Tried on the first 64 rows, named variants first, then the plainest (bases that round
    to the same frequencies are one model: the plainest is the answer), and confirmed on every row."""
    grids = list(dict.fromkeys(c.grid for c in pool if c.grid is not None))
    if not grids:
        return None
    first = min(rows, _FIRST_ROWS)
    tried = []
    for c in pool:
        if c.cast is None:
            continue
        for grid in grids:
            for route in (grid, f"float32>{grid}"):
                off = c.cast(first, route)
                if off is not None and off <= limit(c):
                    tried.append(((c.name is None, _plainness(c), off), c, route))
    for _, c, route in sorted(tried, key=lambda item: item[0]):
        off = c.cast(rows, route) if rows > first else None
        if rows == first or (off is not None and off <= limit(c)):
            return Match(c.name, c.options, c.start, c.padding_idx, c.error(rows, False), False, cast=route)
    return None


def _thinned(within: list[tuple[float, Candidate]], unit: float) -> list[tuple[float, Candidate]]:
    """``within`` (error, candidate), nearest first, with at most four fits of one variant that differ only
    in their base (a fit's base and the round numbers, integers and shorter decimals near it): the three
    nearest and the plainest of those within 4 times the nearest's error, so that comparisons on more
    rows are not spent on near-copies."""
    groups: dict[tuple, list[tuple[float, Candidate]]] = {}
    for item in within:
        c = item[1]
        rest = tuple(sorted((k, v) for k, v in c.options.items() if k != "base"))
        groups.setdefault((c.name, c.start, c.padding_idx, rest), []).append(item)
    kept = []
    for items in groups.values():
        equal = [item for item in items if item[0] <= 4 * items[0][0] + unit]
        plainest = min(equal, key=lambda item: (_plainness(item[1]), item[0]))
        kept += list({id(item[1]): item for item in [*items[:3], plainest]}.values())
    return sorted(kept, key=lambda item: item[0])


#: Errors of candidates that do not match, within this factor of the nearest one's, are equal: none holds
#: the rows, and a few percent is no evidence for a fit's odd numbers (frequencies rounded to float16 are as
#: far from base 10⁶ as from a fit of base 649350, shift 1).
_NEAR = 1.25


def _nearest_first(scored: list[tuple[float, Candidate]], limit: Callable[[Candidate], float]) -> list:
    """``scored`` (error, candidate) pairs that do not match, nearest first: by error, but errors within
    :data:`_NEAR` times the nearest of a run and the limit are equal, and among equals the position of row
    0 nearest 0 comes first, then a named variant, then the plainest options (a difference the limit calls
    noise is no evidence of an offset: an all-zeros table is as far from every start)."""
    ordered = sorted(scored, key=lambda item: item[0])
    result: list[tuple[float, Candidate]] = []
    first = 0
    while first < len(ordered):
        lead, candidate = ordered[first]
        last = first + 1
        while last < len(ordered) and ordered[last][0] <= lead * _NEAR + limit(candidate):
            last += 1
        run = ordered[first:last]
        result += sorted(run, key=lambda i: (abs(i[1].start), i[1].name is None, _plainness(i[1]), i[0]))
        first = last
    return result


def _as_rows(table: npt.ArrayLike) -> tuple[np.ndarray, tuple[int, ...]]:
    """``table`` as float64 rows ``(rows, d_model)``, and the grid axes it came with (its leading axes)."""
    given = host_values(table)
    if given.dtype.kind == "c":
        raise TypeError(
            f"table must hold real numbers; got {given.dtype} values (the imaginary parts would be lost)"
        )
    try:
        stored = given.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"table must hold real numbers; got {given.dtype} values") from None
    while stored.ndim > 2 and stored.shape[0] == 1:
        stored = stored[0]
    shape = stored.shape[:-1]  # a grid's own axes, when the table comes unflattened
    if stored.ndim > 2:
        stored = stored.reshape(-1, stored.shape[-1])
    if stored.ndim != 2 or stored.shape[0] < 2 or stored.shape[1] < 2:
        raise ValueError(f"table must have shape (rows >= 2, d_model >= 2); got shape {np.shape(table)}")
    if not np.isfinite(stored).all():
        raise ValueError("table holds NaN or inf values; it is not an encoding table")
    return stored, shape


def _key(candidate: Candidate) -> tuple:
    """What makes two candidates the same variant: name, options, position of row 0, padding row."""
    return candidate.name, tuple(sorted(candidate.options.items())), candidate.start, candidate.padding_idx


def _plainness(match: Match | Candidate) -> float:
    """Prefer round numbers between equal fits (base 10000, shift 1 over base 10000.92, shift 0; base
    12345.6, shift 0 over base 11899.528, shift 1): a hundredth per significant digit of the base after its
    first, plus how far each scale is from 1, plus two digits' worth for a shift that is no integer (base
    10001, shift 0 over base 9822.7, shift 0.5; base 10000, shift 0.5 over base 8639.9, shift 1)."""
    base = match.options.get("base", defaults.BASE)
    scales = (match.options.get(name, defaults.SCALE) for name in ("scale", "interpolation_scale"))
    fractional = 0.02 * (float(match.options.get("shift", 0.0)) % 1 != 0)
    return (
        0.01 * (digits(base) - 1 if base > 0 else 16) + fractional + sum(abs(scale - 1) for scale in scales)
    )
