"""Argument checking shared by the core, the command line and the adapters.

The bottom layer (docs/architecture.md): every package of posenc imports it, so its name is public inside
the package; users call the functions that use it, not it.

Every check raises :class:`~posenc.errors.PosencTypeError` (wrong kind of value) or
:class:`~posenc.errors.PosencValueError` (right kind, bad value), a ``TypeError`` / ``ValueError`` with a
message that names the parameter, shows the value received and says how to fix it, and the parameter's
name as ``error.parameter``.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import os
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import PosencTypeError, PosencValueError

DTYPES = ("float64", "float32", "float16", "bfloat16")

#: Positions must satisfy ``|p| < MAX_POSITION`` (2**31): the range over which exactness is proven.
MAX_POSITION = 2**31


def integer(
    name: str,
    value: Any,
    *,
    minimum: int,
    maximum: int | None = None,
    why: str = "",
    integral_floats: bool = False,
) -> int:
    """Return ``value`` as an ``int`` if it is an integer (not bool, not float) with ``minimum <= value``
    (and ``value <= maximum`` when given: :func:`at_most`, whose message gives ``why``).

    The one rule for integral floats: a Python argument must be an integer, so ``4096.0``, ``True``,
    ``"4096"`` and ``4096.5`` are a TypeError (the message suggests ``4096`` for ``4096.0``). Only a number
    read from a model's config file passes ``integral_floats=True``: JSON configs write some integer fields
    as whole floats (``"original_max_position_embeddings": 4096.0``), and such a finite whole float is
    taken as the integer it is; ``4096.5``, ``True`` and ``"4096"`` are refused there too.

    >>> integer("head_dim", 64, minimum=1), integer("head_dim", 64.0, minimum=1, integral_floats=True)
    (64, 64)
    """
    if integral_floats and _is_whole_float(value):
        value = int(value)
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise PosencTypeError(
            f"{name} must be an integer >= {minimum}; got {shorten(value)} of type {type(value).__name__}"
            + (f" (pass {int(value)} instead)" if _is_whole_float(value) else ""),
            parameter=name,
        )
    value = int(value)
    if value < minimum:
        raise PosencValueError(f"{name} must be an integer >= {minimum}; got {value}", parameter=name)
    if maximum is not None:
        at_most(name, value, maximum, why)
    return value


def position_int(name: str, value: Any, *, minimum: int = -(MAX_POSITION - 1)) -> int:
    """``value`` as an ``int`` (not bool, not float) with ``minimum <= value < 2**31``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        hint = ""
        if isinstance(value, float | np.floating) and math.isfinite(value) and float(value).is_integer():
            hint = f" (pass {int(value)} instead)"
        raise PosencTypeError(
            f"{name} must be an integer; got {value!r} of type {type(value).__name__}{hint}", parameter=name
        )
    value = int(value)
    if not minimum <= value < MAX_POSITION:
        raise PosencValueError(
            f"{name} must satisfy {minimum} <= {name} < 2**31 = {MAX_POSITION} (the range posenc encodes "
            f"exactly); got {value}",
            parameter=name,
        )
    return value


def table_start(start: Any, length: int) -> int:
    """``start`` of a table of ``length`` (checked) rows as an ``int``: its last position start + length - 1
    must be < 2**31."""
    start = integer("start", start, minimum=-(MAX_POSITION - 1))
    if length and start + length - 1 >= MAX_POSITION:
        raise PosencValueError(
            f"the last position start + length - 1 = {start + length - 1} must be < 2**31 = "
            f"{MAX_POSITION}; lower start or length",
            parameter="start",
        )
    return start


def _is_whole_float(value: Any) -> bool:
    return isinstance(value, float | np.floating) and math.isfinite(value) and float(value).is_integer()


def real(name: str, value: Any, *, usual: str = "") -> float:
    """Return ``value`` as a finite ``float``; integers must convert without rounding. ``usual`` names the
    values people pass (the fix a message suggests)."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise PosencTypeError(
            f"{name} must be a real number; got {shorten(value)} of type {type(value).__name__}",
            parameter=name,
        )
    try:
        result = float(value)
    except OverflowError:  # an int beyond float64 (10**400)
        raise PosencValueError(
            f"{name} must be a finite float64; got an integer of {int(value).bit_length()} bits"
            + (f"; {usual}" if usual else ""),
            parameter=name,
        ) from None
    if result != result or result in (math.inf, -math.inf):  # not math.isfinite: torch.compile traces this
        raise PosencValueError(
            f"{name} must be finite; got {value!r}" + (f"; {usual}" if usual else ""), parameter=name
        )
    if isinstance(value, numbers.Integral) and int(result) != int(value):
        raise PosencValueError(
            f"{name}={value} is not exactly representable as a float64; round it yourself", parameter=name
        )
    return result


def power_text(limit: int | float) -> str:
    """``limit`` as a message writes it: ``2**16 = 65536`` for a power of two (``2**-20`` below 1), else
    the number."""
    exponent = math.frexp(limit)[1] - 1 if limit > 0 else 0
    if limit > 0 and 2.0**exponent == limit:
        return f"2**{exponent} = {int(limit)}" if exponent >= 0 else f"2**{exponent}"
    return f"{limit:g}" if isinstance(limit, float) else str(limit)


def at_most(name: str, value: int | float, limit: int | float, why: str = "") -> None:
    """Raise ValueError when ``value > limit``: "{name} must be <= {limit} ({why}); got {value}". For the
    sizes and scalings a user passes, checked before any work so that a huge one is refused at once."""
    if value > limit:
        reason = f" ({why})" if why else ""
        given = repr(value) if len(repr(value)) <= 40 else f"an integer of {len(str(value))} digits"
        raise PosencValueError(f"{name} must be <= {power_text(limit)}{reason}; got {given}", parameter=name)


#: The widest encoding posenc computes: far beyond any model (the widest in use are ~16k), and small enough
#: that the frequency constants (one ~250-bit product per frequency) take well under a second.
MAX_D_MODEL = 2**20


def d_model(value: Any) -> int:
    """The model width: an integer from 2 (one sin/cos pair) to :data:`MAX_D_MODEL` (checked before any
    loop)."""
    result = integer("d_model", value, minimum=2)
    if result > MAX_D_MODEL:
        raise PosencValueError(
            f"d_model must be <= 2**20 = {MAX_D_MODEL} (the widest models use ~16k); got {result}; "
            "pass the model's width",
            parameter="d_model",
        )
    return result


def base(value: Any) -> float:
    """The frequency base: a finite real number > 1."""
    result = real("base", value, usual="pass a number > 1, e.g. 10000 (the paper)")
    if not result > 1.0:
        raise PosencValueError(f"base must be > 1 (the paper uses 10000); got {value!r}", parameter="base")
    return result


def shift(value: Any, d_model: int, odd: str = "zero") -> float:
    """The frequency shift: a finite real that keeps the exponent's denominator positive (:func:`plan`)."""
    result = real("shift", value, usual="pass 0 (the paper) or 1 (tensor2tensor, fairseq)")
    twice = _twice_half_width(d_model, odd)
    if not Fraction(twice, 2) - Fraction(result) > 0:
        half = str(twice // 2) if twice % 2 == 0 else f"{twice}/2"
        raise PosencValueError(
            f"shift={value!r} with d_model={d_model} gives n - shift = {half} - {value!r} <= 0, "
            f"a division by zero or a negative exponent; use shift < {half} "
            f"(0 for the paper, 1 for tensor2tensor with d_model >= 4)",
            parameter="shift",
        )
    return result


def _twice_half_width(d_model: int, odd: str) -> int:
    """2 × the exponent's denominator before the shift: 2 (d_model // 2), or d_model, or d_model + 1."""
    if d_model % 2 == 0 or odd in ("zero", "error"):
        return 2 * (d_model // 2)
    return d_model if odd == "literal" else d_model + 1


def plan(d_model: int, odd: str) -> tuple[int, int]:
    """``(count, twice_half)``: ω_i = scale · base ** (-i / (twice_half / 2 - shift)), i < count.

    Even d_model: d_model // 2 frequencies over d_model / 2 - shift. Odd d_model, by ``odd``:

    * ``"zero"``: d_model // 2 pairs over d_model // 2 - shift, then one zero column (fairseq, tensor2tensor,
      diffusers);
    * ``"literal"``: the paper's formula at every column, exponent 2i / d_model: d_model // 2 + 1
      frequencies over d_model / 2 - shift, the last column a sine (keras-hub, DistilBERT/XLM, Marian);
    * ``"drop"``: computed for d_model + 1 columns, the last one dropped: d_model // 2 + 1 frequencies over
      (d_model + 1) / 2 - shift (positional-encodings);
    * ``"error"``: refused (Whisper defines even widths only).
    """
    if d_model % 2 and odd == "error":
        raise PosencValueError(
            f"d_model={d_model} is odd and this variant (odd='error', like Whisper) defines even widths "
            "only; "
            "use an even d_model",
            parameter="d_model",
        )
    count = d_model // 2 + (1 if d_model % 2 and odd in ("literal", "drop") else 0)
    return count, _twice_half_width(d_model, odd)


def scale(value: Any) -> float:
    """The angle multiplier: a finite real in (0, 2**20]."""
    result = real("scale", value, usual="pass a number in (0, 2**20], 1 for no scaling")
    if not 0 < result <= 2**20:
        raise PosencValueError(
            f"scale must be > 0 and <= 2**20 (it multiplies every angle); got {value!r}", parameter="scale"
        )
    return result


def dtype(value: Any) -> np.dtype:
    """One of :data:`DTYPES` as a NumPy dtype; bfloat16 needs ``ml_dtypes``."""
    name = value
    if isinstance(value, str):
        name = value
    elif type(value).__module__ == "torch":  # torch.float32 etc.: the same names (torch is not imported)
        name = str(value).removeprefix("torch.")
    elif isinstance(value, np.dtype | type):
        try:
            name = np.dtype(value).name
        except TypeError:
            name = repr(value)
    if name not in DTYPES:
        raise PosencValueError(
            f"dtype must be one of {', '.join(map(repr, DTYPES))}; got {value!r}", parameter="dtype"
        )
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ImportError(
                "dtype='bfloat16' needs the ml_dtypes package: pip install 'posenc[bfloat16]'"
            ) from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def position_array(value: Any) -> np.ndarray:
    """``np.asarray(value)`` (no copy, no conversion), with a message naming positions for ragged lists, a
    boolean inside a list (``[1, True]``: NumPy makes it 1, where ``True`` alone is refused) and a masked
    array (its masked entries would be encoded as positions)."""
    if isinstance(value, np.ma.MaskedArray) and not np.ma.is_masked(value):
        value = value.data  # nothing masked: its values are the positions
    if isinstance(value, np.ma.MaskedArray):
        raise PosencTypeError(
            "positions is a masked array, and its masked entries would be encoded as ordinary positions; "
            "pass positions.compressed() (the unmasked ones) or positions.filled(p) with the position p "
            "you mean",
            parameter="positions",
        )
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list | tuple) and _holds_bool(value):
        raise PosencTypeError(
            f"positions must be integers or real numbers, not booleans; got a list holding True or False "
            f"({shorten(value)})",
            parameter="positions",
        )
    try:
        return np.asarray(value)
    except ValueError as error:  # NumPy: "... inhomogeneous shape ..."
        raise PosencValueError(
            f"positions must be a number or a rectangular (not ragged) nested list or array; got "
            f"{shorten(value)} ({error})",
            parameter="positions",
        ) from None


def _holds_bool(items: list | tuple) -> bool:
    """Whether a nested list or tuple holds a Python or NumPy boolean anywhere (one pass, no recursion)."""
    stack = [items]
    while stack:
        for item in stack.pop():
            if isinstance(item, bool | np.bool_):
                return True
            if isinstance(item, list | tuple):
                stack.append(item)
    return False


def positions(value: Any) -> np.ndarray:
    """Positions as a float64 array (exact), after checking kind, finiteness and range."""
    array = position_array(value)
    kind = array.dtype.kind
    if kind == "O":
        items = array.ravel().tolist()
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise PosencTypeError(
                f"positions must be integers or real numbers; got an object array ({shorten(value)})",
                parameter="positions",
            )
        worst = max((abs(v) for v in items), default=0)
        _out_of_range(worst)
        array = np.array(items, dtype=np.int64).reshape(array.shape)
        kind = "i"
    if kind == "b":
        raise PosencTypeError(
            f"positions must be integers or real numbers, not booleans; got {shorten(value)}; "
            "to turn a mask into positions use posenc.positions",
            parameter="positions",
        )
    if kind not in "iuf" and array.dtype.type.__module__.startswith("ml_dtypes"):
        # bfloat16, float8/6/4 and int4 arrays (ml_dtypes' own kind "V"): every value is a float32 (an
        # int64), so the conversion is exact
        narrow = "int" in array.dtype.name
        array = array.astype(np.int64 if narrow else np.float32)
        kind = array.dtype.kind
    if kind not in "iuf":
        raise PosencTypeError(
            f"positions must be integers or real numbers; got dtype {array.dtype} ({shorten(value)})",
            parameter="positions",
        )
    if kind == "f":
        converted = array.astype(np.float64)
        if array.dtype.itemsize > 8 and not np.array_equal(converted, array):
            raise PosencValueError(
                f"positions of dtype {array.dtype} do not convert to float64 exactly; convert them yourself",
                parameter="positions",
            )
        bad = ~np.isfinite(converted)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise PosencValueError(
                f"positions must be finite; got {converted[where]} at index {where}; "
                "replace NaN/inf before encoding",
                parameter="positions",
            )
        array = converted
    # a fresh float64 array, exact (-0.0 stays: sin(-0.0 ω) = -0.0, IEEE): converted above for reals
    exact = array if kind == "f" else array.astype(np.float64)
    if exact.size:
        worst = array.flat[int(np.abs(exact).argmax())]
        if abs(int(worst) if kind in "iu" else float(worst)) >= MAX_POSITION:
            _out_of_range(worst)
    return exact


def _out_of_range(worst: Any) -> None:
    if abs(int(worst) if isinstance(worst, numbers.Integral) else float(worst)) >= MAX_POSITION:
        raise PosencValueError(
            f"positions must satisfy |p| < 2**31 = {MAX_POSITION}, the range over which posenc is "
            f"proven exact; got {worst}",
            parameter="positions",
        )


def shorten(value: Any) -> str:
    """``repr(value)`` as every message shows a value: cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def module_options(max_len: Any, batch_first: Any, dropout: Any) -> tuple[int | None, bool, float]:
    """The options the framework modules share: a max_len hint (None or >= 1), batch_first, a dropout rate."""
    if max_len is not None:
        max_len = integer("max_len", max_len, minimum=1)
        at_most("max_len", max_len, MAX_POSITION, "positions are below 2**31")
    if not isinstance(batch_first, bool):
        raise PosencTypeError(
            f"batch_first must be True or False; got {batch_first!r}", parameter="batch_first"
        )
    rate = real("dropout", dropout)
    if not 0.0 <= rate < 1.0:
        hint = ""
        if isinstance(dropout, int) and not isinstance(dropout, bool) and dropout > 1:  # a length, misplaced
            hint = (
                "; the argument after d_model is dropout, as in the PyTorch tutorial's "
                f"PositionalEncoding(d_model, dropout, max_len): for a length, pass max_len={dropout}"
            )
        raise PosencValueError(f"dropout must be in [0, 1); got {dropout!r}{hint}", parameter="dropout")
    return max_len, batch_first, rate


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation, or None when the system does not say: the system's
    available memory, or less where a cgroup limit (v1 or v2) leaves this process's container less, or
    where a limit on its address space (``ulimit -v``) leaves this process less."""
    system = None
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    system = int(line.split()[1]) * 1024
    except OSError:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            system = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    limits = [n for n in (system, _cgroup_headroom(), _address_space_headroom()) if n is not None]
    return min(limits) if limits else None


def _address_space_headroom() -> int | None:
    """RLIMIT_AS (``ulimit -v``) minus this process's address space now, or None without a limit (or where
    the system does not say)."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as handle:
            size = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError, ValueError, IndexError, AttributeError):
        return None
    return max(0, limit - size)


def _cgroup_headroom(root: str = "/") -> int | None:
    """The memory limit of this process's cgroup minus its usage, or None without a limit (v2 and v1;
    a container sees its own cgroup at the root of the mount, the host at its path). ``root``: for tests."""
    mount = os.path.join(root, "sys/fs/cgroup")
    try:
        with open(os.path.join(root, "proc/self/cgroup")) as handle:
            lines = [line.strip().split(":", 2) for line in handle]
    except OSError:
        return None
    places = []
    for _, controllers, path in (line for line in lines if len(line) == 3):
        if controllers == "":
            folders = [os.path.join(mount, path.lstrip("/")), mount]
            places += [(folder, "memory.max", "memory.current") for folder in folders]
        elif "memory" in controllers.split(","):
            folders = [os.path.join(mount, "memory", path.lstrip("/")), os.path.join(mount, "memory")]
            places += [(folder, "memory.limit_in_bytes", "memory.usage_in_bytes") for folder in folders]
    for folder, limit_file, usage_file in places:
        try:
            with open(os.path.join(folder, limit_file)) as handle:
                limit = handle.read().strip()
            with open(os.path.join(folder, usage_file)) as handle:
                usage = int(handle.read())
        except (OSError, ValueError):
            continue
        if limit == "max" or int(limit) >= 1 << 60:  # no limit set
            return None
        return max(0, int(limit) - usage)
    return None


#: Outputs smaller than this are not checked against the available memory (reading it costs ~70 µs).
_CHECKED_BYTES = 64 << 20


#: What to do about an output too large for memory, by default.
FEWER = "ask for fewer positions, or write chunks with start= and out="


def fits_in_memory(
    shape: tuple[int, ...], dtype: np.dtype, *, copies: int = 1, extra: int = 0, advice: str = FEWER
) -> None:
    """Raise ValueError before allocating an output of ``shape`` that memory cannot hold (``copies``: how
    many arrays of its size the work holds at once, the output among them; ``extra``: bytes it holds
    besides; ``advice``: what to do instead)."""
    needed = math.prod(shape) * dtype.itemsize * copies + extra
    if needed < _CHECKED_BYTES:
        return
    available = available_memory()
    if available is not None and needed > available:

        def gib(size: int) -> str:  # three digits at least: 128 MiB is 0.125 GiB, never "0.1"
            return f"{size / 2**30:,.0f}" if size >= 1000 * 2**30 else f"{size / 2**30:.3g}"

        working = "" if copies == 1 else f" ({copies} arrays of its size at work)"
        raise PosencValueError(
            f"an output of shape {shape} and dtype {dtype.name} needs {gib(needed)} GiB{working} but only "
            f"{gib(available)} GiB of memory is available; {advice}",
            parameter=None,
        )
