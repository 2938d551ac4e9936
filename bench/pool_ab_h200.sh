#!/usr/bin/env bash
# Issue 10, before/after in one run on the GPU host: the pool's overhead
# cells (pool_af, pool_2s, async_af, async_2s) of BIN's pool_bench and of
# BEFORE's, interleaved (after, before, before, after: each binary's runs
# surround the other's, so a drift of the host hits both), threads
# 1,2,4,8,16; PyTorch's torch_af / torch_2s (and its serving rows) once,
# from pool_torch.cpp built here against the installed PyTorch if that
# build works; the serving cells once per binary; then pool_2s of BIN at 1
# and 16 threads with --count-driver (driver calls per iteration, on the
# request threads and the others), with the engine placing the markers (the
# default since issue 9's pacing) and with the issuers placing them. SUMMARY.txt: per thread count the mean
# of each cell over its rounds, and the pool's ratio to the faster
# incumbent (issue 10's targets: >= 10x at 1 thread, >= 100x at 16), for
# BIN and BEFORE. Every step is under `timeout`, and a step that would not
# fit in the wall-time budget is skipped (said in SUMMARY.txt).
#
# Usage, from the repository root (the lead's device call):
#   bench/pool_ab_h200.sh gpu-bin .devcarry/gpu-bin-7856fa6 $OUT/pool_ab
# Knobs (environment; the defaults are the H200 run's, ~150-200 s):
#   POOL_AB_MS=400  POOL_AB_THREADS=1,2,4,8,16  POOL_AB_ROUNDS=2
#   POOL_AB_SERVE_MS=300  POOL_AB_BUDGET_S=230  POOL_AB_ARGS= (extra
#   pool_bench arguments for both binaries, e.g. --driver=host to try it
#   without a GPU: bench/pool_ab_h200.sh BIN BEFORE OUT with
#   POOL_AB_ARGS=--driver=host POOL_AB_MS=30 POOL_AB_THREADS=1,2)
set -uo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN BEFORE OUT" >&2; exit 2; }
bin=$1 before=$2 out=$3
ms=${POOL_AB_MS:-400}
threads=${POOL_AB_THREADS:-1,2,4,8,16}
rounds=${POOL_AB_ROUNDS:-2}
serve_ms=${POOL_AB_SERVE_MS:-300}
budget=${POOL_AB_BUDGET_S:-230}
read -r -a extra <<< "${POOL_AB_ARGS:-}"
# shellcheck source=bench/ab_lib.sh
. "$(dirname "$0")/ab_lib.sh"
ab_init "pool A/B (issue 10)" \
  "after = $bin/pool_bench, before = $before/pool_bench; $ms ms per overhead cell, $rounds rounds each, threads $threads"

n_threads=$(echo "$threads" | tr ',' '\n' | grep -c .)
over_s=$((n_threads * 4 * (ms + 250) / 1000 + 20)) # 4 modes, setup per cell
for bdir in "$bin" "$before"; do
  [ -x "$bdir/pool_bench" ] || { echo "FAILED: no $bdir/pool_bench" | tee -a "$sum"; exit 1; }
done

# 1. The overhead cells, interleaved: A B, then B A, ...
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="after before"; else order="before after"; fi
  for which in $order; do
    if [ "$which" = after ]; then b=$bin; else b=$before; fi
    step "over_${which}_r$r" "$over_s" "$b/pool_bench" "${extra[@]}" --only overhead \
      --threads "$threads" --ms "$ms"
  done
done

# 2. PyTorch (built here; needs libtorch C++): torch_af, torch_2s, serving.
if ab_torch_build "$bin"; then
  step torch $((n_threads * 3 * (ms + 300) / 1000 + 20)) "$out/pool_torch" \
    --threads "$threads" --ms "$ms"
fi

# 3. Serving, once per binary; 4. driver calls per iteration (after only:
# before's pool_bench has no --count-driver; its diag lines give markers).
serve_s=$((n_threads * 2 * (serve_ms + 300) / 1000 + 20))
step serve_after "$serve_s" "$bin/pool_bench" "${extra[@]}" --only serving \
  --threads "$threads" --ms "$serve_ms"
step serve_before "$serve_s" "$before/pool_bench" "${extra[@]}" --only serving \
  --threads "$threads" --ms "$serve_ms"
step count_after 30 "$bin/pool_bench" "${extra[@]}" --only pool_2s --threads 1,16 \
  --ms "$ms" --count-driver
# The same with the issuers placing the markers (main's default until issue
# 9's pacing made the engine thread place them): separates that change from
# the pool's in the after/before ratio.
step count_after_pi 30 "$bin/pool_bench" "${extra[@]}" --only pool_2s --threads 1,16 \
  --ms "$ms" --count-driver --placement issuer

# The summary: means over rounds, ratios to the faster incumbent.
{
  echo
  echo "overhead, M ops/s (mean of $rounds rounds; min-max); ratio = pool / max(async, torch) of this run"
  awk -v rounds="$rounds" '
    FNR == 1 { f = FILENAME; sub(/.*\//, "", f); sub(/\.log$/, "", f)
               side = f ~ /before/ ? "before" : "after"; torch = f == "torch" }
    $1 == "overhead" && $4 == "|" {
      m = $2; t = $3; v = $5
      if (torch) key = m SUBSEP t
      else if (m ~ /^pool/) key = m (side == "before" ? "@before" : "") SUBSEP t
      else if (side == "after") key = m SUBSEP t
      else next                      # before'"'"'s async rows: same code
      n[key]++; s[key] += v
      if (!(key in lo) || v < lo[key]) lo[key] = v
      if (!(key in hi) || v > hi[key]) hi[key] = v
      ts[t] = 1
    }
    function mean(k) { return (k in n) ? s[k] / n[k] : 0 }
    function cellf(k) { return (k in n) ? sprintf("%.3f (%.3f-%.3f)", mean(k), lo[k], hi[k]) : "-" }
    function ratio(p, a, b,   inc) { inc = mean(a) > mean(b) ? mean(a) : mean(b)
      return inc > 0 && mean(p) > 0 ? sprintf("%.1fx", mean(p) / inc) : "-" }
    END {
      for (w = 1; w <= 2; w++) {
        x = w == 1 ? "af" : "2s"
        printf "\n%-4s | %-24s | %-24s | %-22s | %-22s | %-8s | %-8s\n", "thr", "pool_" x " after",
          "pool_" x " before", "async_" x, "torch_" x, "after", "before"
        for (t = 1; t <= 1024; t++) if (t in ts)
          printf "%-4d | %-24s | %-24s | %-22s | %-22s | %-8s | %-8s\n", t,
            cellf("pool_" x SUBSEP t), cellf("pool_" x "@before" SUBSEP t),
            cellf("async_" x SUBSEP t), cellf("torch_" x SUBSEP t),
            ratio("pool_" x SUBSEP t, "async_" x SUBSEP t, "torch_" x SUBSEP t),
            ratio("pool_" x "@before" SUBSEP t, "async_" x SUBSEP t, "torch_" x SUBSEP t)
      }
    }' "$out"/over_*.log $([ -f "$out/torch.log" ] && echo "$out/torch.log")
  echo
  echo "serving (req/s, cpu us, req-thr us, p50, p99, resv MiB, used MiB), once per binary:"
  for f in serve_after serve_before torch; do
    [ -f "$out/$f.log" ] && awk -v f="$f" '$1 == "serving" { print f ": " $0 }' "$out/$f.log"
  done
  echo
  echo "diag lines (pool rows): engine polls/markers/releases per op, recycled on request threads"
  for f in "$out"/over_after_r1.log "$out"/over_before_r1.log "$out"/serve_after.log "$out"/serve_before.log; do
    [ -f "$f" ] && grep '^diag' "$f" | sed "s|^|$(basename "$f" .log): |"
  done
  echo
  echo "driver calls per iteration, after (pool_2s, --count-driver; /pi: --placement issuer):"
  for f in count_after count_after_pi; do
    [ -f "$out/$f.log" ] && grep '^drvcalls\|^overhead\|^diag' "$out/$f.log"
  done
  echo
  echo "logs: $out (exit $rc, $(($(date +%s) - start)) s)"
} >> "$sum"
sed -n '/^overhead, M ops/,$p' "$sum"
exit $rc
