"""The zoo: every architecture of the installed transformers that has a positional component, found by
enumeration (not by a list), built tiny from its own config class with random weights, and taken through
``posenc.audit`` → ``posenc.torch.patch`` → audit → forward → ``unpatch``.

:func:`architectures` enumerates: every model type whose modeling module defines a rotary embedding (an
``inv_freq``) or computes sinusoids (``sin(``), and that has a top-level model class in the auto mappings.
:func:`tiny` shrinks a config (two attention heads of the family's own head dim, one layer per layer type,
small feed-forwards, experts and vocabularies) without touching its positional fields. :func:`run` gives
one :class:`Outcome`: its ``state`` is

* ``exact`` — every component found was made exact (or already was), the audit after passes, the outputs
  are within the original's own error, ``unpatch`` restores the outputs and the state dict bit for bit;
* ``declined`` — ``patch`` left components alone with a reason a user can act on, the model untouched
  (outputs and state dict as before);
* ``failing`` — anything else: a crash in posenc, a judgment contradicted (a component the audit fails that
  the patch then declines as not a sinusoid), "replaced" followed by a broken forward or other outputs,
  an unpatch that does not restore;
* ``not built`` — the harness could not build or run the model itself (not posenc's fault: said with the
  error).

``python scripts/zoo.py`` runs it over every architecture and writes ``docs/models.md``'s table.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import glob
import importlib
import math
import os
import re
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch


def warm_sines() -> None:
    """torch 2.13's CPU ``sin`` (AVX-512, two threads) is, in about one process in eight, off by up to 1.5e-4
    on the first call of the process, in the half of a float32 tensor of 8192 values its second thread
    computes (the second call is right): a model whose table is built by that call (timm's EVA-02 rotary)
    holds a table posenc's proof then rightly finds outside float32 rounding of its formula, and its row
    would change from run to run. Each zoo process makes that first call on zeros, before any model."""
    torch.zeros(8192).sin()
    torch.zeros(8192).cos()


warm_sines()

#: The fields that count layers, heads, widths and experts, and what a tiny model sets them to.
_LAYERS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "depth",
    "conf_num_hidden_layers",  # Gemma 3n's audio conformer
    "num_spatial_layers",  # VideoPrism's factorized video tower
    "num_temporal_layers",
    "num_auxiliary_layers",
)
_WIDTHS = {
    "intermediate_size": 64,
    "ffn_dim": 64,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_inner": 64,
}
_EXPERTS = {
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "moe_num_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "n_group": 1,
    "topk_group": 1,
}
#: A detector's queries (``num_queries``): random weights' scores of its anchors lie so close that among
#: hundreds selected by top-k, a float32 unit's change reorders them (OmDet-Turbo's 900 of 8400).
_QUERIES = 16
#: The stages of timm's test network (``test_efficientnet``, :func:`_timm_lent`) at strides 4, 8, 16 and 32,
#: and their channels: a features-only backbone's (EdgeTAM's RepViT's strides).
_TIMM_TEST_STAGES, _TIMM_TEST_CHANNELS = [1, 2, 3, 4], [24, 32, 48, 64]
#: The fields that list a model's kinds of layer: a tiny model keeps one layer of each (RecurrentGemma's
#: block_types cycle recurrent, recurrent, attention: one layer would hold no attention, so no rotary).
_LAYER_KINDS = ("layer_types", "layers_block_type", "block_types")
#: Fields a default config of transformers leaves None (or empty) that its model cannot be built without,
#: per model type, as a checkpoint's config.json gives them; set at every level of the config that holds
#: the field ("Class.field": the levels of that config class only).
_CHECKPOINT_FIELDS: dict[str, dict[str, Any]] = {
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
    "diffusion_gemma": {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_hidden_layers": 2},
    "deepseek_ocr2": {"mlp_layer_types": ["dense"]},
    "chameleon": {"vocabulary_map": {"<image>": 8}},
    "granite4_vision": {"deepstack_layer_map": [(0, 0)], "downsample_rate": "1/4"},
    **{
        name: {
            "CohereCompassTextConfig.rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 10000.0}
            }
        }
        for name in ("cohere_compass", "cohere_compass_text")
    },
    # a rotated part its module's default mrope_section covers (GLM-4.1V's, GLM-Image's checkpoints: half
    # of 128; Qwen4-exp's below: a quarter of 256, as Qwen3.5's default): the default config's whole head
    # is not what its own forward can split
    **{
        name: {
            f"{level}.rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": factor,
            }
        }
        for names, level, factor in (
            (("glm4v", "glm4v_text"), "Glm4vTextConfig", 0.5),
            (("glm_image", "glm_image_text"), "GlmImageTextConfig", 0.5),
        )
        for name in names
    },
    # the head dim of 128 the checkpoints name (GLM-4.5's, GLM-4.5V's, Qwen3-Omni's thinker and talker): the
    # default hidden size over its heads is no even head (4096 / 96, 2048 / 28) or is not the one its
    # module's mrope_section covers (1024 / 16)
    "glm4_moe": {"Glm4MoeConfig.hidden_size": 256},
    "step3p7": {"sliding_window": 512},  # its forward builds a sliding mask whatever its layers (None raises)
    "dbrx": {"clip_qkv": 8.0},  # DBRX's checkpoints' (the default None: its attention's clamp raises)
    "esm": {"pad_token_id": 1},  # ESM-2's: its position ids count from the pad id (None: no forward)
    # its attention twice the shrunk hidden size, as its config derives it; its Mamba heads (and Bamba's,
    # GraniteMoeHybrid's) spanning the shrunk width: heads × head dim = expand × hidden size
    "zamba2": {"attention_hidden_size": 320, "mamba_headdim": 40},
    "bamba": {"mamba_n_heads": 8, "attn_layer_indices": [1], "num_hidden_layers": 2},  # Bamba-9B's kinds
    # a hybrid whose default layers are all linear attention: one attention layer, for its rotary to act
    "granitemoehybrid[position_embedding_type=rope]": {
        "layer_types": ["linear_attention", "full_attention"],
        "num_hidden_layers": 2,
        "mamba_n_heads": 8,
    },
    **{name: {"Glm4vMoeTextConfig.hidden_size": 256} for name in ("glm4v_moe", "glm4v_moe_text")},
    "qwen3_omni_moe": {
        "Qwen3OmniMoeTextConfig.hidden_size": 256,
        "Qwen3OmniMoeTalkerTextConfig.hidden_size": 256,
    },
    "qwen3_omni_moe_thinker": {"Qwen3OmniMoeTextConfig.hidden_size": 256},
    **{
        name: {
            "indexer_n_heads": 2,
            "indexer_kv_heads": 1,
            "indexer_head_dim": 64,  # at least its rotated part (a quarter of 256)
            "indexer_budget": 8,
            "indexer_compress_ratio": 4,
            "Qwen4ExpTextConfig.rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "partial_rotary_factor": 0.25,
            },
        }
        for name in ("qwen4_exp", "qwen4_exp_text")
    },
}
#: Another value of a config field that builds a positional class its model type's default config does not
#: (ESM-2's checkpoints take the rotary, the default the learned table): each is a row of its own,
#: ``type[field=value]``, built as its model type with the field set at every level that holds it.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "esm": [{"position_embedding_type": "rotary"}],
    "granitemoehybrid": [{"position_embedding_type": "rope"}],
    "zamba2": [{"use_mem_rope": True}],
    "timesfm": [{"use_positional_embedding": True}],
    "patchtsmixer": [{"use_positional_encoding": True}],
    "trocr": [{"use_learned_position_embeddings": False}],
    "wav2vec2-bert": [{"position_embeddings_type": "rotary"}, {"position_embeddings_type": "relative"}],
    "wav2vec2-conformer": [{"position_embeddings_type": "rotary"}],
    "seamless_m4t": [{"position_embeddings_type": "rotary"}],
    "xlm": [{"sinusoidal_embeddings": True}],
    "flaubert": [{"sinusoidal_embeddings": True}],
    "distilbert": [{"sinusoidal_pos_embds": True}],
}


def variant_name(model_type: str, fields: dict[str, Any]) -> str:
    """The row of ``model_type`` built with ``fields``: ``esm[position_embedding_type=rotary]``."""
    return f"{model_type}[{','.join(f'{k}={v}' for k, v in fields.items())}]"


def split_row(row: str) -> tuple[str, dict[str, Any]]:
    """A row's model type and the fields its variant sets (none for a model type's own row)."""
    model_type = row.partition("[")[0]
    for fields in VARIANTS.get(model_type, []):
        if variant_name(model_type, fields) == row:
            return model_type, fields
    return row, {}


#: Fields a model reads from a level of its config that holds them nowhere, as checkpoints give them.
_LENT_DEFAULTS = {"dropout_rate": 0.0, "shared_expert_intermediate_size": 32, "rope_theta": 500000.0}
#: Grouped convolutions' groups kept at most the shrunk width (Mimi's depthwise upsampling: 512 groups).
_GROUPS = ("upsample_groups",)
#: Config classes whose width is another config's (SAM's prompt encoder and mask decoder: its vision neck's).
#: SAM 3's geometry encoder and DETR encoder and decoder: its vision neck's too.
_WHOLE_WIDTH = (
    "PromptEncoderConfig",
    "MaskDecoderConfig",
    "GeometryEncoderConfig",
    "DETREncoderConfig",
    "DETRDecoderConfig",
)
#: Largest vocabulary kept as it is (a larger one becomes 512 where no token id needs more).
_VOCAB = 512

STATES = ("exact", "declined", "failing", "not built")
#: Positions the zoo's audits sample per band (the audit's default is 4096; the judgment is the same kind).
SAMPLES = 256


def architectures() -> list[str]:
    """Every model type of the installed transformers with a positional component (module docstring)."""
    import transformers
    from transformers.models.auto import modeling_auto

    mappings = [
        getattr(modeling_auto, name)
        for name in dir(modeling_auto)
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")
    ]
    positional = set()
    root = os.path.dirname(transformers.models.__file__)
    for path in glob.glob(os.path.join(root, "*", "modeling_*.py")):
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        if "inv_freq" in source or re.search(r"\bsin\(", source):
            positional.add(os.path.basename(os.path.dirname(path)))
    found = []
    for model_type in transformers.models.auto.configuration_auto.CONFIG_MAPPING_NAMES:
        try:
            config_class = transformers.CONFIG_MAPPING[model_type]
        except (KeyError, ImportError, AttributeError):
            continue
        if config_class.__module__.split(".")[2] not in positional:
            continue
        if any(model_type in m and isinstance(m[model_type], str) for m in mappings):
            found.append(model_type)
            found += [variant_name(model_type, fields) for fields in VARIANTS.get(model_type, [])]
    return sorted(found)


#: The auto mappings of classes that generate text, in the order the zoo prefers them: a causal LM, an
#: encoder-decoder's conditional generation class (of text, then of speech: Whisper's), a vision- or
#: audio-language model's.
GENERATING = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
)


def model_class(model_type: str) -> tuple[Any, bool]:
    """The class to build for ``model_type`` and whether it generates: the first class of
    :data:`GENERATING` that transformers has for it (an encoder-decoder's causal LM, its decoder alone,
    passed over), its greedy tokens then compared too; else the base model."""
    import transformers
    from transformers.models.auto import modeling_auto as m

    config = transformers.CONFIG_MAPPING[model_type]
    package = ".".join(config.__module__.split(".")[:-1])  # transformers.models.<its family>

    def named(name: str) -> Any:  # exported by transformers, else held by its family's modeling module
        found = getattr(transformers, name, None)
        if found is None:  # Voxtral Realtime's text model: mapped, not exported
            with contextlib.suppress(ImportError):
                modeling = importlib.import_module(f"{package}.modeling_{package.rsplit('.', 1)[-1]}")
                found = getattr(modeling, name, None)
        return found

    # an encoder-decoder's "causal LM" is its decoder alone (BartForCausalLM): its whole model is wanted
    seq2seq = getattr(config(), "is_encoder_decoder", False)
    wanted = [n for n in GENERATING if not (seq2seq and n == "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")]
    generating = [(getattr(m, name, {}), True) for name in wanted]
    for mapping, generates in (*generating, (m.MODEL_MAPPING_NAMES, False)):
        name = mapping.get(model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        if isinstance(name, str) and named(name) is not None:
            return named(name), generates
    for mapping_name in sorted(dir(m)):
        mapping = getattr(m, mapping_name)
        names = mapping_name.startswith("MODEL_FOR_") and mapping_name.endswith("_MAPPING_NAMES")
        if names and isinstance(mapping.get(model_type), str):
            found = named(mapping[model_type])
            if isinstance(found, type) and issubclass(found, transformers.PreTrainedModel):
                return found, False
    raise LookupError(f"no model class for {model_type}")


def tiny(config: Any) -> Any:
    """``config`` (and its sub-configs) shrunk in place, small enough to build in a second, its positional
    fields (rope parameters, head dims, maximum positions, M-RoPE sections) as they were; a timm backbone
    (DETR's family) becomes transformers' own, since timm here imports without torchvision only in part."""
    _shrink(config, set())
    return config


def _shrink(config: Any, seen: set[int]) -> None:
    from transformers import PretrainedConfig

    if id(config) in seen:
        return
    seen.add(id(config))
    fields = vars(config)
    for name, value in list(fields.items()):
        features = type(value).__name__ == "TimmWrapperConfig" and (
            (getattr(value, "model_args", None) or {}).get("features_only")
        )  # EdgeTAM's: timm's feature maps, a list: timm's own test network (_timm_lent), not a stand-in
        if features and isinstance(fields.get("backbone_channel_list"), list):
            value.model_args = {**value.model_args, "out_indices": _TIMM_TEST_STAGES}
            config.backbone_channel_list = _TIMM_TEST_CHANNELS[::-1]  # its neck's, deepest first
        if type(value).__name__ in ("TimmBackboneConfig", "TimmWrapperConfig") and not features:
            import transformers

            stages, sizes = [f"stage{i}" for i in range(1, 5)], [16, 32, 64, 128]
            wanted = fields.get("encoder_in_channels")  # OmDet-Turbo's: the last stages' channels
            if isinstance(wanted, (list, tuple)) and 0 < len(wanted) <= 3:
                stages, sizes = stages[-len(wanted) :], [16] * (4 - len(wanted)) + list(wanted)
            value = transformers.ResNetConfig(
                embedding_size=16, hidden_sizes=sizes, depths=[1, 1, 1, 1], out_features=stages
            )
            setattr(config, name, value)
            if isinstance(fields.get("timm_kwargs"), dict):  # timm's own arguments (an image size)
                config.timm_kwargs = {}
            if fields.get("apply_layernorm_after_vision_backbone"):  # OmDet-Turbo's norms of Swin's
                config.apply_layernorm_after_vision_backbone = False  # channels-last maps: the stand-in's
                # are channels first (its positions, the encoder's, are the same either way)
        if isinstance(value, PretrainedConfig):
            _shrink(value, seen)
    encoder, decoder = fields.get("encoder"), fields.get("decoder")
    if isinstance(getattr(decoder, "cross_attention_hidden_size", None), int):  # T5Gemma's: its encoder's
        decoder.cross_attention_hidden_size = getattr(encoder, "hidden_size", decoder.hidden_size)
    encoder, decoder = fields.get("encoder_config"), fields.get("decoder_config")  # Dia's: its encoder's
    if isinstance(getattr(decoder, "cross_hidden_size", None), int):
        decoder.cross_hidden_size = getattr(encoder, "hidden_size", decoder.cross_hidden_size)
    vision, text = fields.get("vision_config"), fields.get("text_config")  # PaliGemma's projector: text width
    projected = isinstance(getattr(vision, "projection_dim", None), int)
    if type(config).__name__ == "PaliGemmaConfig" and projected:
        vision.projection_dim = text.hidden_size
    if isinstance(fields.get("class_embed_dim"), int) and isinstance(getattr(text, "hidden_size", None), int):
        # OmDet-Turbo's: its classes (projected) and its task (as they are) come at its text tower's width
        for name in ("text_projection_in_dim", "text_projection_out_dim", "class_embed_dim"):
            setattr(config, name, text.hidden_size)
    audio, head = fields.get("audio_config"), fields.get("head_config")  # Nemotron 3's diarization head
    if isinstance(getattr(head, "audio_hidden_size", None), int):
        head.audio_hidden_size = getattr(audio, "hidden_size", head.audio_hidden_size)
    width = getattr(fields.get("global_config"), "hidden_size", None)  # BLT's: its local models read it
    for name in ("encoder_config", "decoder_config"):
        if isinstance(width, int) and isinstance(getattr(fields.get(name), "hidden_size_global", None), int):
            fields[name].hidden_size_global = width
    heads_field = "num_attention_heads" if "num_attention_heads" in fields else "num_heads"
    heads = fields.get(heads_field)  # a vision tower's (Qwen2.5-VL's: num_heads, depth) as a text model's
    hidden = fields.get("hidden_size")
    head_dim = fields.get("head_dim")
    # kept whole: a staged backbone's width (SAM 2's Hiera: its first stage's), and SAM's prompt encoder and
    # mask decoder, whose width is their vision neck's (fpn_hidden_size)
    kept = "embed_dim_per_stage" in fields or type(config).__name__.endswith(_WHOLE_WIDTH)
    if isinstance(heads, int) and isinstance(hidden, int) and heads > 0 and not kept:
        head_dim = head_dim if isinstance(head_dim, int) and head_dim > 0 else hidden // heads
        kv = fields.get("num_key_value_heads")
        setattr(config, heads_field, 2)
        for name in ("num_key_value_heads_per_layer", "num_key_value_attention_heads"):  # Sapiens2's
            if isinstance(fields.get(name), list):
                setattr(config, name, [min(v, 2) for v in fields[name]])
            elif isinstance(fields.get(name), int):
                setattr(config, name, min(fields[name], 2))
        if isinstance(kv, int):
            config.num_key_value_heads = 1 if kv < heads else 2
        elif "num_key_value_heads" in fields and kv is None:  # Nemotron's default: None (as many as heads)
            config.num_key_value_heads = 2
        config.hidden_size = 2 * head_dim  # an explicit head_dim keeps its own; else hidden / heads
        if "head_dim" in fields and fields["head_dim"] is None:  # read as hidden / heads by its config
            config.head_dim = head_dim
    if isinstance(fields.get("quantization_dim"), int) and "semantic_model_config" in fields:
        config.quantization_dim = 2 * config.hidden_size  # XCodec2's: its acoustic and semantic widths
    for name in _GROUPS:
        if isinstance(fields.get(name), int) and isinstance(config.hidden_size, int):
            setattr(config, name, min(fields[name], config.hidden_size))
    if isinstance(fields.get("num_queries"), int) and fields["num_queries"] > _QUERIES:
        config.num_queries = _QUERIES
    if fields.get("use_timm_backbone"):
        config.use_timm_backbone = False
        config.backbone = None
    if fields.get("use_pretrained_backbone"):
        config.use_pretrained_backbone = False
    # the kinds of layer, each kept once (a hybrid's attention layers among its recurrent ones)
    kinds = next((name for name in _LAYER_KINDS if isinstance(fields.get(name), (list, tuple))), None)
    types = fields.get(kinds) if kinds else None
    distinct = list(dict.fromkeys(types)) if types else None
    old_layers = fields.get("num_hidden_layers")
    for name in _LAYERS:
        if isinstance(fields.get(name), int) and fields[name] > 0:
            setattr(config, name, len(distinct) if distinct and name == "num_hidden_layers" else 1)
    layers = fields.get("num_hidden_layers")
    if isinstance(old_layers, int) and isinstance(layers, int) and old_layers > layers:
        for name, value in list(fields.items()):  # a field per layer (Gemma 3n's intermediate_size): cut
            if name != "layer_types" and isinstance(value, list) and len(value) == old_layers:
                setattr(config, name, value[:layers])
    if distinct:
        setattr(config, kinds, distinct)
        if isinstance(fields.get("hybrid_layer_ids"), list):  # Zamba2's: its hybrid layers' indices
            config.hybrid_layer_ids = [i for i, kind in enumerate(distinct) if kind == "hybrid"]
    if "task_seq_len" in fields and isinstance(fields.get("decoder_layers"), int):  # OneFormer's runs L - 1
        config.decoder_layers = 2
    if isinstance(fields.get("num_upscale_blocks"), int) and isinstance(fields.get("num_blocks"), int):
        config.num_blocks = min(fields["num_blocks"], config.num_hidden_layers)  # EoMT's: its last layers
    if isinstance(fields.get("num_kv_shared_layers"), int):  # Gemma 3n's: none shared among so few layers
        config.num_kv_shared_layers = 0
    widths = {k: 64 for k in fields if k.endswith("intermediate_size")}
    for name, size in {**widths, **_WIDTHS, **_EXPERTS}.items():
        if isinstance(fields.get(name), int) and fields[name] > size:
            setattr(config, name, size)
        elif isinstance(fields.get(name), list) and all(isinstance(v, int) for v in fields[name]):
            setattr(config, name, [min(v, size) for v in fields[name]])
    experts = ("num_experts", "n_routed_experts", "num_local_experts")
    routed = any(isinstance(fields.get(k), int) for k in experts)
    if routed and "num_experts_per_tok" in fields and fields["num_experts_per_tok"] is None:
        config.num_experts_per_tok = _EXPERTS["num_experts_per_tok"]  # DeepSeek-V2's default: None (no top-k)
    if "vocab_size" in fields and fields["vocab_size"] is None:  # ESM's default: None (a checkpoint's own)
        config.vocab_size = _VOCAB
    if "prediction_length" in fields and fields["prediction_length"] is None:  # time-series models': None
        config.prediction_length = 4  # and the context, which their __init__ sets to it
        config.context_length = config.context_length or 4
    vocab = fields.get("vocab_size")
    ids = [v for k, v in fields.items() if k.endswith("token_id") and isinstance(v, int)]
    ids += [i for k, v in fields.items() if k.endswith("token_id") and isinstance(v, list) for i in v]
    if isinstance(vocab, int) and vocab > _VOCAB and all(i < _VOCAB for i in ids if isinstance(i, int)):
        config.vocab_size = _VOCAB
    if isinstance(fields.get("encoder_hash_byte_group_vocab"), int):  # BLT's hash embeddings: 500 002 rows
        config.encoder_hash_byte_group_vocab = min(fields["encoder_hash_byte_group_vocab"], _VOCAB)
    if isinstance(fields.get("vocab_size_per_layer_input"), int):  # Gemma 3n's per-layer embeddings
        config.vocab_size_per_layer_input = min(fields["vocab_size_per_layer_input"], _VOCAB)


def brief(text: str, limit: int) -> str:
    """``text`` if it has at most ``limit`` characters, else cut after its last clause (``;``, ``:``, ``,``)
    or word that fits, with an ellipsis: a table's cell never ends inside a word."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = max(head.rfind(mark) for mark in ("; ", ": ", ", "))
    cut = cut if cut > limit // 2 else head.rfind(" ")
    return head[: cut if cut > 0 else limit - 1].rstrip(" ;:,") + " …"


def _reasons(components: list[Any]) -> str:
    """Why ``components`` were left alone: each distinct reason once, in order, briefly, with how many
    components it stands for where more than one."""
    counted: dict[str, int] = {}
    for c in components:
        counted[c.reason] = counted.get(c.reason, 0) + 1
    return "; ".join(
        brief(reason, 200) + (f" ({n} components)" if n > 1 else "") for reason, n in counted.items()
    )


@dataclasses.dataclass
class Outcome:
    """One architecture through the zoo: ``state`` (:data:`STATES`), ``components`` (path [kind]: what
    patch said), ``why`` (for declined and failing: the reason; for exact: how it was proven)."""

    model_type: str
    state: str
    components: list[str]
    why: str


def _inputs(model: Any) -> dict[str, Any] | str:
    """The probe inputs posenc's own forward proof uses (:func:`posenc.torch.probe.inputs_of`), or why
    there are none."""
    from posenc.torch.probe import inputs_of

    return inputs_of(model)


@dataclasses.dataclass(frozen=True)
class AtCall:
    """An input made from the model at each run (:func:`_output`): what its pipeline computes with the
    model's own components (a rotary of its ``rope``: the patched one after the patch) or state the forward
    writes (a fresh cache each run)."""

    make: Callable[[Any], Any]


def _output(model: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """The main output of ``model`` on ``inputs`` (an :class:`AtCall` made from it now); a model with no
    forward of its own, its parts' (posenc's :func:`posenc.torch.probe.outputs`) flattened into one."""
    from posenc.torch.probe import outputs

    if "inference_session" in inputs:  # a video model's session (:func:`_session`): a fresh copy each run
        inputs = {**inputs, "inference_session": copy.deepcopy(inputs["inference_session"])}
    inputs = {k: v.make(model) if isinstance(v, AtCall) else v for k, v in inputs.items()}
    torch.manual_seed(0)  # a forward that draws (ViT-MAE's random masking) draws the same each time
    with torch.no_grad():
        out = outputs(model, inputs)
    return torch.cat([v.flatten() for v in out.values()]) if isinstance(out, dict) else out


def build(row: str) -> tuple[Any, Any, bool]:
    """The tiny model of ``row`` (a model type, or one of its :data:`VARIANTS`; eval mode, seeded weights),
    its config and whether it generates."""
    import transformers

    model_type, variant = split_row(row)
    config = tiny(transformers.CONFIG_MAPPING[model_type]())
    fields = {**_CHECKPOINT_FIELDS.get(model_type, {}), **_CHECKPOINT_FIELDS.get(row, {}), **variant}
    for name, value in fields.items():
        owner, _, field = name.rpartition(".")
        levels = [v for v in _levels(config) if field in vars(v) and owner in ("", type(v).__name__)]
        if name in variant and not levels:
            raise LookupError(f"{row}: no level of {type(config).__name__} holds {field}")
        for level in levels:
            setattr(level, field, copy.deepcopy(value))
    cls, generates = model_class(model_type)
    transformers.utils.logging.disable_progress_bar()
    wanted = getattr(cls, "config_class", None)
    if isinstance(wanted, type) and not isinstance(config, wanted):  # Llama 4's causal LM: its text config
        config = next((v for v in vars(config).values() if isinstance(v, wanted)), config)
    for attempt in range(8):  # a field its default config leaves to a sub-config, lent as config.json has it
        torch.manual_seed(0)
        try:
            with warnings.catch_warnings(), _timm_lent(config), _NoGarbage():
                warnings.simplefilter("ignore")
                return cls(config).eval(), config, generates
        except AttributeError as error:
            if attempt == 7 or not _lend(config, str(error)):
                raise
    raise AssertionError("unreachable")


class _NoGarbage(torch.overrides.TorchFunctionMode):
    """While a tiny model is built, ``torch.empty`` and its kin give zeros: a parameter its class makes empty
    and its ``_init_weights`` leaves alone (Qwen3-Omni's talker experts) holds zeros, not whatever the
    memory held — NaN in some runs, which made its talker's outputs NaN and its forward "not compared" from
    run to run. Every tensor its init fills is filled as before, from the same random draws."""

    EMPTY = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func in self.EMPTY and isinstance(out, torch.Tensor) and out.device.type != "meta":
            with torch.no_grad():
                out.zero_()
        return out


def _own_error(model: Any, inputs: dict[str, Any], before: torch.Tensor, exact: bool = False) -> float | None:
    """How far the patched ``model``'s original (a copy, unpatched, run in float64) is from its float32
    outputs ``before``: the model's own float32 error on ``inputs``; None where it cannot run in float64.
    ``exact``: the copy keeps the patch, so its positions are exact too (a component that computes in
    float32 at any dtype, diffusers' timestep embedding, keeps its float32 error in the unpatched run)."""
    import posenc.torch as pt

    def wide(value: Any) -> Any:  # a composite's inputs are its parts'; a list's, its items
        if isinstance(value, dict):
            return {k: wide(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(wide(v) for v in value)
        return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value

    wide_inputs = wide(inputs)
    try:
        twin = copy.deepcopy(model)
        if not exact:
            pt.unpatch(twin)
        if hasattr(twin, "set_experts_implementation"):  # grouped matmuls take no float64
            with contextlib.suppress(Exception):
                twin.set_experts_implementation("eager")
        wide = _output(twin.double(), wide_inputs)
        gap = (wide - before.double()).abs()[torch.isfinite(before)]  # where its float32 run is finite
        largest = float(gap.max()) if gap.numel() else math.nan
        return largest if math.isfinite(largest) else None  # a NaN of its float64 run: no measure
    except Exception:
        return None


def _lend(config: Any, error: str) -> bool:
    """Where building failed on ``'XConfig' object has no attribute 'field'`` (a default config of
    transformers that holds the field in another level only: Llama 4's ``pad_token_id`` in its
    ``text_config``, DBRX's ``rope_theta`` above its ``attn_config``), set the field on that config from the
    nearest level that holds it, as a checkpoint's config.json gives it (where none does, its
    :data:`_LENT_DEFAULTS` value). Whether one was lent."""
    found = re.fullmatch(r"'(\w+)' object has no attribute '(\w+)'", error)
    if found is None:
        return False
    owner_name, field = found.groups()
    owners = [level for level in _levels(config) if type(level).__name__ == owner_name]
    owners = [level for level in owners if field not in vars(level)]
    lender = next((level for level in _levels(config) if field in vars(level)), None)
    if not owners or (lender is None and field not in _LENT_DEFAULTS):
        return False
    setattr(owners[0], field, vars(lender)[field] if lender is not None else _LENT_DEFAULTS[field])
    return True


@contextlib.contextmanager
def _timm_lent(config: Any) -> Any:
    """Where a level of ``config`` names a timm architecture (Gemma 3n's vision tower, a
    ``TimmWrapperModel``): timm as :func:`tests.support.zoo_timm.imported` gives it (transformers counts it
    missing without torchvision), lent to transformers' wrapper while the model is built, and the
    architecture timm's own tiny test network (the tower's positions are none: it is built, not judged)."""
    timm_levels = [level for level in _levels(config) if isinstance(vars(level).get("architecture"), str)]
    if not timm_levels:
        yield
        return
    from transformers.models.timm_wrapper import modeling_timm_wrapper
    from transformers.utils import import_utils

    from tests.support import zoo_timm

    for level in timm_levels:
        level.architecture = "test_efficientnet"
    saved = {k: import_utils.BACKENDS_MAPPING[k] for k in ("timm", "vision")}
    had = getattr(modeling_timm_wrapper, "timm", None)
    modeling_timm_wrapper.timm = zoo_timm.imported()
    for key, (_, message) in saved.items():
        import_utils.BACKENDS_MAPPING[key] = (lambda: True, message)
    try:
        yield
    finally:
        import_utils.BACKENDS_MAPPING.update(saved)
        if had is None:
            del modeling_timm_wrapper.timm
        else:
            modeling_timm_wrapper.timm = had


def _levels(config: Any) -> list[Any]:
    """Every level of ``config`` (itself and its sub-configs), breadth first."""
    from transformers import PretrainedConfig

    levels, queue = [], [config]
    while queue:
        node = queue.pop(0)
        if all(node is not level for level in levels):
            levels.append(node)
            queue += [v for v in vars(node).values() if isinstance(v, PretrainedConfig)]
    return levels


def run(model_type: str) -> Outcome:
    """``model_type`` through audit → patch → audit → forward → generate → unpatch (module docstring)."""
    built: dict[str, bool] = {}

    def make() -> Any:
        model, _, built["generates"] = build(model_type)
        return model

    return judge(model_type, make, generates=lambda: built.get("generates", False), probe=_session)


def _session(model: Any) -> list[dict[str, Any]]:
    """For a video model whose forward takes a stateful ``inference_session`` (SAM 2's, SAM 3's tracker's,
    EdgeTAM's): a session of a two-frame clip at its ``image_size``, one point on its first frame, that
    frame run (its memory written), and frame 1 to run from a copy of it each time (:func:`_output`), so
    memory attention reads its rotary. Its object-score head's last layer is set to say "present" (weights
    0, bias 10): with random weights the object is judged absent and every mask is filled with −1024, a
    constant no change of positions could move. Else no candidates."""
    import inspect

    parameters = inspect.signature(model.forward).parameters
    if "inference_session" not in parameters:
        return []
    kind = parameters["inference_session"].annotation
    kind = kind if isinstance(kind, type) else getattr(sys.modules[type(model).__module__], str(kind), None)
    size = getattr(model.config, "image_size", None)
    scores = getattr(getattr(model, "mask_decoder", None), "pred_obj_score_head", None)
    head = getattr(scores, "proj_out", None)
    if not isinstance(kind, type) or not isinstance(size, int) or not isinstance(head, torch.nn.Linear):
        return []
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(10.0)
    clip = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    session = kind(video=clip, video_height=size, video_width=size, dtype=torch.float32)
    point = {"point_coords": torch.tensor([[[[size / 2, size / 2]]]]), "point_labels": torch.tensor([[[1]]])}
    session.add_point_inputs(session.obj_id_to_idx(1), 0, point)
    session.obj_with_new_inputs = [1]
    with torch.no_grad():
        model(inference_session=session, frame_idx=0)
    return [{"inference_session": session, "frame_idx": 1}]


#: The greedy decode the zoo compares before and after a patch: new tokens after the probe's first ones.
GREEDY_PROMPT, GREEDY_TOKENS = 8, 6
#: A gap between the two best logits below which a step is a tie the model's own float32 error may flip.
GREEDY_TIE = 1e-3


def _greedy(model: Any, inputs: dict[str, Any] | None) -> tuple[torch.Tensor, list[float]] | str:
    """The model's greedy tokens from the probe's first :data:`GREEDY_PROMPT` ids (its decode path: cached
    keys, a position offset a step) — a speech encoder-decoder's from the probe's audio features — and the
    gap between its two best logits at each step; else why not."""
    inputs = inputs or {}
    if any(isinstance(v, dict) for v in inputs.values()):  # Qwen2.5-Omni's: a model of parts
        return "a model of parts: its generate runs them in turn and samples its talker"
    ids = inputs.get("input_ids")
    audio = {k: v for k, v in inputs.items() if k in ("input_features", "input_values")}  # Whisper, Moonshine
    if isinstance(ids, torch.Tensor):
        prompt = ids[:, :GREEDY_PROMPT]
        given = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
    elif len(audio) == 1 and getattr(model.config, "is_encoder_decoder", False):
        given = audio
    else:
        return "no token ids to generate from"
    if not hasattr(model, "generate"):
        return "no generate"
    try:
        torch.manual_seed(0)  # a generate that draws (a block diffusion's masks) draws the same each time
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.generate(
                **given,
                max_new_tokens=GREEDY_TOKENS,
                min_new_tokens=GREEDY_TOKENS,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
            )
    except Exception as error:  # the harness's call, not posenc's: said, not judged
        return f"its generate raised {type(error).__name__}: {str(error)[:80]}"
    sequences = getattr(out, "sequences", out)
    if not isinstance(sequences, torch.Tensor):
        return f"its generate gives {type(out).__name__}, not token ids"
    # no scores (DiffusionGemma's block diffusion): no step is a tie, any changed token fails
    scores = getattr(out, "scores", None) or ()
    gaps = [float((lambda top: top[0] - top[1])(s[0].float().topk(2).values)) for s in scores]
    gaps += [math.inf] * (GREEDY_TOKENS - len(gaps))
    return sequences[:, -GREEDY_TOKENS:], gaps  # the new tokens (an encoder-decoder's: its decoder's)


def _same_greedy(before: tuple[torch.Tensor, list[float]] | str, after: Any) -> tuple[str, str | None]:
    """(what the comparison of greedy decodes says for an exact model, a problem or None)."""
    if isinstance(before, str):  # it does not generate (nothing to say), or no greedy decode before the patch
        quiet = before == "it does not generate"
        return ("" if quiet else f"greedy tokens not compared ({before})"), None
    if isinstance(after, str):
        return "", f"greedy decoding after the patch failed ({after})"
    tokens, gaps = before
    if torch.equal(tokens, after[0]):
        return f"greedy tokens unchanged ({tokens.shape[1]})", None
    step = int((tokens != after[0]).any(0).nonzero()[0])
    if gaps[step] < GREEDY_TIE:  # two logits nearer than float32 code holds them apart
        return f"greedy tokens equal up to a tie at step {step} (gap {gaps[step]:.2g})", None
    return "", f"greedy tokens changed after the patch at step {step} (its logit gap {gaps[step]:.3g})"


def judge(
    model_type: str,
    make: Callable[[], Any],
    folder: bool = True,
    probe: Callable[[Any], list[dict[str, Any]] | str] | None = None,
    generates: Callable[[], bool] = lambda: False,
) -> Outcome:
    """The model ``make()`` builds through audit → patch → audit → forward → unpatch, as :func:`run` (the
    diffusers zoo, ``tests/support/zoo_diffusers.py``, builds its models its own way; ``folder``: whether
    ``posenc audit DIR`` is to read its saved folder, a transformers model's; ``probe``: candidate inputs
    for its forward, the first it runs on compared before and after, where posenc's own are none (or why
    its forward cannot run alone);
    ``generates``: whether the model built generates, its greedy tokens then compared too)."""
    import posenc
    import posenc.torch as pt
    from posenc.torch.patching import COMPUTED

    try:
        model = make()
        own = _inputs(model)
        drawn = probe(model) if probe is not None else []  # or why its forward cannot be run alone
        candidates = [None if isinstance(own, str) else own] + ([] if isinstance(drawn, str) else drawn)
        inputs = before = None
        # why posenc has none, where nothing else is tried (the diffusers and timm zoos try their own)
        why = own if isinstance(own, str) and probe is None else "no probe inputs for its kind"
        why = drawn if isinstance(drawn, str) else why
        unprobed = f"forward not probed ({why})"
        for candidate in (c for c in candidates if c is not None):
            try:  # probe inputs its forward does not take (a detector that wants text too): the next
                before, inputs = _output(model, candidate), candidate
                break
            except Exception as error:
                unprobed = f"forward not run: it raised {type(error).__name__} on the probe inputs"
                continue
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        greedy = _greedy(model, inputs) if generates() else "it does not generate"
    except Exception as error:  # the harness's own limit, not posenc's
        return Outcome(model_type, "not built", [], f"{type(error).__name__}: {str(error)[:160]}")
    try:
        audit = posenc.audit(model, samples=SAMPLES)
        folder = _from_folder(model, audit) if folder else ""
        report = pt.patch(model)
    except Exception as error:
        return Outcome(model_type, "failing", [], f"posenc raised {type(error).__name__}: {str(error)[:200]}")
    components = [brief(c.as_text(), 300) for c in report.components]
    within = partial = ""
    compared = before is not None
    problems = [folder] if folder.startswith(("posenc audit DIR judges", "posenc audit DIR raised")) else []
    try:
        after = _output(model, inputs) if inputs is not None else None
        moved = report.replaced and before is not None
        kept = torch.isfinite(before) if moved and after.shape == before.shape else None
        if kept is not None and not torch.equal(torch.isfinite(after), kept):  # NaN or ∞ moved: never equal
            problems.append("outputs not finite in the same places after the patch")
            moved = False
        elif kept is not None and not bool(kept.any()):  # nothing to compare: no evidence either way
            unprobed = "forward not compared: its outputs are not finite anywhere"
            compared = moved = False
        elif kept is not None and not bool(kept.all()):  # compared where they are finite, and said so
            partial = f" ({int((~kept).sum())} of {kept.numel()} outputs not finite, in the same places)"
        pair = (after[kept], before[kept]) if kept is not None else None  # where both are finite
        close = moved and pair is not None and torch.allclose(*pair, atol=1e-4, rtol=1e-4)
        if moved and not close:
            own = _own_error(model, inputs, before) if pair is not None else None
            change = float((pair[0] - pair[1]).abs().max()) if pair is not None else math.inf
            if own is not None and change <= 2 * own:  # exact positions move them less than float32 does
                within = f"outputs within its own float32 error ({change:.2g}; its float64 run: {own:.2g})"
            else:  # its float64 run may keep float32 positions: measured again with exact ones, and held
                # to the forward proof's bound too (a wrong layout moves the outputs by their own size)
                from posenc.torch.probe import agree

                exact = _own_error(model, inputs, before, exact=True) if own is not None else None
                if exact is None or change > 2 * exact or agree(before, after) is not None:
                    problems.append(f"outputs changed after the patch by {change:.3g}")
                else:
                    within = (
                        f"outputs within its own float32 error ({change:.2g}; its float64 run: {own:.2g}, "
                        f"with exact positions {exact:.2g}: its float32 positions' error) and 1e-3 of "
                        "their size"
                    )
        audit_after = posenc.audit(model, samples=SAMPLES)
    except Exception as error:
        problems.append(f"after the patch: {type(error).__name__}: {str(error)[:200]}")
        audit_after = None
    decoded, problem = _same_greedy(greedy, _greedy(model, inputs) if report.replaced else greedy)
    problems += [problem] if problem else []
    judged = {c.path: c for c in getattr(audit, "components", [])}
    for c in report.skipped:
        seen = judged.get(c.path)
        if seen is not None and seen.judged and not seen.passed and "learned" in c.reason:
            problems.append(f"{c.path}: audit failed it as a sinusoid, patch: {c.reason[:100]}")
    pt.unpatch(model)
    try:
        restored = _output(model, inputs) if inputs is not None else None
        if before is not None and not same_bits(restored, before):
            problems.append("unpatch did not restore the outputs bit for bit")
    except Exception as error:
        problems.append(f"after unpatch: {type(error).__name__}: {str(error)[:160]}")
    now = model.state_dict()
    if now.keys() != state.keys() or any(not same_bits(now[k], v) for k, v in state.items()):
        problems.append("unpatch did not restore the state dict")
    computed = [
        c.variant for c in report.components if c.kind == "computed" and c.reason.startswith(COMPUTED)
    ]
    if computed:
        problems.append(
            f"positional sinusoids computed in forward, found but not judged: {', '.join(computed[:3])}"
        )
    learned = [c for c in report.skipped if c.variant == "learned"]
    unknown = [c for c in report.skipped if c.variant == "unknown"]  # a buffer no sinusoid comes near
    zeros = [c for c in report.skipped if c.variant == "zeros"]  # no values: a checkpoint's to fill
    exact = [c for c in report.components if c.replaced or c.reason == "already exact"]
    left = [c for c in report.skipped if c not in learned + unknown + zeros and c not in exact]
    if audit_after is not None and exact and not left and not getattr(audit_after, "passed", True):
        problems.append("the audit after the patch does not pass")
    if problems:
        return Outcome(model_type, "failing", components, "; ".join(problems))
    if left:
        return Outcome(model_type, "declined", components, _reasons(left))
    unseen = _unseen_positional(model, report)
    if unseen:
        why = f"positional sinusoids computed in forward, not found: {', '.join(unseen[:3])}"
        return Outcome(model_type, "failing", components, why)
    others = [variant_name(model_type, fields) for fields in VARIANTS.get(model_type, [])]
    elsewhere = f" (at its default config; {', '.join(others)}: another row)" if others else ""
    if not report.components:
        # a statement of what posenc's search found, not of the model's code: a sinusoid its search does not
        # recognise (a helper of another name, a class of no positional name) may be there
        why = f"posenc finds no positional sinusoid or rotary in the model built{elsewhere}"
        return Outcome(model_type, "declined", components, why + ": nothing to judge")
    if not exact and (unknown or zeros):
        return Outcome(model_type, "declined", components, _reasons(unknown + zeros) + elsewhere)
    if not exact:
        reason = (
            f"learned positions only ({len(learned)} table(s)){elsewhere}: nothing sinusoidal to make exact"
        )
        return Outcome(model_type, "declined", components, reason)
    how = "outputs within 1e-4" if compared else unprobed
    how = (within or how) + (partial if compared else "")
    how += f"; {decoded}" if decoded and report.replaced else ""
    how += f"; {folder}" if folder else ""
    how += f"; {len(learned)} learned table(s) not judged" if learned else ""
    how += f"; {len(unknown)} table(s) of a formula posenc does not know not judged" if unknown else ""
    how += f"; {len(zeros)} table(s) of zeros (no values to judge) not judged" if zeros else ""
    return Outcome(model_type, "exact", components, how)


#: A sine computed in a class's source: ``sin(``, ``.sin()``, ``polar(``, or a call of diffusers' helpers
#: that compute one (``get_1d_rotary_pos_embed``, ``get_2d_sincos_pos_embed``, ``get_timestep_embedding``).
_SINE = r"\bsin\(|\.sin\(\)|\bpolar\(|sincos_pos_embed|rotary_pos_embed|get_timestep_embedding"
#: A call of diffusers' helpers: positional whatever the class is named (Stable Audio's model computes its
#: rotary in its own forward).
_HELPERS = r"sincos_pos_embed|rotary_pos_embed|get_timestep_embedding"


def _unseen_positional(model: Any, report: Any) -> list[str]:
    """The classes of ``model``'s modules that look positional (their name — position, sine, rotary,
    timestep, pos embed — or a method's: ``relative_positional_encoding``, ``get_position_embeds``) and
    compute a sine in their source (:data:`_SINE`), or that call a helper that does (:data:`_HELPERS`),
    where no component the patch found is theirs: sinusoids computed in ``forward`` that posenc did not
    find."""
    import inspect

    from posenc.torch.patching import ran_nothing

    found = {c.path.rpartition(".")[0] if c.kind == "table" else c.path for c in report.components}
    seen = {type(model.get_submodule(p)) for p in found if "*" not in p and _has(model, p)}
    unseen = []
    # a module that holds no positional embedding says so (diffusers' PatchEmbed with pos_embed None)
    # and one whose __init__ alone computes a sinusoid, holding nothing, never ran that branch (U-ViT's)
    live = (m for m in model.modules() if getattr(m, "pos_embed", True) is not None and not ran_nothing(m))
    for cls in dict.fromkeys(type(m) for m in live):
        if cls in seen or cls.__module__.startswith("torch."):
            continue
        try:
            source = inspect.getsource(cls)
        except (OSError, TypeError):
            continue
        named = re.search(r"posit|sine|sinus|rotary|rope|timestep|pos_?embed|embed_?nd", cls.__name__, re.I)
        method = re.search(r"def \w*(posit|sinusoid)\w*\(", source)
        if ((named or method) and re.search(_SINE, source)) or re.search(_HELPERS, source):
            unseen.append(cls.__name__)
    return unseen


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` hold the same bits (shape, dtype and every value: a NaN equals a NaN of the
    same bits, which ``torch.equal`` denies — a weight no init wrote holds whatever its memory held, NaNs
    too)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() and a.element_size() in (2, 4, 8):
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        return torch.equal(a.contiguous().view(bits), b.contiguous().view(bits))
    return torch.equal(a, b)


def _has(model: Any, path: str) -> bool:
    try:
        model.get_submodule(path)
    except AttributeError:
        return False
    return True


def _judgments(audit: Any) -> dict[str, str]:
    """Each component's judgment: exact, inexact or not judged."""
    components = getattr(audit, "components", [])
    return {
        f"{c.path}/{c.layer_type}": "not judged" if not c.judged else "exact" if c.passed else "inexact"
        for c in components
    }


def _from_folder(model: Any, audit: Any) -> str:
    """``posenc audit DIR`` on the model saved to a folder must judge each component as the in-process
    audit does: "" where it does, "posenc audit DIR ..." (a failure) where not, or a note where the harness
    cannot save the model or posenc refuses the folder with its reason."""
    import tempfile

    import posenc
    from posenc.auditor import ModelDirectoryError

    with tempfile.TemporaryDirectory() as folder:
        try:
            model.save_pretrained(folder)
        except Exception as error:
            return f"its folder not audited (save_pretrained: {type(error).__name__})"
        try:
            with _timm_lent(model.config):  # a folder of Gemma 3n's: transformers builds its timm tower
                read = posenc.audit(folder, samples=SAMPLES)
        except ModelDirectoryError as refusal:
            said = str(refusal).replace(folder, "DIR")  # the same words each run, not a temporary's name
            return f"posenc audit DIR refuses its folder: {said[:120]}"
        except Exception as error:
            said = str(error).replace(folder, "DIR")
            return f"posenc audit DIR raised {type(error).__name__}: {said[:160]}"
    mine, theirs = _judgments(audit), _judgments(read)

    # the folder's model may be built as another class of the family (its base model): paths by suffix
    def same(m: str, k: str) -> bool:  # "path/layer type": a suffix of the path, or the root's component
        (mp, _, mt), (kp, _, kt) = m.rpartition("/"), k.rpartition("/")
        return mt == kt and (mp == kp or mp.endswith("." + kp) or (not kp and "." not in mp))

    # the nearest of mine to each of theirs: "model.rotary_emb" for "rotary_emb", not a deeper one so named
    paired = {k: min((m for m in mine if same(m, k)), key=len, default=None) for k in theirs}
    differ = [k for k, m in paired.items() if m is None or mine[m] != theirs[k]]
    differ += [m for m in mine if m not in paired.values()]
    if differ:
        said = "; ".join(
            f"{k}: {theirs.get(k)} where in process {mine.get(paired.get(k) or k)}" for k in differ[:2]
        )
        return f"posenc audit DIR judges otherwise ({said})"
    return "posenc audit DIR agrees"


def check_recorded(data: Any, every: list[str], subset: dict[str, str], least: int) -> None:
    """The recorded outcomes (``data``: a zoo's JSON file) list exactly the enumeration ``every`` (at least
    ``least`` of them), each in a state with its reason, and ``subset``'s are among them."""
    import json

    recorded = json.loads(data.read_text())
    assert len(every) > least and set(recorded) == set(every), set(recorded) ^ set(every)
    assert all(o["state"] in STATES and o["why"] for o in recorded.values())
    assert set(subset) <= set(every)


def check_outcome(outcome: Outcome, wanted: str, data: Any) -> None:
    """``outcome`` ends in ``wanted`` and in the state its zoo's JSON file ``data`` records; declined with a
    reason, not a crash."""
    import json

    assert outcome.state == wanted, outcome
    assert outcome.state == json.loads(data.read_text())[outcome.model_type]["state"]
    if outcome.state == "declined":
        assert outcome.why and "raised" not in outcome.why.split(":")[0]


def timed(
    model_type: str, seconds: int = 60, runner: Callable[[str], Outcome] | None = None
) -> tuple[Outcome, float]:
    """``runner`` (:func:`run` by default) within ``seconds`` (SIGALRM, main thread): an architecture that
    takes longer is "not built" (its tiny config is still too big for the harness), with the time it
    took."""
    import signal
    import time

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"over {seconds} s")

    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        outcome = (runner or run)(model_type)
    except TimeoutError as error:
        outcome = Outcome(model_type, "not built", [], f"the harness gave up: {error}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return outcome, time.perf_counter() - start


if __name__ == "__main__":  # pragma: no cover - a quick look: python -m tests.support.zoo [TYPE ...]
    import sys

    for name in sys.argv[1:] or architectures():
        outcome, took = timed(name)
        print(f"{outcome.model_type}: {outcome.state} — [{took:.1f} s] {outcome.why[:300]}", flush=True)
