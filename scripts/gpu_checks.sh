#!/usr/bin/env bash
# Every GPU check and measurement of posenc in one run, for a GPU machine that has torch, triton and
# transformers and no network. Run from the repository root; logs and JSON go to $OUT (default
# benchmarks/results). Optional wheels (diffusers, liger-kernel, importlib_metadata: the references the
# issue names) are installed from .whl/ when that folder was carried; fetch them on a machine with a network:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
#       -d .whl diffusers==0.42.1 liger-kernel==0.8.5 importlib_metadata
# and carry .whl (gitignored). On an H200 the whole run took 206 s (2026-11-27). What each step proves:
#   gpu_kernel_bits.py     position ids and tables by angle addition = the core, and the encode kernel = the
#                          portable algorithm = the core, bit for bit, on millions of values (every output
#                          dtype, position kind, offsets, settling); a process a case, side by side
#   test_torch_device.py   the torch adapter on CUDA (encode, tables, modules, rotary, compile) against the core
#   gpu_hf_model.py        a Hugging Face Llama with posenc's rotary: forward, generate, sync-debug, compile
#   device_native.py       the issue's speed bars side by side, host syncs (sync-debug "error"), CUDA-graph
#                          capture and replay, torch.compile(mode="reduce-overhead"), a training step, JAX
#   rope.py                the fused rotary apply against Hugging Face's (and Liger-Kernel's) and the floor
#   fused_sweep.py         the rotation kernel's tilings against the memory floor, registers and spills
#   ids_sweep.py           position ids' combining kernel over its blocks, without settling, against a gather
#   host_path.py           the host's share of an eager decode step, layer by layer, against the gather
#   gpu_warm.py            each timed case once, ahead: its kernels compiled in parallel
#   kernel_guard.py        the first-launch probes of posenc.torch.kernel_status(): what each one costs
#   launch_costs.py        the host's cost of each small operation of a launch, each kernel's GPU time
#                          (decode, Timesteps, (8, 2048) ids, the fused apply)
#   ncu                    Nsight Compute on the kernels of (8, 2048) ids and of the fused apply
# Phase A runs the correctness steps and gpu_warm.py (each timed case once: its compiles) side by side on the
# 16 cores; phase B times the cases one at a time, their kernels in Triton's disk cache.
# Dry run on the CPU:  GPU_CHECKS_DEVICE=cpu TRITON_INTERPRET=1 scripts/gpu_checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# Every log and JSON goes to $RESULTS, packed into $OUT/results.tgz after each step (the device tool brings
# back at most 8 files), so a run cut short still returns what it finished.
OUT="${OUT:-benchmarks/results}"
RESULTS="${RESULTS:-/tmp/gpu_results}"
mkdir -p "$OUT" "$RESULTS"
PY="${PYTHON:-python3}"
DEV="${GPU_CHECKS_DEVICE:-cuda}"
QUICK=()
[ "$DEV" = cpu ] && QUICK=(--quick)
if [ -d .whl ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# A Triton/inductor cache from an earlier run on the same kind of machine, when carried (saves the compiles).
for cache in .gpu_cache/*.tgz; do [ -f "$cache" ] && tar -xzf "$cache" -C / 2>/dev/null; done
"$PY" setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "C extension not built: the NumPy path runs"
if [ "$DEV" = cuda ]; then nvidia-smi -L; fi
"$PY" -c "import torch, triton, transformers, posenc.core as c; print('torch', torch.__version__, 'triton',
triton.__version__, 'transformers', transformers.__version__, 'core path', c.compiled.path())"
"$PY" -c "import diffusers, liger_kernel; print('diffusers', diffusers.__version__, 'liger-kernel ok')" 2>&1 | tail -1
began=$SECONDS
source scripts/gpu_step.sh  # the working directory is the repository root
caches() {  # Triton's compile cache, for a rerun on a fresh machine (carry .gpu_cache/ with the file in it;
    # inductor's is over the 16 MiB a file the device tool brings back)
    tar -czf "$OUT/triton_cache.tgz" -C / "$(cd ~ && pwd | cut -c2-)/.triton/cache" 2>/dev/null
}
SMALL=()
[ "$DEV" = cpu ] && SMALL=(--small)
LIMIT_A="${LIMIT_A:-220}"  # 110 s was too short on 2026-11-27 for the bits and the suite
# A: correctness, and the compiles of every timed case, side by side (Triton compiles on one core a process)
# The device suite runs on (its own limit, LIMIT_SUITE): phase B waits for the rest of phase A, not for it.
step test_torch_device "${LIMIT_SUITE:-300}" "$PY" -m pytest -q -rA -p no:cacheprovider -n 6 \
    tests/torch/test_torch_device.py --device "$DEV" &
PHASE_A=()
# the kernels' bits against the core, a process a case: each compiles its own specialization
for part in ids:0 ids:1 ids:2 ids:3 ids:4 tables:0 tables:1 tables:2 tables:3 encode:; do
    case_=${part#*:}
    step "kernel_bits_${part%:*}$case_" "$LIMIT_A" "$PY" scripts/gpu_kernel_bits.py --device "$DEV" \
        "${SMALL[@]}" --part "${part%:*}" ${case_:+--case "$case_"} &
    PHASE_A+=($!)
done
step hf_model "$LIMIT_A" "$PY" scripts/gpu_hf_model.py --device "$DEV" &
PHASE_A+=($!)
for case in decode decode_int timesteps table positions lm syncs compile rope guard; do
    OUT="$RESULTS" timeout -k 5 "$LIMIT_A" "$PY" scripts/gpu_warm.py "$case" "$DEV" >"$RESULTS/warm_$case.log" 2>&1 &
    PHASE_A+=($!)
done
for i in 0 1 2 3 4 5 6 7 8; do  # benchmarks/fused_sweep.py: its 9 cases
    timeout -k 5 "$LIMIT_A" "$PY" benchmarks/fused_sweep.py --device "$DEV" --warm $i >"$RESULTS/warm_sweep_$i.log" 2>&1 &
    PHASE_A+=($!)
done
for i in 0 1 2 3 4 5; do  # benchmarks/ids_sweep.py: its blocks, and the default with settling
    timeout -k 5 "$LIMIT_A" "$PY" benchmarks/ids_sweep.py --device "$DEV" --warm $i >"$RESULTS/warm_ids_$i.log" 2>&1 &
    PHASE_A+=($!)
done
wait "${PHASE_A[@]}"
tail -qn 1 "$RESULTS"/warm_*.log
caches
# B: timed, one at a time, the kernels compiled; the bars first (a step past $DEADLINE is skipped)
step device_native 100 "$PY" benchmarks/device_native.py --device "$DEV" "${QUICK[@]}" --json "$RESULTS/device_native.json"
step fused_sweep 40 "$PY" benchmarks/fused_sweep.py --device "$DEV" --json "$RESULTS/fused_sweep.json"
step ids_sweep 40 "$PY" benchmarks/ids_sweep.py --device "$DEV" --json "$RESULTS/ids_sweep.json"
[ "$DEV" = cuda ] && step launch_costs 60 "$PY" benchmarks/launch_costs.py --calls 2000 --json "$RESULTS/launch_costs.json"
ROPE=()
[ "$DEV" = cpu ] && ROPE=(--batch 1 --heads 2 --seq 64 --repeat 2)
step rope 35 "$PY" benchmarks/rope.py --device "$DEV" "${ROPE[@]}" --json "$RESULTS/rope.json"
HOST=(--device meta)
[ "$DEV" = cuda ] && HOST=(--device cuda)
step host_path 40 "$PY" benchmarks/host_path.py "${HOST[@]}" --calls 1000 --json "$RESULTS/host_path.json"
# Nsight Compute on the kernels of (8, 2048) position ids and of the fused apply: throughput, occupancy
[ "$DEV" = cuda ] && command -v ncu >/dev/null && step ncu 60 ncu --clock-control none --profile-from-start off \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
    "$PY" benchmarks/launch_costs.py --ncu-target
step kernel_guard 20 "$PY" scripts/kernel_guard.py --device "$DEV"
wait  # the device suite, where it outlasts phase B
caches
ls -la "$OUT"
echo "== all done at $((SECONDS - began)) s"
