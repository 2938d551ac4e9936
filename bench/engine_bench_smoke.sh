#!/bin/sh
# Smoke test of engine_bench: the three modes, tiny, on the host executor
# (and the fixed wait with the contention and remote scenarios);
# checks it exits 0, prints a row per mode, every keep ran and the JSON is
# written; --driver=libcuda must skip cleanly here; bad options exit 2.
# No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"
if ! "$bench" --driver=host --smoke --json "$tmp/e.json" >"$out" 2>&1; then
  echo "FAIL: engine_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
for m in sync engine poll; do
  grep -q "^$m  *|" "$out" || { echo "FAIL: no row for $m" >&2; fail=1; }
  grep -q "\"mode\": \"$m\"" "$tmp/e.json" || { echo "FAIL: JSON lacks $m" >&2; fail=1; }
done
grep -q '^every keep ran, none before its kernel ended' "$out" || { echo "FAIL: no final line" >&2; fail=1; }
# The fixed wait, the contention and remote scenarios and --modes (engine
# only).
if ! "$bench" --driver=host --smoke --contention --remote --wait fixed --modes engine \
  >"$tmp/fixed.txt" 2>&1; then
  echo "FAIL: --contention --wait fixed --modes engine exited non-zero" >&2
  cat "$tmp/fixed.txt" >&2
  fail=1
fi
for row in alone query5 recquery5 load5 futex wake0 sleep5 spin squery5; do
  grep -q "^  $row " "$tmp/fixed.txt" || { echo "FAIL: no contention row $row" >&2; fail=1; }
done
grep -q "^engine  *|" "$tmp/fixed.txt" || { echo "FAIL: no engine row (fixed)" >&2; fail=1; }
grep -q "^remote: issue p50 [0-9]* ns" "$tmp/fixed.txt" || { echo "FAIL: no remote line" >&2; fail=1; }
# The rate scenario's per-thread CPU names the engine thread.
grep -qE "^threads \(engine, .* slc-engine(-[0-9]+)? [0-9]*;" "$tmp/fixed.txt" ||
  { echo "FAIL: no slc-engine thread in the per-thread CPU line" >&2; fail=1; }
if grep -q "^sync  *|" "$tmp/fixed.txt"; then echo "FAIL: --modes engine ran sync" >&2; fail=1; fi
if ! "$bench" --driver=libcuda --smoke >"$tmp/lib.txt" 2>&1 ||
  ! grep -q '^SKIPPED\|^every keep ran' "$tmp/lib.txt"; then
  echo "FAIL: --driver=libcuda neither skipped nor ran" >&2
  cat "$tmp/lib.txt" >&2
  fail=1
fi
for bad in "--driver=gpu" "--samples 0" "--poll-us x" "--bogus" "--wait sometimes"; do
  smoke_refuses "$bad" "$bench"
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
