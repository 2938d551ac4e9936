#!/bin/sh
# Instructions per shared enqueue (pub11), before against after, noise-free
# (valgrind --tool=callgrind): bench/pub11_cost.c (one thread, an
# LDG_STREAM_SHARED stream, one id and one range per enqueue, a release
# every 16) built with the same gcc flags against each tree's ledger/ (liburcu
# linked statically, as --config=portable does), run with N and 2N ops; the
# difference over N, in total and per function (self cost, rows above 0.5).
#   bench/pub11_instr.sh BEFORE_REF [AFTER_TREE [N]]
# BEFORE_REF: a git ref of this repository (e.g. main); AFTER_TREE: a source
# tree (default: this one). Needs gcc, valgrind, liburcu's static libraries.
set -eu
before=${1:?usage: pub11_instr.sh BEFORE_REF [AFTER_TREE [N]]}
after=${2:-$(cd "$(dirname "$0")/.." && pwd)}
n=${3:-100000}
here=$(cd "$(dirname "$0")" && pwd)
command -v valgrind > /dev/null || { echo "$0: valgrind not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/before"
git -C "$here/.." archive "$before" ledger | tar -x -C "$tmp/before"
lib=/usr/lib/$(gcc -print-multiarch)
for v in before after; do
  if [ "$v" = before ]; then tree=$tmp/before; else tree=$after; fi
  gcc -std=c11 -O2 -DNDEBUG -D_GNU_SOURCE -I "$tree" -o "$tmp/$v.bin" \
    "$tree"/ledger/*.c "$here/pub11_cost.c" \
    "$lib/liburcu-memb.a" "$lib/liburcu-common.a" -lpthread
  for k in 1 2; do
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$v.$k" \
      "$tmp/$v.bin" $((k * n)) > /dev/null 2>&1
    callgrind_annotate --threshold=100 "$tmp/cg.$v.$k" 2> /dev/null |
      awk '/^ *[0-9,]+ .*:/ {
             ir = $1; gsub(/,/, "", ir)
             f = $0; sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", f)
             sub(/ \[.*\]$/, "", f); sub(/^[^ ]*:/, "", f)
             print ir "\t" f }' | sort -t "$(printf '\t')" -k2 > "$tmp/f.$v.$k"
  done
  total=$(awk -v a="$(awk '/^summary:/ {print $2}' "$tmp/cg.$v.1")" \
              -v b="$(awk '/^summary:/ {print $2}' "$tmp/cg.$v.2")" -v n="$n" \
              'BEGIN {printf "%.1f", (b - a) / n}')
  echo "$v ($([ "$v" = before ] && echo "$before" || echo "$after")): $total instructions per op"
  join -t "$(printf '\t')" -1 2 -2 2 "$tmp/f.$v.1" "$tmp/f.$v.2" |
    awk -F '\t' -v n="$n" '{d = ($3 - $2) / n; if (d > 0.5) printf "  %-40s %8.1f\n", $1, d}' |
    sort -k2 -nr
done
