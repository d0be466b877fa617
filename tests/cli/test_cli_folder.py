"""``posenc audit MODEL_DIR`` as a first-class target, through a real ``posenc`` process: named in ``--help``
and in the error for a folder without a config.json, judged in the config's dtype by default and in
``--dtype`` when given, the hints of one component refused in one line, and a missing torch answered with the
command that installs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: A tiny Llama's config.json in bfloat16 (its rotary casts cos/sin to the hidden states' dtype).
LLAMA = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=100,
    max_position_embeddings=2048,
)


def _posenc(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """``python -m posenc ARGS`` (with ``prelude`` run first, in the same interpreter, where given)."""
    if not prelude:
        return subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, text=True)
    code = f"{prelude}\nimport sys\nfrom posenc.cli import main\nsys.exit(main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import transformers

    path = tmp_path_factory.mktemp("llama")
    transformers.LlamaConfig(**LLAMA, dtype="bfloat16").save_pretrained(path)
    return path


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("posenc: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_help_names_the_model_folder_and_its_dtype() -> None:
    done = _posenc("audit", "--help")
    assert done.returncode == 0
    assert "a model folder" in done.stdout and "config.json" in done.stdout
    assert "a model folder: the dtype its rotary runs in, default its config's" in " ".join(
        done.stdout.split()
    )


def test_a_folder_without_a_config_is_named_with_what_to_give(tmp_path: Path) -> None:
    said = _one_line_error(_posenc("audit", str(tmp_path)))
    assert "is a directory without a config.json; name a model folder (one holding a Hugging Face" in said
    assert ".safetensors file holding a table" in said


def test_a_folder_is_judged_in_its_configs_dtype_and_in_the_dtype_given(folder: Path) -> None:
    done = _posenc("audit", str(folder), "--samples", "64")
    assert done.returncode == 1, done.stderr
    assert "rotary_emb [rotary]: FAIL" in done.stdout and "(bfloat16)" in done.stdout.splitlines()[1]
    given = _posenc("audit", str(folder), "--samples", "64", "--dtype", "float32")
    assert given.returncode == 1 and "(float32); angles formed in float32" in given.stdout.splitlines()[1]
    said = _one_line_error(_posenc("audit", str(folder), "--dtype", "int8"))
    assert "--dtype int8: a model is judged in float32, float16, bfloat16 or float64" in said


def test_the_hints_of_one_component_are_refused_in_one_plain_line(folder: Path) -> None:
    said = _one_line_error(_posenc("audit", str(folder), "--positions", "0:10"))
    assert "positions applies to one positional component, not a whole model: leave it out" in said


def test_without_torch_the_error_says_what_to_install(folder: Path) -> None:
    hidden = "import sys\nsys.modules['torch'] = None\nsys.modules['transformers'] = None"
    said = _one_line_error(_posenc("audit", str(folder), prelude=hidden))
    assert "torch is not installed: pip install 'posenc[torch]' transformers" in said


def test_a_size_given_per_layer_is_read_and_each_checked(tmp_path: Path) -> None:
    """Gemma 3n's config gives intermediate_size per layer: a list of one integer each, read (the folder
    audited), and each checked (a bad one named by its index, in one line)."""
    import json

    import transformers

    config = transformers.Gemma3nTextConfig(
        hidden_size=64,
        intermediate_size=[128, 64],
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        vocab_size=100,
        vocab_size_per_layer_input=100,
        hidden_size_per_layer_input=8,
        num_kv_shared_layers=0,
        layer_types=["sliding_attention", "full_attention"],
        activation_sparsity_pattern=[0.0, 0.0],
        laurel_rank=4,
    ).to_dict()
    path = tmp_path / "per-layer"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    done = _posenc("audit", str(path), "--samples", "16")
    assert done.returncode == 1 and "2 positional component(s)" in done.stdout, done.stderr
    (path / "config.json").write_text(json.dumps({**config, "intermediate_size": [128, -1]}))
    done = _posenc("audit", str(path))
    assert done.returncode == 2 and "intermediate_size[1]" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
