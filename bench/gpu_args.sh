# shellcheck shell=bash disable=SC2034
# (the variables are the caller's: quick, bin, before, out)
# Sourced by the GPU-host scripts whose command line is [--quick] BIN BEFORE
# OUT (issue11_h200.sh, core5b_h200.sh, core5c_h200.sh, core6a_h200.sh,
# core6s_h200.sh, serve7_h200.sh, pub8_h200.sh).
#
# gpu_args "$@": sets quick (--quick or empty), bin and before (the two
# binary folders, absolute) and out (created, absolute); a wrong command
# line prints the usage and exits 2, a folder that cannot be entered or
# made exits 2.
gpu_args() {
  quick=
  if [ "${1:-}" = "--quick" ]; then
    quick=--quick
    shift
  fi
  if [ $# -ne 3 ]; then
    echo "usage: $0 [--quick] BIN BEFORE OUT" >&2
    exit 2
  fi
  bin=$(cd "$1" && pwd) || exit 2
  before=$(cd "$2" && pwd) || exit 2
  out=$3
  mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
}

# gpu_header TITLE: the lines every SUMMARY.txt starts with (the title,
# date, host, GPUs, and the two folders' BUILD_INFO.txt), on stdout.
gpu_header() {
  echo "$1"
  echo "date:   $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:   $(hostname), $(nproc) CPUs, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
  nvidia-smi -L 2>/dev/null | sed 's/^/gpu:    /'
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/after:  /' "$bin/BUILD_INFO.txt"
  [ -f "$before/BUILD_INFO.txt" ] && sed 's/^/before: /' "$before/BUILD_INFO.txt"
  return 0
}
