"""LongRoPE written without a config (posenc.torch.su_rope): diffusers' OmniGen rotary read from its
attributes, proven on short ids and ids past its original length (its long factors), audited as LongRoPE,
patched exact and given back; every value of posenc's against mpmath; other factors refused."""

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
