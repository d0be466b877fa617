"""``encode`` and ``table`` for tensors, and where each is computed.

Eager calls on CPU tensors take the NumPy core (invalid positions raise ``ValueError`` there), integer ids
as rows of a table cached per options, dtype and device, outside any module state. Everything else (any
other device, ``meta`` included, and every call inside ``torch.compile``/``torch.export``) runs the operator
``torch.ops.posenc.exact`` (:mod:`posenc.torch.operator`) where the tensors are.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import torch

from .. import adapters, core, validation
from ..core.options import takes_options
from ..errors import PosencTypeError, PosencValueError
from . import operator  # registers torch.ops.posenc.exact and .table, once
from .tensors import (
    _check_positions_on_host,
    _check_sum_on_host,
    _dtype_name,
    _numpy_dtype,
    _position_tensor,
    _to_tensor,
    _tracing,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

#: Cached tables stop growing at this many bytes; longer requests are computed for just their positions.
CACHE_LIMIT_BYTES = 256 * 2**20
#: All cached tables together hold at most this many bytes: past it the least recently built go first.
CACHE_TOTAL_BYTES = 1024 * 2**20
#: Integer ids look up a cached table of rows 0 .. max(id) only where it has at most this many rows, or at
#: most :data:`DENSE_FACTOR` rows per id: one id of 2**19 built and kept a table of 2**20 rows (256 MiB).
DENSE_ROWS, DENSE_FACTOR = 4096, 8


@takes_options
def encode(
    positions: torch.Tensor | Any,
    d_model: int,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str | None = None,
    **options: Unpack[OptionKeywords],
) -> torch.Tensor:
    """``posenc.encode`` for tensors: shape ``positions.shape + (d_model,)``, on ``positions``' device.

    PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i), ω_i = base ** (-i / (d_model // 2 - shift)).
    Positions are an integer or floating tensor (or anything ``torch.as_tensor`` takes); ``device``
    overrides where the result goes. float32 is bit-identical to the NumPy core; float16/bfloat16 are
    correctly rounded from the exact value (no double rounding).

    >>> encode(torch.tensor([0, 1]), 4)
    tensor([[0.0000, 1.0000, 0.0000, 1.0000],
            [0.8415, 0.5403, 0.0100, 0.9999]])
    """
    checked = core.Options.check(d_model, **options)
    result = _encode_tensor(_position_tensor(positions, differentiable=True), (*checked, _dtype_name(dtype)))
    return result if device is None else result.to(device)


@takes_options
def table(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str | None = None,
    **options: Unpack[OptionKeywords],
) -> torch.Tensor:
    """``posenc.table`` for tensors: positions ``start .. start + length - 1``, shape ``(length, d_model)``.

    >>> table(2, 4, start=1, dtype=torch.float64)[:, 0]
    tensor([0.8415, 0.9093], dtype=torch.float64)
    """
    checked = core.Options.check(d_model, **options)
    length = validation.integer("length", length, minimum=0)
    start = validation.table_start(start, length)
    return _table_on(length, start, (*checked, _dtype_name(dtype)), _device(device))


def _device(device: Any) -> torch.device:
    """``device`` (None: the CPU) as a torch.device this process has; else a ValueError naming it."""
    if device is None:
        return torch.device("cpu")
    try:
        where = torch.device(device)
        if where.type not in ("cpu", "meta"):
            torch.empty(0, device=where)  # torch's own check that the device is there
    except (RuntimeError, AssertionError, TypeError) as error:
        raise PosencValueError(
            f"device={device!r} is not a device this process has ({' '.join(str(error).split())[:120]}); "
            "pass 'cpu' or one torch lists",
            parameter="device",
        ) from None
    return where


def clear_cache() -> None:
    """Drop every cached table (they are rebuilt on demand): frees their memory; results do not change.

    >>> clear_cache()
    >>> encode(torch.tensor([1]), 4)  # the table is rebuilt on demand
    tensor([[0.8415, 0.5403, 0.0100, 0.9999]])
    """
    with _CACHE_LOCK:
        _CACHE.clear()


# --- where it is computed ------------------------------------------------------------------------

_CACHE: dict[tuple, Any] = {}
_CACHE_LOCK = threading.Lock()


def cache_insert(key: tuple, value: Any) -> Any:
    """``_CACHE[key] = value`` (a tensor or a tuple of tensors; the caller holds :data:`_CACHE_LOCK`), then
    the oldest other entries dropped until all fit :data:`CACHE_TOTAL_BYTES`: a result is the caller's own
    copy, so dropping an entry changes no result, only what is built again (:func:`.adapters.cached`)."""

    def size(entry: Any) -> int:
        parts = entry if isinstance(entry, tuple) else (entry,)
        return sum(t.numel() * t.element_size() for t in parts)

    adapters.cached(_CACHE, key, value, CACHE_TOTAL_BYTES, size)
    return value


def _encode_tensor(
    positions: torch.Tensor, options: tuple, offset: torch.Tensor | None = None
) -> torch.Tensor:
    """Exact encodings of ``positions`` (+ ``offset``, broadcast against them, added exactly), differentiable
    in real positions and offsets that require a gradient (:class:`_Differentiated`)."""
    if (
        positions.requires_grad
        or (offset is not None and offset.requires_grad)
        or operator._FUNCTORCH_ACTIVE()
        or _FORWARD_AD._current_level >= 0
    ):  # a derivative may be asked for (an eager call without one pays these four reads, ~0.2 us)
        return _derivative(positions, options, offset)
    return _encode_values(positions, options, offset)


_FORWARD_AD = torch.autograd.forward_ad


def _derivative(positions: torch.Tensor, options: tuple, offset: torch.Tensor | None) -> torch.Tensor:
    """:func:`_encode_tensor` where a derivative may be asked for: forward mode and torch.func transforms
    eagerly (:class:`_ForwardDifferentiated`), backward (:class:`_Differentiated`), eager or compiled.
    Inside ``torch.compile``, a torch.func transform or a dual tensor of real positions is refused: the
    compiled program would not carry posenc's derivative (it gave zero, silently)."""
    tensors = (positions,) if offset is None else (positions, offset)
    if torch.compiler.is_compiling():
        real = any(t.is_floating_point() for t in tensors)
        if real and (operator._FUNCTORCH_ACTIVE() or _FORWARD_AD._current_level >= 0):
            raise PosencTypeError(
                "positions are real inside a torch.func transform or forward-mode AD within torch.compile, "
                "which would not carry posenc's derivative in them (zero, silently); apply the transform "
                "outside torch.compile (torch.func.jvp(torch.compile(f), ...)), or differentiate the "
                "compiled call by backward",
                parameter="positions",
            )
        # the operator itself, whose autograd kernel carries the derivative when the program runs (an
        # autograd.Function traced by torch.export kept its forward, not its backward: silently no gradient)
        return _encode_values(positions, options, offset)
    if any(map(_forward_mode, tensors)):
        return _ForwardDifferentiated.apply(positions, offset, options)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return _Differentiated.apply(positions, offset, options)
    return _encode_values(positions, options, offset)


def _exact_differentiable(
    positions: torch.Tensor, offset: torch.Tensor | None, *options: Any
) -> torch.Tensor:
    """``torch.ops.posenc.exact`` where a derivative may be asked for (positions or an offset requiring a
    gradient, forward mode, a torch.func transform: a traced program called so, or one being traced with
    them): the encodings with their derivative, as an eager call gives them."""
    tensors = (positions,) if offset is None else (positions, offset)
    real = any(t.is_floating_point() for t in tensors)
    if real and operator._FUNCTORCH_ACTIVE():
        raise PosencTypeError(
            "positions are real inside a torch.func transform of a traced program (an exported or compiled "
            "one), whose operator cannot carry posenc's derivative in them there; apply the transform to "
            "the eager call, or differentiate the program by backward or forward_ad's dual tensors",
            parameter="positions",
        )
    if real and _FORWARD_AD._current_level >= 0 and any(map(_forward_mode, tensors)):
        return _ForwardDifferentiated.apply(positions, offset, tuple(options))
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return _Differentiated.apply(positions, offset, tuple(options))
    with operator.below_autograd():
        return torch.ops.posenc.exact.default(positions, offset, *options)


operator.DIFFERENTIABLE[operator.EXACT] = _exact_differentiable


def _forward_mode(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` may carry a forward-mode derivative: a functorch transform is active
    (``torch.func.jvp``, ``grad``, ``vmap``, ...) or it is a dual tensor with a tangent
    (``torch.autograd.forward_ad``)."""
    if operator._FUNCTORCH_ACTIVE():
        return True
    return _FORWARD_AD._current_level >= 0 and _FORWARD_AD.unpack_dual(tensor).tangent is not None


class _Differentiated(torch.autograd.Function):
    """The exact encodings with their derivative in the positions, d/dp sin(p ω_i) = ω_i cos(p ω_i) and
    d/dp cos(p ω_i) = −ω_i sin(p ω_i) (:func:`posenc.adapters.slope`): computed in float64 from the exact
    sines and cosines of the same positions, then rounded to the positions' dtype (backward) or the
    encoding's (forward mode, ``torch.func.jvp``). The derivative is itself differentiable (a second
    derivative, ``create_graph=True``). The encodings are the same bits as without a gradient.

    >>> t = torch.tensor([0.0, 1.0], requires_grad=True)
    >>> encode(t, 4).sum().backward()  # d/dp (sin p + cos p + sin p/100 + cos p/100)
    >>> t.grad
    tensor([ 1.0100, -0.2913])
    """

    @staticmethod
    def forward(positions: torch.Tensor, offset: torch.Tensor | None, options: tuple) -> torch.Tensor:
        return _encode_values(positions.detach(), options, None if offset is None else offset.detach())

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
        positions, offset, options = inputs
        ctx.options = options
        ctx.save_for_backward(positions, offset)
        ctx.save_for_forward(positions, offset)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None, None]:
        positions, offset = ctx.saved_tensors
        along = (grad.to(torch.float64) * _slope(positions, offset, ctx.options)).sum(-1)
        wanted = ctx.needs_input_grad
        by_positions = along.sum_to_size(positions.shape).to(positions.dtype) if wanted[0] else None
        by_offset = along.sum_to_size(offset.shape).to(offset.dtype) if wanted[1] else None
        return by_positions, by_offset, None


class _ForwardDifferentiated(_Differentiated):
    """:class:`_Differentiated` with its forward mode (``torch.func.jvp``, ``torch.autograd.forward_ad``) and
    its rule under ``torch.func.vmap`` (each position's row is its own: the batch axis stays in front):
    apart, because ``torch.compile`` traces no ``autograd.Function`` that defines them."""

    @staticmethod
    def vmap(info: Any, in_dims: tuple, positions: Any, offset: Any, options: tuple) -> tuple[Any, int]:
        batch = info.batch_size

        def in_front(tensor: torch.Tensor | None, dim: int | None) -> torch.Tensor | None:
            if tensor is None:
                return None
            return tensor.movedim(dim, 0) if dim is not None else tensor.expand(batch, *tensor.shape)

        positions, offset = in_front(positions, in_dims[0]), in_front(offset, in_dims[1])
        if offset is not None:  # align the two below the batch axis, as broadcasting aligns them
            rank = max(positions.dim(), offset.dim())
            positions, offset = (
                t.reshape(batch, *[1] * (rank - t.dim()), *t.shape[1:]) for t in (positions, offset)
            )
        return _ForwardDifferentiated.apply(positions, offset, options), 0

    @staticmethod
    def jvp(ctx: Any, positions_t: Any, offset_t: Any, _: Any) -> torch.Tensor:
        positions, offset = ctx.saved_tensors
        moved = sum(t.to(torch.float64) for t in (positions_t, offset_t) if t is not None)
        rate = _slope(positions, offset, ctx.options) * torch.as_tensor(moved)[..., None]
        return rate.to(getattr(torch, ctx.options[-1]))


def _slope(positions: torch.Tensor, offset: torch.Tensor | None, options: tuple) -> torch.Tensor:
    """d PE / dp in float64 at ``positions`` (+ ``offset``): :func:`posenc.adapters.slope`."""
    *core_options, _ = options

    def rows_in(layout: str) -> torch.Tensor:
        wanted = core.Options(*core_options)._replace(layout=layout)
        return _encode_tensor(positions, (*wanted, "float64"), offset)

    return adapters.slope(operator.TORCH, rows_in, _derivative_plan(tuple(core_options)))


@torch.compiler.assume_constant_result
def _derivative_plan(core_options: tuple) -> tuple[int, tuple[int, ...], tuple[float, ...]]:
    """:func:`posenc.adapters.derivative_plan` as Python numbers: constants of a compiled program (its
    frequencies are computed in :mod:`decimal`, which torch.compile does not trace)."""
    n, take, factor = adapters.derivative_plan(core.Options(*core_options))
    return n, tuple(take.tolist()), tuple(factor.tolist())


def _encode_values(
    positions: torch.Tensor, options: tuple, offset: torch.Tensor | None = None
) -> torch.Tensor:
    """Exact encodings of ``positions`` (+ ``offset``, broadcast against them, added exactly); no gradient.

    Eager calls on CPU tensors take the NumPy core (invalid positions raise ValueError there); everything
    else — any other device, ``meta`` included, and every call inside ``torch.compile``/``torch.export`` —
    runs the portable algorithm (:mod:`posenc.portable`) where the tensors are, as the operator
    ``torch.ops.posenc.exact``: no host transfer, no sync, invalid positions give rows of NaN.
    """
    eager_cpu = positions.device.type == "cpu" and not _tracing()
    if eager_cpu:  # before reading the positions: an expanded (zero-stride) tensor costs nothing until then
        validation.fits_in_memory((*positions.shape, options[0]), _numpy_dtype(options[-1]))
    if eager_cpu and offset is not None:
        _check_positions_on_host(positions)
        _check_sum_on_host(positions, offset)
    if eager_cpu and (offset is None or not positions.is_floating_point()):
        if offset is not None:
            positions = positions.to(torch.int64) + offset.to(torch.int64)
        return _encode_on_cpu(positions, options)
    # real positions plus an offset: the sum needs the portable algorithm's exact addition
    return operator.exact(positions, offset, options)


def _encode_on_cpu(positions: torch.Tensor, options: tuple) -> torch.Tensor:
    """The core's encodings of CPU positions: rows of a cached table for small integer ids."""
    bounds = _check_positions_on_host(positions)
    if bounds is not None:
        positions = positions.to(torch.int64)  # uint8 and bool-like dtypes must not index as masks
        low, high = bounds
        dense = high < max(DENSE_ROWS, DENSE_FACTOR * positions.numel())
        if low >= 0 and (dense or _cache_holds(options, high + 1, positions.device)):
            cached = _cached_table(options, high + 1, positions.device)
            if cached is not None:
                return _rows_of(cached, positions)
        if high - low < 2 * positions.numel():
            # Beyond the cache (or negative): the rows low..high by angle addition, not the whole table.
            rows = _table_on(high - low + 1, low, options, positions.device)
            return _rows_of(rows, positions - low)
    host = positions.detach().to(torch.float64 if positions.is_floating_point() else torch.int64)
    return _to_tensor(core.encode(host.numpy(), **_core_arguments(options)))


@operator.on_cpu(operator.EXACT)
def _exact_on_cpu(
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
    """``torch.ops.posenc.exact`` on the CPU (what a compiled or exported program runs there): the C core's
    rows, as an eager call computes them, where the portable algorithm's thousands of tensor operations per
    value would cost hundreds of times more; the portable algorithm where it must answer (real positions
    plus an offset: its exact addition; an invalid position: its rows of NaN, where an eager call raises)."""
    options = (d_model, base, shift, scale, layout, odd, dtype_name)
    shape = positions.shape if offset is None else torch.broadcast_shapes(positions.shape, offset.shape)
    # refused before any work, as an eager call is (the portable algorithm would need several times it)
    validation.fits_in_memory((*shape, d_model), _numpy_dtype(dtype_name))
    core_path = operator.CPU_CORE and not (positions.is_floating_point() and offset is not None)
    if core_path and (offset is None or not offset.is_floating_point()):
        summed = positions
        if offset is not None:
            wide, added = positions.to(torch.int64), offset.to(torch.int64)
            summed = wide + added
            # a sum that wraps around int64 (its sign differs from both operands') is no position: the
            # portable algorithm's NaN rows (2**63 - 1 + 2**63 - 1 would otherwise be position -2's row)
            if bool((((wide ^ summed) & (added ^ summed)) < 0).any()):
                return operator._exact(positions, offset, *options)
        try:
            return _encode_on_cpu(summed, options)
        except (ValueError, OverflowError):  # an invalid position: the portable algorithm's NaN rows
            pass
    return operator._exact(positions, offset, *options)


def _rows_of(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` (int64) of ``table`` as a new tensor of shape ``index.shape + (d_model,)``, never a view
    of the table (a 0-d index too): ``torch.embedding``, the fastest of torch's gathers (a third of
    advanced indexing's time for 2048 rows, a decode step's one row in one call)."""
    return torch.embedding(table, index)


def _cache_holds(options: tuple, rows: int, device: torch.device) -> bool:
    """Whether the cache already holds a table of at least ``rows`` rows for these options on ``device`` (a
    decode step's one id, after a prefill built it: a gather, nothing built)."""
    cached = _CACHE.get((*options, str(device)))
    return cached is not None and cached.shape[0] >= rows


def _cached_table(options: tuple, rows: int, device: torch.device) -> torch.Tensor | None:
    """A cached table with at least ``rows`` rows for these options on ``device``; None if too large."""
    d_model, dtype_name = options[0], options[-1]
    key = (*options, str(device))
    cached = _CACHE.get(key)
    if cached is not None and cached.shape[0] >= rows:
        return cached
    size = 1 << max(10, (rows - 1).bit_length())  # grow geometrically: few rebuilds
    itemsize = torch.empty((), dtype=getattr(torch, dtype_name)).element_size()
    if rows * d_model * itemsize > CACHE_LIMIT_BYTES:
        return None
    size = min(size, max(rows, CACHE_LIMIT_BYTES // (d_model * itemsize)))
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is None or cached.shape[0] < rows:
            cached = cache_insert(key, _table_on(size, 0, options, device))
    return cached


def _table_on(length: int, start: int, options: tuple, device: torch.device) -> torch.Tensor:
    """``core.table`` on ``device``: computed by the core on the CPU (an ONNX export's constant too); on any
    other device, and on the CPU inside ``torch.compile``/``torch.export`` (whose graph then holds the
    operator, not a constant), by the operator ``torch.ops.posenc.table`` (on the CPU the core again,
    :func:`_table_on_cpu`; on CUDA angle addition, certified per element; elsewhere the portable algorithm
    over the positions): no host round trip."""
    traced = torch.compiler.is_compiling() and not torch.onnx.is_in_onnx_export()
    if length == 0 and traced:  # nothing to compute (the core's NumPy call is not traceable)
        return torch.empty((0, options[0]), dtype=getattr(torch, options[-1]), device=device)
    if (device.type == "cpu" and not traced) or length == 0:
        return _to_tensor(core.table(length, start=start, **_core_arguments(options))).to(device)
    return operator.table(length, start, device, options)


def _table_on_cpu(length: int, start: int, options: tuple) -> torch.Tensor | None:
    """``torch.ops.posenc.table`` on the CPU (what a compiled or exported program runs there): the rows of
    the cached table, copied (never a view of the cache), or the core's rows beyond it, as an eager call
    gets them; None where a position is invalid (the operator's portable algorithm then gives rows of NaN,
    where an eager call raises)."""
    validation.fits_in_memory((length, options[0]), _numpy_dtype(options[-1]))  # refused before any work
    try:
        if start >= 0:
            cached = _cached_table(options, start + length, torch.device("cpu"))
            if cached is not None:
                return cached[start : start + length].clone()
        return _to_tensor(core.table(length, start=start, **_core_arguments(options)))
    except (ValueError, OverflowError):
        return None


operator.CPU_TABLE = _table_on_cpu


def _core_arguments(options: tuple) -> dict[str, Any]:
    """The keyword arguments of ``core.encode``/``core.table`` for (d_model, base, ..., odd, dtype name)."""
    *core_options, dtype_name = options
    return {**core.Options(*core_options)._asdict(), "dtype": _numpy_dtype(dtype_name)}
