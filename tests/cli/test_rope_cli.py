"""``posenc rope CONFIG``: the exact rotary table of a model's config.json, in every format; bad input is
one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

import posenc.rope as rope
from posenc.cli import main
from tests.rope.test_rope_parameters import CONFIGS


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS["qwen2_yarn"]))
    return path


def test_the_table_in_every_format(config_path, tmp_path, capsys):
    params = rope.config(config_path)
    cos, sin = rope.cos_sin(np.arange(100, 104), params)
    assert main(["rope", str(config_path), "--positions", "100:104", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rope_type"] == "yarn" and data["positions"] == [100, 101, 102, 103]
    np.testing.assert_array_equal(np.array(data["values"], dtype=np.float32), np.concatenate([cos, sin], -1))
    assert data["columns"][1] == "cos1 θ1" and data["columns"][params.rotary_dim] == "sin0 θ0"
    out = tmp_path / "rope.npy"
    assert main(["rope", str(tmp_path), "--positions", "100:104", "--format", "npy", "-o", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out), np.stack([cos, sin]))
    assert main(["rope", str(config_path), "--positions", "0:2", "--layout", "interleaved"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[1:5] == ["cos0", "θ0", "cos1", "θ0"] and len(lines) == 3


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--positions", "8:2"], "--positions must be A:B"),
        (["--positions", "x"], "--positions must be A:B"),
        (["--positions", "0:4294967296"], "2**31"),
        (["--format", "npy"], "--output"),
        (["--dtype", "int8"], "dtype"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(config_path, capsys, arguments, words):
    assert main(["rope", str(config_path), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("posenc: error:") and words in err


def test_a_missing_config_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["rope", str(tmp_path / "none.json")]) == 2
    assert "config.json" in capsys.readouterr().err


def test_a_missing_config_is_named_missing_in_the_words_of_the_command(tmp_path, capsys, monkeypatch):
    """``posenc rope config.json`` with no such file: "no such file or folder", never the library's cfg=; a
    folder without a config.json keeps "is not a config.json file"."""
    monkeypatch.chdir(tmp_path)
    assert main(["rope", "config.json"]) == 2
    assert capsys.readouterr().err == (
        "posenc: error: no such file or folder: 'config.json' (give the path of a model's config.json, or "
        "the folder holding it)\n"
    )
    assert main(["rope", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"posenc: error: {str(tmp_path)!r} is not a config.json file (nor a folder holding one)\n"


def test_layer_type_picks_one_entry_of_per_layer_rope_parameters(tmp_path, capsys):
    from tests.rope.test_rope_torch import GEMMA3

    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA3))
    for layer in ("full_attention", "sliding_attention"):
        argv = ["rope", str(path), "--positions", "100:103", "--format", "json", "--layer-type", layer]
        assert main(argv) == 0
        data = json.loads(capsys.readouterr().out)
        cos, sin = rope.cos_sin(np.arange(100, 103), rope.config(GEMMA3, layer_type=layer))
        assert data["rope_type"] == ("linear" if layer == "full_attention" else "default")
        np.testing.assert_array_equal(
            np.array(data["values"], dtype=np.float32), np.concatenate([cos, sin], -1)
        )
    for extra, words in (
        (
            [],
            "nested per layer type ('full_attention', 'sliding_attention'): pick one with --layer-type NAME",
        ),
        (["--layer-type", "nope"], "got --layer-type 'nope': pick one with --layer-type NAME"),
    ):
        assert main(["rope", str(path), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(CONFIGS["llama2"]))
    assert main(["rope", str(flat), "--layer-type", "full_attention"]) == 2
    assert "--layer-type full_attention was given but" in capsys.readouterr().err
