"""posenc.analysis: NumPy only on import; closed forms against mpmath and a worked example's
numbers, Toeplitz structure at float64 noise level, the shift matrix M_k, uniqueness against brute force,
collision horizons per dtype."""

from __future__ import annotations

import math
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
from posenc import analysis
from posenc.analysis.hashes import row_hashes
from tests.support.analysis_cases import (
    EPS,
    brute_force_first_repeat,
    brute_force_margin,
    mp_dot,
)


def test_import_analysis_loads_numpy_only() -> None:
    """``import posenc.analysis`` (and reading posenc.analysis.plot.KINDS) loads NumPy, never matplotlib or a
    framework: the figures import matplotlib when one is drawn."""
    loaded = "sorted(m for m in ('numpy', 'torch', 'jax', 'matplotlib') if m in sys.modules)"
    code = f"import sys, posenc.analysis; print({loaded}); import posenc.analysis.plot; print({loaded})"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split("\n")[:2] == ["['numpy']", "['numpy']"]


# --- closed forms and a worked example's numbers --------------------------------------------------


def test_worked_example_from_the_closed_form() -> None:
    # d_model = 512: PE(1)·PE(2) = PE(80)·PE(81) ≈ 249.1021, PE(1)·PE(80) = PE(2)·PE(81) ≈ 117.5290
    assert round(float(analysis.closed_form_dot_product(1, 512)), 5) == 249.10210
    assert round(float(analysis.closed_form_dot_product(79, 512)), 4) == 117.5290
    assert analysis.closed_form_dot_product(1, 512) == pytest.approx(mp_dot(1, 512), abs=1e-12)
    assert analysis.closed_form_dot_product(79, 512) == pytest.approx(mp_dot(79, 512), abs=1e-12)


def test_worked_example_from_the_table() -> None:
    d = analysis.dot_products(posenc.table(82, 512, dtype="float64"))
    for a, b in ((1, 2), (80, 81), (2, 1)):
        assert d[a, b] == pytest.approx(249.1020978273630, abs=1e-11)
    for a, b in ((1, 80), (2, 81)):
        assert d[a, b] == pytest.approx(117.5290000720208, abs=1e-11)


@pytest.mark.parametrize(
    ("d_model", "base", "shift"), [(512, 10000.0, 0), (64, 100.0, 1), (7, 10000.0, 0), (128, 1e6, 0.5)]
)
def test_closed_form_dot_product_against_mpmath(d_model: int, base: float, shift: float) -> None:
    offsets = np.array([0, 1, 2, 7, 79, 1000, 123457, 2**30])
    got = analysis.closed_form_dot_product(offsets, d_model, base=base, shift=shift)
    expected = [mp_dot(int(k), d_model, base, shift) for k in offsets]
    np.testing.assert_allclose(got, expected, rtol=0, atol=d_model * 4 * EPS)
    assert got.shape == offsets.shape


def test_closed_form_distance() -> None:
    pe = posenc.table(300, 64, dtype="float64")
    for k in (1, 2, 17, 299):
        direct = np.linalg.norm(pe[k:] - pe[:-k], axis=1)
        np.testing.assert_allclose(direct, analysis.closed_form_distance(k, 64), rtol=1e-13)
    # |PE(p) - PE(p + k)|² = 2 n - 2 Σ cos(k ω_i)
    k = np.arange(1, 50)
    squared = 2 * 32 - 2 * analysis.closed_form_dot_product(k, 64)
    np.testing.assert_allclose(analysis.closed_form_distance(k, 64) ** 2, squared, rtol=1e-12)
    assert round(float(analysis.closed_form_distance(1, 512)), 4) == 3.7143


def test_closed_forms_take_numpy_integers_and_refuse_bad_widths() -> None:
    assert analysis.closed_form_dot_product(1, np.int64(512)) == analysis.closed_form_dot_product(1, 512)
    assert analysis.closed_form_distance(3, np.int32(16)) == analysis.closed_form_distance(3, 16)
    with pytest.raises(TypeError, match="d_model"):
        analysis.closed_form_dot_product(1, 512.0)
    with pytest.raises(ValueError, match="d_model"):
        analysis.closed_form_distance(1, 1)


def test_closed_forms_refuse_the_same_offsets_naming_the_callers_value() -> None:
    """closed_form_distance halved its offsets before checking them: 2**31 + 2 was accepted (the dot product
    refuses it) and 2**32 was refused as 'got 2147483648.0', half the caller's value."""
    beyond = re.escape("offsets must satisfy |p| < 2**31 = 2147483648") + ".* got "
    for closed_form in (analysis.closed_form_distance, analysis.closed_form_dot_product):
        for offset in (2**31 + 2, 2**32, -(2**31)):
            with pytest.raises(ValueError, match=beyond + str(offset) + "$") as caught:
                closed_form(offset, 8)
            assert caught.value.parameter == "offsets"
        with pytest.raises(TypeError, match="offsets must be integers or real numbers, not booleans"):
            closed_form([True], 8)
    assert analysis.closed_form_distance(2**31 - 1, 8) == analysis.closed_form_distance(-(2**31 - 1), 8)


def test_closed_form_distance_halves_bfloat16_offsets_too() -> None:
    """bfloat16 offsets (ml_dtypes' kind 'V') went to the encoding unhalved: the distance at 2k for k."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    offsets = np.array([1.0, 3.0], ml_dtypes.bfloat16)
    want = analysis.closed_form_distance([1, 3], 8)
    np.testing.assert_array_equal(analysis.closed_form_distance(offsets, 8), want)


def test_closed_form_distance_of_tiny_offsets_has_no_cancellation() -> None:
    # 1 - cos(kω) cancels for tiny kω; the sin(kω/2) form does not: for k = 1e-9, distance ≈ k |ω|.
    omegas = posenc.frequencies(64)
    expected = 1e-9 * np.sqrt(np.sum(omegas**2))
    assert analysis.closed_form_distance(1e-9, 64) == pytest.approx(expected, rel=1e-12)


# --- dot products, cosine similarity, Toeplitz ----------------------------------------------------


@pytest.mark.parametrize(
    ("d_model", "options"),
    [
        (512, {}),
        (512, {"shift": 1, "layout": "sin_cos"}),
        (63, {"base": 100.0, "layout": "cos_sin"}),
        (128, {"start": 10**6}),
    ],
)
def test_dot_product_matrix_is_toeplitz_at_float64_noise(d_model: int, options: dict) -> None:
    pe = posenc.table(512, d_model, dtype="float64", **options)
    d = analysis.dot_products(pe)
    n = d_model // 2
    # each entry is a sum of d_model products of values within 1 ulp: error ~ n·ε, spread twice that
    assert analysis.toeplitz_deviation(d) < 16 * n * EPS
    shift_opts = {k: v for k, v in options.items() if k in ("base", "shift")}
    offsets = np.arange(512)
    closed = analysis.closed_form_dot_product(offsets, d_model, **shift_opts)
    i, j = np.indices(d.shape)
    np.testing.assert_allclose(d, closed[np.abs(i - j)], rtol=0, atol=16 * n * EPS)


def test_dot_products_and_cosine_similarity_shapes_and_values() -> None:
    pe = posenc.table(5, 8, dtype="float64")
    d = analysis.dot_products(pe)
    np.testing.assert_allclose(d, pe @ pe.T, rtol=0, atol=0)
    s = analysis.cosine_similarity(pe)
    np.testing.assert_allclose(s, d / 4, rtol=1e-15)  # every row has norm √n = 2
    np.testing.assert_allclose(np.diag(s), 1.0, rtol=1e-15)
    # float32/bfloat16 input is converted to float64 before multiplying
    low = posenc.table(5, 8, dtype="bfloat16")
    np.testing.assert_array_equal(
        analysis.dot_products(low), low.astype(np.float64) @ low.astype(np.float64).T
    )


def test_toeplitz_deviation_finds_the_worst_diagonal() -> None:
    m = np.add.outer(np.arange(6), -np.arange(6)).astype(float)  # m[i, j] = i - j: Toeplitz
    assert analysis.toeplitz_deviation(m) == 0.0
    m[4, 1] += 0.25
    assert analysis.toeplitz_deviation(m) == 0.25
    m[0, 5] -= 1.0  # a diagonal of one element has no spread
    assert analysis.toeplitz_deviation(m) == 0.25


@pytest.mark.parametrize(
    ("function", "value", "error", "mentions"),
    [
        (analysis.toeplitz_deviation, np.zeros((2, 3)), ValueError, "square"),
        (analysis.dot_products, np.zeros(4), ValueError, "2-D"),
        (analysis.dot_products, [["a"]], TypeError, "real numbers"),
        (analysis.cosine_similarity, np.zeros((2, 3)), ValueError, "all zeros"),
    ],
)
def test_matrix_errors_name_the_problem(function, value, error, mentions: str) -> None:
    with pytest.raises(error, match=mentions):
        function(value)


# --- the relative shift map M_k -------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize("d_model", [2, 7, 64, 512])
@pytest.mark.parametrize("k", [1, 3, -5, 1000, 2**20 + 1])
def test_shift_matrix_maps_pe_p_to_pe_p_plus_k(layout: str, d_model: int, k: int) -> None:
    m = analysis.shift_matrix(k, d_model, layout=layout)
    assert m.shape == (d_model, d_model)
    here = posenc.table(64, d_model, start=100, layout=layout, dtype="float64")
    there = posenc.table(64, d_model, start=100 + k, layout=layout, dtype="float64")
    # two products of values within 1 ulp per output: exact to rounding
    assert np.abs(here @ m.T - there).max() <= 4 * EPS
    assert analysis.shift_error(k, 64, d_model, start=100, layout=layout) <= 4 * EPS


def test_shift_matrix_is_a_group_of_rotations() -> None:
    a, b = analysis.shift_matrix(7, 33), analysis.shift_matrix(11, 33)
    np.testing.assert_allclose(a @ b, analysis.shift_matrix(18, 33), rtol=0, atol=8 * EPS)
    np.testing.assert_allclose(a @ a.T, np.eye(33), rtol=0, atol=8 * EPS)
    np.testing.assert_array_equal(analysis.shift_matrix(0, 33), np.eye(33))
    # real offsets too: PE(p + 0.5) = M_0.5 PE(p)
    half = analysis.shift_matrix(0.5, 16, shift=1)
    p = np.array([3.0, 40.0])
    np.testing.assert_allclose(
        posenc.encode(p, 16, shift=1, dtype="float64") @ half.T,
        posenc.encode(p + 0.5, 16, shift=1, dtype="float64"),
        rtol=0,
        atol=4 * EPS,
    )


# --- wavelengths ----------------------------------------------------------------------------------


def test_wavelengths_are_two_pi_over_omega() -> None:
    for d_model, options in ((512, {}), (64, {"base": 100.0, "shift": 1}), (9, {})):
        omegas = posenc.frequencies(d_model, **options)
        np.testing.assert_allclose(analysis.wavelengths(d_model, **options), 2 * np.pi / omegas, rtol=1e-15)
        assert analysis.wrap_length(d_model, **options) == pytest.approx(2 * np.pi / omegas[-1], rel=1e-15)
    np.testing.assert_allclose(analysis.wavelengths(4, base=100.0), [2 * np.pi, 20 * np.pi], rtol=1e-15)
    # shift = 1: the slowest frequency is exactly 1/base, so the slowest pair turns once in 2π·base
    assert analysis.wrap_length(512, shift=1) == pytest.approx(2 * np.pi * 10000, rel=1e-15)
    assert round(analysis.wrap_length(512)) == 60611


def _mp_wavelength(i: int, base: float, denominator, scale: float = 1.0) -> float:
    """2π · base**(i / denominator) / scale by mpmath at 60 digits, rounded once to float64."""
    import mpmath

    with mpmath.workdps(60):
        return float(2 * mpmath.pi * mpmath.power(mpmath.mpf(base), i / mpmath.mpf(denominator)) / scale)


@pytest.mark.parametrize(
    ("d_model", "options", "denominator"),
    [
        (512, {}, 256),  # 92 of the 256 were an ulp off when computed as 2π / ω_i in float64
        (64, {"base": 500000.0}, 32),
        (64, {"base": 100.0, "shift": 1, "scale": 0.75}, 31),
        (9, {"odd": "literal"}, 4.5),
    ],
)
def test_wavelengths_are_the_exact_values_rounded_once(d_model, options, denominator) -> None:
    got = analysis.wavelengths(d_model, **options)
    scale = options.get("scale", 1.0)
    want = [_mp_wavelength(i, options.get("base", 10000.0), denominator, scale) for i in range(got.size)]
    np.testing.assert_array_equal(got, want)
    assert analysis.wrap_length(d_model, **options) == want[-1]


def test_the_slow_path_of_the_wavelengths_is_the_exact_value_rounded_once() -> None:
    """highprec.wavelength_exact: the values the ~190-bit turn rates leave uncertain (none in practice)."""
    from posenc.core import highprec

    for i in (0, 1, 2, 37, 255):
        assert highprec.wavelength_exact(i, 10000.0, 512, 0.0) == _mp_wavelength(i, 10000.0, 256)
    assert highprec.wavelength_exact(5, 100.0, 64, 1.0, 0.75) == _mp_wavelength(5, 100.0, 31, 0.75)


@pytest.mark.parametrize(
    ("length", "d_model", "dtype"),
    [
        (400, 8, "bfloat16"),
        (2000, 4, "float16"),
        (300, 64, "float32"),
        (800, 2, "bfloat16"),
        (257, 6, "float64"),
    ],
)
def test_uniqueness_margin_against_brute_force(length: int, d_model: int, dtype: str) -> None:
    rows = posenc.table(length, d_model, dtype=dtype)
    margin = analysis.uniqueness_margin(length, d_model, dtype=dtype)
    assert margin.complete
    assert margin.distance == pytest.approx(brute_force_margin(rows), rel=1e-9, abs=1e-12)
    a, b = margin.a, margin.b
    assert a < b
    measured = np.linalg.norm(rows[b].astype(np.float64) - rows[a].astype(np.float64))
    assert measured == pytest.approx(margin.distance, rel=1e-12, abs=1e-15)


@settings(max_examples=25, deadline=None)
@given(
    length=st.integers(2, 160),
    d_model=st.integers(2, 12),
    base=st.sampled_from([10.0, 100.0, 10000.0]),
    start=st.integers(-1000, 10**6),
    dtype=st.sampled_from(["bfloat16", "float16", "float32"]),
)
def test_uniqueness_margin_property(length: int, d_model: int, base: float, start: int, dtype: str) -> None:
    rows = posenc.table(length, d_model, start=start, base=base, dtype=dtype)
    margin = analysis.uniqueness_margin(length, d_model, start=start, base=base, dtype=dtype)
    assert margin.distance == pytest.approx(brute_force_margin(rows), rel=1e-9, abs=1e-12)
    assert start <= margin.a < margin.b < start + length


def test_uniqueness_margin_at_d_model_512() -> None:
    margin = analysis.uniqueness_margin(2048, 512, dtype="float32")
    assert margin.b - margin.a == 1  # neighbours are the closest pair
    assert margin.distance == pytest.approx(float(analysis.closed_form_distance(1, 512)), abs=16 * 2.0**-24)
    assert analysis.uniqueness_margin(1, 8).distance == math.inf


@pytest.mark.parametrize(
    ("length", "d_model", "dtype", "compute"),
    [
        (2000, 2, "bfloat16", "exact"),
        (20000, 4, "bfloat16", "exact"),
        (3000, 2, "float16", "exact"),
        (600, 512, "bfloat16", "dtype"),
        (2100, 16, "float16", "dtype"),
        (3000, 8, "float32", "exact"),
    ],
)
def test_collisions_against_brute_force(length: int, d_model: int, dtype: str, compute: str) -> None:
    build = posenc.table if compute == "exact" else analysis.naive_table
    rows = build(length, d_model, dtype=dtype)
    found = analysis.collisions(length, d_model, dtype=dtype, compute=compute)
    expected = brute_force_first_repeat(rows)
    assert (found.first, found.earlier) == (expected or (None, None))
    distinct = len({(row.astype(np.float64) + 0.0).tobytes() for row in rows})
    assert found.distinct == distinct and found.length == length
    assert found.unique == (expected is None)


def test_collisions_with_start_and_signed_zero() -> None:
    found = analysis.collisions(1500, 2, start=-700, dtype="bfloat16")
    rows = posenc.table(1500, 2, start=-700, dtype="bfloat16")
    p, q = brute_force_first_repeat(rows)
    assert (found.first, found.earlier) == (p - 700, q - 700)
    # -0.0 and +0.0 are the same encoding
    hashes = row_hashes(np.array([[0.0, 1.0], [-0.0, 1.0]], dtype=np.float16))
    assert (hashes[0] == hashes[1]).all()


def test_bfloat16_collision_horizons() -> None:
    """The measured horizons. Angles computed in bfloat16: positions above 256 round together,
    so position 257 repeats 256, far below 100,000. posenc's bfloat16 (rounded once): d_model = 512 keeps
    all 100,000 positions apart; d_model = 4 merges position 84830 with position 7."""
    usual = analysis.collision_horizon(512, dtype="bfloat16", compute="dtype", limit=100_000)
    assert usual == 257 < 100_000
    assert analysis.collision_horizon(512, dtype="float16", compute="dtype", limit=4096) == 2049
    assert analysis.collisions(100_000, 512, dtype="bfloat16").unique
    assert analysis.collision_horizon(4, dtype="bfloat16", limit=100_000) == 84830
    assert analysis.collision_horizon(2, dtype="bfloat16", limit=4096) == 711  # 710 ≈ 113 · 2π


def test_float32_at_d_model_512_is_unique() -> None:
    found = analysis.collisions(2048, 512, dtype="float32")
    assert found.unique and found.distinct == 2048
    assert analysis.uniqueness_margin(2048, 512, dtype="float32").distance > 3.7


# --- the other properties ---------------------------------------------------------------------------


def test_naive_table_is_the_usual_code() -> None:
    # float64: the plain formula
    p = np.arange(50, dtype=np.float64)[:, None]
    omegas = posenc.frequencies(8)
    expected = np.empty((50, 8))
    expected[:, 0::2], expected[:, 1::2] = np.sin(p * omegas), np.cos(p * omegas)
    np.testing.assert_allclose(analysis.naive_table(50, 8, dtype="float64"), expected, rtol=0, atol=1e-15)
    # bfloat16: positions 256 and 257 are one position, and the sine of 257 is off by > 0.4
    rows = analysis.naive_table(2, 8, start=256, dtype="bfloat16")
    assert rows.dtype == posenc.table(1, 2, dtype="bfloat16").dtype
    assert rows[0].tobytes() == rows[1].tobytes()
    assert abs(float(rows[1, 0]) - math.sin(257)) > 0.4
    # layouts and the zero column of an odd width
    assert (analysis.naive_table(3, 7, layout="sin_cos", dtype="float64")[:, 6] == 0).all()
    np.testing.assert_allclose(
        analysis.naive_table(3, 6, layout="cos_sin", dtype="float64"),
        posenc.table(3, 6, layout="cos_sin", dtype="float64"),
        atol=1e-15,
    )


def test_bounded_consistent_deterministic() -> None:
    assert analysis.max_magnitude(3000, 64, dtype="bfloat16") == 1.0
    assert analysis.max_magnitude(100, 64, start=10**9, dtype="float64") <= 1.0
    assert analysis.length_consistent(1000, 64, dtype="bfloat16")
    assert analysis.length_consistent(777, 33, start=-5, layout="sin_cos", dtype="float16")
    assert analysis.recomputes_identically(1000, 64, dtype="float32")
