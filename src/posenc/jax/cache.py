"""The tables cached for the Flax module: read-only NumPy tables on the host, their copies on the device,
and the rows ``offset .. offset + seq - 1`` the module adds (a slice when eager; under ``jit`` a constant of
the program up to :data:`CONSTANT_LIMIT_BYTES`, the portable algorithm beyond)."""

from __future__ import annotations

import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import adapters, core
from .functions import _core_options, _encode_traced, _Options

#: Cached tables stop growing at this many bytes; longer requests are computed for just their positions.
CACHE_LIMIT_BYTES = 256 * 2**20
#: All cached host tables together hold at most this many bytes: past it the least recently built go first
#: (with their device copies).
CACHE_TOTAL_BYTES = 1024 * 2**20

#: Under ``jit``, the module embeds contiguous encodings up to this size as constants; larger ones are
#: computed by the portable algorithm when the program runs (a constant is compiled into the executable).
CONSTANT_LIMIT_BYTES = 16 * 2**20


_HOST_CACHE: dict[tuple, np.ndarray] = {}
_DEVICE_CACHE: dict[tuple, jax.Array] = {}
_CACHE_LOCK = threading.Lock()


def clear_cache() -> None:
    """Drop every cached table, on the host and on the devices (they are rebuilt on demand): frees their
    memory; results do not change.

    >>> from posenc.jax import SinusoidalPositionalEncoding
    >>> clear_cache()
    >>> SinusoidalPositionalEncoding(4)(jnp.zeros((1, 4)))  # the table is rebuilt on demand
    Array([[0., 1., 0., 1.]], dtype=float32)
    """
    with _CACHE_LOCK:
        _HOST_CACHE.clear()
        _DEVICE_CACHE.clear()


def _contiguous(
    options: _Options, dt: np.dtype, seq: int, offset: int, min_rows: int, traced: bool
) -> jax.Array:
    """Rows ``offset .. offset + seq - 1``: a device slice (eager), a constant or the portable algorithm
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


#: Under ``jit``, traced integer positions are looked up in a constant table of this many rows (or the
#: module's ``max_len``) while every one of them lies inside it.
GATHER_ROWS = 4096


def _rows_or_algorithm(
    ids: jax.Array, offset: Any, options: _Options, dt: np.dtype, rows: int
) -> jax.Array | None:
    """Under ``jit``, the encodings of traced integer ``ids`` (+ an integer ``offset``, broadcast): the rows
    of a constant exact table of ``rows`` rows where every position lies inside it — decided when the
    program runs (``lax.cond``: a gather, not the portable algorithm's thousands of operations per value) —
    else the portable algorithm, the same bits either way (float64: each within 1 ulp). None where the ids
    are real, or the table would
    pass :data:`CONSTANT_LIMIT_BYTES`."""
    integer = jnp.issubdtype(ids.dtype, jnp.integer)
    if offset is not None and not isinstance(offset, int):
        integer = integer and jnp.issubdtype(jnp.asarray(offset).dtype, jnp.integer)
    if not integer or rows * options.d_model * dt.itemsize > CONSTANT_LIMIT_BYTES:
        return None
    held = _host_table(options, dt, rows)
    if held is None:
        return None
    table = jnp.asarray(held[:rows])
    # added and compared in the widest integer type (int32 with x64 off): int8 ids + 4096 must not wrap
    total, fits = _widened(ids)
    if offset is not None:
        added, offset_fits = _widened(offset)
        whole, total = total, total + added
        wrapped = ((whole < 0) == (added < 0)) & ((total < 0) != (whole < 0))
        fits = fits & offset_fits & ~jnp.any(wrapped)
    inside = fits & jnp.all((total >= 0) & (total < rows))
    return jax.lax.cond(
        inside,
        lambda: table[jnp.clip(total, 0, rows - 1)],
        lambda: _encode_traced(ids, options, dt, offset=offset),
    )


def _widened(values: Any) -> tuple[jax.Array, jax.Array]:
    """Integer ``values`` in the widest integer type JAX holds (int64 with x64 on, else int32), and whether
    every one fits it (an unsigned type as wide: uint32 2**32 - 1 is no position -1)."""
    values = jnp.asarray(values)
    wide = jax.dtypes.canonicalize_dtype(np.int64)
    fits = jnp.bool_(True)
    if jnp.issubdtype(values.dtype, jnp.unsignedinteger) and values.dtype.itemsize >= wide.itemsize:
        fits = jnp.all(values <= np.iinfo(wide).max)
    return values.astype(wide), fits


def _host_table(options: _Options, dt: np.dtype, rows: int) -> np.ndarray | None:
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
            dropped = adapters.cached(_HOST_CACHE, key, cached, CACHE_TOTAL_BYTES, lambda table: table.nbytes)
            for old in (key, *dropped):  # a device copy goes with its host table
                _DEVICE_CACHE.pop(old, None)
    return cached


def _device_table(options: _Options, dt: np.dtype, rows: int) -> jax.Array | None:
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
