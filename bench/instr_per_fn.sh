#!/bin/sh
# Instructions per operation, per function (self cost), noise-free
# (valgrind --tool=callgrind), one thread, one ledger_bench workload: each
# function's instructions in a run of 2N ops minus a run of N ops, over the
# extra 1.1 N ops (N timed + N/10 warm-up; serving counts 4 ops per request),
# so setup, warm-up and teardown cancel (the method of bench/instr_per_op.sh,
# split by function). Rows above 0.5 per op; the first line is the whole
# row's total. Issue 11, sixth session (bench/RESULTS.md).
#   bench/instr_per_fn.sh LEDGER_BENCH [WORKLOAD [N [IMPL]]]
# Build LEDGER_BENCH with --config=portable (as tools/gpu_build.sh does:
# liburcu linked statically, so its read side is counted under its name).
set -eu
bin=${1:?usage: instr_per_fn.sh LEDGER_BENCH [WORKLOAD [N [IMPL]]]}
w=${2:-private}
n=${3:-100000}
impl=${4:-ledger}
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for k in 1 2; do
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg$k" "$bin" \
    --workload "$w" --impl "$impl" --threads 1 --no-reader --no-ceiling \
    --ops $((k * n)) --repeat 1 > /dev/null 2>&1
  # "  1,234  file:function [object]" -> "1234<TAB>function"
  callgrind_annotate --threshold=100 "$tmp/cg$k" 2> /dev/null |
    awk '/^ *[0-9,]+ .*:/ {
           ir = $1; gsub(/,/, "", ir)
           f = $0; sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", f)
           sub(/ \[.*\]$/, "", f); sub(/^[^ ]*:/, "", f)
           print ir "\t" f }' > "$tmp/f$k"
  awk '/^summary:/ {print $2}' "$tmp/cg$k" > "$tmp/s$k"
done
awk -v a="$(cat "$tmp/s1")" -v b="$(cat "$tmp/s2")" -v n="$n" -v w="$w" -v i="$impl" \
  'BEGIN {printf "%8.1f  total (%s, %s, one thread, per op)\n", (b - a) / (1.1 * n), w, i}'
awk -F'\t' -v n="$n" '
  FNR == NR { a[$2] += $1; next }
  { b[$2] += $1 }
  END { for (f in b) { d = (b[f] - a[f]) / (1.1 * n)
                       if (d > 0.5 || d < -0.5) printf "%8.1f  %s\n", d, f } }' \
  "$tmp/f1" "$tmp/f2" | sort -rn
