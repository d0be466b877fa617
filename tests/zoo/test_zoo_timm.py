"""The timm zoo (``tests/support/zoo_timm.py``): every timm model whose module has a sin-cos grid or a rotary,
found by enumeration, is listed in ``docs/data/zoo-timm.json`` (``scripts/zoo.py --library timm`` writes it
and ``docs/zoo-timm.md``); a representative subset — timm's axial rotary of an index grid made exact (EVA-02's
beside a learned table), an all-zero table, Gemma 4's 2-D rotary read by its form, DINOv3's rotary made exact,
learned rotary frequencies — runs again here and must end in its recorded state."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import zoo, zoo_timm

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "zoo-timm.json"
#: model name -> the state it must end in
SUBSET = {
    "vit_base_patch16_rope_224": "exact",  # timm's axial rotary (RotaryEmbeddingCat), its cache made exact
    "eva02_tiny_patch14_224": "exact",  # the same of its reference grid, beside a learned table
    "samvit_base_patch16": "declined",  # its positional table all zeros: weights a checkpoint fills
    "gemma4_vit_167m_enc": "exact",  # a 2-D rotary of patch coordinates, no config: read by its form
    "vit_small_patch16_dinov3": "exact",  # DINOv3's rotary of coordinates: made exact, its output on an image
    "vit_small_patch16_rope_mixed_224": "declined",  # frequencies that are a trained parameter
}


def test_the_table_lists_every_model_the_enumeration_finds() -> None:
    zoo.check_recorded(DATA, zoo_timm.architectures(), SUBSET, 50)


@pytest.mark.parametrize("name", SUBSET)
def test_a_timm_model_ends_exact_or_declined_with_its_reason(name: str) -> None:
    outcome = zoo_timm.run(name)
    zoo.check_outcome(outcome, SUBSET[name], DATA)
    if SUBSET[name] == "exact":  # its own forward, before and after
        assert outcome.why.startswith("outputs within 1e-4"), outcome.why
    if name.startswith(("vit_base_patch16_rope", "eva02")):  # its cache of its grid: computed, no table
        assert any(c.startswith("rope [computed] timm-rope: replaced") for c in outcome.components)


def test_timm_is_imported_without_leaving_a_torchvision_behind() -> None:
    import sys

    assert zoo_timm.imported().__version__ and "torchvision" not in sys.modules
