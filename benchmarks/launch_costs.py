"""What an eager CUDA call costs, piece by piece (issue 48, item 1): the host's time of each small operation
a launch path makes (torch allocations, the device guard, the current stream, a Triton launch by
``kernel[grid]`` and by the compiled kernel's own launcher, with 1 and with 36 arguments) beside a small torch
op, and the GPU's time of each kernel of an eager decode step, ``Timesteps``, (8, 2048) position ids and
the fused rotary apply (``torch.profiler``).
CUDA only.

    python benchmarks/launch_costs.py [--calls 2000] [--json FILE]

Each host row is the time to issue one call (``calls`` back to back, no sync; the best of 3 rounds) and the
time until the GPU finished them; the profile's rows are each kernel's GPU time per call.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import host_path


def _per_call(fn, calls: int) -> tuple[float, float]:
    """(issued, done) seconds a call on CUDA: host_path's timing."""
    return host_path._per_call(fn, calls, torch.cuda.synchronize)


def _triton_cases(where: torch.device) -> dict:
    import triton
    import triton.language as tl

    @triton.jit
    def one(x_ptr):
        tl.store(x_ptr + tl.program_id(0), 1.0)

    @triton.jit
    def many(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11,
             i12, i13, i14, i15, i16, i17, i18, i19, f0, C0: tl.constexpr, C1: tl.constexpr,
             C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr):  # fmt: skip
        tl.store(a0 + tl.program_id(0), (i0 + i19 + C0).to(tl.float32) * f0)

    x = torch.zeros(64, device=where)
    tensors = [torch.zeros(64, device=where) for _ in range(10)]
    ints = list(range(3, 23))
    constants = {"C0": 1, "C1": 2, "C2": 3, "C3": 4, "C4": 5}
    compiled_one = one[(4,)](x)
    compiled_many = many[(4,)](*tensors, *ints, 0.5, **constants)

    def direct(compiled, args):
        def run():
            stream = torch.cuda.current_stream().cuda_stream
            metadata = compiled.packed_metadata
            compiled.run(4, 1, 1, stream, compiled.function, metadata, None, None, None, *args)

        return run

    return {
        "triton one[grid](x)": lambda: one[(4,)](x),
        "triton one: compiled.run": direct(compiled_one, (x,)),
        "triton many[grid](36 args)": lambda: many[(4,)](*tensors, *ints, 0.5, **constants),
        "triton many: compiled.run": direct(compiled_many, (*tensors, *ints, 0.5, *constants.values())),
    }


def _host_rows(where: torch.device, calls: int) -> dict:
    small = torch.zeros(8, 1024, device=where, dtype=torch.bfloat16)
    other = torch.zeros(8, 1024, device=where, dtype=torch.bfloat16)
    index = torch.arange(8, device=where)
    cases = {
        "torch: a + b (8, 1024) bf16": lambda: small + other,
        "torch: table[index]": lambda: other[index],
        "torch.empty((8, 1024), bf16)": lambda: torch.empty((8, 1024), dtype=torch.bfloat16, device=where),
        "torch.empty(4, int32)": lambda: torch.empty(4, dtype=torch.int32, device=where),
        "torch.arange(8)": lambda: torch.arange(8, device=where),
        "tensor.view(torch.int16)": lambda: small.view(torch.int16),
        "tensor.expand + stride()": lambda: index[:, None].expand(8, 4).stride(),
        "with torch.cuda.device(where)": lambda: torch.cuda.device(where).__enter__(),
        "torch.cuda.current_device()": torch.cuda.current_device,
        "current_stream().cuda_stream": lambda: torch.cuda.current_stream().cuda_stream,
        "torch._C._cuda_getCurrentRawStream(0)": lambda: torch._C._cuda_getCurrentRawStream(0),
        "is_current_stream_capturing()": torch.cuda.is_current_stream_capturing,
        "torch.compiler.is_compiling()": torch.compiler.is_compiling,
        "tensor.data_ptr()": small.data_ptr,
    }

    def guarded():
        with torch.cuda.device(where):
            pass

    cases["with torch.cuda.device(where): pass"] = guarded
    del cases["with torch.cuda.device(where)"]
    try:
        cases.update(_triton_cases(where))
    except Exception as error:  # a measurement: the other rows still count
        print(f"triton rows not measured: {type(error).__name__}: {error}")
    return {name: _per_call(fn, calls) for name, fn in cases.items()}


def _decode_parts(where: torch.device, calls: int) -> dict:
    """The host's time of each piece of an eager decode step's angle addition (ids + offsets -> (8, 1024)
    bfloat16): its set-up helpers, and for each of its two launches the specialization key, the launch
    through posenc's Launcher, the compiled kernel's own launcher alone, and Triton's kernel[grid]."""
    from posenc import core, defaults
    from posenc.torch import operator
    from posenc.torch.kernels import common, table_launch

    request = operator._request((*core.Options.check(1024, **defaults.OPTIONS), "bfloat16"))
    ids = torch.zeros(8, 1, dtype=torch.int64, device=where)
    offsets = (torch.arange(8, device=where) + 4000)[:, None]
    seen = {}
    real = common.Launcher.launch

    def recording(self, grid, args, options):
        seen[getattr(self.kernel, "__name__", "kernel")] = (self, grid, args, options)
        return real(self, grid, args, options)

    common.Launcher.launch = recording
    try:
        table_launch.encode(ids, request, offsets)
        table_launch.encode(ids, request, offsets)
    finally:
        common.Launcher.launch = real
    cases = {
        "table_launch.encode (all of it)": lambda: table_launch.encode(ids, request, offsets),
        "table_launch.ids_launch": lambda: table_launch.ids_launch(ids, offsets, request),
        "table_launch._ids_arguments": lambda: table_launch._ids_arguments(ids, offsets),
        "table_launch.levels": lambda: table_launch.levels(request, where),
        "table_launch._ids_trusted": lambda: table_launch._ids_trusted(where, request, True),
        "common.constants_on": lambda: common.constants_on(request, where),
    }
    for name, (launcher, grid, args, options) in seen.items():
        compiled, constants = next(iter(launcher.compiled.values()))
        x, y, z = (*grid, 1, 1)[:3]

        def run(c=compiled, a=args, k=constants, x=x, y=y, z=z):
            stream = torch._C._cuda_getCurrentRawStream(0)
            c.run(x, y, z, stream, c.function, c.packed_metadata, None, None, None, *a, *k)

        cases[f"{name}: arguments_key ({len(args)} args)"] = lambda a=args: common.arguments_key(a)
        cases[f"{name}: Launcher.launch"] = lambda f=launcher, g=grid, a=args, o=options: f.launch(g, a, o)
        cases[f"{name}: compiled.run alone"] = run
        cases[f"{name}: triton kernel[grid]"] = lambda f=launcher, g=grid, a=args, o=options: f.kernel[g](
            *a, **o
        )
    return {name: _per_call(fn, calls) for name, fn in cases.items()}


def _profile(name: str, fn, calls: int = 200) -> list[dict]:
    try:
        return _profiled(name, fn, calls)
    except Exception as error:  # a measurement: the other profiles still count
        print(f"profile {name} failed: {type(error).__name__}: {error}")
        return []


def _profiled(name: str, fn, calls: int) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    rows = []
    for event in prof.key_averages():
        device_us = getattr(event, "device_time_total", None)
        if device_us is None:
            device_us = getattr(event, "cuda_time_total", 0)
        rows.append(
            {
                "name": event.key[:70],
                "count_per_call": event.count / calls,
                "gpu_us_per_call": device_us / calls,
                "cpu_us_per_call": event.cpu_time_total / calls,
            }
        )
    rows.sort(key=lambda r: -r["gpu_us_per_call"])
    print(f"profile: {name} ({calls} calls)")
    for row in rows[:14]:
        print(
            f"  {row['name']:70s} x{row['count_per_call']:4.1f}  gpu {row['gpu_us_per_call']:7.2f} us"
            f"  cpu {row['cpu_us_per_call']:7.2f} us"
        )
    return rows[:30]


def _long_calls(module, where: torch.device) -> tuple:
    """(positions, fused): calls of the device's own bars (issue 48, items 2 and 3): ``module`` over x
    (8, 2048, 1024) bfloat16 at position ids (8, 2048), and the fused rotary apply of Llama 3.1 to q and k
    (8, 32, 4096, 128) bfloat16 (as in fused_sweep.py)."""
    import posenc.rope as rope
    import posenc.torch as pt

    xL = torch.randn(8, 2048, 1024, device=where, dtype=torch.bfloat16)
    prefill = torch.arange(2048, device=where).repeat(8, 1)
    q = torch.randn(8, 32, 4096, 128, device=where, dtype=torch.bfloat16)
    k = torch.randn_like(q)
    llama = rope.config(Path(__file__).parent / "data" / "llama31_config.json")
    ids = torch.arange(4096, device=where)[None].expand(8, -1)

    def fused():
        return pt.apply_rotary(q, k, position_ids=ids, params=llama)

    return (lambda: module(xL, positions=prefill)), fused


def _ncu_target(where: torch.device) -> int:
    import posenc.torch as pt

    module = pt.SinusoidalPositionalEncoding(1024, batch_first=True).eval()
    calls = _long_calls(module, where)
    with torch.no_grad():
        for call in calls:  # compiles and first-launch probes outside the profiled range
            call()
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for call in calls:
            call()
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--calls", type=int, default=2000)
    options.add_argument("--json", type=Path, default=None)
    options.add_argument(
        "--ncu-target",
        action="store_true",
        help="only run the (8, 2048) ids and the fused apply twice each between cudaProfilerStart and Stop "
        "(warmed up first): a target for ncu --profile-from-start off",
    )
    args = options.parse_args(argv)
    if not torch.cuda.is_available():
        print("launch_costs.py measures CUDA calls: no GPU here")
        return 0
    import posenc.rope as rope
    import posenc.torch as pt

    where = torch.device("cuda")
    if args.ncu_target:
        return _ncu_target(where)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    host = _host_rows(where, args.calls)
    print(f"host costs on {report['device']}, torch {torch.__version__} (per call: issued, done)")
    for name, (issued, done) in host.items():
        print(f"  {name:44s} issued {issued * 1e6:7.2f} us  done {done * 1e6:7.2f} us")
    report["host"] = {name: {"issued_s": i, "done_s": d} for name, (i, d) in host.items()}
    try:
        parts = _decode_parts(where, args.calls)
    except Exception as error:  # a measurement: the other rows still count
        print(f"decode parts not measured: {type(error).__name__}: {error}")
        parts = {}
    print("decode step's angle addition, piece by piece (per call: issued, done)")
    for name, (issued, done) in parts.items():
        print(f"  {name:52s} issued {issued * 1e6:7.2f} us  done {done * 1e6:7.2f} us")
    report["decode_parts"] = {name: {"issued_s": i, "done_s": d} for name, (i, d) in parts.items()}
    module = pt.SinusoidalPositionalEncoding(1024, batch_first=True).eval()
    x1 = torch.randn(8, 1, 1024, device=where, dtype=torch.bfloat16)
    offsets = torch.arange(8, device=where) + 4000
    rotary = pt.RotaryEmbedding(rope.config(head_dim=128, base=500000.0)).to(where)
    ids = offsets[:, None]
    steps = pt.Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0).to(where)
    timesteps = torch.rand(8, device=where) * 1000
    positions, fused = _long_calls(module, where)
    with torch.no_grad():
        report["profiles"] = {
            "decode step, per-batch offsets": _profile("decode step", lambda: module(x1, offset=offsets)),
            "rotary cos/sin of decode ids": _profile("rotary cos/sin", lambda: rotary(x1, ids)),
            "Timesteps": _profile("Timesteps", lambda: steps(timesteps)),
            # the GPU's own time of the calls whose bars are the device's (items 2 and 3 of issue 48)
            "positions (8, 2048), d 1024 bf16": _profile("positions (8, 2048)", positions, calls=50),
            "fused rotary apply (8, 32, 4096, 128) bf16": _profile("fused apply", fused, calls=20),
        }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
