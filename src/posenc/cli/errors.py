"""How ``posenc`` refuses a request: one line on stderr, ``posenc: error: <message>``, and exit code 2.

A usage error (argparse), a request the command line itself refuses (:class:`CliError`) and a value that
posenc's own validation refuses (ValueError, TypeError) all end the same way, with no traceback.
"""

from __future__ import annotations

import sys

PROG = "posenc"  # the command's name: it starts every error line, progress line and report heading


class CliError(Exception):
    """A request the command line itself refuses (posenc's own errors are ValueError/TypeError)."""


def fail(message: str) -> int:
    """Print the one-line error message on stderr; return the exit code 2."""
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    return 2


def describe(error: Exception) -> str:
    """The message of an error, with what an OSError failed on."""
    if isinstance(error, OSError) and error.strerror:
        target = error.filename if error.filename is not None else "standard output"
        return f"cannot write {target}: {error.strerror}"
    return str(error)
