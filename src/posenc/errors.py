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

import contextlib
import re
from collections.abc import Iterator, Mapping

__all__ = ["PosencError", "PosencTypeError", "PosencValueError", "renamed", "reworded"]


class PosencError(Exception):
    """An error about posenc's input: ``parameter`` names what to change (or None), ``hint`` the fix (or
    None when the message holds it only), ``choices`` the values it may take where they are few (or None)."""

    def __init__(
        self,
        message: str,
        *,
        parameter: str | None = None,
        hint: str | None = None,
        choices: tuple[str, ...] | None = None,
    ) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.hint = hint
        self.choices = choices

    def worded(self, names: Mapping[str, str]) -> str:
        """The message in another interface's words: each library parameter of ``names`` that the message
        writes as ``name=value`` becomes ``names[name]`` (a command's ``--d-model value``; an empty name
        drops ``name=``, for a positional argument named by its value), and the error's own parameter as
        the message's first word too (``--d-model must be ...``). A formula's variable of the same name
        stays; a message naming none of them is returned as it is.

        >>> PosencValueError("d_model must be >= 2; got d_model=1", parameter="d_model").worded(
        ...     {"d_model": "--d-model"}
        ... )
        '--d-model must be >= 2; got --d-model 1'
        """
        return reworded(str(self), names, self.parameter)


def reworded(text: str, names: Mapping[str, str], parameter: str | None = None) -> str:
    """``text`` (a message or a report of the library's) with the library's parameters ``name=value``
    written as ``names[name]`` writes them, and ``parameter`` also as its first word
    (:meth:`PosencError.worded`)."""
    for name, other in names.items():
        text = re.sub(
            rf"(?<![\w.-]){re.escape(name)}=(?:\"([^\"]*)\"|'([^']*)')?",
            lambda found, name=name, other=other: _written(found, name, other),
            text,
        )
    if parameter is not None and parameter in names:
        text = re.sub(rf"^{re.escape(parameter)}(?![\w=])", names[parameter], text)
    return text


@contextlib.contextmanager
def renamed(names: Mapping[str, str]) -> Iterator[None]:
    """The errors raised inside about a library parameter of ``names`` in the caller's words
    (:meth:`PosencError.worded`), ``parameter`` the caller's name: a module whose ``num_channels`` the core
    checks as ``d_model`` names ``num_channels``.

    >>> from posenc import validation
    >>> try:
    ...     with renamed({"d_model": "num_channels"}):
    ...         validation.d_model(1)
    ... except PosencError as error:
    ...     print(error.parameter, "|", error)
    num_channels | num_channels must be an integer >= 2; got 1
    """
    try:
        yield
    except PosencError as error:
        if error.parameter not in names:
            raise
        raise type(error)(
            error.worded(names), parameter=names[error.parameter], hint=error.hint, choices=error.choices
        ) from None


def _written(found: re.Match, name: str, other: str) -> str:
    """``name=value`` (``found``) as ``other`` writes it: ``--flag value``, ``value``, or ``other=value``."""
    value = found.group(0).removeprefix(f"{name}=")
    if not other:
        return value
    if not other.startswith("--"):
        return f"{other}={value}"
    quoted = [text for text in found.groups() if text]
    rest = found.string[found.end() :]
    follows = not quoted and rest[:1] not in ("", " ", ";", ",", ":", ")", "\n")
    return " ".join([other, *quoted]) + (" " if follows else "")


class PosencValueError(PosencError, ValueError):
    """A value of the right kind that posenc refuses (out of range, not finite, unknown name)."""


class PosencTypeError(PosencError, TypeError):
    """A value of the wrong kind (a float for an integer, a string for a number)."""
