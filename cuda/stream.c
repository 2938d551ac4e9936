/*
 * Streams and the asynchronous operations issued on them.
 *
 * THE GATE
 *   Every call that reaches the driver on a stream runs inside the stream's
 *   gate (internal.h): enter, driver call, exit — and only then touches the
 *   ledger (enqueue, release), whose keeps may call back into the layer. So
 *   a destroy waiting for the gate never waits for a keep, and a keep may
 *   destroy any stream, its own included.
 *   A thread inside is counted in one of two places. The count in the gate
 *   word costs two locked RMWs per call (a one-thread record paid them on
 *   every call: bench/RESULTS.md, "Issue 11, round 3"); so slc__stream_enter
 *   writes the stream into its thread's own word (struct slc__inside)
 *   instead, then loads the gate word, and slc__stream_exit stores NULL
 *   there (release). The destroy sets "destroying", then waits until the
 *   count is zero and no word names the stream. The pair "a thread stores
 *   its word, then loads the flag" against "the destroy sets the flag, then
 *   loads the words" needs a store-load barrier on one side or the other;
 *   by the mode (chosen once per process, SLC_GATE overrides):
 *     membarrier  the thread: a plain store and load (a compiler barrier
 *                 between them); the destroy: membarrier(PRIVATE_EXPEDITED)
 *                 between setting the flag and reading the words, which
 *                 runs a full barrier on every running thread of the
 *                 process (a descheduled one passed one when it was
 *                 switched out), as liburcu-memb's readers. So: either the
 *                 thread's load sees the flag and it backs out, or its store
 *                 was visible before the destroy reads the words, and the
 *                 destroy waits for its exit. The default where the kernel
 *                 has it (Linux >= 4.14): no locked RMW on the call's side.
 *     exchange    the thread: a seq_cst exchange and a seq_cst load; the
 *                 destroy: a seq_cst or and seq_cst loads (C11's total
 *                 order gives the same either-or). One locked RMW per call.
 *     count       the gate word's count alone (as before; two).
 *   The count stays for whoever cannot use a word: a thread whose word
 *   could not be made (memory), a call nested in another gate (none does),
 *   the drains (slc__enter_unless_synced) and engine.c's marker records.
 *   Words are never freed: a thread's is given back when it ends (a
 *   pthread key's destructor) and taken again by the next new thread, so
 *   there are as many as threads ever alive at once. A thread's first gate
 *   takes one (a CAS on a free word, or calloc and a CAS push; the
 *   process's first also chooses the mode under pthread_once: one
 *   membarrier registration); every later one only reads its pointer.
 *
 * DRAINS DURING A DESTROY
 *   ldg_settle_vector calls a stream's drain with a mark it read before.
 *   If the stream is being destroyed the drain cannot enter the gate; it
 *   waits until that destroy's cuStreamSynchronize is decided, holding
 *   nothing: succeeded ("synced") means every operation issued on the
 *   stream has completed — each operation up to the mark entered the gate
 *   before "destroying" was set (a later one is refused and never issued),
 *   so the destroy waited for its issue before synchronising — and the
 *   drain reports success; failed means the stream is live again and the
 *   drain synchronises it itself. It never waits for the destroy's keeps
 *   (they run after "synced"), so a keep of that destroy may settle the
 *   same buffers.
 *
 * LIFETIME OF THE STRUCT
 *   The slc_stream is the drain context of its ledger stream, and the
 *   ledger calls the drain while it holds a reference of its own (a settle
 *   holds one per stream it drains; pending waits and snapshots hold them
 *   too). So the struct is freed by the ledger stream's finalizer, which
 *   the ledger runs once after its last reference is gone and the last
 *   drain returned — never when the handle's last reference goes. A keep
 *   run by a settle that drops another drained stream's last reference
 *   therefore leaves that stream's struct to the settle's reference, and a
 *   stream kept live in the ledger by another stream's pending wait keeps
 *   its struct too. Under every interleaving the struct outlives every
 *   drain call; nothing else reaches it without a handle reference.
 *
 * WHEN THE LAST REFERENCE GOES
 *   The stream is destroyed as by slc_stream_destroy. If the destroy's
 *   synchronisation fails, nothing is released: destroying the ledger
 *   stream would fire its waits, releasing streams of healthy devices that
 *   are still at work. The struct, its driver stream and its ledger stream
 *   (live, with what it holds) move to the context's limbo list; device
 *   synchronisations and settles may still release what it holds, and
 *   slc_context_destroy synchronises each limbo stream before destroying it
 *   (slc__limbo_finish). A stream whose cuStreamDestroy failed goes there
 *   too, so the driver stream is destroyed by the context at the latest.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#define _DEFAULT_SOURCE         /* syscall */
#include <linux/membarrier.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cuda/internal.h"

/* ---- The gate ----------------------------------------------------------- */

/* The enter backed out already (internal.h). */
int slc__stream_refused(slc_stream *s, const char *call) {
  return slc__fail(LDG_EDESTROYED, call, "stream %llu was destroyed",
                   (unsigned long long)ldg_stream_id(s->ls));
}

/* ---- The gate's thread words (THE GATE, internal.h) ---------------------- */

atomic_int slc__gate_mode;
_Thread_local struct slc__inside *slc__tls_inside;
/* Every word ever made, newest first; pushed with a CAS, never unlinked. */
static _Atomic(struct slc__inside *) slc__inside_list;
static pthread_once_t slc__gate_once = PTHREAD_ONCE_INIT;
static pthread_key_t slc__inside_key;

static long slc__membarrier(int cmd) {
  return syscall(__NR_membarrier, cmd, 0, 0);
}

/* The thread ended: its word is free for the next thread (it is inside no
 * gate: enter and exit are one call's). */
static void slc__inside_release(void *word) {
  struct slc__inside *w = word;
  /* A later layer call of this thread (another key's destructor) takes a
   * word again. */
  slc__tls_inside = NULL;
  slc__store_release(&w->taken, 0); /* pairs with the next taker's CAS */
}

/* SLC_GATE=count|exchange|membarrier chooses (tests run each); the default
 * is membarrier where the kernel has it (Linux 4.14), else exchange. */
static void slc__gate_init(void) {
  const char *env = getenv("SLC_GATE");
  int mode = SLC__GATE_MEMBARRIER;
  if (env != NULL && strcmp(env, "count") == 0) mode = SLC__GATE_COUNT;
  if (env != NULL && strcmp(env, "exchange") == 0) mode = SLC__GATE_EXCHANGE;
  if (mode == SLC__GATE_MEMBARRIER &&
      slc__membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) != 0)
    mode = SLC__GATE_EXCHANGE;
  if (mode != SLC__GATE_COUNT &&
      pthread_key_create(&slc__inside_key, slc__inside_release) != 0)
    mode = SLC__GATE_COUNT;
  /* pthread_once orders this before every later reader of the mode. */
  slc__store_release(&slc__gate_mode, mode);
}

/* The word of the threads that use the count: it always names something
 * that is not a stream (itself), so slc__stream_enter takes the count and
 * slc__stream_exit, finding no stream of theirs in it, gives it back. */
static struct slc__inside slc__no_word = {.s = (slc_stream *)&slc__no_word,
                                          .taken = 1,
                                          .mode = SLC__GATE_COUNT};

/* This thread's word, or slc__no_word: the count. */
static struct slc__inside *slc__inside_take(void) {
  pthread_once(&slc__gate_once, slc__gate_init);
  if (slc__load_acquire(&slc__gate_mode) == SLC__GATE_COUNT)
    return &slc__no_word;
  struct slc__inside *w;
  /* A word left by an ended thread, else a new one. */
  for (w = slc__load_acquire(&slc__inside_list); w != NULL; w = w->next) {
    int free_word = 0;
    /* Acquire: pairs with the release of the thread that gave it up. */
    if (slc__load_relaxed(&w->taken) == 0 &&
        atomic_compare_exchange_strong_explicit(&w->taken, &free_word, 1,
                                                memory_order_acquire,
                                                memory_order_relaxed))
      break;
  }
  if (w == NULL) {
    /* A line of its own (the struct's alignment: sizeof is 64). */
    w = aligned_alloc(_Alignof(struct slc__inside), sizeof(*w));
    if (w == NULL) return &slc__no_word;
    memset(w, 0, sizeof(*w));
    atomic_init(&w->s, NULL);
    atomic_init(&w->taken, 1);
    /* Fixed since slc__gate_init (pthread_once above); the same for every
     * word, written before the list or the key publishes it. */
    w->mode = slc__load_acquire(&slc__gate_mode);
    struct slc__inside *head = slc__load_relaxed(&slc__inside_list);
    do {
      w->next = head;
      /* Release: the word's fields before the list reaches it. */
    } while (!atomic_compare_exchange_weak_explicit(
        &slc__inside_list, &head, w, memory_order_release,
        memory_order_relaxed));
  }
  if (pthread_setspecific(slc__inside_key, w) != 0) {
    slc__store_release(&w->taken, 0);
    return &slc__no_word;
  }
  return w;
}

struct slc__inside *slc__inside_get(void) {
  struct slc__inside *w = slc__inside_take();
  slc__tls_inside = w;
  return w;
}

/* Whether some thread's word names s. */
static bool slc__inside_holds(slc_stream *s) {
  for (struct slc__inside *w = slc__load_acquire(&slc__inside_list);
       w != NULL; w = w->next) {
    /* Acquire: pairs with the exit's release store of NULL. Seq_cst for
     * the exchange mode's Dekker pair (a plain load on x86). */
    if (atomic_load_explicit(&w->s, memory_order_seq_cst) == s) return true;
  }
  return false;
}

void slc__backoff(unsigned *spins) {
  if (++*spins < 64) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000}; /* 50 us */
    nanosleep(&ts, NULL);
  }
}

/* Waits until no call is inside the driver on s (the flag is already set,
 * seq_cst). In the membarrier mode, the barrier first: after it, a thread
 * whose word does not name s yet will see the flag when it loads the gate
 * (THE GATE). */
static void slc__wait_users(slc_stream *s) {
  if (slc__load_acquire(&slc__gate_mode) == SLC__GATE_MEMBARRIER &&
      slc__membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    /* Cannot fail once registered (membarrier(2); a fork keeps the
     * registration); if it did, a thread inside the gate could be missed
     * and the stream destroyed under its driver call. */
    fprintf(stderr, "streamledger: membarrier failed while destroying a "
                    "stream; run with SLC_GATE=exchange\n");
    abort();
  }
  unsigned spins = 0;
  while ((slc__load_acquire(&s->gate) & SLC__GATE_USERS) != 0 ||
         slc__inside_holds(s))
    slc__backoff(&spins);
}

/* Enters the gate, or, if a destroy is under way, waits until its
 * synchronisation is decided: SLC__ENTERED (the caller makes its driver call
 * and exits), or SLC__SYNCED (the destroy's sync succeeded: everything
 * issued on s, up to any mark the caller read before, has completed; the
 * driver stream may be gone). Never waits for keeps (see above). */
enum { SLC__ENTERED, SLC__SYNCED };

static int slc__enter_unless_synced(slc_stream *s) {
  unsigned spins = 0;
  bool told = false;
  for (;;) {
    uint64_t old = slc__fetch_add_acq_rel(&s->gate, 1);
    if (!(old & SLC__GATE_DESTROYING)) return SLC__ENTERED;
    slc__fetch_sub_release(&s->gate, 1);
    for (;;) {
      /* Acquire: pairs with the destroy's acq_rel setting "synced" after
       * its sync returned (or clearing "destroying" after it failed). */
      uint64_t g = slc__load_acquire(&s->gate);
      if (g & SLC__GATE_SYNCED) return SLC__SYNCED;
      if (!(g & SLC__GATE_DESTROYING)) break; /* live again: retry */
      if (!told) {
        SLC__HOOK(SLC__HOOK_DRAIN_WAITS);
        told = true;
      }
      slc__backoff(&spins);
    }
  }
}

/* ---- Streams ------------------------------------------------------------ */

int slc__stream_drain(void *ctx) {
  slc_stream *s = ctx;
  if (slc__enter_unless_synced(s) == SLC__SYNCED) return 0;
  int rc = slc__make_current_for(s, "slc_stream drain");
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = s->c->drv.pfn_cuStreamSynchronize(s->cu);
  slc__stream_exit(s);
  if (rc == LDG_OK && r != CUDA_SUCCESS)
    (void)slc__fail_cu(s->c, "cuStreamSynchronize", r,
                       "draining stream %llu for ldg_settle_vector",
                       (unsigned long long)ldg_stream_id(s->ls));
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    slc__drain_failed(); /* the settle reports this record */
    return 1;
  }
  return 0;
}

/* The ledger stream's finalizer: no drain runs or will run. */
static void slc__stream_free(void *ctx) { free(ctx); }

int slc_stream_create(slc_context *c, int device, unsigned flags,
                      slc_stream **out) {
  static const char fn[] = "slc_stream_create";
  if (out == NULL) return slc__fail(LDG_EINVAL, fn, "out is NULL");
  if (flags & ~SLC_STREAM_NONBLOCKING)
    return slc__fail(LDG_EINVAL, fn, "unknown flags 0x%x", flags);
  int rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  slc_stream *s = slc__stream_alloc();
  if (s == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  const bool nb = (flags & SLC_STREAM_NONBLOCKING) != 0;
  CUresult r = c->drv.pfn_cuStreamCreate(
      &s->cu, nb ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT);
  if (r != CUDA_SUCCESS) {
    free(s);
    return slc__fail_cu(c, "cuStreamCreate", r, "device %d", device);
  }
  rc = slc__stream_init(c, s, device, flags, false);
  if (rc != LDG_OK) return rc;
  *out = s;
  return LDG_OK;
}

slc_stream *slc__stream_alloc(void) {
  /* The issue's fields share the first line (struct slc_stream). */
  const size_t size = (sizeof(slc_stream) + 63) & ~(size_t)63;
  slc_stream *s = aligned_alloc(64, size);
  if (s != NULL) memset(s, 0, size);
  return s;
}

int slc__stream_init(slc_context *c, slc_stream *s, int device, unsigned flags,
                     bool adopted) {
  const bool nb = (flags & SLC_STREAM_NONBLOCKING) != 0;
  s->c = c;
  s->device = device;
  /* Retained: the caller's make-current of device succeeded on this thread
   * (its acquire of `ready` ordered ctx before this read). */
  s->ctx = c->devices[device].ctx;
  s->flags = flags;
  s->adopted = adopted;
  atomic_init(&s->gate, 0);
  atomic_init(&s->refs, 1);
  atomic_init(&s->destroyed, 0);
  s->limbo_next = NULL;
  /* A default ledger stream: owned by its one issuing thread, which then
   * reserves by a store, no locked RMW (ledger/owned.c, OWNED STREAMS);
   * revoked for good, one membarrier, when a second thread records on it.
   * The engine's wake-up pairs with either store (engine.c, WAKING THE
   * ENGINE THREAD: the thread's park runs membarrier). */
  int rc = ldg_stream_create(c->ledger, device,
                             nb ? LDG_STREAM_NONBLOCKING : 0u,
                             slc__stream_drain, s, &s->ls);
  if (rc != LDG_OK) {
    if (!adopted) (void)c->drv.pfn_cuStreamDestroy(s->cu);
    free(s);
    return slc__fail(rc, "ldg_stream_create", NULL);
  }
  rc = slc__engine_register(s);
  if (rc != LDG_OK) {
    ldg_stream_unref(s->ls); /* destroys it: nothing was enqueued */
    if (!adopted) (void)c->drv.pfn_cuStreamDestroy(s->cu);
    free(s); /* no finalizer yet */
    return rc;
  }
  /* Before the handle is shared: from now on the ledger frees s. */
  (void)ldg_stream_set_finalizer(s->ls, (ldg_keep){slc__stream_free, s});
  slc__fetch_add_acq_rel(&c->live_handles, 1);
  return LDG_OK;
}

int slc_stream_synchronize(slc_stream *s) {
  static const char fn[] = "slc_stream_synchronize";
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  int rc = slc__stream_enter(s, fn);
  if (rc != LDG_OK) return rc;
  /* Mark, then complete. */
  ldg_seq m = ldg_mark(s->ls);
  rc = slc__current_for(s, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = s->c->drv.pfn_cuStreamSynchronize(s->cu);
  slc__stream_exit(s);
  if (rc != LDG_OK) return rc;
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(s->c, "cuStreamSynchronize", r, "stream %llu",
                        (unsigned long long)ldg_stream_id(s->ls));
  slc_context *c = s->c; /* read first, as in slc_stream_wait_event */
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  rc = ldg_release(s->ls, m);
  slc__keeps_end(c, &kf, SLC_CAUSE_SYNC);
  /* Destroyed since the exit: its destroy released everything. */
  if (rc != LDG_OK && rc != LDG_EDESTROYED)
    return slc__fail(rc, "ldg_release", NULL);
  return LDG_OK;
}

int slc_stream_query(slc_stream *s, bool *idle) {
  static const char fn[] = "slc_stream_query";
  if (s == NULL || idle == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  int rc = slc__stream_enter(s, fn);
  if (rc != LDG_OK) return rc;
  ldg_seq m = ldg_mark(s->ls);
  rc = slc__current_for(s, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = s->c->drv.pfn_cuStreamQuery(s->cu);
  slc__stream_exit(s);
  if (rc != LDG_OK) return rc;
  if (r == CUDA_ERROR_NOT_READY) {
    *idle = false;
    return LDG_OK;
  }
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(s->c, "cuStreamQuery", r, "stream %llu",
                        (unsigned long long)ldg_stream_id(s->ls));
  *idle = true;
  slc_context *c = s->c; /* read first, as in slc_stream_wait_event */
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  rc = ldg_release(s->ls, m);
  slc__keeps_end(c, &kf, SLC_CAUSE_SYNC);
  if (rc != LDG_OK && rc != LDG_EDESTROYED)
    return slc__fail(rc, "ldg_release", NULL);
  return LDG_OK;
}

/* cuStreamDestroy, with the stream's context current again (keeps ran
 * since the destroy made it current, and may have switched it). */
static int slc__stream_destroy_driver(slc_stream *s, const char *call) {
  if (s->adopted) {
    /* Not ours (slc_stream_adopt): its owner destroys it. */
    slc__store_release(&s->destroyed, 1);
    return LDG_OK;
  }
  int rc = slc__make_current_for(s, call);
  if (rc != LDG_OK) return rc;
  CUresult r = s->c->drv.pfn_cuStreamDestroy(s->cu);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(s->c, "cuStreamDestroy", r,
                        "stream %llu (released in the ledger)",
                        (unsigned long long)ldg_stream_id(s->ls));
  slc__store_release(&s->destroyed, 1);
  return LDG_OK;
}

/* quiet: leave this thread's error record as it was (slc_stream_unref);
 * failures of keeps it runs still change it. */
static int slc__stream_destroy(slc_stream *s, const char *call, bool quiet) {
  /* Seq_cst: the exchange mode's Dekker pair with the enter (THE GATE). */
  uint64_t old = atomic_fetch_or_explicit(&s->gate, SLC__GATE_DESTROYING,
                                          memory_order_seq_cst);
  if (old & SLC__GATE_DESTROYING)
    return slc__fail(LDG_EDESTROYED, call,
                     "stream %llu already destroyed or being destroyed",
                     (unsigned long long)ldg_stream_id(s->ls));
  slc__wait_users(s);
  /* Every driver call on s has returned and no new one starts: the sync
   * below covers every operation ever issued on it. */
  slc_error saved;
  if (quiet) slc__error_save(&saved);
  int rc = slc__make_current_for(s, call);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = s->c->drv.pfn_cuStreamSynchronize(s->cu);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    /* Nothing released; the stream is live again. Acq_rel: pairs with the
     * acquire of drains waiting for the outcome. */
    slc__fetch_and_acq_rel(&s->gate, ~SLC__GATE_DESTROYING);
    if (rc == LDG_OK)
      rc = slc__fail_cu(s->c, "cuStreamSynchronize", r,
                        "destroying stream %llu; nothing released",
                        (unsigned long long)ldg_stream_id(s->ls));
    if (quiet) (void)slc__error_restore(&saved);
    return rc;
  }
  /* Acq_rel: the sync's completion happens-before what a drain that sees
   * "synced" does next (it reports the stream drained). */
  slc__fetch_or_acq_rel(&s->gate, SLC__GATE_SYNCED);
  /* Releases everything the stream holds; keeps run here, and any call they
   * make on s is refused. */
  slc_context *c = s->c; /* read first, as in slc_stream_wait_event */
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  (void)ldg_stream_destroy(s->ls); /* only LDG_EDESTROYED: already done */
  slc__keeps_end(c, &kf, SLC_CAUSE_DESTROY);
  if (quiet) slc__error_save(&saved); /* keeps' failures stay */
  rc = slc__stream_destroy_driver(s, call);
  if (quiet) (void)slc__error_restore(&saved);
  return rc;
}

int slc_stream_destroy(slc_stream *s) {
  if (s == NULL) return slc__fail(LDG_EINVAL, "slc_stream_destroy", "NULL");
  return slc__stream_destroy(s, "slc_stream_destroy", false);
}

void slc_stream_ref(slc_stream *s) { slc__fetch_add_relaxed(&s->refs, 1); }

void slc_stream_unref(slc_stream *s) {
  if (s == NULL) return;
  /* acq_rel: every holder's use of s happens-before the teardown below. */
  if (slc__fetch_sub_acq_rel(&s->refs, 1) != 1) return;
  static const char fn[] = "slc_stream_unref";
  slc_context *c = s->c;
  uint64_t g = slc__load_acquire(&s->gate);
  if (!(g & SLC__GATE_DESTROYING)) {
    (void)slc__stream_destroy(s, fn, true);
  } else if (!slc__load_acquire(&s->destroyed)) {
    /* Destroyed in the ledger by slc_stream_destroy, whose cuStreamDestroy
     * failed: try again. */
    slc_error saved;
    slc__error_save(&saved);
    (void)slc__stream_destroy_driver(s, fn);
    (void)slc__error_restore(&saved);
  }
  /* The engine lets go of s whether it was destroyed or goes to limbo
   * below: a limbo stream's sync failed, so its markers can only fail too,
   * and slc_context_destroy proves it complete by a sync of its own (with
   * the engine stopped). Unregistering frees the marker ring here, not in
   * the finalizer: after it no poll reaches the ring (engine.c,
   * REGISTRATION), while the struct may outlive this call in a settle's or
   * an engine release's ledger reference; neither touches s->mq. Quiet:
   * this call never changes slc_last_error(). */
  {
    slc_error saved;
    slc__error_save(&saved);
    slc__engine_unregister(s);
    (void)slc__error_restore(&saved);
  }
  if (slc__load_acquire(&s->destroyed)) {
    slc__fetch_sub_acq_rel(&c->live_handles, 1);
    /* Done: give up the handle's ledger reference; the finalizer frees s,
     * now or when the last settle, wait or snapshot lets go. */
    ldg_stream_unref(s->ls);
    return;
  }
  /* The sync failed (nothing may be released without proof of completion)
   * or the driver stream could not be destroyed: kept for the context. On
   * the list before the handle stops counting, so a destroy that finds no
   * live handle finds it there. */
  pthread_mutex_lock(&c->limbo_mu);
  s->limbo_next = c->limbo;
  c->limbo = s;
  pthread_mutex_unlock(&c->limbo_mu);
  slc__fetch_sub_acq_rel(&c->live_handles, 1);
}

int slc__limbo_finish(slc_context *c) {
  static const char fn[] = "slc_context_destroy";
  /* No other call on c runs: the list is read without the mutex. */
  /* 1. Proof of completion for each, before anything is released: their
   *    waits may point at one another. */
  for (slc_stream *s = c->limbo; s != NULL; s = s->limbo_next) {
    if (slc__load_acquire(&s->gate) & SLC__GATE_SYNCED) continue;
    int rc = slc__make_current(c, s->device, fn);
    if (rc != LDG_OK) return rc;
    CUresult r = c->drv.pfn_cuStreamSynchronize(s->cu);
    if (r != CUDA_SUCCESS)
      return slc__fail_cu(c, "cuStreamSynchronize", r,
                          "stream %llu, kept since its last reference went; "
                          "nothing released",
                          (unsigned long long)ldg_stream_id(s->ls));
    slc__fetch_or_acq_rel(&s->gate,
                          SLC__GATE_DESTROYING | SLC__GATE_SYNCED);
  }
  /* 2. All complete: release what they hold (their waits fire onto streams
   *    synchronised above or already destroyed). Keeps run here. */
  for (slc_stream *s = c->limbo; s != NULL; s = s->limbo_next)
    (void)ldg_stream_destroy(s->ls); /* LDG_EDESTROYED: done before */
  /* 3. The driver streams. */
  for (slc_stream *s = c->limbo; s != NULL; s = s->limbo_next) {
    if (slc__load_acquire(&s->destroyed)) continue;
    int rc = slc__stream_destroy_driver(s, fn);
    if (rc != LDG_OK) return rc;
  }
  /* 4. Their ledger references; the finalizers free them. */
  while (c->limbo != NULL) {
    slc_stream *s = c->limbo;
    c->limbo = s->limbo_next;
    ldg_stream_unref(s->ls);
  }
  return LDG_OK;
}

int slc_stream_check_live(const slc_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  return (slc__load_acquire(&((slc_stream *)s)->gate) & SLC__GATE_DESTROYING)
             ? LDG_EDESTROYED
             : LDG_OK;
}

int slc_stream_device(const slc_stream *s) { return s->device; }
CUstream slc_stream_handle(const slc_stream *s) { return s->cu; }
ldg_stream *slc_stream_ledger(const slc_stream *s) { return s->ls; }

/* ---- Asynchronous operations -------------------------------------------- */

enum slc__op_kind {
  SLC__HTOD,
  SLC__DTOH,
  SLC__DTOD,
  SLC__MEMSET,
  SLC__LAUNCH,
};

struct slc__op {
  enum slc__op_kind kind;
  CUdeviceptr dptr, sptr;
  void *hdst;
  const void *hsrc;
  size_t bytes;
  unsigned char value;
  CUfunction f;
  slc_dim3 grid, block;
  unsigned shared;
  void **params;
};

static const char *const slc__op_call[] = {
    [SLC__HTOD] = "cuMemcpyHtoDAsync", [SLC__DTOH] = "cuMemcpyDtoHAsync",
    [SLC__DTOD] = "cuMemcpyDtoDAsync", [SLC__MEMSET] = "cuMemsetD8Async",
    [SLC__LAUNCH] = "cuLaunchKernel",
};

static inline CUresult slc__issue(slc_stream *s, const struct slc__op *op) {
  const struct slc__hot *d = &s->c->hot; /* drv's entries, one line */
  switch (op->kind) {
    case SLC__HTOD:
      return d->cuMemcpyHtoDAsync(op->dptr, op->hsrc, op->bytes, s->cu);
    case SLC__DTOH:
      return d->cuMemcpyDtoHAsync(op->hdst, op->sptr, op->bytes, s->cu);
    case SLC__DTOD:
      return d->cuMemcpyDtoDAsync(op->dptr, op->sptr, op->bytes, s->cu);
    case SLC__MEMSET:
      return d->cuMemsetD8Async(op->dptr, op->value, op->bytes, s->cu);
    case SLC__LAUNCH:
      return d->cuLaunchKernel(op->f, op->grid.x, op->grid.y, op->grid.z,
                               op->block.x, op->block.y, op->block.z,
                               op->shared, s->cu, op->params, NULL);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

/* ldg_enqueue's limits (ledger/ring.c, ldg__enqueue_args_ok), which the
 * layer checks before the issue: n_vec + 2 * n_ranges words, counted in
 * bytes, must not overflow; a range is non-empty and does not wrap. */
#define SLC__HOLD_MAX_WORDS ((SIZE_MAX / sizeof(uint64_t)) / 4)
static inline bool slc__range_bad(const ldg_range *r) {
  return r->bytes == 0 || r->bytes - 1 > UINTPTR_MAX - r->addr;
}

/* What ldg_enqueue would refuse with LDG_EINVAL, checked before the issue:
 * which check fails, and the record saying so (slc__check_hold found one). */
static __attribute__((noinline, cold)) int slc__hold_refused(
    const slc_hold *h, const char *call) {
  if ((h->n_vec != 0 && h->vec_ids == NULL) ||
      (h->n_ranges != 0 && h->ranges == NULL))
    return slc__fail(LDG_EINVAL, call, "hold: NULL array with a count");
  if (h->n_vec > SLC__HOLD_MAX_WORDS || h->n_ranges > SLC__HOLD_MAX_WORDS)
    return slc__fail(LDG_EINVAL, call, "hold: too many ids or ranges");
  for (size_t i = 0; i < h->n_ranges; i++) {
    if (slc__range_bad(&h->ranges[i]))
      return slc__fail(LDG_EINVAL, call,
                       "hold: range %zu is empty or wraps the address space",
                       i);
  }
  return LDG_OK;
}

/* The same checks, inline on the issuing path; the record is written on
 * the cold path only. */
static inline int slc__check_hold(const slc_hold *h, const char *call) {
  if (h == NULL) return LDG_OK;
  bool bad = (h->n_vec != 0 && h->vec_ids == NULL) ||
             (h->n_ranges != 0 && h->ranges == NULL) ||
             h->n_vec > SLC__HOLD_MAX_WORDS ||
             h->n_ranges > SLC__HOLD_MAX_WORDS;
  for (size_t i = 0; !bad && i < h->n_ranges; i++)
    bad = slc__range_bad(&h->ranges[i]);
  return bad ? slc__hold_refused(h, call) : LDG_OK;
}

/* The issue failed to be recorded: make the operation complete before the
 * caller gets its keep back. Holds nothing while it waits. */
static int slc__sync_after_failed_record(slc_stream *s, const char *call) {
  /* Being destroyed: its sync covered the operation (issued before). */
  if (slc__enter_unless_synced(s) == SLC__SYNCED) return LDG_OK;
  int rc = slc__current_for(s, call);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = s->c->drv.pfn_cuStreamSynchronize(s->cu);
  slc__stream_exit(s);
  if (rc != LDG_OK) return rc;
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(s->c, "cuStreamSynchronize", r,
                        "after %s could not be recorded; its operands may "
                        "still be in use",
                        call);
  return LDG_OK;
}

/* The driver refused the issue: nothing was recorded. The op by value: its
 * address taken on the inlined path would make it built in memory there. */
static __attribute__((noinline, cold)) int slc__issue_failed(
    slc_stream *s, struct slc__op opv, CUresult r) {
  const struct slc__op *op = &opv;
  if (op->kind == SLC__LAUNCH)
    return slc__fail_cu(s->c, slc__op_call[op->kind], r,
                        "grid (%u,%u,%u) block (%u,%u,%u) on stream %llu "
                        "(device %d); nothing recorded",
                        op->grid.x, op->grid.y, op->grid.z, op->block.x,
                        op->block.y, op->block.z,
                        (unsigned long long)ldg_stream_id(s->ls), s->device);
  return slc__fail_cu(s->c, slc__op_call[op->kind], r,
                      "%zu bytes on stream %llu (device %d); nothing "
                      "recorded",
                      op->bytes, (unsigned long long)ldg_stream_id(s->ls),
                      s->device);
}

/* The driver accepted the issue but ldg_enqueue returned rc. */
static __attribute__((noinline, cold)) int slc__record_failed(
    slc_stream *s, enum slc__op_kind kind, ldg_keep keep, int rc) {
  if (rc == LDG_EDESTROYED) {
    /* s was destroyed after the issue: its destroy waited for the gate and
     * then synchronised, so the operation is complete. */
    slc__keeps_run_here(s->c, keep, SLC_CAUSE_DESTROY);
    return LDG_OK;
  }
  int src = slc__sync_after_failed_record(s, slc__op_call[kind]);
  if (src != LDG_OK) return src;
  return slc__fail(rc, "ldg_enqueue",
                   "%s was issued but could not be recorded; the stream was "
                   "synchronised and the caller keeps its keep",
                   slc__op_call[kind]);
}

/* Inlined into each operation, so that the kind is a constant there and
 * the op is never built in memory on the path that succeeds. */
static inline __attribute__((always_inline)) int slc__run_op(
    slc_stream *s, const struct slc__op *op, const slc_hold *hold,
    const char *call) {
  if (s == NULL) return slc__fail(LDG_EINVAL, call, "stream is NULL");
  int rc = hold != NULL ? slc__check_hold(hold, call) : LDG_OK;
  if (rc != LDG_OK) return rc;
  rc = slc__stream_enter(s, call);
  if (rc != LDG_OK) return rc;
  /* A launch (and a memset: the guide names copies only) makes the
   * stream's device current; a copy reaches its context through the stream
   * (slc__current_for). The kind is a constant here. */
  rc = op->kind == SLC__LAUNCH || op->kind == SLC__MEMSET
           ? slc__make_current_for(s, call)
           : slc__current_for(s, call);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = slc__issue(s, op);
  slc__stream_exit(s);
  if (rc != LDG_OK) return rc;
  if (r != CUDA_SUCCESS) return slc__issue_failed(s, *op, r);
  /* Issue, then enqueue. */
  ldg_keep keep = {NULL, NULL};
  const uint64_t *ids = NULL;
  const ldg_range *ranges = NULL;
  size_t n_ids = 0, n_ranges = 0;
  if (hold != NULL) {
    keep = hold->keep;
    ids = hold->vec_ids;
    n_ids = hold->n_vec;
    ranges = hold->ranges;
    n_ranges = hold->n_ranges;
  }
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  /* Checked: slc__check_hold above applied ldg_enqueue's rules. */
  rc = ldg__enqueue_checked(s->ls, keep, ids, n_ids, ranges, n_ranges, NULL);
  slc__keeps_end(s->c, &kf, SLC_CAUSE_ENQUEUE); /* overtaken: ran it */
  if (rc != LDG_OK) return slc__record_failed(s, op->kind, keep, rc);
  slc__engine_after_issue(s);
  return LDG_OK;
}

int slc_copy_htod_async(slc_stream *s, CUdeviceptr dst, const void *src,
                        size_t bytes, const slc_hold *hold) {
  struct slc__op op = {
      .kind = SLC__HTOD, .dptr = dst, .hsrc = src, .bytes = bytes};
  return slc__run_op(s, &op, hold, "slc_copy_htod_async");
}

int slc_copy_dtoh_async(slc_stream *s, void *dst, CUdeviceptr src, size_t bytes,
                        const slc_hold *hold) {
  struct slc__op op = {
      .kind = SLC__DTOH, .hdst = dst, .sptr = src, .bytes = bytes};
  return slc__run_op(s, &op, hold, "slc_copy_dtoh_async");
}

int slc_copy_dtod_async(slc_stream *s, CUdeviceptr dst, CUdeviceptr src,
                        size_t bytes, const slc_hold *hold) {
  struct slc__op op = {
      .kind = SLC__DTOD, .dptr = dst, .sptr = src, .bytes = bytes};
  return slc__run_op(s, &op, hold, "slc_copy_dtod_async");
}

int slc_memset_d8_async(slc_stream *s, CUdeviceptr dst, unsigned char value,
                        size_t bytes, const slc_hold *hold) {
  struct slc__op op = {
      .kind = SLC__MEMSET, .dptr = dst, .value = value, .bytes = bytes};
  return slc__run_op(s, &op, hold, "slc_memset_d8_async");
}

/* The enqueue of slc_stream_record_external or _deferred returned rc (not
 * LDG_OK); nothing ran in it (only an overtaken enqueue, which returns
 * LDG_OK, runs a keep), so the caller's hold is as it was. */
static __attribute__((noinline, cold)) int slc__record_external_failed(
    slc_stream *s, ldg_keep keep, int rc) {
  if (rc == LDG_EDESTROYED) {
    /* Destroyed since the gate: its sync came after the caller's issue. */
    slc__keeps_run_here(s->c, keep, SLC_CAUSE_DESTROY);
    return LDG_OK;
  }
  int src = slc__sync_after_failed_record(s, "external work");
  if (src != LDG_OK) return src;
  return slc__fail(rc, "ldg_enqueue",
                   "external work could not be recorded; the stream was "
                   "synchronised and the caller keeps its keep");
}

/* slc_stream_record_external and slc_stream_record_deferred once the hold
 * passed its checks: the gate, the enqueue in a keeps frame, the engine.
 * `marker`, whether this call may place the engine's marker
 * (slc__engine_after_issue) or only wakes a parked engine thread
 * (slc__engine_after_deferred); `ranges`, false where the hold has none
 * (a constant in each copy). The hold's fields go to the enqueue as they
 * are: no copy (read again only on a refusal, when nothing ran). */
static inline __attribute__((always_inline)) int slc__record_checked(
    slc_stream *s, const slc_hold *hold, const char *fn, bool marker,
    bool ranges) {
  /* Refused once the stream is being destroyed: its sync may have run
   * before the caller's issue. */
  int rc = slc__stream_enter(s, fn);
  if (rc != LDG_OK) return rc;
  slc__stream_exit(s);
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  /* Checked: both callers applied ldg_enqueue's rules (slc__check_hold, or
   * slc__record_ids's one test). */
  rc = ldg__enqueue_checked(s->ls, hold->keep, hold->vec_ids, hold->n_vec,
                            ranges ? hold->ranges : NULL,
                            ranges ? hold->n_ranges : 0, NULL);
  slc__keeps_end(s->c, &kf, SLC_CAUSE_ENQUEUE); /* overtaken: ran it */
  if (__builtin_expect(rc != LDG_OK, 0))
    return slc__record_external_failed(s, hold->keep, rc);
  if (marker)
    slc__engine_after_issue(s);
  else
    slc__engine_after_deferred(s);
  return LDG_OK;
}

/* Any hold, NULL included: every check, each refusal with its reason. */
static __attribute__((noinline)) int slc__record_external(
    slc_stream *s, const slc_hold *hold, const char *fn, bool marker) {
  static const slc_hold no_hold = {{NULL, NULL}, NULL, 0, NULL, 0};
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  int rc = slc__check_hold(hold, fn);
  if (rc != LDG_OK) return rc;
  return slc__record_checked(s, hold != NULL ? hold : &no_hold, fn, marker,
                             true);
}

/* The common shape inline (the pool's slp_record_use: a stream, a keep,
 * ids, no ranges), its checks one test. Each term of it is one of
 * slc__check_hold's checks passing (ids not NULL, so not "NULL array with
 * a count"; at most SLC__HOLD_MAX_WORDS of them; no ranges, so none to check);
 * a NULL stream and any other hold go to slc__record_external before anything
 * is done, which checks again and refuses with the reason. */
static inline __attribute__((always_inline)) int slc__record_ids(
    slc_stream *s, const slc_hold *hold, const char *fn, bool marker) {
  if (__builtin_expect(s == NULL || hold == NULL || hold->n_ranges != 0 ||
                           hold->vec_ids == NULL ||
                           hold->n_vec > SLC__HOLD_MAX_WORDS,
                       0))
    return slc__record_external(s, hold, fn, marker);
  return slc__record_checked(s, hold, fn, marker, false);
}

int slc_stream_record_external(slc_stream *s, const slc_hold *hold) {
  return slc__record_ids(s, hold, "slc_stream_record_external", true);
}

int slc_stream_record_deferred(slc_stream *s, const slc_hold *hold) {
  return slc__record_ids(s, hold, "slc_stream_record_deferred", false);
}

int slc_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
               unsigned shared_bytes, void **params, const slc_hold *hold) {
  struct slc__op op = {.kind = SLC__LAUNCH,
                       .f = f,
                       .grid = grid,
                       .block = block,
                       .shared = shared_bytes,
                       .params = params};
  return slc__run_op(s, &op, hold, "slc_launch");
}
