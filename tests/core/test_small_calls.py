"""The smallest CPU calls (``encode`` of one position, ``table(512, 512)``) keep their isolation and bits
on the quick paths they take: NumPy's error state set by errstate's own decorator, POSENC_NUM_THREADS read
from the dictionary behind ``os.environ``, one block run inline, the row of position 0 written whole."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

import posenc
from posenc import validation
from posenc.core import parallel
from posenc.core.isolated import isolated
from tests.support.public_calls import NUMERIC_STATES

CALLS = {
    "encode one position": lambda: posenc.encode(np.array([7]), 512),
    "encode an int": lambda: posenc.encode(5, 512),
    "encode tiny reals": lambda: posenc.encode([1e-310, 5e-324, -0.0], 8, dtype="float64"),
    "table(512, 512)": lambda: posenc.table(512, 512),
    "table around 0, float16": lambda: posenc.table(64, 63, start=-40, dtype="float16", odd="zero"),
}


STATES = NUMERIC_STATES


@pytest.mark.parametrize("state", sorted(STATES))
@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_small_calls_are_the_same_under_any_numeric_state(name, state):
    with np.errstate(all="ignore"):
        want = CALLS[name]()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with STATES[state]():
            before = np.geterr()
            got = CALLS[name]()
            assert np.geterr() == before  # the caller's state is back after the call
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_an_isolated_function_runs_under_ignore_and_restores_the_callers_state_also_on_an_error():
    seen = []

    @isolated
    def inside(fail: bool) -> float:
        seen.append(np.geterr())
        if fail:
            raise KeyError("refused")
        return float(np.float16(1e-4) * np.float16(1e-4))

    old = np.seterr(all="raise")
    try:
        assert inside(False) == 0.0
        with pytest.raises(KeyError):
            inside(True)
        assert np.geterr() == dict.fromkeys(("divide", "over", "under", "invalid"), "raise")
    finally:
        np.seterr(**old)
    assert seen == [dict.fromkeys(("divide", "over", "under", "invalid"), "ignore")] * 2
    assert inside.__name__ == "inside"


def test_isolated_calls_in_threads_leave_each_thread_its_own_state():
    barrier, errors = threading.Barrier(4), []
    want = posenc.encode(np.array([7]), 512).tobytes()

    def run(mode: str) -> None:
        try:
            with np.errstate(all=mode):
                barrier.wait()
                for _ in range(200):
                    assert posenc.encode(np.array([7]), 512).tobytes() == want
                    assert np.geterr()["under"] == mode
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(mode,)) for mode in ("raise", "warn", "ignore", "print")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_the_thread_setting_follows_os_environ_at_every_call(monkeypatch):
    monkeypatch.delenv("POSENC_NUM_THREADS", raising=False)
    assert parallel._setting() is None
    monkeypatch.setenv("POSENC_NUM_THREADS", " 3 ")
    assert parallel._setting() == 3 and parallel.threads() == 3
    monkeypatch.setenv("POSENC_NUM_THREADS", "two")
    with pytest.raises(ValueError, match="POSENC_NUM_THREADS='two'"):
        posenc.encode(np.array([7]), 512)  # the smallest call refuses it too
    os.environ.pop("POSENC_NUM_THREADS")
    assert parallel._setting() is None
    posenc.encode(np.array([7]), 512)


def test_the_thread_setting_is_read_from_a_replaced_environ_too(monkeypatch):
    monkeypatch.setattr(os, "environ", {"POSENC_NUM_THREADS": "2"})
    assert parallel._setting() == 2
    monkeypatch.setattr(os, "environ", {"POSENC_NUM_THREADS": "0"})
    with pytest.raises(ValueError, match="POSENC_NUM_THREADS='0'"):
        posenc.table(4, 8)


@pytest.mark.parametrize("total, step", [(0, 5), (1, 5), (5, 5), (6, 5), (11, 5)])
def test_run_blocks_covers_every_row_once(total, step):
    seen = []
    parallel.run_blocks(lambda lo, hi: seen.append((lo, hi)), total, step, elements=0)
    assert seen == [(lo, min(lo + step, total)) for lo in range(0, total, step)]


def test_positions_are_a_fresh_float64_array():
    for given in (np.array([1.5, -0.0]), np.array([1.5, 2.0], dtype=np.float32), np.arange(3)):
        got = validation.positions(given)
        assert got.dtype == np.float64 and not np.shares_memory(got, given)
        np.testing.assert_array_equal(got, given)
    assert np.signbit(validation.positions(np.array([-0.0])))[0]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["interleaved", "sin_cos", "cos_sin"])
@pytest.mark.parametrize("odd", ["zero", "literal", "drop"])
@pytest.mark.parametrize("start", [0, -1, -57])
def test_a_table_through_position_0_equals_encode_row_for_row(dtype, layout, odd, start):
    options = {"dtype": dtype, "layout": layout, "odd": odd}
    table = posenc.table(300, 65, start=start, **options)
    want = posenc.encode(np.arange(start, start + 300), 65, **options)
    assert table.tobytes() == want.tobytes()
    origin = posenc.encode(0, 65, **options)
    assert set(origin.astype(np.float64).tolist()) <= {0.0, 1.0}
    assert not np.signbit(origin.astype(np.float64)).any()
