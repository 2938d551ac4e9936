#!/usr/bin/env bash
# Builds ledger_fuzzer with clang: libFuzzer, AddressSanitizer (+ leak
# checking) and UndefinedBehaviorSanitizer (every finding fatal).
#
# Usage: build_fuzzer.sh OUT [FILE...]
#   FILEs: the sources, as the genrule in BUILD passes them ($(SRCS)):
#   ledger/*.{c,h}, tests/differential/{driver,model}.{c,h},
#   tests/fuzz/ledger_fuzzer.c; includes are resolved from the directory that
#   holds ledger/ledger.h. Without FILEs: this checkout's own sources.
#   CC_FUZZ: the compiler (default: clang, else clang-14..19 on PATH).
#
# Coverage feedback comes from the ledger (and the harness) only: the call
# driver and the model are compiled without coverage instrumentation, so the
# fuzzer rewards inputs that reach new code in the library rather than new
# paths through the test, and runs about twice as fast. The ledger is built
# without comparison tracing (trace-cmp): after every call the checks walk
# every pending entry with ~150 range and vector queries, and a hook on each
# comparison there cost three times the speed; the driver draws its values
# relative to the state (marks, held ids) already, so the hooks found nothing
# the plain edge counters did not.
set -euo pipefail

out=$1
shift
if [ $# -eq 0 ]; then
  root=$(cd "$(dirname "$0")/../.." && pwd)
  set -- "$root"/ledger/*.c "$root"/ledger/*.h \
    "$root"/tests/differential/driver.c "$root"/tests/differential/driver.h \
    "$root"/tests/differential/model.c "$root"/tests/differential/model.h \
    "$root"/tests/fuzz/ledger_fuzzer.c
fi

root=""
instrumented=()
plain=()
for f in "$@"; do
  case "$f" in
    */ledger/ledger.h | ledger/ledger.h) root=${f%ledger/ledger.h} ;;
  esac
  case "$f" in
    *.h) ;;
    *tests/differential/*.c) plain+=("$f") ;;
    *.c) instrumented+=("$f") ;;
    *) echo "build_fuzzer: unexpected file $f" >&2; exit 1 ;;
  esac
done
if [ -z "$root" ] && [ ! -f ledger/ledger.h ]; then
  echo "build_fuzzer: ledger/ledger.h is not among the files" >&2
  exit 1
fi
root=${root:-.}

cc=${CC_FUZZ:-}
if [ -z "$cc" ]; then
  for c in clang clang-14 clang-15 clang-16 clang-17 clang-18 clang-19; do
    if command -v "$c" >/dev/null 2>&1; then cc=$c; break; fi
  done
fi
if [ -z "$cc" ]; then
  echo "build_fuzzer: no clang on PATH ($PATH); install clang" >&2
  exit 1
fi

flags=(
  -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
  -Wall -Wextra -Wno-unused-parameter
  -fsanitize=address,undefined -fno-sanitize-recover=all
  -I"$root" -I/usr/include/x86_64-linux-gnu
)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/build_fuzzer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
objs=()
for f in "${plain[@]}"; do
  o="$tmp/$(basename "${f%.c}").o"
  "$cc" "${flags[@]}" -c "$f" -o "$o"
  objs+=("$o")
done
if ! "$cc" "${flags[@]}" -fsanitize=fuzzer -fno-sanitize-coverage=trace-cmp \
    "${instrumented[@]}" "${objs[@]}" \
    -lurcu-memb -lurcu-common -lpthread -o "$out"; then
  echo "build_fuzzer: $cc failed. libFuzzer and the sanitizer runtimes come" \
    "with libclang-rt-14-dev (only recommended by clang on Debian 12)." >&2
  exit 1
fi
