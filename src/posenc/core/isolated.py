"""Results that never depend on NumPy's global error state.

A caller may have set ``np.seterr(all="raise")`` (or ``"warn"``, or entered ``np.errstate``): the core's
exact arithmetic underflows on purpose (tiny positions, float16/bfloat16 subnormals in the final rounding)
and must neither raise nor warn there. :func:`isolated` runs a function under a fixed error state
(``all="ignore"``; NumPy keeps it per thread and per context, so the caller's own state is back as soon as
the function returns, also on an exception). The core's entry points (:func:`posenc.encode`,
:func:`posenc.table`, :func:`posenc.frequencies`, the explicit-frequency path of rotary tables) are
decorated; everything above them reaches NumPy's arithmetic through them or has its own ``np.errstate``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

F = TypeVar("F", bound=Callable[..., Any])


def isolated(function: F) -> F:
    """``function`` run under ``np.errstate(all="ignore")``: its results and behaviour are the same
    whatever error state the caller set.

    >>> import numpy as np
    >>> @isolated
    ... def smallest(x):
    ...     return np.float16(x) * np.float16(1e-4)
    >>> with np.errstate(all="raise"):
    ...     float(smallest(1e-4))  # an underflow, not a FloatingPointError
    0.0
    >>> np.geterr()["under"]  # the caller's state is untouched
    'ignore'
    """

    if _ERRSTATE_DECORATES:
        # NumPy >= 2: errstate's own decorator sets the state in a context variable at each call and resets
        # it after (per thread and per context): the same state as ``with np.errstate(...)`` for less than
        # half its cost, which counts on the smallest calls (encode of one position: ~8 µs)
        return np.errstate(all="ignore")(function)

    @functools.wraps(function)
    def run(*args: Any, **keywords: Any) -> Any:
        with np.errstate(all="ignore"):
            return function(*args, **keywords)

    return run  # type: ignore[return-value]


# NumPy 1.x's errstate decorates through contextlib.ContextDecorator, which enters one shared instance that
# keeps the caller's old state on itself: not safe across threads there, so a fresh errstate per call.
_ERRSTATE_DECORATES = "__call__" in vars(np.errstate)
