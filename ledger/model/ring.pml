/*
 * ring.pml: one stream's ring (ledger/), and the segment pool it shares with
 * a new stream, model-checked with Spin. The ring code is in
 * ring_common.pml, which lists the C function behind each inline and what
 * the model abstracts (memory orders, RCU, sizes, the pool).
 *
 * Processes (the C calls each one makes):
 *   Enqueuer(s, e0, n)  n x ldg_enqueue -> ldg__ring_enqueue: ldg__ring_reserve,
 *                       ldg__ring_extend, ldg__seg_get, ldg__raise_tail_end,
 *                       ldg__seg_of_reserved, ldg__resolve_one,
 *                       ldg__seg_resolve, ldg__ring_advance_head,
 *                       ldg__seg_retire
 *   Releaser(s, n)      n x ldg_release(s, ldg_mark(s)) -> ldg__release ->
 *                       ldg__engine: ldg__claim, ldg__take_chunk,
 *                       ldg__seg_resolve, ldg__ring_advance_head,
 *                       ldg__seg_retire
 *   Destroyer(s)        ldg_stream_destroy -> ldg__destroy:
 *                       ldg__mark_destroyed, then ldg__engine
 *   Querier(s, n)       n x ldg__ring_visit (ldg_holds_vector & co.)
 *   Trimmer()           ldg_ledger_trim -> ldg__pools_drain(l, false)
 *   Creator(s)          ldg_stream_create -> ldg__ring_init: the new
 *                       stream's first segment by ldg__seg_get (a pop from
 *                       the pool, under RCU)
 *   init                ldg__ring_init for stream 0, starts a configuration,
 *                       waits for it, checks, releases to the mark (a final
 *                       stream sync; refused if destroyed) and checks again.
 *
 * Configurations (spin -DCFG_...; SZ = 2 slots a segment, so rings grow):
 *   CFG_EER   2 enqueuers x 2 ops + 1 releaser x 2 releases   (default)
 *   CFG_ERR   1 enqueuer x 3 ops + 2 releasers x 1 release
 *   CFG_EED   2 enqueuers x 2 ops + 1 destroyer
 *   CFG_ERD   1 enqueuer x 3 ops + 1 releaser x 1 + 1 destroyer
 *   CFG_ERQ   1 enqueuer x 3 ops + 1 releaser x 2 + 1 querier x 1
 *   CFG_ERR5  1 enqueuer x 5 ops + 2 releasers x 1 (grows twice)
 *   CFG_EEQ   2 enqueuers x 2 ops + 1 querier x 1
 *   CFG_EE3   2 enqueuers x 3 ops (three segments; an enqueuer finds its
 *             slot by walking from head)
 *   CFG_E3D   3 enqueuers x 1 op + 1 destroyer (a destroy whose interval
 *             starts in a segment retired by retracting enqueuers)
 *   CFG_EE5R  2 enqueuers x 3 + 2 ops + 1 releaser x 1 (three segments,
 *             walks from head while segments are retired)
 *   CFG_EEC   2 enqueuers x 2 ops + 1 creator of stream 1, with two
 *             segments pooled at the start (POOL_SEED, limit 2): extenders
 *             race for pooled segments, a loser's pooled segment goes back
 *             through a grace period while the creator may be popping it
 *             (ledger issue 8, defect 2)
 *   CFG_EET   2 enqueuers x 2 ops + ldg_ledger_trim, two segments pooled
 *             at the start: the trim drains the pool while extenders pop
 *   CFG_EE3R  2 enqueuers x 3 ops + 1 releaser x 1 (140M states, 8.3 GB,
 *             ~7 min: check.sh --deep only)
 * With FASTPATH (reserve.c, RESERVING ON A SHARED STREAM; ring_common.pml's
 * ring_reserve): each enqueuer takes one of RES_R tickets on its first
 * reservation if one is left, and with it reserves by fetch_add while it
 * sees more than RES_R + 1 seqs of headroom past the first segment; the
 * CAS path keeps out of the last RES_R seqs below tail_end:
 *   CFG_FF    RES_R 1: 2 enqueuers x 3 + 2 ops (one fetch_add pending while
 *             the other fills up to the reserve and extends)
 *   CFG_FFR   RES_R 1: 2 enqueuers x 2 + 1 ops + 1 releaser x 1 (segments
 *             retired while the ring is extended ahead of its tail)
 *   CFG_FFD   RES_R 1: 2 enqueuers x 2 + 1 ops + 1 destroyer (the destroy
 *             handshake against a fetch_add)
 *   CFG_FFF   RES_R 2: 3 enqueuers x 2 + 1 + 1 ops (two fetch_adds pending
 *             at once; 21M states, 1 GB, ~90 s: check.sh --deep only); with
 *             -DFAST_AS_C, the fast check as the C makes it, without the
 *             first-segment test (implied once RES_R + 1 >= FIRST_END)
 * With ARMING (faa12: reserve.c, RESERVING ON A SHARED STREAM: ADD FIRST WHILE
 * ARMED; ring_common.pml's ring_reserve): a holder adds without looking at
 * tail while fast_gen is odd, disarms when its seq lands in the last RES_R
 * seqs below tail_end, and re-arms after a CAS-path reservation past the
 * first segment; the grow-ahead claim stores g's end - RES_R:
 *   CFG_FFA   RES_R 1: 2 enqueuers x FFA_A (3) + FFA_B (2) ops, one of
 *             them a holder (its adds racing the other's claim and
 *             extension at the end: it lands in the zone and disarms; with
 *             -DFFA_A=4 -DFFA_B=3, for the mutants, it adds again after)
 *   (With a releaser or a destroyer beside them, 2 x 2 ops, the search
 *   passed 34M states without ending in 2 minutes: not run. The destroy
 *   handshake is the same seq_cst RMW of tail as CFG_FFD's fetch_add.)
 *   CFG_FF2   RES_R 2: two holders x FF2_OPS (4) ops, no grow-ahead (SZ 2
 *             has no grow point below a zone of 2: grow_at sits at the
 *             zone's start, as the C's claim leaves it with a pool limit of
 *             0): a lander's disarm races the other's add and re-arm
 * With FASTPATH also GROWAHEAD (segment.c, GROWING AHEAD; ring_common.pml's
 * grow_early): an enqueuer whose seq (by either path) reaches grow_at, the
 * newest segment's grow point (its base here: SZ 2), claims the growth with
 * a CAS on grow_at and extends; every extension raises grow_at to the new
 * segment's grow point. In CFG_FF, FFR and FFD it races fetch_adds, the CAS
 * path's extension at the end, other claimers and releases.
 * Every configuration shares one pool (limit POOL_LIMIT = 1 segment unless
 * set): retired segments are reused by the growing ring (e.g. CFG_ERR5).
 *
 * Assertions (ring_common.pml): no segment used after its grace period
 * (TOUCH), none used outside a read-side section unless pinned
 * (TOUCH_PINNED), no ext read after its grace period; no segment retired
 * before every slot in it was published or handed back, its entry released
 * and its resolution counted, nor while head or tailseg still points at it;
 * tail, tail_end and released only grow (asserted at each CAS), tail_end
 * never passes tailseg's end, grow_at never passes tail_end, one early
 * grower per grow point, at every link the next seq is in the extended
 * segment or later (one segment ahead at most), a reserved seq always has its slot (with
 * FASTPATH: no seq handed out at or past tail_end, and tail + the
 * fetch_adds checked and not yet made < tail_end at every add); no entry
 * released twice (rel goes 0 -> 1 once); an enqueue overtaken by a release
 * releases its entry itself (the ABANDONED path); a segment whose grace
 * period ends (and would be pooled for reuse without zeroing) has every
 * slot back to EMPTY unless it is dirty; at the end: no invalid
 * end state, no done segment left at the head, every accepted entry
 * released exactly once and every refused one never, and the ring holds
 * exactly one live segment with every handed-out slot resolved. The pool:
 * a popper never reads a freed segment's link, a pop takes a pooled
 * segment and leaves a pooled top (no ABA), a pooled segment has every slot
 * EMPTY and is not dirty, the pool never passes its limit, and at the end
 * its stack holds exactly the pooled segments.
 *
 * Mutants (spin -DBUG_...: each must fail; check.sh checks that it does):
 *   BUG_ABANDON_STORE      take_chunk abandons with a plain store, not a CAS
 *   BUG_HEAD_NO_RECHECK    advance_head retires without reading resolved
 *   BUG_NO_TAILSEG_CHECK   advance_head may retire the segment tailseg names
 *                          (ring.c before 8e6cfe0)
 *   BUG_EXTEND_NO_ADVANCE  ring_extend does not advance head after linking
 *   BUG_RESOLVE_REORDER    seg_resolve's add is not seq_cst (store->load)
 *   BUG_DESTROY_ORDER      destroy reads tail before setting destroyed
 *   BUG_NO_RESET           take_chunk leaves a taken slot FULL (a pooled
 *                          segment would come back dirty)
 *   BUG_RESET_AFTER_RESOLVE  an overtaken enqueuer puts its slot back to
 *                          EMPTY after resolving it (the segment may be gone)
 *   BUG_NO_DIRTY           a retracting enqueuer does not mark the segment
 *                          dirty (it would be pooled with a RETRACTED slot)
 *   BUG_LOSER_FREE_NOW     an extender that loses the link CAS frees its
 *                          segment at once (segment.c before issue 8): a popper
 *                          reads the freed g->next
 *   BUG_LOSER_POOL_NOW     ... or pushes it back on the pool at once: ABA,
 *                          a popper installs a segment in use as the top
 *   BUG_POP_NO_RCU         ldg__ring_init pops outside a read-side section:
 *                          no grace period waits for it, ABA
 *   BUG_POOL_LIMIT_NO_SIZE the pool's limit checked without the pushed
 *                          segment's own size: the pool passes its limit
 *   BUG_TRIM_FREE_NOW      ldg_ledger_trim frees pooled segments at once: a
 *                          popper reads a freed g->next
 *   BUG_RESERVE_SHORT      the CAS path leaves RES_R - 1 seqs, not RES_R
 *                          (R one too small): a pending fetch_add lands past
 *                          tail_end
 *   BUG_FAST_FIRST_SEG     the fetch_add path also in the first segment,
 *                          where the CAS path keeps no reserve
 *   BUG_NO_DISARM          (ARMING) a lander in the zone does not disarm
 *   BUG_ARM_NO_CHECK       (ARMING) re-arm after any CAS-path reservation,
 *                          also in the first segment (no reserve there)
 *   BUG_DISARM_STORE       (ARMING) disarm by a plain store of v + 1
 *   BUG_DISARM_READ        (ARMING) a lander finding fast_gen even writes
 *                          nothing
 *   BUG_ARM_GEN_LATE       (ARMING) the armer loads fast_gen after its look
 *                          at tail
 *   BUG_CLAIM_AT_END       (ARMING) the grow claim (or, in CFG_FF2, grow_at)
 *                          at the segment's end, not end - RES_R
 *   BUG_GROW_NO_CLAIM      grow_early extends without claiming grow_at:
 *                          two early growers for one grow point (the herd
 *                          the claim prevents)
 * and in wait.pml:
 *   BUG_FRAME_EARLY_RESOLVE  a wait's slot is resolved when taken, so nothing
 *                          pins the frame
 *   BUG_POP_ANY_SEG        a popped frame's slots are counted in the next
 *                          chunk's last add, whatever segment that add is
 *                          on (not the wait's own)
 *   BUG_FRAME_KEEP_SHORT   a chunk stopping at a wait leaves its slots of
 *                          the wait's segment to the frame, but not the
 *                          wait's own: that segment is never done
 * and in destroy_sb.pml: BUG_SB_* (the handshake's seq_cst accesses weakened).
 * Reachability probes (spin -DPROBE_..., listed in ring_common.pml) turn a
 * rare path into a failure, to show a configuration reaches it.
 */

#define SZ 2

#if defined(CFG_FF) || defined(CFG_FFR) || defined(CFG_FFD)
#define FASTPATH
#define RES_R 1
#elif defined(CFG_FFF)
#define FASTPATH
#define RES_R 2
#elif defined(CFG_FFA)
#define FASTPATH
#define ARMING
#define RES_R 1
#elif defined(CFG_FF2)
#define FASTPATH
#define ARMING
#define RES_R 2
#define NO_GROWAHEAD   /* SZ 2 < 2 x RES_R: no grow point below the zone */
#endif

#if defined(CFG_EEC)
#define NS 2
#define NENT 4
#define NSEG 6
#define POOL_SEED 2
#define POOL_LIMIT 2
#elif defined(CFG_EET)
#define NS 1
#define NENT 4
#define NSEG 6
#define POOL_SEED 2
#define POOL_LIMIT 2
#else
#define NS 1
#endif

#if defined(CFG_EEC) || defined(CFG_EET)
#elif defined(CFG_ERR)
#define NENT 3
#define NSEG 3
#elif defined(CFG_EED)
#define NENT 4
#define NSEG 4
#elif defined(CFG_ERD)
#define NENT 3
#define NSEG 3
#elif defined(CFG_ERQ)
#define NENT 3
#define NSEG 3
#elif defined(CFG_ERR5)
#define NENT 5
#define NSEG 3
#elif defined(CFG_EEQ)
#define NENT 4
#define NSEG 4
#elif defined(CFG_EE3)
#define NENT 6
#define NSEG 5
#elif defined(CFG_EE3R)
#define NENT 6
#define NSEG 5
#elif defined(CFG_EE5R)
#define NENT 5
#define NSEG 5
#elif defined(CFG_E3D)
#define NENT 3
#define NSEG 4
#elif defined(CFG_FF)
#define NENT 5
#define NSEG 6
#elif defined(CFG_FFF)
#define NENT 4
#define NSEG 6
#elif defined(CFG_FFR)
#define NENT 3
#define NSEG 5
#elif defined(CFG_FFD)
#define NENT 3
#define NSEG 5
#elif defined(CFG_FFA)
#ifndef FFA_A
#define FFA_A 3
#endif
#ifndef FFA_B
#define FFA_B 2
#endif
#define NENT (FFA_A + FFA_B)
#define NSEG 7
#elif defined(CFG_FF2)
#ifndef FF2_OPS
#define FF2_OPS 4
#endif
#ifndef FF2_THIRD
#define NENT (2 * FF2_OPS)
#else
#define NENT (2 * FF2_OPS + FF2_THIRD)
#endif
#define NSEG 9
#else
#ifndef CFG_EER
#define CFG_EER
#endif
#define NENT 4
#define NSEG 4
#endif

#include "ring_common.pml"

proctype Enqueuer(byte s; byte e0; byte n) {
  RING_LOCALS;
  byte k, e;
  do
  :: k < n -> e = e0 + k; enqueue(s, e); e = 0; k++
  :: else -> break
  od
}

proctype Releaser(byte s; byte n) {
  RING_LOCALS;
  byte k;
  do
  :: k < n -> release_to_mark(s); k++
  :: else -> break
  od
}

proctype Destroyer(byte s) {
  RING_LOCALS;
  destroy(s)
}

proctype Creator(byte s) {
  RING_LOCALS;
  ring_init(s)
}

proctype Trimmer() {
  RING_LOCALS;
  pool_trim()
}

proctype Querier(byte s; byte n) {
  RING_LOCALS;
  byte k;
  do
  :: k < n -> ring_any(s); k++
  :: else -> break
  od
}

init {
  RING_LOCALS;
  d_step {
    rc_i = 0;
    do
    :: rc_i < NSEG -> snext[rc_i] = NIL; rc_i++
    :: else -> break
    od;
    rc_i = 1;
    do                      /* every entry: an operation on stream 0, ext allocated */
    :: rc_i <= NENT -> ekind[rc_i] = K_OP; estream[rc_i] = 0; xstate[rc_i] = SEG_LIVE; rc_i++
    :: else -> break
    od;
    rc_i = 0;
    stream_init(0, 0);
    pool_seed(1);
    nalloc = 1 + POOL_SEED
  }
  atomic {
#if defined(CFG_EER)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 2); run Releaser(0, 2)
#elif defined(CFG_ERR)
    run Enqueuer(0, 1, 3); run Releaser(0, 1); run Releaser(0, 1)
#elif defined(CFG_EED)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 2); run Destroyer(0)
#elif defined(CFG_ERD)
    run Enqueuer(0, 1, 3); run Releaser(0, 1); run Destroyer(0)
#elif defined(CFG_ERQ)
    run Enqueuer(0, 1, 3); run Releaser(0, 2); run Querier(0, 1)
#elif defined(CFG_ERR5)
    run Enqueuer(0, 1, 5); run Releaser(0, 1); run Releaser(0, 1)
#elif defined(CFG_EEQ)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 2); run Querier(0, 1)
#elif defined(CFG_EE3)
    run Enqueuer(0, 1, 3); run Enqueuer(0, 4, 3)
#elif defined(CFG_EE3R)
    run Enqueuer(0, 1, 3); run Enqueuer(0, 4, 3); run Releaser(0, 1)
#elif defined(CFG_EE5R)
    run Enqueuer(0, 1, 3); run Enqueuer(0, 4, 2); run Releaser(0, 1)
#elif defined(CFG_E3D)
    run Enqueuer(0, 1, 1); run Enqueuer(0, 2, 1); run Enqueuer(0, 3, 1); run Destroyer(0)
#elif defined(CFG_EEC)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 2); run Creator(1)
#elif defined(CFG_EET)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 2); run Trimmer()
#elif defined(CFG_FF)
    run Enqueuer(0, 1, 3); run Enqueuer(0, 4, 2)
#elif defined(CFG_FFF)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 1); run Enqueuer(0, 4, 1)
#elif defined(CFG_FFR)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 1); run Releaser(0, 1)
#elif defined(CFG_FFD)
    run Enqueuer(0, 1, 2); run Enqueuer(0, 3, 1); run Destroyer(0)
#elif defined(CFG_FFA)
    run Enqueuer(0, 1, FFA_A); run Enqueuer(0, 1 + FFA_A, FFA_B)
#elif defined(CFG_FF2)
    run Enqueuer(0, 1, FF2_OPS); run Enqueuer(0, 1 + FF2_OPS, FF2_OPS)
#ifdef FF2_THIRD
    ; run Enqueuer(0, 1 + 2 * FF2_OPS, FF2_THIRD)
#endif
#endif
  }
  (_nr_pr == 1);
  check_head(0);
  check_entries();
  release_to_mark(0);   /* the final sync (refused if destroyed) */
  check_entries();
  check_all_released();
  check_ring(0);
#if NS > 1
  check_ring(1);
#endif
  check_pool()
}
