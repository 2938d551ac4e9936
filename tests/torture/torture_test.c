/*
 * torture_test: worker threads hammer one ledger with a seeded random mix of
 * every call, against simulated device streams that run the work honestly,
 * and an oracle checks every keep and every quiescent query. Not a benchmark.
 *
 * WORKLOAD
 *   W worker threads over M slots spread over D devices. A slot is one
 *   simulated device stream: an EXECUTOR thread that runs the operations
 *   issued to it in order, later, and the ledger stream standing for it now
 *   (an incarnation; "release_all + destroy" drains the slot, destroys its
 *   stream and creates a new one, blocking or non-blocking at random). Each
 *   step of a worker is one of (weights in k_weights, per phase: balanced;
 *   backlog, which hardly releases, so rings grow to big segments and later
 *   releases walk long intervals; drain, which releases a lot):
 *     enqueue      1-4 operations on a slot, with 0-5 vector ids and 0-3 host
 *                  ranges (the operand buffer and fake ranges), so payloads
 *                  are both inline and out of line;
 *     record       an event: a mark of a slot's stream and the executor
 *                  position that covers it; kept (with a reference) for later;
 *     sync event   wait for the executor to pass it, release to its mark;
 *     query event  release to it only if the executor already passed it;
 *     wait         another (or the same) slot's stream waits on an event;
 *     sync stream  mark, wait for the executor, release to the mark;
 *     sync device  ldg_device_marks, wait for the device's executors,
 *                  ldg_release_marks (or ldg_marks_discard: a failed sync);
 *     settle       ldg_settle_vector; drains wait for the executor, some fail;
 *     destroy      on a slot nobody else enqueues on (the slot's rwlock held
 *                  for writing; enqueuers hold it for reading): drain,
 *                  ldg_release_all or not, ldg_stream_destroy, refused calls
 *                  on the dead handle, a new incarnation;
 *     ephemeral    a short-lived blocking stream on an extra device (half
 *                  of them single-issuer: only their worker records on them)
 *                  whose work runs inline: ops, partial releases, waits on and by
 *                  slots, ref/unref; its last unref destroys it — on this
 *                  thread, or later through a wait that holds it (then the
 *                  release that fires the wait finalises it);
 *     queries      every query, checked loosely (answers are racy);
 *     refs         ldg_stream_ref/unref and the accessors; now and then
 *                  ldg_ledger_trim (the pool of retired segments) too.
 *   A test hook (//ledger:ledger_hooks) yields, spins or sleeps at random at
 *   every publication point of the ring, widening race windows.
 *
 * HONEST COMPLETION (SPEC.md section 2)
 *   Issue, then enqueue: an operation is pushed to its executor's queue
 *   (getting an executor position) before ldg_enqueue. Mark, then complete:
 *   an event reads ldg_mark, then the executor's issued position; when the
 *   executor has passed that position every entry up to the mark has run.
 *   Device syncs read the executor positions of the device right after the
 *   snapshot (which bound the snapshot's marks). A wait is an executor
 *   dependency too: the executor of b blocks at the wait until a's executor
 *   passed the event's position, as a device stream waiting on an event.
 *   The test releases only to marks whose executor position was passed.
 *
 * ORACLE
 *   Every keep is a record whose operand buffer the executor checksums (twice,
 *   around a random delay). The keep fails the test if the operation has not
 *   run yet, or if it runs a second time (records carry a generation, so a
 *   stale keep of a recycled record is caught too); then it poisons (0xdd)
 *   and frees the buffer, so an early release also shows as a checksum
 *   mismatch or, under ASan, a use after free in the executor. Periodically
 *   every worker parks at a barrier and the executors drain: at that
 *   quiescent moment ldg_mark, ldg_pending_count, ldg_holds_vector,
 *   ldg_holds_host_range, ldg_nonblocking_holding and ldg_has_nonblocking are
 *   compared with the records; sometimes every device is synced and nothing
 *   may stay held, and memory must be given back. At the end every stream is
 *   destroyed, every record must have been released exactly once, and the
 *   ledger, its pool trimmed, must hold 0 bytes.
 *
 * LEDGER DESTROY RACING UNREFS
 *   Last, rounds of ldg_ledger_destroy racing holder threads that drop
 *   every reference they hold (see ledger_destroy_race).
 *
 * Bounded by a deadline (default 8 s; 10 s with fewer threads under TSan or
 * ASan, and fewer records under TSan) and watched: a run that does not
 * finish in time aborts with a dump of what every thread was doing. Prints
 * the seed first, and again on a failed check or a crash.
 *
 * Usage: torture_test [--threads T] [--seconds S] [--seed X] [--streams M]
 *                     [--devices D] [--records N] [--delay PERMILLE]
 *                     [--barrier-ms B]
 *   Soak on a big host: bazel run -c opt //tests/torture:torture_test --
 *   --threads 16 --streams 32 --seconds 600 --seed $RANDOM
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

/* ---- Configuration ------------------------------------------------------- */

#define MAX_THREADS 256
#define MAX_SLOTS 64 /* non-blocking holders are a 64-bit mask per vector */
#define MAX_DEVICES 16
#ifndef MAX_INCS
#define MAX_INCS (1u << 16) /* stream incarnations alive or named at once */
#endif
#define NVEC 24   /* vector ids 1..NVEC; 0 and NVEC+1 never used */
#define QCAP 1024 /* executor queue; issuers wait when it is full */
#define NEV 6     /* events a worker keeps */
#define FAKE_BASE ((uintptr_t)1 << 44) /* fake host ranges, never touched */
#define FAKE_SPAN 4096u
/* Memory with nothing pending, per stream: the newest segment and the one
 * linked ahead of it (each <= 1024 slots of 64 bytes) and the stream struct
 * (ledger.h, "Memory"). */
#define IDLE_STREAM_BYTES ((size_t)160 << 10)

struct config {
  int threads;
  int streams;
  int devices;
  double seconds;
  uint64_t seed;
  uint32_t records;
  unsigned delay_permille;
  unsigned barrier_ms;
};

static struct config g_cfg;

/* ---- Failure ------------------------------------------------------------- */

static _Thread_local const char *tl_doing = "idle";

static void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void fail_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "\ntorture_test FAILED at %s:%d (seed %llu) while %s: ", file,
          line, (unsigned long long)g_cfg.seed, tl_doing);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr,
          "\nreproduce with: torture_test --threads %d --streams %d "
          "--devices %d --seconds %g --seed %llu\n",
          g_cfg.threads, g_cfg.streams, g_cfg.devices, g_cfg.seconds,
          (unsigned long long)g_cfg.seed);
  fflush(stderr);
  signal(SIGABRT, SIG_DFL); /* said it already */
  abort();
}

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* A crash (an abort inside the ledger, a fault) still names the seed. */
static char g_crash_msg[160];

static void on_crash(int sig) {
  (void)sig;
  ssize_t n = write(2, g_crash_msg, strlen(g_crash_msg));
  (void)n;
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_crash_handlers(void) {
  snprintf(g_crash_msg, sizeof(g_crash_msg),
           "\ntorture_test CRASHED (seed %llu): reproduce with --seed %llu\n",
           (unsigned long long)g_cfg.seed, (unsigned long long)g_cfg.seed);
  signal(SIGABRT, on_crash); /* an abort inside the ledger */
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGILL, on_crash);
  signal(SIGFPE, on_crash);
}
#define CHECK(cond)                        \
  do {                                     \
    if (!(cond)) FAIL("CHECK(%s)", #cond); \
  } while (0)
#define CHECK_RC(call, want)                                                  \
  do {                                                                        \
    int rc_ = (call);                                                         \
    if (rc_ != (want)) {                                                      \
      FAIL("%s returned %d (%s), expected %s", #call, rc_, ldg_strerror(rc_), \
           #want);                                                            \
    }                                                                         \
  } while (0)
#define CHECK_EQ_U(a, b)                                                 \
  do {                                                                   \
    unsigned long long a_ = (unsigned long long)(a),                     \
                       b_ = (unsigned long long)(b);                     \
    if (a_ != b_) FAIL("CHECK(%s == %s): %llu vs %llu", #a, #b, a_, b_); \
  } while (0)

/* ---- Random numbers ------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint32_t rng_below(uint64_t *s, uint32_t n) {
  return (uint32_t)(rng_next(s) % n);
}

static uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

static void sleep_ns(long ns) {
  struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- Records: one per keep ----------------------------------------------- */

/* ISSUED -> EXECUTED (the executor ran it) -> RELEASED (its keep ran);
 * RELEASED -> FREE (recycled at a quiescent barrier, generation bumped). */
enum { REC_FREE = 0, REC_ISSUED, REC_EXECUTED, REC_RELEASED };

struct rec {
  _Atomic uint32_t state;
  _Atomic uint32_t gen; /* changed only at barriers; in the keep's ctx */
  uint32_t shape;       /* seeds the vector ids and fake ranges */
  uint32_t inc;         /* incarnation of its slot stream; 0: ephemeral */
  uint32_t len;
  uint32_t sum;
  unsigned char *buf; /* the operand; the keep poisons and frees it */
};

static struct rec *g_recs;
static uint32_t *g_free;           /* stack of free record indices */
static _Atomic int64_t g_free_top; /* pushed only at barriers */
#define NO_REC UINT32_MAX

static uint32_t checksum(const unsigned char *p, uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static size_t rec_vecs(uint32_t shape, uint64_t ids[6]) {
  size_t n = shape % 6;
  uint32_t h = shape;
  for (size_t i = 0; i < n; i++) {
    h = hash32(h + (uint32_t)i + 1);
    ids[i] = 1 + h % NVEC;
  }
  return n;
}

static size_t rec_ranges(const struct rec *r, ldg_range out[3]) {
  uint32_t h = hash32(r->shape ^ 0x9e3779b9u);
  size_t n = 0;
  if (h % 4 != 0) out[n++] = (ldg_range){(uintptr_t)r->buf, r->len};
  size_t nf = (h >> 2) % 3;
  for (size_t i = 0; i < nf; i++) {
    h = hash32(h + (uint32_t)i + 7);
    out[n++] = (ldg_range){FAKE_BASE + h % FAKE_SPAN, 1 + (h >> 16) % 64};
  }
  return n;
}

static uint32_t rec_pop(void) {
  int64_t t = atomic_load(&g_free_top);
  while (t > 0 && !atomic_compare_exchange_weak(&g_free_top, &t, t - 1)) {
  }
  return t > 0 ? g_free[t - 1] : NO_REC;
}

/* Takes a free record and gives it a fresh operand buffer. */
static uint32_t rec_new(uint64_t *rng, uint32_t inc, uint32_t state) {
  uint32_t idx = rec_pop();
  if (idx == NO_REC) return NO_REC;
  struct rec *r = &g_recs[idx];
  r->shape = (uint32_t)rng_next(rng);
  r->inc = inc;
  r->len = 16 + rng_below(rng, 240);
  r->buf = malloc(r->len);
  CHECK(r->buf != NULL);
  uint32_t gen = atomic_load_explicit(&r->gen, memory_order_relaxed);
  for (uint32_t i = 0; i < r->len; i++) {
    r->buf[i] = (unsigned char)(idx * 31u + i * 7u + gen);
  }
  r->sum = checksum(r->buf, r->len);
  /* Reaches the executor through its queue's mutex and the keep through
   * ldg_enqueue's publication. */
  atomic_store_explicit(&r->state, state, memory_order_relaxed);
  return idx;
}

static void keep_release(void *ctx) {
  uint64_t v = (uint64_t)(uintptr_t)ctx;
  uint32_t idx = (uint32_t)v, gen = (uint32_t)(v >> 32);
  if (idx >= g_cfg.records) FAIL("keep with a bad record index %u", idx);
  struct rec *r = &g_recs[idx];
  uint32_t now_gen = atomic_load_explicit(&r->gen, memory_order_relaxed);
  if (now_gen != gen) {
    FAIL(
        "keep of record %u generation %u ran after the record was released "
        "and recycled (generation %u): released twice",
        idx, gen, now_gen);
  }
  uint32_t st = atomic_exchange(&r->state, (uint32_t)REC_RELEASED);
  if (st == REC_ISSUED) {
    FAIL("record %u (incarnation %u) released before its operation ran", idx,
         r->inc);
  }
  if (st == REC_RELEASED) FAIL("record %u released twice", idx);
  if (st != REC_EXECUTED) FAIL("keep of record %u in state %u", idx, st);
  memset(r->buf, 0xdd, r->len);
  free(r->buf);
}

static ldg_keep rec_keep(uint32_t idx) {
  uint64_t gen = atomic_load_explicit(&g_recs[idx].gen, memory_order_relaxed);
  return (ldg_keep){keep_release, (void *)(uintptr_t)((gen << 32) | idx)};
}

static void never_called(void *ctx) {
  (void)ctx;
  FAIL("the keep of a refused enqueue was called");
}

/* ---- Incarnations: the ledger streams that stood for a slot -------------- */

struct inc {
  _Atomic uint64_t seqs; /* enqueues + waits recorded: its ldg_mark */
  int slot;
  bool nb;
  bool free_listed; /* its number may be reused (see recycle_incs) */
};

static struct inc *g_incs;
static _Atomic uint32_t g_ninc = 1; /* numbers handed out; 0: ephemeral */
static uint32_t *g_inc_free;        /* reusable numbers, pushed at barriers */
static _Atomic int64_t g_inc_free_top;
static _Atomic uint64_t g_inc_created;

/* A number for a new incarnation, or 0 if none is left. */
static uint32_t inc_take(void) {
  int64_t t = atomic_load(&g_inc_free_top);
  while (t > 0 && !atomic_compare_exchange_weak(&g_inc_free_top, &t, t - 1)) {
  }
  if (t > 0) {
    uint32_t inc = g_inc_free[t - 1];
    g_incs[inc].free_listed = false;
    return inc;
  }
  uint32_t n = atomic_load(&g_ninc);
  while (n < MAX_INCS && !atomic_compare_exchange_weak(&g_ninc, &n, n + 1)) {
  }
  return n < MAX_INCS ? n : 0;
}

/* ---- Slots: simulated device streams ------------------------------------- */

enum { XOP_OP, XOP_WAIT, XOP_NOP };

struct xop {
  uint32_t kind;
  uint32_t arg; /* OP: record; WAIT: slot waited on */
  uint64_t pos; /* WAIT: position of that slot to wait for */
};

struct slot {
  int idx;
  int device;
  pthread_t exec;
  uint64_t rng; /* the executor's */
  /* The queue of issued, not yet started operations. */
  pthread_mutex_t qm;
  pthread_cond_t q_nonempty, q_space;
  struct xop q[QCAP];
  uint32_t qhead, qlen;
  bool stop;
  _Atomic uint64_t issued; /* positions handed out (under qm) */
  _Atomic uint64_t done;   /* positions finished, in order */
  pthread_mutex_t dm;
  pthread_cond_t dcv;
  _Atomic int dwaiters;
  /* The stream standing for the slot: readers (enqueue, waits by this
   * slot) hold lk shared, the destroyer exclusive. */
  pthread_rwlock_t lk;
  ldg_stream *cur;
  uint32_t cur_inc;
};

static struct slot *g_slots;
static ldg_ledger *g_l;

/* Blocks until the executor of sl has finished position pos. */
static void wait_done(struct slot *sl, uint64_t pos) {
  if (atomic_load(&sl->done) >= pos) return;
  pthread_mutex_lock(&sl->dm);
  /* seq_cst against the executor's store of done, then load of dwaiters:
   * one of the two sees the other, so no wake-up is lost. */
  atomic_fetch_add(&sl->dwaiters, 1);
  while (atomic_load(&sl->done) < pos) pthread_cond_wait(&sl->dcv, &sl->dm);
  atomic_fetch_sub(&sl->dwaiters, 1);
  pthread_mutex_unlock(&sl->dm);
}

/* Issues one operation to the slot's device stream; returns its position. */
static uint64_t issue(struct slot *sl, uint32_t kind, uint32_t arg,
                      uint64_t pos) {
  pthread_mutex_lock(&sl->qm);
  while (sl->qlen == QCAP) pthread_cond_wait(&sl->q_space, &sl->qm);
  sl->q[(sl->qhead + sl->qlen) % QCAP] = (struct xop){kind, arg, pos};
  sl->qlen++;
  uint64_t p = atomic_load_explicit(&sl->issued, memory_order_relaxed) + 1;
  /* seq_cst, before ldg_enqueue's reservation: a mark read later covers it
   * and a load of issued after that mark sees it. */
  atomic_store(&sl->issued, p);
  pthread_cond_signal(&sl->q_nonempty);
  pthread_mutex_unlock(&sl->qm);
  return p;
}

static void dawdle(uint64_t *rng) {
  uint64_t r = rng_next(rng);
  if (r % 16 == 0) sched_yield();
  if ((r >> 8) % 256 == 0) sleep_ns(1000 + (long)((r >> 16) % 50000));
  if ((r >> 24) % 8192 == 0) sleep_ns(2000000); /* let a backlog build */
}

static void execute_op(struct slot *sl, uint32_t idx) {
  struct rec *r = &g_recs[idx];
  uint32_t st = atomic_load(&r->state);
  if (st != REC_ISSUED) {
    FAIL(
        "executor %d: record %u in state %u before it ran (released "
        "early)",
        sl->idx, idx, st);
  }
  uint32_t s1 = checksum(r->buf, r->len);
  dawdle(&sl->rng);
  uint32_t s2 = checksum(r->buf, r->len);
  if (s1 != r->sum || s2 != r->sum) {
    FAIL(
        "executor %d: operand of record %u changed while its operation "
        "ran: freed or poisoned before completion",
        sl->idx, idx);
  }
  uint32_t expected = REC_ISSUED;
  if (!atomic_compare_exchange_strong(&r->state, &expected,
                                      (uint32_t)REC_EXECUTED)) {
    FAIL("executor %d: record %u released while its operation ran", sl->idx,
         idx);
  }
}

static void *executor_main(void *arg) {
  struct slot *sl = arg;
  tl_doing = "executing";
  for (;;) {
    pthread_mutex_lock(&sl->qm);
    while (sl->qlen == 0 && !sl->stop) {
      pthread_cond_wait(&sl->q_nonempty, &sl->qm);
    }
    if (sl->qlen == 0) {
      pthread_mutex_unlock(&sl->qm);
      return NULL;
    }
    struct xop op = sl->q[sl->qhead];
    sl->qhead = (sl->qhead + 1) % QCAP;
    sl->qlen--;
    pthread_cond_signal(&sl->q_space);
    pthread_mutex_unlock(&sl->qm);
    if (op.kind == XOP_OP) {
      execute_op(sl, op.arg);
    } else if (op.kind == XOP_WAIT) {
      wait_done(&g_slots[op.arg], op.pos);
    }
    atomic_store(&sl->done, atomic_load(&sl->done) + 1);
    if (atomic_load(&sl->dwaiters) > 0) {
      pthread_mutex_lock(&sl->dm);
      pthread_cond_broadcast(&sl->dcv);
      pthread_mutex_unlock(&sl->dm);
    }
  }
}

static void drain_executor(struct slot *sl) {
  wait_done(sl, atomic_load(&sl->issued));
}

/* Drain callback of non-blocking slot streams. ldg_settle_vector read the
 * mark before calling it: the executor position read here covers it. */
static _Thread_local uint64_t *tl_rng; /* NULL on main: drains never fail */
static _Thread_local bool tl_drain_may_fail;
static _Thread_local unsigned tl_drain_calls, tl_drain_fails;

static int drain_slot(void *ctx) {
  struct slot *sl = ctx;
  tl_drain_calls++;
  if (tl_drain_may_fail && tl_rng != NULL && rng_below(tl_rng, 2) == 0) {
    tl_drain_fails++;
    return -1;
  }
  drain_executor(sl);
  return 0;
}

/* Creates a new incarnation for sl (caller holds lk exclusively, or nobody
 * else runs). */
static void slot_new_stream(struct slot *sl, bool nb, uint32_t inc) {
  CHECK(inc != 0 && inc < MAX_INCS);
  atomic_fetch_add(&g_inc_created, 1);
  g_incs[inc].slot = sl->idx;
  g_incs[inc].nb = nb;
  atomic_store(&g_incs[inc].seqs, 0);
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(g_l, sl->device, nb ? LDG_STREAM_NONBLOCKING : 0,
                             nb ? drain_slot : NULL, sl, &s),
           LDG_OK);
  CHECK(ldg_stream_device(s) == sl->device);
  CHECK(ldg_stream_is_nonblocking(s) == nb);
  CHECK(ldg_mark(s) == 0);
  sl->cur = s;
  sl->cur_inc = inc;
}

/* A reference to the slot's current stream. */
static ldg_stream *acquire_cur(struct slot *sl, uint32_t *inc) {
  pthread_rwlock_rdlock(&sl->lk);
  ldg_stream *s = sl->cur;
  ldg_stream_ref(s);
  if (inc != NULL) *inc = sl->cur_inc;
  pthread_rwlock_unlock(&sl->lk);
  return s;
}

/* ---- Test hook: random delays at the ring's race points ------------------ */

#define NPOINTS 13
static _Thread_local uint64_t tl_hook_rng;
static _Thread_local uint64_t tl_hook_calls[NPOINTS], tl_hook_delays;
static _Atomic uint64_t g_hook_calls[NPOINTS], g_hook_delays;
static _Atomic uint64_t g_hook_threads;

static void delay_hook(enum ldg__hook_point point, struct ldg_stream *s,
                       void *arg) {
  (void)s;
  (void)arg;
  if ((unsigned)point < NPOINTS) tl_hook_calls[point]++;
  if (tl_hook_rng == 0) {
    tl_hook_rng = g_cfg.seed * 0x2545f4914f6cdd1dull +
                  atomic_fetch_add(&g_hook_threads, 1) + 1;
  }
  uint64_t r = rng_next(&tl_hook_rng);
  if (r % 1000 >= g_cfg.delay_permille) return;
  tl_hook_delays++;
  switch ((r >> 20) % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
      sched_yield();
      break;
    case 4:
    case 5:
    case 6:
      for (volatile uint32_t i = 0; i < (uint32_t)((r >> 32) % 4000); i++) {
      }
      break;
    default:
      sleep_ns(1000 + (long)((r >> 32) % 30000));
      break;
  }
}

static void flush_hook_stats(void) {
  for (int i = 0; i < NPOINTS; i++) {
    atomic_fetch_add(&g_hook_calls[i], tl_hook_calls[i]);
    tl_hook_calls[i] = 0;
  }
  atomic_fetch_add(&g_hook_delays, tl_hook_delays);
  tl_hook_delays = 0;
}

/* ---- Workers ------------------------------------------------------------- */

enum {
  OP_ENQUEUE,
  OP_RECORD,
  OP_SYNC_EVENT,
  OP_QUERY_EVENT,
  OP_WAIT,
  OP_SYNC_STREAM,
  OP_SYNC_DEVICE,
  OP_SETTLE,
  OP_DESTROY,
  OP_EPHEMERAL,
  OP_QUERIES,
  OP_REFS,
  OP_COUNT
};

static const char *const k_op_names[OP_COUNT] = {
    "enqueue", "record",      "sync-event",  "query-event",
    "wait",    "sync-stream", "sync-device", "settle",
    "destroy", "ephemeral",   "queries",     "refs"};
/* Weights per phase; the controller picks a phase at every barrier. A
 * backlog phase rarely releases, so rings grow to large segments and
 * releases later walk long intervals; a drain phase releases a lot. */
enum { PHASE_BALANCED, PHASE_BACKLOG, PHASE_DRAIN, NPHASES };
static const char *const k_phase_names[NPHASES] = {"balanced", "backlog",
                                                   "drain"};
static const unsigned k_weights[NPHASES][OP_COUNT] = {
    {32, 8, 6, 6, 8, 5, 3, 4, 1, 3, 6, 2},
    {64, 8, 0, 0, 8, 0, 0, 0, 0, 0, 6, 2},
    {16, 8, 12, 12, 8, 12, 8, 6, 2, 3, 6, 2},
};
static unsigned g_weight_total[NPHASES];
static _Atomic int g_phase;
static uint64_t g_phase_rounds[NPHASES];

/* A recorded event: everything up to mark m of stream s has run once the
 * executor of slot has finished position p. Holds a reference to s. */
struct event {
  bool used;
  int slot;
  ldg_stream *s;
  ldg_seq m;
  uint64_t p;
};

struct worker {
  int id;
  pthread_t thread;
  uint64_t rng;
  struct event ev[NEV];
  uint64_t ops[OP_COUNT];
  uint64_t enqueued, starved, destroy_skipped, drain_failures;
  const char *_Atomic doing;
};

static struct worker *g_workers;
static _Atomic bool g_stop;

/* The quiescent barrier: the controller raises g_pause, workers park. */
static pthread_mutex_t g_bm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_b_arrive = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_b_resume = PTHREAD_COND_INITIALIZER;
static _Atomic bool g_pause;
static int g_arrived;
static uint64_t g_round;

static void set_doing(struct worker *w, const char *what) {
  tl_doing = what;
  atomic_store_explicit(&w->doing, what, memory_order_relaxed);
}

static void ev_record(struct event *e, int slot) {
  struct slot *sl = &g_slots[slot];
  e->s = acquire_cur(sl, NULL);
  e->slot = slot;
  e->m = ldg_mark(e->s); /* mark, then complete */
  e->p = atomic_load(&sl->issued);
  e->used = true;
}

static void ev_drop(struct event *e) {
  ldg_stream_unref(e->s);
  e->used = false;
}

/* Releases to an event the executor has passed. */
static void ev_release(struct event *e) {
  int rc = ldg_release(e->s, e->m);
  if (rc != LDG_OK && !(rc == LDG_EDESTROYED &&
                        ldg_stream_check_live(e->s) == LDG_EDESTROYED)) {
    FAIL("ldg_release(event stream, %llu) = %d (%s)", (unsigned long long)e->m,
         rc, ldg_strerror(rc));
  }
  ev_drop(e);
}

static struct event *ev_pick_used(struct worker *w) {
  int start = (int)rng_below(&w->rng, NEV);
  for (int k = 0; k < NEV; k++) {
    struct event *e = &w->ev[(start + k) % NEV];
    if (e->used) return e;
  }
  return NULL;
}

static struct event *ev_slot_for_new(struct worker *w) {
  for (int k = 0; k < NEV; k++) {
    if (!w->ev[k].used) return &w->ev[k];
  }
  struct event *e = &w->ev[rng_below(&w->rng, NEV)];
  ev_drop(e); /* forgotten: releasing later than necessary is allowed */
  return e;
}

static struct slot *pick_slot(struct worker *w) {
  return &g_slots[rng_below(&w->rng, (uint32_t)g_cfg.streams)];
}

static void do_enqueue(struct worker *w) {
  struct slot *sl = pick_slot(w);
  int k = 1 + (int)rng_below(&w->rng, 4);
  pthread_rwlock_rdlock(&sl->lk);
  ldg_stream *s = sl->cur;
  uint32_t inc = sl->cur_inc;
  for (int j = 0; j < k; j++) {
    uint32_t idx = rec_new(&w->rng, inc, REC_ISSUED);
    if (idx == NO_REC) {
      w->starved++;
      break;
    }
    struct rec *r = &g_recs[idx];
    uint64_t ids[6];
    ldg_range rg[3];
    size_t nv = rec_vecs(r->shape, ids);
    size_t nr = rec_ranges(r, rg);
    ldg_keep keep = rec_keep(idx);
    issue(sl, XOP_OP, idx, 0); /* issue, then enqueue */
    ldg_seq m0 = ldg_mark(s), seq = 0;
    CHECK_RC(
        ldg_enqueue(s, keep, nv ? ids : NULL, nv, nr ? rg : NULL, nr, &seq),
        LDG_OK);
    ldg_seq m1 = ldg_mark(s);
    if (!(m0 < seq && seq <= m1)) {
      FAIL(
          "enqueue got seq %llu outside (mark before %llu, mark after "
          "%llu]",
          (unsigned long long)seq, (unsigned long long)m0,
          (unsigned long long)m1);
    }
    atomic_fetch_add(&g_incs[inc].seqs, 1);
    w->enqueued++;
  }
  pthread_rwlock_unlock(&sl->lk);
}

static void do_wait(struct worker *w) {
  struct event *e = ev_pick_used(w);
  if (e == NULL || rng_below(&w->rng, 3) == 0) {
    e = ev_slot_for_new(w);
    ev_record(e, (int)rng_below(&w->rng, (uint32_t)g_cfg.streams));
  }
  struct slot *b = pick_slot(w);
  pthread_rwlock_rdlock(&b->lk);
  /* The device-side wait first, then the ledger's. */
  issue(b, XOP_WAIT, (uint32_t)e->slot, e->p);
  ldg_seq seq = 0;
  CHECK_RC(ldg_add_wait(b->cur, e->s, e->m, &seq), LDG_OK);
  CHECK(seq >= 1);
  atomic_fetch_add(&g_incs[b->cur_inc].seqs, 1);
  if (rng_below(&w->rng, 16) == 0) {
    /* Past any mark: refused, nothing recorded. */
    CHECK_RC(ldg_add_wait(b->cur, e->s, UINT64_MAX, NULL), LDG_EINVAL);
  }
  pthread_rwlock_unlock(&b->lk);
}

static void do_sync_stream(struct worker *w) {
  struct slot *sl = pick_slot(w);
  struct event e;
  ev_record(&e, sl->idx);
  wait_done(sl, e.p);
  if (rng_below(&w->rng, 8) == 0) {
    /* Past the mark: refused, releases nothing (or the stream is dead). */
    int rc = ldg_release(e.s, UINT64_MAX);
    CHECK(rc == LDG_EINVAL || (rc == LDG_EDESTROYED &&
                               ldg_stream_check_live(e.s) == LDG_EDESTROYED));
  }
  ev_release(&e);
}

static void do_sync_device(struct worker *w) {
  int d = (int)rng_below(&w->rng, (uint32_t)g_cfg.devices);
  ldg_marks *mk;
  CHECK_RC(ldg_device_marks(g_l, d, &mk), LDG_OK);
  /* Read after the snapshot: these positions cover its marks. */
  uint64_t pos[MAX_SLOTS];
  size_t on_device = 0;
  for (int j = 0; j < g_cfg.streams; j++) {
    if (g_slots[j].device == d) {
      pos[j] = atomic_load(&g_slots[j].issued);
      on_device++;
    }
  }
  /* At most one live stream per slot of the device (ephemeral streams live
   * on another device). */
  CHECK(ldg_marks_count(mk) <= on_device);
  for (int j = 0; j < g_cfg.streams; j++) {
    if (g_slots[j].device == d) wait_done(&g_slots[j], pos[j]);
  }
  if (rng_below(&w->rng, 4) == 0) {
    ldg_marks_discard(mk); /* the context sync failed */
  } else {
    CHECK_RC(ldg_release_marks(mk), LDG_OK);
  }
}

static void do_settle(struct worker *w) {
  uint64_t v = rng_below(&w->rng, NVEC + 2);
  tl_drain_calls = tl_drain_fails = 0;
  tl_drain_may_fail = rng_below(&w->rng, 8) == 0;
  int rc = ldg_settle_vector(g_l, v);
  if (rc == LDG_EDRAIN) {
    CHECK(tl_drain_fails > 0);
    w->drain_failures++;
  } else {
    CHECK_RC(rc, LDG_OK);
    CHECK(tl_drain_fails == 0);
  }
  tl_drain_may_fail = false;
}

static void do_destroy(struct worker *w) {
  uint32_t next_inc = inc_take();
  if (next_inc == 0) { /* every number in use until the next barrier */
    w->destroy_skipped++;
    return;
  }
  struct slot *sl = pick_slot(w);
  pthread_rwlock_wrlock(&sl->lk); /* nobody else enqueues on it now */
  ldg_stream *s = sl->cur;
  uint32_t inc = sl->cur_inc;
  drain_executor(sl); /* ldg_stream_destroy: device stream already drained */
  CHECK_EQ_U(ldg_mark(s), atomic_load(&g_incs[inc].seqs));
  if (rng_below(&w->rng, 2) == 0) {
    /* Others may still be releasing entries of s that they claimed; they
     * count as pending until taken, so no exact count here. */
    CHECK_RC(ldg_release_all(s), LDG_OK);
  }
  uint64_t id = ldg_stream_id(s);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  CHECK_RC(ldg_stream_destroy(s), LDG_EDESTROYED);
  CHECK_RC(ldg_stream_check_live(s), LDG_EDESTROYED);
  CHECK_EQ_U(ldg_pending_count(s), 0);
  uint64_t vid = 1;
  CHECK_RC(
      ldg_enqueue(s, (ldg_keep){never_called, NULL}, &vid, 1, NULL, 0, NULL),
      LDG_EDESTROYED);
  CHECK_RC(ldg_add_wait(s, s, 0, NULL), LDG_EDESTROYED);
  CHECK_RC(ldg_release(s, 0), LDG_EDESTROYED);
  CHECK_RC(ldg_release_all(s), LDG_EDESTROYED);
  CHECK_EQ_U(ldg_mark(s), atomic_load(&g_incs[inc].seqs));
  slot_new_stream(sl, rng_below(&w->rng, 2) == 0, next_inc);
  CHECK(ldg_stream_id(sl->cur) > id); /* ids are never reused */
  pthread_rwlock_unlock(&sl->lk);
  ldg_stream_unref(s); /* the slot's reference; events may hold more */
}

/* A short-lived blocking stream on device `devices` (never snapshotted by
 * workers) whose operations run inline: each is executed when issued. */
static void do_ephemeral(struct worker *w) {
  ldg_stream *e;
  /* Half of them single-issuer (only this worker records on e: its
   * enqueues, its wait on a slot): chosen by the parity of the worker's
   * count, not the generator, so that a seed replays as before. */
  unsigned flags = (w->enqueued & 1) ? LDG_STREAM_SINGLE_ISSUER : 0;
  CHECK_RC(ldg_stream_create(g_l, g_cfg.devices, flags, NULL, NULL, &e),
           LDG_OK);
  uint32_t recs[8];
  int n = 0;
  int k = 1 + (int)rng_below(&w->rng, 6);
  bool waited_by = false;
  for (int j = 0; j < k; j++) {
    uint32_t idx = rec_new(&w->rng, 0, REC_EXECUTED);
    if (idx == NO_REC) {
      w->starved++;
      break;
    }
    struct rec *r = &g_recs[idx];
    CHECK(checksum(r->buf, r->len) == r->sum); /* "run" it now */
    uint64_t ids[6];
    ldg_range rg[3];
    size_t nv = rec_vecs(r->shape, ids);
    size_t nr = rec_ranges(r, rg);
    CHECK_RC(ldg_enqueue(e, rec_keep(idx), nv ? ids : NULL, nv, nr ? rg : NULL,
                         nr, NULL),
             LDG_OK);
    recs[n++] = idx;
    w->enqueued++;
    if (rng_below(&w->rng, 4) == 0) {
      /* We are its only releaser: all keeps up to the mark ran here. */
      CHECK_RC(ldg_release(e, ldg_mark(e)), LDG_OK);
      for (int q = 0; q < n; q++) {
        CHECK(atomic_load(&g_recs[recs[q]].state) == REC_RELEASED);
      }
      CHECK_EQ_U(ldg_pending_count(e), 0);
    }
  }
  if (rng_below(&w->rng, 3) == 0) {
    /* e waits on a slot: inline, so the wait completes here and now. Fired
     * when e dies, it releases that slot up to the event. */
    struct event ev;
    ev_record(&ev, (int)rng_below(&w->rng, (uint32_t)g_cfg.streams));
    wait_done(&g_slots[ev.slot], ev.p);
    CHECK_RC(ldg_add_wait(e, ev.s, ev.m, NULL), LDG_OK);
    ev_drop(&ev);
  }
  if (rng_below(&w->rng, 3) == 0) {
    /* A slot waits on e (already complete): the wait holds e's last
     * reference once we drop ours. */
    struct slot *b = pick_slot(w);
    pthread_rwlock_rdlock(&b->lk);
    issue(b, XOP_NOP, 0, 0);
    CHECK_RC(ldg_add_wait(b->cur, e, ldg_mark(e), NULL), LDG_OK);
    atomic_fetch_add(&g_incs[b->cur_inc].seqs, 1);
    pthread_rwlock_unlock(&b->lk);
    waited_by = true;
  }
  if (rng_below(&w->rng, 4) == 0) {
    ldg_stream_ref(e);
    ldg_stream_unref(e);
  }
  ldg_stream_unref(e);
  if (!waited_by) {
    /* Our reference was the last: dropping it destroyed e, here. */
    for (int q = 0; q < n; q++) {
      if (atomic_load(&g_recs[recs[q]].state) != REC_RELEASED) {
        FAIL("dropping the last reference of a stream left record %u held",
             recs[q]);
      }
    }
  }
}

static void do_queries(struct worker *w) {
  uint64_t v = rng_below(&w->rng, NVEC + 2);
  (void)ldg_holds_vector(g_l, v);
  uintptr_t a = FAKE_BASE - 64 + rng_below(&w->rng, FAKE_SPAN + 128);
  (void)ldg_holds_host_range(g_l, a, 1 + rng_below(&w->rng, 100));
  CHECK(!ldg_holds_host_range(g_l, a, 0));
  ldg_stream *out[4];
  size_t n = ldg_nonblocking_holding(g_l, v, out, 4);
  for (size_t i = 0; i < n && i < 4; i++) {
    CHECK(ldg_stream_is_nonblocking(out[i]));
    ldg_stream_unref(out[i]);
  }
  (void)ldg_nonblocking_holding(g_l, v, NULL, 0);
  (void)ldg_has_nonblocking(g_l);
  struct slot *sl = pick_slot(w);
  ldg_stream *s = acquire_cur(sl, NULL);
  size_t pc = ldg_pending_count(s);
  CHECK(pc <= ldg_mark(s));
  ldg_stream_unref(s);
}

static void do_refs(struct worker *w) {
  if (rng_below(&w->rng, 16) == 0) ldg_ledger_trim(g_l);
  struct slot *sl = pick_slot(w);
  uint32_t inc;
  ldg_stream *s = acquire_cur(sl, &inc);
  ldg_stream_ref(s);
  CHECK(ldg_stream_device(s) == sl->device);
  CHECK(ldg_stream_is_nonblocking(s) == g_incs[inc].nb);
  CHECK(ldg_stream_id(s) >= 1);
  ldg_stream_unref(s);
  ldg_stream_unref(s);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  tl_rng = &w->rng;
  while (!atomic_load(&g_stop)) {
    if (atomic_load(&g_pause)) {
      set_doing(w, "parked at the barrier");
      pthread_mutex_lock(&g_bm);
      uint64_t round = g_round;
      g_arrived++;
      pthread_cond_signal(&g_b_arrive);
      while (g_round == round) pthread_cond_wait(&g_b_resume, &g_bm);
      pthread_mutex_unlock(&g_bm);
      continue;
    }
    int phase = atomic_load_explicit(&g_phase, memory_order_relaxed);
    unsigned r = rng_below(&w->rng, g_weight_total[phase]);
    int op = 0;
    while (r >= k_weights[phase][op]) r -= k_weights[phase][op++];
    set_doing(w, k_op_names[op]);
    w->ops[op]++;
    switch (op) {
      case OP_ENQUEUE:
        do_enqueue(w);
        break;
      case OP_RECORD:
        ev_record(ev_slot_for_new(w),
                  (int)rng_below(&w->rng, (uint32_t)g_cfg.streams));
        break;
      case OP_SYNC_EVENT: {
        struct event *e = ev_pick_used(w);
        if (e != NULL) {
          wait_done(&g_slots[e->slot], e->p);
          ev_release(e);
        }
        break;
      }
      case OP_QUERY_EVENT: {
        struct event *e = ev_pick_used(w);
        if (e != NULL && atomic_load(&g_slots[e->slot].done) >= e->p) {
          ev_release(e);
        }
        break;
      }
      case OP_WAIT:
        do_wait(w);
        break;
      case OP_SYNC_STREAM:
        do_sync_stream(w);
        break;
      case OP_SYNC_DEVICE:
        do_sync_device(w);
        break;
      case OP_SETTLE:
        do_settle(w);
        break;
      case OP_DESTROY:
        /* Rare: one step in ~8 of its weight. */
        if (rng_below(&w->rng, 8) == 0) do_destroy(w);
        break;
      case OP_EPHEMERAL:
        do_ephemeral(w);
        break;
      case OP_QUERIES:
        do_queries(w);
        break;
      default:
        do_refs(w);
        break;
    }
  }
  set_doing(w, "exiting");
  for (int k = 0; k < NEV; k++) {
    if (w->ev[k].used) ev_drop(&w->ev[k]);
  }
  flush_hook_stats();
  return NULL;
}

/* ---- The oracle at quiescent moments ------------------------------------- */

static uint64_t g_checks, g_full_syncs, g_barriers, g_max_pending;
/* The pool's bound (ldg_ledger_set_pool_limit): the default until the
 * controller sets one. The pool keeps at most the limit in force, which the
 * reclaimer's batches set between 1 MiB and this bound (ledger/pool.c, HOW
 * MUCH THE POOL KEEPS): 1 MiB is not a bound on it. */
static size_t g_pool_limit = (size_t)32 << 20; /* ledger.h, "Memory" */

static bool overlaps(uintptr_t a, size_t n, uintptr_t b, size_t m) {
  return a >= b ? a - b < m : b - a < n;
}

struct oracle {
  uint32_t *pend_by_inc;
  bool vec_held[NVEC + 2];
  uint64_t nb_mask[NVEC + 2];
  ldg_range *ranges;
  size_t nranges, cap;
  uint64_t pending;
};

static void oracle_add_range(struct oracle *o, ldg_range r) {
  if (o->nranges == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 1024;
    o->ranges = realloc(o->ranges, o->cap * sizeof(*o->ranges));
    CHECK(o->ranges != NULL);
  }
  o->ranges[o->nranges++] = r;
}

static bool oracle_range_held(const struct oracle *o, uintptr_t a, size_t n) {
  if (n == 0) return false;
  for (size_t i = 0; i < o->nranges; i++) {
    if (overlaps(a, n, o->ranges[i].addr, o->ranges[i].bytes)) return true;
  }
  return false;
}

static void check_range(const struct oracle *o, uintptr_t a, size_t n) {
  bool want = oracle_range_held(o, a, n);
  if (ldg_holds_host_range(g_l, a, n) != want) {
    FAIL(
        "at a quiescent moment ldg_holds_host_range(%#llx, %zu) = %d, the "
        "oracle says %d",
        (unsigned long long)a, n, !want, want);
  }
}

/* Every worker is parked (or gone): compare the ledger with the records. */
static void quiescent_check(uint64_t *rng) {
  tl_doing = "checking a quiescent moment";
  for (int j = 0; j < g_cfg.streams; j++) drain_executor(&g_slots[j]);
  uint32_t ninc = atomic_load(&g_ninc);
  struct oracle o;
  memset(&o, 0, sizeof(o));
  o.pend_by_inc = calloc(ninc, sizeof(uint32_t));
  CHECK(o.pend_by_inc != NULL);
  for (uint32_t idx = 0; idx < g_cfg.records; idx++) {
    struct rec *r = &g_recs[idx];
    uint32_t st = atomic_load(&r->state);
    if (st == REC_FREE || st == REC_RELEASED) continue;
    if (st == REC_ISSUED) {
      FAIL("record %u issued but not executed, its executor idle", idx);
    }
    o.pending++;
    o.pend_by_inc[r->inc]++;
    uint64_t ids[6];
    size_t nv = rec_vecs(r->shape, ids);
    bool nb_cur = r->inc != 0 && g_incs[r->inc].nb &&
                  g_slots[g_incs[r->inc].slot].cur_inc == r->inc;
    for (size_t i = 0; i < nv; i++) {
      o.vec_held[ids[i]] = true;
      if (nb_cur) o.nb_mask[ids[i]] |= 1ull << g_incs[r->inc].slot;
    }
    ldg_range rg[3];
    size_t nr = rec_ranges(r, rg);
    for (size_t i = 0; i < nr; i++) oracle_add_range(&o, rg[i]);
  }
  if (o.pending > g_max_pending) g_max_pending = o.pending;

  bool any_nb = false;
  for (int j = 0; j < g_cfg.streams; j++) {
    struct slot *sl = &g_slots[j];
    ldg_stream *s = sl->cur;
    uint32_t inc = sl->cur_inc;
    CHECK_RC(ldg_stream_check_live(s), LDG_OK);
    CHECK_EQ_U(ldg_mark(s), atomic_load(&g_incs[inc].seqs));
    if (ldg_pending_count(s) != o.pend_by_inc[inc]) {
      FAIL(
          "slot %d: ldg_pending_count = %zu, the oracle says %u (mark "
          "%llu)",
          j, ldg_pending_count(s), o.pend_by_inc[inc],
          (unsigned long long)ldg_mark(s));
    }
    any_nb |= g_incs[inc].nb;
  }
  for (uint32_t inc = 1; inc < ninc; inc++) {
    if (g_slots[g_incs[inc].slot].cur_inc != inc && o.pend_by_inc[inc] != 0) {
      FAIL("%u records of destroyed incarnation %u still held",
           o.pend_by_inc[inc], inc);
    }
  }
  CHECK(ldg_has_nonblocking(g_l) == any_nb);
  for (uint64_t v = 0; v < NVEC + 2; v++) {
    if (ldg_holds_vector(g_l, v) != o.vec_held[v]) {
      FAIL(
          "at a quiescent moment ldg_holds_vector(%llu) = %d, the oracle "
          "says %d",
          (unsigned long long)v, !o.vec_held[v], o.vec_held[v]);
    }
    ldg_stream *out[MAX_SLOTS];
    size_t n = ldg_nonblocking_holding(g_l, v, out, MAX_SLOTS);
    if (n != (size_t)__builtin_popcountll(o.nb_mask[v])) {
      FAIL("ldg_nonblocking_holding(%llu) = %zu streams, the oracle says %d",
           (unsigned long long)v, n, __builtin_popcountll(o.nb_mask[v]));
    }
    uint64_t seen = 0;
    for (size_t i = 0; i < n; i++) {
      int j = 0;
      while (j < g_cfg.streams && g_slots[j].cur != out[i]) j++;
      CHECK(j < g_cfg.streams);
      CHECK((o.nb_mask[v] >> j) & 1);
      CHECK(!((seen >> j) & 1)); /* each once */
      seen |= 1ull << j;
      ldg_stream_unref(out[i]);
    }
  }
  /* Host ranges: pending ones, their neighbours, and a sweep of the fake
   * region, probed with random lengths. */
  for (int q = 0; q < 24 && o.nranges > 0; q++) {
    ldg_range r = o.ranges[rng_below(rng, (uint32_t)o.nranges)];
    check_range(&o, r.addr, r.bytes);
    check_range(&o, r.addr + r.bytes - 1, 1);
    check_range(&o, r.addr + r.bytes, 1 + rng_below(rng, 64));
    if (r.addr > 0) check_range(&o, r.addr - 1, 1);
  }
  for (int q = 0; q < 64; q++) {
    check_range(&o, FAKE_BASE - 32 + rng_below(rng, FAKE_SPAN + 96),
                1 + rng_below(rng, 96));
  }
  check_range(&o, UINTPTR_MAX - 8, 100); /* clipped at the top */
  CHECK(!ldg_holds_host_range(g_l, FAKE_BASE, 0));
  free(o.pend_by_inc);
  free(o.ranges);
  g_checks++;
}

/* Whether s, the stream worker i's event k references, is a slot's
 * current stream or one an earlier event (in worker order) references. */
static bool is_current_or_seen(const ldg_stream *s, int i, int k) {
  for (int j = 0; j < g_cfg.streams; j++)
    if (g_slots[j].cur == s) return true;
  for (int i2 = 0; i2 <= i; i2++) {
    for (int k2 = 0; k2 < (i2 == i ? k : NEV); k2++) {
      const struct event *e = &g_workers[i2].ev[k2];
      if (e->used && e->s == s) return true;
    }
  }
  return false;
}

/* Every executor is idle: sync every device (and the ephemeral one), then
 * nothing may stay held, and memory must have been given back. */
static void quiescent_full_sync(uint64_t *rng) {
  tl_doing = "syncing every device at a quiescent moment";
  for (int d = 0; d <= g_cfg.devices; d++) {
    ldg_marks *mk;
    CHECK_RC(ldg_device_marks(g_l, d, &mk), LDG_OK);
    CHECK_RC(ldg_release_marks(mk), LDG_OK);
  }
  for (int j = 0; j < g_cfg.streams; j++) {
    CHECK_EQ_U(ldg_pending_count(g_slots[j].cur), 0);
  }
  for (uint64_t v = 0; v < NVEC + 2; v++) CHECK(!ldg_holds_vector(g_l, v));
  CHECK(!ldg_holds_host_range(g_l, FAKE_BASE, FAKE_SPAN + 64));
  for (uint32_t idx = 0; idx < g_cfg.records; idx++) {
    uint32_t st = atomic_load(&g_recs[idx].state);
    if (st == REC_ISSUED || st == REC_EXECUTED) {
      FAIL(
          "record %u (incarnation %u) still held after every device was "
          "synced",
          idx, g_recs[idx].inc);
    }
  }
  /* Only each stream's newest segment may remain, and the pool (unless
   * trimmed) up to its limit. */
  bool trim = rng_below(rng, 2) == 0;
  ldg_quiesce(); /* retired segments reach the pool (or are freed) */
  if (trim) {
    ldg_ledger_trim(g_l);
    ldg_quiesce();
  }
  size_t bytes = ldg_ledger_bytes(g_l);
  /* Streams alive now: the slots' current ones, and the earlier
   * incarnations the workers' events still reference (destroyed, but a
   * stream, its ring included, lives until its last reference goes:
   * ledger.h, "Memory"). The workers are parked: their events are still. */
  size_t older = 0, older_bytes = 0;
  for (int i = 0; i < g_cfg.threads; i++) {
    for (int k = 0; k < NEV; k++) {
      const struct event *e = &g_workers[i].ev[k];
      if (!e->used || is_current_or_seen(e->s, i, k)) continue;
      older++;
      older_bytes += ldg__ring_bytes(e->s);
    }
  }
  /* The pool: at most the limit in force after the batch ldg_quiesce ran
   * (it takes out what is above), which is at most the bound set. */
  size_t in_force = ldg__pool_limit_in_force(g_l);
  CHECK(in_force <= g_pool_limit);
  size_t bound = ((size_t)g_cfg.streams + older) * IDLE_STREAM_BYTES +
                 (trim ? 0 : in_force);
  if (bytes > bound) {
    /* Where the bytes are, before the failure: each slot stream's ring
     * (linked segments and spare), its marks, the pool's classes; the rest
     * is stream structs not freed yet and extension blocks. */
    size_t rings = 0;
    for (int j = 0; j < g_cfg.streams; j++) {
      ldg_stream *s = g_slots[j].cur;
      size_t rb = ldg__ring_bytes(s);
      rings += rb;
      fprintf(stderr,
              "torture_test: stream %d: ring %zu bytes, %u segments past the "
              "mark, tail %" PRIu64 " tail base %" PRIu64 " tail_end %" PRIu64
              " grow_at %" PRIu64 " fast_gen %" PRIu64 " owner %" PRIu64 "\n",
              j, rb, ldg__ring_segments_ahead(s), (uint64_t)ldg_mark(s),
              ldg__ring_tail_base(s), ldg__ring_tail_end(s),
              ldg__ring_grow_at(s), ldg__ring_fast_gen(s),
              ldg__ring_owner_state(s));
    }
    size_t pooled = 0;
    for (unsigned c = 0; c < 8; c++)
      pooled += ldg__pool_count(g_l, c) * ldg__pool_seg_bytes(c);
    fprintf(stderr,
            "torture_test: rings %zu, pool %zu, %zu earlier incarnations "
            "referenced by events (rings %zu), the rest %zu bytes (of %zu)\n",
            rings, pooled, older, older_bytes,
            bytes - rings - pooled - older_bytes, bytes);
    FAIL(
        "%zu bytes held with nothing pending on %d streams (bound %zu, "
        "pool %s, limit in force %zu)",
        bytes, g_cfg.streams, bound, trim ? "trimmed" : "kept", in_force);
  }
  g_full_syncs++;
}

/* Returns released records to the free stack with a new generation. */
static void recycle_records(void) {
  int64_t top = atomic_load(&g_free_top);
  for (uint32_t idx = 0; idx < g_cfg.records; idx++) {
    struct rec *r = &g_recs[idx];
    if (atomic_load(&r->state) != REC_RELEASED) continue;
    atomic_store(&r->state, (uint32_t)REC_FREE);
    atomic_fetch_add(&r->gen, 1);
    r->buf = NULL;
    g_free[top++] = idx;
  }
  atomic_store(&g_free_top, top);
}

/* Makes the numbers of dead incarnations that no pending record names
 * reusable (after recycle_records: every record not FREE is pending). */
static void recycle_incs(void) {
  uint32_t ninc = atomic_load(&g_ninc);
  bool *named = calloc(ninc, sizeof(bool));
  CHECK(named != NULL);
  for (uint32_t idx = 0; idx < g_cfg.records; idx++) {
    if (atomic_load(&g_recs[idx].state) != REC_FREE) {
      named[g_recs[idx].inc] = true;
    }
  }
  int64_t top = atomic_load(&g_inc_free_top);
  for (uint32_t inc = 1; inc < ninc; inc++) {
    struct inc *c = &g_incs[inc];
    if (c->free_listed || named[inc] || g_slots[c->slot].cur_inc == inc) {
      continue;
    }
    c->free_listed = true;
    g_inc_free[top++] = inc;
  }
  atomic_store(&g_inc_free_top, top);
  free(named);
}

/* ---- Watchdog ------------------------------------------------------------ */

static pthread_mutex_t g_wd_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wd_cv = PTHREAD_COND_INITIALIZER;
static bool g_wd_done;
static double g_wd_limit_s;

static void *watchdog_main(void *arg) {
  (void)arg;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += (time_t)g_wd_limit_s;
  pthread_mutex_lock(&g_wd_m);
  int rc = 0;
  while (!g_wd_done && rc != ETIMEDOUT) {
    rc = pthread_cond_timedwait(&g_wd_cv, &g_wd_m, &until);
  }
  bool done = g_wd_done;
  pthread_mutex_unlock(&g_wd_m);
  if (done) return NULL;
  fprintf(stderr, "\nwatchdog: the run did not finish within %.0f s\n",
          g_wd_limit_s);
  for (int i = 0; i < g_cfg.threads; i++) {
    fprintf(stderr, "  worker %d: %s\n", i,
            atomic_load_explicit(&g_workers[i].doing, memory_order_relaxed));
  }
  for (int j = 0; j < g_cfg.streams; j++) {
    fprintf(stderr, "  slot %d: issued %llu, done %llu\n", j,
            (unsigned long long)atomic_load(&g_slots[j].issued),
            (unsigned long long)atomic_load(&g_slots[j].done));
  }
  tl_doing = "watching";
  FAIL("timed out: a thread is blocked (deadlock or lost release?)");
}

/* ---- Main ---------------------------------------------------------------- */

static void usage(void) {
  fprintf(stderr,
          "usage: torture_test [--threads T] [--seconds S] [--seed X] "
          "[--streams M]\n"
          "                    [--devices D] [--records N] [--delay PERMILLE] "
          "[--barrier-ms B]\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
  g_cfg.threads = UNDER_SANITIZER ? 3 : 4;
  g_cfg.streams = 6;
  g_cfg.devices = 2;
  g_cfg.seconds = UNDER_SANITIZER ? 10 : 8;
  g_cfg.seed = 20261130;
  g_cfg.records = UNDER_TSAN ? (1u << 16) : (1u << 18);
  g_cfg.delay_permille = UNDER_SANITIZER ? 15 : 30;
  g_cfg.barrier_ms = 250;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage();
    const char *v = argv[++i];
    if (strcmp(a, "--threads") == 0) {
      g_cfg.threads = atoi(v);
    } else if (strcmp(a, "--seconds") == 0) {
      g_cfg.seconds = atof(v);
    } else if (strcmp(a, "--seed") == 0) {
      g_cfg.seed = strtoull(v, NULL, 0);
    } else if (strcmp(a, "--streams") == 0) {
      g_cfg.streams = atoi(v);
    } else if (strcmp(a, "--devices") == 0) {
      g_cfg.devices = atoi(v);
    } else if (strcmp(a, "--records") == 0) {
      g_cfg.records = (uint32_t)strtoul(v, NULL, 0);
    } else if (strcmp(a, "--delay") == 0) {
      g_cfg.delay_permille = (unsigned)atoi(v);
    } else if (strcmp(a, "--barrier-ms") == 0) {
      g_cfg.barrier_ms = (unsigned)atoi(v);
    } else {
      usage();
    }
  }
  if (g_cfg.threads < 1 || g_cfg.threads > MAX_THREADS || g_cfg.streams < 1 ||
      g_cfg.streams > MAX_SLOTS || g_cfg.devices < 1 ||
      g_cfg.devices >= MAX_DEVICES || g_cfg.seconds <= 0 ||
      g_cfg.records < 64 || g_cfg.records > (1u << 26) ||
      g_cfg.delay_permille > 1000 || g_cfg.barrier_ms < 1) {
    usage();
  }
}

/* ---- Ledger destroy racing the holders' unrefs ----------------------------
 * ledger.h: while ldg_ledger_destroy runs, the only other calls allowed are
 * ldg_stream_unref on handles their holders still have. Each round, holder
 * threads create streams on a fresh ledger (with entries, waits between
 * them that hold references, some streams destroyed, some with extra
 * references), meet the main thread at a barrier, and then drop every
 * reference they hold — many of them last ones, which finalise the stream
 * — while the main thread destroys the ledger (issue 8, defect 1: the walk
 * revived streams a last unref was finalising). The delay hook widens the
 * windows (at FINALIZE, REGISTRY_LOCKED, LEDGER_DESTROY_PICK among
 * others). Every keep must run exactly once. */

#define LDR_HOLDERS 4
#define LDR_STREAMS 24 /* per holder */
#define LDR_KEEPS 4    /* per stream */

struct ldr_keep {
  _Atomic int runs;
};

struct ldr_holder {
  ldg_ledger *l;
  uint64_t rng;
  pthread_barrier_t *bar;
  ldg_stream *s[LDR_STREAMS];
  int refs[LDR_STREAMS];
  struct ldr_keep k[LDR_STREAMS * LDR_KEEPS];
};

static void ldr_keep_run(void *ctx) {
  struct ldr_keep *k = ctx;
  if (atomic_fetch_add(&k->runs, 1) != 0) {
    FAIL("ledger-destroy race: a keep ran twice");
  }
}

static void *ldr_holder_main(void *arg) {
  struct ldr_holder *h = arg;
  tl_doing = "ledger-destroy race: creating streams";
  for (int i = 0; i < LDR_STREAMS; i++) {
    CHECK_RC(ldg_stream_create(h->l, (int)rng_below(&h->rng, 2), 0, NULL,
                               NULL, &h->s[i]),
             LDG_OK);
    h->refs[i] = 1;
    for (int j = 0; j < LDR_KEEPS; j++) {
      struct ldr_keep *k = &h->k[i * LDR_KEEPS + j];
      atomic_init(&k->runs, 0);
      CHECK_RC(ldg_enqueue(h->s[i], (ldg_keep){ldr_keep_run, k}, NULL, 0,
                           NULL, 0, NULL),
               LDG_OK);
    }
    if (i > 0 && rng_below(&h->rng, 2) == 0) {
      /* s[i] waits on s[i-1]: the wait holds a reference to s[i-1]. */
      CHECK_RC(ldg_add_wait(h->s[i], h->s[i - 1], ldg_mark(h->s[i - 1]),
                            NULL),
               LDG_OK);
    }
    if (rng_below(&h->rng, 3) == 0) {
      ldg_stream_ref(h->s[i]);
      h->refs[i]++;
    }
    if (rng_below(&h->rng, 6) == 0) {
      CHECK_RC(ldg_stream_destroy(h->s[i]), LDG_OK);
    }
  }
  pthread_barrier_wait(h->bar);
  tl_doing = "ledger-destroy race: dropping references";
  for (int i = 0; i < LDR_STREAMS; i++) {
    int idx = (int)rng_below(&h->rng, LDR_STREAMS);
    while (h->refs[idx] == 0) idx = (idx + 1) % LDR_STREAMS;
    while (h->refs[idx] > 0) {
      if (rng_below(&h->rng, 4) == 0) sched_yield();
      ldg_stream_unref(h->s[idx]);
      h->refs[idx]--;
    }
  }
  tl_doing = "idle";
  return NULL;
}

static void ledger_destroy_race(uint64_t seed) {
  int rounds = UNDER_SANITIZER ? 10 : 40;
  struct ldr_holder *h = calloc(LDR_HOLDERS, sizeof(*h));
  CHECK(h != NULL);
  for (int r = 0; r < rounds; r++) {
    tl_doing = "ledger-destroy race";
    ldg_ledger *l;
    CHECK_RC(ldg_ledger_create(&l), LDG_OK);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, LDR_HOLDERS + 1);
    pthread_t t[LDR_HOLDERS];
    for (int i = 0; i < LDR_HOLDERS; i++) {
      memset(&h[i], 0, sizeof(h[i]));
      h[i].l = l;
      h[i].bar = &bar;
      h[i].rng = seed * 31u + (uint64_t)r * 1009u + (uint64_t)i + 1;
      CHECK(pthread_create(&t[i], NULL, ldr_holder_main, &h[i]) == 0);
    }
    pthread_barrier_wait(&bar);
    ldg_ledger_destroy(l); /* racing every holder's unrefs */
    for (int i = 0; i < LDR_HOLDERS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    ldg_quiesce();
    for (int i = 0; i < LDR_HOLDERS; i++) {
      for (int k = 0; k < LDR_STREAMS * LDR_KEEPS; k++) {
        int runs = atomic_load(&h[i].k[k].runs);
        if (runs != 1) {
          FAIL("ledger-destroy race, round %d: keep %d of holder %d ran %d "
               "times",
               r, k, i, runs);
        }
      }
    }
  }
  free(h);
  printf("  ledger destroy raced the holders' unrefs: %d rounds, %d streams "
         "each, every keep once\n",
         rounds, LDR_HOLDERS * LDR_STREAMS);
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  install_crash_handlers();
  printf(
      "torture_test: seed %llu, %d threads, %d streams on %d devices, "
      "%g s, %u records, delay %u/1000%s\n",
      (unsigned long long)g_cfg.seed, g_cfg.threads, g_cfg.streams,
      g_cfg.devices, g_cfg.seconds, g_cfg.records, g_cfg.delay_permille,
      UNDER_SANITIZER ? " (sanitizer build)" : "");
  fflush(stdout);
  for (int p = 0; p < NPHASES; p++) {
    for (int i = 0; i < OP_COUNT; i++) g_weight_total[p] += k_weights[p][i];
  }
  double t0 = now_s();
  g_wd_limit_s = g_cfg.seconds + (UNDER_SANITIZER ? 150 : 90);
  pthread_t watchdog;
  CHECK(pthread_create(&watchdog, NULL, watchdog_main, NULL) == 0);

  CHECK(ldg__set_hook(delay_hook, NULL)); /* the hooks build */
  g_recs = calloc(g_cfg.records, sizeof(*g_recs));
  g_free = calloc(g_cfg.records, sizeof(*g_free));
  g_incs = calloc(MAX_INCS, sizeof(*g_incs));
  g_inc_free = calloc(MAX_INCS, sizeof(*g_inc_free));
  g_slots = calloc((size_t)g_cfg.streams, sizeof(*g_slots));
  g_workers = calloc((size_t)g_cfg.threads, sizeof(*g_workers));
  CHECK(g_recs && g_free && g_incs && g_inc_free && g_slots && g_workers);
  for (uint32_t i = 0; i < g_cfg.records; i++) {
    atomic_init(&g_recs[i].gen, 1);
    g_free[i] = g_cfg.records - 1 - i;
  }
  atomic_store(&g_free_top, (int64_t)g_cfg.records);
  CHECK_RC(ldg_ledger_create(&g_l), LDG_OK);

  uint64_t rng = g_cfg.seed ^ 0x5bd1e995u;
  pthread_rwlockattr_t rwa;
  pthread_rwlockattr_init(&rwa);
  /* Writers first, so a destroyer is not starved by enqueuers. Nobody
   * holds two slot locks, so this cannot deadlock. */
  pthread_rwlockattr_setkind_np(&rwa,
                                PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  for (int j = 0; j < g_cfg.streams; j++) {
    struct slot *sl = &g_slots[j];
    sl->idx = j;
    sl->device = j % g_cfg.devices;
    sl->rng = g_cfg.seed * 7919u + (uint64_t)j;
    pthread_mutex_init(&sl->qm, NULL);
    pthread_cond_init(&sl->q_nonempty, NULL);
    pthread_cond_init(&sl->q_space, NULL);
    pthread_mutex_init(&sl->dm, NULL);
    pthread_cond_init(&sl->dcv, NULL);
    pthread_rwlock_init(&sl->lk, &rwa);
    /* Some non-blocking from the start. */
    slot_new_stream(sl, j % 3 == 1, inc_take());
    CHECK(pthread_create(&sl->exec, NULL, executor_main, sl) == 0);
  }
  for (int i = 0; i < g_cfg.threads; i++) {
    struct worker *w = &g_workers[i];
    w->id = i;
    w->rng = g_cfg.seed * 1000003u + (uint64_t)i + 1;
    atomic_init(&w->doing, "starting");
    CHECK(pthread_create(&w->thread, NULL, worker_main, w) == 0);
  }

  /* The controller: quiescent checks every barrier_ms until the deadline. */
  double deadline = t0 + g_cfg.seconds;
  while (now_s() < deadline) {
    double left = deadline - now_s();
    double nap = (double)g_cfg.barrier_ms * 1e-3 *
                 (0.5 + (double)rng_below(&rng, 1000) / 1000.0);
    sleep_ns((long)((nap < left ? nap : left) * 1e9));
    if (now_s() >= deadline) break;
    atomic_store(&g_pause, true);
    pthread_mutex_lock(&g_bm);
    while (g_arrived < g_cfg.threads) pthread_cond_wait(&g_b_arrive, &g_bm);
    pthread_mutex_unlock(&g_bm);
    quiescent_check(&rng);
    if (rng_below(&rng, 4) == 0) {
      /* Settle a vector by hand: executors are idle, drains return at once;
       * afterwards no non-blocking stream holds it. */
      uint64_t v = 1 + rng_below(&rng, NVEC);
      CHECK_RC(ldg_settle_vector(g_l, v), LDG_OK);
      CHECK_EQ_U(ldg_nonblocking_holding(g_l, v, NULL, 0), 0);
      quiescent_check(&rng);
    }
    if (rng_below(&rng, 4) == 0) {
      quiescent_full_sync(&rng);
      quiescent_check(&rng);
    }
    recycle_records();
    recycle_incs();
    if (rng_below(&rng, 8) == 0) {
      /* Change the pool limit now and then: off, small, the default. */
      static const size_t limits[] = {0, (size_t)64 << 10, (size_t)1 << 20};
      g_pool_limit = limits[rng_below(&rng, 3)];
      CHECK_RC(ldg_ledger_set_pool_limit(g_l, g_pool_limit), LDG_OK);
    }
    g_barriers++;
    int phase = (int)rng_below(&rng, NPHASES);
    atomic_store_explicit(&g_phase, phase, memory_order_relaxed);
    g_phase_rounds[phase]++;
    pthread_mutex_lock(&g_bm);
    g_arrived = 0;
    atomic_store(&g_pause, false);
    g_round++;
    pthread_cond_broadcast(&g_b_resume);
    pthread_mutex_unlock(&g_bm);
  }
  atomic_store(&g_stop, true);
  for (int i = 0; i < g_cfg.threads; i++) {
    pthread_join(g_workers[i].thread, NULL);
  }

  /* The end: a last check, then destroy everything; every record must have
   * been released exactly once. */
  quiescent_check(&rng);
  tl_doing = "destroying every stream";
  for (int j = 0; j < g_cfg.streams; j++) {
    struct slot *sl = &g_slots[j];
    drain_executor(sl);
    if (j % 2 == 0) CHECK_RC(ldg_release_all(sl->cur), LDG_OK);
    CHECK_RC(ldg_stream_destroy(sl->cur), LDG_OK);
    ldg_stream_unref(sl->cur);
    sl->cur = NULL;
  }
  for (int j = 0; j < g_cfg.streams; j++) {
    struct slot *sl = &g_slots[j];
    pthread_mutex_lock(&sl->qm);
    sl->stop = true;
    pthread_cond_signal(&sl->q_nonempty);
    pthread_mutex_unlock(&sl->qm);
    pthread_join(sl->exec, NULL);
  }
  uint64_t released = 0;
  for (uint32_t idx = 0; idx < g_cfg.records; idx++) {
    uint32_t st = atomic_load(&g_recs[idx].state);
    if (st == REC_ISSUED || st == REC_EXECUTED) {
      FAIL(
          "record %u (incarnation %u) never released though every stream "
          "was destroyed",
          idx, g_recs[idx].inc);
    }
  }
  recycle_records();
  CHECK(!ldg_has_nonblocking(g_l));
  ldg_quiesce(); /* streams freed, their segments pooled or freed */
  ldg_ledger_trim(g_l);
  ldg_quiesce();
  CHECK_EQ_U(ldg_ledger_bytes(g_l), 0); /* every stream gone, pool trimmed */
  ldg_ledger_destroy(g_l);
  ledger_destroy_race(g_cfg.seed);
  flush_hook_stats();
  CHECK(ldg__set_hook(NULL, NULL));

  pthread_mutex_lock(&g_wd_m);
  g_wd_done = true;
  pthread_cond_signal(&g_wd_cv);
  pthread_mutex_unlock(&g_wd_m);
  pthread_join(watchdog, NULL);

  uint64_t ops[OP_COUNT] = {0}, total = 0, starved = 0, drain_failures = 0,
           destroy_skipped = 0;
  for (int i = 0; i < g_cfg.threads; i++) {
    for (int k = 0; k < OP_COUNT; k++) ops[k] += g_workers[i].ops[k];
    released += g_workers[i].enqueued;
    starved += g_workers[i].starved;
    drain_failures += g_workers[i].drain_failures;
    destroy_skipped += g_workers[i].destroy_skipped;
  }
  for (int k = 0; k < OP_COUNT; k++) total += ops[k];
  printf("torture_test: PASS seed %llu in %.1f s: %llu steps (",
         (unsigned long long)g_cfg.seed, now_s() - t0,
         (unsigned long long)total);
  for (int k = 0; k < OP_COUNT; k++) {
    printf("%s%s %llu", k ? ", " : "", k_op_names[k],
           (unsigned long long)ops[k]);
  }
  printf(
      ")\n  %llu operations enqueued, each released exactly once; "
      "%llu stream incarnations; %llu barriers (%llu quiescent checks, "
      "%llu full syncs), max %llu pending at a barrier; %llu record "
      "starvations, %llu destroys skipped; %llu drain failures injected\n"
      "  hook calls:",
      (unsigned long long)released,
      (unsigned long long)atomic_load(&g_inc_created),
      (unsigned long long)g_barriers, (unsigned long long)g_checks,
      (unsigned long long)g_full_syncs, (unsigned long long)g_max_pending,
      (unsigned long long)starved, (unsigned long long)destroy_skipped,
      (unsigned long long)drain_failures);
  static const char *const point_names[NPOINTS] = {
      "?",        "reserved",    "published",      "seg-alloc",
      "claimed",  "taking",      "chunk-taken",    "head-advance",
      "pool-pop", "extend-linked", "finalize",     "registry-locked",
      "ledger-destroy-pick"};
  for (int p = 1; p < NPOINTS; p++) {
    printf(" %s %llu", point_names[p],
           (unsigned long long)atomic_load(&g_hook_calls[p]));
  }
  printf(", delays injected %llu\n  phases:",
         (unsigned long long)atomic_load(&g_hook_delays));
  for (int p = 0; p < NPHASES; p++) {
    printf(" %s %llu", k_phase_names[p], (unsigned long long)g_phase_rounds[p]);
  }
  printf("\n");

  for (int j = 0; j < g_cfg.streams; j++) {
    struct slot *sl = &g_slots[j];
    pthread_mutex_destroy(&sl->qm);
    pthread_cond_destroy(&sl->q_nonempty);
    pthread_cond_destroy(&sl->q_space);
    pthread_mutex_destroy(&sl->dm);
    pthread_cond_destroy(&sl->dcv);
    pthread_rwlock_destroy(&sl->lk);
  }
  pthread_rwlockattr_destroy(&rwa);
  free(g_recs);
  free(g_free);
  free(g_incs);
  free(g_inc_free);
  free(g_slots);
  free(g_workers);
  return 0;
}
