#!/usr/bin/env bash
# Every row of issue 11's table in one run, ledger and mutex design side by
# side with the ceiling loop, plus the tail evidence; for the GPU host (16
# cores, H200). Needs only the binaries of tools/gpu_build.sh.
#
#   tools/gpu_build.sh                       # here: gpu-bin/ (carry it)
#   gpu-bin/issue11_run.sh [--quick] [BIN_DIR] OUT_DIR   # there
#   bench/plot.sh OUT_DIR/ledger.json OUT_DIR/ledger.png # back here
# Through the device tool (it returns at most 8 files), write to a scratch
# folder and tar it:  gpu-bin/issue11_run.sh /tmp/i11 > $OUT/run.log 2>&1;
#                     tar czf $OUT/issue11.tgz -C /tmp i11
#
# Writes into OUT_DIR:
#   host.txt          date, CPU, kernel, what the binaries were built from
#   ledger.log/.json  ledger_bench, every workload (private, ceiling + shared,
#                     serving with the reader unpaced, backlog, holds misses):
#                     rows 1-7 of the table
#   paced.log/.json   serving with the reader paced to 100 000 queries/s
#                     (row 6's second target)
#   pool.log/.json    private and shared, ledger only, with the segment pool
#                     raised to 256 MiB (--pool-limit): the tail's fix without
#                     a code change, next to ledger.log's default pool
#   evidence*.log     ledger_evidence_bench (hooked ledger: slower, never
#                     quoted for speed): what the p99.9 enqueues were doing,
#                     default pool and 256 MiB
#   cuda.log/.json    cuda_bench --repeat 5 on the real driver: rows 8-9
# --quick: 0.3 s rows, fewer thread counts (a check of the script, not data).
set -uo pipefail

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
if [ $# -eq 2 ]; then
  bin=$(cd "$1" && pwd)
  out=$2
elif [ $# -eq 1 ]; then
  bin=$(cd "$(dirname "$0")" && pwd)
  out=$1
else
  echo "usage: $0 [--quick] [BIN_DIR] OUT_DIR" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

secs=0.7
esecs=0.5
psecs=0.5
threads=()
if [ $quick -eq 1 ]; then
  secs=0.3
  esecs=0.3
  psecs=0.3
  threads=(--threads 1,2)
fi
pool=$((256 * 1024 * 1024))
status=0

# step NAME LIMIT_S CMD...: runs CMD with its output in $out/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  echo "=== $name: $*"
  local t0=$SECONDS
  timeout "$limit" "$@" >> "$out/$name.log" 2>&1
  local rc=$?
  echo "    rc=$rc in $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || status=1
}

{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host:    $(hostname)"
  echo "cpus:    $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-))"
  echo "kernel:  $(uname -r)"
  echo "thp:     $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  command -v nvidia-smi > /dev/null && nvidia-smi -L
  [ -f "$bin/BUILD_INFO.txt" ] && sed 's/^/build:   /' "$bin/BUILD_INFO.txt"
} > "$out/host.txt" 2>&1
cat "$out/host.txt"

step ledger 150 "$bin/ledger_bench" --repeat 1 --seconds $secs "${threads[@]}" \
  --json "$out/ledger.json"
step paced 60 "$bin/ledger_bench" --workload serving --reader-rate 100000 \
  --repeat 1 --seconds $psecs "${threads[@]}" --json "$out/paced.json"
step pool 60 "$bin/ledger_bench" --impl ledger --workload private --repeat 1 \
  --seconds $psecs "${threads[@]}" --pool-limit $pool --json "$out/pool-private.json"
step pool 60 "$bin/ledger_bench" --impl ledger --workload shared --repeat 1 \
  --seconds $psecs "${threads[@]}" --pool-limit $pool --json "$out/pool-shared.json"
if [ -x "$bin/ledger_evidence_bench" ]; then
  for w in private shared; do
    step evidence 60 "$bin/ledger_evidence_bench" --workload $w --seconds $esecs \
      "${threads[@]}"
    step evidence-pool256m 60 "$bin/ledger_evidence_bench" --workload $w \
      --seconds $esecs "${threads[@]}" --pool-limit $pool
  done
fi
if [ $quick -eq 1 ]; then
  step cuda 60 "$bin/cuda_bench" --repeat 2 --calls 2000 --threads 1,2 \
    --json "$out/cuda.json"
else
  step cuda 120 "$bin/cuda_bench" --repeat 5 --json "$out/cuda.json"
fi
grep -h -E '^(ceiling|private|shared) |of ceiling' "$out/ledger.log" > /dev/null ||
  status=1
echo "=== done (status $status): $out"
exit $status
