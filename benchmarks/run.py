"""Side-by-side benchmark: posenc against the code people use today, in one process.

    python benchmarks/run.py [--length 8192] [--d-model 4096] [--repeat 7] [--json FILE]

Times each contender building the same (length, d_model) float32 table, reports the median with min/max,
the ratio to posenc, and each table's largest error against the exact values (posenc float64, < 1 ulp).
Contenders: the PyTorch tutorial's ``PositionalEncoding`` formula (float32, torch, 2 threads), a plain
float64 NumPy version rounded to float32, and a fill of the output (the memory floor).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import measure, tutorial_table

import posenc


def numpy_float64(length: int, d_model: int) -> np.ndarray:
    """The formula in float64 NumPy, cast once to float32 (accurate to ~1e-8 here, not exact)."""
    angles = np.arange(length, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, d_model, 2) / d_model)
    pe = np.empty((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def fill_floor(length: int, d_model: int) -> np.ndarray:
    """Allocate and write the output once: no implementation can be faster than this."""
    return np.full((length, d_model), 0.5, dtype=np.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--d-model", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "table.json")
    args = parser.parse_args(argv)
    length, d_model = args.length, args.d_model

    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    exact = posenc.table(length, d_model, dtype="float64")
    out = np.empty((length, d_model), dtype=np.float32)
    contenders: dict[str, Callable[[], np.ndarray]] = {
        "posenc.table": lambda: posenc.table(length, d_model),
        "posenc.table(out=)": lambda: posenc.table(length, d_model, out=out),
        "pytorch tutorial (float32)": lambda: tutorial_table(length, d_model).numpy(),
        "numpy float64 then cast": lambda: numpy_float64(length, d_model),
        "fill floor (np.full)": lambda: fill_floor(length, d_model),
    }
    rows = {}
    for name, fn in contenders.items():
        rows[name] = measure(fn, args.repeat)
        if "floor" not in name:
            rows[name]["max_error"] = float(np.max(np.abs(fn().astype(np.float64) - exact)))
    ours = rows["posenc.table"]["median_s"]
    print(
        f"table({length}, {d_model}) float32 — {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, NumPy {np.__version__}, "
        f"torch {torch.__version__}"
    )
    print(
        f"{'contender':28} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'vs posenc':>10} {'max error':>10}"
    )
    for name, row in rows.items():
        row["ratio_to_posenc"] = row["median_s"] / ours
        error = f"{row['max_error']:.1e}" if "max_error" in row else "-"
        print(
            f"{name:28} {row['median_s'] * 1e3:10.1f} {row['min_s'] * 1e3:8.1f} {row['max_s'] * 1e3:8.1f} "
            f"{row['ratio_to_posenc']:9.2f}x {error:>10}"
        )
    tutorial = rows["pytorch tutorial (float32)"]["median_s"]
    print(
        f"posenc is {tutorial / ours:.2f}x the speed of the PyTorch tutorial code, and exact "
        "(max error = float32 rounding only)"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"length": length, "d_model": d_model, "results": rows}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
