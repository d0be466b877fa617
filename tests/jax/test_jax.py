"""posenc.jax: encode/table under eager, jit and vmap, the Flax (NNX) module, with x64 off and on.

The pytest process runs JAX as configured by default (``jax_enable_x64`` off: int32 positions, no float64).
``test_the_suite_passes_with_x64_enabled`` runs this whole file again in a subprocess with
``JAX_ENABLE_X64=1``; tests whose behaviour depends on the mode branch on ``X64``.
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc
import posenc.jax as pj
from posenc import rope
from tests.support import reference as ref
from tests.support.module_cases import BAD_MODULE_OPTIONS

X64 = bool(jax.config.jax_enable_x64)
F32 = jnp.float32  # explicit: with x64 on, JAX's default float is float64
NAMES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}


def _bits(array) -> np.ndarray:
    array = np.asarray(array)
    return array.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def _same_bits(got, want) -> bool:
    got = np.asarray(got)
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(_bits(got), _bits(want))


#: The two ways a traced position is computed: "core" (this CPU-only JAX: the C core, one host callback)
#: and "portable" (inside pj.self_contained(): the portable algorithm in the program, as on a device).
PATHS = ["core", "portable"]


@contextlib.contextmanager
def _path(name: str):
    """Trace inside: the C core through a callback ("core") or the portable algorithm ("portable")."""
    with pj.self_contained() if name == "portable" else contextlib.nullcontext():
        assert pj.functions.calls_the_core() == (name == "core")
        yield


# --- encode and table -------------------------------------------------------------------------------


#: The (layout, dtype) pairs also checked traced: one per layout and per dtype.
TRACED = {("interleaved", "float32"), ("sin_cos", "float16"), ("cos_sin", "bfloat16")}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_encode_is_bit_identical_to_the_core_eager_jit_and_vmap(layout, name, path):
    positions = np.array([[0, 7, 2**30, 2**31 - 1], [5, 6, 1_000_000, 123_456_789]])
    want = posenc.encode(positions, 66, shift=1, layout=layout, dtype=name)

    def run(p):
        return pj.encode(p, 66, shift=1, layout=layout, dtype=NAMES[name])

    p = jnp.asarray(positions)
    assert p.dtype == (jnp.int64 if X64 else jnp.int32)
    assert _same_bits(run(p), want)  # eager, from a device array
    assert _same_bits(run(positions), want)  # eager, from NumPy int64
    if path == "portable" and (layout, name) not in TRACED:  # each compiles the portable algorithm (~2 s)
        return
    with _path(path):  # traced: the C core through a callback, or the portable algorithm in the program
        assert _same_bits(jax.jit(run)(p), want)
        assert _same_bits(jax.jit(lambda q: jax.vmap(jax.vmap(run))(q))(p[:, :, None]), want[:, :, None])


@pytest.mark.parametrize("path", PATHS)
@settings(max_examples=4, deadline=None)  # each example compiles a program
@given(
    positions=st.lists(st.integers(-(2**31) + 1, 2**31 - 1), min_size=1, max_size=6),
    d_model=st.integers(2, 40),
    shift=st.sampled_from([0, 1, 0.5, -2]),
    base=st.sampled_from([10000.0, 100.0, 1e9, 1.5]),
    layout=st.sampled_from(["interleaved", "sin_cos", "cos_sin"]),
    name=st.sampled_from(["float32", "bfloat16"]),
)
def test_jitted_encode_matches_the_core_for_any_options(path, positions, d_model, shift, base, layout, name):
    if d_model // 2 - shift <= 0:
        shift = 0
    options = {"base": base, "shift": shift, "layout": layout}
    with _path(path):
        got = jax.jit(lambda p: pj.encode(p, d_model, dtype=NAMES[name], **options))(jnp.asarray(positions))
    assert _same_bits(got, posenc.encode(np.array(positions), d_model, dtype=name, **options))


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_half_precision_is_correctly_rounded_against_mpmath(name):
    rng = np.random.default_rng(3)
    positions = np.concatenate([rng.integers(0, 2**31, 20), rng.integers(0, 100_000, 20), [99_999]])
    got = np.asarray(jax.jit(lambda p: pj.encode(p, 64, dtype=NAMES[name]))(jnp.asarray(positions)))
    for row, i in zip(rng.integers(0, len(positions), 120), rng.integers(0, 32, 120), strict=True):
        sin, cos = ref.sincos(int(positions[row]), int(i), 64)
        assert float(got[row, 2 * i]) == ref.round_to(sin, name)
        assert float(got[row, 2 * i + 1]) == ref.round_to(cos, name)


@pytest.mark.parametrize("path", PATHS)
def test_real_positions(path):
    # float32 positions (what a traced real position is with x64 off) are exact values: encoded exactly;
    # invalid ones (NaN, inf, |p| >= 2**31) give rows of NaN, -0.0 gives -0.0 sines; plus an int offset,
    # the sum is exact (0.5 + (2**31 - 2) is no float32)
    t = np.array([0.5, 999.25, 12345.678, -0.0, np.nan, np.inf, 2.0**31, -(2.0**31)], dtype=np.float32)
    want = posenc.encode(t[:4].astype(np.float64), 32, shift=1, layout="cos_sin")
    with _path(path):
        got = jax.jit(lambda q: pj.encode(q, 32, shift=1, layout="cos_sin"))(jnp.asarray(t))
        module = pj.SinusoidalPositionalEncoding(8)
        shift = jax.jit(lambda x, q, o: module(x, q, offset=o))
        shifted = shift(jnp.zeros((1, 2, 8), F32), t[None, :2], 2**31 - 2)
    assert _same_bits(got[:4], want) and np.isnan(np.asarray(got[4:])).all()
    assert np.signbit(np.asarray(got[3, 16]))  # sin(-0.0) in the cos_sin layout's second half
    assert _same_bits(shifted[0, 0], posenc.encode([2**31 - 1.5], 8)[0])
    assert np.isnan(np.asarray(shifted[0, 1])).all()  # 999.25 + 2**31 - 2 >= 2**31
    # NumPy float64 positions are used as they are, in either mode.
    t64 = np.array([0.1, 1e6 + 0.3])
    assert _same_bits(pj.encode(t64, 32), posenc.encode(t64, 32))


def test_dynamic_positions_compile_once_for_every_step():
    traces = []

    @jax.jit
    def step(t):
        traces.append(1)
        return pj.encode(t + jnp.arange(3), 48)

    for t in (0, 5, 70_000, 2**31 - 3):
        assert _same_bits(step(jnp.asarray(t)), posenc.table(3, 48, start=t))
    assert len(traces) == 1


@pytest.mark.parametrize("path", PATHS)
def test_table_static_and_traced_start(path):
    assert _same_bits(pj.table(9, 66, start=4, shift=1), posenc.table(9, 66, start=4, shift=1))
    assert _same_bits(
        pj.table(5, 8, start=-2, dtype=jnp.bfloat16), posenc.table(5, 8, start=-2, dtype="bfloat16")
    )
    with _path(path):
        traced = jax.jit(lambda s: pj.table(6, 20, start=s, layout="sin_cos"))
        for s in (0, 1000, 2**31 - 6, -3):
            assert _same_bits(traced(jnp.asarray(s)), posenc.table(6, 20, start=s, layout="sin_cos"))
        past = np.asarray(traced(jnp.asarray(2**31 - 3)))  # rows 2**31 .. : NaN (an int32 sum wraps around)
        assert _same_bits(past[:3], posenc.table(3, 20, start=2**31 - 3, layout="sin_cos"))
        assert np.isnan(past[3:]).all()
        assert jax.jit(lambda s: pj.table(0, 8, start=s))(jnp.asarray(5)).shape == (0, 8)
    assert pj.table(0, 8).shape == (0, 8)


def test_float64_needs_x64():
    if X64:
        got = jax.jit(lambda p: pj.encode(p, 16, dtype=jnp.float64))(jnp.arange(5) * 1000)
        want = posenc.encode(np.arange(5) * 1000, 16, dtype="float64")
        # float64 is within 1 ulp of the exact value in both (the portable algorithm rounds it correctly)
        assert np.abs(np.asarray(got).view(np.int64) - want.view(np.int64)).max() <= 1
        assert _same_bits(pj.table(4, 16, dtype="float64"), posenc.table(4, 16, dtype="float64"))
    else:
        with pytest.raises(ValueError, match=r"float64 needs 64-bit JAX.*jax_enable_x64"):
            pj.encode([1, 2], 16, dtype=jnp.float64)


def test_bad_arguments():
    with pytest.raises(ValueError, match="dtype must be one of"):
        pj.encode([1], 8, dtype=jnp.int32)
    with pytest.raises(TypeError, match="not booleans"):
        jax.jit(lambda p: pj.encode(p, 8))(jnp.array([True]))
    with pytest.raises(TypeError, match="not booleans"):
        pj.encode(np.array([True]), 8)
    with pytest.raises(ValueError, match=r"\|p\| < 2\*\*31"):
        pj.encode([2**31], 8)
    with pytest.raises(ValueError, match="n - shift"):
        pj.encode([1], 2, shift=1)
    with pytest.raises(TypeError, match="start must be an integer scalar"):
        jax.jit(lambda s: pj.table(3, 8, start=s))(jnp.float32(1.0))
    # Traced positions cannot raise inside a program: invalid ones give rows of NaN.
    rows = np.asarray(jax.jit(lambda p: pj.encode(p, 8))(jnp.array([0.0, jnp.nan, jnp.inf])))
    assert not np.isnan(rows[0]).any() and np.isnan(rows[1:]).all()


# --- the Flax module --------------------------------------------------------------------------------


def test_module_adds_the_exact_table_and_holds_no_table_in_its_state():
    module = pj.SinusoidalPositionalEncoding(16, dropout=0.1, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(0), (3, 10, 16), F32)
    y = module(x, deterministic=True)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x) + posenc.table(10, 16))
    leaves = jax.tree.leaves(nnx.state(module))
    assert leaves and all(np.size(leaf) == 1 for leaf in leaves)  # the dropout key and counter only
    assert jax.tree.leaves(nnx.state(pj.SinusoidalPositionalEncoding(16))) == []
    assert nnx.state(module, nnx.Param) == nnx.State({})


def test_module_no_length_cliff_seq_first_and_options():
    module = pj.SinusoidalPositionalEncoding(8, max_len=4, shift=1, layout="sin_cos")
    np.testing.assert_array_equal(
        np.asarray(module(jnp.zeros((1, 5000, 8), F32))[0]), posenc.table(5000, 8, shift=1, layout="sin_cos")
    )
    x = jax.random.normal(jax.random.key(1), (2, 7, 12), F32)
    batch_first = pj.SinusoidalPositionalEncoding(12)(x)
    seq_first = pj.SinusoidalPositionalEncoding(12, batch_first=False)(jnp.swapaxes(x, 0, 1))
    assert _same_bits(jnp.swapaxes(seq_first, 0, 1), np.asarray(batch_first))
    assert _same_bits(pj.SinusoidalPositionalEncoding(12)(x[0]), np.asarray(batch_first[0]))  # (seq, d)


def test_module_takes_dropout_and_max_len_in_the_tutorials_order():
    """``SinusoidalPositionalEncoding(d_model, dropout, max_len)`` as the PyTorch tutorial writes it; the rest
    (rngs, batch_first, the options) keyword-only; a bad positional value names its parameter."""
    module = pj.SinusoidalPositionalEncoding(16, 0.1, 100, rngs=nnx.Rngs(0))
    assert (module.dropout.rate, module.max_len, module.batch_first) == (0.1, 100, True)
    x = jax.random.normal(jax.random.key(0), (3, 10, 16), F32)
    np.testing.assert_array_equal(
        np.asarray(module(x, deterministic=True)), np.asarray(x) + posenc.table(10, 16)
    )
    assert pj.SinusoidalPositionalEncoding(16, 0.1).dropout.rate == 0.1
    with pytest.raises(TypeError, match=r"dropout must be a real number; got 'x'"):
        pj.SinusoidalPositionalEncoding(16, "x")
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\); got 5000; .* pass max_len=5000"):
        pj.SinusoidalPositionalEncoding(16, 5000)
    with pytest.raises(TypeError, match=r"max_len must be an integer >= 1; got 5000.0"):
        pj.SinusoidalPositionalEncoding(16, 0.1, 5000.0)
    with pytest.raises(TypeError, match=r"takes 3 arguments by position .* by keyword: .*batch_first, rngs"):
        pj.SinusoidalPositionalEncoding(16, 0.1, 100, nnx.Rngs(0))


def test_module_offset_decoding_equals_the_full_pass_eager_and_jitted():
    module = pj.SinusoidalPositionalEncoding(32)
    x = jax.random.normal(jax.random.key(2), (2, 9, 32), F32)
    full = np.asarray(module(x))
    eager = [module(x[:, t : t + 1], offset=t) for t in range(9)]
    assert _same_bits(jnp.concatenate(eager, axis=1), full)
    traces = []

    @nnx.jit
    def step(module, x_t, t):
        traces.append(1)
        return module(x_t, offset=t)

    for t in range(9):
        assert _same_bits(step(module, x[:, t : t + 1], jnp.asarray(t)), full[:, t : t + 1])
    assert len(traces) == 1  # one program for every step
    per_row = module(x[:, 4:5], offset=jnp.array([4, 2]))
    assert _same_bits(per_row[0], full[0, 4:5])
    assert _same_bits(per_row[1], np.asarray(x[1, 4:5]) + posenc.encode([2], 32))
    jitted = nnx.jit(lambda m, x, o: m(x, offset=o))(module, x[:, 4:5], jnp.array([4, 2]))
    assert _same_bits(jitted, np.asarray(per_row))


def test_module_offset_of_every_batch_axis_eager_and_jitted():
    """x (2, 3, seq, d): an offset of shape x.shape[:-2], one per sequence (it was refused, the message
    asking for the shape it got); (2,) is refused, naming the shapes accepted."""
    module = pj.SinusoidalPositionalEncoding(8)
    x = jax.random.normal(jax.random.key(3), (2, 3, 4, 8), F32)
    offset = jnp.arange(6).reshape(2, 3)
    want = np.asarray(x) + np.asarray(posenc.encode(np.arange(4) + np.arange(6).reshape(2, 3, 1), 8))
    assert _same_bits(module(x, offset=offset), want)
    assert _same_bits(nnx.jit(lambda m, x, o: m(x, offset=o))(module, x, offset), want)
    with pytest.raises(ValueError, match=r"of shape \(\) or x's batch shape \(2, 3\).*got shape \(2,\)"):
        module(x, offset=jnp.array([0, 1]))


def test_module_positions_for_padding_packing_and_shards():
    module = pj.SinusoidalPositionalEncoding(16)
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    positions = posenc.positions.from_attention_mask(mask)
    x = jnp.zeros((2, 5, 16), F32)
    for p in (positions, jnp.asarray(positions)):
        out = np.asarray(module(x, p))
        np.testing.assert_array_equal(out[0, 2:], out[1, :3])
        np.testing.assert_array_equal(
            np.asarray(nnx.jit(lambda m, x, p: m(x, p))(module, x, jnp.asarray(p))), out
        )
    floats = module(jnp.zeros((1, 2, 16), F32), jnp.array([0.5, 1.5]))
    np.testing.assert_array_equal(np.asarray(floats[0]), posenc.encode([0.5, 1.5], 16))
    shard = np.array([2, 3, 12, 13])  # a zigzag shard's global positions
    assert _same_bits(module(jnp.zeros((1, 4, 16), F32), shard)[0], posenc.table(16, 16)[shard])
    assert _same_bits(
        module(jnp.zeros((1, 4, 16), F32), shard, offset=100)[0], posenc.table(16, 16, start=100)[shard]
    )


@pytest.mark.parametrize("name", ["bfloat16", "float16", *(["float64"] if X64 else [])])  # float64 needs x64
def test_module_in_low_precision_stays_exact_at_100k(name):
    dtype = NAMES.get(name, jnp.float64)
    module = pj.SinusoidalPositionalEncoding(64)
    x = jnp.zeros((1, 3, 64), dtype=dtype)
    want = posenc.table(3, 64, start=100_000, dtype=name)
    assert _same_bits(module(x, offset=100_000)[0], want)
    traced = nnx.jit(lambda m, x, o: m(x, offset=o))(module, x, jnp.asarray(100_000))[0]
    if name == "float64":  # within 1 ulp of the exact value, like the core's float64
        assert np.abs(np.asarray(traced).view(np.int64) - want.view(np.int64)).max() <= 1
    else:
        assert _same_bits(traced, want)
    assert _same_bits(nnx.jit(lambda m, x: m(x, offset=100_000))(module, x)[0], want)  # a constant


def test_module_under_jit_large_tables_use_the_portable_algorithm(monkeypatch):
    module = pj.SinusoidalPositionalEncoding(64)
    x = jnp.zeros((2, 100, 64), F32)
    constant = nnx.jit(lambda m, x: m(x, offset=7))(module, x)
    monkeypatch.setattr(pj.cache, "CONSTANT_LIMIT_BYTES", 1024)
    called = nnx.jit(lambda m, x: m(x, offset=7))(module, x)
    assert _same_bits(called, np.asarray(constant))
    assert _same_bits(called[1], posenc.table(100, 64, start=7))


def test_module_dropout_trains_and_evaluates():
    module = pj.SinusoidalPositionalEncoding(64, dropout=0.25, rngs=nnx.Rngs(dropout=7))
    x = jax.random.normal(jax.random.key(3), (4, 256, 64), F32)
    clean = module(x, deterministic=True)
    out = module(x)
    kept = np.asarray(out != 0)
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(np.asarray(out)[kept], np.asarray(clean)[kept] / 0.75, rtol=1e-6)
    assert not np.array_equal(np.asarray(module(x)), np.asarray(out))  # a fresh mask per call
    assert _same_bits(nnx.view(module, deterministic=True)(x), np.asarray(clean))
    module.eval()
    assert _same_bits(module(x), np.asarray(clean))
    grad = jax.grad(lambda x: pj.SinusoidalPositionalEncoding(64)(x).sum())(x)
    assert _same_bits(grad, np.ones(x.shape, np.float32))  # gradients reach x
    rngs = nnx.Rngs(dropout=1)
    keyless = pj.SinusoidalPositionalEncoding(8, dropout=0.5)
    with pytest.raises(ValueError, match=r"needs random keys.*rngs=nnx.Rngs"):
        keyless(jnp.zeros((1, 4, 8), F32))
    assert keyless(jnp.ones((1, 64, 8), F32), rngs=rngs).shape == (1, 64, 8)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m(jnp.zeros((2, 5, 15), F32)), ValueError, r"d_model=16; got shape \(2, 5, 15\)"),
        (lambda m: m(jnp.zeros(16, F32)), ValueError, r"got shape \(16,\)"),
        (
            lambda m: m(jnp.zeros((2, 5, 16), F32), jnp.arange(4)),
            ValueError,
            r"positions must have shape \(5,\)",
        ),
        (lambda m: m(jnp.zeros((2, 5, 16), F32), jnp.ones(5, dtype=bool)), TypeError, "not booleans"),
        (
            lambda m: m(jnp.zeros((2, 5, 16), F32), offset=-1),
            ValueError,
            r"offset must be an integer >= 0; got -1",
        ),
        (
            lambda m: m(jnp.zeros((2, 5, 16), F32), offset=jnp.array([0, -3])),
            ValueError,
            r"offset must be >= 0",
        ),
        (
            lambda m: m(jnp.zeros((2, 5, 16), F32), offset=jnp.array([1])),
            ValueError,
            r"shape \(\) or x's batch shape \(2,\) \(one per sequence\); got shape \(1,\)",
        ),
        (lambda m: m(jnp.zeros((2, 5, 16), F32), offset=1.5), TypeError, "offset must be an int"),
        (lambda m: m(jnp.zeros((2, 5, 16), dtype=jnp.int32)), TypeError, "float64, float32"),
        (lambda m: m([[0.0] * 16]), TypeError, "x must be a jax.Array"),
        (lambda m: m(jnp.zeros((2, 5, 16), F32), offset=2**31 - 2), ValueError, r"offset \+ seq - 1"),
    ],
)
def test_bad_module_inputs(call, error, message):
    with pytest.raises(error, match=message):
        call(pj.SinusoidalPositionalEncoding(16))


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD_MODULE_OPTIONS)
def test_bad_module_options(kwargs, error, message):
    with pytest.raises(error, match=message):
        pj.SinusoidalPositionalEncoding(**kwargs)


# --- imports and the x64 mode ----------------------------------------------------------------------


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


def test_imports_stay_lazy_and_missing_frameworks_name_the_install():
    loaded = "print(sorted(m for m in ('jax', 'flax', 'torch') if m in sys.modules))"
    assert _run(f"import sys, posenc; {loaded}").stdout.strip() == "[]"
    assert _run(f"import sys, posenc.jax; {loaded}").stdout.strip() == "['jax']"
    no_jax = _run("import sys; sys.modules['jax'] = None; import posenc.jax")
    assert "pip install 'posenc[jax]'" in no_jax.stderr
    no_flax = _run(
        "import sys; sys.modules['flax'] = None; import posenc.jax as pj; print(pj.encode([1], 4).shape); "
        "pj.SinusoidalPositionalEncoding(4)"
    )
    assert no_flax.stdout.strip() == "(1, 4)"  # the functions work with jax alone
    assert "ImportError" in no_flax.stderr and "pip install 'posenc[flax]'" in no_flax.stderr


@pytest.mark.skipif(X64, reason="this is the x64 run")
def test_the_suite_passes_with_x64_enabled():
    root = Path(__file__).resolve().parents[2]
    # the tests that compile programs with int64/float64 positions (each compile takes ~10 s): the positions'
    # dtype is what x64 changes, so one output format of the bit-for-bit encodes does
    chosen = (
        "(bit_identical and float32) or real_positions or table_static or offset_decoding or bad_arguments"
        " or float64"
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-k",
        chosen,
        str(Path(__file__)),
    ]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "JAX_ENABLE_X64": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


def test_presets_drive_the_jax_functions_and_module():
    from posenc import presets

    preset = presets.get("diffusers-timestep", flip_sin_to_cos=True, scale=2.0)
    assert _same_bits(pj.table(7, 9, **preset.options), posenc.table(7, 9, **preset.options))
    module = pj.SinusoidalPositionalEncoding(16, **presets.get("marian").options)
    out = module(jnp.zeros((1, 5, 16), F32))[0]
    assert _same_bits(out, presets.get("marian").table(5, 16))


# --- found by the fuzz suite --------------------------------------------------------------------------


def test_eager_bfloat16_positions_are_taken_exactly():
    positions = jnp.array([1.5, 300.0, -2.0], jnp.bfloat16)
    want = posenc.encode([1.5, 300.0, -2.0], 8)
    assert _same_bits(pj.encode(positions, 8), want)
    assert _same_bits(pj.encode(np.asarray(positions), 8), want)  # an ml_dtypes array
    assert _same_bits(jax.jit(lambda p: pj.encode(p, 8))(positions), want)
    module = pj.SinusoidalPositionalEncoding(8)
    assert _same_bits(module.encoding_for(jnp.zeros((3, 8), F32), positions), want)


@pytest.mark.parametrize(
    ("offset", "error"), [(True, TypeError), (1.5, TypeError), ([[1], [2, 3]], TypeError)]
)
def test_module_offset_errors_name_the_offset(offset, error):
    module = pj.SinusoidalPositionalEncoding(4)
    with pytest.raises(TypeError, match="offset"):
        module(jnp.zeros((1, 2, 4), F32), offset=offset)
    with pytest.raises(TypeError, match="offset"):
        module(jnp.zeros((1, 2, 4), F32), jnp.array([0, 1]), offset=offset)


def test_a_python_int_offset_beyond_int32_under_jit_is_a_clear_error():
    module = pj.SinusoidalPositionalEncoding(4)
    x = jnp.zeros((1, 2, 4), F32)
    step = jax.jit(lambda x, p: module(x, p, offset=2**33))
    # refused in both x64 modes (with x64 on it gave rows of NaN): the int is concrete
    with pytest.raises(ValueError, match=r"offset must be < 2\*\*31 = 2147483648.*offset=8589934592"):
        step(x, jnp.array([0, 1]))
    with pytest.raises(ValueError, match="offset"):
        module(x, offset=2**33)


def test_dropout_masks_under_jit():
    """docs/jax.md: the module passed to jax.jit as an argument runs but repeats one dropout mask (its key's
    advance stays in the traced call); nnx.jit draws a new mask each call."""
    module = pj.SinusoidalPositionalEncoding(8, dropout=0.5, rngs=nnx.Rngs(0))
    x = jnp.ones((1, 16, 8))
    plain = jax.jit(lambda m, x: m(x))
    assert np.array_equal(plain(module, x), plain(module, x))  # the trap the guide names
    carried = nnx.jit(lambda m, x: m(x))
    first, second = carried(module, x), carried(module, x)
    assert not np.array_equal(first, second)


@pytest.mark.parametrize("path", PATHS)
def test_traced_integer_ids_are_rows_of_a_constant_table_inside_it_and_the_algorithms_outside(path):
    """Under jit, traced integer ids (and a decode step's traced offset) are looked up in a constant exact
    table while every one lies inside it (lax.cond, decided when the program runs), else computed by the
    C core (a callback: a CPU-only JAX) or the portable algorithm (self_contained, or a device): the core's
    bits either way."""
    module = pj.SinusoidalPositionalEncoding(16, max_len=64)
    x = jnp.zeros((2, 5, 16))
    inside = jnp.array([[0, 3, 63, 10, 1], [5, 5, 5, 62, 0]])
    outside = jnp.array([[0, 3, 64, 1000, 2**30], [-7, 5, 5, 62, 0]])
    with _path(path):
        run = jax.jit(lambda x, p: module(x, p))
        for positions in (inside, outside):
            want = posenc.encode(np.asarray(positions), 16)
            np.testing.assert_array_equal(np.asarray(run(x, positions)), want)
        text = run.lower(x, inside).as_text()
        assert ("callback" in text) == (path == "core") and "stablehlo.case" in text  # a lookup, or the rest
        step = jax.jit(lambda s, t: module(s, offset=t))
        for t in (0, 60, 63, 64, 5000):  # inside the table, its last row, just past it, far past it
            got = np.asarray(step(jnp.zeros((1, 1, 16)), jnp.int32(t)))[0, 0]
            np.testing.assert_array_equal(got, posenc.encode([t], 16)[0])


def test_a_cpu_program_calls_the_core_once_and_a_self_contained_one_exports():
    """A CPU-only JAX computes traced positions by the C core through one host callback (compiled in
    milliseconds); jax.export cannot serialize a callback, so inside pj.self_contained() the program holds
    the portable algorithm and exports; leaving the context restores the default (JAX's trace caches are
    cleared on the way in and out, so neither program is reused by the other)."""
    p = jnp.array([3, 2**31 - 1], jnp.int32)
    want = posenc.encode(np.asarray(p), 8)
    encode = jax.jit(lambda q: pj.encode(q, 8))
    assert pj.functions.calls_the_core()
    assert encode.lower(p).as_text().count("callback(") == 1
    with pytest.raises(NotImplementedError, match="host_callbacks"):
        jax.export.export(encode)(p)
    with pj.self_contained():
        assert not pj.functions.calls_the_core()
        exported = jax.export.export(encode)(p)
    assert pj.functions.calls_the_core()
    assert "callback" not in exported.mlir_module()
    assert _same_bits(exported.call(p), want) and _same_bits(encode(p), want)
    # gradients flow to x through the module with traced positions (the positions are not differentiated)
    module = pj.SinusoidalPositionalEncoding(8)
    x, ids = jnp.ones((1, 2, 8), F32), jnp.array([[9000, 70_000]])
    grad = jax.jit(jax.grad(lambda x, q: (module(x, q) ** 2).sum()))(x, ids)
    np.testing.assert_allclose(np.asarray(grad[0]), 2 * (1 + posenc.encode([9000, 70_000], 8)), rtol=1e-6)


@pytest.mark.parametrize("path", PATHS)
def test_narrow_integer_ids_and_starts_are_added_without_wrapping_under_jit(path):
    """Traced int8/uint8/int16 ids (+ an offset) and a traced narrow ``start`` are positions, added and
    indexed in the widest integer type: the ids' own type wrapped (int16 ids + 65536 gave the rows of ids
    1, 2, 3; an int8 arange of 300 rows held positions -128 ..; int8 ids could not be clipped to 4096), and
    a uint32 offset of 2**32 - 2 is no offset -2 (rows of NaN: no position)."""
    module = pj.SinusoidalPositionalEncoding(4)
    x = jnp.zeros((1, 3, 4))
    with _path(path):
        step = jax.jit(lambda x, p, o: module(x, p, offset=o) - x)
        unsigned = np.asarray(step(x, jnp.array([[1, 2, 3]], jnp.uint32), jnp.uint32(2**32 - 2)))[0]
        assert np.isnan(unsigned).all()
        got = np.asarray(step(x, jnp.array([[1, 2, 3]], jnp.int16), jnp.int32(65536)))[0]
        np.testing.assert_array_equal(got, posenc.encode([65537, 65538, 65539], 4))
        if path == "portable":  # the rest compiles the portable algorithm once more each (3 s): once will do
            return
        for dtype, offset in ((jnp.uint8, 256), (jnp.int8, 4000)):
            got = np.asarray(step(x, jnp.array([[1, 2, 3]], dtype), jnp.int32(offset)))[0]
            np.testing.assert_array_equal(got, posenc.encode(np.array([1, 2, 3]) + offset, 4))
        python_offset = jax.jit(lambda x, p: module(x, p, offset=40000) - x)
        got = np.asarray(python_offset(x, jnp.array([[1, 2, 3]], jnp.int16)))[0]
        np.testing.assert_array_equal(got, posenc.encode([40001, 40002, 40003], 4))
        for dtype, length in ((jnp.int8, 300), (jnp.uint8, 300)):
            got = np.asarray(jax.jit(lambda s, n=length: pj.table(n, 4, start=s))(jnp.asarray(3, dtype)))
            np.testing.assert_array_equal(got, posenc.table(length, 4, start=3))


def test_the_derivative_in_real_positions_is_the_exact_one_and_the_rotary_refuses_one():
    """``jax.grad``/``jax.jvp``/``jax.hessian`` in real positions: d/dp sin(p ω) = ω cos(p ω) from exact rows
    (it was zero, silently), the same on the core's path and the self-contained one; a derivative in ``x``
    or a weight is unaffected. The rotary cos/sin define none: refused (they were zero, silently)."""
    positions = jnp.array([1.0, 2.5, 1000.25])
    exact = np.array(
        [[float(v) for v in ref.slope(float(p), 7, "sin_cos", odd="literal")] for p in positions]
    )
    with _path("portable"):  # the self-contained program: the same derivative (one compile of it will do)
        _, rate = jax.jvp(
            jax.jit(lambda p: pj.encode(p, 7, layout="sin_cos", odd="literal")), (positions,), (jnp.ones(3),)
        )
        np.testing.assert_allclose(np.asarray(rate), exact, rtol=0, atol=2e-7)
    with _path("core"):
        _, rate = jax.jvp(
            lambda p: pj.encode(p, 7, layout="sin_cos", odd="literal"), (positions,), (jnp.ones(3),)
        )
        np.testing.assert_allclose(np.asarray(rate), exact, rtol=0, atol=2e-7)  # float32: from float32 rows
        grad = jax.jit(jax.grad(lambda p: pj.encode(p, 7, layout="sin_cos", odd="literal").sum()))(positions)
        np.testing.assert_allclose(np.asarray(grad), exact.sum(-1), rtol=0, atol=1e-6)
        second = jax.grad(jax.grad(lambda p: pj.encode(p, 2).sum()))(jnp.float32(2.5))
        assert float(second) == pytest.approx(-(math.sin(2.5) + math.cos(2.5)), abs=1e-6)
        values = pj.encode(positions, 7, layout="sin_cos", odd="literal")
        want = posenc.encode(np.asarray(positions), 7, layout="sin_cos", odd="literal")
        np.testing.assert_array_equal(np.asarray(values), want)
    with _path("core"):
        weight = jax.jit(jax.grad(lambda w, p: (w * pj.encode(p, 4)).sum()))(2.0, positions)
        assert float(weight) == pytest.approx(float(posenc.encode(np.asarray(positions), 4).sum()), rel=1e-6)
        module = pj.SinusoidalPositionalEncoding(4)
        dx = jax.grad(lambda x: module(x, positions[None]).sum())(jnp.ones((1, 3, 4)))
        np.testing.assert_array_equal(np.asarray(dx), np.ones((1, 3, 4)))
        params = rope.config(head_dim=4, base=100.0)
        with pytest.raises(TypeError, match=r"no derivative of posenc's rotary cos/sin.*stop_gradient"):
            jax.grad(lambda p: pj.rotary.cos_sin(p, params)[1].sum())(positions)


def test_a_traced_call_refuses_an_output_memory_cannot_hold_before_any_work(monkeypatch):
    """Under jit the shapes are static: a table or encoding memory cannot hold is refused as it is traced,
    as an eager call is (it ran 17 s into RESOURCE_EXHAUSTED)."""
    monkeypatch.setattr(posenc.validation, "available_memory", lambda: 100 << 20)
    with pytest.raises(ValueError, match=r"needs 0\.25 GiB but only 0\.0977 GiB"):
        jax.jit(lambda s: pj.table(2**16, 1024, start=s))(jnp.int32(0))
    with pytest.raises(ValueError, match=r"shape \(2, 32768, 1024\)"):
        jax.jit(lambda p: pj.encode(p, 1024))(jnp.zeros((2, 32768), jnp.int32))


def test_the_module_adds_its_encoding_at_xs_rank_under_rank_promotion_raise():
    """``jax_numpy_rank_promotion="raise"`` (a common JAX setting) made the module's basic call fail: a
    (seq, d) encoding added to a (batch, seq, d) x, a (seq,) arange to a (batch, 1) offset."""
    module = pj.SinusoidalPositionalEncoding(8)
    x = jnp.ones((2, 3, 8), F32)
    step = jax.jit(lambda x, o: module(x, offset=o))
    want = (module(x), step(x, jnp.array([3, 9])))
    with jax.numpy_rank_promotion("raise"):
        got = (module(x), step(x, jnp.array([3, 9])))
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(got[1][1, 0]), 1 + posenc.encode([9], 8)[0])


def test_a_concrete_integer_array_is_a_start():
    """Under jax.disable_jit() a traced start is a concrete 0-d array, and it was refused ("start must be an
    integer"): its value is the start, as a NumPy 0-d integer array's is."""
    want = posenc.table(4, 8, start=1000)
    with jax.disable_jit():
        got = jax.jit(lambda s: pj.table(4, 8, start=s))(jnp.int32(1000))
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(pj.table(4, 8, start=np.asarray(1000, np.int16))), want)
    with pytest.raises(ValueError, match="start"):
        pj.table(4, 8, start=np.asarray(2**40, np.int64))


def test_the_host_cache_stays_within_its_total(monkeypatch):
    """The tables of every option set were kept with no total: past ``CACHE_TOTAL_BYTES`` the oldest go
    (results unchanged: each is the caller's own copy)."""
    from posenc.jax import cache

    pj.clear_cache()
    monkeypatch.setattr(cache, "CACHE_TOTAL_BYTES", 3 * 1024 * 64 * 4)  # three tables of 1024 rows
    for base in (100.0, 200.0, 300.0, 400.0, 500.0):
        module = pj.SinusoidalPositionalEncoding(64, base=base)
        got = module(jnp.zeros((1, 1000, 64), F32))
        np.testing.assert_array_equal(np.asarray(got[0]), posenc.table(1000, 64, base=base))
    held = [table.nbytes for table in cache._HOST_CACHE.values()]
    assert len(held) == 3 and sum(held) <= cache.CACHE_TOTAL_BYTES and len(cache._DEVICE_CACHE) <= 3
    pj.clear_cache()


def test_a_negative_traced_offset_gives_rows_of_nan():
    """A concrete negative offset is refused; traced under jit it gave the rows of the positions below
    zero (finite, plausible, silently): now that sequence's rows are NaN, the others exact."""
    module = pj.SinusoidalPositionalEncoding(4)
    x = jnp.zeros((2, 3, 4), F32)
    run = jax.jit(lambda x, o: module(x, offset=o))
    got = np.asarray(run(x, jnp.array([-1, 2])))
    assert np.isnan(got[0]).all() and not np.isnan(got[1]).any()
    assert np.array_equal(got[1], np.asarray(module(x, offset=np.array([1, 2])))[1])
    reals = jax.jit(lambda x, p, o: module(x, p, offset=o))(x, jnp.array([0.5, 1.5, 2.5]), jnp.array([-1, 2]))
    assert np.isnan(np.asarray(reals)[0]).all() and not np.isnan(np.asarray(reals)[1]).any()
    # the derivative in real positions is NaN with them (a mask after the encoding gave a finite gradient:
    # the invalid sequence's share dropped, silently)
    loss = jax.jit(jax.grad(lambda p, o: module(x, p, offset=o).sum()))
    assert np.isnan(np.asarray(loss(jnp.array([0.5, 1.5, 2.5]), jnp.array([-1, 2])))).all()
    assert not np.isnan(np.asarray(loss(jnp.array([0.5, 1.5, 2.5]), jnp.array([0, 2])))).any()
    # a concrete offset is refused, whether or not the positions are traced (they were NaN rows)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        jax.jit(lambda p: module(x, p, offset=np.array([-1, 2])))(jnp.arange(3))


def test_offset_decoding_concrete_values_meeting_traced_ones_are_exact_or_refused():
    """NumPy positions with a traced offset, or a NumPy offset with traced positions, enter the program in
    JAX's types. With x64 off JAX rounded float64 positions to float32 (0.1 + 5 gave the rows of
    float32(0.1) + 5) and wrapped int64 ones (2**32 + 5 gave position 5's row), silently: now refused,
    naming the parameter; held exactly, they give the eager rows (x64 off and on)."""
    module = pj.SinusoidalPositionalEncoding(8)
    x = jnp.zeros((1, 3, 8), F32)
    exact_reals = np.array([0.5, 1000.25, 12345.5])  # float32 holds them
    got = jax.jit(lambda x, o: module(x, exact_reals, offset=o))(x, jnp.array([5]))
    assert np.array_equal(np.asarray(got), np.asarray(module(x, exact_reals, offset=np.array([5]))))
    reals = np.array([0.1, 1000.3, 12345.678])
    if X64:  # float64 in the program: the eager rows
        got = jax.jit(lambda x, o: module(x, reals, offset=o))(x, jnp.array([5]))
        assert np.array_equal(np.asarray(got), np.asarray(module(x, reals, offset=np.array([5]))))
    else:
        with pytest.raises(ValueError, match=r"positions holds 0\.1 \(float64\).*float32.*jax_enable_x64"):
            jax.jit(lambda x, o: module(x, reals, offset=o))(x, jnp.array([5]))
    # positions past 2**31 are refused as an eager call refuses them (they wrapped to 5 with x64 off)
    with pytest.raises(ValueError, match=r"positions must satisfy \|p\| < 2\*\*31"):
        jax.jit(lambda x, o: module(x, np.array([2**32 + 5, 1, 2]), offset=o))(x, jnp.array([0]))
    far = np.array([2**32 + 5])
    if X64:  # the sum is past 2**31: NaN rows, as for a traced offset
        got = jax.jit(lambda x, p: module(x, p, offset=far))(x, jnp.arange(3))
        assert np.isnan(np.asarray(got)).all()
    else:
        with pytest.raises(ValueError, match=r"offset holds 4294967301 \(int64\), which JAX turns into 5"):
            jax.jit(lambda x, p: module(x, p, offset=far))(x, jnp.arange(3))


def test_mrope_text_ids_given_as_numpy_are_exact():
    """Flax's RotaryEmbedding with multimodal sections takes (batch, seq) text ids for all three axes: NumPy
    ids stay NumPy (float64 ids were rounded to float32 and int64 ones past 2**31 wrapped, silently)."""
    scaling = {"rope_type": "default", "mrope_section": [2, 3, 3]}
    params = rope.config({"head_dim": 16, "rope_theta": 10000.0, "rope_scaling": scaling})
    rotary = pj.RotaryEmbedding(params)
    ids = np.array([[0.1, 1000.3, 12345.678]])
    cos, sin = rotary(jnp.zeros((1, 3, 16), F32), ids)
    want = rope.cos_sin(np.broadcast_to(ids, (3, 1, 3)), params)
    assert np.array_equal(np.asarray(cos), want[0]) and np.array_equal(np.asarray(sin), want[1])
    with pytest.raises(ValueError, match=r"2\*\*31"):
        rotary(jnp.zeros((1, 3, 16), F32), np.array([[2**32 + 5, 1, 2]]))


# --- dtypes, offsets and JAX's global settings ---------------------------------------------------------

#: A real position whose float64 sine lies on a float32 midpoint: rounded to float64, then to float32, it is
#: not the correctly rounded float32 (0.87027824 for 0.8702783).
TWICE_ROUNDED = 1.0557669829405432


def test_a_numpy_float64_x_is_encoded_once_in_the_dtype_jax_gives_it():
    """With x64 off a NumPy float64 ``x`` is float32 wherever it meets JAX (``x + PE`` is float32): the
    module rounded the encoding to float64, then JAX rounded it to float32 (twice); now it is computed in
    float32, bit-equal to posenc.encode's. With x64 on, float64. The rotary too (it refused the x)."""
    positions = np.array([TWICE_ROUNDED, 0.5])
    fmt = "float64" if X64 else "float32"
    module = pj.SinusoidalPositionalEncoding(2)
    got = module(np.zeros((1, 2, 2)), positions)
    assert _same_bits(got[0], posenc.encode(positions, 2, dtype=fmt))
    default = module(np.zeros((1, 3, 2)))
    assert _same_bits(default[0], posenc.table(3, 2, dtype=fmt))
    params = rope.config(head_dim=4, base=100.0)
    cos, sin = pj.RotaryEmbedding(params)(np.zeros((1, 2, 4)), positions[None])
    want = rope.cos_sin(positions[None], params, dtype=fmt)
    assert _same_bits(cos, want[0]) and _same_bits(sin, want[1])


@pytest.mark.parametrize("path", PATHS)
def test_traced_bool_and_complex_rotary_positions_are_refused(path):
    """Concrete bool or complex ids are refused; traced ones were encoded (True as 1, 1+5j as 1), silently,
    by cos_sin and the RotaryEmbedding module: their dtype is static, so now refused as they are traced."""
    params = rope.config(head_dim=4, base=100.0)
    rotary = pj.RotaryEmbedding(params)
    cases = ((jnp.array([[True, False]]), r"not booleans"), (jnp.array([[1 + 5j, 0j]]), r"dtype complex"))
    with _path(path):
        for ids, message in cases:
            with pytest.raises(TypeError, match=message) as caught:
                jax.jit(lambda p: pj.rotary.cos_sin(p, params))(ids)
            assert caught.value.parameter == "positions"
            with pytest.raises(TypeError, match=message):
                jax.jit(lambda p: rotary(jnp.zeros((1, 2, 4), F32), p))(ids)
            with pytest.raises(TypeError, match=message):  # the concrete ids' error is the same kind
                pj.rotary.cos_sin(ids, params)


def test_offset_decoding_an_int_offset_past_2_31_is_refused_with_x64_off_and_on():
    """A Python (or NumPy) int offset is concrete, even under jit: one >= 2**31 is refused, naming it, in
    both x64 modes, eager and traced (with x64 on it gave rows of NaN under jit; 2**63 gave a bare
    OverflowError eagerly, and under jit with x64 on)."""
    module = pj.SinusoidalPositionalEncoding(4)
    x = jnp.zeros((1, 2, 4), F32)
    ids = jnp.array([[0, 1]], jnp.int32)
    message = r"offset must be < 2\*\*31 = 2147483648.*got offset=\d+; lower the offset"
    for offset in (2**31, 2**40, 2**63, np.uint64(2**63)):
        calls = (
            lambda o=offset: jax.jit(lambda x, p: module(x, p, offset=o))(x, ids),
            lambda o=offset: jax.jit(lambda x, p: module(x, p, offset=o))(x, ids.astype(F32)),
            lambda o=offset: module(x, np.asarray(ids), offset=o),
            lambda o=offset: module(x, np.asarray(ids, np.float64), offset=o),
            lambda o=offset: module(x, offset=o),
            lambda o=offset: jax.jit(lambda x: module(x, offset=o))(x),
        )
        for call in calls:
            with pytest.raises(ValueError, match=message) as caught:
                call()
            assert caught.value.parameter == "offset"
    last = jax.jit(lambda x, p: module(x, p, offset=2**31 - 2))(x, ids)  # the largest valid sum: exact
    assert _same_bits(last[0], posenc.encode([2**31 - 2, 2**31 - 1], 4))


def test_longrope_traced_narrow_integer_ids_under_strict_dtype_promotion():
    """jax_numpy_dtype_promotion="strict" refused the longrope switch's comparison of int8, int16 or uint8
    ids with an int32 (TypePromotionError): now compared in their own type, the same rows."""
    scaling = {
        "rope_type": "longrope",
        "short_factor": [1, 1.5, 2, 3],
        "long_factor": [2, 3, 4, 5],
        "original_max_position_embeddings": 4,
    }
    params = rope.config(head_dim=8, scaling=scaling, max_position_embeddings=16)
    with jax.numpy_dtype_promotion("strict"):
        for dtype in (jnp.int8, jnp.int16, jnp.uint8):
            for ids in (np.array([0, 1, 2]), np.array([0, 1, 5])):  # the short factors, the long ones
                cos, sin = jax.jit(lambda p: pj.rotary.cos_sin(p, params))(jnp.asarray(ids, dtype))
                want = rope.cos_sin(ids, params)
                assert _same_bits(cos, want[0]) and _same_bits(sin, want[1])


def test_the_derivative_in_vector_positions_under_rank_promotion_raise():
    """jax.grad and jax.jvp of encode in a vector of positions failed under jax_numpy_rank_promotion="raise"
    (the slope multiplied (n, d) rows by (d,) frequencies): now the same derivative as in the default mode."""
    positions = jnp.array([1.0, 2.5])

    def derivatives():
        _, rate = jax.jvp(lambda p: pj.encode(p, 6, odd="literal"), (positions,), (jnp.ones(2),))
        return rate, jax.grad(lambda p: pj.encode(p, 6, odd="literal").sum())(positions)

    want = derivatives()
    with jax.numpy_rank_promotion("raise"):
        got = derivatives()
    for a, b in zip(got, want, strict=True):
        assert _same_bits(a, np.asarray(b))


def test_the_rotary_module_names_x_when_x_is_no_float_array():
    """RotaryEmbedding reads only x's dtype: a list raised AttributeError ('list' object has no attribute
    'dtype'), an int32 x "dtype must be one of ..."; now both name x, as the sinusoidal module does."""
    rotary = pj.RotaryEmbedding(rope.config(head_dim=4, base=100.0))
    ids = jnp.array([[0, 1]])
    for module in (rotary, pj.SinusoidalPositionalEncoding(4)):
        with pytest.raises(TypeError, match=r"x must be a jax\.Array; got list") as caught:
            module([[0.0] * 4], ids)
        assert caught.value.parameter == "x"
        with pytest.raises(
            TypeError, match=r"x must be float64, float32, float16 or bfloat16; got x of dtype int32"
        ):
            module(jnp.zeros((1, 2, 4), jnp.int32), ids)
