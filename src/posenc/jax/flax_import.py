"""Flax, imported where a Flax module of posenc is first built (``import posenc.jax`` does not need it)."""

from __future__ import annotations

from typing import Any


def flax_nnx(module: str) -> Any:
    """``flax.nnx``, or an ImportError naming the posenc module that needs it and the extra to install."""
    try:
        from flax import nnx
    except ImportError as error:
        raise ImportError(
            f"posenc.jax.{module} is a Flax (NNX) module and needs Flax: pip install 'posenc[flax]'"
        ) from error
    return nnx
