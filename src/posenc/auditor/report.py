"""The audit's report: what was audited, against which variant and how it was found, the errors band by
band, the thresholds, the collisions, the findings and the verdict — as text (:meth:`AuditReport.as_text`,
what ``posenc audit`` prints), a JSON-ready dict (:meth:`AuditReport.as_dict`) or one self-contained HTML
file (:meth:`AuditReport.to_html`, its figures inline SVG).

The verdict holds the largest error to the tolerance: ``None`` means correctly rounded (every sampled value
equal to posenc's, i.e. 0 ulp; within 1 ulp for float64, which posenc itself is held to), a float an
absolute error, ``"N ulp"`` an error in ulps of the target's dtype. NaN/inf rows and raising calls fail.
"""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import PosencValueError
from .findings import Finding
from .measure import REFINE_ROWS, Measurement
from .variant import Variant

__all__ = ["AuditReport", "check_tolerance"]


def check_tolerance(tol: Any) -> tuple[str, float] | None:
    """``tol`` as ``("abs", x)`` or ``("ulp", n)``; None for correctly rounded. Bad values: ValueError."""
    if tol is None:
        return None
    if isinstance(tol, str):
        text = tol.strip().lower().replace(" ", "")
        if text in ("", "exact", "correctlyrounded", "cr"):
            return None
        number = text.removesuffix("ulps").removesuffix("ulp")
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return ("ulp", value) if number != text else ("abs", value)
    elif isinstance(tol, (int, float)) and not isinstance(tol, bool) and math.isfinite(tol) and tol >= 0:
        return ("abs", float(tol))
    raise PosencValueError(
        f"tol={tol!r} is not a tolerance: give an absolute error >= 0 (1e-6), an error in ulps of the "
        "target's dtype (2ulp) or None for correctly rounded",
        parameter="tol",
    )


@dataclasses.dataclass
class AuditReport:
    """The result of :func:`posenc.audit`.

    ``target``/``kind``/``note``: what was audited and how it was read; ``dtype``: the type its values
    were judged in; ``width``: its columns; ``span``: the positions asked for (a, b); ``samples``: the
    positions measured per band at most; ``variant``: the exact encoding it was measured against
    (:class:`~posenc.auditor.variant.Variant`); ``measurement``: the bands and per-position errors;
    ``findings``; ``tolerance``: None (correctly rounded), ("abs", x) or ("ulp", n).

    >>> import numpy as np
    >>> import posenc
    >>> stored = posenc.table(1024, 32).astype(np.float16).astype(np.float32)  # float16 values, as float32
    >>> report = posenc.audit(stored, samples=256)
    >>> report.passed, report.kind, report.dtype, report.width, report.span, report.tolerance_text()
    (False, 'table', 'float32', 32, (0, 1024), 'correctly rounded')
    >>> f"{report.max_abs:.2g}", report.variant.name.split(" = ")[0], report.findings[0].kind
    ('0.00024', 'paper', 'storage')
    """

    target: str
    kind: str
    note: str
    dtype: str
    width: int
    span: tuple[int, int]
    samples: int
    variant: Variant
    measurement: Measurement
    findings: list[Finding]
    tolerance: tuple[str, float] | None = None

    @property
    def bands(self) -> list:
        return self.measurement.bands

    @property
    def max_abs(self) -> float:
        """The largest absolute error over all sampled positions (inf with NaN rows or a raising call)."""
        return self.max_error()

    @property
    def max_ulp(self) -> float:
        """The largest error in ulps of the dtype (inf with NaN rows or a raising call)."""
        if any(b.raised or b.nan_rows for b in self.bands):
            return math.inf
        return max((b.max_ulp for b in self.bands), default=0.0)

    @property
    def finite_max_abs(self) -> float:
        """The largest absolute error over the sampled rows that are finite (NaN/inf rows and raising calls
        left out): what a single NaN row must not hide."""
        m = self.measurement
        finite = np.isfinite(m.row_errors)
        return float(m.row_errors[finite].max(initial=0.0))

    @property
    def finite_max_ulp(self) -> float:
        """The largest error in ulps over the finite sampled rows (those before a call raised included)."""
        return max((b.max_ulp for b in self.bands), default=0.0)

    @property
    def nan_rows(self) -> int:
        """How many sampled rows hold NaN or inf."""
        return sum(b.nan_rows for b in self.bands)

    @property
    def raising_bands(self) -> int:
        """How many bands of positions the target raised on."""
        return sum(1 for b in self.bands if b.raised)

    def max_error(self, upto: int | None = None) -> float:
        """The largest absolute error at the sampled positions below ``upto`` (all: None); inf where a row
        is NaN/inf or the call raised there."""
        m = self.measurement
        inside = m.row_errors if upto is None else m.row_errors[m.positions < upto]
        if any(b.raised for b in self.bands if upto is None or b.lo < upto):
            return math.inf
        return float(inside.max(initial=0.0))

    @property
    def passed(self) -> bool:
        """Whether the largest error is within the tolerance (module docstring)."""
        kind, limit = self.tolerance or ("ulp", 1.0 if self.dtype == "float64" else 0.0)
        return (self.max_ulp if kind == "ulp" else self.max_abs) <= limit

    @property
    def judged(self) -> bool:
        """False where a failing report rests on a finding that judges nothing: no variant identified (a
        learned table, a formula of its own, a scale that aliases), or last bits a base read from the rows
        cannot settle (kind "unpinned"): its errors are measured against the nearest reading, not known to
        be the target's. A passing report is judged."""
        return self.passed or not any(
            f.kind == "unpinned" or f.data.get("identified") is False for f in self.findings
        )

    def verdict(self) -> str:
        """PASS, FAIL, or NOT JUDGED (:attr:`judged`)."""
        return "PASS" if self.passed else "FAIL" if self.judged else "NOT JUDGED"

    def tolerance_text(self) -> str:
        if self.tolerance is None:
            return "correctly rounded" + (" (1 ulp in float64)" if self.dtype == "float64" else "")
        kind, limit = self.tolerance
        return f"{limit:g} ulp" if kind == "ulp" else f"absolute error {limit:g}"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of everything in the report."""
        v, m = self.variant, self.measurement
        return {
            "target": self.target,
            "verdict": self.verdict(),
            "kind": self.kind,
            "note": self.note,
            "dtype": self.dtype,
            "width": self.width,
            "positions": list(self.span),
            "samples_per_band": self.samples,
            "sampled": len(m.positions),
            "variant": {
                "name": v.name,
                "options": {k: v.options[k] for k in v.options},
                "padding_idx": v.padding_idx,
                "how": v.how,
                "matches": v.matches,
                "layout": v.layout if v.params is not None else v.options.get("layout"),
            },
            "bands": [b.as_dict() for b in self.bands],
            "first_over": {f"{t:g}": p for t, p in m.first_over.items()},
            "first_over_refined": {f"{t:g}": m.first_over_refined.get(t, False) for t in m.first_over},
            "first_over_from": {f"{t:g}": m.first_over_from.get(t) for t in m.first_over},
            "first_repeat": m.first_repeat,
            "exact_first_repeat": m.exact_repeat,
            "max_abs": _plain(self.max_abs),
            "max_ulp": _plain(self.max_ulp),
            "finite_max_abs": self.finite_max_abs,
            "finite_max_ulp": self.finite_max_ulp,
            "nan_rows": self.nan_rows,
            "raising_bands": self.raising_bands,
            "findings": [
                {"kind": f.kind, "text": f.text, "evidence": f.evidence, "fix": f.fix} for f in self.findings
            ],
            "tolerance": self.tolerance_text(),
            "passed": self.passed,
        }

    def as_text(self, width: int = 100) -> str:
        """The report as text (what ``posenc audit`` prints), lines wrapped at ``width``."""
        v, m = self.variant, self.measurement
        options = ", ".join(f"{k}={o!r}" for k, o in v.options.items())
        padding = f", padding_idx={v.padding_idx}" if v.padding_idx is not None else ""
        if v.params is not None:  # a rotary's scaling fields, and what its columns hold
            options += "".join(f", {k}={getattr(v.params, k)!r}" for k in v.params.kind.fields)
            held = {"cos": "its cos cache", "sin": "its sin cache"}.get(v.parts, "cos and sin")
            pairs = " in interleaved pairs" if v.layout == "interleaved" else ""
            padding += f"; {held}{pairs}" if pairs or v.parts != "cos+sin" else ""

        def wrapped(text: str, indent: int = 2) -> list[str]:
            return textwrap.wrap(
                text, width, initial_indent=" " * indent, subsequent_indent=" " * (indent + 4)
            )

        lines = [f"posenc audit: {self.target}"]
        lines += wrapped(f"read as: {self.kind}; {self.note}" if self.note else f"read as: {self.kind}")
        whole = len(m.positions) == self.span[1] - self.span[0]
        lines += wrapped(
            f"judged in {self.dtype} against posenc's correctly rounded {self.dtype} values, {self.width} "
            f"columns; positions {self.span[0]:,}..{self.span[1] - 1:,}, "
            + (
                "every one measured"
                if whole
                else f"{len(m.positions):,} sampled (every position of a band of at most {self.samples:,}, "
                f"else {self.samples:,} of it)"
            )
        )
        lines += wrapped(f"variant: {v.name or 'generic'} ({options}{padding}) — {v.how}")
        lines += [
            "",
            "  positions                 sampled    max abs err    max ulp   distinct (exact)   NaN rows",
        ]
        cliff = next((f.data.get("position") for f in self.findings if f.kind == "cliff"), None)
        for b in self.bands:
            where = f"{b.lo:>13,} – {b.hi - 1:<13,}"
            if b.raised and not (b.raises_from is not None and b.raises_from > b.lo):
                lines += textwrap.wrap(
                    f"  {where}{b.sampled:>8,}    raises {b.raised}", width, subsequent_indent=" " * 31
                )
                continue
            if b.raised:  # its rows before the call raised, measured; then where it raises
                lines.append(
                    f"  {where}{b.sampled:>8,}    {b.max_abs:11.3g}  {b.max_ulp:9.3g}   "
                    f"{b.distinct:>7,} ({b.exact_distinct:,})   {b.nan_rows:>7,}"
                )
                # the first position that raises: the cliff's (bisected) where it lies in this band, else the
                # first sampled one that raised
                first = cliff if isinstance(cliff, int) and b.lo <= cliff <= b.raises_from else None
                at = (
                    f"raises from {first:,}"
                    if first is not None
                    else f"raises at {b.raises_from:,} (sampled)"
                )
                lines += textwrap.wrap(
                    f"{at}: {b.raised}", width, initial_indent=" " * 29, subsequent_indent=" " * 31
                )
                continue
            if b.sampled and b.nan_rows == b.sampled:  # no finite row: no error to show, not an error of 0
                lines.append(f"  {where}{b.sampled:>8,}    every sampled row NaN/inf   {b.nan_rows:>26,}")
                continue
            lines.append(
                f"  {where}{b.sampled:>8,}    {b.max_abs:11.3g}  {b.max_ulp:9.3g}   "
                f"{b.distinct:>7,} ({b.exact_distinct:,})   {b.nan_rows:>7,}"
            )

        def first(threshold: float, position: int | None) -> str:
            if position is None:
                return "-"
            if not m.first_over_refined.get(threshold):
                return f"{position:,} (sampled)"
            start = m.first_over_from.get(threshold)
            return f"{position:,}" + ("" if start is None else f" (checked from {start:,})")

        over = "; ".join(f"> {t:g}: {first(t, p)}" for t, p in m.first_over.items())
        found = [t for t, p in m.first_over.items() if p is not None]
        how = []
        if any(m.first_over_refined.get(t) and t not in m.first_over_from for t in found):
            how.append(f"a position alone: every one from {int(m.positions[0]):,} up to it checked")
        if m.first_over_from:
            how.append(
                "checked from a: every one from a, the last sampled one under the threshold, up to it; an "
                "unsampled one before a may pass it too (the error is not monotonic)"
            )
        if not all(m.first_over_refined.get(t, True) for t in found):
            how.append(
                f"(sampled): the first sampled one, its gap over {REFINE_ROWS:,} positions left unchecked"
            )
        said = f" ({'; '.join(how)})" if how else ""
        lines += ["", *wrapped(f"first position with error {over}{said}")]
        repeat = m.first_repeat
        lines += wrapped(
            "first repeated row: "
            + (
                "none among the sampled positions"
                if repeat is None
                else f"position {repeat[0]:,} = {repeat[1]:,}"
            )
            + (
                ""
                if m.exact_repeat is None
                else f" (posenc's exact {self.dtype}: {m.exact_repeat[0]:,} = {m.exact_repeat[1]:,})"
            )
        )
        lines += ["", "  findings:" if self.findings else "  findings: none"]
        for f in self.findings:
            lines += wrapped(f"- {f.text}", 4) + wrapped(f"evidence: {f.evidence}", 6)
            lines += wrapped(f"fix: {f.fix}", 6) if f.fix else []
        lines += ["", *wrapped(f"{self.verdict()}: {self.summary()}; tolerance: {self.tolerance_text()}", 0)]
        return "\n".join(lines)

    def summary(self) -> str:
        """The largest error in words: ``max error 5.96e-08 (1 ulp of float32)``; where rows are NaN or a call
        raises (no error there to measure, not an infinite one), those counted and the finite rows' largest.
        """
        if not math.isinf(self.max_abs):
            return f"max error {self.max_abs:.3g} ({self.max_ulp:.3g} ulp of {self.dtype})"
        broken = [f"{self.nan_rows:,} sampled rows NaN/inf"] if self.nan_rows else []
        broken += [f"{self.raising_bands} bands raise"] if self.raising_bands else []
        return (
            f"{'; '.join(broken)}; max error over the finite rows {self.finite_max_abs:.3g} "
            f"({self.finite_max_ulp:.3g} ulp of {self.dtype})"
        )

    def to_html(self, path: str | Path) -> Path:
        """Write the report as one self-contained HTML file (inline SVG figures, no external links).

        Rendered first, then written atomically (:func:`posenc.atomic.atomic_output`): a failure leaves the
        old file as it was and no temporary file; an OSError names ``path``."""
        from ..atomic import atomic_output
        from .html import render

        path = Path(path)
        page = render(self)
        with atomic_output(path, binary=False) as stream:
            stream.write(page)
        return path


def _plain(value: float) -> float | None:
    return None if not math.isfinite(value) else value
