"""Which exact encoding a target is measured against: the variant given as a hint, or the one
:func:`posenc.identify` (:func:`posenc.porting.identify_rope` for rotary targets) finds in the target's
first rows — and how it was found.

The reference is ``Variant.exact(positions, dtype)``: posenc's correctly rounded values in the target's
own dtype, for sinusoidal variants ``presets.Preset(**options, padding_idx=...).encode`` (the padding row
zero), for rotary ones ``[A·cos(pθ_i) | A·sin(pθ_i)]`` from :func:`posenc.rope.cos_sin`.

When the first rows match no variant, the columns are matched one by one against the nearest candidates
and the named presets: a table whose columns are a permutation of a variant's is measured against that
variant, and the permutation kept as evidence. A declared variant is checked against what the rows
match (another shift, base or layout) and against the positions next to 0 (an offset of ±1). An offset
is only ever read from a variant the rows match: the nearest of candidates that do not match (a table
of zeros is as far from every position) says nothing about where row 0 is.

What identify finds is built into a Variant by its kind (:func:`_from_match`): a rotary buffer (a
:class:`~posenc.porting.RopeMatch`: a table whose rows are a RoPE cos or sin cache) is measured as one,
never handed to a sinusoidal ``Preset``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .. import layouts, presets, validation
from ..porting.records import Match, RopeMatch
from ..porting.rope_fitting import PRECISIONS, precision_of
from ..porting.verdict import GRIDS, grid_values
from .guard import TargetError
from .targets import Target

__all__ = ["PREFIX", "Variant", "find_variant", "read_base", "read_rope_base", "rebased"]

#: Rows read for identification: positions 0 .. PREFIX - 1.
PREFIX = 256
#: A stored table of at most this many rows whose prefix is a grid's or matches nothing is identified again
#: from all its rows: a 2-D grid's axes show only in whole rows of it (a 20×30 grid's first 256 rows are
#: not a grid), and a grid is as many rows as the table.
GRID_ROWS = 1 << 16
_CORE = ("base", "shift", "scale", "layout", "odd")


@dataclasses.dataclass
class Variant:
    """The exact encoding a target is measured against, and the evidence of how it was found.

    ``name``/``options``: the preset label and core options (sinusoidal), or "rope-<type>" and the
    :class:`~posenc.rope.RopeParameters` fields (rotary, ``params`` set; ``parts``: the columns,
    "cos+sin", "cos" or "sin"); ``how``: one line; ``matches``: whether the first rows reproduce it;
    ``start``: the position row 0 matches best (0, or an offset of a variant the rows match);
    ``found_instead``: for a declared variant that the rows do not match, the one they do (its "name",
    "options", "width" and the "variant" itself); ``permutation``: target column j holds the variant's
    column ``permutation[j]`` (None: in place); ``pinned``: False for a base (or scale) read again from
    the rows' phase that does not reproduce them bit for bit (known only to within the reading);
    ``values``: for a form whose exact values only posenc's own module of it gives (LTX's rotary), a
    callable ``(positions, dtype) -> (k, width)`` float64 of them.

    >>> import posenc
    >>> variant = posenc.audit(posenc.presets.get("whisper").table(512, 16), preset="whisper").variant
    >>> variant.name, variant.options["layout"], variant.how, variant.matches, variant.start
    ('whisper', 'sin_cos', 'given: whisper', True, 0)
    >>> variant.exact(np.array([1]), "float64", 4).round(4).tolist()  # position 1 at d_model 4
    [[0.8415, 0.0001, 0.5403, 1.0]]
    """

    name: str | None
    options: dict[str, Any]
    how: str
    matches: bool
    prefix_error: float
    padding_idx: int | None = None
    params: Any = None
    layout: str = "half"
    parts: str = "cos+sin"
    declared: bool = False
    start: int = 0
    found_instead: dict[str, Any] | None = None
    permutation: np.ndarray | None = None
    values: Any = None
    pinned: bool = True

    def exact(self, positions: np.ndarray, dtype: str, d_model: int) -> np.ndarray:
        """posenc's values at ``positions`` in ``dtype``, float64 ``(k, width)``."""
        if self.values is not None:
            return self.values(positions, dtype)
        if self.params is not None:
            from .. import rope

            cos, sin = rope.cos_sin(positions, self.params, dtype=dtype, layout=self.layout)
            return self.columns(cos, sin).astype(np.float64)
        grid = _grid_of(self.name)
        if grid is not None:  # a named 2-D/3-D grid: its table by posenc.grids, rows by position
            values = grid_values(grid, d_model, self.options, validation.dtype(dtype))
            return values.reshape(-1, d_model)[positions].astype(np.float64)
        preset = presets.Preset("audit", **self.options, padding_idx=self.padding_idx)
        return preset.encode(positions, d_model, dtype=dtype).astype(np.float64)

    def columns(self, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
        """A rotary variant's columns from its ``cos`` and ``sin`` ``(k, d_rot)``: ``[cos | sin]``, or the one
        of them a cache holds (``parts``)."""
        return np.concatenate({"cos": [cos], "sin": [sin]}.get(self.parts, [cos, sin]), axis=-1)


def find_variant(target: Target, preset: Any, dtype: str) -> Variant:
    """The variant ``target`` is measured against: ``preset`` (a preset name, a Preset, a dict of core
    options with an optional ``padding_idx``, or rotary keywords / RopeParameters), else identified."""
    if target.rotary is not None:
        return _rotary(target, preset)
    rows = _prefix(target)
    if preset is not None:
        return _declared(rows, _as_options(preset))
    return _identified(target, rows)


def _prefix(target: Target) -> np.ndarray:
    count = min(target.limit, PREFIX)
    try:
        rows = target.sample(np.arange(count, dtype=np.int64))
    except Exception as error:
        kept = target.rows_before_raise(np.arange(count, dtype=np.int64))  # a table shorter than that
        if kept < 2:
            raise TargetError(
                f"the target fails on positions 0..{count - 1}: {type(error).__name__}: {error}"
            ) from error
        rows = target.sample(np.arange(kept, dtype=np.int64))
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        rows = rows[: int(np.argmin(finite))]
    if len(rows) < 2:
        raise ValueError("the target's first rows are not finite: there is nothing to identify it by")
    return rows


def _tolerance(rows: np.ndarray) -> float:
    """What float32 code of this length, and the grid the values lie on, can be off by."""
    return 1e-5 + 16 * len(rows) * 2.0**-24 + 1.01 * PRECISIONS[precision_of(rows)]


def _as_options(options: Any) -> tuple[str, dict[str, Any], int | None]:
    if isinstance(options, str):
        preset = presets.get(options)
        return options, preset.options, preset.padding_idx
    if isinstance(options, presets.Preset):
        return options.name, options.options, options.padding_idx
    if isinstance(options, dict):
        unknown = set(options) - {*_CORE, "padding_idx"}
        if unknown:
            raise ValueError(
                f"preset has unknown keys {sorted(unknown)}; give core options ({', '.join(_CORE)}, "
                "padding_idx) or a preset name such as 'paper'"
            )
        core = {k: v for k, v in options.items() if k in _CORE}
        merged = {**presets.get("paper").options, "odd": "zero", **core}
        return "given options", merged, options.get("padding_idx")
    raise TypeError(
        f"preset must be a preset name, a posenc.presets.Preset or a dict of core options; got "
        f"{type(options).__name__}"
    )


def _error(rows: np.ndarray, options: dict[str, Any], padding: int | None, start: int = 0) -> float:
    try:
        preset = presets.Preset("audit", **options, padding_idx=padding)
        exact = preset.encode(np.arange(start, start + len(rows)), rows.shape[1], dtype="float64")
    except (ValueError, TypeError):
        return float("inf")
    return float(np.max(np.abs(exact - rows)))


def _from_match(match: Match, how: str, rows: np.ndarray) -> Variant:
    """The Variant of what identify found, built by its kind: a RoPE cache's (:class:`RopeMatch`: its
    parameters, layout and the part the columns hold) or a sinusoidal variant's (its options, padding row
    and the position of row 0, kept only when the rows match it)."""
    if isinstance(match, RopeMatch) and match.parameters is not None:
        parts = {"cos cache": "cos", "sin cache": "sin"}.get(match.source, "cos+sin")
        layout = match.layout or "half"
        return _rope_variant(match.parameters, how, match.matches, parts, layout, match.max_error)
    start = match.start if match.matches else 0  # the nearest non-match's row 0 is no evidence of an offset
    variant = Variant(
        match.name, dict(match.options), how, match.matches, match.max_error, match.padding_idx, start=start
    )
    if not match.matches and match.start:  # measured at the rows' own positions, as it will be
        variant.prefix_error = _error(rows, match.options, match.padding_idx)
    return variant


def _declared(rows: np.ndarray, declared: tuple) -> Variant:
    name, options, padding = declared
    error, limit = _error(rows, options, padding), _tolerance(rows)
    variant = Variant(name, options, f"given: {name}", error <= limit, error, padding, declared=True)
    if error <= limit:
        return variant
    for start in (1, -1):
        if _error(rows, options, padding, start) <= limit:
            variant.start = start
            return variant
    from ..porting import identify

    try:
        best = identify(rows, tolerance=limit, candidates=1)[0]
    except ValueError:
        best = None
    if best is None or not best.matches:  # no variant posenc knows: the declared one's columns reordered?
        variant.permutation = _permutation(rows, options, padding, limit)
        return variant
    if best.matches:
        held = _from_match(best, "identified instead", rows)
        held.start = 0  # measured at the rows' own positions, as the declared variant is
        variant.found_instead = {
            "name": best.name,
            "options": best.options,
            "width": rows.shape[1],
            "variant": held,
        }
    return variant


def _identified(target: Target, rows: np.ndarray) -> Variant:
    from ..porting import identify

    limit = _tolerance(rows)
    where = f"positions 0..{len(rows) - 1}"
    try:
        matches = identify(rows, tolerance=limit, candidates=3)
        grid_or_none = not matches[0].matches or _grid_of(matches[0].name) is not None
        if target.kind == "table" and len(rows) < target.limit <= GRID_ROWS and grid_or_none:
            whole = target.sample(np.arange(target.limit, dtype=np.int64))
            if np.isfinite(whole).all():
                rows, where = whole, f"its {target.limit} rows"
                limit = _tolerance(rows)
                matches = identify(rows, tolerance=limit, candidates=3)
    except ValueError as error:
        raise ValueError(f"the target's rows at {where} are not an encoding table: {error}") from None
    covering = [m for m in matches if _covers(m, target.limit, rows.shape[1])]
    if not covering:  # a grid of fewer rows than the table (a grid repeated, a clamped one): not one grid
        raise ValueError(
            f"the target's rows at {where} are those of a {matches[0].name} grid, but it has "
            f"{target.limit} rows, more than that grid holds: not an encoding table posenc knows"
        )
    matches = covering
    best = matches[0]
    variant = _from_match(best, f"identified by posenc.identify from {where}", rows)
    if best.matches and variant.start:  # rows shifted: off at their own positions
        variant.matches, variant.prefix_error = False, _error(rows, best.options, best.padding_idx)
    if best.matches:
        return variant
    pool = [(m.name, m.options, m.padding_idx) for m in matches if not isinstance(m, RopeMatch)]
    pool += [(label, p.options, p.padding_idx) for label, p in presets.variants()]
    orders = [(label, o, padding, _permutation(rows, o, padding, limit)) for label, o, padding in pool]
    orders = [item for item in orders if item[3] is not None]
    if orders:  # the variant whose own order is nearest: the fewest columns moved
        label, options, padding, order = min(  # sin and cos swapped first, else the fewest columns moved
            orders,
            key=lambda item: (not layouts.swaps_pairs(item[3], item[1].get("layout")), _moved(item[3])),
        )
        how = f"identified by matching the columns of {where} one by one"
        error = _error(rows, options, padding)
        return Variant(label, dict(options), how, False, error, padding, permutation=order)
    named = _nearest_named(rows, best)
    if named is not None:
        return named
    variant.how += (
        " (nothing matches: measured against the nearest candidate — the plainest within 1.25 times the "
        "nearest one's error)"
    )
    return variant


def _nearest_named(rows: np.ndarray, best: Match) -> Variant | None:
    """When nothing matches and the nearest candidate is a fit (options no code chose), the nearest named
    variant, if within twice its error of the rows: a fit that matches nothing is no evidence of its
    options (float16 frequencies read as base 9992.6, scale 0.99976), and the findings are read against
    the variant measured."""
    if best.name is not None or isinstance(best, RopeMatch) or _grid_of(best.name) is not None:
        return None
    if best.cast is not None:  # the fit's frequencies, rounded to a 16-bit type, make the rows: its own
        return None
    fit = _error_ratios(rows, best.options, best.padding_idx)
    if fit is not None and float(np.abs(fit / np.median(fit) - 1).max()) <= 1e-3:
        return None  # the fit times one constant: an amplitude, which the findings name against the fit
    # compared on the first rows: over a long table every error saturates at 2 (a whole table of frequencies
    # rounded to bfloat16 is 2 from its own base 10⁵ and from base 10⁴ alike)
    first = rows[:PREFIX]
    fitted = _error(first, best.options, best.padding_idx, best.start)
    if not fitted < 1.0:
        return None
    nearest = None
    for label, preset in presets.variants():
        error = _error(first, preset.options, preset.padding_idx)
        if error <= 2 * fitted and (nearest is None or error < nearest[0]):
            nearest = (error, label, preset)
    if nearest is None:
        return None
    error, label, preset = nearest
    how = (
        f"identified by posenc.identify from positions 0..{len(rows) - 1} (nothing matches: measured "
        f"against the nearest named variant, {error:.3g} from the first {len(first)} rows; the nearest fit, "
        f"{dict(best.options)}, is {fitted:.3g} from them)"
    )
    return Variant(label, dict(preset.options), how, False, error, preset.padding_idx)


def _error_ratios(rows: np.ndarray, options: dict[str, Any], padding: int | None) -> np.ndarray | None:
    """The ratios of ``rows`` to the variant's exact values where those are large (|v| > 0.25), or None."""
    try:
        preset = presets.Preset("audit", **options, padding_idx=padding)
        exact = preset.encode(np.arange(len(rows)), rows.shape[1], dtype="float64")
    except (ValueError, TypeError):
        return None
    big = np.abs(exact) > 0.25
    return rows[big] / exact[big] if big.any() else None


def rebased(variant: Variant, positions: np.ndarray, values: np.ndarray, dtype: str) -> Variant | None:
    """An identified (not declared) variant with its base read again (:func:`read_base`; a rotary's:
    :func:`read_rope_base`), else None."""
    if variant.declared:
        return None
    reader = read_base if variant.params is None else read_rope_base
    moved = reader(variant, positions, values, dtype)
    if moved is not None:
        moved.how = f"{variant.how}, {moved.how}"
    return moved


def read_base(variant: Variant, positions: np.ndarray, values: np.ndarray, dtype: str) -> Variant | None:
    """A 1-D variant the first rows match with its base read again from the rows at the sampled
    ``positions`` (their ``values``), when that base reproduces them at least 4 times closer and to within
    a few roundings of ``dtype``; else None. Its ``how`` says how it was read.

    A base read from positions 0 .. 255 is uncertain by parts in 10⁶, and identify prefers the plainest
    base within that (10001 over 10001.003): far out, a base that is off shows as an error ∝ position,
    which no rounding explains. Each frequency's phase error atan2(sin, cos) − p·ω_i is fitted as Δω_i·p
    where it is small; with ω_i = scale·base^(−e_i), a base off by δ in ln base moves them by
    Δω_i / ω_i = −e_i·δ. The bases tried, for shift 0 and 1 (base b, shift s and base b^((n−s')/(n−s)),
    shift s' are one variant): the round numbers and the shortest decimal within the reading's
    uncertainty, and the reading; the plainest of those whose values are nearest the rows (by their mean
    error: a variant that is off by 10⁻¹³ in ln base already moves a float32 value across a rounding
    boundary in most rows) wins, if its largest error is within a quarter of the variant's and within 8
    roundings of ``dtype`` (a float32 target's own rounding, of its frequencies or its angles, is no
    evidence of another base)."""
    from .. import core
    from ..porting.fitting import base_candidates, digits, shortest

    if (
        variant.params is not None
        or variant.values is not None
        or variant.permutation is not None
        or variant.start
        or not variant.matches
        or _grid_of(variant.name) is not None
    ):
        return None
    options, width = variant.options, values.shape[1]
    finite = np.isfinite(values).all(axis=1) & (positions > 0)
    if finite.sum() < 8:
        return None
    at, rows = positions[finite], values[finite].astype(np.float64)
    try:
        omega = core.frequencies(width, **{k: options[k] for k in ("base", "shift", "scale", "odd")})
        sines, cosines = layouts.pair_columns(options["layout"], len(omega))
        error = np.abs(variant.exact(at, dtype, width) - rows)
        _, twice_half = validation.plan(width, options["odd"])
    except (KeyError, TypeError, ValueError):
        return None
    before = float(error.max())
    if sines.max(initial=0) >= width or cosines.max(initial=0) >= width or before == 0.0:
        return None
    p = at.astype(np.float64)
    phase = np.angle(np.exp(1j * (np.arctan2(rows[:, sines], rows[:, cosines]) - np.outer(p, omega))))
    exponent = np.log(float(options["scale"]) / omega) / np.log(float(options["base"]))  # e_i
    drift, weight, rel, exps, weights = [], [], [], [], []
    for i, w in enumerate(omega):
        use = np.abs(phase[:, i]) < 0.5
        if use.sum() >= 8 and w > 0:  # its relative drift Δω_i / ω_i = σ − e_i·δ (σ: of ln scale)
            rel.append(float(np.sum(phase[use, i] * p[use]) / np.sum(p[use] ** 2)) / w)
            exps.append(float(exponent[i]))
            weights.append(w**2 * float(np.sum(p[use] ** 2)))
            if exponent[i] > 0:
                drift.append(rel[-1] / exponent[i])
                weight.append(exponent[i] ** 2 * weights[-1])
    if len(drift) < 2:
        return None
    unit = PRECISIONS.get(dtype, 2.0**-24)  # the rows' own rounding
    spread = unit / float(np.sqrt(np.sum(weight)))  # of ln base
    ln_base = float(np.log(float(options["base"]))) - float(np.average(drift, weights=weight))
    # the base and the scale read together (a scale identified from 256 rows is off as a base is: 2π read as
    # 6.2831853025): the weighted line of the relative drifts against the exponents
    e, r, w8 = np.array(exps), np.array(rel), np.array(weights)
    centred = e - np.average(e, weights=w8)
    readings = [(ln_base, float(options["scale"]), 0.0)]
    if float(np.sum(w8 * centred**2)) > 0:
        slope = float(np.sum(w8 * centred * (r - np.average(r, weights=w8))) / np.sum(w8 * centred**2))
        sigma = float(np.average(r, weights=w8)) - slope * float(np.average(e, weights=w8))
        scale_spread = unit / float(np.sqrt(np.sum(w8)))
        readings.append(
            (
                float(np.log(float(options["base"]))) + slope,
                float(float(options["scale"]) * np.exp(sigma)),
                scale_spread,
            )
        )
    tried: list[Variant] = []
    for ln_read, scale_read, scale_spread in readings:
        scales = (
            [scale_read]
            if not scale_spread
            else [shortest(scale_read, k * scale_spread) for k in (6.0, 1.0, 0.1)] + [scale_read]
        )
        for shift in dict.fromkeys((float(options["shift"]), 0.0, 1.0)):
            if twice_half / 2 - shift <= 0:
                continue
            scaled = ln_read * (twice_half / 2 - shift) / (twice_half / 2 - float(options["shift"]))
            fitted = float(np.exp(scaled))
            ladder = [shortest(fitted, k * spread) for k in (6.0, 1.0, 0.1)]
            for base in dict.fromkeys([*base_candidates(fitted, spread), *ladder, fitted]):
                for scale in dict.fromkeys(scales):
                    same = (base, shift, scale) == (options["base"], options["shift"], options["scale"])
                    if np.isfinite(base) and base > 1.0 and scale > 0 and not same:
                        moved = {**options, "base": base, "shift": shift, "scale": scale}
                        tried.append(dataclasses.replace(variant, name=None, options=moved))
    scored, bound = [], min(0.25 * before, 8 * unit)
    far = np.argsort(at)[-64:]  # where a base that is off shows most: tried there first, cheaply
    for moved in tried:
        try:
            if float(np.abs(moved.exact(at[far], dtype, width) - rows[far]).max()) > bound:
                continue
            off = np.abs(moved.exact(at, dtype, width) - rows)
        except (TypeError, ValueError):
            continue
        # another base explains the rows only to within their own rounding: frequencies rounded to
        # float32, or float32 angles, are no base, however much nearer a base makes them
        if float(off.max()) <= bound:
            plain = digits(moved.options["base"]) + digits(moved.options["scale"])
            scored.append((float(off.mean()), plain, len(scored), moved))
    best = _plainest(scored)
    if best is None:
        return None
    best.how = (
        f"its base read again from the phase of {len(at):,} sampled positions up to "
        f"{int(at.max()):,}: base {best.options['base']!r}, shift {best.options['shift']!r}"
        + (f", scale {best.options['scale']!r}" if best.options["scale"] != options["scale"] else "")
        + f" (base {options['base']!r}, shift {options['shift']!r}"
        + (f", scale {options['scale']!r}" if best.options["scale"] != options["scale"] else "")
        + f" leaves an error of {before:.3g} there, growing ∝ position)"
    )
    best.pinned = _pinned(best, at, rows, dtype)
    return best


def read_rope_base(variant: Variant, positions: np.ndarray, values: np.ndarray, dtype: str) -> Variant | None:
    """A plain rotary (a rope type of no scaling fields, cos and sin) the first rows match, with its base
    read again from the rows at the sampled ``positions``, as :func:`read_base` reads a sinusoid's:
    identify_rope fits the base on positions 0 .. 255 to parts in 10⁶ (an NTK-aware base, 10000·8^(64/62)
    = 85550.37588568537, read as 85550.3747, is off by 0.9 at 2³¹). Each frequency's phase
    atan2(sin, cos) − p·θ_i, θ_i = base^(−e_i), drifts by −p·θ_i·e_i·δ for a base off by δ in ln base: δ is
    fitted on the positions below 4^k, k growing, each step from the last (the phase stays unwrapped); the
    bases tried and kept as :func:`read_base` does."""
    from .. import rope
    from ..porting.fitting import base_candidates, digits, shortest
    from ..rope.kinds import named

    params = variant.params
    if (
        params is None
        or named(params.rope_type).fields  # a scaling of its own: θ_i is more than base^(−e_i)
        or params.mrope_section
        or variant.parts != "cos+sin"
        or variant.values is not None
        or not variant.matches
    ):
        return None

    theta = np.asarray(rope.inv_freq(params), dtype=np.float64)
    n, width = len(theta), values.shape[1]
    finite = np.isfinite(values).all(axis=1) & (positions > 0)
    if width != 4 * n or finite.sum() < 8 or not (theta > 0).all():
        return None
    at, rows = positions[finite], values[finite].astype(np.float64)
    before = float(np.abs(variant.exact(at, dtype, width) - rows).max())
    if before == 0.0:
        return None
    columns = np.arange(n) if variant.layout == "half" else 2 * np.arange(n)
    measured = np.arctan2(rows[:, 2 * n + columns], rows[:, columns])
    ln_base = float(np.log(params.base))
    exponent = -np.log(theta) / ln_base
    p, delta, weight = at.astype(np.float64), 0.0, 0.0
    for limit in 4.0 ** np.arange(5, 17):
        use = p < limit
        rate = np.exp(-exponent * (ln_base + delta))
        phase = np.angle(np.exp(1j * (measured[use] - np.outer(p[use], rate))))
        slope = -np.outer(p[use], rate * exponent)  # d phase / d δ
        near = np.abs(phase) < 0.5
        weight = float(np.sum(slope[near] ** 2))
        if weight > 0:
            delta += float(np.sum(slope[near] * phase[near]) / weight)
        if limit > p.max():
            break
    unit = PRECISIONS.get(dtype, 2.0**-24)
    spread = unit / float(np.sqrt(weight)) if weight > 0 else 0.0
    fitted = float(np.exp(ln_base + delta))
    ladder = [shortest(fitted, k * spread) for k in (6.0, 1.0, 0.1)]
    scored, bound = [], min(0.25 * before, 8 * unit)
    for base in dict.fromkeys([*base_candidates(fitted, spread), *ladder, fitted]):
        if not (np.isfinite(base) and base > 1.0) or base == params.base:
            continue
        moved = dataclasses.replace(
            variant,
            params=dataclasses.replace(params, base=base),
            options={**variant.options, "base": base},
        )
        try:
            off = np.abs(moved.exact(at, dtype, width) - rows)
        except (TypeError, ValueError):
            continue
        if float(off.max()) <= bound:
            scored.append((float(off.mean()), digits(base), len(scored), moved))
    best = _plainest(scored)
    if best is None:
        return None
    best.how = (
        f"its base read again from the phase of {len(at):,} sampled positions up to {int(at.max()):,}: "
        f"base {best.options['base']!r} (base {params.base!r} leaves an error of {before:.3g} there, "
        "growing ∝ position)"
    )
    best.pinned = _pinned(best, at, rows, dtype)
    return best


def _pinned(variant: Variant, at: np.ndarray, rows: np.ndarray, dtype: str) -> bool:
    """Whether a reading reproduces the rows it was read from (every value posenc's): else it pins the base
    only to within the reading's uncertainty, and a last-bit difference may be the reading's, not the
    code's."""
    return bool(np.array_equal(variant.exact(at, dtype, rows.shape[1]), rows))


def _plainest(scored: list[tuple[float, int, int, Variant]]) -> Variant | None:
    """Of the readings (mean error, digits, order, variant) that explain the rows, one that reproduces
    them (every value posenc's: error 0), the plainest such; else the plainest of those whose mean error is
    within 1.1 times the nearest one's (a plain base over a fitted one, where both are within the rows' own
    rounding)."""
    if not scored:
        return None
    exact = [item for item in scored if item[0] == 0.0]
    nearest = min(item[0] for item in scored)
    pool = exact or [item for item in scored if item[0] <= 1.1 * nearest]
    return min(pool, key=lambda item: (item[1], item[0]))[3]


def _grid_of(name: str | None) -> str | None:
    """The named 2-D/3-D grid among a variant's names (``"mae-2d = diffusers-2d"``), else None."""
    return next((n for n in (name or "").split(" = ") if n in GRIDS), None)


def _covers(match: Match, count: int, width: int) -> bool:
    """Whether ``match`` has values at positions 0 .. ``count`` − 1: a 1-D variant or a rotary does, a
    grid only where it has that many rows."""
    if isinstance(match, RopeMatch) or _grid_of(match.name) is None:
        return True
    try:
        values = grid_values(_grid_of(match.name), width, match.options, np.float32)
    except (ValueError, TypeError):
        return False
    return values.size // width >= count


def _moved(order: np.ndarray) -> int:
    return int((order != np.arange(len(order))).sum())


#: Pairs (target column, exact column near it in the sorting row) at most, per column on average and, times
#: the rows, in all: a table whose rows tell its columns apart has a few to a few dozen per column (a
#: float16 table's low frequencies look alike); zeros have half the width per column (no order).
_PAIRS_PER_COLUMN, _PAIR_BUDGET = 64, 1 << 26


def _permutation(rows: np.ndarray, options: dict, padding: int | None, limit: float) -> np.ndarray | None:
    """The column order that makes ``rows`` the variant's (each target column -> the first unused exact
    column it equals within ``limit``), or None when there is none or the order is the variant's own.

    The exact columns near each target column are found by sorting them on one row — of the last, and
    those at 3/4, 1/2 and 1/3 of the rows, the one with the fewest near pairs — and confirmed on every row:
    O(d log d) plus the near pairs, where comparing every column with every other was O(d²) (a 2 MiB upload
    of zeros, 262144 columns, held the audit for hours). Where the near pairs pass
    :data:`_PAIRS_PER_COLUMN` a column, or times the rows :data:`_PAIR_BUDGET`, the rows cannot tell the
    columns apart, and there is no order."""
    try:
        preset = presets.Preset("audit", **options, padding_idx=padding)
        exact = preset.encode(np.arange(len(rows)), rows.shape[1], dtype="float64")
    except (ValueError, TypeError):
        return None
    width, count = rows.shape[1], len(rows)
    best = None
    for r in dict.fromkeys((count - 1, 3 * count // 4, count // 2, count // 3)):
        by_row = np.argsort(exact[r], kind="stable")
        ordered = exact[r][by_row]
        first = np.searchsorted(ordered, rows[r] - limit, side="left")
        past = np.searchsorted(ordered, rows[r] + limit, side="right")
        pairs = int((past - first).sum())
        if best is None or pairs < best[0]:
            best = (pairs, by_row, first, past)
    pairs, by_row, first, past = best
    if pairs > _PAIRS_PER_COLUMN * width or pairs * count > _PAIR_BUDGET or np.any(past == first):
        return None
    # each target column's near exact columns (a flat list of pairs), confirmed on every row in blocks
    column = np.repeat(np.arange(width), past - first)
    near = by_row[
        np.arange(pairs)
        - np.repeat(np.cumsum(past - first) - (past - first), past - first)
        + np.repeat(first, past - first)
    ]
    equal = np.empty(pairs, bool)
    step = max(1, _PAIR_BUDGET // (16 * max(count, 1)))
    for lo in range(0, pairs, step):
        c, e = column[lo : lo + step], near[lo : lo + step]
        equal[lo : lo + step] = np.abs(rows[:, c] - exact[:, e]).max(axis=0, initial=0.0) <= limit
    fits: list[list[int]] = [[] for _ in range(width)]
    for j, k in zip(column[equal].tolist(), near[equal].tolist(), strict=True):
        fits[j].append(k)
    used, order = set(), np.empty(width, np.int64)
    for j in range(width):
        free = sorted(k for k in fits[j] if k not in used)
        if not free:
            return None
        order[j] = j if j in free else free[0]
        used.add(int(order[j]))
    if np.abs(exact[:, order] - exact).max() <= limit:
        return None  # equal columns swapped: the variant's own table
    return order


def _rotary(target: Target, options: Any) -> Variant:
    from .. import rope
    from ..porting import identify_rope

    info = target.rotary or {}
    parts = info.get("parts", "cos+sin")
    if options is not None:  # in the layout given: "half" (Hugging Face's rotate_half, the default) or
        # "interleaved" (Meta's reference code, GPT-J, torchtune, Mistral, MLX: pairs side by side)
        _check_rotary_preset(options)
        given = None if isinstance(options, rope.RopeParameters) else dict(options)
        layout = (given or {}).pop("layout", "half")
        if layout not in ("half", "interleaved"):
            raise ValueError(f"preset: a rotary's layout is 'half' or 'interleaved'; got {layout!r}")
        params = options if given is None else rope.config(**given)
        variant = _rope_variant(params, "given", True, parts, layout)
        variant.declared = True
        off = _prefix_off(target, variant)
        if off is not None:  # its first rows are not the declared rotary's: which one they are
            variant.matches, variant.prefix_error = False, off
            held = _rotary(target, None)
            if not _same_rotary(held.params, params) and held.matches and _prefix_off(target, held) is None:
                variant.found_instead = {
                    "name": held.name,
                    "options": held.options,
                    "width": target.width,
                    "variant": held,
                    "evidence": f"{held.how}; the declared rotary is off by {off:.3g} on its first rows",
                }
        return variant
    if info.get("params") is not None:  # the module's own config: judged in the layout it emits
        variant = _rope_variant(info["params"], "read from the module's config", True, parts, "half")
        if _emits_interleaved(target, variant):
            variant.layout = "interleaved"
            variant.how += "; its cos/sin in interleaved pairs (`rotate_every_two`, as its values show)"
        return variant
    theta = info.get("inv_freq")
    instead = ""
    if theta is not None:
        match = identify_rope(theta)
        how = f"identified by posenc.porting.identify_rope from its inv_freq ({match.evidence})"
        how += "" if match.matches else " (nothing matches: measured against the nearest candidate)"
        variant = _rope_variant(match.parameters, how, match.matches, parts, "half", match.max_error)
        off = None if info.get("values_of_theta") else _prefix_off(target, variant)
        if off is None:
            if not info.get("values_of_theta") and _emits_interleaved(target, variant):  # GPT-J's design
                variant.layout = "interleaved"
                variant.how += "; its cos/sin in interleaved pairs (`rotate_every_two`, as its values show)"
            return variant
        # its forward scales what its inv_freq gives (transformers' linear scaling before 4.36: t / factor)
        instead = f" (its inv_freq is {variant.name}'s, {off:.3g} from its rows, which hold another)"
    rows = _prefix(target)
    half = rows.shape[1] // 2
    halves = {"cos": rows[:, :half], "sin": rows[:, half:]} if parts == "cos+sin" else {parts: rows}
    positions = np.arange(len(rows), dtype=np.int64)
    tried, refused = [], None
    for part, values in halves.items():  # fitted from each half (a slow frequency's cos is 1 in a 16-bit
        try:  # cache: its sin still tells it), judged on both
            match = identify_rope(values)
        except ValueError as error:
            refused = error
            continue
        how = f"identified by posenc.porting.identify_rope from the {part} of positions 0..{len(rows) - 1}"
        how += instead
        layout = match.layout or "half"
        variant = _rope_variant(match.parameters, how, match.matches, parts, layout, match.max_error)
        exact = variant.exact(positions, "float64", 0)
        error = float(np.abs(exact - rows).max()) if exact.shape == rows.shape else np.inf
        tried.append((not match.matches, error, len(tried), variant))
    if not tried:
        raise refused if refused is not None else ValueError("the target's rows are not a rotary cache")
    variant = min(tried)[3]
    if not variant.matches:
        variant.how += " (nothing matches: measured against the nearest candidate)"
    return variant


def _check_rotary_preset(options: Any) -> None:
    """A rotary target's ``preset``: a RopeParameters, or a dict of :func:`posenc.rope.config`'s keywords
    and ``layout``; anything else is refused naming ``preset`` and what it takes."""
    import inspect

    from .. import rope

    if isinstance(options, rope.RopeParameters):
        return
    keywords = [k for k in inspect.signature(rope.config).parameters if k != "cfg"] + ["layout"]
    takes = f"rotary keywords of posenc.rope.config ({', '.join(keywords)}) or a posenc.rope.RopeParameters"
    if isinstance(options, str | presets.Preset):
        raise ValueError(
            f"preset={options if isinstance(options, str) else options.name!r} names a sinusoidal variant, "
            f"but the target is a rotary: give {takes}"
        )
    if not isinstance(options, dict):
        raise TypeError(f"preset for a rotary target must be a dict of {takes}; got {type(options).__name__}")
    unknown = sorted(set(options) - set(keywords))
    if unknown:
        raise ValueError(
            f"preset has unknown keys {unknown} for a rotary target; give {takes} (a scaled type: "
            "scaling={'rope_type': 'linear', 'factor': 4.0})"
        )


def _same_rotary(one: Any, other: Any) -> bool:
    """Whether two rotaries compute the same cos/sin: their frequencies and attention scaling (fields such
    as ``max_position_embeddings`` that a type does not use, or the layout, do not count)."""
    from .. import rope

    if one is None or other is None:
        return one is other
    try:
        return bool(
            np.array_equal(rope.inv_freq(one), rope.inv_freq(other))
            and rope.attention_scaling(one) == rope.attention_scaling(other)
            and one.kind == other.kind
        )
    except (ValueError, TypeError):
        return one == other


def _prefix_off(target: Target, variant: Variant) -> float | None:
    """How far a rotary target's first rows are from ``variant`` (in either layout: halves or interleaved
    pairs, which a layout finding tells apart) when farther than float32 code of their length can be
    (:func:`_tolerance`), else None (they hold it, or cannot be read)."""
    try:
        rows = _prefix(target)
    except ValueError:
        return None
    positions = np.arange(len(rows), dtype=np.int64)
    offs = []
    for layout in ("half", "interleaved"):
        exact = dataclasses.replace(variant, layout=layout).exact(positions, "float64", 0)
        if exact.shape == rows.shape:
            offs.append(float(np.abs(exact - rows).max()))
    if not offs:
        return None
    off = min(offs)
    return off if off > _tolerance(rows) else None


def _emits_interleaved(target: Target, variant: Variant) -> bool:
    """Whether a rotary module's first rows are its config's cos/sin in interleaved pairs ([c0, c0, c1, c1,
    ...]: Cohere, GLM, GPT-J) rather than halves: nearer that layout's exact values, and within 2⁻⁴ of them.
    A layout a model's own module emits is its design, not a defect (its attention rotates to match)."""
    try:
        rows = _prefix(target)
    except ValueError:
        return False
    positions = np.arange(len(rows), dtype=np.int64)
    errors = {}
    for layout in ("half", "interleaved"):
        exact = dataclasses.replace(variant, layout=layout).exact(positions, "float64", 0)
        errors[layout] = float(np.abs(exact - rows).max()) if exact.shape == rows.shape else np.inf
    return errors["interleaved"] < min(errors["half"], 2.0**-4)


def _rope_variant(
    params: Any, how: str, matches: bool, parts: str, layout: str, error: float = 0.0
) -> Variant:
    options = {"head_dim": params.head_dim, "base": params.base}
    if params.kind.fields:  # a scaled type
        options["rope_type"] = params.rope_type
    return Variant(
        f"rope-{params.rope_type}", options, how, matches, error, params=params, layout=layout, parts=parts
    )
