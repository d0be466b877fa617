"""The HTTP server of ``posenc explore``: the standard library's ThreadingHTTPServer, the endpoints of
:mod:`posenc.explore.api` as JSON, and the page's files from the package's ``static/`` folder.

Every answer to ``/api...`` is JSON (``application/json``), and so is what the standard library refuses
before a route is reached (a malformed request line, an unknown method: ``"parameter": "request"``); a
refused request is HTTP 400 with
``{"error": one line, "parameter": the name to change}`` (403 for a request from another origin), an
unknown path 404 with ``{"error": "no such endpoint or file: /x", "parameter": "path"}``, and an error of
posenc's own (a bug) 500 with its message: the server answers the next request whatever a request held,
and a client that resets its connection or goes away is let go silently (no traceback on the terminal).

The trust boundaries, checked in this order on every request before anything else is done:

* **Host** (against DNS rebinding: a page of another site that points its own name at 127.0.0.1). A
  request needs exactly one Host header (HTTP/1.1 requires it; a request without one is refused). While
  the server listens on a loopback address, the Host must be a loopback IP literal (``127.0.0.0/8`` as
  four decimal numbers, ``[::1]`` in brackets, parsed by :mod:`ipaddress`) or exactly ``localhost`` (any
  case), with no port or this server's own port: ``127.attacker.example``, ``127.0.0.1.nip.io``,
  ``127.0.0.1@evil.com``, ``localhost.``, ``2130706433``, ``0x7f.1``, ``[::ffff:127.0.0.1]`` and another
  port are 400 naming ``host``. On another address (``--host 0.0.0.0``, the user's choice, which the
  command warns about) the Host is only checked to be one well-formed name with an optional port.
* **Origin**, on every POST and every GET of ``/api`` (another site cannot read a GET's answer — no CORS
  header — but an ``<img>`` of its URL would make the server compute: an ``/api/rope`` of a wide head takes
  seconds): an Origin header, when present, must be the origin the request is addressed to, exactly
  ``http://`` + the Host's name + this server's port (``http://127.0.0.1:PORT``, ``http://localhost:PORT``,
  ``http://[::1]:PORT`` as the page was opened); any other (another site, another port, https, ``null``,
  two Origin headers) is 403 naming ``origin``, as is a ``Sec-Fetch-Site`` other than ``same-origin`` (or
  ``none``). A request without Origin (curl, urllib) is served. The server answers no CORS preflight
  (OPTIONS is 501).
* **Body type**: a POST carries the type its route documents, ``Content-Type: application/json`` for
  ``/api/rope`` (a JSON object: a config.json's contents) and ``application/octet-stream`` for
  ``/api/identify`` (the file's bytes); neither can be sent from another origin without a preflight, and
  any other type (``text/plain``, a form) is 400 naming ``content-type``. The body needs its
  Content-Length, at most :data:`~posenc.explore.api.MAX_UPLOAD` bytes (a larger one is refused before a
  byte of it is used). What :mod:`~posenc.explore.api` then refuses: a body that is not a JSON object (a
  string, which ``posenc.rope.config`` would read as a path, a list, a number, null), nesting deeper than
  :data:`~posenc.explore.api.MAX_JSON_DEPTH`; nothing a request sends is ever used as a path (the
  ``filename`` of an upload picks the reader by its suffix only).

At most :data:`MAX_CONNECTIONS` connections are served at once (one thread each; one more is answered 503
and closed), and each may stay silent :data:`TIMEOUT` seconds.

Files are served from ``static/`` only: the path's parts are checked (no ``..``, no empty or hidden part,
no backslash, no NUL), the file must be a regular file (no symlink on the way) of a known kind (html, js,
css, png, svg), and its resolved path must lie inside the folder; anything else is 404.
"""

from __future__ import annotations

import errno
import http.server
import ipaddress
import json
import math
import os
import re
import socket
import stat
import sys
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np

from . import api

__all__ = ["ROUTES", "STATIC", "is_loopback", "make_server", "serve", "url_of"]

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
#: Connections served at once; one more is answered 503 and closed at once (a client that opens many and
#: sends nothing, or one byte a minute, holds at most this many threads).
MAX_CONNECTIONS = 32

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
#: The Content-Type each POST route takes (neither is a CORS-simple type: no page of another origin can send
#: it without a preflight, which the server never answers).
BODY_TYPES = {"/api/rope": "application/json", "/api/identify": "application/octet-stream"}
#: A Host header (or an origin's host): a name without ``[]:@/``, space or control, or an IPv6 literal in
#: brackets (no zone), with an optional port of decimal digits.
_AUTHORITY = re.compile(
    r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<name>[^\[\]:@/\\\s\x00-\x1f\x7f]+))(?::(?P<port>[0-9]{1,5}))?"
)
#: An origin as browsers send it: ``scheme://host[:port]``, nothing after.
_ORIGIN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)")
_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")
#: Sec-Fetch-Site values of a request the page itself sends (``none``: the user's own action).
_OWN_SITES = ("same-origin", "none")


class Forbidden(api.BadRequest):
    """A request from another origin: 403."""

    status = 403


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

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What the standard library refuses before a route is reached (a malformed request line, an
        unsupported method or HTTP version, a line too long), answered as every refusal is: JSON naming
        ``request``, the connection then closed (the library's own answer is an HTML page)."""
        short = self.responses.get(code, ("error", ""))[0]
        document = {"error": f"{code} {message or short}", "parameter": "request"}
        data = json.dumps(document, ensure_ascii=False).encode("utf-8")
        self.close_connection = True
        self.send_response(code, short)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and code >= 200 and code not in (204, 304):
            self.wfile.write(data)

    def _answer(self, method: str) -> None:
        path, _, query = self.path.partition("?")
        self._unread = method == "POST"  # a body not read yet: dropped before any answer
        try:
            host = self._host()
            if method == "POST" or path.startswith("/api"):
                self._check_origin(host)
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
            self._send_json(refused.status, {"error": str(refused), "parameter": refused.parameter})
        except (ConnectionError, TimeoutError):  # the client went away: nothing to answer
            self.close_connection = True
        except Exception as error:  # a bug of posenc's: said, and the server goes on
            message = " ".join(f"{type(error).__name__}: {error}".split())
            self._send_json(500, {"error": f"internal error: {message}", "parameter": None})

    def _host(self) -> tuple[str, int | None]:
        """The request's Host as (name, port or None), checked: one Host header, well formed and, while the
        server listens on a loopback address, a loopback IP literal or ``localhost`` on no port or this
        server's (see the module docstring); else a BadRequest naming ``host``."""
        values = self.headers.get_all("Host") or []
        own_port = self.server.server_address[1]
        loopback = is_loopback(str(self.server.server_address[0]))
        found = _authority(values[0].strip(" \t")) if len(values) == 1 else None
        if (
            found is not None
            and loopback
            and (not _is_loopback_name(found[0]) or found[1] not in (None, own_port))
        ):
            found = None
        if found is None:
            shown = f"Host {values[0]!r}" if len(values) == 1 else f"{len(values)} Host headers"
            allowed = (
                f"a loopback IP (127.0.0.1, [::1]) or localhost, on port {own_port},"
                if loopback
                else "one host"
            )
            raise api.BadRequest(
                "host",
                f"{shown}: this server answers to {allowed} only (a page elsewhere cannot reach it through "
                f"a name of its own); open {url_of(self.server)}",
            )
        return found

    def _check_origin(self, host: tuple[str, int | None]) -> None:
        """A POST's or an API GET's Origin, when sent, must be exactly ``http://`` + the Host's name + this
        server's port (another port behind a proxy: the Host's), and its Sec-Fetch-Site, when sent,
        same-origin (or none); else a 403 naming ``origin``."""
        name, port = host
        own_port = self.server.server_address[1]
        if not is_loopback(str(self.server.server_address[0])):
            own_port = 80 if port is None else port
        shown_port = "" if own_port == 80 else f":{own_port}"
        own = f"http://{name}{shown_port}"
        origins = self.headers.get_all("Origin") or []
        if len(origins) > 1:
            raise Forbidden(
                "origin", f"{len(origins)} Origin headers; a request comes from one origin: {own}"
            )
        if origins:
            found = _ORIGIN.fullmatch(origins[0].strip(" \t"))
            authority = _authority(found["authority"]) if found is not None else None
            if (
                found is None
                or found["scheme"].lower() != "http"
                or authority is None
                or authority[0] != name
                or (80 if authority[1] is None else authority[1]) != own_port
            ):
                raise Forbidden(
                    "origin",
                    f"Origin {origins[0]!r} is not this server's: the API answers the page of {own} "
                    "only (or a script that sends no Origin)",
                )
        for site in self.headers.get_all("Sec-Fetch-Site") or []:
            if site.strip(" \t").lower() not in _OWN_SITES:
                raise Forbidden(
                    "origin",
                    f"Sec-Fetch-Site {site!r}: the API answers the page of {own} only (same-origin)",
                )

    def _body(self, path: str) -> bytes:
        """The request's body, of the type its route documents (BODY_TYPES): its Content-Length bytes, at
        most MAX_UPLOAD (a larger body is refused unused, and the connection closed)."""
        parameter = "config" if path == "/api/rope" else "file"
        expected = BODY_TYPES[path]
        types = self.headers.get_all("Content-Type") or []
        given = types[0].split(";", 1)[0].strip(" \t").lower() if len(types) == 1 else None
        if given != expected:
            shown = f"Content-Type {types[0]!r}" if len(types) == 1 else f"{len(types)} Content-Type headers"
            raise api.BadRequest(
                "content-type", f"{shown}: {path} takes the {parameter} as Content-Type: {expected}"
            )
        limit = api.MAX_UPLOAD
        size = self._content_length()
        if size < 0:
            raise api.BadRequest(
                parameter, f"{path} needs the {parameter} as the request body, with its Content-Length"
            )
        if size > limit:
            raise api.BadRequest(
                parameter, f"the {parameter} is {size} bytes; at most MAX_UPLOAD = {limit} bytes are taken"
            )
        self._unread = False
        return self.rfile.read(size)

    def _content_length(self) -> int:
        """The Content-Length, or -1 when there is none, or more than one, or it is no decimal number."""
        lengths = self.headers.get_all("Content-Length") or []
        text = lengths[0].strip(" \t") if len(lengths) == 1 else ""
        if not (text.isascii() and text.isdigit() and len(text) <= 18):
            return -1
        return int(text)

    def _drop_body(self) -> None:
        """Read and drop a refused request's body, at most MAX_UPLOAD + 1 bytes a block at a time (so the
        answer reaches the client before the connection closes), and close the connection."""
        self._unread = False
        self.close_connection = True
        left = min(self._content_length(), api.MAX_UPLOAD + 1)
        try:
            while left > 0 and (block := self.rfile.read(min(left, 1 << 16))):
                left -= len(block)
        except (OSError, ValueError):  # the client went away or was silent: it gets no answer
            pass

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
        if getattr(self, "_unread", False):
            self._drop_body()
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


def _authority(text: str) -> tuple[str, int | None] | None:
    """(the name, lowercase, an IPv6 literal in its compressed form in brackets; the port or None) of a Host
    value or an origin's ``host[:port]``, or None when it is not one."""
    found = _AUTHORITY.fullmatch(text)
    if found is None:
        return None
    port = None if found["port"] is None else int(found["port"])
    if port is not None and port > 65535:
        return None
    if found["ip6"] is None:
        return found["name"].lower(), port
    try:
        address = ipaddress.IPv6Address(found["ip6"])
    except ValueError:
        return None
    return f"[{address.compressed}]", port


def _is_loopback_name(name: str) -> bool:
    """Whether a Host's name (as :func:`_authority` gives it) is ``localhost``, ``[::1]`` or an IPv4
    literal of 127.0.0.0/8 written as four decimal numbers (``127.1``, ``0x7f.1``, ``2130706433``,
    ``0177.0.0.1`` and ``[::ffff:127.0.0.1]`` are not)."""
    if name in ("localhost", f"[{_LOOPBACK_V6.compressed}]"):
        return True
    if not re.fullmatch(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}", name):
        return False
    try:
        return ipaddress.IPv4Address(name) in _LOOPBACK_V4
    except ValueError:  # a number over 255, or a leading zero
        return False


def is_loopback(address: str) -> bool:
    """Whether the server's bound address is a loopback one (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(address.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return address.lower() == "localhost"


class Server(http.server.ThreadingHTTPServer):
    """The server: a thread per connection (daemon threads: Ctrl-C does not wait for them), at most
    :data:`MAX_CONNECTIONS` at once."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve ``request`` in a thread of its own, or, with every slot taken, answer 503 and close it."""
        if not self.slots.acquire(blocking=False):
            busy = b"the server is serving as many connections as it takes; try again\n"
            head = (
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(busy)}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
            )
            try:
                request.settimeout(1.0)
                request.sendall(head.encode() + busy)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address))
        thread.daemon = self.daemon_threads
        try:
            thread.start()
        except Exception:  # it never started (no thread left): its slot is free again. A Ctrl-C here is
            self.slots.release()  # not caught: the thread that started releases its own slot
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that reset its connection, closed it early or went silent is let go without a word;
        anything else is printed as the standard library does (a bug of posenc's)."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


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


def open_browser_on(url: str) -> bool:
    """Open ``url`` in the browser (``webbrowser.open``); where there is none (a server, a container, an
    ssh session), say so on stderr with what to do, once. Whether a browser took it."""
    try:
        opened = bool(webbrowser.open(url))
    except Exception:  # a broken browser setting (BROWSER naming a missing program): as no browser
        opened = False
    if not opened:
        port = urlsplit(url).port
        print(
            f"posenc explore: no browser found on this machine; open {url} in one (from another machine, "
            f"forward the port first: ssh -L {port}:127.0.0.1:{port} THIS_HOST)",
            file=sys.stderr,
            flush=True,
        )
    return opened


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
    unless ``open_browser`` is false. A port that cannot be bound (in use, or not allowed), or a host that
    is not this machine's, raises ValueError naming it.
    """
    try:
        server = make_server(host, port)
    except OSError as error:
        # a name that resolves to nothing, an address not this machine's: the host is at fault, not the port
        host_fault = isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL
        fix = (
            "pass a host of this machine (127.0.0.1, the default)"
            if host_fault
            else "pass another port (0: any free port)"
        )
        raise ValueError(f"cannot serve on {host}:{port}: {error.strerror or error}; {fix}") from None
    try:
        url = url_of(server)
        (ready or (lambda url: print(f"posenc explore: serving on {url} (Ctrl-C stops)", flush=True)))(url)
        if open_browser:
            threading.Thread(target=open_browser_on, args=(url,), daemon=True).start()
        server.serve_forever()
    finally:
        server.server_close()
