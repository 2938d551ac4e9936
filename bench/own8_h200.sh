#!/usr/bin/env bash
# Issue 11, eighth session (own8: owned streams), on the GPU host (1 x H200,
# 16 vCPUs): BIN against BEFORE, side by side in one run (bench/RESULTS.md,
# "Issue 11, eighth session: owned streams (own8)").
#   ledger_bench, both designs in every row (the mutex design beside the
#   ledger in each run), through bench/issue11_h200.sh: private at 1, 2, 8
#   and 16 threads (each thread its own default stream: owned after, a
#   fetch_add or CAS per enqueue before), private_si at 1 (the opt-in
#   single-issuer path, the yardstick: BIN only, paired with private on
#   both), serving at 1, shared at 2 and 16 (one stream, several threads:
#   after, each run's stream pays one revocation, a membarrier; with the
#   ceiling loop). Rounds of 0.3 s rows, BIN and BEFORE interleaved with the
#   order alternating; a round that would end past 150 s is skipped (and
#   said so); then atomics_bench of BIN.
# About 130 s on 16 cores, at most 200 s (every step under timeout).
# From the repository root:
#   bench/own8_h200.sh gpu-bin .devcarry/gpu-bin-1656028 $OUT/own8
# Writes OUT/SUMMARY.txt (the table: medians per row, before and after, and
# the private_si pairing), OUT/ledger/ (every row and log; ~100 KB).
# --quick: one round of 0.1 s rows (a check of the script without the GPU
# host: bench/own8_h200.sh --quick BIN BEFORE OUT; times mean nothing).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
t0=$SECONDS
status=0

I11_ROWS="${OWN8_ROWS:-private:1,2,8,16 private_si:1 serving:1 shared:2,16}" \
I11_PAIRS="private_si=private" \
I11_SECS=0.3 I11_ROUNDS="${OWN8_ROUNDS:-6}" I11_BUDGET=150 I11_ITERS=5000000 \
I11_TITLE="issue 11, eighth session (own8): owned streams" \
  timeout -k 2 200 bash "$here/issue11_h200.sh" $quick "$bin" "$before" \
  "$out/ledger" || status=1
echo "=== ledger rows done ($((SECONDS - t0)) s)"

{
  echo "own8_h200.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $((SECONDS - t0)) s, exit $status"
  echo
  echo "===== ledger_bench (bench/issue11_h200.sh)"
  cat "$out/ledger/SUMMARY.txt" 2> /dev/null || echo "(no ledger summary)"
} > "$out/SUMMARY.txt"
exit $status
