"""What a sinusoidal encoding guarantees, measured: dot products, shifts, uniqueness and the criteria report.

NumPy only: ``import posenc.analysis`` does not import matplotlib. Its figures are in
:mod:`posenc.analysis.plot`, which imports matplotlib when a figure is drawn. One concept per module:

* :mod:`~posenc.analysis.properties`: dot products, the Toeplitz structure, the shift matrix M_k, wavelengths,
  bounded / consistent / deterministic;
* :mod:`~posenc.analysis.encodings`: the encodings judged, posenc's (rounded once) or the usual code's
  (evaluated in the dtype, :func:`naive_table`);
* :mod:`~posenc.analysis.hashes`, :mod:`~posenc.analysis.collisions`, :mod:`~posenc.analysis.margin`: which
  positions share an encoding, and how close the closest two are;
* :mod:`~posenc.analysis.rounding`: how far rounding to a dtype can move a value, a row, a dot product;
* :mod:`~posenc.analysis.criteria` (the table ``CRITERIA``), :mod:`~posenc.analysis.check`,
  :mod:`~posenc.analysis.report`: the criteria of a good encoding, measured (:func:`check`), and their
  :class:`Report`;
* :mod:`~posenc.analysis.plot` (the table ``KINDS``, :func:`~posenc.analysis.plot.save`): the figures;
  :mod:`~posenc.analysis.rope_figures`: those of rotary embeddings (:mod:`posenc.rope`) and the data they
  draw; :mod:`~posenc.analysis.figures`: matplotlib loaded on first use, never pyplot.

The names below are the public ones of the measuring modules. (``posenc.analysis.check`` and
``posenc.analysis.collisions`` are the functions; their modules are imported by their full names, as in
``from posenc.analysis.check import check``.)
"""

from __future__ import annotations

from .check import Progress, check
from .collisions import Collisions, collision_horizon, collisions
from .criteria import CRITERIA, Criterion
from .encodings import COMPUTE, naive_table
from .margin import Margin, uniqueness_margin
from .properties import (
    closed_form_distance,
    closed_form_dot_product,
    cosine_similarity,
    dot_products,
    length_consistent,
    max_magnitude,
    recomputes_identically,
    shift_error,
    shift_matrix,
    toeplitz_deviation,
    wavelengths,
    wrap_length,
)
from .report import Report

__all__ = [
    "COMPUTE",
    "CRITERIA",
    "Collisions",
    "Criterion",
    "Margin",
    "Progress",
    "Report",
    "check",
    "closed_form_distance",
    "closed_form_dot_product",
    "collision_horizon",
    "collisions",
    "cosine_similarity",
    "dot_products",
    "length_consistent",
    "max_magnitude",
    "naive_table",
    "recomputes_identically",
    "shift_error",
    "shift_matrix",
    "toeplitz_deviation",
    "uniqueness_margin",
    "wavelengths",
    "wrap_length",
]
