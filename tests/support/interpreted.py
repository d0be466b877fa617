"""Results of a test file's Triton kernels run in Triton's CPU interpreter.

The interpreter must be chosen before triton is imported, so a kernel test runs its own file as a script in
a subprocess with TRITON_INTERPRET=1; the script saves its outputs as one .npz that the tests compare.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


def interpreted_results(script: str, out: Path, timeout: int = 900) -> dict[str, np.ndarray]:
    """Run ``python script out`` with TRITON_INTERPRET=1 and return the arrays it saved to ``out``."""
    root = str(Path(__file__).resolve().parents[2])  # the script imports tests.support.*
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, script, str(out)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-4000:]
    with np.load(out) as data:
        return dict(data)


def results_fixture(script: str, name: str):
    """A module-scoped pytest fixture ``kernel_results``: the arrays ``script`` saves when run interpreted."""

    @pytest.fixture(scope="module")
    def kernel_results(tmp_path_factory) -> dict[str, np.ndarray]:
        return interpreted_results(script, tmp_path_factory.mktemp(name) / "results.npz")

    return kernel_results
