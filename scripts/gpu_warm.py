"""Compile, ahead of the timed runs, the Triton kernels one case of benchmarks/device_native.py (or the rotary
benchmark, or the guard's script) needs at its full sizes: the case runs once (one round, few calls), so its
kernels land in Triton's disk cache. scripts/gpu_checks.sh starts one process per case at once (Triton
compiles on one core per process), then times every case with the kernels cached.

    PYTHONPATH=src python3 scripts/gpu_warm.py decode         # one of: CASES, rope, guard
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import device_native_cases as cases

CASES = {
    "decode": cases.case_decode,
    "decode_int": cases.case_decode_int,
    "timesteps": cases.case_timesteps,
    "table": cases.case_table,
    "positions": cases.case_positions,
    "lm": cases.case_lm_step,
    "syncs": cases.check_host_syncs,
    "compile": cases.check_compile,
}


def main(name: str, where: str) -> None:
    began = time.perf_counter()
    device = torch.device(where)
    if name == "rope":
        import rope

        rope.main(["--device", where, "--repeat", "1", "--json", "/tmp/rope_warm.json"])
    elif name == "guard":
        import runpy

        sys.argv = ["kernel_guard.py", "--device", where]
        runpy.run_path(str(Path(__file__).parent / "kernel_guard.py"), run_name="__main__")
    else:
        sizes = cases.sizes_for(device, where == "cpu", None)
        sizes.calls = sizes.table_calls = sizes.positions_calls = sizes.lm_calls = 1
        ctx = cases.Context(device, torch.bfloat16 if device.type == "cuda" else torch.float32, sizes, 1)
        CASES[name](ctx)
    print(f"warm {name}: {time.perf_counter() - began:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "cuda")
