"""The ``posenc`` command: ``posenc table`` prints or saves a table, ``posenc rope`` a model's rotary cos/sin
table, ``posenc check`` measures the criteria of a good encoding, ``posenc compare`` sets the usual code
against posenc far out, ``posenc plot`` draws one, ``posenc identify`` names the variant of a stored table,
``posenc audit`` measures any encoding against the exact one, ``posenc explore`` shows it in the browser,
``posenc demo`` explains it all.

Each subcommand is a module of this package that declares its ``NAME``, its help texts (``HELP``,
``DESCRIPTION``, ``EPILOG``) and its arguments (``add_arguments``), and whose ``run`` calls the library and
prints what it returns: :mod:`~posenc.cli.table` (with the text, csv and json writers of
:mod:`~posenc.cli.formats`), :mod:`~posenc.cli.rope`, :mod:`~posenc.cli.check`,
:mod:`~posenc.cli.compare`, :mod:`~posenc.cli.plot`,
:mod:`~posenc.cli.identify`, :mod:`~posenc.cli.audit`, :mod:`~posenc.cli.explore`,
:mod:`~posenc.cli.demo`. :func:`build_parser` makes the parser of each, in one place; the options several
commands share are in :mod:`~posenc.cli.arguments`.

Every error (a usage error, or a value that posenc's own validation refuses) is one line on
stderr, ``posenc: error: <message>``, with exit code 2 and no traceback; ``--help`` and
``--version`` exit 0. ``posenc check`` exits 1 when a criterion fails, ``posenc audit`` when the target is not
within its tolerance. Built on argparse: the standard
library keeps NumPy the only dependency and the start-up short.

Every file is written atomically (:mod:`posenc.atomic`): into a temporary file beside it, renamed over it
only once whole, so that a failure (``posenc: error: cannot write pe.csv: File too large``), Ctrl-C
(``posenc: interrupted``, exit 130) or SIGTERM (``posenc: terminated (SIGTERM)``, exit 143) leaves the old
file as it was. A reader of stdout that goes away (``| head``) ends posenc quietly with exit 1.

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
import errno
import json
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import posenc

from ..layouts import column_names as column_labels
from . import audit, check, compare, demo, explore, identify, plot, rope, table
from .arguments import FORMATS, HELP_FORMAT, MAX_DIGITS, Parser
from .errors import PROG, CliError, UsageError, describe, fail, is_open, stopped
from .plot import PLOT_KINDS, PLOT_SUFFIXES

__all__ = [
    "FORMATS",
    "MAX_DIGITS",
    "PLOT_KINDS",
    "PLOT_SUFFIXES",
    "PROG",
    "CliError",
    "build_parser",
    "column_labels",
    "main",
]

_EPILOG = """\
examples:
  posenc demo                             a guided walk-through, computed as you watch
  posenc identify pe.npy                  which variant is this stored table?
  posenc audit model.py:PositionalEncoding --d-model 512   how far is it from the exact encoding?
  posenc table 5 4                        positions 0..4, d_model = 4 (the paper's formula)
  posenc table 4 4 --base 100             the same formula with base 100
  posenc table 1024 512 --format npy --output pe.npy
  posenc rope config.json --positions 0:8 a Hugging Face model's exact rotary cos/sin
  posenc check --dtype bfloat16 --length 100000   is the encoding still unique, bounded, shift invariant?
  posenc compare --d-model 4096 --base 500000     the usual code's error at 8k .. 1M positions, and posenc's
  posenc plot dot-product -o dots.png             the dot-product map: constant along each diagonal
  posenc explore                                  the same, interactive, in the browser (127.0.0.1)
  posenc demo --out figures                       the walk-through, its figures written into figures/

run 'posenc COMMAND --help' for the options of each command.
"""


def main(argv: list[str] | None = None) -> int:
    """Run ``posenc`` with ``argv`` (default: ``sys.argv[1:]``) and return the exit code.

    0 on success, 2 on any bad input (one ``posenc: error:`` line on stderr), 1 when the reader of
    stdout went away (``posenc table 100000 4 | head``: quietly) or when ``posenc check`` finds a criterion
    failing. Every file is written atomically (:mod:`posenc.atomic`): a failure, Ctrl-C or a signal leaves
    the old file as it was and no temporary file. Ctrl-C prints ``posenc: interrupted`` and exits 130;
    SIGTERM (SIGHUP) prints ``posenc: terminated (SIGTERM)`` and exits 143 (129), 128 + the signal's
    number as a shell reports it. A file size limit (``ulimit -f``) or a full disk is one error line naming
    the file, exit 2: SIGXFSZ is ignored while posenc runs, so that the write fails instead of killing the
    process. A closed stdout (``posenc table 10 4 >&-``) is one error line and exit 2 when something was to
    be printed there.
    """
    parser = build_parser()
    _tolerate_narrow_stdout()  # before parsing: the help texts use 'ω' too
    with _handling_signals(), _closed_stdout_refused():
        try:
            args = parser.parse_args(argv)
            code = args.handler(args) or 0
            sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        except SystemExit as stop:  # from argparse: --help, --version, usage errors
            if isinstance(stop, UsageError) and _json_wanted(sys.argv[1:] if argv is None else argv):
                sys.stdout.write(
                    json.dumps({"error": " ".join(stop.message.split()), "parameter": None}) + "\n"
                )
            return stop.code if isinstance(stop.code, int) else int(stop.code is not None)
        except BrokenPipeError:
            _silence_stdout()
            return 1
        except KeyboardInterrupt:
            _flush_or_silence_stdout()
            return stopped("interrupted", 130)
        except Terminated as signalled:
            _flush_or_silence_stdout()
            return stopped(f"terminated ({signalled.name})", 128 + signalled.signum)
        except OSError as error:
            if error.filename is None:  # a write to stdout failed: Python's final flush would fail again
                _silence_stdout()
            return fail(describe(error))
        except (CliError, ValueError, TypeError, ImportError) as error:
            return fail(describe(error))
        except MemoryError as error:  # a request whose size nothing checked before allocating it
            return fail(
                f"out of memory ({error or 'an allocation failed'}); ask for less: fewer positions or a "
                "smaller width"
            )
    return code


def _json_wanted(argv: list[str]) -> bool:
    """Whether the command line asks ``posenc audit`` for JSON: its output is then one JSON document, an
    error object for a usage error too."""
    words = [str(word) for word in argv]
    return bool(words) and words[0] == "audit" and "--json" in words


class Terminated(BaseException):
    """Raised by the handler of SIGTERM and SIGHUP while :func:`main` runs: like KeyboardInterrupt, it
    unwinds every ``with`` (the atomic output removes its temporary file) before ``main`` returns."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def _handling_signals() -> Iterator[None]:
    """While :func:`main` runs: SIGTERM and SIGHUP raise :class:`Terminated` (unless ignored, as under
    nohup), SIGXFSZ is ignored (a write past ``ulimit -f`` raises OSError EFBIG instead of killing the
    process); the handlers are restored after (``main`` may run inside another program). Outside the main
    thread nothing changes."""
    previous: dict[int, Any] = {}
    try:
        for name, handler in _SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None or (handler is _terminate and signal.getsignal(signum) == signal.SIG_IGN):
                continue  # not on this system; or ignored on purpose (nohup): left as it is
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # signal only works in the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)


_SIGNALS = (("SIGTERM", _terminate), ("SIGHUP", _terminate), ("SIGXFSZ", signal.SIG_IGN))


class _ClosedStdout:
    """What ``sys.stdout`` is while :func:`main` runs with no stdout at all (``posenc table 10 4 >&-``,
    where Python sets it to None): a write is the OSError a closed descriptor gives, a flush does nothing."""

    encoding = "utf-8"

    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, os.strerror(errno.EBADF))

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _closed_stdout_refused() -> Iterator[None]:
    """With no stdout: descriptor 1 is pointed at /dev/null, so that no file opened later takes its number,
    and ``sys.stdout`` is a :class:`_ClosedStdout` until ``main`` returns."""
    if sys.stdout is not None:
        yield
        return
    if not is_open(1):
        with contextlib.suppress(OSError):
            descriptor = os.open(os.devnull, os.O_WRONLY)
            if descriptor != 1:
                os.close(descriptor)
    sys.stdout = _ClosedStdout()  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout = None  # type: ignore[assignment]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser: ``posenc [--version] {table,rope,check,compare,plot,identify,audit,explore,demo}
    ...``."""
    parser = Parser(
        prog=PROG,
        description="Exact sinusoidal positional encodings: print, save, check, draw and explain them.",
        epilog=_EPILOG,
        formatter_class=HELP_FORMAT,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {posenc.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in (
        table,
        rope,
        check,
        compare,
        plot,
        identify,
        audit,
        explore,
        demo,
    ):  # in the order --help lists them
        sub = commands.add_parser(
            command.NAME,
            help=command.HELP,
            description=command.DESCRIPTION,
            epilog=command.EPILOG,
            formatter_class=HELP_FORMAT,
        )
        command.add_arguments(sub)
        sub.set_defaults(handler=command.run)
        parser.commands[command.NAME] = sub  # an unknown option is looked up among this command's
    return parser


def _tolerate_narrow_stdout() -> None:
    """On a stdout that cannot encode 'ω' (a non-UTF-8 locale), print ``\\u03c9``, do not fail."""
    encoding = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    if encoding != "utf8" and hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")


def _flush_or_silence_stdout() -> None:
    """Flush what stdout holds; if that fails (its reader went away too), silence it."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        _silence_stdout()


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that Python's final flush stays quiet."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
