"""Tables the auditor met wrongly: rows with no signal (all zeros: no offset can be read from them) and a
RoPE cos or sin cache stored as a table (every column sin(p) is one: LongRoPE with factors 1, 0.1, ...),
whose identified variant is rotary and was handed to a sinusoidal Preset (a TypeError from posenc.audit,
the CLI and the explorer).
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import rope

POSENC = Path(sys.executable).with_name("posenc")


def _sine_columns(rows: int = 512, width: int = 8) -> np.ndarray:
    """Every column sin(p), p = 0 .. rows - 1, in float32."""
    return np.repeat(np.sin(np.arange(rows, dtype=np.float64))[:, None], width, axis=1).astype(np.float32)


def _caches() -> dict[str, np.ndarray]:
    cos, sin = rope.cos_sin(np.arange(512), rope.config(head_dim=64), dtype="float32")
    return {"sin(p) in every column": _sine_columns(), "Llama cos cache": cos, "Llama sin cache": sin}


def test_an_all_zero_table_matches_nothing_and_is_no_offset():
    report = posenc.audit(np.zeros((512, 16), np.float32))
    variant = report.variant
    assert not variant.matches and variant.start == 0, variant
    assert "nothing matches" in variant.how
    assert not report.passed
    assert not any(f.kind == "offset" for f in report.findings), [f.text for f in report.findings]
    assert "off by" not in report.as_text().split("findings:")[1]


def test_a_shifted_table_still_has_its_offset():
    """The offset finding stays for rows that do match a variant at another position."""
    report = posenc.audit(posenc.table(512, 16, start=1))
    assert report.variant.start == 1 and [f.kind for f in report.findings][:1] == ["offset"]


@pytest.mark.parametrize("name", sorted(_caches()))
def test_a_rope_cache_stored_as_a_table_is_audited_as_that_cache(name):
    stored = _caches()[name]
    report = posenc.audit(stored)
    variant = report.variant
    assert variant.params is not None and variant.name.startswith("rope-"), variant
    assert variant.parts == ("cos" if "cos" in name else "sin") and variant.matches
    assert report.passed and report.max_abs == 0.0, report.as_text()
    # the reference is that cache's own columns, element by element
    exact = variant.exact(np.arange(len(stored)), "float32", stored.shape[1])
    np.testing.assert_array_equal(exact, stored.astype(np.float64))


def test_a_declared_sinusoidal_variant_on_a_rope_cache_says_what_the_rows_are():
    report = posenc.audit(_sine_columns(), preset="paper")
    assert not report.passed
    kinds = {f.kind: f for f in report.findings}
    assert "not a sinusoidal table" in kinds["variant"].text and "RoPE sin cache" in kinds["variant"].text


def test_posenc_audit_of_a_sine_table_is_a_report_not_a_traceback(tmp_path):
    path = tmp_path / "sines.npy"
    np.save(path, _sine_columns())
    done = subprocess.run([str(POSENC), "audit", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "variant: rope-longrope" in done.stdout, done.stdout


def test_the_explorer_audits_a_sine_table():
    from posenc.explore import api

    buffer = io.BytesIO()
    np.save(buffer, _sine_columns())
    answer = api.identify({"filename": "sines.npy"}, buffer.getvalue())
    assert answer["best"] == "rope-longrope", answer["verdict"]
    assert answer["audit"]["passed"] is True, answer["audit"]
