"""PyTorch's own allocator behaviours, as far as they apply to a pluggable
allocator, checked on a GPU with libsl_torch.so installed (issue 14).

    python3 torch_gpu_test.py [--so libsl_torch.so]

Each check prints PASS/FAIL with what it saw; exit 0 when all passed.
torch.cuda._sleep(cycles) keeps a stream busy, so "a kernel still runs"
is true when the frees happen (each check says how it knows).
The process caps the pool at SL_TORCH_LIMIT_BYTES (2 GiB) for the
out-of-memory check; it must be set before the first allocation.
"""
import argparse
import os
import sys
import threading

os.environ.setdefault("SL_TORCH_LIMIT_BYTES", str(2 << 30))

p = argparse.ArgumentParser()
p.add_argument("--so", default=None)
args = p.parse_args()

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sl_torch  # noqa: E402

sl_torch.install(args.so)

results = []
SLEEP = 200_000_000  # GPU cycles: ~0.1 s on an H200 (1.98 GHz)


def check(name, ok, detail=""):
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def busy(stream):
    """True if work queued on stream has not finished."""
    return not stream.query()


dev = torch.device("cuda", 0)
n = 1 << 20  # floats: 4 MiB
# Load the kernels used below now: with lazy module loading (the default),
# a kernel's first launch may wait for the device, and "a kernel still runs"
# would not hold at the frees.
torch.cuda._sleep(1000)
(torch.ones(4, device=dev) * 2).sum().item()
torch.cuda.synchronize()

# 1. Allocation on several streams, data checked.
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
a = torch.full((n,), 1.0, device=dev)          # the default stream
with torch.cuda.stream(s1):
    b = torch.full((n,), 2.0, device=dev)
with torch.cuda.stream(s2):
    c = torch.full((n,), 3.0, device=dev)
torch.cuda.synchronize()
ptrs = {a.data_ptr(), b.data_ptr(), c.data_ptr()}
check("alloc_several_streams",
      len(ptrs) == 3 and a.sum().item() == n and b.sum().item() == 2 * n
      and c.sum().item() == 3 * n,
      f"3 distinct blocks {sorted(hex(x) for x in ptrs)}")
del a, b, c

# 2. Free while a kernel still runs, same stream: the block may be reused
#    at once by the same stream (stream order); the pending kernel still
#    reads the old data.
with torch.cuda.stream(s1):
    x = torch.full((n,), 1.0, device=dev)
    torch.cuda._sleep(SLEEP)
    y = x * 2  # queued behind the sleep: reads x later
    xp = x.data_ptr()
    del x  # freed while the sleep (and y's kernel) are pending
    running = busy(s1)
    z = torch.empty(n, device=dev)  # same stream, same size
    reused = z.data_ptr() == xp
    z.fill_(5.0)  # queued after y's kernel on s1
torch.cuda.synchronize()
check("free_while_running_same_stream",
      running and y.min().item() == 2.0 and y.max().item() == 2.0,
      f"s1 busy at free: {running}; reused at once by s1: {reused}; "
      f"y == 2 everywhere")
del y, z

# 3. Cross-stream use with record_stream: a block freed while another
#    stream still uses it is not handed to any stream before that use
#    ends.
with torch.cuda.stream(s1):
    x = torch.full((n,), 3.0, device=dev)
s2.wait_stream(s1)
with torch.cuda.stream(s2):
    torch.cuda._sleep(SLEEP)
    y = x * 2  # on s2, reads x after the sleep
sl_torch.record_stream(x, s2)
xp = x.data_ptr()
del x
running = busy(s2)
taken = []
with torch.cuda.stream(s1):  # s1 does not wait for s2
    for _ in range(4):
        z = torch.empty(n, device=dev)
        taken.append(z)
        z.fill_(7.0)
reused_early = any(t.data_ptr() == xp for t in taken) and running
torch.cuda.synchronize()
check("record_stream_cross_stream",
      running and not reused_early and y.min().item() == 6.0
      and y.max().item() == 6.0,
      f"s2 busy at free: {running}; handed to s1 while s2 ran: "
      f"{reused_early}; y == 6 everywhere")
del y, taken, z

# 4. The same without record_stream: PyTorch's documented hazard (its own
#    allocator reuses the block too); reported, not asserted.
with torch.cuda.stream(s1):
    x = torch.full((n,), 3.0, device=dev)
s2.wait_stream(s1)
with torch.cuda.stream(s2):
    torch.cuda._sleep(SLEEP)
    y = x * 2
xp = x.data_ptr()
del x
with torch.cuda.stream(s1):
    z = torch.empty(n, device=dev)
    early = z.data_ptr() == xp
torch.cuda.synchronize()
print(f"INFO no_record_stream: block handed to s1 while s2 used it: {early} "
      f"(as with PyTorch's allocator: call record_stream)", flush=True)
del y, z

# 5. Tensor.record_stream and torch.cuda.empty_cache do nothing for a
#    pluggable allocator loaded from Python; memory_stats raises. The
#    library's own calls work.
t = torch.ones(16, device=dev)
t.record_stream(s2)  # PyTorch: no hook set, nothing happens
torch.cuda.empty_cache()  # PyTorch: no hook set, nothing happens
try:
    torch.cuda.memory_stats(0)
    stats_raises = False
except RuntimeError:
    stats_raises = True
st = sl_torch.memory_stats(0)
check("stats_queries", stats_raises and st["allocated_bytes.all.current"] > 0,
      f"torch.cuda.memory_stats raises: {stats_raises}; sl_torch: "
      f"allocated {st['allocated_bytes.all.current']}, reserved "
      f"{st['reserved_bytes.all.current']}")
del t

# 6. Out of memory and retry: the pool is capped at 2 GiB; 256 MiB tensors
#    until PyTorch raises; free them; allocate again.
big = []
err = ""
try:
    for _ in range(64):
        big.append(torch.empty(64 << 20, device=dev))  # 256 MiB
except RuntimeError as e:
    err = str(e)
got = len(big)
big.clear()
torch.cuda.synchronize()
try:
    again = [torch.empty(64 << 20, device=dev) for _ in range(got)]
    retry_ok = True
    del again
except RuntimeError as e:
    retry_ok = False
    err += " / retry: " + str(e)
st = sl_torch.raw_stats(0)
check("oom_and_retry",
      "CUDA out of memory." in err and 0 < got < 64 and retry_ok
      and st["ooms"] >= 1,
      f"{got} x 256 MiB before: {err[:160]!r}; retry ok: {retry_ok}; "
      f"ooms {st['ooms']}, retries {st['oom_retries']}")

# 7. empty_cache returns cached memory to the driver.
before = sl_torch.raw_stats(0)["reserved_bytes"]
sl_torch.empty_cache()
after = sl_torch.raw_stats(0)["reserved_bytes"]
check("empty_cache", after < before,
      f"reserved {before >> 20} MiB -> {after >> 20} MiB")

# 8. Threads allocating and freeing on their own streams, data checked.
bad = []


def churn(k):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(200):
            v = float(k * 1000 + i)
            u = torch.full((4096 * (1 + i % 5),), v, device=dev)
            w = (u + 1).eq(v + 1).all()
            del u  # freed while the comparison may still run
            if not w.item():
                bad.append((k, i))


ths = [threading.Thread(target=churn, args=(k,)) for k in range(8)]
for th in ths:
    th.start()
for th in ths:
    th.join()
st = sl_torch.raw_stats(0)
check("threads_alloc_free", not bad,
      f"8 threads x 200 requests, wrong: {len(bad)}; allocs {st['allocs']}, "
      f"reuses {st['reuses']}, bad calls {st['bad_calls']}")
check("no_bad_calls", st["bad_calls"] == 0, f"{st['bad_calls']}")

print(f"torch_gpu_test: {sum(results)} passed, "
      f"{len(results) - sum(results)} failed", flush=True)
sys.exit(0 if all(results) else 1)
