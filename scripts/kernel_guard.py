"""What the first-launch guard (posenc.torch.kernels.first_launch) costs: for each kernel, a call once the
kernel is compiled and probed, and the same call after the probes are forgotten (so it probes again: one
launch on the probe block, the portable algorithm on it, one host sync); the difference is the probe. Also
every probe's outcome (``posenc.torch.kernel_status()``). Writes ``$OUT/kernel_guard.json`` (or
./kernel_guard.json).

    PYTHONPATH=src python3 scripts/kernel_guard.py
    TRITON_INTERPRET=1 PYTHONPATH=src python3 scripts/kernel_guard.py --device cpu   # a dry run
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch

import posenc.rope as rope
import posenc.torch as pt
from posenc.torch.kernels import common, first_launch, table_launch


def main(where: str) -> dict:
    if where == "cpu":  # Triton's interpreter (TRITON_INTERPRET=1) stands in for CUDA
        common.KERNEL_DEVICES.append("cpu")
        table_launch.SMALL_TABLE = 0  # its small table by angle addition, as the large one on CUDA
    device = torch.device(where)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    small = device.type == "cpu"
    params = rope.config(head_dim=128, base=500000.0)
    heads, seq = (2, 8) if small else (32, 4096)
    q = torch.randn(1 if small else 8, heads, seq, 128, device=device, dtype=torch.bfloat16)
    ids = torch.arange(seq, device=device)[None]
    offs = torch.arange(8, device=device) + 3000
    x = torch.zeros(8, 1, 64 if small else 1024, device=device, dtype=torch.bfloat16)
    exact = torch.ops.posenc.exact
    d = x.shape[-1]
    calls = {
        "encode (decode step, per-batch offsets)": lambda: exact(
            torch.zeros(8, 1, dtype=torch.int64, device=device),
            offs[:, None],
            d,
            10000.0,
            0.0,
            1.0,
            "interleaved",
            "zero",
            "bfloat16",
        ),
        "table": lambda: torch.ops.posenc.table(
            64 if small else 131072, 0, device, d, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32"
        ),
        "fused rotary": lambda: pt.apply_rotary(q, q, position_ids=ids, params=params),
    }
    report: dict = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu (Triton interpreter)",
        "calls": {},
        "kernel_status": [],
    }
    for name, call in calls.items():
        began = time.perf_counter()
        call()
        sync()
        first = time.perf_counter() - began
        timed = []
        for forget in (False, True, False, True, False, True):
            if forget:
                first_launch.forget()
            began = time.perf_counter()
            call()
            sync()
            timed.append((forget, time.perf_counter() - began))
        plain = min(t for f, t in timed if not f)
        probed = min(t for f, t in timed if f)
        report["calls"][name] = {
            "first_call_s": round(first, 3),
            "call_ms": round(plain * 1e3, 3),
            "call_with_probe_ms": round(probed * 1e3, 3),
            "probe_ms": round((probed - plain) * 1e3, 3),
        }
        print(name, report["calls"][name], flush=True)
        report["kernel_status"] += pt.kernel_status()  # this kernel's probe (the others were forgotten)
    for probe in report["kernel_status"]:
        print(probe["kernel"], probe["status"], probe["detail"], probe["specialization"])
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    document = main(args.device)
    path = Path(os.environ.get("OUT", ".")) / "kernel_guard.json"
    path.write_text(json.dumps(document, indent=2))
    print(f"wrote {path}")
