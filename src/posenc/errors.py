"""The errors posenc raises for bad input: one family, :class:`PosencError`, whose members are also the
``ValueError`` (:class:`PosencValueError`) or ``TypeError`` (:class:`PosencTypeError`) Python code expects.

Each carries its message (what is wrong, the value received, the fix), ``parameter`` — the name of the
argument or field to change, as the library spells it (``d_model``, ``rope_theta (base)``, ``positions``),
None where no single one is to blame — and ``hint``, the fix alone where the raiser states it apart. A
command line or a server maps ``parameter`` to its own flag or field (:meth:`PosencError.worded`) without
reading the message.

>>> from posenc import errors, validation
>>> try:
...     validation.d_model(4096.0)
... except errors.PosencError as error:
...     print(type(error).__name__, isinstance(error, TypeError), error.parameter)
...     print(error.worded({"d_model": "--d-model"}))
PosencTypeError True d_model
--d-model must be an integer >= 2; got 4096.0 of type float (pass 4096 instead)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["PosencError", "PosencTypeError", "PosencValueError"]


class PosencError(Exception):
    """An error about posenc's input: ``parameter`` names what to change (or None), ``hint`` the fix (or
    None when the message holds it only)."""

    def __init__(self, message: str, *, parameter: str | None = None, hint: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.hint = hint

    def worded(self, names: Mapping[str, str]) -> str:
        """The message with its parameter written as ``names[parameter]`` (a command's ``--d-model``): where
        the message names it as ``parameter=value`` (``--d-model value``), and as the message's first word
        (``--d-model must be ...``); a formula's variable of the same name stays. The message itself when
        the parameter has no other name."""
        message = str(self)
        name = self.parameter
        if name is None or name not in names:
            return message
        other = names[name]
        flag = other.startswith("--")
        message = re.sub(
            rf"(?<![\w.-]){re.escape(name)}=(?:\"([^\"]*)\"|'([^']*)')?",
            lambda m: (f"{other} " if flag else f"{other}=") + "".join(filter(None, m.groups())),
            message,
        )
        return re.sub(rf"^{re.escape(name)}(?![\w=])", other, message)


class PosencValueError(PosencError, ValueError):
    """A value of the right kind that posenc refuses (out of range, not finite, unknown name)."""


class PosencTypeError(PosencError, TypeError):
    """A value of the wrong kind (a float for an integer, a string for a number)."""
