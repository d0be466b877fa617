"""Results of a test file's Triton kernels run in Triton's CPU interpreter.

The interpreter must be chosen before triton is imported, so a kernel test runs its own file as a script in
a subprocess with TRITON_INTERPRET=1; the script saves its outputs as one .npz that the tests compare.

The script runs through this module (``python -m tests.support.interpreted SCRIPT OUT``), which first turns
off the interpreter's integer-overflow sanitizing. Triton's interpreter sanitizes by default, but only to
hand the check to ``device_assert``, which drops it unless the kernel is compiled with ``debug=True``: every
integer add, subtract and multiply costs five more array operations whose result nobody reads. A CUDA
compile without ``debug`` never emits them, so turning them off leaves every value and every check as the
GPU has them, and the interpreted kernels run about 2.4 times faster (the four interpreted files of
tests/torch: 4 m 50 s of CPU before, 2 m 01 s after).

It also raises the exact algorithm's default block (``table_launch.EXACT_BLOCK``, a GPU's register budget)
to whole tables: the interpreter runs a grid's programs one after another, each paying every operation's
dispatch, so a levels or anchors build of 256 programs of 128 elements took ~30 s where one program takes
~1 s, to the same bits (the values are elementwise; a test that needs a block names it: ``exact_block``).
The first-launch probes and the public entry points build such tables in every interpreted file. The
encode kernel's default block is raised the same way (:data:`INTERPRETED_ENCODE_BLOCK`), and the language is
swapped once a launch rather than at every helper call (:func:`_patching_the_language_once_per_launch`):
the five interpreted files, 355 s of CPU in a loaded ``make test``, take ~200 s.
"""

from __future__ import annotations

import dataclasses
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def interpreted_results(script: str, out: Path, timeout: int = 900) -> dict[str, np.ndarray]:
    """Run ``python script out`` with TRITON_INTERPRET=1 and return the arrays it saved to ``out``."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)  # tests.support.*
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    command = [sys.executable, "-m", "tests.support.interpreted", script, str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    with np.load(out) as data:
        return dict(data)


def results_fixture(script: str, name: str):
    """A module-scoped pytest fixture ``kernel_results``: the arrays ``script`` saves when run interpreted."""

    @pytest.fixture(scope="module")
    def kernel_results(tmp_path_factory) -> dict[str, np.ndarray]:
        return interpreted_results(script, tmp_path_factory.mktemp(name) / "results.npz")

    return kernel_results


def _without_dropped_overflow_checks() -> None:
    """The interpreter as a CUDA compile without ``debug`` runs: no integer-overflow checks to drop."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:  # with debug the checks are real: keep them
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)


def _patching_the_language_once_per_launch() -> None:
    """The interpreter swaps ``triton.language``'s builtins for its own at each launch (and puts them back
    after), and again at every call of a ``@triton.jit`` helper inside the kernel: tens of thousands of
    times a launch here (the fixed-point helpers), each walking the modules' members with
    ``inspect.getmembers`` to set what the launch already set — a fifth of the interpreted files' time, and
    nothing restored. A helper whose language modules the running launch already swapped skips it; every
    other call (a launch, a helper seeing another module) swaps as before. The kernels run the same code on
    the same swapped language, so every value is the same."""
    import inspect

    import triton.language as tl
    from triton.runtime import interpreter

    if not all(hasattr(interpreter, n) for n in ("_patch_lang", "_LangPatchScope", "GridExecutor")):
        return  # another Triton's interpreter: it swaps as it does (slower, the same values)
    patch, run = interpreter._patch_lang, interpreter.GridExecutor.__call__
    launches: list[set[int] | None] = []  # per running launch: the modules it swapped (None: not yet)

    seen: dict[int, set[int]] = {}

    def modules(fn) -> set[int]:
        if id(fn) not in seen:  # a kernel's functions live as long as their modules
            found = (v for v in fn.__globals__.values() if inspect.ismodule(v))
            seen[id(fn)] = {id(v) for v in found if v in (tl, tl.core)}
        return seen[id(fn)]

    def patch_once(fn):
        if launches and launches[-1] is not None and modules(fn) <= launches[-1]:
            return interpreter._LangPatchScope()  # swapped by this launch: nothing to do, nothing to undo
        scope = patch(fn)
        if launches and launches[-1] is None:
            launches[-1] = modules(fn)
        return scope

    def launch(self, *args, **kwargs):
        launches.append(None)
        try:
            return run(self, *args, **kwargs)
        finally:
            launches.pop()

    interpreter._patch_lang, interpreter.GridExecutor.__call__ = patch_once, launch


#: The interpreter's default exact block (module docstring): 1024 rows of 64 frequencies, one program a table.
INTERPRETED_EXACT_BLOCK = 1 << 16
#: The encode kernel's default block in the interpreter: 16 K elements a program (a GPU's: 128), where an
#: operation's dispatch and its NumPy work cost about the same (timesteps through the operator: 20 programs
#: of the exact algorithm, 8 s, became one)
INTERPRETED_ENCODE_BLOCK = 1 << 14


if __name__ == "__main__":  # python -m tests.support.interpreted SCRIPT OUT (TRITON_INTERPRET=1)
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    _without_dropped_overflow_checks()
    _patching_the_language_once_per_launch()
    from posenc.torch.kernels import encode_launch, table_launch

    table_launch.EXACT_BLOCK = INTERPRETED_EXACT_BLOCK
    encode_launch._BLOCK = INTERPRETED_ENCODE_BLOCK
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
