"""On a CUDA machine: a Hugging Face Llama built from a config (random weights, nothing downloaded) with its
``rotary_emb`` replaced by posenc's exact :class:`posenc.torch.RotaryEmbedding`, on the GPU: the patched
model's forward against the unpatched one (logits within the model's own error), greedy ``generate`` with a
KV cache (the same tokens for 16 steps), a decode step under ``torch.cuda.set_sync_debug_mode("error")`` and
the forward under ``torch.compile``. Writes ``$OUT/gpu_hf_model.json`` (or ./gpu_hf_model.json).

    PYTHONPATH=src python3 scripts/gpu_hf_model.py
    PYTHONPATH=src python3 scripts/gpu_hf_model.py --device cpu   # a dry run
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
import traceback
from pathlib import Path

import torch
import transformers

import posenc.torch as pt

#: A small Llama 3.1-shaped model: llama3 rope scaling, base 500000, 4 layers.
CONFIG = {
    "vocab_size": 1024,
    "hidden_size": 512,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}


def step(name: str, report: dict, fn) -> None:
    """Run one check; record its result or its failure (never fatal)."""
    began = time.perf_counter()
    try:
        report[name] = fn()
    except Exception as error:  # a failed check is recorded and the run goes on
        report[name] = {"status": f"FAILED {type(error).__name__}: {str(error)[:300]}"}
        traceback.print_exc()
    report[name] = {**report[name], "seconds": round(time.perf_counter() - began, 2)}
    print(name, report[name], flush=True)


def main(where: str) -> dict:
    device = torch.device(where)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(**CONFIG)
    theirs = transformers.LlamaForCausalLM(config).to(device).eval()
    ours = copy.deepcopy(theirs)
    ours.model.rotary_emb = pt.RotaryEmbedding(config).to(device)  # the one-line patch
    ids = torch.randint(0, config.vocab_size, (2, 96), device=device, generator=None)
    report: dict = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
    }

    def forward() -> dict:
        with torch.no_grad():
            a = theirs(ids).logits.double()
            b = ours(ids).logits.double()
            # the model's own error: the same model's logits in float32 vs float64 (fp64 copy)
            wide = copy.deepcopy(theirs).double()
            wide.model.rotary_emb = pt.RotaryEmbedding(config).to(device)
            exact = wide(ids).logits
        return {
            "max_abs_patched_vs_unpatched": float((a - b).abs().max()),
            "max_abs_unpatched_vs_float64": float((a - exact).abs().max()),
            "max_abs_patched_vs_float64": float((b - exact).abs().max()),
            "finite": bool(torch.isfinite(b).all()),
        }

    def generate() -> dict:
        kwargs = {"max_new_tokens": 16, "do_sample": False, "use_cache": True, "pad_token_id": 0}
        with torch.no_grad():
            a = theirs.generate(ids[:, :32], **kwargs)
            b = ours.generate(ids[:, :32], **kwargs)
        return {"same_greedy_tokens": bool(torch.equal(a, b)), "tokens": int(b.shape[1] - 32)}

    def decode_sync() -> dict:
        if device.type != "cuda":
            return {"status": "CUDA only"}
        cache = transformers.DynamicCache()
        with torch.no_grad():
            out = ours(ids[:, :32], past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1:].argmax(-1)
            positions = torch.full((2, 1), 32, device=device)
            ours.model.rotary_emb(out.logits, positions)  # warm
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                ours.model.rotary_emb(out.logits, positions)
                rotary = "no host sync"
            except RuntimeError as error:
                rotary = "HOST SYNC: " + str(error).splitlines()[0][:160]
            finally:
                torch.cuda.set_sync_debug_mode("default")
            ours(nxt, past_key_values=cache, use_cache=True)
        return {"rotary_emb decode step": rotary}

    def compiled() -> dict:
        model = torch.compile(ours)
        with torch.no_grad():
            began = time.perf_counter()
            got = model(ids).logits
            first = time.perf_counter() - began
            want = ours(ids).logits
        return {
            "first_call_s": round(first, 2),
            "max_abs_compiled_vs_eager": float((got.double() - want.double()).abs().max()),
        }

    def timed() -> dict:
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        out = {}
        with torch.no_grad():
            for name, model in (("unpatched", theirs), ("patched", ours)):
                for _ in range(3):
                    model(ids)
                sync()
                began = time.perf_counter()
                for _ in range(10):
                    model(ids)
                sync()
                out[f"{name}_forward_ms"] = (time.perf_counter() - began) / 10 * 1e3
        out["ratio"] = out["patched_forward_ms"] / out["unpatched_forward_ms"]
        return out

    for name, fn in (
        ("forward", forward),
        ("generate", generate),
        ("decode_sync", decode_sync),
        ("compile", compiled),
        ("forward_time", timed),
    ):
        step(name, report, fn)
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args()
    document = main(args.device)
    path = Path(os.environ.get("OUT", ".")) / "gpu_hf_model.json"
    path.write_text(json.dumps(document, indent=2))
    print(f"wrote {path}")
