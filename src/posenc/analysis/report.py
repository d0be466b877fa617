"""The report of :func:`~posenc.analysis.check.check`: the options checked and each criterion measured, as a
JSON-ready dictionary (:meth:`Report.as_dict`) or as the text ``posenc check`` prints
(:meth:`Report.as_text`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from .. import decimals
from .criteria import Criterion
from .properties import recomputed_windows

#: Pairs PE(p), PE(p + k) sampled by the dot-product criteria (shift_invariant, generalises): 64 offsets
#: (1 .. 16 and 48 at random, fixed seed) × 64 positions each.
DOT_PAIRS = 4096


def sampling_notes(
    length: int, d_model: int, whole: int, *, block: int, kept: bool, pair: int | None = None
) -> tuple[str, ...]:
    """The report's notes for a check of ``length`` positions: what was measured on every row, and what
    on a sample (and how many); ``whole`` rows shared their key and were hashed whole; positions
    0 .. length - 1 were ``kept`` in memory, or not; ``consistent`` compared table(``pair``) with
    table(2 ``pair``) (``length`` when None)."""
    total = 2 * length
    held = f"positions 0..{length - 1} kept; " if kept else "none kept; "
    hashed = f"the whole row for the {whole:,} rows" if whole else "the whole row for any rows"
    exact = (
        f"every row measured: positions 0..{total - 1} were encoded once, in blocks of {block:,} rows ({held}"
        f"a criterion that reads other rows has them computed again, block by block); unique and "
        f"generalises compare all {total:,} rows by 128-bit hashes of their first columns, and of {hashed} "
        f"whose first columns match another's; every repeat found is verified bit for bit; consistent and "
        f"bounded read every value"
    )
    notes = [exact]
    if pair is not None and pair < length:
        notes[0] = exact.replace("; consistent and bounded read every value", "; bounded reads every value")
        notes.append(
            f"sampled: consistent compared table({pair:,}) with the first {pair:,} rows of "
            f"table({2 * pair:,}), not table({length:,}) with table({2 * length:,}): the longest pair whose "
            "longer table fits in its memory"
        )
    pairs = min(DOT_PAIRS, 64 * max(0, length - 1), length * (length - 1) // 2)
    notes.append(
        f"sampled: the dot products of shift_invariant and generalises, up to {pairs:,} distinct "
        f"pair{'' if pairs == 1 else 's'} in each range (offsets 1..16 and 48 random ones, up to 64 distinct "
        "positions each, fixed seed)"
    )
    windows = recomputed_windows(length, d_model)
    if windows is not None:
        rows = sum(hi - lo for lo, hi in windows)
        each = windows[0][1] - windows[0][0]
        notes.append(
            f"sampled: deterministic recomputed {len(windows)} windows of {each:,} rows "
            f"({rows:,} of {length:,} rows, the first, the last and the middle included; each as a table of "
            "its own and inside a longer one) and 64 rows by encode, not the whole table again and in two "
            "halves"
        )
    return tuple(notes)


@dataclass(frozen=True)
class Report:
    """The result of :func:`~posenc.analysis.check.check`: the options checked and one :class:`Criterion` per
    criterion, in the order of :data:`~posenc.analysis.criteria.CRITERIA`.

    >>> from posenc.analysis import check
    >>> report = check(256, 32)
    >>> report.passed, [criterion.name for criterion in report.criteria]
    (True, ['unique', 'consistent', 'generalises', 'bounded', 'deterministic', 'shift_invariant'])
    >>> report.as_dict()["options"]["layout"], len(report.notes)
    ('interleaved', 2)
    """

    options: dict[str, Any]
    criteria: tuple[Criterion, ...]
    #: How the criteria were measured where it matters: what was sampled, and how much (sentences).
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when every criterion passes."""
        return all(c.passed for c in self.criteria)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary: ``{"options", "passed", "criteria": [{name, title, passed, ...}]}``."""
        return {
            "options": dict(self.options),
            "passed": self.passed,
            "notes": list(self.notes),
            "criteria": [
                {
                    "name": c.name,
                    "title": c.title,
                    "passed": c.passed,
                    "figure": c.figure,
                    "detail": c.detail,
                    **c.data,
                }
                for c in self.criteria
            ],
        }

    def as_text(self, width: int = 100) -> str:
        """The report as text, lines wrapped at ``width``: a heading with the options, then for each
        criterion ``pass``/``FAIL``, its title, its figure and what was measured, then a verdict.

        >>> from posenc.analysis.check import check
        >>> print(check(16, 8, dtype="float64").as_text().splitlines()[-1])
        all 6 criteria pass
        """
        o = self.options
        how = "posenc, rounded once" if o["compute"] == "exact" else f"computed in {o['dtype']}"
        scale = f", scale {decimals.number(o['scale'])}" if "scale" in o else ""
        odd = f", odd {o['odd']}" if "odd" in o else ""
        lines = textwrap.wrap(
            f"posenc check: d_model {o['d_model']}, positions 0..{o['length'] - 1}, base "
            f"{decimals.number(o['base'])}, shift {decimals.number(o['shift'])}{scale}, layout {o['layout']}"
            f"{odd}, {o['dtype']} ({how})",
            width,
            subsequent_indent=" " * 14,
        )
        for c in self.criteria:
            figure = "-" if c.figure is None else f"{c.figure:.4g}"
            lines += ["", f"  {'pass' if c.passed else 'FAIL'}  {c.title}"]
            lines += textwrap.wrap(
                f"figure {figure}: {c.detail}", width, initial_indent=" " * 8, subsequent_indent=" " * 8
            )
        if self.notes:
            lines += ["", "  how it was measured:"]
            for note in self.notes:
                lines += textwrap.wrap(note, width, initial_indent="    - ", subsequent_indent=" " * 6)
        failed = [c.name for c in self.criteria if not c.passed]
        total = len(self.criteria)
        verdict = (
            f"all {total} criteria pass"
            if not failed
            else f"{len(failed)} of {total} fail: {', '.join(failed)}"
        )
        return "\n".join([*lines, "", verdict])
