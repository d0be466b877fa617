"""load_table: the one table a file holds, checked before it is read, with errors that say what to do.

The readers (:mod:`.readers`) list a file's arrays without reading them; here the table is picked (by its
key, or as the one floating 2-D tensor whose name mentions a position), its dtype, shape and the memory it
needs are checked, and only then is it read. Every failure is a ValueError naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np

from .. import validation
from ..errors import PosencValueError
from .readers import EXPECTED, READERS, Stored, reason

__all__ = ["load_named_table", "load_table"]

_SUFFIXES = ".npy, .pt/.pth or .safetensors"
#: Arrays smaller than this are read without asking how much memory is available.
_CHECKED_BYTES = 64 << 20


def load_table(path: str | Path, *, key: str | None = None) -> np.ndarray:
    """A stored table from ``.npy``, ``.pt``/``.pth`` (a tensor or a state dict) or ``.safetensors``.

    In a state dict, ``key`` names the tensor; without it the single 2-D (or ``(1, L, D)``) floating tensor
    whose name mentions a position is taken; failing that, a rotary embedding's ``inv_freq`` (a name ending
    in ``inv_freq``: the only one, or several equal ones, as old Llama checkpoints hold one per layer); a
    clear error lists the candidates otherwise. When no name mentions a position and none of several 2-D
    tensors has the rows of a table (sines and cosines, or a RoPE cache: its first rows are read alone), the
    error says that the file holds no positional table and what was looked for (M2M100's weights, say:
    such models compute their table, and ``posenc audit MODEL_DIR`` audits them). A 1-D array is returned
    only when it reads as a RoPE ``inv_freq`` (positive, falling frequencies; :func:`.identify` then names
    its RoPE type).

    Only the chosen array is read, once its dtype, its shape and the memory it needs are checked. ``.pt``
    files are read with ``torch.load(weights_only=True)``: tensors and plain containers, never code. A file
    that is empty, cut short, damaged, of another format than its suffix says, or that holds no such table
    raises ValueError naming the file, what is wrong with it and what is expected: a nested, sparse,
    quantized, complex or meta tensor, a file holding other objects (never with advice to load it unsafely),
    and a path that is not a regular file (a directory, a symlink loop, a FIFO or a device, refused before
    it is opened, so that nothing blocks) included.

    >>> import os, tempfile
    >>> import numpy as np
    >>> import posenc
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "pe.npy")
    ...     np.save(path, posenc.table(8, 4))
    ...     stored = load_table(path)
    >>> stored.shape, stored.dtype, bool((stored == posenc.table(8, 4)).all())
    ((8, 4), dtype('float32'), True)
    """
    return load_named_table(path, key=key)[1]


def load_named_table(path: str | Path, *, key: str | None = None) -> tuple[str, np.ndarray]:
    """:func:`load_table`, with the name of the tensor read (``key``, or the one chosen; ``""`` when the file
    holds one array).

    >>> import os, tempfile, numpy as np, posenc
    >>> folder = tempfile.TemporaryDirectory()
    >>> np.save(os.path.join(folder.name, "pe.npy"), posenc.table(8, 4))
    >>> load_named_table(os.path.join(folder.name, "pe.npy"))[0], "(one array: no name)"
    ('', '(one array: no name)')
    >>> folder.cleanup()
    """
    name, values, _ = load_stored_table(path, key=key)
    return name, values


#: The floating types of a file by the names its format gives them (NumPy's, torch's, safetensors').
_STORED_TYPES = {
    "float16": "float16",
    "F16": "float16",
    "bfloat16": "bfloat16",
    "BF16": "bfloat16",
    "float32": "float32",
    "F32": "float32",
    "float64": "float64",
    "F64": "float64",
}


def load_stored_table(
    path: str | Path, *, key: str | None = None, max_bytes: int | None = None
) -> tuple[str, np.ndarray, str]:
    """:func:`load_named_table`, with the dtype the file holds the table in: ``"bfloat16"``, ``"float16"``,
    ``"float32"`` or ``"float64"`` (a bfloat16 tensor, or a torch float16 one, is read as float32, exactly:
    its values are its own), else the file's own name for it (an integer table's). ``max_bytes``: the most
    bytes its values may take as stored, dense; default: the file's own size (a ``.pt`` may hold a view of
    far more values than its bytes, an expanded row: a 6 KB file read as gigabytes).

    >>> import os, tempfile, numpy as np, posenc
    >>> folder = tempfile.TemporaryDirectory()
    >>> np.save(os.path.join(folder.name, "pe.npy"), posenc.table(8, 4, dtype="float16"))
    >>> name, values, stored = load_stored_table(os.path.join(folder.name, "pe.npy"))
    >>> stored, bool((values == posenc.table(8, 4, dtype="float16")).all())
    ('float16', True)
    >>> folder.cleanup()
    """
    path = Path(path)
    if key is not None and not str(key).strip():
        raise PosencValueError(
            "key is an empty string; give the tensor's name, or leave key out: posenc then takes the file's "
            "one positional table, and names the candidates where it holds several",
            parameter="key",
        )
    _check_path(path)
    suffix = path.suffix.lower()
    if suffix not in READERS:
        hint = (
            " (to identify a table of an .npz archive, np.save it alone as .npy)" if suffix == ".npz" else ""
        )
        raise ValueError(f"unknown file type {suffix!r} for {path}; use {_SUFFIXES}{hint}")
    try:
        size = path.stat().st_size
        if size == 0:
            raise ValueError(f"{path} is empty; expected a {suffix} file holding {EXPECTED}")
        if max_bytes is None:
            max_bytes = size  # each format here stores a table whole (a .pt zip is not compressed)
        with contextlib.ExitStack() as stack:
            arrays, others = READERS[suffix](path, stack)
            name, stored = _pick(arrays, others, key, path)
            where = f"{path}, tensor {name!r}," if name else str(path)
            held = _STORED_TYPES.get(stored.dtype, stored.dtype)
            if stored.refusal:  # a meta tensor's shape says nothing of bytes it does not hold
                raise ValueError(f"{where} holds {stored.refusal}")
            dense = math.prod(stored.shape) * stored.itemsize
            if max_bytes is not None and dense > max_bytes:
                raise ValueError(
                    f"{where} holds {stored.dtype} values of shape {stored.shape}: {dense:,} bytes, more "
                    f"than the {max_bytes:,} taken here (the file's own size, or less: a view of a few "
                    "values stored, such as an expanded row, would be read whole); save the table itself"
                )
            if stored.kind == "float" and _vector(stored):
                return name, _inv_freq(stored, where), held
            _check_stored(stored, where)
            return name, _read(stored, where), held
    except OSError as error:
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None


def _check_path(path: Path) -> None:
    """Refuse, before opening it, a path that is not a regular file: missing, a symlink loop, a directory,
    a FIFO (opening one would wait for a writer), a device (/dev/zero never ends) or a socket."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError(f"{path} is a symlink loop: its links lead back to themselves") from None
        raise ValueError(f"cannot read {path}: {error.strerror or error}") from None
    if stat.S_ISDIR(mode):
        what = "a directory"
    elif stat.S_ISFIFO(mode):
        what = "not a regular file (a FIFO)"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "not a regular file (a device)"
    elif not stat.S_ISREG(mode):
        what = "not a regular file"
    else:
        return
    raise ValueError(f"{path} is {what}; name a {_SUFFIXES} file holding {EXPECTED}")


def _pick(
    arrays: dict[str, Stored], others: dict[str, str], key: str | None, path: Path
) -> tuple[str, Stored]:
    """The array ``key`` names; without it, the one floating 2-D table (by its name, when there are more)."""
    if key is not None:
        if key in arrays:
            return key, arrays[key]
        if key in others:
            raise PosencValueError(
                f"{path}: {key!r} is {_a(others[key])}, not a tensor; expected {EXPECTED}", parameter="key"
            )
        if list(arrays) == [""]:
            raise PosencValueError(
                f"{path} holds one array, not a state dict: leave out the key ({key!r})", parameter="key"
            )
        raise PosencValueError(
            f"{path} has no tensor {key!r}; it has: {_names(arrays) or 'none'}", parameter="key"
        )
    if list(arrays) == [""]:
        return "", arrays[""]
    tables = {
        name: stored
        for name, stored in arrays.items()
        if stored.kind == "float" and sum(size != 1 for size in stored.shape) == 2
    }
    named = {k: v for k, v in tables.items() if any(w in k.lower() for w in _POSITIONAL_WORDS)}
    rotary = {k: v for k, v in arrays.items() if k.endswith("inv_freq") and v.kind == "float" and _vector(v)}
    if not named and rotary:
        return _one_inv_freq(rotary, path)
    chosen = named or tables
    if len(chosen) == 1:
        return next(iter(chosen.items()))
    if chosen and not named and not any(_may_be_table(stored) for stored in chosen.values()):
        raise PosencValueError(_no_table(path, chosen), parameter="key")
    if chosen:
        raise PosencValueError(
            f"{path} holds {len(chosen)} candidate tables ({_names(chosen)}); name one with key=",
            parameter="key",
        )
    if not arrays:
        if not others:
            held = "it holds an empty dict or list"
        elif list(others) == [""]:
            held = f"it holds {_a(others[''])}"
        else:
            held = f"its entries: {_names(others, others)}"
        raise PosencValueError(
            f"{path} holds no tensor ({held}); expected {EXPECTED}, alone or in a state dict", parameter="key"
        )
    listing = {name: f"{stored.dtype} {stored.shape}" for name, stored in arrays.items()}
    raise PosencValueError(
        f"{path} holds no floating-point tensor of shape (positions, d_model); it has: "
        f"{_names(arrays, listing)}; name the table with key= if it is one of these",
        parameter="key",
    )


#: Words whose presence in a tensor's name (lower case) makes it the table of a state dict.
_POSITIONAL_WORDS = ("pos", "pe", "sinus", "timing")
#: Rows of a candidate read to tell a table of sines and cosines (or a RoPE cache) from a weight.
_PROBED_ROWS = 64
#: Names of a state dict's token embeddings (Hugging Face's fairseq-style and encoder-decoder models).
_TOKEN_EMBEDDINGS = ("embed_tokens.weight", "shared.weight")


def _may_be_table(stored: Stored) -> bool:
    """Whether the first rows of a floating 2-D tensor read as a positional table: values in [-1, 1], each
    row of sin/cos pairs (its squares summing to d_model / 2, within half a column for odd widths and the
    rounding of half precision) or zero (a padding row), at least two such rows; or a RoPE cos/sin cache.
    True also when its values cannot be looked at cheaply (it stays a candidate)."""
    from .rope_matching import looks_like_rope

    rows, d_model = (size for size in stored.shape if size != 1)
    count = min(rows, _PROBED_ROWS) * d_model
    try:
        if stored.head is not None:
            values = stored.head(count)
        elif math.prod(stored.shape) * stored.itemsize <= _CHECKED_BYTES:
            values = stored.read().reshape(-1)[:count]
        else:
            return True
        values = np.asarray(values, dtype=np.float64).reshape(-1, d_model)
    except Exception:  # unreadable here: load_table's own read reports it, if it is chosen
        return True
    if not np.isfinite(values).all() or np.abs(values).max(initial=0.0) > 1 + 2**-7:
        return False
    squares = np.square(values).sum(axis=1)
    pairs = np.abs(squares - d_model / 2) <= 0.5 + d_model * 2**-7
    if (pairs | ~values.any(axis=1)).all() and pairs.sum() >= 2:
        return True
    return looks_like_rope(values) == "cache"


def _no_table(path: Path, tables: dict[str, Stored]) -> str:
    """The message for a state dict none of whose tensors is a positional table: what was looked for, and
    for a model that computes its positions (no table stored), what to do instead."""
    hint = ""
    if any(name.endswith(_TOKEN_EMBEDDINGS) for name in tables):
        hint = (
            "; models that compute their positions store none (M2M100, NLLB, XGLM, Speech2Text, fairseq; "
            "rotary models such as Llama): audit the model instead, posenc audit MODEL_DIR (the folder "
            "holding its config.json)"
        )
    words = ", ".join(map(repr, _POSITIONAL_WORDS))
    return (
        f"{path} holds no positional table: none of its {len(tables)} floating 2-D tensors "
        f"({_names(tables, most=3)}) is named for positions ({words} in its name) or has the rows of a table "
        "(sines and cosines: values in [-1, 1], each row's squares summing to d_model / 2; or a RoPE cos/sin "
        f"cache), and there is no 1-D inv_freq{hint}; to compare a tensor anyway, name it with key="
    )


def _vector(stored: Stored) -> bool:
    """Whether ``stored`` is 1-D once its axes of size 1 are dropped."""
    return sum(size != 1 for size in stored.shape) == 1


def _read(stored: Stored, where: str) -> np.ndarray:
    try:
        return stored.read()
    except Exception as error:  # a tensor of a layout NumPy cannot take, a damaged zip member, ...
        raise ValueError(f"{where} cannot be read: {reason(error)}") from None


#: The most values a file's RoPE inv_freq vector may hold: head_dim / 2, a few hundred in the field (fitting
#: its base takes time that grows with the square of its length: ~2 s at this many).
MAX_INV_FREQ = 1 << 14


def _inv_freq(stored: Stored, where: str) -> np.ndarray:
    """A 1-D array that reads as a RoPE inv_freq, as stored; anything else is refused as not a table."""
    from .rope_matching import looks_like_rope

    count = math.prod(stored.shape)
    if count > MAX_INV_FREQ:
        raise ValueError(
            f"{where} holds a vector of {count:,} values; a RoPE inv_freq holds head_dim / 2 of them (at "
            f"most {MAX_INV_FREQ:,} here), and a table is 2-D ({EXPECTED})"
        )
    if stored.kind == "float":
        values = _read(stored, where)
        if looks_like_rope(values) == "inv_freq":
            return values
    raise ValueError(
        f"{where} holds an array of shape {stored.shape}; expected {EXPECTED}, with at least 2 positions and "
        "d_model >= 2, or a RoPE inv_freq vector (positive frequencies, each lower than the one before)"
    )


def _one_inv_freq(rotary: dict[str, Stored], path: Path) -> tuple[str, Stored]:
    """The inv_freq of a state dict: the only one, or the first of several equal ones (one per layer)."""
    names = sorted(rotary)
    if len(names) == 1:
        return names[0], rotary[names[0]]
    first = _read(rotary[names[0]], f"{path}, tensor {names[0]!r},")
    for name in names[1:]:
        other = rotary[name]
        if other.shape != rotary[names[0]].shape or not np.array_equal(_read(other, name), first):
            raise ValueError(
                f"{path} holds {len(names)} different RoPE inv_freq buffers ({_names(rotary)}); name one "
                "with key="
            )
    return names[0], rotary[names[0]]


def _a(noun: str) -> str:
    """``noun`` with its indefinite article: 'an int', 'a str'."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _names(entries: dict[str, Any], details: dict[str, str] | None = None, most: int = 20) -> str:
    """Sorted names (with their details), at most ``most`` of them, then how many more there are."""
    names = sorted(entries)
    shown = [f"{name} ({details[name]})" if details else name for name in names[:most]]
    more = f", and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(shown) + more


def _check_stored(stored: Stored, where: str) -> None:
    """Refuse, before reading it, an array that is not a table of real numbers or that memory cannot hold
    (as stored, and as the float64 copy identify compares)."""
    if stored.refusal:
        raise ValueError(f"{where} holds {stored.refusal}")
    if stored.kind is None:
        raise ValueError(
            f"{where} holds {stored.dtype} values, not real numbers{stored.hint}; expected {EXPECTED}"
        )
    shape = stored.shape
    if len(shape) < 2 or shape[-1] < 2 or math.prod(shape[:-1]) < 2:
        raise ValueError(
            f"{where} holds an array of shape {shape}; expected {EXPECTED}, with at least 2 positions and "
            "d_model >= 2"
        )
    needed = math.prod(shape) * (stored.itemsize + 8)
    available = validation.available_memory() if needed >= _CHECKED_BYTES else None
    if available is not None and needed > available:
        raise ValueError(
            f"{where} holds {stored.dtype} values of shape {shape}: reading and comparing them needs "
            f"{needed / 2**30:.1f} GiB, but only {available / 2**30:.1f} GiB of memory is available"
        )
