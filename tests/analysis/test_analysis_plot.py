"""posenc.analysis.plot: every kind draws a non-blank figure of the expected pixel
size (read back and measured), in PNG, SVG and PDF; errors name the problem; no pyplot, no GUI backend; a
clear ImportError without matplotlib, and KINDS readable without it; the options scale and odd drawn."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib import image

import posenc
from posenc import analysis, defaults
from posenc.analysis import plot

DPI = 40  # small images: quick to render, still far from blank

# kind -> options that keep each figure quick
#: The rotary kinds (tests/analysis/test_analysis_rope_plot.py draws them; they take no sinusoidal options).
ROPE_KINDS = ("rope-wavelengths", "rope-error")
SMALL = {
    "heatmap": {"length": 40, "d_model": 64},
    "dot-product": {"length": 8, "d_model": 512},
    "sinusoids": {},
    "waves": {"length": 120, "d_model": 64},
    "similarity": {"length": 64, "d_model": 128, "references": (0, 5000)},
    "collisions": {"length": 2100, "d_model": 64},
}


def pixels(path: Path) -> np.ndarray:
    """The image as an (height, width, channels) float array in [0, 1]."""
    return image.imread(path)


def assert_picture(path: Path, size_inches: tuple[float, float], dpi: float) -> None:
    """A PNG of the figure's size at ``dpi``, with real content: its grey levels vary."""
    picture = pixels(path)
    width, height = size_inches
    assert picture.shape[:2] == (round(height * dpi), round(width * dpi))
    grey = picture[..., :3].mean(axis=2)
    assert grey.var() > 0.005, "blank image"
    assert (grey < 0.5).mean() > 0.002, "no dark pixels: no text, no lines"


def test_kinds_are_the_command_line_kinds() -> None:
    from posenc.cli import PLOT_KINDS

    assert tuple(plot.KINDS) == PLOT_KINDS == (*SMALL, *ROPE_KINDS)


@pytest.mark.parametrize("kind", list(SMALL))
def test_every_kind_draws_a_picture(tmp_path: Path, kind: str) -> None:
    figure = plot.KINDS[kind](**SMALL[kind])
    path = plot.save(figure, tmp_path / f"{kind}.png", dpi=DPI)
    assert path == tmp_path / f"{kind}.png"
    assert_picture(path, tuple(figure.get_size_inches()), DPI)
    assert figure.get_axes() and all(ax.get_title() or figure.get_suptitle() for ax in figure.get_axes()[:1])


@pytest.mark.parametrize(
    ("kind", "size"),
    [("heatmap", (8, 5)), ("dot-product", (7, 6)), ("sinusoids", (12, 3.6)), ("similarity", (8, 5))],
)
def test_sizes_print_well(kind: str, size: tuple[float, float]) -> None:
    figure = plot.KINDS[kind](**SMALL[kind])
    assert tuple(figure.get_size_inches()) == pytest.approx(size)


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", b"\x89PNG")])
def test_vector_formats(tmp_path: Path, suffix: str, magic: bytes) -> None:
    path = plot.save(plot.heatmap(length=8, d_model=16), tmp_path / f"pe{suffix}")
    data = path.read_bytes()
    assert data.startswith(magic) and len(data) > 2000


def test_same_figure_same_bytes(tmp_path: Path) -> None:
    for suffix in (".svg", ".pdf", ".png"):
        first = plot.save(plot.dot_product_heatmap(length=4, d_model=8), tmp_path / f"a{suffix}").read_bytes()
        second = plot.save(
            plot.dot_product_heatmap(length=4, d_model=8), tmp_path / f"b{suffix}"
        ).read_bytes()
        assert first == second, suffix


def test_the_figures_show_the_right_data() -> None:
    """The plotted data, read back from the artists, against the definitions."""
    import posenc
    from posenc import analysis

    heat = plot.heatmap(length=10, d_model=16, dtype="float64", view="stored")
    np.testing.assert_array_equal(heat.axes[0].images[0].get_array(), posenc.table(10, 16, dtype="float64"))
    dots = plot.dot_product_heatmap(length=8)
    shown = dots.axes[0].images[0].get_array()
    assert round(float(shown[1, 2]), 4) == 249.1021
    assert len(dots.axes[0].texts) == 64  # every cell labelled
    assert "249.1" in {t.get_text() for t in dots.axes[0].texts}
    assert not plot.dot_product_heatmap(length=32, d_model=16).axes[0].texts
    waves = plot.sinusoids()
    assert [ax.get_title() for ax in waves.axes] == ["k = 0", "k = 4", "k = 8", "k = 12"]
    x, y = waves.axes[1].lines[0].get_data()
    np.testing.assert_array_equal(x, np.arange(100))
    np.testing.assert_allclose(y, np.sin(4 * posenc.frequencies(512)[:100]), atol=1e-15)
    similar = plot.similarity(length=50, d_model=64, references=(0,))
    _, closed = similar.axes[0].lines[0].get_data()
    np.testing.assert_allclose(closed, analysis.closed_form_dot_product(np.arange(51), 64) / 32)


def test_collisions_marks_the_first_repeat() -> None:
    figure = plot.collisions(length=2100, d_model=64)
    assert {t.get_text() for t in figure.axes[0].texts} >= {"257", "2049"}
    assert "rounding once keeps every position apart, computing angles in the dtype does not" in (
        figure._suptitle.get_text()
    )


def test_the_collisions_title_says_what_its_data_shows() -> None:
    """The title was one fixed sentence: false where the usual code repeats nothing (float32 over 4096
    positions) or where rounding once repeats too (bfloat16 at d_model 4 from 84830); the error axis starts
    below the smallest error drawn (posenc's float32 2**-25 was under its floor of 1e-5)."""
    figure = plot.collisions(length=4096, dtypes=["float32"])
    title = figure._suptitle.get_text()
    assert "float32, angles in float32: no repeat, rounded once: no repeat (positions 0..4095)" in title
    assert "keeps every position apart" not in title
    bottom = figure.axes[1].get_ylim()[0]
    drawn = np.concatenate([line.get_ydata() for line in figure.axes[1].get_lines()])
    assert 0 < bottom < drawn[drawn > 0].min()
    firsts = {("bfloat16", "angles in bfloat16"): 7, ("bfloat16", "posenc, rounded once"): 84830}
    assert plot._collisions_verdict(firsts, 100_000) == (
        "bfloat16, angles in bfloat16: repeats from 7, rounded once: repeats from 84830 (positions 0..99999)"
    )


@pytest.mark.parametrize(
    ("layout", "odd", "sines", "cosines"),
    [
        ("sin_cos", "literal", 5, 4),
        ("interleaved", "drop", 5, 4),
        ("cos_sin", "literal", 4, 5),
        ("sin_cos", "zero", 4, 4),
    ],
)
def test_the_grouped_heatmap_of_an_odd_width_puts_each_column_under_its_label(
    layout: str, odd: str, sines: int, cosines: int
) -> None:
    """d_model 9: under literal/drop one function of the fifth frequency is kept (the grouped view took
    four pairs and called a cosine "the zero"); each drawn column is sin/cos(p ω_i) by the label's count."""
    figure = plot.heatmap(length=20, d_model=9, layout=layout, odd=odd, dtype="float64")
    ax = figure.axes[0]
    shown = np.asarray(ax.images[0].get_array())
    p = np.arange(20)[:, None]
    h = 4.5 if odd == "literal" else (5 if odd == "drop" else 4)
    omega = 10000.0 ** (-np.arange(5) / h)  # ω_i = base^(-2i/w), w the width the rule divides by
    np.testing.assert_allclose(shown[:, :sines], np.sin(p * omega[:sines]), atol=1e-12)
    np.testing.assert_allclose(shown[:, sines : sines + cosines], np.cos(p * omega[:cosines]), atol=1e-12)
    label = ax.get_xlabel()
    assert label.startswith(f"column: sin ω_i for i = 0 .. {sines - 1}, then cos ω_i")
    assert (f"then cos ω_i for i = 0 .. {cosines - 1}" in label) == (sines != cosines)
    assert label.endswith(", then the zero") == (odd == "zero")
    if odd == "zero":
        np.testing.assert_array_equal(shown[:, -1], 0)
    ticks = dict(zip(ax.get_xticks().tolist(), [t.get_text() for t in ax.get_xticklabels()], strict=True))
    assert ticks[sines] == r"cos $\omega_0$"


def test_the_sinusoids_caption_is_the_formula_drawn() -> None:
    """The caption gave 2i/d_model whatever the shift or the odd rule: sin(k ω_i), ω_i = base^(-2i/w)."""
    for options, w in (
        ({"shift": 1}, 510),
        ({"d_model": 9}, 8),
        ({"d_model": 9, "odd": "literal"}, 9),
        ({}, 512),
    ):
        figure = plot.sinusoids(**options)
        assert f"^(2i/{w}))" in figure._suptitle.get_text()
        x, y = figure.axes[1].lines[0].get_data()  # k = 4
        np.testing.assert_allclose(y, np.sin(4 * 10000.0 ** (-2 * x / w)), atol=1e-12)


def test_the_similarity_title_holds_for_the_width_drawn() -> None:
    """An odd width's lone sine column (odd="literal"/"drop") makes the similarity depend on p: the title
    says so, and the measured curves from different p differ."""
    even = plot.similarity(length=40, d_model=8)
    assert "depends on the offset only" in even.axes[0].get_title()
    lone = plot.similarity(length=40, d_model=9, odd="literal", references=(0, 1000))
    assert "depends on the position too" in lone.axes[0].get_title()
    first, second = (line.get_ydata() for line in lone.axes[0].lines[1:3])
    assert np.abs(first - second).max() > 1e-3


@pytest.mark.parametrize(
    ("call", "error", "mentions"),
    [
        (lambda: plot.sinusoids(dims=300), ValueError, "dims"),
        (lambda: plot.sinusoids(positions=()), ValueError, "positions"),
        (lambda: plot.waves(d_model=16, pairs=[9]), ValueError, "pairs"),
        (lambda: plot.collisions(dtypes=()), ValueError, "dtypes"),
        (lambda: plot.heatmap(d_model=1), ValueError, "d_model"),
        (lambda: plot.heatmap(layout="x"), ValueError, "layout"),
        (lambda: plot.save(plot.heatmap(length=2, d_model=4), "pe.jpg"), ValueError, r"\.png, \.svg, \.pdf"),
        (lambda: plot.save(plot.heatmap(length=2, d_model=4), "pe.png", dpi=0), ValueError, "dpi"),
        (lambda: plot.save(plot.heatmap(length=2, d_model=4), "pe.png", dpi="x"), TypeError, "dpi"),
    ],
)
def test_errors_name_the_problem(call, error: type, mentions: str) -> None:
    with pytest.raises(error, match=mentions):
        call()


def test_no_pyplot_no_gui(tmp_path: Path) -> None:
    """A GUI backend that cannot start (no display) is never touched: figures do not go through pyplot."""
    code = (
        "import sys, posenc.analysis.plot as p; p.save(p.heatmap(length=4, d_model=8), sys.argv[1]); "
        "print('matplotlib.pyplot' in sys.modules)"
    )
    environment = {**os.environ, "MPLBACKEND": "tkagg", "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    path = tmp_path / "pe.png"
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=environment
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False"), done.stderr
    assert path.stat().st_size > 1000


def test_missing_matplotlib_names_the_extra() -> None:
    code = "import sys; sys.modules['matplotlib'] = None; import posenc.analysis.plot as p; p.heatmap()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1
    assert "pip install 'posenc[plot]'" in done.stderr


def test_kinds_are_read_without_matplotlib() -> None:
    """posenc.analysis.plot.KINDS, the one list of the figures, and the data behind the rotary figures load
    without matplotlib; drawing then says what to install."""
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from posenc.analysis.plot import KINDS\n"
        "from posenc.analysis import rope_figures\n"
        "print(','.join(KINDS))\n"
        "print(','.join(rope_figures.rope_wavelength_lines(head_dim=8)))\n"
        "for kind in ('heatmap', 'rope-error'):\n"
        "    try:\n        KINDS[kind]()\n    except ImportError as error:\n        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        ",".join((*SMALL, *ROPE_KINDS)),
        "default,linear,dynamic,yarn,llama3",
        *["posenc.analysis.plot needs matplotlib: pip install 'posenc[plot]'"] * 2,
    ]
    from posenc.analysis.plot import KINDS

    assert KINDS is plot.KINDS


@pytest.mark.parametrize("kind", list(SMALL))
def test_every_kind_takes_scale_and_odd(kind: str) -> None:
    parameters = inspect.signature(plot.KINDS[kind]).parameters
    for option in ("base", "shift", "scale", "odd"):
        assert parameters[option].kind is inspect.Parameter.KEYWORD_ONLY, option
        assert parameters[option].default == defaults.OPTIONS[option], option
    if "layout" in parameters:
        assert parameters["layout"].default == defaults.LAYOUT
    figure = plot.KINDS[kind](**{**SMALL[kind], "scale": 2.0, "odd": "literal"})
    assert figure.get_axes()


def test_scale_and_odd_change_the_figures() -> None:
    """The plotted data, read back from the artists, against posenc.table with the same options."""
    scaled = plot.heatmap(length=10, d_model=16, dtype="float64", scale=2.0, view="stored")
    expected = posenc.table(10, 16, scale=2.0, dtype="float64")
    np.testing.assert_array_equal(scaled.axes[0].images[0].get_array(), expected)
    assert "shift 0, scale 2, layout interleaved, float64" in scaled.axes[0].get_title()
    zero = plot.heatmap(length=10, d_model=7, dtype="float64", view="stored")
    literal = plot.heatmap(length=10, d_model=7, dtype="float64", odd="literal", view="stored")
    assert (zero.axes[0].images[0].get_array()[:, -1] == 0).all() and "odd" not in zero.axes[0].get_title()
    expected = posenc.table(10, 7, odd="literal", dtype="float64")
    np.testing.assert_array_equal(literal.axes[0].images[0].get_array(), expected)
    assert "layout interleaved, odd literal, float64" in literal.axes[0].get_title()

    dots = plot.dot_product_heatmap(length=6, d_model=16, scale=2.0)
    expected = analysis.dot_products(posenc.table(6, 16, scale=2.0, dtype="float64"))
    np.testing.assert_array_equal(dots.axes[0].images[0].get_array(), expected)

    curves = plot.sinusoids(scale=2.0)
    _, y = curves.axes[1].lines[0].get_data()
    np.testing.assert_allclose(y, np.sin(4 * posenc.frequencies(512, scale=2.0)[:100]), atol=1e-15)
    assert curves.get_suptitle().startswith("sin(2·k / 10000^(2i/512))")

    similar = plot.similarity(length=50, d_model=64, references=(0,), scale=0.5)
    _, closed = similar.axes[0].lines[0].get_data()
    expected = analysis.closed_form_dot_product(np.arange(51), 64, scale=0.5) / 32
    np.testing.assert_allclose(closed, expected)

    waves = plot.waves(length=50, d_model=7, odd="literal", pairs=[0, 2])
    x, sine = waves.axes[1].lines[0].get_data()  # pair 2: columns 4 and 5, ω_2 = 10000^(-4/7)
    omega = posenc.frequencies(7, odd="literal")[2]
    assert omega != posenc.frequencies(7)[2]
    np.testing.assert_allclose(sine, np.sin(x * omega), rtol=0, atol=1e-12)
    # at the integer positions, the curve is the table's column (ω_i as a float64: within 2 ulp)
    expected = posenc.table(50, 7, odd="literal", dtype="float64")[:, 4]
    np.testing.assert_allclose(sine[:: (len(x) - 1) // 49], expected, rtol=0, atol=1e-16)
    with pytest.raises(ValueError, match="pairs"):  # the last column of an odd width is a lone sine, no pair
        plot.waves(d_model=7, odd="literal", pairs=[3])

    low = plot.collisions(length=600, d_model=8, dtypes=["bfloat16"], scale=0.001)
    usual_error, posenc_error = (line.get_data()[1] for line in low.axes[1].lines)
    assert posenc_error.max() <= 2.0**-8  # rounded once, against the exact table of the same scale
    assert usual_error.max() > posenc_error.max()


def test_every_kind_draws_the_same_d_model_by_default() -> None:
    """One default width across the sinusoidal kinds: the paper's 512 (waves used to draw 128)."""
    for kind in SMALL:
        assert inspect.signature(plot.KINDS[kind]).parameters["d_model"].default == 512, kind
    assert plot.waves().get_suptitle().endswith("(d_model = 512): low columns fast, high columns slow")


def test_waves_are_sampled_finer_than_the_fastest_wave() -> None:
    """ω_0 = 1 turns every 2π ≈ 6.3 positions: drawn through integer positions only, it is a zigzag. Every
    curve has at least 16 points per turn of the fastest wave shown, its values are sin and cos of the
    position times ω_i, and the dots at the integer positions are the table's values."""
    figure = plot.waves()
    omegas = posenc.frequencies(512)
    assert len(figure.axes) == 5
    table = posenc.table(256, 512, dtype="float64")
    for ax, i in zip(figure.axes, (0, 32, 64, 128, 192), strict=True):
        (x, sine), (_, cosine) = ax.lines[0].get_data(), ax.lines[1].get_data()
        assert x[0] == 0 and x[-1] == 255
        step = float(np.diff(x).max())
        assert step <= 2 * np.pi / omegas[0] / 16  # 16 points per turn of ω_0, the fastest shown
        np.testing.assert_allclose(sine, np.sin(x * omegas[i]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(cosine, np.cos(x * omegas[i]), rtol=0, atol=1e-12)
        if 256 * omegas[i] >= 4 * np.pi:  # the dots, where the wave turns twice or more
            np.testing.assert_array_equal(ax.lines[2].get_data()[1], table[:, 2 * i])
            np.testing.assert_array_equal(ax.lines[3].get_data()[1], table[:, 2 * i + 1])
        else:
            assert len(ax.lines) == 2
    slow = plot.waves(length=100, d_model=64, pairs=[31])  # ω_31 ≈ 1.3e-4: a slow wave keeps every position
    x, _ = slow.axes[0].lines[0].get_data()
    np.testing.assert_array_equal(x, np.arange(100))  # one point per position: 16 per turn and more


def test_heatmap_reads_at_d_model_512() -> None:
    """The default view groups the sines, then the cosines (a smooth picture at d_model 512, where the
    interleaved columns alternate and draw a moiré); view="stored" keeps the layout's own order."""
    values = posenc.table(100, 512)
    grouped = plot.heatmap().axes[0].images[0].get_array()
    np.testing.assert_array_equal(grouped, np.concatenate([values[:, 0::2], values[:, 1::2]], axis=1))
    stored = plot.heatmap(view="stored").axes[0].images[0].get_array()
    np.testing.assert_array_equal(stored, values)
    # neighbouring columns of the grouped view differ far less than the stored ones (the stripes)
    assert np.abs(np.diff(grouped, axis=1)).mean() < 0.25 * np.abs(np.diff(stored, axis=1)).mean()
    sin_cos = plot.heatmap(length=10, d_model=9, layout="sin_cos", dtype="float64").axes[0].images[0]
    np.testing.assert_array_equal(sin_cos.get_array(), posenc.table(10, 9, layout="sin_cos", dtype="float64"))
    with pytest.raises(ValueError, match="view must be one of 'grouped', 'stored'; got 'moire'"):
        plot.heatmap(view="moire")


def test_the_titles_name_the_options_drawn_without_rounding() -> None:
    """The titles wrote the options with :g (6 significant digits): shift 0.9999999 as "shift 1", scale
    1.0000001 as "scale 1", base 1234567 as "1.23457e+06", base 10000.25 as "10000.2", and the sinusoids'
    exponent 2i/w, w = 8 - 2·0.9999999, as "2i/6". Each is now the shortest decimal of the value itself."""
    title = plot.heatmap(length=4, d_model=8, shift=0.9999999, scale=1.0000001).axes[0].get_title()
    assert "base 10000, shift 0.9999999, scale 1.0000001, layout interleaved" in title
    title = plot.similarity(length=4, d_model=8, base=1234567.0, references=(0,)).axes[0].get_title()
    assert "base 1234567, shift 0, layout" in title
    caption = plot.sinusoids(d_model=8, base=10000.25, shift=0.9999999, scale=1.0000001).get_suptitle()
    assert caption.startswith("sin(1.0000001·k / 10000.25^(2i/(8 - 2·0.9999999))) for i = 0..3")
    # a width whose float64 difference is exact is written as one number
    assert "^(2i/7.5))" in plot.sinusoids(d_model=8, shift=0.25).get_suptitle()


@pytest.mark.parametrize(
    ("layout", "odd", "lone"),
    [("interleaved", "literal", "sine"), ("sin_cos", "drop", "sine"), ("cos_sin", "literal", "cosine")],
)
def test_the_titles_name_an_odd_widths_lone_column(layout: str, odd: str, lone: str) -> None:
    """d_model 9 under odd="literal"/"drop" keeps one column without its pair: the dot-product title said
    "constant along each diagonal" (the largest spread along one was 0.62 at base 10), the similarity title
    called a cos_sin layout's lone cosine a "lone sine column"."""
    options = {"d_model": 9, "layout": layout, "odd": odd, "base": 10.0}
    dots = plot.dot_product_heatmap(length=8, **options)
    title = dots.axes[0].get_title()
    assert "constant along each diagonal" not in title
    assert f"not constant along the diagonals\n(the lone {lone} column of an odd width)\n" in title
    assert analysis.toeplitz_deviation(np.asarray(dots.axes[0].images[0].get_array())) > 0.1
    similar = plot.similarity(length=8, references=(0, 100), **options).axes[0].get_title()
    assert f"Similarity depends on the position too: an odd width's lone {lone} column" in similar
    even = plot.dot_product_heatmap(length=8, d_model=9, odd="zero", layout=layout, base=10.0)
    assert ": constant along each diagonal\n" in even.axes[0].get_title()


#: rcParams a user's matplotlibrc may hold, each of which changed the figures: image.origin drew the images
#: upside down, text.usetex failed for want of LaTeX ("cannot write latex"), the rest moved pixels.
HOSTILE_RC = {
    "image.origin": "lower",
    "text.usetex": True,
    "font.size": 17,
    "lines.linewidth": 5,
    "axes.facecolor": "black",
    "image.cmap": "gray",
    "figure.dpi": 50,
    "savefig.bbox": "tight",
    "savefig.facecolor": "red",
}


def test_the_figures_ignore_the_users_matplotlib_settings(tmp_path: Path) -> None:
    """Every kind drawn and saved under hostile rcParams gives the bytes it gives under matplotlib's own
    (a PNG of each, and an SVG of one)."""
    import matplotlib

    kinds = {**SMALL, "rope-wavelengths": {"head_dim": 16}, "rope-error": {"length": 256, "bands": 8}}
    kinds["collisions"] = {"length": 600, "d_model": 16}
    for kind, options in kinds.items():
        suffix = ".svg" if kind == "dot-product" else ".png"
        usual = plot.save(plot.KINDS[kind](**options), tmp_path / f"usual{suffix}", dpi=DPI).read_bytes()
        with matplotlib.rc_context(HOSTILE_RC):
            figure = plot.KINDS[kind](**options)
            hostile = plot.save(figure, tmp_path / f"hostile{suffix}", dpi=DPI).read_bytes()
            assert matplotlib.rcParams["image.origin"] == "lower"  # the caller's settings are left alone
        assert hostile == usual, kind


def test_the_images_put_the_first_position_at_the_top_whatever_image_origin_says() -> None:
    """Under image.origin: lower, the heatmap and dot-product images were drawn upside down under their own
    axes: cell (0, 0) of the dot products, labelled 2.0 (PE(0)·PE(0), d_model 4), showed -0.407."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    with matplotlib.rc_context({"image.origin": "lower"}):
        dots = plot.dot_product_heatmap(length=4, d_model=4, base=10.0)
        heat = plot.heatmap(length=20, d_model=16, view="stored", dtype="float64")
    for figure in (dots, heat):
        image = figure.axes[0].images[0]
        assert image.origin == "upper"
        FigureCanvasAgg(figure).draw()
        # the pixel drawn at data point (0, 0), the centre of the cell of row 0, column 0
        x, y = figure.axes[0].transData.transform((0, 0))
        pixels = np.asarray(figure.canvas.buffer_rgba())
        drawn = pixels[pixels.shape[0] - 1 - int(y), int(x), :3]
        first = float(np.asarray(image.get_array())[0, 0])
        expected = np.round(255 * np.asarray(image.cmap(image.norm(first))[:3]))
        np.testing.assert_allclose(drawn, expected, atol=2)


def test_fast_waves_are_drawn_truly_or_refused() -> None:
    """At scale 1e4 the panel said "one turn every 0.0 positions" (0.000628) and the curve, capped at 200,000
    points over 255 positions, had 0.49 points a turn: an aliased wave. The curves now stop where 16 points a
    turn reach (the title says so); a wave too fast for even one position is refused, naming --scale."""
    figure = plot.waves(length=256, d_model=8, scale=1e4, pairs=[0, 2])
    omegas = posenc.frequencies(8, scale=1e4)
    texts = [ax.texts[0].get_text() for ax in figure.axes]
    assert texts[0] == r"$\omega_{0}$ = 1e+04, one turn every 0.000628 positions"
    for ax, i in zip(figure.axes, (0, 2), strict=True):
        x, sine = ax.lines[0].get_data()
        assert x[0] == 0 and x[-1] == 7  # 16 points a turn of ω_0: 25,465 a position, 7 whole positions
        assert len(x) <= 200_001 and np.diff(x).max() <= 2 * np.pi / omegas[0] / 16
        np.testing.assert_allclose(sine, np.sin(x * omegas[i]), rtol=0, atol=1e-9)
        np.testing.assert_array_equal(ax.lines[2].get_data()[0], np.arange(8))  # the dots: positions 0 .. 7
    assert (
        "\npositions 0 .. 7 only, of 0 .. 255: a curve has at most 200,000 points,\n" in figure.get_suptitle()
    )
    assert figure.axes[-1].get_xlabel() == "position pos (dots: the table at integer positions)"
    assert "only" not in plot.waves(length=256, d_model=8, scale=100.0).get_suptitle()
    with pytest.raises(ValueError, match=r"lower scale \(--scale\) to 78539 or less$"):
        plot.waves(length=256, d_model=8, scale=2.0**20)
    plot.waves(length=3, d_model=8, scale=78539.0)  # 200,000 points a position: drawn


def test_the_waves_label_names_dots_only_where_they_are_drawn() -> None:
    """At length 3 no wave turns twice, so no dot is drawn: the axis label still said "(dots: ...)"."""
    figure = plot.waves(length=3, d_model=4)
    assert figure.axes[-1].get_xlabel() == "position pos"
    assert not [line for ax in figure.axes for line in ax.lines if line.get_marker() == "o"]


def test_slow_waves_over_many_positions_keep_the_whole_length() -> None:
    """Where one point every few positions is 16 a turn, a long length is drawn whole in 200,000 points."""
    figure = plot.waves(length=500_001, d_model=16, pairs=[7])  # ω_7 ≈ 3.2e-4: one turn every 19,869
    x, sine = figure.axes[0].lines[0].get_data()
    assert x[0] == 0 and x[-1] == 500_000 and len(x) <= 200_001
    assert np.diff(x).max() <= 2 * np.pi / posenc.frequencies(16)[7] / 16
    np.testing.assert_allclose(sine, np.sin(x * posenc.frequencies(16)[7]), rtol=0, atol=1e-9)
    assert "only" not in figure.get_suptitle()
