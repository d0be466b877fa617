"""The rotaries posenc reads by their form — a module's attributes and forward signature, not a config —
in the order they are tried, in one place: :func:`read` gives posenc's exact equivalent of a module, or
None. :func:`posenc.torch.patch` and :func:`posenc.audit` both dispatch on what it gives (each by the
class of the equivalent), so the two never read a module in different orders.

>>> from diffusers.models.transformers.transformer_flux import FluxPosEmbed
>>> read(FluxPosEmbed(10000, [16, 56, 56]))
AxesRope(theta=10000, axes_dim=(16, 56, 56))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from . import anyflow, computed, grid_rope, kandinsky, length_rope, ltx, period_time

__all__ = ["READERS", "handler", "read"]

#: The readers, in the order they are tried (a module one reads is left to the next only where it is None).
READERS: tuple[Callable[[nn.Module], nn.Module | None], ...] = (
    computed.rope_on_axes,
    ltx.read_ltx,
    ltx.read_ltx_vae,
    length_rope.read_length_rope,
    period_time.read_period_time,
    grid_rope.read_grid_rope,
    grid_rope.read_coords_rope,
    grid_rope.read_ids_rope,
    kandinsky.read_kandinsky,
    anyflow.read_anyflow,
)


def read(module: nn.Module) -> nn.Module | None:
    """posenc's exact equivalent of ``module`` by the first of :data:`READERS` that reads it, else None.
    Whether ``module`` computes what its form says is the proof's to tell (each reader's module)."""
    for reader in READERS:
        exact = reader(module)
        if exact is not None:
            return exact
    return None


def handler(exact: nn.Module, handlers: dict[type, Any]) -> Any:
    """The entry of ``handlers`` for the nearest class of ``exact`` (its own, else a base: a patched class
    is found as the class it patches)."""
    return next(handlers[cls] for cls in type(exact).__mro__ if cls in handlers)
