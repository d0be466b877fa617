"""The auditor on its planted corpus (:mod:`tests.support.audit_corpus`): encodings written the way published
code writes them, each with its ground truth. Every true cause is named, with the right precision or
position, and no false one (precision and recall 1.0); the audit guide (docs/audit.md) shows the same
table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.audit_corpus import CASES, Case, run, sample, table

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def test_the_corpus_plants_every_cause_in_at_least_twenty_encodings() -> None:
    assert len(CASES) >= 20 and len({c.name for c in CASES}) == len(CASES)
    planted = {kind for case in CASES for kind in case.truth}
    assert planted >= {
        "positions",
        "frequencies",
        "angles",
        "storage",
        "layout",
        "variant",
        "offset",
        "cliff",
        "unexplained",
    }
    assert sum(not case.truth for case in CASES) >= 3  # correct ones: nothing may be found there


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_true_cause_named_and_no_false_one(case: Case) -> None:
    report, _, wrong = run(case)
    assert not wrong, report.as_text()
    assert all(f.fix for f in report.findings)


def test_precision_and_recall_are_one() -> None:
    true_positive = false_positive = false_negative = 0
    for case in CASES:
        _, kinds, _ = run(case)
        true_positive += len(kinds & set(case.truth))
        false_positive += len(kinds - set(case.truth))
        false_negative += len(set(case.truth) - kinds)
    assert true_positive >= 30
    assert (false_positive, false_negative) == (0, 0)


def test_the_audit_guide_shows_the_corpus_table() -> None:
    assert table() in GUIDE.read_text(), "regenerate it: python -m tests.support.audit_corpus --doc"


def test_the_audit_guide_shows_the_report_the_program_writes() -> None:
    assert f"```\n{sample()}\n```" in GUIDE.read_text(), (
        "regenerate: python -m tests.support.audit_corpus --doc"
    )
