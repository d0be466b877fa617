"""posenc.rope.cos_sin and posenc.torch's rotary embeddings: every value A · cos(p θ_i) (resp. sin)
correctly rounded against an mpmath reference for each RoPE type; the layouts and multimodal sections; the
torch module a drop-in for Hugging Face's rotary modules; the portable algorithm's bits equal to the
core's."""

from __future__ import annotations

import dataclasses

import mpmath
import numpy as np
import pytest
import torch

import posenc.rope as rope
import posenc.torch as ptorch
from tests.core.test_core_explicit import nearest
from tests.rope.test_rope_frequencies import ALL, mp_frequencies, mp_scaling
from tests.rope.test_rope_parameters import CONFIGS
from tests.support.module_cases import logits_before_and_after

ml_dtypes = pytest.importorskip("ml_dtypes")
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}


@pytest.mark.parametrize("name", sorted(ALL))
def test_every_type_is_correctly_rounded_against_mpmath(name):
    params = ALL[name]
    rng = np.random.default_rng(len(name))
    positions = np.concatenate([[0, 1, 4095, 4096, 4097], rng.integers(0, 2**31, 6), rng.random(3) * 9000])
    seq_len = int(positions.max()) + 1
    dtype = ["float32", "bfloat16", "float16"][len(name) % 3]
    ids = np.stack([positions] * 3) if params.mrope_section else positions  # text: one id on every axis
    cos, sin = rope.cos_sin(ids, params, dtype=dtype, seq_len=seq_len)
    n = params.rotary_dim // 2
    assert cos.shape == sin.shape == (len(positions), 2 * n) and cos.dtype == DTYPES[dtype]
    np.testing.assert_array_equal(cos[:, :n], cos[:, n:])  # "half": [θ_0 .. θ_n-1, θ_0 .. θ_n-1]
    with mpmath.workdps(60):
        thetas, scale = mp_frequencies(params, seq_len), mp_scaling(params)
        for row, p in enumerate(positions):
            for i in range(0, n, max(1, n // 12)):
                angle = mpmath.mpf(float(p)) * thetas[i]
                want = (
                    nearest(scale * mpmath.cos(angle), DTYPES[dtype]),
                    nearest(scale * mpmath.sin(angle), DTYPES[dtype]),
                )
                got = float(cos[row, i]), float(sin[row, i])
                assert got == want, (name, p, i, got, want)


def within_one_ulp(got: float, exact: mpmath.mpf) -> bool:
    """Whether the float64 ``got`` is one of the two float64s around the real ``exact`` (|got - exact| < 1
    ulp: the nearest, or its neighbour on exact's side)."""
    closest = nearest(exact, np.float64)
    if got == closest:
        return True
    return exact != closest and got == float(np.nextafter(closest, np.inf if exact > closest else -np.inf))


# attention scaling A != 1: YaRN's 0.1 ln(factor) + 1 (Qwen2), DeepSeek-V3's mscale ratio, a given
# attention_factor (small and large), LongRoPE's sqrt(1 + ln F / ln M₀) (Phi-3, and with factor given)
SCALED = {
    **{name: ALL[name] for name in ("qwen2_yarn", "deepseek_v3", "phi3_mini_128k", "longrope_factor")},
    "yarn_attention_factor": ALL["yarn_attention_factor"],
    "yarn_attention_factor_1000": dataclasses.replace(ALL["yarn_attention_factor"], attention_factor=1000.0),
}


@pytest.mark.parametrize("name", sorted(SCALED))
def test_float64_is_within_one_ulp_under_an_attention_scaling(name):
    """A · cos(p θ_i) rounded once from double-doubles: a float64 cos times A's float64 rounds twice and is
    off by up to 1.6 ulp (issue 32)."""
    params = SCALED[name]
    rng = np.random.default_rng(len(name))
    positions = np.concatenate(
        [
            [0, -0.0, 1, 5e-324, -3e-20, 2.5e-10, 4095, 4096, 2**31 - 1],
            rng.integers(-(2**31) + 1, 2**31, 200),
            rng.integers(0, 2**14, 50),
            rng.random(40) * 2.0**31,
        ]
    )
    seq_len = 2**31 - 1
    cos, sin = rope.cos_sin(positions, params, dtype="float64", seq_len=seq_len)
    n = params.rotary_dim // 2
    assert cos.dtype == np.float64 and rope.attention_scaling(params) != 1
    with mpmath.workdps(40):
        thetas, scale = mp_frequencies(params, seq_len), mp_scaling(params)
        columns = range(0, n, max(1, n // 12))
        bad = []
        for row, p in enumerate(positions):
            for i in columns:
                angle = mpmath.mpf(float(p)) * thetas[i]
                for got, exact in (
                    (cos[row, i], scale * mpmath.cos(angle)),
                    (sin[row, i], scale * mpmath.sin(angle)),
                ):
                    if not within_one_ulp(float(got), exact):
                        bad.append((float(p), i, float(got), mpmath.nstr(exact, 20)))
    assert not bad, (len(bad), bad[:3])


def test_layouts_and_the_default_seq_len():
    params = rope.config(CONFIGS["phi3_mini_128k"])
    positions = np.arange(5000)[None]
    cos, _ = rope.cos_sin(positions, params)  # seq_len = 5000 > 4096: the long factors
    long_cos, _ = rope.cos_sin(positions, params, seq_len=5000)
    short_cos, _ = rope.cos_sin(positions, params, seq_len=4096)
    np.testing.assert_array_equal(cos, long_cos)
    assert not np.array_equal(cos, short_cos)
    half, _ = rope.cos_sin([3, 7], params, layout="half", seq_len=10)
    pairs, _ = rope.cos_sin([3, 7], params, layout="interleaved", seq_len=10)
    n = params.rotary_dim // 2
    np.testing.assert_array_equal(pairs[:, 0::2], half[:, :n])
    np.testing.assert_array_equal(pairs[:, 1::2], half[:, :n])


@pytest.mark.parametrize("interleaved", [False, True])
def test_multimodal_sections_take_each_frequency_from_its_axis(interleaved):
    # no model_type: the flag decides (Qwen2-VL's code takes its sections in blocks whatever it says)
    cfg = {key: value for key, value in CONFIGS["qwen2_vl"].items() if key != "model_type"}
    cfg["rope_scaling"] = {**cfg["rope_scaling"], "mrope_interleaved": interleaved}
    params = rope.config(cfg)
    t, h, w = params.mrope_section
    ids = np.stack([np.arange(6), np.arange(6) * 3 + 1, np.arange(6) * 5 + 2])[:, None]  # (3, 1, 6)
    cos, sin = rope.cos_sin(ids, params)
    assert cos.shape == (1, 6, params.rotary_dim)
    per_axis = [rope.cos_sin(np.stack([ids[a]] * 3), params)[1] for a in range(3)]  # one axis alone
    n = params.rotary_dim // 2
    if interleaved:
        axis = np.zeros(n, int)
        axis[1 : 3 * h : 3], axis[2 : 3 * w : 3] = 1, 2
    else:
        axis = np.repeat([0, 1, 2], [t, h, w])
    for i in range(n):
        np.testing.assert_array_equal(sin[..., i], per_axis[axis[i]][..., i])
    with pytest.raises(ValueError, match="leading axis of 3"):
        rope.cos_sin(np.arange(6), params)


@pytest.mark.parametrize("interleaved", [False, True])
def test_changing_the_sections_axes_in_place_never_reaches_a_later_cos_sin(interleaved):
    """mrope_axes is the caller's array, not the cache cos_sin reads: zeroing it changes nothing later."""
    from posenc.rope.arrays import mrope_axes

    params = rope.config(
        head_dim=8,
        scaling={"rope_type": "default", "mrope_section": [1, 1, 2], "mrope_interleaved": interleaved},
    )
    ids = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22]])
    want = rope.cos_sin(ids, params)
    axes = mrope_axes(params.mrope_section, params.mrope_interleaved)
    assert axes.flags.writeable
    axes[:] = 0
    for got, expected in zip(rope.cos_sin(ids, params), want, strict=True):
        np.testing.assert_array_equal(got, expected)
    assert mrope_axes(params.mrope_section, params.mrope_interleaved).tolist() != [0, 0, 0, 0]


# --- torch: a drop-in for Hugging Face's rotary modules --------------------------------------------------

HF_MODULES = {
    "llama31_8b": ("LlamaConfig", "llama.modeling_llama", "LlamaRotaryEmbedding", "apply_rotary_pos_emb"),
    "qwen2_yarn": ("Qwen2Config", "qwen2.modeling_qwen2", "Qwen2RotaryEmbedding", "apply_rotary_pos_emb"),
    "phi3_mini_128k": ("Phi3Config", "phi3.modeling_phi3", "Phi3RotaryEmbedding", "apply_rotary_pos_emb"),
    "gpt_neox": (
        "GPTNeoXConfig",
        "gpt_neox.modeling_gpt_neox",
        "GPTNeoXRotaryEmbedding",
        "apply_rotary_pos_emb",
    ),
    "qwen2_vl": ("Qwen2VLTextConfig", "qwen2_vl.modeling_qwen2_vl", "Qwen2VLRotaryEmbedding", None),
}


@pytest.fixture(scope="module")
def hf():
    import importlib

    transformers = pytest.importorskip("transformers")
    return transformers, importlib


@pytest.mark.parametrize("name", sorted(HF_MODULES))
def test_the_torch_module_is_a_drop_in_for_hugging_face(hf, name):
    transformers, importlib = hf
    config_class, module_path, rotary_class, apply_name = HF_MODULES[name]
    config = getattr(transformers, config_class)(**CONFIGS[name])
    module = importlib.import_module(f"transformers.models.{module_path}")
    theirs = getattr(module, rotary_class)(config)
    ours = ptorch.RotaryEmbedding(config)
    ids = torch.arange(2048)[None].repeat(2, 1)
    if name == "qwen2_vl":
        ids = torch.stack([ids, ids // 2, ids // 3])
    x = torch.zeros(2, 8, 4)
    their_cos, their_sin = theirs(x, ids)
    our_cos, our_sin = ours(x, ids)
    assert our_cos.shape == their_cos.shape and our_cos.dtype == their_cos.dtype == torch.float32
    # transformers forms float32 angles: its error grows with the position (~2048 · 2**-24 here)
    torch.testing.assert_close(our_cos, their_cos, atol=2e-4, rtol=0)
    torch.testing.assert_close(our_sin, their_sin, atol=2e-4, rtol=0)
    torch.testing.assert_close(ours.inv_freq, theirs.inv_freq, rtol=1e-6, atol=0)
    assert ours.attention_scaling == pytest.approx(theirs.attention_scaling, rel=1e-6)
    if apply_name:
        q, k = (
            torch.randn(
                2, 3, 2048, config.head_dim if hasattr(config, "head_dim") and config.head_dim else 128
            ),
            None,
        )
        q = torch.randn(2, 3, 2048, our_cos.shape[-1] * (4 if name == "gpt_neox" else 1))
        k = torch.randn_like(q)
        apply = getattr(module, apply_name)
        want = apply(q, k, our_cos, our_sin)
        got = ptorch.apply_rotary(q, k, our_cos, our_sin)
        torch.testing.assert_close(got[0], want[0], atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(got[1], want[1], atol=1e-6, rtol=1e-6)


def test_real_positions_of_every_dtype_are_read_exactly():
    params = rope.config(CONFIGS["llama31_8b"])
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.uint8):
        ids = torch.tensor([[0, 3, 200]], dtype=dtype)
        cos, _ = ptorch.rotary.cos_sin(ids, params)
        np.testing.assert_array_equal(cos.numpy(), rope.cos_sin(np.array([[0, 3, 200]]), params)[0])


def test_bfloat16_is_rounded_once_from_the_exact_value():
    params = rope.config(CONFIGS["llama31_8b"])
    ids = torch.tensor([[0, 1, 100000, 2**31 - 1]])
    cos, sin = ptorch.RotaryEmbedding(params)(torch.zeros(1, dtype=torch.bfloat16), ids)
    want_cos, want_sin = rope.cos_sin(ids.numpy(), params, dtype="bfloat16")
    assert cos.dtype == torch.bfloat16
    np.testing.assert_array_equal(cos.view(torch.int16).numpy(), want_cos.view(np.int16))
    np.testing.assert_array_equal(sin.view(torch.int16).numpy(), want_sin.view(np.int16))


@pytest.mark.parametrize("name", ["llama31_8b", "qwen2_yarn", "deepseek_v3", "gpt_neox", "qwen2_vl"])
def test_the_portable_algorithm_gives_the_cores_bits_and_compiles_without_a_break(name):
    params = rope.config(CONFIGS[name])
    rng = np.random.default_rng(1)
    ids = torch.from_numpy(rng.integers(0, 2**31, (2, 300)))
    if params.mrope_section:
        ids = torch.stack([ids, ids // 2, ids // 3])
    want = ptorch.rotary.cos_sin(ids, params)  # eager CPU: the NumPy core

    def run(positions):
        return ptorch.rotary.cos_sin(positions, params)

    compiled = torch.compile(run, fullgraph=True, dynamic=True)
    got = compiled(ids)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    meta = run(ids.to("meta"))
    assert meta[0].shape == want[0].shape and meta[0].device.type == "meta"


def test_apply_rotary_interleaved_and_partial():
    params = rope.config(head_dim=8, base=100.0, partial_rotary_factor=0.5)
    cos, sin = ptorch.rotary.cos_sin(torch.arange(3)[None], params, layout="interleaved")
    q = torch.arange(24.0).reshape(1, 1, 3, 8)
    rotated, _ = ptorch.apply_rotary(q, q, cos, sin, layout="interleaved")
    x0, x1 = q[..., 0:4:2], q[..., 1:4:2]
    c, s = cos[:, None, :, 0::2], sin[:, None, :, 0::2]
    torch.testing.assert_close(rotated[..., 0:4:2], x0 * c - x1 * s)
    torch.testing.assert_close(rotated[..., 1:4:2], x1 * c + x0 * s)
    torch.testing.assert_close(rotated[..., 4:], q[..., 4:])  # the pass-through features
    with pytest.raises(ValueError, match="layout"):
        ptorch.apply_rotary(q, q, cos, sin, layout="neox")


def test_apply_rotary_broadcasts_nothing_that_would_grow_q_or_repeat_a_position():
    """cos/sin of batch 4 against q of batch 1 gave a result of batch 4; one position's cos/sin rotated
    every position of q; position ids of batch 4 against q of batch 1 likewise: each refused, naming cos.
    HF's shapes pass: (B, L, D) or (1, L, D) against (B, heads, L, D), and (B, L, heads, D) at dim 2."""
    import jax.numpy as jnp

    import posenc.jax as pjax

    params = rope.config(head_dim=8, base=10000.0)
    q = torch.randn(2, 3, 5, 8)
    cos, sin = ptorch.rotary.cos_sin(torch.arange(5).expand(2, 5), params)
    for c, s in ((cos, sin), (cos[:1], sin[:1])):
        rotated, _ = ptorch.apply_rotary(q, q, c, s)
        assert rotated.shape == q.shape
    along = ptorch.apply_rotary(q.transpose(1, 2), q.transpose(1, 2), cos, sin, unsqueeze_dim=2)[0]
    torch.testing.assert_close(along, ptorch.apply_rotary(q, q, cos, sin)[0].transpose(1, 2), atol=0, rtol=0)
    wide, one = torch.cat([cos, cos]), ptorch.rotary.cos_sin(torch.tensor([[0]]), params)
    for c, s in ((wide, torch.cat([sin, sin])), one):
        for apply, arrays in ((ptorch.apply_rotary, torch.as_tensor), (pjax.apply_rotary, jnp.asarray)):
            with pytest.raises(ValueError, match=r"cos/sin of shape .* do not fit q of shape \(2, 3, 5, 8\)"):
                apply(*(arrays(t.numpy()) for t in (q, q, c, s)))
        with pytest.raises(ValueError, match="do not fit q"):
            rope.apply_rotary(q.numpy(), q.numpy(), c.numpy(), s.numpy())
    with pytest.raises(ValueError, match="do not fit q"):
        ptorch.apply_rotary(q[:1], q[:1], position_ids=torch.arange(5).expand(4, 5), params=params)


def test_migrating_a_hugging_face_model_keeps_its_outputs(hf):
    """The rotary guide's migration (docs/rotary.md): swap a Llama model's rotary module; the logits agree
    within the model's own float32 error (its angles are formed in float32)."""
    transformers, _ = hf
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=101,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        rope_scaling=CONFIGS["llama31_8b"]["rope_scaling"] | {"original_max_position_embeddings": 512},
        rope_theta=500000.0,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    tokens = torch.randint(0, 101, (2, 700))
    before, after = logits_before_and_after(model, tokens, ptorch.RotaryEmbedding)
    assert after.shape == before.shape
    torch.testing.assert_close(after, before, atol=2e-4, rtol=0)
    assert not torch.equal(after, before)  # the exact values differ from the float32 angles' in places


def test_the_torch_module_exports_with_a_dynamic_length():
    params = rope.config(CONFIGS["qwen2_yarn"])
    module = ptorch.RotaryEmbedding(params)
    length = torch.export.Dim("length", min=2, max=100000)
    exported = torch.export.export(
        module,
        (torch.zeros(1, 8, 4), torch.arange(8)[None]),
        dynamic_shapes={"x": {1: length}, "position_ids": {1: length}},
    )
    cos, sin = exported.module()(torch.zeros(1, 33, 4), torch.arange(33)[None] + 5000)
    want_cos, want_sin = rope.cos_sin(np.arange(33)[None] + 5000, params)
    np.testing.assert_array_equal(cos.numpy(), want_cos)
    np.testing.assert_array_equal(sin.numpy(), want_sin)
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    assert "posenc.rotary.default" in targets  # the portable algorithm's operator: no host read inside


# --- conformance past the trained length: each type against Hugging Face's own module and mpmath ------------

#: Qwen3-VL's text model: interleaved multimodal sections (t, h, w frequencies alternate).
QWEN3_VL = {
    "model_type": "qwen3_vl_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000.0,
    "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True},
}

HF_LONG = {  # name: (config class, module, rotary class, config); 6000 positions, past 4096
    "dynamic": ("LlamaConfig", "llama.modeling_llama", "LlamaRotaryEmbedding", CONFIGS["dynamic"]),
    "linear": ("LlamaConfig", "llama.modeling_llama", "LlamaRotaryEmbedding", CONFIGS["linear"]),
    "deepseek_v3": (
        "DeepseekV3Config",
        "deepseek_v3.modeling_deepseek_v3",
        "DeepseekV3RotaryEmbedding",
        CONFIGS["deepseek_v3"],
    ),
    "phi3_mini_128k": ("Phi3Config", "phi3.modeling_phi3", "Phi3RotaryEmbedding", CONFIGS["phi3_mini_128k"]),
    "qwen3_vl": ("Qwen3VLTextConfig", "qwen3_vl.modeling_qwen3_vl", "Qwen3VLTextRotaryEmbedding", QWEN3_VL),
}


def _section_axes(params: rope.RopeParameters) -> np.ndarray:
    """The position axis (0 t, 1 h, 2 w) each frequency of a multimodal config takes."""
    n = params.rotary_dim // 2
    t, h, w = params.mrope_section
    if not params.mrope_interleaved:
        return np.repeat([0, 1, 2], [t, h, w])
    axis = np.zeros(n, int)
    axis[1 : 3 * h : 3], axis[2 : 3 * w : 3] = 1, 2
    return axis


@pytest.mark.parametrize("name", sorted(HF_LONG))
def test_the_torch_module_matches_hugging_face_past_the_trained_length(hf, name):
    """dynamic NTK, linear, DeepSeek-V3 YaRN (mscale), Phi-3 LongRoPE (long factors) and Qwen3-VL's
    interleaved sections at 6000 positions (max_position_embeddings / original 4096): Hugging Face's values
    within its float32 angles' error, ours correctly rounded against mpmath."""
    transformers, importlib = hf
    config_class, module_path, rotary_class, fields = HF_LONG[name]
    if not hasattr(transformers, config_class):
        pytest.skip(f"this transformers has no {config_class}")
    module = importlib.import_module(f"transformers.models.{module_path}")
    config = getattr(transformers, config_class)(**{k: v for k, v in fields.items() if k != "model_type"})
    theirs = getattr(module, rotary_class)(config)
    ours = ptorch.RotaryEmbedding(config)
    params, seq = ours.params, 6000
    text = torch.arange(seq)[None].repeat(2, 1)
    ids = torch.stack([text, text // 2, text // 3]) if params.mrope_section else text
    x = torch.zeros(2, 8, 4)
    their_cos, their_sin = theirs(x, ids)
    our_cos, our_sin = ours(x, ids)
    assert our_cos.shape == their_cos.shape == (2, seq, params.rotary_dim)
    assert our_cos.dtype == their_cos.dtype == torch.float32
    scale = rope.attention_scaling(params, seq_len=seq)
    assert theirs.attention_scaling == pytest.approx(scale, rel=1e-12)
    # their float32 angles p·θ: an error up to ~ulp(p·θ) + p·|θ - θ_float32|, at most seq · 2**-23, times A
    tolerance = seq * 2.0**-23 * scale
    torch.testing.assert_close(our_cos, their_cos, atol=tolerance, rtol=0)
    torch.testing.assert_close(our_sin, their_sin, atol=tolerance, rtol=0)
    assert float((our_cos - their_cos).abs().max()) > 0  # float32 angles are not exact at 6000 positions
    # dynamic and longrope: Hugging Face's frequencies after this call are ours at seq_len = 6000
    exact = torch.from_numpy(rope.inv_freq(params, seq_len=seq)).to(torch.float32)
    torch.testing.assert_close(theirs.inv_freq, exact, rtol=1e-6, atol=0)  # their float32 formulas
    if params.rope_type == "dynamic":
        assert not torch.equal(exact, ours.inv_freq)  # scaled past max_position_embeddings
    axes = _section_axes(params) if params.mrope_section else np.zeros(params.rotary_dim // 2, int)
    with mpmath.workdps(60):
        thetas, mp_scale = mp_frequencies(params, seq), mp_scaling(params)
        for p in (0, 1, 2047, 4095, 4096, 4097, 5999):
            for i in range(0, params.rotary_dim // 2, 5):
                position = int(ids[axes[i], 0, p]) if params.mrope_section else p
                angle = mpmath.mpf(position) * thetas[i]
                want = (
                    nearest(mp_scale * mpmath.cos(angle), np.float32),
                    nearest(mp_scale * mpmath.sin(angle), np.float32),
                )
                assert (float(our_cos[0, p, i]), float(our_sin[0, p, i])) == want, (name, p, i)


def test_deepseek_v3_interleaved_weights_rotate_as_hugging_face_does(hf):
    """DeepSeek-V3 (``rope_interleave``): Hugging Face de-interleaves q, k and rotates them in the half
    layout; posenc's interleaved layout rotates the pairs in place, the same values in the other order."""
    transformers, importlib = hf
    module = importlib.import_module("transformers.models.deepseek_v3.modeling_deepseek_v3")
    config = transformers.DeepseekV3Config(
        **{k: v for k, v in CONFIGS["deepseek_v3"].items() if k != "model_type"}
    )
    ids = torch.arange(6000)[None]
    half = ptorch.RotaryEmbedding(config)(torch.zeros(1), ids)
    pairs = ptorch.RotaryEmbedding(config, layout="interleaved")(torch.zeros(1), ids)
    q = torch.randn(1, 2, 6000, 64, generator=torch.Generator().manual_seed(0))
    k = torch.randn_like(q)
    want = module.apply_rotary_pos_emb_interleave(q, k, *half)
    got = ptorch.apply_rotary(q, k, *pairs, layout="interleaved")
    for a, b in zip(got, want, strict=True):
        deinterleaved = a.unflatten(-1, (32, 2)).transpose(-1, -2).flatten(-2)
        torch.testing.assert_close(deinterleaved, b, atol=1e-6, rtol=1e-6)


def test_a_framework_array_is_refused_with_the_call_that_returns_its_arrays():
    """posenc.rope.cos_sin returns NumPy arrays, never silently for a tensor: a torch tensor (any device) or
    a JAX array (concrete or traced) is a TypeError naming the adapter's call, which returns that
    framework's arrays with the core's bits."""
    import posenc.torch.rotary

    params = rope.config(head_dim=8, base=100.0)
    ids = np.array([[0, 3, 200, 70000]])
    want = rope.cos_sin(ids, params, dtype="bfloat16", layout="interleaved")
    for positions in (
        torch.from_numpy(ids),
        torch.zeros(2, device="meta"),
        torch.nn.Parameter(torch.ones(2)),
    ):
        with pytest.raises(TypeError) as caught:
            rope.cos_sin(positions, params)
        assert str(caught.value).startswith(
            f"positions is a torch tensor (on {positions.device}) and posenc.rope.cos_sin returns NumPy "
        )
        assert "use posenc.torch.rotary.cos_sin(positions, params)" in str(caught.value)
    got = posenc.torch.rotary.cos_sin(torch.from_numpy(ids), params, dtype="bfloat16", layout="interleaved")
    for tensor, array in zip(got, want, strict=True):  # the named call: tensors, the same bits
        assert isinstance(tensor, torch.Tensor) and tensor.dtype == torch.bfloat16
        np.testing.assert_array_equal(tensor.float().numpy(), array.astype(np.float32))
    jax = pytest.importorskip("jax")
    import posenc.jax.rotary

    message = r"^positions is a JAX array .* use posenc\.jax\.rotary\.cos_sin\(positions, params\)"
    with pytest.raises(TypeError, match=message):
        rope.cos_sin(jax.numpy.asarray(ids), params)
    with pytest.raises(TypeError, match=message):
        jax.jit(lambda positions: rope.cos_sin(positions, params))(jax.numpy.asarray(ids))
    got = posenc.jax.rotary.cos_sin(jax.numpy.asarray(ids), params, dtype="bfloat16", layout="interleaved")
    for array, expected in zip(got, want, strict=True):
        assert isinstance(array, jax.Array)
        np.testing.assert_array_equal(np.asarray(array), expected)
