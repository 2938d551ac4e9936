#!/usr/bin/env bash
# Issue 11, seventh session (serve7: the serving mix at one thread against
# the mutex design), on the GPU host (1 x H200, 16 vCPUs): BIN against
# BEFORE side by side in one run (bench/RESULTS.md, "Issue 11, seventh
# session: serving at one thread (serve7)").
#   ledger_bench through bench/issue11_h200.sh, one thread, --impl both
#   (the ledger and the mutex design in every invocation), 0.5 s rows:
#   serving, serving_si (the opt-in single-issuer streams) and private;
#   five rounds, BIN and BEFORE interleaved (order alternating by round); a
#   round that would end past 66 s is skipped (and said so); atomics_bench.
# About 60 s on 16 cores (every step under timeout: at most 78 s); the
# folder stays small (~40 KB).
# From the repository root:
#   bench/serve7_h200.sh gpu-bin .devcarry/gpu-bin-17aea1f $OUT/serve7
# Writes OUT/SUMMARY.txt: per row the median ns/op of the ledger and of the
# mutex design, ldg/mtx (the speed-up: mutex ns / ledger ns) per round and
# median, and after/before; OUT/rows.tsv, the ledger_bench logs, host.txt.
# --quick: one round of 0.1 s rows (a check of the script; times mean
# nothing). SERVE7_ROUNDS overrides the 5 rounds.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
t0=$SECONDS

I11_ROWS="serving:1 serving_si:1 private:1" I11_SECS=0.5 \
I11_ROUNDS=${SERVE7_ROUNDS:-5} I11_BUDGET=66 I11_ITERS=5000000 \
I11_TITLE="issue 11, seventh session (serve7): serving at one thread" \
  timeout -k 2 78 bash "$here/issue11_h200.sh" $quick "$bin" "$before" "$out"
status=$?
echo "serve7_h200.sh: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $((SECONDS - t0)) s, exit $status" \
  >> "$out/SUMMARY.txt"
exit $status
