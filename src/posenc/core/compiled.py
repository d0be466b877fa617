"""The compiled path: the C extension ``posenc.core._kernels`` (built at install), when it was built.

Its kernels perform the NumPy path's IEEE operations in its order, so both paths give the same bits;
:func:`path` says which one runs here. Callers look a kernel up with :func:`kernel` at call time (None:
the NumPy path), so that replacing ``kernel`` on this module switches every caller to the NumPy path.
"""

from __future__ import annotations

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


def direct_rows(p: np.ndarray, limbs: np.ndarray, *, threads: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~posenc.core.arithmetic.direct` for a 1-D array of positions against all frequencies:
    ``(len(p), n)`` each.

    With the compiled kernels, C that performs the very same operations (bit-identical results, checked by
    the tests); otherwise NumPy, tile by tile. On all cores when large, unless ``threads`` is False (for
    callers that already run in a thread pool).
    """
    n = limbs.shape[1]
    sin = np.empty((len(p), n))
    cos = np.empty_like(sin)
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
