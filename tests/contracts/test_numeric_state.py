"""posenc is independent of global numeric state: the same results and the same behaviour under any
``np.seterr``/``np.errstate``, any torch default dtype and either JAX x64 setting."""

from __future__ import annotations

import dataclasses
import decimal

import numpy as np
import pytest

import posenc
from posenc import analysis
from posenc.analysis import rope_figures
from tests.support.public_calls import CALLS, NUMERIC_STATES, arrays_of, snapshot

STATES = NUMERIC_STATES

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


# --- the analysis: every public entry point under np.seterr(all="raise") --------------------------------


def _fingerprint(value):
    """What a result holds, comparable with ==: arrays by dtype, shape and bytes; reports by their text."""
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if hasattr(value, "as_text"):
        return value.as_text()
    if isinstance(value, dict):
        return {k: _fingerprint(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_fingerprint(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, _fingerprint(getattr(value, f.name))) for f in dataclasses.fields(value)]
    if isinstance(value, float) and value != value:
        return "nan"
    return repr(value)


ANALYSIS = {
    # the report's case: float16 rounds tiny values to subnormals and zero (an underflow in a cast)
    "check float16": lambda: analysis.check(1024, 8, dtype="float16"),
    "check float16 usual code": lambda: analysis.check(1024, 8, dtype="float16", compute="dtype"),
    "check bfloat16": lambda: analysis.check(512, 16, dtype="bfloat16"),
    "collisions float16 usual code": lambda: analysis.collisions(70000, 8, dtype="float16", compute="dtype"),
    "collisions bfloat16": lambda: analysis.collisions(2048, 64, dtype="bfloat16"),
    "collision_horizon float16": lambda: analysis.collision_horizon(64, dtype="float16", compute="dtype"),
    "uniqueness_margin float16": lambda: analysis.uniqueness_margin(512, 16, dtype="float16"),
    "naive_table float16 (overflow to inf)": lambda: analysis.naive_table(70000, 8, dtype="float16"),
    "naive_table bfloat16": lambda: analysis.naive_table(700, 8, dtype="bfloat16"),
    "dot_products float16": lambda: analysis.dot_products(posenc.table(50, 8, dtype="float16")),
    "cosine_similarity float16": lambda: analysis.cosine_similarity(posenc.table(50, 8, dtype="float16")),
    "toeplitz_deviation of inf": lambda: analysis.toeplitz_deviation(np.array([[np.inf, 1], [1, np.inf]])),
    "closed_form_dot_product": lambda: analysis.closed_form_dot_product(np.arange(5), 8),
    "closed_form_distance": lambda: analysis.closed_form_distance(np.arange(5), 8),
    "length_consistent float16": lambda: analysis.length_consistent(100, 8, dtype="float16"),
    "max_magnitude float16": lambda: analysis.max_magnitude(100, 8, dtype="float16"),
    "recomputes_identically float16": lambda: analysis.recomputes_identically(100, 8, dtype="float16"),
    "shift_error": lambda: analysis.shift_error(3, 100, 8),
    "shift_matrix": lambda: analysis.shift_matrix(3, 8),
    "wavelengths of tiny frequencies": lambda: analysis.wavelengths(512, shift=252),
    "wrap_length": lambda: analysis.wrap_length(8),
    "rope_error_curves": lambda: rope_figures.rope_error_curves(length=4096, bands=20),
    "rope_wavelength_lines": lambda: rope_figures.rope_wavelength_lines(),
}


def test_every_analysis_entry_point_is_the_same_under_seterr_raise():
    """``np.seterr(all="raise")`` (the process-wide setting, not a context) changes nothing: not the
    results, and nothing raises (``check(1024, 8, dtype="float16")`` raised FloatingPointError)."""
    want = {name: _fingerprint(call()) for name, call in ANALYSIS.items()}
    old = np.seterr(all="raise")
    try:
        got = {name: _fingerprint(call()) for name, call in ANALYSIS.items()}
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
    finally:
        np.seterr(**old)
    for name in ANALYSIS:
        assert got[name] == want[name], name


def test_the_figures_draw_under_seterr_raise():
    from posenc.analysis import plot

    old = np.seterr(all="raise")
    try:
        figure = plot.heatmap(length=64, d_model=16, dtype="float16")
    finally:
        np.seterr(**old)
    assert figure.axes


_DECIMAL_PROBE = """
import decimal
for ctx in (decimal.DefaultContext, decimal.getcontext()):  # before posenc is imported
    ctx.prec, ctx.rounding = 3, decimal.ROUND_FLOOR
    ctx.traps[decimal.Inexact] = ctx.traps[decimal.Rounded] = True
from posenc.rope import frequencies
print(repr(frequencies.MIN_FREQUENCY), repr(frequencies.MAX_FREQUENCY))
"""


def _odd_decimal_context() -> decimal.Context:
    return decimal.Context(prec=3, rounding=decimal.ROUND_FLOOR, traps=[decimal.Inexact, decimal.Rounded])


def test_results_are_the_same_under_any_decimal_context():
    """A program's decimal contexts (3 digits rounding down, Inexact and Rounded trapped) reach nothing,
    neither the current one nor decimal.DefaultContext, which a new decimal.Context copies: posenc's
    contexts are its own (an import-time bound of posenc.rope raised Inexact)."""
    import subprocess
    import sys

    from posenc.core import highprec
    from posenc.torch import period_time

    def computed() -> list:
        omegas, limbs = highprec.frequency_constants(8, 12345.5, 16, 0.5, 0.75)  # not cached
        yarn = {"rope_type": "yarn", "factor": 3.5, "original_max_position_embeddings": 96}
        params = posenc.rope.config(head_dim=16, base=4321.5, scaling=yarn)
        return [
            omegas.tolist(),
            limbs.tolist(),
            highprec.wavelengths(8, 12345.5, 16, 0.5, 0.75).tolist(),
            highprec.sincos_exact(1e6 + 0.5, 3, 10000.0, 16, 0.0, 1.0, "float32"),
            posenc.rope.frequencies.exact_inv_freq(params, None, 30),  # cleared below: computed again
            str(period_time.ratio(3.0, 7.0)),
        ]

    want = computed()
    posenc.rope.frequencies._exact_frequencies.cache_clear()
    saved = decimal.DefaultContext.copy()
    decimal.DefaultContext.prec, decimal.DefaultContext.rounding = 3, decimal.ROUND_FLOOR
    decimal.DefaultContext.traps[decimal.Inexact] = decimal.DefaultContext.traps[decimal.Rounded] = True
    try:
        with decimal.localcontext(_odd_decimal_context()):
            got = computed()
    finally:
        decimal.DefaultContext.prec, decimal.DefaultContext.rounding = saved.prec, saved.rounding
        decimal.DefaultContext.traps.update(saved.traps)
    assert got == want
    done = subprocess.run([sys.executable, "-c", _DECIMAL_PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [repr(posenc.rope.frequencies.MIN_FREQUENCY), "Decimal('16777216')"]
