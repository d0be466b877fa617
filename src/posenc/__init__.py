"""posenc: exact sinusoidal positional encodings.

PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i), ω_i = base ** (-i / (d_model // 2 - shift)), correctly
rounded to the output dtype at any position |p| < 2**31. ``import posenc`` imports NumPy only.
"""

from . import analysis, grids, positions, presets
from .core import encode, frequencies, table
from .grids import grid
from .porting import convert_layout, identify

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "analysis",
    "convert_layout",
    "encode",
    "frequencies",
    "grid",
    "grids",
    "identify",
    "positions",
    "presets",
    "sharding",
    "table",
]
