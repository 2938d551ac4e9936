#!/usr/bin/env bash
# Model-checks ledger/'s protocols with Spin: the runs of runs.txt (beside
# this script), by tools/spin_check.sh, which says how. Exit status 0 when
# every run came out as expected.
#
# Usage: ledger/model/check.sh [--deep] [--jobs N] [--only REGEX] [-DNAME]... [--keep] [--list]
#   e.g. --only EER, --only ^pass; -DBUG_ABANDON_STORE --only ^pass (watch a
#   mutant fail everywhere, with its counterexample); --deep (the larger
#   bounds of runs.txt: >8 GB, ~10 min); --list (the runs, nothing run).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../tools/spin_check.sh" "$here/runs.txt" "$@"
