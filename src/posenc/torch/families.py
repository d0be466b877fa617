"""The model families :func:`posenc.torch.patch` knows, as data: one row per family, saying how its attention
calls the rotary apply — the module-global name its ``forward`` calls, that function's signature and
layout — and which other applies of its modeling module posenc leaves alone (a vision tower's). The rows
are read by one mechanism (:mod:`posenc.torch.patching`); a family is added by adding its row, never by a
branch.

A row is keyed by the Hugging Face modeling module its attention's ``forward`` is defined in
(``transformers.models.{model_type}.modeling_{model_type}``). A module of no row gets :data:`GENERIC`: an
attention whose ``forward`` calls exactly one rotary apply, by the standard name ``apply_rotary_pos_emb``,
is patched like a row's; one that calls any other apply (named like one: :data:`APPLY_NAME`) that the row
does not leave alone is declined, with the reason, in the report.

The rows are those of the families the tests patch (``tests/torch/test_patching.py``), and they are checked
against the installed transformers there (each class exists, its ``forward`` calls each apply of its row,
each apply has the signature written here).

>>> row = family_of("transformers.models.qwen2_vl.modeling_qwen2_vl")
>>> row.model_type, row.attention, [a.name for a in row.calls], [a.name for a in row.leave]
('qwen2_vl', ('Qwen2VLAttention',), ['apply_rotary_pos_emb'], ['apply_rotary_pos_emb_vision'])
>>> family_of("my_project.model") is GENERIC
True
"""

from __future__ import annotations

import dataclasses
import re

__all__ = [
    "APPLY_NAME",
    "FAMILIES",
    "GENERIC",
    "INTERLEAVED_PAIRS",
    "ROTATE_HALF",
    "VISION_HALF",
    "Apply",
    "Family",
    "family_of",
]


@dataclasses.dataclass(frozen=True)
class Apply:
    """A rotary apply function as an attention module calls it: the module-global ``name`` its ``forward``
    reads, the function's ``signature``, and its ``layout``: "half" (column j turns with j + d/2, cos/sin
    [θ | θ]) or "interleaved" (adjacent pairs)."""

    name: str
    signature: str
    layout: str


#: Hugging Face's ``apply_rotary_pos_emb``: rotate half, cos/sin [θ | θ] unsqueezed at ``unsqueeze_dim``.
#: posenc's apply takes its place.
ROTATE_HALF = Apply("apply_rotary_pos_emb", "(q, k, cos, sin, unsqueeze_dim=1)", "half")
#: DeepSeek's ``apply_rotary_pos_emb_interleave``: q and k in adjacent pairs, from rotate-half cos/sin.
INTERLEAVED_PAIRS = Apply(
    "apply_rotary_pos_emb_interleave", "(q, k, cos, sin, position_ids=None, unsqueeze_dim=1)", "interleaved"
)
#: A vision tower's ``apply_rotary_pos_emb_vision`` (Qwen2-VL and its kin): its own axial cos/sin.
VISION_HALF = Apply("apply_rotary_pos_emb_vision", "(q, k, cos, sin)", "half")

#: What a rotary apply is named like: a global an attention ``forward`` calls that rotates q and k.
APPLY_NAME = re.compile(r"apply_\w*(rotary|rope)")


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family: ``model_type`` (its config's, which names its modeling module), the ``attention``
    classes whose ``forward`` rotates q and k, the applies that ``forward`` ``calls`` (posenc replaces them
    all or none: one it has no apply of its own for keeps the family's own), and the applies of the module to
    ``leave`` alone (a module whose ``forward`` calls only those is not an attention module of the row)."""

    model_type: str
    attention: tuple[str, ...]
    calls: tuple[Apply, ...] = (ROTATE_HALF,)
    leave: tuple[Apply, ...] = ()

    @property
    def module(self) -> str:
        """The modeling module of the family (``*`` for :data:`GENERIC`)."""
        if self.model_type == "*":
            return "*"
        return f"transformers.models.{self.model_type}.modeling_{self.model_type}"


#: The families posenc knows, by modeling module.
FAMILIES: dict[str, Family] = {
    row.module: row
    for row in (
        Family("llama", ("LlamaAttention",)),
        Family("mistral", ("MistralAttention",)),
        Family("qwen2", ("Qwen2Attention",)),
        Family("qwen3", ("Qwen3Attention",)),
        Family("phi3", ("Phi3Attention",)),
        Family("gemma3", ("Gemma3Attention",)),
        Family("gpt_neox", ("GPTNeoXAttention",)),
        # the text model's attention; the vision tower's rotates by its own apply, left alone
        Family("qwen2_vl", ("Qwen2VLAttention",), leave=(VISION_HALF,)),
        # MLA: config.rope_interleave picks one of two applies at run time; posenc has an exact first one
        Family("deepseek_v3", ("DeepseekV3Attention",), calls=(ROTATE_HALF, INTERLEAVED_PAIRS)),
    )
}

#: The row of a modeling module that has none: an attention whose ``forward`` calls ``apply_rotary_pos_emb``
#: alone; a vision tower's apply left alone.
GENERIC = Family("*", (), leave=(VISION_HALF,))


def family_of(module: str | None) -> Family:
    """The row of the modeling module ``module`` (an attention ``forward``'s ``__module__``), else
    :data:`GENERIC`."""
    return FAMILIES.get(module or "", GENERIC)
