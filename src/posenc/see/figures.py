"""matplotlib figures without pyplot or a GUI, and :func:`save`, which writes them byte for byte reproducibly.

matplotlib is imported on first use (:func:`load_matplotlib`), so reading :data:`posenc.see.plot.KINDS` or the
signatures of the drawing functions costs nothing; without matplotlib that first use raises an ImportError
that names the extra to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .. import _validate
from ..atomic import atomic_save

if TYPE_CHECKING:
    import types

    from matplotlib.figure import Figure

SUFFIXES = (".png", ".svg", ".pdf")
DPI = 120  # 8 × 5 in → 960 × 600 px
MISSING = "posenc.plot needs matplotlib: pip install 'posenc[plot]'"


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


def save(figure: Figure, path: str | Path, *, dpi: float = DPI) -> Path:
    """Write ``figure`` to ``path`` (.png, .svg or .pdf, by its suffix) at ``dpi``; return the path.

    Files carry no creation date, so the same figure saves to the same bytes. The file is written
    atomically (:func:`posenc.atomic.atomic_save`): a failure (a full disk, Ctrl-C) leaves the old file as
    it was and no temporary file; an OSError names ``path``.

    >>> import tempfile
    >>> from posenc.see.plot import heatmap
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save(heatmap(length=8, d_model=16), Path(folder) / "pe.svg")
    ...     path.stat().st_size > 1000
    True
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"the output file must end in {', '.join(SUFFIXES)} (the suffix picks the format); "
            f"got {str(path)!r}"
        )
    dpi = check_dpi(dpi)
    metadata: dict[str, Any] = {".png": {}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}[suffix]
    with load_matplotlib().rc_context({"svg.hashsalt": "posenc"}):  # fixed SVG ids: same figure, same bytes
        atomic_save(
            path, lambda stream: _savefig(figure, stream, dpi=dpi, format=suffix[1:], metadata=metadata)
        )
    return path


def _savefig(figure: Figure, stream: IO[bytes], **options: Any) -> None:
    """``figure.savefig(stream, **options)``; a failed write is raised as the OSError it is. (matplotlib's
    PDF writer, failing to write, fails again while closing, with an AttributeError that hides the first.)"""
    try:
        figure.savefig(stream, **options)
    except Exception as error:
        failed = _os_error_within(error)
        if failed is None or failed is error:
            raise
        raise failed from None


def _os_error_within(error: BaseException) -> OSError | None:
    """The first OSError in ``error``'s chain of causes and contexts (``error`` itself included), if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def check_dpi(dpi: Any) -> float:
    """``dpi`` as a float, if it is a number in [10, 1200]; else a ValueError that says so.

    >>> check_dpi(300)
    300.0
    """
    value = _validate.real("dpi", dpi)
    if not 10 <= value <= 1200:
        raise ValueError(f"dpi must be between 10 and 1200 (120 suits a screen, 300 print); got {dpi!r}")
    return value
