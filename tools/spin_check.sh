#!/usr/bin/env bash
# Runs a table of Spin model checks (ledger/model/runs.txt,
# cuda/model/runs.txt): each line one run, its own spin -a / gcc / pan, on a
# model beside the table, exhaustively, for small bounds. Three kinds of run:
#   pass   a configuration of the real protocol: no assertion violation, no
#          invalid end state, search complete;
#   fail   a mutant (BUG_*): Spin must find an assertion violation (the
#          assertions can fail);
#   reach  a reachability probe (PROBE_*, an assert(0) on the probed path):
#          Spin must reach it (the configurations exercise what they claim
#          to).
# Exit status 0 when every run came out as expected.
#
# The table: one run a line, "EXPECT MODEL [-DNAME[=V]]...", EXPECT pass,
# fail or reach; a line "deep EXPECT MODEL ..." runs with --deep only; a
# line "O1 MODEL..." compiles the pass runs of those models with -O1 (their
# searches are large; the others' pan.c optimises slowly and searches
# little); '#' starts a comment. Every *.pml beside the table is copied into
# each run's directory (models include each other).
#
# Usage: tools/spin_check.sh TABLE [--deep] [--jobs N] [--only REGEX]
#                            [-DNAME]... [--keep] [--list]
#   --deep     also the table's deep runs (more memory: pan's limit 14 GB)
#   --jobs N   runs at once (default 2)
#   --only RE  only the runs whose line (EXPECT MODEL DEFINES, one space
#              apart, as --list prints them) matches RE (e.g. --only EER,
#              --only ^pass)
#   -DNAME     add a define to every run (e.g. -DBUG_ABANDON_STORE --only
#              ^pass to watch a mutant fail everywhere, with its
#              counterexample)
#   --keep     keep the work directory (pan output, trails) and print it
#   --list     print the runs selected (defines added) and exit: runs nothing
# The model directories' check.sh call this with their table. Needs spin
# and gcc on PATH. Works under $TEST_TMPDIR when Bazel sets it.
set -uo pipefail

usage() {
  echo "usage: $0 TABLE [--deep] [--jobs N] [--only REGEX] [-DNAME]... [--keep] [--list]" >&2
  exit 2
}
[ $# -ge 1 ] && [ -f "$1" ] || usage
table=$1
shift
here=$(cd "$(dirname "$table")" && pwd)
name=$(basename "$(dirname "$here")")/$(basename "$here") # e.g. ledger/model
deep=0
jobs=2
only=''
keep=0
list=0
extra=''
while [ $# -gt 0 ]; do
  case "$1" in
    --deep) deep=1 ;;
    --jobs) jobs=$2; shift ;;
    --only) only=$2; shift ;;
    --keep) keep=1 ;;
    --list) list=1 ;;
    -D[A-Za-z_]*) extra+=" $1" ;;
    *) usage ;;
  esac
  shift
done

# The runs (EXPECT MODEL DEFINES, one space apart) and the -O1 models.
runs=''
o1=' '
while read -r first rest; do
  case "$first" in
    '' | '#'*) continue ;;
    O1) o1+="$rest " ;;
    deep) [ "$deep" = 1 ] && runs+="$rest"$'\n' ;;
    pass | fail | reach) runs+="$first $rest"$'\n' ;;
    *) echo "spin_check.sh: $table: bad line: $first $rest" >&2; exit 2 ;;
  esac
done < <(sed 's/#.*//; s/[[:space:]][[:space:]]*/ /g; s/ $//' "$table")
if [ -n "$only" ]; then
  runs=$(printf '%s' "$runs" | grep -E -- "$only" || true)
fi
runs=$(printf '%s\n' "$runs" | sed '/^$/d')
if [ -n "$runs" ] && [ -n "$extra" ]; then
  runs=$(printf '%s\n' "$runs" | sed "s/\$/$extra/")
fi
if [ -z "$runs" ]; then
  echo "spin_check.sh: no run selected" >&2
  exit 2
fi
if [ "$list" = 1 ]; then
  printf '%s\n' "$runs"
  exit 0
fi

for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "spin_check.sh: $tool not found on PATH ($PATH); install it (Debian: apt-get install $tool)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/${name//\//_}_spin.XXXXXX")
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
for f in "$here"/*.pml; do
  cp -L "$f" "$work/"
done

# One run: spin -a, gcc, pan in its own directory. Prints one result line;
# writes the verdict to $dir/verdict (ok / BAD).
one() {
  local n=$1 expect=$2 model=$3
  shift 3
  local dir="$work/run$n"
  mkdir -p "$dir"
  cp "$work"/*.pml "$dir/"
  cd "$dir" || return
  local opt=-O0 memlim=3072
  if [ "$expect" = pass ] && [[ "$o1" == *" $model "* ]]; then opt=-O1; fi
  if [ "$deep" = 1 ]; then memlim=14336; fi
  local t0 t1 verdict=BAD why=''
  t0=$(date +%s)
  if ! spin -a "$@" "$model" >spin.out 2>&1; then
    why="spin -a failed: $(tail -3 spin.out | tr '\n' ' ')"
  elif ! gcc $opt -w -DSAFETY -DCOLLAPSE -DMEMLIM=$memlim -o pan pan.c >gcc.out 2>&1; then
    why="gcc failed: $(tail -3 gcc.out | tr '\n' ' ')"
  else
    ./pan -m1000000 -w24 >pan.out 2>&1
    local errors incomplete
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' pan.out | tail -1)
    incomplete=0
    if grep -qE 'out of memory|MEMLIM|max search depth too small|Search not completed' pan.out &&
       [ "${errors:-x}" = 0 ]; then
      incomplete=1
    fi
    case "$expect" in
      pass)
        if [ "${errors:-x}" = 0 ] && [ $incomplete = 0 ]; then verdict=ok; fi
        why=$(grep -m1 -E 'pan:[0-9]+:|out of memory|MEMLIM|max search depth' pan.out) ;;
      fail)
        if grep -q 'assertion violated' pan.out && ! grep -q 'assertion violated 0 ' pan.out; then
          verdict=ok
        fi
        why=$(grep -m1 -E 'pan:[0-9]+:' pan.out || echo 'no assertion violation found') ;;
      reach)
        if grep -q 'assertion violated 0 ' pan.out; then verdict=ok; fi
        why=$(grep -m1 -E 'pan:[0-9]+:' pan.out || echo 'probe never reached') ;;
    esac
  fi
  t1=$(date +%s)
  local states depth secs mem
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' pan.out 2>/dev/null | head -1)
  depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' pan.out 2>/dev/null | head -1)
  secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' pan.out 2>/dev/null | head -1)
  mem=$(sed -n 's/^ *\([0-9.]*\)\s*total actual memory usage.*/\1/p' pan.out 2>/dev/null | head -1)
  printf '%-4s %-5s %-14s %-40s states=%-10s depth=%-4s pan=%-7s %5sMB  (%ss)  %s\n' \
    "$verdict" "$expect" "$model" "$*" "${states:--}" "${depth:--}" "${secs:--}s" \
    "${mem%.*}" "$((t1 - t0))" \
    "$([ "$expect" = pass ] && [ $verdict = ok ] || echo "${why:-}")"
  echo "$verdict" >verdict
  if [ "$verdict" = BAD ] && [ -f "$model.trail" ]; then
    # The counterexample, shared steps only, for the log.
    # (one line per step: the first statement of each atomic step)
    spin -t -p "$@" "$model" 2>&1 | grep -E '^ *[0-9]+:\s+proc' |
      awk '$1 != last { print; last = $1 }' | tail -60 >trail.txt
    echo "---- $model $*: last steps of the counterexample (all of it: spin -t -p $* $model, with --keep) ----"
    cat trail.txt
  fi
}

echo "spin check of $name: $(spin -V | head -1); $(printf '%s\n' "$runs" | wc -l) runs, $jobs at a time, in $work"
n=0
running=0
while read -r expect model defs; do
  [ -n "$expect" ] || continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  one "$n" "$expect" "$model" $defs &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done <<<"$runs"
wait

bad=0
total=0
for v in "$work"/run*/verdict; do
  [ -e "$v" ] || continue
  total=$((total + 1))
  [ "$(cat "$v")" = ok ] || bad=$((bad + 1))
done
if [ "$total" -ne "$n" ]; then
  echo "spin_check.sh: $((n - total)) runs left no verdict" >&2
  bad=$((bad + n - total))
fi
[ "$keep" = 1 ] && echo "work directory kept: $work"
if [ "$bad" -ne 0 ]; then
  echo "FAILED: $bad of $n runs not as expected"
  exit 1
fi
echo "OK: $n runs as expected (pass: no violation; fail: mutant caught; reach: probe reached)"
