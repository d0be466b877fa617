import os
import sys
from pathlib import Path

import pytest

# --- one compute thread per pytest-xdist worker -------------------------------------------------------------
# `make test` and `make check` run a worker per core; a worker whose torch (OpenMP) and XLA each also used
# every core would oversubscribe them (torch's spinning threads, XLA's Eigen pool): 17% of the wall time of
# the patching and zoo files, 11% of the JAX ones, on 2 cores. A worker computes on one thread; its
# subprocesses inherit that. (A result never depends on the thread count: tests compare within a process.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_cpu_multi_thread_eigen=false".strip()
    if "torch" in sys.modules:  # a plugin imported it before this file: its pool is already sized
        sys.modules["torch"].set_num_threads(1)

# The test files import their helpers as tests.support.NAME: the repository root on the path (pytest puts it
# there for the package tests/; subprocesses and the benchmarks add it themselves).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# --- the two tiers: `make check` runs every test not marked slow, `make test` runs them all ----------------
# A test is slow when it compiles (Triton for sm_90, Triton's interpreter, torch.compile or jax.jit over many
# cases), explores (hypothesis fuzz, exhaustive sweeps), starts processes (signals, multi-process, the
# benchmarks' smoke runs) or runs the README's blocks. Whole files by name, single tests by file::function;
# tests/contracts/test_suite_tiers.py checks that every name below still names a test.

SLOW_FILES = {
    "test_kernel_compile.py": "compiles every Triton kernel for sm_90 with two Tritons",
    "test_table_kernel.py": "Triton's interpreter over millions of values",
    "test_encode_kernel.py": "Triton's interpreter",
    "test_rope_fused.py": "Triton's interpreter",
    "test_ids_kernel.py": "Triton's interpreter",
    "test_benchmarks.py": "the benchmarks' smoke runs",
    "test_readme.py": "the README's code blocks",
    "test_distributed.py": "several processes (torch.distributed)",
    "test_jax_mesh.py": "a four-device mesh in a subprocess",
    "test_fault_injection.py": "signals and size limits against real posenc processes",
    "test_environment.py": "a fresh process per environment",
    "test_fuzz_adapters.py": "hypothesis fuzz",
    "test_fuzz_cli.py": "hypothesis fuzz",
    "test_fuzz_core.py": "hypothesis fuzz",
    "test_fuzz_found.py": "hypothesis fuzz",
    "test_fuzz_grids.py": "hypothesis fuzz",
    "test_fuzz_library.py": "hypothesis fuzz",
    "test_fuzz_modules.py": "hypothesis fuzz",
    "test_fuzz_positions.py": "hypothesis fuzz",
    "test_fuzz_regressions.py": "the fuzzers' regressions, many compiled",
    "test_packaging.py": "builds the sdist and wheel and installs them in fresh venvs",
    "test_browser.py": "headless chromium against a real posenc explore server",
    "test_audit_hostile.py": "real posenc processes against hostile folders and targets",
    "test_stale_temporaries.py": "a writer process killed with SIGKILL, then a real posenc process",
    "test_zoo.py": "a dozen architectures of transformers built, audited, patched and run",
    "test_zoo_diffusers.py": "diffusers' model classes enumerated, built, audited and patched",
    "test_zoo_timm.py": "timm imported whole, its models enumerated, built, audited and patched",
}
SLOW_TESTS = {
    "test_server_security.py::test_a_reset_connection_prints_no_traceback": "a posenc explore process",
    "test_identify_limits.py::test_posenc_identify_says_a_million_zero_rows_match_nothing": "posenc process",
    "test_audit_odd_tables.py::test_posenc_audit_of_a_sine_table_is_a_report_not_a_traceback": (
        "a posenc process"
    ),
    "test_audit_targets.py::test_cli_exit_codes": "posenc processes (and their audit children)",
    "test_jax.py::test_the_suite_passes_with_x64_enabled": "the JAX suite again in a subprocess",
    "test_jax.py::test_encode_is_bit_identical_to_the_core_eager_jit_and_vmap": "jax.jit per case",
    "test_jax.py::test_jitted_encode_matches_the_core_for_any_options": "jax.jit per example",
    "test_jax.py::test_half_precision_is_correctly_rounded_against_mpmath": "jax.jit, mpmath",
    "test_jax.py::test_real_positions": "jax.jit per case",
    "test_jax.py::test_module_in_low_precision_stays_exact_at_100k": "jax.jit, 100k rows",
    "test_jax.py::test_module_positions_for_padding_packing_and_shards": "jax.jit per case",
    "test_jax.py::test_module_offset_decoding_equals_the_full_pass_eager_and_jitted": "jax.jit per step",
    "test_jax.py::test_module_under_jit_large_tables_use_the_portable_algorithm": "jax.jit, large tables",
    "test_jax.py::test_table_static_and_traced_start": "jax.jit per case",
    "test_jax.py::test_eager_bfloat16_positions_are_taken_exactly": "every bfloat16 position",
    "test_jax.py::test_dynamic_positions_compile_once_for_every_step": "jax.jit per step",
    "test_rope_torch.py::test_forward_with_seq_len_compiles_with_fullgraph_and_runs_on_meta": "torch.compile",
    "test_rope_tables.py::test_the_portable_algorithm_gives_the_cores_bits_and_compiles_without_a_break": (
        "torch.compile per rope type"
    ),
    "test_rope_jax.py::test_traced_positions_give_the_cores_bits_by_either_path": "jax.jit",
    "test_rope_jax.py::test_the_flax_module_and_apply_rotary": "jax.jit",
    "test_rope_jax.py::test_the_flax_module_takes_a_layer_type_and_seq_len": "jax.jit",
    "test_torch_device.py::test_portable_algorithm_tables_equal_the_core": "the portable algorithm on tables",
    "test_device_native.py::test_random_elements_equal_the_core_bit_for_bit": "random sweeps",
    "test_device_native.py::test_jitted_jax_program_has_no_callback_and_no_float64_with_x64_off": "jax.jit",
    "test_exactness.py::test_float32_error_does_not_grow_with_position": "an exhaustive sweep",
    "test_exactness.py::test_encode_is_correctly_rounded_against_mpmath": "mpmath over many positions",
    "test_bad_input.py::test_position_minus_zero_gives_minus_zero_sines_on_every_path": "compiles every path",
    "test_compiled.py::test_16_bit_tables_round_tiny_values_straight_from_float64": "large 16-bit tables",
    "test_positions_input.py::test_torch_compile_fullgraph_matches_eager": "torch.compile",
    "test_first_launch.py::test_the_real_kernels_pass_their_probes": "Triton's interpreter",
    "test_first_launch.py::test_a_planted_fault_is_caught_named_once_and_the_results_stay_exact": (
        "Triton's interpreter"
    ),
    "test_patching.py::test_a_patched_model_compiles_and_exports_with_a_dynamic_length": (
        "torch.compile (inductor) and torch.export of a model"
    ),
    "test_patching.py::test_every_patched_decoder_compiles_without_a_graph_break": "dynamo, eight models",
    "test_torch.py::test_a_compiled_decode_step_gathers_cached_rows_without_reading_the_positions": (
        "torch.compile, recompiled per dtype and shape"
    ),
    "test_audit_models.py::test_a_folder_whose_model_reads_a_linspace_back_as_it_builds_is_audited": (
        "a MaskFormer built, saved and audited twice"
    ),
    "test_audit_models.py::test_a_folder_is_built_as_the_class_it_was_saved_from": (
        "a SpeechT5 built, saved and audited twice"
    ),
    "test_patching.py::test_a_speech_model_counting_its_features_otherwise_is_proven_on_its_own_forward": (
        "two speech encoder-decoders built and patched"
    ),
}


# The files that take longest, longest first (seconds of one core, measured on 2 cores): they are run first
# (`make test` hands out whole files, --dist loadfile), so that no long file starts last and keeps one
# core busy while the other waits. The rest follow in their usual order.
LONGEST_FILES = (
    "test_kernel_compile.py",  # ~250 s of wall from a new venv, both cores: two Tritons compile for sm_90
    "test_jax.py",  # ~145 s
    "test_zoo.py",  # ~60 s: a dozen architectures built, audited (and from a folder), patched and run
    "test_zoo_diffusers.py",  # ~25 s: enumeration, six classes built, audited and patched
    "test_benchmarks.py",  # ~55 s
    "test_table_kernel.py",  # ~40 s (Triton's interpreter, tests/support/interpreted.py)
    "test_encode_kernel.py",  # ~30 s
    "test_rope_jax.py",  # ~30 s
    "test_exactness.py",  # ~27 s
    "test_patching.py",  # ~25 s
    "test_torch_device.py",  # ~21 s
    "test_jax_mesh.py",  # ~14 s
    "test_device_native.py",  # ~19 s
    "test_rope_torch.py",  # ~16 s
    "test_fault_injection.py",  # ~16 s
    "test_ids_kernel.py",  # ~13 s
    "test_rope_fused.py",  # ~11 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tier (see SLOW_FILES and SLOW_TESTS); run the longest files first (LONGEST_FILES)."""
    for item in items:
        name = item.path.name
        function = getattr(item, "originalname", item.name)
        if name in SLOW_FILES or f"{name}::{function}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        default="cpu",
        help="the torch device of tests/torch/test_torch_device.py (default cpu; cuda on a GPU machine)",
    )


@pytest.fixture
def device(request: pytest.FixtureRequest) -> str:
    """The torch device of ``--device``; refuses a device that is not there rather than skipping."""
    import torch

    name = request.config.getoption("--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise pytest.UsageError(f"--device {name}: torch sees no CUDA device on this machine")
    return name
