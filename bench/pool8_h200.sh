#!/usr/bin/env bash
# Issue 10, sixth session (pool8): pool_2s at 1 thread against the faster
# incumbent, settled by repetition, with the evidence for its 2x
# round-to-round spread. Per 1-thread round, one process per cell, in an
# order that alternates (then the reverse), so a drift of the host hits
# every column:
#   after        BIN's pool_bench (own polls ask an idle stream with one
#                cuStreamQuery: pool/pool.c, AN IDLE STREAM IN ONE DRIVER CALL)
#   marker       the same binary with SLP_OWN_POLL=marker (the rule before:
#                the change alone, same code otherwise)
#   before       BEFORE's pool_bench
#   async        cuMemAllocAsync with an event each way (BIN's async_2s)
#   torch        PyTorch's allocate, recordStream, free (pool_torch.cpp,
#                built here by ab_lib.sh's ab_torch_build)
#   after_pin, async_pin, torch_pin: the same with --pin (request thread i
#                on CPU i, the other threads on the other CPUs; BEFORE has
#                no --pin). If the pinned columns swing less between rounds
#                than the unpinned ones, the spread is placement.
# Then POOL8_ROUNDS16 rounds at 16 threads (after, before, async, torch;
# interleaved with the 1-thread rounds), the serving cells at 1, 4 and 16
# threads once per binary/mode (pool_bench's pool and async rows:
# requests/s, p99, peak memory), and one --count-driver run of pool_2s at
# 1 thread per mode (drvcalls: the request thread's driver calls per op).
# SUMMARY.txt: per round every cell and the ratios (pool over the faster
# incumbent of that round, pinned over pinned), after/before and
# after/marker; per column the median, min and max over the rounds and
# max/min (the spread); the serving, drvcalls and diag lines.
# Every step is under `timeout`; a step that would pass the budget is
# skipped (said in SUMMARY.txt).
#
# Usage, from the repository root (the lead's device call, <= 165 s: rounds
# that would not fit are skipped, said in SUMMARY.txt):
#   bench/pool8_h200.sh gpu-bin .devcarry/gpu-bin-5529590 $OUT/pool8
# Knobs (environment): POOL8_MS=300 (per cell) POOL8_ROUNDS1=10
#   POOL8_ROUNDS16=2 POOL8_BUDGET_S=165 POOL8_ARGS= (extra pool_bench
#   arguments for both binaries) POOL8_SERVING_THREADS=1,4,16.
#   Without a GPU (no torch rows), e.g.:
#   POOL8_ARGS=--driver=host POOL8_MS=30 POOL8_ROUNDS1=2 POOL8_ROUNDS16=1 \
#     POOL8_SERVING_THREADS=1,2 bench/pool8_h200.sh BIN BEFORE OUT
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN BEFORE OUT" >&2; exit 2; }
bin=$1 before=$2 out=$3
ms=${POOL8_MS:-300}
rounds1=${POOL8_ROUNDS1:-10}
rounds16=${POOL8_ROUNDS16:-2}
budget=${POOL8_BUDGET_S:-165}
sthreads=${POOL8_SERVING_THREADS:-1,4,16}
read -r -a extra <<< "${POOL8_ARGS:-}"
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "pool_2s at 1 thread, pinned and not (issue 10, pool8)" \
  "after = $bin/pool_bench, marker = SLP_OWN_POLL=marker $bin/pool_bench, before = $before/pool_bench; _pin: --pin; $ms ms per cell; $rounds1 rounds at 1 thread, $rounds16 at 16"
ab_pool_start # both pool_bench binaries, then torch=1 if pool_torch built

lim=$((ms * 3 / 1000 + 15))
# cell_run NAME WHAT T [--pin]: one process for one cell.
cell_run() {
  local name=$1 w=$2 t=$3 pin=()
  [ -n "${4:-}" ] && pin=("$4")
  case $w in
    after) step "$name" "$lim" "$bin/pool_bench" "${extra[@]}" "${pin[@]}" \
      --only pool_2s --threads "$t" --ms "$ms" ;;
    marker) step "$name" "$lim" env SLP_OWN_POLL=marker "$bin/pool_bench" \
      "${extra[@]}" "${pin[@]}" --only pool_2s --threads "$t" --ms "$ms" ;;
    before) step "$name" "$lim" "$before/pool_bench" "${extra[@]}" \
      --only pool_2s --threads "$t" --ms "$ms" ;;
    async) step "$name" "$lim" "$bin/pool_bench" "${extra[@]}" "${pin[@]}" \
      --only async_2s --threads "$t" --ms "$ms" ;;
    torch) [ $torch -eq 1 ] && step "$name" $((lim + 15)) \
      "$out/pool_torch" "${pin[@]}" --threads "$t" --ms "$ms" ;;
  esac
  return 0
}
# round T R COLUMNS...: each column once, reversed on even rounds; a
# column ending in _pin runs with --pin.
round() {
  local t=$1 r=$2 c
  shift 2
  for c in $(ab_order "$r" "$@"); do
    case $c in
      *_pin) cell_run "t${t}_r${r}_$c" "${c%_pin}" "$t" --pin ;;
      *) cell_run "t${t}_r${r}_$c" "$c" "$t" ;;
    esac
  done
}
# First, once: serving at 1/4/16 threads per binary and mode; drvcalls at
# 1 thread per mode (small; the rounds below fill the rest of the budget).
step serving_after $((lim * 3)) "$bin/pool_bench" "${extra[@]}" --only serving \
  --threads "$sthreads" --ms "$ms"
step serving_marker $((lim * 3)) env SLP_OWN_POLL=marker "$bin/pool_bench" \
  "${extra[@]}" --only serving --threads "$sthreads" --ms "$ms"
step serving_before $((lim * 3)) "$before/pool_bench" "${extra[@]}" --only serving \
  --threads "$sthreads" --ms "$ms"
step count_after "$lim" "$bin/pool_bench" "${extra[@]}" --count-driver \
  --only pool_2s --threads 1 --ms "$ms"
step count_marker "$lim" env SLP_OWN_POLL=marker "$bin/pool_bench" "${extra[@]}" \
  --count-driver --only pool_2s --threads 1 --ms "$ms"
# The rounds. A round starts only if 1.5 times the longest round so far
# (and 20 s) still fits: no round is cut short (a round without its torch
# cell would compare against async_2s alone).
cols1=(after marker before async torch after_pin async_pin torch_pin)
cols16=(after before async torch)
longest=20
for r in $(seq 1 $((rounds1 > rounds16 ? rounds1 : rounds16))); do
  if [ "$(left)" -lt $((longest * 3 / 2)) ]; then
    echo "SKIPPED rounds $r-: $(left) s left, a round took up to $longest s" | tee -a "$sum"
    rounds1=$((r - 1 < rounds1 ? r - 1 : rounds1))
    rounds16=$((r - 1 < rounds16 ? r - 1 : rounds16))
    break
  fi
  t0=$(date +%s)
  [ "$r" -le "$rounds16" ] && round 16 "$r" "${cols16[@]}"
  [ "$r" -le "$rounds1" ] && round 1 "$r" "${cols1[@]}"
  took=$(($(date +%s) - t0))
  [ "$took" -gt "$longest" ] && longest=$took
done

# The summary. One row per round: the cells (M ops/s), then the ratios.
v() { # COLUMN T R MODE: that cell's M ops/s, or -
  local x
  x=$(ab_cell "$out/t${2}_r${3}_$1.log" overhead "$4" "$2")
  echo "${x:--}"
}
{
  echo
  echo "pool_2s, M ops/s per round; inc = max(async_2s, torch_2s) of that round"
  echo "(inc_pin: of the pinned cells); x: pool_2s / inc (issue 10: >= 10x at 1"
  echo "thread, >= 100x at 16; x after_pin over inc_pin); a/b: after / before;"
  echo "a/m: after / marker (the own poll's change alone)"
  printf '\n%-4s %-5s |' thr round
  for c in "${cols1[@]}"; do printf ' %9s' "$c"; done
  printf ' | %7s %7s | %7s %7s %7s %9s | %5s %5s\n' inc inc_pin "x after" \
    "x marker" "x before" "x aft_pin" a/b a/m
  for r in $(seq 1 "$rounds1"); do
    row="1 $r"
    for c in "${cols1[@]}"; do
      case $c in
        async*) m=async_2s ;; torch*) m=torch_2s ;; *) m=pool_2s ;;
      esac
      row="$row $(v "$c" 1 "$r" "$m")"
    done
    echo "$row"
  done | awk '
    function mx(a, b) { return a == "-" ? b : (b == "-" || a + 0 > b + 0 ? a : b) }
    function q(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.2f", a / b) }
    function x(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.1fx", a / b) }
    { inc = mx($6, $7); ip = mx($9, $10)
      printf "%-4s %-5s |", $1, $2
      for (i = 3; i <= 10; i++) printf " %9s", $i
      printf " | %7s %7s | %7s %7s %7s %9s | %5s %5s\n", inc, ip, x($3, inc),
        x($4, inc), x($5, inc), x($8, ip), q($3, $5), q($3, $4) }'
  printf '\n%-4s %-5s |' thr round
  for c in "${cols16[@]}"; do printf ' %9s' "$c"; done
  printf ' | %7s | %7s %7s | %5s\n' inc "x after" "x before" a/b
  for r in $(seq 1 "$rounds16"); do
    echo "16 $r $(v after 16 "$r" pool_2s) $(v before 16 "$r" pool_2s)" \
      "$(v async 16 "$r" async_2s) $(v torch 16 "$r" torch_2s)"
  done | awk '
    function mx(a, b) { return a == "-" ? b : (b == "-" || a + 0 > b + 0 ? a : b) }
    function x(a, b) { return (a == "-" || b == "-" || b + 0 == 0) ? "-" : sprintf("%.1fx", a / b) }
    { inc = mx($5, $6)
      printf "%-4s %-5s |", $1, $2
      for (i = 3; i <= 6; i++) printf " %9s", $i
      printf " | %7s | %7s %7s | %5s\n", inc, x($3, inc), x($4, inc),
        (($3 == "-" || $4 == "-") ? "-" : sprintf("%.2f", $3 / $4)) }'
} > "$out/rounds.txt"
cat "$out/rounds.txt" >> "$sum"
{
  echo
  echo "per column over the rounds that have it: median, min, max, max/min (the spread)"
  # rounds.txt rows of numbers: thr round | cells... | ratios...
  awk '$2 ~ /^[0-9]+$/ && $3 == "|" {
      if ($1 == 1) { split("after marker before async torch after_pin async_pin torch_pin | inc inc_pin | x_after x_marker x_before x_after_pin | a/b a/m", nm, " ") }
      else { split("after before async torch | inc | x_after x_before | a/b", nm, " ") }
      for (i = 4; i <= NF; i++) { k = $1 SUBSEP nm[i - 3]; if ($i == "|" || $i == "-") continue
        val = $i; sub(/x$/, "", val); n[k]++; d[k, n[k]] = val + 0
        if (!(k in seen)) { seen[k] = 1; order[++no] = k } } }
    END { for (o = 1; o <= no; o++) { k = order[o]; m = n[k]
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
          if (d[k, j] < d[k, i]) { tmp = d[k, i]; d[k, i] = d[k, j]; d[k, j] = tmp }
        med = m % 2 ? d[k, (m + 1) / 2] : (d[k, m / 2] + d[k, m / 2 + 1]) / 2
        split(k, kk, SUBSEP)
        printf "thr %-3s %-12s median %9.3f  min %9.3f  max %9.3f  max/min %5.2f  (n=%d)\n",
          kk[1], kk[2], med, d[k, 1], d[k, m], (d[k, 1] > 0 ? d[k, m] / d[k, 1] : 0), m } }' \
    "$out/rounds.txt"
  echo
  echo "serving (requests/s, cpu us/req, p50/p99 us, peak MiB reserved/in use):"
  for w in after marker before; do
    [ -f "$out/serving_$w.log" ] && grep '^serving' "$out/serving_$w.log" | sed "s|^|$w: |"
  done
  echo
  echo "drvcalls (pool_2s, 1 thread; request thread's driver calls per op):"
  for w in after marker; do
    [ -f "$out/count_$w.log" ] && grep -E '^(overhead|drvcalls)' "$out/count_$w.log" | sed "s|^|$w: |"
  done
  echo
  echo "diag lines (pool_2s; slabs: issue 10's 16-thread regression):"
  for f in "$out"/t*_r*_after*.log "$out"/t*_r*_marker.log "$out"/t*_r*_before.log; do
    [ -f "$f" ] && grep '^diag' "$f" | sed "s|^|$(basename "$f" .log): |"
  done
  echo
  echo "logs: $out (exit $rc, $(($(date +%s) - start)) s)"
} >> "$sum"
sed -n '/^pool_2s, M ops/,$p' "$sum"
exit $rc
