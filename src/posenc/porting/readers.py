"""Readers of the files a stored table comes in: .npy, PyTorch .pt/.pth/.bin and .safetensors.

Each reader lists a file's arrays from its header or its container, as :class:`Stored` entries, without
reading any values: the caller (:func:`.load.load_table`) picks one, checks it, and only then reads it.
PyTorch files are read with ``torch.load(weights_only=True)``, which runs no code from the file; torch and
safetensors are imported only when a file of theirs is read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import pickle
import re
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["EXPECTED", "MAX_HEADER_BYTES", "READERS", "Stored", "reason"]

#: What load_table reads, in the words of its messages.
EXPECTED = "a table of shape (positions, d_model) of real numbers"

#: Bytes of a safetensors header read at most: 16 MiB (the safetensors library takes up to 100 MB; a shard of
#: a thousand tensors has ~200 KB, and a 99 MB header of junk entries took 1.4 GB to parse).
MAX_HEADER_BYTES = 16 << 20

#: How deep the dicts and lists of a .pt file may nest, and how many entries they may hold in all. A state
#: dict nests a few levels and holds thousands; a crafted file whose dicts contain or share each other is
#: refused instead of walked for ever (each container is walked once).
_MAX_DEPTH = 64
_MAX_ENTRIES = 1_000_000


@dataclasses.dataclass(frozen=True)
class Stored:
    """One array of a file before it is read: its shape, its dtype as the file names it, its kind ("float",
    "int", or None: not real numbers), its bytes per value, and how to read it; ``refusal``: why it is not
    read at all, in words that follow "holds" (a nested, sparse, quantized or meta tensor), else ""."""

    shape: tuple[int, ...]
    dtype: str
    kind: str | None
    itemsize: int
    read: Callable[[], np.ndarray]
    hint: str = ""  # what to do about a dtype that is not read
    refusal: str = ""
    #: ``head(count)``: the first ``count`` values in row-major order, flat, read alone (a few rows of a large
    #: tensor, without reading the rest), as ``read`` would give them; None where only ``read`` reads
    head: Callable[[int], np.ndarray] | None = None


def reason(error: BaseException) -> str:
    """The first line of an error's message (a library's long explanations cut), or what its type says."""
    if isinstance(error, EOFError):
        return "the file ends before its data does"
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    end = text.find(". ", 40)  # the first sentence of a long explanation
    text = text[: end + 1] if end > 0 else text
    return text if len(text) <= 200 else text[:197] + "..."


def npy_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, Stored], dict[str, str]]:
    """The array of a .npy file, from its header (the data is read only by ``read``)."""
    del stack
    fmt = np.lib.format
    expected = f"expected a file written by np.save holding {EXPECTED}"
    with open(path, "rb") as stream:
        try:
            version = fmt.read_magic(stream)
        except ValueError:
            raise ValueError(
                f"{path} is not a .npy file: it does not begin with the .npy signature; {expected}"
            ) from None
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise ValueError(
                f"{path} claims .npy format version {version[0]}.{version[1]}, which is not 1.0, 2.0 or 3.0; "
                f"{expected}"
            )
        try:  # 2.0 and 3.0 differ only in the header's encoding, and a header of numbers is ASCII
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran_order, dtype = read_header(stream)
        except Exception as error:
            raise ValueError(f"{path} has a damaged .npy header ({reason(error)}); {expected}") from None
        offset = stream.tell()
    count = math.prod(shape)
    if dtype.hasobject:
        hint = " (an array of pickled Python objects, which is never unpickled)"
        return {"": Stored(shape, "object", None, dtype.itemsize, lambda: np.empty(0), hint)}, {}
    size = count * dtype.itemsize
    present = path.stat().st_size - offset
    if present < size:
        raise ValueError(
            f"{path} is cut short: its header declares {dtype} values of shape {shape}, {size:,} bytes, but "
            f"only {present:,} follow; the file was not completely written or copied"
        )

    def read() -> np.ndarray:
        with open(path, "rb") as stream:
            values = np.fromfile(stream, dtype=dtype, count=count, offset=offset)
        return values.reshape(shape, order="F" if fortran_order else "C")

    kind = {"f": "float", "i": "int", "u": "int"}.get(dtype.kind)
    hint = ""
    if dtype.kind == "V" and dtype.itemsize == 2:
        hint = (
            " (raw 2-byte values, bfloat16 stored without its NumPy type: save it as float32 to identify it)"
        )
    return {"": Stored(shape, str(dtype), kind, dtype.itemsize, read, hint)}, {}


def torch_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, Stored], dict[str, str]]:
    """The tensors of a .pt file, read with ``torch.load(weights_only=True)`` (memory-mapped when it is a
    zip archive, so that only the chosen tensor is converted); the other entries by their type."""
    del stack
    try:
        import torch
    except ImportError:
        raise ImportError("reading .pt files needs PyTorch: pip install 'posenc[torch]'") from None
    archive = _stored_zip(path)  # before torch reads a byte of it: no entry is inflated
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols; only the outcome matters here
            warnings.simplefilter("ignore")
            loaded = torch.load(path, map_location="cpu", weights_only=True, mmap=archive)
    except OSError:
        raise
    except pickle.UnpicklingError as error:
        raise ValueError(_refused(path, error)) from None
    except Exception as error:  # EOFError (cut short), RuntimeError (a damaged zip archive), ...
        if _UNSAFE_ADVICE.search(str(error)):  # torch's weights-only refusal, raised as another type
            raise ValueError(_refused(path, error)) from None
        raise ValueError(
            f"{path} is not a readable PyTorch file ({reason(error)}); expected {EXPECTED} saved with "
            "torch.save, alone or in a state dict"
        ) from None
    arrays, others = {}, {}
    for name, value in _flatten(loaded, path).items():
        if isinstance(value, torch.Tensor):
            arrays[name] = _torch_stored(value, torch)
        else:
            others[name] = type(value).__name__
    return arrays, others


#: The signature torch tells a zip archive by (its first four bytes), whatever Python's zipfile says; that
#: of a zip's end record, which lies within its last 64 KiB + 22 bytes (a comment is at most 64 KiB).
_ZIP_SIGNATURE, _END_SIGNATURE, _END_SEARCH = b"PK\x03\x04", b"PK\x05\x06", (1 << 16) + 22


def _stored_zip(path: Path) -> bool:
    """Whether ``path`` is a zip archive (torch's test: its signature), checked to hold its entries stored,
    as torch.save writes them: an archive Python's zipfile cannot read whole, an entry compressed (which
    torch would inflate in memory before any size is known: a 1 MB file of 1 GiB), or entries larger in all
    than the file is refused, naming the path."""
    with open(path, "rb") as stream:
        if stream.read(4) != _ZIP_SIGNATURE:
            return False
        size = os.fstat(stream.fileno()).st_size
        stream.seek(max(0, size - _END_SEARCH))
        ends = stream.read().count(_END_SIGNATURE)
    written = "expected a file written by torch.save, whose entries are stored, not compressed"
    try:
        if ends != 1:  # each zip reader must find the one directory Python reads (a stray end: another)
            raise zipfile.BadZipFile(f"{ends} end-of-directory records where a zip has one")
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
        if not entries:
            raise zipfile.BadZipFile("its directory lists no entries")
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise ValueError(
            f"{path} is not a readable PyTorch file (it begins as a zip archive, but its directory cannot be "
            f"read: {reason(error)}); {written}"
        ) from None
    packed = [e.filename for e in entries if e.compress_type != zipfile.ZIP_STORED]
    if packed:
        raise ValueError(
            f"{path} holds compressed entries ({packed[0]!r} ...): posenc does not inflate them, since "
            f"what they hold is known only once they are; {written}"
        )
    declared = sum(e.file_size for e in entries)
    if declared > size:
        raise ValueError(f"{path} declares {declared:,} bytes of entries in a file of {size:,}; {written}")
    return True


def _torch_stored(tensor: Any, torch: Any) -> Stored:
    """A tensor as a Stored: float64, int32 and int64 are read as float64 (int32 exactly: float32 would round
    integers past 2**24), any other real dtype as float32 (exactly); a nested, sparse,
    quantized or meta tensor (or one that cannot even be inspected) is refused, with what to do."""
    try:
        refusal = _torch_refusal(tensor, torch)
        shape = () if tensor.is_nested else tuple(tensor.shape)
        dtype = tensor.dtype
    except Exception as error:  # a tensor whose layout or subclass torch cannot describe
        refusal = f"a {type(tensor).__name__} that cannot be inspected ({reason(error)}), not {EXPECTED}"
        return Stored((), "unknown", None, 1, lambda: np.empty(0), refusal=refusal)
    if refusal:
        name = f"{_torch_layout(tensor, torch)} {str(dtype).removeprefix('torch.')}"
        return Stored(shape, name, None, dtype.itemsize, lambda: np.empty(0), refusal=refusal)
    integers = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
    kind = "float" if dtype.is_floating_point else "int" if dtype in integers else None
    target = torch.float64 if dtype in (torch.float64, torch.int32, torch.int64) else torch.float32

    def read() -> np.ndarray:
        return tensor.detach().to(target).numpy()

    def head(count: int) -> np.ndarray:  # a view of the (memory-mapped) tensor, then a copy of its start
        return tensor.detach().reshape(-1)[:count].to(target).numpy()

    return Stored(
        tuple(tensor.shape), str(dtype).removeprefix("torch."), kind, dtype.itemsize, read, head=head
    )


def host_values(array: Any) -> Any:
    """``array`` as NumPy reads it; a torch tensor (a parameter, one on a device, a bfloat16 one) as a NumPy
    copy of its values, detached, on the CPU, bfloat16 widened to float32 (exactly); a tensor that holds no
    dense values (meta, nested, sparse, quantized) is a ValueError saying what it is."""
    if not type(array).__module__.startswith("torch") or not hasattr(array, "detach"):
        return np.asarray(array)
    import torch

    refusal = _torch_refusal(array, torch)
    if refusal:
        raise ValueError(f"table is {refusal.split(', not ')[0]}; give a table of values on the CPU")
    tensor = array.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    try:
        return tensor.numpy().copy()
    except TypeError as error:  # a dtype NumPy has no type for
        raise TypeError(f"table must hold real numbers NumPy reads; got {tensor.dtype} ({error})") from None


def _torch_refusal(tensor: Any, torch: Any) -> str:
    """Why a loaded tensor is not read (words that follow "holds"), or "" when it is a dense tensor."""
    not_a_table = f"not {EXPECTED}"
    if tensor.is_nested:
        return (
            f"a nested tensor (rows of different lengths), {not_a_table}; save the table as one dense tensor"
        )
    if tensor.layout != torch.strided:
        layout = str(tensor.layout).removeprefix("torch.")
        return f"a sparse tensor ({layout}), {not_a_table}; save it dense: torch.save(tensor.to_dense(), ...)"
    if tensor.is_quantized:
        dtype = str(tensor.dtype).removeprefix("torch.")
        return (
            f"a quantized tensor ({dtype}), {not_a_table}; save it as floats: "
            "torch.save(tensor.dequantize(), ...)"
        )
    if tensor.is_meta:
        return f"a meta tensor, which holds no values, {not_a_table}; save the table from a tensor on cpu"
    return ""


def _torch_layout(tensor: Any, torch: Any) -> str:
    """The word that says why a refused tensor is not read: "nested", "sparse_coo", "quantized", "meta"."""
    if tensor.is_nested:
        return "nested"
    if tensor.layout != torch.strided:
        return str(tensor.layout).removeprefix("torch.")
    return "quantized" if tensor.is_quantized else "meta"


#: Text of torch's weights-only refusals that advises an unsafe load (weights_only=False, allowlisting a
#: class): never passed on.
_UNSAFE_ADVICE = re.compile(r"weights_only|safe_globals|Weights only load failed", re.IGNORECASE)
#: The class or function a weights-only refusal names ("Unsupported global: GLOBAL mymodule.MyClass").
_GLOBAL = re.compile(r"GLOBAL\s+([\w.]+)")


def _refused(path: Path, error: BaseException) -> str:
    """posenc's own message for a file torch.load(weights_only=True) refuses: what it holds (the class it
    names, when it names one), never torch's advice (which suggests loading it unsafely)."""
    named = _GLOBAL.search(str(error))
    what = f" (it refers to {named.group(1)}, which is not a tensor)" if named else ""
    return (
        f"{path} cannot be read safely: it holds objects other than tensors{what}; posenc loads only tensors "
        "(torch.load(weights_only=True)) and will not run code from a file; save the table with "
        "torch.save(tensor), or as .npy or .safetensors"
    )


def _flatten(tree: Any, path: Path) -> dict[str, Any]:
    """The leaves of nested dicts, lists and tuples, named by their keys joined with dots (``""``: the
    tree is one leaf). Each container is walked once, however often it is referred to."""
    leaves: dict[str, Any] = {}
    walked: set[int] = set()
    entries = 0

    def walk(node: Any, prefix: str, depth: int) -> None:
        nonlocal entries
        if not isinstance(node, dict | list | tuple):
            leaves[prefix[:-1]] = node
            return
        if id(node) in walked:
            return
        walked.add(id(node))
        entries += len(node)
        if depth >= _MAX_DEPTH or entries > _MAX_ENTRIES:
            what = (
                f"nests dicts or lists more than {_MAX_DEPTH} deep"
                if depth >= _MAX_DEPTH
                else (f"holds more than {_MAX_ENTRIES:,} entries in its dicts and lists")
            )
            raise ValueError(f"{path} {what}; expected {EXPECTED}, alone or in a state dict")
        for name, value in node.items() if isinstance(node, dict) else enumerate(node):
            walk(value, f"{prefix}{name}.", depth + 1)

    walk(tree, "", 0)
    return leaves


#: safetensors dtypes: those NumPy reads (and BF16, widened here), by kind
_SAFETENSORS_KINDS = {
    "F64": "float",
    "F32": "float",
    "F16": "float",
    "BF16": "float",
    **{f"{sign}{bits}": "int" for sign in "IU" for bits in (8, 16, 32, 64)},
}


def safetensors_arrays(path: Path, stack: contextlib.ExitStack) -> tuple[dict[str, Stored], dict[str, str]]:
    """The tensors of a .safetensors file, from its header (safetensors checks that the data covers it)."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError("reading .safetensors files needs safetensors: pip install safetensors") from None
    with open(path, "rb") as stream:  # before safetensors parses it: a header of a few MB at most
        length = int.from_bytes(stream.read(8), "little")
    if length > MAX_HEADER_BYTES:
        raise ValueError(
            f"{path} is not a readable .safetensors file (its header claims {length:,} bytes, more than the "
            f"{MAX_HEADER_BYTES:,} a file of tables takes); expected a file written by safetensors' "
            f"save_file holding {EXPECTED}"
        )
    try:
        handle = stack.enter_context(safe_open(path, framework="numpy"))
        specs = {}
        for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
            spec = handle.get_slice(name)
            specs[name] = tuple(spec.get_shape()), spec.get_dtype()
    except OSError:
        raise
    except Exception as error:  # SafetensorError: a bad header length, a header that is not JSON, ...
        raise ValueError(
            f"{path} is not a readable .safetensors file ({reason(error)}); expected a file written by "
            f"safetensors' save_file holding {EXPECTED}"
        ) from None
    arrays = {}
    offsets = functools.cache(lambda: _data_offsets(path))  # the header, parsed once when a head is read
    for name, (shape, dtype) in specs.items():
        kind = _SAFETENSORS_KINDS.get(dtype)
        itemsize = int("".join(filter(str.isdigit, dtype)) or 8) // 8
        read = _bfloat16_reader(path, name, shape) if dtype == "BF16" else _tensor_reader(handle, name)
        hint = "" if kind else " (save the table as float32)"
        head = _head_reader(path, name, dtype, offsets) if dtype in _FLOAT_FORMATS else None
        arrays[name] = Stored(shape, dtype, kind, max(itemsize, 1), read, hint, head=head)
    return arrays, {}


#: The little-endian NumPy type of each floating safetensors dtype (BF16: its raw 16 bits).
_FLOAT_FORMATS = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}


def _data_offsets(path: Path) -> dict[str, int]:
    """Where each tensor's data begins, after the header (which safe_open has already checked)."""
    with open(path, "rb") as stream:
        (length,) = struct.unpack("<Q", stream.read(8))
        header = json.loads(stream.read(length))
    return {
        name: 8 + length + entry["data_offsets"][0]
        for name, entry in header.items()
        if name != "__metadata__"
    }


def _head_reader(
    path: Path, name: str, dtype: str, offsets: Callable[[], dict[str, int]]
) -> Callable[[int], np.ndarray]:
    """The first values of a floating tensor of a safetensors file, read alone (BF16 widened to float32)."""

    def head(count: int) -> np.ndarray:
        with open(path, "rb") as stream:
            raw = np.fromfile(stream, dtype=_FLOAT_FORMATS[dtype], count=count, offset=offsets()[name])
        return (raw.astype(np.uint32) << 16).view(np.float32) if dtype == "BF16" else raw

    return head


def _tensor_reader(handle: Any, name: str) -> Callable[[], np.ndarray]:
    """Read tensor ``name`` of an open safetensors file, when it is chosen."""
    return lambda: handle.get_tensor(name)


def _bfloat16_reader(path: Path, name: str, shape: tuple[int, ...]) -> Callable[[], np.ndarray]:
    """Read a BF16 tensor as float32 (exactly: a bfloat16 is the top half of a float32), which NumPy has
    no type for. Its place comes from the header, which safe_open has already checked."""

    def read() -> np.ndarray:
        with open(path, "rb") as stream:
            (length,) = struct.unpack("<Q", stream.read(8))
            begin, _ = json.loads(stream.read(length))[name]["data_offsets"]
            raw = np.fromfile(stream, dtype="<u2", count=math.prod(shape), offset=begin)
        return (raw.astype(np.uint32) << 16).view(np.float32).reshape(shape)

    return read


#: The reader of each file suffix: ``reader(path, stack)`` gives the file's arrays by name (``""``: the file
#: is one array) and the names and types of its other entries; ``stack`` holds what must stay open.
READERS: dict[str, Callable[[Path, contextlib.ExitStack], tuple[dict[str, Stored], dict[str, str]]]] = {
    ".npy": npy_arrays,
    ".pt": torch_arrays,
    ".pth": torch_arrays,
    ".bin": torch_arrays,
    ".safetensors": safetensors_arrays,
}
