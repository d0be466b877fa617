"""The diffusers zoo: every model class of the installed diffusers whose module has a positional component,
found by enumeration, built tiny from its own ``__init__`` defaults with random weights, and taken through
the same steps and states as the transformers zoo (:func:`tests.support.zoo.judge`).

:func:`architectures` enumerates: every :class:`diffusers.ModelMixin` subclass diffusers exports whose
defining module names a timestep embedding (``Timesteps``, ``get_timestep_embedding``), a sin-cos table
(``get_*_sincos_pos_embed``, a ``PatchEmbed``), a rotary embedding (``rotary``, ``rope``, ``RotaryPosEmbed``)
or computes a sine (``sin(``). :func:`tiny_arguments` shrinks its defaults (one layer or block of each
kind, two attention heads of the family's own head dim, 64 channels a block, small feed-forwards and
expert counts) without touching its positional arguments (rope axes, theta, sample and table sizes,
timestep options). These models take no token ids: :func:`probe` makes inputs from their configs (a packed
latent with its ids, a video or an image latent, a timestep, text) and the forward is compared before and
after where one of them runs; elsewhere the table says "forward not probed" and each component is proven by
its own proof. Their folders are not audited: ``posenc audit DIR`` reads transformers' folders.

``python scripts/zoo.py --library diffusers`` runs it and writes ``docs/zoo-diffusers.md``.
"""

from __future__ import annotations

import inspect
import re
import sys
import warnings
from typing import Any

import torch

from tests.support import zoo

#: Names in a model's module that mark a positional component.
_POSITIONAL = re.compile(
    r"\bTimesteps\b|get_timestep_embedding|sincos_pos_embed|\bPatchEmbed\b|rotary|\brope\b|RotaryPosEmbed"
    r"|PosEmbed\b|\bsin\("
)
#: What a tiny model's sizes become: layer counts, feed-forward widths, expert counts.
_LAYERS = re.compile(r"(^|_)(layers|depth|blocks)(_|$)|layers_per_block|^num_\w*layers$")
_WIDTHS = re.compile(r"(ffn|mlp|intermediate|ff)_?(dim|size|hidden_dim|inner_dim)$")
_EXPERTS = {
    "num_experts": 4,
    "num_routed_experts": 4,
    "num_shared_experts": 1,
    "top_k": 2,
    "num_experts_per_tok": 2,
}
#: Widths that are the model's own (heads × head dim): kept a multiple of the head dim.
_HIDDEN = ("hidden_size", "dim", "inner_dim", "hidden_dim", "model_dim")


def architectures() -> list[str]:
    """Every diffusers model class with a positional component (module docstring), by class name."""
    import diffusers

    found = []
    for name in dir(diffusers):
        try:
            cls = getattr(diffusers, name)
        except Exception:  # an optional dependency that is not installed: not enumerable here
            continue
        mixin = diffusers.ModelMixin
        if not (isinstance(cls, type) and issubclass(cls, mixin)) or cls is mixin:
            continue
        try:
            source = inspect.getsource(sys.modules[cls.__module__])
        except (OSError, TypeError, KeyError):
            continue
        if _POSITIONAL.search(source):
            found.append(name)
    return sorted(found)


def tiny_arguments(cls: type) -> dict[str, Any]:
    """The arguments of a tiny ``cls``: its ``__init__`` defaults, shrunk (module docstring)."""
    signature = inspect.signature(cls.__init__)
    defaults = {
        name: p.default
        for name, p in signature.parameters.items()
        if name != "self" and p.default is not inspect.Parameter.empty
    }
    out = dict(defaults)
    heads = defaults.get("num_attention_heads")
    channels = defaults.get("block_out_channels")
    if isinstance(channels, (tuple, list)) and channels and all(isinstance(c, int) for c in channels):
        out["block_out_channels"] = tuple(64 for _ in channels)  # a UNet: 64 channels a block
        if isinstance(defaults.get("norm_num_groups"), int):
            out["norm_num_groups"] = min(defaults["norm_num_groups"], 32)
    elif isinstance(heads, int) and heads > 2:
        out["num_attention_heads"] = 2
        for name in _HIDDEN:
            width = defaults.get(name)
            if isinstance(width, int) and width % heads == 0:
                out[name] = 2 * (width // heads)  # the head dim kept: the rope axes sum to it
        kv = defaults.get("num_key_value_heads", defaults.get("num_kv_heads"))
        for name in ("num_key_value_heads", "num_kv_heads"):
            if isinstance(defaults.get(name), int):
                out[name] = 1 if kv < heads else 2
    for name, value in defaults.items():
        if _LAYERS.search(name) and not name.startswith(("use_", "skip_")):
            if isinstance(value, bool):
                continue
            if isinstance(value, int) and value > 1:
                out[name] = 1
            elif isinstance(value, (tuple, list)) and value and all(isinstance(v, int) for v in value):
                if 0 in value:  # indices of layers (Wan-VACE's vace_layers): the first layer's only
                    out[name] = type(value)([0])
                else:
                    out[name] = type(value)(1 if v > 1 else v for v in value)
        elif _WIDTHS.search(name) and isinstance(value, int) and value > 64:
            out[name] = 64
        elif name in _EXPERTS and isinstance(value, int) and value > _EXPERTS[name]:
            out[name] = _EXPERTS[name]
    return out


def _inner(arguments: dict[str, Any]) -> int:
    return arguments["num_attention_heads"] * arguments["attention_head_dim"]


#: Arguments whose default is None (or that a class requires) and that its model cannot be built without,
#: as a published checkpoint's config gives them (sizes tiny; a callable: of the other arguments).
_CHECKPOINT_ARGUMENTS: dict[str, dict[str, Any]] = {
    "HunyuanDiT2DModel": {"in_channels": 4, "patch_size": 2},
    "HunyuanDiT2DControlNetModel": {"in_channels": 4, "patch_size": 2},
    "Transformer2DModel": {  # DiT's
        "in_channels": 4,
        "out_channels": 8,
        "sample_size": 8,
        "patch_size": 2,
        "norm_type": "ada_norm_zero",
        "num_embeds_ada_norm": 1000,
    },
    "LatteTransformer3DModel": {
        "in_channels": 4,
        "out_channels": 8,
        "patch_size": 2,
        "sample_size": 8,
        "caption_channels": 16,
        "cross_attention_dim": _inner,
    },
    "TransformerTemporalModel": {  # AnimateDiff's motion module
        "in_channels": 64,
        "positional_embeddings": "sinusoidal",
        "num_positional_embeddings": 32,
    },
    "EasyAnimateTransformer3DModel": {"in_channels": 16, "out_channels": 16, "patch_size": 2},
    "LuminaNextDiT2DModel": {"num_kv_heads": 2},
    "OmniGenTransformer2DModel": {
        "rope_scaling": lambda a: {
            "long_factor": [1.0] * (a["hidden_size"] // a["num_attention_heads"] // 2),
            "short_factor": [1.0] * (a["hidden_size"] // a["num_attention_heads"] // 2),
        }
    },
    "ControlNetUnionModel": {"addition_time_embed_dim": 8},
    "HiDreamImageTransformer2DModel": {
        "patch_size": 2,
        "out_channels": 16,
        "caption_channels": [32, 32],
        "llama_layers": [0, 1],
    },
    "UniDiffuserModel": {"in_channels": 4, "out_channels": 4, "sample_size": 8, "patch_size": 2},
    "ZImageControlNetModel": {
        "control_layers_places": [0],
        "control_refiner_layers_places": [0],
        "control_in_dim": 16,
        "add_control_noise_refiner": False,
    },
    "AudioLDM2ProjectionModel": {"text_encoder_dim": 16, "text_encoder_1_dim": 16, "langauge_model_dim": 16},
    "StableAudioProjectionModel": {
        "text_encoder_dim": 16,
        "conditioning_dim": 16,
        "min_value": 0.0,
        "max_value": 10.0,
    },
}
#: A wrapper of several controlnets: the class it wraps (one tiny one of it).
_WRAPS = {
    "FluxMultiControlNetModel": "FluxControlNetModel",
    "SD3MultiControlNetModel": "SD3ControlNetModel",
    "QwenImageMultiControlNetModel": "QwenImageControlNetModel",
    "HunyuanDiT2DMultiControlNetModel": "HunyuanDiT2DControlNetModel",
}


def build(name: str) -> Any:
    """The tiny model of diffusers class ``name`` (eval mode, seeded weights; a wrapper of controlnets: of
    one tiny controlnet)."""
    import diffusers

    cls = getattr(diffusers, name)
    if name in _WRAPS:
        inner = build(_WRAPS[name])
        torch.manual_seed(0)
        return cls([inner]).eval()
    arguments = tiny_arguments(cls)
    for key, value in _CHECKPOINT_ARGUMENTS.get(name, {}).items():
        arguments[key] = value(arguments) if callable(value) else value
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**arguments).eval()


#: Config fields that give the width of the text a model attends to.
_TEXT_WIDTHS = (
    "joint_attention_dim",
    "text_dim",
    "cross_attention_dim",
    "text_embed_dim",
    "caption_channels",
)


def probe(model: Any) -> list[dict[str, Any]]:
    """Candidate inputs for a diffusers model's forward, from its config (the zoo runs the first it takes):
    Flux's packed latent with its ``img_ids`` and ``txt_ids``; Qwen-Image's with its ``img_shapes``; a video
    latent ``(1, C, F, H, W)``; an image latent ``(1, C, H, W)`` (a UNet's ``sample``); each with a timestep,
    seven text tokens where it takes them and a pooled projection where it takes one. Seeded; sizes a
    multiple of its patch."""
    config = getattr(model, "config", None)
    try:
        names = set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return []
    channels = getattr(config, "in_channels", None)
    if not isinstance(channels, int):
        return []
    generator = torch.Generator().manual_seed(0)
    patch = getattr(config, "patch_size", 1) or 1
    sizes = tuple(patch) if isinstance(patch, (tuple, list)) else (patch, patch)
    if len(sizes) not in (2, 3) or not all(isinstance(s, int) and s > 0 for s in sizes):
        return []
    patch_t, patch_h, patch_w = sizes if len(sizes) == 3 else (1, *sizes)
    extras: dict[str, Any] = {"timestep": torch.tensor([0.5])}
    text = next((getattr(config, k) for k in _TEXT_WIDTHS if isinstance(getattr(config, k, None), int)), None)
    if "encoder_hidden_states" in names and text is not None:
        extras["encoder_hidden_states"] = torch.randn(1, 7, text, generator=generator)
    if "encoder_attention_mask" in names:
        extras["encoder_attention_mask"] = torch.ones(1, 7, dtype=torch.long)
    pooled = getattr(config, "pooled_projection_dim", None)
    if "pooled_projections" in names and isinstance(pooled, int):
        extras["pooled_projections"] = torch.randn(1, pooled, generator=generator)
    if getattr(config, "guidance_embeds", False) and "guidance" in names:
        extras["guidance"] = torch.tensor([3.5])
    candidates = []
    if {"img_ids", "txt_ids"} <= names:  # Flux's: a packed latent of 4×6 tokens
        grid = torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(6.0), indexing="ij")
        candidates.append(
            {
                "hidden_states": torch.randn(1, 24, channels, generator=generator),
                "img_ids": torch.stack(grid, -1).reshape(-1, 3),
                "txt_ids": torch.zeros(7, 3),
                **extras,
            }
        )
    if "img_shapes" in names:  # Qwen-Image's: a packed latent of 4×6 tokens and its shape
        if "encoder_hidden_states_mask" in names:
            extras["encoder_hidden_states_mask"] = torch.ones(1, 7)
        packed = torch.randn(1, 24, channels, generator=generator)
        inputs = {"hidden_states": packed, "img_shapes": [(1, 4, 6)], **extras}
        if "controlnet_cond" in names:
            inputs["controlnet_cond"] = torch.randn(1, 24, channels, generator=generator)
        candidates.append(inputs)
    video = torch.randn(1, channels, 2 * patch_t, 4 * patch_h, 5 * patch_w, generator=generator)
    image = torch.randn(1, channels, 4 * patch_h, 5 * patch_w, generator=generator)
    key = "sample" if "sample" in names else "hidden_states"  # a UNet's latent is its sample
    for latent in (video, image):
        candidates.append({key: latent, **extras})
    return candidates


def run(name: str) -> zoo.Outcome:
    """Diffusers class ``name`` through audit → patch → audit → forward → unpatch
    (:func:`tests.support.zoo.judge`)."""
    return zoo.judge(name, lambda: build(name), folder=False, probe=probe)  # audit DIR: transformers' folders
