"""The rotary cos/sin tables, exact: every value is A · cos(p θ_i) (resp. sin) correctly rounded once from
the exact real value, θ_i the type's frequency and A its attention scaling (:mod:`.frequencies`).

Rotary embeddings (Su et al. 2021, RoFormer) rotate each pair of query/key features by the angle p θ_i;
the layouts of the pairs and the multimodal sections are those of :mod:`.arrays`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import numpy.typing as npt

from .. import portable, validation
from ..core import explicit
from ..errors import PosencTypeError, PosencValueError
from .arrays import arrange, check_request
from .frequencies import exact_attention_scaling, exact_inv_freq
from .parameters import RopeParameters


def cos_sin(
    positions: npt.ArrayLike,
    params: RopeParameters,
    *,
    dtype: npt.DTypeLike = "float32",
    layout: str = "half",
    seq_len: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The rotary (cos, sin) of ``positions``, as NumPy arrays: each of shape
    ``positions.shape + (rotary_dim,)``.

    cos[..., j] = A · cos(p θ_i) and sin[..., j] = A · sin(p θ_i), with i = j mod rotary_dim/2 for
    ``layout="half"`` and i = j // 2 for ``"interleaved"``; each value the exact real correctly rounded to
    ``dtype`` (float32, float16, bfloat16; float64 within 1 ulp) for integer and real |p| < 2**31.

    ``positions``: a number, a (nested) list or a NumPy array. A torch tensor or a JAX array is a TypeError
    that gives the call returning that framework's arrays, with the same values (the adapters sit above
    this module, which never imports a framework): ``posenc.torch.rotary.cos_sin(positions, params)``
    (tensors on positions' device) and ``posenc.jax.rotary.cos_sin(positions, params)`` (also under jit).

    ``seq_len`` selects the frequencies of "dynamic" (NTK) and "longrope" scaling; it defaults to
    max(positions) + 1, as Hugging Face's rotary embeddings take it. With ``params.mrope_section``,
    ``positions`` has a leading axis of 3 (time, height, width ids) and the result drops it.

    >>> from posenc import rope
    >>> cos, sin = cos_sin([0, 1], rope.config(head_dim=4, base=100.0))
    >>> cos
    array([[1.       , 1.       , 1.       , 1.       ],
           [0.5403023, 0.9950042, 0.5403023, 0.9950042]], dtype=float32)
    """
    _refuse_framework_arrays(positions)
    dt = validation.dtype(dtype)
    raw = validation.position_array(positions)
    check_request(params, layout, raw.shape)
    sections = params.mrope_section
    law = exact_law(params, _effective_seq_len(params, raw, seq_len))
    fits_in_memory(raw.shape, params.rotary_dim, dt)
    sin, cos = explicit.sin_cos(raw, law, dt)
    rows = np.concatenate([sin, cos], -1)
    if not np.isfinite(rows).all():
        # the last guard (the parameters' bounds keep θ_i and A finite): never a table of inf or NaN
        raise PosencValueError(
            f"the rotary parameters (rope_type={params.rope_type!r}, rope_theta={params.base:g}) give a "
            f"non-finite cos/sin in {dt.name}; check the attention scaling and the scaling fields",
            parameter="params",
        )
    return arrange(_NUMPY, rows, sin.shape[-1], sections, params.mrope_interleaved, layout)


_NUMPY = portable.backend_named("numpy")

#: What to do about a cos/sin too large for memory.
ROPE_FEWER = "ask for fewer positions, or compute them in chunks of positions"
#: The arrays of the output's size :func:`cos_sin` holds at once (measured: 4.1, with its positions): the
#: sines and cosines of each frequency, the rows, then cos and sin laid out.
COPIES = 5


def fits_in_memory(shape: tuple[int, ...], rotary_dim: int, dt: np.dtype, advice: str = ROPE_FEWER) -> None:
    """Raise ValueError before :func:`cos_sin` of positions of ``shape`` holds more than memory can: the
    output's ``shape + (rotary_dim,)`` :data:`COPIES` times over, and the positions as int64."""
    count = math.prod(shape)
    validation.fits_in_memory((*shape, rotary_dim), dt, copies=COPIES, extra=8 * count, advice=advice)


def _refuse_framework_arrays(positions: Any) -> None:
    """A TypeError for a torch tensor or a JAX array (told by its type's module: nothing is imported), with
    the call of the framework's adapter that returns its arrays."""
    framework = type(positions).__module__.partition(".")[0]
    if framework == "torch":
        where = getattr(positions, "device", "its device")
        raise PosencTypeError(
            f"positions is a torch tensor (on {where}) and posenc.rope.cos_sin returns NumPy arrays; for "
            "tensors on positions' device, with the same values and keywords, use "
            "posenc.torch.rotary.cos_sin(positions, params) (import posenc.torch), or pass "
            "positions.cpu().numpy() for NumPy arrays",
            parameter="positions",
        )
    if framework in ("jax", "jaxlib"):
        raise PosencTypeError(
            "positions is a JAX array and posenc.rope.cos_sin returns NumPy arrays; for JAX arrays (also "
            "under jit), with the same values and keywords, use posenc.jax.rotary.cos_sin(positions, params) "
            "(import posenc.jax), or pass np.asarray(positions) for NumPy arrays",
            parameter="positions",
        )


def _effective_seq_len(params: RopeParameters, raw: np.ndarray, seq_len: int | None) -> int | None:
    """The sequence length that selects the frequencies: None for the types that do not depend on it (a
    ``seq_len`` given is checked for every type all the same)."""
    if seq_len is not None:
        seq_len = validation.integer("seq_len", seq_len, minimum=1)
    if not params.kind.depends_on_length:
        return None
    if seq_len is not None:
        return seq_len
    if raw.size == 0:
        return params.max_position_embeddings
    # max(positions) + 1, as Hugging Face takes it; at least 1 (all negative: no longer than one, the same
    # frequencies as any length up to the model's)
    return max(1, int(np.floor(np.max(validation.positions(raw)))) + 1)


@functools.lru_cache(maxsize=256)
def exact_law(params: RopeParameters, seq_len: int | None) -> explicit.ExactFrequencies:
    """The exact frequencies θ_i and amplitude A of ``params`` at ``seq_len``."""

    def frequencies(digits: int) -> Any:
        return exact_inv_freq(params, seq_len, digits)

    def amplitude(digits: int) -> Any:
        return exact_attention_scaling(params, seq_len, digits)

    unit = exact_attention_scaling(params, seq_len, 30) == 1
    return explicit.ExactFrequencies(("rope", params, seq_len), frequencies, None if unit else amplitude)
