"""Compile posenc's Triton kernels for a CUDA GPU on a machine that has none: every specialization below goes
through its real launcher (posenc.torch.kernels.encode_launch, posenc.torch.fused_rotary) and Triton's CUDA
backend (PTX, then ptxas to a cubin) down to the check Triton makes at every launch, that the globals the
kernel read are unchanged; only the launch itself is skipped. Triton's CPU interpreter (TRITON_INTERPRET=1,
the bit-for-bit tests) accepts code the compiler refuses and makes no launch check: this shows a kernel
builds.

    PYTHONPATH=src python3 scripts/compile_kernels.py --arch 90 80 --json compiled.json

Prints one line per (arch, specialization): compile seconds, cubin bytes, and the kernel's registers, stack
and spilled (local) bytes per thread. Exits 1 if any specialization fails (its error is in the JSON).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("compile_kernels.py compiles for CUDA: run it without TRITON_INTERPRET=1")

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import JITFunction

from posenc import core, defaults, rope
from posenc.torch import fused_rotary, operator
from posenc.torch.kernels import common, encode_launch, table_launch


def _encode(d_model: int, fmt: str, positions: torch.Tensor, offset: Any = None, **options: Any) -> Callable:
    def launch() -> None:
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        encode_launch.launch(positions, offset, operator._request((*checked, fmt)))

    return launch


def _table(d_model: int, fmt: str, settle: bool, **options: Any) -> Callable:
    """A table by angle addition: its exact float64 rows (the encode kernel), the combining kernel, and
    with ``settle`` the settling kernel (the last compiled: the one recorded)."""

    def launch() -> None:
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        request = operator._request((*checked, fmt))
        table_launch.launch(300, 7, request, torch.device("cpu"), settle=settle)

    return launch


def _ids(d_model: int, fmt: str, offset: bool, **options: Any) -> Callable:
    """Position ids by angle addition: the levels' exact rows (the encode kernel), the combining kernel and
    the settling kernel (the last compiled: the one recorded)."""

    def launch() -> None:
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        request = operator._request((*checked, fmt))
        positions = torch.arange(8)[None]
        table_launch.ids_launch(positions, torch.arange(3)[:, None] if offset else None, request)

    return launch


def _cos_sin(cfg: dict, positions: torch.Tensor) -> Callable:
    """The encode kernel as rotary.cos_sin runs it: A cos, A sin of a rotary request (A: attention
    scaling)."""

    def launch() -> None:
        params = rope.config(cfg)
        request, _, _ = operator.request(operator.params_json(params), -1, "float32")
        encode_launch.launch(positions, None, request)

    return launch


def _rotary(cfg: dict, q_dtype: torch.dtype, k_dtype: torch.dtype, layout: str, heads_axis: int) -> Callable:
    def launch() -> None:
        params = rope.config(cfg)
        shape = (2, 4, 8, params.head_dim) if heads_axis == 1 else (2, 8, 4, params.head_dim)
        q, k = torch.zeros(shape, dtype=q_dtype), torch.zeros(shape, dtype=k_dtype)
        positions = torch.arange(16).reshape(2, 8)
        rows = table_launch.encode  # the rotation kernel alone: its cos/sin rows are the specs above
        table_launch.encode = lambda ids, request, offset=None: torch.zeros(ids.numel(), 2 * request.count)
        try:
            fused_rotary.launch(q, k, positions, params, layout, heads_axis, None)
        finally:
            table_launch.encode = rows

    return launch


_LLAMA = {"head_dim": 128, "base": 500000.0}
_YARN_PARTIAL = {
    "head_dim": 96,
    "base": 10000.0,
    "partial_rotary_factor": 0.5,
    "scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
}

#: name -> launch. Together they take every branch of the kernels: each output dtype, integer, float32 and
#: float64 positions, offsets, the amplitude, q/k dtypes, both layouts, features past the rotary dims, the
#: tables' formats and odd column.
SPECS: dict[str, Callable] = {
    "encode int -> bfloat16": _encode(1024, "bfloat16", torch.arange(8)),
    "encode int + offsets -> float16": _encode(
        512, "float16", torch.arange(8)[None], torch.arange(3)[:, None]
    ),
    "encode float32 timesteps -> float32": _encode(
        320, "float32", torch.rand(8), shift=1.0, layout="cos_sin"
    ),
    "encode float64 -> float64 (odd)": _encode(33, "float64", torch.rand(8).double(), odd="zero"),
    "encode rope cos/sin (yarn amplitude)": _cos_sin(_YARN_PARTIAL, torch.arange(8)),
    "table -> float32 (odd)": _table(33, "float32", False),
    "table -> float16": _table(32, "float16", False, layout="sin_cos"),  # the float32 table's anchors
    "table -> bfloat16": _table(1024, "bfloat16", False),
    "table settling -> bfloat16": _table(1024, "bfloat16", True),
    "ids -> bfloat16": _ids(1024, "bfloat16", False),
    "ids + offsets -> float16 (odd)": _ids(33, "float16", True, layout="sin_cos"),
    "rotary bf16 half": _rotary(_LLAMA, torch.bfloat16, torch.bfloat16, "half", 1),
    "rotary fp16/fp32 interleaved (yarn, partial)": _rotary(
        _YARN_PARTIAL, torch.float16, torch.float32, "interleaved", 2
    ),
}


class _CompileOnly:
    """A Triton driver for a GPU that is not there: the target is ``sm_<arch>``, the device is numbered by the
    arch (Triton keeps its compiled kernels per device), the stream is 0."""

    def __init__(self, arch: int) -> None:
        self.arch = arch
        self.target = GPUTarget("cuda", arch, 32)

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return self.arch

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")


def _resources(cubin: bytes) -> dict[str, int]:
    """cuobjdump's resource usage of the kernel: registers per thread, stack and local (spilled) bytes per
    thread, static shared memory ({} where Triton ships no cuobjdump)."""
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(tool):
        return {}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "kernel.cubin")
        with open(path, "wb") as file:
            file.write(cubin)
        done = subprocess.run([tool, "--dump-resource-usage", path], capture_output=True, text=True)
    fields = dict(re.findall(r"(REG|STACK|SHARED|LOCAL):(\d+)", done.stdout))
    return {key.lower(): int(value) for key, value in fields.items()}


def compile_for(arch: int, names: list[str]) -> list[dict]:
    """Compile each named specialization for ``sm_<arch>``: one record per name (its error, or the
    cubin's size and resources)."""
    driver.set_active(_CompileOnly(arch))
    compiled: list[Any] = []
    run = JITFunction.run

    def compile_only(self, *args, grid, warmup, **kwargs):  # every launch becomes Triton's warmup
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        compiled.append(kernel)
        return kernel

    JITFunction.run = compile_only
    records = []
    try:
        for name in names:
            compiled.clear()
            start = time.perf_counter()
            record: dict[str, Any] = {"arch": f"sm_{arch}", "spec": name}
            try:
                SPECS[name]()
                kernel = compiled[-1]
                record.update(
                    kernel=kernel.name,
                    seconds=round(time.perf_counter() - start, 1),
                    cubin_bytes=len(kernel.asm["cubin"]),
                    ptx_target=re.search(r"\.target\s+(\S+)", kernel.asm["ptx"]).group(1),
                    **_resources(kernel.asm["cubin"]),
                )
            except Exception as error:  # reported per specialization
                record["error"] = "".join(traceback.format_exception(error)).strip()[-6000:]
            records.append(record)
            print(json.dumps(record), flush=True)
    finally:
        JITFunction.run = run
    return records


def _alike(a: Any, b: Any) -> bool:
    """The same argument in two launches of one specialization: tensors of one dtype, shape and strides (each
    launch makes its own), other values equal and of one type."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        alike = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
        return alike and (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride())
    return type(a) is type(b) and a == b


def launch_arguments(arch: int, names: list[str]) -> list[dict]:
    """Launch each named specialization twice through posenc's launchers with the kernels' launches recorded,
    not made (no GPU): the first through Triton (its binder orders the arguments, constants and defaults
    included), the second through posenc's Launcher directly (common.Launcher). One record per kernel: whether
    the direct launch passed the compiled kernel's launcher what Triton passed it (the grid, stream, function,
    metadata and every argument; Triton's launch metadata and empty hook chains aside)."""
    from triton.compiler.compiler import CompiledKernel

    driver.set_active(_CompileOnly(arch))
    calls: list[tuple[str, tuple]] = []

    def init_handles(self) -> None:  # no device: the launcher records its arguments
        if self.module is None:
            self.module, self.function = "module", f"function of {self.name}"
            self._run = lambda *args, name=self.name: calls.append((name, args))

    saved = (
        CompiledKernel._init_handles,
        torch.cuda.current_device,
        torch.cuda.is_initialized,
        common._raw_stream,
        common._hooked,
    )
    CompiledKernel._init_handles = init_handles
    torch.cuda.current_device = lambda: arch
    torch.cuda.is_initialized = lambda: True
    common._raw_stream = lambda device: 0
    common._hooked = lambda: False
    records = []
    try:
        for name in names:
            calls.clear()
            record: dict[str, Any] = {"arch": f"sm_{arch}", "spec": name}
            try:
                SPECS[name]()
                first = dict(reversed(calls))  # each kernel's first launch: through Triton
                calls.clear()
                SPECS[name]()  # each kernel's launch again: direct (a kernel launched once is left out)
                for kernel, direct_args in dict(reversed(calls)).items():
                    triton_args = first[kernel]
                    same = (
                        triton_args[:6] == direct_args[:6]
                        and direct_args[6:9] == (None, None, None)
                        and len(triton_args) == len(direct_args)
                        and all(map(_alike, triton_args[9:], direct_args[9:]))
                    )
                    record.setdefault("kernels", {})[kernel] = same
            except Exception as error:  # reported per specialization
                record["error"] = "".join(traceback.format_exception(error)).strip()[-6000:]
            records.append(record)
            print(json.dumps(record), flush=True)
    finally:
        (
            CompiledKernel._init_handles,
            torch.cuda.current_device,
            torch.cuda.is_initialized,
            common._raw_stream,
            common._hooked,
        ) = saved
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, nargs="+", default=[90], help="compute capabilities (90: H100)")
    parser.add_argument("--spec", nargs="+", choices=list(SPECS), default=list(SPECS), metavar="NAME")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument(
        "--launch-args", action="store_true", help="check the direct launches' arguments (launch_arguments)"
    )
    args = parser.parse_args(argv)
    common.KERNEL_DEVICES.append("cpu")  # the launchers take the CPU tensors that stand in for CUDA
    print(f"torch {torch.__version__}, triton {triton.__version__}", flush=True)
    check = launch_arguments if args.launch_args else compile_for
    records = [record for arch in args.arch for record in check(arch, args.spec)]
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"triton": triton.__version__, "records": records}, file, indent=1)
    wrong = any(not all(record.get("kernels", {}).values()) for record in records)
    return 1 if any("error" in record for record in records) or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
