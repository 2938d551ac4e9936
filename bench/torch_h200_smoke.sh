#!/bin/bash
# Smoke test of bench/torch_h200.sh without a GPU or torch: a fake python3
# (and nvidia-smi) on PATH answers for serve.py and torch_gpu_test.py as
# they would (serve.py: READY and the wait for the go with --hold, a JSON
# per cell, its arguments logged when it goes), the real python3 runs
# bench/torch_cells.py and the script's table. Checks: the cells ran in the
# interleaved order with the right libraries and the reference saved once
# and checked by every pool cell, SUMMARY.txt has a row per cell and the
# means with ratios to torch (reserved, and the device memory in use at
# each cell's end), a budget too small skips steps and says so,
# bad arguments exit 2. torch_trace_bench (the real one) replays the fake
# run's trace. No timing.
set -eu
script=$1
replay=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}/h200
rm -rf "$tmp"
mkdir -p "$tmp/fake" "$tmp/bin" "$tmp/before"
real_py=$(command -v python3)
: >"$tmp/bin/libsl_torch.so"
: >"$tmp/before/libsl_torch.so"
cp "$replay" "$tmp/bin/torch_trace_bench"
cat >"$tmp/fake/nvidia-smi" <<'F'
#!/bin/sh
echo "GPU 0: fake"
F
cat >"$tmp/fake/python3" <<F
#!/bin/bash
case "\${1:-}" in
  *serve.py)
    shift
    args="\$*"
    out= thr=1 label=x so=none procs=1 hold=0 save=
    while [ \$# -gt 0 ]; do
      case \$1 in
        --out) out=\$2; shift ;; --threads) thr=\$2; shift ;;
        --label) label=\$2; shift ;; --so) so=\$2; shift ;;
        --save) save=\$2; shift ;;
        --procs) procs=\$2; shift ;; --hold) hold=1 ;;
      esac
      shift
    done
    # --hold: ready, then the go (torch_cells.py); the call is logged when
    # the cell goes, so the log has the order the cells ran in.
    if [ \$hold = 1 ]; then echo READY; read -r _; fi
    echo "serve.py \$args" >>"$tmp/calls.txt"
    [ -n "\$save" ] && : >"\$save"
    if [ -n "\${SL_TORCH_TRACE:-}" ]; then
      printf 'a 1 0 4096 0x1000\na 1 0 33554432 0x2000\nf 1 0 4096 0x1000\n' >"\$SL_TORCH_TRACE"
    fi
    case \$so in */before/*) resv=215 dev=720 ;; */bin/*) resv=190 dev=690 ;; *) resv=194 dev=700 ;; esac
    extra="{\\"device_used_mib\\": \$dev}"
    case \$so in */bin/*) extra="{\\"device_used_mib\\": \$dev, \\"sl_torch.peak_requested_bytes\\": 157286400, \\"sl_torch.peak_allocated_bytes\\": 167772160, \\"sl_torch.peak_held_bytes\\": 1048576}" ;; esac
    check=null
    [ "\$label" != torch ] && check='{"compared": 32, "bit_exact": 32, "max_abs_diff": 0.0, "ok": true}'
    json="{\"allocator\": \"\$label\", \"threads\": \$thr, \"procs\": \$procs, \"batch\": 8, \"seq\": 128, \"requests\": 900, \"seconds\": 3.0, \"req_per_s\": 300.0, \"p50_ms\": 3.0, \"p99_ms\": 5.0, \"reserved_peak_mib\": \$resv, \"allocated_peak_mib\": 166.0, \"cpu_ms_per_req\": 3.2, \"torch\": \"fake\", \"gpu\": \"fake\", \"errors\": [], \"extra\": \$extra, \"check\": \$check}"
    echo "\$json"
    [ -n "\$out" ] && echo "\$json" >"\$out"
    exit 0 ;;
  *torch_gpu_test.py)
    echo "PASS fake"; echo "torch_gpu_test: 8 passed, 0 failed"; exit 0 ;;
esac
exec "$real_py" "\$@"
F
chmod +x "$tmp/fake/python3" "$tmp/fake/nvidia-smi"
export PATH="$tmp/fake:$PATH"
fail=0
if ! "$script" "$tmp/bin" "$tmp/before" "$tmp/out" 1 >"$tmp/run.txt" 2>&1; then
  echo "FAIL: torch_h200.sh exited non-zero" >&2
  fail=1
fi
cat "$tmp/out/SUMMARY.txt"
want="torch before after torch before after after before torch after before torch trace trace"
got=$(sed -E 's/.*--label ([a-z]+).*/\1/' "$tmp/calls.txt" | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "$want" ]; then
  echo "FAIL: cells ran as '$got', wanted '$want'" >&2
  fail=1
fi
if [ "$(grep -c -- '--save' "$tmp/calls.txt")" != 1 ] ||
   [ "$(grep -c -- '--check' "$tmp/calls.txt")" != 8 ] ||
   [ "$(grep -- '--label before' "$tmp/calls.txt" | grep -c "$tmp/before/libsl_torch.so")" != 4 ] ||
   [ "$(grep -- '--label after' "$tmp/calls.txt" | grep -c "$tmp/bin/libsl_torch.so")" != 4 ]; then
  echo "FAIL: reference saved once, checked by the 8 pool cells, libraries per label" >&2
  fail=1
fi
for a in torch before after; do
  for t in 1t 4t; do
    if [ "$(grep -cE "^$a +[12] +$t \|" "$tmp/out/SUMMARY.txt")" != 2 ]; then
      echo "FAIL: not two rows for $a at $t threads" >&2
      fail=1
    fi
  done
done
if ! grep -qE '^after +1t \| +300.0 \(1.000\) .* 190.0 \(0.979\)' "$tmp/out/SUMMARY.txt" ||
   ! grep -qE '^before +4t \| .* 215.0 \(1.108\)' "$tmp/out/SUMMARY.txt" ||
   ! grep -qE '^after +1 +1t .* 150.0 +160.0 +1.0 ' "$tmp/out/SUMMARY.txt" ||
   ! grep -qE '^after +1t \| +690.0 \(0.986\) \| 2$' "$tmp/out/SUMMARY.txt" ||
   ! grep -qE '^before +4t \| +720.0 \(1.029\) \| 2$' "$tmp/out/SUMMARY.txt"; then
  echo "FAIL: the means, ratios, the at-peak or device-used columns are wrong" >&2
  fail=1
fi
if [ ! -s "$tmp/out/trace_t1.txt.gz" ] || ! grep -q 'requested_peak .* 33558528' "$tmp/out/replay_t1.log" ||
   ! grep -q 'reserved_peak .* 35651584' "$tmp/out/caching_sim_t1.log"; then
  echo "FAIL: no gzipped trace or no replay of it" >&2
  fail=1
fi
# TORCH_H200_PROCS=3 alone (no thread cells, no traces): the three
# allocators with serve.py --procs 3, per round.
: >"$tmp/calls.txt"
TORCH_H200_THREADS= TORCH_H200_TRACES=0 TORCH_H200_PROCS=3 "$script" "$tmp/bin" "$tmp/before" "$tmp/out3" 1 >/dev/null 2>&1 || fail=1
if [ "$(grep -c -- '--procs 3' "$tmp/calls.txt")" != 6 ] || [ "$(wc -l <"$tmp/calls.txt")" != 6 ] ||
   [ "$(grep -cE '^(torch|before|after) +[12] +3p \|' "$tmp/out3/SUMMARY.txt")" != 6 ] ||
   ! grep -qE '^after +3p \| +300.0 \(1.000\)' "$tmp/out3/SUMMARY.txt"; then
  echo "FAIL: TORCH_H200_PROCS=3 did not add the process cells" >&2
  fail=1
fi
# TORCH_H200_ROUNDS=3: a third round, in the first one's order.
: >"$tmp/calls.txt"
TORCH_H200_THREADS=1 TORCH_H200_TRACES=0 TORCH_H200_ROUNDS=3 "$script" "$tmp/bin" "$tmp/before" "$tmp/out4" 1 >/dev/null 2>&1 || fail=1
got=$(sed -E 's/.*--label ([a-z]+).*/\1/' "$tmp/calls.txt" | tr '\n' ' ' | sed 's/ $//')
if [ "$got" != "torch before after after before torch torch before after" ] ||
   [ "$(grep -cE '^(torch|before|after) +3 +1t \|' "$tmp/out4/SUMMARY.txt")" != 3 ]; then
  echo "FAIL: TORCH_H200_ROUNDS=3 ran '$got'" >&2
  fail=1
fi
# A budget too small for any step: each is skipped, and says so.
: >"$tmp/calls.txt"
TORCH_H200_BUDGET=30 "$script" "$tmp/bin" "$tmp/before" "$tmp/out2" 1 >/dev/null 2>&1 || true
if [ -s "$tmp/calls.txt" ] || ! grep -q 'serve_r1_torch_t1: SKIPPED' "$tmp/out2/SUMMARY.txt" ||
   ! grep -q 'torch_gpu_test: SKIPPED' "$tmp/out2/SUMMARY.txt"; then
  echo "FAIL: a small budget did not skip the cells" >&2
  fail=1
fi
for bad in "" "$tmp/bin" "$tmp/none $tmp/before $tmp/o" "$tmp/bin $tmp/before $tmp/o x"; do
  # shellcheck disable=SC2086
  if "$script" $bad >/dev/null 2>&1; then r=0; else r=$?; fi
  if [ $r != 1 ] && [ $r != 2 ]; then
    echo "FAIL: bad arguments '$bad' exited $r" >&2
    fail=1
  fi
done
[ $fail -eq 0 ] && echo "torch_h200_smoke: all passed"
exit $fail
