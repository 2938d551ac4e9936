#!/usr/bin/env python3
"""Locked read-modify-writes executed, per function, from one callgrind
thread file written with --dump-instr=yes: each executed instruction's
address is looked up in its object's disassembly (objdump -d); `lock`-
prefixed instructions and xchg with a memory operand (implicitly locked)
count. Usage: bench/cg_locked.py FILE ITERS (bench/RESULTS.md, issue 10)"""
import collections, re, signal, subprocess, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # | head
path, iters = sys.argv[1], float(sys.argv[2])
names = {}
def name(kind, s):
    m = re.match(r'\((\d+)\)(?:\s+(.*))?', s)
    if not m: return s
    if m.group(2): names[(kind, m.group(1))] = m.group(2)
    return names.get((kind, m.group(1)), s)
execd = collections.defaultdict(collections.Counter)  # ob -> addr -> count
owner = {}                                            # (ob, addr) -> fn
ob = cur = None; addr = 0; skip_next = False
for line in open(path):
    line = line.rstrip('\n')
    if line.startswith('ob='): ob = name('ob', line[3:]); continue
    if line.startswith('cob='): name('ob', line[4:]); continue
    if line.startswith('fn='): cur = name('fn', line[3:]); continue
    if line.startswith('cfn='): name('fn', line[4:]); continue
    if line.startswith('calls='): skip_next = True; continue
    if not line or not (line[0].isdigit() or line[0] in '+-*'): continue
    parts = line.split()
    p = parts[0]
    if p.startswith('0x'): addr = int(p, 16)
    elif p[0] in '+-': addr += int(p)
    elif p == '*': pass
    else: addr = int(p)
    if skip_next: skip_next = False; continue
    execd[ob][addr] += int(parts[-1]); owner[(ob, addr)] = cur
locked = collections.Counter(); calls_total = 0
for obj, counts in execd.items():
    if not obj.startswith('/'): continue
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', obj],
                         capture_output=True, text=True).stdout
    for l in out.splitlines():
        m = re.match(r'\s*([0-9a-f]+):\s+(.*)', l)
        if not m: continue
        ins = m.group(2)
        if re.match(r'lock\b', ins) or (re.match(r'xchg', ins) and '(' in ins):
            a = int(m.group(1), 16)
            if a in counts:
                locked[owner[(obj, a)]] += counts[a]
tot = sum(locked.values())
print("locked RMWs per iteration: %.2f" % (tot / iters))
for f, n in locked.most_common():
    if n / iters >= 0.005:
        print("  %-40s %6.3f" % (f[:40], n / iters))
