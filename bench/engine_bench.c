/*
 * engine_bench — the progress engine (cuda/sl_engine.h) against a loop that
 * synchronises, side by side in one run, through the CUDA layer (issue 9's
 * benchmark targets).
 *
 * MODES (one context each, same device, same kernels)
 *   sync    no engine: the request thread calls slc_stream_synchronize; the
 *           keep runs inside that call
 *   engine  the engine thread (default config; --poll-us, --every-ops)
 *   poll    no engine thread: the request thread calls slc_engine_poll in
 *           its loop until the keep ran
 *
 * SCENARIOS, for each mode
 *   latency  --samples times, one at a time: slc_launch of a kernel that
 *            spins --kernel-us on %globaltimer and stores %globaltimer into
 *            mapped host memory, with a keep that notes CLOCK_MONOTONIC when
 *            it runs. Completion-to-keep latency = keep time - the kernel's
 *            end stamp moved to the host clock (calibrated as in
 *            marker_bench.c: 0 = when a host thread spinning on the kernel's
 *            own store could know). p50, p99. Checked: every keep sees
 *            its kernel's stamp (a keep run early fails the run). Also the
 *            issue cost of
 *            slc_launch (p50): engine modes place markers on this path, so
 *            engine − sync is the marker's cost on the issuing thread.
 *   rate     --rate-ops launches of an empty kernel with a keep, paced at
 *            --rate per second (sync: a synchronise every --sync-every ops;
 *            engine/poll: none, at most 4096 pending). Host CPU per
 *            released operation: the process's CPU time (getrusage: every
 *            thread, the driver's included) and, apart, the request
 *            thread's; the achieved rate.
 *   idle     the process's CPU share over --idle-ms with nothing pending,
 *            and while one operation waits behind a --idle-ms kernel.
 *   counters the engine's slc_engine_stats per operation in the latency and
 *            rate scenarios: markers, tail markers, polls, the thread's
 *            timed sleeps and parks, and futex wake-ups made by issuers;
 *            wake-ups (sleeps + parks) and the streams that began batching
 *            (sl_engine.h, PACING).
 *   remote   (--remote, once, before the modes) the latency scenario
 *            without an engine, synchronised by a second thread: the issue
 *            cost of slc_launch when keeps run on another thread with no
 *            marker at all (see scenario_remote).
 *   contention (--contention, once, before the modes) slc_launch's issue
 *            cost alone and while a second thread does one thing the
 *            engine thread does (see scenario_contention).
 * ENGINE OPTIONS --wait adaptive|fixed, --placement engine|issuer (who
 *   records the markers: sl_engine.h, PLACEMENT; the engine thread by
 *   default since issue 9's pacing, the issuer before), --poll-us, --poll-max-us,
 *   --linger-us, --every-ops, --every-us (0 or absent: the defaults of
 *   sl_engine.h); --modes picks modes.
 *
 * DRIVERS: --driver=libcuda (default; no library: "SKIPPED", exit 0 unless
 * --require-gpu) or --driver=host (the host executor: every path runs, the
 * times say nothing about GPUs). --smoke: tiny. Exit 0, 1 failure, 2 usage.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench/stamp.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "cuda/host_executor.h"






static struct {
  bool host, require_gpu, smoke, contention, remote;
  const char *libcuda, *json, *modes;
  unsigned samples, kernel_us, rate, rate_ops, idle_ms, sync_every, poll_us,
      every_ops, every_us, poll_max_us, linger_us;
  slc_engine_wait wait;
  slc_engine_placement placement;
} opt = {.samples = 3000, .kernel_us = 10, .rate = 100000, .rate_ops = 30000,
         .idle_ms = 50, .sync_every = 64, .poll_us = 5, .every_ops = 8};

static void die(const char *what, int rc, int line) {
  fprintf(stderr, "engine_bench: %s failed (line %d): %s: %s\n", what, line,
          slc_strerror(rc), slc_last_error_message());
  fflush(stdout);
  _exit(1);
}
#define CK(call)                                    \
  do {                                              \
    int ck_rc_ = (call);                            \
    if (ck_rc_ != LDG_OK) die(#call, ck_rc_, __LINE__); \
  } while (0)

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) {
    fprintf(stderr, "engine_bench: out of memory\n");
    _exit(1);
  }
  return p;
}

enum { MODE_SYNC, MODE_ENGINE, MODE_POLL, N_MODES };
static const char *const mode_names[] = {"sync", "engine", "poll"};

typedef struct bctx {
  int mode;
  slc_context *c;
  slc_stream *s;
  slc_module *m;
  CUfunction f;
  slc_buffer *stamps; /* pinned, mapped */
  CUdeviceptr stamps_d;
  uint64_t *obs;      /* keep times */
  atomic_long kept;
  atomic_long early; /* keeps that ran before their kernel's stamp landed */
} bctx;

typedef struct op_keep {
  bctx *b;
  unsigned i;
} op_keep;

static void keep_note(void *ctx) {
  op_keep *k = ctx;
  k->b->obs[k->i] = bench_now_ns();
  /* The kernel's last act is its stamp: a keep that does not see it ran
   * before the kernel completed (a correctness check, not a timing). */
  const uint64_t *stamps = slc_buffer_host(k->b->stamps);
  if (__atomic_load_n(&stamps[k->i], __ATOMIC_ACQUIRE) == 0)
    atomic_fetch_add(&k->b->early, 1);
  atomic_fetch_add_explicit(&k->b->kept, 1, memory_order_release);
}

static void keep_count(void *ctx) {
  atomic_fetch_add_explicit(&((bctx *)ctx)->kept, 1, memory_order_release);
}

static slc_driver drv;
static int64_t g_offset;

static uint64_t launch(bctx *b, uint64_t ns, CUdeviceptr out, ldg_keep keep) {
  void *params[] = {&ns, &out};
  slc_hold h = {keep, NULL, 0, NULL, 0};
  slc_dim3 one = {1, 1, 1};
  uint64_t t0 = bench_now_ns();
  CK(slc_launch(b->s, b->f, one, one, 0, params, &h));
  return bench_now_ns() - t0;
}

/* Until b->kept reaches n: by synchronising, by the engine, or by polling. */
static void settle(bctx *b, long n) {
  if (b->mode == MODE_SYNC) {
    CK(slc_stream_synchronize(b->s));
    return;
  }
  while (atomic_load_explicit(&b->kept, memory_order_acquire) < n)
    if (b->mode == MODE_POLL) CK(slc_engine_poll(b->c, NULL));
}

static void bctx_open(bctx *b, int mode, unsigned n_stamps) {
  memset(b, 0, sizeof(*b));
  b->mode = mode;
  CK(slc_context_create(&drv, &b->c));
  if (mode != MODE_SYNC) {
    slc_engine_config cfg = {.thread = mode == MODE_ENGINE,
                             .poll_us = opt.poll_us,
                             .marker_every_ops = opt.every_ops,
                             .marker_every_us = opt.every_us,
                             .wait = opt.wait,
                             .placement = opt.placement,
                             .poll_max_us = opt.poll_max_us,
                             .linger_us = opt.linger_us};
    CK(slc_engine_enable(b->c, &cfg));
  }
  CK(slc_stream_create(b->c, 0, SLC_STREAM_NONBLOCKING, &b->s));
  CK(slc_module_load(b->c, 0, bench_stamp_ptx, &b->m));
  CK(slc_module_function(b->m, BENCH_STAMP_KERNEL, &b->f));
  CK(slc_buffer_alloc_host(b->c, (n_stamps + 1) * sizeof(uint64_t),
                           &b->stamps));
  memset(slc_buffer_host(b->stamps), 0, (n_stamps + 1) * sizeof(uint64_t));
  CK(slc_device_make_current(b->c, 0));
  const slc_driver *d = slc_context_driver(b->c);
  if (d->pfn_cuMemHostGetDevicePointer(&b->stamps_d,
                                       slc_buffer_host(b->stamps), 0) !=
      CUDA_SUCCESS)
    die("cuMemHostGetDevicePointer", SLC_EDRIVER, __LINE__);
  b->obs = xcalloc(n_stamps + 1, sizeof(uint64_t));
}

static void bctx_close(bctx *b) {
  CK(slc_stream_synchronize(b->s));
  slc_stream_unref(b->s);
  CK(slc_buffer_free(b->stamps));
  CK(slc_module_unload(b->m));
  CK(slc_context_destroy(b->c));
  free(b->obs);
}


/* Host clock minus device stamp (min over samples), as marker_bench.c. */
static void calibrate(void) {
  bctx b;
  unsigned n = opt.smoke ? 20 : 300;
  bctx_open(&b, MODE_SYNC, 1);
  volatile uint64_t *w = slc_buffer_host(b.stamps);
  int64_t *off = xcalloc(n, sizeof(int64_t));
  for (unsigned i = 0; i < n; i++) {
    __atomic_store_n(w, 0, __ATOMIC_RELAXED);
    launch(&b, 5000, b.stamps_d, (ldg_keep){NULL, NULL});
    uint64_t s;
    while ((s = __atomic_load_n(w, __ATOMIC_ACQUIRE)) == 0) {
    }
    off[i] = (int64_t)bench_now_ns() - (int64_t)s;
    CK(slc_stream_synchronize(b.s));
  }
  qsort(off, n, sizeof(int64_t), bench_cmp_i64);
  g_offset = off[0];
  printf("calibration: %u samples, median - min %" PRId64 " ns\n", n,
         off[n / 2] - off[0]);
  free(off);
  bctx_close(&b);
}

typedef struct result {
  double issue_p50, lat_p50, lat_p99, lat_p999;
  double cpu_per_op_ns, req_cpu_per_op_ns, kops;
  double idle_pct, waiting_pct;
  /* The engine's counters per operation (slc_engine_stats deltas), in the
   * latency scenario (lat_) and the rate scenario (rate_). */
  double lat_markers, lat_tails, lat_polls, lat_sleeps, lat_parks, lat_kicks;
  double rate_markers, rate_tails, rate_polls, rate_sleeps, rate_parks,
      rate_kicks;
  /* Streams that began batching (sl_engine.h, PACING): counts, not per op. */
  double lat_batches, rate_batches;
} result;

static void engine_counts(bctx *b, slc_engine_stats *st) {
  memset(st, 0, sizeof(*st));
  if (b->mode != MODE_SYNC) CK(slc_engine_stats_get(b->c, st));
}

/* (after - before) / n for each counter the tables show. */
static void engine_per_op(const slc_engine_stats *a, const slc_engine_stats *z,
                          unsigned n, double *markers, double *tails,
                          double *polls, double *sleeps, double *parks,
                          double *kicks, double *batches) {
  *markers = (double)(z->markers_placed - a->markers_placed) / n;
  *tails = (double)(z->tail_markers - a->tail_markers) / n;
  *polls = (double)(z->polls - a->polls) / n;
  *sleeps = (double)(z->thread_sleeps - a->thread_sleeps) / n;
  *parks = (double)(z->thread_parks - a->thread_parks) / n;
  *kicks = (double)(z->thread_wakes_by_issuers - a->thread_wakes_by_issuers) / n;
  *batches = (double)(z->batch_enters - a->batch_enters);
}

/* The latency scenarios' end: each keep's completion-to-keep latency into
 * lat[n] (the kernel's end stamp on the host clock), a failed run if a keep
 * ran early, then issue[] and lat[] sorted. */
static void keep_latencies(bctx *b, unsigned n, const char *who,
                           uint64_t *issue, uint64_t *lat) {
  const uint64_t *stamps = slc_buffer_host(b->stamps);
  for (unsigned i = 0; i < n; i++) {
    int64_t end = (int64_t)__atomic_load_n(&stamps[i], __ATOMIC_ACQUIRE) +
                  g_offset;
    int64_t d = (int64_t)b->obs[i] - end;
    lat[i] = d < 0 ? 0 : (uint64_t)d;
  }
  if (atomic_load(&b->early) != 0) {
    fprintf(stderr, "FAILED: %s: %ld keeps ran before their kernel ended\n",
            who, atomic_load(&b->early));
    _exit(1);
  }
  qsort(issue, n, sizeof(uint64_t), bench_cmp_u64);
  qsort(lat, n, sizeof(uint64_t), bench_cmp_u64);
}

static void scenario_latency(int mode, result *o) {
  unsigned n = opt.samples;
  bctx b;
  bctx_open(&b, mode, n);
  uint64_t *issue = xcalloc(n, sizeof(uint64_t));
  uint64_t *lat = xcalloc(n, sizeof(uint64_t));
  op_keep *ks = xcalloc(n, sizeof(op_keep));
  slc_engine_stats st0, st1;
  engine_counts(&b, &st0);
  for (unsigned i = 0; i < n; i++) {
    ks[i] = (op_keep){&b, i};
    issue[i] = launch(&b, (uint64_t)opt.kernel_us * 1000,
                      b.stamps_d + i * sizeof(uint64_t),
                      (ldg_keep){keep_note, &ks[i]});
    settle(&b, (long)i + 1);
  }
  engine_counts(&b, &st1);
  engine_per_op(&st0, &st1, n, &o->lat_markers, &o->lat_tails, &o->lat_polls,
                &o->lat_sleeps, &o->lat_parks, &o->lat_kicks, &o->lat_batches);
  keep_latencies(&b, n, mode_names[mode], issue, lat);
  o->issue_p50 = bench_pctl(issue, n, 0.5);
  o->lat_p50 = bench_pctl(lat, n, 0.5) / 1e3;
  o->lat_p99 = bench_pctl(lat, n, 0.99) / 1e3;
  o->lat_p999 = bench_pctl(lat, n, 0.999) / 1e3;
  free(issue);
  free(lat);
  free(ks);
  bctx_close(&b);
}

/* Each thread's CPU time, from /proc/self/task/TID/schedstat (its first
 * field: ns on a CPU), so that the rate scenario can say which thread the
 * process's CPU beyond the request thread's went to (the engine thread,
 * liburcu's call_rcu thread, the driver's). */
enum { MAX_THREADS = 64 };
typedef struct tsnap {
  int n;
  long tid[MAX_THREADS];
  uint64_t ns[MAX_THREADS];
  char name[MAX_THREADS][20];
} tsnap;

static void threads_snapshot(tsnap *t) {
  t->n = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return;
  struct dirent *de;
  while ((de = readdir(d)) != NULL && t->n < MAX_THREADS) {
    if (de->d_name[0] == '.') continue;
    char path[320];
    unsigned long long ns = 0;
    snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", de->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    int ok = fscanf(f, "%llu", &ns) == 1;
    fclose(f);
    if (!ok) continue;
    int i = t->n++;
    t->tid[i] = atol(de->d_name);
    t->ns[i] = ns;
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
    t->name[i][0] = 0;
    if ((f = fopen(path, "r")) != NULL) {
      if (fgets(t->name[i], sizeof(t->name[i]), f) != NULL)
        t->name[i][strcspn(t->name[i], "\n")] = 0;
      fclose(f);
    }
  }
  closedir(d);
}

/* Per thread, CPU ns per op between a and z (threads that ran > 1 ns/op). */
static void threads_print(const char *mode, const tsnap *a, const tsnap *z,
                          unsigned n) {
  long self = syscall(SYS_gettid);
  printf("threads (%s, rate scenario, CPU ns/op by schedstat):", mode);
  for (int i = 0; i < z->n; i++) {
    uint64_t before = 0;
    for (int j = 0; j < a->n; j++)
      if (a->tid[j] == z->tid[i]) before = a->ns[j];
    double per = (double)(z->ns[i] - before) / n;
    if (per < 1) continue;
    printf(" %s%s %.0f;", z->tid[i] == self ? "request/" : "", z->name[i],
           per);
  }
  printf("\n");
}

static void scenario_rate(int mode, result *o) {
  unsigned n = opt.rate_ops;
  bctx b;
  bctx_open(&b, mode, 1);
  uint64_t period = 1000000000ull / opt.rate;
  slc_engine_stats st0, st1;
  engine_counts(&b, &st0);
  tsnap ta, tz;
  threads_snapshot(&ta);
  uint64_t p0 = bench_process_cpu_ns(), r0 = bench_thread_cpu_ns(), t0 = bench_now_ns();
  for (unsigned i = 0; i < n; i++) {
    while (bench_now_ns() < t0 + i * period) {
    }
    launch(&b, 0, 0, (ldg_keep){keep_count, &b});
    if (mode == MODE_SYNC) {
      if ((i + 1) % opt.sync_every == 0) CK(slc_stream_synchronize(b.s));
    } else {
      while ((long)i + 1 - atomic_load(&b.kept) > 4096)
        if (mode == MODE_POLL) CK(slc_engine_poll(b.c, NULL));
      if (mode == MODE_POLL) CK(slc_engine_poll(b.c, NULL));
    }
  }
  settle(&b, n);
  uint64_t wall = bench_now_ns() - t0;
  o->cpu_per_op_ns = (double)(bench_process_cpu_ns() - p0) / n;
  o->req_cpu_per_op_ns = (double)(bench_thread_cpu_ns() - r0) / n;
  o->kops = n / ((double)wall / 1e9) / 1e3;
  threads_snapshot(&tz);
  threads_print(mode_names[mode], &ta, &tz, n);
  engine_counts(&b, &st1);
  engine_per_op(&st0, &st1, n, &o->rate_markers, &o->rate_tails,
                &o->rate_polls, &o->rate_sleeps, &o->rate_parks,
                &o->rate_kicks, &o->rate_batches);
  if (atomic_load(&b.kept) != (long)n) {
    fprintf(stderr, "engine_bench: %ld keeps of %u\n", atomic_load(&b.kept), n);
    _exit(1);
  }
  bctx_close(&b);
}

static void scenario_idle(int mode, result *o) {
  bctx b;
  bctx_open(&b, mode, 1);
  launch(&b, 0, 0, (ldg_keep){keep_count, &b});
  settle(&b, 1);
  struct timespec ts = {opt.idle_ms / 1000, (long)(opt.idle_ms % 1000) * 1000000};
  uint64_t p0 = bench_process_cpu_ns(), t0 = bench_now_ns();
  nanosleep(&ts, NULL);
  o->idle_pct = 100.0 * (double)(bench_process_cpu_ns() - p0) / (double)(bench_now_ns() - t0);
  p0 = bench_process_cpu_ns();
  t0 = bench_now_ns();
  launch(&b, (uint64_t)opt.idle_ms * 1000000, 0, (ldg_keep){keep_count, &b});
  if (mode == MODE_ENGINE) {
    /* The request thread sleeps; only the engine (and driver) run. */
    while (atomic_load_explicit(&b.kept, memory_order_acquire) < 2) {
      struct timespec s1 = {0, 1000000};
      nanosleep(&s1, NULL);
    }
  } else {
    settle(&b, 2);
  }
  o->waiting_pct =
      100.0 * (double)(bench_process_cpu_ns() - p0) / (double)(bench_now_ns() - t0);
  bctx_close(&b);
}


/* ---- Contention: what slows slc_launch while the engine thread runs ----
 * One context without an engine; slc_launch of a 1 us kernel, one at a time
 * (synchronised between launches, as the latency scenario's request thread
 * issues onto an idle stream), its issue cost p50/p99 while a second thread
 * does what the engine thread does, one thing at a time:
 *   alone       nothing
 *   queryP      cuEventQuery of a completed event of the same stream, then
 *               nanosleep P us (the engine polling a pending marker)
 *   recquery5   cuEventRecord on the same stream + cuEventQuery, every 5 us
 *               (the engine placing tail markers)
 *   load5       a plain load, then nanosleep 5 us (a poll with no driver
 *               call: what a write marker's poll costs)
 *   futex       the helper parked on a futex; the issuing thread wakes it
 *               after each launch, inside the timed section, as
 *               slc__engine_kick does when the engine thread is parked
 *   wake0       FUTEX_WAKE with nobody waiting (the syscall alone)
 *   sleep5      nanosleep 5 us in a loop, nothing else (a napping thread's
 *               wake-ups on another vCPU, with no driver call)
 *   spin        a plain load in a loop, never sleeping
 *   squery5     cuStreamQuery of the issuer's stream every 5 us (what the
 *               engine would cost probing a waiting issuer's stream instead
 *               of recording a marker: bench/RESULTS.md, issue 9, fifth
 *               round) */
enum { CT_ALONE, CT_Q5, CT_Q20, CT_Q50, CT_RQ5, CT_LOAD5, CT_FUTEX, CT_WAKE0,
       CT_SLEEP5, CT_SPIN, CT_SQ5, N_CT };
static const char *const ct_names[] = {"alone",     "query5", "query20",
                                       "query50",   "recquery5", "load5",
                                       "futex",     "wake0",  "sleep5",
                                       "spin",      "squery5"};

typedef struct ct_helper {
  int kind;
  bctx *b;
  CUevent ev;
  atomic_int stop;
  atomic_uint word; /* futex */
  atomic_ulong loads;
} ct_helper;

static long ct_futex(atomic_uint *w, int op, unsigned v) {
  return syscall(SYS_futex, (unsigned *)w, op, v, NULL, NULL, 0);
}

static void *ct_main(void *arg) {
  ct_helper *h = arg;
  const slc_driver *d = slc_context_driver(h->b->c);
  CK(slc_device_make_current(h->b->c, 0));
  /* As the engine thread: sleep as long as asked. */
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  unsigned us = h->kind == CT_Q20 ? 20 : h->kind == CT_Q50 ? 50 : 5;
  struct timespec ts = {0, (long)us * 1000};
  while (!atomic_load_explicit(&h->stop, memory_order_acquire)) {
    switch (h->kind) {
    case CT_Q5:
    case CT_Q20:
    case CT_Q50:
      (void)d->pfn_cuEventQuery(h->ev);
      nanosleep(&ts, NULL);
      break;
    case CT_RQ5:
      (void)d->pfn_cuEventRecord(h->ev, slc_stream_handle(h->b->s));
      (void)d->pfn_cuEventQuery(h->ev);
      nanosleep(&ts, NULL);
      break;
    case CT_LOAD5:
      atomic_fetch_add_explicit(&h->loads,
                                __atomic_load_n((uint64_t *)slc_buffer_host(
                                                    h->b->stamps),
                                                __ATOMIC_ACQUIRE) != 0,
                                memory_order_relaxed);
      nanosleep(&ts, NULL);
      break;
    case CT_SLEEP5:
      nanosleep(&ts, NULL);
      break;
    case CT_SQ5:
      (void)d->pfn_cuStreamQuery(slc_stream_handle(h->b->s));
      nanosleep(&ts, NULL);
      break;
    case CT_SPIN:
      atomic_fetch_add_explicit(&h->loads, 1, memory_order_relaxed);
      break;
    case CT_FUTEX: {
      unsigned g = atomic_load_explicit(&h->word, memory_order_acquire);
      if (!atomic_load_explicit(&h->stop, memory_order_acquire))
        ct_futex(&h->word, FUTEX_WAIT_PRIVATE, g);
      break;
    }
    default:
      return NULL;
    }
  }
  return NULL;
}

static void scenario_contention(void) {
  unsigned n = opt.smoke ? 50 : 2000;
  bctx b;
  bctx_open(&b, MODE_SYNC, 1);
  const slc_driver *d = slc_context_driver(b.c);
  uint64_t *t = xcalloc(n, sizeof(uint64_t));
  printf("contention: slc_launch issue ns (p50 / p99) of a 1 us kernel, one "
         "at a time, %u samples, while a second thread ...\n", n);
  for (int k = 0; k < N_CT; k++) {
    ct_helper h;
    memset(&h, 0, sizeof(h));
    h.kind = k;
    h.b = &b;
    CK(slc_device_make_current(b.c, 0));
    if (d->pfn_cuEventCreate(&h.ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
        d->pfn_cuEventRecord(h.ev, slc_stream_handle(b.s)) != CUDA_SUCCESS)
      die("cuEventCreate/Record", SLC_EDRIVER, __LINE__);
    CK(slc_stream_synchronize(b.s));
    pthread_t th;
    bool has = k != CT_ALONE && k != CT_WAKE0;
    if (has && pthread_create(&th, NULL, ct_main, &h) != 0)
      die("pthread_create", LDG_ENOMEM, __LINE__);
    struct timespec warm = {0, 2000000};
    nanosleep(&warm, NULL);
    for (unsigned i = 0; i < n; i++) {
      uint64_t ns = 1000;
      CUdeviceptr out = 0;
      void *params[] = {&ns, &out};
      slc_hold hold = {{NULL, NULL}, NULL, 0, NULL, 0};
      slc_dim3 one = {1, 1, 1};
      uint64_t t0 = bench_now_ns();
      CK(slc_launch(b.s, b.f, one, one, 0, params, &hold));
      if (k == CT_FUTEX || k == CT_WAKE0) {
        atomic_fetch_add_explicit(&h.word, 1, memory_order_acq_rel);
        ct_futex(&h.word, FUTEX_WAKE_PRIVATE, 1);
      }
      t[i] = bench_now_ns() - t0;
      CK(slc_stream_synchronize(b.s));
      /* As the latency scenario: the next issue comes a while later. */
      uint64_t until = bench_now_ns() + 10000;
      while (bench_now_ns() < until) {
      }
    }
    atomic_store_explicit(&h.stop, 1, memory_order_release);
    if (has) {
      atomic_fetch_add_explicit(&h.word, 1, memory_order_acq_rel);
      ct_futex(&h.word, FUTEX_WAKE_PRIVATE, 1);
      pthread_join(th, NULL);
    }
    CK(slc_device_make_current(b.c, 0));
    (void)d->pfn_cuEventDestroy(h.ev);
    qsort(t, n, sizeof(uint64_t), bench_cmp_u64);
    printf("  %-10s %7.0f / %7.0f\n", ct_names[k], bench_pctl(t, n, 0.5),
           bench_pctl(t, n, 0.99));
    fflush(stdout);
  }
  free(t);
  bctx_close(&b);
}

/* ---- Remote: the latency scenario, released by another thread -----------
 * No engine: a second thread synchronises the stream after each launch (so
 * the keep, and the ledger's release, run on that thread, as on the engine
 * thread), while the request thread spins until its keep ran, as in engine
 * mode, then issues the next. No marker, no event, no driver call of the
 * second thread but cuStreamSynchronize. If slc_launch costs here what it
 * costs beside the engine, that cost is the release running on another
 * thread, not the marker. Issue p50 and completion-to-keep p50 / p99. */
typedef struct rs_helper {
  bctx *b;
  atomic_long launched;
  atomic_int stop;
} rs_helper;

static void *rs_main(void *arg) {
  rs_helper *h = arg;
  long done = 0;
  while (!atomic_load_explicit(&h->stop, memory_order_acquire)) {
    long l = atomic_load_explicit(&h->launched, memory_order_acquire);
    if (l > done) {
      CK(slc_stream_synchronize(h->b->s));
      done = l;
    }
  }
  return NULL;
}

static void scenario_remote(void) {
  unsigned n = opt.samples;
  bctx b;
  bctx_open(&b, MODE_SYNC, n);
  b.mode = MODE_ENGINE; /* settle: spin on kept */
  uint64_t *issue = xcalloc(n, sizeof(uint64_t));
  uint64_t *lat = xcalloc(n, sizeof(uint64_t));
  op_keep *ks = xcalloc(n, sizeof(op_keep));
  rs_helper h = {.b = &b};
  pthread_t th;
  if (pthread_create(&th, NULL, rs_main, &h) != 0)
    die("pthread_create", LDG_ENOMEM, __LINE__);
  for (unsigned i = 0; i < n; i++) {
    ks[i] = (op_keep){&b, i};
    issue[i] = launch(&b, (uint64_t)opt.kernel_us * 1000,
                      b.stamps_d + i * sizeof(uint64_t),
                      (ldg_keep){keep_note, &ks[i]});
    atomic_store_explicit(&h.launched, (long)i + 1, memory_order_release);
    settle(&b, (long)i + 1);
  }
  atomic_store_explicit(&h.stop, 1, memory_order_release);
  pthread_join(th, NULL);
  keep_latencies(&b, n, "remote", issue, lat);
  printf("remote: issue p50 %.0f ns; lat p50 %.2f us, p99 %.2f us (the "
         "latency scenario, synchronised by a second thread: keeps run "
         "there)\n",
         bench_pctl(issue, n, 0.5), bench_pctl(lat, n, 0.5) / 1e3,
         bench_pctl(lat, n, 0.99) / 1e3);
  fflush(stdout);
  free(issue);
  free(lat);
  free(ks);
  b.mode = MODE_SYNC;
  bctx_close(&b);
}

static int usage(void) {
  fprintf(stderr,
          "usage: engine_bench [--driver=libcuda|host] [--libcuda PATH]\n"
          "  [--require-gpu] [--smoke] [--json FILE] [--samples N]\n"
          "  [--kernel-us US] [--rate OPS_PER_S] [--rate-ops N] [--idle-ms MS]\n"
          "  [--sync-every N] [--poll-us US] [--every-ops N]\n"
          "  [--modes sync,engine,poll] [--contention] [--remote]\n"
          "  [--wait adaptive|fixed] [--placement issuer|engine]\n"
          "  [--every-us US] [--poll-max-us US]\n"
          "  [--linger-us US]   (engine options; 0 or absent: the defaults)\n");
  return 2;
}


int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    const char *eq = strchr(a, '=');
    char key[64];
    if (eq != NULL && (size_t)(eq - a) < sizeof(key)) {
      memcpy(key, a, (size_t)(eq - a));
      key[eq - a] = 0;
      v = eq + 1;
      a = key;
    }
#define VAL() (v != NULL ? v : (i + 1 < argc ? argv[++i] : NULL))
    if (strcmp(a, "--driver") == 0) {
      const char *d = VAL();
      if (d == NULL) return usage();
      if (strcmp(d, "host") == 0) opt.host = true;
      else if (strcmp(d, "libcuda") == 0) opt.host = false;
      else return usage();
    } else if (strcmp(a, "--libcuda") == 0) {
      if ((opt.libcuda = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--json") == 0) {
      if ((opt.json = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--modes") == 0) {
      if ((opt.modes = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--placement") == 0) {
      const char *w = VAL();
      if (w == NULL) return usage();
      if (strcmp(w, "issuer") == 0) opt.placement = SLC_ENGINE_PLACE_ISSUER;
      else if (strcmp(w, "engine") == 0) opt.placement = SLC_ENGINE_PLACE_ENGINE;
      else return usage();
    } else if (strcmp(a, "--wait") == 0) {
      const char *w = VAL();
      if (w == NULL) return usage();
      if (strcmp(w, "adaptive") == 0) opt.wait = SLC_ENGINE_WAIT_ADAPTIVE;
      else if (strcmp(w, "fixed") == 0) opt.wait = SLC_ENGINE_WAIT_FIXED;
      else return usage();
    } else if (strcmp(a, "--contention") == 0) {
      opt.contention = true;
    } else if (strcmp(a, "--remote") == 0) {
      opt.remote = true;

    } else if (strcmp(a, "--require-gpu") == 0) {
      opt.require_gpu = true;
    } else if (strcmp(a, "--smoke") == 0) {
      opt.smoke = true;
      opt.samples = 30;
      opt.rate_ops = 300;
      opt.rate = 20000;
      opt.idle_ms = 5;
    } else {
      unsigned *dst = strcmp(a, "--samples") == 0      ? &opt.samples
                      : strcmp(a, "--kernel-us") == 0  ? &opt.kernel_us
                      : strcmp(a, "--rate") == 0       ? &opt.rate
                      : strcmp(a, "--rate-ops") == 0   ? &opt.rate_ops
                      : strcmp(a, "--idle-ms") == 0    ? &opt.idle_ms
                      : strcmp(a, "--sync-every") == 0 ? &opt.sync_every
                      : strcmp(a, "--poll-us") == 0    ? &opt.poll_us
                      : strcmp(a, "--every-ops") == 0  ? &opt.every_ops
                      : strcmp(a, "--every-us") == 0   ? &opt.every_us
                      : strcmp(a, "--poll-max-us") == 0 ? &opt.poll_max_us
                      : strcmp(a, "--linger-us") == 0  ? &opt.linger_us
                                                       : NULL;
      const char *s = dst != NULL ? VAL() : NULL;
      if (s == NULL || !bench_parse_uint(s, dst)) return usage();
    }
#undef VAL
  }
  if (opt.host) {
    hd_config cfg = {1, 0};
    if (hd_install(&drv, &cfg) != 0) return 1;
    bench_stamp_register_host();
  } else if (slc_driver_load(&drv, opt.libcuda) != 0) {
    printf("SKIPPED: no CUDA driver (%s)\n", drv.load_error);
    return opt.require_gpu ? 1 : 0;
  }
  {
    slc_context *probe;
    int rc = slc_context_create(&drv, &probe);
    if (rc != LDG_OK) {
      printf("SKIPPED: no usable CUDA device (%s)\n", slc_last_error_message());
      return opt.require_gpu ? 1 : 0;
    }
    char name[256] = "?";
    (void)slc_device_name(probe, 0, name, sizeof(name));
    printf("device: %s, %s\n", name, drv.origin);
    CK(slc_context_destroy(probe));
  }
  calibrate();
  if (opt.contention) scenario_contention();
  if (opt.remote) scenario_remote();
  printf("kernel %u us, %u samples; rate %u ops at %u/s (sync every %u); "
         "engine: wait %s, markers placed by the %s, poll %u us (max %u), "
         "linger %u us, a marker every "
         "%u ops or %u us (0: default); idle %u ms\n",
         opt.kernel_us, opt.samples, opt.rate_ops, opt.rate, opt.sync_every,
         opt.wait == SLC_ENGINE_WAIT_FIXED ? "fixed" : "adaptive",
         opt.placement == SLC_ENGINE_PLACE_ENGINE ? "engine thread" : "issuer",
         opt.poll_us,
         opt.poll_max_us, opt.linger_us, opt.every_ops, opt.every_us,
         opt.idle_ms);
  printf("%-7s | %9s | %8s %8s %8s | %9s %9s %7s | %7s %7s\n", "mode",
         "issue", "lat p50", "p99", "p99.9", "cpu/op", "req cpu", "kops/s",
         "idle%", "wait%");
  printf("%-7s | %9s | %8s %8s %8s | %9s %9s %7s | %7s %7s\n", "", "ns p50",
         "us", "us", "us", "ns", "ns/op", "", "cpu", "cpu");
  result res[N_MODES];
  memset(res, 0, sizeof(res));
  bool run_mode[N_MODES];
  for (int m = 0; m < N_MODES; m++)
    run_mode[m] = opt.modes == NULL || strstr(opt.modes, mode_names[m]) != NULL;
  for (int m = 0; m < N_MODES; m++) {
    result *o = &res[m];
    if (!run_mode[m]) continue;
    scenario_latency(m, o);
    scenario_rate(m, o);
    scenario_idle(m, o);
    printf("%-7s | %9.0f | %8.2f %8.2f %8.2f | %9.0f %9.0f %7.1f | %7.2f "
           "%7.2f\n",
           mode_names[m], o->issue_p50, o->lat_p50, o->lat_p99, o->lat_p999,
           o->cpu_per_op_ns, o->req_cpu_per_op_ns, o->kops, o->idle_pct,
           o->waiting_pct);
    fflush(stdout);
  }
  /* (Wake-ups = sleeps + parks: each ends in one. "batches": streams that
   * began batching in the scenario, a count. Columns after kicks are new
   * since 7856fa6; scripts read the first six of each side by position.) */
  printf("engine, per operation | latency scenario: markers tails polls "
         "sleeps parks kicks | rate scenario: markers tails polls sleeps "
         "parks kicks | wake-ups lat rate | batches lat rate\n");
  for (int m = MODE_ENGINE; m < N_MODES; m++) {
    const result *o = &res[m];
    if (!run_mode[m]) continue;
    printf("%-7s | %5.2f %5.2f %5.2f %5.2f %5.2f %5.2f | %5.2f %5.2f %5.2f "
           "%5.2f %5.2f %5.2f | %5.2f %5.2f | %3.0f %3.0f\n",
           mode_names[m], o->lat_markers, o->lat_tails, o->lat_polls,
           o->lat_sleeps, o->lat_parks, o->lat_kicks, o->rate_markers,
           o->rate_tails, o->rate_polls, o->rate_sleeps, o->rate_parks,
           o->rate_kicks, o->lat_sleeps + o->lat_parks,
           o->rate_sleeps + o->rate_parks, o->lat_batches, o->rate_batches);
  }
  if (opt.json != NULL) {
    FILE *f = fopen(opt.json, "w");
    if (f == NULL) return 1;
    fprintf(f, "{\"kernel_us\": %u, \"samples\": %u, \"rate\": %u, "
            "\"rate_ops\": %u, \"sync_every\": %u, \"poll_us\": %u, "
            "\"every_ops\": %u, \"placement\": \"%s\", \"rows\": [\n",
            opt.kernel_us, opt.samples, opt.rate, opt.rate_ops, opt.sync_every,
            opt.poll_us, opt.every_ops,
            opt.placement == SLC_ENGINE_PLACE_ENGINE ? "engine" : "issuer");
    for (int m = 0; m < N_MODES; m++) {
      const result *o = &res[m];
      fprintf(f,
              "  {\"mode\": \"%s\", \"issue_ns_p50\": %.0f, \"lat_us_p50\": "
              "%.3f, \"lat_us_p99\": %.3f, \"lat_us_p999\": %.3f, "
              "\"cpu_ns_per_op\": %.1f, \"request_cpu_ns_per_op\": %.1f, "
              "\"kops\": %.2f, \"idle_cpu_pct\": %.3f, "
              "\"waiting_cpu_pct\": %.3f, \"rate_markers_per_op\": %.3f, "
              "\"rate_tails_per_op\": %.3f, \"rate_polls_per_op\": %.3f, "
              "\"rate_sleeps_per_op\": %.3f, \"rate_parks_per_op\": %.3f, "
              "\"rate_kicks_per_op\": %.3f, \"lat_kicks_per_op\": %.3f, "
              "\"lat_markers_per_op\": %.3f, \"lat_polls_per_op\": %.3f, "
              "\"lat_wakeups_per_op\": %.3f, \"rate_wakeups_per_op\": "
              "%.3f, \"lat_batches\": %.0f, \"rate_batches\": %.0f, "
              "\"ran\": %s}%s\n",
              mode_names[m], o->issue_p50, o->lat_p50, o->lat_p99,
              o->lat_p999, o->cpu_per_op_ns, o->req_cpu_per_op_ns, o->kops,
              o->idle_pct, o->waiting_pct, o->rate_markers, o->rate_tails,
              o->rate_polls, o->rate_sleeps, o->rate_parks, o->rate_kicks,
              o->lat_kicks, o->lat_markers, o->lat_polls,
              o->lat_sleeps + o->lat_parks, o->rate_sleeps + o->rate_parks,
              o->lat_batches, o->rate_batches,
              run_mode[m] ? "true" : "false",
              m + 1 < N_MODES ? "," : "");
    }
    fprintf(f, "]}\n");
    fclose(f);
  }
  if (opt.host) {
    long leaked = hd_shutdown();
    if (leaked != 0) {
      fprintf(stderr, "FAILED: %ld executor objects leaked\n", leaked);
      return 1;
    }
  }
  printf("every keep ran, none before its kernel ended\n");
  return 0;
}
