"""On a CUDA machine: a Hugging Face Llama built from a config (random weights, nothing downloaded), patched
by ``posenc.torch.patch`` on the GPU twice: ``fused=False`` (posenc's exact RotaryEmbedding, the model's own
apply) and the CUDA default (``fused`` on: every attention module's rotary apply is posenc's exact apply, the
fused Triton kernel). For each: the forward against the unpatched one (logits within the model's own
error), greedy ``generate`` with a KV cache (the same tokens for 16 steps), a whole decode step under
``torch.cuda.set_sync_debug_mode("error")``, the forward under ``torch.compile``, the forward's time; for
the fused model, whether the kernel ran (``posenc.torch.kernel_status()``). Writes
``$OUT/gpu_hf_model.json`` (or ./gpu_hf_model.json).

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
    unfused, ours = copy.deepcopy(theirs), copy.deepcopy(theirs)
    report: dict = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "patch fused=False": pt.patch(unfused, fused=False).as_text(),
        "patch (default)": pt.patch(
            ours, fused=True if device.type == "cpu" else None
        ).as_text(),  # CUDA: fused
    }
    ids = torch.randint(0, config.vocab_size, (2, 96), device=device, generator=None)

    patched = {"unfused": unfused, "fused": ours}

    def forward() -> dict:
        out = {}
        with torch.no_grad():
            a = theirs(ids).logits.double()
            # the model's own error: the same model's logits in float32 vs float64 (a float64 copy)
            wide = copy.deepcopy(unfused).double()
            exact = wide(ids).logits
            out["max_abs_unpatched_vs_float64"] = float((a - exact).abs().max())
            for name, model in patched.items():
                b = model(ids).logits.double()
                out[f"max_abs_{name}_vs_unpatched"] = float((a - b).abs().max())
                out[f"max_abs_{name}_vs_float64"] = float((b - exact).abs().max())
                out[f"{name}_finite"] = bool(torch.isfinite(b).all())
        out["kernel_status"] = pt.kernel_status()
        return out

    def generate() -> dict:
        kwargs = {"max_new_tokens": 16, "do_sample": False, "use_cache": True, "pad_token_id": 0}
        with torch.no_grad():
            a = theirs.generate(ids[:, :32], **kwargs)
            got = {name: model.generate(ids[:, :32], **kwargs) for name, model in patched.items()}
        return {f"{name}_same_greedy_tokens": bool(torch.equal(a, b)) for name, b in got.items()}

    def decode_sync() -> dict:
        if device.type != "cuda":
            return {"status": "CUDA only"}
        out = {}
        for name, model in patched.items():
            cache = transformers.DynamicCache()
            with torch.no_grad():
                first = model(ids[:, :32], past_key_values=cache, use_cache=True)
                nxt = first.logits[:, -1:].argmax(-1)
                model(nxt, past_key_values=copy.deepcopy(cache), use_cache=True)  # warm: probes, compiles
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode("error")
                try:
                    model(nxt, past_key_values=cache, use_cache=True)
                    out[f"{name} decode step"] = "no host sync"
                except RuntimeError as error:
                    out[f"{name} decode step"] = "HOST SYNC: " + str(error).splitlines()[0][:200]
                finally:
                    torch.cuda.set_sync_debug_mode("default")
        return out

    def compiled() -> dict:
        out = {}
        for name, model in patched.items():
            fast = torch.compile(model)
            with torch.no_grad():
                began = time.perf_counter()
                got = fast(ids).logits
                out[f"{name}_first_call_s"] = round(time.perf_counter() - began, 2)
                want = model(ids).logits
            out[f"{name}_max_abs_compiled_vs_eager"] = float((got.double() - want.double()).abs().max())
        return out

    def timed() -> dict:
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        out = {}
        with torch.no_grad():
            for name, model in (("unpatched", theirs), *patched.items()):
                for _ in range(3):
                    model(ids)
                sync()
                began = time.perf_counter()
                for _ in range(10):
                    model(ids)
                sync()
                out[f"{name}_forward_ms"] = (time.perf_counter() - began) / 10 * 1e3
        for name in patched:
            out[f"{name}_ratio"] = out[f"{name}_forward_ms"] / out["unpatched_forward_ms"]
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
