"""The environment variables posenc reads (POSENC_NUM_THREADS alone) are validated the same way by every
call, small or large: an invalid value is the same ValueError everywhere, naming the variable, the value
and the fix. Each case runs in a fresh interpreter, the variable set before posenc is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_CALLS = r"""
import json, sys
import posenc
from posenc import rope
from posenc.cli import main

calls = {
    "small table": lambda: posenc.table(4, 8),
    "small table again": lambda: posenc.table(4, 8),
    "large table": lambda: posenc.table(4096, 512),
    "small encode": lambda: posenc.encode([1, 2, 3], 16),
    "small rope": lambda: rope.cos_sin([0, 1], rope.config(head_dim=8)),
}
results = {}
for name, call in calls.items():
    try:
        call()
        results[name] = "ok"
    except ValueError as error:
        results[name] = str(error)
results["cli"] = main(["table", "4", "8"])
print(json.dumps(results))
"""


def _run(value):
    environment = {key: v for key, v in os.environ.items() if key != "POSENC_NUM_THREADS"}
    if value is not None:
        environment["POSENC_NUM_THREADS"] = value
    done = subprocess.run(
        [sys.executable, "-c", _CALLS], capture_output=True, text=True, env=environment, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize("value", ["abc", "0", "-3", "1e9", "2.5", "99999999999999999999"])
def test_an_invalid_thread_count_is_the_same_error_for_every_call_small_or_large(value):
    results, stderr = _run(value)
    cli = results.pop("cli")
    messages = set(results.values())
    assert len(messages) == 1, results  # the same message for every call, small or large, first or later
    (message,) = messages
    assert f"POSENC_NUM_THREADS={value!r}" in message
    assert "set POSENC_NUM_THREADS to an integer from 1 to 1024, or unset it" in message
    assert cli == 2 and stderr.strip().splitlines() == [f"posenc: error: {message}"]


@pytest.mark.parametrize("value", [None, "", "1", " 3 ", "1024"])
def test_a_valid_or_absent_thread_count_runs_every_call(value):
    results, stderr = _run(value)
    assert results == dict.fromkeys(
        ["small table", "small table again", "large table", "small encode", "small rope"], "ok"
    ) | {"cli": 0}
    assert stderr == ""
