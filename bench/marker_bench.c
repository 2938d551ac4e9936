/*
 * marker_bench — the candidate completion markers of the progress engine
 * (issue 9), side by side in one run, on the raw driver table (no layer):
 * which one should cuda/engine.c place on streams?
 *
 * MARKERS (a stream gets one after its work; an "engine" thread learns that
 * the work before it completed)
 *   event    cuEventRecord of a pooled event (CU_EVENT_DISABLE_TIMING); the
 *            engine polls the oldest pending one with cuEventQuery.
 *   hostfn   cuLaunchHostFunc of a function that stores the mark into an
 *            atomic word; the engine reads the word. It costs a launch, runs
 *            on the driver's callback thread and holds the stream while it
 *            runs, so it can only post the mark.
 *   write    cuStreamWriteValue64 of the mark into pinned, device-mapped host
 *            memory (cuMemHostAlloc DEVICEMAP + cuMemHostGetDevicePointer);
 *            the engine reads it with a plain (acquire) load: no driver call
 *            to poll. The device attributes that announce stream memory
 *            operations are printed (the _V1 ones read 0 on an H200 although
 *            the call works: the call's own result decides).
 *   blocking a CU_EVENT_BLOCKING_SYNC event, waited on by the engine thread
 *            with cuEventSynchronize (the thread sleeps in the driver).
 * ENGINE POLICIES (how the engine waits for a pending marker)
 *   spin     re-checks at once (a busy core: the latency floor)
 *   pollN    re-checks every N microseconds (nanosleep, timer slack 1 ns)
 *   wake     hostfn only: the callback wakes the engine (futex)
 *   block    blocking only: cuEventSynchronize
 *   With nothing pending, every engine parks on a futex that the issuer
 *   wakes, as the real engine parks on its condition: idle costs nothing.
 *
 * SCENARIOS, for each (marker, policy)
 *   latency  N times, one at a time: launch a kernel that spins for
 *            --kernel-us on %globaltimer and then stores %globaltimer into a
 *            device-mapped host word (its "end stamp"), place the marker,
 *            wait until the engine saw it. Latency = the engine's
 *            observation time (CLOCK_MONOTONIC) - the end stamp moved to the
 *            host clock. The move: a calibration runs the same kernel while
 *            a host thread spins reading the stamp word; offset = min over
 *            samples of (host time the stamp became visible - stamp). So a
 *            latency of 0 means "as soon as a host thread spinning on the
 *            kernel's own store would have seen it" (PCIe write latency and
 *            the timer's granularity are inside the offset; the spread of
 *            the calibration is printed). Also the issuing thread's cost of
 *            the marker call and of the launch (p50), and the engine's CPU
 *            time (CLOCK_THREAD_CPUTIME_ID) per observed marker.
 *            Checked: when the engine sees a marker, the kernel's stamp is
 *            already visible (a marker seen early is an error, exit 1).
 *   rate     --rate-ops launches of an empty kernel paced at --rate per
 *            second, a marker after each, at most 512 pending: the engine's
 *            CPU time per released operation, the marker's issue cost when
 *            the stream is busy, the achieved rate.
 *   idle     one marker pending behind a --idle-ms kernel: the engine's CPU
 *            share while it waits (target: < 1 % of a core).
 *
 * DRIVERS: --driver=libcuda (default; no library: "SKIPPED", exit 0 unless
 * --require-gpu) or --driver=host, the host executor of tests/cuda/ (its
 * streams are threads, its kernels host functions; every code path runs,
 * the times say nothing about GPUs). --smoke: tiny sizes for CI.
 * Exit: 0 done (or skipped), 1 a failure, 2 bad options.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench/stamp.h"
#include "cuda/driver.h"
#include "cuda/host_executor.h"





/* ---- Options, errors ---------------------------------------------------- */

static struct {
  bool host, require_gpu, smoke;
  const char *libcuda, *json, *only;
  unsigned samples, kernel_us, rate, rate_ops, idle_ms;
} opt = {.samples = 3000,
         .kernel_us = 10,
         .rate = 100000,
         .rate_ops = 30000,
         .idle_ms = 50};

static slc_driver drv;

static void die(const char *what, CUresult r, int line) {
  const char *name = NULL;
  if (drv.pfn_cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "?";
  fprintf(stderr, "marker_bench: %s failed (line %d): %s (%d)\n", what, line,
          name, (int)r);
  fflush(stdout);
  _exit(1);
}
#define CK(call)                                    \
  do {                                              \
    CUresult ck_r_ = (call);                        \
    if (ck_r_ != CUDA_SUCCESS) die(#call, ck_r_, __LINE__); \
  } while (0)

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) {
    fprintf(stderr, "marker_bench: out of memory\n");
    _exit(1);
  }
  return p;
}

static long futex(atomic_uint *addr, int op, unsigned val) {
  return syscall(SYS_futex, (unsigned *)addr, op, val, NULL, NULL, 0);
}

/* ---- One configuration ------------------------------------------------ */

enum { M_EVENT, M_HOSTFN, M_WRITE, M_BLOCKING };
static const char *const method_names[] = {"event", "hostfn", "write",
                                           "blocking"};
#define POLICY_SPIN 0
#define POLICY_WAKE -1  /* hostfn: the callback wakes the engine */
#define POLICY_BLOCK -2 /* blocking: cuEventSynchronize */

#define POOL 1024    /* events per configuration (a ring) */
#define MAX_PENDING 512

typedef struct run {
  int method, policy; /* policy > 0: poll every `policy` microseconds */
  CUcontext ctx;
  CUstream stream;
  CUevent events[POOL];
  /* The issuer publishes markers by count; the engine answers by count. */
  atomic_uint issued;   /* markers placed */
  atomic_uint gen;      /* futex word of a parked engine: bumped by a
                         * placement that sees it parked, and by stop */
  atomic_uint observed; /* markers the engine saw complete */
  atomic_int engine_parked;
  atomic_uint posted; /* hostfn: marks the callbacks posted (futex word) */
  atomic_int engine_waits_post;
  atomic_int stop;
  uint64_t *obs_ns;           /* per marker: when the engine saw it */
  uint64_t *mark_word;        /* write: pinned, device-mapped */
  CUdeviceptr mark_word_d;
  uint64_t engine_cpu_ns;     /* written by the engine before it exits */
  uint64_t engine_checks;     /* completion checks made */
  uint64_t *stamps;           /* latency: the kernel's end stamps, mapped */
  CUdeviceptr stamps_d;
  bool check_stamps;          /* latency scenario: verify stamp visible */
  atomic_long early;          /* markers seen before their kernel's stamp */
} run;

static CUfunction g_fn;

static void hostfn_post(void *arg) {
  run *r = (run *)((uintptr_t *)arg)[0];
  unsigned mark = (unsigned)((uintptr_t *)arg)[1];
  /* Pairs with the engine's acquire load: the stream's work before the
   * callback happened-before the engine's release. */
  atomic_store_explicit(&r->posted, mark, memory_order_seq_cst);
  if (atomic_load_explicit(&r->engine_waits_post, memory_order_seq_cst))
    futex(&r->posted, FUTEX_WAKE_PRIVATE, 1);
}

/* Callback arguments: (run, mark) pairs, one per marker, kept until the end. */
static uintptr_t (*hostfn_args)[2];

static bool marker_done(run *r, unsigned i) {
  r->engine_checks++;
  switch (r->method) {
    case M_EVENT: {
      CUresult q = drv.pfn_cuEventQuery(r->events[i % POOL]);
      if (q == CUDA_ERROR_NOT_READY) return false;
      CK(q);
      return true;
    }
    case M_BLOCKING:
      CK(drv.pfn_cuEventSynchronize(r->events[i % POOL]));
      return true;
    case M_WRITE:
      /* Pairs with the device's write after the stream's earlier work. */
      return __atomic_load_n(r->mark_word, __ATOMIC_ACQUIRE) >= (uint64_t)i + 1;
    default:
      return atomic_load_explicit(&r->posted, memory_order_acquire) >= i + 1;
  }
}

static void engine_wait(run *r, unsigned i) {
  if (r->policy > 0) {
    struct timespec ts = {0, (long)r->policy * 1000};
    nanosleep(&ts, NULL);
  } else if (r->policy == POLICY_WAKE) {
    atomic_store_explicit(&r->engine_waits_post, 1, memory_order_seq_cst);
    unsigned seen = atomic_load_explicit(&r->posted, memory_order_seq_cst);
    if (seen < i + 1) futex(&r->posted, FUTEX_WAIT_PRIVATE, seen);
    atomic_store_explicit(&r->engine_waits_post, 0, memory_order_relaxed);
  }
}

static void pin_to(int nth) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return;
  int n = CPU_COUNT(&set);
  if (n < 4) return; /* too few to spread the threads out */
  int k = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    if (k++ == nth) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      (void)sched_setaffinity(0, sizeof(one), &one);
      return;
    }
  }
}

static void *engine_main(void *arg) {
  run *r = arg;
  pin_to(3);
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  CK(drv.pfn_cuCtxSetCurrent(r->ctx));
  uint64_t cpu0 = bench_thread_cpu_ns();
  unsigned next = 0;
  for (;;) {
    unsigned iss = atomic_load_explicit(&r->issued, memory_order_acquire);
    if (next == iss) {
      if (atomic_load_explicit(&r->stop, memory_order_acquire)) break;
      /* Park until the issuer places a marker or stops us (Dekker with
       * place_marker and engine_stop: either they see `parked` and bump
       * gen after we read it, or we see their store). */
      unsigned g = atomic_load_explicit(&r->gen, memory_order_seq_cst);
      atomic_store_explicit(&r->engine_parked, 1, memory_order_seq_cst);
      if (atomic_load_explicit(&r->issued, memory_order_seq_cst) == iss &&
          !atomic_load_explicit(&r->stop, memory_order_seq_cst))
        futex(&r->gen, FUTEX_WAIT_PRIVATE, g);
      atomic_store_explicit(&r->engine_parked, 0, memory_order_relaxed);
      continue;
    }
    while (next < iss) {
      if (!marker_done(r, next)) {
        engine_wait(r, next);
        continue;
      }
      uint64_t t = bench_now_ns();
      if (r->check_stamps &&
          __atomic_load_n(&r->stamps[next], __ATOMIC_ACQUIRE) == 0)
        atomic_fetch_add(&r->early, 1);
      r->obs_ns[next] = t;
      next++;
      atomic_store_explicit(&r->observed, next, memory_order_release);
    }
  }
  r->engine_cpu_ns = bench_thread_cpu_ns() - cpu0;
  return NULL;
}

/* Places marker i on the stream; returns its cost on this thread. */
static uint64_t place_marker(run *r, unsigned i) {
  uint64_t t0 = bench_now_ns();
  switch (r->method) {
    case M_EVENT:
    case M_BLOCKING:
      CK(drv.pfn_cuEventRecord(r->events[i % POOL], r->stream));
      break;
    case M_WRITE:
      CK(drv.pfn_cuStreamWriteValue64(r->stream, r->mark_word_d,
                                      (cuuint64_t)i + 1, 0));
      break;
    default:
      CK(drv.pfn_cuLaunchHostFunc(r->stream, hostfn_post, hostfn_args[i]));
      break;
  }
  uint64_t t = bench_now_ns() - t0;
  /* Publish, then wake a parked engine (Dekker with engine_main). */
  atomic_store_explicit(&r->issued, i + 1, memory_order_seq_cst);
  if (atomic_load_explicit(&r->engine_parked, memory_order_seq_cst)) {
    atomic_fetch_add_explicit(&r->gen, 1, memory_order_seq_cst);
    futex(&r->gen, FUTEX_WAKE_PRIVATE, 1);
  }
  return t;
}

static uint64_t launch(run *r, uint64_t ns, CUdeviceptr out) {
  void *params[] = {&ns, &out};
  uint64_t t0 = bench_now_ns();
  CK(drv.pfn_cuLaunchKernel(g_fn, 1, 1, 1, 1, 1, 1, 0, r->stream, params,
                            NULL));
  return bench_now_ns() - t0;
}




typedef struct result {
  char name[32];
  double issue_p50, launch_p50;          /* ns, latency scenario */
  double lat_p50, lat_p99, lat_p999, lat_max; /* us */
  double cpu_per_marker_us;              /* latency scenario */
  double rate_cpu_per_op_ns, rate_issue_ns, rate_launch_ns, rate_kops;
  double idle_cpu_pct;
  double checks_per_marker;
  long early;
} result;

static int64_t g_offset_ns; /* host clock - device stamp, calibrated */

static run *run_new(int method, int policy, CUcontext ctx) {
  run *r = xcalloc(1, sizeof(*r));
  r->method = method;
  r->policy = policy;
  r->ctx = ctx;
  CK(drv.pfn_cuStreamCreate(&r->stream, CU_STREAM_NON_BLOCKING));
  if (method == M_EVENT || method == M_BLOCKING) {
    unsigned flags = CU_EVENT_DISABLE_TIMING;
    if (method == M_BLOCKING) flags |= CU_EVENT_BLOCKING_SYNC;
    for (int i = 0; i < POOL; i++)
      CK(drv.pfn_cuEventCreate(&r->events[i], flags));
  }
  if (method == M_WRITE) {
    void *p = NULL;
    CK(drv.pfn_cuMemHostAlloc(&p, 64,
                              CU_MEMHOSTALLOC_PORTABLE |
                                  CU_MEMHOSTALLOC_DEVICEMAP));
    r->mark_word = p;
    *r->mark_word = 0;
    CK(drv.pfn_cuMemHostGetDevicePointer(&r->mark_word_d, p, 0));
  }
  return r;
}

static void run_free(run *r) {
  CK(drv.pfn_cuStreamSynchronize(r->stream));
  CK(drv.pfn_cuStreamDestroy(r->stream));
  if (r->method == M_EVENT || r->method == M_BLOCKING)
    for (int i = 0; i < POOL; i++) CK(drv.pfn_cuEventDestroy(r->events[i]));
  if (r->mark_word != NULL) CK(drv.pfn_cuMemFreeHost(r->mark_word));
  free(r->obs_ns);
  free(r);
}

static void engine_start(run *r, pthread_t *t, unsigned n) {
  r->obs_ns = xcalloc(n + 1, sizeof(uint64_t));
  for (unsigned i = 0; i < n && i < opt.samples + opt.rate_ops + 8; i++) {
    hostfn_args[i][0] = (uintptr_t)r;
    hostfn_args[i][1] = i + 1;
  }
  if (pthread_create(t, NULL, engine_main, r) != 0) {
    fprintf(stderr, "marker_bench: pthread_create failed\n");
    _exit(1);
  }
}

static void engine_stop(run *r, pthread_t t) {
  atomic_store_explicit(&r->stop, 1, memory_order_seq_cst);
  atomic_fetch_add_explicit(&r->gen, 1, memory_order_seq_cst);
  futex(&r->gen, FUTEX_WAKE_PRIVATE, 1);
  pthread_join(t, NULL);
}

static void wait_observed(run *r, unsigned n) {
  while (atomic_load_explicit(&r->observed, memory_order_acquire) < n) {
  }
}

/* The latency scenario. */
static void scenario_latency(int method, int policy, CUcontext ctx,
                             result *out) {
  unsigned n = opt.samples;
  run *r = run_new(method, policy, ctx);
  void *p = NULL;
  CK(drv.pfn_cuMemHostAlloc(&p, (n + 1) * sizeof(uint64_t),
                            CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
  r->stamps = p;
  memset(r->stamps, 0, (n + 1) * sizeof(uint64_t));
  CK(drv.pfn_cuMemHostGetDevicePointer(&r->stamps_d, p, 0));
  r->check_stamps = true;
  uint64_t *issue = xcalloc(n, sizeof(uint64_t));
  uint64_t *lnch = xcalloc(n, sizeof(uint64_t));
  uint64_t *lat = xcalloc(n, sizeof(uint64_t));
  pthread_t t;
  engine_start(r, &t, n);
  for (unsigned i = 0; i < n; i++) {
    lnch[i] = launch(r, (uint64_t)opt.kernel_us * 1000,
                     r->stamps_d + i * sizeof(uint64_t));
    issue[i] = place_marker(r, i);
    wait_observed(r, i + 1);
  }
  engine_stop(r, t);
  for (unsigned i = 0; i < n; i++) {
    int64_t end = (int64_t)__atomic_load_n(&r->stamps[i], __ATOMIC_ACQUIRE) +
                  g_offset_ns;
    int64_t d = (int64_t)r->obs_ns[i] - end;
    lat[i] = d < 0 ? 0 : (uint64_t)d;
  }
  qsort(issue, n, sizeof(uint64_t), bench_cmp_u64);
  qsort(lnch, n, sizeof(uint64_t), bench_cmp_u64);
  qsort(lat, n, sizeof(uint64_t), bench_cmp_u64);
  out->issue_p50 = bench_pctl(issue, n, 0.5);
  out->launch_p50 = bench_pctl(lnch, n, 0.5);
  out->lat_p50 = bench_pctl(lat, n, 0.5) / 1e3;
  out->lat_p99 = bench_pctl(lat, n, 0.99) / 1e3;
  out->lat_p999 = bench_pctl(lat, n, 0.999) / 1e3;
  out->lat_max = (double)lat[n - 1] / 1e3;
  out->cpu_per_marker_us = (double)r->engine_cpu_ns / n / 1e3;
  out->checks_per_marker = (double)r->engine_checks / n;
  out->early = atomic_load(&r->early);
  CK(drv.pfn_cuStreamSynchronize(r->stream));
  CK(drv.pfn_cuMemFreeHost(p));
  run_free(r);
  free(issue);
  free(lnch);
  free(lat);
}

/* The rate scenario: paced launches, a marker after each. */
static void scenario_rate(int method, int policy, CUcontext ctx, result *out) {
  unsigned n = opt.rate_ops;
  run *r = run_new(method, policy, ctx);
  pthread_t t;
  engine_start(r, &t, n);
  uint64_t issue = 0, lnch = 0, period = 1000000000ull / opt.rate;
  uint64_t t0 = bench_now_ns();
  for (unsigned i = 0; i < n; i++) {
    while (bench_now_ns() < t0 + i * period) {
    }
    while (i - atomic_load_explicit(&r->observed, memory_order_acquire) >=
           MAX_PENDING) {
    }
    lnch += launch(r, 0, 0);
    issue += place_marker(r, i);
  }
  wait_observed(r, n);
  uint64_t wall = bench_now_ns() - t0;
  engine_stop(r, t);
  out->rate_cpu_per_op_ns = (double)r->engine_cpu_ns / n;
  out->rate_issue_ns = (double)issue / n;
  out->rate_launch_ns = (double)lnch / n;
  out->rate_kops = (double)n / ((double)wall / 1e9) / 1e3;
  run_free(r);
}

/* The idle scenario: one marker pending behind a long kernel. */
static void scenario_idle(int method, int policy, CUcontext ctx, result *out) {
  run *r = run_new(method, policy, ctx);
  pthread_t t;
  engine_start(r, &t, 4);
  /* Warm the path first: one quick marker. */
  launch(r, 0, 0);
  place_marker(r, 0);
  wait_observed(r, 1);
  uint64_t w0 = bench_now_ns();
  launch(r, (uint64_t)opt.idle_ms * 1000000, 0);
  place_marker(r, 1);
  wait_observed(r, 2);
  uint64_t wall = bench_now_ns() - w0;
  engine_stop(r, t);
  out->idle_cpu_pct = 100.0 * (double)r->engine_cpu_ns / (double)wall;
  run_free(r);
}

/* Calibrates g_offset_ns: host clock minus device stamp, the minimum over
 * samples of (host time the stamp became visible - stamp). */
static void calibrate(CUcontext ctx, FILE *log) {
  run *r = run_new(M_EVENT, POLICY_SPIN, ctx);
  unsigned n = opt.smoke ? 20 : 400;
  void *p = NULL;
  CK(drv.pfn_cuMemHostAlloc(&p, 64, CU_MEMHOSTALLOC_PORTABLE |
                                        CU_MEMHOSTALLOC_DEVICEMAP));
  uint64_t *word = p;
  CUdeviceptr word_d;
  CK(drv.pfn_cuMemHostGetDevicePointer(&word_d, p, 0));
  int64_t *off = xcalloc(n, sizeof(int64_t));
  for (unsigned i = 0; i < n; i++) {
    __atomic_store_n(word, 0, __ATOMIC_RELAXED);
    launch(r, 5000, word_d);
    uint64_t s;
    while ((s = __atomic_load_n(word, __ATOMIC_ACQUIRE)) == 0) {
    }
    off[i] = (int64_t)bench_now_ns() - (int64_t)s;
    CK(drv.pfn_cuStreamSynchronize(r->stream));
  }
  int64_t mn = off[0], mx = off[0];
  for (unsigned i = 1; i < n; i++) {
    if (off[i] < mn) mn = off[i];
    if (off[i] > mx) mx = off[i];
  }
  qsort(off, n, sizeof(int64_t), bench_cmp_i64);
  g_offset_ns = mn;
  fprintf(log,
          "calibration: %u samples, host-visible minus device stamp: min %" PRId64
          " ns, median %" PRId64 " ns, max %" PRId64 " ns (latency 0 = min)\n",
          n, mn, off[n / 2], mx);
  free(off);
  CK(drv.pfn_cuMemFreeHost(p));
  run_free(r);
}

/* ---- Main ------------------------------------------------------------------ */

static int usage(void) {
  fprintf(stderr,
          "usage: marker_bench [--driver=libcuda|host] [--libcuda PATH]\n"
          "  [--require-gpu] [--smoke] [--json FILE] [--samples N]\n"
          "  [--kernel-us US] [--rate OPS_PER_S] [--rate-ops N] [--idle-ms MS]\n"
          "  [--only event,hostfn,write,blocking] [--print-ptx]\n");
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
    } else if (strcmp(a, "--only") == 0) {
      if ((opt.only = VAL()) == NULL) return usage();
    } else if (strcmp(a, "--require-gpu") == 0) {
      opt.require_gpu = true;
    } else if (strcmp(a, "--smoke") == 0) {
      opt.smoke = true;
      opt.samples = 40;
      opt.rate_ops = 300;
      opt.rate = 20000;
      opt.idle_ms = 5;
    } else if (strcmp(a, "--print-ptx") == 0) {
      fputs(bench_stamp_ptx, stdout);
      return 0;
    } else {
      unsigned *dst = strcmp(a, "--samples") == 0     ? &opt.samples
                      : strcmp(a, "--kernel-us") == 0 ? &opt.kernel_us
                      : strcmp(a, "--rate") == 0      ? &opt.rate
                      : strcmp(a, "--rate-ops") == 0  ? &opt.rate_ops
                      : strcmp(a, "--idle-ms") == 0   ? &opt.idle_ms
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
  CUresult ir = drv.pfn_cuInit(0);
  int ndev = 0;
  if (ir == CUDA_SUCCESS) ir = drv.pfn_cuDeviceGetCount(&ndev);
  if (ir != CUDA_SUCCESS || ndev == 0) {
    printf("SKIPPED: no usable CUDA device (CUresult %d, %d devices)\n", (int)ir,
           ndev);
    return opt.require_gpu ? 1 : 0;
  }
  CUdevice dev;
  CUcontext ctx;
  CK(drv.pfn_cuDeviceGet(&dev, 0));
  CK(drv.pfn_cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(drv.pfn_cuCtxSetCurrent(ctx));
  char name[256] = "?";
  CK(drv.pfn_cuDeviceGetName(name, sizeof(name), dev));
  int version = 0;
  CK(drv.pfn_cuDriverGetVersion(&version));
  printf("device: %s, driver %d, %s\n", name, version, drv.origin);
  static const struct {
    CUdevice_attribute a;
    const char *n;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
       "CAN_USE_64_BIT_STREAM_MEM_OPS"},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1,
       "CAN_USE_64_BIT_STREAM_MEM_OPS_V1"},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1,
       "CAN_USE_STREAM_MEM_OPS_V1"},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "UNIFIED_ADDRESSING"},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
       "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM"},
  };
  int attr_vals[5];
  for (size_t i = 0; i < 5; i++) {
    CUresult ar = drv.pfn_cuDeviceGetAttribute(&attr_vals[i], attrs[i].a, dev);
    if (ar != CUDA_SUCCESS) attr_vals[i] = -1;
    printf("attribute %s = %d\n", attrs[i].n, attr_vals[i]);
  }

  CUmodule mod;
  CK(drv.pfn_cuModuleLoadData(&mod, bench_stamp_ptx));
  CK(drv.pfn_cuModuleGetFunction(&g_fn, mod, BENCH_STAMP_KERNEL));
  hostfn_args = xcalloc(opt.samples + opt.rate_ops + 8, sizeof(*hostfn_args));

  calibrate(ctx, stdout);

  /* Whether cuStreamWriteValue64 into mapped host memory works here: the
   * call's result decides, not the attributes. */
  bool write_ok = true;
  {
    run *r = run_new(M_WRITE, POLICY_SPIN, ctx);
    CUresult wr = drv.pfn_cuStreamWriteValue64(r->stream, r->mark_word_d, 7, 0);
    if (wr == CUDA_SUCCESS) wr = drv.pfn_cuStreamSynchronize(r->stream);
    if (wr == CUDA_SUCCESS && __atomic_load_n(r->mark_word, __ATOMIC_ACQUIRE) != 7)
      wr = CUDA_ERROR_UNKNOWN;
    const char *wn = "?";
    (void)drv.pfn_cuGetErrorName(wr, &wn);
    printf("cuStreamWriteValue64 to mapped host memory: %s\n",
           wr == CUDA_SUCCESS ? "works" : wn);
    write_ok = wr == CUDA_SUCCESS;
    if (write_ok) run_free(r);
  }

  static const struct {
    int method, policy;
  } configs[] = {
      {M_EVENT, POLICY_SPIN},   {M_EVENT, 5},       {M_EVENT, 20},
      {M_EVENT, 50},            {M_WRITE, POLICY_SPIN}, {M_WRITE, 5},
      {M_WRITE, 20},            {M_WRITE, 50},      {M_HOSTFN, POLICY_SPIN},
      {M_HOSTFN, POLICY_WAKE},  {M_BLOCKING, POLICY_BLOCK},
  };
  const size_t n_configs = sizeof(configs) / sizeof(configs[0]);
  result *res = xcalloc(n_configs, sizeof(result));
  printf("kernel %u us, %u latency samples; rate scenario %u ops at %u/s; "
         "idle kernel %u ms\n",
         opt.kernel_us, opt.samples, opt.rate_ops, opt.rate, opt.idle_ms);
  printf("%-14s | %8s %8s | %8s %8s %8s %8s | %8s %6s | %8s %8s %8s %7s | %7s\n",
         "marker/policy", "issue", "launch", "lat p50", "p99", "p99.9", "max",
         "cpu/mk", "chk/mk", "cpu/op", "issue", "launch", "kops/s", "idle%");
  printf("%-14s | %8s %8s | %8s %8s %8s %8s | %8s %6s | %8s %8s %8s %7s | %7s\n",
         "", "ns p50", "ns p50", "us", "us", "us", "us", "us", "", "ns", "ns",
         "ns", "", "cpu");
  int failed = 0;
  size_t done = 0;
  for (size_t c = 0; c < n_configs; c++) {
    int m = configs[c].method, pol = configs[c].policy;
    if (opt.only != NULL && strstr(opt.only, method_names[m]) == NULL) continue;
    if (m == M_WRITE && !write_ok) continue;
    result *o = &res[done++];
    if (pol > 0)
      snprintf(o->name, sizeof(o->name), "%s/poll%d", method_names[m], pol);
    else
      snprintf(o->name, sizeof(o->name), "%s/%s", method_names[m],
               pol == POLICY_SPIN   ? "spin"
               : pol == POLICY_WAKE ? "wake"
                                    : "block");
    scenario_latency(m, pol, ctx, o);
    scenario_rate(m, pol, ctx, o);
    scenario_idle(m, pol, ctx, o);
    printf("%-14s | %8.0f %8.0f | %8.2f %8.2f %8.2f %8.2f | %8.2f %6.2f | "
           "%8.0f %8.0f %8.0f %7.1f | %7.2f\n",
           o->name, o->issue_p50, o->launch_p50, o->lat_p50, o->lat_p99,
           o->lat_p999, o->lat_max, o->cpu_per_marker_us, o->checks_per_marker,
           o->rate_cpu_per_op_ns, o->rate_issue_ns, o->rate_launch_ns,
           o->rate_kops, o->idle_cpu_pct);
    fflush(stdout);
    if (o->early != 0) {
      fprintf(stderr, "FAILED: %s: %ld markers seen before their kernel's "
              "stamp was visible\n", o->name, o->early);
      failed = 1;
    }
  }
  CK(drv.pfn_cuModuleUnload(mod));
  CK(drv.pfn_cuDevicePrimaryCtxRelease(dev));
  if (opt.json != NULL) {
    FILE *f = fopen(opt.json, "w");
    if (f == NULL) {
      fprintf(stderr, "marker_bench: cannot write %s\n", opt.json);
      return 1;
    }
    fprintf(f, "{\"device\": \"%s\", \"driver_version\": %d, \"kernel_us\": %u,"
            " \"samples\": %u, \"rate\": %u, \"rate_ops\": %u, \"idle_ms\": %u,"
            " \"offset_ns\": %" PRId64 ",\n \"attributes\": {",
            name, version, opt.kernel_us, opt.samples, opt.rate, opt.rate_ops,
            opt.idle_ms, g_offset_ns);
    for (size_t i = 0; i < 5; i++)
      fprintf(f, "%s\"%s\": %d", i ? ", " : "", attrs[i].n, attr_vals[i]);
    fprintf(f, "},\n \"rows\": [\n");
    for (size_t i = 0; i < done; i++) {
      const result *o = &res[i];
      fprintf(f,
              "  {\"marker\": \"%s\", \"issue_ns_p50\": %.0f, \"launch_ns_p50\":"
              " %.0f, \"lat_us_p50\": %.3f, \"lat_us_p99\": %.3f, "
              "\"lat_us_p999\": %.3f, \"lat_us_max\": %.3f, "
              "\"engine_cpu_us_per_marker\": %.3f, \"checks_per_marker\": %.3f,"
              " \"rate_engine_cpu_ns_per_op\": %.1f, \"rate_issue_ns\": %.1f, "
              "\"rate_launch_ns\": %.1f, \"rate_kops\": %.2f, "
              "\"idle_cpu_pct\": %.3f}%s\n",
              o->name, o->issue_p50, o->launch_p50, o->lat_p50, o->lat_p99,
              o->lat_p999, o->lat_max, o->cpu_per_marker_us,
              o->checks_per_marker, o->rate_cpu_per_op_ns, o->rate_issue_ns,
              o->rate_launch_ns, o->rate_kops, o->idle_cpu_pct,
              i + 1 < done ? "," : "");
    }
    fprintf(f, " ]}\n");
    fclose(f);
  }
  free(res);
  free(hostfn_args);
  if (opt.host) {
    long leaked = hd_shutdown();
    if (leaked != 0) {
      fprintf(stderr, "FAILED: host executor: %ld objects leaked\n", leaked);
      failed = 1;
    }
  }
  printf(failed ? "FAILED\n" : "all markers observed in order, none early\n");
  return failed;
}
