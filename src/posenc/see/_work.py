"""How much work one call may do, checked up front, and doing it in chunks of bounded memory.

Every function of :mod:`posenc.see` that loops over positions checks its arguments, the number of values
(positions × d_model) and the working memory before the first allocation, so a call that cannot finish is
refused at once with the argument named, never left to hang or run out of memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from ..core import table

#: Values per working chunk: chunks stay at tens of MB whatever the table size.
ELEMENTS = 1 << 22
#: The most values (positions × d_model) one call of max_magnitude / collisions / collision_horizon computes:
#: about ten minutes at ~10**8 values per second. Beyond it a call is refused up front, not left to hang.
MAX_WORK = 1 << 36


def chunks(length: int, d_model: int) -> list[tuple[int, int]]:
    """Row ranges ``(lo, hi)`` covering 0 .. length - 1, each of about :data:`ELEMENTS` values."""
    step = max(1, ELEMENTS // max(1, int(d_model)))
    return [(lo, min(length, lo + step)) for lo in range(0, length, step)]


def span(
    name: str, length: Any, start: Any, d_model: Any, options: dict[str, Any], *, rows_bytes: int = 0
) -> tuple[int, int]:
    """Check positions start .. start + ``length`` - 1 up front, before any loop or allocation: ``length``
    (called ``name``) an integer >= 0, every option of :func:`posenc.table` valid, the last position < 2**31,
    at most :data:`MAX_WORK` values and ``rows_bytes`` per position of working memory.
    Returns ``(length, start)``."""
    length = _validate.integer(name, length, minimum=0)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    table(0, d_model, start=start, **options)  # validates d_model and every option
    if length and start + length - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"{name} must keep the last position start + {name} - 1 = {start + length - 1} below 2**31 = "
            f"{_validate.MAX_POSITION}; got {name}={length}, start={start}; lower {name} or start"
        )
    work = length * int(d_model)
    if work > MAX_WORK:
        raise ValueError(
            f"{name}={length} with d_model={int(d_model)} asks for {work:.3g} values, more than the "
            f"2**36 = {MAX_WORK:.3g} (about ten minutes of work) that one call computes; lower {name}"
        )
    if rows_bytes:
        check_memory(f"{name}={length}", length * rows_bytes, f"lower {name}")
    return length, start


def check_memory(what: str, needed: int, fix: str) -> None:
    """A ValueError saying ``what`` (the argument, named) when ``needed`` bytes of working memory are more
    than is available, and ``fix``."""
    if needed < 64 << 20:
        return
    available = _validate.available_memory()
    if available is not None and needed > available:
        raise ValueError(
            f"{what} needs {needed / 2**30:.1f} GiB of working memory but only "
            f"{available / 2**30:.1f} GiB of memory is available; {fix}"
        )


def as_matrix(name: str, value: Any, *, result: bool = False) -> np.ndarray:
    """``value`` as a 2-D float64 array, or a ValueError/TypeError that names it. The memory for the float64
    copy (and with ``result``, for the (rows, rows) float64 result) is checked before anything is computed."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a 2-D array of real numbers; got {type(value).__name__}") from error
    if array.dtype.kind not in "iuf" and array.dtype.name != "bfloat16":
        raise TypeError(f"{name} must be a 2-D array of real numbers; got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D, shape (positions, d_model); got shape {array.shape}; "
            "reshape it with .reshape(-1, d_model)"
        )
    rows, columns = array.shape
    needed = rows * columns * 8 + (rows * rows * 8 if result else 0)
    result_text = f" and the ({rows}, {rows}) result" if result else ""
    check_memory(
        f"{name} of shape {array.shape} (as float64{result_text})", needed, "pass fewer rows, or a slice"
    )
    return np.asarray(array, dtype=np.float64)


def max_abs(rows: np.ndarray) -> float:
    """max |value| over ``rows`` (any real dtype), chunk by chunk in float64; 0 for no rows."""
    worst = 0.0
    for lo, hi in chunks(len(rows), rows.shape[1] if rows.ndim == 2 else 1):
        worst = max(worst, float(np.abs(rows[lo:hi].astype(np.float64)).max(initial=0.0)))
    return worst


def row_norms(rows: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each row of ``rows`` ``(L, d_model)``, in float64 chunks: shape ``(L,)``."""
    out = np.empty(len(rows))
    for lo, hi in chunks(len(rows), rows.shape[1]):
        block = rows[lo:hi].astype(np.float64)
        out[lo:hi] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out
