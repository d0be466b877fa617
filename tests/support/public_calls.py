"""The public calls that return arrays or tensors, for the tests that every result is the caller's own
(tests/contracts/test_ownership.py) and that no result depends on global numeric state
(tests/contracts/test_numeric_state.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

import posenc
import posenc.torch as pt
from posenc import grids, positions, presets, rope, sharding
from posenc.analysis import encodings, properties
from posenc.torch import rotary as torch_rotary


def arrays_of(value: Any) -> list[Any]:
    """The NumPy arrays and torch tensors in a result (tuples, lists, dicts and dataclasses opened)."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return [value]
    if isinstance(value, dict):
        return [a for v in value.values() for a in arrays_of(v)]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in arrays_of(v)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [a for f in dataclasses.fields(value) for a in arrays_of(getattr(value, f.name))]
    return []


def snapshot(array: Any) -> np.ndarray:
    """A float64 (or integer) NumPy copy of an array or tensor, to compare."""
    if isinstance(array, torch.Tensor):
        return array.detach().to(torch.float64).numpy().copy()
    return np.array(array, dtype=np.float64 if array.dtype.kind in "fc" or array.dtype.kind == "V" else None)


ROPE = rope.config(head_dim=8, base=100.0)
YARN = rope.config(
    head_dim=8,
    base=10000.0,
    scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
)


CALLS: dict[str, Callable[[], Any]] = {
    # the NumPy core
    "encode scalar": lambda: posenc.encode(3, 8),
    "encode list": lambda: posenc.encode([1, 2, 900], 8),
    "encode float16": lambda: posenc.encode([1, 2], 8, dtype="float16"),
    "encode bfloat16": lambda: posenc.encode(5, 8, dtype="bfloat16"),
    "table": lambda: posenc.table(6, 8),
    "table float64": lambda: posenc.table(6, 8, dtype="float64", start=3),
    "table bfloat16": lambda: posenc.table(6, 8, dtype="bfloat16"),
    "table long": lambda: posenc.table(3000, 16),
    "frequencies": lambda: posenc.frequencies(8),
    # torch
    "torch encode scalar": lambda: pt.encode(3, 8),
    "torch encode 0-d uint8": lambda: pt.encode(torch.tensor(3, dtype=torch.uint8), 8),
    "torch encode bfloat16": lambda: pt.encode(3, 8, dtype="bfloat16"),
    "torch encode float16 0-d": lambda: pt.encode(torch.tensor(4), 8, dtype=torch.float16),
    "torch encode ids": lambda: pt.encode(torch.tensor([[1, 2], [3, 4]]), 8),
    "torch encode negative": lambda: pt.encode(torch.tensor([-3, 2]), 8),
    "torch encode real": lambda: pt.encode(torch.tensor([0.5], dtype=torch.float64), 8),
    "torch table": lambda: pt.table(5, 8),
    "torch table bfloat16": lambda: pt.table(5, 8, dtype=torch.bfloat16, start=2),
    "torch module forward": lambda: pt.SinusoidalPositionalEncoding(8)(
        torch.zeros(3, 1, 8, dtype=torch.float32)
    ),
    "torch module forward batch_first": lambda: pt.SinusoidalPositionalEncoding(8, batch_first=True)(
        torch.zeros(1, 4, 8, dtype=torch.float32), offset=2
    ),
    "torch module encoding_for": lambda: pt.SinusoidalPositionalEncoding(8).encoding_for(
        torch.zeros(3, 1, 8, dtype=torch.float32)
    ),
    "torch module pe": lambda: pt.SinusoidalPositionalEncoding(8, max_len=16).pe,
    "torch module positions": lambda: pt.SinusoidalPositionalEncoding(8, batch_first=True)(
        torch.zeros(1, 2, 8, dtype=torch.float32), torch.tensor([[4, 1]])
    ),
    "torch Timesteps": lambda: pt.Timesteps(8, flip_sin_to_cos=True, downscale_freq_shift=1)(
        torch.tensor([1, 500])
    ),
    "torch TokenAndPositionEmbedding": lambda: _token_embedding()(torch.tensor([[1, 2, 3]])),
    "torch rope cos_sin": lambda: torch_rotary.cos_sin(torch.tensor([1, 2]), ROPE),
    "torch rope cos_sin 0-d": lambda: torch_rotary.cos_sin(torch.tensor(2), YARN),
    "torch RotaryEmbedding": lambda: pt.RotaryEmbedding(ROPE)(
        torch.zeros(1, 2, 8, dtype=torch.float32), torch.tensor([[1, 2]])
    ),
    "torch apply_rotary": lambda: pt.apply_rotary(
        torch.ones(1, 1, 2, 8, dtype=torch.float32),
        torch.ones(1, 1, 2, 8, dtype=torch.float32),
        *torch_rotary.cos_sin(torch.tensor([[0, 1]]), ROPE),
    ),
    "torch from_cu_seqlens": lambda: pt.from_cu_seqlens(torch.tensor([0, 2, 5])),
    "torch from_attention_mask": lambda: pt.from_attention_mask(torch.tensor([[0, 1, 1]])),
    "torch make_positions": lambda: pt.make_positions(torch.tensor([[1, 5, 6]]), 1),
    # rotary
    "rope cos_sin": lambda: rope.cos_sin([1, 2], ROPE),
    "rope cos_sin scalar yarn": lambda: rope.cos_sin(3, YARN),
    "rope cos_sin bfloat16": lambda: rope.cos_sin([1, 2], ROPE, dtype="bfloat16"),
    "rope inv_freq": lambda: rope.inv_freq(ROPE),
    "rope inv_freq yarn": lambda: rope.inv_freq(YARN),
    "rope apply_rotary": lambda: rope.apply_rotary(
        np.ones((1, 1, 2, 8), np.float32), np.ones((1, 1, 2, 8), np.float32), *rope.cos_sin([[0, 1]], ROPE)
    ),
    # presets, grids, positions, sharding
    "preset encode": lambda: presets.get("fairseq").encode([1, 2], 8),
    "preset table": lambda: presets.get("tensor2tensor").table(4, 8),
    "grid": lambda: posenc.grid((2, 3), 8),
    "grid mae_2d": lambda: grids.mae_2d(8, 4),
    "grid diffusers_2d": lambda: grids.diffusers_2d(8, 4),
    "grid timm_2d": lambda: grids.timm_2d((2, 3), 8),
    "grid dinov3_rope": lambda: grids.dinov3_rope((2, 3), 8),
    "positions from_cu_seqlens": lambda: positions.from_cu_seqlens([0, 2, 5]),
    "positions from_attention_mask": lambda: positions.from_attention_mask([[0, 1, 1]]),
    "positions make_positions": lambda: positions.make_positions([[1, 5, 6]], 1),
    "sharding shard_indices": lambda: sharding.shard_indices(8, world_size=2, rank=0),
    "sharding shard_positions": lambda: sharding.shard_positions(8, world_size=2, rank=1, scheme="zigzag"),
    "sharding permutation": lambda: sharding.permutation(8, world_size=2),
    # analysis
    "see naive_table": lambda: encodings.naive_table(5, 8),
    "see dot_products": lambda: properties.dot_products(posenc.table(5, 8)),
    "see shift_matrix": lambda: properties.shift_matrix(3, 8),
    "see wavelengths": lambda: properties.wavelengths(8),
    # identify and layouts
    "convert_layout": lambda: posenc.convert_layout(posenc.table(3, 8), "interleaved", "sin_cos"),
}


def _token_embedding() -> torch.nn.Module:
    module = pt.TokenAndPositionEmbedding(10, 8)
    with torch.no_grad():  # fixed weights, in float32 whatever torch's default dtype
        module.embedding.weight = torch.nn.Parameter(
            torch.arange(80, dtype=torch.float32).reshape(10, 8) / 80
        )
    return module


@contextlib.contextmanager
def _torch_default(dtype: torch.dtype) -> Iterator[None]:
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


#: The global numeric states a caller may have set, none of which a result may depend on: name -> a
#: context manager that sets it for its block.
NUMERIC_STATES = {
    "seterr raise": lambda: np.errstate(all="raise"),
    "seterr warn": lambda: np.errstate(all="warn"),
    "torch default float64": lambda: _torch_default(torch.float64),
}
