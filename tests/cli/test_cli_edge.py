"""Bad input at the edges of the ``posenc`` command: files that ``posenc identify`` cannot read, tables
too large to hold as Python objects, and numbers too large to act on. Each is refused with one line on
stderr and exit code 2 (never a traceback), or gets the right result with bounded memory."""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import cli
from posenc.porting import load_table
from tests.support.cli_cases import assert_refused, run

# --- posenc identify: files it cannot read ---------------------------------------------------------

TABLE = posenc.table(16, 8)


def _random_bytes(size: int = 1000) -> bytes:
    return np.random.default_rng(0).bytes(size)


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _safetensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    return safetensors_numpy.save(tensors)


def _torch_bytes(obj: object, **options: object) -> bytes:
    torch = pytest.importorskip("torch")
    buffer = io.BytesIO()
    torch.save(obj, buffer, **options)
    return buffer.getvalue()


def _tensor(array: np.ndarray) -> object:
    return pytest.importorskip("torch").from_numpy(array)


def _self_containing() -> dict:
    tree: dict = {"pe": _tensor(TABLE)}
    tree["self"] = tree
    return tree


def _nested(depth: int) -> object:
    tree: object = _tensor(TABLE)
    for _ in range(depth):
        tree = [tree]
    return tree


# (file name, its bytes, words the one-line error must hold). The bytes are made when the test runs.
BAD_FILES: list[tuple[str, Callable[[], bytes], tuple[str, ...]]] = [
    ("empty.npy", lambda: b"", ("is empty", "expected a .npy file")),
    ("empty.pt", lambda: b"", ("is empty", "expected a .pt file")),
    ("empty.safetensors", lambda: b"", ("is empty",)),
    ("random.npy", _random_bytes, ("is not a .npy file", "np.save")),
    ("random.safetensors", _random_bytes, ("is not a readable .safetensors file",)),
    ("cut.npy", lambda: _npy_bytes(TABLE)[:300], ("is cut short", "(16, 8)", "512 bytes")),
    ("cut.pt", lambda: _torch_bytes({"pe": _tensor(TABLE)})[:400], ("is not a readable PyTorch file",)),
    (
        "cut.safetensors",
        lambda: _safetensors_bytes({"pe": TABLE})[:300],
        ("is not a readable .safetensors file", "not fully covered"),
    ),
    ("object.npy", lambda: _npy_bytes(np.array([{"a": 1}, None], dtype=object)), ("object values",)),
    ("vector.npy", lambda: _npy_bytes(TABLE[0]), ("shape (8,)", "(positions, d_model)")),
    ("scalar.npy", lambda: _npy_bytes(np.float32(1)), ("shape ()", "(positions, d_model)")),
    ("one_row.npy", lambda: _npy_bytes(TABLE[:1]), ("shape (1, 8)", "at least 2 positions")),
    ("complex.npy", lambda: _npy_bytes(TABLE.astype(np.complex64)), ("complex64 values, not real numbers",)),
    ("words.npy", lambda: _npy_bytes(np.array([["a", "b"], ["c", "d"]])), ("not real numbers",)),
    ("nan.npy", lambda: _npy_bytes(np.full((4, 4), np.nan, np.float32)), ("nan.npy: ", "NaN")),
    ("bad_version.npy", lambda: b"\x93NUMPY\x07\x00" + _random_bytes(100), ("version 7.0",)),
    (
        "huge_header_length.safetensors",  # the first 8 bytes give the header's length: here 1 TB
        lambda: struct.pack("<Q", 10**12) + b"{}",
        ("is not a readable .safetensors file", "header claims 1,000,000,000,000 bytes"),
    ),
    (
        "not_json.safetensors",
        lambda: struct.pack("<Q", 5) + b"notjs",
        ("is not a readable .safetensors file", "JSON"),
    ),
    (
        "no_table.safetensors",
        lambda: _safetensors_bytes({"a": np.arange(12).reshape(3, 4), "b": TABLE[0]}),
        ("holds no floating-point tensor", "a (I64 (3, 4))", "b (F32 (8,))"),
    ),
    ("list.pt", lambda: _torch_bytes([1, 2, 3]), ("holds no tensor", "0 (int)")),
    ("string.pt", lambda: _torch_bytes("hello"), ("holds no tensor (it holds a str)",)),
    ("empty_dict.pt", lambda: _torch_bytes({}), ("holds no tensor (it holds an empty dict or list)",)),
    ("vector.pt", lambda: _torch_bytes(_tensor(TABLE[0])), ("shape (8,)",)),
    ("complex.pt", lambda: _torch_bytes({"pe": _tensor(TABLE.astype(np.complex64))}), ("complex64 (16, 8)",)),
    ("deep.pt", lambda: _torch_bytes(_nested(100)), ("more than 64 deep",)),
    (
        "plain_pickle.pt",
        lambda: pickle.dumps({"pe": TABLE.tolist()}, protocol=2),
        ("not a readable PyTorch file",),
    ),
    ("lists.pt", lambda: _torch_bytes({"pe": TABLE[:2].tolist()}), ("no tensor", "pe.0.0 (float)")),
    ("random.pt", _random_bytes, ("random.pt",)),
]


@pytest.mark.parametrize(("name", "content", "words"), BAD_FILES, ids=[case[0] for case in BAD_FILES])
def test_identify_refuses_a_bad_file_in_one_line(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    name: str,
    content: Callable[[], bytes],
    words: tuple[str, ...],
) -> None:
    path = tmp_path / name
    path.write_bytes(content())
    code, out, err = run(capsys, "identify", str(path))
    assert out == ""
    assert_refused(code, err, str(path), *words)


@pytest.mark.parametrize("suffix", [".npy", ".pt", ".safetensors"])
def test_identify_refuses_a_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    folder = tmp_path / f"table{suffix}"
    folder.mkdir()
    assert_refused(*run(capsys, "identify", str(folder))[::2], "is a directory", str(folder))


def test_identify_refuses_npz_with_the_way_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    np.savez(tmp_path / "tables.npz", pe=TABLE)
    code, _, err = run(capsys, "identify", str(tmp_path / "tables.npz"))
    assert_refused(code, err, "unknown file type '.npz'", "np.save")


def test_identify_never_runs_code_from_a_pickle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A .pt that would create a folder when unpickled: refused by torch.load(weights_only=True), unrun."""
    pytest.importorskip("torch")
    marker = tmp_path / "code-ran"

    class Payload:
        def __reduce__(self) -> tuple:
            return os.mkdir, (str(marker),)

    (tmp_path / "evil.pt").write_bytes(pickle.dumps({"pe": Payload()}, protocol=2))
    code, _, err = run(capsys, "identify", str(tmp_path / "evil.pt"))
    assert_refused(code, err, "evil.pt cannot be read safely", "weights_only=True", "mkdir")
    assert not marker.exists()


def test_identify_walks_a_self_containing_state_dict_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    torch = pytest.importorskip("torch")
    torch.save(_self_containing(), tmp_path / "loop.pt")
    code, out, err = run(capsys, "identify", str(tmp_path / "loop.pt"))
    assert (code, err) == (0, "") and "1. matches: paper" in out
    tree: object = {"pe": _tensor(TABLE)}
    for _ in range(50):  # 2**50 paths to one tensor: each dict is walked once
        tree = {"a": tree, "b": tree}
    torch.save(tree, tmp_path / "shared.pt")
    code, out, err = run(capsys, "identify", str(tmp_path / "shared.pt"))
    assert (code, err) == (0, "") and "1. matches: paper" in out


@pytest.mark.parametrize(
    ("make", "key", "words"),
    [
        (lambda p: np.save(p / "t.npy", TABLE), "pe", ("holds one array, not a state dict", "'pe'")),
        (lambda p: _write(p / "t.pt", _torch_bytes({"pe": 3})), "pe", ("'pe' is an int, not a tensor",)),
        (
            lambda p: _write(p / "t.pt", _torch_bytes({"pe": _tensor(TABLE.astype(bool))})),
            "pe",
            ("tensor 'pe', holds bool values, not real numbers",),
        ),
        (
            lambda p: _write(p / "t.pt", _torch_bytes({"pe": _tensor(TABLE)})),
            "nope",
            ("has no tensor 'nope'",),
        ),
    ],
)
def test_identify_key_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: Callable[[Path], None], key: str, words: tuple
) -> None:
    make(tmp_path)
    (path,) = tmp_path.iterdir()
    assert_refused(*run(capsys, "identify", str(path), "--key", key)[::2], str(path), *words)


def _write(path: Path, content: bytes) -> None:
    path.write_bytes(content)


def test_identify_names_the_option_where_the_library_names_its_parameter(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """load_table says key=; the command says --key."""
    _write(tmp_path / "two.pt", _torch_bytes({"a": _tensor(TABLE), "b": _tensor(TABLE)}))
    with pytest.raises(ValueError, match="name one with key="):
        load_table(tmp_path / "two.pt")
    code, _, err = run(capsys, "identify", str(tmp_path / "two.pt"))
    assert_refused(code, err, "2 candidate tables (a, b); name one with --key")
    assert "key=" not in err


@pytest.mark.parametrize("tolerance", ["nan", "-1", "inf"])
def test_identify_tolerance_must_be_a_finite_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, tolerance: str
) -> None:
    np.save(tmp_path / "pe.npy", TABLE)
    code, _, err = run(capsys, "identify", str(tmp_path / "pe.npy"), "--tolerance", tolerance)
    assert_refused(code, err, "--tolerance must be a finite number >= 0", tolerance.lstrip("-"))


def test_load_table_reads_bfloat16_safetensors_and_keeps_float64(tmp_path: Path) -> None:
    """safetensors' NumPy reader has no bfloat16: its values are widened exactly. A float64 tensor stays
    float64 (its last digits count)."""
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    bf16 = torch.from_numpy(posenc.table(64, 16)).bfloat16()
    safetensors_torch.save_file({"pos_embed": bf16, "w": torch.ones(3)}, tmp_path / "m.safetensors")
    np.testing.assert_array_equal(load_table(tmp_path / "m.safetensors"), bf16.float().numpy(), strict=True)
    wide = posenc.table(32, 8, dtype="float64")
    torch.save({"pe": torch.from_numpy(wide)}, tmp_path / "wide.pt")
    np.testing.assert_array_equal(load_table(tmp_path / "wide.pt"), wide, strict=True)
    np.save(tmp_path / "f.npy", np.asfortranarray(wide))
    np.testing.assert_array_equal(load_table(tmp_path / "f.npy"), wide, strict=True)


def test_identify_a_bfloat16_checkpoint(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    safetensors_torch = pytest.importorskip("safetensors.torch")
    bf16 = torch.from_numpy(posenc.table(64, 16)).bfloat16()
    safetensors_torch.save_file({"pos_embed": bf16}, tmp_path / "m.safetensors")
    code, out, err = run(capsys, "identify", str(tmp_path / "m.safetensors"), "--tolerance", "0.004")
    assert (code, err) == (0, "") and "1. matches: paper" in out


# --- posenc table: streamed output ------------------------------------------------------------------


def _old_json(length: int, d_model: int, digits: int | None, **options: object) -> str:
    """The json format as one json.dump of the whole document: each value the shortest decimal that reads
    back as the same value of the table's dtype (``str`` of the NumPy scalar), or ``digits`` fixed ones."""
    values = posenc.table(length, d_model, **options)
    variant = {**cli.arguments.PAPER, "start": 0, **{k: v for k, v in options.items() if k != "dtype"}}
    document = {
        "d_model": d_model,
        **variant,
        "dtype": values.dtype.name,
        "positions": list(range(variant["start"], variant["start"] + length)),
        "columns": cli.column_labels(d_model, variant["layout"], variant["odd"]),
        "values": (
            [[float(str(v)) for v in row] for row in values]
            if digits is None
            else [
                [float(cli.formats.fixed(v, digits)) for v in row]
                for row in values.astype(np.float64).tolist()
            ]
        ),
    }
    return json.dumps(document, ensure_ascii=False) + "\n"


# (values formatted at a time, bytes of the table computed at a time): one row and one row, uneven
# blocks, and the defaults (one block for these small tables)
BLOCKS = [(1, 1), (7, 64), (cli.formats._CHUNK_VALUES, cli.formats._TABLE_BLOCK_BYTES)]


@pytest.mark.parametrize(("values_per_block", "table_bytes"), BLOCKS)
@pytest.mark.parametrize(
    ("args", "options", "digits"),
    [
        (["23", "6", "--start", "-11"], {"start": -11}, None),
        (
            ["23", "5", "--dtype", "float64", "--layout", "sin_cos"],
            {"dtype": "float64", "layout": "sin_cos"},
            3,
        ),
        (["9", "4", "--dtype", "float16"], {"dtype": "float16"}, None),
        (["0", "4"], {}, None),
    ],
)
def test_streamed_json_is_the_document_json_dump_writes(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    values_per_block: int,
    table_bytes: int,
    args: list[str],
    options: dict,
    digits: int | None,
) -> None:
    monkeypatch.setattr(cli.formats, "_CHUNK_VALUES", values_per_block)
    monkeypatch.setattr(cli.formats, "_TABLE_BLOCK_BYTES", table_bytes)
    flags = [] if digits is None else ["--digits", str(digits)]
    code, out, err = run(capsys, "table", *args, *flags, "--format", "json")
    assert (code, err) == (0, "")
    assert out == _old_json(int(args[0]), int(args[1]), digits, **options)


@pytest.mark.parametrize("fmt", ["text", "csv"])
@pytest.mark.parametrize("args", [["40", "4"], ["17", "9", "--start", "-8", "--digits", "2"], ["3", "2"]])
def test_text_and_csv_do_not_depend_on_the_block_size(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fmt: str, args: list[str]
) -> None:
    """Column widths come from every block (cos ω0 turns negative only at position 2), rows from each."""
    outputs = []
    for values_per_block, table_bytes in BLOCKS:
        monkeypatch.setattr(cli.formats, "_CHUNK_VALUES", values_per_block)
        monkeypatch.setattr(cli.formats, "_TABLE_BLOCK_BYTES", table_bytes)
        code, out, err = run(capsys, "table", *args, "--format", fmt)
        assert (code, err) == (0, "")
        outputs.append(out)
    assert outputs[0] == outputs[1] == outputs[2]
    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(outputs[0])))[1:]
        values = np.array([[float(v) for v in row[1:]] for row in rows])
        if "--digits" not in args:  # the shortest decimals that read back as the float32 values
            want = posenc.table(int(args[0]), int(args[1]))
            np.testing.assert_array_equal(values.astype(np.float32).view(np.uint32), want.view(np.uint32))


_PEAK_SCRIPT = textwrap.dedent(
    """
    import json, sys, tracemalloc
    sys.modules["numba"] = None  # no optional compiled path: compiling it would be traced and timed too
    import numpy as np
    import posenc
    from posenc.cli import main

    length, d_model, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    command = ["table", str(length), str(d_model), "--format", "json", "--output", path]
    assert main(command) == 0  # warm-up: imports and caches filled before measuring
    tracemalloc.start()
    code = main(command)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    with open(path, encoding="utf-8") as stream:
        document = json.load(stream)
    assert document["positions"] == list(range(length))
    expected = posenc.table(length, d_model)  # the shortest decimals that read back as these float32s
    np.testing.assert_array_equal(np.array(document["values"]).astype(np.float32), expected, strict=True)
    print(code, peak)
    """
)


def test_json_table_streams_in_bounded_memory(tmp_path: Path) -> None:
    """The peak of Python and NumPy allocations while ``posenc table 1200 512 --format json`` runs (in a
    fresh interpreter, after the same command as a warm-up) stays far below the table as Python floats,
    which the format used to build whole (~43 bytes a value at its peak; now: a block of the table,
    16,384 floats and a row of text); the output reads back as posenc.table."""
    length, d_model = 1200, 512
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_SCRIPT, str(length), str(d_model), str(tmp_path / "pe.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    code, peak = map(int, done.stdout.split())
    materialised = length * d_model * 32  # a float object (24 bytes) and its slot in a list (8)
    assert code == 0
    assert peak < 0.4 * materialised, (
        f"peak {peak / 2**20:.1f} MiB, materialised {materialised / 2**20:.1f} MiB"
    )


@pytest.mark.parametrize("fmt", ["npy", "json", "csv", "text"])
def test_a_bad_range_leaves_no_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str) -> None:
    """The last position is checked before the output is opened: no empty or partial file is left."""
    path = tmp_path / f"pe.{fmt}"
    code, _, err = run(
        capsys, "table", "10", "4", "--start", str(2**31 - 8), "--format", fmt, "-o", str(path)
    )
    assert_refused(code, err, "start + length - 1 = 2147483649", "2**31")
    assert not path.exists()


# --- numbers too large to act on -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
@pytest.mark.parametrize("digits", ["99999999999", "18", "-1", str(2**64)])
def test_digits_out_of_range(capsys: pytest.CaptureFixture[str], fmt: str, digits: str) -> None:
    code, out, err = run(capsys, "table", "5", "4", "--format", fmt, "--digits", digits)
    assert out == ""  # not even the csv header
    assert_refused(code, err, f"--digits must be an integer from 0 to {cli.MAX_DIGITS}; got {digits}")


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
def test_the_most_digits_show_float64_to_the_last_digit(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    code, out, err = run(capsys, "table", "5", "4", "--dtype", "float64", "--format", fmt, "--digits", "17")
    assert (code, err) == (0, "")
    value = posenc.table(2, 4, dtype="float64")[1, 0]  # sin(1)
    assert (repr(float(value)) if fmt == "json" else f"{value:.17f}") in out
    assert float(f"{value:.17f}") == value


def test_an_integer_of_thousands_of_digits_is_shown_shortened(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "table", "9" * 5000, "4")
    assert_refused(code, err, "LENGTH", "must be an integer", "(5000 characters)")
    assert len(err) < 300


def test_running_out_of_memory_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A size nothing checked up front (a plot or a check of a huge table) ends in one line, exit 2."""

    def exhausted(*args: object, **kwargs: object) -> None:
        raise MemoryError("Unable to allocate 16.0 GiB for an array with shape (2147483648, 2)")

    monkeypatch.setattr(cli.check.analysis, "check", exhausted)
    code, _, err = run(capsys, "check", "--length", str(2**30), "--d-model", "2")
    assert_refused(code, err, "out of memory (Unable to allocate 16.0 GiB", "fewer positions")
