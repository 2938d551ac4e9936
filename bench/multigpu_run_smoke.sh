#!/bin/sh
# A dry run of bench/multigpu_run.sh in CI: a gpu-bin-like folder whose
# cuda_suite and pool_bench talk to the host executor through
# libfake_cuda.so (SLC_FAKE_CUDA_DEVICES GPUs) and a fake nvidia-smi; tiny
# cells. Checks the script's steps, tables and exit status, not timing.
# Usage: multigpu_run_smoke.sh SCRIPT CUDA_SUITE POOL_BENCH LIBFAKE_CUDA
set -eu
script=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
suite=$(abs "$2") bench=$(abs "$3") fake=$(abs "$4")
mkdir -p "$tmp/bin" "$tmp/path"
cp "$script" "$tmp/bin/multigpu_run.sh"
printf '#!/bin/sh\nexec "%s" "$@" --libcuda=%s\n' "$suite" "$fake" >"$tmp/bin/cuda_suite"
printf '#!/bin/sh\nexec "%s" "$@" --libcuda %s\n' "$bench" "$fake" >"$tmp/bin/pool_bench"
cat >"$tmp/path/nvidia-smi" <<'SMI'
#!/bin/sh
[ "${1:-}" = -L ] || exit 0
i=0
while [ "$i" -lt "$SLC_FAKE_CUDA_DEVICES" ]; do echo "GPU $i: fake"; i=$((i + 1)); done
SMI
# no PyTorch here: a python3 that has no torch
printf '#!/bin/sh\nexit 1\n' >"$tmp/path/python3"
chmod +x "$tmp/bin/"* "$tmp/path/"*
fail=0
set +e
PATH="$tmp/path:$PATH" SLC_FAKE_CUDA_DEVICES=3 MS=20 TPG=1 BYTES=4096 \
  INFLIGHT=4 SUITE_ONLY=info,chain_all_devices,peer_copy_ring \
  "$tmp/bin/multigpu_run.sh" "$tmp/bin" "$tmp/out" >"$tmp/run.txt" 2>&1
rc=$?
set -e
cat "$tmp/run.txt"
[ "$rc" -eq 0 ] || { echo "FAIL: multigpu_run.sh exited $rc" >&2; fail=1; }
grep -q '^cuda_suite (libcuda): 3 passed, 0 failed' "$tmp/out/SUMMARY.txt" ||
  { echo "FAIL: the suite's line" >&2; fail=1; }
for placing in grouped spread; do
  for g in 1 2 3; do
    for m in pool async; do
      grep -q "^multigpu $m *$g *$g $placing" "$tmp/out/TABLE.txt" ||
        { echo "FAIL: no row $m $g $placing in TABLE.txt" >&2; fail=1; }
      grep -q "^$m $placing 1 *$g |" "$tmp/out/SCALING.txt" ||
        { echo "FAIL: no row $m $g $placing in SCALING.txt" >&2; fail=1; }
    done
  done
done
for placing in grouped spread; do # ENGINE_ONE (3 GPUs): one engine thread
  for g in 1 2 3; do
    grep -q "^multigpu pool-1t *$g *$g $placing" "$tmp/out/TABLE.txt" ||
      { echo "FAIL: no row pool-1t $g $placing in TABLE.txt" >&2; fail=1; }
    grep -q "^pool-1t $placing 1 *$g |" "$tmp/out/SCALING.txt" ||
      { echo "FAIL: no row pool-1t $g $placing in SCALING.txt" >&2; fail=1; }
  done
done
grep -q 'pool_torch not built' "$tmp/out/build.log" ||
  { echo "FAIL: no word on pool_torch" >&2; fail=1; }
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
