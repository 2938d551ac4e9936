#!/usr/bin/env bash
# Model-checks the engine thread's park against an issuer's wake-up
# (park_sb.pml, beside this script; cuda/engine.c, WAKING THE ENGINE THREAD)
# with Spin, exhaustively: each configuration must pass (no assertion
# violation, no invalid end state), each mutant (BUG_*) must fail.
# Needs spin and gcc on PATH. Works under $TEST_TMPDIR when Bazel sets it.
# Exit status 0 when every run came out as expected.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for tool in spin gcc; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "check.sh: $tool not found on PATH; install it (Debian: apt-get install $tool)" >&2
    exit 1
  }
done
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/park_sb.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$here/park_sb.pml" "$work/"
cd "$work" || exit 1
bad=0
run() { # expect defines...
  local expect=$1; shift
  rm -f pan pan.* ./*.trail
  if ! spin -a "$@" park_sb.pml >spin.out 2>&1 ||
     ! gcc -O2 -DSAFETY -o pan pan.c >gcc.out 2>&1; then
    echo "ERROR  $expect $*: spin/gcc failed"; cat spin.out gcc.out; bad=1; return
  fi
  ./pan -m10000 >pan.out 2>&1
  local errors
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | head -1)
  local states
  states=$(sed -n 's/^ *\([0-9e+.]*\) states, stored.*/\1/p' pan.out | head -1)
  if [ -z "$errors" ]; then
    echo "ERROR  $expect $*: no result"; cat pan.out; bad=1
  elif [ "$expect" = pass ] && [ "$errors" = 0 ] &&
       ! grep -q "search not completed\|max search depth too small" pan.out; then
    echo "ok     pass $* ($states states)"
  elif [ "$expect" = fail ] && [ "$errors" != 0 ] &&
       grep -q "assertion violated" pan.out; then
    echo "ok     fail $* (assertion violated, as it must)"
  else
    echo "WRONG  $expect $*: errors $errors"; cat pan.out; bad=1
  fi
}
run pass
run pass -DISSUER_RMW
run pass -DMODE_FENCE -DISSUER_RMW
run pass -DMODE_FENCE -DISSUER_FENCE
run fail -DBUG_NO_HEAVY
run fail -DBUG_FENCE_OWNED
run fail -DBUG_NO_HEAVY -DISSUER_FENCE
exit $bad
