"""Exact rotary position embeddings (RoPE, Su et al. 2021): the frequencies θ_i, the attention scaling and
the cos/sin tables of every RoPE type Hugging Face transformers configures, computed exactly and rounded
once.

* :func:`config` reads a model config (dict, config.json path, transformers config, or keywords) into a
  frozen :class:`RopeParameters` (:func:`layer_types` lists the layer types of a config nested per layer
  type, Gemma 3 style);
* :func:`inv_freq` gives the ``rotary_dim // 2`` frequencies θ_i (float64, correctly rounded);
* :func:`attention_scaling` gives the factor A that multiplies cos and sin;
* :func:`cos_sin` gives the tables: A · cos(p θ_i) and A · sin(p θ_i), each correctly rounded once;
* :func:`apply_rotary` rotates queries and keys by them (NumPy, torch and JAX arrays alike).

One concept per module: :mod:`~posenc.rope.kinds` (what each rope type is: its fields, checks, formulas
and dependence on the sequence length), :mod:`~posenc.rope.parameters` (the record and its checks),
:mod:`~posenc.rope.configs` (reading configs), :mod:`~posenc.rope.frequencies` (the formula of each type),
:mod:`~posenc.rope.arrays` (layouts, sections and the rotation, for every array namespace),
:mod:`~posenc.rope.tables` (cos/sin). The frameworks' modules are :class:`posenc.torch.RotaryEmbedding` and
:class:`posenc.jax.RotaryEmbedding`.
"""

from . import kinds
from .arrays import apply_rotary
from .configs import config, config_layout, layer_types
from .frequencies import attention_scaling, inv_freq
from .parameters import RopeParameters
from .tables import cos_sin

__all__ = [
    "RopeParameters",
    "apply_rotary",
    "attention_scaling",
    "config",
    "config_layout",
    "cos_sin",
    "inv_freq",
    "kinds",
    "layer_types",
]
