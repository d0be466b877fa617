"""``posenc check`` and ``posenc plot``: the report, its JSON, exit status 1 on a failing criterion, the
progress line, and the figures written."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli_cases import assert_refused, run

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


def test_check_of_overflowing_usual_code_fails_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The usual float16 code at scale 1000 overflows from position 66: every value-reading criterion
    fails naming it, and --json writes a whole document (it stopped half-way at a NaN figure, exit 2)."""
    args = ("check", "--dtype", "float16", "--compute", "dtype", "--scale", "1000", "--length", "100")
    code, out, _ = run(capsys, *args, "--d-model", "16", "--json")
    assert code == 1
    report = json.loads(out)
    bounded = {c["name"]: c for c in report["criteria"]}["bounded"]
    assert (bounded["passed"], bounded["figure"]) == (False, None)
    assert "the encoding of position 66 holds a NaN" in bounded["detail"]


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
    code, out, err = run(capsys, "plot", "heatmap", "-o", str(tmp_path / "pe.png"))
    assert (code, out) == (2, "")
    assert err == "posenc: error: posenc.analysis.plot needs matplotlib: pip install 'posenc[plot]'\n"


def test_plot_is_the_same_under_a_users_matplotlibrc(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A matplotlibrc with text.usetex: True made `posenc plot` fail ("cannot write latex: No such file or
    directory"), one with image.origin: lower drew the dot products upside down: the file is now the same
    bytes as without it."""
    usual = tmp_path / "usual.png"
    assert run(capsys, "plot", "dot-product", "--length", "4", "-o", str(usual))[0] == 0
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "matplotlibrc").write_text(
        "text.usetex: True\nimage.origin: lower\nfont.size: 17\nsavefig.bbox: tight\n"
    )
    hostile = tmp_path / "hostile.png"
    done = subprocess.run(
        [sys.executable, "-m", "posenc", "plot", "dot-product", "--length", "4", "-o", str(hostile)],
        capture_output=True,
        text=True,
        env={**os.environ, "MPLCONFIGDIR": str(tmp_path / "config")},
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert hostile.read_bytes() == usual.read_bytes()


def test_plot_waves_too_fast_to_draw_is_one_line_naming_scale(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """At --scale 1048576 the waves turn every 6e-6 positions: 16 points a turn over one position exceed a
    curve's 200,000 points. The figure was drawn aliased (0.005 points a turn); now refused, saying how."""
    path = tmp_path / "waves.png"
    code, out, err = run(capsys, "plot", "waves", "--scale", "1048576", "-o", str(path))
    assert_refused(code, err, "scale=1048576", "every 5.99e-06 positions", "lower scale (--scale) to 78539")
    assert out == "" and not path.exists()
    code, out, err = run(capsys, "plot", "waves", "--scale", "10000", "--d-model", "8", "-o", str(path))
    assert (code, out, err) == (0, "", "")


@pytest.mark.parametrize(("suffix", "magic"), [("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_vector_formats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str, magic: bytes
) -> None:
    path = tmp_path / f"dots.{suffix}"
    assert run(capsys, "plot", "dot-product", "--length", "5", "--output", str(path))[0] == 0
    assert path.read_bytes().startswith(magic)
