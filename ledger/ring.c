/*
 * The per-stream ring, part 1 of 4: layout, and the enqueue protocol
 * (reserve, publish, overtake, the destroy handshake). A sequence-indexed
 * ring of entries, published and reclaimed under RCU, with atomic high-water
 * marks. The correctness argument is split with the code, one protocol per
 * file, each opening with its part:
 *   ring.c     layout, what each atomic publishes, publication, a release
 *              that overtakes an enqueue, destroy, enqueue without a
 *              read-side section (this file);
 *   segment.c  who may reclaim a slot and when: segments, growth, head
 *              advance and retirement;
 *   pool.c     the retired-segment pool;
 *   release.c  claims, taking chunks, the transitive release engine;
 *   summary.c  (not part of the ring's protocol: read-only on it) the
 *              queries' walk and the segment summaries they keep.
 * The Promela model (ledger/model/ring_common.pml) maps its inlines to the
 * C functions of these four files.
 *
 * LAYOUT
 *   Every operation or wait enqueued on a stream gets a sequence number (seq,
 *   from 1) and lives in the slot for that seq. Slots come in segments: a
 *   segment holds `size` consecutive seqs starting at `base`, and a stream's
 *   segments form a singly linked list, oldest first:
 *
 *     s->head -> [base 1, size 8] -> [base 9, size 64] -> ... <- s->tailseg
 *
 *   seq lives in the segment with base <= seq < base + size, at slots[seq -
 *   base]. One slot is one cache line. Two atomic high-water marks say where
 *   the stream stands:
 *     s->tail      the last seq handed out (ldg_mark);
 *     s->tail_end  seqs below it have a segment (the end of tailseg, raised
 *                  once tailseg points at that segment);
 *     s->released  every seq <= released is known complete: its entry has
 *                  been, or is being, released by the release that raised
 *                  the mark over it.
 *   Everything in (released, tail] is pending.
 *
 * WHAT EACH ATOMIC PUBLISHES
 *   s->tailseg  (seq_cst CAS / acquire or seq_cst load) a fully initialised
 *               segment; seq_cst where ldg__ring_advance_head checks that
 *               tailseg no longer names the segment it retires.
 *   g->next     (seq_cst CAS) the successor segment, initialised.
 *   s->tail_end (release store / acquire load) segments up to it are linked
 *               and tailseg reaches them.
 *   s->tail     (seq_cst CAS) a seq is reserved. It is taken only if its slot
 *               exists (t + 1 < tail_end), so reserving never fails after
 *               the fact and a refused enqueue leaves no hole. On a
 *               single-issuer stream, a release store (SINGLE-ISSUER
 *               STREAMS below).
 *   slot->state (acq_rel CAS EMPTY->FULL) the entry's keep, ids, ranges or
 *               wait are written and readable. Payload is immutable once FULL.
 *   s->released (acq_rel CAS) the releaser owns every seq it raised the mark
 *               over: intervals (old, new] of concurrent releases are
 *               disjoint, so each seq is claimed by exactly one release.
 *   g->resolved (seq_cst add) slots of the segment whose entry has been taken
 *               by its one owner; at g->size the segment is done.
 *   s->head     (seq_cst CAS) the oldest segment not retired.
 *   slot->state = EMPTY (relaxed store) by a slot's resolver, before the
 *               add to g->resolved that publishes it; g->dirty (relaxed
 *               store) by a retracting enqueuer, before its resolution.
 *   s->ops_released, s->waits_enqueued (release adds / acquire loads in
 *               ldg_pending_count) operations taken and waits recorded; each
 *               add follows the seq's reservation on tail, so a query that
 *               counts it also sees that seq in tail.
 *   Pool tops, the registry's unlink stack and a stream's life bits are
 *   argued in pool.c and registry.c. Each relaxed or acquire/release
 *   access in the code has a comment saying what it pairs with.
 *
 * PUBLICATION, AND A RELEASE THAT OVERTAKES AN ENQUEUE
 *   Enqueue: reserve seq (CAS tail), write the slot, CAS state EMPTY -> FULL.
 *   A release owning seq looks at the slot:
 *     FULL   - published: the release takes the entry. Nobody else touches a
 *              FULL slot's state, so no atomic read-modify-write is needed.
 *     EMPTY  - reserved but not yet published (the enqueuer is between its two
 *              CASes; a mark covering seq was read meanwhile). The release
 *              CASes EMPTY -> ABANDONED and moves on without waiting. The
 *              enqueuer's publishing CAS then fails, and the enqueuer, which
 *              still has the entry in hand, releases it itself (runs the keep,
 *              or fires the wait) before ldg_enqueue returns.
 *   The two CASes on one word decide: exactly one side takes the entry, and
 *   a stalled enqueuer never blocks a release.
 *
 * DESTROY
 *   ldg__destroy sets s->destroyed (seq_cst), then reads tail (seq_cst) and
 *   releases up to it. An enqueuer reads destroyed (seq_cst) after its
 *   reserving CAS (seq_cst). In the single order of seq_cst operations either
 *   the destroyer's read of tail comes after the reservation — the seq is in
 *   the destroyer's interval and is taken or abandoned as above — or the
 *   enqueuer's read of destroyed comes after the flag — the enqueuer retracts
 *   the slot (RETRACTED), counts it resolved and refuses with LDG_EDESTROYED,
 *   keeping its keep. (Both can happen: then a destroyer that finds EMPTY
 *   abandons it and the enqueuer still retracts; the seq is simply dropped.)
 *
 * SINGLE-ISSUER STREAMS (LDG_STREAM_SINGLE_ISSUER, opt-in)
 *   The caller promises that the calls recording on s (enqueues, and waits
 *   of s on another stream) never overlap and each happens-before the next
 *   (ledger.h). Then the issuer is the only writer of tail and has seen its
 *   own last write, so the reservation is a load of tail, the same check
 *   against tail_end, and a release store of t + 1 (pairing with ldg_mark's
 *   acquire as the CAS's release half did): no locked read-modify-write.
 *   Everything after the reservation — the slot, the publishing CAS, a
 *   release that overtakes it — is unchanged: releases, marks and queries
 *   still come from any thread.
 *   What the CAS also gave was the destroy handshake's store->load order
 *   (DESTROY above: the enqueuer's seq_cst RMW of tail before its seq_cst
 *   load of destroyed). A store, even seq_cst, gives that only with a full
 *   fence after it, which costs what the CAS did. So the handshake becomes
 *   asymmetric (rcu.h, ldg__asym_*): the enqueuer orders its store of tail
 *   before its load of destroyed with a compiler barrier only, and the
 *   destroyer (ldg__mark_destroyed, for single-issuer streams), between its
 *   seq_cst CAS of destroyed and its seq_cst load of tail, calls
 *   membarrier, which runs a full barrier on every thread of the process
 *   that is running (a thread switched out has passed one). That barrier
 *   falls either after the enqueuer's store of tail — the destroyer's load
 *   then sees the seq, and its walk takes or abandons the slot as above —
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
 * ENQUEUE WITHOUT A READ-SIDE SECTION
 *   The common enqueue takes no RCU read lock. It reserves seq against
 *   tail_end, touching no segment. From then on the slot of seq is
 *   unresolved until this enqueuer publishes it and a release takes it (or
 *   the enqueuer itself resolves it), so by the consequence that closes
 *   WHO MAY RECLAIM A SLOT (segment.c) the segment of seq and every later
 *   one stay allocated. It then loads tailseg,
 *   which is that segment or a later one (tail_end was raised only after
 *   tailseg reached the segment covering seq), so it may read it without
 *   RCU; if tailseg has already moved past seq's segment, the enqueuer finds
 *   it by walking from head under rcu_read_lock (head may be retired under
 *   it). Only extending the ring and resolving a slot (which may retire
 *   segments) enter a read-side section.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdio.h>
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

/* ---- Out-of-line payloads ------------------------------------------------------- */

static size_t ldg__ext_bytes(size_t words) {
  return sizeof(struct ldg__ext) + words * sizeof(uint64_t);
}

static struct ldg__ext *ldg__ext_new(ldg_ledger *l, size_t n_vec,
                                     size_t n_rng) {
  size_t bytes = ldg__ext_bytes(n_vec + 2 * n_rng);
  struct ldg__ext *x = ldg__malloc(bytes);
  if (x == NULL) return NULL;
  x->ledger = l;
  x->n_vec = n_vec;
  x->n_rng = n_rng;
  ldg__ledger_ref(l);
  ldg__fetch_add_relaxed(&l->bytes, bytes); /* a statistic */
  return x;
}

/* Frees x now: no reader can have seen it (it was never published). */
static void ldg__ext_free_now(struct ldg__ext *x) {
  if (x == NULL) return;
  ldg_ledger *l = x->ledger;
  /* Relaxed: a statistic. */
  ldg__fetch_sub_relaxed(&l->bytes, ldg__ext_bytes(x->n_vec + 2 * x->n_rng));
  ldg__free(x);
  ldg__ledger_unref(l);
}

void ldg__ext_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg__ext_free_now(
      (struct ldg__ext *)((char *)head - offsetof(struct ldg__ext, rcu)));
}

/* ---- Reserving a seq ------------------------------------------------------------- */


/* Reserves the next seq of s. Takes no read lock on the common path. */
static int ldg__ring_reserve(ldg_stream *s, ldg_seq *seq) {
  for (;;) {
    /* tail: relaxed, the CAS below checks it. tail_end: acquire pairs with
     * the release CAS in ldg__raise_tail_end, made after tailseg reached
     * the segment of every seq below end (ldg__seg_of_reserved reads it). */
    ldg_seq t = ldg__load_relaxed(&s->tail);
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    if (t + 1 < end) {
      /* seq_cst: the destroy handshake reads destroyed after this (and
       * cuda/engine.c's slc__engine_kick_enqueued orders its wake-up by
       * it, in place of a fence). */
      if (ldg__cas_seq_cst(&s->tail, &t, t + 1)) {
        *seq = t + 1;
        return LDG_OK;
      }
      LDG__HOOK(LDG__HOOK_RESERVE_RETRY, s);
      continue;
    }
    ldg__rcu_read_lock();
    int rc = ldg__ring_extend(s, end);
    ldg__rcu_read_unlock();
    if (rc != LDG_OK) return rc;
  }
}

/* Reserves the next seq of a single-issuer stream (SINGLE-ISSUER STREAMS):
 * nobody else writes tail, so a load and a store do what the CAS did. */
static int ldg__ring_reserve_single(ldg_stream *s, ldg_seq *seq) {
  for (;;) {
    /* tail: relaxed, the value this issuer stored last (or one a previous
     * issuer stored before handing s over: ordered by the caller's
     * happens-before). tail_end: acquire, as in ldg__ring_reserve. */
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
    ldg__rcu_read_lock();
    int rc = ldg__ring_extend(s, end);
    ldg__rcu_read_unlock();
    if (rc != LDG_OK) return rc;
  }
}

/* Builds without NDEBUG: catch two calls recording on one single-issuer
 * stream at once (the caller's promise broken). */
#ifndef NDEBUG
static void ldg__issuing_begin(ldg_stream *s) {
  if (!(s->flags & LDG_STREAM_SINGLE_ISSUER)) return;
  /* acq_rel: a check, not a synchronisation the protocol relies on. */
  if (ldg__exchange_acq_rel(&s->issuing, 1u) != 0) {
    fprintf(stderr,
            "streamledger: two calls record on single-issuer stream %llu "
            "at once (LDG_STREAM_SINGLE_ISSUER: the caller promised one "
            "at a time)\n",
            (unsigned long long)s->id);
    abort();
  }
}
static void ldg__issuing_end(ldg_stream *s) {
  /* Release: the next issuer's exchange sees this call done. */
  if (s->flags & LDG_STREAM_SINGLE_ISSUER)
    ldg__store_release(&s->issuing, 0u);
}
#else
#define ldg__issuing_begin(s) ((void)0)
#define ldg__issuing_end(s) ((void)0)
#endif

/* The segment of a seq this thread reserved and has not resolved: it and all
 * later segments are pinned (ENQUEUE WITHOUT A READ-SIDE SECTION). */
static struct ldg__seg *ldg__seg_of_reserved(ldg_stream *s, ldg_seq seq) {
  /* Acquire: pairs with the seq_cst CAS that swung tailseg (release half),
   * made after the segment's header was written; that swing
   * happens-before the tail_end we reserved against (see above), so the
   * tailseg read here covers seq or is later. head and next: as in
   * ldg__take_chunk. */
  struct ldg__seg *g = ldg__load_acquire(&s->tailseg);
  if (g->base <= seq) return g;
  ldg__rcu_read_lock();
  g = ldg__load_acquire(&s->head);
  while (g->base + g->size <= seq) g = ldg__load_acquire(&g->next);
  ldg__rcu_read_unlock();
  return g;
}

/* Counts one slot resolved by its enqueuer. */
static void ldg__resolve_one(ldg_stream *s, struct ldg__seg *g) {
  ldg__rcu_read_lock(); /* completing g may retire segments */
  ldg__seg_resolve(s, g, 1);
  ldg__rcu_read_unlock();
}

/* ---- Enqueue ------------------------------------------------------------------------- */

static void ldg__fill_slot(struct ldg__slot *slot, const struct ldg__entry *e,
                           struct ldg__ext *ext) {
  slot->kind = e->kind;
  if (e->kind == LDG__KIND_WAIT) {
    slot->aux = LDG__FRAME_FIRED;
    slot->u.wait.target = e->target;
    slot->u.wait.upto = e->upto;
    return;
  }
  slot->u.op.keep = e->keep;
  uint64_t *w;
  if (ext != NULL) {
    slot->aux = LDG__OP_EXT;
    slot->u.op.d.ext = ext;
    w = ext->w;
  } else {
    slot->aux = LDG__OP_INLINE;
    slot->u.op.d.in.n_vec = (uint32_t)e->n_vec;
    slot->u.op.d.in.n_rng = (uint32_t)e->n_rng;
    w = slot->u.op.d.in.w;
  }
  for (size_t i = 0; i < e->n_vec; i++) w[i] = e->vec_ids[i];
  for (size_t i = 0; i < e->n_rng; i++) {
    w[e->n_vec + 2 * i] = (uint64_t)e->ranges[i].addr;
    w[e->n_vec + 2 * i + 1] = (uint64_t)e->ranges[i].bytes;
  }
}


/* The enqueue, for both kinds. Always inlined into its two callers below,
 * each of which builds e on its own stack with a constant kind: the
 * compiler then keeps e's fields in registers and drops the other kind's
 * branches (bench/RESULTS.md, "Issue 11, sixth session: the one-thread
 * instruction budget"). */
static inline __attribute__((always_inline)) int ldg__enqueue_entry(
    ldg_stream *s, const struct ldg__entry *e, ldg_seq *seq_out) {
  /* Everything that can fail is done before a seq is reserved. */
  struct ldg__ext *ext = NULL;
  if (e->kind == LDG__KIND_OP) {
    /* The caller checked that the word count does not overflow. */
    if (e->n_vec + 2 * e->n_rng > LDG__INLINE_WORDS) {
      ext = ldg__ext_new(s->ledger, e->n_vec, e->n_rng);
      if (ext == NULL) return LDG_ENOMEM;
    }
  }
  /* An early refusal (acquire pairs with the destroyer's CAS); the
   * seq_cst handshake below decides a race. */
  if (ldg__load_acquire(&s->destroyed)) {
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  /* s->flags: immutable after creation (read-mostly line); read where
   * needed rather than kept in a register across the enqueue. */
  ldg__issuing_begin(s);
  ldg_seq seq = 0;
  int rc = __builtin_expect((s->flags & LDG_STREAM_SINGLE_ISSUER) != 0, 0)
               ? ldg__ring_reserve_single(s, &seq)
               : ldg__ring_reserve(s, &seq);
  if (rc != LDG_OK) {
    ldg__issuing_end(s);
    ldg__ext_free_now(ext);
    return rc;
  }
  struct ldg__seg *g = ldg__seg_of_reserved(s, seq);
  struct ldg__slot *slot = &g->slots[seq - g->base];
  LDG__HOOK(LDG__HOOK_ENQUEUE_RESERVED, s);

  /* The destroy handshake (see DESTROY above): seq_cst after the reserving
   * seq_cst CAS; on a single-issuer stream, after the reserving store and
   * the light side of the asymmetric fence (SINGLE-ISSUER STREAMS), whose
   * heavy side the destroyer runs between its CAS and its load of tail. */
  bool gone;
  if (__builtin_expect((s->flags & LDG_STREAM_SINGLE_ISSUER) != 0, 0)) {
    ldg__asym_light();
    /* Relaxed would do for the handshake (the fences order it); acquire
     * pairs with the destroyer's CAS, as the early refusal's. */
    gone = ldg__load_acquire(&s->destroyed);
  } else {
    gone = ldg__load_seq_cst(&s->destroyed);
  }
  if (gone) {
    /* An exchange, whatever the destroyer left (EMPTY or ABANDONED); it
     * publishes nothing: a destroyer that reads RETRACTED (acquire) skips
     * the slot without touching it. */
    ldg__exchange_acq_rel(&slot->state, (uint32_t)LDG__SLOT_RETRACTED);
    /* The destroyer may still be walking to this slot, so its state cannot
     * be reset: the segment will not be reused. Relaxed: sequenced before
     * our seq_cst add to g->resolved, which the retirer reads (ldg__seg_
     * pool_cb says how it reaches the pool callback). */
    ldg__store_relaxed(&g->dirty, true);
    ldg__issuing_end(s);
    ldg__resolve_one(s, g);
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  /* The vector index (vindex.c): before the publication. Plain read: the
   * stream's copy, set before it was linked (registry mutex). */
  struct ldg__vindex *vx = e->kind == LDG__KIND_OP ? s->vindex : NULL;
  if (vx != NULL) ldg__vindex_add(vx, e->vec_ids, e->n_vec);

  if (e->kind == LDG__KIND_WAIT) {
    /* After the reservation: until this add, ldg_pending_count counts the
     * wait as an operation (over, never under). Release: pairs with the
     * acquire load of waits_enqueued in ldg_pending_count, so a query that
     * counts this wait also sees the reserving CAS on tail (sequenced
     * before) and cannot count the wait without its seq. */
    ldg__fetch_add_release(&s->waits_enqueued, 1);
  }
  ldg__fill_slot(slot, e, ext);
  uint32_t expected = LDG__SLOT_EMPTY;
  /* Publishes the payload written above (release half; acquire in the
   * release walk and in the queries). Fails only if a release abandoned the
   * slot to us (the failure's acquire pairs with that CAS). */
  if (ldg__cas_acq_rel(&slot->state, &expected, (uint32_t)LDG__SLOT_FULL)) {
    ldg__issuing_end(s);
    LDG__HOOK(LDG__HOOK_ENQUEUE_PUBLISHED, s);
    if (seq_out != NULL) *seq_out = seq;
    return LDG_OK;
  }

  /* A release covering seq passed while we were publishing: the entry is
   * ours to release. The slot was never FULL, so no query read its
   * payload: it can be freed at once. The release that abandoned it is done
   * with it: back to EMPTY for the segment's next life. Relaxed: ordered
   * by the resolve below, as in ldg__take_chunk. */
  ldg__issuing_end(s); /* done with s's tail: the keep may record on s */
  ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
  ldg__resolve_one(s, g);
  ldg__ext_free_now(ext);
  if (seq_out != NULL) *seq_out = seq;
  /* Taken by us: out of the index before the keep runs. */
  if (vx != NULL) ldg__vindex_remove(vx, e->vec_ids, e->n_vec);
  if (e->kind == LDG__KIND_OP) {
    /* Release: pairs with the acquire load in ldg_pending_count; our own
     * reservation on tail is sequenced before. */
    ldg__fetch_add_release(&s->ops_released, 1);
    ldg__thread_ops++;
    if (e->keep.release != NULL) e->keep.release(e->keep.ctx);
  } else {
    if (e->target != NULL) {
      /* Fire the wait; the engine takes over the wait's reference. */
      /* A skip, as when a release fires a wait (release.c). */
      bool live = !ldg__load_acquire(&e->target->destroyed);
      ldg__engine(e->target, live ? e->upto : 0, LDG__TOP_OWNED);
    }
  }
  return LDG_OK;
}

/* flatten: the reservation, the segment lookup and the slot fill inline
 * into each caller, as they were when ldg__ring_enqueue was their one
 * caller (two copies are past gcc's own inlining limits). */
__attribute__((flatten)) int ldg__ring_enqueue(ldg_stream *s,
                                               const struct ldg__entry *e,
                                               ldg_seq *seq_out) {
  return ldg__enqueue_entry(s, e, seq_out);
}

/* Whether [addr, addr + bytes) is non-empty and does not wrap. A range ending
 * exactly at the top of the address space is fine. */
static bool ldg__range_ok(const ldg_range *r) {
  return r->bytes != 0 && r->bytes - 1 <= UINTPTR_MAX - r->addr;
}

/* ldg_enqueue's argument checks. Every one happens before anything changes,
 * so a refused call changes nothing and the caller keeps its keep. */
static bool ldg__enqueue_args_ok(const ldg_stream *s, const uint64_t *vec_ids,
                                 size_t n_vec, const ldg_range *ranges,
                                 size_t n_ranges) {
  if (s == NULL) return false;
  if ((n_vec != 0 && vec_ids == NULL) || (n_ranges != 0 && ranges == NULL)) {
    return false;
  }
  /* n_vec + 2 * n_ranges words, counted in bytes, must not overflow. */
  const size_t max_words = (SIZE_MAX / sizeof(uint64_t)) / 4;
  if (n_vec > max_words || n_ranges > max_words) return false;
  for (size_t i = 0; i < n_ranges; i++) {
    if (!ldg__range_ok(&ranges[i])) return false;
  }
  return true;
}

/* The public entry point lives here rather than in ledger.c with the other
 * entry points' checks so that the checks, the reservation and the slot
 * fill are one function: no call, no entry built in memory (flatten: as
 * ldg__ring_enqueue). */
__attribute__((flatten)) int ldg_enqueue(ldg_stream *s, ldg_keep keep,
                                         const uint64_t *vec_ids, size_t n_vec,
                                         const ldg_range *ranges,
                                         size_t n_ranges, ldg_seq *seq_out) {
  if (!ldg__enqueue_args_ok(s, vec_ids, n_vec, ranges, n_ranges))
    return LDG_EINVAL;
  const struct ldg__entry e = {
      .kind = LDG__KIND_OP,
      .keep = keep,
      .vec_ids = vec_ids,
      .n_vec = n_vec,
      .ranges = ranges,
      .n_rng = n_ranges,
  };
  return ldg__enqueue_entry(s, &e, seq_out);
}
