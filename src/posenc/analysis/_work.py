"""How much work one call may do, checked up front, and doing it in chunks of bounded memory.

Every function of :mod:`posenc.analysis` that loops over positions checks its arguments, the number of values
(positions × d_model) and the working memory before the first allocation, so a call that cannot finish is
refused at once with the argument named, never left to hang or run out of memory.
"""

from __future__ import annotations

import mmap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import validation
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
    length = validation.integer(name, length, minimum=0)
    start = validation.integer("start", start, minimum=-(validation.MAX_POSITION - 1))
    width = validation.d_model(d_model)
    if length and start + length - 1 >= validation.MAX_POSITION:
        raise ValueError(
            f"{name} must keep the last position start + {name} - 1 = {start + length - 1} below 2**31 = "
            f"{validation.MAX_POSITION}; got {name}={length}, start={start}; lower {name} or start"
        )
    work = length * width
    if work > MAX_WORK:
        raise ValueError(
            f"{name}={length} with d_model={width} asks for {work:.3g} values, more than the "
            f"2**36 = {MAX_WORK:.3g} (about ten minutes of work) that one call computes; lower {name}"
        )
    if rows_bytes:
        check_memory(f"{name}={length}", length * rows_bytes, f"lower {name}")
    table(0, d_model, start=start, **options)  # every option (and d_model's constants: ~0.5 s at 2**20)
    return length, start


def check_memory(what: str, needed: int, fix: str) -> None:
    """A ValueError saying ``what`` (the argument, named) when ``needed`` bytes of working memory are more
    than is available, and ``fix``."""
    if needed < 64 << 20:
        return
    available = validation.available_memory()
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


#: Outputs of at least this many bytes are allocated by :func:`fresh` with their pages mapped at once.
FRESH_BYTES = 64 << 20


def fresh(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array like ``np.empty(shape, dtype)``; one of :data:`FRESH_BYTES` or more has its
    pages mapped by one system call (``MAP_POPULATE``, Linux) instead of one page fault per 4 KiB page as
    it is first written: on some machines (virtual ones) those faults cost several times the arithmetic
    (a 2 GiB table: 4.4 s of system time page by page, 1.1 s at once)."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    populate = getattr(mmap, "MAP_POPULATE", None)
    if count * dt.itemsize < FRESH_BYTES or populate is None:
        return np.empty(shape, dt)
    validation.fits_in_memory(tuple(shape), dt)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate
    try:
        buffer = mmap.mmap(-1, count * dt.itemsize, flags=flags)
    except (OSError, ValueError):
        return np.empty(shape, dt)
    return np.frombuffer(buffer, dt, count).reshape(shape)


def max_abs(rows: Any) -> float:
    """max |value| over ``rows`` (any real dtype, or :class:`Rows`), chunk by chunk in float64; 0 for no
    rows, NaN where a value is NaN (never the largest of the others: a NaN row is not bounded)."""
    if isinstance(rows, Rows) and rows.stats is not None:
        row_max = rows.stats.max_abs[rows.lo : rows.hi]
        worst = 0.0
        for lo, hi in chunks(len(rows), rows.shape[1]):
            worst = float(np.maximum(worst, row_max[lo:hi].max(initial=0.0)))
        return worst
    worst = 0.0
    for lo, hi in chunks(len(rows), rows.shape[1] if rows.ndim == 2 else 1):
        worst = float(np.maximum(worst, np.abs(rows[lo:hi].astype(np.float64)).max(initial=0.0)))
    return worst


def nonfinite_rows(rows: Any) -> tuple[int, int | None]:
    """How many rows of ``rows`` ``(L, d_model)`` (any real dtype, or :class:`Rows`) hold a NaN or an
    infinity, and the index of the first (None for none); chunk by chunk."""
    count, first = 0, None
    for lo, hi in chunks(len(rows), rows.shape[1]):
        if isinstance(rows, Rows) and rows.stats is not None:
            bad = ~np.isfinite(rows.stats.max_abs[rows.lo + lo : rows.lo + hi])
        else:
            bad = ~np.isfinite(rows[lo:hi].astype(np.float64)).all(axis=1)
        hits = np.flatnonzero(bad)
        if len(hits) and first is None:
            first = lo + int(hits[0])
        count += len(hits)
    return count, first


def row_norms(rows: Any) -> np.ndarray:
    """The Euclidean norm of each row of ``rows`` ``(L, d_model)`` (or :class:`Rows`), in float64 chunks:
    shape ``(L,)``."""
    if isinstance(rows, Rows) and rows.stats is not None and rows.hi <= len(rows.stats.norms):
        return rows.stats.norms[rows.lo : rows.hi].copy()
    out = np.empty(len(rows))
    for lo, hi in chunks(len(rows), rows.shape[1]):
        block = rows[lo:hi].astype(np.float64)
        out[lo:hi] = np.sqrt(np.einsum("ij,ij->i", block, block))
    return out


def row_stats(block: np.ndarray, nexts: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows ``block`` ``(B, d_model)``: each row's max |value|, its norm, and its squared distance to the
    next row (``nexts``: the row after the block, or None for the last row: then B - 1 distances); all in
    float64, as :func:`max_abs`, :func:`row_norms` and the margin search compute them."""
    f = block.astype(np.float64)
    top = np.abs(f).max(axis=1, initial=0.0) if len(f) else np.zeros(0)
    norms = np.sqrt(np.einsum("ij,ij->i", f, f))
    if nexts is not None:
        f = np.concatenate([f, np.asarray(nexts, np.float64).reshape(1, -1)])
    diff = f[1:] - f[:-1]
    return top, norms, np.einsum("ij,ij->i", diff, diff)


@dataclass
class RowStats:
    """What one pass over a table's rows kept of each row (indices from the table's first row):
    ``max_abs`` of every row; ``norms`` and ``step`` (the squared float64 distance from row p to row p + 1)
    of the first ``len(norms)`` rows only."""

    max_abs: np.ndarray
    norms: np.ndarray
    step: np.ndarray


class Rows:
    """Rows ``lo .. hi - 1`` of a table that is never held whole: those below ``len(stored)`` are held, the
    others computed again by ``build(lo, hi)`` when read (``fetch(indices)``, when given, computes scattered
    rows at once). Supports what the criteria read: ``len``, ``shape``, ``dtype``, slices (a view),
    integer-array indexing, ``astype`` and ``np.asarray``; :func:`max_abs`, :func:`row_norms` and the margin
    search read ``stats`` instead of the rows."""

    ndim = 2

    def __init__(
        self,
        build: Callable[[int, int], np.ndarray],
        length: int,
        d_model: int,
        dtype: np.dtype,
        *,
        stored: np.ndarray | None = None,
        stats: RowStats | None = None,
        fetch: Callable[[np.ndarray], np.ndarray] | None = None,
        fill: Callable[[int, int, np.ndarray], np.ndarray] | None = None,
        lo: int = 0,
        hi: int | None = None,
    ) -> None:
        self.build, self.length, self.d_model, self.dtype = build, length, d_model, np.dtype(dtype)
        self.stored = stored if stored is not None else np.zeros((0, d_model), dtype)
        self.stats, self.fetch, self.fill = stats, fetch, fill
        self.lo, self.hi = lo, length if hi is None else hi

    @property
    def shape(self) -> tuple[int, int]:
        return (self.hi - self.lo, self.d_model)

    @property
    def size(self) -> int:
        return (self.hi - self.lo) * self.d_model

    def __len__(self) -> int:
        return self.hi - self.lo

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            lo, hi, step = key.indices(len(self))
            if step != 1:
                return np.asarray(self)[key]
            hi = max(lo, hi)
            return Rows(
                self.build,
                self.length,
                self.d_model,
                self.dtype,
                stored=self.stored,
                stats=self.stats,
                fetch=self.fetch,
                fill=self.fill,
                lo=self.lo + lo,
                hi=self.lo + hi,
            )
        index = np.asarray(key)
        if index.dtype.kind not in "iu":
            raise TypeError(f"Rows takes slices and integer indices; got {key!r}")
        index = np.where(index < 0, index + len(self), index)
        if index.size and (index.min() < 0 or index.max() >= len(self)):
            raise IndexError(f"row index out of range for {len(self)} rows")
        flat = self.gather(self.lo + index.reshape(-1))
        return flat.reshape(*index.shape, self.d_model)

    def gather(self, positions: np.ndarray) -> np.ndarray:
        """The rows at table indices ``positions`` (any order, repeats allowed): ``(len(positions), d)``."""
        positions = np.asarray(positions, np.int64)
        out = np.empty((len(positions), self.d_model), self.dtype)
        held = positions < len(self.stored)
        out[held] = self.stored[positions[held]]
        rest = np.flatnonzero(~held)
        if not len(rest):
            return out
        if self.fetch is not None:
            out[rest] = self.fetch(positions[rest])
            return out
        order = rest[np.argsort(positions[rest], kind="stable")]
        sorted_p = positions[order]
        cuts = np.flatnonzero(np.diff(sorted_p) > 64) + 1
        for group in np.split(np.arange(len(order)), cuts):
            first, last = int(sorted_p[group[0]]), int(sorted_p[group[-1]])
            out[order[group]] = self.build(first, last + 1)[sorted_p[group] - first]
        return out

    def block(self, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
        """Rows lo .. hi - 1 of this view as an array (a view of the held rows where possible; else into
        ``out`` when given, shape ``(hi - lo, d_model)``)."""
        lo, hi = self.lo + lo, self.lo + hi
        if hi <= len(self.stored):
            return self.stored[lo:hi]
        if lo >= len(self.stored):
            if out is not None and self.fill is not None:
                return self.fill(lo, hi, out)
            return self.build(lo, hi)
        return np.concatenate([self.stored[lo:], self.build(len(self.stored), hi)])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self.hi <= len(self.stored):
            out = self.stored[self.lo : self.hi]
        else:
            out = np.empty(self.shape, self.dtype)
            for lo, hi in chunks(len(self), self.d_model):
                target = out[lo:hi]
                part = self.block(lo, hi, target)
                if part is not target:
                    target[...] = part
        return out if dtype is None else out.astype(dtype)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def compare(self, ufunc: Any, other: np.ndarray, *, reverse: bool = False) -> np.ndarray:
        """``ufunc(other, bits of these rows)`` (or the reverse), block by block on all cores, never holding
        these rows whole: for ``np.not_equal`` / ``np.equal`` of the bits of a table with these rows."""
        from ..core.isolated import isolated
        from ..core.parallel import run_blocks

        unsigned = np.dtype(f"u{self.dtype.itemsize}")  # the bits, as hashes.bits views an array
        out = fresh(self.shape, bool)
        spans = chunks(len(self), self.d_model)
        local = threading.local()

        def work(first: int, last: int) -> None:
            for lo, hi in spans[first:last]:
                buffer = getattr(local, "buffer", None)
                if buffer is None:
                    buffer = local.buffer = np.empty((spans[0][1], self.d_model), self.dtype)
                mine = np.ascontiguousarray(self.block(lo, hi, buffer[: hi - lo])).view(unsigned)
                theirs = other[lo:hi]
                ufunc(mine, theirs, out=out[lo:hi]) if reverse else ufunc(theirs, mine, out=out[lo:hi])

        run_blocks(isolated(work), len(spans), 1, elements=self.size)  # a pool's thread: its own error state
        return out


class RowBits:
    """The bits of :class:`Rows` (as :func:`~posenc.analysis.hashes.bits` gives them for an array), read block
    by block: comparing them with an array of bits (``!=``, ``==``) never holds the rows whole. Anything else
    reads the rows whole first."""

    def __init__(self, rows: Rows) -> None:
        self.rows = rows
        self.dtype = np.dtype(f"u{rows.dtype.itemsize}")
        self.shape = rows.shape
        self.ndim = 2

    def __len__(self) -> int:
        return len(self.rows)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        whole = np.ascontiguousarray(np.asarray(self.rows)).view(self.dtype)
        return whole if dtype is None else whole.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and ufunc in (np.equal, np.not_equal) and len(inputs) == 2 and not kwargs:
            reverse = inputs[0] is self
            other = inputs[1] if reverse else inputs[0]
            if isinstance(other, np.ndarray) and other.shape == self.shape and other.dtype == self.dtype:
                return self.rows.compare(ufunc, other, reverse=reverse)
        arrays = [np.asarray(x) if isinstance(x, RowBits) else x for x in inputs]
        return getattr(ufunc, method)(*arrays, **kwargs)
