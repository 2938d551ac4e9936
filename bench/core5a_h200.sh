#!/usr/bin/env bash
# Issue 11, fifth session (core5a; RESULTS.md "Issue 11, fifth session: the
# holds query and the reader"): the query rows of issue 11 for BIN's
# ledger_bench (segment summaries) and BEFORE's, in interleaved rounds, with
# the mutex design in the same runs:
#   - ldg_holds_vector / ldg_holds_host_range miss at 1 k, 16 k and 128 k
#     pending entries (--workload holds);
#   - the reader's cost to the enqueuers of the serving row, without pause
#     and paced to 100 k queries/s, at 1-16 threads (--workload serving:
#     each invocation runs the row without and with the reader, and
#     reader_cost = 1 - with / without);
#   - once, after the first round, BIN only: the same reader against a
#     ledger of its own that nobody writes (--reader-detached): what a
#     reader costs the enqueuers without touching a line of theirs.
# BEFORE runs the ledger only (its mutex design is the same code); BIN runs
# both. SUMMARY.txt: the issue table's rows, the median over the rounds
# and every round's value. Every step under `timeout`; a step that would
# pass the budget is skipped (said in SUMMARY.txt). ~90 s on 16 cores.
#
# Usage, from the repository root (the lead's device call):
#   bench/core5a_h200.sh gpu-bin .devcarry/gpu-bin-cea4c18 $OUT/core5a
# Knobs (environment): CORE5A_SECONDS=0.3 (timed phase per row)
#   CORE5A_ROUNDS=2  CORE5A_THREADS=1,2,4,8,16  CORE5A_BUDGET_S=115
#   CORE5A_HOLDS_ARGS= (e.g. --smoke: 1/64 of the depths, to try it here)
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN BEFORE OUT" >&2; exit 2; }
bin=$1 before=$2 out=$3
secs=${CORE5A_SECONDS:-0.3}
rounds=${CORE5A_ROUNDS:-2}
threads=${CORE5A_THREADS:-1,2,4,8,16}
budget=${CORE5A_BUDGET_S:-115}
read -r -a holds_extra <<< "${CORE5A_HOLDS_ARGS:-}"
for d in "$bin" "$before"; do
  [ -x "$d/ledger_bench" ] || { echo "$0: no $d/ledger_bench" >&2; exit 2; }
done
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "issue 11, core5a: the holds miss and the reader (after = $bin, before = $before)" \
  "ledger_bench --seconds $secs --repeat 1, threads $threads, $rounds rounds (before/after order alternating)"

a=("$bin/ledger_bench")
b=("$before/ledger_bench")
serving=(--workload serving --threads "$threads" --seconds "$secs" --repeat 1)
paced=(--reader-rate 100000)
# lb NAME LIMIT_S VERSION_ARGS...: one ledger_bench step, its JSON beside.
lb() {
  local name=$1 lim=$2
  shift 2
  step "$name" "$lim" "$@" --json "$out/$name.json"
  if [ -f "$out/$name.log" ] && ! grep -q 'all keeps ran exactly once' "$out/$name.log"; then
    echo "FAILED: $name: no 'all keeps ran exactly once'" >> "$sum"
    rc=1
  fi
}
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
  for v in $order; do
    if [ "$v" = before ]; then cmd=("${b[@]}"); impl=ledger; else cmd=("${a[@]}"); impl=both; fi
    lb "${v}_unpaced_r$r" 30 "${cmd[@]}" "${serving[@]}" --impl $impl
    lb "${v}_paced_r$r" 30 "${cmd[@]}" "${serving[@]}" "${paced[@]}" --impl $impl
    lb "${v}_holds_r$r" 25 "${cmd[@]}" --workload holds --impl $impl "${holds_extra[@]}"
  done
  # After the first round, so that a tight budget skips a second round's
  # step rather than this one.
  [ "$r" -eq 1 ] && lb after_detached 30 "${a[@]}" "${serving[@]}" --impl both --reader-detached
done

PYTHONPATH="$(dirname "$0")" python3 - "$out" "$rounds" >> "$sum" <<'EOF'
import glob, json, os, statistics, sys
import ledger_json
out, rounds = sys.argv[1], int(sys.argv[2])
def rows(name):
    return ledger_json.rows(out, name)
def med(xs):
    return statistics.median(xs) if xs else None
def fmt(x, scale=1.0, f="%.0f"):
    return "-" if x is None else f % (x * scale)
def per_round(xs, scale, f):
    return "/".join(fmt(x, scale, f) for x in xs) if xs else "-"

for mode, title in (("unpaced", "reader without pause"),
                    ("paced", "reader paced to 100 k queries/s")):
    print("\n%s: cost to the enqueuers (1 - with / without reader), %%, median [rounds]" % title)
    print("| threads | before (ldg) | after (ldg) | mutex | after, per query: segments; slots; all enqueuer/releaser lines read [rounds] |")
    print("|---|---|---|---|---|")
    cost = {}
    reads = {}
    for v in ("before", "after"):
        for r in range(1, rounds + 1):
            for row in rows("%s_%s_r%d" % (v, mode, r)):
                if row["workload"] != "serving+reader":
                    continue
                key = (v if row["impl"] == "ledger" else "mutex", row["threads"])
                cost.setdefault(key, []).append(row["reader_cost"])
                if v == "after" and row["impl"] == "ledger" and "reader_slots_per_query" in row:
                    reads.setdefault(row["threads"], []).append(
                        (row["reader_segments_per_query"], row["reader_slots_per_query"],
                         row.get("reader_enqueuer_lines_per_query", float("nan"))))
    for t in sorted({k[1] for k in cost}):
        cells = []
        for k in ("before", "after", "mutex"):
            xs = cost.get((k, t), [])
            cells.append("%s [%s]" % (fmt(med(xs), 100), per_round(xs, 100, "%.0f")))
        rd = reads.get(t, [])
        rds = " / ".join("%.1f; %.1f; %.1f" % x for x in rd) if rd else "-"
        print("| %d | %s | %s |" % (t, " | ".join(cells), rds))

print("\nreader against a ledger of its own (after, --reader-detached, unpaced): cost to the enqueuers, %")
print("| threads | ldg | mutex |")
print("|---|---|---|")
det = {}
for row in rows("after_detached"):
    if row["workload"] == "serving+reader":
        det[(row["impl"], row["threads"])] = row["reader_cost"]
for t in sorted({k[1] for k in det}):
    print("| %d | %s | %s |" % (t, fmt(det.get(("ledger", t)), 100), fmt(det.get(("mutex", t)), 100)))

print("\nholds miss, us per query, median [rounds]: vector / host range")
print("| pending | before vector | after vector | mutex vector | before range | after range | mutex range |")
print("|---|---|---|---|---|---|---|")
h = {}
for v in ("before", "after"):
    for r in range(1, rounds + 1):
        for row in rows("%s_holds_r%d" % (v, r)):
            if row["workload"] != "holds_miss":
                continue
            k = v if row["impl"] == "ledger" else "mutex"
            h.setdefault((k, row["pending"], "v"), []).append(row["holds_vector_miss_ns"] / 1e3)
            h.setdefault((k, row["pending"], "r"), []).append(row["holds_host_range_miss_ns"] / 1e3)
for n in sorted({k[1] for k in h}):
    cells = []
    for kind in ("v", "r"):
        for k in ("before", "after", "mutex"):
            xs = h.get((k, n, kind), [])
            cells.append("%s [%s]" % (fmt(med(xs), 1, "%.2f"), per_round(xs, 1, "%.2f")))
    print("| %d | %s |" % (n, " | ".join(cells)))
EOF
echo "done in $(($(date +%s) - start)) s, rc $rc" >> "$sum"
cat "$sum"
exit $rc
