#!/usr/bin/env bash
# Issue 11, tenth session (launch10; bench/RESULTS.md "Issue 11, tenth
# session: the launch row (launch10)"): the two rows of issue 11 through
# cuda/ — a kernel launch, one thread, <= +1 % over cuLaunchKernel raw, and
# cuEventRecord, one thread, <= +10 % — measured paired, before and after,
# on the GPU host (1 x H200, 16 vCPUs).
#
#   bench/launch10_h200.sh [--quick] BIN BEFORE OUT
#
# BIN and BEFORE are gpu-bin folders (tools/gpu_build.sh); each holds
# cuda_bench. Rounds of three steps, their order alternating (before,
# after, cached | cached, after, before | ...), so that a drift of the host
# or the GPU falls on every variant alike:
#   before  BEFORE/cuda_bench                          (no --paired there)
#   after   BIN/cuda_bench --paired
#   cached  BIN/cuda_bench --paired --cache-current    (the opt-in that
#           skips cuCtxGetCurrent; sl_cuda.h says what the caller promises)
# each `--ops launch,record --threads 1,2 --calls 10240 --repeat 7
# --sync-every 256` (every pass interleaves raw and layer batches of 256
# calls, each ended by its sync: the existing rows, unchanged).
#
# Three readings per variant, op and thread count, in SUMMARY.txt:
#   units    (BIN only: BEFORE's cuda_bench has no --paired) every unit of
#            four batches (raw, layer, layer, raw; ~4 ms for launches) of
#            every round pooled: the overhead's median [25th, 75th
#            percentile] in ns per call and in %, and how many units. The
#            reading that resolves 1 %: each unit's raw and layer calls are
#            a few ms apart on the same stream, context and thread.
#   passes   every timed pass of every round pooled (both binaries): the
#            pass's overhead (layer - raw) / raw over its 10 240 calls of
#            each side, median [IQR]. The reading BEFORE can give; the same
#            on BIN, so the two binaries compare on one footing.
#   rows     the old row (median of the passes' ns, then the ratio), median
#            over the rounds [min, max]: what issue 11's table printed.
# The target is judged on the units' median for BIN and on the passes'
# median for BEFORE (said so on each line).
# About 3 s per step on the H200 (~55 s in all); a step that would pass the
# budget (110 s) is not started and said so; each step is bounded by
# `timeout 25`. The JSON (every unit's times) is gzipped at the end: the
# folder stays ~200 KB. On this 2-core VM with the host driver the whole
# default configuration took 16 s.
#
# Usage, from the repository root (the lead's device call):
#   bench/launch10_h200.sh gpu-bin .devcarry/gpu-bin-daf8441 $OUT/launch10
# --quick: a check of the script (one round, 1 thread, 1 024 calls, 2
# passes); add CUDA_BENCH_ARGS=--driver=host where there is no GPU (times
# then mean nothing). Knobs (environment): LAUNCH10_ROUNDS=6
# LAUNCH10_THREADS=1,2 LAUNCH10_CALLS=10240 LAUNCH10_REPEAT=7
# LAUNCH10_BUDGET_S=110; CUDA_BENCH_ARGS is added to every step.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/gpu_args.sh
. "$here/gpu_args.sh"
gpu_args "$@"
rounds=${LAUNCH10_ROUNDS:-6}
threads=${LAUNCH10_THREADS:-1,2}
calls=${LAUNCH10_CALLS:-10240}
repeat=${LAUNCH10_REPEAT:-7}
budget=${LAUNCH10_BUDGET_S:-110}
if [ -n "$quick" ]; then
  rounds=1 threads=1 calls=1024 repeat=2 budget=60
fi
cb=$bin/cuda_bench
[ -x "$cb" ] || { echo "$0: no $cb" >&2; exit 2; }
"$cb" --help 2>&1 | grep -q -- --paired ||
  { echo "$0: $cb has no --paired" >&2; exit 2; }
have_before=1
[ -x "$before/cuda_bench" ] || have_before=
sum=$out/SUMMARY.txt
args="--ops launch,record --threads $threads --calls $calls --repeat $repeat --sync-every 256 --warmup 1024"
{
  gpu_header "launch10_h200.sh: cuda/ launch and record, raw vs through the layer, paired; before/after"
  echo "args:   $args ${CUDA_BENCH_ARGS:-} (after, cached: + --paired; cached: + --cache-current)"
  [ -n "$have_before" ] || echo "no $before/cuda_bench: before not run"
} > "$sum"
rc=0
start=$SECONDS
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
      before) [ -n "$have_before" ] && step before "$r" "$before/cuda_bench" ;;
      after) step after "$r" "$cb" --paired ;;
      cached) step cached "$r" "$cb" --paired --cache-current ;;
    esac
  done
done
timeout -k 2 20 python3 - "$out" >> "$sum" 2>&1 <<'PY' || rc=1
import glob, json, os, sys

out = sys.argv[1]
TARGET = {"launch": 1.0, "record": 10.0}


def q(v, p):  # nearest rank, as cuda_bench's quartiles
    v = sorted(v)
    return v[int(p * (len(v) - 1) + 0.5)]


def med(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


cells = {}  # (variant, op, threads) -> lists
for path in sorted(glob.glob(os.path.join(out, "*_*.json"))):
    v = os.path.basename(path).split("_")[0]
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{os.path.basename(path)}: unreadable ({e})")
        continue
    for row in d["rows"]:
        if row["op"] not in TARGET:
            continue
        c = cells.setdefault((v, row["op"], row["threads"]),
                             {"u_ns": [], "u_pct": [], "p_pct": [], "p_ns": [],
                              "rows": [], "raw": []})
        raw, lay = row["raw_ns_runs"], row["layer_ns_runs"]
        c["p_pct"] += [100 * (l - r) / r for r, l in zip(raw, lay)]
        c["p_ns"] += [l - r for r, l in zip(raw, lay)]
        c["rows"].append(row["overhead_pct"])
        c["raw"].append(row["raw_ns"])
        for r, l in zip(row.get("unit_raw_ns", []), row.get("unit_layer_ns", [])):
            c["u_ns"].append(l - r)
            c["u_pct"].append(100 * (l - r) / r)


def iqr(v, unit, fmt):
    return (f"{fmt % q(v, 0.5)}{unit} [{fmt % q(v, 0.25)}, {fmt % q(v, 0.75)}]")


print()
print("per variant, op, threads (ns per call, syncs included; overhead = layer - raw):")
for op in ("launch", "record"):
    order = {"before": 0, "after": 1, "cached": 2}
    for key in sorted((k for k in cells if k[1] == op),
                      key=lambda k: (k[2], order.get(k[0], 3))):
        v, _, t = key
        c = cells[key]
        print(f"{v:7s} {op:6s} {t:2d} thr: raw {med(c['raw']):.0f} ns (median over "
              f"{len(c['raw'])} rounds)")
        if c["u_ns"]:
            print(f"    units  ({len(c['u_ns'])}): {iqr(c['u_ns'], ' ns', '%+.1f')}, "
                  f"{iqr(c['u_pct'], ' %', '%+.2f')}")
        if c["p_pct"]:
            print(f"    passes ({len(c['p_pct'])}): {iqr(c['p_ns'], ' ns', '%+.1f')}, "
                  f"{iqr(c['p_pct'], ' %', '%+.2f')}")
        print(f"    rows   ({len(c['rows'])}): {med(c['rows']):+.2f} % "
              f"[{min(c['rows']):+.2f}, {max(c['rows']):+.2f}]")
        if t == 1:
            target = TARGET[op]
            if c["u_pct"]:
                m, how = q(c["u_pct"], 0.5), "units' median"
            else:
                m, how = q(c["p_pct"], 0.5), "passes' median (no units: no --paired)"
            print(f"    target <= +{target:.0f} %: {'met' if m <= target else 'MISSED'} "
                  f"({how} {m:+.2f} %)")
print()
print("after - before, the passes' median overheads (both binaries measured alike):")
for (v, op, t), c in sorted(cells.items()):
    b = cells.get(("before", op, t))
    if v == "before" or b is None or not c["p_ns"] or not b["p_ns"]:
        continue
    print(f"    {v:7s} {op:6s} {t:2d} thr: {q(c['p_ns'], 0.5) - q(b['p_ns'], 0.5):+.1f} ns, "
          f"{q(c['p_pct'], 0.5) - q(b['p_pct'], 0.5):+.2f} points")
print()
print("before has no --paired: its units are absent; compare it with after on "
      "the passes (both binaries) and read after's units for the 1 % question.")
PY
timeout -k 2 20 gzip -9f "$out"/*_*.json 2>/dev/null
echo "elapsed $((SECONDS - start)) s; logs and JSON (gzipped) in $out (exit $rc)" >> "$sum"
cat "$sum"
exit $rc
