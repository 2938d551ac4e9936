#!/usr/bin/env bash
# The progress engine before and after, side by side in one run on a GPU host,
# for bench/RESULTS.md (issue 9, "Placement"): run from a gpu-bin/ folder made
# by tools/gpu_build.sh followed by bench/engine_build_before.sh (which adds
# engine_bench_before, main at 7c73b4e). Two rounds, interleaved so that the
# host's drift hits every variant alike:
#   before    engine_bench_before (issuer places markers: the old engine)
#   after     engine_bench, defaults (placement issuer: the same policy, plus
#             this round's counters)
#   placed    engine_bench --placement engine (the engine thread places every
#             marker; sl_engine.h, PLACEMENT)
#   placed50  the same with --poll-max-us 50 (round 1 only)
# Each prints sync / engine / poll rows: issue ns p50, completion-to-keep p50/
# p99/p99.9, process CPU per released op at 100 k ops/s, idle and waiting CPU,
# and the engine's counters per op. About 60-90 s on the 16-core H200 host;
# each run is bounded by `timeout 40`. Without engine_bench_before the
# "before" rows are skipped (said so in SUMMARY.txt).
# Usage: engine_bench_h200.sh [GPU_BIN_DIR] [OUT_DIR]
# ENGINE_BENCH_ARGS (optional) is added to every run; a local check of the
# script without a GPU: ENGINE_BENCH_ARGS="--driver=host --smoke".
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
  # shellcheck disable=SC2086 # ENGINE_BENCH_ARGS: words on purpose
  timeout 40 "$@" ${ENGINE_BENCH_ARGS:-} >"$out/$name.log" 2>&1 || rc=1
  sed -n '/^kernel\|^  [a-z]\|^mode\|^ *|\|^sync\|^engine\|^poll\|FAIL\|SKIPPED/p' \
    "$out/$name.log" | tee -a "$out/SUMMARY.txt"
}
before=$bin/engine_bench_before
[ -x "$before" ] || echo "no $before: before rows skipped" | tee -a "$out/SUMMARY.txt"
for r in 1 2; do
  [ -x "$before" ] && run "before_$r" "$before" --json "$out/before_$r.json"
  run "after_$r" "$bin/engine_bench" --json "$out/after_$r.json"
  run "placed_$r" "$bin/engine_bench" --placement engine --modes engine \
    --json "$out/placed_$r.json"
done
run placed50_1 "$bin/engine_bench" --placement engine --modes engine \
  --poll-max-us 50 --json "$out/placed50_1.json"
echo "logs: $out (exit $rc)" | tee -a "$out/SUMMARY.txt"
exit $rc
