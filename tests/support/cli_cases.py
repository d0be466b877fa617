"""What the command-line tests (tests/cli/test_cli*.py) share: running ``posenc`` in this process, and reading
its text and csv output back."""

from __future__ import annotations

import csv
import io
import re

import numpy as np
import pytest

from posenc.cli import main

# `posenc table 5 4`: the worked table of positions 0..4 at d_model = 4, base 10000, to 4 decimals.
# cos(3) = -0.98999... is -0.9900 correctly rounded (a truncating hand computation gives -0.9899). Column 3
# is the float32 value rounded: cos(0.01) = 0.99995000042 is 0.99994999 in float32, hence 0.9999.
WORKED_TABLE_5_4 = [
    ["0", "0.0000", "1.0000", "0.0000", "1.0000"],
    ["1", "0.8415", "0.5403", "0.0100", "0.9999"],
    ["2", "0.9093", "-0.4161", "0.0200", "0.9998"],
    ["3", "0.1411", "-0.9900", "0.0300", "0.9996"],
    ["4", "-0.7568", "-0.6536", "0.0400", "0.9992"],
]
HEADER_5_4 = ["pos", "0 sin ω0", "1 cos ω0", "2 sin ω1", "3 cos ω1"]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main(args)``: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_refused(code: int, err: str, *words: str) -> None:
    """Exit code 2, one line on stderr (``posenc: error: ...``) holding every one of ``words``."""
    assert code == 2, err
    assert err.startswith("posenc: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)


def text_rows(out: str) -> tuple[list[str], list[list[str]]]:
    """Split the text format into its header cells (separated by 2+ spaces) and its value rows."""
    header, *lines = out.rstrip("\n").split("\n")
    return re.split(r"\s{2,}", header.strip()), [line.split() for line in lines]


def read_csv(text: str) -> tuple[list[str], list[int], np.ndarray]:
    header, *rows = list(csv.reader(io.StringIO(text)))
    positions = [int(row[0]) for row in rows]
    values = np.array([[float(v) for v in row[1:]] for row in rows]).reshape(len(rows), -1)
    return header, positions, values


def assert_same(values: np.ndarray, expected: np.ndarray) -> None:
    """Elementwise equality of the float64 conversions (every column, every row, exact)."""
    np.testing.assert_array_equal(values, np.asarray(expected, dtype=np.float64), strict=True)
