"""``posenc explore``'s trust boundaries, each reproduced against a real server: only loopback Host names
(DNS rebinding), the Origin of every POST (cross-origin requests), only the body type each route documents
(never a path handed to posenc), bounded JSON nesting, and a client that resets its connection.

One real server (``make_server("127.0.0.1", 0)`` in a thread) for the module, asked with http.client (which
sends the headers exactly as given); the reset test runs a real ``posenc explore`` process.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import threading
import time

import numpy as np
import pytest

import posenc
from posenc.explore import api, make_server, server
from tests.explore.test_server import npy, start_explore

LLAMA3 = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 8192,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
}
JSON = ("Content-Type", "application/json")
OCTETS = ("Content-Type", "application/octet-stream")


@pytest.fixture(scope="module")
def port():
    httpd = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def call(
    port: int,
    method: str,
    path: str,
    *,
    host: str | None = "127.0.0.1:PORT",
    headers: tuple[tuple[str, str], ...] = (),
    body: bytes | None = None,
):
    """(status, the JSON answer or the bytes, the response's headers) of one request sent with exactly
    these headers: ``host`` with PORT replaced by the server's port (None: no Host header)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host.replace("PORT", str(port)))
        for name, value in headers:
            connection.putheader(name, value)
        if body is not None:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        got = response.headers
    finally:
        connection.close()
    if (got["Content-Type"] or "").startswith("application/json"):
        return response.status, json.loads(data), got
    return response.status, data, got


def refusal(answer, status: int, parameter: str) -> str:
    """The error line of a refused request, checked: its status, the parameter it names, one line."""
    code, data, got = answer
    assert code == status, data
    assert got["Content-Type"] == "application/json; charset=utf-8"
    assert set(data) == {"error", "parameter"} and data["parameter"] == parameter, data
    assert "\n" not in data["error"]
    return data["error"]


# --- Host: DNS rebinding ------------------------------------------------------------------------------

#: Host values of a page elsewhere whose name resolves to 127.0.0.1, or no loopback literal at all. PORT is
#: replaced by the server's port.
HOSTILE_HOSTS = [
    "127.attacker.example:PORT",
    "127.attacker.example",
    "127.0.0.1.nip.io:PORT",
    "127.0.0.1.nip.io",
    "127.0.0.1@evil.com",
    "127.0.0.1@evil.com:PORT",
    "127.0.0.1.evil",
    "127.0.0.1.evil:PORT",
    "localhost.evil.com",
    "localhost.evil.com:PORT",
    "localhost.",
    "localhost.:PORT",
    "evil.com",
    "attacker.example:80",
    "0x7f.1",
    "0x7f000001",
    "2130706433",
    "2130706433:PORT",
    "127.1",
    "0177.0.0.1",
    "127.000.000.001",
    "[::ffff:127.0.0.1]:PORT",
    "[::ffff:7f00:1]",
    "[::1%lo]:PORT",
    "[fe80::1]:PORT",
    "::1",
    "::1:PORT",
    "[::1",
    "10.0.0.1:PORT",
    "0.0.0.0:PORT",
    "127.0.0.1:",
    "127.0.0.1:+PORT",
    "127.0.0.1:PORT:PORT",
    "127.0.0.1:99999",
    "127.0.0.1:0xff",
    "127.0.0.1 evil.com",
    "",
]
#: Host values naming this server: a loopback IP literal or localhost, with no port or this server's.
GOOD_HOSTS = [
    "127.0.0.1:PORT",
    "127.0.0.1",
    "127.5.6.7:PORT",
    "localhost:PORT",
    "LocalHost:PORT",
    "localhost",
    "[::1]:PORT",
    "[0:0:0:0:0:0:0:1]:PORT",
    "[::1]",
]


class TestHostIsALoopbackLiteralOrLocalhost:
    """Only a loopback IP literal (127.0.0.0/8, [::1]) or ``localhost``, with an optional port that must be
    the server's own: everything else is 400 naming ``host``, on every path."""

    @pytest.mark.parametrize("host", HOSTILE_HOSTS)
    @pytest.mark.parametrize("path", ["/api", "/", "/static/app.js", "/api/table?d_model=4&length=2"])
    def test_a_hostile_host_is_refused(self, port, host, path):
        value = host.replace("PORT", str(port))
        error = refusal(call(port, "GET", path, host=value), 400, "host")
        assert f"open http://127.0.0.1:{port}/" in error

    @pytest.mark.parametrize("host", HOSTILE_HOSTS)
    def test_a_hostile_host_is_refused_before_a_post_is_read(self, port, host):
        value = host.replace("PORT", str(port))
        answer = call(
            port, "POST", "/api/rope", host=value, headers=(JSON,), body=json.dumps(LLAMA3).encode()
        )
        refusal(answer, 400, "host")

    @pytest.mark.parametrize("host", GOOD_HOSTS)
    def test_a_loopback_host_is_served(self, port, host):
        value = host.replace("PORT", str(port))
        status, data, _ = call(port, "GET", "/api", host=value)
        assert status == 200 and data["endpoints"] == api.ENDPOINTS

    def test_another_port_is_refused(self, port):
        other = port + 1 if port < 65535 else port - 1
        for name in ("127.0.0.1", "localhost", "[::1]"):
            error = refusal(call(port, "GET", "/api", host=f"{name}:{other}"), 400, "host")
            assert f"port {port}" in error

    def test_no_host_is_refused(self, port):
        refusal(call(port, "GET", "/api", host=None), 400, "host")
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:  # HTTP/1.0, no Host
            connection.sendall(b"GET /api HTTP/1.0\r\n\r\n")
            answer = connection.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.0 400") and b'"parameter": "host"' in answer

    def test_two_host_headers_are_refused(self, port):
        twice = (("Host", "evil.com"),)
        refusal(call(port, "GET", "/api", headers=twice), 400, "host")


# --- Origin: cross-origin POSTs -----------------------------------------------------------------------

FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example",
    "null",
    "http://127.0.0.1",
    "http://127.0.0.1:1",
    "https://127.0.0.1:PORT",
    "http://127.0.0.1:PORT/",
    "http://127.0.0.1:PORT/api",
    "http://localhost:PORT",  # another origin than the one the request names (Host 127.0.0.1:PORT)
    "http://[::1]:PORT",
    "http://127.0.0.1.nip.io:PORT",
    "http://user@127.0.0.1:PORT",
    "file://",
    "",
]


class TestOriginOfEveryPost:
    """A POST whose Origin is present must come from the origin it is sent to (http://HOST:PORT as served);
    Sec-Fetch-Site, when sent, must be same-origin: otherwise 403 naming ``origin``, before the body is
    used."""

    @pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
    @pytest.mark.parametrize(
        ("path", "kind", "body"),
        [
            ("/api/rope", JSON, json.dumps(LLAMA3).encode()),
            ("/api/rope", ("Content-Type", "text/plain"), json.dumps(LLAMA3).encode()),
            ("/api/identify?filename=pe.npy", OCTETS, npy(posenc.table(16, 8))),
            ("/api/table", JSON, b""),
            ("/api/nope", JSON, b"{}"),
        ],
    )
    def test_a_foreign_origin_is_refused(self, port, origin, path, kind, body):
        value = origin.replace("PORT", str(port))
        answer = call(port, "POST", path, headers=(kind, ("Origin", value)), body=body)
        assert "Origin" in refusal(answer, 403, "origin")

    def test_a_text_plain_post_from_another_site_is_refused(self, port):
        """The reproduction: a page elsewhere POSTs a config as text/plain (no preflight)."""
        headers = (
            ("Content-Type", "text/plain;charset=UTF-8"),
            ("Origin", "http://attacker.example"),
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "no-cors"),
        )
        refusal(
            call(port, "POST", "/api/rope", headers=headers, body=json.dumps(LLAMA3).encode()), 403, "origin"
        )

    @pytest.mark.parametrize("site", ["cross-site", "same-site", "Cross-Site"])
    def test_sec_fetch_site_other_than_same_origin_is_refused(self, port, site):
        own = ("Origin", f"http://127.0.0.1:{port}")
        for headers in (((JSON), ("Sec-Fetch-Site", site)), (JSON, own, ("Sec-Fetch-Site", site))):
            answer = call(port, "POST", "/api/rope", headers=headers, body=json.dumps(LLAMA3).encode())
            assert "Sec-Fetch-Site" in refusal(answer, 403, "origin")

    def test_two_origin_headers_are_refused(self, port):
        own = ("Origin", f"http://127.0.0.1:{port}")
        headers = (JSON, own, own)
        refusal(call(port, "POST", "/api/rope", headers=headers, body=b"{}"), 403, "origin")

    @pytest.mark.parametrize(
        ("host", "origin"),
        [
            ("127.0.0.1:PORT", "http://127.0.0.1:PORT"),
            ("localhost:PORT", "http://localhost:PORT"),
            ("LOCALHOST:PORT", "HTTP://LocalHost:PORT"),
            ("[::1]:PORT", "http://[::1]:PORT"),
            ("127.0.0.1:PORT", None),  # a script (curl, urllib) sends no Origin
        ],
    )
    @pytest.mark.parametrize("site", [None, "same-origin"])
    def test_the_pages_own_origin_is_served(self, port, host, origin, site):
        headers = [JSON]
        if origin is not None:
            headers.append(("Origin", origin.replace("PORT", str(port))))
        if site is not None:
            headers.append(("Sec-Fetch-Site", site))
        answer = call(
            port,
            "POST",
            "/api/rope",
            host=host.replace("PORT", str(port)),
            headers=tuple(headers),
            body=json.dumps(LLAMA3).encode(),
        )
        assert answer[0] == 200 and answer[1]["config"]["rope_type"] == "llama3", answer[1]
        answer = call(
            port,
            "POST",
            "/api/identify?filename=pe.npy",
            host=host.replace("PORT", str(port)),
            headers=(OCTETS, *headers[1:]),
            body=npy(posenc.table(16, 8)),
        )
        assert answer[0] == 200 and answer[1]["best"] == "paper", answer[1]

    @pytest.mark.parametrize(
        "headers",
        [
            (("Origin", "http://evil.example"),),
            (("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Sec-Fetch-Dest", "image")),
        ],
    )
    def test_an_api_get_from_another_site_is_refused_before_any_work(self, port, headers):
        """A page elsewhere cannot read a GET's answer (no CORS header is sent), but an ``<img>`` of an API
        URL would make the server compute (a rope of a wide head: seconds a request, with a fresh base
        each time): refused first, 403 (was: 200). The page itself is served to a link from anywhere."""
        for path in ("/api", "/api/rope?head_dim=65536&base=20001", "/api/table?d_model=8&length=4"):
            answer = call(port, "GET", path, headers=headers)
            assert "this server's" in refusal(answer, 403, "origin") or "Sec-Fetch-Site" in answer[1]["error"]
        status, _, got = call(port, "GET", "/", headers=headers)
        assert status == 200 and "Access-Control-Allow-Origin" not in got
        own = (("Sec-Fetch-Site", "same-origin"), ("Sec-Fetch-Mode", "cors"))
        assert call(port, "GET", "/api/table?d_model=8&length=4", headers=own)[0] == 200

    def test_no_preflight_is_answered(self, port):
        headers = (("Origin", "http://evil.example"), ("Access-Control-Request-Method", "POST"))
        status, _, got = call(port, "OPTIONS", "/api/rope", headers=headers)
        assert status >= 400 and "Access-Control-Allow-Origin" not in got


# --- the body: only the JSON object or the file each route documents ----------------------------------


class TestBodyIsWhatTheRouteDocuments:
    """POST /api/rope takes ``application/json`` holding a JSON object (a config.json's contents), POST
    /api/identify ``application/octet-stream`` (the file's bytes); nothing of a request is ever read as a
    path."""

    @pytest.mark.parametrize(
        "content_type",
        [
            None,
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "application/octet-stream",
        ],
    )
    def test_rope_takes_application_json_only(self, port, content_type):
        headers = () if content_type is None else (("Content-Type", content_type),)
        answer = call(port, "POST", "/api/rope", headers=headers, body=json.dumps(LLAMA3).encode())
        assert "application/json" in refusal(answer, 400, "content-type")

    @pytest.mark.parametrize("content_type", ["application/json", "Application/JSON; charset=utf-8"])
    def test_rope_takes_application_json_with_parameters(self, port, content_type):
        answer = call(
            port,
            "POST",
            "/api/rope",
            headers=(("Content-Type", content_type),),
            body=json.dumps(LLAMA3).encode(),
        )
        assert answer[0] == 200, answer[1]

    @pytest.mark.parametrize(
        "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
    )
    def test_identify_takes_application_octet_stream_only(self, port, content_type):
        headers = () if content_type is None else (("Content-Type", content_type),)
        answer = call(
            port, "POST", "/api/identify?filename=pe.npy", headers=headers, body=npy(posenc.table(8, 4))
        )
        assert "application/octet-stream" in refusal(answer, 400, "content-type")

    @pytest.mark.parametrize(
        "body",
        [b'"/etc"', b'"."', b'"config.json"', b"[1, 2]", b"[]", b"42", b"4.5", b"null", b"true", b'""'],
    )
    def test_a_body_that_is_no_json_object_is_refused(self, port, body):
        error = refusal(call(port, "POST", "/api/rope", headers=(JSON,), body=body), 400, "config")
        assert error.startswith("the body must be a JSON object")

    def test_a_path_in_the_body_is_never_read(self, port, tmp_path):
        """The reproduction: a JSON string naming a folder made the server read its config.json (and echo a
        value), and a missing path was said to be missing."""
        (tmp_path / "config.json").write_text(json.dumps({"head_dim": "SECRET-VALUE-42"}))
        for target in (tmp_path, tmp_path / "config.json", tmp_path / "nothing-here"):
            body = json.dumps(str(target)).encode()
            error = refusal(call(port, "POST", "/api/rope", headers=(JSON,), body=body), 400, "config")
            assert "SECRET-VALUE-42" not in error and str(tmp_path) not in error
            assert "no such file" not in error and "not a config.json" not in error

    def test_a_path_inside_the_object_is_never_read(self, port, tmp_path):
        (tmp_path / "config.json").write_text(json.dumps(LLAMA3))
        body = json.dumps({"text_config": str(tmp_path), "head_dim": 64}).encode()
        status, data, _ = call(port, "POST", "/api/rope", headers=(JSON,), body=body)
        assert status == 200 and data["config"]["rope_type"] == "default"  # not the folder's llama3

    @pytest.mark.parametrize(
        "name",
        [
            "PATH/pe.npy",
            "../../../../PATH/pe.npy",
            "PATH/../PATH/pe.npy",
            "..\\..\\pe.npy",
            "/dev/zero.npy",
            "PATH",
        ],
    )
    def test_identify_never_reads_the_filename(self, port, tmp_path, name):
        """A filename naming a real file: the server reads the body it was sent, never that file."""
        (tmp_path / "pe.npy").write_bytes(npy(posenc.table(16, 8)))
        before = sorted(os.listdir(tmp_path))
        value = name.replace("PATH", str(tmp_path))
        query = "/api/identify?filename=" + value.replace("%", "%25").replace("&", "%26")
        answer = call(port, "POST", query, headers=(OCTETS,), body=b"not a table")
        error = refusal(answer, 400, "file" if value.endswith(".npy") else "filename")
        assert "is not a .npy file" in error or "unknown file type" in error
        assert sorted(os.listdir(tmp_path)) == before  # nothing written beside it either

    def test_an_upload_is_held_to_the_work_its_size_bounds(self, port, tmp_path):
        """A 6 KB .pt of one row expanded to 65536 (a view: stride 0) reads as 268 MB of values — it took
        19 GB and ten minutes; a 1-D vector of 2**20 values fits a base in time quadratic in its length
        (minutes). Both are refused at once, naming what they hold."""
        torch = pytest.importorskip("torch")
        row = torch.from_numpy(posenc.table(1, 1024)[0].copy())
        torch.save({"pos_embed": row.expand(65536, 1024)}, tmp_path / "expanded.pt")
        body = (tmp_path / "expanded.pt").read_bytes()
        assert len(body) < 10_000
        vector = npy(np.geomspace(1, 1e-30, (1 << 14) + 1))
        for name, data, said in (("pe.pt", body, "268,435,456 bytes"), ("v.npy", vector, "16,385 values")):
            answer = call(port, "POST", f"/api/identify?filename={name}", headers=(OCTETS,), body=data)
            assert said in refusal(answer, 400, "file")  # said from the stored shape: nothing read

    def test_a_tall_table_and_a_wide_rotary_are_refused_before_the_work(self, port):
        """A table of 2,097,152 rows × 2 took 24 to 32 s to identify, a rotary of 65536 channels 8 to 14 s
        to draw: past MAX_IDENTIFY_ROWS and MAX_ROPE_WIDTH each is a 400 naming what to use instead."""
        tall = npy(np.zeros((api.MAX_IDENTIFY_ROWS + 1, 2), np.float32))
        answer = call(port, "POST", "/api/identify?filename=t.npy", headers=(OCTETS,), body=tall)
        assert "131,073 rows, more than the 131,072" in refusal(answer, 400, "file")
        answer = call(port, "GET", f"/api/rope?head_dim={2 * api.MAX_ROPE_WIDTH}")
        assert "wider than the 4096 this view draws" in refusal(answer, 400, "head_dim")
        assert call(port, "GET", "/api")[1]["caps"]["MAX_ROPE_WIDTH"] == api.MAX_ROPE_WIDTH

    @pytest.mark.parametrize(
        "lengths", [(), ("9" * 5000,), ("-1",), ("1e3",), ("１２",), ("2", "2"), ("0x10",)]
    )
    def test_a_content_length_that_is_no_one_number_is_refused(self, port, lengths):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            connection.putrequest("POST", "/api/rope", skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", f"127.0.0.1:{port}")
            connection.putheader(*JSON)
            for length in lengths:
                connection.putheader("Content-Length", length.encode())
            connection.endheaders(b"{}")
            response = connection.getresponse()
            status, data = response.status, json.loads(response.read())
        finally:
            connection.close()
        assert status == 400 and data["parameter"] == "config" and "Content-Length" in data["error"]


def test_the_origin_of_a_server_on_ipv6_loopback_is_its_own():
    try:
        httpd = make_server("::1", 0)
    except OSError as error:
        pytest.skip(f"no IPv6 loopback here: {error}")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        port = httpd.server_address[1]
        connection = http.client.HTTPConnection("::1", port, timeout=30)
        answers = []
        for origin in (f"http://[::1]:{port}", f"http://127.0.0.1:{port}", "http://evil.example"):
            connection.request(
                "POST",
                "/api/rope",
                body=json.dumps(LLAMA3).encode(),
                headers={"Host": f"[::1]:{port}", "Origin": origin, "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))
            connection.close()
        connection.request("GET", "/api", headers={"Host": f"evil.com:{port}"})
        response = connection.getresponse()
        answers.append((response.status, json.loads(response.read())))
        connection.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
    assert answers[0][0] == 200 and answers[0][1]["config"]["rope_type"] == "llama3"
    assert [(status, data["parameter"]) for status, data in answers[1:]] == [
        (403, "origin"),
        (403, "origin"),
        (400, "host"),
    ]
    assert f"open http://[::1]:{port}/" in answers[3][1]["error"]


# --- nesting -----------------------------------------------------------------------------------------


class TestJsonNestingIsBounded:
    """JSON nested deeper than MAX_JSON_DEPTH is a 400 naming ``config``, never a 500 (RecursionError)."""

    @pytest.mark.parametrize("depth", [api.MAX_JSON_DEPTH + 1, 1000, 10000, 100000])
    def test_deep_arrays_are_a_400(self, port, depth):
        body = b"[" * depth + b"]" * depth
        error = refusal(call(port, "POST", "/api/rope", headers=(JSON,), body=body), 400, "config")
        assert "MAX_JSON_DEPTH" in error

    @pytest.mark.parametrize("depth", [api.MAX_JSON_DEPTH, 10000])
    def test_deep_objects_inside_a_config_are_a_400(self, port, depth):
        body = b'{"head_dim": 64, "x": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"
        error = refusal(call(port, "POST", "/api/rope", headers=(JSON,), body=body), 400, "config")
        assert "MAX_JSON_DEPTH" in error

    def test_nesting_up_to_the_cap_is_read(self, port):
        depth = api.MAX_JSON_DEPTH - 1  # the config object itself is one level
        body = b'{"head_dim": 64, "x": ' + b"[" * depth + b"]" * depth + b"}"
        status, data, _ = call(port, "POST", "/api/rope", headers=(JSON,), body=body)
        assert status == 200 and data["config"]["head_dim"] == 64

    def test_brackets_inside_strings_do_not_count(self, port):
        body = json.dumps({"head_dim": 64, "note": "[" * 10000 + "{" * 10000}).encode()
        assert call(port, "POST", "/api/rope", headers=(JSON,), body=body)[0] == 200

    def test_the_cap_is_listed(self, port):
        assert call(port, "GET", "/api")[1]["caps"]["MAX_JSON_DEPTH"] == api.MAX_JSON_DEPTH


# --- a client that resets its connection ----------------------------------------------------------------


def _reset(connection: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP reset."""
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    connection.close()


def test_a_reset_connection_prints_no_traceback():
    """The reproduction: a client that sends (part of) a request and resets made the server print a
    50-line traceback on its terminal. Against a real ``posenc explore`` process."""
    process = start_explore()
    try:
        line = process.stdout.readline()
        assert line.startswith("posenc explore: serving on http://127.0.0.1:"), line
        port = int(line.split()[4].rstrip("/").rsplit(":", 1)[1])
        host = f"Host: 127.0.0.1:{port}\r\n".encode()
        requests = [
            b"GET /api HTTP/1.1\r\n" + host,  # headers cut short: the server is reading them
            b"GET /api/criteria?d_model=64&length=1024 HTTP/1.1\r\n" + host + b"\r\n",  # answered after
            b"GET /api HTTP/1.1\r\nHost: evil.com\r\n\r\n",  # a refusal
            b"POST /api/rope HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{",  # the body cut short
            b"POST /api/rope HTTP/1.1\r\n" + host + b"Origin: http://evil.example\r\n"
            b"Content-Length: 100000\r\n\r\n{",  # refused, its body dropped
        ]
        for request in requests:
            for _ in range(3):
                connection = socket.create_connection(("127.0.0.1", port), timeout=10)
                connection.sendall(request)
                _reset(connection)
        time.sleep(3)  # not an assertion: the time for the server's threads to meet the resets
        status, data, _ = call(port, "GET", "/api")  # still serving
        assert status == 200 and data["endpoints"] == api.ENDPOINTS
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert "Traceback" not in err and "Error" not in err, err
    assert err == "posenc: interrupted\n" and out == ""


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.5.6.7", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("127.attacker.example", False),
        ("127.0.0.1.nip.io", False),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.2", False),
        ("example.com", False),
    ],
)
def test_the_command_warns_for_every_host_that_is_not_a_loopback_literal(host, loopback):
    """`posenc explore --host H` warns that the server is reachable from the network unless H is a loopback
    IP literal or localhost (``127.attacker.example`` starts with 127. and is not one)."""
    assert server.is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("host", "fix"), [("999.1.1.1", "a host of this machine"), ("127.0.0.1", "another port")]
)
def test_a_host_that_cannot_be_served_is_named_not_the_port(host, fix):
    """A name that resolves to nothing was told "pass another port"; a port in use still is."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ValueError, match=f"cannot serve on {host}:.*{fix}"):
            server.serve(host, taken.getsockname()[1], open_browser=False)


def test_connections_past_the_cap_are_answered_503_and_the_server_serves_again_once_they_close():
    httpd = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    idle = []
    try:
        for _ in range(server.MAX_CONNECTIONS):  # each holds a thread: connected, sends nothing
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        deadline = time.monotonic() + 10
        while httpd.slots._value and time.monotonic() < deadline:  # every one accepted by the server
            time.sleep(0.01)
        assert httpd.slots._value == 0
        one_more = socket.create_connection(("127.0.0.1", port), timeout=10)
        answer = one_more.recv(4096).decode()
        one_more.close()
        assert answer.startswith("HTTP/1.1 503 ") and "try again" in answer
        for connection in idle:
            connection.close()
        deadline = time.monotonic() + 10
        while httpd.slots._value < server.MAX_CONNECTIONS and time.monotonic() < deadline:
            time.sleep(0.01)
        assert call(port, "GET", "/api/table?d_model=4&length=2")[0] == 200
    finally:
        for connection in idle:
            connection.close()
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"BREW /api HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 501),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", 414),
        (b"GET /api/table HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431),
    ],
)
def test_what_the_standard_library_refuses_is_answered_in_json_too(port, raw, code):
    # the library's own answer was an HTML page: every refusal is JSON naming what to change
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(raw)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.0 {code} ".encode()) and b"Content-Type: application/json" in head
    document = json.loads(body)
    assert document["parameter"] == "request" and document["error"].startswith(str(code)), document


def test_a_ctrl_c_while_a_connection_starts_stops_the_server(monkeypatch):
    # Ctrl-C arriving just as a connection's thread started, after that thread had already served and freed
    # its slot: the slot was released twice (ValueError), which replaced the KeyboardInterrupt, and the
    # server went on serving (a `posenc explore` that did not stop on SIGINT in one make test run)
    httpd = make_server("127.0.0.1", 0)
    start = threading.Thread.start
    client, accepted = socket.socketpair()

    def start_then_interrupt(thread):
        start(thread)
        client.close()  # the client goes: its thread ends, and frees its slot, before the interrupt lands
        thread.join(10)
        raise KeyboardInterrupt

    try:
        monkeypatch.setattr(threading.Thread, "start", start_then_interrupt)
        with pytest.raises(KeyboardInterrupt):
            httpd.process_request(accepted, ("127.0.0.1", 0))
        monkeypatch.undo()
        assert httpd.slots.acquire(blocking=False)  # the slot is free once, not twice
        httpd.slots.release()
    finally:
        client.close()
        httpd.server_close()
