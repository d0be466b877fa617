#!/usr/bin/env bash
# A short GPU run beside scripts/gpu_checks.sh, for a second call in one session: the device suite to the end
# (its own limit), the kernels' bits, and the timed cases a change touches (device_native, the fused rotary
# sweep, the host path, the launch costs), each compiled first. Logs under $OUT/results.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
RESULTS=/tmp/gpu_results
mkdir -p "$OUT" "$RESULTS"
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
for cache in .gpu_cache/*.tgz; do [ -f "$cache" ] && tar -xzf "$cache" -C / 2>/dev/null; done
python3 setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "C extension not built"
began=$SECONDS
source scripts/gpu_step.sh  # the working directory is the repository root
step test_torch_device "${LIMIT_SUITE:-260}" python3 -m pytest -q -rA -p no:cacheprovider -n 10 \
    tests/torch/test_torch_device.py --device cuda &
A=()
step kernel_bits "${LIMIT_A:-150}" python3 scripts/gpu_kernel_bits.py --device cuda &
A+=($!)
for case in decode decode_int timesteps table positions lm syncs compile rope; do
    timeout -k 5 "${LIMIT_A:-150}" python3 scripts/gpu_warm.py "$case" cuda >"$RESULTS/warm_$case.log" 2>&1 &
    A+=($!)
done
for i in 0 8; do
    timeout -k 5 "${LIMIT_A:-150}" python3 benchmarks/fused_sweep.py --warm $i >"$RESULTS/warm_sweep_$i.log" 2>&1 &
    A+=($!)
done
wait "${A[@]}"
echo "compiled at $((SECONDS - began)) s"
step device_native 110 python3 benchmarks/device_native.py --device cuda --json "$RESULTS/device_native.json"
step fused_sweep 60 python3 benchmarks/fused_sweep.py --json "$RESULTS/fused_sweep.json"
step launch_costs 60 python3 benchmarks/launch_costs.py --calls 1000 --json "$RESULTS/launch_costs.json"
wait
echo "== all done at $((SECONDS - began)) s"
