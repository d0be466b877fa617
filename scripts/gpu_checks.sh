#!/usr/bin/env bash
# Every GPU check and measurement of posenc in one run, for a GPU machine that has torch and triton and no
# network (nothing is installed). Run from the repository root; logs and JSON go to $OUT (default
# benchmarks/results). What each step proves:
#   gpu_kernel_bits.py     the encode kernel = the portable algorithm = the core, bit for bit; first-call compile
#   test_torch_device.py   the torch adapter on CUDA (encode, tables, modules, compile) against the core
#   device_native.py       the issue's speed bars side by side, host syncs, CUDA-graph capture, reduce-overhead
#   rope.py                the fused rotary apply against Hugging Face's rotary + apply and the memory floor
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
nvidia-smi -L
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
OUT="$OUT" "$PY" scripts/gpu_kernel_bits.py 2>&1 | tail -20
"$PY" -m pytest -q -p no:cacheprovider -x tests/test_torch_device.py --device cuda >"$OUT/test_torch_device_cuda.log" 2>&1
tail -3 "$OUT/test_torch_device_cuda.log"
"$PY" benchmarks/device_native.py --device cuda --json "$OUT/device_native_cuda.json" 2>&1 | tail -40
"$PY" benchmarks/rope.py --device cuda --json "$OUT/rope_cuda.json" 2>&1 | tail -20
