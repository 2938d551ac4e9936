#!/usr/bin/env bash
# Issue 11, round 3 (the layer's own cost): cuEventRecord and a kernel launch,
# raw against through cuda/, before and after, side by side in one run on a
# GPU host, for bench/RESULTS.md ("Issue 11, round 3").
#   bench/cuda_h200.sh BIN BEFORE OUT
# BIN and BEFORE are gpu-bin folders (tools/gpu_build.sh) of this commit and
# of the commit compared with; each holds cuda_bench. Rounds, interleaved so
# that the host's drift hits every variant alike:
#   before   BEFORE/cuda_bench
#   after    BIN/cuda_bench (the default: cuCtxGetCurrent on every call)
#   cached   BIN/cuda_bench --cache-current (slc_context_cache_current on:
#            the opt-in that skips that query; sl_cuda.h says what the
#            caller then promises)
# each `--ops record,launch --threads 1,2 --repeat 5` (10 000 calls of each
# side per thread and pass, syncs every 256). SUMMARY.txt: every row of
# every run, then per variant the median over the rounds. About 2-4 s per
# run on the H200 host; rounds stop being started after 60 s, each run is
# bounded by `timeout 20`: at most ~80 s.
# CUDA_BENCH_ARGS (optional) is added to every run; a check of the script
# without a GPU: CUDA_BENCH_ARGS="--driver=host --calls 600 --warmup 100".
set -uo pipefail
bin=${1:?usage: cuda_h200.sh BIN BEFORE OUT}
before=${2:?usage: cuda_h200.sh BIN BEFORE OUT}
out=${3:?usage: cuda_h200.sh BIN BEFORE OUT}
mkdir -p "$out"
sum=$out/SUMMARY.txt
# shellcheck source=bench/gpu_args.sh
. "$(dirname "$0")/gpu_args.sh" # gpu_header
{
  gpu_header "cuda_h200.sh: raw vs through cuda/, cuEventRecord and launch, before/after"
  echo "args:   --ops record,launch --threads 1,2 --repeat 5 ${CUDA_BENCH_ARGS:-}"
} > "$sum"
rc=0
start=$SECONDS
rows=$out/rows.txt
: > "$rows"
run() { # variant round command...
  local v=$1 r=$2
  shift 2
  # shellcheck disable=SC2086 # CUDA_BENCH_ARGS: words on purpose
  timeout 20 "$@" --ops record,launch --threads 1,2 --repeat 5 \
    ${CUDA_BENCH_ARGS:-} --json "$out/${v}_$r.json" > "$out/${v}_$r.log" 2>&1 ||
    { rc=1; echo "$v round $r: exit $? (see ${v}_$r.log)" >> "$sum"; }
  # op thr | raw layer +ns overhead pairs | ...
  awk -v v="$v" -v r="$r" -F'|' '
    $1 ~ /^(record|launch) +[0-9]+ *$/ {
      split($1, a, " "); split($2, b, " ")
      sub(/%/, "", b[4])
      printf "%-7s %2d %-7s %3d %10s %10s %8s %8s %s\n", v, r, a[1], a[2], b[1], b[2], b[3], b[4], b[5]
    }' "$out/${v}_$r.log" >> "$rows"
}
[ -x "$before/cuda_bench" ] || echo "no $before/cuda_bench: before skipped" >> "$sum"
for r in 1 2 3 4; do
  if [ "$r" -gt 1 ] && [ $((SECONDS - start)) -ge 60 ]; then
    echo "round $r not started: $((SECONDS - start)) s used" >> "$sum"
    break
  fi
  [ -x "$before/cuda_bench" ] && run before "$r" "$before/cuda_bench"
  run after "$r" "$bin/cuda_bench"
  run cached "$r" "$bin/cuda_bench" --cache-current
done
{
  echo
  echo "every run (ns per call, syncs amortised; overhead = (layer - raw) / raw; pairs: pass by pass):"
  printf "%-7s %2s %-7s %3s %10s %10s %8s %8s %s\n" variant rnd op thr raw_ns layer_ns +ns "ovh_%" pairs
  cat "$rows"
  echo
  echo "median over the rounds (targets: record <= +10 %, launch <= +1 %, one thread):"
  printf "%-7s %-7s %3s %10s %10s %8s %8s %s\n" variant op thr raw_ns layer_ns +ns "ovh_%" rounds
  for v in before after cached; do
    for op in record launch; do
      for t in 1 2; do
        awk -v v="$v" -v op="$op" -v t="$t" '
          function med(x, n,   i, j, tmp) {
            for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j-1] > x[j]; j--) {
              tmp = x[j]; x[j] = x[j-1]; x[j-1] = tmp }
            return n % 2 ? x[(n+1)/2] : (x[n/2] + x[n/2+1]) / 2 }
          $1 == v && $3 == op && $4 == t { n++; raw[n] = $5; lay[n] = $6; add[n] = $7; ovh[n] = $8 }
          END { if (n) printf "%-7s %-7s %3d %10.1f %10.1f %8.1f %8.1f %d\n", v, op, t, med(raw, n), med(lay, n), med(add, n), med(ovh, n), n }' "$rows"
      done
    done
  done
  echo
  echo "elapsed $((SECONDS - start)) s; logs and JSON in $out (exit $rc)"
} >> "$sum"
cat "$sum"
exit $rc
