#!/usr/bin/env python3
"""What one call through cuda/ costs, split into driver, ledger and layer.

Reads a callgrind profile taken with --dump-instr=yes and
--separate-callers=N (bench/cuda_layer_cost.sh takes it), and for each
function named on the command line (slc_event_record, slc_launch, ...)
prints per call:
  - instructions executed inside it, split by whose code ran: the driver's
    (any frame of the host executor, hd_*, between the instruction and the
    function), the ledger's (any ldg_* frame), the layer's (the rest: cuda/
    and the libc calls it makes itself, e.g. pthread_mutex_lock);
  - locked read-modify-writes executed (x86 instructions with a lock prefix,
    and xchg with a memory operand, which is locked implicitly), split the
    same way and named by the function that executed them;
  - the driver entry points it called (hd_cu*), with calls per call.
Locked instructions are found by disassembling each object the profile
names (objdump -d) and matching the executed instruction addresses, so the
counts are dynamic: a branch not taken counts nothing.

usage: cuda_layer_cost.py PROFILE FUNCTION...
"""
import collections
import re
import subprocess
import sys


def locked_addresses(path):
    """Addresses of locked RMW instructions in an object file."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path],
                         capture_output=True, text=True, check=False).stdout
    addrs = set()
    for line in out.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if not m:
            continue
        ins = m.group(2)
        if re.match(r"lock\b", ins) or (re.match(r"xchg", ins) and "(" in ins):
            addrs.add(int(m.group(1), 16))
    return addrs


def parse(profile):
    """Yields (object, function, address, Ir) for each executed instruction
    (self cost only), and collects calls[(caller, callee)] = count."""
    names = {"ob": {}, "fn": {}, "cob": {}, "cfn": {}}
    ob = fn = None
    cfn = None
    last = 0
    skip_next = False
    calls = collections.Counter()
    cost = []
    for raw in open(profile, encoding="utf-8", errors="replace"):
        line = raw.rstrip("\n")
        m = re.match(r"(ob|fn|cob|cfn|fl|fi|fe|cfi|cfl)=(?:\((\d+)\))?\s*(.*)",
                     line)
        if m:
            kind, ident, name = m.groups()
            table = {"cob": "ob", "cfn": "fn"}.get(kind, kind)
            if table in ("ob", "fn"):
                if ident is not None and name:
                    names[table][ident] = name
                value = names[table].get(ident, name) if ident else name
                if kind == "ob":
                    ob = value
                elif kind == "fn":
                    fn = value
                elif kind == "cfn":
                    cfn = value
            continue
        if line.startswith("calls="):
            count = int(line.split()[0][6:])
            calls[(fn, cfn)] += count
            skip_next = True
            continue
        if not line or not (line[0] in "0123456789+-*" or line.startswith("0x")):
            continue
        parts = line.split()
        pos = parts[0]
        if pos.startswith("0x"):
            addr = int(pos, 16)
        elif pos.startswith("+"):
            addr = last + int(pos[1:])
        elif pos.startswith("-"):
            addr = last - int(pos[1:])
        elif pos == "*":
            addr = last
        else:
            addr = int(pos)
        last = addr
        if skip_next:  # the inclusive cost of the call just named
            skip_next = False
            continue
        ir = int(parts[-1]) if len(parts) >= 3 else 0
        if ir:
            cost.append((ob, fn, addr, ir))
    return cost, calls


def base(name):
    """A function's own name, without callgrind's ' callers and clone tags."""
    return name.split("'")[0]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    profile, targets = sys.argv[1], sys.argv[2:]
    cost, calls = parse(profile)
    locked = {}
    # Calls of each target (top frames; recursion is not expected here).
    for target in targets:
        n_calls = sum(c for (caller, callee), c in calls.items()
                      if base(callee) == target and target not in
                      callee.split("'")[1:] and base(caller) != target)
        if n_calls == 0:
            print(f"{target}: not called in this profile")
            continue
        ir = collections.Counter()
        lk = collections.Counter()
        lk_by_fn = collections.Counter()
        ir_by_fn = collections.Counter()
        for ob, fn, addr, n in cost:
            chain = fn.split("'")
            names_ = [re.sub(r"\.(part|cold|constprop|isra)\.\d+", "", c)
                      for c in chain]
            if target not in names_:
                continue
            below = names_[:names_.index(target) + 1]
            if any(c.startswith("hd_") for c in below):
                who = "driver"
            elif any(c.startswith("ldg") for c in below):
                who = "ledger"
            else:
                who = "layer"
            ir[who] += n
            ir_by_fn[(who, names_[0])] += n
            if ob not in locked:
                locked[ob] = locked_addresses(ob) if ob and ob.startswith("/") \
                    else set()
            if addr in locked[ob]:
                lk[who] += n
                lk_by_fn[(who, names_[0])] += n
        total = sum(ir.values())
        print(f"{target}: {n_calls} calls; instructions per call "
              f"{total / n_calls:.1f} = driver {ir['driver'] / n_calls:.1f} + "
              f"ledger {ir['ledger'] / n_calls:.1f} + "
              f"layer {ir['layer'] / n_calls:.1f}")
        print(f"  locked RMWs per call: driver {lk['driver'] / n_calls:.2f}, "
              f"ledger {lk['ledger'] / n_calls:.2f}, "
              f"layer {lk['layer'] / n_calls:.2f}")
        for (who, f), n in sorted(lk_by_fn.items(), key=lambda kv: -kv[1]):
            print(f"    {who:6s} {f}: {n / n_calls:.2f}")
        print("  driver entry points called per call:")
        entries = collections.Counter()
        for (caller, callee), c in calls.items():
            chain = [re.sub(r"\.(part|cold|constprop|isra)\.\d+", "", x)
                     for x in callee.split("'")]
            if target in chain[1:] and chain[0].startswith("hd_cu") and \
                    not any(x.startswith("hd_") for x in
                            chain[1:chain.index(target)]):
                entries[chain[0][3:]] += c
        for e, c in sorted(entries.items()):
            print(f"    {e}: {c / n_calls:.2f}")
        print("  layer instructions per call by function (self):")
        for (who, f), n in sorted(ir_by_fn.items(), key=lambda kv: -kv[1]):
            if who == "layer" and n / n_calls >= 0.5:
                print(f"    {f}: {n / n_calls:.1f}")


if __name__ == "__main__":
    main()
