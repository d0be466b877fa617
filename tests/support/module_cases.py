"""What the framework tests share: bad options every module (torch, JAX) must refuse with the same message,
the core's validated options from keyword arguments, the portable algorithm's requests, and the stored
near-midpoint cases."""

import json
from pathlib import Path

import numpy as np

import posenc
from posenc import portable

#: the unsigned integers that hold each format's bits
UINT = {"float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16, "float64": np.uint64}

BAD_MODULE_OPTIONS = [
    ({"d_model": 4.0}, TypeError, "d_model must be an integer"),
    ({"d_model": 16, "dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\)"),
    ({"d_model": 16, "max_len": 0}, ValueError, "max_len must be an integer >= 1"),
    ({"d_model": 16, "batch_first": "yes"}, TypeError, "batch_first must be True or False"),
    ({"d_model": 2, "shift": 1}, ValueError, "n - shift"),
]


def core_options(d_model: int, **options) -> "posenc.core.Options":
    """``posenc.core.Options`` for ``d_model`` and keyword options (the paper's defaults for the rest)."""
    return posenc.core.Options.check(d_model, **{**posenc.defaults.OPTIONS, **options})


def portable_request(d_model: int, fmt: str, **options) -> portable.Request:
    """The portable algorithm's request for ``d_model``, output format ``fmt`` and keyword options."""
    return portable.request_for(core_options(d_model, **options), fmt)


def near_midpoint_cases() -> list[dict]:
    """The stored cases whose exact value lies near a rounding midpoint (``data/near_midpoints.json``)."""
    return json.loads((Path(__file__).parents[1] / "data" / "near_midpoints.json").read_text())["cases"]


def logits_before_and_after(model, tokens, rotary) -> tuple:
    """A Hugging Face causal LM's logits for ``tokens`` with its own rotary module, then with ``rotary``
    (built from the model's config) swapped in: what a user porting the model sees."""
    import torch

    with torch.no_grad():
        before = model(tokens).logits
        model.model.rotary_emb = rotary(model.config)
        after = model(tokens).logits
    return before, after
