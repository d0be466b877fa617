"""Context parallelism with ``torch.distributed``: each rank's position ids, its shard, and the gather.

The splits are those of :mod:`posenc.sharding` (``"contiguous"`` and the load-balanced ``"zigzag"`` of ring
attention); this module makes tensors of them and reads ``rank`` and ``world_size`` from a process group
(the default group unless ``group=`` says otherwise, or explicit ``rank=``/``world_size=`` without any
group). Typical use on every rank of a context-parallel group::

    from posenc.torch import SinusoidalPositionalEncoding
    from posenc.torch.sharding import gather, shard, shard_positions

    x_local = shard(x, dim=1, scheme="zigzag")                     # (batch, L / R, d_model)
    positions = shard_positions(L, scheme="zigzag", device=x.device)
    y_local = pe_module(x_local, positions)                        # = those rows of pe_module(x)
    y = gather(y_local, dim=1, scheme="zigzag")                    # all_gather, back in sequence order

Decoding with a KV cache: the token of step t after a prefill of L tokens has position L + t on every rank
(``pe_module(x_step, offset=L + t)``), never the length of the rank's own cache.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .. import sharding
from .functions import _device

__all__ = ["gather", "shard", "shard_indices", "shard_positions"]


def shard_indices(
    length: int,
    *,
    scheme: str = "contiguous",
    rank: int | None = None,
    world_size: int | None = None,
    group: Any = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The indices of this rank's tokens in the full sequence: int64, shape ``(length // world_size,)``.

    :func:`posenc.sharding.shard_indices` with ``rank``/``world_size`` taken from ``group``.

    >>> shard_indices(8, scheme="zigzag", rank=1, world_size=2)
    tensor([2, 3, 4, 5])
    """
    rank, world_size = _topology(rank, world_size, group)
    indices = sharding.shard_indices(length, world_size=world_size, rank=rank, scheme=scheme)
    return torch.from_numpy(indices).to(_device(device))


def shard_positions(
    length: int,
    *,
    scheme: str = "contiguous",
    start: int = 0,
    rank: int | None = None,
    world_size: int | None = None,
    group: Any = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Position ids of this rank's tokens of a plain sequence ``start .. start + length - 1``: int64.

    ``start + shard_indices(...)``; pass them as ``positions`` to ``SinusoidalPositionalEncoding``.

    >>> shard_positions(8, scheme="zigzag", rank=0, world_size=2)
    tensor([0, 1, 6, 7])
    """
    rank, world_size = _topology(rank, world_size, group)
    positions = sharding.shard_positions(length, world_size=world_size, rank=rank, scheme=scheme, start=start)
    return torch.from_numpy(positions).to(_device(device))


def shard(
    tensor: torch.Tensor,
    *,
    dim: int,
    scheme: str = "contiguous",
    rank: int | None = None,
    world_size: int | None = None,
    group: Any = None,
) -> torch.Tensor:
    """This rank's shard of ``tensor`` along its sequence dimension ``dim`` (``index_select``; a copy).

    Use it for tokens, embeddings and for position ids computed on the whole sequence (padding masks,
    packed documents): those must be computed before sharding.

    >>> shard(torch.arange(8)[None], dim=1, scheme="zigzag", rank=1, world_size=2)
    tensor([[2, 3, 4, 5]])
    """
    _check_tensor(tensor)
    dim = _dim(dim, tensor.dim())
    index = shard_indices(
        tensor.shape[dim], scheme=scheme, rank=rank, world_size=world_size, group=group, device=tensor.device
    )
    return tensor.index_select(dim, index)


def gather(tensor: torch.Tensor, *, dim: int, scheme: str = "contiguous", group: Any = None) -> torch.Tensor:
    """Every rank's shard, gathered (``all_gather``) and put back in sequence order along ``dim``.

    The inverse of :func:`shard` across the group: every rank gets the full tensor. A collective: call it
    on every rank of ``group``. The result does not carry gradients (``all_gather`` does not). ``tensor``
    has the same shape and dtype on every rank; the result is ``world_size`` times longer along ``dim``.

    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # a group of one
    >>> local = shard(torch.arange(8)[None], dim=1, scheme="zigzag")  # this rank's shard
    >>> gather(local * 10, dim=1, scheme="zigzag")
    tensor([[ 0, 10, 20, 30, 40, 50, 60, 70]])
    >>> dist.destroy_process_group()
    """
    _check_tensor(tensor)
    dim = _dim(dim, tensor.dim())
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "gather needs an initialised torch.distributed process group; call "
            "torch.distributed.init_process_group first"
        )
    world_size = dist.get_world_size(group)
    parts = [torch.empty_like(tensor) for _ in range(world_size)]
    dist.all_gather(parts, tensor.contiguous(), group=group)
    length = tensor.shape[dim] * world_size
    order = torch.from_numpy(sharding.permutation(length, world_size=world_size, scheme=scheme))
    inverse = torch.argsort(order).to(tensor.device)
    return torch.cat(parts, dim=dim).index_select(dim, inverse)


# --- helpers ----------------------------------------------------------------------------------------


def _topology(rank: int | None, world_size: int | None, group: Any) -> tuple[int, int]:
    """(rank, world_size): explicit values, else those of ``group`` (default group) in torch.distributed."""
    if rank is not None and world_size is not None:
        if group is not None:
            raise ValueError("pass either group= or rank= and world_size=, not both")
        return rank, world_size
    if rank is not None or world_size is not None:
        raise ValueError(
            f"pass rank= and world_size= together (got rank={rank!r}, world_size={world_size!r}), "
            "or neither to read them from torch.distributed"
        )
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            "no rank= and world_size= given and torch.distributed is not initialised; call "
            "torch.distributed.init_process_group first or pass rank= and world_size="
        )
    return dist.get_rank(group), dist.get_world_size(group)


def _check_tensor(tensor: Any) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor; got {type(tensor).__name__}")


def _dim(dim: Any, ndim: int) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, the sequence dimension; got {dim!r}")
    if not -ndim <= dim < ndim:
        raise ValueError(
            f"dim={dim} is out of range for a tensor with {ndim} dimensions; pass the sequence dimension"
        )
    return dim % ndim
