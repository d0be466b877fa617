"""The first-launch guard of the Triton kernels (posenc.torch.kernels.first_launch): a specialization is
probed once against the portable algorithm; a kernel that gives other bits (a planted fault here; a
miscompile on a GPU) warns once, names the first differing value, and hands that specialization to the
portable algorithm, so results stay exact. The unit tests drive ``first_launch.trusted`` with plain
callables; the end-to-end ones run the real kernels in Triton's interpreter (this file as a script,
TRITON_INTERPRET=1), the CPU standing in for CUDA, with the launchers' output corrupted by one unit in the
last place."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.torch.kernels import first_launch

CUDA = torch.device("cuda")
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _fresh_probes():
    first_launch.forget()
    yield
    first_launch.forget()


def _counted(value):
    calls = []

    def call():
        calls.append(1)
        return value() if callable(value) else value

    return call, calls


def test_a_kernel_that_agrees_is_probed_once_and_trusted():
    run, runs = _counted(torch.arange(6.0))
    reference, references = _counted(torch.arange(6.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert first_launch.trusted("encode", CPU, {"dtype": "float32"}, run, reference)
        assert first_launch.trusted("encode", CPU, {"dtype": "float32"}, run, reference)
    assert (len(runs), len(references)) == (1, 1)
    [probe] = first_launch.kernel_status()
    assert probe["status"] == "verified" and probe["specialization"] == {"dtype": "float32"}
    assert probe["kernel"] == "encode" and probe["device"] == "cpu" and probe["seconds"] >= 0


def test_a_kernel_that_differs_warns_once_and_is_not_trusted_again():
    wrong = torch.tensor([[0.0, 1.0], [2.0, 3.5]])
    run, runs = _counted(wrong)
    reference = lambda: torch.tensor([[0.0, 1.0], [2.0, 3.0]])  # noqa: E731
    with pytest.warns(first_launch.KernelMismatchWarning) as caught:
        assert not first_launch.trusted("table", CPU, {"dtype": "float32", "limbs": 5}, run, reference)
    message = str(caught[0].message)
    assert "table kernel on cpu (dtype=float32, limbs=5)" in message
    assert "1 of 4 values differ; the first, output 0 at [1, 1], is 3.5" in message
    assert "the portable algorithm gives 3.0" in message and "from now on" in message
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning
        assert not first_launch.trusted("table", CPU, {"dtype": "float32", "limbs": 5}, run, reference)
    assert len(runs) == 1
    [probe] = first_launch.kernel_status()
    assert probe["status"] == "mismatch" and "at [1, 1]" in probe["detail"]


def test_bits_decide_not_values():
    zeros = lambda: torch.zeros(3)  # noqa: E731
    negative_zeros = lambda: -torch.zeros(3)  # noqa: E731  (equal values, other bits)
    with pytest.warns(first_launch.KernelMismatchWarning, match="3 of 3 values differ"):
        assert not first_launch.trusted("encode", CPU, {"case": "signed zero"}, negative_zeros, zeros)
    bf16 = lambda: torch.ones(2, dtype=torch.bfloat16)  # noqa: E731
    shown = r"output 0 is float32 \(2,\), the portable algorithm's bfloat16 \(2,\)"
    with pytest.warns(first_launch.KernelMismatchWarning, match=shown):
        assert not first_launch.trusted("encode", CPU, {"case": "dtype"}, lambda: torch.ones(2), bf16)


def test_a_launch_that_raises_hands_the_specialization_to_the_portable_algorithm():
    def run():
        raise RuntimeError("PassManager::run failed\nmore lines")

    with pytest.warns(
        first_launch.KernelMismatchWarning, match="the launch raised RuntimeError: PassManager::run"
    ):
        assert not first_launch.trusted("fused rotary", CPU, {"q": "bfloat16"}, run, lambda: torch.zeros(1))


def test_tuples_of_outputs_are_compared_each():
    good = (torch.ones(2), torch.zeros(2))
    bad = (torch.ones(2), torch.tensor([0.0, 1.0]))
    with pytest.warns(first_launch.KernelMismatchWarning, match="output 1 at \\[1\\]"):
        assert not first_launch.trusted("fused rotary", CPU, {}, lambda: bad, lambda: good)


def test_no_probe_inside_a_cuda_graph_capture(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    run, runs = _counted(torch.ones(1))
    assert not first_launch.trusted("encode", CUDA, {}, run, run)  # the portable algorithm for this call
    assert runs == [] and first_launch.kernel_status() == []
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 0)
    assert first_launch.trusted("encode", CUDA, {}, run, run)  # probed at the next call outside a capture
    assert len(runs) == 2


def test_the_probe_turns_sync_debug_mode_off_and_back(monkeypatch):
    modes = []
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: modes.append("sync"))
    monkeypatch.setattr(torch.cuda, "get_sync_debug_mode", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_sync_debug_mode", modes.append)
    assert first_launch.trusted("encode", CUDA, {}, lambda: torch.ones(1), lambda: torch.ones(1))
    assert modes == [0, "sync", 2]


def test_kernel_status_is_the_callers_own():
    first_launch.trusted("encode", CPU, {"a": 1}, lambda: torch.ones(1), lambda: torch.ones(1))
    status = first_launch.kernel_status()
    status[0]["status"] = "changed"
    status[0]["specialization"]["a"] = 2
    assert first_launch.kernel_status()[0]["status"] == "verified"
    assert first_launch.kernel_status()[0]["specialization"] == {"a": 1}


def test_kernel_status_is_public():
    import posenc.torch as pt

    assert pt.kernel_status is first_launch.kernel_status
    assert pt.KernelMismatchWarning is first_launch.KernelMismatchWarning


# --- the real kernels, in Triton's interpreter -------------------------------------------------------------


def _corrupt_one_value(module, name: str) -> None:
    """Make ``module.name`` (a launcher) add one to the first value it returns: a planted miscompile."""
    real = getattr(module, name)

    def launch(*args, **kwargs):
        out = real(*args, **kwargs)
        first = out[0]
        bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[first.element_size()]
        first.view(-1).view(bits)[0] += 1
        return out

    setattr(module, name, launch)


def _run_cases(out: Path) -> None:
    import posenc.rope as rope
    import posenc.torch as pt
    from posenc.torch import fused_rotary
    from posenc.torch.kernels import common, encode_launch, table_launch

    common.KERNEL_DEVICES.append("cpu")
    table_launch.SMALL_TABLE = 0  # the small table below by angle addition, as large ones are
    exact, table = torch.ops.posenc.exact, torch.ops.posenc.table
    params = rope.config(head_dim=8, base=100.0)
    q = torch.linspace(-2, 2, 2 * 3 * 5 * 8).reshape(2, 3, 5, 8).to(torch.bfloat16)
    ids = torch.tensor([[0, 1, 2, 1000, 70000]])

    def calls() -> dict[str, torch.Tensor]:
        return {
            "encode": exact(
                torch.tensor([[1, 2, 3]]), None, 8, 10000.0, 0.0, 1.0, "interleaved", "zero", "float32"
            ),
            "offset": exact(
                torch.tensor([1.5, 2.0]),
                torch.tensor([3, 4]),
                8,
                10000.0,
                0.0,
                1.0,
                "interleaved",
                "zero",
                "bfloat16",
            ),
            "table": table(20, 7, CPU, 8, 10000.0, 0.0, 1.0, "interleaved", "zero", "float16"),
            "fused": torch.stack(pt.apply_rotary(q, q, position_ids=ids, params=params)),
        }

    results = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, got in calls().items():
            results[f"good/{name}"] = got.float().numpy()
        results["good/status"] = np.array([p["status"] for p in first_launch.kernel_status()])
        results["good/warnings"] = np.array(len(caught))
        first_launch.forget()
        _corrupt_one_value(encode_launch, "launch")
        _corrupt_one_value(table_launch, "launch")
        _corrupt_one_value(table_launch, "ids_launch")
        _corrupt_one_value(fused_rotary, "launch")
        for round_ in ("first", "again"):
            for name, got in calls().items():
                results[f"bad/{round_}/{name}"] = got.float().numpy()
        results["bad/status"] = np.array([p["status"] for p in first_launch.kernel_status()])
        results["bad/kernels"] = np.array([p["kernel"] for p in first_launch.kernel_status()])
        results["bad/warnings"] = np.array([str(w.message) for w in caught])
    np.savez(out, **results)


@pytest.fixture(scope="module")
def kernel_results(tmp_path_factory):
    from tests.support.interpreted import interpreted_results

    return interpreted_results(__file__, tmp_path_factory.mktemp("kernel_guard") / "results.npz")


def _want() -> dict[str, np.ndarray]:
    import posenc
    import posenc.rope as rope

    params = rope.config(head_dim=8, base=100.0)
    q = torch.linspace(-2, 2, 2 * 3 * 5 * 8).reshape(2, 3, 5, 8).to(torch.bfloat16)
    cos, sin = rope.cos_sin(np.array([[0, 1, 2, 1000, 70000]]), params, dtype="float32")
    rotated = rope.arrays.apply_rotary(q, q, torch.from_numpy(cos), torch.from_numpy(sin))
    return {
        "encode": posenc.encode([[1, 2, 3]], 8),
        "offset": torch.from_numpy(posenc.encode([4.5, 6.0], 8)).to(torch.bfloat16).float().numpy(),
        "table": posenc.table(20, 8, start=7, dtype="float16").astype(np.float32),
        "fused": torch.stack(rotated).float().numpy(),
    }


def test_the_real_kernels_pass_their_probes(kernel_results):
    assert list(kernel_results["good/status"]) == ["verified"] * 4
    assert kernel_results["good/warnings"] == 0
    for name, want in _want().items():
        np.testing.assert_array_equal(kernel_results[f"good/{name}"], want, err_msg=name)


def test_a_planted_fault_is_caught_named_once_and_the_results_stay_exact(kernel_results):
    # integer ids, refused by angle addition, take the encode kernel, refused too; the table, refused, takes
    # its positions the same two ways (in float16: two more specializations); the fused apply's rows are the
    # first call's specializations (refused already), its rotation kernel is refused
    assert list(kernel_results["bad/status"]) == ["mismatch"] * 7
    kernels = ["encode", "encode", "encode", "fused rotary", "ids", "ids", "table"]
    assert sorted(kernel_results["bad/kernels"]) == kernels
    messages = kernel_results["bad/warnings"]
    assert len(messages) == 7  # one per specialization, not one per call
    assert all("failed its first-launch check" in m and "the portable algorithm gives" in m for m in messages)
    for name, want in _want().items():
        for round_ in ("first", "again"):
            np.testing.assert_array_equal(kernel_results[f"bad/{round_}/{name}"], want, err_msg=name)


if __name__ == "__main__":  # the subprocess of kernel_results (TRITON_INTERPRET=1)
    _run_cases(Path(sys.argv[1]))
