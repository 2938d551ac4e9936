/*
 * park_sb.pml: the engine thread's park against an issuer's wake-up
 * (cuda/engine.c, WAKING THE ENGINE THREAD) under a weak memory model, with
 * per-thread store buffers as ledger/model/destroy_sb.pml and own_sb.pml
 * model them.
 *
 *   engine thread (slc__engine_main):  g = gen; store parked = 1;
 *                                      heavy; final poll: load the mark
 *                                      (ldg_mark: otail on an owned
 *                                      stream); nothing new -> futex wait
 *                                      on gen == g
 *   issuer (an issue, slc__engine_kick / _kick_enqueued): reserve (owned:
 *                                      store otail; shared: a seq_cst RMW
 *                                      of tail); light; load parked; 1 ->
 *                                      gen++ and futex wake
 *
 * Memory model: the two plain stores (parked, the owner's otail) go to
 * their thread's store buffer (one entry each) and reach memory at any
 * later step (proctype Flusher); a thread's loads read its own buffer
 * first. An RMW (the shared reservation, the bump of gen) waits until its
 * thread's buffer drained and writes memory (x86's locked instructions; a
 * seq_cst RMW before a seq_cst load, C11's S order). A seq_cst fence
 * drains its own thread's buffer. membarrier (ldg__asym_heavy where it is
 * in use) drains every thread's buffer in one step: each running thread
 * makes a full barrier (a descheduled one passed one). ldg__asym_light is a
 * compiler barrier: nothing. The poll's consumer try-flag (a CAS: on x86 a
 * full barrier, in C11 no store->load order for other locations) is not
 * modelled, so the model does not lean on it. Loads are never reordered
 * with each other: an under-approximation of C11, so a failure is a real
 * C11 execution.
 *
 * Checked: when nothing can move any more (Spin's timeout), the issuer's
 * work was seen by the engine thread (its final poll, or its poll after the
 * wake-up): a lost wake-up leaves it asleep in the futex with the work
 * unseen.
 *
 * Configurations (check.sh runs each):
 *   (none)                membarrier in use, owned stream (the default)
 *   ISSUER_RMW            membarrier in use, a revoked (shared) stream
 *   MODE_FENCE ISSUER_RMW no membarrier: streams start shared, both heavy
 *                         and light are seq_cst fences; kick_enqueued
 *                         (no fence: the RMW takes its place)
 *   MODE_FENCE ISSUER_FENCE  no membarrier, a plain store before the kick
 *                         (an issuer-placed marker) and slc__engine_kick's
 *                         fence
 * Mutants (each must fail):
 *   BUG_NO_HEAVY          membarrier mode, the thread parks with no barrier
 *   BUG_FENCE_OWNED       the thread's heavy side a seq_cst fence only
 *                         while the stream is owned (the issuer's store
 *                         plain, its light side a compiler barrier): what
 *                         an owned stream without membarrier, or a thread
 *                         that picked its mode before the ledger did
 *                         (slc_engine_enable's ldg__asym_init), would be
 *   BUG_NO_HEAVY ISSUER_FENCE  a fence on the issuer's side alone: the
 *                         thread's store of parked may still sit in its
 *                         buffer while its final poll reads the mark
 */

bit parked;              /* w->parked */
byte gen;                /* w->gen */
byte otail;              /* the stream's mark (otail, or tail when shared) */
bit seen;                /* ghost: the engine thread saw the work */
bit issued;              /* ghost: the issuer returned */

/* Store buffers: the engine's (parked), the issuer's (otail). */
bit be_full; bit be_v;
bit bi_full; byte bi_v;

#define DRAIN_E atomic { if :: be_full -> parked = be_v; be_full = 0 :: else fi }
#define DRAIN_I atomic { if :: bi_full -> otail = bi_v; bi_full = 0 :: else fi }
#define LOAD_PARKED (be_full -> be_v : parked)   /* the engine's own view */
#define LOAD_OTAIL_I (bi_full -> bi_v : otail)   /* the issuer's own view */

proctype Flusher() {
end:
  do
  :: atomic { be_full -> parked = be_v; be_full = 0 }
  :: atomic { bi_full -> otail = bi_v; bi_full = 0 }
  od
}

proctype Engine() {
  byte g;
  g = gen;
  atomic { be_full = 1; be_v = 1 }          /* store parked = 1 (relaxed) */
#if defined(BUG_NO_HEAVY)
  skip;
#elif defined(MODE_FENCE) || defined(BUG_FENCE_OWNED)
  DRAIN_E;                                  /* seq_cst fence */
#else
  atomic { DRAIN_E; DRAIN_I }               /* membarrier */
#endif
  if
  :: otail != 0 -> seen = 1                 /* final poll: uncovered */
  :: else ->
     atomic { gen != g }                    /* futex wait until the bump */
     assert(otail != 0);                    /* the waker drained first */
     seen = 1
  fi;
  atomic { be_full = 1; be_v = 0 }          /* store parked = 0 */
}

proctype Issuer() {
#ifdef ISSUER_RMW
  atomic { !bi_full -> otail = 1 }          /* seq_cst RMW of tail */
#else
  atomic { bi_full = 1; bi_v = 1 }          /* owned: store otail */
#endif
#if defined(ISSUER_FENCE)
  DRAIN_I;                                  /* slc__engine_kick's fence */
#else
  skip;                                     /* ldg__asym_light: compiler */
#endif
  if
  :: parked == 1 ->                         /* load parked (seq_cst) */
     atomic { !bi_full -> gen = gen + 1 }   /* bump (acq_rel RMW), wake */
  :: else -> skip
  fi;
  issued = 1
}

init {
  atomic { run Flusher(); run Engine(); run Issuer() }
  timeout -> assert(issued && seen)
}
