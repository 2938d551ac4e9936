#!/usr/bin/env bash
d=.devcarry/engine4; o=$1
A="--modes sync,engine --samples 3000 --rate-ops 30000 --idle-ms 20 --remote"
{
date -u
for r in 1 2 3 4; do echo "=== remote_$r"; timeout 14 $d/engine_bench $A; done
date -u
} > $o 2>&1
