"""Sinusoids computed in forward (posenc.torch.computed). DETR's 2-D sine (``PositionEmbeddingSine``):
posenc.grids.detr_2d against mpmath and transformers' own classes, posenc.torch.DetrSinePositionEmbedding
bit for bit against it, and the model audit and patch of a DETR: found, judged, replaced, proven, given
back. The 1-D forms (Pegasus-X's table of positions, a timestep embedding, Gemma 4's fixed rows): identified,
replaced in their calling form, declined where no variant matches."""

from __future__ import annotations

import copy
import io
import math

import mpmath
import numpy as np
import pytest
import torch
from torch import nn
from transformers.models.deformable_detr.modeling_deformable_detr import DeformableDetrSinePositionEmbedding
from transformers.models.detr.modeling_detr import DetrSinePositionEmbedding as HfDetrSine
from transformers.models.grounding_dino.modeling_grounding_dino import GroundingDinoSinePositionEmbedding
from transformers.models.omdet_turbo.modeling_omdet_turbo import OmDetTurboHybridEncoder

import posenc
import posenc.torch as pt
from posenc import grids
from posenc.torch import computed, patching
from tests.support import reference


def _standing_for(module: str):
    """A re-implementation here stands for the library's own class in ``module``: the reader and the
    replacement of its form are what the test checks; ``posenc.torch.patch`` replaces only a library's own
    code (its classes and methods defined there), so the class and its methods say they are from there."""

    def mark(cls: type) -> type:
        cls.__module__ = module
        for value in vars(cls).values():
            function = getattr(value, "__func__", value)
            if callable(function) and hasattr(function, "__module__"):
                function.__module__ = module
        return cls

    return mark


@pytest.fixture(autouse=True)
def _standing_code(monkeypatch):
    """posenc reads where a method's code is, not only its module's name: this file's code stands for the
    library's here (:func:`_standing_for`)."""
    monkeypatch.setattr(patching, "_CALLED_PACKAGES", (*patching._CALLED_PACKAGES, "tests"))


def _padded_mask() -> np.ndarray:
    mask = np.ones((2, 7, 11), dtype=np.int64)
    mask[1, 5:, :] = 0
    mask[1, :, 8:] = 0
    return mask


@pytest.mark.parametrize("offset", [0.0, 0.5])
def test_detr_2d_is_correctly_rounded_at_detrs_float32_positions(offset: float) -> None:
    mask = _padded_mask()
    values = grids.detr_2d(mask, 8, normalize=True, offset=offset, temperature=(20.0, 10000.0))
    y, x = grids.detr_positions(mask, normalize=True, offset=offset)
    mpmath.mp.prec = 120
    for index in [(0, 0, 0), (0, 6, 10), (1, 4, 7), (1, 6, 10)]:
        for block, (p, base) in enumerate(((y, 20.0), (x, 10000.0))):
            position = mpmath.mpf(float(p[index]))
            for column in range(8):
                angle = position * mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * (column // 2)) / 8)
                want = mpmath.sin(angle) if column % 2 == 0 else mpmath.cos(angle)
                assert values[(*index, block * 8 + column)] == np.float32(float(want))


@pytest.mark.parametrize("cls", [HfDetrSine, DeformableDetrSinePositionEmbedding])
@pytest.mark.parametrize("normalize", [True, False])
def test_detr_2d_is_what_transformers_computes_up_to_its_float32_error(cls: type, normalize: bool) -> None:
    mask = _padded_mask()
    theirs = cls(16, normalize=normalize)(
        shape=(2, 3, 7, 11), device="cpu", dtype=torch.float32, mask=torch.tensor(mask)
    )
    offset = 0.5 if normalize and cls is DeformableDetrSinePositionEmbedding else 0.0
    ours = grids.detr_2d(mask, 16, normalize=normalize, offset=offset).transpose(0, 3, 1, 2)
    # the padded columns of Deformable DETR's line sit at -0.5/eps·2π: far beyond float32's reach
    real = np.broadcast_to(mask.astype(bool)[:, None], ours.shape) if offset else np.ones(ours.shape, bool)
    assert np.abs(theirs.numpy() - ours)[real].max() < 2e-5


def test_the_torch_module_is_detr_2d_bit_for_bit_and_channels_first() -> None:
    mask = _padded_mask()
    module = pt.DetrSinePositionEmbedding(16, temperature=20, normalize=True, offset=0.5)
    out = module(torch.tensor(mask))
    want = grids.detr_2d(mask, 16, temperature=20, normalize=True, offset=0.5).transpose(0, 3, 1, 2)
    assert out.shape == (2, 32, 7, 11) and np.array_equal(out.numpy(), want)
    half = module(torch.tensor(mask), torch.bfloat16)
    assert half.dtype == torch.bfloat16
    wide = grids.detr_2d(mask, 16, temperature=20, normalize=True, offset=0.5, dtype="float64")
    assert torch.equal(half, torch.from_numpy(wide.transpose(0, 3, 1, 2).copy()).to(torch.bfloat16))
    compiled = torch.compile(module, backend="eager", fullgraph=False)
    assert torch.equal(compiled(torch.tensor(mask)), out)


@pytest.mark.parametrize(
    ("arguments", "error", "words"),
    [
        ({"num_position_features": 7}, ValueError, "num_position_features must be even"),
        (
            {"num_position_features": 8, "scale": 3.0},
            ValueError,
            "scale=3.0 applies only with normalize=True",
        ),
        ({"num_position_features": 8, "temperature": (1.0, 2.0, 3.0)}, ValueError, "temperature"),
        ({"num_position_features": 8, "normalize": "yes"}, TypeError, "normalize must be True or False"),
    ],
)
def test_bad_options_are_refused_by_name(arguments: dict, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        grids.detr_2d(np.ones((1, 2, 2)), **arguments)
    with pytest.raises(error, match=words):
        pt.DetrSinePositionEmbedding(**arguments)


def test_bad_masks_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"mask must have shape \(B, H, W\)"):
        grids.detr_2d(np.ones((2, 2)), 8)
    with pytest.raises(ValueError, match="mask must be finite"):
        grids.detr_2d(np.full((1, 2, 2), np.nan), 8)
    with pytest.raises(ValueError, match=r"mask must be a \(B, H, W\) tensor"):
        pt.DetrSinePositionEmbedding(8)(torch.ones(4, 4))


@pytest.mark.parametrize("value", [2.0, -1.0, 0.5, float("nan")])
def test_a_mask_of_other_values_than_0_and_1_is_refused_eagerly(value) -> None:
    """The docs say 0s and 1s: 2s counted pixels twice and -1s gave negative positions, silently; now
    refused naming mask, as from_attention_mask refuses them (eager, on the CPU; traced, nothing is read)."""
    mask = torch.ones(1, 2, 2)
    mask[0, 1, 0] = value
    with pytest.raises(ValueError, match=r"^mask must hold only 0s and 1s.*at index \(0, 1, 0\)") as raised:
        pt.DetrSinePositionEmbedding(4)(mask)
    assert raised.value.parameter == "mask"
    module, good = pt.DetrSinePositionEmbedding(4), torch.tensor([[[1, 1], [1, 0]]])
    assert torch.equal(module(good), module(good.bool())) and torch.equal(module(good), module(good.float()))
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    assert torch.equal(compiled(good.float()), module(good))


class _Swapped(nn.Module):
    """DETR's attributes and forward, cos where DETR has sin: a formula posenc must not read as DETR's."""

    def __init__(self) -> None:
        super().__init__()
        self.num_position_features, self.temperature, self.normalize, self.scale = 8, 10000, True, 2 * math.pi

    def forward(self, shape, device, dtype, mask=None):
        values = HfDetrSine(8, normalize=True)(shape, device, dtype, mask)
        return torch.cat([values[:, 1::2], values[:, 0::2]], dim=1)


def test_a_formula_that_is_not_detrs_is_not_read_as_it() -> None:
    for module in (_Swapped(),):
        reading = computed.read_detr_sine(module)
        assert isinstance(reading, str) and "not DETR's 2-D sine" in reading
    assert isinstance(computed.read_detr_sine(nn.Linear(2, 2)), str)


def test_both_forms_of_transformers_are_read() -> None:
    class Config:
        d_model, positional_embedding_temperature = 32, 20

    reading = computed.read_detr_sine(GroundingDinoSinePositionEmbedding(Config()))
    assert not isinstance(reading, str)
    assert (reading.convention, reading.features, reading.temperature, reading.normalize) == (
        "pixels",
        16,
        20,
        True,
    )
    reading = computed.read_detr_sine(DeformableDetrSinePositionEmbedding(16, normalize=True))
    assert not isinstance(reading, str) and (reading.convention, reading.offset) == ("shape", 0.5)


class _Detector(nn.Module):
    """A detector's shape: a backbone feature map, DETR's sine added to it, a head."""

    def __init__(self) -> None:
        super().__init__()
        self.position_embedding = HfDetrSine(4, normalize=True)
        self.head = nn.Linear(8, 2)

    def forward(self, mask: torch.Tensor) -> torch.Tensor:
        pos = self.position_embedding((mask.shape[0], 8, *mask.shape[1:]), mask.device, torch.float32, mask)
        return self.head(pos.flatten(2).transpose(1, 2))


def test_a_model_with_detrs_sine_is_audited_patched_and_given_back() -> None:
    model = _Detector()
    mask = torch.tensor(_padded_mask())
    before = model(mask)
    audit = posenc.audit(model, samples=64)
    (component,) = audit.components
    assert component.kind == "computed" and component.judged and not component.passed
    assert component.report.findings[0].kind == "float32" and audit.fix == "posenc.torch.patch(model)"
    report = pt.patch(model)
    (replaced,) = report.replaced
    assert replaced.variant == "detr-sine" and replaced.difference <= replaced.tolerance
    assert isinstance(model.position_embedding, pt.DetrSinePositionEmbedding)
    after = model(mask)
    assert (after - before).abs().max() < 1e-5
    assert posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1
    assert type(model.position_embedding) is HfDetrSine and torch.equal(model(mask), before)


@_standing_for("transformers.models.pegasus_x.modeling_pegasus_x")
class _PegasusXSinusoid(nn.Module):
    """Pegasus-X's sinusoid as its forward computes it: [sin | cos], ω_i = 10000^(-i/(half - 1)), float32."""

    def __init__(self, embed_dim: int, drift: float = 1.0) -> None:
        super().__init__()
        self.embed_dim, self.drift = embed_dim, drift  # drift: its last frequency multiplied (1: Pegasus-X's)

    def forward(self, inputs_embeds, past_key_values_length=0, position_ids=None):
        batch, length = inputs_embeds.shape[:2]
        if position_ids is None:
            position_ids = torch.arange(past_key_values_length, past_key_values_length + length)[:, None]
        half = self.embed_dim // 2
        div = torch.exp(torch.arange(half).float() * -(math.log(10000.0) / (half - 1)))
        div[-1] *= self.drift  # every frequency multiplied alike would be a scale: a variant posenc knows
        pe = torch.zeros(length, self.embed_dim)
        pe[:, :half], pe[:, half:] = torch.sin(position_ids * div), torch.cos(position_ids * div)
        return pe[None].expand(batch, -1, -1)


class _Text(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed_positions = _PegasusXSinusoid(16)
        self.head = nn.Linear(16, 3)

    def forward(self, embeds: torch.Tensor) -> torch.Tensor:
        return self.head(embeds + self.embed_positions(embeds, 5))


def test_a_1d_sinusoid_computed_in_forward_is_identified_judged_and_replaced() -> None:
    model, embeds = _Text(), torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(0))
    before = model(embeds)
    (component,) = posenc.audit(model, samples=64).components
    assert component.kind == "computed" and component.judged and not component.passed
    assert (
        component.report.variant.options["shift"] == 1
        and component.report.variant.options["layout"] == "sin_cos"
    )
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "computed" and replaced.difference <= replaced.tolerance
    assert torch.equal(
        model.embed_positions(embeds, 5)[0], pt.encode(torch.arange(5, 12), 16, shift=1, layout="sin_cos")
    )
    ids = torch.tensor([[3], [0]])
    assert torch.equal(
        model.embed_positions(embeds[:, :2], 0, ids)[1], pt.encode(ids[:, 0], 16, shift=1, layout="sin_cos")
    )
    assert (model(embeds) - before).abs().max() < 1e-5 and posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.embed_positions) is _PegasusXSinusoid


class _Forecaster(nn.Module):
    """TimesFM's use of its positional embedding: ``forward(seq_length=None, position=None)``."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import TimesFmConfig
        from transformers.models.timesfm.modeling_timesfm import TimesFmPositionalEmbedding

        self.position_emb = TimesFmPositionalEmbedding(TimesFmConfig(hidden_size=32))
        self.head = nn.Linear(32, 2)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        return self.head(series + self.position_emb(seq_length=series.shape[1]))


def test_timesfms_sinusoid_of_a_length_or_positions_is_identified_replaced_and_correctly_rounded() -> None:
    """TimesFM's embedding (transformers' own module): [sin | cos] of ω_i = 10000^(−i/(half − 1)) at
    0 .. seq_length − 1, or at real ``position`` (B, seq) (packed series), float32: identified
    (tensor2tensor's law), judged inexact (angles in float32), replaced in that calling form, and then
    correctly rounded at real positions against mpmath."""
    model, series = _Forecaster(), torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(0))
    before = model(series)
    (component,) = posenc.audit(model, samples=64).components
    assert component.judged and not component.passed
    assert component.report.variant.options == {
        "base": 10000.0, "shift": 1, "scale": 1.0, "layout": "sin_cos", "odd": "zero"
    }  # fmt: skip
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "computed" and replaced.difference <= replaced.tolerance
    assert model.position_emb(seq_length=9).shape == (1, 9, 32)
    assert torch.equal(
        model.position_emb(seq_length=9)[0], pt.encode(torch.arange(9), 32, shift=1, layout="sin_cos")
    )
    position = torch.tensor([[0.0, 2.5, 1e6 + 0.25], [7.0, -3.0, 12345.5]])
    got = model.position_emb(position=position)
    assert got.shape == (2, 3, 32) and got.dtype == torch.float32
    for (b, j), i in [((0, 1), 0), ((0, 2), 3), ((1, 2), 15), ((1, 1), 9)]:
        sin, cos = reference.sincos(float(position[b, j]), i, 32, shift=1)
        assert float(got[b, j, i]) == reference.round_to(sin, "float32")
        assert float(got[b, j, 16 + i]) == reference.round_to(cos, "float32")
    assert (model(series) - before).abs().max() < 1e-5 and posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.position_emb).__name__ == "TimesFmPositionalEmbedding"


def test_a_1d_sinusoid_posenc_cannot_prove_is_left_alone_with_the_reason() -> None:
    model = nn.Sequential()
    model.add_module("embed_positions", _PegasusXSinusoid(16, drift=1.01))  # no variant posenc knows
    (left,) = pt.patch(model).components
    assert not left.replaced and left.kind == "computed" and "no sinusoidal variant matches" in left.reason


@_standing_for("transformers.models.voxtral_realtime.modeling_voxtral_realtime")
class _TimeEmbedding(nn.Module):
    """Voxtral Realtime's time embedding as its forward computes it: one time (1,) -> [cos | sin] of t ω_i,
    ω_i = theta^(-i/(dim/2)), a flat vector in the time's dtype; its inv_freq a buffer (not a rotary)."""

    def __init__(self, dim: int, theta: float = 10000.0) -> None:
        super().__init__()
        self.dim, self.theta = dim, theta
        inv_freq = torch.exp(-math.log(theta) * torch.arange(dim // 2).float() / (dim // 2))
        self.inv_freq = nn.Buffer(inv_freq, persistent=False)

    def forward(self, time_tensor: torch.Tensor) -> torch.Tensor:
        emb = time_tensor * self.inv_freq.to(dtype=time_tensor.dtype)
        return torch.cat((emb.cos(), emb.sin()))


class _Delayed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.time_embedding = _TimeEmbedding(16)
        self.head = nn.Linear(16, 3)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.head(states * (1 + self.time_embedding(torch.full((1,), 6.0))))


def test_a_time_embedding_of_one_time_is_read_as_a_sinusoid_not_a_rotary_and_made_exact() -> None:
    """Voxtral Realtime's form (forward(time_tensor), a flat [cos | sin] vector, an inv_freq buffer): found
    as a computed sinusoid (it was called a rotary with no config, and its model declined), identified at
    t = 0 .. 999, replaced by the exact values in its calling form, and given back."""
    model, states = _Delayed(), torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(0))
    before = model(states)
    (component,) = posenc.audit(model, samples=64).components
    assert component.kind == "computed" and component.judged
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "computed" and "t = 0 .. 999" in replaced.reason
    for time in (torch.tensor([6.0]), torch.tensor(999.5), torch.tensor([3.0], dtype=torch.bfloat16)):
        got = model.time_embedding(time)
        want = pt.encode(time.reshape(1).float(), 16, layout="cos_sin", dtype=time.dtype)[0]
        assert got.shape == (16,) and got.dtype == time.dtype and torch.equal(got, want)
    with pytest.raises(ValueError, match="time_tensor must hold one real time"):
        model.time_embedding(torch.tensor([1.0, 2.0]))
    assert (model(states) - before).abs().max() < 1e-5 and posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.time_embedding) is _TimeEmbedding


@_standing_for("transformers.models.bros.modeling_bros")
class _BoxSinusoid(nn.Module):
    """BROS's sinusoid of box coordinates as its forward computes it: (B, n, k) reals -> (B, n, k, d),
    [sin | cos] of x ω_i, ω_i = 10000^(-2i/d); its inv_freq a buffer (not a rotary)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.inv_freq = nn.Buffer(1 / (10000 ** (torch.arange(0.0, dim, 2.0) / dim)))

    def forward(self, pos_seq: torch.Tensor) -> torch.Tensor:
        angles = pos_seq[..., None] * self.inv_freq
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class _Boxes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.x_pos_emb = _BoxSinusoid(8)
        self.head = nn.Linear(8, 3)

    def forward(self, boxes: torch.Tensor) -> torch.Tensor:
        return self.head(self.x_pos_emb(boxes).sum(-2))


def test_a_sinusoid_of_real_coordinates_is_read_not_as_a_rotary_and_made_exact() -> None:
    """BROS's form (forward(pos_seq), coordinates of any shape, an inv_freq buffer): found as a computed
    sinusoid (it was called a rotary with no config, and its model declined), identified at 0 .. 1023,
    replaced by the exact values of its real coordinates, and given back."""
    model, boxes = _Boxes(), torch.rand(2, 5, 4, generator=torch.Generator().manual_seed(0))
    before = model(boxes)
    (component,) = posenc.audit(model, samples=64).components
    assert component.kind == "computed" and component.judged
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "computed" and replaced.difference <= replaced.tolerance
    got = model.x_pos_emb(boxes)
    want = pt.encode(boxes.reshape(-1), 8, layout="sin_cos").reshape(2, 5, 4, 8)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    assert (model(boxes) - before).abs().max() < 1e-5 and posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.x_pos_emb) is _BoxSinusoid


@_standing_for("transformers.models.gemma4.modeling_gemma4")
class _RelativeSinusoid(nn.Module):
    """Gemma 4's audio relative positions: the rows of positions 12 .. 0, [sin | cos], in the input dtype."""

    def forward(self, hidden_states):
        positions = torch.arange(12, -1, -1)[:, None].float()
        inv = torch.exp(torch.arange(4).float() * -(math.log(10000.0) / 3))
        return torch.cat([torch.sin(positions * inv), torch.cos(positions * inv)], -1)[None].to(
            hidden_states.dtype
        )


def test_fixed_rows_from_the_last_position_down_are_read_and_replaced_in_their_order() -> None:
    model = nn.Sequential()
    model.add_module("rel_pos_enc", _RelativeSinusoid())
    states = torch.zeros(1, 3, 8, dtype=torch.float64)
    before = model.rel_pos_enc(states)
    assert posenc.audit(model, samples=16).judged
    (replaced,) = pt.patch(model).replaced
    after = model.rel_pos_enc(states)
    assert "from the last position down" in replaced.reason and after.shape == before.shape == (1, 13, 8)
    assert after.dtype == torch.float64 and torch.equal(
        after[0], pt.encode(torch.arange(12, -1, -1), 8, shift=1, layout="sin_cos", dtype=torch.float64)
    )


def _parakeet() -> nn.Module:
    import transformers as T

    torch.manual_seed(0)
    config = T.ParakeetEncoderConfig(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=1, intermediate_size=64, num_mel_bins=16
    )
    return T.ParakeetEncoder(config).eval()


def test_a_conformers_relative_positions_are_identified_replaced_and_exact_on_both_sides() -> None:
    """Parakeet's (Canary's, Nemotron's) ``(hidden_states)`` -> rows of n − 1 .. −(n − 1), interleaved."""
    model = _parakeet()
    reference_model = copy.deepcopy(model)
    module = model.encode_positions
    assert computed.sinusoid_convention(module) == "relative"
    (judged,) = [c for c in posenc.audit(model).components if c.path == "encode_positions"]
    assert (
        judged.kind == "computed"
        and judged.report.variant.name.startswith("paper")
        and not judged.report.passed
    )
    report = pt.patch(model)
    (made,) = report.replaced
    assert made.kind == "computed" and "−1 .. −1023: the same errors, mirrored" in made.reason
    assert "the model's forward: outputs as before" in made.reason
    states = torch.zeros(2, 5, 32)
    got = model.encode_positions(states)
    assert got.shape == (2, 9, 32) == reference_model.encode_positions(states).shape
    for row, position in ((0, 4), (4, 0), (8, -4), (6, -2)):
        for i in (0, 5, 15):
            sin, cos = reference.sincos(position, i, 32)
            assert float(got[1, row, 2 * i]) == reference.round_to(sin, "float32")
            assert float(got[1, row, 2 * i + 1]) == reference.round_to(cos, "float32")
    assert posenc.audit(model).passed
    assert pt.unpatch(model) == 1 and type(model.encode_positions) is type(module)


def test_nemotrons_relative_positions_with_cached_frames_span_the_whole_key() -> None:
    import transformers as T

    torch.manual_seed(0)
    config = T.NemotronAsrStreamingEncoderConfig(
        hidden_size=32, num_attention_heads=2, num_hidden_layers=1, intermediate_size=64
    )
    model = T.NemotronAsrStreamingEncoder(config).eval()
    original = model.encode_positions
    assert computed.sinusoid_convention(original) == "relative"
    (made,) = pt.patch(model).replaced
    states = torch.zeros(2, 5, 32)
    got, want = model.encode_positions(states, cached_frames=3), original(states, cached_frames=3)
    assert got.shape == want.shape == (2, 15, 32)  # positions 7 .. −7: the chunk and its cached frames
    assert torch.equal(got, model.encode_positions(states, 3))
    assert float((got - want).abs().max()) <= made.tolerance


def _unmirrored() -> nn.Module:
    """Relative rows whose negative positions are off by a hair: not its positive rows mirrored."""
    from transformers.models.parakeet.modeling_parakeet import ParakeetEncoderRelPositionalEncoding as Rel

    class Unmirrored(Rel):
        def forward(self, hidden_states):
            rows = super().forward(hidden_states).clone()
            rows[:, hidden_states.shape[1] :] += 1e-6
            return rows

    return Unmirrored(_parakeet().config)


def test_relative_rows_whose_negative_half_is_not_the_mirror_are_left_alone() -> None:
    model = nn.Sequential()
    model.add_module("pos", _unmirrored())
    (left,) = [c for c in pt.patch(model).components if c.path == "pos"]
    assert (
        not left.replaced
        and "its rows of negative positions are not its positive ones mirrored" in left.reason
    )


class _LatentRope(nn.Module):
    """A diffusers rotary of the same signature (CogView4's): ``(hidden_states)``, a 4-D latent."""

    def forward(self, hidden_states):
        _, _, height, width = hidden_states.shape
        angles = torch.arange(height * width).float()[:, None] / 10000 ** (torch.arange(4) / 4)
        return torch.cos(angles), torch.sin(angles)


def test_a_rotary_of_the_rows_signature_that_refuses_the_probe_is_found_and_not_judged_with_why() -> None:
    model = nn.Sequential()
    model.add_module("rope", _LatentRope())
    (left,) = pt.patch(model).components
    assert left.kind == "computed" and not left.replaced and left.reason.startswith(patching.COMPUTED)
    assert "refuses posenc's probe (ValueError: not enough values to unpack" in left.reason
    (judged,) = posenc.audit(model, samples=16).components
    assert not judged.judged and "refuses posenc's probe" in judged.note


def _rotate_by_position(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """A module-level helper that computes the sinusoids, as V-JEPA 2's ``rotate_queries_or_keys``."""
    angles = positions[:, None] / 10000 ** (torch.arange(x.shape[-1] // 2) / (x.shape[-1] // 2))
    return x * torch.cat([torch.cos(angles), torch.cos(angles)], -1) + x.flip(-1) * torch.cat(
        [torch.sin(angles), torch.sin(angles)], -1
    )


class _RopeAttention(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rotate_by_position(x, torch.arange(x.shape[0]).float())


def test_a_class_whose_helper_function_computes_the_sinusoids_is_found_not_called_nothing() -> None:
    model = nn.Sequential()
    model.add_module("attention", _RopeAttention())
    (component,) = pt.patch(model).components
    assert component.kind == "computed" and not component.replaced and "no reader" in component.reason
    (judged,) = posenc.audit(model, samples=16).components
    assert not judged.judged and "computes its sinusoids in its forward" in judged.note


def test_rt_detrs_grid_sine_is_read_judged_and_exact() -> None:
    from transformers.models.rt_detr.modeling_rt_detr import RTDetrSinePositionEmbedding

    ours = computed.GridSine(16, 20.0)(13, 9, "cpu", torch.float32)[0]
    assert np.array_equal(ours.numpy(), grids.timm_2d((9, 13), 16, temperature=20, interleave_sin_cos=True))
    model = nn.Sequential()
    model.add_module("position_embedding", RTDetrSinePositionEmbedding(16, 20))
    (judged,) = posenc.audit(model, samples=32).components
    assert judged.judged and judged.report.variant.name == "timm-2d"
    (component,) = pt.patch(model).components
    assert component.kind == "computed" and component.difference <= component.tolerance
    assert component.replaced or component.reason == "already exact"
    assert posenc.audit(model, samples=32).passed
    fp32 = model.position_embedding(13, 9, "cpu", torch.float32)
    assert fp32.shape == (1, 117, 16) and torch.equal(fp32[0], ours)


# --- XLNet's relative encoding: a method of the model ----------------------------------------------------


@pytest.mark.parametrize(("attn_type", "bi_data", "clamp_len"), [("bi", False, -1), ("uni", True, 300)])
def test_xlnets_relative_encoding_is_read_replaced_on_the_instance_and_given_back(
    attn_type: str, bi_data: bool, clamp_len: int
) -> None:
    """XLNet computes [sin | cos] of klen .. −qlen + 1 ("uni": .. 0), clamped, the negated rows beside them
    with bi_data, in a method of the model: proven from its rows, shadowed on the instance by posenc's rows
    at the positions it asks for (the same shapes, within float32 code's error; bit for bit posenc's
    encoding), judged before and after, and given back by unpatch."""
    from transformers import XLNetConfig, XLNetModel

    config = XLNetConfig(
        vocab_size=50, d_model=32, n_layer=1, n_head=2, d_inner=64, attn_type=attn_type, bi_data=bi_data
    )
    config.clamp_len = clamp_len
    torch.manual_seed(0)
    model = XLNetModel(config).eval()
    original = model.relative_positional_encoding(7, 400, bsz=4)
    before = posenc.audit(model, samples=64)
    assert before.components[0].judged and not before.passed  # float32 angles
    report = pt.patch(model)
    (component,) = report.components
    assert component.replaced and component.kind == "computed"
    if bi_data:  # its own forward on one sequence is NaN everywhere (bi_data halves the batch): no evidence
        assert component.reason.endswith(
            "forward not compared: its outputs on the probe inputs are not finite anywhere before any swap"
        )  # (was "outputs as before": compared on no value)
    else:
        assert "outputs as before" in component.reason
    exact = model.__dict__[computed.RELATIVE_METHOD]
    assert isinstance(exact, computed.ExactRelative)
    ours = model.relative_positional_encoding(7, 400, bsz=4)
    assert ours.shape == original.shape and ours.dtype == torch.float32
    assert float((ours - original).abs().max()) < 1e-4
    end = -7 if attn_type == "bi" else -1
    positions = torch.arange(400, end, -1)
    positions = positions.clamp(-clamp_len, clamp_len) if clamp_len > 0 else positions
    want = posenc.encode(positions.numpy(), 32, layout="sin_cos", dtype="float32")
    np.testing.assert_array_equal(ours[:, 0].numpy(), want)
    if bi_data:
        np.testing.assert_array_equal(
            ours[:, -1].numpy(), posenc.encode(-positions.numpy(), 32, layout="sin_cos", dtype="float32")
        )
    assert posenc.audit(model, samples=64).passed
    buffer = io.BytesIO()
    torch.save(model, buffer)
    for twin in (copy.deepcopy(model), torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)):
        assert twin.__dict__[computed.RELATIVE_METHOD].module is twin  # its own module, not the original
        assert torch.equal(twin.relative_positional_encoding(7, 400, bsz=4), ours)
    assert pt.patch(model).components[0].reason == "already posenc's (patched)"
    assert pt.unpatch(model) == 1 and computed.RELATIVE_METHOD not in model.__dict__
    assert torch.equal(model.relative_positional_encoding(7, 400, bsz=4), original)


def _exact_rope(position: float, i: int, width: int, theta: float) -> tuple[float, float]:
    """mpmath: cos and sin of position · theta^(−2i/width), each rounded once to float32."""
    angle = mpmath.mpf(position) * mpmath.power(mpmath.mpf(theta), -mpmath.mpf(2 * i) / width)
    return reference.round_to(mpmath.cos(angle), "float32"), reference.round_to(mpmath.sin(angle), "float32")


def _flux_ids() -> torch.Tensor:
    """Flux's ids: 7 text rows at 0, then a 20×24 image grid (axis 0 at 0), float32."""
    h, w = torch.meshgrid(torch.arange(20.0), torch.arange(24.0), indexing="ij")
    image = torch.stack([torch.zeros(480), h.reshape(-1), w.reshape(-1)], dim=-1)
    return torch.cat([torch.zeros(7, 3), image])


def test_flux_rotary_of_position_ids_is_read_proven_replaced_and_exact() -> None:
    flux = pytest.importorskip("diffusers.models.transformers.transformer_flux")
    model = nn.Sequential()
    model.add_module("pos_embed", flux.FluxPosEmbed(theta=10000, axes_dim=[16, 56, 56]))
    ids = _flux_ids()
    before = model.pos_embed(ids)
    (replaced,) = pt.patch(model).replaced
    assert replaced.kind == "computed" and replaced.variant == "axes-rope" and "3 axes" in replaced.reason
    cos, sin = model.pos_embed(ids)
    assert cos.shape == before[0].shape == (487, 128) and cos.dtype == sin.dtype == torch.float32
    assert max(float((a - b).abs().max()) for a, b in zip((cos, sin), before, strict=True)) <= 2**-24
    for row, column in ((0, 5), (7 + 19 * 24 + 23, 16 + 2 * 7), (7 + 13 * 24 + 17, 72 + 2 * 27 + 1)):
        axis, start = (0, 0) if column < 16 else (1, 16) if column < 72 else (2, 72)
        width = (16, 56, 56)[axis]
        want = _exact_rope(float(ids[row, axis]), (column - start) // 2, width, 10000.0)
        assert (float(cos[row, column]), float(sin[row, column])) == want
    audit = posenc.audit(model, samples=64)
    assert audit.passed and [c.layer_type for c in audit.components] == ["axis 0", "axis 1", "axis 2"]
    buffer = io.BytesIO()
    torch.save(model, buffer)
    for twin in (copy.deepcopy(model), torch.load(io.BytesIO(buffer.getvalue()), weights_only=False)):
        assert all(torch.equal(a, b) for a, b in zip(twin.pos_embed(ids), (cos, sin), strict=True))
    assert pt.unpatch(model) == 1 and type(model.pos_embed) is flux.FluxPosEmbed


def test_a_latent_grid_rotary_in_float32_is_made_exact_in_its_calling_form() -> None:
    hunyuan = pytest.importorskip("diffusers.models.transformers.transformer_hunyuan_video")
    model = nn.Sequential()
    model.add_module("rope", hunyuan.HunyuanVideoRotaryPosEmbed(2, 1, [16, 56, 56], 256.0))
    latent = torch.zeros(1, 4, 5, 36, 40)  # 5 frames of an 18×20 grid of 2×2 patches
    before = model.rope(latent)
    judged = posenc.audit(model, samples=64).components
    assert all(c.judged for c in judged) and not all(c.passed for c in judged)  # float32 angles
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and "a latent's grid on 3 axes" in replaced.reason
    cos, sin = model.rope(latent)
    assert cos.shape == before[0].shape == (5 * 18 * 20, 128)
    assert 0 < float((sin - before[1]).abs().max()) < 1e-4
    row = 4 * 360 + 17 * 20 + 19  # (frame, h, w) = (4, 17, 19)
    for column, (axis, start) in ((3, (0, 0)), (16 + 41, (1, 16)), (72 + 10, (2, 72))):
        want = _exact_rope((4, 17, 19)[axis], (column - start) // 2, (16, 56, 56)[axis], 256.0)
        assert (float(cos[row, column]), float(sin[row, column])) == want
    assert posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.rope) is hunyuan.HunyuanVideoRotaryPosEmbed


class _ConcatenatedAxesRope(nn.Module):
    """Flux's attributes and calling form, but each axis's cos/sin as halves [c0, c1, .. | c0, c1, ..]."""

    def __init__(self) -> None:
        super().__init__()
        self.theta, self.axes_dim = 10000, (4, 8)

    def forward(self, ids):
        cos, sin = [], []
        for axis, width in enumerate(self.axes_dim):
            angles = ids[:, axis : axis + 1].double() * 10000.0 ** (
                -torch.arange(0, width, 2).double() / width
            )
            cos.append(torch.cat([angles.cos(), angles.cos()], -1).float())
            sin.append(torch.cat([angles.sin(), angles.sin()], -1).float())
        return torch.cat(cos, -1), torch.cat(sin, -1)


def test_a_rotary_of_ids_in_another_layout_than_its_form_is_left_alone_with_the_reason() -> None:
    model = nn.Sequential()
    model.add_module("pos_embed", _ConcatenatedAxesRope())
    (left,) = pt.patch(model).components
    assert (
        not left.replaced and "not the rotary its attributes name (theta 10000, widths [4, 8])" in left.reason
    )
    with pytest.raises(ValueError, match=r"ids: shape \(3,\); expected \(positions, 2\)"):
        computed.AxesRope(10000.0, (4, 8))(torch.zeros(3))
    with pytest.raises(ValueError, match=r"hidden_states: shape \(1, 4, 6\); expected \(batch, channels\)"):
        computed.LatentRope(256.0, (4, 4), (2, 2))(torch.zeros(1, 4, 6))


def test_wans_tables_of_its_default_theta_are_read_and_replaced_and_another_theta_left_alone() -> None:
    wan = pytest.importorskip("diffusers.models.transformers.transformer_wan")
    model = nn.Sequential()
    model.add_module("rope", wan.WanRotaryPosEmbed(128, (1, 2, 2), 64))  # theta: its __init__'s 10000
    latent = torch.zeros(1, 16, 3, 10, 12)  # 3 frames of a 5×6 grid of patches
    before = model.rope(latent)
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and "theta 10000" in replaced.reason
    cos, sin = model.rope(latent)
    assert cos.shape == before[0].shape == (1, 90, 1, 128) and float((cos - before[0]).abs().max()) <= 2**-24
    row = 2 * 30 + 4 * 6 + 5  # (frame, h, w) = (2, 4, 5); widths (44, 42, 42)
    for column, (axis, start, width) in ((7, (0, 0, 44)), (44 + 9, (1, 44, 42)), (86 + 40, (2, 86, 42))):
        want = _exact_rope((2, 4, 5)[axis], (column - start) // 2, width, 10000.0)
        assert (float(cos[0, row, 0, column]), float(sin[0, row, 0, column])) == want
    assert posenc.audit(model, samples=32).passed
    other = nn.Sequential()
    other.add_module(
        "rope", wan.WanRotaryPosEmbed(128, (1, 2, 2), 64, theta=5000.0)
    )  # kept in its tables only
    (left,) = pt.patch(other).components
    # it keeps no theta: the reason says whose 10000 it is (it said 'its attributes name')
    said = (
        "not the rotary posenc reads it as, theta the default its code takes (it keeps none) (theta 10000, "
    )
    assert not left.replaced and said in left.reason


def test_angles_from_a_learned_projection_of_coordinates_are_declined_as_weights() -> None:
    from transformers import LightGlueConfig
    from transformers.models.lightglue.modeling_lightglue import LightGluePositionalEncoder

    model = nn.Sequential()
    model.add_module("positional_encoder", LightGluePositionalEncoder(LightGlueConfig(descriptor_dim=64)))
    left, weights = pt.patch(model).components  # the module, and its projector's weight: learned
    assert left.kind == "computed" and not left.replaced and "Linear(2 → 8)" in left.reason
    assert left.reason.startswith("its angles are a learned projection of coordinates")
    assert weights.variant == "learned" and not weights.replaced
    judged = posenc.audit(model, samples=16).components[0]
    assert not judged.judged and "frequencies that are weights" in judged.note


# --- DINOv3's rotary of grid coordinates (timm's RotaryEmbeddingDinoV3) -----------------------------------

DINOV3_OPTIONS = {
    "dinov3": {},
    "min-offset": {"normalize_coords": "min", "grid_offset": 0.25},
    "xy-pairs": {"grid_indexing": "xy", "rotate_half": False},
    "periods": {"temperature": None, "min_period": 0.5, "max_period": 50.0},
}


@pytest.mark.parametrize("options", [{}, {"normalize_coords": "max", "grid_indexing": "xy"}])
def test_dinov3_rope_is_correctly_rounded_at_its_coordinates(options: dict) -> None:
    """mpmath: sin and cos of c · 2π · 100^(−i/(dim/4)) (2π the float64 nearest it), c the float64
    coordinate 2·(k + ½)/n − 1 of each axis, each rounded once; the axis order of grid_indexing."""
    mpmath.mp.prec = 120
    dim, shape = 16, (3, 5)
    values = grids.dinov3_rope(shape, dim, **options)
    coordinates = grids.dinov3_coordinates(
        shape, normalize_coords=options.get("normalize_coords", "separate")
    )
    first = 0 if options.get("grid_indexing", "ij") == "ij" else 1
    for h, w in [(0, 0), (1, 3), (2, 4)]:
        cell = (h, w)
        for column in range(dim // 2):  # the dim/2 sines: the first axis' dim/4, then the second's
            axis = first if column < dim // 4 else 1 - first
            c = mpmath.mpf(float(coordinates[axis][cell[axis]]))
            omega = mpmath.mpf(2 * math.pi) * mpmath.power(100, -mpmath.mpf(column % (dim // 4)) / (dim // 4))
            row = values[h * shape[1] + w]
            assert row[column] == reference.round_to(mpmath.sin(c * omega), "float32")
            assert row[dim + column] == reference.round_to(mpmath.cos(c * omega), "float32")
    assert np.array_equal(values[:, : dim // 2], values[:, dim // 2 : dim])  # the halves layout: [s | s]


def _rope_model(kind: str, **options):
    """A model holding timm's rotary class ``kind`` of 32 dims as ``rope``."""
    from tests.support.timm_sincos import pos_embed_sincos

    model = nn.Sequential()
    model.add_module("rope", getattr(pos_embed_sincos(), kind)(32, **options))
    return model


def _dinov3_model(**options):
    return _rope_model("RotaryEmbeddingDinoV3", feat_shape=[6, 9], **options)


@pytest.mark.parametrize("name", list(DINOV3_OPTIONS))
def test_a_dinov3_rope_is_judged_patched_exact_and_given_back(name: str) -> None:
    options = DINOV3_OPTIONS[name]
    model = _dinov3_model(**options)
    original = model.rope
    before = original.get_embed().clone()
    judged = posenc.audit(model, samples=32)
    (component,) = judged.components
    assert component.kind == "computed" and component.judged and not component.passed  # its float32 code
    assert [f.kind for f in component.report.findings] == ["float32"]
    assert judged.fix == "posenc.torch.patch(model)"

    report = pt.patch(model)
    (replaced,) = report.replaced
    assert replaced.variant == "dinov3-rope" and 0 < replaced.difference <= replaced.tolerance
    assert isinstance(model.rope, computed.DinoV3Rope)
    exact = grids.dinov3_rope((6, 9), 32, **options)
    assert np.array_equal(model.rope.get_embed().numpy(), exact)  # bit for bit: each value rounded once
    assert np.array_equal(model.rope.get_embed((4, 3)).numpy(), grids.dinov3_rope((4, 3), 32, **options))
    assert (model.rope.get_embed() - before).abs().max() <= replaced.tolerance
    x = torch.randn(2, 32, 6, 9)
    assert torch.allclose(model.rope(x), original(x), atol=1e-5)  # its rotation, as timm's
    batch = model.rope.get_batch_embeds([(2, 3), (6, 9)], seq_len=60)
    assert batch.shape == (2, 60, 64) and not batch[0, 6:].any()
    assert posenc.audit(model, samples=32).passed
    copy.deepcopy(model)
    pt.unpatch(model)
    assert model.rope is original and torch.equal(original.get_embed(), before)


def test_a_dinov3_rope_keeps_its_models_dtype_and_device() -> None:
    model = _dinov3_model().to(torch.bfloat16)
    pt.patch(model)
    embed = model.rope.get_embed()
    assert embed.dtype == torch.bfloat16  # its cache's dtype, each value rounded once from the exact one
    want = grids.dinov3_rope((6, 9), 32, dtype="bfloat16")
    assert np.array_equal(embed.float().numpy(), want.astype(np.float32))
    assert model.rope.get_embed((2, 2)).dtype == torch.float32  # another grid: float32, as timm's
    model.to(torch.float32)
    assert model.rope.get_embed().dtype == torch.float32


def test_a_dinov3_rope_of_other_values_is_declined() -> None:
    model = _dinov3_model()
    model.rope.temperature = 101.0  # its attributes no longer say what it computes
    (left,) = pt.patch(model).components
    assert not left.replaced and left.reason.startswith("not DINOv3's rotary its attributes name")
    assert not posenc.audit(model, samples=16).components[0].judged


def test_a_dinov3_rope_that_draws_coordinates_in_training_keeps_its_draws() -> None:
    """Coordinate augmentation (Sapiens2's, timm's jitter): proven and audited on its inference values,
    patched in the model's mode; in training the original's own random coordinates, in eval posenc's."""
    model = _dinov3_model(jitter_coords=2.0).eval()
    original = model.rope
    before = original.get_embed().clone()
    (replaced,) = pt.patch(model).replaced
    assert "in training, its original's own random coordinates" in replaced.reason
    assert not model.rope.training and not original.training  # the model's mode, not a fresh module's
    assert np.array_equal(model.rope.get_embed().numpy(), grids.dinov3_rope((6, 9), 32))
    model.train()
    drawn = [model.rope.get_embed() for _ in range(2)]
    assert not torch.equal(*drawn) and not original.training  # its draws, its mode put back
    model.eval()
    assert posenc.audit(model, samples=16).passed
    pt.unpatch(model)
    assert model.rope is original and torch.equal(original.get_embed(), before)


def test_frequencies_held_as_a_trained_parameter_are_declined_as_weights() -> None:
    from tests.support.timm_sincos import pos_embed_sincos

    model = nn.Sequential()
    model.add_module(
        "rope", pos_embed_sincos().RotaryEmbeddingMixed(64, depth=2, num_heads=2, feat_shape=[4, 4])
    )
    components = pt.patch(model).components
    (left,) = [c for c in components if c.path == "rope"]
    assert left.kind == "computed" and not left.replaced
    assert left.reason.startswith("its frequencies are a trained parameter (freqs: (2, 2, 2, 16))")
    judged = posenc.audit(model, samples=16)
    assert not any(c.judged for c in judged.components if c.path == "rope")


# --- timm's axial rotary of an index grid (RotaryEmbeddingCat: EVA-02's, Perception Encoder's) ------------

#: EVA-02's (a reference grid), Perception Encoder's (offset 1, xy), and the halves layout without one.
TIMM_ROPE_OPTIONS = {
    "eva02": {"ref_feat_shape": (4, 4)},
    "pe": {"ref_feat_shape": (8, 6), "grid_offset": 1.0, "grid_indexing": "xy"},
    "halves": {"rotate_half": True, "temperature": 100.0},
}


def test_timm_rope_is_correctly_rounded_at_its_coordinates() -> None:
    """mpmath: sin and cos of c · 10000^(−i/(dim/4)), c each axis' coordinate as timm forms it in float32
    ((k + 1) / n · r: EVA-02's reference grid, Perception Encoder's offset), each rounded once; w first
    (xy)."""
    mpmath.mp.prec = 120
    dim, shape, options = 16, (3, 5), TIMM_ROPE_OPTIONS["pe"]
    values = grids.timm_rope(shape, dim, **options)
    coordinates = grids.timm_rope_coordinates(shape, grid_offset=1.0, ref_feat_shape=(8, 6))
    assert coordinates[1][2] == float(np.float32(np.float32(3.0) / np.float32(5.0)) * np.float32(6.0))
    for h, w in [(0, 0), (1, 3), (2, 4)]:
        cell = (h, w)
        for column in range(dim // 2):  # the dim/2 sines: w's dim/4, then h's; pair by pair in the row
            axis = 1 if column < dim // 4 else 0
            c = mpmath.mpf(float(coordinates[axis][cell[axis]]))
            omega = mpmath.power(10000, -mpmath.mpf(column % (dim // 4)) / (dim // 4))
            row = values[h * shape[1] + w]
            sine = reference.round_to(mpmath.sin(c * omega), "float32")
            assert row[2 * column] == row[2 * column + 1] == sine
            assert row[dim + 2 * column] == reference.round_to(mpmath.cos(c * omega), "float32")


def _timm_rope_model(feat_shape=(6, 9), **options):
    shape = None if feat_shape is None else list(feat_shape)
    return _rope_model("RotaryEmbeddingCat", in_pixels=False, feat_shape=shape, **options)


@pytest.mark.parametrize("name", list(TIMM_ROPE_OPTIONS))
def test_a_timm_axial_rope_is_judged_patched_exact_and_given_back(name: str) -> None:
    options = TIMM_ROPE_OPTIONS[name]
    model = _timm_rope_model(**options)
    original = model.rope
    before = original.get_embed().clone()
    judged = posenc.audit(model, samples=32)
    (component,) = judged.components  # its cache of its grid is not a table of its own
    assert component.kind == "computed" and component.judged

    report = pt.patch(model)
    (replaced,) = report.replaced
    assert replaced.variant == "timm-rope" and replaced.difference <= replaced.tolerance
    assert isinstance(model.rope, computed.TimmRope)
    exact = grids.timm_rope((6, 9), 32, **options)
    assert np.array_equal(model.rope.get_embed().numpy(), exact)  # bit for bit: each value rounded once
    assert np.array_equal(model.rope.get_embed((4, 3)).numpy(), exact)  # a cache: its grid's, as timm's
    assert (model.rope.get_embed() - before).abs().max() <= replaced.tolerance
    x = torch.randn(2, 32, 6, 9)
    assert torch.allclose(model.rope(x), original(x), atol=1e-5)  # its rotation, as timm's
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model.rope is original and torch.equal(original.get_embed(), before)


def test_a_timm_axial_rope_of_any_grid_is_computed_exactly_for_each() -> None:
    model = _timm_rope_model(feat_shape=None, ref_feat_shape=(4, 4))  # a dynamic image size: no cache
    original = model.rope
    (replaced,) = pt.patch(model).replaced
    for shape in [(5, 7), (4, 4), (16, 16)]:
        mine = model.rope.get_embed(shape)
        assert np.array_equal(mine.numpy(), grids.timm_rope(shape, 32, ref_feat_shape=(4, 4)))
        assert torch.allclose(mine, original.get_embed(list(shape)), atol=replaced.tolerance)
    batch = model.rope.get_batch_embeds([(2, 3), (6, 9)], seq_len=60)
    assert batch.shape == (2, 60, 64) and not batch[0, 6:].any()


def test_a_timm_axial_rope_of_pixel_bands_is_declined_with_its_reason() -> None:
    model = _rope_model("RotaryEmbeddingCat", in_pixels=True, feat_shape=[6, 9])
    (left,) = pt.patch(model).components
    assert not left.replaced and "pixel frequencies" in left.reason
    (component,) = posenc.audit(model, samples=16).components
    assert not component.judged and "pixel frequencies" in component.note


# --- V-JEPA 2's rotary, computed in its attention layer -------------------------------------------------


def _vjepa2_attention():
    from transformers import VJEPA2Config
    from transformers.models.vjepa2.modeling_vjepa2 import VJEPA2RopeAttention

    torch.manual_seed(0)
    return VJEPA2RopeAttention(VJEPA2Config(), hidden_size=128, num_attention_heads=2).eval()


def test_vjepa2_rotary_is_judged_patched_exact_and_given_back() -> None:
    model = nn.Sequential()
    model.add_module("attention", _vjepa2_attention())
    attention = model.attention
    hidden = torch.randn(1, 40, 128)
    before = attention(hidden)[0]
    judged = posenc.audit(model, samples=32)
    assert [c.layer_type for c in judged.components] == ["axis 0", "axis 1", "axis 2"]
    assert all(c.judged and not c.passed for c in judged.components)  # its float32 angles

    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and replaced.difference <= replaced.tolerance
    assert isinstance(attention.__dict__["apply_rotary_embeddings"], computed.ExactAxesRotation)
    tables = computed.axes_rotation_rows(attention, 300)  # its rotation now gives posenc's values
    for table in tables:  # 20 channels a block: 10 frequencies of base 10000
        want = posenc.encode(np.arange(300), 20, layout="sin_cos", dtype="float32")
        assert np.array_equal(table.float().numpy(), want)
    assert torch.allclose(attention(hidden)[0], before, atol=1e-5)
    assert posenc.audit(model, samples=32).passed
    assert pt.patch(model).components[0].reason == "already posenc's (patched)"
    copy.deepcopy(model)
    assert pt.unpatch(model) == 1
    assert "apply_rotary_embeddings" not in attention.__dict__ and torch.equal(attention(hidden)[0], before)


def test_a_vjepa2_like_rotary_of_other_angles_is_declined() -> None:
    attention = _vjepa2_attention()
    own = type(attention).apply_rotary_embeddings

    def scaled(qk, pos_ids):  # its angles times 10^(1/3): not the rotary V-JEPA 2's form names
        return own(attention, qk, tuple(p * 10.0 ** (1 / 3) for p in pos_ids))

    attention.apply_rotary_embeddings = scaled
    type_name = type(attention).__name__
    model = nn.Sequential()
    model.add_module("attention", attention)
    (left,) = pt.patch(model).components
    assert left.variant == type_name and not left.replaced
    assert left.reason.startswith("not V-JEPA 2's rotary (base 10000, widths [20, 20, 20])")


# --- Qwen-Image's complex rotary tables, computed at init ------------------------------------------------


def test_qwen_image_complex_tables_are_read_patched_exact_and_given_back() -> None:
    from diffusers.models.transformers.transformer_qwenimage import QwenEmbedRope

    model = nn.Sequential()
    model.add_module("pos_embed", QwenEmbedRope(10000, [16, 56, 56], scale_rope=True))
    original = model.pos_embed
    before = original([(1, 4, 6)], max_txt_seq_len=5, device=torch.device("cpu"))
    reading = computed.read_polar_tables(original)
    assert [b.positions[[0, -1]].tolist() for b in reading.blocks[::3]] == [[0, 4095], [-4096, -1]]
    judged = posenc.audit(model, samples=32)
    assert [c.layer_type for c in judged.components] == ["axis 0", "axis 1", "axis 2"]
    assert not judged.passed  # its float32 angles

    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and 0 < replaced.difference <= replaced.tolerance
    patched = model.pos_embed
    assert type(patched) is QwenEmbedRope and patched is not original  # its own code, posenc's values
    for block in reading.blocks:
        values = reading.values(patched, block)
        want = posenc.encode(block.positions, block.width, layout="sin_cos", dtype="float32")
        half = block.width // 2
        assert np.array_equal(values.imag.numpy(), want[:, :half])
        assert np.array_equal(values.real.numpy(), want[:, half:])
    after = patched([(1, 4, 6)], max_txt_seq_len=5, device=torch.device("cpu"))
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(after, before, strict=True))
    assert posenc.audit(model, samples=32).passed
    assert pt.patch(model).components[0].reason == "already posenc's (patched)"
    copy.deepcopy(model)
    pt.unpatch(model)
    assert model.pos_embed is original


def test_qwen_image_tables_of_another_theta_or_no_positions_are_declined() -> None:
    from diffusers.models.transformers.transformer_qwenimage21 import QwenImage21Rope

    rope = QwenImage21Rope(10000, [16, 24, 24])  # a table per axis: positions 0 .. 8191, then −1024 .. −1
    reading = computed.read_polar_tables(rope)
    for block in reading.blocks:
        assert block.positions[[0, 8191, 8192, -1]].tolist() == [0, 8191, -1024, -1]
    assert isinstance(computed.prove_polar_tables(rope, reading), tuple)
    rope.theta = 20000  # its attributes no longer say what its tables hold
    model = nn.Sequential()
    model.add_module("rope", rope)
    (left,) = pt.patch(model).components
    assert not left.replaced and left.reason.startswith("not the rotary its attributes name (theta 20000")
    rope.theta = 10000
    rope.freqs = [torch.polar(torch.ones(4, w // 2), torch.rand(4, w // 2) * 3) for w in (16, 24, 24)]
    (left,) = pt.patch(model).components
    assert not left.replaced and "not of integer positions" in left.reason


# --- 1-D sinusoids computed by a method ---------------------------------------------------------------


def test_gemma3n_audio_timing_signal_is_identified_shadowed_exact_and_given_back() -> None:
    from transformers import Gemma3nAudioConfig
    from transformers.models.gemma3n.modeling_gemma3n import Gemma3nAudioRelativePositionEmbedding

    config = Gemma3nAudioConfig(hidden_size=64, conf_num_attention_heads=2)
    model = nn.Sequential()
    model.add_module("relative", Gemma3nAudioRelativePositionEmbedding(config))
    module = model.relative
    positions = torch.arange(12, -1, -1)
    before = module._get_timing_signal_1d_pos(positions, torch.float32)
    components = pt.patch(model).components
    (replaced,) = [c for c in components if c.path == "relative"]
    assert replaced.replaced and replaced.variant == "tensor2tensor"  # ω_i = 10000^(−i/(n − 1))
    assert [c.variant for c in components if c.path != "relative"] == ["learned"]  # pos_proj: not judged
    after = module._get_timing_signal_1d_pos(positions, torch.bfloat16)
    assert after.shape == before.shape == (1, 13, 64) and after.dtype == torch.bfloat16
    want = posenc.presets.get("tensor2tensor").encode(positions.numpy(), 64, dtype="bfloat16")
    assert np.array_equal(after[0].float().numpy(), want.astype(np.float32))
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert "_get_timing_signal_1d_pos" not in module.__dict__
    assert torch.equal(module._get_timing_signal_1d_pos(positions, torch.float32), before)


def test_grounding_dino_text_positions_are_proven_shadowed_and_exact() -> None:
    from transformers import GroundingDinoConfig
    from transformers.models.grounding_dino.modeling_grounding_dino import GroundingDinoEncoderLayer

    model = nn.Sequential()
    model.add_module("layer", GroundingDinoEncoderLayer(GroundingDinoConfig(d_model=32)))
    layer = model.layer
    features = torch.zeros(2, 5, 32)
    before = layer.get_text_position_embeddings(features, None, None)
    judged = posenc.audit(model, samples=32)
    assert judged.components[0].judged and not judged.passed  # its float32 angles at 2π·p·ω
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "generic" and "scale=6.28318" in replaced.reason
    after = layer.get_text_position_embeddings(features, None, None)
    options = {"scale": 2 * math.pi, "layout": "interleaved"}
    assert np.array_equal(after[1].numpy(), posenc.encode(np.arange(5), 32, **options))
    assert torch.allclose(after, before, atol=1e-5) and after.shape == (2, 5, 32)
    given = torch.ones(2, 5, 32)
    assert layer.get_text_position_embeddings(features, given, None) is given  # passed through, as its own
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert torch.equal(layer.get_text_position_embeddings(features, None, None), before)


def test_flux_rotation_matrices_of_batched_ids_are_read_and_made_exact() -> None:
    """Black Forest Labs' form of Flux's rotary (PRX's EmbedND): rotation matrices of batched ids."""
    from diffusers.models.transformers.transformer_prx import PRXEmbedND

    model = nn.Sequential()
    model.add_module("pe", PRXEmbedND(64, 10000, [16, 24, 24]))
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(3.0), torch.arange(5.0), indexing="ij"), -1)
    ids = ids.reshape(1, -1, 3)
    before = model.pe(ids)
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and isinstance(model.pe, computed.AxesRopeMatrix)
    after = model.pe(ids)
    assert after.shape == before.shape == (1, 1, 15, 32, 2, 2)
    assert torch.allclose(after, before, atol=1e-6)
    want = posenc.encode(np.arange(5), 24, layout="sin_cos")  # the last axis: its w positions
    assert np.array_equal(after[0, 0, :5, 20:, 1, 0].numpy(), want[:, :12])  # sin, exact
    assert torch.equal(after[..., 0, 1], -after[..., 1, 0])
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert torch.equal(model.pe(ids), before)


def test_hidream_rotation_matrices_sequence_first_are_read_and_made_exact() -> None:
    """HiDream-I1's EmbedND: the same matrices, the heads' 1 after the sequence ``(B, S, 1, ...)``; and
    Stable Audio's Fourier features (a trained vector of frequencies): not judged, with that reason."""
    from diffusers.models.transformers.transformer_hidream_image import HiDreamImageEmbedND
    from diffusers.pipelines.stable_audio.modeling_stable_audio import StableAudioPositionalEmbedding

    model = nn.Sequential()
    model.add_module("pe", HiDreamImageEmbedND(10000, [16, 24, 24]))
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(3.0), torch.arange(5.0), indexing="ij"), -1)
    ids = ids.reshape(1, -1, 3).repeat(2, 1, 1)
    before = model.pe(ids)
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant == "axes-rope" and isinstance(model.pe, computed.AxesRopeMatrix)
    assert model.pe.heads == 2
    after = model.pe(ids)
    assert after.shape == before.shape == (2, 15, 1, 32, 2, 2)
    assert torch.allclose(after, before, atol=1e-6)
    want = posenc.encode(np.arange(5), 24, layout="sin_cos")
    assert np.array_equal(after[1, :5, 0, 20:, 1, 0].numpy(), want[:, :12])
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert torch.equal(model.pe(ids), before)
    fourier = nn.Sequential(StableAudioPositionalEmbedding(16))
    (left,) = pt.patch(fourier).components
    assert not left.replaced and "trained parameter (weights: (8,))" in left.reason
    (judged,) = posenc.audit(fourier, samples=16).components
    assert judged.report is None and "learned Fourier features" in judged.note


def test_easyanimate_rotary_of_a_crop_region_is_read_and_made_exact() -> None:
    """EasyAnimate's rotary (diffusers' get_3d_rotary_pos_embed of a latent's grid resized and centred on a
    base grid): read, proven, audited along its frames, patched; each value at the region's real positions
    (formed in float64) against mpmath."""
    from diffusers.models.transformers.transformer_easyanimate import EasyAnimateRotaryPosEmbed

    model = nn.Sequential()
    model.add_module("rope", EasyAnimateRotaryPosEmbed(2, 32))
    latent = torch.zeros(1, 4, 3, 10, 14)  # 3 frames of 5 × 7 patches
    before = model.rope(latent)
    exact = computed.rope_on_axes(model.rope)
    assert isinstance(exact, computed.CropRope) and exact.axes_dim == (8, 12, 12)
    wrong = computed.CropRope(32, 2, theta=10000.0 * 1.001)
    assert computed.prove_rope_on_axes(model.rope, wrong).startswith(
        "not the rotary posenc reads it as, theta the default its code takes (it keeps none)"
    )
    before_audit = posenc.audit(model, samples=32)
    assert [c.note.split(" (")[0] for c in before_audit.components] == ["axis 0"]
    (replaced,) = pt.patch(model).replaced
    assert isinstance(model.rope, computed.CropRope) and "resized and centred" in replaced.reason
    cos, sin = model.rope(latent)
    assert cos.shape == before[0].shape == (105, 32)
    assert torch.allclose(cos, before[0], atol=1e-5) and torch.allclose(sin, before[1], atol=1e-5)
    (top, left), (bottom, right) = exact.region(5, 7)  # on the 30 × 45 base grid: 30 × 42, left 2 (rounded)
    assert (top, left, bottom, right) == (0, 2, 30, 44)
    for index in (0, 8, 104):
        f, i, j = index // 35, index // 7 % 5, index % 7
        points = [mpmath.mpf(f), top + i * (mpmath.mpf(bottom) * 4 / 5 - top) / 4]
        points.append(left + j * (mpmath.mpf(right) * 6 / 7 - left) / 6)
        for column, (axis, k) in enumerate(
            [(0, k) for k in range(4)] + [(a, k) for a in (1, 2) for k in range(6)]
        ):
            width = exact.axes_dim[axis]
            with mpmath.workdps(40):
                angle = points[axis] * mpmath.power(10000, -mpmath.mpf(2 * k) / width)
                want = [reference.round_to(g(angle), "float32") for g in (mpmath.cos, mpmath.sin)]
            assert [float(cos[index, 2 * column]), float(sin[index, 2 * column + 1])] == want
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert all(torch.equal(a, b) for a, b in zip(model.rope(latent), before, strict=True))


def test_framepack_rotary_of_frame_indices_is_read_and_made_exact() -> None:
    from diffusers.models.transformers.transformer_hunyuan_video_framepack import (
        HunyuanVideoFramepackRotaryPosEmbed,
    )

    model = nn.Sequential()
    model.add_module("rope", HunyuanVideoFramepackRotaryPosEmbed(2, 1, [16, 24, 24], theta=256.0))
    frames = torch.tensor([0.0, 9.0, 10.0])  # clean latents' indices, then the frames to denoise
    before = model.rope(frames, 8, 6, "cpu")
    (replaced,) = pt.patch(model).replaced
    assert isinstance(model.rope, computed.FramesRope) and "frames and their grid" in replaced.reason
    cos, sin = model.rope(frames, 8, 6, "cpu")
    assert cos.shape == before[0].shape == (3 * 4 * 3, 64)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip((cos, sin), before, strict=True))
    want = posenc.encode(frames.numpy(), 16, base=256.0, layout="sin_cos")  # the frame axis' 8 frequencies
    assert np.array_equal(sin[::12, 0:16:2].numpy(), want[:, :8])
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert type(model.rope) is HunyuanVideoFramepackRotaryPosEmbed


def test_dits_static_timestep_embedding_is_identified_shadowed_and_exact() -> None:
    """DiT's TimestepEmbedder (Z-Image's): a static ``timestep_embedding(t, dim, max_period)`` then an MLP."""
    from diffusers.models.transformers.transformer_z_image import TimestepEmbedder

    model = nn.Sequential()
    model.add_module("t_embedder", TimestepEmbedder(32, frequency_embedding_size=64))
    embedder = model.t_embedder
    t = torch.tensor([0.0, 0.25, 999.0])
    before = embedder(t)
    (replaced,) = pt.patch(model).replaced
    assert replaced.variant.startswith("diffusers-timestep(flip_sin_to_cos=True")
    frequencies = embedder.timestep_embedding(t, 64)
    want = posenc.encode(t.numpy().astype(np.float64), 64, layout="cos_sin")
    assert np.array_equal(frequencies.numpy(), want)
    assert embedder.timestep_embedding(t, 16, max_period=100).shape == (3, 16)  # any width and base
    assert torch.allclose(embedder(t), before, atol=1e-5)
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert "timestep_embedding" not in embedder.__dict__ and torch.equal(embedder(t), before)


def test_lumina2_complex_tables_per_axis_are_read_and_made_exact() -> None:
    from diffusers.models.transformers.transformer_lumina2 import Lumina2RotaryPosEmbed

    model = nn.Sequential()
    model.add_module("rope", Lumina2RotaryPosEmbed(10000, [16, 24, 24], axes_lens=[64, 32, 32]))
    reading = computed.read_polar_tables(model.rope)
    assert [(b.name, b.item, b.positions[-1]) for b in reading.blocks] == [
        ("freqs_cis", 0, 63),
        ("freqs_cis", 1, 31),
        ("freqs_cis", 2, 31),
    ]
    (component,) = pt.patch(model).components
    assert component.kind == "computed" and component.difference <= component.tolerance  # float64 code
    patched = model.rope
    for block in reading.blocks:
        values = reading.values(patched, block)
        want = posenc.encode(block.positions, block.width, layout="sin_cos", dtype="float32")
        assert np.array_equal(values.imag.numpy(), want[:, : block.width // 2])
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert type(model.rope) is Lumina2RotaryPosEmbed


def _dinov3_vit() -> nn.Module:
    import transformers as T

    torch.manual_seed(0)
    config = T.DINOv3ViTConfig(
        hidden_size=64, num_attention_heads=2, num_hidden_layers=1, intermediate_size=128, image_size=64
    )
    return T.DINOv3ViTModel(config).eval()


def test_transformers_dinov3_rotary_is_proven_patched_exact_and_keeps_its_training_draws() -> None:
    model = _dinov3_vit()
    original = copy.deepcopy(model)
    (before,) = [c for c in posenc.audit(model).components if c.path == "rope_embeddings"]
    assert before.kind == "rotary" and before.report is not None and not before.report.passed
    report = pt.patch(model)
    (made,) = report.replaced
    assert made.variant == "dinov3-rope" and "in training, its own forward (random coordinates" in made.reason
    assert "the model's forward: outputs as before" in made.reason
    (after,) = [c for c in posenc.audit(model).components if c.path == "rope_embeddings"]
    assert after.passed and after.report.max_abs == 0
    pixels = torch.randn(1, 3, 48, 80, generator=torch.Generator().manual_seed(1))
    cos, sin = model.rope_embeddings(pixels)  # a 3×5 grid: the exact values, cell by cell
    want = torch.from_numpy(grids.dinov3_rope((3, 5), 32, temperature=100.0)).float()
    assert torch.equal(torch.cat([sin, cos], -1), want)
    with torch.no_grad():
        torch.testing.assert_close(
            model(pixels).last_hidden_state, original(pixels).last_hidden_state, atol=1e-4, rtol=0
        )
    # in training its config draws random coordinates: the original's own forward, the same draw
    model.train()
    original.train()
    torch.manual_seed(5)
    drawn = model.rope_embeddings(pixels)
    torch.manual_seed(5)
    assert all(torch.equal(a, b) for a, b in zip(drawn, original.rope_embeddings(pixels), strict=True))
    model.eval()
    assert pt.unpatch(model) == 1 and type(model.rope_embeddings) is type(original.rope_embeddings)
    assert not model.rope_embeddings.training  # given back in the model's mode, whatever ran in training


def test_sinusoids_inside_a_models_own_code_are_found_and_declined_with_where() -> None:
    """T5 FiLM's decoder embeds its noise time with get_timestep_embedding in its own forward: found, not
    judged, and the reason names the method and the helper (posenc swaps modules, not code); a PatchEmbed
    that holds no positional embedding (pos_embed None) is not found."""
    from diffusers.models.embeddings import PatchEmbed
    from diffusers.models.transformers.t5_film_transformer import T5FilmDecoder

    model = T5FilmDecoder(
        input_dims=8, targets_length=16, d_model=32, num_layers=1, num_heads=2, d_kv=8, d_ff=32
    )
    found = [(path, kind) for path, kind, _ in patching.find(model)]
    assert ("", "computed") in found
    report = pt.patch(model)
    (root,) = [c for c in report.components if c.path == ""]
    assert not root.replaced and "its forward calls get_timestep_embedding" in root.reason
    (judged,) = [c for c in posenc.audit(model, samples=16).components if c.path == ""]
    assert judged.report is None and "posenc swaps positional modules" in judged.note
    plain = PatchEmbed(height=8, width=8, patch_size=2, in_channels=4, embed_dim=16, pos_embed_type=None)
    assert patching.find(plain) == []
    # U-ViT's PatchEmbed built with use_pos_embed=False holds nothing its __init__ computes: the branch that
    # calls get_2d_sincos_pos_embed never ran (UniDiffuser was declined as "its __init__ calls" it)
    from diffusers.pipelines.deprecated.unidiffuser.modeling_uvit import PatchEmbed as UVitPatchEmbed

    off = UVitPatchEmbed(height=8, width=8, patch_size=2, in_channels=4, embed_dim=16, use_pos_embed=False)
    assert patching.inside_code(off) is None and patching.find(off) == []


def test_chronoedit_rotary_with_its_two_frame_skip_is_read_and_made_exact() -> None:
    """ChronoEdit's rotary (Wan's tables, a latent of two frames at positions 0 and temporal_skip_len − 1):
    read with Wan's widths of its head where its forward splits its tables the same, proven, and equal to
    the original on a two-frame latent and a longer one; a head whose split cuts across axes is not read."""
    from diffusers.models.transformers.transformer_chronoedit import ChronoEditRotaryPosEmbed

    module = ChronoEditRotaryPosEmbed(96, (1, 2, 2), 256, temporal_skip_len=6)
    exact = computed.rope_on_axes(module)
    assert isinstance(exact, computed.SkipRope) and exact.axes_dim == (32, 32, 32) and exact.skip == 6
    assert computed.prove_rope_on_axes(module, exact)[0] <= 2.0**-20
    assert (
        computed.rope_on_axes(ChronoEditRotaryPosEmbed(64, (1, 2, 2), 256)) is None
    )  # [22, 21, 21] vs 24/20/20
    model = nn.Sequential(module)
    latents = [torch.zeros(1, 4, 2, 6, 8), torch.zeros(1, 4, 5, 2, 4)]
    wanted = [module(x) for x in latents]
    assert [c.variant for c in pt.patch(model).replaced] == ["axes-rope"]
    for x, want in zip(latents, wanted, strict=True):
        got = model[0](x)
        assert all(
            g.shape == w.shape and float((g - w).abs().max()) <= 2.0**-20
            for g, w in zip(got, want, strict=True)
        )
    frames = model[0](latents[0])[1][0, :, 0, 0].reshape(2, -1)[
        :, 0
    ]  # sin of the first frequency, frame axis
    assert frames.tolist() == [0.0, pytest.approx(math.sin(5.0), abs=2e-7)]
    pt.unpatch(model)
    assert model[0] is module


@pytest.mark.parametrize("form", ["helios", "sana-wm"])
def test_helios_and_sana_wm_rotaries_are_read_and_made_exact(form: str) -> None:
    """Helios' rotary of batched frame indices (one tensor: cos's channels, then sin's) and Sana-WM's complex
    rotary of a grid (Wan's widths, cos + i·sin): read, proven, equal to the original within float32
    rounding after the patch, posenc's values those of AxesRope at the same ids, and given back."""
    if form == "helios":
        from diffusers.models.transformers.transformer_helios import HeliosRotaryPosEmbed

        module, args = (
            HeliosRotaryPosEmbed((16, 24, 24), 10000.0),
            (torch.tensor([[0.0, 1.0, 5.0]]), 4, 6, "cpu"),
        )
        kind = computed.HeliosRope
    else:
        from diffusers.models.transformers.transformer_sana_wm import SanaWMRotaryPosEmbed

        module, args, kind = (
            SanaWMRotaryPosEmbed(64, (1, 2, 2), 256),
            ((3, 4, 5), "cpu"),
            computed.ComplexRope,
        )
    exact = computed.rope_on_axes(module)
    assert type(exact) is kind
    difference, allowed = computed.prove_rope_on_axes(module, exact)
    assert difference <= allowed
    model = nn.Sequential(module)
    want = module(*args)
    assert [c.variant for c in pt.patch(model).replaced] == ["axes-rope"]
    got = model[0](*args)
    assert got.shape == want.shape and got.dtype == want.dtype and float((got - want).abs().max()) <= 2.0**-20
    if form == "helios":  # the last frame (index 5), patch (3, 2)
        cos, sin = computed.AxesRope(10000.0, exact.axes_dim)(torch.tensor([[5.0, 3.0, 2.0]]))
        assert torch.equal(got[0, :, 2, 3, 2], torch.cat([cos[0], sin[0]]))
    else:  # the last patch, (2, 3, 4)
        cos, sin = computed.AxesRope(10000.0, exact.axes_dim)(torch.tensor([[2.0, 3.0, 4.0]]))
        assert torch.equal(got[0, 0, -1], torch.complex(cos[0, 0::2], sin[0, 0::2]))
    pt.unpatch(model)
    assert model[0] is module


def test_a_sinusoid_run_through_its_own_layers_is_declined_with_them_named() -> None:
    """Krea 2's timestep embedding computes its sinusoid and runs linear_1 and linear_2 on it in one forward:
    not judged, the layers named, the module left as it is."""
    from diffusers.models.transformers.transformer_krea2 import Krea2TimestepEmbedding

    module = Krea2TimestepEmbedding(32, 16)
    model = nn.Sequential(module)
    (component,) = pt.patch(model).components
    assert (
        not component.replaced
        and "its forward computes a sinusoid and runs its own layers on it (linear_1, linear_2)"
        in component.reason
    )
    assert model[0] is module
    (judged,) = posenc.audit(model, samples=16).components
    assert judged.report is None and "linear_1, linear_2" in judged.note


def _omdet_encoder() -> nn.Module:
    """OmDet-Turbo's hybrid encoder: RT-DETR's first 2-D sine, a static method it calls in forward."""
    import transformers as T

    torch.manual_seed(0)
    config = T.OmDetTurboConfig(
        use_timm_backbone=False,
        backbone_config=T.ResNetConfig(),
        encoder_hidden_dim=32,
        encoder_dim_feedforward=64,
        encoder_in_channels=[8, 16, 32],
        encoder_projection_indices=[2],
        encoder_layers=1,
    )
    model = nn.Sequential()
    model.add_module("encoder", OmDetTurboHybridEncoder(config).eval())
    return model


def test_rt_detrs_first_2d_sine_a_static_method_is_judged_shadowed_exact_and_restored() -> None:
    model = _omdet_encoder()
    encoder = model.encoder
    features = [torch.randn(1, c, 3 * s, 4 * s) for c, s in ((8, 4), (16, 2), (32, 1))]
    with torch.no_grad():
        before = encoder(features).last_hidden_state
    assert computed.grid_method_options(encoder) == (32, 10000.0)
    (judged,) = posenc.audit(model, samples=64).components
    assert judged.kind == "computed" and judged.report.variant.name == "timm-2d", judged
    (made,) = pt.patch(model).replaced
    assert made.path == "encoder" and "RT-DETR's 2-D sine, embed_dim 32" in made.reason
    assert isinstance(encoder.__dict__[computed.GRID_METHOD], computed.ExactGridMethod)
    with torch.no_grad():
        after = encoder(features).last_hidden_state
    assert [t.shape for t in after] == [t.shape for t in before]
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(after, before, strict=True))
    # each value its own: rows width-major, columns [sin w | cos w | sin h | cos h], ω_i = 10000^(−i/8)
    rows = encoder.build_2d_sincos_position_embedding(5, 3, 32, 10000.0, "cpu", torch.float32)[0]
    for w, h in ((4, 2), (1, 0), (3, 1)):
        for i in (0, 3, 7):
            sin_w, cos_w = reference.sincos(w, i, 16)
            sin_h, cos_h = reference.sincos(h, i, 16)
            got = rows[w * 3 + h, [i, 8 + i, 16 + i, 24 + i]].tolist()
            assert got == [reference.round_to(v, "float32") for v in (sin_w, cos_w, sin_h, cos_h)]
    assert posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and computed.GRID_METHOD not in encoder.__dict__
    with torch.no_grad():
        assert all(
            torch.equal(a, b) for a, b in zip(encoder(features).last_hidden_state, before, strict=True)
        )


class _HotterEncoder(OmDetTurboHybridEncoder):
    """RT-DETR's first 2-D sine at twice the temperature it is passed: not the sine its attributes say."""

    @staticmethod
    def build_2d_sincos_position_embedding(
        width, height, embed_dim=256, temperature=10000.0, device="cpu", dtype=torch.float32
    ):
        quarter = embed_dim // 4
        omega = 1.0 / (2 * temperature) ** (torch.arange(quarter, dtype=dtype) / quarter)
        w, h = torch.meshgrid(
            torch.arange(width, dtype=dtype), torch.arange(height, dtype=dtype), indexing="ij"
        )
        out_w, out_h = w.flatten()[:, None] * omega, h.flatten()[:, None] * omega
        return torch.cat([out_w.sin(), out_w.cos(), out_h.sin(), out_h.cos()], dim=1)[None]


def test_a_2d_sine_method_of_another_temperature_is_left_alone_with_why() -> None:
    model = _omdet_encoder()
    model.encoder.__class__ = _HotterEncoder
    (left,) = pt.patch(model).components
    assert not left.replaced and "is not RT-DETR's 2-D sine within float32 rounding" in left.reason, left
    assert computed.GRID_METHOD not in model.encoder.__dict__


def test_a_conformers_cached_relative_table_is_its_modules_rows_made_exact_as_a_batch_of_one() -> None:
    """wav2vec2-conformer's relative positions: a cached ``pe`` of positions L − 1 .. −(L − 1) its forward
    slices to n − 1 .. −(n − 1), a batch of one whatever the input's. The module is the component (its
    buffer a cache its own code recomputes), replaced by posenc's rows in the same shape."""
    import transformers as T
    from transformers.models.wav2vec2_conformer.modeling_wav2vec2_conformer import (
        Wav2Vec2ConformerRelPositionalEmbedding as Rel,
    )

    model = nn.Sequential()
    model.add_module("pos", Rel(T.Wav2Vec2ConformerConfig(hidden_size=32, max_source_positions=2048)))
    [(path, kind, _)] = patching.find(model)
    assert (path, kind) == ("pos", "computed")
    states = torch.zeros(3, 5, 32)
    before = model.pos(states)
    (made,) = pt.patch(model).replaced
    assert "(and −1 .. −1023: the same errors, mirrored)" in made.reason, made.reason
    got = model.pos(states)
    assert got.shape == before.shape == (1, 9, 32)
    assert float((got - before).abs().max()) <= made.tolerance
    for row, position in ((0, 4), (4, 0), (8, -4), (5, -1)):
        for i in (0, 7, 15):
            sin, cos = reference.sincos(position, i, 32)
            assert float(got[0, row, 2 * i]) == reference.round_to(sin, "float32")
            assert float(got[0, row, 2 * i + 1]) == reference.round_to(cos, "float32")
    assert posenc.audit(model, samples=64).passed
    assert pt.unpatch(model) == 1 and type(model.pos) is Rel and torch.equal(model.pos(states), before)


class _SinusoidalPositionalEmbeddingOfBatchIds(nn.Module):
    """Pegasus-X's signature, its position ids of Hugging Face's shape (batch, seq), the encoding added to
    the embeddings (a user's): called with ids (k, 1) it broadcasts them into rows of position 0."""

    embed_dim = 16

    def forward(self, inputs_embeds, past_key_values_length=0, position_ids=None):
        length = inputs_embeds.shape[1]
        if position_ids is None:
            position_ids = torch.arange(past_key_values_length, past_key_values_length + length)[None]
        angles = position_ids[..., None].float() * torch.exp(torch.arange(8).float() * -(math.log(1e4) / 7))
        return inputs_embeds + torch.cat([angles.sin(), angles.cos()], dim=-1)


def test_position_ids_of_another_shape_are_not_read_as_colliding_rows() -> None:
    """Its rows were read at ids (k, 1): every row position 0's, "encodings collide in float32" (false)."""
    model = nn.Sequential()
    model.add_module("embed_positions", _SinusoidalPositionalEmbeddingOfBatchIds())
    (component,) = posenc.audit(model, samples=16).components
    assert component.report is None and "position_ids (k, 1) give other rows" in component.note, component
    (left,) = pt.patch(model).components
    assert not left.replaced and "position_ids (k, 1) give other rows" in left.reason
