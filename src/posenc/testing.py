"""Put the exactness check in a test suite: :func:`assert_exact` and the pytest fixture ``posenc_exact``.

::

    from posenc.testing import assert_exact

    def test_positional_encoding_is_exact():
        assert_exact(MyPositionalEncoding(512), positions="0:65536")      # raises AssertionError if not

With pytest, ``pytest_plugins = ["posenc.testing"]`` in the root ``conftest.py`` gives every test the
fixture ``posenc_exact`` (the same function): ``def test_pe(posenc_exact): posenc_exact(my_table)``.
The check is :func:`posenc.audit` with its hints (``d_model``, ``positions``, ``dtype``, ``preset``,
``key``, ``tol``, ``samples``, ``timeout``); the AssertionError carries the report's text: the variant, the
errors per band and the findings. Importing this module imports pytest where it is installed (for the
fixture; without it, :func:`assert_exact` still works) and nothing of posenc's numerics until a check runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["assert_exact", "posenc_exact"]


def assert_exact(target: Any, **hints: Any) -> Any:
    """Audit ``target`` (:func:`posenc.audit`, same hints) and raise AssertionError, with the report, unless
    it is within ``tol`` (default: correctly rounded); a target that cannot be judged (no variant
    identified: say what it should be with ``preset=``) raises too, saying so. Returns the report
    (:class:`~posenc.auditor.AuditReport`; a whole model's :class:`~posenc.auditor.ModelAudit`).

    >>> import posenc
    >>> assert_exact(posenc.table(1024, 32), samples=256).passed
    True
    """
    from .auditor import AuditReport, audit

    report = audit(target, **hints)
    if report.passed:
        return report
    if not isinstance(report, AuditReport):  # a whole model: its components' verdicts
        raise AssertionError(f"{report.target}: {report.summary()}\n\n{report.as_text()}")
    findings = "; ".join(f.text for f in report.findings) or "no finding explains it"
    what = "is not exact" if report.judged else "could not be judged exact"
    raise AssertionError(
        f"{report.target} {what} ({report.tolerance_text()} asked): {report.summary()}; {findings}"
        f"\n\n{report.as_text()}"
    )


def _fixture() -> Any:
    try:
        import pytest
    except ImportError:  # without pytest there is no fixture; assert_exact still works
        return None

    @pytest.fixture
    def posenc_exact() -> Any:
        """:func:`posenc.testing.assert_exact`, as a fixture.

        A test requests it by name once the root ``conftest.py`` holds
        ``pytest_plugins = ["posenc.testing"]``::

            def test_positional_encoding_is_exact(posenc_exact):
                report = posenc_exact(MyPositionalEncoding(512), positions="0:65536")  # AssertionError if not
                assert report.variant.name.startswith("paper")
        """
        return assert_exact

    return posenc_exact


posenc_exact = _fixture()
