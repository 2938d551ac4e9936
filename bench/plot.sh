#!/bin/sh
# Turns ledger_bench's JSON into a PNG: for each threaded workload, throughput
# and p99.9 single-enqueue latency against threads, ledger and mutex side by
# side. Needs python3 (to read the JSON) and gnuplot (Debian: gnuplot-nox).
#
#   bazel run -c opt //bench:ledger_bench -- --json /tmp/bench.json
#   bench/plot.sh /tmp/bench.json bench/ledger_bench.png
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
