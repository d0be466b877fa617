#!/usr/bin/env bash
# A short GPU run beside scripts/gpu_checks.sh: the rotation kernel's tilings (benchmarks/fused_sweep.py) and
# the host path of an eager decode step (benchmarks/host_path.py), each configuration compiled first (the
# default one alone, its cos/sin kernels with it; then the others side by side). Results under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
for cache in .gpu_cache/*.tgz; do [ -f "$cache" ] && tar -xzf "$cache" -C / 2>/dev/null; done
python3 setup.py -q build_ext --inplace >/dev/null 2>&1 || echo "C extension not built"
began=$SECONDS
timeout 90 python3 benchmarks/fused_sweep.py --warm 0 >"$OUT/warm_0.log" 2>&1
echo "default compiled at $((SECONDS - began)) s"
for i in $(seq 1 8); do timeout 60 python3 benchmarks/fused_sweep.py --warm "$i" >"$OUT/warm_$i.log" 2>&1 & done
timeout 60 python3 benchmarks/host_path.py --device cuda --calls 20 >/dev/null 2>&1 &
wait
echo "all compiled at $((SECONDS - began)) s"
timeout 40 python3 benchmarks/fused_sweep.py --json "$OUT/fused_sweep.json" 2>&1 | tee "$OUT/fused_sweep.log"
timeout 40 python3 benchmarks/host_path.py --device cuda --calls 500 --json "$OUT/host_path.json" 2>&1 | tee "$OUT/host_path.log"
echo "done at $((SECONDS - began)) s"
