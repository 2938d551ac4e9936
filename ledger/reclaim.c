/*
 * The per-stream ring, part 6 of 7: reclaiming retired segments in batches.
 *
 * WHY NOT ONE call_rcu PER SEGMENT
 *   liburcu's call_rcu thread runs a grace period for what it has queued,
 *   runs the callbacks, then sleeps 10 ms (poll(NULL, 0, 10), fixed in
 *   liburcu 0.13; a call_rcu_data of our own sleeps the same). So a retired
 *   segment came back to the pool 10 ms or more after it was retired. A
 *   private stream at 20 M entries/s writes one fresh 64-byte slot per
 *   entry: 13 MB of segments per thread went by before the first came back,
 *   every slot write missed the caches (issue 11, recl7's evidence in
 *   bench/RESULTS.md: a probe writing one line per op over W bytes per
 *   thread, 16 threads, cost 12 ns at 1-4 MiB and 17.5-23 ns at 16-32 MiB),
 *   and the 1 MiB pool could hold a tenth of it: the rest went to glibc and
 *   came back page-faulting.
 *
 * THE BATCH
 *   So a retired segment goes on one process-wide lock-free list (a stack:
 *   pushes, and a take-all by exchange, hence no ABA; linked through
 *   g->retired_next, never g->next, which readers that found g may still
 *   follow and a popper of the pool may still read). A reclaimer thread
 *   takes the whole list, runs one grace period
 *   (urcu_memb_synchronize_rcu), then puts each segment in its ledger's
 *   pool or frees it (pool.c). It runs a batch once the list holds
 *   LDG__RECLAIM_BYTES, at most once per LDG__RECLAIM_MIN_NS, and a smaller
 *   list after LDG__RECLAIM_LAZY_NS; with nothing retired it sleeps on a
 *   futex. The retirer never waits: it pushes, adds the segment's bytes,
 *   and wakes the reclaimer (a futex wake, no wait) when its push found the
 *   list empty or took it past LDG__RECLAIM_BYTES, a few wakes per batch.
 *   A busy ledger then gets a segment back within a few milliseconds: the
 *   pool is LIFO, so the next extension pops what was retired last, still
 *   in the caches.
 *
 * WHY THE GRACE PERIOD IS LONG ENOUGH
 *   A segment is pushed after the CAS that made it unreachable (segment.c:
 *   head moved past it, or it was never linked), and the batch's grace
 *   period starts after the exchange that took it, which read that push. So
 *   the grace period starts after the segment's retirement, and waits for
 *   every reader that could have found it: exactly what a call_rcu begun at
 *   the retirement guaranteed; it only starts later. (The models in
 *   ledger/model abstract a segment's grace period as "waits for the
 *   readers inside when it was retired, ends at any time after they left":
 *   a later start waits for no fewer of those, so every batched history is
 *   one the models already check; they are unchanged.) pool.c's ABA
 *   argument holds as it was: a segment's next trip into a pool still waits
 *   for a grace period that starts after it was popped.
 *   ThreadSanitizer sees the retirer's writes through the push (release)
 *   and the exchange (acquire), and every reader's through rcu.c's token:
 *   ldg__rcu_synchronize acquires it after the grace period.
 *
 * WHO RUNS BATCHES, AND WAITING FOR THEM
 *   Whoever holds ldg__rc.lock: the reclaimer thread, or a thread that
 *   flushes (ldg__reclaim_flush: ldg_quiesce, ldg_ledger_trim,
 *   ldg_ledger_destroy, all calls that may block). The lock covers the
 *   take, the grace period and the puts, so a flusher that got it knows
 *   that every batch taken before was finished, and it takes and finishes
 *   what was pushed before its call itself, and what its own batches trim
 *   from the pools (ldg__reclaim_flush). The retirer never takes it.
 *
 * STARTING, FAILING, FORK
 *   The thread starts from ldg_ledger_create and ldg_stream_create (calls
 *   that may block); until one was started (or if pthread_create failed), a
 *   retirer hands its segment to call_rcu as before (ldg__rc.listed, read
 *   by the retirer). A fork waits for a batch in progress (pthread_atfork
 *   prepare: takes the lock, so no batch is half done in the child). The
 *   child has no reclaimer (ldg__rc.running false): it keeps pushing on the
 *   list, which its first ldg_ledger_create or ldg_stream_create gives a
 *   reclaimer of its own (or a flush runs), segments pushed before the fork
 *   included. Under ThreadSanitizer, whose runtime kills a child of a
 *   multi-threaded process that starts a thread, the child starts none:
 *   only a flush runs its list (ldg__rcu_child_threads).
 *   liburcu's own call_rcu thread does not survive a fork either, and the
 *   ledger leaves its fork handlers (urcu_memb_call_rcu_before_fork, ...
 *   after_fork_parent, ..._after_fork_child) to the program, as liburcu
 *   asks (it discourages registering them with pthread_atfork when
 *   callbacks free memory, as the ledger's do): without them a child's
 *   rcu_barrier, hence its ldg_quiesce, ldg_ledger_trim and
 *   ldg_ledger_destroy, waits forever (README, "Fork"). The reclaimer never
 *   enters a read-side section, so it is never registered with liburcu and
 *   leaves no registration behind in a child (liburcu's memb flavour wants
 *   every other thread's registration gone at a fork: a child walking a
 *   registration whose thread did not come along read freed memory).
 */
#define _GNU_SOURCE 1             /* syscall(2), for the futex */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

/* Enough retired bytes to be worth a grace period at once (16 segments of
 * 1024 slots); at most one batch per MIN_NS; a smaller list waits LAZY_NS.
 * Measured on the H200 (bench/RESULTS.md, "the reclaimer's cadence"): a
 * batch every 0.5 ms made 10 500 membarriers a second at 16 threads (each
 * an IPI to every worker's CPU) and put private streams' p99.9 at 1.5 us;
 * every 2 ms, 1 000 a second and 0.45 us, with segments back within 2-4 ms
 * (one thread 32.8 ns per op against 41.7 at 0.5 ms and 48.2 before the
 * reclaimer). -D overrides them, for such variants. */
#ifndef LDG__RECLAIM_BYTES
#define LDG__RECLAIM_BYTES ((int64_t)1 << 20)
#endif
#ifndef LDG__RECLAIM_MIN_NS
#define LDG__RECLAIM_MIN_NS 2000000ull   /* 2 ms */
#endif
#define LDG__RECLAIM_LAZY_NS 5000000ull  /* 5 ms */

static struct {
  /* Held by whoever runs a batch (see WHO RUNS BATCHES). */
  pthread_mutex_t lock;
  /* Retired segments waiting for a batch, linked through retired_next. */
  _Atomic(struct ldg__seg *) list;
  /* Their bytes, about: added after the push, taken off after the batch
   * (may dip below 0 meanwhile). */
  _Atomic int64_t pending;
  /* The futex word: a retirer that wakes the reclaimer adds 1 first. */
  _Atomic uint32_t wake;
  /* A reclaimer thread was started (in this process or before a fork):
   * retirers push on the list. */
  _Atomic bool listed;
  /* A reclaimer thread runs in this process. */
  _Atomic bool running;
  /* This process may start no thread (a forked child under
   * ThreadSanitizer: see STARTING, FAILING, FORK). */
  _Atomic bool no_threads;
  /* Statistics (ledger_testing.h): batches run, segments through them,
   * segments retired through call_rcu (no reclaimer). */
  _Atomic uint64_t batches, batched, via_call_rcu;
} ldg__rc = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t ldg__rc_once = PTHREAD_ONCE_INIT;

static void ldg__rc_futex_wake(void) {
  (void)syscall(SYS_futex, &ldg__rc.wake, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Sleeps while the futex word is still w, at most ns (0: no bound). */
static void ldg__rc_futex_wait(uint32_t w, uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  (void)syscall(SYS_futex, &ldg__rc.wake, FUTEX_WAIT_PRIVATE, w,
                ns ? &ts : NULL, NULL, 0);
}

/* Takes the list and reclaims it: one grace period, then each segment to
 * its pool or freed. Caller holds ldg__rc.lock. Returns whether it trimmed
 * a pool (pool.c: those segments are on the list now). */
static bool ldg__rc_batch(void) {
  /* Acquire: pairs with the pushes' CASes (release halves; each acquired
   * the one before it), so every retired_next below is read as pushed, and
   * each retirer's writes to its segment happen-before our puts. */
  struct ldg__seg *b =
      ldg__exchange_acq_rel(&ldg__rc.list, (struct ldg__seg *)NULL);
  if (b == NULL) return false;
  LDG__HOOK(LDG__HOOK_RECLAIM_TAKEN, NULL);
  /* Starts after the exchange, so after every retirement taken above. */
  ldg__rcu_synchronize();
  /* The list is newest first; the pools are LIFO. Reversed, the segment
   * retired last is pushed last, so the next pop takes the one most likely
   * still in a cache. On the way, what this batch returns per ledger, for
   * the adaptive pool limit (pool.c): batch_bytes is only touched under
   * ldg__rc.lock; every segment holds a reference to its ledger until it
   * is put below. */
  struct ldg__seg *rev = NULL;
  int64_t bytes = 0;
  uint64_t n = 0;
  while (b != NULL) {
    struct ldg__seg *next = b->retired_next;
    size_t sb = ldg__seg_bytes(b->size);
    b->ledger->batch_bytes += sb;
    bytes += (int64_t)sb;
    n++;
    b->retired_next = rev;
    rev = b;
    b = next;
  }
  bool trimmed = false;
  for (struct ldg__seg *g = rev; g != NULL; g = g->retired_next) {
    if (g->ledger->batch_bytes != 0) {
      if (ldg__pool_adapt(g->ledger, g->ledger->batch_bytes)) trimmed = true;
      g->ledger->batch_bytes = 0;
    }
  }
  b = rev;
  while (b != NULL) {
    /* Read before the put: once pooled, g may be popped, reused and
     * retired again by another thread. */
    struct ldg__seg *next = b->retired_next;
    ldg__seg_pool_put(b); /* may free b, and its ledger with its last ref */
    b = next;
  }
  /* Relaxed: counters; pending only decides when to wake and run. */
  ldg__fetch_sub_relaxed(&ldg__rc.pending, bytes);
  ldg__fetch_add_relaxed(&ldg__rc.batches, 1);
  ldg__fetch_add_relaxed(&ldg__rc.batched, n);
  return trimmed;
}

static void *ldg__rc_thread(void *unused) {
  (void)unused;
  uint64_t last = 0;
  bool waited = false; /* a small list already waited LAZY_NS once */
  for (;;) {
    /* seq_cst, the word before the list: a retirer pushes, then adds to
     * wake (both seq_cst). If our loads below miss its push, our load of
     * wake came first, and the futex wait returns at once on its add. */
    uint32_t w = ldg__load_seq_cst(&ldg__rc.wake);
    if (ldg__load_seq_cst(&ldg__rc.list) == NULL) {
      waited = false;
      ldg__rc_futex_wait(w, 0);
      continue;
    }
    if (ldg__load_seq_cst(&ldg__rc.pending) < LDG__RECLAIM_BYTES && !waited) {
      waited = true; /* a retirer crossing the threshold wakes us */
      ldg__rc_futex_wait(w, LDG__RECLAIM_LAZY_NS);
      continue;
    }
    waited = false;
    uint64_t now = ldg__now_ns();
    if (now - last < LDG__RECLAIM_MIN_NS) {
      uint64_t ns = LDG__RECLAIM_MIN_NS - (now - last);
      struct timespec ts = {0, (long)ns};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
    }
    last = ldg__now_ns();
    pthread_mutex_lock(&ldg__rc.lock);
    (void)ldg__rc_batch(); /* a trim's segments: the next batch's */
    pthread_mutex_unlock(&ldg__rc.lock);
  }
  return NULL;
}

/* ---- Fork ------------------------------------------------------------------ */

static void ldg__rc_prepare(void) {
  pthread_mutex_lock(&ldg__rc.lock); /* no batch in progress across fork */
}

static void ldg__rc_parent(void) { pthread_mutex_unlock(&ldg__rc.lock); }

static void ldg__rc_child(void) {
  /* The reclaimer did not come along: the next create starts one (none,
   * where the child may start no thread); retirers still push. Relaxed:
   * this is the child's only thread. */
  ldg__store_relaxed(&ldg__rc.running, false);
  ldg__store_relaxed(&ldg__rc.no_threads, !ldg__rcu_child_threads());
  pthread_mutex_unlock(&ldg__rc.lock); /* taken by this thread's prepare */
}

static void ldg__rc_init(void) {
  (void)pthread_atfork(ldg__rc_prepare, ldg__rc_parent, ldg__rc_child);
}

/* ---- Entry points (internal.h) -------------------------------------------- */

void ldg__reclaim_start(void) {
  (void)pthread_once(&ldg__rc_once, ldg__rc_init);
  /* Relaxed: a hint; the check under the lock decides (the child's reset
   * was made by this thread's own fork). */
  if (ldg__load_relaxed(&ldg__rc.running)) return;
  pthread_mutex_lock(&ldg__rc.lock); /* one starter at a time */
  /* Relaxed, both: under the lock (no_threads: set by this process's own
   * fork, before any other thread of it existed). */
  if (!ldg__load_relaxed(&ldg__rc.running) &&
      !ldg__load_relaxed(&ldg__rc.no_threads)) {
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    sigfillset(&all);
    /* The thread takes no signal of the application's. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_attr_init(&attr) == 0) {
      (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      /* running: relaxed, read under the lock. listed: release, the
       * lock's and the list's initial state before a retirer pushes (its
       * acquire load in ldg__reclaim_retire). On failure retirers keep
       * using call_rcu; the next create tries again. */
      if (pthread_create(&t, &attr, ldg__rc_thread, NULL) == 0) {
        ldg__store_relaxed(&ldg__rc.running, true);
        ldg__store_release(&ldg__rc.listed, true);
      }
      pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pthread_mutex_unlock(&ldg__rc.lock);
}

void ldg__reclaim_retire(struct ldg__seg *g) {
  /* Acquire: pairs with ldg__reclaim_start's release store. */
  if (!ldg__load_acquire(&ldg__rc.listed)) {
    ldg__fetch_add_relaxed(&ldg__rc.via_call_rcu, 1); /* a statistic */
    ldg__call_rcu(&g->rcu, ldg__seg_pool_cb);
    return;
  }
  /* Relaxed: the CAS checks it. */
  struct ldg__seg *top = ldg__load_relaxed(&ldg__rc.list);
  do {
    g->retired_next = top; /* published by the CAS (acquire: the exchange) */
    /* seq_cst: the handshake with the reclaimer's loads (see its loop). */
  } while (!ldg__cas_seq_cst(&ldg__rc.list, &top, g));
  int64_t bytes = (int64_t)ldg__seg_bytes(g->size);
  int64_t before = ldg__fetch_add_seq_cst(&ldg__rc.pending, bytes);
  if (top == NULL ||
      (before < LDG__RECLAIM_BYTES && before + bytes >= LDG__RECLAIM_BYTES)) {
    /* A wake, never a wait: the reclaimer may be asleep on the word. */
    ldg__fetch_add_seq_cst(&ldg__rc.wake, 1);
    ldg__rc_futex_wake();
  }
}

void ldg__reclaim_flush(void) {
  pthread_mutex_lock(&ldg__rc.lock);
  /* What was pushed before the call; then, while the last batch trimmed a
   * pool whose limit went down (pool.c), the batch that frees what it
   * trimmed. That batch adapts to the bytes it frees and may lower the
   * limit again (by half, down to the floor) and trim more: it did once
   * the first trim took a small largest class (tests/unit/reclaim_test.c,
   * flush_trims_all; two batches left the second trim on the list). A
   * ledger trims in a batch only if that batch holds its segments, so,
   * with no other thread retiring, only if it trimmed in the one before;
   * from the second batch on its pools gain nothing (the dirty segments
   * are freed), and each trim empties a class: at most LDG__POOL_CLASSES
   * trims in a row, so the bound below ends the loop only where other
   * threads retire meanwhile (what they retire after the call is not the
   * call's to wait for). */
  bool trimmed = ldg__rc_batch();
  for (unsigned i = 0; trimmed && i < LDG__POOL_CLASSES; i++) {
    trimmed = ldg__rc_batch();
  }
  pthread_mutex_unlock(&ldg__rc.lock);
}

void ldg__reclaim_barrier(void) {
  /* Our batch first: its puts call nothing through call_rcu, and the
   * barrier then waits for every callback queued before it (segments
   * retired while no reclaimer ran, streams, payloads, pool trims). */
  ldg__reclaim_flush();
  ldg__rcu_barrier();
}

/* ---- Inspection (ledger_testing.h) ------------------------------------------ */

ldg__reclaim_stats ldg__reclaim_inspect(void) {
  /* Relaxed: statistics. */
  return (ldg__reclaim_stats){
      .batches = ldg__load_relaxed(&ldg__rc.batches),
      .batched = ldg__load_relaxed(&ldg__rc.batched),
      .via_call_rcu = ldg__load_relaxed(&ldg__rc.via_call_rcu),
      .running = ldg__load_relaxed(&ldg__rc.running),
      .listed = ldg__load_relaxed(&ldg__rc.listed),
  };
}
