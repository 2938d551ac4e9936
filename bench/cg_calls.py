#!/usr/bin/env python3
"""Per function of one callgrind thread file: calls (summed over callers),
self Ir, inclusive Ir (self + callees' inclusive as recorded at call sites).
Usage: bench/cg_calls.py FILE [ITERS] [REGEX] (bench/RESULTS.md, issue 10:
what pool_2s pays per iteration)"""
import collections, re, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # | head
path = sys.argv[1]
iters = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
pat = re.compile(sys.argv[3]) if len(sys.argv) > 3 else None
names = {}
def name(kind, s):
    m = re.match(r'\((\d+)\)(?:\s+(.*))?', s)
    if not m: return s
    key = (kind, m.group(1))
    if m.group(2): names[key] = m.group(2)
    return names.get(key, s)
self_ir = collections.Counter(); incl = collections.Counter(); calls = collections.Counter()
cur = None; pending_call = None; cfn = None
for line in open(path):
    line = line.rstrip('\n')
    if line.startswith('fn='):
        cur = name('fn', line[3:]); continue
    if line.startswith('cfn='):
        cfn = name('fn', line[4:]); continue
    if line.startswith('calls='):
        pending_call = int(line[6:].split()[0]); continue
    if line and (line[0].isdigit() or line[0] in '+-*' ) and cur is not None:
        parts = line.split()
        if len(parts) < 2: continue
        try: ir = int(parts[-1])
        except ValueError: continue
        if pending_call is not None:
            calls[cfn] += pending_call; incl[cur] += ir; pending_call = None
        else:
            self_ir[cur] += ir; incl[cur] += ir
rows = []
for f in set(self_ir) | set(calls):
    if pat and not pat.search(f): continue
    rows.append((incl[f], f))
rows.sort(reverse=True)
print("%-40s %10s %10s %10s %10s" % ("function", "calls/it", "self/it", "incl/it", "incl/call"))
for ir, f in rows:
    c = calls[f]
    print("%-40s %10.3f %10.1f %10.1f %10.1f" % (f[:40], c/iters, self_ir[f]/iters, ir/iters, ir/c if c else 0))
