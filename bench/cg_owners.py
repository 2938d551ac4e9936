#!/usr/bin/env python3
"""The request thread's pool_2s iteration by owner (pool, layer, ledger,
driver, harness), Ir per iteration, from one callgrind thread file of
pool_bench --driver=host --only pool_2s --threads 1 --drain-every 1.
Usage: bench/cg_owners.py FILE ITERS (bench/RESULTS.md, issue 10, sixth
session: the pool's own instructions). Rows are self Ir of the named
functions, or inclusive where the row says so; the first slab's carve (the
host driver's memset of 2 MiB, amortised over ITERS) and the harness's
drain (hd_cuStreamSynchronize) are left out of the second total."""
import collections, re, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # | head
path, iters = sys.argv[1], float(sys.argv[2])
names = {}
def name(s):
    m = re.match(r'\((\d+)\)(?:\s+(.*))?', s)
    if not m: return s
    if m.group(2): names[m.group(1)] = m.group(2)
    return names.get(m.group(1), s)
selfc = collections.Counter(); incl = collections.Counter()
edge = collections.Counter()
cur = cfn = None; pend = False
for line in open(path):
    line = line.rstrip('\n')
    if line.startswith('fn='): cur = name(line[3:]); continue
    if line.startswith('cfn='): cfn = name(line[4:]); continue
    if line.startswith('calls='): pend = True; continue
    if line and (line[0].isdigit() or line[0] in '+-*') and cur:
        ir = int(line.split()[-1])
        if pend: edge[(cur, cfn)] += ir; incl[cur] += ir; pend = False
        else: selfc[cur] += ir; incl[cur] += ir
def S(*fs): return sum(selfc[f] for f in fs) / iters
def I(*fs): return sum(incl[f] for f in fs) / iters
total = I('overhead_thread') - edge[('overhead_thread', 'hd_cuStreamSynchronize')] / iters
carve = I('slp__slow_alloc')
keeps = I('slp__unuse_keep')
rows = [
    ('all, less the harness drain', total),
    ('all, less the drain and the first slab', total - carve),
    ('pool: slp_alloc (self; slp__alloc_miss self)',
     S('slp_alloc', 'slp__alloc_miss')),
    ('pool: slp_alloc clock (clock_gettime, incl.)',
     I('clock_gettime@@GLIBC_2.17')),
    ('pool: slp_record_use (self; slp__check_named, slp__use self)',
     S('slp_record_use', 'slp__check_named.part.0', 'slp__check_named',
       'slp__use')),
    ('pool: slp_free (self; its out-of-line parts)',
     S('slp_free', 'slp__free_list', 'slp__free_new_cache')),
    ('pool: keeps in own polls (slp__unuse_keep incl., less the hook)',
     keeps - I('count_recycle')),
    ('bench: on_recycle hook (count_recycle)', I('count_recycle')),
    ('pool: own poll self, slp__so_take',
     S('slp__poll_own.part.0', 'slp__poll_own', 'slp__so_take')),
    ('layer: record (slc_stream_record_deferred incl. less ldg_enqueue)',
     I('slc_stream_record_deferred') - I('ldg_enqueue')),
    ('layer: slc_stream_check_live, slc_stream_device',
     I('slc_stream_check_live', 'slc_stream_device')),
    ('layer: own poll (slc_stream_query less release and driver; progress, refs)',
     I('slc_stream_query') - I('ldg_release') - I('hd_cuStreamQuery')
     + I('slc_stream_progress_get', 'slc_stream_unref', 'slc_stream_ref')),
    ('ledger: enqueue (ldg_enqueue incl.)', I('ldg_enqueue')),
    ('ledger: release walk (ldg_release incl. less the keeps)',
     I('ldg_release') - keeps),
    ('driver (host executor): cuStreamQuery of the own polls',
     I('hd_cuStreamQuery')),
    ('harness: overhead_thread self', S('overhead_thread')),
]
for k, v in rows: print('%-72s %8.1f' % (k, v))
