"""Long contexts: a table streamed to a file in bounded memory, and a torch sequence beyond the cache.

    python benchmarks/long_context.py [--length 1048576] [--d-model 4096] [--output /dev/null]
                                      [--seq 65536] [--json FILE]

1. ``posenc table LENGTH D_MODEL --format npy --output FILE`` in a child process: its wall time, its peak
   resident memory (the child's ``ru_maxrss``; target <= 256 MiB for a 16 GiB table) and whether it showed
   progress. ``--output /dev/null`` (the default) measures posenc, not the disk.
2. ``SinusoidalPositionalEncoding`` on one sequence of ``--seq`` rows at offset 2**30, whose table is
   larger than the module's cache limit: only the sequence's own rows are computed (nothing is cached),
   timed against doing that by hand, ``x + posenc.table(seq, d_model, start=2**30)``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch
from _common import measure, print_targets, target

import posenc
import posenc.torch as pt


def stream(length: int, d_model: int, output: str) -> dict[str, float | bool]:
    """Run the command in a child; its peak memory is the high-water mark of its resident set (VmHWM),
    read from /proc while it runs (``ru_maxrss`` would count the parent's pages the child was forked with)."""
    command = [sys.executable, "-m", "posenc", "table", str(length), str(d_model), "--format", "npy"]
    began = time.perf_counter()
    child = subprocess.Popen(
        [*command, "--output", output], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    status, peak_kib = Path(f"/proc/{child.pid}/status"), 0
    errors: list[str] = []
    reader = threading.Thread(target=lambda: errors.append(child.stderr.read()))  # never blocks the child
    reader.start()
    while child.poll() is None:
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kib = max(peak_kib, int(line.split()[1]))
        time.sleep(0.01)
    wall = time.perf_counter() - began
    reader.join()
    if child.returncode:
        raise SystemExit(f"{' '.join(command)} failed: {''.join(errors)}")
    return {"wall_s": wall, "peak_mib": peak_kib / 1024, "progress": "100%" in "".join(errors)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=1_048_576)
    parser.add_argument("--d-model", type=int, default=4096)
    parser.add_argument("--output", default=os.devnull)
    parser.add_argument("--seq", type=int, default=70_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "long_context.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    streamed = stream(args.length, args.d_model, args.output)
    gib = args.length * args.d_model * 4 / 2**30
    print(
        f"posenc table {args.length} {args.d_model} --format npy --output {args.output}: "
        f"{gib:.2f} GiB in {streamed['wall_s']:.1f} s, peak memory {streamed['peak_mib']:.0f} MiB, "
        f"progress {'shown' if streamed['progress'] else 'NOT shown'}"
    )
    d_model = 1024
    module = pt.SinusoidalPositionalEncoding(d_model, batch_first=True)
    x = torch.zeros(1, args.seq, d_model)
    start = 2**30
    too_large = args.seq * d_model * 4 > pt.CACHE_LIMIT_BYTES  # rows from 0 would be larger still
    pt.clear_cache()
    with torch.no_grad():
        forward = measure(lambda: module(x, offset=start), args.repeat)
        cached = bool(pt.functions._CACHE)
        by_hand = measure(
            lambda: x + torch.from_numpy(posenc.table(args.seq, d_model, start=start)), args.repeat
        )
    ratio = forward["median_s"] / by_hand["median_s"]
    print(
        f"module on x = (1, {args.seq}, {d_model}) at offset 2**30: {forward['median_s'] * 1e3:.1f} ms, "
        f"{ratio:.2f}x x + posenc.table(those rows); a table cached: {cached}"
    )
    reached = [
        target("stream: peak memory / 256 MiB", streamed["peak_mib"] / 256, "<= 1"),
        target("module beyond the cache: time / x + its rows", ratio, "<= 1.2"),
    ]
    print_targets(reached)
    if not streamed["progress"] or (too_large and cached):
        print("NOT met: the stream showed no progress, or the module cached a table beyond its limit")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "stream": {"length": args.length, "d_model": args.d_model, **streamed},
        "beyond_cache": {"seq": args.seq, "forward": forward, "by_hand": by_hand, "cached": cached},
        "targets": [list(t) for t in reached],
    }
    args.json.write_text(json.dumps(document, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
