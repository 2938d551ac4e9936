"""The rows of ledger_bench --json files, for the GPU-host scripts' summaries
(bench/core5a_h200.sh, bench/reader9_h200.sh: PYTHONPATH=bench)."""
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
