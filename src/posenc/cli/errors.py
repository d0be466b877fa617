"""How ``posenc`` refuses a request: one line on stderr, ``posenc: error: <message>``, and exit code 2.

A usage error (argparse), a request the command line itself refuses (:class:`CliError`) and a value that
posenc's own validation refuses (ValueError, TypeError) all end the same way, with no traceback, and so
does a file that cannot be written (an OSError, which names it). Ctrl-C and SIGTERM end in one line too
(:func:`stopped`): ``posenc: interrupted``, ``posenc: terminated (SIGTERM)``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys

PROG = "posenc"  # the command's name: it starts every error line, progress line and report heading


class CliError(Exception):
    """A request the command line itself refuses (posenc's own errors are ValueError/TypeError)."""


class UsageError(SystemExit):
    """A usage error of the command line (argparse's): exit 2 once its line is printed; ``message`` is that
    line's text, for a command whose output must stay one document (``posenc audit --json``)."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message


def fail(message: str) -> int:
    """Print the one-line error message on stderr; return the exit code 2."""
    _say(f"{PROG}: error: {' '.join(printable(message).split())}")
    return 2


def stopped(why: str, code: int) -> int:
    """Print ``posenc: <why>`` on stderr (Ctrl-C: ``interrupted``); return ``code`` (130 for Ctrl-C)."""
    _say(f"{PROG}: {printable(why)}")
    return code


#: The control characters a terminal acts on (C0 but newline and tab, DEL, C1): ESC sequences in a file's
#: tensor names or config keys would set the window's title, erase lines or print a forged verdict.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))}


def printable(text: str) -> str:
    r"""``text`` with every control character a terminal acts on written as ``\xNN`` (newlines and tabs
    kept): what posenc prints of names read from files cannot drive the terminal.

    >>> print(printable("pos_a\x1b[2K\x1b[32mPASS\tall good"))
    pos_a\x1b[2K\x1b[32mPASS	all good
    """
    return text.translate(_CONTROLS)


def _say(line: str) -> None:
    """One line on stderr, if there is one to print on (a closed stderr is not an error of its own)."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def describe(error: Exception) -> str:
    """The message of an error, with the file an OSError failed on (an OSError naming no file failed on
    stdout: posenc names the file of every other write, see :mod:`posenc.atomic`).

    >>> import errno
    >>> describe(OSError(errno.EFBIG, "File too large", "out.csv"))
    'cannot write out.csv: File too large'
    >>> describe(OSError(errno.EBADF, "Bad file descriptor"))
    'cannot write standard output: Bad file descriptor (it is closed)'
    """
    if isinstance(error, OSError) and error.strerror:
        if error.filename is not None:
            return f"cannot write {error.filename}: {error.strerror}"
        closed = " (it is closed)" if error.errno == errno.EBADF else ""
        return f"cannot write standard output: {error.strerror}{closed}"
    return str(error)


def is_open(descriptor: int) -> bool:
    """Whether the file descriptor ``descriptor`` (1: stdout) is open."""
    try:
        os.fstat(descriptor)
    except OSError:
        return False
    return True
