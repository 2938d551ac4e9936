/*
 * The per-stream ring, part 2 of 7: reserving a seq, on a single-issuer
 * stream (a store) and on a shared stream (add first while armed, else
 * the CAS path). The inline paths that ldg__ring_enqueue (ring.c) runs on
 * every op are in reserve.h; the tickets and the slow paths are here.
 * PUBLICATION, PUBLICATION ON A STREAM WITH ONE PUBLISHER and DESTROY are
 * ring.c's; OWNED STREAMS is owned.c's.
 *
 * SINGLE-ISSUER STREAMS (LDG_STREAM_SINGLE_ISSUER, opt-in)
 *   The caller promises that the calls recording on s (enqueues, and waits
 *   of s on another stream) never overlap and each happens-before the next
 *   (ledger.h). Then the issuer is the only writer of tail and has seen its
 *   own last write, so the reservation is a load of tail, the same check
 *   against tail_end, and a release store of t + 1 (pairing with ldg_mark's
 *   acquire as the CAS's release half did): no locked read-modify-write.
 *   The publication, too, is a store (PUBLICATION ON A STREAM WITH ONE
 *   PUBLISHER, ring.c); releases, marks and queries still come from any
 *   thread.
 *   What the CAS also gave was the destroy handshake's store->load order
 *   (DESTROY, ring.c: the enqueuer's seq_cst RMW of tail before its seq_cst
 *   load of destroyed). A store, even seq_cst, gives that only with a full
 *   fence after it, which costs what the CAS did. So the handshake becomes
 *   asymmetric (rcu.h, ldg__asym_*): the enqueuer orders its store of tail
 *   before its load of destroyed with a compiler barrier only, and the
 *   destroyer (ldg__mark_destroyed, for single-issuer streams), between its
 *   seq_cst CAS of destroyed and its seq_cst load of tail, calls
 *   membarrier, which runs a full barrier on every thread of the process
 *   that is running (a thread switched out has passed one). That barrier
 *   falls either after the enqueuer's store of tail — the destroyer's load
 *   then sees the seq, and its walk takes the slot or asks as above —
 *   or before the enqueuer's load of destroyed, which then sees the flag,
 *   and the enqueuer retracts. The two outcomes of DESTROY, and nothing
 *   else. Without membarrier both sides use seq_cst fences (C11's form of
 *   the same argument). Model: ledger/model/destroy_sb.pml, SB_SINGLE
 *   (membarrier as "every store buffer drains"; the mutant
 *   BUG_SB_NO_MEMBARRIER leaves an accepted entry unreleased).
 *   A broken promise (two issuers at once) is undefined: both may store
 *   the same t + 1 and fill one slot. Builds without NDEBUG catch two
 *   calls that overlap: each recording call exchanges s->issuing to 1 on
 *   entry and stores 0 before it returns or runs a keep, and aborts if it
 *   found 1.
 *
 * RESERVING ON A SHARED STREAM: ADD FIRST WHILE ARMED (faa12)
 *   The CAS loop costs a failed CAS per op and more under contention (issue
 *   11: 0.71 per op at 16 threads on the H200). A fetch_add never fails,
 *   but it checks nothing, and a check before it (load tail, compare with
 *   tail_end, then add: the design until faa12) takes the contended line
 *   twice per op. Runs 11c-11f (bench/RESULTS.md) measured what closes the
 *   shared row: an add made without first loading tail, with tail alone on
 *   its line. So a ticket holder adds first and looks after, and a word on
 *   the read-mostly line says when that is allowed:
 *   - Tickets. LDG__FAST_R = R (32) process-wide tickets, bits of
 *     ldg__fast_tickets. A thread takes one at a reservation by the CAS
 *     path if one is free (ldg__fast_ticket_claim: a CAS on the word, no
 *     lock, no wait) and gives it back when it exits (a pthread key's
 *     destructor). Only a holder adds. A thread adds at most once per
 *     ldg_enqueue and holds its ticket inside it, so the adds of one ticket
 *     are ordered by happens-before (one thread's, or given back with a
 *     release and taken with an acq_rel CAS): at most R adders at a time,
 *     and two adds of one ticket are never concurrent.
 *   - s->fast_gen, a generation: odd = armed, even = disarmed; starts at 0.
 *     Every write is a seq_cst CAS that adds 1 or 2 to the value it read,
 *     so values are never repeated (no ABA: a CAS from a value read
 *     earlier succeeds only if nothing was written since).
 *   - The zone: the last R seqs below tail_end, [tail_end - R, tail_end).
 *     A seq "lands in the zone" if it is at least tail_end - R when handed
 *     out.
 *   The reservation of a holder (ldg__ring_reserve):
 *     v = load fast_gen (seq_cst). Odd: g = load grow_at (acquire); seq =
 *     fetch_add(tail, 1) + 1 (seq_cst), with no check of tail; seq < g:
 *     done (the common path: one load of the read-mostly line, one of the
 *     enqueuers' line, the add). Else (ldg__reserve_past): E' = load
 *     tail_end (seq_cst); seq >= E' would break the invariant (abort); seq
 *     >= E' - R: DISARM, i.e. CAS fast_gen from w to (w | 1) + 1 starting
 *     at w = v, retrying from what the CAS read until it succeeds: an odd
 *     value goes to the next even one, an even one (someone disarmed
 *     first) two on, so the lander's own write always lands; then the
 *     early growth if seq is the grow point (segment.c, GROWING AHEAD).
 *     Even, or no ticket: the CAS path (ldg__ring_reserve_cas, unchanged):
 *     t = load tail, E = load tail_end (acquire), r = 0 while t + 1 <
 *     F = LDG__FIRST_END (the first segment) and R after; reserve t + 1 by
 *     a seq_cst CAS only if t + 1 + r < E, else extend the ring (only this
 *     path extends at the end; LDG_ENOMEM there reserves nothing). Then
 *     ARM: a holder whose v was even and whose reservation had r = R CASes
 *     fast_gen from v to v + 1 (seq_cst). It fails if fast_gen changed
 *     since v, which is the point: the headroom it saw must be newer than
 *     every disarm.
 *   The order S: the seq_cst total order of every access to tail (the
 *   adds, the CASes) and to fast_gen, of the raises of tail_end (seq_cst
 *   CAS, ldg__raise_tail_end) and of the seq_cst reload E'. It is
 *   consistent with happens-before and with each word's modification
 *   order; tail and tail_end only grow. Write tail_end(X) for tail_end at
 *   step X of S.
 *   Facts.
 *   (1) The CAS path hands out y = t + 1 < tail_end, and for y >= F with
 *       y + R < tail_end: a CAS-path seq past the first segment never lands
 *       in the zone (E read before the CAS, tail_end only grows).
 *   (2) Every add follows in S an ARM (its load of fast_gen read an odd
 *       value, written by an ARM CAS, which precedes the load in S). That
 *       ARM's CAS on tail read t >= F - 1 with t + 1 + R < E, and E was a
 *       raise that happens before the ARM: so tail_end > F + R at every
 *       add, past the first extension (the first segment is CAS-path only,
 *       as before, without the old argument about its raise).
 *   (3) grow_at <= tail_end - R whenever tail_end > F: every write of
 *       grow_at follows, in its writer, a tail_end at least R above it (a
 *       raise to a segment's grow point g->base + (g->size - R) / 2 <=
 *       g's end - R, made after tail_end reached g's end, since growth
 *       segments have at least 64 = 2R slots; the grow-ahead claim stores
 *       g's end - R, not g's end, with tail_end at g's end), and its
 *       initial value F <= tail_end - R by (2) once anyone adds. The add
 *       happens after the grow_at its adder read (acquire), so an add's g
 *       <= tail_end(add) - R.
 *   (4) So an add's seq below its g is below tail_end(add) - R: outside
 *       the zone, below tail_end. A seq at or past g takes the slow path;
 *       its E' is read after the add, so E' >= tail_end(add).
 *   Invariant: every seq handed out is below tail_end when it is handed
 *   out. By (1) for the CAS path; suppose an add a hands out x >= E =
 *   tail_end(a). The R + 1 seqs E - R .. E are at most x, so handed out at
 *   or before a, each at a step where tail_end <= E: each landed in the
 *   zone, and each is >= F (E > F + R by (2)), so by (1) none is a CAS
 *   seq: R + 1 adds, at most R tickets, so one ticket made two of them,
 *   y1 < y2, y1's add before y2's in happens-before. y1 >= E - R >=
 *   tail_end(y1) - R >= its g (3): slow path, and E'1, read between the
 *   two adds, is <= tail_end(y2) <= E, so y1 >= E'1 - R: the adder of y1
 *   DISARMed, its CAS D writing an even value, before returning; then the
 *   add of y2 loaded fast_gen odd: written by an ARM A after D in fast_gen's
 *   modification order (the load comes after D, and reads D's value or a
 *   later one, odd). A's CAS read a value at or after D's (values are not
 *   repeated), the v its thread loaded: that load followed D in S, so its
 *   CAS on tail, later in that thread, read t >= y1 >= E - R, and its E
 *   was raised before A, before the add of y2: E <= tail_end(y2) <= E.
 *   Then t + 1 + R < E is false: A did not ARM. Contradiction: no seq is
 *   handed out at or past tail_end, by either path. So: no hole, no seq
 *   without a segment; ldg_mark, the release walk and the segments'
 *   retirement are unchanged.
 *   Why each piece (the model's mutants, below):
 *   - The lander's DISARM is a CAS that always writes. A plain store of
 *     v + 1 could write back a value fast_gen had held before (another
 *     lander disarmed, a holder re-armed): an ARM that loaded that even
 *     value before the re-arm, with headroom since used up, then succeeds
 *     (ABA). A lander that finds fast_gen even and writes nothing lets an
 *     ARM that loaded that value before the landing (its headroom older
 *     than the landing) succeed after it: with the lander's ticket that
 *     makes R + 1 adds in the zone. Hence the generation, not a flag, and
 *     (w | 1) + 1.
 *   - ARM loads fast_gen before its look at tail (the CAS path), not
 *     after: the argument needs the look to follow every disarm the ARM
 *     CAS can succeed over. (Loaded after the look, a disarm between the
 *     look and the load is missed: the ARM succeeds on stale headroom.)
 *   - ARM only with r = R: in the first segment the CAS path leaves no
 *     zone, and grow_at is F = tail_end there, so an add would pass the
 *     end without taking the slow path.
 *   - The claim at g's end - R: at g's end, a seq in the zone of g below
 *     the claim would take the common path and never disarm.
 *   At most R seqs land in the zone per arming (one per ticket: a lander
 *   returns only disarmed, and re-arms need fresh headroom), the others
 *   take the CAS path until one of them re-arms past the edge, which is
 *   once per growth at most: the grow-ahead claimer links the next segment
 *   while the seqs are half way to the zone, and then no add reaches it
 *   (grow_at moves to the new segment's grow point before the zone is
 *   reached). Only a stalled or failed growth disarms. Out of memory: the
 *   CAS path returns LDG_ENOMEM with nothing reserved, the stream stays
 *   disarmed (no ARM without a reservation), and no seq was handed out at
 *   or past the end.
 *   Progress: the DISARM loop retries only when another thread wrote
 *   fast_gen (lock-free), ARM is one CAS, nobody waits for anybody: the
 *   promise of ledger.h holds.
 *   Seqs stay dense (every add and CAS hands out tail + 1). The destroy
 *   handshake is unchanged: the add is a seq_cst RMW of tail like the
 *   CAS, before the seq_cst load of destroyed (and cuda/engine.c's
 *   slc__engine_kick_enqueued orders its wake-up by that RMW).
 *   Single-issuer and owned streams keep their own reservations (an owned
 *   stream reaches this one only once SHARED, after the installer's CAS
 *   of tail: every seq of (2)'s ARM is past the owner's seqs).
 *   Cost: the common add-first path loads fast_gen (the read-mostly line,
 *   which every enqueue reads anyway) and grow_at (the line after tail's),
 *   and adds: tail's line is taken once per op, and nothing else on it is
 *   read or written by the enqueuers, so the adds of other threads are the
 *   only traffic it sees. Single-issuer streams now touch two lines (the
 *   store of tail, the load of tail_end), owned streams one (otail with
 *   tail_end).
 *   Model: ledger/model/ring.pml, CFG_FFA (one ticket, add-first with
 *   arming and the grow-ahead claim at end - R) and CFG_FF2 (two tickets:
 *   lander and re-armer racing), asserting the invariant at every
 *   reservation; mutants BUG_NO_DISARM, BUG_ARM_NO_CHECK (arming from a
 *   first-segment reservation), BUG_CLAIM_AT_END and BUG_ARM_GEN_LATE fail
 *   (ledger/model/runs.txt says which configuration catches which).
 *   BUG_DISARM_STORE and BUG_DISARM_READ need a third holder (a stale
 *   armer beside two landers), beyond ring.pml's bounds: ledger/model/
 *   arm.pml models the arming alone (four words and a segment end), where
 *   three holders fit, and both fail there, as do the four above; the
 *   tests' rearm-race stages that race deterministically and kills their
 *   C mutants. The old check-then-add fast path's configurations (CFG_FF,
 *   FFR, FFD, FFF) and mutants stay, as the model of the design this
 *   replaced. Tests: tests/torture/reserve_test.c (edge-parked,
 *   edge-enomem, rearm-race).
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/reserve.h"

/* The fast path's tickets (RESERVING ON A SHARED STREAM): bit i of
 * ldg__fast_tickets is taken by the thread holding ticket i. */
static _Atomic uint32_t ldg__fast_tickets;
_Static_assert(LDG__FAST_R == 32, "one bit of ldg__fast_tickets per ticket");
enum {
  LDG__TICKET_UNTRIED,
  LDG__TICKET_HELD,
  LDG__TICKET_NONE,
  LDG__TICKET_GONE
};
static _Thread_local uint8_t ldg__ticket_state; /* LDG__TICKET_* */
static _Thread_local uint8_t ldg__ticket_bit;
static pthread_key_t ldg__ticket_key;
/* The key's making, without waiting for another maker (ldg_enqueue takes no
 * lock: ledger.h): 0 none, 1 being made, 2 made, 3 failed. */
enum { LDG__KEY_NONE, LDG__KEY_MAKING, LDG__KEY_MADE, LDG__KEY_FAILED };
static _Atomic int ldg__ticket_key_state;

static void ldg__ticket_give_back(void) {
  ldg__fast_mask = 0;
  /* Release: the next claimer of the bit (acq_rel CAS) sees this thread's
   * last add made: it is not pending any more. */
  ldg__fetch_and_release(&ldg__fast_tickets, ~(1u << ldg__ticket_bit));
}

static void ldg__ticket_exit(void *unused) {
  (void)unused;
  /* The thread exits: not inside ldg_enqueue, so no add in flight. A later
   * enqueue from another key's destructor takes the CAS path. */
  if (ldg__ticket_state == LDG__TICKET_HELD) ldg__ticket_give_back();
  ldg__ticket_state = LDG__TICKET_GONE;
}

/* Whether the key exists; makes it if nobody has begun to. A thread that
 * finds it being made goes on without a ticket (it tries again later). */
static bool ldg__ticket_key_ready(void) {
  /* Acquire: pairs with the maker's release store (the key is written). */
  int st = ldg__load_acquire(&ldg__ticket_key_state);
  if (st == LDG__KEY_NONE) {
    /* acq_rel: one maker; the failure's acquire reads the state as above. */
    if (!ldg__cas_acq_rel(&ldg__ticket_key_state, &st, LDG__KEY_MAKING))
      return st == LDG__KEY_MADE;
    st = pthread_key_create(&ldg__ticket_key, ldg__ticket_exit) == 0
             ? LDG__KEY_MADE
             : LDG__KEY_FAILED;
    /* Release: publishes ldg__ticket_key. */
    ldg__store_release(&ldg__ticket_key_state, st);
  }
  return st == LDG__KEY_MADE;
}

/* Takes a ticket for this thread if one is free (its next reservations take
 * the fast path). A thread without one tries again at its next reservation
 * by the CAS path. */
static void ldg__fast_ticket_claim(void) {
  if (ldg__ticket_state == LDG__TICKET_HELD ||
      ldg__ticket_state == LDG__TICKET_GONE)
    return;
  if (!ldg__ticket_key_ready()) return;
  /* Relaxed: the CAS checks it. */
  uint32_t cur = ldg__load_relaxed(&ldg__fast_tickets);
  while (cur != UINT32_MAX) {
    uint32_t bit = ~cur & (cur + 1); /* the lowest free one */
    /* acq_rel: pairs with ldg__ticket_give_back's release (see there). */
    if (ldg__cas_weak_acq_rel(&ldg__fast_tickets, &cur, cur | bit)) {
      ldg__ticket_bit = (uint8_t)__builtin_ctz(bit);
      /* Non-NULL, so that the destructor gives the ticket back. */
      if (pthread_setspecific(ldg__ticket_key, &ldg__ticket_state) != 0) {
        ldg__ticket_give_back();
        break;
      }
      ldg__ticket_state = LDG__TICKET_HELD;
      ldg__fast_mask = 1;
      return;
    }
  }
  ldg__ticket_state = LDG__TICKET_NONE;
}

void ldg__testing_fast_ticket(bool want) {
  if (!want) {
    if (ldg__ticket_state == LDG__TICKET_HELD) ldg__ticket_give_back();
    ldg__ticket_state = LDG__TICKET_GONE;
  } else if (ldg__ticket_state != LDG__TICKET_HELD) {
    ldg__ticket_state = LDG__TICKET_UNTRIED;
    ldg__fast_ticket_claim();
  }
}

bool ldg__testing_has_fast_ticket(void) {
  return ldg__ticket_state == LDG__TICKET_HELD;
}

/* DISARM (RESERVING ON A SHARED STREAM): a CAS of fast_gen from w (the
 * value the lander loaded, then what each failed CAS read) to (w | 1) + 1,
 * retried until it lands. */
static void ldg__disarm(ldg_stream *s, uint64_t w) {
  /* Seq_cst: a step of S, after the lander's add (the argument's D); a
   * failed CAS reads the current value (seq_cst too) and retries:
   * lock-free, it fails only when another thread wrote fast_gen. */
  while (!ldg__cas_seq_cst(&s->fast_gen, &w, (w | 1) + 1)) {
  }
}

void ldg__testing_disarm(ldg_stream *s, uint64_t loaded) {
  ldg__disarm(s, loaded);
}

/* An add-first seq at or past the grow_at its reservation read (GROWING
 * AHEAD, segment.c): the seq where the ring grows ahead, or one in the zone
 * (the last LDG__FAST_R seqs below tail_end: grow_at <= tail_end -
 * LDG__FAST_R, RESERVING ON A SHARED STREAM's fact (3)), or past a claim.
 * gen: the odd fast_gen the reservation loaded. Seq_cst reload of tail_end:
 * after the add in S (so E' >= tail_end at the add, the argument's E'),
 * and (its acquire half) the segment's publication with it. */
__attribute__((noinline)) void ldg__reserve_past(ldg_stream *s, ldg_seq seq,
                                                ldg_seq grow, uint64_t gen) {
  ldg_seq end = ldg__load_seq_cst(&s->tail_end);
  if (end <= seq) {
    fprintf(stderr,
            "streamledger: stream %llu: seq %llu handed out past tail_end "
            "(the reservation's invariant is broken)\n",
            (unsigned long long)s->id, (unsigned long long)seq);
    abort();
  }
  if (seq + LDG__FAST_R >= end) {
    /* In the zone: DISARM before returning. A CAS from what we last read
     * to (w | 1) + 1: odd to the next even, even (another lander was
     * first) two on, so that this lander's write always lands; a plain
     * store could write back a value fast_gen held before, and writing
     * nothing when it is even lets an ARM that loaded that even value
     * before our landing succeed after it (RESERVING ON A SHARED STREAM,
     * "Why each piece"). */
    ldg__disarm(s, gen);
    LDG__HOOK(LDG__HOOK_RESERVE_DISARMED, s);
  }
  ldg__ring_grow_early(s, seq, grow);
}

/* The CAS path (RESERVING ON A SHARED STREAM): a thread without a ticket
 * (it tries to take one here), a holder while the stream is disarmed, the
 * first segment. gen: the fast_gen this reservation loaded first (even
 * for a holder). Returns the seq, or 0 if the ring could not grow
 * (LDG_ENOMEM, nothing reserved, nothing armed). Takes no read lock unless
 * it grows the ring. */
__attribute__((noinline)) ldg_seq ldg__ring_reserve_cas(ldg_stream *s,
                                                        uint64_t gen) {
  if (__builtin_expect(ldg__ticket_state != LDG__TICKET_HELD, 0))
    ldg__fast_ticket_claim();
  for (;;) {
    /* tail: relaxed, the CAS below checks it (and with it the reserve's
     * choice, which depends on t only). tail_end: acquire pairs with the
     * seq_cst (release half) CAS in ldg__raise_tail_end, made after
     * tailseg reached the segment of every seq below end
     * (ldg__seg_of_reserved reads it); it reads a raise that happens
     * before our CAS, so it is at most tail_end at the CAS in S. */
    ldg_seq t = ldg__load_relaxed(&s->tail);
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    ldg_seq reserve = t + 1 < LDG__FIRST_END ? 0 : LDG__FAST_R;
    if (t + 1 + reserve < end) {
      /* seq_cst: a step of S (after our load of gen); the destroy
       * handshake reads destroyed after this (and cuda/engine.c's
       * slc__engine_kick_enqueued orders its wake-up by it, in place of a
       * fence). */
      if (ldg__cas_seq_cst(&s->tail, &t, t + 1)) {
        /* ARM: a holder whose reservation had the reserve (t + 1 +
         * LDG__FAST_R < end, past the first segment) and whose gen was
         * even. Seq_cst CAS from that gen, loaded before this look at
         * tail: it fails if any disarm (or arm) came since, so the
         * headroom seen is newer than every disarm it succeeds over
         * (the argument's A). */
        if (reserve != 0 && (gen & 1) == 0 &&
            ldg__ticket_state == LDG__TICKET_HELD) {
          LDG__HOOK(LDG__HOOK_RESERVE_ARMING, s);
          ldg__cas_seq_cst(&s->fast_gen, &gen, gen + 1);
        }
        /* The grow point (GROWING AHEAD, segment.c) for ticketless
         * threads and the holders' CAS-path seqs. Acquire, as in
         * ldg__ring_reserve: a grow point read is one whose segment is
         * linked and whose end tail_end has reached. */
        ldg_seq grow = ldg__load_acquire(&s->grow_at);
        if (__builtin_expect(t + 1 >= grow, 0))
          ldg__ring_grow_early(s, t + 1, grow);
        return t + 1;
      }
      LDG__HOOK(LDG__HOOK_RESERVE_RETRY, s);
      continue;
    }
    int rc = ldg__ring_extend_outside(s, end);
    if (rc != LDG_OK) return 0; /* LDG_ENOMEM, its only error */
  }
}
