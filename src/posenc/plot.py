"""Figures of sinusoidal positional encodings (matplotlib): each function returns a ``Figure``.

The code lives in :mod:`posenc.see.plot` (the figures and ``KINDS``, the table of the figures by the names
``posenc plot`` gives them) and :mod:`posenc.see.figures` (:func:`save`, :func:`check_dpi`); this module
gathers their public names. Importing it needs matplotlib (``pip install 'posenc[plot]'``); reading
``posenc.see.plot.KINDS`` does not.
"""

from __future__ import annotations

from .see.figures import DPI, SUFFIXES, check_dpi, load_matplotlib, save
from .see.plot import KINDS, collisions, dot_product_heatmap, heatmap, similarity, sinusoids, waves

load_matplotlib()  # without matplotlib, importing posenc.plot is an ImportError that names the extra

__all__ = [
    "DPI",
    "KINDS",
    "SUFFIXES",
    "check_dpi",
    "collisions",
    "dot_product_heatmap",
    "heatmap",
    "save",
    "similarity",
    "sinusoids",
    "waves",
]
