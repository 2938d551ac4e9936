#!/usr/bin/env bash
# The library's sources build in anyone's build with no -D flags: every
# source of //ledger:srcs that reaches liburcu's headers (through
# ledger/internal.h or ledger/rcu.h) defines _POSIX_C_SOURCE before its first
# #include. On x86 nothing else would notice a file without it: liburcu's
# arm64 headers call clock_gettime, x86's use rdtsc, so only an aarch64 build
# fails ("CLOCK_MONOTONIC undeclared" in urcu/arch/generic.h).
# Usage (from packaging/BUILD): sources_test.sh LEDGER_SRC...
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

n=0
bad=0
for f in "$@"; do
  case "$f" in *.c) ;; *) continue ;; esac
  grep -qE '^#include "ledger/(internal|rcu)\.h"' "$f" || continue
  n=$((n + 1))
  first_define=$(grep -nE '^#define _POSIX_C_SOURCE' "$f" | head -1 | cut -d: -f1 || true)
  first_include=$(grep -nE '^#include' "$f" | head -1 | cut -d: -f1 || true)
  if [ -z "$first_define" ] || [ "$first_define" -gt "$first_include" ]; then
    echo "$f: reaches liburcu's headers without '#define _POSIX_C_SOURCE 200809L' before its first #include" >&2
    bad=1
  fi
done
[ "$n" -gt 0 ] || pkg_fail "no source of //ledger:srcs includes ledger/internal.h"
[ "$bad" -eq 0 ] || pkg_fail "feature macros"
echo "sources: $n sources reach liburcu, each defines its feature macro first"
