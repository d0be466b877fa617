"""What the framework tests share: bad options every module (torch, JAX) must refuse with the same message,
and the core's validated options from keyword arguments."""

import posenc

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


def logits_before_and_after(model, tokens, rotary) -> tuple:
    """A Hugging Face causal LM's logits for ``tokens`` with its own rotary module, then with ``rotary``
    (built from the model's config) swapped in: what a user porting the model sees."""
    import torch

    with torch.no_grad():
        before = model(tokens).logits
        model.model.rotary_emb = rotary(model.config)
        after = model(tokens).logits
    return before, after
