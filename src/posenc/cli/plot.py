"""``posenc plot KIND -o FILE``: draw one figure of :mod:`posenc.analysis.plot` into a .png, .svg or .pdf
file.

matplotlib is imported only when a figure is drawn, so that every other command starts without it.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..analysis.plot import KINDS
from ..analysis.plot import SUFFIXES as PLOT_SUFFIXES
from .arguments import add_variant_options, number, path_name
from .errors import CliError

#: The kinds of figure, in order: the names of posenc.analysis.plot.KINDS (reading it imports no matplotlib).
PLOT_KINDS = tuple(KINDS)

NAME = "plot"
HELP = "draw a figure: " + ", ".join(PLOT_KINDS)
DESCRIPTION = "Draw one figure of the encoding into FILE (.png, .svg or .pdf)."
EPILOG = """\
kinds:
  heatmap      the table, positions down and dimensions across (100 positions, d_model 512; the sines,
               then the cosines: --view stored keeps the layout's own column order)
  dot-product  PE(i)·PE(j), constant along each diagonal (8 positions, d_model 512, float64)
  sinusoids    sin(k ω_i) against i = 0..99 for k = 0, 4, 8, 12 (d_model 512)
  waves        columns as waves over positions: low columns fast, high slow (256 positions, d_model 512)
  similarity   cosine similarity of PE(p) and PE(p+k) against k = 0..LENGTH (256, d_model 512)
  collisions   float16 and bfloat16: posenc against angles computed in the dtype (16384 positions)
  rope-wavelengths  rotary embeddings: the wavelength of each frequency under each scaling type
               (default, linear, NTK, YaRN, Llama 3; head_dim 128, base 500000, factor 8)
  rope-error   rotary cos/sin error against position: float32 angles, bf16 cache, bf16 inv_freq,
               posenc (131072 positions, head_dim 128, base 500000)

The defaults are in parentheses. An option that a kind does not use is refused. The suffix of FILE
picks the format: .png, .svg or .pdf. Needs matplotlib: pip install 'posenc[plot]'.

examples:
  posenc plot heatmap -o heatmap.png
  posenc plot dot-product --length 64 -o dots.svg
  posenc plot sinusoids -o sinusoids.pdf
  posenc plot waves --d-model 64 --base 100 -o waves.png
  posenc plot collisions --dtype bfloat16 --length 100000 --dpi 200 -o collisions.png
  posenc plot rope-error --length 1000000 -o rope-error.png
"""

_VARIANT_OPTIONS = ("d_model", "length", "base", "shift", "scale", "layout", "odd", "dtype", "view")


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc plot KIND -o FILE [options]``."""
    sub.add_argument("kind", metavar="KIND", choices=PLOT_KINDS, help="one of: " + ", ".join(PLOT_KINDS))
    add_variant_options(sub, default=False)
    sub.add_argument(
        "--output", "-o", type=path_name, metavar="FILE", required=True, help="the file to write"
    )
    sub.add_argument("--dpi", type=number, default=120, help="pixels per inch of a PNG (default: 120)")
    sub.add_argument(
        "--view",
        choices=("grouped", "stored"),
        default=None,
        help="heatmap columns: grouped (the sines, then the cosines; default) or stored (the layout's order)",
    )


def run(args: argparse.Namespace) -> None:
    """``posenc plot``: check the file name first, then draw and save."""
    if Path(args.output).suffix.lower() not in PLOT_SUFFIXES:
        raise CliError(
            f"the output file must end in {', '.join(PLOT_SUFFIXES)} (the suffix picks the format); "
            f"got {args.output!r}"
        )
    from ..analysis import plot  # matplotlib is imported only when the figure is drawn

    plot.check_dpi(args.dpi)
    draw = plot.KINDS[args.kind]
    figure = draw(**_plot_options(args, draw))
    plot.save(figure, args.output, dpi=args.dpi)


def _plot_options(args: argparse.Namespace, draw: Callable[..., Any]) -> dict[str, Any]:
    """The keyword arguments for ``draw`` from the options given; one it does not take is a CliError.

    ``--dtype X`` becomes ``dtypes=(X,)`` for a figure that compares dtypes.
    """
    accepted = set(inspect.signature(draw).parameters)
    if "dtypes" in accepted:
        accepted.add("dtype")
    options: dict[str, Any] = {}
    for name in _VARIANT_OPTIONS:
        value = getattr(args, name)
        if value is None:
            continue
        if name not in accepted:
            takes = ", ".join(_flag(n) for n in _VARIANT_OPTIONS if n in accepted)
            raise CliError(f"{_flag(name)} does not apply to '{args.kind}', which takes {takes}")
        if name == "dtype" and "dtypes" in accepted:
            options["dtypes"] = (value,)
        else:
            options[name] = value
    return options


def _flag(name: str) -> str:
    """The option for a parameter name: d_model -> --d-model."""
    return "--" + name.replace("_", "-")
