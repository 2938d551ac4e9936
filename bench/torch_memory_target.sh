#!/bin/sh
# Issue 14's memory target on the host, as a regression test: on the
# serving benchmark's allocation sequences, what the pool takes from the
# driver at its peak, counted as the driver counts it (torch_trace_bench,
# the shim's hooks on the host executor: pages_reserved_peak, each device
# allocation above 1 MiB in whole 2 MiB pages; THE DRIVER'S PAGES in
# torch_trace.c) against what PyTorch's caching allocator's rules reserve
# on the same sequence (torch_alloc/caching_sim.py; its segments are whole
# pages already). Bytes, not time. The sequences:
# - derived from the model's shapes (torch_alloc/llama_trace.py, 1 and 4
#   threads, 3 requests: the peaks are reached in the first);
# - REAL ones (TRACE.gz arguments: torch_alloc/traces/, recorded with
#   SL_TORCH_TRACE by serve.py on the pool on the H200 at 5c641c3, 1 and 4
#   threads; there the pool measured 196.5 and 541 MiB, PyTorch's
#   allocator 194 and 572, and the replay and caching_sim.py give exactly
#   those numbers).
# Checked: the pool's pages at their peak no more than PyTorch's at one
# thread (the target: 184 and 180 against 194 MiB on the real and derived
# sequences since RECLAIM BEFORE GROW, pool.c) and below them at 4 threads
# (548 and 532 against 572); no cuMemAlloc or cuMemFree in the second
# half of any sequence (the steady state: growth may trim, a later
# request must not call the driver). Also checked:
# the pool's own reserved peak equals its pages (every device block up to
# 64 MiB comes from segments of whole 2 MiB pages, pool.c WHERE BLOCKS
# LIVE), so its reserved count is what the device spends.
# History (1 thread, real sequence, pages): 213 MiB at 5c641c3, 209 at
# fbee238 (its reserved count said 192.5: the 2.75 MiB weights each took
# 4 MiB of pages), 198 with large blocks in segments. PyTorch-style split
# and merge in the segments was measured and not kept: 198 unchanged as the
# shim records uses, 196 at best even if every freed block's work were
# complete at once (bench/RESULTS.md, "Issue 14, fifth session"), so the
# 1-thread check was a 2.5 % bound until the sixth session's reclaim
# before grow: 184 (bench/RESULTS.md, "Issue 14, sixth session").
#   torch_memory_target.sh BENCH LLAMA_TRACE_PY CACHING_SIM_PY [TRACE.gz...]
set -eu
bench=$1
gen=$2
sim=$3
shift 3
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail=0
# check NAME TRACE THREADS: the pool's pages at its peak on TRACE below
# PyTorch's rules' reserved peak (4 threads), or no more (1 thread), equal
# to its reserved, and no driver call in the sequence's second half.
check() {
  "$bench" "$2" --classes >"$tmp/pool_$1.txt"
  python3 "$sim" "$2" >"$tmp/torch_$1.txt"
  pool=$(awk '$1 == "reserved_peak" {print $2}' "$tmp/pool_$1.txt")
  torch=$(awk '$1 == "reserved_peak" {print $2}' "$tmp/torch_$1.txt")
  pages=$(awk '$1 == "pages_reserved_peak" {print $2}' "$tmp/pool_$1.txt")
  late=$(awk '$1 == "driver_calls_second_half" {print $2}' "$tmp/pool_$1.txt")
  echo "$1: the pool takes $pages bytes of 2 MiB pages at its peak" \
    "(reserved $pool), PyTorch's rules $torch"
  if [ -z "$pool" ] || [ -z "$torch" ] || [ -z "$pages" ] || [ -z "$late" ]; then
    echo "FAIL: $1: no numbers" >&2
    fail=1
  elif [ "$3" = 4 ] && [ "$pages" -ge "$torch" ]; then
    echo "FAIL: $1: the pool takes no less than PyTorch's allocator would" >&2
    fail=1
  elif [ "$3" = 1 ] && [ "$pages" -gt "$torch" ]; then
    echo "FAIL: $1: the pool takes more than PyTorch's allocator would" >&2
    fail=1
  elif [ "$late" -ne 0 ]; then
    echo "FAIL: $1: $late cuMemAlloc/cuMemFree calls in the steady state" >&2
    fail=1
  elif [ "$pages" -ne "$pool" ]; then
    echo "FAIL: $1: the pool's reserved count is not what the driver holds" >&2
    fail=1
  else
    return 0
  fi
  cat "$tmp/pool_$1.txt" >&2
}
for t in 1 4; do
  python3 "$gen" --threads "$t" --requests 3 >"$tmp/derived_t$t.trace"
  check "derived_t$t" "$tmp/derived_t$t.trace" "$t"
done
for gz in "$@"; do
  name=$(basename "$gz" .trace.gz)
  if ! gzip -dc "$gz" >"$tmp/$name.trace"; then
    echo "FAIL: $gz: cannot read it" >&2
    fail=1
    continue
  fi
  check "$name" "$tmp/$name.trace" "${name##*_t}"
done
[ $fail -eq 0 ] && echo "torch_memory_target: all passed"
exit $fail
