#!/usr/bin/env bash
# Mutation testing of the C test suite: applies each mutant of
# tools/mutation/mutants.txt (one small change to ledger/, found by a unique
# text pattern, not a line number) to the working tree, builds and runs the
# mutant's kill suite, puts the file back, and prints a kill table.
#
# For each mutant, in order: the default build, then asan+ubsan, then tsan
# (each only while the mutant is still alive); within a configuration, the
# mutant's `tests:` one target at a time, stopping at the first that fails
# (a failed or timed-out test kills the mutant). A mutant that does not
# compile is reported NO BUILD, one whose pattern is missing or not unique
# NOT FOUND / AMBIGUOUS (re-target it: patterns are plain text, `\n` for a
# line break, searched in every file the `file:` glob names).
#
# Tests always run (--nocache_test_results): the disk cache may hold a pass
# of the very same mutant binary from an earlier sweep, and the concurrency
# tests deserve a fresh try. Compiles are still cached.
#
# The original file is copied aside before each change and restored on exit,
# on Ctrl-C and on error; a run killed with SIGKILL leaves
# .mutate-restore, which the next run restores first.
#
# Usage: tools/mutation/mutate.sh [--only REGEX] [--configs default,asan,tsan]
#                        [--timeout SECS] [--suite 'TARGET...'] [--check]
#                        [--out FILE] [--list] [bazel flags...]
#   --only RE     mutants whose id matches RE (grep -E)
#   --configs     which builds to try, in order (default: all three)
#   --timeout S   per test target (bazel --test_timeout; default 120)
#   --suite 'T'   targets run after each mutant's own tests (e.g. //tests/...)
#   --check       only check that every pattern occurs exactly once
#   --out FILE    also write the kill table (markdown) to FILE
#   --list        list the mutants and exit
#   --mutants F   another list (default tools/mutation/mutants.txt)
# Not in CI: a full sweep takes the better part of an hour on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/../.."

mutants_file=tools/mutation/mutants.txt
only=''
configs='default,asan,tsan'
timeout=120
suite=''
check_only=0
list_only=0
out=''
bazel_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --only) only=$2; shift ;;
    --configs) configs=$2; shift ;;
    --timeout) timeout=$2; shift ;;
    --suite) suite=$2; shift ;;
    --check) check_only=1 ;;
    --list) list_only=1 ;;
    --out) out=$2; shift ;;
    --mutants) mutants_file=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 0 ;;
    *) bazel_flags+=("$1") ;;
  esac
  shift
done

restore_marker=.mutate-restore
backup_dir=$(mktemp -d "${TMPDIR:-/tmp}/mutate.XXXXXX")

# ---- Restoring the tree ---------------------------------------------------------
# The marker names the file being mutated and its saved copy.
restore() {
  if [ -f "$restore_marker" ]; then
    local target saved
    read -r target saved <"$restore_marker"
    if [ -f "$saved" ]; then
      cp "$saved" "$target" && rm -f "$restore_marker"
    else
      echo "mutate.sh: cannot restore $target: $saved is gone; use git checkout -- $target" >&2
      return 1
    fi
  fi
}
cleanup() {
  restore
  if [ "${keep_logs:-0}" = 1 ]; then
    find "$backup_dir" -maxdepth 1 -type f -delete
    echo "mutate.sh: logs of the odd runs kept in $backup_dir/logs"
  else
    rm -rf "$backup_dir"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$check_only" = 0 ] && [ "$list_only" = 0 ]; then
  # One sweep at a time: a second would restore the first one's file.
  exec 9>.mutate-lock
  if ! flock -n 9; then
    echo "mutate.sh: another sweep is running in this tree (.mutate-lock)" >&2
    exit 2
  fi
  if [ -f "$restore_marker" ]; then
    echo "mutate.sh: an earlier run was interrupted: restoring $(cut -d' ' -f1 "$restore_marker")"
    restore || exit 1
  fi
else
  restore_marker=/dev/null/none   # --check and --list touch no file
fi

# ---- Reading the mutant list ------------------------------------------------------
ids=() descs=() files=() finds=() repls=() tests=() expects=()
cur=-1
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in
    '#'*|'') continue ;;
    '@ '*)
      cur=$((cur + 1))
      rest=${line#@ }
      ids[$cur]=${rest%% *}
      descs[$cur]=$(sed 's/^[^ ]* *//' <<<"$rest")
      files[$cur]='' finds[$cur]='' repls[$cur]='' tests[$cur]='' expects[$cur]=''
      ;;
    file:*) files[$cur]=$(sed 's/^file: *//' <<<"$line") ;;
    find:*) finds[$cur]=${line#find: } ;;
    repl:*) repls[$cur]=${line#repl:}; repls[$cur]=${repls[$cur]# } ;;
    tests:*) tests[$cur]=$(sed 's/^tests: *//' <<<"$line") ;;
    expect:*) expects[$cur]=$(sed 's/^expect: *//' <<<"$line") ;;
    *) echo "mutate.sh: $mutants_file: cannot read: $line" >&2; exit 2 ;;
  esac
done <"$mutants_file"
n_mut=$((cur + 1))

unescape() { local s=$1; printf '%s' "${s//\\n/$'\n'}"; }

# Prints "N FILE": how many times the pattern occurs in all files of the glob
# together, and the (last) file it occurs in.
locate() {
  local glob=$1 pat total=0 where='' f c
  pat=$(unescape "$2")
  for f in $glob; do
    [ -f "$f" ] || continue
    c=$(FIND="$pat" perl -0777 -ne '$c = () = /\Q$ENV{FIND}\E/g; print $c' "$f")
    if [ "$c" -gt 0 ]; then total=$((total + c)); where=$f; fi
  done
  echo "$total ${where:--}"
}

flags_for() {
  case "$1" in
    default) ;;
    asan) echo "--config=asan --config=ubsan" ;;
    tsan) echo "--config=tsan" ;;
    *) echo "mutate.sh: unknown configuration $1" >&2; exit 2 ;;
  esac
}

# ---- Running ------------------------------------------------------------------------
results=()
killers=()
whys=()
targets=()
keep_logs=0
secs=()
log_dir=$backup_dir/logs
mkdir -p "$log_dir"

for ((i = 0; i < n_mut; i++)); do
  id=${ids[$i]}
  if [ -n "$only" ] && ! grep -qE -- "$only" <<<"$id"; then continue; fi
  if [ "$list_only" = 1 ]; then
    printf '%-24s %s\n%24s file %s; tests %s; expect %s\n' "$id" "${descs[$i]}" '' \
      "${files[$i]}" "${tests[$i]}" "${expects[$i]}"
    continue
  fi
  read -r count target < <(locate "${files[$i]}" "${finds[$i]}")
  if [ "$count" = 0 ]; then
    results[$i]='NOT FOUND'
    killers[$i]="pattern not in ${files[$i]}: $(head -c 60 <<<"${finds[$i]}")"
    echo "[$id] NOT FOUND: the pattern is in no file of ${files[$i]}; re-target it"
    continue
  elif [ "$count" != 1 ]; then
    results[$i]='AMBIGUOUS'
    killers[$i]="pattern occurs $count times in ${files[$i]}"
    echo "[$id] AMBIGUOUS: the pattern occurs $count times in ${files[$i]}; lengthen it"
    continue
  fi
  if [ "$check_only" = 1 ]; then
    results[$i]='FOUND'
    killers[$i]=$target
    echo "[$id] found in $target"
    continue
  fi

  results[$i]=PENDING
  targets[$i]=$target
  secs[$i]=0
done
[ "$list_only" = 1 ] && exit 0

# Applies mutant i to its file (restore puts it back). False if the change
# left the file as it was.
apply() {
  local i=$1 target=${targets[$1]} saved
  saved=$backup_dir/$(basename "$target").${ids[$i]}
  cp "$target" "$saved"
  echo "$target $saved" >"$restore_marker"
  FIND=$(unescape "${finds[$i]}") REPL=$(unescape "${repls[$i]}") \
    perl -0777 -i -pe 's/\Q$ENV{FIND}\E/$ENV{REPL}/' "$target"
  ! cmp -s "$target" "$saved"
}

# Configuration by configuration (Bazel keeps one analysis cache: switching
# configurations for every mutant would discard it each time), each mutant
# still alive: apply, run its tests one at a time until one fails, restore.
IFS=, read -ra cfgs <<<"$configs"
for cfg in "${cfgs[@]}"; do
  flags_for "$cfg" >/dev/null || exit 2
  for ((i = 0; i < n_mut; i++)); do
    case "${results[$i]:-}" in PENDING|SURVIVED) ;; *) continue ;; esac
    id=${ids[$i]}
    t0=$(date +%s)
    if ! apply "$i"; then
      restore
      results[$i]='NO CHANGE'
      echo "[$id] the change left ${targets[$i]} as it was"
      continue
    fi
    verdict=SURVIVED
    killer=''
    for tgt in ${tests[$i]} $suite; do
      log=$log_dir/$id.$cfg.$(tr '/:' '__' <<<"$tgt").log
      # The Spin model check does not build the C (and takes minutes).
      filters=(--test_tag_filters=-model)
      # shellcheck disable=SC2046
      timeout $((timeout * 3 + 600)) bazel test $(flags_for "$cfg") "${filters[@]}" \
        --test_timeout="$timeout" --test_output=errors --test_summary=terse \
        --nocache_test_results \
        "${bazel_flags[@]}" -- "$tgt" >"$log" 2>&1
      rc=$?
      case $rc in
        0) ;;
        3)
          if grep -q 'TIMEOUT' "$log"; then verdict=KILLED-TIMEOUT; else verdict=KILLED; fi
          killer="$cfg $tgt"
          ;;
        1)
          if grep -qE "no such (target|package)" "$log"; then
            echo "[$id] $cfg: $tgt does not exist here: skipped"
            continue
          fi
          verdict='NO BUILD'
          killer="$cfg: $(grep -m1 -E 'error:' "$log" | tr -d '|' | head -c 100)"
          ;;
        *)
          verdict="ERROR rc=$rc"
          killer="$cfg $tgt"
          ;;
      esac
      [ "$verdict" = SURVIVED ] || break
    done
    restore
    t1=$(date +%s)
    results[$i]=$verdict
    killers[$i]=$killer
    secs[$i]=$((${secs[$i]} + t1 - t0))
    echo "[$id] $cfg: $verdict ${killer:+by $killer} ($((t1 - t0)) s)"
    if [ "${verdict#KILLED}" != "$verdict" ]; then
      # What the failing test said first, for the record.
      tl=$(sed -n 's/.*(see \(.*test\.log\)).*/\1/p' "$log" | head -1)
      if [ -n "$tl" ] && [ -f "$tl" ]; then
        whys[$i]=$(grep -m1 -E '\.c:[0-9]+: |CHECK|ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|runtime error|Assertion|abort|FAIL|TIMEOUT' \
          "$tl" | tr -d '|`' | sed 's/^ *//' | cut -c1-120)
        if [ -z "${whys[$i]}" ]; then   # a crash: the test's last words
          whys[$i]=$(grep -v '^ *$' "$tl" | tail -1 | tr -d '|`' | cut -c1-120)
        fi
      fi
      echo "[$id]   ${whys[$i]:-}"
    elif [ "$verdict" != SURVIVED ]; then
      echo "[$id]   log: $log (kept)"
      keep_logs=1
    fi
  done
done

# ---- The kill table ---------------------------------------------------------------
table() {
  echo "| id | mutant | expected killer | result | killed by | first failure | s |"
  echo "|---|---|---|---|---|---|---|"
  for ((i = 0; i < n_mut; i++)); do
    [ -n "${results[$i]:-}" ] || continue
    printf '| %s | %s | %s | %s | %s | %s | %s |\n' "${ids[$i]}" "${descs[$i]}" \
      "${expects[$i]}" "${results[$i]}" "${killers[$i]:-}" "${whys[$i]:-}" "${secs[$i]:-}"
  done
}
echo
table
if [ -n "$out" ]; then table >"$out"; fi
k=0 s=0 o=0
for ((i = 0; i < n_mut; i++)); do
  case "${results[$i]:-}" in
    KILLED*) k=$((k + 1)) ;;
    SURVIVED) s=$((s + 1)) ;;
    ''|FOUND) ;;
    *) o=$((o + 1)) ;;
  esac
done
echo
echo "killed $k, survived $s, other $o (not found, ambiguous, no build, no change, error)"
[ $o -eq 0 ] || exit 1
