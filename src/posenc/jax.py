"""JAX adapter: the core's ``encode``/``table`` for JAX arrays, and a Flax (NNX) module.

The mathematics stays in :mod:`posenc.core` (NumPy, exact); this module owns arrays, jit, the cache and the
module. Values are computed on the host in high precision and rounded once to the requested dtype, so
float32 results are bit-identical to the NumPy core and float16/bfloat16 results are correctly rounded —
with ``jax_enable_x64`` off (JAX's default: no float64 on the device, int32 positions) as well as on.
Nothing is ever computed in the device's float32 or bfloat16.

Where the work runs:

* **Concrete positions** (NumPy arrays, lists, ordinary ``jax.Array`` values, also ones closed over inside
  ``jax.jit``): computed on the host at once; under ``jit`` the result is a constant of the program.
* **Traced positions** (arguments of a jitted function: position ids, a decoding step ``offset``): the
  device algorithm (:mod:`posenc._exact_array`: int32 arithmetic, no float64 even with x64 off) runs inside
  the program, on the device, elementwise — so one compiled program serves every position, ``vmap`` and
  sharding work like any elementwise op, and no callback or host transfer is involved. Invalid traced
  positions (NaN, inf, |p| >= 2**31, an offset that overflows) give rows of NaN.
* **The module, positions ``None`` and an ``int`` offset**: rows of a cached table — a slice of a device
  array when eager; under ``jit`` a constant of ``(seq, d_model)`` (up to :data:`CONSTANT_LIMIT_BYTES`, then
  the device algorithm), which XLA slices per device when the sequence axis is sharded.

Not differentiable with respect to the positions (the encoding is a constant of the model); gradients with
respect to ``x`` flow through the module as usual.

>>> import jax.numpy as jnp
>>> encode(jnp.array([0, 1]), 4)
Array([[0.        , 1.        , 0.        , 1.        ],
       [0.84147096, 0.5403023 , 0.00999983, 0.99995   ]], dtype=float32)
"""

from __future__ import annotations

import functools
import threading
from typing import Any

try:
    import jax
    import jax.numpy as jnp
except ImportError as error:  # pragma: no cover - exercised only without jax
    raise ImportError("posenc.jax needs JAX: pip install 'posenc[jax]'") from error

import numpy as np

from . import _exact_array, _module_input, _validate, core

# SinusoidalPositionalEncoding is defined on first use (it imports flax): see __getattr__ below.
__all__ = ["SinusoidalPositionalEncoding", "clear_cache", "encode", "table"]  # noqa: F822

#: Cached tables stop growing at this many bytes; longer requests are computed for just their positions.
CACHE_LIMIT_BYTES = 256 * 2**20

#: Under ``jit``, the module embeds contiguous encodings up to this size as constants; larger ones are
#: computed by the device algorithm when the program runs (a constant is compiled into the executable).
CONSTANT_LIMIT_BYTES = 16 * 2**20

_JNP = _exact_array.Backend(jnp, "jax")
_NUMPY = _exact_array.Backend(np, "numpy")


def encode(
    positions: Any,
    d_model: int,
    *,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: Any = jnp.float32,
) -> jax.Array:
    """``posenc.encode`` for JAX: shape ``positions.shape + (d_model,)``, jit- and vmap-compatible.

    PE(p, 2i) = sin(p ω_i), PE(p, 2i+1) = cos(p ω_i), ω_i = base ** (-i / (d_model // 2 - shift)), laid
    out as ``layout`` says. Positions are integers or reals of any shape, |p| < 2**31: a ``jax.Array``
    (traced ones included), a NumPy array or a list. ``dtype`` is float32 (default), float16, bfloat16, or
    float64 when ``jax_enable_x64`` is on. float32 is bit-identical to :func:`posenc.encode`; float16 and
    bfloat16 are the exact values rounded once.

    With x64 off, traced float positions are float32: a real position is rounded to float32 before posenc
    sees it (pass a NumPy float64 array, or enable x64, for float64 positions). Out-of-range or non-finite
    traced positions give rows of NaN (a program cannot raise); concrete ones raise ``ValueError``.

    >>> encode(jnp.array([2]), 4, base=100.0, layout="sin_cos")
    Array([[ 0.9092974 ,  0.19866933, -0.41614684,  0.9800666 ]], dtype=float32)
    """
    return _encode_any(positions, core.Options.check(d_model, base, shift, scale, layout, odd), _dtype(dtype))


def table(
    length: int,
    d_model: int,
    *,
    start: Any = 0,
    base: float = 10000.0,
    shift: float = 0,
    scale: float = 1.0,
    layout: str = "interleaved",
    odd: str = "zero",
    dtype: Any = jnp.float32,
) -> jax.Array:
    """``posenc.table`` for JAX: positions ``start .. start + length - 1``, shape ``(length, d_model)``.

    ``length`` is a Python int (a shape); ``start`` an int, or a traced integer scalar under ``jit`` (one
    program for every start, e.g. a decoding step). Row k is bit-identical to ``encode(start + k)``.

    >>> table(2, 4, start=1)[:, 0]
    Array([0.84147096, 0.9092974 ], dtype=float32)
    """
    length = _validate.integer("length", length, minimum=0)
    options = core.Options.check(d_model, base, shift, scale, layout, odd)
    dt = _dtype(dtype)
    if _traced(start):
        start = jnp.asarray(start)
        if start.ndim != 0 or not jnp.issubdtype(start.dtype, jnp.integer):
            raise TypeError(
                f"start must be an integer scalar; got a traced {start.dtype} of shape {start.shape}"
            )
        return _encode_traced(jnp.arange(length, dtype=start.dtype), options, dt, offset=start)
    start = _validate.integer("start", start, minimum=-(_validate.MAX_POSITION - 1))
    values = core.table(length, options.d_model, start=start, dtype=dt, **_core_options(options))
    return jnp.asarray(values)


def clear_cache() -> None:
    """Drop every cached table, on the host and on the devices (they are rebuilt on demand)."""
    with _CACHE_LOCK:
        _HOST_CACHE.clear()
        _DEVICE_CACHE.clear()


# --- the Flax module, defined when first used (flax is imported then) ---------------------------------


def __getattr__(name: str) -> Any:
    if name == "SinusoidalPositionalEncoding":
        return _module_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "SinusoidalPositionalEncoding"})


@functools.cache
def _module_class() -> type:
    try:
        from flax import nnx
    except ImportError as error:
        raise ImportError(
            "posenc.jax.SinusoidalPositionalEncoding is a Flax (NNX) module and needs Flax: "
            "pip install 'posenc[flax]'"
        ) from error

    class SinusoidalPositionalEncoding(nnx.Module):
        """``dropout(x + PE)``, exact: the Flax (NNX) twin of ``posenc.torch.SinusoidalPositionalEncoding``.

        Args:
            d_model: the width of ``x``'s last axis.
            base, shift, layout: as in :func:`posenc.encode` (the defaults are the paper's).
            dropout: dropout probability applied to the sum (``nnx.Dropout``; needs ``rngs`` in training).
            batch_first: ``x`` is ``(batch, seq, d_model)`` (or any ``(..., seq, d_model)``); with False,
                ``(seq, batch, d_model)``.
            max_len: a cache hint only — longer sequences work.
            rngs: ``nnx.Rngs`` for dropout (its ``dropout`` stream, else ``default``).

        ``__call__(x, positions=None, *, offset=0, deterministic=None, rngs=None)``:
            positions: ``(seq,)`` or ``(batch, seq)``, integer or real, concrete or traced (left padding,
                packed sequences, a context-parallel shard's global positions); default
                ``offset + arange(seq)``.
            offset: an int, or an integer array of shape ``()`` or ``(batch,)``, added to the positions
                (KV-cache decoding: step t equals row t of the full pass). Under ``jit`` pass an array, so
                one compiled step serves every t; an int is a static argument (one program per value).
            deterministic: True disables dropout; None takes the module's setting (``nnx.view(module,
                deterministic=True)`` or ``module.eval()`` for inference).
            rngs: random keys for dropout at this call, overriding the module's.

        PE is the exact value rounded once to ``x.dtype`` (float32, float16, bfloat16, or float64 with x64),
        then added to ``x`` in ``x.dtype``. The module's state (``nnx.state``) holds no table — only the
        dropout keys when ``rngs`` is given; tables are cached per options and dtype outside it.

        Inside ``jax.shard_map`` the module sees the local shard only: pass each shard's global
        ``positions`` (see :mod:`posenc.sharding`), never rely on the default ``arange(seq)`` there.
        """

        def __init__(
            self,
            d_model: int,
            *,
            base: float = 10000.0,
            shift: float = 0,
            scale: float = 1.0,
            layout: str = "interleaved",
            odd: str = "zero",
            dropout: float = 0.0,
            batch_first: bool = True,
            max_len: int | None = None,
            rngs: nnx.Rngs | None = None,
        ) -> None:
            options = core.Options.check(d_model, base, shift, scale, layout, odd)
            self.d_model, self.base, self.shift, self.scale, self.layout, self.odd = options
            self.max_len, self.batch_first, rate = _validate.module_options(max_len, batch_first, dropout)
            self.dropout = nnx.Dropout(rate, rngs=rngs)

        def __call__(
            self,
            x: jax.Array,
            positions: Any = None,
            *,
            offset: Any = 0,
            deterministic: bool | None = None,
            rngs: Any = None,
        ) -> jax.Array:
            y = x + self.encoding_for(x, positions, offset=offset)
            off = self.dropout.deterministic if deterministic is None else deterministic
            if self.dropout.rate > 0 and not off and rngs is None and self.dropout.rngs is None:
                raise ValueError(
                    f"dropout={self.dropout.rate} in training mode needs random keys: construct the module "
                    "with rngs=nnx.Rngs(0), pass rngs= to the call, or pass deterministic=True (inference)"
                )
            return self.dropout(y, deterministic=deterministic, rngs=rngs)

        def encoding_for(self, x: jax.Array, positions: Any = None, *, offset: Any = 0) -> jax.Array:
            """The PE that ``__call__`` adds to ``x`` (before dropout), shaped to broadcast against it."""
            batch_shape, seq = self._check_x(x)
            options = core.Options(self.d_model, self.base, self.shift, self.scale, self.layout, self.odd)
            dt = np.dtype(x.dtype)
            if positions is None and _is_int(offset):
                pe = _contiguous(options, dt, seq, _offset_int(offset, seq), self.max_len or 0, _traced(x))
            else:
                traced = _traced(positions) or _traced(offset)
                if positions is not None:
                    positions = jnp.asarray(positions) if _traced(positions) else _host_positions(positions)
                if _is_int(offset) and traced:
                    _traced_int_offset(offset)
                elif not _is_int(offset) and not _traced(offset):
                    offset = _host_offset(offset)
                ids, extra = _module_input.positions_and_offset(
                    _JNP if traced else _NUMPY,
                    seq,
                    batch_shape,
                    positions,
                    offset,
                    host=not traced,
                    arange=lambda: (jnp if traced else np).arange(seq),
                )
                pe = _encode_any(ids, options, dt, offset=extra)
            return _module_input.orient(_JNP, jnp.asarray(pe), self.batch_first)

        def _check_x(self, x: Any) -> tuple[tuple[int, ...], int]:
            if not isinstance(x, jax.Array | np.ndarray):
                raise TypeError(f"x must be a jax.Array; got {type(x).__name__}")
            if np.dtype(x.dtype).name not in _validate.DTYPES:
                raise TypeError(f"x must be float64, float32, float16 or bfloat16; got {x.dtype}")
            return _module_input.batch_and_seq(tuple(x.shape), self.d_model, self.batch_first)

    SinusoidalPositionalEncoding.__module__ = __name__
    return SinusoidalPositionalEncoding


# --- computing --------------------------------------------------------------------------------------

_HOST_CACHE: dict[tuple, np.ndarray] = {}
_DEVICE_CACHE: dict[tuple, jax.Array] = {}
_CACHE_LOCK = threading.Lock()


def _encode_any(positions: Any, options: core.Options, dt: np.dtype, offset: Any = None) -> jax.Array:
    """Encodings of concrete positions (computed now, on the host) or traced ones (the device algorithm)."""
    if _traced(positions) or _traced(offset):
        return _encode_traced(jnp.asarray(positions), options, dt, offset=offset)
    positions = _host_positions(positions)
    if offset is not None and positions.dtype.kind == "f":  # the sum may be no float64: add it exactly
        _validate.positions(positions)
        values = _exact_array.encode(_NUMPY, positions, _request(options, dt.name), np.asarray(offset))
        if np.isnan(values).any():
            raise ValueError(
                f"positions + offset must satisfy |p| < 2**31 = {_validate.MAX_POSITION}; lower the offset"
            )
        return jnp.asarray(values)
    if offset is not None:
        positions = positions.astype(np.int64) + offset
    values = core.encode(positions, options.d_model, dtype=dt, **_core_options(options))
    return jnp.asarray(values)


def _encode_traced(
    positions: jax.Array, options: core.Options, dt: np.dtype, *, offset: Any = None
) -> jax.Array:
    """Encodings of traced positions (+ an integer offset, added exactly): the device algorithm
    (:mod:`posenc._exact_array`) inside the program — no callback, no float64 with x64 off; invalid
    positions (NaN, inf, |p| >= 2**31) give rows of NaN."""
    if positions.dtype == jnp.bool_:
        raise TypeError(
            "positions must be integers or real numbers, not booleans; "
            "to turn a mask into positions use posenc.positions.from_attention_mask"
        )
    if not (jnp.issubdtype(positions.dtype, jnp.integer) or jnp.issubdtype(positions.dtype, jnp.floating)):
        raise TypeError(f"positions must be integers or real numbers; got dtype {positions.dtype}")
    request = _request(options, dt.name)
    if offset is not None:
        offset = jnp.asarray(offset)
    return _exact_array.encode(_exact_array.backend_of(positions), positions, request, offset)


@functools.lru_cache(maxsize=64)
def _request(options: core.Options, fmt: str) -> Any:
    return _exact_array.request_for(options, fmt)


def _contiguous(
    options: core.Options, dt: np.dtype, seq: int, offset: int, min_rows: int, traced: bool
) -> jax.Array:
    """Rows ``offset .. offset + seq - 1``: a device slice (eager), a constant or the device algorithm
    (under jit)."""
    d_model = options.d_model
    rows = max(offset + seq, min_rows)
    if not traced:
        cached = _device_table(options, dt, rows)
        if cached is not None:
            return jax.lax.dynamic_slice_in_dim(cached, offset, seq)
    elif seq * d_model * dt.itemsize > CONSTANT_LIMIT_BYTES:
        return _encode_traced(jax.lax.iota(jnp.int32, seq), options, dt, offset=jnp.int32(offset))
    else:
        cached = _host_table(options, dt, rows)
        if cached is not None:
            return jnp.asarray(cached[offset : offset + seq])
    values = core.table(seq, d_model, start=offset, dtype=dt, **_core_options(options))
    return jnp.asarray(values)


def _host_table(options: core.Options, dt: np.dtype, rows: int) -> np.ndarray | None:
    """A cached read-only NumPy table of at least ``rows`` rows; None when it would be too large."""
    d_model = options.d_model
    key = (*options, dt.name)
    cached = _HOST_CACHE.get(key)
    if cached is not None and cached.shape[0] >= rows:
        return cached
    if rows * d_model * dt.itemsize > CACHE_LIMIT_BYTES:
        return None
    size = 1 << max(10, (rows - 1).bit_length())  # grow geometrically: few rebuilds
    size = min(size, max(rows, CACHE_LIMIT_BYTES // (d_model * dt.itemsize)))
    with _CACHE_LOCK:
        cached = _HOST_CACHE.get(key)
        if cached is None or cached.shape[0] < rows:
            cached = core.table(size, d_model, dtype=dt, **_core_options(options))
            cached.flags.writeable = False
            _HOST_CACHE[key] = cached
            _DEVICE_CACHE.pop(key, None)
    return cached


def _device_table(options: core.Options, dt: np.dtype, rows: int) -> jax.Array | None:
    """The cached table as a (default-device, uncommitted) ``jax.Array``; None when too large."""
    host = _host_table(options, dt, rows)
    if host is None:
        return None
    key = (*options, dt.name)
    cached = _DEVICE_CACHE.get(key)
    if cached is None or cached.shape[0] != host.shape[0]:
        cached = jnp.asarray(host)
        with _CACHE_LOCK:
            _DEVICE_CACHE[key] = cached
    return cached


# --- helpers ----------------------------------------------------------------------------------------


def _traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _core_options(options: core.Options) -> dict[str, Any]:
    """The keyword options of posenc.encode/table (all but d_model)."""
    return {name: value for name, value in options._asdict().items() if name != "d_model"}


def _dtype(dtype: Any) -> np.dtype:
    """The output dtype as a NumPy dtype (bfloat16 is ml_dtypes', which is JAX's)."""
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        name = dtype
    dt = _validate.dtype(name if name in _validate.DTYPES else dtype)
    if dt == np.float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "dtype=float64 needs 64-bit JAX, which is off (JAX's default); call "
            "jax.config.update('jax_enable_x64', True) at start-up, or use float32 (bit-identical to "
            "posenc.encode) or posenc.encode (NumPy) for float64"
        )
    return dt


def _host_positions(positions: Any) -> np.ndarray:
    """Concrete positions as a NumPy array (no JAX dtype conversion: int64 and float64 stay exact;
    bfloat16 and float8 become float32, exactly)."""
    if isinstance(positions, jax.Array | np.ndarray):
        return _module_input.exact_float32(np.asarray(positions))
    return _validate.positions(positions)


def _host_offset(offset: Any) -> Any:
    """A concrete offset array (or list) as a NumPy array; anything else is left for
    :func:`posenc._module_input.int_offset` to check (its errors name the offset)."""
    if isinstance(offset, jax.Array | np.ndarray):
        return np.asarray(offset)
    if isinstance(offset, list | tuple):
        try:
            return np.asarray(offset)
        except ValueError:
            raise TypeError(
                f"offset must be an int or an integer array of shape () or (batch,); got {offset!r}"
            ) from None
    return offset


def _traced_int_offset(offset: Any) -> None:
    """An int offset added to traced positions: it must fit the device algorithm's integers (int32 with
    x64 off, JAX's default); checked here, on the host, since a Python int is concrete even under jit."""
    value = _module_input.int_offset(offset)
    if not jax.config.jax_enable_x64 and value is not None and value >= _validate.MAX_POSITION:
        raise ValueError(
            f"offset must be < 2**31 = {_validate.MAX_POSITION} with traced positions (positions + offset "
            f"must be < 2**31, and JAX's integers are int32 with x64 off); got offset={value}; "
            "lower the offset"
        )


def _offset_int(offset: Any, seq: int) -> int:
    offset = _validate.integer("offset", offset, minimum=0)
    if seq and offset + seq - 1 >= _validate.MAX_POSITION:
        raise ValueError(
            f"the last position offset + seq - 1 = {offset + seq - 1} must be < 2**31 = "
            f"{_validate.MAX_POSITION}; lower offset"
        )
    return offset
