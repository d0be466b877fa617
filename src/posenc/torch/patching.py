"""Make a model's positions exact in one call: :func:`patch` finds every positional component of a torch
model, proves what it computes, and replaces it with posenc's exact equivalent; :func:`unpatch` restores it.

What is found, and how each is made exact:

* **rotary embeddings** — a module holding an ``inv_freq`` buffer (or ``{layer_type}_inv_freq`` buffers,
  Gemma 3's per-layer RoPE) and the ``config`` it was built from (Hugging Face's ``*RotaryEmbedding``: every
  rope type, partial rotary, M-RoPE): replaced by :class:`posenc.torch.RotaryEmbedding` built from that
  config, on the same device. Its persistent buffers, if it had any, are kept, so the model's
  ``state_dict`` keeps its keys and values;
* **sinusoidal tables** — a floating buffer or ``nn.Embedding`` weight of two axes (size-1 axes aside)
  whose dotted name has a positional word (``pe``, ``pos``, ``position(s)``, ``positional``, ``sinusoidal``,
  ``timing``, ``sincos``: the PyTorch tutorial's ``pe``, fairseq/M2M100's ``embed_positions.weights``,
  Whisper's encoder ``embed_positions``, DistilBERT's ``position_embeddings``, a DiT's 2-D ``pos_embed``):
  its rows identified (:func:`posenc.porting.identify`: every named 1-D variant, fitted options, the 2-D/3-D
  grids), then overwritten in place with posenc's exact rows of that variant, in the tensor's own dtype (the
  module, its forward and its ``state_dict`` keys stay as they are). A table that starts with rows of zeros
  (CogVideoX's joint table: the text tokens' places, then the 3-D grid) keeps them, and the rows after them
  are identified and made exact;
* **diffusers ``Timesteps``** — replaced by :class:`posenc.torch.Timesteps` with the same options.

Before anything is replaced, the original and the replacement are compared on probe positions (rotary:
every position below 256 and a spread up to the config's ``max_position_embeddings``; timesteps 0..1000):
the largest difference must be within the original's own rounding error (its float32 angles, or the
precision its frequencies or table are stored in); anything it cannot prove — a learned table, an unknown
variant, a module built without a config, values on the meta device — is left alone, with the reason, in
the :class:`PatchReport`. Modules whose values cannot be read (meta) are proven from their config alone
(rotary) or skipped (tables).

**The rotary apply** (``fused=True``; the default where the model's rotary embedding is on CUDA and triton
is present): every attention module whose ``forward`` calls the global ``apply_rotary_pos_emb`` (Hugging
Face's Llama, Mistral, Qwen2/3, Qwen2-VL's text, Phi-3, Gemma 3, GPT-NeoX, ...) gets an instance ``forward``:
its class's own, run with posenc's exact apply in that name's place (the library's module and class are not
touched). The exact apply computes ``x · cos + turn(x) · sin`` in float32 and rounds once to q's dtype
(:func:`posenc.torch.apply_rotary`), from float32 cos/sin, which the patched rotary embedding then returns;
on CUDA it is the fused kernel (:func:`posenc.torch.apply_rotary_exact`: cos/sin computed inside the
rotation from the position ids the cos tensor carries, the same bits). Before that, each distinct apply
function of the model is run on float32 probes and must give posenc's bits (in float32, the two are the
same arithmetic); a model whose attention also rotates by another function (DeepSeek-V3's
``apply_rotary_pos_emb_interleave``) keeps its own apply, with the reason. In a float32 model the logits
do not change by a bit; in bfloat16 and float16 the rotation is rounded once instead of three times from
rounded cos/sin.

``patch`` changes nothing outside the model it is given (no monkey-patching of a library's functions or
classes); it is idempotent (a second call finds posenc's modules and exact tables, and keeps the first
call's originals); it works before or after ``model.to(dtype)``. The originals are kept on the model
(``model._posenc_originals``) for :func:`unpatch`.

>>> import torch
>>> import posenc.torch
>>> from posenc.torch import patch, unpatch
>>> from torch import nn
>>> class Tutorial(nn.Module):  # the PyTorch tutorial's table: float32 angles
...     def __init__(self):
...         super().__init__()
...         position = torch.arange(512, dtype=torch.float).unsqueeze(1)
...         div_term = torch.exp(torch.arange(0, 64, 2).float() * (-9.210340371976184 / 64))
...         pe = torch.zeros(512, 1, 64)
...         pe[:, 0, 0::2], pe[:, 0, 1::2] = torch.sin(position * div_term), torch.cos(position * div_term)
...         self.register_buffer("pe", pe)
>>> class Model(nn.Module):
...     def __init__(self):
...         super().__init__()
...         self.pos_encoder, self.linear = Tutorial(), nn.Linear(64, 64)
>>> model = Model()
>>> report = patch(model)
>>> [(c.path, c.kind, c.replaced) for c in report.components]
[('pos_encoder.pe', 'table', True)]
>>> bool((model.pos_encoder.pe[:, 0] == posenc.torch.table(512, 64)).all())
True
>>> unpatch(model)
1
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
import re
import textwrap
import types
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import grids, presets, rope, validation
from ..porting.verdict import GRIDS
from .fused_rotary import apply_rotary_exact
from .kernels.common import KERNEL_DEVICES, kernel_module
from .modules import Timesteps as ExactTimesteps
from .rotary import RotaryEmbedding, apply_rotary, cos_sin
from .tensors import _dtype_name, _to_tensor, _tracing

__all__ = ["Component", "PatchReport", "find", "patch", "unpatch"]

#: Words of a dotted name that mark a positional table.
_WORDS = frozenset(
    {"pe", "pos", "position", "positions", "positional", "sinusoidal", "timing", "sincos", "wpe"}
)
#: Positions below this are all probed (rotary); a spread of positions above, up to the config's maximum.
_PROBE = 256
#: Significant bits of the 16-bit floating types a frequency buffer or a table may be stored in.
_SIGNIFICAND = {torch.bfloat16: 8, torch.float16: 11}
#: The attribute of a patched model that keeps the originals: {path: ("module", module) | ("table", tensor)}.
_ORIGINALS = "_posenc_originals"
#: The global function of a Hugging Face attention module's forward that the fused apply replaces.
_APPLY = "apply_rotary_pos_emb"
#: Names of global functions that rotate q and k (the apply of some attention module).
_APPLY_NAME = re.compile(r"apply_\w*(rotary|rope)")
#: The attribute of a fused rotary embedding's cos that carries (position ids, parameters, seq_len).
_TAG = "_posenc_rotary"


@dataclasses.dataclass
class Component:
    """One positional component of a model: ``path`` in the module tree (a pattern such as
    ``model.layers.*.self_attn`` for the rotary apply of every layer), ``kind`` ("rotary", "table",
    "timesteps" or "rotary-apply"), ``variant`` (what it was identified as), ``difference`` (the largest
    |original − posenc| at the probed positions; NaN when not compared), ``tolerance`` (what the original's
    own rounding allows), ``replaced``, and ``reason`` (how it was proven, or why it was left alone)."""

    path: str
    kind: str
    variant: str
    difference: float
    tolerance: float
    replaced: bool
    reason: str

    def as_text(self) -> str:
        verdict = "replaced" if self.replaced else "left alone"
        numbers = (
            ""
            if math.isnan(self.difference)
            else f"; max |original − posenc| {self.difference:.3g} (allowed {self.tolerance:.3g})"
        )
        return f"{self.path} [{self.kind}] {self.variant}: {verdict} — {self.reason}{numbers}"


@dataclasses.dataclass
class PatchReport:
    """What :func:`patch` found: every :class:`Component`, ``replaced`` and ``skipped`` apart."""

    components: list[Component]

    @property
    def replaced(self) -> list[Component]:
        return [c for c in self.components if c.replaced]

    @property
    def skipped(self) -> list[Component]:
        return [c for c in self.components if not c.replaced]

    def as_text(self, width: int = 100) -> str:
        lines = [
            f"posenc patch: {len(self.replaced)} positional component(s) made exact, "
            f"{len(self.skipped)} left alone"
        ]
        for c in self.components:
            lines += textwrap.wrap(c.as_text(), width, initial_indent="  ", subsequent_indent="      ")
        return "\n".join(lines)


def patch(model: nn.Module, *, fused: bool | None = None) -> PatchReport:
    """Replace every positional component of ``model`` that can be proven by posenc's exact equivalent
    (module docstring); returns the :class:`PatchReport`.

    ``fused`` (default: True when the model's rotary embedding is on a CUDA device and triton is present)
    also gives the model's attention modules posenc's exact rotary apply (see "the rotary apply" in the
    module docstring): one more component, kind "rotary-apply". ``fused=False`` leaves (or puts back)
    the model's own apply.

    >>> report = patch(torch.nn.Linear(4, 4))
    >>> report.components, report.as_text()
    ([], 'posenc patch: 0 positional component(s) made exact, 0 left alone')
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(f"fused must be True, False or None (None: True on CUDA); got {fused!r}")
    originals = model.__dict__.setdefault(_ORIGINALS, {})
    components = [_component(model, path, kind, what, originals) for path, kind, what in find(model)]
    rotaries = [m for m in model.modules() if isinstance(m, _PatchedRotary)]
    if fused is None:
        fused = any(_on_kernel_device(m) for m in rotaries)
    _unfuse(model, originals, rotaries)
    if fused and rotaries:
        components.append(_fuse(model, originals, rotaries))
    return PatchReport(components)


def unpatch(model: nn.Module) -> int:
    """Restore every original that :func:`patch` replaced in ``model`` (modules put back, tables' values
    copied back); returns how many. A model never patched: 0."""
    originals = model.__dict__.pop(_ORIGINALS, {})
    for path, (kind, original) in originals.items():
        if kind == "forward":
            model.get_submodule(path).__dict__.pop("forward", None)
        elif kind == "module":
            for where in _paths_of(model, path):
                _set(model, where, original)
        else:
            owner, name = _owner(model, path)
            with torch.no_grad():
                getattr(owner, name).data.copy_(original)
    kinds = [kind for kind, _ in originals.values()]
    return sum(kind != "forward" for kind in kinds) + ("forward" in kinds)  # the rotary apply: one component


# --- finding and proving ------------------------------------------------------------------------------


def find(model: nn.Module) -> list[tuple[str, str, Any]]:
    """The positional components of ``model``, each once, in module order: ``(path, kind, what)`` with kind
    "rotary" or "timesteps" (``what``: the module) or "table" (``what``: the tensor, ``path`` its dotted
    name). posenc's own modules are found too.

    >>> from posenc.torch import Timesteps
    >>> [(path, kind) for path, kind, _ in find(torch.nn.Sequential(Timesteps(8, True, 0)))]
    [('0', 'timesteps')]
    """
    found, seen = [], set()
    for path, module in model.named_modules():
        if id(module) in seen:
            continue
        seen.add(id(module))
        kind = _kind(module)
        if kind is not None:
            found.append((path, kind, module))
            continue
        tensors = [*module.named_buffers(recurse=False), *module.named_parameters(recurse=False)]
        for name, tensor in tensors:
            full = f"{path}.{name}" if path else name
            if tensor.is_floating_point() and sum(s > 1 for s in tensor.shape) == 2 and _positional(full):
                found.append((full, "table", tensor))
                break
    return found


def _kind(module: nn.Module) -> str | None:
    """The kind of a positional module, posenc's or another library's: "rotary", "timesteps", else None."""
    if isinstance(module, RotaryEmbedding):
        return "rotary"
    if isinstance(module, ExactTimesteps):
        return "timesteps"
    buffers = dict(module.named_buffers(recurse=False))
    if "inv_freq" in buffers or any(k.endswith("_inv_freq") for k in buffers):
        return "rotary"
    if type(module).__name__ == "Timesteps" and hasattr(module, "num_channels"):
        return "timesteps"
    return None


def _component(model: nn.Module, path: str, kind: str, what: Any, originals: dict) -> Component:
    if isinstance(what, (RotaryEmbedding, ExactTimesteps)):
        return Component(path, kind, "posenc", 0.0, 0.0, True, "already posenc's (patched)")
    if kind == "rotary":
        return _rotary(model, path, what, originals)
    if kind == "timesteps":
        return _timesteps(model, path, what, originals)
    return _table(path, what, originals)


def _positional(name: str) -> bool:
    words = re.split(r"[._]", name.lower())
    return any(w in _WORDS for w in words)


def _rotary(model: nn.Module, path: str, module: nn.Module, originals: dict) -> Component:
    config = getattr(module, "config", None)
    label = type(module).__name__
    if config is None:
        return Component(path, "rotary", label, math.nan, math.nan, False, "no config to build it from")
    try:
        exact = _PatchedRotary(config)
    except (ValueError, TypeError, KeyError) as error:
        return Component(path, "rotary", label, math.nan, math.nan, False, f"its config: {error}")
    inv = next(b for k, b in module.named_buffers(recurse=False) if k.endswith("inv_freq"))
    exact = exact.to(inv.device)
    params = exact.params or next(iter(exact.layer_params.values()))
    variant = f"rope-{params.rope_type}"
    if inv.device.type == "meta":
        difference, tolerance, how = (
            math.nan,
            math.nan,
            "on meta: built from its config (no values to compare)",
        )
    else:
        try:
            difference, tolerance = _compare_rotary(module, exact, config, inv)
        except Exception as error:  # its forward is not (x, position_ids) -> (cos, sin)
            reason = f"could not be compared: {type(error).__name__}: {str(error)[:120]}"
            return Component(path, "rotary", variant, math.nan, math.nan, False, reason)
        if not difference <= tolerance:
            reason = "its values are not this config's RoPE within its own rounding error"
            return Component(path, "rotary", variant, difference, tolerance, False, reason)
        layers = rope.layer_types(config)
        how = "equal to its own cos/sin within their rounding error" + (
            f" (layer types {', '.join(layers)})" if layers else ""
        )
    exact.config = config  # as the original held it (read by code that asks the module for its config)
    for key, value in module.state_dict().items():  # keep the checkpoint's keys (a persistent inv_freq)
        exact.register_buffer(key, value, persistent=True)
    originals.setdefault(path, ("module", module))
    for where in _paths_of(model, path):
        _set(model, where, exact)
    return Component(path, "rotary", variant, difference, tolerance, True, how)


def _compare_rotary(
    module: nn.Module, exact: nn.Module, config: Any, inv: torch.Tensor
) -> tuple[float, float]:
    """The largest |original − posenc| over the probe positions (every layer type), and what the
    original's rounding allows: float32 angles (≈ 2⁻²⁴ · p · θ_max), its frequencies' storage precision."""
    limit = int(getattr(config, "max_position_embeddings", 0) or 4096)
    spread = np.unique(np.geomspace(_PROBE, max(limit - 1, _PROBE), 64).astype(np.int64))
    short = torch.arange(min(_PROBE, limit), device=inv.device)[None]  # dynamic/longrope: their short rule
    ids = torch.from_numpy(np.concatenate([np.arange(min(_PROBE, limit)), spread[spread < limit]]))[None]
    ids = ids.to(inv.device)
    x = torch.zeros(1, 1, dtype=torch.float32, device=inv.device)
    held = {k for k, _ in module.named_buffers(recurse=False)}  # Gemma 3 builds only the types it uses
    types = [t for t in exact.layer_params if f"{t}_inv_freq" in held] or [None]
    worst, allowed = 0.0, 0.0
    for layer_type, probe in itertools.product(types, (short, ids)):
        with torch.no_grad():
            mine = module(x, probe) if layer_type is None else module(x, probe, layer_type)
            ours = exact(x, probe) if layer_type is None else exact(x, probe, layer_type)
        for a, b in zip(mine, ours, strict=True):
            worst = max(worst, float((a.double() - b.double()).abs().max()))
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        theta = float(rope.inv_freq(params).max())
        scaling = abs(rope.attention_scaling(params))
        stored = 2.0 ** -_SIGNIFICAND.get(inv.dtype, 24)
        angle = float(ids.max()) * theta
        allowed = max(allowed, scaling * (4 * angle * max(stored, 2.0**-24) + 4 * 2.0**-24))
    return worst, allowed


def _timesteps(model: nn.Module, path: str, module: nn.Module, originals: dict) -> Component:
    try:
        exact = ExactTimesteps(
            int(module.num_channels),
            bool(module.flip_sin_to_cos),
            float(module.downscale_freq_shift),
            scale=float(getattr(module, "scale", 1)),
        )
        t = torch.arange(0, 1001, dtype=torch.float32)
        with torch.no_grad():
            difference = float((module(t).double() - exact(t).double()).abs().max())
    except Exception as error:
        reason = f"could not be compared: {type(error).__name__}: {str(error)[:120]}"
        return Component(path, "timesteps", "diffusers", math.nan, math.nan, False, reason)
    tolerance = 4 * 1000 * float(getattr(module, "scale", 1)) * 2.0**-24 + 4 * 2.0**-24
    if not difference <= tolerance:
        reason = "its values are not diffusers' timestep embedding within float32 rounding"
        return Component(path, "timesteps", "diffusers", difference, tolerance, False, reason)
    originals.setdefault(path, ("module", module))
    for where in _paths_of(model, path):
        _set(model, where, exact)
    how = "equal to its own embedding of t = 0..1000 within float32 rounding"
    return Component(path, "timesteps", "diffusers-timestep", difference, tolerance, True, how)


def _table(full: str, tensor: torch.Tensor, originals: dict) -> Component:
    from ..porting import identify

    if tensor.device.type == "meta":
        return Component(full, "table", "?", math.nan, math.nan, False, "on meta: no values to identify")
    rows = tensor.detach().reshape(-1, tensor.shape[-1]).double().cpu().numpy()
    stored = _SIGNIFICAND.get(tensor.dtype)  # float32 code's error, and its storage's
    tolerance = 1e-5 + 16 * len(rows) * 2.0**-24 + (2.0**-stored if stored else 0.0)
    try:
        best = identify(rows, tolerance=tolerance, candidates=1)[0]
    except ValueError as error:
        return Component(full, "table", "?", math.nan, math.nan, False, f"not an encoding table: {error}")
    zeros, leading = 0, _zero_rows(rows)  # zero rows first: a joint table's text places (CogVideoX), kept
    if not best.matches and 0 < leading < len(rows) - 1:
        with contextlib.suppress(ValueError):
            tail = identify(rows[leading:], tolerance=tolerance, candidates=1)[0]
            if tail.matches:
                best, zeros = tail, leading
    variant = (best.name or "generic").split(" = ")[0]
    if not best.matches:
        reason = "no sinusoidal variant matches (a learned table?)"
        return Component(full, "table", variant, best.max_error, math.nan, False, reason)
    try:
        exact = _exact_rows(best, rows[zeros:].shape, _dtype_name(tensor.dtype))
    except (ValueError, TypeError) as error:
        return Component(full, "table", variant, math.nan, math.nan, False, f"cannot be rebuilt: {error}")
    exact = np.concatenate([np.zeros((zeros, rows.shape[1]), exact.dtype), exact])
    difference = float(np.abs(exact.astype(np.float64) - rows).max(initial=0.0))
    values = _to_tensor(exact).reshape(tensor.shape).to(tensor.device)
    if torch.equal(values, tensor.detach()):
        return Component(full, "table", variant, difference, difference, full in originals, "already exact")
    originals.setdefault(full, ("table", tensor.detach().clone()))
    with torch.no_grad():
        tensor.data.copy_(values)
    how = f"rows identified ({best.describe()}); overwritten with posenc's, in {str(tensor.dtype)[6:]}"
    if zeros:
        how += f"; its first {zeros} rows, zeros (a joint table's text places), kept"
    return Component(full, "table", variant, difference, tolerance, True, how)


def _zero_rows(rows: np.ndarray) -> int:
    """How many rows at the start of ``rows`` are zeros (+0 and -0) only."""
    nonzero = np.flatnonzero(np.any(rows != 0, axis=1))
    return int(nonzero[0]) if len(nonzero) else len(rows)


def _exact_rows(best: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """posenc's exact rows of an identified variant in ``dtype`` (each value rounded once), as many as the
    table has."""
    count, width = shape
    name = next((n for n in (best.name or "").split(" = ") if n in GRIDS), None)
    if name is not None:  # a named grid: built by its function of posenc.grids, d_model by keyword or first
        function, keyword = GRIDS[name]
        leading, by_name = ((), {keyword: width}) if keyword else ((width,), {})
        values = getattr(grids, function)(*leading, **by_name, **best.options, dtype=validation.dtype(dtype))
        return values.reshape(count, width)
    preset = presets.Preset("patch", **best.options, padding_idx=best.padding_idx)
    return preset.table(count, width, start=best.start, dtype=validation.dtype(dtype))


# --- the rotary apply -----------------------------------------------------------------------------------


class _PatchedRotary(RotaryEmbedding):
    """posenc's :class:`RotaryEmbedding` as :func:`patch` puts it in a model. While its attention modules
    have posenc's exact apply (``fused``), cos/sin come in float32 (the apply rounds once, from them) and
    eager ones carry what the fused kernel needs: their position ids, parameters and ``seq_len``."""

    fused = False

    def forward(
        self,
        x: torch.Tensor,
        position_ids: torch.Tensor,
        layer_type: str | None = None,
        *,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.fused:
            return super().forward(x, position_ids, layer_type, seq_len=seq_len)
        probe = torch.empty(0, dtype=torch.float32, device=x.device)
        cos, sin = super().forward(probe, position_ids, layer_type, seq_len=seq_len)
        params = self._params_for(layer_type)
        if x.device.type in KERNEL_DEVICES and not params.mrope_section and not _tracing():
            setattr(cos, _TAG, (position_ids.to(x.device), params, seq_len))
        return cos, sin


def exact_apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a patched attention module calls for Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin,
    unsqueeze_dim)``: :func:`posenc.torch.apply_rotary_exact` of the ids the patched rotary embedding's cos
    carries (the fused kernel on CUDA), else :func:`posenc.torch.apply_rotary` of cos/sin (float32 from the
    patched rotary embedding): ``x · cos + turn(x) · sin`` in float32, rounded once to x's dtype."""
    tag = None if _tracing() else getattr(cos, _TAG, None)
    if tag is not None:
        ids, params, seq_len = tag
        return apply_rotary_exact(
            q, k, ids, params, unsqueeze_dim=unsqueeze_dim, seq_len=seq_len, cos_sin=(cos, sin)
        )
    return apply_rotary(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)


class _ExactApplyForward:
    """The ``forward`` :func:`patch` gives an attention module (an instance attribute; its class is not
    touched): the class's own ``forward``, run with posenc's exact apply in the place of the global
    ``apply_rotary_pos_emb`` it calls. Picklable and copyable with its module."""

    def __init__(self, module: nn.Module):
        self.module = module
        self.function = _with_exact_apply(type(module).forward)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.module, *args, **kwargs)

    def __getstate__(self) -> dict:
        return {"module": self.module}

    def __setstate__(self, state: dict) -> None:
        self.module = state["module"]
        self.function = _with_exact_apply(type(self.module).forward)


@functools.cache
def _with_exact_apply(function: Any) -> Any:
    """``function`` with its globals' ``apply_rotary_pos_emb`` bound to posenc's exact apply (a copy of
    its globals: the library's module is not changed)."""
    scope = dict(function.__globals__)
    scope[_APPLY] = exact_apply_rotary_pos_emb
    rebuilt = types.FunctionType(
        function.__code__, scope, function.__name__, function.__defaults__, function.__closure__
    )
    rebuilt.__kwdefaults__ = function.__kwdefaults__
    rebuilt.__qualname__ = function.__qualname__
    return rebuilt


def _on_kernel_device(module: nn.Module) -> bool:
    """Whether the rotary module's buffers are on a device where the fused kernel runs."""
    buffer = next(module.buffers(), None)
    return (
        buffer is not None
        and buffer.device.type in KERNEL_DEVICES
        and kernel_module("fused_kernel") is not None
    )


def _applies(module: nn.Module) -> list[str]:
    """The global functions named like a rotary apply (``apply_*rotary*``/``apply_*rope*``) that the
    module's class ``forward`` calls."""
    function = getattr(type(module), "forward", None)
    code, scope = getattr(function, "__code__", None), getattr(function, "__globals__", {})
    if code is None:
        return []
    return [n for n in code.co_names if _APPLY_NAME.match(n) and callable(scope.get(n))]


def _fuse(model: nn.Module, originals: dict, rotaries: list[_PatchedRotary]) -> Component:
    """Give every attention module that calls ``apply_rotary_pos_emb`` posenc's exact apply, once each
    distinct apply is proven on a probe to be the half rotation posenc computes; else nothing, and why."""
    targets, functions = [], {}
    for path, module in model.named_modules():
        names = _applies(module)
        others = [n for n in names if n != _APPLY and "vision" not in n]
        if others:
            reason = f"{path} also rotates by {others[0]}, which posenc does not replace: its apply kept"
            return Component(path, "rotary-apply", "?", math.nan, math.nan, False, reason)
        if _APPLY in names:
            targets.append(path)
            function = type(module).forward.__globals__[_APPLY]
            functions[function] = path
    where = _pattern(targets)
    if not targets:
        reason = "no attention module calls apply_rotary_pos_emb: the model's apply kept"
        return Component("", "rotary-apply", "?", math.nan, math.nan, False, reason)
    rotary = rotaries[0]
    params = rotary.params or next(iter(rotary.layer_params.values()))
    worst = 0.0
    for function, path in functions.items():
        difference = _probe_apply(function, params)
        worst = max(worst, difference)
        if difference != 0:
            reason = f"{path}'s apply_rotary_pos_emb is not the half rotation posenc computes: its apply kept"
            return Component(where, "rotary-apply", "?", difference, 0.0, False, reason)
    for path in targets:
        module = model.get_submodule(path)
        originals.setdefault(path, ("forward", None))
        module.forward = _ExactApplyForward(module)
    for module in rotaries:
        module.fused = True
    how = (
        f"{len(targets)} attention module(s): apply_rotary_pos_emb is posenc's exact apply (float32, rounded "
        "once; the fused Triton kernel on CUDA), the same bits as theirs on float32 probes"
    )
    return Component(where, "rotary-apply", "rope-apply-half", worst, 0.0, True, how)


def _unfuse(model: nn.Module, originals: dict, rotaries: list[_PatchedRotary]) -> None:
    """Take back what :func:`_fuse` did (the attention modules' own forward, cos/sin in x's dtype)."""
    for path in [p for p, (kind, _) in originals.items() if kind == "forward"]:
        model.get_submodule(path).__dict__.pop("forward", None)
        del originals[path]
    for module in rotaries:
        module.fused = False


def _probe_apply(function: Any, params: rope.RopeParameters) -> float:
    """The largest |function(q, k, cos, sin) − posenc's apply| on float32 probes (0: the same bits)."""
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, params.head_dim, generator=generator) * 4
    k = torch.randn(2, 1, 5, params.head_dim, generator=generator) * 4
    ids = torch.tensor([[0, 1, 7, 100, 4095], [3, 2, 1, 0, 65537]])
    cos, sin = cos_sin(ids.expand(3, -1, -1) if params.mrope_section else ids, params, dtype=torch.float32)
    try:
        with torch.no_grad():
            theirs = function(q, k, cos, sin)
    except Exception:  # not (q, k, cos, sin) -> (q, k)
        return math.inf
    ours = apply_rotary(q, k, cos, sin)
    if any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(theirs, ours, strict=True)):
        return math.inf
    return max(float((a.double() - b.double()).abs().max()) for a, b in zip(theirs, ours, strict=True))


def _pattern(paths: list[str]) -> str:
    """The attention paths as one pattern: layer numbers as ``*`` where every path has the same shape."""
    shapes = sorted({re.sub(r"\.\d+(?=\.|$)", ".*", p) for p in paths})
    return shapes[0] if len(shapes) == 1 else ", ".join(shapes)


# --- the module tree ----------------------------------------------------------------------------------


def _paths_of(model: nn.Module, path: str) -> list[str]:
    """Every path at which the module at ``path`` (or, after a patch, its replacement) is held."""
    target = model.get_submodule(path) if path else model
    return [p for p, m in model.named_modules(remove_duplicate=False) if m is target and p] or [path]


def _set(model: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


def _owner(model: nn.Module, path: str) -> tuple[nn.Module, str]:
    parent, _, leaf = path.rpartition(".")
    return (model.get_submodule(parent) if parent else model), leaf
