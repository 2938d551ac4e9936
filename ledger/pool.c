/*
 * The per-stream ring, part 3 of 4: the retired-segment pool.
 *
 * THE POOLS
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
 *   A segment enters a pool only from its RCU callback, after its grace
 *   period, and leaves it by a pop under rcu_read_lock. That makes the
 *   Treiber stack free of ABA: a popper that read top = g and g->next cannot
 *   see g pushed again before its CAS, because g's next trip into the pool
 *   waits for a grace period that waits for the popper's read-side section.
 */
#include "ledger/atomics.h"
#include "ledger/internal.h"

static unsigned ldg__pool_class(uint32_t size) {
  return (unsigned)__builtin_ctz(size) - 3; /* 8 -> 0, ..., 1024 -> 7 */
}

void ldg__seg_pool_cb(struct rcu_head *head) {
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

/* Pops a pooled segment of that size for s, or NULL. Under RCU. */
struct ldg__seg *ldg__pool_pop(ldg_stream *s, uint32_t size) {
  ldg_ledger *l = s->ledger;
  struct ldg__pool *p = &l->pools[ldg__pool_class(size)];
  struct ldg__seg *g = ldg__load_acquire(&p->top);
  for (;;) {
    if (g == NULL) return NULL;
    LDG__HOOK(LDG__HOOK_POOL_POP, s);
    if (ldg__cas_weak_acq_rel(&p->top, &g, ldg__load_relaxed(&g->next))) {
      break;
    }
  }
  ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(size));
  ldg__fetch_add_relaxed(&p->reused, 1);
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

/* ---- Inspection (ledger_testing.h) ------------------------------------------ */

size_t ldg__pool_count(ldg_ledger *l, unsigned cls) {
  if (l == NULL || cls >= LDG__POOL_CLASSES) return 0;
  size_t n = 0;
  ldg__rcu_read_lock();
  for (struct ldg__seg *g = ldg__load_acquire(&l->pools[cls].top); g != NULL;
       g = ldg__load_relaxed(&g->next)) {
    n++;
  }
  ldg__rcu_read_unlock();
  return n;
}

unsigned long ldg__pool_reused(ldg_ledger *l, unsigned cls) {
  if (l == NULL || cls >= LDG__POOL_CLASSES) return 0;
  return ldg__load_relaxed(&l->pools[cls].reused);
}

size_t ldg__pool_seg_bytes(unsigned cls) {
  return ldg__seg_bytes((uint32_t)8 << cls);
}
