"""Rotaries of a latent's grid in the halves layout of each axis (diffusers' CogView4 and GLM-Image
``RotaryPosEmbed``, Cosmos' ``CosmosRotaryPosEmbed``): what posenc reads of them, how they are proven, and
their exact equivalents :class:`GridRope` and :class:`CosmosRope`.

The formula. A latent's patches, row-major, have a position p_a on each axis a; axis a takes w_a of the
channels, with frequencies ω_i = theta_a^(−2i / w_a), i < w_a / 2, and cos and sin are each
``(patches, Σ w_a)``: [p_0·ω | p_1·ω | ... | p_0·ω | p_1·ω | ...] (every axis' angles, then all again).

* :class:`GridRope` — CogView4, GLM-Image: a latent ``(B, C, H, W)`` of H' × W' patches (H' = H //
  ``patch_size``), two axes of ``dim / 2`` each and one ``theta``; positions h and w — CogView4 maps them
  onto its fixed ``rope_axes_dim`` (A_h, A_w) as ⌊h · A_h / H'⌋ and ⌊w · A_w / W'⌋.
* :class:`CosmosRope` — Cosmos: a latent ``(B, C, F, H, W)`` (``patch_size`` per axis), the widths
  ``dim_t``, ``dim_h``, ``dim_w``, each axis' theta 10000 · its NTK factor (``t_ntk_factor``, ...); the
  frame positions f, or f · ``base_fps`` / fps where ``fps`` is given (posenc forms them in float64).

* :class:`IdsRope` — MiniMax-H3's transformer (``MiniMaxH3RotaryPosEmbed``): the position ids given,
  ``(S, 3)``, one ``inv_freq`` of n frequencies (its ``rope_freq_dim``) shared by the three axes, each axis
  2n channels of the layout above; its theta read from the ``inv_freq``; proven on probe ids
  (:func:`prove_ids_rope`).
* :class:`CoordsRope` — timm's Gemma 4 ViT (``Gemma4RotaryEmbedding2D``): the patches' coordinates given,
  ``position_ids`` ``(B, N, 2)``, each axis ``head_dim / 2`` channels in halves of its own: cos and sin
  ``(B, N, head_dim)`` are [p_0·ω | p_0·ω | p_1·ω | p_1·ω] (axis-major), ω_i = theta^(−2i / (head_dim / 2))
  (its ``rope_theta``, 100); read where it has that forward, ``head_dim`` and ``rope_theta``, and an
  ``inv_freq`` of head_dim / 4 frequencies; proven on probe coordinates (:func:`prove_coords_rope`).

The proof (:func:`prove_grid_rope`): its own (cos, sin) of probe latents (grids smaller and larger than
CogView4's axes; Cosmos' with and without fps) against posenc's, shapes included, each value within what
float32 code errs at its position and frequency.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core, validation
from ..errors import PosencValueError, renamed
from .computed import Refusal, forward_names, inv_freq_base, probed, within_rounding
from .functions import _encode_tensor
from .tensors import _DTYPE_NAMES, _dtype_name, _position_tensor

__all__ = [
    "CoordsRope",
    "CosmosRope",
    "GridRope",
    "IdsRope",
    "prove_coords_rope",
    "prove_grid_rope",
    "prove_ids_rope",
    "read_coords_rope",
    "read_grid_rope",
    "read_ids_rope",
]

#: The forwards read: CogView4's ``(hidden_states)`` (a latent ``(B, C, H, W)``), Cosmos'
#: ``(hidden_states, fps)`` (a latent ``(B, C, F, H, W)``).
FORWARD, COSMOS_FORWARD = ("hidden_states",), ("hidden_states", "fps")
#: The probe grids in patches (2-D; Cosmos' frames first).
PROBE_GRIDS = ((5, 7), (1, 3), (40, 24))
COSMOS_GRIDS = ((3, 5, 7), (1, 2, 3), (24, 1, 2))
#: The frame rate of Cosmos' probe of a video.
PROBE_FPS = 30


class _Halves(nn.Module):
    """The halves layout of several axes (module docstring): ``widths`` and ``thetas`` per axis."""

    def __init__(self, widths: tuple[int, ...], thetas: tuple[float, ...]) -> None:
        super().__init__()
        widths = tuple(validation.integer(f"widths[{i}]", w, minimum=2) for i, w in enumerate(widths))
        if any(w % 2 for w in widths):
            raise ValueError(f"widths: {widths}; each axis of a rotary takes an even number of channels")
        self.widths, self.thetas = widths, tuple(float(t) for t in thetas)
        self._checked = [
            core.Options.check(w, t, 0.0, 1.0, "sin_cos", "zero")
            for w, t in zip(self.widths, self.thetas, strict=True)
        ]

    def lay_out(self, positions: list[torch.Tensor], device: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) ``(patches, Σ widths)`` float32 of each axis' ``positions`` (one tensor per axis)."""
        sin, cos = [], []
        for p, width, checked in zip(positions, self.widths, self._checked, strict=True):
            values = _encode_tensor(p.to(device), (*checked, "float32"))
            sin.append(values[:, : width // 2])
            cos.append(values[:, width // 2 :])
        return torch.cat(cos + cos, dim=-1), torch.cat(sin + sin, dim=-1)

    def columns(self, axis: int) -> np.ndarray:
        """The columns of ``axis`` in the layout: its block in each half."""
        start, half = sum(w // 2 for w in self.widths[:axis]), sum(self.widths) // 2
        block = np.arange(start, start + self.widths[axis] // 2)
        return np.concatenate([block, block + half])


def _grid(*sizes: int) -> list[torch.Tensor]:
    """Each axis' index of the patches of a grid of ``sizes``, row-major, as int64."""
    grid = torch.meshgrid(*(torch.arange(s) for s in sizes), indexing="ij")
    return [g.reshape(-1) for g in grid]


class GridRope(_Halves):
    """posenc's exact values in place of CogView4's or GLM-Image's rotary (module docstring), called as it
    is: ``hidden_states`` ``(B, C, H, W)`` -> ``(cos, sin)``, each ``(H'·W', dim)`` float32 on its device;
    ``axes``: CogView4's ``rope_axes_dim`` (None: the patches' own indices).

    >>> cos, sin = GridRope(8, 100.0, 1)(torch.zeros(1, 1, 1, 2))  # patches (0, 0) and (0, 1)
    >>> sin
    tensor([[0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
            [0.0000, 0.0000, 0.8415, 0.0998, 0.0000, 0.0000, 0.8415, 0.0998]])
    """

    def __init__(self, dim: int, theta: float, patch: int, axes: tuple[int, int] | None = None) -> None:
        dim = validation.integer("dim", dim, minimum=4)
        if dim % 4:
            raise ValueError(f"dim: {dim}; a 2-D rotary in halves takes a multiple of 4 channels")
        super().__init__((dim // 2, dim // 2), (theta, theta))
        self.dim, self.theta = dim, float(theta)
        self.patch = validation.integer("patch", patch, minimum=1)
        self.axes = (
            None
            if axes is None
            else (
                validation.integer("axes[0]", axes[0], minimum=1),
                validation.integer("axes[1]", axes[1], minimum=1),
            )
        )

    def positions(self, height: int, width: int) -> list[torch.Tensor]:
        """The positions (h, w) of each patch of an ``height`` × ``width`` grid, row-major, as int64."""
        h, w = _grid(height, width)
        if self.axes is not None:
            h, w = h * self.axes[0] // height, w * self.axes[1] // width
        return [h, w]

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if hidden_states.dim() != 4:
            raise ValueError(f"hidden_states: shape {tuple(hidden_states.shape)}; expected (B, C, H, W)")
        height, width = hidden_states.shape[2] // self.patch, hidden_states.shape[3] // self.patch
        return self.lay_out(self.positions(height, width), hidden_states.device)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, theta={self.theta:g}, patch={self.patch}" + (
            f", axes={self.axes}" if self.axes else ""
        )


class CosmosRope(_Halves):
    """posenc's exact values in place of Cosmos' rotary (module docstring), called as it is:
    ``(hidden_states, fps=None)`` with a latent ``(B, C, F, H, W)`` -> ``(cos, sin)``, each
    ``(F'·H'·W', dim_t + dim_h + dim_w)`` float32 on its device.

    >>> rope = CosmosRope((2, 2, 2), (100.0, 10.0, 10.0), (1, 1, 1), 24)
    >>> cos, sin = rope(torch.zeros(1, 1, 2, 1, 1), fps=12)
    >>> sin[1]  # frame 1 at 12 fps: position 1 · 24 / 12 = 2
    tensor([0.9093, 0.0000, 0.0000, 0.9093, 0.0000, 0.0000])
    """

    def __init__(
        self,
        widths: tuple[int, int, int],
        thetas: tuple[float, float, float],
        patch: tuple[int, ...],
        base_fps: float,
    ) -> None:
        super().__init__(widths, thetas)
        self.patch = tuple(validation.integer(f"patch[{i}]", p, minimum=1) for i, p in enumerate(patch))
        self.base_fps = float(base_fps)

    def positions(self, frames: int, height: int, width: int, fps: Any = None) -> list[torch.Tensor]:
        """The positions (f, h, w) of each patch, row-major: f int64, or f · base_fps / fps float64."""
        f, h, w = _grid(frames, height, width)
        if fps is not None:
            rate = validation.real("fps", float(fps) if isinstance(fps, torch.Tensor) else fps)
            if rate <= 0:
                raise PosencValueError(
                    f"fps must be a frame rate > 0; got {fps!r} (None: an image, its frames at 0, 1, ...)",
                    parameter="fps",
                )
            f = f.to(torch.float64) * self.base_fps / rate
        return [f, h, w]

    def forward(self, hidden_states: torch.Tensor, fps: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        if hidden_states.dim() != 5:
            raise ValueError(f"hidden_states: shape {tuple(hidden_states.shape)}; expected (B, C, F, H, W)")
        sizes = [s // p for s, p in zip(hidden_states.shape[2:], self.patch, strict=True)]
        return self.lay_out(self.positions(*sizes, fps=fps), hidden_states.device)

    def extra_repr(self) -> str:
        return f"widths={self.widths}, thetas={self.thetas}, patch={self.patch}, base_fps={self.base_fps:g}"


class IdsRope(_Halves):
    """posenc's exact values in place of MiniMax-H3's rotary (``MiniMaxH3RotaryPosEmbed``: one ``inv_freq``
    of n frequencies shared by three axes), called as it is: ``position_ids`` ``(S, axes)`` -> ``(cos,
    sin)``, each ``(S, axes · 2n)`` float32 in the halves layout of the module docstring (every axis'
    angles, then all again), ω_i = theta^(−i/n).

    >>> cos, sin = IdsRope(2, 100.0, 2)(torch.tensor([[1, 2]]))
    >>> sin  # [sin 1, sin 0.1 | sin 2, sin 0.2] twice
    tensor([[0.8415, 0.0998, 0.9093, 0.1987, 0.8415, 0.0998, 0.9093, 0.1987]])
    """

    def __init__(self, count: int, theta: float, axes: int = 3) -> None:
        count, axes = (
            validation.integer("count", count, minimum=1),
            validation.integer("axes", axes, minimum=1),
        )
        super().__init__((2 * count,) * axes, (float(theta),) * axes)
        self.count, self.theta, self.axes = count, float(theta), axes

    def forward(self, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if position_ids.dim() != 2 or position_ids.shape[-1] != self.axes:
            raise ValueError(f"position_ids: shape {tuple(position_ids.shape)}; expected (S, {self.axes})")
        with renamed({"positions": "position_ids"}):  # encode's check: no booleans, complex, nested ...
            ids = _position_tensor(position_ids, differentiable=True)
        return self.lay_out([ids[:, a] for a in range(self.axes)], position_ids.device)

    def extra_repr(self) -> str:
        return f"count={self.count}, theta={self.theta:g}, axes={self.axes}"


#: MiniMax-H3's rotary's forward: each patch's position on each axis.
IDS_FORWARD = ("position_ids",)
#: The probe: every (t, h, w) of a 3 × 5 × 7 grid, then far positions.
PROBE_IDS = [(t, h, w) for t in range(3) for h in range(5) for w in range(7)] + [(1000, 63, 4095)]


def read_ids_rope(module: nn.Module) -> IdsRope | None:
    """posenc's equivalent of ``module`` where it has MiniMax-H3's form (forward ``(position_ids)``, no
    config, an int ``rope_freq_dim`` n and an ``inv_freq`` of n values whose base
    :func:`~posenc.torch.computed.inv_freq_base` reads); else None. Whether it computes what they say on
    three axes is :func:`prove_ids_rope`'s to tell."""
    if isinstance(module, IdsRope):  # posenc's own, patched in
        return module
    if forward_names(module) != IDS_FORWARD or hasattr(module, "config"):
        return None
    count, inv_freq = getattr(module, "rope_freq_dim", None), getattr(module, "inv_freq", None)
    if not _ints(count) or not isinstance(inv_freq, torch.Tensor) or inv_freq.numel() != count:
        return None
    theta = inv_freq_base(inv_freq)
    return None if theta is None else IdsRope(count, theta)


def prove_ids_rope(module: nn.Module, exact: IdsRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_ids_rope`) on
    the probe positions (:data:`PROBE_IDS`), each axis within what float32 code errs at its position and
    frequency; else why not."""
    ids = torch.tensor(PROBE_IDS, dtype=torch.int64)
    mine = probed(lambda: module(ids))
    if isinstance(mine, Refusal):
        return mine
    pair = isinstance(mine, tuple | list) and len(mine) == 2
    if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
        return f"its forward returns {type(mine).__name__}, not (cos, sin)"
    ours = exact(ids)
    if any(a.shape != b.shape for a, b in zip(mine, ours, strict=True)):
        return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
    theta = core.frequencies(2 * exact.count, base=exact.theta)
    named = f"{exact.axes} axes of {exact.count} frequencies, theta {exact.theta:g}, in halves"
    return _each_axis(mine, ours, ids, exact, theta, named)


def _each_axis(
    mine: Any, ours: Any, ids: torch.Tensor, exact: Any, theta: np.ndarray, named: str
) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of each axis' columns (``exact.columns``) of the (cos, sin)
    pair ``mine`` against ``ours``, each ``(rows, channels)``, at the positions ``ids`` ``(rows, axes)``,
    within float32 rounding in halves; else why not (``named``: what its attributes say)."""
    worst, allowed = 0.0, 0.0
    for axis in range(exact.axes):
        columns = exact.columns(axis)
        values = [torch.cat([t[:, columns].float() for t in pair]) for pair in (mine, ours)]
        positions = ids[:, axis].double().numpy()
        checked = within_rounding(*values, np.concatenate([positions, positions]), theta, "half")
        if isinstance(checked, float):
            return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


class CoordsRope(nn.Module):
    """posenc's exact values in place of timm's Gemma 4 ViT rotary (module docstring), called as it is:
    ``(x, position_ids)`` with the patches' coordinates ``position_ids`` ``(B, N, axes)`` (integers; -1, a
    padding patch's, too) -> ``(cos, sin)``, each ``(B, N, head_dim)`` in ``x``'s dtype, each value the exact
    one rounded once; axis a takes ``head_dim / axes`` channels, [p_a·ω | p_a·ω].

    >>> cos, sin = CoordsRope(8, 100.0)(torch.zeros(1), torch.tensor([[[1, 0]]]))
    >>> sin  # axis 0 at 1: sin ω (ω = 1, 0.1), axis 1 at 0
    tensor([[[0.8415, 0.0998, 0.8415, 0.0998, 0.0000, 0.0000, 0.0000, 0.0000]]])
    """

    def __init__(self, head_dim: int, theta: float, axes: int = 2) -> None:
        super().__init__()
        axes = validation.integer("axes", axes, minimum=1)
        head_dim = validation.integer("head_dim", head_dim, minimum=2 * axes)
        if head_dim % (2 * axes):
            raise ValueError(f"head_dim: {head_dim}; {axes} axes in halves take a multiple of {2 * axes}")
        self.head_dim, self.theta, self.axes = head_dim, float(theta), axes
        self.width = self.head_dim // self.axes
        self._checked = core.Options.check(self.width, self.theta, 0.0, 1.0, "sin_cos", "zero")

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if position_ids.dim() != 3 or position_ids.shape[-1] != self.axes:
            want = f"(batch, patches, {self.axes})"
            raise ValueError(f"position_ids: shape {tuple(position_ids.shape)}; expected {want}")
        half = self.width // 2
        name = _dtype_name(x.dtype) if x.dtype in _DTYPE_NAMES else "float32"
        cos, sin = [], []
        for axis in range(self.axes):
            values = _encode_tensor(position_ids[..., axis].to(x.device), (*self._checked, name))
            sin += [values[..., :half]] * 2
            cos += [values[..., half:]] * 2
        return torch.cat(cos, dim=-1).to(x.dtype), torch.cat(sin, dim=-1).to(x.dtype)

    def columns(self, axis: int) -> np.ndarray:
        """The columns of ``axis``: its own block, in halves."""
        return np.arange(axis * self.width, (axis + 1) * self.width)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, theta={self.theta:g}, axes={self.axes}"


#: timm's Gemma 4 ViT rotary's forward: ``x`` (its dtype and device), the patches' coordinates.
COORDS_FORWARD = ("x", "position_ids")
#: The probe coordinates: a 9 × 11 grid, padding patches (-1, -1), and far ones (a large image).
PROBE_COORDS = [(x, y) for y in range(9) for x in range(11)] + [(-1, -1), (-1, -1), (63, 47), (200, 3)]


def read_coords_rope(module: nn.Module) -> CoordsRope | None:
    """posenc's equivalent of ``module`` where it has the form of timm's Gemma 4 ViT rotary (forward ``(x,
    position_ids)``, an int ``head_dim`` that is a multiple of 4, a ``rope_theta`` > 1 and an ``inv_freq`` of
    ``head_dim / 4`` values; no ``config``: a Hugging Face rotary is read by its config); else None. Whether
    it computes what they say is :func:`prove_coords_rope`'s to tell."""
    if isinstance(module, CoordsRope):  # posenc's own, patched in
        return module
    if forward_names(module) != COORDS_FORWARD or hasattr(module, "config"):
        return None
    head_dim, theta = getattr(module, "head_dim", None), getattr(module, "rope_theta", None)
    inv_freq = getattr(module, "inv_freq", None)
    if not (_ints(head_dim) and _number(theta)) or theta <= 1 or head_dim % 4:
        return None
    if not isinstance(inv_freq, torch.Tensor) or inv_freq.numel() != head_dim // 4:
        return None
    return CoordsRope(head_dim, theta)


def prove_coords_rope(module: nn.Module, exact: CoordsRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_coords_rope`) on
    the probe coordinates (:data:`PROBE_COORDS`, float32 ``x``), each axis within what float32 code errs at
    its position and frequency; else why not."""
    ids = torch.tensor([PROBE_COORDS], dtype=torch.int64)
    x = torch.zeros(1, ids.shape[1], exact.head_dim)
    mine = probed(lambda: module(x, ids))
    if isinstance(mine, Refusal):
        return mine
    if not (
        isinstance(mine, tuple | list) and len(mine) == 2 and all(isinstance(t, torch.Tensor) for t in mine)
    ):
        return f"its forward returns {type(mine).__name__}, not (cos, sin)"
    ours = exact(x, ids)
    if any(a.shape != b.shape for a, b in zip(mine, ours, strict=True)):
        return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
    theta = core.frequencies(exact.width, base=exact.theta)
    named = f"head_dim {exact.head_dim}, theta {exact.theta:g}, halves of each axis"
    return _each_axis([t[0] for t in mine], [t[0] for t in ours], ids[0], exact, theta, named)


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def read_grid_rope(module: nn.Module) -> GridRope | CosmosRope | None:
    """posenc's equivalent of ``module`` where it has CogView4's form (forward ``(hidden_states)``; ``dim`` a
    multiple of 4, ``patch_size`` an int, ``theta`` > 1, no ``rope_dim`` (HunyuanVideo's) and, where it has
    one, a ``rope_axes_dim`` of two ints) or Cosmos' (forward ``(hidden_states, fps)``; ``dim_t``, ``dim_h``,
    ``dim_w`` even, their ``*_ntk_factor``, three ``patch_size``, ``base_fps``), holding no buffer; else None.
    Whether it computes what they say is :func:`prove_grid_rope`'s to tell."""
    if isinstance(module, GridRope | CosmosRope):  # posenc's own, patched in
        return module
    names = forward_names(module)
    if any(True for _ in module.buffers(recurse=False)):
        return None
    if names == COSMOS_FORWARD:
        widths = [getattr(module, f"dim_{a}", None) for a in "thw"]
        factors = [getattr(module, f"{a}_ntk_factor", None) for a in "thw"]
        patch, fps = getattr(module, "patch_size", None), getattr(module, "base_fps", None)
        three = isinstance(patch, tuple | list) and len(patch) == 3 and _ints(*patch)
        if not (_ints(*widths) and all(_number(f) for f in factors) and three and _number(fps)):
            return None
        if any(w % 2 for w in widths):
            return None
        return CosmosRope(tuple(widths), tuple(10000.0 * f for f in factors), tuple(patch), fps)
    dim, patch, theta = (getattr(module, k, None) for k in ("dim", "patch_size", "theta"))
    axes = getattr(module, "rope_axes_dim", None)
    if names != FORWARD or hasattr(module, "rope_dim"):
        return None
    if not (_ints(dim, patch) and _number(theta)) or theta <= 1 or dim % 4:
        return None
    if axes is not None and not (isinstance(axes, tuple | list) and len(axes) == 2 and _ints(*axes)):
        return None
    return GridRope(dim, theta, patch, None if axes is None else tuple(axes))


def _longest(module: nn.Module) -> int:
    """The most patches on any axis Cosmos' tables hold (its ``max_size``), else 128."""
    sizes = getattr(module, "max_size", None)
    return max(sizes) if isinstance(sizes, list | tuple) and sizes and _ints(*sizes) else 128


def _probes(
    exact: GridRope | CosmosRope, longest: int = 128
) -> list[tuple[tuple[Any, ...], dict[str, Any], list[torch.Tensor]]]:
    """(args, keywords, each axis' positions) of the probes (Cosmos': at most ``longest`` on an axis)."""
    if isinstance(exact, GridRope):
        return [
            ((torch.zeros(1, 1, h * exact.patch, w * exact.patch),), {}, exact.positions(h, w))
            for h, w in PROBE_GRIDS
        ]
    probes = []
    for sizes in COSMOS_GRIDS:
        sizes = tuple(min(s, longest) for s in sizes)
        latent = torch.zeros(1, 1, *(s * p for s, p in zip(sizes, exact.patch, strict=True)))
        probes.append(((latent,), {}, exact.positions(*sizes)))
        probes.append(((latent,), {"fps": PROBE_FPS}, exact.positions(*sizes, fps=PROBE_FPS)))
    return probes


def prove_grid_rope(module: nn.Module, exact: GridRope | CosmosRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_grid_rope`) on
    the probe latents; else why not ("its forward ...": a form posenc does not read; "not the rotary ...":
    values other than its attributes name)."""
    read: list[list[Any]] = [[] for _ in exact.widths]  # per axis: its cos and sin, posenc's, positions
    for args, keywords, positions in _probes(exact, _longest(module)):
        mine = probed(lambda: module(*args, **keywords))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        pair = isinstance(mine, tuple | list) and len(mine) == 2
        if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
            return f"its forward returns {type(mine).__name__}, not (cos, sin)"
        ours = exact(*args, **keywords)
        if any(a.shape != b.shape for a, b in zip(mine, ours, strict=True)):
            return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
        for axis, p in enumerate(positions):
            columns = exact.columns(axis)
            values = [torch.cat([t[:, columns] for t in pair]) for pair in (mine, ours)]
            read[axis].append((*values, torch.cat([p, p]).double().numpy()))
    worst, allowed = 0.0, 0.0
    for axis, found in enumerate(read):  # every probe at once: each frequency compared at some position but 0
        theta = core.frequencies(exact.widths[axis], base=exact.thetas[axis])
        mine, ours = torch.cat([r[0] for r in found]), torch.cat([r[1] for r in found])
        checked = within_rounding(mine, ours, np.concatenate([r[2] for r in found]), theta, "half")
        if isinstance(checked, float):
            named = (
                f"widths {list(exact.widths)}, thetas {[f'{t:g}' for t in exact.thetas]}, halves of each axis"
            )
            return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def span(exact: GridRope | CosmosRope | CoordsRope | IdsRope, module: nn.Module | None = None) -> int:
    """The positions an audit reads along the first axis: CogView4's ``rope_axes_dim[0]``, Cosmos' longest
    axis (its tables' end: its ``max_size``), else 1024 (patch coordinates: 1024 patches a side)."""
    if isinstance(exact, CosmosRope):
        return _longest(module)
    if isinstance(exact, GridRope) and exact.axes:
        return exact.axes[0]
    return 1024


def axis_rows(
    module: nn.Module, exact: GridRope | CosmosRope | CoordsRope | IdsRope, positions: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) of its first axis at ``positions`` (< :func:`span`), each
    ``(1, len(positions), widths[0])`` in halves: [p·ω | p·ω]; read from a grid of one patch on the other
    axes and max + 1 on the first (CogView4's: of ``rope_axes_dim[0]`` rows, where row h is position h)."""
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    if isinstance(exact, CoordsRope | IdsRope):  # the positions themselves: (p, 0, ...) for each p
        ids = torch.zeros(positions.numel(), exact.axes, dtype=torch.int64)
        ids[:, 0] = positions
        with torch.no_grad():
            if isinstance(exact, IdsRope):
                cos, sin = (t[None] for t in module(ids))
            else:
                cos, sin = module(torch.zeros(1, positions.numel(), exact.head_dim), ids[None])
        columns = exact.columns(0)
        return cos[:, :, columns].float(), sin[:, :, columns].float()
    count = int(positions.max()) + 1 if positions.numel() else 1
    if isinstance(exact, GridRope):
        count = exact.axes[0] if exact.axes else count
        latent = torch.zeros(1, 1, count * exact.patch, exact.patch)
    else:
        latent = torch.zeros(1, 1, count * exact.patch[0], exact.patch[1], exact.patch[2])
    with torch.no_grad():
        cos, sin = module(latent)
    columns = exact.columns(0)
    return cos[positions][:, columns][None], sin[positions][:, columns][None]
