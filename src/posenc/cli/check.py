"""``posenc check``: measure, for one setting, the criteria a positional encoding must meet, and print
the report of :func:`posenc.analysis.check` (exit status 1 when a criterion fails)."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from .. import analysis
from .arguments import PAPER, add_variant_options, as_flags, one_of
from .progress import LONG, Progress

NAME = "check"
HELP = "measure the criteria of a good encoding (unique, bounded, ...) for one setting"
DESCRIPTION = """\
Measure, for one setting, the criteria a positional encoding must meet: unique,
consistent across lengths, generalises to longer sequences, bounded, deterministic, and
shift invariant. Each gets its measured figure and pass or fail."""
# The five criteria are those listed in Kazemnejad's 2019 post "Transformer Architecture: The Positional
# Encoding"; shift invariance is the dot-product law of Vaswani et al. 2017 §3.5.


def _criteria_help(width: int = 104) -> str:
    """The help's list of criteria, written from :data:`posenc.analysis.CRITERIA` (what each checks, its
    figure and tolerance), so that the help, the report and the guide (docs/see.md) read one table."""
    name_width = max(len(d.name) for d in analysis.CRITERIA) + 4
    lines = [
        "criteria (Kazemnejad's 2019 list, plus shift invariance), each with its figure; L is --length,",
        "n = d_model // 2, u the unit roundoff of --dtype:",
    ]
    indent = " " * name_width
    for d in analysis.CRITERIA:
        first = f"  {d.name:<{name_width - 2}}"
        lines.append(textwrap.fill(d.checks, width, initial_indent=first, subsequent_indent=indent))
        lines.append(
            textwrap.fill(f"tolerance: {d.tolerates}", width, initial_indent=indent, subsequent_indent=indent)
        )
    return "\n".join(lines)


EPILOG = (
    _criteria_help()
    + """

--compute exact (default) checks posenc's values, computed exactly and rounded once to --dtype;
--compute dtype checks the usual code, which computes positions, angles and sin/cos in --dtype.
Long checks report their progress on stderr.

exit status: 0 when every criterion passes, 1 when one fails, 2 on bad input.

examples:
  posenc check                                        d_model 512, positions 0..2047, float32
  posenc check --dtype bfloat16 --length 100000       posenc's bfloat16 values: unique, bounded, ...
  posenc check --dtype bfloat16 --compute dtype       the usual bfloat16 code: 257 looks like 256
  posenc check --d-model 4 --dtype bfloat16 --length 100000
  posenc check --json
"""
)


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The options of ``posenc check [options]``."""
    add_variant_options(sub, default=True)
    sub.add_argument(
        "--compute",
        default="exact",
        metavar=one_of(analysis.COMPUTE),
        help="exact: posenc's values, rounded once (default); dtype: the usual code, computed in --dtype",
    )
    sub.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """``posenc check``: measure, print the report; 0 when every criterion passes, else 1."""
    long = args.length * args.d_model >= LONG
    progress = Progress("check", enabled=sys.stderr.isatty() or long)
    try:
        options = {name: getattr(args, name) for name in (*PAPER, "dtype", "compute")}  # as parsed
        report = analysis.check(args.length, args.d_model, progress=progress, **options)
    finally:
        progress.close()
    if args.json:
        json.dump(report.as_dict(), sys.stdout, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(as_flags(report.as_text(), "compute") + "\n")
    return 0 if report.passed else 1
