"""``posenc compare``: the usual code against posenc far out (:func:`posenc.analysis.compare.compare`): at
positions 8k, 32k, 100k and 1M, in float32, float16 and bfloat16, each code's largest error and its
distinct rows, for the user's own d_model and base."""

from __future__ import annotations

import argparse
import json
import sys

from ..analysis import compare as comparing
from .arguments import PAPER, flags, integer, number, one_of, worded
from .errors import CliError

NAME = "compare"
HELP = "the usual code against posenc far out: its error and distinct rows at 8k .. 1M positions"
DESCRIPTION = """\
How far off is the usual code at position 100k in bfloat16, and what does posenc change? For each
dtype (float32, float16, bfloat16) and each window of positions (1,000 around 8k, 32k, 100k and 1M), the
largest |value − exact| and the distinct rows of three codes: the usual code computed in the dtype, the
usual code in float32 then cast to the dtype, and posenc (each value rounded once)."""
EPILOG = """\
A window's NaN rows (float16 positions from 65520 on are infinite; 65505 .. 65519 round to 65504) are
counted apart; "—" is an error with no finite value to measure.

examples:
  posenc compare                              d_model 512, base 10000
  posenc compare --d-model 4096 --base 500000
  posenc compare --positions 2048,131072 --window 256
  posenc compare --json
"""


def _positions(text: str) -> tuple[int, ...]:
    """``--positions``: whole numbers separated by commas."""
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}")
    return tuple(integer(part) for part in parts)


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The options of ``posenc compare``."""
    sub.add_argument("--d-model", type=integer, default=512, help="width of each encoding (default: 512)")
    sub.add_argument("--base", type=number, default=PAPER["base"], help="frequency base (default: 10000)")
    sub.add_argument(
        "--shift", type=number, default=PAPER["shift"], help="0: the paper (default); 1: fairseq"
    )
    sub.add_argument("--scale", type=number, default=PAPER["scale"], help="multiplies every frequency")
    sub.add_argument(
        "--layout",
        default=PAPER["layout"],
        metavar=one_of(("interleaved", "sin_cos", "cos_sin")),
        help="where the sines and cosines go (default: interleaved)",
    )
    sub.add_argument(
        "--positions",
        type=_positions,
        default=comparing.POSITIONS,
        metavar="P,P,...",
        help="the centres of the windows (default: 8192,32768,100000,1000000)",
    )
    sub.add_argument(
        "--window", type=integer, default=comparing.WINDOW, help="positions per window (default: 1000)"
    )
    sub.add_argument("--json", action="store_true", help="print the comparison as JSON")


def run(args: argparse.Namespace) -> int:
    """``posenc compare``: print the table (or JSON); 0."""
    options = {"base": args.base, "shift": args.shift, "scale": args.scale, "layout": args.layout}
    try:
        result = comparing.compare(args.d_model, positions=args.positions, window=args.window, **options)
    except (ValueError, TypeError) as error:  # the library's parameters, as this command's options
        raise CliError(worded(error, flags("d_model", "positions", "window", *options))) from None
    if args.json:
        json.dump(result.as_dict(), sys.stdout, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(result.as_text() + "\n")
    return 0
