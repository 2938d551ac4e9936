#!/usr/bin/env python3
"""Locked read-modify-writes and full fences executed, per function, counted
exactly from a callgrind run with --dump-instr=yes (issue 11, round 3).

callgrind gives every instruction address its execution count (Ir, self
cost); objdump says which instructions are `lock`-prefixed, an implicitly
locked `xchg` with memory, or an `mfence`. Joined, they count the locked
operations each function executed, with no noise and no hardware counters.
Usage: issue11_locked_ops.py CALLGRIND_OUT BINARY [OPS]
  prints per function: executions of each locked instruction (mnemonic),
  divided by OPS when given. Every object callgrind names (the binary, and
  shared libraries such as libc's pthread_mutex_lock) is disassembled at
  the object-relative addresses callgrind dumps.
"""
import re
import subprocess
import sys
from collections import defaultdict


def parse_callgrind(path):
    counts = defaultdict(int)  # (object, fn, addr) -> executions
    names = {}
    obj = fn = None
    pos = 0
    skip_next = False

    def name(kind, rest):
        m = re.match(r'\((\d+)\)(?: (.*))?', rest)
        if not m:
            return rest
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, rest)

    with open(path) as f:
        for line in f:
            line = line.rstrip('\n')
            if not line:
                continue
            if line.startswith('ob='):
                obj = name('ob', line[3:])
                continue
            if line.startswith('fn='):
                fn = name('fn', line[3:])
                continue
            if line.startswith('cob='):
                name('ob', line[4:])
                continue
            if line.startswith(('cfi=', 'cfl=')):
                name('fl', line[4:])
                continue
            if line.startswith('cfn='):
                name('fn', line[4:])
                continue
            if line.startswith(('fl=', 'fi=', 'fe=')):
                name('fl', line[3:])
                continue
            if line.startswith('calls='):
                skip_next = True
                continue
            c = line[0]
            if not (c in '+-*' or c == '0' or c.isdigit()):
                continue
            parts = line.split()
            a = parts[0]
            if a == '*':
                pass
            elif a.startswith('+'):
                pos += int(a[1:], 0)
            elif a.startswith('-'):
                pos -= int(a[1:], 0)
            else:
                pos = int(a, 0)
            if skip_next:
                skip_next = False
                continue
            if len(parts) >= 3 and obj is not None:
                counts[(obj, fn, pos)] += int(parts[2])
    return counts


def locked_addrs(binary):
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', binary],
                         capture_output=True, text=True, check=True).stdout
    addrs = {}
    for line in out.splitlines():
        m = re.match(r'\s*([0-9a-f]+):\s+(.*)', line)
        if not m:
            continue
        ins = m.group(2).strip()
        if (re.match(r'lock\b', ins) or ins.startswith('mfence') or
                (re.match(r'xchg\b', ins) and '(' in ins)):
            addrs[int(m.group(1), 16)] = ' '.join(ins.split()[:2]).split(',')[0]
    return addrs


def main():
    cg, binary = sys.argv[1], sys.argv[2]
    ops = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    counts = parse_callgrind(cg)
    objs = {}
    per = defaultdict(float)
    total = 0
    for (obj, fn, a), n in counts.items():
        if obj not in objs:
            path = binary if obj.endswith(binary.split('/')[-1]) else obj
            try:
                objs[obj] = locked_addrs(path) if path.startswith('/') or path == binary else {}
            except (OSError, subprocess.CalledProcessError):
                objs[obj] = {}
        locked = objs[obj]
        if a in locked:
            per[(fn, locked[a])] += n
            total += n
    for (fn, ins), n in sorted(per.items(), key=lambda kv: -kv[1]):
        print(f'{n / ops:10.4f}  {ins:24s} {fn}')
    print(f'{total / ops:10.4f}  total')


if __name__ == '__main__':
    main()
