"""The auditor's planted corpus: encodings written the way published code writes them, each with the causes
it truly has (its ground truth). ``tests/auditor/test_audit_corpus.py`` holds the auditor to every true cause
named and no false one; ``python -m tests.support.audit_corpus`` prints the table the audit guide
(docs/audit.md) shows.

Each :class:`Case` builds its target (a torch module, a function or a table), gives the audit's hints, and
names its causes as ``{kind: {key: value}}``: the finding of that kind must be there and its ``data`` must
hold those values; a kind not named must not be found. A cause hidden beneath another of the same or a
coarser precision is not planted (float16 frequencies under angles formed in float16, float32 angles under
bfloat16 frequencies, a float32 table's angle error under its bfloat16 storage): no check can see it, and
the fix of the cause that hides it removes it too. TF32 cannot run on a CPU, so its case rounds the matmul's
operands to TF32's 10-bit significand (round to nearest even), as the tensor cores read them.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

import posenc
import posenc.rope
import posenc.torch

from .tutorial import TutorialPositionalEncoding, tutorial_table

D = 64
#: Positions per band that the corpus audits at (enough for every cause it plants).
SAMPLES = 256


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    written: str
    build: Callable[[], Any]
    truth: dict[str, dict[str, Any]]
    hints: dict[str, Any] = dataclasses.field(default_factory=dict)


def _div_term(d_model: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.exp(torch.arange(0, d_model, 2, dtype=dtype) * (-math.log(10000.0) / d_model))


def _interleave(angles: torch.Tensor) -> torch.Tensor:
    pe = torch.zeros(angles.shape[0], 2 * angles.shape[1], dtype=angles.dtype)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angles), torch.cos(angles)
    return pe


class AnnotatedPositionalEncoding(nn.Module):
    """The Annotated Transformer's module: int positions times a float32 ``div_term``, a 5000-row buffer."""

    def __init__(self, d_model: int, dropout: float = 0.0, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[:, : x.size(1)].requires_grad_(False))


class LlamaStyleRotary(nn.Module):
    """Hugging Face Llama's rotary embedding as transformers ≥ 4.38 writes it: float32 ``inv_freq``, the
    angles as a float32 matmul, ``(cos, sin)`` cast to the input's dtype."""

    def __init__(self, dim: int, base: float = 10000.0):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def _neox_cache(dim: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-NeoX / Llama < 4.38: ``t = arange(max_len)``, ``einsum("i,j->ij", t, inv_freq)``, cached."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(max_len, dtype=inv_freq.dtype)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _indexed(cos: torch.Tensor, sin: torch.Tensor) -> Callable[[Any], tuple[torch.Tensor, torch.Tensor]]:
    def rotary(position_ids: Any) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.as_tensor(position_ids)
        return cos[ids].float(), sin[ids].float()

    return rotary


def _exact_rotary_cache(dim: int, max_len: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin computed in float64 (exact to float32), then kept in ``dtype``."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _tf32(x: torch.Tensor) -> torch.Tensor:
    """``x`` (float32) rounded to TF32's 10-bit significand, nearest even: what a TF32 matmul reads."""
    bits = x.view(torch.int32)
    rounding = 0xFFF + ((bits >> 13) & 1)
    return ((bits + rounding) & ~0x1FFF).view(torch.float32)


def tf32_angles(positions: Any) -> torch.Tensor:
    """``position @ div_term`` as a TF32 matmul (allow_tf32 on an Ampere+ GPU), sin/cos in float32."""
    p = torch.as_tensor(positions, dtype=torch.float32)[:, None]
    angles = _tf32(p) @ _tf32(_div_term(D))[None, :]  # products of 11-bit operands: exact in float32
    return _interleave(angles)


def float16_positions(positions: Any) -> torch.Tensor:
    """Positions kept in a float16 buffer (a model run under ``.half()``), the angles formed in float64."""
    p = torch.as_tensor(positions).to(torch.float16).double()[:, None]
    return _interleave(p * _div_term(D, torch.float64)).float()


def half_model(positions: Any) -> torch.Tensor:
    """Everything in float16: positions, ``div_term``, the angles and sin/cos (``model.half()``)."""
    p = torch.as_tensor(positions).to(torch.float16)[:, None]
    return _interleave(p * _div_term(D).half())


def bfloat16_positions(positions: Any) -> torch.Tensor:
    """Positions cast with ``model.to(torch.bfloat16)``, angles then formed in float32."""
    p = torch.as_tensor(positions).to(torch.bfloat16).float()[:, None]
    return _interleave(p * _div_term(D))


def float32_positions(positions: Any) -> torch.Tensor:
    """Positions as float32 (``torch.arange(n, dtype=torch.float)``), the angles then in float64."""
    p = torch.as_tensor(positions).float().double()[:, None]
    return _interleave(p * _div_term(D, torch.float64)).float()


def bfloat16_frequencies(positions: Any) -> torch.Tensor:
    """``div_term`` a persistent buffer cast by ``model.to(torch.bfloat16)``, used back in float32."""
    p = torch.as_tensor(positions, dtype=torch.float64)[:, None]
    return _interleave(p * _div_term(D, torch.float64).to(torch.bfloat16).double()).float()


def float64_then_cast(positions: Any) -> np.ndarray:
    """The formula in float64, rounded once to float32 (NumPy)."""
    p = np.asarray(positions, dtype=np.float64)[:, None]
    angles = p * np.exp(np.arange(0, D, 2) * (-math.log(10000.0) / D))
    pe = np.empty((len(p), D))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
    return pe.astype(np.float32)


def _exact(shift: float = 0.0, base: float = 10000.0, by: int = 0, scale: float = 1.0) -> Callable:
    def encoding(positions: Any) -> np.ndarray:
        return posenc.encode(np.asarray(positions) + by, D, shift=shift, base=base, scale=scale)

    return encoding


def _fairseq_positions_into_float32_rows(padding_idx: int = 1) -> Callable:
    """fairseq's ``make_positions`` (fairseq/utils.py: a token's position is its count of non-padding tokens
    plus ``padding_idx``, so the first is ``padding_idx + 1``) indexing rows of the PyTorch tutorial's
    float32 formula built from position 0: the row of position p is the row of p + padding_idx + 1."""

    def rows(positions: Any) -> torch.Tensor:
        p = torch.as_tensor(np.asarray(positions) + padding_idx + 1, dtype=torch.float32)[:, None]
        return _interleave(p * _div_term(D))

    return rows


def _scaled(factor: float) -> Callable:
    """Exact rows times one constant (float32): the amplitude folded into the encoding, as ESPnet's
    ``ScaledPositionalEncoding`` (espnet/nets/pytorch_backend/transformer/embedding.py: ``x + alpha * pe``,
    alpha a trained scalar) or a table divided by √d_model."""

    def rows(positions: Any) -> np.ndarray:
        return posenc.encode(np.asarray(positions), D) * np.float32(factor)

    return rows


def _cos_in_even_columns(positions: Any) -> torch.Tensor:
    """The tutorial's formula with sin and cos exchanged (`pe[:, 0::2] = torch.cos(...)`, a common slip)."""
    p = torch.as_tensor(np.asarray(positions), dtype=torch.float64)[:, None]
    angles = p * _div_term(D, torch.float64)
    pe = torch.zeros(angles.shape[0], D, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(angles), torch.sin(angles)
    return pe.float()


def _meta_freqs_cis(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Meta's Llama reference rotary (llama/model.py: ``precompute_freqs_cis``): float32 frequencies, float32
    positions, ``torch.outer`` then ``torch.polar``: cos + i·sin, one complex value per pair, applied to
    interleaved pairs; given here as (cos, sin) each repeated pair by pair."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, D, 2)[: D // 2].float() / D))
    t = torch.as_tensor(np.asarray(positions)).float()
    cis = torch.polar(torch.ones(len(t), D // 2), torch.outer(t, freqs).float())
    return cis.real.repeat_interleave(2, -1), cis.imag.repeat_interleave(2, -1)


def _noisy_until(at: int) -> Callable:
    def rows(positions: Any) -> np.ndarray:
        out = _noisy(positions)
        out[np.asarray(positions) >= at] = 0
        return out

    return rows


# --- the field's code, re-implemented from how each project writes it ------------------------------------


def fairseq_embedding(num_embeddings: int = 16384, padding_idx: int = 1) -> torch.Tensor:
    """fairseq's ``SinusoidalPositionalEmbedding.get_embedding`` (fairseq/modules/
    sinusoidal_positional_embedding.py): ω_i = exp(−i·ln(10000)/(half − 1)) in float32, the angle in float32,
    [sin | cos], the padding row zeroed; the table it builds for 16,384 positions."""
    half = D // 2
    step = math.log(10000) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.float) * -step)
    angles = torch.arange(num_embeddings, dtype=torch.float).unsqueeze(1) * frequencies.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    table[padding_idx, :] = 0
    return table


def whisper_sinusoids(length: int = 1500, max_timescale: float = 10000.0) -> torch.Tensor:
    """Whisper's ``sinusoids`` (openai/whisper, whisper/model.py): the increment ln(max_timescale)/(half − 1)
    in float64, ``torch.exp`` of it times an int64 arange (float32), int64 positions times it (float32);
    its encoder's 1500 rows."""
    increment = np.log(max_timescale) / (D // 2 - 1)
    inverse = torch.exp(-increment * torch.arange(D // 2))
    scaled = torch.arange(length)[:, np.newaxis] * inverse[np.newaxis, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


def diffusers_timesteps(positions: Any) -> torch.Tensor:
    """diffusers' ``get_timestep_embedding`` (diffusers/models/embeddings.py; its defaults:
    ``downscale_freq_shift=1``, ``flip_sin_to_cos=False``): the exponent and its exp in float32, the
    timesteps ``.float()`` times it, [sin | cos]."""
    t = torch.as_tensor(np.asarray(positions))
    half = D // 2
    exponent = -math.log(10000) * torch.arange(0, half, dtype=torch.float32) / (half - 1)
    angles = t[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)


def mae_grid(grid: int = 32) -> np.ndarray:
    """MAE's ``get_2d_sincos_pos_embed`` (facebookresearch/mae, util/pos_embed.py): NumPy float64 (its grid
    of float32 positions, exact), cast to float32 when loaded into the model's parameter."""

    def one_axis(width: int, positions: np.ndarray) -> np.ndarray:
        omega = 1.0 / 10000 ** (np.arange(width // 2, dtype=np.float64) / (width / 2.0))
        out = np.einsum("m,d->md", positions.reshape(-1), omega)
        return np.concatenate([np.sin(out), np.cos(out)], axis=1)

    axes = np.meshgrid(np.arange(grid, dtype=np.float32), np.arange(grid, dtype=np.float32))
    both = np.stack(axes, axis=0).reshape([2, 1, grid, grid])
    return np.concatenate([one_axis(D // 2, both[0]), one_axis(D // 2, both[1])], axis=1).astype(np.float32)


def gptj_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-J's ``fixed_pos_embedding`` (mesh-transformer-jax, as transformers ported it): ω = 1/10000^(i/d)
    by ``**`` in float32, ``einsum`` of float32 positions, applied by ``rotate_every_two`` (pairs side by
    side); (cos, sin) each repeated pair by pair."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2) / D))
    angles = torch.einsum("i , j -> i j", torch.as_tensor(np.asarray(positions)).float(), inv_freq).float()
    return torch.cos(angles).repeat_interleave(2, -1), torch.sin(angles).repeat_interleave(2, -1)


def torchtune_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """torchtune's ``RotaryPositionalEmbeddings.build_rope_cache`` (torchtune/modules/position_embeddings.py):
    θ in float32, positions in θ's dtype, ``einsum`` then the cache [cos, sin] of each pair (interleaved)."""
    theta = 1.0 / (10000 ** (torch.arange(0, D, 2)[: D // 2].float() / D))
    index = torch.einsum("i, j -> ij", torch.as_tensor(np.asarray(positions)).to(theta.dtype), theta).float()
    return torch.cos(index).repeat_interleave(2, -1), torch.sin(index).repeat_interleave(2, -1)


def float16_pow_frequencies(positions: Any) -> torch.Tensor:
    """ω = 1 / 10000 ** (2i/d) in float16 (``pow``, then the reciprocal, each rounded: not ω rounded once),
    the angles and sin/cos in float64, the table in float32."""
    exponent = torch.arange(0, D, 2).half() / D
    inv_freq = (1.0 / torch.tensor(10000.0).half() ** exponent).half()
    angles = torch.as_tensor(np.asarray(positions)).double()[:, None] * inv_freq.double()[None, :]
    pe = torch.zeros(angles.shape[0], D, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = angles.sin(), angles.cos()
    return pe.float()


class LinearScaledCache(nn.Module):
    """A Gemma-3-style linear-scaled rotary cache (transformers' linear scaling: ``inv_freq / factor``,
    factor 8) computed in float32 and kept in float16 buffers ``cos_cached``/``sin_cached``: its slowest
    frequencies' cos is 1 in float16 over the first positions, their sin is not."""

    def __init__(self, factor: float = 8.0, length: int = 4096):
        super().__init__()
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D)) / factor
        angles = torch.outer(torch.arange(length).float(), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos_cached", emb.cos().half())
        self.register_buffer("sin_cached", emb.sin().half())


def t2t_timing_signal(positions: Any) -> torch.Tensor:
    """tensor2tensor's ``get_timing_signal_1d`` (tensor2tensor/layers/common_attention.py), in torch: the
    increment ln(max/min)/(n − 1) in float64, ``exp`` of float32 multiples, float32 positions, [sin | cos]."""
    n = D // 2
    increment = math.log(1.0e4) / (n - 1)
    inverse = torch.exp(torch.arange(n, dtype=torch.float32) * -increment)
    scaled = torch.as_tensor(np.asarray(positions)).float()[:, None] * inverse[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


def positional_encodings_1d(positions: Any) -> torch.Tensor:
    """positional-encodings' ``PositionalEncoding1D`` (positional_encodings/torch_encodings.py): ω by ``**``
    in float32, positions in ω's dtype, ``einsum``, sin and cos interleaved (``get_emb``)."""
    inverse = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    angles = torch.einsum("i,j->ij", torch.as_tensor(np.asarray(positions)).type(inverse.dtype), inverse)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2, -1)


def speechbrain_table(max_len: int = 2500) -> torch.Tensor:
    """SpeechBrain's ``PositionalEncoding`` (speechbrain/nnet/attention.py): the tutorial's float32 formula
    over its 2500 rows."""
    positions = torch.arange(0, max_len).unsqueeze(1).float()
    denominator = torch.exp(torch.arange(0, D, 2).float() * -(math.log(10000.0) / D))
    table = torch.zeros(max_len, D)
    table[:, 0::2], table[:, 1::2] = torch.sin(positions * denominator), torch.cos(positions * denominator)
    return table


def espnet_extend_pe(positions: Any) -> torch.Tensor:
    """ESPnet's ``PositionalEncoding.extend_pe`` (espnet/nets/pytorch_backend/transformer/embedding.py):
    float32 positions of any length (the table grows), float32 ``div_term``, interleaved."""
    p = torch.as_tensor(np.asarray(positions), dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * -(math.log(10000.0) / D))
    table = torch.zeros(len(p), D)
    table[:, 0::2], table[:, 1::2] = torch.sin(p * div_term), torch.cos(p * div_term)
    return table


def esm_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """ESM's ``RotaryEmbedding`` (transformers' esm): float32 inv_freq, positions ``type_as`` it, ``outer``,
    halves."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    angles = torch.outer(torch.as_tensor(np.asarray(positions)).type_as(inv_freq), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos(), emb.sin()


def lucidrains_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """rotary-embedding-torch's ``RotaryEmbedding`` (lucidrains): float32 freqs, positions in their dtype,
    ``einsum``, each repeated pair by pair (``rotate_half`` of pairs)."""
    freqs = 1.0 / (10000 ** (torch.arange(0, D, 2)[: D // 2].float() / D))
    angles = torch.einsum("..., f -> ... f", torch.as_tensor(np.asarray(positions)).type(freqs.dtype), freqs)
    angles = angles.repeat_interleave(2, -1)
    return angles.cos(), angles.sin()


def mistral_freqs_cis(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """mistral-inference's ``precompute_freqs_cis`` (mistral_inference/rope.py): float32 freqs, int64
    positions promoted to float32 by ``torch.outer``, ``torch.polar``: pairs side by side."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, D, 2)[: D // 2].float() / D))
    angles = torch.outer(torch.as_tensor(np.asarray(positions)), freqs).float()
    cis = torch.polar(torch.ones_like(angles), angles)
    return cis.real.repeat_interleave(2, -1), cis.imag.repeat_interleave(2, -1)


def vllm_cos_sin_cache(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """vLLM's ``RotaryEmbedding._compute_cos_sin_cache`` (vllm/model_executor/layers/rotary_embedding):
    float32 inv_freq, float positions, ``einsum``; neox style (halves)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2, dtype=torch.float) / D))
    angles = torch.einsum("i,j -> ij", torch.as_tensor(np.asarray(positions), dtype=torch.float), inv_freq)
    return torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)


def _float64_angles(rows: int) -> np.ndarray:
    """pos / 10000^(2⌊j/2⌋/d) in float64, as transformers' DistilBERT and Marian write it (``np.power``)."""
    return np.array([[pos / np.power(10000, 2 * (j // 2) / D) for j in range(D)] for pos in range(rows)])


def distilbert_table(rows: int = 512) -> torch.Tensor:
    """transformers' DistilBERT ``create_sinusoidal_embeddings``: the angles in float64 (NumPy), sin/cos,
    then ``torch.FloatTensor``: each value rounded once; interleaved."""
    angles = _float64_angles(rows)
    out = torch.empty(rows, D)
    out[:, 0::2], out[:, 1::2] = (
        torch.FloatTensor(np.sin(angles[:, 0::2])),
        torch.FloatTensor(np.cos(angles[:, 1::2])),
    )
    return out


def marian_table(rows: int = 512) -> torch.Tensor:
    """transformers' Marian ``_init_weight``: the same float64 angles, [sin | cos] halves."""
    angles = _float64_angles(rows)
    out = torch.empty(rows, D)
    out[:, : D // 2], out[:, D // 2 :] = (
        torch.FloatTensor(np.sin(angles[:, 0::2])),
        torch.FloatTensor(np.cos(angles[:, 1::2])),
    )
    return out


def diffusers_1d_grid(rows: int = 1024) -> np.ndarray:
    """diffusers' ``get_1d_sincos_pos_embed_from_grid`` (NumPy float64), cast to float32: [sin | cos]."""
    omega = 1.0 / 10000 ** (np.arange(D // 2, dtype=np.float64) / (D / 2.0))
    out = np.einsum("m,d->md", np.arange(rows, dtype=np.float64), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1).astype(np.float32)


def _cut(how: str, at: int = 5000) -> Callable:
    table = posenc.table(at, D)

    def capped(positions: Any) -> np.ndarray:
        p = np.asarray(positions)
        if how == "raise":
            return table[p]
        if how == "clamp":
            return table[np.minimum(p, at - 1)]
        out = posenc.encode(p, D)
        out[p >= at] = 0 if how == "zero" else np.nan
        return out

    return capped


def _columns(order: str) -> np.ndarray:
    table = posenc.table(4096, D)
    if order == "swapped":  # cos in the sine's column of each pair
        return table[:, np.arange(D) ^ 1]
    return table[:, np.random.default_rng(3).permutation(D)]


def _noisy(positions: Any) -> np.ndarray:
    rows = posenc.encode(positions, D, dtype="float64")
    noise = np.random.default_rng(np.asarray(positions) % 1000).standard_normal(rows.shape)
    return (rows + 3e-5 * noise).astype(np.float32)


class LearnedPositions(nn.Module):
    """ViT's learned ``pos_embedding``, a parameter of the module itself (trained values: random here)."""

    def __init__(self, d_model: int = D, max_len: int = 1024):
        super().__init__()
        weights = torch.randn(1, max_len, d_model, generator=torch.Generator().manual_seed(0))
        self.pos_embedding = nn.Parameter(0.02 * weights)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pos_embedding[:, : x.size(1)]


def xpos_rotary(positions: Any, scale_base: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """torchscale's xPos in float64, rounded once: RoPE's cos and sin times ζ_i^(p / scale_base)."""
    p = torch.as_tensor(positions).to(torch.float64)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    zeta = (torch.arange(0, D, 2, dtype=torch.float64) + 0.4 * D) / (1.4 * D)
    decay = (zeta[None, :] ** (p[:, None] / scale_base)).repeat(1, 2)
    emb = torch.outer(p, inv_freq).repeat(1, 2)
    return (emb.cos() * decay).float(), (emb.sin() * decay).float()


def nerf_embedder(positions: Any) -> torch.Tensor:
    """NeRF's embedder of a float32 coordinate: sin/cos(2^k · x), k = 0 .. 9, band by band."""
    x = torch.as_tensor(positions).to(torch.float32)[:, None]
    bands = [f(x * 2.0**k) for k in range(10) for f in (torch.sin, torch.cos)]
    return torch.cat(bands, dim=-1)


def ntk_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """An NTK-aware base, 10000·8^(64/62) = 85550.37588568537, its cos/sin in float64 rounded once."""
    base = 10000.0 * 8.0 ** (D / (D - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    emb = torch.outer(torch.as_tensor(positions).to(torch.float64), inv_freq).repeat(1, 2)
    return emb.cos().float(), emb.sin().float()


def amplitude_rotary(positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A default rotary whose cos and sin are scaled by 1.2 (an mscale of its own), in float64."""
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    emb = torch.outer(torch.as_tensor(positions).to(torch.float64), inv_freq).repeat(1, 2)
    return (1.2 * emb.cos()).float(), (1.2 * emb.sin()).float()


def _cast_with_a_wrong_chunk(positions: Any) -> torch.Tensor:
    """:func:`bfloat16_frequencies`, its rows of 3072 .. 4095 built at the positions 1024 further on (a cache
    rebuilt in pieces, one piece at the next piece's start)."""
    p = np.asarray(positions, dtype=np.int64)
    return bfloat16_frequencies(np.where((p >= 3072) & (p < 4096), p + 1024, p))


def _chunked_cache(positions: Any) -> np.ndarray:
    """The tutorial's float32 formula, its rows built in chunks of 1024 by a loop whose one chunk (the rows
    of 3072 ..) took the next chunk's start: those rows hold positions 1024 further on (a cache rebuilt in
    pieces, as streaming decoders do)."""
    p = np.asarray(positions, dtype=np.int64)
    wrong = (p >= 3072) & (p < 3072 + 1024)
    omega = np.exp(np.arange(0, D, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / D))
    angle = np.where(wrong, p + 1024, p).astype(np.float32)[:, None] * omega
    pe = np.empty((len(p), D), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def _stored_chunks() -> torch.Tensor:
    """The tutorial's float32 table kept in bfloat16 (a buffer through `model.to(torch.bfloat16)`), its rows
    of 3072 .. 4095 built at the positions 1024 further on (a cache extended in pieces, one at the next
    piece's start)."""
    table = tutorial_table(5120, D)
    table[3072:4096] = table[4096:5120].clone()
    return table[:4096].to(torch.bfloat16).float()


CASES: tuple[Case, ...] = (
    Case("posenc table", "`posenc.table(4096, 64)`", lambda: posenc.table(4096, D), {}),
    Case(
        "posenc module",
        "`posenc.torch.SinusoidalPositionalEncoding(64)` (adds to zeros)",
        lambda: posenc.torch.SinusoidalPositionalEncoding(D),
        {},
    ),
    Case(
        "posenc rotary",
        "`posenc.rope.cos_sin(ids, posenc.rope.config(head_dim=64))`",
        lambda: lambda ids: posenc.rope.cos_sin(np.asarray(ids), posenc.rope.config(head_dim=D)),
        {},
    ),
    Case(  # its float64 angles err by ~2^-53·p·ω: near a zero of sin, many float32 ulps of a tiny value
        "float64, cast once",
        "NumPy float64 formula `.astype(np.float32)`",
        lambda: float64_then_cast,
        {"rounding": {}},
        {"positions": (0, 1 << 24)},
    ),
    Case(
        "PyTorch tutorial module",
        "`PositionalEncoding(d_model)`: float32 `position * div_term`, `max_len=5000`",
        lambda: TutorialPositionalEncoding(D),
        {"angles": {"grid": "float32"}, "cliff": {"position": 5000}},
    ),
    Case(
        "PyTorch tutorial formula",
        "the tutorial's table at any length (float32 angles)",
        lambda: lambda p: _interleave(torch.as_tensor(p, dtype=torch.float32)[:, None] * _div_term(D)),
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "Annotated Transformer",
        "int `arange` × float32 `div_term`, a 5000-row buffer",
        lambda: AnnotatedPositionalEncoding(D),
        {"angles": {"grid": "float32"}, "cliff": {"position": 5000}},
    ),
    Case(
        "HF Llama rotary, float32",
        "`inv_freq @ position_ids.float()` in float32",
        lambda: LlamaStyleRotary(D),
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "HF Llama rotary, bfloat16",
        "the same, cos/sin cast to bfloat16 (`x.dtype`)",
        lambda: LlamaStyleRotary(D),
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
        {"dtype": "bfloat16"},
    ),
    Case(
        "HF Llama rotary after `model.to(bfloat16)`",
        "the same module cast: its `inv_freq` buffer now bfloat16",
        lambda: LlamaStyleRotary(D).to(torch.bfloat16),
        {"frequencies": {"grid": "bfloat16"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "GPT-NeoX `cos_cached`",
        "`einsum('i,j->ij', t, inv_freq)` cached for 2048 positions, indexed by ids",
        lambda: _indexed(*_neox_cache(D, 2048)),
        {"angles": {"grid": "float32"}, "cliff": {"position": 2048}},
    ),
    Case(
        "rotary cache in bfloat16",
        "cos/sin computed in float64, kept in bfloat16 buffers, used as float32",
        lambda: _indexed(*_exact_rotary_cache(D, 8192, torch.bfloat16)),
        {"storage": {"grid": "bfloat16"}},
        {"positions": (0, 8192)},
    ),
    Case(
        "float16 positions",
        "positions in a float16 buffer (`model.half()`), angles in float64",
        lambda: float16_positions,
        {"positions": {"bits": 11}},
        {"positions": (0, 65505)},
    ),
    Case(
        "float16 model",
        "positions, `div_term`, angles and sin/cos all in float16",
        lambda: half_model,
        {"positions": {"bits": 11}, "angles": {"grid": "float16"}},
        {"positions": (0, 65505)},
    ),
    Case(
        "float16 positions past 65504",
        "the same positions at any length: inf from 65520",
        lambda: float16_positions,
        {"positions": {"grid": "float16"}, "cliff": {"position": 65520}},
        {"positions": (0, 1 << 20)},
    ),
    Case(
        "bfloat16 positions",
        "positions cast by `model.to(torch.bfloat16)`, angles in float32",
        lambda: bfloat16_positions,
        {"positions": {"grid": "bfloat16", "rounding": "nearest"}, "angles": {"grid": "float32"}},
    ),
    Case(
        "bfloat16 table",
        "the tutorial's table computed in bfloat16 (`arange(5000, dtype=torch.bfloat16)`)",
        lambda: _interleave(torch.arange(5000, dtype=torch.bfloat16)[:, None] * _div_term(D).bfloat16()),
        {"positions": {"grid": "bfloat16", "rounding": "mixed"}, "angles": {"grid": "bfloat16"}},
    ),
    Case(
        "TF32 angle matmul",
        "`position @ div_term` with `allow_tf32=True` (simulated: operands rounded to TF32)",
        lambda: tf32_angles,
        {"positions": {"grid": "tf32"}, "frequencies": {"grid": "tf32"}},
    ),
    Case(
        "float32 positions, float64 angles",
        "`torch.arange(n, dtype=torch.float)` then `.double() * div_term`",
        lambda: float32_positions,
        {"positions": {"grid": "float32"}},
    ),
    Case(
        "bfloat16 frequencies",
        "`div_term` a buffer cast by `model.to(torch.bfloat16)`, used in float32",
        lambda: bfloat16_frequencies,
        {"frequencies": {"grid": "bfloat16"}},
    ),
    Case(
        "table stored in bfloat16",
        "a float32 table `.to(torch.bfloat16)`, used as float32",
        lambda: tutorial_table(5000, D).to(torch.bfloat16).float(),
        {"storage": {"grid": "bfloat16"}},
        {"positions": (0, 5000)},
    ),
    Case(
        "table stored in float16",
        "an exact table kept in float16, used as float32",
        lambda: posenc.table(4096, D).astype(np.float16).astype(np.float32),
        {"storage": {"grid": "float16"}},
    ),
    Case(
        "sin and cos swapped",
        "`pe[:, 0::2] = cos`, `pe[:, 1::2] = sin`",
        lambda: _columns("swapped"),
        {"layout": {"swapped": True}},
    ),
    Case(
        "halves for interleaved",
        "declared the paper's (interleaved), rows `[sin | cos]` (tensor2tensor's halves)",
        lambda: posenc.table(4096, D, layout="sin_cos"),
        {"variant": {}},
        {"preset": "paper"},
    ),
    Case(
        "rotary interleaved for halves",
        "cos/sin in interleaved pairs where the config's model uses `rotate_half`",
        lambda: (
            lambda ids: posenc.rope.cos_sin(
                np.asarray(ids), posenc.rope.config(head_dim=D), layout="interleaved"
            )
        ),
        {"layout": {"layout": "interleaved"}},
        {"preset": {"head_dim": D}},
    ),
    Case(
        "columns permuted", "columns shuffled", lambda: _columns("permuted"), {"layout": {"swapped": False}}
    ),
    Case(
        "wrong shift",
        "declared the paper's, rows of shift=1",
        lambda: _exact(shift=1.0),
        {"variant": {}},
        {"preset": "paper"},
    ),
    Case(
        "wrong base",
        "declared base 10000, rows of base 500",
        lambda: _exact(base=500.0),
        {"variant": {}},
        {"preset": {"base": 10000.0}},
    ),
    Case(
        "wrong scale",
        "declared scale 1, rows of scale 2",
        lambda: _exact(scale=2.0),
        {"variant": {}},
        {"preset": "paper"},
    ),
    Case(
        "off by one",
        "rows of p + 1 given for p",
        lambda: _exact(by=1),
        {"offset": {"start": 1}},
        {"positions": (1, 1 << 20)},
    ),
    Case(  # an offset and an inexact formula at once: the offset must not hide the angles' error
        "fairseq positions, float32 rows",
        "fairseq's `make_positions` (from `padding_idx + 1`) into the tutorial's float32 formula's rows",
        _fairseq_positions_into_float32_rows,
        {"offset": {"start": 2}, "angles": {"grid": "float32"}},
        {"positions": (0, 1 << 20)},
    ),
    Case(
        "amplitude 1/√d",
        "exact rows times 1/√d_model (ESPnet's `alpha * pe` with a trained alpha alike)",
        lambda: _scaled(1 / math.sqrt(D)),
        {"amplitude": {}},
    ),
    Case(  # declared options must not hide a layout slip
        "sin and cos exchanged, declared",
        "`pe[:, 0::2] = torch.cos(...)`, `pe[:, 1::2] = torch.sin(...)` in float64, declared the paper's",
        lambda: _cos_in_even_columns,
        {"layout": {"swapped": True}},
        {"preset": "paper", "positions": (0, 1 << 24)},  # float64 angles err past 2^-22 only beyond
    ),
    Case(  # an interleaved rotary audited in its own layout, declared
        "Meta Llama freqs_cis, declared interleaved",
        "`torch.polar(1, torch.outer(t, freqs))` in float32 (Meta's `precompute_freqs_cis`)",
        lambda: _meta_freqs_cis,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
        {"preset": {"head_dim": D, "layout": "interleaved"}},
    ),
    Case(
        "cliff: raises",
        "a 5000-row table indexed past its end",
        lambda: _cut("raise"),
        {"cliff": {"position": 5000}},
    ),
    Case("cliff: zeros", "zero rows from 5000", lambda: _cut("zero"), {"cliff": {"position": 5000}}),
    Case("cliff: NaN", "NaN rows from 5000", lambda: _cut("nan"), {"cliff": {"position": 5000}}),
    Case("cliff: clamped", "indices clamped to 4999", lambda: _cut("clamp"), {"cliff": {"position": 5000}}),
    Case("noise", "exact values plus noise of 3e-5", lambda: _noisy, {"unexplained": {}}),
    Case(
        "fairseq get_embedding",
        "`torch.exp(arange * -ln(10000)/(half - 1))`, float32 angles, [sin | cos], padding row zeroed",
        fairseq_embedding,
        {"angles": {"grid": "float32"}},
    ),
    Case(
        "Whisper sinusoids",
        "`torch.exp(-increment * arange)` times int64 positions, float32; its encoder's 1500 rows",
        whisper_sinusoids,
        {"angles": {"grid": "float32"}},
    ),
    Case(
        "diffusers get_timestep_embedding",
        "float32 exponent and exp, `timesteps.float() * emb`, [sin | cos] (its defaults)",
        lambda: diffusers_timesteps,
        {"angles": {"grid": "float32"}},
        {"positions": (0, 1000)},
    ),
    Case("MAE 2-D grid", "NumPy float64 `get_2d_sincos_pos_embed`, loaded as float32", mae_grid, {}),
    Case(
        "GPT-J fixed_pos_embedding, declared interleaved",
        "`1 / 10000 ** (arange / d)` and `einsum` in float32, `rotate_every_two`",
        lambda: gptj_rotary,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
        {"preset": {"head_dim": D, "layout": "interleaved"}},
    ),
    Case(
        "torchtune rope cache",
        "θ and `einsum` in float32, cache of [cos, sin] pairs (identified: interleaved)",
        lambda: torchtune_rotary,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(  # shorter than the first band (0 .. 1023): measured up to its end, not a crash
        "PyTorch tutorial module, 512 rows",
        "`PositionalEncoding(d_model, max_len=512)`: a BERT-length table, float32 angles",
        lambda: TutorialPositionalEncoding(D, max_len=512),
        {"angles": {"grid": "float32"}, "cliff": {"position": 512}},
    ),
    Case(  # read from the rows' phase: the angles are not to blame, and a float64 angle would not fix it
        "float16 frequencies by pow",
        "`1 / 10000 ** (arange.half() / d)` in float16, angles in float64",
        lambda: float16_pow_frequencies,
        {"frequencies": {"grid": "float16"}},
    ),
    Case(  # fitted from both halves: from its cos alone, another rope type blamed on float16 angles
        "linear-scaled rope cache, float16",
        "`inv_freq / 8` in float32, cos/sin kept in float16 buffers (Gemma 3's global layers' scaling)",
        LinearScaledCache,
        {"rounding": {}},
    ),
    Case(
        "tensor2tensor get_timing_signal_1d",
        "`exp(arange * -increment)` and float32 positions, [sin | cos]",
        lambda: t2t_timing_signal,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "positional-encodings PositionalEncoding1D",
        "`1 / 10000 ** (arange / ch)`, positions in its dtype, `einsum`, interleaved",
        lambda: positional_encodings_1d,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "SpeechBrain PositionalEncoding",
        "the tutorial's float32 formula over its 2500 rows",
        speechbrain_table,
        {"angles": {"grid": "float32"}},
    ),
    Case(
        "ESPnet extend_pe",
        "float32 positions of any length, float32 `div_term`, interleaved",
        lambda: espnet_extend_pe,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "ESM rotary",
        "float32 inv_freq, positions `type_as` it, halves",
        lambda: esm_rotary,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "rotary-embedding-torch",
        "float32 freqs, `einsum`, pairs side by side (identified: interleaved)",
        lambda: lucidrains_rotary,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "mistral-inference freqs_cis",
        "int64 positions promoted to float32 by `torch.outer`, `torch.polar` (identified: interleaved)",
        lambda: mistral_freqs_cis,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "vLLM cos_sin_cache",
        "float32 inv_freq and positions, `einsum`, neox halves",
        lambda: vllm_cos_sin_cache,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}},
    ),
    Case(
        "RoBERTa-style positions, exact rows",
        "`create_position_ids_from_input_ids` (from `padding_idx + 1` = 2) into exact rows built from 0",
        lambda: _exact(by=2),
        {"offset": {"start": 2}},
        {"positions": (0, 1 << 20)},
    ),
    Case(
        "DistilBERT table", "float64 angles (`np.power`), sin/cos, `torch.FloatTensor`", distilbert_table, {}
    ),
    Case("Marian table", "the same float64 angles, [sin | cos] halves", marian_table, {}),
    Case(
        "diffusers 1-D grid", "NumPy float64 `get_1d_sincos_pos_embed_from_grid`, cast", diffusers_1d_grid, {}
    ),
    Case(  # nor a cast of the frequencies
        "bfloat16 frequencies and a chunk of wrong rows",
        "`div_term` cast to bfloat16, the cache built in chunks of 1024, one at the next chunk's positions",
        lambda: _cast_with_a_wrong_chunk,
        {"frequencies": {"grid": "bfloat16"}, "unexplained": {}},
    ),
    Case(  # a precision cause must not hide a larger error it does not explain
        "float32 angles and a chunk of wrong rows",
        "the tutorial's float32 formula built in chunks of 1024, one chunk at the next chunk's positions",
        lambda: _chunked_cache,
        {"angles": {"grid": "float32"}, "positions": {"grid": "float32"}, "unexplained": {}},
    ),
    Case(  # nor a coarse storage
        "bfloat16 storage and a chunk of wrong rows",
        "the tutorial's float32 table kept in bfloat16, one chunk of 1024 rows at the next chunk's positions",
        _stored_chunks,
        {"storage": {"grid": "bfloat16"}, "unexplained": {}},
    ),
    Case(  # one cause must not hide a larger error it does not explain
        "cliff and noise",
        "a 5000-row table of exact values plus noise of 3e-5, zero rows past it",
        lambda: _noisy_until(5000),
        {"cliff": {"position": 5000}, "unexplained": {}},
    ),
    Case(  # no sinusoid: its cliff is real, and it is no error of one
        "learned positions (ViT)",
        "`nn.Parameter(torch.randn(1, 1024, d) * 0.02)` added in forward (trained values: random here)",
        LearnedPositions,
        {"cliff": {"position": 1024}, "unexplained": {"identified": False}},
    ),
    Case(  # a decay ∝ p at first, as a bfloat16 angle's error grows: but sin² + cos² is not 1
        "xPos rotary",
        "RoPE's cos/sin times ζ_i^(p / 512) (torchscale's XPOS), in float64",
        lambda: xpos_rotary,
        {"unexplained": {"identified": False}},
        {"positions": (0, 1 << 20)},
    ),
    Case(
        "NeRF embedder",
        "`sin/cos(2^k · x)`, k = 0..9, of a float32 coordinate",
        lambda: nerf_embedder,
        {"positions": {"grid": "float32"}, "unexplained": {"identified": False}},
    ),
    Case(
        "amplitude 1.2 rotary",
        "RoPE's cos/sin times 1.2, in float64",
        lambda: amplitude_rotary,
        {"unexplained": {"identified": False}},
    ),
    Case(  # 256 rows tell the base to parts in 10⁶: read again far out, never an error ∝ position
        "NTK-aware rotary",
        "base `10000 * 8 ** (d / (d - 2))`, cos/sin in float64, rounded once",
        lambda: ntk_rotary,
        {"unpinned": {}},
    ),
    Case(  # a scale read from 256 rows: 6.2831853025, off by 1.9e-5 at 4095 until read again
        "posenc table, scale 2π",
        "`posenc.table(4096, 64, scale=2 * math.pi)`",
        lambda: posenc.table(4096, D, scale=2 * math.pi),
        {"unpinned": {}},
    ),
    Case(
        "posenc table, base √2·10⁴",
        "`posenc.table(4096, 64, base=2 ** 0.5 * 1e4)`",
        lambda: posenc.table(4096, D, base=2**0.5 * 1e4),
        {"unpinned": {}},
    ),
)


_RUNS: dict[tuple[str, int], tuple[Any, set[str], list[str]]] = {}


def run(case: Case, samples: int = SAMPLES) -> tuple[Any, set[str], list[str]]:
    """Audit ``case`` (once per process): (report, the kinds found, what disagrees with its truth: a
    missing cause, a false one, or wrong data)."""
    if (case.name, samples) in _RUNS:
        return _RUNS[case.name, samples]
    report = posenc.audit(case.build(), samples=samples, **case.hints)
    found = {f.kind: f for f in report.findings}
    wrong = [f"missing {kind}" for kind in case.truth if kind not in found]
    wrong += [f"false {kind}: {f.text}" for kind, f in found.items() if kind not in case.truth]
    for kind, data in case.truth.items():
        if kind in found:
            wrong += [
                f"{kind}: {key} is {found[kind].data.get(key)!r}, not {value!r}"
                for key, value in data.items()
                if found[kind].data.get(key) != value
            ]
    _RUNS[case.name, samples] = report, set(found), wrong
    return _RUNS[case.name, samples]


def _cause(kind: str, data: dict[str, Any]) -> str:
    if data.get("identified") is False:
        return "no known variant"
    if kind == "unpinned":  # exact rows of a variant read from them: judged to their last bits, never
        return "none (its base or scale read from the rows)"
    shown = ", ".join(
        f"{v} bits" if k == "bits" else str(v)
        for k, v in data.items()
        if k in ("grid", "bits", "position", "rounding", "start", "layout")
    )
    return f"{kind} ({shown})" if shown else kind


def table() -> str:
    """The corpus as a Markdown table: each encoding, how it is written, its planted causes, the findings
    the audit gives (their first clause), and whether they are exactly the planted ones."""
    lines = [
        "| encoding | written as | planted causes | the audit's findings | |",
        "|---|---|---|---|---|",
    ]
    for case in CASES:
        report, _, wrong = run(case)
        planted = "; ".join(_cause(k, d) for k, d in case.truth.items()) or "none"
        named = "; ".join(f.text.split(":")[0] for f in report.findings) or "none"
        lines.append(f"| {case.name} | {case.written} | {planted} | {named} | {'✗' if wrong else '✓'} |")
    return "\n".join(lines)


START, END = "<!-- audit-corpus:start -->", "<!-- audit-corpus:end -->"


#: The audit guide's sample report: the PyTorch tutorial's formula in NumPy float32, audited.
SAMPLE_START, SAMPLE_END = "<!-- audit-sample:start -->", "<!-- audit-sample:end -->"


def tutorial(positions: Any) -> np.ndarray:
    """The PyTorch tutorial's formula in NumPy float32 at d_model 512 (the audit guide's sample)."""
    omega = np.exp(np.arange(0, 512, 2, dtype=np.float32) * np.float32(-math.log(10000.0) / 512))
    angle = np.asarray(positions, dtype=np.float32)[:, None] * omega
    pe = np.empty((len(angle), 512), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return pe


def sample() -> str:
    """The audit guide's sample report, as the program writes it."""
    return posenc.audit(tutorial, samples=1024).as_text()


def write_doc(path: str = "docs/audit.md") -> None:
    """Replace the table between the audit guide's audit-corpus markers, and its sample report."""
    from pathlib import Path

    text = Path(path).read_text()
    head, rest = text.split(START)
    tail = rest.split(END)[1]
    text = f"{head}{START}\n{table()}\n{END}{tail}"
    head, rest = text.split(SAMPLE_START)
    tail = rest.split(SAMPLE_END)[1]
    Path(path).write_text(f"{head}{SAMPLE_START}\n```\n{sample()}\n```\n{SAMPLE_END}{tail}")


if __name__ == "__main__":
    for case in CASES:
        report, kinds, wrong = run(case)
        print(f"{case.name:44} {'ok ' if not wrong else 'BAD'} {sorted(kinds)} {wrong}", file=sys.stderr)
    if "--doc" in sys.argv:
        write_doc()
    else:
        print(table())
