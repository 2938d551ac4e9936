#!/usr/bin/env bash
# Instructions per query of the ledger's queries, counted with callgrind
# (issue 11, fifth session; RESULTS.md "Issue 11, fifth session"), for one
# or more builds of bench/query_cost side by side. Noise-free: each figure
# is (Ir of a run with Q2 queries - Ir of one with Q1) / (Q2 - Q1), both
# runs identical up to Q1 (the driver is deterministic), so setup and the
# first queries cancel. D1mr: first-level data-cache read misses per query
# in callgrind's cache simulation (32 KiB L1): the lines a query touches
# beyond what stays in L1. The holds misses are counted from the 17th on:
# each walk builds the next level of the summaries' jumps (summary.c).
#   bench/core5a_callgrind.sh NAME=QUERY_COST_BINARY...
# e.g. bench/core5a_callgrind.sh before=/tmp/b/query_cost after=bazel-bin/bench/query_cost
set -euo pipefail
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
[ $# -ge 1 ] || { echo "usage: $0 NAME=QUERY_COST..." >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ir_d1 BIN ARGS...: "Ir D1mr" of query_loop's calls in one run.
ir_d1() {
  local bin=$1
  shift
  valgrind --tool=callgrind --cache-sim=yes --toggle-collect=query_loop \
    --callgrind-out-file="$tmp/cg.out" "$bin" "$@" > "$tmp/out.txt" 2>/dev/null
  awk '/^events:/ {for (i = 2; i <= NF; i++) col[$i] = i - 1}
       /^summary:/ {print $(1 + col["Ir"]), $(1 + col["D1mr"])}' "$tmp/cg.out"
}

# per_query NAME BIN Q1 Q2 PER MODE ARGS_BEFORE_Q: one table row.
per_query() {
  local name=$1 bin=$2 q1=$3 q2=$4 per=$5
  shift 5
  read -r a ad < <(ir_d1 "$bin" "$@" "$q1")
  read -r b bd < <(ir_d1 "$bin" "$@" "$q2")
  local reads
  reads=$(sed -n 's/^  per query: //p' "$tmp/out.txt" | paste -sd ';' -)
  awk -v n="$name" -v w="$*" -v a="$a" -v b="$b" -v ad="$ad" -v bd="$bd" \
      -v q=$(( (q2 - q1) * per )) -v r="${reads:--}" \
    'BEGIN {printf "%-8s %-24s %12.0f %10.1f   %s\n", n, w, (b - a) / q, (bd - ad) / q, r}'
}

printf '%-8s %-24s %12s %10s   %s\n' build case "Ir/query" "D1mr/query" "reads per query (where counted)"
for spec in "$@"; do
  name=${spec%%=*}
  bin=${spec#*=}
  for n in 1024 16384 131072; do
    for k in vector range; do
      per_query "$name" "$bin" 16 20 1 holds $n $k
    done
  done
  for t in 1 4 16; do
    per_query "$name" "$bin" 200 400 2 reader $t 1
  done
done
