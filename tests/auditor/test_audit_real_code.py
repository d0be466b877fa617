"""The auditor on positional code as projects write it, where it once said a false word, crashed or missed a
cause it knows: each case the code, what is true of it, and what the report must (and must not) say."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

import posenc

D = 64


def _titles(report) -> list[str]:
    return [f.text.split(":")[0] for f in report.findings]


def _tutorial(p, d=D):
    """The PyTorch tutorial's arithmetic at positions ``p``: float32 div_term and angles, interleaved."""
    div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
    angles = torch.as_tensor(np.asarray(p)).unsqueeze(1) * div_term
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)


class ScaledSinusoidalEmbedding(nn.Module):
    """x-transformers': an absolute [sin | cos] of its ``inv_freq`` buffer, times dim^-0.5."""

    def __init__(self, dim, theta=10000):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1) * dim**-0.5)
        freq_seq = torch.arange(dim // 2).float() / (dim // 2)
        self.register_buffer("inv_freq", theta**-freq_seq, persistent=False)

    def forward(self, x, pos=None):
        pos = torch.arange(x.shape[1]) if pos is None else pos
        emb = torch.einsum("i, j -> i j", pos.type_as(self.inv_freq), self.inv_freq)
        return torch.cat((emb.sin(), emb.cos()), dim=-1) * self.scale


class TransformerXLPositionalEmbedding(nn.Module):
    """Transformer-XL's: ``forward(pos_seq)`` takes positions, its ``inv_freq`` by pow then reciprocal."""

    def __init__(self, demb):
        super().__init__()
        self.register_buffer("inv_freq", 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb)))

    def forward(self, pos_seq, bsz=None):
        s = torch.ger(pos_seq, self.inv_freq)
        return torch.cat([s.sin(), s.cos()], dim=-1)[:, None, :]


def test_an_odd_width_table_of_the_papers_own_rule_is_audited_not_crashed_on():
    # odd="literal" (DistilBERT, XLM, the tutorial's div_term[: d // 2] fix): the last sine has no cosine,
    # and a finding indexed the column past it (IndexError, blamed on the target)
    report = posenc.audit(posenc.table(4096, 65, odd="literal"), samples=256)
    assert report.passed and report.variant.options["odd"] == "literal"

    def fixed(p, d=65):
        div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        position = torch.as_tensor(p).unsqueeze(1)
        out = torch.zeros(len(position), d)
        out[:, 0::2], out[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term[: d // 2])
        return out

    assert _titles(posenc.audit(fixed, samples=256, positions=1 << 20)) == ["angles formed in float32"]


def test_an_absolute_module_holding_inv_freq_is_run_as_one_not_read_as_a_rotary():
    # it was "rotary module (its inv_freq only)", 128 columns, rope-default: never run
    report = posenc.audit(ScaledSinusoidalEmbedding(D), samples=256)
    assert report.kind == "module" and report.width == D and report.variant.params is None
    assert _titles(report) == ["values scaled by 0.125 = 1/√64", "angles formed in float32"], report.as_text()
    assert abs(report.findings[0].data["factor"] - 0.125) < 1e-6


class RotaryOfQK(nn.Module):
    """A rotary whose forward rotates q and k (none to call on positions): Transformer-XL's ``inv_freq``."""

    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", TransformerXLPositionalEmbedding(dim).inv_freq)

    def forward(self, q, k):
        raise NotImplementedError


def test_a_module_read_from_its_inv_freq_alone_has_no_angles_of_its_own():
    # its values are posenc's cos/sin of its θ_i: their error is its frequencies', never "angles formed in
    # float32" (the rounding of an angle that no code of its formed)
    report = posenc.audit(RotaryOfQK(D), samples=256)
    assert "inv_freq only" in report.target
    assert _titles(report) == ["frequencies computed in float32"], report.as_text()
    assert "angles" not in report.as_text().split("findings:")[1]


def test_an_amplitude_with_float32_angles_is_both_causes_not_an_unexplained_error():
    for factor in (0.125, 0.73):  # x-transformers' dim^-0.5, ESPnet's ScaledPositionalEncoding alpha
        report = posenc.audit(lambda p, a=factor: _tutorial(p) * a, samples=256, positions=1 << 20)
        assert _titles(report) == [f"values scaled by {factor:g}" + (" = 1/√64" if factor == 0.125 else ""),
                                   "angles formed in float32"], report.as_text()  # fmt: skip


def test_a_declared_variant_the_rows_do_not_hold_leaves_no_false_remainder():
    # the angles' error is read against the variant the rows hold (scale 10000^(-1/64): the exponents of
    # the odd columns), and so is what is left past it: nothing ("unexplained remainder: up to 2")
    div_term = torch.exp(torch.arange(1, D, 2) * (-math.log(10000.0) / D))

    def odd_exponents(p):
        angles = torch.as_tensor(p).unsqueeze(1) * div_term
        out = torch.zeros(len(angles), D)
        out[:, 0::2], out[:, 1::2] = angles.sin(), angles.cos()
        return out

    report = posenc.audit(odd_exponents, samples=256, positions=1 << 20, preset="paper")
    assert _titles(report) == ["wrong scale", "angles formed in float32"], report.as_text()


def test_float64_angles_get_a_fix_that_is_not_float64_again():
    def float64_code(p):  # the tutorial built under torch.set_default_dtype(torch.float64)
        div_term = torch.exp(torch.arange(0, D, 2, dtype=torch.float64) * (-math.log(10000.0) / D))
        angles = torch.as_tensor(np.asarray(p), dtype=torch.float64).unsqueeze(1) * div_term
        return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)

    report = posenc.audit(float64_code, samples=256, positions=1 << 30)  # judged in float64
    angles = next(f for f in report.findings if f.kind == "angles")
    assert angles.data["grid"] == "float64" and "not float64" not in angles.fix
    assert "extended or multiple precision" in angles.fix


class LlamaLinearScalingRotaryEmbedding(nn.Module):
    """transformers 4.31–4.35: ``inv_freq`` as rope-default's, the positions divided by the factor in its
    cache, ``forward(x, seq_len)``."""

    def __init__(self, dim, base=10000, scaling_factor=4.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.scaling_factor, self.max_seq_len_cached = scaling_factor, 0

    def forward(self, x, seq_len=None):
        t = torch.arange(seq_len, dtype=self.inv_freq.dtype) / self.scaling_factor
        emb = torch.einsum("i,j->ij", t, self.inv_freq).repeat(1, 2)
        return emb.cos()[None, None].to(x.dtype), emb.sin()[None, None].to(x.dtype)


def test_a_rotary_whose_forward_scales_its_inv_freq_is_identified_from_its_rows():
    # its inv_freq alone is rope-default's: its rows were "unexplained error up to 2"
    report = posenc.audit(LlamaLinearScalingRotaryEmbedding(D), samples=256, positions=1 << 16)
    assert report.variant.params.rope_type == "linear" and report.variant.params.factor == 4.0
    assert "its inv_freq is rope-default's" in report.variant.how
    assert _titles(report) == ["angles formed in float32"], report.as_text()
    assert "factor=4.0" in report.as_text()  # the report's variant line names the scaling


def test_a_table_read_as_a_rotary_sin_cache_says_so_in_its_variant_line():
    # [sin, sin] pairs (a copy-paste bug of an absolute table) are exactly an interleaved RoPE sin cache:
    # read as what it is, float64 code cast once (within 1 ulp at every row: its frequencies are NumPy's
    # exp, not the exact ones), and the report's variant line says what the columns were read as
    position = np.arange(4096, dtype=np.float64)[:, None]
    angles = position * np.exp(np.arange(0, D, 2) * (-math.log(10000.0) / D))
    table = np.repeat(np.sin(angles), 2, axis=1).astype(np.float32)
    report = posenc.audit(table, samples=256)
    assert report.max_ulp <= 1 and "its sin cache in interleaved pairs" in report.as_text()


def test_a_declared_rotary_the_rows_do_not_hold_is_a_wrong_rotary_and_a_bad_one_is_refused():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    module = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4))
    linear = {"head_dim": 16, "scaling": {"rope_type": "linear", "factor": 2.0}}
    report = posenc.audit(module, preset=linear, samples=64)  # was: only "positions rounded to float32"
    assert report.findings[0].text.startswith("wrong rotary: declared rope-linear"), report.as_text()
    assert "the target's rows are rope-default" in report.findings[0].text
    for preset, error, words in [
        ({"rope_type": "linear"}, ValueError, "unknown keys ['rope_type'] for a rotary target"),
        ("paper", ValueError, "names a sinusoidal variant, but the target is a rotary"),
        (3, TypeError, "must be a dict of rotary keywords"),
    ]:
        with pytest.raises(error, match=re.escape(words)):
            posenc.audit(module, preset=preset, samples=64)


def test_a_cliff_does_not_hide_the_rounding_of_the_rows_before_it():
    # the tutorial's module after .half(): rows before 5000 are one float16 rounding step from the exact
    # values (483 ulps where a value is near 0); the report named the cliff alone
    from tests.support.tutorial import TutorialPositionalEncoding

    report = posenc.audit(TutorialPositionalEncoding(D).half(), samples=256)
    assert _titles(report) == ["length cliff at 5000", "not correctly rounded"], report.as_text()
    assert report.findings[1].data["max_abs"] <= 2.0**-11  # one rounding step, not a larger cause


def _scaled_code(p, amplitude=0.73, positions_in=torch.float64):
    """float64 angles of positions held in ``positions_in``, times ``amplitude``, as float32."""
    pos = torch.as_tensor(np.asarray(p)).to(positions_in).double()
    div = torch.exp(torch.arange(0, D, 2, dtype=torch.float64) * (-math.log(1e4) / D))
    angles = pos[:, None] * div
    return (torch.stack([angles.sin(), angles.cos()], -1).flatten(1) * amplitude).float()


def test_an_amplitude_hides_no_other_cause_and_no_part_of_the_rows():
    # positions held in float16 beside an amplitude: the rounding was no longer found (rows divided by A
    # compared with the raw ones)
    report = posenc.audit(lambda p: _scaled_code(p, positions_in=torch.float16), samples=256, positions=60000)
    assert _titles(report)[:2] == [
        "values scaled by 0.73",
        "positions rounded to float16 or TF32 (11 significant bits)",
    ]
    # the first 300 rows scaled by 0.9, the rest exact: what the amplitude leaves is said
    table = posenc.table(4096, D)
    table[:300] *= np.float32(0.9)
    report = posenc.audit(table, samples=256)
    assert _titles(report) == ["values scaled by 0.9", "unexplained remainder"], report.as_text()


def test_rows_that_are_a_fit_times_an_amplitude_are_measured_against_that_fit():
    # x-transformers' maths at theta 1e5 ([sin | cos] × 64^-0.5): the fit times 0.125, not "paper"
    def rows(p):
        omega = 1e5 ** -(np.arange(D // 2) / (D // 2))
        angles = np.asarray(p, dtype=np.float64)[:, None] * omega
        return (np.concatenate([np.sin(angles), np.cos(angles)], axis=1) * 0.125).astype(np.float32)

    report = posenc.audit(rows, samples=256, positions=1 << 20)
    assert report.variant.options["base"] == 1e5 and report.variant.options["layout"] == "sin_cos"
    assert _titles(report) == ["values scaled by 0.125 = 1/√64"], report.as_text()


def test_an_interleaved_rotary_declared_with_its_own_parameters_is_no_wrong_rotary():
    from transformers import CohereConfig
    from transformers.models.cohere.modeling_cohere import CohereRotaryEmbedding

    config = CohereConfig(hidden_size=256, num_attention_heads=4, max_position_embeddings=4096)
    module = CohereRotaryEmbedding(config)
    preset = {"head_dim": 64, "base": config.rope_parameters["rope_theta"]}  # layout left at "half"
    report = posenc.audit(module, samples=256, positions=4096, preset=preset)
    assert not any(f.text.startswith("wrong rotary") for f in report.findings), report.as_text()
    assert report.findings[0].kind == "layout"  # declared halves, its rows interleaved pairs: that alone


def test_a_gptj_style_rotary_read_from_its_inv_freq_is_judged_in_the_layout_it_emits():
    class GPTJRotary(nn.Module):
        def __init__(self, dim, base=10000.0):
            super().__init__()
            exponents = torch.arange(0, dim, 2, dtype=torch.int64).float() / dim
            self.register_buffer("inv_freq", 1.0 / (base**exponents))

        def forward(self, x, position_ids):
            emb = torch.repeat_interleave(position_ids[..., None].float() * self.inv_freq, 2, dim=-1)
            return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

    report = posenc.audit(GPTJRotary(D), samples=256, positions=8192)
    assert report.variant.layout == "interleaved" and "hold another" not in report.variant.how
    assert _titles(report) == ["angles formed in float32"], report.as_text()


def test_the_rounding_after_a_cliff_counts_the_ulps_of_the_rows_before_it():
    exact = posenc.table(5000, D, dtype="float64")

    def code(p):  # float16 values rounded twice (float64 -> float32 -> float16), zero rows from 5000
        p = np.asarray(p)
        out = exact[np.minimum(p, 4999)].astype(np.float32).astype(np.float16)
        out[p >= 5000] = 0
        return out

    report = posenc.audit(code, samples=256, positions=20000)
    assert _titles(report) == ["length cliff at 5000", "not correctly rounded"], report.as_text()
    assert report.findings[1].data["max_ulp"] == 1.0  # not the zero rows' 2047


def test_bfloat16_code_is_called_bfloat16_angles_not_float16():
    def code(p):  # positions, frequencies, angles and sin/cos all in bfloat16; 16 columns, base 1e6
        pos = torch.as_tensor(np.asarray(p)).to(torch.bfloat16)
        div = torch.exp(torch.arange(0, 16, 2).to(torch.bfloat16) * (-math.log(1e6) / 16))
        angles = pos[:, None] * div
        return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)

    report = posenc.audit(code, samples=256, positions=4096)
    assert "angles formed in float16" not in _titles(report)
    assert "angles formed in bfloat16" in _titles(report), report.as_text()


class SinusoidalPosEmb(nn.Module):
    """denoising-diffusion-pytorch's: ``forward(x)`` of timesteps, ω_i = θ^(-i/(half - 1)), [sin | cos]."""

    def __init__(self, dim, theta=10000):
        super().__init__()
        self.dim, self.theta = dim, theta

    def forward(self, x):
        half = self.dim // 2
        emb = torch.exp(torch.arange(half) * -(math.log(self.theta) / (half - 1)))
        emb = x[:, None] * emb[None, :]
        return torch.cat((emb.sin(), emb.cos()), dim=-1)


class FloatTimesteps(nn.Module):
    """A timestep embedding that takes float timesteps only (as a sampler's fractional ones)."""

    def forward(self, t):
        if not t.is_floating_point():
            raise TypeError("timesteps must be float")
        return posenc.torch.Timesteps(D, True, 0)(t)


class Float32Timesteps(nn.Module):
    """One that takes float32 timesteps only."""

    def forward(self, t):
        if t.dtype != torch.float32:
            raise TypeError("timesteps must be float32")
        return posenc.torch.Timesteps(D, True, 0)(t)


def test_a_module_whose_forward_takes_positions_is_run_on_them_and_judged_whole():
    # Transformer-XL's PositionalEmbedding holds inv_freq: it was read as a rotary (128 columns of posenc's
    # cos/sin of its θ, its forward never run); diffusers' Timesteps and denoising-diffusion's
    # SinusoidalPosEmb hold nothing and were refused
    from diffusers.models.embeddings import Timesteps

    report = posenc.audit(TransformerXLPositionalEmbedding(D), samples=256)
    assert report.kind == "callable" and report.width == D and "forward(positions)" in report.target
    assert report.variant.name.startswith("marian") and report.variant.params is None
    assert _titles(report) == ["positions rounded to float32", "angles formed in float32"], report.as_text()
    for module, variant in [
        (Timesteps(D, True, 0), "diffusers-timestep"),
        (SinusoidalPosEmb(D), "tensor2tensor"),
    ]:
        report = posenc.audit(module, samples=256)
        assert report.variant.name.startswith(variant), report.as_text()
        assert _titles(report) == ["positions rounded to float32", "angles formed in float32"], (
            report.as_text()
        )
    assert posenc.audit(posenc.torch.Timesteps(D, True, 0), samples=256).passed
    # fed float64 positions, exact: the auditor rounds no position itself where the module takes exact ones
    report = posenc.audit(FloatTimesteps(), samples=64)
    assert report.passed and "positions as float64 (it takes no int64 ones)" in " ".join(
        report.as_text().split()
    )
    report = posenc.audit(Float32Timesteps(), samples=64)  # float32 only: rounded, as its callers round them
    assert "float32 (it takes no int64 ones); those from 2,147,483,584 on round" in " ".join(
        report.as_text().split()
    )
    # sampled below 2^31 - 64, the first position float32 rounds to 2^31: no 'length cliff' of the sampler's
    assert posenc.auditor.targets.as_target(Float32Timesteps()).limit == 2**31 - 64
    assert _titles(report) == ["positions rounded to float32"], report.as_text()


class Angles(nn.Module):
    """rotary-embedding-torch's ``RotaryEmbedding.forward(t)``: the angles p·θ_i, not an encoding."""

    def forward(self, t):
        return t.double()[:, None] * torch.tensor([1.0, 0.1, 0.01])


class WithInput(nn.Module):
    """NeRF's embedder with ``include_input``: the position itself beside its sines and cosines."""

    def forward(self, t):
        x = t.double()[:, None]
        return torch.cat([x, torch.sin(x), torch.cos(x), torch.sin(2 * x), torch.cos(2 * x)], dim=-1)


class BatchCentred(nn.Module):
    """Encodings less a hundredth of the batch's mean: each row depends on the batch it is in."""

    def forward(self, t):
        rows = posenc.torch.Timesteps(8, True, 0)(t)
        return rows - 0.01 * rows.mean(0, keepdim=True)


class PerBatchRow(nn.Module):
    """Transformer-XL's ``forward(pos_seq, bsz=2)``: (k, 2, d), a copy per batch row."""

    def forward(self, t):
        return posenc.torch.Timesteps(8, True, 0)(t)[:, None, :].expand(-1, 2, -1)


class TokenPositions(nn.Module):
    """An embedding that numbers its input's tokens itself (its input is no positions)."""

    def forward(self, tokens):
        return posenc.torch.Timesteps(8, True, 0)(torch.arange(len(tokens)))


@pytest.mark.parametrize(
    ("module", "why"),
    [
        (Angles(), "position 0's row is all zeros"),
        (WithInput(), "values beyond the largest of position 0's row"),
        (TokenPositions(), "another row when the order changes"),
        (BatchCentred(), "another row in a batch of its own"),
        (PerBatchRow(), "more than (positions, width)"),
    ],
)
def test_a_forward_of_one_tensor_that_is_not_an_encoding_of_positions_is_refused_with_the_reason(module, why):
    with pytest.raises(ValueError, match="forward\\(positions\\)") as caught:
        posenc.audit(module)
    assert why in str(caught.value)


def test_an_amplitude_beside_16_bit_angles_is_read_from_the_pairs_norms():
    # x-transformers' module after .to(bfloat16): the first positions' ratios value / exact already carry
    # the bfloat16 angles' error, so the amplitude 0.125 went unnamed (only the rounded positions were)
    module = ScaledSinusoidalEmbedding(D).to(torch.bfloat16)
    x = torch.zeros(1, 1, D, dtype=torch.bfloat16)
    report = posenc.audit(lambda p: module(x, pos=torch.as_tensor(p)), samples=256, positions=1 << 16)
    assert _titles(report) == [
        "values scaled by 0.125 = 1/√64",
        "positions rounded to bfloat16",
        "angles formed in bfloat16",
    ], report.as_text()
    assert report.findings[0].data["factor"] == 0.125 and "norm √(sin² + cos²)" in report.findings[0].evidence
    # no amplitude where there is none: the same bfloat16 code unscaled
    module.scale.data.fill_(1.0)
    report = posenc.audit(lambda p: module(x, pos=torch.as_tensor(p)), samples=256, positions=1 << 16)
    assert "amplitude" not in [f.kind for f in report.findings], report.as_text()


def test_rows_no_sinusoid_holds_are_said_to_be_none_not_an_error_of_one():
    # a learned table was "unexplained error: up to 4.5 ... compare the code step by step with the exact
    # formula", as if it were a sinusoid computed badly
    torch.manual_seed(0)
    learned = torch.nn.Embedding(512, D)
    for target in (learned, learned.weight.detach()):
        report = posenc.audit(target, samples=64)
        assert report.kind == "table" and len(report.findings) == 1, report.as_text()
        assert report.findings[0].text.startswith("no sinusoid identified"), report.as_text()
        assert "learned table" in report.findings[0].evidence and not report.passed
    # a sinusoidal table kept in an Embedding is read as that table (it was refused: 'weight' is no name
    # of a positional buffer)
    frozen = torch.nn.Embedding.from_pretrained(torch.from_numpy(posenc.table(512, D)))
    assert posenc.audit(frozen, samples=64).passed
    # a declared variant is measured against, never 'no sinusoid identified'
    report = posenc.audit(learned.weight.detach(), preset="paper", samples=64)
    assert not report.findings[0].text.startswith("no sinusoid identified")


class ViewOfBuffer(nn.Module):
    """Writes its rows into a reused float64 buffer and returns a view of it (exact at these positions)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("out", torch.zeros(4096, D, dtype=torch.float64))

    def forward(self, t):
        self.out[: len(t)] = torch.from_numpy(posenc.encode(t.numpy(), D, dtype="float64"))
        return self.out[: len(t)]


class CosSinOfPositions(nn.Module):
    """A rotary whose ``forward(positions)`` returns ``(cos, sin)``: float32 positions and angles."""

    def __init__(self, dim=32, buffer=True):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        if buffer:
            self.register_buffer("inv_freq", inv_freq)
        else:
            self.frequencies = inv_freq

    def forward(self, p):
        angles = p.float()[:, None] * (self.inv_freq if hasattr(self, "inv_freq") else self.frequencies)
        both = torch.cat((angles, angles), -1)
        return both.cos(), both.sin()


def test_modules_of_positions_the_second_review_found_read_wrong():
    # a view of a reused buffer: the first call's rows were overwritten by the second's (values_of made no
    # copy of a float64 tensor), and the module was refused as giving "a position another row"
    assert posenc.audit(ViewOfBuffer(), samples=64).passed
    # an Embedding that renormalises the rows it looks up (max_norm), and BART's, which looks up p + 2: their
    # forward is judged, not their weight (both passed as exact)
    table = torch.from_numpy(posenc.table(2048, D))
    report = posenc.audit(nn.Embedding.from_pretrained(table, max_norm=1.0), samples=64)
    assert _titles(report)[0] == "values scaled by 0.176777", report.as_text()
    from transformers.models.bart.modeling_bart import BartLearnedPositionalEmbedding

    bart = BartLearnedPositionalEmbedding(2048, D)
    with torch.no_grad():
        bart.weight.copy_(torch.from_numpy(posenc.table(2050, D)))
    assert _titles(posenc.audit(bart, samples=64))[0] == "off by 2 positions"
    # forward(positions) -> (cos, sin): judged whole as a rotary (with an inv_freq buffer it was read from
    # that alone, "its forward could not be called"; without one it was refused)
    for module in (CosSinOfPositions(), CosSinOfPositions(buffer=False)):
        report = posenc.audit(module, samples=256)
        assert report.kind == "rotary" and "(cos, sin)" in report.as_text()
        assert _titles(report) == ["positions rounded to float32", "angles formed in float32"], (
            report.as_text()
        )


def test_a_module_of_positions_far_from_every_variant_is_said_so_beside_its_rounded_positions():
    from diffusers.models.embeddings import Timesteps

    # scale=1000: rows off by 2 from position 1 on, and only "positions rounded to float32" was said
    report = posenc.audit(Timesteps(D, True, 0, scale=1000), samples=64)
    assert _titles(report) == ["positions rounded to float32", "no sinusoid identified"], report.as_text()
    # downscale_freq_shift=0.5 was "base 8639.9, shift 1" (the fit's frequencies rounded: 3e-4 off)
    report = posenc.audit(Timesteps(D, True, 0.5), samples=64)
    assert report.variant.options["shift"] == 0.5 and report.variant.options["base"] == 10000.0


def _cast_frequencies(base, d, grid, layout="interleaved"):
    """Frequencies of ``base`` rounded to ``grid`` (a buffer after ``.half()``); angles, sin/cos float64."""
    omega = torch.tensor(base ** (-np.arange(0, d, 2) / d)).to(getattr(torch, grid)).double().numpy()

    def rows(p):
        angles = np.asarray(p, dtype=np.float64)[:, None] * omega
        out = np.empty((len(angles), d))
        sines, cosines = (
            (slice(0, None, 2), slice(1, None, 2))
            if layout == "interleaved"
            else (slice(0, d // 2), slice(d // 2, d))
        )
        out[:, sines], out[:, cosines] = np.sin(angles), np.cos(angles)
        return out.astype(np.float32)

    return rows


@pytest.mark.parametrize(
    ("base", "d", "grid", "layout"),
    [
        (1e6, 64, "float16", "interleaved"),
        (1e6, 64, "bfloat16", "interleaved"),
        (500.0, 64, "float16", "interleaved"),
        (500.0, 128, "bfloat16", "interleaved"),
        (1e5, 96, "bfloat16", "sin_cos"),
        (10200.0, 64, "bfloat16", "interleaved"),
        (10200.0, 128, "float16", "interleaved"),
    ],
)
def test_frequencies_rounded_to_a_16_bit_type_are_read_against_their_own_base(base, d, grid, layout):
    # base 10^6 with float16 frequencies was "base 649300, shift 1" with an "unexplained remainder"; bfloat16
    # ones "base 10^6, scale 0.99889" and "frequencies computed in float16"; a whole table of base 10^5 was
    # measured against base 10^4 (every error saturates at 2 over 2048 rows) and called no sinusoid; base
    # 10200 in bfloat16 was measured against base 10^4 ("frequencies computed in bfloat16: off by 5.2
    # units"), and with float16 frequencies at width 128 read as "base 8830, shift 1" and a remainder
    rows = _cast_frequencies(base, d, grid, layout)
    for target in (rows, rows(np.arange(2048))):
        report = posenc.audit(target, samples=64, **({"positions": 1 << 20} if callable(target) else {}))
        options = report.variant.options
        assert (options["base"], options["shift"], options["scale"]) == (base, 0.0, 1.0), report.as_text()
        assert _titles(report) == [f"frequencies cast to {grid}"], report.as_text()
