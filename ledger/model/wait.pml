/*
 * wait.pml: transitive release through waits (ledger/release.c, TRANSITIVE
 * RELEASE), two streams, model-checked with Spin. The ring code is in
 * ring_common.pml (built here with WAITS: ldg__engine's frames), which lists
 * the C function behind each inline and what the model abstracts.
 *
 * Streams: a = 0, b = 1. Processes (the C calls each one makes):
 *   Waiter(a, b, e_op, e_wait)
 *                         ldg_enqueue(a) [e_op], then ldg_add_wait(b, a,
 *                         ldg_mark(a)) [e_wait] -> ldg__ring_enqueue on b;
 *                         if a release of b overtakes it, the enqueuer fires
 *                         the wait itself: ldg__engine(a, u, OWNED); with
 *                         a == b the wait has target NULL and fires nothing
 *   Enqueuer(s, e0, n)    n x ldg_enqueue(s) (as in ring.pml)
 *   Releaser(s, n)        n x ldg_release(s, ldg_mark(s)) -> ldg__engine:
 *                         a wait met in b's interval becomes a frame (the
 *                         wait's slot, pinned: taken, unresolved), the walk
 *                         claims (released_a, u] and walks a, then pops the
 *                         frame, resolves the wait's slot, resumes b
 *   Destroyer(s)          ldg_stream_destroy(s) -> ldg__destroy
 *   init                  ldg__ring_init for a and b, starts a
 *                         configuration, waits for it, checks; releases b
 *                         to its mark and checks that a was released up to
 *                         the wait's a_upto (transitively); releases a, checks.
 *
 * Configurations (spin -DWCFG_...; SZ = 2): see below, at their #if.
 *
 * Assertions: those of ring.pml, per stream, and: a wait fires at most
 * once; its frame's slot (and segment) is never retired or freed while the
 * walk uses it outside a read-side section (TOUCH_PINNED); after b is
 * released past an accepted wait on a live a, a is released up to the
 * wait's a_upto and every accepted entry of a up to there was released
 * exactly once; cycles of waits terminate (no invalid end state).
 * Mutants: BUG_FRAME_EARLY_RESOLVE, BUG_POP_ANY_SEG, BUG_FRAME_KEEP_SHORT
 * (see ring.pml). Not modelled: stream references, so no stream is
 * finalised inside a walk (FINALIZE frames).
 */

#define NS 2
#define SZ 2
#define WAITS
#define SA 0
#define SB 1

/*
 * WCFG_T (default): b's releaser meets the wait in b's interval (frame), or
 *   overtakes its enqueue (the enqueuer fires it); a grows while the wait's
 *   walk runs. Waiter(1, 2): op 1 on a, wait 2 on b. Enqueuer(a, 3, 2): ops
 *   3, 4 on a. Releaser(b, 1).
 * WCFG_G: the wait's segment of b has a successor, so only the frame's pin
 *   keeps it: Waiter(1, 2), Enqueuer(b, 3, 2): ops 3, 4 on b (b grows),
 *   Releaser(b, 1).
 * WCFG_C: a cycle of waits: Waiter(a, b, 1, 2) waits b->a, Waiter(b, a, 3, 4)
 *   waits a->b (op 3 on b, wait 4 on a), Releaser(b, 1).
 * WCFG_D: the waited stream is destroyed meanwhile: Waiter(1, 2),
 *   Destroyer(a), Releaser(b, 1).
 * WCFG_S: a wait of b on itself (target NULL, fires nothing), among ops:
 *   Waiter(b, b, 1, 2): op 1 on b, wait 2 b->b; Enqueuer(b, 3, 1);
 *   Releaser(b, 1).
 */
#if defined(WCFG_G)
#define NENT 4
#define NSEG 4
#elif defined(WCFG_C)
#define NENT 4
#define NSEG 2
#elif defined(WCFG_D)
#define NENT 2
#define NSEG 2
#elif defined(WCFG_S)
#define NENT 3
#define NSEG 4
#else
#ifndef WCFG_T
#define WCFG_T
#endif
#define NENT 4
#define NSEG 5
#endif

#include "ring_common.pml"

/* ldg_enqueue(sa, e_op); ldg_add_wait(sb, sa, ldg_mark(sa)) as e_wait.
 * (A wait of a stream on itself has target NULL: etarget NIL.) */
proctype Waiter(byte sa; byte sb; byte e_op; byte e_wait) {
  RING_LOCALS;
  enqueue(sa, e_op);
  if                                  /* ldg_add_wait: b destroyed? (acquire) */
  :: atomic { destroyed[sb] -> eres[e_wait] = R_REFUSED }
  :: else ->
     d_step {                         /* a_upto = ldg_mark(a) (acquire load tail) */
       eupto[e_wait] = tail[sa];
       etarget[e_wait] = (sa == sb -> NIL : sa)
     }
     enqueue(sb, e_wait)
  fi
}

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

/* After b was released to its mark, at a quiescent moment: an accepted,
 * fired wait on a live a released a up to its a_upto. */
inline check_wait(ew) {
  d_step {
    assert(eres[ew] != R_OK || eseq[ew] > released[estream[ew]] || rel[ew] == 1);
    assert(eres[ew] != R_OK || rel[ew] == 0 || etarget[ew] == NIL ||
           destroyed[etarget[ew]] || released[etarget[ew]] >= eupto[ew])
  }
}

init {
  RING_LOCALS;
  d_step {
    rc_i = 0;
    do
    :: rc_i < NSEG -> snext[rc_i] = NIL; rc_i++
    :: else -> break
    od;
    rc_i = 0;
    stream_init(SA, 0);
    stream_init(SB, 1);
    pool_seed(2);
    nalloc = 2 + POOL_SEED;
    /* entries: kind, stream; ops have an ext (ldg__ext_new) */
#if defined(WCFG_T)
    ekind[1] = K_OP;   estream[1] = SA;
    ekind[2] = K_WAIT; estream[2] = SB;
    ekind[3] = K_OP;   estream[3] = SA;
    ekind[4] = K_OP;   estream[4] = SA;
#elif defined(WCFG_G)
    ekind[1] = K_OP;   estream[1] = SA;
    ekind[2] = K_WAIT; estream[2] = SB;
    ekind[3] = K_OP;   estream[3] = SB;
    ekind[4] = K_OP;   estream[4] = SB;
#elif defined(WCFG_C)
    ekind[1] = K_OP;   estream[1] = SA;
    ekind[2] = K_WAIT; estream[2] = SB;
    ekind[3] = K_OP;   estream[3] = SB;
    ekind[4] = K_WAIT; estream[4] = SA;
#elif defined(WCFG_D)
    ekind[1] = K_OP;   estream[1] = SA;
    ekind[2] = K_WAIT; estream[2] = SB;
#elif defined(WCFG_S)
    ekind[1] = K_OP;   estream[1] = SB;
    ekind[2] = K_WAIT; estream[2] = SB;
    ekind[3] = K_OP;   estream[3] = SB;
#endif
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       if
       :: ekind[rc_i] == K_OP -> xstate[rc_i] = SEG_LIVE
       :: else
       fi;
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
  atomic {
#if defined(WCFG_T)
    run Waiter(SA, SB, 1, 2); run Enqueuer(SA, 3, 2); run Releaser(SB, 1)
#elif defined(WCFG_G)
    run Waiter(SA, SB, 1, 2); run Enqueuer(SB, 3, 2); run Releaser(SB, 1)
#elif defined(WCFG_C)
    run Waiter(SA, SB, 1, 2); run Waiter(SB, SA, 3, 4); run Releaser(SB, 1)
#elif defined(WCFG_D)
    run Waiter(SA, SB, 1, 2); run Destroyer(SA); run Releaser(SB, 1)
#elif defined(WCFG_S)
    run Waiter(SB, SB, 1, 2); run Enqueuer(SB, 3, 1); run Releaser(SB, 1)
#endif
  }
  (_nr_pr == 1);
  check_head(SA);
  check_head(SB);
  check_entries();
  /* Sync b: its waits fire; then a is released at least to their a_upto. */
  release_to_mark(SB);
  check_entries();
  check_wait(2);
#if defined(WCFG_C)
  check_wait(4);
#endif
  release_to_mark(SA);
  release_to_mark(SB);   /* (a's waits on b, if any, may have raised b's mark) */
  check_entries();
  check_all_released();
  check_ring(SA);
  check_ring(SB);
  check_pool()
}
