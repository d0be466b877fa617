"""identify's default limit: what a candidate's own float32 code can be off by at the compared positions
(|p·ω|·2⁻²⁴, from its positions and frequencies), plus the storage's rounding, never above 2⁻⁴: no table
without signal matches at any length, and a table with no signal is no evidence of an offset.

The reports: all zeros of 1.1M × 4 "matched tensor2tensor" and uniform noise of 2.2M × 4 "matched marian"
(the old limit, 1e-5 + 16·rows·2⁻²⁴, reached 1 at 1.05M rows); an all-zeros table was "off by 2 positions".
"""

from __future__ import annotations

import io
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import rope
from posenc.porting import identify
from posenc.porting.limits import CAP, table_limit
from posenc.porting.rope_fitting import cache_limits

POSENC = Path(sys.executable).with_name("posenc")
MILLION = 1_100_000  # rows: past the 1.05M at which the old limit reached 1


def test_uniform_noise_of_millions_of_rows_matches_nothing():
    noise = np.random.default_rng(0).uniform(-1, 1, (2 * MILLION, 4)).astype(np.float32)
    found = identify(noise)
    assert not any(m.matches for m in found), [m.describe() for m in found]


def test_posenc_identify_says_a_million_zero_rows_match_nothing(tmp_path):
    """The report's case, through a real ``posenc identify`` process: exit 1, every candidate "does NOT
    match", and none read as an offset."""
    path = tmp_path / "zeros.npy"
    np.save(path, np.zeros((MILLION, 4), np.float32))
    done = subprocess.run([str(POSENC), "identify", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()[1:]
    assert lines and all("does NOT match; nearest candidate" in line for line in lines), done.stdout
    assert "matches:" not in done.stdout and "rows from position" not in done.stdout, done.stdout


def test_the_explorer_says_a_million_zero_rows_match_nothing():
    """The explorer's identify (the library's, behind ``POST /api/identify``) says the same of as many rows
    as it reads (``MAX_IDENTIFY_ROWS``), and refuses more, naming the command that reads any."""
    from posenc.explore import api

    buffer = io.BytesIO()
    np.save(buffer, np.zeros((MILLION, 2), np.float32))
    with pytest.raises(api.BadRequest, match="more than the 131,072 this view reads; identify it with"):
        api.identify({"filename": "zeros.npy"}, buffer.getvalue())
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((api.MAX_IDENTIFY_ROWS, 2), np.float32))
    answer = api.identify({"filename": "zeros.npy"}, buffer.getvalue())
    assert answer["best"] is None and answer["paste"] == [], answer["verdict"]
    assert "does NOT match" in answer["verdict"] and "matches:" not in answer["verdict"]
    assert not any("off by" in line for line in answer["audit"]["findings"]), answer["audit"]


def test_an_exact_table_of_a_million_rows_still_matches():
    best = identify(posenc.table(MILLION, 4))[0]
    assert best.matches and best.start == 0 and "paper" in best.name.split(" = "), best.describe()
    assert best.max_error <= 2.0**-25


@pytest.mark.parametrize(("delta", "at_zero", "at_a_million"), [(0.0, True, True), (1e-3, False, True)])
def test_the_limit_comes_from_the_positions_not_the_row_count(delta, at_zero, at_a_million):
    """64 rows either way: at positions 0..63 float32 code is off by ~1e-6, so 1e-3 is too much; at
    positions 10**6.. (|p·ω_0| = 10**6) it can be off by more than the cap, so 1e-3 is noise there. Base
    1e9 keeps the lowest angle under one turn, so that the fit reads row 0's position."""
    for start, expected in ((0, at_zero), (10**6, at_a_million)):
        table = posenc.table(64, 16, start=start, base=1e9, dtype="float64")
        table[-1, 0] += delta
        best = identify(table)[0]
        assert (best.matches, best.start, best.options["base"]) == (expected, start, 1e9), best.describe()


def test_no_limit_reaches_the_cap_however_far_the_positions():
    """Past the positions where float32 code is O(1) off (|p·ω| ~ 2**24), float32 noise matches nothing:
    the limit stops at 2**-4, and a difference of 0.1 at position 10**6 is no match."""
    assert table_limit(2.0**24, 2.0**-8) == table_limit(math.inf, 2.0**-24) == CAP == 2.0**-4
    assert table_limit(4095, 2.0**-24) == pytest.approx(1e-5 + 16 * 4095 * 2.0**-24 + 2.0**-24)
    table = posenc.table(64, 16, start=10**6, base=1e9, dtype="float64")
    table[-1, 0] += CAP * 1.6
    assert not identify(table)[0].matches
    params = rope.config(head_dim=8)
    assert cache_limits(params, 1.0, 10**9, 2.0**-24, None)[0] == CAP  # a cos/sin cache's limit too


def test_a_table_stored_in_half_precision_matches_within_its_rounding():
    """The storage rounding adds its own ulp: a bfloat16 table read as float32 (as a BF16 safetensors
    tensor is) and a float16 table match; the same error in float32 values does not."""
    for stored in (
        posenc.table(1000, 16, dtype="bfloat16").astype(np.float32),
        posenc.table(1000, 16, dtype="float16"),
    ):
        best = identify(stored)[0]
        assert best.matches and "paper" in best.name.split(" = "), best.describe()
    shifted = posenc.table(1000, 16, dtype="float64")
    shifted[500, 3] += 2.0**-9  # bfloat16's rounding, in float64 values
    assert not identify(shifted)[0].matches


def test_a_table_without_signal_is_no_evidence_of_an_offset():
    """An all-zeros table is as far (1) from every position of row 0: the nearest candidates are read at
    row 0 = position 0 (the other starts only after every variant there), not at the start whose first
    row happens to be 2e-8 nearer."""
    zeros = np.zeros((100, 8), np.float32)
    found = identify(zeros, candidates=8)
    assert found and not any(m.matches for m in found)
    starts = [abs(m.start) for m in found]
    assert starts == sorted(starts) and starts[0] == 0, [m.describe() for m in found]
    assert all(m.start == 0 for m in identify(zeros)), [m.describe() for m in identify(zeros)]


def test_a_nearest_candidates_error_is_from_its_exact_values_not_a_float32_copy():
    """Candidates that do not match were measured against a float32 copy of their values on the last pass,
    so identify printed 5.96e-08 for a candidate 3.29e-08 from the table: each error shown is the largest
    |stored − exact| over the whole table, recomputed here in float64."""
    stored = posenc.table(1024, 64)
    found = identify(stored, tolerance=0.0, candidates=3)
    assert len(found) == 3 and not any(m.matches for m in found)
    for m in found:
        exact = posenc.table(1024, 64, start=m.start, dtype="float64", **m.options)
        assert m.max_error == float(np.max(np.abs(exact - stored)))
