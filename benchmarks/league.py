"""The league table of the audit guide (docs/audit.md), produced by posenc's own auditor (``posenc.audit``).

Each implementation is audited as its users run it, d_model 512 (Llama: head_dim 128, θ = 500000), positions
0 .. 2²⁰ - 1 (every position below 4096, then 4096 sampled per band): the largest absolute error up to 4k /
32k / 131k / 1M positions in float32 (and for Llama's module run in bfloat16, in bfloat16), then the usual
bfloat16 code, every position 0 .. 65535: distinct rows, first repeat and max error. "The usual bfloat16 code"
is each one's own arithmetic with bfloat16 tensors, as users get it: a module built under torch's default
dtype bfloat16 (``from_pretrained(torch_dtype=torch.bfloat16)`` builds modules so) or cast with
``.to(torch.bfloat16)``, bfloat16 timesteps (diffusers' Flux pipeline casts them to the latents' dtype), a
keras ``dtype="bfloat16"`` layer: where positions are formed in bfloat16, only 257 + 8·128 = 1281 of 65536
survive. Where the package takes position ids (diffusers, keras-hub, transformers' rotary) it is called
directly; where it only builds rows 0 .. L - 1 (the PyTorch tutorial and the Annotated Transformer, which
cannot be installed; positional-encodings and M2M100, which can) its published formula is evaluated at the
positions, and for the installed ones checked bit for bit against the package first (in both dtypes).

    python benchmarks/league.py            # prints the markdown table, writes benchmarks/results/league.json
    python benchmarks/league.py --doc      # also replaces the table in docs/audit.md
    python benchmarks/league.py --only posenc,tutorial --upto 4096 --bf16 2048 --json out.json   # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's posenc

import posenc
from posenc.analysis.hashes import earliest_equal, row_hashes

D, HEAD, THETA = 512, 128, 500000.0
UPTO = (4096, 32768, 131072, 1 << 20)
BF16 = 65536  # bfloat16 rows compared: positions 0 .. BF16 - 1, every one
RESULTS = Path(__file__).resolve().parent / "results" / "league.json"
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "audit.md"


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    """torch's default dtype set to ``dtype`` meanwhile, as ``from_pretrained(torch_dtype=...)`` sets it
    while it builds a model: tensors the code makes without a dtype (``torch.zeros``, ``arange * float``)
    take it."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def tutorial(positions: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """PyTorch tutorial (transformer_tutorial.py, 2023 text): int64 positions times div_term, made in the
    default dtype (float32, or bfloat16 when the model is built in it), sin/cos interleaved."""
    with default_dtype(dtype):
        position = torch.from_numpy(positions).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, D, 2) * (-math.log(10000.0) / D))
        out = torch.zeros(len(positions), D)
        out[:, 0::2], out[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return out


def annotated(positions: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The Annotated Transformer (2022): int64 positions times div_term in the default dtype (the tutorial's
    numbers)."""
    with default_dtype(dtype):
        position = torch.from_numpy(positions).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, D, 2) * -(math.log(10000.0) / D))
        out = torch.zeros(len(positions), D)
        out[:, 0::2], out[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return out


def positional_encodings(dtype: torch.dtype = torch.float32) -> tuple:
    """positional-encodings' PositionalEncoding1D (cast to ``dtype``): its inv_freq buffer, positions made in
    the buffer's dtype (its forward: ``arange(x, dtype=self.inv_freq.dtype)``), get_emb at the positions."""
    from positional_encodings.torch_encodings import PositionalEncoding1D, get_emb

    module = PositionalEncoding1D(D).to(dtype)

    def rows(positions: np.ndarray) -> torch.Tensor:
        pos = torch.from_numpy(positions).to(module.inv_freq.dtype)
        return get_emb(torch.einsum("i,j->ij", pos, module.inv_freq)).to(dtype)

    return rows, module(torch.zeros(1, 4096, D, dtype=dtype))[0]


def m2m100(dtype: torch.dtype = torch.float32) -> tuple:
    """fairseq / transformers M2M100 get_embedding (padding_idx 1): [sin | cos], shift 1, row 1 zero; made in
    float32 (its ``.float()``) and cast to the default dtype."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    def rows(positions: np.ndarray) -> torch.Tensor:
        half = D // 2
        emb = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
        emb = torch.from_numpy(positions).float().unsqueeze(1) * emb.unsqueeze(0)
        out = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
        out[torch.from_numpy(positions) == 1] = 0
        return out.to(dtype)

    with default_dtype(dtype):
        return rows, M2M100SinusoidalPositionalEmbedding.get_embedding(4096, D, padding_idx=1)


def diffusers_timesteps(positions: np.ndarray, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """diffusers get_timestep_embedding (defaults: [sin | cos], downscale_freq_shift 1), called directly
    with timesteps in ``dtype`` (its Flux pipeline casts them to the latents' dtype), cast to ``dtype``."""
    from diffusers.models.embeddings import get_timestep_embedding

    return get_timestep_embedding(torch.from_numpy(positions).to(dtype), D).to(dtype)


def keras_hub(dtype: str = "float32") -> object:
    """keras-hub SinePositionEncoding (torch backend, layer dtype ``dtype``), called with the positions cast
    to its compute dtype, as its call casts them when it makes them itself."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras_hub as kh

    layer = kh.layers.SinePositionEncoding(dtype=dtype)
    torch_dtype = getattr(torch, dtype)

    def rows(positions: np.ndarray) -> torch.Tensor:
        zeros = torch.zeros(1, len(positions), D, dtype=torch_dtype)
        out = layer(zeros, positions=torch.from_numpy(positions).to(torch_dtype))
        return torch.as_tensor(out.detach().cpu())[0]

    return rows


def llama(dtype: str) -> object:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=4096, num_attention_heads=32, head_dim=HEAD, rope_theta=THETA)
    return LlamaRotaryEmbedding(config), dtype


def _checked_both(label: str, build: Callable) -> tuple[Callable, Callable]:
    """The float32 and the bfloat16 rows that ``build()`` / ``build(BF16_TORCH)`` make, each checked against
    the library's own output (:func:`_checked`)."""
    rows, reference = build()
    _checked(label, rows, reference)
    low, reference = build(BF16_TORCH)
    _checked(f"{label} (bfloat16)", low, reference)
    return rows, low


def _checked(name: str, rows, reference: torch.Tensor) -> None:
    """The formula written here gives the package's own bits at positions 0..len(reference)-1."""
    mine = rows(np.arange(len(reference)))
    if not torch.equal(mine.float(), reference.float()):
        raise SystemExit(
            f"{name}: the formula here differs from the installed package; fix it before auditing"
        )


BF16_TORCH = torch.bfloat16


def entries(only: set[str] | None = None) -> list[tuple[str, str, object, object, str]]:
    """(key, name, how, float32 target, bfloat16 target: the usual bfloat16 code) of the implementations
    whose key is in ``only`` (all: None)."""
    want = lambda key: only is None or key in only  # noqa: E731
    found = []
    if want("tutorial"):
        bf16 = lambda p: tutorial(p, BF16_TORCH)  # noqa: E731
        found.append(("tutorial", "PyTorch tutorial", "formula; bf16: built in bf16", tutorial, bf16))
    if want("annotated"):
        bf16 = lambda p: annotated(p, BF16_TORCH)  # noqa: E731
        found.append(("annotated", "Annotated Transformer", "formula; bf16: built in bf16", annotated, bf16))
    if want("positional-encodings"):
        rows, low = _checked_both("positional-encodings", positional_encodings)
        how = "its buffer + get_emb, checked; bf16: .to(bf16)"
        found.append(("positional-encodings", "positional-encodings 6.x", how, rows, low))
    if want("m2m100"):
        rows, low = _checked_both("M2M100", m2m100)
        how = "formula, checked vs get_embedding; bf16: built in bf16"
        found.append(("m2m100", "fairseq / HF M2M100", how, rows, low))
    if want("diffusers"):
        bf16 = lambda p: diffusers_timesteps(p, BF16_TORCH)  # noqa: E731
        how = "imported; bf16: bf16 timesteps"
        found.append(("diffusers", "diffusers timesteps", how, diffusers_timesteps, bf16))
    if want("keras-hub"):
        how = "imported; bf16: dtype='bfloat16'"
        found.append(("keras-hub", "keras-hub SinePositionEncoding", how, keras_hub(), keras_hub("bfloat16")))
    if want("llama"):
        name = "HF Llama rotary (θ 5e5, head 128)"
        found.append(("llama", name, "imported; bf16: x in bf16", llama("float32"), llama("bfloat16")))
    if want("llama-bf16"):
        name = "HF Llama rotary, run in bf16 (errors in bf16)"
        found.append(("llama-bf16", name, "imported, x in bf16", llama("bfloat16"), llama("bfloat16")))
    if want("posenc"):
        low = lambda p: posenc.encode(p, D, dtype="bfloat16")  # noqa: E731
        found.append(("posenc", "posenc", "posenc.encode", lambda p: posenc.encode(p, D), low))
    return found


def _audit(target, **hints):
    if isinstance(target, tuple):  # a rotary module and the dtype to run it in
        module, dtype = target
        return posenc.audit(module, dtype=dtype, **hints)
    return posenc.audit(target, **hints)


def _collisions(target, count: int) -> tuple[int, tuple[int, int] | None]:
    """Distinct rows among positions 0 .. count - 1 (every one, bits of each row hashed, 8192 at a time) and
    the first repeat (position, earlier position), or None."""
    hashes = []
    for start in range(0, count, 8192):
        positions = np.arange(start, min(count, start + 8192), dtype=np.int64)
        if isinstance(target, tuple):  # a rotary module and the dtype it runs in
            module, dtype = target
            x = torch.zeros(1, 1, dtype=getattr(torch, dtype))
            with torch.no_grad():
                cos, sin = module(x, torch.from_numpy(positions)[None])
            values = torch.cat([cos, sin], dim=-1)[0]
        else:
            values = target(positions)
        hashes.append(row_hashes(posenc.auditor.targets.values_of(values)[0]))
    earliest, distinct = earliest_equal(np.concatenate(hashes))
    repeats = np.flatnonzero(earliest != np.arange(len(earliest)))
    return int(distinct), (None if not len(repeats) else (int(repeats[0]), int(earliest[repeats[0]])))


def measure(only: set[str] | None = None, upto: int = UPTO[-1], bf16: int = BF16) -> list[dict]:
    """The league's records: each implementation audited over positions 0 .. upto - 1 (its float32 target),
    and its usual bfloat16 code over 0 .. bf16 - 1, every position."""
    started = time.perf_counter()
    records = []
    for key, name, how, f32, low_target in entries(only):
        report = _audit(f32, positions=upto)
        record = {
            "key": key,
            "name": name,
            "how": how,
            "dtype": report.dtype,
            "variant": report.variant.name,
            "max_error": {str(n): report.max_error(n) for n in UPTO if n <= upto},
            "first_over": {f"{t:g}": p for t, p in report.measurement.first_over.items()},
            "findings": [f.text for f in report.findings],
        }
        low = _audit(low_target, positions=bf16)
        record["bf16_rows"] = bf16
        record["bf16_distinct"], record["bf16_first_repeat"] = _collisions(low_target, bf16)
        record["bf16_max_error"] = low.max_error()
        records.append(record)
        print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated keys (tutorial, annotated, ..., posenc); default all")
    parser.add_argument("--upto", type=int, default=UPTO[-1], help="positions audited in float32")
    parser.add_argument("--bf16", type=int, default=BF16, help="bfloat16 positions, every one")
    parser.add_argument("--json", type=Path, default=RESULTS, help="where the records go")
    parser.add_argument("--doc", action="store_true", help="replace the table in docs/audit.md")
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    started = time.perf_counter()
    records = measure(only, args.upto, args.bf16)
    args.json.parent.mkdir(exist_ok=True, parents=True)
    document = {"d_model": D, "upto": args.upto, "bf16": args.bf16, "records": records}
    args.json.write_text(json.dumps(document, indent=1, default=str) + "\n")
    table = markdown(records, args.bf16)
    print(table)
    if args.doc:
        write_doc(table)
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)


def write_doc(table: str) -> None:
    """Replace the league table (the markdown table after "The league, produced by the auditor") in
    docs/audit.md."""
    text = GUIDE.read_text()
    start = text.index("| implementation | how audited |")
    end = text.index("\n\n", start)
    GUIDE.write_text(text[:start] + table + text[end:])


def markdown(records: list[dict], bf16: int = BF16) -> str:
    lines = [
        "| implementation | how audited | max error ≤ 4k | ≤ 32k | ≤ 131k | ≤ 1M "
        f"| usual bf16 code: distinct rows of 0..{bf16 - 1} (first repeat) | bf16: max error | finding |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        errors = " | ".join(
            f"{r['max_error'][str(n)]:.2g}" if str(n) in r["max_error"] else "-" for n in UPTO
        )
        repeat = r["bf16_first_repeat"]
        low = f"{r['bf16_distinct']:,} ({'none' if repeat is None else f'{repeat[0]} = {repeat[1]}'})"
        low += f" | {r['bf16_max_error']:.2g}"
        finding = "; ".join(f.split(":")[0] for f in r["findings"]) or "none"
        lines.append(f"| {r['name']} | {r['how']} | {errors} | {low} | {finding} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
