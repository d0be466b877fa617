"""``posenc table``: print or save ``posenc.table(LENGTH, D_MODEL, ...)``, one row per position.

Every format is computed and written a block of rows at a time (rows are bit-identical to the full
table's, by posenc.table's contract), so that memory stays flat at any length: text, csv and json through
:mod:`posenc.cli.formats`, npy here, in chunks written straight to the file. A file (``--output``) is
written atomically: into a temporary file beside it, renamed over it only once whole.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

import posenc

from .. import presets, validation
from ..atomic import atomic_output
from ..layouts import LAYOUTS, ODD_RULES, column_names
from .arguments import MAX_DIGITS, PAPER, add_output_options, integer, number, one_of
from .errors import CliError
from .formats import TEXT_DIGITS, TableGrid, write_csv, write_json, write_text
from .progress import LONG, Progress

_NPY_CHUNK_BYTES = 32 << 20  # posenc table --format npy writes chunks of this size: peak memory < 256 MiB

NAME = "table"
HELP = "print or save a table of encodings, one row per position"
DESCRIPTION = """\
Print or save posenc.table(LENGTH, D_MODEL, ...): one row per position,
correctly rounded to --dtype (float64: within 1 ulp of the exact value)."""
EPILOG = """\
columns:
  The header names each column by its index, its function and its frequency index: '2 sin ω1' is
  sin(pos · ω_1), with ω_i = base ** (-i / (h - shift)), h = d_model / 2 (times --scale, if given). An odd
  d_model, by --odd: zero (the default) takes h = d_model // 2 and ends in a 'zero' column; literal takes
  h = d_model / 2 and drop h = (d_model + 1) / 2, and both leave out the last frequency's cosine (its sine,
  under cos_sin). The layout decides the order: interleaved = sin ω0, cos ω0, sin ω1, ... (the paper);
  sin_cos = all sines, then all cosines (tensor2tensor, fairseq, Whisper); cos_sin = the reverse.

formats:
  text  an aligned table, --digits decimals (0 to 17; default 4)
  csv   a header row, then one row per position; each value in the shortest form that reads back
        exactly in --dtype (0.84147096 for float32's sin 1, not float64's 0.8414709568023682), unless
        --digits
  json  {"d_model", "base", "shift", "scale", "layout", "odd", "start", "dtype", "positions", "columns",
        "values"}
  npy   the array itself, bit for bit (np.load reads it); needs --output. Written in 32 MiB chunks:
        any length, flat memory, progress on stderr for large tables. NumPy has no bfloat16
        type: bfloat16 is stored as raw 2-byte values, np.load(FILE).view(ml_dtypes.bfloat16)
  Every format is computed and written a block of rows at a time: memory stays flat at any length.

examples:
  posenc table 5 4                                  the d_model = 4 worked example, positions 0..4
  posenc table 4 4 --base 100                       base 100: column 2 is sin(pos / 10)
  posenc table 3 8 --start 1000 --digits 6          positions 1000..1002, six decimals
  posenc table 8 512 --shift 1 --layout sin_cos     the tensor2tensor / fairseq variant
  posenc table 16 6 --format csv --output pe.csv
  posenc table 4096 512 --dtype bfloat16 --format npy --output pe.npy
"""


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc table LENGTH D_MODEL [options]``."""
    sub.add_argument("length", metavar="LENGTH", type=integer, help="number of positions")
    sub.add_argument("d_model", metavar="D_MODEL", type=integer, help="width of each encoding (>= 2)")
    sub.add_argument(
        "--preset",
        metavar="NAME",
        help="a named variant with its library's defaults: "
        + ", ".join(presets.names())
        + "; the options below override it",
    )
    sub.add_argument("--base", type=number, help=f"frequency base > 1 (default: {PAPER['base']}, the paper)")
    sub.add_argument(
        "--shift",
        type=number,
        help=f"{PAPER['shift']} (default): the paper, ω_i = base^(-2i/d_model); 1: tensor2tensor and "
        "fairseq, whose lowest frequency is exactly 1/base",
    )
    sub.add_argument("--scale", type=number, help=f"multiplies every frequency (default: {PAPER['scale']:g})")
    sub.add_argument(
        "--layout",
        metavar=one_of(LAYOUTS),
        help=f"where the sines and cosines go (default: {PAPER['layout']})",
    )
    sub.add_argument(
        "--odd",
        metavar=one_of(ODD_RULES),
        help=f"the rule for an odd D_MODEL (default: {PAPER['odd']}, a zero last column)",
    )
    sub.add_argument(
        "--start", type=integer, default=0, help="first position, |position| < 2**31 (default: 0)"
    )
    add_output_options(
        sub,
        digits_help=f"decimals printed, 0 to {MAX_DIGITS} (default: {TEXT_DIGITS} for text; csv and json: "
        "the shortest form that reads back exactly in --dtype)",
    )


def run(args: argparse.Namespace) -> None:
    """``posenc table``: check the whole request, then open the output and write the table as it is
    computed, a block of rows at a time (rows are bit-identical to the full table's, by posenc.table's
    contract), so that memory stays flat whatever the length."""
    if args.format == "npy" and args.output is None:
        raise CliError("--format npy writes binary data; name a file with --output FILE")
    digits = args.digits
    if digits is not None:
        if not 0 <= digits <= MAX_DIGITS:
            raise CliError(
                f"--digits must be an integer from 0 to {MAX_DIGITS}; got {digits}. It counts decimals: 9 "
                f"show a float32 value near 1 to its last digit, {MAX_DIGITS} a float64 one; without "
                "--digits, csv and json print the shortest form that reads back exactly"
            )
        if args.format == "npy":
            raise CliError("--digits does not apply to --format npy, which stores the values exactly")
    # The preset's options (or the paper's), overridden by each option given.
    variant = presets.get(args.preset).options if args.preset else dict(PAPER)
    variant.update({k: getattr(args, k) for k in PAPER if getattr(args, k) is not None})
    options = {**variant, "start": args.start}
    dtype = _check_request(args.length, args.d_model, args.dtype, options)
    if args.format == "npy":
        _stream_npy(args, options, dtype)
        return
    # Streamed, a text table needs no more memory at any length; but one larger than memory is far larger
    # still as text (10 to 25 bytes a value): it is refused as before, and the message points to npy.
    try:
        validation.fits_in_memory((args.length, args.d_model), dtype)
    except ValueError as error:
        raise CliError(f"{error}; --format npy --output FILE streams any length") from None
    start = options["start"]
    labels = column_names(args.d_model, options["layout"], options["odd"])
    grid = TableGrid("pos", range(start, start + args.length), labels, args.d_model, dtype, options)
    with _open_output(args.output, binary=False) as stream:
        if args.format == "text":
            write_text(stream, grid, TEXT_DIGITS if digits is None else digits)
        elif args.format == "csv":
            write_csv(stream, grid, digits)
        else:
            meta = {"d_model": args.d_model, **options, "dtype": dtype.name}
            write_json(stream, grid, meta, digits)


def _check_request(length: int, d_model: int, dtype: str, options: dict[str, Any]) -> np.dtype:
    """Check every option, the length and the first and last positions before anything is written (a bad
    request must not leave a partial file); return the table's dtype."""
    first = posenc.table(min(length, 1), d_model, dtype=dtype, **options)
    if length > 1:
        posenc.table(1, d_model, dtype=dtype, **{**options, "start": options["start"] + length - 1})
    return first.dtype


def _stream_npy(args: argparse.Namespace, options: dict[str, Any], dtype: np.dtype) -> None:
    """Write the table as .npy in chunks of at most _NPY_CHUNK_BYTES, reusing one buffer: a table of any
    size (1,048,576 × 4096 is 16 GiB in float32) needs that buffer and posenc's working set, no more."""
    length, d_model = args.length, args.d_model
    rows = max(1, min(length, _NPY_CHUNK_BYTES // (d_model * dtype.itemsize)))
    buffer = np.empty((rows, d_model), dtype)
    header = {
        "descr": np.lib.format.dtype_to_descr(dtype),
        "fortran_order": False,
        "shape": (length, d_model),
    }
    terminal = bool(getattr(sys.stderr, "isatty", bool)())  # no stderr at all: None
    progress = Progress("table", enabled=terminal or length * d_model >= LONG)
    try:
        with _open_output(args.output, binary=True) as stream:
            np.lib.format.write_array_header_2_0(stream, header)
            for lo in range(0, length, rows):
                chunk = buffer[: min(rows, length - lo)]
                start = options["start"] + lo
                posenc.table(len(chunk), d_model, dtype=args.dtype, out=chunk, **{**options, "start": start})
                stream.write(chunk.view(np.uint8).data)  # bytes of any dtype, bfloat16 too
                progress((lo + len(chunk)) / length, f"{lo + len(chunk):,} of {length:,} rows")
    finally:
        progress.close()


@contextlib.contextmanager
def _open_output(path: str | None, *, binary: bool) -> Iterator[IO[Any]]:
    """Yield stdout, or a temporary file that replaces the file ``path`` only once it is whole
    (:func:`posenc.atomic.atomic_output`): a failure, Ctrl-C or SIGTERM leaves the old file as it was. An
    OSError there names ``path``: ``posenc: error: cannot write pe.csv: File too large``."""
    if path is None:
        yield sys.stdout
        return
    with atomic_output(path, binary=binary) as stream:
        yield stream
