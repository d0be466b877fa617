"""timm's own ``timm.layers.pos_embed_sincos`` module, imported without ``timm/__init__``.

``import timm`` imports torchvision (timm's norm layers and data transforms), and PyPI's torchvision does not
import beside the CPU torch wheel these machines use (``operator torchvision::nms does not exist``). The
sin-cos module needs only torch and three small timm modules (``_fx``, ``grid``, ``trace_utils``; ``_fx``
takes torchvision when it can and works without it). So the two packages above it are entered as empty
packages over timm's own folders, the module is imported from timm's unchanged source, and the empty
packages are removed again (a later ``import timm`` imports the real package, or fails as it would).
``make test`` installs timm with ``--no-deps``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path


def pos_embed_sincos() -> types.ModuleType:
    """timm's ``timm.layers.pos_embed_sincos`` (``build_sincos2d_pos_embed``, ...)."""
    if "timm.layers.pos_embed_sincos" in sys.modules:  # timm imported whole (the timm zoo's): its own
        return sys.modules["timm.layers.pos_embed_sincos"]
    spec = importlib.util.find_spec("timm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("timm is not installed: `make test` installs it (pip install --no-deps timm)")
    root = Path(spec.submodule_search_locations[0])
    before = set(sys.modules)
    for name, folder in (("timm", root), ("timm.layers", root / "layers")):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        sys.modules[name] = package
    try:
        return importlib.import_module("timm.layers.pos_embed_sincos")
    finally:
        for name in set(sys.modules) - before:
            if name.startswith("timm"):
                del sys.modules[name]
