#!/usr/bin/env bash
# The aarch64 job (not part of .ci/run: it costs a few minutes): cross-builds
# the library and its unit, differential, concurrency, torture and stall tests
# for aarch64 (Bazel --config=aarch64: Debian's gcc-aarch64-linux-gnu and
# liburcu-dev:arm64) and runs them under qemu-user. Prints one line per test,
# then "N passed, N failed".
#
# What it proves: the code builds for Arm (liburcu's arm64 headers, the
# overlay's multiarch paths, 128 KiB minimum thread stacks), and the tests
# pass on Arm's ABI and instruction set (its atomics compile to LDAXR/STLXR
# or LSE instructions). What it does not: qemu-user translates each Arm
# instruction to x86 code (TCG) that runs on this x86 host's stronger (TSO)
# memory model, so none of Arm's weak reorderings (a store passing a store, a
# load passing a load) ever happens here. A missing acquire or release that
# only Arm hardware would expose passes under emulation. The orderings are
# argued in the code, checked by the Spin model (ledger/model) and by TSan;
# only runs on Arm hardware (GH200) exercise them for real.
#
# Usage: tools/setup.sh --cross && tools/aarch64_job.sh [extra bazel flags...]
set -uo pipefail
cd "$(dirname "$0")/.."

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  command -v "$tool" >/dev/null || {
    echo "aarch64_job: $tool missing; run tools/setup.sh --cross" >&2
    echo "0 passed, 1 failed"
    exit 1
  }
done
[ -f /usr/include/aarch64-linux-gnu/urcu.h ] || {
  echo "aarch64_job: liburcu-dev:arm64 missing; run tools/setup.sh --cross" >&2
  echo "0 passed, 1 failed"
  exit 1
}

targets=(//tests/unit:all //tests/differential:all //tests:all //tests/torture:all)
log=$(mktemp)
echo "=== bazel test --config=aarch64 ${targets[*]}"
bazel test --config=aarch64 --test_summary=short --keep_going "$@" -- "${targets[@]}" 2>&1 | tee "$log"
p=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log" || true)
f=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|REMOTE FAILURE|FAILED TO BUILD)' "$log" || true)
if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; echo "=== aarch64: no test ran"; fi
rm -f "$log"
# The binaries really are Arm ones.
file "$(bazel info --config=aarch64 bazel-bin 2>/dev/null)/tests/concurrency_test" | sed 's/^/=== /'
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
