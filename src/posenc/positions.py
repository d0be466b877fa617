"""Position ids from padding masks, packed sequences and fairseq-style padded token ids. NumPy only.

Three rules, each returning int64 position ids to feed to :func:`posenc.encode`:

* :func:`from_attention_mask`: the Hugging Face mask convention (1/True = real token, 0/False = padding);
  real tokens are numbered ``start, start + 1, ...`` along the last axis, padding gets ``pad_position``.
* :func:`from_cu_seqlens`: packed sequences in the FlashAttention "varlen" convention; positions restart at
  ``start`` in every document.
* :func:`make_positions`: fairseq's ``utils.make_positions`` (and Hugging Face's
  ``create_position_ids_from_input_ids``): non-padding tokens are numbered from ``padding_idx + 1``.

The PyTorch adapter has the same functions for tensors, with the same rules and the same errors: both call
:mod:`posenc.portable.positions`, where each rule (the valid inputs, the errors, the computation) is
written once over the array backend.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .portable import positions as rules
from .portable.backend import backend_named

__all__ = ["from_attention_mask", "from_cu_seqlens", "make_positions"]

_NUMPY = backend_named("numpy")


def from_attention_mask(
    attention_mask: npt.ArrayLike, *, start: int = 0, pad_position: int = 0
) -> np.ndarray:
    """Position ids of the real tokens of a padded batch: shape ``(..., seq)`` like the mask, int64.

    ``attention_mask`` is ``(..., seq)`` of bool or 0/1 integers, 1/True for a real token and 0/False for
    padding (the Hugging Face convention). Along the last axis the k-th real token (k = 0, 1, ...) gets
    position ``start + k``, whatever padding comes before it (left, right or in the middle); padding gets
    ``pad_position``::

        positions = where(mask, cumsum(mask, axis=-1) - 1 + start, pad_position)

    >>> from_attention_mask([[0, 0, 1, 1, 1], [1, 1, 1, 0, 0]])
    array([[0, 0, 0, 1, 2],
           [0, 1, 2, 0, 0]])
    >>> from_attention_mask([True, False, True, True], start=1, pad_position=-1)
    array([ 1, -1,  2,  3])
    """
    return rules.from_attention_mask(_NUMPY, attention_mask, start, pad_position)


def from_cu_seqlens(cu_seqlens: npt.ArrayLike, *, start: int = 0, total: int | None = None) -> np.ndarray:
    """Position ids of packed sequences: shape ``(total,)``, int64, restarting at ``start`` in each document.

    ``cu_seqlens`` is the FlashAttention "varlen" boundary array ``[0, l0, l0 + l1, ..., total]``: 1-D,
    integer, starting at 0 and non-decreasing (a repeated boundary is an empty document). Token t of
    document j, i.e. ``cu_seqlens[j] <= t < cu_seqlens[j + 1]``, gets position ``start + t - cu_seqlens[j]``.

    ``total``, when given, must equal ``cu_seqlens[-1]`` (it is checked). It exists for the PyTorch version,
    which uses it as the output length: a static or symbolic shape under ``torch.compile``/``torch.export``
    instead of one read back from the device.

    >>> from_cu_seqlens([0, 3, 5, 9])
    array([0, 1, 2, 0, 1, 0, 1, 2, 3])
    >>> from_cu_seqlens([0, 2, 2, 3], start=1)  # the second document is empty
    array([1, 2, 1])
    """
    return rules.from_cu_seqlens(_NUMPY, cu_seqlens, start, total)


def make_positions(ids: npt.ArrayLike, padding_idx: int, *, past_key_values_length: int = 0) -> np.ndarray:
    """fairseq's position ids: non-padding tokens count from ``padding_idx + 1``; shape like ``ids``, int64.

    ``ids`` is ``(..., seq)`` of integer token ids. Along the last axis::

        mask = ids != padding_idx
        positions = (cumsum(mask, axis=-1) + past_key_values_length) * mask + padding_idx

    so padding tokens get ``padding_idx`` and the k-th non-padding token (k = 1, 2, ...) gets
    ``padding_idx + past_key_values_length + k``. This is fairseq's ``utils.make_positions`` and Hugging
    Face's ``create_position_ids_from_input_ids`` (M2M100, NLLB, Speech2Text), whose
    ``past_key_values_length`` continues the numbering during incremental decoding.

    >>> make_positions([[5, 6, 7, 1, 1], [1, 1, 8, 9, 4]], padding_idx=1)
    array([[2, 3, 4, 1, 1],
           [1, 1, 2, 3, 4]])
    >>> make_positions([[7, 1]], padding_idx=1, past_key_values_length=3)
    array([[5, 1]])
    """
    return rules.make_positions(_NUMPY, ids, padding_idx, past_key_values_length)
