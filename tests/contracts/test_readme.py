"""Every ```python block of README.md and of the guides (docs/*.md) is executed here, so that no example
goes stale.

How the blocks run:

* The documents are split into parts: README.md at its ``## `` headings (``README.md: Quick start``), and
  each guide is one part (``docs/pytorch.md``). The blocks of one part run in order in one namespace (a
  later block may use the names of an earlier one, as a reader does), one test per part, with a
  temporary directory as the working directory (files a block writes land there).
* The names a block leaves to the reader — the data it applies to (``x``, ``d_model``, a checkpoint, a
  ``config.json``) — are defined before that block by :data:`PRELUDES`, keyed by (part, block number in
  the part), with small stand-ins. Nothing else is added: a block that uses an undefined name fails.
* A block that cannot run here (it needs a GPU, a download, ...) is marked in its document by the line
  ``<!-- not run: REASON -->`` right before its fence; :data:`NOT_RUN` lists those blocks with their
  reasons, and a test checks that the documents mark exactly those. Every other block must run without
  raising.
* Where a block states a result (a shape, a zero row, an equality in a comment), :data:`CHECKS` asserts it
  after the part ran, on the names the blocks left.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import posenc

ROOT = Path(__file__).resolve().parents[2]
#: the documents whose blocks run: the README and every guide
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARK = re.compile(r"^\s*<!--\s*not run:\s*(.+?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    section: str  # its part: "README.md: <## heading>", or the guide's path ("docs/pytorch.md")
    number: int  # 0, 1, ... within its part
    line: int  # the line of its first code line in its document (1-based)
    code: str
    not_run: str | None  # the reason of its <!-- not run: ... --> mark


def document_blocks(path: Path) -> list[Block]:
    """The ```python blocks of the document at ``path`` (indented ones in lists too), with their part and
    mark: the README's parts are its ``## `` sections, a guide is one part."""
    name = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    section, counts = name, {}
    lines = path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if name == "README.md" and line.startswith("## "):
            section = f"README.md: {line[3:].strip()}"
        if line.strip() == "```python":
            indent = len(line) - len(line.lstrip())
            previous = next((lines[k] for k in range(index - 1, -1, -1) if lines[k].strip()), "")
            mark = _MARK.match(previous)
            end = next(k for k in range(index + 1, len(lines)) if lines[k].strip() == "```")
            code = textwrap.dedent("\n".join(text[indent:] for text in lines[index + 1 : end]))
            number = counts.get(section, 0)
            counts[section] = number + 1
            blocks.append(Block(section, number, index + 2, code, mark.group(1) if mark else None))
            index = end
        index += 1
    return blocks


BLOCKS = [block for path in DOCUMENTS for block in document_blocks(path)]
SECTIONS = list(dict.fromkeys(block.section for block in BLOCKS))

#: The blocks marked ``<!-- not run: ... -->``: (section, block number) -> the reason.
NOT_RUN = {
    ("docs/pytorch.md", 3): 'needs a CUDA GPU (device="cuda")',
}

#: The packages each part's blocks import (the part is skipped, naming them, where one is missing).
REQUIRES = {
    "README.md: Quick start": ["torch", "transformers"],
    "docs/pytorch.md": ["torch"],
    "docs/variants.md": [],
    "docs/jax.md": ["jax", "flax", "torch"],
    "docs/rotary.md": ["torch", "transformers"],
    "docs/models.md": ["torch", "transformers"],
    "docs/audit.md": ["torch", "transformers", "safetensors", "diffusers"],
}


# --- the stand-ins for what the blocks leave to the reader ---------------------------------------------


def _tutorial_pe(max_len: int, d_model: int) -> Any:
    """The PyTorch tutorial's ``pe`` buffer, (max_len, 1, d_model), computed as the tutorial does."""
    import math

    import torch

    position = torch.arange(max_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, 1, d_model)
    pe[:, 0, 0::2] = torch.sin(position * div_term)
    pe[:, 0, 1::2] = torch.cos(position * div_term)
    return pe


def _use(ns: dict[str, Any]) -> None:
    ns["t"] = np.linspace(0.0, 999.0, 16)  # diffusion timesteps: real positions
    ns["buffer"] = np.empty((8192, 512), np.float32)


def _pytorch(ns: dict[str, Any]) -> None:
    import torch

    ns.update(d_model=512, x=torch.randn(10, 2, 512), tutorial_checkpoint={"pe": _tutorial_pe(5000, 512)})


def _pytorch_decoding(ns: dict[str, Any]) -> None:
    import torch

    ns.update(prompt=torch.randn(6, 2, 512), L=6, new_tokens=3, x_t=torch.randn(1, 2, 512))
    ns["lengths"] = torch.tensor([6, 4])


def _pytorch_positions(ns: dict[str, Any]) -> None:
    import torch

    ns["attention_mask"] = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    ns["cu_seqlens"] = torch.tensor([0, 3, 7], dtype=torch.int32)
    ns["input_ids"] = torch.tensor([[0, 4, 5, 2, 1, 1]])


def _jax(ns: dict[str, Any]) -> None:
    import jax.numpy as jnp

    ns.update(d_model=64, positions=np.arange(16), t=16)
    ns.update(x=jnp.ones((2, 16, 64)), x_step=jnp.ones((2, 1, 64)))


def _context(ns: dict[str, Any]) -> None:
    from posenc import sharding

    length, world_size = 16, 4
    ids = np.arange(length)[None].repeat(2, axis=0)
    ns.update(L=length, R=world_size, r=1, position_ids=ids)
    ns["gathered"] = [
        sharding.shard(ids, axis=-1, world_size=world_size, rank=k, scheme="zigzag")
        for k in range(world_size)
    ]


def _torch_distributed(ns: dict[str, Any]) -> None:
    """A process group of one process (gloo, on the CPU): the block's calls read rank 0 of 1 from it."""
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"file://{Path.cwd() / 'process-group'}", rank=0, world_size=1
    )
    ns.update(x=torch.randn(2, 16, 64), x_step=torch.randn(2, 1, 64), t=3)


def _jax_mesh(ns: dict[str, Any]) -> None:
    import jax.numpy as jnp

    ns.update(x=jnp.asarray(np.random.default_rng(0).standard_normal((2, 16, 64)), jnp.float32), B=2)


def _rope(ns: dict[str, Any]) -> None:
    config = {
        "head_dim": 128,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
        "max_position_embeddings": 131072,
    }
    Path("path/to").mkdir(parents=True)
    Path("path/to/config.json").write_text(json.dumps(config), encoding="utf-8")
    ns["positions"] = np.arange(8)


def _small_llama_config() -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4
    )


def _rope_migration(ns: dict[str, Any]) -> None:
    ns["config"] = _small_llama_config()


def _audit(ns: dict[str, Any]) -> None:
    import torch
    from safetensors.numpy import save_file
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    def my_function(positions: np.ndarray) -> np.ndarray:  # the tutorial's formula, at any positions
        omega = np.exp(np.arange(0, 512, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / 512))
        angles = np.asarray(positions, np.float32)[:, None] * omega
        out = np.empty((len(angles), 512), np.float32)
        out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
        return out

    class TutorialEncoding(torch.nn.Module):  # adds its buffer, as the tutorial's module does
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("pe", _tutorial_pe(5000, 512))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.pe[: x.size(0)]

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pos_encoder = TutorialEncoding()

    class OldRotary(torch.nn.Module):  # transformers' rotary module before 4.38: forward(x, seq_len)
        def __init__(self, dim: int = 64, max_position_embeddings: int = 2048, base: float = 10000.0) -> None:
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
            angles = torch.outer(torch.arange(max_position_embeddings).float(), inv_freq)
            self.register_buffer("inv_freq", inv_freq)
            self.register_buffer("cos_cached", torch.cat((angles, angles), dim=-1).cos())
            self.register_buffer("sin_cached", torch.cat((angles, angles), dim=-1).sin())

        def forward(self, x: torch.Tensor, seq_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
            return self.cos_cached[:seq_len].to(x.dtype), self.sin_cached[:seq_len].to(x.dtype)

    fairseq = posenc.presets.get("fairseq", padding_idx=1)
    save_file({"model.encoder.embed_positions.weights": fairseq.table(1026, 1024)}, "m2m100.safetensors")
    from diffusers.models.embeddings import Timesteps

    ns.update(my_function=my_function, model=Model(), LlamaRotaryEmbedding=LlamaRotaryEmbedding)
    ns["Timesteps"] = Timesteps  # diffusers': a module whose forward takes timesteps
    ns["old_rotary"] = OldRotary()
    ns.update(state_dict={"encoder.pe": _tutorial_pe(2048, 512)[:, 0]}, config=_small_llama_config())
    ns["table"] = posenc.table(65536, 64)


#: (part, block number) -> a function that defines, in the part's namespace, the names that block leaves
#: to the reader.
PRELUDES: dict[tuple[str, int], Callable[[dict[str, Any]], None]] = {
    ("docs/usage.md", 0): _use,
    ("docs/pytorch.md", 0): _pytorch,
    ("docs/pytorch.md", 1): _pytorch_decoding,
    ("docs/pytorch.md", 2): _pytorch_positions,
    ("docs/jax.md", 0): _jax,
    ("docs/jax.md", 2): _context,
    ("docs/jax.md", 3): _torch_distributed,
    ("docs/jax.md", 4): _jax_mesh,
    ("docs/rotary.md", 0): _rope,
    ("docs/rotary.md", 1): _rope_migration,
    ("docs/audit.md", 0): _audit,
}


# --- what the blocks state -------------------------------------------------------------------------------


def _check_quick_start(ns: dict[str, Any]) -> None:
    """The table in fairseq's variant, the tutorial's module called as the tutorial calls its own, and the
    model made exact (the block asserts its audit passed) then given back its original rotary module."""
    import torch

    assert ns["pe"].shape == (4096, 768) and str(ns["pe"].dtype) == "bfloat16"
    assert ns["pos_encoder"].training and ns["pos_encoder"].dropout.p == 0.1  # (d_model, dropout), positional
    assert ns["y"].shape == (35, 20, 512) and ns["y_t"].shape == (1, 20, 512)
    assert ns["report"].replaced and type(ns["model"].model.rotary_emb).__module__.startswith("transformers")
    assert isinstance(ns["model"], torch.nn.Module)


def _check_use(ns: dict[str, Any]) -> None:
    assert ns["pe"].shape == (16, 320) and ns["pe"].dtype == np.float64  # the last pe: 16 timesteps
    assert ns["omega"].shape == (256,) and ns["omega"].dtype == np.float64
    np.testing.assert_array_equal(ns["buffer"], posenc.table(8192, 512))


def _check_pytorch(ns: dict[str, Any]) -> None:
    assert ns["y"].shape == (6, 2, 512) and ns["y_t"].shape == (1, 2, 512)  # the prefill, one step
    assert tuple(ns["pos_encoder"].pe.shape) == (5000, 1, 512)
    assert ns["model_pe"].batch_first is True
    assert ns["positions"].tolist() == [[2, 3, 4, 5, 1, 1]]  # make_positions, the last positions computed


def _check_variants(ns: dict[str, Any]) -> None:
    """M2M100's table: row padding_idx = 1 is zero; p.encode of fairseq's positions is that table's rows,
    padding rows zero; the core with p.options has no padding row."""
    p, table, positions, pe, same = (ns[k] for k in ("p", "table", "positions", "pe", "same"))
    assert table.shape == (1026, 1024) and table.dtype == np.float32
    assert not table[1].any() and table[2].any()
    assert positions.tolist() == [[2, 3, 4, 5, 1, 1]]
    assert pe.shape == (1, 6, 1024) and pe.dtype == np.float32
    np.testing.assert_array_equal(pe, table[positions])
    assert not pe[0, 4:].any()  # the padding tokens
    np.testing.assert_array_equal(pe[0, :4], same[0, :4])
    np.testing.assert_array_equal(same[0, 4], posenc.encode(1, 1024, **p.options))
    assert same[0, 4].any()
    # M2M100's own table: transformers' M2M100SinusoidalPositionalEmbedding.get_embedding, row for row
    transformers = pytest.importorskip("transformers")
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    del transformers
    theirs = M2M100SinusoidalPositionalEmbedding.get_embedding(1026, 1024, padding_idx=1).numpy()
    assert not theirs[1].any()
    np.testing.assert_allclose(table, theirs, rtol=0, atol=1e-3)  # theirs: angles in float32, up to 1026


def _check_jax(ns: dict[str, Any]) -> None:
    np.testing.assert_array_equal(np.asarray(ns["y"]), np.asarray(ns["y_zig"])[:, np.argsort(ns["order"])])


CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "README.md: Quick start": _check_quick_start,
    "docs/usage.md": _check_use,
    "docs/pytorch.md": _check_pytorch,
    "docs/variants.md": _check_variants,
    "docs/jax.md": _check_jax,
}


# --- the tests -------------------------------------------------------------------------------------------


def test_the_readme_and_the_guides_have_their_examples() -> None:
    assert len(BLOCKS) >= 14
    assert [b.section for b in BLOCKS].count("README.md: Quick start") == 3  # NumPy, PyTorch, a whole model
    assert {"docs/usage.md", "docs/pytorch.md", "docs/variants.md", "docs/models.md"} <= set(SECTIONS)
    assert set(PRELUDES) <= {(b.section, b.number) for b in BLOCKS}, "a prelude for a block that is gone"
    assert set(REQUIRES) | set(CHECKS) <= set(SECTIONS), "a part named here that has no block"


def test_the_readme_is_an_entrance() -> None:
    """The README stays short (at most 15 kB) and links every guide."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 15_000
    for guide in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{guide.name})" in readme, f"the README's task index does not link {guide.name}"


def test_the_blocks_not_run_are_the_marked_ones() -> None:
    """Each block a document marks ``<!-- not run: ... -->`` is listed in NOT_RUN with its reason, and no
    other block is: a new mark is a decision this file records."""
    marked = {(b.section, b.number): b.not_run for b in BLOCKS if b.not_run is not None}
    assert marked == NOT_RUN


@pytest.mark.parametrize("section", SECTIONS)
def test_the_blocks_of_each_part_run(section: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```python blocks of one section, in order, in one namespace, in a temporary directory."""
    for module in REQUIRES.get(section, []):
        pytest.importorskip(module, reason=f"{section!r} needs {module}")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "readme"}
    ran = 0
    try:
        for block in (b for b in BLOCKS if b.section == section):
            if block.not_run is not None:
                continue
            if (section, block.number) in PRELUDES:
                PRELUDES[section, block.number](namespace)
            code = compile(block.code, f"{block.section.split(':')[0]}, line {block.line}", "exec")
            exec(code, namespace)
            ran += 1
    finally:
        _close_process_group()
    assert ran, f"every block of {section!r} is marked not run"
    if section in CHECKS:
        CHECKS[section](namespace)


def _close_process_group() -> None:
    """The one-process group a torch.distributed example needed, if it was started."""
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def test_the_site_holds_every_guide_and_builds_on_read_the_docs() -> None:
    """Every guide is in the site's table of contents (docs/index.rst), and .readthedocs.yaml builds that
    site, warnings as errors, with requirement files that exist."""
    import yaml

    index = (ROOT / "docs" / "index.rst").read_text(encoding="utf-8")
    entries = {line.strip() for line in index.splitlines() if line.startswith("   ") and ":" not in line}
    assert {guide.stem for guide in (ROOT / "docs").glob("*.md")} <= entries
    config = yaml.safe_load((ROOT / ".readthedocs.yaml").read_text(encoding="utf-8"))
    assert config["version"] == 2
    assert config["sphinx"] == {"configuration": "docs/conf.py", "fail_on_warning": True}
    files = [step["requirements"] for step in config["python"]["install"] if "requirements" in step]
    assert "requirements-docs.txt" in files and all((ROOT / name).is_file() for name in files)


#: files the documents name as what a command writes, not as files the repository holds
OUTPUTS = {"benchmarks/results/table.json", "docs/_build/html/index.html"}
_REPOSITORY_PATH = re.compile(r"(?<![\w/.-])((?:benchmarks|scripts|src|tests|docs|examples)/[\w./<>*-]+)")


def test_every_file_the_documents_name_is_in_the_repository() -> None:
    """A path of this repository named in the README, the CHANGELOG or a guide (a script, a test file, a
    results folder) exists; patterns (``device_native_<device>.json``) and named outputs excepted."""
    named = set()
    for document in [*DOCUMENTS, ROOT / "CHANGELOG.md"]:
        for match in _REPOSITORY_PATH.finditer(document.read_text(encoding="utf-8")):
            path = match.group(1).rstrip(".,;")
            if not re.search(r"[<>*]", path) and path not in OUTPUTS:
                named.add(path)
    assert len(named) > 50
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
