"""What went wrong, in plain words: each finding is a small function of the measurement (and, for a
hypothesis it tests, of a few more samples of the target) that returns a :class:`Finding` or None. A cause
is named only when an independent check confirms it; :func:`find_all` runs them in order.

* :func:`permuted`, :func:`wrong_variant`, :func:`offset`: what identification found (sin and cos swapped,
  columns permuted, a declared variant that is not the one the rows match, row 0 matching position ±1);
* :func:`cliff`: from some position on, rows are zero, NaN, one repeated row (the row of the position
  before, checked), or the call raises; the position is found by bisection;
* :func:`storage`: every value on a coarser grid than the dtype → "table stored in bfloat16 then used as
  float32";
* :func:`positions_rounded`: the target's row at p is, bit for bit, its row at a neighbouring b-bit value,
  whose rows differ → "positions rounded to bfloat16" (b = 8; 11: float16 or TF32; 24: float32);
* :func:`frequencies_cast`: the target equals sin/cos(p · ω̃_i), ω̃_i = ω_i rounded to bfloat16 / float16 /
  float32 (or a rotary module's own cast inv_freq), far better than it equals the exact values →
  "frequencies cast to bfloat16";
* :func:`growth`: the largest error per octave of positions grows ∝ position (slope ≈ 1 on log-log) →
  "angles formed in float32", the precision read off error / (ω_0 · p) ≈ 2^-p;
* :func:`non_finite`, :func:`collisions`: NaN/inf rows, and rows that repeat where posenc's do not and no
  rounding of the positions explains;
* :func:`unexplained`: when nothing above fits errors past 1 ulp, their numbers, not a guess.
* :func:`last_bits`: when nothing above fits errors of one rounding step, their numbers: a failing audit
  always says why.

The precision causes are read against the variant the rows hold (:func:`_held`), before any cliff, and
several are reported together: the PyTorch tutorial's module gets its float32 angles and its cliff at 5000.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from .. import layouts
from ..porting import fitting
from ..porting.candidates import rows_of_frequencies
from ..porting.fitting import coarse_grid
from ..porting.rope_fitting import precision_of
from .measure import Measurement, ulps
from .targets import MAX_POSITION, Target
from .variant import PREFIX, Variant

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


def _confirmed(variant: Variant) -> bool:
    """Whether the rows hold the variant (or another one found in its place): declared, matched, or matched
    at an offset or in another column order."""
    return bool(
        variant.declared
        or variant.matches
        or variant.start != 0
        or variant.permutation is not None
        or variant.found_instead is not None
    )


def _unidentified(variant: Variant) -> bool:
    """Whether no variant was identified: none confirmed, and the nearest off by more than
    :data:`NO_SINUSOID` already at the first positions (a learned table, a formula of its own)."""
    return not _confirmed(variant) and variant.prefix_error > NO_SINUSOID


def _posenc_line(variant: Variant) -> str:
    """The posenc call for the variant's options (those that differ from posenc's defaults); none where the
    first rows match no variant (off by more than :data:`NO_SINUSOID`): no options of posenc's make them."""
    from ..defaults import OPTIONS

    if _unidentified(variant):
        what = "sinusoid" if variant.params is None else "rotary"
        return (
            f"no posenc call replaces it: the first rows match no {what} posenc knows (no {what} identified; "
            f"the nearest, {variant.name or 'a fit'}, is {variant.prefix_error:.3g} from them)"
        )
    if variant.params is not None:
        return (
            "or use posenc's exact rotary embedding: `posenc.torch.RotaryEmbedding(config)` (a drop-in for "
            "Hugging Face's), or `posenc.rope.cos_sin(positions, params)`"
        )
    if not _confirmed(variant):  # a nearest candidate or a fit: never named as the model's variant in a fix
        return (
            _POSENC.format(options=", <its options>")
            + " with the model's own options (no variant was confirmed)"
        )
    shown = "".join(f", {k}={v!r}" for k, v in variant.options.items() if OPTIONS.get(k) != v)
    return _POSENC.format(options=shown)


def find_all(target: Target, variant: Variant, m: Measurement, dtype: str) -> list[Finding]:
    """Every finding that applies, the layout and variant ones first. The precision causes (rounded
    positions, cast frequencies, low-precision angles) are read against the variant the rows hold: the
    declared one, or the one identification found instead of it; and only from the rows before a cliff."""
    shifted = _shifted(variant, m, dtype)
    found = [
        wrong_variant(variant),
        permuted(variant),
        offset(variant, shifted),
        amplitude(variant, m, dtype),
    ]
    found.append(rotary_layout(variant, m, dtype))
    edge = cliff(target, variant, m, dtype)
    held, basis = _held(variant, m, dtype, found[-1])
    scaled, precise = found[3], target
    if scaled is not None and not scaled.data["alone"]:  # the rest of the error, on the rows divided by A
        factor = scaled.data["factor"]
        basis = _descaled(held, basis, factor, dtype)
        precise = dataclasses.replace(target, sample=lambda p, read=target.sample: read(p) / factor)
    rounded = positions_rounded(precise, held, basis, dtype, edge)
    cast = frequencies_cast(precise, held, basis, dtype, rounded) or frequencies_off(
        precise, held, basis, dtype
    )
    if cast is None and rounded is None:
        cast = frequencies_measured(precise, held, basis, dtype, edge)
    stored = storage(m, dtype, variant, "table" if variant.params is None else "cos/sin cache")
    if (target.rotary or {}).get("values_of_theta"):  # posenc's cos/sin of its θ: no angle of its own
        angles = None if cast else frequencies_stored(target, held)
    else:
        angles = None if cast else growth(held, basis, dtype, rounded)
        if angles is None and cast is None and rounded is None and stored is None:
            angles = float32_code(precise, held, basis, dtype)
    found += [edge, stored, rounded, cast, angles]
    found += [non_finite(m, variant, edge), collisions(m, dtype, variant, edge, rounded)]
    if shifted is not None and not any(f is not None and f.kind == "angles" for f in found):
        found.append(growth(*shifted, dtype))  # the angles' error, at the positions the rows hold
    found = [f for f in found if f is not None]
    if not found:
        return [f for f in [unexplained(m, dtype, variant) or last_bits(m, dtype, variant)] if f is not None]
    left = (
        beyond_amplitude(scaled, held, basis, dtype, found, edge)
        or (_no_sinusoid(variant, m, dtype, found) if _unidentified(variant) else None)
        or remainder(variant, m, dtype, found, edge, shifted)
        or beyond_growth(*(shifted or (held, basis)), dtype, found, edge)
        or beyond_cast(precise, held, basis, dtype, cast, edge, rounded)
        or beyond_storage(held, basis, found, edge)
        or _no_sinusoid(variant, m, dtype, found)
    )
    if left is None and edge is not None and {f.kind for f in found} == {"cliff"}:
        before = (m.positions < edge.data["position"]) & np.isfinite(m.values).all(axis=1)
        if before.any():  # the rows before it, one rounding step off? (their ulps, not the dead rows')
            exact = held.exact(m.positions[before], dtype, m.values.shape[1])
            ulp = float(np.max(ulps(np.abs(m.values[before] - exact), exact, dtype), initial=0.0))
            rows = dataclasses.replace(m, row_errors=np.where(before, m.row_errors, np.nan))
            left = last_bits(rows, dtype, variant, ulp)
    return found + [f for f in [left] if f is not None]


def _held(
    variant: Variant, m: Measurement, dtype: str, layout: Finding | None = None
) -> tuple[Variant, Measurement]:
    """The variant the rows hold and the errors against it: ``variant`` and ``m`` themselves, unless a
    declared variant is not what the rows match and identification found the one they do, or a rotary
    target's rows are in the other ``layout``."""
    other = variant.found_instead
    if other is None and layout is None:
        return variant, m
    if layout is not None:
        held = dataclasses.replace(variant, layout=layout.data["layout"])
    else:  # built by its kind (a RoPE cache's rows are a rotary variant)
        held = other["variant"]
    finite = np.isfinite(m.row_errors)
    errors = m.row_errors.copy()
    if finite.any():
        exact = held.exact(m.positions[finite], dtype, m.values.shape[1])
        errors[finite] = np.abs(m.values[finite] - exact).max(axis=1, initial=0.0)
    return held, dataclasses.replace(m, row_errors=errors)


def wrong_variant(variant: Variant) -> Finding | None:
    """A declared variant that the rows do not match, while another one does (a rotary cache's rows: a
    variant of another kind)."""
    other = variant.found_instead
    if not variant.declared or other is None:
        return None
    held = other.get("variant")
    if held is not None and held.params is not None and variant.params is None:
        what = {"cos": "cos cache", "sin": "sin cache"}.get(held.parts, "cos/sin cache")
        return Finding(
            "variant",
            f"not a sinusoidal table: the target's rows are a RoPE {what} ({held.name}), not {variant.name}",
            f"posenc.identify matches the first rows with the {held.name} {what} {other['options']}; the "
            f"declared variant is off by {variant.prefix_error:.3g} there",
            {"declared": variant.options, "found": other["options"]},
            fix="audit the rows without a declared variant (they are then measured as that cache); "
            + _posenc_line(variant),
        )
    if held is not None and held.params is not None and variant.params is not None:  # two rotaries
        names = ("rope_type", "base", "head_dim", *held.params.kind.fields, *variant.params.kind.fields)
        said = ", ".join(f"{k} {getattr(variant.params, k)!r}" for k in dict.fromkeys(names))
        got = ", ".join(f"{k} {getattr(held.params, k)!r}" for k in dict.fromkeys(names))
        return Finding(
            "variant",
            f"wrong rotary: declared {variant.name} ({said}), the target's rows are {held.name} ({got})",
            other.get("evidence") or f"the declared rotary is off by {variant.prefix_error:.3g} there",
            {"declared": variant.options, "found": other["options"]},
            fix=f"declare the rotary the rows hold ({held.name}), or compute the declared one: "
            + _posenc_line(variant),
        )
    names = ("shift", "base", "scale", "layout", "odd")[: 5 if other["width"] % 2 else 4]
    differ = [k for k in names if other["options"].get(k) != variant.options.get(k)] or ["variant"]
    said = ", ".join(f"{k} {variant.options.get(k)!r}" for k in differ if k != "variant")
    got = ", ".join(f"{k} {other['options'].get(k)!r}" for k in differ if k != "variant")
    return Finding(
        "variant",
        f"wrong {differ[0]}: declared {said or variant.name} ({variant.name}), the target's rows are "
        f"{got} ({other['name'] or 'generic'})",
        other.get("evidence")
        or f"posenc.identify matches the first rows with {other['name'] or 'generic'} {other['options']}; "
        f"the declared variant is off by {variant.prefix_error:.3g} there",
        {"declared": variant.options, "found": other["options"]},
        fix=f"declare the variant the rows hold ({got or other['name']}), or compute the declared one: "
        + _posenc_line(variant),
    )


def permuted(variant: Variant) -> Finding | None:
    """Columns in another order than the identified variant's: sin and cos swapped in every pair, or any
    other permutation."""
    order = variant.permutation
    if order is None:
        return None
    moved = np.flatnonzero(order != np.arange(len(order)))
    layout = variant.options.get("layout")
    if layouts.swaps_pairs(order, layout):
        s, c = layouts.pair_columns(layout, len(order) // 2)
        return Finding(
            "layout",
            f"sin and cos swapped: each sine column of the variant ({variant.name}, layout {layout}) holds "
            "the cosine of its frequency, and each cosine column the sine",
            f"with the columns of every sin/cos pair exchanged, the first rows match {variant.name}",
            {"permutation": order.tolist(), "swapped": True},
            fix="exchange sin and cos: the sine of frequency i in column "
            + (
                "2i, its cosine in 2i + 1 (`pe[:, 0::2] = torch.sin(angle)`, "
                "`pe[:, 1::2] = torch.cos(angle)`)"
                if layout == "interleaved"
                else f"{s[0]} + i, its cosine in {c[0]} + i"
            )
            + "; "
            + _posenc_line(variant),
        )
    shown = ", ".join(f"{j}←{order[j]}" for j in moved[:6]) + (", …" if len(moved) > 6 else "")
    return Finding(
        "layout",
        f"columns permuted: {len(moved)} of {len(order)} columns hold another column of the identified "
        f"variant ({variant.name}, layout {layout})",
        f"target←variant: {shown}; in the variant's order the first rows match",
        {"permutation": order.tolist(), "swapped": False},
        fix=f"put column order[j] of the variant in column j (order: {order.tolist()[:8]}"
        f"{', …' if len(order) > 8 else ''}), i.e. write the layout the model was trained with; "
        + _posenc_line(variant),
    )


def rotary_layout(variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """A rotary target whose cos/sin are in the other layout than the one it was read as: interleaved
    ([c0, c0, c1, c1, ...], GPT-J, ``rotate_every_two``) where halves ([c0, c1, ..., c0, c1, ...], Llama's
    ``rotate_half``) were expected, or the reverse."""
    finite = np.flatnonzero(np.isfinite(m.row_errors))[:_PROBES]
    if variant.params is None or not len(finite) or m.row_errors[finite].max() < 1e-3:
        return None
    other = "interleaved" if variant.layout == "half" else "half"
    positions, values = m.positions[finite], m.values[finite]
    error = float(
        np.abs(values - dataclasses.replace(variant, layout=other).exact(positions, dtype, 0)).max()
    )
    if error > max(1e-4, 0.01 * float(m.row_errors[finite].max())):
        return None
    names = {"half": "halves (`rotate_half`)", "interleaved": "interleaved pairs (`rotate_every_two`)"}
    return Finding(
        "layout",
        f"cos/sin in {names[other]}, not {names[variant.layout]}",
        f"at the first {len(finite):,} sampled positions the rows are within {error:.3g} of the {other} "
        f"layout's exact values, and {float(m.row_errors[finite].max()):.3g} from the {variant.layout} one's",
        {"layout": other, "error": error},
        fix=f"apply the rotation the model was trained with: {names[other]} cos/sin need the matching "
        "rotation of q and k (`posenc.torch.apply_rotary(..., layout=...)`); or, if the weights expect "
        f"{names[variant.layout]}, build the cos/sin in that layout: "
        f"`posenc.rope.cos_sin(positions, params, layout={variant.layout!r})`",
    )


def amplitude(variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """Every value the exact one times one constant A ≠ 1 (a table divided by √d_model, x-transformers'
    dim^-0.5, ESPnet's alpha): the ratios value / exact over the first positions' large values (where
    another cause, such as float32 angles, has not grown) one constant within 10⁻³ of A (a few roundings
    of a 16-bit ``dtype``); ``alone`` in the
    data when every value is within a few units of ``dtype`` of A·exact, else the rest of the error is
    read on the rows divided by A (:func:`find_all`)."""
    if variant.params is not None or variant.permutation is not None or variant.start or not len(m.positions):
        return None
    finite = np.isfinite(m.values).all(axis=1)
    if not finite.any():
        return None
    values = m.values[finite].astype(np.float64)
    exact = variant.exact(m.positions[finite], "float64", values.shape[1])
    big = np.abs(exact) > 0.25
    early = big & (m.positions[finite] < max(256, int(np.sort(m.positions[finite])[:16][-1]) + 1))[:, None]
    if not early.any():
        return None
    ratios = values[early] / exact[early]
    factor = float(np.median(ratios))
    # a 16-bit value's own rounding: of the dtype, or of the type the values are held in (a bfloat16 table
    # read as float32)
    bits = min(_BITS.get(dtype, 53), _BITS.get(precision_of(values), 53))
    spread = max(1e-3, 4 * 2.0**-bits)
    by_norms = False
    if float(np.abs(ratios / factor - 1).max()) > spread:  # angles already off (16-bit): the pairs' norms
        norms = _pair_norms(variant, values[early.any(axis=1)])
        if norms is None or float(np.abs(norms / np.median(norms) - 1).max()) > spread:
            return None
        factor, by_norms = float(np.median(norms)), True
        zero = (m.positions[finite] == 0)[:, None] & (np.abs(exact) == 1)  # cos 0 = 1 in any precision
        if zero.any() and abs(float(np.median(values[zero] / exact[zero])) / factor - 1) <= spread:
            factor = float(np.median(values[zero] / exact[zero]))
    if not (factor > 0 and abs(factor - 1.0) > 2 * spread):
        return None
    residual = float(np.abs(values - factor * exact).max())
    alone = residual <= 8 * factor * 2.0 ** -_BITS.get(dtype, 53)
    width = values.shape[1]
    root = f" = 1/√{width}" if abs(factor * math.sqrt(width) - 1.0) < 1e-6 else ""
    early_residual = float(np.abs(values[early] - factor * exact[early]).max())
    return Finding(
        "amplitude",
        f"values scaled by {factor:.6g}{root}: the encoding's amplitude is not 1",
        f"every sampled value is within {residual:.3g} of {factor:.6g} × the exact value of "
        f"{variant.name or 'the variant'} (sin and cos have amplitude 1)"
        if alone
        else f"every sine and cosine of one frequency at the first positions has norm √(sin² + cos²) = "
        f"{factor:.6g} (within {spread:.2g}: sin and cos have amplitude 1 at any angle, and the angles' "
        f"own error already shows there); the rest of the error is read on the rows divided by {factor:.6g}"
        if by_norms
        else f"the large values of the first positions are {factor:.6g} × the exact values of "
        f"{variant.name or 'the variant'} (within {early_residual:.3g}; sin and cos have amplitude 1); the "
        f"rest of the error is read on the rows divided by {factor:.6g}",
        {"factor": factor, "residual": residual, "alone": alone},
        fix="keep the encoding's amplitude 1 and scale where it is used (the paper scales the embeddings by "
        "√d_model before adding it); " + _posenc_line(variant),
    )


def _pair_norms(variant: Variant, rows: np.ndarray) -> np.ndarray | None:
    """√(sin² + cos²) of each frequency's pair of columns in ``rows`` (the amplitude, whatever error the
    angles carry), for a sinusoidal variant of even width in a known layout; else None."""
    width, layout = rows.shape[1], variant.options.get("layout")
    if width % 2 or width < 2 or layout not in ("interleaved", "sin_cos", "cos_sin"):
        return None
    first, second = (rows[:, 0::2], rows[:, 1::2]) if layout == "interleaved" else np.split(rows, 2, axis=1)
    return np.hypot(first, second).ravel()


def beyond_amplitude(
    scaled: Finding | None,
    variant: Variant,
    m: Measurement,
    dtype: str,
    found: list[Finding],
    edge: Finding | None,
) -> Finding | None:
    """What an amplitude found on the first positions leaves, where no other cause was found on the rows
    divided by it (``m``): those rows still off past 1 ulp and 2^-p (a table scaled in part): "unexplained
    remainder", with its size and where."""
    others = {"angles", "frequencies", "positions", "storage", "rounding", "unexplained"}
    if scaled is None or scaled.data["alone"] or {f.kind for f in found} & others:
        return None
    keep = np.isfinite(m.row_errors) & np.isfinite(m.values).all(axis=1)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    if not keep.any():
        return None
    factor = scaled.data["factor"]
    return _left_past(
        variant,
        m.values[keep],
        variant.exact(m.positions[keep], dtype, m.values.shape[1]),
        m.positions[keep],
        dtype,
        f"beyond the amplitude {factor:.6g}",
        f"the rows divided by {factor:.6g} still differ from the exact values (the amplitude holds for the "
        "first positions, not for every row); no known cause fits what is left",
    )


def _left_past(
    variant: Variant,
    values: np.ndarray,
    exact: np.ndarray,
    positions: np.ndarray,
    dtype: str,
    beyond: str,
    evidence: str,
) -> Finding | None:
    """The "unexplained remainder" of ``values`` against ``exact`` at ``positions`` when past 1 ulp and
    2^-p somewhere (``beyond``: what the findings accounted for), else None."""
    difference = np.abs(values - exact)
    rows = difference.max(axis=1, initial=0.0)
    worst = int(np.argmax(rows))
    ulp = float(np.max(ulps(difference, exact, dtype), initial=0.0))
    if ulp <= 1.0 or rows[worst] <= 2 * 2.0 ** -_BITS.get(dtype, 53):
        return None
    where = int(positions[worst])
    return Finding(
        "unexplained",
        f"unexplained remainder: up to {rows[worst]:.3g} ({ulp:.3g} ulp of {dtype}) {beyond}, the worst at "
        f"position {where:,}",
        evidence,
        {"max_abs": float(rows[worst]), "max_ulp": ulp, "position": where},
        fix="compare the code step by step with the exact formula (posenc.table(..., dtype='float64') rows "
        "are the reference) to find where the rest of the error enters; " + _posenc_line(variant),
    )


def _descaled(variant: Variant, m: Measurement, factor: float, dtype: str) -> Measurement:
    """``m`` with its rows divided by ``factor`` (an amplitude found) and their errors against ``variant``."""
    values = m.values / factor
    errors = m.row_errors.copy()
    finite = np.isfinite(values).all(axis=1)
    if finite.any():
        exact = variant.exact(m.positions[finite], dtype, values.shape[1])
        errors[finite] = np.abs(values[finite] - exact).max(axis=1, initial=0.0)
    return dataclasses.replace(m, values=values, row_errors=errors)


def _shifted(variant: Variant, m: Measurement, dtype: str) -> tuple[Variant, Measurement] | None:
    """Where row 0 matches another position (``variant.start``): the variant at the positions the rows hold
    (p + start) and the errors against it there, for the causes of what is left; else None."""
    if not variant.start or variant.params is not None or not len(m.positions):
        return None
    positions = m.positions + variant.start
    finite = np.isfinite(m.row_errors) & (positions >= 0) & (positions < MAX_POSITION)
    errors = np.full(len(positions), np.nan)
    if finite.any():
        exact = variant.exact(positions[finite], dtype, m.values.shape[1])
        errors[finite] = np.abs(m.values[finite] - exact).max(axis=1, initial=0.0)
    return dataclasses.replace(variant, start=0), dataclasses.replace(
        m, positions=positions, row_errors=errors
    )


def offset(variant: Variant, shifted: tuple[Variant, Measurement] | None = None) -> Finding | None:
    """Row 0 matching another position than 0: the positions are shifted. "Exact" only where the rows are
    posenc's at the positions they hold (``shifted``: :func:`_shifted`)."""
    if variant.start == 0:
        return None
    by = abs(variant.start)
    errors = None if shifted is None else shifted[1].row_errors
    exact = errors is not None and bool(np.isfinite(errors).any()) and float(np.nanmax(errors)) == 0.0
    return Finding(
        "offset",
        f"off by {'one' if by == 1 else by} position{'s' if by > 1 else ''}: position p holds the "
        f"{'exact ' if exact else ''}encoding of p {'+' if variant.start > 0 else '−'} {by}",
        f"the first rows match {variant.name or 'the variant'} best with row 0 at position {variant.start}; "
        f"at position p itself they are off by {variant.prefix_error:.3g}"
        if not variant.declared
        else f"the declared variant matches the first rows with row 0 at position {variant.start}",
        {"start": variant.start},
        fix=f"index the rows by the position itself: the row of position p is row p of the table (counted "
        f"from 0), not p {'+' if variant.start > 0 else '−'} {by}; with posenc pass the true positions or "
        "offset (`module(x, offset=past_length)`)",
    )


def storage(m: Measurement, dtype: str, variant: Variant, what: str = "table") -> Finding | None:
    """Every sampled value on a coarser grid than ``dtype``: ``what`` (a table, a cos/sin cache) stored in
    that type, then converted."""
    values = m.values[np.isfinite(m.values)]
    values = values[(values != 0) & (np.abs(values) != 1)]
    if len(values) < 64 or dtype not in _BITS:
        return None
    grid = precision_of(values)
    if _BITS.get(grid, 99) >= _BITS[dtype]:
        return None
    return Finding(
        "storage",
        f"{what} stored in {grid} then used as {dtype}",
        f"all {len(values):,} sampled values (0 and ±1 aside) lie on the {grid} grid: the low "
        f"{_BITS[dtype] - _BITS[grid]} bits of each {dtype} significand are zero; {grid} rounding alone is "
        f"up to {2.0 ** -_BITS[grid]:.2g}",
        {"grid": grid},
        fix=f"keep the values in {dtype} from the high-precision result (do not store the table, cache or "
        f"buffer in {grid}, and keep it out of `model.to({grid})`: register it with persistent=False and "
        f"cast after); {_posenc_line(variant)}",
    )


def _model(
    target: Target,
    variant: Variant,
    positions: np.ndarray,
    grid: str,
    d_model: int,
    stored: np.ndarray | None = None,
) -> np.ndarray:
    """sin/cos(p · ω̃_i) in float64, ω̃_i the variant's frequencies rounded to ``grid`` (or a rotary
    module's ``stored`` inv_freq), in its columns."""
    if variant.params is not None:
        from .. import rope

        theta = fitting.rounded(rope.inv_freq(variant.params), grid) if stored is None else stored
        scaling = rope.attention_scaling(variant.params)
        angles = positions[:, None].astype(np.float64) * theta
        cos, sin = scaling * np.cos(angles), scaling * np.sin(angles)
        if variant.layout == "half":
            cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
        else:
            cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        return variant.columns(cos, sin)
    rows = rows_of_frequencies(variant.options, positions, d_model, grid)
    if variant.padding_idx is not None:
        rows[positions == variant.padding_idx] = 0
    return rows


#: Significant bits a position may have been rounded to, coarsest first: bfloat16; float16 or TF32 (the
#: operands of a TF32 matmul); float32.
_POSITION_BITS = (8, 11, 24)
#: The largest float16 (positions from 65520 on round to inf).
_FLOAT16_MAX = 65504


def round_bits(positions: np.ndarray, bits: int, toward_zero: bool = False) -> np.ndarray:
    """``positions`` rounded to ``bits`` significant bits, as int64: to nearest, ties to even (a cast to
    bfloat16: 8, float16 or TF32: 11, float32: 24; float16's overflow aside), or ``toward_zero``.

    >>> round_bits(np.array([255, 257, 259, 4114, 16777217]), 8).tolist()
    [255, 256, 260, 4128, 16777216]
    >>> round_bits(np.array([255, 257, 259, 4114]), 8, toward_zero=True).tolist()
    [255, 256, 258, 4096]
    """
    mantissa, exponent = np.frexp(np.asarray(positions, dtype=np.float64))
    rounding = np.trunc if toward_zero else np.rint
    return np.ldexp(rounding(np.ldexp(mantissa, bits)), exponent - bits).astype(np.int64)


def positions_rounded(
    target: Target, variant: Variant, m: Measurement, dtype: str, edge: Finding | None
) -> Finding | None:
    """Positions rounded to a float type before the angle: at every probed position p between two b-bit
    values (and where posenc's rows of the three differ), the target's row at p is, bit for bit, its row at
    one of those two, while its rows at the two differ. The coarsest such b is the precision; 11 bits is
    float16 when the rows from 65520 on are inf/NaN, TF32 when they go on past it. Which of the two each p
    lands on gives the rounding: to nearest (a cast), toward zero, or mixed (``torch.arange`` in bfloat16)."""
    stop = edge.data["position"] if edge is not None else int(m.positions[-1]) + 1 if len(m.positions) else 0
    finite = np.isfinite(m.values).all(axis=1) & (m.positions < stop)
    for bits in _POSITION_BITS:
        landed = _landings(target, variant, m, dtype, bits, finite, stop)
        if landed is not None:
            return _rounded_finding(variant, m, bits, *landed, stop, edge)
    return None


def _landings(
    target: Target, variant: Variant, m: Measurement, dtype: str, bits: int, finite: np.ndarray, stop: int
) -> tuple[np.ndarray, np.ndarray, str] | None:
    """For up to :data:`_PROBES` sampled positions p off the ``bits``-bit grid: (their indices in ``m``, the
    grid value each one's row is, the rounding: "nearest", "toward zero" or "mixed"), when every probe lands
    on one of its two grid neighbours and those neighbours' rows differ; else None."""
    limit = min(stop, _FLOAT16_MAX if bits == 11 else stop)
    width = m.values.shape[1]
    ok = np.flatnonzero(finite & (m.positions > (1 << bits)) & (m.positions < limit))
    lo = round_bits(m.positions[ok], bits, toward_zero=True)
    hi = lo + np.ldexp(1.0, np.frexp(lo.astype(np.float64))[1] - bits).astype(np.int64)
    keep = (lo != m.positions[ok]) & (hi < limit)
    ok, lo, hi = ok[keep], lo[keep], hi[keep]
    every = max(1, len(ok) // _PROBES)
    ok, lo, hi = ok[::every], lo[::every], hi[::every]
    exact = variant.exact(m.positions[ok], dtype, width)
    apart = (exact != variant.exact(lo, dtype, width)).any(axis=1) & (
        exact != variant.exact(hi, dtype, width)
    ).any(axis=1)
    ok, lo, hi = ok[apart], lo[apart], hi[apart]
    if len(ok) < 8:
        return None
    try:
        rows = target.sample(np.concatenate([lo, hi]))
    except Exception:  # the target refuses those positions: no evidence either way
        return None
    own = m.values[ok]
    if rows.shape != (2 * len(ok), width):
        return None
    at_lo, at_hi = rows[: len(ok)], rows[len(ok) :]
    on_lo, on_hi = (own == at_lo).all(axis=1), (own == at_hi).all(axis=1)
    if not (on_lo | on_hi).all() or (at_lo != at_hi).any(axis=1).mean() < 0.9:
        return None
    landed = np.where(on_lo, lo, hi)
    nearest = round_bits(m.positions[ok], bits)
    told = on_lo != on_hi  # where the rows of the two neighbours differ, the row says which one it is
    rounding = (
        "nearest"
        if (landed == nearest)[told].all()
        else "toward zero"
        if (landed == lo)[told].all()
        else "mixed"
    )
    return ok, landed, rounding


def _rounded_finding(
    variant: Variant,
    m: Measurement,
    bits: int,
    index: np.ndarray,
    landed: np.ndarray,
    rounding: str,
    stop: int,
    edge: Finding | None,
) -> Finding:
    grid = {8: "bfloat16", 11: "float16", 24: "float32"}[bits]
    named = grid
    if bits == 11:  # float16 overflows from 65520 on, TF32 does not
        past = (m.positions >= 65520) & (m.positions < stop)
        if edge is not None and edge.data["position"] == 65520:
            named = "float16"
        elif past.any() and np.isfinite(m.values[past]).all():
            grid = named = "tf32"
        else:
            named = "float16 or TF32 (11 significant bits)"
    first = (1 << bits) + 1
    p, q = int(m.positions[index][0]), int(landed[0])
    how = {"nearest": "", "toward zero": " toward zero", "mixed": " (some up, some down)"}[rounding]
    kept = (
        "`torch.arange(n)` (int64), not `dtype=torch.float`"
        if bits == 24
        else (f"int64 or float64 positions, kept out of `model.to({grid})` and `.half()`")
    )
    tf32 = (
        "; for a TF32 matmul: `torch.backends.cuda.matmul.allow_tf32 = False` around the angle, or form it "
        "in float64"
        if bits == 11
        else ""
    )
    return Finding(
        "positions",
        f"positions rounded{how} to {named}: from position {first:,} on, distinct positions share rows in "
        f"groups ({first:,} lands on {first - 1:,}; groups of 2^(k-{bits - 1}) positions in [2^k, 2^(k+1)))",
        f"at {len(index):,} sampled positions p the target's row equals, bit for bit, its row at a "
        f"neighbouring {bits}-bit value (e.g. {p:,} → {q:,}) where posenc's rows differ, and its rows at "
        f"neighbouring {bits}-bit values differ",
        {"grid": grid, "bits": bits, "first": first, "probes": len(index), "rounding": rounding},
        fix=f"keep positions exact up to the angle: {kept}, and form the angle in float64 "
        f"(`position.double() * div_term`, div_term computed in float64){tf32}; " + _posenc_line(variant),
    )


def frequencies_cast(
    target: Target, variant: Variant, m: Measurement, dtype: str, rounded: Finding | None = None
) -> Finding | None:
    """The target explained by frequencies rounded to a coarser type, angles and sin/cos exact (of the
    rounded positions, when ``rounded`` found them rounded)."""
    if variant.permutation is not None or variant.start or not len(m.positions):
        return None
    finite = np.isfinite(m.row_errors)
    pick = np.flatnonzero(finite)[:: max(1, int(finite.sum()) // _PROBES)]
    positions, values = m.positions[pick], m.values[pick].astype(np.float64)
    at = positions
    if rounded is not None:  # measured from the exact rows of the rounded positions
        at = round_bits(positions, rounded.data["bits"], rounded.data["rounding"] == "toward zero")
        inside = at < MAX_POSITION  # 2**31 - 1 rounds to 2**31, past posenc's range
        positions, values, at = positions[inside], values[inside], at[inside]
    rows = np.abs(values - variant.exact(at, dtype, values.shape[1])).max(axis=1, initial=0.0)
    use = rows < 0.3  # past that the error saturates (another rounding of the angle may dominate there)
    positions, values, at = positions[use], values[use], at[use]
    off = float(rows[use].max(initial=0.0))
    if off < 16 * 2.0 ** -_BITS.get(dtype, 53):
        return None
    # each 16-bit type straight from the exact frequencies, or from float32 ones (torch's default type: a
    # buffer computed in float32, then model.to(bfloat16); the two differ where float32 lands on a tie)
    tried: list[tuple[str, np.ndarray | None]] = [
        (g, None) for g in ("bfloat16", "float32>bfloat16", "float16", "float32>float16", "float32")
    ]
    stored = (target.rotary or {}).get("inv_freq")
    if variant.params is not None and stored is not None and _BITS.get(precision_of(stored), 99) < 24:
        tried.insert(0, (precision_of(stored), np.asarray(stored, np.float64)))  # its own inv_freq, cast
    for grid, theta in tried:
        if _BITS[grid.rpartition(">")[2]] > _BITS.get(dtype, 53):
            continue
        try:
            model = fitting.rounded(_model(target, variant, at, grid, values.shape[1], theta), dtype)
        except (ImportError, ValueError, TypeError, KeyError):
            continue
        residual = float(np.abs(values - model).max(initial=0.0))
        if residual <= 0.25 * off:
            name = grid.rpartition(">")[2]
            name = "tf32" if name == "float16" and rounded and rounded.data["grid"] == "tf32" else name
            return Finding(
                "frequencies",
                f"frequencies cast to {name}",
                f"at {len(positions):,} sampled positions the target is within {residual:.3g} of "
                f"sin/cos({'p' if rounded is None else 'p̃'}·ω̃_i) "
                f"with ω̃_i = ω_i rounded to {name}, and {off:.3g} from the exact values"
                + ("" if rounded is None else " (p̃: the positions rounded as found)"),
                {
                    "grid": name,
                    "residual": residual,
                    "error": off,
                    "model": grid,
                    "stored": theta is not None,
                },
                fix=f"compute the frequencies in float64 and do not cast them to {name} (e.g. "
                "`div_term = torch.exp(torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(base) / d))`"
                ", an inv_freq buffer kept in float32 or wider and out of `model.to(...)`: register it with "
                "persistent=False and recompute it after a cast); " + _posenc_line(variant),
            )
    return None


#: The positions the rows' own frequencies are read at (:func:`frequencies_measured`).
_PHASE_POSITIONS = np.arange(1, 2049, dtype=np.int64)


def frequencies_measured(
    target: Target, variant: Variant, m: Measurement, dtype: str, edge: Finding | None
) -> Finding | None:
    """Frequencies computed in a coarse type by some route other than one rounding (``base ** x`` then
    ``1 / y``, each rounded): each frequency read from the rows' own phase at positions 1 .. 2048 (it drifts
    by p·Δω), and the rows explained — within a quarter of their error from the exact values — by sin/cos
    of p times those frequencies, angles exact."""
    from .. import core

    if variant.params is not None or variant.permutation is not None or variant.start or not len(m.positions):
        return None
    options, width = variant.options, m.values.shape[1]
    try:
        omega = core.frequencies(width, **{k: options[k] for k in ("base", "shift", "scale", "odd")})
        sines, cosines = layouts.pair_columns(options["layout"], len(omega))
        early = np.asarray(target.sample(_PHASE_POSITIONS), dtype=np.float64)
    except Exception:  # a target that refuses these positions: not this cause
        return None
    if early.shape != (len(_PHASE_POSITIONS), width) or not np.isfinite(early).all():
        return None
    has_sin, has_cos = sines < width, cosines < width  # odd="literal": the last frequency's sin alone
    pairs = np.flatnonzero(has_sin & has_cos)
    p = _PHASE_POSITIONS.astype(np.float64)
    phase = np.angle(
        np.exp(
            1j * (np.arctan2(early[:, sines[pairs]], early[:, cosines[pairs]]) - np.outer(p, omega[pairs]))
        )
    )
    measured = omega.copy()
    for k, i in enumerate(pairs):
        use = np.abs(phase[:, k]) < 0.5
        if use.sum() >= 8:
            measured[i] += float(np.sum(phase[use, k] * p[use]) / np.sum(p[use] ** 2))
    relative = np.abs(measured - omega) / np.where(omega > 0, omega, 1.0)
    keep = np.isfinite(m.values).all(axis=1)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    if not keep.any() or float(relative.max()) <= 2.0**-25:  # within half a unit: as float32 keeps them
        return None
    at, values = m.positions[keep].astype(np.float64), m.values[keep].astype(np.float64)
    model = np.zeros_like(values)
    angles = np.outer(at, measured)
    model[:, sines[has_sin]], model[:, cosines[has_cos]] = (
        np.sin(angles[:, has_sin]),
        np.cos(angles[:, has_cos]),
    )
    residual = float(np.abs(values - fitting.rounded(model, dtype if dtype in _BITS else "float64")).max())
    off = float(np.abs(values - variant.exact(m.positions[keep], dtype, width)).max())
    if off < 16 * 2.0 ** -_BITS.get(dtype, 53) or residual > 0.25 * off:
        return None
    worst = float(relative.max())
    # the 16-bit type whose grid the frequencies read lie on; else the narrowest type whose arithmetic errs
    # by that much: exp of a float32 argument x errs by |x|·2⁻²⁴ (up to 16 units of float32 for a base of
    # 10⁷), several roundings by a few units
    coarse = coarse_grid(measured[pairs], np.full(len(pairs), 2.0 ** -_BITS.get(dtype, 53) / len(p)))
    grid = next((g for g in ("float32", "float16", "bfloat16") if worst <= 32 * 2.0 ** -_BITS[g]), "bfloat16")
    grid = grid if coarse is None else coarse[0]
    return Finding(
        "frequencies",
        f"frequencies computed in {grid}: off by up to {worst / 2.0 ** -_BITS[grid]:.2g} units of {grid} "
        "(not rounded once: several roundings, e.g. `base ** x` then `1 / y` in that type)",
        f"each frequency read from the rows' phase at positions 1 .. 2048 (it drifts ∝ p): sin/cos of p "
        f"times those frequencies, angles exact, are within {residual:.3g} of the rows, the exact "
        f"frequencies {off:.3g}",
        {"grid": grid, "residual": residual, "error": off, "relative": worst},
        fix="compute the frequencies in float64 (`div_term = torch.exp(torch.arange(0, d, 2, "
        "dtype=torch.float64) * (-math.log(base) / d))`, or `base ** x` and `1 / y` in float64) and keep "
        "them out of a 16-bit cast; " + _posenc_line(variant),
    )


def frequencies_off(target: Target, variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """A rotary whose stored ``inv_freq`` is not the variant's by more than any rounding of it (32 units of
    its type: float32 code's own error is a few), and whose rows are the cos/sin of p times those stored
    frequencies: an error that grows ∝ p from the frequencies, not from the rounding of an angle (an
    ``inv_freq`` scaled by 1.0001 was "angles formed in float16", two zeroed ones "in bfloat16")."""
    from .. import rope

    stored = (target.rotary or {}).get("inv_freq")
    if stored is None or variant.params is None or not len(m.positions):
        return None
    exact = np.asarray(rope.inv_freq(variant.params), dtype=np.float64)
    theta = np.asarray(stored, dtype=np.float64).reshape(-1)
    grid = precision_of(theta)
    if theta.shape != exact.shape or not (exact > 0).all() or grid not in _BITS:
        return None
    relative = np.abs(theta / exact - 1)
    allowed = 32 * 2.0 ** -_BITS[grid]
    if float(relative.max()) <= allowed:
        return None
    finite = np.isfinite(m.row_errors)
    pick = np.flatnonzero(finite)[:: max(1, int(finite.sum()) // _PROBES)]
    positions, values = m.positions[pick], m.values[pick].astype(np.float64)
    try:
        model = fitting.rounded(_model(target, variant, positions, "float64", values.shape[1], theta), dtype)
    except (ImportError, ValueError, TypeError, KeyError):
        return None
    residual = float(np.abs(values - model).max(initial=0.0))
    off = float(np.abs(values - variant.exact(positions, dtype, values.shape[1])).max(initial=0.0))
    if residual > 0.25 * off:
        return None
    worst = int(np.argmax(relative))
    return Finding(
        "frequencies",
        f"frequencies not {variant.name}'s: its inv_freq differs from them by up to {relative[worst]:.3g} of "
        f"themselves (θ_{worst} = {theta[worst]:.7g}, {variant.name}'s {exact[worst]:.7g})",
        f"more than any rounding of them ({allowed:.2g}: 32 units of {grid}); the target is within "
        f"{residual:.3g} of cos/sin(p·θ_i) of its own inv_freq and {off:.3g} from the exact values: its "
        "error grows ∝ p from its frequencies",
        {"grid": grid, "relative": float(relative[worst]), "residual": residual, "error": off},
        fix="compute inv_freq from the config as its library does (its rope_init_fn), in float64 rounded "
        "once; " + _posenc_line(variant),
    )


def frequencies_stored(target: Target, variant: Variant) -> Finding | None:
    """A target read from its ``inv_freq`` alone (its values posenc's cos/sin of p·θ_i, no angle of its
    own): its θ_i against the variant's exact ones, in units of their float32 rounding, when off by more
    than one rounding (one rounding is :func:`frequencies_cast`'s)."""
    from .. import rope

    stored = (target.rotary or {}).get("inv_freq")
    if stored is None or variant.params is None:
        return None
    exact = np.asarray(rope.inv_freq(variant.params), dtype=np.float64)
    theta = np.asarray(stored, dtype=np.float64).reshape(-1)
    if theta.shape != exact.shape or not (exact > 0).all():
        return None
    grid = precision_of(theta)  # the type it is stored in (a bfloat16 buffer read as float32 is bfloat16)
    if grid not in ("bfloat16", "float16", "float32"):
        return None
    ulp = np.ldexp(1.0, np.frexp(theta)[1] - _BITS[grid])
    units = np.abs(theta - exact) / ulp
    if float(units.max()) <= 0.5:  # rounded once: frequencies_cast's
        return None
    worst = int(np.argmax(units))
    return Finding(
        "frequencies",
        f"frequencies computed in {grid}: off by up to {units[worst]:.3g} units of {grid} (not rounded "
        "once: several roundings, e.g. `base ** x` then `1 / y` in that type)",
        f"its inv_freq against the exact θ_i of {variant.name}: θ_{worst} is off by {units[worst]:.3g} units "
        f"of {grid}; its values are read as the exact cos/sin of p·θ_i (its forward could not be called), so "
        "their error grows ∝ p from the frequencies alone",
        {"grid": grid, "relative": float(np.max(np.abs(theta / exact - 1)))},
        fix="compute inv_freq in float64 and round once (`1.0 / (base ** (torch.arange(0, d, 2, "
        "dtype=torch.float64) / d))`, then `.float()`); " + _posenc_line(variant),
    )


def growth(variant: Variant, m: Measurement, dtype: str, rounded: Finding | None = None) -> Finding | None:
    """Band maxima ∝ position: the angle p · ω was rounded to a dtype of precision ≈ error / (ω_0 · p).
    With ``rounded`` (positions rounded), only the positions that rounding leaves as they are count."""
    floor = 4 * 2.0 ** -_BITS.get(dtype, 53)
    below = None if rounded is None else 1 << rounded.data["bits"]
    points = _growth_points(m, floor, below)
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
    # the type is read off the largest frequency whose angle a type rounds (p·ω_0 is exact for ω_0 = 1)
    top = -math.log2(rate / (omega0 * _inexact_top(variant, m.values.shape[1])))
    grid = min(_BITS, key=lambda name: abs(_BITS[name] - top))
    if abs(top - _BITS[grid]) > 2.5:
        return None  # no type's rounding of the angle leaves that rate: not this cause
    if not _unit_norms(variant, m, dtype):
        return None  # a rounded angle leaves sin² + cos² as it is: an amplitude or a decay is another cause
    drift = frequency_drift(variant, m)
    of_frequencies = ""
    if drift is not None and drift >= 1.0:
        of_frequencies = (
            f"; the frequencies themselves are off by about {drift:.2g} float32 ulps (their phase drifts ∝ "
            "p: computed in float32, by exp or pow)"
            if drift <= 32
            else f"; the frequencies themselves are off by about {drift * 2.0**-24:.2g} of themselves (their "
            "phase drifts ∝ p: more than float32's rounding of them)"
        )
    at = (
        f"2^-{bits:.1f}·ω_0·p, the rounding of the angle p·ω_0 to {grid} (2^-{_BITS[grid]})"
        if abs(top - bits) < 0.5
        else f"2^-{top:.1f}·ω·p for the largest frequency ω whose angle p·ω a type rounds (p·ω_0 is "
        f"exact), the rounding of that angle to {grid} (2^-{_BITS[grid]})"
    )
    return Finding(
        "angles",
        f"angles formed in {grid}: error grows ∝ position (slope {slope:.2f})",
        f"the largest error of {len(points)} octaves of positions grows as position^{slope:.2f}; error ≈ "
        f"{rate:.2g}·p ≈ " + at + of_frequencies,
        {"slope": slope, "rate": rate, "bits": bits, "grid": grid, "frequency_ulps": drift},
        fix=_angles_fix(grid) + _posenc_line(variant),
    )


def _unit_norms(variant: Variant, m: Measurement, dtype: str) -> bool:
    """Whether every sampled sin/cos pair (zero rows aside) has the variant's amplitude, √(sin² + cos²) = 1
    (a rotary's: its attention scaling), to within the rounding of the values: what rounding an angle, of
    any type, leaves as it is. True where the pairs cannot be read (a cos or sin cache alone, odd widths)."""
    rows = m.values[np.isfinite(m.values).all(axis=1) & m.values.any(axis=1)].astype(np.float64)
    if not len(rows) or variant.values is not None:
        return True
    if variant.params is not None:
        from .. import rope

        if variant.parts != "cos+sin" or rows.shape[1] % 2:
            return True
        half = rows.shape[1] // 2
        norms = np.hypot(rows[:, :half], rows[:, half:]) / rope.attention_scaling(variant.params)
    else:
        norms = _pair_norms(variant, rows)
        if norms is None:
            return True
    bits = min(_BITS.get(dtype, 53), _BITS.get(precision_of(rows), 53))
    return float(np.abs(norms - 1.0).max(initial=0.0)) <= max(8 * 2.0**-bits, 2e-3)


#: Of the sampled values of a 16-bit rotary, the share that must equal the rounding of float32 code's own
#: (its angles, cos and sin in float32) for that to be the cause: a cos/sin of float32 may round otherwise
#: than posenc's float64 model of it where it lies within a float32 ulp of a 16-bit tie.
_FLOAT32_CODE_SHARE = 0.999


def float32_code(target: Target, variant: Variant, m: Measurement, dtype: str) -> Finding | None:
    """A rotary judged in bfloat16 or float16 whose values are float32 code's, rounded once to ``dtype``:
    the angle p·θ_i formed in float32 (θ_i its float32 ``inv_freq``), its cos and sin in float32, scaled by
    the attention scaling, then cast (Hugging Face's rotary in a bfloat16 model). Its angles err by up to
    2^-24·p·θ_i, which stays under 4 units of the 16-bit type to 131k positions, too small for
    :func:`growth` to read off the bands; here it is confirmed value by value: at least
    :data:`_FLOAT32_CODE_SHARE` of the sampled values equal that model's and none is more than one unit of
    ``dtype`` from it, while the exact values differ."""
    from .. import rope

    if dtype not in ("bfloat16", "float16") or variant.params is None or not len(m.positions):
        return None
    stored = (target.rotary or {}).get("inv_freq")
    theta = rope.inv_freq(variant.params) if stored is None else np.asarray(stored, np.float64).reshape(-1)
    theta = np.asarray(theta, np.float64).astype(np.float32)
    finite = np.isfinite(m.values).all(axis=1) & (m.positions < 1 << 24)  # positions exact in float32
    if len(theta) != variant.params.n_frequencies or finite.sum() < 64:
        return None
    positions, values = m.positions[finite], m.values[finite].astype(np.float64)
    angles = (positions.astype(np.float32)[:, None] * theta[None, :]).astype(np.float64)  # one rounding
    scaling = np.float32(rope.attention_scaling(variant.params))
    cos, sin = (
        (np.float32(scaling) * f(angles).astype(np.float32)).astype(np.float64) for f in (np.cos, np.sin)
    )
    if variant.layout == "half":
        cos, sin = np.concatenate([cos, cos], -1), np.concatenate([sin, sin], -1)
    else:
        cos, sin = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
    try:
        model = fitting.rounded(variant.columns(cos, sin), dtype)
    except (ValueError, TypeError):
        return None
    if model.shape != values.shape:
        return None
    exact = variant.exact(positions, dtype, values.shape[1])
    equal = int(np.count_nonzero(model == values))
    same = equal / values.size
    apart = float(np.max(ulps(np.abs(model - values), np.abs(model), dtype), initial=0.0))
    off = float(np.abs(values - exact).max(initial=0.0))
    if same < _FLOAT32_CODE_SHARE or apart > 1.0 or off == 0.0:
        return None
    return Finding(
        "angles",
        f"angles formed in float32, then rounded to {dtype}",
        f"{'all' if equal == values.size else f'{equal:,} of'} {values.size:,} sampled values equal float32 "
        f"code's (p·θ_i with its float32 inv_freq, cos and sin in float32) rounded once to {dtype}"
        f"{'' if equal == values.size else f', the rest within one unit of {dtype}'}; "
        f"they are up to {off:.3g} from the exact values: the float32 angles err by up to 2^-24·p·θ_i, and "
        f"the cast rounds that error in",
        {"grid": "float32", "rate": 2.0**-24 * float(theta.max()), "share": same},
        fix=_angles_fix("float32") + _posenc_line(variant),
    )


def _angles_fix(grid: str) -> str:
    """The change that removes angles formed in ``grid``: float64 ones for a coarser type; for float64 code,
    judged in float64, only a wider angle does (its p·ω rounds to float64)."""
    if grid == "float64":
        return (
            "the angle p·ω rounded to float64 errs by up to 2^-53·|p·ω|, which no float64 code avoids: form "
            "it wider (p·ω and its reduction mod 2π in extended or multiple precision) before sin/cos (cast "
            "to float32, its values are within one rounding of the exact ones); "
        )
    return (
        f"compute the frequencies and form the angle in float64, not {grid}: `div_term = torch.exp("
        "torch.arange(0, d, 2, dtype=torch.float64) * (-math.log(base) / d))`, `angle = position.double() "
        "* div_term` (a float32 div_term cast to float64 keeps its own error), take sin/cos there and round "
        "once to the output dtype (for TF32 matmuls: `torch.backends.cuda.matmul.allow_tf32 = False` around "
        "the angle); "
    )


def _inexact_top(variant: Variant, width: int) -> float:
    """The largest frequency whose angle p·ω a type rounds, relative to the first: p·ω is exact for an
    integer p and a power of two ω (ω_0 = 1), so float32 angles of a 16-wide head of base 10⁶ err by
    2^-24·ω_1·p, ω_1 = 0.18 (2^-26.5·ω_0·p)."""
    try:
        rates = np.sort(np.unique(np.abs(_column_rates(variant, width))))[::-1]
    except (KeyError, TypeError, ValueError):
        return 1.0
    rates = rates[rates > 0]
    inexact = [r for r in rates if np.frexp(r)[0] != 0.5]
    return float(inexact[0] / rates[0]) if len(rates) and inexact else 1.0


def frequency_drift(variant: Variant, m: Measurement) -> float | None:
    """How far the rows' frequencies are from the variant's, in float32 ulps (the median over frequencies of
    |Δω| / (ω·2⁻²⁴)): each frequency's phase error atan2(sin, cos) − p·ω, fitted as Δω·p over the sampled
    positions where it is small (a frequency off by Δω drifts ∝ p; an angle rounded to float32 does not
    drift). None where it cannot be read (a rotary, a permutation, too few rows)."""
    from .. import core

    if variant.params is not None or variant.permutation is not None or len(m.positions) < 8:
        return None
    width = m.values.shape[1]
    options = variant.options
    try:
        omega = core.frequencies(width, **{k: options[k] for k in ("base", "shift", "scale", "odd")})
        sines, cosines = layouts.pair_columns(options["layout"], len(omega))
    except (KeyError, TypeError, ValueError):
        return None
    positions = (m.positions + variant.start).astype(np.float64)
    finite = np.isfinite(m.values).all(axis=1) & (positions > 0)
    if finite.sum() < 8 or sines.max(initial=0) >= width or cosines.max(initial=0) >= width:
        return None
    p, values = positions[finite], m.values[finite].astype(np.float64)
    measured = np.arctan2(values[:, sines], values[:, cosines])
    phase = np.angle(np.exp(1j * (measured - np.outer(p, omega))))  # wrapped to (−π, π]
    small = np.abs(phase) < 0.1
    relative = []
    for i, w in enumerate(omega):
        use = small[:, i]
        if use.sum() >= 8 and w > 0:
            slope = float(np.sum(phase[use, i] * p[use]) / np.sum(p[use] ** 2))
            relative.append(abs(slope) / (w * 2.0**-24))
    return float(np.median(relative)) if relative else None


def _growth_points(m: Measurement, floor: float, below: int | None = None) -> list[tuple[int, float]]:
    """(position, largest error) per octave of the sampled positions (finite rows above ``floor`` and below
    0.3, positions below ``below``): more points than bands, and those before a length cliff count."""
    ok = np.isfinite(m.row_errors) & (m.positions > 0) & (m.row_errors > floor) & (m.row_errors < 0.3)
    if below is not None:
        ok &= m.positions < below
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
    raises = None if raised is None else raised.lo if raised.raises_from is None else raised.raises_from
    if raises is not None and positions[alive[-1]] > raises:
        return None  # a band raises, yet rows beyond it are fine: not a cliff
    lo = int(positions[alive[-1]])
    hi = raises if alive[-1] == len(dead) - 1 else int(positions[alive[-1] + 1])

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
            try:
                clamped = np.array_equal(target.sample(np.array([lo], np.int64))[0], last)
            except Exception:
                clamped = False
            if not clamped:
                return None  # the last rows share one row, but not that of the position before: not a clamp
            what = f"every row repeats the row of position {lo}"
    fix = (
        f"size the table for the longest position the model will see (max_len > {hi - 1}), or compute "
        f"the rows on the fly; {_posenc_line(variant)} — no table to outgrow"
    )
    if _unidentified(variant):  # no known encoding: neither rows computed on the fly nor posenc's replace it
        fix = f"keep positions below {hi} (the target has no rows of its own from there); "
        fix += _posenc_line(variant)
    if hi == FLOAT16_INF and what == "rows are NaN or inf":  # positions held in float16: no table at fault
        fix = (
            f"its positions are held in float16, whose largest finite value is 65504 (from {FLOAT16_INF} "
            "they round to inf): form them in int64 or float32 (`torch.arange(n)`, then `.float()`), and "
            f"round only the encoding to float16; {_posenc_line(variant)} — exact at every position < 2**31"
        )
    return Finding(
        "cliff",
        f"length cliff at {hi}: from position {hi} on, {what}",
        f"position {lo} is the last with its own row (found by bisection between the sampled positions)",
        {"position": hi},
        fix=fix,
    )


#: The first integer float16 rounds to inf (65504 is its largest finite value).
FLOAT16_INF = 65520


def non_finite(m: Measurement, variant: Variant, edge: Finding | None) -> Finding | None:
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
        "uninitialized row) and compute that step in float64; " + _posenc_line(variant),
    )


def collisions(
    m: Measurement, dtype: str, variant: Variant, edge: Finding | None, rounded: Finding | None = None
) -> Finding | None:
    """Rows that repeat an earlier one where posenc's rows in the same dtype do not (yet), and that neither
    rounded positions nor a length cliff explain."""
    repeat = m.first_repeat
    if repeat is None or rounded is not None or (edge is not None and repeat[0] >= edge.data["position"]):
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
        f"in float64) so that {dtype} rounds each row once; " + _posenc_line(variant),
    )


#: The findings that account for the size of an error (each one's own check models it); with none of them,
#: what a cliff, an offset or a layout leaves is measured again (:func:`remainder`).
_PRECISION = frozenset(
    {"angles", "frequencies", "positions", "storage", "amplitude", "rounding", "unexplained"}
)


def remainder(
    variant: Variant,
    m: Measurement,
    dtype: str,
    found: list[Finding],
    edge: Finding | None,
    shifted: tuple[Variant, Measurement] | None,
) -> Finding | None:
    """The error the findings leave unexplained, where none of them accounts for an error's size: the rows
    before a cliff, at the positions they hold (an offset), in the columns' order (a layout), against the
    variant they hold, still off past 1 ulp (and 2^-p): "unexplained remainder", with its size and where."""
    if {f.kind for f in found} & _PRECISION or variant.params is not None or not len(m.positions):
        return None
    held = variant.found_instead["variant"] if variant.found_instead else variant
    positions = m.positions + variant.start if shifted is not None else m.positions
    keep = np.isfinite(m.values).all(axis=1) & (positions >= 0) & (positions < MAX_POSITION)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    if not keep.any():
        return None
    values = m.values[keep].astype(np.float64)
    exact = held.exact(positions[keep], dtype, values.shape[1])
    if variant.permutation is not None and exact.shape == values.shape:
        exact = exact[:, variant.permutation]
    accounted = ", ".join(sorted({f.kind for f in found}))
    return _left_past(
        variant,
        values,
        exact,
        m.positions[keep],
        dtype,
        "beyond what the findings above explain",
        f"with {accounted} accounted for (the rows before the cliff, at the positions they hold, in their "
        "columns' order), the rows still differ from the exact values; no known cause fits what is left",
    )


#: How far above the angles' fitted error (rate · p) a row must be to be more than that cause: the rows of
#: an angle rounded to a dtype lie at or under the octaves' largest errors the rate is fitted to.
BEYOND_GROWTH = 8.0


def beyond_growth(
    variant: Variant, m: Measurement, dtype: str, found: list[Finding], edge: Finding | None
) -> Finding | None:
    """The error an angles finding (error ≈ rate · p) leaves: rows (before a cliff, and below the positions
    a rounding of them merges) off by more than :data:`BEYOND_GROWTH` times its line and a few units of the
    dtype — an error of another cause the angles' one would otherwise hide: "unexplained remainder", with
    its size and where. ``variant`` and ``m``: the rows at the positions they hold (an offset's)."""
    angles = next((f for f in found if f.kind == "angles"), None)
    if angles is None or any(f.kind == "unexplained" for f in found):
        return None
    positions = (m.positions + variant.start).astype(np.float64)
    keep = np.isfinite(m.row_errors) & (positions > 0)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    rounded = next((f for f in found if f.kind == "positions"), None)
    if rounded is not None:  # the rows it merges are its own error
        keep &= positions < 2.0 ** rounded.data["bits"]
    floor = 8 * 2.0 ** -_BITS.get(dtype, 53)
    line = BEYOND_GROWTH * angles.data["rate"] * positions + floor
    over = keep & (m.row_errors > line)
    if not over.any():
        return None
    worst = int(np.argmax(np.where(over, m.row_errors - line, -np.inf)))
    rate = angles.data["rate"]
    return _left_over(
        variant,
        float(m.row_errors[worst]),
        m.positions[over],
        int(m.positions[worst]),
        f"the angles' error ({rate:.2g}·p there: {rate * positions[worst]:.2g})",
        f"{BEYOND_GROWTH:g} times the angles' line",
        "the angles' rounding",
    )


def _left_over(
    variant: Variant,
    size: float,
    over: np.ndarray,
    where: int,
    beyond: str,
    margin: str,
    cause: str,
    caveat: str = "",
) -> Finding:
    """The "unexplained remainder" a precision cause leaves: rows at positions ``over`` off by more than
    ``margin`` beyond what ``cause`` explains, the worst ``size`` at ``where``; ``caveat``: what else may
    leave it."""
    return Finding(
        "unexplained",
        f"unexplained remainder: up to {size:.3g} at position {where:,}, beyond {beyond}",
        f"{len(over)} of the sampled rows, from position {int(over.min()):,} to {int(over.max()):,}, are off "
        f"by more than {margin}: another cause than {cause} enters there; no known cause fits it{caveat}",
        {"max_abs": size, "position": where, "rows": len(over)},
        fix="compare the code step by step with the exact formula at that position (posenc.table(..., "
        "dtype='float64') rows are the reference) to find where the rest of the error enters; "
        + _posenc_line(variant),
    )


def beyond_storage(
    variant: Variant, m: Measurement, found: list[Finding], edge: Finding | None
) -> Finding | None:
    """The error a storage finding (values rounded to a coarser grid) leaves, where it is the only precision
    cause: every sampled value (before a cliff) within 2 ulps of that grid at its exact value, plus what
    float32 code errs there (4·2⁻²⁴·p·ω + 8·2⁻²⁴, ω its column's frequency); rows past that hold an error of
    another cause: "unexplained remainder", size and where."""
    stored = next((f for f in found if f.kind == "storage"), None)
    if stored is None or {f.kind for f in found} & (_PRECISION - {"storage"}) or not len(m.positions):
        return None
    keep = np.isfinite(m.values).all(axis=1) & (m.positions >= 0) & (m.positions < MAX_POSITION)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    if variant.start or variant.permutation is not None or not keep.any():
        return None
    positions, values = m.positions[keep], m.values[keep].astype(np.float64)
    try:
        exact = variant.exact(positions, "float64", values.shape[1])
        rates = _column_rates(variant, values.shape[1])
    except (ImportError, ValueError, TypeError, KeyError):
        return None
    if exact.shape != values.shape or rates.shape != (values.shape[1],):
        return None
    bits, unit = _BITS[stored.data["grid"]], 2.0**-24
    magnitude = np.maximum(np.abs(exact), 2.0**-126)
    grid_ulp = np.exp2(np.floor(np.log2(magnitude)) - (bits - 1))
    allowance = 2 * grid_ulp + 4 * unit * np.abs(positions.astype(np.float64))[:, None] * rates + 8 * unit
    beyond = (np.abs(values - exact) - allowance).max(axis=1, initial=-np.inf)
    over = beyond > 0
    if not over.any():
        return None
    rows = np.abs(values - exact).max(axis=1, initial=0.0)
    worst = int(np.argmax(np.where(over, rows, -np.inf)))
    return _left_over(
        variant,
        float(rows[worst]),
        positions[over],
        int(positions[worst]),
        f"its {stored.data['grid']} storage (2 ulps of it, and float32 code's error, at each value)",
        f"two {stored.data['grid']} ulps and float32 code's error",
        "the storage",
    )


def _column_rates(variant: Variant, width: int) -> np.ndarray:
    """The frequency of each of a variant's ``width`` columns (its angle's growth per position)."""
    if variant.params is not None:
        from .. import rope

        theta = rope.inv_freq(variant.params)
        both = np.concatenate([theta, theta]) if variant.layout == "half" else np.repeat(theta, 2)
        return variant.columns(both[None], both[None])[0]
    from .. import core

    o = variant.options
    omega = core.frequencies(width, base=o["base"], shift=o["shift"], scale=o["scale"], odd=o["odd"])
    s, c = layouts.pair_columns(o["layout"], len(omega))
    rates = np.zeros(max(width, 2 * len(omega)))
    rates[s], rates[c] = omega, omega
    return rates[:width]


def beyond_cast(
    target: Target,
    variant: Variant,
    m: Measurement,
    dtype: str,
    cast: Finding | None,
    edge: Finding | None,
    rounded: Finding | None,
) -> Finding | None:
    """The error a cast-frequencies finding leaves: every sampled row (before a cliff) against its model,
    sin/cos(p·ω̃) with ω̃ rounded as found, off by more than four times what the model left at its probes
    and a few units of the dtype — an error of another cause: "unexplained remainder", size and where."""
    if cast is None or cast.data.get("stored") or "model" not in cast.data or not len(m.positions):
        return None
    keep = np.isfinite(m.row_errors)
    if edge is not None:
        keep &= m.positions < edge.data["position"]
    positions, values = m.positions[keep], m.values[keep].astype(np.float64)
    at = positions
    if rounded is not None:
        at = round_bits(positions, rounded.data["bits"], rounded.data["rounding"] == "toward zero")
        inside = at < MAX_POSITION
        positions, values, at = positions[inside], values[inside], at[inside]
    if not len(positions):
        return None
    try:
        model = fitting.rounded(_model(target, variant, at, cast.data["model"], values.shape[1]), dtype)
    except (ImportError, ValueError, TypeError, KeyError):
        return None
    rows = np.abs(values - model).max(axis=1, initial=0.0)
    line = 4 * cast.data["residual"] + 8 * 2.0 ** -_BITS.get(dtype, 53)
    over = rows > line
    if not over.any():
        return None
    worst = int(np.argmax(rows))
    return _left_over(
        variant,
        float(rows[worst]),
        positions[over],
        int(positions[worst]),
        f"the cast frequencies' error (their model is within {cast.data['residual']:.2g} at its probes)",
        "four times that from sin/cos(p·ω̃)",
        "the cast",
        ""
        if variant.matches or variant.declared
        else " — or the variant measured against is not the code's own: no variant matched the first rows "
        "and its base is fitted to frequencies the cast rounded (declare the code's own with preset= to "
        "tell)",
    )


def last_bits(m: Measurement, dtype: str, variant: Variant, ulp: float | None = None) -> Finding | None:
    """Errors of at most one rounding step (beyond the 1 ulp float64 is allowed): a failing audit says so,
    with their numbers, rather than nothing (:func:`unexplained` speaks of larger ones). ``ulp``: their
    largest error in ulps (default: the bands')."""
    finite = np.isfinite(m.row_errors)
    if ulp is None:
        ulp = max((b.max_ulp for b in m.bands if not b.raised), default=0.0)
    if not finite.any() or not m.row_errors[finite].max() > 0 or (dtype == "float64" and ulp <= 1.0):
        return None
    worst = int(np.argmax(np.where(finite, m.row_errors, -1.0)))
    off = int((m.row_errors[finite] > 0).sum())
    if not variant.pinned:  # the base read from the rows, to within its reading: their last bits, not judged
        read = ", ".join(
            f"{k} {variant.options[k]!r}" for k in ("base", "shift", "scale") if k in variant.options
        )
        return Finding(
            "unpinned",
            f"last bits not judged: the rows are within one rounding step ({ulp:.3g} ulp of {dtype}) of the "
            f"exact values of the {read} read from their phase ({off:,} of {int(finite.sum()):,} sampled "
            "rows off)",
            "a base or scale read from the rows is known only to within that reading, and "
            "one that is off in its last digits moves values by a rounding step as a second rounding does: "
            "whether the code rounds correctly cannot be told from the rows alone",
            {"max_abs": float(m.row_errors[worst]), "max_ulp": ulp, "rows": off},
            fix="declare the variant the code computes (preset={'base': ..., 'scale': ...}, its exact values "
            "as the code writes them) and the audit judges its last bits against it",
        )
    return Finding(
        "rounding",
        f"not correctly rounded: up to {m.row_errors[worst]:.3g} from the correctly rounded values (the "
        f"largest at position {int(m.positions[worst]):,}; up to {ulp:.3g} ulp of {dtype}, not necessarily "
        f"there), in {off:,} of {int(finite.sum()):,} sampled rows",
        "each value is within one rounding step of the exact one (or 2^-p of it where it is near 0, and "
        "2^-52·p·ω more where a float64 angle p·ω is rounded): no larger cause fits; values rounded twice "
        "(computed in a wider type, then cast) or a last-bit error in an angle or its sine do this",
        {"max_abs": float(m.row_errors[worst]), "max_ulp": ulp, "rows": off},
        fix=(
            "float32 or 16-bit code: compute in float64 and round once to the stored type (float64 code then "
            "a cast comes this close and no closer: its own rounding of an angle shows where sin or cos is "
            "near 0); " + _posenc_line(variant) + f"; to judge within {ulp:.3g} ulp rather than "
            f'correctly rounded: tol="{ulp:.3g}ulp" (posenc audit --tol {ulp:.3g}ulp)'
        ),
    )


#: Rows off by more than this (of amplitude 1) already at the first positions, matching no variant and
#: explained by no cause, are "no sinusoid identified": a learned table, or a formula of its own.
NO_SINUSOID = 2.0**-4


#: The findings that can account for rows off by more than :data:`NO_SINUSOID` at the first positions.
_EXPLAIN_FIRST_ROWS = {"layout", "variant", "offset", "amplitude", "frequencies", "angles", "cliff", "nan"}


def _no_sinusoid(variant: Variant, m: Measurement, dtype: str, found: list[Finding]) -> Finding | None:
    """Rows far from every variant already at the first positions, where the findings made are of causes
    that leave the first rows as they are (positions rounded past 2²⁴, storage): "no sinusoid identified"
    beside them, not those causes alone (diffusers' Timesteps with scale=1000 was only
    "positions rounded to float32", its rows off by 2 at position 1)."""
    # a cliff past the rows identification read leaves them as they are (a learned table of 1024 rows)
    kinds = {f.kind for f in found if f.kind != "cliff" or f.data["position"] < PREFIX}
    if kinds & _EXPLAIN_FIRST_ROWS:
        return None
    return unexplained(m, dtype, variant) if variant.prefix_error > NO_SINUSOID else None


def _top_rate(variant: Variant | None, m: Measurement) -> float:
    """The largest frequency of ``variant``'s columns (0 where it cannot be read)."""
    try:
        return 0.0 if variant is None else float(np.abs(_column_rates(variant, m.values.shape[1])).max())
    except (ImportError, KeyError, TypeError, ValueError):
        return 0.0


def unexplained(m: Measurement, dtype: str, variant: Variant | None = None) -> Finding | None:
    """Errors past 1 ulp that no finding explains: said with their numbers rather than guessed at; where
    the first rows already match no variant (by more than :data:`NO_SINUSOID`, none declared), said as
    what it is: no sinusoid identified, not an error of one."""
    finite = np.isfinite(m.row_errors)
    ulp = max((b.max_ulp for b in m.bands if not b.raised), default=0.0)
    # float64 math rounded once is within 1 ulp, and within 2^-p absolute where a value is near 0; its angle
    # p·ω (and ω) rounded to float64 moves a value by up to 2^-52·p·ω more: 2.4e-7 at 2³¹ for ω = 1
    allowed = 2 * 2.0 ** -_BITS.get(dtype, 53) + 2.0**-52 * np.abs(m.positions) * _top_rate(variant, m)
    if not finite.any() or ulp <= 1.0 or (m.row_errors[finite] <= allowed[finite]).all():
        return None
    worst = int(np.argmax(np.where(finite, m.row_errors, -1.0)))
    points = _growth_points(m, 4 * 2.0 ** -_BITS.get(dtype, 53))
    slope = ""
    if len(points) >= 3:
        power = np.polyfit(*np.log(np.array(points, dtype=np.float64).T), 1)[0]
        slope = f"; the largest error per octave grows as position^{power:.2f}"
    data = {"max_abs": float(m.row_errors[worst]), "max_ulp": ulp, "position": int(m.positions[worst])}
    unknown = variant is not None and not (variant.matches or variant.declared)
    if unknown and variant.params is not None and variant.prefix_error > NO_SINUSOID:
        return Finding(
            "unexplained",
            f"no rotary identified: the rows differ from the nearest candidate ({variant.name}) by up to "
            f"{variant.prefix_error:.3g} already at the first positions",
            "identification (posenc.porting.identify_rope) finds no RoPE type, base or scaling that holds "
            "the first rows, and no rounding, cast or layout explains them: a rotary of its own (xPos's "
            "decay ζ^(p/scale_base), an amplitude of its own), a type posenc does not know, or parameters "
            "it does not find in the rows (LongRoPE's own factors) — not the rounding of a known one",
            {**data, "prefix_error": variant.prefix_error, "identified": False},
            fix="if it is a rotary posenc knows, name it (preset={'head_dim': ..., 'base': ..., 'scaling': "
            "{...}}, or audit the module with its config) and the audit measures it against that",
        )
    if unknown and variant.prefix_error > NO_SINUSOID:
        return Finding(
            "unexplained",
            f"no sinusoid identified: the rows differ from the nearest candidate ({variant.name or 'a fit'}) "
            f"by up to {variant.prefix_error:.3g} already at the first positions",
            "identification finds no variant, base, shift, layout or odd-width rule of the sinusoidal "
            "family that holds the first rows, and no rounding, cast, layout or offset explains them: a "
            "learned table, random values, a 2-D grid read as rows (posenc.grids builds those), a formula "
            "of its own, a bug in one (a wrong exponent, a division for a product), or a variant "
            "identification cannot read (a scale that aliases at integer positions: 7, 1000) — not the "
            "rounding of a known one",
            {**data, "prefix_error": variant.prefix_error, "identified": False},
            fix="if it is meant to be sinusoidal, name what it should be (preset=, or base=, layout=, "
            "...) and the audit measures it against that; a learned table has no exact values to compare",
        )
    return Finding(
        "unexplained",
        f"unexplained error: up to {m.row_errors[worst]:.3g} ({ulp:.3g} ulp of {dtype}), the worst at "
        f"position {int(m.positions[worst]):,}",
        "no known cause was confirmed: the checks for rounded positions (8, 11 or 24 bits), cast "
        "frequencies, angles formed in low precision, storage in a coarser type, a layout, variant or "
        "offset, and a length cliff each fail to account for it" + slope,
        data,
        fix="compare the code step by step with the exact formula (posenc.table(..., dtype='float64') rows "
        "are the reference) to find where the error enters; "
        + (_POSENC.format(options="") if variant is None else _posenc_line(variant)),
    )
