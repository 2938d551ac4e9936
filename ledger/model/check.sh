#!/usr/bin/env bash
# Model-checks the ring protocol of ledger/ with Spin (ring.pml, wait.pml,
# ring_common.pml; destroy_sb.pml, own_sb.pml, unlink_sb.pml and extend_mp.pml
# for the memory orders of the destroy handshake, owned streams' reservation
# and its revocation (with OWN_PUB, the owner's plain publication), the registry's deferred unlink and a growing ring's
# publication, pub_sb.pml for the publication on a stream with one
# publisher, and spare.pml for the spare of segment.c,
# beside this script), exhaustively, for small
# bounds. Three kinds of run, each its own spin -a / gcc / pan:
#   pass   a configuration of the real protocol: no assertion violation, no
#          invalid end state, search complete;
#   fail   a mutant (BUG_*): Spin must find an assertion violation (the
#          assertions can fail);
#   reach  a reachability probe (PROBE_*): Spin must reach the probed rare
#          path (the configurations exercise what they claim to).
# Exit status 0 when every run came out as expected.
#
# Usage: ledger/model/check.sh [--deep] [--jobs N] [--only REGEX] [-DNAME]... [--keep]
#   --deep     also CFG_EE3R (140M states: 8.3 GB and ~7 min) and CFG_FFF
#              (21M states, 1 GB, ~90 s: two fetch_adds pending at once; and
#              with FAST_AS_C, the C's check without its first-segment test),
#              and own_sb.pml with three owner enqueues and two revokers
#              (21M states, 2.4 GB, ~1 min)
#   --jobs N   runs at once (default 2)
#   --only RE  only the runs whose line matches RE (e.g. --only EER, --only ^pass)
#   -DNAME     add a define to every run (e.g. -DBUG_ABANDON_STORE --only ^pass
#              to watch a mutant fail everywhere, with its counterexample)
#   --keep     keep the work directory (pan output, trails) and print it
# Two defines switch a shortcut off so that the configurations keep reaching
# what it hides: -DNO_GROWAHEAD (the reserve without the growth ahead: with two
# enqueuers the growth keeps the reserve's edge out of reach) and -DNO_PREV
# (seg_of_reserved walks from head without trying tailseg's prev first: the
# walk's next step needs tailseg two segments past seq's, beyond these bounds).
# Needs spin and gcc on PATH. Works under $TEST_TMPDIR when Bazel sets it.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
deep=0
jobs=2
only=''
keep=0
extra=''
while [ $# -gt 0 ]; do
  case "$1" in
    --deep) deep=1 ;;
    --jobs) jobs=$2; shift ;;
    --only) only=$2; shift ;;
    --keep) keep=1 ;;
    -D[A-Za-z_]*) extra+=" $1" ;;
    *) echo "usage: $0 [--deep] [--jobs N] [--only REGEX] [-DNAME]... [--keep]" >&2; exit 2 ;;
  esac
  shift
done

for tool in spin gcc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check.sh: $tool not found on PATH ($PATH); install it (Debian: apt-get install $tool)" >&2
    exit 1
  fi
done

work=$(mktemp -d "${TEST_TMPDIR:-${TMPDIR:-/tmp}}/ring_model.XXXXXX")
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work"; fi; }
trap cleanup EXIT
for f in ring_common.pml ring.pml wait.pml destroy_sb.pml own_sb.pml unlink_sb.pml extend_mp.pml spare.pml pub_sb.pml; do
  cp -L "$here/$f" "$work/$f"
done

# expect  model     defines
runs=$(cat <<'EOF'
pass  ring.pml  -DCFG_EER
pass  ring.pml  -DCFG_ERR
pass  ring.pml  -DCFG_EED
pass  ring.pml  -DCFG_ERD
pass  ring.pml  -DCFG_ERQ
pass  ring.pml  -DCFG_ERR5
pass  ring.pml  -DCFG_EEQ
pass  ring.pml  -DCFG_EE3
pass  ring.pml  -DCFG_E3D
pass  ring.pml  -DCFG_EE5R
pass  ring.pml  -DCFG_EE3 -DNO_PREV
pass  wait.pml  -DWCFG_T
pass  wait.pml  -DWCFG_G
pass  wait.pml  -DWCFG_C
pass  wait.pml  -DWCFG_D
pass  wait.pml  -DWCFG_S
pass  ring.pml  -DCFG_EEC
pass  ring.pml  -DCFG_EET
pass  destroy_sb.pml
pass  destroy_sb.pml  -DSB_SINGLE
pass  own_sb.pml
pass  own_sb.pml  -DOWN_RELEASER
pass  own_sb.pml  -DOWN_TWO_REVOKERS
pass  own_sb.pml  -DOWN_PUB
pass  own_sb.pml  -DOWN_PUB -DOWN_RELEASER
pass  pub_sb.pml
pass  unlink_sb.pml
pass  extend_mp.pml
pass  spare.pml
pass  ring.pml  -DCFG_FF
pass  ring.pml  -DCFG_FFR
pass  ring.pml  -DCFG_FFD
pass  ring.pml  -DCFG_FF -DNO_GROWAHEAD
fail  ring.pml  -DCFG_EER -DBUG_ABANDON_STORE
fail  ring.pml  -DCFG_EER -DBUG_HEAD_NO_RECHECK
fail  ring.pml  -DCFG_EER -DBUG_NO_TAILSEG_CHECK
fail  ring.pml  -DCFG_EER -DBUG_EXTEND_NO_ADVANCE
fail  ring.pml  -DCFG_ERR5 -DBUG_RESOLVE_REORDER
fail  ring.pml  -DCFG_EED -DBUG_DESTROY_ORDER
fail  ring.pml  -DCFG_EER -DBUG_NO_RESET
fail  ring.pml  -DCFG_EER -DBUG_RESET_AFTER_RESOLVE
fail  ring.pml  -DCFG_E3D -DBUG_NO_DIRTY
fail  wait.pml  -DWCFG_G -DBUG_FRAME_EARLY_RESOLVE
fail  wait.pml  -DWCFG_G -DBUG_POP_ANY_SEG
fail  wait.pml  -DWCFG_G -DBUG_FRAME_KEEP_SHORT
fail  ring.pml  -DCFG_EEC -DBUG_LOSER_FREE_NOW
fail  ring.pml  -DCFG_EEC -DBUG_LOSER_POOL_NOW
fail  ring.pml  -DCFG_EEC -DBUG_POP_NO_RCU
fail  ring.pml  -DCFG_ERR5 -DBUG_POOL_LIMIT_NO_SIZE
fail  ring.pml  -DCFG_EET -DBUG_TRIM_FREE_NOW
fail  destroy_sb.pml  -DBUG_SB_DESTROY_CAS
fail  destroy_sb.pml  -DBUG_SB_TAIL_LOAD
fail  destroy_sb.pml  -DBUG_SB_RESERVE_CAS
fail  destroy_sb.pml  -DBUG_SB_DESTROYED_LOAD
fail  destroy_sb.pml  -DSB_SINGLE -DBUG_SB_NO_MEMBARRIER
fail  own_sb.pml  -DBUG_OWN_NO_MEMBARRIER
fail  own_sb.pml  -DBUG_OWN_NO_R1
fail  own_sb.pml  -DBUG_OWN_NO_R2
fail  own_sb.pml  -DBUG_OWN_CONTESTED_UNDECIDED
fail  own_sb.pml  -DBUG_OWN_DESTROY_NO_BARRIER
fail  own_sb.pml  -DBUG_OWN_EXTEND_TO_SHARED
fail  own_sb.pml  -DOWN_PUB -DOWN_RELEASER -DBUG_PUB9_BY_MODE
fail  own_sb.pml  -DOWN_PUB -DOWN_RELEASER -DBUG_PUB9_NO_BASE
fail  own_sb.pml  -DOWN_PUB -DOWN_RELEASER -DBUG_PUB9_INSTALLER_CAS
fail  pub_sb.pml  -DBUG_PUB_NO_MEMBARRIER
fail  pub_sb.pml  -DBUG_PUB_NO_CAS
fail  pub_sb.pml  -DBUG_PUB_OVERWRITE
fail  unlink_sb.pml  -DBUG_SETTLE_NO_FENCE
fail  unlink_sb.pml  -DBUG_PUSHER_NO_FENCE
fail  unlink_sb.pml  -DBUG_HOLDER_NO_FENCE
fail  extend_mp.pml  -DBUG_MP_TAIL_END
fail  spare.pml  -DBUG_SPARE_NO_CLAIM
fail  spare.pml  -DBUG_SPARE_TAKE_CLAIM
fail  spare.pml  -DBUG_SPARE_DROP_NOW
fail  spare.pml  -DBUG_SPARE_ASIDE_NOW
fail  ring.pml  -DCFG_FF -DNO_GROWAHEAD -DBUG_RESERVE_SHORT
fail  ring.pml  -DCFG_FF -DBUG_FAST_FIRST_SEG
fail  ring.pml  -DCFG_FF -DBUG_GROW_NO_CLAIM
reach ring.pml  -DCFG_EER -DPROBE_ABANDONED
reach ring.pml  -DCFG_EED -DPROBE_RETRACTED
reach ring.pml  -DCFG_EER -DPROBE_LOSER
reach ring.pml  -DCFG_EER -DPROBE_HELP
reach ring.pml  -DCFG_EER -DPROBE_WALK
reach ring.pml  -DCFG_EE5R -DNO_PREV -DPROBE_WALK_NEXT
reach ring.pml  -DCFG_E3D -DPROBE_SKIP_RETIRED
reach ring.pml  -DCFG_EER -DPROBE_TAILSEG_DEFER
reach ring.pml  -DCFG_EER -DPROBE_RETIRE_HELD
reach ring.pml  -DCFG_E3D -DPROBE_DIRTY
reach wait.pml  -DWCFG_T -DPROBE_FRAME
reach wait.pml  -DWCFG_G -DPROBE_FRAME_PIN
reach wait.pml  -DWCFG_C -DPROBE_NESTED
reach wait.pml  -DWCFG_T -DPROBE_WAIT_ABANDONED
reach ring.pml  -DCFG_EEC -DPROBE_LOSER
reach ring.pml  -DCFG_EEC -DPROBE_LOSER_POOLED
reach ring.pml  -DCFG_EEC -DPROBE_LOSER_HELD
reach ring.pml  -DCFG_EEC -DPROBE_POP_RACE
reach ring.pml  -DCFG_EEC -DPROBE_CREATE_POOLED
reach ring.pml  -DCFG_ERR5 -DPROBE_POP_REUSE
reach ring.pml  -DCFG_ERR5 -DPROBE_POOL_FULL
reach ring.pml  -DCFG_EET -DPROBE_TRIM_HELD
reach destroy_sb.pml  -DPROBE_SB_STALE
reach destroy_sb.pml  -DPROBE_SB_RETRACT
reach destroy_sb.pml  -DPROBE_SB_ABANDON
reach destroy_sb.pml  -DSB_SINGLE -DPROBE_SB_STALE
reach destroy_sb.pml  -DSB_SINGLE -DPROBE_SB_RETRACT
reach destroy_sb.pml  -DSB_SINGLE -DPROBE_SB_ABANDON
reach own_sb.pml  -DPROBE_OWN_CONTESTED
reach own_sb.pml  -DPROBE_OWN_LOST
reach own_sb.pml  -DPROBE_OWN_HELP
reach own_sb.pml  -DPROBE_OWN_STALE
reach own_sb.pml  -DOWN_PUB -DOWN_RELEASER -DPROBE_PUB9_ASK_T1
reach own_sb.pml  -DOWN_PUB -DOWN_RELEASER -DPROBE_PUB9_TAKEBACK
reach pub_sb.pml  -DPROBE_PUB_TAKEBACK
reach pub_sb.pml  -DPROBE_PUB_ADOPT
reach pub_sb.pml  -DPROBE_PUB_LATER
reach pub_sb.pml  -DPROBE_PUB_BOTH
reach unlink_sb.pml  -DPROBE_UL_HANDOFF
reach unlink_sb.pml  -DPROBE_UL_STALE
reach extend_mp.pml  -DPROBE_MP_STALE
reach spare.pml  -DPROBE_SPARE_CLAIM_SEEN
reach spare.pml  -DPROBE_SPARE_POOLED_HELD
reach ring.pml  -DCFG_FF -DPROBE_FAST_FULL
reach ring.pml  -DCFG_FF -DPROBE_RESERVE_EXTEND
reach ring.pml  -DCFG_FF -DPROBE_GROW_LATE
reach ring.pml  -DCFG_FF -DPROBE_GROW_RACE
reach ring.pml  -DCFG_FF -DPROBE_PREV
EOF
)
if [ "$deep" = 1 ]; then
  runs+=$'\n'"pass  ring.pml  -DCFG_EE3R"
  runs+=$'\n'"pass  ring.pml  -DCFG_FFF"
  runs+=$'\n'"pass  ring.pml  -DCFG_FFF -DFAST_AS_C"
  runs+=$'\n'"reach ring.pml  -DCFG_FFF -DPROBE_FAST_FULL"
  runs+=$'\n'"pass  own_sb.pml  -DOWN_OPS=3 -DOWN_TWO_REVOKERS"
  runs+=$'\n'"pass  own_sb.pml  -DOWN_PUB -DOWN_TWO_REVOKERS -DOWN_RELEASER"
fi
if [ -n "$only" ]; then
  runs=$(printf '%s\n' "$runs" | grep -E -- "$only" || true)
fi
if [ -z "$runs" ]; then
  echo "check.sh: no run selected" >&2
  exit 2
fi

# One run: spin -a, gcc, pan in its own directory. Prints one result line;
# writes the verdict to $dir/verdict (ok / BAD).
one() {
  local n=$1 expect=$2 model=$3
  shift 3
  local dir="$work/run$n"
  mkdir -p "$dir"
  cp "$work"/*.pml "$dir/"
  cd "$dir" || return
  # -O1 pays off for the large searches of ring.pml; wait.pml's pan.c takes
  # minutes to optimise and its searches are small; mutants and probes stop
  # early.
  local opt=-O0 memlim=3072
  if [ "$expect" = pass ] && { [ "$model" = ring.pml ] || [ "$model" = spare.pml ] || [ "$model" = own_sb.pml ]; }; then opt=-O1; fi
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

echo "ring model check: $(spin -V | head -1); $(printf '%s\n' "$runs" | wc -l) runs, $jobs at a time, in $work"
n=0
running=0
while read -r expect model defs; do
  [ -n "$expect" ] || continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  one "$n" "$expect" "$model" $defs $extra &
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
  total=$((total + 1))
  [ "$(cat "$v")" = ok ] || bad=$((bad + 1))
done
if [ "$total" -ne "$n" ]; then
  echo "check.sh: $((n - total)) runs left no verdict" >&2
  bad=$((bad + n - total))
fi
[ "$keep" = 1 ] && echo "work directory kept: $work"
if [ "$bad" -ne 0 ]; then
  echo "FAILED: $bad of $n runs not as expected"
  exit 1
fi
echo "OK: $n runs as expected (pass: no violation; fail: mutant caught; reach: probe reached)"
