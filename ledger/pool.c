/*
 * The per-stream ring, part 5 of 7: the retired-segment pool.
 *
 * THE POOLS
 *   The pools: a stream that streams work steadily would otherwise allocate,
 *   zero and free a segment every 64 entries, on memory another thread
 *   freed (glibc then trims it, and the next segment page-faults).
 *   So a retired segment, past its grace period, is pushed on a per-ledger
 *   lock-free stack for its size (all sizes together at most the ledger's
 *   limit in force, below), and extending a ring pops one before
 *   allocating. This bounded cache is the one exception to "nothing
 *   released stays allocated past a grace period"; a limit of 0 turns it
 *   off, ldg_ledger_trim empties it, ldg_ledger_destroy frees it. Pooled
 *   memory counts in ldg_ledger_bytes. The stacks are LIFO: an extension
 *   pops the segment retired last, whose lines the caches may still hold.
 *
 * HOW MUCH THE POOL KEEPS
 *   Segments come back in the reclaimer's batches (reclaim.c), one every
 *   2-5 ms, and the pool must hold what one batch returns until the
 *   extensions of the next interval take it; what does not fit is freed to
 *   glibc and comes back page-faulting. The limit in force (pool_auto) is
 *   therefore set from each batch: twice what that batch brought to this
 *   ledger, at least LDG__POOL_FLOOR (1 MiB, the old fixed default), at
 *   most pool_limit, the bound ldg_ledger_set_pool_limit sets (32 MiB
 *   unless set; 0 keeps nothing). A smaller batch lowers it, by at most
 *   half per batch, and the batch then takes what the pool holds above it
 *   back out (whole size classes, largest first) and frees it, through the next
 *   batch's grace period like any retired segment (a popper may still be
 *   reading its link). A ledger whose streams go quiet keeps what it pooled
 *   until its next batch, ldg_ledger_trim or ldg_ledger_destroy.
 *
 *   A segment enters a pool only past its grace period (from the
 *   reclaimer's batch, or an RCU callback when no reclaimer runs) and leaves
 *   it by a pop under rcu_read_lock. That makes the Treiber stack free of
 *   ABA: a popper that read top = g and g->next cannot see g pushed again
 *   before its CAS, because g's next trip into the pool waits for a grace
 *   period that starts after g's retirement, hence after the pop that took
 *   g, hence after the popper's read-side section began.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdint.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

static unsigned ldg__pool_class(uint32_t size) {
  return (unsigned)__builtin_ctz(size) - 3; /* 8 -> 0, ..., 1024 -> 7 */
}

/* Takes l's whole stack of class c and hands each segment to dispose. By
 * exchange, no read-side section: a popper may still be reading a taken
 * segment's link, so dispose must not free it before a grace period.
 * Returns whether it took any. */
static bool ldg__pool_empty_class(ldg_ledger *l, unsigned c,
                                  void (*dispose)(struct ldg__seg *)) {
  /* Acquire half: pairs with the pushing CASes (each acquired the one
   * before it), so every link below is read as pushed. */
  struct ldg__seg *g =
      ldg__exchange_acq_rel(&l->pools[c].top, (struct ldg__seg *)NULL);
  bool took = g != NULL;
  while (g != NULL) {
    struct ldg__seg *next = ldg__load_relaxed(&g->next); /* see above */
    ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(g->size));
    dispose(g);
    g = next;
  }
  return took;
}

/* dispose for a trim: freed (marked dirty: not pooled again) after the
 * next batch's grace period. The mark is ours: read after that batch. */
static void ldg__pool_retire_dirty(struct ldg__seg *g) {
  ldg__store_relaxed(&g->dirty, true);
  ldg__reclaim_retire(g);
}

/* dispose for ldg_ledger_trim's drain: freed after a grace period. */
static void ldg__pool_free_later(struct ldg__seg *g) {
  ldg__call_rcu(&g->rcu, ldg__seg_free_cb);
}

/* Empties l's classes, a whole class at a time, largest first, until the
 * pool holds at most bound bytes, handing each segment to dispose. Relaxed
 * pool_bytes: a bound, publishing nothing. Returns whether it took any. */
static bool ldg__pool_shrink_to(ldg_ledger *l, size_t bound,
                                void (*dispose)(struct ldg__seg *)) {
  bool took = false;
  for (unsigned c = LDG__POOL_CLASSES; c-- > 0;) {
    if (ldg__load_relaxed(&l->pool_bytes) <= bound) break;
    if (ldg__pool_empty_class(l, c, dispose)) took = true;
  }
  return took;
}

bool ldg__pool_adapt(ldg_ledger *l, size_t bytes) {
  /* Relaxed: bounds on memory, publishing nothing (as pool_bytes). Only
   * the reclaimer's batch stores pool_auto (under its lock). */
  size_t bound = ldg__load_relaxed(&l->pool_limit);
  size_t half = ldg__load_relaxed(&l->pool_auto) / 2;
  size_t want = bytes > SIZE_MAX / 2 ? SIZE_MAX : 2 * bytes;
  if (want < half) want = half; /* down by half a batch at most */
  if (want < LDG__POOL_FLOOR) want = LDG__POOL_FLOOR;
  if (want > bound) want = bound;
  ldg__store_relaxed(&l->pool_auto, want);
  /* What the pool holds above it goes, by exchange (no read-side section:
   * the reclaimer thread is never registered with liburcu, so it leaves no
   * registration behind across a fork), each retired through the next
   * batch (a flush runs that batch before it returns: reclaim.c,
   * ldg__reclaim_flush). */
  return ldg__pool_shrink_to(l, want, ldg__pool_retire_dirty);
}

/* The limit in force: pool_auto, never above the bound (which a caller may
 * lower after pool_auto was set). Relaxed, as above. */
static size_t ldg__pool_limit_now(ldg_ledger *l) {
  size_t bound = ldg__load_relaxed(&l->pool_limit);
  size_t in_force = ldg__load_relaxed(&l->pool_auto);
  return in_force < bound ? in_force : bound;
}

void ldg__seg_pool_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  struct ldg__seg *g = ldg__seg_of_rcu(head);
  g->retired_ns = 0; /* call_rcu wrote over it (internal.h): no age */
  ldg__seg_pool_put(g);
}

void ldg__seg_pool_put(struct ldg__seg *g) {
  ldg_ledger *l = g->ledger;
  size_t bytes = ldg__seg_bytes(g->size);
  /* The limit is checked, then the bytes added: racing callbacks may pass
   * it by a few segments, never by more than their number. pool_bytes and
   * the limits are relaxed: they bound memory, and publish nothing.
   * dirty: relaxed; its store (a retracting enqueuer) is sequenced before
   * that enqueuer's seq_cst add to g->resolved, which the retirer's seq_cst
   * load of resolved read (a release sequence: every later change of it is
   * an RMW), and the retire happens-before this put (the reclaimer's
   * exchange, or call_rcu's grace period).
   * destroying: a first look (acquire pairs with the release store in
   * ldg_ledger_destroy); the handshake after the push decides. */
  if (ldg__load_acquire(&l->destroying) || ldg__load_relaxed(&g->dirty) ||
      ldg__load_relaxed(&l->pool_bytes) + bytes > ldg__pool_limit_now(l)) {
    ldg__seg_destroy(g);
    return;
  }
  ldg__fetch_add_relaxed(&l->pool_bytes, bytes);
  struct ldg__pool *p = &l->pools[ldg__pool_class(g->size)];
  /* Relaxed: the CAS below checks it. */
  struct ldg__seg *top = ldg__load_relaxed(&p->top);
  do {
    /* Relaxed: published by the CAS's release half (acquire in the pop and
     * the drain). */
    ldg__store_relaxed(&g->next, top);
  } while (!ldg__cas_weak_acq_rel(&p->top, &top, g));
  /* ldg_ledger_destroy stores destroying, fences, then empties the pools;
   * we push, fence, then load it (store buffering, seq_cst fences both
   * sides): either its drain sees our push, or we see the flag and empty
   * the pools ourselves (no pop can race: no stream of a ledger being
   * destroyed extends or is created). Nothing is left pooled in a
   * destroyed ledger. Our own reference keeps l alive while we drain. */
  ldg__fence_seq_cst();
  if (ldg__load_relaxed(&l->destroying)) {
    ldg__ledger_ref(l);
    ldg__pools_drain(l, true);
    ldg__ledger_unref(l);
  }
}

/* Pops the top segment of l's class cls, or NULL. Under RCU. s: for the
 * hook. */
static struct ldg__seg *ldg__pool_take(ldg_ledger *l, unsigned cls,
                                       ldg_stream *s) {
  struct ldg__pool *p = &l->pools[cls];
  /* Acquire: pairs with the pushing CAS (release), so g->next is read as
   * pushed; the CAS's acquire on failure does the same for the new top. */
  struct ldg__seg *g = ldg__load_acquire(&p->top);
  for (;;) {
    if (g == NULL) return NULL;
    LDG__HOOK(LDG__HOOK_POOL_POP, s);
    if (ldg__cas_weak_acq_rel(&p->top, &g, ldg__load_relaxed(&g->next))) {
      break;
    }
  }
  /* Relaxed: a counter that publishes nothing. */
  ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(g->size));
  return g;
}

/* Pops a pooled segment of that size for s, or NULL. Under RCU. */
struct ldg__seg *ldg__pool_pop(ldg_stream *s, uint32_t size) {
  ldg_ledger *l = s->ledger;
  unsigned cls = ldg__pool_class(size);
  struct ldg__seg *g = ldg__pool_take(l, cls, s);
  if (g == NULL) return NULL;
  /* Relaxed: counters that publish nothing. */
  ldg__fetch_add_relaxed(&l->pools[cls].reused, 1);
  /* Its age: retired_ns was written by its retirer before the push that
   * the reclaimer's exchange read, which happens-before its push here (our
   * acquire). Buckets of 2^b x 250 us. */
  if (g->retired_ns == 0) return g; /* came through call_rcu: no age */
  uint64_t now = ldg__now_ns();
  uint64_t age = now > g->retired_ns ? (now - g->retired_ns) / 250000u : 0;
  unsigned b = 0;
  while (b + 1 < LDG__REUSE_AGES && age >= ((uint64_t)1 << b)) b++;
  ldg__fetch_add_relaxed(&l->reuse_age[b], 1);
  return g;
}

void ldg__pools_shrink(ldg_ledger *l, size_t bound) {
  /* As the batch's adapt, freed as the trim frees: after a grace period.
   * Pushes racing this may pass the bound by their own segments only: each
   * checked it against the stored bound (ldg__seg_pool_put) or came before
   * the store. */
  (void)ldg__pool_shrink_to(l, bound, ldg__pool_free_later);
}

void ldg__pools_drain(ldg_ledger *l, bool now) {
  if (!now) LDG__HOOK(LDG__HOOK_POOL_DRAIN, NULL);
  /* now: nobody can pop (ledger_destroy), freed at once. */
  for (unsigned c = 0; c < LDG__POOL_CLASSES; c++)
    (void)ldg__pool_empty_class(l, c,
                                now ? ldg__seg_destroy : ldg__pool_free_later);
}

/* ---- Inspection (ledger_testing.h) ------------------------------------------ */

size_t ldg__pool_count(ldg_ledger *l, unsigned cls) {
  if (l == NULL || cls >= LDG__POOL_CLASSES) return 0;
  size_t n = 0;
  /* No visitor count (segment.c, HOT REUSE): only pooled segments, never
   * a stream's linked or parked ones. */
  ldg__rcu_read_lock();
  /* As the drain: the acquire orders the relaxed link loads. */
  for (struct ldg__seg *g = ldg__load_acquire(&l->pools[cls].top); g != NULL;
       g = ldg__load_relaxed(&g->next)) {
    n++;
  }
  ldg__rcu_read_unlock();
  return n;
}

unsigned long ldg__pool_reused(ldg_ledger *l, unsigned cls) {
  if (l == NULL || cls >= LDG__POOL_CLASSES) return 0;
  return ldg__load_relaxed(&l->pools[cls].reused); /* a statistic */
}

size_t ldg__pool_seg_bytes(unsigned cls) {
  return ldg__seg_bytes((uint32_t)8 << cls);
}

unsigned long ldg__pool_reuse_age(struct ldg_ledger *l, unsigned bucket) {
  if (l == NULL || bucket >= LDG__REUSE_AGES) return 0;
  return ldg__load_relaxed(&l->reuse_age[bucket]); /* a statistic */
}

size_t ldg__pool_limit_in_force(struct ldg_ledger *l) {
  return l == NULL ? 0 : ldg__pool_limit_now(l);
}
