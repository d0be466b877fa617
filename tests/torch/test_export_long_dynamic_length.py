"""``torch.export`` of SinusoidalPositionalEncoding with positions and a dynamic length whose largest value
makes the output large: the eager CPU fast path's size test (4 MiB) must not run on a traced size, or it
becomes a guard (``seq <= 8191`` at d_model 64, ``seq <= 1023`` at 512, batch 2) and export refuses the
range asked for."""

from __future__ import annotations

import pytest
import torch

import posenc.torch as pt


@pytest.mark.parametrize("d_model", [64, 512])
def test_export_keeps_a_long_dynamic_length_and_equals_eager(d_model):
    """The program keeps the whole range 2..8192 and equals eager bit for bit at two lengths. (Short
    ones: on the CPU the exported graph runs the portable algorithm, ~1 s per 10**4 values here.)"""
    module = pt.SinusoidalPositionalEncoding(d_model, batch_first=True).eval()
    seq = torch.export.Dim("seq", max=8192)

    def inputs(length: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(2, length, d_model, generator=torch.Generator().manual_seed(length))
        return x, torch.arange(length).repeat(2, 1) + torch.tensor([[0], [3]])

    program = torch.export.export(module, inputs(16), dynamic_shapes={"x": {1: seq}, "positions": {1: seq}})
    assert any(int(r.upper) == 8192 for r in program.range_constraints.values()), program.range_constraints
    for length in (3, 11):
        x, positions = inputs(length)
        assert torch.equal(program.module()(x, positions), module(x, positions)), length
