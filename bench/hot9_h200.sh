#!/usr/bin/env bash
# Issue 11, ninth session (hot9: hot reuse on owned streams; bench/RESULTS.md,
# "Issue 11, ninth session: hot reuse on owned streams (hot9)"), on the GPU
# host (1 x H200, 16 vCPUs): BIN against BEFORE, side by side in one run.
#   sixteen   private streams at 16 threads (ledger only): BIN, BEFORE, and
#             16 single-thread BIN processes at once, one per CPU (what the
#             host gives 16 independent workers: the ceiling), 5 rounds,
#             the order of BIN and BEFORE alternating. Mop/s and p99.9.
#   one       private at 1 thread, BIN and BEFORE, 5 rounds alternating.
#   serving   the serving workload at 1 and 16 threads (no reader) and at 4
#             with the reader (serving+reader: the reader's queries now
#             count themselves in each owned stream's visitors, two RMWs
#             per stream visited), BIN and BEFORE, 3 rounds alternating.
#   evidence  ledger_evidence_bench --workload private --threads 16 of BIN
#             and BEFORE: extensions fresh / pooled / spares, hot reuses,
#             reclaimer batches, membarrier calls, interrupts per CPU.
# Every step under timeout; about 70 s on 16 cores, budget 100 s (a step
# that would start past it is skipped and said so). Writes OUT/SUMMARY.txt
# (the tables: per row the median over rounds and every round's value) and
# the raw outputs (OUT/raw, a few hundred KB at most).
# From the repository root:
#   bench/hot9_h200.sh gpu-bin .devcarry/gpu-bin-c83f35a $OUT/hot9
# --quick: one round of 0.1 s rows, 4 processes/threads instead of 16 (a
# check of the script off the GPU host; times mean nothing).
set -uo pipefail
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
t0=$SECONDS
budget=${HOT9_BUDGET_S:-100}
rounds=5 srounds=3 secs=0.4 ssecs=0.3 wide=16
if [ -n "$quick" ]; then
  rounds=1 srounds=1 secs=0.1 ssecs=0.1 wide=4
fi
raw=$out/raw
mkdir -p "$raw"
sum=$out/SUMMARY.txt
status=0
for b in "$bin" "$before"; do
  for x in ledger_bench ledger_evidence_bench; do
    [ -x "$b/$x" ] || { echo "$0: no $b/$x" >&2; exit 2; }
  done
done
ncpu=$(nproc)
{
  echo "hot9_h200.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $ncpu CPUs"
  echo "BIN    $bin ($(head -1 "$bin/BUILD_INFO.txt" 2>/dev/null))"
  echo "BEFORE $before ($(head -1 "$before/BUILD_INFO.txt" 2>/dev/null))"
  echo "rows: private --impl ledger --seconds $secs (16-thread and 1-thread, $rounds rounds);"
  echo "      serving --impl ledger --seconds $ssecs --repeat 1 ($srounds rounds); order alternating"
} > "$sum"

# in_budget NAME SECONDS: whether a step of about SECONDS fits; says so if not.
in_budget() {
  if [ $((SECONDS - t0 + $2)) -gt "$budget" ]; then
    echo "SKIPPED $1: past the ${budget} s budget" >> "$sum"
    return 1
  fi
}
# row FILE WORKLOAD: "Mop/s p99.9" of the ledger's first WORKLOAD row.
row() {
  awk -v w="$2" -F'|' '$1 ~ "^"w" " { split($2, a, " "); print a[1], a[5]; exit }' "$1"
}
checked() { # FILE: every keep once, or a failure noted
  if ! grep -q 'all keeps ran exactly once' "$1"; then
    echo "FAILED: $(basename "$1"): no 'all keeps ran exactly once'" >> "$sum"
    status=1
  fi
}
order() { if [ $(($1 % 2)) -eq 1 ]; then echo "after before"; else echo "before after"; fi; }
dir_of() { if [ "$1" = after ]; then echo "$bin"; else echo "$before"; fi; }

# private_row KEY THREADS ROUND VARIANT: one private row (ledger only) into
# raw/rows.txt as "KEY VARIANT ROUND Mop/s p99.9".
private_row() {
  local f=$raw/$1_$4_$3.txt
  timeout -k 2 20 "$(dir_of "$4")/ledger_bench" --workload private --no-reader \
    --impl ledger --threads "$2" --seconds "$secs" > "$f" 2>&1 || status=1
  checked "$f"
  echo "$1 $4 $3 $(row "$f" private)" >> "$raw/rows.txt"
}

# ---- sixteen threads, and sixteen processes ---------------------------------
for r in $(seq 1 "$rounds"); do
  in_budget "sixteen round $r" 8 || break
  for v in $(order "$r"); do private_row p16 "$wide" "$r" "$v"; done
  for c in $(seq 0 $((wide - 1))); do
    timeout -k 2 20 taskset -c $((c % ncpu)) "$bin/ledger_bench" --workload private \
      --no-reader --impl ledger --threads 1 --seconds "$secs" > "$raw/proc_$c.txt" 2>&1 &
  done
  wait
  tot=0
  for c in $(seq 0 $((wide - 1))); do
    m=$(row "$raw/proc_$c.txt" private | awk '{print $1}')
    tot=$(awk -v a="$tot" -v b="${m:-0}" 'BEGIN { printf "%.2f", a + b }')
  done
  echo "procs after $r $tot -" >> "$raw/rows.txt"
  rm -f "$raw"/proc_*.txt
done

# ---- one thread --------------------------------------------------------------
for r in $(seq 1 "$rounds"); do
  in_budget "one-thread round $r" 3 || break
  for v in $(order "$r"); do private_row p1 1 "$r" "$v"; done
done

# ---- serving at 1 and 16 threads, serving+reader at 4 ------------------------
for r in $(seq 1 "$srounds"); do
  in_budget "serving round $r" 12 || break
  for v in $(order "$r"); do
    f=$raw/sv_${v}_$r.txt
    timeout -k 2 30 "$(dir_of "$v")/ledger_bench" --workload serving --no-reader \
      --impl ledger --threads 1,"$wide" --seconds "$ssecs" --repeat 1 > "$f" 2>&1 || status=1
    checked "$f"
    echo "sv1 $v $r $(awk -F'|' '$1 ~ /^serving +1 $/ { split($2, a, " "); print a[1], a[5]; exit }' "$f")" >> "$raw/rows.txt"
    echo "sv16 $v $r $(awk -F'|' -v n="$wide" '$1 ~ "^serving +"n" $" { split($2, a, " "); print a[1], a[5]; exit }' "$f")" >> "$raw/rows.txt"
    f=$raw/svr_${v}_$r.txt
    timeout -k 2 30 "$(dir_of "$v")/ledger_bench" --workload serving \
      --impl ledger --threads 4 --seconds "$ssecs" --repeat 1 > "$f" 2>&1 || status=1
    checked "$f"
    echo "sv4 $v $r $(awk -F'|' '$1 ~ /^serving +4 $/ { split($2, a, " "); print a[1], a[5]; exit }' "$f")" >> "$raw/rows.txt"
    echo "sv4r $v $r $(awk -F'|' '$1 ~ /^serving\+reader +4 $/ { split($2, a, " "); print a[1], a[5]; exit }' "$f")" >> "$raw/rows.txt"
  done
done

# ---- evidence at 16 threads ---------------------------------------------------
for v in after before; do
  in_budget "evidence $v" 6 || break
  f=$raw/ev_$v.txt
  timeout -k 2 30 "$(dir_of "$v")/ledger_evidence_bench" --workload private \
    --threads "$wide" --seconds 0.3 > "$f" 2>&1 || status=1
done

# ---- the summary ---------------------------------------------------------------
{
  echo
  echo "Mop/s (ledger), median over rounds [each round, sorted]; p99.9 of one enqueue, median over rounds"
  printf '%-34s %-44s %-44s\n' "row" "BIN (after)" "BEFORE"
  while IFS='|' read -r key name; do
    cell() {
      # p99.9 as printed: ns, or with u (us) or m (ms); "-" for none.
      awk -v k="$key" -v v="$1" 'BEGIN { n = 0 } function ns(x) { if (x ~ /u$/) return x * 1000; if (x ~ /m$/) return x * 1000000; return x + 0 }
        $1 == k && $2 == v && $4 != "" { m[n] = $4 + 0; p[n] = ($5 == "-" || $5 == "") ? -1 : ns($5); n++ }
        END { if (n == 0) { print "-"; exit }
              for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) {
                if (m[j] < m[i]) { t = m[i]; m[i] = m[j]; m[j] = t }
                if (p[j] < p[i]) { t = p[i]; p[i] = p[j]; p[j] = t } }
              l = ""; for (i = 0; i < n; i++) l = l " " m[i]
              q = p[int((n - 1) / 2)]
              printf "%s [%s ] p99.9 %s", m[int((n - 1) / 2)], l, q < 0 ? "-" : q " ns" }' "$raw/rows.txt"
    }
    printf '%-34s %-44s %-44s\n' "$name" "$(cell after)" "$(cell before)"
  done <<EOF_ROWS
p16|private, $wide threads
procs|$wide single-thread processes (BIN)
p1|private, 1 thread
sv1|serving, 1 thread
sv16|serving, $wide threads
sv4|serving, 4 threads
sv4r|serving+reader, 4 threads
EOF_ROWS
  for v in after before; do
    echo
    echo "===== evidence, private, $wide threads: $v"
    grep -E "^private|segments:|hot reuse|reclaimer|syscalls|interrupts|page faults" \
      "$raw/ev_$v.txt" 2> /dev/null | cut -c1-400 || echo "(none)"
  done
  echo
  echo "hot9_h200.sh done: $((SECONDS - t0)) s, exit $status"
} >> "$sum"
cat "$sum"
exit $status
