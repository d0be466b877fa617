"""The fuzz suite (tests/support/fuzzing.py): presets, porting (``identify``, ``convert_layout``) and
analysis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import analysis, porting, presets
from tests.support.fuzz_cases import (
    LAYOUTS,
    right_value_or_clear_error,
    same_bits,
)
from tests.support.fuzzing import (
    INF,
    NAN,
    fuzz,
)

# --- presets, porting, analysis ------------------------------------------------------------------------

PRESET_PARAMETERS = {
    "padding_idx": [1, 0, -1, 2**31, True, 1.5, None],
    "padding": [1],
    "base": [100.0, 1, NAN, 10**400, "1"],
    "max_wavelength": [10000.0, 0.5],
    "min_timescale": [1.0, 0, -1, INF],
    "max_timescale": [1e4, 1.0, 0.5, 10**400],
    "flip_sin_to_cos": [True, False, "yes"],
    "downscale_freq_shift": [0, 1, 1e9, NAN],
    "scale": [1, 0, 2**21],
    "max_period": [10000, 1],
    "bogus": [1],
}


@fuzz(150)
@given(
    name=st.sampled_from([*presets.names(), "nope", "", None, "Fairseq"]),
    parameters=st.dictionaries(st.sampled_from(list(PRESET_PARAMETERS)), st.integers(0, 6), max_size=2),
    d_model=st.sampled_from([8, 9, 2, 3, 64]),
    start=st.sampled_from([0, 1, 3, -2]),
)
def test_presets(name, parameters, d_model, start):
    kwargs = {key: PRESET_PARAMETERS[key][i % len(PRESET_PARAMETERS[key])] for key, i in parameters.items()}
    factory = getattr(presets, "_FACTORIES", {}).get(name)
    import inspect

    accepted = set(inspect.signature(factory).parameters) if factory else set()
    unknown = [key for key in kwargs if key not in accepted]
    names = ["preset", "name", *kwargs, *unknown]
    preset = right_value_or_clear_error(lambda: presets.get(name, **kwargs), names=names)
    if unknown and factory and isinstance(preset, TypeError):
        message = str(preset)
        assert not any(f"_{n.replace('-', '_')}" in message for n in presets.names()), (
            f"a private name in {message!r}"
        )
        assert all(a in message for a in accepted), (
            f"the valid arguments {sorted(accepted)} are not all named: {message!r}"
        )
    if isinstance(preset, Exception):
        return

    def check(values):
        options = preset.options
        if d_model // 2 == 1 and options["shift"] >= 1:
            options["shift"] = 0.0
        want = posenc.table(5, d_model, start=start, **options, dtype="float64")
        if preset.padding_idx is not None and start <= preset.padding_idx < start + 5:
            want[preset.padding_idx - start] = 0
        assert same_bits(values, want), "preset.table differs from posenc.table with preset.options"

    right_value_or_clear_error(
        lambda: preset.table(5, d_model, start=start, dtype="float64"),
        names=["d_model", "odd", "shift", "base", "frequency", "underflow", "scale"],
        check=check,
    )


@fuzz(80)
@given(
    table=st.sampled_from(
        [
            "good",
            "sin_cos",
            "empty rows",
            "1 column",
            "1-D",
            "3-D",
            "nan",
            "inf",
            "int",
            "object",
            "complex",
            "bool",
            "huge values",
            "zeros",
            "random",
            "bfloat16",
            "float16 long",
            "list",
            "scalar",
        ]
    ),
    tolerance=st.sampled_from([None, None, 1e-3, 0, -1, NAN, INF, "1"]),
    candidates=st.sampled_from([3, 1, 0, -1, 2.0, 10**6]),
)
def test_identify(table, tolerance, candidates):
    rng = np.random.default_rng(0)
    stored = {
        "good": posenc.table(20, 8),
        "sin_cos": posenc.table(20, 8, shift=1, layout="sin_cos"),
        "empty rows": np.zeros((0, 8), np.float32),
        "1 column": np.zeros((5, 1), np.float32),
        "1-D": np.zeros(8, np.float32),
        "3-D": posenc.table(20, 8)[None],
        "nan": np.full((4, 8), NAN),
        "inf": np.where(np.eye(4, 8) > 0, INF, 0.0),
        "int": posenc.table(20, 8).astype(np.int32),
        "object": np.array([[1, None]], dtype=object),
        "complex": posenc.table(4, 8).astype(np.complex64),
        "bool": np.ones((4, 8), bool),
        "huge values": np.full((4, 8), 1e300),
        "zeros": np.zeros((10, 8)),
        "random": rng.standard_normal((30, 16)),
        "bfloat16": posenc.table(20, 8, dtype="bfloat16"),
        "float16 long": posenc.table(3000, 4, dtype="float16"),
        "list": posenc.table(3, 4).tolist(),
        "scalar": 1.0,
    }[table]

    def check(matches):
        assert isinstance(matches, list) and all(isinstance(m, porting.Match) for m in matches)
        if table in ("good", "sin_cos") and tolerance is None and candidates == 3:
            assert matches and matches[0].matches, matches

    right_value_or_clear_error(
        lambda: porting.identify(stored, tolerance=tolerance, candidates=candidates),
        names=["table", "tolerance", "candidates", "shape", "dtype"],
        check=check,
    )


@fuzz(60)
@given(
    shape=st.sampled_from([(4, 8), (4, 7), (0, 8), (8,), (2, 3, 8), (), (4, 0)]),
    source=st.sampled_from([*LAYOUTS, "x", None]),
    target=st.sampled_from([*LAYOUTS, "x", None]),
    dtype=st.sampled_from([np.float32, np.float16, np.int32, object, np.complex64]),
)
def test_convert_layout(shape, source, target, dtype):
    values = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    bad = [n for n, v in (("source", source), ("target", target)) if v not in LAYOUTS]

    def check(result):
        assert result.shape == values.shape
        back = porting.convert_layout(result, target, source)
        assert np.array_equal(back, values), "convert_layout is not inverted by the reverse conversion"

    right_value_or_clear_error(
        lambda: porting.convert_layout(values, source, target),
        names=[*bad, "table", "layout", "shape", "dtype", "d_model"],
        check=check,
    )


ANALYSIS_LENGTHS = [0, 1, 3, 17, -1, True, 2.0, None, 2**40]
ANALYSIS_CALLS = {
    "max_magnitude": lambda a: analysis.max_magnitude(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "length_consistent": lambda a: analysis.length_consistent(
        a["length"], a["d_model"], start=a["start"], dtype=a["dtype"]
    ),
    "recomputes_identically": lambda a: analysis.recomputes_identically(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "collisions": lambda a: analysis.collisions(
        a["length"], a["d_model"], start=a["start"], dtype=a["dtype"], compute=a["compute"]
    ),
    "collision_horizon": lambda a: analysis.collision_horizon(
        a["d_model"], limit=a["length"], dtype=a["dtype"], compute=a["compute"]
    ),
    "uniqueness_margin": lambda a: analysis.uniqueness_margin(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "naive_table": lambda a: analysis.naive_table(
        a["length"], a["d_model"], start=a["start"], base=a["base"], dtype=a["dtype"]
    ),
    "shift_error": lambda a: analysis.shift_error(
        a["k"], a["length"], a["d_model"], start=a["start"], base=a["base"]
    ),
    "shift_matrix": lambda a: analysis.shift_matrix(a["k"], a["d_model"], base=a["base"], layout=a["layout"]),
    "closed_form_dot_product": lambda a: analysis.closed_form_dot_product(
        a["k"], a["d_model"], base=a["base"]
    ),
    "closed_form_distance": lambda a: analysis.closed_form_distance(a["k"], a["d_model"], base=a["base"]),
    "wavelengths": lambda a: analysis.wavelengths(a["d_model"], base=a["base"]),
    "wrap_length": lambda a: analysis.wrap_length(a["d_model"], base=a["base"]),
    "check": lambda a: analysis.check(
        a["length"], a["d_model"], base=a["base"], dtype=a["dtype"], compute=a["compute"]
    ),
}
ANALYSIS_NAMES = [
    "length",
    "d_model",
    "start",
    "base",
    "dtype",
    "compute",
    "limit",
    "k",
    "offsets",
    "positions",
    "layout",
    "shift",
    "output",
    "memory",
    "GiB",
    "2**31",
]


def _analysis_value(result):
    if isinstance(result, float):
        assert not math.isnan(result)
    elif isinstance(result, np.ndarray):
        assert np.isfinite(result.astype(np.float64)).all()


@pytest.mark.parametrize("name", list(ANALYSIS_CALLS))
@fuzz(25)
@given(
    length=st.sampled_from(ANALYSIS_LENGTHS),
    d_model=st.sampled_from([8, 8, 4, 5, 2, 0, 1.0, 2**20 + 1]),
    start=st.sampled_from([0, 5, -7, 2**31 - 3, 2**31, True]),
    base=st.sampled_from([10000.0, 100.0, 1, NAN, 10**400]),
    dtype=st.sampled_from(["float32", "bfloat16", "float16", "float64", "int8"]),
    compute=st.sampled_from(["exact", "dtype", "fast"]),
    k=st.sampled_from([1, 0, -3, 2**31, NAN, 0.5, [1, 2], "1", True]),
    layout=st.sampled_from([*LAYOUTS, "x"]),
)
def test_analysis(name, **arguments):
    right_value_or_clear_error(
        lambda: ANALYSIS_CALLS[name](arguments), names=ANALYSIS_NAMES, check=_analysis_value, seconds=10
    )


MATRICES = {
    "good": posenc.table(6, 8, dtype="float64"),
    "empty": np.zeros((0, 4)),
    "nan": np.full((3, 4), NAN),
    "zero row": np.zeros((2, 4)),
    "1-D": np.ones(4),
    "3-D": np.ones((2, 2, 2)),
    "complex": np.ones((2, 2), np.complex64),
    "object": np.array([[1, None]], dtype=object),
    "ragged": [[1.0, 2.0], [3.0]],
    "bfloat16": posenc.table(6, 8, dtype="bfloat16"),
    "non-square": np.ones((2, 3)),
    "huge": np.broadcast_to(0.5, (2**20, 2**20)),
    "str": "abc",
}


@pytest.mark.parametrize(
    "function", [analysis.dot_products, analysis.cosine_similarity, analysis.toeplitz_deviation]
)
@pytest.mark.parametrize("matrix", list(MATRICES))
def test_analysis_matrices(function, matrix):
    value = MATRICES[matrix]
    name = "matrix" if function is analysis.toeplitz_deviation else "encodings"

    def check(result):
        if matrix == "nan":  # NaN in, NaN out (or a clear error): never a clean figure
            assert np.isnan(result).all(), f"NaN input gave {result!r}"
            return
        _analysis_value(result)

    valid = (
        True
        if matrix in ("good", "empty", "bfloat16") and function is not analysis.toeplitz_deviation
        else None
    )
    right_value_or_clear_error(
        lambda: function(value), valid=valid, names=[name, "memory", "GiB", "output"], check=check, seconds=10
    )
