"""Context-parallel splits of a sequence: which tokens, and which positions, each rank holds. NumPy only.

Context (sequence) parallelism shards the sequence axis over ``world_size`` ranks. Each rank must encode
exactly the *global* positions of the tokens it holds; then its slice of ``x + PE`` is bit-identical to the
same rows of the unsharded result, because posenc's encoding of a position does not depend on what else is
computed with it. Two splits of a sequence of length L are in use:

* ``"contiguous"``: rank r holds tokens ``r L/R .. (r + 1) L/R - 1`` (L divisible by R).
* ``"zigzag"`` (load-balanced, ring attention): the sequence is cut into 2R chunks of c = L / (2R) tokens;
  rank r holds chunk r followed by chunk 2R - 1 - r, so every rank gets the same amount of causal-attention
  work. This is the split of ring-flash-attention's ``zigzag_ring_flash_attn`` and of Megatron-LM's
  context parallelism (``get_batch_on_this_cp_rank``). L must be divisible by 2R.

For R = 2 and L = 8 (c = 2)::

    contiguous: rank 0 -> [0 1 2 3]   rank 1 -> [4 5 6 7]
    zigzag:     rank 0 -> [0 1 6 7]   rank 1 -> [2 3 4 5]

Position ids are ``start + shard_indices(...)`` for a plain sequence (:func:`shard_positions`). Position
ids that depend on the whole sequence — left padding (:func:`posenc.positions.from_attention_mask`), packed
documents (``from_cu_seqlens``), fairseq's numbering — must be computed on the full sequence first and then
split with :func:`shard`, exactly like the tokens: a cumulative sum over one shard would restart at 0.

**Decoding with a KV cache under context parallelism.** After a prefill of L tokens (split in any way),
the token generated at decoding step t (t = 0, 1, ...) has position ``start + L + t`` — the *global*
number of tokens before it — on every rank, whichever rank stores its key and value. Pass
``offset=L + t`` (or a ``(batch,)`` array of per-sequence lengths); never the length of the local cache,
which holds only L / R of the tokens.

The PyTorch helpers that read the rank from ``torch.distributed`` and gather shards are in
:mod:`posenc.torch.sharding`; with JAX, put the sequence in :func:`permutation` order and shard it over a
mesh axis (see :mod:`posenc.jax`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from . import validation

__all__ = ["SCHEMES", "permutation", "shard", "shard_indices", "shard_positions", "unshard"]

#: The splits this module knows: see the module docstring.
SCHEMES = ("contiguous", "zigzag")


def shard_indices(length: int, *, world_size: int, rank: int, scheme: str = "contiguous") -> np.ndarray:
    """The indices of the tokens that ``rank`` holds, in the order it holds them: ``(length // world_size,)``.

    ``contiguous``: ``arange(r m, (r + 1) m)`` with m = length / world_size. ``zigzag``: chunks r and
    2R - 1 - r of size c = length / (2 world_size), concatenated. int64.

    >>> shard_indices(8, world_size=2, rank=1)
    array([4, 5, 6, 7])
    >>> shard_indices(8, world_size=2, rank=0, scheme="zigzag")
    array([0, 1, 6, 7])
    """
    length, world_size, scheme = _check(length, world_size, scheme)
    rank = _rank(rank, world_size)
    halves = 2 if scheme == "zigzag" else 1  # zigzag: two ranges, then their concatenation
    validation.fits_in_memory((length // world_size,), np.dtype(np.int64), copies=halves)
    return _indices(length, world_size, rank, scheme)


def shard_positions(
    length: int, *, world_size: int, rank: int, scheme: str = "contiguous", start: int = 0
) -> np.ndarray:
    """The position ids of ``rank``'s tokens of a plain sequence ``start .. start + length - 1``.

    ``start + shard_indices(length, world_size=..., rank=..., scheme=...)``: int64, shape
    ``(length // world_size,)``. Feed them to the encoding as ``positions``; with ``start`` you continue a
    sequence (a prefill chunk that follows ``start`` cached tokens).

    >>> shard_positions(8, world_size=2, rank=1, scheme="zigzag", start=100)
    array([102, 103, 104, 105])
    """
    length, world_size, scheme = _check(length, world_size, scheme)
    rank = _rank(rank, world_size)
    start = validation.position_int("start", start)
    if length and start + length - 1 >= validation.MAX_POSITION:
        raise ValueError(
            f"the last position start + length - 1 = {start + length - 1} must be < 2**31 = "
            f"{validation.MAX_POSITION}; lower start or length"
        )
    positions = shard_indices(length, world_size=world_size, rank=rank, scheme=scheme)
    positions += np.int64(start)  # in place: no second array of the shard's size
    return positions


def permutation(length: int, *, world_size: int, scheme: str = "contiguous") -> np.ndarray:
    """All ranks' indices end to end: ``concatenate([shard_indices(..., rank=r) for r in range(R)])``.

    ``x[..., permutation, :]`` puts the sequence in the order in which an even split into ``world_size``
    consecutive blocks — what a JAX ``NamedSharding`` over a mesh axis does — gives every rank its shard.
    ``argsort(permutation)`` undoes it. Shape ``(length,)``, int64; the identity for ``contiguous``.

    >>> permutation(8, world_size=2, scheme="zigzag")
    array([0, 1, 6, 7, 2, 3, 4, 5])
    """
    length, world_size, scheme = _check(length, world_size, scheme)
    working = 3 if scheme == "zigzag" else 1  # zigzag: the chunks' starts, then the sum (measured 2.25x)
    validation.fits_in_memory((length,), np.dtype(np.int64), copies=working)
    if scheme == "contiguous":
        return np.arange(length, dtype=np.int64)
    if not length:  # no loop over the ranks: world_size may be up to 2**31
        return np.zeros(0, dtype=np.int64)
    chunk = length // (2 * world_size)  # >= 1 here, so 2 * world_size <= length: the chunk list is small
    ranks = np.arange(world_size, dtype=np.int64)
    chunks = np.stack([ranks, 2 * world_size - 1 - ranks], axis=1).reshape(-1)
    return (chunks[:, None] * chunk + np.arange(chunk, dtype=np.int64)).reshape(-1)


def shard(
    array: npt.ArrayLike, *, axis: int, world_size: int, rank: int, scheme: str = "contiguous"
) -> np.ndarray:
    """``rank``'s shard of ``array`` along its sequence axis ``axis``: ``np.take(array, indices, axis)``.

    Use it for anything laid out along the sequence: tokens, embeddings, or position ids computed on the
    whole sequence (padding masks, packed documents).

    >>> shard([[10, 11, 12, 13], [20, 21, 22, 23]], axis=1, world_size=2, rank=0, scheme="zigzag")
    array([[10, 13],
           [20, 23]])
    """
    values = np.asarray(array)
    axis = _axis(axis, values.ndim)
    indices = shard_indices(values.shape[axis], world_size=world_size, rank=rank, scheme=scheme)
    return np.take(values, indices, axis=axis)


def unshard(shards: Sequence[npt.ArrayLike], *, axis: int, scheme: str = "contiguous") -> np.ndarray:
    """The full sequence from every rank's shard, in rank order (what ``all_gather`` returns).

    Inverse of :func:`shard`: ``unshard([shard(a, rank=r, ...) for r in range(R)], ...)`` equals ``a``.
    ``world_size`` is ``len(shards)``; the shards must have equal shapes.

    >>> unshard([[0, 1, 6, 7], [2, 3, 4, 5]], axis=0, scheme="zigzag")
    array([0, 1, 2, 3, 4, 5, 6, 7])
    """
    if isinstance(shards, np.ndarray) or not isinstance(shards, Sequence) or not len(shards):
        raise TypeError(
            "shards must be a non-empty list of arrays, one per rank in rank order (as all_gather returns); "
            f"got {type(shards).__name__}"
        )
    parts = [np.asarray(part) for part in shards]
    shapes = {part.shape for part in parts}
    if len(shapes) != 1:
        raise ValueError(f"shards must all have the same shape; got shapes {[part.shape for part in parts]}")
    axis = _axis(axis, parts[0].ndim)
    world_size = len(parts)
    length = parts[0].shape[axis] * world_size
    order = permutation(length, world_size=world_size, scheme=scheme)
    return np.take(np.concatenate(parts, axis=axis), np.argsort(order), axis=axis)


# --- the split --------------------------------------------------------------------------------------


def _indices(length: int, world_size: int, rank: int, scheme: str) -> np.ndarray:
    if scheme == "contiguous":
        size = length // world_size
        return np.arange(rank * size, (rank + 1) * size, dtype=np.int64)
    chunk = length // (2 * world_size)
    mirror = 2 * world_size - 1 - rank
    return np.concatenate(
        [
            np.arange(rank * chunk, (rank + 1) * chunk, dtype=np.int64),
            np.arange(mirror * chunk, (mirror + 1) * chunk, dtype=np.int64),
        ]
    )


def _check(length: int, world_size: int, scheme: str) -> tuple[int, int, str]:
    """Checked before anything is allocated: ``0 <= length <= 2**31`` (the positions 0 .. length - 1 are
    encodable) and ``1 <= world_size <= 2**31``."""
    length = validation.integer("length", length, minimum=0)
    if length > validation.MAX_POSITION:
        raise ValueError(
            f"length must be <= 2**31 = {validation.MAX_POSITION} (positions 0 .. length - 1 must be < 2**31 "
            f"to be encoded); got {length}; shard a shorter sequence"
        )
    world_size = validation.integer("world_size", world_size, minimum=1)
    if world_size > validation.MAX_POSITION:
        raise ValueError(
            f"world_size must be <= 2**31 = {validation.MAX_POSITION} (at most one rank per position of the "
            f"longest sequence); got {world_size}; pass the number of ranks in the context-parallel group"
        )
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(map(repr, SCHEMES))}; got {scheme!r}")
    parts = world_size if scheme == "contiguous" else 2 * world_size
    if length % parts:
        what = "world_size" if scheme == "contiguous" else "2 * world_size"
        padded = -(-length // parts) * parts
        raise ValueError(
            f"length={length} is not a multiple of {what} = {parts}, which the {scheme} split needs "
            f"({parts} equal {'shards' if scheme == 'contiguous' else 'chunks'}); pad the sequence to "
            f"{padded} tokens (give the padding any position and mask it out of the attention)"
        )
    return length, world_size, scheme


def _rank(rank: int, world_size: int) -> int:
    rank = validation.integer("rank", rank, minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank must be in 0 .. world_size - 1 = {world_size - 1}; got rank={rank}")
    return rank


def _axis(axis: int, ndim: int) -> int:
    axis = validation.integer("axis", axis, minimum=-ndim if ndim else 0)
    if ndim == 0 or axis >= ndim:
        raise ValueError(
            f"axis={axis} is out of range for an array with {ndim} dimensions; "
            "pass the index of the sequence axis"
        )
    return axis % ndim
