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


def test_table_benchmark_reports_ratios_errors_and_targets(tmp_path):
    args = ["--sizes", "64x32,512x512", "--repeat", "1", "--json", str(tmp_path / "t.json")]
    out = _run("run.py", *args)
    assert "targets (issue 6)" in out and "import posenc:" in out
    document = json.loads((tmp_path / "t.json").read_text())
    results = document["results"]["64x32"]
    assert results["posenc.table"]["max_error"] <= 2.0**-24  # exact: float32 rounding only
    assert results["transformers get_embedding"]["max_error"] <= 1e-5  # measured against its own variant
    assert results["pytorch tutorial"]["max_error"] > 0
    assert results["posenc.table"]["ratio_to_posenc"] == 1.0
    assert "512x512: speed-up over the tutorial" in {target[0] for target in document["targets"]}


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
