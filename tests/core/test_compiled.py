"""The compiled path (the C extension posenc.core._kernels, built at install) gives the NumPy path's results
bit for bit: exactness carries over."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc import core
from posenc.core import _kernels


@pytest.fixture
def numpy_only(monkeypatch):
    """Run posenc as it runs where the extension was not built."""
    monkeypatch.setattr(core.compiled, "kernel", lambda name="combine": None)


def _both_paths(monkeypatch, compute):
    compiled = compute()
    with monkeypatch.context() as patch:
        patch.setattr(core.compiled, "kernel", lambda name="combine": None)
        plain = compute()
    return compiled, plain


def test_the_extension_is_built_and_used():
    assert core.compiled_path() == "C"  # `pip install -e .` / `make test` must build posenc.core._kernels


# combine's builds this CPU runs, by index: "plain" (portable C) everywhere, "fma" (fused multiply-adds,
# float32 rows vectorised by hand in AVX2) on x86-64 CPUs that have AVX2 and FMA. Each is tested here.
BUILDS = list(enumerate(_kernels.builds()))


def _use_build(monkeypatch, build):
    """Make posenc's tables run combine's build ``build`` (an index into ``_kernels.builds()``)."""
    combine = _kernels.combine
    monkeypatch.setattr(
        core.compiled,
        "kernel",
        lambda name="combine": (
            (lambda *args: combine(*args, build)) if name == "combine" else getattr(_kernels, name)
        ),
    )


def test_combine_lists_its_builds_and_refuses_others():
    names = _kernels.builds()
    assert names[0] == "plain" and names in (("plain",), ("plain", "fma"))
    rows, band, out, unsure = (
        np.zeros((2, 4)),
        np.zeros(4),
        np.empty((3, 8), np.float32),
        np.empty(3, np.int64),
    )
    args = (rows, rows, rows, rows, band, band, 2, out, unsure, unsure, (4, 8, 0, 1, 2, 4, 4), 0, 3, 0)
    with pytest.raises(ValueError, match="build 2 is not one this CPU runs"):
        _kernels.combine(*args, 2)
    assert _kernels.combine(*args, 0) == _kernels.combine(*args) >= 0


@pytest.mark.parametrize(("build", "name"), BUILDS, ids=[name for _, name in BUILDS])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"layout": "sin_cos", "start": -700},
        {"layout": "cos_sin", "odd": "literal", "start": 2**31 - 3000},
    ],
)
@pytest.mark.parametrize(
    ("length", "d_model"),
    [(1400, 1024), (97, 30), (33, 6), (2500, 2), (9, 1031), (2, 16)],  # whole and part vectors, short blocks
)
def test_every_build_gives_the_numpy_table(monkeypatch, build, name, options, length, d_model):
    """Each build of combine (groups of 4, 2 and 1 rows of a block; the frequencies past the last whole
    vector) writes the NumPy path's bits."""
    if options.get("odd") is None and d_model % 2:
        options = {**options, "odd": "zero"}
    with monkeypatch.context() as patch:
        patch.setattr(core.compiled, "kernel", lambda name="combine": None)
        plain = posenc.table(length, d_model, **options)
    _use_build(monkeypatch, build)
    assert posenc.table(length, d_model, **options).tobytes() == plain.tobytes()


def test_a_plans_arrays_start_in_page_slots_of_their_own():
    """The six arrays angle addition reads side by side start in distinct cache-line slots of a page
    (compiled.staggered_empty): arrays that all start at one offset overflow an L1 cache set."""
    spec = core.Spec(core.Options.check(4096, 10000.0, 0, 1.0, "interleaved", "zero"), np.dtype(np.float32))
    plan = core.addition.addition_plan(5, 8192, spec)
    offsets = [array.ctypes.data % 4096 for array in plan[1:]]
    assert offsets == [core.compiled.SLOT_BYTES * slot for slot in (3, 4, 1, 2, 5, 6)]
    for slot in range(8):
        array = core.compiled.staggered_empty((3, 5), slot)
        assert array.shape == (3, 5) and array.flags.c_contiguous and array.ctypes.data % 4096 == 576 * slot


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"layout": "sin_cos", "shift": 1},
        {"layout": "cos_sin", "scale": 3.5, "base": 1e9},
        {"odd": "literal"},
        {"odd": "drop", "layout": "sin_cos"},
    ],
)
@pytest.mark.parametrize("start", [0, -700, 2**31 - 1500])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_compiled_tables_equal_numpy_tables(monkeypatch, options, start, dtype):
    d_model = 1025 if "odd" in options else 1024
    compiled, plain = _both_paths(
        monkeypatch, lambda: posenc.table(1400, d_model, start=start, dtype=dtype, **options)
    )
    assert compiled.tobytes() == plain.tobytes()


@pytest.mark.parametrize(
    ("dtype", "scale", "subnormal"),
    [
        ("float16", 3e-5, True),  # results below 2**-14
        ("float16", 1e-6, True),
        ("float16", 1e-40, False),  # every sine rounds to ±0
        ("bfloat16", 1e-6, False),
        ("bfloat16", 1e-40, True),  # results below 2**-126
    ],
)
def test_16_bit_tables_round_tiny_values_straight_from_float64(monkeypatch, dtype, scale, subnormal):
    """The kernel rounds float64 to bfloat16/float16 on the bits, subnormal results and signed zeros
    included: the NumPy path's bits."""
    compiled, plain = _both_paths(
        monkeypatch, lambda: posenc.table(600, 130, start=-300, dtype=dtype, scale=scale)
    )
    assert compiled.tobytes() == plain.tobytes()
    bits = compiled.view(np.uint16) & 0x7FFF
    exponent = bits >> (7 if dtype == "bfloat16" else 10)
    assert ((exponent == 0) & (bits != 0)).any() == subnormal


@pytest.mark.parametrize("threads", ["1", "2", "3"])
@pytest.mark.parametrize("shape", [(1, 8), (7, 6), (600, 1030), (2500, 2)])
def test_every_thread_count_and_row_split_gives_the_same_table(monkeypatch, threads, shape):
    expected = posenc.table(*shape, start=-3, layout="cos_sin", odd="zero")
    monkeypatch.setenv("POSENC_NUM_THREADS", threads)
    out = np.full(shape, np.nan, dtype=np.float32)
    posenc.table(*shape, start=-3, layout="cos_sin", odd="zero", out=out)
    assert out.tobytes() == expected.tobytes()


def test_a_bad_thread_count_is_refused(monkeypatch):
    monkeypatch.setenv("POSENC_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="POSENC_NUM_THREADS"):
        posenc.table(2048, 512)


@pytest.mark.parametrize("room", [None, 0], ids=["values-listed", "rows-redone"])
@pytest.mark.parametrize(
    "options",
    [
        {"layout": "sin_cos"},
        {"odd": "literal"},
        {"layout": "cos_sin", "odd": "drop", "start": -64},
        {"dtype": "bfloat16"},
        {"dtype": "float16", "layout": "sin_cos", "start": -64},
    ],
)
@pytest.mark.parametrize(("build", "name"), BUILDS, ids=[name for _, name in BUILDS])
def test_values_near_a_midpoint_are_settled_exactly(monkeypatch, options, room, build, name):
    """Widened error bands make many values look unsure: the compiled path's second pass (the values the
    kernel lists, or with no room for the list, its flagged rows redone in NumPy) and the
    arbitrary-precision rest must still give the correctly rounded table (position 0 included), in every
    build of the kernel."""
    d_model = 257 if "odd" in options else 256
    expected = posenc.table(128, d_model, **options)
    _use_build(monkeypatch, build)
    if room is not None:
        monkeypatch.setattr(
            core.addition, "UNSURE_ROOM", room - d_model // 2
        )  # less room than one row's values
    init, exact, calls = core.Spec.__init__, core.Spec.exact, []

    # about as wide against the format's precision as 2**-36 is against float32's
    wide = 2.0 ** {"bfloat16": -20, "float16": -22}.get(options.get("dtype", "float32"), -36)

    def wide_bands(self, *args):
        init(self, *args)
        self.absolute_error = wide

    def counted(self, p, i):
        calls.append((p, i))
        return exact(self, p, i)

    monkeypatch.setattr(core.Spec, "__init__", wide_bands)
    monkeypatch.setattr(core.Spec, "exact", counted)
    assert posenc.table(128, d_model, **options).tobytes() == expected.tobytes()
    assert len(calls) > 64  # the arbitrary-precision step ran, many times


def test_encode_values_near_a_midpoint_are_settled_exactly(monkeypatch):
    positions = np.array([0.0, -0.0, 1.0, -3.0, 2.5e-9, 12345.0, 2.0**31 - 1])
    expected = posenc.encode(positions, 66, layout="sin_cos")
    init = core.Spec.__init__

    def wide_bands(self, *args):
        init(self, *args)
        self.absolute_error = 2.0**-30  # nearly every value looks unsure: its row is settled in NumPy

    monkeypatch.setattr(core.Spec, "__init__", wide_bands)
    assert posenc.encode(positions, 66, layout="sin_cos").tobytes() == expected.tobytes()


def test_compiled_exact_rows_equal_numpy_rows_bit_for_bit():
    rng = np.random.default_rng(5)
    positions = np.concatenate(
        [
            rng.integers(-(2**31) + 1, 2**31, 2000).astype(float),
            rng.uniform(-(2**31), 2**31, 2000),
            np.arange(64.0),
        ]
    )
    for d_model, shift, scale in [(130, 1, 1.0), (1024, 0, 1.0), (64, 0, 1000.0)]:
        limbs = core.Options.check(d_model, 10000.0, shift, scale, "interleaved", "zero").constants()[1]
        n = limbs.shape[1]
        sin, cos = np.empty((len(positions), n)), np.empty((len(positions), n))
        _kernels.direct(positions, limbs, sin, cos, n, 0, len(positions))
        expected_sin, expected_cos = core.arithmetic.direct(positions[:, None], limbs)
        assert sin.tobytes() == expected_sin.tobytes() and cos.tobytes() == expected_cos.tobytes()
        # pairs (position k, frequency i_k), as Spec.certain settles them: the same bits
        i = np.random.default_rng(d_model).integers(0, n, len(positions))
        pair_sin, pair_cos = core.compiled.direct_pairs(positions, limbs[:, i])
        assert pair_sin.tobytes() == expected_sin[np.arange(len(positions)), i].tobytes()
        assert pair_cos.tobytes() == expected_cos[np.arange(len(positions)), i].tobytes()


def test_the_kernels_refuse_buffers_too_small():
    limbs = core.Options.check(8, 10000.0, 0, 1.0, "interleaved", "zero").constants()[1]
    small = np.empty((2, 4))
    with pytest.raises(ValueError, match="needs"):
        _kernels.direct(np.arange(3.0), limbs, small, small, 4, 0, 3)
    with pytest.raises(ValueError, match="buffer limbs holds 160 bytes, needs 200"):
        _kernels.direct_pairs(np.arange(5.0), limbs, np.empty(5), np.empty(5), 5)
    out, unsure = np.empty((3, 8), np.float32), np.empty(3, np.int64)
    with pytest.raises(ValueError, match="column plan"):  # 5 cosines of 4 frequencies
        _kernels.encode_float32(np.arange(3.0), limbs, 0.0, out, unsure, (4, 8, 0, 1, 2, 4, 5), 0, 3)
    rows, band = np.zeros((2, 4)), np.zeros(4)
    with pytest.raises(ValueError, match="format must be"):
        _kernels.combine(
            rows, rows, rows, rows, band, band, 2, out, unsure, unsure, (4, 8, 0, 1, 2, 4, 4), 0, 3, 3
        )
    half = np.empty((3, 4), np.float32)  # room for 3 rows of 8 16-bit values, not of 8 float32 ones
    columns = (4, 8, 0, 1, 2, 4, 4)
    with pytest.raises(ValueError, match="needs"):
        _kernels.combine(rows, rows, rows, rows, band, band, 2, half, unsure, unsure, columns, 0, 3, 0)
    assert (
        _kernels.combine(rows, rows, rows, rows, band, band, 2, half, unsure, unsure, columns, 0, 3, 1) >= 0
    )


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "bfloat16"])
@pytest.mark.parametrize(
    "options", [{}, {"layout": "sin_cos", "odd": "literal"}, {"layout": "cos_sin", "scale": 3.5}]
)
def test_compiled_encode_equals_numpy_encode(monkeypatch, dtype, options):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(2)
    positions = np.concatenate(
        [
            rng.uniform(-1e9, 1e9, 300),
            rng.integers(-(2**31) + 1, 2**31, 100),
            [0.0, -0.0, 1e-30, -1e-300, 7.0],
        ]
    ).reshape(5, 81)
    d_model = 41 if "odd" in options else 40
    compiled, plain = _both_paths(
        monkeypatch, lambda: posenc.encode(positions, d_model, dtype=dtype, **options)
    )
    assert compiled.tobytes() == plain.tobytes()


def test_the_numpy_path_alone_stays_exact(numpy_only):
    from tests.support.reference import round_to, sincos

    table = posenc.table(3000, 64, start=123_456)
    for row, i in [(0, 0), (1500, 7), (2999, 31), (777, 20)]:
        sin, cos = sincos(123_456 + row, i, 64)
        assert float(table[row, 2 * i]) == round_to(sin, "float32")
        assert float(table[row, 2 * i + 1]) == round_to(cos, "float32")


def test_the_constants_are_cached_read_only_per_options():
    options = core.Options.check(512, 10000.0, 0, 1.0, "interleaved", "zero")
    omegas, limbs = options.constants()
    assert options.constants()[0] is omegas and not omegas.flags.writeable and not limbs.flags.writeable
    assert options._replace(shift=1).constants()[0] is not omegas  # keyed on every option
    assert posenc.frequencies(512).flags.writeable  # the public function returns a copy


def test_import_posenc_loads_no_compiler():
    code = (
        "import sys, posenc; posenc.table(3, 4); posenc.table(300, 64); "
        "print('numba' in sys.modules, 'posenc.core._kernels' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]  # ahead-of-time C: no JIT, nothing compiled at run time


_SLOW_NO_KERNELS = """
import time
class NoKernels:  # an import of the extension that fails after a while (a machine without a C compiler)
    def find_spec(self, name, path=None, target=None):
        if name == "posenc.core._kernels":
            time.sleep(0.05)
            raise ImportError("no posenc.core._kernels here")
sys.meta_path.insert(0, NoKernels())
"""

_THREADS = """
import sys, threading
import numpy as np
{prelude}
import posenc
expected = posenc.table(4096, 256)
failures = []
def work():
    try:
        for _ in range(3):
            assert np.array_equal(posenc.table(4096, 256), expected)
            posenc.encode(np.arange(100), 256)
    except Exception as error:
        failures.append(repr(error))
threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
print(failures or "ok")
"""


@pytest.mark.parametrize(
    "prelude, environment",
    [
        # the C kernels run from eight threads at once, all on the one pool of eight
        ("", {"POSENC_NUM_THREADS": "8"}),
        # without the extension, threads arriving together at the first call all saw a half-imported module
        (_SLOW_NO_KERNELS, {}),
    ],
    ids=["eight-pools", "no-kernels"],
)
def test_eight_threads_at_once_get_the_table(prelude, environment):
    result = subprocess.run(
        [sys.executable, "-c", _THREADS.format(prelude=prelude)],
        capture_output=True,
        text=True,
        env={**os.environ, **environment},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok", result.stdout


_FORKED = """
import os, numpy as np, posenc
expected = posenc.table(2048, 512)  # starts the thread pool
pid = os.fork()
if pid == 0:  # the child's copy of the pool has no threads: it must start its own, not wait forever
    os._exit(0 if np.array_equal(posenc.table(2048, 512), expected) else 1)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_gets_its_own_thread_pool():
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _FORKED],
        capture_output=True,
        text=True,
        env={**os.environ, "POSENC_NUM_THREADS": "2"},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "0"


def test_work_on_the_pool_that_calls_the_pool_runs_inline():
    seen = []

    def inner(lo, hi):
        seen.append((lo, hi))

    def outer(lo, hi):  # a worker of the pool waiting on the pool could deadlock it: it runs inline
        core.parallel.run_blocks(inner, 4, 1, elements=core.parallel.PARALLEL_ELEMENTS)

    core.parallel.run_blocks(outer, 8, 1, elements=core.parallel.PARALLEL_ELEMENTS)
    assert sorted(seen) == sorted([(k, k + 1) for k in range(4)] * 8)
