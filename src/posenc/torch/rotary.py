"""Rotary position embeddings for PyTorch, exact: :func:`cos_sin`, :class:`RotaryEmbedding` (a drop-in for
Hugging Face's ``*RotaryEmbedding`` modules) and :func:`rotate` (the rotation by cos/sin of
``posenc.torch.apply_rotary``: :func:`posenc.rope.arrays.apply_rotary`, the function of every framework,
with a faster eager road for tensors to the same bits, a NaN's sign aside).

Every cos/sin value is A · cos(p θ_i) (resp. sin) correctly rounded once to the requested dtype
(:mod:`posenc.rope`). Eager calls on CPU tensors use the NumPy core (integer ids >= 0 as rows of tables the
core builds, cached per parameters, dtype and layout like the sinusoidal tables: a decode step is a gather,
:func:`posenc.torch.clear_cache` drops them); under ``torch.compile``/``torch.export`` the graph holds the
operator ``torch.ops.posenc.rotary``, whose CPU kernel is that same core; every other device (``meta`` too)
runs the portable algorithm (:mod:`posenc.portable`) where the positions are: no host transfer, no sync.
"longrope" picks its short or long frequencies from the sequence length, max(positions) + 1 without
``seq_len``: read when the operator runs on the CPU; on a device both sets are computed and one is picked
there (``torch.where``, as Hugging Face does). One exception, as in Hugging Face: "dynamic" scaling's
frequencies change with the sequence length, so without an explicit ``seq_len`` a device call reads
max(positions) + 1 on the host (on the CPU, compiled or not, the core reads it when it runs); pass
``seq_len`` (to :func:`cos_sin` or ``RotaryEmbedding.forward``) for ``torch.compile(fullgraph=True)`` and
export on a device, and for meta tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .. import rope, validation
from ..core import compiled, parallel
from ..errors import PosencTypeError, PosencValueError
from ..rope.arrays import apply_rotary as arrays_apply_rotary
from ..rope.arrays import check_fit, check_layout, check_operands, check_request
from . import operator
from .functions import _CACHE, _CACHE_LOCK, CACHE_LIMIT_BYTES, cache_insert
from .tensors import (
    _DTYPE_NAMES,
    _check_positions_on_host,
    _dtype_name,
    _numpy_dtype,
    _position_tensor,
    _to_tensor,
    _tracing,
)


def cos_sin(
    positions: torch.Tensor | Any,
    params: rope.RopeParameters,
    *,
    dtype: torch.dtype | str = torch.float32,
    layout: str = "half",
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.rope.cos_sin` for tensors: (cos, sin), each ``positions.shape + (rotary_dim,)`` on
    ``positions``' device (with ``mrope_section``, positions has a leading axis of 3 that the result drops).

    >>> cos, sin = cos_sin(torch.tensor([[0, 1]]), rope.config(head_dim=4, base=100.0))
    >>> sin
    tensor([[[0.0000, 0.0000, 0.0000, 0.0000],
             [0.8415, 0.0998, 0.8415, 0.0998]]])
    """
    return _cos_sin(positions, params, None, dtype, layout, seq_len)


def _cos_sin(
    positions: Any,
    params: rope.RopeParameters,
    key: str | None,
    dtype: torch.dtype | str,
    layout: str,
    seq_len: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`cos_sin`; ``key`` is ``operator.params_json(params)`` where the caller holds it (a module: under
    ``torch.compile`` a plain string attribute, where torch 2.11's dynamo cannot pass the frozen dataclass
    to ``params_json``)."""
    positions = _position_tensor(positions)
    check_request(params, layout, tuple(positions.shape))
    if seq_len is not None and not isinstance(seq_len, torch.SymInt):  # every type's, even one taking none
        seq_len = validation.integer("seq_len", seq_len, minimum=1)
    name = _dtype_name(dtype)
    if positions.device.type == "cpu" and not _tracing():
        return _host_rows(positions, params, key, name, layout, seq_len)
    kind = params.kind
    on_host = positions.device.type == "cpu" and operator.CPU_CORE  # traced: the CPU kernel reads the host
    if seq_len is None and (kind.switch is not None or (kind.grows_with_length and on_host)):
        # the length, max(positions) + 1, taken when the operator runs (seq_len -1): on the CPU its kernel
        # reads it, as an eager call does (one set of rows); on a device a switching type's two sets are
        # computed and one picked there, with no host read (operator.rotary_rows)
        return _device_rows(positions, key or operator.params_json(params), -1, name, layout)
    if seq_len is None and kind.grows_with_length:
        if positions.device.type == "meta":
            raise ValueError(
                f"rope_type {params.rope_type!r} picks its frequencies from the sequence length, which meta "
                "positions do not hold; pass seq_len= (the length the model runs at, e.g. max(positions) + 1)"
            )
        seq_len = max(1, int(positions.max()) + 1)  # a host read, as Hugging Face's dynamic_rope_update does
    length = -1 if seq_len is None else seq_len
    if not kind.depends_on_length:
        length = -1
    key = operator.params_json(params) if key is None else key
    return _device_rows(positions, key, length, name, layout)


def _host_rows(
    positions: torch.Tensor,
    params: rope.RopeParameters,
    key: str | None,
    name: str,
    layout: str,
    seq_len: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) of CPU ``positions`` by the NumPy core (:func:`posenc.rope.cos_sin`), integer ids as rows of
    cached tables: an eager call's, and the rotary operator's body on the CPU (a compiled or exported
    program's). Raises ValueError for an invalid position. ``seq_len`` < 0 is None (the operator's)."""
    seq_len = None if seq_len is not None and seq_len < 0 else seq_len
    bounds = _check_positions_on_host(positions)
    tables = None if bounds is None else _cached_tables(bounds, params, key, name, layout)
    if tables is not None:
        ids = positions.to(torch.int64)
        return torch.embedding(tables[0], ids), torch.embedding(tables[1], ids)  # new tensors
    host = positions.detach().to(torch.float64 if positions.is_floating_point() else torch.int64).numpy()
    cos, sin = rope.cos_sin(host, params, dtype=_numpy_dtype(name), layout=layout, seq_len=seq_len)
    return _to_tensor(cos), _to_tensor(sin)


@operator.on_cpu(operator.ROTARY)
def _rotary_on_cpu(
    positions: torch.Tensor, params: str, seq_len: int, dtype_name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.posenc.rotary`` on the CPU (what a compiled or exported program runs there): (cos, sin)
    as an eager call gives them (:func:`_host_rows`; ``seq_len`` < 0 for a type whose frequencies depend on
    the length: max(positions) + 1, read here); positions of a cached table are two gathers, with no read of
    the positions (a decode step's whole cost); the portable algorithm for an invalid position (its rows of
    NaN, where an eager call raises; every row NaN where the length is to be read from the positions)."""
    if not operator.CPU_CORE:
        return operator.rotary_rows(positions, params, seq_len, dtype_name, layout)
    parameters = operator.parameters(params)
    rows = _gathered(positions, parameters, params, dtype_name, layout)
    if rows is not None:
        return rows
    try:
        return _host_rows(positions, parameters, params, dtype_name, layout, seq_len)
    except (ValueError, OverflowError):
        cos, sin = operator.rotary_rows(positions, params, seq_len, dtype_name, layout)
        if seq_len < 0 and parameters.kind.depends_on_length:  # a length of an invalid position: no row
            return torch.full_like(cos, float("nan")), torch.full_like(sin, float("nan"))
        return cos, sin


def _device_rows(
    positions: torch.Tensor, key: str, length: int, name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin) by the portable algorithm where the positions are: the operator, or on eager CUDA its
    kernel directly (without the dispatcher's cost)."""
    if operator.direct(positions):
        return operator.rotary_rows(positions, key, length, name, layout)
    cos, sin = torch.ops.posenc.rotary(positions, key, length, name, layout)
    return cos, sin


def _cached_tables(
    bounds: tuple[int, int], params: rope.RopeParameters, key: str | None, name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (cos, sin) tables cached per parameters, dtype and layout, holding positions ``bounds`` (the
    least and greatest), the same bits as :func:`posenc.rope.cos_sin` (which builds them), within
    :data:`posenc.torch.functions.CACHE_LIMIT_BYTES`, cleared by :func:`posenc.torch.clear_cache`. A decode
    step is then two gathers (``torch.embedding``: new tensors, never views of the tables). None where the
    rows depend on more than the position (dynamic and longrope scaling, multimodal sections), for
    negative positions, and past the cache's size."""
    if not _cacheable(params):
        return None
    low, high = bounds
    width = params.rotary_dim
    itemsize = getattr(torch, name).itemsize
    if low < 0 or (high + 1) * 2 * width * itemsize > CACHE_LIMIT_BYTES:
        return None
    cache_key = _cache_key(params, key, name, layout)
    tables = _CACHE.get(cache_key)
    if tables is None or tables[0].shape[0] <= high:
        size = min(1 << max(10, high.bit_length()), CACHE_LIMIT_BYTES // (2 * width * itemsize))
        with _CACHE_LOCK:
            tables = _CACHE.get(cache_key)
            if tables is None or tables[0].shape[0] <= high:
                cos, sin = rope.cos_sin(np.arange(size), params, dtype=_numpy_dtype(name), layout=layout)
                tables = cache_insert(cache_key, (_to_tensor(cos), _to_tensor(sin)))
    return tables


def _gathered(
    positions: torch.Tensor, params: rope.RopeParameters, key: str, name: str, layout: str
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(cos, sin) of ``positions`` from the cached table (:func:`_cached_tables`) where it holds them all
    already: new tensors, with no read of the positions (integer ids the gather accepts are valid ones);
    None otherwise."""
    if positions.dtype not in (torch.int64, torch.int32) or not _cacheable(params):
        return None
    tables = _CACHE.get(_cache_key(params, key, name, layout))
    if tables is None:
        return None
    try:
        return torch.embedding(tables[0], positions), torch.embedding(tables[1], positions)
    except IndexError:  # a position outside the table: the checked road
        return None


def _cacheable(params: rope.RopeParameters) -> bool:
    """Whether rotary rows depend on the position alone (a table can hold them)."""
    return not params.mrope_section and not params.kind.depends_on_length


def _cache_key(params: rope.RopeParameters, key: str | None, name: str, layout: str) -> tuple:
    return ("rotary", operator.params_json(params) if key is None else key, name, layout)


#: What :class:`RotaryEmbedding` returns (its ``form``): the (cos, sin) pair of the layout, a pair of one
#: column per frequency, or one complex tensor.
FORMS = ("full", "half_width", "complex")
#: The real dtype of a complex form's parts: float32, float64 for float64 x.
_COMPLEX_PARTS = {torch.float64: torch.float64}


class RotaryEmbedding(torch.nn.Module):
    """Exact rotary cos/sin: a drop-in for Hugging Face's ``LlamaRotaryEmbedding`` and its siblings.

    ``config`` is a :class:`posenc.rope.RopeParameters` or anything :func:`posenc.rope.config` reads (a
    Hugging Face config object, dict or config.json path). ``forward(x, position_ids, *, seq_len=None)``
    returns (cos, sin) of shape ``position_ids.shape + (rotary_dim,)`` in x's dtype on x's device, each value
    correctly rounded once to that dtype (Hugging Face computes float32 angles, then rounds again).
    ``inv_freq`` (float32, the exact frequencies rounded) and ``attention_scaling`` are kept for code that
    reads them.

    ``seq_len`` picks the frequencies of "dynamic" and "longrope" scaling (default max(position_ids) + 1:
    for "dynamic" a host read, as Hugging Face does, so give it under ``torch.compile(fullgraph=True)``,
    export or on meta tensors; "longrope" picks on the device). Other types ignore it.

    Per-layer RoPE (Gemma 3 style: ``rope_parameters`` nested per layer type, as transformers 5 saves it):
    ``layer_type="full_attention"`` builds the module of that layer type alone; without ``layer_type`` the
    module holds every layer type, like Hugging Face's ``Gemma3RotaryEmbedding``, and
    ``forward(x, position_ids, layer_type)`` picks one (``{layer_type}_inv_freq`` and
    ``{layer_type}_attention_scaling`` are kept; ``params`` is None, ``layer_params`` maps each type).

    ``form`` is what forward returns, as the models write it: ``"full"`` (the default) the pair above;
    ``"half_width"`` (cos, sin) of shape ``position_ids.shape + (rotary_dim // 2,)``, one column per
    frequency, in x's dtype (GPT-OSS: its apply rotates halves); ``"complex"`` one tensor
    ``A·cos θ + i·A·sin θ`` of that shape, complex64 (complex128 for float64 x) whatever x's dtype, as
    ``torch.polar`` of float32 angles gives it (Llama 4 and DeepSeek-V2's ``freqs_cis``: their apply
    multiplies adjacent pairs) — its real and imaginary parts each correctly rounded to float32.
    ``layout`` applies to ``"full"`` alone: by default the one the model's transformers rotary gives
    (:func:`posenc.rope.config_layout`: interleaved pairs for Cohere, GLM-4V, GLM-OCR, BLT, GPT-J and
    CodeGen, halves for every other), ``"half"`` or ``"interleaved"`` to choose.

    >>> module = RotaryEmbedding({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 64})
    >>> cos, sin = module(torch.zeros(1, 3, 8), torch.arange(3)[None])
    >>> tuple(cos.shape), module.attention_scaling
    ((1, 3, 8), 1.0)
    >>> freqs_cis = RotaryEmbedding(module.params, form="complex")(torch.zeros(1), torch.arange(3)[None])
    >>> tuple(freqs_cis.shape), freqs_cis.dtype
    ((1, 3, 4), torch.complex64)
    """

    inv_freq: torch.Tensor

    def __init__(
        self, config: Any, *, layout: str | None = None, layer_type: str | None = None, form: str = "full"
    ):
        super().__init__()
        if layout is None:  # as the model's own rotary gives them: Cohere's, GLM-4V's, GPT-J's pairs
            layout = rope.config_layout(config) if form == "full" else "half"
        check_layout(layout)
        if form not in FORMS:
            raise PosencValueError(
                f"form must be one of {', '.join(map(repr, FORMS))}; got {form!r}", parameter="form"
            )
        if form != "full" and layout != "half":
            raise PosencValueError(
                f"layout={layout!r} applies to form='full' alone: a {form} output has one column per "
                "frequency; leave layout out",
                parameter="layout",
            )
        self.layout = layout
        self.form = form
        self.layer_type = layer_type
        types = () if layer_type is not None else rope.layer_types(config)
        #: per layer type, the parameters of a config nested per layer type (else empty)
        self.layer_params: dict[str, rope.RopeParameters] = {}
        #: the operator's string of each layer type's parameters (None: the module's own)
        self._keys: dict[str | None, str] = {}
        for name in types:
            self._put_layer(name, rope.config(config, layer_type=name))
        if types:
            self.params = None
            return
        if isinstance(config, rope.RopeParameters):
            if layer_type is not None:
                raise TypeError(f"layer_type={layer_type!r} cannot apply to a RopeParameters; leave it out")
            self.params = config
        else:
            self.params = rope.config(config, layer_type=layer_type)
        self._keys[None] = operator.params_json(self.params)
        self.attention_scaling = rope.attention_scaling(self.params)
        inverse = torch.from_numpy(rope.inv_freq(self.params)).to(torch.float32)
        self.register_buffer("inv_freq", inverse, persistent=False)

    def _put_layer(self, name: str, params: rope.RopeParameters) -> None:
        """Hold ``params`` for the layer type ``name``: its parameters, ``{name}_inv_freq`` and
        ``{name}_attention_scaling`` (:func:`posenc.torch.patch` puts a width read from a model's own
        frequencies here)."""
        self.layer_params[name] = params
        inverse = torch.from_numpy(rope.inv_freq(params)).to(torch.float32)
        old = getattr(self, f"{name}_inv_freq", None)
        self.register_buffer(f"{name}_inv_freq", inverse.to(old.device if old is not None else "cpu"), False)
        setattr(self, f"{name}_attention_scaling", rope.attention_scaling(params))
        self._keys[name] = operator.params_json(params)

    def forward(
        self,
        x: torch.Tensor,
        position_ids: torch.Tensor,
        layer_type: str | None = None,
        *,
        seq_len: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin): ``position_ids.shape + (rotary_dim,)``, x's dtype, on x's device. With multimodal
        sections, ``position_ids`` is (3, B, L), or (B, L) for text (the same id on every axis).
        ``layer_type`` picks the layer type of a module built for every layer type (else None, or the
        module's own ``layer_type``); ``seq_len`` as the class docstring says."""
        params = self._params_for(layer_type)
        key = self._keys[layer_type if self.params is None else None]
        if isinstance(position_ids, torch.Tensor) and position_ids.is_meta and x.device.type != "meta":
            raise PosencValueError(
                f"position_ids are on meta (a shape, no values) but x is on {x.device}: give position ids "
                "on x's device",
                parameter="position_ids",
            )
        if self.form != "complex" and x.dtype not in _DTYPE_NAMES:  # the cos/sin's dtype: x's names it
            raise PosencTypeError(
                f"x must be a tensor of dtype {', '.join(map(str, _DTYPE_NAMES))}, the (cos, sin)'s; got "
                f"{x.dtype}: cast it, e.g. .float() (only its dtype and device are read)",
                parameter="x",
            )
        position_ids = _position_tensor(position_ids).to(x.device)  # a list, a NumPy array: checked
        if params.mrope_section and position_ids.dim() == 2:
            position_ids = position_ids.expand(3, -1, -1)
        if self.form == "full":
            return _cos_sin(position_ids, params, key, x.dtype, self.layout, seq_len)
        dtype = x.dtype if self.form == "half_width" else _COMPLEX_PARTS.get(x.dtype, torch.float32)
        cos, sin = _cos_sin(position_ids, params, key, dtype, "half", seq_len)
        half = cos.shape[-1] // 2
        cos, sin = cos[..., :half].contiguous(), sin[..., :half].contiguous()
        return (cos, sin) if self.form == "half_width" else torch.complex(cos, sin)

    def _params_for(self, layer_type: str | None) -> rope.RopeParameters:
        if self.params is None:
            if layer_type not in self.layer_params:
                names = ", ".join(map(repr, self.layer_params))
                raise ValueError(
                    f"this module holds the RoPE of every layer type ({names}); got "
                    f"layer_type={layer_type!r}: call module(x, position_ids, layer_type) with one of them"
                )
            return self.layer_params[layer_type]
        if layer_type is not None and layer_type != self.layer_type:
            built = "no layer_type" if self.layer_type is None else f"layer_type={self.layer_type!r}"
            raise ValueError(
                f"layer_type={layer_type!r} was passed to a module built with {built}; build "
                "RotaryEmbedding(config) from a config nested per layer type to hold every layer type, or "
                "RotaryEmbedding(config, layer_type=...) per layer type"
            )
        return self.params

    def extra_repr(self) -> str:
        if self.params is None:
            return f"layer_types={tuple(self.layer_params)}, layout={self.layout!r}"
        p = self.params
        shown = f"rope_type={p.rope_type!r}, rotary_dim={p.rotary_dim}, base={p.base:g}"
        return f"{shown}, layout={self.layout!r}" + ("" if self.form == "full" else f", form={self.form!r}")


def rotate(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    unsqueeze_dim: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`posenc.rope.arrays.apply_rotary` (Hugging Face's ``apply_rotary_pos_emb``) for tensors, the
    same values bit for bit: ``x · cos + turn(x) · sin`` in float32 at least, rounded once to x's dtype.

    Eager calls in the half layout over the whole head, without autograd, take a faster road to the same
    bits for every number: x1·c1 − x2·s1 and x2·c2 + x1·s2 (the same roundings as x·cos + turn(x)·sin), no
    turned copy of x; on the CPU one pass in C over x (posenc.core's extension, where built), elsewhere x
    cast once and each half's two products and their sum written into preallocated float32 buffers. A NaN
    stays a NaN in the same place, but its sign may differ from the general function's (x1·c1 − x2·s1 keeps
    the sign of a NaN in x2·s1; x1·c1 + (−x2)·s1 flips it). Everything else (interleaved, partial rotary,
    gradients, tracing) takes the general function.

    >>> q = torch.tensor([[[[1.0, 0.0]]]], dtype=torch.bfloat16)
    >>> rotate(q, q, torch.tensor([[[0.0, 0.0]]]), torch.tensor([[[1.0, 1.0]]]))[0]
    tensor([[[[0., 1.]]]], dtype=torch.bfloat16)
    """
    tensors = (q, k, cos, sin)
    try:  # ~0.5 us for floating tensors (a decode step rotates once per layer); the full check says the rest
        plain = (
            q.is_floating_point()
            and k.is_floating_point()
            and cos.is_floating_point()
            and sin.is_floating_point()
            and type(unsqueeze_dim) is int
        )
    except AttributeError:
        plain = False
    if not plain:
        check_operands(*tensors, unsqueeze_dim)
    if _half_whole(tensors, layout, unsqueeze_dim):
        if not _tracing():
            check_fit(q, k, cos, sin, unsqueeze_dim)  # the general function checks the rest
            c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
            return _rotate_half(q, c, s), _rotate_half(k, c, s)
        if all(t.device.type == "cpu" for t in tensors) and q.dtype == k.dtype:
            check_fit(q, k, cos, sin, unsqueeze_dim)
            q_out, k_out = torch.ops.posenc.rotate_half(q, k, cos, sin, unsqueeze_dim)  # one node: the C pass
            return q_out, k_out
    return arrays_apply_rotary(q, k, cos, sin, layout=layout, unsqueeze_dim=unsqueeze_dim)


def _half_whole(tensors: tuple[Any, ...], layout: str, unsqueeze_dim: int) -> bool:
    """Whether a rotation takes the fast road (eager: :func:`_rotate_half`; traced on the CPU:
    ``torch.ops.posenc.rotate_half``, which calls it): tensors in the half layout over the whole head, no
    gradient to carry, no torch.func transform or forward mode (the one pass in C has no derivative; the
    formula's operations carry it), cos/sin broadcasting into q and k."""
    if layout != "half" or not all(isinstance(t, torch.Tensor) for t in tensors):
        return False
    q, k, cos, sin = tensors
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    if operator._FUNCTORCH_ACTIVE() or operator._FORWARD_AD._current_level >= 0:
        return False  # a torch.func transform or forward mode: the formula's operations carry it
    if cos.shape[-1] % 2 or not (cos.shape[-1] == q.shape[-1] == k.shape[-1]):
        return False
    if not -cos.dim() - 1 <= unsqueeze_dim <= cos.dim():
        return False
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return _broadcast_into((c.shape, s.shape), (q.shape, k.shape))


@operator.on_cpu(operator.ROTATE_HALF)
def _rotate_half_on_cpu(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``torch.ops.posenc.rotate_half`` on the CPU: the eager fast road (one pass in C where built), the same
    bits as the formula."""
    c, s = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return _rotate_half(q, c, s), _rotate_half(k, c, s)


def _broadcast_into(shapes: tuple[torch.Size, ...], targets: tuple[torch.Size, ...]) -> bool:
    """Whether ``torch.broadcast_shapes(target, *shapes) == target`` for every target (False where that
    raises), without its ~15 µs a call: each shape no longer than the target, each size 1 or the target's."""
    for target in targets:
        for shape in shapes:
            if len(shape) > len(target):
                return False
            for n, m in zip(reversed(shape), reversed(target), strict=False):
                if n != 1 and n != m:
                    return False
    return True


def _rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x · cos + [-x2, x1] · sin in float32 (or wider), rounded once to x's dtype: ``x.shape``, a new tensor.

    In C (``posenc.core._kernels.rotate_half``, one pass over x, on posenc's threads) where
    the extension is built, the tensors are on the CPU, x is float32, bfloat16 or float16 and its last
    dimension and cos's and sin's are contiguous; else :func:`_rotate_half_torch`. The same bits either
    way, NaNs included (:func:`_nan_rules` reads how torch's loops pick them)."""
    out = _rotate_half_compiled(x, cos, sin)
    return _rotate_half_torch(x, cos, sin) if out is None else out


def _rotate_half_torch(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x · cos + [-x2, x1] · sin in float32 (or wider: x's, cos's or sin's dtype) buffers, rounded once to
    x's dtype."""
    promote = torch.promote_types
    compute = promote(promote(x.dtype, torch.float32), promote(cos.dtype, sin.dtype))
    wide, cos, sin = x.to(compute), cos.to(compute), sin.to(compute)
    half = x.shape[-1] // 2
    x1, x2 = wide[..., :half], wide[..., half:]
    out = torch.empty_like(wide)
    o1, o2 = out[..., :half], out[..., half:]
    product = torch.empty_like(x1)
    torch.mul(x1, cos[..., :half], out=o1)
    torch.mul(x2, sin[..., :half], out=product)
    o1.sub_(product)  # x1·c1 + (−x2)·s1: negation is exact, so the same two roundings and the same sum
    torch.mul(x2, cos[..., half:], out=o2)
    torch.mul(x1, sin[..., half:], out=product)
    o2.add_(product)
    return out.to(x.dtype)


# The C rotation's storage types (its `kind`) and the dtype its buffers are viewed as.
_KINDS = {
    torch.float32: (0, torch.float32),
    torch.bfloat16: (1, torch.int16),
    torch.float16: (2, torch.int16),
}


def _rotate_half_compiled(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor | None:
    """:func:`_rotate_half_torch`'s bits from the C rotation, or None where it does not apply.

    C reads the shapes and strides of x, cos and sin (float32, broadcast to x) and of out
    (``torch.empty_like(x)``: the strides of the torch road's result) from NumPy views: rows contiguous, the
    other dimensions (at most three once merged) in any order. Large tensors run in parts on
    :func:`posenc.core.parallel.run_blocks`'s threads (``POSENC_NUM_THREADS``, else the cores)."""
    loaded = compiled.module()
    rotate = getattr(loaded, "rotate_half", None)
    kind = _KINDS.get(x.dtype)
    strided = torch.strided
    if (
        rotate is None
        or kind is None
        or x.shape[-1] < 2
        or not (x.is_cpu and cos.is_cpu and sin.is_cpu)
        or not (x.layout == cos.layout == sin.layout == strided)
        or x.stride(-1) != 1  # torch's loops vectorise rows of contiguous operands: the NaN rules are theirs
        or cos.stride(-1) != 1
        or sin.stride(-1) != 1
        or not (cos.is_floating_point() and sin.is_floating_point())
        or torch.float64 in (cos.dtype, sin.dtype)  # computed in float64: the torch road
        or not loaded.float_mode_standard()  # torch.set_flush_denormal(True), or another rounding mode
    ):
        return None
    rules = _nan_rules(x.dtype, x.shape[-1] // 2)
    if rules is None:
        return None
    code, view = kind
    c = cos if cos.dtype == torch.float32 else cos.to(torch.float32)
    s = sin if sin.dtype == torch.float32 else sin.to(torch.float32)
    if x.requires_grad or c.requires_grad or s.requires_grad:  # under torch.no_grad()
        x, c, s = x.detach(), c.detach(), s.detach()
    out = torch.empty_like(x)
    try:
        if code:
            x, out_view = x.view(view), out.view(view)
        else:
            out_view = out
        arrays = (x.numpy(), c.numpy(), s.numpy(), out_view.numpy())
    except (RuntimeError, TypeError):  # negative views, tensor subclasses NumPy cannot take: the torch road
        return None
    parts = max(1, min(parallel.threads(), x.numel() // parallel.PARALLEL_ELEMENTS))
    if parts == 1:  # a decode step: no pool
        return out if rotate(*arrays, code, rules, 0, 1) else None
    done = []  # whether C takes the layout: the same answer for every part
    parallel.run_blocks(
        lambda part, _: done.append(rotate(*arrays, code, rules, part, parts)), parts, 1, elements=x.numel()
    )
    return out if all(done) else None


def _nan_rules(dtype: torch.dtype, half: int) -> tuple[int, ...] | None:
    """How torch's loops pick NaNs, as the C rotation takes it: (mul_second, sub_second, add_second,
    nan_base, nan_sign, nan_payload), for x of ``dtype`` with rows of 2 ``half``; None where no rule gives
    :func:`_rotate_half_torch`'s bits (the torch road then runs).

    Where both operands of a product, difference or sum are NaN, the result is one of them, quieted: which
    one depends on how torch's loops were compiled (on x86 with AVX2 or AVX-512: the second; scalar code may
    differ); and a NaN rounds to 16 bits as torch's conversion does (AVX2 and AVX-512: 0xFFFF for bfloat16,
    F16C: sign, 0x7E00 and payload for float16; scalar code: 0x7FC0). So each rule is tried on rows of
    NaNs of every pairing, infinities, zeros, subnormals and numbers of many exponents, once per dtype and
    width, and the first that gives the torch road's bits on all of them is kept."""
    key = (dtype, half)
    if key not in _RULES:
        _RULES[key] = _probe_rules(dtype, half)
    return _RULES[key]


_RULES: dict[tuple[torch.dtype, int], tuple[int, ...] | None] = {}

# The NaN roundings to 16 bits tried, (base, sign, payload): AVX2 and AVX-512 bfloat16, scalar bfloat16,
# AVX-512 BF16 instructions; F16C float16, scalar float16 (sign kept, payload not), neither.
_NAN16 = {
    torch.bfloat16: ((0xFFFF, 0, 0), (0x7FC0, 0, 0), (0x7FC0, 0x8000, 0x7F)),
    torch.float16: ((0x7E00, 0x8000, 0x3FF), (0x7E00, 0x8000, 0), (0x7E00, 0, 0)),
    torch.float32: ((0, 0, 0),),
}


def _probe_rules(dtype: torch.dtype, half: int) -> tuple[int, ...] | None:
    """:func:`_nan_rules` found: the C rotation with each rule against the torch road on probe rows."""
    g = torch.Generator().manual_seed(half)
    shape = (max(16, -(-4096 // half)), 2 * half)
    x, cos, sin = (_probe_values(t, shape, g) for t in (dtype, torch.float32, torch.float32))
    kind, view = _KINDS[dtype]
    bits = torch.int32 if dtype == torch.float32 else torch.int16  # compared as bits: NaN == NaN
    want = _rotate_half_torch(x, cos, sin).view(bits)
    got = torch.empty_like(x)
    arrays = (x.view(view).numpy(), cos.numpy(), sin.numpy(), got.view(view).numpy())
    rotate = compiled.module().rotate_half
    for nan16 in _NAN16[dtype]:
        for picks in ((1, 1, 1), (0, 0, 0), (1, 0, 0), (0, 1, 1), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1)):
            rules = (*picks, *nan16)
            if rotate(*arrays, kind, rules, 0, 1) and torch.equal(got.view(bits), want):
                return rules
    return None


def _probe_values(dtype: torch.dtype, shape: tuple[int, int], g: torch.Generator) -> torch.Tensor:
    """Values of ``dtype`` for :func:`_probe_rules`, each of either sign: NaNs of random payloads (a quarter
    of them), infinities, zeros, subnormals, any finite bits, numbers of few significant bits (exact products,
    ties) and numbers of moderate exponent."""
    fraction, exponent = {torch.float32: (23, 8), torch.bfloat16: (7, 8), torch.float16: (10, 5)}[dtype]
    bias = (1 << (exponent - 1)) - 1
    inf = ((1 << exponent) - 1) << fraction

    def ints(low: int, high: int) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=g, dtype=torch.int64)

    field = ints(0, 1 << fraction)
    moderate = (bias + ints(-min(20, bias - 1), min(20, bias - 1) + 1)) << fraction
    choices = (
        inf | field.clamp(min=1),  # NaN
        inf | field.clamp(min=1),
        torch.full(shape, inf),
        torch.zeros(shape, dtype=torch.int64),
        field,  # subnormal
        ints(0, inf),
        moderate | (field & (0xF << (fraction - 4))),  # four significant bits
        moderate | field,
    )
    pick = ints(0, len(choices))
    bits = torch.zeros(shape, dtype=torch.int64)
    for i, choice in enumerate(choices):
        bits = torch.where(pick == i, choice, bits)
    width = 1 + exponent + fraction
    bits = bits - ints(0, 2) * (1 << (width - 1))  # the sign, as the signed integer of the same bits
    return bits.to(torch.int32 if width == 32 else torch.int16).view(dtype)
