"""The HTTP server of ``posenc explore``: the standard library's ThreadingHTTPServer, the endpoints of
:mod:`posenc.explore.api` as JSON, and the page's files from the package's ``static/`` folder.

Every answer to ``/api...`` is JSON (``application/json``); a refused request is HTTP 400 with
``{"error": one line, "parameter": the name to change}``, an unknown path 404 with
``{"error": "no such endpoint or file: /x", "parameter": "path"}``, and an error of posenc's own (a bug)
500 with its message: the server answers the next request whatever a request held. A request body (POST)
needs its Content-Length, at most :data:`~posenc.explore.api.MAX_UPLOAD` bytes: a larger one is refused
before a byte of it is read.

Files are served from ``static/`` only: the path's parts are checked (no ``..``, no empty or hidden part,
no backslash, no NUL), the file must be a regular file (no symlink on the way) of a known kind (html, js,
css, png, svg), and its resolved path must lie inside the folder; anything else is 404. When bound to a
loopback address, requests must name a loopback host (``Host: 127.0.0.1:PORT``, ``localhost``): a page of
another site that points its own name at 127.0.0.1 (DNS rebinding) is refused.
"""

from __future__ import annotations

import http.server
import json
import math
import os
import socket
import stat
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

import numpy as np

from . import api

__all__ = ["ROUTES", "STATIC", "make_server", "serve", "url_of"]

#: The folder of the page's files.
STATIC = Path(__file__).resolve().parent / "static"
#: The content type of each kind of file the server sends.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
#: The page may load only its own files and ask only this server.
CONTENT_SECURITY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)
#: Seconds a connection may stay silent (a client that sends half a body does not hold a thread forever).
TIMEOUT = 60

Get = Callable[[dict[str, str]], dict[str, Any]]
Post = Callable[[dict[str, str], bytes], dict[str, Any]]
#: (method, path) -> the endpoint: a GET takes the query's parameters, a POST also the body.
ROUTES: dict[tuple[str, str], Get | Post] = {
    ("GET", "/api"): api.index,
    ("GET", "/api/table"): api.table,
    ("GET", "/api/value"): api.value,
    ("GET", "/api/sinusoids"): api.sinusoids,
    ("GET", "/api/dot"): api.dot,
    ("GET", "/api/criteria"): api.criteria,
    ("GET", "/api/rope"): api.rope_lines,
    ("POST", "/api/rope"): api.rope_lines,
    ("POST", "/api/identify"): api.identify,
}
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


class Handler(http.server.BaseHTTPRequestHandler):
    """One request: an endpoint of :data:`ROUTES`, a file of :data:`STATIC`, or a 404."""

    server_version = "posenc-explore"
    sys_version = ""
    timeout = TIMEOUT

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the terminal shows the URL line only
        pass

    def _answer(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        try:
            if not self._host_allowed():
                raise api.BadRequest(
                    "host",
                    f"Host {self.headers.get('Host')!r} is not this server's; open {url_of(self.server)}",
                )
            if method == "GET" and not path.startswith("/api"):
                self._static(path)
                return
            endpoint = ROUTES.get((method, path))
            if endpoint is None:
                other = "POST" if method == "GET" else "GET"
                if (other, path) in ROUTES:
                    raise api.BadRequest("method", f"{path} takes {other}, not {method}")
                self._send_json(404, _not_found(path))
                return
            params = _parameters(query)
            body = self._body(path) if method == "POST" else None
            result = endpoint(params) if body is None else endpoint(params, body)  # type: ignore[call-arg]
            self._send_json(200, result)
        except api.BadRequest as refused:
            self._send_json(400, {"error": str(refused), "parameter": refused.parameter})
        except (ConnectionError, TimeoutError):  # the client went away: nothing to answer
            self.close_connection = True
        except Exception as error:  # a bug of posenc's: said, and the server goes on
            message = " ".join(f"{type(error).__name__}: {error}".split())
            self._send_json(500, {"error": f"internal error: {message}", "parameter": None})

    def _host_allowed(self) -> bool:
        """Whether the Host header names this server, when it listens on a loopback address only."""
        if not _is_loopback(str(self.server.server_address[0])):
            return True
        host = self.headers.get("Host")
        if host is None:
            return True  # HTTP/1.0 without Host: no browser sends that
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.lower() in _LOOPBACK_NAMES or name.startswith("127.")

    def _body(self, path: str) -> bytes:
        """The request's body: its Content-Length bytes, at most MAX_UPLOAD (a larger body is refused
        unread, and the connection closed)."""
        parameter = "config" if path == "/api/rope" else "file"
        limit = api.MAX_UPLOAD
        length = self.headers.get("Content-Length")
        try:
            size = int(length) if length is not None else -1
        except ValueError:
            size = -1
        if size < 0:
            self.close_connection = True
            raise api.BadRequest(
                parameter, f"{path} needs the {parameter} as the request body, with its Content-Length"
            )
        if size > limit:  # read no more than limit + 1 bytes of it, a block at a time, and drop them
            self.close_connection = True
            left = limit + 1
            while left > 0 and (block := self.rfile.read(min(left, 1 << 16))):
                left -= len(block)
            raise api.BadRequest(
                parameter, f"the {parameter} is {size} bytes; at most MAX_UPLOAD = {limit} bytes are taken"
            )
        return self.rfile.read(size)

    def _static(self, path: str) -> None:
        """The file ``path`` names under STATIC (``/`` is index.html), or a 404."""
        if path == "/":
            relative = "index.html"
        elif path.startswith("/static/"):
            try:
                relative = unquote(path.removeprefix("/static/"), errors="strict")
            except UnicodeDecodeError:
                relative = ""  # no file has such a name
        else:
            self._send_json(404, _not_found(path))
            return
        file = _static_file(relative)
        if file is None:
            self._send_json(404, _not_found(path))
            return
        data = file.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", CONTENT_TYPES[file.suffix])
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        if file.suffix == ".html":
            self.send_header("Content-Security-Policy", CONTENT_SECURITY)
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, document: dict[str, Any]) -> None:
        data = json.dumps(_plain(document), allow_nan=False, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(data)


def _static_file(relative: str) -> Path | None:
    """The regular file ``relative`` names inside STATIC, or None: no ``..``, ``.``, empty or hidden part,
    no backslash or NUL, no symlink anywhere on the way, a known suffix, and inside the folder once
    resolved."""
    parts = relative.split("/")
    if any(not part or part.startswith(".") or "\\" in part or "\0" in part for part in parts):
        return None
    file = STATIC.joinpath(*parts)
    if file.suffix not in CONTENT_TYPES:
        return None
    try:
        real = file.resolve(strict=True)
        if real != file or not real.is_relative_to(STATIC) or not stat.S_ISREG(os.lstat(real).st_mode):
            return None
    except (OSError, RuntimeError, ValueError):
        return None
    return real


def _not_found(path: str) -> dict[str, str]:
    return {"error": f"no such endpoint or file: {path}", "parameter": "path"}


def _parameters(query: str) -> dict[str, str]:
    """The query's parameters; one given twice is refused."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False, errors="strict")
    except (UnicodeDecodeError, ValueError) as error:
        raise api.BadRequest("query", f"the query cannot be read: {error}") from None
    params: dict[str, str] = {}
    for name, text in pairs:
        if name in params:
            raise api.BadRequest(name, f"{name} is given twice; give it once")
        params[name] = text
    return params


def _plain(value: Any) -> Any:
    """``value`` with NumPy arrays and scalars as lists and Python numbers, and NaN / infinity as None
    (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist()) if value.dtype.kind in "biu" else _plain(value.astype(float).tolist())
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _is_loopback(host: str) -> bool:
    return host in _LOOPBACK_NAMES or host.startswith("127.")


class Server(http.server.ThreadingHTTPServer):
    """The server: a thread per request (daemon threads: Ctrl-C does not wait for them)."""

    daemon_threads = True
    block_on_close = False


class _Server6(Server):
    address_family = socket.AF_INET6


def make_server(host: str, port: int) -> Server:
    """A server bound to ``host``:``port`` (port 0: any free port; ``server.server_address`` says which),
    not yet serving: call ``serve_forever()`` (in a thread, for a test), then ``shutdown()`` and
    ``server_close()``. An OSError when the port is taken."""
    kind = _Server6 if ":" in host else Server
    return kind((host.strip("[]"), port), Handler)


def url_of(server: http.server.HTTPServer) -> str:
    """``http://HOST:PORT/`` of a bound server (an IPv6 host in brackets)."""
    host, port = server.server_address[:2]
    host = str(host)
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    open_browser: bool = True,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``posenc explore`` on ``host``:``port`` until interrupted (Ctrl-C: the KeyboardInterrupt
    propagates, after the server is closed).

    ``ready(url)`` is called once the port is bound (default: print the URL line); then the browser is
    opened on the URL (``webbrowser.open``, in a thread: a slow browser start does not delay the server)
    unless ``open_browser`` is false. A port that cannot be bound (in use, or not allowed) raises
    ValueError naming it.
    """
    try:
        server = make_server(host, port)
    except OSError as error:
        raise ValueError(
            f"cannot serve on {host}:{port}: {error.strerror or error}; pass another port (0: any free port)"
        ) from None
    try:
        url = url_of(server)
        (ready or (lambda url: print(f"posenc explore: serving on {url} (Ctrl-C stops)", flush=True)))(url)
        if open_browser:
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
        server.serve_forever()
    finally:
        server.server_close()
