"""``posenc explore``: serve the browser view of the encoding on this machine (:mod:`posenc.explore`)
until Ctrl-C."""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit

from .arguments import integer
from .errors import PROG, CliError

NAME = "explore"
HELP = "explore the encoding in the browser: table, values, dot products, criteria, RoPE, identify"
DESCRIPTION = """\
Serve an interactive page on this machine and open it in the browser: the table as a heat map with the
exact value of each cell, collisions (posenc's against the usual code's), sinusoids per column, the
dot-product matrix and its closed form, the criteria of posenc check, RoPE wavelengths per scaling type
(or of a pasted config.json), and the verdict and audit of a dropped .npy, .safetensors or .pt file."""
EPILOG = """\
The server listens on 127.0.0.1 (this machine only) unless --host says otherwise, needs no network, runs
no code from an uploaded file (.pt files are read with torch.load(weights_only=True)) and serves only the
page's own files. Ctrl-C stops it (exit status 130, as for every posenc command); a port in use is one
error line and exit status 2. The guide: docs/explore.md.

examples:
  posenc explore                          http://127.0.0.1:8765/, opened in the browser
  posenc explore --port 0 --no-browser    any free port; open the printed URL yourself
"""

#: The default port (``--port 0``: any free port).
PORT = 8765
HOST = "127.0.0.1"


def add_arguments(sub: argparse.ArgumentParser) -> None:
    """The options of ``posenc explore [--port N] [--host HOST] [--no-browser]``."""
    sub.add_argument(
        "--port", type=integer, default=PORT, help=f"the port to listen on (default {PORT}; 0: any free port)"
    )
    sub.add_argument(
        "--host",
        default=HOST,
        help=f"the address to listen on (default {HOST}: this machine only; another is reachable from the "
        "network)",
    )
    sub.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")


def run(args: argparse.Namespace) -> int:
    """``posenc explore``: serve until Ctrl-C (which main turns into ``posenc: interrupted``, exit 130)."""
    from .. import explore  # imported when used: the other commands start without it

    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be from 0 to 65535 (0: any free port); got {args.port}")
    host = args.host.strip()
    if not host:
        raise CliError("--host must name an address, such as 127.0.0.1 (this machine only)")

    def ready(url: str) -> None:
        bound = urlsplit(url).hostname or host  # the address bound, as the server checks it (127.1: loopback)
        if not explore.server.is_loopback(bound):  # 127.0.0.0/8 or ::1
            sys.stderr.write(
                f"{PROG} explore: warning: listening on {bound}, the server is reachable from the network, "
                "and it checks no Host name there: a web page you visit may reach it through a name that "
                f"resolves to this machine (DNS rebinding); --host {HOST} keeps it on this machine\n"
            )
            sys.stderr.flush()
        sys.stdout.write(f"{PROG} explore: serving on {url} (Ctrl-C stops)\n")
        sys.stdout.flush()

    try:
        explore.serve(host, args.port, open_browser=not args.no_browser, ready=ready)
    except ValueError as error:  # the port cannot be bound
        raise CliError(str(error)) from None
    return 0
