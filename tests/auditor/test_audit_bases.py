"""Bases that are no round number: identify reads them exactly from the table (each frequency read across
the whole table, the base snapped only within the fit's uncertainty), and the auditor reads an identified
base again far out, where a base off by parts in 10⁷ shows as an error ∝ position that no rounding
explains (it was once reported as "angles formed in float32" against base 9647.58, shift 1 for rows of
base 10001 computed in float64)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import posenc
from posenc.porting import identify

D = 64


def _float64_code(base: float, scale: float = 1.0):
    """Rows computed in float64 (ω_i = scale·base^(−2i/d), angle, sin/cos), then cast to float32."""

    def rows(positions):
        omega = scale * base ** (-np.arange(0, D, 2, dtype=np.float64) / D)
        angles = np.asarray(positions, dtype=np.float64)[:, None] * omega
        out = np.empty((len(angles), D))
        out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
        return out.astype(np.float32)

    return rows


def _float32_code(count: int, d_model: int, base: float) -> np.ndarray:
    """The PyTorch tutorial's float32 table (div_term by exp of a float32 product) with ``base``."""
    position = torch.arange(count, dtype=torch.float32)[:, None]
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(base) / d_model))
    table = torch.zeros(count, d_model)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
    return table.numpy()


@pytest.mark.parametrize(
    ("base", "rows"),
    [(b, rows) for b in (10001.0, 12345.6) for rows in (64, 256, 2048)]
    + [(82684.3257, 2048)],  # 256 float32 rows tell it only as 82684.326: within their rounding
)
def test_identify_reads_a_base_that_is_no_round_number_exactly(base, rows):
    for dtype in ("float32", "float64"):
        best = identify(posenc.table(rows, 512, base=base, layout="interleaved", dtype=dtype))[0]
        assert best.matches and (best.options["base"], best.options["shift"]) == (base, 0.0), (dtype, best)


@pytest.mark.parametrize("base", [10001.0, 12345.6])
def test_identify_reads_the_base_float32_code_was_given(base):
    # float32 code rounds −ln(base)/d once: its frequencies are those of base 10001.0026, within the
    # uncertainty that rounding leaves; the base the code was given is the plainest within it
    best = identify(_float32_code(2048, 512, base))[0]
    assert best.matches and (best.options["base"], best.options["shift"]) == (base, 0.0), best


@pytest.mark.parametrize("base", [10001.003, 82684.3257])
def test_an_identified_base_that_is_off_is_read_again_far_out(base):
    # the first 256 rows tell 82684.3257 only within their float32 rounding (as 82684.326): far out the
    # difference grows ∝ position, and the base is read again from the rows' phase there
    report = posenc.audit(_float64_code(base), positions=65536, samples=256)
    assert report.variant.options["base"] == base and report.variant.options["shift"] == 0.0
    assert ("base read again from the phase of" in report.variant.how) == (base == 82684.3257)
    assert report.max_abs <= 2.0**-24, report.as_text()  # computed in float64, then cast: one rounding off
    assert not {"angles", "frequencies", "unexplained"} & {f.kind for f in report.findings}


def test_a_declared_base_the_first_rows_cannot_tell_is_a_wrong_base():
    preset = {"base": 10001.0, "layout": "interleaved"}
    report = posenc.audit(_float64_code(10001.003), positions=65536, samples=256, preset=preset)
    found = [f for f in report.findings]
    assert [f.kind for f in found] == ["variant"], report.as_text()
    assert found[0].text.startswith("wrong base: declared base 10001.0") and "10001.003" in found[0].text
    assert found[0].data["found"]["base"] == 10001.003


def test_float32_code_of_a_base_is_judged_against_that_base_with_its_float32_angles():
    def rows(positions):
        return _float32_code(int(np.max(positions)) + 1, D, 10001.0)[positions]

    report = posenc.audit(rows, positions=16384, samples=256)
    assert report.variant.options["base"] == 10001.0 and "read again" not in report.variant.how
    assert "angles formed in float32" in [f.text.split(":")[0] for f in report.findings], report.as_text()


def test_an_error_finer_than_any_rounding_of_the_angle_is_not_called_angles():
    # every frequency 2^-31 too large: an error ∝ position at 2^-31·ω_0·p, which no type's rounding of
    # the angle leaves (float32's: 2^-24); no base explains it, but it is the variant of scale 1 + 2^-31,
    # read with the base from the far rows' phase, whose last bits that reading cannot pin
    report = posenc.audit(_float64_code(10000.0, scale=1 + 2.0**-31), positions=1 << 22, samples=256)
    kinds = [f.kind for f in report.findings]
    assert "angles" not in kinds and kinds == ["unpinned"], report.as_text()
    assert abs(report.variant.options["scale"] - (1 + 2.0**-31)) < 1e-14


def test_rows_that_match_nothing_are_measured_against_the_nearest_named_variant_not_a_fit():
    from tests.support.audit_corpus import float16_pow_frequencies  # 10000 ** (2i/d) and 1 / x in float16

    report = posenc.audit(float16_pow_frequencies, samples=256)
    assert report.variant.name.startswith("paper") and "nothing matches" in report.variant.how, report.variant
    assert [f.text.split(":")[0] for f in report.findings] == ["frequencies computed in float16"]
    assert "off by up to 1.2 units of float16" in report.findings[0].text  # against base 10000's: 2.1 a fit's


def test_float32_frequencies_with_float64_angles_are_the_frequencies_not_a_base_or_the_angles():
    # the tutorial's float32 div_term, the angles formed in float64: its frequencies are off by about one
    # float32 rounding; neither "angles formed in float32" (no angle was) nor "wrong shift ... base
    # 1000.00017" (two parameters fitted to four rounded frequencies) is true
    div = torch.exp(torch.arange(0, 8, 2).float() * (-math.log(10000.0) / 8))

    def rows(positions):
        angles = torch.as_tensor(positions, dtype=torch.float64)[:, None] * div.double()
        out = torch.zeros(len(angles), 8, dtype=torch.float64)
        out[:, 0::2], out[:, 1::2] = torch.sin(angles), torch.cos(angles)
        return out.float()

    for preset in ("paper", None):
        report = posenc.audit(rows, positions=65536, samples=256, preset=preset)
        assert report.variant.options["base"] == 10000.0 and report.variant.options["shift"] == 0.0
        titles = [f.text.split(":")[0] for f in report.findings]
        assert titles == ["frequencies computed in float32"], report.as_text()


def test_a_16_bit_table_of_a_base_no_round_number_is_read_again_to_that_base():
    # float16 rows of base 12345.6, correctly rounded: identified as base 3802.5, shift 1 from 256 rows
    # (equal to their rounding); read again far out in float16 precision, and exact against it
    report = posenc.audit(lambda p: posenc.encode(np.asarray(p), 16, base=12345.6, dtype="float16"),
                          positions=65536, samples=256)  # fmt: skip
    assert report.variant.options["base"] == 12345.6 and report.variant.name is None
    assert report.passed and not report.findings, report.as_text()


def test_identify_says_why_when_no_variant_applies_to_a_table():
    # fairseq's table of width 2 (one frequency, shift 1): every candidate refused it, and identify
    # returned [] (the CLI printed a header only; audit raised IndexError)
    with pytest.raises(ValueError, match=r"no variant applies to a table of shape \(64, 2\)"):
        identify(posenc.presets.get("fairseq", padding_idx=1).table(64, 2))
