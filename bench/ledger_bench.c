/*
 * ledger_bench — throughput, scaling and tail latency of the lock-free ledger
 * (ledger/ledger.h, "ledger") against a C port of the original single-mutex
 * design (bench/mutex_ledger.h, "mutex"), side by side in one run.
 *
 * Both are driven through one small table of function pointers (bench_impl),
 * so every workload is written once and pays the same indirect call.
 *
 * WORKLOADS (issue 5)
 *   private   each thread enqueues on its own stream and releases to the seq
 *             of its last enqueue every K ops.
 *   shared    all threads enqueue on one stream; every K ops each of them
 *             reads the stream's mark and releases to it.
 *   ceiling   not a ledger (issue 11): each thread reserves a sequence with
 *             one fetch_add on one shared line and writes that sequence's
 *             64-byte slot, the least a sequence-indexed ring must do. Runs
 *             with shared; the shared rows say what fraction of it they reach.
 *   serving   each thread owns a copy stream a and a compute stream b on
 *             device tid % 4: per request, a copy on a, mark a, b waits on
 *             that mark, two operations on b; every 4 requests it releases b
 *             to its mark (which releases a through the wait); every 64
 *             requests it snapshots its device (device_marks, release_marks),
 *             releasing the other threads' streams of that device too.
 *             Ops are enqueues and waits.
 *   serving+reader  the same, plus one thread calling holds_vector and
 *             holds_host_range without pause (the memory manager); the row
 *             reports the enqueuers' throughput and what the reader cost them.
 *   serving+paired  (--reader-windows MS, issue 11) the reader's cost paired
 *             within one run: the reader queries in one window of about MS
 *             and sleeps through the next, the enqueuers' ops are counted
 *             per window, and each adjacent on/off pair gives one cost; see
 *             "The reader in windows" below.
 *   holds     (issue 11) the cost of a holds_vector / holds_host_range miss
 *             against one stream with 1 k, 16 k and 128 k pending entries.
 *   backlog   one thread enqueues N (1 000 000) operations on one stream,
 *             then releases them with one call: fill and release times,
 *             peak ledger memory, memory after release and after quiesce.
 *
 * MEASURES
 *   ops/s    total operations over the timed phase's wall time (first thread
 *            start to last thread end).
 *   ns/op    wall time x min(threads, CPUs) / ops: the core time one
 *            enqueue plus its share of a release costs (oversubscribed rows
 *            are not charged for threads waiting for a CPU).
 *   p50/p99/p99.9  latency of single ldg_enqueue calls, one in every
 *            --sample-every, timed with the TSC (x86) or CLOCK_MONOTONIC; the
 *            timer's own cost is printed and not subtracted.
 *   ldg/mtx  ledger throughput / mutex throughput.
 *
 * Each row: threads are created, pinned round-robin to the allowed CPUs, set
 * up their streams, meet at a barrier, run a warm-up phase, meet again, run
 * the timed phase (fixed --seconds, or --ops per thread), then tear down.
 *
 * CORRECTNESS GUARD (not timing): every keep is a real callback that adds
 * its unique id to counters of the thread running it (count, sum, sum of
 * squares); after each row the totals must equal those of the keeps enqueued,
 * i.e. every keep ran exactly once. The bench aborts otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define BENCH_TSC 1
#else
#define BENCH_TSC 0
#endif

#include "bench/bench_keeps.h"
#include "bench/clock.h"
#include "ledger/ledger.h"
#include "ledger/ledger_testing.h" /* ldg__thread_query_reads */

/* BENCH_EVIDENCE: this file built as //bench:ledger_evidence_bench, the
 * ledger with its test hooks and the counters of bench/evidence.h; no mutex
 * design (it would link the hook-free ledger a second time). */
#ifdef BENCH_EVIDENCE
#include "bench/evidence.h"
#define EV(call) call
#else
#include "bench/mutex_ledger.h"
#define EV(call) ((void)0)
#endif

/* ---- Errors ---------------------------------------------------------------- */

static void die(const char *what, int rc) {
  fprintf(stderr, "ledger_bench: %s failed: %s (%d)\n", what, ldg_strerror(rc),
          rc);
  abort();
}

#define CHECK(call)                       \
  do {                                    \
    int check_rc_ = (call);               \
    if (check_rc_ != LDG_OK) die(#call, check_rc_); \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "ledger_bench: out of memory (%zu bytes)\n", n);
    abort();
  }
  return p;
}

/* ---- The two implementations behind one table ------------------------------ */

typedef struct bench_impl {
  const char *name;
  int (*ledger_create)(void **out);
  void (*ledger_destroy)(void *l);
  int (*stream_create)(void *l, int device, unsigned flags, void **out);
  int (*stream_destroy)(void *s);
  void (*stream_unref)(void *s);
  int (*enqueue)(void *s, ldg_keep keep, const uint64_t *vec_ids, size_t n_vec,
                 const ldg_range *ranges, size_t n_ranges, ldg_seq *seq_out);
  ldg_seq (*mark)(void *s);
  int (*add_wait)(void *b, void *a, ldg_seq upto, ldg_seq *seq_out);
  int (*release)(void *s, ldg_seq upto);
  int (*device_marks)(void *l, int device, void **out);
  int (*release_marks)(void *m);
  size_t (*pending_count)(void *s);
  bool (*holds_vector)(void *l, uint64_t vec_id);
  bool (*holds_host_range)(void *l, uintptr_t addr, size_t bytes);
  size_t (*bytes)(void *l);
  void (*quiesce)(void);
} bench_impl;

/* Non-blocking streams need a drain; the bench never settles, so it is never
 * called. */
static int drain_ok(void *ctx) { return 0; }

/* Thin typed wrappers (calling through a cast function pointer would be
 * undefined); each is a tail call. */
#define BENCH_IMPL(P, NAME, LT, ST, MT)                                        \
  static int P##_b_ledger_create(void **out) {                                 \
    LT *l = NULL;                                                              \
    int rc = P##_ledger_create(&l);                                            \
    *out = l;                                                                  \
    return rc;                                                                 \
  }                                                                            \
  static void P##_b_ledger_destroy(void *l) { P##_ledger_destroy(l); }         \
  static int P##_b_stream_create(void *l, int device, unsigned flags,          \
                                 void **out) {                                 \
    ST *s = NULL;                                                              \
    int rc = P##_stream_create(l, device, flags, drain_ok, NULL, &s);          \
    *out = s;                                                                  \
    return rc;                                                                 \
  }                                                                            \
  static int P##_b_stream_destroy(void *s) { return P##_stream_destroy(s); }   \
  static void P##_b_stream_unref(void *s) { P##_stream_unref(s); }             \
  static int P##_b_enqueue(void *s, ldg_keep k, const uint64_t *v, size_t nv,  \
                           const ldg_range *r, size_t nr, ldg_seq *out) {      \
    return P##_enqueue(s, k, v, nv, r, nr, out);                               \
  }                                                                            \
  static ldg_seq P##_b_mark(void *s) { return P##_mark(s); }                   \
  static int P##_b_add_wait(void *b, void *a, ldg_seq u, ldg_seq *out) {       \
    return P##_add_wait(b, a, u, out);                                         \
  }                                                                            \
  static int P##_b_release(void *s, ldg_seq u) { return P##_release(s, u); }   \
  static int P##_b_device_marks(void *l, int device, void **out) {             \
    MT *m = NULL;                                                              \
    int rc = P##_device_marks(l, device, &m);                                  \
    *out = m;                                                                  \
    return rc;                                                                 \
  }                                                                            \
  static int P##_b_release_marks(void *m) { return P##_release_marks(m); }     \
  static size_t P##_b_pending_count(void *s) { return P##_pending_count(s); }  \
  static bool P##_b_holds_vector(void *l, uint64_t id) {                       \
    return P##_holds_vector(l, id);                                            \
  }                                                                            \
  static bool P##_b_holds_host_range(void *l, uintptr_t a, size_t b) {         \
    return P##_holds_host_range(l, a, b);                                      \
  }                                                                            \
  static size_t P##_b_bytes(void *l) { return P##_ledger_bytes(l); }           \
  static void P##_b_quiesce(void) { P##_quiesce(); }                           \
  static const bench_impl P##_impl = {                                         \
      NAME,                  P##_b_ledger_create, P##_b_ledger_destroy,        \
      P##_b_stream_create,   P##_b_stream_destroy, P##_b_stream_unref,         \
      P##_b_enqueue,         P##_b_mark,           P##_b_add_wait,             \
      P##_b_release,         P##_b_device_marks,   P##_b_release_marks,        \
      P##_b_pending_count,   P##_b_holds_vector,   P##_b_holds_host_range,     \
      P##_b_bytes,           P##_b_quiesce,                                    \
  };

BENCH_IMPL(ldg, "ledger", ldg_ledger, ldg_stream, ldg_marks)
#ifndef BENCH_EVIDENCE
BENCH_IMPL(mldg, "mutex", mldg_ledger, mldg_stream, mldg_marks)
#endif

enum { IMPL_LEDGER = 0, IMPL_MUTEX = 1, N_IMPLS = 2 };
#ifdef BENCH_EVIDENCE
static const bench_impl *const impls[N_IMPLS] = {&ldg_impl, NULL};
#else
static const bench_impl *const impls[N_IMPLS] = {&ldg_impl, &mldg_impl};
#endif

/* ---- Options ---------------------------------------------------------------- */

static struct {
  int max_threads;
  int thread_list[16];
  int n_thread_list;
  double seconds;      /* timed phase per row, when ops == 0 */
  double warm_seconds; /* warm-up per row, when ops == 0 */
  uint64_t ops;        /* per thread per row; 0 = use seconds */
  uint64_t backlog;    /* entries in the deep-backlog workload */
  unsigned release_every;
  unsigned sample_every;
  unsigned repeat; /* runs per row; the one of median throughput is kept */
  bool pin;
  bool reader; /* serving also runs serving+reader */
  bool ceiling; /* shared also runs the ceiling loop */
  double reader_rate; /* reader queries per second; 0 = without pause */
  double reader_windows_ms; /* > 0: also the serving+paired rows, windows of this */
  bool reader_detached; /* the reader queries a ledger of its own */
  bool reader_null; /* the reader keeps its CPU busy without querying */
  bool queried; /* --queried: each ledger is queried once before its rows */
  uint64_t holds_pending; /* holds rows: this depth only; 0 = 1 k, 16 k, 128 k */
  bool smoke;
  bool run_impl[N_IMPLS];
  const char *workload; /* NULL = all */
  long long pool_limit; /* the ledger's segment pool, bytes; < 0 = default */
  uint64_t vector_index; /* ldg_ledger_index_vectors(ids); 0 = off */
  const char *json;
} opt = {
    .seconds = 1.0,
    .warm_seconds = 0.2,
    .backlog = 1000000,
    .release_every = 16,
    .sample_every = 61, /* prime: does not alias with K or the request shape */
    .repeat = 1,
    .pin = true,
    .reader = true,
    .ceiling = true,
    .pool_limit = -1,
#ifdef BENCH_EVIDENCE
    .run_impl = {true, false},
#else
    .run_impl = {true, true},
#endif
};

static int cpus[1024];
static int n_cpus;

/* ---- Time ------------------------------------------------------------------ */

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

#if BENCH_TSC
/* lfence keeps the enqueue from starting before the first read; rdtscp waits
 * for it to finish before the second. */
static inline uint64_t tick_begin(void) {
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
static inline uint64_t tick_end(void) {
  unsigned aux;
  uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
}
static const char *timer_name = "rdtsc";
#else
static inline uint64_t tick_begin(void) { return bench_mono_ns(); }
static inline uint64_t tick_end(void) { return bench_mono_ns(); }
static const char *timer_name = "clock_gettime(CLOCK_MONOTONIC)";
#endif

static double ns_per_tick = 1.0;
static double timer_overhead_ns;

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct(double *v, size_t n, double q) { /* sorts v */
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i];
}

static void calibrate_timer(void) {
#if BENCH_TSC
  uint64_t n0 = bench_mono_ns(), t0 = __rdtsc();
  sleep_s(0.05);
  uint64_t n1 = bench_mono_ns(), t1 = __rdtsc();
  ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
#endif
  enum { N = 20001 };
  uint64_t *d = xmalloc(N * sizeof *d);
  for (int i = 0; i < N; i++) {
    uint64_t a = tick_begin();
    uint64_t b = tick_end();
    d[i] = b - a;
  }
  qsort(d, N, sizeof *d, cmp_u64);
  timer_overhead_ns = (double)d[N / 2] * ns_per_tick;
  free(d);
}

/* ---- Keeps: the exactly-once guard ----------------------------------------- */

/* ---- Rows and workers ------------------------------------------------------- */

typedef struct row_ctx row_ctx;
typedef struct worker worker;

typedef struct workload {
  const char *name;
  void (*row_setup)(row_ctx *rc);    /* main thread, before workers start */
  void (*row_teardown)(row_ctx *rc); /* main thread, after workers joined */
  void (*setup)(worker *w);          /* each worker, before the barrier */
  void (*run)(worker *w);            /* each worker, one phase */
  void (*teardown)(worker *w);       /* each worker, after the timed phase */
} workload;

struct row_ctx {
  const bench_impl *impl;
  const workload *wl;
  void *ledger;
  void *shared; /* the shared workload's stream */
  int threads;
  bool reader;
  bool timed;         /* the phase running now is the timed one */
  uint64_t phase_ops; /* ops per thread per phase, ops mode */
  pthread_barrier_t barrier;
  atomic_int stop;       /* seconds mode: main asks the phase to end */
  atomic_int enqueuers;  /* enqueuers still in the phase (reader stops at 0) */
  uint64_t reader_queries;
  ldg__query_reads reader_reads; /* the ledger's reader, timed phase */
  /* --reader-windows: the reader alternates windows in the timed phase;
   * workers publish their ops (worker.ops_seen); the reader logs each
   * complete window here (cap_win preallocated by run_row). */
  bool windows;
  struct reader_window *win;
  size_t n_win, cap_win;
  worker *workers; /* the enqueuers, for the reader's snapshots */
};

struct worker {
  _Alignas(64) row_ctx *rc;
  const bench_impl *impl;
  int tid;
  int cpu;
  uint64_t ops; /* this phase */
  /* ops, published every 64 when the row runs the reader in windows
   * (phase_going); read by the reader at each window's boundary. */
  _Atomic uint64_t ops_seen;
  uint64_t start_ns, end_ns;
  unsigned sample_countdown;
  uint64_t *samples;
  size_t n_samples, cap_samples;
  uint64_t keep_base, keep_seq;
  keep_sums enq;
  uint64_t rng;
  void *s[2];
  char pad[64];
};

static inline bool phase_going(worker *w) {
  const row_ctx *rc = w->rc;
  if (rc->phase_ops != 0) return w->ops < rc->phase_ops;
  if ((w->ops & 63) != 0) return true;
  /* Relaxed: a count the reader reads for its value only; each worker's
   * stores are one modification order, so its snapshots never go back. */
  if (rc->windows) atomic_store_explicit(&w->ops_seen, w->ops, memory_order_relaxed);
  return atomic_load_explicit(&rc->stop, memory_order_relaxed) == 0;
}

static inline ldg_keep make_keep(worker *w) {
  uint64_t id = w->keep_base + ++w->keep_seq;
  w->enq.n++;
  w->enq.sum += id;
  w->enq.sq += id * id;
  return (ldg_keep){keep_fn, (void *)(uintptr_t)id};
}

static void push_sample(worker *w, uint64_t ticks) {
  if (w->n_samples == w->cap_samples) {
    w->cap_samples = w->cap_samples ? w->cap_samples * 2 : 4096;
    uint64_t *p = realloc(w->samples, w->cap_samples * sizeof *p);
    if (p == NULL) {
      fprintf(stderr, "ledger_bench: out of memory for samples\n");
      abort();
    }
    w->samples = p;
  }
  w->samples[w->n_samples++] = ticks;
}

/* ldg_enqueue with a fresh keep; one call in sample_every is timed. */
static inline ldg_seq bench_enqueue(worker *w, void *s, const uint64_t *v,
                                    size_t nv, const ldg_range *r, size_t nr) {
  ldg_keep k = make_keep(w);
  ldg_seq seq = 0;
  int rc;
  EV(ev_op_begin());
  if (--w->sample_countdown == 0) {
    w->sample_countdown = opt.sample_every;
    EV(ev_sample_begin());
    uint64_t t0 = tick_begin();
    rc = w->impl->enqueue(s, k, v, nv, r, nr, &seq);
    uint64_t t1 = tick_end();
    EV(ev_sample_end(w->rc->timed, t0, t1));
    if (w->rc->timed) push_sample(w, t1 - t0);
  } else {
    rc = w->impl->enqueue(s, k, v, nv, r, nr, &seq);
  }
  if (rc != LDG_OK) die("enqueue", rc);
  return seq;
}

static inline uint64_t xorshift(uint64_t *x) {
  uint64_t v = *x;
  v ^= v << 13;
  v ^= v >> 7;
  v ^= v << 17;
  return *x = v;
}

/* Ids and host ranges the workloads name: per thread, a small rotating set,
 * so the reader's queries find some of them held. */
#define VEC_BASE(tid) ((uint64_t)((tid) + 1) << 20)
#define HOST_BASE(tid) ((uintptr_t)0x100000000u + (uintptr_t)(tid) * 0x1000000u)
#define N_DEVICES 4

/* ---- Workload: private streams --------------------------------------------- */

static const workload wl_private_si, wl_serving_si;

/* The stream flags a worker adds for its own streams: the *_si rows
 * create them LDG_STREAM_SINGLE_ISSUER (each is recorded on by its one
 * worker only; releases and snapshots still come from any thread). The
 * mutex design has no such mode: its rows are the plain ones. */
static unsigned si_flag(const worker *w) {
  bool si = w->rc->wl == &wl_private_si || w->rc->wl == &wl_serving_si;
  return si && w->impl == impls[IMPL_LEDGER] ? LDG_STREAM_SINGLE_ISSUER : 0;
}

static void private_setup(worker *w) {
  CHECK(w->impl->stream_create(w->rc->ledger, w->tid % N_DEVICES, si_flag(w),
                               &w->s[0]));
}

/* One op of the private workload on stream s: an enqueue naming one id and
 * one range, and every k ops (opt.release_every, read once by the caller) a
 * release up to it. Also the slices mode's ledger and mutex parts
 * (run_slices). */
static inline void private_op(worker *w, void *s, unsigned k) {
  uint64_t i = w->ops;
  uint64_t vec = VEC_BASE(w->tid) + (i & 255);
  ldg_range r = {HOST_BASE(w->tid) + (uintptr_t)(i & 255) * 4096, 4096};
  ldg_seq seq = bench_enqueue(w, s, &vec, 1, &r, 1);
  w->ops++;
  if (w->ops % k == 0) CHECK(w->impl->release(s, seq));
}

static void private_run(worker *w) {
  void *s = w->s[0];
  const unsigned k = opt.release_every;
  while (phase_going(w)) private_op(w, s, k);
}

static void private_teardown(worker *w) {
  CHECK(w->impl->stream_destroy(w->s[0]));
  w->impl->stream_unref(w->s[0]);
}

static const workload wl_private = {
    "private", NULL, NULL, private_setup, private_run, private_teardown,
};

/* The same, on LDG_STREAM_SINGLE_ISSUER streams (ledger only; opt-in). */
static const workload wl_private_si = {
    "private_si", NULL, NULL, private_setup, private_run, private_teardown,
};

/* ---- Workload: one shared stream ------------------------------------------- */

static void shared_row_setup(row_ctx *rc) {
  CHECK(rc->impl->stream_create(rc->ledger, 0, 0, &rc->shared));
}

static void shared_row_teardown(row_ctx *rc) {
  CHECK(rc->impl->stream_destroy(rc->shared));
  rc->impl->stream_unref(rc->shared);
}

static void shared_run(worker *w) {
  void *s = w->rc->shared;
  const unsigned k = opt.release_every;
  while (phase_going(w)) {
    uint64_t i = w->ops;
    uint64_t vec = VEC_BASE(w->tid) + (i & 255);
    ldg_range r = {HOST_BASE(w->tid) + (uintptr_t)(i & 255) * 4096, 4096};
    (void)bench_enqueue(w, s, &vec, 1, &r, 1);
    w->ops++;
    if (w->ops % k == 0) {
      ldg_seq m = w->impl->mark(s);
      CHECK(w->impl->release(s, m));
    }
  }
}

static void noop_worker(worker *w) {}

static const workload wl_shared = {
    "shared", shared_row_setup, shared_row_teardown,
    noop_worker, shared_run, noop_worker,
};

/* ---- Workload: the ceiling of one shared stream (issue 11) ------------------
 * Not a ledger: the least any sequence-indexed ring must do per enqueue. Each
 * thread reserves a sequence with one fetch_add on one shared line and writes
 * that sequence's 64-byte slot (what an enqueue writes: state, keep, one id,
 * one range) in a ring of CEIL_SLOTS lines, then publishes it with a release
 * store. Nothing is ever released or read back, so no keep runs: the shared
 * rows are reported as a fraction of this, measured in the same run. The row
 * runs under the ledger's table only to reuse the harness (its ledger is
 * created and left unused). */
enum { CEIL_SLOTS = 1u << 16 }; /* 4 MiB: larger than a core's L2 */

struct ceil_slot {
  _Alignas(64) _Atomic uint64_t state; /* the seq, stored last (release) */
  void (*fn)(void *);
  void *ctx;
  uint64_t vec;
  uint64_t addr, bytes;
  uint64_t pad[2];
};

struct ceil_ring {
  _Alignas(64) _Atomic uint64_t next; /* the one shared line */
  /* On next's line, as the ledger's tail_end and grow_at are on tail's: read
   * by the ceiling_load, _pfw and _rmw forms only (never written after
   * setup, so their check always passes). */
  _Atomic uint64_t end, grow;
  char pad[40];
  /* ceiling_release only: every seq up to it has been read back. */
  _Alignas(64) _Atomic uint64_t released;
  char pad2[56];
  struct ceil_slot slots[CEIL_SLOTS];
};

static void ceiling_row_setup(row_ctx *rc) {
  struct ceil_ring *r = aligned_alloc(64, sizeof *r);
  if (r == NULL) abort();
  memset(r, 0, sizeof *r); /* faults every page in before the warm-up */
  atomic_store(&r->end, UINT64_MAX / 2);
  atomic_store(&r->grow, UINT64_MAX / 2);
  rc->shared = r;
}

static void ceiling_row_teardown(row_ctx *rc) { free(rc->shared); }

/* How a ceiling row reserves its sequence: the ceiling's fetch_add; or, for
 * comparison (issue 11, sixth session), the CAS loop the ledger's CAS path
 * makes (load, CAS t -> t + 1, again on failure), and that loop with bounded
 * exponential backoff after a failed CAS (1, 2, 4 .. 64 pause instructions,
 * then a fresh load); or (tenth session) loads of the line before the
 * fetch_add, alone or after a prefetch for write or an RMW adding 0; or the
 * fetch_add with the least a release does every --release-every ops
 * (CEIL_RELEASE); or (eleventh session) the loads' shape published by a CAS
 * of the slot's state, as a shared stream's enqueue publishes
 * (CEIL_LOAD_PUBCAS). Same slot write in all. */
enum {
  CEIL_FAA,
  CEIL_CAS,
  CEIL_CAS_BACKOFF,
  CEIL_LOAD_FAA,
  CEIL_PFW_FAA,
  CEIL_RMW_FAA,
  CEIL_RELEASE,
  CEIL_LOAD_PUBCAS
};

/* A prefetch for write of p's line: ledger/atomics.h's
 * ldg__prefetch_for_write, which is the ledger's own (not exported). */
#if defined(__x86_64__)
#define ceil_prefetch_for_write(p) \
  __asm__ volatile("prefetchw %0" : : "m"(*(const char *)(p)))
#else
#define ceil_prefetch_for_write(p) __builtin_prefetch((const void *)(p), 1, 3)
#endif

static inline uint64_t ceiling_reserve(struct ceil_ring *r, int how) {
  if (how == CEIL_FAA || how == CEIL_RELEASE)
    return atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed) + 1;
  /* The shape of the ledger's shared fast path (reserve.h, ldg__ring_reserve):
   * grow point, end and tail loaded, checked, then the fetch_add, all on
   * one line; and the same after a prefetch for write of that line, or
   * after an RMW adding 0 (both tried in the ledger, neither kept: issue
   * 11, tenth session). */
  if (how == CEIL_LOAD_FAA || how == CEIL_PFW_FAA || how == CEIL_RMW_FAA ||
      how == CEIL_LOAD_PUBCAS) {
    if (how == CEIL_PFW_FAA) ceil_prefetch_for_write(&r->next);
    /* An RMW that adds 0: takes the line writable, reads nothing used. */
    if (how == CEIL_RMW_FAA)
      (void)atomic_fetch_add_explicit(&r->next, 0, memory_order_seq_cst);
    uint64_t g = atomic_load_explicit(&r->grow, memory_order_acquire);
    uint64_t e = atomic_load_explicit(&r->end, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&r->next, memory_order_seq_cst);
    if (t + 1 + 32 >= e) abort(); /* never: end is 2^63 */
    uint64_t got = atomic_fetch_add_explicit(&r->next, 1, memory_order_seq_cst) + 1;
    if (got >= g) abort();
    return got;
  }
  uint64_t t = atomic_load_explicit(&r->next, memory_order_relaxed);
  unsigned pauses = 1;
  while (!atomic_compare_exchange_strong_explicit(&r->next, &t, t + 1,
                                                  memory_order_seq_cst,
                                                  memory_order_relaxed)) {
    if (how == CEIL_CAS_BACKOFF) {
      for (unsigned k = 0; k < pauses; k++) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
      if (pauses < 64) pauses <<= 1;
      t = atomic_load_explicit(&r->next, memory_order_relaxed);
    }
  }
  return t + 1;
}

static inline void ceiling_one(struct ceil_ring *r, uint64_t vec, uint64_t addr,
                               uint64_t id, int how) {
  uint64_t seq = ceiling_reserve(r, how);
  struct ceil_slot *slot = &r->slots[seq & (CEIL_SLOTS - 1)];
  slot->fn = keep_fn;
  slot->ctx = (void *)(uintptr_t)id;
  slot->vec = vec;
  slot->addr = addr;
  slot->bytes = 4096;
  if (how == CEIL_LOAD_PUBCAS) {
    /* The publication a shared stream's enqueue makes (ring.c: a CAS of
     * the slot's state, acq_rel), on the line just written; the value it
     * replaces is the slot's last lap's (nothing releases here). */
    uint64_t was = atomic_load_explicit(&slot->state, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&slot->state, &was, seq,
                                                 memory_order_acq_rel,
                                                 memory_order_relaxed))
      abort(); /* never: only this op writes the slot in its lap */
    return;
  }
  atomic_store_explicit(&slot->state, seq, memory_order_release);
}

/* ceiling_release: the ceiling, and every K ops (--release-every) the least
 * a release of one shared stream must do: read the mark, claim (released,
 * mark] with a CAS on a second shared line, and for each seq of it read the
 * slot's keep (waiting for its publication), call nothing (the ceiling's
 * slots hold no keep to verify) and mark the slot empty. Not a ledger: a
 * bound for the shared rows that do release, beside the issue's ceiling. */
static _Atomic uint64_t ceiling_release_lapped;

static uint64_t ceiling_release_upto(struct ceil_ring *r) {
  uint64_t sink = 0;
  uint64_t m = atomic_load_explicit(&r->next, memory_order_acquire);
  uint64_t from = atomic_load_explicit(&r->released, memory_order_relaxed);
  while (from < m && !atomic_compare_exchange_weak_explicit(
                         &r->released, &from, m, memory_order_acq_rel,
                         memory_order_relaxed)) {
  }
  for (uint64_t q = from + 1; q <= m; q++) {
    struct ceil_slot *slot = &r->slots[q & (CEIL_SLOTS - 1)];
    /* Published, or its seq's lap is over: a releaser switched out after
     * its claim finds the enqueuers a lap of the ring (64 k seqs) further
     * and the slot reused, emptied or not. Then it stops waiting
     * (ceiling_release_lapped, said after the row if not 0). */
    while (atomic_load_explicit(&slot->state, memory_order_acquire) < q) {
      if (atomic_load_explicit(&r->next, memory_order_relaxed) >= q + CEIL_SLOTS) {
        atomic_fetch_add_explicit(&ceiling_release_lapped, 1, memory_order_relaxed);
        break;
      }
    }
    sink += (uintptr_t)slot->fn ^ (uintptr_t)slot->ctx;
    /* A CAS, not the ledger's plain store: a releaser switched out for a
     * lap must not empty the slot's next seq (the ring has no head). */
    uint64_t want = q;
    atomic_compare_exchange_strong_explicit(&slot->state, &want, 0,
                                            memory_order_relaxed,
                                            memory_order_relaxed);
  }
  return sink;
}

static inline __attribute__((always_inline)) void ceiling_loop(worker *w,
                                                             int how) {
  struct ceil_ring *r = w->rc->shared;
  const unsigned k = opt.release_every;
  uint64_t sink = 0; /* CEIL_RELEASE: what the read-backs read */
  while (phase_going(w)) {
    uint64_t i = w->ops;
    uint64_t vec = VEC_BASE(w->tid) + (i & 255);
    uint64_t addr = HOST_BASE(w->tid) + (uintptr_t)(i & 255) * 4096;
    if (--w->sample_countdown == 0) { /* timed like an enqueue */
      w->sample_countdown = opt.sample_every;
      uint64_t t0 = tick_begin();
      ceiling_one(r, vec, addr, i, how);
      uint64_t t1 = tick_end();
      if (w->rc->timed) push_sample(w, t1 - t0);
    } else {
      ceiling_one(r, vec, addr, i, how);
    }
    w->ops++;
    if (how == CEIL_RELEASE && w->ops % k == 0) sink += ceiling_release_upto(r);
  }
  if (how == CEIL_RELEASE) __asm__ volatile("" : : "r"(sink));
}

static void ceiling_run(worker *w) { ceiling_loop(w, CEIL_FAA); }
static void ceiling_cas_run(worker *w) { ceiling_loop(w, CEIL_CAS); }
static void ceiling_backoff_run(worker *w) { ceiling_loop(w, CEIL_CAS_BACKOFF); }
static void ceiling_load_run(worker *w) { ceiling_loop(w, CEIL_LOAD_FAA); }
static void ceiling_pfw_run(worker *w) { ceiling_loop(w, CEIL_PFW_FAA); }
static void ceiling_rmw_run(worker *w) { ceiling_loop(w, CEIL_RMW_FAA); }
static void ceiling_release_run(worker *w) { ceiling_loop(w, CEIL_RELEASE); }
static void ceiling_pubcas_run(worker *w) { ceiling_loop(w, CEIL_LOAD_PUBCAS); }

/* The ceiling and its comparison forms, one row each. The first is the
 * issue's ceiling (with the shared rows); the others run only when named
 * with --workload. */
struct ceiling_form {
  workload wl;
  const char *note; /* the row's notes column */
};
static const struct ceiling_form ceiling_forms[] = {
    {{"ceiling", ceiling_row_setup, ceiling_row_teardown, noop_worker, ceiling_run,
      noop_worker},
     "fetch_add on one line + a 64 B slot write (no ledger)"},
    {{"ceiling_cas", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_cas_run, noop_worker},
     "CAS loop on one line + a 64 B slot write (no ledger)"},
    {{"ceiling_backoff", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_backoff_run, noop_worker},
     "CAS loop, bounded exponential backoff + slot (no ledger)"},
    {{"ceiling_load", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_load_run, noop_worker},
     "3 loads of the line, fetch_add + slot (no ledger)"},
    {{"ceiling_pfw", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_pfw_run, noop_worker},
     "prefetchw, 3 loads, fetch_add + slot (no ledger)"},
    {{"ceiling_rmw", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_rmw_run, noop_worker},
     "fetch_add 0, 3 loads, fetch_add + slot (no ledger)"},
    {{"ceiling_release", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_release_run, noop_worker},
     "ceiling + release: claim, read back, empty (no ledger)"},
    {{"ceiling_pubcas", ceiling_row_setup, ceiling_row_teardown, noop_worker,
      ceiling_pubcas_run, noop_worker},
     "ceiling_load, published by a CAS of the slot's state (no ledger)"},
};
enum { N_CEILING_FORMS = sizeof ceiling_forms / sizeof ceiling_forms[0] };

/* The ceiling form named name, or NULL. */
static const struct ceiling_form *ceiling_form_named(const char *name) {
  for (int k = 0; k < N_CEILING_FORMS; k++)
    if (strcmp(ceiling_forms[k].wl.name, name) == 0) return &ceiling_forms[k];
  return NULL;
}

/* ---- Workload: serving mix --------------------------------------------------- */

enum { SERVE_RELEASE_EVERY = 4, SERVE_SNAPSHOT_EVERY = 64 };

static void serving_setup(worker *w) {
  int dev = w->tid % N_DEVICES;
  /* The copy stream is non-blocking, as SPOC creates them. */
  CHECK(w->impl->stream_create(w->rc->ledger, dev,
                               LDG_STREAM_NONBLOCKING | si_flag(w), &w->s[0]));
  CHECK(w->impl->stream_create(w->rc->ledger, dev, si_flag(w), &w->s[1]));
}

static void serving_run(worker *w) {
  const bench_impl *im = w->impl;
  void *a = w->s[0], *b = w->s[1];
  int dev = w->tid % N_DEVICES;
  uint64_t req = 0;
  while (phase_going(w)) {
    uint64_t vin = VEC_BASE(w->tid) + (req & 63) * 2, vout = vin + 1;
    uint64_t kv[2] = {vin, vout};
    uintptr_t host = HOST_BASE(w->tid) + (uintptr_t)(req & 63) * 65536;
    ldg_range hin = {host, 32768}, hout = {host + 32768, 32768};
    (void)bench_enqueue(w, a, &vin, 1, &hin, 1); /* copy H->D on a */
    ldg_seq ma = im->mark(a);                     /* record e on a */
    CHECK(im->add_wait(b, a, ma, NULL));          /* b waits on e */
    (void)bench_enqueue(w, b, kv, 2, NULL, 0);    /* kernel on b */
    (void)bench_enqueue(w, b, &vout, 1, &hout, 1); /* copy D->H on b */
    w->ops += 4;
    req++;
    if (req % SERVE_RELEASE_EVERY == 0) /* sync b: releases a too */
      CHECK(im->release(b, im->mark(b)));
    if (req % SERVE_SNAPSHOT_EVERY == 0) { /* context sync of the device */
      void *m;
      CHECK(im->device_marks(w->rc->ledger, dev, &m));
      CHECK(im->release_marks(m));
    }
  }
}

static void serving_teardown(worker *w) {
  for (int i = 1; i >= 0; i--) {
    CHECK(w->impl->stream_destroy(w->s[i]));
    w->impl->stream_unref(w->s[i]);
  }
}

static const workload wl_serving = {
    "serving", NULL, NULL, serving_setup, serving_run, serving_teardown,
};

/* The same, each worker's two streams LDG_STREAM_SINGLE_ISSUER (ledger
 * only; other workers' snapshots still release them). */
static const workload wl_serving_si = {
    "serving_si", NULL, NULL, serving_setup, serving_run, serving_teardown,
};

/* The memory manager: asks about vectors and host ranges the enqueuers use. */
/* --reader-detached: a ledger of the reader's own, shaped like the serving
 * row's (two streams per enqueuer, each holding 8 requests' entries with
 * the ids and ranges the reader asks about), that nobody writes while the
 * reader runs: what a reader costs the enqueuers without touching a line of
 * theirs. Keeps with no release: nothing to count. */
typedef struct detached {
  void *ledger;
  int n;
  void **streams; /* their references: the last unref would release them */
} detached;

static void detached_init(detached *d, const bench_impl *im, int threads) {
  CHECK(im->ledger_create(&d->ledger));
  d->n = 2 * threads;
  d->streams = xmalloc(sizeof(void *) * (size_t)d->n);
  for (int i = 0; i < d->n; i++) {
    int tid = i / 2, k = i % 2;
    CHECK(im->stream_create(d->ledger, tid % N_DEVICES,
                            k == 0 ? LDG_STREAM_NONBLOCKING : 0,
                            &d->streams[i]));
    for (uint64_t req = 0; req < 8; req++) {
      uint64_t v = VEC_BASE(tid) + req * 2 + (uint64_t)k;
      ldg_range r = {HOST_BASE(tid) + (uintptr_t)req * 65536 +
                         (uintptr_t)k * 32768, 32768};
      CHECK(im->enqueue(d->streams[i], (ldg_keep){NULL, NULL}, &v, 1, &r, 1,
                        NULL));
    }
  }
}

static void detached_fini(detached *d, const bench_impl *im) {
  for (int i = 0; i < d->n; i++) {
    CHECK(im->stream_destroy(d->streams[i]));
    im->stream_unref(d->streams[i]);
  }
  free(d->streams);
  im->ledger_destroy(d->ledger);
}

/* One pair of the memory manager's queries: a vector and a host range of a
 * random enqueuer's rotating set. */
static inline void reader_query(worker *w, const bench_impl *im, void *ledger) {
  uint64_t x = xorshift(&w->rng);
  if (opt.reader_null) return; /* the control: a busy CPU, no query */
  int tid = (int)(x % (uint64_t)w->rc->threads);
  uint64_t slot = (x >> 16) & 63;
  (void)im->holds_vector(ledger, VEC_BASE(tid) + slot * 2);
  (void)im->holds_host_range(ledger, HOST_BASE(tid) + slot * 65536 + 4096, 256);
}

/* The paced reader's wait for its next query pair at `next` (ns): sleeps
 * through long gaps and spins through short ones. */
static void reader_wait(uint64_t next) {
  for (uint64_t t = bench_mono_ns(); t < next; t = bench_mono_ns())
    if (next - t > 200000) sleep_s((double)(next - t - 100000) / 1e9);
}

/* ---- The reader in windows (--reader-windows, issue 11, ninth session) ------
 * The unpaired cost, 1 - (serving+reader throughput / serving throughput),
 * divides two rows run one after the other; on a host whose cores are
 * shared with other tenants part of the time (the H200 KVM guest: one
 * thread's loop runs at ~24 ns/op for a few hundred ms, then ~40), that
 * ratio moves by +-5-10 points between rounds. Here the timed phase of ONE
 * serving+reader row is cut into windows of about opt.reader_windows_ms:
 * the reader queries in one (exactly as reader_main does: the same query
 * mix, paced or not) and sleeps through the next, in pairs whose order
 * alternates (on-off, off-on, on-off, ...: a steady drift of the host
 * weighs on both sides alike). At each boundary the reader snapshots the
 * sum of the enqueuers' published ops (worker.ops_seen, stored every 64 ops
 * in phase_going) and the time. Each pair gives one cost, 1 - (on-window
 * ops / ns) / (off-window ops / ns): both windows are a few ms apart, so a
 * change of the host's state lands in one pair, not in the median. A window
 * still open when the phase ends is dropped, and with it its pair. */
typedef struct reader_window {
  uint64_t ops, ns, queries;
  bool on;
} reader_window;

static uint64_t enqueuer_ops(const row_ctx *rc) {
  uint64_t sum = 0;
  for (int i = 0; i < rc->threads; i++) /* relaxed: see phase_going */
    sum += atomic_load_explicit(&rc->workers[i].ops_seen, memory_order_relaxed);
  return sum;
}

/* Window k is on in pair k / 2 = j's first half when j is even, its second
 * half when j is odd: on, off, off, on, on, off, ... */
static bool window_on(uint64_t k) { return ((k ^ (k >> 1)) & 1) == 0; }

static void reader_windows(worker *w, const bench_impl *im, void *ledger) {
  row_ctx *rc = w->rc;
  const uint64_t len = (uint64_t)(opt.reader_windows_ms * 1e6);
  const uint64_t gap = opt.reader_rate > 0 ? (uint64_t)(2e9 / opt.reader_rate) : 0;
  uint64_t t0 = bench_mono_ns(), ops0 = enqueuer_ops(rc);
  for (uint64_t k = 0; rc->n_win < rc->cap_win; k++) {
    const uint64_t end = t0 + len;
    const bool on = window_on(k);
    uint64_t q = 0;
    if (on) {
      /* The pacing starts afresh in each on-window: no catching up on the
       * off-window's queries. */
      for (uint64_t next = t0;;) {
        if (gap != 0) {
          next += gap;
          if (next >= end) {
            reader_wait(end);
            break;
          }
          reader_wait(next);
        } else if ((q & 15) == 0 && bench_mono_ns() >= end) {
          break;
        }
        reader_query(w, im, ledger);
        q += 2;
      }
    } else {
      uint64_t now = bench_mono_ns();
      if (now < end) sleep_s((double)(end - now) / 1e9);
    }
    uint64_t t1 = bench_mono_ns(), ops1 = enqueuer_ops(rc);
    /* Ran into the phase's end (or, --ops, every enqueuer is done): the
     * enqueuers did not run all of it. */
    if (atomic_load_explicit(&rc->stop, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&rc->enqueuers, memory_order_relaxed) < rc->threads)
      break;
    rc->win[rc->n_win++] = (reader_window){ops1 - ops0, t1 - t0, q, on};
    rc->reader_queries += q;
    t0 = t1;
    ops0 = ops1;
  }
}

static void *reader_main(void *arg) {
  worker *w = arg;
  row_ctx *rc = w->rc;
  const bench_impl *im = w->impl;
  detached d = {NULL, 0, NULL};
  if (opt.reader_detached) detached_init(&d, im, rc->threads);
  void *ledger = opt.reader_detached ? d.ledger : rc->ledger;
  for (int phase = 0; phase < 2; phase++) {
    pthread_barrier_wait(&rc->barrier); /* start of the phase */
    uint64_t q = 0;
    ldg__query_reads r0 = ldg__thread_query_reads();
    if (phase == 1 && rc->windows) {
      reader_windows(w, im, ledger);
      q = rc->reader_queries;
    } else {
      /* Paced: one pair of queries every `gap` ns. */
      uint64_t gap = opt.reader_rate > 0 ? (uint64_t)(2e9 / opt.reader_rate) : 0;
      uint64_t next = bench_mono_ns();
      while (atomic_load_explicit(&rc->stop, memory_order_relaxed) == 0 &&
             atomic_load_explicit(&rc->enqueuers, memory_order_relaxed) > 0) {
        if (gap != 0) {
          next += gap;
          reader_wait(next);
        }
        reader_query(w, im, ledger);
        q += 2;
      }
    }
    if (phase == 1) {
      rc->reader_queries = q;
      ldg__query_reads r1 = ldg__thread_query_reads(); /* 0 for mutex */
      rc->reader_reads = (ldg__query_reads){
          r1.segments - r0.segments, r1.slots - r0.slots,
          r1.stream_lines - r0.stream_lines, r1.headers - r0.headers,
          r1.filters - r0.filters};
    }
    pthread_barrier_wait(&rc->barrier); /* end of the phase */
  }
  if (opt.reader_detached) detached_fini(&d, im);
  return NULL;
}

/* ---- Running one row --------------------------------------------------------- */

/* Barrier protocol (workers, the reader if any, and main):
 *   B1 all set up -> warm-up phase -> B2 -> (main resets) B3 -> timed phase
 *   -> B4 -> teardown. The reader joins B1..B4 the same way. */
static void *worker_main(void *arg) {
  worker *w = arg;
  row_ctx *rc = w->rc;
  EV(ev_worker_start());
  rc->wl->setup(w);
  for (int phase = 0; phase < 2; phase++) {
    /* The reader's first snapshot of the timed phase comes after B3: it
     * reads this 0 or a count of the timed phase, never the warm-up's. */
    atomic_store_explicit(&w->ops_seen, 0, memory_order_relaxed);
    pthread_barrier_wait(&rc->barrier); /* B1 / B3 */
    w->ops = 0;
    w->start_ns = bench_mono_ns();
    rc->wl->run(w);
    w->end_ns = bench_mono_ns();
    EV(ev_worker_phase_end(phase == 1));
    atomic_fetch_sub_explicit(&rc->enqueuers, 1, memory_order_relaxed);
    pthread_barrier_wait(&rc->barrier); /* B2 / B4 */
  }
  rc->wl->teardown(w);
  flush_keeps(&w->enq);
  return NULL;
}

typedef struct row_result {
  const char *workload;
  const char *impl;
  int threads;
  uint64_t ops;
  double seconds;
  double ops_per_s;
  double ns_per_op;
  double p50_ns, p99_ns, p999_ns, max_ns;
  size_t samples;
  double reader_qps;  /* serving+reader: reader queries per second */
  double reader_cost; /* serving+reader: 1 - with / without reader */
  /* serving+reader, the ledger: segments visited, slots read, and every
   * line enqueuers or releases write that was read (slots, tail and
   * released words, segment headers), per query (ldg__thread_query_reads) */
  double reader_segs_per_q, reader_slots_per_q, reader_lines_per_q;
  /* of those lines, the streams' (tail, released) and the segment headers;
   * and the published filters' lines read (summary.c: enqueuers write them
   * only while a filter grows), not in the lines above */
  double reader_stream_per_q, reader_headers_per_q, reader_filters_per_q;
  /* serving+paired (--reader-windows): the per-pair costs' median and
   * quartiles over every pair of the --repeat runs, their number, the
   * pooled cost (1 - all on-window ops / ns over all off-window ops / ns),
   * the reader's queries per second in on-windows, and the unpaired cost of
   * the same invocation's serving and serving+reader rows */
  double pair_med, pair_p25, pair_p75, pair_pooled, on_qps, unpaired_cost;
  size_t pairs;
  double *pair_costs; /* the pairs' costs, in order; owned by results[] */
  /* backlog */
  uint64_t backlog;
  double fill_ms, release_ms;
  size_t peak_bytes, bytes_after_release, bytes_after_quiesce;
  bool is_backlog;
  double of_ceiling; /* shared: ops_per_s / the ceiling loop's, same threads */
  double holds_vector_ns, holds_range_ns; /* holds_miss: ns per missing query */
} row_result;

static row_result *results;
static size_t n_results, cap_results;
static double ceiling_ops[16]; /* by index into opt.thread_list */

static row_result *new_result(void) {
  if (n_results == cap_results) {
    cap_results = cap_results ? cap_results * 2 : 64;
    row_result *p = realloc(results, cap_results * sizeof *p);
    if (p == NULL) abort();
    results = p;
  }
  row_result *r = &results[n_results++];
  memset(r, 0, sizeof *r);
  return r;
}

static double percentile_ns(const uint64_t *sorted, size_t n, double p) {
  if (n == 0) return 0;
  size_t i = (size_t)floor(p * (double)(n - 1) + 0.5);
  return (double)sorted[i] * ns_per_tick;
}

static void fill_latency(row_result *r, uint64_t *all, size_t n) {
  qsort(all, n, sizeof *all, cmp_u64);
  r->samples = n;
  r->p50_ns = percentile_ns(all, n, 0.50);
  r->p99_ns = percentile_ns(all, n, 0.99);
  r->p999_ns = percentile_ns(all, n, 0.999);
  r->max_ns = n ? (double)all[n - 1] * ns_per_tick : 0;
}

static void start_thread(pthread_t *t, void *(*fn)(void *), void *arg, int cpu) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (opt.pin && n_cpus > 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_attr_setaffinity_np(&attr, sizeof set, &set);
  }
  int e = pthread_create(t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  if (e != 0) {
    fprintf(stderr, "ledger_bench: pthread_create: %s\n", strerror(e));
    abort();
  }
}

/* The lock-free ledger's options (--pool-limit, --vector-index), on a ledger
 * just created, before its first stream. */
static void ldg_configure(const bench_impl *im, void *l) {
  if (im != &ldg_impl) return;
  if (opt.pool_limit >= 0)
    CHECK(ldg_ledger_set_pool_limit(l, (size_t)opt.pool_limit));
  if (opt.vector_index != 0)
    CHECK(ldg_ledger_index_vectors(l, (size_t)opt.vector_index));
  if (opt.queried) {
    /* One query that walks a stream's tail segment (its one entry): the
     * segments linked from then on keep published filters (summary.c, "On
     * for a life"), as in a ledger a memory manager queries. */
    ldg_stream *s = NULL;
    uint64_t id = 1;
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &s));
    CHECK(ldg_enqueue(s, (ldg_keep){NULL, NULL}, &id, 1, NULL, 0, NULL));
    if (ldg_holds_vector(l, 2)) abort(); /* never enqueued */
    CHECK(ldg_stream_destroy(s));
    ldg_stream_unref(s);
  }
}

/* The pairs of serving+paired rows, over the --repeat runs of one row. */
typedef struct pair_log {
  double *cost;
  size_t n, cap;
  uint64_t on_ops, on_ns, off_ops, off_ns, on_queries;
} pair_log;

/* Appends the complete pairs of rc's windows to pl: windows 2j and 2j + 1
 * are pair j, one on and one off (window_on). */
static void log_pairs(const row_ctx *rc, pair_log *pl) {
  for (size_t j = 0; 2 * j + 1 < rc->n_win; j++) {
    const reader_window *a = &rc->win[2 * j], *b = &rc->win[2 * j + 1];
    const reader_window *on = a->on ? a : b, *off = a->on ? b : a;
    if (a->on == b->on) abort(); /* window_on pairs them */
    /* An off-window with no op published (possible only on a host so
     * loaded that an enqueuer never ran 64 ops in it) has no rate. */
    if (off->ops == 0 || on->ns == 0 || off->ns == 0) continue;
    if (pl->n == pl->cap) {
      pl->cap = pl->cap ? 2 * pl->cap : 64;
      pl->cost = realloc(pl->cost, pl->cap * sizeof *pl->cost);
      if (pl->cost == NULL) die("realloc", LDG_ENOMEM);
    }
    pl->cost[pl->n++] = 1.0 - ((double)on->ops / (double)on->ns) /
                                  ((double)off->ops / (double)off->ns);
    pl->on_ops += on->ops, pl->on_ns += on->ns, pl->on_queries += on->queries;
    pl->off_ops += off->ops, pl->off_ns += off->ns;
  }
}

/* reader: run the reader beside the enqueuers; pairs != NULL: in windows
 * (--reader-windows), each complete pair appended to *pairs. */
static void run_row(const bench_impl *im, const workload *wl, int threads,
                    bool reader, pair_log *pairs, row_result *out) {
  row_ctx rc;
  memset(&rc, 0, sizeof rc);
  rc.impl = im;
  rc.wl = wl;
  rc.threads = threads;
  rc.reader = reader;
  rc.windows = reader && pairs != NULL;
  if (rc.windows) {
    rc.cap_win = (size_t)(opt.seconds * 1e3 / opt.reader_windows_ms) + 4;
    rc.win = xmalloc(rc.cap_win * sizeof *rc.win);
  }
  atomic_init(&rc.stop, 0);
  atomic_init(&rc.enqueuers, threads);
  CHECK(im->ledger_create(&rc.ledger));
  ldg_configure(im, rc.ledger);
  EV(ev_set_ledger(rc.ledger)); /* the evidence build has the ledger only */
  if (wl->row_setup != NULL) wl->row_setup(&rc);
  int parties = threads + 1 + (reader ? 1 : 0);
  pthread_barrier_init(&rc.barrier, NULL, (unsigned)parties);

  worker *ws = aligned_alloc(64, sizeof(worker) * (size_t)(threads + 1));
  if (ws == NULL) abort();
  memset(ws, 0, sizeof(worker) * (size_t)(threads + 1));
  rc.workers = ws;
  pthread_t *th = xmalloc(sizeof(pthread_t) * (size_t)(threads + 1));
  for (int i = 0; i <= threads; i++) {
    worker *w = &ws[i];
    w->rc = &rc;
    w->impl = im;
    w->tid = i;
    w->cpu = n_cpus ? cpus[i % n_cpus] : 0;
    w->sample_countdown = opt.sample_every + (unsigned)i; /* de-phase threads */
    w->keep_base = (uint64_t)(i + 1) << 40;
    w->rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
  }
  for (int i = 0; i < threads; i++)
    start_thread(&th[i], worker_main, &ws[i], ws[i].cpu);
  if (reader) start_thread(&th[threads], reader_main, &ws[threads], ws[threads].cpu);

  uint64_t warm_ops = opt.ops ? (opt.ops / 10 ? opt.ops / 10 : 1) : 0;
  /* Warm-up. */
  rc.phase_ops = warm_ops;
  rc.timed = false;
  pthread_barrier_wait(&rc.barrier); /* B1 */
  if (!opt.ops) {
    sleep_s(opt.warm_seconds);
    atomic_store_explicit(&rc.stop, 1, memory_order_relaxed);
  }
  pthread_barrier_wait(&rc.barrier); /* B2 */
  /* Timed phase. Workers are parked in B3: plain stores are safe. */
  rc.phase_ops = opt.ops;
  rc.timed = true;
  atomic_store_explicit(&rc.stop, 0, memory_order_relaxed);
  atomic_store_explicit(&rc.enqueuers, threads, memory_order_relaxed);
  EV(ev_phase_begin());
  pthread_barrier_wait(&rc.barrier); /* B3 */
  if (!opt.ops) {
    sleep_s(opt.seconds);
    atomic_store_explicit(&rc.stop, 1, memory_order_relaxed);
  }
  pthread_barrier_wait(&rc.barrier); /* B4 */
  EV(ev_phase_end());
  for (int i = 0; i < threads + (reader ? 1 : 0); i++) pthread_join(th[i], NULL);

  uint64_t ops = 0, t_start = UINT64_MAX, t_end = 0;
  size_t n_samples = 0;
  for (int i = 0; i < threads; i++) {
    ops += ws[i].ops;
    if (ws[i].start_ns < t_start) t_start = ws[i].start_ns;
    if (ws[i].end_ns > t_end) t_end = ws[i].end_ns;
    n_samples += ws[i].n_samples;
  }
  uint64_t *all = xmalloc((n_samples ? n_samples : 1) * sizeof *all);
  size_t k = 0;
  for (int i = 0; i < threads; i++) {
    memcpy(all + k, ws[i].samples, ws[i].n_samples * sizeof *all);
    k += ws[i].n_samples;
    free(ws[i].samples);
  }
  double secs = (double)(t_end - t_start) / 1e9;
  out->impl = im->name;
  out->threads = threads;
  out->ops = ops;
  out->seconds = secs;
  out->ops_per_s = (double)ops / secs;
  int cores = threads < n_cpus ? threads : n_cpus;
  out->ns_per_op = secs * 1e9 * cores / (double)ops;
  fill_latency(out, all, n_samples);
  if (reader) {
    out->reader_qps = (double)rc.reader_queries / secs;
    if (rc.reader_queries > 0) {
      out->reader_segs_per_q =
          (double)rc.reader_reads.segments / (double)rc.reader_queries;
      out->reader_slots_per_q =
          (double)rc.reader_reads.slots / (double)rc.reader_queries;
      out->reader_lines_per_q =
          (double)(rc.reader_reads.slots + rc.reader_reads.stream_lines +
                   rc.reader_reads.headers) /
          (double)rc.reader_queries;
      out->reader_stream_per_q =
          (double)rc.reader_reads.stream_lines / (double)rc.reader_queries;
      out->reader_headers_per_q =
          (double)rc.reader_reads.headers / (double)rc.reader_queries;
      out->reader_filters_per_q =
          (double)rc.reader_reads.filters / (double)rc.reader_queries;
    }
  }
  free(all);
  if (rc.windows) {
    log_pairs(&rc, pairs);
    free(rc.win);
  }

  if (wl->row_teardown != NULL) wl->row_teardown(&rc);
  EV(ev_set_ledger(NULL)); /* its counts were read at the phase's end */
  im->ledger_destroy(rc.ledger);
  pthread_barrier_destroy(&rc.barrier);
  free(th);
  free(ws);
  char name[96];
  snprintf(name, sizeof name, "%s/%s/%d%s", wl->name, im->name, threads,
           rc.windows ? "+paired" : reader ? "+reader" : "");
#ifdef BENCH_EVIDENCE
  {
    int wcpus[1024];
    for (int i = 0; i < threads && i < 1024; i++)
      wcpus[i] = n_cpus ? cpus[i % n_cpus] : 0; /* as run_row pinned them */
    ev_row_report(name, ops, secs, wcpus, threads < 1024 ? threads : 1024);
  }
#endif
  verify_keeps("ledger_bench", name);
}

static int cmp_ops_per_s(const void *a, const void *b) {
  double x = ((const row_result *)a)->ops_per_s, y = ((const row_result *)b)->ops_per_s;
  return x < y ? -1 : x > y;
}

/* run_row opt.repeat times; keeps the run of median throughput (all of its
 * columns, so latency and throughput come from the same run). */
static void run_row_median(const bench_impl *im, const workload *wl, int threads,
                           bool reader, row_result *out) {
  row_result *runs = xmalloc(opt.repeat * sizeof *runs);
  for (unsigned i = 0; i < opt.repeat; i++) {
    memset(&runs[i], 0, sizeof runs[i]);
    run_row(im, wl, threads, reader, NULL, &runs[i]);
  }
  qsort(runs, opt.repeat, sizeof *runs, cmp_ops_per_s);
  *out = runs[opt.repeat / 2];
  free(runs);
}

/* The serving+paired row (--reader-windows): run_row with the reader in
 * windows, opt.repeat times; the columns are the run of median throughput
 * (as run_row_median), the pair statistics pool every run's pairs. */
static void run_row_paired(const bench_impl *im, const workload *wl, int threads,
                           row_result *out) {
  pair_log pl;
  memset(&pl, 0, sizeof pl);
  row_result *runs = xmalloc(opt.repeat * sizeof *runs);
  for (unsigned i = 0; i < opt.repeat; i++) {
    memset(&runs[i], 0, sizeof runs[i]);
    run_row(im, wl, threads, true, &pl, &runs[i]);
  }
  qsort(runs, opt.repeat, sizeof *runs, cmp_ops_per_s);
  *out = runs[opt.repeat / 2];
  free(runs);
  out->reader_qps = 0; /* the whole phase's rate means little here: on_qps */
  out->pairs = pl.n;
  out->pair_costs = pl.cost; /* in order; the statistics sort a copy */
  if (pl.n > 0) {
    double *v = xmalloc(pl.n * sizeof *v);
    memcpy(v, pl.cost, pl.n * sizeof *v);
    out->pair_p25 = pct(v, pl.n, 0.25);
    out->pair_med = pct(v, pl.n, 0.50);
    out->pair_p75 = pct(v, pl.n, 0.75);
    free(v);
    out->pair_pooled = 1.0 - ((double)pl.on_ops / (double)pl.on_ns) /
                                 ((double)pl.off_ops / (double)pl.off_ns);
    out->on_qps = (double)pl.on_queries / ((double)pl.on_ns / 1e9);
  }
}

/* ---- Workload: deep backlog (main thread) ------------------------------------ */

static void run_backlog(const bench_impl *im, uint64_t n, row_result *out) {
  void *l, *s;
  worker w;
  row_ctx rc;
  memset(&w, 0, sizeof w);
  memset(&rc, 0, sizeof rc);
  w.rc = &rc;
  w.impl = im;
  w.tid = 0;
  w.keep_base = (uint64_t)0xfffe << 40;
  w.sample_countdown = opt.sample_every;
  CHECK(im->ledger_create(&l));
  CHECK(im->stream_create(l, 0, 0, &s));

  uint64_t peak = 0, fill_ns = 0, rel_ns = 0;
  /* Round 0 warms up (a tenth of n), round 1 is measured. */
  for (int round = 0; round < 2; round++) {
    uint64_t count = round == 0 ? (n / 10 ? n / 10 : 1) : n;
    rc.timed = round == 1;
    uint64_t t0 = bench_mono_ns();
    for (uint64_t i = 0; i < count; i++) {
      uint64_t vec = VEC_BASE(0) + (i & 255);
      ldg_range r = {HOST_BASE(0) + (uintptr_t)(i & 255) * 4096, 4096};
      (void)bench_enqueue(&w, s, &vec, 1, &r, 1);
      if ((i & 65535) == 65535 && round == 1) {
        size_t b = im->bytes(l);
        if (b > peak) peak = b;
      }
    }
    uint64_t t1 = bench_mono_ns();
    size_t b = im->bytes(l);
    if (b > peak && round == 1) peak = b;
    if (im->pending_count(s) != count) {
      fprintf(stderr, "ledger_bench: backlog: %zu pending, expected %" PRIu64 "\n",
              im->pending_count(s), count);
      abort();
    }
    ldg_seq m = im->mark(s);
    uint64_t t2 = bench_mono_ns();
    CHECK(im->release(s, m));
    uint64_t t3 = bench_mono_ns();
    if (round == 1) {
      fill_ns = t1 - t0;
      rel_ns = t3 - t2;
    }
  }
  out->bytes_after_release = im->bytes(l);
  im->quiesce();
  out->bytes_after_quiesce = im->bytes(l);
  CHECK(im->stream_destroy(s));
  im->stream_unref(s);
  im->ledger_destroy(l);

  out->is_backlog = true;
  out->impl = im->name;
  out->threads = 1;
  out->backlog = n;
  out->ops = n;
  out->seconds = (double)(fill_ns + rel_ns) / 1e9;
  out->ops_per_s = (double)n / out->seconds;
  out->ns_per_op = (double)(fill_ns + rel_ns) / (double)n;
  out->fill_ms = (double)fill_ns / 1e6;
  out->release_ms = (double)rel_ns / 1e6;
  out->peak_bytes = peak;
  fill_latency(out, w.samples, w.n_samples);
  free(w.samples);
  /* This thread's keeps: flush as enqueued by it, then check. */
  add_enqueued(&w.enq);
  char name[64];
  snprintf(name, sizeof name, "backlog/%s", im->name);
  verify_keeps("ledger_bench", name);
}

/* ---- Workload: a query's miss against a deep backlog (issue 11) -------------
 * One stream holds `pending` entries (each one id and one range, all
 * distinct); the main thread then asks holds_vector about an id nobody holds
 * and holds_host_range about a range nobody holds, `queries` times each:
 * the cost of a miss, which must visit everything that could match. */
/* How many misses of one kind take about 0.2 s (3 to 1 000 000). */
static uint64_t holds_calibrate(const bench_impl *im, void *l, bool range) {
  uint64_t t0 = bench_mono_ns();
  bool hit = range ? im->holds_host_range(l, HOST_BASE(1), 64)
                   : im->holds_vector(l, VEC_BASE(1));
  if (hit) abort();
  uint64_t q = 200000000u / (bench_mono_ns() - t0 + 1);
  if (q < 3) q = 3;
  if (q > 1000000) q = 1000000;
  return q;
}

static void run_holds_miss(const bench_impl *im, uint64_t pending, row_result *out) {
  void *l, *s;
  worker w;
  row_ctx rc;
  memset(&w, 0, sizeof w);
  memset(&rc, 0, sizeof rc);
  w.rc = &rc;
  w.impl = im;
  w.keep_base = (uint64_t)0xfffd << 40;
  w.sample_countdown = opt.sample_every;
  CHECK(im->ledger_create(&l));
  ldg_configure(im, l);
  CHECK(im->stream_create(l, 0, 0, &s));
  for (uint64_t i = 0; i < pending; i++) {
    uint64_t vec = VEC_BASE(0) + i;
    ldg_range r = {HOST_BASE(0) + (uintptr_t)i * 64, 64};
    (void)bench_enqueue(&w, s, &vec, 1, &r, 1);
  }
  /* About 0.2 s of queries per kind, at least 3, each kind calibrated on
   * its own (with the vector index a vector miss costs far less than a
   * range miss). */
  uint64_t qv = holds_calibrate(im, l, false), qr = holds_calibrate(im, l, true);
  uint64_t t0 = bench_mono_ns();
  for (uint64_t i = 0; i < qv; i++)
    if (im->holds_vector(l, VEC_BASE(1) + (i & 1023))) abort(); /* never held */
  uint64_t t1 = bench_mono_ns();
  for (uint64_t i = 0; i < qr; i++)
    if (im->holds_host_range(l, HOST_BASE(1) + (uintptr_t)(i & 1023) * 64, 64)) abort();
  uint64_t t2 = bench_mono_ns();
  if (!im->holds_vector(l, VEC_BASE(0) + pending / 2)) abort(); /* a hit, to be sure */
  CHECK(im->release(s, im->mark(s)));
  CHECK(im->stream_destroy(s));
  im->stream_unref(s);
  im->ledger_destroy(l);
  add_enqueued(&w.enq);
  free(w.samples);
  char name[64];
  snprintf(name, sizeof name, "holds/%s/%" PRIu64, im->name, pending);
  verify_keeps("ledger_bench", name);
  out->impl = im->name;
  out->threads = 1;
  out->backlog = pending;
  out->ops = qv + qr;
  out->holds_vector_ns = (double)(t1 - t0) / (double)qv;
  out->holds_range_ns = (double)(t2 - t1) / (double)qr;
}

static void run_holds_rows(void) {
  uint64_t depths[] = {1024, 16384, 131072};
  size_t n_depths = sizeof depths / sizeof depths[0];
  if (opt.holds_pending != 0) {
    depths[0] = opt.holds_pending;
    n_depths = 1;
  }
  printf("\nholds_vector / holds_host_range miss, one stream with N pending "
         "entries (one id, one range each), main thread:\n");
  printf("  %-7s %8s %14s %12s %14s %12s\n", "impl", "N", "vector us/miss",
         "ns/entry", "range us/miss", "ns/entry");
  for (size_t d = 0; d < n_depths; d++) {
    uint64_t n = opt.smoke && opt.holds_pending == 0 ? depths[d] / 64 : depths[d];
    for (int k = 0; k < N_IMPLS; k++) {
      if (!opt.run_impl[k]) continue;
      row_result *r = new_result();
      run_holds_miss(impls[k], n, r);
      r->workload = "holds_miss";
      printf("  %-7s %8" PRIu64 " %14.2f %12.2f %14.2f %12.2f\n", r->impl, n,
             r->holds_vector_ns / 1e3, r->holds_vector_ns / (double)n,
             r->holds_range_ns / 1e3, r->holds_range_ns / (double)n);
    }
  }
  fflush(stdout);
}

/* ---- Output ------------------------------------------------------------------ */

static void fmt_lat(char *buf, size_t n, double ns) {
  if (ns < 10000)
    snprintf(buf, n, "%.0f", ns);
  else if (ns < 10e6)
    snprintf(buf, n, "%.0fu", ns / 1e3);
  else
    snprintf(buf, n, "%.0fm", ns / 1e6);
}

static void print_impl_cols(const row_result *r) {
  if (r == NULL) {
    printf(" | %8s %7s %6s %6s %6s", "-", "-", "-", "-", "-");
    return;
  }
  char a[16], b[16], c[16];
  fmt_lat(a, sizeof a, r->p50_ns);
  fmt_lat(b, sizeof b, r->p99_ns);
  fmt_lat(c, sizeof c, r->p999_ns);
  printf(" | %8.2f %7.1f %6s %6s %6s", r->ops_per_s / 1e6, r->ns_per_op, a, b, c);
}

static void print_header(void) {
  printf("%-15s %3s | %-8s %7s %6s %6s %6s | %-8s %7s %6s %6s %6s | %7s | %s\n",
         "workload", "thr", "ldg Mop/s", "ns/op", "p50", "p99", "p99.9",
         "mtx Mop/s", "ns/op", "p50", "p99", "p99.9", "ldg/mtx", "notes");
  printf("%.*s\n", 130,
         "--------------------------------------------------------------------"
         "--------------------------------------------------------------------");
}

static void print_row(const char *label, int threads, const row_result *ldg,
                      const row_result *mtx, const char *notes) {
  printf("%-15s %3d", label, threads);
  print_impl_cols(ldg);
  print_impl_cols(mtx);
  if (ldg != NULL && mtx != NULL)
    printf(" | %6.2fx", ldg->ops_per_s / mtx->ops_per_s);
  else
    printf(" | %7s", "-");
  printf(" | %s\n", notes);
  fflush(stdout);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void write_json(const char *path, int argc, char **argv) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "ledger_bench: cannot write %s: %s\n", path, strerror(errno));
    exit(2);
  }
  char model[256], host[256] = "unknown", date[64];
  cpu_model(model, sizeof model);
  gethostname(host, sizeof host);
  time_t t = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  fprintf(f, "{\n  \"meta\": {\"date\": \"%s\", \"host\": ", date);
  json_str(f, host);
  fprintf(f, ", \"cpus\": %d, \"cpu_model\": ", n_cpus);
  json_str(f, model);
  fprintf(f, ", \"timer\": \"%s\", \"timer_overhead_ns\": %.1f", timer_name,
          timer_overhead_ns);
  fprintf(f, ", \"release_every\": %u, \"sample_every\": %u, \"repeat\": %u",
          opt.release_every, opt.sample_every, opt.repeat);
  fprintf(f, ", \"seconds\": %g, \"ops_per_thread\": %" PRIu64, opt.seconds, opt.ops);
  fprintf(f, ", \"reader_rate\": %g, \"reader_windows_ms\": %g", opt.reader_rate,
          opt.reader_windows_ms);
  fprintf(f, ", \"argv\": [");
  for (int i = 0; i < argc; i++) {
    if (i) fputs(", ", f);
    json_str(f, argv[i]);
  }
  fprintf(f, "]},\n  \"rows\": [\n");
  for (size_t i = 0; i < n_results; i++) {
    const row_result *r = &results[i];
    const row_result *m = NULL;
    /* The mutex row of the same workload and threads, for the ratio. */
    for (size_t j = 0; j < n_results; j++)
      if (strcmp(results[j].impl, "mutex") == 0 &&
          strcmp(results[j].workload, r->workload) == 0 &&
          results[j].threads == r->threads)
        m = &results[j];
    fprintf(f, "    {\"workload\": \"%s\", \"impl\": \"%s\", \"threads\": %d",
            r->workload, r->impl, r->threads);
    fprintf(f, ", \"ops\": %" PRIu64 ", \"seconds\": %.6f, \"ops_per_s\": %.1f",
            r->ops, r->seconds, r->ops_per_s);
    fprintf(f, ", \"ns_per_op\": %.2f, \"p50_ns\": %.1f, \"p99_ns\": %.1f"
               ", \"p999_ns\": %.1f, \"max_ns\": %.1f, \"samples\": %zu",
            r->ns_per_op, r->p50_ns, r->p99_ns, r->p999_ns, r->max_ns, r->samples);
    if (m != NULL && m != r && m->ops_per_s > 0 && r->holds_vector_ns == 0)
      fprintf(f, ", \"ratio_vs_mutex\": %.3f", r->ops_per_s / m->ops_per_s);
    if (r->holds_vector_ns > 0)
      fprintf(f, ", \"pending\": %" PRIu64 ", \"holds_vector_miss_ns\": %.1f"
                 ", \"holds_host_range_miss_ns\": %.1f",
              r->backlog, r->holds_vector_ns, r->holds_range_ns);
    if (r->of_ceiling > 0) fprintf(f, ", \"of_ceiling\": %.4f", r->of_ceiling);
    if (r->reader_qps > 0)
      fprintf(f, ", \"reader_qps\": %.1f, \"reader_cost\": %.4f"
                 ", \"reader_segments_per_query\": %.2f"
                 ", \"reader_slots_per_query\": %.2f"
                 ", \"reader_enqueuer_lines_per_query\": %.2f"
                 ", \"reader_stream_lines_per_query\": %.2f"
                 ", \"reader_header_lines_per_query\": %.2f"
                 ", \"reader_filter_lines_per_query\": %.2f",
              r->reader_qps, r->reader_cost, r->reader_segs_per_q,
              r->reader_slots_per_q, r->reader_lines_per_q,
              r->reader_stream_per_q, r->reader_headers_per_q,
              r->reader_filters_per_q);
    if (strcmp(r->workload, "serving+paired") == 0) {
      fprintf(f, ", \"window_ms\": %g, \"pairs\": %zu, \"paired_cost_median\": %.4f"
                 ", \"paired_cost_p25\": %.4f, \"paired_cost_p75\": %.4f"
                 ", \"paired_cost_pooled\": %.4f, \"on_window_qps\": %.1f"
                 ", \"unpaired_cost\": %.4f, \"pair_costs\": [",
              opt.reader_windows_ms, r->pairs, r->pair_med, r->pair_p25,
              r->pair_p75, r->pair_pooled, r->on_qps, r->unpaired_cost);
      for (size_t j = 0; j < r->pairs; j++)
        fprintf(f, "%s%.4f", j ? ", " : "", r->pair_costs[j]);
      fputc(']', f);
    }
    if (r->is_backlog)
      fprintf(f, ", \"backlog\": %" PRIu64 ", \"fill_ms\": %.3f, \"release_ms\": %.3f"
                 ", \"peak_bytes\": %zu, \"bytes_after_release\": %zu"
                 ", \"bytes_after_quiesce\": %zu",
              r->backlog, r->fill_ms, r->release_ms, r->peak_bytes,
              r->bytes_after_release, r->bytes_after_quiesce);
    fprintf(f, "}%s\n", i + 1 < n_results ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  fclose(f);
}


/* ---- Slices: the ledger and the mutex design beside two fixed probes ---------
 * (--workload slices, only when named; issue 11, ninth session.) One thread,
 * pinned, runs in turn for about --slice-ms each: the private workload's
 * loop on the ledger, the same on the mutex design, two ALU probes
 * (xorshift and a 4 KiB table: instructions and L1, no memory) and a
 * pointer chase through 1 MiB (L2 latency). The order rotates each slice. On a shared
 * host (a KVM guest whose vCPU shares a physical core with other work, or
 * whose frequency moves) the probes do the same work in every slice, so a
 * slice where a probe slowed down is a slice where the machine did: paired
 * with the ledger's and the mutex's slices beside it, this tells the host's
 * state from the code's. Three probes: a single dependent chain (ALU: slows
 * with the clock only), eight independent chains (ILP: several instructions
 * a cycle, so it also slows when another hardware thread shares the core's
 * ports) and the chase (slows when the core's caches are shared or the
 * lines come from further out). Reports each part's median and spread over
 * all slices, the Pearson correlation of the ledger and the mutex with each
 * probe, and every part's median over the "quiet" slices (the ILP probe
 * within 5 % of its 5th percentile). --slices-out FILE: one line per slice. */
#ifndef BENCH_EVIDENCE
static const char *slices_out;
static double slice_ms = 1.0;

static uint64_t probe_tab[512];
static uint64_t *probe_ring; /* PROBE_LINES lines, one random cycle */
enum { PROBE_LINES = 16384 }; /* 1 MiB */

static __attribute__((noinline)) uint64_t probe_alu(uint64_t n, uint64_t x) {
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    probe_tab[x & 511] += x;
    x += probe_tab[(x >> 20) & 511];
  }
  return x;
}

/* Eight independent chains (shift, xor, an L1 load, add): several
 * instructions a cycle, so it slows when another hardware thread shares the
 * core's ports, which the single dependent chain above barely notices. */
static __attribute__((noinline)) uint64_t probe_ilp(uint64_t n, uint64_t x) {
  uint64_t c[8];
  for (int k = 0; k < 8; k++) c[k] = x * (2 * (uint64_t)k + 3);
  for (uint64_t i = 0; i < n; i++)
    for (int k = 0; k < 8; k++) c[k] = (c[k] ^ (c[k] >> 11)) + probe_tab[c[k] & 511];
  uint64_t r = 0;
  for (int k = 0; k < 8; k++) r ^= c[k];
  return r;
}

static __attribute__((noinline)) uint64_t probe_chase(uint64_t n, uint64_t j) {
  for (uint64_t i = 0; i < n; i++) j = probe_ring[j * 8];
  return j;
}

enum { SL_LEDGER, SL_MUTEX, SL_ALU, SL_ILP, SL_CHASE, SL_PARTS };
static const char *const sl_name[SL_PARTS] = {"ledger", "mutex", "alu", "ilp",
                                              "chase"};

typedef struct slice_part {
  worker w;
  row_ctx rc;
  void *l, *s;
} slice_part;

static uint64_t sl_sink;

/* Runs n units of part p; returns ns. */
static uint64_t slice_run(slice_part *sp, int p, uint64_t n) {
  uint64_t t0 = bench_mono_ns();
  if (p == SL_ALU) {
    sl_sink += probe_alu(n, sl_sink | 1);
  } else if (p == SL_ILP) {
    sl_sink += probe_ilp(n, sl_sink | 1);
  } else if (p == SL_CHASE) {
    sl_sink += probe_chase(n, sl_sink % PROBE_LINES);
  } else {
    const unsigned k = opt.release_every;
    for (uint64_t e = 0; e < n; e++) private_op(&sp->w, sp->s, k);
  }
  return bench_mono_ns() - t0;
}

static double pearson(const double *x, const double *y, size_t n) {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < n; i++) {
    sx += x[i], sy += y[i];
    sxx += x[i] * x[i], syy += y[i] * y[i], sxy += x[i] * y[i];
  }
  double vx = sxx - sx * sx / (double)n, vy = syy - sy * sy / (double)n;
  return vx > 0 && vy > 0 ? (sxy - sx * sy / (double)n) / sqrt(vx * vy) : 0;
}

static void run_slices(void) {
  if (!opt.run_impl[IMPL_LEDGER] || !opt.run_impl[IMPL_MUTEX]) {
    fprintf(stderr, "ledger_bench: --workload slices runs both designs\n");
    exit(2);
  }
  if (opt.pin && n_cpus > 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[0], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  probe_ring = xmalloc((size_t)PROBE_LINES * 64);
  {
    uint64_t *perm = xmalloc(PROBE_LINES * sizeof *perm), x = 88172645463325252ull;
    for (uint64_t i = 0; i < PROBE_LINES; i++) perm[i] = i;
    for (uint64_t i = PROBE_LINES - 1; i > 0; i--) { /* Sattolo: one cycle */
      uint64_t j = xorshift(&x) % i, t = perm[i];
      perm[i] = perm[j], perm[j] = t;
    }
    for (uint64_t i = 0; i < PROBE_LINES; i++)
      probe_ring[perm[i] * 8] = perm[(i + 1) % PROBE_LINES];
    free(perm);
  }
  slice_part sp[2];
  for (int k = 0; k < 2; k++) {
    memset(&sp[k], 0, sizeof sp[k]);
    sp[k].w.rc = &sp[k].rc;
    sp[k].w.impl = impls[k];
    sp[k].w.keep_base = (uint64_t)(0xfff0 + k) << 40;
    sp[k].w.sample_countdown = opt.sample_every;
    CHECK(impls[k]->ledger_create(&sp[k].l));
    if (impls[k] == impls[IMPL_LEDGER]) ldg_configure(impls[k], sp[k].l);
    CHECK(impls[k]->stream_create(sp[k].l, 0, 0, &sp[k].s));
  }
  /* Units per part for about slice_ms each, from a warm-up of opt.warm_seconds. */
  uint64_t units[SL_PARTS];
  double target = slice_ms * 1e6;
  for (int p = 0; p < SL_PARTS; p++) {
    uint64_t n = 1000, ns = 0, t_end = bench_mono_ns() +
                                        (uint64_t)(opt.warm_seconds / SL_PARTS * 1e9);
    while (bench_mono_ns() < t_end) {
      ns = slice_run(&sp[p < 2 ? p : 0], p, n);
      double want = (double)n * target / (double)(ns ? ns : 1);
      n = want < 100 ? 100 : (uint64_t)want;
    }
    units[p] = n;
  }
  size_t cap = 1024, n_sl = 0;
  double *v[SL_PARTS];
  for (int p = 0; p < SL_PARTS; p++) v[p] = xmalloc(cap * sizeof(double));
  uint64_t t_end = bench_mono_ns() + (uint64_t)(opt.seconds * 1e9);
  while (bench_mono_ns() < t_end) {
    if (n_sl == cap) {
      cap *= 2;
      for (int p = 0; p < SL_PARTS; p++) {
        v[p] = realloc(v[p], cap * sizeof(double));
        if (v[p] == NULL) die("realloc", LDG_ENOMEM);
      }
    }
    for (int q = 0; q < SL_PARTS; q++) {
      int p = (int)((q + n_sl) % SL_PARTS);
      v[p][n_sl] = (double)slice_run(&sp[p < 2 ? p : 0], p, units[p]) /
                   (double)units[p];
    }
    n_sl++;
  }
  for (int k = 0; k < 2; k++) {
    CHECK(impls[k]->release(sp[k].s, impls[k]->mark(sp[k].s)));
    CHECK(impls[k]->stream_destroy(sp[k].s));
    impls[k]->stream_unref(sp[k].s);
    impls[k]->ledger_destroy(sp[k].l);
    impls[k]->quiesce();
  }
  /* Both designs' keeps ran on this thread: one check for both. */
  flush_keeps(&sp[0].w.enq);
  add_enqueued(&sp[1].w.enq);
  verify_keeps("ledger_bench", "slices");
  if (slices_out != NULL) {
    FILE *f = fopen(slices_out, "w");
    if (f == NULL) {
      perror(slices_out);
      exit(1);
    }
    fprintf(f, "# slice ledger_ns_per_op mutex_ns_per_op alu_ns_per_iter "
               "ilp_ns_per_iter chase_ns_per_step\n");
    for (size_t i = 0; i < n_sl; i++)
      fprintf(f, "%zu %.2f %.2f %.3f %.3f %.3f\n", i, v[SL_LEDGER][i],
              v[SL_MUTEX][i], v[SL_ALU][i], v[SL_ILP][i], v[SL_CHASE][i]);
    fclose(f);
  }
  /* Correlation of the two designs' slices with each probe's. */
  static const int probes[3] = {SL_ALU, SL_ILP, SL_CHASE};
  double r[2][3];
  for (int p = 0; p < 2; p++)
    for (int k = 0; k < 3; k++) r[p][k] = pearson(v[p], v[probes[k]], n_sl);
  /* Quiet: the ILP probe (the one that notices a shared core) near its best. */
  double *tmp = xmalloc(n_sl * sizeof(double));
  memcpy(tmp, v[SL_ILP], n_sl * sizeof(double));
  double quiet_at = 1.05 * pct(tmp, n_sl, 0.05);
  double *ratio = xmalloc(n_sl * sizeof(double));
  for (size_t i = 0; i < n_sl; i++) ratio[i] = v[SL_MUTEX][i] / v[SL_LEDGER][i];
  printf("slices: %zu of about %.2f ms per part, one thread on CPU %d; units per "
         "part %" PRIu64 " / %" PRIu64 " / %" PRIu64 " / %" PRIu64 " / %" PRIu64 "\n",
         n_sl, slice_ms, n_cpus ? cpus[0] : -1, units[0], units[1], units[2],
         units[3], units[4]);
  printf("  %-7s %9s %9s %9s %9s %8s %8s %8s %8s\n", "part", "p10", "median", "p90",
         "quiet med", "r(alu)", "r(ilp)", "r(chase)", "unit");
  size_t nq = 0;
  for (int p = 0; p <= SL_PARTS; p++) {
    const double *src = p < SL_PARTS ? v[p] : ratio;
    size_t m = 0;
    for (size_t i = 0; i < n_sl; i++)
      if (v[SL_ILP][i] <= quiet_at) tmp[m++] = src[i];
    nq = m;
    double qmed = pct(tmp, m, 0.5);
    memcpy(tmp, src, n_sl * sizeof(double));
    double p10 = pct(tmp, n_sl, 0.1), med = pct(tmp, n_sl, 0.5),
           p90 = pct(tmp, n_sl, 0.9);
    if (p < 2)
      printf("  %-7s %9.2f %9.2f %9.2f %9.2f %8.2f %8.2f %8.2f %8s\n", sl_name[p],
             p10, med, p90, qmed, r[p][0], r[p][1], r[p][2], "ns/op");
    else
      printf("  %-7s %9.3f %9.3f %9.3f %9.3f %8s %8s %8s %8s\n",
             p < SL_PARTS ? sl_name[p] : "mtx/ldg", p10, med, p90, qmed, "", "", "",
             p == SL_CHASE ? "ns/step" : p == SL_PARTS ? "ratio" : "ns/iter");
  }
  printf("  quiet: the %zu slices (%.0f %%) whose ILP probe took <= %.3f ns/iter "
         "(1.05 x its 5th percentile)\n",
         nq, n_sl ? 100.0 * (double)nq / (double)n_sl : 0.0, quiet_at);
  free(tmp);
  free(ratio);
  for (int p = 0; p < SL_PARTS; p++) free(v[p]);
  free(probe_ring);
}
#endif /* !BENCH_EVIDENCE */

/* ---- Main -------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: ledger_bench [options]\n"
          "  --workload NAME   private | private_si | shared | ceiling | serving |\n"
          "                    serving_si | backlog | holds (default: all; serving\n"
          "                    includes serving+reader, and serving+paired with\n"
          "                    --reader-windows; shared runs the ceiling\n"
          "                    loop too; *_si: the ledger's streams created\n"
          "                    LDG_STREAM_SINGLE_ISSUER, the mutex rows plain;\n"
          "                    only when named: ceiling_cas, ceiling_backoff,\n"
          "                    the ceiling with a CAS loop, without and with\n"
          "                    bounded exponential backoff; ceiling_load,\n"
          "                    ceiling_pfw, ceiling_rmw: three loads of the\n"
          "                    line before the fetch_add, without and with a\n"
          "                    prefetch for write or an RMW adding 0 first;\n"
          "                    ceiling_release: the ceiling with the least\n"
          "                    a release does every --release-every ops;\n"
          "                    ceiling_pubcas: ceiling_load published by a\n"
          "                    CAS of the slot's state)\n"
          "  --max-threads N   cap of the thread counts 1,2,4,8,16 (default: online CPUs)\n"
          "  --threads LIST    comma-separated thread counts instead (e.g. 1,2,4)\n"
          "  --seconds S       timed phase per row (default 1.0; warm-up 0.2 s)\n"
          "  --ops N           instead: N ops per thread per row (warm-up N/10)\n"
          "  --backlog N       entries of the deep-backlog row (default 1000000)\n"
          "  --release-every K ops between releases (default 16)\n"
          "  --sample-every N  time one enqueue in N (default 61)\n"
          "  --repeat R        run each row R times, keep the median by throughput\n"
          "  --impl WHICH      both | ledger | mutex (default both)\n"
          "  --no-pin          do not pin threads to CPUs\n"
          "  --no-reader       skip the serving+reader rows\n"
          "  --no-ceiling      skip the ceiling rows that come with shared\n"
          "  --reader-rate Q   pace the reader to Q queries/s (default: no pause)\n"
          "  --reader-windows MS  also the serving+paired rows: the reader's cost\n"
          "                    paired within one run. The reader (the same queries,\n"
          "                    paced by --reader-rate or not) queries for about MS\n"
          "                    ms, sleeps for about MS ms, and so on (pairs on-off,\n"
          "                    off-on, ...); the enqueuers' ops are counted per\n"
          "                    window; per pair: cost = 1 - on rate / off rate.\n"
          "                    Prints the cost's median, [25th, 75th percentile]\n"
          "                    and pairs over all --repeat runs, the reader's rate\n"
          "                    in on-windows and the unpaired cost of the\n"
          "                    serving+reader row beside (0.1 to 10000; try 20;\n"
          "                    with --seconds >= 2 windows, not with --ops)\n"
          "  --reader-detached the reader queries a ledger of its own, of the same\n"
          "                    shape, that nobody writes: its cost to the enqueuers\n"
          "                    without touching their lines\n"
          "  --queried         query each ledger once before its rows (issue 11,\n"
          "                    rdr10): its segments then keep published filters\n"
          "                    (ledger/summary.c), which enqueuers widen\n"
          "  --reader-null     the control: the reader runs its loop (paced or not)\n"
          "                    without the queries, spinning on its CPU: what a\n"
          "                    busy CPU beside the enqueuers costs them\n"
          "  --holds-pending N the holds rows at N pending entries only\n"
          "  --pool-limit B    the ledger's segment pool limit in bytes (default:\n"
          "                    the library's: set from each\n"
          "                    reclaimer batch, at most 32 MiB)\n"
          "  --vector-index N  turn on the ledger's vector index for about N ids\n"
          "                    (ldg_ledger_index_vectors; default: off)\n"
          "  --json FILE       also write every row as JSON\n"
          "  --smoke           tiny run for CI: threads 1,2, 2000 ops, backlog 10000\n"
          "  slices (only when named: --workload slices): one pinned thread runs\n"
          "  the private loop on both designs and two fixed probes (ALU, a 1 MiB\n"
          "  pointer chase) in turn for --seconds, tells the host's state from\n"
          "  the code's (see the source)\n"
          "  --slice-ms M      each part's slice, about M ms (default 1)\n"
          "  --slices-out FILE one line per slice: the four parts' times\n");
}

static bool want(const char *name) {
  return opt.workload == NULL || strcmp(opt.workload, name) == 0;
}

static uint64_t parse_u64(const char *flag, const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *s == '\0' || *end != '\0') {
    fprintf(stderr, "ledger_bench: bad value for %s: %s\n", flag, s);
    exit(2);
  }
  return v;
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                               \
  do {                                                             \
    if (v == NULL) {                                               \
      fprintf(stderr, "ledger_bench: %s needs a value\n", a);      \
      exit(2);                                                     \
    }                                                              \
    i++;                                                           \
  } while (0)
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--workload") == 0) {
      NEED_VALUE();
      opt.workload = v;
    } else if (strcmp(a, "--max-threads") == 0) {
      NEED_VALUE();
      opt.max_threads = (int)parse_u64(a, v);
    } else if (strcmp(a, "--threads") == 0) {
      NEED_VALUE();
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      opt.n_thread_list = 0;
      for (char *save, *t = strtok_r(buf, ",", &save); t && opt.n_thread_list < 16;
           t = strtok_r(NULL, ",", &save))
        opt.thread_list[opt.n_thread_list++] = (int)parse_u64(a, t);
    } else if (strcmp(a, "--seconds") == 0) {
      NEED_VALUE();
      opt.seconds = atof(v);
      opt.ops = 0;
    } else if (strcmp(a, "--ops") == 0) {
      NEED_VALUE();
      opt.ops = parse_u64(a, v);
    } else if (strcmp(a, "--backlog") == 0) {
      NEED_VALUE();
      opt.backlog = parse_u64(a, v);
    } else if (strcmp(a, "--release-every") == 0) {
      NEED_VALUE();
      opt.release_every = (unsigned)parse_u64(a, v);
    } else if (strcmp(a, "--sample-every") == 0) {
      NEED_VALUE();
      opt.sample_every = (unsigned)parse_u64(a, v);
    } else if (strcmp(a, "--repeat") == 0) {
      NEED_VALUE();
      opt.repeat = (unsigned)parse_u64(a, v);
    } else if (strcmp(a, "--impl") == 0) {
      NEED_VALUE();
      opt.run_impl[IMPL_LEDGER] = strcmp(v, "both") == 0 || strcmp(v, "ledger") == 0;
      opt.run_impl[IMPL_MUTEX] = strcmp(v, "both") == 0 || strcmp(v, "mutex") == 0;
#ifdef BENCH_EVIDENCE
      opt.run_impl[IMPL_MUTEX] = false; /* not linked into the evidence binary */
#endif
      if (!opt.run_impl[IMPL_LEDGER] && !opt.run_impl[IMPL_MUTEX]) {
        fprintf(stderr, "ledger_bench: --impl is both, ledger or mutex\n");
        exit(2);
      }
#ifndef BENCH_EVIDENCE
    } else if (strcmp(a, "--slice-ms") == 0) {
      NEED_VALUE();
      slice_ms = atof(v);
      if (!(slice_ms > 0)) {
        fprintf(stderr, "ledger_bench: bad value for --slice-ms: %s\n", v);
        exit(2);
      }
    } else if (strcmp(a, "--slices-out") == 0) {
      NEED_VALUE();
      slices_out = v;
#endif
    } else if (strcmp(a, "--no-pin") == 0) {
      opt.pin = false;
    } else if (strcmp(a, "--no-ceiling") == 0) {
      opt.ceiling = false;
    } else if (strcmp(a, "--reader-detached") == 0) {
      opt.reader_detached = true;
    } else if (strcmp(a, "--reader-null") == 0) {
      opt.reader_null = true;
    } else if (strcmp(a, "--queried") == 0) {
      opt.queried = true;
    } else if (strcmp(a, "--holds-pending") == 0) {
      NEED_VALUE();
      opt.holds_pending = parse_u64(a, v);
      if (opt.holds_pending == 0) {
        fprintf(stderr, "ledger_bench: --holds-pending must be > 0\n");
        exit(2);
      }
    } else if (strcmp(a, "--no-reader") == 0) {
      opt.reader = false;
    } else if (strcmp(a, "--reader-rate") == 0) {
      NEED_VALUE();
      opt.reader_rate = atof(v);
    } else if (strcmp(a, "--reader-windows") == 0) {
      NEED_VALUE();
      char *end;
      opt.reader_windows_ms = strtod(v, &end);
      if (*v == '\0' || *end != '\0' || !(opt.reader_windows_ms >= 0.1) ||
          !(opt.reader_windows_ms <= 10000)) {
        fprintf(stderr, "ledger_bench: bad value for --reader-windows: %s "
                        "(milliseconds, 0.1 to 10000)\n", v);
        exit(2);
      }
    } else if (strcmp(a, "--pool-limit") == 0) {
      NEED_VALUE();
      opt.pool_limit = (long long)parse_u64(a, v);
    } else if (strcmp(a, "--vector-index") == 0) {
      NEED_VALUE();
      opt.vector_index = parse_u64(a, v);
    } else if (strcmp(a, "--json") == 0) {
      NEED_VALUE();
      opt.json = v;
    } else if (strcmp(a, "--smoke") == 0) {
      opt.smoke = true;
    } else {
      fprintf(stderr, "ledger_bench: unknown option %s\n", a);
      usage(stderr);
      exit(2);
    }
#undef NEED_VALUE
  }
  if (opt.workload != NULL && !want("private") && !want("shared") &&
      ceiling_form_named(opt.workload) == NULL &&
      !want("holds") && !want("private_si") &&
      !want("serving_si") &&
      !want("serving") && !want("backlog") && !want("slices")) {
    fprintf(stderr, "ledger_bench: unknown workload %s\n", opt.workload);
    exit(2);
  }
  if (opt.release_every == 0 || opt.sample_every == 0 || opt.repeat == 0) {
    fprintf(stderr, "ledger_bench: --release-every, --sample-every and --repeat "
                    "must be > 0\n");
    exit(2);
  }
  if (opt.reader_windows_ms > 0) {
    const char *why = NULL;
    if (!opt.reader)
      why = "runs the reader: not with --no-reader";
    else if (opt.smoke || opt.ops != 0)
      why = "needs a timed phase in seconds: not with --ops or --smoke";
    else if (opt.workload != NULL && !want("serving"))
      why = "is for the serving workload: --workload serving or all";
    else if (2 * opt.reader_windows_ms > opt.seconds * 1e3)
      why = "needs two windows (one pair) to fit in --seconds";
    if (why != NULL) {
      fprintf(stderr, "ledger_bench: --reader-windows %g %s\n", opt.reader_windows_ms,
              why);
      exit(2);
    }
  }
#ifndef BENCH_EVIDENCE
  if (opt.workload != NULL && want("slices") &&
      (opt.smoke || opt.ops != 0 || !(opt.seconds > 0))) {
    fprintf(stderr, "ledger_bench: --workload slices runs for --seconds (> 0): "
                    "not with --ops or --smoke\n");
    exit(2);
  }
#endif
  if (opt.smoke) {
    opt.ops = 2000;
    opt.backlog = 10000;
    opt.sample_every = 7;
    if (opt.n_thread_list == 0) {
      opt.thread_list[0] = 1;
      opt.thread_list[1] = 2;
      opt.n_thread_list = 2;
    }
  }
}

static void find_cpus(void) {
  cpu_set_t set;
  n_cpus = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE && n_cpus < 1024; c++)
      if (CPU_ISSET(c, &set)) cpus[n_cpus++] = c;
  if (n_cpus == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_cpus = n > 0 ? (int)n : 1;
    for (int c = 0; c < n_cpus && c < 1024; c++) cpus[c] = c;
  }
}

/* The serving+paired row at t threads, both implementations; rr: the
 * unpaired serving+reader rows just run, for their cost beside. */
static void run_paired_rows(const workload *wl, int t, const row_result *rr) {
  row_result pr[N_IMPLS];
  const row_result *show[N_IMPLS] = {NULL, NULL};
  char notes[320];
  int len = snprintf(notes, sizeof notes, "paired cost, median [IQR] pairs:");
  for (int k = 0; k < N_IMPLS; k++) {
    if (!opt.run_impl[k]) continue;
    memset(&pr[k], 0, sizeof pr[k]);
    run_row_paired(impls[k], wl, t, &pr[k]);
    pr[k].workload = "serving+paired";
    pr[k].unpaired_cost = rr[k].reader_cost;
    *new_result() = pr[k];
    show[k] = &pr[k];
    const char *name = k == IMPL_LEDGER ? "ldg" : "mtx";
    if (pr[k].pairs == 0) /* every window ran into the phase's end */
      len += snprintf(notes + len, sizeof notes - (size_t)len, " %s - 0", name);
    else
      len += snprintf(notes + len, sizeof notes - (size_t)len,
                      " %s %.1f%% [%.1f, %.1f] %zu", name, 100.0 * pr[k].pair_med,
                      100.0 * pr[k].pair_p25, 100.0 * pr[k].pair_p75, pr[k].pairs);
  }
  len += snprintf(notes + len, sizeof notes - (size_t)len, "; on-window Mq/s");
  for (int k = 0; k < N_IMPLS; k++)
    if (opt.run_impl[k])
      len += snprintf(notes + len, sizeof notes - (size_t)len, " %s %.3f",
                      k == IMPL_LEDGER ? "ldg" : "mtx", pr[k].on_qps / 1e6);
  len += snprintf(notes + len, sizeof notes - (size_t)len, "; unpaired");
  for (int k = 0; k < N_IMPLS; k++)
    if (opt.run_impl[k])
      len += snprintf(notes + len, sizeof notes - (size_t)len, " %s %.1f%%",
                      k == IMPL_LEDGER ? "ldg" : "mtx", 100.0 * pr[k].unpaired_cost);
  print_row("serving+paired", t, show[IMPL_LEDGER], show[IMPL_MUTEX], notes);
}

/* Runs workload wl over every thread count, both implementations per count,
 * and prints one line per count. reader: also run it with the reader. */
static void run_threaded(const workload *wl, bool with_reader) {
  for (int ti = 0; ti < opt.n_thread_list; ti++) {
    int t = opt.thread_list[ti];
    row_result plain[N_IMPLS], rr[N_IMPLS];
    const row_result *show[N_IMPLS] = {NULL, NULL};
    for (int k = 0; k < N_IMPLS; k++) {
      if (!opt.run_impl[k]) continue;
      memset(&plain[k], 0, sizeof plain[k]);
      run_row_median(impls[k], wl, t, false, &plain[k]);
      plain[k].workload = wl->name;
      /* Issue 11: one shared stream as a fraction of the ceiling loop,
       * measured in this run at the same thread count. */
      if (wl == &wl_shared && ceiling_ops[ti] > 0)
        plain[k].of_ceiling = plain[k].ops_per_s / ceiling_ops[ti];
      *new_result() = plain[k];
      show[k] = &plain[k];
    }
    char plain_notes[160] = "";
    if (wl == &wl_shared && ceiling_ops[ti] > 0) {
      int len = snprintf(plain_notes, sizeof plain_notes, "of ceiling:");
      for (int k = 0; k < N_IMPLS; k++) {
        if (!opt.run_impl[k]) continue;
        len += snprintf(plain_notes + len, sizeof plain_notes - (size_t)len,
                        " %s %.0f%%", k == IMPL_LEDGER ? "ldg" : "mtx",
                        100.0 * plain[k].of_ceiling);
      }
    }
    print_row(wl->name, t, show[IMPL_LEDGER], show[IMPL_MUTEX], plain_notes);
    if (!with_reader) continue;

    char notes[160];
    int len = snprintf(notes, sizeof notes, "reader cost");
    for (int k = 0; k < N_IMPLS; k++) {
      if (!opt.run_impl[k]) continue;
      memset(&rr[k], 0, sizeof rr[k]);
      run_row_median(impls[k], wl, t, true, &rr[k]);
      rr[k].workload = "serving+reader";
      rr[k].reader_cost = 1.0 - rr[k].ops_per_s / plain[k].ops_per_s;
      *new_result() = rr[k];
      show[k] = &rr[k];
      len += snprintf(notes + len, sizeof notes - (size_t)len, " %s %.0f%%",
                      k == IMPL_LEDGER ? "ldg" : "mtx", 100.0 * rr[k].reader_cost);
    }
    len += snprintf(notes + len, sizeof notes - (size_t)len, "; reader Mq/s");
    for (int k = 0; k < N_IMPLS; k++)
      if (opt.run_impl[k])
        len += snprintf(notes + len, sizeof notes - (size_t)len, " %s %.2f",
                        k == IMPL_LEDGER ? "ldg" : "mtx", rr[k].reader_qps / 1e6);
    if (opt.run_impl[IMPL_LEDGER])
      len += snprintf(notes + len, sizeof notes - (size_t)len,
                      "; ldg per query: %.2f segs %.2f slots %.2f lines"
                      " %.2f filters",
                      rr[IMPL_LEDGER].reader_segs_per_q,
                      rr[IMPL_LEDGER].reader_slots_per_q,
                      rr[IMPL_LEDGER].reader_lines_per_q,
                      rr[IMPL_LEDGER].reader_filters_per_q);
    print_row("serving+reader", t, show[IMPL_LEDGER], show[IMPL_MUTEX], notes);
    if (opt.reader_windows_ms > 0) run_paired_rows(wl, t, rr);
  }
}

/* A ceiling form's row at every thread count (issue 11); the ceiling's
 * throughput is remembered for the shared rows' "of ceiling" column, the
 * other forms' nowhere. */
static void run_ceiling_rows(const struct ceiling_form *f) {
  const workload *wl = &f->wl;
  for (int ti = 0; ti < opt.n_thread_list; ti++) {
    int t = opt.thread_list[ti];
    row_result r;
    memset(&r, 0, sizeof r);
    run_row_median(impls[IMPL_LEDGER], wl, t, false, &r);
    r.workload = wl->name;
    r.impl = wl->name;
    *new_result() = r;
    if (f == &ceiling_forms[0]) ceiling_ops[ti] = r.ops_per_s;
    print_row(wl->name, t, &r, NULL, f->note);
    if (wl->run == ceiling_release_run &&
        atomic_exchange(&ceiling_release_lapped, 0) != 0)
      printf("  (ceiling_release: a releaser switched out for a lap of the ring\n"
             "   skipped slots already reused)\n");
  }
}

static void run_backlog_rows(void) {
  row_result br[N_IMPLS];
  for (int k = 0; k < N_IMPLS; k++) {
    if (!opt.run_impl[k]) continue;
    memset(&br[k], 0, sizeof br[k]);
    run_backlog(impls[k], opt.backlog, &br[k]);
    br[k].workload = "backlog";
    row_result *r = new_result();
    *r = br[k];
  }
  const row_result *l = opt.run_impl[IMPL_LEDGER] ? &br[IMPL_LEDGER] : NULL;
  const row_result *m = opt.run_impl[IMPL_MUTEX] ? &br[IMPL_MUTEX] : NULL;
  print_row("backlog", 1, l, m, "(ops/s and ns/op: fill + one release)");
  printf("\nbacklog of %" PRIu64 " entries, one stream, one release:\n", opt.backlog);
  printf("  %-7s %10s %11s %12s %15s %15s\n", "impl", "fill ms", "release ms",
         "peak MiB", "after rel. KiB", "after quies. KiB");
  for (int k = 0; k < N_IMPLS; k++) {
    if (!opt.run_impl[k]) continue;
    const row_result *r = &br[k];
    printf("  %-7s %10.1f %11.1f %12.1f %15.1f %15.1f\n", r->impl, r->fill_ms,
           r->release_ms, (double)r->peak_bytes / 1048576.0,
           (double)r->bytes_after_release / 1024.0,
           (double)r->bytes_after_quiesce / 1024.0);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  find_cpus();
  if (opt.max_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    opt.max_threads = n > 0 ? (int)n : 1;
  }
  if (opt.n_thread_list == 0) {
    static const int counts[] = {1, 2, 4, 8, 16};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
      if (counts[i] <= opt.max_threads) opt.thread_list[opt.n_thread_list++] = counts[i];
    if (opt.max_threads < 16 &&
        opt.thread_list[opt.n_thread_list - 1] != opt.max_threads)
      opt.thread_list[opt.n_thread_list++] = opt.max_threads;
  }
  calibrate_timer();
  EV(ev_init(ns_per_tick));

  char model[256];
  cpu_model(model, sizeof model);
  printf("streamledger bench: ledger (lock-free, RCU) vs mutex (original design)\n");
  printf("cpus %d (%s); threads", n_cpus, model);
  for (int i = 0; i < opt.n_thread_list; i++) printf(" %d", opt.thread_list[i]);
  if (opt.ops)
    printf("; %" PRIu64 " ops/thread/row", opt.ops);
  else
    printf("; %.2f s/row after %.2f s warm-up", opt.seconds, opt.warm_seconds);
  printf("; release every %u; pinned %s; median of %u run(s)\n", opt.release_every,
         opt.pin ? "yes" : "no", opt.repeat);
  if (opt.pool_limit >= 0)
    printf("ledger segment pool limit: %lld bytes (--pool-limit)\n", opt.pool_limit);
  if (opt.vector_index != 0)
    printf("ledger vector index: on, for %" PRIu64 " ids (--vector-index)\n",
           opt.vector_index);
  printf("latency: one enqueue in %u, %s (%.3f ns/tick), timer overhead %.0f ns "
         "included; p-columns in ns (u = us, m = ms)\n",
         opt.sample_every, timer_name, ns_per_tick, timer_overhead_ns);
  printf("ns/op = wall x min(threads, cpus) / ops; ldg/mtx = throughput ratio\n");
  if (opt.reader && want("serving")) {
    if (opt.reader_rate > 0)
      printf("reader: paced to %.0f queries/s\n", opt.reader_rate);
    else
      printf("reader: queries without pause\n");
    if (opt.reader_null)
      printf("reader: null (--reader-null): the same loop without the queries, "
             "spinning\n");
    if (opt.reader_windows_ms > 0)
      printf("reader, serving+paired rows: windows of %g ms, querying and "
             "asleep in turn; cost per pair = 1 - on / off ops per ns\n",
             opt.reader_windows_ms);
  }
  printf("\n");
  if (opt.workload == NULL || !want("slices")) print_header();

  if (want("private")) run_threaded(&wl_private, false);
  if (want("private_si")) run_threaded(&wl_private_si, false);
  if (want("shared") && opt.ceiling) run_ceiling_rows(&ceiling_forms[0]);
  /* Named: the ceiling alone, or a comparison form (issue 11, sixth and
   * tenth sessions). */
  if (opt.workload != NULL && ceiling_form_named(opt.workload) != NULL)
    run_ceiling_rows(ceiling_form_named(opt.workload));
  if (want("shared")) run_threaded(&wl_shared, false);
  if (want("serving")) run_threaded(&wl_serving, opt.reader);
  if (want("serving_si")) run_threaded(&wl_serving_si, false);
#ifndef BENCH_EVIDENCE
  if (opt.workload != NULL && want("slices")) run_slices();
#endif
  if (want("backlog")) run_backlog_rows();
  if (want("holds")) run_holds_rows();

  if (opt.json != NULL) write_json(opt.json, argc, argv);
  printf("\nall keeps ran exactly once.\n");
  return 0;
}
