#!/usr/bin/env bash
# A separate Bazel workspace made of README.md's embedding snippet, verbatim:
# the "# WORKSPACE", "# BUILD" and "# .bazelrc" blocks of its section
# "Embedding in another Bazel workspace", with /path/to/streamledger replaced
# by this checkout's path, and the consumer program as app.c. `bazel test
# //...` there must build app and pass app_test, offline, and app must run.
# So the README cannot drift from what works.
# Usage (from packaging/BUILD): bazel_consumer_test.sh README.md WORKSPACE APP.C
source "${TEST_SRCDIR:?}/streamledger/packaging/testlib.sh"

readme=$1
# The checkout itself (the runfiles hold links into it), for local_repository.
root=$(dirname "$(readlink -f "$2")")
app=$3
ws="$pkg_tmp/consumer"
rm -rf "$ws"
mkdir -p "$ws"

# Blocks of the section, split on the ``` fences; a block whose first line is
# "# NAME" becomes the file NAME.
awk -v dir="$ws" '
  /^## / { insec = ($0 == "## Embedding in another Bazel workspace") }
  !insec { next }
  /^```/ { if (inblk) { inblk = 0; file = "" } else { inblk = 1; first = 1 } next }
  inblk && first { first = 0; if ($0 ~ /^# (WORKSPACE|BUILD|\.bazelrc)$/) file = dir "/" substr($0, 3) }
  inblk && file != "" { print > file }
' "$readme"
for f in WORKSPACE BUILD .bazelrc; do
  [ -s "$ws/$f" ] || pkg_fail "README.md has no '# $f' block in its Bazel embedding section"
done
sed -i "s|/path/to/streamledger|$root|g" "$ws/WORKSPACE"
cp "$app" "$ws/app.c"

cd "$ws"
# --batch: no server outlives the test; its own output root, so nothing is
# shared with the outer build.
bazel_consumer() {
  bazel --batch --output_user_root="$pkg_tmp/bazel-root" "$@"
}
if ! bazel_consumer test //... >"$pkg_tmp/bazel.log" 2>&1; then
  tail -40 "$pkg_tmp/bazel.log" >&2
  pkg_fail "bazel test //... in a workspace made of README.md's snippet"
fi
grep -E '^//:app_test +(\(cached\) )?PASSED' "$pkg_tmp/bazel.log" ||
  pkg_fail "app_test did not pass: $(tail -5 "$pkg_tmp/bazel.log")"
lines=$(wc -l <"$pkg_tmp/bazel.log")
got=$(bazel-bin/app) || pkg_fail "app exited $?"
[[ "$got" == "consumer: OK"* ]] || pkg_fail "app printed '$got'"
echo "bazel consumer: $got ($lines lines of bazel output)"
