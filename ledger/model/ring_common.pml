/*
 * ring_common.pml: the per-stream ring of ledger/ (ring.c, reserve.c,
 * owned.c, segment.c, pool.c, release.c) in Promela.
 * Included by ring.pml (one stream; two with CFG_EEC) and wait.pml (two
 * streams and waits). destroy_sb.pml checks the destroy handshake's memory
 * orders on its own (MEMORY MODEL below), extend_mp.pml the release that
 * publishes a new segment through tail_end, unlink_sb.pml the registry's
 * deferred unlink (registry.c, not modelled here).
 *
 * KEEP IN STEP WITH THE C. Each inline is one C function; each statement
 * that touches shared state is one C atomic access (plain reads of immutable
 * data, and ghost bookkeeping, ride along with the atomic step they follow):
 *
 *   segment.c
 *   inline ring_init         ldg__ring_init (a new stream's first segment,
 *                            via ldg__seg_get under RCU)
 *   inline seg_get           ldg__seg_get: ldg__pool_pop, else ldg__seg_alloc;
 *                            or the stream's spare (THE SPARE): a clean,
 *                            unreachable segment from the same pool
 *                            (popped under RCU) or allocation, taken by
 *                            one extender; prepared by one release at a
 *                            time outside the ring protocol: spare.pml
 *                            checks that it stays clean, unreachable and
 *                            owned by one thread, so not modelled here
 *   inline call_rcu          ldg__seg_retire of a segment unlinked from
 *                            its ring + its grace period (RCU_RETIRE): the
 *                            reclaimer's batch (reclaim.c), whose one
 *                            synchronize_rcu starts after the exchange that
 *                            took the segment, so waits for every reader
 *                            this per-segment grace period waits for (it
 *                            only starts later: every batched history is
 *                            one modelled here), or ldg__call_rcu when no
 *                            reclaimer runs
 *   macro  RCU_RETIRE        ldg__seg_retire of a losing extender's segment
 *                            (in ring_extend), and call_rcu's last step
 *   inline advance_head      ldg__ring_advance_head
 *   inline seg_resolve       ldg__seg_resolve
 *   inline raise_tail_end    ldg__raise_tail_end
 *   inline ring_extend       ldg__ring_extend
 *   pool.c
 *   inline pool_pop          ldg__pool_pop (under RCU)
 *   macro  FREE_SEG          ldg__seg_pool_put (from the reclaimer's batch,
 *                            or ldg__seg_pool_cb): the end of a segment's grace
 *                            period; frees it (dirty, or no room under the
 *                            pool limit) or pushes it (POOL_PUSH)
 *   inline pool_trim         ldg__pools_drain(l, false) (ldg_ledger_trim):
 *                            each segment freed after a grace period
 *                            (ldg__seg_free_cb, segment.c); likewise the
 *                            trim of ldg__pool_adapt (a class taken by
 *                            exchange, each segment retired dirty: freed
 *                            after the next batch's grace period)
 *   reserve.c (its inline paths in reserve.h)
 *   inline ring_reserve      ldg__ring_reserve; also ldg__ring_reserve_single
 *                            (single-issuer streams) with one enqueuer per
 *                            stream: under sequential consistency its load
 *                            and store of tail are this CAS when nobody else
 *                            writes tail (it always succeeds); its memory
 *                            orders are destroy_sb.pml's SB_SINGLE
 *   ring.c
 *   inline seg_of_reserved   ldg__seg_of_reserved (g->prev, then the walk)
 *   inline resolve_one       ldg__resolve_one
 *   inline enqueue           ldg__ring_enqueue (from ldg_enqueue, ldg_add_wait)
 *   summary.c
 *   inline ring_any          ldg__ring_visit (the lock-free queries), as a
 *                            walk of every slot: the segment summaries it
 *                            also reads and writes are not modelled (only
 *                            queries write them, under RCU; summary.c
 *                            argues them, tests/unit/summary_test.c and
 *                            tools/mutation check them)
 *   release.c
 *   inline claim             ldg__claim
 *   inline take_chunk        ldg__take_chunk
 *   inline engine            ldg__engine in modes BORROWED (ldg__release,
 *                            ldg__destroy) and OWNED (a wait fired by its
 *                            overtaken enqueuer); wait frames under WAITS
 *   inline destroy           ldg__destroy (ldg__mark_destroyed + engine)
 *   ledger.c
 *   inline release_to_mark   ldg_release(s, ldg_mark(s))
 *
 * MEMORY MODEL. Spin explores interleavings of atomic steps: sequential
 * consistency. Every shared access of the ring's C files is one step here,
 * so the model checks the protocol as if every atomic there were seq_cst.
 * That abstracts away the weaker orderings they use where the argument needs
 * no store->load order (atomics.h names each one):
 *   acquire:  loads of tailseg, tail_end, g->next, head (take_chunk,
 *             seg_of_reserved, ring_any), released, tail (ldg_mark,
 *             ring_any), destroyed (early checks, a wait's target),
 *             slot->state, a pool's top (ldg__pool_pop);
 *   relaxed:  loads of tail (ldg__ring_reserve_cas, ldg__ring_extend), tail_end
 *             (ldg__raise_tail_end), released (segment size: not modelled);
 *             stores of slot->state = EMPTY by the slot's resolver, and of
 *             g->dirty by a retracting enqueuer; a pooled g->next (push,
 *             pop, drain), a pool's top in a push, pool_bytes;
 *   acq_rel:  CAS slot->state EMPTY->FULL and EMPTY->ABANDONED, exchange
 *             slot->state RETRACTED, weak CAS released, weak CAS and
 *             exchange of a pool's top;
 *             (since pub11 the C publishes a shared seq with a store and
 *             a release that finds it EMPTY asks in the slot, ring.c,
 *             PUBLICATION; its outcomes are this model's two CASes': the
 *             release takes a FULL slot, or leaves an EMPTY one to its
 *             enqueuer, which takes the entry before it returns, and a
 *             slot's life starts EMPTY. pub_shared.pml checks that the
 *             handshake gives exactly these, under store buffers; here the
 *             CASes stand for it, as atomic decisions on the slot;)
 *   plain:    segment headers (base, size), slot payloads (kind, keep, ext,
 *             wait target/upto, frame fields): written before publication
 *             or by their one owner.
 * The fast path of FASTPATH (reserve.c, RESERVING ON A SHARED STREAM) is
 * argued in the seq_cst order S of the operations on tail (its load of
 * tail is seq_cst) and of the raises of tail_end (a seq_cst CAS since that
 * argument: it was a release CAS); its acquire load of tail_end needs no
 * more (reserve.c says why), so the model's steps are the C's there.
 * It relies on seq_cst exactly where the C uses it for a store->load
 * (Dekker) handshake: the add to g->resolved against the loads of head,
 * h->resolved, h->next and tailseg in advance_head, and the CASes of
 * g->next and tailseg (WHO MAY RECLAIM A SLOT, segment.c); CAS destroyed /
 * load tail against CAS tail / load destroyed (DESTROY, ring.c). The
 * BUG_RESOLVE_REORDER and BUG_DESTROY_ORDER mutants model losing such an
 * order (a load satisfied
 * before the store it follows) and fail. Which C11 orders keep the DESTROY
 * handshake is checked by destroy_sb.pml, with explicit store buffers:
 * weakening any of its four seq_cst accesses loses an enqueue there.
 * A weak CAS may fail spuriously: that only repeats a loop iteration and is
 * not modelled. Allocation never fails (LDG_ENOMEM is returned before a seq
 * is reserved and leaves no trace).
 *
 * RCU. inrcu has one bit per process inside a read-side section (never
 * nested in the C). call_rcu(g) marks g RETIRED and records the readers
 * inside a section at that moment; g becomes FREED as soon as each of them
 * has left its section: exactly the guarantee of a grace period, with the
 * free as early as liburcu may do it. A reader that enters after call_rcu is
 * not waited for.
 *
 * THE POOL. After its grace period a segment is pushed on the pool's stack
 * (POOLED) unless it is dirty (a slot retracted) or the pool is at its
 * limit (then FREED); ldg__seg_get pops one (under RCU) before allocating
 * a fresh id, for a growing ring (ring_extend) and for a new stream's first
 * segment (ring_init, CFG_EEC). A segment enters the pool only at the end
 * of a grace period: a ring's retired segment, and the segment of an
 * extender that lost the link CAS on g->next (it may have come from the
 * pool, where a popper may still hold it: ledger issue 8, defect 2). Reuse
 * is invisible to the protocol if nothing uses a segment after its grace
 * period and a pooled segment is as good as a zeroed one: every slot was
 * put back to EMPTY by whoever resolved it (ldg__seg_get does not zero it).
 * Both are checked: FREE_SEG asserts the second when a grace period ends,
 * and
 *   TOUCH(g)        a use (dereference, or CAS comparing against g) inside
 *                   a read-side section: g is not FREED, not POOLED;
 *   TOUCH_PINNED(g) a use outside any read-side section (the lock-free
 *                   enqueue; a wait's frame): g is not even RETIRED;
 *   TOUCH_MEM(g)    a popper's read of g->next: g is not FREED (it may be
 *                   pooled, or popped and in use by another owner);
 * and the Treiber stack's ABA argument (pool_pop): a pop's CAS that
 * succeeds finds g POOLED and installs a POOLED successor (or none), and
 * at the end (check_pool) the stack holds exactly the POOLED segments.
 * A reused segment is LIVE again, so a stale pointer into it would pass
 * TOUCH; but Spin also explores the stale use in the window between its
 * grace period's end and its reuse, where TOUCH fails.
 * The pool limit is in segments (every segment has SZ slots): POOL_LIMIT,
 * checked at each push (npool <= POOL_LIMIT).
 * Out-of-line payloads (struct ldg__ext) are modelled the same way: every
 * operation has one (xstate, SEG_LIVE from the start: ldg__ext_new runs
 * before anything else); refused or overtaken enqueues free it at once, a
 * release retires it with call_rcu, and queries check it is not FREED.
 *
 * NOT MODELLED. Segment sizes (segment.c: 8, then 64..1024; here SZ for
 * all, so one pool stack where pool.c has one per size class),
 * ldg_ledger_destroy's pool drain (after an rcu_barrier, nobody pops),
 * LDG__BATCH (never reached), keeps run after the read-side section (here
 * counted when taken), stream references and FINALIZE frames, the pending
 * counters (ops_released, waits_enqueued), byte accounting, the registry.
 */

#define NIL 255

/* slot->state (internal.h) */
#define ST_EMPTY     0
#define ST_FULL      1
#define ST_ABANDONED 2
#define ST_RETRACTED 3

/* lifetime of a segment or an ext (ghost) */
#define SEG_UNUSED  0   /* not yet allocated */
#define SEG_LIVE    1   /* allocated (perhaps not yet linked) */
#define SEG_RETIRED 2   /* passed to call_rcu, grace period running */
#define SEG_FREED   3   /* past its grace period and freed (or, under
                           BUG_LOSER_FREE_NOW, a loser's copy freed at once) */
#define SEG_POOLED  4   /* past its grace period, on the pool's stack */

/* slot->kind */
#define K_OP   0
#define K_WAIT 1

/* outcome of an enqueue (ghost) */
#define R_NONE    0
#define R_OK      1
#define R_REFUSED 2   /* LDG_EDESTROYED: the caller keeps its keep */

/* ---- Segments (struct ldg__seg) and slots (struct ldg__slot) ---- */
byte sbase[NSEG];      /* g->base (g->size is SZ) */
byte snext[NSEG];      /* g->next, NIL = NULL */
byte sprev[NSEG];      /* g->prev: the segment it was linked after, NIL for a first */
byte sres[NSEG];       /* g->resolved */
byte sstate[NSEG];     /* ghost: SEG_* */
byte sgp[NSEG];        /* ghost: readers its grace period still waits for */
byte sstream[NSEG];    /* ghost: the stream it belongs to */
byte slot[NSEG * SZ];  /* slot->state */
byte sent[NSEG * SZ];  /* slot payload: the entry (keep + ext, or wait) */
bit  sfin[NSEG * SZ];  /* ghost: its owner is done with it (may reclaim) */
bit  sdirty[NSEG];     /* g->dirty: a slot was retracted, never pooled */
#ifdef WAITS
/* a wait's slot as a frame: slot->u.wait.parent, parent_next, parent_end,
 * parent_frame, seg, unresolved (fr_k) */
byte fr_ps[NSEG * SZ];
byte fr_pn[NSEG * SZ];
byte fr_pe[NSEG * SZ];
byte fr_pf[NSEG * SZ];
byte fr_seg[NSEG * SZ];
byte fr_k[NSEG * SZ];    /* u.wait.unresolved: the frame's slots of fr_seg not yet counted */
#endif
byte nalloc;           /* next unused segment id */

/* ---- The segment pool (struct ldg__pool): one Treiber stack. Every segment
 * here has SZ slots, so the size classes of pool.c (8-slot first segments in
 * class 0, growth segments in classes 3..7) are one stack: more sharing, so
 * more races than the C has. ---- */
#ifndef POOL_LIMIT
#define POOL_LIMIT 1   /* l->pool_limit, in segments */
#endif
#ifndef POOL_SEED
#define POOL_SEED 0    /* segments pooled before the processes start */
#endif
byte ptop = NIL;       /* l->pools[c].top; a pooled segment's link is snext */
byte npool;            /* l->pool_bytes, in segments */
bit  sfreecb[NSEG];    /* its grace period ends in ldg__seg_free_cb (a trim) */

/* ---- Streams (struct ldg_stream) ---- */
byte tail[NS];         /* s->tail */
byte tail_end[NS];     /* s->tail_end */
byte grow_at[NS];      /* s->grow_at (GROWAHEAD; kept at 1 + SZ without it) */
byte released[NS];     /* s->released */
byte head[NS];         /* s->head */
byte tailseg[NS];      /* s->tailseg */
bool destroyed[NS];    /* s->destroyed */

/* ---- Entries: the callers' struct ldg__entry, and ghost bookkeeping ---- */
byte ekind[NENT + 1];    /* K_OP or K_WAIT; entry ids start at 1 */
byte etarget[NENT + 1];  /* a wait's target stream, NIL: a wait on itself */
byte eupto[NENT + 1];    /* a wait's a_upto */
byte estream[NENT + 1];  /* the stream it is enqueued on */
byte rel[NENT + 1];      /* ghost: times released (keep run, or wait fired) */
byte eres[NENT + 1];     /* ghost: R_* */
byte eseq[NENT + 1];     /* ghost: the seq it got (0 = none) */
byte xstate[NENT + 1];   /* ghost: its ext, SEG_* */
byte xgp[NENT + 1];      /* ghost: readers the ext's grace period waits for */

byte inrcu;              /* ghost: processes inside a read-side section */

#define PBIT (1 << _pid)
#define TOUCH(g) assert(g < NSEG && (sstate[g] == SEG_LIVE || sstate[g] == SEG_RETIRED))
#define TOUCH_PINNED(g) assert(g < NSEG && sstate[g] == SEG_LIVE)
/* A read of memory that may belong to another owner by now (a popper reading
 * g->next): it must not be freed. */
#define TOUCH_MEM(g) assert(g < NSEG && sstate[g] != SEG_FREED && sstate[g] != SEG_UNUSED)

/* g's grace period is over: ldg__seg_pool_cb. A dirty segment (a slot
 * retracted) is freed, and so is one the pool has no room for; any other is
 * pushed on the pool's stack, and ldg__seg_get reuses it without zeroing, so
 * every slot must be EMPTY. The push is one step: the pusher owns g, and its
 * CAS on top succeeds only if top is the value it linked g to (no ABA on the
 * push side). The limit check reads pool_bytes + the segment's own bytes. */
#if SZ != 2
#error "FREE_SEG checks two slots a segment: SZ must be 2"
#endif
#ifndef BUG_POOL_LIMIT_NO_SIZE
#define POOL_HAS_NO_ROOM (npool + 1 > POOL_LIMIT)
#else
#define POOL_HAS_NO_ROOM (npool > POOL_LIMIT)   /* mutant: without g's own size */
#endif
#define POOL_PUSH(g) \
  npool++; assert(npool <= POOL_LIMIT); \
  snext[g] = ptop; ptop = g; sstate[g] = SEG_POOLED
#define FREE_SEG(g) \
  if \
  :: sfreecb[g] -> sstate[g] = SEG_FREED   /* ldg__seg_free_cb */ \
  :: !sfreecb[g] && !sdirty[g] -> \
     assert(slot[g * SZ] == ST_EMPTY && slot[g * SZ + 1] == ST_EMPTY); \
     if \
     :: POOL_HAS_NO_ROOM -> sstate[g] = SEG_FREED; P_POOL_FULL(true) \
     :: else -> POOL_PUSH(g) \
     fi \
  :: !sfreecb[g] && sdirty[g] -> sstate[g] = SEG_FREED; P_DIRTY(true) \
  fi

/* Reachability probes (spin -DPROBE_...): each turns one rare path into an
 * assertion failure, so that check.sh can show that the configurations do
 * reach it (the checks are not vacuous). Without the switch: nothing. */
#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_ABANDONED      /* an overtaken enqueuer takes its entry back */
#define P_ABANDONED(c) PROBE_AT(c)
#else
#define P_ABANDONED(c) skip
#endif
#ifdef PROBE_RETRACTED      /* an enqueuer retracts (destroyed meanwhile) */
#define P_RETRACTED(c) PROBE_AT(c)
#else
#define P_RETRACTED(c) skip
#endif
#ifdef PROBE_LOSER          /* an extender loses the CAS on g->next */
#define P_LOSER(c) PROBE_AT(c)
#else
#define P_LOSER(c) skip
#endif
#ifdef PROBE_HELP           /* an extender finds tailseg moved: helps */
#define P_HELP(c) PROBE_AT(c)
#else
#define P_HELP(c) skip
#endif
#ifdef PROBE_WALK           /* seg_of_reserved: tailseg is past seq's segment */
#define P_WALK(c) PROBE_AT(c)
#else
#define P_WALK(c) skip
#endif
#ifdef PROBE_WALK_NEXT      /* ... and head is before it */
#define P_WALK_NEXT(c) PROBE_AT(c)
#else
#define P_WALK_NEXT(c) skip
#endif
#ifdef PROBE_SKIP_RETIRED   /* take_chunk skips seqs of retired segments */
#define P_SKIP_RETIRED(c) PROBE_AT(c)
#else
#define P_SKIP_RETIRED(c) skip
#endif
#ifdef PROBE_TAILSEG_DEFER  /* advance_head leaves a done h that tailseg names */
#define P_TAILSEG_DEFER(c) PROBE_AT(c)
#else
#define P_TAILSEG_DEFER(c) skip
#endif
#ifdef PROBE_DIRTY          /* a dirty segment's grace period ends (not pooled) */
#define P_DIRTY(c) PROBE_AT(c)
#else
#define P_DIRTY(c) skip
#endif
#ifdef PROBE_RETIRE_HELD    /* a segment is retired while a reader is inside */
#define P_RETIRE_HELD(c) PROBE_AT(c)
#else
#define P_RETIRE_HELD(c) skip
#endif
#ifdef PROBE_FRAME          /* a wait fired from a release walk pops its frame */
#define P_FRAME(c) PROBE_AT(c)
#else
#define P_FRAME(c) skip
#endif
#ifdef PROBE_NESTED         /* a wait fires inside another wait's walk */
#define P_NESTED(c) PROBE_AT(c)
#else
#define P_NESTED(c) skip
#endif
#ifdef PROBE_WAIT_ABANDONED /* an overtaken enqueuer of a wait fires it */
#define P_WAIT_ABANDONED(c) PROBE_AT(c)
#else
#define P_WAIT_ABANDONED(c) skip
#endif
#ifdef PROBE_FRAME_PIN      /* ... and only the frame keeps its segment */
#define P_FRAME_PIN(c) PROBE_AT(c)
#else
#define P_FRAME_PIN(c) skip
#endif

#ifdef PROBE_POOL_FULL           /* a grace period ends with the pool full: freed */
#define P_POOL_FULL(c) PROBE_AT(c)
#else
#define P_POOL_FULL(c) skip
#endif
#ifdef PROBE_POP_REUSE           /* a growing ring reuses a pooled segment */
#define P_POP_REUSE(c) PROBE_AT(c)
#else
#define P_POP_REUSE(c) skip
#endif
#ifdef PROBE_POP_RACE            /* a pop's CAS on top fails: another popper won */
#define P_POP_RACE(c) PROBE_AT(c)
#else
#define P_POP_RACE(c) skip
#endif
#ifdef PROBE_LOSER_POOLED        /* a losing extender's segment came from the pool */
#define P_LOSER_POOLED(c) PROBE_AT(c)
#else
#define P_LOSER_POOLED(c) skip
#endif
#ifdef PROBE_LOSER_HELD          /* ... and its grace period waits for another reader */
#define P_LOSER_HELD(c) PROBE_AT(c)
#else
#define P_LOSER_HELD(c) skip
#endif
#ifdef PROBE_TRIM_HELD           /* a trim retires a pooled segment while a reader is inside */
#define P_TRIM_HELD(c) PROBE_AT(c)
#else
#define P_TRIM_HELD(c) skip
#endif
#ifdef PROBE_CREATE_POOLED       /* a new stream's first segment comes from the pool */
#define P_CREATE_POOLED(c) PROBE_AT(c)
#else
#define P_CREATE_POOLED(c) skip
#endif

#ifdef PROBE_FAST_FULL           /* RES_R fetch_adds checked and not yet made, at once */
#define P_FAST_FULL(c) PROBE_AT(c)
#else
#define P_FAST_FULL(c) skip
#endif
#ifdef PROBE_ZONE                /* (ARMING) an add lands in the zone: the last RES_R seqs */
#define P_ZONE(c) PROBE_AT(c)
#else
#define P_ZONE(c) skip
#endif
#ifdef PROBE_REARM               /* (ARMING) a re-arm after a disarm */
#define P_REARM(c) PROBE_AT(c)
#else
#define P_REARM(c) skip
#endif
#ifdef PROBE_RESERVE_EXTEND      /* the CAS path extends with seqs left in the reserve */
#define P_RESERVE_EXTEND(c) PROBE_AT(c)
#else
#define P_RESERVE_EXTEND(c) skip
#endif

#ifdef PROBE_PREV               /* seg_of_reserved finds seq's segment by tailseg's prev */
#define P_PREV(c) PROBE_AT(c)
#else
#define P_PREV(c) skip
#endif
#ifdef PROBE_GROW_LATE           /* an early extender, past its claim, finds the ring grown */
#define P_GROW_LATE(c) PROBE_AT(c)
#else
#define P_GROW_LATE(c) skip
#endif
#ifdef PROBE_GROW_RACE           /* an early extender's claim while another extender is at work */
#define P_GROW_RACE(c) PROBE_AT(c)
#else
#define P_GROW_RACE(c) skip
#endif

/* Locals of every process that runs ring code (Promela inlines have none). */
#define RING_LOCALS \
  byte rc_i; \
  byte ah_h, ah_v, ah_n; bit ah_ok; \
  byte sr_before; \
  byte rt_cur; bit rt_ok; \
  byte ex_g, ex_end, ex_next, ex_fresh; bit ex_pooled; \
  byte pp_g, pp_n; bit pp_ok; \
  byte rs_t, rs_end, rs_seq, rs_g, rs_b, rs_tk, rs_grow, rs_gen; bit rs_ok, rs_dis; \
  byte ge_g, ge_end; bit ge_ok; \
  byte en_idx; bit en_ok; \
  byte cl_r, cl_from; bit cl_ok; \
  byte c_s, c_next, c_end, c_frame, c_upto; \
  byte tc_g, tc_base, tc_taken, tc_st, tc_idx, tc_w, tc_wg, tc_act; \
  byte w_e, f_g, pop_g, pop_k, tc_wk; \
  byte q_r, q_t, q_g, q_lo, q_hi, q_q, q_b

inline stream_init(s, g) {   /* ldg__ring_init */
  sbase[g] = 1; snext[g] = NIL; sprev[g] = NIL; sres[g] = 0; sstate[g] = SEG_LIVE; sstream[g] = s;
  head[s] = g; tailseg[s] = g; tail[s] = 0; tail_end[s] = 1 + SZ;
  grow_at[s] = 1 + SZ;
  released[s] = 0; destroyed[s] = 0
}

/* POOL_SEED segments from id first on, pooled before the processes start
 * (retired by streams gone before): in init's d_step, then nalloc. */
inline pool_seed(first) {
  rc_i = 0;
  do
  :: rc_i < POOL_SEED ->
     sstate[first + rc_i] = SEG_POOLED; sstream[first + rc_i] = NIL;
     snext[first + rc_i] = (rc_i + 1 < POOL_SEED -> first + rc_i + 1 : NIL);
     rc_i++
  :: else -> break
  od;
  ptop = (POOL_SEED > 0 -> first : NIL);
  npool = POOL_SEED;
  rc_i = 0
}

/* ---- ldg__ring_init (ldg_stream_create): a new stream's first segment,
 * from the pool if one is there (class 0 in pool.c), popped under RCU ---- */
inline ring_init(s) {
#ifndef BUG_POP_NO_RCU
  rcu_lock();
#endif
  seg_get(s, 1, ex_fresh);
  P_CREATE_POOLED(ex_pooled);
#ifndef BUG_POP_NO_RCU
  rcu_unlock();
#endif
  d_step { stream_init(s, ex_fresh); ex_fresh = 0; ex_pooled = 0 }
}

/* ---- RCU ---- */
inline rcu_lock() {
  d_step { assert((inrcu & PBIT) == 0); inrcu = inrcu | PBIT }
}

inline rcu_unlock() {
  d_step {
    assert((inrcu & PBIT) != 0);
    inrcu = inrcu & ~PBIT;
    rc_i = 0;
    do
    :: rc_i < NSEG ->
       if
       :: sstate[rc_i] == SEG_RETIRED ->
          sgp[rc_i] = sgp[rc_i] & ~PBIT;
          if
          :: sgp[rc_i] == 0 -> FREE_SEG(rc_i)
          :: else
          fi
       :: else
       fi;
       rc_i++
    :: else -> break
    od;
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       if
       :: xstate[rc_i] == SEG_RETIRED ->
          xgp[rc_i] = xgp[rc_i] & ~PBIT;
          if
          :: xgp[rc_i] == 0 -> xstate[rc_i] = SEG_FREED
          :: else
          fi
       :: else
       fi;
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* ldg__call_rcu(&g->rcu, ldg__seg_pool_cb), inside a d_step: g's grace
 * period waits for the readers inside a section now. */
#define RCU_RETIRE(g) \
  sstate[g] = SEG_RETIRED; \
  sgp[g] = inrcu; \
  if \
  :: sgp[g] == 0 -> FREE_SEG(g) \
  :: else \
  fi

/* ldg__seg_retire(h): h was just unlinked by the winner of the head CAS.
 * Checks the reclaim rule: every slot of h was published or handed back,
 * its entry released (or refused) and its resolution counted; and h is
 * unreachable from the stream's roots, as call_rcu requires. */
inline call_rcu(h) {
  d_step {
    assert(sstate[h] == SEG_LIVE);
    assert(sres[h] == SZ);
    rc_i = 0;
    do
    :: rc_i < SZ ->
       assert(sfin[h * SZ + rc_i]);
       rc_i++
    :: else -> break
    od;
    rc_i = 0;
#ifndef NO_REACH_CHECK
    assert(head[sstream[h]] != h);
    assert(tailseg[sstream[h]] != h);
#endif
    P_RETIRE_HELD(inrcu != PBIT);
    RCU_RETIRE(h)
  }
}

/* ldg__pool_pop (under RCU): out pp_g, NIL if the pool is empty.
 *   g = load_acquire(top);
 *   while (g && !cas_weak(top, &g, load_relaxed(g->next))) {}
 *   if (g) fetch_sub(pool_bytes)
 * The read of g->next may find g popped and reused by another thread
 * meanwhile (TOUCH_MEM: not freed); the CAS then fails, since g cannot be
 * pushed again before this reader leaves its section (THE ABA ARGUMENT:
 * only a grace period's end pushes). A CAS that succeeds must find g pooled
 * and install a pooled (or no) successor: a stale g->next would hand out a
 * segment that is in use. */
inline pool_pop() {
  pp_g = ptop;                                     /* acquire load top */
  do
  :: pp_g == NIL -> break
  :: else ->
     d_step { TOUCH_MEM(pp_g); pp_n = snext[pp_g] }   /* relaxed load g->next */
     d_step {                                      /* weak acq_rel CAS top g -> next */
       if
       :: ptop == pp_g ->
          assert(sstate[pp_g] == SEG_POOLED);
          assert(pp_n == NIL || sstate[pp_n] == SEG_POOLED);
          ptop = pp_n; pp_ok = 1
       :: else -> pp_g = ptop; pp_ok = 0; P_POP_RACE(true)
       fi;
       pp_n = 0
     }
     if
     :: pp_ok -> break
     :: else
     fi
  od;
  if
  :: pp_g != NIL -> npool--                        /* relaxed fetch_sub pool_bytes */
  :: else
  fi;
  pp_ok = 0
}

/* ldg__pools_drain(l, false) (ldg_ledger_trim): takes the whole stack with
 * one exchange, then sends each segment through a grace period to
 * ldg__seg_free_cb, since a popper may still be reading its link. */
inline pool_trim() {
  d_step { pp_g = ptop; ptop = NIL }               /* acq_rel exchange top */
  do
  :: pp_g == NIL -> break
  :: else ->
     d_step {
       pp_n = snext[pp_g];                         /* relaxed load g->next */
       assert(sstate[pp_g] == SEG_POOLED);
       npool--;                                    /* relaxed fetch_sub pool_bytes */
       P_TRIM_HELD(inrcu != 0);
#ifndef BUG_TRIM_FREE_NOW
       sfreecb[pp_g] = 1;
       RCU_RETIRE(pp_g);                           /* ldg__call_rcu(ldg__seg_free_cb) */
#else
       sstate[pp_g] = SEG_FREED;                   /* mutant: ldg__seg_destroy at once */
#endif
       pp_g = pp_n; pp_n = 0
     }
  od
}

/* ldg__seg_get (under RCU): a segment with every slot EMPTY, from the pool
 * (base, resolved, next reset; no zeroing) or else new (ldg__seg_alloc, a
 * fresh id). Private until linked. out ex_pooled: it came from the pool.
 * Ghost state of a reused segment starts again (sfin, sgp). */
inline seg_get(s, base, out) {
  pool_pop();
  d_step {
    if
    :: pp_g != NIL ->
       out = pp_g; ex_pooled = 1;
       assert(sstate[out] == SEG_POOLED && !sdirty[out]);
       rc_i = 0;
       do
       :: rc_i < SZ ->
          assert(slot[out * SZ + rc_i] == ST_EMPTY);
          sfin[out * SZ + rc_i] = 0;
          rc_i++
       :: else -> break
       od;
       rc_i = 0
    :: else ->
       assert(nalloc < NSEG);
       out = nalloc; ex_pooled = 0;
       nalloc++
    fi;
    sbase[out] = base; snext[out] = NIL; sres[out] = 0; sgp[out] = 0;
    sprev[out] = NIL;
    sstate[out] = SEG_LIVE; sstream[out] = s;
    pp_g = 0
  }
}

/* ---- ldg__ring_advance_head ---- */
inline advance_head(s) {
  do
  :: ah_h = head[s];                               /* seq_cst load head */
#ifndef BUG_HEAD_NO_RECHECK
     d_step { TOUCH(ah_h); ah_v = sres[ah_h] }      /* seq_cst load h->resolved */
     if
     :: ah_v != SZ -> break
     :: else
     fi;
#endif
     d_step { TOUCH(ah_h); ah_n = snext[ah_h] }     /* seq_cst load h->next */
     if
     :: ah_n == NIL -> break
     :: else
     fi;
#ifndef BUG_NO_TAILSEG_CHECK
     d_step {                                       /* seq_cst load tailseg */
       ah_ok = (tailseg[s] == ah_h); P_TAILSEG_DEFER(ah_ok)
     }
     if
     :: ah_ok -> break
     :: else
     fi;
#endif
     d_step {                                       /* seq_cst CAS head h -> next */
       TOUCH(ah_h);
       if
       :: head[s] == ah_h -> head[s] = ah_n; ah_ok = 1
       :: else -> ah_ok = 0
       fi
     }
     if
     :: ah_ok -> call_rcu(ah_h)                     /* ldg__seg_retire */
     :: else
     fi
  od;
  ah_h = 0; ah_v = 0; ah_n = 0; ah_ok = 0
}

/* ---- ldg__seg_resolve: k more slots of g resolved (under RCU) ---- */
inline seg_resolve(s, g, k) {
#ifndef BUG_RESOLVE_REORDER
  d_step {                                         /* seq_cst fetch_add */
    TOUCH(g);
    sr_before = sres[g];
    sres[g] = sres[g] + k;
    assert(sres[g] <= SZ)
  }
  if
  :: sr_before + k == SZ -> advance_head(s)
  :: else
  fi;
#else
  /* mutant: a non-seq_cst add. advance_head's first loads (head, then
   * h->resolved) are satisfied before the add is visible (store->load). */
  ah_h = head[s];
  d_step { TOUCH(ah_h); ah_v = sres[ah_h] }
  d_step {
    TOUCH(g);
    sr_before = sres[g];
    sres[g] = sres[g] + k;
    assert(sres[g] <= SZ);
    if
    :: ah_h == g -> ah_v = sres[g]                 /* its own add, forwarded */
    :: else
    fi
  }
  if
  :: sr_before + k == SZ && ah_v == SZ -> advance_head(s)
  :: else                                          /* saw h not done: returns */
  fi;
  ah_h = 0; ah_v = 0;
#endif
  sr_before = 0
}

/* ---- ldg__resolve_one: an enqueuer resolves its own slot ---- */
inline resolve_one(s, g) {
  rcu_lock();
  seg_resolve(s, g, 1);
  rcu_unlock()
}

/* ---- ldg__raise_tail_end: raise s->tail_end to at least end ---- */
inline raise_tail_end(s, end) {
  rt_cur = tail_end[s];                            /* relaxed load */
  do
  :: rt_cur < end ->
     d_step {                                      /* release weak CAS */
       if
       :: tail_end[s] == rt_cur ->
          assert(end > tail_end[s]);               /* tail_end only grows */
          /* "segments below it are linked and reachable from tailseg" */
          assert(end <= sbase[tailseg[s]] + SZ);
          tail_end[s] = end; rt_ok = 1
       :: else -> rt_cur = tail_end[s]; rt_ok = 0
       fi
     }
     if
     :: rt_ok -> break
     :: else
     fi
  :: else -> break
  od;
  rt_cur = 0; rt_ok = 0
}

/* ---- GROWING AHEAD (segment.c): with FASTPATH, as the C's shared path ----
 * A segment's grow point: half way to where the reserve begins (the C's
 * g->base + (g->size - LDG__FAST_R) / 2; here the base itself for SZ 2 and
 * RES_R 1 or 2). The first segment (base 1) has none: grow_at stays at its
 * end, where no seq reaches. grown[] is a ghost: claims per grow point. */
#if defined(FASTPATH) && !defined(NO_GROWAHEAD)
#define GROWAHEAD                  /* NO_GROWAHEAD: the reserve alone (see check.sh) */
#endif
#define GROW_POINT(b) ((b) + (SZ - RES_R) / 2)
#ifdef BUG_CLAIM_AT_END
#define ZONE_START(b) ((b) + SZ)                       /* mutant */
#else
#define ZONE_START(b) ((b) + SZ - RES_R)
#endif
byte grown[16];

/* ---- ldg__raise_grow_at(s, g): after tail_end reached g's end ---- */
inline raise_grow_at(s, g) {
#if defined(GROWAHEAD) && !defined(BUG_GROW_NO_RAISE)
  d_step {                                         /* release CAS loop: a raise */
    TOUCH(g);
    if
    :: sbase[g] != 1 && grow_at[s] < GROW_POINT(sbase[g]) ->
       /* grow_at never passes tail_end (the fast path's one compare
        * covers the end: reserve.h's ldg__ring_reserve) */
       assert(GROW_POINT(sbase[g]) <= tail_end[s]);
       grow_at[s] = GROW_POINT(sbase[g])
    :: else
    fi
  }
#elif defined(ARMING)
  /* ARMING without GROWAHEAD (CFG_FF2: SZ 2 < 2 x RES_R has no grow point
   * below the zone): grow_at at the zone's start of every segment past the
   * first, as the C's claim leaves it when the ring grows at its end (a
   * pool limit of 0); BUG_CLAIM_AT_END: at the end. */
  d_step {
    TOUCH(g);
    if
    :: sbase[g] != 1 && grow_at[s] < ZONE_START(sbase[g]) ->
       assert(sbase[g] + SZ <= tail_end[s]);
       grow_at[s] = ZONE_START(sbase[g])
    :: else
    fi
  }
#else
  skip
#endif
}

/* ---- ldg__ring_extend(s, end): end is the tail_end seen (under RCU) ---- */
inline ring_extend(s, end) {
  ex_g = tailseg[s];                               /* acquire load tailseg */
  d_step { TOUCH(ex_g); ex_end = sbase[ex_g] + SZ; P_HELP(ex_end > end) }   /* g->base + g->size */
  if
  :: ex_end > end ->                               /* someone extended: help */
     raise_tail_end(s, ex_end);
     raise_grow_at(s, ex_g)
  :: else ->
     d_step { TOUCH(ex_g); ex_next = snext[ex_g] }    /* acquire load g->next */
     if
     :: ex_next == NIL ->
        seg_get(s, ex_end, ex_fresh);
        sprev[ex_fresh] = ex_g;                    /* fresh->prev, before the link */
        P_POP_REUSE(ex_pooled);
        d_step {                                   /* seq_cst CAS g->next */
          TOUCH(ex_g);
          if
          :: snext[ex_g] == NIL ->
             /* At most one segment ahead (GROWING AHEAD): the next seq to
              * hand out is in ex_g or later, so ex_fresh is the one
              * segment past the newest in use. */
             assert(tail[s] + 1 >= sbase[ex_g]);
             snext[ex_g] = ex_fresh; ex_next = ex_fresh
          :: else ->
             /* Another enqueuer linked one first. Ours may have come from
              * the pool, where a popper may still be reading its link: it
              * goes back through a grace period (ldg__seg_retire). */
             ex_next = snext[ex_g];
             P_LOSER(true); P_LOSER_POOLED(ex_pooled);
             P_LOSER_HELD(ex_pooled && inrcu != PBIT);
#if defined(BUG_LOSER_FREE_NOW)
             sstate[ex_fresh] = SEG_FREED          /* mutant: ldg__seg_destroy(fresh) */
#elif defined(BUG_LOSER_POOL_NOW)
             if                                    /* mutant: pooled without a grace period */
             :: POOL_HAS_NO_ROOM -> sstate[ex_fresh] = SEG_FREED
             :: else -> POOL_PUSH(ex_fresh)
             fi
#else
             RCU_RETIRE(ex_fresh)
#endif
          fi;
          ex_fresh = 0; ex_pooled = 0
        }
     :: else
     fi;
     d_step {                                      /* seq_cst CAS tailseg g -> next */
       TOUCH(ex_g);
       if
       :: tailseg[s] == ex_g -> tailseg[s] = ex_next
       :: else
       fi;
       TOUCH(ex_next);
       ex_end = sbase[ex_next] + SZ                /* next->base + next->size */
     }
     raise_tail_end(s, ex_end);
     raise_grow_at(s, ex_next);
#ifndef BUG_EXTEND_NO_ADVANCE
     advance_head(s)
#else
     skip
#endif
  fi;
  ex_g = 0; ex_end = 0; ex_next = 0
}

/* ---- ldg__ring_grow_early(s, seq, grow): seq >= grow, seq reserved and
 * unresolved (its segment and tailseg pinned). No read-side section but
 * around the extension. ---- */
inline grow_early(s, seq, grow) {
  ge_g = tailseg[s];                               /* acquire load tailseg */
  d_step {
    TOUCH_PINNED(ge_g);
    ge_ok = (sbase[ge_g] != 1 && grow == GROW_POINT(sbase[ge_g]));
    ge_end = sbase[ge_g] + SZ
  }
  if
  :: ge_ok ->
     d_step {                                      /* acq_rel CAS grow_at grow -> g's end - R */
#ifndef BUG_GROW_NO_CLAIM
       if
       :: grow_at[s] == grow ->
          assert(ge_end <= tail_end[s]);           /* grow_at <= tail_end - R */
#if defined(ARMING) && !defined(BUG_CLAIM_AT_END)
          grow_at[s] = ge_end - RES_R              /* the zone's start (faa12) */
#else
          grow_at[s] = ge_end                      /* before faa12; mutant BUG_CLAIM_AT_END */
#endif
       :: else -> ge_ok = 0
       fi;
#endif
       if
       :: ge_ok ->
          /* one early extender per grow point: the claim's point */
          grown[grow]++; assert(grown[grow] == 1);
          P_GROW_RACE(tailseg[s] != ge_g || snext[ge_g] != NIL || npend > 0)
       :: else
       fi
     }
     if
     :: ge_ok ->
        P_GROW_LATE(tailseg[s] != ge_g);
        rcu_lock();
        ring_extend(s, ge_end);
        rcu_unlock()
     :: else
     fi
  :: else
  fi;
  ge_g = 0; ge_end = 0; ge_ok = 0
}

/* ---- ldg__ring_reserve: out rs_seq. No read-side section. ----
 * With FASTPATH (reserve.c, RESERVING ON A SHARED STREAM): a process that holds
 * one of RES_R tickets (ldg__fast_ticket_claim; ntk is the bitmap's count,
 * and a process keeps its ticket to the end) first tries a fetch_add, made if it sees more than
 * RES_R + 1 seqs of headroom past the first segment; else (and without a
 * ticket) the CAS path, which leaves the last RES_R seqs below tail_end to
 * the fetch_adds (past the first segment) and alone grows the ring. The C
 * has no FAST_PAST_FIRST test: there LDG__FAST_R + 1 >= LDG__FIRST_END
 * makes it implied (reserve.c); with RES_R = 1 < SZ here it is not, so the
 * model keeps it (BUG_FAST_FIRST_SEG drops it). The C takes the ticket in
 * the CAS path, so a thread's first reservation on its first stream is by
 * CAS; the model takes it before any reservation (a thread that took it on
 * another stream): more behaviours, not fewer. Without FASTPATH: the CAS
 * loop alone (RES_R is 0 and nobody has a ticket). */
#ifdef FASTPATH
#ifndef RES_R
#define RES_R 2
#endif
#else
#undef RES_R
#define RES_R 0
#endif
#define FIRST_END (1 + SZ)   /* the first segment's end: ldg__ring_init */
#if defined(BUG_RESERVE_NONE)
#define CAS_RESERVE(t) 0                               /* mutant: no reserve */
#elif defined(BUG_RESERVE_SHORT)
#define CAS_RESERVE(t) ((t) + 1 < FIRST_END -> 0 : RES_R - 1)   /* mutant: one short */
#else
#define CAS_RESERVE(t) ((t) + 1 < FIRST_END -> 0 : RES_R)
#endif
#if defined(BUG_FAST_FIRST_SEG)
#define FAST_PAST_FIRST(t) true                        /* mutant: also in the first segment */
#elif defined(FAST_AS_C)
#if RES_R + 1 < FIRST_END
#error "FAST_AS_C: the C's check implies tail past the first segment only with RES_R + 1 >= FIRST_END"
#endif
#define FAST_PAST_FIRST(t) true                        /* the C's check (implied: reserve.c) */
#else
#define FAST_PAST_FIRST(t) ((t) + 1 >= FIRST_END)
#endif
byte ntk;                /* tickets taken (ldg__fast_tickets' bits) */
byte npend;              /* ghost: fetch_adds checked and not yet made */
/* ARMING (faa12, reserve.c's RESERVING ON A SHARED STREAM: ADD FIRST WHILE
 * ARMED): a holder loads fast_gen; odd: it adds with no check of tail,
 * compares its seq with the grow_at it loaded and, at or past it, reloads
 * tail_end and disarms if its seq is within RES_R of it (a CAS from w to
 * (w | 1) + 1, retried from what it read). Even (or no ticket): the CAS
 * path, and a holder whose reservation there had the reserve (past the
 * first segment) re-arms by a CAS from the even value it loaded first.
 * Mutants: BUG_NO_DISARM, BUG_DISARM_STORE (a plain store of v + 1),
 * BUG_DISARM_READ (a lander that finds fast_gen even writes nothing),
 * BUG_ARM_NO_CHECK (re-arm after any CAS-path reservation, the first
 * segment's included), BUG_ARM_GEN_LATE (the armer loads fast_gen again
 * after its look at tail, and CASes from that), BUG_CLAIM_AT_END (above). */
#ifdef ARMING
byte fgen[NS];           /* s->fast_gen */
#if defined(BUG_ARM_NO_CHECK)
#define ARM_OK(seq) true
#else
#define ARM_OK(seq) ((seq) >= FIRST_END)          /* the reserve was RES_R */
#endif
/* ARM_ANY: a process without a ticket arms too (the C's holders only: a
 * non-holder here stands for a holder that arms and then adds no more) */
#ifdef ARM_ANY
#define ARM_WHO true
#else
#define ARM_WHO (rs_tk == 1)
#endif
#endif
inline ring_reserve(s, e) {
#ifdef FASTPATH
  if                                               /* ldg__fast_ticket_claim */
  :: rs_tk == 0 ->
     d_step {                                      /* acq_rel CAS on the bitmap */
       if
       :: ntk < RES_R -> ntk++; rs_tk = 1
       :: else -> rs_tk = 2
       fi
     }
  :: else
  fi;
#ifdef ARMING
  rs_gen = fgen[s];                                /* seq_cst load fast_gen */
  if
  :: rs_tk == 1 && (rs_gen & 1) ->
     rs_grow = grow_at[s];                         /* acquire load grow_at */
     d_step {                                      /* seq_cst fetch_add tail */
       rs_seq = tail[s] + 1; tail[s] = rs_seq; rs_ok = 1;
       /* the invariant: no seq handed out at or past tail_end */
       assert(rs_seq < tail_end[s]);
       /* below the grow_at read: outside the zone */
       assert(rs_seq >= rs_grow || rs_seq + RES_R < tail_end[s]);
       P_ZONE(rs_seq + RES_R >= tail_end[s]);
       eseq[e] = rs_seq
     };
     if
     :: rs_seq >= rs_grow ->                       /* ldg__reserve_past */
        rs_end = tail_end[s];                      /* seq_cst load tail_end */
        assert(rs_seq < rs_end);
        if
        :: rs_seq + RES_R >= rs_end ->             /* in the zone: disarm */
#if defined(BUG_NO_DISARM)
           skip
#elif defined(BUG_DISARM_STORE)
           fgen[s] = rs_gen + 1                    /* mutant: a plain store */
#else
           rs_dis = 1;
           do
           :: rs_dis ->
              d_step {                             /* seq_cst CAS w -> (w | 1) + 1 */
                if
                :: fgen[s] == rs_gen ->
#ifdef BUG_DISARM_READ
                   if
                   :: rs_gen & 1 -> fgen[s] = rs_gen + 1
                   :: else                         /* mutant: even, nothing written */
                   fi;
#else
                   fgen[s] = (rs_gen | 1) + 1;
#endif
                   rs_dis = 0
                :: else -> rs_gen = fgen[s]
                fi
              }
           :: else -> break
           od
#endif
        :: else
        fi;
#ifdef GROWAHEAD
        grow_early(s, rs_seq, rs_grow)
#else
        skip
#endif
     :: else
     fi;
     rs_end = 0; rs_grow = 0
  :: else
  fi;
#else
  if
  :: rs_tk == 1 ->                                 /* ldg__ring_reserve */
     rs_grow = grow_at[s];                         /* acquire load grow_at */
     rs_end = tail_end[s];                         /* acquire load tail_end */
     assert(rs_grow <= rs_end);                    /* the one compare covers the end */
     d_step {                                      /* seq_cst load tail; the check */
       rs_t = tail[s];
       if
       :: FAST_PAST_FIRST(rs_t) && rs_t + 1 + RES_R < rs_end ->
          npend++; rs_ok = 1                       /* ghost: checked, not added */
       :: else -> rs_ok = 0
       fi
     }
     if
     :: rs_ok ->
        d_step {                                   /* seq_cst fetch_add tail */
          P_FAST_FULL(npend == RES_R);
          rs_seq = tail[s] + 1; tail[s] = rs_seq; npend--;
          /* no seq is handed out past tail_end: the invariant of RESERVING
           * ON A SHARED STREAM, tail + (adds pending) < tail_end */
          assert(rs_seq < tail_end[s] && tail[s] + npend < tail_end[s]);
          eseq[e] = rs_seq
        };
        if                                         /* ldg__reserve_past */
        :: rs_seq >= rs_grow -> grow_early(s, rs_seq, rs_grow)
        :: else -> assert(rs_seq < rs_end)         /* below the end read: covered */
        fi
     :: else
     fi;
     rs_t = 0; rs_end = 0; rs_grow = 0
  :: else
  fi;
#endif /* ARMING */
#endif
  do                                               /* ldg__ring_reserve_cas */
  :: rs_ok -> break
  :: else ->
     rs_t = tail[s];                               /* relaxed load tail */
     rs_end = tail_end[s];                         /* acquire load tail_end */
     if
     :: rs_t + 1 + CAS_RESERVE(rs_t) < rs_end ->
        d_step {                                   /* seq_cst CAS tail t -> t+1 */
          if
          :: tail[s] == rs_t ->
             assert(rs_t + 1 < tail_end[s]);       /* its slot exists */
             tail[s] = rs_t + 1; rs_ok = 1; rs_seq = rs_t + 1;
#ifdef ARMING
             /* past the first segment, never in the zone */
             assert(rs_seq < FIRST_END || rs_seq + RES_R < tail_end[s]);
#else
             assert(tail[s] + npend < tail_end[s]);   /* (FASTPATH's invariant) */
#endif
             eseq[e] = rs_seq
          :: else -> rs_ok = 0
          fi;
          rs_t = 0; rs_end = 0
        };
#ifdef ARMING
        if                                         /* re-arm */
        :: rs_ok && ARM_WHO && !(rs_gen & 1) && ARM_OK(rs_seq) ->
#ifdef BUG_ARM_GEN_LATE
           rs_gen = fgen[s];                       /* mutant: loaded after the look */
           if
           :: !(rs_gen & 1) ->
#endif
           d_step {                                /* seq_cst CAS fast_gen v -> v + 1 */
             if
             :: fgen[s] == rs_gen -> P_REARM(rs_gen > 0); fgen[s] = rs_gen + 1
             :: else
             fi
           }
#ifdef BUG_ARM_GEN_LATE
           :: else
           fi
#endif
        :: else
        fi;
#endif
#ifdef GROWAHEAD
        if
        :: rs_ok ->
           rs_grow = grow_at[s];                   /* acquire load grow_at */
           if
           :: rs_seq >= rs_grow -> grow_early(s, rs_seq, rs_grow)
           :: else
           fi;
           rs_grow = 0
        :: else
        fi
#else
        skip
#endif
     :: else ->
        P_RESERVE_EXTEND(rs_t + 1 < rs_end);
        rcu_lock();
        ring_extend(s, rs_end);
        rcu_unlock();
        rs_t = 0; rs_end = 0
     fi
  od;
  rs_ok = 0; rs_gen = 0
}

/* ---- ldg__seg_of_reserved(s, seq) + &g->slots[seq - g->base]:
 * out rs_g, en_idx. seq is reserved and unresolved, so its segment and all
 * later ones are pinned; only the walk from head needs RCU. ---- */
inline seg_of_reserved(s, seq) {
  rs_g = tailseg[s];                               /* acquire load tailseg */
  d_step { TOUCH_PINNED(rs_g); rs_b = sbase[rs_g]; P_WALK(rs_b > seq) }   /* g->base, no RCU */
#ifndef NO_PREV   /* NO_PREV: the walk alone, as before g->prev (check.sh: it keeps the walk's next step reachable) */
  if
  :: rs_b > seq ->                                 /* the ring grew ahead: g->prev, no RCU */
     d_step {
       TOUCH_PINNED(rs_g); rs_g = sprev[rs_g];
       assert(rs_g != NIL); TOUCH_PINNED(rs_g);
       rs_b = sbase[rs_g]; P_PREV(rs_b <= seq)
     }
  :: else
  fi;
#endif
  if
  :: rs_b <= seq -> skip
  :: else ->
     rcu_lock();
     rs_g = head[s];                               /* acquire load head */
     do
     :: d_step { TOUCH(rs_g); rs_b = sbase[rs_g] + SZ }
        if
        :: rs_b <= seq ->
           d_step { TOUCH(rs_g); rs_g = snext[rs_g]; assert(rs_g != NIL); P_WALK_NEXT(true) }   /* acquire */
        :: else -> break
        fi
     od;
     rs_b = 0;   /* (a loop may not jump into a d_step) */
     rcu_unlock()
  fi;
  d_step {
    TOUCH_PINNED(rs_g);
    assert(seq >= sbase[rs_g] && seq < sbase[rs_g] + SZ);
    en_idx = rs_g * SZ + seq - sbase[rs_g];
    rs_b = 0
  }
}

/* ---- ldg__claim: out cl_ok, cl_from; the caller owns (cl_from - 1, upto] ---- */
inline claim(s, upto) {
  cl_ok = 0;
  cl_r = released[s];                              /* acquire load released */
  do
  :: cl_r < upto ->
     d_step {                                      /* weak acq_rel CAS released */
       if
       :: released[s] == cl_r ->
          assert(upto > released[s]);              /* released only grows */
          assert(upto <= tail[s]);                 /* never past the mark */
          released[s] = upto; cl_ok = 1
       :: else -> cl_r = released[s]
       fi
     }
     if
     :: cl_ok -> cl_from = cl_r + 1; break
     :: else
     fi
  :: else -> break
  od
}

/* ---- ldg__take_chunk on the cursor c_*: out tc_w (a wait's slot, or NIL)
 * and tc_wg. One step reads the segment header (plain), the slot's state
 * (acquire) and, if FULL, its payload (plain, immutable once FULL), and
 * takes an operation (keep copied, ext passed to call_rcu; rel is ghost). */
#define A_DONE    0   /* slot dealt with, or seq skipped */
#define A_NEXTSEG 1   /* seq is past g: go to g->next */
#define A_EMPTY   2   /* reserved, not published: try to abandon it */
#define A_WAIT    3   /* a published wait: stop, it becomes a frame */

#ifdef BUG_FRAME_EARLY_RESOLVE
/* mutant: a wait's slot is counted resolved when taken, not when its frame
 * is popped: nothing pins the frame */
#define FRAME_EARLY_RESOLVE sfin[tc_idx] = 1; tc_taken++
#else
#define FRAME_EARLY_RESOLVE skip
#endif

#ifndef BUG_NO_RESET
#define TAKEN_RESET slot[tc_idx] = ST_EMPTY   /* relaxed store: back to EMPTY */
#else
#define TAKEN_RESET skip   /* mutant: a taken slot stays FULL */
#endif

#define TAKE_IF_FULL \
  if \
  :: tc_st == ST_FULL && ekind[sent[tc_idx]] == K_WAIT && etarget[sent[tc_idx]] != NIL -> \
     FRAME_EARLY_RESOLVE; tc_act = A_WAIT \
  :: tc_st == ST_FULL && ekind[sent[tc_idx]] == K_WAIT && etarget[sent[tc_idx]] == NIL -> \
     /* a wait on itself: fires nothing; back to EMPTY */ \
     assert(rel[sent[tc_idx]] == 0); rel[sent[tc_idx]] = 1; \
     slot[tc_idx] = ST_EMPTY; sfin[tc_idx] = 1; tc_taken++; tc_act = A_DONE \
  :: tc_st == ST_FULL && ekind[sent[tc_idx]] == K_OP -> \
     assert(rel[sent[tc_idx]] == 0); rel[sent[tc_idx]] = 1; \
     assert(xstate[sent[tc_idx]] == SEG_LIVE); \
     xstate[sent[tc_idx]] = SEG_RETIRED; xgp[sent[tc_idx]] = inrcu; \
     TAKEN_RESET; sfin[tc_idx] = 1; tc_taken++; tc_act = A_DONE \
  :: tc_st != ST_FULL -> tc_act = A_DONE   /* retracted: its enqueuer resolved it */ \
  fi

/* pop_g, pop_k: a popped frame's segment of c_s and its pop_k slots
 * there still to be counted resolved (NIL if none): counted with the
 * chunk's slots of that segment, in the add made on leaving it or at the
 * end (release.c, POPPING A FRAME). The walk from head always meets it
 * (asserted in engine). A chunk that stops at a wait leaves its slots of
 * the wait's segment, the wait's own included, to the frame: out tc_wk. */
#ifndef BUG_POP_ANY_SEG
#define POP_MEET if :: tc_g == pop_g -> tc_taken = pop_k; pop_g = NIL; pop_k = 0 :: else -> tc_taken = 0 fi
#define POP_AT_END skip
#else
/* mutant: the popped slots are counted in the chunk's last add, whatever
 * the segment it lands on */
#define POP_MEET tc_taken = 0
#define POP_AT_END if :: pop_g != NIL -> tc_taken = tc_taken + pop_k; pop_g = NIL; pop_k = 0 :: else fi
#endif
#ifndef BUG_FRAME_KEEP_SHORT
#define FRAME_OWN 1
#else
#define FRAME_OWN 0   /* mutant: the frame keeps its segment's slots, not the wait's own */
#endif

inline take_chunk() {
  tc_w = NIL;
  tc_g = head[c_s];                                /* acquire load head */
  POP_MEET;
  do
  :: c_next > c_end -> break
  :: else ->
     d_step {
       TOUCH(tc_g);
       tc_base = sbase[tc_g];
       if
       :: c_next >= tc_base + SZ -> tc_act = A_NEXTSEG
       :: c_next < tc_base ->
          /* retired before head: only retracted slots, resolved by their enqueuers */
          c_next = tc_base; tc_act = A_DONE; P_SKIP_RETIRED(true)
       :: else ->
          tc_idx = tc_g * SZ + c_next - tc_base;
          tc_st = slot[tc_idx];                    /* acquire load state */
          if
          :: tc_st == ST_EMPTY -> tc_act = A_EMPTY
          :: else -> c_next++; TAKE_IF_FULL
          fi
       fi;
       tc_base = 0
     }
     if
     :: tc_act == A_NEXTSEG ->
        if
        :: tc_taken != 0 -> seg_resolve(c_s, tc_g, tc_taken)
        :: else
        fi;
        d_step {                                   /* acquire load g->next */
          TOUCH(tc_g); tc_g = snext[tc_g];
          assert(tc_g != NIL)                      /* "every seq <= tail has a segment" */
        };
        POP_MEET
     :: tc_act == A_EMPTY ->
#ifndef BUG_ABANDON_STORE
        d_step {                                   /* acq_rel CAS EMPTY -> ABANDONED */
          TOUCH(tc_g);
          c_next++;
          if
          :: slot[tc_idx] == ST_EMPTY -> slot[tc_idx] = ST_ABANDONED; tc_act = A_DONE
          :: else -> tc_st = slot[tc_idx]; TAKE_IF_FULL   /* published meanwhile */
          fi;
          tc_st = 0
        }
#else
        /* mutant: the EMPTY seen is overwritten with a plain store */
        d_step { TOUCH(tc_g); c_next++; slot[tc_idx] = ST_ABANDONED; tc_act = A_DONE; tc_st = 0 }
#endif
        if
        :: tc_act == A_WAIT -> tc_w = tc_idx; tc_wg = tc_g; break
        :: else
        fi
     :: tc_act == A_WAIT -> tc_w = tc_idx; tc_wg = tc_g; break
     :: tc_act == A_DONE
     fi;
     tc_st = 0; tc_act = 0
  od;
  tc_st = 0; tc_act = 0; tc_idx = 0;
  POP_AT_END;
#ifndef BUG_FRAME_EARLY_RESOLVE
  if
  :: tc_w != NIL -> tc_wk = tc_taken + FRAME_OWN; tc_taken = 0   /* the frame keeps them */
  :: else
  fi;
#endif
  if
  :: tc_taken != 0 -> seg_resolve(c_s, tc_g, tc_taken)
  :: else
  fi;
  tc_taken = 0; tc_g = 0
}

/* ---- ldg__engine(s, upto, BORROWED or OWNED) ---- */
inline engine(s, upto) {
  c_s = s; c_next = 1; c_end = 0; c_frame = NIL; c_upto = upto; pop_g = NIL;
  claim(c_s, c_upto);
  if
  :: cl_ok -> c_next = cl_from; c_end = c_upto
  :: else
  fi;
  cl_ok = 0; cl_from = 0; cl_r = 0;
  do
  :: c_next <= c_end ->
     rcu_lock();
     take_chunk();
     assert(pop_g == NIL);                         /* met by the walk from head */
     rcu_unlock();
#ifdef WAITS
     if
     :: tc_w != NIL ->
        /* The wait's slot (taken, unresolved: pinned) becomes the frame,
         * outside the read-side section. */
        d_step {
          TOUCH_PINNED(tc_wg);
          assert(tc_wg == tc_w / SZ);
          w_e = sent[tc_w];
          fr_ps[tc_w] = c_s; fr_pn[tc_w] = c_next; fr_pe[tc_w] = c_end;
          fr_pf[tc_w] = c_frame; fr_seg[tc_w] = tc_wg; fr_k[tc_w] = tc_wk; tc_wk = 0;
          assert(rel[w_e] == 0); rel[w_e] = 1;     /* the wait fires */
          P_NESTED(c_frame != NIL)
        }
        c_s = etarget[w_e]; c_upto = eupto[w_e]; c_next = 1; c_end = 0;
        c_frame = tc_w; tc_w = NIL; tc_wg = 0; w_e = 0;
        if
        :: !destroyed[c_s] ->                      /* acquire load a->destroyed */
           claim(c_s, c_upto);
           if
           :: cl_ok -> c_next = cl_from; c_end = c_upto
           :: else
           fi;
           cl_ok = 0; cl_from = 0; cl_r = 0
        :: else
        fi
     :: else
     fi
#endif
  :: else ->
#ifdef WAITS
     if                                            /* a popped slot, no chunk after it */
     :: pop_g != NIL ->
        rcu_lock();
        seg_resolve(c_s, pop_g, pop_k);
        rcu_unlock();
        pop_g = NIL; pop_k = 0
     :: else
     fi;
#endif
     if
     :: c_frame == NIL -> break
     :: else ->
#ifdef WAITS
        /* Pop: resume the stream holding the wait; its slot and those its
         * frame kept (fr_k) are counted resolved with the parent's next
         * chunk (take_chunk, pop_g), or alone if the parent's walk is
         * finished (above). */
        d_step {
          TOUCH_PINNED(c_frame / SZ);
          f_g = fr_seg[c_frame]; pop_k = fr_k[c_frame];
          sfin[c_frame] = 1; P_FRAME(true);
          slot[c_frame] = ST_EMPTY;                /* relaxed store f->state */
          P_FRAME_PIN(snext[f_g] != NIL && sres[f_g] == SZ - 1);
          rc_i = c_frame;
          c_s = fr_ps[rc_i]; c_next = fr_pn[rc_i]; c_end = fr_pe[rc_i];
          c_frame = fr_pf[rc_i];
          rc_i = 0
        }
#ifndef BUG_FRAME_EARLY_RESOLVE
        pop_g = f_g;
#else
        pop_k = 0;
#endif
        f_g = 0
#else
        assert(false)
#endif
     fi
  od;
  c_s = 0; c_next = 0; c_end = 0; c_frame = 0; c_upto = 0
}

/* ---- ldg__ring_enqueue(s, e): ldg_enqueue (K_OP) or ldg_add_wait (K_WAIT) ---- */
inline enqueue(s, e) {
  if
  :: atomic {                                      /* acquire load: refused early */
       destroyed[s] -> eres[e] = R_REFUSED;
       if                                          /* ldg__ext_free_now */
       :: xstate[e] == SEG_LIVE -> xstate[e] = SEG_FREED
       :: else
       fi
     }
  :: else ->
     ring_reserve(s, e);
     seg_of_reserved(s, rs_seq);
     if
     :: destroyed[s] ->                            /* seq_cst load destroyed */
        d_step {                                   /* acq_rel exchange RETRACTED */
          TOUCH_PINNED(rs_g); slot[en_idx] = ST_RETRACTED; sfin[en_idx] = 1;
#ifndef BUG_NO_DIRTY
          sdirty[rs_g] = 1;                        /* relaxed store g->dirty */
#endif
          eres[e] = R_REFUSED; en_idx = 0; P_RETRACTED(true);
          if                                       /* ldg__ext_free_now (after) */
          :: xstate[e] == SEG_LIVE -> xstate[e] = SEG_FREED
          :: else
          fi
        }
        resolve_one(s, rs_g)
     :: else ->
        d_step {
          TOUCH_PINNED(rs_g);
          sent[en_idx] = e;                        /* ldg__fill_slot (plain writes) */
          eres[e] = R_OK;
          if                                       /* acq_rel CAS EMPTY -> FULL */
          :: slot[en_idx] == ST_EMPTY -> slot[en_idx] = ST_FULL; en_ok = 1
          :: else ->
             /* A release covering seq passed: the entry is ours to release. */
             assert(slot[en_idx] == ST_ABANDONED); en_ok = 0; P_ABANDONED(true);
             P_WAIT_ABANDONED(ekind[e] == K_WAIT && etarget[e] != NIL);
             sfin[en_idx] = 1;
             assert(rel[e] == 0); rel[e] = 1;      /* run the keep, or fire (below) */
#ifndef BUG_RESET_AFTER_RESOLVE
             slot[en_idx] = ST_EMPTY;              /* relaxed store: back to EMPTY */
#endif
             if                                    /* ldg__ext_free_now (after) */
             :: xstate[e] == SEG_LIVE -> xstate[e] = SEG_FREED
             :: else
             fi
          fi;
          en_idx = 0
        }
        if
        :: en_ok -> skip
        :: else ->
           resolve_one(s, rs_g);
#ifdef BUG_RESET_AFTER_RESOLVE
           /* mutant: the reset after the resolution (the slot may be gone) */
           d_step { TOUCH_PINNED(rs_g); slot[rs_g * SZ + rs_seq - sbase[rs_g]] = ST_EMPTY }
#endif
#ifdef WAITS
           if
           :: ekind[e] == K_WAIT && etarget[e] != NIL ->
              if                                   /* acquire load target->destroyed */
              :: destroyed[etarget[e]] -> engine(etarget[e], 0)
              :: else -> engine(etarget[e], eupto[e])
              fi
           :: else
           fi;
#endif
           skip
        fi
     fi
  fi;
  rs_g = 0; rs_seq = 0; en_ok = 0
}

/* ---- ldg__destroy (ldg_stream_destroy) ---- */
inline destroy(s) {
#ifndef BUG_DESTROY_ORDER
  d_step {                                         /* seq_cst CAS destroyed */
    if
    :: !destroyed[s] -> destroyed[s] = 1; rs_ok = 1
    :: else -> rs_ok = 0
    fi
  }
  if
  :: rs_ok -> rs_t = tail[s]; engine(s, rs_t)      /* seq_cst load tail */
  :: else
  fi;
#else
  /* mutant: tail read before the flag is set (no store->load order) */
  rs_t = tail[s];
  d_step {
    if
    :: !destroyed[s] -> destroyed[s] = 1; rs_ok = 1
    :: else -> rs_ok = 0
    fi
  }
  if
  :: rs_ok -> engine(s, rs_t)
  :: else
  fi;
#endif
  rs_ok = 0; rs_t = 0
}

/* ---- ldg_release(s, ldg_mark(s)) ---- */
inline release_to_mark(s) {
  rs_t = tail[s];                                  /* ldg_mark: acquire load tail */
  if
  :: destroyed[s] -> skip                          /* LDG_EDESTROYED */
  :: else -> engine(s, rs_t)
  fi;
  rs_t = 0
}

/* ---- ldg__ring_visit: a lock-free query (ldg_holds_vector & co.) ---- */
inline ring_any(s) {
  rcu_lock();
  q_r = released[s];                               /* acquire */
  q_t = tail[s];                                   /* acquire */
  q_g = head[s];                                   /* acquire */
  do
  :: q_g == NIL -> break
  :: else ->
     d_step { TOUCH(q_g); q_b = sbase[q_g] }
     if
     :: q_b > q_t -> break
     :: else
     fi;
     q_lo = (q_b > q_r + 1 -> q_b : q_r + 1);
     q_hi = (q_b + SZ - 1 < q_t -> q_b + SZ - 1 : q_t);
     q_q = q_lo;
     do
     :: q_q <= q_hi ->
        d_step {                                   /* acquire load state; kind; payload */
          TOUCH(q_g);
          rc_i = q_g * SZ + q_q - q_b;
          if
          :: slot[rc_i] == ST_FULL && ekind[sent[rc_i]] == K_OP ->
             assert(xstate[sent[rc_i]] == SEG_LIVE || xstate[sent[rc_i]] == SEG_RETIRED)
          :: else
          fi;
          rc_i = 0
        }
        q_q++
     :: else -> break
     od;
     q_q = 0; q_lo = 0; q_hi = 0;
     d_step { TOUCH(q_g); q_g = snext[q_g]; q_b = 0 }   /* acquire load g->next */
  od;
  rcu_unlock();
  q_r = 0; q_t = 0; q_g = 0; q_b = 0
}

/* ---- Quiescent checks, run by init when every worker has finished ---- */

/* No done segment left behind ("WHO MAY RECLAIM A SLOT"): the head segment
 * is not both fully resolved and followed. */
inline check_head(s) {
  d_step { assert(sres[head[s]] != SZ || snext[head[s]] == NIL) }
}

/* After a final release: the stream holds exactly one segment, head ==
 * tailseg, every handed-out seq of it resolved, tail_end at its end; every
 * other segment of the stream freed, every ext freed. */
inline check_ring(s) {
  d_step {
    assert(inrcu == 0);
#ifndef FASTPATH
    assert(head[s] == tailseg[s]);
    assert(snext[head[s]] == NIL);
    assert(sstate[head[s]] == SEG_LIVE);
    assert(sres[head[s]] == tail[s] + 1 - sbase[head[s]]);
    assert(tail_end[s] == sbase[head[s]] + SZ);
#else
    /* The reserve (FASTPATH) extends the ring before its last segment is
     * handed out: head .. tailseg, each live, every handed-out seq in them
     * resolved and none past tail_end. */
    assert(snext[tailseg[s]] == NIL);
    assert(tail_end[s] == sbase[tailseg[s]] + SZ);
    assert(tail[s] < tail_end[s]);
    q_g = head[s]; q_b = 0;
    do
    :: q_g == NIL -> break
    :: else ->
       assert(sstate[q_g] == SEG_LIVE && sstream[q_g] == s);
       q_b = q_b + sres[q_g];
       q_g = snext[q_g]
    od;
    assert(q_b == tail[s] + 1 - sbase[head[s]]);
    q_g = 0; q_b = 0;
#endif
    assert(released[s] <= tail[s]);
    rc_i = 0;
    do
    :: rc_i < nalloc ->
       assert(sstream[rc_i] != s || sstate[rc_i] == SEG_FREED || sstate[rc_i] == SEG_POOLED ||
              (sstate[rc_i] == SEG_LIVE && sbase[rc_i] >= sbase[head[s]] &&
               sbase[rc_i] <= sbase[tailseg[s]]));
       rc_i++
    :: else -> break
    od;
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       assert(estream[rc_i] != s || xstate[rc_i] == SEG_UNUSED || xstate[rc_i] == SEG_FREED);
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* Every entry was enqueued or refused; every accepted one (R_OK) with seq <=
 * released was released exactly once and none above it; no refused one. */
inline check_entries() {
  d_step {
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       assert(eres[rc_i] != R_NONE);
       assert(eres[rc_i] != R_REFUSED || rel[rc_i] == 0);
       assert(eres[rc_i] != R_OK || eseq[rc_i] > released[estream[rc_i]] || rel[rc_i] == 1);
       assert(eres[rc_i] != R_OK || eseq[rc_i] <= released[estream[rc_i]] || rel[rc_i] == 0);
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* After the final releases: every accepted entry was released exactly once. */
inline check_all_released() {
  d_step {
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       assert(eres[rc_i] != R_OK || (rel[rc_i] == 1 && eseq[rc_i] <= released[estream[rc_i]]));
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* At a quiescent moment: the pool's stack holds exactly the POOLED
 * segments, npool of them, no cycle. */
inline check_pool() {
  d_step {
    q_q = 0;
    rc_i = ptop;
    do
    :: rc_i != NIL ->
       assert(rc_i < NSEG && sstate[rc_i] == SEG_POOLED);
       q_q++;
       assert(q_q <= NSEG);
       rc_i = snext[rc_i]
    :: else -> break
    od;
    assert(q_q == npool);
    q_b = 0;
    rc_i = 0;
    do
    :: rc_i < NSEG ->
       if
       :: sstate[rc_i] == SEG_POOLED -> q_b++
       :: else
       fi;
       rc_i++
    :: else -> break
    od;
    assert(q_b == npool);
    rc_i = 0; q_q = 0; q_b = 0
  }
}
