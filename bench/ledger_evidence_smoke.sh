#!/bin/sh
# Smoke test of ledger_evidence_bench: a tiny run of the private and shared
# workloads with the ledger's hooks; checks that it exits 0, that the hooks
# were installed, and that each row printed its evidence block with the
# extensions told apart (fresh / pooled) and the tail attribution table. No
# timing and no count is asserted beyond "present".
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/evidence.txt
fail=0
for w in private shared; do
  if ! "$bench" --smoke --workload "$w" >"$out" 2>&1; then
    echo "FAIL: ledger_evidence_bench --smoke --workload $w exited non-zero" >&2
    cat "$out" >&2
    exit 1
  fi
  cat "$out"
  check() { # pattern, what
    if ! grep -q -- "$1" "$out"; then
      echo "FAIL ($w): output lacks $2" >&2
      fail=1
    fi
  }
  check '^evidence: hooks installed' "the hook installation line"
  check "^  evidence $w/ledger/2: " "the 2-thread evidence block"
  check '^    segments: [0-9]* extensions .* fresh .* from the pool, [0-9]* spares (prepared, or kept hot)' "the extension counts"
  check '^    hot reuse: [0-9]* segments kept by their owner' "the hot reuse count"
  check '^    syscalls by liburcu' "the syscall counts"
  check '^    threads (schedstat over the timed phase): 2 workers on CPU' "the workers' CPU time"
  check "^    workers' ns per op: on CPU [0-9]" "the workers' own ns per op"
  check '^    other threads (liburcu' "the other threads' CPU time"
  check '^    RCU: [0-9]* call_rcu' "call_rcu and grace periods"
  check '^    worker CPUs (/proc/stat' "the worker CPUs' steal and irq time"
  check 'what the sampled ops were doing' "the tail attribution"
  check '^all keeps ran exactly once' "the exactly-once confirmation"
done
[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
