"""Side-by-side benchmark of the forward pass: posenc's module against the PyTorch tutorial's, in one process.

    python benchmarks/forward.py [--batch 8] [--seq 2048] [--d-model 1024] [--repeat 15] [--json FILE]

x is (batch, seq, d_model) float32 on the CPU, 2 threads. Contenders, each in eval mode and in train mode
(dropout 0.1): posenc's ``SinusoidalPositionalEncoding``, the tutorial's ``PositionalEncoding`` (a stored
float32 ``pe`` buffer, ``dropout(x + pe[:, :L])``), and the floor: a bare ``x + pe[:L]`` with a ready table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from pathlib import Path

import torch
from _common import TutorialPositionalEncoding, measure

import posenc.torch as pt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, default=Path(__file__).parent / "results" / "forward.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.seq, args.d_model)
    ours = pt.SinusoidalPositionalEncoding(args.d_model, dropout=0.1, max_len=args.seq)
    tutorial = TutorialPositionalEncoding(args.d_model, dropout=0.1, max_len=max(5000, args.seq))
    pe = pt.table(args.seq, args.d_model)
    rows: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        rows["bare x + pe[:L] (floor)"] = measure(lambda: x + pe[: x.shape[1]], args.repeat)
        rows["in-place x.add_(pe) (floor)"] = measure(lambda: x.add_(pe[: x.shape[1]]), args.repeat)
        ours.eval()
        rows["posenc eval, inplace=True"] = measure(lambda: ours(x, inplace=True), args.repeat)
        for mode in ("eval", "train"):
            for name, module in (("posenc", ours), ("pytorch tutorial", tutorial)):
                module.train(mode == "train")
                rows[f"{name} {mode}"] = measure(lambda module=module: module(x), args.repeat)
    floor = rows["bare x + pe[:L] (floor)"]["median_s"]
    print(
        f"forward on x = ({args.batch}, {args.seq}, {args.d_model}) float32, "
        f"{torch.get_num_threads()} threads, "
        f"{platform.machine()}, torch {torch.__version__}"
    )
    print(f"{'contender':26} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'vs floor':>9}")
    for name, row in rows.items():
        row["ratio_to_floor"] = row["median_s"] / floor
        print(
            f"{name:26} {row['median_s'] * 1e3:10.1f} {row['min_s'] * 1e3:8.1f} {row['max_s'] * 1e3:8.1f} "
            f"{row['ratio_to_floor']:8.2f}x"
        )
    inplace = rows["posenc eval, inplace=True"]["median_s"] / rows["in-place x.add_(pe) (floor)"]["median_s"]
    print(f"inplace=True: {inplace:.2f}x the in-place add floor")
    for mode in ("eval", "train"):
        speedup = rows[f"pytorch tutorial {mode}"]["median_s"] / rows[f"posenc {mode}"]["median_s"]
        print(f"{mode}: posenc is {speedup:.2f}x the speed of the tutorial module", end="")
        print(f", {rows[f'posenc {mode}']['ratio_to_floor']:.2f}x the bare add" if mode == "eval" else "")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"shape": [args.batch, args.seq, args.d_model], "results": rows}, indent=2)
    )
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
