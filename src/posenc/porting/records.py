"""The records of what identify finds: :class:`Match` (a variant of the sinusoidal encoding) and
:class:`RopeMatch` (a rotary embedding, also a Match), with :func:`rope_match` that builds the latter.

Their own module, below :mod:`.matching`, :mod:`.rope_matching` and :mod:`.rope_sections`, which all build
them: so none of those needs to import another to get its record.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .. import rope

__all__ = ["Match", "RopeMatch", "rope_match"]


@dataclasses.dataclass(frozen=True)
class Match:
    """What :func:`~posenc.porting.identify` found.

    Attributes:
        name: the preset (or grid function) that reproduces the table, or None when only the generic options
            do.
        options: the core options (base, shift, scale, layout, odd), or the arguments of the grid function
            in :mod:`posenc.grids` (``diffusers-2d``: ``grids.diffusers_2d(d_model, **options)``; likewise
            ``diffusers-3d``, ``timm-2d`` with ``dim=d_model``, ``positional-encodings-2d``/``3d`` with
            ``channels=d_model``).
        start: the position of row 0 (for 1-D tables).
        padding_idx: the position whose row is zero (fairseq), or None.
        max_error: the largest difference between the stored table and this candidate.
        matches: whether ``max_error`` is within the tolerance for the table's length and dtype.
        cast: for a table that matches nothing, the type its frequencies were rounded to when this variant's
            frequencies rounded to it (``"bfloat16"``; ``"float32>bfloat16"``: to float32 first) reproduce
            the table within that tolerance — a frequency buffer after ``.half()`` — else None.

    >>> import posenc
    >>> from posenc.porting import identify
    >>> best = identify(posenc.table(64, 16, start=3, dtype="float64"))[0]  # rows 3 .. 66
    >>> best.name.split(" = ")[0], best.options["layout"], best.start, best.padding_idx, best.matches
    ('paper', 'interleaved', 3, None, True)
    """

    name: str | None
    options: dict[str, Any]
    start: int
    padding_idx: int | None
    max_error: float
    matches: bool
    cast: str | None = dataclasses.field(default=None, kw_only=True)

    def describe(self) -> str:
        """One line: the verdict, the variant with its options, and the largest difference."""
        what = self.name or "generic"
        options = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        extra = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        start = f", rows from position {self.start}" if self.start else ""
        verdict = "matches" if self.matches else "does NOT match; nearest candidate"
        cast = (
            ""
            if self.cast is None
            else f"; matches with its frequencies cast to {self.cast.replace('>', ', then ')}"
        )
        return f"{verdict}: {what} ({options}{extra}{start}); max error {self.max_error:.3g}{cast}"


@dataclasses.dataclass(frozen=True)
class RopeMatch(Match):
    """What :func:`~posenc.porting.identify_rope` found: a :class:`Match` (so
    :func:`~posenc.porting.identify` returns it too) whose ``name`` is ``"rope-<type>"`` and ``options`` the
    keywords of :func:`posenc.rope.config`.

    Attributes (besides Match's): ``rope_type``; ``source`` ("inv_freq", "cos cache" or "sin cache");
    ``layout`` of a cache ("half" or "interleaved"); ``precision``: the storage type the values fit
    (bfloat16, float16, float32, float64); ``parameters``: the :class:`posenc.rope.RopeParameters`;
    ``attention_scaling``: A; ``relative``: whether ``max_error`` is relative (inv_freq) or absolute
    (cache); ``tolerance``: the limit ``max_error`` was held to; ``rounding``: what storing exact values in
    ``precision`` alone would cost; ``evidence``: one line of why; ``code``: the line that builds the
    parameters; ``positions``: a merged M-RoPE cache's (t, h, w) position of each row, else None.

    >>> import numpy as np
    >>> from posenc import rope
    >>> from posenc.porting import identify_rope
    >>> cos, sin = rope.cos_sin(np.arange(32), rope.config(head_dim=64, base=500000.0), dtype="float32")
    >>> found = identify_rope(cos)
    >>> found.rope_type, found.source, found.layout, found.precision, found.matches
    ('default', 'cos cache', 'half', 'float32', True)
    >>> found.code
    'posenc.rope.config(head_dim=64, base=500000.0)'
    """

    rope_type: str = "default"
    source: str = "inv_freq"
    layout: str | None = None
    precision: str = "float32"
    parameters: rope.RopeParameters | None = None
    attention_scaling: float = 1.0
    relative: bool = True
    tolerance: float = 0.0
    rounding: float = 0.0
    evidence: str = ""
    code: str = ""
    positions: tuple[tuple[int, ...], ...] | None = None

    def describe(self) -> str:
        """The verdict with the type and its parameters and the largest difference; then the evidence and
        the ``posenc.rope.config`` line, each on a line of its own."""
        verdict = "matches" if self.matches else "does NOT match; nearest candidate"
        p = self.parameters
        shown = [f"rotary_dim={p.rotary_dim}", f"base={p.base:g}"] if p else []
        scaling = self.options.get("scaling", {})
        shown += [f"{k}={_brief(v)}" for k, v in scaling.items() if k != "rope_type"]
        if self.attention_scaling != 1.0:
            shown.append(f"attention_scaling={self.attention_scaling:.6g}")
        where = f" ({self.layout} layout)" if self.layout else ""
        error = "relative error" if self.relative else "error"
        return (
            f"{verdict}: RoPE {self.rope_type} {self.source}{where} ({', '.join(shown)}); {self.precision} "
            f"values, max {error} {self.max_error:.3g} vs exact ({self.precision} rounding alone: "
            f"{self.rounding:.2g}; limit {self.tolerance:.2g})"
            f"\n     evidence: {self.evidence}\n     {self.code}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The result as plain JSON-ready values."""
        return {
            "rope_type": self.rope_type,
            "source": self.source,
            "layout": self.layout,
            "precision": self.precision,
            "config": self.options,
            "attention_scaling": self.attention_scaling,
            "max_error": self.max_error,
            "relative": self.relative,
            "tolerance": self.tolerance,
            "rounding": self.rounding,
            "matches": self.matches,
            "evidence": self.evidence,
            "code": self.code,
            "positions": self.positions,
        }


def rope_match(
    params: rope.RopeParameters,
    keywords: dict[str, Any],
    where: tuple[str, str | None, str],
    numbers: tuple[float, float, float],
    evidence: str,
    matches: bool = True,
    positions: tuple[tuple[int, ...], ...] | None = None,
) -> RopeMatch:
    """The :class:`RopeMatch` of ``params`` (built by ``keywords``): ``where`` is (source, layout,
    precision), ``numbers`` (max error, limit, rounding); an inv_freq's error is relative."""
    (source, layout, precision), (error, limit, rounding) = where, numbers
    return RopeMatch(
        name=f"rope-{params.rope_type}",
        options=keywords,
        start=0,
        padding_idx=None,
        max_error=float(error),
        matches=bool(matches),
        rope_type=params.rope_type,
        source=source,
        layout=layout,
        precision=precision,
        parameters=params,
        attention_scaling=rope.attention_scaling(params),
        relative=source == "inv_freq",
        tolerance=float(limit),
        rounding=float(rounding),
        evidence=evidence,
        code=_code(keywords),
        positions=positions,
    )


def _brief(value: Any) -> str:
    """``repr(value)``; a list of more than 6 as its first three, its last and its length."""
    if isinstance(value, list | tuple) and len(value) > 6:
        return f"[{', '.join(map(repr, value[:3]))}, ..., {value[-1]!r}] ({len(value)} values)"
    return repr(value)


def _code(keywords: dict[str, Any]) -> str:
    """The ``posenc.rope.config(...)`` call for ``keywords``."""
    parts = [f"{name}={value!r}" for name, value in keywords.items()]
    return f"posenc.rope.config({', '.join(parts)})"
