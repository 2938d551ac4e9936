#!/usr/bin/env bash
# Combines the static archives of the library's cc_library targets into one
# archive: combine_archives.sh AR OUT ARCHIVE...
# Bazel gives every target both a PIC (.pic.a / .pic.lo) and, where the
# toolchain builds one, a non-PIC archive; the PIC ones are taken, so the
# result links into executables and shared objects alike.
set -euo pipefail
ar=$1
out=$2
shift 2
pic=()
plain=()
for a in "$@"; do
  case "$a" in
  *.pic.a | *.pic.lo) pic+=("$a") ;;
  *.a | *.lo) plain+=("$a") ;;
  esac
done
if [ "${#pic[@]}" -gt 0 ]; then libs=("${pic[@]}"); else libs=("${plain[@]}"); fi
# An MRI script keeps members whose base names repeat across packages.
{
  echo "CREATE $out"
  for a in "${libs[@]}"; do echo "ADDLIB $a"; done
  echo "SAVE"
  echo "END"
} | "$ar" -M
