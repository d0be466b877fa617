"""Figures of sinusoidal positional encodings (matplotlib): each function returns a ``Figure``.

No GUI is ever involved: figures are built with ``matplotlib.figure.Figure`` directly (never pyplot, never
``plt.show()``); :func:`save` writes PNG, SVG or PDF (:data:`SUFFIXES`), byte for byte reproducibly. Each
figure is drawn and saved under matplotlib's default settings, whatever the user's matplotlibrc or rcParams
say (:func:`~posenc.analysis.figures.matplotlib_defaults`). Needs ``pip install 'posenc[plot]'``, imported
on the first figure drawn: this module, and :data:`KINDS`, load without matplotlib (drawing without it
raises an ImportError that names the extra).

* :func:`heatmap`: the table PE(pos, j), positions × dimensions (sines, then cosines; or as stored);
* :func:`dot_product_heatmap`: PE(i)·PE(j), constant along each diagonal (a Toeplitz matrix) but where an
  odd width keeps a lone column;
* :func:`sinusoids`: sin(k ω_i) against i for k = 0, 4, 8, 12, d_model = 512;
* :func:`waves`: columns as waves over positions, low columns fast, high columns slow;
* :func:`similarity`: cosine similarity of PE(p) and PE(p + k) against the offset k, from several p;
* :func:`collisions`: low precision — positions whose encoding repeats an earlier one, and the error, for
  posenc (rounded once) and for the usual code (angles computed in the dtype).

Options are keyword-only and mean what they mean in :func:`posenc.table`; every figure draws d_model =
:data:`D_MODEL` (512) unless told otherwise. :data:`KINDS` maps the names used
by ``posenc plot`` to these functions, and to the rotary figures of :mod:`posenc.analysis.rope_figures`:
the one list of the figures.

>>> figure = heatmap(length=16, d_model=32)
>>> [round(x) for x in figure.get_size_inches()]
[8, 5]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from .. import validation
from ..atomic import atomic_save
from ..core import encode, frequencies, table
from ..core.isolated import isolated
from ..core.options import frequency_options, takes_options
from ..decimals import number
from ..defaults import ODD, SCALE
from ..layouts import function_columns, pair_columns
from .encodings import naive_table
from .figures import load_matplotlib, matplotlib_defaults, new_figure
from .hashes import repeated_rows
from .properties import closed_form_dot_product, dot_products, toeplitz_deviation
from .rope_figures import rope_error, rope_wavelengths

__all__ = [
    "DPI",
    "KINDS",
    "SUFFIXES",
    "check_dpi",
    "collisions",
    "dot_product_heatmap",
    "heatmap",
    "save",
    "similarity",
    "sinusoids",
    "waves",
]

#: The formats :func:`save` writes, by the suffix of the file name.
SUFFIXES = (".png", ".svg", ".pdf")
#: The resolution :func:`save` writes a PNG at, unless told otherwise: 8 × 5 in → 960 × 600 px.
DPI = 120
#: The d_model every figure draws unless told otherwise (the paper's; tutorials draw it too).
D_MODEL = 512
#: The most values (positions × d_model) one figure computes: ~1 s of work, far more than a figure can show.
MAX_FIGURE_VALUES = 1 << 26
#: The most positions of a dot-product heatmap (it draws length² cells).
MAX_DOT_POSITIONS = 1 << 12
#: The most panels (positions, pairs) or reference positions one figure draws.
MAX_PANELS = 64

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords, TableOptions


#: ``heatmap(view=...)``: how the columns are drawn. "grouped": the sines of every frequency, then the
#: cosines (the [sin | cos] picture, smooth at any width); "stored": the columns in the layout's own order
#: (the paper's interleaved layout alternates sin and cos from column to column: at d_model 512, a moiré).
HEATMAP_VIEWS = ("grouped", "stored")


@takes_options(dtype="float32", before="view")
@isolated
@matplotlib_defaults
def heatmap(
    *,
    length: int = 100,
    d_model: int = D_MODEL,
    start: int = 0,
    view: str = "grouped",
    **options: Unpack[TableOptions],
) -> Figure:
    """The table PE(pos, j) as an image: positions down, dimensions across, -1 blue to +1 red. 8 × 5 in.

    ``view="grouped"`` (default) draws the sine columns of every frequency, then the cosine columns, whatever
    the layout: fast frequencies on the left of each half, slow ones on the right, smooth at any d_model.
    ``view="stored"`` draws the columns as the layout stores them: the interleaved layout alternates sine
    and cosine from one column to the next, which at d_model 512 (about two screen pixels a column) reads
    as a moiré of stripes; zoom in with a small d_model to see it.

    >>> heatmap(length=10, d_model=16).axes[0].get_xlabel()
    'column: sin ω_i for i = 0 .. 7, then cos ω_i'
    >>> heatmap(length=10, d_model=16, view="stored").axes[0].get_xlabel()
    'dimension j (column of the encoding, interleaved layout)'
    """
    if view not in HEATMAP_VIEWS:
        raise ValueError(f"view must be one of {', '.join(map(repr, HEATMAP_VIEWS))}; got {view!r}")
    _figure_size(length, d_model)
    values = table(length, d_model, start=start, **options)
    if view == "grouped":
        sin_columns, cos_columns = function_columns(d_model, options["layout"], options["odd"])
        rest = np.setdiff1d(np.arange(d_model), np.concatenate([sin_columns, cos_columns]))  # an odd zero
        values = values[:, np.concatenate([sin_columns, cos_columns, rest]).astype(np.intp)]
        fewer = f" for i = 0 .. {len(cos_columns) - 1}" if len(cos_columns) != len(sin_columns) else ""
        xlabel = f"column: sin ω_i for i = 0 .. {len(sin_columns) - 1}, then cos ω_i{fewer}" + (
            ", then the zero" if len(rest) else ""
        )
    else:
        xlabel = f"dimension j (column of the encoding, {options['layout']} layout)"
    figure = new_figure(8, 5)
    ax = figure.add_subplot()
    extent = (-0.5, d_model - 0.5, start + length - 0.5, start - 0.5)
    image = ax.imshow(
        values.astype(np.float64),
        aspect="auto",
        cmap="RdBu_r",
        vmin=-1,
        vmax=1,
        interpolation="nearest",
        extent=extent,
        origin="upper",  # row 0 (position start) at the top, whatever image.origin says
    )
    figure.colorbar(image, ax=ax, label="PE(pos, j)")
    if view == "grouped":
        sines, cosines = len(sin_columns), len(cos_columns)
        ax.axvline(sines - 0.5, color="black", linewidth=0.8)
        ax.set_xticks(
            [0, sines // 2, sines, sines + cosines // 2],
            [
                r"sin $\omega_0$",
                rf"sin $\omega_{{{sines // 2}}}$",
                r"cos $\omega_0$",
                rf"cos $\omega_{{{cosines // 2}}}$",
            ],
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("position pos")
    _title(ax, f"Positional encoding, positions {start}–{start + length - 1}, d_model = {d_model}", options)
    return figure


@takes_options(dtype="float64", before="annotate")
@isolated
@matplotlib_defaults
def dot_product_heatmap(
    *,
    length: int = 8,
    d_model: int = D_MODEL,
    start: int = 0,
    annotate: bool | None = None,
    **options: Unpack[TableOptions],
) -> Figure:
    """The dot products PE(i)·PE(j) as an image, each cell labelled when there are at most 16 positions.

    Every diagonal is constant, D[i, j] = Σ cos((i - j) ω_k): a Toeplitz matrix (the title gives the largest
    spread along a diagonal). Not so for an odd width under odd="literal" or "drop": its lone column (a
    sine, or a cosine in the cos_sin layout) adds f(i ω) f(j ω), not a function of i - j; the title says so.
    7 × 6 in.

    >>> figure = dot_product_heatmap(length=4)
    >>> figure.axes[0].texts[1].get_text()  # PE(0)·PE(1), d_model = 512
    '249.1'
    """
    validation.at_most(
        "length", _figure_size(length, d_model), MAX_DOT_POSITIONS, "the heatmap has length² cells"
    )
    values = table(length, d_model, start=start, **options)
    dots = dot_products(values)
    figure = new_figure(7, 6)
    ax = figure.add_subplot()
    last = start + length - 1
    extent = (start - 0.5, last + 0.5, last + 0.5, start - 0.5)
    image = ax.imshow(dots, cmap="viridis", interpolation="nearest", extent=extent, origin="upper")
    figure.colorbar(image, ax=ax, label="PE(i) · PE(j)", shrink=0.85)
    if annotate is None:
        annotate = length <= 16
    if annotate:
        middle = (dots.max() + dots.min()) / 2
        for i in range(length):
            for j in range(length):
                colour = "black" if dots[i, j] > middle else "white"
                ax.text(
                    start + j,
                    start + i,
                    f"{dots[i, j]:.1f}",
                    ha="center",
                    va="center",
                    color=colour,
                    fontsize=8,
                )
    if length <= 16:
        ax.set_xticks(range(start, last + 1))
        ax.set_yticks(range(start, last + 1))
    ax.set_xlabel("position j")
    ax.set_ylabel("position i")
    deviation = toeplitz_deviation(dots)
    lone = _lone_function(d_model, options)
    claim = "constant along each diagonal"
    if lone:
        claim = f"not constant along the diagonals\n(the lone {lone} column of an odd width)"
    ax.set_title(
        f"Dot products PE(i)·PE(j), d_model = {d_model}: {claim}\n"
        f"largest spread along a diagonal: {deviation:.2g} ({_dtype_name(options['dtype'])} values)",
        fontsize=11,
    )
    return figure


@takes_options(layout=False)
@isolated
@matplotlib_defaults
def sinusoids(
    *,
    positions: Sequence[int] = (0, 4, 8, 12),
    d_model: int = D_MODEL,
    dims: int | None = None,
    **options: Unpack[OptionKeywords],
) -> Figure:
    """One panel per position k: PE(k, 2i) = sin(k ω_i) against i = 0 .. dims - 1 (default: the first 100
    frequencies, or every one of a narrower d_model). 12 × 3.6 in.

    With the defaults, the figure tutorials draw (k = 0, 4, 8, 12, d = 512, n = 10000, i < 100): the wave over
    i is stretched further for each larger k, so each position draws its own curve.

    >>> [ax.get_title() for ax in sinusoids().axes]
    ['k = 0', 'k = 4', 'k = 8', 'k = 12']
    """
    count = len(frequencies(d_model, **options))
    dims = min(100, count) if dims is None else validation.integer("dims", dims, minimum=1)
    if dims > count:
        raise ValueError(f"dims must be <= {count}, the number of frequencies (one each); got {dims}")
    positions = _panels("positions", positions)
    if not positions:
        raise ValueError("positions must name at least one position; got an empty sequence")
    values = encode(positions, d_model, **options, layout="sin_cos", dtype="float64")[:, :dims]
    figure = new_figure(12, 3.6)
    axes = np.atleast_1d(figure.subplots(1, len(positions), sharey=True))
    i = np.arange(dims)
    for ax, k, row in zip(axes, positions, values, strict=True):
        ax.plot(i, row, color="tab:blue", linewidth=1.6)
        ax.set_title(f"k = {k}")
        ax.set_xlabel("i (pair index)")
        ax.set_ylim(-1.1, 1.1)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(r"PE(k, 2i) = sin(k $\omega_i$)")
    figure.suptitle(
        f"sin({_times(options['scale'])}k / {number(options['base'])}^"
        f"(2i/{_exponent_width(d_model, options)})) for i = 0..{dims - 1}: "
        "every position draws its own curve",
        fontsize=11,
    )
    return figure


def _exponent_width(d_model: int, options: dict[str, Any]) -> str:
    """w in ω_i = base^(-2i / w), written exactly: d_model for the paper's even width (the width an odd
    d_model's rule divides by, :func:`posenc.validation.plan`), less twice the shift. ``"510"`` for shift 1,
    ``"(8 - 2·0.9999999)"`` where the difference has no float64 (6.0000002 is not it)."""
    width, shift = validation.plan(d_model, options["odd"])[1], options["shift"]
    if Fraction(width - 2 * shift) == width - 2 * Fraction(shift):  # the float64 difference is exact
        return number(width - 2 * shift)
    return f"({width} {'-' if shift > 0 else '+'} 2·{number(abs(shift))})"


#: ``waves``: points drawn per turn of the fastest wave shown (a smooth curve: no aliasing, no corners).
SAMPLES_PER_TURN = 16
_MOST_SAMPLES = 200_000  # per curve at most; past that, a panel of many turns is a band at any resolution
_MARKED = 256  # integer positions are marked (the table's values) when there are at most this many


@takes_options
@isolated
@matplotlib_defaults
def waves(
    *,
    length: int = 256,
    d_model: int = D_MODEL,
    pairs: Sequence[int] | None = None,
    start: int = 0,
    **options: Unpack[OptionKeywords],
) -> Figure:
    """A few columns of the table as waves over positions: the sine (solid) and cosine (dashed) of each of
    ``pairs`` (default: i = 0, n/8, n/4, n/2, 3n/4). Low columns turn fast, high columns slowly. 8 × 8 in
    for five pairs.

    The curves are drawn through real positions, at least ``SAMPLES_PER_TURN`` points per turn of the
    fastest wave shown (ω_0 = 1 turns every 2π ≈ 6.3 positions: integer positions alone would draw it as a
    jagged zigzag); dots mark the table's values at the integer positions (up to 256 of them, in the panels
    whose wave turns at least twice). A curve has at most 200,000 points: where 16 a turn of the fastest
    wave need more over the whole length (a large ``scale``), the curves stop at the last whole position
    they reach, and the title says so; where they need more over even one position (ω above 2π · 12,500 ≈
    78,540), a ValueError says which ``scale`` draws it: a curve is never drawn aliased.

    >>> len(waves(length=50, d_model=16, pairs=[0, 7]).axes)
    2
    """
    omegas = frequencies(d_model, **frequency_options(options))
    n = int(d_model) // 2  # the (sin, cos) pairs: an odd width's last column is not one
    if pairs is None:
        pairs = sorted({0, n // 8, n // 4, n // 2, 3 * n // 4})
    pairs = [validation.integer("pairs", i, minimum=0) for i in _panels("pairs", pairs)]
    if not pairs or max(pairs) >= n:
        raise ValueError(f"pairs must be pair indices in 0 .. {n - 1} (d_model // 2 - 1); got {pairs}")
    _figure_size(length, d_model)
    values = table(length, d_model, start=start, **options, dtype="float64")
    sin_columns, cos_columns = pair_columns(options["layout"], len(omegas))
    figure = new_figure(8, math.ceil(2.6 * len(pairs) + 3) / 2)  # 8 in tall for five pairs
    axes = np.atleast_1d(figure.subplots(len(pairs), 1, sharex=True))
    fastest = max(pairs, key=lambda i: omegas[i])
    offsets = _wave_offsets(length, float(omegas[fastest]), options["scale"])
    fine = start + offsets
    drawn = int(offsets[-1])  # the curves reach position start + drawn: length - 1, or fewer
    positions = np.arange(start, start + drawn + 1)
    marked = len(positions) <= _MARKED
    dotted = False
    for ax, i in zip(axes, pairs, strict=True):
        s, c = int(sin_columns[i]), int(cos_columns[i])
        # sin and cos of fine · ω_i: a width-2 encoding whose one frequency is ω_i (scale = ω_i)
        curve = encode(fine, 2, scale=float(omegas[i]), layout="interleaved", dtype="float64")
        ax.plot(fine, curve[:, 0], color="tab:blue", linewidth=1.4, label="sine column")
        ax.plot(fine, curve[:, 1], color="tab:orange", linewidth=1.0, linestyle="--", label="cosine column")
        if marked and len(positions) * omegas[i] >= 4 * math.pi:  # where the wave turns twice or more
            dotted = True
            for column, colour in ((s, "tab:blue"), (c, "tab:orange")):
                ax.plot(
                    positions,
                    values[: len(positions), column],
                    linestyle="none",
                    marker="o",
                    markersize=1.8,
                    color=colour,
                )
        ax.set_ylim(-1.15, 1.15)
        ax.set_ylabel(f"cols {s}, {c}", fontsize=9)
        wavelength = 2 * math.pi / omegas[i]
        ax.text(
            1.0,
            1.02,
            rf"$\omega_{{{i}}}$ = {omegas[i]:.3g}, one turn every {_positions(wavelength)} positions",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8, ncols=2, bbox_to_anchor=(0.0, 1.45), frameon=False)
    axes[-1].set_xlabel("position pos" + (" (dots: the table at integer positions)" if dotted else ""))
    shorter = ""
    if drawn < length - 1:
        shorter = (
            f"\npositions {start:,} .. {start + drawn:,} only, of {start:,} .. {start + length - 1:,}: "
            f"a curve has at most {_MOST_SAMPLES:,} points,\n{SAMPLES_PER_TURN} a turn of ω_{fastest} "
            f"(one turn every {_positions(2 * math.pi / omegas[fastest])} positions)"
        )
    figure.suptitle(
        f"Each column is a wave over positions (d_model = {d_model}): low columns fast, high columns slow"
        + shorter,
        fontsize=11,
    )
    return figure


def _wave_offsets(length: int, fastest: float, scale: float) -> np.ndarray:
    """The offsets from ``start`` that :func:`waves` draws its curves through: ``SAMPLES_PER_TURN`` or more
    per turn of the fastest wave (``fastest``, its ω), at most ``_MOST_SAMPLES`` + 1 of them, the whole
    offsets among them. Over 0 .. length - 1 where that many points reach, else over 0 .. the last whole
    offset they reach; a ValueError where they do not reach offset 1 (``scale``, the option, is named)."""
    span = length - 1
    turn = 2 * math.pi / fastest  # positions a turn
    if turn >= 2 * SAMPLES_PER_TURN:  # a slow wave: points whole positions apart suffice
        step = max(1, min(math.floor(turn / SAMPLES_PER_TURN), math.ceil(span / _MOST_SAMPLES)))
        drawn = min(span, _MOST_SAMPLES * step)
        return np.unique(np.r_[np.arange(0, drawn, step), drawn]).astype(np.float64)
    per = math.ceil(SAMPLES_PER_TURN / turn)  # points a position
    if per > _MOST_SAMPLES and span:
        most = scale * (2 * math.pi * _MOST_SAMPLES / SAMPLES_PER_TURN) / fastest
        raise ValueError(
            f"scale={number(scale)} makes the fastest wave drawn, ω = {fastest:.6g}, turn every "
            f"{_positions(turn)} positions: {SAMPLES_PER_TURN} points a turn over even one position need "
            f"{per:,} points, more than the {_MOST_SAMPLES:,} a curve may have; lower scale (--scale) to "
            f"{math.floor(most)} or less"
        )
    drawn = min(span, _MOST_SAMPLES // per)
    return np.arange(drawn * per + 1) / per


def _positions(count: float) -> str:
    """A number of positions in a figure's text, true to 3 significant digits or more: ``62,831.9``,
    ``6.28``, ``0.000628`` (``:,.1f`` wrote 0.000628 as 0.0)."""
    return f"{count:,.1f}" if count >= 10 else f"{count:.3g}"


@takes_options(dtype="float32")
@isolated
@matplotlib_defaults
def similarity(
    *,
    length: int = 256,
    d_model: int = D_MODEL,
    references: Sequence[int] = (0, 1000, 100000),
    **options: Unpack[TableOptions],
) -> Figure:
    """Cosine similarity of PE(p) and PE(p + k) against the offset k = 0 .. length: the closed form
    Σ cos(k ω_i) / n (line) and the values measured from each reference position p (markers). 8 × 5 in.

    >>> len(similarity(length=20, d_model=16, references=(0, 7)).axes[0].lines)  # closed form, 2 p, zero
    4
    """
    frequencies(d_model, **frequency_options(options))  # validates before any drawing
    length = _figure_size(length, d_model, minimum=1, extra=1)
    references = _panels("references", references)
    offsets = np.arange(length + 1)
    n = int(d_model) // 2
    closed = closed_form_dot_product(offsets, d_model, **frequency_options(options)) / n
    lone = _lone_function(d_model, options)  # an odd width's one column without its pair, if any
    figure = new_figure(8, 5)
    ax = figure.add_subplot()
    label = r"closed form $\Sigma_i \cos(k\,\omega_i)$ / n" + (" (the n full pairs)" if lone else "")
    ax.plot(offsets, closed, color="black", linewidth=1.8, label=label)
    markers = ("o", "s", "^", "D", "v")
    every = max(1, length // 48)
    for index, p in enumerate(references):
        rows = table(length + 1, d_model, start=p, **options)
        rows = rows.astype(np.float64)
        measured = rows @ rows[0] / (np.linalg.norm(rows, axis=1) * np.linalg.norm(rows[0]))
        ax.plot(
            offsets[::every],
            measured[::every],
            linestyle="none",
            marker=markers[index % len(markers)],
            markersize=4,
            alpha=0.8,
            label=f"measured from p = {p:,}",
        )
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel("offset k (positions apart)")
    ax.set_ylabel("cosine similarity of PE(p) and PE(p + k)")
    claim = (
        f"Similarity depends on the position too: an odd width's lone {lone} column"
        if lone
        else "Similarity depends on the offset only, not on the position"
    )
    _title(ax, f"{claim} (d_model = {d_model})", options)
    ax.legend(fontsize=9)
    ax.grid(alpha=0.3)
    return figure


@takes_options
@isolated
@matplotlib_defaults
def collisions(
    *,
    length: int = 16384,
    d_model: int = D_MODEL,
    dtypes: Sequence[str] = ("float16", "bfloat16"),
    **options: Unpack[OptionKeywords],
) -> Figure:
    """Low precision, two ways: posenc (exact, rounded once) and the usual code (positions, frequencies and
    angles rounded to the dtype). Left: how many positions so far have the encoding of an earlier position.
    Right: the largest error of any value at each position. 11 × 4.8 in.

    >>> figure = collisions(length=300, d_model=8, dtypes=["bfloat16"])
    >>> [t.get_text() for t in figure.axes[0].texts]  # the usual bfloat16 code repeats from 257
    ['257']
    """
    length = _figure_size(length, d_model, minimum=2)
    names = [_dtype_name(dt) for dt in _panels("dtypes", dtypes)]
    if not names:
        raise ValueError("dtypes must name at least one dtype; got an empty sequence")
    exact = table(length, d_model, **options, dtype="float64")
    figure = new_figure(11, 4.8)
    left, right = figure.subplots(1, 2)
    positions = np.arange(length)
    bins = np.unique(np.geomspace(1, length - 1, 160).astype(np.int64))  # positions 0 .. length - 1
    colours = {"float16": "tab:blue", "bfloat16": "tab:red", "float32": "tab:green", "float64": "tab:purple"}
    firsts: dict[tuple[str, str], int | None] = {}  # (dtype, way) -> the first position repeating one
    smallest = 1e-5  # the error axis starts here, or below the smallest error drawn
    for name in names:
        colour = colours.get(name, "black")
        for how, build, style in (
            ("angles in " + name, naive_table, "-"),
            ("posenc, rounded once", table, "--"),
        ):
            rows = build(length, d_model, **options, dtype=name)
            repeats = repeated_rows(rows)
            label = f"{name}: {how}"
            left.plot(positions[1:], np.cumsum(repeats)[1:], style, color=colour, label=label, linewidth=1.6)
            first = firsts[name, how] = int(np.argmax(repeats)) if repeats.any() else None
            if first is not None:
                left.annotate(
                    f"{first}",
                    (first, 0),
                    textcoords="offset points",
                    xytext=(-14, 14),
                    ha="right",
                    color=colour,
                    fontsize=9,
                    arrowprops={"arrowstyle": "->", "color": colour},
                )
            error = np.abs(rows.astype(np.float64) - exact).max(axis=1)
            peaks = np.maximum.reduceat(error, bins)  # the largest error from each bin's first position on
            right.plot(bins, peaks, style, color=colour, label=label, linewidth=1.4)
            if (peaks > 0).any():
                smallest = min(smallest, float(peaks[peaks > 0].min()) / 2)
    left.set_xscale("log")
    left.set_yscale("symlog", linthresh=1)
    left.set_ylim(bottom=0)
    left.set_xlabel("position")
    left.set_ylabel("positions so far sharing an earlier encoding")
    left.set_title("Repeated encodings (the arrow marks the first)", fontsize=10)
    left.legend(fontsize=8, loc="upper left")
    left.grid(alpha=0.3)
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_ylim(bottom=smallest)
    right.set_xlabel("position")
    right.set_ylabel("largest |error| of a value")
    right.set_title("Error against the exact encoding", fontsize=10)
    right.grid(alpha=0.3)
    figure.suptitle(f"Low precision, d_model = {d_model}: {_collisions_verdict(firsts, length)}", fontsize=11)
    return figure


def _collisions_verdict(firsts: dict[tuple[str, str], int | None], length: int) -> str:
    """What the collisions figure shows, in words: ``firsts[dtype, way]`` is the first position whose
    encoding repeats an earlier one (None: none in 0 .. length - 1), the usual code's way first."""
    usual = {name: first for (name, how), first in firsts.items() if how.startswith("angles")}
    once = {name: first for (name, how), first in firsts.items() if not how.startswith("angles")}
    if all(v is not None for v in usual.values()) and all(v is None for v in once.values()):
        return "rounding once keeps every position apart, computing angles in the dtype does not"

    def repeats(first: int | None) -> str:
        return "no repeat" if first is None else f"repeats from {first}"

    return (
        "; ".join(
            f"{name}, angles in {name}: {repeats(usual[name])}, rounded once: {repeats(once[name])}"
            for name in usual
        )
        + f" (positions 0..{length - 1})"
    )


#: The figures by the names ``posenc plot`` gives them: kind -> drawing function (keyword options only).
KINDS: dict[str, Callable[..., Figure]] = {
    "heatmap": heatmap,
    "dot-product": dot_product_heatmap,
    "sinusoids": sinusoids,
    "waves": waves,
    "similarity": similarity,
    "collisions": collisions,
    "rope-wavelengths": rope_wavelengths,
    "rope-error": rope_error,
}


# --- saving -------------------------------------------------------------------------------------------


def save(figure: Figure, path: str | Path, *, dpi: float = DPI) -> Path:
    """Write ``figure`` to ``path`` (.png, .svg or .pdf, by its suffix) at ``dpi``; return the path.

    Files carry no creation date, so the same figure saves to the same bytes. The file is written
    atomically (:func:`posenc.atomic.atomic_save`): a failure (a full disk, Ctrl-C) leaves the old file as
    it was and no temporary file; an OSError names ``path``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save(heatmap(length=8, d_model=16), Path(folder) / "pe.svg")
    ...     path.stat().st_size > 1000
    True
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"the output file must end in {', '.join(SUFFIXES)} (the suffix picks the format); "
            f"got {str(path)!r}"
        )
    dpi = check_dpi(dpi)
    metadata: dict[str, Any] = {".png": {}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}[suffix]
    # matplotlib's own settings, not the user's (matplotlib_defaults); fixed SVG ids: same figure, same bytes
    with load_matplotlib().style.context(["default", {"svg.hashsalt": "posenc"}]):
        atomic_save(
            path, lambda stream: _savefig(figure, stream, dpi=dpi, format=suffix[1:], metadata=metadata)
        )
    return path


def _savefig(figure: Figure, stream: IO[bytes], **options: Any) -> None:
    """``figure.savefig(stream, **options)``; a failed write is raised as the OSError it is. (matplotlib's
    PDF writer, failing to write, fails again while closing, with an AttributeError that hides the first.)"""
    try:
        figure.savefig(stream, **options)
    except Exception as error:
        failed = _os_error_within(error)
        if failed is None or failed is error:
            raise
        raise failed from None


def _os_error_within(error: BaseException) -> OSError | None:
    """The first OSError in ``error``'s chain of causes and contexts (``error`` itself included), if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def check_dpi(dpi: Any) -> float:
    """``dpi`` as a float, if it is a number in [10, 1200]; else a ValueError that says so.

    >>> check_dpi(300)
    300.0
    """
    value = validation.real("dpi", dpi)
    if not 10 <= value <= 1200:
        raise ValueError(f"dpi must be between 10 and 1200 (120 suits a screen, 300 print); got {dpi!r}")
    return value


# --- helpers -------------------------------------------------------------------------------------------


def _dtype_name(dtype: Any) -> str:
    return validation.dtype(dtype).name


def _title(ax: Any, headline: str, options: dict[str, Any]) -> None:
    """The figure's title: ``headline``, then the options on a second line."""
    ax.set_title(f"{headline}\n{_options_line(**options)}", fontsize=11)


def _lone_function(d_model: int, options: dict[str, Any]) -> str | None:
    """ "sine" or "cosine": the function of an odd width's lone column, under odd="literal"/"drop" (which
    one, the layout says: cos_sin keeps a cosine); None where every column has its pair, or is the zero."""
    sines, cosines = function_columns(d_model, options["layout"], options["odd"])
    if len(sines) == len(cosines):
        return None
    return "sine" if len(sines) > len(cosines) else "cosine"


def _options_line(base: float, shift: float, scale: float, layout: str, odd: str, dtype: Any) -> str:
    """The options in a title: base, shift, layout, dtype; and scale, odd where they are not the defaults.
    Each number as :func:`posenc.decimals.number` writes it, never rounded (``:g`` wrote 0.9999999 as 1)."""
    scaled = f", scale {number(scale)}" if scale != SCALE else ""
    odd_rule = f", odd {odd}" if odd != ODD else ""
    numbers = f"base {number(base)}, shift {number(shift)}{scaled}"
    return f"{numbers}, layout {layout}{odd_rule}, {_dtype_name(dtype)}"


def _times(scale: float) -> str:
    """``scale`` as a factor in a formula: nothing for the default scale 1."""
    return "" if scale == SCALE else f"{number(scale)}·"


def _figure_size(length: Any, d_model: Any, *, minimum: int = 1, extra: int = 0) -> int:
    """``length`` (an integer >= ``minimum``), checked before any work: its table of (length + ``extra``)
    × d_model values must be at most :data:`MAX_FIGURE_VALUES`."""
    length = validation.integer("length", length, minimum=minimum)
    validation.at_most("length", length, validation.MAX_POSITION, "positions are below 2**31")
    width = validation.d_model(d_model)
    values = (length + extra) * width
    if values > MAX_FIGURE_VALUES:
        raise ValueError(
            f"length={length} with d_model={width} asks a figure for {values:.3g} values, more than the "
            f"2**26 = {MAX_FIGURE_VALUES} one figure computes (far more than it can show); "
            "lower length or d_model"
        )
    return length


def _panels(name: str, values: Any) -> list[Any]:
    """``values`` as a list of at most :data:`MAX_PANELS` items (one panel or one series each), read no
    further than that."""
    if isinstance(values, str) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list; got {values!r}")
    items = list(itertools.islice(values, MAX_PANELS + 1))
    if len(items) > MAX_PANELS:
        count = len(values) if hasattr(values, "__len__") else f"more than {MAX_PANELS}"
        raise ValueError(
            f"{name} must have at most {MAX_PANELS} entries (one figure draws them all); got {count}"
        )
    return items
