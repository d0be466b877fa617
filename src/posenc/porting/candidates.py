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
from .fitting import base_candidates, digits, fit_frequencies, nice, shortest
from .rope_fitting import PRECISIONS, precision_of

__all__ = ["CHUNK", "Candidate", "one_dimensional_candidates"]

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
    (:func:`.limits.table_limit`).
    """

    name: str | None
    options: dict[str, Any]
    start: int
    padding_idx: int | None
    error: Callable[[int, bool], float | None]
    reach: float


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
                        yield _one_dimensional(stored, options, first, padding, named)
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

    def error(rows: int, rough: bool = False) -> float | None:
        worst, dtype = 0.0, "float32" if rough else "float64"
        for first in range(0, rows, CHUNK):
            count = min(CHUNK, rows - first)
            try:
                values = core.table(count, d_model, start=start + first, dtype=dtype, **options)
            except (ValueError, TypeError):
                return None
            if padding is not None and first <= padding < first + count:
                values[padding - first] = 0
            worst = max(worst, float(np.max(np.abs(values - stored[first : first + count]))))
        return worst

    name = _variant_name(options, named, d_model)
    where = None if padding is None else padding_idx
    return Candidate(name, options, start, where, error, _reach(options, d_model, start, len(stored)))


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
