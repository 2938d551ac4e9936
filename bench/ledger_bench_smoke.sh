#!/bin/sh
# Smoke test of ledger_bench: runs every workload tiny (--smoke) and checks
# that it exits 0, printed the table header and a row per workload, confirmed
# every keep ran exactly once and wrote its JSON. No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
json=$tmp/smoke.json

if ! "$bench" --smoke --json "$json" >"$out" 2>&1; then
  echo "FAIL: ledger_bench --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"

fail=0
check() { # pattern, what
  if ! grep -q -- "$1" "$out"; then
    echo "FAIL: output lacks $2" >&2
    fail=1
  fi
}
check '^workload .*ldg Mop/s.*mtx Mop/s.*ldg/mtx' "the table header"
for w in private ceiling shared serving serving+reader backlog; do
  check "^$w " "a $w row"
done
check '^shared .*of ceiling: ldg [0-9]*% mtx [0-9]*%' "the shared rows' fraction of the ceiling"
check '^holds_vector / holds_host_range miss' "the holds-miss table"
check '^  ledger .* 2048 ' "a ledger holds-miss row"
check '^all keeps ran exactly once' "the exactly-once confirmation"
if ! grep -q '"rows"' "$json" || ! grep -q '"workload": "backlog"' "$json"; then
  echo "FAIL: JSON incomplete" >&2
  fail=1
fi
# The slices mode (one thread, both designs and two probes in turn).
sl=$tmp/slices.txt
if ! "$bench" --workload slices --seconds 0.05 --slice-ms 0.2 \
    --slices-out "$tmp/slices_each.txt" >"$sl" 2>&1; then
  echo "FAIL: ledger_bench --workload slices exited non-zero" >&2
  cat "$sl" >&2
  fail=1
fi
cat "$sl"
for p in '^slices: [1-9][0-9]* of about' '^  ledger ' '^  mutex ' '^  alu ' '^  ilp ' \
    '^  chase ' '^  mtx/ldg ' '^  quiet: ' '^all keeps ran exactly once'; do
  grep -q -- "$p" "$sl" || { echo "FAIL: slices output lacks $p" >&2; fail=1; }
done
if [ "$(grep -vc '^#' "$tmp/slices_each.txt")" -lt 1 ]; then
  echo "FAIL: --slices-out wrote no slice" >&2
  fail=1
fi
if "$bench" --workload slices --slice-ms 0 >/dev/null 2>&1; then
  echo "FAIL: --slice-ms 0 accepted" >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
