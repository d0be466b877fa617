"""The ``posenc`` command line: the demo, one-line errors with exit code 2, --version and --help, the real
entry points (``python -m posenc`` and the installed console script) in a subprocess, and identify."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.cli import main
from tests.support.cli_cases import (
    HEADER_5_4,
    WORKED_TABLE_5_4,
    run,
    text_rows,
)

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
    # posenc's float32 values at 2**30 are off by at most 2.94265e-08 (mpmath): a bound printed rounded up
    assert "its float32 values are off by at\nmost 3.0e-08" in out.replace("  ", " ")


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


def test_demo_bounds_round_up_whatever_the_decimal_context() -> None:
    """A bound printed lower would be broken: 2.0000001e-08 is "2.1e-08" under a caller's context of 3
    digits rounding down (the scaling rounded it to 2.00e-08, printed "2.0e-08") or trapping Rounded."""
    import decimal

    from posenc.cli.demo import _rounded_up

    assert (_rounded_up(2.0000001e-08), _rounded_up(2.94e-08), _rounded_up(9.96e-08)) == (
        "2.1e-08",
        "3.0e-08",
        "1.0e-07",
    )
    for context in (
        decimal.Context(prec=3, rounding=decimal.ROUND_FLOOR),
        decimal.Context(traps=[decimal.Rounded, decimal.Inexact]),
    ):
        with decimal.localcontext(context):
            assert _rounded_up(2.0000001e-08) == "2.1e-08"


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
    (
        ["table", str(2**30), "4096"],
        "memory is available; ask for fewer positions, or write chunks with start= "
        "and out=; --format npy --output FILE streams any length",
    ),  # 16 TiB: refused before allocating
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


MISTYPED = [
    (
        ["table", "5", "4", "--layuot", "sin_cos"],
        "posenc table: unrecognized option --layuot (did you mean --layout?)",
    ),
    (
        ["table", "5", "4", "--layuot=sin_cos"],
        "posenc table: unrecognized option --layuot (did you mean --layout?)",
    ),
    (["check", "--lenght", "8"], "posenc check: unrecognized option --lenght (did you mean --length?)"),
    (
        ["tabel", "5", "4"],
        "argument COMMAND: invalid choice: 'tabel' (did you mean 'table'? choose from 'table', ",
    ),
    (["identfy", "pe.npy"], "invalid choice: 'identfy' (did you mean 'identify'?"),
    (
        ["table", "5", "4", "--format", "jsn"],
        "argument --format: invalid choice: 'jsn' (did you mean 'json'?",
    ),
    (["plot", "dot-prodct"], "argument KIND: invalid choice: 'dot-prodct' (did you mean 'dot-product'?"),
]


@pytest.mark.parametrize(("args", "message"), MISTYPED)
def test_a_mistyped_option_command_or_choice_gets_did_you_mean(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """The nearest of the parser's own option strings, subcommand names or choices, in the one error line."""
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("posenc: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err, err


def test_nothing_near_is_suggested_and_stray_arguments_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "table", "5", "4", "--zzzzzz")
    assert code == 2 and err == "posenc: error: posenc table: unrecognized option --zzzzzz\n"
    code, _, err = run(capsys, "check", "extra")
    assert code == 2 and err == "posenc: error: posenc check: unrecognized arguments: extra\n"
    code, _, err = run(capsys, "frobnicate")
    assert code == 2 and "invalid choice: 'frobnicate' (choose from 'table'," in err and "did you" not in err


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
    assert text_rows(done.stdout) == (HEADER_5_4, WORKED_TABLE_5_4)


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


def _tutorial_npy(path: Path) -> None:
    """The PyTorch tutorial's float32 table (its own code: float32 angles), d_model 512, 1024 rows."""
    import torch

    position = torch.arange(1024).unsqueeze(1).float()
    div = torch.exp(torch.arange(0, 512, 2).float() * (-math.log(10000.0) / 512))
    table = torch.zeros(1024, 512)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
    np.save(path, table.numpy())


def test_identify_gives_one_verdict_with_the_lines_to_paste(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    _tutorial_npy(tmp_path / "pe.npy")
    code, out, _ = run(capsys, "identify", str(tmp_path / "pe.npy"))
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{tmp_path / 'pe.npy'}: float32 table of shape (1024, 512)"
    head, _, error = lines[1].partition("; max error ")
    assert head == (
        "  1. matches: paper (base=10000.0, shift=0.0, scale=1.0, layout='interleaved', "
        "odd: any rule (even width))"
    )
    assert 1e-5 < float(error) <= 5.97e-05  # the tutorial's float32 noise, within its stated deviation
    assert lines[2] == "     also consistent with: pytorch-tutorial, keras-hub, positional-encodings"
    assert lines[3].startswith("     not distilbert: its library's float32 table is off by at most 3e-08")
    assert "up to 5.97e-05 / 0.000468 / 0.00778 (rounded up) at 1k / 8k / 131k positions" in lines[4]
    assert lines[5:] == [
        '     paste: posenc.presets.get("paper").table(1024, 512)',
        '            posenc.torch.SinusoidalPositionalEncoding(512, **posenc.presets.get("paper").options)',
        '            posenc.jax.SinusoidalPositionalEncoding(512, **posenc.presets.get("paper").options)',
    ]
    assert "generic" not in out and "NOT" not in out and out.count("matches") == 1


def test_identify_names_the_key_it_read(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    import torch

    table = posenc.presets.get("fairseq", padding_idx=1).table(1026, 1024)
    torch.save({"embed_positions.weight": torch.from_numpy(table)}, tmp_path / "m.pt")
    code, out, _ = run(capsys, "identify", str(tmp_path / "m.pt"))
    lines = out.splitlines()
    assert code == 0
    assert (
        lines[0]
        == f"{tmp_path / 'm.pt'}, tensor 'embed_positions.weight': float32 table of shape (1026, 1024)"
    )
    assert lines[1].startswith("  1. matches: fairseq(padding_idx=1) (base=10000.0, shift=1.0, scale=1.0")
    assert "up to 5.99e-05 / 0.000491 / 0.00798 (rounded up) at 1k / 8k / 131k" in lines[2]
    assert lines[3] == '     paste: posenc.presets.get("fairseq", padding_idx=1).table(1026, 1024)'
    assert "generic" not in out and "NOT" not in out and "also" not in out
    code, out, _ = run(capsys, "identify", str(tmp_path / "m.pt"), "--json")
    document = json.loads(out)
    assert code == 0 and document["key"] == "embed_positions.weight" and document["dtype"] == "float32"
    answer = document["verdict"]
    assert answer["label"] == "fairseq(padding_idx=1)" and answer["odd"] is None and answer["also"] == []
    assert answer["float32_deviation"] == {"1024": 5.99e-05, "8192": 0.000491, "131072": 0.00798}
    get = 'posenc.presets.get("fairseq", padding_idx=1)'
    assert answer["paste"][1] == f"posenc.torch.SinusoidalPositionalEncoding(1024, **{get}.options)"
    assert [c["name"] for c in document["candidates"]] == ["fairseq(padding_idx=1)"]


def test_identify_key_is_honoured_or_refused_for_every_format(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    from safetensors.numpy import save_file

    table = posenc.presets.get("whisper").table(64, 16)
    save_file({"a": table, "b": posenc.table(64, 16)}, tmp_path / "m.safetensors")
    code, out, _ = run(capsys, "identify", str(tmp_path / "m.safetensors"), "--key", "b")
    assert code == 0 and "tensor 'b'" in out and "1. matches: paper" in out
    code, out, _ = run(capsys, "identify", str(tmp_path / "m.safetensors"), "--key", "a")
    assert code == 0 and "tensor 'a'" in out and "1. matches: tensor2tensor" in out
    code, _, err = run(capsys, "identify", str(tmp_path / "m.safetensors"), "--key", "c")
    assert code == 2 and "has no tensor 'c'; it has: a, b" in err and err.count("\n") == 1
    np.save(tmp_path / "pe.npy", table)
    code, _, err = run(capsys, "identify", str(tmp_path / "pe.npy"), "--key", "pe")
    assert code == 2 and "holds one array, not a state dict: leave out the key ('pe')" in err
    np.savez(tmp_path / "pe.npz", pe=table)
    code, _, err = run(capsys, "identify", str(tmp_path / "pe.npz"), "--key", "pe")
    assert code == 2 and "unknown file type '.npz'" in err and "np.save" in err


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
