#!/usr/bin/env bash
# Issue 11, sixth session (core6a: the one-thread instruction budget), on the
# GPU host (1 x H200, 16 vCPUs): BIN against BEFORE, side by side in one run
# (bench/RESULTS.md, "Issue 11, sixth session: the one-thread instruction
# budget").
#   1. ledger_bench, both designs in every row, through bench/issue11_h200.sh:
#      the one-thread rows (private, private_si, shared with the ceiling
#      loop, serving, serving_si; the _si rows on BIN only), five rounds of
#      0.3 s rows, BIN and BEFORE interleaved with the order alternating; a
#      round that would end past 50 s is skipped (and said so); then
#      atomics_bench of BIN.
#   2. bench/cuda_h200.sh: cuEventRecord and a kernel launch, raw against
#      through cuda/, before, after and after --cache-current, up to four
#      interleaved rounds (none started after 60 s).
# About 90 s on 16 cores, at most 64 + 86 = 150 s (every step under timeout).
# From the repository root:
#   bench/core6a_h200.sh gpu-bin .devcarry/gpu-bin-5529590 $OUT/core6a
# Writes OUT/SUMMARY.txt (both summaries), OUT/ledger/ and OUT/cuda/ (their
# rows and logs; ~100 KB).
# --quick: one round of 0.1 s ledger rows, and CUDA_BENCH_ARGS as given (a
# check of the script without a GPU:
#   CUDA_BENCH_ARGS="--driver=host --calls 600 --warmup 100" \
#     bench/core6a_h200.sh --quick BIN BEFORE OUT; times mean nothing).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
t0=$SECONDS
status=0

I11_ROWS="private:1 private_si:1 shared:1 serving:1 serving_si:1" \
I11_PAIRS="private_si=private serving_si=serving" \
I11_SECS=0.3 I11_ROUNDS=5 I11_BUDGET=50 I11_ITERS=5000000 \
I11_TITLE="issue 11, sixth session (core6a): one thread" \
  timeout -k 2 62 bash "$here/issue11_h200.sh" $quick "$bin" "$before" \
  "$out/ledger" || status=1
echo "=== ledger rows done ($((SECONDS - t0)) s)"

timeout -k 2 84 bash "$here/cuda_h200.sh" "$bin" "$before" "$out/cuda" ||
  status=1
echo "=== cuda rows done ($((SECONDS - t0)) s)"

{
  echo "core6a_h200.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $((SECONDS - t0)) s, exit $status"
  echo
  echo "===== ledger_bench, one thread (bench/issue11_h200.sh)"
  cat "$out/ledger/SUMMARY.txt" 2> /dev/null || echo "(no ledger summary)"
  echo
  echo "===== cuda_bench (bench/cuda_h200.sh)"
  cat "$out/cuda/SUMMARY.txt" 2> /dev/null || echo "(no cuda summary)"
} > "$out/SUMMARY.txt"
exit $status
