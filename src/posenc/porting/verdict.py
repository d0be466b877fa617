"""One answer from identify's matches: the best variant, what it cannot be told apart from, and code to paste.

:func:`identify` ranks candidates; a porting user wants one verdict (:func:`verdict`): the best match with its
evidence; "also consistent with" only the variants that give the same table at the table's precision (the
names joined by " = ", and other matches within one float32 ulp of the best error) and whose library's own
float32 code can be off by what the table shows (:func:`posenc.presets.float32_deviation`: a float32
table with the PyTorch tutorial's float32 noise is not DistilBERT's table, which is rounded once); a fitted
generic base only when no named variant matches; the odd-width rule the table shows (none for an even
width); and the lines to paste: ``presets.get(...)`` and the torch and JAX module constructors, and for a
table consistent with diffusers' timestep embedding, ``posenc.torch.Timesteps(...)`` (the drop-in for
diffusers' ``Timesteps``, which maps timesteps to embeddings where ``SinusoidalPositionalEncoding`` adds to an
input).

>>> from posenc import presets
>>> answer = verdict(identify(presets.get("fairseq", padding_idx=1).table(130, 32)), 32, "float32", 130)
>>> answer.label, answer.odd, answer.float32_deviation
('fairseq(padding_idx=1)', None, (5.99e-05, 0.000491, 0.00798))
>>> answer.paste[0]
'posenc.presets.get("fairseq", padding_idx=1).table(130, 32)'
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import grids, presets
from .matching import identify  # noqa: F401 - identify: for the example
from .records import Match, RopeMatch

__all__ = ["Verdict", "answer_lines", "expected_deviation", "verdict"]

#: The function of :mod:`posenc.grids` that builds each named grid, and the keyword d_model goes to ("": the
#: first argument, by position).
GRIDS = {
    "mae-2d": ("diffusers_2d", ""),  # named together with diffusers-2d, whose options identify gives
    "diffusers-2d": ("diffusers_2d", ""),
    "diffusers-3d": ("diffusers_3d", ""),
    "timm-2d": ("timm_2d", "dim"),
    "positional-encodings-2d": ("positional_encodings_nd", "channels"),
    "positional-encodings-3d": ("positional_encodings_nd", "channels"),
    "detr-2d": ("detr_grid", "d_model"),  # measured by the model audit (a DETR sine's rows); not identified
    "dinov3-rope": ("dinov3_rope", "dim"),  # measured by the model audit (its rows: [sin | cos], 2·dim)
    "timm-rope": ("timm_rope", "dim"),  # the same (EVA-02's, Perception Encoder's axial rotary)
}
#: The grids whose tables have twice as many columns as the width they are built with (:func:`grid_width`).
_DOUBLE_WIDTH = ("dinov3-rope", "timm-rope")


def grid_width(name: str, width: int) -> tuple[tuple[int, ...], dict[str, int]]:
    """The width argument of the named grid ``name``'s function (:data:`GRIDS`) for a table of ``width``
    columns: (positional, keyword) arguments (DINOv3's rotary takes half: its rows are [sin | cos] of ``dim``
    columns each).

    >>> grid_width("timm-2d", 8), grid_width("diffusers-2d", 8), grid_width("dinov3-rope", 8)
    (((), {'dim': 8}), ((8,), {}), ((), {'dim': 4}))
    """
    keyword = GRIDS[name][1]
    width = width // 2 if name in _DOUBLE_WIDTH else width
    return ((), {keyword: width}) if keyword else ((width,), {})


def grid_values(name: str, width: int, options: dict[str, Any], dtype: Any) -> np.ndarray:
    """The table of the named grid ``name`` (:data:`GRIDS`) of ``width`` columns with ``options``, in
    ``dtype``, by its function of :mod:`posenc.grids`.

    >>> grid_values("timm-2d", 8, {"feat_shape": (2, 3)}, "float32").shape
    (6, 8)
    """
    leading, by_name = grid_width(name, width)
    return getattr(grids, GRIDS[name][0])(*leading, **by_name, **options, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a stored table is, in one answer (see :func:`verdict`).

    Attributes:
        best: the best match, or None when no candidate matches (``nearest`` then lists the closest).
        label: the variant named (a preset label such as ``fairseq(padding_idx=1)``, a grid, or None for
            the generic options).
        also: the other variants the table is equally consistent with.
        ruled_out: labels that give the same exact values, whose library's float32 code cannot be off by
            what the table is off by, each with the reason.
        odd: the odd-width rule the table shows: None for an even width (every rule gives the same table).
        float32_deviation: the label's library float32 error at 1k / 8k / 131k positions, or None.
        paste: lines that rebuild the table or the module: ``presets.get(...)``, torch, JAX (and
            ``posenc.torch.Timesteps(...)`` for a diffusers timestep table).
        nearest: the closest candidates when nothing matches.

    >>> import posenc
    >>> answer = verdict(identify(posenc.table(100, 16)), 16, "float32", 100)
    >>> print(answer.lines()[0])
    1. matches: paper (base=10000.0, shift=0.0, scale=1.0, layout='interleaved', odd: any rule (even width));
    max error 2.97e-08
    >>> answer.also, answer.paste[0]
    (('pytorch-tutorial', 'keras-hub', 'distilbert', 'positional-encodings'),
     'posenc.presets.get("paper").table(100, 16)')
    """

    best: Match | None
    label: str | None = None
    also: tuple[str, ...] = ()
    ruled_out: tuple[str, ...] = ()
    odd: str | None = None
    float32_deviation: tuple[float, float, float] | None = None
    paste: tuple[str, ...] = ()
    nearest: tuple[Match, ...] = ()

    def lines(self) -> list[str]:
        """The answer as text lines (no indentation), the first one the verdict."""
        if self.best is None:
            return [f"{rank}. {m.describe()}" for rank, m in enumerate(self.nearest, 1)]
        best = self.best
        options = {k: v for k, v in best.options.items() if k != "odd"}
        shown = ", ".join(f"{k}={v!r}" for k, v in options.items())
        if "odd" in best.options:
            shown += f", odd={self.odd!r}" if self.odd else ", odd: any rule (even width)"
        named_padding = best.padding_idx is None or "padding_idx" in (self.label or "")
        where = "" if named_padding else f", padding_idx={best.padding_idx}"
        start = f", rows from position {best.start}" if best.start else ""
        out = [
            f"1. matches: {self.label or 'generic'} ({shown}{where}{start}); max error {best.max_error:.3g}"
        ]
        if self.also:
            out.append(f"   also consistent with: {', '.join(self.also)}")
        out += [f"   not {reason}" for reason in self.ruled_out]
        if self.float32_deviation:
            figures = " / ".join(f"{e:.3g}" for e in self.float32_deviation)
            out.append(
                f"   the library's own float32 code is off by up to {figures} (rounded up) at 1k / 8k / 131k "
                f"positions (d_model {presets.DEVIATION_D_MODEL}): a port's test against it needs that "
                "tolerance"
            )
        if self.paste:
            out.append(f"   paste: {self.paste[0]}")
            out += [f"          {line}" for line in self.paste[1:]]
        return out

    def to_json(self) -> dict[str, Any]:
        """The answer as JSON-ready data."""
        best = None if self.best is None else dataclasses.asdict(self.best)
        deviation = self.float32_deviation
        return {
            "matches": self.best is not None,
            "best": best,
            "label": self.label,
            "also": list(self.also),
            "ruled_out": list(self.ruled_out),
            "odd": self.odd,
            "float32_deviation": None
            if deviation is None
            else dict(zip(map(str, presets.DEVIATION_LENGTHS), deviation, strict=True)),
            "paste": list(self.paste),
        }


def expected_deviation(figures: tuple[float, float, float], rows: int) -> float:
    """The float32 error expected of a table of ``rows`` positions: the figures at 1k / 8k / 131k,
    interpolated in log-log, in proportion to the length outside that range (never under 2**-25)."""
    if rows <= presets.DEVIATION_LENGTHS[0]:
        value = figures[0] * rows / presets.DEVIATION_LENGTHS[0]
    elif rows >= presets.DEVIATION_LENGTHS[-1]:
        value = figures[-1] * rows / presets.DEVIATION_LENGTHS[-1]
    else:
        value = float(np.exp(np.interp(np.log(rows), np.log(presets.DEVIATION_LENGTHS), np.log(figures))))
    return max(value, 2.0**-25)


def verdict(matches: list[Match], d_model: int, dtype: npt.DTypeLike, rows: int | None = None) -> Verdict:
    """One answer from :func:`identify`'s ``matches`` for a ``d_model``-wide table stored as ``dtype``.

    ``rows``: the table's length (for the float32 error expected of it; default: none is ruled out).

    The usual float32 code (the PyTorch tutorial's) is not DistilBERT's table, which is rounded once:

    >>> from posenc.analysis import naive_table
    >>> answer = verdict(identify(naive_table(1024, 64)), 64, "float32", 1024)
    >>> answer.label, answer.also, [reason.split(":")[0] for reason in answer.ruled_out]
    ('paper', ('pytorch-tutorial', 'keras-hub', 'positional-encodings'), ['distilbert'])
    """
    matched = [m for m in matches if m.matches]
    if not matched:
        return Verdict(None, nearest=tuple(matches[:3]))
    named = [m for m in matched if m.name]
    pool = named or matched  # a fitted generic base only when no named variant matches
    best = pool[0]
    precision = float(np.finfo(np.dtype(dtype)).eps) if np.dtype(dtype).kind == "f" else 0.0
    labels = (best.name or "").split(" = ") if best.name else []
    named_presets = dict(presets.variants(best.padding_idx))  # the labels identify gave, with their presets
    consistent, ruled_out = [], []
    for label in labels:
        preset = named_presets.get(label)
        figures = None if preset is None else preset.float32_deviation
        if np.dtype(dtype) == np.float32 and figures is not None and rows:
            expected = expected_deviation(figures, rows)
            if best.max_error > 2 * expected + precision:
                ruled_out.append(
                    f"{label}: its library's float32 table is off by at most {expected:.2g} at {rows} "
                    f"positions; this one by {best.max_error:.3g}"
                )
                continue
        consistent.append(label)
    if labels and not consistent:  # no library explains the noise: name them all the same
        consistent, ruled_out = labels, []
    label = consistent[0] if consistent else None
    also = consistent[1:]
    shifts = {best.options.get("shift")}
    for other in pool[1:]:  # other variants within the table's precision of the best
        if other.max_error > best.max_error + precision:
            continue
        options = ", ".join(f"{k}={v!r}" for k, v in other.options.items() if k != "odd")
        start = f", rows from position {other.start}" if other.start else ""
        if other.name:
            also.append(f"{other.name} ({options}{start})")
        elif not best.name and other.options.get("shift") not in shifts:
            # a fit of another shift, as close: base B, shift 1 and base B^(n/(n-1)), shift 0 make nearly
            # the same frequencies, and the table cannot always tell them apart (each shift's plainest)
            shifts.add(other.options.get("shift"))
            also.append(f"generic ({options}{start}; max error {other.max_error:.3g})")
    odd = best.options.get("odd") if d_model % 2 else None
    preset = named_presets.get(label) if label else None
    if preset is not None:  # the preset's own options (an even width leaves its odd rule unseen)
        best = dataclasses.replace(best, options=preset.options)
    return Verdict(
        best,
        label or best.name,
        tuple(dict.fromkeys(also)),
        tuple(ruled_out),
        odd,
        None if preset is None else preset.float32_deviation,
        _paste(best, label, preset, d_model, rows, _timesteps(consistent, named_presets, d_model)),
    )


def answer_lines(
    where: str,
    matches: list[Match] | list[RopeMatch],
    shape: tuple[int, ...],
    dtype: npt.DTypeLike,
    stored: str | None = None,
) -> tuple[list[str], Verdict | None]:
    """What ``posenc identify`` prints for :func:`identify`'s ``matches`` of a table of ``shape`` and
    ``dtype`` read from ``where`` (the file, and the tensor's key), one string a line, with the
    :class:`Verdict` behind it; for a RoPE buffer (its matches are ``RopeMatch`` records) its three best
    candidates and no Verdict (the ranked matches are the answer). ``stored``: the dtype the file holds it
    in, where that is not ``dtype`` (a bfloat16 tensor, read as float32:
    :func:`posenc.porting.load_stored_table`).

    >>> from posenc import presets
    >>> table = presets.get("paper").table(64, 16)
    >>> lines, answer = answer_lines("pe.npy", identify(table), table.shape, table.dtype)
    >>> lines[0], answer.label
    ('pe.npy: float32 table of shape (64, 16)', 'paper')
    """
    if matches and isinstance(matches[0], RopeMatch):
        ranked = [f"  {rank}. {match.describe()}" for rank, match in enumerate(matches[:3], 1)]
        return [f"{where}: table of shape {shape}", *ranked], None
    rows = math.prod(shape[:-1]) if len(shape) > 1 else None
    answer = verdict(matches, shape[-1], dtype, rows)
    held = str(np.dtype(dtype))
    head = f"{where}: {held} table of shape {shape}"
    if stored not in (None, held):
        exactly = "" if stored[:1].lower() in ("i", "u") else "exactly "  # an int64 past 2**53 rounds
        head = f"{where}: {stored} table of shape {shape} (read {exactly}as {held})"
    lines = [head, *(f"  {line}" for line in answer.lines())]
    return lines, answer


def _call(label: str) -> str:
    """``posenc.presets.get(...)`` for a preset label."""
    name, _, rest = label.partition("(")
    return f'posenc.presets.get("{name}"{", " + rest.rstrip(")") if rest else ""})'


def _timesteps(labels: list[str], named_presets: dict[str, presets.Preset], d_model: int) -> str | None:
    """``posenc.torch.Timesteps(...)``, the drop-in for diffusers' ``Timesteps``, with the arguments of the
    first diffusers timestep variant among ``labels``; None when none is one."""
    for label in labels:
        preset = named_presets.get(label)
        if label.startswith("diffusers-timestep") and preset is not None:
            return (
                f"posenc.torch.Timesteps({d_model}, flip_sin_to_cos={preset.layout == 'cos_sin'}, "
                f"downscale_freq_shift={_round(preset.shift)!r}, scale={_round(preset.scale)!r}, "
                f"max_period={_round(preset.base)!r})"
            )
    return None


def _paste(
    best: Match,
    label: str | None,
    preset: presets.Preset | None,
    d_model: int,
    rows: int | None,
    timesteps: str | None = None,
) -> tuple[str, ...]:
    """Lines that rebuild the table (``start=`` when row 0 is not position 0) and the torch / JAX module;
    ``timesteps``: the ``posenc.torch.Timesteps`` line of a diffusers timestep table, after the torch
    module's."""
    length = rows if rows else "length"
    start = f", start={best.start}" if best.start else ""
    if label in GRIDS:
        leading, by_name = grid_width(label, d_model)
        arguments = [*map(str, leading), *(f"{k}={v}" for k, v in by_name.items())]
        arguments += [f"{k}={v!r}" for k, v in best.options.items()]
        return (f"posenc.grids.{GRIDS[label][0]}({', '.join(arguments)})",)
    if label is not None and preset is not None:
        get = _call(label)
        lines = [
            f"{get}.table({length}, {d_model}{start})",
            f"posenc.torch.SinusoidalPositionalEncoding({d_model}, **{get}.options)",
        ]
        if timesteps is not None:  # diffusers' module maps timesteps to embeddings: this is its drop-in
            lines.append(timesteps)
        lines.append(f"posenc.jax.SinusoidalPositionalEncoding({d_model}, **{get}.options)")
        if preset.padding_idx is not None:
            padding = preset.padding_idx
            lines.append(  # the model's input: fairseq's positions of the token ids, zeros at padding tokens
                f"posenc.torch.TokenAndPositionEmbedding(vocab_size, {d_model}, padding_idx={padding}, "
                f"positions_from_padding=True, **{get}.options)"
            )
        return tuple(lines)
    options = {k: v for k, v in best.options.items() if d_model % 2 or k != "odd"}
    keywords = ", ".join(f"{k}={_round(v)!r}" for k, v in options.items())
    return (
        f"posenc.table({length}, {d_model}{start}, {keywords})",
        f"posenc.torch.SinusoidalPositionalEncoding({d_model}, {keywords})",
        f"posenc.jax.SinusoidalPositionalEncoding({d_model}, {keywords})",
    )


def _round(value: Any) -> Any:
    """A fitted float without its last noisy digits (12 significant), other values as they are."""
    if isinstance(value, float) and math.isfinite(value) and value:
        return float(f"{value:.12g}")
    return value
