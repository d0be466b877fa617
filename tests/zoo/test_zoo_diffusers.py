"""The diffusers zoo (``tests/support/zoo_diffusers.py``): every model class of the installed diffusers with a
positional component, found by enumeration, is listed in ``docs/data/zoo-diffusers.json``
(``scripts/zoo.py --library diffusers`` writes it and ``docs/zoo-diffusers.md``); a representative subset —
timesteps and a 3-D table made exact, Flux's rotary of position ids, Wan's rotary of a latent's grid
(HunyuanVideo's: tests/torch/test_computed.py), an all-zero table — runs again here and must end in its
recorded state."""

from __future__ import annotations

from pathlib import Path

import pytest

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
}


def test_the_table_lists_every_class_the_enumeration_finds() -> None:
    zoo.check_recorded(DATA, zoo_diffusers.architectures(), SUBSET, 100)


@pytest.mark.parametrize("name", SUBSET)
def test_a_diffusers_model_ends_exact_or_declined_with_its_reason(name: str) -> None:
    outcome = zoo_diffusers.run(name)
    zoo.check_outcome(outcome, SUBSET[name], DATA)
    unprobed = ("CogVideoXTransformer3DModel", "PriorTransformer")  # a (B, F, C, H, W) latent; image embeds
    if SUBSET[name] == "exact" and name not in unprobed:
        assert outcome.why.startswith("outputs within 1e-4"), outcome.why  # its own forward, before and after
