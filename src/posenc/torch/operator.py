"""posenc's PyTorch operators, one home: ``torch.ops.posenc.exact`` (the encoding of positions),
``torch.ops.posenc.table`` (a table on a device), ``torch.ops.posenc.add_table`` (x plus a table: a module
with its default positions, traced on the CPU), ``torch.ops.posenc.rotary`` (rotary cos/sin) and
``torch.ops.posenc.rotate_half`` (the rotary apply a traced program calls on the CPU): the
portable algorithm (:mod:`posenc.portable`) as PyTorch custom operators, registered once, when this module is
first imported (by :mod:`posenc.torch.functions`).

Its kernel runs on the tensors' own device: on CUDA one Triton kernel
(:mod:`posenc.torch.kernels.encode_kernel`, when triton is installed), on the CPU the C core (as an eager
call; :data:`CPU_CORE`), elsewhere (MPS, ``meta``) the portable algorithm. No host transfer and no sync on a
device, so ``torch.compile`` and ``torch.export`` trace through it without breaking the graph, and CUDA
graphs capture it; its fake kernel gives the output's shape and dtype.
Invalid positions give rows of NaN (a device cannot raise without a sync).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .. import adapters, core, portable, rope
from ..errors import PosencTypeError
from ..rope.arrays import apply_rotary as arrays_apply_rotary
from ..rope.arrays import arrange
from ..rope.tables import exact_law
from .kernels import table_launch
from .kernels.common import KERNEL_DEVICES
from .tensors import _tracing

#: The ``posenc`` operator namespace. Each operator is defined by its schema with a kernel for every device
#: (``CompositeExplicitAutograd``), a CPU kernel where one is registered (:func:`on_cpu`) and a fake kernel
#: for tracing. Registered through ``torch.library.Library`` rather than ``torch.library.custom_op``: the
#: latter's Python autograd and device layers cost ~15 us a call, ~50 us in a compiled decode step, where
#: the dispatcher's own is ~4 us. The table operator takes no tensor, so autograd falls through it; the
#: others carry a gradient where an input asks for one, or refuse it as an eager call does (:func:`_define`'s
#: ``differentiable``).
_LIBRARY = torch.library.Library("posenc", "DEF")

#: The differentiable computation of the same values, per operator name (:func:`_define`): what its
#: Autograd kernel runs where a derivative may be asked for (an input requiring a gradient, forward mode, a
#: torch.func transform). Set by the module that owns the rule (:mod:`posenc.torch.functions` for
#: ``exact``'s derivative in real positions).
DIFFERENTIABLE: dict[str, Any] = {}

#: A context in which a call dispatches below autograd (its Autograd kernel passed over): what an operator's
#: Autograd kernel runs the operator in where no derivative is asked for.
below_autograd = torch._C._AutoDispatchBelowAutograd
_FORWARD_AD = torch.autograd.forward_ad


def _define(schema: str, kernel: Any, fake: Any, *, differentiable: int = 0) -> str:
    """Define ``posenc::<schema>`` with ``kernel`` on every device and ``fake`` for tracing; its name.

    ``differentiable``: how many leading arguments are tensors a gradient may reach. Then its Autograd kernel
    runs :data:`DIFFERENTIABLE`'s rule where grad mode is on and one of them requires a gradient, or forward
    mode or a torch.func transform is active, and the operator below autograd otherwise (~4 us a call more
    than falling through). A traced program holds the operator whatever its inputs were when it was traced:
    an exported program trained afterwards would otherwise carry no gradient through it (a rotary's q and
    k, a module's x: silently none)."""
    name = schema.split("(", 1)[0]
    _LIBRARY.define(schema)
    _LIBRARY.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"posenc::{name}", fake, lib=_LIBRARY)
    if not differentiable:
        _LIBRARY.impl(name, torch.library.fallthrough_kernel, "Autograd")
        return name
    below = getattr(torch.ops.posenc, name).default
    grad_enabled = torch.is_grad_enabled

    def autograd_kernel(*args: Any) -> Any:
        if (
            (grad_enabled() and any(t is not None and t.requires_grad for t in args[:differentiable]))
            or _FORWARD_AD._current_level >= 0
            or _FUNCTORCH_ACTIVE()
        ):
            return DIFFERENTIABLE[name](*args)
        with below_autograd():
            return below(*args)

    _LIBRARY.impl(name, autograd_kernel, "Autograd")
    return name


def on_cpu(name: str) -> Any:
    """Decorator: register the function as operator ``posenc::name``'s CPU kernel."""

    def register(kernel: Any) -> Any:
        _LIBRARY.impl(name, kernel, "CPU")
        return kernel

    return register


def _exact(
    positions: torch.Tensor,
    offset: torch.Tensor | None,
    d_model: int,
    base: float,
    shift: float,
    scale: float,
    layout: str,
    odd: str,
    dtype_name: str,
) -> torch.Tensor:
    """The portable algorithm on ``positions``' device: (positions + offset).shape + (d_model,). On ``meta``
    its shape alone: nothing computed (the constants of a width of 2**20 took 20 s)."""
    if positions.device.type == "meta":
        return _exact_fake(positions, offset, d_model, base, shift, scale, layout, odd, dtype_name)
    request = _request((d_model, base, shift, scale, layout, odd, dtype_name))
    if offset is not None:
        offset = offset.to(positions.device)
    return table_launch.encode(positions, request, offset)


#: Whether the operators' CPU kernels run the C core (an eager call's path; :mod:`posenc.torch.functions`
#: and :mod:`posenc.torch.rotary` register them): True, hundreds of times faster than the portable algorithm
#: traced as tensor operations. False runs the portable algorithm there, what every other device runs (the
#: same bits): to check that path on a machine without a GPU, as the suite does.
CPU_CORE = True


def _exact_fake(positions, offset, d_model, base, shift, scale, layout, odd, dtype_name):
    shape = positions.shape if offset is None else torch.broadcast_shapes(positions.shape, offset.shape)
    return positions.new_empty((*shape, d_model), dtype=getattr(torch, dtype_name))


EXACT = _define(
    "exact(Tensor positions, Tensor? offset, SymInt d_model, float base, float shift, float scale, "
    "str layout, str odd, str dtype_name) -> Tensor",
    _exact,
    _exact_fake,
    differentiable=2,
)


def _table(
    length: int,
    start: int,
    where: torch.device,
    d_model: int,
    base: float,
    shift: float,
    scale: float,
    layout: str,
    odd: str,
    dtype_name: str,
) -> torch.Tensor:
    """The table of positions ``start .. start + length - 1`` (valid: |p| < 2**31) on ``where``: on CUDA by
    angle addition, certified per element (:mod:`posenc.torch.kernels.table_launch`), on the CPU the core
    (:data:`CPU_TABLE`), elsewhere the portable algorithm over the positions; the same bits every way."""
    if where.type == "meta":  # its shape alone: nothing computed
        return _table_fake(length, start, where, d_model, base, shift, scale, layout, odd, dtype_name)
    options = (d_model, base, shift, scale, layout, odd, dtype_name)
    if where.type == "cpu" and CPU_CORE and CPU_TABLE is not None and "cpu" not in KERNEL_DEVICES:
        rows = CPU_TABLE(length, start, options)
        if rows is not None:
            return rows
    return table_launch.table(length, start, _request(options), where)


#: The table operator's CPU path (:mod:`posenc.torch.functions` sets it): the core's rows, as an eager call
#: gets them, or None where a position is invalid (the portable algorithm's rows of NaN then). The operator
#: takes no tensor, so the dispatcher reaches only its kernel for every device, which hands the CPU here
#: (unless the CPU is made a kernel device, as the kernels' tests do: their kernels then).
CPU_TABLE: Any = None


def _table_fake(length, start, where, d_model, base, shift, scale, layout, odd, dtype_name):
    return torch.empty((length, d_model), dtype=getattr(torch, dtype_name), device=where)


_define(
    "table(SymInt length, SymInt start, Device where, SymInt d_model, float base, float shift, float scale, "
    "str layout, str odd, str dtype_name) -> Tensor",
    _table,
    _table_fake,
)


def _add_table(x: torch.Tensor, start: int, batch_first: bool, *options: Any) -> torch.Tensor:
    """``x`` plus the table of positions ``start .. start + seq - 1``, seq being x's sequence length (x is
    ``(..., seq, d_model)`` with ``batch_first``, else ``(seq, batch, d_model)``): what a module with its
    default positions adds, as one node of a traced CPU graph. On the CPU the core's cached rows are added
    straight from the cache (:data:`CPU_ADD_TABLE`), as an eager call adds them, where the table operator
    must hand over a copy (its output may not be a view of the cache); elsewhere, and where the cache
    cannot serve, the table operator's rows. A fresh contiguous tensor of x's shape and dtype. ``options``:
    (d_model, base, shift, scale, layout, odd, dtype name), as the table operator takes them."""
    if x.device.type == "meta":
        return _add_table_fake(x)
    if x.device.type == "cpu" and CPU_CORE and CPU_ADD_TABLE is not None and "cpu" not in KERNEL_DEVICES:
        y = CPU_ADD_TABLE(x, start, batch_first, options)
        if y is not None:
            return y.contiguous()
    rows = _table(x.shape[-2] if batch_first else x.shape[0], start, x.device, *options)
    return (x + (rows if batch_first else rows[:, None])).contiguous()


#: The add-table operator's CPU path (:mod:`posenc.torch.modules` sets it): x plus the cached rows, or
#: None where the cache cannot serve them (too large, or an invalid position): the table operator's then.
CPU_ADD_TABLE: Any = None


def _add_table_fake(x: torch.Tensor, *_: Any) -> torch.Tensor:
    return x.new_empty(x.shape)


ADD_TABLE = _define(
    "add_table(Tensor x, SymInt start, bool batch_first, SymInt d_model, float base, float shift, "
    "float scale, str layout, str odd, str dtype_name) -> Tensor",
    _add_table,
    _add_table_fake,
    differentiable=1,
)


def _add_table_differentiable(x: torch.Tensor, start: int, batch_first: bool, *options: Any) -> torch.Tensor:
    """``add_table`` where x requires a gradient: x plus the table operator's rows (no gradient of their
    own), recorded by autograd (d/dx = 1)."""
    rows = torch.ops.posenc.table(x.shape[-2] if batch_first else x.shape[0], start, x.device, *options)
    return x + (rows if batch_first else rows[:, None])


DIFFERENTIABLE[ADD_TABLE] = _add_table_differentiable


def direct(tensor: torch.Tensor) -> bool:
    """Whether an eager call on ``tensor`` may launch posenc's CUDA kernel itself rather than through the
    operator: a plain tensor on a kernel device, in :func:`_plain_eager` mode. An eager caller has
    settled gradients before (a derivative asked for takes its own road; a rotary refuses one) and the
    fake kernels serve only tracing, so there the dispatcher adds nothing but its cost (~4 us a call,
    measured on the CPU: part of a decode step's budget)."""
    return type(tensor) is torch.Tensor and tensor.device.type in KERNEL_DEVICES and _plain_eager()


#: torch's functorch check (vmap, grad), where this torch has it.
_FUNCTORCH_ACTIVE = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def _plain_eager() -> bool:
    """Not traced (compile, export, ONNX, jit), no functorch transform, and no dispatch mode (FakeTensorMode
    of a non-strict export, FlopCounterMode, ...) that the operator must see."""
    return not _tracing() and not _FUNCTORCH_ACTIVE() and _get_current_dispatch_mode() is None


def exact(positions: torch.Tensor, offset: torch.Tensor | None, options: tuple) -> torch.Tensor:
    """``torch.ops.posenc.exact(positions, offset, *options)``; eager CUDA calls skip the dispatcher."""
    if direct(positions):
        return _exact(positions, offset, *options)
    return torch.ops.posenc.exact(positions, offset, *options)


def table(length: int, start: int, where: torch.device, options: tuple) -> torch.Tensor:
    """``torch.ops.posenc.table(length, start, where, *options)``; eager CUDA calls skip the dispatcher."""
    if where.type in KERNEL_DEVICES and _plain_eager():
        return _table(length, start, where, *options)
    return torch.ops.posenc.table(length, start, where, *options)


def add_table(x: torch.Tensor, start: int, batch_first: bool, options: tuple) -> torch.Tensor:
    """``torch.ops.posenc.add_table(x, start, batch_first, *options)``."""
    return torch.ops.posenc.add_table(x, start, batch_first, *options)


@functools.lru_cache(maxsize=64)
def _request(options: tuple) -> Any:
    """The portable algorithm's host constants for (d_model, base, shift, scale, layout, odd, dtype name)."""
    *core_options, dtype_name = options
    return portable.request_for(core.Options(*core_options), dtype_name)


TORCH = portable.backend_named("torch")


# --- the rotary operator ------------------------------------------------------------------------------


def rotary_rows(
    positions: torch.Tensor, params: str, seq_len: int, dtype_name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.posenc.rotary``: the portable algorithm on ``positions``' device, (cos, sin) laid out as
    :func:`posenc.torch.rotary.cos_sin` says (the operator's body: eager CUDA calls run it directly).
    ``seq_len`` < 0: none given; a type whose frequencies depend on the length then takes max(positions) + 1
    (:func:`_at_their_length`)."""
    kind = parameters(params).kind
    if seq_len < 0 and kind.depends_on_length and positions.numel():
        return _at_their_length(positions, params, dtype_name, layout)
    wanted, sections, interleaved = request(params, seq_len, dtype_name)
    rows = table_launch.encode(positions, wanted)
    return arrange(TORCH, rows, wanted.count, sections, interleaved, layout)


def _at_their_length(
    positions: torch.Tensor, params: str, dtype_name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) of a length-dependent type at max(positions) + 1, where no ``seq_len`` was given: a
    switching type's (LongRoPE's) two sets, the second where that length passes the switch, picked on the
    device with no host read (traceable, as Hugging Face's own ``torch.where`` between the two; twice the
    work of one set; the attention factor is the same for both); a growing type's length read on the host
    (a sync, as an eager call's: a program traced on the CPU, whose kernel reads it there, run on a
    device), every row NaN where that length is no valid position's."""
    top = positions.max()
    top = top.floor() if top.is_floating_point() else top
    switch = parameters(params).kind.switch
    if switch is not None:
        at = switch(parameters(params))
        first, second = (rotary_rows(positions, params, n, dtype_name, layout) for n in (at, at + 1))
        past = _at_least(top, at)
        return torch.where(past, second[0], first[0]), torch.where(past, second[1], first[1])
    if not (torch.isfinite(top.double()) and abs(int(top)) < 2**31):
        cos, sin = rotary_rows(positions, params, 1, dtype_name, layout)
        return torch.full_like(cos, float("nan")), torch.full_like(sin, float("nan"))
    return rotary_rows(positions, params, int(top) + 1, dtype_name, layout)


def _at_least(top: torch.Tensor, at: int) -> torch.Tensor:
    """``top >= at`` exactly (max(positions) + 1 > switch, where + 1 in the positions' own type wraps or
    rounds: 32767 + 1 in int16, 4096 + 1 in float16): integers in int64, reals in float64 (float32 on MPS,
    which has no float64: exact for a switch below 2**24)."""
    if not top.is_floating_point():
        return top.to(torch.int64) >= at
    return top.to(torch.float32 if top.device.type == "mps" else torch.float64) >= at


def _rotary_fake(positions, params, seq_len, dtype_name, layout):
    fields = json.loads(params)
    shape = positions.shape[1:] if fields["mrope_section"] else positions.shape
    width = 2 * (fields["rotary_dim"] // 2)
    dtype = getattr(torch, dtype_name)
    return tuple(positions.new_empty((*shape, width), dtype=dtype) for _ in range(2))


ROTARY = _define(
    "rotary(Tensor positions, str params, SymInt seq_len, str dtype_name, str layout) -> (Tensor, Tensor)",
    rotary_rows,
    _rotary_fake,
    differentiable=1,
)


def _rotary_refused(positions: torch.Tensor, *rest: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``rotary`` where a derivative may be asked for: real positions requiring a gradient (a program traced
    without one, called with one) refused, as an eager call refuses them (cos/sin computed outside autograd
    would lose it silently); otherwise the operator below autograd."""
    if torch.is_grad_enabled() and positions.requires_grad:
        message = adapters.NOT_DIFFERENTIABLE.format(
            name="positions", what="posenc's rotary cos/sin", detach="positions.detach()"
        )
        raise PosencTypeError(message, parameter="positions")
    with below_autograd():
        return torch.ops.posenc.rotary.default(positions, *rest)


DIFFERENTIABLE[ROTARY] = _rotary_refused


@torch.compiler.assume_constant_result
def params_json(params: rope.RopeParameters) -> str:
    """The parameters as the operator takes them (a JSON string: operators take plain types); a constant of
    the compiled program."""
    return json.dumps(dataclasses.asdict(params), sort_keys=True)


@functools.lru_cache(maxsize=64)
def parameters(params: str) -> rope.RopeParameters:
    """The :class:`posenc.rope.RopeParameters` of :func:`params_json`'s string, read back once per distinct
    string (frozen: shared safely)."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in json.loads(params).items()}
    return rope.RopeParameters(**fields)


@functools.lru_cache(maxsize=64)
def request(params: str, seq_len: int, dtype_name: str) -> Any:
    """The portable request of ``params`` (:func:`params_json`'s string), its sections and their
    interleaving."""
    params = parameters(params)
    law = exact_law(params, None if seq_len < 0 else seq_len)
    return portable.request_for_law(law, dtype_name), params.mrope_section, params.mrope_interleaved


# --- the rotary apply, traced on the CPU ---------------------------------------------------------------


def rotate_half(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.posenc.rotate_half``: :func:`posenc.rope.arrays.apply_rotary` in the half layout (its
    tensor operations); on the CPU, :mod:`posenc.torch.rotary` registers the one pass in C an eager call
    makes, so that a compiled or exported program calls it rather than tracing the formula."""
    return arrays_apply_rotary(q, k, cos, sin, layout="half", unsqueeze_dim=unsqueeze_dim)


def _rotate_fake(q, k, cos, sin, unsqueeze_dim):
    return torch.empty_like(q), torch.empty_like(k)


ROTATE_HALF = _define(
    "rotate_half(Tensor q, Tensor k, Tensor cos, Tensor sin, SymInt unsqueeze_dim) -> (Tensor, Tensor)",
    rotate_half,
    _rotate_fake,
    differentiable=4,
)
DIFFERENTIABLE[ROTATE_HALF] = rotate_half  # its formula's tensor operations, recorded by autograd
