"""The option keywords of every entry point, the validated options of a request, and what is derived from
them once per options (cached).

The option keywords (``base``, ``shift``, ``scale``, ``layout``, ``odd``) have one owner here:
:class:`OptionKeywords` types them (``**options: Unpack[OptionKeywords]``), and :func:`takes_options` gives a
function declared with ``**options`` each of them as a keyword-only parameter with its default from
:data:`posenc.defaults.OPTIONS` (in its signature: ``help()``, ``inspect.signature``, the documentation and
``posenc plot`` read it), refusing any other keyword.

:class:`Options` is the named interface through which the entry points and the adapters (``posenc.torch``,
``posenc.jax``) validate their arguments as :func:`posenc.encode` does. Per options, a bounded LRU cache keeps
the frequency constants (:func:`constants`) and the column plan (:func:`column_plan`, from
:func:`posenc.layouts.placement`, the one owner of the layout mapping).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypedDict, TypeVar

import numpy as np

from .. import defaults, layouts, validation
from . import highprec

# Per-options constants kept (frequencies, limbs, column plans): a bounded LRU cache.
CACHED_OPTIONS = 256

F = TypeVar("F", bound=Callable[..., Any])
_OWN = object()  # takes_options(dtype=_OWN): the function declares its own dtype, if any


class OptionKeywords(TypedDict, total=False):
    """The option keywords of :func:`posenc.encode` and of every function that builds encodings (each with
    its default in :data:`posenc.defaults.OPTIONS`): the type of ``**options: Unpack[OptionKeywords]``."""

    base: float
    shift: float
    scale: float
    layout: str
    odd: str


class TableOptions(OptionKeywords, total=False):
    """The option keywords and the output ``dtype``: what a function that builds a table passes on to
    :func:`posenc.table` (``**options: Unpack[TableOptions]``, with ``@takes_options(dtype=...)``)."""

    dtype: Any


def takes_options(
    function: F | None = None, *, layout: bool = True, before: str = "dtype", dtype: Any = _OWN
) -> Any:
    """Decorate a function declared with ``**options``: it takes the option keywords of :func:`posenc.encode`.

    Its signature (``inspect.signature``, ``help()``, the documentation) shows ``base``, ``shift``, ``scale``,
    ``layout`` (unless ``layout=False``) and ``odd`` as keyword-only parameters with their defaults, placed
    before the parameter ``before`` when the function has one (``dtype``: the order of :func:`posenc.encode`),
    else last; with ``dtype=``, a parameter ``dtype`` with that default follows them (:class:`TableOptions`).
    At a call, ``options`` holds every one of them (those not given with their defaults); a keyword the
    function does not take is a TypeError that names the function, that keyword and the keywords it takes.
    Use as ``@takes_options`` or ``@takes_options(layout=False, before=..., dtype=...)``.
    """
    fill = {name: value for name, value in defaults.OPTIONS.items() if layout or name != "layout"}
    if dtype is not _OWN:
        fill["dtype"] = dtype

    def decorate(function: F) -> F:
        signature = inspect.signature(function)
        *named, variadic = signature.parameters.values()
        if variadic.kind is not inspect.Parameter.VAR_KEYWORD or any(p.name in fill for p in named):
            raise TypeError(f"{function.__qualname__} must end in **options and leave the options to it")
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value, annotation=_TYPES[name])
            for name, value in fill.items()
        ]
        at = next((i for i, p in enumerate(named) if p.name == before), len(named))
        signature = signature.replace(parameters=[*named[:at], *added, *named[at:]])
        takes = tuple(
            p.name
            for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        )
        accepted = frozenset(takes)
        label = _label(function)
        by_position = [p.name for p in named if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if any(p.kind is p.VAR_POSITIONAL for p in named):
            by_position = []  # *args: any number
        keyword_only = [name for name in takes if name not in by_position]

        @functools.wraps(function)
        def with_options(*args: Any, **keywords: Any) -> Any:
            if by_position and len(args) > len(by_position):
                raise _too_many(label, args, by_position, keyword_only)
            if not keywords.keys() <= accepted:
                raise _unknown(label, [k for k in keywords if k not in accepted], takes)
            return function(*args, **{**fill, **keywords})

        with_options.__signature__ = signature  # type: ignore[attr-defined]
        return with_options  # type: ignore[return-value]

    return decorate if function is None else decorate(function)


def frequency_options(options: Mapping[str, Any]) -> OptionKeywords:
    """``base``, ``shift``, ``scale`` and ``odd`` of ``options``, those it holds: the options that set the
    frequencies (the keywords of :func:`posenc.frequencies`; not ``layout``, ``dtype``, ...)."""
    return {name: options[name] for name in _FREQUENCY if name in options}  # type: ignore[return-value]


_FREQUENCY = ("base", "shift", "scale", "odd")


_TYPES = {
    "base": "float",
    "shift": "float",
    "scale": "float",
    "layout": "str",
    "odd": "str",
    "dtype": "npt.DTypeLike",
}


def _label(function: Callable[..., Any]) -> str:
    """How a message names ``function``: ``encode()``; a constructor by its class,
    ``SinusoidalPositionalEncoding()``."""
    name = function.__qualname__.rpartition("<locals>.")[2]
    return f"{name.removesuffix('.__init__')}()"


def _too_many(label: str, args: tuple, by_position: list[str], keyword_only: list[str]) -> TypeError:
    """The TypeError for more positional arguments than the function takes by position."""
    names = [name for name in by_position if name != "self"]
    given = len(args) - (len(by_position) - len(names))
    extra = ", ".join(" ".join(validation.shorten(value).split()) for value in args[len(by_position) :])
    return TypeError(
        f"{label} takes {len(names)} argument{'s' if len(names) != 1 else ''} by position "
        f"({', '.join(names)}); got {given} (the extra: {extra}); pass the others by keyword: "
        f"{', '.join(keyword_only)}"
    )


def _unknown(label: str, unknown: list[str], takes: tuple[str, ...]) -> TypeError:
    import difflib  # only when refusing

    close = [m for key in unknown for m in difflib.get_close_matches(key, takes, n=1)]
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    plural = "s" if len(unknown) > 1 else ""
    return TypeError(
        f"{label} got an unexpected keyword argument{plural} {', '.join(map(repr, unknown))}; it takes "
        f"{', '.join(takes)}{hint}"
    )


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
        if _PLAIN.issuperset(types):
            return _checked(values, types)
        return cls._check(*values)

    @classmethod
    def _check(cls, d_model: Any, base: Any, shift: Any, scale: Any, layout: Any, odd: Any) -> Options:
        d_model = validation.d_model(d_model)
        odd = layouts.check_odd(odd)
        validation.plan(d_model, odd)  # refuses an odd width under odd="error"
        return cls(
            d_model,
            validation.base(base),
            validation.shift(shift, d_model, odd),
            validation.scale(scale),
            layouts.check_layout(layout),
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
    count, twice_half = validation.plan(options.d_model, options.odd)
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
