#!/usr/bin/env bash
# Issue 11, round 2: the ledger before and after this round's changes, side
# by side in one run, with the mutex design as each run's yardstick; for the
# GPU host (16 cores, H200). What changed:
#  - the release engine enters one RCU read-side section fewer per fired
#    wait (ledger/release.c, POPPING A FRAME): moves the serving workload
#    (waits), should leave private and shared (no waits) where they were;
#  - the optional vector index (ldg_ledger_index_vectors, ledger/vindex.c):
#    off by default, so the rows above do not have it; measured apart, on
#    the "after" binary only: the holds_vector miss at 1 k / 16 k / 128 k
#    pending without and with it (holds-*.log), and what it costs one
#    thread on a private stream ("private+index" rows, interleaved with the
#    others).
# Also prints atomics_bench (the cost of one locked read-modify-write on the
# host, the unit of RESULTS.md's accounting). About 90 s on 16 cores.
#
# Build both sets of binaries here (tools/gpu_build.sh; the "before" ones
# from main's commit 7c73b4e in a git worktree):
#   git worktree add --detach ../i11-before 7c73b4e
#   cp .bazelrc.user ../i11-before/ 2>/dev/null   # the shared disk cache
#   (cd ../i11-before && tools/gpu_build.sh) && rm -rf gpu-bin-before &&
#     cp -r ../i11-before/gpu-bin gpu-bin-before
#   tools/gpu_build.sh                             # gpu-bin: this branch
#   (cd ../i11-before && bazel shutdown) && git worktree remove ../i11-before
# Then on the host, from the repository root (device tool: carry gpu-bin and
# gpu-bin-before):
#   bash bench/issue11_ab.sh gpu-bin-before gpu-bin $OUT/ab
# Writes OUT/host.txt, OUT/{before,after}-{serving,private,shared}-N.log,
# OUT/index-private-N.log, OUT/holds-{plain,index,index8}.log, OUT/atomics.log and
# OUT/summary.txt (the tables for RESULTS.md).
# --quick: 0.2 s rows, threads 1,2, one round (a check of the script).
set -uo pipefail

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
if [ $# -ne 3 ]; then
  echo "usage: $0 [--quick] BEFORE_BIN_DIR AFTER_BIN_DIR OUT_DIR" >&2
  exit 2
fi
before=$(cd "$1" && pwd) || exit 2
after=$(cd "$2" && pwd) || exit 2
out=$3
mkdir -p "$out"
out=$(cd "$out" && pwd)
for d in "$before" "$after"; do
  [ -x "$d/ledger_bench" ] || { echo "$0: no $d/ledger_bench" >&2; exit 2; }
done

secs=0.5
rounds=3
threads=1,2,4,8,16
iters=20000000
if [ $quick -eq 1 ]; then
  secs=0.2
  rounds=1
  threads=1,2
  iters=2000000
fi
status=0

{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(hostname)"
  echo "cpus:    $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  echo "kernel:  $(uname -r)"
  command -v nvidia-smi > /dev/null && nvidia-smi -L
  for d in "$before" "$after"; do
    echo "--- $d"
    [ -f "$d/BUILD_INFO.txt" ] && sed 's/^/build:   /' "$d/BUILD_INFO.txt"
  done
} > "$out/host.txt" 2>&1
cat "$out/host.txt"

# one BIN VERSION WORKLOAD ROUND THREADS [ARGS...]: one ledger_bench run,
# both designs.
one() {
  local bin=$1 ver=$2 w=$3 r=$4 thr=$5
  shift 5
  local log="$out/$ver-$w-$r.log"
  timeout 60 "$bin/ledger_bench" --workload "$w" --threads "$thr" --no-reader \
    --no-ceiling --seconds $secs --repeat 1 "$@" > "$log" 2>&1
  local rc=$?
  grep -q 'all keeps ran exactly once' "$log" || rc=1
  [ $rc -eq 0 ] || { echo "    $ver $w round $r: rc=$rc (see $log)"; status=1; }
}

t0=$SECONDS
for r in $(seq 1 $rounds); do
  # Interleaved, before then after, so that drift on the host hits both.
  for ver in before after; do
    bin=$before
    [ $ver = after ] && bin=$after
    echo "=== round $r: $ver"
    one "$bin" $ver serving "$r" "$threads"
    one "$bin" $ver private "$r" 1
    one "$bin" $ver shared "$r" 1
  done
  echo "=== round $r: after, vector index on"
  one "$after" index private "$r" 1 --impl ledger --vector-index 1024
done
echo "=== holds_vector misses, without and with the index"
timeout 120 "$after/ledger_bench" --workload holds > "$out/holds-plain.log" 2>&1 || status=1
# Sized for the 128 k ids pending (8 buckets each: ~1 % of buckets shared
# by two ids, whose misses walk), and eight times over.
timeout 120 "$after/ledger_bench" --workload holds --impl ledger \
  --vector-index 131072 > "$out/holds-index.log" 2>&1 || status=1
timeout 120 "$after/ledger_bench" --workload holds --impl ledger \
  --vector-index 1048576 > "$out/holds-index8.log" 2>&1 || status=1
if [ -x "$after/atomics_bench" ]; then
  echo "=== atomics_bench"
  timeout 60 "$after/atomics_bench" --iters $iters --repeat 5 > "$out/atomics.log" 2>&1 || status=1
fi
echo "=== runs took $((SECONDS - t0)) s"

# Summary: per workload and thread count, the median over the rounds of the
# ledger's Mop/s, the mutex design's, and their ratio, before and after.
{
  echo "issue 11 round 2: median of $rounds round(s), ${secs} s rows; Mop/s and ldg/mtx"
  printf '%-8s %4s | %10s %10s %8s | %10s %10s %8s\n' workload thr \
    "before ldg" "mtx" "ldg/mtx" "after ldg" "mtx" "ldg/mtx"
  for w in serving private shared; do
    for ver in before after; do
      for r in $(seq 1 $rounds); do
        awk -F'|' -v ver=$ver -v w=$w '
          $1 ~ "^" w " " {
            split($1, a, " "); split($2, l, " "); split($3, m, " ");
            x = $4; gsub(/[ x]/, "", x);
            print w, a[2], ver, l[1], m[1], x }' "$out/$ver-$w-$r.log"
      done
    done
  done | sort -k1,1 -k2,2n -k3,3 |
    awk '
      function med(s,   n, v, i, j, t) {
        n = split(s, v, " ");
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
          if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((n + 1) / 2)] }
      { k = $1 " " $2; keys[k] = 1; order[k] = $1 == "serving" ? 0 : ($1 == "private" ? 1 : 2)
        L[k, $3] = L[k, $3] " " $4; M[k, $3] = M[k, $3] " " $5; X[k, $3] = X[k, $3] " " $6 }
      END {
        for (k in keys) {
          split(k, p, " ");
          printf "%d %d %-8s %4s | %10.2f %10.2f %7.2fx | %10.2f %10.2f %7.2fx\n",
            order[k], p[2], p[1], p[2],
            med(L[k, "before"]), med(M[k, "before"]), med(X[k, "before"]),
            med(L[k, "after"]), med(M[k, "after"]), med(X[k, "after"]) } }' |
    sort -k1,1n -k2,2n | cut -d' ' -f3-
  echo
  echo "private, one thread, after: ledger Mop/s without / with the vector index (each round)"
  for r in $(seq 1 $rounds); do
    awk -F'|' -v r=$r '$1 ~ "^private " { split($2, l, " "); p = l[1] }
      END { printf "  round %d: %s", r, p }' "$out/after-private-$r.log"
    awk -F'|' '$1 ~ "^private " { split($2, l, " "); printf " / %s\n", l[1] }' \
      "$out/index-private-$r.log"
  done
  echo
  echo "holds_vector miss, us (after): without the index, then with it sized 128 k and 1 M ids"
  grep -E '^  (impl|ledger|mutex) ' "$out/holds-plain.log"
  grep -E '^  ledger ' "$out/holds-index.log" | sed 's/^  ledger   /  ix 128k /'
  grep -E '^  ledger ' "$out/holds-index8.log" | sed 's/^  ledger   /  ix 1M   /'
  [ -f "$out/atomics.log" ] && cat "$out/atomics.log"
} > "$out/summary.txt"
cat "$out/summary.txt"
echo "=== done (status $status): $out"
exit $status
