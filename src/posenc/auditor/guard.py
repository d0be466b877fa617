"""Running someone else's code: the auditor survives its target.

A target is code posenc did not write: importing it, building it and calling it may raise anything
(``SystemExit`` included), change NumPy's error state, or never return. :func:`run` runs an audit so that:

* any exception the target raises ends the audit with a :class:`TargetError` (a ValueError) naming the
  target, the exception and what posenc was doing (``target model.py:Foo raised SystemExit(0) while
  calling it on 4 positions``), the target's exception chained as its ``__cause__``; a ``KeyboardInterrupt``
  is taken for the user's Ctrl-C and passed on, except one raised in the worker thread of a timed audit,
  where it can only be the target's own;
* the target runs under the NumPy error state of the caller of :func:`posenc.audit`, and whatever it sets
  is undone when each of its calls returns; posenc's own arithmetic runs under ``np.errstate(all="ignore")``
  and the caller's state is theirs again afterwards;
* with ``timeout`` (seconds), the audit runs in a daemon thread, and the caller gets a :class:`TargetError`
  once the time is up. Python cannot stop a thread from outside: the abandoned thread stops at its next
  return to posenc (its current call to the target may go on until it returns; a target stuck for ever keeps
  its daemon thread, which does not keep the interpreter alive).

Code that runs the target marks it with ``with target_code("calling it on 4 positions"):``.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from ..errors import PosencValueError

__all__ = [
    "TargetError",
    "check_timeout",
    "exit_at_end_if_still_running",
    "label_of",
    "run",
    "still_running",
    "target_code",
]

T = TypeVar("T")
#: The attribute set on an exception raised by the target: what posenc was doing when it was raised.
_TAG = "_posenc_audit_action"
_LOCAL = threading.local()
#: The audits given up on (a timeout, a Ctrl-C): each one's event is set when its thread has ended.
_ABANDONED: list[threading.Event] = []


class TargetError(ValueError):
    """The target failed: it raised (any exception, ``SystemExit`` included), or ran past the timeout. The
    target's own exception, if any, is the ``__cause__``."""


@dataclasses.dataclass
class _Run:
    """One audit: the caller's NumPy error state, what the target is doing now, whether the audit was
    abandoned (a timeout, a Ctrl-C), whether it runs in a worker thread."""

    errstate: dict[str, str]
    in_worker: bool
    action: str | None = None
    cancelled: bool = False


class _Cancelled(BaseException):
    """Unwinds an abandoned audit's thread at its next step (never seen by the caller)."""


def check_timeout(timeout: Any) -> float | None:
    """``timeout`` as seconds > 0, or None (no limit)."""
    if timeout is None:
        return None
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if number and math.isfinite(timeout) and timeout > 0:
        return float(timeout)
    raise PosencValueError(
        f"timeout={timeout!r} is not a number of seconds > 0; give None for no limit", parameter="timeout"
    )


def label_of(target: Any) -> str:
    """How messages name ``target``: a path or ``file.py:Name`` as given, a function by its name, anything
    else by its type."""
    if isinstance(target, str) or type(target).__name__.endswith("Path"):
        return str(target)
    name = getattr(target, "__qualname__", None)
    if isinstance(name, str) and callable(target):
        return name
    return type(target).__name__


@contextlib.contextmanager
def target_code(action: str) -> Iterator[None]:
    """Run the target's code (``action`` says what it is doing, for messages): under the caller's NumPy error
    state, whatever it sets undone after, and any exception it raises marked as the target's."""
    run_ = getattr(_LOCAL, "run", None)
    saved = np.geterr()
    if run_ is not None:
        if run_.cancelled:
            raise _Cancelled
        outer, run_.action = run_.action, action
        np.seterr(**run_.errstate)
    try:
        yield
    except BaseException as error:
        if not isinstance(error, _Cancelled) and not (
            isinstance(error, KeyboardInterrupt) and not (run_ is not None and run_.in_worker)
        ):
            with contextlib.suppress(Exception):  # an exception without a __dict__: left untagged
                if not hasattr(error, _TAG):
                    setattr(error, _TAG, action)
        raise
    finally:
        np.seterr(**saved)
        if run_ is not None:
            run_.action = outer
    if run_ is not None and run_.cancelled:
        raise _Cancelled


def run(label: str, work: Callable[[], T], timeout: float | None = None) -> T:
    """``work()`` (an audit of target ``label``), guarded as the module docstring says."""
    state = _Run(np.geterr(), in_worker=timeout is not None)
    if timeout is None:
        try:
            return _body(state, work)
        except KeyboardInterrupt:
            raise
        except BaseException as error:
            failure = _failure(error, label)
            if failure is error:
                raise
            raise failure from error
    box: dict[str, Any] = {}
    # waited for with an Event, not Thread.join: a Ctrl-C during join(timeout) leaves a running thread
    # marked as stopped (Python 3.11 releases its state lock), and posenc must know it still runs
    finished = threading.Event()

    def worker() -> None:
        try:
            box["value"] = _body(state, work)
        except _Cancelled:
            pass
        except BaseException as error:  # the target's SystemExit, KeyboardInterrupt, ...: reported below
            box["error"] = error
        finally:
            finished.set()

    thread = threading.Thread(target=worker, name=f"posenc audit of {label}", daemon=True)
    thread.start()
    try:
        done = _wait(finished, timeout)
    except BaseException:  # Ctrl-C while waiting: the worker stops at its next step
        state.cancelled = True
        _ABANDONED.append(finished)
        raise
    if not done:
        state.cancelled = True
        _ABANDONED.append(finished)
        doing = f" ({state.action})" if state.action else ""
        raise TargetError(
            f"target {label} was still running after the timeout of {timeout:g} s{doing}; give it more time "
            "with timeout= (seconds), or ask for fewer positions= or samples="
        )
    if "error" in box:
        error = box.pop("error")
        failure = _failure(error, label)
        if failure is error:
            raise error
        raise failure from error
    return box["value"]


#: The longest the main thread sleeps at once while an audit runs: a signal delivered to another thread (a
#: target's native threads, torch's or BLAS's) wakes no sleeper, and Python runs its handler (Ctrl-C) only
#: when the main thread next runs bytecode; one long wait would leave Ctrl-C unanswered until the timeout.
_WAKE_S = 0.1


def _wait(finished: threading.Event, timeout: float) -> bool:
    """``finished.wait(timeout)`` in slices of :data:`_WAKE_S`, so that Ctrl-C is answered within one."""
    deadline = time.monotonic() + timeout
    while not finished.wait(min(_WAKE_S, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline:
            return False
    return True


def still_running() -> bool:
    """Whether the thread of an audit given up on (a timeout, a Ctrl-C) is still running the target."""
    _ABANDONED[:] = [finished for finished in _ABANDONED if not finished.is_set()]
    return bool(_ABANDONED)


def exit_at_end_if_still_running(code: int) -> None:
    """For a command that gave up on an audit: when the interpreter exits and that audit's thread is still
    running the target, flush stdout and stderr and end the process at once with ``code`` (``os._exit``).
    Finalization would otherwise stop the thread where it stands, and a thread inside native code (a torch
    operation) then aborts the whole process ("terminate called without an active exception")."""

    def end() -> None:
        if still_running():
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)

    atexit.register(end)


def _body(state: _Run, work: Callable[[], T]) -> T:
    """``work()`` in this thread, under ``state`` and with posenc's arithmetic silent."""
    previous = getattr(_LOCAL, "run", None)
    _LOCAL.run = state
    try:
        with np.errstate(all="ignore"):
            return work()
    finally:
        _LOCAL.run = previous


def _failure(error: BaseException, label: str) -> BaseException:
    """The error the caller gets: posenc's own refusals as they are, the target's exceptions (and anything
    else that escaped) as a TargetError naming the target."""
    action = getattr(error, _TAG, None)
    if action is not None or not isinstance(error, Exception):
        return TargetError(f"target {label} raised {_shown(error)} while {action or 'being audited'}")
    if isinstance(error, (ValueError, TypeError, ImportError, MemoryError)):
        return error  # posenc's own refusal (bad input): its message says what is wrong
    return TargetError(f"auditing target {label} failed: {_shown(error)}")


def _shown(error: BaseException) -> str:
    """``SystemExit(0)``, ``RuntimeError('boom')``: the exception's repr, on one line, cut to 200
    characters."""
    text = " ".join(repr(error).split())
    return text if len(text) <= 200 else text[:197] + "..."
