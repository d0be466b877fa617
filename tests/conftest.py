import sys
from pathlib import Path

import pytest

# tests/reference.py is imported as a plain module by the test files.
sys.path.insert(0, str(Path(__file__).parent))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default="cpu",
        help="the torch device of tests/test_torch_device.py (default cpu; cuda on a GPU machine)",
    )


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The torch device of ``--device``; refuses a device that is not there rather than skipping."""
    import torch

    name = request.config.getoption("--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {name}: torch sees no CUDA device on this machine")
    return name
