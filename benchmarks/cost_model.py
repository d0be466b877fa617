"""The CPU cost model, side by side in one process: posenc, the tutorial code and the floors.

    python benchmarks/cost_model.py [--repeat 7] [--runs 3] [--json FILE] [--quick]   # measure, write JSON
    python benchmarks/cost_model.py --doc [--json FILE]       # JSON -> the block of docs/performance.md

Rows (float32, exact): large tables against the tutorial code (PyTorch and its formula in NumPy) and against
posenc's NumPy path (the compiled kernels monkeypatched away); the large table in bfloat16 and float16
against the tutorial's cast to them; table(512, 512); ``encode`` of one position;
``table(out=buf)`` against ``buf.fill`` and a fresh table against a fresh ``np.full``; the speed-up on 1, 2
and all cores (``POSENC_NUM_THREADS``); and the first call in fresh processes: ``import posenc`` and
``posenc table 8192 4096 --format npy`` against a ``python -c`` that computes the tutorial formula in NumPy
and ``np.save``s it. ``--doc`` rewrites the block between ``<!-- cost-model:start -->`` and
``<!-- cost-model:end -->`` in docs/performance.md from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import measure, numpy_only, tutorial_table

import posenc
from posenc import core

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_JSON = Path(__file__).parent / "results" / "cost_model.json"

TUTORIAL_NUMPY = """
import sys, numpy as np
length, d = int(sys.argv[1]), int(sys.argv[2])
position = np.arange(length, dtype=np.float32)[:, None]
div_term = np.exp(np.arange(0, d, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d))
pe = np.empty((length, d), np.float32)
pe[:, 0::2] = np.sin(position * div_term)
pe[:, 1::2] = np.cos(position * div_term)
np.save(sys.argv[3], pe)
"""


def tutorial_numpy(length: int, d_model: int) -> np.ndarray:
    """The tutorial's formula in NumPy float32."""
    position = np.arange(length, dtype=np.float32)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d_model))
    pe = np.empty((length, d_model), np.float32)
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe


def median(fn, repeat: int) -> float:
    return measure(fn, repeat)["median_s"]


def interleaved(contenders: list, repeat: int) -> list[float]:
    """The median time of each contender over ``repeat`` rounds, each round calling every contender once
    (after one warm-up round): drift in the machine's state (page faults into fresh memory vary from run to
    run on a shared machine) hits all of them alike."""
    times: list[list[float]] = [[] for _ in contenders]
    for round_ in range(repeat + 1):
        for fn, seconds in zip(contenders, times, strict=True):
            began = time.perf_counter()
            fn()
            if round_:
                seconds.append(time.perf_counter() - began)
    return [sorted(seconds)[len(seconds) // 2] for seconds in times]


def with_threads(threads: int | None, fn):
    saved = os.environ.get("POSENC_NUM_THREADS")
    if threads is None:
        os.environ.pop("POSENC_NUM_THREADS", None)
    else:
        os.environ["POSENC_NUM_THREADS"] = str(threads)
    try:
        return fn()
    finally:
        if saved is None:
            os.environ.pop("POSENC_NUM_THREADS", None)
        else:
            os.environ["POSENC_NUM_THREADS"] = saved


def row(name: str, measured: float, unit: str, bar: str, detail: str = "") -> dict:
    limit = float(bar.split()[1]) if bar else None
    met = None if limit is None else (measured <= limit if bar.startswith("<=") else measured >= limit)
    return {"name": name, "measured": measured, "unit": unit, "bar": bar, "met": met, "detail": detail}


# Fresh processes run as an installed package runs: with its bytecode cache (pip writes it at install; a
# PYTHONDONTWRITEBYTECODE=1 environment would recompile posenc's modules at every import, ~20 ms).
_INSTALLED = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def walls(commands: list[list[str]], repeat: int = 5) -> list[float]:
    """The median wall time of each command in fresh processes, over ``repeat`` interleaved rounds (each
    round runs every command once), as an installed package runs (its bytecode cached)."""
    subprocess.run([sys.executable, "-c", "import posenc.cli"], check=True, env=_INSTALLED)  # bytecode
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(repeat):
        for command, seconds in zip(commands, times, strict=True):
            began = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True, env=_INSTALLED)
            seconds.append(time.perf_counter() - began)
    return [sorted(seconds)[len(seconds) // 2] for seconds in times]


def run(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(min(2, os.cpu_count() or 1))
    big, long_, small = (
        [(256, 512), (2048, 128), (64, 64)] if args.quick else [(8192, 4096), (131072, 1024), (512, 512)]
    )
    rows, times = [], {}
    for length, d in (big, long_):
        ours, plain, tut, tut_np = interleaved(
            [
                lambda length=length, d=d: posenc.table(length, d),
                lambda length=length, d=d: numpy_only(lambda: posenc.table(length, d)),
                lambda length=length, d=d: tutorial_table(length, d),
                lambda length=length, d=d: tutorial_numpy(length, d),
            ],
            args.repeat,
        )
        times[f"{length}x{d}"] = {
            "posenc": ours,
            "numpy_only": plain,
            "tutorial": tut,
            "tutorial_numpy": tut_np,
        }
        bar = ">= 5" if (length, d) == big else ">= 8"
        detail = f"{ours * 1e3:.1f} ms vs {tut * 1e3:.1f} ms (NumPy formula {tut_np * 1e3:.1f} ms)"
        rows.append(row(f"table({length}, {d}): speed-up over the tutorial", tut / ours, "x", bar, detail))
        rows.append(
            row(
                f"table({length}, {d}), NumPy path only: speed-up over the tutorial",
                tut / plain,
                "x",
                "",
                f"{plain * 1e3:.1f} ms",
            )
        )
    length, d = big
    for name in ("bfloat16", "float16"):  # the 16-bit formats, against the tutorial's table cast to them
        ours, tut = interleaved(
            [
                lambda name=name: posenc.table(length, d, dtype=name),
                lambda name=name: tutorial_table(length, d).to(getattr(torch, name)),
            ],
            args.repeat,
        )
        rows.append(
            row(
                f"table({length}, {d}, {name}): speed-up over the tutorial's table cast to {name}",
                tut / ours,
                "x",
                "",
                f"{ours * 1e3:.1f} ms vs {tut * 1e3:.1f} ms",
            )
        )
    length, d = small
    ours = median(lambda: posenc.table(length, d), args.repeat * 5)
    tut = min(
        median(lambda: tutorial_table(length, d), args.repeat * 5),
        median(lambda: tutorial_numpy(length, d), 35),
    )
    rows.append(
        row(
            f"table({length}, {d}): speed-up over the tutorial (the faster of torch / NumPy)",
            tut / ours,
            "x",
            ">= 1",
            f"{ours * 1e3:.3f} ms vs {tut * 1e3:.3f} ms",
        )
    )
    one = median(lambda: posenc.encode(5, 512), 200)
    rows.append(row("encode(5, 512)", one * 1e6, "µs", "<= 30"))
    length, d = big
    buf = np.empty((length, d), np.float32)
    buf.fill(0)
    out, fill = interleaved([lambda: posenc.table(length, d, out=buf), lambda: buf.fill(0.5)], args.repeat)
    fresh, floor = interleaved(
        [lambda: posenc.table(length, d), lambda: np.full((length, d), 0.5, np.float32)], args.repeat
    )
    rows.append(
        row(
            f"table({length}, {d}, out=buf) / buf.fill",
            out / fill,
            "x",
            "<= 2",
            f"{out * 1e3:.1f} vs {fill * 1e3:.1f} ms",
        )
    )
    rows.append(
        row(
            f"table({length}, {d}) / fresh np.full",
            fresh / floor,
            "x",
            "<= 3",
            f"{fresh * 1e3:.1f} vs {floor * 1e3:.1f} ms",
        )
    )
    cores = core.parallel.threads()
    scaling = {}
    for threads in sorted({1, min(2, cores), cores}):
        scaling[threads] = with_threads(
            threads, lambda: median(lambda: posenc.table(length, d, out=buf), args.repeat)
        )
    for threads, seconds in scaling.items():
        speedup = scaling[1] / seconds
        rows.append(
            row(
                f"table({length}, {d}, out=buf) on {threads} core(s): speed-up / core",
                speedup / threads,
                "x",
                "",
                f"{seconds * 1e3:.1f} ms, {speedup:.2f}x over 1 core",
            )
        )
    with tempfile.TemporaryDirectory() as scratch:
        target = str(Path(scratch) / "pe.npy")
        python, numpy_import, importing, first_use = walls(
            [
                [sys.executable, "-c", "pass"],
                [sys.executable, "-c", "import numpy"],
                [sys.executable, "-c", "import posenc"],
                [sys.executable, "-c", "import posenc; posenc.encode(5, 512)"],
            ],
            15,
        )
        cli, baseline = walls(
            [
                [
                    sys.executable,
                    "-m",
                    "posenc",
                    "table",
                    str(length),
                    str(d),
                    "--format",
                    "npy",
                    "--output",
                    target,
                ],
                [sys.executable, "-c", TUTORIAL_NUMPY, str(length), str(d), target],
            ]
        )
    rows.append(
        row(
            "import posenc (fresh process, minus bare python)",
            (importing - python) * 1e3,
            "ms",
            "<= 100",
            "loads nothing: NumPy and the core load on first use",
        )
    )
    rows.append(
        row(
            "import posenc + first encode(5, 512), minus import numpy",
            (first_use - numpy_import) * 1e3,
            "ms",
            "",
            f"posenc's own share of a first use; import numpy alone: {(numpy_import - python) * 1e3:.0f} ms",
        )
    )
    rows.append(
        row(
            f"first call: posenc table {length} {d} --format npy / python -c tutorial + np.save",
            cli / baseline,
            "x",
            "<= 1.5",
            f"{cli:.2f} s vs {baseline:.2f} s",
        )
    )
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"NumPy {np.__version__}, torch {torch.__version__}, posenc path {core.compiled_path()}",
        "rows": rows,
        "times_s": times,
        "scaling_s": scaling,
    }


def combined(documents: list[dict]) -> dict:
    """One document from several whole runs: each row's median over the runs (its bar judged on that), the
    range in its detail. A shared machine's speed drifts over minutes, more than within one run."""
    if len(documents) == 1:
        return documents[0]
    rows = []
    for same in zip(*(d["rows"] for d in documents), strict=True):
        values = sorted(r["measured"] for r in same)
        middle = min(same, key=lambda r: abs(r["measured"] - values[len(values) // 2]))
        unit = "x" if middle["unit"] == "x" else f" {middle['unit']}"
        spread = f"median of {len(same)} runs, {values[0]:.3g}–{values[-1]:.3g}{unit}"
        detail = f"{spread}; this run: {middle['detail']}" if middle["detail"] else spread
        rows.append(row(middle["name"], middle["measured"], middle["unit"], middle["bar"], detail))
    return {**documents[0], "rows": rows, "runs": documents}


def doc_block(document: dict) -> str:
    lines = [
        f"Measured on {document['date']} by `make bench` ({document['machine']}):",
        "",
        "| row | measured | bar | |",
        "|---|---|---|---|",
    ]
    for r in document["rows"]:
        unit = r["unit"]
        value = f"{r['measured']:.2f}{unit}" if unit == "x" else f"{r['measured']:.1f} {unit}"
        detail = f" ({r['detail']})" if r["detail"] else ""
        met = "" if r["met"] is None else ("met" if r["met"] else "NOT met")
        lines.append(f"| {r['name']} | {value}{detail} | {r['bar'] or '—'} | {met} |")
    return "\n".join(lines)


def write_doc(document: dict, doc: Path) -> None:
    text = doc.read_text()
    start, end = "<!-- cost-model:start -->", "<!-- cost-model:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"{doc} has no {start} ... {end} block")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{start}\n{doc_block(document)}\n{end}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument(
        "--runs", type=int, default=3, help="whole runs; each row reports their median and range"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument(
        "--doc", action="store_true", help="rewrite docs/performance.md's block from the JSON"
    )
    parser.add_argument("--doc-file", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args(argv)
    if args.doc:
        write_doc(json.loads(args.json.read_text()), args.doc_file)
        print(f"rewrote the cost-model block of {args.doc_file} from {args.json}")
        return 0
    document = combined([run(args) for _ in range(args.runs)])
    print(doc_block(document))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(document, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
