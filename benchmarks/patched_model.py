"""A patched model against the same model unpatched, side by side in one process: does
``posenc.torch.patch(model)`` cost anything?

    python benchmarks/patched_model.py [--layers 2] [--hidden 2048] [--prefill 2048] [--decode 16]
                                       [--repeat 5] [--dtype float32|bfloat16] [--fused] [--json FILE]

A Llama-shaped stack built from a config with random weights (Llama 3.1's rotary: llama3 scaling, base
500000; head_dim 128, hidden ``--hidden``, ``--layers`` layers, a vocabulary of 1024), in ``--dtype``, on
the CPU: a prefill of ``--prefill`` tokens (batch 1), and ``--decode`` single-token decode steps with a KV
cache after it. Two copies of the model with the same weights, one patched, are timed alternately (prefill
against prefill, step against step, which goes first alternating per repeat), ``--repeat`` times; the
medians are reported as ratios patched / unpatched (bar: ≤ 1.05). Run to run, single medians on a shared
2-core machine move by a few percent. ``--fused``: ``patch(model, fused=True)``, the attention modules'
rotary apply too (posenc's exact apply: float32, rounded once); without it, ``patch``'s default (on the
CPU: the model's own apply).
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from _common import parser, print_targets, target

import posenc.torch as pt


def main(argv: list[str] | None = None) -> int:
    options = parser(
        __doc__, repeat=5, dtype="float32", json=Path(__file__).parent / "results" / "patched_model.json"
    )
    options.add_argument("--layers", type=int, default=2)
    options.add_argument("--hidden", type=int, default=2048)
    options.add_argument("--prefill", type=int, default=2048)
    options.add_argument("--decode", type=int, default=16)
    options.add_argument("--fused", action="store_true", help="patch(model, fused=True)")
    args = options.parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=args.hidden,
        intermediate_size=int(args.hidden * 2.75),
        num_hidden_layers=args.layers,
        num_attention_heads=args.hidden // 128,
        num_key_value_heads=max(1, args.hidden // 512),
        head_dim=128,
        max_position_embeddings=131072,
        rope_theta=500000.0,
        rope_scaling={
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    )
    dtype = getattr(torch, args.dtype)
    unpatched = transformers.LlamaForCausalLM(config).to(dtype).eval()
    patched = copy.deepcopy(unpatched)  # the same weights
    pt.patch(patched, fused=True if args.fused else None)
    models = {"unpatched": unpatched, "patched": patched}
    tokens = torch.randint(0, 1024, (1, args.prefill), generator=torch.Generator().manual_seed(1))
    rows: dict[str, dict[str, list[float]]] = {"prefill": {}, "decode step": {}}
    with torch.no_grad():
        for model in models.values():  # warm-up
            model(tokens, use_cache=True)
        for repeat in range(args.repeat):
            order = list(models) if repeat % 2 == 0 else list(models)[::-1]  # neither always goes first
            caches = {}
            for state in order:
                began = time.perf_counter()
                out = models[state](tokens, use_cache=True)
                rows["prefill"].setdefault(state, []).append(time.perf_counter() - began)
                caches[state] = out.past_key_values
            step = tokens[:, -1:]
            for _ in range(args.decode):  # single-token steps, the two models alternating
                for state in order:
                    began = time.perf_counter()
                    models[state](step, past_key_values=caches[state], use_cache=True)
                    rows["decode step"].setdefault(state, []).append(time.perf_counter() - began)
    results, targets = {}, []
    fused = ", fused" if args.fused else ""
    print(f"{type(unpatched).__name__}, {args.layers} layers, hidden {args.hidden}, {args.dtype}, cpu{fused}")
    for name, states in rows.items():
        base, ours = statistics.median(states["unpatched"]), statistics.median(states["patched"])
        results[name] = {"unpatched_s": base, "patched_s": ours, "ratio": ours / base}
        print(
            f"  {name:12} unpatched {base * 1e3:9.2f} ms   patched {ours * 1e3:9.2f} ms   {ours / base:5.3f}x"
        )
        targets.append(target(f"{name} ({args.dtype}{fused}), patched / unpatched", ours / base, "<= 1.05"))
    print_targets(targets)
    document = {
        "machine": {
            "platform": platform.platform(),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
        "settings": vars(args) | {"json": str(args.json)},
        "results": results,
        "targets": [{"name": n, "ratio": r, "bar": b, "met": m} for n, r, b, m in targets],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
