/*
 * The ledger's registry of live streams, stream lifetimes, device snapshots
 * and the cross-stream queries.
 *
 * REGISTRY
 *   A doubly linked list of live streams. Writers (stream create, destroy,
 *   ledger destroy) hold ledger.reg_lock; readers (snapshots, queries,
 *   settle) take no lock: they walk reg_next pointers under rcu_read_lock.
 *   Insertion publishes a fully built stream with a release store; removal
 *   stores the successor into the predecessor and leaves the removed
 *   stream's own reg_next intact, so a reader standing on it walks on. A
 *   removed stream is freed only after its last reference is dropped and a
 *   grace period has passed, so no reader ever touches freed memory. Readers
 *   skip streams marked destroyed; to keep one beyond the read-side section
 *   they take a reference with ldg__stream_tryref, which fails once the count
 *   reached zero (the stream is being finalised).
 *
 * LIFETIMES
 *   A stream is allocated with one reference (the creator's). Waits and
 *   snapshots hold references. The last unref finalises it (ring.c): destroy
 *   if needed — releasing everything — then free after a grace period. Every
 *   stream struct, ring segment and out-of-line payload holds a reference to
 *   its ledger, and so does the ledger's owner until ldg_ledger_destroy, so
 *   handles stay valid after the ledger is destroyed until they are
 *   unreferenced, and no deferred free ever touches a freed ledger.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdlib.h>
#include <string.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

/* ---- Ledger ------------------------------------------------------------------ */

void ldg__ledger_ref(ldg_ledger *l) { ldg__fetch_add_relaxed(&l->refs, 1); }

void ldg__ledger_unref(ldg_ledger *l) {
  if (ldg__fetch_sub_acq_rel(&l->refs, 1) != 1) return;
  pthread_mutex_destroy(&l->reg_lock);
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
  atomic_init(&l->next_id, 1);
  atomic_init(&l->n_nonblocking, 0);
  atomic_init(&l->refs, 1);
  atomic_init(&l->bytes, 0);
  atomic_init(&l->destroying, false);
  atomic_init(&l->pool_bytes, 0);
  atomic_init(&l->pool_limit, LDG__POOL_DEFAULT_LIMIT);
  for (unsigned c = 0; c < LDG__POOL_CLASSES; c++) {
    atomic_init(&l->pools[c].top, NULL);
  }
  *out = l;
  return LDG_OK;
}

void ldg_ledger_destroy(ldg_ledger *l) {
  if (l == NULL) return;
  for (;;) {
    pthread_mutex_lock(&l->reg_lock);
    ldg_stream *s = ldg__load_relaxed(&l->reg_head);
    /* Registered streams are never destroyed and so hold a reference. */
    if (s != NULL) ldg_stream_ref(s);
    pthread_mutex_unlock(&l->reg_lock);
    if (s == NULL) break;
    (void)ldg__destroy(s); /* unlinks it; its keeps run here */
    ldg_stream_unref(s);
  }
  /* Let deferred frees (segments, streams) run, then empty the pools; a
   * stream unreferenced later frees its segments instead of pooling them. */
  ldg__store_release(&l->destroying, true);
  ldg__rcu_barrier();
  ldg__pools_drain(l, true);
  ldg__ledger_unref(l);
}

size_t ldg_ledger_bytes(ldg_ledger *l) {
  return l == NULL ? 0 : ldg__load_relaxed(&l->bytes);
}

void ldg_quiesce(void) { ldg__rcu_barrier(); }

void ldg_ledger_trim(ldg_ledger *l) {
  if (l == NULL) return;
  /* Segments retired before the call reach the pool from their callbacks:
   * let those run first, so the trim takes them too. */
  ldg__rcu_barrier();
  ldg__pools_drain(l, false);
}

int ldg_ledger_set_pool_limit(ldg_ledger *l, size_t bytes) {
  if (l == NULL) return LDG_EINVAL;
  ldg__store_relaxed(&l->pool_limit, bytes);
  if (bytes == 0) ldg_ledger_trim(l);
  return LDG_OK;
}

/* ---- Registry --------------------------------------------------------------- */

static void ldg__registry_link(ldg_stream *s) {
  ldg_ledger *l = s->ledger;
  pthread_mutex_lock(&l->reg_lock);
  ldg_stream *first = ldg__load_relaxed(&l->reg_head);
  ldg__store_relaxed(&s->reg_next, first);
  s->reg_prev = NULL;
  if (first != NULL) first->reg_prev = s;
  /* Publishes s, fully initialised, to readers (acquire in their walk). */
  ldg__store_release(&l->reg_head, s);
  if (s->flags & LDG_STREAM_NONBLOCKING) {
    ldg__fetch_add_relaxed(&l->n_nonblocking, 1);
  }
  pthread_mutex_unlock(&l->reg_lock);
}

void ldg__registry_unlink(ldg_stream *s) {
  ldg_ledger *l = s->ledger;
  pthread_mutex_lock(&l->reg_lock);
  ldg_stream *next = ldg__load_relaxed(&s->reg_next);
  if (s->reg_prev != NULL) {
    ldg__store_release(&s->reg_prev->reg_next, next);
  } else {
    ldg__store_release(&l->reg_head, next);
  }
  if (next != NULL) next->reg_prev = s->reg_prev;
  /* s->reg_next stays: a reader standing on s walks on to next. */
  if (s->flags & LDG_STREAM_NONBLOCKING) {
    ldg__fetch_sub_relaxed(&l->n_nonblocking, 1);
  }
  pthread_mutex_unlock(&l->reg_lock);
}

/* First live stream at or after s in the registry. Under RCU. */
static ldg_stream *ldg__live_from(ldg_stream *s) {
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
  if ((flags & ~LDG_STREAM_NONBLOCKING) != 0) return LDG_EINVAL;
  if ((flags & LDG_STREAM_NONBLOCKING) && drain == NULL) return LDG_EINVAL;
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
  atomic_init(&s->refs, 1);
  if (ldg__ring_init(s) != LDG_OK) {
    ldg__free(s);
    return LDG_ENOMEM;
  }
  /* Taken only once nothing can fail: ids are never reused or skipped. */
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

void ldg_stream_ref(ldg_stream *s) { ldg__fetch_add_relaxed(&s->refs, 1); }

bool ldg__stream_tryref(ldg_stream *s) {
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
  ldg__fetch_sub_relaxed(&l->bytes, sizeof(*s));
  ldg__free(s);
  ldg__ledger_unref(l);
}

void ldg__stream_free_deferred(ldg_stream *s) {
  ldg__call_rcu(&s->rcu, ldg__stream_free_cb);
}

int ldg_stream_check_live(const ldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
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
  for (;;) {
    ldg_marks *m = ldg__malloc(ldg__marks_bytes(cap));
    if (m == NULL) return LDG_ENOMEM;
    m->n = 0;
    bool overflow = false;
    ldg__rcu_read_lock();
    LDG__FOR_EACH_LIVE(l, s) {
      if (s->device != device) continue;
      if (m->n == cap) {
        overflow = true;
        break;
      }
      if (!ldg__stream_tryref(s)) continue; /* being finalised */
      m->items[m->n].s = s;
      /* Mark, then complete: read before the caller's context sync. */
      m->items[m->n].mark = ldg_mark(s);
      m->n++;
    }
    ldg__rcu_read_unlock();
    if (!overflow) {
      *out = m;
      return LDG_OK;
    }
    ldg_marks_discard(m);
    cap *= 4;
  }
}

int ldg_release_marks(ldg_marks *m) {
  if (m == NULL) return LDG_EINVAL;
  for (size_t i = 0; i < m->n; i++) {
    ldg_stream *s = m->items[i].s;
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

static void ldg__slot_payload(const struct ldg__slot *slot,
                              const uint64_t **w, size_t *n_vec,
                              size_t *n_rng) {
  if (slot->aux == LDG__OP_EXT) {
    *w = slot->u.op.d.ext->w;
    *n_vec = slot->u.op.d.ext->n_vec;
    *n_rng = slot->u.op.d.ext->n_rng;
  } else {
    *w = slot->u.op.d.in.w;
    *n_vec = slot->u.op.d.in.n_vec;
    *n_rng = slot->u.op.d.in.n_rng;
  }
}

static bool ldg__names_vec(const struct ldg__slot *slot, const void *arg) {
  uint64_t id = *(const uint64_t *)arg;
  const uint64_t *w;
  size_t n_vec, n_rng;
  ldg__slot_payload(slot, &w, &n_vec, &n_rng);
  for (size_t i = 0; i < n_vec; i++) {
    if (w[i] == id) return true;
  }
  return false;
}

/* Half-open overlap of [a, a + n) and [b, b + m), n, m > 0, neither wrapping;
 * written without computing an end that could be 2^64. */
static bool ldg__overlaps(uint64_t a, uint64_t n, uint64_t b, uint64_t m) {
  return a >= b ? a - b < m : b - a < n;
}

static bool ldg__touches_range(const struct ldg__slot *slot, const void *arg) {
  const ldg_range *probe = arg;
  const uint64_t *w;
  size_t n_vec, n_rng;
  ldg__slot_payload(slot, &w, &n_vec, &n_rng);
  for (size_t i = 0; i < n_rng; i++) {
    if (ldg__overlaps(w[n_vec + 2 * i], w[n_vec + 2 * i + 1], probe->addr,
                      probe->bytes)) {
      return true;
    }
  }
  return false;
}

size_t ldg_pending_count(const ldg_stream *s) {
  if (ldg__load_acquire(&s->destroyed)) return 0;
  /* Released operations first, then what was enqueued: anything that moves
   * in between is counted as pending, never as released. */
  uint64_t done = ldg__load_acquire(&s->ops_released);
  uint64_t waits = ldg__load_acquire(&s->waits_enqueued);
  ldg_seq t = ldg__load_acquire(&s->tail);
  uint64_t ops = t > waits ? t - waits : 0;
  return ops > done ? (size_t)(ops - done) : 0;
}

/* Whether some live stream of l has a pending operation fn accepts. */
static bool ldg__any_live_holds(ldg_ledger *l, ldg__entry_pred fn,
                                const void *arg) {
  bool found = false;
  ldg__rcu_read_lock();
  LDG__FOR_EACH_LIVE(l, s) {
    if (ldg__ring_any(s, fn, arg)) {
      found = true;
      break;
    }
  }
  ldg__rcu_read_unlock();
  return found;
}

bool ldg_holds_vector(ldg_ledger *l, uint64_t vec_id) {
  return l != NULL && ldg__any_live_holds(l, ldg__names_vec, &vec_id);
}

bool ldg_holds_host_range(ldg_ledger *l, uintptr_t addr, size_t bytes) {
  if (l == NULL || bytes == 0) return false;
  /* A probe reaching past the top of the address space is clipped. */
  size_t room = (size_t)(UINTPTR_MAX - addr) + 1;
  ldg_range probe = {addr, (room != 0 && bytes > room) ? room : bytes};
  return ldg__any_live_holds(l, ldg__touches_range, &probe);
}

size_t ldg_nonblocking_holding(ldg_ledger *l, uint64_t vec_id,
                               ldg_stream **out, size_t cap) {
  if (l == NULL) return 0;
  if (out == NULL) cap = 0;
  size_t n = 0;
  ldg__rcu_read_lock();
  LDG__FOR_EACH_LIVE(l, s) {
    if (!(s->flags & LDG_STREAM_NONBLOCKING)) continue;
    if (!ldg__ring_any(s, ldg__names_vec, &vec_id)) continue;
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
    } else if (!ldg__load_acquire(&s->destroyed)) {
      ldg__release(s, m);
    }
    ldg_stream_unref(s);
  }
  if (holders != local) ldg__free(holders);
  return rc;
}
