"""The 2-D rotary of a latent's grid in halves (posenc.torch.grid_rope): diffusers' CogView4 (its
``rope_axes_dim`` mapping) and GLM-Image read, proven, audited, patched exact and given back, each value of
posenc's against mpmath; another theta refused. And Mochi's rotary, whose frequencies its model trains:
not judged, with that reason."""

from __future__ import annotations

import copy

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_cogview4 import CogView4RotaryPosEmbed
from diffusers.models.transformers.transformer_cosmos import CosmosRotaryPosEmbed
from diffusers.models.transformers.transformer_glm_image import GlmImageRotaryPosEmbed
from diffusers.models.transformers.transformer_mochi import MochiTransformer3DModel

import posenc
import posenc.torch as pt
from posenc.torch import grid_rope
from tests.support import reference


def test_values_against_mpmath():
    exact = grid_rope.GridRope(8, 100.0, 2, axes=(6, 4))
    cos, sin = exact(torch.zeros(1, 3, 8, 6))  # 4 × 3 patches: rows 0, 1, 3, 4 of 6; columns 0, 1, 2 of 4
    assert cos.shape == sin.shape == (12, 8)
    for index in range(12):
        h, w = (index // 3) * 6 // 4, (index % 3) * 4 // 3
        for block, p in enumerate((h, w, h, w)):
            for i in range(2):
                with mpmath.workdps(40):
                    angle = p * mpmath.power(100, -mpmath.mpf(2 * i) / 4)
                    want = [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]
                assert [float(cos[index, 2 * block + i]), float(sin[index, 2 * block + i])] == want


def test_cosmos_values_against_mpmath():
    exact = grid_rope.CosmosRope((4, 2, 2), (300.0, 10.0, 20.0), (1, 2, 2), 24)
    for fps in (None, 30):
        cos, sin = exact(torch.zeros(1, 1, 3, 4, 2), fps=fps)  # 3 × 2 × 1 patches
        assert cos.shape == sin.shape == (6, 8)
        for index in range(6):
            f, h = index // 2, index % 2
            position = mpmath.mpf(f) * 24 / fps if fps else f
            columns = [(position, 300, 4, 0), (position, 300, 4, 1), (h, 10, 2, 0), (0, 20, 2, 0)]
            for column, (p, theta, width, i) in enumerate(columns):
                with mpmath.workdps(40):
                    angle = p * mpmath.power(theta, -mpmath.mpf(2 * i) / width)
                    want = [reference.round_to(g(angle), "float32") for g in (mpmath.cos, mpmath.sin)]
                for at in (column, column + 4):
                    assert [float(cos[index, at]), float(sin[index, at])] == want


MODULES = {
    "cogview4": lambda: CogView4RotaryPosEmbed(64, 2, (64, 48)),
    "glm-image": lambda: GlmImageRotaryPosEmbed(40, 2, theta=500.0),
    "cosmos": lambda: CosmosRotaryPosEmbed(128, max_size=(16, 32, 32), patch_size=(1, 2, 2)),
}


@pytest.mark.parametrize("name", MODULES)
def test_read_proven_audited_patched(name):
    module = MODULES[name]()
    exact = grid_rope.read_grid_rope(module)
    assert exact is not None and getattr(exact, "axes", None) == getattr(module, "rope_axes_dim", None)
    difference, allowed = grid_rope.prove_grid_rope(module, exact)
    assert 0 < difference <= allowed
    wrong = copy.deepcopy(exact)
    wrong.thetas = (wrong.thetas[0] * 1.001, *wrong.thetas[1:])
    wrong._checked = grid_rope._Halves(wrong.widths, wrong.thetas)._checked
    assert grid_rope.prove_grid_rope(module, wrong).startswith("not the rotary its attributes name")
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and before.components[0].report.findings[0].kind in ("angles", "float32")
    latent = torch.zeros(2, 4, 14, 10) if name != "cosmos" else torch.zeros(2, 4, 3, 14, 10)
    want = module(latent)
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["grid-rope"]
    got = model[0](latent)
    assert all(
        g.shape == w.shape and float((g - w).abs().max()) < 1e-3 for g, w in zip(got, want, strict=True)
    )
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module


def test_mochi_frequencies_are_its_models_weights():
    model = MochiTransformer3DModel(
        patch_size=2,
        num_attention_heads=2,
        attention_head_dim=16,
        num_layers=1,
        pooled_projection_dim=8,
        in_channels=4,
        text_embed_dim=8,
        time_embed_dim=16,
    )
    report = pt.patch(model)
    (rope,) = [c for c in report.components if c.path == "rope"]
    assert not rope.replaced and "trained parameter pos_frequencies" in rope.reason
    (judged,) = [c for c in posenc.audit(model, samples=16).components if c.path == "rope"]
    assert judged.report is None and "trained parameter pos_frequencies" in judged.note


def test_coords_rope_values_against_mpmath():
    cos, sin = grid_rope.CoordsRope(8, 100.0)(torch.zeros(1), torch.tensor([[[3, -1], [0, 7]]]))
    assert cos.shape == sin.shape == (1, 2, 8) and cos.dtype == torch.float32
    for patch, coords in enumerate(((3, -1), (0, 7))):
        for axis, p in enumerate(coords):
            for i in range(2):
                with mpmath.workdps(40):
                    angle = p * mpmath.power(100, -mpmath.mpf(2 * i) / 4)
                    want = [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]
                for at in (4 * axis + i, 4 * axis + 2 + i):  # the axis' block, in halves
                    assert [float(cos[0, patch, at]), float(sin[0, patch, at])] == want


def test_timm_gemma4_vit_rotary_read_proven_audited_patched():
    """timm's Gemma 4 ViT rotary (``Gemma4RotaryEmbedding2D``: no config, patch coordinates given): read by
    its form, proven against its own output, another theta refused, made exact and given back."""
    from tests.support import zoo_timm

    zoo_timm.imported()
    from timm.models.gemma4_vit import Gemma4RotaryEmbedding2D

    module = Gemma4RotaryEmbedding2D(72)
    exact = grid_rope.read_coords_rope(module)
    assert (exact.head_dim, exact.theta, exact.axes) == (72, 100.0, 2)
    difference, allowed = grid_rope.prove_coords_rope(module, exact)
    assert 0 < difference <= allowed
    other = Gemma4RotaryEmbedding2D(72, rope_theta=100.1)
    assert grid_rope.prove_coords_rope(other, exact).startswith("not the rotary its attributes name")
    model = torch.nn.Sequential(module)
    assert not posenc.audit(model, samples=32).passed
    x, ids = torch.zeros(2, 6, 72), torch.tensor([[[0, 0], [5, 2], [-1, -1]] * 2] * 2)
    want = module(x, ids)
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["coords-rope"]
    got = model[0](x, ids)
    assert all(float((g - w).abs().max()) < 1e-5 for g, w in zip(got, want, strict=True))
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module


def test_minimax_h3_rotary_of_position_ids_read_proven_audited_patched():
    """MiniMax-H3's rotary (``MiniMaxH3RotaryPosEmbed``: one inv_freq shared by three axes, position ids
    given, no config): its theta read from the inv_freq, proven, audited as a rotary before and after, made
    exact and given back; another theta refused; values against mpmath."""
    from diffusers.models.transformers.transformer_minimax_h3 import MiniMaxH3RotaryPosEmbed

    module = MiniMaxH3RotaryPosEmbed(8, 10000.0)
    exact = grid_rope.read_ids_rope(module)
    assert (exact.count, exact.theta, exact.axes) == (8, 10000.0, 3)
    difference, allowed = grid_rope.prove_ids_rope(module, exact)
    assert 0 < difference <= allowed
    other = MiniMaxH3RotaryPosEmbed(8, 10010.0)
    assert grid_rope.prove_ids_rope(other, exact).startswith("not the rotary its attributes name")
    cos, sin = exact(torch.tensor([[5, 0, 300]]))
    for column, (p, i) in {2: (5, 2), 16 + 7: (300, 7), 24 + 2: (5, 2)}.items():
        with mpmath.workdps(40):
            angle = p * mpmath.power(10000, -mpmath.mpf(i) / 8)
            want = [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]
        assert [float(cos[0, column]), float(sin[0, column])] == want
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and before.components[0].kind == "rotary"
    ids = torch.tensor([[0, 1, 2], [7, 40, 3]])
    want = module(ids)
    assert [c.variant for c in pt.patch(model).replaced] == ["ids-rope"]
    got = model[0](ids)
    assert all(float((g - w).abs().max()) < 1e-6 for g, w in zip(got, want, strict=True))
    after = posenc.audit(model, samples=32)
    assert after.passed and after.components[0].kind == "rotary"
    pt.unpatch(model)
    assert model[0] is module


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: grid_rope.GridRope(8, 100.0, 1.5), r"^patch must be an integer >= 1; got 1\.5"),
        (
            lambda: grid_rope.GridRope(8.0, 100.0, 1),
            r"^dim must be an integer >= 4; got 8\.0 .*\(pass 8 instead\)",
        ),
        (lambda: grid_rope.GridRope(8, 100.0, 1, (2.5, 3)), r"^axes\[0\] must be an integer >= 1; got 2\.5"),
        (lambda: grid_rope.IdsRope(2.7, 100.0, 3), r"^count must be an integer >= 1; got 2\.7"),
        (lambda: grid_rope.IdsRope(2, 100.0, 3.0), r"^axes must be an integer >= 1; got 3\.0"),
        (
            lambda: grid_rope.CosmosRope((2, 2, 2.0), (1e4,) * 3, (1, 1, 1), 24),
            r"^widths\[2\] must be an integer >= 2; got 2\.0",
        ),
        (
            lambda: grid_rope.CosmosRope((2, 2, 2), (1e4,) * 3, (1, 1.5, 1), 24),
            r"^patch\[1\] must be an integer",
        ),
        (lambda: grid_rope.CoordsRope(8.5, 100.0), r"^head_dim must be an integer >= 4; got 8\.5"),
    ],
)
def test_constructors_refuse_what_they_would_truncate(build, message):
    """A non-integer width, patch, count or axis count is refused naming it (int() truncated 1.5 to 1)."""
    with pytest.raises(TypeError, match=message):
        build()


def test_ids_ropes_position_ids_are_checked_as_encodes_positions_are():
    """Boolean position ids were taken as 0 and 1; now refused naming position_ids, as encode refuses
    boolean positions."""
    rope = grid_rope.IdsRope(2, 100.0, 2)
    with pytest.raises(
        TypeError, match=r"^position_ids must be integers or real numbers, not booleans"
    ) as raised:
        rope(torch.tensor([[True, False]]))
    assert raised.value.parameter == "position_ids"
    assert torch.equal(rope(torch.tensor([[1, 0]]))[1], rope(torch.tensor([[1.0, 0.0]]))[1])


@pytest.mark.parametrize("fps", [0, -24, float("nan"), True, "24"])
def test_cosmos_refuses_a_frame_rate_naming_fps(fps):
    """fps=0 divided the frames' positions by zero and was refused as infinite positions the caller never
    passed; each bad frame rate names fps."""
    rope = grid_rope.CosmosRope((2, 2, 2), (100.0, 10.0, 10.0), (1, 1, 1), 24)
    with pytest.raises((TypeError, ValueError), match=r"^fps must be") as raised:
        rope(torch.zeros(1, 1, 2, 1, 1), fps=fps)
    assert raised.value.parameter == "fps"
    assert torch.equal(
        rope(torch.zeros(1, 1, 2, 1, 1), fps=torch.tensor(12))[1], rope(torch.zeros(1, 1, 2, 1, 1), fps=12)[1]
    )
