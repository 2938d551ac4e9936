"""PyTorch's CUDA caching allocator's rules, simulated on an allocation trace
(SL_TORCH_TRACE or llama_trace.py), to compare its reserved peak with the
pool's replay (bench/torch_trace.c) on the same sequence (issue 14).

    python3 caching_sim.py TRACE [--large-segments pytorch|exact|MiB]

The rules, as c10/cuda/CUDACachingAllocator.cpp states them (read, not
copied; defaults: no max_split_size, no expandable segments, no
roundup_power2_divisions): a request is rounded up to 512 B; at most 1 MiB
it comes from the small pool, whose segments are 2 MiB; larger from the
large pool, whose segments are 20 MiB below 10 MiB and the request rounded
up to 2 MiB from 10 MiB on. Each stream has its own blocks: a free block
serves only its own stream (blocks freed with work pending on other
streams wait for it: no trace here has such work). The smallest free block
of the stream and pool that fits is taken and split when the rest is at
least 512 B (small) or more than 1 MiB (large); a freed block merges with
free neighbours of its segment. Nothing is ever returned to the driver
(no out of memory in a trace). Printed: the reserved peak (the sum of the
segments), the allocated peak (rounded sizes), the requested peak, and the
reserved bytes held per stream at the end.
--large-segments changes one rule, to ask whether splitting large blocks
would help the pool: "exact" gives every large request below 10 MiB a
segment of its own size (rounded to 2 MiB) instead of 20 MiB, a number N
makes those segments N MiB (at least the request).
"""
import sys

MIN_BLOCK, SMALL, SMALL_BUF = 512, 1 << 20, 2 << 20
LARGE_BUF, MIN_LARGE, ROUND_LARGE = 20 << 20, 10 << 20, 2 << 20


def round_size(n):
    return max(MIN_BLOCK, (n + MIN_BLOCK - 1) // MIN_BLOCK * MIN_BLOCK)


LARGE_SEGMENTS = "pytorch"  # or "exact", or a size in MiB


def segment_size(n):
    if n <= SMALL:
        return SMALL_BUF
    rounded = (n + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE
    if n < MIN_LARGE and LARGE_SEGMENTS == "pytorch":
        return LARGE_BUF
    if n < MIN_LARGE and LARGE_SEGMENTS != "exact":
        return max(int(LARGE_SEGMENTS) << 20, rounded)
    return rounded


class Block:
    __slots__ = ("addr", "size", "used", "prev", "next", "pool")

    def __init__(self, addr, size, pool):
        self.addr, self.size, self.used = addr, size, False
        self.prev = self.next = None
        self.pool = pool


class Sim:
    def __init__(self):
        self.free = {}          # (stream, small?) -> set of free blocks
        self.live = {}          # trace ptr -> (block, requested)
        self.next_addr = 1 << 40
        self.reserved = self.allocated = self.requested = 0
        self.peak = {"reserved": 0, "allocated": 0, "requested": 0}
        self.per_stream = {}

    def _note(self):
        for k in self.peak:
            self.peak[k] = max(self.peak[k], getattr(self, k))

    def alloc(self, stream, size, ptr):
        n = round_size(size)
        key = (stream, n <= SMALL)
        pool = self.free.setdefault(key, set())
        fit = [b for b in pool if b.size >= n]
        if fit:
            b = min(fit, key=lambda b: (b.size, b.addr))
            pool.discard(b)
        else:
            seg = segment_size(n)
            b = Block(self.next_addr, seg, key)
            self.next_addr += seg + (1 << 30)
            self.reserved += seg
            self.per_stream[stream] = self.per_stream.get(stream, 0) + seg
        rest = b.size - n
        if (key[1] and rest >= MIN_BLOCK) or (not key[1] and rest > SMALL):
            r = Block(b.addr + n, rest, key)
            r.prev, r.next = b, b.next
            if b.next is not None:
                b.next.prev = r
            b.next, b.size = r, n
            pool.add(r)
        b.used = True
        self.live[ptr] = (b, size)
        self.allocated += b.size
        self.requested += size
        self._note()

    def release(self, ptr):
        if ptr not in self.live:
            return  # allocated before the trace began
        b, size = self.live.pop(ptr)
        self.allocated -= b.size
        self.requested -= size
        b.used = False
        pool = self.free[b.pool]
        for nb in (b.prev, b.next):
            if nb is not None and not nb.used:
                pool.discard(nb)
                if nb is b.prev:
                    nb.size += b.size
                    nb.next = b.next
                    if b.next is not None:
                        b.next.prev = nb
                    b = nb
                else:
                    b.size += nb.size
                    b.next = nb.next
                    if nb.next is not None:
                        nb.next.prev = b
        pool.add(b)


def main():
    global LARGE_SEGMENTS
    argv = sys.argv[1:]
    if len(argv) == 3 and argv[1] == "--large-segments" and (
            argv[2] in ("pytorch", "exact") or
            (argv[2].isdigit() and 2 <= int(argv[2]) <= 4096)):
        LARGE_SEGMENTS = argv[2]
        argv = argv[:1]
    if len(argv) != 1:
        sys.exit("usage: caching_sim.py TRACE "
                 "[--large-segments pytorch|exact|MiB (2..4096)]")
    sys.argv[1] = argv[0]
    sim = Sim()
    try:
        f = open(sys.argv[1])
    except OSError as e:
        sys.exit(f"caching_sim.py: {e}")
    with f:
        for no, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            parts = line.split()
            try:
                op, stream, size, ptr = (parts[0], int(parts[2], 16),
                                         int(parts[3]), int(parts[4], 16))
            except (IndexError, ValueError):
                sys.exit(f"caching_sim.py: {sys.argv[1]}:{no}: not a trace "
                         f"line: {line.strip()}")
            if op == "a":
                sim.alloc(stream, size, ptr)
            elif op == "f":
                sim.release(ptr)
            else:
                sys.exit(f"caching_sim.py: {sys.argv[1]}:{no}: not a trace "
                         f"line: {line.strip()}")
    mib = 1 << 20
    for k in ("reserved", "allocated", "requested"):
        print(f"{k + '_peak':28} {sim.peak[k]:12d}  ({sim.peak[k] / mib:.1f} MiB)")
    for s, v in sorted(sim.per_stream.items()):
        print(f"{'reserved.stream_%#x' % s:28} {v:12d}  ({v / mib:.1f} MiB)")


main()
