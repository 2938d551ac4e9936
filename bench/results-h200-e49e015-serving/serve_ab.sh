#!/usr/bin/env bash
# Pool serving and pool_2s, before (7c73b4e) vs after (this tree), 2 interleaved rounds.
R="$OUT/ab"; mkdir -p "$R"; cd gpu-bin
{ nvidia-smi -L; nproc; date -u; cat BUILD_INFO.txt | head -3; cat pool_bench.before.commit; } > "$R/host.txt" 2>&1
for r in 1 2; do
  for v in before after; do
    b=./pool_bench; [ $v = before ] && b=./pool_bench.before
    timeout 40 $b --only serving --ms 500 > "$R/serving_${v}_$r.txt" 2>&1
    timeout 25 $b --only pool_2s --ms 500 > "$R/pool2s_${v}_$r.txt" 2>&1
  done
done
cd "$OUT" && tar czf ab.tgz ab && grep -h "^serving  pool \|^overhead pool_2s " ab/*_after_1.txt ab/*_before_1.txt | head -40
