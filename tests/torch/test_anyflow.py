"""AnyFlow's complex rotaries (posenc.torch.anyflow): diffusers' bidirectional and FAR causal
(its compressed frames: the average of k unit rotations is the rotation at the window's centre) read,
proven within float64 rounding, audited, patched exact and given back, each value of posenc's against
mpmath; another theta, other windows and a float32 table refused."""

from __future__ import annotations

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_anyflow import AnyFlowRotaryPosEmbed
from diffusers.models.transformers.transformer_anyflow_far import AnyFlowCausalRotaryPosEmbed

import posenc
import posenc.torch as pt
from posenc.torch import anyflow


def _want(position: float, theta: float, width: int, i: int) -> complex:
    with mpmath.workdps(50):
        angle = mpmath.mpf(position) * mpmath.power(theta, -mpmath.mpf(2 * i) / width)
        return complex(float(mpmath.cos(angle)), float(mpmath.sin(angle)))


def test_values_against_mpmath():
    """Each value within 1 ulp of float64 of the exact one, full frames at integers and compressed ones
    at their windows' centres (rows and columns pooled by 2, frames by 1)."""
    exact = anyflow.AnyFlowFarRope(12, 300.0, (1, 2, 2))
    cfg = {"total_frames": 3, "full_frame_shape": (2, 4), "compressed_frame_shape": (1, 2)}
    rotary = exact({**cfg, "num_compressed_frames": 1}, "cpu", torch.zeros(1))["query"][0, 0]
    assert rotary.dtype == torch.complex128 and rotary.shape == (2 + 2 * 8 + 2 * 8, 6)
    compressed = [(0, 0.5, 0.5), (0, 0.5, 2.5)]
    full = [(f, h, w) for f in (1, 2) for h in range(2) for w in range(4)]
    for row, point in enumerate(compressed + full + full):
        columns = [(point[0], 4, i) for i in range(2)] + [(point[a], 4, i) for a in (1, 2) for i in range(2)]
        for column, (p, width, i) in enumerate(columns):
            want, got = _want(p, 300.0, width, i), complex(rotary[row, column])
            for a, b in ((want.real, got.real), (want.imag, got.imag)):
                assert abs(a - b) <= 2.0**-52 * max(abs(a), 2.0**-1022), (row, column)


MODULES = {
    "anyflow": lambda: AnyFlowRotaryPosEmbed(24, (1, 2, 2), 256),
    "anyflow-far": lambda: AnyFlowCausalRotaryPosEmbed(24, (1, 2, 2), (1, 4, 4), 256),
    "anyflow-far-frames": lambda: AnyFlowCausalRotaryPosEmbed(24, (1, 2, 2), (3, 6, 8), 256, theta=500.0),
}


@pytest.mark.parametrize("name", MODULES)
def test_read_proven_audited_patched(name):
    module = MODULES[name]()
    exact = anyflow.read_anyflow(module)
    assert exact is not None and exact.theta == module.theta and exact.head == 24
    difference, allowed = anyflow.prove_anyflow(module, exact)
    assert 0 < difference <= allowed < 1e-12
    wrong = type(exact)(24, module.theta * (1 + 1e-9), *([exact.pooled] if hasattr(exact, "pooled") else []))
    assert anyflow.prove_anyflow(module, wrong).startswith("not the rotary its attributes name")
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=32)
    assert not before.passed and before.components[0].report.findings[0].kind in ("angles", "float64")
    assert "float64" in before.components[0].report.findings[0].text
    args = ({"total_frames": 5, "full_frame_shape": (6, 4)}, torch.device("cpu"))
    if hasattr(exact, "pooled"):
        args[0].update(compressed_frame_shape=(2, 2), num_compressed_frames=3)
        args = (*args, torch.zeros(1))
    want = module(*args)
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["anyflow-rope"]
    got = model[0](*args)
    assert got.keys() == want.keys()
    for key in got:
        assert got[key].dtype == torch.complex128 and got[key].shape == want[key].shape
        assert float((got[key] - want[key]).abs().max()) < 1e-12
    assert posenc.audit(model, samples=32).passed
    pt.unpatch(model)
    assert model[0] is module


def test_forms_not_read():
    """Windows of 7 or more flip the sign of high frequencies: not read. A float32 table: not the rotary
    its attributes name within float64 rounding."""
    assert anyflow.read_anyflow(AnyFlowCausalRotaryPosEmbed(24, (1, 1, 1), (1, 7, 1), 64)) is None
    module = AnyFlowRotaryPosEmbed(24, (1, 2, 2), 64)
    cache = module._build_freqs(torch.device("cpu"))
    module._freqs_cache = (module._freqs_cache[0], cache.to(torch.complex64).to(torch.complex128))
    proof = anyflow.prove_anyflow(module, anyflow.read_anyflow(module))
    assert proof.startswith("not the rotary its attributes name") and "float64" in proof
    with pytest.raises(ValueError, match="pooled"):
        anyflow.AnyFlowFarRope(24, 10000.0, (1, 8, 1))
