"""posenc.audit finds each planted defect, and none in posenc's own output."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import posenc
from posenc.auditor import audit

D = 64
SAMPLES = 128


def _paper_float32(positions: np.ndarray) -> np.ndarray:
    """The PyTorch tutorial's formula: frequencies, angles and sin/cos in float32."""
    p = np.asarray(positions).astype(np.float32)[:, None]
    omega = np.exp(np.arange(0, D, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / D))
    out = np.zeros((len(p), D), np.float32)
    out[:, 0::2], out[:, 1::2] = np.sin(p * omega), np.cos(p * omega)
    return out


def _kinds(report) -> set[str]:
    return {f.kind for f in report.findings}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_posenc_own_output_is_clean(dtype: str) -> None:
    report = audit(lambda p: posenc.encode(p, D, dtype=dtype), samples=SAMPLES)
    assert report.passed, report.as_text()
    assert report.findings == []
    assert report.dtype == dtype and report.max_ulp <= (1 if dtype == "float64" else 0)
    assert report.variant.name.startswith("paper") and report.variant.matches
    assert "identified by posenc.identify" in report.variant.how


@pytest.mark.parametrize("name", ["tensor2tensor", "fairseq", "diffusers-timestep"])
def test_posenc_presets_are_clean_and_identified(name: str) -> None:
    preset = posenc.presets.get(name, **({"padding_idx": 1} if name == "fairseq" else {}))
    report = audit(preset.table(3000, D), samples=SAMPLES)
    assert report.passed and report.findings == [], report.as_text()
    assert report.span == (0, 3000) and report.kind == "table"
    assert report.variant.options["layout"] == preset.layout


@pytest.mark.parametrize("shape", [(20, 30), (32, 32)])
def test_a_grid_of_more_rows_than_the_prefix_is_identified_from_all_of_them(shape: tuple[int, int]) -> None:
    report = audit(posenc.grids.timm_2d(shape, 64), samples=64)  # its first 256 rows are no whole grid
    assert report.passed and report.variant.name == "timm-2d"
    assert report.variant.options["feat_shape"] == shape


def test_a_grid_repeated_past_its_rows_is_measured_not_a_crash() -> None:
    grid = posenc.grids.timm_2d((16, 16), 64)
    for rows in (grid[np.arange(1024) % 256], grid[np.minimum(np.arange(1024), 255)]):
        report = audit(rows, samples=64)  # was: IndexError from the 16×16 grid its prefix is
        assert not report.passed and not report.variant.matches


def test_float32_angles() -> None:
    report = audit(_paper_float32, samples=SAMPLES)
    angles = next(f for f in report.findings if f.kind == "angles")
    assert angles.text.startswith("angles formed in float32: error grows ∝ position")
    assert 0.8 <= angles.data["slope"] <= 1.2 and angles.data["grid"] == "float32"
    assert not report.passed and report.max_error(4096) < 1e-3 < report.max_error(1 << 20)
    assert report.measurement.first_over[1e-3] is not None


def test_bfloat16_storage() -> None:
    report = audit(
        lambda p: posenc.encode(p, D).astype(ml_dtypes.bfloat16).astype(np.float32), samples=SAMPLES
    )
    assert "table stored in bfloat16 then used as float32" in [f.text for f in report.findings]
    assert report.dtype == "float32" and not report.passed
    assert 2.0**-10 < report.max_abs <= 2.0**-8


def test_bfloat16_frequencies() -> None:
    omega = posenc.frequencies(D).astype(ml_dtypes.bfloat16).astype(np.float64)

    def cast(positions: np.ndarray) -> np.ndarray:
        angles = np.asarray(positions, np.float64)[:, None] * omega
        out = np.zeros((len(angles), D))
        out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
        return out.astype(np.float32)

    report = audit(cast, samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "frequencies")
    assert found.text == "frequencies cast to bfloat16" and found.data["grid"] == "bfloat16"
    assert "angles" not in _kinds(report)  # explained by the frequencies, not by the angles


def test_permuted_layout() -> None:
    order = np.random.default_rng(3).permutation(D)
    report = audit(posenc.table(2048, D)[:, order], samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "layout")
    assert found.text.startswith("columns permuted: ") and found.data["swapped"] is False
    exact = report.variant.exact(np.arange(8), "float64", D)
    assert np.allclose(
        exact[:, found.data["permutation"]], posenc.table(2048, D, dtype="float64")[:8][:, order]
    )
    assert not report.passed


def test_the_column_order_is_found_without_comparing_every_column_with_every_other() -> None:
    """The order search sorts the exact columns on the last row: it compared each column with every other
    (O(d²) in Python: a 2 MiB upload of zeros, 262144 columns, held the explorer's audit for hours). A
    table whose rows cannot tell columns apart (zeros) gets no order; a reordered wide table gets its own."""
    from posenc.auditor.variant import _permutation

    paper = posenc.presets.get("paper").options
    assert _permutation(np.zeros((2, 4096)), paper, None, 1e-3) is None
    order = np.random.default_rng(5).permutation(4096)
    rows = posenc.table(256, 4096, dtype="float64")[:, order]
    found = _permutation(rows, paper, None, 1e-6)
    np.testing.assert_array_equal(posenc.table(256, 4096, dtype="float64")[:, found], rows)


def test_sin_cos_halves_swapped_within_pairs() -> None:
    table = posenc.table(1024, D)
    swapped = table.copy()
    swapped[:, 0::2], swapped[:, 1::2] = table[:, 1::2], table[:, 0::2]  # cos first in each pair
    report = audit(swapped, samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "layout")
    assert found.text.startswith("sin and cos swapped") and found.data["swapped"] and not report.passed
    assert "`pe[:, 0::2] = torch.sin(angle)`" in found.fix


def test_wrong_shift_against_a_declared_variant() -> None:
    report = audit(lambda p: posenc.encode(p, D, shift=1), preset="paper", samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "variant")
    assert found.text.startswith("wrong shift: declared shift 0.0")
    assert found.data["found"]["shift"] == 1.0 and not report.passed
    assert report.variant.how == "given: paper"


def test_wrong_base_against_declared_options() -> None:
    report = audit(posenc.table(1024, D, base=500.0), preset={"base": 10000.0}, samples=SAMPLES)
    assert next(f for f in report.findings if f.kind == "variant").text.startswith("wrong base")


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("zero", "rows are zero"),
        ("nan", "rows are NaN or inf"),
        ("raise", "raises IndexError"),
        ("clamp", "every row repeats the row of position 4999"),
    ],
)
def test_length_cliff(how: str, said: str) -> None:
    table = posenc.table(5000, D)

    def capped(positions: np.ndarray) -> np.ndarray:
        p = np.asarray(positions)
        if how == "raise":
            return table[p]
        if how == "clamp":
            return table[np.minimum(p, 4999)]
        out = posenc.encode(p, D)
        out[p >= 5000] = 0 if how == "zero" else np.nan
        return out

    report = audit(capped, samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "cliff")
    assert found.data["position"] == 5000 and said in found.text, found.text
    assert found.text.startswith("length cliff at 5000")
    assert "nan" not in _kinds(report) and "collisions" not in _kinds(report)
    assert not report.passed and report.max_error(4096) == 0


@pytest.mark.parametrize("by", [1, -1])
def test_off_by_one(by: int) -> None:
    report = audit(lambda p: posenc.encode(np.asarray(p) + by, D), positions="1:1000000", samples=SAMPLES)
    found = next(f for f in report.findings if f.kind == "offset")
    assert found.text.startswith("off by one position") and found.data["start"] == by
    assert not report.passed and not report.variant.matches


def test_off_by_one_against_a_declared_variant() -> None:
    report = audit(posenc.table(1000, D, start=1), preset="paper", samples=SAMPLES)
    assert next(f for f in report.findings if f.kind == "offset").data["start"] == 1


def test_nan_rows_and_positions_rounded_to_bfloat16() -> None:
    def naive(positions: np.ndarray) -> np.ndarray:  # positions and angles rounded to bfloat16
        p = np.asarray(positions).astype(ml_dtypes.bfloat16).astype(np.float64)
        out = _paper_float32(p.astype(np.int64))
        out[np.asarray(positions) == 3000] = np.inf
        return out.astype(ml_dtypes.bfloat16)

    report = audit(naive, positions=8192, samples=4096)
    assert report.dtype == "bfloat16"
    rounded = next(f for f in report.findings if f.kind == "positions")  # the collisions, explained
    assert rounded.data["first"] == 257 and rounded.data["grid"] == "bfloat16"
    assert rounded.text.startswith("positions rounded to bfloat16: from position 257 on")
    assert "257 lands on 256" in rounded.text and "collisions" not in _kinds(report)
    nan = next(f for f in report.findings if f.kind == "nan")
    assert nan.data == {"rows": 1, "first": 3000}
    assert sum(b.nan_rows for b in report.bands) == 1 and math.isinf(report.max_abs)


def test_bands_thresholds_and_sampling() -> None:
    report = audit(_paper_float32, positions="100:300000", samples=SAMPLES)
    assert [(b.lo, b.hi) for b in report.bands] == [
        (100, 1024),
        (1024, 4096),
        (4096, 32768),
        (32768, 131072),
        (131072, 300000),
    ]
    assert all(b.sampled <= SAMPLES for b in report.bands)
    assert report.measurement.positions.min() == 100 and report.measurement.positions.max() == 299999
    first = report.measurement.first_over
    assert first[1e-3] is not None and (first[0.1] is None or first[0.1] >= first[1e-3])
    d = report.as_dict()
    assert d["passed"] is False and len(d["bands"]) == 5 and d["positions"] == [100, 300000]
    assert d["findings"][0]["kind"] == "angles"


def test_first_position_past_each_threshold_is_refined_between_samples() -> None:
    """A step planted at unsampled positions: the report gives the step's position, not the next sample."""
    steps = {1e-3: 5_001, 1e-2: 40_003, 0.1: 200_007}

    def stepped(positions: np.ndarray) -> np.ndarray:
        out = posenc.encode(positions, D).astype(np.float64)
        for threshold, start in steps.items():
            out[positions >= start, 0] += 2 * threshold
        return out.astype(np.float32)

    report = audit(stepped, positions=300_000, samples=SAMPLES, preset="paper")
    m = report.measurement
    assert not set(steps.values()) & set(m.positions.tolist())  # none of the steps was itself sampled
    assert m.first_over == steps and all(m.first_over_refined.values())
    text = " ".join(report.as_text().split())
    assert report.as_dict()["first_over"] == {"0.001": 5001, "0.01": 40003, "0.1": 200007}
    # 5,001 was checked from position 0 on: the first; the others from the last sample under them only
    froms = report.as_dict()["first_over_from"]
    assert froms["0.001"] is None and 32_768 < froms["0.01"] < 40_003 and 131_072 < froms["0.1"] < 200_007
    assert f"> 0.001: 5,001; > 0.01: 40,003 (checked from {froms['0.01']:,});" in text
    assert "a position alone: every one from 0 up to it checked" in text
    assert "an unsampled one before a may pass it too (the error is not monotonic)" in text


def test_a_first_position_checked_from_a_sample_is_not_called_the_first() -> None:
    """The error is not monotonic: a bump before the last sampled position under the threshold is missed by
    the gap's check, so the position given is "checked from" that sample, never "the first" plainly."""
    bump, step = 50_001, 90_007

    def bumped(positions: np.ndarray) -> np.ndarray:
        out = posenc.encode(positions, D).astype(np.float64)
        out[(positions == bump) | (positions >= step), 0] += 0.5
        return out.astype(np.float32)

    report = audit(bumped, positions=100_000, samples=SAMPLES, preset="paper")
    m = report.measurement
    assert bump not in m.positions.tolist() and m.first_over[0.1] == step
    assert m.first_over_from[0.1] > bump  # the check began past the bump it could not see
    text = " ".join(report.as_text().split())
    assert f"> 0.1: {step:,} (checked from {m.first_over_from[0.1]:,})" in text


def test_first_position_past_a_threshold_beyond_the_refine_budget_is_marked_unrefined() -> None:
    start = (1 << 29) + 7

    def stepped(positions: np.ndarray) -> np.ndarray:
        out = posenc.encode(positions, D).astype(np.float64)
        out[positions >= start, 0] += 0.5
        return out.astype(np.float32)

    report = audit(stepped, positions=(1 << 28, 1 << 31), samples=16, preset="paper")
    m = report.measurement
    assert m.first_over[0.1] > start and m.first_over_refined == {1e-3: False, 1e-2: False, 0.1: False}
    assert m.first_over[0.1] == m.positions[np.searchsorted(m.positions, start)]  # the next sample
    text = " ".join(report.as_text().split())
    assert f"> 0.1: {m.first_over[0.1]:,} (sampled) (" in text
    assert "(sampled): the first sampled one, its gap over 65,536 positions left unchecked" in text


def test_every_long_band_gets_exactly_samples_positions() -> None:
    def rows(positions: np.ndarray) -> np.ndarray:  # a function: sampled (a stored table is measured whole)
        return posenc.encode(positions, D)

    report = audit(rows, samples=SAMPLES, positions=20_000, d_model=D)
    assert [(b.lo, b.hi, b.sampled) for b in report.bands] == [
        (0, 1024, SAMPLES),
        (1024, 4096, SAMPLES),
        (4096, 20_000, SAMPLES),
    ]
    assert len(np.unique(report.measurement.positions)) == 3 * SAMPLES
    short = audit(rows, samples=SAMPLES, positions=1100, d_model=D)
    assert [b.sampled for b in short.bands] == [SAMPLES, 76]  # a band of at most `samples`: whole
    stored = audit(posenc.table(20_000, D), samples=SAMPLES)
    assert [b.sampled for b in stored.bands] == [1024, 3072, 15_904]  # a table in memory: every row


# --- every finding says how to fix it; the summary keeps its numbers; several causes at once ------------


def _reports_of_every_kind() -> dict[str, object]:
    """One report with each finding kind (the planted defects of the tests above)."""
    table = posenc.table(5000, D)

    def nan_and_collisions(positions: np.ndarray) -> np.ndarray:
        p = np.asarray(positions).astype(ml_dtypes.bfloat16).astype(np.float64)
        out = _paper_float32(p.astype(np.int64))
        out[np.asarray(positions) == 3000] = np.inf
        return out.astype(ml_dtypes.bfloat16)

    def bf16_frequencies(positions: np.ndarray) -> np.ndarray:
        omega = posenc.frequencies(D).astype(ml_dtypes.bfloat16).astype(np.float64)
        angles = np.asarray(positions, np.float64)[:, None] * omega
        out = np.zeros((len(angles), D))
        out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
        return out.astype(np.float32)

    return {
        "angles": audit(_paper_float32, samples=SAMPLES),
        "storage": audit(
            posenc.table(4096, D).astype(ml_dtypes.bfloat16).astype(np.float32), samples=SAMPLES
        ),
        "frequencies": audit(bf16_frequencies, samples=SAMPLES),
        "layout": audit(posenc.table(2000, D)[:, ::-1].copy(), samples=SAMPLES),
        "variant": audit(posenc.table(1000, D, shift=1), preset="paper", samples=SAMPLES),
        "offset": audit(posenc.table(1000, D, start=1), preset="paper", samples=SAMPLES),
        "cliff": audit(lambda p: table[np.asarray(p)], samples=SAMPLES),
        "nan": audit(nan_and_collisions, positions=8192, samples=4096),
        "positions": audit(nan_and_collisions, positions=8192, samples=4096),
        "collisions": audit(lambda p: table[np.asarray(p) % 1000], positions=8192, samples=SAMPLES),
        "unexplained": audit(
            lambda p: posenc.encode(p, D) + np.float32(1e-4) * np.sin(np.asarray(p) * 7.0)[:, None],
            samples=SAMPLES,
        ),
    }


def test_every_finding_says_how_to_fix_it() -> None:
    for kind, report in _reports_of_every_kind().items():
        found = next((f for f in report.findings if f.kind == kind), None)
        assert found is not None, (kind, report.as_text())
        assert len(found.fix) > 40 and "posenc" in found.fix, (kind, found.fix)
        assert {"kind": kind, "text": found.text, "evidence": found.evidence, "fix": found.fix} in (
            report.as_dict()["findings"]
        )
        assert f"fix: {found.fix[:30]}" in " ".join(report.as_text().split()), kind
    angles = _reports_of_every_kind()["angles"].findings
    fix = next(f for f in angles if f.kind == "angles").fix
    assert "dtype=torch.float64" in fix and "position.double() * div_term" in fix  # frequencies too


def test_a_nan_row_does_not_hide_the_finite_errors() -> None:
    def broken(positions: np.ndarray) -> np.ndarray:
        out = _paper_float32(positions)
        out[np.asarray(positions) == 1000] = np.nan
        return out

    report = audit(broken, positions=4096, samples=4096)
    assert math.isinf(report.max_abs) and report.nan_rows == 1
    assert 0 < report.finite_max_abs < 1e-3 and report.finite_max_ulp > 0
    text = " ".join(report.as_text().split())
    assert "FAIL: 1 sampled rows NaN/inf; max error over the finite rows" in text
    assert "max error inf" not in text
    d = report.as_dict()
    assert d["nan_rows"] == 1 and d["finite_max_abs"] == report.finite_max_abs and d["raising_bands"] == 0


def test_the_tutorial_module_gets_its_cliff_and_its_float32_angles() -> None:
    from tests.support.tutorial import TutorialPositionalEncoding

    report = audit(TutorialPositionalEncoding(D, dropout=0.0), samples=SAMPLES)
    kinds = _kinds(report)
    assert {"cliff", "angles"} <= kinds, report.as_text()
    assert next(f for f in report.findings if f.kind == "cliff").data["position"] == 5000
    assert report.raising_bands >= 1 and 0 < report.finite_max_abs < 1e-3
    assert "bands raise; max error over the finite rows" in " ".join(report.as_text().split())


def test_a_failing_audit_always_names_a_finding_even_for_one_rounding_step() -> None:
    """A table rounded twice (float64 → float32 → bfloat16): a few values one bfloat16 step off, nothing
    larger: not correctly rounded, with how many rows (it used to FAIL with "findings: none")."""
    twice = posenc.table(2000, 64, dtype="float64").astype(np.float32).astype(ml_dtypes.bfloat16)
    report = audit(twice)
    assert not report.passed
    (finding,) = report.findings
    assert finding.kind == "rounding" and finding.data["max_ulp"] == 1 and 0 < finding.data["rows"] < 2000
    assert finding.text.startswith("not correctly rounded: up to 0.00391 from the correctly rounded values")
    assert "up to 1 ulp of bfloat16, not necessarily there" in finding.text
    assert audit(posenc.table(2000, 64, dtype="bfloat16")).findings == []  # rounded once: nothing to say
    assert finding.fix.endswith(
        'to judge within 1 ulp rather than correctly rounded: tol="1ulp" (posenc audit --tol 1ulp)'
    )
    assert audit(twice, tol="1ulp").passed  # the tolerance the fix names accepts it


def test_float64_code_cast_once_is_judged_by_what_posenc_calls_exact() -> None:
    """The negative half of the real-code corpus at a length where it shows: float64 code cast once to
    float32 (the usual "compute in float64" table) has no false cause; over 8,192 rows a few values are one
    float32 step from the correctly rounded ones, which is what it gets told, with the tolerance that
    accepts it. Correctly rounded stays the default: the meaning of exact does not move to fit a table."""
    positions, frequencies = np.arange(8192)[:, None], 10000.0 ** (-np.arange(32) / 32)
    table = np.empty((8192, 64))
    table[:, 0::2], table[:, 1::2] = np.sin(positions * frequencies), np.cos(positions * frequencies)
    report = audit(table.astype(np.float32))
    (finding,) = report.findings
    assert finding.kind == "rounding" and finding.data["max_ulp"] == 1 and finding.data["rows"] < 10
    assert not report.passed and audit(table.astype(np.float32), tol="1ulp").passed


def test_a_band_of_only_nan_rows_says_so_not_an_error_of_zero() -> None:
    table = posenc.table(3000, 16)
    table[1024:] = np.nan
    text = audit(table).as_text()
    (line,) = [row for row in text.splitlines() if "1,024 – 2,999" in row]
    assert "every sampled row NaN/inf" in line and " 0 " not in line.split("NaN/inf")[0]


def test_a_fix_never_names_a_variant_no_one_confirmed() -> None:
    """Rows nothing matches (a TF32 angle: both operands keep 10 bits) are measured against the nearest
    candidate; the fix names the cause and posenc with the model's own options, never a fitted variant's."""
    from tests.support.audit_corpus import tf32_angles

    report = audit(tf32_angles, samples=256)
    assert not report.variant.matches and report.findings
    for finding in report.findings:
        assert "base=" not in finding.fix and "shift=" not in finding.fix
        assert "<its options>" in finding.fix and "no variant was confirmed" in finding.fix


def test_a_table_shorter_than_a_band_or_the_prefix_is_measured_up_to_its_end() -> None:
    """A module whose table ends inside the first band (512 rows) or before the 256 rows identification
    reads (100): its rows before the call raises are measured, the cliff found, no crash."""
    from tests.support.tutorial import TutorialPositionalEncoding

    for rows in (512, 100):
        report = audit(TutorialPositionalEncoding(64, max_len=rows), samples=256)
        cliff = next(f for f in report.findings if f.kind == "cliff")
        assert cliff.data["position"] == rows
        first = report.bands[0]  # every sampled position below the table's end measured, then a raise
        assert first.raises_from >= rows and first.sampled == int((report.measurement.positions < rows).sum())
        assert first.sampled > 0
        assert 0 < report.finite_max_abs < 1e-4  # its float32 angles, measured
    assert (
        "raises from 512:" in audit(TutorialPositionalEncoding(64, max_len=512)).as_text()
    )  # every row sampled


def test_a_cliff_of_float16_positions_names_them_not_a_table() -> None:
    import math

    import torch

    def pe(positions):  # the usual code with its positions in float16: no table anywhere
        p = torch.as_tensor(positions).to(torch.float16)[:, None]
        div = torch.exp(torch.arange(0, 64, 2).float() * (-math.log(10000.0) / 64)).half()
        angles = p * div
        return torch.stack([angles.sin(), angles.cos()], -1).reshape(len(positions), 64)

    (cliff,) = [f for f in posenc.audit(pe, samples=64).findings if f.kind == "cliff"]
    assert cliff.data == {"position": 65520} and "size the table" not in cliff.fix
    assert cliff.fix.startswith("its positions are held in float16, whose largest finite value is 65504")


def test_a_band_that_raises_says_where_from_and_wraps_whole_words() -> None:
    import torch

    from tests.support.tutorial import TutorialPositionalEncoding

    report = posenc.audit(TutorialPositionalEncoding(64).to(torch.bfloat16), samples=64)
    text = report.as_text(width=100)
    assert "raises from 5,000: RuntimeError: The size of tensor a" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    assert not any(line.endswith(("matc", "ma")) for line in text.splitlines())
    assert "must match the size of tensor b (5000)" in " ".join(text.split())


def test_a_half_precision_table_of_swapped_pairs_is_said_so_at_any_width() -> None:
    """A float16 buffer's low frequencies look alike in any one row: the first O(d log d) order search gave
    up on them ("no sinusoid identified"), where comparing on every row finds "sin and cos swapped"."""
    for rows, width in ((128, 256), (64, 768)):
        table = posenc.table(rows, width, dtype="float16")
        swapped = np.ascontiguousarray(table[:, np.arange(width).reshape(-1, 2)[:, ::-1].reshape(-1)])
        found = next(f for f in audit(swapped).findings if f.kind == "layout")
        assert found.text.startswith("sin and cos swapped") and found.data["swapped"] is True


def test_a_stored_table_is_measured_at_every_row_and_one_wrong_value_fails_it():
    """A table of 100,000 rows with one value an ulp off at row 77,777 passed (12,288 rows sampled, a fixed
    seed: every time); a table of at most 2**24 values in memory is measured whole, and assert_exact says
    where; the header says so, and against what the errors are measured."""
    from posenc.testing import assert_exact

    table = posenc.table(100_000, 64)
    table[77_777, 5] = np.nextafter(table[77_777, 5], np.float32(2))
    with pytest.raises(AssertionError, match="the largest at position 77,777") as caught:
        assert_exact(table, samples=16)
    assert "in 1 of 100,000 sampled rows" in str(caught.value)
    report = posenc.audit(posenc.table(100_000, 64), samples=16)
    assert report.passed and len(report.measurement.positions) == 100_000
    said = " ".join(report.as_text().split())
    assert "correctly rounded float32 values, 64 columns; positions 0..99,999, every one measured" in said


def test_assert_exact_says_nan_rows_as_the_report_does_and_a_rope_refusal_gives_the_arrays_shape():
    """assert_exact's first line said "max error inf (inf ulp)" of NaN rows, which hold no error; a (1, 64)
    table was "array of shape (64,)" in identify_rope's refusal."""
    from posenc.porting.rope_matching import identify_rope
    from posenc.testing import assert_exact

    table = posenc.table(64, 8)
    table[10, 3] = np.nan
    with pytest.raises(AssertionError, match=r"1 sampled rows NaN/inf; max error over the finite rows 0 "):
        assert_exact(table)
    with pytest.raises(ValueError, match=r"array of shape \(1, 64\) is neither"):
        identify_rope(np.ones((1, 64), np.float32))


def test_a_report_that_judges_nothing_says_not_judged_not_fail():
    """posenc's own table of scale 10 (its first frequency aliases at integer positions) and random values:
    no variant identified, so nothing is known to be wrong with them — NOT JUDGED, not FAIL (still not a
    pass: exit 1, assert_exact raises, saying it could not judge)."""
    from posenc.testing import assert_exact

    for target in (posenc.table(1024, 64, scale=10.0), np.random.default_rng(0).random((512, 64))):
        report = audit(target, samples=256)
        assert not report.passed and not report.judged and report.verdict() == "NOT JUDGED"
        assert report.as_text().splitlines()[-1].startswith("NOT JUDGED: ")
        assert report.as_dict()["verdict"] == "NOT JUDGED"
        with pytest.raises(AssertionError, match="could not be judged exact"):
            assert_exact(target, samples=256)
    assert audit(posenc.table(1024, 64, scale=10.0), preset={"scale": 10.0}).passed  # said: judged, exact
    broken = audit(posenc.analysis.naive_table(16384, 64), samples=256)
    assert broken.judged and broken.verdict() == "FAIL"


def test_assert_exact_of_a_whole_model_passes_or_raises_with_its_verdicts():
    """assert_exact read a single report's fields of a whole model's audit (an AttributeError)."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    import posenc.torch as pt
    from posenc.testing import assert_exact

    config = LlamaConfig(hidden_size=64, num_attention_heads=4, max_position_embeddings=4096)
    model = torch.nn.Sequential(LlamaRotaryEmbedding(config))
    with pytest.raises(AssertionError, match=r"FAIL: 0 of 1 judged component\(s\) exact"):
        assert_exact(model, samples=64)
    pt.patch(model)
    assert assert_exact(model, samples=64).passed
