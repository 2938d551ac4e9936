#!/usr/bin/env bash
# Model-checks the engine thread's park against an issuer's wake-up
# (park_sb.pml, beside this script; cuda/engine.c, WAKING THE ENGINE THREAD)
# with Spin, exhaustively: the runs of runs.txt (each configuration must
# pass, each mutant must fail), by tools/spin_check.sh, which says how and
# takes the same flags (--only, --keep, --list, -DNAME, ...). Exit status 0
# when every run came out as expected.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../../tools/spin_check.sh" "$here/runs.txt" "$@"
