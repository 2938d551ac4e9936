#!/bin/sh
# Turns benchmark results into a PNG. Needs python3 and gnuplot (Debian:
# gnuplot-nox).
#   - ledger_bench's JSON: for each threaded workload, throughput and p99.9
#     single-enqueue latency against threads, ledger and mutex side by side:
#       bazel run -c opt //bench:ledger_bench -- --json /tmp/bench.json
#       bench/plot.sh /tmp/bench.json bench/ledger_bench.png
#   - the pool's table (TABLE.txt of bench/pool_h200.sh; any .txt file): the
#     allocator overhead (M ops/s) and the serving loop (requests/s, p99
#     latency, peak reserved memory) against threads, one line per allocator
#     and variant (pool, async = cuMemAllocAsync, torch; @before rows too):
#       bench/plot.sh bench/results-pool-h200/TABLE.txt bench/results-pool-h200/pool.png
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 RESULTS.json [OUT.png]" >&2
  exit 2
fi
json=$1
png=${2:-${json%.json}.png}
command -v gnuplot >/dev/null || { echo "$0: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "$0: python3 not found" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

case "$json" in
*.txt)
  # The pool's table: "bench mode thr | rate | cpu req | p50 p99 | resv used".
  python3 - "$json" "$dir" <<'PYEOF'
import sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = [p.split() for p in line.split("|")]
    if len(parts) != 5 or len(parts[0]) != 3 or parts[0][0] not in ("overhead", "serving"):
        continue
    bench, mode, thr = parts[0]
    try:
        p99 = float(parts[3][1]) if parts[3][1] != "-" else 0.0
        rows[(bench, mode)].append((int(thr), float(parts[1][0]), p99, float(parts[4][0])))
    except (ValueError, IndexError):
        continue
out = sys.argv[2]
names = {"overhead": [], "serving": []}
for (bench, mode), v in sorted(rows.items()):
    names[bench].append(mode)
    key = mode.replace("/", "_").replace("@", "_at_")
    with open(f"{out}/{bench}.{key}.dat", "w") as f:
        for t, rate, p99, resv in sorted(v):
            f.write(f"{t} {rate} {p99} {resv}\n")
with open(f"{out}/vars.gp", "w") as f:
    for b in names:
        f.write('%s_modes = "%s"\n' % (b, " ".join(names[b])))
        f.write('%s_keys = "%s"\n' % (b, " ".join(m.replace("/", "_").replace("@", "_at_") for m in names[b])))
PYEOF
  cat >"$dir/plot.gp" <<GPEOF
load "$dir/vars.gp"
if (words(overhead_modes) + words(serving_modes) == 0) { print "no pool rows in the table"; exit 1 }
set terminal pngcairo size 1200, 760 font ",10" noenhanced
set output "$png"
set multiplot layout 2, 2 title "stream-ordered pool vs cuMemAllocAsync vs PyTorch: $json"
set grid
set key top left font ",8"
set logscale x 2
set xlabel "threads"
set title "overhead: 4 KiB alloc (+ use on a 2nd stream) + free"
set ylabel "M ops/s (log)"
set logscale y 10
plot for [i = 1:words(overhead_keys)] "$dir/overhead.".word(overhead_keys, i).".dat" using 1:2 with linespoints lw 2 title word(overhead_modes, i)
# Serving: one panel per column of the data files (2 rate, 3 p99, 4 reserved).
array stitle[3] = ["serving: requests/s", "serving: p99 latency, issue to result checked", "serving: peak reserved memory, device + pinned"]
array sylabel[3] = ["requests/s", "us (log)", "MiB"]
do for [col = 2:4] {
  set title stitle[col - 1]
  set ylabel sylabel[col - 1]
  if (col == 3) { set logscale y 10; set yrange [*:*] } else { unset logscale y; set yrange [0:*] }
  plot for [i = 1:words(serving_keys)] "$dir/serving.".word(serving_keys, i).".dat" using 1:col with linespoints lw 2 title word(serving_modes, i)
}
unset multiplot
GPEOF
  gnuplot "$dir/plot.gp"
  echo "wrote $png"
  exit 0
  ;;
esac


# One data file per (workload, impl): threads, Mops/s, p99.9 in ns. The
# ceiling loop (issue 11) is drawn in the shared panels as a third line.
# Also a gnuplot fragment naming the workloads found and the machine.
python3 - "$json" "$dir" <<'EOF'
import json, sys
data = json.load(open(sys.argv[1]))
out = sys.argv[2]
order = ["private", "shared", "serving", "serving+reader"]
rows = [r for r in data["rows"] if r["workload"] in order]
found = [w for w in order if any(r["workload"] == w for r in rows)]
for w in found:
    for impl in ("ledger", "mutex"):
        sel = sorted((r for r in rows if r["workload"] == w and r["impl"] == impl),
                     key=lambda r: r["threads"])
        with open(f"{out}/{w}.{impl}.dat", "w") as f:
            for r in sel:
                f.write(f'{r["threads"]} {r["ops_per_s"] / 1e6:.4f} {r["p999_ns"]:.1f}\n')
ceil = sorted((r for r in data["rows"] if r["workload"] == "ceiling"), key=lambda r: r["threads"])
with open(f"{out}/ceiling.dat", "w") as f:
    for r in ceil:
        f.write(f'{r["threads"]} {r["ops_per_s"] / 1e6:.4f} {r["p999_ns"]:.1f}\n')
meta = data.get("meta", {})
title = f'streamledger bench: {meta.get("cpu_model", "?")}, {meta.get("cpus", "?")} CPUs, {meta.get("date", "")}'
with open(f"{out}/vars.gp", "w") as f:
    f.write('workloads = "%s"\n' % " ".join(found))
    f.write('title = "%s"\n' % title.replace('"', "'"))
    f.write("n = %d\n" % len(found))
    f.write("have_ceiling = %d\n" % (1 if ceil else 0))
EOF

cat >"$dir/plot.gp" <<EOF
load "$dir/vars.gp"
if (n == 0) { print "no threaded rows in the JSON"; exit 1 }
set terminal pngcairo size 1200, 320 * n + 60 font ",10" noenhanced
set output "$png"
set multiplot layout n, 2 title title
set grid
set key top left
set logscale x 2
set xlabel "threads"
set style line 1 lc rgb "#1f77b4" lw 2 pt 7 ps 1.2
set style line 2 lc rgb "#d62728" lw 2 pt 5 ps 1.2
set style line 3 lc rgb "#2ca02c" lw 2 pt 9 ps 1.2 dt 2
do for [i = 1:n] {
  w = word(workloads, i)
  set title w . ": throughput"
  set ylabel "M ops/s"
  unset logscale y
  set yrange [0:*]
  if (w eq "shared" && have_ceiling) {
    plot "$dir/".w.".ledger.dat" using 1:2 with linespoints ls 1 title "ledger (lock-free)", \
         "$dir/".w.".mutex.dat" using 1:2 with linespoints ls 2 title "mutex (original)", \
         "$dir/ceiling.dat" using 1:2 with linespoints ls 3 title "ceiling (fetch_add + slot write)"
  } else {
    plot "$dir/".w.".ledger.dat" using 1:2 with linespoints ls 1 title "ledger (lock-free)", \
         "$dir/".w.".mutex.dat" using 1:2 with linespoints ls 2 title "mutex (original)"
  }
  set title w . ": p99.9 single-enqueue latency"
  set ylabel "ns (log)"
  set logscale y 10
  set yrange [*:*]
  plot "$dir/".w.".ledger.dat" using 1:3 with linespoints ls 1 title "ledger (lock-free)", \
       "$dir/".w.".mutex.dat" using 1:3 with linespoints ls 2 title "mutex (original)"
}
unset multiplot
EOF

gnuplot "$dir/plot.gp"
echo "wrote $png"
