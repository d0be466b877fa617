"""The diffusers zoo (``tests/support/zoo_diffusers.py``): every model class of the installed diffusers with a
positional component, found by enumeration, is listed in ``docs/data/zoo-diffusers.json``
(``scripts/zoo.py --library diffusers`` writes it and ``docs/zoo-diffusers.md``); a representative subset —
timesteps and a 3-D table made exact, Flux's rotary of position ids, Wan's rotary of a latent's grid
(HunyuanVideo's: tests/torch/test_computed.py), an all-zero table, SD3's table, LTX-Video's rotary
— runs again here and must end in its recorded state, every exact one proven on its own forward too; an input
the zoo makes from the model at each run (a rotary a pipeline makes with the model's rope) is made from the
model as it is then."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("diffusers")

from tests.support import zoo, zoo_diffusers

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "zoo-diffusers.json"
#: class name -> the state it must end in
SUBSET = {
    "CogVideoXTransformer3DModel": "exact",  # a 3-D table after its text places, made exact
    "FluxTransformer2DModel": "exact",  # Flux's rotary of position ids (EmbedND)
    "WanTransformer3DModel": "exact",  # Wan's rotary tables of its __init__'s theta
    "NucleusMoEImageTransformer2DModel": "exact",  # Qwen-Image's complex tables: a copy holding posenc's
    # its timestep embedding made exact; its positional table all zeros (weights a checkpoint fills): not
    # judged, as a learned table is not
    "PriorTransformer": "exact",
    "SD3Transformer2DModel": "exact",  # its 2-D sin-cos table already exact, its timesteps made exact
    "LTXVideoTransformer3DModel": "exact",  # LTX-Video's rotary of its packed latent's frames, rows, columns
}


def test_the_table_lists_every_class_the_enumeration_finds() -> None:
    zoo.check_recorded(DATA, zoo_diffusers.architectures(), SUBSET, 100)


@pytest.mark.parametrize("name", SUBSET)
def test_a_diffusers_model_ends_exact_or_declined_with_its_reason(name: str) -> None:
    outcome = zoo_diffusers.run(name)
    zoo.check_outcome(outcome, SUBSET[name], DATA)
    if SUBSET[name] == "exact":
        assert outcome.why.startswith("outputs within 1e-4"), outcome.why  # its own forward, before and after


def test_an_input_made_at_call_is_made_from_the_model_as_it_is_then() -> None:
    class Net(torch.nn.Module):  # a forward given a rotary its pipeline computes with the model's own rope
        def __init__(self) -> None:
            super().__init__()
            self.scale = 1.0

        def forward(self, x: torch.Tensor, rotary: torch.Tensor) -> torch.Tensor:
            return x * rotary

    net = Net()
    inputs = {"x": torch.ones(2), "rotary": zoo.AtCall(lambda m: torch.full((2,), m.scale))}
    assert zoo._output(net, inputs).tolist() == [1.0, 1.0]
    net.scale = 2.0  # its rope patched: the next run's rotary is the patched one's
    assert zoo._output(net, inputs).tolist() == [2.0, 2.0]


def _paper_table() -> torch.Tensor:
    """The paper's table of 16 positions, width 8, a float32 unit or so off (as float32 code errs: posenc
    makes it exact)."""
    import posenc

    return torch.from_numpy(posenc.table(16, 8, layout="interleaved")) + 1e-7


class _Sines(torch.nn.Module):
    """A sinusoid table held by a child and added to its input; ``nan``: which outputs are NaN."""

    def __init__(self, nan: slice) -> None:
        super().__init__()
        self.encoder = torch.nn.Module()
        self.encoder.register_buffer("pe", _paper_table())
        self.nan = nan

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x + self.encoder.pe
        out[self.nan] = float("nan")
        return out


@pytest.mark.parametrize(
    ("nan", "how"),
    [
        (slice(0, 1), "outputs within 1e-4 (8 of 128 outputs not finite, in the same places)"),
        (slice(None), "forward not compared: its outputs are not finite anywhere"),
    ],
)
def test_the_zoo_compares_outputs_where_they_are_finite_and_never_on_none(nan: slice, how: str) -> None:
    """NaN outputs in the same places are left out of the comparison and counted; outputs with no finite
    value prove nothing (was: "within its own float32 error (nan ...)")."""
    x = torch.zeros(16, 8)
    outcome = zoo.judge("sines", lambda: _Sines(nan).eval(), folder=False, probe=lambda m: [{"x": x}])
    assert outcome.state == "exact" and outcome.why == how, outcome.why
