"""Side-by-side benchmark of rotary embeddings: posenc's exact RotaryEmbedding + apply_rotary against Hugging
Face's LlamaRotaryEmbedding + apply_rotary_pos_emb, in one process, with their errors against exact values.

    python benchmarks/rope.py [--batch 8] [--heads 32] [--seq 4096] [--head-dim 128] [--repeat 11]
                              [--device cpu|cuda] [--dtype bfloat16|float32|float16] [--json FILE]

q and k are (batch, heads, seq, head_dim) in --dtype on --device (Llama 3.1's rotary parameters: llama3
scaling, base 500000). Rows: the cos/sin tables alone and the whole rotation (tables + apply) for each
contender, and the memory-bound floor of the rotation: read q and k and write them once (``q.mul_(1)`` on
both, the same bytes moved). The error row is the max |cos - exact| over the tables at this length and at a
long context (131072 - seq .. 131072). posenc's fused apply (``posenc.torch.apply_rotary``: cos/sin
computed inside the rotation by one Triton kernel, no table) is measured on CUDA with triton installed (its
first call compiles the kernel, outside the timed runs); elsewhere its row reads "—".

The JSON records each row's ``ratio_to_hf`` and ``ratio_to_floor``; ``bars`` says whether the bars are
met (posenc fused ≤ 1.0× Hugging Face's tables + apply, ≤ 1.5× the floor; ``met`` is null where the fused
row was not measured); ``fused_bitwise`` whether the fused apply gave the bits of the unfused one
(``apply_rotary`` with float32 exact cos/sin) on these q, k, and which path ran.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
from pathlib import Path

import numpy as np
import torch
from _common import measure, parser

import posenc.rope as rope
import posenc.torch as pt

#: Llama 3.1 8B's rotary parameters, as its config.json gives them.
LLAMA31 = Path(__file__).parent / "data" / "llama31_config.json"


def main(argv: list[str] | None = None) -> int:
    options = parser(
        __doc__, repeat=11, dtype="bfloat16", json=Path(__file__).parent / "results" / "rope.json"
    )
    options.add_argument("--batch", type=int, default=8)
    options.add_argument("--heads", type=int, default=32)
    options.add_argument("--seq", type=int, default=4096)
    options.add_argument("--head-dim", type=int, default=128)
    args = options.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    import transformers
    from transformers.models.llama import modeling_llama

    config = transformers.LlamaConfig(**{**json.loads(LLAMA31.read_text()), "head_dim": args.head_dim})
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    theirs = modeling_llama.LlamaRotaryEmbedding(config).to(device)
    ours = pt.RotaryEmbedding(config).to(device)
    q = torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=device, dtype=dtype)
    k = torch.randn_like(q)
    ids = torch.arange(args.seq, device=device)[None].expand(args.batch, -1)

    def their_step():
        cos, sin = theirs(q, ids)
        return modeling_llama.apply_rotary_pos_emb(q, k, cos, sin)

    def our_step():
        cos, sin = ours(q, ids)
        return pt.apply_rotary(q, k, cos, sin)

    def floor():
        q.mul_(1)
        k.mul_(1)

    def fused_step():
        return pt.apply_rotary(q, k, position_ids=ids, params=ours.params)

    rows = {
        "hf tables": measure(lambda: theirs(q, ids), args.repeat, sync),
        "posenc tables": measure(lambda: ours(q, ids), args.repeat, sync),
        "hf tables + apply": measure(their_step, args.repeat, sync),
        "posenc tables + apply": measure(our_step, args.repeat, sync),
        "floor: read and write q, k": measure(floor, args.repeat, sync),
    }
    fused = device.type == "cuda" and importlib.util.find_spec("triton") is not None
    if fused:
        rows["posenc fused apply (CUDA)"] = measure(fused_step, args.repeat, sync)
    liger = _liger_apply() if fused else None
    if liger is not None:

        def liger_step():
            cos, sin = theirs(q, ids)
            return liger(q, k, cos, sin)

        rows["hf tables + liger apply"] = measure(liger_step, args.repeat, sync)
    reference = rows["hf tables + apply"]["median_s"]
    floor_s = rows["floor: read and write q, k"]["median_s"]
    errors = _errors(theirs, ours, config, args.seq, dtype, device)
    print(f"rotary embeddings, q/k {tuple(q.shape)} {args.dtype} on {args.device} (Llama 3.1 parameters)")
    for name, row in rows.items():
        row["ratio_to_hf"] = row["median_s"] / reference
        row["ratio_to_floor"] = row["median_s"] / floor_s
        print(
            f"  {name:28s} {row['median_s'] * 1e3:9.3f} ms   {row['ratio_to_hf']:5.2f}x Hugging Face"
            f"   {row['ratio_to_floor']:5.2f}x floor"
        )
    if not fused:
        print("  posenc fused apply (CUDA)            —      (CUDA and triton only)")
    for name, error in errors.items():
        print(f"  max |cos, sin - exact| {name}: {error:.3g}")
    bars = _bars(rows.get("posenc fused apply (CUDA)"), rows.get("hf tables + liger apply"))
    for name, bar in bars.items():
        verdict = {True: "met", False: "NOT met", None: "not measured"}[bar["met"]]
        shown = "—" if bar["ratio"] is None else f"{bar['ratio']:.2f}x"
        print(f"  bar: {name}: {shown} ({verdict})")
    bitwise = _fused_bitwise(q, k, ids, ours.params, fused)
    print(
        f"  fused vs unfused apply, bitwise ({bitwise['path']}): {'equal' if bitwise['equal'] else 'DIFFER'}"
    )
    document = {
        "machine": {"platform": platform.platform(), "torch": torch.__version__, "device": args.device},
        "shape": list(q.shape),
        "dtype": args.dtype,
        "results": rows,
        "errors": errors,
        "bars": bars,
        "fused_bitwise": bitwise,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


#: The bars for the fused apply: (name, the row's ratio it reads, the largest ratio that meets it).
BARS = (
    ("posenc fused <= 1.0x hf tables + apply", "ratio_to_hf", 1.0),
    ("posenc fused <= 1.5x memory floor", "ratio_to_floor", 1.5),
)


def _liger_apply():
    """Liger-Kernel's Triton rotary apply (``liger_rotary_pos_emb``), or None where it is not installed."""
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError:
        return None
    return liger_rotary_pos_emb


def _bars(fused_row: dict | None, liger_row: dict | None = None) -> dict[str, dict]:
    """Each bar: the fused row's ratio, the bar, and whether it is met (None: the fused row was not run).
    With Liger's row, also the fused apply against Hugging Face's tables + Liger's apply (<= 1.0x)."""
    out = {}
    for name, key, limit in BARS:
        ratio = None if fused_row is None else fused_row[key]
        out[name] = {"ratio": ratio, "bar": limit, "met": None if ratio is None else bool(ratio <= limit)}
    if fused_row is not None and liger_row is not None:
        ratio = fused_row["median_s"] / liger_row["median_s"]
        name = "posenc fused <= 1.0x hf tables + liger apply"
        out[name] = {"ratio": ratio, "bar": 1.0, "met": bool(ratio <= 1.0)}
    return out


def _fused_bitwise(q, k, ids, params, fused: bool) -> dict:
    """Whether ``apply_rotary`` by position ids (the Triton kernel where ``fused``) gives the bits of the
    unfused rotation: ``apply_rotary`` with the float32 exact cos/sin, as its docstring promises."""
    got = pt.apply_rotary(q, k, position_ids=ids, params=params)
    cos, sin = pt.rotary.cos_sin(ids, params, dtype=torch.float32)
    want = pt.apply_rotary(q, k, cos, sin)
    bits = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16}[q.dtype]
    equal = all(
        a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(bits), b.view(bits))
        for a, b in zip(got, want, strict=True)
    )
    return {"equal": bool(equal), "path": "triton kernel" if fused else "unfused (no CUDA/triton)"}


def _errors(theirs, ours, config, seq: int, dtype, device) -> dict[str, float]:
    """max |value - exact| of each contender's cos and sin at positions 0 .. seq-1 and near 131072."""
    params = rope.config(config)
    out = {}
    for label, start in (("short", 0), ("131k", 131072 - seq)):
        ids = torch.arange(start, start + seq, device=device)[None]
        exact = [
            np.asarray(t, dtype=np.float64) for t in rope.cos_sin(ids.cpu().numpy(), params, dtype="float64")
        ]
        x = torch.zeros(1, dtype=dtype, device=device)
        for name, module in (("hf", theirs), ("posenc", ours)):
            got = [t.float().cpu().numpy().astype(np.float64) for t in module(x, ids)]
            out[f"{name} {label}"] = float(max(np.abs(g - e).max() for g, e in zip(got, exact, strict=True)))
    return out


if __name__ == "__main__":
    raise SystemExit(main())
