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
import types
import warnings
from collections.abc import Callable
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
#: Widths that, where they equal its heads × head dim, are its inner width (its text projected to it).
_AT_WIDTH = ("caption_projection_dim", "cross_attention_dim")


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
        if isinstance(heads, (tuple, list)):  # heads a block (SVD's 5, 10, 20, 20): two, 32 channels each
            out["num_attention_heads"] = type(heads)(2 for _ in heads)
        if isinstance(defaults.get("norm_num_groups"), int):
            out["norm_num_groups"] = min(defaults["norm_num_groups"], 32)
    elif isinstance(heads, int) and heads > 2:
        out["num_attention_heads"] = 2
        for name in _HIDDEN:
            width = defaults.get(name)
            if isinstance(width, int) and width % heads == 0:
                out[name] = 2 * (width // heads)  # the head dim kept: the rope axes sum to it
        head_dim = defaults.get("attention_head_dim")
        if isinstance(head_dim, int) and head_dim > 0:  # its width as heads × head dim: 2 heads of it
            widths = {heads * head_dim: 2 * head_dim}
            for name in _AT_WIDTH:  # a width that is its inner one (SD3's caption projection, Sana's cross)
                if defaults.get(name) in widths:
                    out[name] = widths[defaults[name]]
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
    # HunyuanDiT's width is its heads × head dim (1408 = 16 × 88; its default 1152 is not); its controlnet's
    # blocks are half its transformer's layers less one: four layers, one block
    "HunyuanDiT2DModel": {"in_channels": 4, "patch_size": 2, "hidden_size": _inner},
    "HunyuanDiT2DControlNetModel": {
        "in_channels": 4,
        "patch_size": 2,
        "hidden_size": _inner,
        "transformer_num_layers": 4,
    },
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
    "HunyuanVideoFramepackTransformer3DModel": {"has_image_proj": True, "has_clean_x_embedder": True},
    "ControlNetUnionModel": {"addition_time_embed_dim": 8, "num_trans_channel": 64, "num_proj_channel": 64},
    "HiDreamImageTransformer2DModel": {
        "patch_size": 2,
        "out_channels": 16,
        "caption_channels": [32, 32],
        "llama_layers": [0, 1],
        "axes_dims_rope": (64, 32, 32),  # its ids' three axes (the default names two)
    },
    "Kandinsky3UNet": {"layers_per_block": 3},  # its up blocks' shapes hold at three
    "CosmosControlNetModel": {"model_channels": _inner},
    "WanAnimateTransformer3DModel": {"motion_encoder_size": 64},  # its face video's side
    "LTX2VideoDiffusionDecoderModel": {  # a stage a depth, narrow, kernels of 3 (its clip's sides ≥ them)
        "decoder_stage_channels": (128, 64, 32, 32, 16),
        "decoder_head_dim": 16,
        "decoder_stage_depths": (1, 1, 1, 1, 1),
        "decoder_stage_kernels": ((3, 3, 3),) * 4,
        "decoder_stage5_kernel": (3, 3, 3),
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
#: Arguments that turn off what needs torchvision, which diffusers here imports without (Cosmos's padding
#: mask, resized by torchvision's ``resize``): its positional components are the same either way.
_WITHOUT_TORCHVISION: dict[str, dict[str, Any]] = {
    "CosmosTransformer3DModel": {"concat_padding_mask": False},
}
#: torchvision's resize of a tensor, nearest (``F.interpolate(mode="nearest")``, as torchvision's own is),
#: lent to a module that calls it where diffusers imports without torchvision (Cosmos's controlnet resizes
#: its padding mask with it).
_NEAREST = types.SimpleNamespace(
    functional=types.SimpleNamespace(
        resize=lambda x, size, interpolation: torch.nn.functional.interpolate(
            x, size=size, mode=interpolation
        )
    ),
    InterpolationMode=types.SimpleNamespace(NEAREST="nearest"),
)
_RESIZES = ("CosmosControlNetModel",)
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
    arguments.update(_WITHOUT_TORCHVISION.get(name, {}))
    module = sys.modules[cls.__module__]
    if name in _RESIZES and not hasattr(module, "transforms"):
        module.transforms = _NEAREST
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls(**arguments).eval()


#: Config fields that give the width of the text a model attends to, in the order they are tried.
_TEXT_WIDTHS = (
    "caption_channels",
    "joint_attention_dim",
    "condition_dim",
    "text_dim",
    "cross_attention_dim",
    "text_embed_dim",
    "cap_feat_dim",
    "text_hidden_dim",
    "context_dim",
    "encoder_hid_dim",
    "in_channels",
)
#: Probe text tokens.
_TEXT = 7


def _randn(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=generator)


def _z_image(model: Any, g: torch.Generator) -> dict[str, Any]:  # lists of (C, F, H, W) latents, texts
    c = model.config
    return {
        "x": [_randn(g, c.in_channels, 1, 8, 8)],
        "t": torch.tensor([0.5]),
        "cap_feats": [_randn(g, _TEXT, c.cap_feat_dim)],
    }


def _hidream(model: Any, g: torch.Generator) -> dict[str, Any]:  # T5's text, Llama's layers, a pooled text
    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 8, 8),
        "timesteps": torch.tensor([0.5]),
        "encoder_hidden_states_t5": _randn(g, 1, _TEXT, c.caption_channels[-1]),
        "encoder_hidden_states_llama3": _randn(g, len(c.llama_layers), 1, _TEXT, c.caption_channels[0]),
        "pooled_embeds": _randn(g, 1, c.text_emb_dim),
    }


def _qwen_image_21(model: Any, g: torch.Generator) -> dict[str, Any]:  # text, then the image's 6 slots of 2×2
    c = model.config
    return {
        "hidden_states": _randn(g, 1, 24, c.in_channels),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.context_in_dim),
        "timestep": torch.tensor([0.5]),
        "img_shapes": [[(1, 4, 6)]],
        "img_mask": torch.tensor([[False] * _TEXT + [True] * 6]),
    }


def _glm_image(model: Any, g: torch.Generator) -> dict[str, Any]:  # a prior token a patch, none dropped
    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 8, 10),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.text_embed_dim),
        "prior_token_id": torch.randint(0, c.prior_vq_quantizer_codebook_size, (1, 20), generator=g),
        "prior_token_drop": torch.zeros(1, 20, dtype=torch.bool),
        "timestep": torch.tensor([0.5]),
        "target_size": torch.tensor([[1024.0, 1024.0]]),
        "crop_coords": torch.tensor([[0.0, 0.0]]),
    }


def _lumina_next(
    model: Any, g: torch.Generator
) -> dict[str, Any]:  # its pipeline's rotary (384², not its own)
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 8, 10),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.cross_attention_dim),
        "encoder_mask": torch.ones(1, _TEXT, dtype=torch.long),
        "image_rotary_emb": get_2d_rotary_pos_embed_lumina(model.head_dim, 384, 384),
        "cross_attention_kwargs": {},
    }


def _omnigen(model: Any, g: torch.Generator) -> dict[str, Any]:  # text ids, its time token, 4×5 patches
    c = model.config
    length = _TEXT + 1 + 20
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 8, 10),
        "timestep": torch.tensor([0.5]),
        "input_ids": torch.randint(0, c.pad_token_id, (1, _TEXT), generator=g),
        "input_img_latents": [],
        "input_image_sizes": {},
        "attention_mask": torch.ones(1, length, length),
        "position_ids": torch.arange(length)[None],
    }


def _ideogram4(model: Any, g: torch.Generator) -> dict[str, Any]:  # packed text, then a 2×4 image
    c, image = model.config, 65536  # its image ids start at 65536 (IMAGE_POSITION_OFFSET)
    text = torch.arange(_TEXT)
    cells = torch.arange(8)
    grid = torch.stack([torch.full((8,), image), image + cells // 4, image + cells % 4], -1)
    length = _TEXT + 8
    return {
        "hidden_states": _randn(g, 1, length, c.in_channels),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, length, c.llm_features_dim),
        "position_ids": torch.cat([torch.stack([text, text, text], -1), grid])[None],
        "segment_ids": torch.zeros(1, length, dtype=torch.long),
        "indicator": torch.tensor([[3] * _TEXT + [2] * 8]),  # text 3, image 2
    }


def _minimax_h3(model: Any, g: torch.Generator) -> dict[str, Any]:  # packed text, video 2×4, audio rows
    c = model.config
    patch = c.patch_size[0] * c.patch_size[1] * c.patch_size[2]
    zeros = torch.zeros(_TEXT, dtype=torch.long)
    text = torch.stack([torch.arange(_TEXT), zeros, zeros], -1)  # (t, h, w) of each row
    video = torch.stack([torch.full((8,), _TEXT), torch.arange(8) // 4, torch.arange(8) % 4], -1)
    audio = torch.stack([_TEXT + 1 + torch.arange(4), zeros[:4], zeros[:4]], -1)
    return {
        "hidden_states": _randn(g, 1, 8, c.in_channels * patch),
        "audio_hidden_states": _randn(g, 1, 4, c.audio_in_channels),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.text_dim),
        "timestep": torch.tensor([0.5]),
        "timestep_indices": torch.zeros(_TEXT + 12, dtype=torch.long),
        "token_tags": torch.tensor([1] * _TEXT + [0] * 8 + [2] * 4),  # text 1, video 0, audio 2
        "position_ids": torch.cat([text, video, audio]),
        "text_indices": torch.arange(_TEXT),
        "video_indices": torch.arange(_TEXT, _TEXT + 8),
        "audio_indices": torch.arange(_TEXT + 8, _TEXT + 12),
    }


def _anyflow(model: Any, g: torch.Generator) -> dict[str, Any]:  # frames first, a time a frame; FAR's chunks
    c = model.config
    inputs = {
        "hidden_states": _randn(g, 1, 2, c.in_channels, 8, 8),
        "timestep": torch.full((1, 2), 0.5),
        "r_timestep": torch.full((1, 2), 0.25),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.text_dim),
    }
    return {**inputs, "chunk_partition": [1, 1]} if "chunk_partition" in vars(c) else inputs


def _bria_fibo_2(
    model: Any, g: torch.Generator
) -> dict[str, Any]:  # its Perceiver's text, then a block's each
    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 8, 10),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, 1 + len(c.injection_layer_ids), _TEXT, c.cap_feat_dim),
    }


def _cosmos_controlnet(model: Any, g: torch.Generator) -> dict[str, Any]:  # control and base latents, no mask
    c = model.config
    latent = (1, c.latent_channels - 2, 2, 8, 10)  # its base: the latent, its condition and padding masks
    return {
        "controls_latents": _randn(g, *latent),
        "latents": _randn(g, *latent),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.text_embed_dim),
        "condition_mask": torch.zeros(1, 1, 2, 8, 10),
        "padding_mask": torch.zeros(1, 1, 8, 10),
    }


def _wan_animate(model: Any, g: torch.Generator) -> dict[str, Any]:  # a reference frame, pose, a face video
    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 2, 8, 10),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.text_dim),
        "encoder_hidden_states_image": _randn(g, 1, 5, c.image_dim),
        "pose_hidden_states": _randn(g, 1, c.latent_channels, 1, 8, 10),
        "face_pixel_values": _randn(g, 1, 3, 4, c.motion_encoder_size, c.motion_encoder_size),
    }


def _wan_animate_2(model: Any, g: torch.Generator) -> dict[str, Any]:  # its reference pass (a fresh cache)
    from diffusers.models.transformers.transformer_wan_animate_2 import WanAnimate2KVCache

    c = model.config
    return {
        "hidden_states": [_randn(g, c.out_dim, 2, 8, 10)],
        "condition_latents": [_randn(g, c.in_dim - c.out_dim, 2, 8, 10)],
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": [_randn(g, _TEXT, c.text_dim)],
        "encoder_hidden_states_image": _randn(g, 1, 5, 1280),
        "kv_cache": zoo.AtCall(lambda m: WanAnimate2KVCache(m.config.num_layers)),
        "kv_cache_mode": "extract",
        "seq_len": 2 * 4 * 5,
        "offset_grid_sizes": torch.tensor([[2, 4, 5]]),
    }


def _sana_wm(model: Any, g: torch.Generator) -> dict[str, Any]:  # a time a frame, text (1, 1, L, D), its mask
    c = model.config
    return {
        "hidden_states": _randn(g, 1, c.in_channels, 2, 4, 5),
        "timestep": torch.full((1, 1, 2), 0.5),
        "encoder_hidden_states": _randn(g, 1, 1, _TEXT, c.caption_channels),
        "encoder_attention_mask": torch.ones(1, _TEXT),
    }


def _sana_wm_refiner(
    model: Any, g: torch.Generator
) -> dict[str, Any]:  # its rope's rotary, as its pipeline's
    c = model.config
    return {
        "hidden_states": _randn(g, 1, 2 * 4 * 5, c.in_channels),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.caption_channels),
        "timestep": torch.full((1, 2 * 4 * 5), 500.0),
        "video_rotary_emb": zoo.AtCall(
            lambda m: m.build_rotary_emb_for_absolute_positions(1, [0, 1], 4, 5, torch.device("cpu"), 24.0)
        ),
        "encoder_attention_mask": torch.ones(1, _TEXT),
    }


def _kandinsky(model: Any, g: torch.Generator) -> dict[str, Any]:  # channels last; its pipeline's positions
    c = model.config
    channels = c.in_visual_dim * 2 + 1 if c.visual_cond else c.in_visual_dim  # its condition and mask too
    inputs = {
        "hidden_states": _randn(g, 1, 2, 8, 10, channels),
        "encoder_hidden_states": _randn(g, 1, _TEXT, c.in_text_dim),
        "timestep": torch.tensor([0.5]),
        "pooled_projections": _randn(g, 1, c.in_text_dim2),
    }
    if "in_audio_dim" in vars(c):  # Kandinsky 6: its audio latent and text mask
        inputs["audio_hidden_states"] = _randn(g, 1, 8, c.in_audio_dim)
        inputs["encoder_attention_mask"] = torch.ones(1, _TEXT, dtype=torch.bool)
    else:  # Kandinsky 5: its positions given
        inputs["visual_rope_pos"] = [torch.arange(2), torch.arange(4), torch.arange(5)]
        inputs["text_rope_pos"] = torch.arange(_TEXT)
    return inputs


def _kandinsky_sr(
    model: Any, g: torch.Generator
) -> dict[str, Any]:  # its anchor (zeros) and mask; 8×16 tokens
    c = model.config
    return {"hidden_states": _randn(g, 1, 2, 8, 16, 2 * c.in_visual_dim + 1), "timestep": torch.tensor([0.5])}


#: Inputs of a forward whose signature is its own (not a latent, a timestep and text the probe draws from its
#: config): the class's name → its inputs, from the model and a generator.
_OWN_INPUTS: dict[str, Callable[[Any, torch.Generator], dict[str, Any]]] = {
    "ZImageTransformer2DModel": _z_image,
    "HiDreamImageTransformer2DModel": _hidream,
    "QwenImage21Transformer2DModel": _qwen_image_21,
    "GlmImageTransformer2DModel": _glm_image,
    "LuminaNextDiT2DModel": _lumina_next,
    "OmniGenTransformer2DModel": _omnigen,
    "MiniMaxH3Transformer3DModel": _minimax_h3,
    "Ideogram4Transformer2DModel": _ideogram4,
    "AnyFlowTransformer3DModel": _anyflow,
    "AnyFlowFARTransformer3DModel": _anyflow,
    "BriaFibo2Transformer2DModel": _bria_fibo_2,
    "CosmosControlNetModel": _cosmos_controlnet,
    "WanAnimateTransformer3DModel": _wan_animate,
    "WanAnimate2Transformer3DModel": _wan_animate_2,
    "SanaWMTransformer3DModel": _sana_wm,
    "SanaWMLTX2RefinerTransformer3DModel": _sana_wm_refiner,
    "Kandinsky5Transformer3DModel": _kandinsky,
    "Kandinsky6Transformer3DModel": _kandinsky,
    "Kandinsky6SRTransformer3DModel": _kandinsky_sr,
    "AnimaTextConditioner": lambda m, g: {
        "source_hidden_states": _randn(g, 1, _TEXT, m.config.source_dim),
        "target_input_ids": torch.randint(0, m.config.target_vocab_size, (1, _TEXT), generator=g),
    },
    "UNetControlNetXSModel": lambda m, g: {  # a control image 8× its latent's side
        "sample": _randn(g, 1, 4, 16, 16),
        "timestep": torch.tensor([0.5]),
        "encoder_hidden_states": _randn(g, 1, _TEXT, m.config.cross_attention_dim),
        "controlnet_cond": _randn(g, 1, m.config.ctrl_conditioning_channels, 128, 128),
    },
    "LTX2VideoDiffusionDecoderModel": lambda m, g: {"z": _randn(g, 1, m.config.latent_channels, 2, 3, 3)},
}
#: Why a model's forward cannot be run alone.
_NO_FORWARD = {
    "MotionAdapter": "its forward computes nothing: it holds the motion modules a UNetMotionModel loads, "
    "whose row runs them",
}


def probe(model: Any) -> list[dict[str, Any]] | str:
    """Candidate inputs for a diffusers model's forward, from its config (the zoo runs the first it takes):
    Flux's packed latent with its ``img_ids`` and ``txt_ids``; Qwen-Image's with its ``img_shapes``; a video
    latent ``(1, C, F, H, W)``, frames first ``(1, F, C, H, W)`` (CogVideoX's); an image latent
    ``(1, C, H, W)`` (a UNet's ``sample``, 2 to the power of its blocks a side); LTX-Video's packed latent
    and its sizes; a latent of its ``sample_size`` (DiT's, which assumes it); each with a timestep, seven
    text tokens (CogVideoX's: its ``max_text_seq_length``) of each width its config names where it takes
    them (:data:`_TEXT_WIDTHS`; none, last, where its text is optional) and what else its forward requires
    (:func:`_required`); a 1-D (audio) model's latent, channels first, as many frames as its text. unCLIP's
    prior: its embeddings; an autoencoder of representations (RAE): an image of its encoder's input size;
    LongCat-AudioDiT: its audio latent and text; ACE-Step: its audio latent beside its context; a wrapper
    of one controlnet: that net's, its control in a list; a video UNet's text a frame (AnimateDiff's, whose
    pipeline repeats it). A forward whose signature is its own: its :data:`_OWN_INPUTS`; one that cannot run
    alone: why (:data:`_NO_FORWARD`). Seeded; sizes a multiple of its patch."""
    name = type(model).__name__
    if name in _NO_FORWARD:
        return _NO_FORWARD[name]
    if name in _OWN_INPUTS:
        return [_OWN_INPUTS[name](model, torch.Generator().manual_seed(0))]
    config = getattr(model, "config", None)
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return []
    names = set(parameters)
    nets = getattr(model, "nets", None)  # a wrapper of controlnets: its one net's inputs, a control a net
    if config is None and isinstance(nets, torch.nn.ModuleList) and len(nets) == 1:
        wrapped = []
        for inputs in probe(nets[0]):
            if "controlnet_cond" in inputs:
                inputs = {**inputs, "controlnet_cond": [inputs["controlnet_cond"]]}
                inputs["conditioning_scale"] = [1.0]
                if "controlnet_mode" in names:  # Flux's: control mode 0, a tuple back (as its pipeline
                    inputs["controlnet_mode"] = [torch.tensor([0])]  # asks: its nets' outputs unpacked as
                    inputs["return_dict"] = False  # a dict would be their keys)
            wrapped.append({k: v for k, v in inputs.items() if k in names})
        return wrapped
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    required = {n for n, p in parameters.items() if p.default is p.empty and p.kind not in variadic}
    generator = torch.Generator().manual_seed(0)
    width, count = getattr(config, "embedding_dim", None), getattr(config, "num_embeddings", None)
    if "proj_embedding" in names and isinstance(width, int) and isinstance(count, int):  # unCLIP's prior
        return [
            {
                "hidden_states": torch.randn(1, width, generator=generator),
                "timestep": torch.tensor([0.5]),
                "proj_embedding": torch.randn(1, width, generator=generator),
                "encoder_hidden_states": torch.randn(1, count, width, generator=generator),
            }
        ]
    audio, words = getattr(config, "latent_dim", None), getattr(config, "dit_text_dim", None)
    if isinstance(audio, int) and isinstance(words, int):  # LongCat-AudioDiT's: 8 frames of audio latent
        return [
            {
                "hidden_states": torch.randn(1, 8, audio, generator=generator),
                "encoder_hidden_states": torch.randn(1, _TEXT, words, generator=generator),
                "encoder_attention_mask": torch.ones(1, _TEXT, dtype=torch.bool),
                "timestep": torch.tensor([0.5]),
            }
        ]
    size, colours = getattr(config, "encoder_input_size", None), getattr(config, "num_channels", None)
    if "sample" in names and isinstance(size, int) and isinstance(colours, int):  # an RAE's image, its size
        return [{"sample": torch.randn(1, colours, size, size, generator=generator)}]
    channels = getattr(config, "in_channels", None)
    acoustic = getattr(config, "audio_acoustic_hidden_dim", None)
    if "context_latents" in names and isinstance(acoustic, int) and isinstance(channels, int):  # ACE-Step's
        return [  # 8 frames of audio latent beside its context (source latents and masks: the rest of its
            {  # input channels), text of its width
                "hidden_states": torch.randn(1, 8, acoustic, generator=generator),
                "context_latents": torch.randn(1, 8, channels - acoustic, generator=generator),
                "encoder_hidden_states": torch.randn(1, _TEXT, config.hidden_size, generator=generator),
                "timestep": torch.tensor([0.5]),
                "timestep_r": torch.tensor([0.25]),
            }
        ]
    if not isinstance(channels, int):
        return []
    patch = getattr(config, "patch_size", 1) or 1
    sizes = tuple(patch) if isinstance(patch, (tuple, list)) else (patch, patch)
    if len(sizes) not in (2, 3) or not all(isinstance(s, int) and s > 0 for s in sizes):
        return []
    patch_t, patch_h, patch_w = sizes if len(sizes) == 3 else (1, *sizes)
    widths = [getattr(config, k, None) for k in _TEXT_WIDTHS]
    widths = list(dict.fromkeys(w for w in widths if isinstance(w, int) and w > 0))
    if "encoder_hidden_states" not in required:  # none given: a forward that attends to no text
        widths = [*widths, None] if "encoder_hidden_states" in names else [None]
    latents = []
    if {"img_ids", "txt_ids"} <= names:  # Flux's: a packed latent of 4×6 tokens, ids (0, h, w[, 0])
        grid = torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(6.0), indexing="ij")
        ids = torch.stack(grid, -1).reshape(-1, 3)
        axes = getattr(config, "axes_dims_rope", None)  # Flux 2's: a fourth axis
        if isinstance(axes, (list, tuple)) and len(axes) > 3:
            ids = torch.cat([ids, torch.zeros(24, len(axes) - 3)], -1)
        packed = torch.randn(1, 24, channels, generator=generator)
        latents.append({"hidden_states": packed, "img_ids": ids})
    if "img_shapes" in names:  # Qwen-Image's: a packed latent of 4×6 tokens and its shape
        packed = torch.randn(1, 24, channels, generator=generator)
        latents.append({"hidden_states": packed, "img_shapes": [(1, 4, 6)]})
    key = "sample" if "sample" in names else "hidden_states"  # a UNet's latent is its sample
    side_h, side_w = 4 * patch_h, 5 * patch_w
    blocks = getattr(config, "block_out_channels", None)
    if key == "sample" and isinstance(blocks, (list, tuple)):  # a UNet's: halved at each block but the last
        side_h = side_w = 2 ** len(blocks)
    frames = getattr(config, "video_length", None)  # Latte's table of frames: a clip of its length
    frames = frames if isinstance(frames, int) and 0 < frames <= 32 else 2 * patch_t
    video = torch.randn(1, channels, frames, side_h, side_w, generator=generator)
    image = torch.randn(1, channels, side_h, side_w, generator=generator)
    latents += [{key: video}, {key: video.transpose(1, 2).contiguous()}, {key: image}]
    if "1D" in type(model).__name__:  # a 1-D model's (audio): its channels first, as many frames as text
        latents.append({key: torch.randn(1, channels, _TEXT, generator=generator)})  # (MiniMax Music 3's)
    if {"num_frames", "height", "width"} <= names:  # LTX-Video's: a packed latent and its sizes
        packed = torch.randn(1, 2 * side_h * side_w, channels, generator=generator)
        latents.append({key: packed, "num_frames": 2, "height": side_h, "width": side_w})
    sample = getattr(config, "sample_size", None)  # DiT's: a latent of its sample size, which it assumes
    if isinstance(sample, int) and 0 < sample <= 64 and key == "hidden_states":
        latents.append({key: torch.randn(1, channels, sample, sample, generator=generator)})
    tokens = getattr(config, "max_text_seq_length", None)  # CogVideoX's table: text of its full length
    tokens = getattr(config, "text_len", None) if "text_len_t5" in vars(config) else tokens  # HunyuanDiT's
    tokens = tokens if isinstance(tokens, int) and 0 < tokens <= 512 else _TEXT
    candidates = []
    for latent in latents:
        for width in widths:
            inputs = {**latent, "timestep": torch.tensor([0.5])}
            if width is not None:
                inputs["encoder_hidden_states"] = torch.randn(1, tokens, width, generator=generator)
            drawn = {**inputs, **_required(config, names, required, inputs, generator)}
            candidates.append(drawn)
            if key == "sample" and drawn[key].dim() == 5 and width is not None:  # its text a frame
                per_frame = drawn["encoder_hidden_states"].repeat(drawn[key].shape[2], 1, 1)
                candidates.append({**drawn, "encoder_hidden_states": per_frame})
            if "encoder_attention_mask" in drawn and "encoder_attention_mask" not in required:
                # without the optional mask too (Latte's repeats its text per frame, not the mask)
                candidates.append({k: v for k, v in drawn.items() if k != "encoder_attention_mask"})
    return candidates


def _required(
    config: Any, names: set[str], required: set[str], inputs: dict[str, Any], generator: torch.Generator
) -> dict[str, Any]:
    """What else a forward takes beside its latent, timestep and text, by its name: a mask of the text (all
    attended), the ids of Flux's text (an id per rope axis), Wan-VACE's control video of its
    ``vace_in_channels``, a pooled projection of its ``pooled_projection_dim``, a guidance of 3.5, a class
    (DiT's), PixArt's image size and aspect, HunyuanVideo 1.5's second text and (zero) image embeddings,
    Bria Fibo's text encoder's layers (one a block), LTX-2's audio latent and its text, HunyuanDiT's T5 text
    and image sizes, and where required a second timestep (a flow map's), a control image (the latent's
    shape; a UNet ControlNet's of its ``conditioning_channels`` at 8× the latent's side), ERNIE-Image's text
    and its length, CogView4's image sizes (1024²), I2VGen-XL's frame rate, first frame and image
    embedding, SparseCtrl's mask of conditioned frames, ControlNet-Union's one control, of type 0, and
    HunyuanVideo Framepack's image embedding, frame indices and clean latents."""
    latent = inputs.get("sample", inputs.get("hidden_states"))
    out: dict[str, Any] = {}
    text = inputs.get("encoder_hidden_states")
    for name in ("encoder_attention_mask", "encoder_mask", "encoder_hidden_states_mask"):
        if name in names and text is not None:
            kind = torch.long if name == "encoder_attention_mask" else None
            out[name] = torch.ones(1, text.shape[1], dtype=kind)
    if "txt_ids" in names:
        axes = getattr(config, "axes_dims_rope", None)
        out["txt_ids"] = torch.zeros(_TEXT, len(axes) if isinstance(axes, (list, tuple)) else 3)
    vace = getattr(config, "vace_in_channels", None)  # Wan-VACE's control video beside its latent
    video = latent is not None and latent.dim() == 5
    if "control_hidden_states" in names and isinstance(vace, int) and video:
        out["control_hidden_states"] = torch.randn(1, vace, *latent.shape[2:], generator=generator)
    second = getattr(config, "text_embed_2_dim", None)  # HunyuanVideo 1.5's second text encoder's
    if "encoder_hidden_states_2" in names and isinstance(second, int) and text is not None:
        out["encoder_hidden_states_2"] = torch.randn(1, _TEXT, second, generator=generator)
        out["encoder_attention_mask_2"] = torch.ones(1, _TEXT, dtype=torch.long)
    sound = getattr(config, "audio_in_channels", None)  # LTX-2's: 8 frames of audio latent, its text too
    if "audio_hidden_states" in names and isinstance(sound, int) and text is not None:
        out["audio_hidden_states"] = torch.randn(1, 8, sound, generator=generator)
        out["audio_encoder_hidden_states"] = torch.randn(text.shape, generator=generator)
        out["audio_num_frames"] = 8
    image = getattr(config, "image_embed_dim", None)  # and its image's: none (zeros: text to video)
    if "image_embeds" in names and isinstance(image, int):
        out["image_embeds"] = torch.zeros(1, _TEXT, image)
    pooled = getattr(config, "pooled_projection_dim", None)
    if "pooled_projections" in names and isinstance(pooled, int):
        out["pooled_projections"] = torch.randn(1, pooled, generator=generator)
    if getattr(config, "guidance_embeds", False) and "guidance" in names:
        out["guidance"] = torch.tensor([3.5])
    classes = [getattr(config, k, None) for k in ("num_embeds_ada_norm", "num_class_embeds")]
    if "class_labels" in names and any(isinstance(c, int) and c > 1 for c in classes):  # DiT's: class 1
        out["class_labels"] = torch.tensor([1])
    if "added_cond_kwargs" in names and "sample" not in inputs:  # PixArt's: an image of 1024², square
        out["added_cond_kwargs"] = {
            "resolution": torch.tensor([[1024.0, 1024.0]]),
            "aspect_ratio": torch.tensor([[1.0]]),
        }
    t5, t5_width = getattr(config, "text_len_t5", None), getattr(config, "cross_attention_dim_t5", None)
    both = isinstance(t5, int) and isinstance(t5_width, int) and text is not None
    if "encoder_hidden_states_t5" in names and both:  # HunyuanDiT's: its two texts at their full lengths,
        out["text_embedding_mask"] = torch.ones(1, text.shape[1], dtype=torch.long)  # an image of 1024²
        out["encoder_hidden_states_t5"] = torch.randn(1, t5, t5_width, generator=generator)
        out["text_embedding_mask_t5"] = torch.ones(1, t5, dtype=torch.long)
        out["image_meta_size"] = torch.tensor([[1024.0, 1024.0, 1024.0, 1024.0, 0.0, 0.0]])
        out["style"] = torch.tensor([0])
    layers = getattr(config, "text_encoder_dim", None)  # Bria Fibo's: its text encoder's layers, one a block
    if "text_encoder_layers" in names and isinstance(layers, int) and text is not None:
        count = getattr(config, "num_layers", 0) + getattr(config, "num_single_layers", 0)
        out["text_encoder_layers"] = [torch.randn(1, text.shape[1], layers, generator=generator)] * count
    for name in sorted(required - set(inputs)):
        if "timestep" in name:  # a flow map's second time (AnyFlow's r_timestep, ACE-Step's timestep_r)
            out[name] = torch.tensor([0.25])
        elif name == "controlnet_cond" and latent is not None:
            cond = getattr(config, "conditioning_channels", None)
            if isinstance(cond, int) and latent.dim() == 4 and "sample" in inputs:  # a UNet's: an image
                shape = (1, cond, 8 * latent.shape[-2], 8 * latent.shape[-1])
                out[name] = torch.randn(*shape, generator=generator)
            else:
                out[name] = torch.randn(latent.shape, generator=generator)
        elif name == "fps":  # I2VGen-XL's: its clip's frame rate, first frame's latent, image embedding
            out[name] = torch.tensor([8])
            out["image_latents"] = torch.randn(latent.shape, generator=generator)
            width = getattr(config, "cross_attention_dim", None)
            if "image_embeddings" in names and isinstance(width, int):
                out["image_embeddings"] = torch.randn(1, width, generator=generator)
        elif name == "image_embeds" and isinstance(getattr(config, "image_proj_dim", None), int):
            out[name] = torch.randn(1, _TEXT, config.image_proj_dim, generator=generator)  # Framepack's image
        elif name == "indices_latents" and latent is not None and latent.dim() == 5:  # its frames' indices,
            out[name] = torch.arange(latent.shape[2])
            if getattr(config, "has_clean_x_embedder", False):  # its clean latents and history, same frames
                for kind in ("clean", "history_2x", "history_4x"):
                    out[f"latents_{kind}"] = torch.randn(latent.shape, generator=generator)
                    out[f"indices_latents_{kind}"] = torch.arange(latent.shape[2])
        elif name == "added_time_ids":  # Stable Video Diffusion's: fps, motion bucket, noise augmentation
            out[name] = torch.tensor([[6.0, 127.0, 0.02]])
        elif name == "text_bth" and isinstance(getattr(config, "text_in_dim", None), int):  # ERNIE-Image's
            out[name] = torch.randn(1, _TEXT, config.text_in_dim, generator=generator)
            out["text_lens"] = torch.tensor([_TEXT])
        elif name in ("original_size", "target_size"):  # CogView4's: an image of 1024²
            out[name] = torch.tensor([[1024.0, 1024.0]])
        elif name == "crop_coords":
            out[name] = torch.tensor([[0.0, 0.0]])
    cond = out.get("controlnet_cond")
    if "conditioning_mask" in names and cond is not None and cond.dim() == 5:  # SparseCtrl's: every frame
        out["conditioning_mask"] = torch.ones(1, 1, *cond.shape[2:])
    types = getattr(config, "num_control_type", None)
    if "control_type_idx" in names and isinstance(types, int) and cond is not None:  # ControlNet-Union's
        out["controlnet_cond"], out["control_type_idx"] = [cond], [0]  # one control, of type 0
        out["control_type"] = torch.eye(types)[:1]
    return out


def run(name: str) -> zoo.Outcome:
    """Diffusers class ``name`` through audit → patch → audit → forward → unpatch
    (:func:`tests.support.zoo.judge`)."""
    return zoo.judge(name, lambda: build(name), folder=False, probe=probe)  # audit DIR: transformers' folders
