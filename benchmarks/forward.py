"""Side-by-side benchmark of the forward pass: posenc's module against the PyTorch tutorial's, in one process.

    python benchmarks/forward.py [--batch 8] [--seq 2048] [--d-model 1024] [--repeat 15] [--json FILE]
                                 [--device cpu|cuda] [--dtype float32|bfloat16|float16]

x is (batch, seq, d_model) float32 on the CPU, 2 threads (or on ``--device``, in ``--dtype``). Contenders,
each in eval mode and in train mode (dropout 0.1): posenc's ``SinusoidalPositionalEncoding``, the tutorial's
``PositionalEncoding`` (a stored float32 ``pe`` buffer, ``dropout(x + pe[:, :L])``, moved to the device and
dtype as users do), and the floor: a bare ``x + pe[:L]`` with a ready table. Also posenc's first call, when
its cache is empty (on a GPU: the table built on the CPU and copied to the device).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch
from _common import TutorialPositionalEncoding, measure, parser, print_targets, target

import posenc.torch as pt


def main(argv: list[str] | None = None) -> int:
    results = Path(__file__).parent / "results" / "forward.json"
    options = parser(__doc__, repeat=15, dtype="float32", json=results)
    options.add_argument("--batch", type=int, default=8)
    options.add_argument("--seq", type=int, default=2048)
    options.add_argument("--d-model", type=int, default=1024)
    args = options.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    torch.manual_seed(0)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    x = torch.randn(args.batch, args.seq, args.d_model, device=device, dtype=dtype)
    ours = pt.SinusoidalPositionalEncoding(args.d_model, dropout=0.1, max_len=args.seq, batch_first=True)
    tutorial = TutorialPositionalEncoding(args.d_model, dropout=0.1, max_len=max(5000, args.seq))
    tutorial.to(device=device, dtype=dtype)  # as users do: its float32 table is rounded to the dtype
    pe = pt.table(args.seq, args.d_model, dtype=dtype, device=device)
    rows: dict[str, dict[str, float]] = {}
    with torch.no_grad():
        pt.clear_cache()
        sync()
        began = time.perf_counter()
        ours.eval()(x)
        sync()
        cold = time.perf_counter() - began  # builds the table on the CPU and copies it to the device
        rows["bare x + pe[:L] (floor)"] = measure(lambda: x + pe[: x.shape[1]], args.repeat, sync)
        rows["in-place x.add_(pe) (floor)"] = measure(lambda: x.add_(pe[: x.shape[1]]), args.repeat, sync)
        rows["posenc eval, inplace=True"] = measure(lambda: ours(x, inplace=True), args.repeat, sync)
        for mode in ("eval", "train"):
            for name, module in (("posenc", ours), ("pytorch tutorial", tutorial)):
                module.train(mode == "train")
                rows[f"{name} {mode}"] = measure(lambda module=module: module(x), args.repeat, sync)
    floor = rows["bare x + pe[:L] (floor)"]["median_s"]
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{torch.get_num_threads()} threads, {platform.machine()}"
    )
    print(
        f"forward on x = ({args.batch}, {args.seq}, {args.d_model}) {args.dtype}, {where}, "
        f"torch {torch.__version__}"
    )
    print(f"posenc's first call (empty cache: builds the table, moves it to {device}): {cold * 1e3:.1f} ms")
    print(f"{'contender':26} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'vs floor':>9}")
    for name, row in rows.items():
        row["ratio_to_floor"] = row["median_s"] / floor
        print(
            f"{name:26} {row['median_s'] * 1e3:10.3f} {row['min_s'] * 1e3:8.3f} {row['max_s'] * 1e3:8.3f} "
            f"{row['ratio_to_floor']:8.2f}x"
        )
    median = {name: row["median_s"] for name, row in rows.items()}
    reached = [
        target("forward eval: time / bare x + pe[:L]", rows["posenc eval"]["ratio_to_floor"], "<= 1.2"),
        target(
            "forward eval: speed-up over the tutorial",
            median["pytorch tutorial eval"] / median["posenc eval"],
            ">= 3",
        ),
        target(
            "forward inplace=True: time / in-place add",
            median["posenc eval, inplace=True"] / median["in-place x.add_(pe) (floor)"],
            "<= 1.3",
        ),
        target(
            "forward train: speed-up over the tutorial",
            median["pytorch tutorial train"] / median["posenc train"],
            ">= 1.5",
        ),
    ]
    print_targets(reached)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "shape": [args.batch, args.seq, args.d_model],
                "dtype": args.dtype,
                "device": where,
                "first_call_s": cold,
                "results": rows,
                "targets": [list(t) for t in reached],
            },
            indent=2,
        )
    )
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
