"""What a hostile pass over the Python API found: integer queries rotated into truncated integers, cos/sin
given beside the position ids they contradict, a sequence length of -5 taken for "none", tensors identify
could not read, messages in the core's words rather than the library's. Each is now a clear TypeError or
ValueError naming the parameter, or the right answer."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

import posenc
import posenc.jax as pj
import posenc.jax.rotary as jax_rotary
import posenc.torch as pt
import posenc.torch.sharding as torch_sharding
from posenc import presets, rope

PARAMS = rope.config(head_dim=8, base=10000.0)
DYNAMIC = {
    "head_dim": 8,
    "rope_theta": 10000.0,
    "max_position_embeddings": 4,
    "rope_scaling": {"rope_type": "dynamic", "factor": 2.0},
}


def _cos_sin(framework):
    cos, sin = rope.cos_sin(np.arange(3)[None], PARAMS)
    return {"numpy": np.asarray, "torch": torch.tensor, "jax": jnp.asarray}[framework](cos), {
        "numpy": np.asarray,
        "torch": torch.tensor,
        "jax": jnp.asarray,
    }[framework](sin)


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_apply_rotary_refuses_integer_queries_it_would_truncate(framework):
    apply = {"numpy": rope.apply_rotary, "torch": pt.apply_rotary, "jax": pj.apply_rotary}[framework]
    cos, sin = _cos_sin(framework)
    q = np.zeros((1, 2, 3, 8), np.int32)
    q[..., 0] = 1
    q = {"numpy": np.asarray, "torch": torch.tensor, "jax": jnp.asarray}[framework](q)
    with pytest.raises(TypeError, match="q must have a floating-point dtype"):
        apply(q, q.astype(np.float32) if framework != "torch" else q.float(), cos, sin)
    floats = q.astype(np.float32) if framework != "torch" else q.float()
    with pytest.raises(TypeError, match="cos must have a floating-point dtype"):
        apply(floats, floats, cos.astype(np.int32) if framework != "torch" else cos.long(), sin)
    rotated, _ = apply(floats, floats, cos, sin)
    assert float(rotated[0, 0, 1, 0]) == pytest.approx(np.cos(1.0), abs=1e-6)  # not truncated to 0


def test_torch_apply_rotary_refuses_arrays_of_another_framework_and_a_bool_axis():
    q = torch.ones(1, 2, 3, 8)
    cos, sin = _cos_sin("numpy")
    with pytest.raises(TypeError, match="cos must be a torch array"):
        pt.apply_rotary(q, q, cos, sin)
    cos, sin = _cos_sin("torch")
    with pytest.raises(TypeError, match="unsqueeze_dim must be an integer"):
        pt.apply_rotary(q, q, cos, sin, unsqueeze_dim=True)


def test_torch_apply_rotary_takes_the_angles_one_way_only():
    q = torch.randn(1, 2, 3, 8, generator=torch.Generator().manual_seed(0))
    ids = torch.arange(3)[None]
    cos, sin = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0})(q, ids)
    with pytest.raises(TypeError, match="one way"):
        pt.apply_rotary(q, q, torch.ones_like(cos), torch.zeros_like(sin), position_ids=ids, params=PARAMS)
    by_ids = pt.apply_rotary(q, q, position_ids=ids, params=PARAMS)
    by_angles = pt.apply_rotary(q, q, cos, sin)
    assert all(torch.equal(a, b) for a, b in zip(by_ids, by_angles, strict=True))


@pytest.mark.parametrize("seq_len", [-5, 0, 2.5, True])
def test_every_rotary_refuses_a_seq_len_that_is_not_a_length(seq_len):
    x, ids = torch.zeros(1, 3, 8), torch.arange(3)[None] + 10
    for config in (DYNAMIC, {"head_dim": 8, "rope_theta": 10000.0}):  # a type that takes no length too
        params = rope.config(config)
        calls = [
            lambda config=config: pt.RotaryEmbedding(config)(x, ids, seq_len=seq_len),
            lambda params=params: pt.rotary.cos_sin(ids, params, seq_len=seq_len),
            lambda params=params: rope.cos_sin(np.arange(3), params, seq_len=seq_len),
            lambda params=params: jax.jit(lambda p: jax_rotary.cos_sin(p, params, seq_len=seq_len))(
                jnp.arange(3)
            ),  # traced positions: the JAX path that does not go through rope.cos_sin
        ]
        for call in calls:
            with pytest.raises((TypeError, ValueError), match="seq_len must be an integer >= 1"):
                call()


def test_a_compiled_rotary_with_growing_seq_len_gives_the_eager_bits():
    module = pt.RotaryEmbedding(DYNAMIC)
    compiled = torch.compile(module, fullgraph=True, dynamic=True)
    x = torch.zeros(1, 3, 8)
    for length in (10, 20):
        ids = torch.arange(3)[None] + length - 3
        got, want = compiled(x, ids, seq_len=length), module(x, ids, seq_len=length)
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize(
    "make",
    [
        lambda t: torch.nn.Parameter(t.clone()),
        lambda t: t.bfloat16(),
    ],
    ids=["parameter", "bfloat16"],
)
def test_identify_and_convert_layout_read_any_dense_tensor(make):
    table = make(pt.table(64, 16))
    assert posenc.identify(table)[0].name.split(" = ")[0] == "paper"
    converted = posenc.convert_layout(table, "interleaved", "sin_cos")
    assert isinstance(converted, np.ndarray)
    assert np.array_equal(
        converted, posenc.convert_layout(table.detach().float().numpy(), "interleaved", "sin_cos")
    )


def test_identify_of_a_meta_tensor_says_it_holds_no_values():
    with pytest.raises(ValueError, match="meta tensor, which holds no values"):
        posenc.identify(pt.table(64, 16).to("meta"))


@pytest.mark.parametrize(
    "name, options, words",
    [
        ("tensor2tensor", {"min_timescale": 0}, "min_timescale must be > 0"),
        ("tensor2tensor", {"max_timescale": 0}, "max_timescale / min_timescale must be > 1"),
        ("whisper", {"max_timescale": 0}, "max_timescale must be > 1"),
        ("keras-hub", {"max_wavelength": -5}, "max_wavelength must be > 1"),
        ("diffusers-timestep", {"max_period": 1}, "max_period must be > 1"),
        ("diffusers-timestep", {"downscale_freq_shift": True}, "downscale_freq_shift must be a real number"),
    ],
)
def test_a_presets_errors_name_its_librarys_parameters(name, options, words):
    with pytest.raises((TypeError, ValueError), match=words) as raised:
        presets.get(name, **options)
    assert f"preset {name!r}" in str(raised.value)
    assert raised.value.parameter in words


def test_timesteps_words_its_errors_as_diffusers_does():
    with pytest.raises(ValueError, match="max_period must be > 1"):
        pt.Timesteps(4, True, 0, max_period=1)


def test_token_and_position_embedding_checks_its_arguments_and_ids():
    with pytest.raises(TypeError, match="d_model must be an integer"):
        pt.TokenAndPositionEmbedding(10, 4.0)
    with pytest.raises(TypeError, match="positions_from_padding must be True or False"):
        pt.TokenAndPositionEmbedding(10, 4, positions_from_padding=1, padding_idx=0)
    module = pt.TokenAndPositionEmbedding(10, 4)
    for ids, error, words in [
        (torch.tensor([[1.0, 2.0]]), TypeError, "integer token ids"),
        (torch.tensor([[True, False]]), TypeError, "integer token ids"),
        ([[1, 2]], TypeError, "integer token ids; got list"),
        (torch.tensor([[1, 20]]), ValueError, r"token ids in \[0, 10\).*got 20"),
        (torch.tensor([[-1, 2]]), ValueError, "got -1"),
    ]:
        with pytest.raises(error, match=words):
            module(ids)
    assert module(torch.tensor([[0, 9]])).shape == (1, 2, 4)


def test_torch_devices_and_lengths_are_checked_where_they_are_given():
    with pytest.raises(ValueError, match="device='bogus' is not a device"):
        pt.table(4, 4, device="bogus")
    with pytest.raises(ValueError, match="max_len must be <= 2\\*\\*31"):
        pt.SinusoidalPositionalEncoding(4, max_len=2**40)
    rotary = pt.RotaryEmbedding({"head_dim": 8, "rope_theta": 1e4})
    with pytest.raises(ValueError, match="position_ids are on meta"):
        rotary(torch.zeros(1, 3, 8), torch.arange(3, device="meta")[None])


def test_available_memory_counts_an_address_space_limit(monkeypatch):
    import resource

    from posenc import validation

    monkeypatch.setattr(resource, "getrlimit", lambda which: (1 << 40, resource.RLIM_INFINITY))
    assert validation._address_space_headroom() is not None
    assert validation._address_space_headroom() < 1 << 40
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY,) * 2)
    assert validation._address_space_headroom() is None


# --- the second pass: grids, analysis, sharding, JAX, patching ---------------------------------------------


def test_cosine_similarity_of_rows_whose_squares_over_or_underflow():
    from posenc.analysis import cosine_similarity

    assert np.allclose(cosine_similarity(np.full((2, 2), 1e200)), 1.0, rtol=0, atol=1e-15)
    tiny = cosine_similarity(np.array([[1e-200, 2e-200], [2e-200, 4e-200]]))
    assert np.allclose(tiny, 1.0, rtol=0, atol=1e-15)
    with pytest.raises(ValueError, match="row 1 is all zeros"):
        cosine_similarity(np.array([[1.0, 2.0], [0.0, 0.0]]))


def test_grid_yes_no_options_take_true_or_false_only():
    from posenc import grids

    for call in (
        lambda: grids.mae_2d(8, 2, cls_token="no"),
        lambda: grids.diffusers_2d(8, (2, 3), cls_token="no"),
        lambda: grids.timm_2d((2, 3), 8, cls_token=2),
        lambda: grids.timm_2d((2, 3), 8, reverse_coord="no"),
        lambda: grids.dinov3_rope((1, 2), 8, rotate_half="no"),
        lambda: grids.timm_rope((1, 2), 8, rotate_half=1),
    ):
        with pytest.raises(TypeError, match="must be True or False"):
            call()
    assert grids.mae_2d(8, 2, cls_token=np.bool_(True)).shape == (5, 8)


def test_grid_scales_and_offsets_out_of_range_are_refused():
    from posenc import grids

    mask = np.ones((1, 2, 3))
    for options, name in (({"scale": 0.0}, "scale"), ({"eps": -1.0}, "eps"), ({"scale": 1e300}, "scale")):
        with pytest.raises(ValueError, match=f"{name} must be > 0"):
            grids.detr_2d(mask, 4, normalize=True, **options)
    with pytest.raises(ValueError, match="grid_offset must lie in"):
        grids.timm_rope_coordinates((2, 2), grid_offset=1e39)


def test_jitted_jax_encode_does_not_depend_on_numpys_error_state():
    positions = jnp.asarray([1.0, 2.0], dtype=jnp.float16)
    want = np.asarray(pj.encode(positions, 4))
    with np.errstate(all="raise"):
        assert np.array_equal(np.asarray(jax.jit(lambda p: pj.encode(p, 4))(positions)), want)
    assert pj.encode(positions, 4, dtype=None).dtype == jnp.float32  # None: float32, as posenc.encode


def test_patch_unpatch_and_find_refuse_what_is_not_a_model():
    from posenc.torch.patching import find

    for call in (pt.patch, pt.unpatch, find):
        for bad in (None, torch.zeros(3), torch.nn.Linear):
            with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
                call(bad)


def test_sharding_counts_the_arrays_its_work_holds(monkeypatch):
    from posenc import sharding, validation

    monkeypatch.setattr(validation, "available_memory", lambda: 2 * 8 * 2**24)  # two outputs, not three
    with pytest.raises(ValueError, match="3 arrays of its size at work"):
        sharding.permutation(2**24, world_size=2**22, scheme="zigzag")
    with pytest.raises(ValueError, match="device='nope'"):
        torch_sharding.shard_positions(8, world_size=2, rank=0, device="nope")


def test_small_misuse_of_the_rope_parameters_reports_and_check():
    from posenc.analysis import check

    for count in (True, 3.0, "3"):
        with pytest.raises(TypeError, match="count must be an integer"):
            PARAMS.with_frequencies(count)
    with pytest.raises(TypeError, match="progress must be a function"):
        check(16, 8, progress=5)
    report = pt.patch(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError, match="width must be an integer"):
        report.as_text("80")


def test_a_dynamic_rope_of_negative_positions_has_the_models_own_frequencies():
    params = rope.config(DYNAMIC)
    cos, sin = rope.cos_sin([-20], params)
    want = rope.cos_sin([-20], params, seq_len=1)
    assert np.array_equal(cos, want[0]) and np.array_equal(sin, want[1])


def test_grid_and_shift_errors_name_what_the_caller_passed():
    from posenc import grids
    from posenc.analysis import shift_error

    for call, words in (
        (lambda: grids.timm_2d((2, 3), 8, temperature=1), "temperature must be > 1"),
        (lambda: grids.timm_rope((2, 3), 8, temperature=0.5), "temperature must be > 1"),
        (lambda: grids.dinov3_rope((2, 2), 8, temperature=0.5), "temperature must be > 1"),
        (lambda: grids.detr_2d([[[1]]], 4, temperature=1), "temperature must be > 1"),
        (lambda: grids.dinov3_rope((2, 2), 8, min_period=1e-300, max_period=1e300), "must be finite"),
        (lambda: shift_error(2**31 - 1, 8, 8), "k=2147483647 shifts positions"),
    ):
        with pytest.raises(ValueError, match=words):
            call()
