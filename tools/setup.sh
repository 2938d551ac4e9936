#!/usr/bin/env bash
# Installs every Debian package streamledger needs to build, test and
# benchmark. Idempotent: installs only what is missing; safe to re-run.
# Usage: tools/setup.sh   (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  bazel-bootstrap   # Bazel 4.2.3; the workspace is set up to need no network
  gcc g++ libc6-dev # the C toolchain Bazel auto-configures
  liburcu-dev       # userspace RCU (0.13), shared and static libraries
  clang             # libFuzzer harnesses
  libclang-rt-14-dev # libFuzzer and clang's sanitizer runtimes (only recommended by clang)
  spin              # model checking of the ring protocol
  gnuplot-nox       # benchmark plots
  python3           # benchmark JSON to plot data
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# CUDA headers: cuda/ compiles against cuda.h but never links the driver.
if [ ! -f /usr/local/cuda/include/cuda.h ]; then
  echo "setup: warning: /usr/local/cuda/include/cuda.h not found; the CUDA" >&2
  echo "setup: layer (cuda/) will not build. Install the CUDA toolkit headers." >&2
fi

bazel --version >/dev/null 2>&1 || { echo "setup: bazel not runnable" >&2; exit 1; }
echo "setup: done"
