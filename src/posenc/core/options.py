"""The validated options of a request, and what is derived from them once per options (cached).

:class:`Options` is the named interface through which the adapters (``posenc.torch``, ``posenc.jax``)
validate their arguments as :func:`posenc.encode` does. Per options, a bounded LRU cache keeps the
frequency constants (:func:`constants`) and the column plan (:func:`column_plan`, from
:func:`posenc.layouts.placement`, the one owner of the layout mapping).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numpy as np

from .. import _validate, layouts
from . import highprec

# Per-options constants kept (frequencies, limbs, column plans): a bounded LRU cache.
CACHED_OPTIONS = 256


class Options(NamedTuple):
    """The validated options of a request."""

    d_model: int
    base: float
    shift: float
    scale: float
    layout: str
    odd: str

    @classmethod
    def check(cls, d_model: Any, base: Any, shift: Any, scale: Any, layout: Any, odd: Any) -> Options:
        """The validated options; arguments of plain types (int, float, str) are validated once per values
        and types (a bounded cache: True == 1 and 1 == 1.0, so the types are part of the key)."""
        values = (d_model, base, shift, scale, layout, odd)
        types = tuple(map(type, values))
        if all(t in _PLAIN for t in types):
            return _checked(values, types)
        return cls._check(*values)

    @classmethod
    def _check(cls, d_model: Any, base: Any, shift: Any, scale: Any, layout: Any, odd: Any) -> Options:
        d_model = _validate.d_model(d_model)
        odd = _validate.odd(odd)
        _validate.plan(d_model, odd)  # refuses an odd width under odd="error"
        return cls(
            d_model,
            _validate.base(base),
            _validate.shift(shift, d_model, odd),
            _validate.scale(scale),
            _validate.layout(layout),
            odd,
        )

    def constants(self) -> tuple[np.ndarray, np.ndarray]:
        """The frequencies ω_i (float64) and the limbs of ω_i / 2π, ``(5, n)`` C-contiguous: read-only
        arrays, computed once per options (:func:`constants`)."""
        return constants(self)


_PLAIN = frozenset({int, float, str})


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def _checked(values: tuple[Any, ...], types: tuple[type, ...]) -> Options:
    """:meth:`Options.check` of plain values (a refusal raises and is not cached)."""
    return Options._check(*values)


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def constants(options: Options) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Options.constants`: the ~200-bit computation (~0.3 ms at d_model 512) runs once per options.
    A bounded LRU cache keyed on every option (the whole validated tuple; lru_cache is thread-safe), of
    immutable values: the arrays are read-only."""
    count, twice_half = _validate.plan(options.d_model, options.odd)
    omegas, limbs = highprec.frequency_constants(
        count, options.base, twice_half, options.shift, options.scale
    )
    omegas, limbs = np.ascontiguousarray(omegas), np.ascontiguousarray(limbs)
    omegas.flags.writeable = limbs.flags.writeable = False
    return omegas, limbs


@functools.lru_cache(maxsize=CACHED_OPTIONS)
def column_plan(options: Options, n: int) -> tuple[int, int, int, int, int, int, int]:
    """(n, d_model, sin offset, cos offset, stride, sin count, cos count) of :meth:`Spec.column_plan
    <posenc.core.Spec.column_plan>`: the placement of ``options.layout`` (:func:`posenc.layouts.placement`),
    and how many of the n sines and cosines fit in the d_model columns (an extra frequency's last column,
    under odd="literal"/"drop", falls off the end)."""
    d = options.d_model
    sin_offset, cos_offset, stride = layouts.placement(options.layout, n)

    def fitting(offset: int) -> int:  # frequencies i < n with offset + stride · i < d
        return max(0, min(n, -(-(d - offset) // stride)))

    return n, d, sin_offset, cos_offset, stride, fitting(sin_offset), fitting(cos_offset)
