"""Reorder a stored table's columns from one layout to another (the column mapping is :mod:`posenc.layouts`).

Models store the sine and the cosine of each frequency interleaved (Vaswani et al. 2017, the PyTorch
tutorial), as [sin | cos] halves (tensor2tensor, fairseq) or as [cos | sin] halves (diffusers'
``flip_sin_to_cos``): porting a table between them is a permutation of its columns.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from .. import layouts
from .readers import host_values

__all__ = ["convert_layout"]


def convert_layout(table: npt.ArrayLike, source: str, target: str) -> np.ndarray:
    """The same encodings with their columns reordered from layout ``source`` to ``target``.

    Works on any ``(..., d_model)`` array; an odd width keeps its last (zero) column in place. A torch
    tensor's values come back as a NumPy array (bfloat16 widened to float32, exactly).

    >>> convert_layout([[0.1, 0.2, 0.9, 0.8]], "sin_cos", "interleaved")
    array([[0.1, 0.9, 0.2, 0.8]])
    """
    array = host_values(table)
    source, target = layouts.check_layout(source), layouts.check_layout(target)
    if array.ndim == 0 or array.shape[-1] < 2:
        raise ValueError(f"table must have shape (..., d_model) with d_model >= 2; got shape {array.shape}")
    pairs = array.shape[-1] // 2
    result = array.copy()
    for to_columns, from_columns in zip(
        layouts.pair_columns(target, pairs), layouts.pair_columns(source, pairs), strict=True
    ):  # the sine columns, then the cosine columns
        result[..., to_columns] = array[..., from_columns]
    return result
