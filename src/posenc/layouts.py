"""Where the sine and the cosine of each frequency go in a row: the one owner of the layout mapping.

Real models store the n = d_model // 2 sin/cos pairs in one of three orders:

- ``"interleaved"``: [sin ω0, cos ω0, sin ω1, cos ω1, ...] (Vaswani et al. 2017 §3.5, the PyTorch tutorial);
- ``"sin_cos"``: [sin ω0, ..., sin ω(n-1), cos ω0, ..., cos ω(n-1)] (tensor2tensor, fairseq);
- ``"cos_sin"``: the cosines first (diffusers' ``flip_sin_to_cos=True``).

Each is a placement (sin offset, cos offset, stride): the sine of frequency i lies in column
``sin_offset + stride · i`` and its cosine in ``cos_offset + stride · i``. Everything else (column index
arrays, column names, the compiled kernels' plans) is derived from :func:`placement`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import PosencTypeError, PosencValueError
from .validation import integer

LAYOUTS = ("interleaved", "sin_cos", "cos_sin")
#: What an odd width does with its last column (:func:`function_columns`; :func:`posenc.encode`'s ``odd``).
ODD_RULES = ("zero", "literal", "drop", "error")

# The layout and odd-width rules are checked here, their one home, with posenc.validation's integer rule.


def check_layout(value: Any) -> str:
    """``value`` if it is one of :data:`LAYOUTS`, else a :class:`~posenc.errors.PosencValueError` naming
    ``layout``.

    >>> check_layout("sin_cos")
    'sin_cos'
    """
    return _one_of("layout", value, LAYOUTS)


def check_odd(value: Any) -> str:
    """``value`` if it is one of :data:`ODD_RULES`, else a :class:`~posenc.errors.PosencValueError` naming
    ``odd``.

    >>> check_odd("literal")
    'literal'
    """
    return _one_of("odd", value, ODD_RULES)


def _one_of(name: str, value: Any, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise PosencValueError(
            f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}", parameter=name
        )
    return value


def placement(layout: str, n: int) -> tuple[int, int, int]:
    """(sin offset, cos offset, stride) of ``layout`` for n frequencies (an integer >= 0).

    >>> placement("interleaved", 4), placement("sin_cos", 4), placement("cos_sin", 4)
    ((0, 1, 2), (0, 4, 1), (4, 0, 1))
    """
    check_layout(layout)
    n = integer("n", n, minimum=0)
    if layout == "interleaved":
        return 0, 1, 2
    return (0, n, 1) if layout == "sin_cos" else (n, 0, 1)


def pair_columns(layout: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The column of the sine and of the cosine of each frequency i = 0 .. n - 1: two int arrays ``(n,)``.

    >>> [c.tolist() for c in pair_columns("cos_sin", 2)]
    [[2, 3], [0, 1]]
    """
    sin_offset, cos_offset, stride = placement(layout, n)  # checks n
    i = np.arange(n)
    return sin_offset + stride * i, cos_offset + stride * i


def function_columns(d_model: int, layout: str, odd: str = "zero") -> tuple[np.ndarray, np.ndarray]:
    """The columns of the sines and of the cosines of an encoding ``d_model`` wide, by frequency: sin ω_i
    is in column ``sines[i]``, cos ω_i in ``cosines[i]``. Under odd="literal"/"drop" an odd width keeps
    one function of its last frequency only (the column a width one wider places last is dropped), so one
    array is one shorter; under odd="zero" its last column is in neither.

    >>> [c.tolist() for c in function_columns(5, "sin_cos", "literal")]
    [[0, 1, 2], [3, 4]]
    """
    d_model = integer("d_model", d_model, minimum=2)
    if check_odd(odd) in ("literal", "drop") and d_model % 2:
        sines, cosines = pair_columns(layout, d_model // 2 + 1)
        return sines[sines < d_model], cosines[cosines < d_model]
    return pair_columns(layout, d_model // 2)


def column_names(d_model: int, layout: str, odd: str = "zero") -> list[str]:
    """Name each column by its index, function and frequency index, as ``layout`` places them. Under
    odd="literal"/"drop" an odd width is computed one column wider and its last column dropped; under
    odd="zero" the last column of an odd width is a zero column.

    >>> column_names(5, "sin_cos")
    ['0 sin ω0', '1 sin ω1', '2 cos ω0', '3 cos ω1', '4 zero']
    >>> column_names(5, "sin_cos", "literal")  # computed for 6 columns, the last one dropped
    ['0 sin ω0', '1 sin ω1', '2 sin ω2', '3 cos ω0', '4 cos ω1']
    """
    d_model = integer("d_model", d_model, minimum=2)
    names = ["zero"] * d_model
    for fn, columns in zip(("sin", "cos"), function_columns(d_model, layout, odd), strict=True):
        for i, column in enumerate(columns.tolist()):
            names[column] = f"{fn} ω{i}"
    return [f"{dim} {name}" for dim, name in enumerate(names)]


def swaps_pairs(order: np.ndarray, layout: str) -> bool:
    """Whether the column order ``order`` (column j holds the layout's column ``order[j]``) exchanges the sine
    and the cosine of every frequency, and moves nothing else: sin and cos swapped. An ``order`` that is not
    a permutation of its columns (a column repeated, one out of range) is no such exchange: False.

    >>> swaps_pairs(np.array([1, 0, 3, 2]), "interleaved"), swaps_pairs(np.array([2, 3, 0, 1]), "sin_cos")
    (True, True)
    >>> swaps_pairs(np.array([0, 2, 1, 3]), "interleaved")
    False
    >>> swaps_pairs(np.array([1, 0, 3, 2, 0]), "interleaved")  # column 0 twice: not a column order
    False
    """
    check_layout(layout)
    order = np.asarray(order)
    if order.ndim != 1 or (order.size and order.dtype.kind not in "iu"):
        raise PosencTypeError(
            f"order must be a 1-d array of column indices (integers); got shape {order.shape}, dtype "
            f"{order.dtype}; pass e.g. np.array([1, 0, 3, 2])",
            parameter="order",
        )
    if len(order) < 2 or not np.array_equal(np.sort(order), np.arange(len(order))):
        return False
    s, c = pair_columns(layout, len(order) // 2)
    return bool((order[s] == c).all() and (order[c] == s).all())
