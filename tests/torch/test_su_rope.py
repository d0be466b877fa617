"""Rotaries written without a config (posenc.torch.su_rope): diffusers' OmniGen rotary (LongRoPE) read from
its attributes, proven on short ids and ids past its original length (its long factors), audited as
LongRoPE, patched exact and given back; every value of posenc's against mpmath; other factors refused. And a
plain rotary holding only its inv_freq (Anima's), read from it."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch
from diffusers.models.transformers.transformer_omnigen import OmniGenSuScaledRotaryEmbedding

import posenc
import posenc.torch as pt
from posenc.torch import su_rope
from tests.support import reference

RNG = np.random.default_rng(0)
SHORT, LONG = [float(f) for f in 1 + RNG.random(8)], [float(f) for f in 1 + 10 * RNG.random(8)]


def _module() -> OmniGenSuScaledRotaryEmbedding:
    return OmniGenSuScaledRotaryEmbedding(16, 8192, 256, 10000, {"short_factor": SHORT, "long_factor": LONG})


def test_values_against_mpmath():
    exact = su_rope.SuScaledRope(16, 10000.0, SHORT, LONG, 256, 8192)
    for ids, factors in ((torch.arange(200), SHORT), (torch.arange(300), LONG)):
        cos, sin = exact(None, ids[None])
        assert cos.shape == (len(ids), 16) and cos.dtype == torch.float32
        with mpmath.workdps(40):
            scale = mpmath.sqrt(1 + mpmath.log(mpmath.mpf(8192) / 256) / mpmath.log(256))
            for p in (1, 199):
                for i in range(8):
                    angle = p / (mpmath.mpf(factors[i]) * mpmath.power(10000, mpmath.mpf(2 * i) / 16))
                    want = [reference.round_to(scale * g(angle), "float32") for g in (mpmath.cos, mpmath.sin)]
                    assert [float(cos[p, i]), float(sin[p, i + 8])] == want


def test_read_proven_audited_patched():
    module = _module()
    exact = su_rope.read_su_rope(module)
    assert exact is not None and exact.params.rope_type == "longrope"
    difference, allowed = su_rope.prove_su_rope(module, exact)
    assert 0 < difference <= allowed
    wrong = su_rope.SuScaledRope(16, 10000.0, SHORT, [f * 1.01 for f in LONG], 256, 8192)
    assert su_rope.prove_su_rope(module, wrong).startswith("not the rotary its attributes name")
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and before.components[0].report.findings[0].kind == "angles"
    ids = torch.arange(400)[None]
    want = module(torch.zeros(1), ids)
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "rotary" and replaced.variant == "rope-longrope"
    got = model[0](torch.zeros(1), ids)
    assert all(
        g.shape == w.shape and float((g - w).abs().max()) < 1e-3 for g, w in zip(got, want, strict=True)
    )
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module


def test_a_plain_rotary_of_its_inv_freq_read_proven_audited_patched():
    """diffusers' Anima text conditioner's rotary: HF's forward, an inv_freq and nothing else (no config,
    no dim or base): its base read from the inv_freq, proven, audited, made exact and given back; another
    base refused; values against mpmath."""
    from diffusers.models.condition_embedders.condition_embedder_anima import AnimaRotaryEmbedding

    module = AnimaRotaryEmbedding(32, 10000.0)
    exact = su_rope.read_plain_rope(module)
    assert (exact.params.head_dim, exact.params.base) == (32, 10000.0)
    difference, allowed = su_rope.prove_plain_rope(module, exact)
    assert 0 < difference <= allowed
    other = AnimaRotaryEmbedding(32, 10010.0)
    assert su_rope.read_plain_rope(other).params.base == 10010.0
    assert su_rope.prove_plain_rope(other, exact).startswith("not the rotary its inv_freq names")
    cos, sin = exact(torch.zeros(1), torch.tensor([[3, 1000]]))
    for column, p in ((0, 3), (5, 1000), (16 + 5, 1000)):
        with mpmath.workdps(40):
            angle = p * mpmath.power(10000, -mpmath.mpf(2 * (column % 16)) / 32)
            want = [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]
        assert [float(cos[0, int(p == 1000), column]), float(sin[0, int(p == 1000), column])] == want
    model = torch.nn.Sequential(module)
    assert not posenc.audit(model, samples=32).passed
    hidden, ids = torch.zeros(2, 5, 8), torch.arange(5)[None].expand(2, -1)
    want = module(hidden, ids)
    assert [c.variant for c in pt.patch(model).replaced] == ["rope-default"]
    got = model[0](hidden, ids)
    assert all(float((g - w).abs().max()) < 1e-6 for g, w in zip(got, want, strict=True))
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module


def test_a_base_its_inv_freq_cannot_name_is_declined_with_why_and_a_large_whole_one_is_read():
    """A float32 inv_freq fixes its base only to ~1e-6: 300.7 was read as 300.69995 and the rotary replaced
    ("made exact") by values further from 300.7's than the original's own; a base that is no whole number
    is declined, saying why. 10⁶ in a buffer of 64 (a least-squares fit, not one value) is read."""
    from diffusers.models.condition_embedders.condition_embedder_anima import AnimaRotaryEmbedding

    for head_dim, base in ((16, 300.7), (64, 75.25)):
        module = AnimaRotaryEmbedding(head_dim, base)
        assert su_rope.read_plain_rope(module) is None
        report = pt.patch(torch.nn.Sequential(module))
        assert not report.replaced
        assert (
            "a base of about" in report.components[0].reason and "cannot name" in report.components[0].reason
        )
    short = pt.patch(torch.nn.Sequential(AnimaRotaryEmbedding(8, 1e6))).components[0]  # 999999 fits too
    assert not short.replaced and "fits several whole-number bases near 1000000" in short.reason
    large = AnimaRotaryEmbedding(128, 1e6)
    assert su_rope.read_plain_rope(large).params.base == 1e6
    assert [c.variant for c in pt.patch(torch.nn.Sequential(large)).replaced] == ["rope-default"]


def test_interleaved_sections_of_an_inv_freq_read_proven_audited_patched():
    """Ideogram 4's and Cosmos3-Omni's multimodal rotaries (Qwen3-VL's interleaved sections of one
    inv_freq, no config of their own): read (time takes every frequency height and width do not, whatever
    its own section says), proven on each axis, values against mpmath; chunked sections refused; a base
    5·10⁶ that several whole numbers fit read from the model's config; patched exact, audited, given back."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3VLTextRotaryEmbedding
    from diffusers.models.transformers.transformer_ideogram4 import Ideogram4MRoPE

    module = Ideogram4MRoPE(16, 10000, (2, 1, 1))
    exact = su_rope.read_sections_rope(module)
    assert exact.params.mrope_section == (6, 1, 1) and exact.params.base == 10000.0 and exact.ids == "last"
    difference, allowed = su_rope.prove_sections_rope(module, exact)
    assert 0 < difference <= allowed
    axes = [0, 1, 2, 0, 0, 0, 0, 0]  # frequency 1 is height's, 2 width's (every third of their sections)
    ids = torch.tensor([[[3, 70000, 1000]]])
    cos, sin = exact(ids)
    assert cos.shape == (1, 1, 16) and cos.dtype == torch.float32
    for i, axis in enumerate(axes):
        with mpmath.workdps(40):
            angle = int(ids[0, 0, axis]) * mpmath.power(10000, -mpmath.mpf(2 * i) / 16)
            want = [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]
        assert [float(cos[0, 0, i]), float(sin[0, 0, i + 8])] == want

    class Chunked(Ideogram4MRoPE):  # Qwen2-VL's sections in blocks, not interleaved
        def forward(self, position_ids):
            cos, sin = super().forward(position_ids)
            at = torch.tensor([0, 3, 4, 1, 2, 5, 6, 7] * 2)  # height's and width's frequencies moved
            return cos[..., at], sin[..., at]

    assert su_rope.prove_sections_rope(Chunked(16, 10000, (2, 1, 1)), exact).startswith("not the rotary")

    cosmos = Cosmos3VLTextRotaryEmbedding(128, 5e6, (24, 20, 20))
    assert su_rope.read_sections_rope(cosmos) is None  # 5·10⁶ ± 1 fit its 64 values too

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.config = {"rope_theta": 5e6}  # a diffusers config (a dict): the base the rotary was built of
            self.rotary_emb = cosmos

    model = Model()
    read = su_rope.read_sections_rope(cosmos, pt.computed.config_base(model))
    assert (read.params.base, read.params.mrope_section, read.ids) == (5e6, (24, 20, 20), "first")
    assert not posenc.audit(model, samples=32).passed
    ids = torch.stack([torch.arange(40), torch.arange(40) // 4, torch.arange(40) % 7])[:, None]
    want = cosmos(ids, torch.device("cpu"), torch.bfloat16)
    assert [c.variant for c in pt.patch(model).replaced] == ["rope-default"]
    got = model.rotary_emb(ids, torch.device("cpu"), torch.bfloat16)
    assert all(g.dtype == torch.bfloat16 and g.shape == w.shape for g, w in zip(got, want, strict=True))
    assert all(float((g.float() - w.float()).abs().max()) <= 2**-8 for g, w in zip(got, want, strict=True))
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model.rotary_emb is cosmos


def test_dtype_errors_name_the_callers_argument():
    """PlainRope's integer hidden_states and SectionsRope's dtype=torch.int64 are named as the caller passed
    them (not RotaryEmbedding's x)."""
    with pytest.raises(TypeError, match=r"^hidden_states must be a tensor of dtype"):
        su_rope.PlainRope(4, 100.0)(torch.zeros(1, dtype=torch.long), torch.arange(2)[None])
    with pytest.raises(ValueError, match=r"^dtype must be one of torch\.float64.*got torch\.int64"):
        su_rope.SectionsRope(6, 1e6, (1, 1, 1), "first")(torch.tensor([[1, 2]]), dtype=torch.int64)


def test_constructors_refuse_what_they_would_truncate():
    """PlainRope(4.5, ...) and SectionsRope(6.9, ..., (1.7, 1.2, 1.9)) are refused naming the argument
    (int() truncated them to 4 and 6, (1, 1, 1))."""
    with pytest.raises(TypeError, match=r"^dim must be an integer >= 2; got 4\.5"):
        su_rope.PlainRope(4.5, 100.0)
    with pytest.raises(TypeError, match=r"^dim must be an integer >= 2; got 6\.9"):
        su_rope.SectionsRope(6.9, 1e6, (1, 1, 1), "last")
    with pytest.raises(TypeError, match=r"^sections\[0\] must be an integer >= 0; got 1\.7"):
        su_rope.SectionsRope(6, 1e6, (1.7, 1.2, 1.9), "last")
    assert su_rope.SectionsRope(6, 1e6, (1, 1, 1), "last").params.mrope_section == (1, 1, 1)
