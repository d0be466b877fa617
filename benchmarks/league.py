"""The league table of the README's "Audit" section, produced by posenc's own auditor (``posenc.audit``).

Each implementation is audited as its users run it, d_model 512 (Llama: head_dim 128, θ = 500000), positions
0 .. 2²⁰ - 1 (every position below 4096, then 4096 sampled per band): the largest absolute error up to 4k /
32k / 131k / 1M positions in float32, and in bfloat16 the distinct rows among positions 0..32767 and the first
repeat (the float32 values cast to bfloat16, as ``model.to(torch.bfloat16)`` casts a stored table; Llama's
module in bfloat16 itself). Where the package takes position ids (diffusers, keras-hub, transformers'
rotary) it is called directly; where it only builds rows 0 .. L - 1 (the PyTorch tutorial and the Annotated
Transformer, which cannot be installed; positional-encodings and M2M100, which can) its published formula is
evaluated at the positions, and for the installed ones checked bit for bit against the package first.

    python benchmarks/league.py            # prints the markdown table, writes benchmarks/results/league.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))  # this checkout's posenc

import posenc
from posenc.see.hashes import earliest_equal, row_hashes

D, HEAD, THETA = 512, 128, 500000.0
UPTO = (4096, 32768, 131072, 1 << 20)
BF16 = 32768  # bfloat16 rows compared: positions 0 .. BF16 - 1, every one
RESULTS = Path(__file__).resolve().parent / "results" / "league.json"


def tutorial(positions: np.ndarray) -> torch.Tensor:
    """PyTorch tutorial: float32 positions × exp(float32) frequencies, sin/cos in float32, interleaved."""
    div_term = torch.exp(torch.arange(0, D, 2).float() * (-math.log(10000.0) / D))
    angle = torch.from_numpy(positions).float()[:, None] * div_term
    out = torch.zeros(len(positions), D)
    out[:, 0::2], out[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return out


def annotated(positions: np.ndarray) -> torch.Tensor:
    """The Annotated Transformer (2022): int64 positions times float32 div_term (the tutorial's numbers)."""
    div_term = torch.exp(torch.arange(0, D, 2) * -(math.log(10000.0) / D))
    angle = torch.from_numpy(positions)[:, None] * div_term
    out = torch.zeros(len(positions), D)
    out[:, 0::2], out[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return out


def positional_encodings() -> tuple:
    """positional-encodings' PositionalEncoding1D: its inv_freq buffer and get_emb at the positions."""
    from positional_encodings.torch_encodings import PositionalEncoding1D, get_emb

    module = PositionalEncoding1D(D)

    def rows(positions: np.ndarray) -> torch.Tensor:
        pos = torch.from_numpy(positions).to(module.inv_freq.dtype)
        return get_emb(torch.einsum("i,j->ij", pos, module.inv_freq))

    return rows, module(torch.zeros(1, 4096, D))[0]


def m2m100() -> tuple:
    """fairseq / transformers M2M100 get_embedding (padding_idx 1): [sin | cos], shift 1, row 1 zero."""
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    def rows(positions: np.ndarray) -> torch.Tensor:
        half = D // 2
        emb = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
        emb = torch.from_numpy(positions).float().unsqueeze(1) * emb.unsqueeze(0)
        out = torch.cat([torch.sin(emb), torch.cos(emb)], dim=1)
        out[torch.from_numpy(positions) == 1] = 0
        return out

    return rows, M2M100SinusoidalPositionalEmbedding.get_embedding(4096, D, padding_idx=1)


def diffusers_timesteps(positions: np.ndarray) -> torch.Tensor:
    """diffusers get_timestep_embedding (defaults: [sin | cos], downscale_freq_shift 1), called directly."""
    from diffusers.models.embeddings import get_timestep_embedding

    return get_timestep_embedding(torch.from_numpy(positions), D)


def keras_hub() -> object:
    """keras-hub SinePositionEncoding, called with the positions (torch backend)."""
    os.environ.setdefault("KERAS_BACKEND", "torch")
    import keras_hub as kh

    layer = kh.layers.SinePositionEncoding()

    def rows(positions: np.ndarray) -> torch.Tensor:
        zeros = torch.zeros(1, len(positions), D)
        out = layer(zeros, positions=torch.from_numpy(positions).float())
        return torch.as_tensor(np.asarray(out.detach().cpu()))[0]

    return rows


def llama(dtype: str) -> object:
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(hidden_size=4096, num_attention_heads=32, head_dim=HEAD, rope_theta=THETA)
    return LlamaRotaryEmbedding(config), dtype


def _checked(name: str, rows, reference: torch.Tensor) -> None:
    """The formula written here gives the package's own bits at positions 0..len(reference)-1."""
    mine = rows(np.arange(len(reference)))
    if not torch.equal(mine.float(), reference.float()):
        raise SystemExit(
            f"{name}: the formula here differs from the installed package; fix it before auditing"
        )


def _bf16(rows):
    return lambda positions: rows(positions).to(torch.bfloat16)


def entries() -> list[tuple[str, str, object, object, dict]]:
    """(name, how, float32 target, bfloat16 target, hints)."""
    found = [
        ("PyTorch tutorial", "formula", tutorial, _bf16(tutorial), {}),
        ("Annotated Transformer", "formula", annotated, _bf16(annotated), {}),
    ]
    rows, reference = positional_encodings()
    _checked("positional-encodings", rows, reference)
    found.append(("positional-encodings 6.x", "its buffer + get_emb, checked", rows, _bf16(rows), {}))
    rows, reference = m2m100()
    _checked("M2M100", rows, reference)
    found.append(("fairseq / HF M2M100", "formula, checked vs get_embedding", rows, _bf16(rows), {}))
    found.append(("diffusers timesteps", "imported", diffusers_timesteps, _bf16(diffusers_timesteps), {}))
    keras = keras_hub()
    found.append(("keras-hub SinePositionEncoding", "imported", keras, _bf16(keras), {}))
    found.append(("HF Llama rotary (θ 5e5, head 128)", "imported", llama("float32"), llama("bfloat16"), {}))
    found.append(("posenc", "posenc.encode", lambda p: posenc.encode(p, D), None, {}))
    return found


def _audit(target, **hints):
    if isinstance(target, tuple):  # a rotary module and the dtype to run it in
        module, dtype = target
        return posenc.audit(module, dtype=dtype, **hints)
    return posenc.audit(target, **hints)


def main() -> None:
    started = time.perf_counter()
    records = []
    for name, how, f32, bf16, hints in entries():
        report = _audit(f32, positions=1 << 20, **hints)
        record = {
            "name": name,
            "how": how,
            "variant": report.variant.name,
            "max_error": {str(n): report.max_error(n) for n in UPTO},
            "findings": [f.text for f in report.findings],
        }
        if bf16 is None:
            bf16 = lambda p: posenc.encode(p, D, dtype="bfloat16")  # noqa: E731
        low = _audit(bf16, positions=BF16, samples=BF16, **hints)
        m = low.measurement
        record["bf16_distinct"] = int(earliest_equal(row_hashes(m.values))[1])
        record["bf16_first_repeat"] = m.first_repeat
        record["bf16_max_error"] = low.max_error()
        record["bf16_exact_first_repeat"] = m.exact_repeat
        records.append(record)
        print(f"  {name}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"d_model": D, "records": records}, indent=1, default=str) + "\n")
    print(markdown(records))
    print(f"\n({time.perf_counter() - started:.0f} s)", file=sys.stderr)


def markdown(records: list[dict]) -> str:
    lines = [
        "| implementation | how audited | max error ≤ 4k | ≤ 32k | ≤ 131k | ≤ 1M "
        "| bf16: distinct rows of 0..32767 (first repeat) | bf16: max error ≤ 32k | finding |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        errors = " | ".join(f"{r['max_error'][str(n)]:.2g}" for n in UPTO)
        repeat = r["bf16_first_repeat"]
        bf16 = f"{r['bf16_distinct']:,} ({'none' if repeat is None else f'{repeat[0]} = {repeat[1]}'})"
        bf16 += f" | {r['bf16_max_error']:.2g}"
        finding = r["findings"][0] if r["findings"] else "none"
        lines.append(f"| {r['name']} | {r['how']} | {errors} | {bf16} | {finding} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
