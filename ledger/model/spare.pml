/*
 * spare.pml: the spare of ledger/segment.c (THE SPARE): the next segment of
 * a stream, prepared by a release outside RCU and parked in s->spare, then
 * taken by the extender (or dropped by ldg_ledger_trim), against the
 * segment pool of pool.c and RCU grace periods.
 *
 * KEEP IN STEP WITH THE C. Each inline is one C function; each statement
 * that touches shared state is one C atomic access (ghost bookkeeping rides
 * along with the access it follows):
 *
 *   inline prepare   ldg__ring_prepare_spare: the hint (spare != NULL:
 *                    return), the claim (CAS NULL -> CLAIMED), under RCU
 *                    either a segment linked ahead (the claim given back:
 *                    a store of NULL over it) or a pop from
 *                    the pool under RCU, else a fresh allocation, then the
 *                    store parking it over CLAIMED
 *   inline take      ldg__spare_take: load; NULL or CLAIMED: none; CAS the
 *                    parked segment -> NULL, retried on failure
 *   inline pool_pop  ldg__pool_pop (under RCU): load top, read top->next,
 *                    CAS top
 *   inline retire    ldg__seg_retire (call_rcu): its grace period waits for
 *                    the readers inside a read-side section now
 *   proctype extender   ldg__ring_extend's use of the spare (under RCU):
 *                    take it; none: its own segment (pool or fresh); then
 *                    link it (the ring owns it) or set it aside as smaller
 *                    than the backlog (retired, ldg__ring_extend)
 *   proctype trimmer    ldg_ledger_trim's ldg__ring_drop_spare (under RCU):
 *                    take, retire; ldg_stream_destroy makes the same call
 *                    in the same way (ldg__destroy)
 *   proctype popper     another stream's extender popping the pool
 *   proctype gp         liburcu's call_rcu thread: a retired segment whose
 *                    grace period is over goes to the pool (ldg__seg_pool_cb)
 *   the final check     ldg__ring_free_all: the stream's free hands its
 *                    spare to the pool
 *
 * The ring itself (reservation, publication, release, head advance) is in
 * ring_common.pml, where a segment's source is abstracted to "clean and
 * unreachable": this model checks that the spare keeps it so.
 *
 * Checked, in every interleaving of two preparing releases, one extender,
 * one trim and one popper of another stream (the pool seeded with one
 * segment, which the releases may pop while the popper holds it):
 *   - one preparer per stream at a time (npreparing <= 1: issue 11's
 *     racing releases each allocated one) and at most one spare parked;
 *   - a parked spare is taken by exactly one thread (a take finds it
 *     SPARE and makes it OWNED);
 *   - no segment is freed while a popper may read its link (TOUCH_MEM),
 *     and a pop's CAS installs a pooled successor (the pool's ABA
 *     argument);
 *   - nothing is lost: at the end every segment is pooled, linked or freed
 *     (none owned by nobody, none parked but unreachable), and the stream's
 *     free finds no claim left.
 * Sequential consistency, as ring_common.pml: the orders (the preparer's
 * release store, the takers' acquire CAS: message passing) are argued in
 * segment.c.
 *
 * Mutants (each must fail): BUG_SPARE_NO_CLAIM (prepare without the claim),
 * BUG_SPARE_TAKE_CLAIM (the taker exchanges, stealing a claim: a second
 * release claims while the first still prepares), BUG_SPARE_DROP_NOW (trim
 * frees the dropped spare at once), BUG_SPARE_ASIDE_NOW (the extender frees
 * a set-aside spare at once).
 * Probes (each must be reached): PROBE_SPARE_CLAIM_SEEN (an extender meets a
 * claim and gets its own segment), PROBE_SPARE_POOLED_HELD (a spare popped
 * from under the popper is retired while the popper still holds it).
 */

#define NSEG 5      /* segment ids; 0 starts in the pool (GP_END lists them) */
#define NIL 255     /* NULL */
#define CLAIMED 254 /* LDG__SPARE_CLAIMED */
#define NPROC 5     /* preparers 0 and 1, extender 2, trimmer 3, popper 4 */

#define S_UNUSED  0 /* not allocated yet */
#define S_POOLED  1 /* on the pool's stack */
#define S_OWNED   2 /* got by one thread, unpublished */
#define S_SPARE   3 /* parked in s->spare */
#define S_LINKED  4 /* linked into a ring (the ring's protocol from here) */
#define S_RETIRED 5 /* passed to call_rcu, grace period running */
#define S_FREED   6

byte st[NSEG];
byte snext[NSEG];     /* a pooled segment's link */
byte gp[NSEG];        /* ghost: readers its grace period still waits for */
byte ptop = NIL;      /* the pool's top */
byte spare = NIL;     /* s->spare */
byte nalloc = 1;      /* next fresh id */
byte inrcu;           /* ghost: processes inside a read-side section */
byte npreparing;      /* ghost: releases between their claim and the park */
byte nspare;          /* ghost: segments parked */
byte ndone;

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_SPARE_CLAIM_SEEN
#define P_CLAIM_SEEN(c) PROBE_AT(c)
#else
#define P_CLAIM_SEEN(c) skip
#endif
#ifdef PROBE_SPARE_POOLED_HELD
#define P_POOLED_HELD(c) PROBE_AT(c)
#else
#define P_POOLED_HELD(c) skip
#endif

/* The popper, between reading top and its CAS, holds this segment. */
byte held = NIL;

inline rcu_lock(me) { inrcu = inrcu | (1 << me) }

inline rcu_unlock(me) {
  d_step {
    inrcu = inrcu & ~(1 << me);
    i = 0;
    do
    :: i < NSEG -> gp[i] = gp[i] & ~(1 << me); i++
    :: else -> break
    od
  }
}

inline alloc(g) {
  atomic { assert(nalloc < NSEG); g = nalloc; nalloc++; st[g] = S_OWNED }
}

/* call_rcu: the grace period waits for every reader inside now. */
inline retire(g) {
  atomic {
    assert(st[g] == S_OWNED);
    P_POOLED_HELD(held == g);
    st[g] = S_RETIRED; gp[g] = inrcu
  }
}

/* A retired segment freed at once (the mutants). */
inline free_now(g) {
  atomic { assert(st[g] == S_OWNED); st[g] = S_FREED }
}

inline pool_pop(me, g) {
  atomic { g = ptop; if :: me == 4 -> held = g :: else fi }
  do
  :: g == NIL -> break
  :: else ->
    /* TOUCH_MEM: the read of g->next; g may be popped by another, never
     * freed (its grace period waits for this reader). */
    atomic { assert(st[g] != S_FREED); nx = snext[g] }
    if
    :: atomic { ptop == g ->
         assert(st[g] == S_POOLED && (nx == NIL || st[nx] == S_POOLED));
         ptop = nx; st[g] = S_OWNED;
         if :: me == 4 -> held = NIL :: else fi };
       break
    :: atomic { ptop != g -> g = ptop; if :: me == 4 -> held = g :: else fi }
    fi
  od
}

/* ldg__spare_take. */
inline take(g) {
#ifndef BUG_SPARE_TAKE_CLAIM
  g = spare;
  do
  :: g == NIL || g == CLAIMED -> g = NIL; break
  :: else ->
    if
    :: atomic { spare == g -> assert(st[g] == S_SPARE); spare = NIL;
                st[g] = S_OWNED; nspare-- }; break
    :: atomic { spare != g -> g = spare }
    fi
  od
#else
  /* mutant: an exchange takes whatever is there, a claim included */
  atomic {
    g = spare; spare = NIL;
    if
    :: g != NIL && g != CLAIMED -> assert(st[g] == S_SPARE); st[g] = S_OWNED; nspare--
    :: else -> g = NIL
    fi
  }
#endif
}

/* ldg__ring_prepare_spare, by a release of the stream. */
proctype preparer(byte me) {
  byte g = NIL, nx, i;
  if
  :: spare != NIL -> goto out   /* the relaxed hint */
  :: else
  fi;
#ifndef BUG_SPARE_NO_CLAIM
  if
  :: atomic { spare == NIL -> spare = CLAIMED; npreparing++; assert(npreparing <= 1) }
  :: atomic { spare != NIL -> skip }; goto out
  fi;
#else
  atomic { npreparing++; assert(npreparing <= 1) }
#endif
  rcu_lock(me);
  if
  :: skip
  :: rcu_unlock(me);                /* a segment is linked ahead (tailseg's base past */
     atomic {                       /* the tail read: GROWING AHEAD): the claim given back */
       assert(spare == CLAIMED);
       spare = NIL; npreparing--
     };
     goto out
  fi;
  pool_pop(me, g);
  rcu_unlock(me);
  if
  :: g == NIL -> alloc(g)
  :: else
  fi;
  /* The park: a store over the claim. */
  atomic {
    assert(st[g] == S_OWNED);
    spare = g; st[g] = S_SPARE; nspare++; npreparing--;
    assert(nspare <= 1)
  };
out:
  ndone++
}

/* ldg__ring_extend's use of the spare, under RCU. */
proctype extender() {
  byte g = NIL, nx, i;
  rcu_lock(2);
  P_CLAIM_SEEN(spare == CLAIMED);
  take(g);
  if
  :: g != NIL ->
    if
    :: atomic { assert(st[g] == S_OWNED); st[g] = S_LINKED } /* the ring's now */
    :: true ->                       /* smaller than the backlog: aside */
#ifndef BUG_SPARE_ASIDE_NOW
      retire(g);
#else
      free_now(g);
#endif
      g = NIL
    fi
  :: else
  fi;
  if
  :: g == NIL ->                     /* its own: ldg__seg_get */
    pool_pop(2, g);
    if
    :: g == NIL -> alloc(g)
    :: else
    fi;
    atomic { assert(st[g] == S_OWNED); st[g] = S_LINKED }
  :: else
  fi;
  rcu_unlock(2);
  ndone++
}

/* ldg_ledger_trim: ldg__ring_drop_spare under RCU. */
proctype trimmer() {
  byte g = NIL, i;
  rcu_lock(3);
  take(g);
  if
  :: g != NIL ->
#ifndef BUG_SPARE_DROP_NOW
    retire(g)
#else
    free_now(g)
#endif
  :: else
  fi;
  rcu_unlock(3);
  ndone++
}

/* Another stream's extender, popping the pool. */
proctype popper() {
  byte g = NIL, nx, i;
  rcu_lock(4);
  pool_pop(4, g);
  if
  :: g != NIL -> atomic { assert(st[g] == S_OWNED); st[g] = S_LINKED }
  :: else
  fi;
  rcu_unlock(4);
  ndone++
}

/* A grace period is over: ldg__seg_pool_cb pushes the segment. */
inline gp_end(g) {
  snext[g] = ptop; ptop = g; st[g] = S_POOLED
}

#define GP_END(g) :: atomic { st[g] == S_RETIRED && gp[g] == 0 -> gp_end(g) }

proctype gp_thread() {
  do
  GP_END(0)
  GP_END(1)
  GP_END(2)
  GP_END(3)
  GP_END(4)
  :: ndone == NPROC -> break
  od
}

init {
  byte i;
  st[0] = S_POOLED; snext[0] = NIL; ptop = 0;
  atomic {
    run preparer(0); run preparer(1); run extender(); run trimmer();
    run popper(); run gp_thread()
  };
  ndone == NPROC;
  atomic {
    assert(inrcu == 0 && npreparing == 0);
    /* Every grace period ends (no reader is left). */
    i = 0;
    do
    :: i < NSEG -> if :: st[i] == S_RETIRED -> assert(gp[i] == 0); gp_end(i) :: else fi; i++
    :: else -> break
    od;
    /* The stream's free: its spare to the pool; no claim is left. */
    assert(spare != CLAIMED);
    if
    :: spare != NIL -> assert(st[spare] == S_SPARE); st[spare] = S_OWNED; nspare--;
       gp_end(spare); spare = NIL
    :: else
    fi;
    /* Nothing lost: none owned by nobody, none parked but unreachable. */
    assert(nspare == 0);
    i = 0;
    do
    :: i < NSEG -> assert(st[i] != S_OWNED && st[i] != S_SPARE && st[i] != S_RETIRED); i++
    :: else -> break
    od
  }
}
