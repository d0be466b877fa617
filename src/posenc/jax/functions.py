"""``encode`` and ``table`` for JAX arrays: concrete positions are computed now, on the host, by the NumPy
core (exact; under ``jit`` the result is a constant of the program); traced positions, where JAX has one
device and it is the CPU, by the same core when the program runs (one host callback); elsewhere, or
inside :func:`self_contained`, by the portable algorithm (:mod:`posenc.portable`) inside the program,
elementwise, with no callback and no float64."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from .. import adapters, core, portable, validation
from ..core.options import takes_options
from ..errors import PosencTypeError, PosencValueError

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

_Options = core.Options
_NUMPY = portable.backend_named("numpy")
_JNP = portable.backend_named("jax")


@takes_options
def encode(
    positions: Any, d_model: int, *, dtype: Any = jnp.float32, **options: Unpack[OptionKeywords]
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
    return _encode_any(positions, _Options.check(d_model, **options), _dtype(dtype))


@takes_options
def table(
    length: int, d_model: int, *, start: Any = 0, dtype: Any = jnp.float32, **options: Unpack[OptionKeywords]
) -> jax.Array:
    """``posenc.table`` for JAX: positions ``start .. start + length - 1``, shape ``(length, d_model)``.

    ``length`` is a Python int (a shape); ``start`` an int, or a traced integer scalar under ``jit`` (one
    program for every start, e.g. a decoding step). Row k is bit-identical to ``encode(start + k)``.

    >>> table(2, 4, start=1)[:, 0]
    Array([0.84147096, 0.9092974 ], dtype=float32)
    """
    length = validation.integer("length", length, minimum=0)
    checked = _Options.check(d_model, **options)
    dt = _dtype(dtype)
    if _traced(start):
        start = jnp.asarray(start)
        if start.ndim != 0 or not jnp.issubdtype(start.dtype, jnp.integer):
            raise PosencTypeError(
                f"start must be an integer scalar; got a traced {start.dtype} of shape {start.shape}",
                parameter="start",
            )
        # the row indices in int32 whatever the start's type (an int8 arange of 300 wraps at 128); the start
        # is added exactly
        return _encode_traced(jnp.arange(length, dtype=jnp.int32), checked, dt, offset=start)
    if (
        isinstance(start, jax.Array | np.ndarray)
        and start.ndim == 0
        and jnp.issubdtype(start.dtype, jnp.integer)
    ):
        start = int(start)  # a concrete integer array (jax.disable_jit(), a NumPy scalar array): its value
    start = validation.integer("start", start, minimum=-(validation.MAX_POSITION - 1))
    values = core.table(length, checked.d_model, start=start, dtype=dt, **_core_options(checked))
    return jnp.asarray(values)


def _encode_any(positions: Any, options: _Options, dt: np.dtype, offset: Any = None) -> jax.Array:
    """Encodings of concrete positions (computed now, on the host) or traced ones (the portable algorithm)."""
    if _traced(positions) or _traced(offset):
        if not _traced(positions):  # concrete positions are checked as an eager call checks them
            positions = _host_positions(positions)
            validation.positions(positions)
        return _encode_traced(_into_program("positions", positions), options, dt, offset=offset)
    positions = _host_positions(positions)
    if offset is not None and positions.dtype.kind == "f":  # the sum may be no float64: add it exactly
        validation.positions(positions)
        values = portable.encode(_NUMPY, positions, _request(options, dt.name), np.asarray(offset))
        if np.isnan(values).any():
            raise PosencValueError(
                f"positions + offset must satisfy |p| < 2**31 = {validation.MAX_POSITION}; lower the offset",
                parameter="offset",
            )
        return jnp.asarray(values)
    if offset is not None:
        positions = positions.astype(np.int64) + offset
    values = core.encode(positions, options.d_model, dtype=dt, **_core_options(options))
    return jnp.asarray(values)


def _encode_traced(positions: jax.Array, options: _Options, dt: np.dtype, *, offset: Any = None) -> jax.Array:
    """Encodings of traced positions (+ an integer offset, added exactly), computed when the program runs
    (:func:`program_rows`); invalid positions (NaN, inf, |p| >= 2**31) give rows of NaN."""
    check_traced_positions(positions)
    shape = positions.shape if offset is None else jnp.broadcast_shapes(positions.shape, jnp.shape(offset))
    validation.fits_in_memory((*shape, options.d_model), dt)  # static shapes: bounded as an eager call is
    request = _request(options, dt.name)
    if offset is not None:
        offset = _into_program("offset", offset)

    def core_rows(total: np.ndarray) -> np.ndarray:
        return core.encode(total, options.d_model, dtype=dt, **_core_options(options))

    if not jnp.issubdtype(positions.dtype, jnp.floating):  # integers: JAX differentiates none
        return program_rows(positions, request, offset, core_rows)
    return _differentiable(lambda p: program_rows(p, request, offset, core_rows), positions, options, offset)


def check_traced_positions(positions: jax.Array) -> None:
    """Traced positions must be integers or reals, as concrete ones must (``validation.positions``): their
    dtype is static, so bool and complex ones are refused as the program is traced (True was position 1,
    1+5j position 1, silently)."""
    if positions.dtype == jnp.bool_:
        raise PosencTypeError(
            f"positions must be integers or real numbers, not booleans; got a bool array of shape "
            f"{tuple(positions.shape)}; to turn a mask into positions use "
            "posenc.positions.from_attention_mask",
            parameter="positions",
        )
    if not (jnp.issubdtype(positions.dtype, jnp.integer) or jnp.issubdtype(positions.dtype, jnp.floating)):
        raise PosencTypeError(
            f"positions must be integers or real numbers; got dtype {positions.dtype}", parameter="positions"
        )


def _differentiable(
    rows: Callable[[jax.Array], jax.Array], positions: jax.Array, options: _Options, offset: Any
) -> jax.Array:
    """``rows(positions)`` with its derivative in the positions (``jax.jvp``, ``jax.grad``, ``jax.hessian``):
    d/dp sin(p ω_i) = ω_i cos(p ω_i), d/dp cos(p ω_i) = −ω_i sin(p ω_i) (:func:`posenc.adapters.slope`),
    from the exact sines and cosines of the same positions in float64 (float32 with x64 off), itself
    differentiable again; rounded to the encoding's dtype.

    >>> jax.grad(lambda t: encode(t, 4).sum())(jnp.float32(1.0))  # cos 1 - sin 1 + (cos .01 - sin .01) / 100
    Array(-0.29126915, dtype=float32)
    """
    from jax.custom_derivatives import SymbolicZero

    @jax.custom_jvp
    def held(p: jax.Array) -> jax.Array:
        return rows(p)

    def rule(primals: tuple, tangents: tuple) -> tuple:
        (p,), (moved,) = primals, tangents
        out = held(p)
        if isinstance(moved, SymbolicZero):
            return out, jnp.zeros_like(out)
        wide = np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)

        def rows_in(layout: str) -> jax.Array:
            return _encode_traced(p, options._replace(layout=layout), wide, offset=offset)

        rate = adapters.slope(_JNP, rows_in, adapters.derivative_plan(options))
        return out, (rate * moved.astype(wide)[..., None]).astype(out.dtype)

    held.defjvp(rule, symbolic_zeros=True)
    return held(positions)


def _refusing_derivatives(rows: Callable[[jax.Array], jax.Array], positions: jax.Array) -> jax.Array:
    """``rows(positions)``, raising a ``TypeError`` when JAX differentiates it in the positions (``jax.grad``,
    ``jax.jvp``; a derivative in anything else passes): rows computed exactly, outside JAX's
    differentiation, with no derivative defined (the rotary cos/sin), whose derivative would be zero,
    silently."""
    from jax.custom_derivatives import SymbolicZero

    @jax.custom_jvp
    def held(p: jax.Array) -> jax.Array:
        return rows(p)

    def refused(primals: tuple, tangents: tuple) -> tuple:
        if not isinstance(tangents[0], SymbolicZero):
            raise PosencTypeError(
                adapters.NOT_DIFFERENTIABLE.format(
                    name="positions",
                    what="posenc's rotary cos/sin",
                    detach="jax.lax.stop_gradient(positions)",
                ),
                parameter="positions",
            )
        out = held(*primals)
        return out, jnp.zeros_like(out)

    held.defjvp(refused, symbolic_zeros=True)
    return held(positions)


# --- where traced positions are computed ------------------------------------------------------------

_SELF_CONTAINED = contextvars.ContextVar("posenc_jax_self_contained", default=False)


@contextlib.contextmanager
def self_contained() -> Iterator[None]:
    """Programs traced inside compute traced positions by the portable algorithm, with no host callback:
    for ``jax.export`` on the CPU (an exported program cannot hold a callback), or to run on the CPU what
    an accelerator runs. The same bits either way (float64 output: each within 1 ulp, not always the same
    bits); outside it, a CPU-only JAX calls the core (its program
    compiles in a fraction of a second where the portable algorithm's takes 2-3 s, and computes positions
    hundreds of times faster: ``benchmarks/jax_jit.py``).

    JAX caches traced programs: entering and leaving clear its caches (``jax.clear_caches()``), so that a
    function traced before is traced again here, and one traced here is not reused outside.

    >>> import jax, jax.numpy as jnp
    >>> with self_contained():
    ...     exported = jax.export.export(jax.jit(lambda p: encode(p, 4)))(jnp.zeros(2, jnp.int32))
    >>> exported.call(jnp.array([0, 1], jnp.int32))[1]
    Array([0.84147096, 0.5403023 , 0.00999983, 0.99995   ], dtype=float32)
    """
    token = _SELF_CONTAINED.set(True)
    jax.clear_caches()
    try:
        yield
    finally:
        _SELF_CONTAINED.reset(token)
        jax.clear_caches()


def calls_the_core() -> bool:
    """Whether a program traced now computes traced positions by the C core through a host callback:
    JAX has one device, a CPU, and the call is not inside :func:`self_contained`. Elsewhere (an
    accelerator, several devices: a sharded program, where each device encodes its own shard) the
    portable algorithm runs inside the program."""
    if _SELF_CONTAINED.get():
        return False
    devices = jax.devices()
    return len(devices) == 1 and devices[0].platform == "cpu"


def program_rows(
    positions: jax.Array, request: Any, offset: Any, core_rows: Callable[[np.ndarray], np.ndarray]
) -> jax.Array:
    """The rows of ``request`` for traced ``positions`` (+ ``offset``): ``core_rows`` (the C core's rows of
    valid positions, a NumPy array) through one ``jax.pure_callback`` where :func:`calls_the_core`, else the
    portable algorithm in the program; the same bits, NaN rows for invalid positions either way."""
    if not calls_the_core():
        return portable.encode(_JNP, positions, request, offset)
    arrays = [positions] if offset is None else jnp.broadcast_arrays(positions, offset)
    result = jax.ShapeDtypeStruct((*arrays[0].shape, request.d_model), _JNP.dtype(request.fmt))
    if not arrays[0].size:
        return jnp.zeros(result.shape, result.dtype)

    def on_host(*values: np.ndarray) -> np.ndarray:
        return _host_rows(values, request, core_rows)

    # no derivative of the callback's own: _differentiable defines the encodings', the rotary refuses one
    arrays = [jax.lax.stop_gradient(a) for a in arrays]
    return jax.pure_callback(on_host, result, *arrays, vmap_method="broadcast_all")


def _host_rows(
    values: tuple[np.ndarray, ...], request: Any, core_rows: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The callback's body: the rows of positions (+ an offset of the same shape) as the portable algorithm
    gives them — the core's values, NaN rows where |p + offset| >= 2**31 or p is not finite (the portable
    algorithm's rule: an int32 sum that wraps around is invalid). Under a fixed NumPy error state, not
    the caller's (``np.seterr(over="raise")`` would turn float16's comparison with 2**31 into an error)."""
    with np.errstate(all="ignore"):
        return _rows_on_host(values, request, core_rows)


def _rows_on_host(
    values: tuple[np.ndarray, ...], request: Any, core_rows: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    positions = adapters.exact_float32(np.asarray(values[0]))
    offset = np.asarray(values[1]) if len(values) > 1 else None
    if positions.dtype.kind == "f" and offset is not None:  # a real plus an integer: the exact addition
        return np.asarray(portable.encode(_NUMPY, positions, request, offset))
    if positions.dtype.kind == "f":
        valid = np.isfinite(positions) & (np.abs(positions) < validation.MAX_POSITION)
    else:
        whole = positions.astype(np.int64)
        if offset is not None:
            added = offset.astype(np.int64)
            positions = whole + added
            wrapped = ((whole < 0) == (added < 0)) & ((positions < 0) != (whole < 0))
        else:
            positions, wrapped = whole, np.zeros(whole.shape, bool)
        valid = ~wrapped & (positions > -validation.MAX_POSITION) & (positions < validation.MAX_POSITION)
    rows = core_rows(np.where(valid, positions, 0))
    if not valid.all():
        rows = np.array(rows)
        rows[~valid] = np.nan
    return rows


@functools.lru_cache(maxsize=64)
def _request(options: _Options, fmt: str) -> Any:
    return portable.request_for(options, fmt)


# --- helpers ----------------------------------------------------------------------------------------


def _traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


def _core_options(options: _Options) -> dict[str, Any]:
    """The keyword options of posenc.encode/table (all but d_model)."""
    return {name: value for name, value in options._asdict().items() if name != "d_model"}


def _dtype(dtype: Any) -> np.dtype:
    """The output dtype as a NumPy dtype (bfloat16 is ml_dtypes', which is JAX's); None is float32, as
    ``posenc.encode`` takes it (NumPy would read None as float64)."""
    if dtype is None:
        return np.dtype(np.float32)
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        name = dtype
    dt = validation.dtype(name if name in validation.DTYPES else dtype)
    if dt == np.float64 and not jax.config.jax_enable_x64:
        raise PosencValueError(
            "dtype=float64 needs 64-bit JAX, which is off (JAX's default); call "
            "jax.config.update('jax_enable_x64', True) at start-up, or use float32 (bit-identical to "
            "posenc.encode) or posenc.encode (NumPy) for float64",
            parameter="dtype",
        )
    return dt


def _into_program(name: str, values: Any) -> jax.Array:
    """Concrete ``values`` (positions or offsets) that meet traced ones, as a JAX array, refused with a
    ValueError naming ``name`` where JAX's conversion would change one: with x64 off (JAX's default) it
    rounds float64 to float32 and wraps int64 to int32 (2**32 + 5 would be 5, silently). Traced values
    are JAX's already."""
    if _traced(values):
        return jnp.asarray(values)
    host = np.asarray(values)
    target = jax.dtypes.canonicalize_dtype(host.dtype)  # what jnp.asarray makes of it
    if host.dtype.kind in "iuf" and target != host.dtype:
        with np.errstate(all="ignore"):  # the conversion JAX makes, on the host: wrapped, rounded
            back = host.astype(target).astype(host.dtype)
        changed = ~((back == host) | (np.isnan(back) & np.isnan(host)))
        if changed.any():
            index = np.unravel_index(int(np.argmax(changed)), host.shape)
            raise PosencValueError(
                f"{name} holds {host[index].item()!r} ({host.dtype}), which JAX turns into "
                f"{back[index].item()!r} ({np.dtype(target).name}: 64-bit JAX is off, its default) where it "
                f"meets traced values; call jax.config.update('jax_enable_x64', True) at start-up, or pass "
                f"{name} that {np.dtype(target).name} holds exactly",
                parameter=name,
            )
    return jnp.asarray(host)


def _host_positions(positions: Any) -> np.ndarray:
    """Concrete positions as a NumPy array (no JAX dtype conversion: int64 and float64 stay exact;
    bfloat16 and float8 become float32, exactly)."""
    if isinstance(positions, jax.Array | np.ndarray):
        return adapters.exact_float32(np.asarray(positions))
    return validation.positions(positions)
