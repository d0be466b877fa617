"""posenc compiled and exported on the CPU against posenc eager, side by side in one process: does
``torch.compile`` or ``torch.export`` cost anything?

    python benchmarks/compiled.py [--repeat 5] [--dtype float32|bfloat16] [--json FILE] [--doc]

Each case runs eager, under ``torch.compile(fullgraph=True)`` and as the module of ``torch.export.export``
with a dynamic length, the three alternating per repeat; the medians are reported as
ratios compiled / eager and exported / eager (bar: ≤ 1.1). On the CPU ``torch.ops.posenc.exact`` and
``torch.ops.posenc.rotary`` run the C core, as an eager call does (their CPU kernels), so a graph holds one
node where it would otherwise hold the portable algorithm's thousands of operations per value. The cases:

- ``SinusoidalPositionalEncoding(256)`` on x (4, 1000, 256): its default positions, position ids, an offset;
- ``Timesteps(256)`` of 1000 real timesteps;
- ``RotaryEmbedding`` (Llama 3.1's: llama3 scaling, head_dim 64) of position ids (1, 2048);
- ``posenc.torch.apply_rotary`` of q and k (1, 8, 2048, 64) by those cos/sin;
- a patched Llama (2 layers, hidden 256, head_dim 64) compiled against the same model unpatched compiled: a
  prefill of 2048 tokens and a decode step (bar: ≤ 1.05).

Two references, without a bar, measured the same way: transformers' own ``LlamaRotaryEmbedding`` (the code
posenc's replaces) on the same positions, and a module that only returns a slice of its input — what any
compiled or exported call costs before it does anything (torch's guards and wrappers: a few hundredths of
a millisecond, which calls of under a millisecond show as a ratio).

Where the time goes, for every case with a bar: in the same alternation, a compiled and an exported
module on the same inputs that only returns a slice of one — torch's fixed cost of such a call, as it is
after other work has run (its guards and wrappers out of the caches: ~0.06–0.2 ms here, ~0.03 ms called in a
tight loop). What a compiled or exported call costs beyond the eager call and that fixed cost is posenc's
share; its bar: ≤ 0.1 × the eager time, what the ratio's bar would be with torch's fixed cost left out.

Results go to ``--json`` (default ``benchmarks/results/compiled.json``); ``--doc`` also writes the table of
``docs/performance.md`` between its ``<!-- compiled:start -->`` and ``<!-- compiled:end -->`` lines (another
dtype's: ``<!-- compiled-bfloat16:start -->`` ...).
"""

from __future__ import annotations

import copy
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _common import parser, print_targets, target

import posenc.torch as pt

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "performance.md"


def _alternate(calls: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The median seconds of each call, run in turn (the order rotating per repeat) after two warm-ups."""
    for call in calls.values():
        call()
        call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            began = time.perf_counter()
            calls[name]()
            times[name].append(time.perf_counter() - began)
    return {name: statistics.median(values) for name, values in times.items()}


class _First(torch.nn.Module):
    """A module that only returns a slice of its first input: a compiled call's cost before it does
    anything, on the same inputs (the same guards)."""

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return args[0][:1]


def _exported(module: torch.nn.Module, args: tuple, dynamic: dict | None) -> Callable[..., object]:
    return torch.export.export(module, args, dynamic_shapes=dynamic).module()


def _cases(dtype: torch.dtype) -> list[tuple[str, torch.nn.Module, tuple, dict | None, bool]]:
    """(name, module, its arguments, the dynamic shapes of its export, whether the ratio has a bar)."""
    length = torch.export.Dim("length", min=2, max=65536)
    x = torch.randn(4, 1000, 256).to(dtype)
    ids = torch.arange(1000).expand(4, -1).contiguous()
    encoding = pt.SinusoidalPositionalEncoding(256, batch_first=True).to(dtype).eval()

    class Offset(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = pt.SinusoidalPositionalEncoding(256, batch_first=True).to(dtype).eval()

        def forward(self, x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
            return self.inner(x, offset=offset)

    timesteps, moments = pt.Timesteps(256, True, 0.0), torch.rand(1000) * 1000
    config = {
        "head_dim": 64,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    rotary = pt.RotaryEmbedding(config)
    rope_ids = torch.arange(2048)[None]
    step_ids = torch.tensor([[2047]])
    q, k = (torch.randn(1, 8, 2048, 64).to(dtype) for _ in range(2))
    cos, sin = rotary(q, rope_ids)

    class Apply(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
            return pt.apply_rotary(q, k, cos, sin)

    class Nothing(torch.nn.Module):
        def forward(self, x: torch.Tensor, position_ids: torch.Tensor):
            return x[:, :1]

    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    usual = LlamaRotaryEmbedding(LlamaConfig(**config, hidden_size=512, num_attention_heads=8))
    rope_dynamic = {"x": {2: length}, "position_ids": {1: length}}
    n = length
    return [
        ("module, default positions (4, 1000)", encoding, (x,), {"x": {1: length}}, True),
        (
            "module, position ids (4, 1000)",
            encoding,
            (x, ids),
            {"x": {1: length}, "positions": {1: length}},
            True,
        ),
        (
            "module, offsets (4,)",
            Offset(),
            (x, torch.tensor([0, 5, 9, 2000])),
            {"x": {1: length}, "offset": None},
            True,
        ),
        ("Timesteps, 1000 timesteps", timesteps, (moments,), {"timesteps": {0: n}}, True),
        ("rotary cos/sin, (1, 2048)", rotary, (q, rope_ids), rope_dynamic, True),
        ("rotary cos/sin, a decode step (1, 1)", rotary, (q, step_ids), None, True),
        ("apply_rotary, q/k (1, 8, 2048, 64)", Apply(), (q, k, cos, sin), None, True),
        ("reference: transformers' rotary, (1, 2048)", usual, (q, rope_ids), rope_dynamic, False),
        ("reference: transformers' rotary, a decode step", usual, (q, step_ids), None, False),
        ("reference: a module returning a slice", Nothing(), (q, step_ids), None, False),
    ]


def _llama(dtype: torch.dtype) -> tuple[torch.nn.Module, torch.nn.Module]:
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=1024,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    plain = transformers.LlamaForCausalLM(config).to(dtype).eval()
    patched = copy.deepcopy(plain)
    pt.patch(patched)
    return plain, patched


def main(argv: list[str] | None = None) -> int:
    options = parser(
        __doc__, repeat=5, dtype="float32", json=Path(__file__).parent / "results" / "compiled.json"
    )
    options.add_argument("--doc", action="store_true", help="also write docs/performance.md's table")
    args = options.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    rows, targets = [], []
    with torch.no_grad():
        for name, module, call_args, dynamic, bar in _cases(dtype):
            compiled = torch.compile(module, fullgraph=True)
            exported = _exported(module, call_args, dynamic)
            want = module(*call_args)
            for other in (compiled(*call_args), exported(*call_args)) if bar else ():  # the same bits
                pairs = zip(other, want, strict=True) if isinstance(want, tuple) else [(other, want)]
                assert all(torch.equal(a, b) for a, b in pairs), name
            calls = {
                "eager": lambda m=module, a=call_args: m(*a),
                "compile": lambda m=compiled, a=call_args: m(*a),
                "export": lambda m=exported, a=call_args: m(*a),
            }
            if bar:  # where the time goes: torch's fixed cost of a compiled and an exported call
                nothing = (torch.compile(_First(), fullgraph=True), _exported(_First(), call_args, None))
                calls["compile nothing"] = lambda m=nothing[0], a=call_args: m(*a)
                calls["export nothing"] = lambda m=nothing[1], a=call_args: m(*a)
            times = _alternate(calls, args.repeat)
            rows.append({"case": name, **{k: v * 1e3 for k, v in times.items()}})
            for mode in ("compile", "export") if bar else ():
                targets.append(target(f"{name}: {mode} / eager", times[mode] / times["eager"], "<= 1.1"))
                share = (times[mode] - times["eager"] - times[f"{mode} nothing"]) / times["eager"]
                targets.append(target(f"{name}: {mode}, posenc's share / eager", share, "<= 0.1"))
        plain, patched = _llama(dtype)
        tokens = torch.randint(0, 1024, (1, 2048), generator=torch.Generator().manual_seed(1))
        plain_c, patched_c = torch.compile(plain), torch.compile(patched)
        times = _alternate(
            {"plain": lambda: plain_c(tokens), "patched": lambda: patched_c(tokens)}, args.repeat
        )
        rows.append(
            {
                "case": "Llama prefill 2048, compiled",
                "unpatched": times["plain"] * 1e3,
                "patched": times["patched"] * 1e3,
            }
        )
        targets.append(
            target(
                "Llama prefill compiled: patched / unpatched", times["patched"] / times["plain"], "<= 1.05"
            )
        )
        cache = {}
        for name, model in (("plain", plain_c), ("patched", patched_c)):
            out = model(tokens[:, :2047], use_cache=True)
            cache[name] = out.past_key_values
        step = tokens[:, 2047:]
        position = torch.tensor([[2047]])

        def decode(name: str, model: Callable[..., object]) -> Callable[[], object]:
            """A step on a fresh copy of the prefilled cache each call, the copies made before the clock."""
            fresh = [copy.deepcopy(cache[name]) for _ in range(4 * args.repeat + 2)]
            return lambda: model(step, position_ids=position, past_key_values=fresh.pop())

        times = _alternate(
            {"plain": decode("plain", plain_c), "patched": decode("patched", patched_c)}, 4 * args.repeat
        )
        rows.append(
            {
                "case": "Llama decode step, compiled",
                "unpatched": times["plain"] * 1e3,
                "patched": times["patched"] * 1e3,
            }
        )
        targets.append(
            target("Llama decode compiled: patched / unpatched", times["patched"] / times["plain"], "<= 1.05")
        )
    for row in rows:
        cells = ", ".join(f"{k} {v:.2f} ms" for k, v in row.items() if k != "case")
        print(f"{row['case']:42} {cells}")
    print_targets(targets)
    record = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "date": time.strftime("%Y-%m-%d"),
        "dtype": args.dtype,
        "rows": rows,
        "targets": [list(t) for t in targets],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    if args.doc:
        _write_doc(record)
    return 0


def _write_doc(record: dict) -> None:
    """docs/performance.md's table of this run, between its markers."""
    from posenc.atomic import atomic_output

    given = "" if record["dtype"] == "float32" else f" --dtype {record['dtype']}"
    lines = [
        f"CPU, {record['machine']}, {record['date']}, {record['dtype']} "
        f"(`python benchmarks/compiled.py --doc{given}`):",
        "",
        "| case | eager | `torch.compile` | `torch.export` | compile / eager | export / eager |",
        "|---|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        if "eager" in row:
            lines.append(
                f"| {row['case']} | {row['eager']:.3f} ms | {row['compile']:.3f} ms | "
                f"{row['export']:.3f} ms | {row['compile'] / row['eager']:.2f}× | "
                f"{row['export'] / row['eager']:.2f}× |"
            )
    lines += [
        "",
        "| where the time goes | eager | a compiled call doing nothing | an exported call doing nothing "
        "| posenc's share, compiled | posenc's share, exported |",
        "|---|---|---|---|---|---|",
    ]
    for row in record["rows"]:
        if "compile nothing" in row:
            share = [row[mode] - row["eager"] - row[f"{mode} nothing"] for mode in ("compile", "export")]
            lines.append(
                f"| {row['case']} | {row['eager']:.3f} ms | {row['compile nothing']:.3f} ms | "
                f"{row['export nothing']:.3f} ms | {share[0]:+.3f} ms ({share[0] / row['eager']:+.0%}) | "
                f"{share[1]:+.3f} ms ({share[1] / row['eager']:+.0%}) |"
            )
    lines += ["", "| compiled model | unpatched | patched | patched / unpatched |", "|---|---|---|---|"]
    for row in record["rows"]:
        if "patched" in row:
            lines.append(
                f"| {row['case']} | {row['unpatched']:.1f} ms | {row['patched']:.1f} ms | "
                f"{row['patched'] / row['unpatched']:.3f}× |"
            )
    text = PAGE.read_text(encoding="utf-8")
    key = "compiled" if record["dtype"] == "float32" else f"compiled-{record['dtype']}"  # a table per dtype
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    with atomic_output(PAGE, binary=False) as out:
        out.write(f"{head}{start}\n" + "\n".join(lines) + f"\n{end}{tail}")


if __name__ == "__main__":
    raise SystemExit(main())
