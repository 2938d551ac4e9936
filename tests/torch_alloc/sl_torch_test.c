/*
 * sl_torch_test: the PyTorch allocator shim's C side (torch_alloc/sl_torch.h)
 * against the host executor, its hooks called as PyTorch calls them: alloc
 * with the current device and stream (stream 0, the legacy default stream,
 * unless another is current), "kernels" issued by the caller straight to
 * the driver (the shim never sees them), free with the alloc's size, device
 * and stream as soon as the tensor dies, record_stream for a second stream.
 * The executor's workers run each copy and memset later (and not at all
 * while held), so a block handed to another stream before the work on it
 * ran shows up: as a queued operation still touching it
 * (hd_pending_touching), or as wrong data.
 *
 * Each test gets a fresh executor and shim state and must leave nothing
 * (sl_torch_shutdown refuses while blocks are out; hd_shutdown counts
 * leaks). No timing is asserted; waits give up after 20 s. Scaled down
 * under sanitizers. Exit 0 when every test passed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "torch_alloc/sl_torch.h"
/* CHECK prints the allocator's last error. */
#define TESTING_LAST_ERROR() sl_torch_last_error()
#include "tests/testing/check.h"

#define N 4096 /* bytes per "tensor" */

static slc_driver g_drv;
static CUcontext g_ctx[2]; /* the "runtime's" primary contexts */

static void sleep_us(unsigned us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* As the CUDA runtime: device d's primary context current on this thread. */
static int runtime_set_device(int d) {
  CHECK(g_drv.pfn_cuCtxSetCurrent(g_ctx[d]) == CUDA_SUCCESS);
  return 0;
}

/* "PyTorch's" streams, on the current device: they must outlive the shim's
 * state (sl_torch.h), so teardown destroys them after sl_torch_shutdown. */
static struct {
  pthread_mutex_t mu;
  CUstream s[64];
  CUcontext ctx[64];
  int n;
} g_raw = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int setup(unsigned delay_us) {
  hd_config hc = {2, delay_us};
  CHECK(hd_install(&g_drv, &hc) == 0);
  CHECK(g_drv.pfn_cuInit(0) == CUDA_SUCCESS);
  for (int d = 0; d < 2; d++) {
    CUdevice dev;
    CHECK(g_drv.pfn_cuDeviceGet(&dev, d) == CUDA_SUCCESS);
    CHECK(g_drv.pfn_cuDevicePrimaryCtxRetain(&g_ctx[d], dev) == CUDA_SUCCESS);
  }
  CHECK_RC(sl_torch_use_driver(&g_drv), LDG_OK);
  return runtime_set_device(0);
}

static int teardown(void) {
  CHECK_RC(sl_torch_shutdown(), LDG_OK);
  for (int i = 0; i < g_raw.n; i++) {
    CHECK(g_drv.pfn_cuCtxSetCurrent(g_raw.ctx[i]) == CUDA_SUCCESS);
    CHECK(g_drv.pfn_cuStreamDestroy(g_raw.s[i]) == CUDA_SUCCESS);
  }
  g_raw.n = 0;
  for (int d = 0; d < 2; d++) {
    CUdevice dev;
    CHECK(g_drv.pfn_cuDeviceGet(&dev, d) == CUDA_SUCCESS);
    CHECK(g_drv.pfn_cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
  }
  long leaked = hd_shutdown();
  if (leaked != 0) fprintf(stderr, "  executor: %ld objects leaked\n", leaked);
  CHECK(leaked == 0);
  return 0;
}

static uint64_t stat_of(int device, int i) {
  uint64_t v[SL_TORCH_NSTATS];
  if (sl_torch_memory_stats(device, v, SL_TORCH_NSTATS) != SL_TORCH_NSTATS)
    return UINT64_MAX;
  return v[i];
}

/* Waits until device's pool holds nothing for pending work (the engine
 * released every recorded use: its thread, or these polls). */
static int wait_unheld(int device) {
  for (long i = 0; i < 200000; i++) {
    CHECK_RC(sl_torch_poll(), LDG_OK);
    if (stat_of(device, SL_TORCH_HELD) == 0) return 0;
    sleep_us(100);
  }
  fprintf(stderr, "  gave up waiting for held blocks\n");
  return 1;
}

static int raw_stream(CUstream *out) {
  CHECK(g_drv.pfn_cuStreamCreate(out, CU_STREAM_NON_BLOCKING) ==
        CUDA_SUCCESS);
  CUcontext cur;
  CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS);
  pthread_mutex_lock(&g_raw.mu);
  int i = g_raw.n < 64 ? g_raw.n++ : -1;
  if (i >= 0) {
    g_raw.s[i] = *out;
    g_raw.ctx[i] = cur;
  }
  pthread_mutex_unlock(&g_raw.mu);
  CHECK(i >= 0);
  return 0;
}

/* ---- Tests ------------------------------------------------------------------ */

/* Zero bytes, the default stream, stream-order reuse, and no reuse on
 * another stream while the freed block's work is pending. */
static int t_reuse_rules(void) {
  if (setup(0)) return 1;
  int rc = -1;
  CHECK(sl_torch_malloc(0, 0, NULL, &rc) == NULL && rc == LDG_OK);
  CHECK_RC(sl_torch_free_checked(NULL, 0, 0, NULL), LDG_OK);
  CUstream s2;
  if (raw_stream(&s2)) return 1;
  hd_hold(true); /* nothing runs: every operation below stays pending */
  void *a = sl_torch_malloc(N, 0, NULL, &rc);
  CHECK(a != NULL && rc == LDG_OK);
  CHECK(g_drv.pfn_cuMemsetD8Async((CUdeviceptr)a, 0x11, N, NULL) ==
        CUDA_SUCCESS); /* "a kernel" PyTorch issued on stream 0 */
  CHECK_RC(sl_torch_free_checked(a, N, 0, NULL), LDG_OK); /* tensor died */
  CHECK(hd_pending_touching(a, N) == 1);
  /* Another stream: not a, whose memset is pending. */
  void *b = sl_torch_malloc(N, 0, s2, &rc);
  CHECK(b != NULL && b != a);
  CHECK(hd_pending_touching(b, N) == 0);
  /* The same stream: a at once (stream order). */
  void *c = sl_torch_malloc(N, 0, NULL, &rc);
  CHECK(c == a);
  CHECK(stat_of(0, SL_TORCH_RECORDED_USES) == 1);
  CHECK_RC(sl_torch_free_checked(b, N, 0, s2), LDG_OK);
  CHECK_RC(sl_torch_free_checked(c, N, 0, NULL), LDG_OK);
  hd_hold(false);
  /* The engine releases every recorded use: nothing stays held. */
  if (wait_unheld(0)) return 1;
  CHECK(stat_of(0, SL_TORCH_ALLOCATED) == 0);
  return teardown();
}

/* record_stream: a use on a second stream keeps the block from every
 * stream, its own included, until that stream passed the free. */
static int t_record_stream(void) {
  if (setup(0)) return 1;
  CUstream s1, s2;
  if (raw_stream(&s1) || raw_stream(&s2)) return 1;
  int rc;
  hd_hold(true);
  void *a = sl_torch_malloc(N, 0, s1, &rc);
  CHECK(a != NULL);
  /* Used on s2 (after s2 waited for s1, PyTorch's rule). */
  CHECK(g_drv.pfn_cuMemsetD8Async((CUdeviceptr)a, 0x22, N, s2) ==
        CUDA_SUCCESS);
  CHECK_RC(sl_torch_record_stream_checked(a, s2), LDG_OK);
  CHECK_RC(sl_torch_record_stream_checked(a, s2), LDG_OK); /* once */
  CHECK_RC(sl_torch_record_stream_checked(a, s1), LDG_OK); /* its own */
  CHECK_RC(sl_torch_free_checked(a, N, 0, s1), LDG_OK);
  CHECK(stat_of(0, SL_TORCH_RECORDED_USES) == 2); /* s1 and s2 */
  CHECK(stat_of(0, SL_TORCH_HELD) > 0);
  void *b = sl_torch_malloc(N, 0, s1, &rc); /* not a: s2 still uses it */
  void *c = sl_torch_malloc(N, 0, s2, &rc);
  CHECK(b != NULL && c != NULL && b != a && c != a);
  CHECK(hd_pending_touching(b, N) == 0 && hd_pending_touching(c, N) == 0);
  hd_hold(false);
  if (wait_unheld(0)) return 1;
  CHECK_RC(sl_torch_free_checked(b, N, 0, s1), LDG_OK);
  CHECK_RC(sl_torch_free_checked(c, N, 0, s2), LDG_OK);
  /* Bad input: a foreign pointer, a freed block, a stream of device 1. */
  char x[16];
  CHECK_RC(sl_torch_record_stream_checked(x, s1), LDG_EINVAL);
  CHECK_MSG("no block of a pool");
  CHECK_RC(sl_torch_record_stream_checked(a, s1), LDG_EINVAL);
  CHECK_MSG("not allocated");
  void *d = sl_torch_malloc(N, 0, s1, &rc);
  if (runtime_set_device(1)) return 1;
  CUstream other;
  if (raw_stream(&other)) return 1;
  CHECK_RC(sl_torch_record_stream_checked(d, other), LDG_EINVAL);
  CHECK_MSG("is on device 1, not 0");
  uint64_t bad = stat_of(0, SL_TORCH_BAD_CALLS);
  sl_torch_record_stream(d, other); /* PyTorch's void hook: prints, counts */
  CHECK(stat_of(0, SL_TORCH_BAD_CALLS) == bad + 1);
  CHECK_RC(sl_torch_free_checked(d, N, 0, s1), LDG_OK);
  if (runtime_set_device(0)) return 1;
  return teardown();
}

/* Out of memory, PyTorch's way: a limit (set_per_process_memory_fraction),
 * an alloc that fails once every retry failed, a free, the retry succeeds;
 * and a block freed under pending work comes back through the pool's own
 * retries (the sync of the stream that holds it). */
static int t_oom_retry(void) {
  if (setup(200)) return 1;
  const size_t big = (size_t)3 << 20; /* a class of its own: one slab */
  CHECK_RC(sl_torch_set_limit(1, (size_t)4 << 20), LDG_OK);
  if (runtime_set_device(1)) return 1;
  CUstream s1, s2;
  if (raw_stream(&s1) || raw_stream(&s2)) return 1;
  int rc;
  void *a = sl_torch_malloc(big, 1, s1, &rc);
  CHECK(a != NULL);
  CHECK_RC(sl_torch_set_limit(1, 1), LDG_EBUSY); /* read at creation */
  CHECK(sl_torch_malloc(big, 1, s2, &rc) == NULL && rc == LDG_ENOMEM);
  CHECK_MSG("out of memory");
  CHECK_MSG("reserved");
  CHECK(stat_of(1, SL_TORCH_OOMS) == 1);
  CHECK_RC(sl_torch_free_checked(a, big, 1, s1), LDG_OK);
  void *b = sl_torch_malloc(big, 1, s2, &rc); /* the retry */
  CHECK(b != NULL && rc == LDG_OK);
  /* Freed with a memset still queued on s2; an alloc on s1 must wait for
   * it: the pool's retries synchronise s2 and hand b out afterwards. */
  CHECK(g_drv.pfn_cuMemsetD8Async((CUdeviceptr)b, 0x33, big, s2) ==
        CUDA_SUCCESS);
  CHECK_RC(sl_torch_free_checked(b, big, 1, s2), LDG_OK);
  void *c = sl_torch_malloc(big, 1, s1, &rc);
  CHECK(c != NULL && rc == LDG_OK);
  CHECK(hd_pending_touching(c, big) == 0);
  CHECK(stat_of(1, SL_TORCH_OOM_RETRIES) > 0);
  CHECK_RC(sl_torch_free_checked(c, big, 1, s1), LDG_OK);
  if (wait_unheld(1)) return 1;
  /* empty_cache returns it to the driver. */
  CHECK(stat_of(1, SL_TORCH_RESERVED) > 0);
  sl_torch_empty_cache();
  CHECK(stat_of(1, SL_TORCH_RESERVED) == 0);
  if (runtime_set_device(0)) return 1;
  return teardown();
}

/* Every hook refuses bad arguments clearly and changes nothing. */
static int t_bad_input(void) {
  if (setup(0)) return 1;
  char x[16];
  CHECK_RC(sl_torch_free_checked(x, 16, 0, NULL), LDG_EINVAL);
  CHECK_MSG("nothing was allocated");
  CHECK_RC(sl_torch_memory_stats(0, NULL, 0), LDG_EINVAL);
  int rc;
  CHECK(sl_torch_malloc(N, -1, NULL, &rc) == NULL && rc == LDG_EINVAL);
  CHECK_MSG("device -1: the process has 2");
  CHECK(sl_torch_malloc(N, 2, NULL, &rc) == NULL && rc == LDG_EINVAL);
  CHECK(sl_torch_malloc(N, 0, CU_STREAM_PER_THREAD, &rc) == NULL &&
        rc == LDG_EINVAL);
  CHECK_MSG("per-thread default stream");
  CUstream dead;
  CHECK(g_drv.pfn_cuStreamCreate(&dead, 0) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuStreamDestroy(dead) == CUDA_SUCCESS);
  CHECK(sl_torch_malloc(N, 0, dead, &rc) == NULL && rc == LDG_EINVAL);
  CHECK_MSG("cuStreamGetCtx");
  if (runtime_set_device(1)) return 1;
  CUstream s1;
  if (raw_stream(&s1)) return 1;
  if (runtime_set_device(0)) return 1;
  CHECK(sl_torch_malloc(N, 0, s1, &rc) == NULL && rc == LDG_EINVAL);
  CHECK_MSG("is on device 1, not 0");
  CHECK(sl_torch_malloc(SIZE_MAX, 0, NULL, &rc) == NULL && rc == LDG_EINVAL);
  CHECK(stat_of(0, SL_TORCH_ALLOCATED) == 0);
  /* The caller's current context is left alone, whichever device. */
  void *a = sl_torch_malloc(N, 1, s1, &rc);
  CHECK(a != NULL);
  CUcontext cur;
  CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == g_ctx[0]);
  /* Frees: foreign, wrong device, wrong size, double; a refused free
   * leaves the block allocated, and the right free still works. */
  CHECK_RC(sl_torch_free_checked(x, 16, 1, s1), LDG_EINVAL);
  CHECK_MSG("foreign pointer");
  CHECK_RC(sl_torch_free_checked(a, N, 0, s1), LDG_EINVAL);
  CHECK_MSG("a block of device 1, freed as device 0");
  CHECK_RC(sl_torch_free_checked(a, N + 1, 1, s1), LDG_EINVAL);
  CHECK_MSG("allocated with 4096 bytes, freed with 4097");
  CHECK_RC(sl_torch_free_checked(a, N, 7, s1), LDG_EINVAL);
  CHECK(stat_of(1, SL_TORCH_ALLOCATED) > 0);
  uint64_t bad = stat_of(1, SL_TORCH_BAD_CALLS);
  sl_torch_free(x, 16, 1, s1); /* PyTorch's void hook: prints, counts */
  CHECK(stat_of(1, SL_TORCH_BAD_CALLS) == bad + 1);
  CHECK_RC(sl_torch_shutdown(), LDG_EBUSY); /* a is still allocated */
  CHECK_RC(sl_torch_free_checked(a, N, 1, s1), LDG_OK);
  CHECK_RC(sl_torch_free_checked(a, N, 1, s1), LDG_EINVAL);
  CHECK_MSG("double free");
  CHECK_RC(sl_torch_use_driver(&g_drv), LDG_EBUSY);
  CHECK_RC(sl_torch_memory_stats(2, NULL, 0), LDG_EINVAL);
  CHECK(sl_torch_stat_name(SL_TORCH_NSTATS) == NULL);
  CHECK(strcmp(sl_torch_stat_name(SL_TORCH_RESERVED_PEAK),
               "reserved_bytes_peak") == 0);
  if (wait_unheld(1)) return 1;
  if (runtime_set_device(1)) return 1;
  if (runtime_set_device(0)) return 1;
  return teardown();
}

/* Request threads, as Python serving threads: each allocates on its own
 * stream (or stream 0), writes its request's value there, copies it back,
 * frees at once (no sync), then synchronises its stream by the driver and
 * checks the data. A block handed to another thread's stream before the
 * work on it ran would show another request's value. */
#define THREADS 4

typedef struct worker {
  int id, iters;
  bool legacy;
  atomic_long *wrong;
  int failed;
} worker;

static void *serve(void *arg) {
  worker *w = arg;
  w->failed = 1;
  if (runtime_set_device(0)) return NULL;
  CUstream st[2] = {NULL, NULL};
  if ((!w->legacy && raw_stream(&st[0])) || raw_stream(&st[1])) return NULL;
  unsigned char *out[2] = {malloc(N), malloc(N)};
  unsigned char v[2] = {0, 0};
  for (int i = 0; out[0] != NULL && out[1] != NULL && i < w->iters; i++) {
    int k = i % 2, rc;
    v[k] = (unsigned char)(w->id * 61 + i);
    size_t bytes = (size_t)N << ((i / 2) % 3); /* a pair shares a class */
    void *p = sl_torch_malloc(bytes, 0, st[k], &rc);
    if (p == NULL) return NULL;
    if (g_drv.pfn_cuMemsetD8Async((CUdeviceptr)p, v[k], bytes, st[k]) !=
            CUDA_SUCCESS ||
        g_drv.pfn_cuMemcpyDtoHAsync(out[k], (CUdeviceptr)p, N, st[k]) !=
            CUDA_SUCCESS)
      return NULL;
    /* The tensor dies at once; its work is still queued. */
    if (sl_torch_free_checked(p, bytes, 0, st[k]) != LDG_OK) return NULL;
    if (k == 0) continue; /* the next request goes to the other stream */
    for (int j = 0; j < 2; j++) {
      if (g_drv.pfn_cuStreamSynchronize(st[j]) != CUDA_SUCCESS) return NULL;
      for (int b = 0; b < N; b++)
        if (out[j][b] != v[j]) {
          atomic_fetch_add(w->wrong, 1);
          break;
        }
    }
  }
  free(out[0]);
  free(out[1]);
  w->failed = 0;
  return NULL;
}

static int t_threads(void) {
  if (setup(SANITIZED ? 0 : 20)) return 1;
  atomic_long wrong = 0;
  worker w[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (worker){i, SANITIZED ? 60 : 300, i == 0, &wrong, 1};
    CHECK(pthread_create(&t[i], NULL, serve, &w[i]) == 0);
  }
  int failed = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    failed |= w[i].failed;
  }
  CHECK(!failed);
  CHECK(atomic_load(&wrong) == 0);
  CHECK(stat_of(0, SL_TORCH_ALLOCATED) == 0);
  CHECK(stat_of(0, SL_TORCH_REUSES) > 0);
  if (wait_unheld(0)) return 1;
  return teardown();
}

/* THE TRACE (sl_torch.c): with SL_TORCH_TRACE, each successful alloc and
 * free is one line (thread, stream, size, pointer); refused calls write
 * nothing; SL_TORCH_TRACE_MAX caps the events; an unwritable path leaves
 * the hooks working. */
static int t_trace(void) {
  char path[256];
  const char *dir = getenv("TEST_TMPDIR");
  snprintf(path, sizeof(path), "%s/sl_torch_trace.txt",
           dir != NULL ? dir : "/tmp");
  CHECK(setenv("SL_TORCH_TRACE", path, 1) == 0);
  CHECK(setenv("SL_TORCH_TRACE_MAX", "3", 1) == 0);
  if (setup(0)) return 1;
  CUstream s;
  if (raw_stream(&s)) return 1;
  int rc;
  void *a = sl_torch_malloc(N, 0, NULL, &rc);
  void *b = sl_torch_malloc(2 * N, 0, s, &rc);
  CHECK(a != NULL && b != NULL);
  CHECK(sl_torch_malloc(SIZE_MAX, 0, NULL, &rc) == NULL); /* not traced */
  CHECK_RC(sl_torch_free_checked(a, N + 1, 0, NULL), LDG_EINVAL); /* nor */
  CHECK_RC(sl_torch_free_checked(a, N, 0, NULL), LDG_OK);
  CHECK_RC(sl_torch_free_checked(b, 2 * N, 0, s), LDG_OK); /* past MAX */
  if (wait_unheld(0)) return 1;
  if (teardown()) return 1;
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  char line[4][160];
  int n = 0;
  while (n < 4 && fgets(line[n], sizeof(line[n]), f) != NULL) n++;
  fclose(f);
  CHECK(n == 4 && line[0][0] == '#');
  unsigned tid = 0;
  CHECK(sscanf(line[1], "a %u ", &tid) == 1 && tid > 0);
  char want[3][160];
  snprintf(want[0], sizeof(want[0]), "a %u %#lx %d %#lx\n", tid, 0ul, N,
           (unsigned long)(uintptr_t)a);
  snprintf(want[1], sizeof(want[1]), "a %u %#lx %d %#lx\n", tid,
           (unsigned long)(uintptr_t)s, 2 * N, (unsigned long)(uintptr_t)b);
  snprintf(want[2], sizeof(want[2]), "f %u %#lx %d %#lx\n", tid, 0ul, N,
           (unsigned long)(uintptr_t)a);
  for (int i = 0; i < 3; i++) {
    if (strcmp(line[i + 1], want[i]) != 0)
      fprintf(stderr, "  line %d: %s  wanted %s", i + 1, line[i + 1], want[i]);
    CHECK(strcmp(line[i + 1], want[i]) == 0);
  }
  /* A path that cannot be written: one line on stderr, hooks unharmed. */
  CHECK(setenv("SL_TORCH_TRACE", "/nonexistent-dir/trace.txt", 1) == 0);
  if (setup(0)) return 1;
  a = sl_torch_malloc(N, 0, NULL, &rc);
  CHECK(a != NULL);
  CHECK_RC(sl_torch_free_checked(a, N, 0, NULL), LDG_OK);
  if (wait_unheld(0)) return 1;
  CHECK(unsetenv("SL_TORCH_TRACE") == 0 &&
        unsetenv("SL_TORCH_TRACE_MAX") == 0);
  return teardown();
}

/* THE CALL COUNTERS (sl_torch.c): off by default (every counter 0 while
 * the hooks run); with SL_TORCH_STATS=1 a new slab shows as a cuMemAlloc
 * and its return at empty_cache as a cuMemFree, each hook's time adds up,
 * the layer's context calls show as driver calls; a second state (after shutdown, on the same
 * driver table) neither wraps the table twice nor keeps the old counts. */
static int t_call_counters(void) {
  for (int i = 0; i < SL_TORCH_NSTATS; i++) CHECK(sl_torch_stat_name(i));
  CHECK(strcmp(sl_torch_stat_name(SL_TORCH_DRV_CTX), "drv_ctx") == 0);
  CHECK(unsetenv("SL_TORCH_STATS") == 0);
  if (setup(0)) return 1;
  int rc;
  void *a = sl_torch_malloc(N, 0, NULL, &rc);
  CHECK(a != NULL);
  CHECK_RC(sl_torch_free_checked(a, N, 0, NULL), LDG_OK);
  for (int i = SL_TORCH_ALLOC_NS; i < SL_TORCH_NSTATS; i++)
    CHECK(stat_of(0, i) == 0);
  if (wait_unheld(0) || teardown()) return 1;
  CHECK(setenv("SL_TORCH_STATS", "1", 1) == 0);
  if (setup(0)) return 1;
  /* Round 1 after a shutdown, on the table the first round wrapped. */
  uint64_t first_ctx_calls = 0;
  for (int round = 0; round < 2; round++) {
    CHECK_RC(sl_torch_memory_stats(0, NULL, 0), LDG_EINVAL); /* no state */
    if (runtime_set_device(0)) return 1; /* a shutdown leaves none current */
    a = sl_torch_malloc(N, 0, NULL, &rc);
    CHECK(a != NULL);
    CHECK(stat_of(0, SL_TORCH_DRV_MEM_ALLOC) == 1); /* the first slab */
    CHECK(stat_of(0, SL_TORCH_ALLOC_NS) > 0);
    CHECK(stat_of(0, SL_TORCH_FREE_NS) == 0);
    /* The layer asked for the current context before the first
     * segment's cuMemAlloc; the same count in both rounds: neither the
     * counters nor the hooks' switch entry wrapped the table twice. */
    uint64_t ctx_calls = stat_of(0, SL_TORCH_DRV_CTX);
    CHECK(ctx_calls > 0);
    if (round == 0) first_ctx_calls = ctx_calls;
    CHECK(ctx_calls == first_ctx_calls);
    CHECK_RC(sl_torch_free_checked(a, N, 0, NULL), LDG_OK);
    CHECK(stat_of(0, SL_TORCH_FREE_NS) > 0);
    CHECK(stat_of(0, SL_TORCH_DRV_MEM_FREE) == 0);
    if (wait_unheld(0)) return 1;
    sl_torch_empty_cache(); /* the slab's segment goes back */
    CHECK(stat_of(0, SL_TORCH_DRV_MEM_FREE) == 1);
    CHECK_RC(sl_torch_shutdown(), LDG_OK); /* the counters start over */
  }
  CHECK(unsetenv("SL_TORCH_STATS") == 0);
  return teardown();
}

/* THE CALLER'S CURRENT CONTEXT (sl_torch.c): every hook leaves the thread's
 * current context as it found it — none, the hook's device's or another
 * device's — on the paths where the layer makes the device's context
 * current too (a new segment's cuMemAlloc, the legacy stream's records,
 * empty_cache's cuMemFree); and, with SL_TORCH_STATS=1, an alloc and free
 * on a stream of its own from the cache make no context call when the
 * caller has the device's context current (they used to make 4: the
 * save and restore of every hook). */
static int t_context(void) {
  CHECK(setenv("SL_TORCH_STATS", "1", 1) == 0);
  if (setup(0)) return 1;
  CUstream s0;
  if (raw_stream(&s0)) return 1;
  const CUcontext callers[3] = {NULL, g_ctx[0], g_ctx[1]};
  for (int i = 0; i < 3; i++) {
    CHECK(g_drv.pfn_cuCtxSetCurrent(callers[i]) == CUDA_SUCCESS);
    CUcontext cur = (CUcontext)&cur;
    int rc;
    /* A size no earlier round used: a new segment, a cuMemAlloc. */
    size_t big = ((size_t)3 + (size_t)i) << 20;
    uint64_t mem_allocs = stat_of(0, SL_TORCH_DRV_MEM_ALLOC);
    if (mem_allocs == UINT64_MAX) mem_allocs = 0; /* no state yet */
    void *a = sl_torch_malloc(big, 0, NULL, &rc);
    CHECK(a != NULL && stat_of(0, SL_TORCH_DRV_MEM_ALLOC) > mem_allocs);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    void *b = sl_torch_malloc(N, 0, s0, &rc);
    CHECK(b != NULL);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    CHECK_RC(sl_torch_record_stream_checked(b, NULL), LDG_OK);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    CHECK_RC(sl_torch_free_checked(a, big, 0, NULL), LDG_OK);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    CHECK_RC(sl_torch_free_checked(b, N, 0, s0), LDG_OK);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    CHECK_RC(sl_torch_poll(), LDG_OK);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
    if (wait_unheld(0)) return 1;
    uint64_t mem_frees = stat_of(0, SL_TORCH_DRV_MEM_FREE);
    sl_torch_empty_cache();
    CHECK(stat_of(0, SL_TORCH_DRV_MEM_FREE) > mem_frees);
    CHECK(g_drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == callers[i]);
  }
  /* The steady state, as serve.py's request threads run it (not with the
   * engine thread, whose own context calls the counter counts too). */
  const char *engine = getenv("SL_TORCH_ENGINE");
  if (engine == NULL || strcmp(engine, "thread") != 0) {
    if (runtime_set_device(0)) return 1;
    int rc;
    void *a = sl_torch_malloc(N, 0, s0, &rc);
    CHECK(a != NULL);
    CHECK_RC(sl_torch_free_checked(a, N, 0, s0), LDG_OK);
    if (wait_unheld(0)) return 1;
    uint64_t ctx_calls = stat_of(0, SL_TORCH_DRV_CTX);
    for (int i = 0; i < 16; i++) {
      a = sl_torch_malloc(N, 0, s0, &rc);
      CHECK(a != NULL);
      CHECK_RC(sl_torch_free_checked(a, N, 0, s0), LDG_OK);
    }
    if (stat_of(0, SL_TORCH_DRV_CTX) != ctx_calls)
      fprintf(stderr, "  %llu context calls for 16 allocs and frees\n",
              (unsigned long long)(stat_of(0, SL_TORCH_DRV_CTX) - ctx_calls));
    CHECK(stat_of(0, SL_TORCH_DRV_CTX) == ctx_calls);
    if (wait_unheld(0)) return 1;
  }
  CHECK(unsetenv("SL_TORCH_STATS") == 0);
  return teardown();
}

static const test_case tests[] = {
    {"reuse_rules", t_reuse_rules,
     "stream 0, same-stream reuse at once, none elsewhere while pending"},
    {"record_stream", t_record_stream,
     "a use recorded on a second stream holds the block from every stream"},
    {"oom_retry", t_oom_retry,
     "out of memory after the retries, then a retry succeeds; empty_cache"},
    {"bad_input", t_bad_input, "every hook refuses bad arguments clearly"},
    {"threads", t_threads,
     "request threads free at once; no data of another request seen"},
    {"trace", t_trace,
     "SL_TORCH_TRACE: a line per alloc and free, capped; bad path harmless"},
    {"call_counters", t_call_counters,
     "SL_TORCH_STATS=1: hook time and driver calls counted; off: zeros"},
    {"context", t_context,
     "the caller's context stays; no context call in the steady state"},
};

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  const char *engine = getenv("SL_TORCH_ENGINE");
  printf("engine: %s\n", engine != NULL && strcmp(engine, "thread") == 0
                              ? "its thread (SL_TORCH_ENGINE=thread)"
                              : "polled by the hooks");
  return run_test_table("sl_torch_test", tests, TEST_COUNT(tests), only);
}
