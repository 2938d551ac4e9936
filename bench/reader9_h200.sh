#!/usr/bin/env bash
# Issue 11, ninth session (rdr9; bench/RESULTS.md "Issue 11, ninth session:
# the reader's cost, paired (rdr9)"): the two reader rows of issue 11, paired
# within each run, on the GPU host (1 x H200, 16 vCPUs):
#   - "reader without pause, cost to enqueuers, 1-16 threads <= the mutex
#     design's";
#   - "<= 10 % paced to 100 k queries/s at every thread count".
# Each step is one BIN/ledger_bench --workload serving --reader-windows W
# invocation at 1, 2, 4, 8 and 16 threads, both designs: per thread count
# the serving row, the serving+reader row (the unpaired cost, 1 - with /
# without, as bench/core5a_h200.sh measured it) and the serving+paired row
# (the reader querying and asleep in turn in windows of W ms inside one run;
# one cost per adjacent on/off pair). Rounds of two steps, unpaced and paced
# to 100 k queries/s, their order alternating; after the first round, once,
# the control: the paced reader's loop without its queries (--reader-null:
# spinning on its CPU in on-windows, asleep in off-windows), what a busy
# vCPU beside the enqueuers costs them on this host. SUMMARY.txt: per mode and
# thread count, the paired cost's median and [25th, 75th percentile] over the
# pairs of every round pooled, the pairs' count, each round's median, and
# the unpaired cost of the same runs (median [rounds]); the on-window query
# rates (median over rounds); whether the target is met on the paired
# medians.
# About 120 s on 16 cores (every step under timeout; a step that would pass
# the budget, 140 s, is skipped and said so); the folder stays ~100 KB.
#
# Usage, from the repository root (the lead's device call):
#   bench/reader9_h200.sh gpu-bin $OUT/reader9
#   bench/reader9_h200.sh gpu-bin .devcarry/gpu-bin-c83f35a $OUT/reader9
# (BEFORE is accepted for the usual command line and not run: its
# ledger_bench has no --reader-windows.) --quick: one round, 1 and 2
# threads, 0.1 s rows, 10 ms windows (a check of the script; times mean
# nothing). Knobs (environment): READER9_SECONDS=0.35 (timed phase per row;
#   the control's rows 0.3)
#   READER9_ROUNDS=3  READER9_THREADS=1,2,4,8,16  READER9_WINDOW_MS=20
#   READER9_RATE=100000  READER9_BUDGET_S=140
#   READER9_NULL=1 (0: no control step)  READER9_ARGS='' (more ledger_bench
#   arguments for every step, e.g. '--impl ledger'; bench/rdr10_h200.sh
#   runs this script per binary and round with them)
set -uo pipefail
quick=
if [ "${1:-}" = --quick ]; then
  quick=1
  shift
fi
case $# in
  2) bin=$1 before='' out=$2 ;;
  3) bin=$1 before=$2 out=$3 ;;
  *) echo "usage: $0 [--quick] BIN [BEFORE] OUT" >&2; exit 2 ;;
esac
secs=${READER9_SECONDS:-0.35}
null_secs=0.3
rounds=${READER9_ROUNDS:-3}
threads=${READER9_THREADS:-1,2,4,8,16}
win=${READER9_WINDOW_MS:-20}
rate=${READER9_RATE:-100000}
budget=${READER9_BUDGET_S:-140}
null_step=${READER9_NULL:-1}
read -r -a extra <<< "${READER9_ARGS:-}"
if [ -n "$quick" ]; then
  secs=0.1 null_secs=0.1 rounds=1 threads=1,2 win=10 budget=60
fi
lb=$bin/ledger_bench
[ -x "$lb" ] || { echo "$0: no $lb" >&2; exit 2; }
"$lb" --help 2>&1 | grep -q -- --reader-windows ||
  { echo "$0: $lb has no --reader-windows" >&2; exit 2; }
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "issue 11, ninth session (rdr9): the reader's cost, paired ($lb)" \
  "ledger_bench --workload serving --threads $threads --seconds $secs --repeat 1 --reader-windows $win, unpaced and --reader-rate $rate, $rounds round(s), order alternating"
[ -n "$before" ] && echo "BEFORE ($before) not run: its ledger_bench has no --reader-windows" >> "$sum"

# One step: per thread count 6 rows (3 kinds x 2 designs) of 0.2 s warm-up +
# S; the limit allows 40 % more and 8 s.
n_thr=$(echo "$threads" | tr ',' '\n' | grep -c .)
limit() { awk -v n="$n_thr" -v s="$1" 'BEGIN { printf "%d", n * 6 * (0.2 + s) * 1.4 + 8 }'; }
# run NAME SECONDS ARGS...: one ledger_bench step, its JSON beside.
run() {
  local name=$1 s=$2
  shift 2
  step "$name" "$(limit "$s")" "$lb" --workload serving --threads "$threads" --seconds "$s" \
    --repeat 1 --reader-windows "$win" "${extra[@]}" "$@" --json "$out/$name.json"
  if [ -f "$out/$name.log" ] && ! grep -q 'all keeps ran exactly once' "$out/$name.log"; then
    echo "FAILED: $name: no 'all keeps ran exactly once'" >> "$sum"
    rc=1
  fi
}
for r in $(seq 1 "$rounds"); do
  for mode in $(ab_order "$r" unpaced paced); do
    pace=()
    [ "$mode" = paced ] && pace=(--reader-rate "$rate")
    run "${mode}_r$r" "$secs" "${pace[@]}"
  done
  # After the first round, so that a tight budget skips a last round's step
  # rather than this one.
  [ "$r" -eq 1 ] && [ "$null_step" = 1 ] &&
    run null_r1 "$null_secs" --reader-rate "$rate" --reader-null
done

PYTHONPATH="$(dirname "$0")" python3 - "$out" "$rounds" "$rate" >> "$sum" <<'EOF'
import statistics, sys
import ledger_json
from ledger_json import f, pct
out, rounds, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def rows(name):
    return ledger_json.rows(out, name)
def rnds(xs):
    return "/".join(f(x, 100, "%.0f") for x in xs) if xs else "-"

print("\nCosts in % of the enqueuers' throughput. paired: 1 - (ops/ns with the reader querying)"
      " / (ops/ns with it asleep), one per adjacent pair of windows in one run; median"
      " [25th, 75th percentile] n over the pairs of every round pooled, then each round's"
      " median. unpaired: 1 - serving+reader / serving, two rows of the same invocation"
      " (the old measure); median [rounds].")
for mode, title in ledger_json.reader_modes(rate):
    pairs, permed, unp, qps = {}, {}, {}, {}
    for r in range(1, rounds + 1):
        for row in rows("%s_r%d" % (mode, r)):
            key = (row["impl"], row["threads"])
            if row["workload"] == "serving+paired":
                pairs.setdefault(key, []).extend(row["pair_costs"])
                if row["pairs"] > 0:
                    permed.setdefault(key, []).append(row["paired_cost_median"])
                qps.setdefault(key, []).append(row["on_window_qps"])
            elif row["workload"] == "serving+reader":
                unp.setdefault(key, []).append(row["reader_cost"])
    print("\n%s" % title)
    print("| threads | ldg paired | mtx paired | ldg unpaired | mtx unpaired"
          " | ldg paired, rounds | mtx paired, rounds | on-window k queries/s, median, ldg / mtx | target (paired medians) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in sorted({k[1] for k in list(pairs) + list(unp)}):
        cells = []
        for impl in ("ledger", "mutex"):
            xs = pairs.get((impl, t), [])
            cells.append("%s [%s, %s] %d" % (f(pct(xs, .5)), f(pct(xs, .25)), f(pct(xs, .75)), len(xs))
                         if xs else "- (no pair)")
        for impl in ("ledger", "mutex"):
            xs = unp.get((impl, t), [])
            cells.append("%s [%s]" % (f(statistics.median(xs)) if xs else "-", rnds(xs)))
        for impl in ("ledger", "mutex"):
            cells.append(rnds(permed.get((impl, t), [])))
        q = [qps.get((impl, t), []) for impl in ("ledger", "mutex")]
        cells.append(" / ".join("%.0f" % (statistics.median(x) / 1e3) if x else "-" for x in q))
        cells.append(ledger_json.verdict(mode, pct(pairs.get(("ledger", t), []), .5),
                                         pct(pairs.get(("mutex", t), []), .5)))
        print("| %d | %s |" % (t, " | ".join(cells)))

print("\ncontrol, once (--reader-null --reader-rate %.0f): the paced reader's loop without its"
      " queries, spinning in on-windows, asleep in off-windows; paired cost, median [IQR] n"
      % rate)
print("| threads | ldg enqueuers | mtx enqueuers |")
print("|---|---|---|")
ctl = {}
for row in rows("null_r1"):
    if row["workload"] == "serving+paired":
        ctl[(row["impl"], row["threads"])] = row["pair_costs"]
for t in sorted({k[1] for k in ctl}):
    cells = []
    for impl in ("ledger", "mutex"):
        xs = ctl.get((impl, t), [])
        cells.append("%s [%s, %s] %d" % (f(pct(xs, .5)), f(pct(xs, .25)), f(pct(xs, .75)), len(xs))
                     if xs else "-")
    print("| %d | %s |" % (t, " | ".join(cells)))
EOF
echo "done in $(($(date +%s) - start)) s, rc $rc" >> "$sum"
cat "$sum"
exit $rc
