"""Position ids for torch tensors: the rules of :mod:`posenc.positions`, on the input's device.

Only the PyTorch adapter imports this module. Every function is pure tensor code: no copy to the host, no
Python loop over the data and no branch on its values, so it traces under ``torch.compile(fullgraph=True)``
and ``torch.export`` (the one value read is the packed length ``cu_seqlens[-1]`` when ``total`` is not
given: an unbacked size there). Type and rank checks always run (they are static); value checks (a 0/1 mask,
non-decreasing ``cu_seqlens``) read data back to the host, so they run in eager mode only: not while
compiling, exporting or tracing, and not on meta tensors.
"""

from __future__ import annotations

from typing import Any

import torch

from ..validation import MAX_POSITION, position_int

__all__ = ["from_attention_mask", "from_cu_seqlens", "make_positions"]

_INTEGER_DTYPES = frozenset(
    dtype
    for name in ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if isinstance(dtype := getattr(torch, name, None), torch.dtype)
)


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
    mask = _mask(attention_mask)
    start = _int("start", start)
    pad_position = _int("pad_position", pad_position)
    counts = torch.cumsum(mask, dim=-1)  # int64 for a bool input
    return torch.where(mask, counts + (start - 1), pad_position)


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
    cu = _cu_seqlens(cu_seqlens)
    start = _int("start", start)
    if total is None:
        total = cu[-1].item()
    else:
        total = _int("total", total, minimum=0)
        if _values_checked(cu) and total != int(cu[-1]):
            raise ValueError(
                f"total={total} does not match cu_seqlens[-1] = {int(cu[-1])}, the number of packed tokens; "
                "pass total=cu_seqlens[-1] or leave it out"
            )
    tokens = torch.arange(total, dtype=torch.int64, device=cu.device)
    # The document of token t is the last j with cu[j] <= t (right=True skips empty documents).
    document = torch.searchsorted(cu, tokens, right=True) - 1
    return tokens - cu[document] + start


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
    _tensor("ids", ids)
    if ids.dtype not in _INTEGER_DTYPES:
        raise TypeError(f"ids must be an integer tensor; got dtype {ids.dtype}; convert it with .long()")
    if ids.dim() == 0:
        raise ValueError(
            "ids must have at least one axis, shape (..., seq); got a scalar of shape (); "
            "pass ids.reshape(1) for a single token"
        )
    padding_idx = _int("padding_idx", padding_idx)
    past = _int("past_key_values_length", past_key_values_length, minimum=0)
    if ids.dtype not in (torch.int32, torch.int64):
        ids = ids.long()  # uint8 != -1 would wrap -1 to 255; NumPy compares the true values
    mask = ids != padding_idx
    return (torch.cumsum(mask, dim=-1) + past) * mask + padding_idx


# --- argument checks ------------------------------------------------------------------------------


def _values_checked(tensor: torch.Tensor) -> bool:
    """Whether checks that read ``tensor``'s values may run: eager mode, on the CPU (on any other device a
    read would be a device-to-host sync; those values are not checked)."""
    return tensor.device.type == "cpu" and not (torch.compiler.is_compiling() or torch.jit.is_tracing())


def _int(name: str, value: Any, *, minimum: int | None = None) -> Any:
    """An integer argument; a symbolic int under tracing passes through unchanged (never specialised)."""
    if isinstance(value, torch.SymInt):
        return value
    if minimum is None:
        return position_int(name, value)
    return position_int(name, value, minimum=minimum)


def _tensor(name: str, value: Any) -> None:
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor; got {type(value).__name__}; wrap it with torch.as_tensor(...) "
            "or use posenc.positions for NumPy arrays"
        )


def _mask(attention_mask: Any) -> torch.Tensor:
    _tensor("attention_mask", attention_mask)
    dtype = attention_mask.dtype
    if dtype != torch.bool and dtype not in _INTEGER_DTYPES:
        raise TypeError(
            f"attention_mask must be bool or 0/1 integers (1/True = real token, 0/False = padding); "
            f"got dtype {dtype}; pass attention_mask != 0 or attention_mask.bool()"
        )
    if attention_mask.dim() == 0:
        raise ValueError(
            "attention_mask must have at least one axis, shape (..., seq); got shape (); "
            "pass a 1-D mask such as torch.tensor([1, 1, 0])"
        )
    if dtype == torch.bool:
        return attention_mask
    if _values_checked(attention_mask):
        bad = (attention_mask != 0) & (attention_mask != 1)
        if bool(bad.any()):
            where = tuple(bad.nonzero()[0].tolist())
            raise ValueError(
                f"attention_mask must hold only 0 and 1 (1 = real token, 0 = padding); got "
                f"{attention_mask[where].item()} at index {where}; pass attention_mask != 0 if every "
                "non-zero entry is a real token"
            )
    return attention_mask != 0


def _cu_seqlens(cu_seqlens: Any) -> torch.Tensor:
    _tensor("cu_seqlens", cu_seqlens)
    if cu_seqlens.dtype not in _INTEGER_DTYPES:
        raise TypeError(
            f"cu_seqlens must be an integer tensor; got dtype {cu_seqlens.dtype}; "
            "convert it with .to(torch.int32)"
        )
    if cu_seqlens.dim() != 1:
        raise ValueError(
            f"cu_seqlens must be 1-D, [0, l0, l0 + l1, ..., total]; got shape {tuple(cu_seqlens.shape)}; "
            "for a batch of padded sequences use from_attention_mask"
        )
    if cu_seqlens.shape[0] == 0:
        raise ValueError(
            "cu_seqlens must start at 0, [0, l0, l0 + l1, ..., total]; got an empty tensor; "
            "prepend 0 to the cumulative lengths"
        )
    cu = cu_seqlens.long()
    if _values_checked(cu):
        if int(cu[0]) != 0:
            raise ValueError(
                "cu_seqlens must start at 0, [0, l0, l0 + l1, ..., total]; "
                f"got cu_seqlens[0] = {int(cu[0])}; prepend 0 to the cumulative lengths"
            )
        decreasing = cu[1:] < cu[:-1]
        if bool(decreasing.any()):
            j = int(decreasing.nonzero()[0, 0])
            raise ValueError(
                f"cu_seqlens must be non-decreasing (each step is a document length >= 0); got "
                f"cu_seqlens[{j}] = {int(cu[j])} > cu_seqlens[{j + 1}] = {int(cu[j + 1])}; "
                "pass the cumulative sum of the lengths"
            )
        if int(cu[-1]) >= MAX_POSITION:
            raise ValueError(
                f"cu_seqlens[-1], the number of packed tokens, must be < 2**31 = {MAX_POSITION} "
                f"(FlashAttention keeps cu_seqlens in int32); got {int(cu[-1])}; pack fewer tokens per batch"
            )
    return cu
