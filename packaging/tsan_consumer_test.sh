#!/usr/bin/env bash
# An embedder's ThreadSanitizer build is quiet on correct use: the library's
# sources (//ledger:srcs, whatever files the BUILD lists) compiled into a
# small program (consumers/tsan_app.c) with -fsanitize=thread, by gcc and by
# clang, against liburcu shared and static — four builds. Each must run to
# its "OK" line with no ThreadSanitizer report.
# Usage (from packaging/BUILD): tsan_consumer_test.sh TSAN_APP.C LEDGER_SRC...
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

app=$1
shift
srcs=()
for f in "$@"; do
  case "$f" in *.c) srcs+=("$f") ;; esac
done
[ "${#srcs[@]}" -gt 0 ] || pkg_fail "no .c files in //ledger:srcs"

for cc in gcc clang; do
  command -v "$cc" >/dev/null || pkg_fail "$cc not installed (tools/setup.sh --dev)"
  for urcu in shared static; do
    if [ "$urcu" = shared ]; then
      libs=(-lurcu-memb -lurcu-common)
    else
      libs=("$($cc -print-file-name=liburcu-memb.a)" "$($cc -print-file-name=liburcu-common.a)")
    fi
    bin="$pkg_tmp/tsan_${cc}_$urcu"
    "$cc" -std=c11 -fsanitize=thread -g -O1 -I. "${srcs[@]}" "$app" \
      "${libs[@]}" -lpthread -o "$bin" 2>"$pkg_tmp/build.log" || {
      cat "$pkg_tmp/build.log" >&2
      pkg_fail "$cc, liburcu $urcu: build"
    }
    if ! TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$bin" >"$pkg_tmp/run.log" 2>&1 ||
      grep -q "ThreadSanitizer" "$pkg_tmp/run.log"; then
      head -60 "$pkg_tmp/run.log" >&2
      pkg_fail "$cc, liburcu $urcu: ThreadSanitizer report or failure"
    fi
    echo "$cc, liburcu $urcu: $(tail -1 "$pkg_tmp/run.log")"
  done
done
