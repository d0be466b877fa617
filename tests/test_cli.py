"""The ``posenc`` command line: values against the seed documents and against ``posenc.table``
elementwise, every output format read back, one-line errors with exit code 2, and the real entry
points (``python -m posenc`` and the installed console script) in a subprocess."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.cli import main

# `posenc table 5 4`: the first seed document's table (d_model = 4, base 10000), to 4 decimals.
# The seed truncates cos(3) = -0.98999... to -0.9899; correctly rounded it is -0.9900. Column 3 is
# the float32 value rounded: cos(0.01) = 0.99995000042 is 0.99994999 in float32, hence 0.9999.
SEED_TABLE_5_4 = [
    ["0", "0.0000", "1.0000", "0.0000", "1.0000"],
    ["1", "0.8415", "0.5403", "0.0100", "0.9999"],
    ["2", "0.9093", "-0.4161", "0.0200", "0.9998"],
    ["3", "0.1411", "-0.9900", "0.0300", "0.9996"],
    ["4", "-0.7568", "-0.6536", "0.0400", "0.9992"],
]
HEADER_5_4 = ["pos", "0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main(args)``: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def text_rows(out: str) -> tuple[list[str], list[list[str]]]:
    """Split the text format into its header cells (separated by 2+ spaces) and its value rows."""
    header, *lines = out.rstrip("\n").split("\n")
    return re.split(r"\s{2,}", header.strip()), [line.split() for line in lines]


def read_csv(text: str) -> tuple[list[str], list[int], np.ndarray]:
    header, *rows = list(csv.reader(io.StringIO(text)))
    positions = [int(row[0]) for row in rows]
    values = np.array([[float(v) for v in row[1:]] for row in rows]).reshape(len(rows), -1)
    return header, positions, values


def assert_same(values: np.ndarray, expected: np.ndarray) -> None:
    """Elementwise equality of the float64 conversions (every column, every row, exact)."""
    np.testing.assert_array_equal(values, np.asarray(expected, dtype=np.float64), strict=True)


# --- posenc table: text ---------------------------------------------------------------------------


def test_table_text_has_the_seed_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "table", "5", "4")
    assert (code, err) == (0, "")
    header, rows = text_rows(out)
    assert header == HEADER_5_4
    assert rows == SEED_TABLE_5_4


def test_table_text_is_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "12", "6", "--start", "-3")
    lines = out.splitlines()
    assert len({len(line) for line in lines}) == 1  # right-aligned: every line equally long
    assert [line.split()[0] for line in lines[1:]] == [str(p) for p in range(-3, 9)]


LAYOUT_HEADERS = [
    ("interleaved", 4, ["0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1"]),
    ("sin_cos", 4, ["0 sin ω0", "1 sin ω1", "2 cos ω0", "3 cos ω1"]),
    ("cos_sin", 4, ["0 cos ω0", "1 cos ω1", "2 sin ω0", "3 sin ω1"]),
    ("interleaved", 5, ["0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1", "4 zero"]),
    (
        "sin_cos",
        7,
        ["0 sin ω0", "1 sin ω1", "2 sin ω2", "3 cos ω0", "4 cos ω1", "5 cos ω2", "6 zero"],
    ),
    ("cos_sin", 3, ["0 cos ω0", "1 sin ω0", "2 zero"]),
]


@pytest.mark.parametrize(("layout", "d_model", "columns"), LAYOUT_HEADERS)
def test_header_names_function_and_frequency(
    capsys: pytest.CaptureFixture[str], layout: str, d_model: int, columns: list[str]
) -> None:
    _, out, _ = run(capsys, "table", "3", str(d_model), "--layout", layout)
    assert text_rows(out)[0] == ["pos", *columns]
    _, out, _ = run(capsys, "table", "3", str(d_model), "--layout", layout, "--format", "csv")
    assert read_csv(out)[0] == ["pos", *columns]


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize(("d_model", "shift"), [(4, 0), (7, 0), (8, 1), (9, 0.5)])
def test_header_labels_match_the_values(
    capsys: pytest.CaptureFixture[str], layout: str, d_model: int, shift: float
) -> None:
    """Each label 'k sin ωi' / 'k cos ωi' / 'k zero' says what column k holds."""
    args = ["table", "50", str(d_model), "--start", "-7", "--base", "100", "--shift", str(shift)]
    _, out, _ = run(capsys, *args, "--layout", layout, "--format", "csv", "--dtype", "float64")
    header, positions, values = read_csv(out)
    omegas = posenc.frequencies(d_model, base=100, shift=shift)
    p = np.array(positions, dtype=np.float64)
    for k, label in enumerate(header[1:]):
        dim, name = label.split(" ", 1)
        assert int(dim) == k
        if name == "zero":
            expected = np.zeros_like(p)
        else:
            function, omega = name.split(" ω")
            expected = getattr(np, function)(p * omegas[int(omega)])
        np.testing.assert_allclose(values[:, k], expected, rtol=0, atol=1e-12, err_msg=label)


def test_start(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--start", "100", "--format", "csv")
    _, positions, values = read_csv(out)
    assert positions == [100, 101, 102]
    assert_same(values, posenc.table(3, 4, start=100))
    _, out, _ = run(capsys, "table", "3", "4", "--start", "100")
    assert [row[0] for row in text_rows(out)[1]] == ["100", "101", "102"]
    assert text_rows(out)[1][0][1] == f"{np.sin(np.float32(100.0)):.4f}"  # sin(100) = -0.5064


@pytest.mark.parametrize(
    ("digits", "row_1"),
    [("6", "0.841471 0.540302 0.010000 0.999950"), ("2", "0.84 0.54 0.01 1.00"), ("0", "1 1 0 1")],
)
def test_digits(capsys: pytest.CaptureFixture[str], digits: str, row_1: str) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--digits", digits)
    assert text_rows(out)[1][1] == ["1", *row_1.split()]


def test_no_negative_zero(capsys: pytest.CaptureFixture[str]) -> None:
    # sin(-0.001) = -0.001 shows as 0.00, not -0.00
    _, out, _ = run(capsys, "table", "2", "2", "--start", "-1", "--base", "2", "--digits", "0")
    assert "-0" not in out


def test_wide_table_is_printed_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "2", "512")
    header, rows = text_rows(out)
    assert len(header) == 513 and header[-1] == "511 cos ω255"
    assert all(len(row) == 513 for row in rows)


# --- posenc table: csv, json, npy, --output -------------------------------------------------------

DTYPES = ["float32", "float64", "float16", "bfloat16"]
OPTIONS = [
    ("7", "6"),
    ("5", "9", "--start", "-2", "--layout", "sin_cos", "--shift", "1"),
    ("4", "8", "--base", "100", "--layout", "cos_sin", "--start", "1000000"),
]


def _flags(args: tuple[str, ...]) -> dict[str, str]:
    """The ``--name value`` pairs after LENGTH and D_MODEL."""
    return dict(zip(args[2::2], args[3::2], strict=True))


def _table_call(args: tuple[str, ...], dtype: str) -> np.ndarray:
    """posenc.table with the options of the command line arguments ``args``."""
    options = _flags(args)
    return posenc.table(
        int(args[0]),
        int(args[1]),
        start=int(options.get("--start", 0)),
        base=float(options.get("--base", 10000)),
        shift=float(options.get("--shift", 0)),
        layout=options.get("--layout", "interleaved"),
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", OPTIONS)
def test_csv_reads_back_exactly(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], dtype: str
) -> None:
    code, out, _ = run(capsys, "table", *args, "--dtype", dtype, "--format", "csv")
    assert code == 0
    _, positions, values = read_csv(out)
    expected = _table_call(args, dtype)
    assert positions[0] == int(_flags(args).get("--start", 0))
    assert_same(values, expected.astype(np.float64))


def test_csv_digits(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--format", "csv", "--digits", "3")
    assert out.splitlines()[2] == "1,0.841,0.540,0.010,1.000"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", OPTIONS)
def test_json_reads_back_exactly(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], dtype: str
) -> None:
    code, out, _ = run(capsys, "table", *args, "--dtype", dtype, "--format", "json")
    assert code == 0
    document = json.loads(out)
    expected = _table_call(args, dtype)
    meta = ["d_model", "base", "shift", "scale", "layout", "odd", "start", "dtype"]
    assert list(document) == [*meta, "positions", "columns", "values"]
    assert document["d_model"] == int(args[1])
    assert document["dtype"] == dtype
    assert len(document["positions"]) == int(args[0])
    assert document["positions"] == list(range(document["start"], document["start"] + int(args[0])))
    assert len(document["columns"]) == int(args[1])
    assert_same(np.array(document["values"]), expected.astype(np.float64))


def test_json_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    args = "table 2 5 --base 1e4 --shift 1 --layout sin_cos --start 3 --format json --digits 2"
    _, out, _ = run(capsys, *args.split())
    document = json.loads(out)
    assert {k: document[k] for k in ("d_model", "base", "shift", "layout", "start", "dtype")} == {
        "d_model": 5,
        "base": 10000.0,
        "shift": 1,
        "layout": "sin_cos",
        "start": 3,
        "dtype": "float32",
    }
    assert document["columns"] == ["0 sin ω0", "1 sin ω1", "2 cos ω0", "3 cos ω1", "4 zero"]
    # position 3, ω = (1, 1e-4): sin 3, sin 3e-4, cos 3, cos 3e-4, zero; 2 decimals
    assert document["values"][0] == [0.14, 0.0, -0.99, 1.0, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_round_trip_is_bit_for_bit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dtype: str
) -> None:
    path = tmp_path / "pe.bin"  # any name: the file is written where asked, no '.npy' appended
    args = ("9", "10", "--start", "-4", "--layout", "sin_cos", "--shift", "1")
    code, out, err = run(capsys, "table", *args, "--dtype", dtype, "--format", "npy", "-o", str(path))
    assert (code, out, err) == (0, "", "")
    expected = _table_call(args, dtype)
    loaded = np.load(path)
    if dtype == "bfloat16":  # .npy has no bfloat16: stored as raw 2-byte values
        loaded = loaded.view(expected.dtype)
    assert loaded.dtype == expected.dtype and loaded.shape == expected.shape
    assert loaded.tobytes() == expected.tobytes()


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
def test_output_file_holds_what_stdout_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / f"pe.{fmt}"
    code, out, err = run(capsys, "table", "6", "5", "--format", fmt, "--output", str(path))
    assert (code, out, err) == (0, "", "")
    _, expected, _ = run(capsys, "table", "6", "5", "--format", fmt)
    assert path.read_text(encoding="utf-8") == expected


def test_bad_input_leaves_no_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "pe.csv"
    assert run(capsys, "table", "5", "1", "--format", "csv", "--output", str(path))[0] == 2
    assert not path.exists()


def test_empty_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", "0", "4")
    assert (code, text_rows(out)) == (0, (HEADER_5_4, []))


# --- posenc demo ---------------------------------------------------------------------------------

DEMO_FIGURES = [
    "heatmap.png",
    "dot-product-8.png",
    "dot-product-256.png",
    "sinusoids.png",
    "waves.png",
    "similarity.png",
    "collisions.png",
]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str, Path]:
    """``posenc demo --out DIR``, run once for the module: (exit code, stdout, stderr, DIR)."""
    folder = tmp_path_factory.mktemp("demo") / "figures"  # not there yet: the demo creates it
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["demo", "--out", str(folder)])
    return code, out.getvalue(), err.getvalue(), folder


def test_demo(demo_run: tuple[int, str, str, Path]) -> None:
    code, out, err, _ = demo_run
    assert (code, err) == (0, "")
    assert out.count("249.1021") >= 3  # PE(1)·PE(2), PE(80)·PE(81) and the closed form, k = 1
    assert out.count("117.5290") >= 3  # PE(1)·PE(80), PE(2)·PE(81) and the closed form, k = 79
    for number in ("0.0998", "0.1987", "0.2955", "0.8415", "0.5403", "-0.7568", "0.00999983"):
        assert number in out
    assert "= 100" in out and "ω_1 = 0.01" in out  # the denominators 1 and 100
    assert "Embedding" in out and "Input to the Transformer" in out


def test_demo_writes_every_figure(demo_run: tuple[int, str, str, Path]) -> None:
    from matplotlib import image

    _, out, _, folder = demo_run
    assert sorted(p.name for p in folder.iterdir()) == sorted(DEMO_FIGURES)
    for index, name in enumerate(DEMO_FIGURES, 1):
        assert f"[{index}/{len(DEMO_FIGURES)}]" in out  # a progress line per figure
        assert f"-o {folder / name}" in out  # with the command that draws it
        picture = image.imread(folder / name)
        assert picture.shape[1] >= 800 and picture[..., :3].var() > 0.005


def test_demo_prints_the_check_report(demo_run: tuple[int, str, str, Path]) -> None:
    _, out, _, _ = demo_run
    section = out.split("$ posenc check")[1]
    assert "$ posenc check" in out and "all 6 criteria pass" in section
    for title in ("unique encoding", "consistent distance", "generalises", "bounded", "deterministic"):
        assert title in section
    assert "position 257 has the same bfloat16 encoding as position 256" in out


def test_demo_default_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from posenc import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli.demo, "_SECTIONS", (cli.demo._figures,))
    monkeypatch.setattr(cli.demo, "_FIGURES", cli.demo._FIGURES[:1])
    assert main(["demo"]) == 0
    assert (tmp_path / "posenc-demo" / "heatmap.png").stat().st_size > 10_000


@pytest.mark.parametrize("command", [["table", "5", "4"], ["table", "4", "4", "--base", "100"]])
def test_demo_tables_are_what_the_commands_print(
    capsys: pytest.CaptureFixture[str], demo_run: tuple[int, str, str, Path], command: list[str]
) -> None:
    demo = demo_run[1]
    _, table, _ = run(capsys, *command)
    shown = (
        "    $ posenc "
        + " ".join(command)
        + "\n"
        + "".join("    " + line + "\n" for line in table.splitlines())
    )
    assert shown in demo


def test_demo_embedding_sum(demo_run: tuple[int, str, str, Path]) -> None:
    from posenc.cli.demo import _EMBEDDING

    out = demo_run[1]
    total = _EMBEDDING + posenc.table(3, 4)
    section = out.split("= Input to the Transformer")[1]
    for row in total.tolist():
        assert "  ".join(f"{v:.4f}".rjust(7) for v in row) in section


# --- posenc check ---------------------------------------------------------------------------------

CRITERIA = ["unique", "consistent", "generalises", "bounded", "deterministic", "shift_invariant"]


def test_check_passes_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "check")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("posenc check: d_model 512, positions 0..2047, base 10000, shift 0,")
    assert lines[-1] == "all 6 criteria pass"
    assert out.count("  pass  ") == 6 and "FAIL" not in out
    assert "unique encoding for each position" in out and "figure 3.714" in out


def test_check_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "check", "--json", "--d-model", "64", "--length", "500", "--dtype", "float16"
    )
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["passed"] is True
    assert report["options"] == {
        "d_model": 64,
        "length": 500,
        "base": 10000,
        "shift": 0,
        "layout": "interleaved",
        "dtype": "float16",
        "compute": "exact",
    }
    assert [c["name"] for c in report["criteria"]] == CRITERIA
    for criterion in report["criteria"]:
        assert {"name", "title", "passed", "figure", "detail"} <= set(criterion)
        assert criterion["passed"] is True and isinstance(criterion["figure"], float)
    from posenc import analysis

    margin = analysis.uniqueness_margin(500, 64, dtype="float16").distance
    assert report["criteria"][0]["figure"] == pytest.approx(margin)


def test_check_fails_with_exit_1_and_says_from_which_position(capsys: pytest.CaptureFixture[str]) -> None:
    """The usual bfloat16 code (angles computed in bfloat16) over 100,000 positions: not unique from 257."""
    args = ("check", "--dtype", "bfloat16", "--length", "100000", "--compute", "dtype")
    code, out, err = run(capsys, *args)
    assert code == 1
    assert "FAIL  unique encoding for each position" in out
    assert "position 257 has the same bfloat16 encoding as position 256" in out
    assert out.splitlines()[-1].startswith("3 of 6 fail: unique")
    # a long check shows its progress on stderr, a percentage per step
    lines = err.splitlines()
    assert lines and all(line.startswith("posenc check: ") and "%" in line for line in lines)
    assert "100%" in lines[-1]


def test_check_json_failure(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "check", "--d-model", "4", "--dtype", "bfloat16", "--length", "100000", "--json"
    )
    assert code == 1
    report = json.loads(out)
    assert report["passed"] is False
    unique = report["criteria"][0]
    assert (unique["passed"], unique["first_collision"], unique["equals"]) == (False, 84830, 7)


def test_check_posenc_bfloat16_stays_unique(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", "--dtype", "bfloat16", "--length", "4096")
    assert code == 0
    assert (
        "the usual code, computing the angles in bfloat16, gives position 257"
        in " ".join(out.split()).lower()
    )


def test_progress_on_a_terminal_is_one_line_updated_in_place() -> None:
    from posenc.cli.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    progress = Progress("check", enabled=True, stream=stream)
    progress(0.0, "encoding")
    progress(0.5, "hashing")
    progress.close()
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") == 4
    assert "posenc check:   0%  encoding" in text and "posenc check:  50%  hashing" in text
    assert text.endswith("\r") and text.split("\r")[-2].strip() == ""  # the line is cleared at the end
    quiet = io.StringIO()
    Progress("check", enabled=False, stream=quiet)(0.5, "hashing")
    assert quiet.getvalue() == ""


# --- posenc plot ----------------------------------------------------------------------------------

PLOT_ARGS = {
    "heatmap": ["--length", "30", "--d-model", "32"],
    "dot-product": [],
    "sinusoids": ["--d-model", "256"],
    "waves": ["--length", "100", "--d-model", "64", "--base", "100"],
    "similarity": ["--length", "60", "--dtype", "bfloat16"],
    "collisions": ["--length", "600", "--d-model", "64", "--dtype", "bfloat16"],
}


PLOT_SIZES = {  # inches
    "heatmap": (8, 5),
    "dot-product": (7, 6),
    "sinusoids": (12, 3.6),
    "waves": (8, 8),
    "similarity": (8, 5),
    "collisions": (11, 4.8),
}


@pytest.mark.parametrize("kind", list(PLOT_ARGS))
def test_plot_writes_a_picture(capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str) -> None:
    from matplotlib import image

    path = tmp_path / f"{kind}.png"
    code, out, err = run(capsys, "plot", kind, *PLOT_ARGS[kind], "-o", str(path), "--dpi", "50")
    assert (code, out, err) == (0, "", "")
    picture = image.imread(path)
    width, height = PLOT_SIZES[kind]
    assert picture.shape[:2] == (round(height * 50), round(width * 50))
    assert picture[..., :3].mean(axis=2).var() > 0.005


def test_plot_without_matplotlib_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.delitem(sys.modules, "posenc.plot", raising=False)
    monkeypatch.delattr(posenc, "plot", raising=False)  # `from . import plot` would find it there
    code, out, err = run(capsys, "plot", "heatmap", "-o", str(tmp_path / "pe.png"))
    assert (code, out) == (2, "")
    assert err == "posenc: error: posenc.plot needs matplotlib: pip install 'posenc[plot]'\n"


@pytest.mark.parametrize(("suffix", "magic"), [("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_vector_formats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str, magic: bytes
) -> None:
    path = tmp_path / f"dots.{suffix}"
    assert run(capsys, "plot", "dot-product", "--length", "5", "--output", str(path))[0] == 0
    assert path.read_bytes().startswith(magic)


# --- errors ---------------------------------------------------------------------------------------

BAD_INPUTS = [
    (["table", "5", "0"], "d_model"),
    (["table", "5", "4.0"], "D_MODEL"),
    (["table", "-1", "4"], "length"),
    (["table", "5", "4", "--base", "1"], "base"),
    (["table", "5", "4", "--base", "nan"], "base"),
    (["table", "5", "4", "--base", "inf"], "base"),
    (["table", "5", "4", "--base", "abc"], "--base"),
    (["table", "5", "4", "--base", "-inf"], "base must be finite; got -inf; pass a number > 1"),
    (["table", "5", "4", "--base", "-1e4"], "base must be > 1"),
    (["table", str(2**30), "4096"], "GiB of memory is available"),  # 16 TiB: refused before allocating
    (["table", "5", "2", "--shift", "1"], "shift"),
    (["table", "5", "4", "--layout", "foo"], "layout"),
    (["table", "5", "4", "--dtype", "foo"], "dtype"),
    (["table", "5", "4", "--start", str(2**31)], "2**31"),
    (["table", "5", "4", "--start", "1.5"], "--start"),
    (["table", "5", "4", "--digits", "-1"], "--digits"),
    (["table", "5", "4", "--format", "xml"], "--format"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
    (["table"], "required"),
    (["table", "5"], "D_MODEL"),
    (["table", "5", "4", "--format", "npy"], "--output"),
    (["table", "5", "4", "--format", "npy", "--digits", "3", "-o", "x.npy"], "--digits"),
    (["table", "5", "4", "--output", "{missing}/pe.csv"], "cannot write"),
    (["table", "5", "4", "--output", "{tmp}"], "cannot write"),
    (["table", "5", "4", "--bogus"], "--bogus"),
    (["check", "--length", "0"], "length"),
    (["check", "--length", "2.5"], "--length"),
    (["check", "--d-model", "1"], "d_model"),
    (["check", "--base", "1"], "base"),
    (["check", "--shift", "300"], "shift"),
    (["check", "--layout", "rows"], "layout"),
    (["check", "--dtype", "int8"], "dtype"),
    (["check", "--compute", "fast"], "compute"),
    (["check", "extra"], "unrecognized"),
    (["plot", "heatmap"], "--output"),
    (["plot", "pie", "-o", "x.png"], "invalid choice"),
    (["plot", "heatmap", "-o", "{tmp}/pe.gif"], ".png, .svg, .pdf"),
    (["plot", "heatmap", "-o", "{tmp}/pe"], ".png, .svg, .pdf"),
    (["plot", "sinusoids", "--length", "5", "-o", "{tmp}/s.png"], "--length does not apply to 'sinusoids'"),
    (["plot", "heatmap", "--dpi", "0", "-o", "{tmp}/pe.png"], "dpi"),
    (["plot", "heatmap", "--d-model", "1", "-o", "{tmp}/pe.png"], "d_model"),
    (["plot", "heatmap", "--layout", "rows", "-o", "{tmp}/pe.png"], "layout"),
    (["plot", "heatmap", "-o", "{missing}/pe.png"], "cannot write"),
    (["demo", "--out"], "--out"),
]


@pytest.mark.parametrize(("args", "mentions"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], mentions: str
) -> None:
    args = [a.format(missing=tmp_path / "missing", tmp=tmp_path) for a in args]
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1
    assert err.startswith("posenc: error: ")
    assert "Traceback" not in err and "usage:" not in err
    assert mentions in err


def test_bfloat16_without_ml_dtypes_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # `import ml_dtypes` raises ImportError
    code, _, err = run(capsys, "table", "2", "4", "--dtype", "bfloat16")
    assert code == 2
    assert err.startswith("posenc: error: ") and err.count("\n") == 1
    assert "pip install" in err


# --- --version, --help ----------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--version") == (0, f"posenc {posenc.__version__}\n", "")


@pytest.mark.parametrize(
    ("args", "example"),
    [
        (["--help"], "posenc table 5 4"),
        (["table", "--help"], "posenc table 4 4 --base 100"),
        (["demo", "-h"], "posenc demo --out"),
        (["check", "--help"], "posenc check --dtype bfloat16 --length 100000"),
        (["plot", "--help"], "posenc plot heatmap -o heatmap.png"),
    ],
)
def test_help(capsys: pytest.CaptureFixture[str], args: list[str], example: str) -> None:
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, "")
    assert "examples:" in out and example in out


# --- the real entry points ------------------------------------------------------------------------


def _console_script() -> str | None:
    beside = Path(sys.executable).with_name("posenc")
    return str(beside) if beside.exists() else shutil.which("posenc")


ENTRY_POINTS = [
    pytest.param([sys.executable, "-m", "posenc"], id="python -m posenc"),
    pytest.param("script", id="console script"),
]


def _entry(entry: list[str] | str) -> list[str]:
    if entry != "script":
        return list(entry)
    script = _console_script()
    if script is None:
        pytest.skip("the posenc console script is not installed (pip install -e .)")
    return [script]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_entry_point_prints_the_table(entry: list[str] | str) -> None:
    done = subprocess.run([*_entry(entry), "table", "5", "4"], capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert text_rows(done.stdout) == (HEADER_5_4, SEED_TABLE_5_4)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize("args", [["table", "5", "1"], ["table", "5", "4.0"], ["nope"]])
def test_entry_point_bad_input(entry: list[str] | str, args: list[str]) -> None:
    done = subprocess.run([*_entry(entry), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("posenc: error: ") and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


def test_closed_pipe_is_quiet() -> None:
    """``posenc table 200000 4 | head -1``: no traceback, no 'Exception ignored' message."""
    command = [sys.executable, "-m", "posenc", "table", "200000", "4"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().strip().startswith(b"pos")
        process.stdout.close()
        err = process.stderr.read()
        process.wait(timeout=60)
    assert err == b""
    assert process.returncode == 1


@pytest.mark.parametrize("args", [["table", "2", "4"], ["table", "--help"], ["demo"], ["check"]])
def test_ascii_terminal_does_not_crash(args: list[str], tmp_path: Path) -> None:
    environment = {**os.environ, "PYTHONIOENCODING": "ascii"}
    done = subprocess.run(  # in tmp_path: the demo writes its figures into ./posenc-demo
        [sys.executable, "-m", "posenc", *args], capture_output=True, text=True, env=environment, cwd=tmp_path
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "\\u03c9" in done.stdout  # ω, escaped


# --- identify ---------------------------------------------------------------------------------------


def test_identify_names_the_variant_of_a_stored_table(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    import torch

    np.save(tmp_path / "pe.npy", posenc.presets.get("fairseq", padding_idx=1).table(100, 32))
    code, out, _ = run(capsys, "identify", str(tmp_path / "pe.npy"))
    assert code == 0
    assert "1. matches: fairseq(padding_idx=1) (base=10000.0, shift=1.0" in out
    state = {
        "model": {"embed_positions.weight": torch.from_numpy(posenc.table(64, 16, shift=1, layout="cos_sin"))}
    }
    torch.save(state, tmp_path / "m.pt")
    code, out, _ = run(capsys, "identify", str(tmp_path / "m.pt"), "--json")
    assert code == 0
    best = json.loads(out)["candidates"][0]
    assert best["options"]["layout"] == "cos_sin" and best["matches"] is True


def test_identify_says_when_nothing_matches(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    np.save(tmp_path / "noise.npy", np.random.default_rng(0).random((20, 8)))
    code, out, _ = run(capsys, "identify", str(tmp_path / "noise.npy"))
    assert code == 1 and "1. does NOT match; nearest candidate" in out
    np.save(tmp_path / "near.npy", posenc.table(50, 16) + 0.01)  # the paper's table, shifted by 0.01
    code, out, _ = run(capsys, "identify", str(tmp_path / "near.npy"))
    assert code == 1 and "1. does NOT match; nearest candidate: paper" in out and "max error 0.01" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["identify", "missing.npy"], "no such file"),
        (["identify", "table.txt"], "unknown file type '.txt'"),
    ],
)
def test_identify_bad_input(capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "table.txt").write_text("1 2 3")
    code, _, err = run(capsys, *args)
    assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err


def test_table_npy_streams_in_chunks(capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch) -> None:
    from posenc import cli

    monkeypatch.setattr(cli.table, "_NPY_CHUNK_BYTES", 7 * 16 * 4)  # 7 rows of d_model 16, float32, per chunk
    monkeypatch.setattr(cli.table, "LONG", 1)  # show the progress
    path = tmp_path / "pe.npy"
    code, _, err = run(capsys, "table", "50", "16", "--start", "3", "--format", "npy", "--output", str(path))
    assert code == 0
    np.testing.assert_array_equal(np.load(path), posenc.table(50, 16, start=3))
    assert "posenc table: 100%  50 of 50 rows" in err and err.count("\n") == 8  # ceil(50 / 7) chunks


def test_table_preset_and_its_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", "3", "9", "--preset", "marian", "--format", "csv")
    assert code == 0
    header, *rows = list(csv.reader(io.StringIO(out)))
    assert header[1:6] == ["0 sin ω0", "1 sin ω1", "2 sin ω2", "3 sin ω3", "4 sin ω4"]  # odd="literal"
    values = np.array([[float(v) for v in row[1:]] for row in rows], dtype=np.float32)
    np.testing.assert_array_equal(values, posenc.presets.get("marian").table(3, 9))
    code, out, _ = run(capsys, "table", "3", "8", "--preset", "fairseq", "--shift", "0", "--format", "csv")
    values = np.array([[float(v) for v in row[1:]] for row in list(csv.reader(io.StringIO(out)))[1:]])
    np.testing.assert_array_equal(values.astype(np.float32), posenc.table(3, 8, layout="sin_cos"))
    code, _, err = run(capsys, "table", "3", "8", "--preset", "bert")
    assert code == 2 and "unknown preset 'bert'" in err
