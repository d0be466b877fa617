"""matplotlib figures without pyplot or a GUI: :func:`new_figure`, the blank figure every drawing starts from.

matplotlib is imported on first use (:func:`load_matplotlib`), so reading :data:`posenc.analysis.plot.KINDS`
or the signatures of the drawing functions costs nothing; without matplotlib that first use raises an
ImportError that names the extra to install. :func:`posenc.analysis.plot.save` writes the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import types

    from matplotlib.figure import Figure

MISSING = "posenc.analysis.plot needs matplotlib: pip install 'posenc[plot]'"


def load_matplotlib() -> types.ModuleType:
    """The ``matplotlib`` module with ``matplotlib.figure`` loaded (never pyplot), or an ImportError that
    says ``pip install 'posenc[plot]'``."""
    try:
        import matplotlib.figure
    except ImportError:
        raise ImportError(MISSING) from None
    return matplotlib


def new_figure(width: float, height: float) -> Figure:
    """An empty ``width`` × ``height`` in figure, constrained layout, built directly (not through pyplot)."""
    return load_matplotlib().figure.Figure(figsize=(width, height), layout="constrained")
