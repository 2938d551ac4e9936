#!/usr/bin/env bash
# PyTorch on the pool (issue 14), before and after, on a GPU host, in at most
# ~235 s: run from the repository root as
#   bench/torch_h200.sh BIN BEFORE OUT [SECONDS_PER_CELL (3)]
# BIN and BEFORE: folders with libsl_torch.so (and the liburcu it loads),
# tools/gpu_build.sh's gpu-bin/ of this tree and of the commit compared
# against; BIN may also hold torch_trace_bench. The Python side is this
# tree's torch_alloc/ for every cell.
#   1. torch_gpu_test.py on BIN's library (PyTorch's allocator behaviours);
#   2. serve.py (a random Llama served from Python threads, fp32), one
#      process per cell: PyTorch's caching allocator ("torch"), BEFORE's
#      library ("before") and BIN's ("after"), at 1 and 4 threads,
#      TORCH_H200_ROUNDS rounds (default 2), interleaved (odd rounds torch,
#      before, after; even ones after, before, torch, per thread count).
#      bench/torch_cells.py runs them: per round every cell's process
#      starts at once (imports, model, warm-up in parallel: most of a
#      cell's time), then the cells serve one at a time, each alone (the
#      others parked idle: serve.py --hold). The first torch cell saves the
#      outputs of its first 32 requests and every pool cell checks its own
#      against them;
#   3. if time is left: serve.py on BIN's library with SL_TORCH_TRACE at 1
#      and 4 threads (40 requests), the traces gzipped, BIN's
#      torch_trace_bench replaying them on the host executor (where the
#      reserved bytes go at the peak, per size class: no GPU needed there)
#      and torch_alloc/caching_sim.py (PyTorch's allocator's rules) on them.
# SUMMARY.txt: every step, then per cell requests/s, p50/p99 latency, peak
# reserved and allocated MiB, for BIN's library the requested, allocated and
# held MiB when the reserved peak was set, host CPU ms per request (the
# whole process), the output check; then the mean of the rounds per allocator with the
# ratios to PyTorch's; then per thread count the device memory the cell's
# process used at its end (serve.py's process_used_mib, nvidia-smi per
# process: what the driver gave, its page rounding included), mean and
# ratio to PyTorch's. Every step runs under timeout; a step (or round) that would
# pass the budget (TORCH_H200_BUDGET seconds, default 235) is skipped and
# says so. TORCH_H200_PROCS=N (default off)
# adds per round the three allocators with serve.py --procs N (N processes
# of one thread each, no GIL between them; rows "torch Np" etc.);
# TORCH_H200_THREADS (default "1 4") the thread counts, TORCH_H200_TRACES=0
# no traces. Issue 14's final comparison, 1 and 4 threads and 4 processes,
# three rounds, at most 300 s on the H200 (16 vCPUs; a round of 9 cells,
# 21 processes starting at once, estimated 70-90 s; a round that would not
# fit is skipped and says so):
#   TORCH_H200_BUDGET=300 TORCH_H200_PROCS=4 TORCH_H200_ROUNDS=3 \
#     TORCH_H200_TRACES=0 bench/torch_h200.sh gpu-bin .devcarry/gpu-bin-cea4c18 OUT
# Exit 0 when every step that ran passed.
set -uo pipefail
bin=${1:?usage: torch_h200.sh BIN BEFORE OUT [SECONDS]}
before=${2:?usage: torch_h200.sh BIN BEFORE OUT [SECONDS]}
out=${3:?usage: torch_h200.sh BIN BEFORE OUT [SECONDS]}
secs=${4:-3}
budget=${TORCH_H200_BUDGET:-235}
procs=${TORCH_H200_PROCS:-0}
threads=${TORCH_H200_THREADS-1 4}
traces=${TORCH_H200_TRACES:-1}
rounds=${TORCH_H200_ROUNDS:-2}
case $procs in '' | *[!0-9]*) echo "TORCH_H200_PROCS must be a number" >&2; exit 2 ;; esac
case $rounds in '' | *[!0-9]*) echo "TORCH_H200_ROUNDS must be a number" >&2; exit 2 ;; esac
case $secs in '' | *[!0-9.]*) echo "SECONDS must be a number" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
py=$root/torch_alloc
for d in "$bin" "$before"; do
  if [ ! -f "$d/libsl_torch.so" ]; then
    echo "torch_h200.sh: no $d/libsl_torch.so" >&2
    exit 2
  fi
done
so_after=$(cd "$bin" && pwd)/libsl_torch.so
so_before=$(cd "$before" && pwd)/libsl_torch.so
bin_abs=$(cd "$bin" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
sum=$out/SUMMARY.txt
: >"$sum"
rc=0
t_start=$SECONDS
say() { echo "$*" | tee -a "$sum"; }

# step NAME LIMIT COMMAND...: runs it under timeout LIMIT unless that could
# pass the budget; its output in NAME.log, its last lines in the summary.
step() {
  local name=$1 limit=$2
  shift 2
  local used=$((SECONDS - t_start))
  if [ $((used + limit)) -gt "$budget" ]; then
    say "--- $name: SKIPPED (${used} s used, up to ${limit} s more would pass the ${budget} s budget)"
    return 0
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local r=$?
  [ $r -eq 0 ] || rc=1
  say "--- $name: exit $r ($((SECONDS - t0)) s): ${*##*/}"
  grep -E '^(PASS|FAIL|INFO)|passed|Error|error|SKIP' "$out/$name.log" | grep -v '^{' | tail -12 |
    sed 's/^/    /' | tee -a "$sum"
}

say "=== torch_h200 $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) CPUs, ${secs} s per cell"
nvidia-smi -L 2>&1 | head -4 | sed 's/^/gpu:    /' | tee -a "$sum"
for d in "$bin" "$before"; do
  [ -f "$d/BUILD_INFO.txt" ] && grep -E 'commit|built' "$d/BUILD_INFO.txt" | sed "s|^|$d: |" | tee -a "$sum"
done
say "tree:   $(git -C "$root" log --oneline -1 2>/dev/null || echo '?')"

step torch_gpu_test 45 python3 "$py/torch_gpu_test.py" --so "$so_after"

# The serving cells: per round all of them start at once and run one at a
# time (bench/torch_cells.py), in the order torch, before, after per
# parallelism in odd rounds and after, before, torch in even ones.
pars=
for t in $threads; do pars="$pars t$t"; done
[ "$procs" -gt 1 ] && pars="$pars p$procs"
round_args=()
for r in $(seq 1 "$rounds"); do
  order="torch before after"
  [ $((r % 2)) = 0 ] && order="after before torch"
  cells=
  for par in $pars; do
    for a in $order; do cells="$cells $a:$par"; done
  done
  [ -n "$cells" ] && round_args+=(--round "$cells")
done
# The traces' step, if it runs, needs ~40 s per thread count.
reserve=0
[ "$traces" = 1 ] && for t in $threads; do reserve=$((reserve + 40)); done
left=$((budget - (SECONDS - t_start) - reserve))
if [ ${#round_args[@]} -gt 0 ]; then
  timeout $((left > 10 ? left : 10)) python3 "$root/bench/torch_cells.py" "$out" \
    --serve "$py/serve.py" --seconds "$secs" --budget "$left" \
    --alloc torch=torch --alloc before="$so_before" --alloc after="$so_after" \
    "${round_args[@]}" >"$out/cells.log" 2>&1 || rc=1
  grep -E '^(---|===)' "$out/cells.log" | tee -a "$sum"
  rm -f "$out/ref.pt"
fi

# The traces (after), and their replay on the host executor.
[ "$traces" = 1 ] || threads=
for t in $threads; do
  step "trace_t$t" 40 env SL_TORCH_TRACE="$out/trace_t$t.txt" SL_TORCH_TRACE_MAX=400000 \
    python3 "$py/serve.py" --allocator pool --so "$so_after" --threads "$t" \
    --requests 40 --label trace --out "$out/trace_t$t.json"
  if [ -s "$out/trace_t$t.txt" ]; then
    if [ -x "$bin_abs/torch_trace_bench" ]; then
      step "replay_t$t" 30 "$bin_abs/torch_trace_bench" "$out/trace_t$t.txt" --classes
      [ -f "$out/replay_t$t.log" ] && sed -n '3,11s/^/    /p' "$out/replay_t$t.log" | tee -a "$sum"
    fi
    step "caching_sim_t$t" 30 python3 "$py/caching_sim.py" "$out/trace_t$t.txt"
    [ -f "$out/caching_sim_t$t.log" ] && sed 's/^/    /' "$out/caching_sim_t$t.log" | tee -a "$sum"
    gzip -f "$out/trace_t$t.txt"
  fi
done
rm -f "$out"/trace_t*.json

python3 - "$out" <<'EOF' | tee "$out/TABLE.txt" | tee -a "$sum"
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "serve_r*.json"))):
    with open(f) as h:
        r = json.load(h)
    r["round"] = int(os.path.basename(f).split("_")[1][1:])
    n = r.get("procs", 1)
    r["par"] = f"{n}p" if n > 1 else f"{r['threads']}t"
    r["par_key"] = (n > 1, n, r["threads"])
    rows.append(r)
order = {"torch": 0, "before": 1, "after": 2}
rows.sort(key=lambda r: (r["par_key"], r["round"], order.get(r["allocator"], 3)))
print("(thr: 1t, 4t = threads of one process; Np = N processes of one thread)")
print("allocator rnd thr | req/s    p50 ms   p99 ms | resv MiB  alloc MiB | at resv peak: req  alloc  held | cpu ms/req | check")
for r in rows:
    c = r.get("check")
    chk = "-" if c is None else f"{'ok' if c['ok'] else 'FAILED'} {c['bit_exact']}/{c['compared']} exact, max diff {c['max_abs_diff']:.2g}"
    x = r.get("extra", {})
    if "sl_torch.peak_allocated_bytes" in x:
        at = (f"{x.get('sl_torch.peak_requested_bytes', 0) / 2**20:6.1f} "
              f"{x['sl_torch.peak_allocated_bytes'] / 2**20:6.1f} {x['sl_torch.peak_held_bytes'] / 2**20:5.1f}")
    else:
        at = f"{'-':>6} {'-':>6} {'-':>5}"
    print(f"{r['allocator']:9} {r['round']:3} {r['par']:>3} | {r['req_per_s']:7.1f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} | "
          f"{r['reserved_peak_mib']:8.1f} {r['allocated_peak_mib']:10.1f} |        {at} | {r['cpu_ms_per_req']:10.3f} | {chk}")
print()
print("mean of the rounds   thr | req/s (x torch) | p99 ms | resv MiB (x torch) | cpu ms/req (x torch) | cells")
for key, t in sorted({(r["par_key"], r["par"]) for r in rows}):
    mean = {}
    for a in ("torch", "before", "after"):
        cs = [r for r in rows if r["par"] == t and r["allocator"] == a]
        if cs:
            mean[a] = {k: sum(c[k] for c in cs) / len(cs)
                       for k in ("req_per_s", "p99_ms", "reserved_peak_mib", "cpu_ms_per_req")}
            mean[a]["n"] = len(cs)
    ref = mean.get("torch")
    for a, m in mean.items():
        def x(k):
            return f"{m[k] / ref[k]:.3f}" if ref and ref[k] else "-"
        print(f"{a:20} {t:>3} | {m['req_per_s']:7.1f} ({x('req_per_s')}) | {m['p99_ms']:6.2f} | "
              f"{m['reserved_peak_mib']:8.1f} ({x('reserved_peak_mib')}) | {m['cpu_ms_per_req']:7.3f} ({x('cpu_ms_per_req')}) | {m['n']}")
# The device memory each cell's process used at its end, as the driver
# counts it (its page rounding included): serve.py's process_used_mib
# (nvidia-smi per process: right although the round's other cells sit
# parked on the device), else device_used_mib (cuMemGetInfo, device-wide:
# right only for a process alone on the device). One process per cell.
def used(r):
    x = r.get("extra", {})
    for k in ("process_used_mib", "device_used_mib"):
        if isinstance(x.get(k), (int, float)):
            return x[k], k
    return None, None


dev = [r for r in rows if r.get("procs", 1) == 1 and used(r)[0] is not None]
if dev:
    print()
    print(f"device memory in use at the end, MiB ({used(dev[0])[1]}: context, libraries, every block held)")
    print("mean of the rounds   thr | used MiB (x torch) | cells")
    for t in sorted({r["par"] for r in dev}, key=lambda p: int(p[:-1])):
        means = {}
        for a in ("torch", "before", "after"):
            v = [used(r)[0] for r in dev if r["par"] == t and r["allocator"] == a]
            if v:
                means[a] = (sum(v) / len(v), len(v))
        ref = means.get("torch", (0, 0))[0]
        for a, (m, n) in means.items():
            x = f"{m / ref:.3f}" if ref else "-"
            print(f"{a:20} {t:>3} | {m:8.1f} ({x}) | {n}")
if rows:
    r = rows[0]
    print(f"(batch {r['batch']} x seq {r['seq']}, Llama 4 layers 512 wide, fp32; {r['gpu']}, torch {r['torch']})")
EOF
say "=== torch_h200: exit $rc after $((SECONDS - t_start)) s; files in $out"
exit $rc
