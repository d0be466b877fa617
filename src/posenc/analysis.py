"""What a sinusoidal encoding guarantees, measured: dot products, shifts, uniqueness and the criteria report.

The code lives in the package :mod:`posenc.see`, one concept per module: :mod:`~posenc.see.properties`
(dot products, the Toeplitz structure, the shift matrix M_k, wavelengths, bounded / consistent /
deterministic), :mod:`~posenc.see.encodings` (the usual code's table, :func:`naive_table`),
:mod:`~posenc.see.collisions` and :mod:`~posenc.see.margin` (uniqueness in a dtype),
:mod:`~posenc.see.criteria` (the table ``CRITERIA``), :mod:`~posenc.see.check` and
:mod:`~posenc.see.report` (:func:`check` and its :class:`Report`). This module gathers their public names.
NumPy only.
"""

from __future__ import annotations

from .see.check import Progress, check
from .see.collisions import Collisions, collision_horizon, collisions
from .see.criteria import CRITERIA, Criterion
from .see.encodings import COMPUTE, naive_table
from .see.margin import Margin, uniqueness_margin
from .see.properties import (
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
from .see.report import Report

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
