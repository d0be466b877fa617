"""What the framework adapters share: the inputs of their modules, checked once for every framework (``x``'s
shape, the position ids and the offset) and how the encoding is arranged against ``x``.

The adapters (:mod:`posenc.torch`, :mod:`posenc.jax`) turn their inputs into arrays of their framework and
call these functions with the array namespace of :mod:`posenc.portable`; the offset is never added here
(in the positions' own dtype it could round or wrap): it is handed on, and the encoders add it exactly.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import layouts
from .core import Options
from .errors import PosencTypeError, PosencValueError
from .portable.backend import Backend

#: Why an input that requires a gradient is refused where posenc defines no derivative (the rotary cos/sin,
#: the equivalents of models' own coordinate embeddings; ``name``: the input, ``what``: the values,
#: ``detach``: how the caller of a framework drops the gradient).
NOT_DIFFERENTIABLE = (
    "{name}: a gradient is asked for, but posenc defines no derivative of {what} there: the values are "
    "computed exactly outside automatic differentiation, so the gradient would be lost silently (zero); "
    "pass {detach} where no gradient needs to reach {name}"
)

#: ml_dtypes' floating formats narrower than float32 (JAX's bfloat16, float8_*, ...): each of their values is
#: a float32, so positions in them are converted to float32, exactly.
_NARROW_FLOATS = ("bfloat16", "float8_", "float6_", "float4_")


def cached(cache: dict, key: Any, value: Any, budget: int, size: Any) -> list:
    """``cache[key] = value`` as its newest entry, then the oldest other entries dropped until the sizes
    (``size(entry)``, bytes) fit ``budget``; the keys dropped. The adapters' table caches: a result is the
    caller's own copy, so dropping an entry changes no result, only what is built again.

    >>> held = {"a": 3, "b": 4}
    >>> cached(held, "c", 5, 9, lambda n: n), held
    (['a'], {'b': 4, 'c': 5})
    """
    cache.pop(key, None)
    cache[key] = value
    total, dropped = sum(size(entry) for entry in cache.values()), []
    for old in list(cache):
        if total <= budget:
            break
        if old != key:
            total -= size(cache.pop(old))
            dropped.append(old)
    return dropped


def exact_float32(array: np.ndarray) -> np.ndarray:
    """``array`` as float32 when its dtype is one of ml_dtypes' narrow floats (bfloat16, float8_*, float6_*,
    float4_*: every value of each is a float32, so nothing is rounded); otherwise ``array`` itself."""
    if array.dtype.name.startswith(_NARROW_FLOATS):
        return array.astype(np.float32)
    return array


def batch_and_seq(shape: tuple[int, ...], d_model: int, batch_first: bool) -> tuple[tuple[int, ...], int]:
    """``(batch shape, seq)`` of an ``x`` of ``shape``: ``(..., seq, d_model)`` with ``batch_first``, else
    ``(seq, batch, d_model)``; ValueError naming the expected shape otherwise."""
    expected = "(..., seq, d_model), e.g. (batch, seq, d_model)," if batch_first else "(seq, batch, d_model)"
    rank_ok = len(shape) >= 2 if batch_first else len(shape) == 3
    if not rank_ok or shape[-1] != d_model:
        raise ValueError(f"x must have shape {expected} with d_model={d_model}; got shape {tuple(shape)}")
    if batch_first:
        return tuple(shape[:-2]), shape[-2]
    return (shape[1],), shape[0]


def orient(ops: Backend, pe: Any, batch_first: bool) -> Any:
    """``(seq, d)`` or ``(batch, seq, d)`` encodings arranged to broadcast against ``x``."""
    if batch_first:
        return pe
    return pe[:, None] if pe.ndim == 2 else ops.swap01(pe)


def int_offset(offset: Any) -> int | None:
    """An integer offset (Python or NumPy, not bool) as an int >= 0; None when ``offset`` is an array."""
    if isinstance(offset, bool | np.bool_):
        raise TypeError(f"offset must be an int or an integer array; got {offset!r}")
    if isinstance(offset, int | np.integer):
        value = offset if isinstance(offset, int) else int(offset)  # a traced SymInt stays symbolic
    elif hasattr(offset, "shape") and hasattr(offset, "dtype"):
        return None  # an array (never read here: a 0-d tensor on a device would sync)
    else:
        try:
            value = operator.index(offset)
        except TypeError:
            raise TypeError(f"offset must be an int or an integer array; got {offset!r}") from None
    if value < 0:
        raise ValueError(f"offset must be >= 0; got {value}")
    return value


def positions_and_offset(
    ops: Backend,
    seq: int,
    batch_shape: tuple[int, ...],
    positions: Any,
    offset: Any,
    *,
    host: bool,
    arange: Any,
) -> tuple[Any, Any]:
    """The position ids to encode and the offset to add to them (None, or an integer array shaped to
    broadcast against them, at their rank: ids ``(1, seq)`` against an offset ``(batch, 1)``), both checked
    against ``x``: ``positions`` is ``None`` (``arange(seq)``) or an array of shape ``(seq,)`` or
    ``batch_shape + (seq,)``; ``offset`` an int or an integer array of shape ``()`` or ``batch_shape`` (x's
    batch axes: ``(batch,)`` for a 3-D ``x``). ``host``: the values may be read (negative offsets are refused
    then); ``arange``: makes ``arange(seq)`` where ``x`` is."""
    if positions is None:
        positions = arange()
    else:
        if str(positions.dtype) in ("bool", "torch.bool"):
            raise PosencTypeError(
                f"positions must be integers or real numbers, not booleans; got a bool array of shape "
                f"{tuple(positions.shape)}; to turn a mask into positions use "
                "posenc.positions.from_attention_mask",
                parameter="positions",
            )
        if not (ops.is_floating(positions.dtype) or ops.is_integer(positions.dtype)):
            raise PosencTypeError(
                f"positions must be integers or real numbers; got dtype {positions.dtype}",
                parameter="positions",
            )
        shapes = [(seq,), (*batch_shape, seq)]
        # told apart by rank, then compared with the sizes of x they must equal: comparing (batch, seq) with
        # (seq,) would ask batch == seq, a guard that ties the two under torch.export with a dynamic length
        expected = (
            shapes[0] if positions.ndim == 1 else shapes[1] if positions.ndim == len(shapes[1]) else None
        )
        if expected is None or tuple(positions.shape) != expected:
            raise ValueError(
                f"positions must have shape {shapes[0]} or {shapes[1]} to match x; "
                f"got shape {tuple(positions.shape)}"
            )
    value = int_offset(offset)
    if value is not None:
        return positions, (None if value == 0 else value)
    if not ops.is_integer(offset.dtype):
        raise TypeError(f"offset must be an int or an integer array; got dtype {offset.dtype}")
    if offset.ndim and offset.ndim == len(batch_shape) and tuple(offset.shape) == tuple(batch_shape):
        offset = offset[..., None]  # one per sequence: (batch, 1), or x's batch axes + (1,)
    elif offset.ndim != 0:
        accepted = f"() or x's batch shape {tuple(batch_shape)} (one per sequence)" if batch_shape else "()"
        raise PosencValueError(
            f"offset must be an int or an integer array of shape {accepted}; got shape {tuple(offset.shape)}",
            parameter="offset",
        )
    if host and bool((offset < 0).any()):
        raise ValueError(f"offset must be >= 0; got {offset.reshape(-1).tolist()}")
    if offset.ndim >= 2 and positions.ndim == 1:  # (1, seq) against (batch, 1): one rank, no promotion
        positions = positions[(None,) * (offset.ndim - 1)]
    return positions, offset


@functools.lru_cache(maxsize=64)
def derivative_plan(options: Options) -> tuple[int, np.ndarray, np.ndarray]:
    """How ``options``' encoding changes with the position, column by column: ``(n, take, factor)`` with

        d PE[..., j] / dp = factor[j] · SC[..., take[j]],

    SC = [sin p ω_0, ..., sin p ω_(n−1), cos p ω_0, ..., cos p ω_(n−1)] the values of the n frequencies the
    encoding computes (ω_i = :meth:`Options.constants`, the scale included): a sine's column takes ω_i times
    its cosine, a cosine's −ω_i times its sine, odd="zero"'s zero column nothing. Read-only arrays ``(d,)``.

    >>> n, take, factor = derivative_plan(Options(4, 100.0, 0.0, 1.0, "interleaved", "zero"))
    >>> n, take.tolist(), factor.tolist()  # d/dp [sin p, cos p, sin p/10, cos p/10]
    (2, [2, 0, 3, 1], [1.0, -1.0, 0.1, -0.1])
    """
    omegas = options.constants()[0]
    n, d = len(omegas), options.d_model
    take, factor = np.zeros(d, np.int64), np.zeros(d, np.float64)
    pairs = layouts.pair_columns(options.layout, n)
    for columns, partner, sign in zip(pairs, (n, 0), (1.0, -1.0), strict=True):
        kept = columns < d  # odd="literal"/"drop": the last frequency's second column falls off the end
        take[columns[kept]] = partner + np.arange(n)[kept]
        factor[columns[kept]] = sign * omegas[kept]
    take.flags.writeable = factor.flags.writeable = False
    return n, take, factor


def slope(ops: Backend, rows_in: Any, plan: tuple[int, Sequence[int], Sequence[float]]) -> Any:
    """d PE / dp at the positions ``rows_in`` encodes, by ``plan`` (:func:`derivative_plan`'s, its arrays as
    sequences if need be): ``rows_in(layout)`` returns their encoding with ``layout`` (``"sin_cos"``, and
    ``"cos_sin"`` where the last cosine falls off an odd width) and the plan's other options, in the dtype
    the derivative is wanted in; shape ``positions.shape + (d_model,)``. From exact values of sin p ω_i and
    cos p ω_i, each rounded once to that dtype, times ω_i rounded once: within ~2 units of it. Where a
    derivative is defined (an encoding's real positions: ``posenc.torch``'s autograd, ``posenc.jax``'s JVP),
    d/dp sin(p ω) = ω cos(p ω).
    """
    n, take, factor = plan
    first = rows_in("sin_cos")
    if 2 * n > len(take):
        values = ops.concat([first[..., :n], rows_in("cos_sin")[..., :n]], -1)
    else:
        values = first[..., : 2 * n]
    gathered = values[..., ops.asarray(np.array(take, np.int64), values)]  # copies: the plan's are shared
    # at the values' rank, explicitly: JAX's jax_numpy_rank_promotion="raise" refuses (..., d) times (d,)
    factor = np.array(factor, np.float64).reshape((1,) * (gathered.ndim - 1) + (-1,))
    return gathered * ops.cast(ops.asarray(factor, values), values.dtype)
