#!/bin/sh
# CI: bench/coherence_sim.py counts what it says on traces written by hand
# (lackey's format), and query_cost's modes run (tiny; no valgrind):
#  1. two agents take turns making one locked add to one word (lackey: an L,
#     then an M of the same address by the same instruction): one miss per
#     op after the first touch, not two (the sim counted two before the
#     thirteenth session);
#  2. two agents take turns loading the word and then storing it (two
#     instructions): two misses per op (the load's, the store's upgrade);
#  3. query_cost holds, reader and shared complete (their CK checks every
#     ledger call); a missing argument and a release interval of 0 are
#     refused with exit 2.
# Usage: coherence_sim_test.sh COHERENCE_SIM_PY QUERY_COST
set -eu
sim=$1 qc=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}
cat > "$tmp/agents.txt" <<'A'
agents: marker 0x10000 stack 0x7f0000000000 tls 0x7e0000000000
agents: thread 0 streams 0x40000 0x40000
agents: thread 1 streams 0x40000 0x40000
A
# Marker lines: 0x10000 + 64 * (t + 1) for thread t; the end (-1) at 0x10000.
trace() { # N_ROUNDS FORM
  i=0
  while [ "$i" -lt "$1" ]; do
    for t in 0 1; do
      printf ' S %x,4\n' $((0x10000 + 64 * (t + 1)))
      if [ "$2" = rmw ]; then
        printf 'I  00401000,5\n L 00050000,8\n M 00050000,8\n'
      else
        printf 'I  00401000,5\n L 00050000,8\nI  00401005,5\n S 00050000,8\n'
      fi
    done
    i=$((i + 1))
  done
  printf ' S %x,4\n' $((0x10000))
}
fail=0
check() { # FORM WANT
  trace 100 "$1" | python3 "$sim" "$tmp/agents.txt" /bin/true > "$tmp/out.txt"
  got=$(sed -n "s/^threads' misses per op: charged to other threads \([0-9.]*\).*/\1/p" "$tmp/out.txt")
  # 200 ops; the first op touches the line first (no miss): 199 / 200 ops
  # miss once (rmw) or twice (load, store).
  if [ "$got" = "$2" ]; then
    echo "ok: $1: $got misses per op"
  else
    echo "FAIL: $1: $got misses per op, want $2"; cat "$tmp/out.txt"; fail=1
  fi
}
check rmw 0.995
check load-store 1.990
for args in "holds 100 vector 10" "reader 2 1 5" "shared 2 16 200" "shared 4 4 50"; do
  # shellcheck disable=SC2086
  if "$qc" $args > "$tmp/qc.txt" 2>&1; then
    echo "ok: query_cost $args: $(head -1 "$tmp/qc.txt")"
  else
    echo "FAIL: query_cost $args"; cat "$tmp/qc.txt"; fail=1
  fi
done
for args in "shared" "shared 2 0 10"; do
  set +e
  # shellcheck disable=SC2086
  "$qc" $args > /dev/null 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 2 ]; then echo "ok: query_cost $args: refused, exit 2"
  else echo "FAIL: query_cost $args: exit $rc, want 2"; fail=1; fi
done
exit $fail
