"""AnyFlow's rotaries (diffusers' ``AnyFlowRotaryPosEmbed`` and the FAR model's
``AnyFlowCausalRotaryPosEmbed``): what posenc reads of them, how they are proven, and their exact
equivalents :class:`AnyFlowRope` and :class:`AnyFlowFarRope`.

The formula. A head of ``attention_head_dim`` = n channels takes Wan's widths: h = w = 2·⌊n/6⌋ for rows
and columns, t = n − h − w for frames; axis a has the frequencies ω_i = theta^(−2i / w_a), i < w_a / 2, and
a patch at (f, y, x) the complex rotary e^{i·p_a·ω_i} of each axis' position p_a, frames' columns first:
``(1, 1, patches, n / 2)``, row-major over the grid, in float64 (complex128; float32 where the device
has no float64, as the model's own code does).

* :class:`AnyFlowRope` — ``forward(layout_cfg, device)``: the grid of ``layout_cfg["total_frames"]`` ×
  ``layout_cfg["full_frame_shape"]`` patches at integer positions -> ``{"query": r, "key": r}``.
* :class:`AnyFlowFarRope` — ``forward(far_cfg, device, clean_hidden_states=None)``: its first
  ``num_compressed_frames`` frames on the compressed grid (``compressed_frame_shape``), then the rest on
  the full grid (twice where ``clean_hidden_states`` is given). The model forms a compressed axis' rotary
  by averaging the unit rotations of k = compressed / full patch consecutive positions and normalising:
  for positions jk .. jk + k − 1 that mean is e^{iω(jk + (k−1)/2)} · sin(kω/2) / (k·sin(ω/2)), a positive
  multiple of the rotation at the window's centre wherever kω/2 < π — for every ω ≤ 1 when k ≤ 6
  (:data:`MOST_POOLED`). So the compressed positions are the centres jk + (k − 1)/2, posenc's exact values
  there; larger windows flip the sign of high frequencies, a form posenc does not read.

The proof (:func:`prove_anyflow`): its own rotaries of probe layouts (and, for FAR, with and without a
clean context) against posenc's, shapes included, each value within what float64 code errs at its
position and frequency (:func:`posenc.torch.computed.within_rounding`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core
from .computed import Refusal, forward_names, probed, within_rounding
from .functions import _encode_tensor

__all__ = ["AnyFlowFarRope", "AnyFlowRope", "axis_rows", "prove_anyflow", "read_anyflow"]

#: The forwards read, by their parameter names.
FORWARD, FAR_FORWARD = ("layout_cfg", "device"), ("far_cfg", "device", "clean_hidden_states")
#: The largest compressed window read (module docstring): for k ≤ 6, kω/2 < π for every ω ≤ 1.
MOST_POOLED = 6
#: Device types with no float64, where the model's code (diffusers' ``maybe_adjust_dtype_for_device``)
#: computes in float32, and so does posenc's.
NO_FLOAT64 = ("mps", "npu")
#: The probe grids (frames, height, width), in patches; FAR's: (frames, full grid, compressed grid,
#: compressed frames).
PROBES = ((3, 5, 7), (1, 2, 3), (7, 1, 1))
FAR_PROBES = ((4, (4, 6), (2, 3), 2), (3, (2, 2), (1, 1), 1), (2, (6, 4), (3, 2), 0))


def widths_of(head: int) -> tuple[int, int, int]:
    """Wan's widths (frames, rows, columns) of a head of ``head`` channels (module docstring)."""
    spatial = 2 * (head // 6)
    return head - 2 * spatial, spatial, spatial


class AnyFlowRope(nn.Module):
    """posenc's exact values in place of AnyFlow's rotary (module docstring), called as it is:
    ``(layout_cfg, device)`` -> ``{"query": r, "key": r}``, r the complex rotary ``(1, 1, F·H·W, head / 2)``
    complex128 of the patches of the grid ``layout_cfg`` names, each value within 1 ulp of float64 of the
    exact one (correctly rounded to float32 on a device with no float64).

    >>> r = AnyFlowRope(6, 10000.0)({"total_frames": 1, "full_frame_shape": (1, 2)}, "cpu")["query"]
    >>> r[0, 0, 1]  # patch (0, 0, 1): its columns' angle 1
    tensor([1.0000+0.0000j, 1.0000+0.0000j, 0.5403+0.8415j], dtype=torch.complex128)
    """

    def __init__(self, head: int, theta: float) -> None:
        super().__init__()
        if isinstance(head, bool) or not isinstance(head, int) or head < 6 or head % 2:
            raise ValueError(
                f"head: {head!r}; AnyFlow's rotary takes an even attention_head_dim of at least 6"
            )
        self.head, self.theta = head, float(theta)
        self.widths = widths_of(head)
        self._checked = [core.Options.check(w, self.theta, 0.0, 1.0, "sin_cos", "zero") for w in self.widths]

    def axis(self, axis: int, positions: torch.Tensor, device: Any) -> torch.Tensor:
        """The complex rotary ``(len(positions), widths[axis] / 2)`` of ``axis`` at ``positions``."""
        device = torch.device(device)
        dtype = "float32" if device.type in NO_FLOAT64 else "float64"
        values = _encode_tensor(positions.to(torch.float64), (*self._checked[axis], dtype)).to(device)
        half = self.widths[axis] // 2
        return torch.complex(values[:, half:], values[:, :half])

    def grid(self, positions: tuple[torch.Tensor, torch.Tensor, torch.Tensor], device: Any) -> torch.Tensor:
        """The rotary ``(F·H·W, head / 2)`` of the grid of each axis' ``positions``, row-major."""
        f, h, w = (self.axis(a, p, device) for a, p in enumerate(positions))
        shape = (len(positions[0]), len(positions[1]), len(positions[2]))
        parts = [
            f[:, None, None].expand(*shape, -1),
            h[None, :, None].expand(*shape, -1),
            w[None, None, :].expand(*shape, -1),
        ]
        return torch.cat(parts, dim=-1).reshape(-1, self.head // 2)

    def positions(self, layout: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Each axis' positions of the grid ``layout`` names (frames, then its full frame shape)."""
        frames, (height, width) = int(layout["total_frames"]), layout["full_frame_shape"]
        return tuple(torch.arange(int(n), dtype=torch.float64) for n in (frames, height, width))  # type: ignore[return-value]

    def forward(self, layout_cfg: Any, device: Any) -> dict[str, torch.Tensor]:
        rotary = self.grid(self.positions(layout_cfg), device)[None, None]
        return {"query": rotary, "key": rotary}

    def extra_repr(self) -> str:
        return f"head={self.head}, theta={self.theta:g}"


class AnyFlowFarRope(AnyFlowRope):
    """posenc's exact values in place of AnyFlow-FAR's causal rotary (module docstring), called as it is:
    ``(far_cfg, device, clean_hidden_states=None)`` -> ``{"query": r, "key": r}``; ``pooled`` the compressed
    window k per axis (compressed / full patch size, each ≤ :data:`MOST_POOLED`).

    >>> cfg = {"total_frames": 2, "full_frame_shape": (2, 2), "compressed_frame_shape": (1, 1),
    ...        "num_compressed_frames": 1}
    >>> r = AnyFlowFarRope(6, 10000.0, (1, 2, 2))(cfg, "cpu")["query"]
    >>> r[0, 0, 0]  # the compressed frame's patch: rows and columns at 0.5
    tensor([1.0000+0.0000j, 0.8776+0.4794j, 0.8776+0.4794j], dtype=torch.complex128)
    """

    def __init__(self, head: int, theta: float, pooled: tuple[int, int, int]) -> None:
        super().__init__(head, theta)
        if len(pooled) != 3 or not all(isinstance(k, int) and 1 <= k <= MOST_POOLED for k in pooled):
            raise ValueError(f"pooled: {pooled!r}; three windows of 1 to {MOST_POOLED} patches")
        self.pooled = tuple(pooled)

    def rows(self, far_cfg: Any, clean: bool) -> list[tuple[tuple[torch.Tensor, ...], slice]]:
        """The grids of the output, in order: (each axis' positions, the frames kept)."""
        frames, kept = int(far_cfg["total_frames"]), int(far_cfg["num_compressed_frames"])
        full = self.positions(far_cfg)
        shape = far_cfg["compressed_frame_shape"]
        compressed = tuple(
            k * torch.arange(int(n), dtype=torch.float64) + (k - 1) / 2
            for k, n in zip(self.pooled, (frames, *shape), strict=True)
        )
        grids = [(compressed, slice(0, kept)), (full, slice(kept, None))]
        return grids + [(full, slice(kept, None))] * clean

    def forward(  # type: ignore[override]
        self, far_cfg: Any, device: Any, clean_hidden_states: Any = None
    ) -> dict[str, torch.Tensor]:
        parts = []
        for positions, frames in self.rows(far_cfg, clean_hidden_states is not None):
            parts.append(self.grid((positions[0][frames], *positions[1:]), device))
        rotary = torch.cat(parts)[None, None]
        return {"query": rotary, "key": rotary}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, pooled={self.pooled}"


def _head_and_theta(module: nn.Module) -> tuple[int, float] | None:
    head, theta = getattr(module, "attention_head_dim", None), getattr(module, "theta", None)
    if isinstance(head, bool) or not isinstance(head, int) or head < 6 or head % 2:
        return None
    if isinstance(theta, bool) or not isinstance(theta, int | float) or not theta > 1:
        return None
    return head, float(theta)


def read_anyflow(module: nn.Module) -> AnyFlowRope | None:
    """posenc's equivalent of ``module`` where it has AnyFlow's form (:data:`FORWARD`, or FAR's
    :data:`FAR_FORWARD` with ``patch_size`` and ``compressed_patch_size`` of three ints whose windows are
    each at most :data:`MOST_POOLED`; an even ``attention_head_dim`` ≥ 6, ``theta`` > 1), holding no
    buffer; else None. Whether it computes what they say is :func:`prove_anyflow`'s to tell."""
    if isinstance(module, AnyFlowRope):  # posenc's own, patched in
        return module
    names = forward_names(module)
    if names not in (FORWARD, FAR_FORWARD) or any(True for _ in module.buffers(recurse=False)):
        return None
    read = _head_and_theta(module)
    if read is None:
        return None
    if names == FORWARD:
        return AnyFlowRope(*read)
    full, compressed = getattr(module, "patch_size", None), getattr(module, "compressed_patch_size", None)
    sizes = [full, compressed]
    if not all(isinstance(s, tuple | list) and len(s) == 3 for s in sizes):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for s in sizes for v in s):
        return None
    if any(c % f for f, c in zip(full, compressed, strict=True)):
        return None
    pooled = tuple(c // f for f, c in zip(full, compressed, strict=True))
    return AnyFlowFarRope(*read, pooled) if max(pooled) <= MOST_POOLED else None


def _probes(exact: AnyFlowRope) -> list[tuple[tuple[Any, ...], list[tuple[torch.Tensor, ...]]]]:
    """(arguments, each output row's positions per axis as one ``(rows, 3)`` tensor) of the probes."""
    cpu = torch.device("cpu")
    if not isinstance(exact, AnyFlowFarRope):
        probes = []
        for frames, height, width in PROBES:
            layout = {"total_frames": frames, "full_frame_shape": (height, width)}
            probes.append(((layout, cpu), _grid_ids([(exact.positions(layout), slice(None))])))
        return probes
    probes = []
    for frames, full, compressed, kept in FAR_PROBES:
        cfg = {
            "total_frames": frames,
            "full_frame_shape": full,
            "compressed_frame_shape": compressed,
            "num_compressed_frames": kept,
        }
        for clean in (None, torch.zeros(1)):
            probes.append(((cfg, cpu, clean), _grid_ids(exact.rows(cfg, clean is not None))))
    return probes


def _grid_ids(grids: list[tuple[tuple[torch.Tensor, ...], slice]]) -> torch.Tensor:
    """The positions ``(rows, 3)`` of the rows of ``grids`` (each axis' positions, the frames kept)."""
    ids = []
    for positions, frames in grids:
        mesh = torch.meshgrid(positions[0][frames], *positions[1:], indexing="ij")
        ids.append(torch.stack([m.reshape(-1) for m in mesh], dim=-1))
    return torch.cat(ids)


def prove_anyflow(module: nn.Module, exact: AnyFlowRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_anyflow`) on
    the probe layouts; else why not ("its forward ...": a form posenc does not read; "not the rotary ...":
    values other than its attributes name)."""
    longest = span(module, exact)
    read: list[list[Any]] = [[] for _ in exact.widths]
    for args, ids in _probes(exact):
        if max(int(args[0]["total_frames"]), *args[0]["full_frame_shape"]) > longest:
            continue  # beyond its tables
        mine = probed(lambda: module(*args))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        ours = exact(*args)
        if not (isinstance(mine, dict) and mine.keys() == ours.keys()):
            return f"its forward returns {type(mine).__name__}, not {{'query': ..., 'key': ...}}"
        for key, value in mine.items():
            if (
                not isinstance(value, torch.Tensor)
                or not value.is_complex()
                or value.shape != ours[key].shape
            ):
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                return f"its forward's {key!r} is {shape}, not a complex {tuple(ours[key].shape)}"
            start = 0
            for axis, width in enumerate(exact.widths):
                columns = slice(start, start + width // 2)
                pair = [
                    torch.cat([t[0, 0, :, columns].real, t[0, 0, :, columns].imag], -1)
                    for t in (value, ours[key])
                ]
                read[axis].append((*pair, ids[:, axis].numpy()))
                start += width // 2
    if not read[0]:
        return "its forward's tables are shorter than posenc's probe"
    worst, allowed = 0.0, 0.0
    for axis, found in enumerate(read):
        theta = core.frequencies(exact.widths[axis], base=exact.theta)
        mine, ours = torch.cat([r[0] for r in found]), torch.cat([r[1] for r in found])
        checked = within_rounding(
            mine, ours, np.concatenate([r[2] for r in found]), theta, "half", torch.float64
        )
        if isinstance(checked, float):
            named = f"head {exact.head} (widths {list(exact.widths)}), theta {exact.theta:g}"
            return f"not the rotary its attributes name ({named}) within float64 rounding ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def span(module: nn.Module, exact: AnyFlowRope) -> int:
    """The frame positions an audit reads: as many as its tables hold (its ``max_seq_len``; FAR's: that over
    its frames' window, as its compressed table of every frame must hold them), at most 1024."""
    longest = getattr(module, "max_seq_len", None)
    if not isinstance(longest, int) or isinstance(longest, bool) or longest <= 0:
        return 1024
    return min(longest // (exact.pooled[0] if isinstance(exact, AnyFlowFarRope) else 1), 1024)


def axis_rows(module: nn.Module, exact: AnyFlowRope, positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) of the frames at ``positions`` (< :func:`span`), each ``(1, k, widths[0])`` in
    halves: [p·ω | p·ω]; read from a grid of one patch per frame (FAR's: no compressed frame)."""
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    count = int(positions.max()) + 1 if positions.numel() else 1
    cfg: dict[str, Any] = {"total_frames": count, "full_frame_shape": (1, 1)}
    args: tuple[Any, ...] = (cfg, torch.device("cpu"))
    if isinstance(exact, AnyFlowFarRope):
        cfg.update(compressed_frame_shape=(1, 1), num_compressed_frames=0)
        args = (*args, None)
    with torch.no_grad():
        rotary = module(*args)["query"][0, 0, positions, : exact.widths[0] // 2]
    return torch.cat([rotary.real, rotary.real], -1)[None], torch.cat([rotary.imag, rotary.imag], -1)[None]
