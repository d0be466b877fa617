"""posenc: exact sinusoidal positional encodings.

PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i), ω_i = base ** (-i / (d_model // 2 - shift)), correctly
rounded to the output dtype at any position |p| < 2**31. ``import posenc`` imports NumPy only; the
submodules below load on first use (``posenc.presets``, ``posenc.grid``, ``posenc.rope`` for rotary
embeddings, ``posenc.audit`` to measure anyone's encoding, ...), which keeps the import fast.
"""

import importlib
from typing import TYPE_CHECKING, Any

from .core import encode, frequencies, table

if TYPE_CHECKING:  # what __getattr__ provides, for type checkers and editors
    from . import analysis, audit, grids, positions, presets, rope, sharding, testing
    from .grids import grid
    from .porting import convert_layout, identify

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "analysis",
    "audit",
    "convert_layout",
    "encode",
    "frequencies",
    "grid",
    "grids",
    "identify",
    "positions",
    "presets",
    "rope",
    "sharding",
    "table",
    "testing",
]

# posenc.audit is a package that can be called: posenc.audit(target) is posenc.audit.audit(target)
_SUBMODULES = {"analysis", "audit", "grids", "porting", "positions", "presets", "rope", "sharding", "testing"}
_FUNCTIONS = {"grid": "grids", "convert_layout": "porting", "identify": "porting"}


def __getattr__(name: str) -> Any:
    """Load a submodule, or the function of one, on first use."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(f"{__name__}.{_FUNCTIONS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
