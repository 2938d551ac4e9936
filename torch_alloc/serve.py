"""Serving a randomly initialised transformer from several Python threads,
on PyTorch's caching allocator or on streamledger's pool (issue 14).

    python3 serve.py --allocator pool  --threads 4 --out pool4.json
    python3 serve.py --allocator torch --threads 1 --out ref.json --save ref.pt
    python3 serve.py --allocator pool  --threads 4 --check ref.pt

The model: a Llama of a transformers config, weights from torch.manual_seed
(no download), float32 (TF32 off) so both allocators' runs compute the same
numbers. Each request is a batch of --batch sequences of --seq tokens drawn
from a generator seeded by the request id; a thread takes the next id, runs
the forward pass on its own CUDA stream (thread 0 on the default stream, as
a plain PyTorch program does), and copies the last position's logits back.
The first --keep requests' outputs are saved (--save) or compared (--check)
against a file written by another process (PyTorch's allocator there).
Printed and written (--out, JSON): requests/s, p50/p99 latency, peak
reserved and allocated memory, host CPU per request (the whole process:
Python, PyTorch, and the pool's engine thread if SL_TORCH_ENGINE=thread,
labelled "pool+thr").

SEVERAL PROCESSES (--procs N > 1): Python's GIL serialises the threads of
one process, so the allocators' cost under concurrency shows only across
processes. This process then starts N worker processes of this script
(each with its own allocator, model and CUDA context, --threads threads
each), waits until every one has warmed up, starts them together, and
merges what they report: request r goes to worker r mod N (the same
requests, inputs and outputs whatever N is), requests/s over the longest
worker's time, p50/p99 over every request, peak reserved and allocated
memory summed over the workers (each holds its own), CPU per request
summed over the workers, and the first --keep requests' outputs saved or
checked here. This process never touches CUDA.

HOLD (--hold): after the warm-up, print READY and wait for a line on stdin
before the clock starts (what each worker of --procs does; with --procs,
the parent says READY once every worker is ready). --check FILE is read
at the end: a FILE that does not exist then is reported
("check_missing"), not an error. A benchmark
script starts several cells' processes together (their imports and warm-up
in parallel), then lets one at a time run: each cell still runs alone.

PER REQUEST ("per_req" in the output): the allocator's counters over the
timed part (after the warm-up), divided by the requests: for the pool,
libsl_torch.so's monotonic counters (allocs, reuses, held frees, slabs,
recorded uses; with SL_TORCH_STATS=1 also the ns inside its alloc and free
hooks, the hook calls of 20 us or more and the driver calls by kind:
sl_torch.c, THE CALL COUNTERS); for PyTorch's, its allocation, segment
and retry counts.
"""
import argparse
import json
import os
import sys
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("--allocator", choices=["torch", "pool"], required=True)
p.add_argument("--so", default=None, help="libsl_torch.so (pool)")
p.add_argument("--threads", type=int, default=4)
p.add_argument("--seconds", type=float, default=5.0,
               help="serving time after the warm-up")
p.add_argument("--requests", type=int, default=0,
               help="stop after this many requests (0: --seconds)")
p.add_argument("--batch", type=int, default=8)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--keep", type=int, default=32,
               help="requests whose outputs are saved or checked")
p.add_argument("--save", default=None)
p.add_argument("--check", default=None)
p.add_argument("--out", default=None)
p.add_argument("--label", default=None,
               help="the allocator's name in the output (default: torch, "
                    "pool, or pool+thr with SL_TORCH_ENGINE=thread)")
p.add_argument("--procs", type=int, default=1,
               help="worker processes (see SEVERAL PROCESSES)")
p.add_argument("--hold", action="store_true",
               help="READY after the warm-up, then wait for a line on "
                    "stdin (see HOLD)")
p.add_argument("--worker", type=int, default=None,
               help=argparse.SUPPRESS)  # set by the parent of --procs
args = p.parse_args()
if args.threads < 1 or args.seconds <= 0 or args.requests < 0 or \
        args.batch < 1 or args.seq < 1 or args.keep < 0 or args.procs < 1:
    p.error("threads, batch, seq, procs must be >= 1, seconds > 0, "
            "requests and keep >= 0")
if args.worker is not None and not 0 <= args.worker < args.procs:
    p.error("--worker must be in [0, --procs)")


def merge_workers():
    """SEVERAL PROCESSES: the parent. Returns the exit status."""
    import subprocess
    import tempfile
    tmp = tempfile.mkdtemp(prefix="serve_procs_")
    base = [sys.executable, os.path.abspath(__file__),
            "--allocator", args.allocator, "--threads", str(args.threads),
            "--seconds", str(args.seconds), "--requests", str(args.requests),
            "--batch", str(args.batch), "--seq", str(args.seq),
            "--keep", str(args.keep), "--procs", str(args.procs)]
    if args.so:
        base += ["--so", args.so]
    kids = []
    for i in range(args.procs):
        kids.append(subprocess.Popen(
            base + ["--worker", str(i), "--out", f"{tmp}/w{i}.json",
                    "--save", f"{tmp}/w{i}.pt"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    ready = 0
    for k in kids:  # each says READY once warmed up (or dies)
        for line in k.stdout:
            if line.strip() == "READY":
                ready += 1
                break
    if args.hold:  # HOLD: every worker warmed up; wait for the go
        print("READY", flush=True)
        sys.stdin.readline()
    for k in kids:  # the start, together (a dead worker's pipe is closed)
        try:
            k.stdin.write("GO\n")
            k.stdin.flush()
        except OSError:
            pass
    for k in kids:
        k.communicate()
    codes = [k.returncode for k in kids]
    ws, errors = [], []
    for i, code in enumerate(codes):
        try:
            with open(f"{tmp}/w{i}.json") as f:
                ws.append(json.load(f))
        except (OSError, ValueError):
            errors.append(f"worker {i}: exit {code}, no result")
    if ready < args.procs:
        errors.append(f"{args.procs - ready} workers never got ready")
    lat = sorted(x for w in ws for x in w.get("latencies_ms", []))
    n = len(lat)
    wall = max((w["seconds"] for w in ws), default=0)
    cpu = sum(w.get("cpu_s", 0) for w in ws)

    def pct(q):
        return lat[min(n - 1, int(q * n))] if n else float("nan")
    res = {
        "allocator": args.label or (ws[0]["allocator"] if ws else
                                    args.allocator),
        "threads": args.threads, "procs": args.procs,
        "batch": args.batch, "seq": args.seq, "requests": n,
        "seconds": round(wall, 3),
        "req_per_s": round(n / wall, 2) if wall > 0 else 0,
        "p50_ms": round(pct(0.50), 3), "p99_ms": round(pct(0.99), 3),
        "reserved_peak_mib": round(sum(w["reserved_peak_mib"] for w in ws),
                                   1),
        "allocated_peak_mib": round(sum(w["allocated_peak_mib"]
                                        for w in ws), 1),
        "cpu_ms_per_req": round(cpu * 1e3 / n, 3) if n else None,
        "torch": ws[0]["torch"] if ws else "?",
        "gpu": ws[0]["gpu"] if ws else "?",
        "errors": errors + [e for w in ws for e in w.get("errors", [])],
        "extra": {f"worker{i}.{k}": v for i, w in enumerate(ws)
                  for k, v in w.get("extra", {}).items()},
    }
    rc = 1 if res["errors"] or any(codes) else 0
    if args.save or args.check:
        import torch
        outputs = {}
        for i in range(len(ws)):
            if os.path.exists(f"{tmp}/w{i}.pt"):
                outputs.update(torch.load(f"{tmp}/w{i}.pt"))
        if args.save:
            torch.save({k: outputs[k] for k in sorted(outputs)}, args.save)
        if args.check and os.path.exists(args.check):
            res["check"] = compare(torch, outputs, torch.load(args.check))
            rc = rc or int(not res["check"]["ok"])
        elif args.check:
            res["check_missing"] = args.check
    print(json.dumps(res))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)
    return rc


def compare(torch, outputs, ref):
    """The first --keep requests' outputs against a reference run's."""
    common = sorted(set(ref) & set(outputs))
    worst, exact = 0.0, 0
    for k in common:
        d = (outputs[k] - ref[k]).abs().max().item()
        worst = max(worst, d)
        exact += int(torch.equal(outputs[k], ref[k]))
    ok = len(common) > 0 and all(
        torch.allclose(outputs[k], ref[k], rtol=1e-4, atol=1e-4)
        for k in common)
    return {"compared": len(common), "bit_exact": exact,
            "max_abs_diff": worst, "ok": ok}


if args.procs > 1 and args.worker is None:
    sys.exit(merge_workers())

import torch  # noqa: E402

if args.allocator == "pool":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sl_torch  # noqa: E402
    sl_torch.install(args.so)  # before any CUDA allocation

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False

cfg = LlamaConfig(vocab_size=8000, hidden_size=512, intermediate_size=1408,
                  num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=8, max_position_embeddings=512)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).eval()
model = model.to("cuda")


def request_input(rid):
    g = torch.Generator().manual_seed(1000 + rid)
    return torch.randint(0, cfg.vocab_size, (args.batch, args.seq),
                         generator=g)


lock = threading.Lock()
next_id = [0]
stop_at = [None]  # time.perf_counter() deadline, set after the warm-up
lat = []
outputs = {}
errors = []


def take():
    with lock:
        rid = next_id[0]
        if args.worker is not None:  # request r goes to worker r mod N
            rid = rid * args.procs + args.worker
        if args.requests and rid >= args.requests:
            return None
        if stop_at[0] is not None and time.perf_counter() >= stop_at[0]:
            return None
        next_id[0] += 1
        return rid


def serve_one(rid):
    ids = request_input(rid).to("cuda", non_blocking=False)
    with torch.inference_mode():
        logits = model(ids).logits  # (batch, seq, vocab)
        last = logits[:, -1, :].float()
    return last.cpu()  # synchronises this thread's stream


def worker(tid, warm):
    try:
        stream = None if tid == 0 else torch.cuda.Stream()
        ctx = torch.cuda.stream(stream) if stream is not None else None
        if ctx is not None:
            ctx.__enter__()
        for _ in range(warm):
            serve_one(0)
        warmed.wait()  # every thread warmed up
        go.wait()      # the main thread started the clock
        while True:
            rid = take()
            if rid is None:
                break
            t0 = time.perf_counter()
            out = serve_one(rid)
            dt = time.perf_counter() - t0
            with lock:
                lat.append(dt)
                if rid < args.keep:
                    outputs[rid] = out
        if ctx is not None:
            ctx.__exit__(None, None, None)
    except Exception as e:  # reported, and the run fails
        errors.append(f"thread {tid}: {type(e).__name__}: {e}")
        warmed.abort()


warmed = threading.Barrier(args.threads + 1)
go = threading.Event()
threads = [threading.Thread(target=worker, args=(t, 2))
           for t in range(args.threads)]
for t in threads:
    t.start()
try:
    warmed.wait()  # every thread ran two requests (kernels, cuBLAS, caches)
    if args.worker is not None or args.hold:  # start with/after the others
        print("READY", flush=True)
        sys.stdin.readline()
except threading.BrokenBarrierError:
    pass
torch.cuda.synchronize()


def counters():
    """PER REQUEST: the allocator's monotonic counters now."""
    if args.allocator == "pool":
        return {k: v for k, v in sl_torch.raw_stats(0).items()
                if k in MONOTONIC or k.endswith("_ns") or
                k.startswith("drv_") or k == "slow_hooks"}
    s = torch.cuda.memory_stats(0)
    return {k: s.get(k, 0) for k in ("allocation.all.allocated",
                                     "segment.all.allocated",
                                     "segment.all.freed", "num_alloc_retries",
                                     "num_sync_all_streams")}


MONOTONIC = ("allocs", "frees", "reuses", "held_frees", "slab_allocs",
             "slab_frees", "oom_retries", "recorded_uses", "bad_calls")
counts0 = counters()
if args.allocator == "pool":
    sl_torch.reset_peak_memory_stats(0)
else:
    torch.cuda.reset_peak_memory_stats(0)
cpu0, t0 = time.process_time(), time.perf_counter()
if not args.requests:
    stop_at[0] = t0 + args.seconds
go.set()
for t in threads:
    t.join()
wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
torch.cuda.synchronize()
counts1 = counters()

if args.allocator == "pool":
    st = sl_torch.memory_stats(0)
    reserved_peak = st["reserved_bytes.all.peak"]
    allocated_peak = st["allocated_bytes.all.peak"]
    extra = {k: v for k, v in st.items() if k.startswith("sl_torch.")}
else:
    reserved_peak = torch.cuda.max_memory_reserved(0)
    allocated_peak = torch.cuda.max_memory_allocated(0)
    s = torch.cuda.memory_stats(0)
    extra = {"num_alloc_retries": s.get("num_alloc_retries", 0),
             "allocation.all.allocated": s.get("allocation.all.allocated", 0)}

# The driver's view (issue 14): device memory in use at the end, this
# process's CUDA context and libraries included (the same in every cell of
# one thread count) and every block the allocator holds (neither returns
# memory while serving): between cells, the difference is the allocators'
# physical footprint, with whatever rounding the driver adds to each
# cuMemAlloc (its pages), which their own reserved counts do not see.
# Device-wide: with --procs (or parked --hold cells) it counts the other
# processes too; process_used_mib is this process's alone.
try:
    free_b, total_b = torch.cuda.mem_get_info(0)
    extra["device_used_mib"] = round((total_b - free_b) / 2**20, 1)
except Exception:  # informative only: never fails the run
    extra["device_used_mib"] = None


def process_used_mib():
    """This process's device memory as the driver counts it (nvidia-smi's
    per-process used memory, MiB): unlike device_used_mib, right while other
    processes hold the device too (HOLD's parked cells, --procs)."""
    import subprocess
    try:
        q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=20)
        for line in q.stdout.splitlines():
            pid, used = (x.strip() for x in line.split(","))
            if int(pid) == os.getpid():
                return float(used)
    except Exception:  # informative only: never fails the run
        pass
    return None


extra["process_used_mib"] = process_used_mib()

n = len(lat)
lat.sort()


def pct(q):
    return lat[min(n - 1, int(q * n))] * 1e3 if n else float("nan")


label = args.allocator
if args.allocator == "pool" and os.environ.get("SL_TORCH_ENGINE") == "thread":
    label = "pool+thr"  # the engine thread instead of the hooks' polls
if args.label:
    label = args.label
res = {
    "allocator": label, "threads": args.threads,
    "batch": args.batch, "seq": args.seq, "requests": n,
    "seconds": round(wall, 3),
    "req_per_s": round(n / wall, 2) if wall > 0 else 0,
    "p50_ms": round(pct(0.50), 3), "p99_ms": round(pct(0.99), 3),
    "reserved_peak_mib": round(reserved_peak / 2**20, 1),
    "allocated_peak_mib": round(allocated_peak / 2**20, 1),
    "cpu_ms_per_req": round(cpu * 1e3 / n, 3) if n else None,
    "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
    "errors": errors, "extra": extra,
    "per_req": {k: round((counts1[k] - counts0.get(k, 0)) / n, 3)
                for k in counts1} if n else {},
}
if args.worker is not None:  # for the parent's merge (--out only)
    res["cpu_s"] = cpu
    res["latencies_ms"] = [x * 1e3 for x in lat]

rc = 1 if errors else 0
if args.save:
    torch.save({k: outputs[k] for k in sorted(outputs)}, args.save)
if args.check and os.path.exists(args.check):
    res["check"] = compare(torch, outputs, torch.load(args.check))
    if not res["check"]["ok"]:
        rc = 1
elif args.check:  # its writer did not run (a skipped cell): no check
    res["check_missing"] = args.check
print(json.dumps({k: v for k, v in res.items() if k != "latencies_ms"}))
if args.out:
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
sys.exit(rc)
