"""What the frameworks share for rotary embeddings, written once over an array namespace
(:class:`posenc.portable.Backend`: NumPy, torch, jax.numpy): the cos/sin tables laid out from the exact
[A sin θ_i p | A cos θ_i p] rows, and the rotation of queries and keys.

Layouts: ``"half"`` (Hugging Face, GPT-NeoX "rotate half": features i and i + rotary_dim/2 form a pair, so
the tables are [θ_0 .. θ_{n-1}, θ_0 .. θ_{n-1}]) and ``"interleaved"`` (GPT-J, Meta's Llama reference code:
features 2i and 2i+1, so [θ_0, θ_0, θ_1, θ_1, ...]).

Multimodal rotary embeddings (Qwen2-VL's M-RoPE) take three position ids per token (time, height, width):
frequency i turns with the axis its section names — ``mrope_section = (t, h, w)`` gives the first t
frequencies to time, the next h to height and the last w to width, or, with ``mrope_interleaved``
(Qwen3-VL), frequencies 1, 4, 7, ... (the first h of them) to height, 2, 5, 8, ... (the first w) to width
and the rest to time.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import PosencTypeError, PosencValueError
from ..portable import Backend, backend_of
from .parameters import RopeParameters

LAYOUTS = ("half", "interleaved")


def check_layout(layout: Any) -> str:
    """``layout`` if it is one of :data:`LAYOUTS`; else a ValueError naming them."""
    if layout not in LAYOUTS:
        raise PosencValueError(
            f"layout must be one of {', '.join(map(repr, LAYOUTS))}; got {layout!r}", parameter="layout"
        )
    return layout


def check_request(params: Any, layout: Any, shape: tuple[int, ...]) -> None:
    """Refuse (TypeError, ValueError) what no framework can compute: ``params`` not a
    :class:`~posenc.rope.parameters.RopeParameters`, an unknown ``layout``, or positions of ``shape`` without
    the leading axis of 3 that multimodal sections need."""
    if not isinstance(params, RopeParameters):
        raise PosencTypeError(
            f"params must be posenc.rope.RopeParameters; got {type(params).__name__}; "
            "build it with posenc.rope.config(...)",
            parameter="params",
        )
    check_layout(layout)
    if params.mrope_section and (len(shape) == 0 or shape[0] != 3):
        raise PosencValueError(
            f"positions must have a leading axis of 3 (time, height, width ids) for multimodal rotary "
            f"embeddings (mrope_section={list(params.mrope_section)}); got shape {tuple(shape)}",
            parameter="positions",
        )


def arrange(
    ops: Backend, rows: Any, count: int, sections: tuple[int, ...] | None, interleaved: bool, layout: str
) -> tuple[Any, Any]:
    """(cos, sin) laid out as ``layout`` says, from rows ``[A sin θ_i p | A cos θ_i p]`` (``count``
    frequencies); with ``sections``, rows has a leading axis of 3 (time, height, width) that is dropped,
    each frequency taken from the axis of its section."""
    sin, cos = rows[..., :count], rows[..., count:]
    if sections:
        axis = ops.asarray(mrope_axes(sections, interleaved), rows)
        sin = ops.where(axis == 0, sin[0], ops.where(axis == 1, sin[1], sin[2]))
        cos = ops.where(axis == 0, cos[0], ops.where(axis == 1, cos[1], cos[2]))
    if layout == "half":
        return ops.concat([cos, cos], -1), ops.concat([sin, sin], -1)
    shape = (*cos.shape[:-1], 2 * count)
    return ops.stack([cos, cos], -1).reshape(shape), ops.stack([sin, sin], -1).reshape(shape)


def mrope_axes(sections: tuple[int, ...], interleaved: bool) -> np.ndarray:
    """The position axis (0 time, 1 height, 2 width) of each frequency: a new array, the caller's to change.

    >>> mrope_axes((1, 1, 2), False), mrope_axes((2, 1, 1), True)
    (array([0, 1, 2, 2]), array([0, 1, 2, 0]))
    """
    return _mrope_axes(tuple(sections), bool(interleaved)).copy()


@functools.lru_cache(maxsize=64)
def _mrope_axes(sections: tuple[int, ...], interleaved: bool) -> np.ndarray:
    """:func:`mrope_axes`, computed once per sections: read-only, never handed out (a copy is)."""
    n = sum(sections)
    if not interleaved:
        axis = np.repeat(np.arange(len(sections)), sections)
    else:
        axis = np.zeros(n, dtype=np.int64)
        for which in (1, 2):
            axis[which : 3 * sections[which] : 3] = which
    axis.flags.writeable = False
    return axis


def apply_rotary(
    q: Any, k: Any, cos: Any, sin: Any, *, layout: str = "half", unsqueeze_dim: int = 1
) -> tuple[Any, Any]:
    """Rotate q and k by the rotary (cos, sin): Hugging Face's ``apply_rotary_pos_emb``, for torch tensors,
    JAX and NumPy arrays alike (``posenc.torch.apply_rotary`` and ``posenc.jax.apply_rotary`` are this).

    ``x · cos + turn(x) · sin`` on the first ``cos.shape[-1]`` features (the rest, under a partial rotary
    factor, pass unchanged, as in GPT-NeoX), with turn(x) = [-x2, x1] for ``layout="half"`` and
    (x0, x1) → (-x1, x0) per pair for ``"interleaved"``. cos/sin get a new axis at ``unsqueeze_dim``
    ((B, L, D) against q of (B, heads, L, D)). Computed in the promotion of q's (k's), cos's and sin's
    dtypes and float32 and rounded once to q's (k's) dtype: half-precision inputs in float32, float64
    cos/sin in float64. Under ``jax.jit`` XLA's CPU code generator fuses the products and the sum into
    fused multiply-adds (a rounding fewer): a jitted float32 result may differ from the eager one by 1 ulp.

    >>> q = np.array([[[[1.0, 0.0]]]])
    >>> apply_rotary(q, q, np.array([[[0.0, 0.0]]]), np.array([[[1.0, 1.0]]]))[0]
    array([[[[0., 1.]]]])
    """
    check_layout(layout)
    ops = check_operands(q, k, cos, sin, unsqueeze_dim)
    axis = unsqueeze_dim if unsqueeze_dim >= 0 else cos.ndim + 1 + unsqueeze_dim
    if not 0 <= axis <= cos.ndim:
        raise PosencValueError(
            f"unsqueeze_dim must be in [{-cos.ndim - 1}, {cos.ndim}]; got {unsqueeze_dim}",
            parameter="unsqueeze_dim",
        )
    check_fit(q, k, cos, sin, unsqueeze_dim)
    where = (slice(None),) * axis + (None,)
    cos, sin = cos[where], sin[where]
    return rotate(ops, q, cos, sin, layout), rotate(ops, k, cos, sin, layout)


def check_operands(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: Any) -> Backend:
    """The :class:`~posenc.portable.Backend` of q, after refusing (TypeError) what no rotation takes: q, k,
    cos or sin not an array of q's framework, or not of a floating-point dtype (an integer q would get its
    rotated values truncated to integers, silently), or an ``unsqueeze_dim`` that is not an integer."""
    ops = backend_of(q)
    for name, x in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        if not hasattr(x, "dtype") or not hasattr(x, "shape") or backend_of(x).name != ops.name:
            raise PosencTypeError(
                f"{name} must be a {ops.name} array, as q is; got {type(x).__name__}: give q, k, cos and sin "
                "in one framework",
                parameter=name,
            )
        if not ops.is_floating(x.dtype):
            raise PosencTypeError(
                f"{name} must have a floating-point dtype; got {x.dtype}: its rotated values are not whole "
                "numbers (an integer result would truncate them); cast it to float32 first",
                parameter=name,
            )
    if isinstance(unsqueeze_dim, bool) or not isinstance(unsqueeze_dim, (int, np.integer)):
        raise PosencTypeError(
            f"unsqueeze_dim must be an integer (the axis of q and k that cos/sin get a new axis at: 1 for "
            f"(B, heads, L, D), 2 for (B, L, heads, D)); got {unsqueeze_dim!r}",
            parameter="unsqueeze_dim",
        )
    return ops


def check_fit(q: Any, k: Any, cos: Any, sin: Any, unsqueeze_dim: int) -> None:
    """Raise unless cos/sin (given a new axis at ``unsqueeze_dim``) fit q's and k's shapes without growing
    them or repeating a position: every axis equal to theirs but the new one (heads), the rotary width (the
    last, checked where the rotation is) and a leading batch axis of 1 (ids shared by the batch).
    Broadcasting further gave q of batch 1 against cos of batch 4 a result of batch 4, and one position's
    cos/sin rotated every position of q, silently. Hugging Face's shapes ((B or 1, L, D) against
    (B, heads, L, D)) take a short road: a decode step calls this once per layer."""
    qs, ks, cs = q.shape, k.shape, cos.shape
    if (  # Hugging Face's shapes: about a microsecond
        unsqueeze_dim == 1
        and len(cs) == 3
        and len(qs) == 4 == len(ks)
        and cs == sin.shape
        and cs[1] == qs[2] == ks[2]
        and qs[0] == ks[0]
        and cs[0] in (1, qs[0])
    ):
        return
    for name, shape in (("q", qs), ("k", ks)):
        _check_fit(name, tuple(shape), tuple(cs), tuple(sin.shape), unsqueeze_dim)


def _check_fit(name: str, x_shape: tuple, cos_shape: tuple, sin_shape: tuple, unsqueeze_dim: int) -> None:
    """:func:`check_fit` for one of q and k, by the general rule."""
    if tuple(sin_shape) != tuple(cos_shape):
        raise PosencValueError(
            f"cos and sin must have one shape; got {tuple(cos_shape)} and {tuple(sin_shape)}", parameter="sin"
        )
    axis = unsqueeze_dim if unsqueeze_dim >= 0 else len(cos_shape) + 1 + unsqueeze_dim
    grown = (*cos_shape[:axis], 1, *cos_shape[axis:])
    offset = len(x_shape) - len(grown)
    misfit = offset < 0 or any(
        i != axis and size != x_shape[i + offset] and not (i + offset == 0 and size == 1)
        for i, size in enumerate(grown[:-1])
    )
    if misfit:
        raise PosencValueError(
            f"cos/sin of shape {tuple(cos_shape)} (a new axis at unsqueeze_dim={unsqueeze_dim}) do not fit "
            f"{name} of shape {tuple(x_shape)}: every axis but the heads must be {name}'s (the batch may be "
            f"1), so that no query or key is repeated and no position shares another's angles; give cos/sin "
            f"of {name}'s positions",
            parameter="cos",
        )


def rotate(ops: Backend, x: Any, cos: Any, sin: Any, layout: str) -> Any:
    """``x · cos + turn(x) · sin`` on the first ``cos.shape[-1]`` features of x (the rest pass unchanged):
    turn(x) = [-x2, x1] for ``"half"``, (x0, x1) → (-x1, x0) per pair for ``"interleaved"``. Computed in the
    promotion of x's, cos's and sin's dtypes and float32 (float64 cos/sin are not rounded first), rounded
    once, to x's dtype, at the end."""
    width = cos.shape[-1]
    if width > x.shape[-1] or width % 2:
        raise PosencValueError(
            f"cos/sin have {width} features but the query/key have {x.shape[-1]}; the rotary width must be "
            "even and at most the head dimension",
            parameter="cos",
        )
    promote = ops.xp.promote_types
    compute = promote(promote(x.dtype, ops.float32), promote(cos.dtype, sin.dtype))
    part, rest = ops.cast(x[..., :width], compute), x[..., width:]
    if layout == "half":
        half = width // 2
        turned = ops.concat([-part[..., half:], part[..., :half]], -1)
    else:
        turned = ops.stack([-part[..., 1::2], part[..., 0::2]], -1).reshape(part.shape)
    rotated = ops.cast(part * ops.cast(cos, compute) + turned * ops.cast(sin, compute), x.dtype)
    return rotated if rest.shape[-1] == 0 else ops.concat([rotated, rest], -1)
