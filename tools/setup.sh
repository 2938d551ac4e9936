#!/usr/bin/env bash
# Installs the Debian packages streamledger needs. Idempotent: installs only
# what is missing; safe to re-run.
#
#   tools/setup.sh           everything a developer and CI need: build, test
#                            (clang and its sanitizer runtimes, Spin, cmake and
#                            pkg-config for the packaging checks), benchmark
#                            plots. What .ci/run runs.
#   tools/setup.sh --user    only what building, installing and using the
#                            library needs (Bazel, gcc, liburcu, pkg-config).
#   tools/setup.sh --cross   everything, plus the aarch64 cross toolchain,
#                            liburcu for arm64 and qemu-user, for
#                            tools/aarch64_job.sh (adds dpkg architecture arm64).
# As root, or with sudo available.
set -euo pipefail

mode=dev
case "${1:-}" in
"") ;;
--user) mode=user ;;
--cross) mode=cross ;;
*)
  echo "usage: tools/setup.sh [--user | --cross]" >&2
  exit 2
  ;;
esac

USER_PACKAGES=(
  bazel-bootstrap   # Bazel 4.2.3; the workspace is set up to need no network
  gcc g++ libc6-dev # the C toolchain Bazel auto-configures
  liburcu-dev       # userspace RCU (0.13), shared and static libraries
  pkg-config        # for programs built against the installed library
)
DEV_PACKAGES=(
  clang              # libFuzzer harnesses; the clang ThreadSanitizer consumer check
  libclang-rt-14-dev # libFuzzer and clang's sanitizer runtimes (only recommended by clang)
  spin               # model checking of the ring protocol
  cmake              # the find_package(streamledger) consumer check
  gnuplot-nox        # benchmark plots
  python3            # benchmark JSON to plot data
)
CROSS_PACKAGES=(
  gcc-aarch64-linux-gnu  # cross compiler (and binutils)
  libc6-dev-arm64-cross  # its C library
  liburcu-dev:arm64      # liburcu for arm64, multiarch (needs dpkg arch arm64)
  qemu-user              # runs the aarch64 tests on this host
)

PACKAGES=("${USER_PACKAGES[@]}")
if [ "$mode" != user ]; then PACKAGES+=("${DEV_PACKAGES[@]}"); fi
if [ "$mode" = cross ]; then PACKAGES+=("${CROSS_PACKAGES[@]}"); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "$mode" = cross ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup: adding dpkg architecture arm64 (for liburcu-dev:arm64)"
  $SUDO dpkg --add-architecture arm64
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present ($mode)"
fi

# CUDA headers: cuda/ compiles against cuda.h but never links the driver.
if [ ! -f /usr/local/cuda/include/cuda.h ]; then
  echo "setup: warning: /usr/local/cuda/include/cuda.h not found; the CUDA" >&2
  echo "setup: layer (cuda/) will not build. Install the CUDA toolkit headers." >&2
fi

bazel --version >/dev/null 2>&1 || { echo "setup: bazel not runnable" >&2; exit 1; }
echo "setup: done ($mode)"
