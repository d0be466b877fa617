"""A rope type is one object in one place (posenc.rope.kinds): every adapter asks it, none tests a type by
its name; the types whose frequencies depend on the sequence length behave alike on every path."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc.rope as rope
import posenc.torch as ptorch
from posenc.rope import kinds
from posenc.torch import fused_rotary
from tests.rope.test_rope_parameters import CONFIGS

SRC = Path(__file__).resolve().parents[2] / "src" / "posenc"
#: A test of a rope type by its name: `rope_type == "x"`, `rope_type in (...)`, `kind.name != "x"`, or any
#: comparison with a type's name (`x == "longrope"`, `"dynamic" in names`).
_NAMES = "|".join(kinds.TYPES)
BY_NAME = re.compile(
    rf"""(rope_type|kind\.name)\s*(==|!=|\bin\b|\bnot in\b)"""
    rf"""|(==|!=)\s*["']({_NAMES})["']|["']({_NAMES})["']\s*(==|!=|\bin\b|\bnot in\b)"""
)


def test_no_module_tests_a_rope_type_by_name_outside_kinds():
    found = [
        f"{path.relative_to(SRC)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        if path != SRC / "rope" / "kinds.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if BY_NAME.search(line.split("#")[0])
    ]
    assert found == []


def test_every_type_is_one_entry_whose_fields_are_the_records():
    fields = {field.name for field in dataclasses.fields(rope.RopeParameters)}
    assert tuple(kinds.TYPES) == kinds.ROPE_TYPES
    for name, kind in kinds.TYPES.items():
        assert kind.name == name and set(kind.fields) <= fields and set(kind.defaults) <= set(kind.fields)
    assert {name for name, kind in kinds.TYPES.items() if kind.depends_on_length} == {"dynamic", "longrope"}
    assert kinds.named("su") is kinds.TYPES["longrope"] and kinds.named("mrope") is kinds.TYPES["default"]
    with pytest.raises(ValueError, match=r"not a rope type posenc\.rope knows; use one of default, linear"):
        kinds.named("ntk")
    with pytest.raises(TypeError, match="rope_type must be a string"):
        kinds.named(3)


@pytest.mark.parametrize("name", ["phi3_mini_128k", "dynamic"])
def test_length_dependent_types_agree_on_numpy_torch_and_the_portable_algorithm(name):
    """At lengths on both sides of the type's switch (longrope: original_max_position_embeddings; dynamic:
    max_position_embeddings): NumPy with and without seq_len, torch eager on the CPU (the core) and the
    portable algorithm (the operator every device and every compiled program runs), bit for bit."""
    params = rope.config(CONFIGS[name])
    module = ptorch.RotaryEmbedding(params)
    x = torch.zeros(1, 1, 4)
    for top in (100, 4095, 4096, 9000):
        ids = np.array([[0, 7, top]])
        length = top + 1
        want = rope.cos_sin(ids, params, seq_len=length)
        for got in (
            rope.cos_sin(ids, params),  # seq_len from the positions
            module(x, torch.from_numpy(ids)),
            module(x, torch.from_numpy(ids), seq_len=length),
            _portable(params, ids, length),
        ):
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(np.asarray(a), b)


def _portable(params, ids, length):
    """The portable algorithm's rows, as the operator's device body computes them (on the CPU here)."""
    from posenc.torch import operator

    positions, key = torch.from_numpy(ids), operator.params_json(params)
    if params.kind.switch is not None:  # no seq_len: picked with torch.where, no host read
        return operator.rotary_rows(positions, key, -1, "float32", "half")
    return operator.rotary_rows(positions, key, length, "float32", "half")


def test_the_fused_kernel_leaves_a_switching_type_without_seq_len_to_the_device_pick():
    """The fused kernel would read max(positions) on the host (a sync per attention layer on CUDA): a type
    that switches between two sets (longrope) goes the unfused way, which picks on the device; given
    seq_len, or a type that does not switch, it is fusable."""
    q = torch.zeros(1, 2, 3, 96)
    ids = torch.arange(3)[None]
    longrope, llama = rope.config(CONFIGS["phi3_mini_128k"]), rope.config(CONFIGS["llama31_8b"])
    assert fused_rotary._fusable(q, q, ids, longrope, 1, None) is None
    assert fused_rotary._fusable(q, q, ids, longrope, 1, 5000) == 1
    q = torch.zeros(1, 2, 3, 128)
    assert fused_rotary._fusable(q, q, ids, llama, 1, None) == 1
