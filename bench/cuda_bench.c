/*
 * cuda_bench — what the ledger costs next to the driver calls it wraps: each
 * driver call made raw (through the driver table, cuda/driver.h) and the same
 * call made through the CUDA layer (cuda/sl_cuda.h), side by side, from 1 to
 * 16 threads (issue 5, "the GPU comparison").
 *
 * OPERATIONS (one row per operation and thread count)
 *   record       raw   cuEventRecord(ev, s)
 *                layer slc_event_record(e, s): event lock, stream gate,
 *                      make-current, ldg_mark, cuEventRecord, the event's
 *                      (stream, mark), stream references
 *   wait         raw   cuStreamWaitEvent(s, ev, 0)
 *                layer slc_stream_wait_event(s, e) + ldg_add_wait: e was
 *                      recorded once (setup) on a second stream after one
 *                      launch there, so its mark is 1 and every wait is
 *                      recorded in the ledger (ev likewise, raw)
 *   htod64       raw   cuMemcpyHtoDAsync of 64 B from pinned memory
 *                      (cuMemHostAlloc) to device memory
 *                layer slc_copy_htod_async with a hold: a keep (counter
 *                      callback), one vector id and one host range
 *   launch       raw   cuLaunchKernel of an empty kernel, grid 1, block 1
 *                layer slc_launch of the same with a hold of a keep only
 *   ledger_hold  layer only: ldg_enqueue(keep, 1 id, 1 range) (htod64's hold)
 *   ledger_keep  layer only: ldg_enqueue(keep) (launch's hold)
 *                      both on a ledger of their own, released every K calls
 *                      (ldg_mark + ldg_release): the ledger's part alone
 *   ctx          raw   cuCtxGetCurrent; layer slc_device_make_current, which
 *                      always asks the driver: the query every layer call
 *                      makes (unless --cache-current); no syncs
 *   Each thread has its own stream(s) on device 0 (--nonblocking: created
 *   CU_STREAM_NON_BLOCKING), its own events and buffers, and is pinned to one
 *   CPU. Raw and layer calls go to the very same driver stream
 *   (slc_stream_handle), so only the layer differs.
 *
 * SYNCHRONISATION
 *   Every K (--sync-every, 256) calls: raw cuStreamSynchronize(s); layer
 *   slc_stream_synchronize(s) (mark, sync, release: the keeps run there);
 *   ledger rows ldg_mark + ldg_release. Queues stay bounded and the layer's
 *   release cost is paid where it is in real use. K matters: the first calls
 *   after a sync are slower, on both sides (H200, one thread: raw
 *   cuEventRecord about 240 ns/call with K = 256, 150 with K = 2048), so
 *   read a target at more than one K.
 *
 * PASSES
 *   A pass is N (--calls) calls of each side per thread, interleaved batch
 *   by batch: K raw calls and their sync, K layer calls and their sync, then
 *   layer first, and so on. Launch and copy times drift by 10 % and more
 *   from one pass to the next; interleaving puts the drift on both sides
 *   alike, which a 1 % target needs. Per row: one warm-up pass (--warmup
 *   calls), then --repeat timed passes; threads meet at a barrier before
 *   each pass.
 *
 * MEASURES
 *   ns        per thread, the time of its batches of one side (syncs
 *             included) / N; the mean over the threads; the median over the
 *             passes: the amortised cost of one call on one thread while the
 *             other threads do the same.
 *   issue     the same without the syncs.
 *   overhead  (layer - raw) / raw, of the medians; "pairs" is the range of
 *             the same ratio pass by pass (min..max), to judge the noise.
 *
 * PAIRED (--paired; ops with a raw side)
 *   A launch moves by up to 25 % between passes on the H200, so a 1 %
 *   target is below the noise of pass-level ratios. With --paired the same
 *   timed passes are also read batch by batch: batches come in the order
 *   raw, layer | layer, raw | raw, layer | ... (above), and each two
 *   consecutive batch pairs of opposite orders — raw, layer, layer, raw:
 *   four batches of K calls, a few ms on a GPU — form one UNIT, whose
 *   overhead is
 *       (layer time of its two layer batches - raw time of its two raw
 *        batches) / calls of one side      (ns per call, syncs included)
 *   and the same over the raw time in %. A unit is balanced in order (each
 *   side once first, once second: the first batch after a sync is slower)
 *   and spans a few ms, so a drift of the host or the GPU between passes
 *   falls on both sides of it alike. The row's paired line prints the
 *   median and the [25th, 75th percentile] of the units' overheads, every
 *   thread's and every timed pass's units pooled, in ns and in %, and the
 *   same without the syncs (issue). A trailing batch pair without its
 *   opposite is left out. Nothing else changes: the row's other numbers are
 *   those of the same passes, as without --paired.
 *
 * CORRECTNESS GUARD (not timing): every keep adds its unique id to counters
 * of the thread that runs it; after each row the totals must equal those of
 * the keeps enqueued (every keep ran exactly once), and after every layer
 * batch's sync the ledger must hold nothing. Any failing call prints the
 * call, the driver's error and exits 1; a keep mismatch aborts.
 *
 * DRIVERS
 *   --driver=libcuda (default)  the real driver, libcuda.so.1 (dlopen). No
 *                               library: "SKIPPED: no CUDA driver", exit 0.
 *   --driver=host               the host executor (cuda/host_executor.h), the
 *                               same fake driver the CUDA suite runs on: every
 *                               code path of the bench and of the layer runs
 *                               on the host, with the checks a driver makes;
 *                               its times say nothing about GPUs.
 */
#include <errno.h>
#include <inttypes.h>
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

#include "cuda/driver.h"
#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "bench/bench_keeps.h"
#include "bench/clock.h"
#include "ledger/ledger.h"

/* ---- The empty kernel ------------------------------------------------------
 * For GPUs, PTX made with
 *   echo 'extern "C" __global__ void sl_bench_empty(void) {}' > e.cu
 *   nvcc -ptx -arch=compute_90 e.cu        (CUDA 13.0)
 * with `.version 9.0` lowered to 7.8 as tests/cuda/kernels.c does, so any
 * driver from CUDA 11.8 on JITs it for sm_90 (H100/H200) and newer; it
 * assembles with `ptxas -arch=sm_90` and `-arch=sm_100` (--print-ptx prints
 * it; the smoke test assembles it where ptxas is installed). The host
 * driver below loads the same text (it only looks for the entry). */
#define EMPTY_KERNEL "sl_bench_empty"

static const char empty_ptx[] =
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    "\t// .globl\t" EMPTY_KERNEL "\n"
    "\n"
    ".visible .entry " EMPTY_KERNEL "()\n"
    "{\n"
    "\tret;\n"
    "}\n";

/* ---- The host driver (--driver=host) ------------------------------------------
 * The host executor (cuda/host_executor.h): streams are worker threads that
 * run each copy and kernel later, in order, so every code path of the bench
 * and of the layer runs without a GPU, with the checks a driver makes. The
 * empty kernel is a host function registered under its PTX name. */
static void empty_host_kernel(void *const *params, const hd_dims *dims) {
  (void)params;
  (void)dims;
}

static void host_install(slc_driver *d) {
  if (hd_install(d, &(hd_config){.devices = 1, .task_delay_us = 0}) != 0 ||
      hd_register_kernel(EMPTY_KERNEL, empty_host_kernel, 0, NULL) != 0) {
    fprintf(stderr, "cuda_bench: cannot start the host executor\n");
    exit(1);
  }
}

/* ---- Errors ---------------------------------------------------------------- */

static const slc_driver *g_drv; /* the context's table, for error names */

static void fail_exit(void) {
  fflush(stdout);
  fflush(stderr);
  /* Not exit(): other threads may be inside the driver. */
  _exit(1);
}

static void die_cu(const char *what, CUresult r, const char *file, int line) {
  const char *name = NULL, *msg = NULL;
  if (g_drv != NULL) {
    if (g_drv->pfn_cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
    if (g_drv->pfn_cuGetErrorString(r, &msg) != CUDA_SUCCESS) msg = NULL;
  }
  fprintf(stderr, "cuda_bench: %s failed (%s:%d): CUresult %d %s (%s)\n", what,
          file, line, (int)r, name ? name : "?", msg ? msg : "?");
  fail_exit();
}

static void die_ldg(const char *what, int rc, const char *file, int line) {
  fprintf(stderr, "cuda_bench: %s failed (%s:%d): %s (%d)\n  last error: %s\n",
          what, file, line, slc_strerror(rc), rc, slc_last_error_message());
  fail_exit();
}

/* A raw driver call: anything but CUDA_SUCCESS is fatal. */
#define CU_CHECK(call)                                           \
  do {                                                           \
    CUresult cu_check_r_ = (call);                               \
    if (cu_check_r_ != CUDA_SUCCESS)                             \
      die_cu(#call, cu_check_r_, __FILE__, __LINE__);            \
  } while (0)

/* A layer or ledger call: anything but LDG_OK is fatal. */
#define CHECK(call)                                              \
  do {                                                           \
    int check_rc_ = (call);                                      \
    if (check_rc_ != LDG_OK) die_ldg(#call, check_rc_, __FILE__, __LINE__); \
  } while (0)

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "cuda_bench: out of memory (%zu bytes)\n", n);
    abort();
  }
  return p;
}

/* ---- Operations ------------------------------------------------------------ */

enum {
  OP_RECORD,
  OP_WAIT,
  OP_HTOD,
  OP_LAUNCH,
  OP_LEDGER_HOLD,
  OP_LEDGER_KEEP,
  OP_CTX,
  N_OPS
};
enum { SIDE_RAW = 0, SIDE_LAYER = 1 };

typedef struct op_desc {
  const char *name;
  const char *raw;   /* NULL: no raw side */
  const char *layer;
  double target_pct; /* issue 5's target for the overhead; < 0: none */
} op_desc;

static const op_desc ops[N_OPS] = {
    [OP_RECORD] = {"record", "cuEventRecord(ev, s)", "slc_event_record(e, s)",
                   10.0},
    [OP_WAIT] = {"wait", "cuStreamWaitEvent(s, ev, 0)",
                 "slc_stream_wait_event(s, e) (+ ldg_add_wait)", -1},
    [OP_HTOD] = {"htod64", "cuMemcpyHtoDAsync 64 B pinned->device",
                 "slc_copy_htod_async + hold{keep, 1 id, 1 range}", -1},
    [OP_LAUNCH] = {"launch", "cuLaunchKernel(empty, 1x1x1, 1x1x1)",
                   "slc_launch + hold{keep}", 1.0},
    [OP_LEDGER_HOLD] = {"ledger_hold", NULL,
                        "ldg_enqueue(keep, 1 id, 1 range) alone (htod64's)",
                        -1},
    [OP_LEDGER_KEEP] = {"ledger_keep", NULL,
                        "ldg_enqueue(keep) alone (launch's)", -1},
    [OP_CTX] = {"ctx", "cuCtxGetCurrent",
                "slc_device_make_current (once per layer call)", -1},
};

/* ---- Options ---------------------------------------------------------------- */

#define MAX_THREAD_COUNTS 16
#define MAX_REPEAT 101

static struct {
  bool host; /* --driver=host */
  const char *libcuda;
  bool require_gpu;
  int thread_list[MAX_THREAD_COUNTS];
  int n_thread_list;
  uint64_t calls;  /* per thread per pass */
  uint64_t warmup; /* per thread, one pass per side */
  unsigned sync_every;
  unsigned repeat;
  bool run_op[N_OPS];
  bool pin;
  bool nonblocking; /* streams CU_STREAM_NON_BLOCKING */
  bool cache_current; /* slc_context_cache_current(ctx, true) */
  bool paired;        /* per-unit overheads (PAIRED above) */
  bool smoke;
  const char *json;
} opt = {
    .host = false,
    .calls = 10000,
    .warmup = 0, /* 0: calls / 5 */
    .sync_every = 256,
    .repeat = 11,
    .run_op = {true, true, true, true, true, true, true},
    .pin = true,
};

static int cpus[1024];
static int n_cpus;
static int online_cpus;

/* ---- Time ------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n) {
  double tmp[MAX_REPEAT];
  memcpy(tmp, v, n * sizeof *v);
  qsort(tmp, n, sizeof *tmp, cmp_double);
  return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

/* ---- Keeps: the exactly-once guard ----------------------------------------- */

/* ---- Rows and workers ------------------------------------------------------- */

/* One unit of --paired: two batch pairs of opposite orders. Sums of the
 * two batches of each side, and the calls of one side. */
struct pair_unit {
  double total[2], issue[2];
  uint64_t calls;
};

static slc_context *g_ctx;
static CUfunction g_empty; /* the empty kernel, device 0 */
static ldg_ledger *g_ledger; /* the ledger row's own ledger */

typedef struct row_ctx {
  int op;
  int threads;
  pthread_barrier_t barrier;
} row_ctx;

typedef struct worker {
  _Alignas(64) row_ctx *rc;
  int tid;
  int cpu;
  /* Resources (those the op needs). */
  slc_stream *s;     /* the stream every call goes to */
  CUstream cs;       /* its driver stream: the raw calls' */
  slc_stream *prod;  /* wait: the stream the event was recorded on */
  slc_event *ev;     /* record: the event recorded; wait: the one waited on */
  CUevent raw_ev;    /* the raw counterpart of ev */
  slc_buffer *hbuf;  /* htod: pinned source */
  slc_buffer *dbuf;  /* htod: device destination */
  ldg_stream *ls;    /* ledger: the stream of the ledger row */
  uint64_t vec_id;   /* htod, ledger: the id named by every hold */
  ldg_range range;   /* htod, ledger: the host range named */
  uint64_t keep_next;
  keep_sums enq;
  /* Results: per side, per pass (warm-up excluded). */
  double total_ns[2][MAX_REPEAT];
  double issue_ns[2][MAX_REPEAT];
  /* --paired: the units of the timed passes (PAIRED above). */
  struct pair_unit *units;
  size_t n_units, cap_units;
  char pad[64];
} worker;

/* ---- Per-op setup and teardown (on the worker's thread) ---------------------- */

static void worker_setup(worker *w) {
  const slc_driver *d = g_drv;
  const int op = w->rc->op;
  if (op == OP_LEDGER_HOLD || op == OP_LEDGER_KEEP) {
    CHECK(ldg_stream_create(g_ledger, 0, 0, NULL, NULL, &w->ls));
    w->vec_id = ((uint64_t)(w->tid + 1) << 32) | 1u;
    w->range = (ldg_range){(uintptr_t)0x100000000u + (uintptr_t)w->tid * 4096u,
                           64};
    return;
  }
  /* The raw calls need the primary context current on this thread; the layer
   * makes it current itself (and leaves it so). */
  CHECK(slc_device_make_current(g_ctx, 0));
  if (op == OP_CTX) return;
  const unsigned flags = opt.nonblocking ? SLC_STREAM_NONBLOCKING : 0;
  CHECK(slc_stream_create(g_ctx, 0, flags, &w->s));
  w->cs = slc_stream_handle(w->s);
  switch (op) {
    case OP_RECORD:
      CHECK(slc_event_create(g_ctx, 0, &w->ev));
      /* The flags slc_event_create uses. */
      CU_CHECK(d->pfn_cuEventCreate(&w->raw_ev, CU_EVENT_DISABLE_TIMING));
      break;
    case OP_WAIT: {
      CHECK(slc_stream_create(g_ctx, 0, flags, &w->prod));
      CHECK(slc_event_create(g_ctx, 0, &w->ev));
      CU_CHECK(d->pfn_cuEventCreate(&w->raw_ev, CU_EVENT_DISABLE_TIMING));
      /* One launch on the producer, then the record: the event's mark is 1,
       * so each slc_stream_wait_event records a wait (ldg_add_wait). */
      uint64_t id = w->keep_next++;
      slc_hold h = {{keep_fn, (void *)(uintptr_t)id}, NULL, 0, NULL, 0};
      slc_dim3 one = {1, 1, 1};
      CHECK(slc_launch(w->prod, g_empty, one, one, 0, NULL, &h));
      sums_add_range(&w->enq, id, id + 1);
      CHECK(slc_event_record(w->ev, w->prod));
      ldg_seq m = 0;
      if (!slc_event_recorded(w->ev, NULL, &m) || m != 1) {
        fprintf(stderr, "cuda_bench: wait setup: event mark %" PRIu64
                        ", expected 1\n", m);
        fail_exit();
      }
      /* The same on the raw side. */
      CUstream pcs = slc_stream_handle(w->prod);
      CU_CHECK(d->pfn_cuLaunchKernel(g_empty, 1, 1, 1, 1, 1, 1, 0, pcs, NULL,
                                     NULL));
      CU_CHECK(d->pfn_cuEventRecord(w->raw_ev, pcs));
      /* Both records complete before any pass (the producer's ledger entry
       * stays held until the first sync of s releases it through a wait). */
      CU_CHECK(d->pfn_cuStreamSynchronize(pcs));
      break;
    }
    case OP_HTOD:
      CHECK(slc_buffer_alloc_host(g_ctx, 4096, &w->hbuf));
      CHECK(slc_buffer_alloc_device(g_ctx, 0, 4096, &w->dbuf));
      memset(slc_buffer_host(w->hbuf), 0x5a, 4096);
      w->vec_id = slc_buffer_id(w->dbuf);
      w->range = (ldg_range){(uintptr_t)slc_buffer_host(w->hbuf), 64};
      break;
    default:
      break;
  }
}

static void worker_teardown(worker *w) {
  const slc_driver *d = g_drv;
  if (w->ls != NULL) {
    CHECK(ldg_stream_destroy(w->ls));
    ldg_stream_unref(w->ls);
  }
  if (w->ev != NULL) CHECK(slc_event_destroy(w->ev));
  if (w->raw_ev != NULL) CU_CHECK(d->pfn_cuEventDestroy(w->raw_ev));
  if (w->hbuf != NULL) CHECK(slc_buffer_free(w->hbuf));
  if (w->dbuf != NULL) CHECK(slc_buffer_free(w->dbuf));
  if (w->prod != NULL) {
    CHECK(slc_stream_destroy(w->prod));
    slc_stream_unref(w->prod);
  }
  if (w->s != NULL) {
    CHECK(slc_stream_destroy(w->s));
    slc_stream_unref(w->s);
  }
}

/* ---- The timed passes --------------------------------------------------------
 * A pass is N calls of each side, interleaved batch by batch: K raw calls
 * and their sync, K layer calls and their sync, then the other way round
 * (raw-layer, layer-raw, ...), so a drift of the driver's or the GPU's speed
 * during the pass (launches drift by 10 % and more between passes) falls on
 * both sides alike. Each batch starts on an idle stream (the previous batch
 * ended with a sync).
 *
 * BATCH(CALL, SYNC): `count` calls of CALL, then SYNC; the batch's time is
 * added to *total, the calls' alone to *issue. */
#define BATCH(CALL, SYNC)                                      \
  do {                                                         \
    const uint64_t t0_ = bench_mono_ns();                             \
    for (uint64_t j_ = 0; j_ < count; j_++) {                  \
      CALL;                                                    \
    }                                                          \
    const uint64_t t1_ = bench_mono_ns();                             \
    SYNC;                                                      \
    const uint64_t t2_ = bench_mono_ns();                             \
    *issue += (double)(t1_ - t0_);                             \
    *total += (double)(t2_ - t0_);                             \
  } while (0)

static void run_batch_raw(worker *w, uint64_t count, double *total,
                          double *issue) {
  const slc_driver *d = g_drv;
  const CUstream cs = w->cs;
  CUcontext cur = NULL;
  switch (w->rc->op) {
    case OP_RECORD:
      BATCH(CU_CHECK(d->pfn_cuEventRecord(w->raw_ev, cs)),
            CU_CHECK(d->pfn_cuStreamSynchronize(cs)));
      break;
    case OP_WAIT:
      BATCH(CU_CHECK(d->pfn_cuStreamWaitEvent(cs, w->raw_ev, 0)),
            CU_CHECK(d->pfn_cuStreamSynchronize(cs)));
      break;
    case OP_HTOD: {
      const CUdeviceptr dst = slc_buffer_dptr(w->dbuf);
      const void *src = slc_buffer_host(w->hbuf);
      BATCH(CU_CHECK(d->pfn_cuMemcpyHtoDAsync(dst, src, 64, cs)),
            CU_CHECK(d->pfn_cuStreamSynchronize(cs)));
      break;
    }
    case OP_LAUNCH:
      BATCH(CU_CHECK(d->pfn_cuLaunchKernel(g_empty, 1, 1, 1, 1, 1, 1, 0, cs,
                                           NULL, NULL)),
            CU_CHECK(d->pfn_cuStreamSynchronize(cs)));
      break;
    case OP_CTX:
      BATCH(CU_CHECK(d->pfn_cuCtxGetCurrent(&cur)), (void)0);
      break;
    default:
      abort(); /* no raw side */
  }
}

static void run_batch_layer(worker *w, uint64_t count, double *total,
                            double *issue) {
  slc_stream *const s = w->s;
  const slc_dim3 one = {1, 1, 1};
  const uint64_t first_id = w->keep_next;
  uint64_t id = first_id;
  slc_hold hold = {{keep_fn, NULL}, NULL, 0, NULL, 0};
  const int op = w->rc->op;
  switch (op) {
    case OP_RECORD:
      BATCH(CHECK(slc_event_record(w->ev, s)), CHECK(slc_stream_synchronize(s)));
      break;
    case OP_WAIT:
      BATCH(CHECK(slc_stream_wait_event(s, w->ev)),
            CHECK(slc_stream_synchronize(s)));
      break;
    case OP_HTOD: {
      const CUdeviceptr dst = slc_buffer_dptr(w->dbuf);
      const void *src = slc_buffer_host(w->hbuf);
      hold.vec_ids = &w->vec_id;
      hold.n_vec = 1;
      hold.ranges = &w->range;
      hold.n_ranges = 1;
      BATCH(
          {
            hold.keep.ctx = (void *)(uintptr_t)id++;
            CHECK(slc_copy_htod_async(s, dst, src, 64, &hold));
          },
          CHECK(slc_stream_synchronize(s)));
      break;
    }
    case OP_LAUNCH:
      BATCH(
          {
            hold.keep.ctx = (void *)(uintptr_t)id++;
            CHECK(slc_launch(s, g_empty, one, one, 0, NULL, &hold));
          },
          CHECK(slc_stream_synchronize(s)));
      break;
    case OP_LEDGER_HOLD:
    case OP_LEDGER_KEEP: {
      ldg_stream *const ls = w->ls;
      ldg_keep k = hold.keep;
      const size_t n_ids = op == OP_LEDGER_HOLD ? 1 : 0;
      const uint64_t *ids = n_ids ? &w->vec_id : NULL;
      const ldg_range *ranges = n_ids ? &w->range : NULL;
      BATCH(
          {
            k.ctx = (void *)(uintptr_t)id++;
            CHECK(ldg_enqueue(ls, k, ids, n_ids, ranges, n_ids, NULL));
          },
          CHECK(ldg_release(ls, ldg_mark(ls))));
      break;
    }
    case OP_CTX:
      BATCH(CHECK(slc_device_make_current(g_ctx, 0)), (void)0);
      break;
    default:
      abort();
  }
  /* Untimed: count the keeps enqueued, and check that the sync left nothing
   * held. */
  w->keep_next = id;
  sums_add_range(&w->enq, first_id, id);
  ldg_stream *ls = w->ls != NULL ? w->ls : s != NULL ? slc_stream_ledger(s)
                                                     : NULL;
  if (ls != NULL && ldg_pending_count(ls) != 0) {
    fprintf(stderr, "cuda_bench: %s: %zu operations still held after a "
                    "batch's sync\n", ops[op].name, ldg_pending_count(ls));
    fail_exit();
  }
}

/* One pass: n calls of each side (of the layer only if the op has no raw
 * side), interleaved by batches of K. Adds the times to total[side] and
 * issue[side]. `units`: also keep --paired's units (the timed passes). */
static void run_pass(worker *w, uint64_t n, double total[2], double issue[2],
                     bool units) {
  const bool has_raw = ops[w->rc->op].raw != NULL;
  const uint64_t k = opt.sync_every;
  total[0] = total[1] = issue[0] = issue[1] = 0;
  units = units && has_raw && opt.paired;
  struct pair_unit u = {{0, 0}, {0, 0}, 0};
  unsigned b = 0;
  for (uint64_t done = 0; done < n; done += k, b++) {
    const uint64_t count = n - done < k ? n - done : k;
    const bool raw_first = (b & 1) == 0;
    /* The unit's sums: this pass's totals before and after its batches. */
    double t0[2] = {total[0], total[1]}, i0[2] = {issue[0], issue[1]};
    if (has_raw && raw_first)
      run_batch_raw(w, count, &total[SIDE_RAW], &issue[SIDE_RAW]);
    run_batch_layer(w, count, &total[SIDE_LAYER], &issue[SIDE_LAYER]);
    if (has_raw && !raw_first)
      run_batch_raw(w, count, &total[SIDE_RAW], &issue[SIDE_RAW]);
    if (!units) continue;
    if (raw_first) memset(&u, 0, sizeof u); /* a unit starts raw, layer */
    for (int side = 0; side < 2; side++) {
      u.total[side] += total[side] - t0[side];
      u.issue[side] += issue[side] - i0[side];
    }
    u.calls += count;
    if (raw_first) continue; /* ... and ends layer, raw */
    if (w->n_units == w->cap_units) {
      w->cap_units = w->cap_units ? 2 * w->cap_units : 64;
      w->units = realloc(w->units, w->cap_units * sizeof *w->units);
      if (w->units == NULL) abort();
    }
    w->units[w->n_units++] = u;
  }
}

static void *worker_main(void *arg) {
  worker *w = arg;
  row_ctx *rc = w->rc;
  worker_setup(w);
  pthread_barrier_wait(&rc->barrier);
  double t[2], i[2];
  run_pass(w, opt.warmup, t, i, false); /* warm-up */
  pthread_barrier_wait(&rc->barrier);
  for (unsigned r = 0; r < opt.repeat; r++) {
    run_pass(w, opt.calls, t, i, true);
    for (int side = 0; side < 2; side++) {
      w->total_ns[side][r] = t[side];
      w->issue_ns[side][r] = i[side];
    }
    pthread_barrier_wait(&rc->barrier);
  }
  worker_teardown(w);
  flush_keeps(&w->enq);
  return NULL;
}

/* ---- Rows --------------------------------------------------------------------- */

typedef struct row_result {
  int op;
  int threads;
  bool has_raw;
  double ns[2];    /* median ns/call, syncs included */
  double issue[2]; /* median ns/call, syncs excluded */
  double runs[2][MAX_REPEAT];
  double issue_runs[2][MAX_REPEAT];
  double pair_pct[MAX_REPEAT]; /* overhead pass by pass */
  double pair_min, pair_max, pair_median;
  /* --paired (PAIRED above): every thread's units, in order, and their
   * overheads' quartiles [p25, median, p75]: per call with the syncs (ns,
   * %) and without (issue ns, %). */
  struct pair_unit *units;
  size_t n_units;
  double unit_ns[3], unit_pct[3], unit_issue_ns[3], unit_issue_pct[3];
} row_result;

static row_result *results;
static size_t n_results, cap_results;

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
    fprintf(stderr, "cuda_bench: pthread_create: %s\n", strerror(e));
    abort();
  }
}

static unsigned row_counter;

static double pct(double layer, double raw) {
  return 100.0 * (layer - raw) / raw;
}

/* The unit's overhead: what = 0 ns per call, 1 %; issue: without syncs. */
static double unit_overhead(const struct pair_unit *u, int what, bool issue) {
  const double *t = issue ? u->issue : u->total;
  return what == 0 ? (t[SIDE_LAYER] - t[SIDE_RAW]) / (double)u->calls
                   : pct(t[SIDE_LAYER], t[SIDE_RAW]);
}

/* q[0..3) = the 25th, 50th and 75th percentiles of v[0..n) (sorts v; the
 * nearest rank, as ledger_bench's paired rows). */
static void quartiles(double *v, size_t n, double q[3]) {
  qsort(v, n, sizeof *v, cmp_double);
  for (int i = 0; i < 3; i++)
    q[i] = v[(size_t)(0.25 * (i + 1) * (double)(n - 1) + 0.5)];
}

/* out->units and their quartiles, from every worker's units. */
static void collect_units(row_result *out, worker *ws, int threads) {
  size_t n = 0;
  for (int i = 0; i < threads; i++) n += ws[i].n_units;
  out->n_units = n;
  if (n == 0) return;
  out->units = xmalloc(n * sizeof *out->units);
  n = 0;
  for (int i = 0; i < threads; i++) {
    memcpy(out->units + n, ws[i].units, ws[i].n_units * sizeof *ws[i].units);
    n += ws[i].n_units;
    free(ws[i].units);
  }
  double *v = xmalloc(n * sizeof *v);
  double *q[4] = {out->unit_ns, out->unit_pct, out->unit_issue_ns,
                  out->unit_issue_pct};
  for (int k = 0; k < 4; k++) {
    for (size_t j = 0; j < n; j++)
      v[j] = unit_overhead(&out->units[j], k & 1, k >= 2);
    quartiles(v, n, q[k]);
  }
  free(v);
}

static void run_row(int op, int threads, row_result *out) {
  row_ctx rc;
  memset(&rc, 0, sizeof rc);
  rc.op = op;
  rc.threads = threads;
  pthread_barrier_init(&rc.barrier, NULL, (unsigned)threads);
  worker *ws = aligned_alloc(64, sizeof(worker) * (size_t)threads);
  if (ws == NULL) abort();
  memset(ws, 0, sizeof(worker) * (size_t)threads);
  pthread_t *th = xmalloc(sizeof(pthread_t) * (size_t)threads);
  const unsigned row = ++row_counter;
  for (int i = 0; i < threads; i++) {
    worker *w = &ws[i];
    w->rc = &rc;
    w->tid = i;
    w->cpu = n_cpus ? cpus[i % n_cpus] : 0;
    w->keep_next = ((uint64_t)row << 44) | ((uint64_t)(i + 1) << 32);
  }
  for (int i = 0; i < threads; i++)
    start_thread(&th[i], worker_main, &ws[i], ws[i].cpu);
  for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);

  out->op = op;
  out->threads = threads;
  out->has_raw = ops[op].raw != NULL;
  for (int side = 0; side < 2; side++) {
    if (side == SIDE_RAW && !out->has_raw) continue;
    for (unsigned r = 0; r < opt.repeat; r++) {
      double tot = 0, iss = 0;
      for (int i = 0; i < threads; i++) {
        tot += ws[i].total_ns[side][r];
        iss += ws[i].issue_ns[side][r];
      }
      out->runs[side][r] = tot / threads / (double)opt.calls;
      out->issue_runs[side][r] = iss / threads / (double)opt.calls;
    }
    out->ns[side] = median(out->runs[side], opt.repeat);
    out->issue[side] = median(out->issue_runs[side], opt.repeat);
  }
  if (out->has_raw) {
    for (unsigned r = 0; r < opt.repeat; r++) {
      double p = pct(out->runs[SIDE_LAYER][r], out->runs[SIDE_RAW][r]);
      out->pair_pct[r] = p;
      if (r == 0 || p < out->pair_min) out->pair_min = p;
      if (r == 0 || p > out->pair_max) out->pair_max = p;
    }
    out->pair_median = median(out->pair_pct, opt.repeat);
  }
  collect_units(out, ws, threads);
  pthread_barrier_destroy(&rc.barrier);
  free(th);
  free(ws);
  char name[64];
  snprintf(name, sizeof name, "%s/%d", ops[op].name, threads);
  verify_keeps("cuda_bench", name);
}

/* ---- Output -------------------------------------------------------------------- */

static void print_header(void) {
  printf("%-11s %3s | %9s %9s %8s %8s %15s | %9s %9s %8s | %s\n", "op", "thr",
         "raw ns", "layer ns", "+ns", "overhead", "pairs", "raw issue",
         "lay issue", "overhead", "target");
  printf("%.*s\n", 124,
         "------------------------------------------------------------------"
         "------------------------------------------------------------------");
}

static void print_row(const row_result *r) {
  const op_desc *o = &ops[r->op];
  printf("%-11s %3d |", o->name, r->threads);
  if (r->has_raw) {
    double ov = pct(r->ns[1], r->ns[0]);
    char pairs[40];
    snprintf(pairs, sizeof pairs, "%.1f..%.1f%%", r->pair_min, r->pair_max);
    printf(" %9.1f %9.1f %8.1f %7.1f%% %15s | %9.1f %9.1f %7.1f%% |", r->ns[0],
           r->ns[1], r->ns[1] - r->ns[0], ov, pairs, r->issue[0], r->issue[1],
           pct(r->issue[1], r->issue[0]));
    if (o->target_pct >= 0) {
      if (ov <= o->target_pct)
        printf(" <= %.0f%%: met", o->target_pct);
      else
        printf(" <= %.0f%%: MISSED by %.1f points", o->target_pct,
               ov - o->target_pct);
      if (r->pair_min <= o->target_pct && o->target_pct < r->pair_max)
        printf(" (within the pass-to-pass noise)");
    }
  } else {
    printf(" %9s %9.1f %8s %8s %15s | %9s %9.1f %8s |", "-", r->ns[1], "-", "-",
           "-", "-", r->issue[1], "-");
  }
  printf("\n");
  if (r->n_units > 0) {
    printf("%-11s %3d |   paired: %zu units, overhead median %+.1f ns "
           "[%+.1f, %+.1f], %+.2f%% [%+.2f, %+.2f]; issue %+.1f ns, "
           "%+.2f%% [%+.2f, %+.2f]",
           o->name, r->threads, r->n_units, r->unit_ns[1], r->unit_ns[0],
           r->unit_ns[2], r->unit_pct[1], r->unit_pct[0], r->unit_pct[2],
           r->unit_issue_ns[1], r->unit_issue_pct[1], r->unit_issue_pct[0],
           r->unit_issue_pct[2]);
    if (o->target_pct >= 0)
      printf("; <= %.0f%%: %s", o->target_pct,
             r->unit_pct[1] <= o->target_pct ? "met" : "MISSED");
    printf("\n");
  }
  fflush(stdout);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\')
      fputc('\\', f);
    else if ((unsigned char)*s < 0x20) {
      fprintf(f, "\\u%04x", (unsigned char)*s);
      continue;
    }
    fputc(*s, f);
  }
  fputc('"', f);
}

static char g_device_name[256] = "unknown";

static void json_runs(FILE *f, const char *key, const double *v) {
  fprintf(f, ", \"%s\": [", key);
  for (unsigned i = 0; i < opt.repeat; i++)
    fprintf(f, "%s%.2f", i ? ", " : "", v[i]);
  fputc(']', f);
}

/* --paired's fields of a row: the quartiles, and every unit (raw and layer
 * ns per call, with and without the syncs) for pooling over runs. */
static void json_units(FILE *f, const row_result *r, const op_desc *o) {
  static const char *const key[4] = {"overhead_ns", "overhead_pct",
                                     "issue_overhead_ns",
                                     "issue_overhead_pct"};
  const double *q[4] = {r->unit_ns, r->unit_pct, r->unit_issue_ns,
                        r->unit_issue_pct};
  fprintf(f, ", \"paired_units\": %zu, \"paired_block\": %u", r->n_units,
          opt.sync_every);
  for (int k = 0; k < 4; k++)
    fprintf(f, ", \"paired_%s_p25\": %.3f, \"paired_%s_median\": %.3f"
               ", \"paired_%s_p75\": %.3f",
            key[k], q[k][0], key[k], q[k][1], key[k], q[k][2]);
  if (o->target_pct >= 0)
    fprintf(f, ", \"paired_target_met\": %s",
            r->unit_pct[1] <= o->target_pct ? "true" : "false");
  static const char *const side_key[4] = {"raw_ns", "layer_ns", "raw_issue_ns",
                                          "layer_issue_ns"};
  for (int k = 0; k < 4; k++) {
    fprintf(f, ", \"unit_%s\": [", side_key[k]);
    for (size_t j = 0; j < r->n_units; j++) {
      const struct pair_unit *u = &r->units[j];
      const double *t = k >= 2 ? u->issue : u->total;
      fprintf(f, "%s%.2f", j ? ", " : "", t[k & 1] / (double)u->calls);
    }
    fputc(']', f);
  }
}

static void write_json(const char *path, int argc, char **argv) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "cuda_bench: cannot write %s: %s\n", path, strerror(errno));
    fail_exit();
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
  fprintf(f, ", \"driver\": ");
  json_str(f, opt.host ? "host" : "libcuda");
  fprintf(f, ", \"driver_origin\": ");
  json_str(f, g_drv->origin);
  fprintf(f, ", \"driver_version\": %d, \"device\": ", slc_driver_version(g_ctx));
  json_str(f, g_device_name);
  fprintf(f, ", \"calls\": %" PRIu64 ", \"warmup\": %" PRIu64
             ", \"sync_every\": %u, \"repeat\": %u, \"pinned\": %s"
             ", \"nonblocking\": %s, \"cache_current\": %s, \"paired\": %s"
             ", \"interleaved\": true",
          opt.calls, opt.warmup, opt.sync_every, opt.repeat,
          opt.pin ? "true" : "false", opt.nonblocking ? "true" : "false",
          opt.cache_current ? "true" : "false", opt.paired ? "true" : "false");
  fprintf(f, ", \"argv\": [");
  for (int i = 0; i < argc; i++) {
    if (i) fputs(", ", f);
    json_str(f, argv[i]);
  }
  fprintf(f, "]},\n  \"rows\": [\n");
  for (size_t i = 0; i < n_results; i++) {
    const row_result *r = &results[i];
    const op_desc *o = &ops[r->op];
    fprintf(f, "    {\"op\": \"%s\", \"threads\": %d, \"layer_call\": ", o->name,
            r->threads);
    json_str(f, o->layer);
    if (r->has_raw) {
      fprintf(f, ", \"raw_call\": ");
      json_str(f, o->raw);
      fprintf(f, ", \"raw_ns\": %.2f, \"layer_ns\": %.2f, \"overhead_ns\": %.2f"
                 ", \"overhead_pct\": %.3f, \"raw_issue_ns\": %.2f"
                 ", \"layer_issue_ns\": %.2f, \"issue_overhead_pct\": %.3f",
              r->ns[0], r->ns[1], r->ns[1] - r->ns[0], pct(r->ns[1], r->ns[0]),
              r->issue[0], r->issue[1], pct(r->issue[1], r->issue[0]));
      if (o->target_pct >= 0)
        fprintf(f, ", \"target_pct\": %.1f, \"target_met\": %s", o->target_pct,
                pct(r->ns[1], r->ns[0]) <= o->target_pct ? "true" : "false");
      fprintf(f, ", \"pair_overhead_pct_median\": %.3f"
                 ", \"pair_overhead_pct_min\": %.3f"
                 ", \"pair_overhead_pct_max\": %.3f",
              r->pair_median, r->pair_min, r->pair_max);
      json_runs(f, "pair_overhead_pct_runs", r->pair_pct);
      json_runs(f, "raw_ns_runs", r->runs[0]);
      json_runs(f, "raw_issue_ns_runs", r->issue_runs[0]);
    } else {
      fprintf(f, ", \"layer_ns\": %.2f, \"layer_issue_ns\": %.2f", r->ns[1],
              r->issue[1]);
    }
    json_runs(f, "layer_ns_runs", r->runs[1]);
    json_runs(f, "layer_issue_ns_runs", r->issue_runs[1]);
    if (r->n_units > 0) json_units(f, r, o);
    fprintf(f, "}%s\n", i + 1 < n_results ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "cuda_bench: cannot write %s: %s\n", path, strerror(errno));
    fail_exit();
  }
}

/* ---- Main -------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: cuda_bench [options]\n"
          "  --driver=libcuda|host  the real driver (default) or a fake one in\n"
          "                    this binary (exercises the code; its times mean\n"
          "                    nothing for GPUs)\n"
          "  --libcuda PATH    dlopen PATH instead of libcuda.so.1\n"
          "  --require-gpu     no driver or no device is an error, not a skip\n"
          "  --threads LIST    comma-separated thread counts (default 1,2,4,8,16\n"
          "                    capped at the online CPUs)\n"
          "  --calls N         calls of each side per thread per pass (default 10000)\n"
          "  --warmup N        calls of each side per thread in the warm-up pass\n"
          "                    (default calls/5)\n"
          "  --repeat R        timed passes; the median is shown (default 11)\n"
          "  --sync-every K    synchronise every K calls (default 256)\n"
          "  --ops LIST        some of record,wait,htod64,launch,ledger_hold,\n"
          "                    ledger_keep,ctx (default all)\n"
          "  --nonblocking     create the streams CU_STREAM_NON_BLOCKING\n"
          "  --cache-current   the layer's context with\n"
          "                    slc_context_cache_current on (no\n"
          "                    cuCtxGetCurrent per layer call)\n"
          "  --paired          also read the passes in units of four batches\n"
          "                    (raw, layer, layer, raw) and print the median\n"
          "                    and [IQR] of the units' overheads (ops with a\n"
          "                    raw side; needs --calls >= 2 x --sync-every)\n"
          "  --no-pin          do not pin threads to CPUs\n"
          "  --json FILE       also write every row as JSON\n"
          "  --smoke           tiny run for CI: threads 1,2, 600 calls, 2 passes\n"
          "  --print-ptx       print the empty kernel's PTX and exit\n");
}

static uint64_t parse_u64(const char *flag, const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *s == '\0' || *end != '\0' || s[0] == '-') {
    fprintf(stderr, "cuda_bench: bad value for %s: %s\n", flag, s);
    exit(2);
  }
  return v;
}

static void parse_args(int argc, char **argv) {
  bool warmup_set = false, calls_set = false, repeat_set = false;
  for (int i = 1; i < argc; i++) {
    /* --flag=value and --flag value are both accepted. */
    char flag[64];
    const char *a = argv[i];
    const char *v = NULL;
    const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
    if (eq != NULL && (size_t)(eq - a) < sizeof flag) {
      memcpy(flag, a, (size_t)(eq - a));
      flag[eq - a] = '\0';
      a = flag;
      v = eq + 1;
    }
    const bool inline_value = v != NULL;
#define NEED_VALUE()                                                   \
  do {                                                                 \
    if (!inline_value) {                                               \
      if (i + 1 >= argc) {                                             \
        fprintf(stderr, "cuda_bench: %s needs a value\n", a);          \
        exit(2);                                                       \
      }                                                                \
      v = argv[++i];                                                   \
    }                                                                  \
  } while (0)
#define NO_VALUE()                                                     \
  do {                                                                 \
    if (inline_value) {                                                \
      fprintf(stderr, "cuda_bench: %s takes no value\n", a);           \
      exit(2);                                                         \
    }                                                                  \
  } while (0)
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      exit(0);
    } else if (strcmp(a, "--driver") == 0) {
      NEED_VALUE();
      if (strcmp(v, "host") == 0) {
        opt.host = true;
      } else if (strcmp(v, "libcuda") == 0) {
        opt.host = false;
      } else {
        fprintf(stderr, "cuda_bench: --driver is libcuda or host, not %s\n", v);
        exit(2);
      }
    } else if (strcmp(a, "--libcuda") == 0) {
      NEED_VALUE();
      opt.libcuda = v;
    } else if (strcmp(a, "--require-gpu") == 0) {
      NO_VALUE();
      opt.require_gpu = true;
    } else if (strcmp(a, "--threads") == 0) {
      NEED_VALUE();
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      opt.n_thread_list = 0;
      for (char *save, *t = strtok_r(buf, ",", &save); t != NULL;
           t = strtok_r(NULL, ",", &save)) {
        uint64_t n = parse_u64(a, t);
        if (n == 0 || n > 1024 || opt.n_thread_list == MAX_THREAD_COUNTS) {
          fprintf(stderr, "cuda_bench: --threads: 1..1024 each, at most %d "
                          "counts\n", MAX_THREAD_COUNTS);
          exit(2);
        }
        opt.thread_list[opt.n_thread_list++] = (int)n;
      }
      if (opt.n_thread_list == 0) {
        fprintf(stderr, "cuda_bench: --threads needs a list\n");
        exit(2);
      }
    } else if (strcmp(a, "--calls") == 0) {
      NEED_VALUE();
      opt.calls = parse_u64(a, v);
      calls_set = true;
    } else if (strcmp(a, "--warmup") == 0) {
      NEED_VALUE();
      opt.warmup = parse_u64(a, v);
      warmup_set = true;
    } else if (strcmp(a, "--repeat") == 0) {
      NEED_VALUE();
      opt.repeat = (unsigned)parse_u64(a, v);
      repeat_set = true;
    } else if (strcmp(a, "--sync-every") == 0) {
      NEED_VALUE();
      opt.sync_every = (unsigned)parse_u64(a, v);
    } else if (strcmp(a, "--ops") == 0) {
      NEED_VALUE();
      char buf[256];
      snprintf(buf, sizeof buf, "%s", v);
      memset(opt.run_op, 0, sizeof opt.run_op);
      for (char *save, *t = strtok_r(buf, ",", &save); t != NULL;
           t = strtok_r(NULL, ",", &save)) {
        int k = 0;
        while (k < N_OPS && strcmp(ops[k].name, t) != 0) k++;
        if (k == N_OPS) {
          fprintf(stderr, "cuda_bench: unknown op %s (record, wait, htod64, "
                          "launch, ledger_hold, ledger_keep, ctx)\n", t);
          exit(2);
        }
        opt.run_op[k] = true;
      }
    } else if (strcmp(a, "--nonblocking") == 0) {
      NO_VALUE();
      opt.nonblocking = true;
    } else if (strcmp(a, "--cache-current") == 0) {
      NO_VALUE();
      opt.cache_current = true;
    } else if (strcmp(a, "--paired") == 0) {
      NO_VALUE();
      opt.paired = true;
    } else if (strcmp(a, "--no-pin") == 0) {
      NO_VALUE();
      opt.pin = false;
    } else if (strcmp(a, "--json") == 0) {
      NEED_VALUE();
      opt.json = v;
    } else if (strcmp(a, "--smoke") == 0) {
      NO_VALUE();
      opt.smoke = true;
    } else if (strcmp(a, "--print-ptx") == 0) {
      fputs(empty_ptx, stdout);
      exit(0);
    } else {
      fprintf(stderr, "cuda_bench: unknown option %s\n", argv[i]);
      usage(stderr);
      exit(2);
    }
#undef NEED_VALUE
#undef NO_VALUE
  }
  if (opt.smoke) {
    /* 600 = two full batches of 256 and a partial one. */
    if (!calls_set) opt.calls = 600;
    if (!warmup_set) opt.warmup = 100;
    if (!repeat_set) opt.repeat = 2;
    if (opt.n_thread_list == 0) {
      opt.thread_list[0] = 1;
      opt.thread_list[1] = 2;
      opt.n_thread_list = 2;
    }
  }
  if (!warmup_set && !opt.smoke) opt.warmup = opt.calls / 5;
  if (opt.calls == 0 || opt.sync_every == 0 || opt.repeat == 0 ||
      opt.repeat > MAX_REPEAT) {
    fprintf(stderr, "cuda_bench: --calls and --sync-every must be > 0, "
                    "--repeat 1..%d\n", MAX_REPEAT);
    exit(2);
  }
  if (opt.paired) {
    bool any_raw = false;
    for (int k = 0; k < N_OPS; k++) any_raw |= opt.run_op[k] && ops[k].raw;
    if (!any_raw) {
      fprintf(stderr, "cuda_bench: --paired needs an op with a raw side "
                      "(record, wait, htod64, launch, ctx)\n");
      exit(2);
    }
    /* A unit is two batch pairs: a pass of fewer calls has none. */
    if (opt.calls / opt.sync_every < 2) {
      fprintf(stderr, "cuda_bench: --paired needs --calls >= 2 x --sync-every "
                      "(%" PRIu64 " < 2 x %u: no unit of four batches in a "
                      "pass)\n", opt.calls, opt.sync_every);
      exit(2);
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
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  online_cpus = n > 0 ? (int)n : 1;
}

/* Thread counts 1,2,4,8,16 capped at the online CPUs (and the CPUs this
 * process may run on), unless --threads gave a list. */
static void pick_thread_counts(void) {
  if (opt.n_thread_list != 0) return;
  int cap = online_cpus < n_cpus ? online_cpus : n_cpus;
  static const int counts[] = {1, 2, 4, 8, 16};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    if (counts[i] <= cap) opt.thread_list[opt.n_thread_list++] = counts[i];
  if (cap < 16 && opt.thread_list[opt.n_thread_list - 1] != cap)
    opt.thread_list[opt.n_thread_list++] = cap;
}

static slc_driver g_table;

/* Loads the driver and creates the context; prints SKIPPED and exits 0 when
 * there is no driver or device (unless --require-gpu). */
static void open_driver(void) {
  if (opt.host) {
    host_install(&g_table);
  } else if (slc_driver_load(&g_table, opt.libcuda) != 0) {
    if (g_table.library_missing && !opt.require_gpu) {
      printf("SKIPPED: no CUDA driver (%s)\n", g_table.load_error);
      exit(0);
    }
    printf("FAILED: no usable CUDA driver: %s\n", g_table.load_error);
    exit(1);
  }
  int rc = slc_context_create(&g_table, &g_ctx);
  if (rc != LDG_OK) {
    if ((rc == SLC_ENODRIVER || rc == SLC_ENODEVICE) && !opt.host &&
        !opt.require_gpu) {
      printf("SKIPPED: no usable CUDA device (%s)\n", slc_last_error_message());
      exit(0);
    }
    printf("FAILED: slc_context_create: %s (%d): %s\n", slc_strerror(rc), rc,
           slc_last_error_message());
    exit(1);
  }
  g_drv = slc_context_driver(g_ctx);
  if (opt.cache_current && slc_context_cache_current(g_ctx, true) != LDG_OK) {
    printf("FAILED: slc_context_cache_current: %s\n", slc_last_error_message());
    exit(1);
  }
  if (slc_device_name(g_ctx, 0, g_device_name, sizeof g_device_name) != LDG_OK)
    snprintf(g_device_name, sizeof g_device_name, "? (%s)",
             slc_last_error_message());
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  find_cpus();
  pick_thread_counts();
  setvbuf(stdout, NULL, _IOLBF, 0);

  open_driver();
  slc_module *mod = NULL;
  CHECK(slc_module_load(g_ctx, 0, empty_ptx, &mod));
  CHECK(slc_module_function(mod, EMPTY_KERNEL, &g_empty));
  CHECK(ldg_ledger_create(&g_ledger));

  char model[256];
  cpu_model(model, sizeof model);
  printf("cuda_bench: the ledger's cost next to the driver calls it wraps, raw "
         "vs through cuda/\n");
  printf("driver: %s, version %d; device 0: %s (%d device(s))\n",
         g_drv->origin,
         slc_driver_version(g_ctx), g_device_name, slc_device_count(g_ctx));
  if (opt.host)
    printf("NOTE: host driver (a synchronous fake): the code paths "
           "run, the times say nothing about a GPU\n");
  printf("cpus %d online, %d usable (%s); threads", online_cpus, n_cpus, model);
  for (int i = 0; i < opt.n_thread_list; i++) printf(" %d", opt.thread_list[i]);
  printf(", each its own %sstream(s) on device 0; pinned %s%s\n",
         opt.nonblocking ? "non-blocking " : "", opt.pin ? "yes" : "no",
         opt.cache_current ? "; layer: slc_context_cache_current on" : "");
  printf("per pass %" PRIu64 " calls of each side per thread, raw and layer "
         "interleaved in batches of %u, each batch ended by a sync;\n"
         "%u passes after a %" PRIu64 "-call warm-up pass; ns = median over "
         "the passes of the per-thread time / calls, mean over threads\n",
         opt.calls, opt.sync_every, opt.repeat, opt.warmup);
  printf("ns includes the syncs (amortised), issue excludes them; sync: raw "
         "cuStreamSynchronize, layer slc_stream_synchronize (releases: keeps "
         "run)\noverhead = (layer - raw) / raw of the medians; pairs = "
         "min..max of the same pass by pass\n");
  for (int k = 0; k < N_OPS; k++)
    if (opt.run_op[k])
      printf("  %-11s raw: %-38s layer: %s\n", ops[k].name,
             ops[k].raw ? ops[k].raw : "-", ops[k].layer);
  printf("\n");
  print_header();

  for (int k = 0; k < N_OPS; k++) {
    if (!opt.run_op[k]) continue;
    for (int ti = 0; ti < opt.n_thread_list; ti++) {
      row_result *r = new_result();
      run_row(k, opt.thread_list[ti], r);
      print_row(r);
    }
  }

  if (opt.json != NULL) write_json(opt.json, argc, argv);

  /* Tear down; every handle must be gone. */
  ldg_ledger_destroy(g_ledger);
  CHECK(slc_module_unload(mod));
  CHECK(slc_context_destroy(g_ctx));
  g_ctx = NULL;
  if (opt.host) {
    long left = hd_shutdown();
    if (left != 0) {
      fprintf(stderr, "cuda_bench: the host executor had %ld objects left\n",
                      left);
      fail_exit();
    }
  } else {
    slc_driver_unload(&g_table);
  }
  g_drv = NULL;
  verify_keeps("cuda_bench", "end");
  printf("\nall keeps ran exactly once (%" PRIu64 " keeps).\n",
         keeps_verified());
  return 0;
}
