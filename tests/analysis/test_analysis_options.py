"""posenc.analysis with the options scale and odd: every function takes the core's options with their
defaults, and the closed forms, the shift matrix, uniqueness and the report follow them."""

from __future__ import annotations

import inspect
import json
import math

import numpy as np
import pytest

import posenc
from posenc import analysis, defaults
from tests.support.analysis_cases import (
    EPS,
    brute_force_first_repeat,
    brute_force_margin,
    mp_dot,
)

# --- the options scale and odd ----------------------------------------------------------------------


def test_every_function_takes_the_options_of_the_core_with_its_defaults() -> None:
    takers = []
    for name in analysis.__all__:
        function = getattr(analysis, name)
        if not inspect.isfunction(function) or "base" not in inspect.signature(function).parameters:
            continue
        takers.append(name)
        parameters = inspect.signature(function).parameters
        for option, default in defaults.OPTIONS.items():
            if option == "layout" and option not in parameters:  # closed forms, wavelengths: no layout
                continue
            assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
            assert parameters[option].default == default, (name, option)
    assert len(takers) == 14  # every function that builds encodings from options


def test_check_reports_on_the_scaled_table() -> None:
    plain = analysis.check(300, 64, dtype="float64")
    scaled = analysis.check(300, 64, dtype="float64", scale=2.0)
    assert plain.passed and scaled.passed
    assert "scale" not in plain.options and scaled.options["scale"] == 2.0
    assert list(scaled.options) == [
        "d_model",
        "length",
        "base",
        "shift",
        "scale",
        "layout",
        "dtype",
        "compute",
    ]
    figure = scaled.criteria[0].figure
    assert figure != pytest.approx(plain.criteria[0].figure, rel=1e-3)
    margin = analysis.uniqueness_margin(300, 64, dtype="float64", scale=2.0)
    assert figure == pytest.approx(margin.distance, rel=1e-12)
    # doubling every frequency is doubling every offset: the closest pair at offset k is 2k apart unscaled
    k = margin.b - margin.a
    assert figure == pytest.approx(float(analysis.closed_form_distance(2 * k, 64)), rel=1e-12)
    assert "shift 0, scale 2, layout interleaved, float64" in " ".join(scaled.as_text(width=200).split())
    assert json.loads(json.dumps(scaled.as_dict()))["options"]["scale"] == 2.0


def test_check_of_an_odd_width_follows_the_odd_rule() -> None:
    """odd="zero" ends an odd width in a zero column; "literal" and "drop" in a sine without its cosine,
    whose product sin(p ω) sin((p + k) ω) depends on p: dot products then depend on more than the offset."""
    zero = analysis.check(300, 63, dtype="float32")
    assert zero.passed and "odd" not in zero.options
    for rule in ("literal", "drop"):
        report = analysis.check(300, 63, dtype="float32", odd=rule)
        assert report.options["odd"] == rule and f"layout interleaved, odd {rule}," in report.as_text(
            width=200
        )
        assert {c.name for c in report.criteria if not c.passed} == {"generalises", "shift_invariant"}
        bounded = report.criteria[3]
        assert bounded.passed and bounded.data["max_norm"] > math.sqrt(31) + 1e-6
        assert report.criteria[0].figure == pytest.approx(
            analysis.uniqueness_margin(300, 63, dtype="float32", odd=rule).distance
        )
    usual = analysis.check(300, 63, dtype="float16", odd="literal", compute="dtype")
    assert usual.options["odd"] == "literal" and not usual.criteria[-1].passed


@pytest.mark.parametrize(("d_model", "odd"), [(64, "zero"), (7, "literal"), (7, "drop"), (33, "zero")])
def test_closed_forms_with_scale_and_odd_against_mpmath(d_model: int, odd: str) -> None:
    offsets = np.array([0, 1, 2, 7, 79, 1000, 123457])
    got = analysis.closed_form_dot_product(offsets, d_model, scale=0.25, odd=odd, shift=1)
    expected = [mp_dot(int(k), d_model, 10000.0, 1, scale=0.25, odd=odd) for k in offsets]
    np.testing.assert_allclose(got, expected, rtol=0, atol=d_model * 4 * EPS)
    # the distance is (2 n - 2 Σ cos) ** 0.5 over the same pairs
    squared = 2 * (d_model // 2) - 2 * got[1:]
    distance = analysis.closed_form_distance(offsets[1:], d_model, scale=0.25, odd=odd, shift=1)
    np.testing.assert_allclose(distance**2, squared, rtol=1e-9)


def test_closed_form_of_a_lone_sine_column_misses_its_product() -> None:
    pe = posenc.table(60, 7, odd="literal", dtype="float64")
    lone = posenc.frequencies(7, odd="literal")[-1]
    p = np.arange(50)
    for k in (1, 3, 10):
        measured = np.einsum("ij,ij->i", pe[p], pe[p + k])
        closed = analysis.closed_form_dot_product(k, 7, odd="literal")
        np.testing.assert_allclose(measured, closed + np.sin(p * lone) * np.sin((p + k) * lone), atol=1e-14)
    assert analysis.closed_form_dot_product(3, 7, odd="literal") != analysis.closed_form_dot_product(3, 7)
    assert analysis.toeplitz_deviation(analysis.dot_products(pe)) > 1e-4  # float64 noise: ~1e-15


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
def test_shift_matrix_with_scale_and_odd(layout: str) -> None:
    m = analysis.shift_matrix(3, 9, scale=2.5, layout=layout)
    here = posenc.table(40, 9, start=5, scale=2.5, layout=layout, dtype="float64")
    there = posenc.table(40, 9, start=8, scale=2.5, layout=layout, dtype="float64")
    assert np.abs(here @ m.T - there).max() <= 4 * EPS
    assert analysis.shift_error(3, 40, 9, start=5, scale=2.5, layout=layout) <= 4 * EPS
    assert not np.allclose(m, analysis.shift_matrix(3, 9, layout=layout))
    # an even width is the same under every rule; an odd one has no shift matrix under literal and drop
    np.testing.assert_array_equal(analysis.shift_matrix(3, 8, odd="literal"), analysis.shift_matrix(3, 8))
    for rule in ("literal", "drop"):
        with pytest.raises(ValueError, match="odd='zero' or an even d_model"):
            analysis.shift_matrix(3, 9, odd=rule, layout=layout)


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize(("odd", "scale"), [("literal", 1.0), ("drop", 3.0), ("zero", 0.5)])
def test_naive_table_follows_scale_and_odd(layout: str, odd: str, scale: float) -> None:
    options = {"layout": layout, "odd": odd, "scale": scale}
    naive = analysis.naive_table(40, 7, dtype="float64", **options)
    assert naive.shape == (40, 7) and naive.flags.c_contiguous
    np.testing.assert_allclose(naive, posenc.table(40, 7, dtype="float64", **options), rtol=0, atol=1e-13)
    if odd == "literal":
        assert not (naive[1:, -1] == 0).all()  # the last column is a sine, not a zero column


@pytest.mark.parametrize(
    ("length", "d_model", "dtype", "options"),
    [
        (400, 7, "bfloat16", {"odd": "literal"}),
        (300, 9, "float16", {"odd": "drop", "scale": 0.1}),
        (500, 8, "bfloat16", {"scale": 7.0}),
        (257, 5, "float64", {"odd": "literal", "layout": "sin_cos"}),
    ],
)
def test_uniqueness_margin_with_scale_and_odd_against_brute_force(
    length: int, d_model: int, dtype: str, options: dict
) -> None:
    rows = posenc.table(length, d_model, dtype=dtype, **options)
    margin = analysis.uniqueness_margin(length, d_model, dtype=dtype, **options)
    assert margin.complete
    assert margin.distance == pytest.approx(brute_force_margin(rows), rel=1e-9, abs=1e-12)
    unscaled = analysis.uniqueness_margin(
        length, d_model, dtype=dtype, layout=options.get("layout", "interleaved")
    )
    assert margin.distance != pytest.approx(unscaled.distance, rel=1e-6)


@pytest.mark.parametrize(
    ("d_model", "options", "compute"),
    [(2, {"scale": 0.5}, "exact"), (3, {"odd": "literal"}, "exact"), (16, {"scale": 3.0}, "dtype")],
)
def test_collisions_with_scale_and_odd_against_brute_force(d_model: int, options: dict, compute: str) -> None:
    build = posenc.table if compute == "exact" else analysis.naive_table
    rows = build(3000, d_model, dtype="bfloat16", **options)
    found = analysis.collisions(3000, d_model, dtype="bfloat16", compute=compute, **options)
    assert (found.first, found.earlier) == (brute_force_first_repeat(rows) or (None, None))
    if compute == "exact":  # the usual code's first repeats come from rounding the positions: any scale
        plain = analysis.collisions(3000, d_model, dtype="bfloat16")
        assert (found.first, found.distinct) != (plain.first, plain.distinct)
    horizon = analysis.collision_horizon(d_model, limit=3000, dtype="bfloat16", compute=compute, **options)
    assert horizon == found.first


def test_wavelengths_and_the_table_checks_take_scale_and_odd() -> None:
    np.testing.assert_allclose(analysis.wavelengths(64, scale=2.0), analysis.wavelengths(64) / 2, rtol=1e-15)
    assert analysis.wrap_length(512, scale=0.5) == pytest.approx(2 * analysis.wrap_length(512), rel=1e-15)
    assert len(analysis.wavelengths(7, odd="literal")) == 4 and len(analysis.wavelengths(7)) == 3
    assert analysis.max_magnitude(500, 7, odd="literal", scale=3.0, dtype="bfloat16") == 1.0
    assert analysis.length_consistent(300, 7, odd="drop", scale=0.5, dtype="float16")
    assert analysis.recomputes_identically(300, 7, odd="literal", scale=2.0)
    with pytest.raises(ValueError, match="scale"):
        analysis.max_magnitude(10, 8, scale=0.0)
    with pytest.raises(ValueError, match="odd"):
        analysis.check(10, 8, odd="round")
    with pytest.raises(ValueError, match="d_model"):
        analysis.check(10, 7, odd="error")
