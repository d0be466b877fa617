"""Position ids by angle addition against a gather, over the combining kernel's blocks: where the time of
(8, 2048) ids goes (issue 48, item 2). CUDA with triton; on the CPU (``TRITON_INTERPRET=1``) a dry run on a
small shape.

    python benchmarks/ids_sweep.py --device cuda [--json FILE]    # time every configuration
    python benchmarks/ids_sweep.py --device cuda --warm I    # compile configuration I (parallel warm-up)

Ids (8, 2048) (``arange(2048)`` a batch row, as a prefill) and (8, 2048) random ids below 2**31, d_model
1024, bfloat16 encodings. Rows: ``table_launch.ids_launch`` without its settling launch (the combining
kernel alone: its level rows are float64 [sin | cos], 16 bytes a value and level against the 2 bytes it
writes) for each (rows, frequencies) block, the default with settling, and the references: a gather of the
same rows from a bfloat16 table on the device (``table[ids]``) and a copy of as many bytes. Each row: the
pipelined time a call (20 calls a sync, as fused_sweep.py) and the ratio to the gather.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from fused_sweep import _pipelined, sweep_arguments

from posenc import core, defaults
from posenc.torch import operator
from posenc.torch.kernels import table_launch
from posenc.torch.kernels.common import kernel_module

#: (name, ids_launch keyword arguments): the combining kernel's (rows, frequencies) blocks
BLOCKS = [
    ("8 x 128 (default)", {}),
    ("16 x 64", {"block_rows": 16, "block_freqs": 64}),
    ("32 x 32", {"block_rows": 32, "block_freqs": 32}),
    ("4 x 256", {"block_rows": 4, "block_freqs": 256}),
    ("16 x 128", {"block_rows": 16, "block_freqs": 128}),
]


def _cases(device, small):
    d_model, shape = (64, (2, 16)) if small else (1024, (8, 2048))
    request = operator._request((*core.Options.check(d_model, **defaults.OPTIONS), "bfloat16"))
    generator = torch.Generator().manual_seed(48)
    ids = {
        "prefill": torch.arange(shape[1]).repeat(shape[0], 1).to(device),
        "random": torch.randint(0, 2**31 - 1, shape, generator=generator).to(device),
    }
    table = torch.randn(shape[1] if small else 4096, d_model, device=device, dtype=torch.bfloat16)
    cases = {}
    for kind, positions in ids.items():
        for name, kwargs in BLOCKS:
            cases[f"{kind}: combining {name}"] = lambda p=positions, kw=kwargs: table_launch.ids_launch(
                p, None, request, settle=False, **kw
            )
        cases[f"{kind}: with settling (default)"] = lambda p=positions: table_launch.ids_launch(
            p, None, request
        )
    prefill = ids["prefill"]
    cases["reference: gather table[ids] (bfloat16)"] = lambda: table[prefill]
    gathered = table[prefill]
    out = torch.empty_like(gathered)
    cases["reference: copy of its bytes"] = lambda: out.copy_(gathered)
    return cases


def main(argv=None) -> int:
    args, device, small = sweep_arguments(argv, __doc__.splitlines()[0], 40)
    if kernel_module("table_kernel") is None:
        print("no triton: nothing to sweep")
        return 0
    cases = _cases(device, small)
    names = [n for n in cases if not n.startswith("reference")]
    if args.warm is not None:
        if args.warm < len(BLOCKS) + 1:
            cases[names[args.warm]]()  # compiles the prefill's; the random ids' share the kernels
            print(f"warm {names[args.warm]}")
        return 0
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    repeat = 4 if small else args.repeat
    rows = {name: {"pipelined_s": _pipelined(fn, sync, repeat)} for name, fn in cases.items()}
    gather = rows["reference: gather table[ids] (bfloat16)"]["pipelined_s"]
    where = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
    print(f"position ids by angle addition, bfloat16 on {device} ({where}), torch {torch.__version__}")
    for name, row in rows.items():
        row["ratio_to_gather"] = row["pipelined_s"] / gather
        print(f"  {name:44s} {row['pipelined_s'] * 1e6:9.1f} us  {row['ratio_to_gather']:5.2f}x gather")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"device": where, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
