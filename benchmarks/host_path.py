"""The host's share of an eager CUDA call, layer by layer (issue 48, item 1): a decode step with per-batch
offsets, the rotary cos/sin of decode ids and ``Timesteps``, each against the gather it replaces, in one
process.

    python benchmarks/host_path.py [--device meta|cuda] [--calls 2000] [--json FILE]

Each case is timed as nested layers, outermost first: the module call, the operator (``operator.exact`` /
``operator.rotary_rows``), the device's encode with its first-launch checks (``table_launch.encode``: angle
addition for integer ids, the exact kernel for real positions), the launches' set-up and launches
(``table_launch.ids_launch`` or ``encode_launch.launch``), and, for the case's last kernel, one launch
through Triton (``kernel[grid](...)``) against one through posenc's launcher (``common.Launcher``: the
compiled kernel's own launcher once Triton has bound a specialization). A layer's share is its time less the
next one's. Without a GPU (``--device meta``: tensors with no data, which take the CUDA path's Python) the
kernels are stubbed (a launch returns at once), so the rows are the Python and torch dispatch of posenc's
own layers; on CUDA every launch is real and the times are host time per call (calls issued back to back,
one sync at the end), with the host's own share beside each: the time to issue the calls before that sync.
Beside each layer, the torch operators it dispatches (allocations, views, launches): on ``meta`` an
elementwise operator costs 100-400 us of Python shape rules against ~7-9 us on a CUDA host, so there the
counts, not the times, compare a layer with the gather.
"""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import posenc.rope as rope
import posenc.torch as pt
from posenc.torch import operator
from posenc.torch.kernels import common, encode_launch, first_launch, table_launch

#: The kernel modules the launchers use.
MODULES = ("encode_kernel", "table_kernel")


class _Stub:
    """A kernel that launches nothing: ``kernel[grid](...)`` returns at once."""

    def __getitem__(self, grid):
        return lambda *args, **options: None


def _stub_kernels() -> None:
    """Without a GPU: the CPU-like ``meta`` device stands in for CUDA, every kernel is a stub, every
    first-launch probe passes."""
    names = ("encode_kernel", "table_kernel", "settle_kernel", "ids_kernel")
    stubs = types.SimpleNamespace(**{name: _Stub() for name in names})
    real = common.kernel_module
    common.kernel_module = lambda name: stubs if name in MODULES else real(name)
    encode_launch.kernel_module = table_launch.kernel_module = common.kernel_module
    common.KERNEL_DEVICES.append("meta")
    first_launch._probe = lambda kernel, where, spec, run, reference: first_launch.Probe(
        kernel, str(where), dict(spec), first_launch.VERIFIED, "", 0.0
    )
    # the operator's body answers a meta tensor with its shape alone (tracing's fake): here it takes the
    # device's road, the launches' set-up and the stubbed launches, as on CUDA
    operator._exact = lambda positions, offset, *options: table_launch.encode(
        positions, operator._request(options), None if offset is None else offset.to(positions.device)
    )


def _per_call(fn, calls: int, sync) -> tuple[float, float]:
    """(issued, done): seconds a call to issue ``calls`` calls back to back (no sync: the host's time, while
    the GPU's queue has room), and a call until the GPU finished them; each the best of 3 rounds."""
    fn()
    sync()
    issued = done = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        for _ in range(calls):
            fn()
        middle = time.perf_counter()
        sync()
        issued = min(issued, (middle - began) / calls)
        done = min(done, (time.perf_counter() - began) / calls)
    return issued, done


def _torch_ops(fn) -> int:
    """The torch operators one call dispatches at its top level (``torch.profiler``'s aten events whose
    parent is none of them): each an allocation, a view or a kernel launch on CUDA, ~7-9 us of host time
    there, where ``meta``'s elementwise ones cost 100-400 us (Python shape rules), so on ``meta`` the count
    says more than the time."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    return sum(e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::") for e in events)


_LAUNCH = common.Launcher.launch


def _recording(seen: dict):
    """A Launcher.launch that records each kernel's last launch: name -> (launcher, grid, args, options)."""

    def recording(self, grid, args, options):
        name = getattr(self.kernel, "__name__", None) or getattr(self.kernel, "_fn_name", "kernel")
        seen[name] = (self, grid, args, options)
        return _LAUNCH(self, grid, args, options)

    return recording


def main(argv: list[str] | None = None) -> int:
    import argparse

    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--device", default="meta")
    options.add_argument("--calls", type=int, default=2000)
    options.add_argument("--json", type=Path, default=None)
    args = options.parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if not cuda:
        _stub_kernels()
    torch.manual_seed(0)
    dtype = torch.bfloat16
    d_model, batch = 1024, 8
    module = pt.SinusoidalPositionalEncoding(d_model, batch_first=True).eval()
    x1 = torch.randn(batch, 1, d_model, device=device, dtype=dtype)
    offsets = torch.arange(batch, device=device) + 4000
    table = torch.randn(8192, d_model, device=device, dtype=dtype)
    rotary = pt.RotaryEmbedding(rope.config(head_dim=128, base=500000.0)).to(device)
    ids = (torch.arange(batch, device=device) + 4000)[:, None]
    steps = pt.Timesteps(320, flip_sin_to_cos=True, downscale_freq_shift=0).to(device)
    timesteps = torch.rand(batch, device=device) * 1000
    cos_table = torch.randn(8192, 128, device=device)

    seen = {}
    real_exact, real_encode = operator.exact, table_launch.encode

    def spy_exact(positions, offset, opts):
        seen.setdefault("exact", (positions, offset, opts))
        return real_exact(positions, offset, opts)

    def spy_encode(positions, request, offset=None):
        seen.setdefault("encode", (positions, request, offset))
        return real_encode(positions, request, offset)

    cases = {
        "decode step (8, 1, 1024), per-batch offsets": (
            lambda: module(x1, offset=offsets),
            {"gather": lambda: x1 + table[offsets][:, None], "index": lambda: table[offsets]},
        ),
        "rotary cos/sin of decode ids (8, 1), head_dim 128": (
            lambda: rotary(x1, ids),
            {"gather": lambda: (cos_table[ids], cos_table[ids])},
        ),
        "Timesteps (8,) -> (8, 320)": (lambda: steps(timesteps), {"gather": lambda: table[offsets, :320]}),
    }
    report = {}
    with torch.no_grad():
        for name, (call, references) in cases.items():
            seen.clear()
            launches = {}
            operator.exact, table_launch.encode = spy_exact, spy_encode
            common.Launcher.launch = _recording(launches)
            try:
                call()
            finally:
                operator.exact, table_launch.encode = real_exact, real_encode
                common.Launcher.launch = _LAUNCH
            layers = {"module call": call}
            if "exact" in seen:
                positions, offset, opts = seen["exact"]
                layers["operator"] = lambda p=positions, o=offset, q=opts: operator.exact(p, o, q)
            if "encode" in seen:
                positions, request, offset = seen["encode"]
                integer = table_launch.ids_run_here(positions, offset, request)
                layers["encode + first-launch checks"] = lambda p=positions, r=request, o=offset: (
                    table_launch.encode(p, r, o)
                )
                if integer:
                    layers["set-up + launches (angle addition)"] = lambda p=positions, r=request, o=offset: (
                        table_launch.ids_launch(p, o, r)
                    )
                else:
                    layers["set-up + launch (exact kernel)"] = lambda p=positions, r=request, o=offset: (
                        encode_launch.launch(p, o, r)
                    )
                next(reversed(layers.values()))()
            if cuda and launches:
                kernel, (launcher, grid, a, kw) = next(reversed(launches.items()))
                layers[f"one launch, triton {kernel}[grid](...)"] = lambda g=grid, a=a, kw=kw, k=launcher: (
                    k.kernel[g](*a, **kw)
                )
                layers[f"one launch, posenc's launcher ({kernel})"] = lambda g=grid, a=a, kw=kw, k=launcher: (
                    k.launch(g, a, kw)
                )
            timed = {layer: _per_call(fn, args.calls, sync) for layer, fn in layers.items()}
            timed.update({f"reference: {r}": _per_call(fn, args.calls, sync) for r, fn in references.items()})
            rows = {layer: done for layer, (_, done) in timed.items()}
            every = {**layers, **{f"reference: {r}": fn for r, fn in references.items()}}
            ops = {layer: _torch_ops(fn) for layer, fn in every.items() if not layer.startswith("one launch")}
            report[name] = {
                layer: {"issued_s": i, "done_s": d, "torch_ops": ops.get(layer)}
                for layer, (i, d) in timed.items()
            }
            print(f"{name} on {device} ({'real launches' if cuda else 'kernels stubbed'})")
            names = list(rows)
            gather = rows[f"reference: {next(iter(references))}"]
            for i, layer in enumerate(names):
                share = ""
                nested = i + 1 < len(names) and not names[i + 1].startswith(("reference", "one launch"))
                if not layer.startswith(("reference", "one launch")) and nested:
                    share = f"  (this layer: {(rows[layer] - rows[names[i + 1]]) * 1e6:6.1f} us)"
                shown = f"{rows[layer] * 1e6:8.1f} us  {rows[layer] / gather:5.2f}x gather"
                count = f"{ops[layer]:3d} ops" if layer in ops else " " * 7
                print(f"  {layer:48s} {shown}  {count}  host {timed[layer][0] * 1e6:6.1f} us{share}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"device": str(device), "torch": torch.__version__, "cases": report}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
