#!/bin/sh
# The coherence misses an unpaced reader costs the serving row's threads,
# counted without a multi-core machine (issue 11, eleventh session, rdr11):
# query_cost's reader mode under valgrind --tool=lackey --trace-mem=yes,
# every access replayed by bench/coherence_sim.py over one cache per agent
# (each "thread" of the serving row, and the reader). Deterministic.
#   bench/coherence_sim.sh [QUERY_COST] [THREADS] [REQUESTS_PER_PAIR] [PAIRS]
# QUERY_COST defaults to bazel-bin/bench/query_cost (-c opt).
set -eu
bin=${1:-bazel-bin/bench/query_cost}
t=${2:-2} r=${3:-1} q=${4:-2000}
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/trace"
python3 "$here/coherence_sim.py" "$tmp/agents.txt" "$bin" ${LINES:+--lines} < "$tmp/trace" > "$tmp/sim.txt" &
sim=$!
QUERY_COST_AGENTS=1 valgrind --tool=lackey --trace-mem=yes --log-file="$tmp/trace" \
  "$bin" "${MODE:-reader}" "$t" "$r" "$q" > "$tmp/agents.txt"
wait "$sim"
grep -v '^agents:' "$tmp/agents.txt"
cat "$tmp/sim.txt"
