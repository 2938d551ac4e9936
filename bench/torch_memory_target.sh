#!/bin/sh
# Issue 14's memory target on the host, as a regression test: on the
# serving benchmark's allocation sequences the pool's reserved peak
# (torch_trace_bench, the shim's hooks on the host executor) must be below
# what PyTorch's caching allocator's rules reserve on the same sequence
# (torch_alloc/caching_sim.py). Bytes, not time. The sequences:
# - derived from the model's shapes (torch_alloc/llama_trace.py, 1 and 4
#   threads, 3 requests: the peaks are reached in the first);
# - REAL ones (TRACE.gz arguments: torch_alloc/traces/, recorded with
#   SL_TORCH_TRACE by serve.py on the pool on the H200 at 5c641c3, 1 and 4
#   threads; there the pool measured 196.5 and 541 MiB, PyTorch's
#   allocator 194 and 572, and the replay and caching_sim.py give exactly
#   those numbers).
# Also printed, not checked: the pool's driver allocations counted in the
# 2 MiB pages a GPU's driver lays them out in (torch_trace.c, THE DRIVER'S
# PAGES; PyTorch's reserved bytes are already whole pages): there the
# pool is above PyTorch at one thread (209 against 194 MiB on the real
# trace), which the H200's device memory in use (serve.py) is to confirm.
# The pool at 7856fa6 reserved 211 MiB on the derived 1-thread sequence
# against PyTorch's 194; at 5c641c3 196.5 on the real one against 194.
#   torch_memory_target.sh BENCH LLAMA_TRACE_PY CACHING_SIM_PY [TRACE.gz...]
set -eu
bench=$1
gen=$2
sim=$3
shift 3
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail=0
# check NAME TRACE: the pool's reserved peak on TRACE below PyTorch's rules'.
check() {
  "$bench" "$2" --classes >"$tmp/pool_$1.txt"
  python3 "$sim" "$2" >"$tmp/torch_$1.txt"
  pool=$(awk '$1 == "reserved_peak" {print $2}' "$tmp/pool_$1.txt")
  torch=$(awk '$1 == "reserved_peak" {print $2}' "$tmp/torch_$1.txt")
  pages=$(awk '$1 == "pages_reserved_peak" {print $2}' "$tmp/pool_$1.txt")
  echo "$1: pool reserves $pool bytes at its peak, PyTorch's rules $torch" \
    "(the pool's driver allocations in 2 MiB pages: $pages, not checked)"
  if [ -z "$pool" ] || [ -z "$torch" ] || [ "$pool" -ge "$torch" ]; then
    echo "FAIL: $1: the pool reserves no less than PyTorch's allocator would" >&2
    cat "$tmp/pool_$1.txt" >&2
    fail=1
  fi
}
for t in 1 4; do
  python3 "$gen" --threads "$t" --requests 3 >"$tmp/derived_t$t.trace"
  check "derived_t$t" "$tmp/derived_t$t.trace"
done
for gz in "$@"; do
  name=$(basename "$gz" .trace.gz)
  if ! gzip -dc "$gz" >"$tmp/$name.trace"; then
    echo "FAIL: $gz: cannot read it" >&2
    fail=1
    continue
  fi
  check "$name" "$tmp/$name.trace"
done
[ $fail -eq 0 ] && echo "torch_memory_target: all passed"
exit $fail
