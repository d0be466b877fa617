"""The fuzz suite (tests/support/fuzzing.py), the command: ``posenc table``, ``check`` and ``identify``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc
from posenc import presets
from tests.support.fuzz_cases import (
    DTYPE_NAMES,
    LAYOUTS,
    ODD_RULES,
)
from tests.support.fuzzing import (
    NAN,
    assert_clean_failure,
    fuzz,
    run_cli,
)

NUMBERS = [
    "0",
    "1",
    "2",
    "-1",
    "2.0",
    "0.5",
    "nan",
    "-inf",
    "1e309",
    "99999999999",
    "2147483648",
    "-0",
    "0x10",
    "",
    "abc",
    "1e4",
    "100",
    "1_000",
    "-2147483647",
]


@st.composite
def table_argv(draw) -> list[str]:
    length = draw(
        st.sampled_from(["0", "1", "3", "5", "17", "-1", "2.0", "x", "2147483648", "1099511627776"])
    )
    d_model = draw(
        st.sampled_from(["4", "5", "8", "2", "64", "0", "1", "1048577", "2147483648", "-4", "4.0", "x"])
    )
    argv = ["table", length, d_model]
    for option in draw(
        st.lists(
            st.sampled_from(
                [
                    "--base",
                    "--shift",
                    "--scale",
                    "--layout",
                    "--odd",
                    "--start",
                    "--dtype",
                    "--digits",
                    "--format",
                    "--preset",
                ]
            ),
            max_size=3,
            unique=True,
        )
    ):
        value = {
            "--layout": st.sampled_from([*LAYOUTS, "x", ""]),
            "--odd": st.sampled_from([*ODD_RULES, "x"]),
            "--dtype": st.sampled_from([*DTYPE_NAMES, "int8", "f4"]),
            "--format": st.sampled_from(["text", "csv", "json", "npy", "xml"]),
            "--preset": st.sampled_from([*presets.names(), "nope"]),
            "--digits": st.sampled_from(["0", "3", "17", "-1", "99999999999", "x", "400"]),
        }.get(option, st.sampled_from(NUMBERS))
        argv += [option, draw(value)]
    return argv


@fuzz(150)
@given(argv=table_argv())
def test_cli_table(argv, tmp_path_factory):
    if "npy" in argv and argv[1] != "0":  # (length 0 without --output: the error that asks for it)
        argv = [*argv, "--output", str(tmp_path_factory.mktemp("npy") / "pe.npy")]
    code, out, err = run_cli(argv)
    if code == 0:
        assert not err.strip(), err
        options = dict(zip(argv[3::2], argv[4::2], strict=True))
        fmt = options.get("--format", "text")
        if fmt in ("csv", "json") and "--digits" not in options:
            length, d_model = int(argv[1]), int(argv[2])
            table_options = {
                k[2:]: (
                    int(v)
                    if v.lstrip("-").isdigit()
                    else float(v)
                    if k in ("--base", "--shift", "--scale")
                    else v
                )
                for k, v in options.items()
                if k in ("--base", "--shift", "--scale", "--layout", "--odd", "--start", "--dtype")
            }
            if "--preset" in options:
                table_options = {**presets.get(options["--preset"]).options, **table_options}
            want = posenc.table(length, d_model, **table_options)
            if fmt == "json":
                got = np.array(json.loads(out)["values"], dtype=np.float64).reshape(length, d_model)
            else:
                got = np.array(
                    [[float(v) for v in line.split(",")[1:]] for line in out.splitlines()[1:]],
                    dtype=np.float64,
                ).reshape(length, d_model)
            # the shortest decimal that reads back as the same value of the table's dtype
            assert np.array_equal(got.astype(want.dtype), want), (
                "the command's values differ from posenc.table"
            )
        return
    options = [a.lstrip("-").replace("-", "_") for a in argv if a.startswith("--")]
    assert_clean_failure(
        argv, code, err, [*argv[1:], *options, "length", "d_model", "LENGTH", "D_MODEL", "output"]
    )


@st.composite
def check_argv(draw) -> list[str]:
    argv = ["check"]
    for option in draw(
        st.lists(
            st.sampled_from(
                ["--d-model", "--length", "--base", "--shift", "--layout", "--dtype", "--compute", "--json"]
            ),
            max_size=3,
            unique=True,
        )
    ):
        if option == "--json":
            argv.append(option)
            continue
        value = {
            "--d-model": st.sampled_from(["4", "8", "3", "2", "0", "x", "2147483648"]),
            "--length": st.sampled_from(["1", "2", "17", "64", "0", "-1", "1073741825", "2147483648", "1e3"]),
            "--layout": st.sampled_from([*LAYOUTS, "x"]),
            "--dtype": st.sampled_from([*DTYPE_NAMES, "int8"]),
            "--compute": st.sampled_from(["exact", "dtype", "fast"]),
        }.get(option, st.sampled_from(NUMBERS))
        argv += [option, draw(value)]
    if "--length" not in argv:
        argv += ["--length", "16"]
    if "--d-model" not in argv:
        argv += ["--d-model", "8"]
    return argv


@fuzz(60)
@given(argv=check_argv())
def test_cli_check(argv):
    code, out, err = run_cli(argv)
    if code in (0, 1):
        assert out.strip() and "Traceback" not in err
        if "--json" in argv:
            report = json.loads(out)
            assert isinstance(report, dict)
        return
    options = [a.lstrip("-").replace("-", "_") for a in argv if a.startswith("--")]
    assert_clean_failure(argv, code, err, [*argv[1:], *options, "length", "d_model", "d-model"])


@pytest.fixture(scope="module")
def stored_files(tmp_path_factory) -> dict[str, Path]:
    """Tables on disk: good ones, and corrupt .npy, .pt and .safetensors files of many kinds."""
    from safetensors.numpy import save_file

    folder = tmp_path_factory.mktemp("stored")
    files = {}
    good = posenc.table(32, 8)

    def put(name, data: bytes | None = None, array=None):
        path = folder / name
        if array is not None:
            np.save(path, array)
        elif data is not None:
            path.write_bytes(data)
        files[name] = path

    put("good.npy", array=good)
    torch.save({"encoder.embed_positions.weight": torch.from_numpy(good)}, folder / "good.pt")
    files["good.pt"] = folder / "good.pt"
    save_file({"pos": good}, str(folder / "good.safetensors"))
    files["good.safetensors"] = folder / "good.safetensors"
    raw = (folder / "good.npy").read_bytes()
    for suffix, whole in (
        ("npy", raw),
        ("pt", files["good.pt"].read_bytes()),
        ("safetensors", files["good.safetensors"].read_bytes()),
    ):
        put(f"empty.{suffix}", b"")
        put(f"garbage.{suffix}", b"garbage \x00\xff" * 3)
        put(f"truncated.{suffix}", whole[: len(whole) // 2])
        put(f"header-only.{suffix}", whole[:40])
        put(f"flipped.{suffix}", whole[:20] + bytes(b ^ 0x5A for b in whole[20:60]) + whole[60:])
    put("object.npy", array=np.array([[1, None]], dtype=object))
    put("complex.npy", array=good.astype(np.complex64))
    put("1d.npy", array=good[0])
    put("3d.npy", array=good[None, None])
    put("nan.npy", array=np.full((8, 8), NAN))
    put("int.npy", array=good.astype(np.int8))
    put("empty-table.npy", array=np.zeros((0, 8), np.float32))
    torch.save([1, 2, 3], folder / "list.pt")
    files["list.pt"] = folder / "list.pt"
    torch.save({"a": torch.zeros(3, 4), "b_pos": torch.zeros(2, 3, 4, dtype=torch.int64)}, folder / "odd.pt")
    files["odd.pt"] = folder / "odd.pt"
    (folder / "folder.npy").mkdir()
    files["folder.npy"] = folder / "folder.npy"
    files["missing.npy"] = folder / "missing.npy"
    put("table.txt", b"1 2 3")
    return files


STORED = [
    *(f"{kind}.{suffix}" for kind in ("good", "empty", "garbage", "truncated", "header-only", "flipped")
      for suffix in ("npy", "pt", "safetensors")),
    "object.npy", "complex.npy", "1d.npy", "3d.npy", "nan.npy", "int.npy", "empty-table.npy", "list.pt",
    "odd.pt", "folder.npy", "missing.npy", "table.txt",
]  # fmt: skip


@pytest.mark.parametrize("key", [None, "pos", "nope"])
@pytest.mark.parametrize("name", STORED)
def test_cli_identify_any_file(stored_files, name, key):
    path = stored_files[name]
    argv = ["identify", str(path), *(["--key", key] if key else [])]
    code, out, err = run_cli(argv)
    if code in (0, 1):
        assert out.startswith(str(path)) or out.startswith("{"), out
        if name.startswith("good") and key is None:
            assert code == 0, out
        return
    assert_clean_failure(argv, code, err, [path.name, "file", "table", "shape", *([key] if key else [])])
