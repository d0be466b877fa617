"""On a CUDA machine: position ids and tables by angle addition (posenc.torch.kernels.table_kernel) against
the NumPy core, bit for bit, on millions of elements; the encode kernel (posenc.torch.kernels.encode_kernel)
against the portable algorithm on the same device and against the core; and each specialization's first call
(Triton's compile) timed. Writes ``$OUT/gpu_kernel_bits.json`` (or ./gpu_kernel_bits.json).

    PYTHONPATH=src python3 scripts/gpu_kernel_bits.py [--part ids|tables|encode [--case I]]
    TRITON_INTERPRET=1 PYTHONPATH=src python3 scripts/gpu_kernel_bits.py --device cpu --small  # a dry run

A part (and a case of it) writes ``gpu_kernel_bits_<part>[_<case>].json``: scripts/gpu_checks.sh runs them
side by side, since each first call compiles its kernels (45-90 s apiece with triton 3.6 on an H200's host).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

import posenc
from posenc import core, defaults, portable
from posenc.torch import operator
from posenc.torch.kernels import common, encode_launch, table_launch

#: (d_model, options, kind of positions, rows, output dtype)
CASES = [
    (1024, {}, "int", 4096, "bfloat16"),
    (512, {}, "int", 8192, "float32"),
    (320, {"shift": 1.0, "layout": "cos_sin"}, "timesteps", 8192, "float32"),
    (320, {"shift": 1.0, "layout": "sin_cos"}, "timesteps", 8192, "float16"),
    (66, {"shift": 1.0, "layout": "sin_cos", "scale": 1000.0}, "float32", 16384, "float32"),
    (33, {"odd": "literal", "base": 100.0}, "float64", 16384, "bfloat16"),
    (256, {}, "tiny", 8192, "float32"),
    (128, {}, "int", 4096, "float64"),
    (512, {}, "int+offset", 8192, "bfloat16"),  # decode: per-row offsets added exactly in the kernel
]
#: tables by angle addition: (length, d_model, start, options, output dtype)
TABLES = [
    (131072, 1024, 0, {}, "float32"),
    (131072, 1024, 0, {}, "bfloat16"),
    (65536, 512, 2**31 - 65536, {"layout": "sin_cos"}, "float16"),
    (9000, 33, -4500, {"base": 500000.0}, "bfloat16"),
]


#: position ids by angle addition: (d_model, options, kind of ids, shape, output dtype)
IDS = [
    (1024, {}, "random", (4096,), "bfloat16"),
    (
        1024,
        {},
        "prefill+offset",
        (8, 2048),
        "float32",
    ),  # arange(L) + a per-row offset, broadcast in the kernel
    (128, {"base": 500000.0, "layout": "sin_cos"}, "random", (65536,), "float32"),  # a rotary request
    (512, {"layout": "cos_sin"}, "random+offset", (8192,), "float16"),
    (33, {"odd": "literal"}, "random", (16384,), "bfloat16"),
]


def _sub_blocks(flags: torch.Tensor) -> int:
    """Sub-blocks the settling launch recomputed: the bits set in the combining programs' flags."""
    return sum(bin(v).count("1") for v in flags[flags != 0].tolist())


def ids(where: str, small: bool, only: int | None = None) -> list[dict]:
    """Each ids case of IDS on ``where`` by angle addition (table_launch.ids_launch) against the core, bit
    for bit, with the blocks it settled."""
    sync = torch.cuda.synchronize if where == "cuda" else (lambda: None)
    rng = np.random.default_rng(48)
    cases = []
    for index, (d_model, options, kind, shape, fmt) in enumerate(IDS):
        if only is not None and index != only:
            continue
        if small:
            shape = (2, 8) if len(shape) == 2 else (16,)
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        request = operator._request((*checked, fmt))
        offset = None
        if kind.startswith("prefill"):
            host = torch.arange(shape[1])
            offset = torch.tensor(rng.integers(0, 2**31 - shape[1], (shape[0], 1)))
        else:
            host = torch.tensor(rng.integers(-(2**31) + 1, 2**31, shape))
            if kind.endswith("+offset"):
                host = host // 2
                offset = torch.tensor(rng.integers(-(2**30) + 1, 2**30, shape))
        begin = time.perf_counter()
        got, uncertain = table_launch.ids_launch(
            host.to(where), None if offset is None else offset.to(where), request
        )
        sync()
        first = time.perf_counter() - begin
        total = host if offset is None else host + offset
        want = posenc.encode(total.numpy(), d_model, dtype=fmt, **options)
        signed = {2: np.int16, 4: np.int32}[got.element_size()]
        bits = {2: torch.int16, 4: torch.int32}[got.element_size()]
        differ = (
            (got.view(bits).cpu() != torch.from_numpy(np.ascontiguousarray(want).view(signed))).sum().item()
        )
        case = {
            "ids": kind,
            "shape": list(total.shape),
            "d_model": d_model,
            "options": options,
            "dtype": fmt,
            "elements": total.numel() * d_model,
            "first_call_s": round(first, 2),
            "values_differing_from_core": differ,
            "blocks_settled": int((uncertain > 0).sum()),
            "sub_blocks_settled": _sub_blocks(uncertain),
        }
        print(case, flush=True)
        cases.append(case)
    return cases


def tables(where: str, small: bool, only: int | None = None) -> list[dict]:
    """Each table of TABLES on ``where`` against the core's, bit for bit, with the blocks it settled."""
    sync = torch.cuda.synchronize if where == "cuda" else (lambda: None)
    cases = []
    for index, (length, d_model, start, options, fmt) in enumerate(TABLES):
        if only is not None and index != only:
            continue
        length = min(length, 64) if small else length
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        request = operator._request((*checked, fmt))
        begin = time.perf_counter()
        got, uncertain = table_launch.launch(length, start, request, torch.device(where))
        sync()
        first = time.perf_counter() - begin
        want = posenc.table(length, d_model, start=start, dtype=fmt, **options)
        signed = {2: np.int16, 4: np.int32}[got.element_size()]
        bits = {2: torch.int16, 4: torch.int32}[got.element_size()]
        differ = (got.view(bits).cpu() != torch.from_numpy(want.view(signed))).sum().item()
        case = {
            "table": [length, d_model, start],
            "options": options,
            "dtype": fmt,
            "first_call_s": round(first, 2),
            "values_differing_from_core": differ,
            "blocks_settled": int((uncertain > 0).sum()),
            "blocks": uncertain.numel(),
            "sub_blocks_settled": _sub_blocks(uncertain),
        }
        print(case, flush=True)
        cases.append(case)
    return cases


def positions(kind: str, rows: int, rng: np.random.Generator) -> torch.Tensor:
    if kind == "int":
        return torch.tensor(rng.integers(-(2**31) + 1, 2**31, rows))
    if kind == "timesteps":
        return torch.tensor((rng.random(rows) * 1000).astype(np.float32))
    if kind == "float32":
        return torch.tensor(rng.uniform(-(2**31) + 256, 2**31 - 256, rows).astype(np.float32))
    if kind == "float64":
        return torch.tensor(rng.uniform(-(2**31) + 1, 2**31 - 1, rows))
    tiny = 2.0 ** rng.uniform(-149, 0, rows) * rng.choice([-1.0, 1.0], rows)
    return torch.tensor(tiny.astype(np.float32))


def main(where: str, small: bool) -> dict:
    if where == "cpu":  # Triton's interpreter (TRITON_INTERPRET=1) stands in for CUDA
        common.KERNEL_DEVICES.append("cpu")
    assert encode_launch.runs_here(torch.empty(0, device=where)), "needs CUDA and triton"
    sync = torch.cuda.synchronize if where == "cuda" else (lambda: None)
    rng = np.random.default_rng(0)
    name = torch.cuda.get_device_name() if where == "cuda" else "cpu (Triton interpreter)"
    report: dict = {"torch": torch.__version__, "device": name, "cases": []}
    for d_model, options, kind, rows, fmt in CASES:
        rows = 8 if small else rows
        checked = core.Options.check(d_model, **{**defaults.OPTIONS, **options})
        request = operator._request((*checked, fmt))
        host = positions(kind.removesuffix("+offset"), rows, rng)
        offset = None
        if kind.endswith("+offset"):  # positions + offset stays inside int32
            host = host // 2
            offset = torch.tensor(rng.integers(-(2**30) + 1, 2**30, rows)).to(where)
        on_gpu = host.to(where)
        start = time.perf_counter()
        got, uncertain = encode_launch.launch(on_gpu, offset, request)
        sync()
        first = time.perf_counter() - start
        array = portable.encode(portable.backend_of(on_gpu), on_gpu, request, offset)
        if offset is not None:
            host = host + offset.cpu()
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
        same_as_portable = bool(torch.equal(got.view(bits), array.view(bits)))
        host_values = host.double().numpy() if host.is_floating_point() else host.numpy()
        want = posenc.encode(host_values, d_model, dtype=fmt, **options)
        signed = {2: np.int16, 4: np.int32, 8: np.int64}[got.element_size()]
        want = torch.from_numpy(np.ascontiguousarray(want).view(signed))
        differ = (got.view(bits).cpu() != want).sum().item()
        start = time.perf_counter()
        calls = 1 if small else 10
        for _ in range(calls):
            encode_launch.launch(on_gpu, offset, request)
        sync()
        per_call = (time.perf_counter() - start) / calls
        case = {
            "d_model": d_model,
            "options": options,
            "positions": kind,
            "rows": rows,
            "dtype": fmt,
            "elements": rows * d_model,
            "first_call_s": round(first, 2),
            "per_call_ms": round(per_call * 1e3, 3),
            "equal_to_portable_algorithm": same_as_portable,
            "values_differing_from_core": differ,  # float64: the core is within 1 ulp, the kernel exact
            "uncertain_settled": int(uncertain.sum()),  # the encode kernel counts values
        }
        print(case, flush=True)
        report["cases"].append(case)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--small", action="store_true", help="8 rows a case (a dry run)")
    parser.add_argument(
        "--part",
        choices=["all", "ids", "tables", "encode"],
        default="all",
        help="one part (its own JSON file): processes side by side each compile their own kernels",
    )
    parser.add_argument("--case", type=int, default=None, help="one case of the part (its index)")
    args = parser.parse_args()
    if args.small:  # the interpreter takes about as long for an exact block of any size: big ones are quick
        table_launch.EXACT_BLOCK = 64 * 1024
    suffix = "" if args.part == "all" else f"_{args.part}" + ("" if args.case is None else f"_{args.case}")
    path = Path(os.environ.get("OUT", ".")) / f"gpu_kernel_bits{suffix}.json"
    document: dict = {}
    if args.part in ("all", "ids"):  # the newest paths first: a cut run has them
        document["ids"] = ids(args.device, args.small, args.case)
        path.write_text(json.dumps(document, indent=2))
    if args.part in ("all", "tables"):
        document["tables"] = tables(args.device, args.small, args.case)
        path.write_text(json.dumps(document, indent=2))
    if args.part in ("all", "encode"):
        document.update(main(args.device, args.small))
        path.write_text(json.dumps(document, indent=2))
    print(f"wrote {path}")
