"""posenc: exact sinusoidal positional encodings.

PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i), ω_i = base ** (-i / (d_model // 2 - shift)), correctly
rounded to the output dtype at any position |p| < 2**31. ``import posenc`` itself loads nothing (about a
millisecond): every name below loads on first use, ``posenc.table`` and ``posenc.encode`` with NumPy and
the exact core (:mod:`posenc.core`), the submodules on their own (``posenc.presets``, ``posenc.grids``,
``posenc.rope`` for rotary embeddings, ``posenc.auditor`` to measure anyone's encoding, ...) and the
functions they give (``posenc.grid``, ``posenc.identify``; ``posenc.audit(target)`` is the plain function
``posenc.auditor.audit``). Nothing but NumPy is imported by the core; frameworks load only with
``posenc.torch`` and ``posenc.jax``.
"""

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms); type checkers read it so
if TYPE_CHECKING:  # what __getattr__ provides, for type checkers and editors
    from . import analysis, auditor, grids, positions, presets, rope, sharding, testing
    from .auditor import audit
    from .core import encode, frequencies, table
    from .errors import PosencError
    from .grids import grid
    from .porting import convert_layout, identify

__version__ = "0.1.0"

__all__ = [
    "PosencError",
    "__version__",
    "analysis",
    "audit",
    "auditor",
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

# posenc.audit is a plain function, posenc.auditor.audit; the package it comes from is posenc.auditor.
# core, defaults, layouts and porting are not in __all__: they are named so that
# `import posenc; posenc.core` works (defaults and layouts were loaded with the core before it was lazy).
_SUBMODULES = {
    "analysis",
    "auditor",
    "core",
    "defaults",
    "errors",
    "grids",
    "layouts",
    "porting",
    "positions",
    "presets",
    "rope",
    "sharding",
    "testing",
}
_FUNCTIONS = {
    "encode": "core",
    "frequencies": "core",
    "table": "core",
    "grid": "grids",
    "audit": "auditor",
    "convert_layout": "porting",
    "PosencError": "errors",
    "identify": "porting",
}


def __getattr__(name: str) -> object:
    """Load a submodule, or the function of one, on first use (then it is an ordinary attribute)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _FUNCTIONS:
        value = getattr(importlib.import_module(f"{__name__}.{_FUNCTIONS[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
