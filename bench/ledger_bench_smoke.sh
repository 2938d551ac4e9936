#!/bin/sh
# Smoke test of ledger_bench: runs every workload tiny (--smoke) and checks
# that it exits 0, printed the table header and a row per workload, confirmed
# every keep ran exactly once and wrote its JSON; then the ceiling's named
# comparison forms, the slices mode, the
# serving+paired rows (--reader-windows), the null reader (--reader-null),
# and that bad values are refused.
# No timing is asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
json=$tmp/smoke.json
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"

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
# The ceiling's comparison forms, each only when named: a row per thread
# count with its own name (a wrong table entry would print another's).
for f in ceiling_cas ceiling_backoff ceiling_load ceiling_pfw ceiling_rmw ceiling_release; do
  fo=$tmp/$f.txt
  if ! "$bench" --workload "$f" --threads 1,2 --ops 2000 >"$fo" 2>&1; then
    echo "FAIL: ledger_bench --workload $f exited non-zero" >&2
    cat "$fo" >&2
    fail=1
  fi
  if [ "$(grep -c "^$f  *[12] |" "$fo")" -ne 2 ] || grep -q '^ceiling  ' "$fo"; then
    echo "FAIL: --workload $f: not its two rows alone" >&2
    cat "$fo" >&2
    fail=1
  fi
done
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
for bad in "--slice-ms 0" "--ops 1000" "--smoke" "--seconds 0"; do
  # shellcheck disable=SC2086 # each is two words or one on purpose
  if "$bench" --workload slices $bad >/dev/null 2>&1; then
    echo "FAIL: --workload slices $bad accepted" >&2
    fail=1
  fi
done
# The reader in windows (--reader-windows): the serving+paired rows, once
# unpaced at 1 and 2 threads and once paced at 2, each with at least one
# pair per design, their JSON fields, and every keep ran exactly once.
# Timing is not asserted. 0.2 s rows (40 windows): with 0.05 s, under
# tools/test.sh's load, the paced ledger run once closed no pair at all.
for pace in "" "--reader-rate 20000"; do
  pr=$tmp/paired.txt
  thr=1,2
  [ -n "$pace" ] && thr=2
  # shellcheck disable=SC2086 # pace: words
  if ! "$bench" --workload serving --threads $thr --seconds 0.2 --reader-windows 5 \
      $pace --json "$tmp/paired.json" >"$pr" 2>&1; then
    echo "FAIL: ledger_bench --reader-windows 5 $pace exited non-zero" >&2
    cat "$pr" >&2
    fail=1
  fi
  cat "$pr"
  for p in '^reader, serving+paired rows: windows of 5 ms' '^serving+reader  *2 ' \
      '^serving+paired  *2 .*paired cost, median \[IQR\] pairs: ldg -*[0-9.]*% \[-*[0-9.]*, -*[0-9.]*\] [1-9][0-9]* mtx -*[0-9.]*% \[-*[0-9.]*, -*[0-9.]*\] [1-9][0-9]*; on-window Mq/s ldg [0-9.]* mtx [0-9.]*; unpaired ldg -*[0-9.]*% mtx -*[0-9.]*%$' \
      '^all keeps ran exactly once'; do
    grep -q -- "$p" "$pr" || { echo "FAIL: paired output ($pace) lacks $p" >&2; fail=1; }
  done
  if [ -z "$pace" ] && ! grep -q '^serving+paired  *1 .*pairs: ldg -*[0-9.]*% \[.*\] [1-9][0-9]* mtx -*[0-9.]*% \[.*\] [1-9][0-9]*;' "$pr"; then
    echo "FAIL: paired output lacks the 1-thread row with its pairs" >&2
    fail=1
  fi
  if ! grep -q '"workload": "serving+paired", "impl": "mutex", "threads": 2.*"pairs": [1-9][0-9]*, "paired_cost_median": .*"on_window_qps": [1-9][0-9.]*, "unpaired_cost": .*"pair_costs": \[-*[0-9]' \
      "$tmp/paired.json"; then
    echo "FAIL: paired JSON ($pace) lacks a serving+paired row with its pairs" >&2
    fail=1
  fi
done
# The control (--reader-null): the reader's loop without its queries, so the
# ledger sees no read (0 segments, slots and lines per query), in windows too.
nl=$tmp/null.txt
if ! "$bench" --workload serving --threads 1 --seconds 0.2 --reader-windows 5 \
    --reader-rate 20000 --reader-null >"$nl" 2>&1; then
  echo "FAIL: ledger_bench --reader-null exited non-zero" >&2
  cat "$nl" >&2
  fail=1
fi
cat "$nl"
for p in '^reader: null (--reader-null)' \
    '^serving+reader  *1 .*ldg per query: 0.00 segs 0.00 slots 0.00 lines' \
    '^serving+paired  *1 .*pairs: ldg -*[0-9.]*% \[.*\] [1-9][0-9]* mtx' \
    '^all keeps ran exactly once'; do
  grep -q -- "$p" "$nl" || { echo "FAIL: --reader-null output lacks $p" >&2; fail=1; }
done
# Bad windows are refused (exit 2) with a message naming the option.
for bad in "--reader-windows 0" "--reader-windows -5" "--reader-windows abc" \
    "--reader-windows 5ms" "--reader-windows" "--reader-windows 20000" \
    "--reader-windows 5 --smoke" "--reader-windows 5 --ops 100" \
    "--reader-windows 5 --no-reader" "--reader-windows 5 --workload private" \
    "--reader-windows 30 --seconds 0.05"; do
  smoke_refuses "$bad" "$bench" --threads 1 --seconds 0.05
done
if ! "$bench" --reader-windows 0 2>&1 | grep -q 'bad value for --reader-windows: 0'; then
  echo "FAIL: --reader-windows 0 refused without naming it" >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
