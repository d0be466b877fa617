"""The fused exact rotary apply against its memory floor, over launch configurations: which tiling moves q
and k at the speed of a copy (issue 48, item 3). CUDA with triton; on the CPU (``TRITON_INTERPRET=1``) a dry
run on a small shape.

    python benchmarks/fused_sweep.py --device cuda [--json FILE]    # time every configuration
    python benchmarks/fused_sweep.py --device cuda --warm I    # compile configuration I (parallel warm-up)

q and k are (8, 32, 4096, 128) bfloat16 on CUDA (Llama 3.1's rotary parameters), position ids (8, 4096)
shared by the batch rows. Rows: each configuration of ``posenc.torch.fused_rotary.launch`` (positions and
heads per program, warps: the float32 [sin | cos] rows of the 4096 positions by angle addition, then the
rotation kernel), those rows alone, and the floors: ``q.mul_(1)`` on q and k (read and write each once) and
a copy of q and k into new tensors. Each row: median time of one call and a sync, ratio to the floor, the
same of 20 calls a sync (pipelined: the host's set-up behind the GPU's work, as in a forward), registers
and spills of the kernels, and whether its bits equal the default configuration's.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import posenc.rope as rope
from posenc.torch import fused_rotary
from posenc.torch.kernels import table_launch
from posenc.torch.kernels.common import kernel_module

LLAMA31 = Path(__file__).parent / "data" / "llama31_config.json"

#: (name, launch keyword arguments) of the rotation kernel's configurations (positions, heads a program).
FUSED = [
    ("fused default", {}),
    ("fused L16 H2 w4", {"block_rows": 16, "block_heads": 2}),
    ("fused L16 H8 w4", {"block_rows": 16, "block_heads": 8}),
    ("fused L32 H4 w4", {"block_rows": 32, "block_heads": 4}),
    ("fused L32 H4 w8", {"block_rows": 32, "block_heads": 4, "num_warps": 8}),
    ("fused L8 H4 w4", {"block_rows": 8, "block_heads": 4}),
    ("fused L64 H2 w8", {"block_rows": 64, "block_heads": 2, "num_warps": 8}),
    ("fused L16 H4 w2", {"block_rows": 16, "block_heads": 4, "num_warps": 2}),
]


def _registers(jit_function) -> list[tuple[int, int]]:
    """(registers, spills) of every compiled kernel of a Triton JIT function in this process."""
    found = []
    for caches in getattr(jit_function, "device_caches", {}).values():
        for compiled in caches[0].values():
            try:
                compiled._init_handles()
                found.append((int(compiled.n_regs), int(compiled.n_spills)))
            except Exception:  # versions differ
                pass
    return found


def _inputs(device, small):
    import transformers

    config = transformers.LlamaConfig(**json.loads(LLAMA31.read_text()))
    params = rope.config(config)
    shape = (1, 2, 64, 128) if small else (8, 32, 4096, 128)
    q = torch.randn(shape, device=device, dtype=torch.bfloat16)
    k = torch.randn_like(q)
    ids = torch.arange(shape[2], device=device)[None].expand(shape[0], -1)
    return q, k, ids, params


def _cases(q, k, ids, params):
    cases = {}
    for name, kwargs in FUSED:
        cases[name] = lambda kw=kwargs: fused_rotary.launch(q, k, ids, params, "half", 1, None, **kw)
    request = fused_rotary.rows_request(fused_rotary._request(ids, params, None))

    def rows_alone():
        table_launch.encode(ids[0], request)

    cases["its cos/sin rows alone (angle addition)"] = rows_alone
    return cases


def _time(fn, sync, repeat):
    import time

    fn()
    sync()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - began)
    times.sort()
    return times[len(times) // 2]


def _pipelined(fn, sync, repeat, calls=20):
    """Median time a call of ``calls`` issued back to back with one sync: the device's own time per call
    where the host keeps ahead of it, as in a model's forward (the host's set-up hidden behind the GPU)."""
    import time

    fn()
    sync()
    times = []
    for _ in range(max(3, repeat // 4)):
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - began) / calls)
    times.sort()
    return times[len(times) // 2]


def sweep_arguments(argv, description: str, repeat: int):
    """(arguments, device, small) of a sweep's command line (``--device``, ``--warm I``, ``--repeat``,
    ``--json``); ``small`` off CUDA, where Triton's interpreter runs the kernels (a dry run)."""
    import argparse

    options = argparse.ArgumentParser(description=description)
    options.add_argument("--device", default="cuda")
    options.add_argument("--warm", type=int, default=None)
    options.add_argument("--repeat", type=int, default=repeat)
    options.add_argument("--json", type=Path, default=None)
    args = options.parse_args(argv)
    device = torch.device(args.device)
    small = device.type != "cuda"
    if small:
        from posenc.torch.kernels import common

        common.KERNEL_DEVICES.append(device.type)
        table_launch.EXACT_BLOCK = 64 * 1024  # the interpreter: big exact blocks are quick
    return args, device, small


def main(argv=None) -> int:
    args, device, small = sweep_arguments(argv, __doc__.splitlines()[0], 25)
    if kernel_module("fused_kernel") is None:
        print("no triton: nothing to sweep")
        return 0
    q, k, ids, params = _inputs(device, small)
    cases = _cases(q, k, ids, params)
    names = list(cases)
    if small:  # the interpreter: one configuration of each kind
        names = ["fused default", "its cos/sin rows alone (angle addition)"]
    if args.warm is not None:
        if args.warm < len(names):
            cases[names[args.warm]]()
            print(f"warm {names[args.warm]}: {_registers(kernel_module('fused_kernel').rotate_kernel)}")
        return 0
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    repeat = 2 if small else args.repeat
    want = cases["fused default"]()
    rows = {}
    for name in names:
        got = cases[name]()
        equal = None
        if got is not None:
            pairs = zip(got, want, strict=True)
            equal = all(torch.equal(a.view(torch.int16), b.view(torch.int16)) for a, b in pairs)
        rows[name] = {
            "median_s": _time(cases[name], sync, repeat),
            "pipelined_s": _pipelined(cases[name], sync, repeat),
            "bits_equal_default": equal,
        }

    def floor():
        q.mul_(1)
        k.mul_(1)

    def copy():
        return q.clone(), k.clone()

    for name, fn in (("floor: q.mul_(1), k.mul_(1)", floor), ("floor: q.clone(), k.clone()", copy)):
        rows[name] = {"median_s": _time(fn, sync, repeat), "pipelined_s": _pipelined(fn, sync, repeat)}
    floor_s = rows["floor: q.mul_(1), k.mul_(1)"]["median_s"]
    floor_pipelined = rows["floor: q.mul_(1), k.mul_(1)"]["pipelined_s"]
    moved = 4 * q.numel() * q.element_size()
    print(
        f"fused rotary sweep, q/k {tuple(q.shape)} bfloat16 on {device} "
        f"({torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}), torch {torch.__version__}"
    )
    for name, row in rows.items():
        row["ratio_to_floor"] = row["median_s"] / floor_s
        row["pipelined_ratio_to_floor"] = row["pipelined_s"] / floor_pipelined
        row["bandwidth_GBps"] = moved / row["median_s"] / 1e9
        print(
            f"  {name:36s} {row['median_s'] * 1e3:8.3f} ms  {row['ratio_to_floor']:5.2f}x floor  "
            f"{row['bandwidth_GBps']:7.0f} GB/s  pipelined {row['pipelined_s'] * 1e3:8.3f} ms "
            f"{row['pipelined_ratio_to_floor']:5.2f}x  bits={row.get('bits_equal_default')}"
        )
    registers = {
        "rotate_kernel": _registers(kernel_module("fused_kernel").rotate_kernel),
        "ids_kernel": _registers(kernel_module("table_kernel").ids_kernel),
    }
    print("  registers, spills:", registers)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "registers": registers}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
