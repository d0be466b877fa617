"""Tensors in and out of the PyTorch adapter: dtype names, NumPy to torch without changing a bit, positions
and offsets converted to dtypes the encoders take (every value exactly), and the checks of their values
that run on the host (eager CPU calls; on a device invalid positions give rows of NaN instead)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import adapters, validation
from ..errors import PosencTypeError, PosencValueError

_DTYPE_NAMES = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES.values():  # "bfloat16" as well as torch.bfloat16
        return dtype
    if dtype not in _DTYPE_NAMES:
        raise PosencValueError(
            "dtype must be one of torch.float64, torch.float32, torch.float16, torch.bfloat16 "
            f"(or their names, e.g. 'bfloat16'); got {dtype!r}",
            parameter="dtype",
        )
    return _DTYPE_NAMES[dtype]


def _numpy_dtype(name: str) -> np.dtype:
    return validation.dtype(name)


def _to_tensor(values: np.ndarray) -> torch.Tensor:
    """NumPy -> torch without changing a bit (bfloat16 travels as its 16-bit pattern)."""
    if values.dtype.name == "bfloat16":
        return torch.from_numpy(values.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(values)


def _position_tensor(positions: Any, *, differentiable: bool = False) -> torch.Tensor:
    """Positions as a tensor, their dtype checked and made one the encoders take, exactly (values are
    checked where they live: see :func:`_check_positions_on_host`; on a device invalid positions give NaN
    rows). Positions that require a gradient are refused unless ``differentiable`` (the encodings'
    callers, whose result has a derivative in them: :class:`posenc.torch.functions._Differentiated`).

    Not a tensor (a number, a list, a NumPy array): Python floats are float64 and Python ints int64, as
    NumPy takes them (``torch.as_tensor`` would round floats to float32). Unsigned 16/32/64-bit tensors
    become int32/int64, float8 ones float32: every value converts exactly.
    """
    if positions is None or isinstance(positions, str | bytes):
        raise PosencTypeError(
            f"positions must be a tensor of integers or real numbers; got {positions!r}",
            parameter="positions",
        )
    if isinstance(positions, torch.Tensor):
        tensor = positions
    elif _tracing():  # a Python number (or a list) seen by torch.compile: no NumPy there
        tensor = torch.as_tensor(positions)
        if tensor.is_floating_point():
            tensor = torch.as_tensor(positions, dtype=torch.float64)
    else:
        array = adapters.exact_float32(validation.position_array(positions))  # names ragged lists
        if array.dtype.kind not in "biuf" or array.dtype.itemsize > 8:
            array = validation.positions(array)  # float64, or a TypeError/ValueError naming positions
        tensor = torch.as_tensor(array)
    if tensor.is_nested or tensor.layout != torch.strided:
        what = (
            "a nested tensor" if tensor.is_nested else f"a {str(tensor.layout).removeprefix('torch.')} tensor"
        )
        raise PosencTypeError(
            f"positions must be a dense tensor; got {what}: pass positions.to_dense() (nested: one tensor "
            "per sequence, or padded ids with posenc.torch.from_attention_mask)",
            parameter="positions",
        )
    if tensor.dtype == torch.bool:
        raise PosencTypeError(
            f"positions must be integers or real numbers, not booleans; got a bool tensor of shape "
            f"{tuple(tensor.shape)}; to turn a mask into positions use posenc.torch.from_attention_mask",
            parameter="positions",
        )
    if tensor.is_complex():
        raise PosencTypeError(
            f"positions must be integers or real numbers; got dtype {tensor.dtype}", parameter="positions"
        )
    if not differentiable:
        _no_derivative(tensor, "positions", "posenc's rotary cos/sin")
    return _exact_dtype("positions", tensor)


def _no_derivative(tensor: torch.Tensor, name: str, what: str) -> None:
    """A ``TypeError`` naming ``name`` where ``tensor`` requires a gradient (grad mode on) that ``what``,
    computed outside autograd, would lose silently."""
    if isinstance(tensor, torch.Tensor) and tensor.requires_grad and torch.is_grad_enabled():
        message = adapters.NOT_DIFFERENTIABLE.format(name=name, what=what, detach=f"{name}.detach()")
        raise PosencTypeError(message, parameter=name)


#: Unsigned integers wider than uint8 (few kernels take them) -> the signed dtype that holds every value
#: (uint64: checked on the host, or beyond 2**63 marked invalid on a device).
_WIDENED = {
    dtype: wide
    for name, wide in (("uint16", torch.int32), ("uint32", torch.int64), ("uint64", torch.int64))
    if isinstance(dtype := getattr(torch, name, None), torch.dtype)
}

#: float8 formats (few kernels take them): float32 holds every value exactly.
_FLOAT8 = frozenset(
    dtype
    for name in ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")
    if isinstance(dtype := getattr(torch, name, None), torch.dtype)
)

#: Beyond every valid position and every useful offset (|p| < 2**31): marks a uint64 value >= 2**63.
_INVALID = 4 * validation.MAX_POSITION


def _exact_dtype(name: str, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` (positions or an offset) in a dtype the encoders take, holding the same values: wide
    unsigned integers as int32/int64, float8 as float32; TypeError naming ``name`` for other dtypes that
    are neither (float4 and the like)."""
    dtype = tensor.dtype
    if dtype in _FLOAT8:
        return tensor.to(torch.float32)
    if dtype in _WIDENED:
        wide = tensor.to(_WIDENED[dtype])
        if dtype != torch.uint64:
            return wide
        # uint64 >= 2**63 wraps to a negative int64: refuse it on the host, mark it invalid elsewhere
        if wide.device.type == "cpu" and not _tracing():
            wrapped = wide < 0
            if bool(wrapped.any()):
                where = tuple(wrapped.nonzero()[0].tolist())
                raise PosencValueError(
                    f"{name} must keep positions within |p| < 2**31 = {validation.MAX_POSITION}, the range "
                    f"over which posenc is proven exact; got {int(wide[where]) + 2**64} (uint64) at index "
                    f"{where}; pass smaller {name}",
                    parameter=name,
                )
            return wide
        return torch.where(wide < 0, _INVALID, wide)
    if dtype.is_floating_point and dtype not in _DTYPE_NAMES:
        raise PosencTypeError(
            f"{name} must be integers or real numbers of a dtype posenc converts exactly; got dtype {dtype}; "
            f"convert {name} to float32 or int64 first",
            parameter=name,
        )
    return tensor


def _check_positions_on_host(tensor: torch.Tensor) -> tuple[int, int] | None:
    """ValueError for NaN/inf or |p| >= 2**31 among CPU positions (eager calls only); the least and greatest
    of integer positions, read once (None for real or no positions)."""
    if not tensor.numel():
        return None
    if tensor.is_floating_point():
        if not bool(torch.isfinite(tensor).all()):
            raise PosencValueError(
                "positions must be finite; replace NaN/inf before encoding", parameter="positions"
            )
        largest = tensor.abs().max().item()
        bounds = None
    else:
        bounds = _integer_bounds(tensor)
        largest = max(-bounds[0], bounds[1])
    if largest >= validation.MAX_POSITION:
        raise PosencValueError(
            f"positions must satisfy |p| < 2**31 = {validation.MAX_POSITION}, the range over which "
            f"posenc is proven exact; got {largest}",
            parameter="positions",
        )
    return bounds


def _integer_bounds(tensor: torch.Tensor) -> tuple[int, int]:
    """min and max of a non-empty integer tensor as Python ints: one read (a decode step's one position
    costs a microsecond, not two reductions)."""
    if tensor.numel() == 1:
        value = int(tensor.item())
        return value, value
    low, high = torch.aminmax(tensor)
    return int(low), int(high)


def _check_sum_on_host(positions: torch.Tensor, offset: torch.Tensor) -> None:
    """ValueError where ``positions + offset`` leaves |p| < 2**31 (eager CPU calls; the positions are
    checked already, the offset is an integer tensor >= 0), decided exactly in int64: for an integer
    offset o, p + o >= 2**31 exactly when floor(p) + o >= 2**31, and p + o <= -2**31 when ceil(p) + o does."""
    if not positions.numel() or not offset.numel():
        return
    limit = validation.MAX_POSITION
    added = offset.to(torch.int64).clamp(-_INVALID, _INVALID)  # no int64 overflow; beyond, all are out
    if positions.is_floating_point():
        wide = positions.to(torch.float64)
        high = torch.floor(wide).to(torch.int64) + added
        low = torch.ceil(wide).to(torch.int64) + added
    else:
        high = low = positions.to(torch.int64) + added
    outside = (high >= limit) | (low <= -limit)
    if bool(outside.any()):
        where = tuple(outside.nonzero()[0].tolist())
        p = positions.expand(outside.shape)[where].item()
        o = offset.expand(outside.shape)[where].item()
        raise PosencValueError(
            f"positions + offset must satisfy |p| < 2**31 = {limit}, the range over which posenc is proven "
            f"exact; got position {p!r} + offset {o} at index {where}; lower the offset",
            parameter="offset",
        )


def _tracing() -> bool:
    return torch.compiler.is_compiling() or torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()
