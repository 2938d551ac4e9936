#!/usr/bin/env bash
# PyTorch on the pool (issue 14) on a GPU host, in one run of about 90 s:
# copied into gpu-bin/ as torch_gpu_run.sh by tools/gpu_build.sh, beside libsl_torch.so (and the liburcu it loads from its own folder),
# sl_torch.py, torch_gpu_test.py and serve.py.
#   1. torch_gpu_test.py: PyTorch's allocator behaviours on the pool
#      (several streams, free under a running kernel, record_stream, stats,
#      out of memory and retry, empty_cache, threads);
#   2. serve.py, side by side: PyTorch's caching allocator, then the pool
#      (engine polled by the hooks, the default), and with WITH_THREAD=1
#      the pool with the engine thread ("pool+thr"), at each thread count
#      (default "1 4");
#      the first run (torch, 1 thread) saves its outputs and every pool run
#      checks its own against them (separate processes);
#   3. TABLE.txt: requests/s, p50/p99, peak reserved/allocated, CPU/request.
# Usage: torch_gpu_run.sh OUT_DIR [SECONDS_PER_CELL (5)] [THREADS ("1 4")]
#                         [WITH_THREAD (0)]
# Defaults take about 90 s on the H200 host (each process ~15 s of start-up:
# importing torch and transformers, building the model, warming up);
# WITH_THREAD=1 adds ~20 s per thread count.
# Exit status 0 when the test and every check passed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: torch_gpu_run.sh OUT_DIR [SECONDS] [THREADS]}
secs=${2:-5}
threads=${3:-1 4}
with_thread=${4:-0}
mkdir -p "$out"
so=$here/libsl_torch.so
rc=0
sum=$out/SUMMARY.txt
say() { echo "$*" | tee -a "$sum"; }
: > "$sum"
say "=== torch_gpu_run $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname), $(nproc) CPUs"
nvidia-smi -L 2>&1 | sed 's/^/gpu:    /' | tee -a "$sum"
say "python: $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "/ transformers", transformers.__version__)' 2>&1 | tail -1)"
[ -f "$here/BUILD_INFO.txt" ] && sed 's/^/build:  /' "$here/BUILD_INFO.txt" | tee -a "$sum"
say "ldd libsl_torch.so: $(ldd "$so" 2>&1 | awk '{print $1, $3}' | tr '\n' ' ')"

step() { # name, timeout, command...
  local name=$1 t=$2
  shift 2
  local t0=$SECONDS
  timeout "$t" "$@" > "$out/$name.log" 2>&1
  local r=$?
  [ $r -eq 0 ] || rc=1
  say "--- $name: exit $r ($((SECONDS - t0)) s): $*"
  grep -E '^(PASS|FAIL|INFO)|passed|Error|error' "$out/$name.log" | tail -20 | sed 's/^/    /' | tee -a "$sum"
}

cd "$here" || exit 2
step torch_gpu_test 45 python3 torch_gpu_test.py --so "$so"
first=1
for t in $threads; do
  if [ $first -eq 1 ]; then
    step "serve_torch_t$t" $((secs + 25)) python3 serve.py --allocator torch \
      --threads "$t" --seconds "$secs" --save "$out/ref.pt" --out "$out/serve_torch_t$t.json"
    first=0
  else
    step "serve_torch_t$t" $((secs + 25)) python3 serve.py --allocator torch \
      --threads "$t" --seconds "$secs" --out "$out/serve_torch_t$t.json"
  fi
  step "serve_pool_t$t" $((secs + 25)) python3 serve.py --allocator pool --so "$so" \
    --threads "$t" --seconds "$secs" --check "$out/ref.pt" --out "$out/serve_pool_t$t.json"
  if [ "$with_thread" = 1 ]; then
    step "serve_poolthr_t$t" $((secs + 25)) env SL_TORCH_ENGINE=thread python3 serve.py \
      --allocator pool --so "$so" --threads "$t" --seconds "$secs" --check "$out/ref.pt" \
      --out "$out/serve_poolthr_t$t.json"
  fi
done

python3 - "$out" <<'EOF' | tee "$out/TABLE.txt" | tee -a "$sum"
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "serve_*.json"))):
    with open(f) as h:
        rows.append(json.load(h))
order = {"torch": 0, "pool": 1, "pool+thr": 2}
rows.sort(key=lambda r: (r["threads"], order.get(r["allocator"], 3)))
print("allocator thr | req/s    p50 ms   p99 ms | resv MiB  alloc MiB | cpu ms/req | check")
for r in rows:
    c = r.get("check")
    chk = "-" if c is None else f"{'ok' if c['ok'] else 'FAILED'} {c['bit_exact']}/{c['compared']} exact, max diff {c['max_abs_diff']:.2g}"
    print(f"{r['allocator']:9} {r['threads']:3} | {r['req_per_s']:7.1f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} | "
          f"{r['reserved_peak_mib']:8.1f} {r['allocated_peak_mib']:10.1f} | {r['cpu_ms_per_req']:10.3f} | {chk}")
if rows:
    r = rows[0]
    print(f"(batch {r['batch']} x seq {r['seq']}, Llama 4 layers 512 wide, fp32; {r['gpu']}, torch {r['torch']})")
EOF
say "=== torch_gpu_run: exit $rc; logs in $out"
exit $rc
