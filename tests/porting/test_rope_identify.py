"""posenc.porting.identify_rope (and identify, load_table, ``posenc identify``) on stored RoPE buffers:
inv_freq vectors and cos/sin caches built the way Hugging Face transformers builds them, in float32 and
bfloat16, in both layouts, LongRoPE (Phi-3) and the merged multimodal caches of Qwen2-VL and Qwen3-VL
included; and the sinusoidal tables are still not taken for RoPE buffers."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest

import posenc
from posenc import porting, rope
from posenc.porting import RopeMatch, identify, identify_rope, load_table
from posenc.porting.rope_matching import looks_like_rope

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}
QWEN_YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}

#: name: (model family, config keywords, expected rope_type, base, scaling keywords that must be recovered)
MODELS = {
    "llama2": ("llama", {"hidden_size": 4096, "num_attention_heads": 32}, "default", 10000.0, {}),
    "llama3.1": (
        "llama",
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "rope_theta": 500000.0,
            "rope_scaling": LLAMA3,
            "max_position_embeddings": 131072,
        },
        "llama3",
        500000.0,
        {k: v for k, v in LLAMA3.items() if k != "rope_type"},
    ),
    "linear": (
        "llama",
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "rope_scaling": {"rope_type": "linear", "factor": 4.0},
        },
        "linear",
        10000.0,
        {"factor": 4.0},
    ),
    "qwen2-yarn": (
        "qwen2",
        {
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "rope_theta": 1000000.0,
            "rope_scaling": QWEN_YARN,
            "max_position_embeddings": 131072,
        },
        "yarn",
        1000000.0,
        {"factor": 4.0, "original_max_position_embeddings": 32768},
    ),
    "gpt-neox": (
        "gpt_neox",
        {"hidden_size": 6144, "num_attention_heads": 64, "rotary_pct": 0.25, "rotary_emb_base": 10000},
        "default",
        10000.0,
        {},
    ),
}


def hf_rotary(name: str):
    """transformers' rotary module of a model (its inv_freq as the model holds it) and its config."""
    family, keywords, *_ = MODELS[name]
    if family == "llama":
        from transformers import LlamaConfig as Config
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding as Rotary
    elif family == "qwen2":
        from transformers import Qwen2Config as Config
        from transformers.models.qwen2.modeling_qwen2 import Qwen2RotaryEmbedding as Rotary
    else:
        from transformers import GPTNeoXConfig as Config
        from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding as Rotary
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Config(**keywords)
        return Rotary(config), config


def hf_cache(module, dtype, positions: int = 4096):
    """(cos, sin) of transformers' forward: shape (1, positions, rotary_dim), in the input's dtype."""
    x = torch.zeros(1, positions, 8, dtype=dtype)
    with torch.no_grad():
        return module(x, torch.arange(positions)[None])


def assert_identified(match: RopeMatch, name: str, *, head_dim: int | None = None) -> None:
    _, _, kind, base, scaling = MODELS[name]
    assert isinstance(match, RopeMatch) and match.matches, match.describe()
    assert match.rope_type == kind and match.name == f"rope-{kind}"
    assert match.parameters.base == base  # snapped to the config's round number, exactly
    for field, value in scaling.items():
        assert getattr(match.parameters, field) == value, (field, match.describe())
    assert match.max_error <= match.tolerance
    if head_dim is not None:
        assert match.parameters.head_dim == head_dim


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(MODELS))
def test_inv_freq_of_transformers_modules(name: str, dtype: str) -> None:
    module, config = hf_rotary(name)
    stored = module.inv_freq.to(getattr(torch, dtype))
    match = identify_rope(stored)
    assert_identified(match, name)
    assert match.source == "inv_freq" and match.layout is None and match.precision == dtype and match.relative
    expected = rope.config(config)
    assert match.parameters.rotary_dim == expected.rotary_dim
    if dtype == "float32":
        assert match.max_error > 0  # transformers' float32 values are not the exact ones ...
        assert match.max_error < 1e-6  # ... but close: a few float32 ulps
    else:
        assert 1e-4 < match.max_error <= 2.0**-8 + 1e-5  # bfloat16 rounding dominates
    # the ready-to-paste line builds the same parameters
    assert eval(match.code, {"posenc": posenc}) == match.parameters  # our own output


def test_partial_rotary_needs_head_dim() -> None:
    module, config = hf_rotary("gpt-neox")
    alone = identify_rope(module.inv_freq)
    assert alone.parameters.rotary_dim == 24 and alone.parameters.head_dim == 24
    assert "head_dim=24 assumed" in alone.evidence
    told = identify_rope(module.inv_freq, head_dim=96)
    expected = dataclasses.replace(rope.config(config), max_position_embeddings=None)  # not in the buffer
    assert told.parameters == expected  # head 96, partial_rotary_factor 0.25
    assert told.options["partial_rotary_factor"] == 0.25


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["llama3.1", "qwen2-yarn", "linear", "llama2"])
def test_caches_of_transformers_forward(name: str, dtype: str) -> None:
    module, config = hf_rotary(name)
    cos, sin = hf_cache(module, getattr(torch, dtype))
    for which, cache in (("cos", cos), ("sin", sin)):
        match = identify_rope(cache)  # (1, positions, rotary_dim): the batch axis is dropped
        assert_identified(match, name)
        assert match.source == f"{which} cache" and match.layout == "half" and match.precision == dtype
        assert not match.relative
        assert match.attention_scaling == pytest.approx(module.attention_scaling, rel=1e-12)
        # the reported error is against posenc's exact table
        exact = rope.cos_sin(np.arange(4096), rope.config(config), dtype="float64")[which == "sin"]
        assert match.max_error == pytest.approx(np.max(np.abs(exact - cache[0].float().numpy())), rel=1e-6)
        if dtype == "bfloat16":
            assert match.max_error > 1.9e-3 and "bfloat16 rounding alone: 0.002" in match.describe()


def yarn(head_dim: int, base: float, **scaling: object) -> rope.RopeParameters:
    """The parameters of a YaRN-scaled rotary embedding."""
    return rope.config(head_dim=head_dim, base=base, scaling={"rope_type": "yarn", **scaling})


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_interleaved_caches(dtype: str) -> None:
    """DeepSeek-V3-like yarn (mscale = mscale_all_dim, so A = 1) and Llama 3.1, laid out pairwise."""
    deepseek = yarn(
        64, 10000.0, factor=40.0, original_max_position_embeddings=4096, mscale=1.0, mscale_all_dim=1.0
    )
    llama = rope.config(head_dim=128, base=500000.0, scaling=LLAMA3)
    for params in (deepseek, llama):
        cos, sin = rope.cos_sin(np.arange(2048), params, dtype=dtype, layout="interleaved")
        for cache in (cos, sin):
            match = identify(cache)[0]
            assert isinstance(match, RopeMatch) and match.matches and match.layout == "interleaved"
            assert match.rope_type == params.rope_type and match.parameters.factor == params.factor
            assert match.parameters.base == params.base
            assert rope.inv_freq(match.parameters) == pytest.approx(rope.inv_freq(params), rel=1e-12)
            assert match.attention_scaling == rope.attention_scaling(params)
            if dtype == "float32":  # posenc's own table: correctly rounded, so within half an ulp
                assert match.max_error <= 2.0**-24
    half, _ = rope.cos_sin(np.arange(64), llama, layout="half")
    assert identify_rope(half).layout == "half"


def test_other_types_and_what_cannot_be_told() -> None:
    # yarn without truncation (gpt-oss): the ramp ends are fractional, the context length exact
    gpt_oss = yarn(64, 150000.0, factor=32.0, original_max_position_embeddings=4096, truncate=False)
    match = identify_rope(rope.inv_freq(gpt_oss).astype(np.float32))
    assert match.matches and match.parameters == gpt_oss
    # proportional (Gemma 4): trailing zero frequencies
    gemma = rope.config(
        head_dim=256, base=1000000.0, partial_rotary_factor=0.25, scaling={"rope_type": "proportional"}
    )
    for stored in (rope.inv_freq(gemma).astype(np.float32), rope.cos_sin(np.arange(512), gemma)[1]):
        match = identify_rope(stored)
        assert match.matches and match.parameters == gemma
    # a grown dynamic NTK buffer is the default type with another base, and says so
    dynamic = rope.config(
        head_dim=128,
        base=10000.0,
        max_position_embeddings=4096,
        scaling={"rope_type": "dynamic", "factor": 2.0},
    )
    match = identify_rope(rope.inv_freq(dynamic, seq_len=8192).astype(np.float32))
    assert match.matches and match.rope_type == "default" and match.parameters.base > 20000
    assert "dynamic NTK" in match.evidence
    # llama3: only M/low and M/high are fixed, which the evidence says
    match = identify_rope(rope.inv_freq(rope.config(head_dim=128, base=500000.0, scaling=LLAMA3)))
    assert "fixes only original_max_position_embeddings / low_freq_factor = 8192" in match.evidence


def test_a_wrong_buffer_does_not_match() -> None:
    theta = rope.inv_freq(rope.config(head_dim=128, base=500000.0, scaling=LLAMA3)).astype(np.float32)
    bent = theta.copy()
    bent[40:] *= np.linspace(1.0, 1.5, 24, dtype=np.float32)  # no type scales frequencies this way
    bent = np.minimum.accumulate(bent)
    matches = identify(bent)
    assert matches and not matches[0].matches and "does NOT match" in matches[0].describe()
    assert len({m.rope_type for m in matches}) == len(matches)  # the nearest of each type


def test_sinusoidal_tables_are_not_rope_buffers_and_back() -> None:
    for table in (
        posenc.table(64, 32),
        posenc.table(20, 8)[None],
        posenc.table(50, 16, layout="sin_cos"),
        posenc.table(20, 8, dtype="bfloat16"),
        np.zeros((10, 8)),
        np.ones((4, 8)),
        np.zeros(8),
    ):
        assert looks_like_rope(table) is None
    best = identify(posenc.table(64, 32))[0]
    assert type(best) is porting.Match and best.matches and "paper" in best.name
    with pytest.raises(ValueError, match="neither a RoPE inv_freq vector nor a cos/sin cache"):
        identify_rope(posenc.table(64, 32))
    with pytest.raises(ValueError, match=r"rows >= 2, d_model >= 2"):
        identify(np.zeros(5))  # a vector that is no inv_freq keeps the table error
    theta = rope.inv_freq(rope.config(head_dim=64))
    assert looks_like_rope(theta) == "inv_freq" and isinstance(identify(theta)[0], RopeMatch)
    cos, _ = rope.cos_sin(np.arange(32), rope.config(head_dim=64))
    assert looks_like_rope(cos) == "cache" and isinstance(identify(cos)[0], RopeMatch)


def test_result_object() -> None:
    module, _ = hf_rotary("qwen2-yarn")
    match = identify_rope(module.inv_freq)
    record = match.as_dict()
    assert record["rope_type"] == "yarn" and record["config"] == match.options and record["matches"]
    assert record["code"].startswith("posenc.rope.config(head_dim=128, base=1000000.0, scaling={")
    lines = match.describe().splitlines()
    assert lines[0].startswith("matches: RoPE yarn inv_freq") and "factor=4.0" in lines[0]
    assert lines[1].startswith("     evidence: ") and "yarn's formula" in lines[1]
    assert lines[2] == "     " + match.code
    assert posenc.rope.config(**match.options) == match.parameters


def test_load_table_finds_inv_freq(tmp_path) -> None:
    module, _ = hf_rotary("llama3.1")
    weight = torch.zeros(4, 4)
    per_layer = {f"model.layers.{i}.self_attn.rotary_emb.inv_freq": module.inv_freq.clone() for i in range(3)}
    torch.save({"model.embed_tokens.weight": weight, **per_layer}, tmp_path / "old_llama.pt")
    stored = load_table(tmp_path / "old_llama.pt")  # several equal ones: one per layer
    assert np.array_equal(stored, module.inv_freq.numpy())
    assert identify(stored)[0].rope_type == "llama3"

    from safetensors.torch import save_file

    save_file(
        {"rotary_emb.inv_freq": module.inv_freq.to(torch.bfloat16), "w": weight}, tmp_path / "m.safetensors"
    )
    stored = load_table(tmp_path / "m.safetensors")
    match = identify(stored)[0]
    assert match.matches and match.precision == "bfloat16" and match.parameters.factor == 8.0
    assert np.array_equal(load_table(tmp_path / "m.safetensors", key="rotary_emb.inv_freq"), stored)

    different = {**per_layer, "model.layers.1.self_attn.rotary_emb.inv_freq": module.inv_freq * 2}
    torch.save(different, tmp_path / "different.pt")
    with pytest.raises(ValueError, match=r"3 different RoPE inv_freq buffers.*key="):
        load_table(tmp_path / "different.pt")
    np.save(tmp_path / "vector.npy", np.array([0.0, 1.0, 0.5], np.float32))
    with pytest.raises(ValueError, match=r"shape \(3,\).*\(positions, d_model\).*inv_freq"):
        load_table(tmp_path / "vector.npy")


def test_command_line(tmp_path, capsys) -> None:
    from posenc.cli import main

    module, _ = hf_rotary("llama3.1")
    torch.save({"model.rotary_emb.inv_freq": module.inv_freq}, tmp_path / "rotary.pt")
    assert main(["identify", str(tmp_path / "rotary.pt")]) == 0
    out = capsys.readouterr().out
    assert "table of shape (64,)" in out and "1. matches: RoPE llama3 inv_freq" in out
    assert "posenc.rope.config(head_dim=128, base=500000.0, scaling={'rope_type': 'llama3'" in out
    cos, _ = hf_cache(module, torch.bfloat16, 1024)
    torch.save({"cos": cos}, tmp_path / "cos.pt")
    assert main(["identify", str(tmp_path / "cos.pt"), "--key", "cos", "--json"]) == 0
    assert '"rope_type": "llama3"' in capsys.readouterr().out


# --- LongRoPE (Phi-3) ---------------------------------------------------------------------------------------

#: Made-up factors in the style of Phi-3-mini-128k's config.json (head_dim 96: 48 each). short_factor as
#: Python writes short decimals; long_factor as that config writes them: float32 values printed in full.
PHI3_SHORT = [1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.5, 1.65, 1.8, 1.85, 1.9]
PHI3_SHORT += [1.95, 2.0, 2.0, 2.0] + [2.05] * 12 + [2.1] * 12 + [2.15, 2.15, 2.15, 2.2]
PHI3_LONG = [1.07, 1.12, 1.15, 1.42, 1.57, 1.8, 2.13, 2.13, 3.01, 5.91, 6.95, 9.07, 9.93, 10.71, 11.13, 14.61]
PHI3_LONG += [15.41, 19.81, 37.28, 38.28, 38.6, 40.12, 46.2, 50.94, 55.52, 57.92, 58.56, 59.1, 59.65, 60.19]
PHI3_LONG += [60.87, 61.55, 61.57, 61.59, 61.61, 61.62, 61.64, 61.65, 61.66, 61.7, 61.72, 61.75, 61.78, 61.8]
PHI3_LONG += [61.8, 61.82, 61.84, 61.88]


def phi3_rotary(short: list[float] = PHI3_SHORT, long: list[float] = PHI3_LONG):
    """transformers' Phi-3 rotary module (Phi-3-mini-128k's shape: head 96, 4096 → 131072 positions)."""
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    scaling = {
        "type": "longrope",
        "short_factor": short,
        "long_factor": [float(np.float32(x)) for x in long],  # as Phi-3's config.json holds them
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = Phi3Config(
            hidden_size=3072,
            num_attention_heads=32,
            rope_theta=10000.0,
            max_position_embeddings=131072,
            original_max_position_embeddings=4096,
            rope_scaling=scaling,
        )
        return Phi3RotaryEmbedding(config), config


def assert_longrope(match: RopeMatch, factors: list[float], rtol: float) -> rope.RopeParameters:
    """A longrope match at base 10000 whose factor list (given to both lists) is ``factors`` to ``rtol``
    (what the buffer tells), and whose paste line builds its parameters."""
    assert match.matches and match.rope_type == "longrope" and match.name == "rope-longrope", match.describe()
    params = eval(match.code, {"posenc": posenc})  # our own output
    assert params == match.parameters and params.base == 10000.0 and params.rotary_dim == 96
    assert params.short_factor == params.long_factor  # a buffer cannot tell which list it holds ...
    assert "cannot tell short_factor from long_factor" in match.evidence  # ... and says so
    np.testing.assert_allclose(params.short_factor, factors, rtol=rtol)
    assert match.max_error <= match.tolerance
    return params


@pytest.mark.parametrize("which", ["short", "long"])
def test_longrope_inv_freq_of_phi3(which: str) -> None:
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    module, config = phi3_rotary()
    if which == "short":
        stored = module.inv_freq  # what the model holds: short_factor until a sequence outgrows 4096
    else:
        stored, _ = ROPE_INIT_FUNCTIONS["longrope"](config, None, seq_len=8192)  # after a long forward
    factors = PHI3_SHORT if which == "short" else PHI3_LONG
    match = identify_rope(stored)
    params = assert_longrope(match, factors, 0.0)
    assert params.short_factor == tuple(factors)  # float32 buffer: each factor to its config decimal
    assert match.source == "inv_freq" and match.precision == "float32"
    # transformers' float32 values are a few ulps from the exact ones; the paste line rebuilds them
    exact = rope.inv_freq(params)
    assert np.max(np.abs(exact / stored.numpy() - 1)) == pytest.approx(match.max_error, rel=1e-6)
    assert 0 < match.max_error < 1e-6
    assert "Phi-3's, take yours from config.json" in match.evidence  # M₀ and A are not in inv_freq


@pytest.mark.parametrize("rows", [2048, 4608])
def test_longrope_caches_of_phi3(rows: int) -> None:
    module, _ = phi3_rotary()
    cos, sin = hf_cache(module, torch.float32, rows)  # past 4096 positions transformers uses long_factor
    factors = PHI3_SHORT if rows <= 4096 else PHI3_LONG
    for which, cache in (("cos", cos), ("sin", sin)):
        match = identify_rope(cache)
        # the lowest frequencies turn little over the cache: their factors are known to ~0.3% only
        params = assert_longrope(match, factors, 1e-2)
        assert match.source == f"{which} cache" and not match.relative
        # the amplitude sqrt(1 + ln 32 / ln 4096) gives Phi-3's lengths back
        assert match.attention_scaling == pytest.approx(module.attention_scaling, rel=1e-12)
        assert match.options["max_position_embeddings"] == 131072
        assert match.options["scaling"]["original_max_position_embeddings"] == 4096
        assert params.short_factor[:24] == tuple(factors[:24])  # the well-measured factors exactly
        exact = rope.cos_sin(np.arange(rows), params, dtype="float64")[which == "sin"]
        assert np.max(np.abs(exact - cache[0].numpy())) == pytest.approx(match.max_error, rel=1e-9)


def test_longrope_does_not_take_other_verdicts() -> None:
    # equal factors are linear scaling; ones are no scaling: both keep their own verdicts
    for factor, kind in ((4.0, "linear"), (1.0, "default")):
        module, _ = phi3_rotary([factor] * 48, [factor] * 48)
        match = identify_rope(module.inv_freq)
        assert match.matches and match.rope_type == kind, match.describe()
        if kind == "linear":
            assert match.parameters.factor == 4.0
    # bfloat16 rounding (a model cast with .to(bfloat16)) hides the factors' decimals: no longrope reading
    module, _ = phi3_rotary()
    match = identify_rope(module.inv_freq.to(torch.bfloat16))
    assert not match.matches and match.rope_type != "longrope"


# --- multimodal RoPE (Qwen2-VL, Qwen3-VL) -------------------------------------------------------------------

QWEN2_VL = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}
QWEN3_VL = {"rope_type": "default", "rope_theta": 5000000.0, "mrope_section": [24, 20, 20]}
QWEN3_VL["mrope_interleaved"] = True


def qwen_vl(name: str, grids: list[list[int]], words: int = 14):
    """A small Qwen2-VL or Qwen3-VL (head 128, the real sections and bases, no weights loaded) and the
    (3, tokens) position ids its get_rope_index gives a prompt of ``words`` text tokens, then for each
    image grid (t, h, w patches) a vision-start token, the image and ``words`` text tokens."""
    text = {"hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1}
    text |= {"intermediate_size": 64, "vocab_size": 64}
    vision = {"depth": 1, "hidden_size": 256, "num_heads": 2, "spatial_merge_size": 2}
    tokens = {"image_token_id": 60, "video_token_id": 61, "vision_start_token_id": 62}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "qwen2-vl":
            from transformers import Qwen2VLConfig as Config
            from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel as Model
            from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding as Rotary

            config = Config(
                text_config={**text, "rope_parameters": QWEN2_VL},
                vision_config={**vision, "embed_dim": 32, "mlp_ratio": 1},
                **tokens,
            )
        else:
            from transformers import Qwen3VLConfig as Config
            from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel as Model
            from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding as Rotary

            config = Config(
                text_config={**text, "head_dim": 128, "rope_parameters": QWEN3_VL},
                vision_config={**vision, "intermediate_size": 64, "out_hidden_size": 256},
                **tokens,
            )
        model = Model(config)
    ids = [1] * words
    for t, h, w in grids:
        ids += [62] + [60] * (t * h * w // 4) + [2] * words
    ids = torch.tensor([ids])
    positions, _ = model.get_rope_index(ids, (ids == 60).int(), image_grid_thw=torch.tensor(grids))
    return Rotary(config.text_config), config.text_config, positions


def merged_cache(module, positions, dtype=torch.float32):
    """(cos, sin) as the model's forward gives them: (1, tokens, 128), the three axes merged."""
    with torch.no_grad():
        return module(torch.zeros(1, 8, dtype=dtype), positions)


def test_mrope_inv_freq_is_default_rope() -> None:
    for name in ("qwen2-vl", "qwen3-vl"):
        module, config, _ = qwen_vl(name, [])
        match = identify_rope(module.inv_freq)
        assert match.matches and match.rope_type == "default" and match.positions is None
        assert match.parameters.base == rope.config(config).base and match.parameters.mrope_section is None
        assert "mrope_section cannot be seen in it" in match.evidence


@pytest.mark.parametrize("name", ["qwen2-vl", "qwen3-vl"])
def test_mrope_merged_caches(name: str) -> None:
    # two images (8x10 and 15x6 merged patches) between text: the vision rows' t, h, w differ
    module, config, positions = qwen_vl(name, [[1, 16, 20], [1, 30, 12]])
    expected = dataclasses.replace(rope.config(config), max_position_embeddings=None)  # not in a cache
    for which, cache in zip(("cos", "sin"), merged_cache(module, positions), strict=True):
        match = identify_rope(cache)
        assert match.matches and match.source == f"{which} cache" and match.layout == "half", match.describe()
        assert match.parameters == expected  # base, mrope_section, interleaved or not
        # each row's (t, h, w) positions are transformers' get_rope_index, every one
        assert np.array_equal(np.array(match.positions), positions[:, 0].numpy())
        # the paste line and the positions rebuild the stored cache, to float32 code's error
        params = eval(match.code, {"posenc": posenc})
        exact = rope.cos_sin(np.array(match.positions), params, dtype="float64")[which == "sin"]
        assert np.max(np.abs(exact - cache[0].numpy())) == pytest.approx(match.max_error, rel=1e-9)
        assert 0 < match.max_error <= match.tolerance
        style = "interleaved (Qwen3-VL style)" if name == "qwen3-vl" else "contiguous (Qwen2-VL style)"
        assert style in match.evidence
        assert "rows 0-15 t = h = w = 0..15" in match.evidence  # text, vision start, first patch


def test_mrope_what_a_cache_cannot_show() -> None:
    module, _, positions = qwen_vl("qwen3-vl", [[1, 16, 20]])
    # text alone (t = h = w): a plain cache, which says so
    cos, _ = merged_cache(module, torch.arange(60)[None, None].expand(3, 1, -1))
    match = identify_rope(cos)
    assert match.matches and match.rope_type == "default" and match.parameters.mrope_section is None
    assert "an M-RoPE cache of text tokens alone" in match.evidence
    # bfloat16 at small positions: the low frequencies show no axis; the released sections are the plainest
    cos, _ = merged_cache(module, positions, torch.bfloat16)
    match = identify_rope(cos)
    assert match.matches and match.precision == "bfloat16", match.describe()
    assert match.parameters.mrope_section == (24, 20, 20) and match.parameters.mrope_interleaved
    assert "other sections fit as well, this is the plainest" in match.evidence


def test_command_line_longrope_and_mrope(tmp_path, capsys) -> None:
    import json

    from safetensors.torch import save_file

    from posenc.cli import main

    module, _ = phi3_rotary()
    np.save(tmp_path / "inv_freq.npy", module.inv_freq.numpy())
    assert main(["identify", str(tmp_path / "inv_freq.npy")]) == 0
    out = capsys.readouterr().out
    assert "1. matches: RoPE longrope inv_freq" in out and "short_factor=[1.05, 1.05, 1.05, ..., 2.2]" in out
    line = next(text.strip() for text in out.splitlines() if text.strip().startswith("posenc.rope.config("))
    assert rope.inv_freq(eval(line, {"posenc": posenc})) == pytest.approx(module.inv_freq.numpy(), rel=1e-6)

    vl, _, positions = qwen_vl("qwen2-vl", [[1, 16, 20]])
    cos, _ = merged_cache(vl, positions)
    save_file({"model.rotary_emb.cos": cos.contiguous()}, tmp_path / "cos.safetensors")
    assert main(["identify", str(tmp_path / "cos.safetensors"), "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["candidates"][0]
    assert best["matches"] and best["options"]["scaling"]["mrope_section"] == [16, 24, 24]
    assert best["positions"] == positions[:, 0].tolist()
