"""Every file posenc writes appears whole or not at all: :mod:`posenc.atomic` itself, and each
writer that uses it (``posenc table/rope --output``, :func:`posenc.analysis.plot.save`,
:meth:`AuditReport.to_html`) with its write failing midway, in this process. The same faults against a
real ``posenc`` process (signals, ``ulimit -f``, closed pipes) are in tests/cli/test_fault_injection.py."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc
import posenc.atomic
from posenc.atomic import atomic_output, atomic_save
from posenc.cli.errors import describe
from posenc.cli.formats import Grid, write_json
from tests.support.cli_cases import run

OLD = b"old content\n\x00\xff kept byte for byte\n"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _leftovers(folder: Path, *keep: str) -> list[str]:
    """The names in ``folder`` other than ``keep``: temporary files left behind, if any."""
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "pe.csv"
    path.write_bytes(OLD)
    path.chmod(0o640)
    return path


# --- the helper ------------------------------------------------------------------------------------


def test_success_replaces_the_file_and_keeps_its_mode(old_file: Path) -> None:
    inode = old_file.stat().st_ino
    with atomic_output(old_file, binary=False) as stream:
        stream.write("pos,0 sin ω0\n")
        assert old_file.read_bytes() == OLD  # nothing changes until the block ends
    assert old_file.read_text(encoding="utf-8") == "pos,0 sin ω0\n"
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o640
    assert old_file.stat().st_ino != inode  # renamed over, not rewritten in place
    assert _leftovers(old_file.parent, "pe.csv") == []


def test_a_new_file_gets_the_mode_open_gives(tmp_path: Path) -> None:
    path = tmp_path / "new.bin"
    with atomic_output(path, binary=True) as stream:
        stream.write(b"\x01\x02")
    assert path.read_bytes() == b"\x01\x02"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()


@pytest.mark.parametrize(
    "failure", [RuntimeError("boom"), KeyboardInterrupt(), OSError(errno.ENOSPC, "full")]
)
def test_an_exception_inside_leaves_the_old_bytes_and_no_temp_file(
    old_file: Path, failure: BaseException
) -> None:
    with pytest.raises(type(failure)), atomic_output(old_file, binary=True) as stream:
        stream.write(b"x" * 100_000)  # past the buffer: some of it reached the temporary file
        temps = _leftovers(old_file.parent, "pe.csv")
        assert len(temps) == 1 and temps[0].startswith(".pe.csv.posenc-") and temps[0].endswith(".tmp")
        raise failure
    assert old_file.read_bytes() == OLD
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o640
    assert _leftovers(old_file.parent, "pe.csv") == []


def test_a_write_error_names_the_target_not_the_temp_file(old_file: Path) -> None:
    with pytest.raises(OSError) as caught, atomic_output(old_file, binary=False):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))  # as a write past `ulimit -f` raises it
    assert caught.value.errno == errno.EFBIG
    assert caught.value.filename == str(old_file)
    assert describe(caught.value) == f"cannot write {old_file}: File too large"
    assert old_file.read_bytes() == OLD


def test_a_failing_flush_does_not_hide_the_error(old_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync fails (as on a full disk at the last moment): the OSError names the target, nothing is left."""

    def no_fsync(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(posenc.atomic.os, "fsync", no_fsync)
    with pytest.raises(OSError) as caught, atomic_output(old_file, binary=True) as stream:
        stream.write(b"new")
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(old_file))
    assert old_file.read_bytes() == OLD
    assert _leftovers(old_file.parent, "pe.csv") == []


@pytest.mark.parametrize("where", ["a folder", "inside a missing folder"])
def test_an_impossible_target_is_an_oserror_naming_it(tmp_path: Path, where: str) -> None:
    target = tmp_path / "folder" if where == "a folder" else tmp_path / "missing" / "pe.csv"
    if where == "a folder":
        target.mkdir()
    with pytest.raises(OSError) as caught, atomic_output(target, binary=False) as stream:
        stream.write("never")
    assert caught.value.filename == str(target)
    assert caught.value.errno in (errno.EISDIR, errno.ENOENT)
    assert _leftovers(tmp_path, "folder") == []


@pytest.mark.parametrize(
    "name", ["a" * 251 + ".svg", "é" * 125 + ".csv"]
)  # 255 bytes: the longest a folder takes
def test_a_name_of_the_longest_length_is_written(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # the temporary name adds ~30 bytes to NAME: it is cut short, not refused as "File name too long"
    with atomic_output(tmp_path / name, binary=False) as stream:
        stream.write("x")
    assert _leftovers(tmp_path) == [name] and (tmp_path / name).read_text() == "x"
    code, _, err = run(
        capsys, "plot", "dot-product", "--length", "2", "-o", str(tmp_path / ("b" * 251 + ".svg"))
    )
    assert code == 0, err


def test_a_link_is_followed_and_kept(old_file: Path) -> None:
    link = old_file.parent / "link.csv"
    link.symlink_to(old_file.name)
    with atomic_output(link, binary=True) as stream:
        stream.write(b"through the link")
    assert link.is_symlink()
    assert old_file.read_bytes() == b"through the link"


def test_a_device_is_written_not_replaced() -> None:
    """``--output /dev/null``: a rename would replace the device (as root) with a regular file."""
    with atomic_output("/dev/null", binary=False) as stream:
        stream.write("discarded")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_atomic_save_returns_what_the_writer_returns(tmp_path: Path) -> None:
    path = tmp_path / "a.npy"
    assert atomic_save(path, lambda stream: np.save(stream, np.arange(3))) is None
    np.testing.assert_array_equal(np.load(path), np.arange(3))


# --- the command line, in this process ------------------------------------------------------------


@contextlib.contextmanager
def _fails_midway(path: Any, **options: Any) -> Iterator[Any]:
    """atomic_output whose file takes the first 1000 bytes written, then fails as a full disk does."""
    with _REAL_ATOMIC_OUTPUT(path, **options) as stream:
        yield _FullDisk(stream)


class _FullDisk:
    def __init__(self, stream: Any) -> None:
        self.stream, self.room = stream, 1000

    def write(self, data: Any) -> int:
        if not isinstance(data, str):
            data = memoryview(data).cast("B")  # bytes of any buffer (an npy chunk is 2-D)
        if len(data) > self.room:
            self.stream.write(data[: self.room])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.stream.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


_REAL_ATOMIC_OUTPUT = atomic_output


@pytest.mark.parametrize("fmt", ["text", "csv", "json", "npy"])
def test_table_on_a_full_disk_keeps_the_old_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, old_file: Path, fmt: str
) -> None:
    monkeypatch.setattr("posenc.cli.table.atomic_output", _fails_midway)
    code, out, err = run(capsys, "table", "2000", "16", "--format", fmt, "--output", str(old_file))
    assert (code, out) == (2, "")
    assert err == f"posenc: error: cannot write {old_file}: No space left on device\n"
    assert old_file.read_bytes() == OLD
    assert _leftovers(old_file.parent, "pe.csv") == []


def test_table_output_replaces_and_keeps_the_mode(capsys: pytest.CaptureFixture[str], old_file: Path) -> None:
    code, _, err = run(capsys, "table", "3", "4", "--format", "csv", "--output", str(old_file))
    assert (code, err) == (0, "")
    assert old_file.read_text(encoding="utf-8").startswith("pos,0 sin ω0")
    assert stat.S_IMODE(old_file.stat().st_mode) == 0o640
    assert _leftovers(old_file.parent, "pe.csv") == []


_CONFIG = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_attention_heads": 4,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
}


@pytest.mark.parametrize("fmt", ["csv", "npy"])
def test_rope_on_a_full_disk_keeps_the_old_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, old_file: Path, fmt: str
) -> None:
    config = old_file.parent / "config.json"
    config.write_text(json.dumps(_CONFIG))
    monkeypatch.setattr("posenc.cli.table.atomic_output", _fails_midway)
    code, _, err = run(
        capsys, "rope", str(config), "--positions", "0:64", "--format", fmt, "-o", str(old_file)
    )
    assert code == 2
    assert err == f"posenc: error: cannot write {old_file}: No space left on device\n"
    assert old_file.read_bytes() == OLD
    assert _leftovers(old_file.parent, "pe.csv", "config.json") == []


# --- json never writes NaN or Infinity ------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_json_refuses_a_non_finite_value_before_writing(bad: float) -> None:
    values = np.zeros((5, 3), np.float32)
    values[3, 1] = bad
    stream = io.StringIO()
    with pytest.raises(ValueError, match=r"cannot write (nan|inf|-inf) \(row pos 3, column 'b'\)"):
        write_json(stream, Grid("pos", range(5), ["a", "b", "c"], values), {"dtype": "float32"}, None)
    assert stream.getvalue() == ""  # refused before the first byte


def test_json_refuses_a_non_finite_header_value() -> None:
    stream = io.StringIO()
    with pytest.raises(ValueError, match="cannot write inf \\('attention_scaling'\\)"):
        write_json(stream, Grid("pos", range(1), ["a"], np.zeros((1, 1))), {"attention_scaling": np.inf}, 3)
    assert stream.getvalue() == ""


def test_json_of_finite_values_still_reads_back() -> None:
    stream = io.StringIO()
    write_json(stream, Grid("pos", range(2), ["a"], np.array([[0.5], [-1.0]])), {"base": 10000.0}, None)
    assert json.loads(stream.getvalue())["values"] == [[0.5], [-1.0]]


# --- figures and the audit report -----------------------------------------------------------------


@pytest.fixture(scope="module")
def figure() -> Any:
    from posenc.analysis.plot import heatmap

    return heatmap(length=8, d_model=16)


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_save_failing_midway_keeps_the_old_figure(
    figure: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, suffix: str
) -> None:
    from posenc.analysis import plot

    path = tmp_path / f"fig{suffix}"
    path.write_bytes(OLD)
    real = plot.atomic_save
    monkeypatch.setattr(plot, "atomic_save", lambda p, write: real(p, lambda s: write(_FullDisk(s))))
    with pytest.raises(OSError) as caught:
        plot.save(figure, path)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, path.name) == []
    monkeypatch.undo()
    assert plot.save(figure, tmp_path / f"new{suffix}").stat().st_size > 1000  # unpatched: whole


def test_save_reports_the_write_error_that_matplotlib_hides(
    figure: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """matplotlib's PDF writer, failing to write, fails again on closing with an AttributeError: save()
    raises the OSError itself, naming the file (``posenc plot -o x.pdf`` on a full disk: one line)."""
    from posenc.analysis import plot

    def savefig(self: Any, stream: Any, **options: Any) -> None:
        stream.write(b"%PDF-1.4 partial")
        try:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        finally:
            raise AttributeError("'Stream' object has no attribute 'pos'")

    path = tmp_path / "fig.pdf"
    path.write_bytes(OLD)
    monkeypatch.setattr(type(figure), "savefig", savefig)
    with pytest.raises(OSError) as caught:
        plot.save(figure, path)
    assert describe(caught.value) == f"cannot write {path}: File too large"
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, "fig.pdf") == []


def test_to_html_failing_midway_keeps_the_old_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from posenc.auditor import audit

    report = audit(posenc.table(300, 16), samples=16)
    path = tmp_path / "r.html"
    path.write_bytes(OLD)
    monkeypatch.setattr(posenc.atomic, "atomic_output", _fails_midway)
    with pytest.raises(OSError) as caught:
        report.to_html(path)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(path))
    assert path.read_bytes() == OLD
    assert _leftovers(tmp_path, "r.html") == []
    monkeypatch.undo()
    assert report.to_html(path).read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")


def test_a_link_another_user_owns_in_a_shared_sticky_folder_is_not_written_through(tmp_path: Path) -> None:
    """posenc resolves a link itself to replace the file it names, so the kernel's protected_symlinks never
    applied: another user's link in /tmp could make it overwrite any of the caller's files. Refused, as
    the kernel refuses to follow it; the caller's own link there is followed."""
    shared, home = tmp_path / "shared", tmp_path / "home"
    shared.mkdir()
    home.mkdir()
    shared.chmod(0o1777)
    precious = home / ".bashrc"
    precious.write_text("export IMPORTANT=1\n")
    (shared / "pe.csv").symlink_to(precious)
    os.lchown(shared / "pe.csv", 12345, 12345)  # the tests run as root (the CI's contract)
    with (
        pytest.raises(PermissionError, match="owned by another user"),
        atomic_output(shared / "pe.csv", binary=False) as f,
    ):
        f.write("0,1\n")
    assert precious.read_text() == "export IMPORTANT=1\n"
    (shared / "mine.csv").symlink_to(precious)  # the caller's own link: followed, the file replaced
    with atomic_output(shared / "mine.csv", binary=False) as f:
        f.write("0,1\n")
    assert precious.read_text() == "0,1\n" and (shared / "mine.csv").is_symlink()
