#!/usr/bin/env python3
"""Coherence misses per agent, from a valgrind lackey trace of query_cost.

`query_cost reader T R Q` drives T "threads'" serving requests and the
reader's query pairs in one real thread; before each it stores to a marker
line naming who runs (query_cost.c, agent_is: line 0 the reader, line t + 1
thread t, its release included). bench/coherence_sim.sh runs it under
`valgrind --tool=lackey --trace-mem=yes` and pipes the trace here:

    bench/coherence_sim.py AGENTS_TXT QUERY_COST < trace

Each agent stands for a core with its own cache, unbounded, so that every
miss counted is a coherence miss: a load misses when the agent holds no
valid copy of the line, a store (or lackey's M, a load and a store) when it
does not hold the line alone; a store takes the line from every other
holder. A line's first touch is no miss. A miss is charged to the agent that
last took the line from the one that misses (the reader, or another thread;
for a line it never held, to one that holds it). The stack and the
thread-locals, which the agents share here as they do not on the real host,
are left out (1 MiB below and 64 KiB around the addresses query_cost
prints), and so are the marker lines.

Prints per request of a thread (4 of the serving row's ops) and per query
pair: misses by whom they are charged to, and for the threads' misses
charged to the reader, their place: the stream's lines (by index, see
struct ldg_stream) or "segment" (anything else: slots, headers, summaries,
published filters).
"""
import bisect
import collections
import re
import subprocess
import sys

LINE = 64
STREAM_LINES = 8  # sizeof(struct ldg_stream) / 64 (512 since faa12; 448 before)


def agents(path):
    """The addresses query_cost printed (flushed before its first marker
    store, so present once the trace reaches it), or None."""
    try:
        text = open(path).read()
    except OSError:
        return None
    m = re.search(r"agents: marker (0x[0-9a-f]+) stack (0x[0-9a-f]+) tls (0x[0-9a-f]+)", text)
    if m is None or "agents: thread" not in text:
        return None
    marker, stack, tls = (int(x, 16) for x in m.groups())
    place = {}
    threads = 0
    for t, a, b in re.findall(r"agents: thread (\d+) streams (0x[0-9a-f]+) (0x[0-9a-f]+)", text):
        threads = max(threads, int(t) + 1)
        for base in (int(a, 16), int(b, 16)):
            for k in range(STREAM_LINES):
                place[base // LINE + k] = "stream line %d" % k
    skip = ((stack - (1 << 20), stack + (1 << 16)), (tls - (1 << 16), tls + (1 << 16)))
    return marker, skip, place, threads


def symbols(binary, base=0x108000):
    """query_cost's functions by address, as valgrind loads a PIE (at
    0x108000); libraries' code is named "lib"."""
    out = subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True,
                         text=True).stdout
    addrs, names = [], []
    for ln in out.splitlines():
        f = ln.split()
        if len(f) == 3 and f[1] in "tTwW":
            addrs.append(int(f[0], 16) + base)
            names.append(f[2])
    return addrs, names


def main():
    got = None
    addrs, names = symbols(sys.argv[2])
    hi_code = addrs[-1] + 65536 if addrs else 0

    def fn(ip):
        if not addrs or ip < addrs[0] or ip > hi_code:
            return "lib"
        return names[bisect.bisect_right(addrs, ip) - 1]
    ip = 0
    by_fn = collections.Counter()  # (misser, function) for misses charged across agents
    by_ip = collections.Counter()  # (misser, instruction) of the reader's and its victims' misses
    holders = {}  # line -> set of agents with a valid copy
    taker = {}    # (line, agent) -> the agent whose store took it from agent
    cur = None
    last_load, missed_load = None, False  # an RMW's L, and whether it missed
    n_req = collections.Counter()
    misses = collections.Counter()    # (misser kind, charged to) -> n
    by_reader = collections.Counter()  # threads' misses charged to the reader, by place
    reader_at = collections.Counter()  # the reader's misses, by place
    by_other = collections.Counter()   # threads' misses charged to other threads, by place
    for raw in sys.stdin:
        if raw[:2] == "I ":
            ip = int(raw[3:raw.index(",")], 16)
            continue
        if len(raw) < 4 or raw[0] != " " or raw[1] not in "LSM":
            continue
        if got is None:  # setup: nobody runs yet
            got = agents(sys.argv[1])
            if got is None:
                continue
            marker, skip, place, threads = got
            m_lo, m_hi = marker, marker + 65 * LINE
        addr = int(raw[3:raw.index(",")], 16)
        if m_lo <= addr < m_hi:
            who = (addr - m_lo) // LINE - 1
            if raw[1] == "S":
                cur = who
                n_req[who] += 1
            continue
        if cur is None or any(lo <= addr < hi for lo, hi in skip):
            continue
        line = addr // LINE
        h = holders.get(line)
        if h is None:
            holders[line] = {cur}
            continue
        write = raw[1] != "L"
        # lackey writes a locked read-modify-write (lock xadd, cmpxchg) as
        # an L and then an M of the same address by the same instruction:
        # one access, one miss at most (the M's upgrade is the same RFO).
        rmw_tail = raw[1] == "M" and last_load == (ip, addr)
        last_load = (ip, addr) if raw[1] == "L" else None
        if rmw_tail and missed_load:
            pass
        elif (cur not in h) if not write else (len(h) != 1 or cur not in h):
            by = taker.get((line, cur))
            if by is None:
                by = next((x for x in h if x != cur), cur)
            kind = "reader" if cur == -1 else "thread"
            to = "reader" if by == -1 else ("self" if by == cur else "thread")
            misses[(kind, to)] += 1
            where = place.get(line, "segment")
            if kind == "thread" and to == "reader":
                by_reader[where] += 1
                by_fn[("thread", fn(ip))] += 1
            if kind == "reader":
                reader_at[where] += 1
                by_fn[("reader", fn(ip))] += 1
            if kind == "thread" and to == "thread":
                by_fn[("thread-thread", fn(ip))] += 1
                by_ip[("thread-thread", ip)] += 1
                by_other[where] += 1
            if kind == "thread" and to == "reader" or kind == "reader":
                by_ip[(kind, ip)] += 1
        missed_load = raw[1] == "L" and cur not in h
        if write:
            for x in h:
                if x != cur:
                    taker[(line, x)] = cur
            holders[line] = {cur}
        else:
            h.add(cur)

    reqs = sum(v for k, v in n_req.items() if k >= 0)
    pairs = n_req[-1]
    if pairs <= 1:  # query_cost shared: a "request" is one op, no reader
        print("agents: %d threads, %d ops (one marker each)" % (threads, reqs))
        print("threads' misses per op: charged to other threads %.3f, other %.3f"
              % (misses[("thread", "thread")] / reqs, misses[("thread", "self")] / reqs))
        for where, n in sorted(by_other.items(), key=lambda x: -x[1]):
            print("    %-16s %.3f per op" % (where, n / reqs))
        print("threads' misses charged to other threads, per op, by function")
        for (k, f), n in sorted(by_fn.items(), key=lambda x: -x[1]):
            if k == "thread-thread" and n / reqs >= 0.005:
                print("    %-32s %.3f" % (f, n / reqs))
        pairs = 1
    else:  # query_cost reader
        print("agents: %d threads, %d requests (%d ops), %d query pairs" % (threads, reqs, 4 * reqs, pairs))
        print("threads' misses per request: charged to the reader %.2f, to other threads %.2f, other %.2f"
              % (misses[("thread", "reader")] / reqs, misses[("thread", "thread")] / reqs,
                 misses[("thread", "self")] / reqs))
        print("  per op (4 a request): charged to the reader %.3f" % (misses[("thread", "reader")] / reqs / 4))
        print("  per query pair, charged to the reader: %.2f" % (misses[("thread", "reader")] / pairs))
        for where, n in sorted(by_reader.items(), key=lambda x: -x[1]):
            print("    %-16s %.2f per request, %.2f per pair" % (where, n / reqs, n / pairs))
        print("reader's misses per query pair: %.2f (charged to threads %.2f)"
              % ((misses[("reader", "thread")] + misses[("reader", "self")]) / pairs,
                 misses[("reader", "thread")] / pairs))
        for where, n in sorted(reader_at.items(), key=lambda x: -x[1]):
            print("    %-16s %.2f per pair" % (where, n / pairs))
        for kind, per, title in (("thread", reqs, "threads' misses charged to the reader, per request, by the function missing"),
                                 ("reader", pairs, "the reader's misses per pair, by function"),
                                 ("thread-thread", reqs, "threads' misses charged to other threads, per request, by function")):
            print(title)
            for (k, f), n in sorted(by_fn.items(), key=lambda x: -x[1]):
                if k == kind and n / per >= 0.01:
                    print("    %-32s %.2f" % (f, n / per))


    if len(sys.argv) > 3 and sys.argv[3] == "--lines":
        # by source line (addr2line; a binary built with -g)
        ips = sorted({ip for _, ip in by_ip})
        out = subprocess.run(["addr2line", "-i", "-e", sys.argv[2]] +
                             ["%x" % (x - 0x108000) for x in ips], capture_output=True, text=True).stdout
        # -i prints the inline chain: keep the innermost (first) line of each
        src, i = {}, 0
        lines = out.splitlines()
        # addr2line -i gives a variable number of lines per address: redo one by one
        for x in ips:
            o = subprocess.run(["addr2line", "-i", "-e", sys.argv[2], "%x" % (x - 0x108000)],
                               capture_output=True, text=True).stdout.split("\n")
            src[x] = " < ".join(l.split("/")[-1] for l in o if l)[:90]
        for kind, per in (("thread", reqs), ("reader", pairs), ("thread-thread", reqs)):
            agg = collections.Counter()
            for (k, x), n in by_ip.items():
                if k == kind:
                    agg[src[x]] += n
            print("%s misses by source line (per %s)" % (kind, "pair" if kind == "reader" else "request"))
            for where, n in sorted(agg.items(), key=lambda x: -x[1]):
                if n / per >= 0.005:
                    print("    %6.3f  %s" % (n / per, where))


if __name__ == "__main__":
    main()
