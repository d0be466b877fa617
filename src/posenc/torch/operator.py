"""The operator ``torch.ops.posenc.exact``: the portable algorithm (:mod:`posenc.portable`) as a PyTorch
custom operator, registered once, when this module is first imported (by :mod:`posenc.torch.functions`).

Its kernel runs on the tensors' own device: on CUDA one Triton kernel
(:mod:`posenc.torch.kernels.encode_kernel`, when triton is installed), elsewhere (MPS, ``meta``, the CPU) the
portable algorithm. No host transfer and no sync, so ``torch.compile`` and ``torch.export`` trace through it
without breaking the graph, and CUDA graphs capture it; its fake kernel gives the output's shape and dtype.
Invalid positions give rows of NaN (a device cannot raise without a sync).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import core, portable
from .kernels import encode_launch, table_launch
from .kernels.common import KERNEL_DEVICES
from .tensors import _tracing


def _exact(
    positions: torch.Tensor,
    offset: torch.Tensor | None,
    d_model: int,
    base: float,
    shift: float,
    scale: float,
    layout: str,
    odd: str,
    dtype_name: str,
) -> torch.Tensor:
    """The portable algorithm on ``positions``' device: (positions + offset).shape + (d_model,)."""
    request = _request((d_model, base, shift, scale, layout, odd, dtype_name))
    if offset is not None:
        offset = offset.to(positions.device)
    return encode_launch.encode(positions, request, offset)


_exact_op = torch.library.custom_op("posenc::exact", _exact, mutates_args=())


@_exact_op.register_fake
def _exact_fake(positions, offset, d_model, base, shift, scale, layout, odd, dtype_name):
    shape = positions.shape if offset is None else torch.broadcast_shapes(positions.shape, offset.shape)
    return positions.new_empty((*shape, d_model), dtype=getattr(torch, dtype_name))


def _table(
    length: int,
    start: int,
    where: torch.device,
    d_model: int,
    base: float,
    shift: float,
    scale: float,
    layout: str,
    odd: str,
    dtype_name: str,
) -> torch.Tensor:
    """The table of positions ``start .. start + length - 1`` (valid: |p| < 2**31) on ``where``: on CUDA by
    angle addition, certified per element (:mod:`posenc.torch.kernels.table_launch`), elsewhere the portable
    algorithm over the positions; the same bits either way."""
    request = _request((d_model, base, shift, scale, layout, odd, dtype_name))
    return table_launch.table(length, start, request, where)


_table_op = torch.library.custom_op("posenc::table", _table, mutates_args=())


@_table_op.register_fake
def _table_fake(length, start, where, d_model, base, shift, scale, layout, odd, dtype_name):
    return torch.empty((length, d_model), dtype=getattr(torch, dtype_name), device=where)


def direct(tensor: torch.Tensor) -> bool:
    """Whether an eager call on ``tensor`` may launch posenc's CUDA kernel itself rather than through the
    operator: a plain tensor on a kernel device, in :func:`_plain_eager` mode. The operators have no
    autograd formula and their fake kernels serve only tracing, so there the dispatcher adds nothing but
    its cost (~30 us a call: a decode step's budget)."""
    return type(tensor) is torch.Tensor and tensor.device.type in KERNEL_DEVICES and _plain_eager()


#: torch's functorch check (vmap, grad), where this torch has it.
_FUNCTORCH_ACTIVE = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def _plain_eager() -> bool:
    """Not traced (compile, export, ONNX, jit), no functorch transform, and no dispatch mode (FakeTensorMode
    of a non-strict export, FlopCounterMode, ...) that the operator must see."""
    return not _tracing() and not _FUNCTORCH_ACTIVE() and _get_current_dispatch_mode() is None


def exact(positions: torch.Tensor, offset: torch.Tensor | None, options: tuple) -> torch.Tensor:
    """``torch.ops.posenc.exact(positions, offset, *options)``; eager CUDA calls skip the dispatcher."""
    if direct(positions):
        return _exact(positions, offset, *options)
    return torch.ops.posenc.exact(positions, offset, *options)


def table(length: int, start: int, where: torch.device, options: tuple) -> torch.Tensor:
    """``torch.ops.posenc.table(length, start, where, *options)``; eager CUDA calls skip the dispatcher."""
    if where.type in KERNEL_DEVICES and _plain_eager():
        return _table(length, start, where, *options)
    return torch.ops.posenc.table(length, start, where, *options)


@functools.lru_cache(maxsize=64)
def _request(options: tuple) -> Any:
    """The portable algorithm's host constants for (d_model, base, shift, scale, layout, odd, dtype name)."""
    *core_options, dtype_name = options
    return portable.request_for(core.Options(*core_options), dtype_name)
