#!/usr/bin/env bash
# Each installed public header compiles alone, as the first and only include
# of a translation unit, as strict C11 and as C++17, with warnings fatal and
# no feature macros: gcc, g++ and (where installed) clang, clang++.
# Usage (from packaging/BUILD): headers_test.sh HEADER...
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

prefix="$pkg_tmp/prefix"
pkg_install "$prefix" "$@"
inc="$prefix/include/streamledger"
cuda_inc=/usr/local/cuda/include

compilers=("gcc -x c -std=c11" "g++ -x c++ -std=c++17")
if command -v clang >/dev/null; then
  compilers+=("clang -x c -std=c11" "clang++ -x c++ -std=c++17")
fi

n=0
for h in "$@"; do
  [ -f "$inc/$h" ] || pkg_fail "$h was not installed under $inc"
  for cc in "${compilers[@]}"; do
    # shellcheck disable=SC2086
    if ! echo "#include \"$h\"" | $cc -pedantic -Wall -Wextra -Werror \
      -fsyntax-only -I"$inc" -I"$cuda_inc" - 2>"$pkg_tmp/err"; then
      cat "$pkg_tmp/err" >&2
      pkg_fail "$h alone with: $cc -pedantic -Wall -Wextra -Werror"
    fi
    n=$((n + 1))
  done
done
echo "headers: $# public headers, $n compiles, all clean"
