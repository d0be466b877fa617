"""The ``nn.Module`` classes: :class:`SinusoidalPositionalEncoding` (an exact drop-in for the PyTorch
tutorial's ``PositionalEncoding``), :class:`TokenAndPositionEmbedding`, :class:`Timesteps` (diffusers') and
:class:`DetrSinePositionEmbedding` (DETR's 2-D sine),
with what only they need: the CPU fast paths of their forward (the sum in NumPy-allocated memory, a cheaper
dropout) and the reading of tutorial checkpoints."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from .. import adapters, core, validation
from ..core.options import takes_options
from ..defaults import ODD, SCALE, SHIFT
from ..errors import PosencValueError, renamed
from ..portable import backend_named
from . import operator
from .functions import _cached_table, _encode_tensor, _table_on, table
from .positions import make_positions
from .tensors import (
    _DTYPE_NAMES,
    _INVALID,
    _WIDENED,
    _dtype_name,
    _exact_dtype,
    _position_tensor,
    _tracing,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

_OPS = backend_named("torch")


class SinusoidalPositionalEncoding(nn.Module):
    """``dropout(x + PE)``: a drop-in, exact replacement for the PyTorch tutorial's ``PositionalEncoding``.

    ``SinusoidalPositionalEncoding(d_model, dropout=0.0, max_len=None, *, base, shift, scale, layout, odd,
    batch_first=False)``: ``dropout`` and ``max_len`` may be given by position, in the tutorial's order
    (``PositionalEncoding(d_model, dropout, max_len)``: ``SinusoidalPositionalEncoding(512, 0.1, 5000)``);
    every other argument is keyword-only.

    Args:
        d_model: the width of ``x``'s last dimension.
        dropout: dropout probability applied to the sum, in [0, 1).
        base, shift, scale, layout, odd: as in :func:`posenc.encode` (the defaults are Vaswani et al. 2017's).
        batch_first: False (default, PyTorch's convention: ``nn.TransformerEncoderLayer`` and the tutorial):
            ``x`` is ``(seq, batch, d_model)``; True: ``(batch, seq, d_model)`` (or any
            ``(..., seq, d_model)``, a ``(seq, d_model)`` ``x`` among them: it needs True). A shape cannot
            tell the two apart: pass ``batch_first=True`` for batch-first models.
        max_len: a cache hint only — longer sequences work. It also sizes the tutorial-style ``pe``
            attribute (default 5000, the tutorial's).

    ``forward(x, positions=None, *, offset=0)``:
        positions: ``(seq,)`` or ``(batch, seq)``, integer or floating (left padding, packed sequences,
            arbitrary ids); default ``offset + arange(seq)``.
        offset: an int, or an integer tensor of shape ``()`` or x's batch shape (``(batch,)``; one per
            sequence), added to the positions (KV-cache decoding: step t of a cached decode equals row t of
            the full pass).
        inplace: add into ``x`` itself and return it (no new activation tensor: ~5x faster on the CPU,
            for inference; autograd refuses it on a leaf that requires grad).

    ONNX export (``torch.onnx.export``) needs ``max_len``: ONNX has no posenc operator, so the exported graph
    gathers from a constant table of ``max_len`` rows, exact like the rest.

    Precision: PE is correctly rounded to ``x.dtype`` (the exact value rounded once), then added to ``x``
    in ``x.dtype``, so the sum rounds once more, like any addition in that dtype. The module holds no
    table in its state: ``state_dict()`` is empty, ``.to(torch.bfloat16)`` cannot degrade anything, and
    a tutorial checkpoint's ``pe`` buffer is accepted (checked, then dropped) by ``load_state_dict``.

    >>> pe = SinusoidalPositionalEncoding(4, batch_first=True)
    >>> y = pe(torch.zeros(2, 3, 4))  # (batch, seq, d_model) in, the same shape and dtype out
    >>> y.shape, y.dtype
    (torch.Size([2, 3, 4]), torch.float32)
    >>> y[0, 1]  # position 1
    tensor([0.8415, 0.5403, 0.0100, 0.9999])
    >>> pe(torch.zeros(1, 1, 4, dtype=torch.bfloat16), offset=1)  # one decoding step, in bfloat16
    tensor([[[0.8398, 0.5391, 0.0100, 1.0000]]], dtype=torch.bfloat16)
    """

    @takes_options(before="batch_first")
    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        max_len: int | None = None,
        *,
        batch_first: bool = False,
        **options: Unpack[OptionKeywords],
    ) -> None:
        super().__init__()
        self._options = core.Options.check(d_model, **options)
        self.d_model, self.base, self.shift, self.scale, self.layout, self.odd = self._options
        self.max_len, self.batch_first, rate = validation.module_options(max_len, batch_first, dropout)
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
        if positions is None and not inplace:
            y = self._traced_add(x, offset)
            if y is not None:
                return self._add_encoding(y, None)
        return self._add_encoding(x, self._encoding(x, positions, offset, borrow=True), inplace=inplace)

    def _traced_add(self, x: torch.Tensor, offset: int | torch.Tensor) -> torch.Tensor | None:
        """``x`` plus its default positions' rows as one ``torch.ops.posenc.add_table`` node, where a graph
        is traced on the CPU and x needs no gradient when traced (where it does, the table operator's rows
        and an addition autograd records, as before); None elsewhere. Its CPU kernel adds straight from the
        cached table, as an eager call does (the table operator's rows are a copy: 0.05-0.1 ms more for x
        of (4, 1000, 256)); a program traced without x's gradient carries it when called with one."""
        if not isinstance(x, torch.Tensor) or x.device.type != "cpu" or not _tracing():
            return None
        if torch.onnx.is_in_onnx_export() or (torch.is_grad_enabled() and x.requires_grad):
            return None
        if operator._FUNCTORCH_ACTIVE():
            return None
        self._check_x(x)
        start = adapters.int_offset(offset)
        if start is None or abs(start) >= _INVALID:
            return None
        options = (*self._options, _dtype_name(x.dtype))
        return operator.add_table(x, start, self.batch_first, options)

    def _add_encoding(
        self, x: torch.Tensor, pe: torch.Tensor | None, *, inplace: bool = False
    ) -> torch.Tensor:
        """``x + pe`` (in place into ``x`` when ``inplace``; ``x`` itself when ``pe`` is None: added
        already), then this module's dropout while training."""
        y = x if pe is None else x.add_(pe) if inplace else _add(x, pe)
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
        start = adapters.int_offset(offset)
        if borrow and positions is None and start is not None and eager_cpu:
            cached = _cached_table(options, max(start + seq, self.max_len or 0), x.device)
            if cached is None:  # beyond the cache: build this sequence's rows, nothing else
                if start + seq > validation.MAX_POSITION:
                    raise ValueError(
                        f"offset + seq - 1 = {start + seq - 1} must be < 2**31 = {validation.MAX_POSITION}, "
                        "the range over which posenc is proven exact; lower the offset"
                    )
                return self._orient(_table_on(seq, start, options, x.device))
            return self._orient(cached[start : start + seq])
        device_rows = not eager_cpu and not torch.onnx.is_in_onnx_export()
        if device_rows and positions is None and start is not None and abs(start) < _INVALID:
            # the rows start .. start + seq - 1 where x is (on CUDA by angle addition: no exact value per row)
            return self._orient(operator.table(seq, start, x.device, options))
        if positions is not None:
            if not isinstance(positions, torch.Tensor):  # a list or an array: put it where x is
                positions = _position_tensor(positions, differentiable=True).to(x.device)
            elif positions.device != x.device:
                raise ValueError(
                    f"positions are on {positions.device} but x is on {x.device}; "
                    f"pass positions.to({str(x.device)!r})"
                )
            positions = _position_tensor(positions, differentiable=True)
        if isinstance(offset, np.ndarray):  # an array of offsets, as the JAX module takes it: as a tensor
            offset = torch.as_tensor(offset)
        if isinstance(offset, torch.Tensor) and offset.dtype in _WIDENED:
            offset = _exact_dtype("offset", offset)  # uint16/32/64: few kernels take them
        positions, offset = adapters.positions_and_offset(
            _OPS,
            seq,
            batch_shape,
            positions,
            offset,
            host=eager_cpu,
            arange=lambda: torch.arange(seq, device=x.device),
        )
        if isinstance(offset, int):  # added exactly: in int64, or by the portable algorithm for reals
            if offset >= _INVALID and positions.numel():  # beyond int64 arithmetic, and every position
                raise ValueError(
                    f"positions + offset must satisfy |p| < 2**31 = {validation.MAX_POSITION}, the range "
                    f"over which posenc is proven exact; got offset={offset}; lower the offset"
                )
            if positions.is_floating_point():
                offset = positions.new_full((), offset, dtype=torch.int64)
            else:
                positions, offset = positions.to(torch.int64) + offset, None
        elif offset is not None:
            offset = offset.to(positions.device)
            if not eager_cpu:  # refused where read (eager, on the CPU); elsewhere every row NaN, not p - k
                offset = torch.where(offset < 0, _INVALID, offset.to(torch.int64))
        if torch.onnx.is_in_onnx_export():
            if offset is not None:
                positions = positions + offset
            pe = self._onnx_table(x.dtype, x.device, positions)[positions]
        else:
            if self.max_len and eager_cpu and offset is None:  # the table max_len asks for: ids gathered
                _cached_table(options, self.max_len, x.device)  # from it, however sparse (None: too large)
            pe = _encode_tensor(positions, options, offset)
        return self._orient(pe)

    def _orient(self, pe: torch.Tensor) -> torch.Tensor:
        """(seq, d) or (batch, seq, d) encodings, arranged to broadcast against x."""
        return adapters.orient(_OPS, pe, self.batch_first)

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
        return adapters.batch_and_seq(tuple(x.shape), self.d_model, self.batch_first)


class TokenAndPositionEmbedding(nn.Module):
    """Input to the Transformer = dropout(Embedding(ids) * embed_scale + PE(positions)).

    ``embed_scale`` defaults to sqrt(d_model), as Vaswani et al. 2017 scale theirs (``scale``, like every
    other option of :class:`SinusoidalPositionalEncoding`, goes to the encoding). With ``padding_idx`` set,
    padding tokens embed to zero (``nn.Embedding``'s rule); ``positions_from_padding=True`` numbers the
    positions by fairseq's rule (:func:`make_positions`: pads keep position ``padding_idx``, tokens count
    from ``padding_idx + 1``), which works for left and right padding alike, and adds no encoding at the
    padding tokens (fairseq's table has a zero row ``padding_idx``): the inputs of M2M100, NLLB and the
    other fairseq-style models (with ``**presets.get("fairseq", padding_idx=...).options``) — the same
    positions, padding and offsets, with each encoding value exact where their float32 table errs (their
    inputs and these differ by that table's error: measured against M2M100's, up to 1.9e-6 at positions
    below 42, 1.3e-5 at positions 200 to 242).

    ``forward(ids, positions=None, *, offset=0)`` takes ``ids`` of shape ``(batch, seq)`` and returns
    ``(batch, seq, d_model)`` in the embedding's dtype (float32 unless the module is cast).

    >>> m = TokenAndPositionEmbedding(10, 4, padding_idx=0, positions_from_padding=True)
    >>> _ = torch.nn.init.zeros_(m.embedding.weight)  # zero embeddings: only the encoding shows
    >>> m(torch.tensor([[0, 5, 7]]))[0].detach()  # a left pad (no encoding), then positions 1 and 2
    tensor([[ 0.0000,  0.0000,  0.0000,  0.0000],
            [ 0.8415,  0.5403,  0.0100,  0.9999],
            [ 0.9093, -0.4161,  0.0200,  0.9998]])
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
        if not isinstance(positions_from_padding, bool):
            raise TypeError(f"positions_from_padding must be True or False; got {positions_from_padding!r}")
        if positions_from_padding and padding_idx is None:
            raise ValueError("positions_from_padding=True needs padding_idx; pass the padding token id")
        if "batch_first" in encoding_options:
            raise TypeError("TokenAndPositionEmbedding takes ids of shape (batch, seq): drop batch_first")
        num_embeddings = validation.integer("num_embeddings", num_embeddings, minimum=1)
        if padding_idx is not None:
            padding_idx = validation.integer("padding_idx", padding_idx, minimum=-num_embeddings)
            if padding_idx >= num_embeddings:
                raise ValueError(
                    f"padding_idx must be a token id in [-{num_embeddings}, {num_embeddings}) "
                    f"(num_embeddings={num_embeddings}); got {padding_idx}"
                )
        d_model = validation.d_model(d_model)
        self.embedding = nn.Embedding(num_embeddings, d_model, padding_idx=padding_idx, dtype=torch.float32)
        if embed_scale is not None:
            embed_scale = validation.real("embed_scale", embed_scale)
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
        if (
            not isinstance(ids, torch.Tensor)
            or ids.is_floating_point()
            or ids.is_complex()
            or ids.dtype == torch.bool
        ):
            got = f"a {ids.dtype} tensor" if isinstance(ids, torch.Tensor) else type(ids).__name__
            raise TypeError(f"ids must be a tensor of integer token ids; got {got}")
        if ids.dim() != 2:
            raise ValueError(f"ids must have shape (batch, seq); got shape {tuple(ids.shape)}")
        if ids.device.type == "cpu" and not _tracing() and ids.numel():  # elsewhere: a host read, a sync
            low, high, count = int(ids.min()), int(ids.max()), self.embedding.num_embeddings
            if low < 0 or high >= count:
                raise ValueError(
                    f"ids must be token ids in [0, {count}) (num_embeddings={count}); got "
                    f"{low if low < 0 else high}"
                )
        x = self.embedding(ids) * self.embed_scale
        if positions is not None or not self.positions_from_padding:
            return self.encoding(x, positions, offset=offset)
        # fairseq's rule: pads keep position padding_idx, whose row of fairseq's table is zero, so a padding
        # token gets no encoding (M2M100, NLLB, ... add exactly zero there)
        padding_idx = self.embedding.padding_idx
        pe = self.encoding.encoding_for(x, make_positions(ids, padding_idx), offset=offset)
        return self.encoding._add_encoding(x, pe.masked_fill((ids == padding_idx).unsqueeze(-1), 0.0))

    def extra_repr(self) -> str:
        return f"embed_scale={self.embed_scale:g}, positions_from_padding={self.positions_from_padding}"


#: The core's names of Timesteps' arguments, and diffusers' (its errors name the caller's).
_TIMESTEPS_NAMES = {
    "d_model": "num_channels",
    "shift": "downscale_freq_shift",
    "base": "max_period",
    "positions": "timesteps",
}


class Timesteps(nn.Module):
    """Exact drop-in for diffusers' ``Timesteps``: timesteps ``(N,)`` -> ``(N, num_channels)``.

    ω_i = max_period ** (-i / (num_channels // 2 - downscale_freq_shift)); the angle ``scale · t · ω_i`` goes
    into [sin | cos] ([cos | sin] with ``flip_sin_to_cos``), an odd width ends in a zero column. Timesteps
    may be fractional; the result is float32, correctly rounded (diffusers' float32 code is off by ~1e-4 at
    t = 1000).

    >>> emb = Timesteps(4, flip_sin_to_cos=True, downscale_freq_shift=0)(torch.tensor([0, 1000]))
    >>> emb  # [cos | sin] of t ω_i, ω = (1, 0.01)
    tensor([[ 1.0000,  1.0000,  0.0000,  0.0000],
            [ 0.5624, -0.8391,  0.8269, -0.5440]])
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
        from .. import presets

        preset = presets.get(
            "diffusers-timestep",
            flip_sin_to_cos=flip_sin_to_cos,
            downscale_freq_shift=downscale_freq_shift,
            scale=scale,
            max_period=max_period,
        )
        with renamed(_TIMESTEPS_NAMES):  # the core's d_model and shift are diffusers' num_channels, ...
            self.num_channels = validation.d_model(num_channels)
            self._options = core.Options.check(num_channels, **preset._options_for(num_channels))
        self.flip_sin_to_cos, self.downscale_freq_shift, self.scale = (
            flip_sin_to_cos,
            downscale_freq_shift,
            scale,
        )

    def forward(self, timesteps: torch.Tensor) -> torch.Tensor:
        if not isinstance(timesteps, torch.Tensor) or timesteps.dim() != 1:
            shape = (
                tuple(timesteps.shape) if isinstance(timesteps, torch.Tensor) else type(timesteps).__name__
            )
            raise ValueError(f"timesteps must be a 1-D tensor of shape (N,); got {shape}")
        with renamed(_TIMESTEPS_NAMES):
            return _encode_tensor(
                _position_tensor(timesteps, differentiable=True), (*self._options, "float32")
            )

    def extra_repr(self) -> str:
        return (
            f"num_channels={self.num_channels}, flip_sin_to_cos={self.flip_sin_to_cos}, "
            f"downscale_freq_shift={self.downscale_freq_shift}, scale={self.scale}"
        )


class DetrSinePositionEmbedding(nn.Module):
    """The exact values of DETR's ``PositionEmbeddingSine`` (and its family's: Conditional, Deformable and
    DAB-DETR, Table Transformer, Mask(2)Former, OneFormer, Grounding DINO, SAM 2/3): a pixel mask
    ``(B, H, W)``, 1 where a pixel is real (transformers' ``pixel_mask``; DETR's own ``NestedTensor`` mask
    is True at the padding: pass ``~mask``) -> ``(B, 2F, H, W)``, F = ``num_position_features``. Its call
    is this one, not each model's: transformers' modules are called ``(shape, device, dtype, mask=None)``,
    and :func:`posenc.torch.patch` puts these values behind that call in a model.

    Channels 0 .. F−1 encode each pixel's y position, F .. 2F−1 its x position, as interleaved pairs
    (sin p ω_i, cos p ω_i) with ω_i = temperature^(−2i/F); the positions are DETR's, formed as its code forms
    them in float32 (the running count of the mask; with ``normalize``, ``(count − offset) / (last count +
    eps) · scale``, scale 2π by default, offset 0.5 in Deformable DETR's line). Every value is the exact one
    rounded once to ``dtype`` (default float32): :func:`posenc.grids.detr_2d`, channels first.

    >>> pe = DetrSinePositionEmbedding(4)(torch.ones(1, 2, 3))  # y = 1, 2 down; x = 1, 2, 3 across
    >>> pe.shape  # channels first, as DETR's
    torch.Size([1, 8, 2, 3])
    >>> pe[0, :, 1, 2]  # y = 2: sin 2, cos 2, sin .02, cos .02; then x = 3
    tensor([ 0.9093, -0.4161,  0.0200,  0.9998,  0.1411, -0.9900,  0.0300,  0.9996])
    """

    def __init__(
        self,
        num_position_features: int = 64,
        temperature: float | tuple[float, float] = 10000,
        normalize: bool = False,
        scale: float | None = None,
        *,
        offset: float = 0.0,
        eps: float = 1e-6,
    ) -> None:
        super().__init__()
        from .. import grids

        self._checked = grids.detr_options(
            num_position_features,
            temperature=temperature,
            normalize=normalize,
            scale=scale,
            offset=offset,
            eps=eps,
        )
        self.num_position_features = self._checked.features
        self.temperature, self.normalize, self.offset, self.eps = temperature, normalize, offset, eps
        self.scale = float(self._checked.scale) if scale is None else scale
        self._options = [
            core.Options.check(self.num_position_features, base, SHIFT, SCALE, "interleaved", ODD)
            for base in self._checked.temperatures
        ]

    def forward(self, mask: torch.Tensor, dtype: torch.dtype | str = torch.float32) -> torch.Tensor:
        if not isinstance(mask, torch.Tensor) or mask.dim() != 3:
            shape = tuple(mask.shape) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(
                f"mask must be a (B, H, W) tensor of 0s and 1s, e.g. torch.ones(1, 32, 32); got {shape}"
            )
        if mask.is_complex():
            raise TypeError(f"mask must be a real (B, H, W) tensor of 0s and 1s; got dtype {mask.dtype}")
        # read where from_attention_mask reads its mask: eager, on the CPU (traced: no values; else a sync)
        if mask.dtype != torch.bool and mask.device.type == "cpu" and not _tracing():
            bad = (mask != 0) & (mask != 1)
            if bool(bad.any()):
                where = tuple(int(i) for i in torch.argwhere(bad)[0].tolist())
                raise PosencValueError(
                    f"mask must hold only 0s and 1s (1 = a real pixel, 0 = padding); got "
                    f"{mask[where].item()} at index {where}; pass mask != 0 if every non-zero entry is a "
                    "real pixel",
                    parameter="mask",
                )
        name = _dtype_name(dtype)
        counts = mask.to(torch.float32)
        y, x = counts.cumsum(1), counts.cumsum(2)
        if self._checked.normalize:  # float32, as DETR's code: each constant rounded to float32 first
            constants = torch.tensor(
                [self._checked.offset, self._checked.eps, self._checked.scale], dtype=torch.float32
            ).to(mask.device)
            offset, eps, scale = constants[0], constants[1], constants[2]
            y = (y - offset) / (y[:, -1:, :] + eps) * scale
            x = (x - offset) / (x[:, :, -1:] + eps) * scale
        blocks = [
            _encode_tensor(p, (*options, name)) for p, options in zip((y, x), self._options, strict=True)
        ]
        return torch.cat(blocks, dim=-1).permute(0, 3, 1, 2)

    def extra_repr(self) -> str:
        return (
            f"num_position_features={self.num_position_features}, temperature={self.temperature}, "
            f"normalize={self.normalize}, scale={self.scale}, offset={self.offset}, eps={self.eps}"
        )


# --- the CPU fast paths of forward, and tutorial checkpoints -------------------------------------


#: Outputs of at least this many bytes are worth a NumPy allocation in :func:`_add`.
_LARGE_OUTPUT_BYTES = 4 << 20


def _add(x: torch.Tensor, pe: torch.Tensor) -> torch.Tensor:
    """``x + pe``, the same values and dtype; on the CPU, outside autograd, a large result goes into memory
    that NumPy allocates.

    A fresh output's first touch (page faults, the kernel zeroing pages) costs more than the addition itself.
    NumPy asks the kernel for huge pages for large arrays (``madvise``), which halves that cost: for x of
    (8, 2048, 1024) float32 on 2 cores, 19 ms for ``x + pe`` against 10 ms into a NumPy-allocated buffer (the
    in-place add takes 4.8). The result is an ordinary contiguous tensor that owns its buffer.

    Under tracing (``torch.compile``, ``torch.export``, ONNX) the graph gets the plain ``x + pe``; with a
    dynamic size (a ``torch.SymInt`` count) no size is tested at all, so that no test of it becomes a guard
    (``torch.export`` with a dynamic length would otherwise refuse lengths whose result reaches the size
    above). An eager call pays one type check for this.
    """
    count = x.numel()  # a torch.SymInt when traced with a dynamic size: then no size is tested at all
    if (
        type(count) is not int
        or x.device.type != "cpu"
        or count * x.element_size() < _LARGE_OUTPUT_BYTES
        or _tracing()
        or not x.is_contiguous()
        or pe.dtype != x.dtype
        or (torch.is_grad_enabled() and (x.requires_grad or pe.requires_grad))
        or torch.broadcast_shapes(x.shape, pe.shape) != x.shape
    ):
        return x + pe
    return torch.add(x, pe, out=_cpu_empty(count, x.dtype).view(x.shape))


def _add_table_on_cpu(x: torch.Tensor, start: int, batch_first: bool, options: tuple) -> torch.Tensor | None:
    """``torch.ops.posenc.add_table`` on the CPU: ``x`` plus the cached table's rows, added from the cache
    as an eager call adds them; None where the cache cannot serve them (too large, or a position past
    2**31): the operator's table rows then."""
    seq = x.shape[-2] if batch_first else x.shape[0]
    if start < 0 or start + seq > validation.MAX_POSITION:
        return None
    cached = _cached_table(options, start + seq, torch.device("cpu"))
    if cached is None:
        return None
    rows = cached[start : start + seq]
    return _add(x, rows if batch_first else rows[:, None])


operator.CPU_ADD_TABLE = _add_table_on_cpu


def _cpu_empty(count: int, dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty(count, dtype=dtype)`` on the CPU, allocated by NumPy: huge pages when large (see
    :func:`_add`)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    return torch.from_numpy(np.empty(count * itemsize, dtype=np.uint8)).view(dtype)


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
