"""posenc is independent of global numeric state: the same results and the same behaviour under any
``np.seterr``/``np.errstate``, any torch default dtype and either JAX x64 setting."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
import torch

import posenc
from tests.support.public_calls import CALLS, arrays_of, snapshot


@contextlib.contextmanager
def _torch_default(dtype: torch.dtype) -> Iterator[None]:
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


STATES = {
    "seterr raise": lambda: np.errstate(all="raise"),
    "seterr warn": lambda: np.errstate(all="warn"),
    "torch default float64": lambda: _torch_default(torch.float64),
}

# computed once, in the default state, for every call (the baseline the states are compared with)
_BASELINE: dict[str, list[np.ndarray]] = {}


def _baseline(name: str) -> list[np.ndarray]:
    if name not in _BASELINE:
        with np.errstate(all="ignore"):
            _BASELINE[name] = [snapshot(a) for a in arrays_of(CALLS[name]())]
    return _BASELINE[name]


@pytest.mark.parametrize("state", sorted(STATES))
def test_every_public_call_is_the_same_under_any_numeric_state(state):
    import warnings

    for name in sorted(CALLS):
        want = _baseline(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # under seterr(all="warn") a warning would be a change too
            with STATES[state]():
                got = [snapshot(a) for a in arrays_of(CALLS[name]())]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} under {state}")


@pytest.mark.parametrize(
    "call",
    [
        lambda: posenc.encode(np.arange(1000), 64, dtype="float16"),  # float16 underflow in the final cast
        lambda: posenc.encode([1e-310, 5e-324, -1e-300], 8, dtype="float64"),  # tiny positions
        lambda: posenc.table(3000, 64, dtype="bfloat16"),
        lambda: posenc.table(1, 4, base=1e300, shift=0.8),
        lambda: posenc.frequencies(512, shift=252),
    ],
    ids=["float16 underflow", "tiny float64", "bfloat16 table", "huge base", "tiny frequencies"],
)
def test_the_reported_cases_do_not_raise_under_seterr_raise(call):
    with np.errstate(all="ignore"):
        want = call()
    old = np.seterr(all="raise")
    try:
        got = call()
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
    finally:
        np.seterr(**old)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_the_criteria_report_and_the_audit_are_the_same_under_seterr_raise():
    from posenc.analysis.check import check
    from posenc.auditor import audit

    with np.errstate(all="ignore"):
        want = check(length=256, d_model=32, dtype="float16").as_text()
        audit_want = audit(lambda p: posenc.encode(p, 32), d_model=32).as_text()
    with np.errstate(all="raise"):
        assert check(length=256, d_model=32, dtype="float16").as_text() == want
        assert audit(lambda p: posenc.encode(p, 32), d_model=32).as_text() == audit_want


def test_jax_results_are_the_same_with_x64_on_and_off():
    import jax
    import jax.numpy as jnp

    import posenc.jax as pj

    before = jax.config.jax_enable_x64
    try:
        jax.config.update("jax_enable_x64", False)
        off = (np.asarray(pj.encode(jnp.arange(70), 16)), np.asarray(pj.table(40, 16, start=3)))
        jax.config.update("jax_enable_x64", True)
        on = (np.asarray(pj.encode(jnp.arange(70), 16)), np.asarray(pj.table(40, 16, start=3)))
    finally:
        jax.config.update("jax_enable_x64", before)
    for a, b in zip(off, on, strict=True):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(on[0], posenc.table(70, 16))
