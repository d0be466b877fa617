"""Porting tools: reorder a stored table's columns, find out which variant a stored table is, read it.

- :func:`convert_layout` (:mod:`.layout`): the same encodings with their columns moved to another layout;
- :func:`identify` (:mod:`.matching`): the variants that best reproduce a table, as :class:`Match` es. Its
  candidates are the preset registry's named 1-D variants and fitted ones (:mod:`.candidates`, with the
  fits of :mod:`.fitting`) and the N-D grids (:mod:`.grid_candidates`);
- :func:`identify_rope` (:mod:`.rope_matching`): the RoPE type and parameters of a stored ``inv_freq``
  vector or cos/sin cache, as a :class:`RopeMatch` (``identify`` hands such buffers to it). The types'
  candidates come from :mod:`.rope_fitting`, LongRoPE's per-frequency factors from :mod:`.rope_longrope`
  and a merged multimodal (M-RoPE) cache's sections and positions from :mod:`.rope_sections`;
- :func:`verdict` (:mod:`.verdict`): one answer from identify's matches: the best variant, what it cannot
  be told apart from, its library's float32 error and the lines to paste (what ``posenc identify`` prints);
- :func:`load_table` (:mod:`.load`): the table a .npy, .pt/.pth or .safetensors file holds (the files are
  read by :mod:`.readers`; torch and safetensors are imported only for files of theirs).

>>> import posenc
>>> stored = posenc.presets.get("fairseq", padding_idx=1).table(64, 32)
>>> match = identify(stored)[0]
>>> match.name, match.matches
('fairseq(padding_idx=1)', True)
"""

from __future__ import annotations

from .layout import convert_layout
from .load import load_named_table, load_stored_table, load_table
from .matching import identify
from .records import Match, RopeMatch
from .rope_matching import identify_rope
from .verdict import Verdict, answer_lines, verdict

__all__ = [
    "Match",
    "RopeMatch",
    "Verdict",
    "answer_lines",
    "convert_layout",
    "identify",
    "identify_rope",
    "load_named_table",
    "load_stored_table",
    "load_table",
    "verdict",
]
