#!/usr/bin/env bash
# The shared library exports exactly the public API:
#   - every exported (dynamic, defined) symbol is ldg_*, slc_* or slp_* with no
#     second underscore, versioned STREAMLEDGER_<MAJOR>, and declared in a
#     public header;
#   - every function a public header declares is exported;
#   - the test-only switches of ledger_testing.h and cuda_testing.h are not
#     in it at all;
#   - its soname is libstreamledger.so.<MAJOR>.
# Usage (from packaging/BUILD): exports_test.sh LIBSTREAMLEDGER_SO VERSION_H HEADER...
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

so=$1
version_h=$2
shift 2
major=$(sed -n 's/^#define STREAMLEDGER_VERSION_MAJOR \([0-9]*\)$/\1/p' "$version_h")
[ -n "$major" ] || pkg_fail "no STREAMLEDGER_VERSION_MAJOR in $version_h"

soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libstreamledger.so.$major" ] ||
  pkg_fail "soname is '$soname', not libstreamledger.so.$major"

# Functions the public headers declare (comments stripped first).
declared=$(for h in "$@"; do gcc -fpreprocessed -dD -E -P -x c "$h" 2>/dev/null; done |
  grep -oE '\b(ldg|slc|slp)_[a-z0-9_]+[[:space:]]*\(' | grep -vE '_fn[[:space:]]*\(' |
  sed 's/[[:space:]]*($//' | sort -u)
[ -n "$declared" ] || pkg_fail "no functions found in the public headers"

exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TtWwDdBbRrVv]$/ {print $3}')
bad=0
while read -r sym; do
  [ -z "$sym" ] && continue
  name=${sym%%@*}
  ver=${sym#*@}
  ver=${ver#@}
  if ! [[ "$name" =~ ^(ldg|slc|slp)_[a-z0-9] ]]; then
    echo "not public: $sym" >&2
    bad=1
  elif ! grep -qx "$name" <<<"$declared"; then
    echo "exported but in no public header: $sym" >&2
    bad=1
  elif [ "$ver" != "STREAMLEDGER_$major" ]; then
    echo "not versioned STREAMLEDGER_$major: $sym" >&2
    bad=1
  fi
done <<<"$exported"

names=$(sed 's/@.*//' <<<"$exported" | sort -u)
while read -r fn; do
  grep -qx "$fn" <<<"$names" || {
    echo "declared in a public header but not exported: $fn" >&2
    bad=1
  }
done <<<"$declared"

if nm "$so" | grep -E ' (ldg__fault_fail_alloc_at|ldg__fault_fail_all_allocs|ldg__fault_injected|ldg__set_hook|slc__set_test_hook)$' >&2; then
  echo "the test-only functions of ledger_testing.h or cuda_testing.h are in the library" >&2
  bad=1
fi

[ "$bad" -eq 0 ] || pkg_fail "exported symbols of $so"
echo "exports: $(wc -l <<<"$names") public functions, soname $soname, nothing else"
