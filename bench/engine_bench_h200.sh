#!/usr/bin/env bash
# The progress engine before and after issue 9's pacing (sl_engine.h,
# PACING), side by side in one run on a GPU host, for bench/RESULTS.md.
# Usage (from the repository root, as the lead's device run calls it):
#   bench/engine_bench_h200.sh BIN BEFORE OUT
#     BIN     gpu-bin/ of tools/gpu_build.sh (engine_bench: after)
#     BEFORE  the same built at the "before" commit (.devcarry/gpu-bin-7856fa6:
#             engine_bench of main 7856fa6, markers placed by the issuer)
#     OUT     a new folder: one log and one json per run, SUMMARY.txt
# Runs, interleaved so that the host's drift hits both alike:
#   before_1 after_1 before_2 after_2   engine_bench with its defaults: sync,
#       engine and poll modes, each with the latency (3000 x 10 us kernel,
#       one at a time), rate (30 000 empty kernels paced at 100 k/s) and idle
#       (50 ms) scenarios
#       (after runs add --remote: the latency scenario synchronised by a
#       second thread, no engine, no marker: the issue cost when keeps run
#       on another thread; the baseline for the marker's share)
#   issuer_1   after, --placement issuer --modes engine (pacing with the
#       issuer's markers), only if time is left (the whole <= 150 s)
#   pmax200_1  after, --poll-max-us 200 --modes engine (one batch wake-up
#       per 200 us: the bound 2 x 200 + 5 us), if time is left
#   wake       wake_bench --iters-ms 4 (what one wake-up costs; the engine's
#       work per wake-up), if BIN has it and time is left; its PART 2 and
#       the 1 ns slack rows of nanosleep / timerfd go into SUMMARY.txt
# Every run is under `timeout 27`. SUMMARY.txt gets one row per run:
#   issue ns p50 sync / engine / poll (latency scenario), marker share =
#   (engine - poll) / poll and (engine - sync) / sync, engine completion-to-
#   keep p50 / p99 / p99.9 us, eng CPU/op ns = process CPU/op - request
#   thread CPU/op in the rate scenario (the request thread spins to pace),
#   the engine thread's own CPU/op (schedstat of the thread "slc-engine[-N]";
#   "-" for binaries that do not print it), issue ns p50 of --remote and
#   the engine's share against it,
#   idle % and waiting % of a core, and per op polls / markers / wake-ups
#   (sleeps + parks) in the rate and the latency scenario.
# A check without a GPU (host executor; the numbers mean nothing):
#   ENGINE_BENCH_ARGS="--driver=host --smoke" bench/engine_bench_h200.sh \
#     bazel-bin/bench DIR_WITH_OLD_engine_bench /tmp/out
set -uo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 BIN BEFORE OUT" >&2
  exit 2
fi
bin=$1 before=$2 out=$3
mkdir -p "$out"
sum=$out/SUMMARY.txt
{
  echo "date:   $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:   $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu:    /'
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/after:  /' "$bin/BUILD_INFO.txt"
  [ -f "$before/BUILD_INFO.txt" ] && sed 's/^/before: /' "$before/BUILD_INFO.txt"
} >"$sum"
rc=0
: >"$out/rows.txt"
run() { # name, binary, args...
  local name=$1
  shift
  echo "=== $name: $* ${ENGINE_BENCH_ARGS:-}" >>"$sum"
  if [ ! -x "$1" ]; then
    echo "  missing $1: skipped" >>"$sum"
    rc=1
    return
  fi
  # shellcheck disable=SC2086 # ENGINE_BENCH_ARGS: words on purpose
  timeout 27 "$@" --json "$out/$name.json" ${ENGINE_BENCH_ARGS:-} \
    >"$out/$name.log" 2>&1 || { echo "  exit $? (see $name.log)" >>"$sum"; rc=1; }
  grep -E '^(kernel|calibration|device|FAIL|SKIPPED|engine_bench:)' \
    "$out/$name.log" | sed 's/^/  /' >>"$sum"
  # One row from the log's two tables (the same layout in both binaries:
  # mode | issue | lat p50 p99 p99.9 | cpu/op req kops | idle wait, then
  # mode | lat: markers tails polls sleeps parks kicks | rate: the same).
  awk -v name="$name" '
    /^engine, per operation/ { counters = 1; next }
    !counters && $2 == "|" && ($1 == "sync" || $1 == "engine" || $1 == "poll") {
      issue[$1] = $3
      if ($1 == "engine") {
        p50 = $5; p99 = $6; p999 = $7; eng = $9 - $10; idle = $13; wait = $14
      }
    }
    /^threads \(engine,/ {
      for (i = 1; i <= NF; i++) if ($i ~ /^slc-engine(-[0-9]+)?$/) { t = $(i + 1); sub(";", "", t); thr = t }
    }
    /^remote: issue p50/ { remote = $4 }
    counters && $1 == "engine" && $2 == "|" {
      lm = $3; lp = $5; lw = $6 + $7; rm = $10; rp = $12; rw = $13 + $14
      have = 1
    }
    function share(a, b) { return (a == "" || b == "" || b == 0) ? "-" : sprintf("%+.0f %%", 100 * (a - b) / b) }
    function v(x) { return x == "" ? "-" : x }
    END {
      if (!have) { printf "| %s | (no engine row) |\n", name; exit }
      printf "| %s | %s / %s / %s | %s / %s | %s / %s | %s / %s / %s | %.0f | %s | %s | %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n",
        name, v(issue["sync"]), v(issue["engine"]), v(issue["poll"]),
        share(issue["engine"], issue["poll"]), share(issue["engine"], issue["sync"]),
        v(remote), share(issue["engine"], remote),
        p50, p99, p999, eng, v(thr), idle, wait, rp, rm, rw, lp, lm, lw
    }' "$out/$name.log" >>"$out/rows.txt"
}
for r in 1 2; do
  run "before_$r" "$before/engine_bench"
  run "after_$r" "$bin/engine_bench" --remote
done
if [ "$SECONDS" -lt 100 ]; then
  run issuer_1 "$bin/engine_bench" --placement issuer --modes engine
else
  echo "=== issuer_1: skipped ($SECONDS s used)" >>"$sum"
fi
if [ "$SECONDS" -lt 110 ]; then
  run pmax200_1 "$bin/engine_bench" --poll-max-us 200 --modes engine
else
  echo "=== pmax200_1: skipped ($SECONDS s used)" >>"$sum"
fi
if [ -x "$bin/wake_bench" ] && [ "$SECONDS" -lt 120 ]; then
  echo "=== wake: $bin/wake_bench --iters-ms 4 ${WAKE_BENCH_ARGS:-}" >>"$sum"
  # shellcheck disable=SC2086 # WAKE_BENCH_ARGS: words on purpose
  timeout 25 "$bin/wake_bench" --iters-ms 4 ${WAKE_BENCH_ARGS:-} \
    >"$out/wake.log" 2>&1 || { echo "  exit $? (see wake.log)" >>"$sum"; rc=1; }
  { sed -n '/^PART 2/,/clock reads/p' "$out/wake.log"
    grep -E '^(wait|(nanosleep|timerfd|sleep\+q\+r) +[0-9]+ +1ns)' "$out/wake.log"
  } | sed 's/^/  /' >>"$sum"
fi
{
  echo
  echo "| run | issue ns p50 sync / engine / poll | marker share vs poll / vs sync | issue ns p50 remote / engine's share vs remote | engine lat p50 / p99 / p99.9 us | eng CPU/op ns | slc-engine thread ns/op | idle % | waiting % | rate: polls / markers / wake-ups per op | latency: polls / markers / wake-ups per op |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$out/rows.txt"
  echo
  echo "wall: $SECONDS s; exit $rc"
} >>"$sum"
rm -f "$out/rows.txt"
cat "$sum"
exit $rc
