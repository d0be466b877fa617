"""matplotlib figures without pyplot or a GUI: :func:`new_figure`, the blank figure every drawing starts from,
and :func:`matplotlib_defaults`, which draws and saves under matplotlib's own settings, whatever the user's.

matplotlib is imported on first use (:func:`load_matplotlib`), so reading :data:`posenc.analysis.plot.KINDS`
or the signatures of the drawing functions costs nothing; without matplotlib that first use raises an
ImportError that names the extra to install. :func:`posenc.analysis.plot.save` writes the figures.
"""

from __future__ import annotations

import functools
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
    """An empty ``width`` × ``height`` in figure, constrained layout, built directly (not through pyplot)."""
    return load_matplotlib().figure.Figure(figsize=(width, height), layout="constrained")


def matplotlib_defaults(function: F) -> F:
    """``function`` run under matplotlib's default settings (``matplotlib.style.context("default")``), not
    the user's: a matplotlibrc or rcParams set by the caller (``image.origin: lower`` drew the images upside
    down, ``text.usetex: True`` failed for want of LaTeX, a font size or ``savefig.bbox``) change nothing
    drawn or saved. The caller's settings are back when it returns, also on an exception."""

    @functools.wraps(function)
    def run(*args: Any, **keywords: Any) -> Any:
        with load_matplotlib().style.context("default"):
            return function(*args, **keywords)

    return run  # type: ignore[return-value]
