#!/usr/bin/env bash
# Issue 11, eleventh session (rdr11; bench/RESULTS.md "Issue 11, eleventh
# session: the unpaced reader (rdr11)"): the reader rows of issue 11 for BIN
# (owner on the stream's read-mostly line; the enqueuer's inline check of
# the published filters) against BEFORE, on the GPU host (1 x H200, 16
# vCPUs), in one run:
#   reader   bench/reader9_h200.sh (serving, serving+reader, serving+paired
#            with --reader-windows 20, unpaced and paced to 100 k
#            queries/s, 1 2 4 8 16 threads) once per binary and round, the
#            binaries' order alternating; BIN both designs (the mutex
#            design's rows are the unpaced target), BEFORE the ledger only
#            (its mutex design is the same code). No null-reader control.
#   two      the missed cell, 2 threads unpaced: ledger_bench --workload
#            serving --threads 2 --reader-windows 20, rounds of BIN (both
#            designs) and BEFORE (ledger) alternating, for more pairs.
#   one      the serving row at one thread without a reader, BIN and BEFORE,
#            each unqueried and --queried (the ledger queried once first:
#            every segment keeps the published filters, which each enqueue
#            then checks; what the paired rows do not see, both of their
#            windows paying it), interleaved.
# SUMMARY.txt: per mode and thread count, the paired cost (median [IQR]
# pairs, every round pooled) of BIN, BEFORE and the mutex design, the
# target judged on BIN's medians, the unpaired costs, the reader's on-window
# query rate (an unpaced reader's cost is its rate times what each query
# costs the enqueuers) and the lines a query read; then the 2-thread
# unpaced cell over every round; then the one-thread rows.
# About 130 s on 16 cores; budget 148 s (a step that would pass it is
# skipped and said so); every step under timeout; the folder ~200 KB.
# From the repository root:
#   bench/rdr11_h200.sh gpu-bin .devcarry/gpu-bin-2ed8e43 $OUT/rdr11
# --quick: one round, 1 and 2 threads, 0.1 s rows, 10 ms windows (a check of
# the script off the GPU host; times mean nothing).
# Knobs: RDR11_ROUNDS=2 RDR11_SECONDS=0.3 RDR11_THREADS=1,2,4,8,16
#   RDR11_TWO_ROUNDS=3 RDR11_ONE_ROUNDS=2 RDR11_BUDGET_S=148
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$here/gpu_args.sh"
gpu_args "$@"
rounds=${RDR11_ROUNDS:-2}
secs=${RDR11_SECONDS:-0.3}
threads=${RDR11_THREADS:-1,2,4,8,16}
budget=${RDR11_BUDGET_S:-148}
two_rounds=${RDR11_TWO_ROUNDS:-3}
one_rounds=${RDR11_ONE_ROUNDS:-2}
win=20 rate=100000 two_secs=0.35 one_secs=0.3
if [ -n "$quick" ]; then
  rounds=1 secs=0.1 threads=1,2 win=10 two_rounds=1 two_secs=0.1 one_rounds=1
  one_secs=0.1 budget=80
fi
for b in "$bin" "$before"; do
  [ -x "$b/ledger_bench" ] || { echo "$0: no $b/ledger_bench" >&2; exit 2; }
  "$b/ledger_bench" --help 2>&1 | grep -q -- --reader-windows ||
    { echo "$0: $b/ledger_bench has no --reader-windows" >&2; exit 2; }
  "$b/ledger_bench" --help 2>&1 | grep -q -- --queried ||
    { echo "$0: $b/ledger_bench has no --queried" >&2; exit 2; }
done
# shellcheck source=bench/ab_lib.sh
. "$here/ab_lib.sh"
ab_init "issue 11, eleventh session (rdr11): the unpaced reader, BIN against BEFORE" \
  "reader: bench/reader9_h200.sh per binary and round (READER9_ROUNDS=1 READER9_SECONDS=$secs READER9_THREADS=$threads READER9_WINDOW_MS=$win READER9_RATE=$rate READER9_NULL=0; BEFORE with READER9_ARGS='--impl ledger'), $rounds round(s); two: ledger_bench --workload serving --threads 2 --seconds $two_secs --repeat 1 --reader-windows $win, $two_rounds round(s); one: ledger_bench --workload serving --impl ledger --threads 1 --no-reader --seconds $one_secs --repeat 1 [--queried], $one_rounds round(s); order alternating"

dir_of() { case $1 in before*) echo "$before" ;; *) echo "$bin" ;; esac; }
for r in $(seq 1 "$rounds"); do
  for v in $(ab_order "$r" after before); do ab_reader9 "$v" "$r" "$(dir_of "$v")"; done
done
for r in $(seq 1 "$two_rounds"); do
  for v in $(ab_order "$r" after before); do
    impl=()
    [ "$v" = before ] && impl=(--impl ledger)
    step "two_${v}_r$r" 15 "$(dir_of "$v")/ledger_bench" --workload serving "${impl[@]}" \
      --threads 2 --seconds "$two_secs" --repeat 1 --reader-windows "$win" \
      --json "$out/two_${v}_r$r.json"
  done
done
for r in $(seq 1 "$one_rounds"); do
  for v in $(ab_order "$r" after before after_q before_q); do
    q=()
    case $v in *_q) q=(--queried) ;; esac
    step "one_${v}_r$r" 10 "$(dir_of "$v")/ledger_bench" --workload serving --impl ledger \
      --threads 1 --no-reader --seconds "$one_secs" --repeat 1 "${q[@]}" \
      --json "$out/one_${v}_r$r.json"
  done
done

# The summary; a failure of its own fails the run.
if ! PYTHONPATH="$here" python3 - "$out" "$rounds" "$two_rounds" "$one_rounds" "$rate" "$win" >> "$sum" 2>&1 <<'EOF'
import statistics, sys
import ledger_json
from ledger_json import f, pct
out = sys.argv[1]
rounds, two_rounds, one_rounds = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rate, win = float(sys.argv[5]), sys.argv[6]
def dist(xs):
    return "%s [%s, %s] %d" % (f(pct(xs, .5)), f(pct(xs, .25)), f(pct(xs, .75)), len(xs)) if xs else "- (no pair)"
def med(xs, fmt="%.1f"):
    return fmt % statistics.median(xs) if xs else "-"

def gather(rows, pairs, extra, v):
    for row in rows:
        key = (v, row["impl"], row["threads"])
        if row["workload"] == "serving+paired":
            pairs.setdefault(key, []).extend(row["pair_costs"])
            e = extra.setdefault(key, {"qps": [], "unpaired": [], "lines": []})
            e["qps"].append(row.get("on_window_qps", 0) / 1e6)
            e["unpaired"].append(100 * row.get("unpaired_cost", 0))
        elif row["workload"] == "serving+reader" and row["impl"] == "ledger":
            e = extra.setdefault(key, {"qps": [], "unpaired": [], "lines": []})
            e["lines"].append(row.get("reader_enqueuer_lines_per_query", 0))

print("\nReader rows. Paired cost in %% of the enqueuers' throughput (1 - ops/ns with the"
      " reader querying / ops/ns with it asleep, per adjacent pair of %s ms windows): median"
      " [25th, 75th percentile] pairs, every round pooled. Unpaired: 1 - serving+reader /"
      " serving of the same invocations (median over rounds). Mq/s: the reader's on-window"
      " queries. Lines: enqueuer-written lines a query read (slots + tail/released + headers;"
      " not owner, which BEFORE read on the enqueuers' line of every stream)."
      " BIN = after, BEFORE = before; mtx: the mutex design, BIN's runs." % win)
for mode, title in ledger_json.reader_modes(rate):
    pairs, extra = {}, {}
    for v in ("after", "before"):
        for r in range(1, rounds + 1):
            gather(ledger_json.rows("%s/%s_r%d" % (out, v, r), mode + "_r1"), pairs, extra, v)
    print("\n%s" % title)
    print("| threads | ldg BIN | ldg BEFORE | mtx | target, BIN | unpaired BIN / BEFORE / mtx"
          " | Mq/s BIN / BEFORE / mtx | lines/query BIN / BEFORE |")
    print("|---|---|---|---|---|---|---|---|")
    for t in sorted({k[2] for k in pairs}):
        a = pairs.get(("after", "ledger", t), [])
        b = pairs.get(("before", "ledger", t), [])
        m = pairs.get(("after", "mutex", t), [])
        ea, eb, em = (extra.get((v, i, t), {"qps": [], "unpaired": [], "lines": []})
                      for v, i in (("after", "ledger"), ("before", "ledger"), ("after", "mutex")))
        print("| %d | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s / %s |" % (
            t, dist(a), dist(b), dist(m), ledger_json.verdict(mode, pct(a, .5), pct(m, .5)),
            med(ea["unpaired"]), med(eb["unpaired"]), med(em["unpaired"]),
            med(ea["qps"], "%.2f"), med(eb["qps"], "%.2f"), med(em["qps"], "%.2f"),
            med(ea["lines"]), med(eb["lines"])))

pairs, extra = {}, {}
for v in ("after", "before"):
    for r in range(1, rounds + 1):
        gather(ledger_json.rows("%s/%s_r%d" % (out, v, r), "unpaced_r1"), pairs, extra, v)
    for r in range(1, two_rounds + 1):
        gather(ledger_json.rows(out, "two_%s_r%d" % (v, r)), pairs, extra, v)
a = pairs.get(("after", "ledger", 2), [])
b = pairs.get(("before", "ledger", 2), [])
m = pairs.get(("after", "mutex", 2), [])
print("\nThe 2-thread unpaced cell, every round (reader and two steps) pooled:")
print("| ldg BIN | ldg BEFORE | mtx | target, BIN |")
print("|---|---|---|---|")
print("| %s | %s | %s | %s |" % (dist(a), dist(b), dist(m),
                                ledger_json.verdict("unpaced", pct(a, .5), pct(m, .5))))

print("\nOne thread, serving, ledger, no reader: M ops/s, median [rounds]; ns/op median."
      " --queried: the ledger queried once first (published filters on)")
print("| binary | unqueried | ns/op | --queried | ns/op | queried / unqueried |")
print("|---|---|---|---|---|---|")
for v in ("after", "before"):
    cell = {}
    for q in ("", "_q"):
        ops, ns = [], []
        for r in range(1, one_rounds + 1):
            for row in ledger_json.rows(out, "one_%s%s_r%d" % (v, q, r)):
                if row["workload"] == "serving" and row["impl"] == "ledger":
                    ops.append(row["ops_per_s"] / 1e6)
                    ns.append(row["ns_per_op"])
        cell[q] = (ops, ns)
    u, q = cell[""], cell["_q"]
    ratio = "%.3f" % (statistics.median(q[0]) / statistics.median(u[0])) if u[0] and q[0] else "-"
    print("| %s | %s [%s] | %s | %s [%s] | %s | %s |" % (
        "BIN" if v == "after" else "BEFORE",
        med(u[0], "%.2f"), " ".join("%.1f" % x for x in u[0]), med(u[1]),
        med(q[0], "%.2f"), " ".join("%.1f" % x for x in q[0]), med(q[1]), ratio))
EOF
then
  rc=1
fi
echo "done in $(($(date +%s) - start)) s, rc $rc" >> "$sum"
cat "$sum"
exit $rc
