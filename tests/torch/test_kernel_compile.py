"""posenc's Triton kernels compile for an H100 (sm_90) on this machine, which has no GPU: every
specialization of scripts/compile_kernels.py goes through its real launcher and Triton's CUDA backend to a
cubin, and through the check Triton makes at every launch (the globals a kernel read are unchanged) — with
the pinned triton (what torch 2.13's CUDA builds ship), and with triton 3.6 (torch 2.10 and 2.11's, the
oldest the launchers take; ``make test`` installs it apart, in .venv/triton-3.6) the specializations the
direct-launch check launches, every kernel among them (:data:`OLDEST_SPECS`: each exact-algorithm compile
takes ~20 s of CPU, and a new venv compiles them all).

The bit-for-bit tests run the kernels in Triton's CPU interpreter, which accepts code the compiler refuses
and makes no launch check: a NaN global (NaN != NaN reads as "changed") stopped every launch of both
kernels, and triton 3.6 could not build them (None in a returned tuple, nested tuple unpacking), with every
interpreted test green. The negative control shows this harness catches the first.

The compiles are kept in Triton's on-disk cache in the venv (:data:`CACHE`): a warm run compiles only the
kernels whose source (or Triton) changed, ~4 minutes of CPU less; a new venv, as in CI, compiles them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.torch.kernels import common

triton = pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "compile_kernels.py"
#: triton 3.6, installed apart by ``make test`` (pip install --target); first on the path, it is imported
OLDEST = Path(sys.prefix) / "triton-3.6"
TRITONS = {"pinned": None, "3.6": OLDEST}


#: Triton's on-disk cache of the sm_90 compiles, per Triton, in the venv: a kernel is compiled again when its
#: source, a function it calls, a constant it reads, its specialization or the Triton changes (Triton's own
#: cache key), so a warm ``make test`` compiles only what changed; a new venv (CI) compiles everything.
CACHE = Path(sys.prefix) / "triton-cache-sm90"


def _start(out: Path, extra_path: Path | None, *args: str, cache: Path | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    paths = [str(extra_path)] if extra_path else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env["TRITON_CACHE_DIR"] = str(cache or out.parent / "cache")  # else a fresh cache: everything compiles
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # the launchers pass enable_fp_fusion=False themselves
    command = [sys.executable, *args, "--arch", "90", "--json", str(out)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


#: Seconds a compile may take before it is taken for a hang (a guard, not a time bar: with its caches empty
#: on a 2-core machine loaded by other work, the pinned triton's compiles took over 900 s).
HANG = 2700


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict[str, dict]:
    """Each triton's records (the two compile at once, one per core)."""
    if not (OLDEST / "triton").is_dir():
        pytest.fail(f"triton 3.6 is not installed in {OLDEST}: run `make test` (it installs it there)")
    started = {}
    for name, extra in TRITONS.items():
        out = tmp_path_factory.mktemp(f"triton-{name}") / "compiled.json"
        specs = ("--spec", *OLDEST_SPECS) if name == "3.6" else ()
        started[name] = (out, _start(out, extra, str(SCRIPT), *specs, cache=CACHE / name))
    results = {}
    for name, (out, process) in started.items():
        log, _ = process.communicate(timeout=HANG)
        assert out.exists(), log[-4000:]
        results[name] = {**json.loads(out.read_text()), "returncode": process.returncode, "log": log}
    # then the direct launches' arguments, from the kernels just compiled (the same caches)
    checks = {}
    for name, extra in TRITONS.items():
        out = tmp_path_factory.mktemp(f"launch-{name}") / "launch.json"
        args = (str(SCRIPT), "--launch-args", "--spec", *LAUNCHED)
        checks[name] = (out, _start(out, extra, *args, cache=CACHE / name))
    for name, (out, process) in checks.items():
        log, _ = process.communicate(timeout=HANG)
        assert out.exists(), log[-4000:]
        results[name]["launch"] = {
            **json.loads(out.read_text()),
            "returncode": process.returncode,
            "log": log,
        }
    return results


#: The specializations whose every kernel is launched twice by the direct-launch check: each kernel.
LAUNCHED = (
    "rotary bf16 half",
    "table settling -> bfloat16",
    "ids + offsets -> float16 (odd)",
    "encode float32 timesteps -> float32",
)
#: What triton 3.6 compiles: the launched specializations (every kernel among them: the direct-launch check
#: asserts it) and the other rotary layout.
OLDEST_SPECS = (*LAUNCHED, "rotary fp16/fp32 interleaved (yarn, partial)")


@pytest.mark.parametrize("name", list(TRITONS))
def test_every_specialization_compiles_to_an_sm_90_cubin(compiled, name):
    result = compiled[name]
    want = "3.6.0" if name == "3.6" else triton.__version__
    assert result["triton"] == want
    errors = {r["spec"]: r["error"][-1500:] for r in result["records"] if "error" in r}
    assert not errors, errors
    assert result["returncode"] == 0, result["log"][-3000:]
    records = result["records"]
    if name == "3.6":
        assert [r["spec"] for r in records] == list(OLDEST_SPECS)
    else:
        assert {"encode int -> bfloat16", "rotary bf16 half", "table -> bfloat16"} <= {
            r["spec"] for r in records
        }
        assert len(records) == 13
    for record in records:
        assert record["ptx_target"] == "sm_90a"
        assert record["cubin_bytes"] > 10_000
        assert record["kernel"] in ("encode_kernel", "rotate_kernel", "table_kernel", "settle_kernel")
    # the combining and rotation kernels keep the exact algorithm out: few registers, several programs per SM
    for record in records:
        if record["kernel"] in ("table_kernel", "rotate_kernel") and "reg" in record:
            assert record["reg"] <= 128 and record["local"] == 0, record
    if name != "3.6":
        assert {r["kernel"] for r in records if "reg" in r} >= {"table_kernel", "rotate_kernel"}


@pytest.mark.parametrize("name", list(TRITONS))
def test_a_direct_launch_passes_the_compiled_kernel_what_triton_passes_it(compiled, name):
    """posenc's Launcher calls the compiled kernel's own launcher from the second launch of a specialization
    on: with Triton's real binder (constants, defaults, argument order), every kernel's direct launch passes
    what Triton's launch passed (a reversed pair of constants fails this: checked by hand)."""
    result = compiled[name]["launch"]
    assert result["returncode"] == 0, result["log"][-3000:]
    kernels = {}
    for record in result["records"]:
        assert "error" not in record, record["error"][-1500:]
        kernels.update(record["kernels"])
    assert kernels == dict.fromkeys(
        ("rotate_kernel", "settle_kernel", "table_kernel", "encode_kernel", "ids_kernel"), True
    )


TOY = """
import sys
import torch
import triton
import triton.language as tl

sys.path.insert(0, {scripts!r})
import compile_kernels

_NAN = tl.constexpr(float("nan"))


@triton.jit
def toy(x_ptr):
    tl.store(x_ptr, _NAN)


compile_kernels.SPECS["toy"] = lambda: toy[(1,)](torch.zeros(1))
sys.exit(compile_kernels.main(["--spec", "toy", "--json", {out!r}]))
"""


def test_the_harness_makes_triton_s_launch_check_negative_control(tmp_path):
    """A kernel that reads a NaN global compiles, then fails Triton's launch check: the harness reports it
    (the interpreter runs it without a word)."""
    script = tmp_path / "toy.py"
    out = tmp_path / "toy.json"
    script.write_text(TOY.format(scripts=str(SCRIPT.parent), out=str(out)))
    process = _start(out, None, str(script))
    log, _ = process.communicate(timeout=300)
    assert process.returncode == 1, log[-3000:]
    (record,) = json.loads(out.read_text())["records"]
    assert "has changed since we compiled this kernel" in record["error"], record


def test_the_oldest_triton_the_launchers_take():
    assert common.MIN_TRITON == (3, 6)
    assert common.triton_supported("3.6.0") and common.triton_supported("3.9.0+git1234")
    assert not common.triton_supported("3.5.1")
    assert not common.triton_supported("2.3.0")


def test_an_older_triton_leaves_the_kernels_alone(monkeypatch):
    common.kernel_module.cache_clear()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(triton, "__version__", "3.5.0")
            assert common.kernel_module("fused_kernel") is None
    finally:
        common.kernel_module.cache_clear()
    assert common.kernel_module("fused_kernel") is not None
