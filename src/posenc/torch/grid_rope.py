"""The 2-D rotary of a latent's grid in the halves layout (diffusers' CogView4 and GLM-Image
``RotaryPosEmbed``): what posenc reads of it, how it is proven, and its exact equivalent :class:`GridRope`.

The formula. A latent ``(B, C, H, W)`` of H' × W' patches (H' = H // patch_size); each patch (h, w) has the
positions h and w — CogView4 maps them onto its fixed ``rope_axes_dim`` (A_h, A_w) as ⌊h · A_h / H'⌋ and
⌊w · A_w / W'⌋. Each axis takes half of ``dim``: with q = dim / 4 frequencies ω_i = theta^(−2i / (dim/2)),
its angles are [h·ω | w·ω], and cos and sin are each ``(H'·W', dim)``: [h·ω | w·ω | h·ω | w·ω] (the halves
layout of both axes), patches row-major.

The proof (:func:`prove_grid_rope`): its own (cos, sin) of probe latents (grids smaller and larger than
CogView4's axes) against posenc's, shapes included, each value within what float32 code errs at its
position and frequency.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core
from .computed import _within_float32
from .functions import _encode_tensor

__all__ = ["GridRope", "prove_grid_rope", "read_grid_rope"]

#: The forward read: ``(hidden_states)``, a latent ``(B, C, H, W)``.
FORWARD = ("hidden_states",)
#: The probe grids (H', W') in patches.
PROBE_GRIDS = ((5, 7), (1, 3), (40, 24))


class GridRope(nn.Module):
    """posenc's exact values in place of a 2-D rotary of a latent's grid (module docstring), called as it
    is: ``hidden_states`` ``(B, C, H, W)`` -> ``(cos, sin)``, each ``(H'·W', dim)`` float32 on its device;
    ``axes``: CogView4's ``rope_axes_dim`` (None: the patches' own indices).

    >>> cos, sin = GridRope(8, 100.0, 1)(torch.zeros(1, 1, 1, 2))  # patches (0, 0) and (0, 1)
    >>> sin
    tensor([[0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
            [0.0000, 0.0000, 0.8415, 0.0998, 0.0000, 0.0000, 0.8415, 0.0998]])
    """

    def __init__(self, dim: int, theta: float, patch: int, axes: tuple[int, int] | None = None) -> None:
        super().__init__()
        if dim < 4 or dim % 4:
            raise ValueError(f"dim: {dim}; a 2-D rotary in halves takes a multiple of 4 channels")
        self.dim, self.theta, self.patch = int(dim), float(theta), int(patch)
        self.axes = None if axes is None else (int(axes[0]), int(axes[1]))
        self._checked = core.Options.check(self.dim // 2, self.theta, 0.0, 1.0, "sin_cos", "zero")

    def positions(self, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The positions (h, w) of each patch of an ``height`` × ``width`` grid, row-major, as int64."""
        h, w = torch.arange(height), torch.arange(width)
        if self.axes is not None:
            h, w = h * self.axes[0] // height, w * self.axes[1] // width
        grid = torch.meshgrid(h, w, indexing="ij")
        return grid[0].reshape(-1), grid[1].reshape(-1)

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if hidden_states.dim() != 4:
            raise ValueError(f"hidden_states: shape {tuple(hidden_states.shape)}; expected (B, C, H, W)")
        height, width = hidden_states.shape[2] // self.patch, hidden_states.shape[3] // self.patch
        device = hidden_states.device
        quarter = self.dim // 4
        sin, cos = [], []
        for positions in self.positions(height, width):
            values = _encode_tensor(positions.to(device), (*self._checked, "float32"))
            sin.append(values[:, :quarter])
            cos.append(values[:, quarter:])
        return torch.cat(cos + cos, dim=-1), torch.cat(sin + sin, dim=-1)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, theta={self.theta:g}, patch={self.patch}" + (
            f", axes={self.axes}" if self.axes else ""
        )


def read_grid_rope(module: nn.Module) -> GridRope | None:
    """posenc's equivalent of ``module`` where its forward is ``(hidden_states)`` and it names ``dim`` (a
    multiple of 4), ``patch_size`` (an int), ``theta`` > 1 and no ``rope_dim`` (HunyuanVideo's form) —
    and, where it has one, a ``rope_axes_dim`` of two ints; else None. Whether it computes what they say is
    :func:`prove_grid_rope`'s to tell."""
    if isinstance(module, GridRope):  # posenc's own, patched in
        return module
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    dim, patch, theta = (getattr(module, k, None) for k in ("dim", "patch_size", "theta"))
    axes = getattr(module, "rope_axes_dim", None)
    if names != FORWARD or hasattr(module, "rope_dim") or any(True for _ in module.buffers(recurse=False)):
        return None
    ints = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (dim, patch))
    number = isinstance(theta, int | float) and not isinstance(theta, bool) and theta > 1
    if not (ints and number) or dim % 4:
        return None
    if axes is not None:
        fits = isinstance(axes, tuple | list) and len(axes) == 2
        if not (fits and all(isinstance(a, int) and not isinstance(a, bool) and a > 0 for a in axes)):
            return None
    return GridRope(dim, theta, patch, None if axes is None else tuple(axes))


def prove_grid_rope(module: nn.Module, exact: GridRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_grid_rope`) on
    the probe latents; else why not ("its forward ...": a form posenc does not read; "not the rotary ...":
    values other than its attributes name)."""
    quarter = exact.dim // 4
    theta = core.frequencies(exact.dim // 2, base=exact.theta)
    read: list[list[Any]] = [[], []]  # per axis: (its cos and sin, posenc's, their positions) of each probe
    for height, width in PROBE_GRIDS:
        latent = torch.zeros(1, 1, height * exact.patch, width * exact.patch)
        try:
            with torch.no_grad():
                mine = module(latent)
        except Exception as error:  # its own code refuses the probe: another form of the same names
            return f"its forward refuses posenc's probe ({type(error).__name__}: {str(error)[:100]})"
        pair = isinstance(mine, tuple | list) and len(mine) == 2
        if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
            return f"its forward returns {type(mine).__name__}, not (cos, sin)"
        ours = exact(latent)
        if any(a.shape != b.shape for a, b in zip(mine, ours, strict=True)):
            return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not {tuple(ours[0].shape)}"
        for axis, positions in enumerate(exact.positions(height, width)):
            columns = np.r_[
                axis * quarter : (axis + 1) * quarter, (axis + 2) * quarter : (axis + 3) * quarter
            ]
            values = [torch.cat([t[:, columns] for t in pair]) for pair in (mine, ours)]
            read[axis].append((*values, torch.cat([positions, positions]).double().numpy()))
    worst, allowed = 0.0, 0.0
    for axis in read:  # every probe at once: each frequency compared at some position but 0
        positions = np.concatenate([r[2] for r in axis])
        checked = _within_float32(
            torch.cat([r[0] for r in axis]), torch.cat([r[1] for r in axis]), positions, theta, "half"
        )
        if isinstance(checked, float):
            named = f"dim {exact.dim}, theta {exact.theta:g}, halves of each axis"
            return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def span(exact: GridRope) -> int:
    """The positions an audit reads along the first axis: CogView4's ``rope_axes_dim[0]``, else 1024."""
    return exact.axes[0] if exact.axes else 1024


def axis_rows(module: nn.Module, exact: GridRope, positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) of its first axis at ``positions`` (< :func:`span`), each
    ``(1, len(positions), dim / 2)`` in halves: [h·ω | h·ω]; read from a grid of one column and max + 1 rows
    (CogView4's: of ``rope_axes_dim[0]`` rows, where row h is position h)."""
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    count = exact.axes[0] if exact.axes else (int(positions.max()) + 1 if positions.numel() else 1)
    quarter = exact.dim // 4
    with torch.no_grad():
        cos, sin = module(torch.zeros(1, 1, count * exact.patch, exact.patch))
    columns = np.r_[0:quarter, 2 * quarter : 3 * quarter]
    return cos[positions][:, columns][None], sin[positions][:, columns][None]


def within_float32(module: nn.Module, exact: GridRope) -> float | None:
    """The largest allowance where every value of ``module``'s first axis at 0 .. :func:`span` − 1 is within
    what float32 code errs at its position and frequency, else None."""
    positions = np.arange(span(exact))
    mine, ours = axis_rows(module, exact, positions), axis_rows(exact, exact, positions)
    theta = core.frequencies(exact.dim // 2, base=exact.theta)
    read = torch.cat([t[0] for t in mine]), torch.cat([t[0] for t in ours])
    checked = _within_float32(*read, np.concatenate([positions, positions]).astype(np.float64), theta, "half")
    return None if isinstance(checked, float) else checked[1]
