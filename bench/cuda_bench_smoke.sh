#!/bin/sh
# Smoke test of cuda_bench: runs every operation tiny (--smoke) on the
# host executor (//cuda:host_executor) and checks that it exits 0, printed the table header
# and a row per operation and thread count, confirmed every keep ran exactly
# once and wrote its JSON. Then --driver=libcuda must either run or print
# SKIPPED and exit 0 (no GPU here), --paired must print its units (and be
# refused without a raw op or a full unit), bad options must be refused, and the
# embedded PTX must assemble for sm_90 where ptxas is installed. No timing is
# asserted.
set -eu
bench=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
out=$tmp/smoke.txt
json=$tmp/smoke.json
fail=0
# shellcheck source=bench/smoke_lib.sh
. "$(dirname "$0")/smoke_lib.sh"

if ! "$bench" --driver=host --smoke --json "$json" >"$out" 2>&1; then
  echo "FAIL: cuda_bench --driver=host --smoke exited non-zero" >&2
  cat "$out" >&2
  exit 1
fi
cat "$out"

check() { # pattern, what
  if ! grep -q -- "$1" "$out"; then
    echo "FAIL: output lacks $2" >&2
    fail=1
  fi
}
check '^op .*raw ns.*layer ns.*+ns.*overhead.*raw issue.*lay issue.*target' \
  "the table header"
for op in record wait htod64 launch ledger_hold ledger_keep ctx; do
  check "^$op  *1 |" "a $op row for 1 thread"
done
check '^record .*<= 10%' "the record row's target"
check '^launch .*<= 1%' "the launch row's target"
check '^all keeps ran exactly once' "the exactly-once confirmation"
if ! grep -q '"rows"' "$json" || ! grep -q '"op": "ctx"' "$json" ||
  ! grep -q '"overhead_pct"' "$json"; then
  echo "FAIL: JSON incomplete" >&2
  fail=1
fi

# A subset of ops, explicit threads, --flag value form.
sub=$tmp/sub.txt
if ! "$bench" --driver host --ops launch,ledger_keep --threads 1 --calls 300 \
  --repeat 1 --warmup 10 --sync-every 7 --nonblocking >"$sub" 2>&1; then
  echo "FAIL: cuda_bench with --ops/--threads/--calls exited non-zero" >&2
  cat "$sub" >&2
  fail=1
elif grep -q '^record ' "$sub" || ! grep -q '^launch  *1 |' "$sub"; then
  echo "FAIL: --ops launch,ledger_keep ran the wrong rows" >&2
  cat "$sub" >&2
  fail=1
fi

# --paired: the same passes read in units of four batches. 3 passes of 600
# calls in batches of 128 (4 full batches and one of 88 per side: 2 units per
# pass) at 1 and 2 threads: 6 and 12 units; a paired line per row with a raw
# side, none for ledger_keep; the JSON fields and one unit's numbers each.
par=$tmp/paired.txt
pjson=$tmp/paired.json
if ! "$bench" --driver=host --ops launch,record,ledger_keep --threads 1,2 \
  --calls 600 --sync-every 128 --repeat 3 --warmup 50 --paired \
  --json "$pjson" >"$par" 2>&1; then
  echo "FAIL: cuda_bench --paired exited non-zero" >&2
  cat "$par" >&2
  fail=1
else
  for row in "launch  *1 |   paired: 6 units" "launch  *2 |   paired: 12 units" \
    "record  *1 |   paired: 6 units"; do
    grep -q "^$row, overhead median .* ns \[.*\], .*% \[.*\]; issue .*; <= " \
      "$par" || { echo "FAIL: --paired lacks '$row ...'" >&2; fail=1; }
  done
  if grep -q '^ledger_keep .*paired' "$par"; then
    echo "FAIL: --paired printed a unit line for ledger_keep (no raw side)" >&2
    fail=1
  fi
  grep -q '^all keeps ran exactly once' "$par" ||
    { echo "FAIL: --paired: keeps not confirmed" >&2; fail=1; }
  python3 - "$pjson" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["meta"]["paired"] is True, d["meta"]
rows = {(r["op"], r["threads"]): r for r in d["rows"]}
for key, n in ((("launch", 1), 6), (("launch", 2), 12), (("record", 2), 12)):
    r = rows[key]
    assert r["paired_units"] == n and r["paired_block"] == 128, (key, r)
    for k in ("overhead_ns", "overhead_pct", "issue_overhead_ns",
              "issue_overhead_pct"):
        lo, mid, hi = (r["paired_%s_%s" % (k, q)] for q in ("p25", "median", "p75"))
        assert lo <= mid <= hi, (key, k, lo, mid, hi)
    assert isinstance(r["paired_target_met"], bool)
    for k in ("unit_raw_ns", "unit_layer_ns", "unit_raw_issue_ns",
              "unit_layer_issue_ns"):
        assert len(r[k]) == n and all(v > 0 for v in r[k]), (key, k)
    # The median of the units' overheads is one of the units'.
    ov = sorted(l - w for l, w in zip(r["unit_layer_ns"], r["unit_raw_ns"]))
    assert any(abs(v - r["paired_overhead_ns_median"]) < 0.02 for v in ov), key
assert "paired_units" not in rows[("ledger_keep", 1)]
PY
fi

# The real driver: there is none here, so it must skip cleanly; on a machine
# with one it runs the smoke table instead.
lib=$tmp/libcuda.txt
if ! "$bench" --driver=libcuda --smoke >"$lib" 2>&1; then
  echo "FAIL: cuda_bench --driver=libcuda --smoke exited non-zero" >&2
  cat "$lib" >&2
  fail=1
elif ! grep -q '^SKIPPED: no CUDA driver\|^SKIPPED: no usable CUDA device\|^all keeps ran exactly once' "$lib"; then
  echo "FAIL: --driver=libcuda neither skipped nor ran" >&2
  cat "$lib" >&2
  fail=1
else
  head -1 "$lib"
fi
# A missing library is a skip; with --require-gpu it is an error.
if ! "$bench" --driver=libcuda --libcuda /nonexistent/libcuda.so.1 >"$lib" 2>&1 ||
  ! grep -q '^SKIPPED: no CUDA driver' "$lib"; then
  echo "FAIL: a missing libcuda did not skip" >&2
  cat "$lib" >&2
  fail=1
fi
if "$bench" --driver=libcuda --libcuda /nonexistent/libcuda.so.1 \
  --require-gpu >"$lib" 2>&1; then
  echo "FAIL: --require-gpu without a driver exited 0" >&2
  fail=1
fi

# Bad options are refused with status 2.
for bad in "--driver=gpu" "--threads 0" "--calls 0" "--ops nothing" "--bogus" \
  "--paired=1" "--paired --ops ledger_keep,ledger_hold" \
  "--paired --calls 500 --sync-every 256"; do
  smoke_refuses "$bad" "$bench"
done

# The refusals of --paired say why.
if "$bench" --driver=host --paired --calls 100 2>&1 | grep -q -- '--paired needs --calls >= 2 x --sync-every'; then :; else
  echo "FAIL: --paired with too few calls not refused with its reason" >&2
  fail=1
fi

# The embedded PTX assembles for sm_90 (Hopper: H100/H200), if ptxas is here.
ptxas=/usr/local/cuda/bin/ptxas
if [ -x "$ptxas" ]; then
  "$bench" --print-ptx >"$tmp/empty.ptx"
  if "$ptxas" -arch=sm_90 -o "$tmp/empty.cubin" "$tmp/empty.ptx"; then
    echo "ptxas -arch=sm_90: ok"
  else
    echo "FAIL: the embedded PTX does not assemble for sm_90" >&2
    fail=1
  fi
else
  echo "(no $ptxas: PTX not assembled)"
fi

[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
