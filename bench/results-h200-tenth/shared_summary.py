#!/usr/bin/env python3
"""Summarises runs 10a-10c and 11a (issue 11, tenth and eleventh sessions) from the rows the runs
printed: per thread count, the median over rounds of each ceiling shape and of
the shared rows of each binary, with every round. Usage:
  shared_summary.py DIR SHAPES VARIANTS   e.g.
  shared_summary.py run10b ceiling,ceiling_load,ceiling_pfw,ceiling_rmw,ceiling_release B,P,R
"""
import glob, re, statistics as st, sys, collections

def ns(x):
    return float(x[:-1]) * 1000 if x.endswith('u') else float(x)

def rows(path):
    out = {}
    for line in open(path):
        m = re.match(r'^(\w+)\s+(\d+) \|\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+(\S+)\s+(\S+) \|\s+(\S+)', line)
        if m:
            w, t = m.group(1), int(m.group(2))
            mtx = m.group(8)
            out[(w, t)] = dict(ops=float(m.group(3)), p999=ns(m.group(7)),
                               mtx=None if mtx == '-' else float(mtx))
    return out

def med(xs):
    xs = [x for x in xs if x is not None]  # no mutex column with --impl ledger
    return st.median(xs) if xs else float('nan')

d, shapes, variants = sys.argv[1], sys.argv[2].split(','), sys.argv[3].split(',')
print('ceiling shapes: M ops/s, median [rounds]; p99.9 ns (median)')
c = collections.defaultdict(list)
for w in shapes:
    for f in sorted(glob.glob(f'{d}/ceil-{w}-*.txt')):
        for k, v in rows(f).items():
            c[k].append(v)
for t in [1, 2, 4, 8, 16]:
    line = f'{t:3d}'
    for w in shapes:
        rs = c[(w, t)]
        if rs:
            line += f" | {w} {med([r['ops'] for r in rs]):5.1f} [{' '.join('%.1f' % r['ops'] for r in rs)}] {med([r['p999'] for r in rs]):.0f}"
    print(line)
for v in variants:
    s = collections.defaultdict(list)
    for f in sorted(glob.glob(f'{d}/shared-{v}-*.txt')):
        for k, r in rows(f).items():
            s[k].append(r)
    print(f'variant {v}: shared, M ops/s median [rounds]; of the same invocation\'s ceiling; mutex; p99.9')
    for t in [1, 2, 4, 8, 16]:
        l, ce = s[('shared', t)], s[('ceiling', t)]
        if not l:
            continue
        fr = [a['ops'] / b['ops'] * 100 for a, b in zip(l, ce)]
        print(f" {t:3d} ldg {med([r['ops'] for r in l]):6.2f} [{' '.join('%.1f' % r['ops'] for r in l)}]"
              f" ceil {med([r['ops'] for r in ce]):5.1f} of-ceil {med(fr):.0f}% [{' '.join('%.0f' % x for x in fr)}]"
              f" mtx {med([r['mtx'] for r in l]):.2f} p999 ldg {med([r['p999'] for r in l]):.0f} ceil {med([r['p999'] for r in ce]):.0f}")
