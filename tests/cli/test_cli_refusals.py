"""What a hostile pass over the command line found: a value refused after the work was done, an output
written over the command's own input, a config that crashed the reader, options that took an empty value
for no value. Each is now one line on stderr and exit code 2, before any work, and the input is kept."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import posenc
import posenc.torch
from posenc.analysis import compare as comparing
from tests.support.cli_cases import assert_refused, run


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"rope_theta": 10000, "head_dim": 16}))
    return path


def test_demo_refuses_a_file_for_its_folder_before_printing_anything(capsys, tmp_path):
    file = tmp_path / "notes.json"
    file.write_text("{}")
    for out in (file, file / "figures"):
        code, printed, err = run(capsys, "demo", "--out", str(out))
        assert_refused(code, err, str(file), "folder")
        assert printed == ""  # no section ran before the refusal
    assert file.read_text() == "{}"


def test_an_output_that_is_the_commands_own_input_is_refused_and_the_input_kept(capsys, tmp_path, config):
    saved = config.read_text()
    code, _, err = run(capsys, "rope", str(config), "-o", str(config))
    assert_refused(code, err, "--output", "input")
    assert config.read_text() == saved
    table = tmp_path / "pe.npy"
    np.save(table, posenc.table(64, 16))
    before = table.read_bytes()
    code, _, err = run(capsys, "audit", str(table), "--html", str(table))
    assert_refused(code, err, "--html", "input")
    assert table.read_bytes() == before
    # a folder audited: its config.json is an input too; a report beside it is not
    code, _, err = run(capsys, "audit", str(config.parent), "--html", str(config))
    assert_refused(code, err, "--html", "folder audited")
    assert config.read_text() == saved


@pytest.mark.parametrize(
    "content, words",
    [
        ('{"a":' * 100_000 + "1" + "}" * 100_000, ("nests deeper",)),
        (b"\x80\x81 not utf-8", ("not valid JSON",)),
    ],
    ids=["nested 100000 deep", "not UTF-8"],
)
def test_a_config_the_json_reader_cannot_take_is_one_line(capsys, tmp_path, content, words):
    path = tmp_path / "config.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    code, _, err = run(capsys, "rope", str(path))
    assert_refused(code, err, str(path), *words)


def test_a_config_larger_than_any_models_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    from posenc import rope
    from posenc.rope import configs

    monkeypatch.setattr(configs, "CONFIG_BYTES", 64)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"rope_theta": 10000, "head_dim": 16, "padding": "x" * 100}))
    with pytest.raises(ValueError, match="larger than"):
        rope.config(str(path))


@pytest.mark.parametrize("value", ["0", "-1"])
def test_rope_seq_len_below_one_is_refused_for_every_rope_type(capsys, config, value):
    code, _, err = run(capsys, "rope", str(config), f"--seq-len={value}")
    assert_refused(code, err, "--seq-len must be an integer >= 1")


def test_a_value_argparse_takes_for_an_option_gets_the_way_to_write_it(capsys, config):
    code, _, err = run(capsys, "rope", str(config), "--positions", "-3:2")
    assert_refused(code, err, "--positions=-")
    code, out, _ = run(capsys, "rope", str(config), "--positions=-3:2")
    assert code == 0 and out.splitlines()[1].split()[0] == "-3"


@pytest.mark.parametrize("option", ["--key", "--dtype", "--tol", "--preset"])
def test_audit_refuses_an_empty_option_value(capsys, tmp_path, option):
    table = tmp_path / "pe.npy"
    np.save(table, posenc.table(8, 8))
    code, _, err = run(capsys, "audit", str(table), option, "")
    assert_refused(code, err, option, "empty")
    code, _, err = run(capsys, "identify", str(table), "--key", "")
    assert_refused(code, err, "empty")
    assert "only one" not in err  # it said "leave it out for the file's only one" of a file of several


def test_an_empty_key_is_refused_naming_what_leaving_it_out_does():
    from posenc.porting.load import load_stored_table

    with pytest.raises(ValueError, match="leave key out: posenc then takes the file's one positional table"):
        load_stored_table("any.npy", key=" ")


@pytest.mark.parametrize(
    "args",
    [("table", "5", "4", "-o"), ("rope", "cfg.json", "-o"), ("plot", "heatmap", "-o"), ("demo", "--out")],
)
def test_an_empty_file_or_folder_name_is_refused(capsys, tmp_path, monkeypatch, args):
    """``table -o ''`` said "cannot write : No such file"; ``demo --out ''`` wrote into the current folder."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args, "")
    assert_refused(code, err, args[-1], "an empty name; name a file or folder")
    assert list(tmp_path.iterdir()) == []


def test_compare_names_its_own_options(capsys):
    """The library's window, positions and d_model, as the command's --window, --positions, --d-model."""
    for flag, value in (("--window", "0"), ("--positions", "-5"), ("--d-model", "0")):
        code, _, err = run(capsys, "compare", flag, value)
        assert_refused(code, err, f"error: {flag} must be an integer")


def test_compare_refuses_an_empty_position_in_its_list(capsys):
    code, _, err = run(capsys, "compare", "--positions", "1,,2", "--window", "4")
    assert_refused(code, err, "'1,,2'")


def test_compare_counts_distinct_rows_as_numpy_does_and_minus_zero_as_zero():
    rng = np.random.default_rng(0)
    for _ in range(100):
        rows = rng.integers(-2, 3, size=(int(rng.integers(1, 30)), int(rng.integers(1, 5)))).astype(float)
        rows[rows == 0] = np.where(rng.random(int((rows == 0).sum())) < 0.5, 0.0, -0.0)
        assert comparing._distinct_rows(rows) == len(np.unique(rows, axis=0))
    assert comparing._distinct_rows(np.empty((0, 3))) == 0


def test_compare_of_a_million_columns_counts_its_rows_at_once(capsys):
    # np.unique(axis=0) built a record type of a million fields: minutes for one row
    code, out, err = run(capsys, "compare", "--d-model", "1048576", "--window", "1", "--positions", "5")
    assert code == 0, err
    assert out.count("(1 distinct)") == 9


def test_compare_refuses_a_window_memory_cannot_hold_before_any_work(monkeypatch):
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: 1 << 30)
    with pytest.raises(ValueError, match=r"needs about 19\.5 GiB"):
        comparing.compare(262_144, window=1000)


def test_plots_of_no_positions_are_refused(capsys, tmp_path):
    for kind in ("dot-product", "heatmap", "waves"):
        code, _, err = run(capsys, "plot", kind, "--length", "0", "-o", str(tmp_path / "x.png"))
        assert_refused(code, err, "length must be an integer >= 1")
    assert not (tmp_path / "x.png").exists()


def test_sinusoids_of_a_narrow_width_draw_every_frequency(capsys, tmp_path):
    code, _, err = run(capsys, "plot", "sinusoids", "--d-model", "2", "-o", str(tmp_path / "s.png"))
    assert code == 0, err and (tmp_path / "s.png").stat().st_size > 0


def test_identify_of_an_int64_table_says_how_it_read_it_and_reads_it_whole(capsys, tmp_path):
    path = tmp_path / "big.pt"
    torch.save(torch.full((4, 4), 2**25 + 1, dtype=torch.int64), path)
    code, out, _ = run(capsys, "identify", str(path))
    assert code == 1 and "int64 table of shape (4, 4) (read as float64)" in out and "exactly" not in out
    _, values, stored = posenc.porting.load_stored_table(path)
    assert stored == "int64" and values.dtype == np.float64 and (values == 2**25 + 1).all()


def test_identify_of_a_meta_tensor_says_it_holds_no_values(capsys, tmp_path):
    path = tmp_path / "meta.pt"
    torch.save(posenc.torch.table(64, 16).to("meta"), path)
    code, _, err = run(capsys, "identify", str(path))
    assert_refused(code, err, "a meta tensor, which holds no values")


def test_rope_counts_the_arrays_its_work_holds_and_says_how_to_ask_for_less(monkeypatch, capsys, tmp_path):
    """``posenc rope --positions 0:100000000`` said "(3, 100000000, 16) … 17.9 GiB", passed the check with
    21 GiB free and was killed for memory: cos_sin holds the output's size ~4.1 times (measured) and its
    positions; the advice names what the command takes, not the library's start= and out=."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"head_dim": 16, "rope_theta": 10000.0, "max_position_embeddings": 64}))
    needed = 5 * 4 * 16 * 10_000_000 + 8 * 10_000_000  # five float32 outputs and the int64 positions
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: needed - 1)
    code, _, err = run(capsys, "rope", str(config), "--positions", "0:10000000", "--format", "npy", "-o", "x")
    assert_refused(code, err, "an output of shape (10000000, 16) and dtype float32 needs 3.05 GiB (5 arrays")
    assert "ask for fewer positions (--positions A:B)" in err and "start=" not in err
    with pytest.raises(ValueError, match="compute them in chunks of positions"):
        posenc.rope.cos_sin(np.arange(10_000_000), posenc.rope.config(config))
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: needed)
    posenc.rope.tables.fits_in_memory((10_000_000,), 16, np.dtype(np.float32))  # exactly enough: no error
