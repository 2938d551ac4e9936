#!/usr/bin/env bash
# Builds pool_bench at another commit (default: main at 7c73b4e, before the
# per-thread return path) into gpu-bin/pool_bench.before, built as
# tools/gpu_build.sh builds gpu-bin/pool_bench (--config=portable), so that
# bench/pool_h200.sh measures before and after side by side in one run.
# Run tools/gpu_build.sh first (it empties gpu-bin/), then this.
# Usage: bench/pool_before_build.sh [COMMIT]
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:-7c73b4e}
[ -d gpu-bin ] || { echo "$0: run tools/gpu_build.sh first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/src" "$commit" >/dev/null
[ -f .bazelrc.user ] && cp .bazelrc.user "$tmp/src/"
flags=(--config=portable --linkopt=-Wl,--as-needed)
(
  cd "$tmp/src"
  bazel build "${flags[@]}" //bench:pool_bench
  cp "$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)/bench/pool_bench" "$OLDPWD/gpu-bin/pool_bench.before"
  bazel shutdown
)
chmod u+w,a+rx gpu-bin/pool_bench.before
echo "$(git rev-parse --short "$commit")" > gpu-bin/pool_bench.before.commit
echo "=== gpu-bin/pool_bench.before: pool_bench at $(cat gpu-bin/pool_bench.before.commit)"
ldd gpu-bin/pool_bench.before | sed 's/^/    /'
