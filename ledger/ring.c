/*
 * The per-stream ring: a sequence-indexed ring of entries, published and
 * reclaimed under RCU, with atomic high-water marks. This comment is the
 * correctness argument; the code below follows it section by section.
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
 *               the fact and a refused enqueue leaves no hole.
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
 * WHO MAY RECLAIM A SLOT, AND WHEN
 *   A slot is resolved once, by whoever took its entry: the release that took
 *   a FULL slot, or the enqueuer of an ABANDONED or RETRACTED one. A wait's
 *   slot is resolved only when its firing has finished (see below). The
 *   resolver also puts the slot's state back to EMPTY — before counting it
 *   resolved, since after that the segment may be retired — (nobody else
 *   looks at it in this life), so a retired segment comes back to the pool clean and
 *   needs no zeroing — except a RETRACTED slot, which the destroyer may
 *   still be about to look at: its segment is marked dirty and freed. Each
 *   resolution adds to g->resolved; a segment is done when all of its seqs
 *   were handed out and resolved. Segments are retired strictly from the
 *   head: whoever completes a segment, or links a successor to a done tail
 *   segment, advances s->head over every done segment that has a successor
 *   and that tailseg no longer points at, one CAS per segment, and the CAS
 *   winner retires the segment with call_rcu: by then neither root (head,
 *   tailseg) reaches it, so no reader starting later can find it.
 *   Because "done" is stored before head is read, and head is moved before
 *   the next segment's "done" is read (all seq_cst), one of two racing
 *   threads always sees the other's segment done: no done segment is left
 *   behind; likewise an extender swings tailseg before advancing head, and
 *   an advancer reads tailseg after "done" (seq_cst). A segment's slots
 *   serve one run of seqs; it is freed (or pooled for reuse) only after
 *   a grace period, so lock-free readers (queries) that found it under
 *   rcu_read_lock may keep reading its immutable payload.
 *   Consequence used below: while a thread holds a taken-but-unresolved slot,
 *   its segment and every later one stay allocated, with or without RCU.
 *
 * ENQUEUE WITHOUT A READ-SIDE SECTION
 *   The common enqueue takes no RCU read lock. It reserves seq against
 *   tail_end, touching no segment. From then on the slot of seq is
 *   unresolved until this enqueuer publishes it and a release takes it (or
 *   the enqueuer itself resolves it), so by the consequence above the
 *   segment of seq and every later one stay allocated. It then loads tailseg,
 *   which is that segment or a later one (tail_end was raised only after
 *   tailseg reached the segment covering seq), so it may read it without
 *   RCU; if tailseg has already moved past seq's segment, the enqueuer finds
 *   it by walking from head under rcu_read_lock (head may be retired under
 *   it). Only extending the ring and resolving a slot (which may retire
 *   segments) enter a read-side section.
 *
 * GROWTH AND SHRINKING
 *   The ring grows by appending a segment when the next seq falls past the
 *   newest one: the enqueuer allocates it (before reserving anything, so
 *   LDG_ENOMEM leaves no trace), CASes it onto tailseg->next (a loser frees
 *   its copy, never published) and swings tailseg. No entry ever moves, so
 *   growing never races with publication or release. A new segment's size
 *   is between 64 and 1024 slots: at least the backlog (pending entries),
 *   doubled if the previous segment was used up within a millisecond and
 *   kept if within 50 ms (a busy stream retires 16 times fewer segments,
 *   which is what loads the RCU callback thread); a new stream starts
 *   with 8. It shrinks as segments are retired: memory held is
 *   the pending span rounded up to segments, plus the newest segment (at
 *   most 64 KiB), plus what waits for a grace period, plus the pools.
 *
 *   The pools: a stream that streams work steadily would otherwise allocate,
 *   zero and free a segment every 64 entries, on memory the RCU callback
 *   thread freed (glibc then trims it, and the next segment page-faults).
 *   So a retired segment's callback pushes it, past its grace period, on a
 *   per-ledger lock-free stack for its size (all sizes together at most the
 *   ledger's pool limit, 1 MiB unless set), and extending a ring pops one
 *   before allocating. This bounded cache is the one exception to "nothing
 *   released stays allocated past a grace period"; a limit of 0 turns it
 *   off, ldg_ledger_trim empties it, ldg_ledger_destroy frees it. Pooled
 *   memory counts in ldg_ledger_bytes.
 *
 * TRANSITIVE RELEASE, WITHOUT RECURSION OR ALLOCATION
 *   A release walks its interval in chunks: under rcu_read_lock it takes up to
 *   64 entries, in seq order, stopping after a wait; it leaves the read-side
 *   section and runs the keeps. For a wait on stream a up to u, the wait's own
 *   slot (taken, not yet resolved, hence pinned) becomes the stack frame: it
 *   stores where the current stream's walk stopped, and the walk continues on
 *   a's newly claimed interval (released_a, u]. When that finishes, the frame
 *   is popped — the wait's reference to a is dropped, the slot resolved — and
 *   the walk resumes. Chains of any length therefore need no native stack and
 *   no heap, and cycles end because a claim that raises nothing yields an
 *   empty interval. Dropping the last reference of a inside the walk destroys
 *   a in the same loop (the frame turns into a "finalize" frame), so even
 *   destruction cascades stay iterative.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (here and in liburcu's headers) */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

#define LDG__SEG_FIRST 8u
#define LDG__SEG_MIN 64u
#define LDG__SEG_MAX 1024u
#define LDG__BATCH 64u

/* ---- Segments ------------------------------------------------------------------ */

static uint64_t ldg__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}


static size_t ldg__seg_bytes(uint32_t size) {
  return sizeof(struct ldg__seg) + (size_t)size * sizeof(struct ldg__slot);
}

static size_t ldg__ext_bytes(size_t words) {
  return sizeof(struct ldg__ext) + words * sizeof(uint64_t);
}

static struct ldg__seg *ldg__seg_alloc(ldg_ledger *l, ldg_seq base,
                                       uint32_t size) {
  size_t bytes = ldg__seg_bytes(size);
  struct ldg__seg *g = ldg__aligned_alloc(LDG__CACHE_LINE, bytes);
  if (g == NULL) return NULL;
  memset(g, 0, bytes); /* every slot EMPTY, every aux 0 */
  g->base = base;
  g->size = size;
  atomic_init(&g->resolved, 0);
  atomic_init(&g->next, NULL);
  g->ledger = l;
  ldg__ledger_ref(l);
  ldg__fetch_add_relaxed(&l->bytes, bytes);
  return g;
}

/* Frees a segment nobody can reach any more. (Out-of-line payloads were
 * freed when their entries were taken.) */
static void ldg__seg_destroy(struct ldg__seg *g) {
  ldg_ledger *l = g->ledger;
  ldg__fetch_sub_relaxed(&l->bytes, ldg__seg_bytes(g->size));
  ldg__free(g);
  ldg__ledger_unref(l);
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
  ldg__fetch_add_relaxed(&l->bytes, bytes);
  return x;
}

/* Frees x now: no reader can have seen it (it was never published). */
static void ldg__ext_free_now(struct ldg__ext *x) {
  if (x == NULL) return;
  ldg_ledger *l = x->ledger;
  ldg__fetch_sub_relaxed(&l->bytes, ldg__ext_bytes(x->n_vec + 2 * x->n_rng));
  ldg__free(x);
  ldg__ledger_unref(l);
}

static void ldg__ext_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg__ext_free_now(
      (struct ldg__ext *)((char *)head - offsetof(struct ldg__ext, rcu)));
}

static struct ldg__seg *ldg__seg_of_rcu(struct rcu_head *head) {
  return (struct ldg__seg *)((char *)head - offsetof(struct ldg__seg, rcu));
}

/* The pools (GROWTH AND SHRINKING). A segment enters a pool only from its
 * RCU callback, after its grace period, and leaves it by a pop under
 * rcu_read_lock. That makes the Treiber stack free of ABA: a popper that read
 * top = g and g->next cannot see g pushed again before its CAS, because g's
 * next trip into the pool waits for a grace period that waits for the
 * popper's read-side section. */
static unsigned ldg__pool_class(uint32_t size) {
  return (unsigned)__builtin_ctz(size) - 3; /* 8 -> 0, ..., 1024 -> 7 */
}

static void ldg__seg_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg__seg_destroy(ldg__seg_of_rcu(head));
}

static void ldg__seg_pool_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  struct ldg__seg *g = ldg__seg_of_rcu(head);
  ldg_ledger *l = g->ledger;
  size_t bytes = ldg__seg_bytes(g->size);
  /* The limit is checked, then the bytes added: racing callbacks may pass
   * it by a few segments, never by more than their number. */
  if (ldg__load_acquire(&l->destroying) || ldg__load_relaxed(&g->dirty) ||
      ldg__load_relaxed(&l->pool_bytes) + bytes >
          ldg__load_relaxed(&l->pool_limit)) {
    ldg__seg_destroy(g);
    return;
  }
  ldg__fetch_add_relaxed(&l->pool_bytes, bytes);
  struct ldg__pool *p = &l->pools[ldg__pool_class(g->size)];
  struct ldg__seg *top = ldg__load_relaxed(&p->top);
  do {
    ldg__store_relaxed(&g->next, top);
    /* Publishes g's link (acquire in the pop). */
  } while (!ldg__cas_weak_acq_rel(&p->top, &top, g));
}

/* Pops a pooled segment of that size, or NULL. Under RCU. */
static struct ldg__seg *ldg__pool_pop(ldg_ledger *l, uint32_t size) {
  struct ldg__pool *p = &l->pools[ldg__pool_class(size)];
  struct ldg__seg *g = ldg__load_acquire(&p->top);
  while (g != NULL &&
         !ldg__cas_weak_acq_rel(&p->top, &g, ldg__load_relaxed(&g->next))) {
  }
  if (g != NULL) ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(size));
  return g;
}

void ldg__pools_drain(ldg_ledger *l, bool now) {
  for (unsigned c = 0; c < LDG__POOL_CLASSES; c++) {
    struct ldg__seg *g =
        ldg__exchange_acq_rel(&l->pools[c].top, (struct ldg__seg *)NULL);
    while (g != NULL) {
      struct ldg__seg *next = ldg__load_relaxed(&g->next);
      ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(g->size));
      if (now) {
        ldg__seg_destroy(g);
      } else { /* a popper may still be reading g->next */
        ldg__call_rcu(&g->rcu, ldg__seg_free_cb);
      }
      g = next;
    }
  }
}

/* g was just unlinked from its stream: after a grace period it goes to its
 * ledger's pool (or is freed). */
static void ldg__seg_retire(struct ldg__seg *g) {
  ldg__call_rcu(&g->rcu, ldg__seg_pool_cb);
}

/* A zeroed segment for seqs from base: from the pool if one of that size is
 * there, else a new one. NULL if out of memory. Under RCU. */
static struct ldg__seg *ldg__seg_get(ldg_stream *s, ldg_seq base,
                                     uint32_t size) {
  struct ldg__seg *g = ldg__pool_pop(s->ledger, size);
  if (g == NULL) return ldg__seg_alloc(s->ledger, base, size);
  /* Every slot of a pooled segment is EMPTY already: whoever resolved it
   * reset it (WHO MAY RECLAIM A SLOT), and segments with a retracted slot
   * are never pooled. So no memset: that was 64 KiB at 1024 slots. */
  g->base = base;
  ldg__store_relaxed(&g->resolved, 0);
  ldg__store_relaxed(&g->next, (struct ldg__seg *)NULL);
  return g;
}

int ldg__ring_init(ldg_stream *s) {
  struct ldg__seg *g = ldg__seg_alloc(s->ledger, 1, LDG__SEG_FIRST);
  if (g == NULL) return LDG_ENOMEM;
  g->born_ns = ldg__now_ns();
  atomic_init(&s->head, g);
  atomic_init(&s->tailseg, g);
  atomic_init(&s->tail, 0);
  atomic_init(&s->tail_end, (ldg_seq)1 + LDG__SEG_FIRST);
  atomic_init(&s->released, 0);
  atomic_init(&s->ops_released, 0);
  atomic_init(&s->waits_enqueued, 0);
  return LDG_OK;
}

void ldg__ring_free_all(ldg_stream *s) {
  struct ldg__seg *g = ldg__load_acquire(&s->head);
  while (g != NULL) {
    struct ldg__seg *next = ldg__load_acquire(&g->next);
    ldg__seg_destroy(g);
    g = next;
  }
}

/* Retires every done segment at the head that has a successor and that
 * tailseg no longer names. Under RCU:
 * another thread may retire h between our load and our read of it. */
static void ldg__ring_advance_head(ldg_stream *s) {
  for (;;) {
    struct ldg__seg *h = ldg__load_seq_cst(&s->head);
    /* Pairs with the seq_cst add in ldg__seg_resolve: if we miss h's last
     * resolution, its resolver sees our head and retires h itself. */
    if (ldg__load_seq_cst(&h->resolved) != h->size) return;
    /* Pairs with the seq_cst CAS linking a successor in ldg__ring_extend. */
    struct ldg__seg *next = ldg__load_seq_cst(&h->next);
    if (next == NULL) return;
    /* h must be unreachable before it is retired: tailseg may still point at
     * it while an extender is between linking next and swinging tailseg.
     * That extender advances head itself after the swing (seq_cst both
     * ways: one of us sees the other). tailseg never moves back. */
    if (ldg__load_seq_cst(&s->tailseg) == h) return;
    LDG__HOOK(LDG__HOOK_HEAD_ADVANCE, s);
    if (ldg__cas_seq_cst(&s->head, &h, next)) ldg__seg_retire(h);
  }
}

/* Counts k more slots of g resolved. Under RCU. */
static void ldg__seg_resolve(ldg_stream *s, struct ldg__seg *g, uint32_t k) {
  uint32_t before = ldg__fetch_add_seq_cst(&g->resolved, k);
  if (before + k == g->size) ldg__ring_advance_head(s);
}

/* ---- Growth ------------------------------------------------------------------------ */

/* A stream that used up its last segment within this time is busy: its next
 * segment doubles; within the slower bound it keeps the size. */
#define LDG__SEG_FAST_NS 1000000ull  /* 1 ms: over 64 k entries/s at 64 */
#define LDG__SEG_SLOW_NS 50000000ull /* 50 ms */

/* The size of the segment to follow prev: at least the backlog (pending
 * entries), and larger for a stream that goes through segments fast, so that
 * busy streams retire (and call_rcu) 16 times less often. */
static uint32_t ldg__next_seg_size(const ldg_stream *s,
                                   const struct ldg__seg *prev, ldg_seq t,
                                   uint64_t now) {
  ldg_seq r = ldg__load_relaxed(&s->released);
  ldg_seq backlog = t > r ? t - r : 0;
  uint32_t size = LDG__SEG_MIN;
  while (size < LDG__SEG_MAX && size < backlog) size <<= 1;
  uint64_t age = now - prev->born_ns;
  uint32_t by_rate = age < LDG__SEG_FAST_NS   ? prev->size * 2
                     : age < LDG__SEG_SLOW_NS ? prev->size
                                              : 0;
  if (by_rate > LDG__SEG_MAX) by_rate = LDG__SEG_MAX;
  return by_rate > size ? by_rate : size;
}

/* Raises tail_end to at least end. */
static void ldg__raise_tail_end(ldg_stream *s, ldg_seq end) {
  ldg_seq cur = ldg__load_relaxed(&s->tail_end);
  /* Publishes that the segments below end are linked and reachable from
   * tailseg (acquire in ldg__ring_reserve). */
  while (cur < end && !atomic_compare_exchange_weak_explicit(
                          &s->tail_end, &cur, end, memory_order_release,
                          memory_order_relaxed)) {
  }
}

/* No seq below the tail_end we saw (end) is free: make sure a segment
 * follows and that tailseg and tail_end moved onto it. Under RCU (tailseg may
 * be retired under us once tail_end has moved past it). */
static int ldg__ring_extend(ldg_stream *s, ldg_seq end) {
  struct ldg__seg *g = ldg__load_acquire(&s->tailseg);
  if (g->base + g->size > end) { /* someone extended; help finish */
    ldg__raise_tail_end(s, g->base + g->size);
    return LDG_OK;
  }
  struct ldg__seg *next = ldg__load_acquire(&g->next);
  if (next == NULL) {
    ldg_seq t = ldg__load_relaxed(&s->tail);
    uint64_t now = ldg__now_ns();
    struct ldg__seg *fresh =
        ldg__seg_get(s, g->base + g->size, ldg__next_seg_size(s, g, t, now));
    if (fresh == NULL) return LDG_ENOMEM;
    fresh->born_ns = now;
    LDG__HOOK(LDG__HOOK_SEGMENT_ALLOCATED, s);
    struct ldg__seg *expected = NULL;
    if (ldg__cas_seq_cst(&g->next, &expected, fresh)) {
      next = fresh;
    } else { /* another enqueuer linked one first; ours was never seen */
      ldg__seg_destroy(fresh);
      next = expected;
    }
  }
  struct ldg__seg *seen = g;
  /* Publishes next's initialised header (acquire in ldg__seg_of_reserved);
   * seq_cst: pairs with ldg__ring_advance_head's check of tailseg. */
  ldg__cas_seq_cst(&s->tailseg, &seen, next);
  ldg__raise_tail_end(s, next->base + next->size);
  /* g may be done already; it could not be retired while it was last. */
  ldg__ring_advance_head(s);
  return LDG_OK;
}

/* Reserves the next seq of s. Takes no read lock on the common path. */
static int ldg__ring_reserve(ldg_stream *s, ldg_seq *seq) {
  for (;;) {
    ldg_seq t = ldg__load_relaxed(&s->tail);
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    if (t + 1 < end) {
      /* seq_cst: the destroy handshake reads destroyed after this. */
      if (ldg__cas_seq_cst(&s->tail, &t, t + 1)) {
        *seq = t + 1;
        return LDG_OK;
      }
      continue;
    }
    ldg__rcu_read_lock();
    int rc = ldg__ring_extend(s, end);
    ldg__rcu_read_unlock();
    if (rc != LDG_OK) return rc;
  }
}

/* The segment of a seq this thread reserved and has not resolved: it and all
 * later segments are pinned (ENQUEUE WITHOUT A READ-SIDE SECTION). */
static struct ldg__seg *ldg__seg_of_reserved(ldg_stream *s, ldg_seq seq) {
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

static void ldg__engine(ldg_stream *s, ldg_seq upto, int mode);

enum { LDG__TOP_BORROWED, LDG__TOP_OWNED, LDG__TOP_FINALIZE };

int ldg__ring_enqueue(ldg_stream *s, const struct ldg__entry *e,
                      ldg_seq *seq_out) {
  /* Everything that can fail is done before a seq is reserved. */
  struct ldg__ext *ext = NULL;
  if (e->kind == LDG__KIND_OP) {
    /* The caller checked that the word count does not overflow. */
    if (e->n_vec + 2 * e->n_rng > LDG__INLINE_WORDS) {
      ext = ldg__ext_new(s->ledger, e->n_vec, e->n_rng);
      if (ext == NULL) return LDG_ENOMEM;
    }
  }
  if (ldg__load_acquire(&s->destroyed)) {
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  ldg_seq seq;
  int rc = ldg__ring_reserve(s, &seq);
  if (rc != LDG_OK) {
    ldg__ext_free_now(ext);
    return rc;
  }
  struct ldg__seg *g = ldg__seg_of_reserved(s, seq);
  struct ldg__slot *slot = &g->slots[seq - g->base];
  LDG__HOOK(LDG__HOOK_ENQUEUE_RESERVED, s);

  /* The destroy handshake (see DESTROY above): seq_cst after the reserving
   * seq_cst CAS. */
  if (ldg__load_seq_cst(&s->destroyed)) {
    ldg__exchange_acq_rel(&slot->state, (uint32_t)LDG__SLOT_RETRACTED);
    /* The destroyer may still be walking to this slot, so its state cannot
     * be reset: the segment will not be reused. */
    ldg__store_relaxed(&g->dirty, true);
    ldg__resolve_one(s, g);
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  if (e->kind == LDG__KIND_WAIT) {
    /* After the reservation: until this add, ldg_pending_count counts the
     * wait as an operation (over, never under). */
    ldg__fetch_add_relaxed(&s->waits_enqueued, 1);
  }
  ldg__fill_slot(slot, e, ext);
  uint32_t expected = LDG__SLOT_EMPTY;
  /* Publishes the payload written above (acquire in the release walk and in
   * the queries). Fails only if a release abandoned the slot to us. */
  if (ldg__cas_acq_rel(&slot->state, &expected, (uint32_t)LDG__SLOT_FULL)) {
    LDG__HOOK(LDG__HOOK_ENQUEUE_PUBLISHED, s);
    if (seq_out != NULL) *seq_out = seq;
    return LDG_OK;
  }

  /* A release covering seq passed while we were publishing: the entry is
   * ours to release. The slot was never FULL, so no query read its
   * payload: it can be freed at once. The release that abandoned it is done
   * with it: back to EMPTY for the segment's next life. */
  ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
  ldg__resolve_one(s, g);
  ldg__ext_free_now(ext);
  if (seq_out != NULL) *seq_out = seq;
  if (e->kind == LDG__KIND_OP) {
    ldg__fetch_add_relaxed(&s->ops_released, 1);
    if (e->keep.release != NULL) e->keep.release(e->keep.ctx);
  } else {
    if (e->target != NULL) {
      /* Fire the wait; the engine takes over the wait's reference. */
      bool live = !ldg__load_acquire(&e->target->destroyed);
      ldg__engine(e->target, live ? e->upto : 0, LDG__TOP_OWNED);
    }
  }
  return LDG_OK;
}

/* ---- Release ------------------------------------------------------------------------ */

/* Raises s->released to upto. On success the caller owns (old, upto]. */
static bool ldg__claim(ldg_stream *s, ldg_seq upto, ldg_seq *from) {
  ldg_seq r = ldg__load_acquire(&s->released);
  while (r < upto) {
    if (ldg__cas_weak_acq_rel(&s->released, &r, upto)) {
      *from = r + 1;
      LDG__HOOK(LDG__HOOK_RELEASE_CLAIMED, s);
      return true;
    }
  }
  return false;
}

/* Where a walk stands on one stream: seqs next..end (inclusive) are owned and
 * not yet taken. frame is the wait slot whose firing started this walk, NULL
 * for the walk the caller started. */
struct ldg__cursor {
  ldg_stream *s;
  ldg_seq next;
  ldg_seq end;
  struct ldg__slot *frame;
};

static bool ldg__cursor_done(const struct ldg__cursor *c) {
  return c->next > c->end;
}

/* Takes up to LDG__BATCH keeps of c's interval into keeps, in seq order,
 * stopping right after a wait, which is returned taken but unresolved (it
 * becomes a frame). Under RCU. Returns the number of keeps. */
static size_t ldg__take_chunk(struct ldg__cursor *c, ldg_keep *keeps,
                              struct ldg__slot **wait,
                              struct ldg__seg **wait_seg) {
  ldg_stream *s = c->s;
  size_t n = 0;
  uint32_t taken = 0; /* resolved in g, not yet counted */
  *wait = NULL;
  struct ldg__seg *g = ldg__load_acquire(&s->head);
  while (!ldg__cursor_done(c) && n < LDG__BATCH) {
    if (c->next >= g->base + g->size) {
      if (taken != 0) ldg__seg_resolve(s, g, taken);
      taken = 0;
      g = ldg__load_acquire(&g->next);
      if (g == NULL) abort(); /* every seq <= tail has a segment */
      continue;
    }
    if (c->next < g->base) {
      /* Segments before head were retired: all their slots, ours included,
       * were resolved by refused (retracted) enqueues. */
      c->next = g->base;
      continue;
    }
    struct ldg__slot *slot = &g->slots[c->next - g->base];
    LDG__HOOK(LDG__HOOK_RELEASE_TAKING, s);
    uint32_t st = ldg__load_acquire(&slot->state);
    if (st == LDG__SLOT_EMPTY &&
        ldg__cas_acq_rel(&slot->state, &st, (uint32_t)LDG__SLOT_ABANDONED)) {
      c->next++; /* the enqueuer releases it (PUBLICATION above) */
      continue;
    }
    c->next++;
    if (st != LDG__SLOT_FULL) continue; /* retracted: the enqueuer resolved it */
    if (slot->kind == LDG__KIND_WAIT) {
      if (slot->u.wait.target == NULL) { /* a wait on itself: fires nothing */
        ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
        taken++;
        continue;
      }
      *wait = slot;
      *wait_seg = g;
      break;
    }
    keeps[n++] = slot->u.op.keep;
    if (slot->aux == LDG__OP_EXT) {
      /* Queries may still read it: free after a grace period. */
      ldg__call_rcu(&slot->u.op.d.ext->rcu, ldg__ext_free_cb);
    }
    /* Taken: nobody else touches this slot in this life (queries skip
     * seqs at or below released), so it goes back to EMPTY for reuse. */
    ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
    taken++;
  }
  if (taken != 0) ldg__seg_resolve(s, g, taken);
  if (n != 0) ldg__fetch_add_relaxed(&s->ops_released, n);
  return n;
}

static void ldg__run_keeps(const ldg_keep *keeps, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (keeps[i].release != NULL) keeps[i].release(keeps[i].ctx);
  }
}

/* Marks s destroyed and unlinks it. False if it was destroyed already. */
static bool ldg__mark_destroyed(ldg_stream *s) {
  bool expected = false;
  /* seq_cst: the destroy handshake (DESTROY above). */
  if (!ldg__cas_seq_cst(&s->destroyed, &expected, true)) return false;
  ldg__registry_unlink(s);
  return true;
}

/* Points c at everything pending on c->s, destroying it first; an empty
 * interval if it was destroyed already (then nothing is pending). */
static void ldg__cursor_destroy(struct ldg__cursor *c) {
  c->next = 1;
  c->end = 0;
  if (!ldg__mark_destroyed(c->s)) return;
  ldg_seq t = ldg__load_seq_cst(&c->s->tail);
  ldg_seq from;
  if (ldg__claim(c->s, t, &from)) {
    c->next = from;
    c->end = t;
  }
}

/* The release walk. mode says what the caller gave us of s:
 *   BORROWED  the caller's reference, valid for the call; if the walk must
 *             come back to s after running callbacks it takes its own.
 *   OWNED     one reference the walk drops at the end.
 *   FINALIZE  s has no reference left: destroy it, release all, free it. */
static void ldg__engine(ldg_stream *s, ldg_seq upto, int mode) {
  struct ldg__cursor cur = {s, 1, 0, NULL};
  bool own_top = (mode == LDG__TOP_OWNED);
  if (mode == LDG__TOP_FINALIZE) {
    ldg__cursor_destroy(&cur);
  } else {
    ldg_seq from;
    if (ldg__claim(s, upto, &from)) {
      cur.next = from;
      cur.end = upto;
    }
  }

  ldg_keep keeps[LDG__BATCH];
  for (;;) {
    if (!ldg__cursor_done(&cur)) {
      struct ldg__slot *w;
      struct ldg__seg *wg = NULL;
      ldg__rcu_read_lock();
      size_t n = ldg__take_chunk(&cur, keeps, &w, &wg);
      ldg__rcu_read_unlock();
      LDG__HOOK(LDG__HOOK_RELEASE_CHUNK_TAKEN, cur.s);
      if (cur.frame == NULL && mode == LDG__TOP_BORROWED && !own_top &&
          (w != NULL || !ldg__cursor_done(&cur))) {
        /* We come back to s after callbacks that might drop the caller's
         * last reference. */
        ldg_stream_ref(cur.s);
        own_top = true;
      }
      ldg__run_keeps(keeps, n);
      if (w != NULL) {
        ldg_stream *a = w->u.wait.target;
        ldg_seq u = w->u.wait.upto;
        /* The wait's slot (pinned: taken, unresolved) becomes the frame. */
        w->u.wait.parent = cur.s;
        w->u.wait.parent_next = cur.next;
        w->u.wait.parent_end = cur.end;
        w->u.wait.parent_frame = cur.frame;
        w->u.wait.seg = wg;
        w->aux = LDG__FRAME_FIRED;
        cur = (struct ldg__cursor){a, 1, 0, w};
        ldg_seq from;
        if (!ldg__load_acquire(&a->destroyed) && ldg__claim(a, u, &from)) {
          cur.next = from;
          cur.end = u;
        }
      }
      continue;
    }

    /* cur's interval is finished. */
    if (cur.frame == NULL) {
      if (mode == LDG__TOP_FINALIZE) {
        ldg__stream_free_deferred(cur.s);
        return;
      }
      if (!own_top || !ldg__stream_unref_is_last(cur.s)) return;
      /* Ours was the last reference: destroy and free s in this loop. */
      mode = LDG__TOP_FINALIZE;
      own_top = false;
      ldg__cursor_destroy(&cur);
      continue;
    }
    struct ldg__slot *f = cur.frame;
    if (f->aux == LDG__FRAME_FIRED) {
      if (ldg__stream_unref_is_last(cur.s)) {
        /* The wait held the waited stream's last reference. */
        f->aux = LDG__FRAME_FINALIZE;
        ldg__cursor_destroy(&cur);
        continue;
      }
    } else {
      ldg__stream_free_deferred(cur.s);
    }
    /* Pop: resume the stream holding the wait, then resolve the wait. */
    struct ldg__cursor parent = {f->u.wait.parent, f->u.wait.parent_next,
                                 f->u.wait.parent_end, f->u.wait.parent_frame};
    struct ldg__seg *fg = f->u.wait.seg;
    ldg__store_relaxed(&f->state, (uint32_t)LDG__SLOT_EMPTY);
    ldg__rcu_read_lock();
    ldg__seg_resolve(parent.s, fg, 1);
    ldg__rcu_read_unlock();
    cur = parent;
  }
}

void ldg__release(ldg_stream *s, ldg_seq upto) {
  ldg__engine(s, upto, LDG__TOP_BORROWED);
}

void ldg__finalize(ldg_stream *s) { ldg__engine(s, 0, LDG__TOP_FINALIZE); }

bool ldg__destroy(ldg_stream *s) {
  if (!ldg__mark_destroyed(s)) return false;
  ldg__engine(s, ldg__load_seq_cst(&s->tail), LDG__TOP_BORROWED);
  return true;
}

/* ---- Queries ------------------------------------------------------------------------ */

bool ldg__ring_any(const ldg_stream *s, ldg__entry_pred fn, const void *arg) {
  ldg_seq r = ldg__load_acquire(&s->released);
  ldg_seq t = ldg__load_acquire(&s->tail);
  for (struct ldg__seg *g = ldg__load_acquire(&s->head); g != NULL;
       g = ldg__load_acquire(&g->next)) {
    if (g->base > t) break;
    ldg_seq lo = g->base > r + 1 ? g->base : r + 1;
    ldg_seq last = g->base + g->size - 1;
    ldg_seq hi = last < t ? last : t;
    for (ldg_seq q = lo; q <= hi; q++) {
      const struct ldg__slot *slot = &g->slots[q - g->base];
      if (ldg__load_acquire(&slot->state) != LDG__SLOT_FULL) continue;
      if (slot->kind != LDG__KIND_OP) continue;
      if (fn(slot, arg)) return true;
    }
  }
  return false;
}
