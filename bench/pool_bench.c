/*
 * pool_bench: the stream-ordered pool (pool/sl_pool.h) against the CUDA
 * stream-ordered allocator (cuMemAllocAsync / cuMemFreeAsync), side by side
 * in one run (issue 10). PyTorch's caching allocator runs the same two
 * workloads in bench/pool_torch.cpp; bench/pool_h200.sh runs all three.
 *
 * 1. OVERHEAD (CPU side): 4 KiB blocks, T request threads each with two
 *    streams, a closed loop for --ms per cell:
 *      pool_af   slp_alloc(s1) + slp_free
 *      pool_2s   slp_alloc(s1), slp_record_use(s2) (the use on the second
 *                stream: recorded, held until s2 is known past it), slp_free
 *      async_af  cuMemAllocAsync(s1) + cuMemFreeAsync(s1)
 *      async_2s  cuMemAllocAsync(s1), the use on s2 made safe by an event
 *                each way (record s1, s2 waits; record s2, s1 waits),
 *                cuMemFreeAsync(s1)
 *    Reported: M iterations/s over all threads, process CPU ns per
 *    iteration (engine thread and driver threads included).
 * 2. SERVING: T request threads, one stream each; a request takes a pinned
 *    staging block and a device block (--bytes), fills the staging block,
 *    copies it in, runs add1, copies it back, and frees both at once (no
 *    synchronise on the request thread); the result is checked when the
 *    copy back completed (pool: the copy's keep, wherever the ledger
 *    releases it; async: a cuLaunchHostFunc after it). At most --inflight
 *    requests per thread are outstanding (a thread waits, without
 *    synchronising, for its oldest to be checked: the pool's loop meanwhile
 *    releases its own stream with slc_engine_poll_stream, so its checks run
 *    on it, or with --wait yield only yields to the engine thread, as the
 *    first version did). A "diag" line after each pool row says where the
 *    time went (engine counters per iteration, slabs, checks run on their
 *    request thread, slow slp_alloc pairs, time waiting for a slot).
 *      pool      device and pinned blocks from the pool
 *      async     device memory from cuMemAllocAsync; pinned staging from a
 *                fixed ring of --inflight cuMemHostAlloc buffers per thread
 *                (cuMemAllocAsync has no pinned host memory)
 *    Reported: requests/s, process CPU us per request, the request threads'
 *    own CPU us per request, p50/p99 latency (issue to result checked), and
 *    peak memory: reserved and in use, device + pinned (async: the driver
 *    pool's RESERVED_MEM_HIGH / USED_MEM_HIGH plus the pinned ring).
 * 3. SEVERAL GPUS (--devices LIST, e.g. 1,2,4,8; issue 13): the serving
 *    cells only, at each GPU count g of LIST, with --threads request
 *    threads PER GPU (T x g in all), one device pool and one pinned pool
 *    per GPU, one context and its engine threads (one per GPU: the
 *    engine is per device; --engine-threads one: one for all, as before
 *    issue 13's per-device engines, for a side-by-side). Thread
 *    placement: grouped (default: thread i serves GPU i % g, on a stream of
 *    that GPU) or --spread (every thread has a stream on each of the g GPUs
 *    and sends its requests to them in turn; its wait polls all of them).
 *    Rows "multigpu MODE g T grouped|spread": requests/s, host CPU us per
 *    request (process) and the request threads', p50/p99, peak memory
 *    summed over the GPUs, and "sl us": streamledger's own CPU per request
 *    (ledger, layer, pool, engine): the CPU time of the request threads and
 *    of the other threads that ran the pool's keeps (the engine's), less
 *    their time inside the driver's hot entries and the benchmark's own
 *    work (filling and checking data, waiting for a free request slot
 *    outside the pool's polls), bench/drvtime.h; "sl %" is its share of the
 *    process's CPU per request. For the async rows the same sum over the
 *    request threads is the measurement's control (no ledger: what is left
 *    is the loop itself).
 * A wrong result fails the run (exit 1).
 *
 * --pin: request thread i of each cell on CPU i (of those the process may
 * use, in order; modulo their number), and the process's other threads
 * (main, the engine's, the driver's: created by the main thread after it
 * is placed) on the CPUs that no request thread of the largest --threads
 * uses, if any (else unpinned). pool_torch --pin places its threads the
 * same way. For the H200's question whether the 2x spread of the 1-thread
 * rows between rounds is placement (bench/pool8_h200.sh).
 * --placement issuer: the issuing calls record the markers (the engine's
 * default before issue 9's pacing; rows marked /pi).
 * --count-driver adds a "drvcalls" line after each row: cuEventRecord,
 * cuEventQuery, cuCtxGetCurrent/SetCurrent, cuStreamWaitEvent, the async
 * allocator's calls and cuStreamQuery (squery) per iteration, on the
 * request threads and on the others (the engine thread).
 * DRIVERS: --driver=libcuda (default; no library or device: "SKIPPED", exit
 * 0 unless --require-gpu) or --driver=host (the host executor: every path
 * runs, times mean nothing). --smoke: tiny, for CI.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench/drvtime.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "pool/sl_pool.h"
#include "cuda/host_executor.h"
#include "tests/cuda/kernels.h"
#include "bench/clock.h"

#define MAX_THREADS 128
#define MAX_GPUS 16

static struct {
  bool host, require_gpu, smoke;
  const char *libcuda, *json;
  unsigned threads[16], n_threads;
  unsigned ms, bytes, inflight, every_ops, every_us;
  bool wait_yield; /* serving pool: wait for a slot by yielding only */
  bool place_issuer; /* --placement issuer: SLC_ENGINE_PLACE_ISSUER */
  unsigned iters; /* overhead: a fixed count per thread instead of --ms */
  /* overhead, for counting under callgrind: no engine thread, and each
   * request thread synchronises s2 every N iterations, so every keep of
   * pool_2s runs on it at a known point (the H200's steady state: ~95 %
   * of the keeps on the request thread, its own poll every 32 held
   * frees); instructions and locked RMWs per iteration are then exact
   * (bench/RESULTS.md, issue 10, fifth session). 0: off. */
  unsigned sync_every;
  /* overhead, for counting the own poll's share: no engine thread, and
   * each request thread drains s2 with the raw driver's
   * cuStreamSynchronize every N iterations (the GPU finished the work;
   * nothing is released), so the thread's own polls (slp__poll_own) find
   * their tail markers done and run the keeps, as on the H200 (~97 % of
   * pool_2s's frees recycled on the request thread at 1 thread), at
   * points that do not depend on valgrind's scheduling (bench/RESULTS.md,
   * issue 10, sixth session). 0: off. */
  unsigned drain_every;
  /* --pin: request thread i of a cell on CPU i (of the CPUs the process
   * may use, in order, modulo their number); the main thread, and so the
   * threads it creates later (the engine's, the driver's), on the CPUs no
   * request thread of the largest --threads uses, if there are any. */
  bool pin;
  /* serving pool: poll the thread's own streams every N requests, so the
   * keeps (the checks) of its completed requests run on it (rows /oN) */
  unsigned own_poll;
  const char *only; /* "overhead", "serving", one mode or NULL: all */
  unsigned gpus[MAX_GPUS], n_gpus; /* --devices: the multi-GPU cells */
  bool spread;
  bool one_engine_thread; /* --engine-threads one */
  bool count_driver; /* --count-driver: driver calls per iteration */
} opt = {.ms = 300, .bytes = 65536, .inflight = 32};

static slc_driver drv;
static slc_context *ctx;
static CUfunction add1, add1_of[MAX_GPUS]; /* add1 = add1_of[0] */
static atomic_long wrong;

#define CK(call)                                                          \
  do {                                                                    \
    int rc_ = (call);                                                     \
    if (rc_ != LDG_OK) {                                                  \
      fprintf(stderr, "FAILED %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
              slc_last_error_message());                                  \
      exit(1);                                                            \
    }                                                                     \
  } while (0)
#define CU(call)                                                           \
  do {                                                                     \
    CUresult r_ = (call);                                                  \
    if (r_ != CUDA_SUCCESS) {                                              \
      fprintf(stderr, "FAILED %s:%d: %s: CUresult %d\n", __FILE__, __LINE__, \
              #call, (int)r_);                                             \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ---- Shared per-cell state ------------------------------------------------ */

typedef struct cell {
  const char *mode;
  unsigned threads;
  slp_pool *dev, *host;
  CUmemoryPool mempool;
  pthread_barrier_t start;
  uint64_t deadline;
  /* results */
  atomic_ullong iters;
  atomic_ullong req_cpu_ns;
  uint64_t *lat; /* per request, all threads */
  atomic_ullong n_lat;
  size_t lat_cap;
  atomic_ullong pinned_bytes; /* async: the staging rings */
  /* Diagnostics of the serving loop (printed as a "diag" line): checks run
   * on their request thread, slp_alloc pairs over 100 us and the longest,
   * time spent waiting for a slot. */
  atomic_ullong own_checks, slow_allocs, max_alloc_ns, wait_ns;
  /* The request thread's fill of its staging block, by who checked that
   * block's previous request (LAST_*): the check reads the 64 KiB, so its
   * lines sit in the checking core's cache when the owner writes them next
   * (bench/RESULTS.md, issue 10, "The serving regression at 1 thread"). */
  atomic_ullong fill_ns[3], fill_n[3];
  /* Blocks the pools recycled on a request thread (on_recycle, counted per
   * thread, summed at its end), against frees: the rest were returned by
   * the engine thread. Not counted in pool_af (no callback there). */
  atomic_ullong req_recycles;
  /* Several GPUs (--devices): gpus >= 1, per-GPU pools (dev = mdev[0]). */
  unsigned gpus;
  slp_pool *mdev[MAX_GPUS], *mhost[MAX_GPUS];
  CUmemoryPool mmempool[MAX_GPUS];
  atomic_ullong sl_ns; /* request threads: cpu - driver - bench */
  atomic_ullong req_drv_ns, req_bench_ns; /* request threads (--devices) */
} cell;

static _Thread_local bool tl_request;       /* a request thread */
static _Thread_local uint64_t tl_recycles;  /* its recycles */

static void count_recycle(void *arg, uintptr_t addr, size_t cap) {
  (void)arg;
  (void)addr;
  (void)cap;
  if (tl_request) tl_recycles++;
}

typedef struct worker {
  cell *c;
  int id;
  pthread_t th;
} worker;

/* --pin (opt.pin): the CPUs the process may use at start, in order. */
static int pin_cpu[CPU_SETSIZE], pin_n;

static void pin_to(const cpu_set_t *set, const char *who) {
  int e = pthread_setaffinity_np(pthread_self(), sizeof(*set), set);
  if (e != 0) {
    fprintf(stderr, "FAILED: --pin: pthread_setaffinity_np (%s): %s\n", who,
            strerror(e));
    exit(1);
  }
}

/* Before the driver and the engine start: the calling (main) thread on the
 * CPUs that no request thread of `most` uses, if there are any; the
 * threads created later inherit that. Prints the placement. */
static void pin_init(unsigned most) {
  cpu_set_t all;
  CPU_ZERO(&all);
  if (sched_getaffinity(0, sizeof(all), &all) != 0) {
    perror("FAILED: --pin: sched_getaffinity");
    exit(1);
  }
  for (int k = 0; k < CPU_SETSIZE; k++)
    if (CPU_ISSET(k, &all)) pin_cpu[pin_n++] = k;
  if (most < (unsigned)pin_n) {
    cpu_set_t rest;
    CPU_ZERO(&rest);
    for (int i = (int)most; i < pin_n; i++) CPU_SET(pin_cpu[i], &rest);
    pin_to(&rest, "main");
    printf("pinned: request thread i on CPU %d + i; the other threads on "
           "CPUs %d-%d\n", pin_cpu[0], pin_cpu[most], pin_cpu[pin_n - 1]);
  } else {
    printf("pinned: request thread i on the i-th of %d CPUs (mod %d); the "
           "other threads unpinned\n", pin_n, pin_n);
  }
}

/* A request thread, first thing: onto its CPU (no-op without --pin). */
static void pin_request(int id) {
  if (!opt.pin) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(pin_cpu[id % pin_n], &one);
  pin_to(&one, "request thread");
}

/* ---- --count-driver: driver calls per iteration --------------------------
 * The entries the overhead cells reach (markers: cuEventRecord, queries:
 * cuEventQuery, the make-current pair, cuStreamWaitEvent, the async
 * allocator) are wrapped to count calls, on request threads and on the
 * others (the engine thread) apart. Each thread counts in its own slot
 * (a load and a store on its own line: no shared line, no locked op), the
 * diag line prints the sums per iteration. Off by default: the rows of a
 * counted run pay one thread-local lookup per driver call. */
enum { DC_RECORD, DC_QUERY, DC_GETCUR, DC_SETCUR, DC_WAIT, DC_ALLOC, DC_FREE,
       DC_SQUERY, DC_N };
#define DC_SLOTS 256
typedef struct dc_slot {
  _Alignas(64) atomic_ullong n[2][DC_N]; /* [on a request thread][call] */
} dc_slot;
static dc_slot dc_slots[DC_SLOTS];
static atomic_uint dc_next;
static _Thread_local dc_slot *dc_mine;

static void dc_count(int k) {
  if (dc_mine == NULL) {
    unsigned i = atomic_fetch_add_explicit(&dc_next, 1, memory_order_relaxed);
    dc_mine = &dc_slots[i < DC_SLOTS ? i : DC_SLOTS - 1];
  }
  atomic_ullong *c = &dc_mine->n[tl_request][k];
  if (dc_mine == &dc_slots[DC_SLOTS - 1]) /* shared by the overflow */
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
  else
    atomic_store_explicit(
        c, atomic_load_explicit(c, memory_order_relaxed) + 1,
        memory_order_relaxed);
}

/* sums[r][k] over every slot. */
static void dc_read(unsigned long long sums[2][DC_N]) {
  memset(sums, 0, 2 * DC_N * sizeof(unsigned long long));
  for (unsigned i = 0; i < DC_SLOTS; i++)
    for (int r = 0; r < 2; r++)
      for (int k = 0; k < DC_N; k++)
        sums[r][k] +=
            atomic_load_explicit(&dc_slots[i].n[r][k], memory_order_relaxed);
}

#define DC_WRAP(name, k, params, args)                  \
  static CUresult(CUDAAPI *dc_orig_##name) params;       \
  static CUresult CUDAAPI dc_##name params {            \
    dc_count(k);                                         \
    return dc_orig_##name args;                          \
  }
DC_WRAP(cuEventRecord, DC_RECORD, (CUevent e, CUstream s), (e, s))
DC_WRAP(cuEventQuery, DC_QUERY, (CUevent e), (e))
DC_WRAP(cuCtxGetCurrent, DC_GETCUR, (CUcontext * pctx), (pctx))
DC_WRAP(cuCtxSetCurrent, DC_SETCUR, (CUcontext ctx), (ctx))
DC_WRAP(cuStreamWaitEvent, DC_WAIT, (CUstream s, CUevent e, unsigned int f),
        (s, e, f))
DC_WRAP(cuMemAllocAsync, DC_ALLOC, (CUdeviceptr * p, size_t n, CUstream s),
        (p, n, s))
DC_WRAP(cuMemFreeAsync, DC_FREE, (CUdeviceptr p, CUstream s), (p, s))
DC_WRAP(cuStreamQuery, DC_SQUERY, (CUstream s), (s))

/* Before the context copies the table. */
static void dc_wrap(slc_driver *d) {
#define DC_SET(name)               \
  dc_orig_##name = d->pfn_##name;  \
  d->pfn_##name = dc_##name;
  DC_SET(cuEventRecord)
  DC_SET(cuEventQuery)
  DC_SET(cuStreamQuery)
  DC_SET(cuCtxGetCurrent)
  DC_SET(cuCtxSetCurrent)
  DC_SET(cuStreamWaitEvent)
  DC_SET(cuMemAllocAsync)
  DC_SET(cuMemFreeAsync)
#undef DC_SET
}

/* ---- 1. Overhead ------------------------------------------------------------ */

static void *overhead_thread(void *arg) {
  worker *w = arg;
  cell *c = w->c;
  const slc_driver *d = slc_context_driver(ctx);
  slc_stream *s1, *s2;
  CK(slc_stream_create(ctx, 0, SLC_STREAM_NONBLOCKING, &s1));
  CK(slc_stream_create(ctx, 0, SLC_STREAM_NONBLOCKING, &s2));
  CK(slc_device_make_current(ctx, 0));
  CUstream c1 = slc_stream_handle(s1), c2 = slc_stream_handle(s2);
  CUevent e1, e2;
  CU(d->pfn_cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
  CU(d->pfn_cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  bool pool = c->mode[0] == 'p', two = strstr(c->mode, "2s") != NULL;
  tl_request = true;
  /* After its streams exist: threads the driver creates for them (the
   * host executor's) stay off its CPU. */
  pin_request(w->id);
  pthread_barrier_wait(&c->start);
  uint64_t n = 0, cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  /* At least 64 iterations: a thread that reached the barrier late on a
   * loaded machine (CI) still reports the cell (the smoke test wants its
   * diag line, printed only for cells that ran). */
  while (opt.iters != 0 ? n < opt.iters
                        : n < 64 || (n & 63) != 0 || bench_mono_ns() < c->deadline) {
    if (pool) {
      slp_block *b;
      CK(slp_alloc(c->dev, s1, 4096, &b));
      if (two) CK(slp_record_use(s2, &b, 1, NULL));
      CK(slp_free(b));
      if (opt.sync_every != 0 && (n + 1) % opt.sync_every == 0)
        CK(slc_stream_synchronize(s2));
      if (opt.drain_every != 0 && (n + 1) % opt.drain_every == 0)
        CU(d->pfn_cuStreamSynchronize(c2));
    } else {
      CUdeviceptr p;
      CU(d->pfn_cuMemAllocAsync(&p, 4096, c1));
      if (two) {
        CU(d->pfn_cuEventRecord(e1, c1));
        CU(d->pfn_cuStreamWaitEvent(c2, e1, 0));
        CU(d->pfn_cuEventRecord(e2, c2));
        CU(d->pfn_cuStreamWaitEvent(c1, e2, 0));
      }
      CU(d->pfn_cuMemFreeAsync(p, c1));
    }
    n++;
  }
  atomic_fetch_add(&c->req_cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
  atomic_fetch_add(&c->iters, n);
  atomic_fetch_add(&c->req_recycles, tl_recycles);
  tl_recycles = 0;
  CK(slc_stream_synchronize(s1));
  CK(slc_stream_synchronize(s2));
  CU(d->pfn_cuEventDestroy(e1));
  CU(d->pfn_cuEventDestroy(e2));
  CK(slc_stream_destroy(s1));
  CK(slc_stream_destroy(s2));
  slc_stream_unref(s1);
  slc_stream_unref(s2);
  return NULL;
}

/* ---- 2. Serving ------------------------------------------------------------- */

/* Who checked a staging block's last request (request.last_check). */
enum { LAST_NONE, LAST_OWN, LAST_OTHER };
#define LAST_SLOTS 256 /* by (address >> 16): 64 KiB blocks, 16 MiB apart */
static unsigned last_slot(const void *staging) {
  return (unsigned)(((uintptr_t)staging >> 16) % LAST_SLOTS);
}

typedef struct request {
  cell *c;
  atomic_uchar *last_check; /* its thread's LAST_SLOTS, by staging block */
  pthread_t owner; /* the request thread: was the check run on it? */
  uint32_t seed;
  uint64_t t0;
  void *staging; /* host memory read at completion */
  unsigned words;
  atomic_int busy;
} request;

static void fill(uint32_t *p, uint32_t seed, unsigned n) {
  for (unsigned i = 0; i < n; i++) p[i] = seed + i;
}

/* The copy back completed: check, record the latency, free the slot. */
static void request_done(void *arg) {
  request *r = arg;
  const uint32_t *p = r->staging;
  for (unsigned i = 0; i < r->words; i++)
    if (p[i] != r->seed + i + 1) {
      atomic_fetch_add(&wrong, 1);
      break;
    }
  uint64_t lat = bench_mono_ns() - r->t0;
  bool own = pthread_equal(pthread_self(), r->owner);
  if (own)
    atomic_fetch_add_explicit(&r->c->own_checks, 1, memory_order_relaxed);
  /* Relaxed: the pool hands the block back only after this keep returned
   * (its release), and the owner reads the slot after slp_alloc (acquire). */
  atomic_store_explicit(&r->last_check[last_slot(r->staging)],
                        own ? LAST_OWN : LAST_OTHER, memory_order_relaxed);
  unsigned long long k = atomic_fetch_add(&r->c->n_lat, 1);
  if (k < r->c->lat_cap) r->c->lat[k] = lat;
  atomic_store_explicit(&r->busy, 0, memory_order_release);
}

static void CUDA_CB request_done_hostfn(void *arg) { request_done(arg); }

/* The pool's keep: with --devices, a thread that runs it and is not a
 * request thread (the engine's) is tracked for the CPU split, and the check
 * counts as benchmark work. */
static void request_done_keep(void *arg) {
  if (opt.n_gpus == 0) {
    request_done(arg);
    return;
  }
  dt_track_keep_thread();
  uint64_t t0 = bench_mono_ns();
  request_done(arg);
  dt_bench_add(bench_mono_ns() - t0);
}

/* Fills the staging block; returns the time it took. */
static uint64_t fill_timed(uint32_t *p, uint32_t seed, unsigned n,
                           bool split) {
  uint64_t t0 = bench_mono_ns();
  fill(p, seed, n);
  uint64_t dt = bench_mono_ns() - t0;
  if (split) dt_bench_add(dt); /* the benchmark's own work */
  return dt;
}

static void *serving_thread(void *arg) {
  worker *w = arg;
  cell *c = w->c;
  const slc_driver *d = slc_context_driver(ctx);
  bool pool = c->mode[0] == 'p', split = opt.n_gpus > 0;
  unsigned words = opt.bytes / 4, K = opt.inflight;
  /* The GPUs this thread serves, a stream on each: its own GPU (grouped),
   * or every GPU of the cell in turn (--spread). */
  unsigned ns = opt.spread ? c->gpus : 1;
  slc_stream *ss[MAX_GPUS];
  int devs[MAX_GPUS];
  for (unsigned k = 0; k < ns; k++) {
    devs[k] = opt.spread ? (int)k : (int)((unsigned)w->id % c->gpus);
    CK(slc_stream_create(ctx, devs[k], SLC_STREAM_NONBLOCKING, &ss[k]));
  }
  CK(slc_device_make_current(ctx, devs[0]));
  request *rq = calloc(K, sizeof(*rq));
  void **ring = calloc(K, sizeof(void *)); /* async: pinned staging */
  atomic_uchar *last = calloc(LAST_SLOTS, sizeof(*last));
  if (rq == NULL || ring == NULL || last == NULL) exit(1);
  uint64_t fill_ns[3] = {0, 0, 0}, fill_n[3] = {0, 0, 0};
  if (!pool) {
    for (unsigned k = 0; k < K; k++)
      CU(d->pfn_cuMemHostAlloc(&ring[k], opt.bytes, CU_MEMHOSTALLOC_PORTABLE));
    atomic_fetch_add(&c->pinned_bytes, (unsigned long long)K * opt.bytes);
  }
  tl_request = true;
  dt_thread dt;
  if (split) dt_track(&dt);
  /* After its streams exist: threads the driver creates for them (the
   * host executor's) stay off its CPU. */
  pin_request(w->id);
  pthread_barrier_wait(&c->start);
  dt_sample dt0 = split ? dt_read(&dt) : (dt_sample){0, 0, 0};
  uint64_t n = 0, cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  uint64_t waited = 0, max_alloc = 0, slow = 0;
  while (bench_mono_ns() < c->deadline) {
    request *r = &rq[n % K];
    if (atomic_load_explicit(&r->busy, memory_order_acquire)) {
      /* The oldest request is not done: wait, no sync. The pool's loop
       * releases its own streams meanwhile (--wait poll, the default: its
       * checks run here, as PyTorch's loop checks on its thread), or only
       * yields to the engine thread (--wait yield: the first version).
       * --devices: the wait is benchmark time (by the CPU clock: the
       * yields may let other threads run), the polls are not. */
      uint64_t w0 = bench_mono_ns(), tb = split ? dt_thread_cpu_ns() : 0, tp = 0;
      while (atomic_load_explicit(&r->busy, memory_order_acquire)) {
        if (pool && !opt.wait_yield) {
          uint64_t p0 = split ? dt_thread_cpu_ns() : 0;
          for (unsigned k = 0; k < ns; k++)
            CK(slc_engine_poll_stream(ss[k], NULL));
          if (split) tp += dt_thread_cpu_ns() - p0;
        }
        sched_yield();
      }
      waited += bench_mono_ns() - w0;
      if (split) {
        uint64_t tw = dt_thread_cpu_ns() - tb;
        dt_bench_add(tw > tp ? tw - tp : 0);
      }
    }
    const unsigned k = (unsigned)(n % ns);
    slc_stream *s = ss[k];
    const int dv = devs[k];
    r->c = c;
    r->last_check = last;
    r->owner = pthread_self();
    r->seed = (uint32_t)(w->id * 1000003u + n * 7u);
    r->words = words;
    r->t0 = bench_mono_ns();
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    unsigned nn = words;
    if (pool) {
      slp_block *stg, *dev;
      uint64_t a0 = bench_mono_ns();
      CK(slp_alloc(c->mhost[dv], s, opt.bytes, &stg));
      CK(slp_alloc(c->mdev[dv], s, opt.bytes, &dev));
      uint64_t da = bench_mono_ns() - a0;
      if (da > max_alloc) max_alloc = da;
      slow += da > 100000;
      r->staging = slp_block_host(stg);
      unsigned lc = atomic_load_explicit(&last[last_slot(r->staging)],
                                         memory_order_relaxed);
      fill_ns[lc] += fill_timed(r->staging, r->seed, words, split);
      fill_n[lc]++;
      CK(slp_copy_async(s, dev, 0, stg, 0, opt.bytes, NULL));
      CUdeviceptr p = slp_block_dptr(dev);
      CK(slp_launch(s, add1_of[dv], (slc_dim3){(words + 255) / 256, 1, 1},
                    (slc_dim3){256, 1, 1}, 0, (void *[]){&p, &nn}, &dev, 1,
                    NULL));
      CK(slp_copy_async(s, stg, 0, dev, 0, opt.bytes,
                        &(slc_hold){.keep = {request_done_keep, r}}));
      CK(slp_free(stg));
      CK(slp_free(dev));
      /* --own-poll N: this thread releases its completed requests itself
       * every N (their checks run here, as before the owner's inbox; issue
       * 10, "The serving regression at 1 thread"). */
      if (opt.own_poll != 0 && (n + 1) % opt.own_poll == 0)
        for (unsigned j = 0; j < ns; j++)
          CK(slc_engine_poll_stream(ss[j], NULL));
    } else {
      CUdeviceptr p;
      if (ns > 1) CK(slc_device_make_current(ctx, dv));
      CUstream cs = slc_stream_handle(s);
      r->staging = ring[n % K];
      (void)fill_timed(r->staging, r->seed, words, split);
      CU(d->pfn_cuMemAllocAsync(&p, opt.bytes, cs));
      CU(d->pfn_cuMemcpyHtoDAsync(p, r->staging, opt.bytes, cs));
      void *params[] = {&p, &nn};
      CU(d->pfn_cuLaunchKernel(add1_of[dv], (words + 255) / 256, 1, 1, 256, 1,
                               1, 0, cs, params, NULL));
      CU(d->pfn_cuMemcpyDtoHAsync(r->staging, p, opt.bytes, cs));
      CU(d->pfn_cuLaunchHostFunc(cs, request_done_hostfn, r));
      CU(d->pfn_cuMemFreeAsync(p, cs));
    }
    n++;
  }
  atomic_fetch_add(&c->req_cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0);
  atomic_fetch_add(&c->iters, n);
  atomic_fetch_add(&c->wait_ns, waited);
  for (int k = 0; k < 3; k++) {
    atomic_fetch_add(&c->fill_ns[k], fill_ns[k]);
    atomic_fetch_add(&c->fill_n[k], fill_n[k]);
  }
  atomic_fetch_add(&c->slow_allocs, slow);
  atomic_fetch_add(&c->req_recycles, tl_recycles);
  tl_recycles = 0;
  for (unsigned long long m = atomic_load(&c->max_alloc_ns);
       max_alloc > m && !atomic_compare_exchange_weak(&c->max_alloc_ns, &m,
                                                      max_alloc);) {
  }
  if (split) {
    dt_sample dt1 = dt_read(&dt);
    uint64_t other = (dt1.driver_ns - dt0.driver_ns) +
                     (dt1.bench_ns - dt0.bench_ns),
             cpu = dt1.cpu_ns - dt0.cpu_ns;
    atomic_fetch_add(&c->sl_ns, cpu > other ? cpu - other : 0);
    atomic_fetch_add(&c->req_drv_ns, dt1.driver_ns - dt0.driver_ns);
    atomic_fetch_add(&c->req_bench_ns, dt1.bench_ns - dt0.bench_ns);
    dt_untrack();
  }
  for (unsigned k = 0; k < ns; k++) CK(slc_stream_synchronize(ss[k]));
  for (unsigned k = 0; k < K; k++) /* the pool's keeps: the engine's */
    while (atomic_load_explicit(&rq[k].busy, memory_order_acquire))
      sched_yield();
  if (!pool)
    for (unsigned k = 0; k < K; k++) CU(d->pfn_cuMemFreeHost(ring[k]));
  for (unsigned k = 0; k < ns; k++) {
    CK(slc_stream_destroy(ss[k]));
    slc_stream_unref(ss[k]);
  }
  free(rq);
  free(ring);
  free(last);
  return NULL;
}

/* ---- Cells ------------------------------------------------------------------ */

typedef struct row {
  const char *bench, *mode;
  unsigned threads;
  double mops, cpu_ns, req_cpu_ns, p50_us, p99_us;
  double reserved_mib, in_use_mib;
  unsigned gpus;  /* --devices cells; 0 for the others */
  double sl_ns;   /* streamledger's CPU per request (--devices) */
} row;

static row rows[256];
static int n_rows;

static double process_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}

/* The counters run_cell reads, summed over the GPUs' pools. */
static void stats_add(slp_stats *a, const slp_stats *b) {
  a->allocated_bytes += b->allocated_bytes;
  a->allocated_peak += b->allocated_peak;
  a->reserved_peak += b->reserved_peak;
  a->held_bytes += b->held_bytes;
  a->allocs += b->allocs;
  a->frees += b->frees;
  a->reuses += b->reuses;
  a->slab_allocs += b->slab_allocs;
}

/* gpus: 0 for the single-GPU cells; else a --devices cell over GPUs
 * 0..gpus-1 (threads in all). */
static void run_cell(const char *bench, const char *mode, unsigned threads,
                     unsigned gpus) {
  /* A pool row with a non-default marker period or wait says so:
   * pool_2s/m64, pool_2s/m64t200, pool/y. */
  static char labels[64][48];
  static int n_labels;
  bool serving_pool = strcmp(bench, "serving") == 0 && mode[0] == 'p';
  if ((opt.every_ops != 0 || opt.every_us != 0 || opt.place_issuer ||
       (serving_pool && (opt.wait_yield || opt.own_poll != 0))) &&
      mode[0] == 'p' && n_labels < 64) {
    char m[12] = "", t[12] = "", o[12] = "";
    if (opt.every_ops != 0) snprintf(m, sizeof(m), "m%u", opt.every_ops);
    if (opt.every_us != 0) snprintf(t, sizeof(t), "t%u", opt.every_us);
    if (serving_pool && opt.own_poll != 0)
      snprintf(o, sizeof(o), "o%u", opt.own_poll);
    snprintf(labels[n_labels], sizeof(labels[0]), "%s/%s%s%s%s%s", mode, m,
             t, serving_pool && opt.wait_yield ? "y" : "", o,
             opt.place_issuer ? "pi" : "");
    mode = labels[n_labels++];
  }
  cell c;
  memset(&c, 0, sizeof(c));
  c.mode = mode;
  c.threads = threads;
  bool serving = strcmp(bench, "serving") == 0;
  c.gpus = gpus ? gpus : 1;
  slp_config pcfg = {0};
  if (strcmp(mode, "pool_af") != 0) pcfg.on_recycle = count_recycle;
  const slc_driver *d = slc_context_driver(ctx);
  for (unsigned g = 0; g < c.gpus; g++) { /* per GPU: pools, driver pool */
    CK(slp_pool_create_device(ctx, (int)g, &pcfg, &c.mdev[g]));
    CK(slp_pool_create_host(ctx, &pcfg, &c.mhost[g]));
    CK(slc_device_make_current(ctx, (int)g));
    CUdevice dev;
    CU(d->pfn_cuDeviceGet(&dev, (int)g));
    CU(d->pfn_cuDeviceGetDefaultMemPool(&c.mmempool[g], dev));
    cuuint64_t v = UINT64_MAX; /* keep freed memory, as PyTorch's async */
    CU(d->pfn_cuMemPoolSetAttribute(c.mmempool[g],
                                    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v));
    v = 0;
    CU(d->pfn_cuMemPoolSetAttribute(c.mmempool[g],
                                    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &v));
    CU(d->pfn_cuMemPoolSetAttribute(c.mmempool[g],
                                    CU_MEMPOOL_ATTR_USED_MEM_HIGH, &v));
  }
  c.dev = c.mdev[0];
  c.host = c.mhost[0];
  c.mempool = c.mmempool[0];
  if (serving) {
    c.lat_cap = 4u << 20;
    c.lat = malloc(c.lat_cap * sizeof(uint64_t));
    if (c.lat == NULL) exit(1);
  }
  pthread_barrier_init(&c.start, NULL, threads + 1);
  worker w[MAX_THREADS];
  for (unsigned i = 0; i < threads; i++) {
    w[i] = (worker){&c, (int)i, 0};
    pthread_create(&w[i].th, NULL, serving ? serving_thread : overhead_thread,
                   &w[i]);
  }
  slc_engine_stats es0, es1;
  CK(slc_engine_stats_get(ctx, &es0));
  unsigned long long dc0[2][DC_N], dc1[2][DC_N];
  dc_read(dc0);
  dt_sample k0 = dt_read_keep_threads();
  double cpu0 = process_cpu_ns();
  /* Written before the barrier that releases the workers. */
  c.deadline = bench_mono_ns() + (uint64_t)opt.ms * 1000000u;
  pthread_barrier_wait(&c.start);
  uint64_t t0 = bench_mono_ns();
  for (unsigned i = 0; i < threads; i++) pthread_join(w[i].th, NULL);
  double wall = (double)(bench_mono_ns() - t0);
  double cpu = process_cpu_ns() - cpu0;
  CK(slc_engine_stats_get(ctx, &es1));
  dc_read(dc1);
  /* The workers waited for every keep of theirs: the keep threads are done
   * with this cell. */
  dt_sample k1 = dt_read_keep_threads();
  row *r = &rows[n_rows++];
  unsigned long long n = atomic_load(&c.iters);
  *r = (row){bench, mode, threads, (double)n / wall * 1e3,
             n ? cpu / (double)n : 0,
             n ? (double)atomic_load(&c.req_cpu_ns) / (double)n : 0, 0, 0, 0,
             0, 0, 0};
  if (serving) {
    size_t k = atomic_load(&c.n_lat);
    if (k > c.lat_cap) k = c.lat_cap;
    qsort(c.lat, k, sizeof(uint64_t), cmp_u64);
    r->p50_us = k ? c.lat[(size_t)(0.50 * (double)(k - 1))] / 1e3 : 0;
    r->p99_us = k ? c.lat[(size_t)(0.99 * (double)(k - 1))] / 1e3 : 0;
    r->mops *= 1e6; /* requests/s */
  }
  if (gpus != 0) {
    r->gpus = gpus;
    uint64_t other =
                 (k1.driver_ns - k0.driver_ns) + (k1.bench_ns - k0.bench_ns),
             kcpu = k1.cpu_ns - k0.cpu_ns;
    double sl = (double)atomic_load(&c.sl_ns) +
                (double)(kcpu > other ? kcpu - other : 0);
    r->sl_ns = n ? sl / (double)n : 0;
  }
  slp_stats sd = {0}, sh = {0}; /* summed over the GPUs */
  for (unsigned g = 0; g < c.gpus; g++) {
    if (mode[0] == 'p') {
      slp_stats gd, gh;
      CK(slp_stats_get(c.mdev[g], &gd));
      CK(slp_stats_get(c.mhost[g], &gh));
      stats_add(&sd, &gd);
      stats_add(&sh, &gh);
    } else {
      cuuint64_t hi = 0, used = 0;
      CU(d->pfn_cuMemPoolGetAttribute(
          c.mmempool[g], CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &hi));
      CU(d->pfn_cuMemPoolGetAttribute(c.mmempool[g],
                                      CU_MEMPOOL_ATTR_USED_MEM_HIGH, &used));
      r->reserved_mib += (double)hi / 1048576;
      r->in_use_mib += (double)used / 1048576;
    }
  }
  if (mode[0] == 'p') {
    r->reserved_mib = (double)(sd.reserved_peak + sh.reserved_peak) / 1048576;
    r->in_use_mib = (double)(sd.allocated_peak + sh.allocated_peak) / 1048576;
    if (sd.allocated_bytes || sh.allocated_bytes) {
      fprintf(stderr, "FAILED: blocks still allocated after the cell\n");
      exit(1);
    }
  } else {
    double pinned = (double)atomic_load(&c.pinned_bytes) / 1048576;
    r->reserved_mib += pinned;
    r->in_use_mib += pinned;
  }
  /* Everything comes back before the pools go. */
  for (unsigned g = 0; g < c.gpus; g++)
    for (int i = 0; i < 20000; i++) {
      slp_stats gd, gh;
      CK(slp_stats_get(c.mdev[g], &gd));
      CK(slp_stats_get(c.mhost[g], &gh));
      if (gd.held_bytes + gh.held_bytes == 0) break;
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  for (unsigned g = 0; g < c.gpus; g++) {
    CK(slp_pool_destroy(c.mdev[g]));
    CK(slp_pool_destroy(c.mhost[g]));
  }
  pthread_barrier_destroy(&c.start);
  free(c.lat);
  if (gpus != 0)
    printf("multigpu %-9s %4u %3u %-7s | %10.0f | %9.2f %9.2f | %7.2f %5.1f "
           "| %8.1f %8.1f | %9.2f %9.2f\n",
           mode, gpus, threads, opt.spread ? "spread" : "grouped", r->mops,
           r->cpu_ns / 1e3, r->req_cpu_ns / 1e3, r->sl_ns / 1e3,
           r->cpu_ns > 0 ? 100 * r->sl_ns / r->cpu_ns : 0, r->p50_us,
           r->p99_us, r->reserved_mib, r->in_use_mib);
  else if (serving)
    printf("%-8s %-9s %3u | %10.0f | %9.2f %9.2f | %8.1f %8.1f | %9.2f "
           "%9.2f\n",
           bench, mode, threads, r->mops, r->cpu_ns / 1e3, r->req_cpu_ns / 1e3,
           r->p50_us, r->p99_us, r->reserved_mib, r->in_use_mib);
  else
    printf("%-8s %-9s %3u | %10.3f | %9.0f %9.0f | %8s %8s | %9.2f %9.2f\n",
           bench, mode, threads, r->mops, r->cpu_ns, r->req_cpu_ns, "-", "-",
           r->reserved_mib, r->in_use_mib);
  /* Where the time went (not a row: pool_h200.sh's table leaves it out).
   * Engine counters per iteration (all threads: the engine's and the
   * pools' own polls), slabs carved, share of allocations reused; serving:
   * checks run on their own request thread, slp_alloc pairs over 100 us,
   * time waiting for a slot per request. */
  if (mode[0] == 'p' && n != 0) {
    double dn = (double)n;
    printf("diag     %-9s %3u | engine/op: %.3f polls %.3f markers %.3f "
           "releases %.4f wakes | slabs %llu, reused %.1f%%, recycled on "
           "request threads %.1f%% of frees",
           mode, threads, (double)(es1.polls - es0.polls) / dn,
           (double)(es1.markers_placed - es0.markers_placed) / dn,
           (double)(es1.releases - es0.releases) / dn,
           (double)(es1.thread_wakes_by_issuers -
                    es0.thread_wakes_by_issuers) / dn,
           (unsigned long long)(sd.slab_allocs + sh.slab_allocs),
           100.0 * (double)(sd.reuses + sh.reuses) /
               (double)(sd.allocs + sh.allocs ? sd.allocs + sh.allocs : 1),
           100.0 * (double)atomic_load(&c.req_recycles) /
               (double)(sd.frees + sh.frees ? sd.frees + sh.frees : 1));
    if (serving)
      printf(" | checks on req thread %.1f%%, alloc pairs > 100 us %llu "
             "(max %.0f us), slot wait %.1f us/req",
             100.0 * (double)atomic_load(&c.own_checks) / dn,
             (unsigned long long)atomic_load(&c.slow_allocs),
             (double)atomic_load(&c.max_alloc_ns) / 1e3,
             (double)atomic_load(&c.wait_ns) / 1e3 / dn);
    /* The staging fill, by who checked the block's last request. */
    if (serving) {
      printf(" | fill us");
      static const char *const by[3] = {"fresh", "own", "other"};
      for (int k = 0; k < 3; k++) {
        unsigned long long fn = atomic_load(&c.fill_n[k]);
        printf(" %s %.2f (%.1f%%)", by[k],
               fn ? (double)atomic_load(&c.fill_ns[k]) / 1e3 / (double)fn
                  : 0.0,
               100.0 * (double)fn / dn);
      }
      /* --devices: the request threads' CPU split (drvtime.h). */
      if (gpus != 0)
        printf(" | req thread us/req: driver %.2f bench %.2f sl %.2f",
               (double)atomic_load(&c.req_drv_ns) / 1e3 / dn,
               (double)atomic_load(&c.req_bench_ns) / 1e3 / dn,
               (double)atomic_load(&c.sl_ns) / 1e3 / dn);
    }
    printf("\n");
  }
  /* --count-driver: driver calls per iteration (request), on the request
   * threads and on the others (the engine thread), during the cell. */
  if (opt.count_driver && n != 0) {
    static const char *const nm[DC_N] = {"record", "query",  "getcur",
                                         "setcur", "wait",   "alloc",
                                         "free",   "squery"};
    printf("drvcalls %-9s %3u |", mode, threads);
    for (int rq = 1; rq >= 0; rq--) {
      printf(" %s/op:", rq ? "request threads" : "other threads");
      for (int k = 0; k < DC_N; k++)
        printf(" %s %.3f", nm[k], (double)(dc1[rq][k] - dc0[rq][k]) /
                                      (double)n);
      printf(rq ? " |" : "");
    }
    printf("\n");
  }
  fflush(stdout);
}

static const char *const over[] = {"pool_af", "async_af", "pool_2s",
                                   "async_2s"};
static const char *const serve[] = {"pool", "async"};

/* --only: a bench ("overhead", "serving") or one mode ("pool_2s"). */
static bool only_known(const char *only) {
  bool known = strcmp(only, "overhead") == 0 || strcmp(only, "serving") == 0;
  for (int k = 0; k < 4; k++) known |= strcmp(only, over[k]) == 0;
  for (int k = 0; k < 2; k++) known |= strcmp(only, serve[k]) == 0;
  return known;
}

static int usage(void) {
  fprintf(stderr,
          "usage: pool_bench [--driver=libcuda|host] [--libcuda PATH]\n"
          "  [--require-gpu] [--smoke] [--json FILE] [--threads 1,2,4,8,16]\n"
          "  [--ms MS_PER_CELL] [--bytes SERVING_BYTES] [--inflight N]\n"
          "  [--every-ops N] [--every-us T] (the engine's marker period)\n"
          "  [--wait poll|yield (serving pool: how a thread waits for a slot)] "
          "[--only overhead|serving|MODE]\n"
          "  [--iters N (overhead: N iterations per thread, not --ms)]\n"
          "  [--sync-every N (overhead, for callgrind: no engine thread; "
          "s2 synchronised every N iterations)]\n"
          "  [--drain-every N (overhead, for callgrind: no engine thread; "
          "s2 drained by the raw driver every N iterations)] [--pin]\n"
          "  [--devices 1,2,4,8|all (serving on several GPUs; --threads is "
          "per GPU)] [--spread]\n"
          "  [--engine-threads device|one (one per GPU, or one for all)]\n"
          "  [--count-driver (drvcalls lines: driver calls per iteration)]\n"
          "  [--placement engine|issuer (who records markers; rows /pi)]\n"
          "  [--own-poll N (serving pool: poll own streams every N requests;"
          " rows /oN)]\n");
  return 2;
}

static bool parse_uint(const char *s, unsigned *out) {
  char *end;
  unsigned long v = s ? strtoul(s, &end, 10) : 0;
  if (s == NULL || *s == 0 || *end != 0 || v == 0 || v > 100000000) return false;
  *out = (unsigned)v;
  return true;
}

int main(int argc, char **argv) {
  const char *threads = "1,2,4,8,16", *devices = NULL;
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
    } else if (strcmp(a, "--threads") == 0) {
      if ((threads = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--only") == 0) {
      opt.only = VAL();
      if (opt.only == NULL || !only_known(opt.only)) return usage();
    } else if (strcmp(a, "--wait") == 0) {
      const char *wv = VAL();
      if (wv == NULL) return usage();
      if (strcmp(wv, "yield") == 0) opt.wait_yield = true;
      else if (strcmp(wv, "poll") == 0) opt.wait_yield = false;
      else return usage();
    } else if (strcmp(a, "--devices") == 0) {
      if ((devices = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--spread") == 0) {
      opt.spread = true;
    } else if (strcmp(a, "--engine-threads") == 0) {
      const char *ev = VAL();
      if (ev == NULL) return usage();
      if (strcmp(ev, "one") == 0) opt.one_engine_thread = true;
      else if (strcmp(ev, "device") == 0) opt.one_engine_thread = false;
      else return usage();
    } else if (strcmp(a, "--count-driver") == 0) {
      opt.count_driver = true;
    } else if (strcmp(a, "--placement") == 0) {
      const char *pv = VAL();
      if (pv == NULL) return usage();
      if (strcmp(pv, "issuer") == 0) opt.place_issuer = true;
      else if (strcmp(pv, "engine") == 0) opt.place_issuer = false;
      else return usage();
    } else if (strcmp(a, "--pin") == 0) {
      if (v != NULL) return usage(); /* a flag: no value */
      opt.pin = true;
    } else if (strcmp(a, "--require-gpu") == 0) {
      opt.require_gpu = true;
    } else if (strcmp(a, "--smoke") == 0) {
      opt.smoke = true;
    } else {
      unsigned *dst = strcmp(a, "--ms") == 0         ? &opt.ms
                      : strcmp(a, "--bytes") == 0    ? &opt.bytes
                      : strcmp(a, "--inflight") == 0 ? &opt.inflight
                      : strcmp(a, "--every-ops") == 0 ? &opt.every_ops
                      : strcmp(a, "--every-us") == 0 ? &opt.every_us
                      : strcmp(a, "--iters") == 0 ? &opt.iters
                      : strcmp(a, "--sync-every") == 0 ? &opt.sync_every
                      : strcmp(a, "--drain-every") == 0 ? &opt.drain_every
                      : strcmp(a, "--own-poll") == 0 ? &opt.own_poll
                                                     : NULL;
      if (dst == NULL || !parse_uint(VAL(), dst)) return usage();
    }
#undef VAL
  }
  if (opt.smoke) {
    threads = "1,2";
    opt.ms = 30;
    opt.bytes = 4096;
    opt.inflight = 8;
  }
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", threads);
  for (char *t = strtok(buf, ","); t != NULL; t = strtok(NULL, ",")) {
    if (opt.n_threads == 16 || !parse_uint(t, &opt.threads[opt.n_threads]) ||
        opt.threads[opt.n_threads] > MAX_THREADS)
      return usage();
    opt.n_threads++;
  }
  if (opt.bytes % 1024 != 0) return usage();
  bool all_gpus = devices != NULL && strcmp(devices, "all") == 0;
  if (devices != NULL && !all_gpus) {
    snprintf(buf, sizeof(buf), "%s", devices);
    for (char *t = strtok(buf, ","); t != NULL; t = strtok(NULL, ",")) {
      if (opt.n_gpus == MAX_GPUS || !parse_uint(t, &opt.gpus[opt.n_gpus]) ||
          opt.gpus[opt.n_gpus] > MAX_GPUS)
        return usage();
      opt.n_gpus++;
    }
  }
  if (opt.spread && devices == NULL) return usage();
  unsigned max_gpus = all_gpus ? HD_MAX_DEVICES : 1;
  for (unsigned g = 0; g < opt.n_gpus; g++)
    if (opt.gpus[g] > max_gpus) max_gpus = opt.gpus[g];
  for (unsigned t = 0; devices != NULL && t < opt.n_threads; t++)
    if (opt.threads[t] * max_gpus > MAX_THREADS) {
      fprintf(stderr, "--threads %u per GPU x %u GPUs: more than %d threads\n",
              opt.threads[t], max_gpus, MAX_THREADS);
      return 2;
    }
  if (opt.pin) { /* before the driver's and the engine's threads */
    unsigned most = 0;
    for (unsigned t = 0; t < opt.n_threads; t++) {
      unsigned n = opt.threads[t] * (devices != NULL ? max_gpus : 1);
      if (n > most) most = n;
    }
    pin_init(most);
  }
  if (opt.host) {
    hd_config cfg = {max_gpus > HD_MAX_DEVICES ? HD_MAX_DEVICES : (int)max_gpus,
                     0};
    if (hd_install(&drv, &cfg) != 0) return 1;
    slc_test_register_host_kernels();
  } else if (slc_driver_load(&drv, opt.libcuda) != 0) {
    printf("SKIPPED: no CUDA driver (%s)\n", drv.load_error);
    return opt.require_gpu ? 1 : 0;
  }
  if (devices != NULL) dt_wrap(&drv); /* the CPU split (bench/drvtime.h) */
  if (opt.count_driver) dc_wrap(&drv); /* drvcalls lines */
  if (slc_context_create(&drv, &ctx) != LDG_OK) {
    printf("SKIPPED: no usable CUDA device (%s)\n", slc_last_error_message());
    return opt.require_gpu ? 1 : 0;
  }
  char name[256] = "?";
  (void)slc_device_name(ctx, 0, name, sizeof(name));
  printf("device: %s, %s\n", name, drv.origin);
  slc_engine_config ecfg = {.thread = opt.sync_every == 0 &&
                                      opt.drain_every == 0,
                            .marker_every_ops = opt.every_ops,
                            .marker_every_us = opt.every_us,
                            .one_thread = opt.one_engine_thread,
                            .placement = opt.place_issuer
                                             ? SLC_ENGINE_PLACE_ISSUER
                                             : SLC_ENGINE_PLACE_ENGINE};
  CK(slc_engine_enable(ctx, &ecfg));
  int visible = slc_device_count(ctx);
  if (all_gpus)
    for (int g = 1; g <= visible && g <= MAX_GPUS; g++)
      opt.gpus[opt.n_gpus++] = (unsigned)g;
  for (unsigned g = 0; g < opt.n_gpus; g++)
    if (opt.gpus[g] > (unsigned)visible) {
      fprintf(stderr, "FAILED: --devices %u, but %d GPUs are visible\n",
              opt.gpus[g], visible);
      return 1;
    }
  slc_module *mods[MAX_GPUS] = {NULL};
  int n_mods = 1;
  for (unsigned g = 0; g < opt.n_gpus; g++)
    if ((int)opt.gpus[g] > n_mods) n_mods = (int)opt.gpus[g];
  for (int g = 0; g < n_mods; g++) { /* add1 on every GPU used */
    CK(slc_module_load(ctx, g, slc_test_ptx, &mods[g]));
    CK(slc_module_function(mods[g], "add1", &add1_of[g]));
  }
  add1 = add1_of[0];
  printf("%u ms per cell; overhead: 4 KiB blocks, 2 streams per thread; "
         "serving: %u bytes, %u in flight per thread\n",
         opt.ms, opt.bytes, opt.inflight);
  printf("%-8s %-9s %3s | %10s | %9s %9s | %8s %8s | %9s %9s\n", "bench",
         "mode", "thr", "Mops|req/s", "cpu/op", "req-thr", "p50 us",
         "p99 us", "resv MiB", "used MiB");
  printf("%-8s %-9s %3s | %10s | %9s %9s | %8s %8s | %9s %9s\n", "", "", "",
         "", "ns|us", "ns|us", "", "", "peak", "peak");
#define WANT(bench, mode) \
  (opt.only == NULL || strcmp(opt.only, bench) == 0 || strcmp(opt.only, mode) == 0)
  if (devices != NULL) { /* several GPUs: the serving cells only */
    printf("several GPUs: %u ms per cell, %u bytes, %u in flight per thread, "
           "threads per GPU, %s, %s\n",
           opt.ms, opt.bytes, opt.inflight,
           opt.spread ? "each thread spread over all GPUs"
                      : "each thread on one GPU",
           opt.one_engine_thread ? "one engine thread for all GPUs"
                                 : "an engine thread per GPU");
    printf("multigpu %-9s %4s %3s %-7s | %10s | %9s %9s | %7s %5s | %8s %8s "
           "| %9s %9s\n",
           "mode", "gpus", "thr", "placing", "req/s", "cpu/req", "req-thr",
           "sl", "sl", "p50 us", "p99 us", "resv MiB", "used MiB");
    printf("multigpu %-9s %4s %3s %-7s | %10s | %9s %9s | %7s %5s | %8s %8s "
           "| %9s %9s\n",
           "", "", "", "", "", "us", "us", "us/req", "%", "", "", "peak",
           "peak");
    for (unsigned t = 0; t < opt.n_threads; t++)
      for (unsigned g = 0; g < opt.n_gpus; g++)
        for (int k = 0; k < 2; k++)
          if (WANT("serving", serve[k]))
            run_cell("serving", serve[k], opt.threads[t] * opt.gpus[g],
                     opt.gpus[g]);
  }
  for (unsigned t = 0; devices == NULL && t < opt.n_threads; t++)
    for (int k = 0; k < 4; k++)
      if (WANT("overhead", over[k]))
        run_cell("overhead", over[k], opt.threads[t], 0);
  for (unsigned t = 0; devices == NULL && t < opt.n_threads; t++)
    for (int k = 0; k < 2; k++)
      if (WANT("serving", serve[k]))
        run_cell("serving", serve[k], opt.threads[t], 0);
#undef WANT
  for (int g = 0; g < n_mods; g++) CK(slc_module_unload(mods[g]));
  CK(slc_context_destroy(ctx));
  if (opt.json != NULL) {
    FILE *f = fopen(opt.json, "w");
    if (f == NULL) return 1;
    fprintf(f, "{\"device\": \"%s\", \"ms\": %u, \"bytes\": %u, "
            "\"inflight\": %u, \"rows\": [\n", name, opt.ms, opt.bytes,
            opt.inflight);
    for (int i = 0; i < n_rows; i++) {
      const row *r = &rows[i];
      fprintf(f,
              "  {\"bench\": \"%s\", \"mode\": \"%s\", \"threads\": %u, "
              "\"rate\": %.4f, \"cpu_ns\": %.1f, \"req_thread_cpu_ns\": %.1f, "
              "\"p50_us\": %.2f, \"p99_us\": %.2f, \"reserved_peak_mib\": "
              "%.2f, \"in_use_peak_mib\": %.2f",
              r->bench, r->mode, r->threads, r->mops, r->cpu_ns, r->req_cpu_ns,
              r->p50_us, r->p99_us, r->reserved_mib, r->in_use_mib);
      if (r->gpus != 0)
        fprintf(f,
                ", \"gpus\": %u, \"placing\": \"%s\", \"sl_cpu_ns\": %.1f",
                r->gpus, opt.spread ? "spread" : "grouped", r->sl_ns);
      fprintf(f, "}%s\n", i + 1 < n_rows ? "," : "");
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
  if (atomic_load(&wrong) != 0) {
    fprintf(stderr, "FAILED: %ld wrong results\n", atomic_load(&wrong));
    return 1;
  }
  printf("every result checked\n");
  return 0;
}
