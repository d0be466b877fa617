"""A writer killed outright (``kill -9``) leaves its temporary file ``.NAME.posenc-PID-XXXXXXXX.tmp``; the
next write into the same folder removes it, and only it: files of exactly posenc's pattern whose writer
process is gone and that no process holds locked. Another live writer's file, and every other name, stay.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.atomic import TEMP_PATTERN, atomic_output, remove_stale

POSENC = Path(sys.executable).with_name("posenc")
OLD = b"the old table\n"

#: A child that writes 1 MB into ``atomic_output(sys.argv[1])``, says so, and waits to be killed.
_WRITER = """
import sys, time
from posenc.atomic import atomic_output
with atomic_output(sys.argv[1], binary=True) as stream:
    stream.write(b"x" * (1 << 20))
    stream.flush()
    print("writing", flush=True)
    time.sleep(120)
"""

#: A child that holds ``sys.argv[1]`` locked as a writer does, says so, and waits to be killed.
_LOCKER = """
import fcntl, os, sys, time
descriptor = os.open(sys.argv[1], os.O_WRONLY)
fcntl.flock(descriptor, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def _dead_pid() -> int:
    """The id of a process that has ended and been waited for."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return int(child.stdout)


def _started(code: str, *args: str, says: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == says
    return child


def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMP_PATTERN.fullmatch(p.name))


@pytest.mark.skipif(os.name != "posix", reason="signals and flock: POSIX")
def test_the_next_write_removes_what_a_sigkill_left_and_nothing_else(tmp_path):
    target = tmp_path / "pe.csv"
    target.write_bytes(OLD)
    writer = _started(_WRITER, str(target), says="writing")
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=60)  # reaped: a zombie still exists
    (stale,) = _temps(tmp_path)
    assert int(TEMP_PATTERN.fullmatch(stale)["pid"]) == writer.pid
    assert (tmp_path / stale).stat().st_size == 1 << 20 and target.read_bytes() == OLD

    alive = subprocess.Popen(["sleep", "120"])  # a live writer's file, by its pid
    dead = _dead_pid()
    kept = [
        f".pe.csv.posenc-{alive.pid}-0123abcd.tmp",  # a live process
        f".pe.csv.posenc-{os.getpid()}-0123abcd.tmp",  # this process
        ".pe.csv.posenc-0123abcd.tmp",  # no pid
        f"pe.csv.posenc-{dead}-0123abcd.tmp",  # no leading dot
        f".pe.csv.posenc-{dead}-0123ABCD.tmp",  # not posenc's hex
        f".pe.csv.posenc-{dead}-0123abcd.tmp.bak",
        f".pe.csv.other-{dead}-0123abcd.tmp",
        "notes.txt",
    ]
    for name in kept:
        (tmp_path / name).write_bytes(b"keep")
    (tmp_path / f".other.npy.posenc-{dead}-89abcdef.tmp").write_bytes(b"stale")  # another target's, dead
    try:
        done = subprocess.run(  # a real posenc process writes another file into the folder
            [str(POSENC), "table", "4", "8", "--output", str(tmp_path / "other.csv")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        alive.kill()
        alive.wait()
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "other.csv", "pe.csv"])
    assert all((tmp_path / name).read_bytes() == b"keep" for name in kept)
    assert target.read_bytes() == OLD


@pytest.mark.skipif(os.name != "posix", reason="flock: POSIX")
def test_a_file_locked_by_a_live_process_stays_whatever_its_name_says(tmp_path):
    """A writer in another PID namespace sharing the folder has a pid that looks dead here: its lock
    keeps its file."""
    held = tmp_path / f".pe.csv.posenc-{_dead_pid()}-0123abcd.tmp"
    held.write_bytes(b"someone writes this")
    locker = _started(_LOCKER, str(held), says="locked")
    try:
        assert remove_stale(tmp_path) == []
        with atomic_output(tmp_path / "pe.csv", binary=True) as stream:
            stream.write(b"new")
        assert held.exists()
    finally:
        locker.kill()
        locker.wait()
    assert remove_stale(tmp_path) == [held.name]  # its lock went with it


def test_a_writer_holds_its_own_temporary_file_locked(tmp_path):
    with atomic_output(tmp_path / "pe.csv", binary=True) as stream:
        (temp,) = _temps(tmp_path)
        descriptor = os.open(tmp_path / temp, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(descriptor)
        stream.write(b"new")
    assert (tmp_path / "pe.csv").read_bytes() == b"new" and _temps(tmp_path) == []
