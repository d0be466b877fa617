"""The argument parser's pieces shared by the subcommands: the parser class, the argument types, the
options that name a variant of the encoding (Vaswani et al. 2017 §3.5 by default) and the output options of
the commands that print tables.

Built on argparse: the standard library keeps NumPy the only dependency and the start-up short.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
from collections.abc import Iterable
from typing import Any, NoReturn

from .. import defaults, validation
from ..errors import reworded
from ..layouts import LAYOUTS, ODD_RULES
from .errors import UsageError, fail

#: Every help text keeps its own line breaks (the epilogs are laid out by hand).
HELP_FORMAT = argparse.RawDescriptionHelpFormatter


def _whole(value: float) -> int | float:
    """A whole number as an int (``10000.0`` -> ``10000``), anything else as it is."""
    return int(value) if float(value).is_integer() else value


#: The paper's options (:mod:`posenc.defaults`) as the command line passes and prints them: the base as
#: the integer 10000, so that help texts and the json of ``posenc table`` and ``posenc check`` show 10000.
PAPER: dict[str, Any] = {**defaults.OPTIONS, "base": _whole(defaults.BASE)}
DEFAULT_D_MODEL = 512  # the paper's width
DEFAULT_LENGTH = 2048  # positions studied by posenc check
DEFAULT_DTYPE = "float32"
#: The output formats of ``posenc table`` and ``posenc rope``.
FORMATS = ("text", "csv", "json", "npy")
#: The most decimals --digits prints: 17 show a float64 value near 1 to its last digit (float32 needs 9);
#: without --digits, csv and json print every digit of every value.
MAX_DIGITS = 17


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, ``posenc: error: ...``, and exit 2, and which takes
    ``-1e4``, ``-inf`` and ``nan`` as values (``--base -inf`` then gets posenc's message, not argparse's
    "expected one argument").

    A mistyped option, subcommand or choice gets the nearest names this parser (or the subcommand's) takes
    (:func:`difflib.get_close_matches` over its own option strings and choices):
    ``posenc table: unrecognized option --layuot (did you mean --layout?)``,
    ``argument COMMAND: invalid choice: 'tabel' (did you mean 'table'? choose from ...)``. ``commands``
    maps each subcommand's name to its parser (filled by whoever adds them), so that an unrecognized
    option is looked up among the options of the subcommand it was given to.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|inf(inity)?|nan)$", re.IGNORECASE
        )
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str) -> NoReturn:
        missing = re.fullmatch(r"argument (--[\w-]+).*: expected one argument", message)
        if missing:  # argparse takes a value such as "-3:2" for an option
            message += f" (if its value starts with '-', join the two with '=': {missing.group(1)}=-VALUE)"
        fail(message)
        raise UsageError(message)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(unrecognized(self.commands.get(getattr(parsed, "command", None) or "", self), extras))
        return parsed

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check that ``value`` is one of ``action.choices``, with the nearest ones suggested."""
        choices = action.choices
        if choices is None or value in choices:
            return
        names = [str(choice) for choice in choices]
        close = difflib.get_close_matches(str(value), names, n=3)
        hint = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        listed = ", ".join(map(repr, names))
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({hint}choose from {listed})")


def not_an_input(output: str | None, flag: str, *inputs: str | None, folder: str | None = None) -> None:
    """Refuse (ValueError) an output file that is one of the command's own inputs (written over, the input
    would be lost: ``posenc rope cfg.json -o cfg.json``), or, with ``folder`` (a model folder read), a file
    in that folder other than an HTML page."""
    if output is None or not os.path.isfile(output):
        return
    for given in inputs:
        if given is not None and os.path.isfile(given) and os.path.samefile(output, given):
            raise ValueError(f"{flag} {output} is the input it would overwrite; name another file")
    if folder is not None and os.path.isdir(folder):
        inside = os.path.samefile(os.path.dirname(os.path.abspath(output)), folder)
        if inside and not output.lower().endswith((".html", ".htm")):
            raise ValueError(
                f"{flag} {output} is a file of the folder audited, which it would overwrite; name another one"
            )


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """The message for arguments ``parser`` does not take: each unknown option with the nearest options of
    ``parser`` (``posenc table: unrecognized option --layuot (did you mean --layout?)``), or the stray
    arguments when none is an option.

    >>> sub = Parser(prog="posenc table")
    >>> _ = sub.add_argument("--layout")
    >>> unrecognized(sub, ["--layuot", "sin_cos"])
    'posenc table: unrecognized option --layuot (did you mean --layout?)'
    """
    matcher = getattr(parser, "_negative_number_matcher", None)
    flags = [
        text
        for text in extras
        if text.startswith("-") and text != "-" and not (matcher is not None and matcher.match(text))
    ]
    if not flags:
        return f"{parser.prog}: unrecognized arguments: {' '.join(extras)}"
    known = [flag for action in parser._actions for flag in action.option_strings]
    described = []
    for flag in flags:
        name = flag.partition("=")[0] if flag.startswith("--") else flag
        close = difflib.get_close_matches(name, known, n=2)
        described.append(f"{name} (did you mean {' or '.join(close)}?)" if close else name)
    plural = "s" if len(described) > 1 else ""
    return f"{parser.prog}: unrecognized option{plural} {', '.join(described)}"


def flags(*names: str, **renamed: str) -> dict[str, str]:
    """The library's parameters ``names`` as the command's options (``d_model``: ``--d-model``), and those
    the command names otherwise (``cfg=""``: a positional argument)."""
    return {name: "--" + name.replace("_", "-") for name in names} | renamed


def worded(error: BaseException, names: dict[str, str]) -> str:
    """The message of ``error`` in the command's words: its parameters written as ``names`` writes them
    (:meth:`posenc.errors.PosencError.worded`; the error's own parameter is read from it, not from the
    text)."""
    return reworded(str(error), names, getattr(error, "parameter", None))


def as_flags(text: str, *names: str) -> str:
    """``text`` of the library (a report: ``compute="dtype"``) with the parameters ``names`` written as the
    command's options (``--compute dtype``)."""
    return reworded(text, flags(*names))


def one_of(names: Iterable[str]) -> str:
    """The metavar that lists the accepted values: ``{a,b,c}``."""
    return "{" + ",".join(names) + "}"


# --- argument types -------------------------------------------------------------------------------


def path_name(text: str) -> str:
    """argparse type: a file or folder name, refused when empty (an empty name was "cannot write : ...", or
    the current folder).

    >>> path_name("out.csv")
    'out.csv'
    """
    if not text:
        raise argparse.ArgumentTypeError("an empty name; name a file or folder")
    return text


def integer(text: str) -> int:
    """argparse type: an integer written as one; ``4.0`` is refused with a hint.

    >>> integer("-3")
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


def number(text: str) -> int | float:
    """argparse type: an int when the text is an integer, else a float (``nan``, ``1e4`` included).

    >>> number("100"), number("1e4")
    (100, 10000.0)
    """
    with contextlib.suppress(ValueError):
        return int(text)
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None


# --- options shared by check and plot -------------------------------------------------------------


def add_variant_options(sub: argparse.ArgumentParser, *, default: bool) -> None:
    """--d-model, --length, --base, --shift, --scale, --layout, --odd and --dtype; ``default=False`` leaves
    each None (so that a command can tell which ones were given)."""

    def value(given: Any) -> Any:
        return given if default else None

    def shown(given: Any) -> str:
        return f" (default: {given})" if default else ""

    sub.add_argument(
        "--d-model",
        type=integer,
        default=value(DEFAULT_D_MODEL),
        help="width of each encoding, >= 2" + shown(DEFAULT_D_MODEL),
    )
    sub.add_argument(
        "--length",
        type=integer,
        default=value(DEFAULT_LENGTH),
        help="number of positions" + shown(DEFAULT_LENGTH),
    )
    sub.add_argument(
        "--base",
        type=number,
        default=value(PAPER["base"]),
        help=f"frequency base > 1, the paper's {PAPER['base']}" + shown(PAPER["base"]),
    )
    sub.add_argument(
        "--shift",
        type=number,
        default=value(PAPER["shift"]),
        help="0: the paper; 1: tensor2tensor and fairseq" + shown(PAPER["shift"]),
    )
    sub.add_argument(
        "--scale",
        type=number,
        default=value(PAPER["scale"]),
        help="multiplies every frequency" + shown(f"{PAPER['scale']:g}"),
    )
    sub.add_argument(
        "--layout",
        default=value(PAPER["layout"]),
        metavar=one_of(LAYOUTS),
        help="where the sines and cosines go" + shown(PAPER["layout"]),
    )
    sub.add_argument(
        "--odd",
        default=value(PAPER["odd"]),
        metavar=one_of(ODD_RULES),
        help="the rule for an odd D_MODEL" + shown(PAPER["odd"]),
    )
    sub.add_argument(
        "--dtype",
        default=value(DEFAULT_DTYPE),
        metavar=one_of(validation.DTYPES),
        help="the dtype studied; values are correctly rounded to it (float64: within 1 ulp)"
        + shown(DEFAULT_DTYPE),
    )


# --- output options shared by table and rope ------------------------------------------------------


def add_output_options(sub: argparse.ArgumentParser, *, digits_help: str) -> None:
    """--dtype, --digits, --format and --output, as ``posenc table`` and ``posenc rope`` take them."""
    sub.add_argument(
        "--dtype",
        default=DEFAULT_DTYPE,
        metavar=one_of(validation.DTYPES),
        help=(
            "output dtype; values are correctly rounded to it, float64 within 1 ulp"
            f" (default: {DEFAULT_DTYPE})"
        ),
    )
    sub.add_argument("--digits", type=integer, help=digits_help)
    sub.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    sub.add_argument("--output", "-o", type=path_name, metavar="FILE", help="write to FILE instead of stdout")
