"""matplotlib figures without pyplot or a GUI: :func:`new_figure`, the blank figure every drawing starts from,
and :func:`matplotlib_defaults`, which draws and saves under matplotlib's own settings, whatever the user's.

matplotlib is imported on first use (:func:`load_matplotlib`), so reading :data:`posenc.analysis.plot.KINDS`
or the signatures of the drawing functions costs nothing; without matplotlib that first use raises an
ImportError that names the extra to install. :func:`posenc.analysis.plot.save` writes the figures.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import types

    from matplotlib.figure import Figure

MISSING = "posenc.analysis.plot needs matplotlib: pip install 'posenc[plot]'"

F = TypeVar("F", bound=Callable[..., Any])


def load_matplotlib() -> types.ModuleType:
    """The ``matplotlib`` module with ``matplotlib.figure`` loaded (never pyplot), or an ImportError that
    says ``pip install 'posenc[plot]'``."""
    try:
        import matplotlib.figure
        import matplotlib.style
    except ImportError:
        raise ImportError(MISSING) from None
    return matplotlib


def new_figure(width: float, height: float) -> Figure:
    """An empty ``width`` × ``height`` in figure, constrained layout, built directly (not through pyplot);
    inside a drawing function (:func:`matplotlib_defaults`), from here on under matplotlib's defaults."""
    matplotlib = load_matplotlib()
    drawing = getattr(_DRAWING, "stack", None)
    if drawing is not None and not _DRAWING.styled:
        drawing.enter_context(matplotlib.style.context("default"))
        _DRAWING.styled = True
    return matplotlib.figure.Figure(figsize=(width, height), layout="constrained")


#: The drawing function running in this thread (:func:`matplotlib_defaults`): its context stack, and whether
#: matplotlib's defaults are entered in it yet.
_DRAWING = threading.local()


def matplotlib_defaults(function: F) -> F:
    """``function`` run under matplotlib's default settings (``matplotlib.style.context("default")``), not
    the user's: a matplotlibrc or rcParams set by the caller (``image.origin: lower`` drew the images upside
    down, ``text.usetex: True`` failed for want of LaTeX, a font size or ``savefig.bbox``) change nothing
    drawn or saved. The defaults are entered when the function makes its figure (:func:`new_figure`), after
    its arguments are checked (a refusal costs no matplotlib import); the caller's settings are back when
    it returns, also on an exception."""

    @functools.wraps(function)
    def run(*args: Any, **keywords: Any) -> Any:
        if getattr(_DRAWING, "stack", None) is not None:  # called by another drawing function: its context
            return function(*args, **keywords)
        with contextlib.ExitStack() as stack:
            _DRAWING.stack, _DRAWING.styled = stack, False
            try:
                return function(*args, **keywords)
            finally:
                _DRAWING.stack = None

    return run  # type: ignore[return-value]
