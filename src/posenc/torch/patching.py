"""Make a model's positions exact in one call: :func:`patch` finds every positional component of a torch
model, proves what it computes, and replaces it with posenc's exact equivalent; :func:`unpatch` restores it.

What is found, and how each is made exact:

* **rotary embeddings** — a module holding an ``inv_freq`` buffer (or ``{layer_type}_inv_freq`` buffers,
  Gemma 3's per-layer RoPE) and the ``config`` it was built from (Hugging Face's ``*RotaryEmbedding``: every
  rope type, partial rotary, M-RoPE): replaced by :class:`posenc.torch.RotaryEmbedding` built from that
  config, on the same device. Its persistent buffers, if it had any, are kept, so the model's
  ``state_dict`` keeps its keys and values;
* **sinusoidal tables** — a floating buffer, ``nn.Embedding`` weight or plain tensor attribute (VideoMAE's) of
  two axes (size-1 axes aside) whose dotted name has a positional word (``pe``, ``pos``, ``position(s)``,
  ``positional``, ``sinusoidal``, ``timing``, ``sincos``: the PyTorch tutorial's ``pe``, fairseq/M2M100's
  ``embed_positions.weights``, Whisper's encoder ``embed_positions``, DistilBERT's ``position_embeddings``, a
  DiT's 2-D ``pos_embed``): its rows identified (:func:`posenc.porting.identify`: every named 1-D variant,
  fitted options, the 2-D/3-D grids), then overwritten in place with posenc's exact rows of that variant, in
  the tensor's own dtype (the module, its forward and its ``state_dict`` keys stay as they are). A table that
  starts with rows of zeros (CogVideoX's joint table: the text tokens' places, then the 3-D grid) keeps them,
  and the rows after them are identified and made exact;
* **diffusers ``Timesteps``** — replaced by :class:`posenc.torch.Timesteps` with the same options;
* **sinusoids computed in forward** (kind "computed", found by their class's source:
  :mod:`posenc.torch.computed`) — DETR's ``PositionEmbeddingSine`` replaced by
  :class:`posenc.torch.DetrSinePositionEmbedding`, and a 1-D sinusoid of a form posenc reads (Pegasus-X's
  positions, a timestep embedding, fixed rows) by posenc's encoding, each called as the original was; the
  others are left alone, with the reason.

**The proofs** (:mod:`posenc.torch.proofs`, pure functions over the values this module reads from the
model). A component is replaced only where the original is shown to compute posenc's values up to its own
rounding error, and every allowance is derived from that error at the compared values; none reaches
:data:`~posenc.torch.proofs.CAP` = 2⁻⁴ of the values' amplitude. Anything that cannot be proven — a learned
table, an unknown variant, a module built without a config — is left alone, with the reason, in the
:class:`PatchReport`. Rotary: its ``attention_scaling`` and each frequency buffer it holds are its config's
(within their storage's rounding and what float32 code forming them errs), and its cos/sin equal posenc's
on every position below 256 and a spread up to ``max_position_embeddings`` within what float32 angles and
those frequencies err there (a module on meta: its attention_scaling and config alone); tables: each value
within what the code that built it errs at its position and frequency; timesteps: diffusers' embedding of
t = 0..1000 within float32's rounding; DETR's sine: its output on probe masks (a full and a padded image)
within float32's rounding of its frequencies and angles at DETR's own positions; a 1-D sinusoid computed in
forward: its values at positions 0, 1, ... proven as a table's rows.

A rotary module that emits its cos/sin in interleaved pairs (Cohere, GLM: ``[c0, c0, c1, c1, ...]``, read
from its values at positions 0..63) is its model's design and is replaced by posenc's module in that layout;
an M-RoPE module is also compared at three different ids per token (which tell its layout apart), and one
whose own ``mrope_section`` (a family default) is not its config's is left alone. A plain attribute of the
original that posenc's module lacks (LFM3's ``layer_types``) is read through it.

**The model's own forward** is the last proof (:mod:`posenc.torch.probe`): after the swaps, a Hugging Face
model runs on probe inputs and must give its outputs of before within what exact positions move them; if it
raises or they move, every swap is undone and each component declined with what the forward said.

**All or nothing.** Every proof runs before anything changes (a proof runs the original's forward on
probes: what that forward changes in its module — "dynamic"/"longrope" frequency updates — is put back);
then every swap is applied, and if one fails, those done are undone and the error raised: the model is as
it was. An error in a proof (a tensor that cannot be read) is raised before anything changed.

**The rotary apply** (``fused=True``; the default where the model's rotary embedding is on a CUDA device
and triton is present: there the fused apply rotates from exact cos/sin at less memory traffic than a
table's (it reads q and k once and a small cos/sin buffer of the distinct positions); elsewhere
``patch`` keeps the model's own apply unless asked, so that only the positional values change). Where the
attention calls its apply is read from a table, one row per model family (:mod:`posenc.torch.families`: the
module-global name the attention's ``forward`` calls, its signature, its layout, the applies left alone — a
vision tower's); a family with no row gets the generic row: an attention ``forward`` that calls
``apply_rotary_pos_emb`` and no other rotary apply. Every attention module so placed gets an instance
``forward``: its class's own, rebuilt at this ``patch`` from its module's globals *as they are now*, with
posenc's apply in that name's place (the library's module and class are not touched; the rebuilt forward
is held by the instance alone, and ``unpatch`` removes it: a later ``patch`` sees the module's bindings as
they are then). The apply computes ``x · cos + turn(x) · sin`` in float32 and rounds the result to q's dtype
(:func:`posenc.torch.apply_rotary`), from float32 cos/sin, which the patched rotary embedding then returns; on
CUDA it is the fused kernel (:func:`posenc.torch.apply_rotary` given position ids: their cos/sin computed on
the device, then one rotation kernel; the same bits). The position ids reach it through one named channel: the
patched rotary embedding records, in a context variable of the running thread (or task), each cos it returns
with its ids, parameters and ``seq_len``; posenc's apply uses them only for that very cos tensor (identity),
and otherwise rotates by cos/sin. Nothing rides on a tensor, and nothing is recorded or read under
``torch.compile`` (where the kernel does not run). Before that, each distinct apply function of the model, as
its module's globals hold it now, is run on float32 probes and must give posenc's bits (in float32, the two
are the same arithmetic); an apply that is not the library's own (rebound since import: another library's
patch, a ``mock.patch``, a wrapper) is not replaced — posenc would silently drop what the user put there — nor
is one of a model whose attention also rotates by an apply posenc has no equivalent for (DeepSeek-V3's
``apply_rotary_pos_emb_interleave``), or whose attention ``forward`` is set on the instance (a hook, a user's
wrapper) or wrapped by a decorator (``__wrapped__``): each keeps its own apply, with the reason. In a float32
model the logits do not change by a bit; in bfloat16 and float16 the rotation is computed in float32 from
exact cos/sin and rounded to the model's type at the end, where Hugging Face's rounds cos/sin and then
three more times (not correctly rounded in every case: the float32 products and sum round first).

Transformers' own seam was considered first. transformers 5.23 decorates ``apply_rotary_pos_emb`` with
``use_kernel_forward_from_hub("rotary_pos_emb")`` (``use_kernel_func_from_hub`` is its deprecated alias) and
the attention classes that call it with ``use_kernelized_func(apply_rotary_pos_emb)``, and its default
kernel mapping names Hub kernels for "rotary_pos_emb" (CUDA, ROCm and XPU, inference only). These hooks are
identity decorators unless the separate ``kernels`` package is installed; with it, ``kernelize(model)``
loads a kernel *repository* (from the Hub, or a local kernel package) chosen by a registered or
context-scoped mapping of layer names, by device and mode — it runs a package's code, not a Python function
an adapter hands in, and the attention ``forward`` still calls the module-global name. So there is no
instance- or model-level hook that takes posenc's apply, and the family table is the seam.

``patch`` changes nothing outside the model it is given (no monkey-patching of a library's functions or
classes); it is idempotent (a second call finds posenc's modules and exact tables, and keeps the first
call's originals); its modules stay exact after ``model.to(dtype)``, but a table is exact in the dtype it
held when patched: cast afterwards (``model.half()``), its rows are rounded a second time, from float32
(a few values 1 ulp off; patch again after the cast, or cast first). The originals are kept on the model
(``model._posenc_originals``) and on each replacement, which applies ``.to()``, ``.to_empty()`` and the
like to its original too (that original is in neither ``state_dict`` nor ``modules()``). :func:`unpatch`
gives back what the model would hold had it never been patched: each original module where its replacement
still is (its persistent buffers: the replacement's current ones), each table's values where the table
still holds posenc's (cast as the model was), the attention modules' own ``forward`` where posenc's is
still set; what the user changed since is left as it is.

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
import contextvars
import copy
import dataclasses
import functools
import inspect
import itertools
import math
import os
import re
import sys
import textwrap
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import rope, validation
from . import (
    anyflow,
    axial,
    computed,
    families,
    forms,
    grid_rope,
    kandinsky,
    length_rope,
    ltx,
    period_time,
    proofs,
    su_rope,
)
from .fused_rotary import by_positions
from .kernels.common import KERNEL_DEVICES, kernel_module
from .modules import DetrSinePositionEmbedding
from .modules import Timesteps as ExactTimesteps
from .probe import Outputs, agree, blind, probe_of
from .rotary import RotaryEmbedding, rotate
from .tensors import _dtype_name, _to_tensor, _tracing

__all__ = ["Component", "PatchReport", "find", "patch", "prove", "read_table", "unpatch"]

#: Why a module that computes its sinusoids in its forward is neither judged nor replaced.
COMPUTED = "computes its sinusoids in its forward: posenc has no reader for it yet"
#: Words of a dotted name that mark a positional table.
_WORDS = frozenset(
    {"pe", "pos", "position", "positions", "positional", "sinusoidal", "timing", "sincos", "wpe"}
)
#: The attribute of a patched model that keeps the originals: {path: _Original}.
_ORIGINALS = "_posenc_originals"
#: The attribute of a replacement module (in its ``__dict__``: no child, no state) that holds the original.
_ORIGINAL = "_posenc_original"


@dataclasses.dataclass
class Component:
    """One positional component of a model: ``path`` in the module tree (a pattern such as
    ``model.layers.*.self_attn`` for the rotary apply of every layer), ``kind`` ("rotary", "table",
    "timesteps", "computed" or "rotary-apply"), ``variant`` (what it was identified as), ``difference``
    (the largest |original − posenc| at the compared values; NaN when not compared), ``tolerance`` (what
    the original's own rounding allows there, never above :data:`posenc.torch.proofs.CAP` of the
    amplitude), ``replaced``, and ``reason`` (how it was proven, or why it was left alone)."""

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
        width = validation.integer("width", width, minimum=20)
        lines = [
            f"posenc patch: {len(self.replaced)} positional component(s) made exact, "
            f"{len(self.skipped)} left alone"
        ]
        for c in self.components:
            lines += textwrap.wrap(c.as_text(), width, initial_indent="  ", subsequent_indent="      ")
        return "\n".join(lines)


@dataclasses.dataclass
class _Original:
    """What :func:`patch` replaced at one path: ``kind`` "module" (``value``: the original module, also held
    by its replacement), "table" (``value``: a copy of the original values; ``written``: how to rebuild what
    posenc wrote, to tell whether the table still holds it), "forward" (an attention module's own) or
    "method" (``value``: the name of the method shadowed on the instance: XLNet's relative encoding, V-JEPA
    2's rotation, Gemma 3n's audio timing signal)."""

    kind: str
    value: Any = None
    written: Any = None


#: One change of a patch: (do it, undo it).
_Step = tuple[Callable[[], None], Callable[[], None]]


def patch(model: nn.Module, *, fused: bool | None = None) -> PatchReport:
    """Replace every positional component of ``model`` that can be proven by posenc's exact equivalent
    (module docstring); returns the :class:`PatchReport`. All or nothing: every proof runs first, then
    every swap; a swap that fails undoes those done before the error is raised.

    ``fused`` (default: True when the model's rotary embedding is on a CUDA device and triton is present)
    also gives the model's attention modules posenc's rotary apply (see "the rotary apply" in the
    module docstring): one more component, kind "rotary-apply". ``fused=False`` leaves (or puts back)
    the model's own apply.

    >>> report = patch(torch.nn.Linear(4, 4))
    >>> report.components, report.as_text()
    ([], 'posenc patch: 0 positional component(s) made exact, 0 left alone')
    """
    _check_model(model)
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(f"fused must be True, False or None (None: True on CUDA); got {fused!r}")
    held = model.__dict__.get(_ORIGINALS)
    originals = {} if held is None else held
    steps: list[_Step] = []
    if held is None:
        steps.append((lambda: model.__dict__.__setitem__(_ORIGINALS, originals), lambda: _forget(model)))
    components, planned, changed = [], [], []
    for path, kind, what in find(model):  # every proof first: nothing changes until all are done
        component, changes, replacement = _component(model, path, kind, what, originals)
        components.append(component)
        steps += changes
        changed += [component] if changes else []
        if isinstance(replacement, _PatchedRotary) and replacement.form == "full":
            planned.append(replacement)
    # the fused apply takes the (cos, sin) pair alone: a complex or half-width form keeps the model's apply
    rotaries = [m for m in model.modules() if isinstance(m, _PatchedRotary) and m.form == "full"] + planned
    if fused is None:
        fused = any(_on_kernel_device(m) for m in rotaries)
    steps += _unfuse(model, originals, rotaries)
    if fused and rotaries:
        component, changes = _fuse(model, originals, rotaries)
        components.append(component)
        steps += changes
        changed += [component] if changes and component.replaced else []
    probe = probe_of(model) if changed else "nothing changes"
    before, unrun = None, probe if isinstance(probe, str) else ""
    if callable(probe):
        try:
            before = _run_kept(model, probe)
        except Exception as error:  # the model's own forward fails on the probe, unpatched: no evidence
            unrun = f"its forward raised {type(error).__name__} on the probe inputs before any swap"
    unseen = blind(before) if before is not None else None  # NaN everywhere (random weights): no evidence
    before = None if unseen is not None else before
    undo = _apply_all(steps)
    if before is not None:
        try:
            problem = agree(before, _run_kept(model, probe))
        except Exception as error:
            problem = f"its forward raised {type(error).__name__}: {str(error)[:160]}"
        if problem is not None:  # all or nothing: every swap undone, each change declined with the reason
            undo()
            reason = f"the model's own forward on probe inputs after the swaps: {problem} (every swap undone)"
            declined = (dataclasses.replace(c, replaced=False, reason=reason) for c in changed)
            return PatchReport(_put(components, changed, declined))
    suffix = "; the model's forward: outputs as before"
    if isinstance(before, dict):  # a model with no forward of its own: its parts' (Qwen2.5-Omni's)
        suffix = f"; the forwards of its {', '.join(before)}: outputs as before"
    suffix = f"; forward not run: {unrun}" if before is None else suffix
    suffix = f"; forward not compared: {unseen} before any swap" if unseen is not None else suffix
    proven = (dataclasses.replace(c, reason=c.reason + suffix) for c in changed)
    return PatchReport(_put(components, changed, proven))


def _put(components: list[Component], old: list[Component], new: Any) -> list[Component]:
    """``components`` with each of ``old`` (by identity) replaced by the next of ``new``."""
    swap = {id(c): n for c, n in zip(old, new, strict=True)}
    return [swap.get(id(c), c) for c in components]


def _check_model(model: Any) -> None:
    """Refuse (TypeError) what is not a model: a tensor, None, a module class rather than an instance."""
    if not isinstance(model, nn.Module):
        hint = " (a class: build the model first)" if isinstance(model, type) else ""
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}{hint}")


def unpatch(model: nn.Module) -> int:
    """Give back what :func:`patch` replaced in ``model``: what the model would hold had it never been
    patched, after ``.to()``, ``.to_empty()`` and the user's changes alike (module docstring). Returns how
    many components were restored (the rotary apply of every attention module: one). A model never
    patched: 0."""
    _check_model(model)
    originals = model.__dict__.pop(_ORIGINALS, {})
    modules = {id(o.value) for o in originals.values() if o.kind == "module"}
    swaps = [
        (path, module)
        for path, module in model.named_modules(remove_duplicate=False)
        if path and id(module.__dict__.get(_ORIGINAL)) in modules
    ]
    restored = set()
    for path, replacement in swaps:  # where the replacement still is, and only there
        original = replacement.__dict__[_ORIGINAL]
        _give_back_state(replacement, original)
        original.train(replacement.training)  # the mode the model gave its module meanwhile
        _set(model, path, original)
        restored.add(id(original))
    count, forward = len(restored), False
    for path, entry in originals.items():
        if entry.kind == "forward":
            module = _module_at(model, path)
            mine = None if module is None else module.__dict__.get("forward")
            if isinstance(mine, _ExactApplyForward) and mine.module is module:
                del module.__dict__["forward"]
                forward = True
        elif entry.kind == "table":
            count += _restore_table(model, path, entry)
        elif entry.kind == "method":
            module = _module_at(model, path)
            if module is not None and isinstance(module.__dict__.get(entry.value), computed.SHADOWS):
                del module.__dict__[entry.value]
                count += 1
    return count + forward


def _run_kept(model: nn.Module, probe: Callable[[], Outputs]) -> Outputs:
    """``probe()``, with what it changes in the model's rotary modules put back (:func:`kept_state`)."""
    with contextlib.ExitStack() as stack:
        for module in model.modules():
            if _kind(module) == "rotary":
                stack.enter_context(kept_state(module))
        return probe()


def _forget(model: nn.Module) -> None:
    model.__dict__.pop(_ORIGINALS, None)


def _apply_all(steps: list[_Step]) -> Callable[[], int]:
    """Do every step; if one raises, undo those done (last first) and raise that error. Returns the
    function that undoes them all (last first; how many could not be undone)."""
    done: list[Callable[[], None]] = []

    def undo_all() -> int:
        failed = 0
        for undo in reversed(done):
            try:
                undo()
            except Exception:  # keep undoing the others
                failed += 1
        return failed

    try:
        for do, undo in steps:
            do()
            done.append(undo)
    except BaseException as error:
        failed = undo_all()  # the first error is the one raised
        if failed:
            error.add_note(f"posenc.torch.patch: {failed} change(s) could not be undone")
        raise
    return undo_all


def _record(originals: dict, path: str, entry: _Original) -> _Step:
    """The step that keeps ``entry`` as the original at ``path`` (the first call's stays)."""
    added: list[bool] = []

    def do() -> None:
        added.append(path not in originals)
        originals.setdefault(path, entry)

    def undo() -> None:
        if added and added[-1]:
            originals.pop(path, None)

    return do, undo


def _swap(model: nn.Module, path: str, replacement: nn.Module) -> list[_Step]:
    """The steps that put ``replacement`` at every path holding the module at ``path``, in the mode (training
    or eval) that module is in: a module built fresh is in training, the model it goes into may not be."""
    steps = []
    for where in _paths_of(model, path):
        previous = model.get_submodule(where)
        steps.append(
            (
                functools.partial(_set_in_mode, model, where, replacement, previous.training),
                functools.partial(_set, model, where, previous),
            )
        )
    return steps


# --- finding and proving ------------------------------------------------------------------------------


def find(model: nn.Module) -> list[tuple[str, str, Any]]:
    """The positional components of ``model``, each once, in module order: ``(path, kind, what)`` with kind
    "rotary", "timesteps" or "computed" (a module that computes positional sinusoids in its own code,
    found by its source: ``what``: the module) or "table" (``what``: the tensor — a buffer, a parameter or
    a plain tensor attribute — ``path`` its dotted name). posenc's own modules are found too.

    >>> from posenc.torch import Timesteps
    >>> [(path, kind) for path, kind, _ in find(torch.nn.Sequential(Timesteps(8, True, 0)))]
    [('0', 'timesteps')]
    """
    _check_model(model)
    found, seen, computing = [], set(), {}
    for path, module in model.named_modules():
        if id(module) in seen:
            continue
        seen.add(id(module))
        kind = _kind(module)
        if kind is not None:
            found.append((path, kind, module))
            continue
        tensors = [*module.named_buffers(recurse=False), *module.named_parameters(recurse=False)]
        tensors += [  # a table held as a plain tensor attribute (VideoMAE's position_embeddings)
            (name, value) for name, value in vars(module).items() if type(value) is torch.Tensor
        ]
        for name, tensor in tensors:
            full = f"{path}.{name}" if path else name
            if tensor.is_floating_point() and sum(s > 1 for s in tensor.shape) == 2 and _positional(full):
                if _relative_cache(module, tensor, computing):  # wav2vec2-conformer's: its forward's rows
                    found.append((path, "computed", module))
                else:
                    found.append((full, "table", tensor))
                break
        else:
            cls = type(module)
            if cls not in computing:  # each class read once a call
                computing[cls] = _computes_sinusoids(cls)
            held = getattr(module, "pos_embed", True) is not None  # None: holds none
            if computing[cls] and held and not ran_nothing(module):
                found.append((path, "computed", module))
    return found


def ran_nothing(module: nn.Module) -> bool:
    """Whether ``module``'s class computes its sinusoids in ``__init__`` alone and the module holds no tensor
    of its own: the branch that computes them did not run (U-ViT's PatchEmbed with use_pos_embed=False)."""
    computing = [
        name
        for name, source in computed.methods_source(type(module))
        if re.search(_SINE_CALL, source) or re.search(_HELPER_CALL, source)
    ]
    return computing == ["__init__"] and not _holds_own_tensor(module)


def _relative_cache(module: nn.Module, tensor: torch.Tensor, computing: dict) -> bool:
    """Whether ``tensor`` is the cache of a module that computes a conformer's relative positions in its
    own code and gives them as its forward's rows (the "relative" form of
    :func:`posenc.torch.computed.sinusoid_convention`: wav2vec2-conformer's ``pe``, rows n − 1 .. −(n − 1),
    recomputed by its own code for a longer input): the module is the component, not its buffer."""
    if isinstance(tensor, nn.Parameter):
        return False
    cls = type(module)
    if cls not in computing:
        computing[cls] = _computes_sinusoids(cls)
    if not computing[cls] or computed.forward_names(module) not in _RELATIVE_NAMES:  # nothing run
        return False
    with kept_state(module):  # its probe reassigns its cache (in the probe's dtype): put back as it was
        return computed.sinusoid_convention(module) == "relative"


#: The forward signatures of a conformer's relative positions
#: (:data:`posenc.torch.computed.SINUSOID_CONVENTIONS`).
_RELATIVE_NAMES = (("hidden_states",), computed.SINUSOID_CONVENTIONS["relative"])


#: A class name, or the name of one of its methods, that says positional.
_POSITIONAL_CLASS = re.compile(r"posit|sine|sinus|rotary|rope|timestep|pos_?embed|embed_?nd", re.IGNORECASE)
_POSITIONAL_METHOD = re.compile(r"def \w*(posit|sinusoid|rotary)\w*\(", re.IGNORECASE)
#: A sine taken in source: ``sin(`` (``torch.sin(``, ``.sin()``) or ``polar(`` (cos + i·sin: Qwen-Image's).
_SINE_CALL = r"\bsin\(|\bpolar\("
#: A call of one of diffusers' positional helpers: positional in any class (T5 FiLM's decoder, U-ViT 2D and
#: PRX embed their timesteps with ``get_timestep_embedding`` in their own code).
_HELPER_CALL = r"\b(get_timestep_embedding|get_[123]d_rotary_pos_embed\w*|get_\w*sincos_pos_embed\w*)\("


def _computes_sinusoids(cls: type) -> bool:
    """Whether a module class computes positional sinusoids in its own code (kind "computed": DETR's
    ``PositionEmbeddingSine``, Pegasus-X's, XLNet's relative encoding): its name, or a method's, says
    positional, and its source takes a sine, or calls a function its module holds that does (V-JEPA 2's
    attention and its ``rotate_queries_or_keys``; diffusers' rotaries and their ``get_1d_rotary_pos_embed``).
    Read from the source text; nothing runs."""
    if cls.__module__.split(".")[0] in ("torch", "posenc"):
        return False
    source = _class_source(cls)
    if source is None:
        return False
    positional = _POSITIONAL_CLASS.search(cls.__name__) or _POSITIONAL_METHOD.search(source)
    if not positional:
        return re.search(_HELPER_CALL, source) is not None
    if re.search(_SINE_CALL, source) or re.search(_HELPER_CALL, source):  # EasyAnimate's: 3-D helper
        return True
    home = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else _namespace(cls)
    for name in set(re.findall(r"(?<![.\w])(\w+)\(", source)):
        function = home.get(name)
        library = getattr(function, "__module__", None) or ""
        if inspect.isfunction(function) and library.split(".")[0] not in ("torch", "numpy", "posenc"):
            try:
                if re.search(_SINE_CALL, inspect.getsource(function)):
                    return True
            except (OSError, TypeError):
                continue
    return False


def inside_code(module: nn.Module) -> str | None:
    """Where a module that is not itself positional (its class name says nothing of it) computes positional
    sinusoids inside its own code (a model's forward or method: T5 FiLM's decoder, U-ViT 2D, PRX, JoyImage):
    the reason it is not judged — posenc swaps positional modules, never other code; else None."""
    cls = type(module)
    if _POSITIONAL_CLASS.search(cls.__name__):
        return None
    for name, source in computed.methods_source(cls):
        helper = re.search(_HELPER_CALL, source)
        sine = _POSITIONAL_METHOD.search(source) and re.search(_SINE_CALL, source)
        if (helper or sine) and name == "__init__" and not _holds_own_tensor(module):
            continue  # what __init__ computes is kept in the module; it holds nothing: that branch never ran
        if helper or sine:
            what = f"calls {helper.group(1)}" if helper else "takes sines"
            return (
                f"computes positional sinusoids inside its own code (its {name} {what}): posenc swaps "
                "positional modules, never code inside another; not judged"
            )
    return None


def _holds_own_tensor(module: nn.Module) -> bool:
    """Whether ``module`` itself (not a submodule) holds a floating or complex tensor: a buffer, a parameter
    or an attribute, alone or in a list, tuple or dict (where a sinusoid its ``__init__`` computes is kept:
    Sana-WM's complex ``freqs``)."""
    held = [*module._buffers.values(), *module._parameters.values()]
    for value in vars(module).values():
        held += (
            list(value.values())
            if isinstance(value, dict)
            else (list(value) if isinstance(value, list | tuple) else [value])
        )
    return any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) for t in held)


#: Each class's source text, read once a process, and the lines of each class of a file, its file parsed
#: once: Python 3.11's inspect parses a class's whole module at each ``getsource`` (a model's find read ~150
#: classes of its modeling file that way: 6 s of an 11 s zoo row). Weakly keyed: a class that goes takes its
#: entry with it; a file's entry holds the lines it was parsed from (linecache's own list), is parsed again
#: when linecache's lines for it are new (the file changed), and the oldest of :data:`_FILES` goes first.
_SOURCES: weakref.WeakKeyDictionary[type, str | None] = weakref.WeakKeyDictionary()
_SPANS: dict[str, tuple[list[str], dict[str, tuple[int, int]]]] = {}
_FILES = 64


def _class_source(cls: type) -> str | None:
    """``cls``'s source text; where its module is no longer in ``sys.modules`` (inspect cannot find its
    file then), the source of its methods."""
    try:
        return _SOURCES[cls]
    except (KeyError, TypeError):
        pass
    source = _source_in_file(cls)
    if source is None:
        source = "\n".join(source for _, source in computed.methods_source(cls)) or None
    with contextlib.suppress(TypeError):  # a class that takes no weak reference: read each time
        _SOURCES[cls] = source
    return source


def _source_in_file(cls: type) -> str | None:
    """The text of ``cls``'s definition in its module's file (its decorators included; the first class of
    its qualified name there, as inspect finds it), or None where there is no file to read it from."""
    import ast
    import linecache

    module = sys.modules.get(cls.__module__)
    try:
        file = inspect.getsourcefile(cls) if module is not None else None
    except (OSError, TypeError):  # a built-in class; one of `python -c` or a REPL (its __main__ has no file)
        return None
    lines = linecache.getlines(file, vars(module)) if file else []
    if not lines:
        return None
    held = _SPANS.get(file)
    if held is None or held[0] is not lines:
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            return None
        spans: dict[str, tuple[int, int]] = {}

        def visit(node: ast.AST, prefix: str) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    spans.setdefault(prefix + child.name, (first, child.end_lineno or child.lineno))
                    visit(child, f"{prefix}{child.name}.")
                elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                    visit(child, f"{prefix}{child.name}.<locals>.")
                else:
                    visit(child, prefix)

        visit(tree, "")
        while len(_SPANS) >= _FILES:
            _SPANS.pop(next(iter(_SPANS)), None)
        held = _SPANS[file] = (lines, spans)
    span = held[1].get(cls.__qualname__)
    return "".join(lines[span[0] - 1 : span[1]]) if span else None


def _namespace(cls: type) -> dict[str, Any]:
    """The globals of ``cls``'s module read from its methods, where the module is not in ``sys.modules``
    (a module imported and then removed)."""
    for value in vars(cls).values():
        if inspect.isfunction(value):
            return value.__globals__
    return {}


def _kind(module: nn.Module) -> str | None:
    """The kind of a positional module, posenc's or another library's: "rotary", "timesteps", else None."""
    if isinstance(module, RotaryEmbedding | axial.AxialRope | computed.HfDinoV3Rope):
        return "rotary"
    if isinstance(module, ExactTimesteps):
        return "timesteps"
    if isinstance(module, _OWN_COMPUTED):
        return "computed"
    if computed.dinov3_form(module) or computed.timm_rope_form(module):  # its cache is not a table of its own
        return "computed"
    buffers = dict(module.named_buffers(recurse=False))
    if "inv_freq" in buffers and computed.sinusoid_convention(module) in ("relative", "time", "coordinates"):
        return "computed"  # a conformer's relative positions (Parakeet's), a time's, coordinates': no rotary
    if "inv_freq" in buffers or any(k.endswith("_inv_freq") for k in buffers):
        return "rotary"
    if type(module).__name__ == "Timesteps" and hasattr(module, "num_channels"):
        return "timesteps"
    return None


def _component(
    model: nn.Module, path: str, kind: str, what: Any, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """The proof of one component: its :class:`Component`, the steps that replace it (none where it is
    left alone) and its replacement module (tables: None). Changes nothing."""
    if isinstance(what, (RotaryEmbedding, ExactTimesteps, axial.AxialRope, *_OWN_COMPUTED)):
        return Component(path, kind, "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    if kind == "computed":
        return _computed(model, path, what, originals)
    if kind == "rotary":
        return _rotary(model, path, what, originals)
    if kind == "timesteps":
        return _timesteps(model, path, what, originals)
    component, steps = _table(path, what, originals)
    return component, steps, None


def prove(model: nn.Module, path: str, kind: str, what: Any) -> Component:
    """The proof :func:`patch` runs for one component found by :func:`find` (``replaced``: whether patch
    would replace it, else ``reason``), without changing anything: what an audit's fix may promise. The
    model's own forward, run only by patch itself, may still decline it."""
    return _component(model, path, kind, what, {})[0]


def _returns_angles(module: nn.Module) -> bool:
    """Whether a rotary of forward(seq_len, device) or forward(hidden_states) returns its angles, positions
    times its inv_freq (as [θ, θ] halves), rather than cos and sin: Stable Audio 3's and SAME's, CLVP's
    (``(1, n, 2F)`` for an input of n), whose models take cos and sin of them in their own code. Its plain
    attributes (CLVP's cache of the angles) are as they were after the probe."""
    inv = getattr(module, "inv_freq", None)
    names = computed.forward_names(module)
    if names not in (("seq_len", "device"), ("hidden_states",)) or not isinstance(inv, torch.Tensor):
        return False

    def angles() -> bool:  # its code and the comparison both in the probe: meta tensors cannot be compared
        if names == ("hidden_states",):
            got = module(torch.zeros(1, 4, 1, device=inv.device))
            got = got[0] if isinstance(got, torch.Tensor) and got.dim() == 3 and len(got) == 1 else got
        else:
            got = module(4, inv.device)
        want = torch.outer(torch.arange(4, dtype=inv.dtype, device=inv.device), inv.reshape(-1))
        return isinstance(got, torch.Tensor) and torch.equal(got, torch.cat((want, want), dim=-1))

    with computed.untouched(module):
        return computed.probed(angles) is True


def _positional(name: str) -> bool:
    words = re.split(r"[._]", name.lower())
    return any(w in _WORDS for w in words)


#: The libraries whose positional classes posenc knows, by their code: a module of one of their classes, none
#: of its methods replaced, computes what posenc proved at its probes at every call.
_KNOWN_LIBRARIES = ("transformers", "diffusers", "timm")
#: Packages whose functions a known library's code may call (decorators, helpers) besides its own.
_CALLED_PACKAGES = ("torch", "numpy", "einops")


def _package_root(name: str) -> str | None:
    """The folder of an imported package ``name`` (with a trailing separator), or None."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return os.path.join(os.path.dirname(os.path.realpath(file)), "") if file else None


def _layers(function: Any) -> Iterator[Any]:
    """``function``, then each function it wraps (``__wrapped__``, as ``functools.wraps`` sets it), at most
    16; a 17th is yielded as None (a chain that long is no library's decorators)."""
    for _ in range(16):
        yield function
        function = getattr(function, "__wrapped__", None)
        if function is None:
            return
    yield None


def _code_outside(function: Any, library: str) -> str | None:
    """The file of the first layer of ``function`` (:func:`_layers`) whose code lies outside ``library``'s
    package and :data:`_CALLED_PACKAGES`', or None. Its code's file, not its ``__module__``:
    ``functools.wraps`` copies the wrapped function's module name onto a wrapper of code of its own."""
    roots = tuple(root for root in map(_package_root, (library, *_CALLED_PACKAGES)) if root)
    for layer in _layers(function):
        if layer is None:
            return "a chain of more than 16 wrappers"
        code = getattr(layer, "__code__", None)
        if code is not None and not os.path.realpath(code.co_filename).startswith(roots):
            return code.co_filename
    return None


def _callable_outside(value: Any, library: str) -> str | None:
    """Where a global ``value`` a library method calls runs code outside ``library`` (a function of
    another file, a ``functools.partial`` of one, an object whose class's ``__call__`` is one), or None
    (classes, modules and C functions: their calls are not a helper's code)."""
    for _ in range(16):
        if not isinstance(value, functools.partial):
            break
        if value.args or value.keywords:  # the library's own function, called otherwise
            return f"a functools.partial of {_named(value.func)} with arguments of its own"
        value = value.func
    if isinstance(value, types.FunctionType):
        return _code_outside(value, library)
    if isinstance(value, type | types.ModuleType | types.BuiltinFunctionType) or not callable(value):
        return None
    call = inspect.getattr_static(type(value), "__call__", None)
    if isinstance(call, types.FunctionType):
        return _code_outside(call, library)
    root = type(value).__module__.split(".")[0]
    return (
        None if root in (library, *_CALLED_PACKAGES, "builtins") else f"a {type(value).__qualname__} object"
    )


def _calls_outside(function: Any, library: str) -> str | None:
    """What ``function`` (or a layer it wraps) calls through its module's globals that runs code outside
    ``library``: "name (file)", or None. A helper rebound since import (a ``rotate_half`` or a
    ``get_timestep_embedding`` of a user's) changes what the library's own method computes."""
    for layer in _layers(function):
        code, names = getattr(layer, "__code__", None), getattr(layer, "__globals__", {})
        for name in code.co_names if code is not None else ():
            where = _callable_outside(names.get(name), library)
            if where is not None:
                return f"{name} ({where})"
    return None


def _accelerate_forward(module: nn.Module) -> bool:
    """Whether the forward set on ``module`` is accelerate's device hook around its class's own forward
    (``add_hook_to_module``: a partial of its ``new_forward``, the original kept as ``_old_forward``)."""
    hook, old = vars(module).get("_hf_hook"), vars(module).get("_old_forward")
    own = getattr(type(module), "forward", None)
    return (
        type(hook).__module__.split(".")[0] == "accelerate"
        and getattr(old, "__func__", None) is own
        and getattr(old, "__self__", None) is module
    )


def _foreign_code(module: nn.Module) -> str | None:
    """Why ``module``'s code is not a known library's own, or None where it is: a class of its MRO (up to
    torch's Module) defined outside the library of its class, or outside any of :data:`_KNOWN_LIBRARIES` (a
    subclass, a checkpoint's remote code), a method of one defined elsewhere (patched onto the class), a
    method set on the module itself, or forward hooks. Values equal at every probe prove nothing of code
    posenc does not know: a forward keyed on the batch, the type, the length or its earlier calls (a stale
    cache, transformers 4.38's "dynamic", the first row's positions for the whole batch) equals its
    config's RoPE at the probes and not in the model."""
    cls = type(module)
    library = cls.__module__.split(".")[0]
    tail = (
        "posenc replaces a module whose code it knows; with code of its own, what it computes at another "
        "batch, type, length or call cannot be proven from probes"
    )
    if library not in _KNOWN_LIBRARIES:
        known = ", ".join(_KNOWN_LIBRARIES)
        return f"its class {cls.__qualname__} is defined in {cls.__module__}, not in {known}: {tail}"
    for klass in cls.__mro__:
        if klass is nn.Module:
            break
        if klass.__module__.split(".")[0] != library:
            return f"its class derives from {klass.__qualname__}, defined in {klass.__module__}: {tail}"
        for key, value in vars(klass).items():
            function = getattr(value, "__func__", value)
            home = getattr(function, "__module__", None) or ""
            if inspect.isfunction(function) and home.split(".")[0] != library:
                return f"its method {klass.__qualname__}.{key} is defined in {home}, not in {library}: {tail}"
            if inspect.isfunction(function):
                where = _code_outside(function, library)
                if where is not None:
                    method = f"{klass.__qualname__}.{key}"
                    return f"its method {method} runs code of {where}, outside {library}: {tail}"
                called = _calls_outside(function, library)
                if called is not None:
                    return f"its method {klass.__qualname__}.{key} calls {called}, outside {library}: {tail}"
    hooked = _accelerate_forward(module)
    for key, value in vars(module).items():
        shadows = key in ("forward", "__call__") or (callable(value) and callable(getattr(cls, key, None)))
        if shadows and not (key == "forward" and hooked):  # a method shadowed: a partial, an object, ...
            return f"its {key} is set on the module itself ({type(value).__name__}): {tail}"
        function = getattr(value, "__func__", value)
        home = getattr(function, "__module__", None) or ""
        if (inspect.isfunction(function) or inspect.ismethod(value)) and home.split(".")[0] not in (
            library,
            "torch",
        ):
            return f"its {key} is set on the module itself, from {home or 'code of its own'}: {tail}"
    if module._forward_hooks or module._forward_pre_hooks:
        return f"it has forward hooks, which change what its forward returns: {tail}"
    return None


def _declined(
    path: str, kind: str, variant: str, reason: str, difference: float = math.nan, tolerance: float = math.nan
) -> tuple[Component, list[_Step], None]:
    """A component left alone, with the reason: nothing to change."""
    return Component(path, kind, variant, difference, tolerance, False, reason), [], None


def _rotary(
    model: nn.Module, path: str, module: nn.Module, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    config = getattr(module, "config", None)
    label = type(module).__name__
    scaled = su_rope.read_su_rope(module) if config is None else None
    if scaled is not None:  # LongRoPE written without a config (OmniGen's): read from its attributes
        how = (
            f"LongRoPE of its attributes (dim {scaled.params.head_dim}, base {scaled.params.base:g}, its "
            "short and long factors): equal to its own (cos, sin) of short ids and of ids past its "
            "original length within float32 rounding"
        )
        proof = su_rope.prove_su_rope(module, scaled)
        return _swap_proven(model, path, module, scaled, proof, "rope-longrope", how, originals, "rotary")
    coords = grid_rope.read_coords_rope(module) if config is None else None
    if coords is not None:  # timm's Gemma 4 ViT rotary: the patches' coordinates given
        return _coords_rope(model, path, module, coords, originals)
    ids = grid_rope.read_ids_rope(module) if config is None else None
    if ids is not None:  # MiniMax-H3's: each patch's position on each axis given
        return _ids_rope(model, path, module, ids, originals)
    stacked = length_rope.read_length_rope(module) if config is None else None
    if stacked is not None:  # wav2vec2-conformer's stack([cos, sin]) of (hidden_states), its inv_freq held
        return _length_rope(model, path, module, stacked, originals)
    sections = su_rope.read_sections_rope(module, computed.config_base(model)) if config is None else None
    if sections is not None:  # Ideogram 4's, Cosmos3-Omni's: Qwen3-VL's interleaved sections, no config
        p = sections.params
        how = (
            f"interleaved multimodal sections of its inv_freq (dim {p.head_dim}, base {p.base:g}, sections "
            f"{list(p.mrope_section)}): equal to its own (cos, sin) of probe ids on each axis within float32 "
            "rounding"
        )
        proof = su_rope.prove_sections_rope(module, sections)
        return _swap_proven(model, path, module, sections, proof, "rope-default", how, originals, "rotary")
    plain = su_rope.read_plain_rope(module) if config is None else None
    if plain is not None:  # a default rotary that holds only its inv_freq (diffusers' Anima)
        how = (
            f"a rotary of its inv_freq (dim {plain.params.head_dim}, base {plain.params.base:g}): equal to "
            "its own (cos, sin) of probe ids within float32 rounding"
        )
        proof = su_rope.prove_plain_rope(module, plain)
        return _swap_proven(model, path, module, plain, proof, "rope-default", how, originals, "rotary")
    if config is None:
        names = ", ".join(computed.forward_names(module))
        reason = (
            "no config to build it from: posenc builds a rotary from its model's config, or reads one of "
            f"the forms it knows, and its forward({names}) with an inv_freq is neither"
        )
        rough = computed.rough_inv_freq_base(dict(module.named_buffers(recurse=False)).get("inv_freq"))
        if rough is not None and computed.inv_freq_base(module.inv_freq) is None:
            if abs(rough - round(rough)) <= 1e-4 * rough:
                reason = (
                    f"its inv_freq fits several whole-number bases near {round(rough)} (a short buffer of a "
                    "large base: float32 fixes a base only to ~1e-6), and posenc names a base only where one "
                    "alone fits; no config gives it"
                )
            else:
                reason = (
                    f"its inv_freq holds a base of about {rough:.7g} that posenc cannot name: a float32 "
                    "buffer fixes a base only to ~1e-6 (300.7 and 300.69995 give one buffer, whose exact "
                    "values part at far positions), and posenc reads only a whole number that alone fits it; "
                    "no config gives it"
                )
        if _returns_angles(module):
            reason = (
                f"its forward({names}) returns the angles p·θ_i (one tensor), whose cos and sin its model "
                "takes in its own code: posenc's rotary gives exact cos and sin, not angles, so exact values "
                "here need that code replaced, which posenc does not do"
            )
        return _declined(path, "rotary", label, reason)
    reading = axial.read_axial(module)
    if reading is not None:
        return _axial(model, path, module, reading, originals)
    pixels = computed.read_hf_dinov3(module)
    if pixels is not None:
        return _hf_dinov3(model, path, module, pixels, originals)
    try:
        exact = _PatchedRotary(config, layout="half")  # the layout the module emits is read below
    except (ValueError, TypeError, KeyError) as error:
        return _declined(path, "rotary", label, f"posenc cannot build its rotary from its config: {error}")
    inv = next(b for k, b in module.named_buffers(recurse=False) if k.endswith("inv_freq"))
    exact = exact.to(inv.device)
    params = exact.params or next(iter(exact.layer_params.values()))
    variant = f"rope-{params.rope_type}"
    held = {k for k, _ in module.named_buffers(recurse=False)}  # Gemma 3 builds only the types it uses
    held_types = [t for t in exact.layer_params if f"{t}_inv_freq" in held] or [None]
    scaling = _scaling_mismatch(module, exact, held_types)
    if scaling is not None:
        return _declined(path, "rotary", variant, scaling)
    section = getattr(module, "mrope_section", None)  # M-RoPE as the module runs it (a family default)
    defaulted = None  # the family's mrope_section its config leaves out, read from the module
    if isinstance(section, dict):  # Cohere Compass's: a section per layer type
        reason = (
            f"its mrope_section is one per layer type ({section}): an M-RoPE per layer type, which posenc "
            "does not build (its per-layer rotaries take a config's sections, not a module's)"
        )
        return _declined(path, "rotary", variant, reason)
    if isinstance(section, (list, tuple)) and tuple(section) != tuple(params.mrope_section or ()):
        if params.mrope_section is not None or exact.params is None:
            reason = (
                f"the module splits its frequencies by mrope_section={list(section)}, its config by "
                f"{params.mrope_section}: posenc builds M-RoPE from the config alone"
            )
            return _declined(path, "rotary", variant, reason)
        if inv.dim() == 1 and sum(section) != inv.numel():
            reason = (
                f"its mrope_section {list(section)} (its config names none) covers {sum(section)} "
                f"frequencies and it holds {inv.numel()}: its own forward cannot split them, so this config "
                f"does not run as it is; set head_dim or partial_rotary_factor to a rotated width of "
                f"{2 * sum(section)}"
            )
            return _declined(path, "rotary", variant, reason)
        try:
            params = dataclasses.replace(params, mrope_section=tuple(section))
            exact = _PatchedRotary(params).to(inv.device)
        except (ValueError, TypeError) as error:
            reason = f"its mrope_section {list(section)} (its config names none) is no M-RoPE posenc builds: "
            reason += str(error)
            return _declined(path, "rotary", variant, reason)
        defaulted = list(section)
    cap = proofs.CAP
    if inv.device.type == "meta":
        foreign = _foreign_code(module)
        if foreign is not None:
            return _declined(path, "rotary", variant, f"on meta (no values to compare), and {foreign}")
        difference, tolerance = math.nan, math.nan
        how = "on meta: built from its config (no values to compare; its attention_scaling is the config's)"
    else:
        widened, exact, read = _width_from_frequencies(module, exact, inv)
        mismatch, gaps = _frequency_mismatch(module, exact)
        if mismatch is not None:
            return _declined(path, "rotary", variant, mismatch + widened)
        try:
            form = _form_of(module, exact, held_types[0])
            if form != "full":  # Llama 4's complex freqs_cis, GPT-OSS's half-width cos/sin
                exact = _like(exact, config, form=form).to(inv.device)
                variant += f" ({_FORM_NAMES[form]})"
            elif _emits_interleaved(module, exact, config, held_types[0]):  # Cohere, GLM: its design
                exact = _like(exact, config, layout="interleaved").to(inv.device)
                variant += " (interleaved)"
        except Exception as error:  # its forward is not (x, position_ids) -> (cos, sin)
            return _declined(path, "rotary", variant, _uncompared(error, module))
        try:
            compared_at = _compare_rotary(module, exact, config, held_types, gaps)
            difference, tolerance, worst, counted, elsewhere, far = compared_at
            turned = None  # M-RoPE's sections in blocks or interleaved (Qwen3-VL's), as the module runs them
            if worst is not None and exact.params is not None and exact.params.mrope_section:
                turned = not exact.params.mrope_interleaved
                other = _PatchedRotary(
                    dataclasses.replace(exact.params, mrope_interleaved=turned), layout=exact.layout
                )
                other = other.to(inv.device)
                again = _compare_rotary(module, other, config, held_types, gaps)
                if again[2] is None:
                    exact, (difference, tolerance, worst, counted, elsewhere, far) = other, again
                else:
                    turned = None
        except Exception as error:  # its forward is not (x, position_ids) -> (cos, sin)
            return _declined(path, "rotary", variant, _uncompared(error, module))
        if worst is not None:
            where, got, allowed = worst
            reason = (
                f"its values are not this config's RoPE within its own rounding error: {got:.3g} at {where}, "
                f"where its own error is at most {allowed:.3g}"
            )
            return _declined(path, "rotary", variant, reason, got, allowed)
        if counted is None:
            reason = f"cannot be proven: its own error exceeds {cap:g} of its amplitude at every probe"
            return _declined(path, "rotary", variant, reason)
        foreign = _foreign_code(module)
        if foreign is not None:  # equal at the probes, and code posenc does not know
            return _declined(
                path, "rotary", variant, f"equal to this config's RoPE at its probes, but {foreign}"
            )
        compared, total = counted
        layers = rope.layer_types(config)
        how = read + "frequencies and attention_scaling its config's; equal to its own cos/sin within their "
        how += "rounding error" + (f" (layer types {', '.join(layers)})" if layers else "")
        if defaulted is not None:
            how += f"; its mrope_section {defaulted} its family's default ("
            how += "interleaved" if exact.params.mrope_interleaved else "in blocks"
            how += "; its config names none)"
        elif turned is not None:
            how += f"; its mrope_section {list(exact.params.mrope_section)} "
            how += "interleaved, as its module runs it (read from its values; its config does not say so)"
            if not turned:
                how = how.replace("interleaved, as", "in blocks, as").replace(
                    "does not say so", "says interleaved"
                )
        if compared < total:
            how += f", at the {compared} of {total} values where that error is below {cap:g} of the amplitude"
        limit = int(getattr(config, "max_position_embeddings", 0) or 4096)
        if far[0]:
            how += f"; past position {limit - 1} too, to {far[1]}, where its own error leaves values "
            how += "comparable"
        else:
            how += (
                f"; compared below position {limit} only (past it its own forward does not run, or its own "
                "error exceeds the cap at every value)"
            )
        how += _uncompared_values(elsewhere, limit)
    exact.config = config  # as the original held it (read by code that asks the module for its config)
    exact.held = _dynamic_state(module, exact, held_types, config)
    shared = []
    for key, value in module.state_dict().items():  # keep the checkpoint's keys (a persistent inv_freq)
        exact.register_buffer(key, value, persistent=True)
        shared.append(key)
    exact.__dict__[_ORIGINAL] = module  # follows the replacement's .to() / .to_empty(); no child, no state
    exact.__dict__["_posenc_shared"] = tuple(shared)
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, exact)]
    return Component(path, "rotary", variant, difference, tolerance, True, how), steps, exact


def _axial(
    model: nn.Module, path: str, module: nn.Module, reading: axial.Axial | str, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """Hugging Face's axial rotary of a grid (:mod:`posenc.torch.axial`): proven on a probe grid, then
    replaced by :class:`posenc.torch.axial.AxialRope` laid out by its own ``recomposition_frequencies``."""
    variant = f"rope-{axial.AXIAL}"
    proof = reading if isinstance(reading, str) else axial.prove_axial(module, reading)
    if isinstance(proof, str):
        return _declined(path, "rotary", variant, proof)
    difference, allowed = proof
    replacement = _holding(_PatchedAxialRope(reading, module), module)
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, replacement)]
    side = len(axial.PROBE)
    how = (
        f"its config's axial rotary ({reading.describe()}): its frequencies theirs, its layout its own "
        f"recomposition_frequencies (a pure gather); equal to its own (cos, sin) on a {side}×{side} grid of "
        f"coordinates to {axial.PROBE[-1]} within float32 rounding"
    )
    return Component(path, "rotary", variant, difference, allowed, True, how), steps, replacement


def _scaling_mismatch(module: nn.Module, exact: RotaryEmbedding, held_types: list[str | None]) -> str | None:
    """Why the module's ``attention_scaling`` (or ``{layer_type}_attention_scaling``) is not its config's,
    or None (:func:`posenc.torch.proofs.scaling_matches`); a module without the attribute is judged by its
    values alone."""
    for layer_type in held_types:
        name = "attention_scaling" if layer_type is None else f"{layer_type}_attention_scaling"
        value = getattr(module, name, None)
        if value is None or isinstance(value, bool):
            continue
        try:
            value = float(value)
        except (TypeError, ValueError, RuntimeError):
            continue
        want = rope.attention_scaling(exact.params if layer_type is None else exact.layer_params[layer_type])
        if not proofs.scaling_matches(value, want):
            return f"its {name} {value:.9g} differs from its config's {want:.9g}"
    return None


def _frequency_mismatch(
    module: nn.Module, exact: RotaryEmbedding
) -> tuple[str | None, dict[str | None, np.ndarray]]:
    """Why a frequency buffer of the module (``inv_freq``, ``original_inv_freq``, per layer type) is not
    its config's, or None; and per layer type the largest |stored − exact| of each frequency
    (:func:`posenc.torch.proofs.check_frequencies`: each stored θ_i within its storage's half ulp plus what
    float32 code forming it errs). "dynamic" and "longrope" may hold the set of another length: the one of
    the lengths it may have seen (its short and long factors; the dynamic base of its
    ``max_seq_len_cached``) that is nearest counts."""
    gaps: dict[str | None, np.ndarray] = {}
    for name, buffer in module.named_buffers(recurse=False):
        if not name.endswith("inv_freq"):
            continue
        prefix = name[: -len("inv_freq")].rstrip("_")
        layer_type = prefix.removesuffix("original").rstrip("_") or None
        if (layer_type is None) != (exact.params is not None) or (
            layer_type is not None and layer_type not in exact.layer_params
        ):
            continue  # a buffer of no layer type of the config: not one its forward reads
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        if not buffer.is_floating_point():
            return f"its {name} holds {buffer.dtype} values, not frequencies", gaps
        stored = buffer.detach().to("cpu", torch.float64).numpy().reshape(-1)
        sets = _frequency_sets(module, params, layer_type)
        check = proofs.check_frequencies(stored, buffer.dtype, sets)
        read = f"the RoPE posenc reads from its config (theta {params.base:g}"
        if check is None:
            count = len(rope.inv_freq(params))
            return f"its frequencies are not {read}): {name} holds {stored.size}, it gives {count}", gaps
        if not check.within:
            # the same set in another order (ERNIE 4.5 VL interleaves its sections' frequencies)
            ordered = proofs.check_frequencies(np.sort(stored)[::-1].copy(), buffer.dtype, sets)
            if ordered is not None and ordered.within:
                reason = (
                    f"its frequencies are {read}, {stored.size} frequencies) in another order ({name}): a "
                    "layout of its own, which posenc does not build"
                )
                return reason, gaps
            reason = (
                f"its frequencies are not {read}, {stored.size} frequencies): max relative difference "
                f"{check.relative:.3g} ({name}, {str(buffer.dtype)[6:]}; its storage and float32 code allow "
                f"{check.allowed:.2g}): the module departs from that reading, or its code reads the config "
                "otherwise"
            )
            return reason, gaps
        gaps[layer_type] = np.maximum(gaps[layer_type], check.gap) if layer_type in gaps else check.gap
    if not gaps:
        names = ", ".join(k for k, _ in module.named_buffers(recurse=False) if k.endswith("inv_freq"))
        return f"its frequency buffers ({names}) are none of its config's layer types", gaps
    return None, gaps


def _frequency_sets(
    module: nn.Module, params: rope.RopeParameters, layer_type: str | None
) -> list[np.ndarray]:
    """:func:`posenc.torch.proofs.frequency_sets` of a module: with the length it last ran at
    (``max_seq_len_cached``, Hugging Face's dynamic update) where it holds one."""
    name = "max_seq_len_cached" if layer_type is None else f"{layer_type}_max_seq_len_cached"
    return proofs.frequency_sets(params, length=_grown_length(getattr(module, name, None)))


def _dynamic_state(
    module: nn.Module, exact: RotaryEmbedding, held_types: list[str | None], config: Any
) -> dict[str | None, tuple[int, int]] | None:
    """Where the module is Hugging Face's "dynamic" (it holds ``original_max_seq_len``), per layer type of
    a type whose frequencies grow with the length: the length it holds now (its ``max_seq_len_cached``) and
    its original length — the state :meth:`_PatchedRotary._held_length` carries on; else None."""
    original = _grown_length(getattr(module, "original_max_seq_len", None))
    if original is None:
        return None
    held = {}
    for layer_type in held_types:
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        if not params.kind.grows_with_length:
            continue
        name = "max_seq_len_cached" if layer_type is None else f"{layer_type}_max_seq_len_cached"
        now = _grown_length(getattr(module, name, getattr(module, "max_seq_len_cached", None)))
        held[layer_type] = (max(now or original, original), original)
    return held or None


def _uncompared_values(elsewhere: dict[bool, tuple[float, str]], limit: int) -> str:
    """What a rotary report says of the values its proof did not compare (its own error may exceed the cap
    there, its frequencies' storage or float32 angles): how far posenc's exact values are from its, below
    ``limit`` and past it — what the patch changes there."""
    parts = []
    for is_far, side in ((False, "below position"), (True, "from position")):
        difference, where = elsewhere.get(is_far, (0.0, ""))
        if difference > 0:
            parts.append(f"up to {difference:.3g} {side} {limit} ({where})")
    if not parts:
        return ""
    joined = " and ".join(parts)
    return f"; at the others posenc's exact values differ from its by {joined}: patched, they change"


def _grown_length(value: Any) -> int | None:
    """A module's ``max_seq_len_cached`` as an int (Hugging Face's dynamic update stores the length it grew
    to as a one-element tensor, ``torch.max(position_ids) + 1``), else None."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = value.item() if value.device.type != "meta" else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@contextlib.contextmanager
def kept_state(module: nn.Module) -> Iterator[None]:
    """Run a probe of ``module``'s forward and put back what it changed in the module (Hugging Face's
    "dynamic"/"longrope" update their frequency buffers, ``max_seq_len_cached`` and ``attention_scaling``):
    its buffers' values and objects, and its attributes."""
    saved = []
    for m in module.modules():
        buffers = {k: (b, None if b is None else b.detach().clone()) for k, b in m._buffers.items()}
        saved.append((m, dict(m.__dict__), buffers))
    try:
        yield
    finally:
        for m, attributes, buffers in saved:
            for key in [k for k in m.__dict__ if k not in attributes]:
                del m.__dict__[key]
            m.__dict__.update(attributes)
            m._buffers.clear()
            for key, (buffer, values) in buffers.items():
                if (
                    buffer is not None
                    and values is not None
                    and not buffer.is_meta
                    and not torch.equal(buffer, values)
                ):
                    with torch.no_grad():
                        buffer.copy_(values)
                m._buffers[key] = buffer


def _own_probe_error(module: nn.Module) -> Exception | None:
    """What a rotary module's own forward raises on position ids 0 .. 3 (``(1, 4)``; the first layer type
    it holds, where it holds one per type), or None where it runs."""
    buffers = dict(module.named_buffers(recurse=False))
    device = next(b for k, b in buffers.items() if k.endswith("inv_freq")).device
    types = [k.removesuffix("_inv_freq") for k in buffers if k.endswith("_inv_freq") and "original" not in k]
    args = (torch.zeros(1, 1, device=device), torch.arange(4, device=device)[None], *types[:1])
    try:
        with torch.no_grad(), kept_state(module):
            module(*args)
    except Exception as error:  # its own code on its own config
        return error
    return None


def _uncompared(error: Exception, module: nn.Module) -> str:
    """Why a rotary module's forward could not be compared with posenc's: called as ``(x, position_ids)``
    (its signature) its own code raised on the probe ids (HunYuan-VL's at a config without its
    ``mrope_section``), or it is not ``(x, position_ids) ->`` a form posenc reads
    (:data:`posenc.torch.rotary.FORMS`): another signature (a 2-D vision rope of the patches, a relative
    encoding of a Conformer), or another output."""
    own = _own_probe_error(module) if computed.forward_names(module)[:2] == ("x", "position_ids") else None
    if own is not None:
        return (
            f"its own forward(x, position_ids) raises {type(own).__name__} on position ids 0 .. 3 (its "
            f"code, at this config): {str(own)[:100]}; nothing compared, left alone"
        )
    return (
        "its forward is not (x, position_ids) -> cos/sin in a form posenc reads (the (cos, sin) pair, "
        "half-width cos/sin, a complex freqs_cis): another signature or output, not read yet: "
        f"{type(error).__name__}: {str(error)[:100]}"
    )


def _width_from_frequencies(
    module: nn.Module, exact: _PatchedRotary, inv: torch.Tensor
) -> tuple[str, _PatchedRotary, str]:
    """Where the module holds another number of frequencies than posenc reads from its config (a head dim
    in a field of the family's own: JetMoE's ``kv_channels``, Canary's, DINOv3's), posenc's module with the
    rotated width the module's ``inv_freq`` gives, every other parameter the config's — its values are then
    proven like any other — and how it was read; else ("", ``exact``, ""). The first string is for a
    mismatch that remains."""
    params = exact.params
    if params is None:  # per layer type: each type's width from its own frequencies (DeepSeek-V4's, dots3's)
        return _layer_widths_from_frequencies(module, exact)
    count = inv.numel()
    if inv.dim() != 1 or count == params.n_frequencies or params.short_factor is not None:
        return "", exact, ""
    try:
        replacement = _PatchedRotary(params.with_frequencies(count), layout=exact.layout).to(inv.device)
    except (ValueError, TypeError) as error:
        return f" (its {count} frequencies give no head width posenc can build: {error})", exact, ""
    read = f"rotated width {2 * count} read from its {count} frequencies (its config's fields give "
    read += f"{params.rotary_dim}); "
    return "", replacement, read


def _layer_widths_from_frequencies(
    module: nn.Module, exact: _PatchedRotary
) -> tuple[str, _PatchedRotary, str]:
    """:func:`_width_from_frequencies` for a module of a rotary per layer type: where its
    ``{layer_type}_inv_freq`` holds another number of frequencies than the config's fields give that type
    (a head dim of the type's own: dots3's indexed attention), posenc's module with that type's rotated width
    from them, its other parameters the config's — proven after like any other."""
    held = dict(module.named_buffers(recurse=False))
    read, wider = [], {}
    for name, params in sorted(exact.layer_params.items()):  # (a report in one order, whatever the config's)
        inv = held.get(f"{name}_inv_freq")
        if inv is None or inv.dim() != 1 or inv.numel() == params.n_frequencies:
            continue
        count, rotary_dim = inv.numel(), 2 * inv.numel()
        try:
            wider[name] = params.with_frequencies(count)
            rope.inv_freq(wider[name])  # checked: a width posenc builds
        except (ValueError, TypeError) as error:
            return (
                f" (its {count} {name} frequencies give no head width posenc can build: {error})",
                exact,
                "",
            )
        read.append(
            f"{name} {rotary_dim} from its {count} frequencies (its config's fields give {params.rotary_dim})"
        )
    if not wider:
        return "", exact, ""
    for name, params in wider.items():  # posenc's own module, built for this proof and not yet in place
        exact._put_layer(name, params)
    return "", exact, f"rotated widths read: {'; '.join(read)}; "


#: How a report names a rotary module's output form (:data:`posenc.torch.rotary.FORMS`).
_FORM_NAMES = {"half_width": "half-width cos/sin", "complex": "complex freqs_cis"}


def _form_of(module: nn.Module, exact: RotaryEmbedding, layer_type: str | None) -> str:
    """What the module's forward returns at positions 0..3 (:data:`posenc.torch.rotary.FORMS`): one complex
    tensor of a column per frequency ("complex"), a (cos, sin) pair of a column per frequency
    ("half_width"), else "full" (the pair posenc's layouts give, or anything else: the comparison says)."""
    device = next(b for k, b in module.named_buffers(recurse=False) if k.endswith("inv_freq")).device
    args = (torch.zeros(1, 1, device=device), torch.arange(4, device=device)[None])
    args += () if layer_type is None else (layer_type,)
    with torch.no_grad(), kept_state(module):
        output = module(*args)
    params = exact.params if layer_type is None else exact.layer_params[layer_type]
    count = params.rotary_dim // 2
    if isinstance(output, torch.Tensor) and output.is_complex() and output.shape[-1] == count:
        return "complex"
    pair = isinstance(output, (tuple, list)) and len(output) == 2
    if pair and all(isinstance(t, torch.Tensor) and t.shape[-1] == count for t in output):
        return "half_width"
    return "full"


def _parts(output: Any) -> Any:
    """A rotary forward's output as (cos, sin): a complex ``freqs_cis`` as its real and imaginary parts."""
    if isinstance(output, torch.Tensor) and output.is_complex():
        return output.real, output.imag
    return output


def _like(exact: RotaryEmbedding, config: Any, cls: type | None = None, **options: Any) -> RotaryEmbedding:
    """posenc's rotary with ``exact``'s parameters (a width read from the module's frequencies included,
    per layer type too) in another ``form`` or ``layout``: a ``cls`` (default :class:`_PatchedRotary`)."""
    cls = cls or _PatchedRotary
    if exact.params is not None:
        return cls(exact.params, **options)
    made = cls(config, **options)
    for name, params in exact.layer_params.items():
        if made.layer_params.get(name) != params:
            made._put_layer(name, params)
    return made


def _emits_interleaved(
    module: nn.Module, exact: RotaryEmbedding, config: Any, layer_type: str | None
) -> bool:
    """Whether the module's cos/sin at positions 0..63 are its config's in interleaved pairs ([c0, c0, c1,
    c1, ...]) rather than halves: nearer those exact values, and within 2⁻⁴ of the amplitude of them. The
    model's attention rotates to match (the apply proof and the model's forward check that it does)."""
    device = next(b for k, b in module.named_buffers(recurse=False) if k.endswith("inv_freq")).device
    ids = torch.arange(64, device=device)[None]
    args = (torch.zeros(1, 1, device=device), ids) + (() if layer_type is None else (layer_type,))
    with torch.no_grad(), kept_state(module):
        mine = module(*args)[0].float()
    pair = _like(exact, config, RotaryEmbedding, layout="interleaved").to(device)
    with torch.no_grad():
        half, interleaved = exact(*args)[0], pair(*args)[0]
    if mine.shape != half.shape:
        return False
    params = exact.params if layer_type is None else exact.layer_params[layer_type]
    amplitude = abs(rope.attention_scaling(params))
    far = [float((mine - ours).abs().max()) for ours in (half, interleaved)]
    return far[1] < min(far[0], proofs.CAP * amplitude)


def _compare_rotary(
    module: nn.Module,
    exact: RotaryEmbedding,
    config: Any,
    held_types: list[str | None],
    gaps: dict[str | None, np.ndarray],
) -> tuple[
    float,
    float,
    tuple[str, float, float] | None,
    tuple[int, int] | None,
    dict[bool, tuple[float, str]] | None,
    tuple[int, int] | None,
]:
    """Compare the module's cos/sin with posenc's on the probe positions, below ``max_position_embeddings``
    and past it (:func:`posenc.torch.proofs.far_positions`), for every layer type it holds
    (:func:`posenc.torch.proofs.check_cos_sin`). Returns the largest |original − posenc| over the compared
    values, the largest allowance there, the first value beyond its allowance (where, difference,
    allowance) or None, (compared, total) values (None where some frequency is compared at no position
    but 0: nothing proven) below ``max_position_embeddings``, at the values not compared (its own error may
    exceed the cap there) the largest difference and where, below it (key False) and past it (True), and
    past it: the values compared and the furthest position probed (the proof's figures are those below)."""
    limit = int(getattr(config, "max_position_embeddings", 0) or 4096)
    inv = next(b for k, b in module.named_buffers(recurse=False) if k.endswith("inv_freq"))
    device, storage = inv.device, inv.dtype
    x = torch.zeros(1, 1, dtype=torch.float32, device=device)
    worst, allowed, compared, total = 0.0, 0.0, 0, 0
    elsewhere: dict[bool, tuple[float, str]] = {}  # at values not compared: below the limit, past it
    far, far_compared = proofs.far_positions(limit), 0
    probes = []
    for layer_type, positions in itertools.product(held_types, proofs.probe_positions(limit)):
        probes.append((layer_type, positions, torch.from_numpy(positions)[None], False))
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        if params.mrope_section:  # M-RoPE: also three different ids per token, which tell its layout
            grid = np.stack([positions, positions[::-1], (positions * 7 + 3) % limit])
            probes.append((layer_type, grid.max(axis=0), torch.from_numpy(grid)[:, None], False))
    # past max_position_embeddings, in one call: a module computing another function there (a clamp, the
    # scaling of a type its config no longer names) shows nowhere below it
    probes += [(layer_type, far, torch.from_numpy(far)[None], True) for layer_type in held_types]
    for layer_type in held_types:  # a type that grows with the length: at lengths between, each in one call
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        if params.kind.grows_with_length:
            for length in proofs.grown_lengths(limit):
                grown = proofs.grown_positions(limit, length)
                probes.append((layer_type, grown, torch.from_numpy(grown)[None], True))
    state = _dynamic_state(module, exact, held_types, config)  # each probe from the module's own state
    for layer_type, positions, probe, partial in probes:
        probe = probe.to(device)
        args = (x, probe) if layer_type is None else (x, probe, layer_type)
        exact.held = None if state is None else dict(state)
        try:
            with torch.no_grad(), kept_state(module):
                mine = module(*args)
            with torch.no_grad():
                ours = exact(*args)
        except Exception:
            if not partial:
                raise
            continue  # its own forward runs only below max_position_embeddings: compared there
        params = exact.params if layer_type is None else exact.layer_params[layer_type]
        if partial and params.kind.grows_with_length:
            # it ran at the length of its last position: the frequencies of that length, formed anew in
            # float32 (not its config's, up to ~50x larger, nor their 16-bit storage: that hid a wrong law)
            sets = [rope.inv_freq(params, seq_len=int(np.max(positions)) + 1)]
            theta, gap = proofs.rotary_reach(params, sets, None, torch.float32)
        else:
            sets = _frequency_sets(module, params, layer_type)
            theta, gap = proofs.rotary_reach(params, sets, gaps.get(layer_type), storage)
        amplitude = abs(rope.attention_scaling(params))
        for name, a, b in zip(("cos", "sin"), _parts(mine), _parts(ours), strict=True):
            if partial and a.shape != b.shape:
                break  # past its length it gives another shape (a table it slices): nothing to compare
            check = proofs.check_cos_sin(
                a, b, positions, theta, gap, amplitude, exact.layout, partial=partial
            )
            kind = f" ({layer_type})" if layer_type else ""
            if not check.provable:
                return math.nan, math.nan, None, None, None, None
            if check.over is not None:
                row, column, difference, allowance = check.over
                label = f"position {int(positions[row])}, {name} column {column}{kind}"
                return math.nan, math.nan, (label, difference, allowance), None, None, None
            if partial:  # past its length: a check, not the proof's figures
                far_compared += check.compared
            else:
                worst, allowed = max(worst, check.difference), max(allowed, check.allowed)
                compared += check.compared
                total += check.total
            if check.elsewhere_row >= 0 and check.elsewhere > elsewhere.get(partial, (0.0, ""))[0]:
                where = f"position {int(positions[check.elsewhere_row])}{kind}"
                elsewhere[partial] = (check.elsewhere, where)
    exact.held = state
    return worst, allowed, None, (compared, total), elsewhere, (far_compared, int(far[-1]))


def _timesteps(
    model: nn.Module, path: str, module: nn.Module, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    try:
        scale = float(getattr(module, "scale", 1))
        exact = _PatchedTimesteps(
            int(module.num_channels),
            bool(module.flip_sin_to_cos),
            float(module.downscale_freq_shift),
            scale=scale,
        )
        t, tolerance = proofs.timesteps_probe(scale)
        # t = 0 .. 1000 in one batch, then fractional ones alone (a forward keyed on the batch's range, as
        # one that rescales t in [0, 1], shows only there)
        difference, reach = 0.0, max(scale, 1.0)
        for batch in (t, t.new_tensor([0.3, 0.7]) / reach, t.new_tensor([10.5, 500.25]) / reach):
            with torch.no_grad():
                apart = (module(batch).double() - exact(batch).double()).abs().max()
            difference = max(difference, float(apart))
    except Exception as error:
        reason = f"could not be compared: {type(error).__name__}: {str(error)[:120]}"
        return _declined(path, "timesteps", "diffusers", reason)
    if not difference <= tolerance:
        reason = "its values are not diffusers' timestep embedding within float32 rounding"
        return _declined(path, "timesteps", "diffusers", reason, difference, tolerance)
    foreign = _foreign_code(module)
    if foreign is not None:  # equal at t = 0 .. 1000, and code posenc does not know
        reason = f"equal to diffusers' timestep embedding at its probes, but {foreign}"
        return _declined(path, "timesteps", "diffusers", reason, difference, tolerance)
    exact.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, exact)]
    how = "equal to its own embedding of t = 0..1000 within float32 rounding"
    how += f" (t / {scale:g}: its timesteps are scaled by {scale:g})" if scale > 1 else ""
    return Component(path, "timesteps", "diffusers-timestep", difference, tolerance, True, how), steps, exact


def _computed(
    model: nn.Module, path: str, module: nn.Module, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A module that computes its sinusoids in its forward: replaced where posenc reads it
    (:mod:`posenc.torch.computed`: DETR's ``PositionEmbeddingSine``), else left alone with the reason."""
    if computed.grid_sine_options(module) is not None:
        return _grid_sine(model, path, module, originals)
    if computed.grid_method_options(module) is not None:
        return _grid_method(path, module, originals)
    dinov3 = computed.read_dinov3(module)
    dinov3 = computed.read_timm_rope(module) if dinov3 is None else dinov3
    if dinov3 is not None:
        return _dinov3(model, path, module, dinov3, originals)
    exact = forms.read(module)
    if exact is not None:
        return forms.handler(exact, _FORMS)(model, path, module, exact, originals)
    if computed.reads_relative(module):
        return _relative(path, module, originals)
    widths = computed.axes_rotation_widths(module)
    if widths is not None:
        return _axes_rotation(path, module, widths, originals)
    polar = computed.read_polar_tables(module)
    if polar is not None:
        return _polar_tables(model, path, module, polar, originals)
    method = computed.sinusoid_method(module)
    if method is not None:
        return _sinusoid_method(path, module, method, originals)
    reading = computed.read_detr_sine(module)
    variant = type(module).__name__
    convention = computed.sinusoid_convention(module)
    refusal = computed.probe_refusal(module, convention) if convention is not None else None
    if isinstance(reading, str) and refusal is not None:
        return _declined(path, "computed", variant, f"{COMPUTED}: {refusal}")
    if isinstance(reading, str) and convention is not None:
        return _sinusoid(model, path, module, convention, originals)
    learned = inside_code(module) or computed.learned_angles(module, model) or computed.with_layers(module)
    if isinstance(reading, str) and learned is not None:
        return _declined(path, "computed", variant, learned)
    if isinstance(reading, str):
        return _declined(path, "computed", variant, COMPUTED if reading.startswith("computes") else reading)
    exact = _PatchedDetrSine(reading.features, **reading.options())
    exact.convention = reading.convention
    exact.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, exact)]
    how = f"{reading.describe()}: equal to its own values on probe masks within float32 rounding"
    how += _kept_text(module, type(exact))
    return (
        Component(path, "computed", "detr-sine", reading.difference, reading.allowed, True, how),
        steps,
        exact,
    )


def _grid_sine(
    model: nn.Module, path: str, module: nn.Module, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """RT-DETR's 2-D sine (:func:`posenc.torch.computed.grid_sine_options`): proven on a probe grid, then
    replaced by :class:`posenc.torch.computed.GridSine` (left as it is where it already gives posenc's
    bits: its float64 code)."""
    dim, temperature = computed.grid_sine_options(module)
    proof = computed.prove_grid_sine(module)
    if isinstance(proof, str):
        return _declined(path, "computed", type(module).__name__, proof)
    difference, allowed = proof
    if difference == 0:
        return Component(path, "computed", "timm-2d", 0.0, 0.0, False, "already exact"), [], None
    exact = _PatchedGridSine(dim, temperature)
    exact.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, exact)]
    how = "RT-DETR's 2-D sine: equal to its own values on a 9×13 grid within float32 rounding"
    return Component(path, "computed", "timm-2d", difference, allowed, True, how), steps, exact


def _swap_proven(
    model: nn.Module,
    path: str,
    module: nn.Module,
    exact: nn.Module,
    proof: tuple[float, float] | str,
    variant: str,
    how: str,
    originals: dict,
    kind: str = "computed",
) -> tuple[Component, list[_Step], nn.Module | None]:
    """The seam of the rotaries and sinusoids posenc reads by their form (:data:`_PATCHED`): ``module``
    replaced by posenc's ``exact`` equivalent (as its patched class, holding the original) where ``proof``
    is (largest difference, largest allowance); else declined with the proof's reason ("its forward ...":
    a form posenc does not read, found and not judged as any). ``kind``: the component's."""
    if isinstance(proof, str):
        reason = f"{COMPUTED}: {proof}" if proof.startswith("its forward") else proof
        return _declined(path, kind, type(module).__name__, reason)
    foreign = _foreign_code(module)
    if foreign is not None:  # equal at the probes, and code posenc does not know
        return _declined(path, kind, type(module).__name__, f"equal to posenc's at its probes, but {foreign}")
    difference, allowed = proof
    patched = _PATCHED[type(exact)]
    replacement = patched.__new__(patched)
    replacement.__dict__.update(exact.__dict__)
    replacement.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, replacement)]
    how += _kept_text(module, patched)
    return Component(path, kind, variant, difference, allowed, True, how), steps, replacement


#: What each rotary on axes is a rotary of, as the patch report says.
_AXES_FORMS = {
    computed.LatentRope: "a latent's grid",
    computed.SkipRope: "a latent's grid (two frames at 0 and its temporal_skip_len − 1)",
    computed.FramesRope: "frames and their grid",
    computed.HeliosRope: "frame indices and their grid",
    computed.ComplexRope: "a grid (complex)",
    computed.CropRope: "a latent's grid resized and centred on a base grid (EasyAnimate's)",
}


def _rope_on_axes(
    model: nn.Module, path: str, module: nn.Module, exact: computed.AxesRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A rotary of positions on several axes (:func:`posenc.torch.computed.rope_on_axes`: Flux's of position
    ids, HunyuanVideo's of a latent's grid): proven on a probe grid, then replaced by its exact equivalent
    (also where the probe agrees bit for bit: diffusers' float64 angles do on small grids, not at every
    position, and are float32 on an MPS device)."""
    how = (
        f"the rotary of {_AXES_FORMS.get(type(exact), 'position ids')} on {len(exact.axes_dim)} axes "
        f"(theta {exact.theta:g}, widths {list(exact.axes_dim)}): equal to its own (cos, sin) on a probe "
        "grid within float32 rounding"
    )
    proof = computed.prove_rope_on_axes(module, exact)
    return _swap_proven(model, path, module, exact, proof, "axes-rope", how, originals)


def _ltx(
    model: nn.Module, path: str, module: nn.Module, exact: ltx.LtxRope | ltx.Ltx2Rope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """LTX-Video's or LTX-2's rotary of fractional coordinates (:func:`posenc.torch.ltx.read_ltx`): proven
    on probe coordinates, then replaced by its exact equivalent."""
    how = (
        f"{exact.describe()}: equal to its own (cos, sin) on probe coordinates, shapes and padding "
        "included, within float32 rounding"
    )
    return _swap_proven(model, path, module, exact, ltx.prove_ltx(module, exact), "ltx-rope", how, originals)


def _length_rope(
    model: nn.Module, path: str, module: nn.Module, exact: length_rope.LengthRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A rotary of a length computed in its forward (:func:`posenc.torch.length_rope.read_length_rope`):
    proven at lengths to 2048, then replaced by its exact equivalent."""
    how = (
        f"RoPE of a length (width {exact.width}, theta {exact.theta:g}, halves): equal to its own (cos, sin) "
        f"of lengths {', '.join(map(str, length_rope.PROBE_LENGTHS))} within float32 rounding"
    )
    proof = length_rope.prove_length_rope(module, exact)
    kind = "rotary" if exact.form == "stacked" else "computed"  # a rotary module of its own frequencies
    return _swap_proven(model, path, module, exact, proof, "rope-default", how, originals, kind)


def _period_time(
    model: nn.Module, path: str, module: nn.Module, exact: period_time.PeriodTime, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A time embedding of periods (:func:`posenc.torch.period_time.read_period_time`: π0's): proven at
    times 0 .. 64, then replaced by its exact equivalent."""
    how = (
        f"a time embedding of periods {exact.min_period:g} .. {exact.max_period:g} (width {exact.width}, "
        "[sin | cos]): equal to its own values at t = 0 .. 1 (steps of 1/512) and 2 .. 64 within float32 "
        "rounding"
    )
    proof = period_time.prove_period_time(module, exact)
    return _swap_proven(model, path, module, exact, proof, "period-time", how, originals)


def _grid_rope(
    model: nn.Module,
    path: str,
    module: nn.Module,
    exact: grid_rope.GridRope | grid_rope.CosmosRope,
    originals: dict,
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A rotary of a latent's grid in halves (:func:`posenc.torch.grid_rope.read_grid_rope`: CogView4's,
    GLM-Image's, Cosmos'): proven on probe latents, then replaced by its exact equivalent."""
    thetas = ", ".join(f"{t:g}" for t in exact.thetas)
    how = (
        f"a rotary of a latent's grid in halves of each axis (widths {list(exact.widths)}, theta {thetas}"
        + (f", axes {list(exact.axes)}" if getattr(exact, "axes", None) else "")
        + "): equal to its own (cos, sin) of probe latents within float32 rounding"
    )
    proof = grid_rope.prove_grid_rope(module, exact)
    return _swap_proven(model, path, module, exact, proof, "grid-rope", how, originals)


def _coords_rope(
    model: nn.Module, path: str, module: nn.Module, exact: grid_rope.CoordsRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A rotary of the patches' coordinates in halves of each axis (:func:`posenc.torch.grid_rope.
    read_coords_rope`: timm's Gemma 4 ViT): proven on probe coordinates, then replaced by its exact
    equivalent."""
    how = (
        f"a rotary of patch coordinates in halves of each axis (head_dim {exact.head_dim}, theta "
        f"{exact.theta:g}): equal to its own (cos, sin) of probe coordinates within float32 rounding"
    )
    proof = grid_rope.prove_coords_rope(module, exact)
    return _swap_proven(model, path, module, exact, proof, "coords-rope", how, originals, "rotary")


def _ids_rope(
    model: nn.Module, path: str, module: nn.Module, exact: grid_rope.IdsRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A rotary of position ids on several axes in halves (:func:`posenc.torch.grid_rope.read_ids_rope`:
    MiniMax-H3's): proven on probe ids, then replaced by its exact equivalent."""
    how = (
        f"a rotary of position ids on {exact.axes} axes in halves ({exact.count} frequencies, theta "
        f"{exact.theta:g}): equal to its own (cos, sin) of probe ids within float32 rounding"
    )
    proof = grid_rope.prove_ids_rope(module, exact)
    return _swap_proven(model, path, module, exact, proof, "ids-rope", how, originals, "rotary")


def _kandinsky(
    model: nn.Module,
    path: str,
    module: nn.Module,
    exact: kandinsky.KandinskyRope1D | kandinsky.KandinskyRope3D,
    originals: dict,
) -> tuple[Component, list[_Step], nn.Module | None]:
    """Kandinsky's rotary of rotation matrices (:func:`posenc.torch.kandinsky.read_kandinsky`): proven on
    probe positions (and scale factors), then replaced by its exact equivalent."""
    how = (
        f"Kandinsky's rotation matrices (widths {list(exact.widths)}, max_period {exact.max_period:g}): "
        "equal to its own on probe positions and scale factors, rotations as they must be, within float32 "
        "rounding"
    )
    proof = kandinsky.prove_kandinsky(module, exact)
    return _swap_proven(model, path, module, exact, proof, "kandinsky-rope", how, originals)


def _ltx_vae(
    model: nn.Module, path: str, module: nn.Module, exact: ltx.LtxVaeRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """LTX-2's decoder rotary (:func:`posenc.torch.ltx.read_ltx_vae`): proven on its rotation of unit
    pairs and of random values, then replaced by its exact equivalent."""
    how = (
        f"{exact.describe()}: its rotation of unit pairs along each axis of a "
        f"{'×'.join(map(str, ltx.VAE_PROBE))} grid and of random values equal to posenc's within float32 "
        "rounding"
    )
    proof = ltx.prove_ltx_vae(module, exact)
    return _swap_proven(model, path, module, exact, proof, "ltx-vae-rope", how, originals)


def _anyflow(
    model: nn.Module, path: str, module: nn.Module, exact: anyflow.AnyFlowRope, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """AnyFlow's complex rotary of a grid (:func:`posenc.torch.anyflow.read_anyflow`): proven on probe
    layouts within float64 rounding, then replaced by its exact equivalent."""
    windows = (
        f", compressed windows {list(exact.pooled)}" if isinstance(exact, anyflow.AnyFlowFarRope) else ""
    )
    how = (
        f"AnyFlow's complex rotary of a grid (head {exact.head}, theta {exact.theta:g}{windows}): equal to "
        "its own on probe layouts, shapes included, within float64 rounding"
    )
    proof = anyflow.prove_anyflow(module, exact)
    return _swap_proven(model, path, module, exact, proof, "anyflow-rope", how, originals)


#: How patch takes each form :func:`posenc.torch.forms.read` gives, by the class of posenc's equivalent.
_FORMS: dict[type, Callable[..., tuple[Component, list[_Step], nn.Module | None]]] = {
    computed.AxesRope: _rope_on_axes,
    ltx.LtxRope: _ltx,
    ltx.Ltx2Rope: _ltx,
    ltx.LtxVaeRope: _ltx_vae,
    length_rope.LengthRope: _length_rope,
    period_time.PeriodTime: _period_time,
    grid_rope.GridRope: _grid_rope,
    grid_rope.CosmosRope: _grid_rope,
    grid_rope.CoordsRope: _coords_rope,
    grid_rope.IdsRope: _ids_rope,
    kandinsky.KandinskyRope1D: _kandinsky,
    kandinsky.KandinskyRope3D: _kandinsky,
    anyflow.AnyFlowRope: _anyflow,
}


def _dinov3(
    model: nn.Module, path: str, module: nn.Module, exact: computed.DinoV3Rope | str, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """DINOv3's rotary of a grid's coordinates (:func:`posenc.torch.computed.read_dinov3`: timm's
    ``RotaryEmbeddingDinoV3``) or timm's axial rotary of an index grid
    (:func:`posenc.torch.computed.read_timm_rope`: ``RotaryEmbeddingCat``, EVA-02's): proven on probe grids
    (one that caches its own grid's embedding: on that grid), then replaced by its exact equivalent."""
    proof = exact if isinstance(exact, str) else computed.prove_dinov3(module, exact)
    if isinstance(proof, str):
        return _declined(path, "computed", type(module).__name__, proof)
    difference, allowed = proof
    timm = isinstance(exact, computed.TimmRope)
    kind = _PatchedTimmRope if timm else _PatchedDinoV3Rope
    replacement = kind.__new__(kind)
    replacement.__dict__.update(exact.__dict__)
    replacement.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, replacement)]
    shapes = [exact.feat_shape] if timm and exact.feat_shape is not None else computed.DINOV3_PROBES
    probes = ", ".join("×".join(map(str, shape)) for shape in shapes)
    name = "timm's axial rotary of an index grid" if timm else "DINOv3's rotary of grid coordinates"
    how = (
        f"{name} ({exact.extra_repr()}): equal to its own get_embed on the grids {probes} and its own "
        "within float32 rounding"
        + ("; in training, its original's own random coordinates" if exact.augmentation else "")
    )
    variant = "timm-rope" if timm else "dinov3-rope"
    return Component(path, "computed", variant, difference, allowed, True, how), steps, replacement


def original_of(module: nn.Module) -> nn.Module | None:
    """The module a replacement :func:`patch` put in took the place of (held apart, not a child), else
    None."""
    original = module.__dict__.get(_ORIGINAL)
    return original if isinstance(original, nn.Module) else None


def _holding(replacement: nn.Module, module: nn.Module) -> nn.Module:
    """``replacement`` holding what code reads from the rotary ``module`` it replaces: its buffers (an
    ``inv_freq``; persistent as there, so the ``state_dict`` keeps its keys), its ``config``, and the module
    itself (:class:`_KeepsOriginal`)."""
    for key, value in module.named_buffers(recurse=False):
        replacement.register_buffer(key, value, persistent=key not in module._non_persistent_buffers_set)
    replacement.config = module.config
    replacement.__dict__[_ORIGINAL] = module
    return replacement


def _hf_dinov3(
    model: nn.Module, path: str, module: nn.Module, exact: computed.HfDinoV3Rope | str, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """transformers' DINOv3 rotary of pixel_values (:func:`posenc.torch.computed.read_hf_dinov3`): proven on
    probe grids, then replaced by :class:`posenc.torch.computed.HfDinoV3Rope` (which, in training with random
    coordinates, runs the original)."""
    variant = "dinov3-rope"
    proof = exact if isinstance(exact, str) else computed.prove_hf_dinov3(module, exact)
    if isinstance(proof, str):
        return _declined(path, "rotary", variant, proof)
    difference, allowed = proof
    replacement = _PatchedHfDinoV3Rope.__new__(_PatchedHfDinoV3Rope)
    replacement.__dict__.update(exact.__dict__)
    replacement = _holding(replacement, module)
    replacement.training = module.training  # its mode (in training it runs the original's random draws)
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, replacement)]
    probes = ", ".join("×".join(map(str, shape)) for shape in computed.DINOV3_PROBES)
    how = (
        f"transformers' DINOv3 rotary of its patch grid ({exact.extra_repr()}): equal to its own (cos, sin) "
        f"on the grids {probes} within float32 rounding"
    )
    if exact.augmentation:
        how += f"; in training, its own forward (random coordinates: {', '.join(exact.augmentation)})"
    return Component(path, "rotary", variant, difference, allowed, True, how), steps, replacement


def _sinusoid(
    model: nn.Module, path: str, module: nn.Module, convention: str, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """A 1-D sinusoid computed in forward (:func:`posenc.torch.computed.sinusoid_convention`): read at
    positions 0, 1, ..., its rows proven as a table's are, and the module replaced by posenc's encoding of the
    positions it is called with, in its calling form."""
    name = type(module).__name__
    try:
        rows = computed.sinusoid_rows(module, convention)
    except Exception as error:  # its forward refuses the probe positions
        return _declined(
            path, "computed", name, f"could not be read: {type(error).__name__}: {str(error)[:120]}"
        )
    if rows.ndim != 2:
        return _declined(
            path,
            "computed",
            name,
            f"its forward gives {rows.shape} for {len(rows)} positions, not one row of each (positions, "
            "width): more than an encoding of them (its own layers or tables besides); not judged",
        )
    proven, declined = _plain_rows(path, rows)
    if declined is not None:
        return declined
    best = proven.best
    layout = {}
    if convention == "rows":
        _, down, leading = computed.row_layout(module)
        layout = {"rows": len(rows), "descending": down, "leading": leading}
    if convention == "relative" and not _mirrored(module, rows.shape[1], best.options):
        reason = (
            f"its rows of negative positions are not its positive ones mirrored ({best.describe()} at 0 .. "
            f"{len(rows) - 1}): the errors of the positions −p and p differ"
        )
        return _declined(path, "computed", name, reason)
    if convention == "relative":  # a batch of one whatever the input's (a cached table's slice), or its own
        layout = {"leading": computed.relative_batch_of_one(module)}
    foreign = _foreign_code(module)
    if foreign is not None:  # its values identified at the probes, and code posenc does not know
        reason = f"its values at the probe positions are {proven.variant}'s within float32 code's error, "
        reason += f"but {foreign}"
        return _declined(path, "computed", name, reason, proven.difference, proven.tolerance)
    options, scale = dict(best.options), computed.time_scale(module)
    if convention == "timesteps":  # its signature, and its time scale: positions t · scale
        layout = {"names": tuple(inspect.signature(module.forward).parameters)}
        options["scale"] = float(options["scale"]) * scale
    exact = _PatchedSinusoid(rows.shape[1], convention, options, **layout)
    held = next(module.buffers(), None)  # its device ("length": its positions are made there)
    exact = exact.to(held.device) if held is not None and held.device.type != "meta" else exact
    exact.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, exact)]
    count = "t = 0 .. 999" if convention in computed.TIMED else f"positions 0 .. {len(rows) - 1}"
    if convention == "timesteps" and scale != 1:
        count = f"t · {scale:g} = 0 .. 999"
    count += " (its rows, from the last position down)" if layout.get("descending") else ""
    count += f" (and −1 .. −{len(rows) - 1}: the same errors, mirrored)" if convention == "relative" else ""
    how = f"its values at {count} identified ({best.describe()}), each within what float32 code errs there"
    return (
        Component(path, "computed", proven.variant, proven.difference, proven.tolerance, True, how),
        steps,
        exact,
    )


def _mirrored(module: nn.Module, width: int, options: dict[str, Any]) -> bool:
    """Whether a "relative" module's rows of the positions −1 .. −(n − 1) differ from posenc's exactly as
    its rows of 1 .. n − 1 do, value by value (|original − posenc| equal: sin odd and cos even in its code
    as in the exact values), so that the proof of the positive rows holds for them."""
    count = computed.ROWS
    mine = computed.relative_output(module, count).detach().to("cpu", torch.float64)
    with torch.no_grad():
        ours = computed.ComputedSinusoid(width, "relative", options)(torch.zeros(1, count, 1))[0]
    if mine.shape != ours.shape:
        return False
    difference = (mine - ours.double()).abs()
    return torch.equal(difference[: count - 1].flip(0), difference[count:])


def _plain_rows(path: str, rows: np.ndarray) -> tuple[_Rows, tuple[Component, list[_Step], None] | None]:
    """A computed sinusoid's rows of positions 0, 1, ... (float32 code) proven (:func:`_proven_rows`), and
    the decline where they are not a plain encoding read from position 0 (else None)."""
    proven = _proven_rows(rows, torch.float32, weights=False)
    best = proven.best
    if best is None:
        numbers = (proven.difference, proven.tolerance)
        return proven, _declined(path, "computed", proven.variant, proven.reason, *numbers)
    if (
        proven.zeros
        or best.start
        or best.padding_idx is not None
        or set(best.options) - set(computed.CORE_OPTIONS)
    ):
        why = f"its rows are {best.describe()}, read from position 0: posenc replaces only a plain encoding"
        return proven, _declined(path, "computed", proven.variant, why, proven.difference, proven.tolerance)
    return proven, None


def _relative(path: str, module: nn.Module, originals: dict) -> tuple[Component, list[_Step], None]:
    """XLNet's relative encoding, a method of the model (:data:`posenc.torch.computed.RELATIVE_METHOD`):
    its rows of positions 0, 1, ... proven as a table's are, then the method shadowed on the instance by
    :class:`posenc.torch.computed.ExactRelative` (posenc's rows at the positions it asks for)."""
    name = type(module).__name__
    method = computed.RELATIVE_METHOD
    if isinstance(module.__dict__.get(method), computed.ExactRelative):
        return Component(path, "computed", "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    try:
        rows = computed.relative_rows(module)
    except Exception as error:  # its method refuses the probe lengths
        return _declined(path, "computed", name, f"could not be read: {type(error).__name__}: {error!s:.120}")
    proven, declined = _plain_rows(path, rows)
    if declined is not None:
        return declined
    best = proven.best
    exact = computed.ExactRelative(module, best.options)
    steps = _shadow(originals, path, module, method, exact)
    how = (
        f"its {method} at positions 0 .. {len(rows) - 1} identified ({best.describe()}), each within what "
        "float32 code errs there; posenc's rows at the positions it asks for"
    )
    component = Component(path, "computed", proven.variant, proven.difference, proven.tolerance, True, how)
    return component, steps, None


def _grid_method(path: str, module: nn.Module, originals: dict) -> tuple[Component, list[_Step], None]:
    """RT-DETR's first 2-D sine, a static method of its encoder (:data:`posenc.torch.computed.GRID_METHOD`:
    OmDet-Turbo's): proven on a probe grid, then shadowed on the instance by
    :class:`posenc.torch.computed.ExactGridMethod`."""
    method = computed.GRID_METHOD
    if isinstance(module.__dict__.get(method), computed.ExactGridMethod):
        return Component(path, "computed", "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    proof = computed.prove_grid_method(module)
    if isinstance(proof, str):
        return _declined(path, "computed", type(module).__name__, proof)
    difference, allowed = proof
    steps = _shadow(originals, path, module, method, computed.ExactGridMethod())
    dim, temperature = computed.grid_method_options(module)
    height, width = computed.GRID_SHAPE
    how = (
        f"its {method} (RT-DETR's 2-D sine, embed_dim {dim}, temperature {temperature:g}) on a "
        f"{height}×{width} grid within float32 rounding; posenc's values for each grid it is called with"
    )
    return Component(path, "computed", "timm-2d", difference, allowed, True, how), steps, None


def _axes_rotation(
    path: str, module: nn.Module, widths: tuple[int, ...], originals: dict
) -> tuple[Component, list[_Step], None]:
    """V-JEPA 2's rotary, computed in its attention layer's method
    (:data:`posenc.torch.computed.AXES_ROTATION_METHOD`): its sines and cosines and its rotation proven, then
    the method shadowed on the instance by :class:`posenc.torch.computed.ExactAxesRotation`."""
    method = computed.AXES_ROTATION_METHOD
    if isinstance(module.__dict__.get(method), computed.ExactAxesRotation):
        return Component(path, "computed", "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    exact = computed.ExactAxesRotation(module, widths)
    proof = computed.prove_axes_rotation(module, exact)
    if isinstance(proof, str):
        return _declined(path, "computed", type(module).__name__, proof)
    difference, allowed = proof
    steps = _shadow(originals, path, module, method, exact)
    how = (
        f"V-JEPA 2's rotary of frame, row and column ids (base 10000, widths {list(widths)}): its sines and "
        "cosines at positions 0 .. 63 within float32 rounding, its rotation of random queries alike; "
        "posenc's sines and cosines in its rotation"
    )
    return Component(path, "computed", "axes-rope", difference, allowed, True, how), steps, None


def _sinusoid_method(
    path: str, module: nn.Module, name: str, originals: dict
) -> tuple[Component, list[_Step], None]:
    """A 1-D sinusoid computed by a method of ``module`` (:data:`posenc.torch.computed.SINUSOID_METHODS`):
    its values at positions 0, 1, ... proven (against the options its form computes, else as a table's rows
    are, identified), then the method shadowed on the instance by
    :class:`posenc.torch.computed.ExactSinusoidMethod`."""
    if isinstance(module.__dict__.get(name), computed.ExactSinusoidMethod):
        return Component(path, "computed", "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    try:
        rows = computed.method_rows(module, name)
    except Exception as error:  # its method refuses the probe positions
        reason = f"its {name} refuses posenc's probe ({type(error).__name__}: {str(error)[:100]})"
        return _declined(path, "computed", type(module).__name__, reason)
    options = computed.SINUSOID_METHODS[name][1]
    if options is None:  # identified from its rows
        proven, declined = _plain_rows(path, rows.double().numpy())
        if declined is not None:
            return declined
        options, variant = proven.best.options, proven.variant
        difference, allowed, named = proven.difference, proven.tolerance, proven.best.describe()
    else:
        proof = computed.prove_sinusoid_method(rows, options)
        if isinstance(proof, str):
            return _declined(path, "computed", type(module).__name__, proof)
        (difference, allowed), variant = proof, "generic"
        named = ", ".join(f"{k}={options[k]!r}" for k in ("base", "scale", "layout"))
    exact = computed.ExactSinusoidMethod(module, name, rows.shape[1], options)
    steps = _shadow(originals, path, module, name, exact)
    how = (
        f"its {name} at positions 0 .. {len(rows) - 1} ({named}), each within what float32 code errs "
        "there; posenc's values at the positions it is called with"
    )
    return Component(path, "computed", variant, difference, allowed, True, how), steps, None


def _polar_tables(
    model: nn.Module, path: str, module: nn.Module, reading: computed.PolarTables | str, originals: dict
) -> tuple[Component, list[_Step], nn.Module | None]:
    """Qwen-Image's complex rotary tables, computed at init (:func:`posenc.torch.computed.read_polar_tables`):
    every value proven, then the module swapped for a copy of itself (its own class and code) whose tables
    hold posenc's values (:func:`posenc.torch.computed.exact_polar_copy`)."""
    if _ORIGINAL in module.__dict__:
        return Component(path, "computed", "posenc", 0.0, 0.0, True, "already posenc's (patched)"), [], None
    proof = reading if isinstance(reading, str) else computed.prove_polar_tables(module, reading)
    if isinstance(proof, str):
        return _declined(path, "computed", type(module).__name__, proof)
    difference, allowed = proof
    if difference == 0:
        return Component(path, "computed", "axes-rope", 0.0, allowed, False, "already exact"), [], None
    replacement = computed.exact_polar_copy(module, reading)
    replacement.__dict__[_ORIGINAL] = module
    steps = [_record(originals, path, _Original("module", module)), *_swap(model, path, replacement)]
    names = sorted({block.name for block in reading.blocks})
    how = (
        f"its complex tables {', '.join(names)} (theta {reading.theta:g}, widths {list(reading.axes_dim)}) "
        "within float32 rounding of posenc's at every row's position; a copy of it holding posenc's values"
    )
    return Component(path, "computed", "axes-rope", difference, allowed, True, how), steps, replacement


@dataclasses.dataclass
class _Rows:
    """What rows (a table's, or a computed sinusoid's read at positions 0, 1, ...) were proven to be:
    ``variant`` (the nearest's name), ``best`` (identify's match, None where not proven: ``reason`` says why,
    with ``difference`` and ``tolerance`` where a value was beyond), the leading ``zeros`` kept out, and
    posenc's ``exact`` rows (in the rows' dtype)."""

    variant: str
    best: Any = None
    zeros: int = 0
    difference: float = math.nan
    tolerance: float = math.nan
    reason: str = ""
    exact: np.ndarray | None = None


def _proven_rows(rows: np.ndarray, dtype: torch.dtype, weights: bool = True) -> _Rows:
    """Identify ``rows`` (float64, of a ``dtype`` tensor) and prove them value by value (module docstring);
    ``weights``: whether they are a parameter's (else a buffer's or computed: never called learned)."""
    unit, storage = proofs.table_precision(dtype)
    # identify's search only (which variants to try); whether the table is one is decided below, value by
    # value, by what the code that built it can err at each position and frequency
    search = proofs.table_search_tolerance(len(rows), storage)
    if not np.any(rows):
        return _Rows("zeros", reason=_ZEROS)
    try:
        found, zeros = _identified(rows, search)
    except ValueError as error:
        if weights and np.isfinite(rows).all():  # a trained parameter of no table's shape (a 1×1 conv's)
            return _Rows("learned", reason=f"learned weights, no table of positions ({error}); not judged")
        return _Rows("?", reason=f"not an encoding table: {error}")
    learned = _learned(rows[zeros:], found, weights)
    if learned is not None:
        known = weights and not learned.startswith(_SCALED)  # a scaled sinusoid is a formula, not weights
        return _Rows("learned" if known else "unknown", reason=learned)
    hedge = (
        "a learned or perturbed table?"
        if weights
        else "a perturbed table, or a formula posenc does not know?"
    )
    stored = rows[zeros:]
    best, closest, error = None, None, None
    for match in (m for m in found if m.matches):
        try:
            beyond = proofs.beyond(match, stored, unit, storage)
        except (ValueError, TypeError) as failure:
            error = error or failure
            continue
        if beyond is None:
            best = match
            break
        closest = closest or (match, *beyond)
    variant = ((best or found[0]).name or "generic").split(" = ")[0]
    if best is None and closest is not None:
        match, (row, column), got, allowed = closest
        variant = (match.name or "generic").split(" = ")[0]
        reason = (
            f"its rows are nearest {variant}, but differ from it by {got:.3g} at row {row + zeros}, column "
            f"{column}, where the code that builds it errs by at most {allowed:.3g} ({hedge})"
        )
        return _Rows(variant, difference=got, tolerance=allowed, reason=reason)
    if best is None:
        if error is not None:
            return _Rows(variant, reason=f"cannot be rebuilt: {error}")
        return _Rows(
            variant,
            difference=found[0].max_error,
            reason=f"no sinusoidal variant matches ({'a learned table?' if weights else hedge})",
        )
    try:
        exact = proofs.exact_rows(best, stored.shape, _dtype_name(dtype))
    except (ValueError, TypeError) as failure:
        return _Rows(variant, reason=f"cannot be rebuilt: {failure}")
    exact = np.concatenate([np.zeros((zeros, rows.shape[1]), exact.dtype), exact])
    difference = float(np.abs(exact.astype(np.float64) - rows).max(initial=0.0))
    tolerance = proofs.table_tolerance(best, stored.shape, unit, storage)
    return _Rows(variant, best, zeros, difference, tolerance, exact=exact)


def _table(full: str, tensor: torch.Tensor, originals: dict) -> tuple[Component, list[_Step]]:
    if tensor.device.type == "meta":
        return Component(full, "table", "?", math.nan, math.nan, False, "on meta: no values to identify"), []
    rows = tensor.detach().reshape(-1, tensor.shape[-1]).double().cpu().numpy()
    proven = _proven_rows(rows, tensor.dtype, weights=isinstance(tensor, nn.Parameter))
    best, zeros, variant = proven.best, proven.zeros, proven.variant
    if best is None:
        return Component(
            full, "table", variant, proven.difference, proven.tolerance, False, proven.reason
        ), []
    difference, tolerance = proven.difference, proven.tolerance
    values = _to_tensor(proven.exact).reshape(tensor.shape).to(tensor.device)
    if torch.equal(values, tensor.detach()):
        return Component(
            full, "table", variant, difference, difference, full in originals, "already exact"
        ), []
    original = tensor.detach().clone()
    written = (best, zeros, _dtype_name(tensor.dtype))

    def write() -> None:
        with torch.no_grad():
            tensor.data.copy_(values)

    def put_back() -> None:
        with torch.no_grad():
            tensor.data.copy_(original)

    steps = [_record(originals, full, _Original("table", original, written)), (write, put_back)]
    code = "float64" if proofs.table_precision(tensor.dtype)[0] < proofs.UNIT else "float32"
    how = f"rows identified ({best.describe()}), each value within what {code} code errs at its row and "
    how += f"column; overwritten with posenc's, in {str(tensor.dtype)[6:]}"
    if zeros:
        how += f"; its first {zeros} rows, zeros (a joint table's text places), kept"
    return Component(full, "table", variant, difference, tolerance, True, how), steps


#: A table of zeros alone: no sinusoid is zero everywhere (cos 0 = 1), and no learned table either.
#: What a buffer's or a computed module's values are when no sinusoid posenc knows comes near them: not
#: learned weights (they are no parameter) but a formula posenc does not know.
_UNKNOWN = "not a formula posenc knows (a buffer or computed values, not a trained parameter)"
_ZEROS = (
    "all zeros: it holds no positional values (weights its model fills at initialisation or from a "
    "checkpoint, not set here); not judged"
)


def read_table(tensor: torch.Tensor) -> tuple[str | None, int]:
    """How the table ``tensor`` (found by its positional name) is judged: (why it is not judged, None where
    it is; how many leading rows of zeros are kept out of the judgment). Not judged: learned weights — no
    sinusoidal variant comes near its values — zeros alone, or no values (meta). A sinusoid, exact or not, is
    judged; a table that starts with rows of zeros and then a sinusoid (CogVideoX's text places, Kimi-K2.5's
    frame 0) is judged by the rows after them."""
    if tensor.device.type == "meta":
        return "on meta: no values to judge", 0
    rows = tensor.detach().reshape(-1, tensor.shape[-1]).double().cpu().numpy()
    if not np.isfinite(rows).all():
        return None, 0  # NaN rows are a finding of the audit's
    if not np.any(rows):
        return _ZEROS, 0
    _, storage = proofs.table_precision(tensor.dtype)
    try:
        found, zeros = _identified(rows, proofs.table_search_tolerance(len(rows), storage))
    except ValueError as error:
        if isinstance(tensor, nn.Parameter):  # as patch says it (:func:`_proven_rows`)
            return f"learned weights, no table of positions ({error}); not judged", 0
        return f"not an encoding table: {error}", 0
    return _learned(rows[zeros:], found, isinstance(tensor, nn.Parameter)), zeros


def _identified(rows: np.ndarray, search: float) -> tuple[list[Any], int]:
    """identify's matches for ``rows`` (its search at ``search``) and how many leading zero rows they skip:
    a joint table's text places (CogVideoX), kept as they are, where only the rows after them match."""
    from ..porting import identify

    found = identify(rows, tolerance=search, candidates=3)
    leading = proofs.zero_rows(rows)
    if not any(m.matches for m in found) and 0 < leading < len(rows) - 1:
        with contextlib.suppress(ValueError):
            tail = identify(rows[leading:], tolerance=search, candidates=3)
            if any(m.matches for m in tail):
                return tail, leading
    return found, 0


def _learned(rows: np.ndarray, found: list[Any], weights: bool = True) -> str | None:
    """Why ``rows`` are learned weights and not a sinusoid (``found``: identify's matches, best first), or
    None. A sinusoidal table, however badly computed (angles in float32 at large positions, a 16-bit
    storage, a cut), agrees with its nearest variant on most values; learned weights (random or trained)
    disagree on most: the median |stored − nearest| over every value is then above
    :data:`~posenc.torch.proofs.CAP` of the nearest's amplitude. ``weights``: whether the rows are a
    parameter's; a buffer's or a computed module's are not called learned but a formula posenc does not
    know (EVA's rotary grid)."""
    if any(m.matches for m in found):
        return None
    what = "learned weights" if weights else _UNKNOWN
    if not found:
        return f"{what}: no sinusoidal variant applies to its shape; not judged"
    nearest = found[0]
    try:
        values = proofs.exact_rows(nearest, rows.shape, "float64")
    except (ValueError, TypeError):
        return None
    amplitude = float(np.abs(values).max(initial=0.0)) or 1.0
    typical = float(np.median(np.abs(values - rows)))
    if typical <= proofs.CAP * amplitude:
        return None
    scaled = _scaled_sinusoid(rows, found)
    if scaled is not None:
        return scaled
    name = (nearest.name or "generic").split(" = ")[0]
    return (
        f"{what}: half its values differ from the nearest sinusoid ({name}) by more than "
        f"{typical:.2g}; not a sinusoidal table posenc knows, not judged"
    )


def _scaled_sinusoid(rows: np.ndarray, found: list[Any]) -> str | None:
    """Why ``rows`` are not judged where they are one of identify's candidates ``found`` scaled and shifted
    (``a·PE + b``: PatchTST's "sincos" table, normalized to zero mean and a tenth of a unit's deviation
    after it is computed) to within 2⁻¹⁰ of the scaled amplitude everywhere; else None. Such a table is a
    sinusoid, not learned weights, but of a formula posenc does not make."""
    for match in found:
        try:
            values = proofs.exact_rows(match, rows.shape, "float64")
        except (ValueError, TypeError):
            continue
        centred = values - values.mean()
        spread = float(np.mean(centred * centred))
        if spread == 0.0:
            continue
        a = float(np.mean((rows - rows.mean()) * centred)) / spread
        b = float(rows.mean()) - a * float(values.mean())
        amplitude = abs(a) * float(np.abs(values).max(initial=0.0))
        if amplitude > 0.0 and float(np.abs(rows - (a * values + b)).max()) <= 2.0**-10 * amplitude:
            name = (match.name or "generic").split(" = ")[0]
            return f"{_SCALED} ({name} × {a:.4g} + {b:.3g}): {_UNKNOWN_SCALED}; not judged"
    return None


_SCALED = "a sinusoid scaled and shifted"
_UNKNOWN_SCALED = "not a formula posenc knows (its values normalized after they were computed)"


def _restore_table(model: nn.Module, path: str, entry: _Original) -> int:
    """Copy the original values back into the table at ``path`` if it still holds posenc's (as the model
    cast them since): 1, else 0 (the user's values, or a checkpoint's, stay)."""
    owner, name = _owner_of(model, path)
    tensor = None if owner is None else getattr(owner, name, None)
    if not isinstance(tensor, torch.Tensor) or tensor.is_meta:
        return 0
    best, zeros, dtype = entry.written
    rows = tensor.detach().reshape(-1, tensor.shape[-1])
    try:
        exact = proofs.exact_rows(best, (rows.shape[0] - zeros, rows.shape[1]), dtype)
    except (ValueError, TypeError):
        return 0
    exact = np.concatenate([np.zeros((zeros, rows.shape[1]), exact.dtype), exact])
    mine = _to_tensor(exact).to(tensor.dtype)
    if tensor.shape != entry.value.shape or not torch.equal(rows.cpu(), mine):
        return 0
    with torch.no_grad():
        tensor.data.copy_(entry.value)
    return 1


# --- the replacements ---------------------------------------------------------------------------------


class _KeepsOriginal(nn.Module):
    """A replacement that holds the module it replaced (``__dict__[_ORIGINAL]``: neither a child nor in
    the ``state_dict``) and applies to it what ``.to()``, ``.to_empty()``, ``.half()``, ... apply to itself,
    so that :func:`unpatch` gives back the module the model would hold had it never been patched."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> nn.Module:
        result = super()._apply(fn, recurse)
        original = self.__dict__.get(_ORIGINAL)
        if recurse and isinstance(original, nn.Module):
            original._apply(fn, recurse)
        return result

    def __getattr__(self, name: str) -> Any:
        """A plain attribute the original held and posenc's module does not (LFM3's ``layer_types``, read
        by its model's forward): the original's value; a method of the original's own class (SAM 3's sine's
        ``encode_boxes``, called by its decoder): the original's, bound to it (:func:`_kept_methods`, which
        the report names). Tensors and modules are never borrowed."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            original = self.__dict__.get(_ORIGINAL)
            value = vars(original).get(name, self) if isinstance(original, nn.Module) else self
            borrowed = not name.startswith("_") and not isinstance(value, (torch.Tensor, nn.Module))
            if borrowed and value is not self:  # an instance's value shadows its class's method, as in Python
                return value
            if isinstance(original, nn.Module) and name in _kept_methods(original, type(self)):
                return _lent(original, name)
            raise


def _kept_methods(original: nn.Module, replacement: type) -> list[str]:
    """The public methods of ``original``'s own classes (not ``nn.Module``'s, not ``forward``) that the
    ``replacement`` class lacks: a patched module lends them from the original, whose code they keep."""
    names = set()
    for cls in type(original).__mro__:
        if cls in nn.Module.__mro__:
            break
        methods = (staticmethod, classmethod, functools.partialmethod)
        names |= {n for n, v in vars(cls).items() if inspect.isfunction(v) or isinstance(v, methods)}
    names = {n for n in names if not n.startswith("_") and n != "forward"}
    return sorted(n for n in names if not hasattr(replacement, n))


def _lent(original: nn.Module, name: str) -> Callable[..., Any]:
    """``original``'s method ``name``, lent by its replacement: it runs on the original, and where it changes
    the original's plain attributes (timm's ``update_feat_shape``: a new grid), which posenc's module would
    not follow, it raises rather than leave the two apart."""
    method = getattr(original, name)

    @functools.wraps(method)
    def lent(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():  # traced: a model's own forward calls it (SAM 3's encode_boxes)
            return method(*args, **kwargs)
        before = _plain_state(original)
        result = method(*args, **kwargs)
        if not _same_state(_plain_state(original), before):
            raise RuntimeError(
                f"{type(original).__name__}.{name} changed the module posenc.torch.patch replaced, which "
                "posenc's exact module does not follow: posenc.torch.unpatch(model), call it, then "
                "posenc.torch.patch(model) again"
            )
        return result

    return lent


def _plain_state(module: nn.Module) -> dict[str, Any]:
    """``module``'s plain attributes (not its tensors, modules or private fields): containers copied whole
    (a grid's shape changed in place), other objects (a config) as they are (rebound, not changed within)."""
    plain = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    plain = {k: v for k, v in plain.items() if not isinstance(v, (torch.Tensor, nn.Module))}
    return {k: copy.deepcopy(v) if isinstance(v, (list, dict, set, tuple)) else v for k, v in plain.items()}


def _same_state(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for key in a:
        try:
            if a[key] is not b[key] and not bool(a[key] == b[key]):
                return False
        except Exception:  # an array's ambiguous truth value: compared as text
            if repr(a[key]) != repr(b[key]):
                return False
    return True


def _kept_text(original: nn.Module, replacement: type) -> str:
    """The report's words for :func:`_kept_methods` that others call (its forward's own helpers, DETR's
    ``build_sine_position_embedding``, are replaced with it): "" where there are none."""
    used = _forward_attributes(type(original))
    kept = [name for name in _kept_methods(original, replacement) if name not in used]
    return f"; its {', '.join(kept)} (not its forward) still its own code" if kept else ""


def _forward_attributes(cls: type) -> set[str]:
    """The attribute names the ``forward`` of ``cls`` reads (from its source; none where it is unread)."""
    import ast

    owner = next((c for c in cls.__mro__ if "forward" in vars(c)), None)
    source = _class_source(owner) if owner is not None else None
    try:
        tree = ast.parse(textwrap.dedent(source or ""))
    except SyntaxError:
        return set()
    functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "forward")
    forward = next(functions, None)
    return {n.attr for n in ast.walk(forward) if isinstance(n, ast.Attribute)} if forward else set()


class _PatchedTimesteps(_KeepsOriginal, ExactTimesteps):
    """posenc's :class:`Timesteps` as :func:`patch` puts it in a model (holding the original)."""


class _PatchedGridSine(_KeepsOriginal, computed.GridSine):
    """posenc's :class:`~posenc.torch.computed.GridSine` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedAxesRope(_KeepsOriginal, computed.AxesRope):
    """posenc's :class:`~posenc.torch.computed.AxesRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedAxesRopeMatrix(_KeepsOriginal, computed.AxesRopeMatrix):
    """posenc's :class:`~posenc.torch.computed.AxesRopeMatrix` as :func:`patch` puts it in a model (holding
    the original)."""


class _PatchedFramesRope(_KeepsOriginal, computed.FramesRope):
    """posenc's :class:`~posenc.torch.computed.FramesRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedLatentRope(_KeepsOriginal, computed.LatentRope):
    """posenc's :class:`~posenc.torch.computed.LatentRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedComplexRope(_KeepsOriginal, computed.ComplexRope):
    """posenc's :class:`~posenc.torch.computed.ComplexRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedHeliosRope(_KeepsOriginal, computed.HeliosRope):
    """posenc's :class:`~posenc.torch.computed.HeliosRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedSkipRope(_KeepsOriginal, computed.SkipRope):
    """posenc's :class:`~posenc.torch.computed.SkipRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedHfDinoV3Rope(_KeepsOriginal, computed.HfDinoV3Rope):
    """posenc's :class:`~posenc.torch.computed.HfDinoV3Rope` as :func:`patch` puts it in a model (holding
    the original, whose random coordinates it runs in training where its config draws them)."""

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        drawn = _drawn(self, "forward", pixel_values)
        return super().forward(pixel_values) if drawn is None else drawn


def _drawn(replacement: nn.Module, method: str, *args: Any, **kwargs: Any) -> Any:
    """The original's own ``method`` (in training) where ``replacement`` is in training and its original
    draws random coordinates there (DINOv3's augmentation: posenc draws none); else None."""
    original = replacement.__dict__.get(_ORIGINAL)
    if not (replacement.training and replacement.augmentation and isinstance(original, nn.Module)):
        return None
    mode = original.training  # put back after: unpatch gives it back in the mode it had
    try:
        return getattr(original.train(), method)(*args, **kwargs)
    finally:
        original.train(mode)


class _PatchedLtxRope(_KeepsOriginal, ltx.LtxRope):
    """posenc's :class:`~posenc.torch.ltx.LtxRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedLtxVaeRope(_KeepsOriginal, ltx.LtxVaeRope):
    """posenc's :class:`~posenc.torch.ltx.LtxVaeRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedLtx2Rope(_KeepsOriginal, ltx.Ltx2Rope):
    """posenc's :class:`~posenc.torch.ltx.Ltx2Rope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedLengthRope(_KeepsOriginal, length_rope.LengthRope):
    """posenc's :class:`~posenc.torch.length_rope.LengthRope` as :func:`patch` puts it in a model (holding
    the original)."""


class _PatchedPeriodTime(_KeepsOriginal, period_time.PeriodTime):
    """posenc's :class:`~posenc.torch.period_time.PeriodTime` as :func:`patch` puts it in a model (holding
    the original)."""


class _PatchedGridRope(_KeepsOriginal, grid_rope.GridRope):
    """posenc's :class:`~posenc.torch.grid_rope.GridRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedCosmosRope(_KeepsOriginal, grid_rope.CosmosRope):
    """posenc's :class:`~posenc.torch.grid_rope.CosmosRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedPlainRope(_KeepsOriginal, su_rope.PlainRope):
    """posenc's :class:`~posenc.torch.su_rope.PlainRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedSectionsRope(_KeepsOriginal, su_rope.SectionsRope):
    """posenc's :class:`~posenc.torch.su_rope.SectionsRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedIdsRope(_KeepsOriginal, grid_rope.IdsRope):
    """posenc's :class:`~posenc.torch.grid_rope.IdsRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedCoordsRope(_KeepsOriginal, grid_rope.CoordsRope):
    """posenc's :class:`~posenc.torch.grid_rope.CoordsRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedKandinskyRope1D(_KeepsOriginal, kandinsky.KandinskyRope1D):
    """posenc's :class:`~posenc.torch.kandinsky.KandinskyRope1D` as :func:`patch` puts it in a model
    (holding the original)."""


class _PatchedKandinskyRope3D(_KeepsOriginal, kandinsky.KandinskyRope3D):
    """posenc's :class:`~posenc.torch.kandinsky.KandinskyRope3D` as :func:`patch` puts it in a model
    (holding the original)."""


class _PatchedAnyFlowRope(_KeepsOriginal, anyflow.AnyFlowRope):
    """posenc's :class:`~posenc.torch.anyflow.AnyFlowRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedAnyFlowFarRope(_KeepsOriginal, anyflow.AnyFlowFarRope):
    """posenc's :class:`~posenc.torch.anyflow.AnyFlowFarRope` as :func:`patch` puts it in a model (holding
    the original)."""


class _PatchedCropRope(_KeepsOriginal, computed.CropRope):
    """posenc's :class:`~posenc.torch.computed.CropRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedSuScaledRope(_KeepsOriginal, su_rope.SuScaledRope):
    """posenc's :class:`~posenc.torch.su_rope.SuScaledRope` as :func:`patch` puts it in a model (holding the
    original)."""


class _PatchedAxialRope(_KeepsOriginal, axial.AxialRope):
    """posenc's :class:`~posenc.torch.axial.AxialRope` as :func:`patch` puts it in a model (holding the
    original, which lays its values out)."""


class _PatchedDinoV3Rope(_KeepsOriginal, computed.DinoV3Rope):
    """posenc's :class:`~posenc.torch.computed.DinoV3Rope` as :func:`patch` puts it in a model (holding the
    original, whose random coordinates it runs in training where the original draws them)."""

    def get_embed(self, shape: Any = None, dtype: torch.dtype | None = None) -> torch.Tensor:
        drawn = _drawn(self, "get_embed", shape, dtype)
        return super().get_embed(shape, dtype) if drawn is None else drawn

    def get_batch_embeds(
        self, shapes: list[tuple[int, int]], seq_len: int | None = None, dtype: torch.dtype | None = None
    ) -> torch.Tensor | list[torch.Tensor]:
        drawn = _drawn(self, "get_batch_embeds", shapes, seq_len, dtype)
        return super().get_batch_embeds(shapes, seq_len, dtype) if drawn is None else drawn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        drawn = _drawn(self, "forward", x)
        return super().forward(x) if drawn is None else drawn


class _PatchedTimmRope(_PatchedDinoV3Rope, computed.TimmRope):
    """posenc's :class:`~posenc.torch.computed.TimmRope` as :func:`patch` puts it in a model (holding the
    original, whose random coordinates it runs in training where the original draws them)."""


#: The patched class of each of posenc's modules of a form (:func:`_swap_proven`).
_PATCHED: dict[type, type] = {
    computed.AxesRope: _PatchedAxesRope,
    computed.AxesRopeMatrix: _PatchedAxesRopeMatrix,
    computed.FramesRope: _PatchedFramesRope,
    computed.LatentRope: _PatchedLatentRope,
    computed.SkipRope: _PatchedSkipRope,
    computed.HeliosRope: _PatchedHeliosRope,
    computed.ComplexRope: _PatchedComplexRope,
    computed.CropRope: _PatchedCropRope,
    ltx.LtxRope: _PatchedLtxRope,
    ltx.Ltx2Rope: _PatchedLtx2Rope,
    ltx.LtxVaeRope: _PatchedLtxVaeRope,
    length_rope.LengthRope: _PatchedLengthRope,
    period_time.PeriodTime: _PatchedPeriodTime,
    grid_rope.GridRope: _PatchedGridRope,
    grid_rope.CosmosRope: _PatchedCosmosRope,
    grid_rope.CoordsRope: _PatchedCoordsRope,
    grid_rope.IdsRope: _PatchedIdsRope,
    su_rope.PlainRope: _PatchedPlainRope,
    su_rope.SectionsRope: _PatchedSectionsRope,
    kandinsky.KandinskyRope1D: _PatchedKandinskyRope1D,
    kandinsky.KandinskyRope3D: _PatchedKandinskyRope3D,
    anyflow.AnyFlowRope: _PatchedAnyFlowRope,
    anyflow.AnyFlowFarRope: _PatchedAnyFlowFarRope,
    su_rope.SuScaledRope: _PatchedSuScaledRope,
}


#: posenc's own modules of kind "computed" (one patched in is found as posenc's): those of a form
#: (:data:`_PATCHED`) and the others.
_OWN_COMPUTED = (
    DetrSinePositionEmbedding,
    computed.ComputedSinusoid,
    computed.GridSine,
    computed.DinoV3Rope,
    *_PATCHED,
)


class _PatchedSinusoid(_KeepsOriginal, computed.ComputedSinusoid):
    """posenc's :class:`~posenc.torch.computed.ComputedSinusoid` as :func:`patch` puts it in a model
    (holding the original)."""


class _PatchedDetrSine(_KeepsOriginal, DetrSinePositionEmbedding):
    """posenc's :class:`DetrSinePositionEmbedding` as :func:`patch` puts it in a model (holding the
    original), called as the original is (``convention``: :mod:`posenc.torch.computed`)."""

    convention = "shape"

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        names = computed.CONVENTIONS[self.convention]
        given = dict(zip(names, args, strict=False)) | kwargs
        if self.convention == "shape":  # (shape, device, dtype, mask=None): in dtype, on device
            mask = given.get("mask")
            if mask is None:
                batch, _, height, width = given["shape"]
                mask = torch.ones(batch, height, width, device=given.get("device"))
            return super().forward(mask, given.get("dtype") or torch.float32)
        mask = given.get("pixel_mask")  # (pixel_values, pixel_mask): float32, as the originals compute
        if mask is None:
            pixels = given["pixel_values"]
            mask = torch.ones(pixels.shape[0], *pixels.shape[-2:], device=pixels.device)
        return super().forward(mask)


def _give_back_state(replacement: nn.Module, original: nn.Module) -> None:
    """Before the original goes back: its persistent buffers are the replacement's current ones (loaded,
    cast or moved since the patch), as they would be had it stayed in the model."""
    for key in replacement.__dict__.get("_posenc_shared", ()):
        value = replacement._buffers.get(key)
        if value is None:
            continue
        if key in original._buffers:
            original._buffers[key] = value
        elif key in original._parameters and original._parameters[key] is not None:
            original._parameters[key].data = value


# --- the rotary apply -----------------------------------------------------------------------------------

#: What the patched rotary embeddings issued in this thread (or task), newest first: (cos, held weakly; its
#: position ids, parameters and seq_len). posenc's apply takes the ids of the very cos it is given. A
#: context variable: each thread (and asyncio task) has its own, so concurrent forwards never see each
#: other's; the small id tensors stay until the thread's later calls push them out.
_ISSUED: contextvars.ContextVar[tuple[tuple[Any, ...], ...]] = contextvars.ContextVar(
    "posenc_rotary_issued", default=()
)
#: How many issues a thread keeps: models that build cos/sin once per layer type (Gemma 3: two) before
#: their layers run, with room.
_ISSUES = 4


def _issue(cos: torch.Tensor, ids: torch.Tensor, params: rope.RopeParameters, seq_len: int | None) -> None:
    """Record, for this thread, that ``cos`` is the rotary cos of ``ids`` (``params``, ``seq_len``)."""
    live = tuple(entry for entry in _ISSUED.get() if entry[0]() is not None)
    _ISSUED.set(((weakref.ref(cos), ids, params, seq_len), *live[: _ISSUES - 1]))


def _issued(cos: torch.Tensor) -> tuple[torch.Tensor, rope.RopeParameters, int | None] | None:
    """(position ids, parameters, seq_len) of ``cos`` where this thread's patched rotary embedding returned
    that very tensor, else None."""
    for ref, ids, params, seq_len in _ISSUED.get():
        if ref() is cos:
            return ids, params, seq_len
    return None


class _PatchedRotary(_KeepsOriginal, RotaryEmbedding):
    """posenc's :class:`RotaryEmbedding` as :func:`patch` puts it in a model (holding the original). While
    its attention modules have posenc's apply (``fused``), cos/sin come in float32 (the apply rounds
    once, from them), and on a kernel device each eager cos is recorded with what the fused kernel needs
    (its position ids, parameters and ``seq_len``: :func:`_issue`, this thread's)."""

    fused = False
    #: Hugging Face's "dynamic" as its module runs it: per layer type (None: the one) the length whose
    #: frequencies it holds and its original length (:meth:`_held_length`); None for every other module
    held: dict[str | None, tuple[int, int]] | None = None

    def forward(
        self,
        x: torch.Tensor,
        position_ids: torch.Tensor,
        layer_type: str | None = None,
        *,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if seq_len is None and self.held is not None and layer_type in self.held and not _exporting():
            seq_len = self._held_length(position_ids, layer_type)
        if not self.fused:
            return super().forward(x, position_ids, layer_type, seq_len=seq_len)
        probe = torch.empty(0, dtype=torch.float32, device=x.device)
        cos, sin = super().forward(probe, position_ids, layer_type, seq_len=seq_len)
        params = self._params_for(layer_type)
        if x.device.type in KERNEL_DEVICES and not params.mrope_section and not _tracing():
            _issue(cos, position_ids.to(x.device), params, seq_len)
        return cos, sin

    @torch.compiler.disable
    def _held_length(self, position_ids: torch.Tensor, layer_type: str | None) -> int:
        """The length whose frequencies this call runs at, as Hugging Face's dynamic update holds them: a
        call longer than the length held grows it to its own; one shorter than the original length, after
        growing, goes back to it; any other keeps the length held (the frequencies of the longest call
        since). A host read of the positions, as the original's; under ``torch.compile`` a graph break, as
        the original's (an exported program holds no state: each call its own length)."""
        held, original = self.held[layer_type]
        length = int(position_ids.max()) + 1
        now = length if length > held else held
        if length < original < held:
            now = original
        self.held = {**self.held, layer_type: (now, original)}  # a new dict: kept_state puts back the old one
        return now


def _exporting() -> bool:
    return torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export() or torch.jit.is_tracing()


def _exact_apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a patched attention module calls for Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin,
    unsqueeze_dim)``: :func:`posenc.torch.apply_rotary` of the position ids this thread's patched rotary
    embedding recorded with this very ``cos`` (the fused kernel on CUDA), else
    :func:`posenc.torch.apply_rotary` of cos/sin (float32 from the patched rotary embedding): ``x · cos +
    turn(x) · sin`` in float32, then rounded to x's dtype."""
    issued = None if _tracing() else _issued(cos)
    if issued is not None:
        ids, params, seq_len = issued
        return by_positions(q, k, ids, params, "half", unsqueeze_dim, seq_len, known=(cos, sin))
    return rotate(q, k, cos, sin, unsqueeze_dim=unsqueeze_dim)


#: posenc's apply for each apply of the family table it can replace (the others keep the model's).
_EXACT: dict[families.Apply, Callable[..., Any]] = {families.ROTATE_HALF: _exact_apply_rotary_pos_emb}


class _ExactApplyForward:
    """The ``forward`` :func:`patch` gives an attention module (an instance attribute; its class is not
    touched): the class's own ``forward``, rebuilt when the patch is made from its module's globals as they
    are then, with posenc's apply in the place of each name of ``replaced``. Only the instance holds
    it (no process-wide cache): :func:`unpatch` removes it. Picklable and copyable with its module: a copy
    or a loaded model rebuilds it from the class's module as it is then (:meth:`__setstate__`)."""

    def __init__(self, module: nn.Module, function: Any, replaced: dict[str, Callable[..., Any]]):
        self.module = module
        self.function = function
        self.replaced = replaced

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.module, *args, **kwargs)

    def __getstate__(self) -> dict:
        return {"module": self.module, "replaced": self.replaced}

    def __setstate__(self, state: dict) -> None:
        """Rebuild from the class's ``forward`` and its module's globals as they are now, warning where one
        of the replaced names holds a function that is not the library's own any more (posenc's apply takes
        its place, as it did when the patch was proven)."""
        self.module, self.replaced = state["module"], state["replaced"]
        function = type(self.module).forward
        for name in self.replaced:
            foreign = _foreign(function.__globals__.get(name), name, function.__module__)
            if foreign is not None:
                warnings.warn(
                    f"posenc.torch.patch: {function.__module__}.{name} is now {foreign}; this copy of a "
                    "patched model runs posenc's apply in its place, as the patch proved. Call "
                    "posenc.torch.patch(model) again to have it judged",
                    stacklevel=2,
                )
        self.function = _rebuilt(function, self.replaced)


def _rebuilt(function: Any, replaced: dict[str, Callable[..., Any]]) -> Any:
    """``function`` run with each name of ``replaced`` bound to its value: a new function over a copy of its
    globals as they are now (the library's module is not changed)."""
    scope = dict(function.__globals__)
    scope.update(replaced)
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


def _unwrapped(function: Any) -> Any:
    """``function`` without its decorators (``functools.wraps``' ``__wrapped__`` chain); itself if none."""
    try:
        return inspect.unwrap(function) if function is not None else None
    except ValueError:  # a cycle of __wrapped__
        return function


def _seat(path: str, module: nn.Module) -> tuple[families.Family, Any] | str | None:
    """Where the family table places ``module``: (its row, its class's ``forward`` without decorators) where
    it is an attention module whose applies posenc replaces; why it cannot be (the model keeps its apply);
    or None (its ``forward`` calls no rotary apply, or only ones its row leaves alone).

    A class its row names must call every apply of the row; any other module is judged by the generic row
    (:data:`posenc.torch.families.GENERIC`), with the applies its own module's row leaves alone."""
    function = _unwrapped(getattr(type(module), "forward", None))
    code = getattr(function, "__code__", None)
    if code is None:
        return None
    scope = function.__globals__
    reads = {n for n in code.co_names if callable(scope.get(n))}
    row = families.family_of(getattr(function, "__module__", None))
    left = {a.name for a in row.leave}
    applies = sorted(n for n in reads if families.APPLY_NAME.match(n) and n not in left)
    owner = function.__qualname__.partition(".")[0]
    if owner in row.attention:
        named = [a.name for a in row.calls]
        missing = [n for n in named if n not in reads]
        if missing:
            return (
                f"{path}: the family table's row {row.model_type!r} says {owner}.forward calls {missing[0]}, "
                "which it does not (another transformers version?): the model's apply kept"
            )
        others = [n for n in applies if n not in named]
    else:
        if not applies:
            return None
        row = families.GENERIC
        others = [n for n in applies if n != families.ROTATE_HALF.name]
    if others:
        also = " also" if len(others) < len(applies) else ""
        return f"{path}{also} rotates by {others[0]}, which the family table does not know: its apply kept"
    unknown = [a for a in row.calls if a not in _EXACT]
    if unknown:
        apply = unknown[0]
        return (
            f"{path} also rotates by {apply.name} ({apply.layout} pairs, {apply.signature}), which posenc "
            "has no apply of its own for: its apply kept"
        )
    return row, function


def _unseen(module: nn.Module) -> str | None:
    """Why posenc cannot give ``module`` its exact apply without losing what it runs, or None: a
    ``forward`` set on the instance (a hook, a user's wrapper) that is not posenc's own, or a class
    ``forward`` wrapped by a decorator (posenc would rebuild the wrapper, not the function that rotates)."""
    mine = module.__dict__.get("forward")
    if mine is not None and not (isinstance(mine, _ExactApplyForward) and mine.module is module):
        return f"its forward is set on the instance ({_named(mine)})"
    function = getattr(type(module), "forward", None)
    if function is not None and hasattr(function, "__wrapped__"):
        return f"its class's forward is wrapped by a decorator ({_named(function)})"
    return None


def _foreign(binding: Any, name: str, home: str) -> str | None:
    """What ``binding`` (the global ``name`` of an attention's module ``home``) is where it is not the
    library's own apply, else None. The library's own: a plain function of that name, defined in ``home``
    or another modeling module of transformers, that wraps nothing (no ``__wrapped__``)."""
    if not isinstance(binding, types.FunctionType):
        return f"a {type(binding).__module__}.{type(binding).__qualname__} object"
    where = f"{binding.__module__}.{binding.__qualname__}"
    if hasattr(binding, "__wrapped__"):
        return f"{where}, a wrapper (__wrapped__)"
    module = str(binding.__module__)
    if binding.__name__ != name or not (module == home or module.startswith("transformers.models.")):
        return where
    outside = _code_outside(binding, "transformers")
    if outside is not None:
        return f"{where}, code of {outside}"
    called = _calls_outside(binding, "transformers")
    return None if called is None else f"{where}, which calls {called}"


def _named(function: Any) -> str:
    inner = getattr(function, "func", function)  # functools.partial: the function it calls
    return getattr(inner, "__qualname__", None) or type(function).__name__


def _fuse(model: nn.Module, originals: dict, rotaries: list[_PatchedRotary]) -> tuple[Component, list[_Step]]:
    """Give every attention module the family table places (:func:`_seat`) posenc's apply, once each
    distinct apply, as its module's globals hold it now, is the library's own and proven on a probe to be
    the half rotation posenc computes, and no such module runs a forward posenc cannot see; else nothing,
    and why. Each forward is rebuilt now, from its module's globals as they are. Returns the component and
    its steps."""
    targets = []
    for path, module in model.named_modules():
        seat = _seat(path, module)
        if seat is None:
            continue
        if isinstance(seat, str):
            return Component(path, "rotary-apply", "?", math.nan, math.nan, False, seat), []
        unseen = _unseen(module)
        if unseen is not None:
            reason = f"{path}: {unseen}, which posenc does not replace: left as it is, the model's apply kept"
            return Component(path, "rotary-apply", "?", math.nan, math.nan, False, reason), []
        targets.append((path, module, *seat))
    if not targets:
        reason = "no attention module calls apply_rotary_pos_emb: the model's apply kept"
        return Component("", "rotary-apply", "?", math.nan, math.nan, False, reason), []
    where = _pattern([path for path, *_ in targets])
    bindings: dict[Any, tuple[str, str]] = {}
    for path, _, row, function in targets:
        for apply in row.calls:
            binding = function.__globals__.get(apply.name)
            foreign = _foreign(binding, apply.name, function.__module__)
            if foreign is not None:
                reason = (
                    f"{path}'s {apply.name} is {foreign}, not its library's own (rebound since import: "
                    "another library's patch, a mock, a wrapper): posenc does not replace what the model "
                    "runs in its place; the model's apply kept"
                )
                return Component(where, "rotary-apply", "?", math.nan, math.nan, False, reason), []
            bindings.setdefault(binding, (path, apply.name))
    rotary = rotaries[0]
    params = rotary.params or next(iter(rotary.layer_params.values()))
    worst = 0.0
    for binding, (path, name) in bindings.items():
        difference = proofs.probe_apply(binding, params)
        worst = max(worst, difference)
        if difference != 0:
            reason = f"{path}'s {name} is not the half rotation posenc computes: its apply kept"
            return Component(where, "rotary-apply", "?", difference, 0.0, False, reason), []
    steps, rebuilt = [], {}
    for path, module, row, function in targets:
        replaced = {apply.name: _EXACT[apply] for apply in row.calls}
        if function not in rebuilt:  # this patch's, from the module's globals as they are now
            rebuilt[function] = _rebuilt(function, replaced)
        steps.append(_record(originals, path, _Original("forward")))
        steps.append(
            _instance_attribute(module, "forward", _ExactApplyForward(module, rebuilt[function], replaced))
        )
    steps += [_fused_flag(module, True) for module in rotaries]
    rows = sorted({"generic" if r is families.GENERIC else repr(r.model_type) for _, _, r, _ in targets})
    how = (
        f"{len(targets)} attention module(s) (the family table's row {', '.join(rows)}): "
        "apply_rotary_pos_emb is posenc's apply (float32 from exact cos/sin, rounded to q's dtype at the "
        "end; the fused Triton kernel on CUDA), the same bits as theirs on float32 probes"
    )
    return Component(where, "rotary-apply", "rope-apply-half", worst, 0.0, True, how), steps


def _unfuse(model: nn.Module, originals: dict, rotaries: list[_PatchedRotary]) -> list[_Step]:
    """The steps that take back what :func:`_fuse` did (the attention modules' own forward, cos/sin in x's
    dtype): posenc's forward only, where it still is."""
    steps = []
    for path in [p for p, entry in originals.items() if entry.kind == "forward"]:
        module = _module_at(model, path)
        mine = None if module is None else module.__dict__.get("forward")
        if isinstance(mine, _ExactApplyForward) and mine.module is module:
            steps.append(_instance_attribute(module, "forward", None))
        entry = originals[path]
        steps.append(
            (
                functools.partial(originals.pop, path, None),
                functools.partial(originals.__setitem__, path, entry),
            )
        )
    return steps + [_fused_flag(module, False) for module in rotaries]


def _shadow(originals: dict, path: str, module: nn.Module, method: str, exact: Any) -> list[_Step]:
    """The steps that shadow ``module``'s ``method`` on the instance by posenc's ``exact`` (recorded at
    ``path`` for :func:`unpatch`)."""
    return [_record(originals, path, _Original("method", method)), _instance_attribute(module, method, exact)]


def _instance_attribute(module: nn.Module, name: str, value: Any) -> _Step:
    """The step that sets (None: removes) the instance attribute ``name`` of ``module`` (an attention
    module's ``forward``; XLNet's ``relative_positional_encoding``), shadowing its class's."""
    before: list[Any] = []

    def do() -> None:
        before.append(module.__dict__.get(name, _ABSENT))
        if value is None:
            module.__dict__.pop(name, None)
        else:
            module.__dict__[name] = value

    def undo() -> None:
        previous = before[-1]
        if previous is _ABSENT:
            module.__dict__.pop(name, None)
        else:
            module.__dict__[name] = previous

    return do, undo


def _fused_flag(module: _PatchedRotary, fused: bool) -> _Step:
    """The step that sets whether the rotary embedding returns float32 cos/sin for posenc's apply."""
    before: list[bool] = []

    def do() -> None:
        before.append(module.__dict__.get("fused", _ABSENT))
        module.fused = fused

    def undo() -> None:
        previous = before[-1]
        if previous is _ABSENT:
            module.__dict__.pop("fused", None)
        else:
            module.fused = previous

    return do, undo


#: An attribute that was not there.
_ABSENT = object()


def _pattern(paths: list[str]) -> str:
    """The attention paths as one pattern: layer numbers as ``*`` where every path has the same shape."""
    shapes = sorted({re.sub(r"\.\d+(?=\.|$)", ".*", p) for p in paths})
    return shapes[0] if len(shapes) == 1 else ", ".join(shapes)


# --- the module tree ----------------------------------------------------------------------------------


def _paths_of(model: nn.Module, path: str) -> list[str]:
    """Every path at which the module at ``path`` (or, after a patch, its replacement) is held."""
    target = model.get_submodule(path) if path else model
    return [p for p, m in model.named_modules(remove_duplicate=False) if m is target and p] or [path]


def _set_in_mode(model: nn.Module, path: str, module: nn.Module, training: bool) -> None:
    module.train(training)
    _set(model, path, module)


def _set(model: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, leaf = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, module)


def _module_at(model: nn.Module, path: str) -> nn.Module | None:
    """The module at ``path``, or None where there is none any more."""
    try:
        return model.get_submodule(path) if path else model
    except AttributeError:
        return None


def _owner_of(model: nn.Module, path: str) -> tuple[nn.Module | None, str]:
    """The module holding the tensor at ``path`` (None where there is none any more), and its name."""
    parent, _, leaf = path.rpartition(".")
    return _module_at(model, parent), leaf
