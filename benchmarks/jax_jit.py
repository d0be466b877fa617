"""posenc's Flax module under ``jax.jit`` on the CPU, side by side in one process with the usual formula
jitted: what a restart costs (the compile of the first call) and what a step costs (the median call after).

    python benchmarks/jax_jit.py [--repeat 21] [--json FILE] [--doc]

The cases, each jitted with ``jax.jit`` (the module has no dropout, so it may be closed over), x of
(4, 1024, 512) float32 and a decode step's x of (4, 1, 512):

- the usual formula (the PyTorch tutorial's, in ``jnp``: float32 ``exp`` and angles) of positions 0 .. 1023,
  added to x; and of a traced offset t (a decode step);
- posenc with its default positions (concrete under jit: its rows are a constant of the program);
- posenc with traced position ids (B, S) (a jit argument: packed documents, padding) — rows of a constant
  table while they lie inside it (its 4096 rows), computed past it — and the same ids plus 1,000,000;
- posenc of a traced offset t (a decode step, x (4, 1, 512)): t = 777, and t = 1,000,777;
- each of these twice: as a CPU-only JAX runs them (positions past the table computed by the C core,
  one host callback), and inside ``pj.self_contained()`` (the portable algorithm in the program, what a
  device runs and what ``jax.export`` needs; its calls past the table are measured 3 times, not
  ``--repeat``: seconds each);
- a reference: the same step as a gather from posenc's exact table alone, without the branch for
  positions past it the module's program holds (what that branch costs a step on XLA's CPU runtime).

Compile: seconds from ``jax.jit(f).lower(*args).compile()``; step: the median of ``--repeat`` calls of the
compiled program (``block_until_ready``), after two warm-ups. A restart with JAX's persistent compilation
cache (``jax.config.update("jax_compilation_cache_dir", ...)``, the user's own setting: posenc sets no
global state) is measured for posenc's traced programs in fresh processes: the first fills the cache, the
second's compile is what every later restart costs. Ratios are to the usual formula's program of
the same kind (a full sequence, or a decode step). Results go to ``--json`` (default
``benchmarks/results/jax_jit.json``); ``--doc`` also writes the table of ``docs/jax.md`` between its
``<!-- jax-jit:start -->`` and ``<!-- jax-jit:end -->`` lines.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

import posenc
import posenc.jax as pj

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "jax.md"
BATCH, LENGTH, D_MODEL = 4, 1024, 512


def usual(positions: jax.Array) -> jax.Array:
    """The tutorial's formula in jnp float32: (..., d_model), interleaved sin/cos."""
    omega = jnp.exp(jnp.arange(0, D_MODEL, 2, dtype=jnp.float32) * (-math.log(10000.0) / D_MODEL))
    angle = positions.astype(jnp.float32)[..., None] * omega
    return jnp.stack([jnp.sin(angle), jnp.cos(angle)], axis=-1).reshape(*angle.shape[:-1], D_MODEL)


def _measure(function, args: tuple, repeat: int) -> tuple[float, float]:
    """(compile seconds, median step seconds) of ``jax.jit(function)`` at ``args``."""
    began = time.perf_counter()
    compiled = jax.jit(function).lower(*args).compile()
    compile_seconds = time.perf_counter() - began
    for _ in range(2):
        jax.block_until_ready(compiled(*args))
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - began)
    return compile_seconds, statistics.median(times)


def _cases() -> dict[str, tuple]:
    """name: (function, its arguments, "sequence" or "step", traced inside ``pj.self_contained()``)."""
    module = pj.SinusoidalPositionalEncoding(D_MODEL)
    x = jnp.zeros((BATCH, LENGTH, D_MODEL), jnp.float32)
    step = jnp.zeros((BATCH, 1, D_MODEL), jnp.float32)
    ids = jnp.broadcast_to(jnp.arange(LENGTH, dtype=jnp.int32), (BATCH, LENGTH))
    far = ids + PAST  # past the module's table (4096 rows): computed, not looked up
    t, t_far = jnp.asarray(777, jnp.int32), jnp.asarray(PAST + 777, jnp.int32)
    table = jnp.asarray(posenc.table(4096, D_MODEL))  # the rows the module looks a traced offset up in

    def sequence():  # a new function each time: each case is traced and compiled anew, as in a restart
        return lambda x, p: module(x, p)

    def decode():
        return lambda s, t: module(s, offset=t)

    def usual_sequence(x):
        return x + usual(jnp.arange(LENGTH))

    cases = {
        "usual formula, positions 0 .. 1023": (usual_sequence, (x,), "sequence", False),
        "usual formula, a decode step (traced t)": (
            lambda s, t: s + usual(t + jnp.arange(1)),
            (step, t),
            "step",
            False,
        ),
        "posenc, default positions (a constant)": (lambda x: module(x), (x,), "sequence", False),
    }
    for where, portable in (("", False), (", self-contained", True)):
        cases[f"posenc{where}, traced position ids (B, S)"] = (sequence(), (x, ids), "sequence", portable)
        cases[f"posenc{where}, a decode step (traced offset)"] = (decode(), (step, t), "step", portable)
        cases[f"posenc{where}, position ids past the table"] = (sequence(), (x, far), "sequence", portable)
        cases[f"posenc{where}, a decode step past the table"] = (decode(), (step, t_far), "step", portable)
    cases["reference: a decode step's gather from posenc's table alone"] = (
        lambda s, t: s + table[jnp.clip(t + jnp.arange(1), 0, len(table) - 1)],
        (step, t),
        "step",
        False,
    )
    return cases


#: Position ids past the module's table (4096 rows) start here.
PAST = 1_000_000

#: The programs whose restart with a persistent compilation cache is measured.
CACHED = ("posenc, traced position ids (B, S)", "posenc, self-contained, traced position ids (B, S)")

#: Calls of a self-contained program past the table cost seconds each on the CPU: measured this many times.
SLOW_REPEAT = 3


def _restart(name: str, cache: str) -> float:
    """Compile seconds of case ``name`` in a fresh process with JAX's persistent cache in ``cache``."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", name, cache], capture_output=True, text=True, check=True
    )
    return float(done.stdout.split()[-1])


def main() -> None:
    made = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    made.add_argument("--repeat", type=int, default=21)
    made.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "jax_jit.json")
    made.add_argument("--doc", action="store_true")
    made.add_argument("--child", nargs=2, help=argparse.SUPPRESS)  # NAME CACHE: one restart, see _restart
    args = made.parse_args()
    if args.child:
        jax.config.update("jax_compilation_cache_dir", args.child[1])
        function, inputs, _, portable = _cases()[args.child[0]]
        with pj.self_contained() if portable else contextlib.nullcontext():
            began = time.perf_counter()
            jax.jit(function).lower(*inputs).compile()
        print(time.perf_counter() - began)
        return
    cases = _cases()
    rows = {}
    for name, (function, inputs, kind, portable) in cases.items():
        repeat = SLOW_REPEAT if portable and "past the table" in name else args.repeat
        with pj.self_contained() if portable else contextlib.nullcontext():
            compile_seconds, step_seconds = _measure(function, inputs, repeat)
        rows[name] = {"kind": kind, "compile_s": compile_seconds, "step_ms": step_seconds * 1e3}
        rows[name]["repeat"] = repeat
        print(f"{name:44} compile {compile_seconds:7.3f} s   step {step_seconds * 1e3:9.3f} ms", flush=True)
    for name in CACHED:
        with tempfile.TemporaryDirectory() as cache:
            first, again = _restart(name, cache), _restart(name, cache)
        rows[name]["restart_s"] = {"fills the cache": first, "from the cache": again}
        print(f"{name:44} restart: {first:.3f} s filling the cache, {again:.3f} s from it", flush=True)
    reference = {row["kind"]: row for name, row in rows.items() if name.startswith("usual")}
    for row in rows.values():
        row["compile_ratio"] = row["compile_s"] / reference[row["kind"]]["compile_s"]
        row["step_ratio"] = row["step_ms"] / reference[row["kind"]]["step_ms"]
    machine = f"CPU, {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}"
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    if args.doc:
        _write_doc(rows, machine, args.repeat)


def _write_doc(rows: dict, machine: str, repeat: int) -> None:
    lines = [
        f"{machine}, {time.strftime('%Y-%m-%d')}, float32, x (4, 1024, 512), a step's x (4, 1, 512), median "
        f"of {repeat} (of {SLOW_REPEAT} for the self-contained rows past the table; "
        "`python benchmarks/jax_jit.py --doc`):",
        "",
        "| program (`jax.jit`) | compile | step | compile / usual | step / usual |",
        "|---|---|---|---|---|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | {row['compile_s']:.2f} s | {row['step_ms']:.3f} ms | {row['compile_ratio']:.1f}× | "
            f"{row['step_ratio']:.1f}× |"
        )
    lines += [
        "",
        "A restart with JAX's persistent compilation cache (`jax_compilation_cache_dir`), fresh processes:",
        "",
        "| program | compile, filling the cache | compile, from the cache |",
        "|---|---|---|",
    ]
    for name, row in rows.items():
        if "restart_s" in row:
            first, again = row["restart_s"].values()
            lines.append(f"| {name} | {first:.2f} s | {again:.2f} s |")
    text = PAGE.read_text()
    head, rest = text.split("<!-- jax-jit:start -->")
    tail = rest.split("<!-- jax-jit:end -->")[1]
    PAGE.write_text(f"{head}<!-- jax-jit:start -->\n" + "\n".join(lines) + f"\n<!-- jax-jit:end -->{tail}")


if __name__ == "__main__":
    main()
