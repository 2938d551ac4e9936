#!/usr/bin/env bash
# Issue 10, the ratios of pool_2s (4 KiB: alloc, use on a second stream,
# free) at 1 and 16 threads settled by repetition: BIN's pool_bench
# ("after") and BEFORE's, each round side by side with both incumbents
# (async_2s: cuMemAllocAsync with an event each way, from BIN's
# pool_bench, the same code in both; torch_2s:
# PyTorch's allocate, recordStream, free, from pool_torch.cpp built here
# by ab_lib.sh's ab_torch_build, as bench/pool_ab_h200.sh does).
# POOL5_ROUNDS1 rounds at 1 thread and POOL5_ROUNDS16 at 16, each round's
# processes in an order that alternates (after, before, async, torch;
# then the reverse), so a drift of the host hits every column.
# SUMMARY.txt: per round the cells and the ratios (pool over the faster
# incumbent of that round), then per thread count the median and the
# minimum of each ratio (issue 10's targets: >= 10x at 1 thread, >= 100x at
# 16), and the diag lines (slabs carved: issue 10's 16-thread regression).
# Every step is under `timeout`; a step that would pass the budget is
# skipped (said in SUMMARY.txt).
#
# Usage, from the repository root (the lead's device call, ~60-90 s):
#   bench/pool5_h200.sh gpu-bin .devcarry/gpu-bin-cea4c18 $OUT/pool6
# Knobs (environment): POOL5_MS=400 (per cell)
#   POOL5_ROUNDS1=3 POOL5_ROUNDS16=3 POOL5_BUDGET_S=115 POOL5_ARGS= (extra
#   pool_bench arguments for both binaries). Without a GPU (no torch rows):
#   POOL5_ARGS=--driver=host POOL5_MS=50 bench/pool5_h200.sh BIN BEFORE OUT
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN BEFORE OUT" >&2; exit 2; }
bin=$1 before=$2 out=$3
ms=${POOL5_MS:-400}
rounds1=${POOL5_ROUNDS1:-3}
rounds16=${POOL5_ROUNDS16:-3}
budget=${POOL5_BUDGET_S:-115}
read -r -a extra <<< "${POOL5_ARGS:-}"
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "pool_2s rounds (issue 10, pool5/pool6)" \
  "after = $bin/pool_bench, before = $before/pool_bench; $ms ms per cell; $rounds1 rounds at 1 thread, $rounds16 at 16"
ab_pool_start # both pool_bench binaries, then torch=1 if pool_torch built

# One round at T threads: one process per cell (pool_torch also runs its
# torch_af and serving cells: it has no --only).
lim=$((ms * 3 / 1000 + 15))
round() {
  local t=$1 r=$2 w
  for w in $(ab_order "$r" after before async torch); do
    case $w in
      after) step "t${t}_r${r}_after" "$lim" "$bin/pool_bench" "${extra[@]}" \
        --only pool_2s --threads "$t" --ms "$ms" ;;
      before) step "t${t}_r${r}_before" "$lim" "$before/pool_bench" "${extra[@]}" \
        --only pool_2s --threads "$t" --ms "$ms" ;;
      async) step "t${t}_r${r}_async" "$lim" "$bin/pool_bench" "${extra[@]}" \
        --only async_2s --threads "$t" --ms "$ms" ;;
      torch) [ $torch -eq 1 ] && step "t${t}_r${r}_torch" $((lim + 15)) \
        "$out/pool_torch" --threads "$t" --ms "$ms" ;;
    esac
  done
}
# Interleaved: 16 threads first (the regression), then 1, then 16 again...
for r in $(seq 1 $((rounds1 > rounds16 ? rounds1 : rounds16))); do
  [ "$r" -le "$rounds16" ] && round 16 "$r"
  [ "$r" -le "$rounds1" ] && round 1 "$r"
done

# The summary: a row per round, then median and minimum per thread count.
# Row fields: thr round | after before | async torch | x after x before | a/b.
cell() { ab_cell "$1" overhead "$2" "$3"; } # FILE MODE T: M ops/s
{
  echo
  echo "pool_2s, M ops/s per round; incumbent = max(async_2s, torch_2s) of that round;"
  echo "ratio = pool_2s / incumbent (issue 10: >= 10x at 1 thread, >= 100x at 16);"
  echo "a/b: after over before"
  printf '\n%-4s %-5s | %9s %9s | %9s %9s | %9s %9s | %9s\n' thr round after before \
    async_2s torch_2s "x after" "x before" "a/b"
  for t in 16 1; do
    n=$rounds1
    [ "$t" = 16 ] && n=$rounds16
    for r in $(seq 1 "$n"); do
      a=$(cell "$out/t${t}_r${r}_after.log" pool_2s "$t")
      b=$(cell "$out/t${t}_r${r}_before.log" pool_2s "$t")
      y=$(cell "$out/t${t}_r${r}_async.log" async_2s "$t")
      z=$(cell "$out/t${t}_r${r}_torch.log" torch_2s "$t")
      awk -v t="$t" -v r="$r" -v a="${a:--}" -v b="${b:--}" -v y="${y:--}" -v z="${z:--}" 'BEGIN {
        inc = (y != "-" ? y : 0); if (z != "-" && z + 0 > inc) inc = z
        printf "%-4s %-5s | %9s %9s | %9s %9s |", t, r, a, b, y, z
        printf " %9s", (a != "-" && inc > 0) ? sprintf("%.1fx", a / inc) : "-"
        printf " %9s |", (b != "-" && inc > 0) ? sprintf("%.1fx", b / inc) : "-"
        printf " %9s\n", (a != "-" && b != "-" && b > 0) ? sprintf("%.2f", a / b) : "-" }'
    done
  done
} > "$out/rounds.txt"
cat "$out/rounds.txt" >> "$sum"
{
  echo
  echo "per thread count over its rounds: median and minimum over the rounds that have the cells"
  # fields: 1 thr, 2 round, 3 "|", 4 after, 5 before, 6 "|", 7 async, 8 torch,
  # 9 "|", 10 x after, 11 x before, 12 "|", 13 a/b
  awk '$2 ~ /^[0-9]+$/ && $3 == "|" {
      t = $1; ts[t] = 1
      for (c = 0; c < 3; c++) { v = $(c < 2 ? 10 + c : 13); if (v == "-") continue
        sub(/x$/, "", v); k = t SUBSEP c; n[k]++; x[k, n[k]] = v + 0 } }
    function stat(k,   i, j, m, tmp) {
      m = n[k]; if (m == 0) return "-"
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
        if (x[k, j] < x[k, i]) { tmp = x[k, i]; x[k, i] = x[k, j]; x[k, j] = tmp }
      return sprintf("median %.2f, min %.2f (n=%d)",
        m % 2 ? x[k, (m + 1) / 2] : (x[k, m / 2] + x[k, m / 2 + 1]) / 2, x[k, 1], m) }
    END { for (t in ts) {
      printf "thr %-3s ratio after: %s\n", t, stat(t SUBSEP 0)
      printf "thr %-3s ratio before: %s\n", t, stat(t SUBSEP 1)
      printf "thr %-3s after/before: %s\n", t, stat(t SUBSEP 2) } }' \
    "$out/rounds.txt" | sort -s -n -k2,2
  echo
  echo "diag lines (pool_2s: engine polls/markers/releases per op, frees recycled on request threads):"
  for f in "$out"/t*_after.log "$out"/t*_before.log; do
    [ -f "$f" ] && grep '^diag' "$f" | sed "s|^|$(basename "$f" .log): |"
  done
  echo
  echo "logs: $out (exit $rc, $(($(date +%s) - start)) s)"
} >> "$sum"
sed -n '/^pool_2s, M ops/,$p' "$sum"
exit $rc
