"""The default options of every entry point (the paper's encoding, Vaswani et al. 2017 §3.5): one owner.

Functions, modules and the command line take these as their defaults; validation lives in
:mod:`posenc.validation` and the validated options object in :mod:`posenc.core`.
"""

from __future__ import annotations

BASE = 10000.0  # ω_i = BASE ** (-i / (d_model // 2 - SHIFT))
SHIFT = 0
SCALE = 1.0  # positions are multiplied by SCALE (diffusers' "scale", timestep embeddings)
LAYOUT = "interleaved"  # one of posenc.layouts.LAYOUTS
ODD = "zero"  # an odd d_model gets a zero last column
OPTIONS = {"base": BASE, "shift": SHIFT, "scale": SCALE, "layout": LAYOUT, "odd": ODD}

__all__ = ["BASE", "LAYOUT", "ODD", "OPTIONS", "SCALE", "SHIFT"]
