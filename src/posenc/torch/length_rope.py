"""A rotary that computes the (cos, sin) of a sequence's length in its forward (diffusers' MiniMax Music 3
``forward(seq_len, device)``, LongCat-AudioDiT ``forward(hidden_states, seq_len=None)``, holding no
frequencies; wav2vec2-conformer's and Wav2Vec2-BERT's ``forward(hidden_states)``, holding its ``inv_freq``):
what posenc reads of it, how it is proven, and its exact equivalent :class:`LengthRope`.

The formula: plain RoPE of positions 0 .. L − 1, ω_i = theta^(−2i/D), i < D/2, the halves layout
([cos ω_0 p .. cos ω_{D/2−1} p | the same again]), D its width (``rotary_dim`` or ``dim``), theta its
``theta`` or ``base``. L is ``seq_len`` (the "length" form) or the input's second axis unless ``seq_len`` is
given (the "states" form, whose values are cast to the input's dtype). The "stacked" form (wav2vec2's)
gives ``stack([cos, sin])`` of shape ``(2, L, 1, 1, D)`` in the input's dtype, L the input's second axis, D
and theta read from its ``inv_freq`` (theta^(−2i/D): :func:`posenc.torch.computed.inv_freq_base`); the
length of its last call it keeps (``cached_*``), which posenc's probes leave as they found it.

The proof (:func:`prove_length_rope`): its own (cos, sin) of lengths 1, 5 and 2048 against posenc's, shapes
included, each value within what float32 code errs at its position and frequency.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from .. import core, rope, validation
from ..errors import PosencTypeError
from .computed import Refusal, forward_names, inv_freq_base, probed, within_rounding
from .rotary import cos_sin

__all__ = ["FORMS", "LengthRope", "prove_length_rope", "read_length_rope"]

#: The forward signatures read: form -> its parameter names.
FORMS = {
    "length": ("seq_len", "device"),
    "states": ("hidden_states", "seq_len"),
    "stacked": ("hidden_states",),
}
#: The lengths a module of the form is proven at (the last: every position an audit reads).
PROBE_LENGTHS = (1, 5, 2048)


#: The dtypes posenc's cos/sin are computed in directly (each value rounded once to it).
_ROUNDED_ONCE = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


class LengthRope(nn.Module):
    """posenc's exact values in place of a rotary of a length (module docstring), called as the original
    is: ("length") ``(seq_len, device)`` -> ``(cos, sin)`` each ``(seq_len, width)`` float32 on ``device``;
    ("states") ``(hidden_states, seq_len=None)`` -> each ``(L, width)`` in the dtype of ``hidden_states``
    and on its device, L = ``seq_len`` or ``hidden_states.shape[1]``; ("stacked") ``(hidden_states)`` ->
    ``stack([cos, sin])`` ``(2, L, 1, 1, width)`` in its dtype and on its device, L =
    ``hidden_states.shape[1]``.

    >>> cos, sin = LengthRope(4, 100.0, "length")(2, "cpu")
    >>> sin
    tensor([[0.0000, 0.0000, 0.0000, 0.0000],
            [0.8415, 0.0998, 0.8415, 0.0998]])
    """

    def __init__(self, width: int, theta: float, form: str) -> None:
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"form: {form!r}; a rotary of a length is one of {', '.join(FORMS)}")
        self.width, self.theta, self.form = validation.integer("width", width, minimum=2), float(theta), form
        self.params = rope.RopeParameters(
            "default", head_dim=self.width, rotary_dim=self.width, base=self.theta
        )

    def forward(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        given = dict(zip(FORMS[self.form], args, strict=False)) | kwargs
        if self.form == "length":
            length, device, dtype = _length(given["seq_len"]), given.get("device"), torch.float32
        else:
            states = given["hidden_states"]
            if not (isinstance(states, torch.Tensor) and states.is_floating_point()):
                raise PosencTypeError(
                    f"hidden_states must be a floating-point tensor, whose dtype the (cos, sin) take; got "
                    f"{getattr(states, 'dtype', type(states).__name__)}: cast it, e.g. hidden_states.float()",
                    parameter="hidden_states",
                )
            length = given.get("seq_len")
            length = states.shape[1] if length is None else _length(length)
            device, dtype = states.device, states.dtype
        positions = torch.arange(length, device=device)
        rounded = dtype if dtype in _ROUNDED_ONCE else torch.float32  # a 16-bit type: once, not via float32
        cos, sin = cos_sin(positions, self.params, dtype=rounded)
        if self.form == "stacked":
            return torch.stack([cos, sin])[:, :, None, None, :].to(dtype)
        return cos.to(dtype), sin.to(dtype)

    def extra_repr(self) -> str:
        return f"width={self.width}, theta={self.theta:g}, form={self.form!r}"


def _length(value: Any) -> Any:
    """``seq_len`` checked: an integer >= 0 (2.7 is refused, not truncated to 2), or a traced torch.SymInt."""
    return value if isinstance(value, torch.SymInt) else validation.integer("seq_len", value, minimum=0)


def _number(module: nn.Module, *names: str) -> float | None:
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def read_length_rope(module: nn.Module) -> LengthRope | None:
    """posenc's equivalent of ``module`` where its forward has a form of :data:`FORMS`, it holds no buffer
    and names an even width (``rotary_dim`` or ``dim``) and a theta (``theta`` or ``base``) > 1; else None.
    Whether it computes what they say is :func:`prove_length_rope`'s to tell."""
    if isinstance(module, LengthRope):  # posenc's own, patched in
        return module
    names = forward_names(module)
    form = next((key for key, want in FORMS.items() if names == want), None)
    if form == "stacked":  # a (hidden_states) rotary: its frequencies held, theta^(−2i/D), (2, L, 1, 1, D)
        inv_freq = dict(module.named_buffers(recurse=False)).get("inv_freq")
        theta = inv_freq_base(inv_freq)
        if theta is None or theta <= 1:
            return None
        width = 2 * inv_freq.numel()
        pair = probed(lambda: _call(module, form, 3))
        shapes = isinstance(pair, tuple) and all(getattr(t, "shape", None) == (3, width) for t in pair)
        return LengthRope(width, theta, form) if shapes else None  # another form (CLVP's): not this one
    if form is None or any(True for _ in module.buffers(recurse=False)):
        return None
    width, theta = _number(module, "rotary_dim", "dim"), _number(module, "theta", "base")
    if width is None or theta is None or width != int(width) or width < 2 or int(width) % 2 or theta <= 1:
        return None
    return LengthRope(int(width), theta, form)


def _call(module: nn.Module, form: str, length: int) -> Any:
    """``module``'s (cos, sin) of ``length`` positions (the "stacked" form's unstacked, each ``(L, D)``; the
    length it keeps, ``cached_*``, put back after)."""
    if form == "length":
        return module(length, torch.device("cpu"))
    if form == "states":
        return module(torch.zeros(1, length, 1))
    kept = {k: v for k, v in vars(module).items() if k.startswith("cached")}
    try:
        out = module(torch.zeros(1, length, 1))
    finally:
        vars(module).update(kept)
    stacked = isinstance(out, torch.Tensor) and out.dim() == 5 and out.shape[0] == 2
    return (out[0, :, 0, 0], out[1, :, 0, 0]) if stacked and out.shape[2:4] == (1, 1) else out


def prove_length_rope(module: nn.Module, exact: LengthRope) -> tuple[float, float] | str:
    """(largest difference, largest allowance) of ``module`` against ``exact`` (:func:`read_length_rope`)
    at :data:`PROBE_LENGTHS`; else why not ("its forward ...": a form posenc does not read; "not the rotary
    ...": values other than its attributes name)."""
    theta = core.frequencies(exact.width, base=exact.theta)
    worst, allowed = 0.0, 0.0
    for length in PROBE_LENGTHS:
        mine = probed(lambda: _call(module, exact.form, length))  # noqa: B023 (called here)
        if isinstance(mine, Refusal):
            return mine
        pair = isinstance(mine, tuple | list) and len(mine) == 2
        if not (pair and all(isinstance(t, torch.Tensor) for t in mine)):
            return f"its forward returns {type(mine).__name__}, not (cos, sin)"
        ours = _call(exact, exact.form, length)
        positions = np.arange(length, dtype=np.float64)
        for name, a, b in zip(("cos", "sin"), mine, ours, strict=True):
            if a.shape != b.shape:
                return f"its {name} has shape {tuple(a.shape)}, not {tuple(b.shape)}"
            if length == 1:  # position 0 alone: cos 1 and sin 0, exactly
                if not torch.equal(a.to(b.dtype), b):
                    return f"not the rotary its attributes name: its {name} at position 0 is not {b[0, 0]:g}"
                continue
            checked = within_rounding(a, b, positions, theta, "half")
            if isinstance(checked, float):
                named = f"theta {exact.theta:g}, width {exact.width}, halves"
                return f"not the rotary its attributes name ({named}) within float32 rounding ({checked:.3g})"
            worst, allowed = max(worst, checked[0]), max(allowed, checked[1])
    return worst, allowed


def rows(module: nn.Module, exact: LengthRope, positions: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``module``'s (cos, sin) at ``positions`` (of the length that reaches them), each
    ``(1, len(positions), width)``."""
    positions = torch.as_tensor(positions, dtype=torch.int64).reshape(-1)
    length = int(positions.max()) + 1 if positions.numel() else 1
    with torch.no_grad():
        cos, sin = _call(module, exact.form, length)
    return cos[positions][None], sin[positions][None]
