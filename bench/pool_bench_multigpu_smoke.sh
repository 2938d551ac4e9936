#!/bin/sh
# Smoke test of pool_bench's several-GPU serving cells (--devices, issue 13)
# on 8 simulated devices (the host executor): grouped and spread placing
# at 1, 2 and 8 GPUs, a row per cell with the CPU split, every result
# checked, the JSON rows carry the GPU count; the pool cells again with one
# engine thread for all GPUs (--engine-threads one); bad --devices and
# --engine-threads options are refused. No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"
for placing in grouped spread; do
  flag=
  [ "$placing" = spread ] && flag=--spread
  out=$tmp/$placing.txt
  # shellcheck disable=SC2086
  if ! "$bench" --driver=host --smoke --devices 1,2,8 $flag \
    --json "$tmp/$placing.json" >"$out" 2>&1; then
    echo "FAIL: pool_bench --devices 1,2,8 $flag exited non-zero" >&2
    cat "$out" >&2
    exit 1
  fi
  cat "$out"
  for t in 1 2; do # --smoke: 1 and 2 threads per GPU
    for g in 1 2 8; do
      for m in pool async; do
        grep -q "^multigpu $m *$g *$((t * g)) $placing *|" "$out" ||
          { echo "FAIL: no row $m $g GPUs $((t * g)) threads $placing" >&2; fail=1; }
      done
    done
  done
  [ "$(grep -c '"gpus": ' "$tmp/$placing.json")" -eq 12 ] ||
    { echo "FAIL: JSON lacks the GPU counts ($placing)" >&2; fail=1; }
  grep -q '^every result checked' "$out" || { echo "FAIL: no final line" >&2; fail=1; }
  if grep -q '^overhead\|^serving ' "$out"; then
    echo "FAIL: --devices ran single-GPU cells" >&2
    fail=1
  fi
done
out=$tmp/one.txt
if ! "$bench" --driver=host --smoke --devices 1,8 --engine-threads one \
  --only pool >"$out" 2>&1; then
  echo "FAIL: pool_bench --engine-threads one exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
grep -q 'one engine thread for all GPUs' "$out" ||
  { echo "FAIL: --engine-threads one not said" >&2; fail=1; }
for g in 1 8; do
  grep -q "^multigpu pool *$g *$g grouped *|" "$out" ||
    { echo "FAIL: no row pool $g GPUs, one engine thread" >&2; fail=1; }
done
if grep -q '^multigpu async' "$out"; then
  echo "FAIL: --only pool ran async cells" >&2
  fail=1
fi
for bad in "--devices 0" "--devices x" "--spread" "--devices 2,17" \
  "--devices 8 --threads 32" "--devices 2 --engine-threads two"; do
  smoke_refuses "$bad" "$bench" --driver=host
done
set +e
"$bench" --driver=host --smoke --devices 9 >"$tmp/nine.txt" 2>&1
rc=$?
set -e
if [ "$rc" -ne 1 ] || ! grep -q 'GPUs are visible' "$tmp/nine.txt"; then
  echo "FAIL: --devices 9 on 8 devices: exit $rc" >&2
  cat "$tmp/nine.txt" >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
