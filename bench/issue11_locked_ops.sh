#!/bin/sh
# Locked read-modify-writes and full fences per operation, per function,
# exact (callgrind --dump-instr=yes joined with objdump: see
# issue11_locked_ops.py), one thread, ledger_bench's private, shared and
# serving workloads, ledger and mutex design. Noise-free evidence for issue
# 11 (bench/RESULTS.md, "Issue 11, round 3"). Count what the binary itself
# executes: build it with --config=portable (liburcu linked statically) so
# that liburcu's read side and call_rcu are counted too.
#   bench/issue11_locked_ops.sh [LEDGER_BENCH] [N] [WORKLOADS]
set -eu
bin=${1:-bazel-bin/bench/ledger_bench}
n=${2:-100000}
workloads=${3:-private shared serving}
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for w in $workloads; do
  for impl in ledger mutex; do
    valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$tmp/cg.out" \
      "$bin" --workload "$w" --impl "$impl" --threads 1 --no-reader --no-ceiling \
      --ops "$n" --repeat 1 > /dev/null 2>&1
    # N timed ops + N/10 warm-up (serving: 4 ops per request, counted in N)
    echo "== $w, $impl: locked instructions per op (N = $n; rows >= 0.001)"
    python3 "$here/issue11_locked_ops.py" "$tmp/cg.out" "$bin" \
      "$(awk -v n="$n" 'BEGIN {print 1.1 * n}')" |
      awk '$1 >= 0.001 || $2 == "total"'
  done
done
