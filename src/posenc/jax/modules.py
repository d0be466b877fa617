"""posenc's Flax (NNX) modules: :class:`SinusoidalPositionalEncoding` and :class:`RotaryEmbedding`.

An ordinary module that imports Flax: ``posenc.jax`` loads it when one of the two names is first asked for
(``from posenc.jax import SinusoidalPositionalEncoding``), so that :func:`posenc.jax.encode` and
:func:`posenc.jax.rotary.cos_sin` need JAX alone.

A module holds its options (and dropout's keys): pass it to a jitted function as an argument
(``nnx.jit``, or ``jax.jit`` over ``nnx.split``'s state) or close over it; as a plain ``jax.jit`` argument
its dropout keys are constants of the program, the same mask on every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import adapters, rope, validation
from ..core.options import takes_options
from ..errors import PosencTypeError, PosencValueError
from ..portable import backend_named
from ..rope.arrays import check_layout
from . import rotary
from .cache import GATHER_ROWS, _contiguous, _rows_or_algorithm
from .functions import _NUMPY, _encode_any, _host_positions, _into_program, _is_int, _Options, _traced

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ..core.options import OptionKeywords

__all__ = ["RotaryEmbedding", "SinusoidalPositionalEncoding"]

_JNP = backend_named("jax")


class SinusoidalPositionalEncoding(nnx.Module):
    """``dropout(x + PE)``, exact: the Flax (NNX) twin of ``posenc.torch.SinusoidalPositionalEncoding``.

    ``SinusoidalPositionalEncoding(d_model, dropout=0.0, max_len=None, *, base, shift, scale, layout, odd,
    batch_first=True, rngs=None)``: ``dropout`` and ``max_len`` may be given by position, in the PyTorch
    tutorial's order (``SinusoidalPositionalEncoding(512, 0.1, 5000, rngs=nnx.Rngs(0))``); every other
    argument is keyword-only, ``rngs`` as in every Flax module.

    Args:
        d_model: the width of ``x``'s last axis.
        dropout: dropout probability applied to the sum, in [0, 1) (``nnx.Dropout``; needs ``rngs`` in
            training).
        base, shift, scale, layout, odd: as in :func:`posenc.encode` (the defaults are Vaswani et al. 2017's).
        batch_first: ``x`` is ``(batch, seq, d_model)`` (or any ``(..., seq, d_model)``); with False,
            ``(seq, batch, d_model)``.
        max_len: a cache hint only — longer sequences work.
        rngs: ``nnx.Rngs`` for dropout (its ``dropout`` stream, else ``default``).

    ``__call__(x, positions=None, *, offset=0, deterministic=None, rngs=None)``:
        positions: ``(seq,)`` or ``(batch, seq)``, integer or real, concrete or traced (left padding,
            packed sequences, a context-parallel shard's global positions); default
            ``offset + arange(seq)``.
        offset: an int (< 2**31), or an integer array of shape ``()`` or x's batch shape (``(batch,)``; one
            per sequence), added to the positions (KV-cache decoding: step t equals row t of the full pass).
            Under ``jit`` pass an array, so one compiled step serves every t; an int is a static argument
            (one program per value).
        deterministic: True disables dropout; None takes the module's setting
            (``nnx.view(module, deterministic=True)`` or ``module.eval()`` for inference).
        rngs: random keys for dropout at this call,
            overriding the module's.

    PE is the exact value rounded once to ``x``'s dtype in JAX (float32, float16, bfloat16, or float64 with
    x64; a NumPy float64 ``x`` is float32 with x64 off), then added to ``x`` in that dtype. The module's
    state (``nnx.state``) holds no table — only the dropout keys when ``rngs`` is given; tables are cached
    per options and dtype outside it.

    Inside ``jax.shard_map`` the module sees the local shard only: pass each shard's global
    ``positions`` (see :mod:`posenc.sharding`), never rely on the default ``arange(seq)`` there.

    >>> import jax.numpy as jnp
    >>> from posenc.jax import SinusoidalPositionalEncoding
    >>> pe = SinusoidalPositionalEncoding(4)
    >>> y = pe(jnp.zeros((2, 3, 4)))  # (batch, seq, d_model) in, the same shape and dtype out
    >>> y.shape, y.dtype
    ((2, 3, 4), dtype('float32'))
    >>> y[0, 1]  # position 1
    Array([0.84147096, 0.5403023 , 0.00999983, 0.99995   ], dtype=float32)
    >>> pe(jnp.zeros((1, 1, 4), jnp.bfloat16), offset=1)  # one decoding step, in bfloat16
    Array([[[0.839844, 0.539062, 0.0100098, 1]]], dtype=bfloat16)
    """

    @takes_options(before="batch_first")
    def __init__(
        self,
        d_model: int,
        dropout: float = 0.0,
        max_len: int | None = None,
        *,
        batch_first: bool = True,
        rngs: nnx.Rngs | None = None,
        **options: Unpack[OptionKeywords],
    ) -> None:
        checked = _Options.check(d_model, **options)
        self.d_model, self.base, self.shift, self.scale, self.layout, self.odd = checked
        self.max_len, self.batch_first, rate = validation.module_options(max_len, batch_first, dropout)
        self.dropout = nnx.Dropout(rate, rngs=rngs)

    def __call__(
        self,
        x: jax.Array,
        positions: Any = None,
        *,
        offset: Any = 0,
        deterministic: bool | None = None,
        rngs: Any = None,
    ) -> jax.Array:
        pe = self.encoding_for(x, positions, offset=offset)
        # added at x's rank, explicitly: under jax_numpy_rank_promotion="raise" a (seq, d) encoding cannot be
        # added to a (batch, seq, d) x
        y = x + (pe.reshape((1,) * (x.ndim - pe.ndim) + pe.shape) if pe.ndim < x.ndim else pe)
        off = self.dropout.deterministic if deterministic is None else deterministic
        if self.dropout.rate > 0 and not off and rngs is None and self.dropout.rngs is None:
            raise ValueError(
                f"dropout={self.dropout.rate} in training mode needs random keys: construct the module "
                "with rngs=nnx.Rngs(0), pass rngs= to the call, or pass deterministic=True (inference)"
            )
        return self.dropout(y, deterministic=deterministic, rngs=rngs)

    def encoding_for(self, x: jax.Array, positions: Any = None, *, offset: Any = 0) -> jax.Array:
        """The PE that ``__call__`` adds to ``x`` (before dropout), shaped to broadcast against it."""
        dt = _x_dtype(x)
        batch_shape, seq = adapters.batch_and_seq(tuple(x.shape), self.d_model, self.batch_first)
        options = _Options(self.d_model, self.base, self.shift, self.scale, self.layout, self.odd)
        if _is_int(offset):
            _int_offset_in_range(offset)
        if positions is None and _is_int(offset):
            pe = _contiguous(options, dt, seq, _offset_int(offset, seq), self.max_len or 0, _traced(x))
        else:
            traced = _traced(positions) or _traced(offset)
            if positions is not None:
                positions = jnp.asarray(positions) if _traced(positions) else _host_positions(positions)
                if traced and not _traced(positions):  # checked as an eager call checks them, then moved
                    validation.positions(positions)  # into the program exactly or refused
                    positions = _into_program("positions", positions)
            if not _is_int(offset) and not _traced(offset):
                offset = _host_offset(offset)
                integers = isinstance(offset, np.ndarray) and np.issubdtype(offset.dtype, np.integer)
                if integers and (offset < 0).any():  # concrete: refused, traced positions or not
                    raise ValueError(f"offset must be >= 0; got {offset.reshape(-1).tolist()}")
                if traced and isinstance(offset, np.ndarray):
                    offset = _into_program("offset", offset)
            ids, extra = adapters.positions_and_offset(
                _JNP if traced else _NUMPY,
                seq,
                batch_shape,
                positions,
                offset,
                host=not traced,
                arange=lambda: (jnp if traced else np).arange(seq),
            )
            negative = None
            if traced and extra is not None and not _is_int(extra):
                # a traced offset is read nowhere: below zero, that sequence's rows NaN (not those of p - k);
                # real positions made NaN by an addition, whose derivative passes the NaN of theirs through
                # (a jnp.where would give them a derivative of zero there: finite, silently); x + -0.0 is x
                negative = jnp.asarray(extra) < 0
                if jnp.issubdtype(jnp.asarray(ids).dtype, jnp.floating):
                    ids = ids + jnp.where(negative, jnp.nan, -0.0).astype(jnp.asarray(ids).dtype)
                    negative = None
            pe = None
            if traced:  # rows of a constant table while the positions lie in it (same bits)
                pe = _rows_or_algorithm(jnp.asarray(ids), extra, options, dt, self.max_len or GATHER_ROWS)
            if pe is None:
                pe = _encode_any(ids, options, dt, offset=extra)
            if negative is not None:
                pe = jnp.where(negative[..., None], jnp.nan, pe).astype(dt)
        return adapters.orient(_JNP, jnp.asarray(pe), self.batch_first)


class RotaryEmbedding(nnx.Module):
    """Exact rotary cos/sin, the Flax (NNX) twin of :class:`posenc.torch.RotaryEmbedding`.

    ``config``: a :class:`posenc.rope.RopeParameters` or anything :func:`posenc.rope.config` reads;
    ``layer_type`` picks one layer type of a config with RoPE parameters per layer type (Gemma 3).
    ``__call__(x, position_ids, *, seq_len=None)`` returns (cos, sin) of shape
    ``position_ids.shape + (rotary_dim,)`` in x's dtype in JAX (a NumPy float64 x is float32 with x64 off;
    with multimodal sections, position_ids is (3, B, L), or (B, L) for text). ``inv_freq`` (float32) and
    ``attention_scaling`` are attributes.
    ``layout``: by default the one the model's transformers rotary gives (:func:`posenc.rope.config_layout`:
    interleaved pairs for Cohere, GLM-4V, GLM-OCR, BLT, GPT-J and CodeGen, halves for every other and for a
    RopeParameters), as the torch module's; ``"half"`` or ``"interleaved"`` to choose.

    >>> import jax.numpy as jnp
    >>> from posenc import rope
    >>> from posenc.jax import RotaryEmbedding
    >>> rotary = RotaryEmbedding(rope.config(head_dim=4, base=100.0))
    >>> cos, sin = rotary(jnp.zeros((1, 2, 4), jnp.float16), jnp.array([[0, 1]]))  # x: only its dtype
    >>> cos.shape, cos.dtype
    ((1, 2, 4), dtype('float16'))
    >>> sin[0, 1]  # position 1: sin θ_i, θ = (1, 0.1), in the "half" layout
    Array([0.8413 , 0.09985, 0.8413 , 0.09985], dtype=float16)
    >>> rotary.inv_freq, rotary.attention_scaling
    (array([1. , 0.1], dtype=float32), 1.0)
    """

    def __init__(self, config: Any, *, layout: str | None = None, layer_type: str | None = None):
        if layout is None:  # as the model's own rotary gives them: Cohere's, GLM-4V's, GPT-J's pairs
            layout = rope.config_layout(config)
        check_layout(layout)
        self.layer_type = layer_type
        if isinstance(config, rope.RopeParameters) and layer_type is None:
            self.params = config
        else:
            self.params = rope.config(config, layer_type=layer_type)
        self.layout = layout
        self.attention_scaling = rope.attention_scaling(self.params)
        self.inv_freq = np.asarray(rope.inv_freq(self.params), dtype=np.float32)

    def __call__(
        self, x: jax.Array, position_ids: Any, *, seq_len: int | None = None
    ) -> tuple[jax.Array, jax.Array]:
        ids = position_ids
        if self.params.mrope_section and jnp.ndim(ids) == 2:  # text: one set of ids for the three axes
            if _traced(ids):
                ids = jnp.broadcast_to(ids, (3, *jnp.shape(ids)))
            else:  # concrete ids stay NumPy: JAX's conversion would round float64 and wrap int64
                ids = np.broadcast_to(_host_positions(ids), (3, *np.shape(ids)))
        return rotary.cos_sin(ids, self.params, dtype=_x_dtype(x), layout=self.layout, seq_len=seq_len)


def _host_offset(offset: Any) -> Any:
    """A concrete offset array (or list) as a NumPy array; anything else is left for
    :func:`posenc.adapters.int_offset` to check (its errors name the offset)."""
    if isinstance(offset, jax.Array | np.ndarray):
        return np.asarray(offset)
    if isinstance(offset, list | tuple):
        try:
            return np.asarray(offset)
        except ValueError:
            raise TypeError(
                f"offset must be an int or an integer array of shape () or x's batch shape; got {offset!r}"
            ) from None
    return offset


def _x_dtype(x: Any) -> np.dtype:
    """The dtype the encoding (or the rotary cos/sin) is computed in: the one ``x`` has in JAX. A NumPy
    float64 ``x`` with 64-bit JAX off (its default) is float32 wherever it meets a JAX array (``x + PE`` is
    float32): the values are rounded once, to float32 (they were rounded to float64, then to float32)."""
    if not isinstance(x, jax.Array | np.ndarray):
        raise PosencTypeError(
            f"x must be a jax.Array; got {type(x).__name__}; pass jnp.asarray(x)", parameter="x"
        )
    if np.dtype(x.dtype).name not in validation.DTYPES:
        raise PosencTypeError(
            f"x must be float64, float32, float16 or bfloat16; got x of dtype {x.dtype}; pass "
            "x.astype(jnp.float32)",
            parameter="x",
        )
    return np.dtype(jax.dtypes.canonicalize_dtype(x.dtype))


def _int_offset_in_range(offset: int | np.integer) -> None:
    """An int offset (Python or NumPy) is concrete, even under jit: one past 2**31 is refused at once, with
    x64 off and on, eager and traced (with x64 on it gave rows of NaN under jit; 2**63 gave a bare
    OverflowError eagerly, and under jit with x64 on)."""
    value = int(offset)
    if value >= validation.MAX_POSITION:
        raise PosencValueError(
            f"offset must be < 2**31 = {validation.MAX_POSITION}: positions + offset must satisfy "
            f"|p| < 2**31, the range over which posenc is proven exact; got offset={value}; lower the offset",
            parameter="offset",
        )


def _offset_int(offset: Any, seq: int) -> int:
    offset = validation.integer("offset", offset, minimum=0)
    if seq and offset + seq - 1 >= validation.MAX_POSITION:
        raise ValueError(
            f"the last position offset + seq - 1 = {offset + seq - 1} must be < 2**31 = "
            f"{validation.MAX_POSITION}; lower offset"
        )
    return offset
