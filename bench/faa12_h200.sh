#!/usr/bin/env bash
# Issue 11, twelfth session (faa12; bench/RESULTS.md "Issue 11, twelfth
# session: add-first reservation on shared streams (faa12)"): the shared
# row (one shared stream, >= 80 % of the ceiling loop at 2-16 threads) for
# BIN (holders add first while s->fast_gen is armed, tail alone on its
# line) against BEFORE (check-then-add), on the GPU host (1 x H200, 16
# vCPUs), in one run:
#   shared   ledger_bench --workload shared --impl ledger --threads 2,4,16
#            --seconds 0.3 --repeat 1 (each invocation also runs the
#            ceiling loop at the same counts: the row's "of ceiling" is
#            against its own invocation's ceiling), FAA12_ROUNDS (6)
#            rounds, BIN and BEFORE alternating (BIN first in odd rounds).
#   one      (first) one thread, ledger: private, private_si, serving_si
#            (the paths the layout moved: private streams are owned, otail
#            beside tail_end; single-issuer streams now store tail on a line
#            of its own and load tail_end from the next), FAA12_ONE_ROUNDS
#            (2) rounds, BIN and BEFORE alternating.
#   ceiling  (last, if the budget allows) BEFORE's ledger_bench --workload
#            ceiling_load once (the ceiling with a load of the line before
#            the add: the shape BEFORE's check has).
# SUMMARY.txt: bench/results-h200-tenth/shared_summary.py over the shared
# rows (per thread count: M ops/s, median [rounds], of the same
# invocation's ceiling, p99.9; variant A = BIN, B = BEFORE), then the
# one-thread rows (M ops/s per round, median).
# About 50 s (on the 2-core VM: 12 one-thread invocations of ~0.6 s, 12
# shared invocations of ~3.5 s, one ceiling_load of ~1.3 s); budget 56 s (a
# step that would pass it is skipped and said so); every step under
# timeout, so the script ends within 60 s but for a hung step's 15.
# From the repository root (the lead's device call):
#   bench/faa12_h200.sh gpu-bin .devcarry/gpu-bin-main $OUT/faa12
# --quick: one round, 0.05 s rows (a check of the script off the GPU host;
# times mean nothing). Knobs: FAA12_ROUNDS=6 FAA12_SECONDS=0.3
# FAA12_THREADS=2,4,16 FAA12_ONE_ROUNDS=2 FAA12_BUDGET_S=56
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$here/gpu_args.sh"
gpu_args "$@"
rounds=${FAA12_ROUNDS:-6}
secs=${FAA12_SECONDS:-0.3}
threads=${FAA12_THREADS:-2,4,16}
one_rounds=${FAA12_ONE_ROUNDS:-2}
budget=${FAA12_BUDGET_S:-56}
if [ -n "$quick" ]; then
  rounds=1 secs=0.05 one_rounds=1 budget=40
fi
for b in "$bin" "$before"; do
  [ -x "$b/ledger_bench" ] || { echo "$0: no $b/ledger_bench" >&2; exit 2; }
done
sum=$out/SUMMARY.txt
{
  gpu_header "faa12_h200.sh: the shared row, BIN (A, add-first) against BEFORE (B), $rounds round(s), threads $threads, ${secs} s rows; one-thread private/private_si/serving_si, $one_rounds round(s)"
} > "$sum"
rc=0
start=$SECONDS
last=3 # seconds the slowest step took so far (the budget's estimate)
step() { # name limit command...
  local name=$1 lim=$2 t0=$SECONDS
  shift 2
  if [ $((SECONDS - start + last)) -gt "$budget" ]; then
    echo "$name not started: $((SECONDS - start)) s used of $budget" >> "$sum"
    return
  fi
  timeout -k 2 "$lim" "$@" > "$out/$name.txt" 2>&1 ||
    { rc=1; echo "$name: exit $? (see $name.txt)" >> "$sum"; }
  [ $((SECONDS - t0)) -gt "$last" ] && last=$((SECONDS - t0))
}
dir_of() { case $1 in B) echo "$before" ;; *) echo "$bin" ;; esac; }
for r in $(seq 1 "$one_rounds"); do
  order="A B"
  [ $((r % 2)) -eq 0 ] && order="B A"
  for v in $order; do
    for w in private private_si serving_si; do
      step "one-$w-$v-$r" 10 "$(dir_of "$v")/ledger_bench" --workload "$w" \
        --impl ledger --threads 1 --no-reader --no-ceiling --seconds "$secs" \
        --repeat 1
    done
  done
done
for r in $(seq 1 "$rounds"); do
  order="A B"
  [ $((r % 2)) -eq 0 ] && order="B A"
  for v in $order; do
    step "shared-$v-$r" 15 "$(dir_of "$v")/ledger_bench" --workload shared \
      --impl ledger --threads "$threads" --seconds "$secs" --repeat 1 \
      --json "$out/shared-$v-$r.json"
  done
done
step "ceil-ceiling_load-1" 10 "$before/ledger_bench" --workload ceiling_load \
  --threads "$threads" --seconds "$secs" --repeat 1
echo "steps done after $((SECONDS - start)) s" >> "$sum"
timeout -k 1 10 python3 "$here/results-h200-tenth/shared_summary.py" "$out" \
  ceiling_load A,B >> "$sum" 2>&1 || rc=1
timeout -k 1 10 python3 - "$out" >> "$sum" 2>&1 <<'PY' || rc=1
import glob, os, re, statistics, sys
out = sys.argv[1]
print("\none thread, ledger: M ops/s per round (median); A = BIN, B = BEFORE")
for w in ("private", "private_si", "serving_si"):
    for v in ("A", "B"):
        xs = []
        for p in sorted(glob.glob(os.path.join(out, f"one-{w}-{v}-*.txt"))):
            for line in open(p):
                m = re.match(r"^(\w+)\s+1 \|\s+([\d.]+)", line)
                if m and m.group(1) == w:
                    xs.append(float(m.group(2)))
        if xs:
            print(f"  {w:10s} {v}: {statistics.median(xs):6.2f} "
                  f"[{' '.join('%.2f' % x for x in xs)}]")
PY
echo "elapsed $((SECONDS - start)) s; rows in $out (exit $rc)" >> "$sum"
cat "$sum"
exit $rc
