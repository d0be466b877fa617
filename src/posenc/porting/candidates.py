"""The 1-D candidates identify compares a table with: the fitted variants and the registry's named ones.

A candidate is a variant (its name, core options, the position of row 0 and a zero padding row) with a
function that measures how far its first rows are from the stored ones. The named variants and their labels
come from the preset registry (:func:`posenc.presets.variants`); the fitted ones take their frequencies from
the table itself (:func:`.fitting.fit_frequencies`), so any base, scale and position offset is found, and are
named after every registry variant with the same options ("tensor2tensor = whisper = fairseq = ...").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from .. import core, defaults, layouts, presets, validation
from .fitting import base_candidates, digits, fit_frequencies, nice, rounded, shortest
from .rope_fitting import PRECISIONS, precision_of

__all__ = ["CHUNK", "Candidate", "one_dimensional_candidates", "rows_of_frequencies"]

#: Rows compared at a time: bounds the memory a comparison takes on long tables.
CHUNK = 4096

#: The shifts tried with fitted frequencies: the paper's exponent i / n (0) and tensor2tensor's i / (n - 1).
_SHIFTS = (0.0, 1.0, 0.5)
#: The usual positions of row 0: 0, and the first token of fairseq tables with padding_idx 0 or 1.
_USUAL_STARTS = (0, 1, 2)


class Candidate(NamedTuple):
    """One variant to compare with the stored table.

    ``error(rows, rough)`` is the largest difference between the candidate's first ``rows`` rows and the
    stored ones, or None when the candidate does not apply to this table; ``rough``: float32 will do (the
    candidate is a known mismatch, kept only to fill the list). ``reach``: the largest |angle| p·ω_i over
    the table's positions, which sets what float32 code of the variant can be off by
    (:func:`.limits.table_limit`). ``cast(rows, grid)``: the same difference with the candidate's
    frequencies rounded to ``grid`` first ("bfloat16", "float32>bfloat16": a buffer after ``.half()``),
    angles and sin/cos exact; None for a candidate that has no 1-D frequencies. ``grid``: the 16-bit type
    whose grid the frequencies its fit read lie on (:attr:`.fitting.Fit.grid`), else None.
    """

    name: str | None
    options: dict[str, Any]
    start: int
    padding_idx: int | None
    error: Callable[[int, bool], float | None]
    reach: float
    cast: Callable[[int, str], float | None] | None = None
    grid: str | None = None


def one_dimensional_candidates(stored: np.ndarray, unit: float | None = None) -> Iterator[Candidate]:
    """The fitted 1-D variants (every layout and odd-width rule, shift 0 and 1), then the named ones.

    A single zero row is read as fairseq's padding row; every candidate then zeroes it too. ``unit``: the
    rounding of the type the values are stored in (default: read from them).
    """
    d_model = stored.shape[1]
    zero_rows = np.flatnonzero(~stored.any(axis=1))
    padding = int(zero_rows[0]) if len(zero_rows) == 1 else None
    named = presets.variants(padding)
    odd_rules = ("zero", "literal", "drop") if d_model % 2 else ("zero",)
    fitted_starts = set(_USUAL_STARTS)
    unit = PRECISIONS[precision_of(stored)] if unit is None else unit
    for layout in layouts.LAYOUTS:
        for odd in odd_rules:
            fit = fit_frequencies(stored, layout, odd, zero_rows, unit)
            if fit is None:
                continue
            fitted_starts.add(fit.start)
            count, twice_half = validation.plan(d_model, odd)
            scale = nice(math.exp(fit.log_scale))
            tried = {}  # ln base = rate · steps
            for shift in _SHIFTS:
                steps = twice_half / 2 - shift
                if steps > 0 and count >= 2:
                    tried[shift] = _bases(math.exp(fit.rate * steps), fit.spread * steps, unit)
            plainest = {shift: min(map(digits, bases)) for shift, bases in tried.items()}
            if 0.5 in plainest and plainest[0.5] >= min(v for k, v in plainest.items() if k != 0.5):
                del tried[0.5]  # a half shift only where it makes a plainer base (diffusers' shift 0.5)
            for shift, bases in tried.items():
                for base in bases:
                    options = {"base": base, "shift": shift, "scale": scale, "layout": layout, "odd": odd}
                    for first in dict.fromkeys((fit.start, *_USUAL_STARTS)):  # the fit, the usual first rows
                        yield _one_dimensional(stored, options, first, padding, named)._replace(grid=fit.grid)
    for _, preset in named:  # the registry's variants themselves, for tables that are close
        for first in sorted(fitted_starts):
            yield _one_dimensional(stored, preset.options, first, padding, named)


def _bases(fitted: float, spread: float, unit: float) -> list[float]:
    """The bases to try for a fitted one, ``spread`` the fit's uncertainty in ln base: the round numbers
    within it, the fit as an integer, the shortest decimal within it (and within 6, 1, 0.1 and 0.01 times
    the fit's own uncertainty: identify ranks the plainest of equal fits first), the fit; and a round
    number within 10⁻⁴ of it (a table too short to tell). The uncertainty is at least what the values'
    rounding ``unit`` makes of ln base in code that computes the frequencies in their type (float32 code
    rounds −ln(base)/d once: every frequency of a base-10001 table is then that of base 10001.0026)."""
    widest = math.hypot(spread, unit * abs(math.log(fitted)))
    found = [*base_candidates(fitted, widest), shortest(fitted, 6 * widest)]
    found += [shortest(fitted, spread * k) for k in (6.0, 1.0, 0.1, 0.01)]  # the fit's σ may be generous
    return list(dict.fromkeys([*found, nice(fitted)]))


def _one_dimensional(
    stored: np.ndarray,
    options: dict[str, Any],
    start: int,
    padding: int | None,
    named: list[tuple[str, presets.Preset]],
) -> Candidate:
    """The 1-D table with ``options`` whose row 0 is position ``start`` (row ``padding`` zero: fairseq's
    padding row, at position ``start + padding``; a zero row at a negative position is none of fairseq's —
    a table that starts with a zero row and then position 0 is read by its rows after it)."""
    d_model = stored.shape[1]
    if padding is not None:
        if start + padding < 0:
            return Candidate(None, options, start, None, lambda rows, rough=False: None, 0.0)
        padding_idx = start + padding
    if d_model % 2 == 0:
        options = {**options, "odd": defaults.ODD}  # the odd-width rule means nothing for an even width

    def difference(rows: int, build: Callable[[int, int], np.ndarray]) -> float | None:
        """The largest difference between the first ``rows`` stored rows and ``build(position, count)``'s
        rows, a chunk at a time; None when ``build`` refuses the options."""
        worst = 0.0
        for first in range(0, rows, CHUNK):
            count = min(CHUNK, rows - first)
            try:
                values = build(start + first, count)
            except (ValueError, TypeError):
                return None
            if padding is not None and first <= padding < first + count:
                values[padding - first] = 0
            worst = max(worst, float(np.max(np.abs(values - stored[first : first + count]))))
        return worst

    def error(rows: int, rough: bool = False) -> float | None:
        dtype = "float32" if rough else "float64"
        return difference(
            rows, lambda at, count: core.table(count, d_model, start=at, dtype=dtype, **options)
        )

    def cast(rows: int, grid: str) -> float | None:
        return difference(
            rows, lambda at, count: rows_of_frequencies(options, np.arange(at, at + count), d_model, grid)
        )

    name = _variant_name(options, named, d_model)
    where = None if padding is None else padding_idx
    reach = _reach(options, d_model, start, len(stored))
    return Candidate(name, options, start, where, error, reach, cast)


def rows_of_frequencies(
    options: dict[str, Any], positions: np.ndarray, d_model: int, grid: str
) -> np.ndarray:
    """The 1-D variant ``options``' rows at ``positions`` ``(k,)`` → ``(k, d_model)`` float64, its
    frequencies ω_i rounded to ``grid`` first (:func:`.fitting.rounded`; "float64": as they are), then
    sin/cos(p·ω̃_i) in float64 — what code that keeps the frequencies in a coarser type computes, before its
    own roundings. A padding row is the caller's to zero.

    >>> from posenc import table
    >>> paper = {"base": 10000.0, "shift": 0.0, "scale": 1.0, "layout": "interleaved", "odd": "zero"}
    >>> rows = rows_of_frequencies(paper, np.arange(8), 16, "float64")
    >>> bool(np.abs(rows - table(8, 16, dtype="float64")).max() < 1e-15)
    True
    """
    omega = rounded(core.frequencies(d_model, **{k: v for k, v in options.items() if k != "layout"}), grid)
    sines, cosines = layouts.pair_columns(options["layout"], len(omega))
    rows = np.zeros((len(positions), max(d_model, 2 * len(omega))))
    angles = np.asarray(positions, dtype=np.float64)[:, None] * omega
    rows[:, sines], rows[:, cosines] = np.sin(angles), np.cos(angles)
    return rows[:, :d_model]


def _reach(options: dict[str, Any], d_model: int, start: int, rows: int) -> float:
    """The largest |p·ω_i| over positions start .. start + rows - 1 (0 for options that build nothing)."""
    try:
        omegas = core.frequencies(d_model, **{k: v for k, v in options.items() if k != "layout"})
    except (ValueError, TypeError):
        return 0.0
    far = max(abs(start), abs(start + rows - 1))
    return float(far * np.max(np.abs(omegas), initial=0.0))


def _variant_name(
    options: dict[str, Any], named: list[tuple[str, presets.Preset]], d_model: int
) -> str | None:
    """The labels of every named variant with these options, joined by ' = ' (an even width ignores the odd
    rule); None when there is none."""

    def relevant(o: dict[str, Any]) -> dict[str, Any]:
        return o if d_model % 2 else {k: v for k, v in o.items() if k != "odd"}

    labels = [label for label, preset in named if relevant(preset.options) == relevant(options)]
    return " = ".join(dict.fromkeys(labels)) or None
