"""Progress of long work on stderr: ``posenc table: 42%  440,000 of 1,048,576 rows``."""

from __future__ import annotations

import sys
from typing import TextIO

from .errors import PROG

#: Values (length × d_model) from which a check or an npy table counts as long: it shows its progress.
LONG = 1 << 24


class Progress:
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
            self._show("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self._show(text + "\n")

    def close(self) -> None:
        """Clear the line a terminal shows."""
        if self.enabled and self.terminal and self.width:
            self._show("\r" + " " * self.width + "\r")

    def _show(self, text: str) -> None:
        """Write ``text``; a stderr closed or gone (``2>&1 | head``) stops the progress, not the work."""
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError, AttributeError):
            self.enabled = False
