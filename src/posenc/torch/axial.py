"""Hugging Face's "axial" rotary of a vision tower's grid (``rope_type="axial"``: the vision towers of
Qwen2-VL and its line, GLM-4V, Pixtral, Gemma 4, MLCD, Kimi K2.5, VideoLLaMA 3, SAM 2/3's memory attention,
...): what posenc reads of it, how it is proven, and its exact equivalent :class:`AxialRope`.

The form (:func:`axial_form`): a module with an ``inv_freq`` buffer of F frequencies, a ``config`` whose
``rope_parameters["rope_type"]`` is "axial", and a method ``recomposition_frequencies`` that its
``forward(x, position_ids) -> (cos, sin)`` applies to the cosines and the sines of
``position_ids[..., None] · inv_freq`` (shape ``position_ids.shape + (F,)``, one coordinate per axis on the
last axis of the ids) to lay them out across the head.

What is read (:func:`read_axial`), each part proven:

* the frequencies: ω_i = theta^(−2i/S), i < F, S = 2F, theta the config's ``rope_theta``, held in an order of
  the module's own (Pixtral holds the even ones, then the odd): each stored value is matched to its nearest
  and must lie within what its storage and float32 code err (:func:`posenc.torch.proofs.check_frequencies`);
* the layout: its ``recomposition_frequencies`` must be a pure gather (each value it gives is one of its
  input's, at the places a probe of distinct codes shows), complete (every value used) on one of the id
  shapes ``(N, axes)`` or ``(1, N, axes)``, axes 2 or 3;
* its values (:func:`prove_axial`): its (cos, sin) of a probe grid against posenc's, each value within what
  float32 code errs at its coordinate and frequency.

posenc's equivalent computes each cos and sin exactly (rounded once to float32) and lays them out with the
module's own ``recomposition_frequencies``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core
from . import proofs
from .computed import Refusal, probed
from .functions import _encode_tensor

__all__ = [
    "AXIAL",
    "Axial",
    "AxialRope",
    "axial_form",
    "axial_rows",
    "first_axis",
    "prove_axial",
    "read_axial",
]

#: The config's rope type of the form.
AXIAL = "axial"
#: The method that lays the per-axis values out across the head.
LAYOUT = "recomposition_frequencies"
#: The id shapes tried, in order (batched, axes): the first on which the layout reads as one is taken.
SHAPES = ((False, 3), (False, 2), (True, 3), (True, 2))
#: The coordinates of the probe grid (on each axis): small ones, then a spread to 1024.
PROBE = (0, 1, 2, 3, 4, 5, 7, 9, 12, 16, 23, 32, 45, 64, 91, 128, 181, 256, 362, 512, 724, 1024)


@dataclasses.dataclass(frozen=True)
class Axial:
    """An axial rotary as read: ``theta``; ``order`` (stored slot k holds ω_order[k] of the F = len(order)
    frequencies theta^(−2i/2F)); ``axes`` and ``batched`` (its ids ``(N, axes)``, or ``(1, N, axes)``);
    ``to_input`` (its cos and sin in the dtype of ``x``, else float32); ``gap`` (|stored − exact| per
    slot)."""

    theta: float
    order: tuple[int, ...]
    axes: int
    batched: bool
    to_input: bool
    gap: tuple[float, ...]

    @property
    def frequencies(self) -> np.ndarray:
        """The exact ω of each stored slot (float64 nearest)."""
        return core.frequencies(2 * len(self.order), base=self.theta)[list(self.order)]

    def describe(self) -> str:
        permuted = "" if self.order == tuple(range(len(self.order))) else ", in its own order"
        shape = f"(1, N, {self.axes})" if self.batched else f"(N, {self.axes})"
        return f"theta {self.theta:g}, {len(self.order)} frequencies{permuted}, ids {shape}"


def axial_form(module: nn.Module) -> bool:
    """Whether ``module`` has the form read here (module docstring)."""
    parameters = getattr(getattr(module, "config", None), "rope_parameters", None)
    kind = parameters.get("rope_type") if isinstance(parameters, dict) else None
    inv = getattr(module, "inv_freq", None)
    return kind == AXIAL and callable(getattr(module, LAYOUT, None)) and isinstance(inv, torch.Tensor)


def _codes(batched: bool, axes: int, rows: int, count: int) -> torch.Tensor:
    shape = (1, rows, axes, count) if batched else (rows, axes, count)
    return torch.arange(math.prod(shape), dtype=torch.float64).reshape(shape)


def gather(module: nn.Module, batched: bool, axes: int, rows: int, count: int) -> torch.Tensor | None:
    """Where each value of ``module``'s layout of an ids shape comes from: for each value it gives, the flat
    index of its input's value (int64), where its layout is a pure gather on that shape; else None."""
    codes = _codes(batched, axes, rows, count)
    noise = torch.randn(codes.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad():
            out, mixed = getattr(module, LAYOUT)(codes), getattr(module, LAYOUT)(noise)
    except Exception:  # its own code refuses the shape
        return None
    if not isinstance(out, torch.Tensor) or not isinstance(mixed, torch.Tensor) or out.shape != mixed.shape:
        return None
    if out.numel() == 0 or not bool(((out >= 0) & (out < codes.numel()) & (out == out.round())).all()):
        return None
    index = out.to(torch.int64)
    return index if torch.equal(noise.reshape(-1)[index.reshape(-1)].reshape(out.shape), mixed) else None


def _head_width(module: nn.Module) -> int | None:
    """The head width its config names (``head_dim``, else ``hidden_size // num_attention_heads``), or
    None."""
    config = module.config
    width = getattr(config, "head_dim", None)
    hidden, heads = getattr(config, "hidden_size", None), getattr(config, "num_attention_heads", None)
    if not isinstance(width, int) and isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        width = hidden // heads
    return width if isinstance(width, int) and not isinstance(width, bool) and width > 0 else None


def _layout(module: nn.Module, count: int) -> tuple[bool, int] | str:
    """(batched, axes) of the first of :data:`SHAPES` on which ``module``'s layout is a pure gather that uses
    every axis and every frequency (Pixtral's gives each frequency to one axis) and, with three axes, gives
    no more channels than its head has (a two-axis layout that flattens its input takes three as well)."""
    rows, head = 4, _head_width(module)
    for batched, axes in SHAPES:
        index = gather(module, batched, axes, rows, count)
        if index is None or (axes == 3 and head is not None and index.shape[-1] > head):
            continue
        used = torch.zeros(rows * axes * count, dtype=torch.bool)
        used[index.reshape(-1)] = True
        used = used.reshape(rows, axes, count)
        if bool(used.any(dim=(0, 2)).all()) and bool(used.any(dim=(0, 1)).all()):
            return batched, axes
    return f"its {LAYOUT} is no pure gather of the per-axis values posenc reads (ids (N, 2|3) or (1, N, 2|3))"


def read_axial(module: nn.Module) -> Axial | str | None:
    """``module`` read (module docstring) where it has the form: an :class:`Axial`, or why it is not read;
    None where it has not the form. Changes nothing; its forward is run only to tell its output dtype."""
    if not axial_form(module):
        return None
    theta = module.config.rope_parameters.get("rope_theta")
    if isinstance(theta, bool) or not isinstance(theta, int | float) or not theta > 1:
        return f"its config's rope_theta {theta!r} is no base posenc reads (a number above 1)"
    scaling = getattr(module, "attention_scaling", 1.0)
    if scaling != 1.0:
        return f"its attention_scaling {scaling!r} is not 1: posenc reads axial rotaries of amplitude 1"
    inv = module.inv_freq
    if inv.device.type == "meta":
        return "its inv_freq is on meta: it holds no frequencies to read"
    if not inv.is_floating_point() or inv.dim() != 1 or inv.numel() == 0:
        return f"its inv_freq ({inv.dtype}, shape {tuple(inv.shape)}) holds no frequencies posenc reads"
    stored = inv.detach().to("cpu", torch.float64).numpy()
    count = stored.size
    exact = core.frequencies(2 * count, base=float(theta))
    with np.errstate(divide="ignore", invalid="ignore"):
        order = np.argmin(np.abs(np.log(stored[:, None]) - np.log(exact[None, :])), axis=1)
    named = f"theta^(−2i/{2 * count}), i < {count}, of its config's rope_theta {theta:g}"
    if sorted(order.tolist()) != list(range(count)):
        return f"its {count} frequencies are not {named}, each once"
    check = proofs.check_frequencies(stored, inv.dtype, [exact[order]])
    if check is None or not check.within:
        relative = math.inf if check is None else check.relative
        return f"its frequencies are not {named}: max relative difference {relative:.3g}"
    layout = _layout(module, count)
    if isinstance(layout, str):
        return layout
    batched, axes = layout
    ids = probe_ids(batched, axes)[:4]
    out = probed(lambda: module(torch.zeros(1, dtype=torch.bfloat16, device=inv.device), ids.to(inv.device)))
    if isinstance(out, Refusal):  # its forward refuses the ids its layout takes
        return out
    pair = isinstance(out, tuple | list) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)
    if not pair:
        return f"its forward returns {type(out).__name__}, not (cos, sin)"
    to_input = out[0].dtype == torch.bfloat16
    slots = tuple(int(k) for k in order)
    return Axial(float(theta), slots, axes, batched, to_input, tuple(check.gap.tolist()))


def probe_ids(batched: bool, axes: int) -> torch.Tensor:
    """The probe grid's ids (int64): every pair of :data:`PROBE` coordinates on the first two axes (a third
    takes their sum's, wrapped), ``(N, axes)`` or ``(1, N, axes)``."""
    k = len(PROBE)
    n = torch.arange(k * k)
    grid = torch.tensor(PROBE)
    ids = torch.stack([grid[n // k], grid[n % k], grid[(n // k + n % k) % k]][:axes], dim=-1)
    return ids[None] if batched else ids


class AxialRope(nn.Module):
    """posenc's exact values in place of an axial rotary (module docstring), called as it is:
    ``forward(x, position_ids)`` -> ``(cos, sin)`` laid out by ``layout``'s ``recomposition_frequencies``
    (held, not a child): each cos(p·ω) and sin(p·ω) of a coordinate p (the ids as float32) and a frequency
    ω = theta^(−2i/S) exact, rounded once to float32 (then to ``x``'s dtype where the original casts).

    >>> import transformers
    >>> config = transformers.Qwen2VLConfig().vision_config
    >>> original = transformers.models.qwen2_vl.modeling_qwen2_vl.Qwen2VLVisionRotaryEmbedding(config)
    >>> exact = AxialRope(read_axial(original), original)
    >>> cos, sin = exact(torch.zeros(1), torch.tensor([[0, 1]]))
    >>> cos.shape, float(cos[0, 20])  # channels 20 .. 39: the second axis (coordinate 1), cos 1 rounded once
    (torch.Size([1, 80]), 0.5403022766113281)
    """

    def __init__(self, reading: Axial, layout: nn.Module) -> None:
        super().__init__()
        self.theta, self.order, self.to_input = reading.theta, reading.order, reading.to_input
        self._checked = core.Options.check(2 * len(self.order), self.theta, 0.0, 1.0, "sin_cos", "zero")
        self._permuted = self.order != tuple(range(len(self.order)))
        self.__dict__["_layout"] = layout  # its recomposition_frequencies: data movement, no state

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        count = len(self.order)
        values = _encode_tensor(position_ids.float(), (*self._checked, "float32"))
        sin, cos = values[..., :count], values[..., count:]
        if self._permuted:
            sin, cos = sin[..., list(self.order)], cos[..., list(self.order)]
        cos, sin = self.recomposition_frequencies(cos), self.recomposition_frequencies(sin)
        if self.to_input:
            return cos.to(x.dtype), sin.to(x.dtype)
        return cos, sin

    def recomposition_frequencies(self, freq: torch.Tensor) -> torch.Tensor:
        """Its layout of per-axis values ``position_ids.shape + (F,)`` across the head (the original's)."""
        return getattr(self.__dict__["_layout"], LAYOUT)(freq)

    def extra_repr(self) -> str:
        return f"theta={self.theta:g}, frequencies={len(self.order)}"


def prove_axial(module: nn.Module, reading: Axial) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module``'s (cos, sin) of the probe grid
    (:func:`probe_ids`) against :class:`AxialRope`'s, each value within A·(p·(Δω + 4·ω·2⁻²⁴) + 8·2⁻²⁴) at its
    coordinate p and frequency ω (Δω: its stored frequency's measured gap); else why not."""
    ids = probe_ids(reading.batched, reading.axes).to(module.inv_freq.device)
    x = torch.zeros(1, dtype=torch.float32, device=ids.device)
    mine = probed(lambda: module(x, ids))
    if isinstance(mine, Refusal):  # its forward refuses the probe grid
        return mine
    with torch.no_grad():
        ours = AxialRope(reading, module)(x, ids)
    if any(m.shape != o.shape for m, o in zip(mine, ours, strict=True)):
        shapes = f"{tuple(mine[0].shape)}, posenc's layout of its ids {tuple(ours[0].shape)}"
        return f"its (cos, sin) have shape {shapes}"
    theta, gap = reading.frequencies, np.asarray(reading.gap)
    p = ids.to("cpu", torch.float64).abs().numpy()[..., None]
    allowance = torch.from_numpy(p * (gap + 4 * proofs.UNIT * theta) + 8 * proofs.UNIT)
    with torch.no_grad():
        allowance = getattr(module, LAYOUT)(allowance)
    worst, allowed = 0.0, 0.0
    for name, m, o in zip(("cos", "sin"), mine, ours, strict=True):
        difference = (m.detach().to("cpu", torch.float64) - o.to("cpu", torch.float64)).abs()
        within = allowance <= proofs.CAP
        beyond = (difference > allowance) & within
        if bool(beyond.any()):
            return (
                f"its {name} is not the axial rotary of {reading.describe()} within float32 rounding "
                f"({float(difference[beyond].max()):.3g})"
            )
        worst = max(worst, float(difference[within].max()))
        allowed = max(allowed, float(allowance[within].max()))
    return worst, allowed


def first_axis(module: nn.Module, reading: Axial) -> tuple[tuple[int, ...], int] | str:
    """The slots ``module``'s layout gives its first axis, in descending frequency (``reading.order``), and
    the width S' whose rotary they are (theta^(−2j/S'), j < S'/2: every frequency, or Pixtral's every other
    one); else why they are no such set."""
    index = gather(module, reading.batched, reading.axes, 1, len(reading.order))
    if index is None:
        return f"its {LAYOUT} is no pure gather of one row"
    count = len(reading.order)
    slots = sorted({int(k) for k in index.reshape(-1).tolist() if k < count}, key=lambda k: reading.order[k])
    ranks = [reading.order[k] for k in slots]
    step = ranks[1] - ranks[0] if len(ranks) > 1 else count
    if not ranks or ranks[0] != 0 or ranks != list(range(0, count, step)) or count % step:
        return f"the frequencies of its first axis (ω_i, i in {ranks}) are no rotary's set of one width"
    return tuple(slots), 2 * len(slots)


def axial_rows(
    module: nn.Module, reading: Axial, positions: Any, states: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) along its first axis, at ``positions`` there and 0 on the others, as Hugging
    Face's 1-D rotary gives them for a head of S' channels (:func:`first_axis`): each
    ``(1, len(positions), S')``, the axis' frequencies in descending order twice side by side ([c | c]), read
    through its layout's gather (``states``: the dtype of its ``x``, which some cast to). Raises ValueError
    where :func:`first_axis` does not read it."""
    axis = first_axis(module, reading)
    if isinstance(axis, str):
        raise ValueError(axis)
    slots = torch.tensor(axis[0])
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    rows, count = positions.numel(), len(reading.order)
    ids = torch.zeros(rows, reading.axes, dtype=torch.int64)
    ids[:, 0] = positions
    ids = ids[None] if reading.batched else ids
    index = gather(module, reading.batched, reading.axes, rows, count)
    if index is None:
        raise ValueError(f"its {LAYOUT} is no pure gather of {rows} rows")
    source = torch.full((rows * reading.axes * count,), -1, dtype=torch.int64)
    source[index.reshape(-1)] = torch.arange(index.numel())
    # the flat input index of (row n, axis 0, slot k): n·axes·F + k
    where = source[(torch.arange(rows)[:, None] * reading.axes * count + slots[None, :]).reshape(-1)]
    device = module.inv_freq.device
    with torch.no_grad():
        cos, sin = module(torch.zeros(1, dtype=states, device=device), ids.to(device))
    parts = []
    for part in (cos, sin):
        table = part.detach().to("cpu").reshape(-1)[where].reshape(rows, len(slots))
        parts.append(torch.cat([table, table], dim=-1)[None])
    return parts[0], parts[1]
