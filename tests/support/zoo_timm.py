"""The timm zoo: every model of the installed timm whose module has a sin-cos or rotary positional component,
found by enumeration, built with random weights and one block, and taken through the same steps and states as
the transformers zoo (:func:`tests.support.zoo.judge`).

``import timm`` imports torchvision (its norm layers, data transforms and datasets), and PyPI's torchvision
does not import beside the CPU torch wheel these machines use. :func:`imported` imports timm over a stand-in
``torchvision`` (a ``FrozenBatchNorm2d`` class, an ``InterpolationMode`` enum, and names that raise
ImportError when used) and removes the stand-in from ``sys.modules`` again: a model that needs torchvision to
be built is "not built", and nothing else in the process sees a torchvision.

:func:`architectures` enumerates: every model name ``timm.list_models()`` gives whose module's source names a
sin-cos grid or a rotary embedding (``sincos``, ``rotary``, ``rope``, ``rot_embed``). :func:`build` makes it
with ``depth=1`` where its builder takes it (its positional arguments as they are); its forward is compared
before and after on one image (:func:`probe`); their folders are not audited.

``python scripts/zoo.py --library timm`` runs it and writes ``docs/zoo-timm.md``.
"""

from __future__ import annotations

import enum
import inspect
import re
import sys
import types
import warnings
from typing import Any

import torch
from torch import nn

from tests.support import zoo

#: A positional component in a model module's source.
_POSITIONAL = re.compile(r"sincos|[Rr]otary|\brope\b|RoPE|rot_embed")


class _FrozenBatchNorm2d(nn.Module):
    """The stand-in's ``torchvision.ops.misc.FrozenBatchNorm2d`` (timm imports it at import time; no model
    of the zoo builds one)."""

    def __init__(self, num_features: int, eps: float = 1e-5) -> None:
        super().__init__()
        raise ImportError("torchvision is not installed here: FrozenBatchNorm2d is not available")


class _InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class _Missing:
    """Any other name of the stand-in: using it raises ImportError."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ImportError("torchvision is not installed here")


def _stand_in(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []

    def missing(attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Missing

    module.__getattr__ = missing  # type: ignore[method-assign]
    return module


def imported() -> types.ModuleType:
    """timm, imported over a stand-in torchvision that is gone from ``sys.modules`` after (module
    docstring)."""
    if "timm.models" in sys.modules:
        return sys.modules["timm"]
    names = [
        "torchvision",
        "torchvision.ops",
        "torchvision.ops.misc",
        "torchvision.transforms",
        "torchvision.transforms.functional",
        "torchvision.datasets",
        "torchvision.models",
        "torchvision.models.feature_extraction",
        "torchvision.utils",
    ]
    if any(name in sys.modules for name in names):  # a real torchvision: timm imports as it is
        import timm

        return timm
    stand_ins = {name: _stand_in(name) for name in names}
    stand_ins["torchvision.ops.misc"].FrozenBatchNorm2d = _FrozenBatchNorm2d
    for name in ("torchvision.transforms", "torchvision.transforms.functional"):
        stand_ins[name].InterpolationMode = _InterpolationMode
    stand_ins["torchvision"].transforms = stand_ins["torchvision.transforms"]
    for name in [n for n in sys.modules if n == "timm" or n.startswith("timm.")]:
        del sys.modules[name]  # a partial timm (tests/support/timm_sincos.py's) is imported whole
    sys.modules.update(stand_ins)
    try:
        import timm
        import timm.models
    finally:
        for name in names:
            sys.modules.pop(name, None)
    return timm


def architectures() -> list[str]:
    """Every timm model name with a positional component (module docstring)."""
    timm = imported()
    from timm.models import _registry

    found = []
    for name in timm.list_models():
        module = sys.modules.get(f"timm.models.{_registry._model_to_module.get(name)}")
        try:
            source = inspect.getsource(module) if module is not None else ""
        except (OSError, TypeError):
            continue
        if _POSITIONAL.search(source):
            found.append(name)
    return sorted(found)


def build(name: str) -> Any:
    """The model ``name`` with random weights and one block where its builder takes ``depth`` (eval
    mode, seeded; a builder that names key/value heads per block (Sapiens2's) gets one key/value head for
    its one block: timm drops a None argument, and one divides any head count)."""
    timm = imported()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return timm.create_model(name, pretrained=False, depth=1).eval()
        except AssertionError as error:  # kv heads per block, one per block of its own depth
            if "num_kv_heads" not in str(error):
                raise
            torch.manual_seed(0)
            return timm.create_model(name, pretrained=False, depth=1, num_kv_heads=1).eval()
        except TypeError as error:  # a builder without depth
            if "depth" not in str(error):
                raise
            torch.manual_seed(0)
            return timm.create_model(name, pretrained=False).eval()


def probe(model: Any) -> list[dict[str, Any]]:
    """An image for a timm model's forward: ``(1, 3, H, W)`` at its patch embedding's image size (else its
    pretrained configuration's input size), seeded."""
    size = getattr(getattr(model, "patch_embed", None), "img_size", None)
    if not (isinstance(size, tuple | list) and len(size) == 2):
        size = (getattr(model, "pretrained_cfg", None) or {}).get("input_size", (3, 224, 224))[1:]
    if not all(isinstance(s, int) and s > 0 for s in size):
        return []
    return [{"x": torch.randn(1, 3, *size, generator=torch.Generator().manual_seed(0))}]


def run(name: str) -> zoo.Outcome:
    """timm model ``name`` through audit → patch → audit → forward → unpatch
    (:func:`tests.support.zoo.judge`), its forward compared on an image (:func:`probe`)."""
    return zoo.judge(name, lambda: build(name), folder=False, probe=probe)
