#!/bin/sh
# Instructions per operation, noise-free (valgrind --tool=callgrind), one
# thread, for each workload and implementation of ledger_bench: the total of a
# run with 2N ops minus one with N ops, over the extra ops (so setup, warm-up
# of the first N/10 and teardown cancel). Includes the harness's own ~80
# instructions per op. Valgrind counts each `rep stos` iteration, so memsets
# weigh more here than in cycles on hardware.
#   bench/instr_per_op.sh [LEDGER_BENCH] [N] [WORKLOADS]
# LEDGER_BENCH defaults to bazel-bin/bench/ledger_bench (build it with -c opt);
# WORKLOADS to "private shared serving" (any of ledger_bench's, e.g.
# private_si).
set -eu
bin=${1:-bazel-bin/bench/ledger_bench}
n=${2:-200000}
workloads=${3:-private shared serving}
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# total instructions of one run
count() { # workload impl ops
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$bin" \
    --workload "$1" --impl "$2" --threads 1 --no-reader --no-ceiling --ops "$3" \
    --repeat 1 > /dev/null 2>&1
  awk '/^summary:/ {print $2}' "$tmp/cg.out"
}

printf '%-10s %12s %12s\n' workload "ledger I/op" "mutex I/op"
for w in $workloads; do
  row=$(printf '%-10s' "$w")
  for impl in ledger mutex; do
    a=$(count "$w" "$impl" "$n")
    b=$(count "$w" "$impl" $((2 * n)))
    # ops per run: N timed + N/10 warm-up; serving counts 4 ops per request
    row="$row $(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN {printf "%12.1f", (b - a) / (1.1 * n)}')"
  done
  echo "$row"
done

# Per call, private workload, ledger: instructions inside ldg_enqueue (the
# enqueue's own path, which the tail is made of) and ldg_release (the rest).
# Whether a pooled segment is there depends on when grace periods end, i.e.
# on time: these counts vary between runs by the share of fresh segments
# (counted below, by the function that zeroed them: ~2 000 instructions
# each at 1024 slots).
valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$bin" \
  --workload private --impl ledger --threads 1 --no-reader --no-ceiling \
  --ops $((2 * n)) --repeat 1 > /dev/null 2>&1
callgrind_annotate --inclusive=yes --tree=calling "$tmp/cg.out" 2>/dev/null |
  awk '/\* / { cur = $0; sub(/.*:/, "", cur); sub(/ .*/, "", cur) }
       /> .*:(ldg_enqueue|ldg_release|__memset[a-z0-9_]*) \(/ {
         f = $0; sub(/.*:/, "", f); sub(/ .*/, "", f)
         ir = $1; gsub(/,/, "", ir)
         c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c); gsub(/,/, "", c)
         if (f ~ /^__memset/) { if (cur ~ /^ldg__/) alloc[cur] += c; next }
         irs[f] += ir; calls[f] += c }
       END { for (f in irs) printf "private, ledger: %-12s %8.1f instructions per call (%d calls)\n", f, irs[f] / calls[f], calls[f]
             for (k in alloc) printf "private, ledger: segments zeroed (memset) in %s: %d\n", k, alloc[k] }' | sort
