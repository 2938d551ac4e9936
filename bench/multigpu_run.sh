#!/usr/bin/env bash
# Issue 13 on a node with N GPUs, in one go (at most ~300 s): run from a
# gpu-bin/ folder made by tools/gpu_build.sh (it holds cuda_suite,
# pool_bench, pool_torch.cpp and this script).
#   1. builds pool_torch.cpp against the installed PyTorch (in the
#      background, while 2 runs);
#   2. the CUDA suite on the real driver, every GPU visible
#      (cuda_suite --driver=libcuda --require-gpu: the multi-device tests
#      chain waits through all N GPUs and copy data around all of them;
#      the other tests run last, in the time left);
#   3. the serving benchmark at 1, 2, ..., N GPUs (threads per GPU: TPG),
#      grouped (a thread per GPU) then spread (every thread over all the
#      GPUs of the cell): pool_bench --devices (the pool: its engine
#      threads, one per GPU, and each request thread releasing its own
#      streams while it waits for a slot; and cuMemAllocAsync) and
#      pool_torch --devices
#      (PyTorch's caching allocators), one after the other on the same GPUs;
#      then (ENGINE_ONE=1, the default with 2 GPUs or more) the pool cells
#      again with one engine thread for all GPUs (pool_bench
#      --engine-threads one: rows "pool-1t"), against the default of an
#      engine per GPU ("pool"), in the same run;
#   4. TABLE.txt (every row, side by side) and SCALING.txt: for each
#      allocator, placing and threads per GPU, requests/s at g GPUs against
#      g x the 1-GPU rate (issue 13's target: >= 90 % of linear at the most
#      GPUs), host CPU us per request, p99, and streamledger's CPU per
#      request (must not grow with g).
# Usage: multigpu_run.sh [GPU_BIN_DIR] [OUT_DIR]
# Environment: MS (ms per cell, 500), TPG (threads per GPU, "1,4"), COUNTS
# (GPU counts, "1 2 ... N"), SPREAD (1: also the spread cells), ENGINE_ONE
# (1: also the pool cells with one engine thread for all GPUs), BYTES
# (65536), INFLIGHT (32), SUITE_ONLY (cuda_suite --only=..., for a dry run:
# bench/multigpu_run_smoke.sh runs this script on the host executor).
# Exit status: 0 when every step passed; the results directory either way.
set -uo pipefail
t_start=$(date +%s)
bin=${1:-$(cd "$(dirname "$0")" && pwd)}
out=${2:-$bin/multigpu-results-$(hostname -s)-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${n:-0}" -ge 1 ] || { echo "multigpu_run: nvidia-smi lists no GPU" >&2; exit 2; }
MS=${MS:-500}
TPG=${TPG:-1,4}
SPREAD=${SPREAD:-1}
if [ "$n" -ge 2 ]; then ENGINE_ONE=${ENGINE_ONE:-1}; else ENGINE_ONE=${ENGINE_ONE:-0}; fi
BYTES=${BYTES:-65536}
INFLIGHT=${INFLIGHT:-32}
COUNTS=${COUNTS:-$(seq -s ' ' 1 "$n")}
counts_csv=$(echo "$COUNTS" | tr ' ' ',')
rc=0
say() { echo "$*" | tee -a "$out/SUMMARY.txt"; }
left() { echo $((300 - ($(date +%s) - t_start))); }
failed() { # name, exit status: says so unless 0
  [ "$2" -eq 0 ] && return
  rc=1
  if [ "$2" -eq 124 ]; then
    say "FAILED: $1 (time limit; what it printed is kept)"
  else
    say "FAILED: $1 (exit $2)"
  fi
}

{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu:     /'
  echo "driver:  $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)" \
    "($(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1))"
  echo "torch:   $(python3 -c 'import torch;print(torch.__version__, torch.version.cuda)' 2>&1 | tail -1)"
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/build:   /' "$bin/BUILD_INFO.txt"
  echo "run:     $n GPUs; counts $COUNTS; threads per GPU $TPG; $MS ms per cell;" \
    "$BYTES bytes, $INFLIGHT in flight per thread; spread cells: $SPREAD;" \
    "one engine thread cells: $ENGINE_ONE"
} | tee "$out/SUMMARY.txt"
nvidia-smi topo -m >"$out/topo.txt" 2>&1 # NVLink / PCIe paths between GPUs

# 1. PyTorch's side, built in the background (pool_h200.sh's build line).
TP=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>/dev/null)
cudart=$(ls "$TP"/../nvidia/cu*/lib/libcudart.so.* "$TP"/../nvidia/cuda_runtime/lib/libcudart.so.* \
  /usr/local/cuda/lib64/libcudart.so 2>/dev/null | head -1)
build_torch() {
  local extra
  for extra in "" "-DNO_HOST_STATS"; do
    # shellcheck disable=SC2086
    g++ -O2 -std=c++17 $extra -I"$TP/include" -I"$TP/include/torch/csrc/api/include" \
      -I/usr/local/cuda/include "$bin/pool_torch.cpp" -o "$out/pool_torch" \
      -L"$TP/lib" -Wl,--no-as-needed -lc10 -lc10_cuda -ltorch_cpu -ltorch_cuda \
      -Wl,--as-needed "$cudart" -Wl,-rpath,"$TP/lib" && return 0
  done
  return 1
}
if [ -n "$TP" ] && [ -n "$cudart" ]; then
  build_torch >"$out/build.log" 2>&1 &
  build_pid=$!
else
  echo "no PyTorch (or no libcudart): pool_torch not built" >"$out/build.log"
  build_pid=
fi

# 2. The suite on every GPU: the tests that use several devices now (one
# process per test: CUDA's start-up on N GPUs is most of the time), the
# rest (they ran on 1 GPU before) after the benchmarks, in what is left.
multi=info,device_sync,cross_device_wait,cross_device_copy,chain_all_devices
multi=$multi,chain_all_devices_engine,peer_access,peer_copy_ring
multi=$multi,peer_copy_bad_input,threads,failed_unref_keeps_other_devices
multi=$multi,destroy_after_keep_switches_context
suite() { # name, limit, cuda_suite options...
  local name=$1 limit=$2 st
  shift 2
  say "=== $name: cuda_suite --driver=libcuda --require-gpu $* ($n GPUs, limit $limit s)"
  timeout "$limit" "$bin/cuda_suite" --driver=libcuda --require-gpu "$@" \
    >"$out/$name.log" 2>&1
  st=$?
  failed "$name" "$st"
  grep -E '^(FAIL|SKIP) |^cuda_suite \(|can access:|^PASS (chain|peer)' "$out/$name.log" |
    tee -a "$out/SUMMARY.txt"
}
if [ -n "${SUITE_ONLY:-}" ]; then
  suite cuda_suite_multigpu 60 --only="$SUITE_ONLY"
else
  suite cuda_suite_multigpu 60 --only="$multi"
fi

# 3. Serving at each GPU count: grouped, then spread. Each run's limit is
# twice its cells' time (cells x (MS + 0.5 s)), within what is left of the
# 300 s; a run cut short keeps the rows it printed.
n_counts=$(echo "$COUNTS" | wc -w)
n_tpg=$(echo "$TPG" | tr ',' ' ' | wc -w)
cell_ms=$((MS + 500))
limit_for() { # cells -> seconds
  local want=$((2 * $1 * cell_ms / 1000 + 15)) have=$(($(left) - 5))
  echo $((want < have ? want : have))
}
bench() { # name, cells, command... (relabel: a sed script for its rows)
  local name=$1 limit
  limit=$(limit_for "$2")
  shift 2
  [ "$limit" -gt 5 ] || { rc=1; say "SKIPPED $name: out of time"; return; }
  say "=== $name (limit ${limit} s): $*"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  failed "$name" $?
  [ -n "${relabel:-}" ] && sed -i "$relabel" "$out/$name.log"
  grep '^multigpu [a-z]' "$out/$name.log" | grep -v '^multigpu mode'
}
placings=grouped
[ "$SPREAD" = 1 ] && placings="grouped spread"
for placing in $placings; do
  flag=()
  [ "$placing" = spread ] && flag=(--spread)
  bench "pool_bench_$placing" $((n_counts * n_tpg * 2)) "$bin/pool_bench" \
    --devices "$counts_csv" --threads "$TPG" --ms "$MS" --bytes "$BYTES" \
    --inflight "$INFLIGHT" "${flag[@]}" --json "$out/pool_bench_$placing.json"
  if [ -n "$build_pid" ]; then
    wait "$build_pid" || { rc=1; say "FAILED to build pool_torch (see build.log)"; }
    build_pid=
  fi
  if [ -x "$out/pool_torch" ]; then
    bench "pool_torch_$placing" $((n_counts * n_tpg + 4)) "$out/pool_torch" \
      --devices "$counts_csv" --threads "$TPG" --ms "$MS" --bytes "$BYTES" \
      --inflight "$INFLIGHT" "${flag[@]}"
  fi
  # The same pool cells with one engine thread for all GPUs (the engine
  # before issue 13's per-device engines): rows "pool-1t", same width.
  if [ "$ENGINE_ONE" = 1 ]; then
    relabel='s/^multigpu pool     /multigpu pool-1t  /' \
      bench "pool_bench_${placing}_1t" $((n_counts * n_tpg)) "$bin/pool_bench" \
      --devices "$counts_csv" --threads "$TPG" --ms "$MS" --bytes "$BYTES" \
      --inflight "$INFLIGHT" "${flag[@]}" --only pool --engine-threads one \
      --json "$out/pool_bench_${placing}_1t.json"
  fi
done

if [ -z "${SUITE_ONLY:-}" ]; then
  rest=$(($(left) - 10))
  [ "$rest" -gt 60 ] && rest=60
  if [ "$rest" -gt 5 ]; then
    suite cuda_suite_rest "$rest" --skip="$multi"
  else
    rc=1
    say "SKIPPED cuda_suite_rest: out of time"
  fi
fi

# 4. The tables.
hdr="multigpu mode      gpus thr placing |      req/s |   cpu/req   req-thr |      sl    sl |   p50 us   p99 us |  resv MiB  used MiB"
{
  echo "$hdr"
  echo "                                    |            |        us        us |  us/req     % |                   |      peak      peak"
  cat "$out"/pool_bench_*.log "$out"/pool_torch_*.log 2>/dev/null | grep '^multigpu [a-z]' |
    grep -v '^multigpu mode' | sort -s -k5,5 -k4,4n -k3,3n -k2,2
} >"$out/TABLE.txt"
# Per allocator, placing and threads per GPU: rate at g against g x rate at 1.
awk -F'|' '
  /^multigpu [a-z]/ && $1 !~ /multigpu mode/ {
    split($1, a, " "); mode = a[2]; g = a[3]; thr = a[4]; place = a[5];
    key = mode " " place " " thr / g;
    rate[key, g] = $2 + 0; split($3, c, " "); cpu[key, g] = c[1];
    split($4, s, " "); sl[key, g] = s[1]; split($5, p, " "); p99[key, g] = p[2];
    if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
    gs[key] = gs[key] " " g
  }
  END {
    for (i = 1; i <= nk; i++) {
      k = keys[i]; m = split(gs[k], list, " ")
      for (j = 1; j <= m; j++) {
        g = list[j]; base = rate[k, 1]
        eff = base > 0 ? 100 * rate[k, g] / (g * base) : 0
        printf "%-22s %4d | %10.0f %7.1f%% | %8s %8s %8s\n", k, g, rate[k, g],
          eff, cpu[k, g], sl[k, g], p99[k, g]
      }
    }
  }' "$out/TABLE.txt" | sort -s -k2,2r -k3,3n -k4,4n -k1,1r >"$out/SCALING.txt"
sed -i "1i $(printf '%-22s %4s | %10s %8s | %8s %8s %8s' 'mode placing thr/GPU' gpus \
  req/s linear% cpu/req sl/req 'p99 us')" "$out/SCALING.txt"
{
  echo
  cat "$out/TABLE.txt"
  echo
  echo "scaling (linear% = req/s at g GPUs / (g x req/s at 1 GPU); target >= 90 % at the most GPUs;"
  echo "sl/req = streamledger's CPU us per request, must not grow with g; '-' for torch):"
  cat "$out/SCALING.txt"
  echo "logs: $out ($(($(date +%s) - t_start)) s, exit $rc)"
} | tee -a "$out/SUMMARY.txt"
exit $rc
