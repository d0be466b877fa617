"""CPU calls of posenc before and after a change, side by side: "no CPU path gets slower".

    git worktree add /tmp/before <commit>          # the code to compare with
    python benchmarks/before_after.py --before /tmp/before/src [--repeat 3] [--only "one position" ...]

Each side runs in its own subprocess (``PYTHONPATH`` = that checkout's ``src``), alternately, ``--repeat``
times; the table shows the median time per call of each side, the ratio after / before of those medians,
and the ratio of each side's least run. A virtual machine's runs fall in two modes (the same process is
1.5–2 times slower in one): the medians of a few runs move with the mix of modes, the least runs compare
the fast mode with itself. The calls are the
paths the device work touched on the CPU: the torch module (contiguous, int offset, per-batch offsets,
position ids), ``Timesteps`` and ``encode`` with real timesteps, ``posenc.torch.table``, the core's
tables and ``encode`` in float32, bfloat16 and float16, and the smallest calls (``encode`` of one position,
``table(512, 512)``). ``--only TEXT`` (repeatable) times only the calls whose names contain one of them: on a
noisy machine, more repeats of a few calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

MEASURE = r"""
import json, statistics, sys, time
import numpy as np, torch
import posenc, posenc.torch as pt
torch.set_num_threads(2)

def median_us(fn, n):
    fn(); fn()
    times = []
    for _ in range(n):
        began = time.perf_counter(); fn(); times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6

m = pt.SinusoidalPositionalEncoding(1024, batch_first=True).eval()
x1, xl = torch.randn(8, 1, 1024), torch.randn(8, 512, 1024)
offsets, ids = torch.arange(8) + 3000, torch.arange(512).repeat(8, 1)
ts = torch.rand(8) * 1000
steps = pt.Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0)
reals = np.linspace(0, 1e5, 4096)
calls = {
    "module x (8, 512, 1024)": (lambda: m(xl), 30),
    "module decode, int offset": (lambda: m(x1, offset=3000), 30),
    "module decode, per-batch offsets": (lambda: m(x1, offset=offsets), 30),
    "module, position ids (8, 512)": (lambda: m(xl, positions=ids), 30),
    "Timesteps(320), float (8,)": (lambda: steps(ts), 30),
    "posenc.torch.table(4096, 1024)": (lambda: pt.table(4096, 1024), 10),
    "posenc.encode of one position (512)": (lambda: posenc.encode(np.array([7]), 512), 2000),
    "posenc.table(512, 512)": (lambda: posenc.table(512, 512), 300),
}
for dtype in ("float32", "bfloat16", "float16"):
    calls[f"posenc.table(8192, 1024, {dtype})"] = (lambda d=dtype: posenc.table(8192, 1024, dtype=d), 7)
    calls[f"posenc.encode(4096 reals, 512, {dtype})"] = (
        lambda d=dtype: posenc.encode(reals, 512, dtype=d), 7)
only = json.loads(sys.argv[1])
with torch.no_grad():
    chosen = {name: call for name, call in calls.items() if not only or any(o in name for o in only)}
    print(json.dumps({name: median_us(fn, n) for name, (fn, n) in chosen.items()}))
"""


def run(src: Path, only: list[str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, "-c", MEASURE, json.dumps(only)]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="the src folder of the older checkout")
    parser.add_argument(
        "--after", type=Path, default=HERE.parent / "src", help="default: this checkout's src"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternated (default 3)")
    parser.add_argument(
        "--only", action="append", default=[], help="time only the calls whose names contain this text"
    )
    args = parser.parse_args(argv)
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(args.repeat):
        runs["before"].append(run(args.before, args.only))
        runs["after"].append(run(args.after, args.only))
    print(f"{'call':44} {'before µs':>11} {'after µs':>11} {'after/before':>13} {'least of each':>14}")
    for name in runs["after"][0]:
        before = statistics.median(r[name] for r in runs["before"])
        after = statistics.median(r[name] for r in runs["after"])
        least = min(r[name] for r in runs["after"]) / min(r[name] for r in runs["before"])
        print(f"{name:44} {before:11.1f} {after:11.1f} {after / before:12.2f}x {least:13.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
