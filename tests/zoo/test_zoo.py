"""The zoo (``tests/support/zoo.py``): every architecture of the installed transformers with a positional
component, found by enumeration, is listed in ``docs/data/zoo.json`` (``scripts/zoo.py`` writes it and
``docs/zoo.md``); a representative subset — every rotary kind the patch makes exact (interleaved pairs,
half-width and complex forms included), tables made exact, learned tables, a patch the model's own
forward refuses, M-RoPE whose module and config disagree, π0's time embedding — runs again here and must
end in its recorded state, exact or declined with the reason; the encoder-decoders M2M100 and Pegasus-X
are built as their generating classes, their greedy tokens compared; a hybrid keeps a layer of each kind
and a config value that builds another positional class (ESM-2's rotary) is a row of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

from tests.support import zoo  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "zoo.json"
#: model type -> the state it must end in
SUBSET = {
    "llama": "exact",  # rotary, default rope
    "phi3": "exact",  # LongRoPE
    "gemma3": "exact",  # per-layer rotary; its vision tower's learned table not judged
    "lfm3": "exact",  # its forward reads an attribute of its rotary module (layer_types)
    "m2m_100": "exact",  # fairseq tables made exact
    "whisper": "exact",  # the encoder's sinusoid; the decoder's learned table not judged
    "distilbert": "declined",  # learned positions only
    "qwen3_5_text": "exact",  # its module's own mrope_section (its family's default), interleaved
    "cosmos3_edge_text": "exact",  # its config's section, interleaved as its module runs it (config silent)
    "pixtral": "exact",  # an axial rotary of a grid, its frequencies split between the axes
    "parakeet_encoder": "exact",  # a conformer's relative positions n - 1 .. -(n - 1)
    "neomme": "declined",  # proven cos/sin, then the model's own forward refuses the swap
    "gpt_oss": "exact",  # half-width cos/sin (one column per frequency), read and made exact in that form
    "llama4_text": "exact",  # a complex freqs_cis (cos + i·sin), read and made exact in that form
    "cohere": "exact",  # its rotary emits interleaved pairs: its design, judged and made exact in that layout
    "detr": "exact",  # DETR's 2-D sine, computed in forward: read, judged and replaced
    "xlnet": "exact",  # a relative encoding computed in a method of the model: shadowed on the instance
    "pegasus_x": "exact",  # a 1-D sinusoid computed in forward: identified and replaced in its calling form
    "pi0": "exact",  # a time embedding of periods (its config's) computed in forward, exact through a law
    "recurrent_gemma": "exact",  # its attention layer kept among its recurrent blocks: its rotary built
    "esm[position_embedding_type=rotary]": "exact",  # a config value's positional class: a row of its own
}


def test_the_table_lists_every_architecture_the_enumeration_finds() -> None:
    zoo.check_recorded(DATA, zoo.architectures(), SUBSET, 300)


@pytest.mark.parametrize("model_type", SUBSET)
def test_an_architecture_ends_exact_or_declined_with_its_reason(model_type: str) -> None:
    zoo.check_outcome(zoo.run(model_type), SUBSET[model_type], DATA)
