#!/usr/bin/env bash
# The progress engine's benchmarks on a GPU host, side by side, for
# bench/RESULTS.md (issue 9): run from a gpu-bin/ folder made by
# tools/gpu_build.sh (it holds marker_bench and engine_bench).
#   1. marker_bench: the four candidate markers (latency, issue cost, engine
#      CPU, idle CPU), three runs back to back.
#   2. engine_bench: the engine thread and slc_engine_poll against a loop
#      that synchronises, through cuda/: completion-to-keep p50/p99, host CPU
#      per released op at 100 k ops/s, idle CPU, slc_launch's issue cost with
#      and without markers; with the default engine (poll 5 us, a marker
#      every 8 ops, adaptive wait; with the contention scenario), the fixed
#      wait, then poll 20 us, then a marker every op and every 32.
# Usage: engine_bench_h200.sh [GPU_BIN_DIR] [OUT_DIR]   (about 1-2 minutes)
set -uo pipefail
bin=${1:-$(cd "$(dirname "$0")" && pwd)}
out=${2:-$bin/engine-results-$(hostname -s)-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
{
  echo "date:   $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:   $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu:    /'
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/build:  /' "$bin/BUILD_INFO.txt"
} | tee "$out/SUMMARY.txt"
rc=0
run() { # name, command...
  local name=$1
  shift
  echo "=== $name: $*" | tee -a "$out/SUMMARY.txt"
  "$@" >"$out/$name.log" 2>&1 || rc=1
  sed -n '/^calibration\|^contention\|^  [a-z]\|^mode\|^marker\|^ *|\|^[a-z]*\/\|^sync\|^engine\|^poll\|FAIL/p' \
    "$out/$name.log" | tee -a "$out/SUMMARY.txt"
}
for i in 1 2 3; do
  run "marker_bench_$i" "$bin/marker_bench" --json "$out/marker_bench_$i.json"
done
run engine_default "$bin/engine_bench" --contention --json "$out/engine_default.json"
run engine_fixed "$bin/engine_bench" --wait fixed --json "$out/engine_fixed.json"
run engine_poll20 "$bin/engine_bench" --poll-us 20 --json "$out/engine_poll20.json"
run engine_every1 "$bin/engine_bench" --every-ops 1 --json "$out/engine_every1.json"
run engine_every32 "$bin/engine_bench" --every-ops 32 --json "$out/engine_every32.json"
echo "logs: $out (exit $rc)" | tee -a "$out/SUMMARY.txt"
exit $rc
