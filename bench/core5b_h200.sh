#!/usr/bin/env bash
# Issue 11, fifth session (core5b: the reservation), on the GPU host (1 x
# H200, 16 vCPUs): the ledger of BIN against BEFORE, side by side in one run
# (bench/RESULTS.md, "Issue 11, fifth session: the reservation").
#   - ledger_bench, both designs in every row, through bench/issue11_h200.sh:
#     private 1-16 threads, private_si 1-16 (BIN only: the opt-in
#     LDG_STREAM_SINGLE_ISSUER streams), shared 1-16 with the ceiling loop,
#     serving and serving_si at 1 thread; so every workload has its
#     one-thread row. Three rounds, BIN and BEFORE interleaved (order
#     alternating), 0.2 s rows; a round that would end past 100 s is
#     skipped (and said so in SUMMARY.txt).
#   - ledger_evidence_bench of BIN, shared at 2, 8 and 16 threads: failed
#     reserving CASes on tail per op, and how many of the p99.9 enqueues
#     retried (the cause the issue names for the shared rows and their tail).
#   - atomics_bench of BIN (ns of one locked operation on this host).
# About 95 s on 16 cores (at most 118 + 20 s: every step under timeout);
# the folder stays small (~100 KB).
# From the repository root:
#   bench/core5b_h200.sh gpu-bin .devcarry/gpu-bin-cea4c18 $OUT/core5b
# Writes OUT/SUMMARY.txt (medians, per-round ratios, opt-in against
# default, evidence), OUT/rows.tsv, the ledger_bench logs, host.txt.
# --quick: one round of 0.1 s rows (a check of the script; times mean
# nothing). CORE5B_THREADS overrides the thread list 1,2,4,8,16.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
thr=${CORE5B_THREADS:-1,2,4,8,16}
t0=$SECONDS

I11_ROWS="private:$thr private_si:$thr shared:$thr serving:1 serving_si:1" \
I11_PAIRS="private_si=private serving_si=serving" \
I11_SECS=0.2 I11_ROUNDS=3 I11_BUDGET=100 I11_ITERS=5000000 \
I11_TITLE="issue 11, fifth session (core5b)" \
  timeout -k 5 118 bash "$here/issue11_h200.sh" $quick "$bin" "$before" "$out"
status=$?

secs=0.3
[ -n "$quick" ] && secs=0.1
ev="$out/evidence-shared.log"
if [ -x "$bin/ledger_evidence_bench" ]; then
  echo "=== ledger_evidence_bench shared ($((SECONDS - t0)) s)"
  timeout -k 5 20 "$bin/ledger_evidence_bench" --workload shared --threads 2,8,16 \
    --no-ceiling --seconds $secs --repeat 1 > "$ev" 2>&1 || status=1
  {
    echo
    echo "evidence (BIN's ledger_evidence_bench, shared stream): failed reserving CASes on"
    echo "tail per op, and among the sampled enqueues (>= p99.9 n, median ns | >= p99 | all):"
    grep -E 'evidence shared|reserving CAS|sampled ops|^      |>=p99.9' "$ev"
  } >> "$out/SUMMARY.txt"
fi
echo "wall: $((SECONDS - t0)) s; status $status" >> "$out/SUMMARY.txt"
tail -12 "$out/SUMMARY.txt"
exit $status
