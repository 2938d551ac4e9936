#!/usr/bin/env bash
# Issue 11, sixth session (core6s: the shared stream's reservation by
# fetch_add inside a reserve, ledger/reserve.c RESERVING ON A SHARED STREAM), on
# the GPU host (1 x H200, 16 vCPUs): BIN against BEFORE side by side in one
# run (bench/RESULTS.md, "Issue 11, sixth session: the shared-stream
# reservation").
#   - ledger_bench through bench/issue11_h200.sh: the shared stream at 1, 2,
#     4, 8 and 16 threads, the mutex design and the ceiling loop (fetch_add +
#     64-byte slot write) in every invocation, and private at 1 thread (the
#     one-thread cost of the new fast path); five rounds of 0.3 s rows,
#     BIN and BEFORE interleaved (order alternating); a round that would end
#     past 85 s is skipped (and said so in SUMMARY.txt); atomics_bench.
#   - ledger_evidence_bench of BEFORE and of BIN, shared at 2, 8 and 16
#     threads: failed reserving CASes on tail per op, reservations by
#     fetch_add per op (BIN), and the causes of the p99.9 enqueues.
#   - the ceiling loop's reservation three ways (BIN's ledger_bench): its
#     fetch_add, the CAS loop, and the CAS loop with bounded exponential
#     backoff after a failure (the cheap comparison point: no protocol
#     change), 0.2 s rows at the same thread counts.
# About 100 s on 16 cores (every step under timeout: at most 86 + 2 x 8 +
# 3 x 5 = 117 s); the folder stays small (~60 KB).
# From the repository root:
#   bench/core6s_h200.sh gpu-bin .devcarry/gpu-bin-5529590 $OUT/core6s
# Writes OUT/SUMMARY.txt (medians with % of the ceiling, per-round rows,
# evidence), OUT/rows.tsv, the ledger_bench logs, host.txt.
# --quick: one round of 0.1 s rows (a check of the script; times mean
# nothing). CORE6S_THREADS overrides the thread list 1,2,4,8,16.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
thr=${CORE6S_THREADS:-1,2,4,8,16}
t0=$SECONDS

I11_ROWS="shared:$thr private:1" I11_SECS=0.3 I11_ROUNDS=5 I11_BUDGET=75 I11_ITERS=5000000 \
I11_TITLE="issue 11, sixth session (core6s): the shared stream" \
  timeout -k 3 86 bash "$here/issue11_h200.sh" $quick "$bin" "$before" "$out"
status=$?

# The p99.9 row's floor: the ceiling loop's own tail, beside the ledger's, from
# every log (rounds and sides).
{
  echo
  echo "p50 / p99 / p99.9 of one op, ns (u = us), the ceiling loop and the ledger's shared"
  echo "row, each ledger_bench run (side-round):"
  for f in "$out"/before-shared-*.log "$out"/after-shared-*.log; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .log)
    awk -v n="$n" '$1 == "ceiling" || $1 == "shared" {
      printf "  %-18s %-8s thr %2s: p50 %6s  p99 %6s  p99.9 %6s\n", n, $1, $2, $6, $7, $8 }' "$f"
  done
} >> "$out/SUMMARY.txt"

secs=0.3
[ -n "$quick" ] && secs=0.1
for side in before after; do
  d=$bin
  [ $side = before ] && d=$before
  ev="$out/evidence-shared-$side.log"
  [ -x "$d/ledger_evidence_bench" ] || continue
  echo "=== ledger_evidence_bench shared, $side ($((SECONDS - t0)) s)"
  timeout -k 1 8 "$d/ledger_evidence_bench" --workload shared --threads 2,8,16 \
    --no-ceiling --seconds $secs --repeat 1 > "$ev" 2>&1 || status=1
  {
    echo
    echo "evidence ($side: $d/ledger_evidence_bench, shared stream): failed reserving"
    echo "CASes on tail per op, reservations by fetch_add per op (after only), and among"
    echo "the sampled enqueues (>= p99.9 n, median ns | >= p99 | all):"
    grep -E 'evidence shared|reserving CAS|fetch_add|sampled ops|^      |>=p99.9' "$ev"
  } >> "$out/SUMMARY.txt"
done
# The cheap comparison point: the ceiling's reservation as a CAS loop,
# without and with bounded exponential backoff, beside its fetch_add (BIN's
# ledger_bench; no ledger in these rows).
cs=0.2
[ -n "$quick" ] && cs=0.05
cl="$out/ceiling-forms.log"
echo "=== ceiling forms ($((SECONDS - t0)) s)"
for w in ceiling ceiling_cas ceiling_backoff; do
  timeout -k 1 5 "$bin/ledger_bench" --workload $w --threads "$thr" --seconds $cs \
    --repeat 1 >> "$cl" 2>&1 || status=1
done
{
  echo
  echo "the ceiling's reservation three ways (BIN's ledger_bench, $cs s rows): Mop/s,"
  echo "ns/op, p50 / p99 / p99.9 ns (fetch_add; CAS loop; CAS loop with backoff):"
  grep -E '^ceiling' "$cl" | cut -d'|' -f1-2
} >> "$out/SUMMARY.txt"
echo "wall: $((SECONDS - t0)) s; status $status" >> "$out/SUMMARY.txt"
tail -40 "$out/SUMMARY.txt"
exit $status
