"""Position ids from padding masks, packed sequences and padded token ids, written once over the array
backend (:mod:`posenc.portable.backend`): each rule (what a valid input is, the error and its wording, the
computation) is here, and :mod:`posenc.positions` (NumPy) and :mod:`posenc.torch.positions` (tensors) call
it with their backend.

* :func:`from_attention_mask`: ``where(mask, cumsum(mask, -1) - 1 + start, pad_position)``;
* :func:`from_cu_seqlens`: token t of document j (``cu[j] <= t < cu[j + 1]``) gets ``start + t - cu[j]``;
* :func:`make_positions`: ``(cumsum(ids != padding_idx, -1) + past) * (ids != padding_idx) + padding_idx``.

What differs between the frameworks is said here once too: NumPy takes array-likes (lists included), torch
tensors only; the messages name the framework's own fix (``.astype(bool)``, ``.bool()``); and the checks
that read values (a 0/1 mask, a non-decreasing ``cu_seqlens``, ``total``) run where reading them is free:
always for NumPy, for torch in eager mode on the CPU only (on another device a read is a sync, and while
compiling, exporting or tracing, or on meta tensors, there is no value to read), for JAX outside ``jit``.
Type and rank checks always run (they are static). Nothing here branches on data where values are not
read, so torch traces it under ``torch.compile(fullgraph=True)`` and ``torch.export``.

>>> import numpy as np
>>> from posenc.portable import backend_named
>>> from_cu_seqlens(backend_named("numpy"), np.array([0, 3, 5]))
array([0, 1, 2, 0, 1])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..validation import MAX_POSITION, fits_in_memory, position_int, shorten
from .backend import Backend

#: How each framework's messages name an array and its fixes.
_WORDS = {
    "numpy": {
        "array": "array",
        "to_bool": "attention_mask.astype(bool)",
        "mask_example": "[1, 1, 0]",
        "to_int": {"ids": ".astype(int)", "cu_seqlens": ".astype(int)"},
        "one_token": "[{item}]",
    },
    "torch": {
        "array": "tensor",
        "to_bool": "attention_mask.bool()",
        "mask_example": "torch.tensor([1, 1, 0])",
        "to_int": {"ids": ".long()", "cu_seqlens": ".to(torch.int32)"},
        "one_token": "ids.reshape(1)",
    },
}
_WORDS["jax"] = {**_WORDS["numpy"], "mask_example": "jnp.array([1, 1, 0])", "one_token": "ids.reshape(1)"}

_TORCH_INTEGERS = ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")


def from_attention_mask(ops: Backend, attention_mask: Any, start: Any = 0, pad_position: Any = 0) -> Any:
    """Position ids of the real tokens of a padded batch, int64, shape ``(..., seq)`` like the mask:
    ``where(mask, cumsum(mask, -1) - 1 + start, pad_position)`` (1/True = real token, 0/False = padding)."""
    mask = _mask(ops, attention_mask)
    start = _int(ops, "start", start)
    pad_position = _int(ops, "pad_position", pad_position)
    if _values_read(ops, mask):
        tokens = _longest_row(ops, mask)
        if tokens and start + tokens - 1 >= MAX_POSITION:
            raise ValueError(
                f"the last position start + k - 1 = {start + tokens - 1}, for a row of k = {tokens} real "
                f"tokens, must be < 2**31 = {MAX_POSITION}; lower start to at most {MAX_POSITION - tokens}"
            )
    counts = ops.xp.cumsum(ops.wide_int(mask), -1)
    return ops.where(mask, counts + (start - 1), pad_position)


def from_cu_seqlens(ops: Backend, cu_seqlens: Any, start: Any = 0, total: Any = None) -> Any:
    """Position ids of packed sequences, int64, shape ``(total,)``: token t of document j gets
    ``start + t - cu_seqlens[j]``. ``total`` (checked against ``cu_seqlens[-1]`` where values are read) is
    the output length; without it, ``cu_seqlens[-1]`` is read (an unbacked size under torch.compile)."""
    cu = _cu_seqlens(ops, cu_seqlens)
    start = _int(ops, "start", start)
    if total is None:
        total = cu[-1].item()
    else:
        total = _int(ops, "total", total, minimum=0)
        if _values_read(ops, cu) and total != cu[-1].item():
            raise ValueError(
                f"total={total} does not match cu_seqlens[-1] = {cu[-1].item()}, the number of packed "
                "tokens; pass total=cu_seqlens[-1] or leave it out"
            )
    if _values_read(ops, cu) and cu.shape[0] > 1:
        longest = int((cu[1:] - cu[:-1]).max().item())
        if longest and start + longest - 1 >= MAX_POSITION:
            raise ValueError(
                f"the last position start + l - 1 = {start + longest - 1}, for the longest document of "
                f"l = {longest} tokens, must be < 2**31 = {MAX_POSITION}; lower start to at most "
                f"{MAX_POSITION - longest}"
            )
    if ops.name == "numpy":  # the tokens, their documents, their first tokens and the positions at once
        fits_in_memory((int(total),), np.dtype(np.int64), copies=4, advice="pack fewer tokens per batch")
    if ops.name == "torch":
        tokens = ops.xp.arange(total, dtype=ops.xp.int64, device=cu.device)
        document = ops.xp.searchsorted(cu, tokens, right=True) - 1
    else:
        tokens = ops.wide_int(ops.xp.arange(total))
        document = ops.xp.searchsorted(cu, tokens, side="right") - 1
    # the document of token t is the last j with cu[j] <= t ("right" skips empty documents)
    return tokens - cu[document] + start


def make_positions(ops: Backend, ids: Any, padding_idx: Any, past_key_values_length: Any = 0) -> Any:
    """fairseq's position ids, int64, shape like ``ids``: with ``mask = ids != padding_idx``,
    ``(cumsum(mask, -1) + past_key_values_length) * mask + padding_idx``."""
    ids = _as_array(ops, "ids", ids)
    kind = _kind(ops, ids.dtype)
    if kind != "integer":
        raise TypeError(
            f"ids must be an integer {_word(ops, 'array')}; got dtype {ids.dtype}; convert it with "
            f"{_WORDS[ops.name]['to_int']['ids']}"
        )
    if ids.ndim == 0:
        fix = _WORDS[ops.name]["one_token"].format(item=ids.item() if ops.name == "numpy" else "")
        raise ValueError(
            f"ids must have at least one axis, shape (..., seq); got a scalar of shape (); pass {fix} for a "
            "single token"
        )
    _fits(ops, ids)
    padding_idx = _int(ops, "padding_idx", padding_idx)
    past = _int(ops, "past_key_values_length", past_key_values_length, minimum=0)
    if ops.name == "torch" and ids.dtype not in (ops.xp.int32, ops.xp.int64):
        ids = ops.wide_int(ids)  # uint8 != -1 would wrap -1 to 255; NumPy compares the true values
    mask = ids != padding_idx
    if _values_read(ops, mask):
        tokens = _longest_row(ops, mask)
        last = padding_idx + past + tokens
        if tokens and last >= MAX_POSITION:
            raise ValueError(
                f"the last position padding_idx + past_key_values_length + k = {padding_idx} + {past} + "
                f"{tokens} = {last}, for a row of k = {tokens} non-padding tokens, must be < 2**31 = "
                f"{MAX_POSITION}; lower padding_idx or past_key_values_length"
            )
    counts = ops.xp.cumsum(ops.wide_int(mask), -1)
    return (counts + past) * mask + padding_idx


# --- the rules of the inputs --------------------------------------------------------------------------


def _mask(ops: Backend, value: Any) -> Any:
    """A valid attention mask as bool: bool or 0/1 integers, at least one axis."""
    array = _as_array(ops, "attention_mask", value)
    kind = _kind(ops, array.dtype)
    if kind not in ("bool", "integer"):
        raise TypeError(
            f"attention_mask must be bool or 0/1 integers (1/True = real token, 0/False = padding); "
            f"got dtype {array.dtype}; pass attention_mask != 0 or {_word(ops, 'to_bool')}"
        )
    if array.ndim == 0:
        raise ValueError(
            "attention_mask must have at least one axis, shape (..., seq); got shape (); "
            f"pass a 1-D mask such as {_word(ops, 'mask_example')}"
        )
    _fits(ops, array)
    if kind == "bool":
        return array
    if _values_read(ops, array):
        bad = (array != 0) & (array != 1)
        if bool(bad.any()):
            where = _first_index(ops, bad)
            raise ValueError(
                f"attention_mask must hold only 0 and 1 (1 = real token, 0 = padding); got "
                f"{array[where].item()} at index {where}; pass attention_mask != 0 if every non-zero entry "
                "is a real token"
            )
    return array != 0


def _cu_seqlens(ops: Backend, value: Any) -> Any:
    """Valid ``cu_seqlens`` as int64: 1-D integers, starting at 0, non-decreasing, the last < 2**31."""
    array = _as_array(ops, "cu_seqlens", value)
    if _kind(ops, array.dtype) != "integer":
        raise TypeError(
            f"cu_seqlens must be an integer {_word(ops, 'array')}; got dtype {array.dtype}; convert it with "
            f"{_WORDS[ops.name]['to_int']['cu_seqlens']}"
        )
    if array.ndim != 1:
        raise ValueError(
            f"cu_seqlens must be 1-D, [0, l0, l0 + l1, ..., total]; got shape {tuple(array.shape)}; "
            "for a batch of padded sequences use from_attention_mask"
        )
    if array.shape[0] == 0:
        raise ValueError(
            f"cu_seqlens must start at 0, [0, l0, l0 + l1, ..., total]; got an empty {_word(ops, 'array')}; "
            "prepend 0 to the cumulative lengths"
        )
    cu = ops.wide_int(array)
    if _values_read(ops, cu):
        if array[0].item() != 0:
            raise ValueError(
                "cu_seqlens must start at 0, [0, l0, l0 + l1, ..., total]; "
                f"got cu_seqlens[0] = {array[0].item()}; prepend 0 to the cumulative lengths"
            )
        beyond = ops.beyond_wide(array)  # uint64 values >= 2**63 would wrap to negative int64 ones
        if beyond is not None and bool(beyond.any()):
            j = _first_index(ops, beyond)[0]
            raise ValueError(
                f"cu_seqlens must hold numbers of packed tokens < 2**31 = {MAX_POSITION} (FlashAttention "
                f"keeps cu_seqlens in int32); got cu_seqlens[{j}] = {array[j].item()}; pack fewer tokens per "
                "batch"
            )
        decreasing = cu[1:] < cu[:-1]
        if bool(decreasing.any()):
            j = _first_index(ops, decreasing)[0]
            raise ValueError(
                f"cu_seqlens must be non-decreasing (each step is a document length >= 0); got "
                f"cu_seqlens[{j}] = {array[j].item()} > cu_seqlens[{j + 1}] = {array[j + 1].item()}; "
                "pass the cumulative sum of the lengths"
            )
        if array[-1].item() >= MAX_POSITION:
            raise ValueError(
                f"cu_seqlens[-1], the number of packed tokens, must be < 2**31 = {MAX_POSITION} "
                f"(FlashAttention keeps cu_seqlens in int32); got {array[-1].item()}; pack fewer tokens per "
                "batch"
            )
    return cu


def _fits(ops: Backend, array: Any) -> None:
    """NumPy: refuse, before any work, an input ``(..., seq)`` whose positions memory cannot hold: at once
    the rules hold three int64 arrays of its shape (the counts, the positions, one between) and bool masks
    (measured); a broadcast input takes no memory itself, its positions do."""
    if ops.name == "numpy":
        shape = tuple(array.shape)
        fits_in_memory(
            shape,
            np.dtype(np.int64),
            copies=3,
            extra=3 * math.prod(shape),
            advice="split the batch into smaller ones (each row's positions depend on that row alone)",
        )


def _longest_row(ops: Backend, mask: Any) -> int:
    """The most true entries of bool ``mask`` along its last axis (0 for an empty mask), read on the
    host."""
    if 0 in tuple(mask.shape):
        return 0
    return int(ops.xp.sum(mask, -1).max().item())


def _int(ops: Backend, name: str, value: Any, *, minimum: int | None = None) -> Any:
    """An integer argument (:func:`posenc.validation.position_int`); a torch symbolic int under tracing
    passes through unchanged (never specialised)."""
    if ops.name == "torch" and isinstance(value, ops.xp.SymInt):
        return value
    if minimum is None:
        return position_int(name, value)
    return position_int(name, value, minimum=minimum)


def _as_array(ops: Backend, name: str, value: Any) -> Any:
    """The input as an array of ``ops``: NumPy (and JAX) read array-likes, an empty list as integers (NumPy
    says float64) and a ragged list as a TypeError naming ``name``; torch takes tensors only."""
    xp = ops.xp
    if ops.name == "torch":
        if not isinstance(value, xp.Tensor):
            raise TypeError(
                f"{name} must be a torch.Tensor; got {type(value).__name__}; wrap it with "
                "torch.as_tensor(...) or use posenc.positions for NumPy arrays"
            )
        return value
    if ops.name == "jax" and isinstance(value, xp.ndarray):
        return value
    try:
        array = xp.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be a rectangular array (every row the same length); got {shorten(value)}; pad the "
            "rows to one length (use an attention mask for the padding)"
        ) from None
    if array.size == 0 and not isinstance(value, type(array)):
        array = ops.wide_int(array)
    return array


def _kind(ops: Backend, dtype: Any) -> str:
    """ "bool", "integer" (not bool) or "other"."""
    if ops.name == "torch":
        if dtype == ops.xp.bool:
            return "bool"
        integers = {getattr(ops.xp, name, None) for name in _TORCH_INTEGERS}
        return "integer" if dtype in integers else "other"
    kind = np.dtype(dtype).kind
    return "bool" if kind == "b" else "integer" if kind in "iu" else "other"


def _values_read(ops: Backend, array: Any) -> bool:
    """Whether checks that read ``array``'s values run: always for NumPy; for torch in eager mode on the CPU
    (elsewhere a read is a device-to-host sync, and traced or meta tensors have no values); for JAX
    outside tracing."""
    if ops.name == "torch":
        torch = ops.xp
        return array.device.type == "cpu" and not (torch.compiler.is_compiling() or torch.jit.is_tracing())
    if ops.name == "jax":
        import jax

        return not isinstance(array, jax.core.Tracer)
    return True


def _first_index(ops: Backend, flags: Any) -> tuple[int, ...]:
    """The index of the first true entry of ``flags`` (read on the host)."""
    return tuple(int(i) for i in ops.xp.argwhere(flags)[0].tolist())


def _word(ops: Backend, key: str) -> str:
    return _WORDS[ops.name][key]
