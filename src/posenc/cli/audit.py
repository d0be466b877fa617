"""``posenc audit TARGET``: measure someone's positional encoding against the exact one, with
:func:`posenc.audit` (exit status 1 when it is not within the tolerance).

What it prints is the report and nothing else: with ``--json``, stdout is exactly one JSON document, the
report or an error object ``{"error": ..., "parameter": ...}``; every failure is one line on stderr and exit
status 2 (130 for Ctrl-C, 143 for SIGTERM).

A target that is code (``path/to/file.py:Name``) is audited in a child process (:func:`child_main`): the
target's writes to standard output, Python's or C's, go to this command's stderr there (its fd 1 is this
command's fd 2); the child hands its report to this process through a file of its own, and this process
prints it, and only then exits 0 or 1. A child that ends without a report (the target called ``os._exit``,
crashed or was killed) is exit status 2 with one line that says so: a CI job never reads a pass that no
audit gave. The child runs with no stdin, in a session of its own (Ctrl-C and SIGTERM reach this process,
which ends the child), and is killed when it outlives ``--timeout`` by :data:`GRACE_S` (a target that holds
the interpreter, where the child's own timeout cannot act). Other targets (a checkpoint file, a model folder)
run no code of theirs and are audited in this process, with fd 1 pointed at fd 2 while the audit runs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from .arguments import flags, integer, not_an_input, path_name, worded
from .errors import CliError, describe, is_open, printable

NAME = "audit"
HELP = "measure a positional encoding (a checkpoint, or file.py:Name) against the exact one"
DESCRIPTION = """\
Measure a positional encoding against posenc's exact values: the variant (identified when not
given), the largest error per band of positions in absolute terms and in ulps of its dtype, the
distinct rows, the first position past 1e-3 / 1e-2 / 0.1, NaN rows, and findings in plain words
(positions rounded to bfloat16, angles formed in float32, frequencies cast, a table stored in
bfloat16, sin and cos swapped, a length cliff, an offset of one position, a wrong shift), each
with its evidence and a fix."""
EPILOG = """\
TARGET is a checkpoint (.npy, .pt/.pth, .safetensors; --key names the tensor of a state dict),
a model folder holding a Hugging Face config.json (each positional component of its model, built
without its weights, its rotary run in the config's dtype or --dtype; posenc never runs code the
folder ships: a config with auto_map is refused), or
path/to/file.py:Name, a function of positions (NumPy, torch or JAX) or a class (a torch module that
adds encodings, holds a table or an inv_freq, built with --d-model when it takes arguments).

The target's own code runs in a child process, its prints sent to stderr: whatever it raises
(SystemExit included), a call that returns something other than an encoding, a process that ends
before its report (os._exit, a crash), or an audit (building a folder's model included) that takes
longer than --timeout SECONDS (default 600; 0: no limit) ends it with one line that names the
target, and exit status 2. With --json, stdout holds one JSON document: the report, or
{"error": ..., "parameter": ...}.

exit status: 0 when the error is within --tol (default: correctly rounded, i.e. equal to posenc's
values; 1 ulp in float64), 1 when not (FAIL) or when it cannot be judged (NOT JUDGED: no variant
identified, or last bits a base read from the rows cannot settle), 2 on bad input or a target that fails.

examples:
  posenc audit pe.npy
  posenc audit model.safetensors --key model.encoder.embed_positions.weight
  posenc audit path/to/llama-3.1-8b/          every positional component of its model
  posenc audit my_model.py:PositionalEncoding --d-model 512 --positions 0:65536 --html audit.html
  posenc audit my_model.py:encode --d-model 512 --tol 1e-4 --preset paper
"""


#: Seconds an audit may take by default (the target's code included): generous, yet a target that never
#: returns does not hang a script or a CI job for ever.
DEFAULT_TIMEOUT = 600.0
#: Seconds a child process may outlive --timeout (it starts, imports, then reports its own timeout) before
#: it is killed: its target then held the interpreter, so that its own timer could not act.
GRACE_S = 30.0
#: The library's parameters, as the command's options name them.
_HINTS = ("d_model", "positions", "dtype", "preset", "key", "tol", "samples", "timeout")
_FLAGS = flags(*_HINTS)
#: The longest report a child may hand back (bytes).
_MAX_RECORD = 1 << 30


@dataclasses.dataclass(frozen=True)
class _Refused:
    """An option's value that its type refused: reported by :func:`run` (as JSON with --json), not by
    argparse, which knows nothing of --json."""

    flag: str
    message: str


def _deferred(convert: Callable[[str], Any], flag: str) -> Callable[[str], Any]:
    """argparse type: ``convert``, whose refusal becomes a :class:`_Refused` that :func:`run` reports."""

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except argparse.ArgumentTypeError as error:
            return _Refused(flag, str(error))

    parse.__name__ = convert.__name__
    return parse


def _seconds(text: str) -> float:
    """argparse type of --timeout: seconds >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0 (0: no limit); got {text!r}")
    return value


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc audit TARGET [options]``."""
    sub.add_argument(
        "target", metavar="TARGET", help="a checkpoint file, a model folder, or path/to/file.py:Name"
    )
    sub.add_argument(
        "--d-model",
        type=_deferred(integer, "--d-model"),
        help="the width, for a class or function that needs it",
    )
    sub.add_argument(
        "--positions", metavar="A:B", help="audit positions A..B-1 (default: all it holds, or 2**31)"
    )
    sub.add_argument(
        "--dtype",
        help="judge the values in this dtype (default: the target's own; a model folder: the dtype its "
        "rotary runs in, default its config's)",
    )
    sub.add_argument("--preset", help="the variant it claims to be (default: identified)")
    sub.add_argument("--key", help="the tensor's name inside a state dict or safetensors file")
    sub.add_argument(
        "--tol", help="the largest error allowed: 1e-6 (absolute) or 2ulp (default: correctly rounded)"
    )
    sub.add_argument(
        "--samples",
        type=_deferred(integer, "--samples"),
        default=4096,
        help="positions measured per band (default 4096; 16 .. 16384)",
    )
    sub.add_argument(
        "--timeout",
        type=_deferred(_seconds, "--timeout"),
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up when the audit takes longer (default {DEFAULT_TIMEOUT:g}; 0: no limit)",
    )
    sub.add_argument(
        "--html", type=path_name, metavar="FILE", help="also write the report as one self-contained HTML file"
    )
    sub.add_argument("--json", action="store_true", help="print the report as JSON")


class _Failure(CliError):
    """A failure of the audit, in the command's words, with the option or config field it concerns."""

    def __init__(self, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


def run(args: argparse.Namespace) -> int:
    """``posenc audit``: print the report; 0 when within the tolerance, else 1 (module docstring)."""
    try:
        for value in (args.d_model, args.samples, args.timeout):
            if isinstance(value, _Refused):
                raise _Failure(f"argument {value.flag}: {value.message}", value.flag)
        from ..auditor.targets import check_code_file, is_code

        runs_code = is_code(args.target)
        read = str(args.target).rpartition(":")[0] if runs_code else str(args.target)
        not_an_input(args.html, "--html", read, folder=read)
        if runs_code:
            check_code_file(args.target)  # a missing file, a FIFO: said here, without starting a child
            return _relay(_in_a_child(args), args)
        with _stdout_to_stderr(), _transformers_quiet(args.target):
            code, text = _audited(args)
        sys.stdout.write(printable(text))  # names read from the target's files: no terminal controls
        return code
    except (CliError, ValueError, TypeError, ImportError, MemoryError, OSError) as error:
        _json_error(args, error)
        _end_with(2)
        if isinstance(error, (MemoryError, OSError)):
            raise  # main says what each of these is
        raise _Failure(_flagged(error), getattr(error, "parameter", None)) from None
    except BaseException as error:  # Ctrl-C (130), SIGTERM (143): main reports it, with that exit status
        signum = getattr(error, "signum", None)
        _json_error(args, error)
        _end_with(
            130 if isinstance(error, KeyboardInterrupt) else 128 + signum if isinstance(signum, int) else 2
        )
        raise


def _flagged(error: BaseException) -> str:
    """The library's message with its parameters written as the command's options."""
    return worded(error, _FLAGS)


def _audited(args: argparse.Namespace) -> tuple[int, str]:
    """The audit of ``args.target`` in this process: (exit code, what to print); the HTML file is written
    first, so that a failure to write it prints no report."""
    from ..auditor import audit

    hints = {name: getattr(args, name) for name in _HINTS}
    hints["timeout"] = hints["timeout"] or None  # 0: no limit
    report = audit(args.target, **hints)
    if args.html:
        report.to_html(args.html)
    if args.json:
        text = json.dumps(_plain(report.as_dict()), allow_nan=False, default=str) + "\n"
    else:
        text = report.as_text() + "\n"
    return (0 if report.passed else 1), text


def _plain(value: Any) -> Any:
    """``value`` with what JSON cannot hold made plain: NaN and infinities as null, NumPy numbers as
    Python's."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if not isinstance(value, (bool, int, str)) and callable(getattr(value, "tolist", None)):
        return _plain(value.tolist())  # a NumPy number or array: Python's
    return value


def _json_error(args: argparse.Namespace, error: BaseException) -> None:
    """With --json: the error as the one JSON document on stdout."""
    if not getattr(args, "json", False):
        return
    if isinstance(error, KeyboardInterrupt):
        message, parameter = "interrupted", None
    elif isinstance(getattr(error, "signum", None), int):
        message, parameter = f"terminated ({signal.Signals(error.signum).name})", None  # type: ignore[attr-defined]
    elif isinstance(error, (OSError, MemoryError)):
        message, parameter = describe(error) if isinstance(error, OSError) else "out of memory", None
    else:
        message, parameter = " ".join(_flagged(error).split()), getattr(error, "parameter", None)
    with contextlib.suppress(Exception):  # a stdout that cannot take it: the error line on stderr remains
        sys.stdout.write(json.dumps({"error": message, "parameter": parameter}) + "\n")
        sys.stdout.flush()


@contextlib.contextmanager
def _transformers_quiet(target: str) -> Iterator[None]:
    """While a model folder is audited: transformers' own log at errors only (its warnings on a config it
    then fails to build — a pad id beyond the vocabulary — would be a second line beside posenc's one);
    its level put back after. This command's process only: the library changes nothing global."""
    if not os.path.isdir(target):
        yield
        return
    logging = sys.modules.get("transformers.utils.logging")
    if logging is None:  # not imported yet (a folder refused before it is, costs no import): read at import
        saved = os.environ.get("TRANSFORMERS_VERBOSITY")
        os.environ["TRANSFORMERS_VERBOSITY"] = "error"
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("TRANSFORMERS_VERBOSITY", None)
            else:
                os.environ["TRANSFORMERS_VERBOSITY"] = saved
        return
    level = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(level)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """While the audit runs in this process: descriptor 1 is descriptor 2 (what anything writes to standard
    output, C code included, goes to stderr); restored after."""
    try:
        sys.stdout.flush()
        saved = os.dup(1)
    except (OSError, ValueError, AttributeError):  # no fd 1 to divert: nothing to restore either
        yield
        return
    try:
        os.dup2(2, 1)
    except OSError:
        os.close(saved)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


# --- a target that is code: audited in a child process --------------------------------------------------

#: The child's command: the parent's import path, then :func:`child_main`.
_CHILD = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from posenc.cli.audit import child_main; child_main(sys.argv[2:])"
)


def _in_a_child(args: argparse.Namespace) -> tuple[dict[str, Any] | None, int]:
    """Audit ``args.target`` in a child process: (its record, or None when it handed none; its exit
    status)."""
    names = ("target", "json", "html", *_HINTS)
    settings = {name: getattr(args, name) for name in names}
    with _report_file() as channel:
        fd = channel.fileno()
        command = [sys.executable, "-c", _CHILD, json.dumps(sys.path), str(fd), json.dumps(settings)]
        output = 2 if is_open(2) else subprocess.DEVNULL
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=output, pass_fds=(fd,), start_new_session=True
            )
        except OSError as error:
            python = sys.executable or "Python"
            why = f"cannot start {python} to audit {args.target}: {error.strerror or error}"
            raise _Failure(why) from None
        try:
            status = _wait(process, args)
        finally:
            if process.poll() is None:  # Ctrl-C, SIGTERM, a child past its time: never left running
                process.kill()
                process.wait()
        channel.seek(0)
        raw = channel.read(_MAX_RECORD)
    try:
        record = json.loads(raw)
    except ValueError:  # empty or cut short: no report
        return None, status
    ok = isinstance(record, dict) and isinstance(record.get("code"), int)
    return (record if ok else None), status


@contextlib.contextmanager
def _report_file() -> Iterator[Any]:
    """An unnamed temporary file (gone when closed) for the child's record."""
    try:
        channel = tempfile.TemporaryFile()  # noqa: SIM115  (closed by the with below)
    except OSError as error:
        raise _Failure(f"cannot create a temporary file for the audit's report: {describe(error)}") from None
    with channel:
        yield channel


def _wait(process: subprocess.Popen[bytes], args: argparse.Namespace) -> int:
    """The child's exit status; past ``--timeout`` + :data:`GRACE_S` it is killed, and that is said."""
    limit = (args.timeout + GRACE_S) if args.timeout else None
    try:
        return process.wait(limit)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise _Failure(
            f"target {args.target} was still running after the timeout of {args.timeout:g} s (it held the "
            "interpreter, so posenc ended its process); give it more time with --timeout, or ask for fewer "
            "--positions or --samples",
            "--timeout",
        ) from None


def _relay(outcome: tuple[dict[str, Any] | None, int], args: argparse.Namespace) -> int:
    """Print what the child audited, or raise what it failed with."""
    record, status = outcome
    if record is None:
        how = f"signal {signal.Signals(-status).name}" if status < 0 else f"exit status {status}"
        raise _Failure(
            f"target {args.target} ended the process before a report ({how}: os._exit, a crash or a kill "
            "in its code); no verdict without a report: find what ends it"
        )
    if record.get("stopped") == "interrupted":
        raise KeyboardInterrupt
    if "error" in record:
        raise _Failure(str(record["error"]), record.get("parameter"))
    sys.stdout.write(printable(str(record.get("output", ""))))
    return int(record["code"])


def child_main(argv: list[str]) -> None:
    """The child of :func:`_in_a_child`: ``argv`` is the report file's descriptor and the settings (JSON).
    Its standard output is the parent's stderr; it writes one record (JSON) to the report file, then ends
    at once (``os._exit``: a target's thread stuck in native code cannot abort it while Python finalizes)."""
    fd = int(argv[0])
    os.set_inheritable(fd, False)  # processes the target starts do not get it
    args = argparse.Namespace(**json.loads(argv[1]))
    try:
        code, text = _audited(args)
        record: dict[str, Any] = {"code": code, "output": text}
    except (ValueError, TypeError, ImportError, CliError) as error:
        record = {"code": 2, "error": _flagged(error), "parameter": getattr(error, "parameter", None)}
    except OSError as error:
        record = {"code": 2, "error": describe(error), "parameter": None}
    except MemoryError as error:
        record = {
            "code": 2,
            "error": f"out of memory ({error or 'an allocation failed'}); ask for less: fewer positions or "
            "a smaller width",
            "parameter": None,
        }
    except KeyboardInterrupt:  # Ctrl-C reaches the parent; here, a signal the target sent its own process
        record = {"code": 130, "stopped": "interrupted"}
    except BaseException as error:  # anything else that escaped the audit: said, never a traceback
        record = {"code": 2, "error": f"the audit of {args.target} failed: {type(error).__name__}: {error}"}
    data = json.dumps(record, allow_nan=False, default=str).encode()
    with contextlib.suppress(OSError):
        while data:
            data = data[os.write(fd, data) :]
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(record["code"])


def _end_with(code: int) -> None:
    """After an audit given up on (--timeout, Ctrl-C) whose thread still runs the target: exit with
    ``code`` at once when the interpreter ends, not through a finalization that could abort the process."""
    from ..auditor import guard

    if guard.still_running():
        guard.exit_at_end_if_still_running(code)
