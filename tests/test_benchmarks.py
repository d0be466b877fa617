"""The benchmark scripts still run (tiny sizes; no timing is asserted, only that each reports its ratios)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _run(script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, check=True
    )
    return result.stdout


def test_table_benchmark_reports_ratios_and_errors(tmp_path):
    out = _run(
        "run.py", "--length", "64", "--d-model", "32", "--repeat", "1", "--json", str(tmp_path / "t.json")
    )
    assert "x the speed of the PyTorch tutorial code" in out
    results = json.loads((tmp_path / "t.json").read_text())["results"]
    assert results["posenc.table"]["max_error"] <= 2.0**-24  # exact: float32 rounding only
    assert results["pytorch tutorial (float32)"]["max_error"] > 0
    assert results["posenc.table"]["ratio_to_posenc"] == 1.0


def test_forward_benchmark_reports_ratios(tmp_path):
    args = [
        "--batch",
        "2",
        "--seq",
        "16",
        "--d-model",
        "8",
        "--repeat",
        "1",
        "--json",
        str(tmp_path / "f.json"),
    ]
    out = _run("forward.py", *args)
    assert "eval: posenc is" in out and "train: posenc is" in out
    results = json.loads((tmp_path / "f.json").read_text())["results"]
    assert set(results) >= {"posenc eval", "posenc train", "pytorch tutorial eval", "bare x + pe[:L] (floor)"}
