"""Rotaries written without a config: LongRoPE's "su"-scaled one (diffusers'
``OmniGenSuScaledRotaryEmbedding``, the form Phi-3's code had before transformers read it from a config) and
a plain one that holds only its ``inv_freq`` (diffusers' Anima text conditioner's ``AnimaRotaryEmbedding``):
what posenc reads of them, how they are proven, and their exact equivalents :class:`SuScaledRope` and
:class:`PlainRope`.

The formula (LongRoPE): θ_i = 1 / (f_i · base^(2i/dim)), f the ``short_factor`` while the sequence
(max(position_ids) + 1) is at most ``original_max_position_embeddings``, else the ``long_factor``; cos and
sin of p·θ_i in halves ([θ | θ]), each times A = √(1 + ln(s)/ln(original)) with s = max / original (1 where
s ≤ 1). The module gives ``(cos, sin)`` of the first row of its position ids, each ``(S, dim)`` float32.

The proof (:func:`prove_su_rope`): its own (cos, sin) of probe ids — short sequences and one past
``original_max_position_embeddings`` (the long factors) — against posenc's, shapes included, each value
within what float32 code errs at its position and frequency, times A.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .. import rope, validation
from ..errors import renamed
from . import proofs
from .computed import Refusal, forward_names, inv_freq_base, probed
from .rotary import RotaryEmbedding
from .tensors import _dtype_name

__all__ = [
    "PlainRope",
    "SuScaledRope",
    "prove_plain_rope",
    "prove_su_rope",
    "read_plain_rope",
    "read_su_rope",
]

#: The forward read: ``(hidden_states, position_ids)``, and the attributes the formula takes.
FORWARD = ("hidden_states", "position_ids")
ATTRIBUTES = ("dim", "base", "short_factor", "long_factor", "original_max_position_embeddings")
#: The probe ids: 0 .. PROBE − 1 (the short factors), then those and the original length (the long ones).
PROBE = 64


class SuScaledRope(RotaryEmbedding):
    """posenc's exact values in place of an "su"-scaled rotary (module docstring), called as it is:
    ``(hidden_states, position_ids)`` -> ``(cos, sin)`` each ``(S, dim)`` float32 of ``position_ids[0]``;
    the factors picked by max(position_ids) + 1, as the original.

    >>> cos, sin = SuScaledRope(4, 10000.0, (1.0, 2.0), (4.0, 8.0), 8, 8)(None, torch.arange(3)[None])
    >>> sin[2]  # 2 · [1, 1/(2·100)]: the short factors
    tensor([0.9093, 0.0100, 0.9093, 0.0100])
    """

    def __init__(
        self,
        dim: int,
        base: float,
        short_factor: tuple[float, ...],
        long_factor: tuple[float, ...],
        original: int,
        longest: int,
    ) -> None:
        params = rope.RopeParameters(
            "longrope",
            head_dim=dim,
            rotary_dim=dim,
            base=float(base),
            short_factor=tuple(float(f) for f in short_factor),
            long_factor=tuple(float(f) for f in long_factor),
            original_max_position_embeddings=int(original),
            max_position_embeddings=int(longest),
        )
        super().__init__(params)

    def forward(  # type: ignore[override]
        self, hidden_states: Any, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(position_ids)
        cos, sin = super().forward(torch.zeros(1, dtype=torch.float32, device=ids.device), ids)
        return cos[0], sin[0]


def read_su_rope(module: nn.Module) -> SuScaledRope | None:
    """posenc's equivalent of ``module`` where it has the su-scaled form (:data:`FORWARD`; :data:`ATTRIBUTES`
    with factors of dim / 2 numbers each; no config), else None. Whether it computes what they say is
    :func:`prove_su_rope`'s to tell."""
    if isinstance(module, SuScaledRope):  # posenc's own, patched in
        return module
    if forward_names(module) != FORWARD or getattr(module, "config", None) is not None:
        return None
    if not all(hasattr(module, name) for name in ATTRIBUTES):
        return None
    dim, base = module.dim, module.base
    original = module.original_max_position_embeddings
    longest = getattr(module, "max_position_embeddings", original)
    ints = (dim, original, longest)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in ints) or dim % 2:
        return None
    if isinstance(base, bool) or not isinstance(base, int | float) or not base > 1:
        return None
    factors = [module.short_factor, module.long_factor]
    if not all(isinstance(f, list | tuple) and len(f) == dim // 2 for f in factors):
        return None
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for f in factors for v in f):
        return None
    try:
        return SuScaledRope(dim, base, *factors, original, longest)
    except (TypeError, ValueError):
        return None


def prove_su_rope(module: nn.Module, exact: SuScaledRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_su_rope`) on
    the probe ids, short and long; else why not ("its forward ...": a form posenc does not read; "not the
    rotary ...": values other than its attributes name)."""
    params = exact.params
    original = params.original_max_position_embeddings
    short = np.arange(PROBE)
    probes = [short, np.concatenate([short, [original]])]
    amplitude = rope.attention_scaling(params)
    worst, allowed = 0.0, 0.0
    for positions in probes:
        ids = torch.as_tensor(positions)[None]
        mine = probed(lambda: module(torch.zeros(1), ids))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        ours = exact(None, ids)
        pair = isinstance(mine, tuple | list) and len(mine) == 2
        if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
            return f"its forward returns {type(mine).__name__}, not (cos, sin)"
        if any(m.shape != o.shape for m, o in zip(mine, ours, strict=True)):
            return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
        theta = rope.inv_freq(params, seq_len=int(positions.max()) + 1)
        bound = proofs.frequency_bound(theta, torch.float32)
        for m, o in zip(mine, ours, strict=True):
            check = proofs.check_cos_sin(m, o, positions, theta, bound, amplitude, "half")
            if check.over is not None or not check.provable:
                over = check.over[2] if check.over is not None else float("inf")
                return f"not the rotary its attributes name (LongRoPE, {exact.params.base:g}) ({over:.3g})"
            worst, allowed = max(worst, check.difference), max(allowed, check.allowed)
    return worst, allowed


# --- a plain rotary of its inv_freq -------------------------------------------------------------------


class PlainRope(RotaryEmbedding):
    """posenc's exact values in place of a default rotary written without a config (:func:`read_plain_rope`),
    called as it is: ``(hidden_states, position_ids)`` -> ``(cos, sin)``, each ``(B, S, dim)`` in
    ``hidden_states``' dtype, cos and sin of p·θ_i in halves ([θ | θ]), θ_i = base^(−2i/dim).

    >>> cos, sin = PlainRope(4, 100.0)(torch.zeros(1), torch.arange(2)[None])
    >>> sin[0, 1]  # [sin 1, sin 0.1] twice
    tensor([0.8415, 0.0998, 0.8415, 0.0998])
    """

    def __init__(self, dim: int, base: float) -> None:
        dim = validation.integer("dim", dim, minimum=2)
        super().__init__(rope.RopeParameters("default", head_dim=dim, rotary_dim=dim, base=float(base)))

    def forward(  # type: ignore[override]
        self, hidden_states: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with renamed({"x": "hidden_states"}):
            return super().forward(hidden_states, position_ids)


def read_plain_rope(module: nn.Module) -> PlainRope | None:
    """posenc's equivalent of ``module`` where it has the plain form (:data:`FORWARD`, no config, none of
    :data:`ATTRIBUTES`, one buffer, ``inv_freq``, whose base :func:`~posenc.torch.computed.inv_freq_base`
    reads); else None. Whether it computes cos and sin of them is :func:`prove_plain_rope`'s to tell."""
    if isinstance(module, PlainRope):  # posenc's own, patched in
        return module
    if forward_names(module) != FORWARD or getattr(module, "config", None) is not None:
        return None
    if any(hasattr(module, name) for name in ATTRIBUTES):
        return None
    buffers = dict(module.named_buffers(recurse=False))
    inv_freq = buffers.get("inv_freq")
    if len(buffers) != 1 or not isinstance(inv_freq, torch.Tensor) or not inv_freq.is_floating_point():
        return None
    base = inv_freq_base(inv_freq)
    return None if base is None else PlainRope(2 * inv_freq.numel(), base)


#: The plain rotary's probe ids: short ones and far ones.
PLAIN_PROBE = (*range(64), 1000, 4095, 65535)


def prove_plain_rope(module: nn.Module, exact: PlainRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_plain_rope`) on
    the probe ids (float32 hidden states), each value within what float32 code errs at its position and
    frequency; else why not."""
    positions = np.array(PLAIN_PROBE)
    ids = torch.as_tensor(positions)[None]
    hidden = torch.zeros(1, ids.shape[1], 1)
    mine = probed(lambda: module(hidden, ids))
    if isinstance(mine, Refusal):
        return mine
    pair = isinstance(mine, tuple | list) and len(mine) == 2
    if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
        return f"its forward returns {type(mine).__name__}, not (cos, sin)"
    ours = exact(hidden, ids)
    if any(m.shape != o.shape for m, o in zip(mine, ours, strict=True)):
        return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
    theta = rope.inv_freq(exact.params)
    bound = proofs.frequency_bound(theta, torch.float32)
    worst, allowed = 0.0, 0.0
    for m, o in zip(mine, ours, strict=True):
        check = proofs.check_cos_sin(m[0].float(), o[0].float(), positions, theta, bound, 1.0, "half")
        if check.over is not None or not check.provable:
            over = check.over[2] if check.over is not None else float("inf")
            named = f"dim {exact.params.head_dim}, base {exact.params.base:g}"
            return f"not the rotary its inv_freq names ({named}) within float32 rounding ({over:.3g})"
        worst, allowed = max(worst, check.difference), max(allowed, check.allowed)
    return worst, allowed


# --- a multimodal rotary of its inv_freq and sections ---------------------------------------------------

#: The forwards read: Ideogram 4's ``(position_ids)`` (ids ``(B, L, 3)``), Cosmos3-Omni's ``(position_ids,
#: device, dtype)`` (ids ``(3, B, L)``, or ``(B, L)`` for text).
SECTIONS_FORWARD, SECTIONS_DTYPE_FORWARD = ("position_ids",), ("position_ids", "device", "dtype")
#: The probe: every (t, h, w) of a 3 × 5 × 7 grid, far ids on each axis, and Ideogram 4's image offset.
SECTIONS_PROBE = [(t, h, w) for t in range(3) for h in range(5) for w in range(7)] + [
    (1000, 63, 4095),
    (4095, 1000, 63),
    (65536, 65600, 65700),
]


class SectionsRope(RotaryEmbedding):
    """posenc's exact values in place of a multimodal rotary written without a config — Qwen3-VL's
    interleaved sections (t, h, w) of one ``inv_freq`` — called as it is (``ids`` ``"last"``: Ideogram 4's
    ``Ideogram4MRoPE``, ``(position_ids)`` ``(B, L, 3)`` -> (cos, sin) float32; ``"first"``: Cosmos3-Omni's
    ``Cosmos3VLTextRotaryEmbedding``, ``(position_ids, device, dtype)`` with ids ``(3, B, L)`` or ``(B, L)``
    -> (cos, sin) in ``dtype``), each ``(B, L, dim)`` in halves, frequency i taken from the axis
    :func:`posenc.rope.arrays.mrope_axes` gives it, θ_i = base^(−2i/dim), each value the exact one rounded
    once.

    >>> cos, sin = SectionsRope(6, 1000.0, (1, 1, 1), "last")(torch.tensor([[[1, 2, 3]]]))
    >>> sin  # [sin 1·1, sin 2·0.1, sin 3·0.01] twice
    tensor([[[0.8415, 0.1987, 0.0300, 0.8415, 0.1987, 0.0300]]])
    """

    def __init__(self, dim: int, base: float, sections: tuple[int, int, int], ids: str) -> None:
        dim = validation.integer("dim", dim, minimum=2)
        params = rope.RopeParameters(
            "default",
            head_dim=dim,
            rotary_dim=dim,
            base=float(base),
            mrope_section=tuple(
                validation.integer(f"sections[{i}]", s, minimum=0) for i, s in enumerate(sections)
            ),
            mrope_interleaved=True,
        )
        super().__init__(params, layout="half")
        if ids not in ("first", "last"):
            raise ValueError(f"ids: {ids!r}; 'first' (3, B, L) or 'last' (B, L, 3)")
        self.ids = ids

    def forward(  # type: ignore[override]
        self, position_ids: torch.Tensor, device: Any = None, dtype: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(position_ids)
        if self.ids == "last":
            if ids.dim() != 3 or ids.shape[-1] != 3:
                raise ValueError(f"position_ids: shape {tuple(ids.shape)}; expected (B, L, 3)")
            ids, dtype = ids.permute(2, 0, 1), torch.float32
        elif ids.dim() not in (2, 3) or (ids.dim() == 3 and ids.shape[0] != 3):
            raise ValueError(f"position_ids: shape {tuple(ids.shape)}; expected (3, B, L) or (B, L)")
        target = ids.device if device is None else torch.device(device)
        if dtype is not None:
            _dtype_name(dtype)  # refused naming dtype, not the tensor that carries it
        like = torch.zeros(1, dtype=dtype or torch.float32, device=target)
        return super().forward(like, ids)

    def extra_repr(self) -> str:
        p = self.params
        return f"dim={p.head_dim}, base={p.base:g}, sections={p.mrope_section}, ids={self.ids!r}"


def _sections(value: Any) -> tuple[int, int, int] | None:
    if not isinstance(value, tuple | list) or len(value) != 3:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        return None
    return tuple(value)  # type: ignore[return-value]


def read_sections_rope(module: nn.Module, named: float | None = None) -> SectionsRope | None:
    """posenc's equivalent of ``module`` where it has Ideogram 4's form (:data:`SECTIONS_FORWARD`, an int
    ``head_dim``, ``mrope_section``) or Cosmos3-Omni's (:data:`SECTIONS_DTYPE_FORWARD`, ``rope_axes_dim``):
    three sections and an ``inv_freq`` buffer of n values (2n = ``head_dim`` where it has one); height and
    width take their sections' frequencies (every third, from the second and the third), time the n − h − w
    others, whatever its own section says (Qwen3-VL's code reads only h and w); the buffer's base
    :func:`~posenc.torch.computed.inv_freq_base` reads (``named``: the base its model's config names, taken
    where it fits); no config of its own; else None. Whether it computes Qwen3-VL's interleaved sections of
    them is :func:`prove_sections_rope`'s to tell."""
    if isinstance(module, SectionsRope):  # posenc's own, patched in
        return module
    names = forward_names(module)
    if names not in (SECTIONS_FORWARD, SECTIONS_DTYPE_FORWARD) or getattr(module, "config", None) is not None:
        return None
    attribute = "mrope_section" if names == SECTIONS_FORWARD else "rope_axes_dim"
    sections = _sections(getattr(module, attribute, None))
    inv_freq = dict(module.named_buffers(recurse=False)).get("inv_freq")
    if sections is None or not isinstance(inv_freq, torch.Tensor) or not inv_freq.is_floating_point():
        return None
    count = inv_freq.numel()
    time = count - sections[1] - sections[2]  # time takes every frequency the others do not: its own unread
    if getattr(module, "head_dim", 2 * count) != 2 * count or time < 1:
        return None
    base = inv_freq_base(inv_freq, named)
    ids = "last" if names == SECTIONS_FORWARD else "first"
    return None if base is None else SectionsRope(2 * count, base, (time, *sections[1:]), ids)


def prove_sections_rope(module: nn.Module, exact: SectionsRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_sections_rope`)
    on the probe ids (:data:`SECTIONS_PROBE`, float32), each frequency's columns at the positions of its
    axis within what float32 code errs there; else why not."""
    from ..rope.arrays import mrope_axes

    table = torch.tensor(SECTIONS_PROBE, dtype=torch.int64)  # (L, 3)
    ids = table[None] if exact.ids == "last" else table.T[:, None]
    args = (ids,) if exact.ids == "last" else (ids, torch.device("cpu"), torch.float32)
    mine = probed(lambda: module(*args))
    if isinstance(mine, Refusal):
        return mine
    pair = isinstance(mine, tuple | list) and len(mine) == 2
    if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
        return f"its forward returns {type(mine).__name__}, not (cos, sin)"
    ours = exact(*args)
    if any(m.shape != o.shape for m, o in zip(mine, ours, strict=True)):
        return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
    params = exact.params
    theta = rope.inv_freq(params)
    count = theta.size
    axis_of = mrope_axes(params.mrope_section, True)
    bound = proofs.frequency_bound(theta, torch.float32)
    worst, allowed = 0.0, 0.0
    for axis in range(3):
        which = np.flatnonzero(axis_of == axis)
        columns = np.concatenate([which, which + count])
        positions = table[:, axis].numpy()
        for m, o in zip(mine, ours, strict=True):
            m, o = m[0][:, columns].float(), o[0][:, columns].float()
            check = proofs.check_cos_sin(m, o, positions, theta[which], bound[which], 1.0, "half")
            if check.over is not None or not check.provable:
                over = check.over[2] if check.over is not None else float("inf")
                named = f"dim {params.head_dim}, base {params.base:g}, sections {list(params.mrope_section)}"
                return (
                    f"not the rotary its attributes name ({named}, interleaved) within float32 rounding "
                    f"({over:.3g})"
                )
            worst, allowed = max(worst, check.difference), max(allowed, check.allowed)
    return worst, allowed


def sections_rows(
    module: nn.Module, exact: SectionsRope, positions: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) ``(1, len(positions), dim)`` float32 of text ids: each position on all three
    axes (plain RoPE of its width and base, whatever its sections)."""
    column = torch.as_tensor(positions, dtype=torch.int64).reshape(1, -1)
    with torch.no_grad():
        if exact.ids == "last":
            cos, sin = module(column[..., None].expand(-1, -1, 3))
        else:
            cos, sin = module(column.expand(3, -1, -1), torch.device("cpu"), torch.float32)
    return cos.float(), sin.float()
