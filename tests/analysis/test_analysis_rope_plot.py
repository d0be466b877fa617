"""The RoPE figures (posenc.analysis.rope_figures, kinds "rope-wavelengths" and "rope-error"): they draw and
save; the data behind them is what the definitions say (the scaling types stretch the wavelengths as their
formulas do; posenc's float32 values are within 2**-24 relative of the exact ones, float32 angles are not)."""

from __future__ import annotations

import inspect
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from posenc import rope
from posenc.analysis import plot, rope_figures
from posenc.analysis.rope_figures import (
    CONTENDERS,
    SCALINGS,
    rope_error,
    rope_error_curves,
    rope_error_positions,
    rope_error_values,
    rope_wavelength_lines,
    rope_wavelengths,
)
from tests.analysis.test_analysis_plot import assert_picture

DPI = 40
TWO_PI = 2 * math.pi


# --- registry and drawing --------------------------------------------------------------------------------


def test_registered_under_their_kinds() -> None:
    assert plot.KINDS["rope-wavelengths"] is rope_wavelengths
    assert plot.KINDS["rope-error"] is rope_error


@pytest.mark.parametrize("kind", ["rope-wavelengths", "rope-error"])
def test_every_parameter_is_a_keyword_with_a_default(kind: str) -> None:
    """``posenc plot`` passes options by name, and only those given: each must have a default."""
    parameters = inspect.signature(plot.KINDS[kind]).parameters
    assert parameters, kind
    for name, parameter in parameters.items():
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY, name
        assert parameter.default is not inspect.Parameter.empty, name
    assert "base" in parameters


@pytest.mark.parametrize(
    ("kind", "options", "size"),
    [
        ("rope-wavelengths", {}, (8, 7)),
        ("rope-wavelengths", {"head_dim": 64, "base": 10000.0, "factor": 4.0}, (8, 7)),
        ("rope-error", {}, (8, 5)),
        ("rope-error", {"base": 10000, "length": 5000, "bands": 30}, (8, 5)),
    ],
)
def test_draws_and_saves_a_png(tmp_path: Path, kind: str, options: dict, size: tuple[float, float]) -> None:
    figure = plot.KINDS[kind](**options)
    assert tuple(figure.get_size_inches()) == pytest.approx(size)
    assert figure.axes[0].get_title()
    path = plot.save(figure, tmp_path / f"{kind}.png", dpi=DPI)
    assert_picture(path, size, DPI)


def test_the_command_line_draws_them(tmp_path: Path) -> None:
    """Through ``posenc plot`` (which passes --base and --length by the functions' signatures)."""
    for kind, args in (
        ("rope-wavelengths", ["--base", "10000"]),
        ("rope-error", ["--length", "5000", "--base", "10000"]),
    ):
        path = tmp_path / f"{kind}.png"
        done = subprocess.run(
            [sys.executable, "-m", "posenc", "plot", kind, *args, "-o", str(path), "--dpi", str(DPI)],
            capture_output=True,
            text=True,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), kind
        assert path.stat().st_size > 1000


def test_the_figures_draw_their_data() -> None:
    """The lines read back from the artists are the data functions' arrays."""
    lines = rope_wavelength_lines()
    figure = rope_wavelengths()
    top, bottom = figure.axes
    drawn = [line.get_ydata() for line in top.get_lines()[: len(SCALINGS)]]
    for name, y in zip(SCALINGS, drawn, strict=True):
        np.testing.assert_array_equal(y, lines[name], err_msg=name)
    np.testing.assert_allclose(bottom.get_lines()[1].get_ydata(), 8.0, rtol=1e-14)  # linear: factor 8
    assert [line.get_ydata()[0] for line in top.get_lines()[len(SCALINGS) :]] == [8192, 65536]
    assert "base 500000, factor 8, trained context 8,192" in top.get_title()

    curves = rope_error_curves(length=20000, bands=40)
    ax = rope_error(length=20000, bands=40).axes[0]
    for name, line in zip(CONTENDERS, ax.get_lines(), strict=False):
        x, y = line.get_data()
        np.testing.assert_array_equal(x, curves["position"])
        np.testing.assert_array_equal(y, np.where(curves[name] > 0, curves[name], np.nan), err_msg=name)
    # half an ulp in [1/2, 1) of float32 and of bfloat16: the most rounding moves a cos/sin there, and what
    # posenc's float32 curve reaches; named so, not "unit roundoff" (bfloat16's is 2**-8)
    assert [line.get_ydata()[0] for line in ax.get_lines()[len(CONTENDERS) :]] == [2.0**-25, 2.0**-9]
    assert np.nanmax(curves["posenc float32"]) <= 2.0**-25
    texts = [t.get_text() for t in ax.texts]
    assert all("half an ulp" in t for t in texts) and not any("unit roundoff" in t for t in texts)


def test_the_figures_draw_a_bounded_number_of_points_at_their_defaults() -> None:
    """The figures are quick at their defaults because their work is bounded (no timed assertion: a loaded
    machine would fail it): at most 64 θ_i a wavelength line, at most 200 error positions a curve."""
    for draw, most in ((rope_wavelengths, 64), (rope_error, 200)):
        figure = draw()
        lengths = [len(line.get_xdata()) for ax in figure.axes for line in ax.get_lines()]
        assert lengths and max(lengths) <= most, (draw.__name__, lengths)


# --- the wavelengths -------------------------------------------------------------------------------------


def test_wavelength_lines_have_the_shape_and_the_unscaled_values() -> None:
    lines = rope_wavelength_lines(head_dim=96)
    assert list(lines) == list(SCALINGS)
    assert all(v.shape == (48,) and v.dtype == np.float64 for v in lines.values())
    expected = TWO_PI / rope.inv_freq(rope.config(head_dim=96, base=500000.0))
    # within an ulp of 2π / inv_freq in float64, which rounds three times (the lines round once)
    np.testing.assert_allclose(lines["default"], expected, rtol=2.3e-16, atol=0)
    np.testing.assert_allclose(lines["default"], TWO_PI * 500000.0 ** (np.arange(48) / 48), rtol=1e-13)


def test_linear_divides_every_frequency_by_factor() -> None:
    lines = rope_wavelength_lines(factor=8.0)
    np.testing.assert_allclose(lines["linear"] / lines["default"], 8.0, rtol=1e-15)


def test_llama3_keeps_the_high_frequencies_and_divides_the_low_ones() -> None:
    original, low, high, factor = 8192, 1.0, 4.0, 8.0
    lines = rope_wavelength_lines(
        factor=factor, original_max_position_embeddings=original, low_freq_factor=low, high_freq_factor=high
    )
    unscaled, llama = lines["default"], lines["llama3"]
    short = unscaled < original / high  # 2048: kept as they are (bit for bit: the same exact θ_i)
    long = unscaled > original / low  # 8192: divided by factor
    middle = ~short & ~long
    assert short.sum() > 20 and long.sum() > 20 and middle.sum() >= 3
    np.testing.assert_array_equal(llama[short], unscaled[short])
    np.testing.assert_allclose(llama[long] / unscaled[long], factor, rtol=1e-15)
    stretch = llama[middle] / unscaled[middle]
    assert np.all((stretch > 1) & (stretch < factor)) and np.all(np.diff(stretch) > 0)  # a smooth blend
    # Llama 3.1's blend: θ·((1 − σ)/factor + σ), σ = (original/λ − low)/(high − low)
    sigma = (original / unscaled[middle] - low) / (high - low)
    np.testing.assert_allclose(stretch, 1 / ((1 - sigma) / factor + sigma), rtol=1e-13)


def test_yarn_ramps_between_its_correction_dimensions() -> None:
    lines = rope_wavelength_lines(
        head_dim=128, base=500000.0, factor=8.0, original_max_position_embeddings=8192
    )
    stretch = lines["yarn"] / lines["default"]

    def correction(rotations: float) -> float:  # the pair index that turns `rotations` times in 8192
        return 128 * math.log(8192 / (TWO_PI * rotations)) / (2 * math.log(500000.0))

    lo, hi = math.floor(correction(32.0)), math.ceil(correction(1.0))
    assert (lo, hi) == (18, 35)
    np.testing.assert_array_equal(stretch[: lo + 1], 1.0)  # extrapolated: untouched
    np.testing.assert_allclose(stretch[hi:], 8.0, rtol=1e-15)  # interpolated: divided by factor
    ramp = (np.arange(lo + 1, hi) - lo) / (hi - lo)
    np.testing.assert_allclose(stretch[lo + 1 : hi], 1 / (1 - ramp + ramp / 8.0), rtol=1e-13)
    # unlike Llama 3, YaRN already stretches frequencies that Llama 3 keeps (ramp from 18, not 28)
    llama = lines["llama3"] / lines["default"]
    assert np.any((stretch > 1.01) & (llama == 1.0))


def test_dynamic_ntk_changes_the_base() -> None:
    """NTK at seq_len = factor × original: θ_i = b'^(-2i/d), b' = b·s^(d/(d-2)), s = factor² − factor + 1.
    The fastest frequency is untouched, each later one stretched more, the slowest by s = 57 > factor."""
    lines = rope_wavelength_lines(
        head_dim=128, base=500000.0, factor=8.0, original_max_position_embeddings=8192
    )
    stretch = lines["dynamic"] / lines["default"]
    s = 8.0 * 65536 / 8192 - 7.0
    grown = 500000.0 * s ** (128 / 126)
    np.testing.assert_allclose(lines["dynamic"], TWO_PI * grown ** (np.arange(64) / 64), rtol=1e-12)
    assert stretch[0] == 1.0
    assert np.all(np.diff(stretch) > 0)
    assert stretch[-1] == pytest.approx(s, rel=1e-13)
    np.testing.assert_allclose(np.diff(np.log(stretch)), math.log(s) / 63, rtol=1e-9)  # straight in log


def test_scalings_differ_from_each_other() -> None:
    """The figure's point: no two lines coincide."""
    lines = rope_wavelength_lines()
    names = list(lines)
    for a in range(len(names)):
        for b in range(a + 1, len(names)):
            gap = np.abs(np.log(lines[names[a]] / lines[names[b]])).max()
            assert gap > 0.5, (names[a], names[b])


# --- the errors ------------------------------------------------------------------------------------------


def test_wavelength_lines_are_the_exact_values_rounded_once() -> None:
    """2π/θ_i of the exact θ_i, rounded once (2π / inv_freq in float64 left 21 of the 64 an ulp off)."""
    import mpmath

    lines = rope_wavelength_lines()
    with mpmath.workdps(60):
        default = [float(2 * mpmath.pi * mpmath.power(500000, mpmath.mpf(2 * i) / 128)) for i in range(64)]
        linear = [float(8 * 2 * mpmath.pi * mpmath.power(500000, mpmath.mpf(2 * i) / 128)) for i in range(64)]
    np.testing.assert_array_equal(lines["default"], default)
    np.testing.assert_array_equal(lines["linear"], linear)
    params, seq_len = rope_figures.rope_scalings()["yarn"]
    theta = rope.frequencies.exact_inv_freq(params, seq_len, 60)
    with mpmath.workdps(80):
        yarn = [float(2 * mpmath.pi / mpmath.mpf(str(t))) for t in theta]
    np.testing.assert_array_equal(lines["yarn"], yarn)


def test_sampled_positions_cover_the_range() -> None:
    positions = rope_error_positions(131072)
    assert positions[0] == 1 and positions[-1] == 131071
    assert np.all(np.diff(positions) > 0) and positions.dtype == np.int64
    assert 400 < positions.size <= 801
    # log-spaced: as many samples in 1e3 .. 1e4 as in 1e4 .. 1e5
    per_decade = [np.count_nonzero((positions > 10**k) & (positions <= 10 ** (k + 1))) for k in (3, 4)]
    assert abs(per_decade[0] - per_decade[1]) <= 4


def test_posenc_is_within_rounding_rounding_everywhere() -> None:
    """posenc's float32 values are the exact ones rounded once: |error| <= 2**-24 |v| at every sampled value;
    the usual float32 angles are not."""
    positions = rope_error_positions(131072)
    values = rope_error_values(positions)
    exact_cos, exact_sin = values["exact"]
    assert exact_cos.shape == exact_sin.shape == (positions.size, 64)
    for exact, mine in zip(values["exact"], values["posenc float32"], strict=True):
        assert np.all(np.abs(mine - exact) <= 2.0**-24 * np.abs(exact))
        assert np.array_equal(mine, exact.astype(np.float32))  # and it is the nearest float32
    usual = values["float32 angles"]
    usual_relative = max(
        np.max(np.abs(u - e) / np.abs(e)) for u, e in zip(usual, values["exact"], strict=True)
    )
    assert usual_relative > 1e-3


def test_error_curves() -> None:
    curves = rope_error_curves()
    positions = curves["position"]
    assert list(curves) == ["position", *CONTENDERS]
    assert all(v.shape == positions.shape for v in curves.values())
    assert positions[-1] == 131071 and np.all(np.diff(positions) > 0)
    near_end = positions > 100000
    assert near_end.sum() >= 5
    assert np.all(curves["posenc float32"] <= 2.0**-24)
    assert np.all(curves["float32 angles"][near_end] > 1e-3)  # float32 angles near 131072: ~5e-3
    assert curves["float32 angles"][0] < 1e-7  # fine at position 1
    assert np.all(curves["bfloat16 cache"] > 2.0**-10)  # bfloat16's rounding, from the start
    # storing in bfloat16 moves a value by at most half its ulp, 2**-9 for |v| < 1, after float32's error
    assert np.all(curves["bfloat16 cache"] <= 2.0**-9 + curves["float32 angles"])
    assert curves["bfloat16 inv_freq"][near_end].min() > 1.0  # the angles are wrong altogether
    # the error of float32 angles grows with the angle: ~100x more from 1e3 to 1e5
    at = {p: curves["float32 angles"][np.searchsorted(positions, p)] for p in (1000, 100000)}
    assert at[100000] > 30 * at[1000]


def test_float32_angles_follow_transformers_in_float32() -> None:
    """The usual code's inv_freq is transformers' float32 formula (not the exact one rounded), and the values
    come out of float32 cos/sin: check one value by hand."""
    values = rope_error_values(np.array([100000]), head_dim=8, base=10000.0)
    inv = np.float32(1.0) / np.float32(10000.0) ** (np.arange(0, 8, 2).astype(np.float32) / np.float32(8))
    assert inv.dtype == np.float32
    expected = np.cos(np.float32(100000.0) * inv).astype(np.float64)
    np.testing.assert_array_equal(values["float32 angles"][0][0], expected)


@pytest.mark.parametrize(
    ("positions", "error", "mentions"),
    [
        ([2.7], ValueError, r"positions must be whole numbers .*got 2\.7 at index 0"),  # was truncated to 2
        (np.array([0, 5, -3.5]), ValueError, r"got -3\.5 at index 2"),
        ([True], TypeError, "positions must be .*not booleans"),  # was position 1
        (np.array([True, False]), TypeError, "positions must be .*not booleans"),
        ([np.nan], ValueError, "positions must be finite; got nan"),  # quoted -9223372036854775808
        ([2.0**31], ValueError, r"positions must satisfy \|p\| < 2\*\*31"),
        (np.array(["1"]), TypeError, "positions must be integers or real numbers"),
    ],
)
def test_error_values_refuse_what_is_not_an_integer_position(positions, error: type, mentions: str) -> None:
    with pytest.raises(error, match=mentions):
        rope_error_values(positions, head_dim=4)


def test_error_values_take_whole_floats_and_lists_as_the_integers_they_are() -> None:
    want = rope_error_values(np.array([2, 7]), head_dim=4)
    for positions in ([2, 7], np.array([2.0, 7.0]), np.array([2, 7], np.int32)):
        got = rope_error_values(positions, head_dim=4)
        for name in want:
            np.testing.assert_array_equal(got[name][0], want[name][0])
            np.testing.assert_array_equal(got[name][1], want[name][1])


@pytest.mark.parametrize(
    ("call", "error", "mentions"),
    [
        (lambda: rope_error(length=1), ValueError, "length"),
        (lambda: rope_error(bands=0), ValueError, "bands"),
        (lambda: rope_error(length=2.5), TypeError, "length"),
        (lambda: rope_error_positions(100, per_band=0), ValueError, "per_band"),
        (lambda: rope_error_values(np.array([], dtype=np.int64)), ValueError, "positions"),
        (lambda: rope_wavelengths(factor=0.5), ValueError, "factor"),
        (lambda: rope_wavelengths(head_dim=3), ValueError, "rotary_dim"),
        (lambda: rope_wavelengths(low_freq_factor=4.0, high_freq_factor=1.0), ValueError, "low_freq_factor"),
    ],
)
def test_errors_name_the_problem(call, error: type, mentions: str) -> None:
    with pytest.raises(error, match=mentions):
        call()


def test_the_scaling_types_drawn() -> None:
    assert rope_figures.SCALINGS == ("default", "linear", "dynamic", "yarn", "llama3")


def test_the_titles_name_the_parameters_drawn_without_rounding() -> None:
    """The titles and labels wrote the parameters with :g (6 significant digits): base 1.0000001 as "base 1",
    base 500000.4 as "500000". Each is now the shortest decimal of the value itself."""
    options = {"base": 1.0000001, "factor": 8.25, "beta_fast": 32.5, "high_freq_factor": 4.125}
    figure = rope_figures.rope_wavelengths(**options)
    assert "base 1.0000001, factor 8.25, trained context 8,192" in figure.axes[0].get_title()
    labels = [text.get_text() for text in figure.axes[0].get_legend().get_texts()]
    assert "linear (position interpolation): every θ / 8.25" in labels
    assert "YaRN (beta_fast 32.5, beta_slow 1)" in labels
    assert "Llama 3 (low_freq_factor 1, high_freq_factor 4.125)" in labels
    assert any(label.startswith("dynamic NTK at seq_len 67,584: base 1.0000001 → ") for label in labels)
    title = rope_figures.rope_error(base=500000.4, length=64, bands=4).axes[0].get_title()
    assert "head_dim 128, base 500000.4, unscaled, positions 1–63" in title
