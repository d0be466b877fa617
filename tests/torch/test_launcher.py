"""posenc.torch.kernels.common.Launcher: Triton's host work once per specialization, then the compiled
kernel's own launcher with exactly the arguments Triton passes it (every parameter, the constants last), and
Triton again for any argument Triton could specialize on differently, a new device, or a launch hook."""

from __future__ import annotations

import types

import pytest
import torch

from posenc.torch.kernels import common


class _Compiled:
    function, packed_metadata = "function", "metadata"

    def __init__(self) -> None:
        self.runs = []

    def run(self, *args):
        self.runs.append(args)


class _Kernel:
    """A Triton JIT function's surface: its parameter names and kernel[grid](...) -> compiled kernel."""

    arg_names = ("x_ptr", "n", "scale", "BLOCK", "KIND")

    def __init__(self) -> None:
        self.calls, self.compiled = [], _Compiled()

    def __getitem__(self, grid):
        def launch(*args, **options):
            self.calls.append((grid, args, options))
            return self.compiled

        return launch


@pytest.fixture
def direct(monkeypatch):
    monkeypatch.setattr(common, "_DIRECT", True)
    monkeypatch.setattr(common, "_hooked", lambda: False)
    device = types.SimpleNamespace(index=0)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: device.index)
    monkeypatch.setattr(common, "_raw_stream", lambda index: 77 + index)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    return device


def test_the_second_call_of_a_specialization_runs_the_compiled_kernel_directly(direct):
    kernel = _Kernel()
    launch = common.Launcher(kernel)
    x = torch.zeros(64)
    options = {"BLOCK": 128, "KIND": 2, "num_warps": 4}
    launch[(3,)](x, 100, 0.5, **options)
    assert len(kernel.calls) == 1 and not kernel.compiled.runs
    launch[(5, 2)](x, 300, 0.25, **options)  # 100 and 300: both 32-bit, neither 1 nor a multiple of 16
    assert len(kernel.calls) == 1
    want = (5, 2, 1, 77, "function", "metadata", None, None, None, x, 300, 0.25, 128, 2)
    assert kernel.compiled.runs == [want]


@pytest.mark.parametrize(
    "change",
    [
        {"n": 1},  # Triton may specialize n == 1
        {"n": 96},  # divisible by 16
        {"n": 2**40},  # a 64-bit integer
        {"x": "misaligned"},  # a pointer off 16 bytes
        {"x": "float64"},  # another dtype
        {"BLOCK": 64},  # another constant
        {"device": 1},
    ],
)
def test_anything_triton_could_specialize_on_goes_through_triton_again(direct, change):
    kernel = _Kernel()
    launch = common.Launcher(kernel)
    x = torch.zeros(64)
    launch[(1,)](x, 100, 0.5, BLOCK=128, KIND=2)
    x2 = {"misaligned": x[1:], "float64": x.double()}.get(change.get("x"), x)
    direct.index = change.get("device", 0)
    launch[(1,)](x2, change.get("n", 100), 0.5, BLOCK=change.get("BLOCK", 128), KIND=2)
    assert len(kernel.calls) == 2 and not kernel.compiled.runs


def test_the_key_tells_apart_what_triton_specializes_on():
    import enum

    class Size(enum.IntEnum):
        ONE = 1

    key = common.arguments_key
    assert key((True,)) != key((1,)) and key((True,)) != key((False,))
    assert key((Size.ONE,)) == key((1,)) != key((3,))  # an int subclass is an int
    assert key((2**31 - 1,)) != key((2**31,)) != key((2**63,))  # 32-bit, 64-bit, unsigned 64-bit
    assert key((-(2**31) + 1,)) == key((5,)) and key((32,)) != key((48 + 1,))
    x = torch.zeros(8)
    assert key((x,)) == key((torch.zeros(3),)) != key((x[1:],)) != key((x.double(),))
    assert key((0.5, None)) == key((2.0, None)) != key((2, None))


def test_a_launch_hook_or_the_interpreter_sees_every_launch(direct, monkeypatch):
    kernel = _Kernel()
    launch = common.Launcher(kernel)
    x = torch.zeros(64)
    monkeypatch.setattr(common, "_hooked", lambda: True)
    for _ in range(3):
        launch[(1,)](x, 100, 0.5, BLOCK=128, KIND=2)
    monkeypatch.setattr(common, "_hooked", lambda: False)
    monkeypatch.setattr(common, "_DIRECT", False)
    launch[(1,)](x, 100, 0.5, BLOCK=128, KIND=2)
    assert len(kernel.calls) == 4 and not kernel.compiled.runs


def test_no_launch_hook_by_default_and_one_set_is_seen():
    """Triton's own knobs: its empty hook chains are no hook (read as one, no launch was ever direct)."""
    knobs = pytest.importorskip("triton.knobs")
    runtime = knobs.runtime
    assert not common._hooked()

    def hook(*args):
        return None

    chain = runtime.launch_enter_hook
    if hasattr(chain, "add"):
        chain.add(hook)
        try:
            assert common._hooked()
        finally:
            chain.remove(hook)
    else:  # a triton whose hooks are plain attributes
        runtime.launch_enter_hook = hook
        try:
            assert common._hooked()
        finally:
            runtime.launch_enter_hook = None
    assert not common._hooked()


def test_a_kernel_without_a_compiled_launcher_always_goes_through_triton(direct):
    kernel = _Kernel()
    kernel.compiled = None  # what Triton's interpreter returns
    launch = common.Launcher(kernel)
    for _ in range(2):
        launch[(1,)](torch.zeros(4), 3, 1.0, BLOCK=4, KIND=0)
    assert len(kernel.calls) == 2
