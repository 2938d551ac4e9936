#!/bin/sh
# Smoke test of wake_bench: both parts, tiny, on the host executor; checks
# it exits 0 and prints a row for every wait and every per-call cost;
# --driver=libcuda runs part 1 alone where no driver is; bad options exit 2.
# No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"
if ! "$bench" --driver=host --smoke >"$out" 2>&1; then
  echo "FAIL: wake_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
for w in nanosleep abs futex futex_abs timerfd epoll spin2+sleep spin sleep+q+r; do
  n=$(grep -c "^$w  *[0-9]" "$out" || true)
  [ "$n" -ge 10 ] || { echo "FAIL: $n rows for $w" >&2; fail=1; }
done
for c in cuCtxGetCurrent "cuEventQuery done" "cuEventRecord idle" \
  "slc_launch empty" "cuStreamQuery idle" "slc_engine_poll, 9 keeps"; do
  grep -q "^  $c  *-*[0-9]* / " "$out" || { echo "FAIL: no row for $c" >&2; fail=1; }
done
if ! "$bench" --driver=libcuda --smoke >"$tmp/lib.txt" 2>&1 ||
  ! grep -q '^nanosleep ' "$tmp/lib.txt"; then
  echo "FAIL: --driver=libcuda did not run part 1" >&2
  cat "$tmp/lib.txt" >&2
  fail=1
fi
for bad in "--driver=gpu" "--iters-ms 0" "--keeps x" "--bogus"; do
  smoke_refuses "$bad" "$bench"
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
