#!/usr/bin/env bash
# Issue 11, round 3, on the GPU host (16 cores, H200): the ledger before and
# after this round, side by side in one run, with the mutex design as each
# run's yardstick. What changed (bench/RESULTS.md, "Issue 11, round 3"):
#  - publication: one locked operation fewer per enqueue (a release store of
#    FULL, read of slot->over in a read-side section; an overtaking release
#    pays with membarrier): moves private and serving at every thread count;
#  - the vector index pointer read from the stream, not from the ledger's
#    line that l->refs shares (the suspect for serving at 4-16 threads,
#    10-14 % slower after the index landed).
# Rows: private at 1 and 16 threads, serving at 1, 4 and 16 threads, both
# designs (ledger_bench runs the mutex design beside the ledger), 0.5 s
# each, three rounds, before and after interleaved (the order alternates
# by round, so that drift on the host hits both); then atomics_bench (the
# ns of one locked read-modify-write on this host). About 70 s on 16 cores.
#
# From the repository root, with the binaries of tools/gpu_build.sh:
#   bench/issue11_h200.sh gpu-bin .devcarry/gpu-bin-7856fa6 $OUT/issue11
#   (BIN = after, BEFORE = before, OUT = a new folder)
# Writes OUT/host.txt, OUT/{before,after}-{private,serving}-R.log,
# OUT/atomics.log and OUT/SUMMARY.txt (the table for RESULTS.md).
# --quick: 0.1 s rows, one round (a check of the script, e.g. here on a
# development machine; its times mean nothing).
set -uo pipefail

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
if [ $# -ne 3 ]; then
  echo "usage: $0 [--quick] BIN BEFORE OUT   (BIN: after; BEFORE: before)" >&2
  exit 2
fi
after=$(cd "$1" && pwd) || exit 2
before=$(cd "$2" && pwd) || exit 2
out=$3
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2
for d in "$before" "$after"; do
  [ -x "$d/ledger_bench" ] || { echo "$0: no $d/ledger_bench" >&2; exit 2; }
done

secs=0.5
rounds=3
iters=20000000
if [ $quick -eq 1 ]; then
  secs=0.1
  rounds=1
  iters=1000000
fi
status=0

{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(hostname)"
  echo "cpus:    $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  echo "kernel:  $(uname -r)"
  command -v nvidia-smi > /dev/null && timeout 10 nvidia-smi -L
  for d in "$before" "$after"; do
    echo "--- $d"
    [ -f "$d/BUILD_INFO.txt" ] && sed 's/^/build:   /' "$d/BUILD_INFO.txt"
  done
} > "$out/host.txt" 2>&1
cat "$out/host.txt"

# one VERSION WORKLOAD ROUND THREADS: one ledger_bench run, both designs.
one() {
  local ver=$1 w=$2 r=$3 thr=$4 bin=$before
  [ "$ver" = after ] && bin=$after
  local log="$out/$ver-$w-$r.log"
  timeout 60 "$bin/ledger_bench" --workload "$w" --threads "$thr" --no-reader \
    --no-ceiling --seconds $secs --repeat 1 > "$log" 2>&1
  local rc=$?
  grep -q 'all keeps ran exactly once' "$log" || rc=1
  [ $rc -eq 0 ] || { echo "    $ver $w round $r: rc=$rc (see $log)"; status=1; }
}

t0=$SECONDS
for r in $(seq 1 $rounds); do
  order="before after"
  [ $((r % 2)) -eq 0 ] && order="after before"
  for ver in $order; do
    echo "=== round $r: $ver ($((SECONDS - t0)) s)"
    one $ver private "$r" 1,16
    one $ver serving "$r" 1,4,16
  done
done
if [ -x "$after/atomics_bench" ]; then
  echo "=== atomics_bench"
  timeout 30 "$after/atomics_bench" --iters $iters --repeat 5 > "$out/atomics.log" 2>&1 || status=1
fi
echo "=== runs took $((SECONDS - t0)) s"

# SUMMARY: per workload and thread count, the median over the rounds of the
# ledger's and the mutex design's ns/op (ns/op = wall x threads / ops), the
# ledger against the mutex design (ldg/mtx, throughput), and after against
# before (the ledger's ns/op, after / before: below 1 is faster).
{
  echo "issue 11 round 3: median of $rounds round(s), ${secs} s rows, $(nproc) cpus"
  echo "before: $before"
  echo "after:  $after"
  printf '%-8s %3s | %9s %9s %8s | %9s %9s %8s | %11s\n' workload thr \
    "bef ns/op" "mtx ns" "ldg/mtx" "aft ns/op" "mtx ns" "ldg/mtx" "aft/bef ns"
  for w in private serving; do
    for ver in before after; do
      for r in $(seq 1 $rounds); do
        [ -f "$out/$ver-$w-$r.log" ] || continue
        awk -F'|' -v ver=$ver -v w=$w '
          $1 ~ "^" w " " {
            split($1, a, " "); split($2, l, " "); split($3, m, " ");
            x = $4; gsub(/[ x]/, "", x);
            print w, a[2], ver, l[2], m[2], x }' "$out/$ver-$w-$r.log"
      done
    done
  done | awk '
      function med(s,   n, v, i, j, t) {
        n = split(s, v, " ");
        if (n == 0) return 0;
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
          if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((n + 1) / 2)] }
      { k = $1 " " $2; if (!(k in keys)) { keys[k] = 1; order[++nk] = k }
        L[k, $3] = L[k, $3] " " $4; M[k, $3] = M[k, $3] " " $5; X[k, $3] = X[k, $3] " " $6 }
      END {
        for (i = 1; i <= nk; i++) {
          k = order[i]; split(k, p, " ");
          lb = med(L[k, "before"]); la = med(L[k, "after"]);
          printf "%-8s %3s | %9.1f %9.1f %7.2fx | %9.1f %9.1f %7.2fx | %10.2fx\n",
            p[1], p[2], lb, med(M[k, "before"]), med(X[k, "before"]),
            la, med(M[k, "after"]), med(X[k, "after"]), (lb > 0 ? la / lb : 0) } }'
  echo
  echo "per round, ledger ns/op before / after:"
  for w in private serving; do
    for r in $(seq 1 $rounds); do
      for ver in before after; do
        [ -f "$out/$ver-$w-$r.log" ] || continue
        awk -F'|' -v w=$w -v r=$r -v ver=$ver '$1 ~ "^" w " " {
          split($1, a, " "); split($2, l, " ");
          printf "  %-8s thr %3s round %d %-6s %8.1f\n", w, a[2], r, ver, l[2] }' \
          "$out/$ver-$w-$r.log"
      done
    done
  done
  echo
  echo "targets (issue 11): private, 1 thread <= 25 ns/op; every workload at 1 thread >= 1.0x the mutex design"
  [ -f "$out/atomics.log" ] && { echo; cat "$out/atomics.log"; }
  echo "status: $status"
} > "$out/SUMMARY.txt"
cat "$out/SUMMARY.txt"
echo "=== done (status $status): $out"
exit $status
