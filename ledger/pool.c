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
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
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
   * it by a few segments, never by more than their number. pool_bytes and
   * pool_limit are relaxed: they bound memory, and publish nothing.
   * dirty: relaxed; its store (a retracting enqueuer) is sequenced before
   * that enqueuer's seq_cst add to g->resolved, which the retirer's seq_cst
   * load of resolved read (a release sequence: every later change of it is
   * an RMW), and the retire happens-before this callback (grace period).
   * destroying: a first look (acquire pairs with the release store in
   * ldg_ledger_destroy); the handshake after the push decides. */
  if (ldg__load_acquire(&l->destroying) || ldg__load_relaxed(&g->dirty) ||
      ldg__load_relaxed(&l->pool_bytes) + bytes >
          ldg__load_relaxed(&l->pool_limit)) {
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

/* Pops a pooled segment of that size for s, or NULL. Under RCU. */
struct ldg__seg *ldg__pool_pop(ldg_stream *s, uint32_t size) {
  ldg_ledger *l = s->ledger;
  struct ldg__pool *p = &l->pools[ldg__pool_class(size)];
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
  /* Relaxed: counters that publish nothing. */
  ldg__fetch_sub_relaxed(&l->pool_bytes, ldg__seg_bytes(size));
  ldg__fetch_add_relaxed(&p->reused, 1);
  return g;
}

void ldg__pools_drain(ldg_ledger *l, bool now) {
  if (!now) LDG__HOOK(LDG__HOOK_POOL_DRAIN, NULL);
  for (unsigned c = 0; c < LDG__POOL_CLASSES; c++) {
    /* Acquire half: pairs with the pushing CASes (each acquired the one
     * before it), so every link below is read as pushed. */
    struct ldg__seg *g =
        ldg__exchange_acq_rel(&l->pools[c].top, (struct ldg__seg *)NULL);
    while (g != NULL) {
      struct ldg__seg *next = ldg__load_relaxed(&g->next); /* see above */
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
