"""``posenc table``: values against the paper's worked numbers and against ``posenc.table`` elementwise, and
every output format (text, csv, json, npy, --output) read back."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

import posenc
from tests.support.cli_cases import (
    HEADER_5_4,
    WORKED_TABLE_5_4,
    read_csv,
    run,
    text_rows,
)

# --- posenc table: text ---------------------------------------------------------------------------


def test_table_text_has_the_worked_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "table", "5", "4")
    assert (code, err) == (0, "")
    header, rows = text_rows(out)
    assert header == HEADER_5_4
    assert rows == WORKED_TABLE_5_4


def test_table_text_is_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "12", "6", "--start", "-3")
    lines = out.splitlines()
    assert len({len(line) for line in lines}) == 1  # right-aligned: every line equally long
    assert [line.split()[0] for line in lines[1:]] == [str(p) for p in range(-3, 9)]


LAYOUT_HEADERS = [
    ("interleaved", 4, ["0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1"]),
    ("sin_cos", 4, ["0 sin ω0", "1 sin ω1", "2 cos ω0", "3 cos ω1"]),
    ("cos_sin", 4, ["0 cos ω0", "1 cos ω1", "2 sin ω0", "3 sin ω1"]),
    ("interleaved", 5, ["0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1", "4 zero"]),
    (
        "sin_cos",
        7,
        ["0 sin ω0", "1 sin ω1", "2 sin ω2", "3 cos ω0", "4 cos ω1", "5 cos ω2", "6 zero"],
    ),
    ("cos_sin", 3, ["0 cos ω0", "1 sin ω0", "2 zero"]),
]


@pytest.mark.parametrize(("layout", "d_model", "columns"), LAYOUT_HEADERS)
def test_header_names_function_and_frequency(
    capsys: pytest.CaptureFixture[str], layout: str, d_model: int, columns: list[str]
) -> None:
    _, out, _ = run(capsys, "table", "3", str(d_model), "--layout", layout)
    assert text_rows(out)[0] == ["pos", *columns]
    _, out, _ = run(capsys, "table", "3", str(d_model), "--layout", layout, "--format", "csv")
    assert read_csv(out)[0] == ["pos", *columns]


@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize(("d_model", "shift"), [(4, 0), (7, 0), (8, 1), (9, 0.5)])
def test_header_labels_match_the_values(
    capsys: pytest.CaptureFixture[str], layout: str, d_model: int, shift: float
) -> None:
    """Each label 'k sin ωi' / 'k cos ωi' / 'k zero' says what column k holds."""
    args = ["table", "50", str(d_model), "--start", "-7", "--base", "100", "--shift", str(shift)]
    _, out, _ = run(capsys, *args, "--layout", layout, "--format", "csv", "--dtype", "float64")
    header, positions, values = read_csv(out)
    omegas = posenc.frequencies(d_model, base=100, shift=shift)
    p = np.array(positions, dtype=np.float64)
    for k, label in enumerate(header[1:]):
        dim, name = label.split(" ", 1)
        assert int(dim) == k
        if name == "zero":
            expected = np.zeros_like(p)
        else:
            function, omega = name.split(" ω")
            expected = getattr(np, function)(p * omegas[int(omega)])
        np.testing.assert_allclose(values[:, k], expected, rtol=0, atol=1e-12, err_msg=label)


def test_start(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--start", "100", "--format", "csv")
    _, positions, values = read_csv(out)
    assert positions == [100, 101, 102]
    assert_same_bits(values, posenc.table(3, 4, start=100))
    _, out, _ = run(capsys, "table", "3", "4", "--start", "100")
    assert [row[0] for row in text_rows(out)[1]] == ["100", "101", "102"]
    assert text_rows(out)[1][0][1] == f"{np.sin(np.float32(100.0)):.4f}"  # sin(100) = -0.5064


@pytest.mark.parametrize(
    ("digits", "row_1"),
    [("6", "0.841471 0.540302 0.010000 0.999950"), ("2", "0.84 0.54 0.01 1.00"), ("0", "1 1 0 1")],
)
def test_digits(capsys: pytest.CaptureFixture[str], digits: str, row_1: str) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--digits", digits)
    assert text_rows(out)[1][1] == ["1", *row_1.split()]


def test_no_negative_zero(capsys: pytest.CaptureFixture[str]) -> None:
    # sin(-0.001) = -0.001 shows as 0.00, not -0.00
    _, out, _ = run(capsys, "table", "2", "2", "--start", "-1", "--base", "2", "--digits", "0")
    assert "-0" not in out


def test_wide_table_is_printed_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "2", "512")
    header, rows = text_rows(out)
    assert len(header) == 513 and header[-1] == "511 cos ω255"
    assert all(len(row) == 513 for row in rows)


# --- posenc table: csv, json, npy, --output -------------------------------------------------------

DTYPES = ["float32", "float64", "float16", "bfloat16"]
OPTIONS = [
    ("7", "6"),
    ("5", "9", "--start", "-2", "--layout", "sin_cos", "--shift", "1"),
    ("4", "8", "--base", "100", "--layout", "cos_sin", "--start", "1000000"),
]


def _flags(args: tuple[str, ...]) -> dict[str, str]:
    """The ``--name value`` pairs after LENGTH and D_MODEL."""
    return dict(zip(args[2::2], args[3::2], strict=True))


def _table_call(args: tuple[str, ...], dtype: str) -> np.ndarray:
    """posenc.table with the options of the command line arguments ``args``."""
    options = _flags(args)
    return posenc.table(
        int(args[0]),
        int(args[1]),
        start=int(options.get("--start", 0)),
        base=float(options.get("--base", 10000)),
        shift=float(options.get("--shift", 0)),
        layout=options.get("--layout", "interleaved"),
        dtype=dtype,
    )


def _csv_values(out: str, args: tuple[str, ...], dtype: str) -> np.ndarray:
    """The values of a csv table, after checking its first position."""
    _, positions, values = read_csv(out)
    assert positions[0] == int(_flags(args).get("--start", 0))
    return values


def _json_values(out: str, args: tuple[str, ...], dtype: str) -> np.ndarray:
    """The values of a json table, after checking its keys, positions and columns."""
    document = json.loads(out)
    meta = ["d_model", "base", "shift", "scale", "layout", "odd", "start", "dtype"]
    assert list(document) == [*meta, "positions", "columns", "values"]
    assert document["d_model"] == int(args[1])
    assert document["dtype"] == dtype
    assert len(document["positions"]) == int(args[0])
    assert document["positions"] == list(range(document["start"], document["start"] + int(args[0])))
    assert len(document["columns"]) == int(args[1])
    return np.array(document["values"])


_VALUES_OF = {"csv": _csv_values, "json": _json_values}


@pytest.mark.parametrize("fmt", list(_VALUES_OF))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("args", OPTIONS)
def test_csv_and_json_read_back_exactly(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], dtype: str, fmt: str
) -> None:
    code, out, _ = run(capsys, "table", *args, "--dtype", dtype, "--format", fmt)
    assert code == 0
    assert_same_bits(_VALUES_OF[fmt](out, args, dtype), _table_call(args, dtype))


def assert_same_bits(printed: np.ndarray, expected: np.ndarray) -> None:
    """The printed values (parsed as float64), read into the dtype of ``expected``: every bit equal."""
    back = printed.astype(expected.dtype)
    unsigned = f"uint{8 * expected.dtype.itemsize}"
    np.testing.assert_array_equal(back.view(unsigned), expected.view(unsigned))


def test_csv_prints_the_shortest_form_of_float32(capsys: pytest.CaptureFixture[str]) -> None:
    """sin 1 in float32 is 0.8414709568023682 as a float64: the csv prints 0.84147096, which reads back as
    the same float32, as numpy's repr of that float32 does."""
    _, out, _ = run(capsys, "table", "2", "4", "--format", "csv")
    assert out.splitlines()[1:] == ["0,0.0,1.0,0.0,1.0", "1,0.84147096,0.5403023,0.009999833,0.99995"]
    _, out, _ = run(capsys, "table", "2", "4", "--format", "json")
    assert json.loads(out)["values"] == [[0.0, 1.0, 0.0, 1.0], [0.84147096, 0.5403023, 0.009999833, 0.99995]]
    assert '"values": [[0.0, 1.0, 0.0, 1.0], [0.84147096, 0.5403023, 0.009999833, 0.99995]]}' in out


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_shortest_form_round_trips_every_bit(
    capsys: pytest.CaptureFixture[str], dtype: str, fmt: str
) -> None:
    """A table with small, large-position and tiny values: every printed value parsed back into the dtype
    has the table's bits, and no value has more significant digits than numpy's shortest repr (float32,
    float16; ml_dtypes' bfloat16 repr is not the shortest, so bfloat16 is checked against 4 digits)."""
    args = ("300", "37", "--start", "2147483000", "--base", "1e6", "--shift", "0.5")
    _, out, _ = run(capsys, "table", *args, "--dtype", dtype, "--format", fmt)
    expected = _table_call(args, dtype)
    printed = _VALUES_OF[fmt](out, args, dtype)
    assert_same_bits(printed, expected)
    texts = [row.split(",")[1:] for row in out.splitlines()[1:]] if fmt == "csv" else None
    if texts is not None:
        for row_texts, row in zip(texts, expected, strict=True):
            for text, value in zip(row_texts, row, strict=True):
                limit = 4 if dtype == "bfloat16" else _significant(str(value))
                assert _significant(text) <= limit, (text, value)


def _significant(text: str) -> int:
    """The significant digits of a decimal: '0.00123' -> 3, '1.0' -> 1, '-6e-05' -> 1."""
    from decimal import Decimal

    return len(Decimal(text).normalize().as_tuple().digits)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_shortest_form_of_special_values(dtype: str) -> None:
    """Zeros (signed), ±1, powers of two (a lopsided rounding interval), values outside 1e-4 ≤ |x| < 1,
    the largest finite value, inf and NaN: each printed as repr prints floats and read back exactly."""
    from posenc.decimals import shortest

    np_dtype = posenc.table(1, 2, dtype=dtype).dtype
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, 0.015625, -(2.0**-10), 3e-5, -7e-9, 123.25, 1e4, 3.0, 1e-40]
    values = np.array([specials], dtype=np.float64).astype(np_dtype)
    values = np.concatenate([values, np.array([[float(np.finfo(np.float16).max)] + [0.1] * 12])]).astype(
        np_dtype
    )
    texts = ",".join(shortest(values)(row) for row in range(2)).split(",")
    assert texts[:4] == ["0.0", "-0.0", "1.0", "-1.0"]
    assert texts[4] == "0.5"
    assert texts[5] == {"float32": "0.015625", "float16": "0.01563", "bfloat16": "0.0156"}[dtype]
    back = np.array([float(t) for t in texts]).astype(np_dtype)
    bits = f"uint{8 * np_dtype.itemsize}"
    np.testing.assert_array_equal(back.view(bits), values.ravel().view(bits))
    assert texts[13] == {"float32": "65504.0", "float16": "65500.0", "bfloat16": "65500.0"}[dtype]
    line = shortest(np.array([[np.inf, -np.inf, np.nan]], np_dtype))
    assert line is not None and line(0) == "inf,-inf,nan"
    assert shortest(np.zeros((1, 2))) is None  # float64: repr is already the shortest


def test_shortest_is_the_same_under_any_decimal_context_and_numpy_error_state() -> None:
    """A caller's decimal context (3 digits rounding down, a trapped Inexact) and np.errstate(all="raise")
    (a float32 subnormal's neighbour underflows) change nothing."""
    import decimal

    from posenc.decimals import shortest

    values = np.array([[2.0**-96, 1e-45, 1e-40, 1e-30, 3e-5, 123.25]], np.float32)
    want = ["1.2621775e-29", "1e-45", "1e-40", "1e-30", "3e-05", "123.25"]
    assert shortest(values)(0).split(",") == want
    for context in (
        decimal.Context(prec=3, rounding=decimal.ROUND_FLOOR),
        decimal.Context(traps=[decimal.Inexact, decimal.Rounded]),
    ):
        with decimal.localcontext(context):
            assert shortest(values)(0).split(",") == want
    with np.errstate(all="raise"):
        assert shortest(values)(0).split(",") == want


@pytest.mark.parametrize("separator", [",", "", "\0", "·", " · ", "; ", "\t"])
def test_shortest_joins_with_any_separator(separator: str) -> None:
    from posenc.decimals import shortest

    for values in (
        np.array([[0.5, 0.25, 0.125], [0.125, 0.75, -0.5]], np.float32),  # the block path
        np.array([[0.5, 3.0, 1e-40], [-1.0, 0.0, 123.25]], np.float32),  # values one at a time
    ):
        line = shortest(values, separator)
        want = [separator.join(shortest(row[None])(0).split(",")) for row in values]
        assert [line(0), line(1)] == want
    assert shortest(np.array([[0.5, 0.25]], np.float32), "·")(0) == "0.5·0.25"
    assert shortest(np.array([[0.5, 0.25]], np.float32), "")(0) == "0.50.25"


def test_shortest_reads_array_likes_and_refuses_what_it_cannot_write() -> None:
    from posenc.decimals import shortest

    assert shortest([[0.5]]) is None  # Python floats: float64, whose repr is already the shortest
    assert shortest(np.array([[0.5, 0.25]], np.float32).tolist()) is None
    with pytest.raises(TypeError, match=r"separator must be a str; got 1 of type int"):
        shortest(np.zeros((1, 2), np.float32), 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"values must be a 2-D array .* pass a rectangular array"):
        shortest([[0.5], [0.25, 0.125]])


def test_number_refuses_booleans_and_strings() -> None:
    from posenc.decimals import number

    assert number(2) == "2" and number(np.float32(0.5)) == "0.5" and number(float("inf")) == "inf"
    for value in (True, np.bool_(False)):
        with pytest.raises(TypeError, match=r"value must be a real number .* of type (bool|bool_)"):
            number(value)
    with pytest.raises(TypeError, match=r"value must be a real number .*got '1\.5' of type str; pass float"):
        number("1.5")  # type: ignore[arg-type]


def test_csv_digits(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "table", "3", "4", "--format", "csv", "--digits", "3")
    assert out.splitlines()[2] == "1,0.841,0.540,0.010,1.000"


def test_json_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    args = "table 2 5 --base 1e4 --shift 1 --layout sin_cos --start 3 --format json --digits 2"
    _, out, _ = run(capsys, *args.split())
    document = json.loads(out)
    assert {k: document[k] for k in ("d_model", "base", "shift", "layout", "start", "dtype")} == {
        "d_model": 5,
        "base": 10000.0,
        "shift": 1,
        "layout": "sin_cos",
        "start": 3,
        "dtype": "float32",
    }
    assert document["columns"] == ["0 sin ω0", "1 sin ω1", "2 cos ω0", "3 cos ω1", "4 zero"]
    # position 3, ω = (1, 1e-4): sin 3, sin 3e-4, cos 3, cos 3e-4, zero; 2 decimals
    assert document["values"][0] == [0.14, 0.0, -0.99, 1.0, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_npy_round_trip_is_bit_for_bit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, dtype: str
) -> None:
    path = tmp_path / "pe.bin"  # any name: the file is written where asked, no '.npy' appended
    args = ("9", "10", "--start", "-4", "--layout", "sin_cos", "--shift", "1")
    code, out, err = run(capsys, "table", *args, "--dtype", dtype, "--format", "npy", "-o", str(path))
    assert (code, out, err) == (0, "", "")
    expected = _table_call(args, dtype)
    loaded = np.load(path)
    if dtype == "bfloat16":  # .npy has no bfloat16: stored as raw 2-byte values
        loaded = loaded.view(expected.dtype)
    assert loaded.dtype == expected.dtype and loaded.shape == expected.shape
    assert loaded.tobytes() == expected.tobytes()


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
def test_output_file_holds_what_stdout_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / f"pe.{fmt}"
    code, out, err = run(capsys, "table", "6", "5", "--format", fmt, "--output", str(path))
    assert (code, out, err) == (0, "", "")
    _, expected, _ = run(capsys, "table", "6", "5", "--format", fmt)
    assert path.read_text(encoding="utf-8") == expected


def test_bad_input_leaves_no_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "pe.csv"
    assert run(capsys, "table", "5", "1", "--format", "csv", "--output", str(path))[0] == 2
    assert not path.exists()


def test_empty_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", "0", "4")
    assert (code, text_rows(out)) == (0, (HEADER_5_4, []))


def test_table_npy_streams_in_chunks(capsys: pytest.CaptureFixture[str], tmp_path, monkeypatch) -> None:
    from posenc import cli

    monkeypatch.setattr(cli.table, "_NPY_CHUNK_BYTES", 7 * 16 * 4)  # 7 rows of d_model 16, float32, per chunk
    monkeypatch.setattr(cli.table, "LONG", 1)  # show the progress
    path = tmp_path / "pe.npy"
    code, _, err = run(capsys, "table", "50", "16", "--start", "3", "--format", "npy", "--output", str(path))
    assert code == 0
    np.testing.assert_array_equal(np.load(path), posenc.table(50, 16, start=3))
    assert "posenc table: 100%  50 of 50 rows" in err and err.count("\n") == 8  # ceil(50 / 7) chunks


def test_table_preset_and_its_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "table", "3", "9", "--preset", "marian", "--format", "csv")
    assert code == 0
    header, *rows = list(csv.reader(io.StringIO(out)))
    assert header[1:6] == ["0 sin ω0", "1 sin ω1", "2 sin ω2", "3 sin ω3", "4 sin ω4"]  # odd="literal"
    values = np.array([[float(v) for v in row[1:]] for row in rows], dtype=np.float32)
    np.testing.assert_array_equal(values, posenc.presets.get("marian").table(3, 9))
    code, out, _ = run(capsys, "table", "3", "8", "--preset", "fairseq", "--shift", "0", "--format", "csv")
    values = np.array([[float(v) for v in row[1:]] for row in list(csv.reader(io.StringIO(out)))[1:]])
    np.testing.assert_array_equal(values.astype(np.float32), posenc.table(3, 8, layout="sin_cos"))
    code, _, err = run(capsys, "table", "3", "8", "--preset", "bert")
    assert code == 2 and "unknown preset 'bert'" in err


def test_the_help_says_what_the_columns_and_float64_are(capsys: pytest.CaptureFixture[str]) -> None:
    """table's, rope's and check's help never call float64 correctly rounded (it is within 1 ulp), and
    table's column key gives each odd rule's frequencies: checked against the values themselves."""
    helps = {}
    for command in ("table", "rope", "check"):
        code, out, _ = run(capsys, command, "--help")
        assert code == 0
        helps[command] = " ".join(out.split())
    for command, text in helps.items():
        assert "float64" in text and "within 1 ulp" in text, command
    assert (
        "literal takes h = d_model / 2 and drop h = (d_model + 1) / 2, and both leave out the last "
        "frequency's cosine (its sine, under cos_sin)" in helps["table"]
    )
    for odd, half in (
        ("zero", 2),
        ("literal", 2.5),
        ("drop", 3),
    ):  # '2 sin ω1' = sin(pos · 10000 ** (-1 / h))
        _, out, _ = run(capsys, "table", "2", "5", "--odd", odd, "--format", "json")
        value = json.loads(out)["values"][1][2]
        assert value == pytest.approx(np.sin(10000.0 ** (-1 / half)), rel=1e-6), odd
