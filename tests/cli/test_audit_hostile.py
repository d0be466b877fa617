"""``posenc audit`` against hostile targets, through a real ``posenc`` process (stdin closed): a model folder
never runs code of its own, a folder's bad config or weights file is one line and exit 2 (with ``--json``,
one JSON error object), ``--timeout`` covers building a folder's model, a target that ends the process
before its report is never read as a pass, and a target's prints never reach the JSON on stdout. In this
process: ``posenc.audit(DIR)`` changes nothing global while it builds the model (another thread building
modules meanwhile is untouched)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import posenc

#: A small Llama config.json, as transformers writes one (its fields; the rest take their defaults).
LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 512,
    "rope_theta": 10000.0,
    "pad_token_id": 0,
}
#: A small Whisper config.json (its encoder's sinusoidal table is a weight, read from model.safetensors).
WHISPER = {
    "model_type": "whisper",
    "d_model": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "encoder_attention_heads": 2,
    "decoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64,
    "vocab_size": 128,
    "num_mel_bins": 8,
    "max_source_positions": 16,
    "max_target_positions": 16,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 1,
}


def _posenc() -> list[str]:
    """The installed console script beside this Python, else ``python -m posenc``."""
    script = Path(sys.executable).with_name("posenc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "posenc"]


def _audit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_posenc(), "audit", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _refused(done: subprocess.CompletedProcess[str], said: str, *, alone: bool = True) -> dict[str, Any]:
    """Exit 2, one ``posenc: error:`` line on stderr saying ``said`` (``alone``: and nothing else there; a
    target's own prints may precede it), no traceback; the JSON error object stdout holds (with --json),
    else an empty stdout."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("posenc: error: ")]
    assert done.returncode == 2 and len(errors) == 1 and "Traceback" not in done.stderr, done
    assert not alone or done.stderr == errors[0] + "\n", done.stderr
    assert said in errors[0], errors[0]
    if not done.stdout:
        return {}
    assert done.stdout.count("\n") == 1, done.stdout
    document = json.loads(done.stdout)  # exactly one document: trailing text would fail here
    assert set(document) == {"error", "parameter"} and said in document["error"], document
    return document


def _folder(path: Path, config: dict[str, Any] | str, **files: bytes) -> Path:
    path.mkdir()
    text = config if isinstance(config, str) else json.dumps(config)
    (path / "config.json").write_text(text)
    for name, data in files.items():
        (path / name.replace("_", ".")).write_bytes(data)
    return path


# --- a folder never runs its own code --------------------------------------------------------------------

EVIL = """
from pathlib import Path
Path(__file__).with_name("RAN").write_text("the folder's code ran")
from transformers import LlamaConfig, LlamaModel
class EvilConfig(LlamaConfig):
    model_type = "evil"
class EvilModel(LlamaModel):
    config_class = EvilConfig
"""


@pytest.mark.parametrize("model_type", ["llama", "evil"])
def test_a_folder_that_asks_for_its_own_code_never_runs_it(tmp_path: Path, model_type: str) -> None:
    # transformers would ask "run the custom code? [y/N]" (in stdout), and run evil.py on a "y"
    config = {**LLAMA, "model_type": model_type}
    config["auto_map"] = {"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"}
    folder = _folder(tmp_path / "evil", config)
    (folder / "evil.py").write_text(EVIL)
    said = "asks for its own code (config.json's auto_map: evil.EvilConfig, evil.EvilModel), and posenc never"
    assert _refused(_audit(str(folder)), said) == {}
    assert _refused(_audit(str(folder), "--json"), said)["parameter"] == "auto_map"
    assert not (folder / "RAN").exists()


# --- a hostile folder: one line, exit 2, one JSON object -------------------------------------------------


def _nested(path: Path) -> Path:
    return _folder(path, '{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _weights_folder(path: Path) -> Path:
    (_folder(path, LLAMA) / "model.safetensors").mkdir()
    return path


HOSTILE: dict[str, tuple[Any, str, str | None]] = {
    "nested 100,000 deep": (_nested, "nests deeper than a JSON reader follows", "config.json"),
    "max_position_embeddings NaN": (
        lambda p: _folder(p, json.dumps({**LLAMA, "max_position_embeddings": math.nan})),
        "max_position_embeddings is NaN",
        "max_position_embeddings",
    ),
    "hidden_size 2**20": (
        lambda p: _folder(p, {**LLAMA, "hidden_size": 2**20}),
        "hidden_size must be <= 2**18 = 262144",
        "hidden_size",
    ),
    "10**14 parameters": (
        lambda p: _folder(p, {**LLAMA, "hidden_size": 2**17, "num_hidden_layers": 4096}),
        "parameters",
        "hidden_size",
    ),
    "pad_token_id >= vocab_size": (
        lambda p: _folder(p, {**LLAMA, "pad_token_id": 256}),
        "pad_token_id is 256 but vocab_size is 256",
        "pad_token_id",
    ),
    "rope_theta a string": (
        lambda p: _folder(p, {**LLAMA, "rope_theta": "10000"}),
        "rope_theta must be a real number",
        "rope_theta",
    ),
    "rope_theta a list": (
        lambda p: _folder(p, {**LLAMA, "rope_theta": [10000]}),
        "rope_theta must be a real number",
        "rope_theta",
    ),
    "rope_theta null": (
        lambda p: _folder(p, {**LLAMA, "rope_theta": None}),
        "rope_theta must be a number > 0; got null",
        "rope_theta",
    ),
    "a bad safetensors in a Whisper folder": (
        lambda p: _folder(p, WHISPER, model_safetensors=b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}......"),
        "model.safetensors is not a safetensors file",
        "model.safetensors",
    ),
    "a safetensors header of junk past the bound": (  # 17 MB of empty entries: parsed, it took 1.4 GB
        lambda p: _folder(p, WHISPER, model_safetensors=(17 << 20).to_bytes(8, "little") + b" " * (17 << 20)),
        "its header claims 17,825,792 bytes; a checkpoint's takes at most a few MB",
        "model.safetensors",
    ),
    "configuration_files: another config transformers would read": (
        lambda p: _folder(p, {**LLAMA, "configuration_files": ["config.4.0.0.json"]}),
        "names configuration_files",
        "configuration_files",
    ),
    "a folder named model.safetensors": (
        _weights_folder,
        "model.safetensors is a directory, not a safetensors file",
        "model.safetensors",
    ),
    # VideoMAE builds its sinusoid table in Python lists as the model is built (the meta device holds none
    # of it): a 250-byte config of image_size 32000 grew memory without bound
    "a video grid no table can hold": (
        lambda p: _folder(
            p,
            {
                "model_type": "videomae",
                "image_size": 32000,
                "patch_size": 16,
                "num_frames": 16,
                "tubelet_size": 2,
                "hidden_size": 768,
                "num_hidden_layers": 1,
                "num_attention_heads": 12,
                "intermediate_size": 64,
            },
        ),
        "makes 32,000,000 patches",
        "image_size",
    ),
    # transformers fetches "org/repo" implementations from the Hub and runs them (with `kernels` installed)
    "an attention kernel from the Hub": (
        lambda p: _folder(p, {**LLAMA, "attn_implementation": "attacker/evil-kernel"}),
        "a kernel on the Hub that transformers would fetch and run",
        "attn_implementation",
    ),
    # transformers asks the Hub whether "org/repo" exists and fetches its config (and its sizes unchecked)
    "a backbone on the Hub": (
        lambda p: _folder(
            p, {"model_type": "detr", "use_timm_backbone": False, "backbone": "attacker/beacon"}
        ),
        "a model on the Hub whose config transformers would fetch",
        "backbone",
    ),
    "a backbone transformers looks up on the Hub": (  # no "/": the Hub is still asked; offline, refused
        lambda p: _folder(p, {"model_type": "detr", "use_timm_backbone": False, "backbone": "resnet50"}),
        "has transformers reach for the Hugging Face Hub (https://huggingface.co/api/models/resnet50)",
        "config.json",
    ),
    "3,000,000 labels": (  # an id2label entry each: 2.4 GB before the model was built
        lambda p: _folder(p, {**LLAMA, "num_labels": 3_000_000}),
        "num_labels must be <= 2**17",
        "num_labels",
    ),
    "100,000 codebooks": (  # MusicGen builds a module per codebook
        lambda p: _folder(p, {"model_type": "musicgen_decoder", "num_codebooks": 100_000}),
        "num_codebooks must be <= 2**10",
        "num_codebooks",
    ),
    "a model_type transformers does not know": (
        lambda p: _folder(p, {**LLAMA, "model_type": "no-such-model"}),
        "model_type 'no-such-model' is not one transformers",
        "model_type",
    ),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_folder_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    build, said, parameter = HOSTILE[case]
    folder = build(tmp_path / "model")
    document = _refused(_audit(str(folder), "--json", "--samples", "32"), said)
    assert document["parameter"] == parameter and str(folder) in document["error"], document


def test_a_folder_refused_in_python_names_the_field(tmp_path: Path) -> None:
    folder = HOSTILE["max_position_embeddings NaN"][0](tmp_path / "nan")
    with pytest.raises(ValueError, match="max_position_embeddings is NaN") as caught:
        posenc.audit(str(folder))
    assert getattr(caught.value, "parameter", None) == "max_position_embeddings"


def test_the_timeout_covers_building_the_model(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "deep", {**LLAMA, "num_hidden_layers": 4096})  # within bounds, slow to build
    done = _audit(str(folder), "--json", "--timeout", "1", timeout=100)
    _refused(done, f"target {folder} was still running after the timeout of 1 s")


# --- a target that is code -------------------------------------------------------------------------------

TARGETS = """
import os
import sys
import posenc

def ends(positions):
    os._exit(0)

def noisy(positions):
    print("the target's print")
    sys.stdout.flush()
    os.write(1, b"the target's write to fd 1\\n")
    return posenc.encode(positions, 16)

def noisy_failure(positions):
    print("the target's print before it fails")
    raise RuntimeError("boom")
"""


@pytest.fixture
def targets(tmp_path: Path) -> Path:
    path = tmp_path / "targets.py"
    path.write_text(TARGETS)
    return path


def test_a_target_that_ends_the_process_is_never_a_pass(targets: Path) -> None:
    said = f"target {targets}:ends ended the process before a report (exit status 0: os._exit"
    assert _refused(_audit(f"{targets}:ends", "--samples", "32"), said) == {}
    assert _refused(_audit(f"{targets}:ends", "--json", "--samples", "32"), said)["parameter"] is None


def test_a_targets_prints_never_reach_the_json(targets: Path) -> None:
    done = _audit(f"{targets}:noisy", "--json", "--samples", "32")
    assert done.returncode == 0 and done.stdout.count("\n") == 1, done
    assert json.loads(done.stdout)["passed"] is True
    assert "the target's print" in done.stderr and "the target's write to fd 1" in done.stderr
    done = _audit(f"{targets}:noisy_failure", "--json", "--samples", "32")
    assert "the target's print before it fails" in done.stderr
    _refused(done, "RuntimeError: boom", alone=False)


# --- posenc.audit(DIR) changes nothing global ------------------------------------------------------------


def test_auditing_a_folder_changes_nothing_another_thread_sees(tmp_path: Path) -> None:
    import torch

    folder = _folder(tmp_path / "llama", {**LLAMA, "torch_dtype": "bfloat16"})
    register, normal = torch.nn.Module.register_parameter, torch.nn.init.normal_
    done, seen = threading.Event(), []

    def build() -> None:
        while not done.is_set():
            linear = torch.nn.Linear(4, 4)
            seen.append(
                (
                    linear.weight.device.type,
                    linear.weight.dtype,
                    torch.get_default_dtype(),
                    torch.nn.Module.register_parameter is register,
                    torch.nn.init.normal_ is normal,
                )
            )

    thread = threading.Thread(target=build)
    thread.start()
    try:
        audited = posenc.audit(str(folder), samples=32)
    finally:
        done.set()
        thread.join()
    assert [c.path for c in audited.components] == ["model.rotary_emb"]  # its LlamaForCausalLM, as saved
    assert audited.components[0].report is not None
    assert len(seen) > 10 and set(seen) == {("cpu", torch.float32, torch.float32, True, True)}
    assert torch.nn.Module.register_parameter is register and torch.nn.init.normal_ is normal
    assert torch.empty(1).device.type == "cpu" and torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize(
    ("args", "said", "parameter"),
    [
        (["--json"], "the following arguments are required: TARGET", None),
        (["x.npy", "--json", "--bogus"], "unrecognized option --bogus", None),
        (["x.npy", "--json", "--samples", "many"], "--samples", "--samples"),
    ],
)
def test_a_usage_error_with_json_is_one_json_document(args: list[str], said: str, parameter) -> None:
    """argparse's own refusals too: one error line, exit 2, and with --json one JSON error object."""
    document = _refused(_audit(*args), said)
    assert document["parameter"] == parameter


def test_terminal_controls_in_a_files_names_are_printed_escaped(tmp_path: Path) -> None:
    """A tensor name or config key holding ESC sequences (set the window title, erase the line, print a
    green "PASS") reached the terminal as they were: every control character is printed as ``\\xNN``."""
    from safetensors.numpy import save_file

    forged = "\x1b]0;TITLE\x07\x1b[2K\x1b[1A\x1b[32mPASS: all good\x1b[0m"
    table = posenc.table(64, 8)
    save_file({"pos_a" + forged: table, "pos_b": table}, str(tmp_path / "two.safetensors"))
    nan_key = _folder(tmp_path / "model", '{"model_type": "llama", "x\\u001b[2K": NaN}')
    for done in (_audit(str(tmp_path / "two.safetensors")), _audit(str(nan_key))):
        _refused(done, "\\x1b")
        assert not any(c in done.stderr for c in "\x1b\x07"), repr(done.stderr)
    shown = subprocess.run(
        [*_posenc(), "identify", str(tmp_path / "two.safetensors")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 2 and "\x1b" not in shown.stderr and "pos_a\\x1b]0;TITLE" in shown.stderr


def test_the_hubs_offline_switch_is_put_back_after_a_folder(tmp_path: Path) -> None:
    """posenc.audit(DIR) keeps the Hub unreachable while transformers reads the config and builds the model
    (a backbone it would look up is refused), then puts huggingface_hub's switch back, either way."""
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    audited = posenc.audit(str(_folder(tmp_path / "llama", LLAMA)), samples=32)  # float32 code: inexact
    assert [c.kind for c in audited.components] == ["rotary"] and not audited.passed
    assert constants.HF_HUB_OFFLINE is before
    looked_up = HOSTILE["a backbone transformers looks up on the Hub"][0](tmp_path / "detr")
    with pytest.raises(ValueError, match="reach for the Hugging Face Hub"):
        posenc.audit(str(looked_up))
    assert constants.HF_HUB_OFFLINE is before
