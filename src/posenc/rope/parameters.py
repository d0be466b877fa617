"""The rotary-embedding parameters of a model: :class:`RopeParameters`, a frozen, hashable record of
everything that fixes the rotary frequencies θ_i and the attention scaling of one model, checked when built.
:func:`posenc.rope.config` (:mod:`posenc.rope.configs`) reads it from a model's config; the formulas that use
its fields are in :mod:`posenc.rope.frequencies`.

The rotary dimension is ``rotary_dim = int(head_dim * partial_rotary_factor)`` (the product in float64 and
truncated, as transformers does); it must be even: the rotation acts on ``rotary_dim // 2`` pairs, one
frequency θ_i each. The "proportional" type (Gemma 4) is the exception: its frequency exponents use the
whole head, and the pairs past the rotated fraction get frequency 0, so its ``rotary_dim`` is ``head_dim``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .. import validation
from ..errors import PosencTypeError, PosencValueError
from .kinds import (
    MAX_ATTENTION_SCALING,
    MAX_BASE,
    MAX_CONTEXT,
    MAX_FACTOR,
    MAX_HEAD_DIM,
    TYPES,
    RopeType,
)

#: The base transformers uses when a config gives no ``rope_theta`` (``default_theta``).
DEFAULT_BASE = 10000.0

#: The fix the messages on rope_theta suggest.
_BASES = "usual values: 10000, 500000, 1000000"

#: The scaling fields a config's RoPE dict holds as they are (``beta_fast``, ``beta_slow``, ``truncate`` and
#: ``original_max_position_embeddings`` have rules of their own: :mod:`posenc.rope.configs`).
PLAIN_SCALING_FIELDS = (
    "factor",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
    "short_factor",
    "long_factor",
    "low_freq_factor",
    "high_freq_factor",
)


@dataclasses.dataclass(frozen=True)
class RopeParameters:
    """The rotary-embedding parameters of one model (frozen and hashable; lists are stored as tuples).

    Build it with :func:`config`; constructing it directly runs the same checks. Fields:

    * ``rope_type``: one of :data:`posenc.rope.kinds.ROPE_TYPES`; ``kind`` is its
      :class:`~posenc.rope.kinds.RopeType`.
    * ``head_dim``: the attention head width; ``rotary_dim``: the rotated width (even), so there are
      ``rotary_dim // 2`` frequencies θ_0 .. θ_{rotary_dim/2 - 1}.
    * ``base``: θ of the RoPE paper (``rope_theta``); ``partial_rotary_factor``: the rotated fraction.
    * ``max_position_embeddings``: the model's context length (None if the config has none; "dynamic"
      and a "longrope" without ``factor`` need it).
    * ``factor`` (linear, dynamic, yarn, llama3: required; longrope: None means
      max_position_embeddings / original_max_position_embeddings; proportional: default 1).
    * ``original_max_position_embeddings`` (llama3, yarn, longrope): the pretraining context length.
    * ``attention_factor`` (yarn, longrope): None means the formula of the type.
    * ``beta_fast`` = 32, ``beta_slow`` = 1, ``mscale``, ``mscale_all_dim``, ``truncate`` = True: yarn.
    * ``short_factor``, ``long_factor``: longrope's ``rotary_dim // 2`` per-frequency divisors.
    * ``low_freq_factor``, ``high_freq_factor``: llama3.
    * ``mrope_section``: multimodal RoPE (Qwen2-VL): how many of the ``rotary_dim // 2`` frequencies each
      position axis (temporal, height, width) takes, in order; ``mrope_interleaved``: Qwen3-VL's variant,
      where the axes take the frequencies in turn (t, h, w, t, h, w, ...) instead of in contiguous blocks.

    >>> from posenc import rope
    >>> params = rope.RopeParameters("default", head_dim=8, rotary_dim=8, base=100.0)
    >>> params == rope.config(head_dim=8, base=100.0), params.n_frequencies
    (True, 4)
    """

    rope_type: str
    head_dim: int
    rotary_dim: int
    base: float
    max_position_embeddings: int | None = None
    partial_rotary_factor: float = 1.0
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    attention_factor: float | None = None
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool = False

    def __post_init__(self) -> None:
        _check(self)

    @property
    def kind(self) -> RopeType:
        """The rope type: its fields, checks, formulas and dependence on the sequence length."""
        return TYPES[self.rope_type]

    @property
    def n_frequencies(self) -> int:
        """The number of frequencies θ_i: ``rotary_dim // 2``."""
        return self.rotary_dim // 2

    def with_frequencies(self, count: int) -> RopeParameters:
        """These parameters with ``count`` frequencies: a rotated width of ``2 · count`` and the head of
        that width over ``partial_rotary_factor``, every other field as it is — the width a model's own
        ``inv_freq`` gives where its config's fields give another (a head dim in a field of the family's
        own). A width that is no whole head, or sections and LongRoPE factors of another width, is a
        ValueError.

        >>> from posenc import rope
        >>> rope.config(head_dim=64).with_frequencies(8).rotary_dim
        16
        """
        count = validation.integer("count", count, minimum=1)
        rotary_dim = 2 * count
        head_dim = rotary_dim / self.partial_rotary_factor
        if head_dim != int(head_dim):
            raise PosencValueError(
                f"{count} frequencies over partial_rotary_factor {self.partial_rotary_factor} are no "
                "whole head",
                parameter="head_dim",
            )
        if rotary_dim != self.rotary_dim and (self.mrope_section or self.short_factor is not None):
            raise PosencValueError(
                "mrope_section or LongRoPE factors are given for the config's own width, not another",
                parameter="head_dim",
            )
        return dataclasses.replace(self, head_dim=int(head_dim), rotary_dim=rotary_dim)


def _check(p: RopeParameters) -> None:
    """Validate and normalize the fields of ``p`` in place (numbers to int/float, lists to tuples)."""

    def put(name: str, value: Any) -> None:
        object.__setattr__(p, name, value)

    kind = TYPES.get(p.rope_type) if isinstance(p.rope_type, str) else None
    if kind is None:
        raise PosencValueError(
            f"rope_type={p.rope_type!r} is not a rope type posenc.rope knows; use one of {', '.join(TYPES)}",
            parameter="rope_type",
        )
    put("head_dim", check_head_dim(p.head_dim))
    prf = check_partial_rotary_factor(p.partial_rotary_factor)
    put("partial_rotary_factor", prf)
    put("rotary_dim", validation.integer("rotary_dim", p.rotary_dim, minimum=0))
    expected = p.head_dim if kind.full_head else int(p.head_dim * prf)
    if p.rotary_dim != expected:
        raise PosencValueError(
            f"rotary_dim={p.rotary_dim} does not match head_dim={p.head_dim} and partial_rotary_factor={prf} "
            f"(expected {expected}); build the parameters with posenc.rope.config",
            parameter="rotary_dim",
        )
    if p.rotary_dim % 2 or p.rotary_dim < 2:
        raise PosencValueError(
            f"rotary_dim = int(head_dim * partial_rotary_factor) = int({p.head_dim} * {prf}) = "
            f"{p.rotary_dim} must be even and >= 2 (RoPE rotates pairs); "
            "fix head_dim or partial_rotary_factor",
            parameter="partial_rotary_factor",
        )
    base = validation.real("rope_theta (base)", p.base, usual=_BASES)
    if not base > 1.0:
        raise PosencValueError(
            f"rope_theta (base) must be > 1; got {base} ({_BASES})", parameter="rope_theta (base)"
        )
    validation.at_most("rope_theta (base)", base, MAX_BASE, "models use up to ~1e9")
    put("base", base)
    if p.max_position_embeddings is not None:
        put("max_position_embeddings", check_context("max_position_embeddings", p.max_position_embeddings))

    factor = p.factor
    if kind.factor_required and factor is None:
        raise PosencValueError(
            f"rope_type={kind.name!r} needs a scaling factor; got factor=None: add 'factor' (e.g. 4.0) to "
            "rope_scaling / rope_parameters",
            parameter="factor",
        )
    if factor is not None:
        factor = validation.real("factor", factor)
        if kind.min_factor < 1.0 and not factor >= kind.min_factor:
            raise PosencValueError(
                f"factor must be >= 2**-20 for rope_type={kind.name!r} (it divides every frequency); "
                f"got {factor}",
                parameter="factor",
            )
        validation.at_most("factor", factor, MAX_FACTOR, "scaling factors in use are at most ~100")
        if kind.min_factor >= 1.0 and factor < kind.min_factor:
            raise PosencValueError(
                f"factor must be >= 1 for rope_type={kind.name!r} (it stretches the context by that much); "
                f"got {factor}: use a factor >= 1",
                parameter="factor",
            )
        put("factor", factor)
    original = p.original_max_position_embeddings
    if original is not None:
        original = check_context("original_max_position_embeddings", original)
        put("original_max_position_embeddings", original)
    elif kind.uses("original_max_position_embeddings"):
        raise PosencValueError(
            f"rope_type={kind.name!r} needs original_max_position_embeddings (the pretraining context "
            "length); got neither it nor max_position_embeddings: add original_max_position_embeddings to "
            "rope_scaling",
            parameter="original_max_position_embeddings",
        )
    for name in ("attention_factor", "mscale", "mscale_all_dim", "low_freq_factor", "high_freq_factor"):
        value = getattr(p, name)
        if value is not None:
            put(name, validation.real(name, value))
    if p.attention_factor is not None and not p.attention_factor > 0.0:
        raise PosencValueError(
            f"attention_factor must be > 0 (it multiplies cos and sin); got {p.attention_factor}",
            parameter="attention_factor",
        )
    if p.attention_factor is not None:
        validation.at_most(
            "attention_factor",
            p.attention_factor,
            MAX_ATTENTION_SCALING,
            "it multiplies cos and sin: ~1 to 2",
        )
    for name in ("mscale", "mscale_all_dim"):
        value = getattr(p, name)
        if value is not None and abs(value) > MAX_FACTOR:
            raise PosencValueError(
                f"{name} must lie in [-2**20, 2**20] (models use ~0.7 to 1); got {value}", parameter=name
            )
    for name in ("low_freq_factor", "high_freq_factor"):
        if getattr(p, name) is not None:
            validation.at_most(name, getattr(p, name), MAX_FACTOR, "Llama 3.1 uses 1 and 4")
    for name in ("beta_fast", "beta_slow"):
        value = validation.real(name, getattr(p, name))
        validation.at_most(name, value, MAX_FACTOR, "rotations over the original context; usual: 32 and 1")
        put(name, value)
    if not isinstance(p.truncate, bool):
        raise PosencTypeError(f"truncate must be true or false; got {p.truncate!r}", parameter="truncate")
    kind.check(p)

    if p.mrope_section is not None:
        section = check_mrope_entries(p.mrope_section)
        if not section or sum(section) != p.rotary_dim // 2:
            raise PosencValueError(
                f"mrope_section={list(section)} must sum to rotary_dim // 2 = {p.rotary_dim // 2} (one "
                "frequency per entry; Qwen2-VL with rotary_dim 128 uses [16, 24, 24]); "
                f"its sum is {sum(section)}",
                parameter="mrope_section",
            )
        put("mrope_section", section)
    if not isinstance(p.mrope_interleaved, bool):
        raise PosencTypeError(
            f"mrope_interleaved must be true or false; got {p.mrope_interleaved!r}",
            parameter="mrope_interleaved",
        )
    if p.mrope_interleaved and p.mrope_section is None:
        raise PosencValueError(
            "mrope_interleaved=True needs mrope_section (how many frequencies each axis takes)",
            parameter="mrope_interleaved",
        )


def check_head_dim(value: Any, *, integral_floats: bool = False) -> int:
    """The head width: an integer from 1 to :data:`MAX_HEAD_DIM`; ``integral_floats``: read from a config
    file (:func:`posenc.validation.integer`)."""
    return validation.integer(
        "head_dim",
        value,
        minimum=1,
        maximum=MAX_HEAD_DIM,
        why="the widest heads in use have 512 features",
        integral_floats=integral_floats,
    )


def check_partial_rotary_factor(value: Any) -> float:
    """``partial_rotary_factor``: a real number in (0, 1], the rotated fraction of a head."""
    prf = validation.real("partial_rotary_factor", value)
    if not 0.0 < prf <= 1.0:
        raise PosencValueError(
            f"partial_rotary_factor must lie in (0, 1] (the rotated fraction of a head); got {prf}",
            parameter="partial_rotary_factor",
        )
    return prf


def check_context(name: str, value: Any, *, integral_floats: bool = False) -> int:
    """A context length: an integer from 1 to :data:`MAX_CONTEXT` (positions are below 2**31);
    ``integral_floats``: read from a config file (:func:`posenc.validation.integer`)."""
    return validation.integer(
        name,
        value,
        minimum=1,
        maximum=MAX_CONTEXT,
        why="positions are below 2**31",
        integral_floats=integral_floats,
    )


def check_mrope_entries(section: Any, *, integral_floats: bool = False) -> tuple[int, ...]:
    """``mrope_section`` as a tuple of at most 3 integers >= 0 (its sum is checked against the rotary width
    by :class:`RopeParameters`); ``integral_floats``: read from a config file."""
    if isinstance(section, str | bytes | Mapping) or not hasattr(section, "__len__"):
        raise PosencTypeError(
            f"mrope_section must be a list of ints like [16, 24, 24]; got {validation.shorten(section)}",
            parameter="mrope_section",
        )
    if len(section) > 3:
        raise PosencValueError(
            f"mrope_section must have at most 3 entries (time, height, width), like [16, 24, 24]; got "
            f"{len(section)}: {validation.shorten(section)}",
            parameter="mrope_section",
        )
    return tuple(
        validation.integer(f"mrope_section[{i}]", x, minimum=0, integral_floats=integral_floats)
        for i, x in enumerate(section)
    )
