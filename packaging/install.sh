#!/usr/bin/env bash
# Installs streamledger: headers, static and shared library, pkg-config and
# CMake package files.
#
#   bazel run -c opt //:install -- --prefix=/usr/local
#
# Options: --prefix=DIR (required; relative to where bazel was run),
#          --libdir=DIR  (under the prefix; default lib),
#          --cuda-include=DIR (CUDA toolkit headers, for the CUDA layer's
#                              pkg-config and CMake target; default
#                              /usr/local/cuda/include).
# Layout (PREFIX/):
#   include/streamledger/ledger/{ledger.h,version.h}
#   include/streamledger/cuda/{sl_cuda.h,driver.h,sl_engine.h,host_executor.h}
#   include/streamledger/pool/sl_pool.h (the memory pool, in libstreamledger:
#       pkg-config streamledger-cuda, CMake streamledger::cuda)
#       -I PREFIX/include/streamledger, then #include "ledger/ledger.h":
#       the same include paths as inside this repository and with Bazel.
#   LIBDIR/libstreamledger.a, libstreamledger_host_executor.a
#   LIBDIR/libstreamledger.so.M.m.p, .so.M (the soname), .so
#   LIBDIR/pkgconfig/streamledger.pc, streamledger-cuda.pc,
#                    streamledger-host-executor.pc
#   LIBDIR/cmake/streamledger/streamledgerConfig.cmake, ...ConfigVersion.cmake
set -euo pipefail

prefix=""
libdir="lib"
cuda_include="/usr/local/cuda/include"
headers=()
for arg in "$@"; do
  case "$arg" in
  [!-]*) headers+=("$arg") ;; # the public headers (packaging/BUILD passes them)
  --prefix=*) prefix=${arg#--prefix=} ;;
  --libdir=*) libdir=${arg#--libdir=} ;;
  --cuda-include=*) cuda_include=${arg#--cuda-include=} ;;
  -h | --help)
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "install: unknown argument '$arg' (see --help)" >&2
    exit 2
    ;;
  esac
done
if [ -z "$prefix" ]; then
  echo "install: --prefix=DIR is required (see --help)" >&2
  exit 2
fi
case "$libdir" in
/* | *..*)
  echo "install: --libdir must be a relative path under the prefix" >&2
  exit 2
  ;;
esac
# bazel run starts us in the runfiles tree; a relative prefix means relative
# to where the user ran bazel.
case "$prefix" in
/*) ;;
*) prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix" ;;
esac

# The built files, from the runfiles tree (bazel run) of this workspace.
src="${RUNFILES_DIR:-$0.runfiles}/streamledger"
[ -d "$src" ] || src="$(cd "$(dirname "$0")/.." && pwd)"
for f in packaging/libstreamledger.a packaging/libstreamledger.so ledger/version.h; do
  [ -f "$src/$f" ] || {
    echo "install: $src/$f missing; run me with: bazel run //:install -- --prefix=DIR" >&2
    exit 1
  }
done

mode=$(cat "$src/packaging/compilation_mode.txt" 2>/dev/null || echo unknown)
if [ "$mode" != opt ]; then
  echo "install: warning: the library was built with -c $mode (not optimised);" >&2
  echo "install: for a release, run: bazel run -c opt //:install -- --prefix=DIR" >&2
fi

version_part() {
  sed -n "s/^#define STREAMLEDGER_VERSION_$1 \([0-9]*\)\$/\1/p" "$src/ledger/version.h"
}
major=$(version_part MAJOR)
minor=$(version_part MINOR)
patch=$(version_part PATCH)
version="$major.$minor.$patch"

inc="$prefix/include/streamledger"
lib="$prefix/$libdir"
mkdir -p "$inc" "$lib/pkgconfig" "$lib/cmake/streamledger"

if [ "${#headers[@]}" -eq 0 ]; then
  echo "install: no headers given; run me with: bazel run //:install -- --prefix=DIR" >&2
  exit 1
fi
# Each public header keeps its path in the repository (ledger/ledger.h).
for h in "${headers[@]}"; do
  install -D -m 0644 "$src/$h" "$inc/$h"
done
install -m 0644 "$src/packaging/libstreamledger.a" "$lib/libstreamledger.a"
install -m 0644 "$src/packaging/libstreamledger_host_executor.a" "$lib/libstreamledger_host_executor.a"
install -m 0755 "$src/packaging/libstreamledger.so" "$lib/libstreamledger.so.$version"
ln -sfn "libstreamledger.so.$version" "$lib/libstreamledger.so.$major"
ln -sfn "libstreamledger.so.$major" "$lib/libstreamledger.so"

# The CMake files find the prefix from their own location, so the tree can be
# moved; pkg-config files carry the prefix they were installed with.
rel_prefix=$(realpath -m --relative-to="$lib/cmake/streamledger" "$prefix")
subst() {
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$libdir|g" \
    -e "s|@REL_PREFIX@|$rel_prefix|g" -e "s|@VERSION@|$version|g" \
    -e "s|@MAJOR@|$major|g" -e "s|@CUDA_INCLUDE@|$cuda_include|g" "$1" >"$2"
  chmod 0644 "$2"
}
subst "$src/packaging/streamledger.pc.in" "$lib/pkgconfig/streamledger.pc"
subst "$src/packaging/streamledger-cuda.pc.in" "$lib/pkgconfig/streamledger-cuda.pc"
subst "$src/packaging/streamledger-host-executor.pc.in" "$lib/pkgconfig/streamledger-host-executor.pc"
subst "$src/packaging/streamledgerConfig.cmake.in" "$lib/cmake/streamledger/streamledgerConfig.cmake"
subst "$src/packaging/streamledgerConfigVersion.cmake.in" "$lib/cmake/streamledger/streamledgerConfigVersion.cmake"

echo "install: streamledger $version into $prefix"
echo "install:   pkg-config: PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs streamledger"
echo "install:   CMake:      find_package(streamledger) with CMAKE_PREFIX_PATH=$prefix"
