/*
 * wake_bench — what one wake-up of a sleeping thread costs in CPU, and what
 * the progress engine's own work per wake-up costs (issue 9: the engine's
 * CPU per released operation is its wake-ups; the H200 guest measured
 * ~12 us of process CPU per wake-up of the engine thread at 100 k ops/s).
 *
 * PART 1, WAITS. A worker thread loops `wait T` for each primitive below,
 * for T in 5, 20, 50, 100, 200 us, with its timer slack set to 1 ns and
 * left at the default (50 us), alone and beside a thread that spins (as
 * engine_bench's rate scenario's request thread does). Per iteration:
 * wall time, the worker's CPU (CLOCK_THREAD_CPUTIME_ID) and the process's
 * CPU (getrusage RUSAGE_SELF) less the spinner's own CPU — the quantity
 * engine_bench calls "eng CPU".
 *   nanosleep      relative nanosleep(T) (the engine thread's wait)
 *   abs            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, now + T)
 *   futex          FUTEX_WAIT_PRIVATE on a word nobody changes, timeout T
 *   futex_abs      FUTEX_WAIT_BITSET_PRIVATE, absolute CLOCK_MONOTONIC
 *   timerfd        a periodic timerfd of period T, read() each expiry
 *   epoll          the same timerfd, waited for with epoll_wait
 *   spin2+sleep    2 us of spinning on the clock, then nanosleep(T - 2 us)
 *   spin           spinning T on the clock (CPU = wall: the reference)
 *   sleep+q+r      nanosleep(T), then cuEventQuery of a completed event and
 *                  cuEventRecord on an idle stream (an engine wake-up's
 *                  driver calls; only with a driver)
 *
 * PART 2, THE ENGINE'S WORK PER WAKE-UP (with a driver), thread CPU and
 * wall per call, averaged over a loop (clock reads subtracted):
 *   cuCtxGetCurrent, cuEventQuery (completed), cuEventRecord (idle stream),
 *   slc_launch of an empty kernel (an issue, for scale), cuStreamQuery of
 *   the idle stream (the engine's probe: sl_engine.h, PROBING), and
 *   slc_engine_poll releasing K operations (--keeps, default 9: what one
 *   wake-up of the rate scenario releases), each with a keep that counts:
 *   K launches, the stream synchronised by the raw driver (keeps not run),
 *   then one timed poll — its query and its K keeps.
 *
 * --driver=libcuda (default; no library: part 1 only) or --driver=host (the
 * host executor; the times say nothing about a GPU). --smoke: tiny.
 * --iters-ms MS: the wall time per row (default 40). Exit 0, 1 failure, 2
 * usage.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bench/stamp.h"
#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"

static struct {
  bool host, smoke;
  const char *libcuda;
  unsigned iters_ms, keeps;
} opt = {.iters_ms = 40, .keeps = 9};

static slc_driver drv;
static bool have_driver;

static void die(const char *what, int rc, int line) {
  fprintf(stderr, "wake_bench: %s failed (line %d): %s: %s\n", what, line,
          slc_strerror(rc), slc_last_error_message());
  fflush(stdout);
  _exit(1);
}
#define CK(call)                                        \
  do {                                                  \
    int ck_rc_ = (call);                                \
    if (ck_rc_ != LDG_OK) die(#call, ck_rc_, __LINE__); \
  } while (0)
#define CU(call)                                                  \
  do {                                                            \
    if ((call) != CUDA_SUCCESS) die(#call, SLC_EDRIVER, __LINE__); \
  } while (0)


static struct timespec ts_of(uint64_t ns) {
  return (struct timespec){(time_t)(ns / 1000000000u),
                           (long)(ns % 1000000000u)};
}

static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void spin_until(uint64_t t) {
  while (bench_now_ns() < t) {
  }
}

/* ---- The driver side: one context, stream, kernel, event ---------------- */

static struct {
  slc_context *c;
  slc_stream *s;
  slc_module *m;
  CUfunction f;
  CUevent ev; /* recorded on s, complete */
  const slc_driver *d;
} g;

static void launch_empty(ldg_keep keep) {
  uint64_t ns = 0;
  CUdeviceptr out = 0;
  void *params[] = {&ns, &out};
  slc_hold h = {keep, NULL, 0, NULL, 0};
  slc_dim3 one = {1, 1, 1};
  CK(slc_launch(g.s, g.f, one, one, 0, params, &h));
}

static void gpu_open(void) {
  CK(slc_context_create(&drv, &g.c));
  /* Poll mode (no thread): part 2 drives the engine by hand; markers
   * every K ops, placed by the issuer. */
  slc_engine_config cfg = {.thread = false,
                           .marker_every_ops = opt.keeps,
                           .marker_every_us = 100000000u};
  CK(slc_engine_enable(g.c, &cfg));
  CK(slc_stream_create(g.c, 0, SLC_STREAM_NONBLOCKING, &g.s));
  CK(slc_module_load(g.c, 0, bench_stamp_ptx, &g.m));
  CK(slc_module_function(g.m, BENCH_STAMP_KERNEL, &g.f));
  g.d = slc_context_driver(g.c);
  CK(slc_device_make_current(g.c, 0));
  CU(g.d->pfn_cuEventCreate(&g.ev, CU_EVENT_DISABLE_TIMING));
  CU(g.d->pfn_cuEventRecord(g.ev, slc_stream_handle(g.s)));
  CK(slc_stream_synchronize(g.s));
}

static void gpu_close(void) {
  CK(slc_device_make_current(g.c, 0));
  (void)g.d->pfn_cuEventDestroy(g.ev);
  CK(slc_stream_synchronize(g.s));
  slc_stream_unref(g.s);
  CK(slc_module_unload(g.m));
  CK(slc_context_destroy(g.c));
}

/* ---- Part 1 ------------------------------------------------------------- */

enum { W_NANOSLEEP, W_ABS, W_FUTEX, W_FUTEX_ABS, W_TIMERFD, W_EPOLL,
       W_SPIN_SLEEP, W_SPIN, W_SLEEP_QR, N_W };
static const char *const w_names[] = {"nanosleep", "abs",   "futex",
                                      "futex_abs", "timerfd", "epoll",
                                      "spin2+sleep", "spin", "sleep+q+r"};

typedef struct row {
  int kind;
  unsigned t_us, iters;
  unsigned long slack; /* 0: the default */
  bool busy;             /* a spinner beside the worker */
  clockid_t spinner_clock; /* its CPU clock, when busy */
  /* results */
  uint64_t wall, thread_cpu, proc_cpu, spinner_cpu;
} row;

static void *worker(void *arg) {
  row *r = arg;
  if (r->slack != 0) (void)prctl(PR_SET_TIMERSLACK, r->slack, 0, 0, 0);
  if (r->kind == W_SLEEP_QR) CK(slc_device_make_current(g.c, 0));
  uint64_t t_ns = (uint64_t)r->t_us * 1000u;
  atomic_uint word = 0;
  int tfd = -1, ep = -1;
  if (r->kind == W_TIMERFD || r->kind == W_EPOLL) {
    tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec its = {ts_of(t_ns), ts_of(t_ns)};
    if (tfd < 0 || timerfd_settime(tfd, 0, &its, NULL) != 0) {
      perror("timerfd");
      _exit(1);
    }
    if (r->kind == W_EPOLL) {
      ep = epoll_create1(0);
      struct epoll_event ev = {.events = EPOLLIN};
      if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) != 0) {
        perror("epoll");
        _exit(1);
      }
    }
  }
  unsigned warm = r->iters / 10 + 1;
  uint64_t w0 = 0, c0 = 0, p0 = 0, s0 = 0;
  for (unsigned i = 0; i < warm + r->iters; i++) {
    if (i == warm) {
      w0 = bench_now_ns();
      c0 = bench_thread_cpu_ns();
      p0 = bench_process_cpu_ns();
      if (r->busy) s0 = clock_ns(r->spinner_clock);
    }
    switch (r->kind) {
      case W_NANOSLEEP:
      case W_SLEEP_QR: {
        struct timespec ts = ts_of(t_ns);
        nanosleep(&ts, NULL);
        if (r->kind == W_SLEEP_QR) {
          (void)g.d->pfn_cuEventQuery(g.ev);
          (void)g.d->pfn_cuEventRecord(g.ev, slc_stream_handle(g.s));
        }
        break;
      }
      case W_ABS: {
        struct timespec ts = ts_of(bench_now_ns() + t_ns);
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        break;
      }
      case W_FUTEX: {
        struct timespec ts = ts_of(t_ns);
        syscall(SYS_futex, (unsigned *)&word, FUTEX_WAIT_PRIVATE, 0u, &ts,
                NULL, 0);
        break;
      }
      case W_FUTEX_ABS: {
        struct timespec ts = ts_of(bench_now_ns() + t_ns);
        syscall(SYS_futex, (unsigned *)&word, FUTEX_WAIT_BITSET_PRIVATE, 0u,
                &ts, NULL, FUTEX_BITSET_MATCH_ANY);
        break;
      }
      case W_TIMERFD:
      case W_EPOLL: {
        uint64_t n;
        if (r->kind == W_EPOLL) {
          struct epoll_event ev;
          while (epoll_wait(ep, &ev, 1, -1) != 1) {
          }
        }
        if (read(tfd, &n, sizeof(n)) != (ssize_t)sizeof(n)) {
          perror("read timerfd");
          _exit(1);
        }
        break;
      }
      case W_SPIN_SLEEP: {
        spin_until(bench_now_ns() + 2000);
        struct timespec ts = ts_of(t_ns > 2000 ? t_ns - 2000 : 1);
        nanosleep(&ts, NULL);
        break;
      }
      case W_SPIN:
        spin_until(bench_now_ns() + t_ns);
        break;
    }
  }
  r->wall = bench_now_ns() - w0;
  r->thread_cpu = bench_thread_cpu_ns() - c0;
  r->proc_cpu = bench_process_cpu_ns() - p0;
  if (r->busy) r->spinner_cpu = clock_ns(r->spinner_clock) - s0;
  if (ep >= 0) close(ep);
  if (tfd >= 0) close(tfd);
  return NULL;
}

static atomic_int spinner_stop;
static void *spinner(void *arg) {
  (void)arg;
  while (!atomic_load_explicit(&spinner_stop, memory_order_acquire)) {
  }
  return NULL;
}

/* One row: the worker, and with `busy` a spinner beside it. The process's
 * CPU less the spinner's is what engine_bench attributes to the engine. */
static void run_row(row *r, bool busy) {
  pthread_t w, sp;
  atomic_store(&spinner_stop, 0);
  r->busy = busy;
  if (busy && (pthread_create(&sp, NULL, spinner, NULL) != 0 ||
               pthread_getcpuclockid(sp, &r->spinner_clock) != 0))
    _exit(1);
  if (pthread_create(&w, NULL, worker, r) != 0) _exit(1);
  pthread_join(w, NULL);
  if (busy) {
    atomic_store_explicit(&spinner_stop, 1, memory_order_release);
    pthread_join(sp, NULL);
  }
  /* The spinner's CPU over the worker's measured window. */
  uint64_t p = r->proc_cpu;
  if (busy) p = p > r->spinner_cpu ? p - r->spinner_cpu : 0;
  double n = r->iters;
  printf("%-11s %5u %7s %-6s | %9.0f %9.0f | %9.0f %9.0f\n",
         w_names[r->kind], r->t_us, r->slack == 1 ? "1ns" : "default",
         busy ? "busy" : "alone", r->wall / n,
         r->wall / n - r->t_us * 1000.0,
         r->thread_cpu / n, p / n);
  fflush(stdout);
}

static void part_waits(void) {
  static const unsigned ts[] = {5, 20, 50, 100, 200};
  printf("\nPART 1: per iteration, ns (proc: the process's CPU less a "
         "spinner's, if busy)\n");
  printf("%-11s %5s %7s %-6s | %9s %9s | %9s %9s\n", "wait", "T us", "slack",
         "beside", "wall", "over T", "thread", "proc");
  for (int k = 0; k < N_W; k++) {
    if (k == W_SLEEP_QR && !have_driver) continue;
    for (size_t t = 0; t < sizeof(ts) / sizeof(ts[0]); t++) {
      for (int sl = 0; sl < 2; sl++) {
        /* Slack means nothing to a spin or a timerfd's period; one row. */
        if (sl == 1 && (k == W_SPIN || k == W_TIMERFD || k == W_EPOLL))
          continue;
        for (int busy = 0; busy < 2; busy++) {
          row r = {.kind = k, .t_us = ts[t], .slack = sl == 0 ? 1 : 0};
          unsigned ms = opt.smoke ? 2 : opt.iters_ms;
          r.iters = ms * 1000u / ts[t];
          if (r.iters < 20) r.iters = 20;
          run_row(&r, busy != 0);
        }
      }
    }
  }
}

/* ---- Part 2 --------------------------------------------------------------- */

static atomic_long kept;
static void keep_count(void *ctx) {
  (void)ctx;
  atomic_fetch_add_explicit(&kept, 1, memory_order_relaxed);
}

/* Clock pair overhead: thread CPU and wall read back to back. */
static void clock_pair(uint64_t *wall, uint64_t *cpu) {
  enum { N = 200 };
  uint64_t w = 0, c = 0;
  for (int i = 0; i < N; i++) {
    uint64_t w0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    uint64_t c1 = bench_thread_cpu_ns(), w1 = bench_now_ns();
    w += w1 - w0;
    c += c1 - c0;
  }
  *wall = w / N;
  *cpu = c / N;
}

static void part_engine(void) {
  unsigned n = opt.smoke ? 20 : 2000;
  printf("\nPART 2: per call, ns (thread CPU / wall), %u calls each\n", n);
  CK(slc_device_make_current(g.c, 0));
  CUstream cs = slc_stream_handle(g.s);
  for (int k = 0; k < 5; k++) {
    static const char *const names[] = {"cuCtxGetCurrent", "cuEventQuery done",
                                        "cuEventRecord idle", "slc_launch empty",
                                        "cuStreamQuery idle"};
    uint64_t w0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    for (unsigned i = 0; i < n; i++) {
      CUcontext cur;
      switch (k) {
        case 0: (void)g.d->pfn_cuCtxGetCurrent(&cur); break;
        case 1: (void)g.d->pfn_cuEventQuery(g.ev); break;
        case 2: (void)g.d->pfn_cuEventRecord(g.ev, cs); break;
        case 4: (void)g.d->pfn_cuStreamQuery(cs); break;
        default: launch_empty((ldg_keep){NULL, NULL}); break;
      }
    }
    uint64_t c = bench_thread_cpu_ns() - c0, w = bench_now_ns() - w0;
    printf("  %-34s %7.0f / %7.0f\n", names[k], (double)c / n, (double)w / n);
    CK(slc_stream_synchronize(g.s));
    if (k == 2) CU(g.d->pfn_cuStreamSynchronize(cs));
  }
  uint64_t pw, pc;
  clock_pair(&pw, &pc);
  /* A poll releasing K ops, and a poll with nothing to do. */
  uint64_t sw = 0, sc = 0, ew = 0, ec = 0;
  unsigned rounds = opt.smoke ? 10 : 500;
  /* The issuer's first op placed a marker (none was placed for T): release
   * it, so that from here every K-th launch places one. */
  launch_empty((ldg_keep){keep_count, NULL});
  for (int i = 0; atomic_load(&kept) < 1; i++) {
    if (i == 1000) die("releasing the first op", LDG_EINVAL, __LINE__);
    CU(g.d->pfn_cuStreamSynchronize(cs));
    CK(slc_engine_poll(g.c, NULL));
  }
  atomic_store(&kept, 0);
  for (unsigned i = 0; i < rounds; i++) {
    long want = atomic_load(&kept) + (long)opt.keeps;
    for (unsigned j = 0; j < opt.keeps; j++)
      launch_empty((ldg_keep){keep_count, NULL});
    CK(slc_device_make_current(g.c, 0));
    CU(g.d->pfn_cuStreamSynchronize(cs)); /* the GPU is done; keeps not run */
    uint64_t w0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
    size_t rel = 0;
    CK(slc_engine_poll(g.c, &rel));
    uint64_t c1 = bench_thread_cpu_ns(), w1 = bench_now_ns();
    sw += w1 - w0;
    sc += c1 - c0;
    if (atomic_load(&kept) != want) {
      fprintf(stderr, "wake_bench: a poll ran %ld keeps of %u\n",
              atomic_load(&kept) - want + opt.keeps, opt.keeps);
      _exit(1);
    }
    w0 = bench_now_ns();
    c0 = bench_thread_cpu_ns();
    CK(slc_engine_poll(g.c, &rel));
    c1 = bench_thread_cpu_ns();
    w1 = bench_now_ns();
    ew += w1 - w0;
    ec += c1 - c0;
  }
  char name[64];
  snprintf(name, sizeof(name), "slc_engine_poll, %u keeps", opt.keeps);
  printf("  %-34s %7.0f / %7.0f\n", name, (double)sc / rounds - pc,
         (double)sw / rounds - pw);
  printf("  %-34s %7.0f / %7.0f\n", "slc_engine_poll, nothing to do",
         (double)ec / rounds - pc, (double)ew / rounds - pw);
  printf("  (clock reads subtracted: %" PRIu64 " / %" PRIu64 " ns)\n", pc,
         pw);
}

static int usage(void) {
  fprintf(stderr,
          "usage: wake_bench [--driver=libcuda|host] [--libcuda PATH] "
          "[--smoke] [--iters-ms MS] [--keeps K]\n");
  return 2;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--driver=host") == 0) {
      opt.host = true;
    } else if (strcmp(a, "--driver=libcuda") == 0) {
      opt.host = false;
    } else if (strcmp(a, "--smoke") == 0) {
      opt.smoke = true;
    } else if (strcmp(a, "--libcuda") == 0 && i + 1 < argc) {
      opt.libcuda = argv[++i];
    } else if (strcmp(a, "--iters-ms") == 0 && i + 1 < argc) {
      if (!bench_parse_uint(argv[++i], &opt.iters_ms)) return usage();
    } else if (strcmp(a, "--keeps") == 0 && i + 1 < argc) {
      if (!bench_parse_uint(argv[++i], &opt.keeps)) return usage();
    } else {
      return usage();
    }
  }
  if (opt.host) {
    hd_config cfg = {1, 0};
    if (hd_install(&drv, &cfg) != 0) return 1;
    bench_stamp_register_host();
    have_driver = true;
  } else if (slc_driver_load(&drv, opt.libcuda) == 0) {
    have_driver = true;
  } else {
    printf("no CUDA driver (%s): part 1 only\n", drv.load_error);
  }
  if (have_driver) {
    slc_context *probe;
    if (slc_context_create(&drv, &probe) != LDG_OK) {
      printf("no usable CUDA device (%s): part 1 only\n",
             slc_last_error_message());
      have_driver = false;
    } else {
      CK(slc_context_destroy(probe));
    }
  }
  if (have_driver) {
    gpu_open();
    char name[256] = "?";
    (void)slc_device_name(g.c, 0, name, sizeof(name));
    printf("device: %s, %s\n", name, drv.origin);
  }
  printf("%ld CPUs online; default timer slack of this thread: %d ns\n",
         sysconf(_SC_NPROCESSORS_ONLN), prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
  if (have_driver) part_engine();
  part_waits();
  if (have_driver) gpu_close();
  return 0;
}
