"""Side-by-side table benchmark: posenc against the code people use today, in one process.

    python benchmarks/run.py [--sizes 8192x4096,131072x1024,512x512] [--repeat 5] [--json FILE]

For each (length, d_model), times every contender building the same float32 table and reports the median
with min/max, the ratio to posenc and each table's largest error against the exact values (posenc float64,
< 1 ulp; a contender of another variant is compared with posenc's table of that variant). Contenders: the
PyTorch tutorial's formula (float32, torch, 2 threads), the positional-encodings package, transformers'
fairseq-style ``get_embedding`` (M2M100), a plain float64 NumPy version rounded to float32, posenc without its
compiled kernels (NumPy only, as where no C compiler was found at install), and the floors:
a fill of a fresh array and of an existing (pre-touched) one. Then the speed targets, each with its ratio,
and the start-up costs: ``import posenc`` and ``posenc table 5 4``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import Target, measure, numpy_only, print_targets, target, tutorial_table

import posenc


def numpy_float64(length: int, d_model: int) -> np.ndarray:
    """The formula in float64 NumPy, cast once to float32 (accurate to ~1e-8 here, not exact)."""
    angles = np.arange(length, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    pe = np.empty((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def contenders(
    length: int, d_model: int
) -> dict[str, tuple[Callable[[], np.ndarray], Callable[[], np.ndarray]]]:
    """name -> (build the float32 table, build the exact float64 table of the same variant)."""
    import torch
    from positional_encodings.torch_encodings import PositionalEncoding1D
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    paper = lambda: posenc.table(length, d_model, dtype="float64")  # noqa: E731
    fairseq = lambda: posenc.presets.get("fairseq").table(length, d_model, dtype="float64")  # noqa: E731
    out = np.empty((length, d_model), dtype=np.float32)
    zeros = torch.zeros(1, length, d_model)
    encoder = PositionalEncoding1D(d_model)

    def positional_encodings() -> np.ndarray:
        encoder.cached_penc = None  # its cache would time a lookup, not a build
        return encoder(zeros)[0].numpy()

    return {
        "posenc.table": (lambda: posenc.table(length, d_model), paper),
        "posenc.table(out=)": (lambda: posenc.table(length, d_model, out=out), paper),
        "posenc.table, NumPy only": (lambda: numpy_only(lambda: posenc.table(length, d_model)), paper),
        "pytorch tutorial": (lambda: tutorial_table(length, d_model).numpy(), paper),
        "positional-encodings": (positional_encodings, paper),
        "transformers get_embedding": (
            lambda: M2M100SinusoidalPositionalEmbedding.get_embedding(length, d_model).numpy(),
            fairseq,
        ),
        "numpy float64, cast": (lambda: numpy_float64(length, d_model), paper),
        "floor: fresh np.full": (lambda: np.full((length, d_model), 0.5, dtype=np.float32), None),
        "floor: fill existing": (lambda: out.fill(0.5) or out, None),
    }


def run_size(length: int, d_model: int, repeat: int) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for name, (build, exact) in contenders(length, d_model).items():
        rows[name] = measure(build, repeat)
        if exact is not None:
            rows[name]["max_error"] = float(np.max(np.abs(build().astype(np.float64) - exact())))
    ours = rows["posenc.table"]["median_s"]
    print(f"\ntable({length}, {d_model}) float32")
    print(
        f"{'contender':28} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'vs posenc':>10} {'max error':>10}"
    )
    for name, row in rows.items():
        row["ratio_to_posenc"] = row["median_s"] / ours
        error = f"{row['max_error']:.1e}" if "max_error" in row else "-"
        print(
            f"{name:28} {row['median_s'] * 1e3:10.2f} {row['min_s'] * 1e3:8.2f} {row['max_s'] * 1e3:8.2f} "
            f"{row['ratio_to_posenc']:9.2f}x {error:>10}"
        )
    return rows


def targets(results: dict[str, dict[str, dict[str, float]]]) -> list[Target]:
    """(target, measured ratio, bar, met) for each size."""
    found = []
    for size, rows in results.items():
        ours, out = rows["posenc.table"]["median_s"], rows["posenc.table(out=)"]["median_s"]
        speedup = rows["pytorch tutorial"]["median_s"] / ours
        if size == "512x512":
            found.append(target(f"{size}: speed-up over the tutorial", speedup, ">= 2"))
            continue
        fresh = ours / rows["floor: fresh np.full"]["median_s"]
        touched = out / rows["floor: fill existing"]["median_s"]
        found.append(target(f"{size}: speed-up over the tutorial", speedup, ">= 5"))
        found.append(target(f"{size}: time / fresh-array floor", fresh, "<= 3"))
        found.append(target(f"{size}: out= time / pre-touched floor", touched, "<= 2"))
        plain = rows["pytorch tutorial"]["median_s"] / rows["posenc.table, NumPy only"]["median_s"]
        found.append(target(f"{size}: NumPy only, speed-up over the tutorial", plain, ">= 1"))
    return found


def startup() -> dict[str, float]:
    """Median wall seconds of ``import posenc`` and of ``posenc table 5 4``, each in a new process."""

    def wall(command: list[str]) -> float:
        times = []
        for _ in range(5):
            began = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times.append(time.perf_counter() - began)
        return sorted(times)[2]

    python = [sys.executable, "-c", "pass"]
    importing = [sys.executable, "-c", "import posenc"]
    return {
        "python_s": wall(python),
        "import_posenc_s": wall(importing) - wall(python),
        "posenc_table_5_4_s": wall([sys.executable, "-m", "posenc", "table", "5", "4"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="8192x4096,131072x1024,512x512")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "table.json")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    print(
        f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"NumPy {np.__version__}, "
        f"torch {torch.__version__}"
    )
    results = {}
    for size in args.sizes.split(","):
        length, d_model = (int(v) for v in size.split("x"))
        results[size] = run_size(length, d_model, args.repeat)
    reached = targets(results)
    print_targets(reached)
    costs = startup()
    print(
        f"  import posenc: {costs['import_posenc_s'] * 1e3:.0f} ms (bar <= 150 ms); "
        f"posenc table 5 4: {costs['posenc_table_5_4_s']:.2f} s wall (bar <= 0.5 s)"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    document = {"results": results, "targets": [list(t) for t in reached], "startup": costs}
    args.json.write_text(json.dumps(document, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
