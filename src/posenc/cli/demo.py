"""``posenc demo``: a guided walk-through of sinusoidal positional encoding (Vaswani et al. 2017 §3.5).

The formula, worked tables, adding the encoding to token embeddings, shift-invariant dot products,
exactness at large positions, the figures (written into a folder) and the criteria report, in sections
printed in order. Every number is computed by posenc as it is printed.
"""

from __future__ import annotations

import argparse
import decimal
import math
import os
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import posenc

from .. import analysis
from ..core import highprec
from ..layouts import column_names
from .arguments import as_flags, path_name
from .formats import TEXT_DIGITS, Grid, fixed, table_grid, text_lines

DEMO_FOLDER = "posenc-demo"

NAME = "demo"
HELP = "a guided walk-through of sinusoidal positional encoding"
DESCRIPTION = """\
A guided walk-through of sinusoidal positional encoding: the formula, worked
tables, adding the encoding to token embeddings, shift-invariant dot products,
exactness at large positions, the figures (written into a folder) and the criteria
report. Every number is computed by posenc as it is printed."""
EPILOG = """\
examples:
  posenc demo                      figures into ./posenc-demo/
  posenc demo --out /tmp/figures
  posenc demo | less
"""


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The option of ``posenc demo [--out DIR]``."""
    sub.add_argument(
        "--out",
        type=path_name,
        metavar="DIR",
        default=DEMO_FOLDER,
        help=f"folder for the figures, created if needed (default: ./{DEMO_FOLDER}/)",
    )


@dataclass
class _Demo:
    """Where the walk-through goes, and the folder for its figures."""

    stream: TextIO
    out: Path = Path(DEMO_FOLDER)

    def say(self, *lines: str) -> None:
        """Print each line (at once: the figures take a moment, their progress lines should show)."""
        for line in lines:
            self.stream.write(line + "\n")
        self.stream.flush()

    def heading(self, title: str) -> None:
        """A blank line, then an underlined section title."""
        self.say("", title, "-" * len(title))

    def grid(self, grid: Grid, digits: int = TEXT_DIGITS, min_width: int = 0) -> None:
        """Print a grid as the text format does, indented."""
        self.say(*("    " + line for line in text_lines(grid, digits, min_width)))

    def command(self, command: str, grid: Grid) -> None:
        """Print a shell command and the table it prints."""
        self.say("", f"    $ {command}")
        self.grid(grid)


def run(args: argparse.Namespace) -> None:
    """``posenc demo``: run every section in order."""
    demo = _Demo(sys.stdout, Path(args.out))
    _check_folder(demo.out)  # before any section: its figures go there at the end
    for section in _SECTIONS:
        section(demo)


def _check_folder(out: Path) -> None:
    """Refuse (ValueError) an ``--out`` that cannot become a folder of figures: a file, or a path under one
    or under a folder this process may not write into."""
    place = out
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        what = "is a file" if place == out else f"is under {place}, a file"
        raise ValueError(f"--out {out} {what}; the demo writes its figures into a folder: name another")
    if not os.access(place, os.W_OK | os.X_OK):
        raise ValueError(f"--out {out}: this process may not write into {place}; name another folder")


def _intro(demo: _Demo) -> None:
    title = "posenc demo: sinusoidal positional encoding, step by step"
    demo.say(title, "=" * len(title))
    demo.say(
        "Every number below is computed by posenc as it is printed; each table names the command",
        "that prints it on its own.",
    )


def _formula(demo: _Demo) -> None:
    demo.heading("1. The formula")
    demo.say(
        "A Transformer reads all tokens at once, so it cannot see their order. The fix: add to",
        "each token's embedding a vector PE(pos) that depends only on the token's position pos.",
        "For the dimension pairs i = 0 .. d_model/2 - 1:",
        "",
        "    PE(pos, 2i)   = sin(pos / base^(2i/d_model))",
        "    PE(pos, 2i+1) = cos(pos / base^(2i/d_model))",
        "",
        "Pair i is one sine/cosine wave of angular frequency ω_i = 1 / base^(2i/d_model): its",
        "angle is pos · ω_i. ω_0 = 1 turns fastest; each next pair turns slower, down to almost",
        '1/base. "Attention Is All You Need" uses base = 10000.',
    )


def _denominators(demo: _Demo, d_model: int, base: int) -> None:
    """Print base^(2i/d_model) = 1/ω_i for each i, the ω_i taken from posenc.frequencies."""
    omegas = posenc.frequencies(d_model, base=base).tolist()
    width = max(len(f"{1 / omega:g}") for omega in omegas)
    for i, omega in enumerate(omegas):
        power = f"{base}^({2 * i}/{d_model})"
        demo.say(f"    i = {i}:  {power} = {1 / omega:<{width}g}   so ω_{i} = {omega:g}")


def _small_table(demo: _Demo) -> None:
    demo.heading("2. A worked table: d_model = 4, base = 10000, positions 0..4")
    demo.say("The denominators base^(2i/d_model) = 1/ω_i:")
    _denominators(demo, 4, 10000)
    demo.say("so PE(pos) = [sin(pos), cos(pos), sin(pos/100), cos(pos/100)]:")
    demo.command("posenc table 5 4", table_grid(5, 4))
    slow = posenc.table(2, 4, dtype="float64")[1, 2]
    demo.say(
        "",
        "Columns 0-1 (ω_0 = 1) change a lot from row to row; columns 2-3 (ω_1 = 0.01) creep:",
        f"PE(1, 2) = sin(0.01) = {slow:.8f}. Together the pairs give each position its own vector.",
    )


def _base_100(demo: _Demo) -> None:
    demo.heading("3. The base sets the slowest waves: base = 100, d_model = 4, positions 0..3")
    _denominators(demo, 4, 100)
    grid = table_grid(4, 4, base=100)
    demo.command("posenc table 4 4 --base 100", grid)
    column = ", ".join(fixed(v, TEXT_DIGITS) for v in grid.values[1:, 2].tolist())
    demo.say(
        "",
        f"Column 2 is sin(pos/10) = {column} for pos = 1, 2, 3: close to pos/10, as sin x ≈ x",
        "for small x. A smaller base makes the slow waves faster.",
    )


_TOKENS = ("dog", "bites", "man")
# Made-up embeddings (a real model learns them): fixed so that the demo is the same on every run.
_EMBEDDING = np.array(
    [[0.25, -0.50, 0.75, 0.10], [-0.30, 0.20, 0.05, -0.60], [0.40, 0.35, -0.25, 0.15]],
    dtype=np.float32,
)


def _embedding(demo: _Demo) -> None:
    demo.heading("4. Adding the encoding to token embeddings")
    demo.say(
        "The encoding is added, not appended: Input to the Transformer = Embedding + PE, where the",
        f"token at position pos gets PE(pos). The sentence '{' '.join(_TOKENS)}', with made-up",
        "4-dimensional embeddings:",
    )
    rows = [f"{pos} {token}" for pos, token in enumerate(_TOKENS)]  # "pos token"
    columns = [f"dim {k}" for k in range(_EMBEDDING.shape[1])]
    pe = posenc.table(len(_TOKENS), _EMBEDDING.shape[1])
    for title, values in (
        ("Embedding", _EMBEDDING),
        ("+ Positional encoding, posenc.table(3, 4)", pe),
        ("= Input to the Transformer", _EMBEDDING + pe),
    ):
        demo.say("", f"  {title}")
        demo.grid(Grid("pos token", rows, columns, values), min_width=7)
    demo.say(
        "",
        "In 'man bites dog' each word sits at another position and so enters the model as another",
        "vector: the word order is now visible.",
    )


def _dot_products(demo: _Demo) -> None:
    d_model = 512
    demo.heading(f"5. Dot products depend only on the distance: d_model = {d_model}, base = 10000")
    demo.say(
        "Since sin a sin b + cos a cos b = cos(a - b),",
        "",
        "    PE(a)·PE(b) = Σ_i [sin(aω_i) sin(bω_i) + cos(aω_i) cos(bω_i)] = Σ_i cos((a - b) ω_i)",
        "",
        "so it depends only on how far apart a and b are, not on where they are. From a float64",
        "table:",
        "",
    )
    pe = posenc.table(82, d_model, dtype="float64")
    omegas = posenc.frequencies(d_model)
    pairs = ((1, 2), (80, 81)), ((1, 80), (2, 81))
    for (a, b), (c, d) in pairs:
        left, right = f"PE({a})·PE({b})", f"PE({c})·PE({d})"
        demo.say(
            f"    {left:<13} = {pe[a] @ pe[b]:.4f}    {right:<13} = {pe[c] @ pe[d]:.4f}    distance {b - a}"
        )
    demo.say("", "and the closed form agrees:", "")
    for k in (1, 79):
        demo.say(f"    Σ_i cos({k:>2}·ω_i) = {np.cos(k * omegas).sum():.4f}")
    demo.say(
        "",
        "As a matrix, PE·PEᵀ is constant along each diagonal (a Toeplitz matrix). Positions 0..5:",
        "",
    )
    dots = pe[:6] @ pe[:6].T
    demo.grid(Grid("pos", range(6), [str(k) for k in range(6)], dots), digits=2)


def _exactness(demo: _Demo) -> None:
    d_model, position = 512, 2**30
    demo.heading(f"6. Exact at any position: pos = 2**30 = {position}, d_model = {d_model}")
    exact = posenc.encode(position, d_model, dtype="float64")
    ours = posenc.encode(position, d_model).astype(np.float64)
    angles = np.float32(position) * posenc.frequencies(d_model).astype(np.float32)
    naive = np.empty(d_model, dtype=np.float32)
    naive[0::2], naive[1::2] = np.sin(angles), np.cos(angles)  # the usual float32 code
    naive_error = np.abs(naive.astype(np.float64) - exact)
    worst = int(np.argmax(naive_error))
    label = column_names(d_model, "interleaved")[worst].split(" ", 1)[1]
    demo.say(
        "The usual float32 code rounds pos·ω_i to float32 before taking sin and cos. Shown here with",
        "each ω_i correctly rounded to float32 (code whose ω_i come from a float32 exp, as the PyTorch",
        "tutorial's do, adds their error too), at this position its largest error is",
        f"{naive_error.max():.4f}, and "
        f"{(naive_error > 0.1).sum()} of {d_model} components are off by more than 0.1.",
        "posenc computes each value exactly and rounds it once: its float32 values are off by at",
        f"most {_rounded_up(np.abs(ours - exact).max())}, float32 rounding alone. The worst component:",
        "",
        f"    component {worst} ({label}):  exact {exact[worst]:.6f}   posenc float32 "
        f"{ours[worst]:.6f}   usual float32 code {naive[worst]:.6f}",
    )


def _rounded_up(bound: float) -> str:
    """``bound`` to two significant digits, rounded up (a bound printed lower would be broken): 2.94e-08 ->
    "3.0e-08"."""
    if bound <= 0:
        return "0"
    exact = decimal.Decimal(repr(float(bound)))  # its shortest decimal: no rounding before the ceiling
    exponent = exact.adjusted()
    # 2.94e-08 -> 30 (tenths of 1e-08): scaled exactly in a context of its own (the caller's might round)
    tenths = math.ceil(exact.scaleb(1 - exponent, highprec.context(40)))
    if tenths >= 100:
        tenths, exponent = 10, exponent + 1
    return f"{tenths / 10:.1f}e{exponent:+03d}"


# (file name, kind, options, what it shows): the demo's figures, in order
_FIGURES: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("heatmap.png", "heatmap", {}, "the table: positions down, dimensions across"),
    ("dot-product-8.png", "dot-product", {}, "PE(i)·PE(j) for 8 positions: constant diagonals"),
    ("dot-product-256.png", "dot-product", {"length": 256}, "the same for 256 positions"),
    ("sinusoids.png", "sinusoids", {}, "sin(k ω_i) against i for k = 0, 4, 8, 12"),
    ("waves.png", "waves", {}, "columns over positions: low columns fast, high slow"),
    ("similarity.png", "similarity", {}, "similarity against the offset, from 3 positions"),
    ("collisions.png", "collisions", {}, "float16/bfloat16: rounded once against computed in the dtype"),
)


def _figures(demo: _Demo) -> None:
    demo.heading(f"7. Pictures: posenc plot, written into {demo.out}/")
    demo.say(
        "Each figure is drawn by the command shown; in Python, posenc.analysis.plot.<kind>() returns it.", ""
    )
    from ..analysis import plot
    from ..analysis.figures import load_matplotlib

    try:
        load_matplotlib()  # matplotlib is imported only here
    except ImportError as error:
        demo.say(f"    (no figures: {error})")
        return
    demo.out.mkdir(parents=True, exist_ok=True)
    for index, (name, kind, options, what) in enumerate(_FIGURES, 1):
        path = demo.out / name
        flags = "".join(f" --{key.replace('_', '-')} {value}" for key, value in options.items())
        demo.say(f"    [{index}/{len(_FIGURES)}] {what}", f"          $ posenc plot {kind}{flags} -o {path}")
        try:
            plot.save(plot.KINDS[kind](**options), path)
        except ImportError as error:  # bfloat16 without ml_dtypes
            demo.say(f"          (skipped: {error})")


def _criteria(demo: _Demo) -> None:
    demo.heading("8. The criteria, measured: posenc check")
    demo.say(
        "A good positional encoding is unique for each position, keeps distances whatever the",
        "sequence length, generalises to longer sequences, is bounded and deterministic; and its dot",
        "products depend on the offset only. posenc check measures each for one setting:",
        "",
        "    $ posenc check",
    )
    report = as_flags(analysis.check().as_text(width=92), "compute")
    demo.say(*("    " + line if line else "" for line in report.splitlines()))
    demo.say(
        "",
        "The usual code computes positions and angles in the model's dtype. In bfloat16 that merges",
        "positions (bfloat16 holds integers exactly only up to 256); posenc rounds only the result:",
        "",
    )
    for compute, command in (("dtype", " --compute dtype"), ("exact", "")):
        try:
            report = analysis.check(dtype="bfloat16", compute=compute)
        except ImportError as error:
            demo.say(f"    (skipped: {error})")
            return
        unique = report.criteria[0]
        verdict = "pass" if unique.passed else "FAIL"
        detail = unique.detail.split(". (")[0]  # without the pointer to --compute dtype
        text = f"{verdict}  unique: {detail}"
        demo.say(f"    $ posenc check --dtype bfloat16{command}")
        demo.say(*textwrap.wrap(text, 92, initial_indent=" " * 6, subsequent_indent=" " * 12), "")


def _next_steps(demo: _Demo) -> None:
    demo.heading("Next")
    demo.say(
        "posenc table --help   every option: base, shift, layout, start, dtype, csv/json/npy",
        "posenc check --help   the criteria, their figures and exit codes",
        "posenc plot --help    the figures and their options",
        "posenc explore        all of it, interactive, in the browser",
        "posenc compare        the usual code against posenc at 8k .. 1M positions, in 16 bits too",
        "posenc audit TARGET   a checkpoint, a model folder or file.py:Name against the exact values",
        "In Python:            posenc.table(length, d_model), posenc.encode(positions, d_model),",
        "                      posenc.analysis (dot products, shifts, uniqueness), posenc.analysis.plot",
        "With PyTorch:         pip install 'posenc[torch]'; posenc.torch.SinusoidalPositionalEncoding,",
        "                      posenc.torch.RotaryEmbedding(config), posenc.torch.patch(model)",
    )


_SECTIONS: tuple[Callable[[_Demo], None], ...] = (
    _intro,
    _formula,
    _small_table,
    _base_100,
    _embedding,
    _dot_products,
    _exactness,
    _figures,
    _criteria,
    _next_steps,
)
