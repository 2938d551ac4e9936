#!/usr/bin/env bash
# Runs every test of streamledger: the whole suite in the default build, the
# whole suite under AddressSanitizer (+LeakSanitizer) with UndefinedBehavior-
# Sanitizer, and the tests under tests/ (the concurrency tests among them)
# under ThreadSanitizer. Prints one line per test and configuration, then
# "N passed, N failed".
# Usage: tools/test.sh [extra bazel flags...]
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
runs=(
  "default|//..."
  "asan+ubsan|//..."
  "tsan|//tests/..."
)
# The Spin model check (tag "model") compiles its own checker, and the
# packaging checks (tag "packaging") test the installed, uninstrumented
# library and the programs built against it: a sanitizer config changes
# nothing for the first and is not what ships for the second, so they run in
# the default build only.

for run in "${runs[@]}"; do
  config="${run%%|*}"
  targets="${run#*|}"
  flags=()
  if [ "$config" != "default" ]; then
    IFS=+ read -ra cfgs <<<"$config"
    for c in "${cfgs[@]}"; do flags+=("--config=$c"); done
  fi
  echo "=== bazel test ${flags[*]} $targets"
  log=$(mktemp)
  filters=()
  if [ "$config" != "default" ]; then filters+=("--test_tag_filters=-model,-packaging"); fi
  bazel test "${flags[@]}" "${filters[@]}" --test_summary=short --keep_going "$@" -- $targets 2>&1 | tee "$log"
  # One summary line per test target: "//pkg:name   PASSED in 0.1s" etc.
  p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
  f=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|REMOTE FAILURE|FAILED TO BUILD)' "$log" || true)
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
    f=1 # the build itself failed before any test ran
    echo "=== $config: no test ran"
  fi
  passed=$((passed + p))
  failed=$((failed + f))
  rm -f "$log"
  if [ "$config" = "default" ]; then
    # Bazel 4 does not show a test's skip notice: say it here.
    gpu_log="$(bazel info bazel-testlogs 2>/dev/null)/tests/cuda/cuda_suite_libcuda_test/test.log"
    if [ -f "$gpu_log" ]; then
      grep -h '^SKIPPED' "$gpu_log" | sed 's/^/=== real-GPU suite: /' || true
    fi
  fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
