#!/usr/bin/env bash
# Line and branch coverage of the ledger by a corpus: builds the harness with
# clang's source-based coverage (no sanitizers), runs every input once and
# prints llvm-cov's report for ledger/*.c.
#
# Usage: tests/fuzz/coverage.sh [CORPUS_DIR...]   (default: tests/fuzz/corpus)
#   LDG_COV_SHOW=1 also prints the ledger's lines that no input reached.
# Needs clang, llvm-profdata and llvm-cov (Debian: clang, llvm).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- "$root/tests/fuzz/corpus"

tool() {
  for t in "$1" "$1-14" "$1-15" "$1-16" "$1-17" "$1-18" "$1-19"; do
    if command -v "$t" >/dev/null 2>&1; then echo "$t"; return; fi
  done
  echo "coverage: $1 not found (Debian: apt-get install llvm)" >&2
  exit 1
}
cc=${CC_FUZZ:-$(tool clang)}
profdata=$(tool llvm-profdata)
cov=$(tool llvm-cov)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ledger_cov.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$cc" -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer \
  -fprofile-instr-generate -fcoverage-mapping \
  -I"$root" -I/usr/include/x86_64-linux-gnu \
  "$root"/tests/fuzz/ledger_fuzzer.c "$root"/tests/differential/driver.c \
  "$root"/tests/differential/model.c "$root"/ledger/*.c \
  -lurcu-memb -lurcu-common -lpthread -o "$tmp/ledger_fuzzer_cov"
LLVM_PROFILE_FILE="$tmp/run.profraw" "$tmp/ledger_fuzzer_cov" -runs=0 "$@" \
  >"$tmp/run.log" 2>&1 || { tail -n 50 "$tmp/run.log"; exit 1; }
"$profdata" merge -o "$tmp/run.profdata" "$tmp/run.profraw"
"$cov" report "$tmp/ledger_fuzzer_cov" -instr-profile="$tmp/run.profdata" \
  "$root"/ledger/*.c | sed "s|$root/||"
if [ "${LDG_COV_SHOW:-0}" != 0 ]; then
  "$cov" show "$tmp/ledger_fuzzer_cov" -instr-profile="$tmp/run.profdata" \
    "$root"/ledger/*.c | grep -E '^/|^ +[0-9]+\| +0\|' | sed "s|$root/||"
fi
