#!/usr/bin/env bash
# Issue 11, eighth session (pub8: publishing without a CAS on single-issuer
# streams), on the GPU host (1 x H200, 16 vCPUs): BIN against BEFORE, side by
# side in one run (bench/RESULTS.md, "Issue 11, eighth session: publishing
# without a CAS on single-issuer streams (pub8)"), through
# bench/issue11_h200.sh: ledger_bench private_si and serving_si at one
# thread (the rows the change is for), private and serving at one thread
# (the default streams they are compared with) and shared at four (streams
# the change must not slow), each with the mutex design beside it (and the
# ceiling loop for shared), five rounds of 0.5 s rows, BIN and BEFORE
# interleaved with the order alternating; a round that would end past 120 s
# is skipped (and said so); then atomics_bench of BIN (the ns of one locked
# RMW on the host). PUB8_ROWS, PUB8_SECS, PUB8_ROUNDS, PUB8_BUDGET and
# PUB8_ITERS override the defaults (a check here: PUB8_SECS=0.05
# PUB8_ROUNDS=3, 21 s on the 2-core VM).
# About 80 s on 16 cores; at most 150 s (every step under timeout).
# From the repository root:
#   bench/pub8_h200.sh gpu-bin .devcarry/gpu-bin-1656028 $OUT/pub8
# Writes OUT/SUMMARY.txt and OUT/ledger/ (the rows and logs; ~60 KB).
# --quick: one round of 0.1 s rows (a check of the script, e.g. on a
# development machine; times mean nothing).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
t0=$SECONDS
status=0

I11_ROWS="${PUB8_ROWS:-private_si:1 serving_si:1 private:1 serving:1 shared:4}" \
I11_PAIRS="private_si=private serving_si=serving" \
I11_SECS="${PUB8_SECS:-0.5}" I11_ROUNDS="${PUB8_ROUNDS:-5}" \
I11_BUDGET="${PUB8_BUDGET:-120}" I11_ITERS="${PUB8_ITERS:-5000000}" \
I11_TITLE="issue 11, eighth session (pub8): single-issuer publication" \
  timeout -k 2 150 bash "$here/issue11_h200.sh" $quick "$bin" "$before" \
  "$out/ledger" || status=1
echo "=== ledger rows done ($((SECONDS - t0)) s)"

{
  echo "pub8_h200.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $((SECONDS - t0)) s, exit $status"
  echo "BIN: $bin ($(grep -m1 commit "$bin/BUILD_INFO.txt" 2> /dev/null))"
  echo "BEFORE: $before ($(grep -m1 commit "$before/BUILD_INFO.txt" 2> /dev/null))"
  echo
  echo "===== ledger_bench (bench/issue11_h200.sh)"
  cat "$out/ledger/SUMMARY.txt" 2> /dev/null || echo "(no ledger summary)"
} > "$out/SUMMARY.txt"
exit $status
