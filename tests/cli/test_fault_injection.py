"""Faults injected into a real ``posenc`` process ("nothing poisoned, nothing lost"): Ctrl-C,
SIGTERM and SIGKILL mid-write, a file size limit (``ulimit -f``), a folder that cannot be written, a
reader that goes away, a closed stdout. Each ends in one line on stderr (or none) and no traceback; the
old output file is byte for byte as it was, and no temporary file is left (but after SIGKILL).
"""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

POSENC = [sys.executable, "-m", "posenc"]
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}  # a size limit must not meet a .pyc being written
OLD = b"the old table\n\x00\xff byte for byte\n"
TEMP = re.compile(r"\.(.+)\.posenc-[0-9]+-[0-9a-f]{8}\.tmp")  # .NAME.posenc-PID-XXXXXXXX.tmp
LIMIT = 64 << 10  # bytes: RLIMIT_FSIZE for the `ulimit -f` tests


def _old(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_bytes(OLD)
    return path


def _others(folder: Path, *keep: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def _then(*steps: Callable[[], object]) -> Callable[[], None]:
    """A preexec_fn running ``steps`` in the child, after it forks and before posenc starts."""

    def run() -> None:
        for step in steps:
            step()

    return run


def _sigint_default() -> None:
    """SIGINT as a terminal delivers it: a child started in the background may inherit it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _file_size_limit(limit: int = LIMIT) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def _posenc(*args: str, preexec: Callable[[], None] | None = None, **options) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*POSENC, *args], capture_output=True, text=True, env=ENV, preexec_fn=preexec, timeout=120, **options
    )


def _one_error_line(err: str, mentions: str) -> None:
    assert err.startswith("posenc: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err and "Exception ignored" not in err
    assert mentions in err, err


# --- signals mid-write -----------------------------------------------------------------------------


def _start_long_write(target: Path) -> subprocess.Popen:
    """``posenc table 3000000 64 --format csv --output TARGET`` (about 2 GB), once its temporary file
    holds some rows."""
    process = subprocess.Popen(
        [*POSENC, "table", "3000000", "64", "--format", "csv", "--output", str(target)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        preexec_fn=_sigint_default,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        temps = [p for p in target.parent.iterdir() if TEMP.fullmatch(p.name)]
        if temps and temps[0].stat().st_size > 0:
            assert TEMP.fullmatch(temps[0].name).group(1) == target.name  # .NAME.posenc-PID-XXXXXXXX.tmp
            return process
        assert process.poll() is None, process.communicate()
        time.sleep(0.01)
    process.kill()
    pytest.fail("no temporary file appeared within 60 s")


@pytest.mark.parametrize(
    ("signum", "code", "says"),
    [
        pytest.param(signal.SIGINT, 130, "posenc: interrupted\n", id="Ctrl-C"),
        pytest.param(signal.SIGTERM, 143, "posenc: terminated (SIGTERM)\n", id="SIGTERM"),
    ],
)
def test_a_signal_mid_write_keeps_the_old_file_and_no_temp(
    tmp_path: Path, signum: int, code: int, says: str
) -> None:
    target = _old(tmp_path, "pe.csv")
    with _start_long_write(target) as process:
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    assert process.returncode == code
    assert err.decode() == says  # one line, no traceback
    assert target.read_bytes() == OLD
    assert _others(tmp_path, "pe.csv") == []


def test_sigkill_mid_write_keeps_the_old_file(tmp_path: Path) -> None:
    """SIGKILL cannot be caught: the rename never happened, so the old file is whole; the temporary file
    it leaves is recognisable by its name."""
    target = _old(tmp_path, "pe.csv")
    with _start_long_write(target) as process:
        process.kill()
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert target.read_bytes() == OLD
    assert all(TEMP.fullmatch(name) for name in _others(tmp_path, "pe.csv"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "SIGTERM"])
def test_a_signal_stops_a_long_computation_on_the_thread_pool_at_once(signum: int) -> None:
    """``posenc check`` at d_model 2**20 runs for minutes on every core; a signal ends it within seconds:
    the blocks not yet started are dropped, not computed before the process may exit."""
    process = subprocess.Popen(
        [*POSENC, "check", "--length", "4096", "--d-model", "1048576"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        preexec_fn=_sigint_default,
    )
    with process:
        time.sleep(4)  # well into the work: the pool is busy
        assert process.poll() is None
        sent = time.monotonic()
        process.send_signal(signum)
        _, err = process.communicate(timeout=120)
        took = time.monotonic() - sent
    assert process.returncode == 128 + signum
    assert "Traceback" not in err.decode()
    assert took < 20, f"{took:.1f} s after the signal"  # a generous bound: the work left is minutes


# --- ulimit -f: a file that may not grow past 64 KiB ----------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "csv", "json", "npy"])
def test_table_past_the_file_size_limit(tmp_path: Path, fmt: str) -> None:
    target = _old(tmp_path, f"pe.{fmt}")
    done = _posenc("table", "20000", "64", "--format", fmt, "-o", str(target), preexec=_file_size_limit())
    assert done.returncode == 2
    assert done.stderr == f"posenc: error: cannot write {target}: File too large\n"
    assert target.read_bytes() == OLD
    assert _others(tmp_path, target.name) == []


@pytest.mark.parametrize("fmt", ["csv", "npy"])
def test_rope_past_the_file_size_limit(tmp_path: Path, fmt: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        '{"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "rope_theta": 1e4}'
    )
    target = _old(tmp_path, f"rope.{fmt}")
    args = ["rope", str(config), "--positions", "0:2000", "--format", fmt, "--output", str(target)]
    done = _posenc(*args, preexec=_file_size_limit())
    assert done.returncode == 2
    assert done.stderr == f"posenc: error: cannot write {target}: File too large\n"
    assert target.read_bytes() == OLD
    assert _others(tmp_path, target.name, "config.json") == []


@pytest.fixture(scope="module")
def font_cache() -> None:
    """matplotlib's font cache, built (and written) now, not by a posenc under a file size limit."""
    pytest.importorskip("matplotlib")
    from matplotlib import font_manager

    assert font_manager.fontManager.ttflist


@pytest.mark.parametrize("suffix", [".pdf", ".svg", ".png"])
def test_plot_past_the_file_size_limit(tmp_path: Path, font_cache: None, suffix: str) -> None:
    """Before: a .pdf was a matplotlib traceback (its writer fails again while closing)."""
    target = _old(tmp_path, f"heatmap{suffix}")
    done = _posenc("plot", "heatmap", "--output", str(target), preexec=_file_size_limit(8 << 10))
    assert done.returncode == 2
    assert done.stderr == f"posenc: error: cannot write {target}: File too large\n"
    assert target.read_bytes() == OLD
    assert _others(tmp_path, target.name) == []


def test_stdout_past_the_file_size_limit(tmp_path: Path) -> None:
    """``posenc table 20000 64 > FILE`` under ``ulimit -f``: one line about standard output; no second
    message when Python flushes stdout at exit."""
    with open(tmp_path / "out.txt", "w") as stdout:
        done = subprocess.run(
            [*POSENC, "table", "20000", "64"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            preexec_fn=_file_size_limit(),
            timeout=120,
        )
    assert done.returncode == 2
    assert done.stderr == "posenc: error: cannot write standard output: File too large\n"


# --- a file that cannot be written at all ---------------------------------------------------------


def _unwritable(tmp_path: Path, case: str) -> tuple[Path, str, bool]:
    """(a target, the reason the error gives, whether an old file there must survive) for each case. As
    root a read-only folder does not stop anyone, so the case writes into /proc instead, which refuses
    new files to root too."""
    if case == "a directory":
        target = tmp_path / "pe.csv"
        target.mkdir()
        (target / "inside").write_bytes(OLD)
        return target, os.strerror(errno.EISDIR), False
    if case == "a missing folder":
        return tmp_path / "missing" / "pe.csv", os.strerror(errno.ENOENT), False
    if os.geteuid() == 0:
        return Path("/proc") / f"posenc-test-{os.getpid()}.csv", os.strerror(errno.ENOENT), False
    target = _old(tmp_path, "pe.csv")
    tmp_path.chmod(0o555)
    return target, os.strerror(errno.EACCES), True


@pytest.mark.parametrize("case", ["a directory", "a missing folder", "a read-only folder"])
def test_an_unwritable_target_is_one_line_naming_it(tmp_path: Path, case: str) -> None:
    target, reason, kept = _unwritable(tmp_path, case)
    try:
        done = _posenc("table", "100", "8", "--format", "csv", "--output", str(target))
        assert done.returncode == 2
        assert done.stderr == f"posenc: error: cannot write {target}: {reason}\n"
        if kept:
            assert target.read_bytes() == OLD
        if case == "a directory":
            assert (target / "inside").read_bytes() == OLD
        assert _others(tmp_path, target.name) == []  # no temporary file, no folder created
        assert target.exists() == (case == "a directory" or kept)
    finally:
        tmp_path.chmod(0o755)


# --- stdout that goes away or was never there -----------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "csv", "json"])
def test_a_reader_that_goes_away_is_quiet(fmt: str) -> None:
    """``posenc table 200000 8 | head -c 100``: exit 1, nothing on stderr (no traceback, no 'Exception
    ignored' when Python flushes stdout at exit)."""
    command = [*POSENC, "table", "200000", "8", "--format", fmt]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV) as process:
        assert process.stdout is not None and process.stderr is not None
        assert len(process.stdout.read(100)) == 100
        process.stdout.close()
        err = process.stderr.read()
        process.wait(timeout=60)
    assert err == b""
    assert process.returncode == 1


def test_a_closed_stdout_is_one_line() -> None:
    """``posenc table 10 4 >&-``: Python starts with no sys.stdout; one error line and exit 2."""
    done = _posenc("table", "10", "4", preexec=lambda: os.close(1))
    assert done.returncode == 2
    _one_error_line(done.stderr, "cannot write standard output: Bad file descriptor (it is closed)")


def test_a_read_only_stdout_is_one_line() -> None:
    """``posenc table 10 4 1</dev/null``: every write fails with EBADF; one line, not a second at exit."""

    def read_only_stdout() -> None:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 1)

    done = subprocess.run(
        [*POSENC, "table", "10", "4"], stderr=subprocess.PIPE, text=True, env=ENV, preexec_fn=read_only_stdout
    )
    assert done.returncode == 2
    _one_error_line(done.stderr, "cannot write standard output: Bad file descriptor")


def test_a_closed_stdout_does_not_stop_a_file_output(tmp_path: Path) -> None:
    """``posenc table 10 4 --output F >&-``: nothing was to be printed; F is written, exit 0."""
    target = _old(tmp_path, "pe.csv")
    done = _posenc("table", "10", "4", "--format", "csv", "-o", str(target), preexec=lambda: os.close(1))
    assert (done.returncode, done.stderr) == (0, "")
    assert target.read_text(encoding="utf-8").startswith("pos,0 sin ω0,1 cos ω0")
    assert len(target.read_text(encoding="utf-8").splitlines()) == 11
