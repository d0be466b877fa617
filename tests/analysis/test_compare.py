"""``posenc compare`` (posenc.analysis.compare): the usual code against posenc far out. Its exact values
against mpmath, each code's figures against what the dtype allows, docs/far.md against the program, and the
command through a real ``posenc`` process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest

import posenc
from posenc.analysis.compare import compare
from tests.support import reference

ROOT = Path(__file__).resolve().parents[2]
#: Half a unit in the last place at 1 (the largest rounding error of a correctly rounded value in [-1, 1]).
HALF_ULP = {"float32": 2.0**-25, "float16": 2.0**-12, "bfloat16": 2.0**-9}


def test_the_exact_values_at_the_far_end_are_mpmaths() -> None:
    exact = posenc.table(4, 512, start=1_000_497, dtype="float64")
    for row, position in enumerate(range(1_000_497, 1_000_501)):
        for i in (0, 1, 100, 255):
            sin, cos = reference.sincos(position, i, 512)
            assert exact[row, 2 * i] == float(mpmath.mpf(sin)) and exact[row, 2 * i + 1] == float(cos)


@pytest.fixture(scope="module")
def result():
    return compare()


def test_posenc_is_off_by_its_rounding_alone_and_keeps_every_row(result) -> None:
    assert len(result.rows) == 12
    for row in result.rows:
        mine = row.cells["posenc"]
        assert 0 < mine.max_error <= HALF_ULP[row.dtype] and mine.distinct == 1000 and mine.nan_rows == 0


def test_the_usual_code_loses_the_position_in_16_bits_and_drifts_in_float32(result) -> None:
    by = {(r.dtype, r.position): r.cells for r in result.rows}
    # float32: the two usual codes are one; its error grows with the position
    errors = [by["float32", p]["dtype"].max_error for p in (8192, 32768, 100_000, 1_000_000)]
    assert errors == sorted(errors) and errors[-1] > 50 * errors[0]
    assert all(by["float32", p]["dtype"] == by["float32", p]["float32"] for p in (8192, 1_000_000))
    # bfloat16 in the dtype: a sine of the wrong sign, a handful of rows (the 100k: 2 and 3)
    assert (
        by["bfloat16", 100_000]["dtype"].max_error > 1.99 and by["bfloat16", 100_000]["dtype"].distinct == 3
    )
    # float16 in the dtype: positions above 65504 are infinite, every row NaN
    assert by["float16", 100_000]["dtype"].nan_rows == 1000 and np.isnan(
        by["float16", 100_000]["dtype"].max_error
    )
    # float32 then cast: distinct, but worse than posenc's rounding alone
    cast = by["bfloat16", 100_000]["float32"]
    assert cast.distinct == 1000 and cast.max_error > by["bfloat16", 100_000]["posenc"].max_error


def test_the_page_holds_what_the_program_gives(result) -> None:
    page = (ROOT / "docs" / "far.md").read_text(encoding="utf-8")
    block = page.split("<!-- compare:start -->\n", 1)[1].split("\n<!-- compare:end -->", 1)[0]
    assert block == result.as_markdown(), "regenerate: .venv/bin/python scripts/compare_doc.py"
    assert "(docs/far.md)" in (ROOT / "README.md").read_text(encoding="utf-8").split("## Install")[0]


def test_the_command_prints_it_for_the_users_setting() -> None:
    args = ["compare", "--d-model", "64", "--base", "500000", "--positions", "100000", "--window", "50"]
    done = subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0].startswith("the usual code against posenc: d_model 64, base 500000")
    assert [line.split()[0] for line in lines[3:]] == ["float32", "float16", "bfloat16"]
    given = subprocess.run([sys.executable, "-m", "posenc", *args, "--json"], capture_output=True, text=True)
    data = json.loads(given.stdout)
    assert data["d_model"] == 64 and data["rows"][2]["codes"]["posenc"]["distinct"] == 50
    bad = subprocess.run(
        [sys.executable, "-m", "posenc", "compare", "--window", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("posenc: error: --window must be an integer >= 1")


def test_a_window_past_the_last_position_is_refused_in_compares_own_terms() -> None:
    """A window reaching 2**31 names its centre, its end and compare's own parameters (it said 'lower start
    or length', which compare does not take); the window just below the end is compared."""
    with pytest.raises(
        ValueError, match=r"window of 1,000 positions around 2,147,483,647 ends at 2,147,484,146"
    ) as e:
        compare(8, positions=(2**31 - 1,), dtypes=("float32",))
    assert "lower positions or window" in str(e.value) and "start" not in str(e.value)
    assert compare(8, positions=(2**31 - 5,), dtypes=("float32",), window=10).rows[0].hi == 2**31


def test_the_heading_names_each_option_unrounded_and_float16_overflows_from_65520() -> None:
    """``--base 500000.5`` was printed "base 500000" (``:g``); positions 65505 .. 65519 round to 65504 in
    float16, finite (the help said every position above 65504 is infinite)."""
    done = compare(
        8, base=500000.5, scale=1.00000001, positions=(65512, 65528), dtypes=("float16",), window=16
    )
    assert "base 500000.5" in done.heading() and "scale 1.00000001" in done.heading()
    below, above = (row.cells["dtype"] for row in done.rows)
    assert (below.nan_rows, below.distinct, above.nan_rows) == (0, 1, 16)  # 65504 .. 65519: all 65504
    report = posenc.analysis.check(8, 8, base=500000.5, shift=0.3333333333, dtype="float64")
    assert "base 500000.5, shift 0.3333333333" in report.as_text()
