/*
 * The ledger's registry of live streams, stream lifetimes, device snapshots
 * and the cross-stream queries.
 *
 * REGISTRY
 *   A doubly linked list of live streams. Writers hold ledger.reg_lock:
 *   stream create (links), ledger destroy (walks) and whoever drains the
 *   stack of destroyed streams (unlinks, see below). Readers (snapshots,
 *   queries, settle) take no lock: they walk reg_next pointers under
 *   rcu_read_lock. Insertion publishes a fully built stream with a release
 *   store; removal stores the successor into the predecessor and leaves the
 *   removed stream's own reg_next intact, so a reader standing on it walks
 *   on. A removed stream is freed only after it was unlinked, its last
 *   reference dropped and finalised, and then a grace period, so no reader
 *   ever touches freed memory. Readers skip streams marked destroyed (some
 *   stay on the list for a while, see below); to keep one beyond the
 *   read-side section they take a reference with ldg__stream_tryref, which
 *   fails once the count reached zero (the stream is being finalised).
 *
 * UNLINKING WITHOUT WAITING
 *   A stream is marked destroyed on the release paths too (a fired wait, a
 *   release_marks or an unref dropping the last reference), which must
 *   never wait for a mutex, and a thread may stall holding reg_lock (in
 *   stream create). So the destroyer does not unlink: it pushes the stream
 *   on ledger.unlink_pending, a lock-free stack (only pushes, and a
 *   pop-all by exchange: no ABA), then trylocks reg_lock and, if it got
 *   it, unlinks everything pending. Every holder of reg_lock drains the
 *   stack before unlocking and, after unlocking, looks again (trylocking
 *   if non-empty). Claim: once nobody holds reg_lock, nothing is pending.
 *   The pusher does push; seq_cst fence; trylock. A holder does unlock;
 *   seq_cst fence; load the stack. If the pusher's trylock failed it read
 *   the mutex held by some holder H before H's unlock; had H's fence come
 *   first in the single order of seq_cst fences, the trylock (after the
 *   pusher's fence) would have read H's unlock or later (C11 7.17.3, the
 *   rules for seq_cst fences; the mutex word read as an atomic object, as
 *   glibc's trylock and unlock are atomic operations on it). So the pusher's fence came first,
 *   and H's load sees the push or a later value of the stack: another push
 *   on top of it, or a drain that took it. Either H or a later holder
 *   drains it. Readers already skip destroyed streams, so a stream pending
 *   for a while changes no answer; ldg_has_nonblocking's count drops when
 *   the stream is marked destroyed, not when it is unlinked.
 *   The stream's memory needs both its unlink and its finalisation: each
 *   sets one bit of stream.life (acq_rel), and whoever sets the second
 *   defers the free to a grace period.
 *
 * LIFETIMES
 *   A stream is allocated with one reference (the creator's). Waits and
 *   snapshots hold references. The last unref finalises it (release.c):
 *   destroy if needed — releasing everything — then free after its unlink
 *   and a grace period. Every stream struct, ring segment and out-of-line
 *   payload holds a reference to its ledger, and so does the ledger's owner
 *   until ldg_ledger_destroy, so handles stay valid after the ledger is
 *   destroyed until they are unreferenced, and no deferred free ever
 *   touches a freed ledger. ldg_ledger_destroy may race the holders'
 *   unrefs: it takes its reference on a registered stream with
 *   ldg__stream_tryref, and leaves one whose count reached zero to the
 *   thread finalising it, waiting (yielding, not holding the mutex) until
 *   that thread unlinks it. */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

/* ---- Ledger ------------------------------------------------------------------ */

/* Relaxed: the caller already holds a reference (or the ledger is new), so
 * the count cannot reach 0 meanwhile; the add publishes nothing. */
void ldg__ledger_ref(ldg_ledger *l) { ldg__fetch_add_relaxed(&l->refs, 1); }

void ldg__ledger_unref(ldg_ledger *l) {
  /* acq_rel: every use of l through other references happens-before the
   * free by whoever drops the last one (the usual reference count). */
  if (ldg__fetch_sub_acq_rel(&l->refs, 1) != 1) return;
  pthread_mutex_destroy(&l->reg_lock);
  ldg__vindex_free(l->vindex); /* nothing can enqueue or release any more */
  ldg__free(l);
}

int ldg_ledger_create(ldg_ledger **out) {
  if (out == NULL) return LDG_EINVAL;
  ldg_ledger *l = ldg__aligned_alloc(LDG__CACHE_LINE, sizeof(*l));
  if (l == NULL) return LDG_ENOMEM;
  memset(l, 0, sizeof(*l));
  if (pthread_mutex_init(&l->reg_lock, NULL) != 0) {
    ldg__free(l);
    return LDG_ENOMEM;
  }
  atomic_init(&l->reg_head, NULL);
  atomic_init(&l->unlink_pending, NULL);
  atomic_init(&l->next_id, 1);
  atomic_init(&l->n_nonblocking, 0);
  atomic_init(&l->refs, 1);
  atomic_init(&l->bytes, 0);
  atomic_init(&l->destroying, false);
  atomic_init(&l->queried, false);
  atomic_init(&l->pool_bytes, 0);
  atomic_init(&l->pool_limit, LDG__POOL_DEFAULT_LIMIT);
  atomic_init(&l->pool_auto, LDG__POOL_FLOOR); /* until a batch comes */
  l->batch_bytes = 0;
  for (unsigned b = 0; b < LDG__REUSE_AGES; b++)
    atomic_init(&l->reuse_age[b], 0);
  for (unsigned c = 0; c < LDG__POOL_CLASSES; c++) {
    atomic_init(&l->pools[c].top, NULL);
  }
  /* The process's segment reclaimer (reclaim.c); without one (pthread_create
   * failed) segments are retired through call_rcu. */
  ldg__reclaim_start();
  *out = l;
  return LDG_OK;
}

static void ldg__registry_unlock(ldg_ledger *l);
static void ldg__registry_drain_locked(ldg_ledger *l);

void ldg_ledger_destroy(ldg_ledger *l) {
  if (l == NULL) return;
  for (;;) {
    /* Waits: ledger destroy is a rare path (and may block). */
    pthread_mutex_lock(&l->reg_lock);
    ldg__registry_drain_locked(l); /* destroyed ones leave the list first */
    LDG__HOOK(LDG__HOOK_REGISTRY_LOCKED, NULL);
    /* Up to LDG__DESTROY_BATCH streams from the head, destroyed together:
     * one heavy barrier for all the owned and single-issuer ones among
     * them (ldg__destroy_batch), not one each. A stream whose count
     * reached 0 is being finalised by the thread that dropped it (a
     * holder's ldg_stream_unref, which ledger.h allows now): never revive
     * it. That thread unlinks it, or pushes it for us. */
    ldg_stream *batch[LDG__DESTROY_BATCH];
    size_t n = 0;
    ldg_stream *head = ldg__load_relaxed(&l->reg_head); /* under reg_lock */
    ldg_stream *busy = NULL; /* the first one being finalised */
    for (ldg_stream *s = head; s != NULL && n < LDG__DESTROY_BATCH;
         s = ldg__load_relaxed(&s->reg_next)) { /* under reg_lock */
      if (ldg__stream_tryref(s))
        batch[n++] = s;
      else if (busy == NULL)
        busy = s;
    }
    ldg__registry_unlock(l);
    if (head == NULL) break;
    /* Each only as a value. */
    if (busy != NULL) LDG__HOOK(LDG__HOOK_LEDGER_DESTROY_PICK, busy);
    for (size_t i = 0; i < n; i++)
      LDG__HOOK(LDG__HOOK_LEDGER_DESTROY_PICK, batch[i]);
    if (n == 0) {
      sched_yield(); /* not holding the mutex: let the finalisers run */
      continue;
    }
    ldg__destroy_batch(batch, n); /* their keeps run here */
    for (size_t i = 0; i < n; i++) ldg_stream_unref(batch[i]);
  }
  /* Let deferred frees (segments in the reclaimer's list or its batch in
   * progress, streams) run, then empty the pools; a stream unreferenced
   * later frees its segments instead of pooling them. */
  ldg__store_release(&l->destroying, true); /* acquire in ldg__seg_pool_put */
  /* Store buffering with a pool put's push (see ldg__seg_pool_put): our
   * drain below sees its push, or it sees the flag. */
  ldg__fence_seq_cst();
  ldg__reclaim_barrier();
  ldg__pools_drain(l, true);
  ldg__ledger_unref(l);
}

/* Relaxed, as every add and sub of bytes: a statistic, publishing nothing
 * (tests read it at quiescent points, after ldg_quiesce's barrier). */
size_t ldg_ledger_bytes(ldg_ledger *l) {
  return l == NULL ? 0 : ldg__load_relaxed(&l->bytes);
}

void ldg_quiesce(void) { ldg__reclaim_barrier(); }

void ldg_ledger_trim(ldg_ledger *l) {
  if (l == NULL) return;
  /* Every stream's spare (segment.c, THE SPARE) first: retired, they reach
   * the pool through the barrier below and leave it with the drain. Under
   * RCU: a stream is freed only after a grace period once unlinked. No
   * visitor count (segment.c, HOT REUSE): the only segment reached is the
   * spare, taken by CAS, then ours alone. */
  ldg__rcu_read_lock();
  for (ldg_stream *s = ldg__load_acquire(&l->reg_head); s != NULL;
       s = ldg__load_acquire(&s->reg_next))
    ldg__ring_drop_spare(s);
  ldg__rcu_read_unlock();
  /* Segments retired before the call reach the pool from the reclaimer's
   * batch (or their callbacks): let those run first, so the trim takes
   * them too. */
  ldg__reclaim_barrier();
  ldg__pools_drain(l, false);
}

int ldg_ledger_set_pool_limit(ldg_ledger *l, size_t bytes) {
  if (l == NULL) return LDG_EINVAL;
  ldg__store_relaxed(&l->pool_limit, bytes); /* a bound; publishes nothing */
  if (bytes == 0) {
    ldg_ledger_trim(l);
  } else {
    /* What the pool holds above the new bound goes now, not at the
     * ledger's next batch (a quiet ledger may not have one). Puts from now
     * on check the new bound. */
    ldg__pools_shrink(l, bytes);
  }
  return LDG_OK;
}

int ldg_ledger_index_vectors(ldg_ledger *l, size_t ids) {
  if (l == NULL || ids == 0 || ids > ((size_t)1 << 25)) return LDG_EINVAL;
  struct ldg__vindex *x = ldg__vindex_new(ids);
  if (x == NULL) return LDG_ENOMEM;
  /* Waits: a configuration call, before any stream (the rare paths the
   * contract allows a lock on). Every stream creation takes its id, then
   * links the stream under this mutex. One that locked it before us took
   * its id before, so the load sees that id: refused. One that locks it
   * after us happens-after the store below, and so does every enqueue on
   * that stream (vindex.c, WHY ONLY BEFORE THE FIRST STREAM). Relaxed
   * load: ordered by the mutex as just said. */
  pthread_mutex_lock(&l->reg_lock);
  bool fresh = ldg__load_relaxed(&l->next_id) == 1 && l->vindex == NULL;
  if (fresh) l->vindex = x;
  pthread_mutex_unlock(&l->reg_lock);
  if (!fresh) {
    ldg__vindex_free(x);
    return LDG_EBUSY;
  }
  /* Relaxed: a statistic. */
  ldg__fetch_add_relaxed(&l->bytes, ldg__vindex_bytes(x));
  return LDG_OK;
}

/* ---- Registry --------------------------------------------------------------- */

/* Takes s off the list. Caller holds reg_lock. */
static void ldg__registry_remove_locked(ldg_stream *s) {
  ldg_ledger *l = s->ledger;
  ldg_stream *next = ldg__load_relaxed(&s->reg_next); /* under reg_lock */
  /* Release: publishes next's links to readers walking from the
   * predecessor (acquire in their walk); next itself was published when it
   * was linked. */
  if (s->reg_prev != NULL) {
    ldg__store_release(&s->reg_prev->reg_next, next);
  } else {
    ldg__store_release(&l->reg_head, next);
  }
  if (next != NULL) next->reg_prev = s->reg_prev;
  /* s->reg_next stays: a reader standing on s walks on to next. */
}

/* Unlinks every stream waiting on unlink_pending. Caller holds reg_lock. */
static void ldg__registry_drain_locked(ldg_ledger *l) {
  /* acq_rel: the acquire pairs with the release half of the pushing CAS in
   * ldg__registry_unlink, so each pushed stream's unlink_next is visible. */
  ldg_stream *s =
      ldg__exchange_acq_rel(&l->unlink_pending, (ldg_stream *)NULL);
  while (s != NULL) {
    ldg_stream *next = s->unlink_next; /* read before s may be freed */
    LDG__HOOK(LDG__HOOK_REGISTRY_LOCKED, s);
    ldg__registry_remove_locked(s);
    ldg__stream_life(s, LDG__LIFE_UNLINKED);
    s = next;
  }
}

/* The second half of the handshake (UNLINKING WITHOUT WAITING): called by
 * whoever pushed a stream or released reg_lock. Unlinks what is pending if
 * the mutex is free, and looks again after unlocking. Never waits. */
static void ldg__registry_settle(ldg_ledger *l) {
  for (;;) {
    /* Between our push or unlock and the load below. */
    ldg__fence_seq_cst();
    /* Relaxed: the fence orders it; the drain's exchange reads the stack
     * itself. */
    if (ldg__load_relaxed(&l->unlink_pending) == NULL) return;
    if (pthread_mutex_trylock(&l->reg_lock) != 0) return; /* its holder */
    ldg__registry_drain_locked(l);
    pthread_mutex_unlock(&l->reg_lock);
  }
}

/* Every holder of reg_lock lets go through here: it unlinks what is pending,
 * unlocks, then settles. */
static void ldg__registry_unlock(ldg_ledger *l) {
  ldg__registry_drain_locked(l);
  pthread_mutex_unlock(&l->reg_lock);
  ldg__registry_settle(l);
}

static void ldg__registry_link(ldg_stream *s) {
  ldg_ledger *l = s->ledger;
  /* Waits: stream create is the rare path ledger.h allows a lock on. */
  pthread_mutex_lock(&l->reg_lock);
  /* Relaxed: under reg_lock; s->reg_next is published by the release
   * store of reg_head below. */
  ldg_stream *first = ldg__load_relaxed(&l->reg_head);
  /* The vector index, copied into the stream so that its enqueues and
   * releases read it on the stream's own read-mostly line, not on the
   * ledger's line with l->refs, which every segment and payload
   * allocation writes (issue 11, round 3). Under reg_lock: a setter that
   * succeeded held it before us (vindex.c, WHY ONLY BEFORE THE FIRST
   * STREAM), and the store below publishes s to the registry's readers;
   * the caller's own enqueues follow create's return. */
  s->vindex = l->vindex;
  ldg__store_relaxed(&s->reg_next, first);
  s->reg_prev = NULL;
  if (first != NULL) first->reg_prev = s;
  /* Publishes s, fully initialised, to readers (acquire in their walk). */
  ldg__store_release(&l->reg_head, s);
  if (s->flags & LDG_STREAM_NONBLOCKING) {
    /* Relaxed: a counter ldg_has_nonblocking reads as a hint, with nothing
     * else to publish (the stream itself was published above). */
    ldg__fetch_add_relaxed(&l->n_nonblocking, 1);
  }
  LDG__HOOK(LDG__HOOK_REGISTRY_LOCKED, s);
  ldg__registry_unlock(l);
}

void ldg__registry_unlink(ldg_stream *s) {
  ldg_ledger *l = s->ledger;
  if (s->flags & LDG_STREAM_NONBLOCKING) {
    /* At once, not at the unlink: a destroyed stream is not "live". Relaxed
     * as the increment; the increment happened-before (the handle was
     * returned by create). */
    ldg__fetch_sub_relaxed(&l->n_nonblocking, 1);
  }
  /* Relaxed: the CAS below publishes; a stale top only fails it. */
  ldg_stream *top = ldg__load_relaxed(&l->unlink_pending);
  do {
    s->unlink_next = top;
    /* Release half publishes unlink_next (acquire in the drain); the
     * seq_cst fence in ldg__registry_settle orders it before the
     * trylock. */
  } while (!ldg__cas_weak_acq_rel(&l->unlink_pending, &top, s));
  ldg__registry_settle(l);
}

/* First live stream at or after s in the registry. Under RCU. */
static ldg_stream *ldg__live_from(ldg_stream *s) {
  /* destroyed: a skip (acquire pairs with the destroyer's seq_cst CAS; a
   * stream destroyed just after is answered for as live, which was true
   * during the call). reg_next: acquire pairs with the release stores that
   * link and unlink, so the stream reached is fully initialised. */
  while (s != NULL && ldg__load_acquire(&s->destroyed)) {
    s = ldg__load_acquire(&s->reg_next);
  }
  return s;
}

#define LDG__FOR_EACH_LIVE(l, s)                                   \
  for (ldg_stream *s = ldg__live_from(ldg__load_acquire(&(l)->reg_head)); \
       s != NULL; s = ldg__live_from(ldg__load_acquire(&s->reg_next)))

/* ---- Streams ---------------------------------------------------------------- */

int ldg_stream_create(ldg_ledger *l, int device, unsigned flags,
                      ldg_drain_fn drain, void *drain_ctx, ldg_stream **out) {
  if (l == NULL || out == NULL || device < 0) return LDG_EINVAL;
  if ((flags & ~(LDG_STREAM_NONBLOCKING | LDG_STREAM_SINGLE_ISSUER |
                 LDG_STREAM_SHARED)) != 0)
    return LDG_EINVAL;
  if ((flags & LDG_STREAM_SINGLE_ISSUER) && (flags & LDG_STREAM_SHARED))
    return LDG_EINVAL;
  if ((flags & LDG_STREAM_NONBLOCKING) && drain == NULL) return LDG_EINVAL;
  /* The asymmetric handshakes' fences (reserve.c, SINGLE-ISSUER STREAMS;
   * owned.c, OWNED STREAMS): the mode is picked (and membarrier
   * registered) before the first stream exists, hence before any owned
   * reservation. */
  ldg__asym_init();
  /* Started by ldg_ledger_create; again here in a child forked since (the
   * reclaimer does not survive fork: reclaim.c). One relaxed load when it
   * runs. */
  ldg__reclaim_start();
  ldg_stream *s = ldg__aligned_alloc(LDG__CACHE_LINE, sizeof(*s));
  if (s == NULL) return LDG_ENOMEM;
  memset(s, 0, sizeof(*s));
  s->ledger = l;
  s->device = device;
  s->flags = flags;
  s->drain = drain;
  s->drain_ctx = drain_ctx;
  atomic_init(&s->destroyed, false);
  atomic_init(&s->reg_next, NULL);
  atomic_init(&s->life, 0);
  atomic_init(&s->refs, 1);
  atomic_init(&s->visitors, 0);
  atomic_init(&s->hot_reused, 0);
  /* Owned streams (owned.c, OWNED STREAMS) only where membarrier is in use
   * (relaxed: set once, before ldg__asym_init returned); a single-issuer
   * stream never reads the word. */
  bool ownable = !(flags & (LDG_STREAM_SHARED | LDG_STREAM_SINGLE_ISSUER)) &&
                 atomic_load_explicit(&ldg__asym_membarrier,
                                      memory_order_relaxed);
  atomic_init(&s->owner, ownable ? (uint64_t)LDG__OWN_UNCLAIMED
                                 : (uint64_t)LDG__OWN_SHARED);
  if (ldg__ring_init(s) != LDG_OK) {
    ldg__free(s);
    return LDG_ENOMEM;
  }
  /* Taken only once nothing can fail: ids are never reused or skipped. */
  /* Relaxed: the RMW alone makes ids unique; refs as ldg__ledger_ref (the
   * caller's ledger reference is held); bytes a statistic. */
  s->id = ldg__fetch_add_relaxed(&l->next_id, 1);
  ldg__fetch_add_relaxed(&l->refs, 1);
  ldg__fetch_add_relaxed(&l->bytes, sizeof(*s));
  ldg__registry_link(s);
  *out = s;
  return LDG_OK;
}

int ldg_stream_destroy(ldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  return ldg__destroy(s) ? LDG_OK : LDG_EDESTROYED;
}

/* Relaxed: the caller holds a reference, so the count cannot reach 0
 * meanwhile; an increment publishes nothing (the decrements are acq_rel). */
void ldg_stream_ref(ldg_stream *s) { ldg__fetch_add_relaxed(&s->refs, 1); }

bool ldg__stream_tryref(ldg_stream *s) {
  /* Relaxed: the CAS on refs is totally ordered with the acq_rel decrement
   * that reaches 0, so it never succeeds after it; s's memory is kept by
   * RCU or the registry (the caller found it there), and its contents were
   * published when it was linked. */
  uint64_t r = ldg__load_relaxed(&s->refs);
  while (r != 0) {
    if (atomic_compare_exchange_weak_explicit(&s->refs, &r, r + 1,
                                              memory_order_relaxed,
                                              memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

bool ldg__stream_unref_is_last(ldg_stream *s) {
  /* acq_rel: everything done through other references happens-before the
   * finalisation by whoever drops the last one. */
  return ldg__fetch_sub_acq_rel(&s->refs, 1) == 1;
}

void ldg_stream_unref(ldg_stream *s) {
  if (s == NULL) return;
  if (ldg__stream_unref_is_last(s)) ldg__finalize(s);
}

static void ldg__stream_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg_stream *s =
      (ldg_stream *)((char *)head - offsetof(struct ldg_stream, rcu));
  ldg_ledger *l = s->ledger;
  ldg__ring_free_all(s);
  ldg__fetch_sub_relaxed(&l->bytes, sizeof(*s)); /* a statistic */
  ldg__free(s);
  ldg__ledger_unref(l);
}

int ldg_stream_set_finalizer(ldg_stream *s, ldg_keep finalizer) {
  if (s == NULL) return LDG_EINVAL;
  /* Plain store: the caller holds a reference and has not shared s yet;
   * the acq_rel of the unref that drops the last reference orders it
   * before the read below. */
  s->finalizer = finalizer;
  return LDG_OK;
}

void ldg__stream_life(ldg_stream *s, uint32_t bit) {
  if (bit == LDG__LIFE_FINALIZED && s->finalizer.release != NULL) {
    /* The last reference is gone (no tryref can succeed any more), so no
     * drain of s runs or will run: the owner may free the drain's context.
     * Before the bit: once both are set s may be freed. The finaliser
     * (release.c) calls this outside any lock and RCU read-side section,
     * on the thread that dropped the last reference, as a keep. */
    s->finalizer.release(s->finalizer.ctx);
  }
  /* acq_rel: whichever of the finaliser and the unlinker comes first, its
   * writes to s happen-before the other's call_rcu, and so the free. */
  uint32_t before = ldg__fetch_or_acq_rel(&s->life, bit);
  if ((before | bit) == (LDG__LIFE_FINALIZED | LDG__LIFE_UNLINKED)) {
    ldg__call_rcu(&s->rcu, ldg__stream_free_cb);
  }
}

int ldg_stream_check_live(const ldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  /* Acquire: pairs with the destroyer's seq_cst CAS. */
  return ldg__load_acquire(&s->destroyed) ? LDG_EDESTROYED : LDG_OK;
}

uint64_t ldg_stream_id(const ldg_stream *s) { return s->id; }
int ldg_stream_device(const ldg_stream *s) { return s->device; }
bool ldg_stream_is_nonblocking(const ldg_stream *s) {
  return (s->flags & LDG_STREAM_NONBLOCKING) != 0;
}

/* ---- Device snapshots ---------------------------------------------------------- */

static size_t ldg__marks_bytes(size_t n) {
  return sizeof(ldg_marks) + n * sizeof(((ldg_marks *)0)->items[0]);
}

int ldg_device_marks(ldg_ledger *l, int device, ldg_marks **out) {
  if (l == NULL || out == NULL || device < 0) return LDG_EINVAL;
  size_t cap = 8;
  ldg_marks *m = ldg__malloc(ldg__marks_bytes(cap));
  if (m == NULL) return LDG_ENOMEM;
  m->n = 0;
  bool failed = false;
  ldg__rcu_read_lock();
  LDG__FOR_EACH_LIVE(l, s) {
    if (s->device != device) continue;
    if (m->n == cap) {
      /* Grow in place, keeping the references taken: dropping them could
       * drop a last one (its holder unreferenced it meanwhile) and run
       * keeps, which this call does not (ledger.h's table). */
      ldg_marks *bigger = ldg__malloc(ldg__marks_bytes(cap * 4));
      if (bigger == NULL) {
        failed = true;
        break;
      }
      memcpy(bigger, m, ldg__marks_bytes(m->n));
      ldg__free(m);
      m = bigger;
      cap *= 4;
    }
    if (!ldg__stream_tryref(s)) continue; /* being finalised */
    m->items[m->n].s = s;
    /* Mark, then complete: read before the caller's context sync. */
    m->items[m->n].mark = ldg_mark(s);
    m->n++;
  }
  ldg__rcu_read_unlock();
  if (failed) {
    ldg_marks_discard(m); /* see ledger.h's table, (g) */
    return LDG_ENOMEM;
  }
  *out = m;
  return LDG_OK;
}

int ldg_release_marks(ldg_marks *m) {
  if (m == NULL) return LDG_EINVAL;
  for (size_t i = 0; i < m->n; i++) {
    ldg_stream *s = m->items[i].s;
    /* A skip (acquire pairs with the destroyer's CAS); a destroy racing
     * the release claims a disjoint interval (release.c). */
    if (!ldg__load_acquire(&s->destroyed)) ldg__release(s, m->items[i].mark);
    ldg_stream_unref(s);
  }
  ldg__free(m);
  return LDG_OK;
}

void ldg_marks_discard(ldg_marks *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->n; i++) ldg_stream_unref(m->items[i].s);
  ldg__free(m);
}

size_t ldg_marks_count(const ldg_marks *m) { return m == NULL ? 0 : m->n; }

/* ---- Queries ------------------------------------------------------------------- */

size_t ldg_pending_count(const ldg_stream *s) {
  if (ldg__load_acquire(&s->destroyed)) return 0; /* the destroyer's CAS */
  /* Released operations first, then what was enqueued: anything that moves
   * in between is counted as pending, never as released. The three loads
   * are acquire so that none is reordered before the one above it.
   * waits_enqueued: its acquire pairs with the release add in
   * ldg__ring_enqueue, made after the wait's reserving CAS on tail, so the
   * tail loaded next includes every wait counted (else ops = t - waits
   * would miss an operation). ops_released: its acquire pairs with the
   * release adds of whoever took operations (ldg__take_chunk, an overtaken
   * enqueuer), each made after the operation's reservation on tail was
   * visible to it, so the tail loaded after it covers every operation
   * counted released. */
  uint64_t done = ldg__load_acquire(&s->ops_released);
  uint64_t waits = ldg__load_acquire(&s->waits_enqueued);
  ldg_seq t = ldg__tail_acquire(s); /* tail, or the owner's otail */
  uint64_t ops = t > waits ? t - waits : 0;
  return ops > done ? (size_t)(ops - done) : 0;
}

/* Stops a walk at its first match. */
static bool ldg__stop(const ldg_stream *s, ldg_seq seq, void *arg) {
  (void)s, (void)seq, (void)arg;
  return true;
}

/* Whether some live stream of l has a pending operation p matches. */
static bool ldg__any_live_holds(ldg_ledger *l, const struct ldg__probe *p) {
  bool found = false;
  ldg__rcu_read_lock();
  LDG__FOR_EACH_LIVE(l, s) {
    if (ldg__ring_visit(s, p, ldg__stop, NULL)) {
      found = true;
      break;
    }
  }
  ldg__rcu_read_unlock();
  return found;
}

bool ldg_holds_vector(ldg_ledger *l, uint64_t vec_id) {
  if (l == NULL) return false;
  /* A definite miss of the index (vindex.c): no walk. */
  if (l->vindex != NULL && ldg__vindex_absent(l->vindex, vec_id)) return false;
  struct ldg__probe p = {LDG__PROBE_VEC, vec_id, 0, 0};
  return ldg__any_live_holds(l, &p);
}

bool ldg_holds_host_range(ldg_ledger *l, uintptr_t addr, size_t bytes) {
  if (l == NULL || bytes == 0) return false;
  /* A probe reaching past the top of the address space is clipped. */
  size_t room = (size_t)(UINTPTR_MAX - addr) + 1;
  size_t n = (room != 0 && bytes > room) ? room : bytes;
  struct ldg__probe p = {LDG__PROBE_RANGE, 0, addr, addr + (n - 1)};
  return ldg__any_live_holds(l, &p);
}

size_t ldg_nonblocking_holding(ldg_ledger *l, uint64_t vec_id,
                               ldg_stream **out, size_t cap) {
  if (l == NULL) return 0;
  if (l->vindex != NULL && ldg__vindex_absent(l->vindex, vec_id)) return 0;
  if (out == NULL) cap = 0;
  struct ldg__probe p = {LDG__PROBE_VEC, vec_id, 0, 0};
  size_t n = 0;
  ldg__rcu_read_lock();
  LDG__FOR_EACH_LIVE(l, s) {
    if (!(s->flags & LDG_STREAM_NONBLOCKING)) continue;
    if (!ldg__ring_visit(s, &p, ldg__stop, NULL)) continue;
    if (n < cap) {
      if (!ldg__stream_tryref(s)) continue; /* being finalised */
      out[n] = s;
    }
    n++;
  }
  ldg__rcu_read_unlock();
  return n;
}

bool ldg_has_nonblocking(ldg_ledger *l) {
  /* Relaxed: a count; the streams themselves are published by the
   * registry. */
  return l != NULL && ldg__load_relaxed(&l->n_nonblocking) != 0;
}

int ldg_settle_vector(ldg_ledger *l, uint64_t vec_id) {
  if (l == NULL) return LDG_EINVAL;
  if (!ldg_has_nonblocking(l)) return LDG_OK;
  ldg_stream *local[16];
  ldg_stream **holders = local;
  size_t cap = sizeof(local) / sizeof(local[0]);
  size_t n;
  for (;;) {
    n = ldg_nonblocking_holding(l, vec_id, holders, cap);
    if (n <= cap) break;
    for (size_t i = 0; i < cap; i++) ldg_stream_unref(holders[i]);
    if (holders != local) ldg__free(holders);
    cap = n + n / 2;
    holders = ldg__malloc(cap * sizeof(*holders));
    if (holders == NULL) return LDG_ENOMEM;
  }
  int rc = LDG_OK;
  for (size_t i = 0; i < n; i++) {
    ldg_stream *s = holders[i];
    /* Mark, then complete: the mark is read before the drain. */
    ldg_seq m = ldg_mark(s);
    if (s->drain(s->drain_ctx) != 0) {
      rc = LDG_EDRAIN; /* nothing of s is released */
    } else if (!ldg__load_acquire(&s->destroyed)) { /* as release_marks */
      ldg__release(s, m);
    }
    ldg_stream_unref(s);
  }
  if (holders != local) ldg__free(holders);
  return rc;
}
