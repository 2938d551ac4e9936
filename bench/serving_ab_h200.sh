#!/usr/bin/env bash
# Issue 10, the serving regression at 1 thread (bench/RESULTS.md, "The
# serving regression at 1 thread"): the serving pool cell of BIN's
# pool_bench and of BEFORE's in interleaved rounds (before, after, after
# --own-poll 4, after --own-poll 1, after --placement issuer), 1 thread;
# then --devices 1 of both (the request thread's CPU split: driver calls,
# benchmark work, streamledger); then after and after --own-poll 4 at 4
# and 16 threads. It says where the request thread's extra 5-10 us per
# request go: BIN's diag splits the staging fill by who checked the
# block's last request (own thread / the engine: the check's 64 KiB read
# leaves the lines in the checker's core), the split says driver, benchmark
# or library, and the /o rows say whether running the checks on the
# request thread (as ~55 % did in e49e015's fastest round) gives the CPU
# back, without costing 4 and 16 threads. SUMMARY.txt: every row and diag
# line, by step. Every step under `timeout`; a step that would pass the
# budget is skipped (said in SUMMARY.txt).
#
# Usage, from the repository root (the lead's device call):
#   bench/serving_ab_h200.sh gpu-bin .devcarry/gpu-bin-7856fa6 $OUT/serving_ab
# Knobs (environment; defaults ~60-90 s on the H200):
#   SERVE_AB_MS=300  SERVE_AB_ROUNDS=3  SERVE_AB_BUDGET_S=170
#   SERVE_AB_ARGS= (extra pool_bench arguments for both binaries, e.g.
#   SERVE_AB_ARGS=--driver=host SERVE_AB_MS=50 SERVE_AB_ROUNDS=1 to try it
#   without a GPU)
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN BEFORE OUT" >&2; exit 2; }
bin=$1 before=$2 out=$3
ms=${SERVE_AB_MS:-300}
rounds=${SERVE_AB_ROUNDS:-3}
budget=${SERVE_AB_BUDGET_S:-170}
read -r -a extra <<< "${SERVE_AB_ARGS:-}"
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "serving A/B at 1 thread (issue 10)" \
  "after = $bin/pool_bench, before = $before/pool_bench; --only pool, $ms ms per cell, $rounds rounds
columns: req/s | cpu us/req, req-thread cpu us/req | p50 us, p99 us | resv MiB, used MiB"
# run NAME LIMIT_S COMMAND...: step, then its rows and diag lines into
# SUMMARY.txt, prefixed by NAME.
run() {
  step "$@"
  grep -s '^serving\|^multigpu pool\|^diag' "$out/$1.log" | sed "s|^|$1: |" >> "$sum"
}

a=("$bin/pool_bench" "${extra[@]}" --only pool --ms "$ms")
b=("$before/pool_bench" "${extra[@]}" --only pool --ms "$ms")
for r in $(seq 1 "$rounds"); do
  run "before_r$r" 30 "${b[@]}" --threads 1
  run "after_r$r" 30 "${a[@]}" --threads 1
  run "after_o4_r$r" 30 "${a[@]}" --threads 1 --own-poll 4
  run "after_o1_r$r" 30 "${a[@]}" --threads 1 --own-poll 1
  run "after_pi_r$r" 30 "${a[@]}" --threads 1 --placement issuer
done
run before_split 30 "${b[@]}" --threads 1 --devices 1
run after_split 30 "${a[@]}" --threads 1 --devices 1
run after_o4_split 30 "${a[@]}" --threads 1 --devices 1 --own-poll 4
run after_t4_16 40 "${a[@]}" --threads 4,16
run after_o4_t4_16 40 "${a[@]}" --threads 4,16 --own-poll 4
echo "done in $(($(date +%s) - start)) s, rc $rc" >> "$sum"
cat "$sum"
exit $rc
