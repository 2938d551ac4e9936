#!/bin/sh
# Where one kernel launch through cuda/ spends its instructions and which
# cache lines it reads, counted with valgrind on the host driver (one
# thread; bench/RESULTS.md "Issue 11, tenth session: the launch row
# (launch10)"). The host executor's own work says nothing about libcuda's;
# the layer's and the ledger's instructions and lines are the real ones.
#   bench/launch10_counts.sh [CUDA_BENCH]
# CUDA_BENCH defaults to bazel-bin/bench/cuda_bench; build it with
#   bazel build --config=opt --copt=-g --strip=never //bench:cuda_bench
# Prints: bench/cuda_layer_cost.sh's split (driver / ledger / layer, per
# slc_launch and per slc_event_record); slc_launch's instructions per
# source line (inlined lines under their own file); D1 misses per line of
# slc_launch and ldg_enqueue with the machine's L1 (48 KiB) and with a
# 32-line L1 (2 KiB, fully associative), a model of a driver whose launch
# evicts the L1: every line the layer reads before the driver calls and
# again after them then counts once per launch. 21 000 launches each.
# The same sizes for the I1 (launch11): its misses in the 32-line model are
# the code lines a launch runs, which such a driver would evict as well.
# The ledger's enqueue is ldg_enqueue (before launch11) or
# ldg__enqueue_checked (after): both are counted, one of them is 0.
set -eu
bin=${1:-bazel-bin/bench/cuda_bench}
here=$(dirname "$0")
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run="$bin --driver=host --ops launch --threads 1 --calls 20000 --warmup 1000 --repeat 1 --no-pin"
echo "== the split (bench/cuda_layer_cost.sh)"
sh "$here/cuda_layer_cost.sh" "$bin" | grep -E '^slc_|^  driver entry|^    cu'
echo "== slc_launch: instructions per source line"
# shellcheck disable=SC2086 # run: words on purpose
valgrind --tool=callgrind --dump-instr=yes --dump-line=yes \
  --callgrind-out-file="$tmp/cg" $run > "$tmp/out" 2>&1 ||
  { cat "$tmp/out" >&2; exit 1; }
python3 "$here/cg_lines.py" ir "$tmp/cg" 21000 slc_launch
# The ledger's enqueue: ldg_enqueue until launch11, ldg__enqueue_checked
# (ldg_enqueue's body without its checks, which cuda/ calls) after.
for fn in ldg_enqueue ldg__enqueue_checked; do
  echo "== $fn: instructions per source line"
  python3 "$here/cg_lines.py" ir "$tmp/cg" 21000 $fn | tail -1
done
for d1 in 49152,12,64 2048,32,64; do
  echo "== D1 and I1 misses per launch, D1 = I1 = $d1 (size, ways, line)"
  # shellcheck disable=SC2086
  valgrind --tool=cachegrind --cache-sim=yes --D1=$d1 --I1=$d1 \
    --cachegrind-out-file="$tmp/cm" $run > "$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; exit 1; }
  python3 "$here/cg_lines.py" miss "$tmp/cm" 21000 \
    slc_launch,ldg_enqueue,ldg__enqueue_checked
done
