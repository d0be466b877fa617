"""The report of :func:`~posenc.see.check.check`: the options checked and each criterion measured, as a
JSON-ready dictionary (:meth:`Report.as_dict`) or as the text ``posenc check`` prints
(:meth:`Report.as_text`).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from .criteria import Criterion


@dataclass(frozen=True)
class Report:
    """The result of :func:`~posenc.see.check.check`: the options checked and one :class:`Criterion` per
    criterion, in the order of :data:`~posenc.see.criteria.CRITERIA`."""

    options: dict[str, Any]
    criteria: tuple[Criterion, ...]

    @property
    def passed(self) -> bool:
        """True when every criterion passes."""
        return all(c.passed for c in self.criteria)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary: ``{"options", "passed", "criteria": [{name, title, passed, ...}]}``."""
        return {
            "options": dict(self.options),
            "passed": self.passed,
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

        >>> from posenc.see.check import check
        >>> print(check(16, 8, dtype="float64").as_text().splitlines()[-1])
        all 6 criteria pass
        """
        o = self.options
        how = "posenc, rounded once" if o["compute"] == "exact" else f"computed in {o['dtype']}"
        scale = f", scale {o['scale']:g}" if "scale" in o else ""
        odd = f", odd {o['odd']}" if "odd" in o else ""
        lines = textwrap.wrap(
            f"posenc check: d_model {o['d_model']}, positions 0..{o['length'] - 1}, base {o['base']:g}, "
            f"shift {o['shift']:g}{scale}, layout {o['layout']}{odd}, {o['dtype']} ({how})",
            width,
            subsequent_indent=" " * 14,
        )
        for c in self.criteria:
            figure = "-" if c.figure is None else f"{c.figure:.4g}"
            lines += ["", f"  {'pass' if c.passed else 'FAIL'}  {c.title}"]
            lines += textwrap.wrap(
                f"figure {figure}: {c.detail}", width, initial_indent=" " * 8, subsequent_indent=" " * 8
            )
        failed = [c.name for c in self.criteria if not c.passed]
        total = len(self.criteria)
        verdict = (
            f"all {total} criteria pass"
            if not failed
            else f"{len(failed)} of {total} fail: {', '.join(failed)}"
        )
        return "\n".join([*lines, "", verdict])
