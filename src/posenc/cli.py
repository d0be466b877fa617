"""The ``posenc`` command: ``posenc table`` prints or saves a table, ``posenc check`` measures the criteria
of a good encoding, ``posenc plot`` draws one, ``posenc demo`` explains it all.

Every error (a usage error, or a value that posenc's own validation refuses) is one line on
stderr, ``posenc: error: <message>``, with exit code 2 and no traceback; ``--help`` and
``--version`` exit 0. ``posenc check`` exits 1 when a criterion fails. Built on argparse: the standard
library keeps NumPy the only dependency and the start-up short.

>>> main(["table", "3", "4"])
pos  0 sin ω0  1 cos ω0  2 sin ω1  3 cos ω1
  0    0.0000    1.0000    0.0000    1.0000
  1    0.8415    0.5403    0.0100    0.9999
  2    0.9093   -0.4161    0.0200    0.9998
0
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import inspect
import json
import math
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NoReturn, TextIO

import numpy as np

import posenc

from . import _validate, analysis, presets

PROG = "posenc"
FORMATS = ("text", "csv", "json", "npy")
TEXT_DIGITS = 4  # decimals printed by the text format unless --digits says otherwise
#: The most decimals --digits prints: 17 show a float64 value near 1 to its last digit (float32 needs 9);
#: without --digits, csv and json print every digit of every value.
MAX_DIGITS = 17
_CHUNK_VALUES = 1 << 14  # values formatted at a time (as Python floats): text, csv and json stream
_TABLE_BLOCK_BYTES = 4 << 20  # ... from blocks of the table this large (posenc.table has a cost per call)
_NPY_CHUNK_BYTES = 32 << 20  # posenc table --format npy writes chunks of this size: peak memory < 256 MiB
_LONG = 1 << 24  # values (length × d_model) from which a check counts as long and shows its progress
PLOT_KINDS = ("heatmap", "dot-product", "sinusoids", "waves", "similarity", "collisions")  # posenc.plot.KINDS
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
DEMO_FOLDER = "posenc-demo"
_HELP = argparse.RawDescriptionHelpFormatter

_MAIN_EPILOG = """\
examples:
  posenc demo                             a guided walk-through, computed as you watch
  posenc identify pe.npy                  which variant is this stored table?
  posenc table 5 4                        positions 0..4, d_model = 4 (the paper's formula)
  posenc table 4 4 --base 100             the same formula with base 100
  posenc table 1024 512 --format npy --output pe.npy
  posenc check --dtype bfloat16 --length 100000   is the encoding still unique, bounded, shift invariant?
  posenc plot dot-product -o dots.png             the dot-product map: constant along each diagonal
  posenc demo --out figures                       the walk-through, its figures written into figures/

run 'posenc COMMAND --help' for the options of each command.
"""

_TABLE_EPILOG = """\
columns:
  The header names each column by its index, its function and its frequency index: '2 sin ω1' is
  sin(pos · ω_1), with ω_i = base ** (-i / (d_model // 2 - shift)). An odd d_model ends in a 'zero'
  column. The layout decides the order: interleaved = sin ω0, cos ω0, sin ω1, ... (the paper);
  sin_cos = all sines, then all cosines (tensor2tensor, fairseq, Whisper); cos_sin = the reverse.

formats:
  text  an aligned table, --digits decimals (0 to 17; default 4)
  csv   a header row, then one row per position; values in full (repr of each float) unless --digits
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

_DEMO_EPILOG = """\
examples:
  posenc demo                      figures into ./posenc-demo/
  posenc demo --out /tmp/figures
  posenc demo | less
"""

_CHECK_EPILOG = """\
criteria (the third source document's list, plus shift invariance), each with its figure:
  unique           no two of positions 0..LENGTH-1 share an encoding in --dtype (bit for bit). Figure:
                   the smallest distance between the encodings of two positions (exact, over all pairs)
  consistent       table(LENGTH) is bit-identical to the first LENGTH rows of table(2 LENGTH), so no
                   distance depends on the sequence length. Figure: the number of values that differ
  generalises      positions LENGTH..2 LENGTH-1 are bounded, distinct from every earlier position and
                   follow the same dot-product law. Figure: the dot-product deviation there
  bounded          max |PE| <= 1. Figure: max |PE|
  deterministic    recomputing (again, in two halves, row by row) gives the same bits. Figure: the
                   number of values that differ
  shift_invariant  PE(p)·PE(p+k) = Σ_i cos(k ω_i) for 4096 sampled pairs, within the proven bound for
                   --dtype rounding. Figure: the largest deviation

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

_PLOT_EPILOG = """\
kinds:
  heatmap      the table, positions down and dimensions across (100 positions, d_model 512)
  dot-product  PE(i)·PE(j), constant along each diagonal (8 positions, d_model 512, float64)
  sinusoids    sin(k ω_i) against i = 0..99 for k = 0, 4, 8, 12 (d_model 512)
  waves        columns as waves over positions: low columns fast, high slow (256 positions, d_model 128)
  similarity   cosine similarity of PE(p) and PE(p+k) against k = 0..LENGTH (256, d_model 512)
  collisions   float16 and bfloat16: posenc against angles computed in the dtype (16384 positions)

The defaults are in parentheses. An option that a kind does not use is refused. The suffix of FILE
picks the format: .png, .svg or .pdf. Needs matplotlib: pip install 'posenc[plot]'.

examples:
  posenc plot heatmap -o heatmap.png
  posenc plot dot-product --length 64 -o dots.svg
  posenc plot sinusoids -o sinusoids.pdf
  posenc plot waves --d-model 64 --base 100 -o waves.png
  posenc plot collisions --dtype bfloat16 --length 100000 --dpi 200 -o collisions.png
"""


_IDENTIFY_EPILOG = """\
FILE is .npy, .pt/.pth (a tensor or a state dict, nested dicts welcome) or .safetensors. In a state
dict, --key names the tensor; without it, the one floating table whose name mentions a position is used.

identify fits the frequencies from the table itself, tries every layout, odd-width rule, shift, position
of row 0 and zero padding row, and the named 2-D grids (MAE, diffusers, timm); it recomputes each
candidate exactly and compares every element. The tolerance is what float32 code of that length can be
off by (--tolerance to change it).

exit status: 0 when a variant matches, 1 when none does (the nearest are listed), 2 on bad input: a
file that is empty, cut short, damaged, of another format than its suffix, or that holds no table of
real numbers of shape (positions, d_model) gets one line that says so.

examples:
  posenc identify pe.npy
  posenc identify model.safetensors --key model.encoder.embed_positions.weight
  posenc identify checkpoint.pt --json
"""


_PAPER = {"base": 10000, "shift": 0, "scale": 1.0, "layout": "interleaved", "odd": "zero"}


class CliError(Exception):
    """A request the command line itself refuses (posenc's own errors are ValueError/TypeError)."""


# --- entry point ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run ``posenc`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    0 on success, 2 on any bad input (one ``posenc: error:`` line on stderr), 1 when the reader of
    stdout went away (``posenc table 100000 4 | head``) or when ``posenc check`` finds a criterion
    failing, 130 on Ctrl-C.
    """
    parser = build_parser()
    _tolerate_narrow_stdout()  # before parsing: the help texts use 'ω' too
    try:
        args = parser.parse_args(argv)
        code = args.handler(args) or 0
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
    except SystemExit as stop:  # from argparse: --help, --version, usage errors
        return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    except BrokenPipeError:
        _silence_stdout()
        return 1
    except KeyboardInterrupt:
        return 130
    except (CliError, ValueError, TypeError, ImportError, OSError) as error:
        return _fail(_describe(error))
    except MemoryError as error:  # a request whose size nothing checked before allocating it
        return _fail(
            f"out of memory ({error or 'an allocation failed'}); ask for less: fewer positions or a "
            "smaller width"
        )
    return code


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: ``posenc [--version] {table,check,plot,identify,demo} ...``."""
    parser = _Parser(
        prog=PROG,
        description="Exact sinusoidal positional encodings: print, save, check, draw and explain them.",
        epilog=_MAIN_EPILOG,
        formatter_class=_HELP,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {posenc.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_table_command(commands)
    _add_check_command(commands)
    _add_plot_command(commands)
    _add_identify_command(commands)
    _add_demo_command(commands)
    return parser


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``posenc: error: ...``, and exit 2, and which takes
    ``-1e4``, ``-inf`` and ``nan`` as values (``--base -inf`` then gets posenc's message, not argparse's
    "expected one argument")."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|inf(inity)?|nan)$", re.IGNORECASE
        )

    def error(self, message: str) -> NoReturn:
        raise SystemExit(_fail(message))


def _fail(message: str) -> int:
    """Print the one-line error message on stderr; return the exit code 2."""
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    return 2


def _describe(error: Exception) -> str:
    """The message of an error, with what an OSError failed on."""
    if isinstance(error, OSError) and error.strerror:
        target = error.filename if error.filename is not None else "standard output"
        return f"cannot write {target}: {error.strerror}"
    return str(error)


def _tolerate_narrow_stdout() -> None:
    """On a stdout that cannot encode 'ω' (a non-UTF-8 locale), print ``\\u03c9``, do not fail."""
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    if encoding != "utf8" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that Python's final flush stays quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


# --- argument types -------------------------------------------------------------------------------


def _integer(text: str) -> int:
    """argparse type: an integer written as one; ``4.0`` is refused with a hint.

    >>> _integer("-3")
    -3
    """
    with contextlib.suppress(ValueError):
        return int(text)
    hint = ""
    with contextlib.suppress(ValueError, OverflowError):
        number = float(text)
        if number.is_integer():
            hint = f" (write {int(number)})"
    shown = repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"
    raise argparse.ArgumentTypeError(f"must be an integer; got {shown}{hint}")


def _number(text: str) -> int | float:
    """argparse type: an int when the text is an integer, else a float (``nan``, ``1e4`` included).

    >>> _number("100"), _number("1e4")
    (100, 10000.0)
    """
    with contextlib.suppress(ValueError):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None


# --- posenc table ---------------------------------------------------------------------------------


def _add_table_command(commands: Any) -> None:
    sub = commands.add_parser(
        "table",
        help="print or save a table of encodings, one row per position",
        description="Print or save posenc.table(LENGTH, D_MODEL, ...): one row per position,\n"
        "correctly rounded to --dtype.",
        epilog=_TABLE_EPILOG,
        formatter_class=_HELP,
    )
    sub.add_argument("length", metavar="LENGTH", type=_integer, help="number of positions")
    sub.add_argument("d_model", metavar="D_MODEL", type=_integer, help="width of each encoding (>= 2)")
    sub.add_argument(
        "--preset",
        metavar="NAME",
        help="a named variant with its library's defaults: "
        + ", ".join(presets.names())
        + "; the options below override it",
    )
    sub.add_argument("--base", type=_number, help="frequency base > 1 (default: 10000, the paper)")
    sub.add_argument(
        "--shift",
        type=_number,
        help="0 (default): the paper, ω_i = base^(-2i/d_model); 1: tensor2tensor and fairseq, "
        "whose lowest frequency is exactly 1/base",
    )
    sub.add_argument("--scale", type=_number, help="multiplies every frequency (default: 1)")
    sub.add_argument(
        "--layout",
        metavar="{" + ",".join(_validate.LAYOUTS) + "}",
        help="where the sines and cosines go (default: interleaved)",
    )
    sub.add_argument(
        "--odd",
        metavar="{" + ",".join(_validate.ODD_RULES) + "}",
        help="the rule for an odd D_MODEL (default: zero, a zero last column)",
    )
    sub.add_argument(
        "--start", type=_integer, default=0, help="first position, |position| < 2**31 (default: 0)"
    )
    sub.add_argument(
        "--dtype",
        default="float32",
        metavar="{" + ",".join(_validate.DTYPES) + "}",
        help="output dtype; values are correctly rounded to it (default: float32)",
    )
    sub.add_argument(
        "--digits",
        type=_integer,
        help=f"decimals printed, 0 to {MAX_DIGITS} (default: {TEXT_DIGITS} for text, every digit for csv and "
        "json)",
    )
    sub.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    sub.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    sub.set_defaults(handler=_run_table)


def _run_table(args: argparse.Namespace) -> None:
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
                "--digits, csv and json print every digit"
            )
        if args.format == "npy":
            raise CliError("--digits does not apply to --format npy, which stores the values exactly")
    variant = presets.get(args.preset).options if args.preset else dict(_PAPER)
    variant.update({k: getattr(args, k) for k in _PAPER if getattr(args, k) is not None})
    options = {**variant, "start": args.start}
    dtype = _check_table(args.length, args.d_model, args.dtype, options)
    if args.format == "npy":
        _stream_npy(args, options, dtype)
        return
    # Streamed, a text table needs no more memory at any length; but one larger than memory is far larger
    # still as text (10 to 25 bytes a value): it is refused as before, and the message points to npy.
    _validate.fits_in_memory((args.length, args.d_model), dtype)
    start = options["start"]
    labels = column_labels(args.d_model, options.get("layout", "interleaved"), options.get("odd", "zero"))
    grid = _TableGrid("pos", range(start, start + args.length), labels, args.d_model, dtype, options)
    with _open_output(args.output, binary=False) as stream:
        if args.format == "text":
            _write_text(stream, grid, TEXT_DIGITS if digits is None else digits)
        elif args.format == "csv":
            _write_csv(stream, grid, digits)
        else:
            meta = {"d_model": args.d_model, **options, "dtype": dtype.name}
            _write_json(stream, grid, meta, digits)


def _check_table(length: int, d_model: int, dtype: str, options: dict[str, Any]) -> np.dtype:
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
    progress = _Progress("table", enabled=sys.stderr.isatty() or length * d_model >= _LONG)
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
    """Yield stdout, or the file ``path`` opened for writing; a failure there becomes a CliError."""
    if path is None:
        yield sys.stdout
        return
    try:
        with open(path, "wb") if binary else open(path, "w", encoding="utf-8") as stream:
            yield stream
    except BrokenPipeError:
        raise
    except OSError as error:
        raise CliError(f"cannot write {path}: {error.strerror or error}") from None


# --- options shared by check and plot -------------------------------------------------------------


def _add_variant_options(sub: argparse.ArgumentParser, *, default: bool) -> None:
    """--d-model, --length, --base, --shift, --layout and --dtype; ``default=False`` leaves each None
    (so that a command can tell which ones were given)."""

    def value(given: Any) -> Any:
        return given if default else None

    def shown(given: Any) -> str:
        return f" (default: {given})" if default else ""

    sub.add_argument(
        "--d-model", type=_integer, default=value(512), help="width of each encoding, >= 2" + shown(512)
    )
    sub.add_argument("--length", type=_integer, default=value(2048), help="number of positions" + shown(2048))
    sub.add_argument(
        "--base",
        type=_number,
        default=value(10000),
        help="frequency base > 1, the paper's 10000" + shown(10000),
    )
    sub.add_argument(
        "--shift",
        type=_number,
        default=value(0),
        help="0: the paper; 1: tensor2tensor and fairseq" + shown(0),
    )
    sub.add_argument(
        "--layout",
        default=value("interleaved"),
        metavar="{" + ",".join(_validate.LAYOUTS) + "}",
        help="where the sines and cosines go" + shown("interleaved"),
    )
    sub.add_argument(
        "--dtype",
        default=value("float32"),
        metavar="{" + ",".join(_validate.DTYPES) + "}",
        help="the dtype studied; values are correctly rounded to it" + shown("float32"),
    )


class _Progress:
    """``progress(fraction, what)`` for long work: a percentage on stderr, one line updated in place on a
    terminal, one line per step elsewhere; silent when not ``enabled``."""

    def __init__(self, label: str, *, enabled: bool, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.label, self.enabled = label, enabled
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = 0

    def __call__(self, fraction: float, what: str) -> None:
        if not self.enabled:
            return
        text = f"{PROG} {self.label}: {fraction:4.0%}  {what}"
        if self.terminal:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Clear the line a terminal shows."""
        if self.enabled and self.terminal and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


# --- posenc check ---------------------------------------------------------------------------------


def _add_check_command(commands: Any) -> None:
    sub = commands.add_parser(
        "check",
        help="measure the criteria of a good encoding (unique, bounded, ...) for one setting",
        description="Measure, for one setting, the criteria a positional encoding must meet: unique,\n"
        "consistent across lengths, generalises to longer sequences, bounded, deterministic, and\n"
        "shift invariant. Each gets its measured figure and pass or fail.",
        epilog=_CHECK_EPILOG,
        formatter_class=_HELP,
    )
    _add_variant_options(sub, default=True)
    sub.add_argument(
        "--compute",
        default="exact",
        metavar="{" + ",".join(analysis.COMPUTE) + "}",
        help="exact: posenc's values, rounded once (default); dtype: the usual code, computed in --dtype",
    )
    sub.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.set_defaults(handler=_run_check)


def _add_identify_command(commands: Any) -> None:
    sub = commands.add_parser(
        "identify",
        help="find the variant (preset, base, shift, layout, offset) that reproduces a stored table",
        description="Find which sinusoidal variant a stored table is, by recomputing candidates exactly.",
        epilog=_IDENTIFY_EPILOG,
        formatter_class=_HELP,
    )
    sub.add_argument("file", metavar="FILE", help="a .npy, .pt/.pth or .safetensors file")
    sub.add_argument("--key", help="the tensor's name inside a state dict or safetensors file")
    sub.add_argument("--tolerance", type=float, help="the largest difference that still matches")
    sub.add_argument("--json", action="store_true", help="print the candidates as JSON")
    sub.set_defaults(handler=_run_identify)


def _run_identify(args: argparse.Namespace) -> int:
    """``posenc identify``: 0 when a variant reproduces the table, 1 when none does."""
    from . import porting

    tolerance = args.tolerance
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise CliError(
            f"--tolerance must be a finite number >= 0; got {tolerance!r}; leave it out for what float32 "
            "code of the table's length can be off by"
        )
    table = porting.load_table(args.file, key=args.key)  # its errors name the file
    try:
        matches = porting.identify(table, tolerance=tolerance)
    except (ValueError, TypeError) as error:  # a table of NaN, ...: say which file
        raise CliError(f"{args.file}: {error}") from None
    if args.json:
        records = [dataclasses.asdict(m) for m in matches]
        json.dump({"shape": list(np.shape(table)), "candidates": records}, sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(f"{args.file}: table of shape {tuple(np.shape(table))}\n")
        for rank, match in enumerate(matches, 1):
            sys.stdout.write(f"  {rank}. {match.describe()}\n")
    return 0 if matches and matches[0].matches else 1


def _run_check(args: argparse.Namespace) -> int:
    """``posenc check``: measure, print the report; 0 when every criterion passes, else 1."""
    long = args.length * args.d_model >= _LONG
    progress = _Progress("check", enabled=sys.stderr.isatty() or long)
    try:
        report = analysis.check(
            args.length,
            args.d_model,
            base=args.base,
            shift=args.shift,
            layout=args.layout,
            dtype=args.dtype,
            compute=args.compute,
            progress=progress,
        )
    finally:
        progress.close()
    if args.json:
        json.dump(report.as_dict(), sys.stdout, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.writelines(line + "\n" for line in _report_lines(report))
    return 0 if report.passed else 1


def _report_lines(report: analysis.Report, width: int = 100) -> list[str]:
    """The report as text: a heading, a status line and the measurement of each criterion, a verdict."""
    o = report.options
    how = "posenc, rounded once" if o["compute"] == "exact" else f"computed in {o['dtype']}"
    lines = textwrap.wrap(
        f"{PROG} check: d_model {o['d_model']}, positions 0..{o['length'] - 1}, base {o['base']:g}, "
        f"shift {o['shift']:g}, layout {o['layout']}, {o['dtype']} ({how})",
        width,
        subsequent_indent=" " * 14,
    )
    for c in report.criteria:
        figure = "-" if c.figure is None else f"{c.figure:.4g}"
        lines += ["", f"  {'pass' if c.passed else 'FAIL'}  {c.title}"]
        lines += textwrap.wrap(
            f"figure {figure}: {c.detail}", width, initial_indent=" " * 8, subsequent_indent=" " * 8
        )
    failed = [c.name for c in report.criteria if not c.passed]
    total = len(report.criteria)
    verdict = (
        f"all {total} criteria pass" if not failed else f"{len(failed)} of {total} fail: {', '.join(failed)}"
    )
    return [*lines, "", verdict]


# --- posenc plot ----------------------------------------------------------------------------------


def _add_plot_command(commands: Any) -> None:
    sub = commands.add_parser(
        "plot",
        help="draw a figure: heatmap, dot-product, sinusoids, waves, similarity, collisions",
        description="Draw one figure of the encoding into FILE (.png, .svg or .pdf).",
        epilog=_PLOT_EPILOG,
        formatter_class=_HELP,
    )
    sub.add_argument("kind", metavar="KIND", choices=PLOT_KINDS, help="one of: " + ", ".join(PLOT_KINDS))
    _add_variant_options(sub, default=False)
    sub.add_argument("--output", "-o", metavar="FILE", required=True, help="the file to write")
    sub.add_argument("--dpi", type=_number, default=120, help="pixels per inch of a PNG (default: 120)")
    sub.set_defaults(handler=_run_plot)


def _run_plot(args: argparse.Namespace) -> None:
    """``posenc plot``: check the file name first, then draw and save."""
    if Path(args.output).suffix.lower() not in PLOT_SUFFIXES:
        raise CliError(
            f"the output file must end in {', '.join(PLOT_SUFFIXES)} (the suffix picks the format); "
            f"got {args.output!r}"
        )
    from . import plot  # matplotlib is imported only here

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
    names = ("d_model", "length", "base", "shift", "layout", "dtype")
    options: dict[str, Any] = {}
    for name in names:
        value = getattr(args, name)
        if value is None:
            continue
        if name not in accepted:
            takes = ", ".join(_flag(n) for n in names if n in accepted)
            raise CliError(f"{_flag(name)} does not apply to '{args.kind}', which takes {takes}")
        if name == "dtype" and "dtypes" in accepted:
            options["dtypes"] = (value,)
        else:
            options[name] = value
    return options


def _flag(name: str) -> str:
    """The option for a parameter name: d_model -> --d-model."""
    return "--" + name.replace("_", "-")


# --- labelled grids and their formats -------------------------------------------------------------


@dataclass(frozen=True)
class _Grid:
    """A 2-D array with a label for each row and column: what the writers and the demo print."""

    corner: str  # the heading of the row-label column
    rows: Sequence[object]  # row labels (positions as a range, or any printable values)
    columns: Sequence[str]
    values: np.ndarray  # shape (len(rows), len(columns)), any real dtype

    def blocks(self) -> Iterator[tuple[Sequence[object], np.ndarray]]:
        """The grid in blocks of rows: (row labels, their values)."""
        step = _block_rows(len(self.columns))
        for lo in range(0, len(self.rows), step):
            yield self.rows[lo : lo + step], self.values[lo : lo + step]


@dataclass(frozen=True)
class _TableGrid:
    """``posenc.table(len(rows), d_model, dtype=dtype, **options)`` as a grid whose blocks are computed
    when they are asked for, into one reused buffer: no format holds the whole table."""

    corner: str
    rows: range  # the positions
    columns: Sequence[str]
    d_model: int
    dtype: np.dtype
    options: dict[str, Any]  # posenc.table's options, start included

    def blocks(self) -> Iterator[tuple[Sequence[object], np.ndarray]]:
        """The table in blocks of rows: (positions, their rows); each block is overwritten by the next.

        Computed _TABLE_BLOCK_BYTES at a time (rows are bit-identical to the full table's, by
        posenc.table's contract), handed out _CHUNK_VALUES at a time."""
        computed = max(1, min(len(self.rows), _TABLE_BLOCK_BYTES // (self.d_model * self.dtype.itemsize)))
        handed = min(computed, _block_rows(self.d_model))
        buffer = np.empty((computed, self.d_model), self.dtype)
        for lo in range(0, len(self.rows), computed):
            positions = self.rows[lo : lo + computed]
            block = buffer[: len(positions)]
            options = {**self.options, "start": positions.start}
            posenc.table(len(positions), self.d_model, dtype=self.dtype.name, out=block, **options)
            for first in range(0, len(positions), handed):
                yield positions[first : first + handed], block[first : first + handed]


def _block_rows(width: int) -> int:
    """Rows per block for rows ``width`` values wide: _CHUNK_VALUES values, and at least one row."""
    return max(1, _CHUNK_VALUES // max(1, width))


def _table_grid(length: int, d_model: int, **options: Any) -> _Grid:
    """``posenc.table(length, d_model, **options)`` with its positions and column labels."""
    values = posenc.table(length, d_model, **options)
    start = options.get("start", 0)
    labels = column_labels(d_model, options.get("layout", "interleaved"), options.get("odd", "zero"))
    return _Grid("pos", range(start, start + length), labels, values)


def column_labels(d_model: int, layout: str, odd: str = "zero") -> list[str]:
    """Name each column by its index, function and frequency index, as ``layout`` places them.

    >>> column_labels(5, "sin_cos")
    ['0 sin ω0', '1 sin ω1', '2 cos ω0', '3 cos ω1', '4 zero']
    >>> column_labels(5, "sin_cos", "literal")  # computed for 6 columns, the last one dropped
    ['0 sin ω0', '1 sin ω1', '2 sin ω2', '3 cos ω0', '4 cos ω1']
    """
    if d_model % 2 and odd in ("literal", "drop"):
        return column_labels(d_model + 1, layout)[:-1]
    n = d_model // 2
    if layout == "interleaved":
        names = [f"{fn} ω{i}" for i in range(n) for fn in ("sin", "cos")]
    else:
        order = ("sin", "cos") if layout == "sin_cos" else ("cos", "sin")
        names = [f"{fn} ω{i}" for fn in order for i in range(n)]
    names += ["zero"] * (d_model % 2)
    return [f"{dim} {name}" for dim, name in enumerate(names)]


def _fixed(value: float, digits: int) -> str:
    """``value`` with ``digits`` decimals, without the sign of a value that rounds to zero.

    >>> _fixed(-0.00001, 4), _fixed(0.84147096, 4)
    ('0.0000', '0.8415')
    """
    text = f"{value:.{digits}f}"
    return text[1:] if text[0] == "-" and not text.strip("-0.") else text


def _row_blocks(grid: _Grid | _TableGrid) -> Iterator[tuple[Sequence[object], list[list[float]]]]:
    """The grid in blocks of rows: (row labels, the rows as float64 Python floats)."""
    for labels, block in grid.blocks():
        yield labels, np.asarray(block, dtype=np.float64).tolist()


def _text_lines(grid: _Grid | _TableGrid, digits: int, min_width: int = 0) -> Iterator[str]:
    """The grid as aligned text: a header line, then one line per row.

    Values are right-aligned, in columns at least ``min_width`` wide; row labels are right-aligned
    when they are positions (a range), left-aligned otherwise (words). The column widths come from a
    first pass over the blocks, the lines from a second: memory holds a block, not the grid.
    """
    align = str.rjust if isinstance(grid.rows, range) else str.ljust
    ends = (grid.rows[0], grid.rows[-1]) if isinstance(grid.rows, range) and grid.rows else grid.rows
    label_width = max([len(grid.corner), *(len(str(label)) for label in ends)])
    largest = np.zeros(len(grid.columns))
    signs = np.zeros(len(grid.columns), dtype=bool)
    for _, block in grid.blocks():
        values = np.asarray(block, dtype=np.float64)
        largest = np.maximum(largest, np.abs(values).max(axis=0, initial=0.0))
        signs |= (values < 0).any(axis=0)
    widths = [
        max(min_width, len(name), len(_fixed(top, digits)) + int(sign))
        for name, top, sign in zip(grid.columns, largest.tolist(), signs.tolist(), strict=True)
    ]
    cells = [name.rjust(width) for name, width in zip(grid.columns, widths, strict=True)]
    yield "  ".join([align(grid.corner, label_width), *cells])
    for labels, rows in _row_blocks(grid):
        for label, row in zip(labels, rows, strict=True):
            cells = [_fixed(v, digits).rjust(width) for v, width in zip(row, widths, strict=True)]
            yield "  ".join([align(str(label), label_width), *cells])


def _write_text(stream: IO[str], grid: _Grid | _TableGrid, digits: int) -> None:
    for line in _text_lines(grid, digits):
        stream.write(line + "\n")


def _value_formatter(digits: int | None) -> Callable[[float], str]:
    """Every digit (``repr``, which reads back exactly) or ``digits`` decimals."""
    return repr if digits is None else lambda value: _fixed(value, digits)


def _write_csv(stream: IO[str], grid: _Grid | _TableGrid, digits: int | None) -> None:
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow([grid.corner, *grid.columns])
    text = _value_formatter(digits)
    for labels, rows in _row_blocks(grid):
        writer.writerows([label, *map(text, row)] for label, row in zip(labels, rows, strict=True))


def _write_json(stream: IO[str], grid: _Grid | _TableGrid, meta: dict[str, Any], digits: int | None) -> None:
    """``{**meta, "positions": [...], "columns": [...], "values": [[...], ...]}`` and a newline, as
    ``json.dump(..., ensure_ascii=False)`` writes it, written a block of rows at a time. Values are float64
    Python floats (every digit: a float32 value reads back exactly), or rounded to ``digits`` decimals."""

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    stream.write("{" + "".join(f"{dumps(name)}: {dumps(value)}, " for name, value in meta.items()))
    stream.write('"positions": [')
    step = _block_rows(1)
    for lo in range(0, len(grid.rows), step):
        stream.write((", " if lo else "") + dumps(list(grid.rows[lo : lo + step]))[1:-1])
    stream.write(f'], "columns": {dumps(list(grid.columns))}, "values": [')
    separator = ""
    for _, rows in _row_blocks(grid):
        for row in rows:  # row by row: json's encoder holds a piece per value of what it encodes
            stream.write(
                separator + dumps(row if digits is None else [float(_fixed(v, digits)) for v in row])
            )
            separator = ", "
    stream.write("]}\n")


# --- posenc demo ----------------------------------------------------------------------------------


def _add_demo_command(commands: Any) -> None:
    sub = commands.add_parser(
        "demo",
        help="a guided walk-through of sinusoidal positional encoding",
        description="A guided walk-through of sinusoidal positional encoding: the formula, worked\n"
        "tables, adding the encoding to token embeddings, shift-invariant dot products,\n"
        "exactness at large positions, the figures (written into a folder) and the criteria\n"
        "report. Every number is computed by posenc as it is printed.",
        epilog=_DEMO_EPILOG,
        formatter_class=_HELP,
    )
    sub.add_argument(
        "--out",
        metavar="DIR",
        default=DEMO_FOLDER,
        help=f"folder for the figures, created if needed (default: ./{DEMO_FOLDER}/)",
    )
    sub.set_defaults(handler=_run_demo)


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

    def grid(self, grid: _Grid, digits: int = TEXT_DIGITS, min_width: int = 0) -> None:
        """Print a grid as the text format does, indented."""
        self.say(*("    " + line for line in _text_lines(grid, digits, min_width)))

    def command(self, command: str, grid: _Grid) -> None:
        """Print a shell command and the table it prints."""
        self.say("", f"    $ {command}")
        self.grid(grid)


def _run_demo(args: argparse.Namespace) -> None:
    """``posenc demo``: run every section in order."""
    demo = _Demo(sys.stdout, Path(args.out))
    for section in _DEMO_SECTIONS:
        section(demo)


def _demo_intro(demo: _Demo) -> None:
    title = "posenc demo: sinusoidal positional encoding, step by step"
    demo.say(title, "=" * len(title))
    demo.say(
        "Every number below is computed by posenc as it is printed; each table names the command",
        "that prints it on its own.",
    )


def _demo_formula(demo: _Demo) -> None:
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


def _demo_denominators(demo: _Demo, d_model: int, base: int) -> None:
    """Print base^(2i/d_model) = 1/ω_i for each i, the ω_i taken from posenc.frequencies."""
    omegas = posenc.frequencies(d_model, base=base).tolist()
    width = max(len(f"{1 / omega:g}") for omega in omegas)
    for i, omega in enumerate(omegas):
        power = f"{base}^({2 * i}/{d_model})"
        demo.say(f"    i = {i}:  {power} = {1 / omega:<{width}g}   so ω_{i} = {omega:g}")


def _demo_small_table(demo: _Demo) -> None:
    demo.heading("2. A worked table: d_model = 4, base = 10000, positions 0..4")
    demo.say("The denominators base^(2i/d_model) = 1/ω_i:")
    _demo_denominators(demo, 4, 10000)
    demo.say("so PE(pos) = [sin(pos), cos(pos), sin(pos/100), cos(pos/100)]:")
    demo.command("posenc table 5 4", _table_grid(5, 4))
    slow = posenc.table(2, 4, dtype="float64")[1, 2]
    demo.say(
        "",
        "Columns 0-1 (ω_0 = 1) change a lot from row to row; columns 2-3 (ω_1 = 0.01) creep:",
        f"PE(1, 2) = sin(0.01) = {slow:.8f}. Together the pairs give each position its own vector.",
    )


def _demo_base_100(demo: _Demo) -> None:
    demo.heading("3. The base sets the slowest waves: base = 100, d_model = 4, positions 0..3")
    _demo_denominators(demo, 4, 100)
    grid = _table_grid(4, 4, base=100)
    demo.command("posenc table 4 4 --base 100", grid)
    column = ", ".join(_fixed(v, TEXT_DIGITS) for v in grid.values[1:, 2].tolist())
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


def _demo_embedding(demo: _Demo) -> None:
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
        demo.grid(_Grid("pos token", rows, columns, values), min_width=7)
    demo.say(
        "",
        "In 'man bites dog' each word sits at another position and so enters the model as another",
        "vector: the word order is now visible.",
    )


def _demo_dot_products(demo: _Demo) -> None:
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
    demo.grid(_Grid("pos", range(6), [str(k) for k in range(6)], dots), digits=2)


def _demo_exactness(demo: _Demo) -> None:
    d_model, position = 512, 2**30
    demo.heading(f"6. Exact at any position: pos = 2**30 = {position}, d_model = {d_model}")
    exact = posenc.encode(position, d_model, dtype="float64")
    ours = posenc.encode(position, d_model).astype(np.float64)
    angles = np.float32(position) * posenc.frequencies(d_model).astype(np.float32)
    naive = np.empty(d_model, dtype=np.float32)
    naive[0::2], naive[1::2] = np.sin(angles), np.cos(angles)  # the usual float32 code
    naive_error = np.abs(naive.astype(np.float64) - exact)
    worst = int(np.argmax(naive_error))
    label = column_labels(d_model, "interleaved")[worst].split(" ", 1)[1]
    demo.say(
        "The usual float32 code rounds pos·ω_i to float32 before taking sin and cos. At this",
        f"position its largest error is {naive_error.max():.4f}, and "
        f"{(naive_error > 0.1).sum()} of {d_model} components are off by more than 0.1.",
        "posenc computes each value exactly and rounds it once: its float32 values are off by at",
        f"most {np.abs(ours - exact).max():.1e}, float32 rounding alone. The worst component:",
        "",
        f"    component {worst} ({label}):  exact {exact[worst]:.6f}   posenc float32 "
        f"{ours[worst]:.6f}   usual float32 code {naive[worst]:.6f}",
    )


# (file name, kind, options, what it shows): the demo's figures, in order
_DEMO_FIGURES: tuple[tuple[str, str, dict[str, Any], str], ...] = (
    ("heatmap.png", "heatmap", {}, "the table: positions down, dimensions across"),
    ("dot-product-8.png", "dot-product", {}, "PE(i)·PE(j) for 8 positions: constant diagonals"),
    ("dot-product-256.png", "dot-product", {"length": 256}, "the same for 256 positions"),
    ("sinusoids.png", "sinusoids", {}, "sin(k ω_i) against i for k = 0, 4, 8, 12"),
    ("waves.png", "waves", {}, "columns over positions: low columns fast, high slow"),
    ("similarity.png", "similarity", {}, "similarity against the offset, from 3 positions"),
    ("collisions.png", "collisions", {}, "float16/bfloat16: rounded once against computed in the dtype"),
)


def _demo_figures(demo: _Demo) -> None:
    demo.heading(f"7. Pictures: posenc plot, written into {demo.out}/")
    demo.say("Each figure is drawn by the command shown; in Python, posenc.plot.<kind>() returns it.", "")
    try:
        from . import plot
    except ImportError as error:
        demo.say(f"    (no figures: {error})")
        return
    demo.out.mkdir(parents=True, exist_ok=True)
    for index, (name, kind, options, what) in enumerate(_DEMO_FIGURES, 1):
        path = demo.out / name
        flags = "".join(f" --{key.replace('_', '-')} {value}" for key, value in options.items())
        demo.say(
            f"    [{index}/{len(_DEMO_FIGURES)}] {what}", f"          $ posenc plot {kind}{flags} -o {path}"
        )
        try:
            plot.save(plot.KINDS[kind](**options), path)
        except ImportError as error:  # bfloat16 without ml_dtypes
            demo.say(f"          (skipped: {error})")


def _demo_check(demo: _Demo) -> None:
    demo.heading("8. The criteria, measured: posenc check")
    demo.say(
        "A good positional encoding is unique for each position, keeps distances whatever the",
        "sequence length, generalises to longer sequences, is bounded and deterministic; and its dot",
        "products depend on the offset only. posenc check measures each for one setting:",
        "",
        "    $ posenc check",
    )
    demo.say(*("    " + line if line else "" for line in _report_lines(analysis.check(), width=92)))
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


def _demo_next(demo: _Demo) -> None:
    demo.heading("Next")
    demo.say(
        "posenc table --help   every option: base, shift, layout, start, dtype, csv/json/npy",
        "posenc check --help   the criteria, their figures and exit codes",
        "posenc plot --help    the figures and their options",
        "In Python:            posenc.table(length, d_model), posenc.encode(positions, d_model),",
        "                      posenc.analysis (dot products, shifts, uniqueness), posenc.plot",
    )


_DEMO_SECTIONS: tuple[Callable[[_Demo], None], ...] = (
    _demo_intro,
    _demo_formula,
    _demo_small_table,
    _demo_base_100,
    _demo_embedding,
    _demo_dot_products,
    _demo_exactness,
    _demo_figures,
    _demo_check,
    _demo_next,
)
