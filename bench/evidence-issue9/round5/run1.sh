#!/usr/bin/env bash
# engine4 helper, device run 1: wake costs + the latency scenario's issue cost experiments
d=.devcarry/engine4; o=$1; mkdir -p $o
date -u > $o/date.txt; nproc >> $o/date.txt; lscpu | grep -iE "model name|thread|socket|hypervisor|numa node0" >> $o/date.txt
A="--modes sync,engine --samples 2000 --rate-ops 20000 --idle-ms 10"
timeout 15 $d/engine_bench_exp $A --contention > $o/e0a.log 2>&1
SLC_EXP_NAP_US=10 timeout 12 $d/engine_bench_exp $A > $o/nap10a.log 2>&1
SLC_EXP_SPIN=1 timeout 12 $d/engine_bench_exp $A > $o/spina.log 2>&1
timeout 40 $d/wake_bench --iters-ms 12 > $o/wake.log 2>&1
timeout 12 $d/engine_bench_exp $A > $o/e0b.log 2>&1
SLC_EXP_NAP_US=10 timeout 12 $d/engine_bench_exp $A > $o/nap10b.log 2>&1
SLC_EXP_NAP_US=20 timeout 12 $d/engine_bench_exp $A > $o/nap20.log 2>&1
SLC_EXP_SPIN=1 timeout 12 $d/engine_bench_exp $A > $o/spinb.log 2>&1
