/* drvtime.h: the wrappers and the per-thread counters. */
#include "bench/drvtime.h"

#include <pthread.h>
#include <string.h>

static _Thread_local dt_thread *dt_self;

#define DT_MAX_KEEP_THREADS 64
static struct {
  dt_thread t;
  atomic_int ready; /* t.cpu written (release), read (acquire) */
} dt_keep[DT_MAX_KEEP_THREADS];
static atomic_int dt_n_keep;

uint64_t dt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t dt_clock_ns(clockid_t id) {
  struct timespec ts;
  if (clock_gettime(id, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t dt_thread_cpu_ns(void) {
  return dt_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* Sampling: a tracked thread times one call in DT_EVERY at random (its own
 * xorshift, so the pick does not follow the calls' order), and counts it
 * DT_EVERY times, less the cost of the two clock reads (calibrated). */
#define DT_EVERY 16
static _Thread_local uint64_t dt_rng;
static uint64_t dt_calib_ns; /* written by dt_wrap, before any thread */

static bool dt_pick(void) {
  uint64_t x = dt_rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  dt_rng = x;
  return x % DT_EVERY == 0;
}

/* One wrapper per entry: the original, sampled when the thread is
 * tracked. */
#define DT_WRAP(name, params, args)                                       \
  static CUresult(CUDAAPI *dt_orig_##name) params;                         \
  static CUresult CUDAAPI dt_##name params {                              \
    dt_thread *t = dt_self;                                                \
    if (t == NULL || !dt_pick()) return dt_orig_##name args;               \
    uint64_t c0 = dt_thread_cpu_ns();                                      \
    CUresult r = dt_orig_##name args;                                      \
    uint64_t dt_d_ = dt_thread_cpu_ns() - c0;                              \
    dt_d_ = dt_d_ > dt_calib_ns ? dt_d_ - dt_calib_ns : 0;                 \
    atomic_fetch_add_explicit(&t->driver_ns, dt_d_ * DT_EVERY,             \
                              memory_order_relaxed);                       \
    return r;                                                              \
  }

DT_WRAP(cuCtxGetCurrent, (CUcontext * pctx), (pctx))
DT_WRAP(cuCtxSetCurrent, (CUcontext ctx), (ctx))
DT_WRAP(cuEventCreate, (CUevent * e, unsigned int f), (e, f))
DT_WRAP(cuEventRecord, (CUevent e, CUstream s), (e, s))
DT_WRAP(cuEventQuery, (CUevent e), (e))
DT_WRAP(cuStreamQuery, (CUstream s), (s))
DT_WRAP(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int f), (s, e, f))
DT_WRAP(cuLaunchHostFunc, (CUstream s, CUhostFn fn, void *arg), (s, fn, arg))
DT_WRAP(cuMemAlloc, (CUdeviceptr * p, size_t n), (p, n))
DT_WRAP(cuMemHostAlloc, (void **p, size_t n, unsigned int f), (p, n, f))
DT_WRAP(cuMemAllocAsync, (CUdeviceptr * p, size_t n, CUstream s), (p, n, s))
DT_WRAP(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s))
DT_WRAP(cuMemcpyHtoDAsync,
        (CUdeviceptr d, const void *s, size_t n, CUstream st), (d, s, n, st))
DT_WRAP(cuMemcpyDtoHAsync, (void *d, CUdeviceptr s, size_t n, CUstream st),
        (d, s, n, st))
DT_WRAP(cuMemcpyDtoDAsync,
        (CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st), (d, s, n, st))
DT_WRAP(cuMemsetD8Async,
        (CUdeviceptr d, unsigned char v, size_t n, CUstream st), (d, v, n, st))
DT_WRAP(cuLaunchKernel,
        (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
         unsigned int bx, unsigned int by, unsigned int bz, unsigned int sh,
         CUstream s, void **params, void **extra),
        (f, gx, gy, gz, bx, by, bz, sh, s, params, extra))

void dt_wrap(slc_driver *d) {
  /* The cost of an empty bracket: the least of many back-to-back reads. */
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 1000; i++) {
    uint64_t a = dt_thread_cpu_ns(), b = dt_thread_cpu_ns();
    if (b - a < best) best = b - a;
  }
  dt_calib_ns = best;
#define DT_SET(name)                 \
  dt_orig_##name = d->pfn_##name;    \
  d->pfn_##name = dt_##name;
  DT_SET(cuCtxGetCurrent)
  DT_SET(cuCtxSetCurrent)
  DT_SET(cuEventCreate)
  DT_SET(cuEventRecord)
  DT_SET(cuEventQuery)
  DT_SET(cuStreamQuery)
  DT_SET(cuStreamWaitEvent)
  DT_SET(cuLaunchHostFunc)
  DT_SET(cuMemAlloc)
  DT_SET(cuMemHostAlloc)
  DT_SET(cuMemAllocAsync)
  DT_SET(cuMemFreeAsync)
  DT_SET(cuMemcpyHtoDAsync)
  DT_SET(cuMemcpyDtoHAsync)
  DT_SET(cuMemcpyDtoDAsync)
  DT_SET(cuMemsetD8Async)
  DT_SET(cuLaunchKernel)
#undef DT_SET
}

static void dt_seed(const void *t) {
  dt_rng = ((uint64_t)(uintptr_t)t * 0x9E3779B97F4A7C15u) | 1u;
}

void dt_track(dt_thread *t) {
  memset(t, 0, sizeof(*t));
  dt_seed(t);
  if (pthread_getcpuclockid(pthread_self(), &t->cpu) != 0)
    t->cpu = CLOCK_THREAD_CPUTIME_ID; /* read by the thread itself only */
  dt_self = t;
}

void dt_untrack(void) { dt_self = NULL; }

bool dt_tracked(void) { return dt_self != NULL; }

void dt_track_keep_thread(void) {
  if (dt_self != NULL) return;
  int k = atomic_fetch_add_explicit(&dt_n_keep, 1, memory_order_relaxed);
  if (k >= DT_MAX_KEEP_THREADS) return;
  dt_thread *t = &dt_keep[k].t; /* this thread's from now on */
  if (pthread_getcpuclockid(pthread_self(), &t->cpu) != 0) return;
  dt_seed(t);
  dt_self = t;
  /* Pairs with the acquire in dt_read_keep_threads: cpu is written. */
  atomic_store_explicit(&dt_keep[k].ready, 1, memory_order_release);
}

void dt_bench_add(uint64_t ns) {
  dt_thread *t = dt_self;
  if (t != NULL)
    atomic_fetch_add_explicit(&t->bench_ns, ns, memory_order_relaxed);
}

dt_sample dt_read(dt_thread *t) {
  return (dt_sample){
      dt_clock_ns(t->cpu),
      atomic_load_explicit(&t->driver_ns, memory_order_relaxed),
      atomic_load_explicit(&t->bench_ns, memory_order_relaxed)};
}

dt_sample dt_read_keep_threads(void) {
  dt_sample sum = {0, 0, 0};
  for (int k = 0; k < DT_MAX_KEEP_THREADS; k++) {
    if (!atomic_load_explicit(&dt_keep[k].ready, memory_order_acquire))
      continue;
    dt_sample s = dt_read(&dt_keep[k].t);
    sum.cpu_ns += s.cpu_ns;
    sum.driver_ns += s.driver_ns;
    sum.bench_ns += s.bench_ns;
  }
  return sum;
}
