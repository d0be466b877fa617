"""posenc's threads beside torch's OpenMP threads on the CPU (issue 47): a compiled graph whose inductor
kernels run OpenMP parallel regions next to posenc's C core, under OpenMP's default wait policy and under
``OMP_WAIT_POLICY=PASSIVE``, each in its own process, side by side.

    python benchmarks/omp_wait.py [--repeat 40] [--json FILE]

The call: ``Timesteps(1024)`` of 2048 timesteps (1 M sin/cos pairs: posenc runs them on its thread pool),
eager; the same compiled; and compiled followed by two elementwise operations over its output (``y * 1.0 +
0.0``: inductor fuses them into one OpenMP kernel). After a parallel region OpenMP's threads spin, waiting
for the next one (the default policy), and on a machine whose cores posenc's pool also uses they take those
cores from it. Each row: the median of ``repeat`` calls, in milliseconds, and the ratio of the last row to
the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {"default": {}, "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"}}


def _measure(repeat: int) -> dict[str, float]:
    """In this process: the medians of the three calls, in seconds."""
    import torch

    import posenc.torch as pt

    steps = pt.Timesteps(1024, flip_sin_to_cos=True, downscale_freq_shift=0)
    t = torch.rand(2048, generator=torch.Generator().manual_seed(0)) * 1000
    calls = {
        "eager Timesteps": steps,
        "compiled Timesteps": torch.compile(lambda t: steps(t)),
        "compiled Timesteps, then y * 1.0 + 0.0": torch.compile(lambda t: steps(t) * 1.0 + 0.0),
    }
    medians = {}
    for name, call in calls.items():
        call(t)
        call(t)
        times = []
        for _ in range(repeat):
            began = time.perf_counter()
            call(t)
            times.append(time.perf_counter() - began)
        times.sort()
        medians[name] = times[len(times) // 2]
    return medians


def main(argv: list[str] | None = None) -> int:
    import argparse

    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--repeat", type=int, default=40)
    options.add_argument("--json", type=Path, default=None)
    options.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = options.parse_args(argv)
    if args.inner:
        print(json.dumps(_measure(args.repeat)))
        return 0
    report = {}
    for policy, env in POLICIES.items():
        done = subprocess.run(
            [sys.executable, __file__, "--inner", "--repeat", str(args.repeat)],
            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env},
            capture_output=True,
            text=True,
            check=True,
        )
        report[policy] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"posenc's threads beside OpenMP's, {os.cpu_count()} cores (medians, ms)")
    for policy, medians in report.items():
        first, last = medians["eager Timesteps"], medians["compiled Timesteps, then y * 1.0 + 0.0"]
        row = "  ".join(f"{name} {value * 1e3:7.3f}" for name, value in medians.items())
        print(f"  {policy:24s} {row}  last / eager {last / first:5.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
