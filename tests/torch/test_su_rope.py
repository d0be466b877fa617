"""Rotaries written without a config (posenc.torch.su_rope): diffusers' OmniGen rotary (LongRoPE) read from
its attributes, proven on short ids and ids past its original length (its long factors), audited as
LongRoPE, patched exact and given back; every value of posenc's against mpmath; other factors refused. And a
plain rotary holding only its inv_freq (Anima's), read from it."""

from __future__ import annotations

import mpmath
import numpy as np
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
