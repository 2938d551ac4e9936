#!/usr/bin/env bash
d=.devcarry/engine4; o=$1
A="--modes sync,engine --samples 3000 --rate-ops 30000 --idle-ms 20"
{
date -u
echo "=== probe_1"; timeout 14 $d/engine_bench $A --contention
echo "=== markers_1"; timeout 12 $d/engine_bench $A --markers-only
echo "=== probe_2"; timeout 12 $d/engine_bench $A
echo "=== markers_2"; timeout 12 $d/engine_bench $A --markers-only
echo "=== probe_3"; timeout 12 $d/engine_bench $A
echo "=== markers_3"; timeout 12 $d/engine_bench $A --markers-only
echo "=== wake part 2"; timeout 10 $d/wake_bench --iters-ms 1 | sed -n '/PART 2/,/clock reads/p'
date -u
} > $o 2>&1
