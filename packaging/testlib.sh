# Shared by the packaging tests (sourced). They run under `bazel test` with
# the installer and the public headers in their runfiles; each installs into
# its own temporary prefix, exactly as a user would with
# `bazel run //:install -- --prefix=DIR`.
set -euo pipefail

pkg_src="${RUNFILES_DIR:-${TEST_SRCDIR:?}}/streamledger"
pkg_tmp="${TEST_TMPDIR:-$(mktemp -d)}"

pkg_fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# pkg_install PREFIX HEADER...: runs the installer of //packaging:install.
pkg_install() {
  local prefix=$1
  shift
  bash "$pkg_src/packaging/install.sh" --prefix="$prefix" "$@" >"$pkg_tmp/install.log" 2>&1 ||
    {
      cat "$pkg_tmp/install.log" >&2
      pkg_fail "install into $prefix"
    }
}
