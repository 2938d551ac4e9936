# shellcheck shell=bash disable=SC2034,SC2154
# (the variables are the caller's: out, budget, bin, before in; rc, sum, start out)
# Shared by the before/after scripts run on the GPU host (pool_ab_h200.sh,
# serving_ab_h200.sh); sourced, after the caller set `out`, `budget` (s),
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
