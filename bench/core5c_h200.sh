#!/usr/bin/env bash
# Issue 11, sixth session (core5c: private streams at 16 threads), on the GPU
# host (1 x H200, 16 vCPUs): where the private rows lose from 8 to 16
# threads (95 % -> 86 % of linear in the last run), BIN against BEFORE.
#   - ledger_bench --workload private --impl ledger at 1, 8, 15, 16 threads,
#     BIN and BEFORE interleaved (order alternating), 3 rounds of 0.7 s rows;
#     per round and binary the fraction of linear, ops/s(N) / (N x
#     ops/s(1)), at 8, 15 and 16 threads, and the medians. 15 threads leave
#     one CPU to liburcu's call_rcu thread (the candidate cause: at 16 every
#     CPU runs a pinned worker).
#   - ledger_evidence_bench of BIN (and of BEFORE, whose older binary lacks
#     the thread lines), private at the same thread counts: the workers' own
#     on-CPU ns per op against wall x workers, their runnable-but-waiting
#     time and involuntary switches, the call_rcu thread's CPU time and last
#     CPU, call_rcu and grace periods per op, membarrier IPIs (CAL) per
#     worker CPU, and the worker CPUs' steal/irq time; tabled in SUMMARY.txt.
#   - host.txt: the CPU topology (which vCPUs share a core), since 16 vCPUs
#     may be 8 cores with two threads each.
# About 40 s on 16 cores (every step under timeout; budget 85 s: a step that
# would pass it is skipped and said so). The folder stays small (~60 KB).
# From the repository root:
#   bench/core5c_h200.sh gpu-bin .devcarry/gpu-bin-cea4c18 $OUT/core5c
# --quick: one round of 0.05 s rows at threads CORE5C_THREADS (default
# 1,2), a check of the script on a small machine; its times mean nothing.
set -uo pipefail
# shellcheck source=bench/gpu_args.sh
. "$(dirname "${BASH_SOURCE[0]}")/gpu_args.sh"
gpu_args "$@"
budget=85
secs=0.7
rounds=3
thr=${CORE5C_THREADS:-1,8,15,16}
if [ -n "$quick" ]; then
  secs=0.05
  rounds=1
  thr=${CORE5C_THREADS:-1,2}
fi
t0=$SECONDS
status=0
sum=$out/SUMMARY.txt

# step NAME LIMIT COMMAND...: under timeout, output in OUT/NAME.log, unless
# LIMIT seconds would pass the budget (then SKIPPED in SUMMARY.txt).
step() {
  local name=$1 lim=$2
  shift 2
  if [ $((SECONDS - t0 + lim)) -gt $budget ]; then
    echo "SKIPPED $name: ${lim} s would pass the ${budget} s budget" | tee -a "$sum"
    return 0
  fi
  echo "=== $name ($((SECONDS - t0)) s): $*"
  timeout -k 3 "$lim" "$@" > "$out/$name.log" 2>&1
  local e=$?
  if [ $e -ne 0 ]; then
    status=1
    echo "FAILED: $name (exit $e)" | tee -a "$sum"
  fi
}

{
  echo "core5c (issue 11, private at 16 threads): $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(hostname), $(nproc) CPUs; rows: private, ledger only, threads $thr,"
  echo "  ${secs} s after 0.2 s warm-up, $rounds round(s), BIN and BEFORE interleaved"
  for d in "$bin" "$before"; do
    [ -f "$d/BUILD_INFO.txt" ] && head -3 "$d/BUILD_INFO.txt" | sed "s|^|$d: |"
  done
} > "$sum"
{
  lscpu 2>/dev/null
  echo
  lscpu -e 2>/dev/null
  echo
  for c in /sys/devices/system/cpu/cpu[0-9]*; do
    [ -r "$c/topology/thread_siblings_list" ] &&
      echo "$(basename "$c") siblings $(cat "$c/topology/thread_siblings_list")"
  done
} > "$out/host.txt" 2>&1
sib=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)
echo "cpu0's hardware threads: ${sib:-unknown} (host.txt: the whole topology)" >> "$sum"

for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="bin before"; else order="before bin"; fi
  for who in $order; do
    if [ "$who" = bin ]; then d=$bin; else d=$before; fi
    step "r${r}-$who" 12 "$d/ledger_bench" --workload private --impl ledger \
      --threads "$thr" --seconds "$secs" --repeat 1 --json "$out/r${r}-$who.json"
  done
done
for who in bin before; do
  if [ "$who" = bin ]; then d=$bin; else d=$before; fi
  step "evidence-$who" 15 "$d/ledger_evidence_bench" --workload private \
    --threads "$thr" --seconds "$secs" --repeat 1
done

python3 - "$out" "$rounds" >> "$sum" <<'EOF'
import json, os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])

def rows(path):
    try:
        with open(path) as f:
            return {r["threads"]: r for r in json.load(f)["rows"]
                    if r.get("workload") == "private" and r.get("impl") == "ledger"}
    except (OSError, ValueError, KeyError):
        return None

print("\nprivate streams, fraction of linear = ops/s(N) / (N x ops/s(1)), per round")
frac = {"bin": {}, "before": {}}
mops = {"bin": {}, "before": {}}
for r in range(1, rounds + 1):
    for who in ("bin", "before"):
        rs = rows(os.path.join(out, "r%d-%s.json" % (r, who)))
        if not rs or 1 not in rs:
            print("  round %d %-6s: no rows" % (r, who))
            continue
        one = rs[1]["ops_per_s"]
        cells = []
        for n in sorted(rs):
            mops[who].setdefault(n, []).append(rs[n]["ops_per_s"] / 1e6)
            if n == 1:
                cells.append("1 thr %.2f M ops/s (%.1f ns/op)" % (one / 1e6, rs[1]["ns_per_op"]))
                continue
            f = rs[n]["ops_per_s"] / (n * one)
            frac[who].setdefault(n, []).append(f)
            cells.append("%d thr %.1f %% (%.1f ns/op)" % (n, 100 * f, rs[n]["ns_per_op"]))
        print("  round %d %-6s: %s" % (r, who, "; ".join(cells)))
print("\nmedians over the rounds (target: 16 threads >= 90 % of linear)")
print("  %-7s %-10s %-16s %-16s %s" % ("threads", "", "BIN", "BEFORE", "BIN/BEFORE ops/s"))
for n in sorted(set(mops["bin"]) | set(mops["before"])):
    b, a = mops["bin"].get(n, []), mops["before"].get(n, [])
    mb = statistics.median(b) if b else float("nan")
    ma = statistics.median(a) if a else float("nan")
    print("  %-7d %-10s %-16s %-16s %.3f" % (n, "M ops/s", "%.2f" % mb, "%.2f" % ma,
                                             mb / ma if a and b else float("nan")))
    if n != 1:
        fb, fa = frac["bin"].get(n, []), frac["before"].get(n, [])
        print("  %-7d %-10s %-16s %-16s" % (
            n, "of linear",
            "%.1f %%" % (100 * statistics.median(fb)) if fb else "-",
            "%.1f %%" % (100 * statistics.median(fa)) if fa else "-"))

# The evidence table: one line per row of each evidence log.
num = r"([-0-9.e+]+)"
pats = {
    "wall": r"workers' ns per op: on CPU %s, wall x workers %s" % (num, num),
    "wait": r"runnable but waiting %s ms \(max one worker %s ms\), %s timeslices, switches voluntary %s involuntary %s" % (num, num, num, num, num),
    "other": r"other threads \(liburcu.*?\): %s, on CPU %s ms \(%s %% of one CPU; %s ns per retired segment" % (num, num, num, num),
    "rcu": r"RCU: %s call_rcu \(retired segments; %s per op\), ~%s grace periods \(%s per op\); %s callbacks" % (num, num, num, num, num),
    "cal": r"interrupts, per worker CPU per second .*? CAL %s" % num,
    "cpus": r"worker CPUs .*?irq %s softirq %s steal %s idle %s" % (num, num, num, num),
    "membar": r"membarrier %s \| %s \(" % (num, num),
    "wakes": r"futex %s \(wakes %s\) \| %s" % (num, num, num),
}
print("\nevidence (ledger_evidence_bench, private; hooks make its ops slower than the rows above):")
print("  ns/op own = the workers' own on-CPU ns per op; wall = wall x workers / ops; wait = the")
print("  workers' runnable-but-waiting ms in the row; invol = their involuntary switches;")
print("  rcu thr = the other threads' (call_rcu) CPU ms, % of one CPU, and last CPU;")
print("  cb/GP = callbacks (retired segments) per grace period; CAL = function-call IPIs per")
print("  worker CPU per s (membarrier); wakes = futex wakes of the call_rcu thread by the")
print("  workers; steal/irq = ms over the worker CPUs (/proc/stat); off-CPU = 1 - own/wall")
hdr = ("binary", "thr", "ns/op own", "wall", "off-CPU", "wait ms", "invol", "rcu thr ms",
       "%CPU", "last CPU", "call_rcu/op", "GP/op", "cb/GP", "membar", "wakes", "CAL/s",
       "steal", "irq+si")
print("  " + " ".join("%-10s" % h for h in hdr))
for who in ("bin", "before"):
    path = os.path.join(out, "evidence-%s.log" % who)
    try:
        text = open(path).read()
    except OSError:
        print("  %-11s no log" % who)
        continue
    blocks = re.split(r"\n  evidence private/ledger/", text)[1:]
    for b in blocks:
        t = b.split(":", 1)[0]
        m = {k: re.search(p, b) for k, p in pats.items()}
        def g(k, i):
            return m[k].group(i) if m[k] else "-"
        last = re.findall(r"\(other\): .*?last on CPU (-?\d+)", b)
        irq = "-"
        if m["cpus"]:
            irq = "%.0f" % (float(g("cpus", 1)) + float(g("cpus", 2)))
        membar = "-"
        if m["membar"]:
            membar = "%d" % (int(g("membar", 1)) + int(g("membar", 2)))
        off = "-"
        if m["wall"] and float(g("wall", 2)) > 0:
            off = "%.1f %%" % (100 * (1 - float(g("wall", 1)) / float(g("wall", 2))))
        cells = (who, t, g("wall", 1), g("wall", 2), off, g("wait", 1), g("wait", 5),
                 g("other", 2), g("other", 3), ",".join(last) or "-", g("rcu", 2),
                 g("rcu", 4), g("rcu", 5), membar, g("wakes", 2), g("cal", 1),
                 g("cpus", 3), irq)
        print("  " + " ".join("%-10s" % c for c in cells))
EOF
[ "${PIPESTATUS[0]}" = 0 ] || status=1
echo "wall: $((SECONDS - t0)) s; status $status" >> "$sum"
cat "$sum"
exit $status
