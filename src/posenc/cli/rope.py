"""``posenc rope CONFIG``: print or save a model's exact rotary cos/sin table (:func:`posenc.rope.cos_sin`),
one row per position, in the formats of ``posenc table``."""

from __future__ import annotations

import argparse

import numpy as np

from .. import rope, validation
from ..rope.arrays import LAYOUTS
from ..rope.tables import fits_in_memory
from .arguments import MAX_DIGITS, add_output_options, flags, integer, not_an_input, one_of, worded
from .errors import CliError
from .formats import TEXT_DIGITS, Grid, write_csv, write_json, write_text
from .table import _open_output

NAME = "rope"
HELP = "print or save a model's exact rotary (RoPE) cos/sin table"
DESCRIPTION = """\
Print or save posenc.rope.cos_sin for the rotary parameters of CONFIG (a Hugging Face
config.json, or the folder holding one): one row per position, correctly rounded to --dtype
(float64: within 1 ulp of the exact value)."""
EPILOG = """\
columns:
  'cos3 θ1' is column 3 of the cos table, cos(pos · θ_1) · attention_scaling; the sin columns follow.
  layout half (Hugging Face, GPT-NeoX): [θ0 .. θn-1, θ0 .. θn-1];
  interleaved (GPT-J, Meta): [θ0, θ0, θ1, θ1, ...].
  Each value is the exact real correctly rounded once to --dtype (float64: within 1 ulp of it).

formats:
  text, csv, json as 'posenc table'; npy stores an array of shape (2, positions, rotary_dim): cos, then sin.

examples:
  posenc rope config.json --positions 0:8                 a model's config.json (or its folder)
  posenc rope config.json --positions 131000:131008 --dtype bfloat16
  posenc rope config.json --positions 0:4096 --format npy --output rope.npy
  posenc rope gemma3/config.json --layer-type sliding_attention   RoPE parameters per layer type
"""


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc rope CONFIG [options]``."""
    sub.add_argument("config", metavar="CONFIG", help="a Hugging Face config.json, or the folder holding one")
    sub.add_argument(
        "--positions",
        default="0:8",
        metavar="A:B",
        help="positions A .. B-1, |position| < 2**31 (default: 0:8)",
    )
    sub.add_argument(
        "--layout", default="half", metavar=one_of(LAYOUTS), help="cos/sin layout (default: half)"
    )
    sub.add_argument("--seq-len", type=integer, help="the sequence length of dynamic/longrope scaling")
    sub.add_argument(
        "--layer-type",
        metavar="NAME",
        help="the layer type whose RoPE to print, for a config with RoPE parameters per layer type "
        "(Gemma 3: full_attention, sliding_attention)",
    )
    add_output_options(sub, digits_help=f"decimals printed, 0 to {MAX_DIGITS}")


def positions_range(text: str) -> range:
    """``A:B`` as range(A, B) (B > A, both within ±2**31)."""
    first, colon, last = text.partition(":")
    try:
        start, stop = int(first), int(last)
    except ValueError:
        colon = ""
    if not colon or stop <= start:
        raise CliError(f"--positions must be A:B with integers A < B (positions A .. B-1); got {text!r}")
    for value in (start, stop - 1):
        validation.position_int("--positions", value)
    return range(start, stop)


#: :func:`posenc.rope.config`'s parameters as the command names them: CONFIG is the positional argument.
_FLAGS = flags("layer_type", "seq_len", cfg="")


def _in_our_words(error: BaseException, layer_type: str | None) -> str:
    """A :func:`posenc.rope.config` error in the words of the command line: a choice of layer types
    (``error.choices``) as ``--layer-type NAME``, its fix (``error.hint``) for this command."""
    if getattr(error, "parameter", None) == "layer_type" and getattr(error, "choices", None):
        got = "" if layer_type is None else f"; got --layer-type {layer_type!r}"
        listed = ", ".join(map(repr, error.choices))
        nested = f"the config's RoPE dict is nested per layer type ({listed})"
        return f"{nested}{got}: pick one with --layer-type NAME"
    text = worded(error, _FLAGS)
    hint = getattr(error, "hint", None)
    return text.removesuffix(hint) + "leave it out" if hint and text.endswith(hint) else text


def run(args: argparse.Namespace) -> None:
    """``posenc rope``: read the config, compute the cos/sin of the positions, write them."""
    if args.format == "npy" and args.output is None:
        raise CliError("--format npy writes binary data; name a file with --output FILE")
    if args.digits is not None and not 0 <= args.digits <= MAX_DIGITS:
        raise CliError(f"--digits must be an integer from 0 to {MAX_DIGITS}; got {args.digits}")
    not_an_input(args.output, "--output", args.config)
    try:
        params = rope.config(args.config, layer_type=args.layer_type)
    except ValueError as error:  # the library's cfg= is CONFIG here: the path alone names it
        raise CliError(_in_our_words(error, args.layer_type)) from None
    positions = positions_range(args.positions)
    fewer = "ask for fewer positions (--positions A:B), in as many runs as it takes"
    fits_in_memory((len(positions),), params.rotary_dim, validation.dtype(args.dtype), fewer)
    try:
        cos, sin = rope.cos_sin(
            np.arange(positions.start, positions.stop),
            params,
            dtype=args.dtype,
            layout=args.layout,
            seq_len=args.seq_len,
        )
    except ValueError as error:  # --seq-len, a position the rope type refuses: in the command's words
        raise CliError(worded(error, _FLAGS)) from None
    if args.format == "npy":
        _write_npy(args.output, np.stack([cos, sin]))
        return
    n = params.rotary_dim // 2
    frequency = [j % n if args.layout == "half" else j // 2 for j in range(params.rotary_dim)]
    labels = [f"{name}{j} θ{i}" for name in ("cos", "sin") for j, i in enumerate(frequency)]
    grid = Grid("pos", positions, labels, np.concatenate([cos, sin], -1))
    with _open_output(args.output, binary=False) as stream:
        if args.format == "text":
            write_text(stream, grid, TEXT_DIGITS if args.digits is None else args.digits)
        elif args.format == "csv":
            write_csv(stream, grid, args.digits)
        else:
            meta = {
                "rope_type": params.rope_type,
                "rotary_dim": params.rotary_dim,
                "base": params.base,
                "attention_scaling": rope.attention_scaling(params, seq_len=args.seq_len),
                "layout": args.layout,
                "dtype": args.dtype,
            }
            write_json(stream, grid, meta, args.digits)


def _write_npy(path: str, array: np.ndarray) -> None:
    """``np.save(path, array)``, byte for byte, written atomically: the header, then the bytes through the
    file object's write (np.save's ``tofile`` reports a full disk without its errno or the file's name)."""
    descr = np.lib.format.dtype_to_descr(array.dtype)
    header = {"descr": descr, "fortran_order": False, "shape": array.shape}
    with _open_output(path, binary=True) as stream:
        np.lib.format.write_array_header_1_0(stream, header)
        stream.write(np.ascontiguousarray(array).view(np.uint8).data)
