#!/usr/bin/env bash
# A short GPU run beside scripts/gpu_checks.sh, for a second call in one session: the kernels' bits of the
# position ids (every case of scripts/gpu_kernel_bits.py's IDS, a process each), the device suite (its own
# limit, LIMIT_SUITE), then, on an otherwise idle host, the timed cases a change to the ids path touches
# (device_native, ids_sweep, launch_costs' pieces and profiles, host_path), each compiled first. Logs in
# $OUT/results.tgz; a step past $DEADLINE seconds is skipped (scripts/gpu_step.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
RESULTS="${RESULTS:-/tmp/gpu_results}"
mkdir -p "$OUT" "$RESULTS"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
"$PY" setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "C extension not built"
began=$SECONDS
source scripts/gpu_step.sh  # the working directory is the repository root
A=()
step test_torch_device "${LIMIT_SUITE:-200}" "$PY" -m pytest -q -rA -p no:cacheprovider -n 8 \
    tests/torch/test_torch_device.py --device cuda &
A+=($!)
for i in 0 1 2 3 4; do
    step "kernel_bits_ids$i" "${LIMIT_A:-170}" "$PY" scripts/gpu_kernel_bits.py --part ids --case $i &
    A+=($!)
done
for case in decode decode_int timesteps table positions lm syncs compile; do
    timeout -k 5 "${LIMIT_A:-170}" "$PY" scripts/gpu_warm.py "$case" cuda >"$RESULTS/warm_$case.log" 2>&1 &
    A+=($!)
done
for i in 0 5; do
    timeout -k 5 "${LIMIT_A:-170}" "$PY" benchmarks/ids_sweep.py --warm $i >"$RESULTS/warm_ids_$i.log" 2>&1 &
    A+=($!)
done
wait "${A[@]}"  # the timings below on an idle host
echo "compiled at $((SECONDS - began)) s"
step device_native 90 "$PY" benchmarks/device_native.py --device cuda --json "$RESULTS/device_native.json"
step ids_sweep 30 "$PY" benchmarks/ids_sweep.py --json "$RESULTS/ids_sweep.json"
step launch_costs 50 "$PY" benchmarks/launch_costs.py --calls 1000 --json "$RESULTS/launch_costs.json"
step host_path 30 "$PY" benchmarks/host_path.py --device cuda --calls 1000 --json "$RESULTS/host_path.json"
echo "== all done at $((SECONDS - began)) s"
