/*
 * The owned streams' inline paths (owned.c argues them): included by
 * ring.c, whose ldg__ring_enqueue inlines them, and by owned.c. Internal:
 * not installed.
 */
#ifndef STREAMLEDGER_OWNED_H
#define STREAMLEDGER_OWNED_H

#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/reserve.h"

/* Tokens: unique per thread, never reused (a thread's TLS address could be
 * reused by a later thread, which would then pass for the owner). A
 * thread without one yet holds LDG__OWN_NO_TOKEN, which no owner word ever
 * holds, so the owner's compare needs no test of its own. */
#define LDG__OWN_NO_TOKEN ((uint64_t)3)
_Static_assert(LDG__OWN_NO_TOKEN > LDG__OWN_SHARED &&
                   LDG__OWN_NO_TOKEN < LDG__OWN_FIRST_TOKEN,
               "the no-token value is neither a state nor a token");

/* Not the owner any more (or never was): nothing reserved, take the shared
 * path. And: this thread just claimed s, take the owned path. Internal
 * results, apart from LDG_OK and LDG_ENOMEM. */
enum { LDG__OWN_LOST = 1, LDG__OWN_MINE = 2, LDG__OWN_KEPT = 3 };

/* The slow paths of the dispatch (owned.c). */
int ldg__own_contested(ldg_stream *s, ldg_seq q, ldg_seq *seq);
int ldg__own_slow(ldg_stream *s, uint64_t o, ldg_seq *seq);

/* The owner's reservation (OWNED STREAMS): R1 was the caller's load of
 * s->owner, which found tok. No locked instruction: the owner alone writes
 * otail. LDG_OK (a one-publisher seq), LDG__OWN_KEPT (the seq whose R2
 * saw a revocation: published both ways; for both the destroy handshake
 * is asymmetric), LDG__OWN_LOST (revoked before the store: nothing
 * reserved) or LDG_ENOMEM. */
static inline int ldg__ring_reserve_owned(ldg_stream *s, uint64_t tok,
                                          ldg_seq *seq) {
  for (;;) {
    /* grow_at: acquire, as in ldg__ring_reserve; tail_end: acquire, as
     * in ldg__ring_reserve_cas. otail: relaxed, our own last store. */
    ldg_seq grow = ldg__load_acquire(&s->grow_at);
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    ldg_seq t = ldg__load_relaxed(&s->otail);
    if (__builtin_expect(t + 1 < end, 1)) {
      LDG__HOOK(LDG__HOOK_OWNED_CHECKED, s);
      /* Release: pairs with the acquire loads of the tail's readers
       * (ldg__tail_acquire) and of the revoker, as the CAS's release half
       * did. Then the light side of the revocation's (and the destroy's)
       * store->load handshake. */
      ldg__store_release(&s->otail, t + 1);
      /* ldg__asym_light's membarrier branch: s is owned only where
       * membarrier is in use, so no test of the mode is needed. */
      atomic_signal_fence(memory_order_seq_cst);
      LDG__HOOK(LDG__HOOK_OWNED_STORED, s);
      /* R2. Relaxed: the handshake's load (membarrier orders it); what a
       * revoker published is read through s->contest (acq_rel). */
      if (__builtin_expect(ldg__load_relaxed(&s->owner) != tok, 0))
        return ldg__own_contested(s, t + 1, seq);
      /* The grow point, as the shared path's (segment.c, GROWING AHEAD):
       * seq is ours and unresolved. */
      if (__builtin_expect(t + 1 >= grow, 0))
        ldg__ring_grow_early(s, t + 1, grow);
      *seq = t + 1;
      return LDG_OK;
    }
    int rc = ldg__ring_extend_outside(s, end);
    if (rc != LDG_OK) return rc;
    /* R1 again (acquire, as the caller's): a revocation may have begun
     * while we extended. */
    if (ldg__load_acquire(&s->owner) != tok) return LDG__OWN_LOST;
  }
}

/* Reserves the next seq of a default stream: the owner's way, or the
 * revocation's, or the shared path (OWNED STREAMS). *asym: whether the
 * destroy handshake is the asymmetric one (the seq was reserved by a
 * store of otail, not a seq_cst RMW of tail). *pub: how the seq is
 * published (LDG__PUB_*; OWNED STREAMS, "Publication"); the caller set it
 * to LDG__PUB_SLOT. */
static inline int ldg__ring_reserve_default(ldg_stream *s, ldg_seq *seq,
                                            bool *asym, int *pub) {
  for (;;) {
    /* R1. Acquire: pairs with the release store of SHARED (tail installed:
     * the shared path's load of tail then reads it or later) and with the
     * claim. */
    uint64_t o = ldg__load_acquire(&s->owner);
    if (__builtin_expect(o == ldg__own_tok, 1)) {
      int rc = ldg__ring_reserve_owned(s, o, seq);
      if (__builtin_expect(rc == LDG_OK, 1)) {
        *asym = true;
        *pub = LDG__PUB_STORE;
        return LDG_OK;
      }
      if (rc == LDG__OWN_KEPT) {
        *asym = true;
        *pub = LDG__PUB_BOTH;
        return LDG_OK;
      }
      if (rc != LDG__OWN_LOST) return rc; /* LDG_ENOMEM */
      /* Revoked while we extended the ring: tail may not be installed
       * yet, so not straight to the shared path; the next pass helps. */
      continue;
    }
    if (o == LDG__OWN_SHARED) break;
    int rc = ldg__own_slow(s, o, seq);
    if (rc == LDG__OWN_MINE) continue; /* claimed: the owner's way */
    if (rc == LDG_OK) *pub = LDG__PUB_BOTH; /* the contested seq */
    if (rc != LDG__OWN_LOST) return rc; /* LDG_OK (seq_cst), ENOMEM */
    break; /* LOST: tail is installed */
  }
  return ldg__ring_reserve(s, seq);
}

#endif /* STREAMLEDGER_OWNED_H */
