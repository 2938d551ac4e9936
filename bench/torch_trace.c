/*
 * torch_trace_bench: replays an allocation trace of PyTorch on the pool
 * (torch_alloc/, SL_TORCH_TRACE; issue 14) through the shim's own hooks on
 * the host executor, and says where the pool's reserved bytes go at their
 * peak. No GPU: the memory the pool reserves depends on the sequence of
 * sizes, streams and threads, which the trace holds; what it cannot hold is
 * how long the GPU takes (the executor runs no work here, so every recorded
 * use is complete at once and released at the hooks' next poll: "held"
 * bytes are what a GPU run adds on top, measured there).
 *
 *   torch_trace_bench TRACE [--classes] [--lag-us N]
 *
 * --lag-us N: pending work as on a GPU that runs behind the host: each
 * alloc issues a one-byte memset on the block's stream (the executor's
 * stream workers sleep N us before each), so a block freed soon after is
 * freed under pending work and "held" shows what waiting for it costs.
 *
 * TRACE: lines "a|f TID STREAM SIZE PTR" (sl_torch.c, THE TRACE; '#' lines
 * are comments), written by a GPU run with SL_TORCH_TRACE=path, or by
 * torch_alloc/llama_trace.py from the serving model's shapes. Each TID gets
 * a thread of its own (the pool's per-thread caches matter), each non-zero
 * STREAM a stream of its own (0: the legacy default stream); the threads
 * take turns in the trace's order, so a replay is deterministic.
 * Printed: one line per quantity (name value), then with --classes the
 * blocks per size class at their peak. At the moment the reserved bytes
 * peaked: reserved = requested (what PyTorch asked for, live) + rounding
 * (class size - request, live blocks) + held (freed, waiting for their
 * streams) + cached (in free lists and never-used parts of slabs).
 * With SL_TORCH_STATS=1 also the shim's call counters (the ns inside the
 * hooks, the driver calls by kind), each per alloc of the trace.
 * pages_reserved_peak: the same driver allocations counted as a GPU's
 * driver lays them out (each device allocation above 1 MiB rounded up to
 * 2 MiB pages; 1 MiB and less as asked, packed): on the H200, serve.py's
 * trace shows cuMemAlloc's blocks of 2.75 MiB 4 MiB apart and of 5.5 MiB
 * 6 MiB apart, 1 MiB ones 1 MiB apart. PyTorch's segments are multiples of
 * 2 MiB, so its reserved bytes are already this view; the pool's are not
 * when a class is no multiple of 2 MiB (issue 14). An estimate: the run's
 * device memory in use (serve.py's device_used_mib) measures it.
 * driver_allocs, driver_frees: the pool's cuMemAlloc and cuMemFree calls
 * over the replay; driver_calls_second_half: those made from the trace's
 * middle event on, the steady state (issue 14: growth may trim, but a
 * request after the first must not call the driver).
 * Exit 0, 1 if a hook failed, 2 for bad arguments or an unreadable trace.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "pool/sl_pool.h"
#include "torch_alloc/sl_torch.h"

#define MAX_TIDS 64
#define MAX_STREAMS 256
#define MAX_CLASSES 128

struct ev {
  char op;
  unsigned tid;
  uint64_t stream, ptr;
  size_t size;
};

static struct {
  struct ev *ev;
  size_t n;
  /* turn-taking: the thread of ev[next] runs it */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  size_t next;
  int failed;
  /* trace ptr -> replay ptr (open addressing, tombstones) */
  uint64_t *key;
  struct live {
    void *p;
    size_t size;
  } *val;
  size_t cap;
  uint64_t tstream[MAX_STREAMS];
  CUstream rstream[MAX_STREAMS];
  size_t n_streams;
  /* live requested bytes, and the breakdown at the reserved peak */
  uint64_t req_live, req_peak;
  uint64_t at_reserved, at_req, at_alloc, at_held, at_cached;
  /* per class: live blocks and their peak */
  size_t cls_cap[MAX_CLASSES];
  uint64_t cls_live[MAX_CLASSES], cls_peak[MAX_CLASSES], cls_allocs[MAX_CLASSES];
  uint64_t cls_at[MAX_CLASSES]; /* live at the reserved peak */
  size_t n_cls;
  unsigned lag_us;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static slc_driver drv;

/* THE DRIVER'S PAGES (see the top): the executor's cuMemAlloc and cuMemFree
 * wrapped; live allocations and the page view's total, under pages_mu. */
#define PAGE_2M ((size_t)2 << 20)
static CUresult (*real_mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*real_mem_free)(CUdeviceptr);
static pthread_mutex_t pages_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  CUdeviceptr p;
  size_t bytes;
} *pages_live;
static size_t pages_n, pages_cap;
static uint64_t pages_now, pages_peak;
/* cuMemAlloc and cuMemFree calls, all and in the trace's second half
 * (`late`: from its middle event on, the steady state). */
static uint64_t drv_allocs, drv_frees, drv_late;
static bool late;

static size_t pages_of(size_t bytes) {
  return bytes > ((size_t)1 << 20) ? (bytes + PAGE_2M - 1) / PAGE_2M * PAGE_2M
                                   : bytes;
}

static CUresult mem_alloc_paged(CUdeviceptr *p, size_t bytes) {
  CUresult r = real_mem_alloc(p, bytes);
  if (r != CUDA_SUCCESS) return r;
  pthread_mutex_lock(&pages_mu);
  drv_allocs++;
  drv_late += late;
  if (pages_n == pages_cap) {
    size_t cap = pages_cap ? 2 * pages_cap : 256;
    void *v = realloc(pages_live, cap * sizeof(*pages_live));
    if (v != NULL) pages_live = v, pages_cap = cap;
  }
  if (pages_n < pages_cap) { /* else: not counted (no memory here) */
    pages_live[pages_n].p = *p;
    pages_live[pages_n++].bytes = bytes;
    pages_now += pages_of(bytes);
    if (pages_now > pages_peak) pages_peak = pages_now;
  }
  pthread_mutex_unlock(&pages_mu);
  return r;
}

static CUresult mem_free_paged(CUdeviceptr p) {
  pthread_mutex_lock(&pages_mu);
  for (size_t i = 0; i < pages_n; i++)
    if (pages_live[i].p == p) {
      pages_now -= pages_of(pages_live[i].bytes);
      drv_frees++;
      drv_late += late;
      pages_live[i] = pages_live[--pages_n];
      break;
    }
  pthread_mutex_unlock(&pages_mu);
  return real_mem_free(p);
}

#define TOMB UINT64_MAX

static size_t slot_of(uint64_t k, bool insert) {
  size_t i = (size_t)((k >> 9) * UINT64_C(0x9E3779B97F4A7C15) >> 20) &
             (g.cap - 1);
  size_t tomb = SIZE_MAX;
  for (;; i = (i + 1) & (g.cap - 1)) {
    if (g.key[i] == k) return i;
    if (g.key[i] == TOMB && tomb == SIZE_MAX) tomb = i;
    if (g.key[i] == 0) return insert && tomb != SIZE_MAX ? tomb : i;
  }
}

static int cls_index(size_t cap) {
  for (size_t i = 0; i < g.n_cls; i++)
    if (g.cls_cap[i] == cap) return (int)i;
  if (g.n_cls == MAX_CLASSES) return -1;
  g.cls_cap[g.n_cls] = cap;
  return (int)g.n_cls++;
}

static CUstream stream_of(uint64_t h) {
  for (size_t i = 0; i < g.n_streams; i++)
    if (g.tstream[i] == h) return g.rstream[i];
  return NULL; /* 0: the legacy default stream */
}

static uint64_t stat(int i) {
  uint64_t v[SL_TORCH_NSTATS];
  return sl_torch_memory_stats(0, v, SL_TORCH_NSTATS) == SL_TORCH_NSTATS
             ? v[i]
             : 0;
}

/* Runs ev[i] (its thread's turn). */
static int run_one(const struct ev *e) {
  if (e->op == 'a') {
    int rc = 0;
    void *p = sl_torch_malloc(e->size, 0, stream_of(e->stream), &rc);
    if (p == NULL) {
      fprintf(stderr, "alloc of %zu bytes failed: %s\n", e->size,
              sl_torch_last_error());
      return 1;
    }
    if (g.lag_us != 0 &&
        drv.pfn_cuMemsetD8Async((CUdeviceptr)(uintptr_t)p, 0, 1,
                                stream_of(e->stream)) != CUDA_SUCCESS) {
      fprintf(stderr, "the lag's memset failed\n");
      return 1;
    }
    size_t s = slot_of(e->ptr, true);
    if (g.key[s] == e->ptr) {
      fprintf(stderr, "the trace allocates %#" PRIx64 " again before freeing it\n",
              e->ptr);
      (void)sl_torch_free_checked(p, e->size, 0, stream_of(e->stream));
      return 1;
    }
    g.key[s] = e->ptr;
    g.val[s].p = p;
    g.val[s].size = e->size;
    g.req_live += e->size;
    if (g.req_live > g.req_peak) g.req_peak = g.req_live;
    int c = cls_index(slp_round_size(e->size));
    if (c >= 0) {
      g.cls_allocs[c]++;
      if (++g.cls_live[c] > g.cls_peak[c]) g.cls_peak[c] = g.cls_live[c];
    }
    uint64_t v[SL_TORCH_NSTATS];
    if (sl_torch_memory_stats(0, v, SL_TORCH_NSTATS) == SL_TORCH_NSTATS &&
        v[SL_TORCH_RESERVED] > g.at_reserved) {
      g.at_reserved = v[SL_TORCH_RESERVED];
      g.at_req = g.req_live;
      g.at_alloc = v[SL_TORCH_ALLOCATED];
      g.at_held = v[SL_TORCH_HELD];
      g.at_cached = v[SL_TORCH_CACHED];
      memcpy(g.cls_at, g.cls_live, sizeof(g.cls_at));
    }
    return 0;
  }
  size_t s = slot_of(e->ptr, false);
  if (g.key[s] != e->ptr) return 0; /* allocated before the trace began */
  int rc =
      sl_torch_free_checked(g.val[s].p, e->size, 0, stream_of(e->stream));
  if (rc != LDG_OK) {
    fprintf(stderr, "free of %#" PRIx64 " failed: %s\n", e->ptr,
            sl_torch_last_error());
    return 1;
  }
  g.key[s] = TOMB;
  g.req_live -= e->size;
  int c = cls_index(slp_round_size(e->size));
  if (c >= 0) g.cls_live[c]--;
  return 0;
}

static void *replayer(void *arg) {
  unsigned tid = (unsigned)(uintptr_t)arg;
  CUcontext ctx;
  CUdevice dev;
  (void)drv.pfn_cuDeviceGet(&dev, 0);
  (void)drv.pfn_cuDevicePrimaryCtxRetain(&ctx, dev);
  (void)drv.pfn_cuCtxSetCurrent(ctx);
  pthread_mutex_lock(&g.mu);
  for (;;) {
    while (g.next < g.n && g.ev[g.next].tid != tid && !g.failed)
      pthread_cond_wait(&g.cv, &g.mu);
    if (g.next == g.n || g.failed) break;
    /* Our turn: the others wait, so g needs no other lock. */
    if (g.next == g.n / 2) {
      pthread_mutex_lock(&pages_mu);
      late = true;
      pthread_mutex_unlock(&pages_mu);
    }
    if (run_one(&g.ev[g.next]) != 0) g.failed = 1;
    g.next++;
    pthread_cond_broadcast(&g.cv);
  }
  pthread_mutex_unlock(&g.mu);
  (void)drv.pfn_cuDevicePrimaryCtxRelease(dev);
  return NULL;
}

static int load(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "torch_trace_bench: cannot read %s\n", path);
    return 2;
  }
  size_t cap = 1024;
  g.ev = malloc(cap * sizeof(*g.ev));
  char line[256];
  size_t lineno = 0;
  while (g.ev != NULL && fgets(line, sizeof(line), f) != NULL) {
    lineno++;
    if (line[0] == '#' || line[0] == '\n') continue;
    struct ev e;
    unsigned long long st, sz, pt;
    if (sscanf(line, "%c %u %llx %llu %llx", &e.op, &e.tid, &st, &sz, &pt) !=
            5 ||
        (e.op != 'a' && e.op != 'f') || e.tid == 0 || e.tid > MAX_TIDS ||
        sz == 0 || pt == 0 || pt == TOMB) {
      fprintf(stderr, "torch_trace_bench: %s:%zu: not a trace line: %s", path,
              lineno, line);
      fclose(f);
      return 2;
    }
    e.stream = st;
    e.size = (size_t)sz;
    e.ptr = pt;
    if (g.n == cap) {
      cap *= 2;
      struct ev *v = realloc(g.ev, cap * sizeof(*v));
      if (v == NULL) break;
      g.ev = v;
    }
    g.ev[g.n++] = e;
  }
  fclose(f);
  if (g.ev == NULL || g.n == 0) {
    fprintf(stderr, "torch_trace_bench: %s: no events\n", path);
    return 2;
  }
  for (g.cap = 1024; g.cap < 4 * g.n; g.cap *= 2) {
  }
  g.key = calloc(g.cap, sizeof(*g.key));
  g.val = calloc(g.cap, sizeof(*g.val));
  return g.key != NULL && g.val != NULL ? 0 : 2;
}

static void print_mib(const char *name, uint64_t v) {
  printf("%-28s %12" PRIu64 "  (%.1f MiB)\n", name, v, v / 1048576.0);
}

int main(int argc, char **argv) {
  bool classes = false;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    char *end = NULL;
    if (strcmp(argv[i], "--classes") == 0)
      classes = true;
    else if (strcmp(argv[i], "--lag-us") == 0 && i + 1 < argc &&
             (g.lag_us = (unsigned)strtoul(argv[i + 1], &end, 10),
              end != argv[i + 1] && *end == '\0' && g.lag_us <= 100000))
      i++;
    else if (argv[i][0] != '-' && path == NULL)
      path = argv[i];
    else {
      fprintf(stderr,
              "usage: torch_trace_bench TRACE [--classes] [--lag-us N "
              "(0..100000)]\n");
      return 2;
    }
  }
  if (path == NULL) {
    fprintf(stderr, "usage: torch_trace_bench TRACE [--classes]\n");
    return 2;
  }
  int rc = load(path);
  if (rc != 0) return rc;
  hd_config hc = {1, g.lag_us};
  if (hd_install(&drv, &hc) != 0) return 1;
  real_mem_alloc = drv.pfn_cuMemAlloc;
  real_mem_free = drv.pfn_cuMemFree;
  drv.pfn_cuMemAlloc = mem_alloc_paged;
  drv.pfn_cuMemFree = mem_free_paged;
  if (drv.pfn_cuInit(0) != CUDA_SUCCESS || sl_torch_use_driver(&drv) != LDG_OK)
    return 1;
  CUdevice dev;
  CUcontext ctx;
  (void)drv.pfn_cuDeviceGet(&dev, 0);
  (void)drv.pfn_cuDevicePrimaryCtxRetain(&ctx, dev);
  (void)drv.pfn_cuCtxSetCurrent(ctx);
  unsigned tids[MAX_TIDS];
  size_t n_tids = 0;
  for (size_t i = 0; i < g.n; i++) {
    bool seen = false;
    for (size_t k = 0; k < n_tids; k++) seen |= tids[k] == g.ev[i].tid;
    if (!seen) tids[n_tids++] = g.ev[i].tid;
    if (g.ev[i].stream != 0 && stream_of(g.ev[i].stream) == NULL) {
      if (g.n_streams == MAX_STREAMS ||
          drv.pfn_cuStreamCreate(&g.rstream[g.n_streams],
                                 CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        fprintf(stderr, "torch_trace_bench: more than %d streams\n",
                MAX_STREAMS);
        return 2;
      }
      g.tstream[g.n_streams++] = g.ev[i].stream;
    }
  }
  pthread_t th[MAX_TIDS];
  for (size_t k = 0; k < n_tids; k++)
    pthread_create(&th[k], NULL, replayer, (void *)(uintptr_t)tids[k]);
  for (size_t k = 0; k < n_tids; k++) pthread_join(th[k], NULL);
  int failed = g.failed;

  size_t allocs = 0, live = 0;
  for (size_t i = 0; i < g.n; i++) allocs += g.ev[i].op == 'a';
  printf("trace                        %s\n", path);
  printf("events                       %zu (%zu allocs, %zu threads, %zu "
         "streams besides the default), lag %u us\n",
         g.n, allocs, n_tids, g.n_streams, g.lag_us);
  print_mib("reserved_peak", stat(SL_TORCH_RESERVED_PEAK));
  print_mib("allocated_peak", stat(SL_TORCH_ALLOCATED_PEAK));
  print_mib("requested_peak", g.req_peak);
  print_mib("at_peak.reserved", g.at_reserved);
  print_mib("at_peak.requested", g.at_req);
  print_mib("at_peak.rounding", g.at_alloc - g.at_req);
  print_mib("at_peak.held", g.at_held);
  print_mib("at_peak.cached", g.at_cached);
  printf("%-28s %12" PRIu64 "\n", "slab_allocs", stat(SL_TORCH_SLAB_ALLOCS));
  pthread_mutex_lock(&pages_mu);
  print_mib("pages_reserved_peak", pages_peak);
  printf("%-28s %12" PRIu64 "\n", "driver_allocs", drv_allocs);
  printf("%-28s %12" PRIu64 "\n", "driver_frees", drv_frees);
  printf("%-28s %12" PRIu64 "\n", "driver_calls_second_half", drv_late);
  pthread_mutex_unlock(&pages_mu);
  /* SL_TORCH_STATS=1 (sl_torch.c, THE CALL COUNTERS): the hooks' time and
   * the driver calls of the replay, per alloc of the trace. */
  for (int i = SL_TORCH_ALLOC_NS; i < SL_TORCH_NSTATS; i++)
    if (stat(i) != 0)
      printf("%-28s %12" PRIu64 "  (%.3f per alloc)\n", sl_torch_stat_name(i),
             stat(i), allocs ? stat(i) / (double)allocs : 0.0);
  if (classes) {
    printf("%12s %10s %10s %14s %14s\n", "class_bytes", "allocs",
           "peak_live", "peak_live_MiB", "live_at_peak");
    for (size_t i = 0; i < g.n_cls; i++)
      printf("%12zu %10" PRIu64 " %10" PRIu64 " %14.2f %14" PRIu64 "\n",
             g.cls_cap[i], g.cls_allocs[i], g.cls_peak[i],
             g.cls_peak[i] * (double)g.cls_cap[i] / 1048576.0, g.cls_at[i]);
  }
  /* Whatever the trace left allocated goes back, so the state ends clean
   * (a trace cut at SL_TORCH_TRACE_MAX, or tensors alive at exit). */
  for (size_t s = 0; s < g.cap; s++)
    if (g.key[s] != 0 && g.key[s] != TOMB) {
      live++;
      if (sl_torch_free_checked(g.val[s].p, g.val[s].size, 0, NULL) != LDG_OK)
        failed = 1;
    }
  printf("%-28s %12zu\n", "left_allocated_by_trace", live);
  if (sl_torch_shutdown() != LDG_OK) {
    fprintf(stderr, "sl_torch_shutdown: %s\n", sl_torch_last_error());
    failed = 1;
  }
  (void)drv.pfn_cuCtxSetCurrent(ctx);
  for (size_t i = 0; i < g.n_streams; i++)
    if (drv.pfn_cuStreamDestroy(g.rstream[i]) != CUDA_SUCCESS) failed = 1;
  (void)drv.pfn_cuDevicePrimaryCtxRelease(dev);
  long leaked = hd_shutdown();
  if (leaked != 0) {
    fprintf(stderr, "executor: %ld objects leaked\n", leaked);
    failed = 1;
  }
  free(g.ev);
  free(pages_live);
  free(g.key);
  free(g.val);
  return failed ? 1 : 0;
}
