"""The benchmark scripts still run (tiny sizes; no timing is asserted, only that each reports its ratios)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _module(script: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A benchmark script imported as a module (its functions, not its run), beside its helpers."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"benchmark_{Path(script).stem}", BENCHMARKS / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(script: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True, check=True
    )
    return result.stdout


def test_table_benchmark_reports_ratios_errors_and_targets(tmp_path):
    args = ["--sizes", "64x32,512x512", "--repeat", "1", "--json", str(tmp_path / "t.json")]
    out = _run("run.py", *args)
    assert "targets: each ratio against its bar" in out and "import posenc:" in out
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
    assert "targets: each ratio against its bar" in out and "forward train: speed-up over the tutorial" in out
    document = json.loads((tmp_path / "f.json").read_text())
    results = document["results"]
    assert len(document["targets"]) == 4 and all(isinstance(t[3], bool) for t in document["targets"])
    assert set(results) >= {"posenc eval", "posenc train", "pytorch tutorial eval", "bare x + pe[:L] (floor)"}


def test_long_context_benchmark_reports_memory_and_the_uncached_module(tmp_path):
    args = ["--length", "3000", "--d-model", "64", "--seq", "50", "--repeat", "1"]
    out = _run("long_context.py", *args, "--json", str(tmp_path / "l.json"))
    assert "posenc table 3000 64 --format npy" in out and "targets: each ratio against its bar" in out
    document = json.loads((tmp_path / "l.json").read_text())
    assert 10 < document["stream"]["peak_mib"] < 1024  # the child's own high-water mark was read
    assert document["beyond_cache"]["cached"] is False  # rows from 2**30 on: beyond the cache
    assert [t[0] for t in document["targets"]] == [
        "stream: peak memory / 256 MiB",
        "module beyond the cache: time / x + its rows",
    ]


def test_device_table_benchmark_runs_on_the_cpu(tmp_path):
    out = _run(
        "device_table.py",
        "--device",
        "cpu",
        "--sizes",
        "64x32",
        "--repeat",
        "1",
        "--json",
        str(tmp_path / "d.json"),
    )
    rows = json.loads((tmp_path / "d.json").read_text())["results"]["64x32"]
    assert (
        rows["posenc.torch.table"]["max_error"]
        <= 2.0**-24
        < rows["tutorial formula on the device"]["max_error"]
    )
    assert "table(64, 32) float32 on cpu" in out


def test_device_native_benchmark_runs_on_the_cpu(tmp_path):
    """The side-by-side device benchmark (GPU figures come from a CUDA machine): on the CPU it must run,
    report every case, and find posenc's values equal to the references where they compute the same thing."""
    out = _run("device_native.py", "--quick", "--device", "cpu", "--json", str(tmp_path / "d.json"))
    document = json.loads((tmp_path / "d.json").read_text())
    assert "decode step, per-batch offsets" in out or document["cases"]
    jax_case = document["cases"]["jax jit decode traced offset"]
    assert jax_case.get("lowered_has_callback") is False and jax_case.get("lowered_has_f64") is False
    assert all("error" not in case for case in document["cases"].values())


def test_before_after_benchmark_compares_two_checkouts():
    """``before_after.py`` runs each checkout in its own process; here both sides are this one."""
    src = str(BENCHMARKS.parent / "src")
    out = _run("before_after.py", "--before", src, "--repeat", "1")
    assert "after/before" in out and "posenc.table(8192, 1024, bfloat16)" in out
    assert "module decode, per-batch offsets" in out


def test_cost_model_benchmark_writes_json_and_the_performance_guide_block(tmp_path, monkeypatch):
    """The cost-model benchmark: every row, its bar, and the block of docs/performance.md generated from the
    JSON, with the date and the machine it was measured on."""
    document_path = tmp_path / "c.json"
    out = _run("cost_model.py", "--quick", "--repeat", "1", "--runs", "1", "--json", str(document_path))
    assert "encode(5, 512)" in out
    first = json.loads(document_path.read_text())
    # several whole runs: each row is their median, its range in the detail (a second run here: the first's
    # figures doubled, rather than a second whole run of fresh processes)
    cost_model = _module("cost_model.py", monkeypatch)
    second = {**first, "rows": [{**r, "measured": 2 * r["measured"]} for r in first["rows"]]}
    document = cost_model.combined([first, second])
    document_path.write_text(json.dumps(document))
    pairs = zip(first["rows"], second["rows"], strict=True)
    assert [r["measured"] for r in document["rows"]] == [max(a["measured"], b["measured"]) for a, b in pairs]
    names = [r["name"] for r in document["rows"]]
    assert any("speed-up over the tutorial" in n for n in names) and any("first call" in n for n in names)
    assert any("core(s)" in n for n in names) and any("buf.fill" in n for n in names)
    assert any("first encode" in n for n in names)  # posenc's own share of a first use, NumPy aside
    doc = tmp_path / "performance.md"
    doc.write_text("before\n<!-- cost-model:start -->\nold\n<!-- cost-model:end -->\nafter\n")
    _run("cost_model.py", "--doc", "--json", str(document_path), "--doc-file", str(doc))
    text = doc.read_text()
    assert "old" not in text and "| encode(5, 512) |" in text and text.endswith("after\n")
    assert f"Measured on {document['date']} by `make bench` ({document['machine']})" in text
    assert "median of 2 runs" in text and len(document["runs"]) == 2  # each row: the median over whole runs


def test_rope_benchmark_reports_ratios_and_errors(tmp_path):
    args = ["--batch", "1", "--heads", "2", "--seq", "32", "--repeat", "1", "--dtype", "float32"]
    out = _run("rope.py", *args, "--json", str(tmp_path / "r.json"))
    assert "x Hugging Face" in out and "fused apply" in out
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["results"]["hf tables + apply"]["ratio_to_hf"] == 1.0
    assert document["errors"]["posenc 131k"] <= 2.0**-24  # exact: float32 rounding only
    assert document["errors"]["hf 131k"] > 1e-4  # float32 angles at 131k positions


def test_league_measures_float32_errors_and_the_usual_bfloat16_collapse(tmp_path):
    args = ["--only", "tutorial,posenc", "--upto", "4096", "--bf16", "2048"]
    out = _run("league.py", *args, "--json", str(tmp_path / "l.json"))
    assert "| PyTorch tutorial |" in out and "distinct rows of 0..2047" in out
    records = {r["key"]: r for r in json.loads((tmp_path / "l.json").read_text())["records"]}
    tutorial, exact = records["tutorial"], records["posenc"]
    assert 1e-4 < tutorial["max_error"]["4096"] < 1e-3 and exact["max_error"]["4096"] == 0
    # positions made in bfloat16: 257 values up to 256, then 128 per octave (256..511, 512..1023, 1024..2047)
    assert tutorial["bf16_distinct"] == 257 + 3 * 128 and tutorial["bf16_first_repeat"] == [257, 256]
    assert exact["bf16_distinct"] == 2048 and exact["bf16_first_repeat"] is None
    assert exact["bf16_max_error"] == 0 < tutorial["bf16_max_error"]


def test_patched_model_benchmark_reports_its_ratios(tmp_path):
    args = ["--layers", "1", "--hidden", "256", "--prefill", "32", "--decode", "2", "--repeat", "1"]
    out = _run("patched_model.py", *args, "--fused", "--json", str(tmp_path / "p.json"))
    assert "targets: each ratio against its bar" in out and "decode step" in out and "cpu, fused" in out
    document = json.loads((tmp_path / "p.json").read_text())
    assert set(document["results"]) == {"prefill", "decode step"}
    assert all(r["ratio"] > 0 for r in document["results"].values()) and len(document["targets"]) == 2
