"""posenc.analysis.check: the criteria report, its figures and failures, the criteria table (which the
README and ``posenc check --help`` read) and the report's text."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from posenc import analysis

# --- the criteria report ----------------------------------------------------------------------------

NAMES = ["unique", "consistent", "generalises", "bounded", "deterministic", "shift_invariant"]


def test_check_default_passes_with_figures() -> None:
    steps: list[tuple[float, str]] = []
    report = analysis.check(progress=lambda fraction, what: steps.append((fraction, what)))
    assert report.passed
    assert [c.name for c in report.criteria] == NAMES
    assert report.options == {
        "d_model": 512,
        "length": 2048,
        "base": 10000.0,
        "shift": 0,
        "layout": "interleaved",
        "dtype": "float32",
        "compute": "exact",
    }
    figures = {c.name: c.figure for c in report.criteria}
    assert figures["unique"] == pytest.approx(analysis.uniqueness_margin(2048, 512, dtype="float32").distance)
    assert figures["consistent"] == 0 and figures["deterministic"] == 0
    assert figures["bounded"] == 1.0
    tolerance = report.criteria[-1].data["tolerance"]
    assert 0 < figures["shift_invariant"] <= tolerance < 1e-4
    assert 0 < figures["generalises"] <= tolerance
    fractions = [f for f, _ in steps]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    json.dumps(report.as_dict(), allow_nan=False)  # JSON-ready


def test_check_float64_tolerance_is_at_noise_level() -> None:
    report = analysis.check(1024, 512, dtype="float64")
    assert report.passed
    assert report.criteria[-1].figure < 1e-11


def test_check_usual_bfloat16_code_fails_from_position_257() -> None:
    report = analysis.check(2048, 512, dtype="bfloat16", compute="dtype")
    assert not report.passed
    unique = report.criteria[0]
    assert not unique.passed and unique.figure == 0.0
    assert unique.data["first_collision"] == 257 and unique.data["equals"] == 256
    assert "position 257" in unique.detail
    failed = {c.name for c in report.criteria if not c.passed}
    assert failed == {"unique", "generalises", "shift_invariant"}


def test_check_posenc_bfloat16_names_the_usual_codes_horizon() -> None:
    report = analysis.check(1024, 512, dtype="bfloat16")
    assert report.passed
    assert report.criteria[0].data["usual_code_first_collision"] == 257


def test_check_narrow_bfloat16_fails_uniqueness_with_the_position() -> None:
    report = analysis.check(100_000, 4, dtype="bfloat16")
    unique = report.as_dict()["criteria"][0]
    assert (unique["passed"], unique["first_collision"], unique["equals"]) == (False, 84830, 7)
    generalises = report.criteria[2]
    assert not generalises.passed and generalises.data["first_collision"] >= 100_000


def test_check_of_one_position() -> None:
    report = analysis.check(1, 8)
    assert report.passed
    assert report.criteria[0].figure is None
    json.dumps(report.as_dict(), allow_nan=False)


@pytest.mark.parametrize(
    ("options", "error", "mentions"),
    [
        ({"length": 0}, ValueError, "length"),
        ({"length": 2**30 + 1}, ValueError, "length"),
        ({"length": 2.0}, TypeError, "length"),
        ({"d_model": 1}, ValueError, "d_model"),
        ({"base": 1}, ValueError, "base"),
        ({"layout": "rows"}, ValueError, "layout"),
        ({"dtype": "int8"}, ValueError, "dtype"),
        ({"compute": "fast"}, ValueError, "compute"),
    ],
)
def test_check_bad_input(options: dict, error: type, mentions: str) -> None:
    with pytest.raises(error, match=mentions):
        analysis.check(**options)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: analysis.collisions(2**40, 8), ValueError, r"length must keep the last position"),
        (lambda: analysis.max_magnitude(2**40, 8), ValueError, r"length must keep the last position"),
        (lambda: analysis.max_magnitude(2**31 - 1, 1024), ValueError, r"2\*\*36"),
        (lambda: analysis.collision_horizon(8, limit=2**40), ValueError, r"limit must keep"),
        (lambda: analysis.max_magnitude(-1, 8), ValueError, r"length must be an integer >= 0; got -1"),
        (lambda: analysis.max_magnitude(2.0, 8), TypeError, r"length must be an integer .*pass 2"),
        (lambda: analysis.shift_matrix(1, 2**20), ValueError, r"GiB"),
        (lambda: analysis.shift_matrix([1, 2], 8), TypeError, r"k must be a real number"),
        (lambda: analysis.shift_matrix(2**31, 8), ValueError, r"k must satisfy"),
        (lambda: analysis.dot_products(np.broadcast_to(0.5, (2**20, 2**20))), ValueError, r"encodings.*GiB"),
        (lambda: analysis.cosine_similarity(np.broadcast_to(0.5, (2**20, 2**20))), ValueError, r"GiB"),
        (lambda: analysis.toeplitz_deviation(np.broadcast_to(0.5, (2**20, 2**20))), ValueError, r"matrix"),
    ],
)
def test_huge_or_bad_arguments_are_refused_up_front(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_empty_ranges_and_nan_inputs():
    assert analysis.collisions(0, 8) == analysis.Collisions(None, None, 0, 0, 0)
    assert analysis.collision_horizon(8, limit=0) is None
    assert math.isnan(analysis.toeplitz_deviation([[math.nan, 0.0], [0.0, math.nan]]))
    assert np.isnan(analysis.cosine_similarity(np.full((2, 4), math.nan))).all()


# --- the criteria table and the report's text -------------------------------------------------------


def test_the_criteria_table_gives_the_report_its_order_and_titles() -> None:
    assert [d.name for d in analysis.CRITERIA] == NAMES
    report = analysis.check(64, 16)
    assert [(c.name, c.title) for c in report.criteria] == [(d.name, d.title) for d in analysis.CRITERIA]
    assert all(d.checks and d.tolerates and callable(d.measure) for d in analysis.CRITERIA)
    tolerances = {c.name: c.tolerance for c in report.criteria}
    assert tolerances["bounded"] == 1.0
    assert tolerances["consistent"] == tolerances["deterministic"] == tolerances["unique"] == 0.0
    assert tolerances["shift_invariant"] == tolerances["generalises"] == report.criteria[-1].data["tolerance"]


def _guide_criteria_rows() -> list[list[str]]:
    """The rows of the criteria table of the guide "See and check" (docs/see.md), each as its cells."""
    section = (Path(__file__).resolve().parents[2] / "docs" / "see.md").read_text(encoding="utf-8")
    lines = section[section.index("| criterion |") :].splitlines()
    table = list(itertools.takewhile(lambda line: line.startswith("|"), lines))
    return [
        [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)[1:-1]] for row in table[2:]
    ]


def test_the_guide_criteria_table_is_the_criteria_table() -> None:
    # the documentation reads CRITERIA: one row per criterion, in report order, its checks and tolerance
    rows = _guide_criteria_rows()
    assert rows == [[d.name, d.checks, d.tolerates] for d in analysis.CRITERIA]


def test_the_check_help_lists_every_criterion_from_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from posenc.cli import main

    assert main(["check", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())  # the help wraps lines; compare the words
    for d in analysis.CRITERIA:
        assert f"{d.name} {d.checks} tolerance: {d.tolerates}" in help_text


def test_as_text_is_what_posenc_check_prints(capsys: pytest.CaptureFixture[str]) -> None:
    from posenc.cli import main

    code = main(["check", "--d-model", "64", "--length", "300", "--dtype", "bfloat16"])
    out = capsys.readouterr().out
    report = analysis.check(300, 64, dtype="bfloat16")
    # the library names its parameter, compute="dtype"; the command its option, --compute dtype
    assert 'see compute="dtype")' in report.as_text()
    assert code == 0 and out == report.as_text().replace('compute="dtype"', "--compute dtype") + "\n"
    assert (
        report.as_text().splitlines()[0].startswith("posenc check: d_model 64, positions 0..299, base 10000")
    )
    assert report.as_text().splitlines()[-1] == "all 6 criteria pass"


@pytest.mark.parametrize("length", [2, 3, 50, 300])
def test_the_dot_products_count_distinct_pairs_at_most_all_there_are(length: int) -> None:
    """shift_invariant and generalises say how many pairs they measured: distinct ones, never more than the
    L (L - 1) / 2 a range holds (they drew starts with replacement: 64 'pairs' of positions 0..1, which hold
    one), and all of them where the range holds few."""
    report = analysis.check(length, 8)
    pairs = report.criteria[-1].data["pairs"]
    assert pairs <= length * (length - 1) // 2 and pairs <= 4096
    if length <= 3:
        assert pairs == length * (length - 1) // 2
    assert (
        f"{pairs:,} sampled pair{'' if pairs == 1 else 's'} in 0..{length - 1}" in report.criteria[-1].detail
    )
    assert f"up to {min(4096, 64 * (length - 1), length * (length - 1) // 2):,} distinct" in " ".join(
        report.notes
    )


@pytest.mark.parametrize(
    ("length", "options", "first", "count"),
    [
        (100, {"scale": 1000.0}, 66, 34),  # position · scale overflows float16 from 65.52
        (70_000, {}, 65520, 4480),  # the position itself rounds to inf in float16
    ],
)
def test_non_finite_encodings_fail_every_criterion_that_reads_values(
    length: int, options: dict, first: int, count: int
) -> None:
    """The usual float16 code gives NaN rows where its angles overflow: bounded, unique, generalises and
    shift_invariant fail naming the first such position (bounded passed with "max |PE| = 0", the NaN rows
    passed over), and the report stays JSON (no NaN or infinite figure)."""
    report = analysis.check(length, 16, dtype="float16", compute="dtype", **options)
    by_name = {c.name: c for c in report.criteria}
    bounded = by_name["bounded"]
    assert not bounded.passed and bounded.figure is None
    assert f"the encoding of position {first} holds a NaN" in bounded.detail
    assert f"{count:,} of positions 0..{length - 1} hold a NaN or an infinity" in bounded.detail
    assert not by_name["shift_invariant"].passed and by_name["shift_invariant"].figure is None
    assert not by_name["generalises"].passed and by_name["generalises"].figure is None
    assert not by_name["unique"].passed
    assert by_name["consistent"].passed and by_name["deterministic"].passed  # bits compare, NaN or not
    json.dumps(report.as_dict(), allow_nan=False)
    assert "nan" not in report.as_text().replace("a NaN", "")


def test_max_abs_is_nan_where_a_value_is() -> None:
    from posenc.analysis._work import max_abs, nonfinite_rows

    rows = np.zeros((5, 4), np.float16)
    rows[3, 1] = np.nan
    assert math.isnan(max_abs(rows))
    rows[1, 0] = np.inf
    assert nonfinite_rows(rows) == (2, 1)
