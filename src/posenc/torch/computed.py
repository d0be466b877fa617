"""Sinusoids a module computes in its own forward (kind "computed" of :func:`posenc.torch.patching.find`):
which of them posenc reads, and what each computes.

posenc reads DETR's ``PositionEmbeddingSine`` (:class:`posenc.torch.DetrSinePositionEmbedding`) in the two
forms transformers writes it:

* ``forward(shape, device, dtype, mask=None)`` with ``num_position_features``, ``temperature``,
  ``normalize`` and ``scale`` (DETR, Conditional and Deformable DETR, Mask(2)Former, OneFormer, SAM 2/3,
  EdgeTAM);
* ``forward(pixel_values, pixel_mask)`` with ``embedding_dim``, ``temperature`` (or DAB-DETR's
  ``temperature_height`` and ``temperature_width``), ``scale`` and, where it has one, ``normalize`` (DAB-DETR,
  Table Transformer, Grounding DINO).

What the attributes do not say — whether positions are normalized where no attribute says so, and Deformable
DETR's offset of 0.5 — is told by the module's own values: each candidate's exact values are compared with
the module's output on probe masks (a full image and a padded one; and no mask, where its forward takes
none) and the first within the module's own float32 error (:func:`posenc.torch.proofs.check_cos_sin`: its
positions are formed as posenc forms them, its frequencies and angles are float32's) is the reading.
Anything else is not read, with the reason.

The other forms read, each proven on probes before anything is replaced: 1-D sinusoids in a forward
(:data:`SINUSOID_CONVENTIONS`) or a method (:data:`SINUSOID_METHODS`: shadowed on the instance by
:class:`ExactSinusoidMethod`); XLNet's relative encoding (:class:`ExactRelative`); RT-DETR's 2-D sine
(:class:`GridSine`; its first form, a static method of the encoder: :class:`ExactGridMethod`); rotaries on
several axes (:class:`AxesRope` and its forms :class:`AxesRopeMatrix`, :class:`FramesRope`,
:class:`LatentRope`); DINOv3's rotary of grid coordinates (:class:`DinoV3Rope`); V-JEPA 2's rotary inside
its attention (:class:`ExactAxesRotation`); Qwen-Image's complex tables (:func:`exact_polar_copy`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core, grids
from . import proofs
from .functions import _encode_tensor
from .modules import DetrSinePositionEmbedding
from .tensors import _dtype_name

__all__ = [
    "AxesRope",
    "ComputedSinusoid",
    "CropRope",
    "DetrSine",
    "GridSine",
    "LatentRope",
    "Refusal",
    "call_detr_sine",
    "call_grid_sine",
    "call_sinusoid",
    "forward_names",
    "grid_sine_options",
    "in_eval",
    "learned_angles",
    "probe_refusal",
    "probed",
    "prove_rope_on_axes",
    "read_detr_sine",
    "rope_on_axes",
    "rope_rows",
    "sinusoid_convention",
    "sinusoid_rows",
    "time_form",
    "untouched",
    "within_rounding",
]

#: The probe masks' shape: two images (the second padded), of sizes neither a power of two nor square.
PROBE_SHAPE = (2, 9, 13)
#: The forward signatures read: their parameter names, in order.
CONVENTIONS = {"shape": ("shape", "device", "dtype", "mask"), "pixels": ("pixel_values", "pixel_mask")}


@dataclasses.dataclass(frozen=True)
class DetrSine:
    """What a DETR ``PositionEmbeddingSine`` computes: its forward's ``convention`` ("shape" or "pixels":
    module docstring; "posenc": posenc's own module), the options of posenc's
    :class:`~posenc.torch.DetrSinePositionEmbedding` (``features``, ``temperature``, ``normalize``, ``scale``,
    ``offset``) and the proof: the largest ``difference`` from posenc's values and the largest ``allowed``
    there."""

    convention: str
    features: int
    temperature: float | tuple[float, float]
    normalize: bool
    scale: float | None
    offset: float
    difference: float = math.nan
    allowed: float = math.nan

    def options(self) -> dict[str, Any]:
        """The keywords of :func:`posenc.grids.detr_2d` (and of posenc's module) beyond the width."""
        return {
            "temperature": self.temperature,
            "normalize": self.normalize,
            "scale": self.scale if self.normalize else None,
            "offset": self.offset,
        }

    def describe(self) -> str:
        words = [f"F = {self.features}", f"temperature {self.temperature}"]
        if self.normalize:
            words.append(
                f"normalized to scale {self.scale:.7g}" + (f", offset {self.offset}" if self.offset else "")
            )
        return "DETR's 2-D sine (" + ", ".join(words) + ")"


def call_detr_sine(module: nn.Module, convention: str, mask: torch.Tensor | None) -> torch.Tensor:
    """``module``'s output ``(B, 2F, H, W)`` for ``mask`` ``(B, H, W)`` (None: its forward's own default, for
    the "shape" convention, of shape :data:`PROBE_SHAPE`), computed in float32."""
    with torch.no_grad():
        if convention == "posenc":
            return DetrSinePositionEmbedding.forward(module, _ones() if mask is None else mask)
        if convention == "shape":
            batch, height, width = PROBE_SHAPE if mask is None else mask.shape
            device = "cpu" if mask is None else mask.device
            return module(shape=(batch, 1, height, width), device=device, dtype=torch.float32, mask=mask)
        pixels = torch.zeros(mask.shape[0], 1, *mask.shape[1:], device=mask.device)
        return module(pixel_values=pixels, pixel_mask=mask)


def read_detr_sine(module: nn.Module) -> DetrSine | str:
    """What ``module`` computes, if it is a DETR ``PositionEmbeddingSine`` posenc reads (module docstring);
    else why not, as a sentence."""
    if isinstance(module, DetrSinePositionEmbedding):  # posenc's own (patched): what it was built with
        return DetrSine(
            "posenc",
            module.num_position_features,
            module.temperature,
            module.normalize,
            module.scale if module.normalize else None,
            module.offset,
            0.0,
            0.0,
        )
    convention = _convention(module)
    if convention is None:
        return "computes its sinusoids in its forward, in a form posenc does not read: not judged"
    features = _attribute(module, "num_position_features", "embedding_dim")
    if not (isinstance(features, int | float) and float(features).is_integer() and features >= 2):
        return f"a DETR-like sine whose width ({features!r}) posenc does not read: not judged"
    features = int(features)
    if hasattr(module, "temperature_height") and hasattr(module, "temperature_width"):
        temperature: Any = (module.temperature_height, module.temperature_width)
    else:
        temperature = getattr(module, "temperature", None)
    scale = getattr(module, "scale", None)
    normalize = getattr(module, "normalize", None)
    candidates = [
        (norm, offset)
        for norm in ((normalize,) if isinstance(normalize, bool) else (True, False))
        for offset in ((0.0, 0.5) if norm else (0.0,))
    ]
    nearest, failures = None, []
    for norm, offset in candidates:
        try:
            reading = DetrSine(
                convention, features, temperature, norm, float(scale) if norm else None, offset
            )
            grids.detr_options(features, **reading.options())
            found = _prove(module, reading)
        except Exception as error:  # options posenc refuses, or a forward that refuses the probe
            failures.append(f"{type(error).__name__}: {str(error)[:120]}")
            continue
        if isinstance(found, DetrSine):
            return found
        if nearest is None or found < nearest:
            nearest = found
    if nearest is None:
        return f"a DETR-like sine posenc could not compare: {failures[0] if failures else 'no candidate'}"
    return (
        f"its values are not DETR's 2-D sine of its attributes within float32 rounding (nearest: off by "
        f"{nearest:.3g}): not judged"
    )


def _convention(module: nn.Module) -> str | None:
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    return next((key for key, want in CONVENTIONS.items() if names == want), None)


def _attribute(module: nn.Module, *names: str) -> Any:
    return next((getattr(module, n) for n in names if hasattr(module, n)), None)


def _ones() -> torch.Tensor:
    return torch.ones(PROBE_SHAPE, dtype=torch.long)


def probe_masks() -> list[torch.Tensor]:
    """The probe masks: one batch of two images, the first full, the second padded below and to the
    right."""
    mask = _ones()
    mask[1, 6:, :] = 0
    mask[1, :, 10:] = 0
    return [mask]


def _prove(module: nn.Module, reading: DetrSine) -> DetrSine | float:
    """``reading`` with its proof, where ``module``'s values are its exact values within the module's own
    float32 error at every probe; else the largest difference found (inf: no value could be compared)."""
    worst, allowed = 0.0, 0.0
    calls: list[torch.Tensor | None] = [*probe_masks()]
    if reading.convention == "shape":
        calls.append(None)  # its own default: no mask
    for mask in calls:
        full = _ones() if mask is None else mask
        mine = call_detr_sine(module, reading.convention, mask)
        batch, height, width = full.shape
        if not isinstance(mine, torch.Tensor) or tuple(mine.shape) != (
            batch,
            2 * reading.features,
            height,
            width,
        ):
            shape = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
            raise ValueError(f"its output has shape {shape}, not (B, 2F, H, W)")
        values = mine.detach().to("cpu", torch.float64).permute(0, 2, 3, 1)
        array = full.numpy()
        ours = grids.detr_2d(array, reading.features, **reading.options(), dtype="float64")
        positions = grids.detr_positions(
            array, **{k: v for k, v in reading.options().items() if k != "temperature"}
        )
        temperatures = grids.detr_options(reading.features, **reading.options()).temperatures
        f = reading.features
        for k, (p, base) in enumerate(zip(positions, temperatures, strict=True)):
            checked = within_rounding(
                values[..., k * f : (k + 1) * f].reshape(-1, f),
                torch.from_numpy(ours[..., k * f : (k + 1) * f].reshape(-1, f)),
                p.reshape(-1),
                core.frequencies(f, base=base),
            )
            if isinstance(checked, float):
                return checked
            worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return dataclasses.replace(reading, difference=worst, allowed=allowed)


class Refusal(str):
    """Why a module's own code refused posenc's probe: "its forward refuses posenc's probe (its error)", a
    form of the same names posenc does not read."""


def probed(call: Callable[[], Any]) -> Any:
    """``call()`` — a module's own code on posenc's probe — without gradients, or the :class:`Refusal` any
    exception of it gives (its code's, not posenc's)."""
    try:
        with torch.no_grad():
            return call()
    except Exception as error:
        return Refusal(f"its forward refuses posenc's probe ({type(error).__name__}: {str(error)[:100]})")


@contextlib.contextmanager
def untouched(module: nn.Module) -> Iterator[nn.Module]:
    """``module`` for a probe of its own code, its plain attributes as they were after the block (a cache
    its forward fills, as CLVP's rotary does for each length: the probe's length must not stay in it)."""
    saved = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    try:
        yield module
    finally:
        for key in [k for k in vars(module) if not k.startswith("_") and k not in saved]:
            delattr(module, key)
        vars(module).update(saved)


@contextlib.contextmanager
def in_eval(module: Any) -> Iterator[Any]:
    """``module`` in eval mode for the block (its inference values), its own mode put back after (anything
    that is not a module: as it is)."""
    if not isinstance(module, nn.Module):
        yield module
        return
    mode = module.training
    try:
        yield module.eval()
    finally:
        module.train(mode)


def within_rounding(
    mine: torch.Tensor,
    ours: torch.Tensor,
    positions: np.ndarray,
    theta: np.ndarray,
    layout: str = "interleaved",
    code: torch.dtype = torch.float32,
) -> tuple[float, float] | float:
    """``mine`` against posenc's ``ours`` at ``positions`` (rows) and frequencies ``theta`` (columns in
    ``layout``), each value within what ``code`` — float32 code, or float64 code (frequencies and angles
    formed and stored in float64, as diffusers' complex128 tables) — errs there
    (:func:`posenc.torch.proofs.check_cos_sin`, its frequencies rounded to that type): (largest difference,
    largest allowance), else the difference found beyond its allowance (inf where none is provable)."""
    unit = torch.finfo(code).eps / 2
    bound = proofs.frequency_bound(theta, code, unit)
    check = proofs.check_cos_sin(mine, ours, positions, theta, bound, 1.0, layout, unit)
    if check.over is not None or not check.provable:
        return check.over[2] if check.over is not None else math.inf
    return check.difference, check.allowed


# --- 1-D sinusoids computed in forward -------------------------------------------------------------------

#: The 1-D forward signatures read, by their parameter names: a text model's table of its input's positions
#: (Pegasus-X: ``(inputs_embeds, past_key_values_length, position_ids)``, ``position_ids`` a column), a
#: timestep embedding (VibeVoice's diffusion head: ``(timesteps)``, a 1-D tensor of reals) and fixed rows
#: in the dtype of its input (Gemma 4's audio relative positions: ``(hidden_states)`` -> the rows of
#: positions n − 1 .. 0; ascending ones are read too) and a conformer's relative positions of its input's
#: length n (Parakeet's, Canary's: ``(hidden_states)`` ``(B, n, ·)`` -> ``(B, 2n − 1, width)`` of the
#: positions n − 1 down to −(n − 1), "relative": told from "rows" by its output's length; Nemotron's takes
#: ``cached_frames`` too, its rows then those of n + cached_frames), and one time whose sinusoid is a
#: flat vector (Voxtral Realtime's time embedding: ``(time_tensor)`` ``(1,)`` -> ``(width,)`` in its dtype,
#: "time": told by that output), and real coordinates of any shape (BROS's boxes' x or y: ``(pos_seq)``
#: ``(B, n, 4)`` -> ``(B, n, 4, width)``, "coordinates").
SINUSOID_CONVENTIONS = {
    "embeds": ("inputs_embeds", "past_key_values_length", "position_ids"),
    "timesteps": ("timesteps",),
    "rows": ("hidden_states",),
    "relative": ("hidden_states", "cached_frames"),
    "length": ("seq_length", "position"),
    "time": ("time_tensor",),
    "coordinates": ("pos_seq",),
}
#: The forward signatures of the "timesteps" form: ``(timesteps)``, ``(timestep)`` (Qwen-Image 2.1's, its
#: time scale the attribute ``time_factor``), ``(timesteps, scale)`` (LongCat-AudioDiT's: the default of
#: ``scale`` its time scale) and ``(hidden_states, scale)`` (Qwen2.5-Omni's token-to-wave DiT, its timesteps
#: named so): the timesteps a 1-D tensor of reals, each times its time scale a position.
TIMESTEP_SIGNATURES = (("timesteps",), ("timestep",), ("timesteps", "scale"), ("hidden_states", "scale"))
#: The positions a 1-D sinusoid is read at: 0 .. ROWS − 1 (times: 0 .. TIMESTEPS − 1, diffusers' range).
ROWS, TIMESTEPS = 1024, 1000
#: The forms whose positions are times, read at t = 0 .. TIMESTEPS − 1.
TIMED = ("timesteps", "time")
#: The core options, in :meth:`posenc.core.Options.check`'s order after the width.
CORE_OPTIONS = ("base", "shift", "scale", "layout", "odd")
#: The attributes a module of the "embeds" form may name its width by.
_WIDTHS = ("embed_dim", "embedding_dim", "d_model", "dim")


def sinusoid_convention(module: nn.Module) -> str | None:
    """The 1-D form of ``module``'s forward (:data:`SINUSOID_CONVENTIONS`), where it has one and (for
    "embeds") names its width by an attribute; else None."""
    if isinstance(module, ComputedSinusoid):  # posenc's own, patched in
        return module.convention
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    if names in TIMESTEP_SIGNATURES:
        return "timesteps"
    convention = next((key for key, want in SINUSOID_CONVENTIONS.items() if names == want), None)
    if convention == "embeds" and not isinstance(_attribute(module, *_WIDTHS), int):
        return None
    if names in (("hidden_states",), SINUSOID_CONVENTIONS["relative"]) and relative_form(module):
        return "relative"
    if convention == "time" and not time_form(module):
        return None
    return None if convention == "relative" else convention


def time_form(module: nn.Module) -> bool:
    """Whether ``module``'s forward of ``(time_tensor)`` gives one flat vector of an even width for one time
    ``(1,)`` (the "time" form: Voxtral Realtime's time embedding)."""
    try:
        with torch.no_grad(), untouched(module):
            out = module(torch.ones(1))
    except Exception:  # its own code refuses the probe: not this form
        return False
    return isinstance(out, torch.Tensor) and out.dim() == 1 and out.shape[0] >= 2 and out.shape[0] % 2 == 0


def time_scale(module: nn.Module) -> float:
    """What a timestep embedding (:data:`TIMESTEP_SIGNATURES`) multiplies its timesteps by before its
    sinusoid: the default of its forward's ``scale``, else its ``time_factor``, else 1 (posenc's own: its
    options')."""
    if isinstance(module, ComputedSinusoid):
        return float(module.options["scale"])
    try:
        scale = inspect.signature(module.forward).parameters["scale"].default
    except (TypeError, ValueError, KeyError):
        scale = getattr(module, "time_factor", 1.0)
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not math.isfinite(scale)
        or scale <= 0
    ):
        return 1.0
    return float(scale)


def relative_form(module: nn.Module) -> bool:
    """Whether ``module``'s forward of ``(hidden_states)`` gives 2n − 1 rows for an input of n (the
    "relative" form: inputs of 3 and 4 positions give 5 and 7 rows)."""
    try:
        with torch.no_grad(), untouched(module):
            shorter, longer = module(torch.zeros(1, 3, 1)), module(torch.zeros(1, 4, 1))
    except Exception:  # its own code refuses the probe: not this form
        return False
    tensors = isinstance(shorter, torch.Tensor) and isinstance(longer, torch.Tensor)
    return tensors and shorter.dim() == longer.dim() == 3 and (shorter.shape[1], longer.shape[1]) == (5, 7)


def relative_output(module: nn.Module, count: int = ROWS) -> torch.Tensor:
    """A "relative" module's rows ``(2·count − 1, width)`` of the positions count − 1 .. −(count − 1) (its
    output for an input of ``count`` positions, its batch of one dropped)."""
    with torch.no_grad():
        return module(torch.zeros(1, count, 1))[0]


def relative_batch_of_one(module: nn.Module) -> bool:
    """Whether a "relative" module gives a batch of one for an input of two (a slice of its cached table:
    wav2vec2-conformer's) rather than the input's batch (Parakeet's)."""
    with torch.no_grad():
        return module(torch.zeros(2, 3, 1)).shape[0] == 1


def call_sinusoid(module: nn.Module, convention: str, positions: torch.Tensor) -> torch.Tensor:
    """``module``'s values ``(k, width)`` at the 1-D ``positions`` (float32 for timesteps), for the
    "embeds" and "timesteps" forms (fixed rows: :func:`fixed_rows`)."""
    with torch.no_grad():
        if convention == "timesteps":
            return module(positions.to(torch.float32))
        if convention == "coordinates":  # (1, 1, k) coordinates -> (1, 1, k, width)
            return module(positions.to(torch.float32).reshape(1, 1, -1))[0, 0]
        if convention == "time":  # one time a call: (1,) -> (width,)
            times = positions.to(torch.float32).reshape(-1, 1)
            return torch.stack([module(t) for t in times]) if len(times) else torch.zeros(0, 0)
        if convention == "length":  # TimesFM's: (B, seq) float positions -> (B, seq, width)
            return module(position=positions.to(torch.float32)[None])[0]
        width = _attribute(module, *_WIDTHS)
        embeds = torch.zeros(1, positions.shape[0], width)
        rows = module(embeds, 0, positions.to(torch.long)[:, None])[0]
        if torch.equal(positions, torch.arange(len(positions))):  # its own positions 0 .. k − 1 agree?
            own = module(embeds, 0)[0]
            if own.shape == rows.shape and not torch.equal(own, rows):
                raise ValueError(  # the first 100 characters are what a refusal quotes
                    "position_ids (k, 1) give other rows than its own 0 .. k − 1 (ids of shape (batch, seq)?)"
                )
        return rows


def learned_angles(module: nn.Module, model: nn.Module | None = None) -> str | None:
    """Why ``module``'s angles are weights, where a child of it projects coordinates (an ``nn.Linear`` of at
    most 4 inputs: LightGlue's keypoints through ``Linear(2, 32)``, Fourier features with learned
    frequencies), it holds its frequencies as a trained parameter (timm's ``RotaryEmbeddingMixed``:
    ``freqs``, one set per block and head; Stable Audio's Fourier features: a vector ``weights`` its forward
    takes the sine of times) or its forward is handed them by ``model``'s trained parameter of
    the same name (Mochi's ``pos_frequencies``): the reason it is not judged; else None."""
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        names = ()
    held = dict(model.named_parameters()) if model is not None else {}
    for given in (n for n in names if "freq" in n.lower()):
        trained = next((k for k in held if k.rsplit(".", 1)[-1] == given), None)
        if trained is not None:
            return (
                f"its frequencies are handed to its forward ({given}) by the model's trained parameter "
                f"{trained} {tuple(held[trained].shape)}: weights, not a sinusoid posenc makes; not judged"
            )
    for name, weight in module.named_parameters(recurse=False):
        if "freq" in name.lower() and weight.is_floating_point():
            return (
                f"its frequencies are a trained parameter ({name}: {tuple(weight.shape)}), not a sinusoid "
                "posenc makes; not judged"
            )
    try:
        source = inspect.getsource(type(module).forward)
    except (OSError, TypeError):
        source = ""
    for name, weight in module.named_parameters(recurse=False):  # Stable Audio's Fourier features
        vector = weight.is_floating_point() and weight.dim() == 1 and weight.numel() > 1
        if vector and f"self.{name}" in source and re.search(r"\bsin\(|\.sin\(", source):
            return (
                f"its forward forms its angles with a trained parameter ({name}: {tuple(weight.shape)}): "
                "frequencies that are weights (learned Fourier features), not a sinusoid posenc makes; not "
                "judged"
            )
    for name, child in module.named_children():
        if isinstance(child, nn.Linear) and child.in_features <= 4:
            return (
                f"its angles are a learned projection of coordinates ({name}: Linear({child.in_features} → "
                f"{child.out_features})): frequencies that are weights, not a sinusoid posenc makes; not "
                "judged"
            )
    return None


def config_base(model: Any) -> float | None:
    """The base a model's own config names for its rotaries (its ``rope_theta``: a diffusers config's key,
    a transformers config's attribute), or None: a rotary written without a config of its own is built
    from it, and a buffer that several whole numbers fit (:func:`inv_freq_base`) is read as that one."""
    config = getattr(model, "config", None)
    value = config.get("rope_theta") if isinstance(config, dict) else getattr(config, "rope_theta", None)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if number and math.isfinite(value) and value > 1 else None


def inv_freq_base(inv_freq: Any, named: float | None = None) -> float | None:
    """The base of a rotary's ``inv_freq`` (n >= 2 float values base^(−i/n), i < n: a rotary of 2n channels)
    where the buffer names one: a whole number (fitted to every value's logarithm) whose values are each
    within 8 ulp of float32 of the buffer's, and no other whole number's are; else None.

    A float32 buffer fixes its base only to ~10⁻⁶ relative: 300.7 and 300.69995 give the same buffer, and
    their values part by more than float32 rounding at far positions. A rotary written without a config
    holds no other word of its base, so only a whole number, the one that fits, is read (every real
    model's base is one: 10⁴, 5·10⁵, 10⁶, ...); a base between whole numbers, or a buffer that two whole
    numbers fit (a base past ~10⁶ in a short buffer), is none posenc can name.

    >>> inv_freq_base(1.0 / 10000.0 ** (torch.arange(0, 64, 2) / 64))
    10000.0
    >>> inv_freq_base(1.0 / 300.7 ** (torch.arange(0, 16, 2) / 16)) is None  # not a whole number
    True

    ``named``: the base its model's config names (:func:`config_base`), taken where it fits the buffer —
    the config's word, which the buffer alone cannot give (5·10⁶ in 64 values: 5·10⁶ ± 1 fit too).

    >>> inv_freq_base(1.0 / 5e6 ** (torch.arange(0, 128, 2) / 128)) is None  # several whole numbers fit
    True
    >>> inv_freq_base(1.0 / 5e6 ** (torch.arange(0, 128, 2) / 128), named=5e6)
    5000000.0
    """
    rough = rough_inv_freq_base(inv_freq)
    if rough is None:
        return None
    held = inv_freq.detach().double().cpu().numpy()
    count = held.size

    def fits(candidate: float) -> bool:
        want = candidate ** (-np.arange(count) / count)
        return bool(np.all(np.abs(held - want) <= 8 * np.spacing(want.astype(np.float32)).astype(np.float64)))

    if named is not None and fits(named):
        return float(named)
    base = float(round(rough))
    if base < 2 or abs(rough - base) > 1e-4 * rough:
        return None
    return base if fits(base) and not fits(base - 1) and not fits(base + 1) else None


def rough_inv_freq_base(inv_freq: Any) -> float | None:
    """The base b that fits a rotary's ``inv_freq`` (1, b^(−1/n), ..., b^(−(n−1)/n)) best, by least squares
    on the logarithms, to the buffer's precision alone; None where it holds no such progression."""
    if not isinstance(inv_freq, torch.Tensor) or not inv_freq.is_floating_point() or inv_freq.dim() != 1:
        return None
    if inv_freq.numel() < 2 or inv_freq.device.type == "meta":
        return None
    held = inv_freq.detach().double().cpu().numpy()
    if not (held[0] == 1.0 and np.all((held[1:] > 0.0) & (held[1:] < 1.0))):
        return None
    steps = np.arange(1, held.size) / held.size  # log held_i = −steps_i · log base
    return float(np.exp(-np.sum(np.log(held[1:]) * steps) / np.sum(steps * steps)))


def forward_names(module: nn.Module) -> tuple[str, ...]:
    """The names of ``module``'s forward's parameters, in order (() where they cannot be read): the form a
    reader tells it by."""
    try:
        return tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return ()


def methods_source(cls: type) -> Iterator[tuple[str, str]]:
    """(name, source text) of each function ``cls`` defines itself (those whose source cannot be read left
    out); nothing runs."""
    for name, value in vars(cls).items():
        if inspect.isfunction(value):
            try:
                yield name, inspect.getsource(value)
            except (OSError, TypeError):
                continue


def with_layers(module: nn.Module) -> str | None:
    """Why a module one of whose methods takes sines and that also runs layers of its own on them (Krea 2's
    timestep embedding: the sinusoid, then ``linear_1``, ``linear_2``; Funnel's attention structure: its
    ``get_position_embeds`` through ``sin_dropout`` and ``cos_dropout``) is not judged: its sinusoid is no
    output posenc can read or swap apart from its layers; else None."""
    layers = [name for name, _ in module.named_children()]
    if not layers:
        return None
    for method, source in methods_source(type(module)):
        if re.search(r"\bsin\(|\.sin\(\)", source) and any(f"self.{name}" in source for name in layers):
            used = [name for name in layers if f"self.{name}" in source]
            named = ", ".join(used[:3]) + (", ..." if len(used) > 3 else "")
            return (
                f"its {method} computes a sinusoid and runs its own layers on it ({named}) in one call: the "
                "sinusoid is no output posenc can read or swap apart from them; not judged"
            )
    return None


def probe_refusal(module: nn.Module, convention: str) -> str | None:
    """None where ``module`` takes posenc's probe in its 1-D ``convention`` (four positions; its fixed
    rows), else what its forward raised: a form of the same signature posenc does not read (a rotary of
    ``(hidden_states)`` that wants a 4-D latent)."""
    if convention == "rows":
        read = probed(lambda: row_layout(module))
    elif convention == "relative":
        read = probed(lambda: relative_output(module, 4))
    else:
        read = probed(lambda: call_sinusoid(module, convention, torch.arange(4)))
    return read if isinstance(read, Refusal) else None


def row_layout(module: nn.Module) -> tuple[torch.Tensor, bool, bool]:
    """A module of the "rows" form: its rows in the order of their positions 0, 1, ... (its output for a
    float32 input, a leading axis of one dropped), whether it gives them from the last position down to 0
    (its first row is not position 0's: sin 0 = 0, cos 0 = 1) and whether it had that leading axis."""
    with torch.no_grad():
        rows = module(torch.zeros(1, 1, 1))
    leading = rows.dim() == 3 and rows.shape[0] == 1
    rows = rows[0] if leading else rows
    first = rows[0].abs()
    down = not bool(((first == 0) | (first == 1)).all())
    return (rows.flip(0) if down else rows), down, leading


def fixed_rows(module: nn.Module) -> torch.Tensor:
    """A "rows" module's rows, in the order of their positions 0, 1, ... (:func:`row_layout`)."""
    return row_layout(module)[0]


def sinusoid_rows(module: nn.Module, convention: str) -> np.ndarray:
    """``module``'s values at the positions it is read at (:data:`ROWS`, :data:`TIMESTEPS`; its fixed rows),
    as float64."""
    if convention == "rows":
        return fixed_rows(module).detach().to("cpu", torch.float64).numpy()
    if convention == "relative":  # positions 0 .. ROWS − 1: its rows from the middle up
        return relative_output(module)[:ROWS].flip(0).detach().to("cpu", torch.float64).numpy()
    count = TIMESTEPS if convention in TIMED else ROWS
    positions = torch.arange(count)
    if convention == "timesteps" and time_scale(module) != 1:  # read at positions 0, 1, ...: t = p / scale
        positions = positions.to(torch.float32) / time_scale(module)
    values = call_sinusoid(module, convention, positions)
    return values.detach().to("cpu", torch.float64).numpy()


class ComputedSinusoid(nn.Module):
    """posenc's exact encoding in place of a 1-D sinusoid computed in forward, called as the original is
    (``convention``, :data:`SINUSOID_CONVENTIONS`): ``(inputs_embeds, past_key_values_length=0,
    position_ids=None)`` -> ``(B, seq, width)`` in the embeddings' dtype (at the position ids, else past ..
    past + seq − 1), ``(timesteps)`` -> ``(N, width)`` float32 (of its positions t · scale, the scale of
    ``options``; ``names``: the original's forward names, of :data:`TIMESTEP_SIGNATURES`, a ``scale`` given
    in a call taking the place of the options'), ``(hidden_states)`` -> the ``rows`` rows of
    positions 0 .. rows − 1 (``descending``: rows − 1 .. 0; ``leading``: with a leading axis of one) in
    its dtype, or ("relative") ``(hidden_states)`` ``(B, n, ·)`` -> ``(B, 2n − 1, width)`` of the positions
    n − 1 .. −(n − 1) in its dtype (``leading``: ``(1, 2n − 1, width)`` whatever B, as a slice of a cached
    table gives them: wav2vec2-conformer's), or ("length", TimesFM's) ``(seq_length=None, position=None)``
    -> ``(1, seq_length, width)`` of the positions 0 .. seq_length − 1, or ``(B, seq, width)`` of
    ``position`` ``(B, seq)``, float32 (on the device it was moved to, where no position is given), or
    ("time", Voxtral Realtime's) ``(time_tensor)`` of one time, ``(1,)`` or ``()`` -> ``(width,)`` in its
    dtype, or ("coordinates", BROS's) ``(pos_seq)`` of reals of any shape -> ``pos_seq.shape + (width,)``,
    float32 (float64 for float64 coordinates). ``options``: the core options (an identified variant's).

    >>> options = {"base": 10000.0, "shift": 0.0, "scale": 1.0, "layout": "cos_sin", "odd": "zero"}
    >>> ComputedSinusoid(4, "timesteps", options)(torch.tensor([0.0, 1.0]))
    tensor([[1.0000, 1.0000, 0.0000, 0.0000],
            [0.5403, 0.9999, 0.8415, 0.0100]])
    """

    def __init__(
        self,
        width: int,
        convention: str,
        options: dict[str, Any],
        *,
        rows: int = 0,
        descending: bool = False,
        leading: bool = False,
        names: tuple[str, ...] = ("timesteps",),
    ) -> None:
        super().__init__()
        self.width, self.convention, self.options = width, convention, dict(options)
        self.names = tuple(names)  # the "timesteps" form's
        self.rows, self.descending, self.leading = rows, descending, leading  # the "rows" form's
        self._checked = core.Options.check(width, *(options[k] for k in CORE_OPTIONS))
        if convention == "length":  # where its positions 0 .. seq_length − 1 are made: the module's device
            self.register_buffer("anchor", torch.zeros(0), persistent=False)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        given = dict(zip(SINUSOID_CONVENTIONS[self.convention], args, strict=False)) | kwargs
        if self.convention == "rows":
            states = given["hidden_states"]
            positions = torch.arange(self.rows, device=states.device)
            positions = positions.flip(0) if self.descending else positions
            values = _encode_tensor(positions, (*self._checked, _dtype_name(states.dtype)))
            return values[None] if self.leading else values
        if self.convention == "relative":
            states = given["hidden_states"]
            length = states.shape[1] + int(given.get("cached_frames") or 0)
            positions = torch.arange(length - 1, -length, -1, device=states.device)
            values = _encode_tensor(positions, (*self._checked, _dtype_name(states.dtype)))
            return values[None] if self.leading else values[None].expand(states.shape[0], -1, -1)
        if self.convention == "timesteps":
            given = dict(zip(self.names, args, strict=False)) | kwargs
            checked = self._checked
            if given.get("scale") is not None and float(given["scale"]) != self.options["scale"]:
                options = dict(self.options, scale=float(given["scale"]))
                checked = core.Options.check(self.width, *(options[k] for k in CORE_OPTIONS))
            return _encode_tensor(given[self.names[0]].float(), (*checked, "float32"))
        if self.convention == "coordinates":
            coordinates = given["pos_seq"]
            name = "float64" if coordinates.dtype == torch.float64 else "float32"
            values = _encode_tensor(coordinates.reshape(-1), (*self._checked, name))
            return values.reshape(*coordinates.shape, self.width)
        if self.convention == "time":
            time = given["time_tensor"]
            if time.numel() != 1 or time.dim() > 1 or not time.is_floating_point():
                raise ValueError(
                    f"time_tensor must hold one real time, of shape (1,) or (); got {time.dtype} of shape "
                    f"{tuple(time.shape)}: call the time embedding once per time"
                )
            values = _encode_tensor(time.reshape(1), (*self._checked, _dtype_name(time.dtype)))
            return values.reshape(self.width)
        if self.convention == "length":
            positions = given.get("position")
            if positions is None:
                length = int(given["seq_length"])
                positions = torch.arange(length, dtype=torch.float32, device=self.anchor.device)[None]
            values = _encode_tensor(positions.reshape(-1).float(), (*self._checked, "float32"))
            return values.reshape(*positions.shape, self.width)
        embeds = given["inputs_embeds"]
        batch, length = embeds.shape[:2]
        ids = given.get("position_ids")
        if ids is None:
            start = int(given.get("past_key_values_length") or 0)
            ids = torch.arange(start, start + length, device=embeds.device)
        values = _encode_tensor(ids.reshape(-1), (*self._checked, _dtype_name(embeds.dtype)))
        return values[None].expand(batch, -1, -1)


# --- XLNet's relative encoding: a method of the model ------------------------------------------------------

#: XLNet's relative encoding is a method of the model, ``relative_positional_encoding(qlen, klen, bsz=None,
#: device=None)`` -> ``(klen + qlen, bsz or 1, d_model)`` float32 rows of the positions klen, klen − 1, ...,
#: −qlen + 1 (``attn_type`` "bi"; "uni": klen .. 0), each clamped to ±``clamp_len`` where it is > 0, as
#: [sin | cos] of ω_i = 10000^(−2i/d_model); with ``bi_data`` the rows of the negated positions follow along
#: the batch axis (bsz // 2 each).
RELATIVE_METHOD = "relative_positional_encoding"
_RELATIVE_ATTRIBUTES = ("d_model", "attn_type", "bi_data", "clamp_len")


def reads_relative(module: nn.Module) -> bool:
    """Whether ``module`` computes XLNet's relative encoding (:data:`RELATIVE_METHOD`) with the attributes
    it reads (``d_model``, ``attn_type`` "bi" or "uni", ``bi_data``, ``clamp_len``)."""
    method = getattr(type(module), RELATIVE_METHOD, None)
    if not callable(method) or not all(hasattr(module, name) for name in _RELATIVE_ATTRIBUTES):
        return False
    return isinstance(module.d_model, int) and module.attn_type in ("bi", "uni")


def relative_rows(module: nn.Module, count: int = ROWS) -> np.ndarray:
    """The rows of positions 0 .. ``count`` − 1 of ``module``'s relative encoding as its own method gives
    them (qlen 1, klen count − 1: positions count − 1 down to 0, reversed), as float64; up to its
    ``clamp_len`` where it clamps (the rows past it repeat that one)."""
    if module.clamp_len > 0:
        count = min(count, module.clamp_len + 1)
    with torch.no_grad():
        rows = getattr(type(module), RELATIVE_METHOD)(module, 1, count - 1)
    return rows[:, 0].flip(0).detach().to("cpu", torch.float64).numpy()


class ExactRelative:
    """posenc's exact rows in place of XLNet's ``relative_positional_encoding`` method of ``module`` (set on
    the instance by :func:`posenc.torch.patch`): the same positions, clamping, ``bi_data`` halves and shape
    (:data:`RELATIVE_METHOD`), each value correctly rounded to float32 once (``options``: the core options of
    the rows identified). The module's ``attn_type``, ``bi_data`` and ``clamp_len`` are read at each call."""

    def __init__(self, module: nn.Module, options: dict[str, Any]) -> None:
        # held (a cycle through the module's __dict__): a deep copy or a pickle of the model takes both
        self.module = module
        self.options = dict(options)
        self._checked = core.Options.check(module.d_model, *(options[k] for k in CORE_OPTIONS))

    def __call__(
        self, qlen: int, klen: int, bsz: int | None = None, device: torch.device | None = None
    ) -> torch.Tensor:
        module = self.module
        end = -qlen if module.attn_type == "bi" else -1
        forward = torch.arange(klen, end, -1, dtype=torch.int64, device=device)
        halves = [forward, -forward] if module.bi_data else [forward]
        rows = []
        for positions in halves:
            if module.clamp_len > 0:
                positions = positions.clamp(-module.clamp_len, module.clamp_len)
            values = _encode_tensor(positions, (*self._checked, "float32"))[:, None, :]
            share = bsz // 2 if module.bi_data and bsz is not None else bsz
            rows.append(values if share is None else values.expand(-1, share, -1))
        return rows[0] if len(rows) == 1 else torch.cat(rows, dim=1)


# --- RT-DETR's 2-D sine of a patch grid -------------------------------------------------------------------

#: RT-DETR's form (and D-FINE's, DEIMv2's, PP-DocLayout's): ``forward(width, height, device, dtype)`` ->
#: ``(1, H·W, embed_dim)``, rows h-major, columns [sin h | cos h | sin w | cos w] with ω_i =
#: temperature^(−i/(embed_dim/4)): :func:`posenc.grids.timm_2d` with ``interleave_sin_cos``.
GRID_CONVENTION = ("width", "height", "device", "dtype")
#: The grid it is read on: (height, width).
GRID_SHAPE = (9, 13)


def grid_sine_options(module: nn.Module) -> tuple[int, float] | None:
    """(embed_dim, temperature) of a module of RT-DETR's form, or None."""
    if isinstance(module, GridSine):  # posenc's own, patched in
        return module.embed_dim, module.temperature
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    dim, temperature = getattr(module, "embed_dim", None), getattr(module, "temperature", None)
    if (
        names != GRID_CONVENTION
        or not isinstance(dim, int)
        or dim % 4
        or not isinstance(temperature, int | float)
    ):
        return None
    return dim, float(temperature)


def prove_grid_sine(module: nn.Module) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of a module of RT-DETR's form against posenc's values on a
    :data:`GRID_SHAPE` grid, each value within what float32 code errs at its position and frequency
    (:func:`posenc.torch.proofs.check_cos_sin`); else why not."""
    dim, temperature = grid_sine_options(module)
    height, width = GRID_SHAPE
    try:
        mine = call_grid_sine(module, height, width)
    except Exception as error:  # its forward refuses the probe grid
        return f"could not be read: {type(error).__name__}: {str(error)[:120]}"
    if tuple(mine.shape) != (height * width, dim):
        return f"its output has shape {tuple(mine.shape)}, not (H·W, embed_dim)"
    ours = GridSine(dim, temperature)(width, height, "cpu", torch.float64)[0]
    refusal = "not RT-DETR's 2-D sine of its attributes within float32 rounding"
    return _grid_within_rounding(mine, ours, temperature, width, refusal)


def _grid_within_rounding(
    mine: torch.Tensor, ours: torch.Tensor, temperature: float, minor: int, refusal: str
) -> tuple[float, float] | str:
    """A 2-D sine's rows ``mine`` against posenc's ``ours`` (float64), its first half of columns of each
    row's major index (row // ``minor``), the second of its minor one, each value within what float32 code
    errs there: (largest difference, largest allowance), else ``refusal`` with the difference found."""
    dim = ours.shape[-1]
    theta = core.frequencies(dim // 2, base=temperature)
    rows = torch.arange(len(ours))
    worst, allowed = 0.0, 0.0
    for k, p in enumerate((rows // minor, rows % minor)):
        block = slice(k * dim // 2, (k + 1) * dim // 2)
        checked = within_rounding(mine[:, block], ours[:, block], p.numpy(), theta, "half")
        if isinstance(checked, float):
            return f"{refusal} ({checked:.3g})"
        worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def call_grid_sine(module: nn.Module, height: int, width: int) -> torch.Tensor:
    """``module``'s rows ``(H·W, embed_dim)`` for a grid of ``height`` × ``width``, in float32."""
    with torch.no_grad():
        return module(width, height, torch.device("cpu"), torch.float32)[0]


class GridSine(nn.Module):
    """posenc's exact values in place of RT-DETR's 2-D sine, called as it is: ``(width, height, device,
    dtype)`` -> ``(1, H·W, embed_dim)``, columns [sin h | cos h | sin w | cos w], ω_i =
    temperature^(−i/(embed_dim/4)), rows h-major; each value the exact one rounded once to ``dtype``
    (:func:`posenc.grids.timm_2d` with ``interleave_sin_cos=True``), computed where ``device`` says.

    >>> GridSine(8)(2, 1, "cpu", torch.float32)[0, 1]  # (h, w) = (0, 1)
    tensor([0.0000, 0.0000, 1.0000, 1.0000, 0.8415, 0.0100, 0.5403, 0.9999])
    """

    def __init__(self, embed_dim: int, temperature: float = 10000.0) -> None:
        super().__init__()
        self.embed_dim, self.temperature = embed_dim, temperature
        self._checked = core.Options.check(embed_dim // 2, temperature, 0.0, 1.0, "sin_cos", "zero")

    def forward(
        self, width: int, height: int, device: torch.device | str, dtype: torch.dtype
    ) -> torch.Tensor:
        name = _dtype_name(dtype)
        h = _encode_tensor(torch.arange(int(height), device=device), (*self._checked, name))
        w = _encode_tensor(torch.arange(int(width), device=device), (*self._checked, name))
        rows = torch.cat(
            [h[:, None, :].expand(-1, int(width), -1), w[None, :, :].expand(int(height), -1, -1)], dim=-1
        )
        return rows.reshape(1, int(height) * int(width), self.embed_dim)


#: RT-DETR's first 2-D sine, a static method of its encoder (OmDet-Turbo's hybrid encoder keeps it):
#: ``build_2d_sincos_position_embedding(width, height, embed_dim, temperature, device, dtype)`` ->
#: ``(1, W·H, embed_dim)``, rows of ``meshgrid(arange(W), arange(H), indexing="ij")`` flattened (the width
#: index major), columns [sin w | cos w | sin h | cos h], ω_i = temperature^(−i/(embed_dim/4)).
GRID_METHOD = "build_2d_sincos_position_embedding"
_GRID_METHOD_PARAMETERS = ("width", "height", "embed_dim", "temperature", "device", "dtype")
#: The module attributes its forward passes as ``embed_dim`` and ``temperature``.
_GRID_METHOD_ATTRIBUTES = ("encoder_hidden_dim", "positional_encoding_temperature")


def grid_method_options(module: nn.Module) -> tuple[int, float] | None:
    """(embed_dim, temperature) its forward passes to a method of :data:`GRID_METHOD`'s form (its class's,
    with those parameters; the instance's own where posenc shadows it), or None."""
    function = inspect.getattr_static(type(module), GRID_METHOD, None)
    if not isinstance(function, staticmethod):
        return None
    try:
        names = tuple(inspect.signature(function.__func__).parameters)
    except (TypeError, ValueError):
        return None
    dim, temperature = (getattr(module, name, None) for name in _GRID_METHOD_ATTRIBUTES)
    if names != _GRID_METHOD_PARAMETERS or not isinstance(dim, int) or dim % 4 or dim <= 0:
        return None
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not temperature > 0:
        return None
    return dim, float(temperature)


def grid_method_rows(module: nn.Module, height: int, width: int) -> torch.Tensor:
    """``module``'s :data:`GRID_METHOD` (the instance's where posenc shadows it) for a ``height`` ×
    ``width`` grid at its own embed_dim and temperature: ``(W·H, embed_dim)`` float32, width-major rows."""
    dim, temperature = grid_method_options(module)
    with torch.no_grad():
        rows = getattr(module, GRID_METHOD)(
            width, height, dim, temperature, device="cpu", dtype=torch.float32
        )
    return rows.reshape(width * height, -1)


def prove_grid_method(module: nn.Module) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module``'s :data:`GRID_METHOD` against posenc's
    values on a :data:`GRID_SHAPE` grid, each within what float32 code errs at its position and frequency;
    else why not."""
    dim, temperature = grid_method_options(module)
    height, width = GRID_SHAPE
    try:
        mine = grid_method_rows(module, height, width)
    except Exception as error:  # its method refuses the probe grid
        return f"its {GRID_METHOD} could not be read: {type(error).__name__}: {str(error)[:120]}"
    if tuple(mine.shape) != (width * height, dim):
        return f"its {GRID_METHOD} gives shape {tuple(mine.shape)}, not (W·H, embed_dim)"
    ours = ExactGridMethod()(width, height, dim, temperature, "cpu", torch.float64)[0]
    refusal = f"its {GRID_METHOD} is not RT-DETR's 2-D sine within float32 rounding"
    return _grid_within_rounding(mine, ours, temperature, height, refusal)  # rows: the width index major


class ExactGridMethod:
    """posenc's exact values in place of a :data:`GRID_METHOD` (set on the instance by
    :func:`posenc.torch.patch`), called as it is: ``(width, height, embed_dim, temperature, device,
    dtype)`` -> ``(1, W·H, embed_dim)``, its rows and columns, each value the exact one rounded once to
    ``dtype`` — :class:`GridSine`'s values with the width index major.

    >>> ExactGridMethod()(2, 1, 8, 10000.0, "cpu", torch.float32)[0, 1]  # (w, h) = (1, 0)
    tensor([0.8415, 0.0100, 0.5403, 0.9999, 0.0000, 0.0000, 1.0000, 1.0000])
    """

    def __call__(
        self,
        width: int,
        height: int,
        embed_dim: int = 256,
        temperature: float = 10000.0,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        # GridSine's rows are its height index major: the width index here, its width the height
        return GridSine(int(embed_dim), float(temperature))(int(height), int(width), device, dtype)


# --- rotaries of positions on several axes (Flux's EmbedND, HunyuanVideo's latent grid) ---------------

#: Flux's form: ``forward(ids)``, position ids ``(S, n_axes)``, one column per axis (diffusers'
#: ``FluxPosEmbed`` and its copies in Flux 2, Chroma, Krea 2, LongCat-Image and Ovis-Image).
AXES_CONVENTION = ("ids",)
#: A latent's grid: ``forward(hidden_states)`` of a ``(B, C, *axes)`` latent, the positions of its patches
#: (HunyuanVideo, HunyuanVideo 1.5, HunyuanImage, Motif-Video: ``rope_dim``, ``theta``, ``patch_size``;
#: Wan and its kin, SkyReels-V2, Sana-Video: ``t_dim``, ``h_dim``, ``w_dim``, a ``patch_size`` per axis and
#: the ``theta`` of its ``__init__``, which it keeps only in its tables; its (cos, sin) ``(1, S, 1, D)``).
LATENT_CONVENTION = ("hidden_states",)
#: HunyuanVideo Framepack's: ``forward(frame_indices, height, width, device)``, the frames' indices and the
#: grid of ``height // patch_size`` × ``width // patch_size`` patches (``rope_dim``, ``theta``).
FRAMES_CONVENTION = ("frame_indices", "height", "width", "device")
#: Wan's widths: one attribute per axis.
_WAN_WIDTHS = ("t_dim", "h_dim", "w_dim")
#: Sana-WM's: ``forward(fhw, device)``, the grid's (frames, height, width) in patches -> its complex rotary
#: ``(1, 1, S, head / 2)`` (Wan's widths of ``attention_head_dim``, the ``theta`` of its ``__init__``).
COMPLEX_CONVENTION = ("fhw", "device")
#: Helios' (the form of :data:`FRAMES_CONVENTION` with batched frame indices and a grid in patches).
_HELIOS_WIDTHS = ("DT", "DY", "DX")
#: EasyAnimate's base grid in pixels (rows, columns): a latent's grid is resized and centred on it.
CROP_BASE = (60, 90)
#: The probe grid: its sizes on the last axes (in patches), every other axis at an offset.
_PROBE_GRID = (2, 3, 5)


def _even_widths(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, tuple | list) or not value:
        return None
    if not all(isinstance(a, int) and not isinstance(a, bool) and a > 0 and a % 2 == 0 for a in value):
        return None
    return tuple(value)


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def rope_on_axes(module: nn.Module) -> AxesRope | None:
    """posenc's exact equivalent of ``module`` where it is a rotary of positions on axes of a form posenc
    reads (:data:`AXES_CONVENTION`: ``theta`` and ``axes_dim``; :data:`LATENT_CONVENTION`: ``theta``,
    ``rope_dim``, ``patch_size`` (an int or one per axis) and, for three axes and an int ``patch_size``,
    ``patch_size_t``), built from its attributes; else None. Whether it computes what they say is
    :func:`prove_rope_on_axes`'s to tell."""
    if isinstance(module, AxesRope):  # posenc's own, patched in
        return module
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    theta = _number(getattr(module, "theta", None))
    if names == LATENT_CONVENTION and theta is None and hasattr(module, "freqs_cos"):
        return _wan_rope(module)
    if names == COMPLEX_CONVENTION and theta is None:
        return _complex_rope(module)
    if names == LATENT_CONVENTION and theta is None and hasattr(module, "get_resize_crop_region_for_grid"):
        return _crop_rope(module)
    if theta is None or theta <= 0:
        return None
    if names == COMPLEX_CONVENTION:
        return _complex_rope(module)
    if names == FRAMES_CONVENTION and all(hasattr(module, k) for k in _HELIOS_WIDTHS):
        axes = _even_widths([getattr(module, k) for k in _HELIOS_WIDTHS])
        return None if axes is None else HeliosRope(theta, axes)
    if names == FRAMES_CONVENTION:
        axes, patch = _even_widths(getattr(module, "rope_dim", None)), getattr(module, "patch_size", None)
        usable = (
            axes is not None and len(axes) == 3 and isinstance(patch, int) and not isinstance(patch, bool)
        )
        return FramesRope(theta, axes, patch) if usable and patch > 0 else None
    if names == AXES_CONVENTION:
        axes = _even_widths(getattr(module, "axes_dim", None))
        if axes is None:
            return None
        heads = _matrix_form(module, axes)
        return AxesRopeMatrix(theta, axes, heads) if heads else AxesRope(theta, axes)
    axes = _even_widths(getattr(module, "rope_dim", None))
    if names != LATENT_CONVENTION or axes is None:
        return None
    patch, frames = getattr(module, "patch_size", None), getattr(module, "patch_size_t", None)
    if isinstance(patch, tuple | list) and len(patch) == len(axes):
        patches = tuple(patch)
    elif isinstance(patch, int) and len(axes) == 3 and isinstance(frames, int):
        patches = (frames, patch, patch)
    elif isinstance(patch, int) and len(axes) == 2:
        patches = (patch, patch)
    else:
        return None
    if not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in patches):
        return None
    return LatentRope(theta, axes, patches)


def _matrix_form(module: nn.Module, axes: tuple[int, ...]) -> int | None:
    """Where ``module`` (Flux's form) gives rotation matrices of batched ids (:class:`AxesRopeMatrix`): the
    axis of its heads' 1 (Black Forest Labs' ``(B, 1, S, ...)``: 1; HiDream-I1's ``(B, S, 1, ...)``: 2);
    else None."""
    try:
        with torch.no_grad():
            out = module(torch.zeros(1, 2, len(axes)))
    except Exception:  # its own code refuses batched ids: the (cos, sin) form, or another
        return None
    if not isinstance(out, torch.Tensor):
        return None
    width = sum(axes) // 2
    return {(1, 1, 2, width, 2, 2): 1, (1, 2, 1, width, 2, 2): 2}.get(tuple(out.shape))


def _cos_sin(module_out: Any, exact: AxesRope) -> tuple[torch.Tensor, torch.Tensor] | str:
    """(cos, sin) ``(S, Σ widths)`` (each pair's value twice side by side) of a rotary's output: its pair, or
    its rotation matrices [[cos, −sin], [sin, cos]] (:class:`AxesRopeMatrix`); else what it is not."""
    if isinstance(exact, ComplexRope):  # cos + i·sin (1, 1, S, Σ widths / 2)
        if not isinstance(module_out, torch.Tensor) or not module_out.is_complex() or module_out.dim() != 4:
            return "its forward returns no complex (1, 1, positions, Σ widths / 2) tensor"
        values = module_out[0, 0]
        return values.real.repeat_interleave(2, -1), values.imag.repeat_interleave(2, -1)
    if isinstance(exact, HeliosRope):  # one tensor (B, 2·Σ widths, T, H, W): cos's channels, then sin's
        width = sum(exact.axes_dim)
        if (
            not isinstance(module_out, torch.Tensor)
            or module_out.dim() != 5
            or module_out.shape[1] != 2 * width
        ):
            return f"its forward returns no (batch, 2·{width}, frames, height, width) tensor of cos and sin"
        channels = module_out[0].permute(1, 2, 3, 0).reshape(-1, 2 * width)
        return channels[:, :width], channels[:, width:]
    if not isinstance(exact, AxesRopeMatrix):
        pair = isinstance(module_out, tuple | list) and len(module_out) == 2
        if not (pair and all(isinstance(t, torch.Tensor) for t in module_out)):
            return f"its forward returns {type(module_out).__name__}, not (cos, sin)"
        return module_out[0], module_out[1]
    if not isinstance(module_out, torch.Tensor) or module_out.dim() != 6 or module_out.shape[-2:] != (2, 2):
        return "its forward returns no rotation matrices (batch, 1, positions, Σ widths / 2, 2, 2)"
    matrices = module_out[0, 0] if exact.heads == 1 else module_out[0, :, 0]
    cos, sin = matrices[..., 0, 0], matrices[..., 1, 0]
    if not (torch.equal(matrices[..., 0, 1], -sin) and torch.equal(matrices[..., 1, 1], cos)):
        return "its matrices are not rotations [[cos, −sin], [sin, cos]]"
    return cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)


def _wan_rope(module: nn.Module) -> LatentRope | None:
    """Wan's form (:data:`LATENT_CONVENTION`): its widths, its patch sizes and the ``theta`` its
    ``__init__`` takes by default (it keeps it only in its tables: the proof tells whether they are of it).
    ChronoEdit's (no widths of its own, a ``temporal_skip_len``): Wan's widths of its
    ``attention_head_dim`` (h = w = 2·⌊head/6⌋), where its forward's split of the tables (head − 2·⌊head/3⌋,
    ⌊head/3⌋, ⌊head/3⌋) is the same (a :class:`SkipRope`); else None."""
    head, skip = getattr(module, "attention_head_dim", None), getattr(module, "temporal_skip_len", None)
    if (
        not hasattr(module, "t_dim")
        and isinstance(head, int)
        and isinstance(skip, int)
        and head > 0
        and skip > 1
    ):
        spatial = 2 * (head // 6)
        if (head - 2 * spatial, spatial) != (head - 2 * (head // 3), head // 3):
            return None  # its forward cuts one axis' columns with another's positions
        widths = (head - 2 * spatial, spatial, spatial)
    else:
        widths = tuple(getattr(module, name, None) for name in _WAN_WIDTHS)
        skip = None
    axes = _even_widths(list(widths))
    patches = getattr(module, "patch_size", None)
    try:
        default = inspect.signature(type(module).__init__).parameters["theta"].default
    except (TypeError, ValueError, KeyError):
        return None
    theta = _number(default)
    if (
        axes is None
        or theta is None
        or theta <= 0
        or not isinstance(patches, tuple | list)
        or len(patches) != 3
    ):
        return None
    if not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in patches):
        return None
    if skip is not None:
        return SkipRope(theta, axes, tuple(patches), skip)
    return LatentRope(theta, axes, tuple(patches), heads=True)


def _crop_rope(module: nn.Module) -> CropRope | None:
    """EasyAnimate's form (:class:`CropRope`): ``rope_dim`` one int, a multiple of 8, and an int
    ``patch_size``; theta the default of diffusers' ``get_3d_rotary_pos_embed`` (its forward names none: the
    proof tells whether its values are of it); else None."""
    head, patch = getattr(module, "rope_dim", None), getattr(module, "patch_size", None)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (head, patch)):
        return None
    if head < 8 or head % 8:
        return None
    try:
        from diffusers.models.embeddings import get_3d_rotary_pos_embed

        theta = _number(inspect.signature(get_3d_rotary_pos_embed).parameters["theta"].default)
    except (ImportError, KeyError, TypeError, ValueError):
        return None
    return None if theta is None or theta <= 0 else CropRope(head, patch, theta)


def _complex_rope(module: nn.Module) -> ComplexRope | None:
    """Sana-WM's form (:data:`COMPLEX_CONVENTION`): Wan's widths of its ``attention_head_dim`` (its forward's
    split of its complex table) and the ``theta`` its ``__init__`` takes by default; else None."""
    head = getattr(module, "attention_head_dim", None)
    if not isinstance(head, int) or isinstance(head, bool) or head < 6:
        return None
    try:
        default = inspect.signature(type(module).__init__).parameters["theta"].default
    except (TypeError, ValueError, KeyError):
        return None
    theta, spatial = _number(default), 2 * (head // 6)
    axes = _even_widths([head - 2 * spatial, spatial, spatial])
    return None if theta is None or theta <= 0 or axes is None else ComplexRope(theta, axes)


def _probe(exact: AxesRope, axis: int | None = None, count: int = 0) -> tuple[tuple[Any, ...], torch.Tensor]:
    """(the arguments, their position ids ``(S, n_axes)``) of a probe: a grid of :data:`_PROBE_GRID` patches
    after a text block at 0 (ids form); or, along one ``axis``, positions 0 .. ``count`` − 1 there and 0
    elsewhere."""
    n = len(exact.axes_dim)
    if axis is not None:
        sizes = [count if k == axis else 1 for k in range(n)]
    else:
        sizes = [1] * max(n - 3, 0) + list(_PROBE_GRID[-min(n, 3) :])
    grid = torch.meshgrid(*(torch.arange(s, dtype=torch.float32) for s in sizes), indexing="ij")
    ids = torch.stack([g.reshape(-1) for g in grid], dim=-1)
    if isinstance(exact, ComplexRope):
        return (tuple(sizes), torch.device("cpu")), ids
    if isinstance(exact, HeliosRope):
        frames = torch.arange(sizes[0], dtype=torch.float32)[None]
        return (frames, sizes[1], sizes[2], torch.device("cpu")), ids
    if isinstance(exact, FramesRope):
        frames = torch.arange(sizes[0], dtype=torch.float32)
        return (frames, sizes[1] * exact.patch, sizes[2] * exact.patch, torch.device("cpu")), ids
    if isinstance(exact, LatentRope):
        shape = [size * patch for size, patch in zip(sizes, exact.patches, strict=True)]
        return (torch.zeros(1, 1, *shape),), exact.ids(tuple(shape))
    if axis is None:
        ids[:, : max(n - 3, 0)] += 1.0  # Flux's image index
        ids = torch.cat([torch.zeros(4, n), ids])
    return ((ids[None] if isinstance(exact, AxesRopeMatrix) else ids),), ids


def rope_rows(module: nn.Module, exact: AxesRope, axis: int, count: int = ROWS) -> torch.Tensor:
    """``module`` (a rotary of positions on axes, ``exact`` its equivalent) along one ``axis``, positions
    0 .. ``count`` − 1 there and 0 on the others, as a table ``(count, axes_dim[axis])`` in posenc's
    "sin_cos" layout: [sin ω_0 p, ... | cos ω_0 p, ...], one column per frequency (its pairs read once)."""
    longest = getattr(module, "max_seq_len", None)  # Wan's tables end there
    if isinstance(longest, int) and not isinstance(longest, bool) and longest > 0:
        count = min(count, longest)
    probe, _ = _probe(exact, axis, count)
    with torch.no_grad():
        pair = _cos_sin(module(*probe), exact)
    if isinstance(pair, str):
        raise ValueError(pair)
    cos, sin = (t.reshape(-1, t.shape[-1]) for t in pair)
    start = sum(exact.axes_dim[:axis])
    columns = slice(start, start + exact.axes_dim[axis], 2)
    return torch.cat([sin[:, columns], cos[:, columns]], dim=-1).to("cpu", torch.float32)


def prove_rope_on_axes(module: nn.Module, exact: AxesRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`rope_on_axes`) on a
    probe grid, each value within what float32 code errs at its position and frequency
    (:func:`posenc.torch.proofs.check_cos_sin`, each pair's value twice side by side); else why not
    ("its forward ...": a form posenc does not read; "not the rotary ...": values other than its
    attributes name)."""
    probe, ids = _probe(exact)
    mine = probed(lambda: module(*probe))
    if isinstance(mine, Refusal):
        return mine
    mine = _cos_sin(mine, exact)
    if isinstance(mine, str):
        return mine
    ours = _cos_sin(exact(*probe), exact)
    if any(m.shape != o.shape for m, o in zip(mine, ours, strict=True)):
        want = tuple(ours[0].shape)
        return f"its (cos, sin) have shape {tuple(mine[0].shape)}, not (positions, Σ widths) = {want}"
    mine, ours = ([t.reshape(-1, t.shape[-1]) for t in pair] for pair in (mine, ours))
    worst, allowed, start = 0.0, 0.0, 0
    for axis, width in enumerate(exact.axes_dim):
        frequencies = core.frequencies(width, base=exact.theta)
        columns = slice(start, start + width)
        for m, o in zip(mine, ours, strict=True):
            checked = within_rounding(
                m[:, columns], o[:, columns], ids[:, axis].double().numpy(), frequencies
            )
            if isinstance(checked, float):
                named = f"theta {exact.theta:g}, widths {list(exact.axes_dim)}"
                read = "its attributes name"  # or, where it keeps no theta (Wan, EasyAnimate), a default
                if _number(getattr(module, "theta", None)) is None:
                    read = "posenc reads it as, theta the default its code takes (it keeps none)"
                return f"not the rotary {read} ({named}) within float32 rounding ({checked:.3g})"
            worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
        start += width
    return worst, allowed


class AxesRope(nn.Module):
    """posenc's exact values in place of Flux's multi-axis rotary, called as it is: position ids
    ``(S, n_axes)`` -> ``(cos, sin)``, each ``(S, Σ axes_dim)`` float32 on the ids' device; axis ``k``
    takes ``axes_dim[k]`` columns, its angles ``ids[:, k] · ω_i`` with ω_i = theta^(−2i/axes_dim[k]), each
    pair's value twice side by side (cos ω_0 p, cos ω_0 p, cos ω_1 p, ...); each value the exact one rounded
    once to float32 (positions may be fractional).

    >>> cos, sin = AxesRope(10000.0, (2, 4))(torch.tensor([[0.0, 1.0]]))
    >>> cos
    tensor([[1.0000, 1.0000, 0.5403, 0.5403, 0.9999, 0.9999]])
    """

    def __init__(self, theta: float, axes_dim: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        self.theta, self.axes_dim = float(theta), tuple(int(a) for a in axes_dim)
        self._checked = [
            core.Options.check(a, self.theta, 0.0, 1.0, "sin_cos", "zero") for a in self.axes_dim
        ]

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if ids.dim() != 2 or ids.shape[-1] != len(self.axes_dim):
            want = f"(positions, {len(self.axes_dim)})"
            raise ValueError(f"ids: shape {tuple(ids.shape)}; expected {want}, one column per axis")
        cos, sin = [], []
        for axis, (width, checked) in enumerate(zip(self.axes_dim, self._checked, strict=True)):
            column = ids[:, axis] if ids.dtype == torch.float64 else ids[:, axis].float()  # a grid's reals
            values = _encode_tensor(column, (*checked, "float32"))
            sin.append(values[:, : width // 2].repeat_interleave(2, dim=-1))
            cos.append(values[:, width // 2 :].repeat_interleave(2, dim=-1))
        return torch.cat(cos, dim=-1), torch.cat(sin, dim=-1)

    #: The axes whose probe positions are 0, 1, ... (an audit reads each as a table of those positions).
    integer_axes: tuple[int, ...] | None = None

    def extra_repr(self) -> str:
        return f"theta={self.theta:g}, axes_dim={self.axes_dim}"


class AxesRopeMatrix(AxesRope):
    """:class:`AxesRope` in the form of Black Forest Labs' Flux code (PRX's ``EmbedND``): batched position ids
    ``(B, S, n_axes)`` -> rotation matrices ``(B, 1, S, Σ axes_dim / 2, 2, 2)`` [[cos, −sin], [sin, cos]],
    float32, one per frequency; ``heads`` the axis of the heads' 1: 2 for HiDream-I1's ``(B, S, 1, ...)``.

    >>> AxesRopeMatrix(10000.0, (2,))(torch.tensor([[[1.0]]]))[0, 0, 0, 0]
    tensor([[ 0.5403, -0.8415],
            [ 0.8415,  0.5403]])
    """

    def __init__(self, theta: float, axes_dim: tuple[int, ...] | list[int], heads: int = 1) -> None:
        super().__init__(theta, axes_dim)
        if heads not in (1, 2):
            raise ValueError(f"heads: {heads!r}; the heads' axis is 1 (B, 1, S, ...) or 2 (B, S, 1, ...)")
        self.heads = heads

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if ids.dim() != 3:
            raise ValueError(
                f"ids: shape {tuple(ids.shape)}; expected (batch, positions, {len(self.axes_dim)})"
            )
        batch, length = ids.shape[:2]
        cos, sin = super().forward(ids.reshape(batch * length, -1))
        cos, sin = cos[:, 0::2], sin[:, 0::2]
        matrices = torch.stack([cos, -sin, sin, cos], dim=-1).reshape(batch, length, -1, 2, 2)
        return matrices.unsqueeze(self.heads)

    def extra_repr(self) -> str:
        return super().extra_repr() + (", heads=2" if self.heads == 2 else "")


class FramesRope(AxesRope):
    """:class:`AxesRope` in HunyuanVideo Framepack's form (:data:`FRAMES_CONVENTION`): ``(frame_indices,
    height, width, device)`` -> ``(cos, sin)`` of the positions (frame index, row, column) of its patches,
    frames first, each ``(T·H·W, Σ rope_dim)`` float32; ``patch`` the patch size of a frame's height and
    width.

    >>> cos, sin = FramesRope(256.0, (2, 2, 2), 2)(torch.tensor([3.0]), 2, 4, "cpu")  # 1 × 1 × 2 patches
    >>> sin[1]
    tensor([0.1411, 0.1411, 0.0000, 0.0000, 0.8415, 0.8415])
    """

    def __init__(self, theta: float, axes_dim: tuple[int, ...], patch: int) -> None:
        super().__init__(theta, axes_dim)
        self.patch = int(patch)

    def forward(  # type: ignore[override]
        self, frame_indices: torch.Tensor, height: int, width: int, device: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        grid = torch.meshgrid(
            frame_indices.to(device=device, dtype=torch.float32),
            torch.arange(height // self.patch, device=device, dtype=torch.float32),
            torch.arange(width // self.patch, device=device, dtype=torch.float32),
            indexing="ij",
        )
        return super().forward(torch.stack([g.reshape(-1) for g in grid], dim=-1))

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, patch={self.patch}"


class HeliosRope(AxesRope):
    """:class:`AxesRope` in Helios' form (:data:`FRAMES_CONVENTION`): ``(frame_indices, height, width,
    device)`` with frame indices ``(B, T)`` and a grid of ``height`` × ``width`` patches -> one float32
    tensor ``(B, 2·Σ widths, T, height, width)``: the cos of every axis (frames, rows, columns, each pair's
    value twice side by side), then their sin, per patch.

    >>> out = HeliosRope(256.0, (2, 2, 2))(torch.tensor([[3.0]]), 1, 2, "cpu")  # patches (0, 0), (0, 1)
    >>> out[0, 6:, 0, 0, 1]  # the sin of frame 3's patch (0, 1)
    tensor([0.1411, 0.1411, 0.0000, 0.0000, 0.8415, 0.8415])
    """

    def forward(  # type: ignore[override]
        self, frame_indices: torch.Tensor, height: int, width: int, device: Any = None
    ) -> torch.Tensor:
        frames = frame_indices.shape[1]
        grid = torch.meshgrid(
            *(torch.arange(n, device=device) for n in (frames, height, width)), indexing="ij"
        )
        rows = []
        for indices in frame_indices.to(device=device, dtype=torch.float32):
            ids = torch.stack(
                [indices[grid[0]].reshape(-1), grid[1].reshape(-1), grid[2].reshape(-1)], dim=-1
            )
            cos, sin = super().forward(ids)
            rows.append(torch.cat([cos, sin], dim=-1).reshape(frames, height, width, -1).permute(3, 0, 1, 2))
        return torch.stack(rows)


class ComplexRope(AxesRope):
    """:class:`AxesRope` in Sana-WM's form (:data:`COMPLEX_CONVENTION`): ``(fhw, device)`` -> the complex
    cos + i·sin ``(1, 1, F·H·W, Σ widths / 2)`` complex64 of the patches of an F × H × W grid, row-major.

    >>> ComplexRope(256.0, (2, 2, 2))((1, 1, 2), "cpu")[0, 0, 1]  # patch (0, 0, 1)
    tensor([1.0000+0.0000j, 1.0000+0.0000j, 0.5403+0.8415j])
    """

    def forward(self, fhw: tuple[int, int, int], device: Any = None) -> torch.Tensor:  # type: ignore[override]
        grid = torch.meshgrid(*(torch.arange(int(n), dtype=torch.float32) for n in fhw), indexing="ij")
        cos, sin = super().forward(torch.stack([g.reshape(-1) for g in grid], dim=-1).to(device))
        return torch.complex(cos[:, 0::2], sin[:, 0::2])[None, None]


class LatentRope(AxesRope):
    """posenc's exact values in place of a rotary of a latent's grid (HunyuanVideo's form), called as it
    is: ``hidden_states`` ``(B, C, *axes)`` -> ``(cos, sin)`` of the positions of its patches, row-major
    (the last axis fastest), as :class:`AxesRope` gives them for those ids; ``patches`` the patch size on
    each axis; ``heads``: each ``(1, S, 1, D)``, as Wan's (else ``(S, D)``).

    >>> cos, sin = LatentRope(256.0, (2, 2), (2, 2))(torch.zeros(1, 4, 2, 4))  # a 1×2 grid of patches
    >>> sin
    tensor([[0.0000, 0.0000, 0.0000, 0.0000],
            [0.0000, 0.0000, 0.8415, 0.8415]])
    """

    def __init__(
        self, theta: float, axes_dim: tuple[int, ...], patches: tuple[int, ...], heads: bool = False
    ) -> None:
        super().__init__(theta, axes_dim)
        self.patches, self.heads = tuple(int(p) for p in patches), bool(heads)

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        n = len(self.axes_dim)
        if hidden_states.dim() != n + 2:
            raise ValueError(
                f"hidden_states: shape {tuple(hidden_states.shape)}; expected (batch, channels) and {n} axes"
            )
        cos, sin = super().forward(self.ids(tuple(hidden_states.shape[2:])).to(hidden_states.device))
        if self.heads:
            return cos[None, :, None, :], sin[None, :, None, :]
        return cos, sin

    def ids(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The position ids ``(S, n_axes)`` float32 of the patches of a latent whose axes are ``shape``."""
        sizes = [s // p for s, p in zip(shape, self.patches, strict=True)]
        grid = torch.meshgrid(*(torch.arange(s, dtype=torch.float32) for s in sizes), indexing="ij")
        return torch.stack([g.reshape(-1) for g in grid], dim=-1)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, patches={self.patches}" + (", heads=True" if self.heads else "")


class CropRope(LatentRope):
    """:class:`LatentRope` in EasyAnimate's form (:data:`LATENT_CONVENTION`, ``rope_dim`` one int n,
    diffusers' ``get_3d_rotary_pos_embed`` of a resize-crop region): a latent ``(B, C, F, H, W)`` of
    F × H' × W' patches (H' = H // ``patch``) on a base grid of :data:`CROP_BASE` pixels (rows, columns) //
    ``patch``: the region of that grid an H' × W' grid fills, resized and centred, (top, left) .. (bottom,
    right); frame f at f, row i at top + i·(bottom·(H' − 1)/H' − top)/(H' − 1) (``linspace``), columns
    alike; widths n/4, 3n/8, 3n/8, each pair's value twice. The positions formed in float64, each value
    exact.

    >>> cos, sin = CropRope(16, 2)(torch.zeros(1, 1, 1, 2, 2))  # one frame of 1 × 1 patches
    >>> sin[0, 10:12]  # its column, at the base grid's centred square: left = round(7.5) = 8
    tensor([0.9894, 0.9894])
    """

    def __init__(self, head: int, patch: int, theta: float = 10000.0) -> None:
        if head < 8 or head % 8:
            raise ValueError(f"head: {head}; EasyAnimate's rotary takes a multiple of 8 channels")
        super().__init__(theta, (head // 4, head // 8 * 3, head // 8 * 3), (1, patch, patch))
        self.head, self.patch = int(head), int(patch)
        self.integer_axes = (0,)

    def region(self, height: int, width: int) -> tuple[tuple[int, int], tuple[int, int]]:
        """The resize-crop region ((top, left), (bottom, right)) of an ``height`` × ``width`` grid on the
        base grid (diffusers' ``get_resize_crop_region_for_grid``: its float steps and rounding, half to
        even, as they are)."""
        tall, wide = CROP_BASE[0] // self.patch, CROP_BASE[1] // self.patch
        if height / width > tall / wide:
            resized = (tall, round(tall / height * width))
        else:
            resized = (round(wide / width * height), wide)
        top, left = round((tall - resized[0]) / 2.0), round((wide - resized[1]) / 2.0)
        return (top, left), (top + resized[0], left + resized[1])

    def ids(self, shape: tuple[int, ...]) -> torch.Tensor:
        """The positions ``(F·H'·W', 3)`` float64 of the patches of a latent whose axes are ``shape``."""
        frames, height, width = shape[0], shape[1] // self.patch, shape[2] // self.patch
        (top, left), (bottom, right) = self.region(height, width)
        rows = [top + i * (bottom * (height - 1) / height - top) / max(height - 1, 1) for i in range(height)]
        columns = [left + j * (right * (width - 1) / width - left) / max(width - 1, 1) for j in range(width)]
        axes = [torch.arange(frames, dtype=torch.float64)]
        axes += [torch.tensor(v, dtype=torch.float64) for v in (rows, columns)]
        grid = torch.meshgrid(*axes, indexing="ij")
        return torch.stack([g.reshape(-1) for g in grid], dim=-1)

    def extra_repr(self) -> str:
        return f"head={self.head}, patch={self.patch}, theta={self.theta:g}"


class SkipRope(LatentRope):
    """:class:`LatentRope` in ChronoEdit's form (Wan's, heads=True): a latent of exactly two frames takes the
    frame positions 0 and ``skip`` − 1 (its ``temporal_skip_len``: an edit's input and output frames).

    >>> cos, sin = SkipRope(256.0, (2, 2, 2), (1, 1, 1), 8)(torch.zeros(1, 1, 2, 1, 1))
    >>> sin[0, :, 0, :2]  # frames 0 and 7
    tensor([[0.0000, 0.0000],
            [0.6570, 0.6570]])
    """

    def __init__(self, theta: float, axes_dim: tuple[int, ...], patches: tuple[int, ...], skip: int) -> None:
        super().__init__(theta, axes_dim, patches, heads=True)
        self.skip = int(skip)

    def ids(self, shape: tuple[int, ...]) -> torch.Tensor:
        ids = super().ids(shape)
        if shape[0] == 2 and self.patches[0] == 1:  # its two frames: 0 and skip − 1
            ids[:, 0] *= self.skip - 1
        return ids

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, skip={self.skip}"


# --- DINOv3's rotary of a grid's coordinates (timm's RotaryEmbeddingDinoV3) --------------------------------

#: The attributes DINOv3's rotary is read from (timm's ``RotaryEmbeddingDinoV3``, after
#: facebookresearch/dinov3's ``RopePositionEmbedding``); it is called as ``get_embed(shape, dtype)``.
DINOV3_ATTRIBUTES = (
    "dim",
    "temperature",
    "min_period",
    "max_period",
    "normalize_coords",
    "grid_offset",
    "grid_indexing",
    "rotate_half",
    "feat_shape",
)
#: The grids a DINOv3 rotary is proven on (its own ``feat_shape`` too, where it has one).
DINOV3_PROBES = ((5, 7), (1, 3), (16, 16))


def dinov3_form(module: nn.Module) -> bool:
    """Whether ``module`` has DINOv3's rotary's form (:data:`DINOV3_ATTRIBUTES` and a ``get_embed``): a module
    that computes its rotary, whatever cache of it it holds."""
    if not callable(getattr(type(module), "get_embed", None)):  # its class first: no attribute read before
        return False
    return all(hasattr(module, name) for name in DINOV3_ATTRIBUTES)


def read_dinov3(module: nn.Module) -> DinoV3Rope | str | None:
    """posenc's exact equivalent of ``module`` where it is DINOv3's rotary (:data:`DINOV3_ATTRIBUTES` and a
    ``get_embed``), built from its attributes; why not (a str) where it is of that form with something posenc
    does not reproduce; else None. Whether it
    computes what they say is :func:`prove_dinov3`'s to tell. One whose training draws random coordinates
    (``aug_active``: shift, jitter, rescale) keeps them: posenc's equivalent then runs it in training."""
    if isinstance(module, DinoV3Rope):  # posenc's own, patched in
        return module
    if not dinov3_form(module):
        return None
    shape = module.feat_shape
    options = {name: getattr(module, name) for name in DINOV3_ATTRIBUTES[1:-1]}
    if options["min_period"] is None or options["max_period"] is None:  # its periods are the temperature's
        options["min_period"] = options["max_period"] = None
    try:
        exact = DinoV3Rope(
            module.dim,
            feat_shape=None if shape is None else tuple(shape),
            **options,
            **_cache_like(module),
        )
    except (TypeError, ValueError) as error:
        return f"its attributes are not a DINOv3 rotary posenc reads: {str(error)[:160]}"
    exact.augmentation = bool(getattr(module, "aug_active", False))
    return exact


def _cache_like(module: nn.Module) -> dict[str, Any]:
    """The dtype of ``module``'s cached embedding (float32 where it has none), the device of its tensors."""
    cached = getattr(module, "pos_embed_cached", None)
    periods = getattr(module, "periods", None)
    floating = isinstance(cached, torch.Tensor) and cached.is_floating_point()
    device = periods.device if isinstance(periods, torch.Tensor) else None
    return {"dtype": cached.dtype if floating else torch.float32, "device": device}


def _dinov3_blocks(embed: torch.Tensor, dim: int, rotate_half: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The dim/2 sines and cosines of a DINOv3 embedding ``(cells, 2·dim)`` ([sin | cos], each repeated as
    its layout repeats them), read once: the first axis' dim/4 columns, then the second's."""
    sines, cosines = embed[:, :dim], embed[:, dim:]
    if rotate_half:
        return sines[:, : dim // 2], cosines[:, : dim // 2]
    return sines[:, 0::2], cosines[:, 0::2]


def _repeats(embed: torch.Tensor, dim: int, rotate_half: bool) -> bool:
    """Whether each value of a DINOv3 embedding ``(cells, 2·dim)`` is there twice, as its layout puts it."""
    for part in (embed[:, :dim], embed[:, dim:]):
        pair = (part[:, : dim // 2], part[:, dim // 2 :]) if rotate_half else (part[:, 0::2], part[:, 1::2])
        if not torch.equal(*pair):
            return False
    return True


def prove_dinov3(module: nn.Module, exact: DinoV3Rope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module``'s ``get_embed(shape)`` against ``exact`` on the
    grids of :data:`DINOV3_PROBES` (and its own ``feat_shape``), each value within what float32 code errs at
    its coordinate and frequency (:func:`posenc.torch.proofs.check_cos_sin`); and its repeated columns equal
    to each other; else why not."""
    shapes = list(DINOV3_PROBES) + ([exact.feat_shape] if exact.feat_shape is not None else [])
    timm = isinstance(exact, TimmRope)
    if timm and exact.feat_shape is not None:  # a cache of its own grid: that grid's, whatever shape
        shapes = [exact.feat_shape]
    form = "timm's axial rotary" if timm else "DINOv3's rotary"
    worst, allowed = 0.0, 0.0
    n = exact.dim // 4
    frequencies = core.frequencies(exact.dim // 2, **exact.frequency_options)
    for shape in shapes:
        try:
            with torch.no_grad(), in_eval(module):  # its inference values: in training it may draw
                mine = module.get_embed(shape=list(shape))
        except Exception as error:  # its own code refuses the probe grid
            refused = f"{type(error).__name__}: {str(error)[:100]}"
            return f"its get_embed refuses posenc's probe grid {shape} ({refused})"
        ours = exact.get_embed(shape=shape)
        if not isinstance(mine, torch.Tensor) or mine.shape != ours.shape:
            got = tuple(mine.shape) if isinstance(mine, torch.Tensor) else type(mine).__name__
            return f"its get_embed gives {got}, not (cells, 2·dim) = {tuple(ours.shape)}"
        if not _repeats(mine, exact.dim, exact.rotate_half):
            layout = "halves" if exact.rotate_half else "pairs"
            return f"its columns are not {form} {layout} layout (each value twice)"
        repeated = _dinov3_blocks(mine, exact.dim, exact.rotate_half)
        rows, columns = exact.coordinates(shape)
        cells = (np.repeat(rows, len(columns)), np.tile(columns, len(rows)))  # each cell's, row-major
        for block, positions in enumerate(cells if exact.grid_indexing == "ij" else cells[::-1]):
            columns = slice(block * n, (block + 1) * n)
            for m, o in zip(repeated, _dinov3_blocks(ours, exact.dim, exact.rotate_half), strict=True):
                if not positions.any():  # an axis of one cell: coordinate 0, whose sin 0 and cos 1 are exact
                    checked = (0.0, 0.0) if torch.equal(m[:, columns], o[:, columns]) else math.inf
                else:
                    checked = within_rounding(m[:, columns], o[:, columns], positions, frequencies)
                if isinstance(checked, float):
                    return (
                        f"not {form} its attributes name ({exact.extra_repr()}) within float32 rounding "
                        f"({checked:.3g})"
                    )
                worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


class DinoV3Rope(nn.Module):
    """posenc's exact values in place of DINOv3's rotary (timm's ``RotaryEmbeddingDinoV3``), called as it is:
    ``get_embed(shape=None, dtype=None)`` -> ``(H·W, 2·dim)`` [sin | cos] (:func:`posenc.grids.dinov3_rope`:
    the coordinates 2·(k + ½ + grid_offset)/n − 1 of each cell, in float64, times
    ω_i = 2π·temperature^(−i/(dim/4))),
    each value the exact one rounded once: to the dtype its cache had (the model's dtype) for its own
    ``feat_shape``, to float32 (float64 in a float64 model) for another shape; ``get_batch_embeds``,
    ``update_feat_shape`` and ``forward(x)`` (the rotation of a ``(B, dim, *grid)`` input) as timm's.

    >>> rope = DinoV3Rope(8, feat_shape=(1, 4))
    >>> rope.get_embed()[3, :4]  # sin of the coordinates (0, 0.75) times ω_0 = 2π, ω_1 = 2π/10
    tensor([ 0.0000,  0.0000, -1.0000,  0.4540])
    """

    #: Whether the original draws random coordinates in training (its ``aug_active``): patched in, posenc's
    #: module runs the original's own methods then (its inference values are posenc's).
    augmentation = False

    def __init__(
        self,
        dim: int,
        *,
        feat_shape: tuple[int, int] | None = None,
        temperature: float | None = 100.0,
        min_period: float | None = None,
        max_period: float | None = None,
        normalize_coords: str = "separate",
        grid_offset: float = 0.0,
        grid_indexing: str = "ij",
        rotate_half: bool = True,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        options = grids.dinov3_frequencies(
            dim, temperature=temperature, min_period=min_period, max_period=max_period
        )
        grids.dinov3_coordinates((1, 1), normalize_coords=normalize_coords, grid_offset=grid_offset)
        if grid_indexing not in ("ij", "xy"):
            raise ValueError(f"grid_indexing must be 'ij' or 'xy'; got {grid_indexing!r}")
        if feat_shape is not None:
            grids.dinov3_coordinates(feat_shape)  # two sizes of at least 1
            feat_shape = (int(feat_shape[0]), int(feat_shape[1]))
        self.dim, self.feat_shape, self.rotate_half = int(dim), feat_shape, bool(rotate_half)
        self.temperature, self.min_period, self.max_period = temperature, min_period, max_period
        self.normalize_coords, self.grid_offset, self.grid_indexing = (
            normalize_coords,
            float(grid_offset),
            grid_indexing,
        )
        self.frequency_options = options
        self._checked = core.Options.check(
            self.dim // 2, options["base"], options["shift"], options["scale"], "sin_cos", "zero"
        )
        # its dtype follows the module's (.to, .half): the dtype of the embedding of its own feat_shape
        self.register_buffer("like", torch.empty(0, dtype=dtype, device=device), persistent=False)

    def coordinates(self, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The float64 coordinates of each axis of a grid ``shape`` (:func:`grids.dinov3_coordinates`)."""
        return grids.dinov3_coordinates(
            shape, normalize_coords=self.normalize_coords, grid_offset=self.grid_offset
        )

    def _embed(self, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
        height, width = (int(s) for s in shape)
        device, fmt = self.like.device, _dtype_name(dtype)
        blocks = []
        for positions in self.coordinates((height, width)):
            blocks.append(_encode_tensor(torch.from_numpy(positions).to(device), (*self._checked, fmt)))
        first, second = blocks if self.grid_indexing == "ij" else blocks[::-1]
        n = self.dim // 4
        if self.grid_indexing == "xy":  # the cells still run over (h, w): w's angles come first
            first = first[None, :, :].expand(height, width, -1)
            second = second[:, None, :].expand(height, width, -1)
        else:
            first = first[:, None, :].expand(height, width, -1)
            second = second[None, :, :].expand(height, width, -1)
        first, second = first.reshape(height * width, -1), second.reshape(height * width, -1)
        sines = torch.cat([first[:, :n], second[:, :n]], dim=-1)
        cosines = torch.cat([first[:, n:], second[:, n:]], dim=-1)
        if self.rotate_half:
            return torch.cat([sines, sines, cosines, cosines], dim=-1)
        return torch.cat([sines.repeat_interleave(2, -1), cosines.repeat_interleave(2, -1)], dim=-1)

    def get_embed(self, shape: Any = None, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The embedding of a grid ``shape`` (H, W) (default: its ``feat_shape``), ``(H·W, 2·dim)``."""
        if shape is None:
            if self.feat_shape is None:
                raise ValueError("shape: this rotary has no feat_shape; pass shape=(H, W)")
            values = self._embed(self.feat_shape, self.like.dtype)
        else:
            grids.dinov3_coordinates(tuple(shape))
            wide = torch.float64 if self.like.dtype == torch.float64 else torch.float32
            values = self._embed(tuple(shape), wide)
        return values if dtype is None else values.to(dtype)

    def get_batch_embeds(
        self, shapes: list[tuple[int, int]], seq_len: int | None = None, dtype: torch.dtype | None = None
    ) -> torch.Tensor | list[torch.Tensor]:
        """One embedding per grid of ``shapes``; with ``seq_len``, zero-padded to it and stacked."""
        embeds = [self.get_embed((h, w), dtype=dtype) for h, w in shapes]
        if seq_len is None or not embeds:
            return embeds
        padded = embeds[0].new_zeros((len(embeds), seq_len, embeds[0].shape[-1]))
        for i, embed in enumerate(embeds):
            if embed.shape[0] > seq_len:
                raise ValueError(
                    f"seq_len: {seq_len} is less than the {embed.shape[0]} cells of grid {shapes[i]}"
                )
            padded[i, : embed.shape[0]] = embed
        return padded

    def update_feat_shape(self, feat_shape: Any) -> None:
        """Its grid becomes ``feat_shape`` where it has one (as timm's)."""
        if self.feat_shape is not None and tuple(feat_shape) != tuple(self.feat_shape):
            self.feat_shape = tuple(int(s) for s in feat_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(B, dim, *grid)`` rotated by the embedding of its grid: x·cos + rotate(x)·sin."""
        embed = self.get_embed(tuple(x.shape[2:]))
        sin, cos = embed[:, : self.dim], embed[:, self.dim :]
        flat = x.flatten(2).transpose(1, 2)
        if self.rotate_half:
            half = flat.shape[-1] // 2
            turned = torch.cat([-flat[..., half:], flat[..., :half]], dim=-1)
        else:
            turned = torch.stack([-flat[..., 1::2], flat[..., 0::2]], dim=-1).reshape(flat.shape)
        return (flat * cos + turned * sin).transpose(1, 2).reshape(x.shape)

    def extra_repr(self) -> str:
        periods = (
            f"temperature={self.temperature:g}"
            if self.min_period is None and self.max_period is None
            else f"min_period={self.min_period:g}, max_period={self.max_period:g}"
        )
        return (
            f"dim={self.dim}, {periods}, feat_shape={self.feat_shape}, "
            f"normalize_coords={self.normalize_coords!r}, grid_offset={self.grid_offset:g}, "
            f"grid_indexing={self.grid_indexing!r}, rotate_half={self.rotate_half}"
        )


# --- timm's axial rotary of an index grid (RotaryEmbeddingCat: EVA-02's, Perception Encoder's) -------------

#: The attributes timm's axial rotary (``RotaryEmbeddingCat``) is read from; it is called as
#: ``get_embed(shape, dtype)`` -> ``(H·W, 2·dim)`` [sin | cos].
TIMM_ROPE_ATTRIBUTES = (
    "dim",
    "max_res",
    "temperature",
    "in_pixels",
    "linear_bands",
    "feat_shape",
    "ref_feat_shape",
    "grid_offset",
    "grid_indexing",
    "rotate_half",
)


def timm_rope_form(module: nn.Module) -> bool:
    """Whether ``module`` has the form of timm's axial rotary (:data:`TIMM_ROPE_ATTRIBUTES` and a
    ``get_embed``): a module that computes its rotary, whatever cache of it it holds."""
    if not callable(getattr(type(module), "get_embed", None)):  # its class first: no attribute read before
        return False
    return all(hasattr(module, name) for name in TIMM_ROPE_ATTRIBUTES)


def read_timm_rope(module: nn.Module) -> TimmRope | str | None:
    """posenc's exact equivalent of ``module`` where it is timm's axial rotary of an index grid
    (:func:`timm_rope_form`, ``in_pixels`` False), built from its attributes; why not (a str) where it has
    that form with something posenc does not reproduce (pixel bands, another grid); else None. Whether it
    computes what they say is :func:`prove_dinov3`'s to tell."""
    if isinstance(module, TimmRope):  # posenc's own, patched in
        return module
    if not timm_rope_form(module):
        return None
    if module.in_pixels:
        return (
            "its bands are pixel frequencies (evenly spaced, linspace(1, max_res/2)·π: in_pixels=True), "
            "which posenc's exact core does not compute (it computes a temperature's geometric bands)"
        )
    if getattr(module, "grid_type", "index") != "index":
        return f"its grid is timm's {module.grid_type!r} grid, not the index grid posenc reads for it"
    shape, reference = module.feat_shape, module.ref_feat_shape
    cache = getattr(module, "pos_embed", None)
    bands = getattr(module, "bands", None)
    floating = isinstance(cache, torch.Tensor) and cache.is_floating_point()
    try:
        exact = TimmRope(
            module.dim,
            feat_shape=None if shape is None else tuple(shape),
            temperature=module.temperature,
            grid_offset=module.grid_offset,
            ref_feat_shape=None if reference is None else tuple(reference),
            grid_indexing=module.grid_indexing,
            rotate_half=module.rotate_half,
            dtype=cache.dtype if floating else torch.float32,
            device=bands.device if isinstance(bands, torch.Tensor) else None,
        )
    except (TypeError, ValueError) as error:
        return f"its attributes are not a timm axial rotary posenc reads: {str(error)[:160]}"
    exact.augmentation = bool(getattr(module, "aug_active", False))
    return exact


class TimmRope(DinoV3Rope):
    """posenc's exact values in place of timm's axial rotary of an index grid (``RotaryEmbeddingCat`` with
    ``in_pixels=False``: EVA-02's, Perception Encoder's), called as it is: ``get_embed(shape=None,
    dtype=None)`` -> ``(H·W, 2·dim)`` [sin | cos] (:func:`posenc.grids.timm_rope`: the coordinates
    (k + grid_offset), times r/n with a ``ref_feat_shape``, as timm forms them in float32, times
    ω_i = temperature^(−i/(dim/4))), each value the exact one rounded once: to the dtype its cache had for
    its own ``feat_shape``, to float32 (float64 in a float64 model) for another shape. One built with a
    ``feat_shape`` gives that grid's embedding whatever ``shape`` it is asked for, as timm's cache does.

    >>> rope = TimmRope(8, feat_shape=(1, 3))
    >>> rope.get_embed()[2, :8]  # sin of the coordinates (0, 2) times ω_0 = 1, ω_1 = 1/100, pair by pair
    tensor([0.0000, 0.0000, 0.0000, 0.0000, 0.9093, 0.9093, 0.0200, 0.0200])
    """

    def __init__(
        self,
        dim: int,
        *,
        feat_shape: tuple[int, int] | None = None,
        temperature: float = 10000.0,
        grid_offset: float = 0.0,
        ref_feat_shape: tuple[int, int] | None = None,
        grid_indexing: str = "ij",
        rotate_half: bool = False,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        nn.Module.__init__(self)
        grids.timm_rope((1, 1), dim, temperature=temperature, grid_offset=grid_offset)  # checks them
        if grid_indexing not in ("ij", "xy"):
            raise ValueError(f"grid_indexing must be 'ij' or 'xy'; got {grid_indexing!r}")
        if feat_shape is not None:
            grids.timm_rope_coordinates(feat_shape)  # two sizes of at least 1
            feat_shape = (int(feat_shape[0]), int(feat_shape[1]))
        if ref_feat_shape is not None:
            grids.timm_rope_coordinates((1, 1), ref_feat_shape=ref_feat_shape)
            ref_feat_shape = (int(ref_feat_shape[0]), int(ref_feat_shape[1]))
        self.dim, self.feat_shape, self.rotate_half = int(dim), feat_shape, bool(rotate_half)
        self.temperature, self.min_period, self.max_period = float(temperature), None, None
        self.grid_offset, self.grid_indexing = float(grid_offset), grid_indexing
        self.ref_feat_shape = ref_feat_shape
        self.frequency_options = {"base": self.temperature, "shift": 0.0, "scale": 1.0}
        self._checked = core.Options.check(self.dim // 2, self.temperature, 0.0, 1.0, "sin_cos", "zero")
        self.register_buffer("like", torch.empty(0, dtype=dtype, device=device), persistent=False)

    def coordinates(self, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """The coordinates of each axis of a grid ``shape`` (:func:`grids.timm_rope_coordinates`)."""
        return grids.timm_rope_coordinates(
            shape, grid_offset=self.grid_offset, ref_feat_shape=self.ref_feat_shape
        )

    def get_embed(self, shape: Any = None, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The embedding of a grid ``shape`` (H, W), ``(H·W, 2·dim)``; one built with a ``feat_shape``:
        that grid's, whatever ``shape``."""
        return super().get_embed(None if self.feat_shape is not None else shape, dtype)

    def get_batch_embeds(
        self, shapes: list[tuple[int, int]], seq_len: int | None = None, dtype: torch.dtype | None = None
    ) -> torch.Tensor | list[torch.Tensor]:
        """One embedding per grid of ``shapes`` (with ``seq_len``: zero-padded to it and stacked); one built
        with a ``feat_shape`` has none (as timm's)."""
        if self.feat_shape is not None:
            raise RuntimeError(
                "Batch embedding generation requires cached bands, not pre-computed embeddings"
            )
        return super().get_batch_embeds(shapes, seq_len, dtype)

    def extra_repr(self) -> str:
        return (
            f"dim={self.dim}, temperature={self.temperature:g}, feat_shape={self.feat_shape}, "
            f"ref_feat_shape={self.ref_feat_shape}, grid_offset={self.grid_offset:g}, "
            f"grid_indexing={self.grid_indexing!r}, rotate_half={self.rotate_half}"
        )


# --- transformers' DINOv3 rotary (DINOv3ViT, EoMT-DINOv3, Sapiens2): the same, of pixel_values -----------

#: transformers' form of DINOv3's rotary: ``forward(pixel_values)`` -> ``(cos, sin)``, each
#: ``(H·W, head_dim)`` in the pixels' dtype, of the patch centres 2·(k + ½)/n − 1 of the grid
#: (H // patch, W // patch), angles 2π·c·inv_freq with ``inv_freq`` = base^(−4i/head_dim), i < head_dim/4,
#: laid out [h | w | h | w]; its training may shift, jitter and rescale the coordinates at random
#: (``pos_embed_shift``/``_jitter``/``_rescale`` of its config).
HF_DINOV3_CONVENTION = ("pixel_values",)
_HF_DINOV3_AUGMENTATION = ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale")


def _patch(config: Any) -> tuple[int, int] | None:
    size = getattr(config, "patch_size", None)
    pair = tuple(size) if isinstance(size, list | tuple) else (size, size)
    usable = len(pair) == 2 and all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in pair)
    return (int(pair[0]), int(pair[1])) if usable else None


def _hf_dinov3_base(module: nn.Module) -> float | None:
    config = module.config
    parameters = getattr(config, "rope_parameters", None)
    for value in (
        getattr(module, "base", None),
        getattr(config, "rope_theta", None),
        parameters.get("rope_theta") if isinstance(parameters, dict) else None,
    ):
        if _number(value) is not None and value > 1:
            return float(value)
    return None


def read_hf_dinov3(module: nn.Module) -> HfDinoV3Rope | str | None:
    """posenc's exact equivalent of ``module`` where it has transformers' DINOv3 form
    (:data:`HF_DINOV3_CONVENTION`, an ``inv_freq`` buffer and a ``config`` naming its patch size and base),
    as :class:`HfDinoV3Rope` (its ``augmentation``: the config's random coordinate changes in training, which
    posenc does not draw); why not (a str) where its config names no patch size or base; else None. Whether
    it computes that is :func:`prove_hf_dinov3`'s to tell."""
    if isinstance(module, HfDinoV3Rope):  # posenc's own, patched in
        return module
    inv = getattr(module, "inv_freq", None)
    config = getattr(module, "config", None)
    try:
        names = tuple(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return None
    if names != HF_DINOV3_CONVENTION or not isinstance(inv, torch.Tensor) or config is None:
        return None
    patch, base = _patch(config), _hf_dinov3_base(module)
    if patch is None or base is None or inv.dim() != 1 or inv.numel() < 1:
        return "its config names no patch size and base posenc reads (patch_size, rope_theta)"
    augmented = tuple(name for name in _HF_DINOV3_AUGMENTATION if getattr(config, name, None) is not None)
    try:
        exact = HfDinoV3Rope(4 * inv.numel(), base, patch, device=inv.device)
        exact.augmentation = augmented
        return exact
    except (TypeError, ValueError) as error:
        return f"its attributes are not a DINOv3 rotary posenc reads: {str(error)[:160]}"


class _PixelsEmbed:
    """A transformers DINOv3 rotary seen as timm's: ``get_embed(shape)`` -> ``(H·W, 2·dim)`` [sin | cos] of
    its forward on zero pixels of that grid (what :func:`prove_dinov3` reads), in eval mode (its inference
    values: in training it may draw random coordinates), its mode put back after."""

    def __init__(self, module: nn.Module, patch: tuple[int, int]) -> None:
        self.module, self.patch = module, patch

    def get_embed(self, shape: Any = None) -> torch.Tensor:
        height, width = (int(s) for s in shape)
        device = getattr(self.module, "inv_freq", torch.empty(0)).device
        pixels = torch.zeros(1, 3, height * self.patch[0], width * self.patch[1], device=device)
        training = self.module.training
        try:
            cos, sin = self.module.eval()(pixels)
        finally:
            self.module.train(training)
        return torch.cat([sin, cos], dim=-1)


def prove_hf_dinov3(module: nn.Module, exact: HfDinoV3Rope) -> tuple[float, float] | str:
    """:func:`prove_dinov3` of ``module``'s forward on zero pixels of each probe grid (read as timm's
    ``get_embed``), against ``exact``."""
    return prove_dinov3(_PixelsEmbed(module, exact.patch), exact)


def hf_dinov3_embed(module: nn.Module, patch: tuple[int, int]) -> Any:
    """``module`` (transformers' DINOv3 form) with timm's ``get_embed(shape)``, for the audit."""
    return _PixelsEmbed(module, patch)


class HfDinoV3Rope(DinoV3Rope):
    """posenc's exact values in place of transformers' DINOv3 rotary (:data:`HF_DINOV3_CONVENTION`), called
    as it is: ``forward(pixel_values)`` -> ``(cos, sin)``, each ``(H·W, dim)`` of the grid
    (H // patch[0], W // patch[1]), [h | w | h | w], each value the exact one rounded once to the pixels'
    dtype (:class:`DinoV3Rope` with ``temperature`` its base, coordinates 2·(k + ½)/n − 1).

    >>> cos, sin = HfDinoV3Rope(8, 100.0, (16, 16))(torch.zeros(1, 3, 16, 64))  # a 1×4 grid
    >>> sin[3]  # the cell (0, 3): coordinates (0, 0.75), ω_0 = 2π, ω_1 = 2π/10
    tensor([ 0.0000,  0.0000, -1.0000,  0.4540,  0.0000,  0.0000, -1.0000,  0.4540])
    """

    def __init__(
        self, dim: int, base: float, patch: tuple[int, int], device: torch.device | str | None = None
    ) -> None:
        super().__init__(dim, temperature=base, device=device)
        self.base, self.patch = float(base), (int(patch[0]), int(patch[1]))
        self.augmentation: tuple[
            str, ...
        ] = ()  # the original's random coordinates in training (read_hf_dinov3)

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        height, width = pixel_values.shape[-2] // self.patch[0], pixel_values.shape[-1] // self.patch[1]
        embed = self._embed((height, width), pixel_values.dtype)
        return embed[:, self.dim :], embed[:, : self.dim]

    def extra_repr(self) -> str:
        return f"dim={self.dim}, base={self.base:g}, patch={self.patch}"


# --- a rotary of frame, row and column ids computed in an attention layer (V-JEPA 2's) -------------------

#: V-JEPA 2's form (transformers' ``VJEPA2RopeAttention``): its ``apply_rotary_embeddings(qk, pos_ids)``
#: rotates a head's first ``d_dim``, ``h_dim`` and ``w_dim`` channels by the frame, row and column ids
#: ``pos_ids``, a block of D channels by the angles p·ω_i, ω_i = 10000^(−i/(D/2)), its sines and cosines
#: repeated as halves [s | s] and applied to the pairs (x_2j, x_2j+1) as x·cos + (−x_2j+1, x_2j)·sin; the
#: channels past them unchanged.
AXES_ROTATION_METHOD = "apply_rotary_embeddings"
_AXES_ROTATION_WIDTHS = ("d_dim", "h_dim", "w_dim")
#: V-JEPA 2's base, fixed in its code.
AXES_ROTATION_BASE = 10000.0


def axes_rotation_widths(module: nn.Module) -> tuple[int, ...] | None:
    """The widths of ``module``'s rotated blocks where it has V-JEPA 2's form (:data:`AXES_ROTATION_METHOD`
    on its class, even ``d_dim``/``h_dim``/``w_dim`` within its ``attention_head_size``), else None."""
    if not callable(getattr(type(module), AXES_ROTATION_METHOD, None)):
        return None
    widths = _even_widths([getattr(module, name, None) for name in _AXES_ROTATION_WIDTHS])
    head = getattr(module, "attention_head_size", None)
    if widths is None or not isinstance(head, int) or sum(widths) > head:
        return None
    return widths


def _rotate(module: nn.Module, qk: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return getattr(module, AXES_ROTATION_METHOD)(qk, (positions,) * 3)


def axes_rotation_rows(module: nn.Module, count: int = ROWS) -> list[torch.Tensor]:
    """``module``'s sines and cosines (:func:`axes_rotation_widths`) at positions 0 .. ``count`` − 1, one
    table ``(count, D)`` per block in posenc's "sin_cos" layout [sin ω_0 p, ... | cos ω_0 p, ...] (float64),
    read from its own rotation of two probes: the pairs (1, 0) give (cos, sin), the pairs (0, 1) (−sin, cos).
    Raises ValueError where a block's two halves differ (not the [s | s] it repeats)."""
    head = module.attention_head_size
    ones = torch.zeros(1, 1, count, head)
    ones[..., 0::2] = 1.0
    positions = torch.arange(count)
    first, second = _rotate(module, ones, positions), _rotate(module, ones.roll(1, dims=-1), positions)
    cos, sin = torch.empty(count, head), torch.empty(count, head)
    cos[:, 0::2], sin[:, 1::2] = first[0, 0, :, 0::2], first[0, 0, :, 1::2]
    sin[:, 0::2], cos[:, 1::2] = -second[0, 0, :, 0::2], second[0, 0, :, 1::2]
    tables, start = [], 0
    for width in axes_rotation_widths(module):
        half = width // 2
        block = slice(start, start + width)
        for part in (sin[:, block], cos[:, block]):
            if not torch.equal(part[:, :half], part[:, half:]):
                raise ValueError(
                    f"its block of channels {start}..{start + width - 1} does not repeat [s | s]"
                )
        tables.append(torch.cat([sin[:, start : start + half], cos[:, start : start + half]], -1).double())
        start += width
    return tables


def prove_axes_rotation(module: nn.Module, exact: ExactAxesRotation) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module``'s sines and cosines (:func:`axes_rotation_rows`
    at positions 0 .. 63) against posenc's, each within what float32 code errs there, and of its rotation of
    random queries against ``exact``'s (within |x|·(that allowance + 2⁻²²) per channel); else why not."""
    count = 64
    try:
        tables = axes_rotation_rows(module, count)
    except Exception as error:  # its own code refuses the probe, or another layout
        return f"its {AXES_ROTATION_METHOD} is not read ({type(error).__name__}: {str(error)[:100]})"
    positions = np.arange(count, dtype=np.float64)
    worst, allowed = 0.0, 0.0
    for width, table in zip(exact.widths, tables, strict=True):
        frequencies = core.frequencies(width, base=AXES_ROTATION_BASE)
        ours = _encode_tensor(torch.arange(count), (*exact.checked[width], "float32"))
        half = width // 2
        for mine, want in ((table[:, :half], ours[:, :half]), (table[:, half:], ours[:, half:])):
            checked = within_rounding(mine, want, positions, frequencies)
            if isinstance(checked, float):
                named = f"base 10000, widths {list(exact.widths)}"
                return f"not V-JEPA 2's rotary ({named}) within float32 rounding ({checked:.3g})"
            worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    generator = torch.Generator().manual_seed(0)
    qk = torch.randn(2, 2, count, module.attention_head_size, generator=generator)
    steps = torch.arange(count)
    with torch.no_grad():
        mine = getattr(type(module), AXES_ROTATION_METHOD)(
            module, qk, (steps // 16, steps // 4 % 4, steps % 4)
        )
        ours = exact(qk, (steps // 16, steps // 4 % 4, steps % 4))
    bound = 2 * qk.abs().max() * (allowed + 2.0**-22)
    if mine.shape != ours.shape or not (mine - ours).abs().max() <= bound:
        return "its rotation of queries is not V-JEPA 2's pairs (−x_2j+1, x_2j) by [s | s] within float32"
    return worst, allowed


class ExactAxesRotation:
    """posenc's exact sines and cosines in place of V-JEPA 2's ``apply_rotary_embeddings`` method of
    ``module`` (set on the instance by :func:`posenc.torch.patch`; :data:`AXES_ROTATION_METHOD`): the same
    blocks, positions and rotation, each sine and cosine correctly rounded once to the queries' dtype."""

    def __init__(self, module: nn.Module, widths: tuple[int, ...]) -> None:
        # held (a cycle through the module's __dict__): a deep copy or a pickle of the model takes both
        self.module, self.widths = module, tuple(widths)
        self.checked = {
            w: core.Options.check(w, AXES_ROTATION_BASE, 0.0, 1.0, "sin_cos", "zero") for w in widths
        }

    def __call__(self, qk: torch.Tensor, pos_ids: tuple[torch.Tensor, ...]) -> torch.Tensor:
        fmt = _dtype_name(qk.dtype)
        parts, start = [], 0
        for width, positions in zip(self.widths, pos_ids, strict=True):
            block = qk[..., start : start + width]
            values = _encode_tensor(positions.to(torch.int64), (*self.checked[width], fmt))
            half = width // 2
            sin = torch.cat([values[..., :half]] * 2, dim=-1)
            cos = torch.cat([values[..., half:]] * 2, dim=-1)
            pairs = block.unflatten(-1, (-1, 2))
            turned = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
            parts.append(block * cos + turned * sin)
            start += width
        if start < qk.shape[-1]:
            parts.append(qk[..., start:])
        return torch.cat(parts, dim=-1)


# --- rotary tables of complex values computed at init (Qwen-Image's) -----------------------------------

#: Qwen-Image's form (``QwenEmbedRope`` and its kin: Qwen-Image's ControlNet, Nucleus-MoE, Qwen-Image 2.1;
#: Lumina 2's): ``theta``, ``axes_dim`` and complex tables cos + i·sin of p·ω_i (ω_i = theta^(−2i/D) on an
#: axis of D channels), computed at init and held as plain attributes: ``pos_freqs`` and ``neg_freqs`` (the
#: axes' columns side by side) or ``freqs`` / ``freqs_cis`` (one table per axis). Each row's position p is
#: read from its slowest frequency's angle and proven with every value of the row.
POLAR_PAIRS = ("pos_freqs", "neg_freqs")
POLAR_LISTS = ("freqs", "freqs_cis")


@dataclasses.dataclass(frozen=True)
class PolarBlock:
    """One axis' columns of one complex table: where (``name``, ``item`` of a list or None, ``columns``), the
    axis (``axis``, ``width`` D channels) and the positions of its rows."""

    name: str
    item: int | None
    columns: slice
    axis: int
    width: int
    positions: np.ndarray


@dataclasses.dataclass(frozen=True)
class PolarTables:
    """A module of Qwen-Image's form, read (:func:`read_polar_tables`): ``theta``, ``axes_dim`` and its
    tables' blocks."""

    theta: float
    axes_dim: tuple[int, ...]
    blocks: tuple[PolarBlock, ...]

    def values(self, module: nn.Module, block: PolarBlock) -> torch.Tensor:
        """``module``'s complex values of ``block`` ``(rows, width/2)``."""
        table = module.__dict__[block.name]
        return (table if block.item is None else table[block.item])[:, block.columns]


def _complex_table(value: Any, width: int) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and value.is_complex()
        and value.dim() == 2
        and value.shape[1] == width
    )


def _polar_positions(values: torch.Tensor, theta: float, width: int) -> np.ndarray | None:
    """The positions of a block's rows: its slowest frequency's angle over that frequency, rounded (None
    where a row is not of an integer position there, or the angle wraps)."""
    slowest = float(core.frequencies(width, base=theta)[-1])
    angles = torch.angle(values[:, -1].to(torch.complex128)).numpy()
    positions = np.round(angles / slowest)
    if not np.all(np.abs(positions * slowest) < math.pi) or not np.allclose(
        angles, positions * slowest, atol=1e-4
    ):
        return None
    return positions.astype(np.int64)


def read_polar_tables(module: nn.Module) -> PolarTables | str | None:
    """``module`` read as Qwen-Image's form (:data:`POLAR_PAIRS`, :data:`POLAR_LISTS`), else None; why not
    (a str) where it has the form's attributes and its rows are not of integer positions posenc reads."""
    theta = _number(getattr(module, "theta", None))
    axes = _even_widths(getattr(module, "axes_dim", None))
    if theta is None or theta <= 0 or axes is None:
        return None
    places: list[tuple[str, int | None, slice, int]] = []
    if all(_complex_table(module.__dict__.get(name), sum(axes) // 2) for name in POLAR_PAIRS):
        starts = np.cumsum((0, *(a // 2 for a in axes)))
        for name in POLAR_PAIRS:
            places += [(name, None, slice(starts[k], starts[k + 1]), k) for k in range(len(axes))]
    for name in POLAR_LISTS:
        listed = module.__dict__.get(name)
        one_per_axis = isinstance(listed, list | tuple) and len(listed) == len(axes)
        if one_per_axis and all(_complex_table(t, a // 2) for t, a in zip(listed, axes, strict=True)):
            places += [(name, k, slice(None), k) for k in range(len(axes))]
    if not places:
        return None
    blocks = []
    for name, item, columns, axis in places:
        table = module.__dict__[name]
        values = (table if item is None else table[item])[:, columns].detach().cpu()
        positions = _polar_positions(values, theta, axes[axis])
        if positions is None:
            return f"its complex tables ({name}) are not of integer positions posenc reads from their angles"
        blocks.append(PolarBlock(name, item, columns, axis, axes[axis], positions))
    return PolarTables(theta, axes, tuple(blocks))


def _exact_polar(block: PolarBlock, theta: float, device: torch.device) -> torch.Tensor:
    checked = core.Options.check(block.width, theta, 0.0, 1.0, "sin_cos", "zero")
    values = _encode_tensor(torch.from_numpy(block.positions), (*checked, "float32"))
    half = block.width // 2
    return torch.complex(values[:, half:], values[:, :half]).to(device)


def prove_polar_tables(module: nn.Module, reading: PolarTables) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module``'s tables against posenc's values, each within
    what float32 code errs at its position and frequency; else why not."""
    worst, allowed = 0.0, 0.0
    for block in reading.blocks:
        mine = reading.values(module, block).detach().cpu()
        ours = _exact_polar(block, reading.theta, torch.device("cpu"))
        frequencies = core.frequencies(block.width, base=reading.theta)
        positions = block.positions.astype(np.float64)
        for part in (torch.real, torch.imag):
            checked = within_rounding(part(mine), part(ours), positions, frequencies)
            if isinstance(checked, float):
                named = f"theta {reading.theta:g}, widths {list(reading.axes_dim)}"
                return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
            worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def polar_rows(module: nn.Module, reading: PolarTables, axis: int, count: int = ROWS) -> torch.Tensor | None:
    """``module``'s values on ``axis`` at positions 0 .. n − 1 (at most ``count``, as many as its first table
    of that axis holds from 0 on) as a table ``(n, D)`` in posenc's "sin_cos" layout; None where none holds
    position 0 first."""
    for block in reading.blocks:
        if block.axis != axis or not len(block.positions) or block.positions[0] != 0:
            continue
        run = np.flatnonzero(block.positions[:count] != np.arange(min(count, len(block.positions))))
        n = int(run[0]) if len(run) else min(count, len(block.positions))
        values = reading.values(module, block)[:n].detach().cpu()
        return torch.cat([values.imag, values.real], dim=-1).float()
    return None


def exact_polar_copy(module: nn.Module, reading: PolarTables) -> nn.Module:
    """A copy of ``module`` (its own class and code) whose tables hold posenc's values: each cos and sin
    the exact one rounded once to float32, at its rows' positions."""
    copy_ = object.__new__(type(module))
    copy_.__dict__.update(module.__dict__)
    for key, value in module.__dict__.items():  # its own registries (buffers, modules, hooks), not shared
        if key.startswith("_") and isinstance(value, dict | set):
            copy_.__dict__[key] = copy.copy(value)
    for name in {block.name for block in reading.blocks}:
        table = module.__dict__[name]
        copy_.__dict__[name] = (
            [t.clone() for t in table] if isinstance(table, list | tuple) else table.clone()
        )
    for block in reading.blocks:
        table = copy_.__dict__[block.name]
        target = table if block.item is None else table[block.item]
        target[:, block.columns] = _exact_polar(block, reading.theta, target.device).to(target.dtype)
    return copy_


# --- 1-D sinusoids computed by a method (Gemma 3n's audio timing signal, Grounding DINO's text positions) -

#: The methods read, by name: (their parameters after ``self``, the core options they compute — None: read
#: from their rows by identification). Gemma 3n's audio ``_get_timing_signal_1d_pos(position, dtype)``:
#: tensor2tensor's timing signal [sin | cos] of positions; Grounding DINO's encoder layer's
#: ``get_text_position_embeddings(text_features, text_position_embedding, text_position_ids)``: DETR's
#: interleaved sine of the token ids at 2π·10000^(−2i/d_model) (``encode_sinusoidal_position_embedding``).
SINUSOID_METHODS: dict[str, tuple[tuple[str, ...], dict[str, Any] | None]] = {
    "_get_timing_signal_1d_pos": (("position", "dtype"), None),
    # DiT's TimestepEmbedder (Z-Image, Bria-Fibo 2): a static ``timestep_embedding(t, dim, max_period)``
    "timestep_embedding": (("t", "dim", "max_period"), None),
    "get_text_position_embeddings": (
        ("text_features", "text_position_embedding", "text_position_ids"),
        {"base": 10000.0, "shift": 0.0, "scale": 2 * math.pi, "layout": "interleaved", "odd": "zero"},
    ),
}


def sinusoid_method(module: nn.Module) -> str | None:
    """The name of ``module``'s method of :data:`SINUSOID_METHODS` (its class's, with those parameters),
    else None."""
    for name, (parameters, _) in SINUSOID_METHODS.items():
        function = getattr(type(module), name, None)
        static = isinstance(inspect.getattr_static(type(module), name, None), staticmethod)
        try:
            names = (
                tuple(inspect.signature(function).parameters)[0 if static else 1 :]
                if callable(function)
                else ()
            )
        except (TypeError, ValueError):
            continue
        if name == "timestep_embedding" and not isinstance(
            getattr(module, "frequency_embedding_size", None), int
        ):
            continue
        if names == parameters and (
            name != "get_text_position_embeddings" or isinstance(module.d_model, int)
        ):
            return name
    return None


def method_rows(module: nn.Module, name: str, count: int = ROWS) -> torch.Tensor:
    """``module``'s values of its method ``name`` (:func:`sinusoid_method`; the instance's where posenc
    shadows it) at positions 0 .. ``count`` − 1, ``(count, width)`` float32."""
    method = getattr(module, name)
    positions = torch.arange(count)
    with torch.no_grad():
        if name == "_get_timing_signal_1d_pos":
            values = method(positions, torch.float32)
        elif name == "timestep_embedding":  # at its own width, t = 0 .. count − 1
            values = method(positions.float(), module.frequency_embedding_size)
        else:
            values = method(torch.zeros(1, count, module.d_model), None, positions[None])
    return values.reshape(count, values.shape[-1]).float()


class ExactSinusoidMethod:
    """posenc's exact values in place of a method of :data:`SINUSOID_METHODS` of ``module`` (set on the
    instance by :func:`posenc.torch.patch`), called as it is: the same positions, shapes and dtype, each
    value correctly rounded once (``options``: the core options it computes)."""

    def __init__(self, module: nn.Module, name: str, width: int, options: dict[str, Any]) -> None:
        # held (a cycle through the module's __dict__): a deep copy or a pickle of the model takes both
        self.module, self.name, self.width, self.options = module, name, int(width), dict(options)
        self._checked = core.Options.check(self.width, *(self.options[k] for k in CORE_OPTIONS))

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        given = dict(zip(SINUSOID_METHODS[self.name][0], args, strict=False)) | kwargs
        if self.name == "timestep_embedding":  # (t, dim, max_period) -> (N, dim) float32, any width and base
            width, base = int(given["dim"]), float(given.get("max_period", 10000))
            checked = core.Options.check(width, base, *(self.options[k] for k in CORE_OPTIONS[1:]))
            return _encode_tensor(given["t"].float(), (*checked, "float32"))
        if self.name == "_get_timing_signal_1d_pos":  # (position) -> (1, L, width) as its broadcast gives
            position = given["position"].float()
            values = _encode_tensor(position, (*self._checked, _dtype_name(given["dtype"])))
            return values[None] if position.dim() == 1 else values
        if given.get("text_position_embedding") is not None:
            return given["text_position_embedding"]
        features, ids = given["text_features"], given.get("text_position_ids")
        if ids is None:
            ids = torch.arange(features.shape[1], device=features.device).expand(features.shape[0], -1)
        return _encode_tensor(ids.to(torch.int64), (*self._checked, _dtype_name(features.dtype)))


def prove_sinusoid_method(rows: torch.Tensor, options: dict[str, Any]) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of a method's ``rows`` (positions 0, 1, ...) against the
    exact values of ``options``, each within what float32 code errs there; else why not."""
    width = rows.shape[1]
    checked = core.Options.check(width, *(options[k] for k in CORE_OPTIONS))
    ours = _encode_tensor(torch.arange(len(rows)), (*checked, "float32"))
    frequencies = core.frequencies(width, **{k: options[k] for k in ("base", "shift", "scale", "odd")})
    layout = "interleaved" if options["layout"] == "interleaved" else "half"
    checked_rows = within_rounding(rows, ours, np.arange(len(rows), dtype=np.float64), frequencies, layout)
    if isinstance(checked_rows, float):
        named = ", ".join(f"{k}={options[k]!r}" for k in ("base", "scale", "layout"))
        return f"not the sinusoid its form computes ({named}) within float32 rounding ({checked_rows:.3g})"
    return checked_rows


#: posenc's stand-ins for a method, shadowed on the instance by :func:`posenc.torch.patch` (and removed by
#: :func:`posenc.torch.unpatch`).
SHADOWS = (ExactRelative, ExactAxesRotation, ExactSinusoidMethod, ExactGridMethod)
