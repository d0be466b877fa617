"""Errors with structure: every refusal of bad input is a PosencError (a ValueError or TypeError as before)
that names the parameter to change, so the command line and the explorer map it to their own flag or field
without reading the message; the message itself is the library's, unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import posenc
from posenc import rope
from posenc.errors import PosencError, PosencTypeError, PosencValueError

CASES = [
    (lambda: posenc.table(4, 4096.0), PosencTypeError, "d_model"),
    (lambda: posenc.table(4, 1), PosencValueError, "d_model"),
    (lambda: posenc.table(4, 8, base=0.5), PosencValueError, "base"),
    (lambda: posenc.table(4, 8, shift=40), PosencValueError, "shift"),
    (lambda: posenc.table(4, 8, layout="x"), PosencValueError, "layout"),
    (lambda: posenc.table(4, 8, dtype="int8"), PosencValueError, "dtype"),
    (lambda: posenc.encode([np.nan], 8), PosencValueError, "positions"),
    (lambda: posenc.encode([True], 8), PosencTypeError, "positions"),
    (lambda: rope.config(head_dim=2**22), PosencValueError, "head_dim"),
    (lambda: rope.config(head_dim=8, base=0.5), PosencValueError, "rope_theta (base)"),
    (
        lambda: rope.config(head_dim=8, scaling={"rope_type": "linear", "factor": "8"}),
        PosencTypeError,
        "factor",
    ),
    (lambda: rope.config(head_dim=8, scaling={"rope_type": "linear"}), PosencValueError, "factor"),
    (lambda: rope.config(head_dim=8, scaling={"rope_type": "ntk"}), PosencValueError, "rope_type"),
    (
        lambda: rope.config(head_dim=8, scaling={"rope_type": "yarn", "factor": 4.0, "beta_slow": 64.0}),
        PosencValueError,
        "original_max_position_embeddings",
    ),
    (
        lambda: rope.config(
            head_dim=8,
            max_position_embeddings=64,
            scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 1.0},
        ),
        PosencValueError,
        "low_freq_factor",
    ),
]


@pytest.mark.parametrize(("call", "kind", "parameter"), CASES)
def test_a_refusal_names_its_parameter(call, kind, parameter):
    with pytest.raises(PosencError) as caught:
        call()
    error = caught.value
    assert type(error) is kind and isinstance(error, ValueError if kind is PosencValueError else TypeError)
    assert error.parameter == parameter
    assert parameter.split(" ")[0] in str(error)  # the message names it too


def test_worded_writes_the_parameter_as_a_flag_and_leaves_the_rest():
    error = PosencValueError(
        "shift=40 with d_model=8 gives n - shift = 4 - 40 <= 0; use shift < 4", parameter="shift"
    )
    assert error.worded({"shift": "--shift"}) == (
        "--shift 40 with d_model=8 gives n - shift = 4 - 40 <= 0; use shift < 4"
    )
    assert error.worded({"base": "--base"}) == str(error)  # not named in the message: unchanged
    assert error.worded({"shift": "--shift", "d_model": "--d-model"}) == (
        "--shift 40 with --d-model 8 gives n - shift = 4 - 40 <= 0; use shift < 4"
    )
    assert PosencValueError("key='pe' is not in the file", parameter="key").worded({"key": "--key"}) == (
        "--key pe is not in the file"
    )
    assert PosencValueError("no parameter").worded({"x": "--x"}) == "no parameter"
    assert PosencValueError("d_model must be >= 2", parameter="d_model").worded({"d_model": "--d-model"}) == (
        "--d-model must be >= 2"
    )


def test_worded_takes_each_form_of_the_parameter():
    def worded(message, names):
        return PosencValueError(message, parameter="key").worded(names)

    assert worded("name one with key=", {"key": "--key"}) == "name one with --key"
    assert worded("name one with key=; or", {"key": "--key"}) == "name one with --key; or"
    assert worded("key='pe' is absent", {"key": "--key"}) == "--key pe is absent"
    assert worded("key='pe' is absent", {"key": ""}) == "'pe' is absent"
    assert worded("key='pe' is absent", {"key": "table"}) == "table='pe' is absent"
    assert worded("monkey=3 and key=3", {"key": "--key"}) == "monkey=3 and --key 3"
    assert worded("key=-1 is below 0", {"key": "--key"}) == "--key -1 is below 0"
