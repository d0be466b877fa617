"""The shortest decimal form of a value of a dtype: the decimal with the fewest digits that reads back as that
very value (``0.84147096`` for the float32 nearest to sin 1, where float64's repr of the same value is
``0.8414709568023682``). ``posenc table``'s csv and json (:mod:`posenc.cli.formats`) and ``posenc explore``'s
value view (:mod:`posenc.explore`) write values so.
"""

from __future__ import annotations

import decimal
import numbers
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import numpy as np

__all__ = ["number", "shortest"]

#: The one decimal context of this module (:func:`decimal.localcontext` copies it), whatever the caller's:
#: digits enough for any float's exact value (a float32's has at most 105 significant digits, a float64's
#: 767), no traps. Under the caller's context (prec=3, ROUND_FLOOR; a trapped Inexact) the neighbours of a
#: candidate were rounded, or raised.
_CONTEXT = decimal.Context(
    prec=800, rounding=decimal.ROUND_HALF_EVEN, Emin=-999999, Emax=999999, traps=[], flags=[]
)


def number(value: float) -> str:
    """A float64 option as the shortest decimal that reads back as it, without a trailing ".0": a heading
    that names it never rounds it (``500000.5``, not ``500000``). ``value`` is a real number: a bool or a
    string is refused (TypeError), not written as ``1`` or as itself.

    >>> number(500000.5), number(10000.0), number(1.00000001), number(1e300)
    ('500000.5', '10000', '1.00000001', '1e+300')
    """
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"value must be a real number (an int or a float); got {value!r} of type {type(value).__name__}"
            + (f"; pass float({value!r})" if isinstance(value, str) else "; pass the number itself")
        )
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


_FRACTION_BITS = {"float16": 10, "bfloat16": 7, "float32": 23}  # the dtypes whose shortest form is shorter
# than float64's repr, with their stored mantissa bits
_POW10 = 10.0 ** np.arange(23)  # exact
_POW10_INT = 10 ** np.arange(19, dtype=np.int64)
_FOUR_DIGITS = np.array([f"{i:04d}".encode() for i in range(10_000)]).view(np.uint32)  # "0000" .. "9999"
_FIRST_BYTES = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], np.uint32)  # little-endian: k digits
if not np.little_endian:  # pragma: no cover
    _FIRST_BYTES = _FIRST_BYTES.byteswap()
# _KEEP[g][places]: the digits of group g (places 4g + 1 .. 4g + 4) that a value with `places` places has
_KEEP = _FIRST_BYTES[np.clip(np.arange(24) - 4 * np.arange(6)[:, None], 0, 4)]


def shortest(values: Any, separator: str = ",") -> Callable[[int], str] | None:
    """The values of ``values`` (2-D, float16, bfloat16 or float32) in the shortest decimal form that reads
    back as the same value of that dtype, written as Python writes floats (``repr``): ``0.84147096`` for the
    float32 nearest to sin 1, where float64's repr of the same value is ``0.8414709568023682``.

    Returns ``line(i)``: row i's values joined by ``separator`` (any string: ``""``, ``"\\0"``, ``" · "``);
    None for other dtypes (float64, integers), whose ``repr`` is already the shortest exact form, and for
    an array-like of Python floats (``np.asarray`` makes it float64). A value's shortest form is the
    decimal with the fewest digits strictly inside its rounding interval (between the half-way points to
    its neighbours in the dtype), the nearest one of two, so that it reads back as the value itself, parsed
    directly or through float64. Values with 1e-4 ≤ |x| < 1 (nearly all of a table's) are found and
    written by NumPy a block at a time; 0, ±1 are constants; the rest take the same test one at a time
    (:func:`_shortest_one`). Neither the caller's :mod:`decimal` context nor NumPy's error state
    (``np.errstate``) changes the result.

    >>> shortest(np.array([[0.8414709568023682, -1e-5], [65504, 0.1]], np.float32), ", ")(0)
    '0.84147096, -1e-05'
    >>> shortest(np.array([[65504, 0.1]], np.float16))(0)
    '65500.0,0.1'
    >>> shortest(np.array([[0.5, 0.25]], np.float32), " · ")(0)
    '0.5 · 0.25'
    """
    if not isinstance(separator, str):
        raise TypeError(
            f"separator must be a str; got {separator!r} of type {type(separator).__name__}; pass a string "
            "such as ',' or ', '"
        )
    if not isinstance(values, np.ndarray):
        try:
            values = np.asarray(values)
        except (TypeError, ValueError) as error:
            raise TypeError(
                f"values must be a 2-D array (or an array-like NumPy reads as one); got "
                f"{type(values).__name__} that NumPy cannot read ({error}); pass a rectangular array"
            ) from None
    if values.dtype.name not in _FRACTION_BITS or values.ndim != 2:
        return None
    if not separator or not separator.isascii() or "\0" in separator:
        # the rows are laid out with one ASCII byte between values, never zero (zero bytes are padding):
        # written with "," (never inside a value), then the ","s replaced
        line = shortest(values, ",")
        return lambda row: line(row).replace(",", separator)
    with np.errstate(all="ignore"):  # whatever the caller's np.errstate: nothing here is an error
        return _lines(values, separator)


def _lines(values: np.ndarray, separator: str) -> Callable[[int], str]:
    """:func:`shortest` of a 2-D float16, bfloat16 or float32 ``values``, ``separator`` ASCII without zero
    bytes."""
    if values.size == 0:
        return lambda row: ""
    flat = values.ravel()
    x = flat.astype(np.float64)
    magnitude = np.abs(x)
    fast = (magnitude >= 1e-4) & (magnitude < 1)
    if fast.all():
        cells = _fraction_cells(flat, x)
        width = cells.shape[1]
        frame = np.zeros((x.size, width + len(separator)), np.uint8)
        frame[:, :width] = cells
    else:
        cells = _fraction_cells(flat[fast], x[fast])
        constant = (magnitude == 0) | (magnitude == 1)  # "0.0", "-0.0", "1.0", "-1.0"
        others = np.flatnonzero(~(fast | constant))
        texts = [_shortest_one(value) for value in flat[others]]
        width = max([cells.shape[1], 4, *map(len, texts)])
        frame = np.zeros((x.size, width + len(separator)), np.uint8)
        frame[fast, : cells.shape[1]] = cells
        frame[constant, 1:4] = (48, 46, 48)
        frame[constant & (magnitude == 1), 1] = 49
        frame[constant & np.signbit(x), 0] = 45
        for index, text in zip(others.tolist(), texts, strict=True):
            frame[index, : len(text)] = np.frombuffer(text.encode(), np.uint8)
    frame[:, width:] = np.frombuffer(separator.encode(), np.uint8)
    frame = frame.reshape(values.shape[0], -1)
    frame[:, -len(separator) :] = 0  # no separator after a row's last value
    keep = frame != 0
    text = frame[keep].tobytes().decode("ascii")
    ends = np.cumsum(np.count_nonzero(keep, axis=1)).tolist()
    starts = [0, *ends[:-1]]
    return lambda row: text[starts[row] : ends[row]]


def _fraction_cells(values: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The shortest forms of values with 1e-4 ≤ |x| < 1 (``x`` the same as float64), ``-0.000123``: ASCII
    codes, one row per value, zero bytes after the last digit.

    Arithmetic with P decimal places: the interval (low, high) scaled by 10**P is exact in float64 (25 bits
    times 5**P < 2**28 for P ≤ 12). It surely holds an integer once its length passes 1 (P = ``sure``), the
    one nearest to the value; it may by luck at fewer places, and holding one only grows with P, so each
    value tries sure - 1, then sure (not found) or sure - 2 and below (found). Powers of two, whose interval
    is lopsided, and decimals that float64 rounds onto an end of the interval go to :func:`_shortest_one`.
    """
    width = 8 * values.itemsize
    bits = values.view(f"uint{width}") & ((1 << (width - 1)) - 1)  # of |x|
    magnitude = np.abs(x)
    low = (magnitude + (bits - 1).view(values.dtype).astype(np.float64)) / 2  # exact: the half-way points
    high = (magnitude + (bits + 1).view(values.dtype).astype(np.float64)) / 2  # to the neighbours
    sure = np.floor(-np.log10(high - low)).astype(np.intp) + 1
    places = sure - 1
    found, digits = _at_places(magnitude, low, high, places)
    missed = np.flatnonzero(~found)
    places[missed] += 1
    settled, digits[missed] = _at_places(magnitude[missed], low[missed], high[missed], places[missed])
    fewer = np.flatnonzero(found)
    while fewer.size:
        ok, more = _at_places(magnitude[fewer], low[fewer], high[fewer], places[fewer] - 1)
        fewer = fewer[ok]
        digits[fewer] = more[ok]
        places[fewer] -= 1
    fraction_bits = _FRACTION_BITS[values.dtype.name]
    slow = missed[~settled].tolist() + np.flatnonzero(bits % (1 << fraction_bits) == 0).tolist()
    # below 1 a shortest decimal never ends in 0: 0.99999994 needs 8 places, 0.1 reads back at 1
    groups = -(-int(places.max(initial=1)) // 4)
    shifted = digits.astype(np.int64) * _POW10_INT[4 * groups - places]  # left-aligned in 4 · groups places
    area = np.empty((x.size, groups), np.uint32)
    for g in range(groups - 1, -1, -1):  # four digits at a time, from a table of "0000" .. "9999"
        shifted, group = np.divmod(shifted, 10_000)
        area[:, g] = _FOUR_DIGITS[group] & _KEEP[g][places]
    cells = np.empty((x.size, 3 + 4 * groups), np.uint8)
    cells[:, 0] = np.signbit(x) * np.uint8(45)
    cells[:, 1:3] = (48, 46)  # "0."
    cells[:, 3:] = area.view(np.uint8)
    for index in slow:
        text = _shortest_one(values[index]).encode()
        cells[index] = 0
        cells[index, : len(text)] = np.frombuffer(text, np.uint8)
    return cells


def _at_places(magnitude: np.ndarray, low: np.ndarray, high: np.ndarray, places: np.ndarray):
    """(found, digits): the integer nearest to magnitude · 10**places, and whether digits / 10**places lies
    strictly inside (low, high) as float64 reads it back (the double nearest to the decimal)."""
    scale = _POW10[places]
    digits = np.rint(magnitude * scale)
    read = digits / scale
    return (low < read) & (read < high), digits


def _shortest_one(value: np.generic) -> str:
    """One value's shortest form, any magnitude, inf and NaN: the test of :func:`shortest`, in Python; a
    decimal exactly at an end of the interval counts when it reads back as the value (ties to even)."""
    x = float(value)
    if not np.isfinite(x) or x == 0:
        return repr(x)
    dtype = np.asarray(value).dtype
    with np.errstate(all="ignore"):  # over: the largest value's neighbour; under: a subnormal's
        low = (x + float(np.nextafter(value, dtype.type(-np.inf)))) / 2
        high = (x + float(np.nextafter(value, dtype.type(np.inf)))) / 2
    if np.isinf(high) or np.isinf(low):  # the largest finite value: half an ulp past it reads as inf
        low, high = (2 * x - high, high) if np.isinf(low) else (low, 2 * x - low)
    with decimal.localcontext(_CONTEXT):  # every operation below exact, whatever the caller's context
        return _nearest_inside(x, low, high, value, dtype)


def _nearest_inside(x: float, low: float, high: float, value: np.generic, dtype: np.dtype) -> str:
    """The shortest decimal strictly inside (low, high), or at an end that reads back as ``value``."""
    for k in range(1, 18):
        nearest = Decimal(f"{x:.{k - 1}e}")
        unit = Decimal(1).scaleb(nearest.adjusted() - k + 1)
        # the nearest k-digit decimal, or its neighbour on the wider side of a power of two's interval
        for option in sorted((nearest, nearest - unit, nearest + unit), key=lambda d: abs(d - Decimal(x))):
            candidate = float(option)
            if low < candidate < high:
                return repr(candidate)
            exact = Decimal(candidate) == option
            if candidate in (low, high) and exact and dtype.type(candidate) == value:  # ties to even
                return repr(candidate)
    return repr(x)
