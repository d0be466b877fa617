"""Running a request's work in blocks, on a persistent thread pool when the work is large.

The work of :func:`run_blocks` is any function of a row range ``(lo, hi)``; NumPy and the compiled kernels
release the GIL, so the blocks run in parallel. ``POSENC_NUM_THREADS`` sets the number of threads
(:func:`threads`), checked the same way by every call, small or large.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from typing import Any

# Elements per working block: temporaries stay in cache.
BLOCK = 1 << 16
# Below this many sin/cos pairs a thread pool costs more than it saves.
PARALLEL_ELEMENTS = 1 << 19
#: The most threads ``POSENC_NUM_THREADS`` may ask for: far beyond any machine's cores, and a pool that
#: still starts in milliseconds.
MAX_THREADS = 1024


def run_blocks(work: Callable[[int, int], None], total: int, step: int, *, elements: int) -> None:
    """Call ``work(lo, hi)`` over ``range(0, total, step)``, on all cores when the work (``elements``, in
    angle-addition elements) is large enough to pay for a thread pool."""
    setting = _setting()  # every call, small or large: a bad POSENC_NUM_THREADS is refused by all alike
    if total <= step:  # one block (or none): no block list, no thread count
        if total > 0:
            work(0, total)
        return
    bounds = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    count = min(len(bounds), setting or _cores()) if elements >= PARALLEL_ELEMENTS else 1
    if count <= 1:
        for lo, hi in bounds:
            work(lo, hi)
        return
    if getattr(_IN_POOL, "worker", False):  # called from one of the pool's own threads: no nested waits
        for lo, hi in bounds:
            work(lo, hi)
        return
    pool = _pool(count)
    futures = [pool.submit(work, lo, hi) for lo, hi in bounds]
    try:
        for future in futures:
            future.result()
    except BaseException:  # a failing block, Ctrl-C or a signal: the blocks not started are dropped, so the
        for future in futures:  # process does not go on computing (or wait at exit) for a request given up
            future.cancel()
        raise


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
    run on. The setting is validated once per value (cached): an invalid one raises the same ValueError on
    every call; it is read at each call (a dictionary look-up), so that a test may change it."""
    return _setting() or _cores()


_NAME = "POSENC_NUM_THREADS"
#: The name as ``os.environ`` keys its dictionary (bytes on POSIX, upper case on Windows).
_KEY = os.environ.encodekey(_NAME) if hasattr(os.environ, "encodekey") else _NAME


def _setting() -> int | None:
    """``POSENC_NUM_THREADS``, validated (once per value), or None when unset: a dictionary look-up.

    ``os.environ.get`` of an unset variable raises and catches a KeyError (~0.5 µs, a noticeable part of
    the smallest calls): the look-up goes to the dictionary behind ``os.environ`` (``os._Environ``: its keys
    and values encoded), the same dictionary that ``os.environ[...] = ...`` and ``del`` update; where
    ``os.environ`` is something else (replaced by a test), through ``get``."""
    environ = os.environ
    try:
        raw = environ._data.get(_KEY)  # type: ignore[attr-defined]
    except AttributeError:
        return _threads_setting(environ.get(_NAME))
    return None if raw is None else _threads_setting(environ.decodevalue(raw))  # type: ignore[attr-defined]


def _cores() -> int:
    """The cores this process may run on (a system call: asked only when a call is large enough to share)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.lru_cache(maxsize=16)
def _threads_setting(value: str | None) -> int | None:
    """``POSENC_NUM_THREADS`` as an int from 1 to :data:`MAX_THREADS`, None when unset or empty."""
    text = (value or "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 6) or not 1 <= int(text) <= MAX_THREADS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(
            f"POSENC_NUM_THREADS={shown!r} is not a thread count; set POSENC_NUM_THREADS to an integer "
            f"from 1 to {MAX_THREADS}, or unset it (to use every core)"
        )
    return int(text)
