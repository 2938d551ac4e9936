#!/usr/bin/env bash
# Issue 11, eleventh session (launch11; bench/RESULTS.md "Issue 11, eleventh
# session: the launch row (launch11)"): the row "through cuda/: kernel
# launch, one thread, <= +1 %" decided with a confidence interval, before
# and after side by side, on the GPU host (1 x H200, 16 vCPUs). The record
# row (<= +10 %) rides along: its passes cost ~1 % of the time.
#
#   bench/launch11_h200.sh [--quick] BIN BEFORE OUT
#
# BIN and BEFORE are gpu-bin folders (tools/gpu_build.sh); each holds
# cuda_bench. Rounds of three steps, their order alternating (before,
# after, cached | cached, after, before | ...), so that a drift of the host
# or the GPU falls on every variant alike:
#   before  BEFORE/cuda_bench --paired   (without --paired if that binary
#                                          has none: its passes only)
#   after   BIN/cuda_bench --paired
#   cached  BIN/cuda_bench --paired --cache-current  (the opt-in that skips
#           cuCtxGetCurrent; sl_cuda.h says what the caller promises)
# each `--ops launch,record --threads 1 --calls 10240 --repeat 20
# --sync-every 256 --warmup 1024`: one thread only (both rows are one
# thread's), and three times launch10's passes per step, so that the
# steps' start-up (a context, a module) costs less of the budget. 20
# units per pass (four batches of 256: raw, layer, layer, raw), so 400
# units per step and up to 6 400 per variant in the default 16 rounds
# (~2.2 s a step on the H200 by launch10's run: ~106 s; the budget below
# stops earlier if steps are slower).
#
# SUMMARY.txt, per variant and op:
#   units   median overhead [25th, 75th percentile] in ns and % over every
#           unit of every round, and its 95 % confidence interval by a
#           bootstrap that resamples whole passes (clusters of 20 units:
#           units of one pass share its drift, so resampling units alone
#           would claim more confidence than the data has; that narrower
#           interval is printed too for launch, for comparison).
#   passes  each timed pass's (layer - raw) / raw, median [IQR] (both
#           binaries, also one without --paired).
# The target, judged on the units' median and its interval (after and
# cached; before too if it has units): "met" if the interval's upper end
# is <= the target, "MISSED" if its lower end is above it, else
# "undecided" (the interval straddles the target). Then after - before and
# cached - after: the difference of the units' medians with its 95 %
# interval (passes resampled independently in each variant), and the same
# on the passes' medians.
# Budget: steps start while the elapsed time plus the slowest step so far
# stays within 115 s (LAUNCH11_BUDGET_S); each step is bounded by
# `timeout 25`, the analysis by `timeout 25` (14 s for 6 400 units per
# variant on the 2-core VM), the gzip by `timeout 5`: the script ends
# within 150 s.
# The JSON (every unit's times) is gzipped at the end (~1 MB in all).
#
# Usage, from the repository root (the lead's device call):
#   bench/launch11_h200.sh gpu-bin .devcarry/gpu-bin-2ed8e43 $OUT/launch11
# --quick: a check of the script (one round, 1 024 calls, 2 passes); add
# CUDA_BENCH_ARGS=--driver=host where there is no GPU (times then mean
# nothing). Knobs (environment): LAUNCH11_ROUNDS=16 LAUNCH11_CALLS=10240
# LAUNCH11_REPEAT=20 LAUNCH11_BUDGET_S=115 LAUNCH11_BOOT=800 (resamples);
# CUDA_BENCH_ARGS is added to every step.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$here/gpu_args.sh"
gpu_args "$@"
rounds=${LAUNCH11_ROUNDS:-16}
calls=${LAUNCH11_CALLS:-10240}
repeat=${LAUNCH11_REPEAT:-20}
budget=${LAUNCH11_BUDGET_S:-115}
boot=${LAUNCH11_BOOT:-800}
if [ -n "$quick" ]; then
  rounds=1 calls=1024 repeat=2 budget=60 boot=200
fi
cb=$bin/cuda_bench
[ -x "$cb" ] || { echo "$0: no $cb" >&2; exit 2; }
timeout 10 "$cb" --help 2>&1 | grep -q -- --paired ||
  { echo "$0: $cb has no --paired" >&2; exit 2; }
have_before=1 before_paired=
if [ -x "$before/cuda_bench" ]; then
  timeout 10 "$before/cuda_bench" --help 2>&1 | grep -q -- --paired &&
    before_paired=--paired
else
  have_before=
fi
sum=$out/SUMMARY.txt
args="--ops launch,record --threads 1 --calls $calls --repeat $repeat --sync-every 256 --warmup 1024"
{
  gpu_header "launch11_h200.sh: cuda/ launch (and record), one thread, raw vs through the layer, paired units with a bootstrap interval; before/after"
  echo "args:   $args ${CUDA_BENCH_ARGS:-} (after, cached: + --paired; cached: + --cache-current; before: ${before_paired:-no --paired})"
  [ -n "$have_before" ] || echo "no $before/cuda_bench: before not run"
} > "$sum"
rc=0
start=0 # the budget counts from the script's start (SECONDS), header included
last=4 # seconds the slowest step took so far (the budget's estimate)
step() { # variant round command...
  local v=$1 r=$2 t0=$SECONDS
  shift 2
  if [ $((SECONDS - start + last)) -gt "$budget" ]; then
    echo "$v round $r not started: $((SECONDS - start)) s used of $budget" >> "$sum"
    return
  fi
  # shellcheck disable=SC2086 # args, CUDA_BENCH_ARGS: words on purpose
  timeout -k 2 25 "$@" $args ${CUDA_BENCH_ARGS:-} \
    --json "$out/${v}_$r.json" > "$out/${v}_$r.log" 2>&1 ||
    { rc=1; echo "$v round $r: exit $? (see ${v}_$r.log)" >> "$sum"; }
  [ $((SECONDS - t0)) -gt "$last" ] && last=$((SECONDS - t0))
}
for r in $(seq 1 "$rounds"); do
  order="before after cached"
  [ $((r % 2)) -eq 0 ] && order="cached after before"
  for v in $order; do
    case $v in
      before) [ -n "$have_before" ] &&
        step before "$r" "$before/cuda_bench" ${before_paired:+"$before_paired"} ;;
      after) step after "$r" "$cb" --paired ;;
      cached) step cached "$r" "$cb" --paired --cache-current ;;
    esac
  done
done
echo "steps done after $((SECONDS - start)) s" >> "$sum"
timeout -k 2 25 python3 - "$out" "$boot" >> "$sum" 2>&1 <<'PY' || rc=1
import glob, json, os, random, sys

out, B = sys.argv[1], int(sys.argv[2])
TARGET = {"launch": 1.0, "record": 10.0}
ORDER = {"before": 0, "after": 1, "cached": 2}
rng = random.Random(11)


def q(v, p):  # nearest rank, as cuda_bench's quartiles
    v = sorted(v)
    return v[int(p * (len(v) - 1) + 0.5)]


def med(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def boot_medians(clusters):
    """B medians of the pooled values of len(clusters) clusters drawn with
    replacement (a cluster: one pass's units; a pass: one value)."""
    k = len(clusters)
    res = []
    for _ in range(B):
        pool = []
        for c in rng.choices(clusters, k=k):
            pool.extend(c)
        res.append(med(pool))
    return res


def ci(meds):
    return q(meds, 0.025), q(meds, 0.975)


cells = {}  # (variant, op) -> {"u_pct": [[...] per pass], "u_ns": ..., "p_pct": [...], ...}
for path in sorted(glob.glob(os.path.join(out, "*_*.json"))):
    v = os.path.basename(path).split("_")[0]
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{os.path.basename(path)}: unreadable ({e})")
        continue
    for row in d["rows"]:
        if row["op"] not in TARGET or row["threads"] != 1:
            continue
        c = cells.setdefault((v, row["op"]), {"u_pct": [], "u_ns": [], "p_pct": [],
                                              "p_ns": [], "raw": []})
        raw, lay = row["raw_ns_runs"], row["layer_ns_runs"]
        c["p_pct"] += [100 * (l - r) / r for r, l in zip(raw, lay)]
        c["p_ns"] += [l - r for r, l in zip(raw, lay)]
        c["raw"] += raw
        ur, ul = row.get("unit_raw_ns", []), row.get("unit_layer_ns", [])
        if not ur:
            continue
        per = len(ur) // len(raw) if raw and len(ur) % len(raw) == 0 else len(ur)
        for i in range(0, len(ur), per):  # one cluster per pass
            c["u_ns"].append([l - r for r, l in zip(ur[i:i + per], ul[i:i + per])])
            c["u_pct"].append([100 * (l - r) / r
                               for r, l in zip(ur[i:i + per], ul[i:i + per])])

flat = lambda cl: [x for c in cl for x in c]
print()
print(f"per variant and op, one thread (ns per call, syncs included; overhead = "
      f"layer - raw; 95 % intervals: {B} bootstrap resamples of whole passes):")
boots = {}
for op in ("launch", "record"):
    for key in sorted((k for k in cells if k[1] == op), key=lambda k: ORDER.get(k[0], 3)):
        v = key[0]
        c = cells[key]
        print(f"{v:7s} {op:6s}: raw {med(c['raw']):.0f} ns (median over {len(c['raw'])} passes)")
        verdict_on = None
        if c["u_pct"]:
            up, un = flat(c["u_pct"]), flat(c["u_ns"])
            bp = boots[(v, op, "u")] = boot_medians(c["u_pct"])
            lo, hi = ci(bp)
            alone = ""
            if op == "launch":  # the row to decide; the rest: time
                ulo, uhi = ci(boot_medians([[x] for x in up]))
                alone = f"; units resampled alone: [{ulo:+.2f}, {uhi:+.2f}]"
            print(f"    units  ({len(up)} in {len(c['u_pct'])} passes): median "
                  f"{med(un):+.1f} ns, {med(up):+.2f} % [CI {lo:+.2f}, {hi:+.2f}]; "
                  f"IQR {q(up, 0.25):+.2f}..{q(up, 0.75):+.2f} %{alone}")
            verdict_on = (med(up), lo, hi, "units' median")
        bpp = boots[(v, op, "p")] = boot_medians([[x] for x in c["p_pct"]])
        plo, phi = ci(bpp)
        print(f"    passes ({len(c['p_pct'])}): {med(c['p_ns']):+.1f} ns, "
              f"{med(c['p_pct']):+.2f} % [CI {plo:+.2f}, {phi:+.2f}]; IQR "
              f"{q(c['p_pct'], 0.25):+.2f}..{q(c['p_pct'], 0.75):+.2f} %")
        if verdict_on is None:
            verdict_on = (med(c["p_pct"]), plo, phi, "passes' median (no units)")
        m, lo, hi, how = verdict_on
        t = TARGET[op]
        verdict = "met" if hi <= t else "MISSED" if lo > t else "undecided"
        print(f"    target <= +{t:.0f} %: {verdict} ({how} {m:+.2f} %, 95 % CI "
              f"[{lo:+.2f}, {hi:+.2f}])")
print()
print("differences of the medians (95 % CI; each variant's passes resampled "
      "independently):")
for op in ("launch", "record"):
    for a, b in (("after", "before"), ("cached", "after")):
        for kind, name in (("u", "units"), ("p", "passes")):
            ka, kb = (a, op, kind), (b, op, kind)
            if ka not in boots or kb not in boots:
                continue
            ca, cb = cells[(a, op)], cells[(b, op)]
            ma = med(flat(ca["u_pct"])) if kind == "u" else med(ca["p_pct"])
            mb = med(flat(cb["u_pct"])) if kind == "u" else med(cb["p_pct"])
            d = [x - y for x, y in zip(boots[ka], boots[kb])]
            lo, hi = ci(d)
            print(f"    {op:6s} {a} - {b}, {name:6s}: {ma - mb:+.2f} points "
                  f"[CI {lo:+.2f}, {hi:+.2f}]")
PY
timeout -k 1 5 gzip -9f "$out"/*_*.json 2>/dev/null
echo "elapsed $((SECONDS - start)) s; logs and JSON (gzipped) in $out (exit $rc)" >> "$sum"
cat "$sum"
exit $rc
