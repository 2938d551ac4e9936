#!/usr/bin/env bash
# Issue 11 on the GPU host (16 cores, H200): ledger_bench rows of two builds
# of the ledger side by side in one run, with the mutex design as each run's
# yardstick (ledger_bench runs it beside the ledger) and, for the shared
# stream, the ceiling loop measured in the same invocation. Rounds
# interleave before and after (the order alternates by round, so that drift
# on the host hits both: the H200 host moves +-10 % between rounds); then
# atomics_bench (the ns of one locked read-modify-write on this host).
#
# Round 3 (the default rows): private at 1 and 16 threads and serving at 1,
# 4 and 16 threads, 0.5 s rows, three rounds. About 70 s on 16 cores.
# Other rounds set the rows through the environment (bench/core5b_h200.sh):
#   I11_ROWS     "WORKLOAD:THREADS ..." (default "private:1,16 serving:1,4,16");
#                a workload the BEFORE binary does not know (its --help does
#                not name it) runs on BIN only; shared rows keep their
#                ceiling rows, the others run --no-ceiling
#   I11_ROUNDS   rounds (default 3)     I11_SECS   timed s per row (default 0.5)
#   I11_BUDGET   s: a round that would end past it is skipped, and said so
#                (default: none)
#   I11_PAIRS    "OPTIN=DEFAULT ...": also compare workload OPTIN on BIN with
#                DEFAULT on BEFORE and on BIN, per round (e.g. private_si=private)
#   I11_ITERS    atomics_bench iterations per run (default 20000000)
#   I11_TITLE    the summary's first words
#
# From the repository root, with the binaries of tools/gpu_build.sh:
#   bench/issue11_h200.sh gpu-bin .devcarry/gpu-bin-7856fa6 $OUT/issue11
#   (BIN = after, BEFORE = before, OUT = a new folder)
# Writes OUT/host.txt, OUT/{before,after}-WORKLOAD-R.log, OUT/rows.tsv (every
# row of every run), OUT/atomics.log and OUT/SUMMARY.txt (the tables for
# RESULTS.md).
# --quick: 0.1 s rows, one round (a check of the script, e.g. here on a
# development machine; its times mean nothing).
set -uo pipefail

# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
after=$bin
for d in "$before" "$after"; do
  [ -x "$d/ledger_bench" ] || { echo "$0: no $d/ledger_bench" >&2; exit 2; }
done

rows=${I11_ROWS:-private:1,16 serving:1,4,16}
secs=${I11_SECS:-0.5}
rounds=${I11_ROUNDS:-3}
budget=${I11_BUDGET:-0}
pairs=${I11_PAIRS:-}
title=${I11_TITLE:-issue 11 round 3}
iters=${I11_ITERS:-20000000}
if [ -n "$quick" ]; then
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

# Whether binary dir $1's ledger_bench knows workload $2.
knows() { timeout 10 "$1/ledger_bench" --help 2>&1 | grep -qw -- "$2"; }

# one VERSION WORKLOAD ROUND THREADS: one ledger_bench run, both designs
# (and the ceiling loop for shared).
one() {
  local ver=$1 w=$2 r=$3 thr=$4 bin=$before
  [ "$ver" = after ] && bin=$after
  knows "$bin" "$w" || return 0
  local log="$out/$ver-$w-$r.log" ceil=--no-ceiling
  [ "$w" = shared ] && ceil=
  timeout 60 "$bin/ledger_bench" --workload "$w" --threads "$thr" --no-reader \
    $ceil --seconds "$secs" --repeat 1 > "$log" 2>&1
  local rc=$?
  grep -q 'all keeps ran exactly once' "$log" || rc=1
  [ $rc -eq 0 ] || { echo "    $ver $w round $r: rc=$rc (see $log)"; status=1; }
}

t0=$SECONDS
done_rounds=0
for r in $(seq 1 "$rounds"); do
  # Skip a round that would end past the budget (the first round's length
  # is the estimate).
  if [ "$budget" -gt 0 ] && [ $done_rounds -gt 0 ] &&
    [ $((SECONDS - t0 + (SECONDS - t0) / done_rounds)) -gt "$budget" ]; then
    echo "SKIPPED rounds $r-$rounds: the ${budget} s budget ($((SECONDS - t0)) s used)" |
      tee -a "$out/skipped.txt"
    break
  fi
  order="before after"
  [ $((r % 2)) -eq 0 ] && order="after before"
  for ver in $order; do
    echo "=== round $r: $ver ($((SECONDS - t0)) s)"
    for row in $rows; do
      one "$ver" "${row%%:*}" "$r" "${row#*:}"
    done
  done
  done_rounds=$r
done
if [ -x "$after/atomics_bench" ]; then
  echo "=== atomics_bench"
  timeout 30 "$after/atomics_bench" --iters $iters --repeat 5 > "$out/atomics.log" 2>&1 || status=1
fi
echo "=== runs took $((SECONDS - t0)) s"

# rows.tsv: one line per ledger_bench row: version round workload threads
# ledger-ns/op mutex-ns/op ldg/mtx ledger-p99.9-ns of-ceiling-ldg-%
# (ns/op = wall x min(threads, cpus) / ops; "-" where a column is empty).
for f in "$out"/before-*-*.log "$out"/after-*-*.log; do
  [ -f "$f" ] || continue
  b=$(basename "$f" .log)
  ver=${b%%-*}
  r=${b##*-}
  awk -F'|' -v ver="$ver" -v r="$r" '
    function ns(v) { # 123, 12u, 3m -> ns
      if (v ~ /u$/) return substr(v, 1, length(v) - 1) * 1000;
      if (v ~ /m$/) return substr(v, 1, length(v) - 1) * 1000000;
      return v + 0 }
    NF >= 5 && $1 !~ /^(workload|ceiling)/ && $1 ~ /^[a-z_]+ +[0-9]+ *$/ {
      split($1, a, " "); split($2, l, " "); split($3, m, " ");
      x = $4; gsub(/[ x]/, "", x); if (x == "") x = "-";
      c = "-"; if (match($5, /ldg [0-9]+%/)) c = substr($5, RSTART + 4, RLENGTH - 5);
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ver, r, a[1], a[2], l[2],
        (m[2] == "-" ? "-" : m[2]), x, ns(l[5]), c }' "$f"
done | sort -t$'\t' -k3,3 -k4,4n -k2,2n > "$out/rows.tsv"

{
  echo "$title: median of $done_rounds round(s), ${secs} s rows, $(nproc) cpus"
  echo "before: $before"
  echo "after:  $after"
  [ -f "$out/skipped.txt" ] && cat "$out/skipped.txt"
  echo
  echo "medians (ns/op: the ledger's core time per op; ldg/mtx: throughput ratio;"
  echo "p99.9 of one enqueue, ns; ceil: the shared row's % of the ceiling loop):"
  printf '%-10s %3s | %9s %8s %8s %7s %5s | %9s %8s %8s %7s %5s | %8s\n' workload thr \
    "bef ns/op" "mtx ns" "ldg/mtx" "p99.9" "ceil" "aft ns/op" "mtx ns" "ldg/mtx" "p99.9" "ceil" "aft/bef"
  awk -F'\t' '
    function med(s,   n, v, i, j, t) {
      n = split(s, v, " ");
      if (n == 0) return "";
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
      return v[int((n + 1) / 2)] }
    function f(v, fmt) { return v == "" ? sprintf("%" fmt "s", "-") : sprintf("%" fmt "f", v) }
    { k = $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      L[k, $1] = L[k, $1] " " $5
      if ($6 != "-") M[k, $1] = M[k, $1] " " $6
      if ($7 != "-") X[k, $1] = X[k, $1] " " $7
      P[k, $1] = P[k, $1] " " $8
      if ($9 != "-") C[k, $1] = C[k, $1] " " $9 }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]; split(k, p, " ");
        lb = med(L[k, "before"]); la = med(L[k, "after"]);
        printf "%-10s %3s | %s %s %s %s %s | %s %s %s %s %s | %s\n", p[1], p[2],
          f(lb, "9.1"), f(med(M[k, "before"]), "8.1"), f(med(X[k, "before"]), "7.2") (lb == "" ? " " : "x"),
          f(med(P[k, "before"]), "7.0"), f(med(C[k, "before"]), "4.0") (med(C[k, "before"]) == "" ? " " : "%"),
          f(la, "9.1"), f(med(M[k, "after"]), "8.1"), f(med(X[k, "after"]), "7.2") (la == "" ? " " : "x"),
          f(med(P[k, "after"]), "7.0"), f(med(C[k, "after"]), "4.0") (med(C[k, "after"]) == "" ? " " : "%"),
          (lb != "" && la != "" ? sprintf("%7.2fx", la / lb) : "       -") } }' "$out/rows.tsv"
  echo
  echo "per round (ledger ns/op before -> after, after/before; ldg/mtx before -> after):"
  awk -F'\t' '
    { k = $3 "\t" $4 "\t" $2; if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      N[k, $1] = $5; X[k, $1] = $7 }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]; split(k, p, "\t"); b = N[k, "before"]; a = N[k, "after"];
        printf "  %-10s thr %2s round %s: %8s -> %8s ns/op  %7s   ldg/mtx %6s -> %6s\n",
          p[1], p[2], p[3], (b == "" ? "-" : b), (a == "" ? "-" : a),
          (b != "" && a != "" ? sprintf("%6.2fx", a / b) : "-"),
          (X[k, "before"] == "" ? "-" : X[k, "before"]), (X[k, "after"] == "" ? "-" : X[k, "after"]) } }' \
    "$out/rows.tsv"
  for pair in $pairs; do
    o=${pair%%=*}
    d=${pair#*=}
    echo
    echo "opt-in $o (after) against default $d: ns/op, per round and median"
    awk -F'\t' -v o="$o" -v d="$d" '
      function med(s,   n, v, i, j, t) {
        n = split(s, v, " ");
        if (n == 0) return 0;
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
          if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
        return v[int((n + 1) / 2)] }
      $3 == o && $1 == "after" { O[$4, $2] = $5; thr[$4] = 1 }
      $3 == d { D[$4, $2, $1] = $5 }
      END {
        for (t = 1; t <= 1024; t++) {
          if (!(t in thr)) continue;
          rb = ""; ra = "";
          for (r = 1; r <= 99; r++) {
            if (!((t, r) in O)) continue;
            line = line sprintf("  thr %2s round %d: %s %7.1f | %s before %7.1f (%5.2fx) | %s after %7.1f (%5.2fx)\n",
              t, r, o, O[t, r], d, D[t, r, "before"], (D[t, r, "before"] > 0 ? O[t, r] / D[t, r, "before"] : 0),
              d, D[t, r, "after"], (D[t, r, "after"] > 0 ? O[t, r] / D[t, r, "after"] : 0));
            if (D[t, r, "before"] > 0) rb = rb " " O[t, r] / D[t, r, "before"];
            if (D[t, r, "after"] > 0) ra = ra " " O[t, r] / D[t, r, "after"];
          }
          line = line sprintf("  thr %2s median: %s / %s before %.2fx, / %s after %.2fx\n", t, o, d, med(rb), d, med(ra))
        }
        printf "%s", line }' "$out/rows.tsv"
  done
  echo
  echo "targets (issue 11): private, 1 thread <= 25 ns/op; every workload at 1 thread >= 1.0x the"
  echo "mutex design; one shared stream >= 80 % of the ceiling at 2-16 threads, p99.9 at 16 <= 5 us"
  [ -f "$out/atomics.log" ] && { echo; cat "$out/atomics.log"; }
  echo "status: $status"
} > "$out/SUMMARY.txt"
cat "$out/SUMMARY.txt"
echo "=== done (status $status): $out"
exit $status
