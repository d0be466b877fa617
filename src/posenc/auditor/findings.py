"""What went wrong, in plain words: each finding is a small function of the measurement (and, for a
hypothesis it tests, of a few more samples of the target) that returns a :class:`Finding` or None.

* :func:`storage`: every value on a coarser grid than the dtype → "table stored in bfloat16 then used as
  float32";
* :func:`frequencies_cast`: the target equals sin/cos(p · ω̃_i), ω̃_i = ω_i rounded to bfloat16 / float16 /
  float32, far better than it equals the exact values → "frequencies cast to bfloat16";
* :func:`growth`: the band maxima grow ∝ position (slope ≈ 1 on log-log) → "angles formed in float32",
  the precision read off error / (ω_0 · p) ≈ 2^-p;
* :func:`permuted`, :func:`wrong_variant`, :func:`offset`: what identification found (columns permuted, a
  declared variant that is not the one the rows match, row 0 matching position ±1);
* :func:`cliff`: from some position on, rows are zero, NaN, one repeated row, or the call raises; the
  position is found by bisection;
* :func:`non_finite`, :func:`collisions`: NaN/inf rows, and rows that repeat where posenc's do not.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .. import layouts
from ..porting.rope_fitting import precision_of
from .measure import Measurement
from .targets import Target
from .variant import Variant

__all__ = ["Finding", "find_all"]

_BITS = {"bfloat16": 8, "float16": 11, "float32": 24, "float64": 53}
#: Rows of the target re-read to test a hypothesis about how it was computed.
_PROBES = 1024


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding: ``kind`` (a short key), ``text`` (the claim), ``evidence`` (why), ``data`` (numbers),
    ``fix`` (the change that removes the cause: code to write, or the posenc call that replaces it).

    >>> import numpy as np
    >>> import posenc
    >>> stored = posenc.table(1024, 32).astype(np.float16).astype(np.float32)  # float16 values, as float32
    >>> finding = posenc.audit(stored, samples=256).findings[0]
    >>> finding.kind, finding.text, finding.data
    ('storage', 'table stored in float16 then used as float32', {'grid': 'float16'})
    >>> finding.fix.startswith("keep the values in float32")
    True
    """

    kind: str
    text: str
    evidence: str
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    fix: str = ""


#: What replaces hand-written sinusoids, in every fix: exact at every position, in any dtype.
_POSENC = (
    "or use posenc, exact in any dtype at every position < 2**31: `posenc.torch.SinusoidalPositionalEncoding"
    "(d_model{options})` (a table: `posenc.table(length, d_model{options}, dtype=...)`)"
)


def _posenc_line(variant: Variant) -> str:
    """The posenc call for the variant's options (those that differ from posenc's defaults)."""
    if variant.params is not None:
        return (
            "or use posenc's exact rotary embedding: `posenc.torch.RotaryEmbedding(config)` (a drop-in for "
            "Hugging Face's), or `posenc.rope.cos_sin(positions, params)`"
        )
    from ..defaults import OPTIONS

    shown = "".join(f", {k}={v!r}" for k, v in variant.options.items() if OPTIONS.get(k) != v)
    return _POSENC.format(options=shown)


def find_all(target: Target, variant: Variant, m: Measurement, dtype: str) -> list[Finding]:
    """Every finding that applies, the layout and variant ones first."""
    found = [f(variant) for f in (wrong_variant, permuted, offset)]
    edge = cliff(target, variant, m, dtype)
    found += [edge, storage(m, dtype)]
    cast = frequencies_cast(target, variant, m, dtype)
    found += [cast, None if cast else growth(variant, m, dtype)]
    found += [non_finite(m, edge), collisions(m, dtype, edge)]
    return [f for f in found if f is not None]


def wrong_variant(variant: Variant) -> Finding | None:
    """A declared variant that the rows do not match, while another one does."""
    other = variant.found_instead
    if not variant.declared or other is None:
        return None
    names = ("shift", "base", "scale", "layout", "odd")[: 5 if other["width"] % 2 else 4]
    differ = [k for k in names if other["options"].get(k) != variant.options.get(k)] or ["variant"]
    said = ", ".join(f"{k} {variant.options.get(k)!r}" for k in differ if k != "variant")
    got = ", ".join(f"{k} {other['options'].get(k)!r}" for k in differ if k != "variant")
    return Finding(
        "variant",
        f"wrong {differ[0]}: declared {said or variant.name} ({variant.name}), the target's rows are "
        f"{got} ({other['name'] or 'generic'})",
        f"posenc.identify matches the first rows with {other['name'] or 'generic'} {other['options']}; the "
        f"declared variant is off by {variant.prefix_error:.3g} there",
        {"declared": variant.options, "found": other["options"]},
        fix=f"declare the variant the rows hold ({got or other['name']}), or compute the declared one: "
        + _posenc_line(variant),
    )


def permuted(variant: Variant) -> Finding | None:
    """Columns in another order than the identified variant's."""
    order = variant.permutation
    if order is None:
        return None
    moved = np.flatnonzero(order != np.arange(len(order)))
    shown = ", ".join(f"{j}←{order[j]}" for j in moved[:6]) + (", …" if len(moved) > 6 else "")
    return Finding(
        "layout",
        f"layout differs from the identified variant ({variant.name}, layout "
        f"{variant.options.get('layout')}): "
        "columns permuted",
        f"{len(moved)} of {len(order)} columns hold another column of the variant (target←variant: {shown}); "
        "in the variant's order the first rows match",
        {"permutation": order.tolist()},
        fix=f"put column order[j] of the variant in column j (order: {order.tolist()[:8]}"
        f"{', …' if len(order) > 8 else ''}), i.e. write the layout the model was trained with; "
        + _posenc_line(variant),
    )


def offset(variant: Variant) -> Finding | None:
    """Row 0 matching another position than 0: the positions are shifted."""
    if variant.start == 0:
        return None
    by = abs(variant.start)
    return Finding(
        "offset",
        f"off by {'one' if by == 1 else by} position{'s' if by > 1 else ''}: position p holds the exact "
        f"encoding of p {'+' if variant.start > 0 else '−'} {by}",
        f"the first rows match {variant.name or 'the variant'} best with row 0 at position {variant.start}; "
        f"at position p itself they are off by {variant.prefix_error:.3g}"
        if not variant.declared
        else f"the declared variant matches the first rows with row 0 at position {variant.start}",
        {"start": variant.start},
        fix=f"index the rows by the position itself: the row of position p is row p of the table (counted "
        f"from 0), not p {'+' if variant.start > 0 else '−'} {by}; with posenc pass the true positions or "
        "offset (`module(x, offset=past_length)`)",
    )


def storage(m: Measurement, dtype: str) -> Finding | None:
    """Every sampled value on a coarser grid than ``dtype``: stored in that type, then converted."""
    values = m.values[np.isfinite(m.values)]
    values = values[(values != 0) & (np.abs(values) != 1)]
    if len(values) < 64 or dtype not in _BITS:
        return None
    grid = precision_of(values)
    if _BITS.get(grid, 99) >= _BITS[dtype]:
        return None
    return Finding(
        "storage",
        f"table stored in {grid} then used as {dtype}",
        f"all {len(values):,} sampled values (0 and ±1 aside) lie on the {grid} grid: the low "
        f"{_BITS[dtype] - _BITS[grid]} bits of each {dtype} significand are zero; {grid} rounding alone is "
        f"up to {2.0 ** -_BITS[grid]:.2g}",
        {"grid": grid},
        fix=f"keep the values in {dtype} from the high-precision result (do not store the table, cache or "
        f"buffer in {grid}, and keep it out of `model.to({grid})`: register it with persistent=False and "
        f"cast after); {_POSENC.format(options='')}",
    )


def _model(target: Target, variant: Variant, positions: np.ndarray, grid: str, d_model: int) -> np.ndarray:
    """sin/cos(p · ω̃_i) in float64, ω̃_i the variant's frequencies rounded to ``grid``, in its columns."""
    if variant.params is not None:
        from .. import rope

        theta = _rounded(rope.inv_freq(variant.params), grid)
        scaling = rope.attention_scaling(variant.params)
        angles = positions[:, None].astype(np.float64) * theta
        cos, sin = scaling * np.cos(angles), scaling * np.sin(angles)
        if variant.layout == "half":
            cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
        else:
            cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        return np.concatenate([cos, sin] if variant.parts == "cos+sin" else [cos], -1)
    from .. import core

    o = variant.options
    omega = _rounded(
        core.frequencies(d_model, base=o["base"], shift=o["shift"], scale=o["scale"], odd=o["odd"]), grid
    )
    s, c = layouts.pair_columns(o["layout"], len(omega))
    rows = np.zeros((len(positions), max(d_model, 2 * len(omega))))
    angles = positions[:, None].astype(np.float64) * omega
    rows[:, s], rows[:, c] = np.sin(angles), np.cos(angles)
    if variant.padding_idx is not None:
        rows[positions == variant.padding_idx] = 0
    return rows[:, :d_model]


def _rounded(values: np.ndarray, grid: str) -> np.ndarray:
    if grid == "bfloat16":
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16).astype(np.float64)
    return values.astype(grid).astype(np.float64)


def frequencies_cast(target: Target, variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """The target explained by frequencies rounded to a coarser type, angles and sin/cos exact."""
    if variant.permutation is not None or variant.start or not len(m.positions):
        return None
    finite = np.isfinite(m.row_errors)
    pick = np.flatnonzero(finite)[:: max(1, int(finite.sum()) // _PROBES)]
    positions, values = m.positions[pick], m.values[pick].astype(np.float64)
    exact = variant.exact(positions, dtype, values.shape[1])
    off = float(np.abs(values - exact).max(initial=0.0))
    if off < 64 * 2.0 ** -_BITS.get(dtype, 53):
        return None
    for grid in ("bfloat16", "float16", "float32"):
        if _BITS[grid] >= _BITS.get(dtype, 53) + (grid == "float32"):
            continue
        try:
            model = _rounded(_model(target, variant, positions, grid, values.shape[1]), dtype)
        except (ImportError, ValueError, TypeError, KeyError):
            continue
        residual = float(np.abs(values - model).max(initial=0.0))
        if residual <= 0.25 * off:
            return Finding(
                "frequencies",
                f"frequencies cast to {grid}",
                f"at {len(positions):,} sampled positions the target is within {residual:.3g} of "
                "sin/cos(p·ω̃_i) "
                f"with ω̃_i = ω_i rounded to {grid}, and {off:.3g} from the exact values",
                {"grid": grid, "residual": residual, "error": off},
                fix=f"compute the frequencies in float64 and do not cast them to {grid} (e.g. "
                "`div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(base) / d))`"
                ", an inv_freq buffer kept in float32 or wider); " + _posenc_line(variant),
            )
    return None


def growth(variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """Band maxima ∝ position: the angle p · ω was rounded to a dtype of precision ≈ error / (ω_0 · p)."""
    floor = 4 * 2.0 ** -_BITS.get(dtype, 53)
    points = _growth_points(m, floor)
    if len(points) < 3:
        return None
    x, y = np.log([p for p, _ in points]), np.log([e for _, e in points])
    slope = float(np.polyfit(x, y, 1)[0])
    if not 0.7 <= slope <= 1.3:
        return None
    rate = float(np.median([e / p for p, e in points]))
    omega0 = 1.0
    if variant.params is not None:
        from .. import rope

        omega0 = float(rope.inv_freq(variant.params)[0] * rope.attention_scaling(variant.params))
    else:
        omega0 = float(variant.options.get("scale", 1.0))
    bits = -math.log2(rate / omega0)
    grid = min(_BITS, key=lambda name: abs(_BITS[name] - bits))
    return Finding(
        "angles",
        f"angles formed in {grid}: error grows ∝ position (slope {slope:.2f})",
        f"the largest error of {len(points)} octaves of positions grows as position^{slope:.2f}; error ≈ "
        f"{rate:.2g}·p ≈ "
        f"2^-{bits:.1f}·ω_0·p, the rounding of the angle p·ω_0 to {grid} (2^-{_BITS[grid]})",
        {"slope": slope, "rate": rate, "bits": bits, "grid": grid},
        fix=f"form the angle in float64, not {grid}: `position.double() * div_term.double()`, take sin/cos "
        "there and round once to the output dtype (for TF32 matmuls: "
        "`torch.backends.cuda.matmul.allow_tf32 = False` around the angle); " + _posenc_line(variant),
    )


def _growth_points(m: Measurement, floor: float) -> list[tuple[int, float]]:
    """(position, largest error) per octave of the sampled positions (finite rows above ``floor`` and below
    0.3): more points than bands, and those before a length cliff count as well as any."""
    ok = np.isfinite(m.row_errors) & (m.positions > 0) & (m.row_errors > floor) & (m.row_errors < 0.3)
    positions, errors = m.positions[ok], m.row_errors[ok]
    points = []
    for octave in np.unique(np.floor(np.log2(positions)).astype(int)) if len(positions) else ():
        inside = np.flatnonzero(np.floor(np.log2(positions)).astype(int) == octave)
        worst = inside[int(np.argmax(errors[inside]))]
        points.append((int(positions[worst]), float(errors[worst])))
    return points


def _dead(rows: np.ndarray, last: np.ndarray | None) -> np.ndarray:
    """Rows that are NaN/inf, all zero, or (``last`` given) equal to ``last``."""
    dead = ~np.isfinite(rows).all(axis=1) | ~rows.any(axis=1)
    if last is not None:
        dead |= (rows == last).all(axis=1)
    return dead


def cliff(target: Target, variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """A position from which every row is zero, NaN/inf, one repeated row, or the call raises."""
    raised = next((b for b in m.bands if b.raised), None)
    values, positions = m.values, m.positions
    last = values[-1] if len(values) else None
    repeated = (
        last is not None
        and len(values) > 3
        and bool(np.isfinite(last).all() and last.any())
        and bool((values[-3:] == last).all())
    )
    dead = _dead(values, last if repeated else None)
    alive = np.flatnonzero(~dead)
    if not len(alive) or (raised is None and alive[-1] == len(dead) - 1):
        return None
    if raised is not None and positions[alive[-1]] > raised.lo:
        return None  # a band raises, yet rows beyond it are fine: not a cliff
    lo = int(positions[alive[-1]])
    hi = raised.hi - 1 if alive[-1] == len(dead) - 1 else int(positions[alive[-1] + 1])

    def is_dead(p: int) -> bool:
        try:
            row = target.sample(np.array([p], np.int64))
        except Exception:
            return True
        return bool(_dead(row, last if repeated else None)[0])

    if not is_dead(hi):
        return None
    while hi - lo > 1:  # lo alive, hi dead
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if is_dead(mid) else (mid, hi)
    try:
        row = target.sample(np.array([hi], np.int64))
    except Exception as error:
        what = f"the target raises {type(error).__name__}"
        what += f": {str(error).splitlines()[0][:120]}" if str(error) else ""
    else:
        if not np.isfinite(row).all():
            what = "rows are NaN or inf"
        elif not row.any():
            what = "rows are zero"
        else:
            if np.abs(row - variant.exact(np.array([hi]), dtype, row.shape[1])).max() <= 1e-3:
                lo, hi = hi, hi + 1  # the repeated row is position hi's own: the first wrong one is next
            what = f"every row repeats the row of position {lo}"
    return Finding(
        "cliff",
        f"length cliff at {hi}: from position {hi} on, {what}",
        f"position {lo} is the last with its own row (found by bisection between the sampled positions)",
        {"position": hi},
        fix=f"size the table for the longest position the model will see (max_len > {hi - 1}), or compute "
        f"the rows on the fly; {_posenc_line(variant)} — no table to outgrow",
    )


def non_finite(m: Measurement, edge: Finding | None) -> Finding | None:
    """Rows holding NaN or inf that no length cliff explains."""
    bad = np.flatnonzero(~np.isfinite(m.row_errors))
    if edge is not None:
        bad = bad[m.positions[bad] < edge.data["position"]]
    if not len(bad):
        return None
    return Finding(
        "nan",
        f"{len(bad):,} sampled rows hold NaN or inf, the first at position {int(m.positions[bad[0]])}",
        "posenc's rows are finite at every position < 2³¹",
        {"rows": len(bad), "first": int(m.positions[bad[0]])},
        fix="find where NaN/inf enters (a position or angle past its dtype's range, a division by zero, an "
        "uninitialized row) and compute that step in float64; " + _POSENC.format(options=""),
    )


def collisions(m: Measurement, dtype: str, edge: Finding | None) -> Finding | None:
    """Rows that repeat an earlier one where posenc's rows in the same dtype do not (yet)."""
    repeat = m.first_repeat
    if repeat is None or (edge is not None and repeat[0] >= edge.data["position"]):
        return None
    exact = m.exact_repeat
    if exact is not None and exact[0] <= repeat[0]:
        return None
    posenc = (
        "no two repeat among the sampled positions" if exact is None else f"the first repeat is {exact[0]}"
    )
    return Finding(
        "collisions",
        f"encodings collide in {dtype}: position {repeat[0]} has the same row as position {repeat[1]}",
        f"posenc's exact {dtype} rows: {posenc}",
        {"first": repeat[0], "earlier": repeat[1]},
        fix=f"keep positions and angles out of low precision (integer or float64 positions, the angle formed "
        f"in float64) so that {dtype} rounds each row once; " + _POSENC.format(options=""),
    )
