"""Atomic file output: every file posenc writes appears whole or not at all.

:func:`atomic_output` yields a temporary file in the target's folder, named ``.NAME.posenc-PID-XXXXXXXX.tmp``
(PID: the writing process); when the block ends normally the file is flushed, ``os.fsync``'d and renamed
over the target (``os.replace``, atomic on POSIX and Windows). On any exception (a full disk, ``ulimit -f``,
Ctrl-C, a signal that raises) the temporary file is removed and the old target is left byte for byte as it
was. A process killed outright (SIGKILL, a power cut) leaves the old target too, and at most a stale
temporary file, recognisable by its name: the next write into the same folder removes it
(:func:`remove_stale`: only files of exactly this pattern whose writer process is gone, and that no live
process holds locked; never another live writer's). :func:`atomic_save` does the same for a writer that
takes a file object (``figure.savefig(stream, format=...)``, ``np.save``).

A new file gets the mode ``open()`` would give it (0o666 less the umask); a file replaced keeps its mode.
A symbolic link is followed: the file it points to is replaced, the link stays. A target that exists and is
not a regular file (``/dev/null``, a FIFO, a terminal) is written directly, as ``open()`` would: a rename
over it would replace the device. Every OSError raised names the target (``error.filename``), not the
temporary file. Standard library only.

>>> import pathlib, tempfile
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> target = folder / "pe.csv"
>>> with atomic_output(target, binary=False) as stream:
...     _ = stream.write("pos,0 sin ω0\\n0,0.0\\n")
>>> target.read_text(encoding="utf-8")
'pos,0 sin ω0\\n0,0.0\\n'
>>> try:
...     with atomic_output(target, binary=False) as stream:
...         _ = stream.write("half a tab")
...         raise RuntimeError("the disk is full")
... except RuntimeError:
...     pass
>>> target.read_text(encoding="utf-8")  # the old content, whole
'pos,0 sin ω0\\n0,0.0\\n'
>>> sorted(p.name for p in folder.iterdir())  # no temporary file left
['pe.csv']
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

__all__ = ["TEMP_PATTERN", "TEMP_SUFFIX", "atomic_output", "atomic_save", "remove_stale", "temp_name"]

TEMP_SUFFIX = ".tmp"  # temporary files are named .NAME.posenc-PID-XXXXXXXX.tmp, beside NAME
_TEMP_MARK = ".posenc-"
#: The longest file name, in bytes, that the usual file systems take (ext4, XFS, btrfs, tmpfs, APFS, NTFS).
NAME_MAX = 255
#: The names of posenc's temporary files, and nothing else: the target's name, the writer's process id
#: and 8 random hex digits (group "pid": the writer).
TEMP_PATTERN = re.compile(r"\.(?P<name>.+)\.posenc-(?P<pid>[1-9][0-9]{0,9})-[0-9a-f]{8}\.tmp")
_T = TypeVar("_T")


def temp_name(target: str | os.PathLike[str]) -> str:
    """A fresh temporary file name beside ``target``: ``.NAME.posenc-PID-XXXXXXXX.tmp`` in its folder, PID
    this process's id (NAME cut short where the whole would pass :data:`NAME_MAX` bytes).

    >>> import os
    >>> name = temp_name("out/pe.csv")
    >>> match = TEMP_PATTERN.fullmatch(os.path.basename(name))
    >>> match["name"], int(match["pid"]) == os.getpid(), os.path.dirname(name)
    ('pe.csv', True, 'out')
    """
    folder, name = os.path.split(os.fspath(target))
    mark = f"{_TEMP_MARK}{os.getpid()}-{secrets.token_hex(4)}{TEMP_SUFFIX}"
    while len(os.fsencode(f".{name}{mark}")) > NAME_MAX and len(name) > 1:  # a long NAME is cut: what a
        name = name[:-1]  # folder takes is NAME_MAX bytes a name, and NAME itself is written in the end
    return os.path.join(folder, f".{name}{mark}")


def remove_stale(folder: str | os.PathLike[str]) -> list[str]:
    """Remove the temporary files that writers killed outright left in ``folder``; return their names.

    A file is removed only when its name is exactly posenc's (:data:`TEMP_PATTERN`), the process named in
    it is gone (``os.kill(pid, 0)`` raises ProcessLookupError: a live process, or one of another user, is
    left alone, and so is this process), and no process holds the file locked (each writer holds a
    ``flock`` on its temporary file while it writes: a writer in another PID namespace sharing the folder
    is still seen). Best effort and silent: a folder that cannot be listed, a file already gone or not
    removable, is left as it is. POSIX only (elsewhere nothing is removed: Windows has no signal 0).

    >>> import os, subprocess, sys, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    >>> dead = int(child.stdout)  # a process that has ended (and was waited for)
    >>> for pid in (dead, os.getpid()):
    ...     open(os.path.join(folder, f".pe.csv.posenc-{pid}-0123abcd.tmp"), "w").close()
    >>> remove_stale(folder) == [f".pe.csv.posenc-{dead}-0123abcd.tmp"]  # this process's file stays
    True
    >>> import shutil; shutil.rmtree(folder)
    """
    if os.name != "posix":
        return []
    removed = []
    try:
        entries = list(os.scandir(folder or "."))
    except OSError:
        return []
    for entry in entries:
        match = TEMP_PATTERN.fullmatch(entry.name)
        if match is None or not _gone(int(match["pid"])):
            continue
        with contextlib.suppress(OSError):
            if not entry.is_file(follow_symlinks=False) or not _unlocked_unlink(entry.path):
                continue
            removed.append(entry.name)
    return removed


def _gone(pid: int) -> bool:
    """Whether no process ``pid`` exists (a zombie, ended but not yet waited for, still exists)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):  # another user's process; a pid out of range
        return False
    return False


def _unlocked_unlink(path: str) -> bool:
    """Remove ``path`` if no process holds it locked (taking the lock first, so no writer can be between);
    True when removed."""
    import fcntl

    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: a live writer
            return False
        os.unlink(path)
        return True
    finally:
        os.close(descriptor)


def _hold(descriptor: int) -> None:
    """Lock a new temporary file for as long as its writer has it open (see :func:`remove_stale`)."""
    if os.name == "posix":
        import fcntl

        with contextlib.suppress(OSError):  # a file system without locks: the pid in the name still holds
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)


#: Links followed at most when checking who owns them (the kernel gives up on a path after 40).
_MAX_LINKS = 40


def _protected_links(target: str) -> None:
    """Refuse to write through a link another user owns in a shared sticky folder (``/tmp``), as Linux's
    ``fs.protected_symlinks`` refuses to follow one: posenc resolves the link itself to replace the file it
    names, so the kernel's rule would not apply, and another user's link could make it overwrite any of
    the caller's files. A link of the caller's own, or of the folder's owner, is followed."""
    here = target
    for _ in range(_MAX_LINKS):
        try:
            link = os.lstat(here)
        except OSError:
            return
        if not stat.S_ISLNK(link.st_mode):
            return
        folder = os.path.dirname(here) or "."
        try:
            where = os.stat(folder)
        except OSError:
            return
        shared = where.st_mode & stat.S_ISVTX and where.st_mode & stat.S_IWOTH
        if shared and link.st_uid not in (os.geteuid(), where.st_uid):
            raise PermissionError(
                errno.EACCES,
                f"{here} is a link owned by another user (uid {link.st_uid}) in a shared sticky folder; "
                "posenc does not write through it (as the kernel's protected_symlinks does not follow it): "
                "write to a path of your own",
                target,
            )
        here = os.path.join(folder, os.readlink(here))


@contextlib.contextmanager
def atomic_output(
    path: str | os.PathLike[str], *, binary: bool, encoding: str = "utf-8"
) -> Iterator[IO[Any]]:
    """Yield a file object to write ``path``'s new content into; it replaces ``path`` only if the block
    ends normally, after a flush and an ``os.fsync``. See the module's docstring."""
    target = os.fspath(path)
    _protected_links(target)
    try:
        existing: os.stat_result | None = os.stat(target)  # follows a link: the file it names
    except FileNotFoundError:
        existing = None
    except OSError as error:  # a loop of links, a folder not searchable, a name too long
        raise _naming(error, target) from error
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), target)
    if existing is not None and not stat.S_ISREG(existing.st_mode):  # /dev/null, a FIFO: written directly
        try:
            with open(target, "wb") if binary else open(target, "w", encoding=encoding) as stream:
                yield stream
        except OSError as error:
            if _ours(error, target):
                raise _naming(error, target) from error
            raise
        return
    real = os.path.realpath(target) if os.path.islink(target) else target  # replace the file, not the link
    remove_stale(os.path.dirname(real))  # what writers killed outright left here
    stream, temp = _create_temp(real, target, binary=binary, encoding=encoding)
    try:
        yield stream
        stream.flush()
        _fsync(stream.fileno())
        stream.close()
        if existing is not None:
            with contextlib.suppress(OSError):  # best effort, as on a file system without modes
                os.chmod(temp, stat.S_IMODE(existing.st_mode))
        os.replace(temp, real)
    except BaseException as error:
        with contextlib.suppress(OSError, ValueError):  # a failing flush must not hide the error itself
            stream.close()
        with contextlib.suppress(OSError):
            os.unlink(temp)
        if isinstance(error, OSError) and _ours(error, temp):
            raise _naming(error, target) from error
        raise


def atomic_save(path: str | os.PathLike[str], write: Callable[[IO[bytes]], _T]) -> _T:
    """Call ``write(stream)`` with a binary file object for ``path`` (see :func:`atomic_output`) and return
    what it returns: ``atomic_save(path, lambda f: figure.savefig(f, format="pdf"))``.

    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.bin"
    >>> atomic_save(target, lambda stream: stream.write(b"\\x00\\x01"))
    2
    >>> target.read_bytes()
    b'\\x00\\x01'
    """
    with atomic_output(path, binary=True) as stream:
        return write(stream)


def _create_temp(real: str, target: str, *, binary: bool, encoding: str) -> tuple[IO[Any], str]:
    """Create a new temporary file beside ``real`` with mode 0o666 (the umask applies, as for open()):
    (its file object, its name); an OSError names ``target``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temp = temp_name(real)
        try:
            descriptor = os.open(temp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as error:
            raise _naming(error, target) from error
        try:
            _hold(descriptor)
            stream = os.fdopen(descriptor, "wb") if binary else os.fdopen(descriptor, "w", encoding=encoding)
        except BaseException:
            os.close(descriptor)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        return stream, temp
    raise FileExistsError(errno.EEXIST, "no free temporary file name", target)


def _fsync(descriptor: int) -> None:
    """``os.fsync``, except on a file system that does not do it (EINVAL, ENOTSUP): the rename still holds."""
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in (errno.EINVAL, getattr(errno, "ENOTSUP", errno.EINVAL)):
            raise


def _naming(error: OSError, target: str) -> OSError:
    """``error`` again (the same class, by its errno), naming ``target`` as the file it failed on."""
    if error.errno is None:
        return error
    return OSError(error.errno, error.strerror or os.strerror(error.errno), target)


def _ours(error: OSError, name: str) -> bool:
    """Whether ``error`` is a failure on the file being written (it names no file, or that one), not a
    closed pipe or a file that the writer read."""
    return not isinstance(error, BrokenPipeError) and error.filename in (None, name)
