"""Rotary position embeddings for PyTorch, exact: :func:`cos_sin`, :class:`RotaryEmbedding` (a drop-in for
Hugging Face's ``*RotaryEmbedding`` modules) and :func:`apply_rotary` (for ``apply_rotary_pos_emb``, one
function for every framework: :func:`posenc.rope.arrays.apply_rotary`).

Every cos/sin value is A · cos(p θ_i) (resp. sin) correctly rounded once to the requested dtype
(:mod:`posenc.rope`). Eager calls on CPU tensors use the NumPy core; every other device (``meta`` too) and
every call under ``torch.compile``/``torch.export`` runs the device algorithm (:mod:`posenc.device`) where
the positions are, as the operator ``torch.ops.posenc.rotary``: no host transfer, no sync. One exception,
as in Hugging Face: "dynamic" and "longrope" scaling pick their frequencies from the sequence length, so
without an explicit ``seq_len`` they read max(positions) + 1 on the host.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import torch

from .. import _validate, device, rope
from ..rope.arrays import arrange, check_layout, check_request
from ..rope.tables import _law
from . import encode_launch
from .tensors import (
    _check_positions_on_host,
    _dtype_name,
    _numpy_dtype,
    _position_tensor,
    _to_tensor,
    _tracing,
)


def cos_sin(
    positions: torch.Tensor | Any,
    params: rope.RopeParameters,
    *,
    dtype: torch.dtype | str = torch.float32,
    layout: str = "half",
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.rope.cos_sin` for tensors: (cos, sin), each ``positions.shape + (rotary_dim,)`` on
    ``positions``' device (with ``mrope_section``, positions has a leading axis of 3 that the result drops).

    >>> cos, sin = cos_sin(torch.tensor([[0, 1]]), rope.config(head_dim=4, base=100.0))
    >>> sin
    tensor([[[0.0000, 0.0000, 0.0000, 0.0000],
             [0.8415, 0.0998, 0.8415, 0.0998]]])
    """
    positions = _position_tensor(positions)
    check_request(params, layout, tuple(positions.shape))
    name = _dtype_name(dtype)
    if positions.device.type == "cpu" and not _tracing():
        _check_positions_on_host(positions)
        host = positions.detach().to(torch.float64 if positions.is_floating_point() else torch.int64).numpy()
        cos, sin = rope.cos_sin(host, params, dtype=_numpy_dtype(name), layout=layout, seq_len=seq_len)
        return _to_tensor(cos), _to_tensor(sin)
    if seq_len is None and params.rope_type in ("dynamic", "longrope"):
        seq_len = int(positions.max()) + 1  # a host read, as Hugging Face's dynamic_rope_update does
    length = -1 if seq_len is None else _validate.integer("seq_len", seq_len, minimum=1)
    if params.rope_type not in ("dynamic", "longrope"):
        length = -1
    cos, sin = torch.ops.posenc.rotary(positions, _params_json(params), length, name, layout)
    return cos, sin


class RotaryEmbedding(torch.nn.Module):
    """Exact rotary cos/sin: a drop-in for Hugging Face's ``LlamaRotaryEmbedding`` and its siblings.

    ``config`` is a :class:`posenc.rope.RopeParameters` or anything :func:`posenc.rope.config` reads (a
    Hugging Face config object, dict or config.json path). ``forward(x, position_ids)`` returns (cos, sin)
    of shape ``position_ids.shape + (rotary_dim,)`` in x's dtype on x's device, each value correctly
    rounded once to that dtype (Hugging Face computes float32 angles, then rounds again). ``inv_freq``
    (float32, the exact frequencies rounded) and ``attention_scaling`` are kept for code that reads them.

    >>> module = RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    >>> cos, sin = module(torch.zeros(1, 3, 8), torch.arange(3)[None])
    >>> tuple(cos.shape), module.attention_scaling
    ((1, 3, 8), 1.0)
    """

    inv_freq: torch.Tensor

    def __init__(self, config: Any, *, layout: str = "half"):
        super().__init__()
        check_layout(layout)
        self.params = config if isinstance(config, rope.RopeParameters) else rope.config(config)
        self.layout = layout
        self.attention_scaling = rope.attention_scaling(self.params)
        inverse = torch.from_numpy(rope.inv_freq(self.params)).to(torch.float32)
        self.register_buffer("inv_freq", inverse, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin): ``position_ids.shape + (rotary_dim,)``, x's dtype, on x's device. With multimodal
        sections, ``position_ids`` is (3, B, L), or (B, L) for text (the same id on every axis)."""
        position_ids = position_ids.to(x.device)
        if self.params.mrope_section and position_ids.dim() == 2:
            position_ids = position_ids.expand(3, -1, -1)
        cos, sin = cos_sin(position_ids, self.params, dtype=x.dtype, layout=self.layout)
        return cos, sin

    def extra_repr(self) -> str:
        p = self.params
        shown = f"rope_type={p.rope_type!r}, rotary_dim={p.rotary_dim}, base={p.base:g}"
        return f"{shown}, layout={self.layout!r}"


_TORCH = device.Backend(torch, "torch")


# --- the operator --------------------------------------------------------------------------------------


@torch.library.custom_op("posenc::rotary", mutates_args=())
def _rotary_op(
    positions: torch.Tensor, params: str, seq_len: int, dtype_name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """The device algorithm on ``positions``' device: (cos, sin) laid out as :func:`cos_sin` says."""
    request, sections, interleaved = _request(params, seq_len, dtype_name)
    rows = encode_launch.encode(positions, request)
    return arrange(_TORCH, rows, request.count, sections, interleaved, layout)


@_rotary_op.register_fake
def _rotary_fake(positions, params, seq_len, dtype_name, layout):
    fields = json.loads(params)
    shape = positions.shape[1:] if fields["mrope_section"] else positions.shape
    width = 2 * (fields["rotary_dim"] // 2)
    dtype = getattr(torch, dtype_name)
    return tuple(positions.new_empty((*shape, width), dtype=dtype) for _ in range(2))


@torch.compiler.assume_constant_result
def _params_json(params: rope.RopeParameters) -> str:
    """The parameters as the operator takes them (a JSON string: operators take plain types); a constant of
    the compiled program."""
    return json.dumps(dataclasses.asdict(params), sort_keys=True)


@functools.lru_cache(maxsize=64)
def _request(params: str, seq_len: int, dtype_name: str) -> Any:
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(params).items()}
    params = rope.RopeParameters(**fields)
    law = _law(params, None if seq_len < 0 else seq_len)
    return device.request_for_law(law, dtype_name), params.mrope_section, params.mrope_interleaved
