#!/bin/sh
# Smoke test of torch_trace_bench (issue 14): replays a small trace of the
# serving model (torch_trace_smoke.trace: torch_alloc/llama_trace.py
# --threads 2 --requests 1 --batch 1 --seq 16) and checks that it exits 0,
# that its requested peak is the trace's own (recomputed here with awk),
# that the breakdown at the reserved peak adds up to the reserved bytes,
# that the page view (2 MiB pages) equals them (2.75 MiB blocks included),
# and that bad arguments and bad traces exit 2 with a message. No timing.
set -eu
bench=$1
trace=$2
sim=${3:-}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/replay.txt

if ! "$bench" "$trace" --classes >"$out" 2>&1; then
  echo "FAIL: torch_trace_bench exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"
val() { awk -v k="$1" '$1 == k {print $2}' "$out"; }
fail=0
want=$(awk '$1 == "a" {live += $4; if (live > peak) peak = live}
            $1 == "f" {live -= $4} END {print peak}' "$trace")
if [ "$(val requested_peak)" != "$want" ]; then
  echo "FAIL: requested_peak $(val requested_peak), the trace says $want" >&2
  fail=1
fi
sum=$(($(val at_peak.requested) + $(val at_peak.rounding) + $(val at_peak.held) + $(val at_peak.cached)))
if [ "$sum" != "$(val at_peak.reserved)" ] || [ "$(val at_peak.reserved)" != "$(val reserved_peak)" ]; then
  echo "FAIL: the breakdown ($sum) is not the reserved peak ($(val reserved_peak))" >&2
  fail=1
fi
if [ "$(val reserved_peak)" -lt "$want" ] || ! grep -q '^events .* 2 threads, 1 streams' "$out" ||
   ! grep -q '^ *33554432 ' "$out"; then
  echo "FAIL: reserved below requested, or the threads/streams/classes missing" >&2
  fail=1
fi
# The page view: every driver allocation above 1 MiB rounded up to 2 MiB.
# The pool's device allocations are whole pages (segments: pool.c, WHERE
# BLOCKS LIVE), the trace's 2.75 MiB weights included: the same bytes.
if [ -z "$(val pages_reserved_peak)" ] ||
   [ "$(val pages_reserved_peak)" != "$(val reserved_peak)" ]; then
  echo "FAIL: pages_reserved_peak missing or not the reserved peak" >&2
  fail=1
fi
# With pending work (--lag-us): the same sequence, nothing fails, the
# requested peak unchanged.
if ! "$bench" "$trace" --lag-us 50 >"$tmp/lag.txt" 2>&1 ||
   [ "$(awk '$1 == "requested_peak" {print $2}' "$tmp/lag.txt")" != "$want" ] ||
   ! grep -q 'lag 50 us' "$tmp/lag.txt"; then
  echo "FAIL: the replay with --lag-us 50" >&2
  cat "$tmp/lag.txt" >&2
  fail=1
fi
bad() { # what, expected message, args...
  what=$1 msg=$2
  shift 2
  if "$bench" "$@" >"$tmp/bad.txt" 2>&1; then rc=0; else rc=$?; fi
  if [ "$rc" != 2 ] || ! grep -q -- "$msg" "$tmp/bad.txt"; then
    echo "FAIL: $what: exit $rc, wanted 2 and '$msg'" >&2
    cat "$tmp/bad.txt" >&2
    fail=1
  fi
}
bad "no trace" "usage" 
bad "unknown option" "usage" "$trace" --nope
bad "missing file" "cannot read" "$tmp/none.trace"
bad "lag not a number" "usage" "$trace" --lag-us x
bad "lag too large" "usage" "$trace" --lag-us 100001
bad "lag missing" "usage" "$trace" --lag-us
printf 'a 1 0 4096 0x1000\nx 1 0 4096 0x1000\n' >"$tmp/bad.trace"
bad "bad line" "bad.trace:2: not a trace line" "$tmp/bad.trace"
printf 'a 1 0 0 0x1000\n' >"$tmp/zero.trace"
bad "zero size" "not a trace line" "$tmp/zero.trace"
printf 'a 1 0 4096 0x1000\na 1 0 4096 0x1000\n' >"$tmp/twice.trace"
if "$bench" "$tmp/twice.trace" >"$tmp/twice.txt" 2>&1 || ! grep -q 'allocates 0x1000 again' "$tmp/twice.txt"; then
  echo "FAIL: an alloc of a live pointer was not refused" >&2
  fail=1
fi
printf '# nothing\n' >"$tmp/empty.trace"
bad "no events" "no events" "$tmp/empty.trace"
# PyTorch's rules on the same trace: the same requested peak, whole
# segments (2 MiB small, 20 MiB or 2 MiB-rounded large) reserved.
if [ -n "$sim" ]; then
  python3 "$sim" "$trace" >"$tmp/sim.txt"
  cat "$tmp/sim.txt"
  sval() { awk -v k="$1" '$1 == k {print $2}' "$tmp/sim.txt"; }
  if [ "$(sval requested_peak)" != "$want" ] || [ $(($(sval reserved_peak) % 2097152)) != 0 ] ||
     [ "$(sval reserved_peak)" -lt "$(sval allocated_peak)" ]; then
    echo "FAIL: caching_sim.py: requested $(sval requested_peak) (want $want), reserved $(sval reserved_peak)" >&2
    fail=1
  fi
  if ! python3 "$sim" "$trace" --large-segments exact >"$tmp/sim2.txt" ||
     [ "$(awk '$1 == "requested_peak" {print $2}' "$tmp/sim2.txt")" != "$want" ] ||
     python3 "$sim" "$trace" --large-segments 1 >/dev/null 2>&1; then
    echo "FAIL: caching_sim.py --large-segments" >&2
    fail=1
  fi
  printf 'a 1 0 4096 0x1000\nq\n' >"$tmp/bad2.trace"
  if python3 "$sim" "$tmp/bad2.trace" >/dev/null 2>"$tmp/bad2.txt" || ! grep -q 'bad2.trace:2: not a trace line' "$tmp/bad2.txt"; then
    echo "FAIL: caching_sim.py accepted a bad line" >&2
    fail=1
  fi
fi
[ $fail -eq 0 ] && echo "torch_trace_smoke: all passed"
exit $fail
