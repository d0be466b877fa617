"""The auditor survives its target: whatever a target raises (SystemExit included), returns or sets in
NumPy's error state, and however long it runs, ``posenc audit`` ends with one line and exit 2 (or its
verdict), and ``posenc.audit`` raises a ValueError naming the target."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc.auditor import TargetError, WrongOutput, audit
from posenc.cli import main

D = 16
S = ["--samples", "32"]

USER_FILE = """
import sys, time
import numpy as np
import posenc

def exact(positions):
    return posenc.encode(positions, 16)

def exits(positions):
    raise SystemExit(0)

def exits_later(positions):
    if len(positions) > 4:
        sys.exit(5)
    return posenc.encode(positions, 16)

def interrupts(positions):
    raise KeyboardInterrupt

def generator_exit(positions):
    raise GeneratorExit

def poisons(positions):
    np.seterr(all="raise")
    return posenc.encode(positions, 16)

def sleeps(positions):
    time.sleep(30)
    return posenc.encode(positions, 16)

def a_list(positions):
    return [posenc.encode(positions, 16), posenc.encode(positions, 16)]

def rows_as_lists(positions):
    return posenc.encode(positions, 16).tolist()

def a_dict(positions):
    return {"pe": posenc.encode(positions, 16)}

def a_string(positions):
    return "sinusoidal"

def nothing(positions):
    return None

def three(positions):
    return (posenc.encode(positions, 16),) * 3

class ExitsWhenBuilt:
    def __init__(self):
        sys.exit(3)

    def __call__(self, positions):
        return posenc.encode(positions, 16)
"""

META_FILE = """
import torch

def meta(positions):
    return torch.zeros(len(positions), 16, device="meta")
"""


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(USER_FILE)
    return path


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("posenc: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("exits", "raised SystemExit(0) while calling it on 4 positions"),
        ("exits_later", "raised SystemExit(5) while calling it on"),
        ("interrupts", "raised KeyboardInterrupt() while calling it"),  # the target's own, not a Ctrl-C
        ("generator_exit", "raised GeneratorExit() while calling it"),
        ("ExitsWhenBuilt", "raised SystemExit(3) while building ExitsWhenBuilt()"),
    ],
)
def test_a_target_that_raises_anything_is_exit_2_naming_it(
    user: Path, capsys: pytest.CaptureFixture[str], name: str, said: str
) -> None:
    assert main(["audit", f"{user}:{name}", *S]) == 2
    err = _one_line(capsys)
    assert f"target {user}:{name} {said}" in err, err


def test_a_target_that_exits_while_imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bye.py").write_text("raise SystemExit(0)\n")
    assert main(["audit", f"{tmp_path / 'bye.py'}:f", *S]) == 2
    assert "raised SystemExit(0) while importing" in _one_line(capsys)


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("a_list", "a list"),  # two arrays in a list: never read as a (cos, sin) pair
        ("rows_as_lists", "a list"),
        ("a_dict", "a dict"),
        ("a_string", "a str"),
        ("nothing", "None"),
        ("three", "a tuple of 3 items"),
    ],
)
def test_wrong_return_types_say_what_was_expected(
    user: Path, capsys: pytest.CaptureFixture[str], name: str, what: str
) -> None:
    assert main(["audit", f"{user}:{name}", *S]) == 2
    err = _one_line(capsys)
    expected = "expected a tensor or array of shape (L, d_model), or a (cos, sin) pair of them"
    assert f"target {user}:{name} returned {what}; {expected}" in err, err


def test_a_meta_tensor_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "meta.py").write_text(META_FILE)
    assert main(["audit", f"{tmp_path / 'meta.py'}:meta", *S]) == 2
    assert "returned a meta tensor, which holds no values; build it on cpu" in _one_line(capsys)
    import torch

    with pytest.raises(WrongOutput, match="the target is a meta tensor"):
        audit(torch.zeros(64, D, device="meta"), samples=32)


def test_numpy_error_state_does_not_leak(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the target sets all="raise"; posenc's own arithmetic (which underflows in casts) must not see it
    assert main(["audit", f"{user}:poisons", *S]) == 0, capsys.readouterr()
    assert "PASS" in capsys.readouterr().out
    seen = []

    def poisons(positions: np.ndarray) -> np.ndarray:
        seen.append(np.geterr()["divide"])  # the target runs under its caller's state
        np.seterr(all="raise")
        return posenc.encode(positions, D)

    with np.errstate(divide="raise", over="ignore", under="warn", invalid="print"):
        caller = np.geterr()
        for timeout in (None, 60):
            assert audit(poisons, samples=32, timeout=timeout).passed
            assert np.geterr() == caller
    assert set(seen) == {"raise"}


def test_the_api_raises_a_value_error_naming_the_target_and_chaining_it() -> None:
    def exits(positions: np.ndarray) -> np.ndarray:
        raise SystemExit(7)

    for timeout in (None, 60):
        with pytest.raises(
            TargetError, match=r"target .*exits raised SystemExit\(7\) while calling"
        ) as caught:
            audit(exits, samples=32, timeout=timeout)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value.__cause__, SystemExit)

    def fails(positions: np.ndarray) -> np.ndarray:
        raise RuntimeError("boom")

    with pytest.raises(TargetError, match=r"could not be called.*RuntimeError: boom") as caught:
        audit(fails, samples=32)
    assert isinstance(caught.value.__cause__, RuntimeError)

    def interrupts(positions: np.ndarray) -> np.ndarray:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # in the caller's thread: taken for the user's Ctrl-C
        audit(interrupts, samples=32)


def test_the_api_timeout_gives_up_on_a_slow_target() -> None:
    release = threading.Event()

    def slow(positions: np.ndarray) -> np.ndarray:
        release.wait(30)
        return posenc.encode(positions, D)

    start = time.monotonic()
    try:
        with pytest.raises(TargetError, match=r"target .*slow was still running after the timeout of 0.5 s"):
            audit(slow, samples=32, timeout=0.5)
        assert time.monotonic() - start < 10
    finally:
        release.set()  # its thread returns, sees the audit abandoned and stops
    assert audit(posenc.table(64, D), samples=32, timeout=60).passed
    for bad in (0, -1, float("nan"), "1"):
        with pytest.raises(ValueError, match="timeout"):
            audit(posenc.table(64, D), samples=32, timeout=bad)


def test_the_cli_timeout_ends_a_target_that_sleeps(user: Path) -> None:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "posenc", "audit", f"{user}:sleeps", "--timeout", "1", *S],
        capture_output=True,
        text=True,
        timeout=60,
    )
    took = time.monotonic() - start
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"target {user}:sleeps was still running after the timeout of 1 s" in done.stderr
    assert "--timeout" in done.stderr
    assert took < 20, took  # 30 s of sleep were not waited for


TORCH_FILE = """
import os
import torch

def busy(positions):
    open(os.environ["AUDIT_MARKER"], "w").close()  # the target is running
    a = torch.randn(500, 500)
    while True:
        a = (a @ a).tanh()
"""


_WITH_CTRL_C = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from posenc.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _busy_in_torch(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    """``posenc audit`` of a target that runs torch operations for ever (its thread inside native code),
    started once the target runs."""
    (tmp_path / "busy.py").write_text(TORCH_FILE)
    marker = tmp_path / "running"
    # Ctrl-C raises KeyboardInterrupt as in a terminal, even where this test runs with SIGINT ignored
    command = [sys.executable, "-c", _WITH_CTRL_C, "audit", f"{tmp_path / 'busy.py'}:busy", *options]
    process = subprocess.Popen(
        command,
        env={**os.environ, "AUDIT_MARKER": str(marker)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process


def test_a_target_busy_in_native_code_does_not_abort_the_exit(tmp_path: Path) -> None:
    # finalization would stop its thread inside torch ("terminate called without an active exception")
    process = _busy_in_torch(tmp_path, "--timeout", "1")
    try:
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 2, (process.returncode, err)
    assert err.count("\n") == 1 and "was still running after the timeout of 1 s" in err, err


def test_ctrl_c_during_a_timed_audit_exits_130(tmp_path: Path) -> None:
    process = _busy_in_torch(tmp_path)
    try:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()  # never left running (it would slow the rest of the suite)
    assert process.returncode == 130 and "terminate" not in err and "Traceback" not in err, err


OTHER_THREAD_FILE = """
import signal
import threading
import time

def busy(positions):
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # Ctrl-C lands on the audit's own thread
    while True:
        time.sleep(0.01)
"""


def test_ctrl_c_delivered_to_another_thread_is_answered_at_once(tmp_path: Path) -> None:
    # A process-wide signal may land on any thread (torch's, BLAS's, the audit's): the main thread must not
    # sleep through it until the timeout (it once waited on one Event.wait(timeout); seen under load in CI).
    (tmp_path / "other.py").write_text(OTHER_THREAD_FILE)
    command = [
        sys.executable,
        "-c",
        _WITH_CTRL_C,
        "audit",
        f"{tmp_path / 'other.py'}:busy",
        "--timeout",
        "120",
    ]
    began = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = process.communicate(timeout=100)
    finally:
        process.kill()
    assert process.returncode == 130 and "Traceback" not in err, err
    assert time.monotonic() - began < 60


def test_timeout_option_is_checked(user: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", f"{user}:exact", "--timeout", "-1", *S]) == 2
    assert "--timeout" in _one_line(capsys)
    assert main(["audit", f"{user}:exact", "--timeout", "0", *S]) == 0  # 0: no limit
    assert "PASS" in capsys.readouterr().out
