#!/bin/sh
# What one call of slc_event_record and of slc_launch costs through cuda/,
# split into the driver's, the ledger's and the layer's share, with every
# locked RMW and driver entry point per call named (bench/cuda_layer_cost.py;
# callgrind, one thread, the host driver: its own instructions say nothing
# about libcuda's, the layer's and the ledger's are the real ones).
#   bench/cuda_layer_cost.sh [CUDA_BENCH [cuda_bench options...]]
# CUDA_BENCH defaults to bazel-bin/bench/cuda_bench; build it with
#   bazel build --config=opt --copt=-g --strip=never //bench:cuda_bench
# Extra options go to cuda_bench (e.g. --cache-current).
set -eu
bin=${1:-bazel-bin/bench/cuda_bench}
[ $# -gt 0 ] && shift
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
here=$(dirname "$0")
for op in record launch; do
  # 21 000 layer calls (1 000 warm-up); the release at the syncs (every 256)
  # is slc_stream_synchronize's: its ledger share per call is its
  # instructions / 256.
  valgrind --tool=callgrind --dump-instr=yes --separate-callers=10 \
    --callgrind-out-file="$tmp/cg.$op" "$bin" --driver=host --ops "$op" \
    --threads 1 --calls 20000 --warmup 1000 --repeat 1 --no-pin "$@" \
    > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
  case $op in
    record) python3 "$here/cuda_layer_cost.py" "$tmp/cg.$op" slc_event_record ;;
    launch) python3 "$here/cuda_layer_cost.py" "$tmp/cg.$op" slc_launch \
              slc_stream_synchronize ;;
  esac
done
