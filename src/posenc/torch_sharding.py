"""Context parallelism with ``torch.distributed``: the short name of :mod:`posenc.torch.sharding`.

``from posenc.torch_sharding import gather, shard, shard_positions`` is
``from posenc.torch.sharding import gather, shard, shard_positions``: the same functions.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401  (PyTorch)
except ImportError as error:  # pragma: no cover - exercised only without torch
    raise ImportError("posenc.torch_sharding needs PyTorch: pip install 'posenc[torch]'") from error

from .torch.sharding import gather, shard, shard_indices, shard_positions

__all__ = ["gather", "shard", "shard_indices", "shard_positions"]
