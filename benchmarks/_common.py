"""What the benchmarks share: the timing loop, the options of the side-by-side benchmarks, and the tutorial
code they race (kept with the tests)."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: tests.support

from tests.support.tutorial import TutorialPositionalEncoding, tutorial_table

__all__ = [
    "Target",
    "TutorialPositionalEncoding",
    "measure",
    "parser",
    "print_targets",
    "target",
    "tutorial_table",
]

#: The dtypes a side-by-side benchmark runs in.
DTYPES = ("float32", "bfloat16", "float16")


#: (what is measured, the measured ratio, the bar, whether the bar is met)
Target = tuple[str, float, str, bool]


def target(name: str, ratio: float, bar: str) -> Target:
    """A speed target: ``bar`` is "<= x" or ">= x"."""
    limit = float(bar.split()[1])
    return name, ratio, bar, ratio <= limit if bar.startswith("<=") else ratio >= limit


def print_targets(targets: list[Target]) -> None:
    print("\ntargets: each ratio against its bar")
    for name, ratio, bar, met in targets:
        print(f"  {name:44} {ratio:8.2f}x  bar {bar:5}  {'met' if met else 'NOT met'}")


def measure(
    fn: Callable[[], object], repeat: int, sync: Callable[[], object] = lambda: None
) -> dict[str, float]:
    """Median, min and max wall time of ``fn()`` over ``repeat`` calls, after two warm-up calls.

    ``sync`` waits for queued device work (``torch.cuda.synchronize`` on a GPU) before each clock read.
    """
    fn()
    fn()
    times = []
    for _ in range(repeat):
        sync()
        began = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - began)
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}


def parser(doc: str, *, repeat: int, dtype: str, json: Path) -> argparse.ArgumentParser:
    """The argument parser of a side-by-side benchmark whose docstring is ``doc``: --repeat (default
    ``repeat``), --device (default cpu), --dtype (one of :data:`DTYPES`, default ``dtype``) and --json (the
    results file, default ``json``); the benchmark adds its sizes."""
    made = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("--repeat", type=int, default=repeat)
    made.add_argument("--device", default="cpu")
    made.add_argument("--dtype", default=dtype, choices=[dtype, *(d for d in DTYPES if d != dtype)])
    made.add_argument("--json", type=Path, default=json)
    return made


T = TypeVar("T")


def numpy_only(build: Callable[[], T]) -> T:
    """``build()`` on posenc's NumPy path, as where the C extension ``posenc.core._kernels`` was not built."""
    from posenc import core

    compiled = core.compiled.kernel
    core.compiled.kernel = lambda *args: None
    try:
        return build()
    finally:
        core.compiled.kernel = compiled
