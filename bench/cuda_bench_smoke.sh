#!/bin/sh
# Smoke test of cuda_bench: runs every operation tiny (--smoke) on the
# host executor (//cuda:host_executor) and checks that it exits 0, printed the table header
# and a row per operation and thread count, confirmed every keep ran exactly
# once and wrote its JSON. Then --driver=libcuda must either run or print
# SKIPPED and exit 0 (no GPU here), bad options must be refused, and the
# embedded PTX must assemble for sm_90 where ptxas is installed. No timing is
# asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
json=$tmp/smoke.json
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"

if ! "$bench" --driver=host --smoke --json "$json" >"$out" 2>&1; then
  echo "FAIL: cuda_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"

check() { # pattern, what
  if ! grep -q -- "$1" "$out"; then
    echo "FAIL: output lacks $2" >&2
    fail=1
  fi
}
check '^op .*raw ns.*layer ns.*+ns.*overhead.*raw issue.*lay issue.*target' \
  "the table header"
for op in record wait htod64 launch ledger_hold ledger_keep ctx; do
  check "^$op  *1 |" "a $op row for 1 thread"
done
check '^record .*<= 10%' "the record row's target"
check '^launch .*<= 1%' "the launch row's target"
check '^all keeps ran exactly once' "the exactly-once confirmation"
if ! grep -q '"rows"' "$json" || ! grep -q '"op": "ctx"' "$json" ||
  ! grep -q '"overhead_pct"' "$json"; then
  echo "FAIL: JSON incomplete" >&2
  fail=1
fi

# A subset of ops, explicit threads, --flag value form.
sub=$tmp/sub.txt
if ! "$bench" --driver host --ops launch,ledger_keep --threads 1 --calls 300 \
  --repeat 1 --warmup 10 --sync-every 7 --nonblocking >"$sub" 2>&1; then
  echo "FAIL: cuda_bench with --ops/--threads/--calls exited non-zero" >&2
  cat "$sub" >&2
  fail=1
elif grep -q '^record ' "$sub" || ! grep -q '^launch  *1 |' "$sub"; then
  echo "FAIL: --ops launch,ledger_keep ran the wrong rows" >&2
  cat "$sub" >&2
  fail=1
fi

# The real driver: there is none here, so it must skip cleanly; on a machine
# with one it runs the smoke table instead.
lib=$tmp/libcuda.txt
if ! "$bench" --driver=libcuda --smoke >"$lib" 2>&1; then
  echo "FAIL: cuda_bench --driver=libcuda --smoke exited non-zero" >&2
  cat "$lib" >&2
  fail=1
elif ! grep -q '^SKIPPED: no CUDA driver\|^SKIPPED: no usable CUDA device\|^all keeps ran exactly once' "$lib"; then
  echo "FAIL: --driver=libcuda neither skipped nor ran" >&2
  cat "$lib" >&2
  fail=1
else
  head -1 "$lib"
fi
# A missing library is a skip; with --require-gpu it is an error.
if ! "$bench" --driver=libcuda --libcuda /nonexistent/libcuda.so.1 >"$lib" 2>&1 ||
  ! grep -q '^SKIPPED: no CUDA driver' "$lib"; then
  echo "FAIL: a missing libcuda did not skip" >&2
  cat "$lib" >&2
  fail=1
fi
if "$bench" --driver=libcuda --libcuda /nonexistent/libcuda.so.1 \
  --require-gpu >"$lib" 2>&1; then
  echo "FAIL: --require-gpu without a driver exited 0" >&2
  fail=1
fi

# Bad options are refused with status 2.
for bad in "--driver=gpu" "--threads 0" "--calls 0" "--ops nothing" "--bogus"; do
  smoke_refuses "$bad" "$bench"
done

# The embedded PTX assembles for sm_90 (Hopper: H100/H200), if ptxas is here.
ptxas=/usr/local/cuda/bin/ptxas
if [ -x "$ptxas" ]; then
  "$bench" --print-ptx >"$tmp/empty.ptx"
  if "$ptxas" -arch=sm_90 -o "$tmp/empty.cubin" "$tmp/empty.ptx"; then
    echo "ptxas -arch=sm_90: ok"
  else
    echo "FAIL: the embedded PTX does not assemble for sm_90" >&2
    fail=1
  fi
else
  echo "(no $ptxas: PTX not assembled)"
fi

[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
