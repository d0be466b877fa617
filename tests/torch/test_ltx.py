"""LTX's rotary of fractional coordinates (posenc.torch.ltx): each value of posenc's equivalent against
mpmath (quarter turns included), read and proven from diffusers' LTX-Video and LTX-2 modules in their
layouts, a wrong theta refused, a model audited (the float32 cause found), patched, exact, given back."""

from __future__ import annotations

import copy
import io
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import torch
from diffusers.models.transformers.transformer_ltx import LTXVideoRotaryPosEmbed
from diffusers.models.transformers.transformer_ltx2 import LTX2AudioVideoRotaryPosEmbed

import posenc
import posenc.torch as pt
from posenc.torch import ltx
from tests.support import reference


def exact_sin_cos(x: float, k: int, theta: float, count: int) -> tuple[float, float]:
    """cos and sin of x · (π/2) · theta^(k/(count − 1)), correctly rounded to float32 (mpmath, 50 digits)."""
    with mpmath.workdps(50):
        exponent = mpmath.mpf(k) / (count - 1) if count > 1 else 0
        angle = mpmath.mpf(x) * mpmath.pi / 2 * mpmath.power(mpmath.mpf(theta), exponent)
        return reference.round_to(mpmath.cos(angle), "float32"), reference.round_to(
            mpmath.sin(angle), "float32"
        )


@pytest.mark.parametrize(
    ("theta", "count"), [(10000.0, 21), (10000.0, 1), (500.0, 7), (333.25, 5), (2.25, 3)]
)
def test_values_against_mpmath(theta, count):
    rng = np.random.default_rng(count)
    # quarter turns (g of 0, ½, 1, 1.5, integers), the pipelines' fractions and random ones
    g = np.concatenate(
        [[0.0, 0.5, 1.0, 1.5, 2.0, 7.0, 0.25, 1 / 3], np.arange(5) * 8 / 25 / 20, rng.random(12)]
    )
    fractions = torch.from_numpy(np.stack([g, g[::-1]], axis=-1))[None]  # (1, S, 2)
    cos, sin = ltx.fraction_cos_sin(fractions, theta, count)
    assert cos.shape == sin.shape == (1, len(g), 2 * count) and cos.dtype == torch.float32
    for s, row in enumerate(fractions[0].numpy()):
        for k in range(count):
            for a, value in enumerate(row):
                want = exact_sin_cos(2 * value - 1, k, theta, count)
                got = (float(cos[0, s, k * 2 + a]), float(sin[0, s, k * 2 + a]))
                assert got == want, (s, k, a, got, want)


def test_quarter_turns_are_exact_and_found_exactly():
    assert ltx.quarter_turns(10000.0, 21) == {0: 1, 5: 10, 10: 100, 15: 1000, 20: 10000}
    assert ltx.quarter_turns(10000.0, 6) == {0: 1, 5: 10000}
    assert ltx.quarter_turns(333.25, 5) == {0: 1, 4: Fraction(1333, 4)}
    assert ltx.quarter_turns(2.25, 3) == {0: 1, 1: Fraction(3, 2), 2: Fraction(9, 4)}
    x = np.array([0.0, 1.0, -1.0, 0.5, 0.25, 0.1, 3.0, 1e-30, 2.0**-40, 1.5, 12345.0625, 4 / 3, 8.0])
    for r in (1, 2, 10, 1000, 10000, Fraction(1333, 4), Fraction(3, 2)):
        want = [(Fraction(float(v)) * r).denominator == 1 for v in x]
        assert ltx._integral(x, Fraction(r)).tolist() == want
    sin, cos = ltx.exact_sin_cos(np.array([1.0, -1.0, 0.0, 3.0]), 10000.0, 21)
    assert sin[:, 0].tolist() == [1, -1, 0, -1] and cos[:, 0].tolist() == [0, 0, 1, 0]
    assert sin[:, 20].tolist() == [0, 0, 0, 0] and cos[:, 20].tolist() == [1, 1, 1, 1]


MODULES = {
    "ltx": lambda: LTXVideoRotaryPosEmbed(64),
    "ltx-odd-dim": lambda: LTXVideoRotaryPosEmbed(100, theta=500.0, patch_size=2, patch_size_t=2),
    "ltx2": lambda: LTX2AudioVideoRotaryPosEmbed(128),
    "ltx2-split": lambda: LTX2AudioVideoRotaryPosEmbed(130, rope_type="split", num_attention_heads=5),
    "ltx2-audio": lambda: LTX2AudioVideoRotaryPosEmbed(64, modality="audio"),
    "ltx2-float32": lambda: LTX2AudioVideoRotaryPosEmbed(64, double_precision=False),
}


@pytest.mark.parametrize("name", MODULES)
def test_read_and_proven_from_diffusers(name):
    module = MODULES[name]()
    exact = ltx.read_ltx(module)
    assert exact is not None and exact.dim == module.dim and exact.theta == module.theta
    difference, allowed = ltx.prove_ltx(module, exact)
    assert 0 < difference <= allowed <= 2.0**-4
    wrong = copy.deepcopy(exact)
    wrong.theta = exact.theta * 1.0001  # a theta 1e-4 off is told apart from float32 code
    assert ltx.prove_ltx(module, wrong).startswith("not the rotary its attributes name")


def test_the_model_calls_are_followed():
    """The forms the models call: LTX-Video with the pipelines' scale and given coordinates, LTX-2 with patch
    bounds of its own prepare_video_coords and its cross-attention's first axis; posenc's within the proof's
    allowance of each."""
    module, coords = LTX2AudioVideoRotaryPosEmbed(96), None
    exact = ltx.read_ltx(module)
    coords = module.prepare_video_coords(2, 3, 4, 5, torch.device("cpu"), fps=25.0)
    for given in (coords, coords[:, 0:1]):
        checked = ltx.compare(exact, module(given), exact(given), exact.fractions(given))
        assert isinstance(checked, tuple), checked
    video = LTXVideoRotaryPosEmbed(96)
    exact = ltx.read_ltx(video)
    states = torch.zeros(2, 60, 8)
    for call in ({"rope_interpolation_scale": (torch.tensor(8 / 24), 32, 32)}, {}):
        mine, ours = video(states, 3, 4, 5, **call), exact(states, 3, 4, 5, **call)
        checked = ltx.compare(exact, mine, ours, exact.fractions(2, 3, 4, 5, **call))
        assert isinstance(checked, tuple), checked
    with pytest.raises(ValueError, match="coordinates: each 2·c/base − 1 must be finite"):
        exact(states, video_coords=torch.full((2, 3, 4), float("nan")))
    with pytest.raises(ValueError, match=r"rope_interpolation_scale\[0\]"):
        exact(states, 3, 4, 5, rope_interpolation_scale=(torch.ones(2), 32, 32))
    # the scale's factor s·p/b in float64, as the docstring says (it was float32: 0.016000000760 for 0.016)
    frame = LTXVideoRotaryPosEmbed(12, 20, 2048, 2048, 1, 1)
    fractions = ltx.read_ltx(frame).fractions(1, 2, 1, 1, (1 / 3.125, 32.0, 32.0))
    assert fractions.dtype == torch.float64 and float(fractions[0, 1, 0]) == (1 / 3.125) * 1 / 20


def test_a_module_of_the_form_computing_else_is_refused():
    class Other(LTX2AudioVideoRotaryPosEmbed):
        def forward(self, coords, device=None):
            cos, sin = super().forward(coords, device)
            return cos.flip(-1), sin.flip(-1)  # another column order

    module = Other(64)
    assert ltx.prove_ltx(module, ltx.read_ltx(module)).startswith("not the rotary its attributes name")
    patched = torch.nn.Sequential(module)
    report = pt.patch(patched)
    assert not report.replaced and patched[0] is module


def test_a_model_audited_patched_exact_and_given_back():
    model = torch.nn.ModuleDict(
        {"rope": LTXVideoRotaryPosEmbed(64), "audio": LTX2AudioVideoRotaryPosEmbed(64)}
    )
    before = posenc.audit(model, samples=32)
    assert not before.passed
    for component in before.components:
        assert [f.kind for f in component.report.findings] == ["float32"]
        assert component.report.findings[0].fix.startswith("posenc.torch.patch(model)")
    states = torch.zeros(1, 1)
    want = model["rope"](states, 2, 3, 4, rope_interpolation_scale=(8 / 25, 32, 32))
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["ltx-rope", "ltx-rope"]
    after = posenc.audit(model, samples=32)
    assert after.passed and all(c.report.max_abs == 0 for c in after.components)
    got = model["rope"](states, 2, 3, 4, rope_interpolation_scale=(8 / 25, 32, 32))
    assert all(
        g.shape == w.shape and float((g - w).abs().max()) < 0.06 for g, w in zip(got, want, strict=True)
    )
    kept = torch.load(io.BytesIO(_saved(model)), weights_only=False)
    assert isinstance(kept["rope"], ltx.LtxRope) and isinstance(copy.deepcopy(model)["audio"], ltx.Ltx2Rope)
    pt.unpatch(model)
    assert type(model["rope"]) is LTXVideoRotaryPosEmbed
    for g, w in zip(
        model["rope"](states, 2, 3, 4, rope_interpolation_scale=(8 / 25, 32, 32)), want, strict=True
    ):
        assert torch.equal(g, w)


def _saved(model: torch.nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return buffer.getvalue()


def test_ltx2_decoder_rotary_read_proven_exact_and_refused_otherwise():
    """LTX-2's decoder rotary (a rotation applied in its forward): its cos and sin read as its rotation of
    unit pairs, proven, posenc's against mpmath, audited and patched; a rotation of other angles refused."""
    from diffusers.models.autoencoders.ltx2_diffusion_decoder import LTX2VideoVaeRotaryPosEmbed3D

    module = LTX2VideoVaeRotaryPosEmbed3D(32)
    exact = ltx.read_ltx_vae(module)
    assert exact is not None and exact.split == tuple(module.rope_dim_split)
    difference, allowed = ltx.prove_ltx_vae(module, exact)
    assert difference <= allowed
    cos, sin = ltx.vae_cos_sin(exact, exact, 1, 40)
    for p in (0, 1, 39):
        for i in range(6):
            with mpmath.workdps(40):
                angle = p * mpmath.power(10000, -mpmath.mpf(2 * i) / 12)
                want = (
                    reference.round_to(mpmath.cos(angle), "float32"),
                    reference.round_to(mpmath.sin(angle), "float32"),
                )
            assert (float(cos[p, i]), float(sin[p, i])) == want
    model = torch.nn.Sequential(module)
    x = torch.randn(1, 3, 4, 5, 2, 32, dtype=torch.bfloat16)
    want = module(x)
    assert not posenc.audit(model, samples=16).passed
    assert [c.variant for c in pt.patch(model).replaced] == ["ltx-vae-rope"]
    got = model[0](x)
    assert got.dtype == torch.bfloat16 and float((got.float() - want.float()).abs().max()) <= 2.0**-6
    assert posenc.audit(model, samples=16).passed
    pt.unpatch(model)

    class Doubled(LTX2VideoVaeRotaryPosEmbed3D):
        def _inv_freqs(self, dim, device):
            return 2 * super()._inv_freqs(dim, device)

    other = Doubled(32)
    assert ltx.prove_ltx_vae(other, ltx.read_ltx_vae(other)).startswith("not the rotary its attributes name")


def test_ltx2s_equivalent_on_meta_gives_the_originals_shapes_and_computes_nothing():
    """Coordinates on meta: the original gives meta (cos, sin); posenc's copied them to the CPU and raised."""
    for options in ({}, {"rope_type": "split", "num_attention_heads": 2}):
        module = LTX2AudioVideoRotaryPosEmbed(24, **options)
        coords = module.prepare_video_coords(2, 3, 2, 2, torch.device("cpu")).to("meta")
        mine, ours = module(coords), ltx.read_ltx(module)(coords)
        assert [(t.shape, t.dtype, t.device.type) for t in ours] == [(t.shape, t.dtype, "meta") for t in mine]
    with pytest.raises(TypeError, match=r"coords: a gradient is asked for.*coords\.detach\(\)"):
        ltx.read_ltx(module)(torch.zeros(1, 3, 4, requires_grad=True))


def test_ltx2s_equivalent_refuses_meta_coords_for_a_real_device():
    """Meta coordinates with a CPU device asked for: nothing to compute from, so a refusal naming coords (it
    returned torch.empty on the CPU: uninitialised memory)."""
    rope = ltx.Ltx2Rope(4, 10000.0, (20,), "interleaved", 1)
    coords = torch.empty(1, 1, 2, device="meta")
    refused = r"coords: shape \(1, 1, 2\) on the meta device.*'cpu'"
    with pytest.raises(posenc.errors.PosencValueError, match=refused):
        rope(coords, "cpu")
    assert [(t.shape, t.device.type) for t in rope(coords, "meta")] == [((1, 2, 4), "meta")] * 2


def test_constructors_refuse_what_they_would_truncate():
    """LtxRope(6.7, ...) and a patch size of 1.5 are refused naming the argument (int() truncated them)."""
    with pytest.raises(TypeError, match=r"^dim must be an integer >= 1; got 6\.7"):
        ltx.LtxRope(6.7, 1e4, (20, 2048, 2048), 1, 1)
    with pytest.raises(TypeError, match=r"^patch_size must be an integer >= 1; got 1\.5"):
        ltx.LtxRope(6, 1e4, (20, 2048, 2048), 1.5, 1)
    with pytest.raises(TypeError, match=r"^patch_size_t must be an integer >= 1; got 2\.5"):
        ltx.LtxRope(6, 1e4, (20, 2048, 2048), 1, 2.5)
    with pytest.raises(TypeError, match=r"^heads must be an integer >= 1; got 1\.5"):
        ltx.Ltx2Rope(4, 1e4, (20,), "interleaved", 1.5)
    with pytest.raises(TypeError, match=r"^dim must be an integer >= 2; got 4\.5"):
        ltx.Ltx2Rope(4.5, 1e4, (20,), "interleaved", 1)
