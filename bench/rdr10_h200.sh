#!/usr/bin/env bash
# Issue 11, tenth session (rdr10; bench/RESULTS.md "Issue 11, tenth session:
# the reader's lines (rdr10)"): the reader rows of issue 11 for BIN (the
# published filters: a query reads one line of the tail segment instead of
# the slots published since the last query) against BEFORE, on the GPU host
# (1 x H200, 16 vCPUs), in one run:
#   reader   bench/reader9_h200.sh (the paired reader rows: serving,
#            serving+reader, serving+paired, --reader-windows 20, unpaced and
#            paced to 100 k queries/s) once per binary and round, rounds of
#            BIN and BEFORE in alternating order. BIN runs both designs (the
#            mutex design's rows are the unpaced target), BEFORE the ledger
#            only (--impl ledger: its mutex design is the same code). No
#            null-reader control (rdr9's run put it at ~0).
#   one      the one-thread private and serving rows (ledger, no reader) of
#            both binaries, interleaved, order alternating; and BIN's with
#            --queried (its ledgers queried once before the rows: the
#            segments keep published filters, which every enqueue widens,
#            the enqueuers' share of a queried ledger that the paired rows
#            do not see, both of their windows paying it).
# SUMMARY.txt: per mode and thread count, the ledger's paired cost of BIN and
# BEFORE (median [IQR] n over the pairs of every round), the mutex design's
# (BIN's runs), the targets judged on BIN's paired medians (unpaced: ldg <=
# mtx; paced: <= 10 %), the enqueuer-written lines a query read (slots, tail
# and released, headers; and the published filters' lines, BIN only) and its
# slots, from the serving+reader rows; then the one-thread rows (M ops/s,
# ns/op, p99.9; median [rounds]). Each reader9 call keeps its own SUMMARY.txt
# and JSON under OUT/<after|before>_r<N>/.
# About 105 s on 16 cores; budget 145 s (a step that would pass it is
# skipped and said so); every step under timeout; the folder ~150 KB.
# From the repository root:
#   bench/rdr10_h200.sh gpu-bin .devcarry/gpu-bin-daf8441 $OUT/rdr10
# --quick: one round, 1 and 2 threads, 0.1 s rows, 10 ms windows (a check of
# the script off the GPU host; times mean nothing).
# Knobs: RDR10_ROUNDS=2 RDR10_SECONDS=0.3 RDR10_THREADS=1,2,4,8,16
#   RDR10_BUDGET_S=145 RDR10_ONE_ROUNDS=3
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$here/gpu_args.sh"
gpu_args "$@"
rounds=${RDR10_ROUNDS:-2}
secs=${RDR10_SECONDS:-0.3}
threads=${RDR10_THREADS:-1,2,4,8,16}
budget=${RDR10_BUDGET_S:-145}
one_rounds=${RDR10_ONE_ROUNDS:-3}
win=20 rate=100000 one_secs=0.3
if [ -n "$quick" ]; then
  rounds=1 secs=0.1 threads=1,2 win=10 one_rounds=1 one_secs=0.1 budget=80
fi
for b in "$bin" "$before"; do
  [ -x "$b/ledger_bench" ] || { echo "$0: no $b/ledger_bench" >&2; exit 2; }
  "$b/ledger_bench" --help 2>&1 | grep -q -- --reader-windows ||
    { echo "$0: $b/ledger_bench has no --reader-windows" >&2; exit 2; }
done
# shellcheck source=bench/ab_lib.sh
. "$here/ab_lib.sh"
ab_init "issue 11, tenth session (rdr10): the reader's lines, BIN against BEFORE" \
  "reader: bench/reader9_h200.sh per binary and round (READER9_ROUNDS=1 READER9_SECONDS=$secs READER9_THREADS=$threads READER9_WINDOW_MS=$win READER9_RATE=$rate READER9_NULL=0; BEFORE with READER9_ARGS='--impl ledger'), $rounds round(s), order alternating; one: ledger_bench --workload private|serving --impl ledger --threads 1 --no-reader --seconds $one_secs --repeat 1, $one_rounds round(s)"

dir_of() { if [ "$1" = before ]; then echo "$before"; else echo "$bin"; fi; }
for r in $(seq 1 "$rounds"); do
  for v in $(ab_order "$r" after before); do ab_reader9 "$v" "$r" "$(dir_of "$v")"; done
done
for r in $(seq 1 "$one_rounds"); do
  for v in $(ab_order "$r" after before queried); do
    q=()
    [ "$v" = queried ] && q=(--queried)
    for w in private serving; do
      step "one_${w}_${v}_r$r" 15 "$(dir_of "$v")/ledger_bench" --workload "$w" --impl ledger \
        --threads 1 --no-reader --seconds "$one_secs" --repeat 1 "${q[@]}" \
        --json "$out/one_${w}_${v}_r$r.json"
    done
  done
done

PYTHONPATH="$here" python3 - "$out" "$rounds" "$one_rounds" "$rate" >> "$sum" <<'EOF'
import statistics, sys
import ledger_json
from ledger_json import f, pct
out, rounds, one_rounds, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def dist(xs):
    return "%s [%s, %s] %d" % (f(pct(xs, .5)), f(pct(xs, .25)), f(pct(xs, .75)), len(xs)) if xs else "- (no pair)"
def med(xs, fmt="%.1f"):
    return fmt % statistics.median(xs) if xs else "-"

print("\nReader rows. Costs in % of the enqueuers' throughput, paired (1 - ops/ns with"
      " the reader querying / ops/ns with it asleep, one per adjacent pair of windows):"
      " median [25th, 75th percentile] pairs, every round pooled. Lines: enqueuer-written"
      " lines read per query (slots + tail/released + segment headers), then the published"
      " filters' lines (BIN), and slots; serving+reader rows, median over rounds.")
for mode, title in ledger_json.reader_modes(rate):
    pairs, lines = {}, {}
    for v in ("after", "before"):
        for r in range(1, rounds + 1):
            for row in ledger_json.rows("%s/%s_r%d" % (out, v, r), mode + "_r1"):
                key = (v, row["impl"], row["threads"])
                if row["workload"] == "serving+paired":
                    pairs.setdefault(key, []).extend(row["pair_costs"])
                elif row["workload"] == "serving+reader" and row["impl"] == "ledger":
                    l = lines.setdefault(key, ([], [], []))
                    l[0].append(row.get("reader_enqueuer_lines_per_query", 0))
                    l[1].append(row.get("reader_filter_lines_per_query", 0))
                    l[2].append(row.get("reader_slots_per_query", 0))
    print("\n%s" % title)
    print("| threads | ldg BIN paired | ldg BEFORE paired | mtx paired (BIN's runs)"
          " | lines/query BIN (filters) / BEFORE | slots/query BIN / BEFORE | target, BIN |")
    print("|---|---|---|---|---|---|---|")
    for t in sorted({k[2] for k in list(pairs) + list(lines)}):
        a = pairs.get(("after", "ledger", t), [])
        b = pairs.get(("before", "ledger", t), [])
        m = pairs.get(("after", "mutex", t), [])
        la = lines.get(("after", "ledger", t), ([], [], []))
        lb = lines.get(("before", "ledger", t), ([], [], []))
        verdict = ledger_json.verdict(mode, pct(a, .5), pct(m, .5))
        print("| %d | %s | %s | %s | %s (%s) / %s | %s / %s | %s |" % (
            t, dist(a), dist(b), dist(m), med(la[0]), med(la[1]), med(lb[0]),
            med(la[2]), med(lb[2]), verdict))

print("\nOne thread, ledger, no reader: M ops/s, median [rounds]; ns/op and p99.9 (ns) medians."
      " BIN --queried: its ledgers queried once first (published filters on)")
print("| workload | BIN | BEFORE | BIN / BEFORE | ns/op BIN / BEFORE | p99.9 BIN / BEFORE"
      " | BIN --queried | ns/op | --queried / BEFORE |")
print("|---|---|---|---|---|---|---|---|---|")
for w in ("private", "serving"):
    cell = {}
    for v in ("after", "before", "queried"):
        ops, ns, p = [], [], []
        for r in range(1, one_rounds + 1):
            for row in ledger_json.rows(out, "one_%s_%s_r%d" % (w, v, r)):
                if row["workload"] == w and row["impl"] == "ledger":
                    ops.append(row["ops_per_s"] / 1e6)
                    ns.append(row["ns_per_op"])
                    p.append(row["p999_ns"])
        cell[v] = (ops, ns, p)
    a, b, q = cell["after"], cell["before"], cell["queried"]
    def ratio(x, y):
        return "%.2fx" % (statistics.median(x[0]) / statistics.median(y[0])) if x[0] and y[0] else "-"
    print("| %s | %s [%s] | %s [%s] | %s | %s / %s | %s / %s | %s [%s] | %s | %s |" % (
        w, med(a[0], "%.2f"), " ".join("%.1f" % x for x in a[0]),
        med(b[0], "%.2f"), " ".join("%.1f" % x for x in b[0]), ratio(a, b),
        med(a[1]), med(b[1]), med(a[2], "%.0f"), med(b[2], "%.0f"),
        med(q[0], "%.2f"), " ".join("%.1f" % x for x in q[0]), med(q[1]), ratio(q, b)))
EOF
echo "done in $(($(date +%s) - start)) s, rc $rc" >> "$sum"
cat "$sum"
exit $rc
