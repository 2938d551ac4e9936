#!/usr/bin/env bash
# Builds the "before" engine_bench for engine_bench_h200.sh's side-by-side
# run: the benchmark of commit BEFORE (default 7c73b4e, main before issue 9's
# third round), built exactly as tools/gpu_build.sh builds (--config=portable,
# --as-needed), copied to gpu-bin/engine_bench_before. Run it after
# tools/gpu_build.sh (which empties gpu-bin/), from this checkout:
#   tools/gpu_build.sh && bench/engine_build_before.sh [BEFORE]
# It checks BEFORE out in a temporary git worktree (removed afterwards, with
# its Bazel server) and shares this checkout's .bazelrc.user (disk cache).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-7c73b4e}
[ -d gpu-bin ] || { echo "$0: run tools/gpu_build.sh first" >&2; exit 1; }
tmp=$(mktemp -d)
cleanup() {
  (cd "$tmp/wt" 2>/dev/null && bazel shutdown >/dev/null 2>&1) || true
  git worktree remove --force "$tmp/wt" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
git worktree add --detach "$tmp/wt" "$rev" >/dev/null
[ -f .bazelrc.user ] && cp .bazelrc.user "$tmp/wt/"
flags=(--config=portable --linkopt=-Wl,--as-needed)
(cd "$tmp/wt" && bazel build "${flags[@]}" //bench:engine_bench)
bin=$(cd "$tmp/wt" && bazel info "${flags[@]}" bazel-bin 2>/dev/null)
cp "$bin/bench/engine_bench" gpu-bin/engine_bench_before
chmod u+w,a+rx gpu-bin/engine_bench_before
echo "before:   $(git rev-parse --short "$rev") (engine_bench_before)" >> gpu-bin/BUILD_INFO.txt
echo "=== gpu-bin/engine_bench_before built at $(git rev-parse --short "$rev")"
