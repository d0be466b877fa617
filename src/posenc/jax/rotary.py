"""Rotary position embeddings for JAX, exact: :func:`cos_sin` and :func:`apply_rotary` (one function for every
framework: :func:`posenc.rope.arrays.apply_rotary`); the Flax (NNX) ``RotaryEmbedding`` is in
:mod:`posenc.jax.modules`.

Every cos/sin value is A · cos(p θ_i) (resp. sin) correctly rounded once (:mod:`posenc.rope`). Concrete
positions are computed on the host by the NumPy core; traced positions (arguments of a jitted function) when
the program runs, by the same core through a host callback on a CPU-only JAX, else by the portable algorithm
(:mod:`posenc.portable`) inside the program: no callback, no float64 with x64 off
(:func:`posenc.jax.functions.program_rows`).
A type whose frequencies grow with the sequence length ("dynamic") needs an explicit ``seq_len`` for traced
positions (a jitted program cannot read max(positions)); one that switches between two sets ("longrope")
computes both and picks in the program, as the NumPy and torch paths do.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import portable, rope, validation
from ..core import explicit
from ..rope.arrays import arrange, check_request
from ..rope.tables import exact_law
from .functions import (
    _dtype,
    _host_positions,
    _refusing_derivatives,
    _traced,
    check_traced_positions,
    program_rows,
)


def cos_sin(
    positions: Any,
    params: rope.RopeParameters,
    *,
    dtype: Any = "float32",
    layout: str = "half",
    seq_len: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """:func:`posenc.rope.cos_sin` for JAX arrays, concrete or traced: (cos, sin), each
    ``positions.shape + (rotary_dim,)`` (with ``mrope_section``, positions' leading axis of 3 is dropped).

    >>> cos, sin = cos_sin(jnp.array([0, 1]), rope.config(head_dim=4, base=100.0))
    >>> sin
    Array([[0.        , 0.        , 0.        , 0.        ],
           [0.84147096, 0.09983341, 0.84147096, 0.09983341]], dtype=float32)
    """
    dt = _dtype(dtype)
    if not _traced(positions):
        cos, sin = rope.cos_sin(_host_positions(positions), params, dtype=dt, layout=layout, seq_len=seq_len)
        return jnp.asarray(cos), jnp.asarray(sin)
    positions = jnp.asarray(positions)
    check_traced_positions(positions)  # bool and complex, refused as concrete ones are (they were 1)
    check_request(params, layout, positions.shape)
    if seq_len is not None:  # a static length, for every type (those that take none too)
        seq_len = validation.integer("seq_len", seq_len, minimum=1)
    kind = params.kind
    if seq_len is None and kind.switch is not None:  # both sets, one picked in the program (as torch does)
        switch = kind.switch(params)
        first, second = (_traced_rows(positions, params, n, dt.name, layout) for n in (switch, switch + 1))
        if not positions.size:
            return first
        top = jnp.max(positions)
        pick = _at_least(top, switch)
        return jnp.where(pick, second[0], first[0]), jnp.where(pick, second[1], first[1])
    if seq_len is None and kind.grows_with_length:
        raise ValueError(
            f"rope_type {params.rope_type!r} picks its frequencies from the sequence length, which a jitted "
            "program cannot read from traced positions; pass seq_len= (e.g. the padded length + 1)"
        )
    return _traced_rows(positions, params, seq_len if kind.depends_on_length else None, dt.name, layout)


def _traced_rows(
    positions: jax.Array, params: rope.RopeParameters, seq_len: int | None, fmt: str, layout: str
) -> tuple[jax.Array, jax.Array]:
    """(cos, sin) of traced ``positions`` at the frequencies of ``seq_len``, computed when the program runs
    (:func:`posenc.jax.functions.program_rows`: the C core, or the portable algorithm)."""
    request = _request(params, seq_len, fmt)
    law = exact_law(params, seq_len)

    def core_rows(total: np.ndarray) -> np.ndarray:
        return np.concatenate(explicit.sin_cos(total, law, fmt), -1)  # [sin | cos], as the request lays out

    if jnp.issubdtype(positions.dtype, jnp.floating):  # no derivative defined: refused, never zero
        rows = _refusing_derivatives(lambda p: program_rows(p, request, None, core_rows), positions)
    else:
        rows = program_rows(positions, request, None, core_rows)
    return arrange(_JNP, rows, request.count, params.mrope_section, params.mrope_interleaved, layout)


_JNP = portable.backend_named("jax")


@functools.lru_cache(maxsize=64)
def _request(params: rope.RopeParameters, seq_len: int | None, fmt: str) -> Any:
    return portable.request_for_law(exact_law(params, seq_len), fmt)


def _at_least(top: jax.Array, at: int) -> jax.Array:
    """``top >= at`` (max(positions) + 1 > switch, where + 1 in the positions' own type wraps or rounds:
    32767 + 1 in int16, 4096 + 1 in float16): integers exactly, in their own type (False where ``at`` is
    past its largest value); reals in the widest float JAX has (float32 with x64 off: exact for a switch
    below 2**24)."""
    if jnp.issubdtype(top.dtype, jnp.integer):
        if at > min(np.iinfo(top.dtype).max, validation.MAX_POSITION - 1):  # past every value of the type
            return jnp.zeros((), bool)  # (int8's 127), or every valid position (< 2**31)
        # in the positions' own type, which holds ``at``: no promotion (jax_numpy_dtype_promotion="strict"
        # refuses int8 against int32)
        return top >= jnp.asarray(at, top.dtype)
    wide = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    return top.astype(wide) >= jnp.asarray(at, wide)
