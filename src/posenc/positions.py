"""Position ids from padding masks, packed sequences and fairseq-style padded token ids. NumPy only.

Three rules, each returning int64 position ids to feed to :func:`posenc.encode`:

* :func:`from_attention_mask`: the Hugging Face mask convention (1/True = real token, 0/False = padding);
  real tokens are numbered ``start, start + 1, ...`` along the last axis, padding gets ``pad_position``.
* :func:`from_cu_seqlens`: packed sequences in the FlashAttention "varlen" convention; positions restart at
  ``start`` in every document.
* :func:`make_positions`: fairseq's ``utils.make_positions`` (and Hugging Face's
  ``create_position_ids_from_input_ids``): non-padding tokens are numbered from ``padding_idx + 1``.

The PyTorch adapter has the same functions for tensors, with the same rules and the same errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from .validation import MAX_POSITION, position_int

__all__ = ["from_attention_mask", "from_cu_seqlens", "make_positions"]


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
    mask = _mask(attention_mask)
    start = position_int("start", start)
    pad_position = position_int("pad_position", pad_position)
    counts = np.cumsum(mask, axis=-1, dtype=np.int64)
    return np.where(mask, counts + (start - 1), np.int64(pad_position))


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
    cu = _cu_seqlens(cu_seqlens)
    start = position_int("start", start)
    length = int(cu[-1])
    if total is not None:
        total = position_int("total", total, minimum=0)
        if total != length:
            raise ValueError(
                f"total={total} does not match cu_seqlens[-1] = {length}, the number of packed tokens; "
                "pass total=cu_seqlens[-1] or leave it out"
            )
    document_starts = np.repeat(cu[:-1], np.diff(cu))
    return np.arange(length, dtype=np.int64) - document_starts + np.int64(start)


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
    array = _integer_array("ids", ids)
    if array.ndim == 0:
        raise ValueError(
            f"ids must have at least one axis, shape (..., seq); got a scalar of shape (); "
            f"pass [{array.item()}] for a single token"
        )
    padding_idx = position_int("padding_idx", padding_idx)
    past = position_int("past_key_values_length", past_key_values_length, minimum=0)
    mask = array != padding_idx
    counts = np.cumsum(mask, axis=-1, dtype=np.int64)
    return (counts + np.int64(past)) * mask + np.int64(padding_idx)


# --- argument checks (also used by the PyTorch adapter) -------------------------------------------


def _mask(value: Any) -> np.ndarray:
    array = _asarray("attention_mask", value)
    kind = array.dtype.kind
    if kind not in "biu":
        raise TypeError(
            f"attention_mask must be bool or 0/1 integers (1/True = real token, 0/False = padding); "
            f"got dtype {array.dtype}; pass attention_mask != 0 or attention_mask.astype(bool)"
        )
    if array.ndim == 0:
        raise ValueError(
            "attention_mask must have at least one axis, shape (..., seq); got shape (); "
            "pass a 1-D mask such as [1, 1, 0]"
        )
    if kind == "b":
        return array
    bad = (array != 0) & (array != 1)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"attention_mask must hold only 0 and 1 (1 = real token, 0 = padding); got {array[where]} at "
            f"index {where}; pass attention_mask != 0 if every non-zero entry is a real token"
        )
    return array != 0


def _cu_seqlens(value: Any) -> np.ndarray:
    array = _integer_array("cu_seqlens", value)
    if array.ndim != 1:
        raise ValueError(
            f"cu_seqlens must be 1-D, [0, l0, l0 + l1, ..., total]; got shape {array.shape}; "
            "for a batch of padded sequences use from_attention_mask"
        )
    if array.size == 0 or array[0] != 0:
        got = "an empty array" if array.size == 0 else f"cu_seqlens[0] = {array[0]}"
        raise ValueError(
            f"cu_seqlens must start at 0, [0, l0, l0 + l1, ..., total]; got {got}; "
            "prepend 0 to the cumulative lengths"
        )
    steps = np.diff(array.astype(np.int64))
    if (steps < 0).any():
        j = int(np.argmax(steps < 0))
        raise ValueError(
            f"cu_seqlens must be non-decreasing (each step is a document length >= 0); got "
            f"cu_seqlens[{j}] = {array[j]} > cu_seqlens[{j + 1}] = {array[j + 1]}; "
            "pass the cumulative sum of the lengths"
        )
    if array[-1] >= MAX_POSITION:
        raise ValueError(
            f"cu_seqlens[-1], the number of packed tokens, must be < 2**31 = {MAX_POSITION} (FlashAttention "
            f"keeps cu_seqlens in int32); got {array[-1]}; pack fewer tokens per batch"
        )
    return array.astype(np.int64)


def _integer_array(name: str, value: Any) -> np.ndarray:
    array = _asarray(name, value)
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be an integer array; got dtype {array.dtype}; convert it with .astype(int)"
        )
    return array


def _asarray(name: str, value: Any) -> np.ndarray:
    """``np.asarray(value)``, except that an empty list is read as integers (NumPy says float64), and a
    ragged list (rows of different lengths) is a TypeError that names ``name``."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        text = repr(value)
        shown = text if len(text) <= 60 else text[:57] + "..."
        raise TypeError(
            f"{name} must be a rectangular array (every row the same length); got {shown}; pad the rows "
            "to one length (use an attention mask for the padding)"
        ) from None
    if array.size == 0 and not isinstance(value, np.ndarray):
        array = array.astype(np.int64)
    return array
