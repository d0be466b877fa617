"""posenc.jax's rotary embeddings: the core's bits for concrete and traced positions, jitted programs that
call the C core (a CPU-only JAX) or hold the portable algorithm with no callback and no float64 (x64 off
and on), the Flax module, and apply_rotary as in posenc.torch."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import posenc.jax as pjax
import posenc.rope as rope
from posenc.jax import rotary
from tests.rope.test_rope_parameters import CONFIGS, longrope_config

NAMES = ["llama31_8b", "qwen2_yarn", "deepseek_v3", "gpt_neox", "qwen2_vl", "phi3_mini_128k"]


@pytest.mark.parametrize("path", ["core", "portable"])
@pytest.mark.parametrize(("name", "x64"), [(name, False) for name in NAMES] + [("qwen2_yarn", True)])
def test_traced_positions_give_the_cores_bits_by_either_path(name, x64, path):
    """The C core through one callback (a CPU-only JAX), or inside self_contained() the portable algorithm
    with no callback and, with x64 off, no float64."""
    params = rope.config(CONFIGS[name])
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 2**31, (2, 200)).astype(np.int32)
    if params.mrope_section:
        ids = np.stack([ids, ids // 2, ids // 3])
    seq_len = 5000
    want = rope.cos_sin(ids, params, dtype="bfloat16", seq_len=seq_len)

    def run(positions):
        return rotary.cos_sin(positions, params, dtype="bfloat16", seq_len=seq_len)

    with jax.enable_x64(x64), pjax.self_contained() if path == "portable" else contextlib.nullcontext():
        text = jax.jit(run).lower(jnp.asarray(ids)).as_text()
        got = jax.jit(run)(jnp.asarray(ids))
    assert ("callback" in text) == (path == "core")
    if not x64 and path == "portable":
        assert "f64" not in text
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a).view(np.uint16), b.view(np.uint16))


def test_under_jit_dynamic_needs_seq_len_and_longrope_picks_in_the_program():
    """dynamic's base grows with the length, which traced positions cannot tell: seq_len is required;
    longrope switches between two sets at a fixed length: both computed, one picked in the program, the
    bits of the NumPy core at the length max(positions) + 1 (short below the switch, long past it)."""
    dynamic = rope.config(CONFIGS["dynamic"])
    with pytest.raises(ValueError, match="seq_len"):
        jax.jit(lambda p: rotary.cos_sin(p, dynamic))(jnp.arange(4))
    params = rope.config(CONFIGS["phi3_mini_128k"])
    run = jax.jit(lambda p: rotary.cos_sin(p, params))
    for top in (100, 4095, 4096, 9000):  # max + 1 <= 4096: short factors; > 4096: long
        ids = np.array([[0, 3, top]], dtype=np.int32)
        want = rope.cos_sin(ids, params, seq_len=top + 1)
        assert params.kind.seq_key(params, top + 1) == (None if top < 4096 else 1)
        for a, b in zip(run(jnp.asarray(ids)), want, strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)


@pytest.mark.parametrize(
    ("dtype", "top", "switch"),
    [
        (np.int16, 32767, 4096),
        (np.uint8, 255, 16),
        (np.int32, 2**31 - 1, 16),
        (np.float16, 4096, 4096),
        (np.int32, 2**24 + 3, 2**24 + 4),  # float32 rounds 2**24 + 3 up to the switch
    ],
)
def test_under_jit_longrope_picks_by_the_exact_max_plus_one_whatever_the_positions_type(dtype, top, switch):
    """max(positions) + 1 > switch was formed in the positions' type under jit: 32767 + 1 wrapped in int16,
    4096 + 1 rounded to 4096 in float16 (the short factors past the switch, silently). Now max >= switch
    in at least int32, or the widest float: the concrete call's set, the same bits."""
    params = rope.config(longrope_config(switch))
    positions = np.array([0, top], dtype=dtype)
    want = rotary.cos_sin(positions, params)
    got = jax.jit(lambda p: rotary.cos_sin(p, params))(jnp.asarray(positions))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(want[0]), rope.cos_sin(positions, params, seq_len=top + 1)[0])


def test_the_flax_module_and_apply_rotary():
    params = rope.config(CONFIGS["qwen2_vl"])
    module = pjax.RotaryEmbedding(params)
    x = jnp.zeros((1, 5, 8), jnp.float32)
    ids = jnp.arange(5)[None]
    cos, sin = module(x, ids)  # text: one id on every axis
    want_cos, want_sin = rope.cos_sin(np.stack([np.arange(5)[None]] * 3), params)
    np.testing.assert_array_equal(np.asarray(cos), want_cos)
    np.testing.assert_array_equal(np.asarray(sin), want_sin)
    assert module.attention_scaling == 1.0 and module.inv_freq.shape == (params.rotary_dim // 2,)
    jitted = jax.jit(lambda x, p: module(x, p))(x, ids)
    np.testing.assert_array_equal(np.asarray(jitted[0]), want_cos)
    q = jax.random.normal(jax.random.key(0), (1, 2, 5, params.rotary_dim))
    rotated, _ = pjax.apply_rotary(q, q, cos, sin)
    torch = pytest.importorskip("torch")
    import posenc.torch as ptorch

    expected, _ = ptorch.apply_rotary(*(torch.from_numpy(np.asarray(a)) for a in (q, q, cos, sin)))
    np.testing.assert_allclose(np.asarray(rotated), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_the_flax_module_lays_out_as_the_models_rotary_by_default():
    """A GPT-J or Cohere config: interleaved pairs, as posenc.torch.RotaryEmbedding gives them by default (the
    Flax module gave halves); layout= still chooses."""
    config = {"model_type": "cohere", "hidden_size": 32, "num_attention_heads": 4, "rope_theta": 100.0}
    ids, params = np.arange(3)[None], rope.config(config)
    module = pjax.RotaryEmbedding(config)
    assert module.layout == rope.config_layout(config) == "interleaved"
    cos, sin = module(jnp.zeros(1, jnp.float32), ids)
    want = rope.cos_sin(ids, params, layout="interleaved")
    np.testing.assert_array_equal(np.asarray(cos), want[0])
    np.testing.assert_array_equal(np.asarray(sin), want[1])
    halves = pjax.RotaryEmbedding(config, layout="half")
    assert halves.layout == "half"
    np.testing.assert_array_equal(np.asarray(halves(jnp.zeros(1), ids)[0]), rope.cos_sin(ids, params)[0])
    assert pjax.RotaryEmbedding(params).layout == "half"


def test_the_flax_module_takes_a_layer_type_and_seq_len():
    from tests.rope.test_rope_torch import GEMMA3

    ids, x = jnp.arange(6)[None] + 5000, jnp.zeros((1, 6, 8), jnp.float32)
    for layer in rope.layer_types(GEMMA3):
        module = pjax.RotaryEmbedding(GEMMA3, layer_type=layer)
        assert module.params == rope.config(GEMMA3, layer_type=layer)
        np.testing.assert_array_equal(
            np.asarray(module(x, ids)[0]), rope.cos_sin(np.asarray(ids), module.params)[0]
        )
    with pytest.raises(ValueError, match="layer_type="):
        pjax.RotaryEmbedding(GEMMA3)
    phi = pjax.RotaryEmbedding(CONFIGS["phi3_mini_128k"])
    jitted = jax.jit(lambda x, p: phi(x, p, seq_len=4096))(x, ids)  # short factors, chosen in the program
    want = rope.cos_sin(np.asarray(ids), phi.params, seq_len=4096)[0]
    np.testing.assert_array_equal(np.asarray(jitted[0]), want)
