#!/bin/sh
# Smoke test of pool_bench: every cell tiny on the host executor; checks it
# exits 0, prints a row per cell, checked every result and wrote its JSON;
# --driver=libcuda must skip (or run) cleanly; bad options exit 2. No timing
# is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"
if ! "$bench" --driver=host --smoke --json "$tmp/p.json" >"$out" 2>&1; then
  echo "FAIL: pool_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
for t in 1 2; do
  for m in pool_af async_af pool_2s async_2s; do
    grep -q "^overhead *$m *$t |" "$out" || { echo "FAIL: no row overhead $m $t" >&2; fail=1; }
  done
  for m in pool async; do
    grep -q "^serving *$m *$t |" "$out" || { echo "FAIL: no row serving $m $t" >&2; fail=1; }
  done
done
[ "$(grep -c '"bench"' "$tmp/p.json")" -eq 12 ] || { echo "FAIL: JSON lacks rows" >&2; fail=1; }
grep -q '^every result checked' "$out" || { echo "FAIL: no final line" >&2; fail=1; }
grep -q "^diag *pool_2s *1 | engine/op" "$out" || { echo "FAIL: no diag line" >&2; fail=1; }
# The serving diag's staging fill by who checked the block last: the three
# shares cover every request (rounded to 0.1 % each).
fill=$(grep "^diag *pool *1 |" "$out" | sed -n 's/.*fill us fresh [0-9.]* (\([0-9.]*\)%) own [0-9.]* (\([0-9.]*\)%) other [0-9.]* (\([0-9.]*\)%).*/\1 \2 \3/p')
if [ -z "$fill" ] || ! echo "$fill" | awk '{ s = $1 + $2 + $3; exit !(s > 99.8 && s < 100.2) }'; then
  echo "FAIL: serving diag: no fill shares summing to 100% ('$fill')" >&2; fail=1
fi
if ! "$bench" --driver=libcuda --smoke >"$tmp/lib.txt" 2>&1 ||
  ! grep -q '^SKIPPED\|^every result checked' "$tmp/lib.txt"; then
  echo "FAIL: --driver=libcuda neither skipped nor ran" >&2
  cat "$tmp/lib.txt" >&2
  fail=1
fi
# --own-poll N: the serving pool rows say so (/oN) and check every result.
if ! "$bench" --driver=host --smoke --only pool --own-poll 2 >"$tmp/o.txt" 2>&1 ||
  ! grep -q "^serving *pool/o2 *1 |" "$tmp/o.txt" ||
  ! grep -q '^every result checked' "$tmp/o.txt"; then
  echo "FAIL: --own-poll 2" >&2
  cat "$tmp/o.txt" >&2
  fail=1
fi
# --pin: says where the threads went and runs every cell it was asked for;
# --drain-every N (no engine thread): a fixed count of iterations.
if ! "$bench" --driver=host --smoke --pin --only pool_2s >"$tmp/pin.txt" 2>&1 ||
  ! grep -q '^pinned: request thread i on' "$tmp/pin.txt" ||
  ! grep -q "^overhead *pool_2s *2 |" "$tmp/pin.txt" ||
  ! grep -q '^every result checked' "$tmp/pin.txt"; then
  echo "FAIL: --pin" >&2
  cat "$tmp/pin.txt" >&2
  fail=1
fi
if ! "$bench" --driver=host --only pool_2s --threads 1 --iters 256 --drain-every 1 >"$tmp/d.txt" 2>&1 ||
  ! grep -q "^overhead *pool_2s *1 |" "$tmp/d.txt"; then
  echo "FAIL: --drain-every 1" >&2
  cat "$tmp/d.txt" >&2
  fail=1
fi
for bad in "--driver=gpu" "--ms 0" "--threads x" "--bytes 1000" "--bogus" "--wait spin" "--only pool_3s" "--own-poll x" "--drain-every 0" "--pin=1"; do
  smoke_refuses "$bad" "$bench"
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
