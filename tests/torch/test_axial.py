"""Hugging Face's "axial" rotary of a vision tower's grid (posenc.torch.axial): read from five layouts
transformers ships (blocks H|W, Pixtral's frequencies split between the axes, Gemma 4's batched ids and
H-H-W-W, MiniMax's three axes, Kimi's transposed and flipped pairs), each value of posenc's equivalent
against mpmath, the proof against the module's own, what is not read (a layout that is no gather, other
frequencies, values that are not its frequencies'), and a model audited, patched and given back."""

from __future__ import annotations

import copy
import importlib
import io

import mpmath
import numpy as np
import pytest
import torch
import transformers as T

import posenc
import posenc.torch as pt
from posenc.torch import axial
from tests.support import reference

#: module -> (its config class, its rotary class; axes, batched ids, cast to x's dtype, own order)
CLASSES = {
    "qwen2_vl": ("Qwen2VLVisionConfig", "Qwen2VLVisionRotaryEmbedding", 2, False, False, False),
    "pixtral": ("PixtralVisionConfig", "PixtralVisionRotaryEmbedding", 2, False, True, True),
    "gemma4": ("Gemma4VisionConfig", "Gemma4VisionRotaryEmbedding", 2, True, True, False),
    "minimax_m3_vl": ("MiniMaxM3VLVisionConfig", "MiniMaxM3VLVisionRotaryEmbedding", 3, False, True, False),
    "kimi_k25": ("Kimi_K25VisionConfig", "Kimi_K25VisionRotaryEmbedding", 2, False, False, False),
}


def _module(name: str) -> torch.nn.Module:
    config_name, class_name = CLASSES[name][:2]
    modeling = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    configuration = importlib.import_module(f"transformers.models.{name}.configuration_{name}")
    return getattr(modeling, class_name)(getattr(configuration, config_name)())


def _ids(reading: axial.Axial) -> torch.Tensor:
    rows = torch.tensor([[0, 0, 0], [1, 3, 2], [7, 0, 5], [37, 1000, 11], [1023, 511, 4096]])[
        :, : reading.axes
    ]
    return rows[None] if reading.batched else rows


@pytest.mark.parametrize("name", CLASSES)
def test_each_layout_is_read_and_every_value_is_correctly_rounded(name: str) -> None:
    module = _module(name)
    reading = axial.read_axial(module)
    assert isinstance(reading, axial.Axial), reading
    axes, batched, to_input, permuted = CLASSES[name][2:]
    assert (reading.axes, reading.batched, reading.to_input) == (axes, batched, to_input)
    assert (reading.order != tuple(range(len(reading.order)))) == permuted
    count = len(reading.order)
    theta = module.config.rope_parameters["rope_theta"]
    ids = _ids(reading)
    cos, sin = axial.AxialRope(reading, module)(torch.zeros(1), ids)
    mine = module(torch.zeros(1), ids)
    assert cos.shape == mine[0].shape and sin.shape == mine[1].shape and cos.dtype == torch.float32
    # where each value comes from, by the module's own layout: (row, axis, stored slot)
    index = axial.gather(module, reading.batched, reading.axes, len(ids.reshape(-1, axes)), count)
    flat_ids = ids.reshape(-1)
    for part, name_ in ((cos, "cos"), (sin, "sin")):
        got = part.reshape(-1).tolist()
        for value, source in zip(got, index.reshape(-1).tolist(), strict=True):
            position = int(flat_ids[source // count])
            i = reading.order[source % count]
            angle = mpmath.mpf(position) * mpmath.power(mpmath.mpf(theta), -mpmath.mpf(i) / count)
            exact = mpmath.cos(angle) if name_ == "cos" else mpmath.sin(angle)
            assert value == reference.round_to(exact, "float32"), (name_, position, i)
    # the module's own values are within float32 code's error of them: proven
    difference, allowed = axial.prove_axial(module, reading)
    assert 0 < difference <= allowed < 2.0**-10


def test_the_cast_to_the_input_dtype_follows_the_original() -> None:
    module = _module("pixtral")
    exact = axial.AxialRope(axial.read_axial(module), module)
    ids = torch.tensor([[3, 5]])
    cos, _ = exact(torch.zeros(1, dtype=torch.bfloat16), ids)
    assert cos.dtype == torch.bfloat16 == module(torch.zeros(1, dtype=torch.bfloat16), ids)[0].dtype
    # rounded from float32's correctly rounded value (as the original casts its own)
    assert torch.equal(cos, exact(torch.zeros(1), ids)[0].to(torch.bfloat16))


def test_what_is_not_the_form_is_not_read() -> None:
    module = _module("qwen2_vl")
    assert axial.read_axial(torch.nn.Linear(2, 2)) is None
    # a layout that computes (not a pure gather)
    doubled = copy.deepcopy(module)
    doubled.recomposition_frequencies = lambda freq: 2 * type(module).recomposition_frequencies(module, freq)
    assert "no pure gather" in axial.read_axial(doubled)
    # frequencies of another theta
    other = copy.deepcopy(module)
    other.inv_freq = other.inv_freq**1.01
    assert "frequencies are not theta^(−2i/40)" in axial.read_axial(other)
    # a scaled amplitude, an unreadable theta
    scaled = copy.deepcopy(module)
    scaled.attention_scaling = 2.0
    assert "attention_scaling 2.0 is not 1" in axial.read_axial(scaled)
    # values that are not its frequencies' (an offset coordinate): read, and the proof says so
    shifted = copy.deepcopy(module)
    own = shifted.forward
    shifted.forward = lambda x, position_ids: own(x, position_ids + 1)
    reading = axial.read_axial(shifted)
    proof = axial.prove_axial(shifted, reading)
    assert isinstance(proof, str) and proof.startswith("its cos is not the axial rotary of theta 10000")


def _qwen2_vl() -> torch.nn.Module:
    torch.manual_seed(0)
    text = dict(vocab_size=101, hidden_size=128, intermediate_size=64, num_hidden_layers=1)
    text.update(num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=4096)
    vision = dict(depth=1, embed_dim=32, num_heads=2, hidden_size=128, spatial_merge_size=2)
    return T.Qwen2VLModel(T.Qwen2VLConfig(text_config=text, vision_config=vision)).eval()


def test_a_vision_tower_is_audited_patched_and_given_back() -> None:
    model = _qwen2_vl()
    reference_model = copy.deepcopy(model)
    before = posenc.audit(model)
    (vision,) = [c for c in before.components if c.path == "visual.rotary_pos_emb"]
    assert vision.report is not None and not vision.report.passed
    assert [f.kind for f in vision.report.findings] == ["angles"]
    assert "its first axis (4 frequencies) at coordinates 0 .. 2047" in vision.note
    report = pt.patch(model)
    (made,) = [c for c in report.replaced if c.path == "visual.rotary_pos_emb"]
    assert made.variant == "rope-axial" and "the model's forward: outputs as before" in made.reason
    replacement = model.visual.rotary_pos_emb
    assert isinstance(replacement, axial.AxialRope) and torch.equal(
        replacement.inv_freq, reference_model.visual.rotary_pos_emb.inv_freq
    )
    after = posenc.audit(model)
    (vision,) = [c for c in after.components if c.path == "visual.rotary_pos_emb"]
    assert vision.report.passed and vision.report.max_abs == 0
    # an image through the vision tower: within float32's error of the original's
    grid = torch.tensor([[1, 4, 6]])
    pixels = torch.randn(24, 3 * 2 * 14 * 14, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = reference_model.visual(pixels, grid_thw=grid).pooler_output
        got = model.visual(pixels, grid_thw=grid).pooler_output
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)
    # a deep copy and a pickle keep it; unpatch gives the original back
    buffer = io.BytesIO()
    torch.save(model, buffer)
    for twin in (copy.deepcopy(model), torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)):
        with torch.no_grad():
            assert torch.equal(twin.visual(pixels, grid_thw=grid).pooler_output, got)
    assert pt.unpatch(model) == len(report.replaced)
    assert type(model.visual.rotary_pos_emb) is type(reference_model.visual.rotary_pos_emb)
    with torch.no_grad():
        assert torch.equal(model.visual(pixels, grid_thw=grid).pooler_output, want)
    assert np.isfinite(got.numpy()).all()
