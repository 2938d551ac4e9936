#!/usr/bin/env bash
d=.devcarry/engine4; o=$1
A="--modes sync,engine --samples 2000 --rate-ops 30000 --idle-ms 10"
{ date -u
for r in 1 2; do echo "=== threads_$r"; timeout 12 $d/engine_bench $A; done
date -u; } > $o 2>&1
