#!/usr/bin/env python3
"""Per source line, what one call of a function costs: instructions or
L1 misses, the lines of what it inlines included.

  cg_lines.py ir PROFILE CALLS FUNCTION
      a callgrind profile taken with --dump-line=yes (and --dump-instr=yes):
      the self instructions of FUNCTION per file:line, per call (CALLS
      calls), every inlined line under its own file (cuda/internal.h, ...).
  cg_lines.py miss PROFILE CALLS FUNCTION[,FUNCTION...]
      a cachegrind profile (--cache-sim=yes): D1 read and write misses per
      file:line of those functions, per call, and their totals, with their
      I1 misses (code lines fetched) per call.

Lines under 0.05 per call are left out of the list (not of the totals).
bench/launch10_counts.sh runs both on cuda_bench's launch.
"""
import collections
import re
import sys


def callgrind_lines(path, target):
    names = {"fl": {}, "fn": {}}
    fl = cur = fn = None
    addr = line = 0
    skip = False
    cost = collections.Counter()

    def name(kind, rest):
        m = re.match(r"\((\d+)\)\s*(.*)", rest)
        if not m:
            return rest
        ident, text = m.groups()
        if text:
            names[kind][ident] = text
        return names[kind].get(ident, text)

    def step(tok, prev, base):
        if tok == "*":
            return prev
        if tok[0] in "+-":
            return prev + int(tok, base)
        return int(tok, 16 if tok.startswith("0x") else base)

    for raw in open(path, encoding="utf-8", errors="replace"):
        text = raw.rstrip("\n")
        m = re.match(r"(fl|fi|fe|fn|cfn|cfl|cfi|ob|cob)=(.*)", text)
        if m:
            kind, rest = m.groups()
            if kind in ("fl", "fi", "fe"):
                cur = name("fl", rest)
                if kind == "fl":
                    fl = cur
            elif kind in ("cfl", "cfi"):
                name("fl", rest)
            elif kind == "fn":
                fn, cur = name("fn", rest), fl
            elif kind == "cfn":
                name("fn", rest)
            continue
        if text.startswith("calls="):
            skip = True
            continue
        if not text or text[0] not in "0123456789+-*":
            continue
        parts = text.split()
        addr = step(parts[0], addr, 16)
        line = step(parts[1], line, 10)
        if skip:  # the cost line of a call: inclusive, not this line's own
            skip = False
            continue
        if fn == target and len(parts) > 2:
            cost[(cur.split("/")[-1], line)] += int(parts[2])
    return cost


def cachegrind_lines(path, targets):
    fl = fn = None
    cost = collections.Counter()
    for raw in open(path, encoding="utf-8", errors="replace"):
        if raw.startswith("fl="):
            fl = raw[3:].strip().split("/")[-1]
        elif raw.startswith("fn="):
            fn = raw[3:].strip()
        else:
            p = raw.split()
            # line Ir I1mr ILmr Dr D1mr DLmr Dw D1mw DLmw
            if fn in targets and len(p) >= 10 and p[0].isdigit():
                cost[(fn, fl, int(p[0]), "r")] += int(p[5])
                cost[(fn, fl, int(p[0]), "w")] += int(p[8])
                cost[(fn, fl, int(p[0]), "i")] += int(p[2])
    return cost


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("ir", "miss"):
        sys.exit(__doc__)
    mode, path, calls = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if mode == "ir":
        cost = callgrind_lines(path, sys.argv[4])
        for (f, ln), c in sorted(cost.items()):
            if c / calls >= 0.05:
                print(f"  {f}:{ln} {c / calls:.1f}")
        print(f"  total {sum(cost.values()) / calls:.1f} instructions per call")
        return
    targets = set(sys.argv[4].split(","))
    cost = cachegrind_lines(path, targets)
    tot = collections.Counter()
    for (fn, f, ln, rw), c in sorted(cost.items()):
        tot[(fn, rw)] += c
        if rw != "i" and c / calls >= 0.05:
            print(f"  {fn} {f}:{ln} D1 {rw} miss {c / calls:.2f}")
    for fn in sorted(targets):
        print(f"  {fn}: D1 misses per call, read {tot[(fn, 'r')] / calls:.2f}"
              f", write {tot[(fn, 'w')] / calls:.2f}; I1 misses "
              f"{tot[(fn, 'i')] / calls:.2f}")


if __name__ == "__main__":
    main()
