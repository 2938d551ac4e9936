/*
 * The reservations' inline paths (reserve.c argues them): included by
 * ring.c, whose ldg__ring_enqueue inlines them, and by the files of the
 * slow paths they call. Internal: not installed.
 */
#ifndef STREAMLEDGER_RESERVE_H
#define STREAMLEDGER_RESERVE_H

#include "ledger/atomics.h"
#include "ledger/internal.h"

/* This thread's mask on s->fast_gen (ring.c defines it: see there). */
extern _Thread_local uint64_t ldg__fast_mask;

/* The slow paths of ldg__ring_reserve (reserve.c). */
void ldg__reserve_past(ldg_stream *s, ldg_seq seq, ldg_seq grow, uint64_t gen);
ldg_seq ldg__ring_reserve_cas(ldg_stream *s, uint64_t gen);

/* ldg__ring_extend from outside a read-side section: a reservation that
 * found no headroom (extending reads segments that may be retired). */
static inline int ldg__ring_extend_outside(ldg_stream *s, ldg_seq end) {
  bool v = ldg__ring_read_lock(s); /* segment.c, HOT REUSE */
  int rc = ldg__ring_extend(s, end);
  ldg__ring_read_unlock(s, v);
  return rc;
}

/* Reserves the next seq of s (RESERVING ON A SHARED STREAM): a ticket
 * holder adds first while fast_gen is armed; else the CAS path. Takes no
 * read lock on the common path. */
static inline int ldg__ring_reserve(ldg_stream *s, ldg_seq *seq) {
  /* fast_gen: seq_cst, a step of S: an odd value read comes after the ARM
   * that wrote it (so after that ARM's look at tail, past the first
   * segment), an even one is what the CAS path's ARM CASes from, loaded
   * before its look at tail. On the read-mostly line (a plain load on
   * x86). */
  uint64_t gen = ldg__load_seq_cst(&s->fast_gen);
  ldg_seq got;
  if (__builtin_expect(gen & ldg__fast_mask, 1)) {
    /* grow_at: acquire pairs with its raises and its claim (segment.c,
     * ldg__raise_grow_at, ldg__ring_grow_early), each made after tail_end
     * was at least the value stored + LDG__FAST_R (once the first segment
     * is outgrown, as it is when armed): a seq below grow is outside the
     * zone (fact (3)). The one load of the enqueuers' line. */
    ldg_seq grow = ldg__load_acquire(&s->grow_at);
    LDG__HOOK(LDG__HOOK_RESERVE_CHECKED, s);
    /* seq_cst: a step of S, with no look at tail first; and, as the CAS,
     * the destroy handshake reads destroyed after it (and cuda/engine.c's
     * slc__engine_kick_enqueued orders its wake-up by it). */
    got = ldg__fetch_add_seq_cst(&s->tail, 1) + 1;
    /* Past the grow point, in the zone, or past the claim: the one
     * compare covers all three. */
    if (__builtin_expect(got >= grow, 0)) ldg__reserve_past(s, got, grow, gen);
  } else {
    got = ldg__ring_reserve_cas(s, gen);
    if (got == 0) return LDG_ENOMEM;
  }
  *seq = got;
  return LDG_OK;
}

/* Reserves the next seq of a single-issuer stream (SINGLE-ISSUER STREAMS):
 * nobody else writes tail, so a load and a store do what the CAS did. */
static inline int ldg__ring_reserve_single(ldg_stream *s, ldg_seq *seq) {
  for (;;) {
    /* tail: relaxed, the value this issuer stored last (or one a previous
     * issuer stored before handing s over: ordered by the caller's
     * happens-before). tail_end: acquire, as in ldg__ring_reserve_cas. */
    ldg_seq t = ldg__load_relaxed(&s->tail);
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    if (t + 1 < end) {
      /* Release: pairs with the acquire load in ldg_mark, as the CAS's
       * release half does (after our acquire of tail_end). The destroy
       * handshake's order: ldg__ring_enqueue's ldg__asym_light. */
      ldg__store_release(&s->tail, t + 1);
      *seq = t + 1;
      return LDG_OK;
    }
    int rc = ldg__ring_extend_outside(s, end);
    if (rc != LDG_OK) return rc;
  }
}

#endif /* STREAMLEDGER_RESERVE_H */
