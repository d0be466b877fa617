"""What the auditor measures: any positional encoding, turned into a :class:`Target` — a sampler
``positions -> values``, with its dtype, the positions it can be asked for and what kind of thing it is.

Kinds (``Target.kind``):

* ``"callable"``: a function ``positions (k,) -> encodings (k, d_model)``, NumPy, torch or JAX (the
  positions are passed as a NumPy int64 array, then a torch tensor, then a JAX array, whichever it takes);
  a function returning a tuple ``(cos, sin)`` is read as a rotary embedding (a list never is); or a torch
  module whose ``forward(positions)`` returns their encodings (diffusers' ``Timesteps``, Transformer-XL's
  ``PositionalEmbedding``), tried on a 1-D int64 tensor, then float32, float64 or its own type;
* ``"module"``: a torch ``nn.Module`` that adds encodings, fed zeros ``(L, 1, d_model)`` (or ``(1, L, d)``
  when it is batch first): only prefixes 0 .. L - 1 can be sampled;
* ``"table"``: an array or tensor ``(rows, d_model)`` (axes of size 1 dropped), or a module's positional
  buffer (``pe``, ``weights``, ...): positions 0 .. rows - 1;
* ``"file"``: a checkpoint (.npy, .pt/.pth, .safetensors; ``key=`` names the tensor), read by
  :func:`posenc.porting.load_table`;
* ``"rotary"``: a rotary module (a Hugging Face ``*RotaryEmbedding``: ``forward(x, position_ids) -> (cos,
  sin)``; an older one, ``forward(x, seq_len) -> (cos, sin)`` of positions 0 .. seq_len - 1, as Hugging Face
  Llama before transformers 4.38 and GPT-NeoX wrote it; else its ``cos_cached``/``sin_cached`` buffers, else
  its ``inv_freq``), a module holding only ``cos``/``sin`` cache buffers (read as a table, positions
  0 .. rows - 1), a Hugging Face config (its ``LlamaRotaryEmbedding``), or a stored ``inv_freq`` vector (the
  exact cos/sin of the stored frequencies). Values are ``[cos | sin]``, ``2 · rotary_dim`` columns.

A torch module is run and judged in its own floating type (that of its parameters, else of its floating
buffers: ``model.to(torch.bfloat16)`` casts both) unless ``dtype=`` is given. Every sampler returns float64
values ``(k, width)`` that hold the target's own values exactly; ``dtype`` names the type they came in. torch,
JAX and transformers are imported only for targets of theirs.

The target's code runs inside ``with guard.target_code(...)`` (:mod:`.guard`: what it raises names it, its
NumPy error state is undone). What a call returns must be an array or tensor ``(k, width)`` or a tuple
``(cos, sin)`` of them: a list (even of two arrays), a dict, None, a tuple of another length, a meta, nested,
sparse, quantized or complex tensor is a :class:`WrongOutput` that says what was returned and expected.
"""

from __future__ import annotations

import dataclasses
import decimal
import errno
import importlib.util
import inspect
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .. import validation
from ..errors import PosencValueError
from .guard import TargetError, target_code

__all__ = [
    "MAX_POSITION",
    "Target",
    "WrongOutput",
    "as_target",
    "check_code_file",
    "is_code",
    "load_object",
    "values_of",
]

MAX_POSITION = validation.MAX_POSITION
#: Elements of the zeros fed to a module at most (128 MiB of float32): the rows a module can be asked for.
_PREFIX_ELEMENTS = 1 << 25
_TABLE_NAMES = ("pe", "pos", "sinus", "timing", "weights")
#: Rotary cache buffers, read when a module's last name component starts with (leading "_" aside) or ends in
#: "cos" and a "sin" twin exists: ``cos_cached``/``sin_cached`` (Hugging Face Llama before transformers 4.38,
#: GPT-NeoX), ``_cos_cached`` (flash-attn's RotaryEmbedding), ``cos_cache``.
_COS_NAMES = ("cos",)


@dataclasses.dataclass
class Target:
    """A positional encoding, ready to be sampled.

    ``sample(positions)``: int64 positions ``(k,)`` -> float64 ``(k, width)``; ``dtype``: the target's own
    type ("float32", "bfloat16", ...); positions ``0 .. limit - 1`` can be asked (a table's rows, a
    module's longest input, else 2³¹); ``rotary``: what is known of a rotary target (``params``: a
    :class:`posenc.rope.RopeParameters` or None, ``inv_freq``: the stored frequencies or None, ``parts``:
    "cos+sin" or "cos"); ``note``: how it was read.

    >>> (t := as_target(np.eye(2, dtype=np.float32))).kind, t.dtype, t.limit, t.sample(np.array([1])).tolist()
    ('table', 'float32', 2, [[0.0, 1.0]])
    """

    kind: str
    description: str
    sample: Callable[[np.ndarray], np.ndarray]
    dtype: str
    limit: int
    width: int | None = None
    rotary: dict[str, Any] | None = None
    note: str = ""

    def rows_before_raise(self, positions: np.ndarray) -> int:
        """How many of the sorted ``positions`` it gives rows for before its call raises (bisection: a
        table shorter than a band of positions — a 512-row BERT-length module — is measured up to its
        end)."""
        good, bad = 0, len(positions)
        while bad - good > 1:
            middle = (good + bad) // 2
            try:
                self.sample(positions[:middle])
            except Exception:  # past its end: the rows before it are what can be measured
                bad = middle
            else:
                good = middle
        return good


def as_target(
    target: Any,
    *,
    d_model: int | None = None,
    dtype: str | None = None,
    key: str | None = None,
    label: str | None = None,
) -> Target:
    """``target`` (module docstring) as a :class:`Target`; ``d_model``, ``dtype``, ``key`` are hints;
    ``label`` names a function in messages (default: its name)."""
    if isinstance(target, Target):
        return target
    if isinstance(target, (str, Path)):
        text = str(target)
        if is_code(text):
            return as_target(load_object(text, d_model=d_model), d_model=d_model, dtype=dtype, label=text)
        if Path(text).is_dir():  # a model folder has a config.json (models.is_model_directory)
            raise ValueError(
                f"{text} is a directory without a config.json; name a model folder (one holding a Hugging "
                "Face config.json), or a .npy, .pt/.pth or .safetensors file holding a table of shape "
                "(positions, d_model)"
            )
        return _file(Path(text), key)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(target, torch.nn.Module):
        return _module(target, d_model, dtype)
    if _is_config(target):
        return _config(target, dtype)
    if _is_array(target):
        values, name = values_of(target, "the target is")
        return _table(values, name, f"{type(target).__name__} of shape {tuple(values.shape)}", "table")
    if callable(target):
        return _callable(target, d_model, label)
    raise TypeError(
        f"target must be a callable (positions -> encodings), a torch module, an array or tensor, a "
        f"checkpoint path, 'file.py:Name' or a Hugging Face config; got {type(target).__name__}"
    )


def is_code(target: Any) -> bool:
    """Whether ``target`` names code to run: ``"path/to/file.py:Name"`` — never the name of a file or folder
    that exists (``pe.py:table.npy`` there is that file, read as data); :func:`load_object` runs the file
    only for a Name that is a Python name."""
    if not isinstance(target, (str, Path)):
        return False
    text = str(target)
    if ":" not in Path(text).name or os.path.lexists(text):
        return False
    return Path(text.rpartition(":")[0]).suffix == ".py"


def check_code_file(spec: str) -> Path:
    """The file of ``"path/to/file.py:Name"``, checked to be a regular file before anything opens it (a
    FIFO or a device could block): else a ValueError that says what it is."""
    path = spec.rpartition(":")[0]
    problem = _not_a_file(Path(path))
    if problem:
        raise ValueError(f"target {spec!r}: {path} {problem}; write it as path/to/file.py:Name")
    return Path(path)


def load_object(spec: str, *, d_model: int | None = None) -> Any:
    """The object of ``"path/to/file.py:Name"``; a class is instantiated (with ``d_model`` if it takes it)."""
    file = check_code_file(spec)
    path, _, name = spec.rpartition(":")
    if not name.isidentifier():  # before the file runs
        raise ValueError(f"target {spec!r}: {name!r} is not a Python name; write it as path/to/file.py:Name")
    module_spec = importlib.util.spec_from_file_location(f"_posenc_audit_{file.stem}", file)
    if module_spec is None or module_spec.loader is None:
        raise ValueError(f"target {spec!r}: {path} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(module_spec)
    try:
        with target_code(f"importing {path}"):
            module_spec.loader.exec_module(module)
    except Exception as error:  # the user's file: any error it raises is reported as bad input
        raise TargetError(
            f"target {spec!r}: importing {path} raised {type(error).__name__}: {error}"
        ) from error
    if not name.isidentifier() or not hasattr(module, name):
        found = sorted(k for k, v in vars(module).items() if not k.startswith("_") and callable(v))
        raise ValueError(f"target {spec!r}: {path} defines no {name!r}; it defines: {', '.join(found)}")
    obj = getattr(module, name)
    if inspect.isclass(obj):
        required = [
            p
            for p in inspect.signature(obj).parameters.values()
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if not required:
            with target_code(f"building {name}()"):
                return obj()
        if d_model is None:
            raise PosencValueError(
                f"target {spec!r}: class {name} needs arguments; give its width: d_model=",
                parameter="d_model",
            )
        try:
            with target_code(f"building {name}({d_model})"):
                return obj(d_model)
        except Exception as error:
            raise TargetError(
                f"target {spec!r}: {name}({d_model}) raised {type(error).__name__}: {error}"
            ) from error
    return obj


#: What a target's call returns, in the words of the messages.
_OUTPUT = "expected a tensor or array of shape (L, d_model), or a (cos, sin) pair of them"


class WrongOutput(ValueError):
    """A target returned something that is not an encoding (a list, None, a meta tensor, ...)."""


def values_of(value: Any, subject: str = "the target returned") -> tuple[np.ndarray, str]:
    """A NumPy, torch or JAX array (or a tuple ``(cos, sin)``, concatenated) as float64 and its dtype name.

    Anything else (a list, a dict, None, a tuple of another length, a meta, sparse, nested, quantized or
    complex tensor) is a :class:`WrongOutput` whose message is ``subject`` and what it is: a list is never
    read as a pair.
    """
    if isinstance(value, tuple) and len(value) == 2 and all(_is_array(v) for v in value):
        (cos, name), (sin, _) = values_of(value[0], subject), values_of(value[1], subject)
        if cos.shape[:-1] != sin.shape[:-1]:
            raise WrongOutput(f"{subject} a (cos, sin) pair of shapes {cos.shape} and {sin.shape}; {_OUTPUT}")
        return np.concatenate([cos, sin], axis=-1), name
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _tensor_values(value, torch, subject)
    if not _is_array(value) and (
        value is None or isinstance(value, (list, tuple, dict, set, str, bytes, int, float, complex))
    ):
        raise WrongOutput(f"{subject} {_what(value)}; {_OUTPUT}")
    try:
        array = np.asarray(value)
    except Exception as error:  # an object NumPy cannot take
        raise WrongOutput(f"{subject} {_what(value)}, which NumPy cannot read ({error}); {_OUTPUT}") from None
    if array.dtype.kind not in "fiu" and array.dtype.name != "bfloat16":
        raise WrongOutput(f"{subject} an array of {array.dtype} values; expected real numbers")
    return array.astype(np.float64), array.dtype.name


def _tensor_values(value: Any, torch: Any, subject: str) -> tuple[np.ndarray, str]:
    """A torch tensor's values as float64: a dense tensor of real numbers on any device, else WrongOutput."""
    if value.is_meta:
        raise WrongOutput(f"{subject} a meta tensor, which holds no values; build it on cpu")
    if value.is_nested:
        raise WrongOutput(f"{subject} a nested tensor; {_OUTPUT}")
    if value.layout != torch.strided:
        layout = str(value.layout).removeprefix("torch.")
        raise WrongOutput(f"{subject} a sparse tensor ({layout}); {_OUTPUT}: call .to_dense() on it")
    if value.is_quantized:
        dtype = str(value.dtype).removeprefix("torch.")
        raise WrongOutput(f"{subject} a quantized tensor ({dtype}); {_OUTPUT}: call .dequantize() on it")
    if value.is_complex() or value.dtype == torch.bool:
        raise WrongOutput(
            f"{subject} a tensor of {str(value.dtype).removeprefix('torch.')} values; expected real numbers"
        )
    name = str(value.dtype).removeprefix("torch.")
    try:
        # a copy: a target may return a view of a buffer its next call overwrites
        return value.detach().cpu().to(torch.float64, copy=True).numpy(), name
    except Exception as error:  # a tensor subclass or a device whose values cannot be copied out
        text = " ".join(str(error).split())[:160]
        raise WrongOutput(
            f"{subject} a {type(value).__name__} whose values cannot be copied to NumPy "
            f"({type(error).__name__}: {text}); {_OUTPUT}"
        ) from None


def _what(value: Any) -> str:
    """What a wrong output is, in words: 'None', 'a list', 'a tuple of 3 items'."""
    if value is None:
        return "None"
    if isinstance(value, tuple):
        if len(value) == 2:
            return f"a tuple of ({type(value[0]).__name__}, {type(value[1]).__name__})"
        return f"a tuple of {len(value)} item{'s' * (len(value) != 1)}"
    noun = type(value).__name__
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a file ('does not exist', 'is a symlink loop', ...), or None: checked
    before opening it, so that a FIFO or a device is never opened (it could block)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist (no such file)"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "is a symlink loop (its links lead back to themselves)"
        return f"cannot be read ({error.strerror or error})"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a FIFO, a device or a socket)"
    return None


def _is_array(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def _is_config(value: Any) -> bool:
    transformers = sys.modules.get("transformers")
    if transformers is not None and isinstance(value, transformers.PretrainedConfig):
        return True
    return isinstance(value, dict) and any(k in value for k in ("rope_theta", "rope_parameters"))


def _rows(values: np.ndarray, count: int) -> np.ndarray:
    """The ``count`` rows of an output: axes of size 1 dropped, then ``(count, width)``."""
    if values.ndim == 1 and count == 1:
        return values[None]
    squeezed = values.reshape([s for s in values.shape if s != 1] or [1])
    if count == 1:
        return squeezed.reshape(1, -1)
    if squeezed.ndim < 2 or squeezed.shape[0] != count:
        raise ValueError(f"the target returned shape {values.shape} for {count} positions")
    return squeezed.reshape(count, -1)


def _table(values: np.ndarray, dtype: str, description: str, kind: str) -> Target:
    """A stored table (positions 0 .. rows - 1), or an inv_freq vector (a rotary target)."""
    squeezed = values.reshape([s for s in values.shape if s != 1] or [1])
    if squeezed.ndim == 1:
        return _inv_freq(squeezed, dtype, description)
    if squeezed.ndim != 2 or squeezed.shape[1] < 2:
        raise ValueError(f"target table must have shape (positions, d_model); got {values.shape}")
    table = squeezed

    def sample(positions: np.ndarray) -> np.ndarray:
        return table[positions]

    return Target(kind, description, sample, dtype, len(table), table.shape[1], note="its stored rows")


def _inv_freq(theta: np.ndarray, dtype: str, description: str) -> Target:
    """Stored θ_i (inv_freq): exact cos/sin of p θ_i, [cos | sin] half layout, correctly rounded (float32)."""
    from ..core import explicit

    if not (np.all(theta >= 0) and np.all(np.isfinite(theta))):
        raise ValueError(f"target vector {description} is not an inv_freq (finite θ_i >= 0)")
    law = explicit.ExactFrequencies(
        ("audit-inv_freq", theta.tobytes()), lambda digits: tuple(decimal.Decimal(float(t)) for t in theta)
    )

    def sample(positions: np.ndarray) -> np.ndarray:
        sin, cos = explicit.sin_cos(positions, law, np.dtype("float32"))
        return np.concatenate([cos, cos, sin, sin], axis=-1).astype(np.float64)

    rotary = {
        "params": None,
        "inv_freq": theta,
        "parts": "cos+sin",
        "layout": "half",
        "values_of_theta": True,
    }
    note = f"its {dtype} frequencies, each cos/sin of p·θ_i correctly rounded to float32"
    return Target("rotary", description, sample, "float32", MAX_POSITION, 4 * len(theta), rotary, note)


def _file(path: Path, key: str | None) -> Target:
    from ..porting import load_stored_table

    _, stored, held = load_stored_table(path, key=key)
    values, name = values_of(stored)
    if held in ("float16", "bfloat16"):  # read exactly as float32: judged in the dtype the file holds
        name = held
    described = f"{path}" + (f" [{key}]" if key else "")
    target = _table(values, name, described, "file")
    return dataclasses.replace(target, kind="rotary" if target.rotary else "file")


def _callable(function: Callable[..., Any], d_model: int | None, label: str | None = None) -> Target:
    """A function of positions; the first array type it takes (NumPy, torch, JAX) is kept. Messages name
    it ``label`` (default: its name)."""
    qualname = getattr(function, "__qualname__", type(function).__name__)
    name = label or qualname
    try:
        parameters = inspect.signature(function).parameters.values()
        required = sum(
            p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            for p in parameters
        )
    except (TypeError, ValueError):  # a builtin without a signature: one argument
        required = 1
    if required >= 2:
        if d_model is None:
            raise PosencValueError(
                f"target {name}(positions, d_model) needs its width; give d_model=", parameter="d_model"
            )
        width = d_model

        def call(positions: Any) -> Any:
            return function(positions, width)
    else:
        call = function
    kinds: list[tuple[str, Callable[[np.ndarray], Any]]] = [("as a NumPy array", lambda p: p)]
    if "torch" in sys.modules or "torch" in getattr(function, "__module__", ""):
        kinds.append(("as a torch tensor", lambda p: sys.modules["torch"].from_numpy(p)))
    if "jax" in sys.modules:
        kinds.append(("as a JAX array", lambda p: sys.modules["jax"].numpy.asarray(p)))
    probe, chosen, failures = np.arange(4, dtype=np.int64), None, []
    subject = f"target {name} returned"
    for way, convert in kinds:
        try:
            with target_code(f"calling it on {len(probe)} positions {way}"):
                output = call(convert(probe))
            values, dtype = values_of(output, subject)
            width = _rows(values, len(probe)).shape[1]
        except Exception as error:  # the wrong array type for this function: try the next
            failures.append(error)
            continue
        chosen = convert
        break
    if chosen is None:
        wrong = next((f for f in failures if isinstance(f, WrongOutput)), None)
        if wrong is not None:  # it ran, but what it returned is not an encoding
            raise WrongOutput(str(wrong)) from None
        failure = failures[-1]
        raise TargetError(
            f"target {name} could not be called with positions (a NumPy, torch or JAX int64 array of shape "
            f"(4,)): {type(failure).__name__}: {failure}"
        ) from failure
    convert = chosen

    def sample(positions: np.ndarray) -> np.ndarray:
        with target_code(f"calling it on {len(positions)} positions"):
            output = call(convert(positions))
        return _rows(values_of(output, subject)[0], len(positions))

    rotary = {"params": None, "inv_freq": None, "parts": "cos+sin", "layout": "half"}
    pair = isinstance(output, tuple)  # values_of took it: a (cos, sin) pair of arrays
    kind = "rotary" if pair else "callable"
    return Target(kind, f"function {qualname}", sample, dtype, MAX_POSITION, width, rotary if pair else None)


def _module(module: Any, d_model: int | None, dtype: str | None) -> Target:
    """A torch module: rotary (it holds ``inv_freq``), or one that adds encodings, or a stored buffer."""
    import torch

    name = type(module).__name__
    if type(module) is torch.nn.Embedding and module.max_norm is None:  # a lookup by position: its weight
        # is the table (a subclass may offset the lookup, as BART's; max_norm renormalises the rows read)
        values, stored = values_of(module.weight, f"target module {name}: its weight is")
        return _table(values, stored, f"{name}.weight of shape {tuple(module.weight.shape)}", "table")
    with target_code("setting it to eval mode"):
        module.eval()
    buffers = dict(module.named_buffers())
    dtype = dtype or _module_dtype(module)
    inv_freq = next((b for k, b in buffers.items() if k.endswith("inv_freq")), None)
    if inv_freq is not None:
        absolute = _absolute_sinusoid(module, inv_freq, d_model, getattr(torch, dtype or "float32"), name)
        of_positions = absolute or _positions_module(module, dtype, name)  # Transformer-XL's embedding
        if isinstance(of_positions, Target):
            return of_positions
        return _rotary_module(module, inv_freq, dtype, name)
    cos_sin = _cos_sin_buffers(buffers)
    if cos_sin is not None:
        return _cos_sin_table(*cos_sin, dtype, name)
    tables = {
        k: b
        for k, b in [*buffers.items(), *module.named_parameters()]
        if b.is_floating_point() and sum(s != 1 for s in b.shape) == 2 and any(w in k for w in _TABLE_NAMES)
    }
    width = d_model or next((int(b.shape[-1]) for b in tables.values()), None)
    width = width or next(
        (getattr(module, a) for a in ("d_model", "embedding_dim", "dim", "channels") if hasattr(module, a)),
        None,
    )
    torch_dtype = getattr(torch, dtype or "float32")
    if width is not None:
        for batch_first in (False, True):
            try:
                shape = (1, 4, width) if batch_first else (4, 1, width)
                with torch.no_grad(), target_code(f"calling its forward on zeros of shape {shape}"):
                    output = module(torch.zeros(shape, dtype=torch_dtype))
                if not isinstance(output, torch.Tensor):  # ESPnet's (x · √d, pos_emb) is no (cos, sin)
                    continue
                rows = _rows(values_of(output, f"target module {name} returned")[0], 4)
            except Exception:  # not a module that adds encodings to (L, 1, d) / (1, L, d) inputs
                continue
            if not np.array_equal(rows[0], rows[1]):
                return _prefix_module(module, width, batch_first, torch_dtype, name)
    if len(tables) == 1:
        key, buffer = next(iter(tables.items()))
        values, stored = values_of(buffer, f"target module {name}: its {key} is")
        return _table(values, stored, f"{name}.{key} of shape {tuple(buffer.shape)}", "table")
    of_positions = _positions_module(module, dtype, name)
    if isinstance(of_positions, Target):
        return of_positions
    floating = [f"{k} {tuple(b.shape)}" for k, b in buffers.items() if b.is_floating_point()]
    raise ValueError(
        f"target module {name} neither adds encodings to zeros of shape (L, 1, d_model) or (1, L, d_model) "
        f"nor holds one positional table, an inv_freq buffer or cos/sin cache buffers (positional tables "
        f"found: {', '.join(tables) or 'none'}; floating buffers: {', '.join(floating) or 'none'}), nor "
        f"returns an encoding from forward(positions) ({of_positions}); give d_model= when the module's "
        "width is not an attribute, or pass its table, or a function of positions: "
        "posenc.audit(lambda p: module(torch.as_tensor(p)))"
    )


def _positions_module(module: Any, dtype: str, name: str) -> Target | str:
    """A module whose forward takes positions (or timesteps) and returns their encodings: diffusers'
    ``Timesteps``, Transformer-XL's ``PositionalEmbedding(pos_seq)``, denoising-diffusion's
    ``SinusoidalPosEmb``. ``forward(p)`` with ``p`` a 1-D tensor of positions, int64 if it takes them, else
    float32, float64 or the module's own type (as its callers pass them); the output, axes of size 1 dropped,
    must be ``(k, width)`` of real values that stay within the largest value of row 0 (an amplitude: a
    module returning angles is not an encoding), differ between rows, and give each position the same row
    in another order (a module that numbers its input's tokens itself does not). Else why not, in words."""
    import torch

    probe, shuffled = np.arange(4, dtype=np.int64), np.array([3, 1, 0, 2], dtype=np.int64)
    kinds = dict.fromkeys(["int64", "float64", "float32", dtype])  # exact positions first
    why = "its forward takes no 1-D tensor of positions"
    for kind in kinds:
        torch_kind = getattr(torch, kind)

        def call(positions: np.ndarray, torch_kind: Any = torch_kind) -> tuple[np.ndarray, str, bool]:
            with (
                torch.no_grad(),
                target_code(f"calling its forward on {len(positions)} {torch_kind} positions"),
            ):
                output = module(torch.from_numpy(positions).to(torch_kind))
            pair = isinstance(output, tuple) and len(output) == 2  # (cos, sin): a rotary's
            if not isinstance(output, torch.Tensor) and not pair:
                raise WrongOutput(f"it returned {_what(output)}")
            values, returned = values_of(output, f"target module {name} returned")
            if sum(s != 1 for s in values.shape) > 2:  # Transformer-XL's (k, bsz, d): rows of more axes
                raise WrongOutput(f"it returned shape {tuple(values.shape)}: more than (positions, width)")
            return _rows(values, len(positions)), returned, pair

        try:
            rows, returned, pair = call(probe)
            again, _, _ = call(shuffled)
            alone, _, _ = call(probe[2:3])
        except Exception as error:  # not this type of positions (or not positions at all)
            why = f"forward({kind} positions): {type(error).__name__}: {' '.join(str(error).split())[:200]}"
            continue
        top = float(np.abs(rows[0]).max(initial=0.0))
        said = f"forward({kind} positions) returned"
        if top == 0:
            return f"{said} rows of which position 0's row is all zeros (angles? an encoding has cos 0 = 1)"
        if rows.shape[1] < 2 or not np.all(np.isfinite(rows)) or np.array_equal(rows[0], rows[1]):
            return (
                f"{said} rows that are no encoding: shape {rows.shape}, positions 0 and 1 alike or not finite"
            )
        if float(np.abs(rows).max()) > top * (1 + 1e-3):
            return f"{said} values beyond the largest of position 0's row (the positions themselves, angles?)"
        # the same row (to a few roundings: another batch may take another vectorised path) in any order
        # and alone
        same = 4 * 2.0 ** -{"bfloat16": 8, "float16": 11, "float32": 24}.get(returned, 52) * top
        if float(np.abs(again - rows[shuffled]).max()) > same:
            return f"forward({kind} positions) gives a position another row when the order changes"
        if float(np.abs(alone - rows[2:3]).max()) > same:  # normalised over the batch, ...
            return f"forward({kind} positions) gives a position another row in a batch of its own"
        width = rows.shape[1]

        def sample(positions: np.ndarray, call: Any = call) -> np.ndarray:
            return call(positions)[0]

        limit, passed = MAX_POSITION, "int64 positions"
        if kind != "int64":
            limit = _first_rounded_past(torch_kind)
            passed = f"positions as {kind} (it takes no int64 ones)"
            passed += f"; those from {limit:,} on round to 2^31 or more" if limit < MAX_POSITION else ""
        note = f"its forward(positions) called on a 1-D tensor of {passed}"
        described = f"module {name}, forward(positions)"
        if not pair:
            return Target("callable", described, sample, returned, limit, width, note=note)
        rotary = {"params": None, "inv_freq": None, "parts": "cos+sin", "layout": "half"}
        return Target("rotary", described, sample, returned, limit, width, rotary, f"{note}: (cos, sin)")
    return why


def _first_rounded_past(torch_kind: Any) -> int:
    """The least position that a float type rounds to 2³¹ or more (or to infinity): positions passed in it
    are sampled below that, the rounding of the rest being the sampler's, not the target's.

    >>> import torch; _first_rounded_past(torch.float32), _first_rounded_past(torch.float16)
    (2147483584, 65520)
    """
    import torch

    low, high = 0, MAX_POSITION  # low rounds below 2³¹; the answer is in (low, high]
    while high - low > 1:
        middle = (low + high) // 2
        rounded = float(torch.tensor(middle, dtype=torch.float64).to(torch_kind))
        low, high = (middle, high) if rounded < MAX_POSITION else (low, middle)
    return high


def _absolute_sinusoid(
    module: Any, inv_freq: Any, d_model: int | None, torch_dtype: Any, name: str
) -> Target | None:
    """A module that holds ``inv_freq`` but adds (or returns) an absolute encoding (x-transformers'
    ScaledSinusoidalEmbedding: ``[sin | cos](p·inv_freq) · scale`` from ``forward(x)``): its forward on
    zeros ``(1, L, d)`` or ``(L, 1, d)``, d = 2·len(inv_freq) (or ``d_model``), returns one real tensor
    of d columns whose rows differ and stay within the largest value of row 0 (an amplitude: angles grow,
    a rotary's forward takes positions too and returns cos and sin). None for anything else."""
    import torch

    width = d_model or 2 * int(np.prod(inv_freq.shape))
    for batch_first in (True, False):
        shape = (1, 4, width) if batch_first else (4, 1, width)
        try:
            with torch.no_grad(), target_code(f"calling its forward on zeros of shape {shape}"):
                output = module(torch.zeros(shape, dtype=torch_dtype))
            if not isinstance(output, torch.Tensor) or output.is_complex():
                continue
            rows = _rows(values_of(output, f"target module {name} returned")[0], 4)
        except Exception:  # a rotary's forward(x, position_ids), or another shape
            continue
        top = float(np.abs(rows[0]).max(initial=0.0))
        varies = rows.shape[1] == width and top > 0 and not np.array_equal(rows[0], rows[1])
        if varies and float(np.abs(rows).max()) <= top * (1 + 1e-3):
            return _prefix_module(module, width, batch_first, torch_dtype, name)
    return None


def _module_dtype(module: Any) -> str:
    """The floating type a module runs in: its parameters' (the most common), else its floating buffers',
    else float32. ``module.to(torch.bfloat16)`` casts both, so a cast module is fed and judged in bfloat16."""
    for tensors in (module.parameters(), module.buffers()):
        names = [str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()]
        if names:
            return max(sorted(set(names)), key=names.count)
    return "float32"


def _cos_sin_buffers(buffers: dict[str, Any]) -> tuple[Any, Any, str] | None:
    """A module's rotary cache: the floating buffers ``...cos...``/``...sin...`` (same name but for cos/sin,
    same shape, two axes of size > 1), or None."""
    for key, cos in buffers.items():
        last = key.rsplit(".", 1)[-1]
        if not any(last.lstrip("_").startswith(c) or last.endswith(c) for c in _COS_NAMES):
            continue
        sin = buffers.get(key[: len(key) - len(last)] + last.replace("cos", "sin"))
        if (
            sin is not None
            and cos.is_floating_point()
            and cos.shape == sin.shape
            and sum(s != 1 for s in cos.shape) == 2
        ):
            return cos, sin, key
    return None


def _cos_sin_table(cos: Any, sin: Any, key: str, dtype: str, name: str) -> Target:
    """A rotary module's ``cos``/``sin`` cache buffers as a table ``[cos | sin]``, positions 0 .. rows - 1
    (the rows its forward slices), cast to ``dtype`` as its forward casts them to ``x.dtype``."""
    import torch

    stored = str(cos.dtype).removeprefix("torch.")
    torch_dtype = getattr(torch, dtype)
    values, _ = values_of((cos.to(torch_dtype), sin.to(torch_dtype)))
    rows = values.reshape([s for s in values.shape if s != 1])
    if rows.ndim != 2:
        raise ValueError(f"target module {name}: its {key} buffer of shape {tuple(cos.shape)} is not a table")

    def sample(positions: np.ndarray) -> np.ndarray:
        return rows[positions]

    rotary = {"params": None, "inv_freq": None, "parts": "cos+sin", "layout": "half"}
    cast = "" if stored == dtype else f", cast from {stored} to {dtype} as its forward casts to x.dtype"
    note = f"its {key} / {key.replace('cos', 'sin')} buffers ({len(rows):,} rows{cast}): [cos | sin]"
    description = f"rotary module {name} ({key} of shape {tuple(cos.shape)})"
    return Target("rotary", description, sample, dtype, len(rows), rows.shape[1], rotary, note)


def _prefix_module(module: Any, width: int, batch_first: bool, torch_dtype: Any, name: str) -> Target:
    import torch

    limit = max(1, _PREFIX_ELEMENTS // width)
    cache: dict[str, Any] = {"rows": np.zeros((0, width))}

    def sample(positions: np.ndarray) -> np.ndarray:
        needed = int(positions.max()) + 1 if len(positions) else 0
        if needed > len(cache["rows"]):
            length = min(limit, needed)
            shape = (1, length, width) if batch_first else (length, 1, width)
            with torch.no_grad(), target_code(f"calling its forward on zeros of shape {shape}"):
                output = module(torch.zeros(shape, dtype=torch_dtype))
            cache["rows"] = _rows(values_of(output, f"target module {name} returned")[0], length)
        return cache["rows"][positions]

    layout = "(1, L, d)" if batch_first else "(L, 1, d)"
    note = f"fed zeros of shape {layout}, L up to {limit:,}: the encodings it adds"
    dtype = str(torch_dtype).removeprefix("torch.")
    return Target("module", f"module {name}", sample, dtype, limit, width, note=note)


def _rotary_module(module: Any, inv_freq: Any, dtype: str, name: str) -> Target:
    """A rotary module holding ``inv_freq``, read the first way that works: ``forward(x, position_ids)``
    (transformers ≥ 4.38), ``forward(x, seq_len)`` (positions 0 .. seq_len - 1: Hugging Face Llama before
    4.38, GPT-NeoX), its ``cos``/``sin`` cache buffers, else its ``inv_freq`` alone (the exact cos/sin of
    the stored frequencies: what the module's arithmetic adds is then not seen, and the note says so)."""
    import torch

    from ..torch.patching import kept_state

    torch_dtype = getattr(torch, dtype)
    x = torch.zeros(1, 1, dtype=torch_dtype)
    theta = values_of(inv_freq, f"rotary module {name}: its inv_freq is")[0].reshape(-1)
    width = 2 * 2 * len(theta)
    probe = np.arange(4, dtype=np.int64)

    form: dict[str, str] = {}  # what the forward returned: "complex" or "half_width", and the parts' dtype

    def by_ids(positions: np.ndarray) -> np.ndarray:
        # each call from the module's state as it was given (Hugging Face's "dynamic" keeps the longest
        # length it was called with, and an earlier probe's would change the next call's frequencies)
        with (
            torch.no_grad(),
            kept_state(module),
            target_code(f"calling its forward(x, position_ids) on {len(positions)} positions"),
        ):
            output = module(x, torch.from_numpy(positions)[None])
        if isinstance(output, torch.Tensor) and output.is_complex():  # freqs_cis = A·cos θ + i·A·sin θ
            form.update(kind="complex", dtype=str(output.real.dtype).removeprefix("torch."))
            output = (output.real, output.imag)
        rows = _rows(_pair_values(output, f"rotary module {name} returned"), len(positions))
        if rows.shape[1] == width // 2:  # a column per frequency: [cos | sin] of the half layout repeats them
            form.setdefault("kind", "half_width")
            cos, sin = np.split(rows, 2, axis=1)
            rows = np.concatenate([cos, cos, sin, sin], axis=1)
        return rows

    def first_rows(length: int) -> np.ndarray:
        with torch.no_grad(), kept_state(module), target_code(f"calling its forward(x, seq_len={length})"):
            output = module(x, seq_len=length)
        return _rows(_pair_values(output, f"rotary module {name} returned"), length)

    failures = []
    sample, limit, note = None, MAX_POSITION, f"forward(x: {dtype}, position_ids) -> (cos, sin)"
    for how, call in (("forward(x, position_ids)", by_ids), ("forward(x, seq_len=)", first_rows)):
        try:
            rows = call(probe if call is by_ids else len(probe))
            if rows.shape != (len(probe), width):
                raise ValueError(f"it returned {rows.shape[1]} columns where inv_freq implies {width}")
        except Exception as error:  # not this calling convention: try the next
            failures.append(f"{how}: {type(error).__name__}: {(str(error).splitlines() or [''])[0][:120]}")
            continue
        if call is by_ids:
            sample = by_ids
        else:
            sample, limit = _prefix_sampler(first_rows, width)
            note = f"forward(x: {dtype}, seq_len=L) -> (cos, sin) of positions 0 .. L - 1, L up to {limit:,}"
        break
    if sample is None:
        cos_sin = _cos_sin_buffers(dict(module.named_buffers()))
        if cos_sin is not None:
            target = _cos_sin_table(*cos_sin, dtype, name)
            target.rotary["inv_freq"] = theta
            target.note += f" (its forward could not be called: {'; '.join(failures)})"
            return target
        target = _inv_freq(theta, str(inv_freq.dtype).removeprefix("torch."), f"{name}.inv_freq")
        return dataclasses.replace(
            target,
            description=f"rotary module {name} (its inv_freq only)",
            note=target.note + "; its forward could not be called (" + "; ".join(failures) + "): pass a "
            "function positions -> (cos, sin) to audit its arithmetic too",
        )
    from .. import rope

    params = getattr(module, "params", None)  # posenc's own RotaryEmbedding holds its RopeParameters
    params = params if isinstance(params, rope.RopeParameters) else None
    config = getattr(module, "config", None)
    if config is not None and params is None:
        try:
            params = rope.config(config)
        except (ValueError, TypeError):
            params = None
    rotary = {"params": params, "inv_freq": theta, "parts": "cos+sin", "layout": "half"}
    if form.get("kind") == "complex":  # its parts' precision, whatever x's dtype (complex64: float32)
        dtype = form["dtype"]
        note = f"forward(x, position_ids) -> complex freqs_cis of {dtype} parts, read as [cos | cos | sin |"
        note += " sin]"
    elif form.get("kind") == "half_width":
        note += " of one column per frequency, read as [cos | cos | sin | sin]"
    return Target("rotary", f"rotary module {name}", sample, dtype, limit, width, rotary, note)


def _pair_values(output: Any, subject: str) -> np.ndarray:
    """The values ``[cos | sin]`` of a rotary forward's output."""
    return values_of(_pair(output, subject), subject)[0]


def _pair(output: Any, subject: str) -> tuple[Any, Any]:
    """A rotary forward's output as ``(cos, sin)``: a tuple or list of two (as ``cos, sin = module(...)``
    takes it), else a WrongOutput."""
    if isinstance(output, (tuple, list)) and len(output) == 2:
        return output[0], output[1]
    raise WrongOutput(f"{subject} {_what(output)}; expected a (cos, sin) pair of tensors")


def _prefix_sampler(
    first_rows: Callable[[int], np.ndarray], width: int
) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """A sampler over a call that gives rows 0 .. L - 1 (cached, grown as needed), and its limit."""
    limit = max(1, min(MAX_POSITION, _PREFIX_ELEMENTS // width))
    cache: dict[str, Any] = {"rows": np.zeros((0, width))}

    def sample(positions: np.ndarray) -> np.ndarray:
        needed = int(positions.max()) + 1 if len(positions) else 0
        if needed > len(cache["rows"]):
            cache["rows"] = first_rows(min(limit, needed))
        return cache["rows"][positions]

    return sample, limit


def _config(config: Any, dtype: str | None) -> Target:
    """A Hugging Face config: the rotary embedding transformers builds from it (``LlamaRotaryEmbedding``)."""
    try:
        import transformers
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    except ImportError:
        raise ImportError(
            "auditing a Hugging Face config needs transformers: pip install transformers"
        ) from None
    if isinstance(config, dict):
        config = transformers.LlamaConfig(**config)
    module = LlamaRotaryEmbedding(config)
    target = _module(module, None, dtype)
    return dataclasses.replace(
        target, description=f"transformers LlamaRotaryEmbedding of a {type(config).__name__}"
    )
