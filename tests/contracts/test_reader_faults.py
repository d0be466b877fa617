"""Readers never crash: every odd file (nested, sparse, quantized, complex, meta tensors, tensor subclasses
and other objects in a .pt; symlink loops, FIFOs, devices, directories) gets one line and exit 2 from
``posenc identify`` and ``posenc audit``, and a ValueError from :func:`posenc.porting.load_table`; no message
suggests an unsafe load (``weights_only=False``, allowlisting a class)."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

import posenc
from posenc.cli import main
from posenc.porting import load_table

D = 8
UNSAFE = ("weights_only=False", "weights_only` set to `False", "safe_globals", "trust")


class Subclass(torch.Tensor):
    """A tensor subclass: torch.load(weights_only=True) refuses to rebuild it."""


class Thing:
    """An object that is not a tensor, saved next to one."""


def _table() -> torch.Tensor:
    return torch.from_numpy(posenc.table(16, D))


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():  # "nested tensors are a prototype"
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.zeros(3, D), torch.zeros(4, D)])


def _quantized() -> torch.Tensor:
    with warnings.catch_warnings():  # "quantized tensors are deprecated"
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(_table(), 0.01, 0, torch.qint8)


def _sparse_csr() -> torch.Tensor:
    with warnings.catch_warnings():  # "sparse CSR is in beta"
        warnings.simplefilter("ignore")
        return _table().to_sparse_csr()


#: (file name, what to save in it, a fragment of the one error line)
PT_FILES: list[tuple[str, Callable[[], object], str]] = [
    ("nested.pt", _nested, "holds a nested tensor (rows of different lengths)"),
    ("coo.pt", lambda: _table().to_sparse(), "holds a sparse tensor (sparse_coo)"),
    ("csr.pt", _sparse_csr, "holds a sparse tensor (sparse_csr)"),
    ("quantized.pt", _quantized, "holds a quantized tensor (qint8)"),
    ("complex.pt", lambda: torch.zeros(16, D, dtype=torch.complex64), "holds complex64 values"),
    ("meta.pt", lambda: torch.zeros(16, D, device="meta"), "holds a meta tensor, which holds no values"),
    ("subclass.pt", lambda: _table().as_subclass(Subclass), "Subclass, which is not a tensor"),
    ("object.pt", lambda: {"pe": _table(), "thing": Thing()}, "Thing, which is not a tensor"),
    ("nested_dict.pt", lambda: {"pe": _nested()}, "pe (nested float32"),
]


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert err.startswith("posenc: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and captured.out == "", captured
    assert not any(advice in err for advice in UNSAFE), err
    return err


def _both_commands(path: Path, said: str, capsys: pytest.CaptureFixture[str], *extra: str) -> None:
    for command in ("identify", "audit"):
        assert main([command, str(path), *extra]) == 2, command
        err = _one_line(capsys)
        assert said in err and str(path) in err, err


@pytest.mark.parametrize(("name", "build", "said"), PT_FILES, ids=[f[0] for f in PT_FILES])
def test_odd_tensors_in_a_pt_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, build: Callable[[], object], said: str
) -> None:
    path = tmp_path / name
    torch.save(build(), path)
    _both_commands(path, said, capsys)
    with pytest.raises(ValueError, match=r"tensor|values") as caught:
        load_table(path)
    assert said in str(caught.value) and not any(a in str(caught.value) for a in UNSAFE)


def test_a_nested_tensor_named_by_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch.save({"pe": _nested(), "other": torch.zeros(3)}, tmp_path / "model.pt")
    _both_commands(tmp_path / "model.pt", "tensor 'pe', holds a nested tensor", capsys, "--key", "pe")


def test_a_refused_pickle_says_so_in_posencs_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.save({"pe": _table(), "thing": Thing()}, tmp_path / "object.pt")
    assert main(["identify", str(tmp_path / "object.pt")]) == 2
    err = _one_line(capsys)
    assert "holds objects other than tensors" in err and "will not run code from a file" in err, err
    assert "torch.save(tensor)" in err and "In PyTorch 2.6" not in err, err


def test_complex_safetensors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_file({"pe": np.zeros((16, D), np.complex64)}, str(tmp_path / "c.safetensors"))
    _both_commands(tmp_path / "c.safetensors", "it has: pe (C64 (16, 8))", capsys)
    _both_commands(tmp_path / "c.safetensors", "holds C64 values, not real numbers", capsys, "--key", "pe")


def test_a_symlink_loop_is_not_called_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.symlink(tmp_path / "b.npy", tmp_path / "a.npy")
    os.symlink(tmp_path / "a.npy", tmp_path / "b.npy")
    _both_commands(tmp_path / "a.npy", "is a symlink loop", capsys)
    os.symlink(tmp_path / "c.py", tmp_path / "d.py")
    os.symlink(tmp_path / "d.py", tmp_path / "c.py")
    assert main(["audit", f"{tmp_path / 'c.py'}:f"]) == 2
    err = _one_line(capsys)
    assert "symlink loop" in err and "no such file" not in err, err


def _in_a_thread(work: Callable[[], None]) -> None:
    """``work()``, which must end soon: a reader that opens a FIFO would wait for a writer for ever."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "blocked: the FIFO was opened"
    if errors:
        raise errors[0]


@pytest.mark.parametrize("suffix", [".npy", ".pt", ".safetensors"])
def test_a_fifo_is_refused_without_blocking(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    fifo = tmp_path / f"pipe{suffix}"
    os.mkfifo(fifo)
    _in_a_thread(lambda: _both_commands(fifo, "is not a regular file (a FIFO)", capsys))
    (tmp_path / "pipe.py").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "pipe.py")
    _in_a_thread(lambda: main(["audit", f"{tmp_path / 'pipe.py'}:f"]))
    assert "is not a regular file" in _one_line(capsys)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_devices_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], device: str) -> None:
    _in_a_thread(lambda: _both_commands(Path(device), "is not a regular file (a device)", capsys))
    os.symlink(device, tmp_path / "linked.npy")
    _in_a_thread(lambda: _both_commands(tmp_path / "linked.npy", "is not a regular file (a device)", capsys))


def test_a_directory_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "table.npy").mkdir()
    _both_commands(tmp_path / "table.npy", "is a directory", capsys)
    (tmp_path / "model.py").mkdir()
    assert main(["audit", f"{tmp_path / 'model.py'}:f"]) == 2
    assert "is a directory" in _one_line(capsys)
    with pytest.raises(ValueError, match="is a directory"):
        load_table(tmp_path / "table.npy")


def _recompressed(tmp_path: Path, entry: str, padding: int = 0, tail: bytes = b"") -> Path:
    """A torch.save zip of a table whose entries ending in ``entry`` are deflated (``padding`` zero bytes
    after the record: a 1 MB file inflates to 1 GiB this way), ``tail`` bytes after the archive."""
    import io
    import zipfile

    saved = io.BytesIO()
    torch.save({"pe": _table()}, saved)
    source = zipfile.ZipFile(io.BytesIO(saved.getvalue()))
    path = tmp_path / "table.pt"
    with zipfile.ZipFile(path, "w") as archive:
        for name in source.namelist():
            deflated = name.endswith(entry)
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED if deflated else zipfile.ZIP_STORED
            with archive.open(info, "w") as stream:
                stream.write(source.read(name) + (bytes(padding) if deflated else b""))
    with open(path, "ab") as stream:
        stream.write(tail)
    return path


@pytest.mark.parametrize(
    ("entry", "tail", "said"),
    [
        ("data.pkl", b"", "holds compressed entries ('archive/data.pkl' ...): posenc does not inflate them"),
        ("data/0", b"", "holds compressed entries ('archive/data/0' ...)"),
        # a stray end-of-directory signature: Python's zipfile gives up, torch's reader would still inflate
        ("data/0", b"PK\x05\x06" + bytes(18), "it begins as a zip archive, but its directory cannot be read"),
    ],
)
def test_a_compressed_pt_is_refused_before_torch_inflates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], entry: str, tail: bytes, said: str
) -> None:
    """A 1 MB .pt of deflated entries made ``posenc identify``/``audit`` (and the explorer) inflate 1 GiB
    before any size was known: refused from the zip's directory, before torch reads it."""
    path = _recompressed(tmp_path, entry, padding=4 << 20, tail=tail)
    assert path.stat().st_size < 1 << 16  # 4 MiB of zeros deflate to ~4 KB
    loads = []
    original = torch.load
    try:
        torch.load = lambda *a, **k: loads.append(a) or original(*a, **k)
        for command in ("identify", "audit"):
            assert main([command, str(path)]) == 2
            assert said in capsys.readouterr().err
        with pytest.raises(ValueError, match=r"expected a file written by torch\.save, whose entries are"):
            load_table(path)
    finally:
        torch.load = original
    assert loads == []


def test_a_safetensors_header_past_the_bound_is_refused_unparsed(tmp_path: Path) -> None:
    """A 29 MB header of empty entries took 938 MB to parse; a table file's header is bounded as a model
    folder's is (16 MiB)."""
    path = tmp_path / "table.safetensors"
    path.write_bytes((17 << 20).to_bytes(8, "little") + b" " * (17 << 20))
    with pytest.raises(ValueError, match="header claims 17,825,792 bytes, more than the 16,777,216"):
        load_table(path)


def test_a_data_file_named_like_code_is_read_as_data_and_never_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``pe.py:table.npy`` beside ``pe.py`` is that file (it ran pe.py before); a Name that is no Python
    name is refused before the file runs."""
    monkeypatch.chdir(tmp_path)
    Path("pe.py").write_text("open('RAN', 'w').write('ran')\n")
    np.save("pe.py:table.npy", posenc.table(64, D))
    assert main(["audit", "pe.py:table.npy"]) == 0
    assert main(["audit", "pe.py:table.x"]) == 2
    assert "'table.x' is not a Python name" in capsys.readouterr().err
    assert not Path("RAN").exists()
