# shellcheck shell=bash disable=SC2034,SC2154
# (the variables are the caller's: out, budget, bin, before in; rc, sum, start out)
# Shared by the before/after scripts run on the GPU host (pool_ab_h200.sh,
# serving_ab_h200.sh, pool5_h200.sh); sourced, after the caller set `out`, `budget` (s),
# `bin` and `before`.
#
# ab_init TITLE DETAIL: starts the clock ($start), rc=0 and $sum
# ($out/SUMMARY.txt) with TITLE, the host, the GPUs and both binaries'
# BUILD_INFO, then DETAIL; prints it.
ab_init() {
  mkdir -p "$out"
  start=$(date +%s)
  rc=0
  sum=$out/SUMMARY.txt
  {
    echo "$1: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host:   $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
    nvidia-smi -L 2>/dev/null | sed 's/^/gpu:    /'
    for d in "$bin" "$before"; do
      [ -f "$d/BUILD_INFO.txt" ] && head -3 "$d/BUILD_INFO.txt" | sed "s|^|$d: |"
    done
    echo "$2"
  } > "$sum"
  cat "$sum"
}

# Seconds left of the budget.
left() { echo $((budget - ($(date +%s) - start))); }

# step NAME LIMIT_S COMMAND...: runs it under timeout if LIMIT_S still fits
# (else says SKIPPED), its output in $out/NAME.log; a failure sets rc=1.
step() {
  local name=$1 lim=$2
  shift 2
  if [ "$(left)" -lt "$lim" ]; then
    echo "SKIPPED $name: ${lim} s would pass the ${budget} s budget ($(left) s left)" | tee -a "$sum"
    return 0
  fi
  echo "=== $name: $*" >> "$sum"
  timeout -k 5 "$lim" "$@" > "$out/$name.log" 2>&1
  local e=$?
  if [ $e -ne 0 ]; then
    rc=1
    echo "FAILED: $name (exit $e)" | tee -a "$sum"
  fi
  return 0
}

# ab_torch_build BIN: builds pool_torch.cpp (BIN's copy, else bench/'s)
# against the installed PyTorch into $out/pool_torch, with the build
# line (log: $out/torch_build.log), each try under timeout 90 s; again with
# -DNO_HOST_STATS if that failed (a PyTorch without the host allocator's
# stats) and the budget allows; says in $sum why there are no torch rows
# otherwise. Returns 0 when $out/pool_torch was built.
ab_torch_build() {
  src=$1/pool_torch.cpp
  [ -f "$src" ] || src=bench/pool_torch.cpp
  if ! python3 -c 'import torch' > /dev/null 2>&1 || [ ! -f "$src" ]; then
    echo "no PyTorch here: no torch rows" | tee -a "$sum"
    return 1
  fi
  TP=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
  # shellcheck disable=SC2317 # run through bash -c, exported
  tbuild() {
    g++ -O2 -std=c++17 "$@" -I"$TP/include" -I"$TP/include/torch/csrc/api/include" \
      -I/usr/local/cuda/include "$src" -o "$out/pool_torch" \
      -L"$TP/lib" -Wl,--no-as-needed -lc10 -lc10_cuda -ltorch_cpu -ltorch_cuda \
      -Wl,--as-needed "$TP/../nvidia/cu13/lib/libcudart.so.13" -Wl,-rpath,"$TP/lib"
  }
  if [ "$(left)" -lt 100 ]; then
    echo "SKIPPED the pool_torch build: $(left) s left" | tee -a "$sum"
    return 1
  fi
  echo "=== building pool_torch" >> "$sum"
  export -f tbuild
  export TP src out
  timeout 90 bash -c tbuild > "$out/torch_build.log" 2>&1
  local trc=$?
  # Not after a timeout (124): a second 90 s would not fit.
  if [ $trc -ne 0 ] && [ $trc -ne 124 ] && [ "$(left)" -ge 100 ]; then
    timeout 90 bash -c 'tbuild -DNO_HOST_STATS' >> "$out/torch_build.log" 2>&1
    trc=$?
  fi
  [ $trc -eq 0 ] || echo "pool_torch did not build (exit $trc, torch_build.log): no torch rows" | tee -a "$sum"
  [ $trc -eq 0 ] && [ -x "$out/pool_torch" ]
}

# ab_cell FILE BENCH MODE T: the rate of FILE's row "BENCH MODE T | rate"
# (pool_bench's and pool_torch's rows: M ops/s for overhead, requests/s for
# serving); nothing if FILE or the row is missing.
ab_cell() {
  [ -f "$1" ] && awk -v b="$2" -v m="$3" -v t="$4" \
    '$1 == b && $2 == m && $3 == t && $4 == "|" { v = $5 } END { if (v != "") print v }' "$1"
}

# ab_pool_start: $bin/pool_bench and $before/pool_bench must exist (else
# FAILED in $sum and exit 1); then ab_torch_build "$bin", and torch=1 if
# pool_torch built (0 otherwise: no torch rows).
ab_pool_start() {
  for bdir in "$bin" "$before"; do
    [ -x "$bdir/pool_bench" ] || { echo "FAILED: no $bdir/pool_bench" | tee -a "$sum"; exit 1; }
  done
  torch=0
  ab_torch_build "$bin" && torch=1
  return 0
}

# ab_order R WORD...: the words one per line, reversed when R is even, so
# that alternate rounds run their cells in opposite orders (a drift of the
# host hits every column alike).
ab_order() {
  local r=$1 i
  shift
  local words=("$@")
  if [ $((r % 2)) -eq 0 ]; then
    for ((i = ${#words[@]} - 1; i >= 0; i--)); do echo "${words[i]}"; done
  else
    printf '%s\n' "${words[@]}"
  fi
}

# ab_reader9 VARIANT ROUND DIR: one bench/reader9_h200.sh call on DIR's
# ledger_bench (unpaced and paced, no null control) into OUT/VARIANT_rROUND,
# as a step; VARIANT before runs the ledger only (--impl ledger: its mutex
# design is BIN's code). Reads the caller's secs, threads, win, rate and
# here. reader9's two steps are each limited to n * 6 * (0.2 + S) * 1.4 + 8 s
# for n thread counts (bench/rdr10_h200.sh, bench/rdr11_h200.sh).
ab_reader9() {
  local v=$1 r=$2 dir=$3 lim n args=''
  n=$(echo "$threads" | tr ',' '\n' | grep -c .)
  lim=$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%d", 2 * (n * 6 * (0.2 + s) * 1.4 + 8) + 5 }')
  [ "$v" = before ] && args='--impl ledger'
  step "${v}_r$r" "$lim" env READER9_ROUNDS=1 READER9_SECONDS="$secs" READER9_THREADS="$threads" \
    READER9_WINDOW_MS="$win" READER9_RATE="$rate" READER9_NULL=0 READER9_ARGS="$args" \
    READER9_BUDGET_S="$lim" "$here/reader9_h200.sh" "$dir" "$out/${v}_r$r"
}
