/*
 * mutex_ledger.c — the original single-mutex ledger, ported to C as the
 * baseline the lock-free ledger is measured against.
 *
 * DESIGN (as in ../shared/seed/ledger-interface.txt)
 *   One mutex per ledger (the original's global `lock`) guards everything:
 *   the registry of live streams, every stream's sequence counter, its list
 *   of pending entries and its list of waits. Each enqueue allocates one
 *   entry that copies the operation's vector ids and host ranges (the
 *   original's `vec_ids : int list` and `host_ranges` lists) and appends it to
 *   the stream's list under the mutex. A release walks the list under the
 *   mutex, unlinks every entry with seq <= upto and every wait with
 *   seq <= upto; each unlinked wait releases the waited stream to its mark,
 *   transitively. Queries walk every live stream's list under the mutex.
 *   The count of live non-blocking streams is an atomic, as in the original
 *   (`nonblocking_live : int Atomic.t`), so ldg_has_nonblocking takes no lock.
 *
 * WHERE THIS PORT DEVIATES FROM THE OCAML ORIGINAL, AND WHY
 *   - Keeps. In the original a keep is an OCaml value held as a GC root
 *     ("rooted for liveness only; never inspected"): releasing an entry is
 *     dropping it from the list under the mutex, and the collector does the
 *     freeing later; no user code ever ran under the lock. Here a keep is a
 *     callback that may block and re-enter the ledger (SPEC.md), so a release
 *     unlinks entries and fired waits onto a private list under the mutex,
 *     unlocks, and only then runs the keeps (in sequence order), frees the
 *     entries and drops the waits' stream references. This is the nearest C
 *     equivalent of "unlink under the lock, the GC frees later".
 *   - Lists. `pending : entry list` is a FIFO here (head and tail pointers,
 *     entries in sequence order), so a release pops from the head in
 *     O(released) rather than rebuilding an immutable list. That is what a C
 *     programmer would write; it keeps the baseline honest, not a strawman.
 *   - Registry. The original's `live : (int, stream_state) Hashtbl.t` is an
 *     intrusive doubly-linked list: the API only ever inserts, removes a
 *     known stream and iterates, never looks a stream up by id.
 *   - Transitive release is iterative: fired waits form a FIFO work list
 *     that the release keeps draining, so chains of any length and cycles
 *     terminate without recursion (a wait fires once: it leaves its list).
 *   - Reference counts (the C contract's ref/unref) replace the GC. A stream
 *     whose last reference is dropped while a release is running its keeps
 *     is destroyed by that same loop, not by recursion.
 *   - mldg_mark and mldg_pending_count take the mutex, as every accessor of
 *     mutable stream state did in the original.
 */
#include "bench/mutex_ledger.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct mldg_entry mldg_entry;
typedef struct mldg_wait mldg_wait;

/* One operation: the header, then its ranges, then its vector ids, in one
 * allocation of `bytes` bytes. */
struct mldg_entry {
  mldg_entry *next;
  ldg_seq seq;
  ldg_keep keep;
  size_t bytes;
  size_t n_vec;
  size_t n_ranges;
  const uint64_t *vec_ids;
  const ldg_range *ranges;
};

/* b (the stream whose list holds it) waits for `on` up to `upto`. Holds a
 * reference to `on`. */
struct mldg_wait {
  mldg_wait *next;
  ldg_seq seq;
  mldg_stream *on;
  ldg_seq upto;
};

struct mldg_stream {
  mldg_ledger *ledger;
  uint64_t sid;
  int device;
  bool nonblocking;
  ldg_drain_fn drain;
  void *drain_ctx;
  atomic_size_t refs;
  /* Written under the mutex (release); read without it by check_live and
   * unref (acquire). */
  atomic_bool destroyed;

  /* Everything below: under ledger->lock. */
  ldg_seq next_seq; /* the mark: seq of the last operation or wait */
  mldg_entry *pending_head;
  mldg_entry **pending_tail;
  size_t n_pending;
  mldg_wait *waits_head;
  mldg_wait **waits_tail;
  mldg_stream *live_prev;
  mldg_stream *live_next;
  mldg_stream *zombie_next; /* run_reaped's list of streams to destroy */
};

struct mldg_ledger {
  pthread_mutex_t lock; /* THE lock: guards everything not atomic below */
  uint64_t next_sid;
  mldg_stream *live;
  size_t bytes;
  atomic_long nonblocking_live;
};

struct mldg_marks {
  mldg_ledger *ledger;
  size_t n;
  struct {
    mldg_stream *s;
    ldg_seq mark;
  } items[];
};

/* What a release unlinked under the mutex, to be finished after unlocking:
 * entries (keeps to run, in order) and fired waits (references to drop).
 * `todo` is the first fired wait whose stream was not yet released. */
typedef struct reaped {
  mldg_entry *entries;
  mldg_entry **entries_tail;
  mldg_wait *waits;
  mldg_wait **waits_tail;
  mldg_wait *todo;
} reaped;

static void reaped_init(reaped *r) {
  r->entries = NULL;
  r->entries_tail = &r->entries;
  r->waits = NULL;
  r->waits_tail = &r->waits;
  r->todo = NULL;
}

static void lock(mldg_ledger *l) { pthread_mutex_lock(&l->lock); }
static void unlock(mldg_ledger *l) { pthread_mutex_unlock(&l->lock); }

static bool is_destroyed(const mldg_stream *s) {
  return atomic_load_explicit(&s->destroyed, memory_order_acquire);
}

/* Unlinks from s every entry and wait with seq <= upto. Lock held. */
static void release_one_locked(mldg_stream *s, ldg_seq upto, reaped *r) {
  mldg_ledger *l = s->ledger;
  while (s->pending_head != NULL && s->pending_head->seq <= upto) {
    mldg_entry *e = s->pending_head;
    s->pending_head = e->next;
    if (s->pending_head == NULL) s->pending_tail = &s->pending_head;
    s->n_pending--;
    l->bytes -= e->bytes;
    e->next = NULL;
    *r->entries_tail = e;
    r->entries_tail = &e->next;
  }
  while (s->waits_head != NULL && s->waits_head->seq <= upto) {
    mldg_wait *w = s->waits_head;
    s->waits_head = w->next;
    if (s->waits_head == NULL) s->waits_tail = &s->waits_head;
    l->bytes -= sizeof *w;
    w->next = NULL;
    *r->waits_tail = w;
    r->waits_tail = &w->next;
    if (r->todo == NULL) r->todo = w;
  }
}

/* Releases s to upto and, transitively, every stream a fired wait names.
 * Lock held. The work list is the FIFO of fired waits itself. */
static void release_locked(mldg_stream *s, ldg_seq upto, reaped *r) {
  release_one_locked(s, upto, r);
  while (r->todo != NULL) {
    mldg_wait *w = r->todo;
    r->todo = w->next; /* release_one_locked re-sets it if w was the tail */
    if (!is_destroyed(w->on)) release_one_locked(w->on, w->upto, r);
  }
}

/* Releases everything on s, marks it destroyed, leaves the registry. Lock
 * held, s not destroyed. */
static void destroy_locked(mldg_stream *s, reaped *r) {
  mldg_ledger *l = s->ledger;
  release_locked(s, s->next_seq, r);
  atomic_store_explicit(&s->destroyed, true, memory_order_release);
  if (s->live_prev != NULL)
    s->live_prev->live_next = s->live_next;
  else
    l->live = s->live_next;
  if (s->live_next != NULL) s->live_next->live_prev = s->live_prev;
  s->live_prev = s->live_next = NULL;
  if (s->nonblocking)
    atomic_fetch_sub_explicit(&l->nonblocking_live, 1, memory_order_relaxed);
}

/* Runs what a release unlinked, with the mutex NOT held: keeps in order, then
 * drops the fired waits' references. A stream whose last reference goes here
 * is destroyed in this same loop (its keeps join the next round), so deep
 * chains of references do not recurse. */
static void run_reaped(mldg_ledger *l, reaped *r) {
  for (;;) {
    mldg_entry *e = r->entries;
    mldg_wait *w = r->waits;
    reaped_init(r);
    while (e != NULL) {
      mldg_entry *next = e->next;
      if (e->keep.release != NULL) e->keep.release(e->keep.ctx);
      free(e);
      e = next;
    }
    mldg_stream *zombies = NULL;
    while (w != NULL) {
      mldg_wait *next = w->next;
      mldg_stream *a = w->on;
      if (atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
        a->zombie_next = zombies;
        zombies = a;
      }
      free(w);
      w = next;
    }
    if (zombies == NULL) return;
    lock(l);
    for (mldg_stream *z = zombies; z != NULL; z = z->zombie_next)
      if (!is_destroyed(z)) destroy_locked(z, r);
    unlock(l);
    while (zombies != NULL) {
      mldg_stream *next = zombies->zombie_next;
      free(zombies);
      zombies = next;
    }
  }
}

/* ---- Ledger ------------------------------------------------------------ */

int mldg_ledger_create(mldg_ledger **out) {
  if (out == NULL) return LDG_EINVAL;
  mldg_ledger *l = calloc(1, sizeof *l);
  if (l == NULL) return LDG_ENOMEM;
  if (pthread_mutex_init(&l->lock, NULL) != 0) {
    free(l);
    return LDG_ENOMEM;
  }
  l->next_sid = 1;
  atomic_init(&l->nonblocking_live, 0);
  *out = l;
  return LDG_OK;
}

void mldg_ledger_destroy(mldg_ledger *l) {
  if (l == NULL) return;
  for (;;) {
    reaped r;
    reaped_init(&r);
    lock(l);
    mldg_stream *s = l->live;
    if (s == NULL) {
      unlock(l);
      break;
    }
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    destroy_locked(s, &r);
    unlock(l);
    run_reaped(l, &r);
    mldg_stream_unref(s);
  }
  pthread_mutex_destroy(&l->lock);
  free(l);
}

/* ---- Streams ----------------------------------------------------------- */

int mldg_stream_create(mldg_ledger *l, int device, unsigned flags,
                       ldg_drain_fn drain, void *drain_ctx, mldg_stream **out) {
  if (l == NULL || out == NULL || device < 0) return LDG_EINVAL;
  if ((flags & ~LDG_STREAM_NONBLOCKING) != 0) return LDG_EINVAL;
  bool nb = (flags & LDG_STREAM_NONBLOCKING) != 0;
  if (nb && drain == NULL) return LDG_EINVAL;
  mldg_stream *s = calloc(1, sizeof *s);
  if (s == NULL) return LDG_ENOMEM;
  s->ledger = l;
  s->device = device;
  s->nonblocking = nb;
  s->drain = drain;
  s->drain_ctx = drain_ctx;
  atomic_init(&s->refs, 1);
  atomic_init(&s->destroyed, false);
  s->pending_tail = &s->pending_head;
  s->waits_tail = &s->waits_head;
  lock(l);
  s->sid = l->next_sid++;
  s->live_next = l->live;
  if (l->live != NULL) l->live->live_prev = s;
  l->live = s;
  if (nb) atomic_fetch_add_explicit(&l->nonblocking_live, 1, memory_order_relaxed);
  unlock(l);
  *out = s;
  return LDG_OK;
}

int mldg_stream_destroy(mldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  mldg_ledger *l = s->ledger;
  reaped r;
  reaped_init(&r);
  lock(l);
  if (is_destroyed(s)) {
    unlock(l);
    return LDG_EDESTROYED;
  }
  destroy_locked(s, &r);
  unlock(l);
  run_reaped(l, &r);
  return LDG_OK;
}

void mldg_stream_ref(mldg_stream *s) {
  atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void mldg_stream_unref(mldg_stream *s) {
  if (s == NULL) return;
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
  /* Last reference: nobody else can destroy s now. A destroyed stream may
   * outlive its ledger, so the ledger is touched only if s is still live. */
  if (!is_destroyed(s)) {
    mldg_ledger *l = s->ledger;
    reaped r;
    reaped_init(&r);
    lock(l);
    destroy_locked(s, &r);
    unlock(l);
    free(s);
    run_reaped(l, &r);
    return;
  }
  free(s);
}

int mldg_stream_check_live(const mldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  return is_destroyed(s) ? LDG_EDESTROYED : LDG_OK;
}

uint64_t mldg_stream_id(const mldg_stream *s) { return s->sid; }
int mldg_stream_device(const mldg_stream *s) { return s->device; }
bool mldg_stream_is_nonblocking(const mldg_stream *s) { return s->nonblocking; }

/* ---- Recording and releasing -------------------------------------------- */

int mldg_enqueue(mldg_stream *s, ldg_keep keep, const uint64_t *vec_ids,
                 size_t n_vec, const ldg_range *ranges, size_t n_ranges,
                 ldg_seq *seq_out) {
  if (s == NULL) return LDG_EINVAL;
  if ((vec_ids == NULL && n_vec != 0) || (ranges == NULL && n_ranges != 0))
    return LDG_EINVAL;
  for (size_t i = 0; i < n_ranges; i++)
    if (ranges[i].bytes == 0 || ranges[i].bytes - 1 > UINTPTR_MAX - ranges[i].addr)
      return LDG_EINVAL;
  if (n_vec > (SIZE_MAX / 2) / sizeof *vec_ids ||
      n_ranges > (SIZE_MAX / 2) / sizeof *ranges)
    return LDG_EINVAL;
  /* Allocated and filled before taking the lock, as any C port would. */
  size_t bytes = sizeof(mldg_entry) + n_ranges * sizeof *ranges +
                 n_vec * sizeof *vec_ids;
  mldg_entry *e = malloc(bytes);
  if (e == NULL) return LDG_ENOMEM;
  ldg_range *rcopy = (ldg_range *)(e + 1);
  uint64_t *vcopy = (uint64_t *)(rcopy + n_ranges);
  if (n_ranges != 0) memcpy(rcopy, ranges, n_ranges * sizeof *ranges);
  if (n_vec != 0) memcpy(vcopy, vec_ids, n_vec * sizeof *vec_ids);
  e->next = NULL;
  e->keep = keep;
  e->bytes = bytes;
  e->n_vec = n_vec;
  e->n_ranges = n_ranges;
  e->vec_ids = vcopy;
  e->ranges = rcopy;

  mldg_ledger *l = s->ledger;
  lock(l);
  if (is_destroyed(s)) {
    unlock(l);
    free(e);
    return LDG_EDESTROYED;
  }
  ldg_seq seq = ++s->next_seq;
  e->seq = seq;
  *s->pending_tail = e;
  s->pending_tail = &e->next;
  s->n_pending++;
  l->bytes += bytes;
  unlock(l);
  if (seq_out != NULL) *seq_out = seq;
  return LDG_OK;
}

ldg_seq mldg_mark(const mldg_stream *s) {
  mldg_ledger *l = s->ledger;
  lock(l);
  ldg_seq m = s->next_seq;
  unlock(l);
  return m;
}

int mldg_add_wait(mldg_stream *b, mldg_stream *a, ldg_seq a_upto,
                  ldg_seq *seq_out) {
  if (b == NULL || a == NULL || a->ledger != b->ledger) return LDG_EINVAL;
  mldg_wait *w = malloc(sizeof *w);
  if (w == NULL) return LDG_ENOMEM;
  mldg_ledger *l = b->ledger;
  lock(l);
  int rc = LDG_OK;
  if (is_destroyed(b))
    rc = LDG_EDESTROYED;
  else if (a_upto > a->next_seq)
    rc = LDG_EINVAL;
  if (rc != LDG_OK) {
    unlock(l);
    free(w);
    return rc;
  }
  atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
  w->next = NULL;
  w->seq = ++b->next_seq;
  w->on = a;
  w->upto = a_upto;
  *b->waits_tail = w;
  b->waits_tail = &w->next;
  l->bytes += sizeof *w;
  ldg_seq seq = w->seq;
  unlock(l);
  if (seq_out != NULL) *seq_out = seq;
  return LDG_OK;
}

/* all: release to the current mark (release_all), else to upto. */
static int release_common(mldg_stream *s, ldg_seq upto, bool all) {
  if (s == NULL) return LDG_EINVAL;
  mldg_ledger *l = s->ledger;
  reaped r;
  reaped_init(&r);
  lock(l);
  if (is_destroyed(s)) {
    unlock(l);
    return LDG_EDESTROYED;
  }
  if (all) upto = s->next_seq;
  if (upto > s->next_seq) {
    unlock(l);
    return LDG_EINVAL;
  }
  release_locked(s, upto, &r);
  unlock(l);
  run_reaped(l, &r);
  return LDG_OK;
}

int mldg_release(mldg_stream *s, ldg_seq upto) {
  return release_common(s, upto, false);
}

int mldg_release_all(mldg_stream *s) { return release_common(s, 0, true); }

/* ---- Device snapshots ---------------------------------------------------- */

int mldg_device_marks(mldg_ledger *l, int device, mldg_marks **out) {
  if (l == NULL || out == NULL || device < 0) return LDG_EINVAL;
  lock(l);
  size_t n = 0;
  for (mldg_stream *s = l->live; s != NULL; s = s->live_next)
    if (s->device == device) n++;
  /* Allocated under the lock, as the original built its list under it. */
  mldg_marks *m = malloc(sizeof *m + n * sizeof m->items[0]);
  if (m == NULL) {
    unlock(l);
    return LDG_ENOMEM;
  }
  m->ledger = l;
  m->n = 0;
  for (mldg_stream *s = l->live; s != NULL; s = s->live_next) {
    if (s->device != device) continue;
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
    m->items[m->n].s = s;
    m->items[m->n].mark = s->next_seq;
    m->n++;
  }
  unlock(l);
  *out = m;
  return LDG_OK;
}

int mldg_release_marks(mldg_marks *m) {
  if (m == NULL) return LDG_EINVAL;
  if (m->n != 0) {
    mldg_ledger *l = m->ledger;
    reaped r;
    reaped_init(&r);
    lock(l);
    for (size_t i = 0; i < m->n; i++)
      if (!is_destroyed(m->items[i].s))
        release_locked(m->items[i].s, m->items[i].mark, &r);
    unlock(l);
    run_reaped(l, &r);
  }
  mldg_marks_discard(m);
  return LDG_OK;
}

void mldg_marks_discard(mldg_marks *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->n; i++) mldg_stream_unref(m->items[i].s);
  free(m);
}

size_t mldg_marks_count(const mldg_marks *m) { return m == NULL ? 0 : m->n; }

/* ---- Queries ------------------------------------------------------------- */

size_t mldg_pending_count(const mldg_stream *s) {
  mldg_ledger *l = s->ledger;
  if (is_destroyed(s)) return 0;
  lock(l);
  size_t n = s->n_pending;
  unlock(l);
  return n;
}

static bool entry_names(const mldg_entry *e, uint64_t vec_id) {
  for (size_t i = 0; i < e->n_vec; i++)
    if (e->vec_ids[i] == vec_id) return true;
  return false;
}

static bool stream_names_locked(const mldg_stream *s, uint64_t vec_id) {
  for (const mldg_entry *e = s->pending_head; e != NULL; e = e->next)
    if (entry_names(e, vec_id)) return true;
  return false;
}

bool mldg_holds_vector(mldg_ledger *l, uint64_t vec_id) {
  if (l == NULL) return false;
  bool found = false;
  lock(l);
  for (mldg_stream *s = l->live; s != NULL && !found; s = s->live_next)
    found = stream_names_locked(s, vec_id);
  unlock(l);
  return found;
}

bool mldg_holds_host_range(mldg_ledger *l, uintptr_t addr, size_t bytes) {
  if (l == NULL || bytes == 0) return false;
  /* Compare last bytes, so a range ending at the top of memory works. */
  uintptr_t last = bytes - 1 > UINTPTR_MAX - addr ? UINTPTR_MAX : addr + (bytes - 1);
  bool found = false;
  lock(l);
  for (mldg_stream *s = l->live; s != NULL && !found; s = s->live_next)
    for (const mldg_entry *e = s->pending_head; e != NULL && !found; e = e->next)
      for (size_t i = 0; i < e->n_ranges; i++) {
        const ldg_range *r = &e->ranges[i];
        if (r->addr <= last && addr <= r->addr + (r->bytes - 1)) {
          found = true;
          break;
        }
      }
  unlock(l);
  return found;
}

size_t mldg_nonblocking_holding(mldg_ledger *l, uint64_t vec_id,
                                mldg_stream **out, size_t cap) {
  if (l == NULL || (out == NULL && cap != 0)) return 0;
  size_t n = 0;
  lock(l);
  for (mldg_stream *s = l->live; s != NULL; s = s->live_next) {
    if (!s->nonblocking || !stream_names_locked(s, vec_id)) continue;
    if (n < cap) {
      atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
      out[n] = s;
    }
    n++;
  }
  unlock(l);
  return n;
}

bool mldg_has_nonblocking(mldg_ledger *l) {
  return l != NULL &&
         atomic_load_explicit(&l->nonblocking_live, memory_order_relaxed) > 0;
}

int mldg_settle_vector(mldg_ledger *l, uint64_t vec_id) {
  if (l == NULL) return LDG_EINVAL;
  size_t cap = mldg_nonblocking_holding(l, vec_id, NULL, 0);
  if (cap == 0) return LDG_OK;
  mldg_stream **held = malloc(cap * sizeof *held);
  if (held == NULL) return LDG_ENOMEM;
  size_t n = mldg_nonblocking_holding(l, vec_id, held, cap);
  if (n > cap) n = cap; /* more appeared meanwhile: those are newer work */
  int rc = LDG_OK;
  for (size_t i = 0; i < n; i++) {
    mldg_stream *s = held[i];
    ldg_seq m = mldg_mark(s);
    if (s->drain(s->drain_ctx) != 0)
      rc = LDG_EDRAIN;
    else
      (void)mldg_release(s, m); /* EDESTROYED: destroy released it already */
    mldg_stream_unref(s);
  }
  free(held);
  return rc;
}

/* ---- Memory ---------------------------------------------------------------- */

size_t mldg_ledger_bytes(mldg_ledger *l) {
  if (l == NULL) return 0;
  lock(l);
  size_t b = l->bytes;
  unlock(l);
  return b;
}

void mldg_quiesce(void) {}
