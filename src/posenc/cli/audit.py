"""``posenc audit TARGET``: measure someone's positional encoding against the exact one, with
:func:`posenc.audit` (exit status 1 when it is not within the tolerance)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from .arguments import as_flags, integer

NAME = "audit"
HELP = "measure a positional encoding (a checkpoint, or file.py:Name) against the exact one"
DESCRIPTION = """\
Measure a positional encoding against posenc's exact values: the variant (identified when not
given), the largest error per band of positions in absolute terms and in ulps of its dtype, the
distinct rows, the first position past 1e-3 / 1e-2 / 0.1, NaN rows, and findings in plain words
(positions rounded to bfloat16, angles formed in float32, frequencies cast, a table stored in
bfloat16, sin and cos swapped, a length cliff, an offset of one position, a wrong shift), each
with its evidence and a fix."""
EPILOG = """\
TARGET is a checkpoint (.npy, .pt/.pth, .safetensors; --key names the tensor of a state dict) or
path/to/file.py:Name, a function of positions (NumPy, torch or JAX) or a class (a torch module that
adds encodings, holds a table or an inv_freq, built with --d-model when it takes arguments).

The target's own code runs inside the audit: whatever it raises (SystemExit included), a call that
returns something other than an encoding, or an audit that takes longer than --timeout SECONDS (default
600; 0: no limit) ends it with one line that names the target, and exit status 2.

exit status: 0 when the error is within --tol (default: correctly rounded, i.e. equal to posenc's
values; 1 ulp in float64), 1 when not, 2 on bad input or a target that fails.

examples:
  posenc audit pe.npy
  posenc audit model.safetensors --key model.encoder.embed_positions.weight
  posenc audit my_model.py:PositionalEncoding --d-model 512 --positions 0:65536 --html audit.html
  posenc audit my_model.py:encode --d-model 512 --tol 1e-4 --preset paper
"""


#: Seconds an audit may take by default (the target's code included): generous, yet a target that never
#: returns does not hang a script or a CI job for ever.
DEFAULT_TIMEOUT = 600.0


def _seconds(text: str) -> float:
    """argparse type of --timeout: seconds >= 0 (0: no limit)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0 (0: no limit); got {text!r}")
    return value


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The arguments of ``posenc audit TARGET [options]``."""
    sub.add_argument("target", metavar="TARGET", help="a checkpoint file, or path/to/file.py:Name")
    sub.add_argument("--d-model", type=integer, help="the width, for a class or function that needs it")
    sub.add_argument(
        "--positions", metavar="A:B", help="audit positions A..B-1 (default: all it holds, or 2**31)"
    )
    sub.add_argument("--dtype", help="judge the values in this dtype (default: the target's own)")
    sub.add_argument("--preset", help="the variant it claims to be (default: identified)")
    sub.add_argument("--key", help="the tensor's name inside a state dict or safetensors file")
    sub.add_argument(
        "--tol", help="the largest error allowed: 1e-6 (absolute) or 2ulp (default: correctly rounded)"
    )
    sub.add_argument(
        "--samples", type=integer, default=4096, help="positions measured per band (default 4096)"
    )
    sub.add_argument(
        "--timeout",
        type=_seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up when the audit takes longer (default {DEFAULT_TIMEOUT:g}; 0: no limit)",
    )
    sub.add_argument("--html", metavar="FILE", help="also write the report as one self-contained HTML file")
    sub.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    """``posenc audit``: print the report; 0 when within the tolerance, else 1."""
    from ..auditor import audit

    names = ("d_model", "positions", "dtype", "options", "key", "tol", "samples", "timeout")
    try:
        hints = {name: getattr(args, "preset" if name == "options" else name) for name in names}
        hints["timeout"] = hints["timeout"] or None  # 0: no limit
        report = audit(args.target, **hints)
    except (ValueError, TypeError) as error:
        _end_with(2)
        text = as_flags(str(error), *names).replace("--options", "--preset")
        raise type(error)(text) from None
    except BaseException as error:  # Ctrl-C (130), SIGTERM (143): main reports it, with that exit status
        signum = getattr(error, "signum", None)
        _end_with(
            130 if isinstance(error, KeyboardInterrupt) else 128 + signum if isinstance(signum, int) else 2
        )
        raise
    if args.json:
        json.dump(report.as_dict(), sys.stdout, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(report.as_text() + "\n")
    if args.html:
        report.to_html(args.html)
    return 0 if report.passed else 1


def _end_with(code: int) -> None:
    """After an audit given up on (--timeout, Ctrl-C) whose thread still runs the target: exit with
    ``code`` at once when the interpreter ends, not through a finalization that could abort the process."""
    from ..auditor import guard

    if guard.still_running():
        guard.exit_at_end_if_still_running(code)
