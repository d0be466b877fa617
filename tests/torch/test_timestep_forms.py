"""Timestep embeddings computed in forward with a time scale (posenc.torch.computed.TIMESTEP_SIGNATURES):
Qwen-Image 2.1's ``(timestep)`` with its ``time_factor``, LongCat-AudioDiT's ``(timesteps, scale=1000)``
and Qwen2.5-Omni's token-to-wave ``(hidden_states, scale=1000)`` identified at t = p / scale, judged at
t = 0 .. 999 against the variant times the scale, patched exact (each value against mpmath, a scale given
in the call honoured) and given back."""

from __future__ import annotations

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_longcat_audio_dit import AudioDiTSinusPositionEmbedding
from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21TemporalTimesteps
from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import SinusPositionEmbedding

import posenc
import posenc.torch as pt
from posenc.torch import computed
from tests.support import reference


def _exact(t: float, width: int, shift: int, cos_first: bool, scale: float) -> list[float]:
    """[sin | cos] (or [cos | sin]) of t · scale · 10000^(−i/(half − shift)), float32, by mpmath."""
    half = width // 2
    with mpmath.workdps(40):
        angles = [
            mpmath.mpf(t) * scale * mpmath.power(10000, -mpmath.mpf(i) / (half - shift)) for i in range(half)
        ]
        sin = [reference.round_to(mpmath.sin(a), "float32") for a in angles]
        cos = [reference.round_to(mpmath.cos(a), "float32") for a in angles]
    return (cos + sin if cos_first else sin + cos) + [0.0] * (width % 2)


@pytest.mark.parametrize(
    ("build", "shift", "cos_first"),
    [
        (lambda: QwenImage21TemporalTimesteps(64), 0, True),
        (lambda: QwenImage21TemporalTimesteps(33, time_factor=500.0), 0, True),
        (lambda: AudioDiTSinusPositionEmbedding(64), 1, False),
        (lambda: SinusPositionEmbedding(64), 1, False),
    ],
)
def test_scaled_timesteps_audited_patched_exact(build, shift, cos_first):
    module = build()
    scale = computed.time_scale(module)
    assert computed.sinusoid_convention(module) == "timesteps" and scale in (500.0, 1000.0)
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and before.components[0].report.findings[0].kind == "angles"
    t = torch.tensor([0.0, 0.25, 0.7310586, 1.0])
    want = module(t)
    report = pt.patch(model)
    assert len(report.replaced) == 1 and f"t · {scale:g}" in report.replaced[0].reason
    got = model[0](t)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert float((got - want).abs().max()) < 1e-4
    for row, value in zip(got, t.tolist(), strict=True):
        assert row.tolist() == _exact(value, got.shape[1], shift, cos_first, scale)
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module and torch.equal(module(t), want)


def test_a_scale_given_in_the_call_is_honoured():
    module = AudioDiTSinusPositionEmbedding(16)
    model = torch.nn.Sequential(module)
    pt.patch(model)
    t = torch.tensor([0.5, 3.0])
    got, want = model[0](t, scale=7.0), module(t, scale=7.0)
    assert float((got - want).abs().max()) < 1e-5
    assert [row.tolist() for row in got] == [_exact(v, 16, 1, False, 7.0) for v in t.tolist()]
