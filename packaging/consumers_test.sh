#!/usr/bin/env bash
# Programs outside streamledger, built against its installed tree (a fresh
# temporary prefix), shared and static, ledger and CUDA layer:
#   1. plain cc with pkg-config (streamledger, streamledger-cuda);
#   2. CMake with find_package(streamledger) and its imported targets.
# Each must build, link the library the way it asked for (NEEDED
# libstreamledger.so.MAJOR or not at all) and print its "OK" line; the
# pkg-config version must be the one the library reports at run time.
# Usage (from packaging/BUILD): consumers_test.sh HEADER...
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

prefix="$pkg_tmp/prefix"
pkg_install "$prefix" "$@"
lib="$prefix/lib"
src="$pkg_src/packaging/consumers"
out="$pkg_tmp/out"
mkdir -p "$out"

run() { # run NAME BINARY EXPECTED-LINE-PREFIX
  local got
  got=$("$2") || pkg_fail "$1: exited $?"
  [[ "$got" == "$3"* ]] || pkg_fail "$1 printed '$got'"
  echo "$1: $got"
}
needs_so() { # needs_so BINARY yes|no
  local has=no
  readelf -d "$1" >"$pkg_tmp/dynamic" # (not piped into grep -q: pipefail)
  grep -q 'NEEDED.*\[libstreamledger\.so\.[0-9]*\]' "$pkg_tmp/dynamic" && has=yes
  [ "$has" = "$2" ] || pkg_fail "$1: NEEDED libstreamledger.so is '$has', want '$2'"
}

# 1. cc + pkg-config.
export PKG_CONFIG_PATH="$lib/pkgconfig"
version=$(pkg-config --modversion streamledger)
cc=${CC:-cc}
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/app.c" -o "$out/pc_shared" \
  $(pkg-config --cflags --libs streamledger) -Wl,-rpath,"$lib"
needs_so "$out/pc_shared" yes
run "pkg-config shared" "$out/pc_shared" "consumer: OK streamledger $version"
# Static: the archive by name, the rest from Libs.private.
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/app.c" -o "$out/pc_static" \
  $(pkg-config --cflags streamledger) \
  $(pkg-config --static --libs streamledger | sed 's/-lstreamledger\b/-l:libstreamledger.a/')
needs_so "$out/pc_static" no
run "pkg-config static" "$out/pc_static" "consumer: OK streamledger $version"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/cuda_app.c" -o "$out/pc_cuda" \
  $(pkg-config --cflags --libs streamledger-cuda) -Wl,-rpath,"$lib"
run "pkg-config cuda" "$out/pc_cuda" "cuda consumer: OK"
# shellcheck disable=SC2046
$cc -std=c11 -Wall -Wextra -Werror "$src/host_app.c" -o "$out/pc_host" \
  $(pkg-config --cflags --libs streamledger-host-executor) -Wl,-rpath,"$lib"
run "pkg-config host executor" "$out/pc_host" "host consumer: OK"

# 2. CMake + find_package.
if ! command -v cmake >/dev/null; then
  pkg_fail "cmake not installed (tools/setup.sh --dev installs it)"
fi
cmake -S "$src" -B "$out/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_COMPILER="$cc" >"$out/cmake.log" 2>&1 || {
  cat "$out/cmake.log" >&2
  pkg_fail "cmake configure"
}
cmake --build "$out/cmake" >>"$out/cmake.log" 2>&1 || {
  cat "$out/cmake.log" >&2
  pkg_fail "cmake build"
}
needs_so "$out/cmake/app_shared" yes
needs_so "$out/cmake/app_static" no
run "cmake shared" "$out/cmake/app_shared" "consumer: OK streamledger $version"
run "cmake static" "$out/cmake/app_static" "consumer: OK streamledger $version"
run "cmake cuda" "$out/cmake/cuda_app" "cuda consumer: OK"
run "cmake cuda static" "$out/cmake/cuda_app_static" "cuda consumer: OK"
run "cmake host executor" "$out/cmake/host_app" "host consumer: OK"
echo "consumers: all built against $prefix and ran"
