"""Kandinsky 5's and 6's rotaries of rotation matrices (posenc.torch.kandinsky): posenc's values against
mpmath (a scale factor's real positions included), each diffusers module read, proven, audited (the float32
cause), patched exact and given back; a module of the same names computing other angles refused."""

from __future__ import annotations

import mpmath
import pytest
import torch
from diffusers.models.transformers.transformer_kandinsky import Kandinsky5RoPE1D, Kandinsky5RoPE3D
from diffusers.models.transformers.transformer_kandinsky6 import Kandinsky6RoPE1D, Kandinsky6RoPE3D
from diffusers.models.transformers.transformer_kandinsky6_sr import Kandinsky6SRRoPE3D

import posenc
import posenc.torch as pt
from posenc.torch import kandinsky
from tests.support import reference


def _cos_sin(
    position: float, i: int, width: int, period: float = 10000.0, scaling: float = 1.0
) -> list[float]:
    with mpmath.workdps(40):
        angle = mpmath.mpf(position) * scaling * mpmath.power(period, -mpmath.mpf(2 * i) / width)
        return [reference.round_to(f(angle), "float32") for f in (mpmath.cos, mpmath.sin)]


def test_values_against_mpmath():
    one = kandinsky.KandinskyRope1D(8, 500.0, 0.5)(torch.tensor([[0, 3], [17, 1000]]))
    assert one.shape == (2, 2, 1, 4, 2, 2)
    for (row, column), p in zip([(0, 0), (0, 1), (1, 0), (1, 1)], [0, 3, 17, 1000], strict=True):
        for i in range(4):
            m = one[row, column, 0, i]
            assert [float(m[0, 0]), float(m[1, 0])] == _cos_sin(p, i, 8, 500.0, 0.5)
            assert float(m[0, 1]) == -float(m[1, 0]) and float(m[1, 1]) == float(m[0, 0])
    three = kandinsky.KandinskyRope3D((2, 4, 2), 10000.0, 5)
    out = three((2, 3, 2, 1), (torch.arange(3), torch.tensor([0, 5]), torch.tensor([7])), (3.0, 1.0, 2.0))
    assert out.shape == (2, 3, 2, 1, 1, 4, 2, 2)
    for f in range(3):
        for h, row in enumerate((0, 5)):
            cells = out[1, f, h, 0, 0]
            want = [_cos_sin(mpmath.mpf(f) / 3, 0, 2), _cos_sin(row, 0, 4), _cos_sin(row, 1, 4)]
            want.append(_cos_sin(mpmath.mpf(7) / 2, 0, 2))
            assert [[float(c[0, 0]), float(c[1, 0])] for c in cells] == want


def test_positions_the_originals_table_takes_an_int_or_a_list_and_no_negative_one():
    """The original indexes a table: an int or a list is an index (posenc raised AttributeError), and a
    negative one reads from the table's end, where posenc would compute position −1: refused, saying so."""
    rope = kandinsky.KandinskyRope1D(8, 500.0)
    assert torch.equal(rope(3), rope(torch.tensor(3))) and torch.equal(
        rope([1, 2]), rope(torch.tensor([1, 2]))
    )
    with pytest.raises(ValueError, match=r"pos: -1 is negative.*give positions >= 0"):
        rope(torch.tensor([0, -1]))


def test_the_3d_forms_shape_must_be_pos_sizes_and_the_result_is_its_own():
    """Form 5's shape (B, T, H, W) must give pos's sizes, as the original's views require (a disagreeing
    one was ignored); the result, like the original's, is a tensor of its own, writable in place (it was a
    stride-0 view of one batch row)."""
    pos = (torch.arange(2), torch.arange(3), torch.arange(4))
    original, rope = (
        Kandinsky5RoPE3D((4, 4, 4), (64, 64, 64)),
        kandinsky.KandinskyRope3D((4, 4, 4), 10000.0, 5),
    )
    with pytest.raises(RuntimeError):
        original((2, 5, 3, 4), pos)
    for shape in ((2, 5, 3, 4), (2, 2, 4, 3), (2, 2, 3)):
        with pytest.raises(
            ValueError, match=r"^shape: .*\(T, H, W\) = \(2, 3, 4\).*shape=\(batch, 2, 3, 4\)"
        ):
            rope(shape, pos)
    out = rope((2, 2, 3, 4), pos)
    assert out.is_contiguous() and torch.equal(out[0], out[1])
    assert torch.equal(out.mul_(2), 2 * rope((2, 2, 3, 4), pos))


MODULES = {
    "5-1d": lambda: Kandinsky5RoPE1D(64),
    "5-3d": lambda: Kandinsky5RoPE3D((16, 24, 24)),
    "6-1d": lambda: Kandinsky6RoPE1D(64, freqs_scaling=0.5),
    "6-3d": lambda: Kandinsky6RoPE3D((16, 24, 24), max_pos=(32, 64, 64)),
    "6-sr-3d": lambda: Kandinsky6SRRoPE3D((8, 12, 12)),
}


@pytest.mark.parametrize("name", MODULES)
def test_read_proven_audited_patched(name):
    module = MODULES[name]()
    exact = kandinsky.read_kandinsky(module)
    assert exact is not None
    difference, allowed = kandinsky.prove_kandinsky(module, exact)
    assert 0 < difference <= allowed
    model = torch.nn.Sequential(module)
    before = posenc.audit(model, samples=16)
    assert not before.passed and before.components[0].report.findings[0].kind in ("angles", "float32")
    report = pt.patch(model)
    assert [c.variant for c in report.replaced] == ["kandinsky-rope"]
    after = posenc.audit(model, samples=16)
    assert after.passed and after.components[0].report.max_abs == 0
    pt.unpatch(model)
    assert model[0] is module


def test_other_angles_are_refused():
    class Halved(Kandinsky5RoPE1D):
        def forward(self, pos):
            return super().forward(pos // 2)  # another position than its argument

    module = Halved(16)
    assert kandinsky.prove_kandinsky(module, kandinsky.read_kandinsky(module)).startswith(
        "not the rotary its attributes name"
    )
    assert not pt.patch(torch.nn.Sequential(module)).replaced


def test_constructors_refuse_what_they_would_truncate():
    """KandinskyRope1D(8.9, ...) and an axis width of 4.5 are refused naming the argument (int() truncated
    them)."""
    with pytest.raises(TypeError, match=r"^dim must be an integer >= 2; got 8\.9"):
        kandinsky.KandinskyRope1D(8.9, 1e4)
    with pytest.raises(TypeError, match=r"^axes_dims\[1\] must be an integer >= 2; got 4\.5"):
        kandinsky.KandinskyRope3D((4, 4.5, 4), 1e4, 5)
