"""Running a request's work in blocks, on a persistent thread pool when the work is large.

The work of :func:`run_blocks` is any function of a row range ``(lo, hi)``; NumPy and the compiled kernels
release the GIL, so the blocks run in parallel. ``POSENC_NUM_THREADS`` sets the number of threads
(:func:`threads`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

# Elements per working block: temporaries stay in cache.
BLOCK = 1 << 16
# Below this many sin/cos pairs a thread pool costs more than it saves.
PARALLEL_ELEMENTS = 1 << 19


def run_blocks(work: Callable[[int, int], None], total: int, step: int, *, elements: int) -> None:
    """Call ``work(lo, hi)`` over ``range(0, total, step)``, on all cores when the work (``elements``, in
    angle-addition elements) is large enough to pay for a thread pool."""
    bounds = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    count = min(len(bounds), threads()) if elements >= PARALLEL_ELEMENTS else 1
    if count <= 1:
        for lo, hi in bounds:
            work(lo, hi)
        return
    if getattr(_IN_POOL, "worker", False):  # called from one of the pool's own threads: no nested waits
        for lo, hi in bounds:
            work(lo, hi)
        return
    pool = _pool(count)
    for future in [pool.submit(work, lo, hi) for lo, hi in bounds]:
        future.result()


def _pool(count: int) -> Any:
    """The process's thread pool of ``count`` workers, started on first use and kept: starting threads
    costs ~1 ms each per call here. A forked child (whose copy of the pool has no threads) starts its own."""
    key = (os.getpid(), count)
    pool = _POOLS.get(key)
    if pool is None:
        with _POOL_LOCK:
            pool = _POOLS.get(key)
            if pool is None:
                from concurrent.futures import ThreadPoolExecutor  # on first use: ~15 ms of import time

                def mark_worker() -> None:
                    _IN_POOL.worker = True

                pool = ThreadPoolExecutor(count, thread_name_prefix="posenc", initializer=mark_worker)
                _POOLS.clear()  # a pool of another size or of the parent process: the old one is dropped
                _POOLS[key] = pool
    return pool


_POOLS: dict[tuple[int, int], Any] = {}
_POOL_LOCK = threading.Lock()
_IN_POOL = threading.local()


def threads() -> int:
    """The threads a large call runs on: ``POSENC_NUM_THREADS`` when set, else the cores this process may
    run on."""
    setting = os.environ.get("POSENC_NUM_THREADS", "").strip()
    if setting:
        if not setting.isdigit() or int(setting) < 1:
            raise ValueError(
                f"POSENC_NUM_THREADS must be a whole number >= 1; got {setting!r}; unset it to use every core"
            )
        return int(setting)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
