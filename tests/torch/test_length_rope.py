"""A rotary of a length computed in forward (posenc.torch.length_rope): diffusers' MiniMax Music 3 and
LongCat-AudioDiT, transformers' wav2vec2-conformer and Wav2Vec2-BERT rotaries (stack([cos, sin]) of their
inv_freq) read, proven, audited (the float32 cause), patched exact and given back; each value of posenc's
equivalent against mpmath; another layout of the same names refused."""

from __future__ import annotations

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_longcat_audio_dit import AudioDiTRotaryEmbedding
from diffusers.models.transformers.transformer_minimax_music3 import MiniMaxMusic3RotaryEmbedding
from transformers import Wav2Vec2BertConfig, Wav2Vec2ConformerConfig
from transformers.models.wav2vec2_bert.modeling_wav2vec2_bert import Wav2Vec2BertRotaryPositionalEmbedding
from transformers.models.wav2vec2_conformer.modeling_wav2vec2_conformer import (
    Wav2Vec2ConformerRotaryPositionalEmbedding,
)

import posenc
import posenc.torch as pt
from posenc.torch import length_rope
from tests.support import reference


def test_values_against_mpmath():
    cos, sin = length_rope.LengthRope(8, 500.0, "length")(40, "cpu")
    assert cos.shape == sin.shape == (40, 8) and cos.dtype == torch.float32
    stacked = length_rope.LengthRope(8, 500.0, "stacked")(torch.zeros(2, 40, 3, dtype=torch.float64))
    assert stacked.shape == (2, 40, 1, 1, 8) and stacked.dtype == torch.float64
    # in the states' dtype directly (float64 here), never via float32
    params = length_rope.LengthRope(8, 500.0, "length").params
    wide = pt.rotary.cos_sin(torch.arange(40), params, dtype=torch.float64)
    assert torch.equal(stacked[0, :, 0, 0], wide[0]) and torch.equal(stacked[1, :, 0, 0], wide[1])
    assert torch.allclose(stacked[0, :, 0, 0], cos.double(), rtol=0, atol=6e-8)
    # bfloat16 rounded once: cos(8158 · 10⁵^(−40/64)) = 0.98632813970 is 0.986328125 in float32, a bfloat16
    # midpoint that rounds (to even) to 0.984375; the exact value rounds to 0.98828125
    half, _ = length_rope.LengthRope(64, 1e5, "states")(torch.zeros(1, 8159, 1, dtype=torch.bfloat16))
    assert float(half[8158, 20]) == 0.98828125
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
        lambda: Wav2Vec2ConformerRotaryPositionalEmbedding(
            Wav2Vec2ConformerConfig(hidden_size=64, num_attention_heads=2, position_embeddings_type="rotary")
        ),
        lambda: Wav2Vec2BertRotaryPositionalEmbedding(
            Wav2Vec2BertConfig(
                hidden_size=64,
                num_attention_heads=4,
                position_embeddings_type="rotary",
                rotary_embedding_base=500,
            )
        ),
    ],
)
def test_read_proven_audited_patched(build):
    module = build()
    exact = length_rope.read_length_rope(module)
    assert exact is not None
    kept = {k: v for k, v in vars(module).items() if k.startswith("cached")}
    difference, allowed = length_rope.prove_length_rope(module, exact)
    assert 0 < difference <= allowed
    assert {k: v for k, v in vars(module).items() if k.startswith("cached")} == kept  # its cache as it was
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and [f.kind for f in before.components[0].report.findings] == ["angles"]
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["rope-default"]
    assert report.replaced[0].kind == ("rotary" if exact.form == "stacked" else "computed")
    assert posenc.audit(model, samples=32).passed
    if exact.form == "stacked":  # stack([cos, sin]) (2, L, 1, 1, width) in the input's dtype
        values = model[0](torch.zeros(3, 7, 2, dtype=torch.bfloat16))
        assert values.shape == (2, 7, 1, 1, exact.width) and values.dtype == torch.bfloat16
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


def test_lengths_widths_and_states_are_checked_not_truncated():
    """A length or width of 2.7 is refused (it was truncated to 2), a negative length named (it was torch's
    arange error), and integer hidden_states refused (their cos/sin were truncated to integers)."""
    lengths, states = length_rope.LengthRope(4, 100.0, "length"), length_rope.LengthRope(4, 100.0, "states")
    with pytest.raises(TypeError, match=r"^seq_len must be an integer >= 0; got 2\.7"):
        lengths(2.7, "cpu")
    with pytest.raises(ValueError, match=r"^seq_len must be an integer >= 0; got -1"):
        lengths(-1, "cpu")
    with pytest.raises(TypeError, match=r"^seq_len must be an integer >= 0; got 5\.9"):
        states(torch.zeros(1, 3, 4), seq_len=5.9)
    with pytest.raises(TypeError, match=r"^width must be an integer >= 2; got 4\.9"):
        length_rope.LengthRope(4.9, 100.0, "length")
    for form in ("states", "stacked"):
        with pytest.raises(TypeError, match=r"^hidden_states must be a floating-point tensor.*torch\.int64"):
            length_rope.LengthRope(4, 100.0, form)(torch.zeros(1, 3, 4, dtype=torch.int64))
    assert lengths(0, "cpu")[0].shape == (0, 4) and states(torch.zeros(1, 3, 4), seq_len=5)[0].shape == (5, 4)
