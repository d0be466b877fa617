"""Position ids for torch tensors: the rules of :mod:`posenc.positions`, on the input's device (both call
:mod:`posenc.portable.positions`, where each rule is written once over the array backend).

Only the PyTorch adapter imports this module. Every function is pure tensor code: no copy to the host, no
Python loop over the data and no branch on its values, so it traces under ``torch.compile(fullgraph=True)``
and ``torch.export`` (the one value read is the packed length ``cu_seqlens[-1]`` when ``total`` is not
given: an unbacked size there). Type and rank checks always run (they are static); value checks (a 0/1 mask,
non-decreasing ``cu_seqlens``) read data back to the host, so they run in eager mode only: not while
compiling, exporting or tracing, and not on meta tensors.
"""

from __future__ import annotations

import torch

from ..portable import positions as rules
from ..portable.backend import backend_named

__all__ = ["from_attention_mask", "from_cu_seqlens", "make_positions"]

#: The backend the rules run on (fetched once: torch.compile warns on a call to a cached function).
_TORCH = backend_named("torch")


def from_attention_mask(
    attention_mask: torch.Tensor, *, start: int = 0, pad_position: int = 0
) -> torch.Tensor:
    """Position ids of the real tokens of a padded batch: shape ``(..., seq)`` like the mask, int64.

    ``attention_mask`` is ``(..., seq)`` of bool or 0/1 integers, 1/True for a real token and 0/False for
    padding. Along the last axis the k-th real token gets ``start + k``; padding gets ``pad_position``::

        positions = where(mask, cumsum(mask, dim=-1) - 1 + start, pad_position)

    >>> from_attention_mask(torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]]))
    tensor([[0, 0, 0, 1, 2],
            [0, 1, 2, 0, 0]])
    """
    return rules.from_attention_mask(_TORCH, attention_mask, start, pad_position)


def from_cu_seqlens(
    cu_seqlens: torch.Tensor, *, start: int = 0, total: int | torch.SymInt | None = None
) -> torch.Tensor:
    """Position ids of packed sequences: shape ``(total,)``, int64, restarting at ``start`` in each document.

    ``cu_seqlens`` is the FlashAttention "varlen" boundary tensor ``[0, l0, l0 + l1, ..., total]`` (1-D,
    integer, starting at 0, non-decreasing; a repeated boundary is an empty document). Token t of document j
    gets ``start + t - cu_seqlens[j]``.

    The output length is data-dependent: without ``total`` it is read from ``cu_seqlens[-1]`` (under
    ``torch.compile`` and ``torch.export`` an unbacked size). Pass ``total`` when it is known, typically
    ``total=input_ids.shape[-1]`` for a packed ``(1, total)`` batch: the output then has that static or
    symbolic length and a compiled graph reads nothing back from the device. In eager mode ``total`` is
    checked against ``cu_seqlens[-1]``.

    >>> from_cu_seqlens(torch.tensor([0, 3, 5, 9], dtype=torch.int32))
    tensor([0, 1, 2, 0, 1, 0, 1, 2, 3])
    """
    return rules.from_cu_seqlens(_TORCH, cu_seqlens, start, total)


def make_positions(ids: torch.Tensor, padding_idx: int, *, past_key_values_length: int = 0) -> torch.Tensor:
    """fairseq's position ids: non-padding tokens count from ``padding_idx + 1``; shape like ``ids``, int64.

    ``ids`` is ``(..., seq)`` of integer token ids. Along the last axis::

        mask = ids != padding_idx
        positions = (cumsum(mask, dim=-1) + past_key_values_length) * mask + padding_idx

    fairseq's ``utils.make_positions`` and Hugging Face's ``create_position_ids_from_input_ids``.

    >>> make_positions(torch.tensor([[5, 6, 7, 1, 1], [1, 1, 8, 9, 4]]), padding_idx=1)
    tensor([[2, 3, 4, 1, 1],
            [1, 1, 2, 3, 4]])
    """
    return rules.make_positions(_TORCH, ids, padding_idx, past_key_values_length)
