"""posenc.rope.config: reading Hugging Face model configs into RopeParameters.

The realistic configs below (CONFIGS) are written out by hand in the shape of the models' published
config.json files; test_rope_frequencies.py imports them for its conformance and reference tests.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

import posenc.rope as rope
from posenc.rope import RopeParameters

# Phi-3-mini-128k keeps 48 per-frequency divisors for short and long contexts; these are made up with the
# published lists' shape (short: slowly from 1 to ~3, long: from ~1 to ~60), not copied from them.
PHI3_SHORT = [round(1.0 + 0.02 * i + 0.0009 * i * i, 4) for i in range(48)]
PHI3_LONG = [round(1.0 + 0.08 * i**1.6, 4) for i in range(48)]


def longrope_config(switch: int) -> dict:
    """A small LongRoPE config (head_dim 8) whose two sets of factors switch at ``switch`` tokens."""
    return {
        "head_dim": 8,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4 * switch,
        "rope_scaling": {
            "rope_type": "longrope",
            "short_factor": [1.0, 1.1, 1.2, 1.3],
            "long_factor": [2.0, 3.0, 4.0, 5.0],
            "original_max_position_embeddings": switch,
        },
    }


CONFIGS = {
    "llama2": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": None,
    },
    "llama31_8b": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_type": "llama3",
        },
    },
    "qwen2_yarn": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"},
    },
    "deepseek_v3": {
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "max_position_embeddings": 163840,
        "rope_theta": 10000,
        "rope_scaling": {
            "beta_fast": 32,
            "beta_slow": 1,
            "factor": 40,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,  # DeepSeek-V3 publishes 1.0; 0.707 makes the mscale ratio matter
            "original_max_position_embeddings": 4096,
            "type": "yarn",
        },
    },
    "phi3_mini_128k": {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG},
    },
    "gpt_neox": {  # Pythia-1.4B: GPT-NeoX names θ rotary_emb_base and the rotated fraction rotary_pct
        "model_type": "gpt_neox",
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "max_position_embeddings": 2048,
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
    },
    "linear": {  # Vicuna-13B-v1.5-16k: position interpolation by 4
        "model_type": "llama",
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"factor": 4.0, "type": "linear"},
    },
    "dynamic": {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"factor": 2.0, "type": "dynamic"},
    },
    "qwen2_vl": {
        "model_type": "qwen2_vl",
        "hidden_size": 3584,
        "num_attention_heads": 28,
        "max_position_embeddings": 32768,
        "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"depth": 32, "embed_dim": 1280},
    },
}

# (rope_type, head_dim, rotary_dim, base) each config must read to
EXPECTED = {
    "llama2": ("default", 128, 128, 10000.0),
    "llama31_8b": ("llama3", 128, 128, 500000.0),
    "qwen2_yarn": ("yarn", 128, 128, 1000000.0),
    "deepseek_v3": ("yarn", 64, 64, 10000.0),
    "phi3_mini_128k": ("longrope", 96, 96, 10000.0),
    "gpt_neox": ("default", 128, 32, 10000.0),
    "linear": ("linear", 128, 128, 10000.0),
    "dynamic": ("dynamic", 128, 128, 10000.0),
    "qwen2_vl": ("default", 128, 128, 1000000.0),
}


def to_v5(cfg: dict) -> dict:
    """The same config as transformers 5 saves it: rope_theta and partial_rotary_factor inside
    rope_parameters, ``rope_type`` instead of ``type``, no rope_scaling."""
    cfg = copy.deepcopy(cfg)
    params = cfg.pop("rope_scaling", None) or {}
    if "type" in params:
        params["rope_type"] = params.pop("type")
    params.setdefault("rope_type", "default")
    params["rope_theta"] = cfg.pop("rope_theta", None) or cfg.pop("rotary_emb_base")
    if "rotary_pct" in cfg:
        params["partial_rotary_factor"] = cfg.pop("rotary_pct")
    cfg["rope_parameters"] = params
    return cfg


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_realistic_configs_read(name: str) -> None:
    p = rope.config(CONFIGS[name])
    assert (p.rope_type, p.head_dim, p.rotary_dim, p.base) == EXPECTED[name]
    assert p.max_position_embeddings == CONFIGS[name]["max_position_embeddings"]
    assert p.n_frequencies == p.rotary_dim // 2


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_transformers5_form_reads_the_same(name: str) -> None:
    v5 = to_v5(CONFIGS[name])
    assert "rope_scaling" not in v5 and "rope_theta" not in v5
    assert rope.config(v5) == rope.config(CONFIGS[name])


def test_scaling_fields_and_defaults() -> None:
    llama = rope.config(CONFIGS["llama31_8b"])
    assert (llama.factor, llama.low_freq_factor, llama.high_freq_factor) == (8.0, 1.0, 4.0)
    assert llama.original_max_position_embeddings == 8192
    qwen = rope.config(CONFIGS["qwen2_yarn"])
    # yarn's defaults in transformers: beta_fast 32, beta_slow 1, truncate True, attention_factor derived
    assert (qwen.beta_fast, qwen.beta_slow, qwen.truncate, qwen.attention_factor) == (32.0, 1.0, True, None)
    assert (qwen.mscale, qwen.mscale_all_dim) == (None, None)
    deepseek = rope.config(CONFIGS["deepseek_v3"])
    assert (deepseek.factor, deepseek.mscale, deepseek.mscale_all_dim) == (40.0, 1.0, 0.707)
    assert isinstance(deepseek.factor, float) and isinstance(deepseek.base, float)
    phi = rope.config(CONFIGS["phi3_mini_128k"])
    assert phi.short_factor == tuple(PHI3_SHORT) and phi.long_factor == tuple(PHI3_LONG)
    assert phi.factor is None and phi.original_max_position_embeddings == 4096
    assert rope.config(CONFIGS["gpt_neox"]).partial_rotary_factor == 0.25
    assert rope.config(CONFIGS["dynamic"]).factor == 2.0


def test_original_max_position_embeddings_sources() -> None:
    cfg = copy.deepcopy(CONFIGS["qwen2_yarn"])
    del cfg["rope_scaling"]["original_max_position_embeddings"]
    assert rope.config(cfg).original_max_position_embeddings == 32768  # falls back to max_position_embeddings
    cfg["max_position_embeddings"] = 131072
    cfg["rope_scaling"]["original_max_position_embeddings"] = 32768
    cfg["original_max_position_embeddings"] = 16384  # top level wins, as in transformers (Phi-3)
    assert rope.config(cfg).original_max_position_embeddings == 16384


def test_falsy_beta_and_explicit_truncate() -> None:
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    p = rope.config(head_dim=64, scaling={**scaling, "beta_fast": 0, "beta_slow": None, "truncate": False})
    assert (p.beta_fast, p.beta_slow, p.truncate) == (32.0, 1.0, False)  # transformers: `get(...) or 32`


def test_a_misspelled_key_of_the_rope_dict_is_warned_about_with_the_key_it_may_mean() -> None:
    """ "beta_fsat": 64 was ignored silently (beta_fast's default 32 used); transformers warns of it too."""
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    with pytest.warns(UserWarning, match=r"no rope type reads: \['beta_fsat'\].*'beta_fsat' for 'beta_fast'"):
        p = rope.config(head_dim=64, scaling={**scaling, "beta_fsat": 64})
    assert p == rope.config(head_dim=64, scaling=scaling)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every key read: no warning
        rope.config(head_dim=64, scaling={**scaling, "beta_fast": 64.0, "truncate": False})


def test_multimodal_sections() -> None:
    vl = rope.config(CONFIGS["qwen2_vl"])
    assert vl.mrope_section == (16, 24, 24) and vl.mrope_interleaved is False
    qwen3_vl = {
        "model_type": "qwen3_vl",
        "text_config": {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "head_dim": 128,
            "max_position_embeddings": 262144,
            "rope_scaling": {
                "mrope_interleaved": True,
                "mrope_section": [24, 20, 20],
                "rope_type": "default",
            },
            "rope_theta": 5000000,
        },
        "vision_config": {"hidden_size": 1152, "num_heads": 16},
        "max_position_embeddings": 1,  # the text model's own value wins
    }
    p = rope.config(qwen3_vl)
    assert (p.mrope_section, p.mrope_interleaved, p.base) == ((24, 20, 20), True, 5000000.0)
    assert p.max_position_embeddings == 262144


def test_nested_text_config_falls_back_to_top_level() -> None:
    cfg = {"rope_theta": 500000.0, "text_config": {"head_dim": 64, "max_position_embeddings": 8192}}
    p = rope.config(cfg)
    assert (p.base, p.head_dim) == (500000.0, 64)


def test_config_json_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS["phi3_mini_128k"]))
    expected = rope.config(CONFIGS["phi3_mini_128k"])
    assert rope.config(path) == expected
    assert rope.config(str(path)) == expected
    assert rope.config(tmp_path) == expected  # the folder of a config.json


def test_keyword_form() -> None:
    scaling = dict(CONFIGS["llama31_8b"]["rope_scaling"])
    p = rope.config(head_dim=128, base=500000.0, scaling=scaling, max_position_embeddings=131072)
    assert p == rope.config(CONFIGS["llama31_8b"])
    neox = rope.config(head_dim=128, partial_rotary_factor=0.25, max_position_embeddings=2048)
    assert neox == rope.config(CONFIGS["gpt_neox"])
    assert rope.config(head_dim=64).base == 10000.0  # transformers' default θ


def test_keyword_sections_take_integers_as_head_dim_does() -> None:
    """A scaling dict passed to config() is a Python argument: mrope_section=[1.0, 1, 2] is refused with the
    fix, as head_dim=8.0 is (a config file's whole floats are still read, test_one_owner)."""
    scaling = {"rope_type": "default", "mrope_section": [1.0, 1, 2]}
    refused = r"mrope_section\[0\] must be an integer >= 0; got 1\.0 .*pass 1 instead"
    with pytest.raises(TypeError, match=refused):
        rope.config(head_dim=8, scaling=scaling)
    assert rope.config({"head_dim": 8, "rope_scaling": scaling}).mrope_section == (1, 1, 2)
    assert rope.config(head_dim=8, scaling={"mrope_section": [1, 1, 2]}).mrope_section == (1, 1, 2)


def test_duck_typed_config_object() -> None:
    class FakeConfig:  # what a transformers PretrainedConfig offers
        def to_dict(self) -> dict:
            return to_v5(CONFIGS["deepseek_v3"])

    assert rope.config(FakeConfig()) == rope.config(CONFIGS["deepseek_v3"])


def test_parameters_pass_through_and_are_frozen_and_hashable() -> None:
    p = rope.config(CONFIGS["phi3_mini_128k"])
    assert rope.config(p) is p
    assert hash(p) == hash(rope.config(copy.deepcopy(CONFIGS["phi3_mini_128k"])))
    assert len({p, rope.config(CONFIGS["phi3_mini_128k"]), rope.config(CONFIGS["llama2"])}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.base = 1.0  # type: ignore[misc]
    assert isinstance(p.short_factor, tuple)


def test_fields_a_type_does_not_use_are_dropped() -> None:
    stray = copy.deepcopy(CONFIGS["llama2"])
    stray["rope_scaling"] = {"rope_type": "default", "factor": 2.0, "beta_fast": 8}
    assert rope.config(stray) == rope.config(CONFIGS["llama2"])
    linear = rope.config(CONFIGS["linear"])
    assert linear.original_max_position_embeddings is None and linear.low_freq_factor is None


def test_direct_construction_is_checked() -> None:
    p = rope.config(CONFIGS["llama2"])
    with pytest.raises(ValueError, match=r"rotary_dim=64 does not match"):
        dataclasses.replace(p, rotary_dim=64)
    q = RopeParameters(rope_type="linear", head_dim=64, rotary_dim=64, base=10000, factor=2)
    assert (q.base, q.factor) == (10000.0, 2.0) and type(q.base) is float


def test_nested_per_layer_rope_parameters() -> None:
    cfg = {
        "head_dim": 256,
        "max_position_embeddings": 131072,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "rope_theta": 1000000.0,
                "partial_rotary_factor": 0.25,
            },
        },
    }
    full = rope.config(cfg, layer_type="full_attention")
    assert (full.rope_type, full.base, full.rotary_dim, full.factor) == ("proportional", 1e6, 256, 1.0)
    assert rope.config(cfg, layer_type="sliding_attention").base == 10000.0
    with pytest.raises(ValueError, match=r"nested per layer type.*'sliding_attention', 'full_attention'"):
        rope.config(cfg)


def test_legacy_type_aliases() -> None:
    phi = copy.deepcopy(CONFIGS["phi3_mini_128k"])
    phi["rope_scaling"]["type"] = "su"  # early Phi-3 checkpoints
    assert rope.config(phi) == rope.config(CONFIGS["phi3_mini_128k"])


def _mutated(name: str, path: tuple, value: object) -> dict:
    """A deep copy of CONFIGS[name] with the entry at ``path`` set to ``value`` (deleted for DELETE)."""
    cfg = copy.deepcopy(CONFIGS[name])
    target = cfg
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return cfg


DELETE = object()

# (config, path, value, exception, words the message must hold: the field, the value, the fix)
BAD = [
    (
        "llama2",
        ("rope_scaling",),
        {"rope_type": "ntk-by-parts"},
        ValueError,
        ["rope_type='ntk-by-parts'", "use one of"],
    ),
    (
        "qwen2_yarn",
        ("rope_scaling", "factor"),
        DELETE,
        ValueError,
        ["'yarn' needs a scaling factor", "add 'factor'"],
    ),
    ("linear", ("rope_scaling", "factor"), 0.5, ValueError, ["factor must be >= 1", "got 0.5"]),
    ("llama31_8b", ("rope_scaling", "factor"), "8", TypeError, ["factor must be a real number", "'8'"]),
    (
        "phi3_mini_128k",
        ("rope_scaling", "short_factor"),
        PHI3_SHORT[:47],
        ValueError,
        ["short_factor must have rotary_dim // 2 = 48", "got 47"],
    ),
    (
        "phi3_mini_128k",
        ("rope_scaling", "long_factor"),
        DELETE,
        ValueError,
        ["needs long_factor", "48 numbers"],
    ),
    (
        "phi3_mini_128k",
        ("rope_scaling", "long_factor", 3),
        -1.0,
        ValueError,
        ["long_factor[3] = -1.0", "positive"],
    ),
    ("gpt_neox", ("rotary_pct",), 0.2, ValueError, ["int(128 * 0.2) = 25", "must be even"]),
    ("gpt_neox", ("rotary_pct",), 1.5, ValueError, ["partial_rotary_factor must lie in (0, 1]", "1.5"]),
    (
        "llama2",
        ("num_attention_heads",),
        DELETE,
        ValueError,
        ["no head_dim", "num_attention_heads=None", "add head_dim"],
    ),
    ("llama2", ("head_dim",), 127, ValueError, ["= 127", "must be even"]),
    ("llama2", ("rope_theta",), 1.0, ValueError, ["rope_theta (base) must be > 1", "got 1.0"]),
    ("llama2", ("rope_theta",), float("inf"), ValueError, ["rope_theta (base) must be finite", "inf"]),
    (
        "llama31_8b",
        ("rope_scaling", "high_freq_factor"),
        DELETE,
        ValueError,
        ["needs low_freq_factor and high_freq_factor", "None", "1.0 and 4.0"],
    ),
    (
        "llama31_8b",
        ("rope_scaling", "high_freq_factor"),
        1.0,
        ValueError,
        ["low_freq_factor < high_freq_factor", "high_freq_factor=1.0"],
    ),
    (
        "qwen2_yarn",
        ("rope_scaling", "beta_slow"),
        64,
        ValueError,
        ["beta_slow <= beta_fast", "beta_slow=64.0", "32 and 1"],
    ),
    (
        "qwen2_yarn",
        ("rope_scaling", "attention_factor"),
        -1.0,
        ValueError,
        ["attention_factor must be > 0", "-1.0"],
    ),
    (
        "qwen2_yarn",
        ("rope_scaling", "truncate"),
        "yes",
        TypeError,
        ["truncate must be true or false", "'yes'"],
    ),
    (
        "dynamic",
        ("max_position_embeddings",),
        DELETE,
        ValueError,
        ["'dynamic' needs max_position_embeddings", "add max_position_embeddings"],
    ),
    (
        "qwen2_vl",
        ("rope_scaling", "mrope_section"),
        [16, 24, 16],
        ValueError,
        ["mrope_section=[16, 24, 16] must sum to rotary_dim // 2 = 64", "its sum is 56"],
    ),
    (
        "qwen2_vl",
        ("rope_scaling", "mrope_section", 0),
        16.5,
        TypeError,
        ["mrope_section[0] must be an integer", "16.5"],
    ),
    (
        "qwen2_vl",
        ("rope_scaling", "mrope_interleaved"),
        1,
        TypeError,
        ["mrope_interleaved must be true or false", "got 1"],
    ),
    (
        "qwen2_vl",
        ("rope_scaling",),
        "mrope",
        TypeError,
        ["rope_scaling / rope_parameters must be a dict", "'mrope'"],
    ),
    (
        "llama2",
        ("max_position_embeddings",),
        0,
        ValueError,
        ["max_position_embeddings must be an integer >= 1", "got 0"],
    ),
]


@pytest.mark.parametrize(
    ("name", "path", "value", "error", "words"), BAD, ids=[f"{b[0]}-{b[1][-1]}" for b in BAD]
)
def test_bad_configs_are_refused_with_a_clear_message(name, path, value, error, words) -> None:
    with pytest.raises(error) as caught:
        rope.config(_mutated(name, path, value))
    for word in words:
        assert word in str(caught.value), (word, str(caught.value))


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"needs a model config .* or the keyword head_dim"):
        rope.config()
    with pytest.raises(TypeError, match=r"not both; got cfg=.* and base"):
        rope.config(CONFIGS["llama2"], base=10000.0)
    with pytest.raises(TypeError, match=r"cfg must be a Hugging Face model config.*got 42 of type int"):
        rope.config(42)
    with pytest.raises(ValueError, match=r"^no such file or folder: '/no/such/config.json' \(give the path"):
        rope.config("/no/such/config.json")
    with pytest.raises(TypeError, match=r"scaling must be a dict like rope_scaling"):
        rope.config(head_dim=64, scaling="yarn")
    with pytest.raises(ValueError, match=r"base=500000.0 and scaling\['rope_theta'\]=10000.0 disagree"):
        rope.config(head_dim=64, base=500000.0, scaling={"rope_theta": 10000.0})
    with pytest.raises(ValueError, match=r"layer_type='full_attention' was given but .* not nested"):
        rope.config(CONFIGS["llama2"], layer_type="full_attention")


def test_a_missing_path_is_named_missing_and_a_folder_without_config_is_not_a_config(tmp_path: Path) -> None:
    """A path that does not exist says so (never "cfg=... is not a config.json file"); a path that exists
    but holds no config keeps that message."""
    missing = tmp_path / "config.json"
    for given in (missing, str(missing), "config.json"):
        with pytest.raises(ValueError) as caught:
            rope.config(given)
        assert str(caught.value) == (
            f"no such file or folder: {str(given)!r} (give the path of a model's config.json, or the folder "
            "holding it)"
        )
    with pytest.raises(ValueError, match=r"is not a config.json file \(nor a folder holding one\)"):
        rope.config(tmp_path)  # exists: a folder with no config.json in it


def test_bad_json_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"is not valid JSON"):
        rope.config(path)
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"holds a JSON list, not an object"):
        rope.config(path)


def test_an_encoder_decoder_naming_its_heads_per_side_gives_its_head_width() -> None:
    """Moonshine's config: hidden_size 288, 8 heads on each side, partial_rotary_factor 0.9: its rotary
    modules rotate int(36 · 0.9) = 32 channels."""
    moonshine = {
        "hidden_size": 288,
        "encoder_num_attention_heads": 8,
        "decoder_num_attention_heads": 8,
        "rope_parameters": {"rope_theta": 10000.0, "partial_rotary_factor": 0.9, "rope_type": "default"},
    }
    params = rope.config(moonshine)
    assert (params.head_dim, params.rotary_dim) == (36, 32)
    with pytest.raises(ValueError, match="no head_dim and not both hidden_size and num_attention_heads"):
        rope.config({**moonshine, "decoder_num_attention_heads": 4})  # sides that differ name no one width


def test_dbrx_names_its_width_heads_theta_and_length_its_own_way() -> None:
    """DBRX's config: d_model and n_heads (transformers maps hidden_size and num_attention_heads onto them),
    its theta in attn_config, its length max_seq_len — read as a config that names them plainly."""
    dbrx = {"d_model": 6144, "n_heads": 48, "max_seq_len": 32768, "attn_config": {"rope_theta": 500000.0}}
    params = rope.config(dbrx)
    assert (params.head_dim, params.base, params.max_position_embeddings) == (128, 500000.0, 32768)
    plain = {"hidden_size": 6144, "num_attention_heads": 48, "max_position_embeddings": 32768}
    assert rope.config({**plain, "rope_theta": 500000.0}) == params


# --- read as transformers' config classes read them -------------------------------------------------------


def _transformers_rotary_dim(model_type: str, **fields) -> int:
    """The rotary width transformers' own config class of ``model_type`` gives: int(head_dim * factor)."""
    from transformers import AutoConfig

    made = AutoConfig.for_model(model_type, **fields)
    head_dim = getattr(made, "head_dim", None) or made.hidden_size // made.num_attention_heads
    parameters = made.rope_parameters
    return int(head_dim * parameters.get("partial_rotary_factor", 1.0))


@pytest.mark.parametrize("model_type", [*sorted(rope.configs.CLASS_PARTIAL_ROTARY_FACTORS), "minimax_m2"])
def test_a_config_json_without_a_partial_factor_gets_its_classs_default(model_type: str) -> None:
    """A config.json that names no partial factor: transformers' config class sets one for these model types
    (Phi 0.5, StableLM 0.25, GPT-NeoX 0.25, MiniMax-M2 from rotary_dim, ...); posenc rotated the whole head,
    silently. The raw dict now gives transformers' width."""
    fields = {"hidden_size": 256, "num_attention_heads": 4, "head_dim": 64, "rope_theta": 10000.0}
    if model_type == "minimax_m2":
        fields["rotary_dim"] = 32
    if model_type == "moonshine":  # 0.9 of 64 is 57: an odd width, which posenc refuses
        fields["head_dim"] = 40
    want = _transformers_rotary_dim(model_type, **fields)
    assert want < fields["head_dim"]  # each of these rotates part of the head
    assert rope.config({"model_type": model_type, **fields}).rotary_dim == want


def test_an_mla_head_with_a_partial_factor_of_its_whole_head_dim() -> None:
    """Mistral 4 and DeepSeek-V4 name head_dim, qk_rope_head_dim and a partial factor of head_dim:
    transformers rotates int(head_dim * factor) = qk_rope_head_dim features; posenc applied the factor to
    qk_rope_head_dim again (32 and 8 features). DeepSeek-V3's qk_rope_head_dim alone is still its width."""
    mistral = {"head_dim": 128, "qk_rope_head_dim": 64, "partial_rotary_factor": 0.5, "rope_theta": 1e4}
    assert rope.config(mistral).rotary_dim == 64
    v4 = {"head_dim": 512, "qk_rope_head_dim": 64, "partial_rotary_factor": 0.125, "rope_theta": 1e4}
    assert rope.config(v4).rotary_dim == 64
    assert (
        rope.config({"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64}).rotary_dim
        == 64
    )


def test_a_layer_types_yarn_takes_max_position_embeddings_not_the_top_level_original() -> None:
    """A RoPE dict nested per layer type whose yarn entry names no original length: transformers fills it
    from max_position_embeddings (a top-level copy has priority only in a flat dict, Phi-3's); posenc took
    the top-level 1024, frequencies off by a factor of 3.9."""
    yarn = {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}
    nested = {
        "head_dim": 64,
        "max_position_embeddings": 8192,
        "original_max_position_embeddings": 1024,
        "rope_parameters": {"full_attention": yarn, "sliding_attention": {"rope_type": "default"}},
    }
    assert rope.config(nested, layer_type="full_attention").original_max_position_embeddings == 8192
    flat = {**nested, "rope_parameters": yarn}
    assert rope.config(flat).original_max_position_embeddings == 1024


@pytest.mark.parametrize(
    ("model_type", "flag", "interleaved"), [("qwen3_vl_text", None, True), ("qwen2_vl", True, False)]
)
def test_how_multimodal_sections_combine_is_the_models_code_not_the_flag(
    model_type, flag, interleaved
) -> None:
    """Qwen3-VL's rotary interleaves its sections and Qwen2-VL's takes them in blocks, whatever the config's
    mrope_interleaved says (no transformers code reads it): posenc followed the flag, and a Qwen3-VL config
    without it gave blocks (cos off by up to 2). Checked against transformers' Qwen3-VL rotary."""
    parameters = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20]}
    if flag is not None:
        parameters["mrope_interleaved"] = flag
    cfg = {"model_type": model_type, "head_dim": 128, "rope_parameters": parameters}
    assert rope.config(cfg).mrope_interleaved is interleaved
    if model_type == "qwen3_vl_text":
        import torch
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

        made = Qwen3VLTextConfig(
            hidden_size=512,
            num_attention_heads=4,
            num_hidden_layers=1,
            vocab_size=10,
            rope_parameters=dict(parameters),
        )
        ids = torch.randint(0, 3000, (3, 1, 20), generator=torch.Generator().manual_seed(0))
        theirs, _ = Qwen3VLTextRotaryEmbedding(config=made)(torch.zeros(1), ids)
        ours, _ = rope.cos_sin(ids.numpy(), rope.config(cfg))
        assert abs(theirs.double().numpy() - ours).max() < 1e-3  # float32 angles of positions < 3000


def test_gemma4s_full_attention_layers_take_their_own_head_width() -> None:
    """Gemma 4's full-attention layers are 512 wide where its sliding ones are 256 (per_layer_config, or
    global_head_dim in a config.json, default 512): posenc read 256 for both, so the proportional rotary
    of full attention had exponents over the wrong width (inv_freq[1] 1e6^(-2/256) for 1e6^(-2/512))."""
    from transformers import AutoConfig

    made = AutoConfig.for_model("gemma4_text", num_hidden_layers=6)
    full = rope.config(made, layer_type="full_attention")
    assert (full.head_dim, rope.config(made, layer_type="sliding_attention").head_dim) == (512, 256)
    assert rope.inv_freq(full)[1] == pytest.approx(1e6 ** (-2 / 512), rel=1e-15)
    written = {k: v for k, v in made.to_dict().items() if k != "per_layer_config"}
    assert rope.config(written, layer_type="full_attention").head_dim == 512  # the class's default
    assert rope.config({**written, "global_head_dim": 384}, layer_type="full_attention").head_dim == 384
    uneven = {**made.to_dict(), "per_layer_config": {"5": {"head_dim": 512}, "2": {"head_dim": 384}}}
    uneven["layer_types"] = ["sliding_attention", "sliding_attention", "full_attention"] * 2
    with pytest.raises(ValueError, match="different head widths"):
        rope.config(uneven, layer_type="full_attention")
    # transformers writes the keys zero-padded ("05") where a model has 10 layers or more: the default
    # config's full-attention layers 5 and 11 were read as 256 and 512, and refused as "different widths"
    default = AutoConfig.for_model("gemma4_text")
    assert any(key.startswith("0") for key in default.to_dict()["per_layer_config"])
    assert rope.config(default, layer_type="full_attention").head_dim == 512


@pytest.mark.parametrize(
    ("model_type", "fields"), [("jetmoe", {"kv_channels": 96}), ("jetmoe", {}), ("zamba2", {})]
)
def test_a_head_dim_its_class_names_otherwise(model_type: str, fields: dict) -> None:
    """JetMoE's class maps head_dim to kv_channels (default 128), Zamba2's sets it to 2 · hidden_size //
    num_attention_heads: posenc read hidden_size // num_attention_heads, half or less of the width those
    models rotate (their patch read it from inv_freq, saying the config disagreed)."""
    from transformers import AutoConfig

    cfg = {"model_type": model_type, "hidden_size": 256, "num_attention_heads": 8, **fields}
    made = AutoConfig.for_model(model_type, **{k: v for k, v in cfg.items() if k != "model_type"})
    assert rope.config(cfg).head_dim == made.head_dim == rope.config(made).head_dim


def test_gptj_and_codegen_configs_rotate_their_rotary_dim_of_n_embd_over_n_head() -> None:
    """GPT-J's and CodeGen's classes store hidden_size and num_attention_heads as n_embd and n_head (their
    attribute_map), and rotate rotary_dim features of each head: their configs were refused ("no head_dim
    and not both hidden_size and num_attention_heads"), and with head_dim added rotated the whole head."""
    import numpy as np
    import torch
    from transformers import CodeGenConfig, GPTJConfig
    from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions

    for made in (
        GPTJConfig(n_embd=128, n_head=4, rotary_dim=8),
        CodeGenConfig(n_embd=128, n_head=4, rotary_dim=8),
    ):
        for cfg in (made, made.to_dict()):
            params = rope.config(cfg)
            assert (params.head_dim, params.rotary_dim, params.base) == (32, 8, 10000.0)
            assert params.max_position_embeddings == made.n_positions
        assert rope.config_layout(made) == "interleaved"  # rotate_every_two: adjacent pairs
    table = create_sinusoidal_positions(64, 8)  # sin | cos of the 4 frequencies, float32
    cos, sin = rope.cos_sin(np.arange(64), rope.config(GPTJConfig(n_embd=128, n_head=4, rotary_dim=8)))
    np.testing.assert_allclose(table[:, 4:].numpy(), cos[:, :4], atol=2e-6)
    np.testing.assert_allclose(table[:, :4].numpy(), sin[:, :4], atol=2e-6)
    assert isinstance(table, torch.Tensor)


@pytest.mark.parametrize(
    ("name", "module_name", "sub"),
    [
        ("cohere", "CohereRotaryEmbedding", False),
        ("cohere2", "Cohere2RotaryEmbedding", False),
        ("glm_ocr", "GlmOcrTextRotaryEmbedding", True),
    ],
)
def test_rotary_embedding_of_a_config_gives_its_models_layout(name: str, module_name: str, sub: bool) -> None:
    """Cohere's and GLM-OCR's rotaries emit cos/sin in interleaved pairs: posenc.torch.RotaryEmbedding(config)
    gave halves whatever the config (cos off by 2), where it claims to be their drop-in."""
    import importlib

    import torch
    import transformers

    import posenc.torch as pt

    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    config = transformers.AutoConfig.for_model(name)
    config = config.text_config if sub else config
    x, ids = torch.zeros(1, 1, 8), torch.arange(50)[None]
    want = getattr(module, module_name)(config)(x, ids)
    got = pt.RotaryEmbedding(config)(x, ids)
    assert pt.RotaryEmbedding(config).layout == "interleaved"
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and float((a - b).abs().max()) < 1e-5
    assert pt.RotaryEmbedding(config, layout="half").layout == "half"


@pytest.mark.parametrize(
    ("name", "module_name"),
    [
        ("qwen2_vl", "Qwen2VLRotaryEmbedding"),
        ("qwen3_vl", "Qwen3VLTextRotaryEmbedding"),
        ("qwen3_5", "Qwen3_5TextRotaryEmbedding"),
        ("glm_ocr", "GlmOcrTextRotaryEmbedding"),
    ],
)
def test_a_multimodal_config_without_sections_takes_its_codes_default(name: str, module_name: str) -> None:
    """A config class's default names no mrope_section; the model's code takes its own default
    (rope_parameters.get("mrope_section", [16, 24, 24])). posenc read plain RoPE: cos of shape (3, B, L, d)
    for (3, B, L) ids where transformers gives (B, L, d), off by 2."""
    import importlib

    import torch
    from transformers import AutoConfig

    import posenc.torch as pt

    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    config = AutoConfig.for_model(name).text_config
    assert "mrope_section" not in config.rope_parameters
    ids = torch.stack([torch.arange(30), torch.arange(30) // 5, torch.arange(30) % 5])[:, None]
    x = torch.zeros(1, 1, 8)
    want = getattr(module, module_name)(config)(x, ids)
    got = pt.RotaryEmbedding(config)(x, ids)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and float((a - b).abs().max()) < 1e-5
