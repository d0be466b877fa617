"""The optional compiled path (numba) gives the NumPy path's results bit for bit: exactness carries over."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc import _compiled, core


@pytest.fixture
def numpy_only(monkeypatch):
    """Run posenc as it runs without numba."""
    monkeypatch.setattr(core, "_compiled_kernel", lambda name="combine_float32": None)


def _both_paths(monkeypatch, compute):
    compiled = compute()
    with monkeypatch.context() as patch:
        patch.setattr(core, "_compiled_kernel", lambda name="combine_float32": None)
        plain = compute()
    return compiled, plain


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
def test_compiled_tables_equal_numpy_tables(monkeypatch, options, start):
    d_model = 1025 if "odd" in options else 1024
    compiled, plain = _both_paths(monkeypatch, lambda: posenc.table(1400, d_model, start=start, **options))
    assert compiled.tobytes() == plain.tobytes()


@pytest.mark.parametrize(
    "options", [{"layout": "sin_cos"}, {"odd": "literal"}, {"layout": "cos_sin", "odd": "drop", "start": -64}]
)
def test_values_near_a_midpoint_are_settled_exactly(monkeypatch, options):
    """Widened error bands make many values look unsure: the compiled path's second pass and the
    arbitrary-precision rest must still give the correctly rounded table (position 0 included)."""
    d_model = 257 if "odd" in options else 256
    expected = posenc.table(128, d_model, **options)
    init, exact, calls = core._Spec.__init__, core._Spec.exact, []

    def wide_bands(self, *args):
        init(self, *args)
        self.absolute_error = 2.0**-36

    def counted(self, p, i):
        calls.append((p, i))
        return exact(self, p, i)

    monkeypatch.setattr(core._Spec, "__init__", wide_bands)
    monkeypatch.setattr(core._Spec, "exact", counted)
    assert posenc.table(128, d_model, **options).tobytes() == expected.tobytes()
    assert len(calls) > 64  # the arbitrary-precision step ran, past the first 64 slots of the second pass


def test_compiled_exact_rows_equal_numpy_rows_bit_for_bit():
    rng = np.random.default_rng(5)
    positions = np.concatenate(
        [
            rng.integers(-(2**31) + 1, 2**31, 2000).astype(float),
            rng.uniform(-(2**31), 2**31, 2000),
            np.arange(64.0),
        ]
    )
    limbs = core._Options.check(130, 10000.0, 1, 1.0, "interleaved", "zero").constants()[1]
    sin, cos = np.empty((len(positions), 65)), np.empty((len(positions), 65))
    _compiled.direct(positions, limbs, sin, cos)
    expected_sin, expected_cos = core._direct(positions[:, None], limbs)
    assert sin.tobytes() == expected_sin.tobytes() and cos.tobytes() == expected_cos.tobytes()


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_compiled_encode_equals_numpy_encode(monkeypatch, dtype):
    positions = np.random.default_rng(2).uniform(-1e9, 1e9, (30, 10))
    compiled, plain = _both_paths(monkeypatch, lambda: posenc.encode(positions, 40, dtype=dtype))
    assert compiled.tobytes() == plain.tobytes()


def test_the_numpy_path_alone_stays_exact(numpy_only):
    from reference import round_to, sincos

    table = posenc.table(3000, 64, start=123_456)
    for row, i in [(0, 0), (1500, 7), (2999, 31), (777, 20)]:
        sin, cos = sincos(123_456 + row, i, 64)
        assert float(table[row, 2 * i]) == round_to(sin, "float32")
        assert float(table[row, 2 * i + 1]) == round_to(cos, "float32")


def test_import_posenc_does_not_import_numba():
    code = "import sys, posenc; posenc.table(3, 4); print('numba' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"  # small tables never load the compiled path
