# shellcheck shell=sh
# Shared by the benchmarks' smoke tests (sourced; they run under set -eu
# with a variable `fail`).
#
# smoke_refuses BAD CMD...: runs CMD followed by the words of BAD (split on
# spaces) and sets fail=1 with a message unless it exits 2, the status of a
# refused command line.
smoke_refuses() {
  bad=$1
  shift
  set +e
  # shellcheck disable=SC2086
  "$@" $bad >/dev/null 2>&1
  rc=$?
  set -e
  # shellcheck disable=SC2034 # the caller reads fail
  [ "$rc" -eq 2 ] || { echo "FAIL: '$bad' exited $rc, not 2" >&2; fail=1; }
}
