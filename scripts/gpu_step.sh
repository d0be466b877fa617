# Sourced by scripts/gpu_checks.sh and scripts/gpu_probe.sh (they set OUT, RESULTS and began).
step() {  # step NAME SECONDS COMMAND...: run with a limit, its output to $RESULTS/NAME.log, its end printed,
    # everything so far packed into $OUT/results.tgz (the device tool brings back at most 8 files)
    local name=$1 limit=$2
    shift 2
    # a step past $DEADLINE seconds (when set) is skipped, and one that would pass it is cut there: the
    # device call's own limit must not cut the packing of what was done
    if [ -n "${DEADLINE:-}" ]; then
        local left=$((DEADLINE - (SECONDS - began)))
        if [ "$left" -le 5 ]; then echo "== $name: skipped (deadline)"; return; fi
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    OUT="$RESULTS" timeout -k 5 "$limit" "$@" >"$RESULTS/$name.log" 2>&1
    echo "== $name: exit $? at $((SECONDS - began)) s"
    tail -n 25 "$RESULTS/$name.log"
    tar -czf "$OUT/results.tgz" -C "$RESULTS" . 2>/dev/null
}
