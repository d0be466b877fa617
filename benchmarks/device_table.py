"""Side-by-side benchmark of a table on a torch device: posenc against the tutorial formula run there.

    python benchmarks/device_table.py [--device cuda] [--sizes 8192x4096,131072x1024,512x512] [--repeat 10]

On a CUDA device posenc builds the table there (the core's exact rows, float64 angle addition, certified
rounding: the core's bits); elsewhere it computes on the CPU and copies. The tutorial's float32 formula
runs on the device itself (inexact). Also the floor of a device fill, and each table's largest error
against the exact values. A module reuses its cached table, so this cost is paid once per (options, dtype,
device), not per forward pass (``benchmarks/forward.py`` times the forward pass).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

import torch
from _common import measure

import posenc
import posenc.torch as pt


def tutorial_table_on(length: int, d_model: int, device: torch.device) -> torch.Tensor:
    """The PyTorch tutorial's float32 formula, computed on ``device``."""
    position = torch.arange(length, dtype=torch.float, device=device).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, device=device).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(length, d_model, device=device)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def contenders(length: int, d_model: int, device: torch.device) -> dict[str, Callable[[], torch.Tensor]]:
    return {
        "posenc.torch.table": lambda: pt.table(length, d_model, device=device),
        "tutorial formula on the device": lambda: tutorial_table_on(length, d_model, device),
        "floor: torch.full on the device": lambda: torch.full((length, d_model), 0.5, device=device),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--sizes", default="8192x4096,131072x1024,512x512")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "device_table.json")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{where}, {os.cpu_count()} CPU cores, torch {torch.__version__}")
    results = {}
    for size in args.sizes.split(","):
        length, d_model = (int(v) for v in size.split("x"))
        exact = torch.from_numpy(posenc.table(length, d_model, dtype="float64"))
        rows = {}
        for name, build in contenders(length, d_model, device).items():
            rows[name] = measure(build, args.repeat, sync)
            if not name.startswith("floor"):
                rows[name]["max_error"] = float((build().cpu().double() - exact).abs().max())
        ours = rows["posenc.torch.table"]["median_s"]
        print(f"\ntable({length}, {d_model}) float32 on {device}")
        print(f"{'contender':34} {'median ms':>10} {'vs posenc':>10} {'max error':>10}")
        for name, row in rows.items():
            row["ratio_to_posenc"] = row["median_s"] / ours
            error = f"{row['max_error']:.1e}" if "max_error" in row else "-"
            print(f"{name:34} {row['median_s'] * 1e3:10.2f} {row['ratio_to_posenc']:9.2f}x {error:>10}")
        results[size] = rows
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"device": where, "results": results}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
