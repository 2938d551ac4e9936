#!/usr/bin/env bash
# The fuzzer's two CI tests (see BUILD).
#
#   fuzz_test.sh replay FUZZER INPUT...   run every input once, first with
#       liburcu's callback naps shortened (as when fuzzing), then with them
#       as shipped (LDG_FUZZ_RCU_NAP=1); fails on any mismatch or finding.
#   fuzz_test.sh fuzz FUZZER INPUT...     a bounded fuzzing session over a
#       copy of the inputs: LDG_FUZZ_SECONDS (default 30) seconds, at most
#       LDG_FUZZ_RUNS (default 1000000) inputs. A crash input is kept in
#       the test's undeclared outputs (bazel-testlogs/.../outputs.zip) and
#       printed in hex.
set -euo pipefail

mode=$1
fuzzer=$2
shift 2
[ $# -gt 0 ] || { echo "fuzz_test: no inputs" >&2; exit 1; }
tmp=${TEST_TMPDIR:-$(mktemp -d)}
log=$tmp/fuzz.log

show_crashes() {
  for f in "$1"crash-* "$1"leak-* "$1"timeout-* "$1"oom-*; do
    [ -f "$f" ] || continue
    echo "=== $f ($(wc -c <"$f") bytes):"
    od -An -tx1 -v "$f"
  done
}

case "$mode" in
  replay)
    for nap in 0 1; do
      if ! LDG_FUZZ_RCU_NAP=$nap "$fuzzer" "$@" >"$log" 2>&1; then
        tail -n 150 "$log"
        echo "fuzz_test: FAIL replaying the corpus (LDG_FUZZ_RCU_NAP=$nap)"
        exit 1
      fi
      n=$(grep -c '^Executed ' "$log" || true)
      echo "fuzz_test: replayed $n inputs (LDG_FUZZ_RCU_NAP=$nap): ok"
    done
    ;;
  fuzz)
    work=$tmp/corpus
    mkdir -p "$work"
    cp "$@" "$work"/
    art=${TEST_UNDECLARED_OUTPUTS_DIR:-$tmp}/
    secs=${LDG_FUZZ_SECONDS:-30}
    runs=${LDG_FUZZ_RUNS:-1000000}
    rc=0
    "$fuzzer" -max_total_time="$secs" -runs="$runs" -max_len=4096 \
      -timeout=25 -rss_limit_mb=3072 -print_final_stats=1 \
      -artifact_prefix="$art" "$work" >"$log" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ]; then
      tail -n 200 "$log"
      show_crashes "$art"
      echo "fuzz_test: FAIL (libFuzzer exit $rc); reproduce with"
      echo "  bazel build //tests/fuzz:ledger_fuzzer &&" \
        "LDG_DIFF_TRACE=1 bazel-bin/tests/fuzz/ledger_fuzzer CRASH_FILE"
      exit 1
    fi
    grep -E '^INFO: Seed:|INITED|DONE|^stat::' "$log" || true
    echo "fuzz_test: $(ls "$work" | wc -l) inputs in the corpus after" \
      "${secs}s: ok"
    ;;
  *)
    echo "fuzz_test: unknown mode $mode" >&2
    exit 1
    ;;
esac
