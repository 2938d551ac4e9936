#!/usr/bin/env bash
# Issue 11, seventh session (ext7: the extension herd on a shared stream,
# ledger/segment.c GROWING AHEAD), on the GPU host (1 x H200, 16 vCPUs): BIN
# against BEFORE side by side in one run (bench/RESULTS.md, "Issue 11, seventh
# session: the extension herd on a shared stream (ext7)").
#   - ledger_bench --workload shared --impl ledger --threads 2,4,8,16
#     --seconds 0.5 (the ceiling loop comes with it), BIN and BEFORE
#     interleaved (order alternating), 3 rounds;
#   - ledger_evidence_bench shared, 16 threads, 0.5 s, of each: extensions
#     (segments built) per retirement, fresh / pooled / spare, links.
# About 55 s on 16 cores (every step under timeout: at most 6 x 11 + 2 x 7 =
# 80 s); the folder stays small (~30 KB).
# From the repository root:
#   bench/ext7_h200.sh gpu-bin .devcarry/gpu-bin-17aea1f $OUT/ext7
# Writes OUT/SUMMARY.txt (medians per thread count: % of the ceiling and
# p99.9 of one enqueue, before and after; extensions per retirement), the
# ledger_bench and evidence logs, host.txt.
# --quick: one round of 0.05 s rows at 2 and 4 threads (a check of the
# script; times mean nothing).
set -uo pipefail
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
rounds=3 secs=0.5 thr=2,4,8,16 evthr=16
if [ -n "$quick" ]; then rounds=1 secs=0.05 thr=2,4 evthr=4; fi
t0=$SECONDS
status=0
{
  echo "date: $(date -u +%FT%TZ)"
  uname -a
  nproc
  grep -m1 'model name' /proc/cpuinfo
  for d in "$bin" "$before"; do
    echo "== $d"
    head -5 "$d/BUILD_INFO.txt" 2>/dev/null
  done
} > "$out/host.txt" 2>&1

for r in $(seq 1 "$rounds"); do
  order="before after"
  [ $((r % 2)) -eq 0 ] && order="after before"
  for side in $order; do
    d=$bin
    [ $side = before ] && d=$before
    echo "=== round $r $side ($((SECONDS - t0)) s)"
    timeout -k 1 11 "$d/ledger_bench" --workload shared --impl ledger \
      --threads "$thr" --seconds "$secs" --repeat 1 \
      > "$out/$side-r$r.log" 2>&1 || status=1
  done
done
for side in before after; do
  d=$bin
  [ $side = before ] && d=$before
  echo "=== evidence $side ($((SECONDS - t0)) s)"
  timeout -k 1 7 "$d/ledger_evidence_bench" --workload shared --impl ledger \
    --threads "$evthr" --seconds "$secs" --repeat 1 --no-ceiling \
    > "$out/evidence-$side.log" 2>&1 || status=1
done

# p-columns are ns, or with u (us) / m (ms).
ns() { awk -v v="$1" 'BEGIN { m = 1; if (v ~ /u$/) m = 1e3; if (v ~ /m$/) m = 1e6;
  sub(/[um]$/, "", v); printf "%.0f", v * m }'; }
# rows.tsv: side round thr of_ceiling_pct p99.9_ns ceiling_p99.9_ns
: > "$out/rows.tsv"
for f in "$out"/before-r*.log "$out"/after-r*.log; do
  [ -f "$f" ] || continue
  n=$(basename "$f" .log)
  side=${n%-r*} r=${n##*-r}
  awk '$1 == "ceiling" { c[$2] = $8 } $1 == "shared" && $3 == "|" {
         pct = $NF; sub(/%/, "", pct); print $2, pct, $8, c[$2] }' "$f" |
    while read -r t pct p cp; do
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$side" "$r" "$t" "$pct" "$(ns "$p")" "$(ns "$cp")"
    done >> "$out/rows.tsv"
done
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
  print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { awk -F'\t' -v s="$1" -v t="$2" -v c="$3" '$1 == s && $3 == t { print $c }' "$out/rows.tsv"; }
# extensions per retirement, from an evidence log's segments line
epr() { awk '/segments: [0-9]+ extensions/ && $2 > 0 {
  for (i = 1; i <= NF; i++) if ($i == "head") h = $(i - 1); e = $2 }
  END { if (h > 0) printf "%.2f (%d extensions, %d retirements)", e / h, e, h; else print "-" }' "$1"; }
{
  echo "ext7 on $(hostname): $rounds round(s) of ledger_bench --workload shared --impl ledger"
  echo "--threads $thr --seconds $secs (BIN and BEFORE interleaved); medians over rounds."
  echo "BIN=$bin  BEFORE=$before"
  echo
  printf '%-4s | %9s %9s %7s | %11s %11s %7s | %13s\n' thr "ceil% bef" "ceil% aft" "aft/bef" \
    "p99.9 bef" "p99.9 aft" "aft/bef" "ceiling p99.9"
  for t in ${thr//,/ }; do
    pb=$(col before "$t" 4 | med) pa=$(col after "$t" 4 | med)
    lb=$(col before "$t" 5 | med) la=$(col after "$t" 5 | med)
    cl=$( { col before "$t" 6; col after "$t" 6; } | med)
    rp=$(awk -v a="$pa" -v b="$pb" 'BEGIN { if (b > 0 && a != "-") printf "%.2f", a / b; else print "-" }')
    rl=$(awk -v a="$la" -v b="$lb" 'BEGIN { if (b > 0 && a != "-") printf "%.2f", a / b; else print "-" }')
    printf '%-4s | %8s%% %8s%% %7s | %9s ns %8s ns %7s | %10s ns\n' "$t" "$pb" "$pa" "$rp" "$lb" "$la" "$rl" "$cl"
  done
  echo
  echo "ledger_evidence_bench --workload shared --threads $evthr --seconds $secs:"
  for side in before after; do
    echo "  $side: extensions per retirement $(epr "$out/evidence-$side.log")"
    grep -E 'segments: [1-9]|links:|extended:' "$out/evidence-$side.log" | sed 's/^/    /'
  done
  echo
  echo "per run (side round thr of-ceiling% p99.9-ns ceiling-p99.9-ns): rows.tsv"
  echo "elapsed $((SECONDS - t0)) s; status $status"
} > "$out/SUMMARY.txt"
cat "$out/SUMMARY.txt"
exit $status
