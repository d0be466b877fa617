"""Kandinsky 5's and 6's rotaries of rotation matrices (diffusers' ``Kandinsky5RoPE1D``/``3D``,
``Kandinsky6RoPE1D``/``3D`` and the super-resolution model's ``Kandinsky6SRRoPE3D``): what posenc reads of
them, how they are proven, and their exact equivalents :class:`KandinskyRope1D` and :class:`KandinskyRope3D`.

The formula. An axis of width d has the frequencies ω_i = s · P^(−2i/d), i < d/2 (P its ``max_period``; s
Kandinsky 6's ``freqs_scaling``, else 1), held as a table of angles p·ω_i for the integer positions p <
``max_pos``; a call gives, for each position, the rotation matrices [[cos, −sin], [sin, cos]] of its angles,
``(..., 1, d/2, 2, 2)`` (an axis of one head). The 3-D rotaries have an axis each for frames, rows and columns
(``axes_dims``), their angles side by side per patch (frames first), each divided by its ``scale_factor``
(posenc: the position p / s, formed in float64); Kandinsky 5's takes ``(shape, pos, scale_factor)`` and gives
``(B, T, H, W, 1, Σd/2, 2, 2)``, Kandinsky 6's ``(pos, scale_factor)`` and ``(T, H, W, 1, Σd/2, 2, 2)``.

The proof (:func:`prove_kandinsky`): its own matrices of probe positions (and scale factors) against
posenc's, shapes included, rotations as they must be, each cos and sin within what float32 code errs at its
position and frequency.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core, validation
from ..errors import PosencValueError
from .computed import Refusal, forward_names, probed, within_rounding
from .functions import _encode_tensor
from .tensors import _position_tensor, _tracing

__all__ = ["KandinskyRope1D", "KandinskyRope3D", "prove_kandinsky", "read_kandinsky"]

#: The forwards read: 1-D ``(pos)``; Kandinsky 5's 3-D ``(shape, pos, scale_factor)``, Kandinsky 6's
#: ``(pos, scale_factor)``.
FORWARD_1D, FORWARD_5, FORWARD_6 = ("pos",), ("shape", "pos", "scale_factor"), ("pos", "scale_factor")
#: The probes' scale factors of the 3-D rotaries, and their grids (frames, rows, columns).
PROBE_SCALES = ((1.0, 1.0, 1.0), (2.0, 1.0, 3.0))
PROBE_GRIDS = ((3, 5, 7), (1, 2, 24))


def _matrices(cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """[[cos, −sin], [sin, cos]] of each value, an axis of one head before them: ``(..., 1, n, 2, 2)``."""
    return torch.stack([cos, -sin, sin, cos], dim=-1).reshape(*cos.shape, 2, 2).unsqueeze(-4)


def _values(positions: Any, checked: tuple, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) ``positions.shape + (width / 2,)`` float32, exact, of integer or real positions (an int or a
    list as the original's table index takes them). A negative integer is refused where it is read on the
    host: the original indexes its table with it (−1: its last row), posenc computes positions."""
    positions = _position_tensor(positions, differentiable=True)
    host_ints = positions.device.type == "cpu" and not _tracing() and not positions.is_floating_point()
    if host_ints and positions.numel() and bool((positions < 0).any()):
        raise ValueError(
            f"pos: {int(positions.min())} is negative; the original reads row pos of its table (from the "
            "end for a negative one), posenc computes position pos: give positions >= 0"
        )
    values = _encode_tensor(positions, (*checked, "float32"))
    return values[..., width // 2 :], values[..., : width // 2]


class KandinskyRope1D(nn.Module):
    """posenc's exact values in place of Kandinsky's 1-D rotary (module docstring), called as it is:
    ``pos`` (integer positions, any shape) -> rotation matrices ``pos.shape + (1, dim / 2, 2, 2)`` float32.

    >>> KandinskyRope1D(2, 10000.0)(torch.tensor([1]))[0, 0, 0]
    tensor([[ 0.5403, -0.8415],
            [ 0.8415,  0.5403]])
    """

    def __init__(self, dim: int, max_period: float, scaling: float = 1.0) -> None:
        super().__init__()
        self.dim = validation.integer("dim", dim, minimum=2)
        self.max_period, self.scaling = float(max_period), float(scaling)
        self._checked = core.Options.check(self.dim, self.max_period, 0.0, self.scaling, "sin_cos", "zero")

    @property
    def widths(self) -> tuple[int, ...]:
        return (self.dim,)

    @property
    def frequencies(self) -> list[np.ndarray]:
        return [core.frequencies(self.dim, base=self.max_period, scale=self.scaling)]

    def forward(self, pos: torch.Tensor) -> torch.Tensor:
        return _matrices(*_values(pos, self._checked, self.dim))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, max_period={self.max_period:g}" + (
            f", scaling={self.scaling:g}" if self.scaling != 1 else ""
        )


class KandinskyRope3D(nn.Module):
    """posenc's exact values in place of Kandinsky's 3-D rotary (module docstring), called as it is
    (``form`` 5: ``(shape, pos, scale_factor)`` -> ``(B, T, H, W, 1, Σd/2, 2, 2)``, shape ``(B, T, H, W)``
    with T, H, W the sizes of pos; 6: ``(pos, scale_factor)`` -> ``(T, H, W, 1, Σd/2, 2, 2)``), float32, a
    tensor of its own (contiguous, writable in place).

    >>> rope = KandinskyRope3D((2, 2, 2), 10000.0, 6)  # cos and sin of frame 1 at a scale of 2: 1 / 2
    >>> rope((torch.tensor([1]), torch.tensor([0]), torch.tensor([0])), (2.0, 1.0, 1.0))[0, 0, 0, 0, 0, :, 0]
    tensor([0.8776, 0.4794])
    """

    def __init__(self, axes_dims: tuple[int, int, int], max_period: float, form: int) -> None:
        super().__init__()
        self.axes_dims, self.max_period, self.form = (
            tuple(validation.integer(f"axes_dims[{i}]", d, minimum=2) for i, d in enumerate(axes_dims)),
            float(max_period),
            int(form),
        )
        self._checked = [
            core.Options.check(d, self.max_period, 0.0, 1.0, "sin_cos", "zero") for d in self.axes_dims
        ]

    @property
    def widths(self) -> tuple[int, ...]:
        return self.axes_dims

    @property
    def frequencies(self) -> list[np.ndarray]:
        return [core.frequencies(d, base=self.max_period) for d in self.axes_dims]

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        names = FORWARD_5 if self.form == 5 else FORWARD_6
        given = dict(zip(names, args, strict=False)) | kwargs
        pos, scales = given["pos"], given.get("scale_factor", (1.0, 1.0, 1.0))
        sizes = [int(p.shape[0]) for p in pos]
        cos, sin = [], []
        for axis, (p, scale, checked, width) in enumerate(
            zip(pos, scales, self._checked, self.axes_dims, strict=True)
        ):
            positions = p if float(scale) == 1 else p.to(torch.float64) / float(scale)
            c, s = _values(positions, checked, width)
            view = [1, 1, 1, width // 2]
            view[axis] = sizes[axis]
            cos.append(c.reshape(view).expand(*sizes, -1))
            sin.append(s.reshape(view).expand(*sizes, -1))
        rope = _matrices(torch.cat(cos, dim=-1), torch.cat(sin, dim=-1))
        if self.form == 5:  # (B, T, H, W): T, H and W the sizes of pos, as the original's views require
            shape = tuple(given["shape"])
            if len(shape) != 4 or list(shape[1:]) != sizes:
                raise PosencValueError(
                    f"shape: {shape}; expected (batch, T, H, W) with (T, H, W) = {tuple(sizes)}, the sizes "
                    f"of pos; pass shape=(batch, {', '.join(map(str, sizes))})",
                    parameter="shape",
                )
            rope = rope[None].repeat(int(shape[0]), *[1] * rope.dim())  # its own memory, as the original's
        return rope

    def extra_repr(self) -> str:
        return f"axes_dims={self.axes_dims}, max_period={self.max_period:g}, form={self.form}"


def _even(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 2 and value % 2 == 0


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def read_kandinsky(module: nn.Module) -> KandinskyRope1D | KandinskyRope3D | None:
    """posenc's equivalent of ``module`` where it has one of Kandinsky's forms (its forward's names; 1-D:
    ``dim`` even, ``max_period`` > 1 and, where it has one, ``freqs_scaling``; 3-D: ``axes_dims`` of three
    even widths and ``max_period``), built from its attributes; else None. Whether it computes what they say
    is :func:`prove_kandinsky`'s to tell."""
    if isinstance(module, KandinskyRope1D | KandinskyRope3D):  # posenc's own, patched in
        return module
    names, period = forward_names(module), _number(getattr(module, "max_period", None))
    if period is None or period <= 1 or not hasattr(module, "max_pos"):
        return None
    if names == FORWARD_1D:
        dim, scaling = getattr(module, "dim", None), _number(getattr(module, "freqs_scaling", 1.0))
        return KandinskyRope1D(dim, period, scaling) if _even(dim) and scaling is not None else None
    axes = getattr(module, "axes_dims", None)
    if names not in (FORWARD_5, FORWARD_6) or not isinstance(axes, tuple | list) or len(axes) != 3:
        return None
    if not all(_even(d) for d in axes):
        return None
    return KandinskyRope3D(tuple(axes), period, 5 if names == FORWARD_5 else 6)


def _limits(module: nn.Module, axes: int) -> list[int]:
    """The positions its tables hold on each axis (its ``max_pos``)."""
    held = getattr(module, "max_pos", 1024)
    held = list(held) if isinstance(held, tuple | list) else [held] * axes
    return [int(h) for h in held]


def _probes(
    module: nn.Module, exact: KandinskyRope1D | KandinskyRope3D
) -> list[tuple[tuple, list[torch.Tensor]]]:
    """(args, each axis' positions as a flat float64 tensor, in the order of the output's cells)."""
    if isinstance(exact, KandinskyRope1D):
        top = min(_limits(module, 1)[0], 1024)
        pos = torch.arange(top)
        return [((pos,), [pos.double()]), ((pos[None, :5].expand(2, -1),), [pos[:5].double().repeat(2)])]
    limits = _limits(module, 3)
    probes = []
    for grid in PROBE_GRIDS:
        sizes = [min(s, limit) for s, limit in zip(grid, limits, strict=True)]
        pos = tuple(torch.arange(s) for s in sizes)
        for scales in PROBE_SCALES:
            args: tuple = (pos, scales) if exact.form == 6 else ((1, *sizes), pos, scales)
            mesh = torch.meshgrid(*(p.double() / s for p, s in zip(pos, scales, strict=True)), indexing="ij")
            probes.append((args, [m.reshape(-1) for m in mesh]))
    return probes


def _cos_sin(matrices: Any, count: int) -> tuple[torch.Tensor, torch.Tensor] | str:
    """(cos, sin) ``(cells, Σd/2)`` of rotation matrices; else what they are not."""
    if not isinstance(matrices, torch.Tensor) or matrices.shape[-2:] != (2, 2) or matrices.shape[-4] != 1:
        return "its forward returns no rotation matrices (..., 1, Σd/2, 2, 2)"
    cos, sin = matrices[..., 0, 0], matrices[..., 1, 0]
    if not (torch.equal(matrices[..., 0, 1], -sin) and torch.equal(matrices[..., 1, 1], cos)):
        return "its matrices are not rotations [[cos, −sin], [sin, cos]]"
    return cos.reshape(count, -1), sin.reshape(count, -1)


def prove_kandinsky(module: nn.Module, exact: KandinskyRope1D | KandinskyRope3D) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_kandinsky`) on
    the probes; else why not ("its forward ...": a form posenc does not read; "not the rotary ...": values
    other than its attributes name)."""
    read: list[list[Any]] = [[] for _ in exact.widths]
    for args, positions in _probes(module, exact):
        mine = probed(lambda: module(*args))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        ours = exact(*args)
        if not isinstance(mine, torch.Tensor) or mine.shape != ours.shape:
            return f"its forward returns shape {tuple(getattr(mine, 'shape', ()))}, not {tuple(ours.shape)}"
        count = positions[0].numel() * (int(args[0][0]) if getattr(exact, "form", 0) == 5 else 1)
        pairs = [_cos_sin(t, count) for t in (mine, ours)]
        if isinstance(pairs[0], str):
            return pairs[0]
        start = 0
        for axis, width in enumerate(exact.widths):
            columns = slice(start, start + width // 2)
            p = positions[axis].repeat(count // positions[axis].numel())
            values = [torch.cat([pair[0][:, columns], pair[1][:, columns]]) for pair in pairs]
            read[axis].append((*values, torch.cat([p, p]).numpy()))
            start += width // 2
    worst, allowed = 0.0, 0.0
    for axis, found in enumerate(read):
        mine, ours = torch.cat([r[0] for r in found]), torch.cat([r[1] for r in found])
        positions = np.concatenate([r[2] for r in found])
        checked = within_rounding(mine, ours, positions, exact.frequencies[axis], "half")
        if isinstance(checked, float):
            named = f"widths {list(exact.widths)}, max_period {exact.max_period:g}"
            return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def axis_rows(
    module: nn.Module, exact: KandinskyRope1D | KandinskyRope3D, positions: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) of its first axis at ``positions`` (< its ``max_pos`` there), the others at
    0, each ``(1, len(positions), d)`` in RoPE's halves: [c | c]."""
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    if isinstance(exact, KandinskyRope1D):
        args: tuple = (positions,)
    else:
        pos = (positions, torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64))
        args = (
            (pos, (1.0, 1.0, 1.0)) if exact.form == 6 else ((1, len(positions), 1, 1), pos, (1.0, 1.0, 1.0))
        )
    with torch.no_grad():
        pair = _cos_sin(module(*args), len(positions))
    if isinstance(pair, str):
        raise ValueError(pair)
    half = exact.widths[0] // 2  # [c | c]: RoPE's halves
    return tuple(torch.cat([t[:, :half], t[:, :half]], dim=-1)[None] for t in pair)  # type: ignore[return-value]


def span(module: nn.Module, exact: KandinskyRope1D | KandinskyRope3D) -> int:
    """The positions an audit reads along the first axis: its table's (``max_pos``), at most 2048."""
    return min(_limits(module, len(exact.widths))[0], 2048)
