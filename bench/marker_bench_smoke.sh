#!/bin/sh
# Smoke test of marker_bench: every marker and engine policy, tiny, on the
# host executor; checks it exits 0, printed a row per configuration, saw no
# marker before its kernel's stamp and wrote its JSON. --driver=libcuda must
# run or skip cleanly, bad options are refused with 2, and the embedded PTX
# assembles for sm_90 where ptxas is installed. No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
json=$tmp/smoke.json
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"

if ! "$bench" --driver=host --smoke --json "$json" >"$out" 2>&1; then
  echo "FAIL: marker_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
for row in event/spin event/poll5 event/poll20 event/poll50 write/spin \
  write/poll5 write/poll20 write/poll50 hostfn/spin hostfn/wake \
  blocking/block; do
  if ! grep -q "^$row  *|" "$out"; then
    echo "FAIL: no row for $row" >&2
    fail=1
  fi
done
grep -q '^attribute CAN_USE_64_BIT_STREAM_MEM_OPS = 1' "$out" ||
  { echo "FAIL: the mem-ops attribute is not reported" >&2; fail=1; }
grep -q '^calibration: ' "$out" || { echo "FAIL: no calibration" >&2; fail=1; }
grep -q '^all markers observed in order, none early' "$out" ||
  { echo "FAIL: no final confirmation" >&2; fail=1; }
if ! grep -q '"marker": "blocking/block"' "$json" ||
  ! grep -q '"CAN_USE_64_BIT_STREAM_MEM_OPS": 1' "$json"; then
  echo "FAIL: JSON incomplete" >&2
  fail=1
fi

# --only: a subset of the rows.
if ! "$bench" --driver host --smoke --only write >"$tmp/only.txt" 2>&1 ||
  grep -q '^event/' "$tmp/only.txt" || ! grep -q '^write/spin ' "$tmp/only.txt"; then
  echo "FAIL: --only write ran the wrong rows" >&2
  cat "$tmp/only.txt" >&2
  fail=1
fi

lib=$tmp/libcuda.txt
if ! "$bench" --driver=libcuda --smoke >"$lib" 2>&1; then
  echo "FAIL: --driver=libcuda --smoke exited non-zero" >&2
  cat "$lib" >&2
  fail=1
elif ! grep -q '^SKIPPED: no CUDA driver\|^SKIPPED: no usable CUDA device\|^all markers observed' "$lib"; then
  echo "FAIL: --driver=libcuda neither skipped nor ran" >&2
  cat "$lib" >&2
  fail=1
fi
if "$bench" --driver=libcuda --libcuda /nonexistent/libcuda.so.1 \
  --require-gpu >"$lib" 2>&1; then
  echo "FAIL: --require-gpu without a driver exited 0" >&2
  fail=1
fi

for bad in "--driver=gpu" "--samples 0" "--rate x" "--bogus"; do
  smoke_refuses "$bad" "$bench"
done

ptxas=/usr/local/cuda/bin/ptxas
if [ -x "$ptxas" ]; then
  "$bench" --print-ptx >"$tmp/mb.ptx"
  if "$ptxas" -arch=sm_90 -o "$tmp/mb.cubin" "$tmp/mb.ptx"; then
    echo "ptxas -arch=sm_90: ok"
  else
    echo "FAIL: the embedded PTX does not assemble for sm_90" >&2
    fail=1
  fi
fi

[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
