"""Serving cells (torch_alloc/serve.py), one process each, started together
per round and run one at a time (issue 14; bench/torch_h200.sh calls it).

    torch_cells.py OUT --serve SERVE_PY --seconds S --budget B
                   --alloc LABEL=torch | LABEL=/path/libsl_torch.so ...
                   --round "LABEL:tN LABEL:pN ..." [--round ...]

A cell is an allocator label and a parallelism: tN = N threads of one
process, pN = N processes of one thread (serve.py --procs N). Per round,
every cell's process starts at once (imports, model, CUDA context and
warm-up in parallel, which is most of a cell's ~20 s), then each, in the
round's order, is told to go (serve.py --hold: READY, then a line on
stdin), serves for S seconds while the others wait idle, and exits
before the next goes: each cell still runs alone, and the start-up is paid
once per round instead of once per cell (on the H200, 10 cells of 3 s in
~60 s instead of ~200 s). The first torch cell saves OUT/ref.pt (its
first outputs); every pool cell checks its own against it at its end (a
round's first cell is its torch one, or ref.pt exists from an earlier
round). OUT/serve_rR_LABEL_tN.json (or _pN) per cell, as serve.py writes
it; a line per cell on stdout ("--- serve_r1_torch_t4: exit 0 (4 s)").
B: seconds from now; a round that would not fit (estimated from the last
one, 90 s for the first) is skipped, a cell that would not fit is killed
before it goes; each says SKIPPED. SIGTERM kills every child. Children
are run as "python3" from PATH. Exit 0 if every cell that went exited 0.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--serve", required=True)
ap.add_argument("--seconds", type=float, default=3.0)
ap.add_argument("--budget", type=float, default=200.0)
ap.add_argument("--ready-timeout", type=float, default=120.0)
ap.add_argument("--alloc", action="append", default=[])
ap.add_argument("--round", action="append", default=[])
args = ap.parse_args()
t_start = time.monotonic()
allocs = {}
for a in args.alloc:
    label, _, where = a.partition("=")
    if not label or not where:
        ap.error(f"--alloc {a}: LABEL=torch or LABEL=/path/libsl_torch.so")
    allocs[label] = where
rounds = []
for r in args.round:
    cells = []
    for c in r.split():
        label, _, par = c.partition(":")
        if label not in allocs or par[:1] not in ("t", "p") or \
                not par[1:].isdigit() or int(par[1:]) < 1:
            ap.error(f"--round: bad cell {c} (LABEL:tN or LABEL:pN)")
        cells.append((label, par))
    rounds.append(cells)
out = os.path.abspath(args.out)
os.makedirs(out, exist_ok=True)
ref = os.path.join(out, "ref.pt")


def elapsed():
    return time.monotonic() - t_start


def say(line):
    print(line, flush=True)


class Cell:
    def __init__(self, rnd, label, par):
        self.name = f"serve_r{rnd}_{label}_{par}"
        n = int(par[1:])
        argv = ["python3", args.serve, "--seconds", f"{args.seconds:g}",
                "--hold", "--out", os.path.join(out, self.name + ".json"),
                "--label", label]
        argv += ["--threads", str(n)] if par[0] == "t" else \
            ["--threads", "1", "--procs", str(n)]
        if allocs[label] == "torch":
            argv += ["--allocator", "torch"]
            if not os.path.exists(ref) and not Cell.saving:
                argv += ["--save", ref]
                Cell.saving = True
        else:
            argv += ["--allocator", "pool", "--so", allocs[label],
                     "--check", ref]
        self.ready = threading.Event()
        self.log = open(os.path.join(out, self.name + ".log"), "w")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True,
                                  start_new_session=True)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    saving = False

    def read(self):
        for line in self.p.stdout:
            if line.strip() == "READY":
                self.ready.set()
            self.log.write(line)
            self.log.flush()

    def kill(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except OSError:
                pass
            self.p.wait()


live = []
rc = 0


def on_term(signum, frame):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, on_term)


def run_round(rnd, cells):
    global rc
    t0 = elapsed()
    group = [Cell(rnd, label, par) for label, par in cells]
    live.extend(group)
    deadline = time.monotonic() + args.ready_timeout
    for c in group:
        while not c.ready.wait(0.1):
            if c.p.poll() is not None or time.monotonic() > deadline:
                break
    say(f"=== round {rnd}: {sum(c.ready.is_set() for c in group)} of "
        f"{len(group)} cells ready after {elapsed() - t0:.0f} s")
    for c in group:
        if not c.ready.is_set():
            c.kill()
            c.reader.join(timeout=5)
            rc = 1
            say(f"--- {c.name}: never ready (exit {c.p.returncode}; "
                f"{c.name}.log)")
            continue
        if elapsed() + args.seconds + 20 > args.budget:
            c.kill()
            say(f"--- {c.name}: SKIPPED ({elapsed():.0f} s used, the budget "
                f"is {args.budget:.0f} s)")
            continue
        t1 = elapsed()
        try:
            c.p.stdin.write("GO\n")
            c.p.stdin.flush()
            c.p.wait(timeout=args.seconds + 60)
        except (OSError, subprocess.TimeoutExpired):
            c.kill()
        c.reader.join(timeout=5)
        rc = rc or int(c.p.returncode != 0)
        say(f"--- {c.name}: exit {c.p.returncode} ({elapsed() - t1:.0f} s)")
    for c in group:
        c.kill()
        live.remove(c)
    return elapsed() - t0


try:
    est = 90.0
    for rnd, cells in enumerate(rounds, 1):
        if elapsed() + est > args.budget:
            for label, par in cells:
                say(f"--- serve_r{rnd}_{label}_{par}: SKIPPED ({elapsed():.0f}"
                    f" s used, a round takes ~{est:.0f} s, the budget is "
                    f"{args.budget:.0f} s)")
            continue
        est = run_round(rnd, cells)
except KeyboardInterrupt:
    say(f"--- interrupted after {elapsed():.0f} s: the cells killed")
    rc = 1
finally:
    for c in list(live):
        c.kill()
sys.exit(rc)
