"""Device-native exactness: posenc against the code users write on the device, per call, in one process.

    python benchmarks/device_native.py [--device cuda] [--dtype bfloat16] [--repeat 15] [--quick]
                                       [--table 131072x1024] [--threads N] [--json FILE]

Each contender is timed per call: a few warm-up calls, then ``--repeat`` rounds of N calls with one device
synchronisation after the N calls (no sync inside the loop, so a host sync inside a call shows as time);
the figure is the median over the rounds of the time per call. posenc and its reference are timed in
alternating rounds, so drift hits both. The bars (device-native exactness):

1. decode step with per-batch offsets, ``m(x1, offset=offs)``, x1 (8, 1, 1024), offs = arange(8) + 3000 on
   the device, against a gather from a table already on the device, ``x1 + tbl[offs][:, None]``: <= 1.5x.
   (Also the int offset ``m(x1, offset=3000)`` against ``x1 + tbl[3000:3001]``: no bar.)
2. ``Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0)(ts)``, ts float32 (8,) on the device,
   against diffusers-style device code (frequencies precomputed; cat([cos, sin])): <= 2x.
3. ``posenc.torch.table(131072, 1024, device=dev)`` float32 against the PyTorch tutorial's formula evaluated
   on the device: <= 2x (on the CPU the default size is 16384x1024, said in the output).
4. ``m(xL, positions=pos)``, pos (8, 2048) int on the device, against ``xL + tbl[pos]``: ratio, no bar.
5. a training step (forward, backward, AdamW) of a small transformer LM, posenc's module against the same
   model adding a precomputed table (``x + tbl[:L]``): <= 1.02x. On CUDA d 1024, 4 layers, 16 heads,
   vocab 32000, B 8, L 2048 under autocast (bfloat16); on the CPU d 256, 2 layers, L 256, B 2 (float32).
6. CUDA only: host syncs (``torch.cuda.set_sync_debug_mode("error")``) of cases 1, 2, 4 and the int-offset
   decode; CUDA-graph capture and replay of the decode step with per-batch offsets and of Timesteps (replay
   equal to eager, also after the inputs change in place); ``torch.compile(mode="reduce-overhead",
   fullgraph=True)`` of the decode step: time and equality with eager.
7. JAX (when importable): ``jax.jit(lambda o: posenc.jax.encode(o + jnp.arange(1), d))`` with a traced int32
   offset against ``jax.lax.dynamic_slice_in_dim`` of a device table, the device algorithm (inside
   ``posenc.jax.self_contained()``: a CPU-only JAX would call the C core); whether the lowered program has a
   host callback (it must not) or float64 (``f64``).

x is in ``--dtype`` (bfloat16 on CUDA, float32 on the CPU by default); Timesteps and tables are float32.
``--quick`` uses tiny sizes and few rounds (a smoke test). A case that fails is recorded, not fatal. Writes
every figure to ``--json`` (default ``benchmarks/results/device_native_<device>.json``).

The cases and checks live in device_native_cases.py; this file runs them and prints the table.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from device_native_cases import (
    Context,
    Row,
    case_decode,
    case_decode_int,
    case_jax,
    case_lm_step,
    case_positions,
    case_table,
    case_timesteps,
    check_compile,
    check_graphs,
    check_host_syncs,
    sizes_for,
)

from posenc.torch.kernels import encode_launch

# --- driver -----------------------------------------------------------------------------------------


def attempt(name: str, fn: Callable[[Context], dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """``fn(ctx)``, or the error it raised (also printed to stderr): one case's failure stops nothing."""
    print(f"  {name} ...", end=" ", flush=True)
    began = time.perf_counter()
    try:
        result = fn(ctx)
    except Exception as error:
        traceback.print_exc(file=sys.stderr)
        result = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
    print(f"{time.perf_counter() - began:.1f} s{'  (FAILED)' if 'error' in result else ''}", flush=True)
    print(f"    {json.dumps(result, default=str)[:1500]}", flush=True)  # kept if a later case is cut short
    return result


def verdict(result: dict[str, Any]) -> str:
    if "error" in result or "ratio" not in result:
        return "FAILED"
    if result.get("met") is None:
        return "—"
    return "met" if result["met"] else "NOT met"


def row(name: str, result: dict[str, Any]) -> Row:
    if "ratio" not in result:
        return name, None, None, None, None, verdict(result)
    return (
        name,
        result["posenc"]["median_us"],
        result["reference"]["median_us"],
        result["ratio"],
        result["bar"],
        verdict(result),
    )


def print_table(rows: list[Row]) -> None:
    def number(value: float | None, fmt: str) -> str:
        return "—" if value is None else format(value, fmt)

    print(f"\n{'case':48} {'posenc us':>12} {'reference us':>13} {'ratio':>7}  {'bar':7} verdict")
    for name, ours, reference, ratio, bar, said in rows:
        print(
            f"{name:48} {number(ours, '12.1f'):>12} {number(reference, '13.1f'):>13} "
            f"{number(ratio, '6.2f') + ('x' if ratio is not None else ''):>7}  {bar or '—':7} {said}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None)
    parser.add_argument("--repeat", type=int, default=None, help="timing rounds (default 15, 3 with --quick)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few rounds: a smoke test")
    parser.add_argument("--table", default=None, help="LENGTHxD_MODEL of case 3")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype_name = args.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    sizes = sizes_for(device, args.quick, args.table)
    repeat = args.repeat or (3 if args.quick else 15)
    ctx = Context(device, getattr(torch, dtype_name), sizes, repeat)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    try:
        import jax

        jax_version = jax.__version__
    except ImportError:
        jax_version = None
    print(
        f"device-native benchmark on {where} ({device}), x in {dtype_name}, torch {torch.__version__}, "
        f"jax {jax_version or 'not installed'}, {torch.get_num_threads()} CPU threads, "
        f"{repeat} rounds{', --quick: tiny sizes' if args.quick else ''}"
    )
    length, width = sizes.table
    if device.type != "cuda" and not args.quick and args.table is None:
        print(f"on the CPU case 3 uses a {length}x{width} table (131072x1024 on CUDA), case 5 a smaller LM")

    cases = {
        "decode per-batch offsets": attempt("1. decode, per-batch offsets", case_decode, ctx),
        "decode int offset": attempt("1b. decode, int offset", case_decode_int, ctx),
        "Timesteps float": attempt("2. Timesteps", case_timesteps, ctx),
        "device table": attempt("3. device table", case_table, ctx),
        "positions (batch, seq) int": attempt("4. positions", case_positions, ctx),
        "LM training step": attempt("5. LM training step", case_lm_step, ctx),
    }
    checks: dict[str, Any]
    if ctx.cuda:
        checks = {
            "host sync": attempt("6. host syncs", check_host_syncs, ctx),
            "torch.compile reduce-overhead decode": attempt("6. torch.compile", check_compile, ctx),
            "cuda graph": attempt("6. CUDA graphs", check_graphs, ctx),
        }
    else:
        checks = {"skipped": "CUDA only (host syncs, CUDA graphs, torch.compile reduce-overhead)"}
    if jax_version is None:
        cases["jax jit decode traced offset"] = {"error": "jax is not installed"}
    else:
        cases["jax jit decode traced offset"] = attempt("7. JAX decode", case_jax, ctx)

    labels = {
        "decode per-batch offsets": f"1 decode ({sizes.batch},1,{sizes.d_model}) per-batch offs / gather",
        "decode int offset": "1b decode int offset / slice",
        "Timesteps float": f"2 Timesteps({sizes.channels}) float / diffusers-style",
        "device table": f"3 table {length}x{width} f32 / tutorial on device",
        "positions (batch, seq) int": f"4 positions ({sizes.batch},{sizes.seq}) int / gather",
        "LM training step": f"5 LM step d{sizes.lm_d} L{sizes.lm_seq} B{sizes.lm_batch} / table add",
        "jax jit decode traced offset": "7 JAX jit decode traced offset / slice",
    }
    rows = [row(labels[name], result) for name, result in cases.items()]
    compiled = checks.get("torch.compile reduce-overhead decode", {})
    if "ratio" in compiled:
        rows.insert(2, row("6 compiled decode per-batch offs / gather", compiled))
    print_table(rows)

    for name, result in cases.items():
        if "error" in result:
            print(f"  {name}: FAILED {result['error']}")
    equalities = {
        name: result["equal_to_reference"] for name, result in cases.items() if "equal_to_reference" in result
    }
    print("posenc equal to the reference:", ", ".join(f"{k}: {v}" for k, v in equalities.items()))
    if "first_losses_equal" in cases["LM training step"]:
        print(f"LM first-step losses equal: {cases['LM training step']['first_losses_equal']}")
    jx = cases["jax jit decode traced offset"]
    if "lowered_has_callback" in jx:
        print(
            f"JAX ({jx['backend']}): lowered decode step has a host callback: {jx['lowered_has_callback']}, "
            f"has f64: {jx['lowered_has_f64']}"
        )
    print_checks(checks)

    path = args.json or Path(__file__).parent / "results" / f"device_native_{device.type}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "device": where,
        "device_type": device.type,
        "machine": platform.machine(),
        "dtype": dtype_name,
        "torch": torch.__version__,
        "jax": jax_version,
        "cpu_threads": torch.get_num_threads(),
        # which implementation torch.ops.posenc.exact ran: the Triton kernel (CUDA with triton) or,
        # elementwise, the portable algorithm (posenc.portable)
        "exact_op": "triton kernel" if encode_launch.runs_here(torch.empty(0, device=device)) else "portable",
        "quick": args.quick,
        "rounds": repeat,
        "sizes": asdict(sizes),
        "cases": cases,
        "checks": checks,
        "table": [list(r) for r in rows],
    }
    path.write_text(json.dumps(document, indent=2))
    print(f"wrote {path}")
    return 0


def print_checks(checks: dict[str, Any]) -> None:
    print("\nCUDA checks:")
    if "skipped" in checks:
        print(f"  skipped: {checks['skipped']}")
        return
    for name, result in checks.items():
        if isinstance(result, dict) and "error" in result:
            print(f"  {name}: FAILED {result['error']}")
    for name, result in checks.get("host sync", {}).items():
        if name == "error":
            continue
        print(f"  sync debug mode 'error', {name}: {result}")
    for name, result in checks.get("cuda graph", {}).items():
        if isinstance(result, dict):
            extra = ", ".join(f"{k}={v}" for k, v in result.items() if k.startswith("replay_equals"))
            print(f"  CUDA graph, {name}: {result.get('status')}{'; ' + extra if extra else ''}")
    compiled = checks.get("torch.compile reduce-overhead decode", {})
    if compiled and "error" not in compiled:
        print(
            f"  torch.compile reduce-overhead decode: {compiled.get('status')}; "
            f"equals eager: {compiled.get('equals_eager')}, other offsets: "
            f"{compiled.get('equals_eager_other_offsets')}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
