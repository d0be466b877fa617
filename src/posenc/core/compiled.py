"""The compiled path: the C extension ``posenc.core._kernels`` (built at install), when it was built.

Its kernels perform the NumPy path's IEEE operations in its order, so both paths give the same bits;
:func:`path` says which one runs here. Callers look a kernel up with :func:`kernel` at call time (None:
the NumPy path), so that replacing ``kernel`` on this module switches every caller to the NumPy path.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from . import arithmetic, parallel

# An element of the exact path costs about this many elements of angle addition (NumPy; compiled).
EXACT_COST = 64
COMPILED_EXACT_COST = 16


def path() -> str:
    """Which path computes posenc's results here: ``"C"`` (the ``posenc.core._kernels`` extension, built at
    install; the default) or ``"NumPy"`` (no C compiler was found at install). Both give the same bits.

    >>> path() in ("C", "NumPy")
    True
    """
    return "NumPy" if module() is None else "C"


def kernel(name: str = "combine") -> Callable[..., Any] | None:
    """A kernel of :mod:`posenc.core._kernels` (``combine``, ``encode_float32`` or ``direct``), or
    None where the extension was not built. The kernels release the GIL and work on a row range, so several
    threads (the pool of :func:`~posenc.core.parallel.run_blocks`, or the caller's) run them at once."""
    loaded = module()
    return None if loaded is None else getattr(loaded, name)


def module() -> Any:
    """:mod:`posenc.core._kernels`, or None where it was not built: imported once (a failed import is not
    retried, and threads that arrive together wait for the one import)."""
    if not _COMPILED:
        with _IMPORT_LOCK:
            if not _COMPILED:
                try:
                    from . import _kernels
                except ImportError:
                    _kernels = None
                _COMPILED.append(_kernels)
    return _COMPILED[0]


_COMPILED: list[Any] = []
_IMPORT_LOCK = threading.Lock()


def exact_cost(elements: int) -> int:
    """The cost of ``elements`` exact-path elements in angle-addition elements (for the thread pool)."""
    return elements * (COMPILED_EXACT_COST if module() is not None else EXACT_COST)


def direct_pairs(p: np.ndarray, limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~posenc.core.arithmetic.direct` of pairs: position ``p[k]`` with limb column ``limbs[:, k]``
    (float64 sin, cos: ``(len(p),)``), in C where the extension is built (the same bits; a call on a few
    pairs costs ~1 µs there against ~60 µs of NumPy calls)."""
    pairs = kernel("direct_pairs")
    if pairs is None:
        return arithmetic.direct(p, limbs)
    positions = np.ascontiguousarray(p, dtype=np.float64)
    sin, cos = np.empty(len(positions)), np.empty(len(positions))
    pairs(positions, np.ascontiguousarray(limbs), sin, cos, len(positions))
    return sin, cos


# Where in a 4 KiB page staggered_empty's arrays start: slot k at byte k·576 (9 cache lines apart).
SLOT_BYTES = 576


def staggered_empty(shape: tuple[int, ...], slot: int) -> np.ndarray:
    """An uninitialised float64 array whose data starts at byte ``slot · 576`` of a 4 KiB page (slot 0 .. 7).

    The compiled angle addition reads the six arrays of a table's plan side by side (four rows of two of
    them at once) while it writes four output rows. Large NumPy arrays all start at the same offset of a
    page, so their i-th elements fall into one set of the L1 cache, more lines than its 8 ways hold: on the
    (8192, 4096) table the kernel ran 2.5x slower than with each array in a slot of its own."""
    size = math.prod(shape)
    raw = np.empty(size + 4096 // 8, dtype=np.float64)
    skip = (slot * SLOT_BYTES - raw.ctypes.data) % 4096 // 8
    return raw[skip : skip + size].reshape(shape)


def direct_rows(
    p: np.ndarray, limbs: np.ndarray, *, threads: bool = True, slot: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~posenc.core.arithmetic.direct` for a 1-D array of positions against all frequencies:
    ``(len(p), n)`` each; given a ``slot``, the sines in that slot of :func:`staggered_empty`, the cosines
    in the next.

    With the compiled kernels, C that performs the very same operations (bit-identical results, checked by
    the tests); otherwise NumPy, tile by tile. On all cores when large, unless ``threads`` is False (for
    callers that already run in a thread pool).
    """
    n = limbs.shape[1]
    if slot is None:
        sin, cos = np.empty((len(p), n)), np.empty((len(p), n))
    else:
        sin, cos = staggered_empty((len(p), n), slot), staggered_empty((len(p), n), slot + 1)
    direct = kernel("direct")
    if direct is not None:
        positions = np.ascontiguousarray(p, dtype=np.float64)
        limbs = np.ascontiguousarray(limbs)

        def run_compiled(lo: int, hi: int) -> None:
            direct(positions, limbs, sin, cos, n, lo, hi)

        step = max(1, parallel.BLOCK // max(1, n))
        parallel.run_blocks(run_compiled, len(p), step, elements=exact_cost(sin.size) if threads else 0)
        return sin, cos

    def work(lo: int, hi: int) -> None:
        sin[lo:hi], cos[lo:hi] = arithmetic.direct(p[lo:hi, None], limbs)

    step = max(1, parallel.BLOCK // max(1, n))
    parallel.run_blocks(work, len(p), step, elements=exact_cost(sin.size) if threads else 0)
    return sin, cos
