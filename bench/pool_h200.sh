#!/usr/bin/env bash
# The pool's benchmarks on a GPU host, side by side in one run, for
# bench/RESULTS.md (issue 10): run from a gpu-bin/ folder made by
# tools/gpu_build.sh (it holds pool_bench, pool_torch.cpp and this script),
# and, for the before/after comparison, bench/pool_before_build.sh (which
# adds pool_bench.before, main's binary, and pool_bench.before.commit).
#   1. builds pool_torch.cpp against the installed PyTorch (libtorch C++);
#   2. pool_bench (this tree): the pool and cuMemAllocAsync (overhead: 4 KiB,
#      two streams per thread; serving: pinned staging + device block per
#      request); a "diag" line after each pool row says where time went;
#   3. pool_bench.before, if present: the same cells, rows marked @before;
#   4. this tree again: serving pool with --wait yield (the first version's
#      loop: rows pool/y), and pool_2s with a marker every 64 ops or 200 us
#      (rows pool_2s/m64t200);
#   5. pool_torch: PyTorch's caching allocators on the same two workloads;
#   then one table, rows grouped by workload and thread count.
# Usage: pool_h200.sh [GPU_BIN_DIR] [OUT_DIR] [MS_PER_CELL]
# At the default 600 ms per cell: 85 cells, ~60-75 s, plus the pool_torch
# build (~30-50 s): within 150 s on the 16-core H200 host.
set -uo pipefail
bin=${1:-$(cd "$(dirname "$0")" && pwd)}
out=${2:-$bin/pool-results-$(hostname -s)-$(date -u +%Y%m%d-%H%M%S)}
ms=${3:-600}
mkdir -p "$out"
{
  echo "date:   $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:   $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu:    /'
  echo "torch:  $(python3 -c 'import torch;print(torch.__version__, torch.version.cuda)' 2>&1)"
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/build:  /' "$bin/BUILD_INFO.txt"
  [ -f "$bin/pool_bench.before.commit" ] && echo "before: pool_bench.before built at $(cat "$bin/pool_bench.before.commit")"
} | tee "$out/SUMMARY.txt"
rc=0
start=$(date +%s)

# 1. PyTorch's side, built here (the build line of the issue).
TP=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
build() {
  g++ -O2 -std=c++17 "$@" -I"$TP/include" -I"$TP/include/torch/csrc/api/include" \
    -I/usr/local/cuda/include "$bin/pool_torch.cpp" -o "$out/pool_torch" \
    -L"$TP/lib" -Wl,--no-as-needed -lc10 -lc10_cuda -ltorch_cpu -ltorch_cuda \
    -Wl,--as-needed "$TP/../nvidia/cu13/lib/libcudart.so.13" -Wl,-rpath,"$TP/lib"
}
echo "=== building pool_torch" | tee -a "$out/SUMMARY.txt"
if ! build >"$out/build.log" 2>&1; then
  # Older or newer PyTorch without at::getHostAllocator stats: device only.
  echo "pinned-memory stats unavailable; building with -DNO_HOST_STATS" | tee -a "$out/SUMMARY.txt"
  build -DNO_HOST_STATS >>"$out/build.log" 2>&1 || { echo "FAILED to build pool_torch (see build.log)"; rc=1; }
fi

run() { # name, command...
  local name=$1
  shift
  echo "=== $name: $*" | tee -a "$out/SUMMARY.txt"
  # The status is read first: after `rc=1`, $? would be 0.
  "$@" >"$out/$name.log" 2>&1 || { local e=$?; rc=1; echo "FAILED: $name (exit $e)" | tee -a "$out/SUMMARY.txt"; }
  grep -v '^overhead\|^serving' "$out/$name.log" | tee -a "$out/SUMMARY.txt"
}
# 2-5, one after the other on the same GPU.
run pool_bench "$bin/pool_bench" --ms "$ms" --json "$out/pool_bench.json"
if [ -x "$bin/pool_bench.before" ]; then
  run pool_bench_before "$bin/pool_bench.before" --ms "$ms" --json "$out/pool_bench_before.json"
else
  echo "(no pool_bench.before: run bench/pool_before_build.sh before carrying gpu-bin/)" | tee -a "$out/SUMMARY.txt"
fi
run pool_bench_yield "$bin/pool_bench" --ms "$ms" --only pool --wait yield \
  --json "$out/pool_bench_yield.json"
run pool_bench_m64 "$bin/pool_bench" --ms "$ms" --only pool_2s --every-ops 64 \
  --every-us 200 --json "$out/pool_bench_m64.json"
[ -x "$out/pool_torch" ] && run pool_torch "$out/pool_torch" --ms "$ms"

{
  echo
  echo "bench    mode      thr | Mops|req/s |    cpu/op   req-thr |   p50 us   p99 us |  resv MiB  used MiB"
  echo "                       |            |     ns|us     ns|us |                   |      peak      peak"
  {
    cat "$out"/pool_bench.log "$out"/pool_bench_yield.log "$out"/pool_bench_m64.log \
      "$out"/pool_torch.log 2>/dev/null
    # main's rows, marked: pool_2s@before
    awk '/^(overhead|serving) / { m = $2 "@before"
      sub(/^[a-z]+ +[^ ]+ +/, sprintf("%-8s %-9s ", $1, m)); print }' \
      "$out"/pool_bench_before.log 2>/dev/null
  } | grep '^overhead\|^serving' | sort -s -k1,1r -k3,3n
} | tee "$out/TABLE.txt" | tee -a "$out/SUMMARY.txt"
echo "logs: $out (exit $rc, $(($(date +%s) - start)) s)" | tee -a "$out/SUMMARY.txt"
exit $rc
