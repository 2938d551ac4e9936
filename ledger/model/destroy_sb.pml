/*
 * destroy_sb.pml: the destroy/enqueue handshake of ledger/ (ring.c, DESTROY)
 * under a weak memory model, with explicit per-thread store buffers.
 *
 * ring_common.pml checks the ring under sequential consistency. That cannot
 * tell a seq_cst access from a weaker one, and x86 (where every RMW is a full
 * fence) and ThreadSanitizer cannot either. The handshake is a store-buffering
 * (Dekker) pattern:
 *
 *   destroyer  (ldg__destroy):       CAS destroyed 0 -> 1;  t = load tail
 *   enqueuer   (ldg__ring_enqueue):  CAS tail t -> t + 1;   load destroyed
 *
 * C11 keeps one of the two loads from missing the other side's RMW only if
 * all four accesses are seq_cst (a single total order S over them; with any
 * one weaker, both loads may read the old value). Then the destroyer's walk
 * stops below the enqueuer's seq while the enqueuer sees a live stream and
 * publishes: an accepted entry that nobody ever releases (its keep never
 * runs). This model keeps exactly that freedom:
 *
 *   W  every write to destroyed or tail (here all RMWs) goes to the writing
 *      thread's store buffer (one entry per location; a second write to it
 *      replaces the first: other threads may miss an intermediate value,
 *      as coherence allows) and reaches memory at a nondeterministic later
 *      step (proctype Flusher);
 *   L  a load reads the thread's own buffer first, then memory;
 *   RMW an RMW on x waits until no other thread has x buffered (it reads the
 *      latest value in x's modification order; this also makes that write
 *      visible to all, which hides behaviours and never adds one);
 *   SC a seq_cst load waits until the thread has no seq_cst write buffered:
 *      seq_cst RMW -> seq_cst load is the one store->load order C11 keeps
 *      (the S order); a weaker RMW or load gets no such wait;
 *   REL a release write (the acq_rel CASes and the exchange on slot->state)
 *      waits until the thread's buffer is empty: what it publishes includes
 *      every earlier write. slot->state and released are RMWs of one location
 *      each, straight to memory.
 * Loads are never reordered with each other (no load buffering): the model
 * under-approximates C11, so a failure is a real C11 execution.
 *
 * C functions (release.c, ring.c, reserve.h; ring_common.pml has the full
 * protocol):
 *   proctype Destroyer  ldg__destroy: ldg__mark_destroyed (CAS destroyed,
 *                       seq_cst), load tail (seq_cst), ldg__engine ->
 *                       ldg__claim, ldg__take_chunk (FULL: take; EMPTY: CAS
 *                       EMPTY -> ABANDONED; RETRACTED: skip)
 *   proctype Enqueuer   ldg__ring_enqueue: load destroyed (acquire, early
 *                       refusal), ldg__ring_reserve (load tail relaxed, CAS
 *                       tail seq_cst), load destroyed (seq_cst), then retract
 *                       (exchange RETRACTED) or publish (CAS EMPTY -> FULL;
 *                       failing on ABANDONED, it releases the entry itself)
 * Segments, RCU, resolution and reclamation are ring_common.pml's business:
 * here every seq has its slot from the start.
 *
 * Checked: at the end (the stream destroyed, so no release comes later)
 * every accepted enqueue was released exactly once, and every refused one
 * never; no assertion inside (a FULL slot is taken once).
 *
 * Mutants (each a C11-legal weakening that x86 and TSan cannot see; each must
 * fail, with an accepted entry left unreleased):
 *   BUG_SB_DESTROY_CAS     ldg__mark_destroyed's CAS acq_rel, not seq_cst
 *   BUG_SB_TAIL_LOAD       ldg__destroy's load of tail acquire, not seq_cst
 *   BUG_SB_RESERVE_CAS     ldg__ring_reserve's CAS on tail acq_rel
 *   BUG_SB_DESTROYED_LOAD  the enqueuer's load of destroyed after reserving
 *                          acquire, not seq_cst
 * Probes: PROBE_SB_STALE (a load misses another thread's buffered write: the
 * buffers are exercised in the correct protocol), PROBE_SB_RETRACT (an
 * enqueuer retracts), PROBE_SB_ABANDON (the destroyer abandons a reserved
 * slot to its enqueuer).
 *
 * SB_SINGLE: a single-issuer stream (reserve.c, SINGLE-ISSUER STREAMS). The two
 * enqueuers are issuers that take turns: the second starts only after the
 * first returned and its stores drained (a mutex handoff: the unlock is a
 * release). Each reserves with a load of tail and a release store of t + 1
 * (REL rule: buffered, not seq_cst), then loads destroyed with no wait
 * (ldg__asym_light is a compiler barrier only). The destroyer, between its
 * CAS of destroyed and its load of tail, calls membarrier
 * (ldg__asym_heavy): every thread runs a full barrier, i.e. every store
 * buffer drains, at that step. Mutant BUG_SB_NO_MEMBARRIER leaves it out:
 * an accepted entry nobody releases.
 * Since pub8, a single-issuer stream publishes with a plain store, and a
 * walk that finds a slot EMPTY asks through s->asked rather than CASing
 * the slot ABANDONED (ring.c, PUBLICATION ON A STREAM WITH ONE
 * PUBLISHER): that exchange is pub_sb.pml's. Here the publication keeps
 * the CAS: what this model checks, the handshake on destroyed and tail,
 * decides only which seqs the destroyer's walk owns, before any slot is
 * read, and is unchanged; the retract (an exchange) still ends a slot the
 * walk found EMPTY, whichever way the walk left it.
 */

#define NE 2         /* enqueuers, one enqueue each */
#define NT (NE + 1)  /* threads: 0 = destroyer, 1..NE = enqueuers */
#define NSEQ NE      /* every seq that can be reserved has its slot */

#define ST_EMPTY     0
#define ST_FULL      1
#define ST_ABANDONED 2
#define ST_RETRACTED 3

#define R_NONE    0
#define R_OK      1
#define R_REFUSED 2

/* Orders of the four handshake accesses: 1 = seq_cst. */
#ifdef BUG_SB_DESTROY_CAS
#define SC_DESTROY_CAS 0
#else
#define SC_DESTROY_CAS 1
#endif
#ifdef BUG_SB_TAIL_LOAD
#define SC_TAIL_LOAD 0
#else
#define SC_TAIL_LOAD 1
#endif
#ifdef BUG_SB_RESERVE_CAS
#define SC_RESERVE_CAS 0
#else
#define SC_RESERVE_CAS 1
#endif
#ifdef BUG_SB_DESTROYED_LOAD
#define SC_DESTROYED_LOAD 0
#else
#define SC_DESTROYED_LOAD 1
#endif

#if defined(SB_SINGLE) && !defined(BUG_SB_NO_MEMBARRIER)
#define SB_MEMBARRIER 1
#else
#define SB_MEMBARRIER 0
#endif

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_SB_STALE
#define P_STALE(c) PROBE_AT(c)
#else
#define P_STALE(c) skip
#endif
#ifdef PROBE_SB_RETRACT
#define P_RETRACT(c) PROBE_AT(c)
#else
#define P_RETRACT(c) skip
#endif
#ifdef PROBE_SB_ABANDON
#define P_ABANDON(c) PROBE_AT(c)
#else
#define P_ABANDON(c) skip
#endif

/* Memory. */
bool destroyed;          /* s->destroyed */
byte tail;               /* s->tail */
byte released;           /* s->released */
byte slot[NSEQ + 1];     /* slot->state of seq 1..NSEQ */
byte sent[NSEQ + 1];     /* its entry (the enqueuer's thread id) */

/* Store buffers: thread t's pending write to destroyed / tail. */
bit  bd_full[NT]; bool bd_v[NT]; bit bd_sc[NT];
bit  bt_full[NT]; byte bt_v[NT]; bit bt_sc[NT];

/* Ghost: per enqueuer (by thread id). */
byte eres[NT];   /* R_* */
byte eseq[NT];   /* the seq it reserved */
byte rel[NT];    /* times its keep ran */

/* init runs the flusher first (_pid 1: processes die in reverse order of
 * creation, and it never does), then the destroyer (_pid 2, thread 0) and
 * the enqueuers (_pid 3.., threads 1..NE). */
#define T (_pid - 2)

#define OTHERS_BUFFER_D(t) (bd_full[0] && t != 0 || bd_full[1] && t != 1 || bd_full[2] && t != 2)
#define OTHERS_BUFFER_T(t) (bt_full[0] && t != 0 || bt_full[1] && t != 1 || bt_full[2] && t != 2)
#if NT != 3
#error "OTHERS_BUFFER_* are written for three threads"
#endif
#define NO_SC_PENDING(t) (!(bd_full[t] && bd_sc[t]) && !(bt_full[t] && bt_sc[t]))
#define BUFFER_EMPTY(t) (!bd_full[t] && !bt_full[t])

/* L: loads. */
#define LOAD_D(t) (bd_full[t] -> bd_v[t] : destroyed)
#define LOAD_T(t) (bt_full[t] -> bt_v[t] : tail)

/* W: a buffered write reaches memory, at any step. */
#define FLUSH_D(t) atomic { bd_full[t] -> destroyed = bd_v[t]; bd_full[t] = 0; bd_sc[t] = 0 }
#define FLUSH_T(t) atomic { bt_full[t] -> tail = bt_v[t]; bt_full[t] = 0; bt_sc[t] = 0 }
/* membarrier: every thread's buffer drains, in one step. (destroyed has one
 * writer, tail one at a time: the order of the drains does not matter.) */
#define DRAIN_ALL()                                                        \
  atomic {                                                                 \
    if :: bd_full[0] -> FLUSH_D(0) :: else fi;                             \
    if :: bd_full[1] -> FLUSH_D(1) :: else fi;                             \
    if :: bd_full[2] -> FLUSH_D(2) :: else fi;                             \
    if :: bt_full[0] -> FLUSH_T(0) :: else fi;                             \
    if :: bt_full[1] -> FLUSH_T(1) :: else fi;                             \
    if :: bt_full[2] -> FLUSH_T(2) :: else fi                              \
  }

proctype Flusher() {
end:
  do
  :: FLUSH_D(0)
  :: FLUSH_D(1)
  :: FLUSH_D(2)
  :: FLUSH_T(0)
  :: FLUSH_T(1)
  :: FLUSH_T(2)
  od
}

proctype Destroyer() {
  bool ok; byte t, q, st;
  /* ldg__mark_destroyed: CAS destroyed false -> true (RMW rule) */
  atomic {
    !OTHERS_BUFFER_D(T) ->
    if
    :: !LOAD_D(T) -> bd_full[T] = 1; bd_v[T] = 1; bd_sc[T] = bd_sc[T] | SC_DESTROY_CAS; ok = 1
    :: else -> ok = 0
    fi
  }
  if
  :: !ok -> goto done
  :: else
  fi;
#if SB_MEMBARRIER
  DRAIN_ALL();   /* ldg__asym_heavy: membarrier */
#endif
  /* load tail (SC rule if seq_cst) */
  atomic {
    (!SC_TAIL_LOAD || NO_SC_PENDING(T)) ->
    t = LOAD_T(T);
    P_STALE(!bt_full[T] && OTHERS_BUFFER_T(T))
  }
  /* ldg__claim: CAS released (acq_rel: REL rule) */
  atomic {
    BUFFER_EMPTY(T) ->
    if
    :: released < t -> q = released + 1; released = t
    :: else -> q = t + 1
    fi
  }
  /* ldg__take_chunk over (released_old, t] */
  do
  :: q > t -> break
  :: else ->
     atomic {
       BUFFER_EMPTY(T) ->
       st = slot[q];
       if
       :: st == ST_EMPTY -> slot[q] = ST_ABANDONED; P_ABANDON(true)   /* CAS EMPTY -> ABANDONED */
       :: st == ST_FULL ->                                           /* take */
          assert(rel[sent[q]] == 0); rel[sent[q]]++;
          slot[q] = ST_EMPTY
       :: else                                                       /* RETRACTED */
       fi;
       q++
     }
  od;
done:
  skip
}

proctype Enqueuer() {
  byte t, seq; bool d, ok;
#ifdef SB_SINGLE
  /* Issuers take turns: the second begins after the first returned, its
   * stores drained (the caller's mutex). */
  (T == 1 || eres[1] != R_NONE && BUFFER_EMPTY(1));
#endif
  /* early refusal: acquire load destroyed */
  if
  :: atomic { LOAD_D(T) -> eres[T] = R_REFUSED }
#ifdef SB_SINGLE
  :: else ->
     /* ldg__ring_reserve_single: load tail, release store t + 1 (REL rule,
      * not seq_cst); no other issuer writes tail meanwhile */
     atomic {
       BUFFER_EMPTY(T) ->
       t = LOAD_T(T);
       assert(t < NSEQ);
       bt_full[T] = 1; bt_v[T] = t + 1; bt_sc[T] = 0;
       seq = t + 1; eseq[T] = seq; t = 0
     }
     /* ldg__asym_light (compiler barrier), load destroyed: no wait */
     atomic {
       d = LOAD_D(T);
       P_STALE(!bd_full[T] && OTHERS_BUFFER_D(T))
     }
#else
  :: else ->
     /* ldg__ring_reserve: relaxed load tail, then CAS tail t -> t + 1 */
     do
     :: t = LOAD_T(T);
        atomic {
          !OTHERS_BUFFER_T(T) ->
          if
          :: LOAD_T(T) == t ->
             assert(t < NSEQ);
             bt_full[T] = 1; bt_v[T] = t + 1; bt_sc[T] = bt_sc[T] | SC_RESERVE_CAS;
             seq = t + 1; eseq[T] = seq; ok = 1
          :: else -> ok = 0
          fi;
          t = 0
        }
        if
        :: ok -> break
        :: else
        fi
     od;
     /* load destroyed after reserving (SC rule if seq_cst) */
     atomic {
       (!SC_DESTROYED_LOAD || NO_SC_PENDING(T)) ->
       d = LOAD_D(T);
       P_STALE(!bd_full[T] && OTHERS_BUFFER_D(T))
     }
#endif
     if
     :: d ->
        atomic {                                 /* exchange RETRACTED (REL rule) */
          BUFFER_EMPTY(T) -> slot[seq] = ST_RETRACTED; eres[T] = R_REFUSED; P_RETRACT(true)
        }
     :: else ->
        atomic {                                 /* fill, CAS EMPTY -> FULL (REL rule) */
          BUFFER_EMPTY(T) ->
          sent[seq] = T; eres[T] = R_OK;
          if
          :: slot[seq] == ST_EMPTY -> slot[seq] = ST_FULL
          :: else ->                             /* ABANDONED: ours to release */
             assert(slot[seq] == ST_ABANDONED);
             assert(rel[T] == 0); rel[T]++;
             slot[seq] = ST_EMPTY
          fi
        }
     fi
  fi
}

init {
  byte i;
  atomic {
    run Flusher();
    run Destroyer();
    i = 1;
    do
    :: i <= NE -> run Enqueuer(); i++
    :: else -> break
    od
  }
  (_nr_pr == 2);        /* every worker finished (init and the flusher remain) */
  /* Quiescent: buffers drained (as they eventually are), then the
   * contract: the stream is destroyed, nothing releases it later, so every
   * accepted enqueue was released exactly once and every refused one never. */
  (BUFFER_EMPTY(0) && BUFFER_EMPTY(1) && BUFFER_EMPTY(2));
  d_step {
    assert(destroyed);
    i = 1;
    do
    :: i <= NE ->
       assert(eres[i] != R_NONE);
       assert(eres[i] != R_OK || rel[i] == 1);
       assert(eres[i] != R_REFUSED || rel[i] == 0);
       i++
    :: else -> break
    od
  }
}
