#!/usr/bin/env bash
# A long fuzzing session, by hand:
#
#   bazel run //tests/fuzz:fuzz -- [libFuzzer flags]
#
# Fuzzes a working corpus, LDG_FUZZ_CORPUS (default
# ${TMPDIR:-/tmp}/streamledger-fuzz-corpus), seeded from tests/fuzz/corpus on
# first use and kept between sessions. Crash inputs (crash-*, leak-*,
# timeout-*) land in the directory bazel run was started from. Flags default
# to an hour: -max_total_time=3600; anything given is passed on, e.g.
#   -max_total_time=28800 -jobs=8 -workers=8     8 processes for 8 hours
# (with -jobs, each job logs to fuzz-N.log in the starting directory).
set -euo pipefail

root=""
for r in "${RUNFILES_DIR:-/nonexistent}/streamledger" "$0.runfiles/streamledger" "$PWD"; do
  if [ -x "$r/tests/fuzz/ledger_fuzzer" ]; then root=$(cd "$r" && pwd); break; fi
done
[ -n "$root" ] || { echo "fuzz: run me with bazel run //tests/fuzz:fuzz" >&2; exit 1; }
fuzzer=$root/tests/fuzz/ledger_fuzzer
seeds=$root/tests/fuzz/corpus

cd "${BUILD_WORKING_DIRECTORY:-.}"
corpus=${LDG_FUZZ_CORPUS:-${TMPDIR:-/tmp}/streamledger-fuzz-corpus}
mkdir -p "$corpus"
cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true

have_time=0
for a in "$@"; do
  case "$a" in -max_total_time=* | -runs=*) have_time=1 ;; esac
done
extra=()
[ "$have_time" -eq 1 ] || extra+=(-max_total_time=3600)
echo "fuzz: corpus $corpus; crashes go to $(pwd)"
exec "$fuzzer" -max_len=4096 -timeout=25 -rss_limit_mb=3072 \
  -print_final_stats=1 "${extra[@]}" "$@" "$corpus"
