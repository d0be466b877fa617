"""The audit as one HTML file, readable offline: the verdict, the findings with their evidence and fixes,
two figures drawn here as inline SVG (no matplotlib, no script, no external link) — the error of every
sampled position against its position (log-log, with posenc's rounding level and the 1e-3 / 1e-2 / 0.1
thresholds), and the distinct rows per band, the target's against posenc's — and the report's text.

Each figure's data lies inside its plot area (:data:`PLOT`: x from ``_L`` to ``_W - _R``, y from ``_T`` to
``_H - _B``); its caption is above that area, its tick labels left of and below it, so no text covers data.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .report import AuditReport

__all__ = ["PLOT", "collisions_svg", "error_svg", "findings_html", "render"]

_W, _H, _L, _R, _T, _B = 720, 340, 64, 16, 36, 40  # size and margins of a figure, in px
#: The plot area of a figure (x0, y0, x1, y1): every mark inside it, every text outside it.
PLOT = (_L, _T, _W - _R, _H - _B)


def _axis_x(lo: float, hi: float):
    return lambda v: _L + (v - lo) / max(hi - lo, 1e-12) * (_W - _L - _R)


def _axis_y(lo: float, hi: float):
    return lambda v: _H - _B - (v - lo) / max(hi - lo, 1e-12) * (_H - _T - _B)


def _frame(title: str, body: list[str]) -> str:
    return (
        f'<svg width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        f'role="img" font-family="sans-serif" font-size="11"><title>{html.escape(title)}</title>'
        f'<rect width="{_W}" height="{_H}" fill="white"/>' + "".join(body) + "</svg>"
    )


def error_svg(report: AuditReport) -> str:
    """Error against position: one dot per sampled position (log-log), NaN/inf rows at the top."""
    m = report.measurement
    x = np.log10(m.positions.astype(np.float64) + 1)
    finite = np.isfinite(m.row_errors)
    floor = 2.0 ** -{"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}.get(report.dtype, 24)
    y = np.log10(np.maximum(np.where(finite, m.row_errors, 10.0), floor / 4))
    x_hi = max(1.0, math.ceil(float(x.max(initial=1.0))))
    y_lo, y_hi = math.floor(math.log10(floor / 4)), 1
    fx, fy = _axis_x(0, x_hi), _axis_y(y_lo, y_hi)
    body = []
    for e in range(y_lo, y_hi + 1):
        body.append(f'<line x1="{_L}" x2="{_W - _R}" y1="{fy(e):.1f}" y2="{fy(e):.1f}" stroke="#eee"/>')
        body.append(_text(_L - 4, fy(e) + 4, f"1e{e}", "end"))
    for e in range(0, int(x_hi) + 1):
        body.append(_text(fx(e), _H - _B + 14, f"1e{e}", "middle"))
    for t in (1e-3, 1e-2, 0.1):
        yy = fy(math.log10(t))
        body.append(
            f'<line x1="{_L}" x2="{_W - _R}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#c33" '
            'stroke-dasharray="4 3"/>'
        )
    yy = fy(math.log10(floor))
    body.append(
        f'<line x1="{_L}" x2="{_W - _R}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#393" stroke-dasharray="2 2"/>'
    )
    step = max(1, len(x) // 4000)
    for xi, yi, ok in zip(x[::step], y[::step], finite[::step], strict=True):
        colour = "#2a5db0" if ok else "#c33"
        body.append(f'<circle cx="{fx(xi):.1f}" cy="{fy(yi):.1f}" r="1.6" fill="{colour}"/>')
    body.append(_text((_L + _W) / 2, _H - 6, "position + 1", "middle"))
    body.append(_caption(f"max |error| per row ({report.dtype}; green: one rounding, red: 1e-3, 1e-2, 0.1)"))
    return _frame("error against position", body)


def _caption(text: str) -> str:
    """A figure's caption, above its plot area."""
    return _text(_L, _T - 14, text)


def _text(x: float, y: float, text: str, anchor: str = "start") -> str:
    """An SVG text element at (x, y), anchored at its start, middle or end."""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{text}</text>'


def collisions_svg(report: AuditReport) -> str:
    """Distinct rows per band, as a fraction of the rows sampled: the target's and posenc's."""
    bands = [b for b in report.bands if not b.raised and b.sampled]
    body, n = [], max(1, len(bands))
    fy = _axis_y(0, 1)
    slot = (_W - _L - _R) / n
    for k, b in enumerate(bands):
        x0 = _L + k * slot
        for j, (count, colour) in enumerate(((b.distinct, "#2a5db0"), (b.exact_distinct, "#393"))):
            top = fy(count / b.sampled)
            body.append(
                f'<rect x="{x0 + 4 + j * (slot - 8) / 2:.1f}" y="{top:.1f}" width="{(slot - 8) / 2:.1f}" '
                f'height="{fy(0) - top:.1f}" fill="{colour}"/>'
            )
        body.append(_text(x0 + slot / 2, _H - _B + 14, f"≥{b.lo:.3g}", "middle"))
    for v in (0, 0.5, 1):
        body.append(_text(_L - 4, fy(v) + 4, f"{v:g}", "end"))
    body.append(_caption("distinct rows / sampled, per band (blue: target, green: posenc)"))
    return _frame("distinct rows per band", body)


def _inline(text: str) -> str:
    """``text`` escaped, its `code spans` (a fix's code, in backticks) as <code>."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick: the text as it is
        return html.escape(text)
    return "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))


def findings_html(report: AuditReport) -> str:
    """The findings as a list: each one's claim, evidence and fix (its code as code)."""
    if not report.findings:
        return "<p>No findings.</p>"
    items = "".join(
        f"<li><strong>{_inline(f.text)}</strong><br>evidence: {_inline(f.evidence)}"
        + (f'<br><span class="fix">fix: {_inline(f.fix)}</span>' if f.fix else "")
        + "</li>"
        for f in report.findings
    )
    return f"<ul>{items}</ul>"


#: The page's style: one column, readable type, code and the report set apart, PASS green and FAIL red.
STYLE = (
    "<style>body{font-family:system-ui,sans-serif;line-height:1.45;max-width:64rem;margin:2rem auto;"
    "padding:0 1rem;color:#1d1d1f}h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;"
    "border-bottom:1px solid #ddd}h3{font-size:1.05rem}code{background:#f1f1f1;padding:0 .2rem;"
    "border-radius:3px}pre{background:#f6f6f6;padding:1rem;overflow-x:auto;font-size:.85rem}"
    "li{margin-bottom:.6rem}.pass{color:#1a7f37}.fail{color:#cf222e}.fix{color:#444}"
    "section{margin-top:2.5rem}</style>"
)


def page(title: str, body: str) -> str:
    """A whole HTML page of ``body`` with :data:`STYLE`."""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"{STYLE}</head><body>{body}</body></html>\n"
    )


def verdict_html(passed: bool, word: str | None = None) -> str:
    """PASS (green) or FAIL (red); ``word``: another (NOT JUDGED), in the colour of a failure."""
    return f'<span class="{"pass" if passed else "fail"}">{word or ("PASS" if passed else "FAIL")}</span>'


def report_html(report: AuditReport, level: int = 2) -> str:
    """One report's sections (findings, error against position, collisions, the text), headed at
    ``level``."""
    h = f"h{level}"
    return (
        f"<{h}>Findings</{h}>{findings_html(report)}"
        f"<{h}>Error against position</{h}>{error_svg(report)}"
        f"<{h}>Collisions</{h}>{collisions_svg(report)}"
        f"<{h}>Report</{h}><pre>{html.escape(report.as_text())}</pre>"
    )


def render(report: AuditReport) -> str:
    """The whole page of one report: one h1 (the verdict), then its sections."""
    body = (
        f"<h1>posenc audit: {verdict_html(report.passed, report.verdict())}</h1>"
        f"<p>{html.escape(report.target)}</p>" + report_html(report)
    )
    return page(f"posenc audit: {report.target}", body)
