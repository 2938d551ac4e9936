#!/usr/bin/env bash
# Issue 11, seventh session (recl7: retired segments reclaimed in batches by
# the reclaimer thread, ledger/reclaim.c, so that they come back within about
# a millisecond instead of liburcu's 10 ms), on the GPU host (1 x H200, 16
# vCPUs): BIN against BEFORE side by side in one run (bench/RESULTS.md,
# "Issue 11, seventh session: hot segment reuse (recl7)").
#   - ledger_bench through bench/issue11_h200.sh: private streams at 1, 8
#     and 16 threads, and one shared stream at 2, 4, 8 and 16 threads with
#     the ceiling loop in the same invocation; both designs (the mutex one
#     beside the ledger); three rounds of 0.5 s rows, BIN and BEFORE
#     interleaved (order alternating); a round that would end past 58 s is
#     skipped (and said so in SUMMARY.txt).
#   - ledger_evidence_bench of BEFORE and of BIN at 16 threads, private and
#     shared: grace periods and membarriers per op, call_rcu retirements,
#     fresh against pooled extensions, page faults; BIN also prints its
#     reclaimer batches and the age of each reused segment.
# At most 66 + 4 x 6 = 90 s on 16 cores (every step under timeout); the
# folder stays small (~60 KB).
# From the repository root:
#   bench/recl7_h200.sh gpu-bin .devcarry/gpu-bin-17aea1f $OUT/recl7
# Writes OUT/SUMMARY.txt (medians: ns/op, % of linear for private 16, % of
# the ceiling for shared, p99.9, after/before; per-round rows; evidence),
# OUT/rows.tsv, the ledger_bench and evidence logs, host.txt.
# --quick: one round of 0.1 s rows (a check of the script; times mean
# nothing). RECL7_PRIVATE / RECL7_SHARED override the thread lists.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
pthr=${RECL7_PRIVATE:-1,8,16}
sthr=${RECL7_SHARED:-2,4,8,16}
t0=$SECONDS

I11_ROWS="private:$pthr shared:$sthr" I11_SECS=0.5 I11_ROUNDS=3 I11_BUDGET=58 \
I11_ITERS=2000000 \
I11_TITLE="issue 11, seventh session (recl7): hot segment reuse" \
  timeout -k 3 66 bash "$here/issue11_h200.sh" $quick "$bin" "$before" "$out"
status=$?

# Private at the largest thread count against 1 thread (% of linear: ns/op
# is wall x threads / ops, so linear scaling keeps it flat), per side and
# round, and the medians.
lo=${pthr%%,*}
hi=${pthr##*,}
{
  echo
  echo "private streams, % of linear at $hi threads (ns/op at $lo / ns/op at $hi), target >= 90 %:"
  # One line per round and side: "side round %", then the medians.
  ratios=$(awk -F'\t' -v lo="$lo" -v hi="$hi" '
    $3 == "private" && $4 == lo { A[$1, $2] = $5; R[$1, $2] = 1 }
    $3 == "private" && $4 == hi { B[$1, $2] = $5 }
    END { for (k in R) if ((k in B) && B[k] > 0) {
            split(k, p, SUBSEP); printf "%s %s %.1f\n", p[1], p[2], 100 * A[k] / B[k] } }' \
    "$out/rows.tsv" | sort -k2,2n -k1,1r)
  echo "$ratios" | awk 'NF == 3 { printf "  round %s %-6s %5.1f %%\n", $2, $1, $3 }'
  for side in before after; do
    m=$(echo "$ratios" | awk -v s=$side '$1 == s { print $3 }' | sort -n |
      awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
    echo "  median $side: ${m:--} %"
  done
} >> "$out/SUMMARY.txt"

secs=0.3
[ -n "$quick" ] && secs=0.1
for side in before after; do
  d=$bin
  [ $side = before ] && d=$before
  [ -x "$d/ledger_evidence_bench" ] || continue
  for w in private shared; do
    ev="$out/evidence-$w-$side.log"
    echo "=== ledger_evidence_bench $w 16, $side ($((SECONDS - t0)) s)"
    timeout -k 1 5 "$d/ledger_evidence_bench" --workload $w --threads 16 \
      --no-ceiling --seconds $secs --repeat 1 > "$ev" 2>&1 || status=1
    {
      echo
      echo "evidence ($side: $d/ledger_evidence_bench, $w, 16 threads): RCU, reclaimer"
      echo "(after only), segments, page faults, liburcu's syscalls, and the sampled"
      echo "enqueues (>= p99.9 n, median ns | >= p99 | all):"
      grep -E 'evidence |RCU:|reclaimer|reused, by age|segments:|page faults|syscalls by|sampled ops|>=p99.9' "$ev"
    } >> "$out/SUMMARY.txt"
  done
done
echo "wall: $((SECONDS - t0)) s; status $status" >> "$out/SUMMARY.txt"
tail -60 "$out/SUMMARY.txt"
exit $status
