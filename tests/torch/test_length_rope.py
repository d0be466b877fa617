"""A rotary of a length computed in forward (posenc.torch.length_rope): diffusers' MiniMax Music 3 and
LongCat-AudioDiT read, proven, audited (the float32 cause), patched exact and given back; each value of
posenc's equivalent against mpmath; another layout of the same names refused."""

from __future__ import annotations

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_longcat_audio_dit import AudioDiTRotaryEmbedding
from diffusers.models.transformers.transformer_minimax_music3 import MiniMaxMusic3RotaryEmbedding

import posenc
import posenc.torch as pt
from posenc.torch import length_rope
from tests.support import reference


def test_values_against_mpmath():
    cos, sin = length_rope.LengthRope(8, 500.0, "length")(40, "cpu")
    assert cos.shape == sin.shape == (40, 8) and cos.dtype == torch.float32
    for p in range(40):
        for i in range(4):
            with mpmath.workdps(40):
                angle = p * mpmath.power(500, -mpmath.mpf(2 * i) / 8)
                want = (
                    reference.round_to(mpmath.cos(angle), "float32"),
                    reference.round_to(mpmath.sin(angle), "float32"),
                )
            for column in (i, i + 4):  # the halves layout: each frequency twice
                assert (float(cos[p, column]), float(sin[p, column])) == want


@pytest.mark.parametrize(
    "build",
    [
        lambda: MiniMaxMusic3RotaryEmbedding(64),
        lambda: MiniMaxMusic3RotaryEmbedding(32, theta=500000.0),
        lambda: AudioDiTRotaryEmbedding(64),
        lambda: AudioDiTRotaryEmbedding(32, max_position_embeddings=16),
    ],
)
def test_read_proven_audited_patched(build):
    module = build()
    exact = length_rope.read_length_rope(module)
    assert exact is not None
    difference, allowed = length_rope.prove_length_rope(module, exact)
    assert 0 < difference <= allowed
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and [f.kind for f in before.components[0].report.findings] == ["angles"]
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["rope-default"]
    assert posenc.audit(model, samples=32).passed
    if exact.form == "states":  # its values in the input's dtype, of the input's length or seq_len
        cos, _ = model[0](torch.zeros(1, 7, 2, dtype=torch.bfloat16))
        assert cos.shape == (7, exact.width) and cos.dtype == torch.bfloat16
        assert model[0](torch.zeros(1, 7, 2), seq_len=3)[0].shape == (3, exact.width)
    pt.unpatch(model)
    assert model[0] is module


def test_another_layout_is_refused():
    class Interleaved(MiniMaxMusic3RotaryEmbedding):
        def forward(self, seq_len, device):
            cos, sin = super().forward(seq_len, device)
            half = cos.shape[-1] // 2
            return cos[:, :half].repeat_interleave(2, -1), sin[:, :half].repeat_interleave(2, -1)

    module = Interleaved(16)
    assert length_rope.prove_length_rope(module, length_rope.read_length_rope(module)).startswith(
        "not the rotary its attributes name"
    )
    assert not pt.patch(torch.nn.Sequential(module)).replaced
