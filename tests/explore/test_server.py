"""``posenc explore``'s server: every endpoint against posenc's own functions, every kind of bad request
(a 400 naming the parameter, or a 404), and the command that serves it.

One real server (``make_server("127.0.0.1", 0)`` in a thread) for the module, asked with urllib.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import posenc
from posenc import analysis, presets, rope
from posenc.analysis import rope_figures
from posenc.analysis.rope_figures import rope_wavelength_lines
from posenc.cli import main
from posenc.explore import api, make_server, server

ROOT = Path(__file__).resolve().parents[2]
DTYPES = ("float32", "float16", "bfloat16", "float64")


@pytest.fixture(scope="module")
def base_url():
    httpd = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def ask(base_url: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, the JSON answer or the bytes of a file, the response's headers). A POST carries the
    Content-Type its route takes (server.BODY_TYPES), as the page sends it, unless ``headers`` say."""
    method = "POST" if body is not None else "GET"
    headers = dict(headers or {})
    if body is not None and "Content-Type" not in headers:
        headers["Content-Type"] = server.BODY_TYPES.get(path.partition("?")[0], "application/json")
    request = urllib.request.Request(base_url + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, data, got = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, data, got = error.code, error.read(), error.headers
    if got["Content-Type"].startswith("application/json"):
        return status, json.loads(data), got
    return status, data, got


def ok(base_url: str, path: str, body: bytes | None = None) -> dict:
    status, data, _ = ask(base_url, path, body)
    assert status == 200, data
    return data


def refused(base_url: str, path: str, parameter: str, body: bytes | None = None) -> str:
    status, data, got = ask(base_url, path, body)
    assert status == 400, data
    assert got["Content-Type"] == "application/json; charset=utf-8"
    assert set(data) == {"error", "parameter"} and data["parameter"] == parameter, data
    assert "\n" not in data["error"]
    return data["error"]


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


# --- the endpoints, against posenc ---------------------------------------------------------------------


def test_api_lists_every_endpoint_and_the_caps(base_url):
    data = ok(base_url, "/api")
    assert data["endpoints"] == api.ENDPOINTS
    assert set(data["endpoints"]) >= {f"/api/{name}" for name in ("table", "value", "sinusoids", "dot")}
    assert data["caps"]["MAX_VALUES"] == 262144 and data["caps"]["MAX_DOT"] == 512
    assert data["caps"]["MAX_DIMS"] == 16 and data["caps"]["MAX_UPLOAD"] == 32 << 20


@pytest.mark.parametrize("dtype", DTYPES)
def test_table_values_are_posencs_bit_for_bit(base_url, dtype):
    options = {"base": 100.0, "shift": 1, "scale": 1.0, "layout": "sin_cos", "odd": "literal"}
    query = "d_model=11&base=100&shift=1&layout=sin_cos&odd=literal&start=5&length=20&dtype=" + dtype
    data = ok(base_url, f"/api/table?{query}")
    expected = posenc.table(20, 11, start=5, dtype=dtype, **options)
    assert data["shape"] == [20, 11] and data["dtype"] == dtype and data["start"] == 5
    got = np.array(data["values"], dtype=np.float64).astype(expected.dtype)
    assert got.tobytes() == expected.tobytes()  # every bit
    assert data["min"] == float(expected.astype(np.float64).min())
    assert data["max"] == float(expected.astype(np.float64).max())
    for name, compute in (("posenc", "exact"), ("usual", "dtype")):
        found = analysis.collisions(20, 11, start=5, compute=compute, dtype=dtype, **options)
        assert data["collisions"][name] == found.length - found.distinct


def test_table_counts_the_usual_codes_collisions(base_url):
    data = ok(base_url, "/api/table?d_model=4&length=1024&dtype=bfloat16")
    usual = analysis.collisions(1024, 4, dtype="bfloat16", compute="dtype")
    assert data["collisions"] == {"posenc": 0, "usual": 1024 - usual.distinct} and usual.first == 257


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("position", "column"), [(1, 0), (12345, 7), (-3, 5), (2**31 - 1, 0)])
def test_value_is_the_shortest_decimal_that_reads_back(base_url, dtype, position, column):
    data = ok(base_url, f"/api/value?d_model=8&shift=1&dtype={dtype}&position={position}&column={column}")
    stored = posenc.encode(position, 8, shift=1, dtype=dtype)[column : column + 1]
    assert (data["position"], data["column"], data["dtype"]) == (position, column, dtype)
    assert np.array([float(data["value"])]).astype(stored.dtype).tobytes() == stored.tobytes()
    assert len(data["value"].lstrip("-").replace("0.", "", 1)) <= 17
    width = 8 * stored.dtype.itemsize
    assert data["bits"] == f"0x{int(stored.view(f'uint{width}')[0]):0{width // 4}x}"
    assert data["float64"] == repr(float(posenc.encode(position, 8, shift=1, dtype="float64")[column]))


def test_value_of_float32_is_shorter_than_float64s_repr(base_url):
    assert ok(base_url, "/api/value?position=1&column=0")["value"] == "0.84147096"  # sin 1 in float32
    assert ok(base_url, "/api/value?position=1&column=0&dtype=bfloat16")["value"] == "0.84"


def test_sinusoids_are_the_tables_columns(base_url):
    data = ok(base_url, "/api/sinusoids?d_model=16&start=3&length=50&dims=0,5,15&dtype=float16")
    expected = posenc.table(50, 16, start=3, dtype="float16").astype(np.float64)
    assert data["positions"] == list(range(3, 53))
    assert [s["dim"] for s in data["series"]] == [0, 5, 15]
    for series in data["series"]:
        assert series["values"] == expected[:, series["dim"]].tolist()
    assert [s["dim"] for s in ok(base_url, "/api/sinusoids")["series"]] == [0, 1, 2, 3]


@pytest.mark.parametrize("dtype", ["bfloat16", "float64"])
def test_dot_products_are_float64_of_the_dtypes_values(base_url, dtype):
    data = ok(base_url, f"/api/dot?d_model=32&start=7&length=40&dtype={dtype}")
    rows = posenc.table(40, 32, start=7, dtype=dtype).astype(np.float64)
    matrix = rows @ rows.T
    assert data["positions"] == list(range(7, 47))
    assert data["matrix"] == matrix.tolist()
    assert data["matrix"] == analysis.dot_products(posenc.table(40, 32, start=7, dtype=dtype)).tolist()
    by_offset = data["by_offset"]
    assert by_offset["offsets"] == list(range(40)) and by_offset["dot"] == matrix[0].tolist()
    assert by_offset["closed_form"] == analysis.closed_form_dot_product(np.arange(40), 32).tolist()
    if dtype == "float64":  # the exact encodings follow the closed form
        np.testing.assert_allclose(by_offset["dot"], by_offset["closed_form"], atol=1e-12)


def test_criteria_are_posenc_checks_report(base_url):
    data = ok(base_url, "/api/criteria?d_model=16&length=300&dtype=bfloat16&layout=cos_sin")
    report = analysis.check(300, 16, dtype="bfloat16", layout="cos_sin")
    assert data == json.loads(json.dumps(report.as_dict()))
    assert [c["name"] for c in data["criteria"]] == [c.name for c in report.criteria]
    assert all(isinstance(c["passed"], bool) and "figure" in c for c in data["criteria"])
    assert ok(base_url, "/api/criteria")["options"]["length"] == 2048  # its own default length


def test_rope_lines_are_rope_wavelength_lines(base_url):
    data = ok(base_url, "/api/rope?head_dim=64&base=10000&factor=4&original_max_position_embeddings=2048")
    expected = rope_wavelength_lines(head_dim=64, base=10000, factor=4, original_max_position_embeddings=2048)
    assert (data["head_dim"], data["base"]) == (64, 10000) and "config" not in data
    assert list(data["lines"]) == ["default", "linear", "dynamic", "yarn", "llama3"]
    for name, line in expected.items():
        assert data["lines"][name] == line.tolist()
    assert ok(base_url, "/api/rope")["lines"]["yarn"] == rope_wavelength_lines()["yarn"].tolist()


def test_a_posted_config_adds_its_own_wavelengths(base_url):
    cfg = {
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
        },
    }
    data = ok(base_url, "/api/rope", json.dumps(cfg).encode())
    params = rope.config(cfg)
    assert data["config"]["rope_type"] == "llama3" and data["head_dim"] == 128
    exact = rope_figures.rope_wavelengths_of(params)  # 2π/θ_i of the exact θ_i, rounded once
    assert data["config"]["wavelengths"] == exact.tolist()
    np.testing.assert_allclose(exact, 2 * math.pi / rope.inv_freq(params), rtol=2.3e-16, atol=0)  # an ulp
    assert data["lines"]["llama3"] == data["config"]["wavelengths"]  # drawn with the config's own numbers


def test_rope_of_a_partial_rotary_names_its_head_and_its_rotary_width_apart(base_url):
    """A config whose rotary covers a quarter of its heads: the answer's head_dim is the config's 64 (it
    said 16, the rotary's width), rotary_dim the 16 its 8 frequencies' lines are drawn for."""
    cfg = {"model_type": "gpt_neox", "hidden_size": 256, "num_attention_heads": 4, "rotary_pct": 0.25}
    data = ok(base_url, "/api/rope", json.dumps(cfg).encode())
    assert (data["head_dim"], data["rotary_dim"]) == (64, 16) == (data["config"]["head_dim"], 16)
    assert data["config"]["rotary_dim"] == 16 and len(data["lines"]["default"]) == 8
    assert ok(base_url, "/api/rope?head_dim=32")["rotary_dim"] == 32


def test_identify_names_a_fairseq_table_in_a_npy_file(base_url):
    stored = presets.get("fairseq", padding_idx=1).table(130, 32)
    data = ok(base_url, "/api/identify?filename=pe.npy", npy(stored))
    assert data["tensor"] == "" and data["shape"] == [130, 32] and data["dtype"] == "float32"
    assert data["best"] == "fairseq(padding_idx=1)"
    assert data["verdict"].startswith("pe.npy: float32 table of shape (130, 32)\n  1. matches: fairseq(")
    assert data["paste"][0] == 'posenc.presets.get("fairseq", padding_idx=1).table(130, 32)'
    assert data["audit"]["passed"] is True and data["audit"]["findings"] == []
    errors = data["audit"]["errors"]
    assert errors["positions"] == [129] and errors["max_error"] == [0.0] and errors["bands"] == [[0, 129]]


def test_identify_names_a_diffusers_timestep_table_in_a_safetensors_file(base_url, tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    preset = presets.get("diffusers-timestep", flip_sin_to_cos=True, downscale_freq_shift=0)
    file = tmp_path / "unet.safetensors"
    safetensors_numpy.save_file({"time_embedding.pe": preset.table(100, 32)}, str(file))
    data = ok(base_url, "/api/identify?filename=unet.safetensors", file.read_bytes())
    assert data["tensor"] == "time_embedding.pe"
    assert data["best"] == "diffusers-timestep(flip_sin_to_cos=True, downscale_freq_shift=0)"
    assert data["verdict"].startswith("unet.safetensors, tensor 'time_embedding.pe': float32 table")
    timesteps = [line for line in data["paste"] if line.startswith("posenc.torch.Timesteps(")]
    assert timesteps == [
        "posenc.torch.Timesteps(32, flip_sin_to_cos=True, downscale_freq_shift=0, scale=1.0, "
        "max_period=10000.0)"
    ]


def test_identify_audits_the_usual_float32_code(base_url):
    data = ok(base_url, "/api/identify?filename=usual.npy", npy(analysis.naive_table(2048, 64)))
    report = posenc.audit(analysis.naive_table(2048, 64))
    assert data["best"] == "paper"
    audit = data["audit"]
    assert audit["passed"] is False and audit["findings"]
    assert audit["findings"][0].startswith(report.findings[0].text)
    bands = report.as_dict()["bands"]
    assert audit["errors"]["positions"] == [b["hi"] - 1 for b in bands]
    assert audit["errors"]["max_error"] == [b["max_abs"] for b in bands]


# --- bad requests ------------------------------------------------------------------------------------

BAD = [
    ("/api/table?d_model=abc", "d_model", "d_model must be a number; got 'abc'"),
    ("/api/table?d_model=64.0", "d_model", "pass 64 instead"),
    ("/api/table?d_model=1", "d_model", "d_model must be an integer >= 2"),
    ("/api/table?d_model=5&odd=error", "d_model", "is odd"),
    ("/api/table?base=1", "base", "base must be > 1"),
    ("/api/table?base=nan", "base", "base must be finite"),
    ("/api/table?shift=40&d_model=8", "shift", "shift=40 with d_model=8"),
    ("/api/table?scale=0", "scale", "scale must be > 0"),
    ("/api/table?layout=diagonal", "layout", "layout must be one of"),
    ("/api/table?odd=maybe", "odd", "odd must be one of"),
    ("/api/table?dtype=int8", "dtype", "dtype must be one of"),
    ("/api/table?length=0", "length", "length must be an integer >= 1"),
    ("/api/table?length=", "length", "length must be a number; got ''"),
    ("/api/table?start=2147483647", "start", "must be < 2**31"),
    ("/api/table?start=1.5", "start", "start must be an integer"),
    ("/api/table?colour=red", "colour", "unknown parameter 'colour' for /api/table; it takes: d_model"),
    ("/api/table?d_model=8&d_model=16", "d_model", "d_model is given twice"),
    ("/api/value?column=0", "position", "position is required"),
    ("/api/value?position=0", "column", "column is required"),
    ("/api/value?position=2147483648&column=0", "position", "position must satisfy"),
    ("/api/value?position=1&column=64", "column", "column must be <= 63"),
    ("/api/value?position=1&column=-1", "column", "column must be an integer >= 0"),
    ("/api/sinusoids?dims=0,x", "dims", "dims must be a number; got 'x'"),
    ("/api/sinusoids?dims=0,64", "dims", "dims must be <= 63"),
    ("/api/sinusoids?dims=", "dims", "dims must be a number"),
    ("/api/dot?position=3", "position", "unknown parameter 'position'"),
    ("/api/criteria?dims=1", "dims", "unknown parameter 'dims'"),
    ("/api/rope?head_dim=0", "head_dim", "head_dim must be an integer >= 1"),
    ("/api/rope?head_dim=12.5", "head_dim", "head_dim must be an integer"),
    ("/api/rope?base=0.5", "base", "must be > 1"),
    ("/api/rope?factor=x", "factor", "factor must be a number"),
    ("/api/rope?d_model=64", "d_model", "unknown parameter 'd_model' for /api/rope"),
    ("/api?x=1", "x", "unknown parameter 'x' for /api"),
]


@pytest.mark.parametrize(("path", "parameter", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_parameter_is_a_400_naming_it(base_url, path, parameter, message):
    assert message in refused(base_url, path, parameter)


def test_posencs_own_message_is_the_error(base_url):
    for query, call in [
        ("d_model=1", lambda: posenc.table(1, 1)),
        ("shift=40&d_model=8", lambda: posenc.table(1, 8, shift=40)),
        ("layout=diagonal", lambda: posenc.table(1, 8, layout="diagonal")),
    ]:
        with pytest.raises((ValueError, TypeError)) as caught:
            call()
        assert refused(base_url, f"/api/table?{query}", query.split("=")[0]) == str(caught.value)


CAPS = [
    ("/api/table?length=5000", "length", "262144", "5000 * 64"),
    ("/api/table?d_model=1048576&length=1", "length", "262144", "1048576"),
    ("/api/sinusoids?length=262144&d_model=2", "length", "262144", "524288"),
    ("/api/sinusoids?dims=" + ",".join(["1"] * 17), "dims", "MAX_DIMS", "17"),
    ("/api/dot?length=513&d_model=2", "length", "512", "513"),
    ("/api/criteria?length=65537&d_model=2", "length", "65536", "65537"),
    ("/api/criteria?length=65536&d_model=1024", "length", "MAX_CRITERIA_VALUES", "67108864"),
    # 8 rows of 2^20 columns are within MAX_CRITERIA_VALUES and took 150 s and 9 GiB
    ("/api/criteria?length=8&d_model=1048576", "d_model", "MAX_CRITERIA_WIDTH", "1048576"),
]


@pytest.mark.parametrize(("path", "parameter", "cap", "asked"), CAPS, ids=[c[0][:60] for c in CAPS])
def test_a_request_over_a_cap_is_a_400_with_the_cap(base_url, path, parameter, cap, asked):
    message = refused(base_url, path, parameter)
    assert cap in message and asked in message


def test_a_body_over_max_upload_is_refused_unread(base_url, monkeypatch):
    monkeypatch.setattr(api, "MAX_UPLOAD", 1000)
    message = refused(base_url, "/api/identify?filename=big.npy", "file", b"\0" * 1001)
    assert "1001 bytes" in message and "MAX_UPLOAD = 1000" in message
    monkeypatch.undo()
    refused(base_url, "/api/identify?filename=small.npy", "file", b"\0" * 1001)  # read: not a .npy file


@pytest.mark.parametrize(
    ("filename", "body", "parameter", "message"),
    [
        ("pe.npy", b"not a table", "file", "pe.npy is not a .npy file"),
        ("pe.npy", npy(np.array(["a", "b"])[:, None].repeat(2, 1)), "file", "pe.npy"),
        ("pe.npy", npy(posenc.table(64, 16))[:-100], "file", "pe.npy"),
        ("pe.npy", b"", "file", "pe.npy is empty"),
        ("pe.safetensors", b"\x08\0\0\0\0\0\0\0{broken}", "file", "pe.safetensors"),
        ("pe.txt", npy(posenc.table(8, 4)), "filename", "unknown file type '.txt' for pe.txt"),
        ("pe", npy(posenc.table(8, 4)), "filename", "unknown file type '' for pe"),
        ("", npy(posenc.table(8, 4)), "filename", "filename is required"),
    ],
)
def test_a_corrupt_or_unknown_file_is_a_400(base_url, filename, body, parameter, message):
    error = refused(base_url, f"/api/identify?filename={filename}", parameter, body)
    assert message in error and "posenc-explore-" not in error  # the temporary file is not named


def test_a_pickle_that_runs_code_is_never_run(base_url, tmp_path):
    torch = pytest.importorskip("torch")
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    file = tmp_path / "evil.pt"
    torch.save({"pe": Payload()}, file)
    assert not marker.exists()
    message = refused(base_url, "/api/identify?filename=evil.pt", "file", file.read_bytes())
    assert "will not run code" in message and "weights_only=True" in message
    assert not marker.exists()


def test_a_bad_config_is_a_400_naming_the_field(base_url):
    refused(base_url, "/api/rope", "config", b"{not json")
    refused(base_url, "/api/rope", "config", b"[1, 2]")
    refused(base_url, "/api/rope", "config", b"[" * 10000 + b"]" * 10000)
    bad_factor = {"head_dim": 64, "rope_scaling": {"rope_type": "yarn", "factor": "a"}}
    assert "factor must be a real number" in refused(
        base_url, "/api/rope", "factor", json.dumps(bad_factor).encode()
    )
    bad_type = {"head_dim": 64, "rope_scaling": {"rope_type": "nope"}}
    refused(base_url, "/api/rope", "rope_type", json.dumps(bad_type).encode())
    assert "head_dim must be" in refused(base_url, "/api/rope", "head_dim", b'{"head_dim": "x"}')


def test_a_post_without_content_length_or_with_the_wrong_method(base_url):
    connection = socket.create_connection(("127.0.0.1", int(base_url.rsplit(":", 1)[1])), timeout=10)
    with connection:
        connection.sendall(
            b"POST /api/identify?filename=a.npy HTTP/1.0\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/octet-stream\r\n\r\n"
        )
        answer = connection.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.0 400") and b'"parameter": "file"' in answer
    assert "takes POST" in refused(base_url, "/api/identify", "method")
    assert "takes GET" in refused(base_url, "/api/table", "method", b"")


# --- files, paths, hosts ----------------------------------------------------------------------------


@pytest.fixture
def static(tmp_path, monkeypatch):
    """A static folder of its own: an index.html, an app.js, a symlink out of it, a file of no known kind."""
    folder = tmp_path / "static"
    folder.mkdir()
    (folder / "index.html").write_text("<!doctype html><title>t</title>")
    (folder / "app.js").write_text("'use strict';")
    (folder / "notes.txt").write_text("not served")
    (folder / ".hidden.js").write_text("not served")
    (tmp_path / "secret.js").write_text("outside")
    (folder / "link.js").symlink_to(tmp_path / "secret.js")
    (folder / "sub").mkdir()
    monkeypatch.setattr(server, "STATIC", folder.resolve())
    return folder


def test_static_files_are_served_with_their_types(base_url, static):
    status, data, got = ask(base_url, "/")
    assert status == 200 and data == b"<!doctype html><title>t</title>"
    assert (
        got["Content-Type"] == "text/html; charset=utf-8"
        and "default-src 'self'" in got["Content-Security-Policy"]
    )
    status, data, got = ask(base_url, "/static/app.js")
    assert (status, data, got["Content-Type"]) == (200, b"'use strict';", "text/javascript; charset=utf-8")


TRAVERSALS = [
    "/static/../server.py",
    "/static/%2e%2e/server.py",
    "/static/%2E%2E%2Fserver.py",
    "/static/..%2f..%2fapi.py",
    "//etc/passwd",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/etc/passwd",
    "/static/link.js",
    "/static/notes.txt",
    "/static/.hidden.js",
    "/static/sub",
    "/static/",
    "/static/app.js%00.html",
    "/static/%ff.js",
    "/static/sub\\..\\app.js",
    "/index.html/..",
]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_nothing_outside_static_is_served(base_url, static, path):
    status, data, _ = ask(base_url, path)
    assert (
        status == 404
        and data["parameter"] == "path"
        and data["error"].startswith("no such endpoint or file: ")
    )


def test_the_real_static_folder_is_the_packages(base_url):
    assert (ROOT / "src" / "posenc" / "explore" / "static").resolve() == server.STATIC
    status, data, got = ask(base_url, "/")
    assert status == 200 and got["Content-Type"] == "text/html; charset=utf-8" and b"app.js" in data


@pytest.mark.parametrize("path", ["/nope", "/api/nope", "/api/table/x", "/apitable", "/favicon.ico"])
def test_an_unknown_path_is_a_404(base_url, path):
    status, data, _ = ask(base_url, path)
    assert status == 404 and data == {"error": f"no such endpoint or file: {path}", "parameter": "path"}


def test_a_request_for_another_host_is_refused(base_url):
    # every hostile form: tests/explore/test_server_security.py
    port = base_url.rsplit(":", 1)[1]
    for host in (
        "attacker.example:80",
        f"127.attacker.example:{port}",
        "127.0.0.1.nip.io",
        "127.0.0.1@evil.com",
    ):
        status, data, _ = ask(base_url, "/api", headers={"Host": host})
        assert status == 400 and data["parameter"] == "host"
    assert ask(base_url, "/api", headers={"Host": "localhost"})[0] == 200
    assert ask(base_url, "/api", headers={"Host": f"localhost:{port}"})[0] == 200


def test_a_post_from_another_origin_is_refused(base_url):
    # every form: tests/explore/test_server_security.py
    config = json.dumps({"head_dim": 64}).encode()
    for headers in (
        {"Origin": "http://attacker.example", "Content-Type": "text/plain"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        status, data, _ = ask(base_url, "/api/rope", config, headers=headers)
        assert status == 403 and data["parameter"] == "origin"
    assert ask(base_url, "/api/rope", config, headers={"Origin": base_url})[0] == 200
    assert refused(base_url, "/api/rope", "config", b'"/etc"').startswith("the body must be a JSON object")


def test_the_server_answers_after_every_bad_request(base_url):
    for path, _, _ in BAD + [(c[0], None, None) for c in CAPS]:
        ask(base_url, path)
    for path in TRAVERSALS:
        ask(base_url, path)
    ask(base_url, "/api/identify?filename=x.npy", b"\x93NUMPY garbage")
    assert ok(base_url, "/api")["caps"]["MAX_DOT"] == 512


# --- the command ------------------------------------------------------------------------------------


def start_explore() -> subprocess.Popen:
    """A real ``posenc explore`` on a free port, without a browser; its first stdout line names the URL."""
    return subprocess.Popen(
        [sys.executable, "-m", "posenc", "explore", "--port", "0", "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # SIGINT as a terminal delivers it: a test run started in the background (`make test &`) has it
        # ignored, and its children inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_posenc_explore_serves_until_sigint():
    process = start_explore()
    try:
        line = process.stdout.readline()
        assert line.startswith("posenc explore: serving on http://127.0.0.1:") and line.endswith(
            "/ (Ctrl-C stops)\n"
        )
        url = line.split()[4].rstrip("/")
        assert ok(url, "/api")["endpoints"] == api.ENDPOINTS
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 130 and err == "posenc: interrupted\n" and out == ""


def test_a_port_in_use_is_one_error_line(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["explore", "--port", str(port), "--no-browser"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"posenc: error: cannot serve on 127.0.0.1:{port}: Address already in use")


def test_the_command_opens_the_browser_and_warns_off_loopback(capsys, monkeypatch):
    opened = threading.Event()
    urls = []

    def open_browser(url):
        urls.append(url)
        opened.set()
        return True  # a browser took it (webbrowser.open's answer)

    def interrupted(self, poll_interval=0.5):
        assert opened.wait(10)
        raise KeyboardInterrupt

    monkeypatch.setattr("webbrowser.open", open_browser)
    monkeypatch.setattr(server.Server, "serve_forever", interrupted)
    assert main(["explore", "--port", "0"]) == 130
    out, err = capsys.readouterr()
    assert urls == [out.split()[4]] and err == "posenc: interrupted\n"
    opened.clear()
    assert main(["explore", "--port", "0", "--host", "0.0.0.0"]) == 130
    out, err = capsys.readouterr()
    assert out.startswith("posenc explore: serving on http://0.0.0.0:")
    warning, interrupted_line = err.splitlines()
    assert "reachable from the network" in warning and interrupted_line == "posenc: interrupted"


@pytest.mark.parametrize("port", ["-1", "65536", "x"])
def test_a_bad_port_is_one_error_line(capsys, port):
    assert main(["explore", "--port", port, "--no-browser"]) == 2
    assert capsys.readouterr().err.startswith("posenc: error:")


def test_the_guides_numbers_are_the_explorers() -> None:
    """docs/explore.md's collision counts are what /api/table gives for the setting it names."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "explore.md").read_text(encoding="utf-8")
    said = re.search(r"`posenc: (\d+) · usual code: (\d+)` for bfloat16, d_model 4 and 1024 positions", page)
    assert said is not None
    counts = api.table({"length": "1024", "d_model": "4", "dtype": "bfloat16"})["collisions"]
    assert (counts["posenc"], counts["usual"]) == (int(said[1]), int(said[2]))
    assert "the positions running\nacross" in page  # matrixImage(length, width, (x, y) => values[x][y])


def test_the_pages_notes_say_what_the_numbers_count() -> None:
    """The collisions count is the positions repeating an earlier row (length less the distinct rows: 511
    for bfloat16, d_model 4, 1024 positions; "equals another position's row" would count 704), and the
    criteria start at 0 whatever the start (the help said "over the options' positions")."""
    from posenc.analysis.encodings import naive_table

    html = " ".join((Path(api.__file__).parent / "static" / "index.html").read_text(encoding="utf-8").split())
    assert "whose row repeats an earlier position's row (the range's length less its distinct rows)" in html
    assert "equals another position's row" not in html
    rows = naive_table(1024, 4, dtype="bfloat16")
    distinct = len(np.unique(rows.view(np.uint16), axis=0))
    assert api.table({"length": "1024", "d_model": "4", "dtype": "bfloat16"})["collisions"]["usual"] == (
        1024 - distinct
    )
    assert "over positions 0 .. length − 1" in html and "the start is not used" in html
    moved = api.criteria({"length": "64", "d_model": "8", "start": "1000"})
    assert moved == api.criteria({"length": "64", "d_model": "8"})


def test_without_a_browser_explore_says_what_to_open(monkeypatch, capsys) -> None:
    import webbrowser

    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    assert server.open_browser_on("http://127.0.0.1:8765/") is False
    said = capsys.readouterr().err
    assert said.startswith("posenc explore: no browser found on this machine; open http://127.0.0.1:8765/")
    assert "ssh -L 8765:127.0.0.1:8765 THIS_HOST" in said
    monkeypatch.setattr(webbrowser, "open", lambda url: True)
    assert server.open_browser_on("http://127.0.0.1:8765/") is True and capsys.readouterr().err == ""


def test_a_loopback_address_written_short_is_served_as_loopback_without_a_warning(capsys, monkeypatch):
    # --host 127.1 binds 127.0.0.1, where the server checks every Host name: the command warned that it
    # checked none ("reachable from the network")
    def interrupted(self, poll_interval=0.5):
        raise KeyboardInterrupt

    monkeypatch.setattr(server.Server, "serve_forever", interrupted)
    assert main(["explore", "--port", "0", "--host", "127.1", "--no-browser"]) == 130
    out, err = capsys.readouterr()
    assert out.startswith("posenc explore: serving on http://127.0.0.1:") and err == "posenc: interrupted\n"
