"""PyTorch adapter: the core's ``encode``/``table`` for tensors, and the drop-in module.

The mathematics stays in :mod:`posenc.core` and :mod:`posenc._exact_array`; this module owns tensors,
devices, the CPU cache and the ``nn.Module``. Every result is the exact value rounded once to the requested
dtype: float32 bit-identical to the NumPy core, float16/bfloat16 correctly rounded.

Where it is computed: eager calls on CPU tensors use the NumPy core (integer positions from a table cached
per options and dtype, outside any module state). Everything else — tensors on any other device (CUDA, MPS,
``meta``) and every call inside ``torch.compile``/``torch.export`` — goes through one operator,
``torch.ops.posenc.exact``, whose kernel is the device algorithm on the tensors' own device: no host
transfer, no sync (CUDA-graph safe), no float64 needed, graphs neither break nor recompile per length, and
invalid positions there give rows of NaN (a device cannot raise without a sync).
"""

from __future__ import annotations

import functools
import math
import threading
from typing import Any

try:
    import torch
    from torch import nn
except ImportError as error:  # pragma: no cover - exercised only without torch
    raise ImportError("posenc.torch needs PyTorch: pip install 'posenc[torch]'") from error

import numpy as np

from . import _exact_array, _module_input, _validate, core
from ._torch_positions import from_attention_mask, from_cu_seqlens, make_positions

__all__ = [
    "SinusoidalPositionalEncoding",
    "Timesteps",
    "TokenAndPositionEmbedding",
    "clear_cache",
    "encode",
    "from_attention_mask",
    "from_cu_seqlens",
    "make_positions",
    "table",
]

_OPS = _exact_array.Backend(torch, "torch")

_DTYPE_NAMES = {
    torch.float64: "float64",
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
}

#: Cached tables stop growing at this many bytes; longer requests are computed for just their positions.
CACHE_LIMIT_BYTES = 256 * 2**20


def encode(
    positions: torch.Tensor | Any,
    d_model: int,
    *,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str | None = None,
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
    options = core.Options.check(d_model, base, shift, scale, layout, odd)
    result = _encode_tensor(_position_tensor(positions), (*options, _dtype_name(dtype)))
    return result if device is None else result.to(device)


def table(
    length: int,
    d_model: int,
    *,
    start: int = 0,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``posenc.table`` for tensors: positions ``start .. start + length - 1``, shape ``(length, d_model)``.

    >>> table(2, 4, start=1, dtype=torch.float64)[:, 0]
    tensor([0.8415, 0.9093], dtype=torch.float64)
    """
    options = core.Options.check(d_model, base, shift, scale, layout, odd)
    length = _validate.integer("length", length, minimum=0)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    if length and start + length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"the last position start + length - 1 = {start + length - 1} must be < 2**31 = "
            f"{_validate.MAX_POSITION}; lower start or length"
        )
    return _table_on(length, start, (*options, _dtype_name(dtype)), torch.device(device or "cpu"))


def clear_cache() -> None:
    """Drop every cached table (they are rebuilt on demand)."""
    with _CACHE_LOCK:
        _CACHE.clear()


class SinusoidalPositionalEncoding(nn.Module):
    """``dropout(x + PE)``: a drop-in, exact replacement for the PyTorch tutorial's ``PositionalEncoding``.

    Args:
        d_model: the width of ``x``'s last dimension.
        base, shift, scale, layout, odd: as in :func:`posenc.encode` (the defaults are the paper's).
        dropout: dropout probability applied to the sum.
        batch_first: False (default, PyTorch's convention: ``nn.TransformerEncoderLayer`` and the tutorial):
            ``x`` is ``(seq, batch, d_model)``; True: ``(batch, seq, d_model)`` (or any
            ``(..., seq, d_model)``). A ``(seq, d_model)`` ``x`` is the same either way. A shape cannot
            tell the two apart: pass ``batch_first=True`` for batch-first models.
        max_len: a cache hint only — longer sequences work. It also sizes the tutorial-style ``pe``
            attribute (default 5000, the tutorial's).

    ``forward(x, positions=None, *, offset=0)``:
        positions: ``(seq,)`` or ``(batch, seq)``, integer or floating (left padding, packed sequences,
            arbitrary ids); default ``offset + arange(seq)``.
        offset: an int or a ``(batch,)`` integer tensor added to the positions (KV-cache decoding: step t of
            a cached decode equals row t of the full pass).
        inplace: add into ``x`` itself and return it (no new activation tensor: ~5x faster on the CPU,
            for inference; autograd refuses it on a leaf that requires grad).

    ONNX export (``torch.onnx.export``) needs ``max_len``: ONNX has no posenc operator, so the exported graph
    gathers from a constant table of ``max_len`` rows, exact like the rest.

    Precision: PE is correctly rounded to ``x.dtype`` (the exact value rounded once), then added to ``x``
    in ``x.dtype``, so the sum rounds once more, like any addition in that dtype. The module holds no
    table in its state: ``state_dict()`` is empty, ``.to(torch.bfloat16)`` cannot degrade anything, and
    a tutorial checkpoint's ``pe`` buffer is accepted (checked, then dropped) by ``load_state_dict``.
    """

    def __init__(
        self,
        d_model: int,
        *,
        base: float = 10000.0,
        shift: float = 0,
        scale: float = 1.0,
        layout: str = "interleaved",
        odd: str = "zero",
        dropout: float = 0.0,
        batch_first: bool = False,
        max_len: int | None = None,
    ) -> None:
        super().__init__()
        self._options = core.Options.check(d_model, base, shift, scale, layout, odd)
        self.d_model, self.base, self.shift, self.scale, self.layout, self.odd = self._options
        self.max_len, self.batch_first, rate = _validate.module_options(max_len, batch_first, dropout)
        self.dropout = nn.Dropout(rate)
        self._register_load_state_dict_pre_hook(_accept_tutorial_pe, with_module=True)

    @property
    def pe(self) -> torch.Tensor:
        """The tutorial's buffer, float32, ``max_len`` rows (5000 when max_len is None, the tutorial's): shape
        ``(max_len, 1, d_model)`` as the PyTorch tutorial holds it (``x + pe[:x.size(0)]``), or
        ``(1, max_len, d_model)`` with ``batch_first=True`` (``x + pe[:, :x.size(1)]``). A copy of the cached
        table, never part of the module's state."""
        rows = self.max_len or 5000
        cached = _cached_table((*self._options, "float32"), rows, torch.device("cpu"))
        pe = table(rows, **self._options._asdict()) if cached is None else cached[:rows].clone()
        return pe[None] if self.batch_first else pe[:, None]

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, base={self.base:g}, shift={self.shift:g}, scale={self.scale:g}, "
            f"layout={self.layout!r}, odd={self.odd!r}, "
            f"batch_first={self.batch_first}, max_len={self.max_len}"
            + ("" if self.max_len else " (.pe: 5000 rows)")
        )

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        offset: int | torch.Tensor = 0,
        inplace: bool = False,
    ) -> torch.Tensor:
        pe = self._encoding(x, positions, offset, borrow=True)
        y = x.add_(pe) if inplace else _add(x, pe)
        if self.training and self.dropout.p > 0:
            return _dropout(y, self.dropout.p)
        return y

    def encoding_for(
        self, x: torch.Tensor, positions: torch.Tensor | None = None, *, offset: int | torch.Tensor = 0
    ) -> torch.Tensor:
        """The PE that :meth:`forward` adds to ``x``, already shaped to broadcast against it."""
        return self._encoding(x, positions, offset, borrow=False)

    def _encoding(
        self, x: torch.Tensor, positions: torch.Tensor | None, offset: int | torch.Tensor, *, borrow: bool
    ) -> torch.Tensor:
        """PE for ``x``; with ``borrow``, eager contiguous requests get a read-only view of the cache."""
        batch_shape, seq = self._check_x(x)
        options = (*self._options, _dtype_name(x.dtype))
        eager_cpu = x.device.type == "cpu" and not _tracing()
        start = _module_input.int_offset(offset)
        if borrow and positions is None and start is not None and eager_cpu:
            cached = _cached_table(options, max(start + seq, self.max_len or 0), x.device)
            if cached is None:  # beyond the cache: build this sequence's rows, nothing else
                if start + seq > _validate.MAX_POSITION:
                    raise ValueError(
                        f"offset + seq - 1 = {start + seq - 1} must be < 2**31 = {_validate.MAX_POSITION}, "
                        "the range over which posenc is proven exact; lower the offset"
                    )
                return self._orient(_table_on(seq, start, options, x.device))
            return self._orient(cached[start : start + seq])
        if positions is not None:
            if not isinstance(positions, torch.Tensor):  # a list or an array: put it where x is
                positions = _position_tensor(positions).to(x.device)
            elif positions.device != x.device:
                raise ValueError(
                    f"positions are on {positions.device} but x is on {x.device}; "
                    f"pass positions.to({str(x.device)!r})"
                )
            positions = _position_tensor(positions)
        if isinstance(offset, torch.Tensor) and offset.dtype in _WIDENED:
            offset = _exact_dtype("offset", offset)  # uint16/32/64: few kernels take them
        positions, offset = _module_input.positions_and_offset(
            _OPS,
            seq,
            batch_shape,
            positions,
            offset,
            host=eager_cpu,
            arange=lambda: torch.arange(seq, device=x.device),
        )
        if isinstance(offset, int):  # added exactly: in int64, or by the device algorithm for real positions
            if offset >= _INVALID and positions.numel():  # beyond int64 arithmetic, and every position
                raise ValueError(
                    f"positions + offset must satisfy |p| < 2**31 = {_validate.MAX_POSITION}, the range over "
                    f"which posenc is proven exact; got offset={offset}; lower the offset"
                )
            if positions.is_floating_point():
                offset = positions.new_full((), offset, dtype=torch.int64)
            else:
                positions, offset = positions.to(torch.int64) + offset, None
        elif offset is not None:
            offset = offset.to(positions.device)
        if torch.onnx.is_in_onnx_export():
            if offset is not None:
                positions = positions + offset
            pe = self._onnx_table(x.dtype, x.device, positions)[positions]
        else:
            pe = _encode_tensor(positions, options, offset)
        return self._orient(pe)

    def _orient(self, pe: torch.Tensor) -> torch.Tensor:
        """(seq, d) or (batch, seq, d) encodings, arranged to broadcast against x."""
        return _module_input.orient(_OPS, pe, self.batch_first)

    def _onnx_table(self, dtype: torch.dtype, device: torch.device, positions: torch.Tensor) -> torch.Tensor:
        """ONNX has no posenc operator: the exported graph gathers from a constant table of max_len rows."""
        if self.max_len is None:
            raise ValueError(
                "ONNX export needs max_len: the exported graph holds a table of max_len rows; "
                "construct the module with max_len=<the longest position + 1>"
            )
        if positions.is_floating_point():
            raise ValueError("ONNX export supports integer positions only; pass integer position ids")
        return table(self.max_len, **self._options._asdict(), dtype=dtype).to(device)

    def _check_x(self, x: torch.Tensor) -> tuple[tuple[int, ...], int]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a tensor; got {type(x).__name__}")
        if x.dtype not in _DTYPE_NAMES:
            raise TypeError(f"x must be float64, float32, float16 or bfloat16; got {x.dtype}")
        return _module_input.batch_and_seq(tuple(x.shape), self.d_model, self.batch_first)


class TokenAndPositionEmbedding(nn.Module):
    """Input to the Transformer = dropout(Embedding(ids) * embed_scale + PE(positions)).

    ``embed_scale`` defaults to sqrt(d_model), as the paper scales its embeddings (``scale``, like every
    other option of :class:`SinusoidalPositionalEncoding`, goes to the encoding). With ``padding_idx`` set,
    padding tokens embed to zero (``nn.Embedding``'s rule); ``positions_from_padding=True`` numbers the
    positions by fairseq's rule (:func:`make_positions`: pads keep position ``padding_idx``, tokens count
    from ``padding_idx + 1``), which works for left and right padding alike.

    ``forward(ids, positions=None, *, offset=0)`` takes ``ids`` of shape ``(batch, seq)``.
    """

    def __init__(
        self,
        num_embeddings: int,
        d_model: int,
        *,
        padding_idx: int | None = None,
        embed_scale: float | None = None,
        positions_from_padding: bool = False,
        dropout: float = 0.0,
        **encoding_options: Any,
    ) -> None:
        super().__init__()
        if positions_from_padding and padding_idx is None:
            raise ValueError("positions_from_padding=True needs padding_idx; pass the padding token id")
        if "batch_first" in encoding_options:
            raise TypeError("TokenAndPositionEmbedding takes ids of shape (batch, seq): drop batch_first")
        num_embeddings = _validate.integer("num_embeddings", num_embeddings, minimum=1)
        if padding_idx is not None:
            padding_idx = _validate.integer("padding_idx", padding_idx, minimum=-num_embeddings)
            if padding_idx >= num_embeddings:
                raise ValueError(
                    f"padding_idx must be a token id in [-{num_embeddings}, {num_embeddings}) "
                    f"(num_embeddings={num_embeddings}); got {padding_idx}"
                )
        self.embedding = nn.Embedding(num_embeddings, d_model, padding_idx=padding_idx)
        if embed_scale is not None:
            embed_scale = _validate.real("embed_scale", embed_scale)
        self.embed_scale = math.sqrt(d_model) if embed_scale is None else embed_scale
        if not self.embed_scale > 0:
            raise ValueError(f"embed_scale must be > 0 (the paper uses sqrt(d_model)); got {embed_scale!r}")
        self.positions_from_padding = positions_from_padding
        self.encoding = SinusoidalPositionalEncoding(
            d_model, dropout=dropout, batch_first=True, **encoding_options
        )

    def forward(
        self, ids: torch.Tensor, positions: torch.Tensor | None = None, *, offset: int | torch.Tensor = 0
    ) -> torch.Tensor:
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (batch, seq); got shape {tuple(ids.shape)}")
        if positions is None and self.positions_from_padding:
            positions = make_positions(ids, self.embedding.padding_idx)
        x = self.embedding(ids) * self.embed_scale
        return self.encoding(x, positions, offset=offset)

    def extra_repr(self) -> str:
        return f"embed_scale={self.embed_scale:g}, positions_from_padding={self.positions_from_padding}"


class Timesteps(nn.Module):
    """Exact drop-in for diffusers' ``Timesteps``: timesteps ``(N,)`` -> ``(N, num_channels)``.

    ω_i = max_period ** (-i / (num_channels // 2 - downscale_freq_shift)); the angle ``scale · t · ω_i`` goes
    into [sin | cos] ([cos | sin] with ``flip_sin_to_cos``), an odd width ends in a zero column. Timesteps
    may be fractional; the result is float32, correctly rounded (diffusers' float32 code is off by ~1e-4 at
    t = 1000).
    """

    def __init__(
        self,
        num_channels: int,
        flip_sin_to_cos: bool,
        downscale_freq_shift: float,
        scale: float = 1,
        max_period: float = 10000,
    ) -> None:
        super().__init__()
        from . import presets

        preset = presets.get(
            "diffusers-timestep",
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
        )
        self.num_channels = _validate.d_model(num_channels)
        self.flip_sin_to_cos, self.downscale_freq_shift, self.scale = (
            flip_sin_to_cos,
            downscale_freq_shift,
            scale,
        )
        self._options = core.Options.check(num_channels, **preset._options_for(num_channels))

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        if not isinstance(timesteps, torch.Tensor) or timesteps.dim() != 1:
            shape = (
                tuple(timesteps.shape) if isinstance(timesteps, torch.Tensor) else type(timesteps).__name__
            )
            raise ValueError(f"timesteps must be a 1-D tensor of shape (N,); got {shape}")
        return _encode_tensor(_position_tensor(timesteps), (*self._options, "float32"))

    def extra_repr(self) -> str:
        return (
            f"num_channels={self.num_channels}, flip_sin_to_cos={self.flip_sin_to_cos}, "
            f"downscale_freq_shift={self.downscale_freq_shift}, scale={self.scale}"
        )


# --- the operator -----------------------------------------------------------------------------------

_CACHE: dict[tuple, torch.Tensor] = {}
_CACHE_LOCK = threading.Lock()


def _encode_tensor(
    positions: torch.Tensor, options: tuple, offset: torch.Tensor | None = None
) -> torch.Tensor:
    """Exact encodings of ``positions`` (+ ``offset``, broadcast against them, added exactly).

    Eager calls on CPU tensors take the NumPy core (invalid positions raise ValueError there); everything
    else — any other device, ``meta`` included, and every call inside ``torch.compile``/``torch.export`` —
    runs the device algorithm (:mod:`posenc._exact_array`) where the tensors are, as the operator
    ``torch.ops.posenc.exact``: no host transfer, no sync, invalid positions give rows of NaN.
    """
    eager_cpu = positions.device.type == "cpu" and not _tracing()
    if eager_cpu:  # before reading the positions: an expanded (zero-stride) tensor costs nothing until then
        _validate.fits_in_memory((*positions.shape, options[0]), _numpy_dtype(options[-1]))
    if eager_cpu and offset is not None:
        _check_positions_on_host(positions)
        _check_sum_on_host(positions, offset)
    if eager_cpu and (offset is None or not positions.is_floating_point()):
        if offset is not None:
            positions = positions.to(torch.int64) + offset.to(torch.int64)
        return _encode_on_cpu(positions, options)
    # real positions plus an offset: the sum needs the device algorithm's exact addition
    return torch.ops.posenc.exact(positions, offset, *options)


def _encode_on_cpu(positions: torch.Tensor, options: tuple) -> torch.Tensor:
    """The core's encodings of CPU positions: rows of a cached table for small integer ids."""
    _check_positions_on_host(positions)
    if not positions.is_floating_point() and positions.numel():
        positions = positions.to(torch.int64)  # uint8 and bool-like dtypes must not index as masks
        low, high = int(positions.min()), int(positions.max())
        if low >= 0:
            cached = _cached_table(options, high + 1, positions.device)
            if cached is not None:
                return cached[positions]
        if high - low < 2 * positions.numel():
            # Beyond the cache (or negative): the rows low..high by angle addition, not the whole table.
            rows = _table_on(high - low + 1, low, options, positions.device)
            return rows[positions - low]
    host = positions.detach().to(torch.float64 if positions.is_floating_point() else torch.int64)
    return _to_tensor(core.encode(host.numpy(), **_core_arguments(options)))


@torch.library.custom_op("posenc::exact", mutates_args=())
def _exact_op(
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
    """The device algorithm on ``positions``' device: (positions + offset).shape + (d_model,)."""
    request = _request((d_model, base, shift, scale, layout, odd, dtype_name))
    ops = _exact_array.backend_of(positions)
    if offset is not None:
        offset = offset.to(positions.device)
    return _exact_array.encode(ops, positions, request, offset)


@_exact_op.register_fake
def _exact_fake(positions, offset, d_model, base, shift, scale, layout, odd, dtype_name):
    shape = positions.shape if offset is None else torch.broadcast_shapes(positions.shape, offset.shape)
    return positions.new_empty((*shape, d_model), dtype=getattr(torch, dtype_name))


@functools.lru_cache(maxsize=64)
def _request(options: tuple) -> Any:
    """The device algorithm's host constants for (d_model, base, shift, scale, layout, odd, dtype name)."""
    *core_options, dtype_name = options
    return _exact_array.request_for(core.Options(*core_options), dtype_name)


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
            cached = _table_on(size, 0, options, device)
            _CACHE[key] = cached
    return cached


def _table_on(length: int, start: int, options: tuple, device: torch.device) -> torch.Tensor:
    """``core.table`` on ``device``: computed by the core on the CPU; on any other device by the device
    algorithm there (positions ``start ..`` as int64, no host round trip)."""
    if device.type == "cpu" or length == 0:
        return _to_tensor(core.table(length, start=start, **_core_arguments(options))).to(device)
    positions = torch.arange(start, start + length, device=device, dtype=torch.int64)
    return torch.ops.posenc.exact(positions, None, *options)


def _core_arguments(options: tuple) -> dict[str, Any]:
    """The keyword arguments of ``core.encode``/``core.table`` for (d_model, base, ..., odd, dtype name)."""
    *core_options, dtype_name = options
    return {**core.Options(*core_options)._asdict(), "dtype": _numpy_dtype(dtype_name)}


# --- helpers ----------------------------------------------------------------------------------------


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str) and dtype in _DTYPE_NAMES.values():  # "bfloat16" as well as torch.bfloat16
        return dtype
    if dtype not in _DTYPE_NAMES:
        raise ValueError(
            "dtype must be one of torch.float64, torch.float32, torch.float16, torch.bfloat16 "
            f"(or their names, e.g. 'bfloat16'); got {dtype!r}"
        )
    return _DTYPE_NAMES[dtype]


def _numpy_dtype(name: str) -> np.dtype:
    return _validate.dtype(name)


def _to_tensor(values: np.ndarray) -> torch.Tensor:
    """NumPy -> torch without changing a bit (bfloat16 travels as its 16-bit pattern)."""
    if values.dtype.name == "bfloat16":
        return torch.from_numpy(values.view(np.uint16)).view(torch.bfloat16)
    return torch.from_numpy(values)


def _position_tensor(positions: Any) -> torch.Tensor:
    """Positions as a tensor, their dtype checked and made one the encoders take, exactly (values are
    checked where they live: see :func:`_check_positions_on_host`; on a device invalid positions give NaN
    rows).

    Not a tensor (a number, a list, a NumPy array): Python floats are float64 and Python ints int64, as
    NumPy takes them (``torch.as_tensor`` would round floats to float32). Unsigned 16/32/64-bit tensors
    become int32/int64, float8 ones float32: every value converts exactly.
    """
    if positions is None or isinstance(positions, str | bytes):
        raise TypeError(f"positions must be a tensor of integers or real numbers; got {positions!r}")
    if isinstance(positions, torch.Tensor):
        tensor = positions
    elif _tracing():  # a Python number (or a list) seen by torch.compile: no NumPy there
        tensor = torch.as_tensor(positions)
        if tensor.is_floating_point():
            tensor = torch.as_tensor(positions, dtype=torch.float64)
    else:
        array = _module_input.exact_float32(_validate.position_array(positions))  # names ragged lists
        if array.dtype.kind not in "biuf" or array.dtype.itemsize > 8:
            array = _validate.positions(array)  # float64, or a TypeError/ValueError naming positions
        tensor = torch.as_tensor(array)
    if tensor.dtype == torch.bool:
        raise TypeError(
            "positions must be integers or real numbers, not booleans; "
            "to turn a mask into positions use posenc.torch.from_attention_mask"
        )
    if tensor.is_complex():
        raise TypeError(f"positions must be integers or real numbers; got dtype {tensor.dtype}")
    return _exact_dtype("positions", tensor)


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
_INVALID = 4 * _validate.MAX_POSITION


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
                raise ValueError(
                    f"{name} must keep positions within |p| < 2**31 = {_validate.MAX_POSITION}, the range "
                    f"over which posenc is proven exact; got {int(wide[where]) + 2**64} (uint64) at index "
                    f"{where}; pass smaller {name}"
                )
            return wide
        return torch.where(wide < 0, _INVALID, wide)
    if dtype.is_floating_point and dtype not in _DTYPE_NAMES:
        raise TypeError(
            f"{name} must be integers or real numbers of a dtype posenc converts exactly; got dtype {dtype}; "
            f"convert {name} to float32 or int64 first"
        )
    return tensor


def _check_positions_on_host(tensor: torch.Tensor) -> None:
    """ValueError for NaN/inf or |p| >= 2**31 among CPU positions (eager calls only)."""
    if not tensor.numel():
        return
    if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
        raise ValueError("positions must be finite; replace NaN/inf before encoding")
    largest = (
        tensor.abs().max().item()
        if tensor.dtype != torch.int64
        else max(abs(int(tensor.min())), abs(int(tensor.max())))
    )
    if largest >= _validate.MAX_POSITION:
        raise ValueError(
            f"positions must satisfy |p| < 2**31 = {_validate.MAX_POSITION}, the range over which "
            f"posenc is proven exact; got {largest}"
        )


def _check_sum_on_host(positions: torch.Tensor, offset: torch.Tensor) -> None:
    """ValueError where ``positions + offset`` leaves |p| < 2**31 (eager CPU calls; the positions are
    checked already, the offset is an integer tensor >= 0), decided exactly in int64: for an integer
    offset o, p + o >= 2**31 exactly when floor(p) + o >= 2**31, and p + o <= -2**31 when ceil(p) + o does."""
    if not positions.numel() or not offset.numel():
        return
    limit = _validate.MAX_POSITION
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
        raise ValueError(
            f"positions + offset must satisfy |p| < 2**31 = {limit}, the range over which posenc is proven "
            f"exact; got position {p!r} + offset {o} at index {where}; lower the offset"
        )


#: Outputs of at least this many bytes are worth a NumPy allocation in :func:`_add`.
_LARGE_OUTPUT_BYTES = 4 << 20


def _add(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """``x + pe``, the same values and dtype; on the CPU, outside autograd, a large result goes into memory
    that NumPy allocates.

    A fresh output's first touch (page faults, the kernel zeroing pages) costs more than the addition itself.
    NumPy asks the kernel for huge pages for large arrays (``madvise``), which halves that cost: for x of
    (8, 2048, 1024) float32 on 2 cores, 19 ms for ``x + pe`` against 10 ms into a NumPy-allocated buffer (the
    in-place add takes 4.8). The result is an ordinary contiguous tensor that owns its buffer.
    """
    if (
        x.device.type != "cpu"
        or x.numel() * x.element_size() < _LARGE_OUTPUT_BYTES
        or not x.is_contiguous()
        or pe.dtype != x.dtype
        or (torch.is_grad_enabled() and (x.requires_grad or pe.requires_grad))
        or _tracing()
        or torch.broadcast_shapes(x.shape, pe.shape) != x.shape
    ):
        return x + pe
    return torch.add(x, pe, out=_cpu_empty(x.numel(), x.dtype).view(x.shape))


def _cpu_empty(count: int, dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty(count, dtype=dtype)`` on the CPU, allocated by NumPy: huge pages when large (see
    :func:`_add`)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return torch.from_numpy(np.empty(count * itemsize, dtype=np.uint8)).view(dtype)


def _tracing() -> bool:
    return torch.compiler.is_compiling() or torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()


def _dropout(y: torch.Tensor, p: float) -> torch.Tensor:
    """``F.dropout(y, p, training=True)``, in place on ``y``, with a cheaper random source on the CPU.

    ``nn.Dropout`` draws one random number per element; here one 64-bit draw serves two elements (two
    32-bit lanes), which halves the time of a training-mode forward. Each element is kept with probability
    1 - p (p taken to a multiple of 2**-32, finer than ``torch.bernoulli``'s float32 draws) and scaled by
    1 / (1 - p). Compiled graphs and other devices use ``F.dropout``, whose kernels are fused already.
    """
    if y.device.type != "cpu" or _tracing():
        return nn.functional.dropout(y, p, training=True)
    words = _cpu_empty((y.numel() + 1) // 2, torch.int64).random_(-(2**63), None)
    lanes = words.view(torch.int32)[: y.numel()].view(y.shape)
    return y.mul_(1.0 / (1.0 - p)).masked_fill_(lanes < round(p * 2**32) - 2**31, 0.0)


def _accept_tutorial_pe(module: nn.Module, state_dict: dict, prefix: str, *args: Any) -> None:
    """Let ``load_state_dict(strict=True)`` read a tutorial checkpoint: check its ``pe`` buffer, drop it."""
    stored = state_dict.pop(prefix + "pe", None)
    if stored is None:
        return
    shape = tuple(getattr(stored, "shape", ()))
    if not isinstance(stored, torch.Tensor) or len(shape) != 3 or 1 not in shape[:2]:
        raise ValueError(
            "the checkpoint's pe buffer must have shape (1, max_len, d_model) or (max_len, 1, d_model), "
            f"as the tutorial stores it; got {type(stored).__name__} of shape {shape}"
        )
    rows = stored.reshape(-1, stored.shape[-1]).double()
    if rows.shape[-1] != module.d_model:
        raise ValueError(
            f"the checkpoint's pe buffer has width {rows.shape[-1]}, this module has d_model={module.d_model}"
        )
    if not bool(torch.isfinite(rows).all()):
        raise ValueError(
            "the checkpoint's pe buffer holds NaN or inf: it is no encoding; drop it from the state"
        )
    ours = table(rows.shape[0], **module._options._asdict(), dtype=torch.float64)
    error = (rows - ours).abs().amax(dim=1) if rows.numel() else rows.new_zeros(0)
    # the tutorial's float32 code is off by < 1.4 (k + 1) 2**-24 at row k (measured to 131072 rows)
    allowed = 4.0 * (torch.arange(len(error), dtype=torch.float64) + 1) * 2.0**-24 + 2.0**-20
    beyond = torch.nonzero(error > allowed)
    if len(beyond):
        k = int(beyond[0, 0])
        raise ValueError(
            f"the checkpoint's pe buffer differs from this module's encoding at row {k} by "
            f"{float(error[k]):.3g}, more than float32 code is off there ({float(allowed[k]):.2g}): it was "
            "built with other options (base, shift, scale or layout) or changed; construct the module with "
            "those options"
        )
