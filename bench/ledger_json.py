"""The rows of ledger_bench --json files, for the GPU-host scripts' summaries
(bench/core5a_h200.sh, bench/reader9_h200.sh, bench/rdr10_h200.sh:
PYTHONPATH=bench), and the quantile and format helpers the last two share."""
import json
import os


def rows(out, name):
    """The "rows" of OUT/NAME.json: [] when the file is missing (a skipped
    step); [] and a line saying so when it cannot be read (a step cut short)."""
    p = os.path.join(out, name + ".json")
    if not os.path.exists(p):
        return []
    try:
        with open(p) as f:
            return json.load(f)["rows"]
    except Exception as e:  # pylint: disable=broad-except
        print("unreadable", p, e)
        return []


def pct(xs, q):
    """The q-quantile of xs by nearest rank, as ledger_bench's pct(); None
    when xs is empty."""
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1) + 0.5)] if xs else None


def f(x, scale=100.0, fmt="%.1f"):
    """x scaled and formatted (a cost in %, by default); "-" for None."""
    return "-" if x is None else fmt % (x * scale)


def reader_modes(rate):
    """The reader rows' two modes (the name of their steps) with their
    targets (issue 11), for bench/reader9_h200.sh and bench/rdr10_h200.sh."""
    return (("unpaced", "reader without pause (target: ldg <= the mutex design's)"),
            ("paced", "reader paced to %.0f queries/s (target: ldg <= 10 %%)" % rate))


def verdict(mode, ldg, mtx):
    """A reader row's target judged on the paired medians (fractions): the
    unpaced row's ldg <= mtx, the paced row's ldg <= 10 %; "-" when a median
    it needs is missing."""
    if ldg is None or (mode == "unpaced" and mtx is None):
        return "-"
    if mode == "unpaced":
        return "%s (ldg %s mtx %s)" % ("met" if ldg <= mtx else "missed", f(ldg), f(mtx))
    return "%s (ldg %s)" % ("met" if ldg <= 0.10 else "missed", f(ldg))
