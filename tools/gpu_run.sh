#!/usr/bin/env bash
# Runs the binaries of gpu-bin/ (made by tools/gpu_build.sh) on a GPU host and
# prints a summary: date, host, GPUs (nvidia-smi -L), driver version, and each
# binary's result. Needs nothing but the folder and the NVIDIA driver.
#   cuda_suite --driver=libcuda --require-gpu   real copies and kernels, one
#                                               process per test
#   cuda_suite --driver=libcuda --keep-reentry  keeps calling back into the
#                                               layer on every path (matrix)
#   cuda_suite --driver=host                    the same suite on the host
#                                               executor (sanity check)
#   ledger_bench                                if present (skip: --no-bench)
# Every output goes to a log folder gpu-results-<host>-<UTC time>/ beside the
# binaries (or under --out DIR); the summary is also written there as
# SUMMARY.txt, ready for cuda/GPU_RESULTS.md.
# Usage: gpu_run.sh [--no-bench] [--out DIR] [--bench-args "ARGS"]
#                   [-- extra cuda_suite flags, e.g. --only=a,b]
# Exit status: 0 when every binary passed.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ -x "$here/cuda_suite" ]; then
  bin=$here
elif [ -x "$here/../gpu-bin/cuda_suite" ]; then
  bin=$(cd "$here/../gpu-bin" && pwd)
else
  echo "gpu_run: no cuda_suite next to this script or in gpu-bin/; run tools/gpu_build.sh" >&2
  exit 2
fi

bench=1
out=""
bench_args=""
suite_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-bench) bench=0 ;;
    --out) out=$2; shift ;;
    --bench-args) bench_args=$2; shift ;;
    --) shift; suite_args=("$@"); break ;;
    *) echo "gpu_run: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
stamp=$(date -u '+%Y%m%d-%H%M%S')
[ -n "$out" ] || out="$bin/gpu-results-$(hostname -s)-$stamp"
mkdir -p "$out"

summary="$out/SUMMARY.txt"
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

say "=== gpu_run $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
say "os:      $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") / $(uname -r) / $(ldd --version 2>/dev/null | head -1)"
say "cpus:    $(nproc)"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi -L 2>&1 | sed 's/^/gpu:     /' | tee -a "$summary"
  say "driver:  $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)" \
      "(nvidia-smi: $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | head -1))"
  nvidia-smi > "$out/nvidia-smi.txt" 2>&1
else
  say "gpu:     nvidia-smi not found"
fi
[ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/build:   /' "$bin/BUILD_INFO.txt" | tee -a "$summary"

failed=0
results=()

# Runs one command with its output in $out/<name>.log; records a result line.
run() {
  local name=$1
  shift
  echo "=== $name: $*"
  local t0=$SECONDS
  "$@" > "$out/$name.log" 2>&1
  local rc=$?
  cat "$out/$name.log"
  local line
  line=$(grep -E '^cuda_suite .*passed|^SKIPPED|^FAILED' "$out/$name.log" | tail -1)
  if [ $rc -eq 0 ]; then
    results+=("$(printf '%-26s PASS (%ds) %s' "$name" $((SECONDS - t0)) "$line")")
  else
    results+=("$(printf '%-26s FAIL rc=%d (%ds) %s' "$name" $rc $((SECONDS - t0)) "$line")")
    failed=1
  fi
}

run cuda_suite_libcuda "$bin/cuda_suite" --driver=libcuda --require-gpu "${suite_args[@]}"
run cuda_suite_libcuda_reentry "$bin/cuda_suite" --driver=libcuda --require-gpu --keep-reentry "${suite_args[@]}"
run cuda_suite_host "$bin/cuda_suite" --driver=host "${suite_args[@]}"
if [ $bench -eq 1 ]; then
  for b in "$bin"/*bench*; do
    [ -x "$b" ] || continue
    n=$(basename "$b")
    case "$n" in *.sh) continue ;; esac # engine_bench_h200.sh: run by hand
    # shellcheck disable=SC2086
    run "$n" "$b" --json "$out/$n.json" $bench_args
  done
fi

say ""
say "=== summary ($(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname))"
for r in "${results[@]}"; do say "$r"; done
grep -E '^(FAIL|SKIP) ' "$out/cuda_suite_libcuda.log" 2>/dev/null | sed 's/^/  libcuda: /' | tee -a "$summary"
say "logs:    $out"
exit $failed
