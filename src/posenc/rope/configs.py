"""Reading a model's rotary parameters: :func:`config` turns a Hugging Face model config (a dict, a path to a
``config.json``, a transformers config object, or keywords) into a :class:`RopeParameters`,
with the defaults transformers uses for the fields a config leaves out (:mod:`posenc.rope.parameters`).

Where the fields are read (the conventions of transformers' configs; first match wins):

* the RoPE dict: ``rope_scaling`` (the legacy name), else ``rope_parameters`` (transformers 5);
* ``rope_type`` (legacy: ``type``) in that dict, default ``"default"``; the legacy names ``"mrope"``
  (Qwen2-VL) and ``"su"`` (early Phi-3) mean ``"default"`` and ``"longrope"``;
* ``base`` (θ): ``rope_theta`` in the RoPE dict, the top-level ``rope_theta``, GPT-NeoX's
  ``rotary_emb_base``, else 10000;
* ``partial_rotary_factor``: in the RoPE dict, at top level, ``rotary_pct`` (GPT-NeoX reads only it,
  default 0.25), MiniMax-M2's ``rotary_dim`` over ``head_dim``, else the default of the model_type's
  config class (:data:`CLASS_PARTIAL_ROTARY_FACTORS`; Bamba's 0.5 whatever its top level says), else 1;
* ``head_dim``: ``qk_rope_head_dim`` (DeepSeek-V2/V3: the rotary part of the MLA head; with a partial
  factor, ``head_dim`` × factor, as Mistral 4 and DeepSeek-V4 give it), ``head_dim`` (JetMoE's
  ``kv_channels``; Zamba2's 2 · hidden_size // num_attention_heads, as their classes set), a layer type's own
  width (``per_layer_config``; Gemma 4's full attention: ``global_head_dim``, default 512),
  else ``hidden_size // num_attention_heads`` (DBRX's names: ``d_model // n_heads``, its theta in
  ``attn_config``, its length ``max_seq_len``; an encoder-decoder that names its heads per side, Moonshine:
  ``encoder_num_attention_heads`` where it equals ``decoder_num_attention_heads``);
* ``original_max_position_embeddings`` (llama3, yarn, longrope): at top level (Phi-3 keeps it there, and
  transformers gives that copy priority; not for a RoPE dict nested per layer type), in the RoPE dict, else
  ``max_position_embeddings``;
* ``mrope_interleaved``: in the RoPE dict, unless the model_type's code fixes how its sections combine
  (:data:`MROPE_FORMS`); ``mrope_section``: in the RoPE dict, else the one the model_type's code takes
  (:data:`MROPE_SECTIONS`) where it fills the rotary width;
* a multimodal config that nests its language model in ``text_config`` is read from ``text_config``, with
  the top-level fields as fallback;
* a RoPE dict nested per layer type (``{"full_attention": {...}, "sliding_attention": {...}}``, Gemma 3
  as transformers 5 saves it) needs ``layer_type=`` to pick one; :func:`layer_types` lists them;
* the integer fields (``head_dim``, ``hidden_size``, ``num_attention_heads``, ``max_position_embeddings``,
  ``original_max_position_embeddings``, ``mrope_section``) may be whole floats, as some saved configs
  write them (``"original_max_position_embeddings": 4096.0``): posenc's one rule for them,
  :func:`posenc.validation.integer` with ``integral_floats=True``, read from a config only; keywords
  (``config(head_dim=...)``, the ``mrope_section`` of ``config(scaling=...)``) and :class:`RopeParameters`
  take integers, like every other argument.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import warnings
from collections.abc import Mapping
from typing import Any

from .. import validation
from ..errors import PosencTypeError, PosencValueError
from .kinds import SCALING_FIELDS, named
from .parameters import (
    DEFAULT_BASE,
    PLAIN_SCALING_FIELDS,
    RopeParameters,
    check_context,
    check_head_dim,
    check_mrope_entries,
    check_partial_rotary_factor,
)

#: The most bytes a config.json read by path may hold (a model's is a few KiB; a model folder audited: the
#: same bound).
CONFIG_BYTES = 16 << 20

#: Keys a (flat) RoPE dict may hold: a dict without any of them whose values are dicts is nested per layer.
_ROPE_KEYS = frozenset(
    {
        *("rope_type", "type", "rope_theta", "partial_rotary_factor", "original_max_position_embeddings"),
        *PLAIN_SCALING_FIELDS,
        *("beta_fast", "beta_slow", "truncate", "mrope_section", "mrope_interleaved", "interleaved"),
    }
)


def config(
    cfg: Any = None,
    /,
    *,
    head_dim: int | None = None,
    base: float | None = None,
    scaling: Mapping[str, Any] | None = None,
    partial_rotary_factor: float | None = None,
    max_position_embeddings: int | None = None,
    layer_type: str | None = None,
) -> RopeParameters:
    """The :class:`RopeParameters` of a model.

    ``cfg`` is a Hugging Face model config: a dict (the contents of ``config.json``), a path (str or
    ``os.PathLike``) to a ``config.json`` or to the folder holding one (a path that does not exist is a
    ValueError that says so: ``no such file or folder: 'config.json' (...)``), a transformers
    ``PretrainedConfig`` (anything with ``to_dict()``), or a :class:`RopeParameters` (returned as is). Without
    ``cfg``, the keywords describe the model: ``head_dim`` (required), ``base`` (θ, default 10000),
    ``scaling`` (a dict like ``rope_scaling``: ``{"rope_type": "yarn", "factor": 4.0, ...}``),
    ``partial_rotary_factor`` (default 1) and ``max_position_embeddings``. ``layer_type`` picks one entry of
    a RoPE dict nested per layer type (e.g. ``"full_attention"``). The module docstring says where each
    field is read.

    >>> params = config({"head_dim": 64, "rope_theta": 500000.0, "partial_rotary_factor": 0.5})
    >>> params.rope_type, params.rotary_dim, params.base
    ('default', 32, 500000.0)
    >>> config(head_dim=8, scaling={"rope_type": "linear", "factor": 2.0}).factor
    2.0
    """
    keywords = {
        "head_dim": head_dim,
        "base": base,
        "scaling": scaling,
        "partial_rotary_factor": partial_rotary_factor,
        "max_position_embeddings": max_position_embeddings,
    }
    given = [name for name, value in keywords.items() if value is not None]
    if cfg is None:
        if head_dim is None:
            raise PosencTypeError(
                "config() needs a model config (a dict, a path to config.json or a transformers config) or "
                "the keyword head_dim=...; got neither",
                parameter="cfg",
            )
        # Python arguments are integers (4096.0 refused, as everywhere); only a config file's numbers may
        # be whole floats (validation.integer's integral_floats)
        head_dim = check_head_dim(head_dim)
        if max_position_embeddings is not None:
            max_position_embeddings = check_context("max_position_embeddings", max_position_embeddings)
        return _from_mapping(
            _keyword_mapping(head_dim, base, scaling, partial_rotary_factor, max_position_embeddings),
            layer_type,
        )
    if given:
        raise PosencTypeError(
            f"config() takes a model config or keywords, not both; got cfg={validation.shorten(cfg)} and "
            f"{', '.join(given)}: "
            "edit the config instead (or pass the keywords alone)",
            parameter="cfg",
        )
    if isinstance(cfg, RopeParameters):
        if layer_type is not None:
            raise PosencTypeError(
                f"layer_type={layer_type!r} cannot apply to a RopeParameters; leave it out",
                parameter="layer_type",
            )
        return cfg
    return _from_mapping(_load(cfg), layer_type)


def layer_types(cfg: Any) -> tuple[str, ...]:
    """The layer types of a config whose RoPE dict is nested per layer type (Gemma 3 style,
    ``{"full_attention": {...}, "sliding_attention": {...}}``), in the dict's order and without those whose
    entry is null (no RoPE); ``()`` for a config with one RoPE dict, or a :class:`RopeParameters`. ``cfg``
    is anything :func:`config` reads.

    >>> layer_types({"head_dim": 8, "rope_parameters": {"full_attention": {"rope_theta": 1e6},
    ...                                                 "sliding_attention": {"rope_theta": 1e4}}})
    ('full_attention', 'sliding_attention')
    """
    if isinstance(cfg, RopeParameters):
        return ()
    rope = _rope_dict(_merged(_load(cfg)))
    if not _nested(rope):
        return ()
    return tuple(name for name, entry in rope.items() if entry is not None)


def _keyword_mapping(
    head_dim: Any, base: Any, scaling: Any, partial_rotary_factor: Any, max_position_embeddings: Any
) -> dict[str, Any]:
    """The keyword form as the dict of a config.json."""
    if scaling is not None and not isinstance(scaling, Mapping):
        raise PosencTypeError(
            f"scaling must be a dict like rope_scaling, e.g. {{'rope_type': 'linear', 'factor': 2.0}}; got "
            f"{validation.shorten(scaling)} of type {type(scaling).__name__}",
            parameter="scaling",
        )
    scaling = dict(scaling or {})
    if scaling.get("mrope_section") is not None:  # a Python argument: integers (1.0 refused, as 8.0 is)
        check_mrope_entries(scaling["mrope_section"])
    if base is not None and scaling.get("rope_theta") is not None and scaling["rope_theta"] != base:
        raise PosencValueError(
            f"base={base!r} and scaling['rope_theta']={scaling['rope_theta']!r} disagree; give θ once",
            parameter="base",
        )
    mapping: dict[str, Any] = {"head_dim": head_dim, "rope_scaling": scaling}
    if base is not None:
        mapping["rope_theta"] = base
    if partial_rotary_factor is not None:
        mapping["partial_rotary_factor"] = partial_rotary_factor
    if max_position_embeddings is not None:
        mapping["max_position_embeddings"] = max_position_embeddings
    return mapping


def _load(cfg: Any) -> Mapping[str, Any]:
    """The config as a mapping: a dict as is, a path read as JSON, a config object by ``to_dict()``."""
    if isinstance(cfg, Mapping):
        return cfg
    if isinstance(cfg, str | os.PathLike):
        path = os.fspath(cfg)
        if not os.path.exists(path):
            raise PosencValueError(
                f"no such file or folder: {path!r} (give the path of a model's config.json, or the folder "
                "holding it)",
                parameter="cfg",
            )
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.isfile(path):
            raise PosencValueError(
                f"cfg={os.fspath(cfg)!r} is not a config.json file (nor a folder holding one)",
                parameter="cfg",
            )
        with open(path, "rb") as handle:
            raw = handle.read(CONFIG_BYTES + 1)
        if len(raw) > CONFIG_BYTES:
            raise PosencValueError(
                f"cfg={path!r} is larger than {CONFIG_BYTES >> 20} MiB; a model's config.json is a few KiB: "
                "pass the model's own config.json",
                parameter="cfg",
            )
        try:
            loaded = json.loads(raw)
        except RecursionError:
            raise PosencValueError(
                f"cfg={path!r} nests deeper than a JSON reader follows; a model's config nests a few levels: "
                "pass the model's own config.json",
                parameter="cfg",
            ) from None
        except ValueError as error:  # not JSON, or not UTF-8 text
            raise PosencValueError(
                f"cfg={path!r} is not valid JSON ({' '.join(str(error).split())[:200]}); pass a model's "
                "config.json",
                parameter="cfg",
            ) from None
        if not isinstance(loaded, Mapping):
            raise PosencValueError(
                f"cfg={path!r} holds a JSON {type(loaded).__name__}, not an object; pass a config.json",
                parameter="cfg",
            )
        return loaded
    to_dict = getattr(cfg, "to_dict", None)
    if callable(to_dict):
        loaded = to_dict()
        if not isinstance(loaded, Mapping):
            raise PosencTypeError(
                f"cfg.to_dict() returned {type(loaded).__name__}, not a dict; pass the config as a dict",
                parameter="cfg",
            )
        return loaded
    raise PosencTypeError(
        "cfg must be a Hugging Face model config: a dict, a path to config.json, or an object with to_dict() "
        f"(a transformers PretrainedConfig); got {validation.shorten(cfg)} of type {type(cfg).__name__}",
        parameter="cfg",
    )


def _from_mapping(cfg: Mapping[str, Any], layer_type: str | None) -> RopeParameters:
    """Read the fields (see the module docstring) and build the checked :class:`RopeParameters`."""
    cfg = _merged(cfg)
    whole = _rope_dict(cfg)
    rope = _pick_layer(whole, layer_type)

    rope_type = _first(rope, "rope_type", "type")
    kind = named("default" if rope_type is None else rope_type)
    _warn_unread(rope)

    base = _first(rope, "rope_theta")
    if base is None:
        base = _first(cfg, "rope_theta", "rotary_emb_base")
    attention = cfg.get("attn_config")  # DBRX keeps its theta in its attention's block
    if base is None and isinstance(attention, Mapping):
        base = _first(attention, "rope_theta")
    base = DEFAULT_BASE if base is None else base
    prf = _first(rope, "partial_rotary_factor")
    if prf is None:
        prf = _class_partial_rotary_factor(cfg)
    # checked before rotary_dim = int(head_dim * prf): 0 or 1e308 there would name rotary_dim, or overflow
    prf = 1.0 if prf is None else check_partial_rotary_factor(prf)

    # MLA heads (DeepSeek): the rotary part's own width, unless a partial factor of the whole head_dim is
    # given (Mistral 4, DeepSeek-V4: transformers takes int(head_dim * factor), which that part is)
    head_dim = _first(cfg, "qk_rope_head_dim", "head_dim")
    if prf != 1 and _first(cfg, "head_dim") and _first(cfg, "qk_rope_head_dim"):
        head_dim = _first(cfg, "head_dim")
    model_type = str(cfg.get("model_type") or "")
    if model_type == "jetmoe":  # its class's head_dim is kv_channels (default 128)
        head_dim = _first(cfg, "kv_channels") or 128
    zamba2 = model_type == "zamba2" and bool(
        _first(cfg, "hidden_size") and _first(cfg, "num_attention_heads")
    )
    if zamba2:  # its class sets attention_head_dim to 2 * hidden_size // heads, whatever the file says
        head_dim = None
    if (
        not head_dim
    ):  # transformers: `getattr(config, "head_dim", None) or hidden_size // num_attention_heads`
        hidden, heads = _hidden_and_heads(cfg)
        sides = (cfg.get("encoder_num_attention_heads"), cfg.get("decoder_num_attention_heads"))
        if heads is None and sides[0] is not None and sides[0] == sides[1]:  # Moonshine's: one per side
            heads = sides[0]
        if hidden is None or heads is None:
            raise PosencValueError(
                "the config gives no head_dim and not both hidden_size and num_attention_heads "
                f"(got hidden_size={hidden!r}, num_attention_heads={heads!r}); add head_dim to the config",
                parameter="cfg",
            )
        hidden = validation.integer("hidden_size", hidden, minimum=1, integral_floats=True)
        heads = validation.integer("num_attention_heads", heads, minimum=1, integral_floats=True)
        head_dim = (2 if zamba2 else 1) * hidden // heads
    if layer_type is not None:
        head_dim = _layer_type_head_dim(cfg, layer_type, head_dim)
    head_dim = check_head_dim(head_dim, integral_floats=True)
    max_pos = _first(cfg, "max_position_embeddings", "max_seq_len", "n_positions")  # DBRX; GPT-J, CodeGen
    if max_pos is not None:
        max_pos = check_context("max_position_embeddings", max_pos, integral_floats=True)

    fields: dict[str, Any] = {name: rope.get(name) for name in PLAIN_SCALING_FIELDS}
    # transformers reads `rope_parameters.get("beta_fast") or 32`: a missing, None or 0 value means 32.
    fields["beta_fast"] = rope.get("beta_fast") or 32.0
    fields["beta_slow"] = rope.get("beta_slow") or 1.0
    # transformers reads `rope_parameters.get("truncate", True)`: only a missing key means True.
    fields["truncate"] = rope.get("truncate", True)
    # a top-level copy has priority over the RoPE dict's (Phi-3), but not for a dict nested per layer type,
    # whose entries transformers fills from max_position_embeddings alone
    original = None if rope is not whole else cfg.get("original_max_position_embeddings")
    if original is None:
        original = rope.get("original_max_position_embeddings")
    if original is None and kind.uses("original_max_position_embeddings"):
        original = max_pos
    if original is not None and kind.uses("original_max_position_embeddings"):
        original = check_context("original_max_position_embeddings", original, integral_floats=True)
    fields["original_max_position_embeddings"] = original
    section = rope.get("mrope_section")
    fields["mrope_section"] = None if section is None else check_mrope_entries(section, integral_floats=True)
    interleaved = _first(rope, "mrope_interleaved", "interleaved")
    fields["mrope_interleaved"] = False if interleaved is None else interleaved
    # the model's code decides how its sections combine, not the flag (no transformers code reads it)
    for family, form in MROPE_FORMS.items():
        known = model_type == family or model_type.startswith(family + "_")
        if section is not None and known and isinstance(fields["mrope_interleaved"], bool):  # else refused
            fields["mrope_interleaved"] = form

    for name, value in kind.defaults.items():
        fields[name] = value if fields[name] is None else fields[name]
    rotary_dim = head_dim if kind.full_head else int(head_dim * prf)
    section = MROPE_SECTIONS.get(model_type.removesuffix("_text"))
    if fields["mrope_section"] is None and section is not None and sum(section) == rotary_dim // 2:
        # the sections its model's code takes where the RoPE dict names none (rope_parameters.get(...))
        fields["mrope_section"] = section
        if isinstance(fields["mrope_interleaved"], bool):
            fields["mrope_interleaved"] = MROPE_FORMS[model_type.removesuffix("_text")]
    defaults = {field.name: field.default for field in dataclasses.fields(RopeParameters)}
    for name in SCALING_FIELDS:
        if not kind.uses(name):
            fields[name] = defaults[name]
    return RopeParameters(
        rope_type=kind.name,
        head_dim=head_dim,
        rotary_dim=rotary_dim,
        base=base,
        max_position_embeddings=max_pos,
        partial_rotary_factor=prf,
        **fields,
    )


#: The partial rotary factor a model's transformers config class sets where its config.json names none
#: (transformers 5's ``kwargs.setdefault("partial_rotary_factor", ...)`` "for BC"): model_type -> factor.
CLASS_PARTIAL_ROTARY_FACTORS = {
    **dict.fromkeys(("glm", "glm4", "glm4_moe", "glm4v_moe_text", "nemotron", "persimmon", "phi"), 0.5),
    **dict.fromkeys(("recurrent_gemma", "bamba"), 0.5),
    **dict.fromkeys(("qwen3_5_text", "qwen3_5_moe_text", "qwen3_next", "stablelm"), 0.25),
    "moonshine": 0.9,
    "gpt_neox": 0.25,
}


#: Multimodal rotaries whose transformers code fixes how the sections combine, whatever a config's
#: ``mrope_interleaved`` says (no modeling code reads it): model_type (and its ``_text`` config) ->
#: interleaved (Qwen3-VL's t, h, w, t, h, w, ...) or in blocks (Qwen2-VL's).
MROPE_FORMS = {
    **dict.fromkeys(
        ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe", "qwen4_exp", "cosmos3_edge"), True
    ),
    **dict.fromkeys(
        ("qwen2_vl", "qwen2_5_vl", "glm4v", "glm4v_moe", "glm_image", "glm_ocr", "paddleocr_vl"), False
    ),
}


#: The M-RoPE sections a multimodal model's code takes where its RoPE dict names none
#: (``config.rope_parameters.get("mrope_section", ...)`` in its modeling file): model_type (and its
#: ``_text`` config) -> (time, height, width) frequencies; used where they fill the rotary width.
MROPE_SECTIONS = {
    **dict.fromkeys(("qwen2_vl", "qwen2_5_vl", "paddleocr_vl"), (16, 24, 24)),
    **dict.fromkeys(("qwen3_vl", "qwen3_vl_moe", "cosmos3_edge"), (24, 20, 20)),
    **dict.fromkeys(("glm4v", "glm4v_moe", "glm_image", "glm_ocr"), (8, 12, 12)),
    **dict.fromkeys(("qwen3_5", "qwen3_5_moe", "qwen4_exp"), (11, 11, 10)),
}


def _layer_type_head_dim(cfg: Mapping[str, Any], layer_type: str, head_dim: Any) -> Any:
    """The head width of ``layer_type``'s layers: transformers 5's ``per_layer_config`` (layer index ->
    overrides, Gemma 4's full-attention layers 512 wide where the others are 256), the same for every
    layer of that type; a Gemma 4 config.json without it: ``global_head_dim`` (default 512) for
    full attention, as its config class sets; else ``head_dim``."""
    overrides, types = cfg.get("per_layer_config"), cfg.get("layer_types")
    if isinstance(overrides, Mapping) and isinstance(types, list | tuple):
        # keyed by the layer's index: an int, or its digits ("5", or zero-padded "05" as transformers 5.23
        # writes them)
        by_index = {int(k): v for k, v in overrides.items() if isinstance(k, int) or str(k).isdigit()}
        widths = set()
        for index, named_type in enumerate(types):
            if named_type == layer_type:
                override = by_index.get(index) or {}
                widths.add(override.get("head_dim", head_dim) if isinstance(override, Mapping) else head_dim)
        if len(widths) > 1:
            raise PosencValueError(
                f"the {layer_type!r} layers of this config have different head widths "
                f"({', '.join(map(str, sorted(widths, key=str)))}) in its per_layer_config; one RoPE per "
                "layer type needs one width",
                parameter="layer_type",
            )
        return widths.pop() if widths else head_dim
    if str(cfg.get("model_type") or "").startswith("gemma4") and layer_type == "full_attention":
        return cfg.get("global_head_dim") or 512
    return head_dim


def _class_partial_rotary_factor(cfg: Mapping[str, Any]) -> Any:
    """The partial rotary factor outside the RoPE dict, as transformers' config class of ``cfg``'s
    model_type reads it: the top-level ``partial_rotary_factor``, GPT-NeoX's ``rotary_pct``, MiniMax-M2's
    ``rotary_dim`` (over head_dim), else the class's default (:data:`CLASS_PARTIAL_ROTARY_FACTORS`); Bamba
    sets 0.5 whatever the top level says. None: 1."""
    model_type = cfg.get("model_type")
    if model_type == "bamba":
        return 0.5
    if model_type == "gpt_neox":  # its own name only: a top-level partial_rotary_factor is not read
        found = _first(cfg, "rotary_pct")
    else:
        found = _first(cfg, "partial_rotary_factor", "rotary_pct")
    if found is None and model_type == "minimax_m2" and _first(cfg, "rotary_dim") and _first(cfg, "head_dim"):
        found = _first(cfg, "rotary_dim") / _first(cfg, "head_dim")
    hidden, heads = _hidden_and_heads(cfg)
    if found is None and model_type in ("gptj", "codegen") and _first(cfg, "rotary_dim") and hidden and heads:
        found = _first(cfg, "rotary_dim") / (hidden // heads)  # the features rotated, of hidden // heads
    return CLASS_PARTIAL_ROTARY_FACTORS.get(model_type) if found is None else found


def _hidden_and_heads(cfg: Mapping[str, Any]) -> tuple[Any, Any]:
    """``hidden_size`` and ``num_attention_heads``, or the names a config class maps them to in its
    config.json (``d_model``/``n_heads``; GPT-J's and CodeGen's ``n_embd``/``n_head``)."""
    hidden = _first(cfg, "hidden_size", "d_model", "n_embd")
    return hidden, _first(cfg, "num_attention_heads", "n_heads", "n_head")


#: The model types whose transformers rotary gives cos and sin in interleaved pairs ([c0, c0, c1, c1, ...]:
#: their apply rotates adjacent pairs), as their modules emit them (the zoo's "(interleaved)" rows) or
#: their apply reads them (GPT-J's and CodeGen's rotate_every_two); every other one's halves.
INTERLEAVED_TYPES = frozenset(
    {
        "blt",
        "blt_patcher",
        "blt_local_encoder",
        "blt_local_decoder",
        "blt_global_transformer",
        "codegen",
        "cohere",
        "cohere2",
        "cohere2_moe",
        "glm4v",
        "glm4v_text",
        "glm_ocr",
        "glm_ocr_text",
        "gptj",
    }
)


def config_layout(cfg: Any) -> str:
    """The layout of the cos/sin columns a model's transformers rotary gives: ``"interleaved"`` for the
    model types of :data:`posenc.rope.configs.INTERLEAVED_TYPES` (Cohere, GLM-4V, GLM-OCR, BLT, GPT-J,
    CodeGen), else ``"half"``; ``cfg`` as :func:`config` takes it (a RopeParameters: ``"half"``).

    >>> config_layout({"model_type": "cohere"}), config_layout({"model_type": "llama"})
    ('interleaved', 'half')
    """
    if isinstance(cfg, RopeParameters):
        return "half"
    loaded = _merged(_load(cfg))
    return "interleaved" if str(loaded.get("model_type") or "") in INTERLEAVED_TYPES else "half"


def _merged(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config's ``text_config`` over its top-level fields (the language model's fields win)."""
    text = cfg.get("text_config")
    if isinstance(text, Mapping):
        merged = {key: value for key, value in cfg.items() if not key.endswith("_config")}
        merged.update(text)
        return merged
    if text is not None and hasattr(text, "to_dict"):
        return {**{k: v for k, v in cfg.items() if not k.endswith("_config")}, **text.to_dict()}
    return cfg


#: The keys of a RoPE dict posenc reads (or knows to leave: Llama 4's and Ministral 3's attention temperature
#: ``llama_4_scaling_beta`` scales queries, not cos/sin; a copy of ``max_position_embeddings``).
_READ_KEYS = frozenset(
    {
        "rope_type",
        "type",
        "rope_theta",
        "partial_rotary_factor",
        "original_max_position_embeddings",
        "mrope_section",
        "mrope_interleaved",
        "interleaved",
        "beta_fast",
        "beta_slow",
        "truncate",
        "llama_4_scaling_beta",
        "max_position_embeddings",
        *PLAIN_SCALING_FIELDS,
    }
)


def _warn_unread(rope: Mapping[str, Any]) -> None:
    """Warn of the keys of a RoPE dict that no rope type has (``"beta_fsat"``): its parameters are built
    without them, with the defaults of what was meant (transformers ignores them too, with a warning)."""
    unread = sorted(str(key) for key in rope if key not in _READ_KEYS)
    if unread:
        meant = {key: difflib.get_close_matches(key, sorted(_READ_KEYS), n=1) for key in unread}
        guesses = [f"{key!r} for {near[0]!r}" for key, near in meant.items() if near]
        warnings.warn(
            f"the RoPE dict has keys no rope type reads: {unread}"
            + (f" (a misspelling? {', '.join(guesses)})" if guesses else "")
            + "; the parameters are built without them, as transformers builds them",
            UserWarning,
            stacklevel=4,
        )


def _rope_dict(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The RoPE dict: ``rope_scaling``, else ``rope_parameters``, else empty."""
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(rope, Mapping):
        raise PosencTypeError(
            f"rope_scaling / rope_parameters must be a dict; got {validation.shorten(rope)} of type "
            f"{type(rope).__name__}",
            parameter="cfg",
        )
    return rope


def _nested(rope: Mapping[str, Any]) -> bool:
    """Whether the RoPE dict is nested per layer type: no RoPE key, every value a dict (or null)."""
    return (
        bool(rope)
        and not (_ROPE_KEYS & set(rope))
        and all(isinstance(value, Mapping) or value is None for value in rope.values())
    )


def _pick_layer(rope: Mapping[str, Any], layer_type: str | None) -> Mapping[str, Any]:
    """The RoPE dict itself, or its entry for ``layer_type`` when it is nested per layer type."""
    if not _nested(rope):
        if layer_type is not None:
            raise PosencValueError(
                f"layer_type={layer_type!r} was given but the config's RoPE dict is not nested per layer "
                "type; leave layer_type out",
                parameter="layer_type",
                hint="leave layer_type out",
                choices=(),
            )
        return rope
    if layer_type is None or layer_type not in rope:
        hint = (
            "pass one of these as posenc.rope.config(cfg, layer_type=...), "
            "posenc.torch.RotaryEmbedding(cfg, layer_type=...) or `posenc rope CONFIG --layer-type ...` "
            "(posenc.torch.RotaryEmbedding(cfg) alone holds every layer type, like Gemma3RotaryEmbedding)"
        )
        raise PosencValueError(
            f"the config's RoPE dict is nested per layer type ({', '.join(map(repr, rope))}); got "
            f"layer_type={layer_type!r}: {hint}",
            parameter="layer_type",
            hint=hint,
            choices=tuple(rope),
        )
    entry = rope[layer_type]
    if entry is None:
        raise PosencValueError(
            f"layer_type={layer_type!r} has no RoPE (its entry is null); pick another layer type",
            parameter="layer_type",
        )
    return entry


def _first(mapping: Mapping[str, Any], *names: str) -> Any:
    """The value of the first of ``names`` present in ``mapping`` and not None, else None."""
    for name in names:
        value = mapping.get(name)
        if value is not None:
            return value
    return None
