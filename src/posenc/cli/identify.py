"""``posenc identify FILE``: which sinusoidal variant a stored table is, found by
:func:`posenc.porting.identify` (exit status 1 when no candidate reproduces it)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys

import numpy as np

from .arguments import flags, worded
from .errors import CliError, printable

NAME = "identify"
#: Candidates asked of identify: enough to see every match that cannot be told apart from the best.
_CANDIDATES = 8
HELP = "find the variant (preset, base, shift, layout, offset) that reproduces a stored table"
DESCRIPTION = "Find which sinusoidal variant a stored table is, by recomputing candidates exactly."
EPILOG = """\
FILE is .npy, .pt/.pth (a tensor or a state dict, nested dicts welcome) or .safetensors. In a state
dict, --key names the tensor; without it, the one floating table whose name mentions a position is used.

identify fits the frequencies from the table itself, tries every layout, odd-width rule, shift, position
of row 0 and zero padding row, and the named 2-D grids (MAE, diffusers, timm); it recomputes each
candidate exactly and compares every element. The tolerance is what float32 code of that length can be
off by (--tolerance to change it).

The answer is one verdict: the best match (a named variant before fitted generic options), the key read,
the variants it cannot be told apart from ("also consistent with"), the names whose library's float32 code
could not be off by what the table is ("not ..."), the odd-width rule the table shows (any, for an even
width), how far that library's own float32 code is from the exact values at 1k / 8k / 131k positions
(the tolerance a port's test needs), and lines to paste: presets.get(...) and the torch and JAX modules.
When nothing matches, the three nearest candidates are listed.

exit status: 0 when a variant matches, 1 when none does (the nearest are listed), 2 on bad input: a
file that is empty, cut short, damaged, of another format than its suffix, or that holds no table of
real numbers of shape (positions, d_model) gets one line that says so; so do a nested, sparse, quantized
or meta tensor, a .pt holding other objects than tensors (never loaded unsafely), a directory, a symlink
loop, a FIFO and a device (never opened).

examples:
  posenc identify pe.npy
  posenc identify model.safetensors --key model.encoder.embed_positions.weight
  posenc identify checkpoint.pt --json
"""


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc identify FILE [options]``."""
    sub.add_argument("file", metavar="FILE", help="a .npy, .pt/.pth or .safetensors file")
    sub.add_argument("--key", help="the tensor's name inside a state dict or safetensors file")
    sub.add_argument("--tolerance", type=float, help="the largest difference that still matches")
    sub.add_argument("--json", action="store_true", help="print the candidates as JSON")


def run(args: argparse.Namespace) -> int:
    """``posenc identify``: 0 when a variant reproduces the table, 1 when none does."""
    from .. import porting  # imported when used: the other commands start without it

    tolerance = args.tolerance
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise CliError(
            f"--tolerance must be a finite number >= 0; got {tolerance!r}; leave it out for what float32 "
            "code of the table's length can be off by"
        )
    try:
        key, table, stored = porting.load_stored_table(args.file, key=args.key)  # its errors name the file
    except ValueError as error:  # they name the parameter key=: here, the option --key
        raise CliError(worded(error, flags("key"))) from None
    try:
        matches = porting.identify(table, tolerance=tolerance, candidates=_CANDIDATES)
    except (ValueError, TypeError) as error:  # a table of NaN, ...: say which file
        raise CliError(f"{args.file}: {error}") from None
    shape, dtype = tuple(np.shape(table)), np.asarray(table).dtype
    where = f"{args.file}, tensor {key!r}" if key else args.file
    lines, answer = porting.answer_lines(where, matches, shape, dtype, stored)
    if answer is None:  # a RoPE buffer: its ranked candidates are the answer
        return _rope(args, key, shape, matches[:3], lines)
    shown = [answer.best] if answer.best is not None else list(answer.nearest)
    if args.json:
        records = [dataclasses.asdict(m) for m in shown]
        document = {"file": args.file, "key": key or None, "dtype": stored, "shape": list(shape)}
        document |= {"verdict": answer.to_json(), "candidates": records}
        json.dump(document, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.writelines(f"{printable(line)}\n" for line in lines)
    return 0 if answer.best is not None else 1


def _rope(args: argparse.Namespace, key: str, shape: tuple, matches: list, lines: list[str]) -> int:
    """The RoPE answer: every candidate, as identify ranks them."""
    if args.json:
        records = [dataclasses.asdict(m) for m in matches]
        json.dump({"key": key or None, "shape": list(shape), "candidates": records}, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.writelines(f"{printable(line)}\n" for line in lines)
    return 0 if matches and matches[0].matches else 1
