/*
 * PyTorch's CUDAPluggableAllocator hooks on the pool (sl_torch.h).
 *
 * WHAT THE POOL SEES, AND WHY REUSE IS SAFE
 *   PyTorch launches its kernels, copies and collectives itself: the pool
 *   is told about a block only through the hooks. What it learns:
 *   - alloc(size, device, s): the block's home stream is s (adopted).
 *     PyTorch's rule, which its own allocator relies on too: the tensor is
 *     used on s, or on another stream only after that stream waited for s
 *     (wait_stream) and, for its memory to stay protected, after
 *     record_stream.
 *   - free(ptr, size, device, s): the storage died, so every operation
 *     that used it was issued before this call (a kernel launch reads its
 *     argument tensors' pointers while they are alive; the launch
 *     happens-before the refcount's drop, which happens-before this free).
 *     The shim records one use of the block on s with slp_record_use
 *     (slc_stream_record_external: ordering rule 1, issue then record — the
 *     work was issued, the record comes after): the ledger holds the block
 *     until s is known complete past this point (an engine marker, a sync,
 *     a device sync), i.e. until every operation PyTorch issued on s before
 *     the free has completed. The same for each stream sl_torch_record_stream
 *     named for the block (PyTorch's record_stream semantics: work issued
 *     on that stream until the free, not only until the record call).
 *   - Then slp_free. Its two rules (pool.c) give the reuse: with every
 *     pending use on the home stream, the block is handed at once to the
 *     next alloc on the same stream from this thread (its new owner's work
 *     is queued on s after the old: stream order, as PyTorch's caching
 *     allocator and cudaFreeAsync); a use on another stream first makes
 *     that stream wait for s (pool.c, THE SECOND RULE). With a use recorded
 *     on another stream, the block is held until the ledger releases every
 *     recorded use: reuse only after completion is known.
 *   So a block is reused before the work on it completed only by stream
 *   order on its own stream. What the pool cannot see: a use on a second
 *   stream that nobody announced with sl_torch_record_stream; then the block
 *   may be reused as soon as its alloc stream passed the free, as with
 *   PyTorch's own allocator when record_stream is forgotten.
 *   If a use cannot be recorded (LDG_ENOMEM), that stream is synchronised
 *   before the free; if the sync fails too, the free is refused and the
 *   block stays allocated: leaked, never reused early.
 *
 * THE DEFAULT STREAM
 *   PyTorch's default stream is cudaStream_t 0, the legacy default stream
 *   (PyTorch is not built for per-thread default streams). Per device, one
 *   object of slc_stream_adopt_legacy stands for it (adopt.c argues the
 *   semantics). NULL and CU_STREAM_LEGACY map to it; CU_STREAM_PER_THREAD is
 *   refused (a different stream on every thread).
 *
 * THE ENGINE: WHO RELEASES THE RECORDED USES
 *   Every free records one use (a ledger entry); something must find the
 *   stream complete past it. By default no engine thread: markers are
 *   placed every 64 operations or 200 us of a stream (at issue), and the
 *   hooks poll the engine every 64 frees of a thread (non-blocking; as
 *   PyTorch's allocator processes its events on malloc), as does the
 *   pool's slow path before a new slab and at out of memory. Same-stream
 *   reuse never waits for a release, so sparse markers cost nothing there;
 *   they only delay reuse by other streams. The engine thread
 *   (SL_TORCH_ENGINE=thread; markers every 8 operations or 20 us unless
 *   SL_TORCH_MARKER_OPS / SL_TORCH_MARKER_US say otherwise) releases
 *   sooner, at the CPU cost of its wake-ups (bench/RESULTS.md, issue 9):
 *   the first H200 run of the serving benchmark measured that cost at
 *   1.4 ms of CPU per request of ~160 allocations (4.67 against PyTorch's
 *   3.27 ms). sl_torch_poll lets an application poll when idle.
 *
 * THE CALLER'S CURRENT CONTEXT
 *   The layer makes a device's primary context current on the calling
 *   thread for some of its driver calls and leaves it there; the CUDA
 *   runtime takes its current device from the current context, so
 *   switching it under PyTorch on a multi-GPU host would move PyTorch's
 *   next launch to another device. So a hook must leave the thread's
 *   current context as it found it. Since main 22c7369 most of the
 *   layer's calls make none current (copies, event records, waits, syncs
 *   and queries on a stream of its own: sl_cuda.h THREADING); only
 *   launches, memsets, allocations (a new segment's cuMemAlloc, a trim's
 *   cuMemFree) and the legacy stream's calls do, and the layer switches
 *   only through cuCtxSetCurrent of the driver table it was given, which
 *   is ours (slt.drv). So the save is lazy: our cuCtxSetCurrent entry
 *   (slt__set_current), on a thread inside a hook (slt__in.depth), asks
 *   the driver for the current context before the first switch of that
 *   hook and remembers it; the hook restores it on the way out only if a
 *   switch happened. A hook that switches nothing makes no context call
 *   of its own (it made 4 before, ~650 per request of the serving
 *   benchmark: a cuCtxGetCurrent to save, one to compare on the way out,
 *   and the same again in the other hook; bench/RESULTS.md, issue 14,
 *   sixth session: 4.02 -> 0.02 per alloc and free on the real traces'
 *   replays). What the layer asks itself before a switch it may skip (its
 *   cuCtxGetCurrent in slc__make_current) stays.
 *
 * THE CALL COUNTERS (SL_TORCH_STATS=1, read when the state is made)
 *   What the hooks cost, for the benchmarks (issue 14: the 4-thread serving
 *   cell spent 1.13x PyTorch's CPU per request, cause unknown): the ns
 *   spent inside sl_torch_malloc and sl_torch_free_checked (two
 *   clock_gettime per call), the calls of 20 us or more, and every driver
 *   call of the kinds below that the process makes through the layer (the
 *   hooks', the pool's and the engine's): the driver table is wrapped, one
 *   relaxed increment per call, before the context is made. Off (the
 *   default), a hook pays one predictable branch and the driver is not
 *   wrapped. Counted process-wide, like bad_calls; reset by
 *   sl_torch_shutdown.
 *
 * SHARED STATE
 *   The context, each device's pool and legacy stream: made once under the
 *   init mutex and published with a release store; readers acquire and take
 *   the lock only while the pointer is still NULL. Adopted streams: an
 *   open-addressing map, written under the init mutex (value, then key with
 *   release), read lock-free (key with acquire, then value); entries are
 *   never removed before sl_torch_shutdown. Recorded streams: a small table
 *   under its own mutex, taken by a free only while the table is not empty
 *   (an atomic count).
 */
#define _GNU_SOURCE /* secure_getenv */
#include "torch_alloc/sl_torch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "pool/sl_pool.h"

#define slt__load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define slt__load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define slt__store_release(p, v) \
  atomic_store_explicit((p), (v), memory_order_release)
#define slt__store_relaxed(p, v) \
  atomic_store_explicit((p), (v), memory_order_relaxed)
#define slt__bump(p) atomic_fetch_add_explicit((p), 1, memory_order_relaxed)

#define SLT__SLOTS (2 * SL_TORCH_MAX_STREAMS) /* a power of two */
#define SLT__POLL_EVERY 64 /* frees per thread between engine polls */
#define SLT__RBUCKETS 256

struct slt__dev {
  _Atomic(void *) pool;   /* slp_pool */
  _Atomic(void *) legacy; /* slc_stream of slc_stream_adopt_legacy */
  size_t limit; /* init mutex */
};

struct slt__slot {
  atomic_uintptr_t key; /* the CUstream; 0: empty */
  _Atomic(slc_stream *) val;
};

/* Streams recorded for one block (sl_torch_record_stream). */
struct slt__rec {
  uintptr_t addr;
  size_t n;
  slc_stream *s[SL_TORCH_MAX_RECORDED];
  struct slt__rec *next;
};

static struct {
  pthread_mutex_t mu; /* init: driver, context, pools, streams */
  bool have_driver;
  slc_driver drv;
  _Atomic(slc_context *) ctx;
  int n_dev; /* written before ctx is published */
  struct slt__dev dev[SL_TORCH_MAX_DEVICES];
  struct slt__slot streams[SLT__SLOTS];
  size_t n_streams; /* init mutex */
  pthread_mutex_t rec_mu;
  atomic_long n_recs;
  struct slt__rec *recs[SLT__RBUCKETS]; /* rec_mu */
  atomic_uint_fast64_t bad_calls, recorded_uses;
  /* THE CALL COUNTERS: on before ctx is published; indexed by the stat
   * (SL_TORCH_ALLOC_NS ...). */
  bool counting;
  atomic_uint_fast64_t calls[SL_TORCH_NSTATS];
  unsigned poll_every; /* 0: the engine thread polls; before ctx */
  /* THE TRACE (SL_TORCH_TRACE): opened before ctx is published, closed at
   * shutdown; lines written under trace_mu. */
  FILE *trace;
  pthread_mutex_t trace_mu;
  uint64_t trace_left;           /* events still to write; trace_mu */
  atomic_uint trace_tids;        /* thread numbers handed out */
} slt = {.mu = PTHREAD_MUTEX_INITIALIZER,
         .rec_mu = PTHREAD_MUTEX_INITIALIZER,
         .trace_mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- The caller's current context ------------------------------------- */

/* THE CALLER'S CURRENT CONTEXT: how many hooks are in progress on this
 * thread (a count, should a hook ever run inside another), whether the
 * layer switched the context since the outermost began, and what was
 * current before that first switch. */
static _Thread_local struct {
  unsigned depth;
  bool saved;
  CUcontext was;
} slt__in;

/* The entry the layer switches with (slt.drv.pfn_cuCtxSetCurrent), and
 * the one it wraps: set under the init mutex before the context exists. */
static CUresult(CUDAAPI *slt__next_set)(CUcontext);

static CUresult CUDAAPI slt__set_current(CUcontext ctx) {
  if (slt__in.depth != 0 && !slt__in.saved) {
    CUcontext was = NULL;
    if (slt.drv.pfn_cuCtxGetCurrent(&was) != CUDA_SUCCESS) was = NULL;
    slt__in.was = was;
    slt__in.saved = true;
  }
  return slt__next_set(ctx);
}

static void slt__enter(void) { slt__in.depth++; }

/* The hook's way out: if a switch happened in it, the caller's context
 * is current again (none, if the save could not read it, as before). */
static void slt__leave(void) {
  if (--slt__in.depth != 0 || !slt__in.saved) return;
  slt__in.saved = false;
  CUcontext cur = NULL;
  if (slt.drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == slt__in.was)
    return;
  (void)slt__next_set(slt__in.was);
}

/* ---- Process-wide state -------------------------------------------------- */

static unsigned slt__env_uint(const char *name, unsigned dflt) {
  const char *v = secure_getenv(name);
  if (v == NULL || *v == '\0') return dflt;
  char *end = NULL;
  unsigned long n = strtoul(v, &end, 10);
  return end != NULL && *end == '\0' && n <= 1000000 ? (unsigned)n : dflt;
}

static size_t slt__env_limit(void) {
  const char *v = secure_getenv("SL_TORCH_LIMIT_BYTES");
  if (v == NULL || *v == '\0') return 0;
  char *end = NULL;
  unsigned long long n = strtoull(v, &end, 10);
  return end != NULL && *end == '\0' ? (size_t)n : 0;
}

/* THE CALL COUNTERS: the wrapped driver entries, each with the stat it
 * counts in, its parameters and the arguments to pass on. */
#define SLT__COUNTED(X)                                                      \
  X(cuMemAlloc, SL_TORCH_DRV_MEM_ALLOC, (CUdeviceptr * p, size_t n), (p, n)) \
  X(cuMemFree, SL_TORCH_DRV_MEM_FREE, (CUdeviceptr p), (p))                  \
  X(cuEventCreate, SL_TORCH_DRV_EVENT_CREATE, (CUevent * e, unsigned f),     \
    (e, f))                                                                  \
  X(cuEventRecord, SL_TORCH_DRV_EVENT_RECORD, (CUevent e, CUstream s), (e, s)) \
  X(cuEventQuery, SL_TORCH_DRV_EVENT_QUERY, (CUevent e), (e))                \
  X(cuStreamWaitEvent, SL_TORCH_DRV_STREAM_WAIT,                             \
    (CUstream s, CUevent e, unsigned f), (s, e, f))                          \
  X(cuStreamQuery, SL_TORCH_DRV_STREAM_QUERY, (CUstream s), (s))             \
  X(cuStreamSynchronize, SL_TORCH_DRV_SYNC, (CUstream s), (s))               \
  X(cuEventSynchronize, SL_TORCH_DRV_SYNC, (CUevent e), (e))                 \
  X(cuCtxSynchronize, SL_TORCH_DRV_SYNC, (void), ())                         \
  X(cuLaunchHostFunc, SL_TORCH_DRV_HOST_FUNC,                                \
    (CUstream s, CUhostFn fn, void *u), (s, fn, u))                          \
  X(cuStreamWriteValue64, SL_TORCH_DRV_WRITE_VALUE,                          \
    (CUstream s, CUdeviceptr a, cuuint64_t v, unsigned f), (s, a, v, f))     \
  X(cuCtxGetCurrent, SL_TORCH_DRV_CTX, (CUcontext * c), (c))                 \
  X(cuCtxSetCurrent, SL_TORCH_DRV_CTX, (CUcontext c), (c))

/* The real entries: set under the init mutex before the context exists,
 * read by the wrappers afterwards (the context's publication orders them). */
#define SLT__REAL(name, stat, params, args) \
  static CUresult(CUDAAPI *slt__real_##name) params;
SLT__COUNTED(SLT__REAL)
#undef SLT__REAL

#define SLT__WRAP(name, stat, params, args)            \
  static CUresult CUDAAPI slt__counted_##name params { \
    slt__bump(&slt.calls[stat]);                       \
    return slt__real_##name args;                      \
  }
SLT__COUNTED(SLT__WRAP)
#undef SLT__WRAP

/* Under the init mutex, before the context is made: wraps slt.drv's
 * entries (once: a table kept from an earlier state is wrapped already). */
static void slt__count_driver_locked(void) {
#define SLT__INSTALL(name, stat, params, args)           \
  if (slt.drv.pfn_##name != slt__counted_##name) {       \
    slt__real_##name = slt.drv.pfn_##name;               \
    slt.drv.pfn_##name = slt__counted_##name;            \
  }
  SLT__COUNTED(SLT__INSTALL)
#undef SLT__INSTALL
}

/* Under the init mutex, before the context is made and before the
 * counters wrap the table (so a counted table is counted -> ours -> the
 * driver's, and a later state finds both in place): THE CALLER'S CURRENT
 * CONTEXT's entry under the layer's switches. */
static void slt__switch_driver_locked(void) {
  CUresult(CUDAAPI * top)(CUcontext) = slt.drv.pfn_cuCtxSetCurrent;
  if (top == slt__set_current ||
      (top == slt__counted_cuCtxSetCurrent &&
       slt__real_cuCtxSetCurrent == slt__set_current))
    return; /* a table kept from an earlier state */
  slt__next_set = top;
  slt.drv.pfn_cuCtxSetCurrent = slt__set_current;
}

static uint64_t slt__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A hook's time since t0 (THE CALL COUNTERS; t0 0: not counting). */
#define SLT__SLOW_NS 20000
static void slt__hook_time(int stat, uint64_t t0) {
  if (t0 == 0) return;
  uint64_t dt = slt__now_ns() - t0;
  atomic_fetch_add_explicit(&slt.calls[stat], dt, memory_order_relaxed);
  if (dt >= SLT__SLOW_NS) slt__bump(&slt.calls[SL_TORCH_SLOW_HOOKS]);
}

/* THE TRACE: with SL_TORCH_TRACE=path, every successful alloc and free
 * appends one line to path (truncated at the first call):
 *   a TID STREAM SIZE PTR      f TID STREAM SIZE PTR
 * TID numbers the calling threads 1, 2, ... in order of their first traced
 * call, STREAM is PyTorch's CUstream (0: the legacy default stream), SIZE
 * the bytes PyTorch asked for, PTR the block (hex). At most
 * SL_TORCH_TRACE_MAX events (default 200000), flushed line by line (the
 * process may exit without sl_torch_shutdown). A free's line is written
 * just before its slp_free and an alloc's just after its slp_alloc, so a
 * block's free always comes before its next alloc in the file. For the allocator's memory
 * evidence (issue 14): bench/torch_trace.c replays a trace on the host
 * executor. Costs one relaxed load per call when off. */
static void slt__trace_open_locked(void) {
  const char *path = secure_getenv("SL_TORCH_TRACE");
  if (path == NULL || *path == '\0' || slt.trace != NULL) return;
  const char *max = secure_getenv("SL_TORCH_TRACE_MAX");
  char *end = NULL;
  unsigned long long n = max != NULL ? strtoull(max, &end, 10) : 0;
  slt.trace_left = end != NULL && end != max && *end == '\0' ? n : 200000;
  slt.trace = fopen(path, "w");
  if (slt.trace == NULL) {
    fprintf(stderr, "sl_torch: SL_TORCH_TRACE=%s: cannot write it\n", path);
    return;
  }
  fprintf(slt.trace, "# sl_torch trace v1: a|f TID STREAM SIZE PTR\n");
  fflush(slt.trace);
}

static void slt__trace(char op, CUstream stream, size_t size, void *ptr) {
  static _Thread_local unsigned tid;
  pthread_mutex_lock(&slt.trace_mu);
  if (slt.trace != NULL && slt.trace_left > 0) {
    if (tid == 0) tid = atomic_fetch_add(&slt.trace_tids, 1) + 1;
    slt.trace_left--;
    fprintf(slt.trace, "%c %u %#lx %zu %#lx\n", op, tid,
            (unsigned long)(uintptr_t)stream, size,
            (unsigned long)(uintptr_t)ptr);
    fflush(slt.trace);
  }
  pthread_mutex_unlock(&slt.trace_mu);
}

/* Under the init mutex. */
static slc_context *slt__create_locked(void) {
  static const char fn[] = "sl_torch_init";
  if (!slt.have_driver) {
    if (slc_driver_load(&slt.drv, NULL) != 0) {
      (void)slc_set_error(SLC_ENODRIVER, fn, "%s", slt.drv.load_error);
      return NULL;
    }
    slt.have_driver = true;
  }
  const char *counting = secure_getenv("SL_TORCH_STATS");
  slt.counting = counting != NULL && strcmp(counting, "1") == 0;
  slt__switch_driver_locked();
  if (slt.counting) slt__count_driver_locked();
  slc_context *c = NULL;
  if (slc_context_create(&slt.drv, &c) != LDG_OK) return NULL;
  /* THE ENGINE (see the top): polled by the hooks unless
   * SL_TORCH_ENGINE=thread. */
  const char *mode = secure_getenv("SL_TORCH_ENGINE");
  bool thread = mode != NULL && strcmp(mode, "thread") == 0;
  slc_engine_config ec = {
      .thread = thread,
      .marker_every_ops = slt__env_uint("SL_TORCH_MARKER_OPS", thread ? 0 : 64),
      .marker_every_us = slt__env_uint("SL_TORCH_MARKER_US", thread ? 0 : 200),
  };
  slt.poll_every = thread ? 0 : SLT__POLL_EVERY;
  if (slc_engine_enable(c, &ec) != LDG_OK) {
    slc_error e = *slc_last_error();
    (void)slc_context_destroy(c);
    (void)slc_set_error(e.code, fn, "%s", e.message);
    return NULL;
  }
  int n = slc_device_count(c);
  slt.n_dev = n < SL_TORCH_MAX_DEVICES ? n : SL_TORCH_MAX_DEVICES;
  size_t env = slt__env_limit();
  for (int i = 0; i < slt.n_dev; i++)
    if (slt.dev[i].limit == 0) slt.dev[i].limit = env;
  slt__trace_open_locked();
  /* Release: n_dev, the limits, the trace and the counting switch before
   * the pointer (readers acquire). */
  slt__store_release(&slt.ctx, c);
  return c;
}

static slc_context *slt__context(void) {
  slc_context *c = slt__load_acquire(&slt.ctx);
  if (c != NULL) return c;
  pthread_mutex_lock(&slt.mu);
  c = slt__load_relaxed(&slt.ctx);
  if (c == NULL) c = slt__create_locked();
  pthread_mutex_unlock(&slt.mu);
  return c;
}

static int slt__check_device(int device, const char *fn) {
  if (device < 0 || device >= slt.n_dev)
    return slc_set_error(LDG_EINVAL, fn, "device %d: the process has %d",
                         device, slt.n_dev);
  return LDG_OK;
}

/* Makes device's pool (the limit read now) or its legacy stream object. */
static int slt__make_pool(slc_context *c, int device, void **out) {
  slp_config cfg = {.limit_bytes = slt.dev[device].limit};
  slp_pool *p = NULL;
  int rc = slp_pool_create_device(c, device, &cfg, &p);
  *out = p;
  return rc;
}

static int slt__make_legacy(slc_context *c, int device, void **out) {
  slc_stream *s = NULL;
  int rc = slc_stream_adopt_legacy(c, device, &s);
  *out = s;
  return rc;
}

/* The object in *slot, made once under the init mutex by make() and
 * published with release; NULL (the error recorded) if make failed. */
static void *slt__once(_Atomic(void *) *slot, slc_context *c, int device,
                       int (*make)(slc_context *, int, void **)) {
  void *v = slt__load_acquire(slot);
  if (v != NULL) return v;
  pthread_mutex_lock(&slt.mu);
  v = slt__load_relaxed(slot);
  if (v == NULL) {
    if (make(c, device, &v) == LDG_OK)
      slt__store_release(slot, v); /* pairs with the acquire above */
    else
      v = NULL;
  }
  pthread_mutex_unlock(&slt.mu);
  return v;
}

static slp_pool *slt__pool(slc_context *c, int device) {
  return slt__once(&slt.dev[device].pool, c, device, slt__make_pool);
}

static slc_stream *slt__legacy(slc_context *c, int device) {
  return slt__once(&slt.dev[device].legacy, c, device, slt__make_legacy);
}

static size_t slt__hash(uintptr_t k) {
  return (size_t)(((uint64_t)k * UINT64_C(0x9E3779B97F4A7C15)) >> 40) &
         (SLT__SLOTS - 1);
}

static slc_stream *slt__find(uintptr_t key) {
  for (size_t i = slt__hash(key), n = 0; n < SLT__SLOTS;
       i = (i + 1) & (SLT__SLOTS - 1), n++) {
    /* Acquire: pairs with the writer's release of the key (value first). */
    uintptr_t k = slt__load_acquire(&slt.streams[i].key);
    if (k == 0) return NULL;
    if (k == key) return slt__load_relaxed(&slt.streams[i].val);
  }
  return NULL;
}

/* The adopted stream for PyTorch's handle h on `device`, or NULL with the
 * error recorded. */
static slc_stream *slt__stream(slc_context *c, int device, CUstream h,
                               const char *fn) {
  slc_stream *s;
  if (h == NULL || h == CU_STREAM_LEGACY) {
    s = slt__legacy(c, device);
    return s;
  }
  if (h == CU_STREAM_PER_THREAD) {
    (void)slc_set_error(LDG_EINVAL, fn,
                        "the per-thread default stream names a different "
                        "stream on every thread and cannot be adopted");
    return NULL;
  }
  uintptr_t key = (uintptr_t)h;
  s = slt__find(key);
  if (s == NULL) {
    pthread_mutex_lock(&slt.mu);
    s = slt__find(key);
    if (s == NULL) {
      if (slt.n_streams == SL_TORCH_MAX_STREAMS) {
        (void)slc_set_error(LDG_ENOMEM, fn, "more than %d streams adopted",
                            SL_TORCH_MAX_STREAMS);
      } else if (slc_stream_adopt(c, h, &s) == LDG_OK) {
        size_t i = slt__hash(key);
        while (slt__load_relaxed(&slt.streams[i].key) != 0)
          i = (i + 1) & (SLT__SLOTS - 1);
        slt__store_relaxed(&slt.streams[i].val, s);
        /* Release: the value (and the stream it points to) before the key. */
        slt__store_release(&slt.streams[i].key, key);
        slt.n_streams++;
      } else {
        s = NULL;
      }
    }
    pthread_mutex_unlock(&slt.mu);
    if (s == NULL) return NULL;
  }
  if (slc_stream_device(s) != device) {
    (void)slc_set_error(LDG_EINVAL, fn, "stream %p is on device %d, not %d",
                        (void *)h, slc_stream_device(s), device);
    return NULL;
  }
  return s;
}

/* ---- alloc and free ------------------------------------------------------ */

void *sl_torch_malloc(size_t size, int device, CUstream stream, int *rc_out) {
  static const char fn[] = "sl_torch_alloc";
  int rc = LDG_OK;
  void *ptr = NULL;
  slc_context *c = size == 0 ? NULL : slt__context();
  if (size == 0) {
    /* An empty tensor: no memory, nothing to free. */
  } else if (c == NULL) {
    rc = slc_last_error()->code;
  } else if ((rc = slt__check_device(device, fn)) == LDG_OK) {
    uint64_t t0 = slt.counting ? slt__now_ns() : 0;
    slt__enter();
    slc_stream *s = slt__stream(c, device, stream, fn);
    slp_pool *p = s != NULL ? slt__pool(c, device) : NULL;
    slp_block *b = NULL;
    if (p == NULL)
      rc = slc_last_error()->code;
    else
      rc = slp_alloc(p, s, size, &b);
    if (rc == LDG_OK) ptr = (void *)(uintptr_t)slp_block_dptr(b);
    slt__leave();
    slt__hook_time(SL_TORCH_ALLOC_NS, t0);
  }
  if (rc == LDG_OK && ptr == NULL && size != 0) rc = SLC_EDRIVER;
  if (rc == LDG_OK && ptr != NULL && slt.trace != NULL)
    slt__trace('a', stream, size, ptr);
  if (rc_out != NULL) *rc_out = rc;
  return ptr;
}

/* The streams recorded for addr, taken out of the table (NULL: none). */
static struct slt__rec *slt__take_rec(uintptr_t addr) {
  if (slt__load_acquire(&slt.n_recs) == 0) return NULL;
  size_t k = (size_t)(addr >> 9) % SLT__RBUCKETS;
  struct slt__rec *r = NULL;
  pthread_mutex_lock(&slt.rec_mu);
  for (struct slt__rec **l = &slt.recs[k]; *l != NULL; l = &(*l)->next) {
    if ((*l)->addr == addr) {
      r = *l;
      *l = r->next;
      atomic_fetch_sub_explicit(&slt.n_recs, 1, memory_order_relaxed);
      break;
    }
  }
  pthread_mutex_unlock(&slt.rec_mu);
  return r;
}

/* Records a use of b on s covering everything issued on s so far; if that
 * cannot be recorded, synchronises s instead. */
static int slt__use(slc_stream *s, slp_block *b) {
  int rc = slp_record_use(s, &b, 1, NULL);
  if (rc == LDG_OK) {
    slt__bump(&slt.recorded_uses);
    return rc;
  }
  if (rc == LDG_EINVAL) return rc; /* the block: nothing issued */
  return slc_stream_synchronize(s);
}

/* The pool of one device (other than `not`) holding a block at addr, for a
 * clearer message; -1 if none. */
static int slt__owner(uintptr_t addr, int not) {
  for (int i = 0; i < slt.n_dev; i++) {
    slp_pool *p = slt__load_acquire(&slt.dev[i].pool);
    if (i != not && p != NULL && slp_block_find(p, addr) != NULL) return i;
  }
  return -1;
}

int sl_torch_free_checked(void *ptr, size_t size, int device,
                          CUstream stream) {
  static const char fn[] = "sl_torch_free";
  if (ptr == NULL) return LDG_OK;
  slc_context *c = slt__load_acquire(&slt.ctx);
  if (c == NULL)
    return slc_set_error(LDG_EINVAL, fn, "%p: nothing was allocated", ptr);
  int rc = slt__check_device(device, fn);
  if (rc != LDG_OK) return rc;
  uintptr_t addr = (uintptr_t)ptr;
  slp_pool *p = slt__load_acquire(&slt.dev[device].pool);
  slp_block *b = p != NULL ? slp_block_find(p, addr) : NULL;
  if (b == NULL) {
    int other = slt__owner(addr, device);
    if (other >= 0)
      return slc_set_error(LDG_EINVAL, fn,
                           "%p is a block of device %d, freed as device %d",
                           ptr, other, device);
    return slc_set_error(LDG_EINVAL, fn,
                         "%p is no block of the pool of device %d (a "
                         "foreign pointer)",
                         ptr, device);
  }
  if (!slp_block_allocated(b))
    return slc_set_error(LDG_EINVAL, fn,
                         "double free: %p is not allocated", ptr);
  if (slp_block_size(b) != size)
    return slc_set_error(LDG_EINVAL, fn,
                         "%p was allocated with %zu bytes, freed with %zu",
                         ptr, slp_block_size(b), size);
  uint64_t t0 = slt.counting ? slt__now_ns() : 0;
  slt__enter();
  slc_stream *home = slp_block_stream(b);
  slc_stream *s = slt__stream(c, device, stream, fn);
  if (s == NULL) {
    slt__leave();
    return slc_last_error()->code;
  }
  struct slt__rec *r = slt__take_rec(addr);
  rc = slt__use(home, b);
  if (rc == LDG_OK && s != home) rc = slt__use(s, b);
  for (size_t i = 0; r != NULL && rc == LDG_OK && i < r->n; i++)
    if (r->s[i] != home && r->s[i] != s) rc = slt__use(r->s[i], b);
  free(r);
  if (rc == LDG_OK) {
    /* THE TRACE: the line goes before the free, so that it precedes the
     * line of the block's next alloc (another thread may get it at once). */
    if (slt.trace != NULL) slt__trace('f', stream, size, ptr);
    rc = slp_free(b);
  }
  /* No engine thread: every so many frees, this thread polls (as PyTorch
   * processes its events on malloc). Non-blocking; the keeps of completed
   * uses run here and return held blocks to the free lists. */
  static _Thread_local unsigned frees;
  if (slt.poll_every != 0 && ++frees % slt.poll_every == 0)
    (void)slc_engine_poll(c, NULL);
  slt__leave();
  slt__hook_time(SL_TORCH_FREE_NS, t0);
  return rc;
}

int sl_torch_poll(void) {
  slc_context *c = slt__load_acquire(&slt.ctx);
  if (c == NULL) return LDG_OK;
  slt__enter();
  int rc = slc_engine_poll(c, NULL);
  slt__leave();
  return rc;
}

int sl_torch_record_stream_checked(void *ptr, CUstream stream) {
  static const char fn[] = "sl_torch_record_stream";
  slc_context *c = slt__load_acquire(&slt.ctx);
  uintptr_t addr = (uintptr_t)ptr;
  int device = c != NULL && ptr != NULL ? slt__owner(addr, -1) : -1;
  if (device < 0)
    return slc_set_error(LDG_EINVAL, fn, "%p is no block of a pool", ptr);
  slp_block *b = slp_block_find(slt__load_acquire(&slt.dev[device].pool), addr);
  if (!slp_block_allocated(b))
    return slc_set_error(LDG_EINVAL, fn, "%p is not allocated (freed?)", ptr);
  slt__enter();
  slc_stream *s = slt__stream(c, device, stream, fn);
  slt__leave();
  if (s == NULL) return slc_last_error()->code;
  if (s == slp_block_stream(b)) return LDG_OK; /* recorded at free anyway */
  size_t k = (size_t)(addr >> 9) % SLT__RBUCKETS;
  int rc = LDG_OK;
  pthread_mutex_lock(&slt.rec_mu);
  struct slt__rec *r = slt.recs[k];
  while (r != NULL && r->addr != addr) r = r->next;
  if (r == NULL) {
    r = calloc(1, sizeof(*r));
    if (r == NULL) {
      rc = slc_set_error(LDG_ENOMEM, fn, NULL);
    } else {
      r->addr = addr;
      r->next = slt.recs[k];
      slt.recs[k] = r;
      atomic_fetch_add_explicit(&slt.n_recs, 1, memory_order_relaxed);
    }
  }
  bool have = false;
  for (size_t i = 0; rc == LDG_OK && i < r->n; i++) have |= r->s[i] == s;
  if (rc == LDG_OK && !have) {
    if (r->n == SL_TORCH_MAX_RECORDED)
      rc = slc_set_error(LDG_EINVAL, fn,
                         "%p: more than %d streams recorded", ptr,
                         SL_TORCH_MAX_RECORDED);
    else
      r->s[r->n++] = s;
  }
  pthread_mutex_unlock(&slt.rec_mu);
  return rc;
}

static void slt__report(int rc, const char *what) {
  if (rc == LDG_OK) return;
  slt__bump(&slt.bad_calls);
  fprintf(stderr, "streamledger torch_alloc: %s refused: %s\n", what,
          slc_last_error_message());
}

void sl_torch_free(void *ptr, size_t size, int device, CUstream stream) {
  slt__report(sl_torch_free_checked(ptr, size, device, stream), "free");
}

void sl_torch_record_stream(void *ptr, CUstream stream) {
  slt__report(sl_torch_record_stream_checked(ptr, stream), "record_stream");
}

/* ---- The other hooks ----------------------------------------------------- */

static void slt__trim_all(void) {
  for (int i = 0; i < slt.n_dev; i++) {
    slp_pool *p = slt__load_acquire(&slt.dev[i].pool);
    if (p != NULL) (void)slp_trim(p, 0, NULL);
  }
}

/* Synchronises every adopted stream with pending recorded work: its keeps
 * return the blocks they held. */
static void slt__sync_pending(void) {
  for (size_t i = 0; i < SLT__SLOTS; i++) {
    if (slt__load_acquire(&slt.streams[i].key) == 0) continue;
    slc_stream *s = slt__load_relaxed(&slt.streams[i].val);
    if (ldg_pending_count(slc_stream_ledger(s)) > 0)
      (void)slc_stream_synchronize(s);
  }
  for (int i = 0; i < slt.n_dev; i++) {
    slc_stream *s = slt__load_acquire(&slt.dev[i].legacy);
    if (s != NULL && ldg_pending_count(slc_stream_ledger(s)) > 0)
      (void)slc_stream_synchronize(s);
  }
}

/* After the syncs: a keep of that work may still be running on another
 * thread (the engine thread took the completed entries first), its block
 * not listed yet. Waits, at most 100 ms, until no pool counts held bytes
 * (the pool uncounts a block only after listing it). */
static void slt__wait_unheld(void) {
  for (int i = 0; i < slt.n_dev; i++) {
    slp_pool *p = slt__load_acquire(&slt.dev[i].pool);
    slp_stats st;
    for (int r = 0; p != NULL && r < 2000 && slp_stats_get(p, &st) == LDG_OK &&
                    st.held_bytes > 0;
         r++) {
      struct timespec ts = {0, 50 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

/* As PyTorch's emptyCache (which synchronises its pending events first):
 * trim (this thread's stream-ordered blocks leave its cache: held if their
 * work is pending), let the pending work land, trim again. */
void sl_torch_empty_cache(void) {
  slc_context *c = slt__load_acquire(&slt.ctx);
  if (c == NULL) return;
  slt__enter();
  slt__trim_all();
  slt__sync_pending();
  slt__wait_unheld();
  slt__trim_all();
  slt__leave();
}

int sl_torch_init(int device_count) {
  (void)device_count; /* PyTorch's count; ours comes from the driver */
  return slt__context() != NULL ? LDG_OK : slc_last_error()->code;
}

static const char *const slt__names[SL_TORCH_NSTATS] = {
    "allocated_bytes", "allocated_bytes_peak", "requested_bytes",
    "held_bytes",      "held_bytes_peak",      "reserved_bytes",
    "reserved_bytes_peak", "cached_bytes",     "allocs",
    "frees",           "reuses",               "held_frees",
    "slab_allocs",     "slab_frees",           "oom_retries",
    "ooms",            "trims",                "live_blocks",
    "bad_calls",       "recorded_uses",        "peak_allocated_bytes",
    "peak_held_bytes", "peak_requested_bytes", "alloc_ns",
    "free_ns",         "slow_hooks",           "drv_mem_alloc",
    "drv_mem_free",    "drv_event_create",     "drv_event_record",
    "drv_event_query", "drv_stream_wait",      "drv_stream_query",
    "drv_sync",        "drv_host_func",        "drv_write_value",
    "drv_ctx",
};

const char *sl_torch_stat_name(int i) {
  return i >= 0 && i < SL_TORCH_NSTATS ? slt__names[i] : NULL;
}

int sl_torch_memory_stats(int device, uint64_t *out, size_t n) {
  static const char fn[] = "sl_torch_memory_stats";
  if (out == NULL && n != 0)
    return slc_set_error(LDG_EINVAL, fn, "out is NULL");
  slc_context *c = slt__load_acquire(&slt.ctx);
  if (c == NULL) return slc_set_error(LDG_EINVAL, fn, "nothing allocated yet");
  int rc = slt__check_device(device, fn);
  if (rc != LDG_OK) return rc;
  uint64_t v[SL_TORCH_NSTATS] = {0};
  slp_pool *p = slt__load_acquire(&slt.dev[device].pool);
  slp_stats st;
  if (p != NULL && slp_stats_get(p, &st) == LDG_OK) {
    uint64_t w[] = {st.allocated_bytes, st.allocated_peak, st.requested_bytes,
                    st.held_bytes,      st.held_peak,      st.reserved_bytes,
                    st.reserved_peak,   st.cached_bytes,   st.allocs,
                    st.frees,           st.reuses,         st.held_frees,
                    st.slab_allocs,     st.slab_frees,     st.oom_retries,
                    st.ooms,            st.trims,          st.live_blocks};
    memcpy(v, w, sizeof(w));
    v[SL_TORCH_PEAK_ALLOCATED] = st.peak_allocated;
    v[SL_TORCH_PEAK_HELD] = st.peak_held;
    v[SL_TORCH_PEAK_REQUESTED] = st.peak_requested;
  }
  v[SL_TORCH_BAD_CALLS] = slt__load_relaxed(&slt.bad_calls);
  v[SL_TORCH_RECORDED_USES] = slt__load_relaxed(&slt.recorded_uses);
  for (int i = SL_TORCH_ALLOC_NS; i < SL_TORCH_NSTATS; i++)
    v[i] = slt__load_relaxed(&slt.calls[i]);
  memcpy(out, v, (n < SL_TORCH_NSTATS ? n : SL_TORCH_NSTATS) * sizeof(*v));
  return SL_TORCH_NSTATS;
}

void sl_torch_reset_peaks(int device) {
  if (slt__load_acquire(&slt.ctx) == NULL || device < 0 ||
      device >= slt.n_dev)
    return;
  slp_stats_reset_peaks(slt__load_acquire(&slt.dev[device].pool));
}

const char *sl_torch_last_error(void) { return slc_last_error_message(); }

/* ---- Configuration and shutdown ---------------------------------------- */

int sl_torch_set_limit(int device, size_t bytes) {
  static const char fn[] = "sl_torch_set_limit";
  if (device < 0 || device >= SL_TORCH_MAX_DEVICES)
    return slc_set_error(LDG_EINVAL, fn, "device %d", device);
  int rc = LDG_OK;
  pthread_mutex_lock(&slt.mu);
  if (slt__load_relaxed(&slt.dev[device].pool) != NULL)
    rc = slc_set_error(LDG_EBUSY, fn,
                       "device %d's pool exists: set the limit before its "
                       "first allocation",
                       device);
  else
    slt.dev[device].limit = bytes;
  pthread_mutex_unlock(&slt.mu);
  return rc;
}

int sl_torch_use_driver(const slc_driver *driver) {
  static const char fn[] = "sl_torch_use_driver";
  if (driver == NULL) return slc_set_error(LDG_EINVAL, fn, "driver is NULL");
  int rc = LDG_OK;
  pthread_mutex_lock(&slt.mu);
  if (slt__load_relaxed(&slt.ctx) != NULL)
    rc = slc_set_error(LDG_EBUSY, fn, "the allocator is already in use");
  else {
    slt.drv = *driver;
    slt.have_driver = true;
  }
  pthread_mutex_unlock(&slt.mu);
  return rc;
}

int sl_torch_shutdown(void) {
  static const char fn[] = "sl_torch_shutdown";
  slc_context *c = slt__load_relaxed(&slt.ctx);
  if (c == NULL) return LDG_OK;
  for (int i = 0; i < slt.n_dev; i++) {
    slp_pool *p = slt__load_relaxed(&slt.dev[i].pool);
    slp_stats st;
    if (p != NULL && slp_stats_get(p, &st) == LDG_OK && st.allocated_bytes)
      return slc_set_error(LDG_EBUSY, fn,
                           "device %d: %llu bytes still allocated", i,
                           (unsigned long long)st.allocated_bytes);
  }
  for (int i = 0; i < slt.n_dev; i++) {
    slp_pool *p = slt__load_relaxed(&slt.dev[i].pool);
    int rc = slp_pool_destroy(p);
    if (rc != LDG_OK) return rc;
    slt__store_relaxed(&slt.dev[i].pool, NULL);
  }
  for (size_t k = 0; k < SLT__RBUCKETS; k++)
    while (slt.recs[k] != NULL) {
      struct slt__rec *r = slt.recs[k];
      slt.recs[k] = r->next;
      free(r);
    }
  slt__store_relaxed(&slt.n_recs, 0);
  for (size_t i = 0; i < SLT__SLOTS; i++) {
    slc_stream *s = slt__load_relaxed(&slt.streams[i].val);
    if (slt__load_relaxed(&slt.streams[i].key) != 0) slc_stream_unref(s);
    slt__store_relaxed(&slt.streams[i].key, 0);
    slt__store_relaxed(&slt.streams[i].val, NULL);
  }
  slt.n_streams = 0;
  for (int i = 0; i < slt.n_dev; i++) {
    slc_stream_unref(slt__load_relaxed(&slt.dev[i].legacy));
    slt__store_relaxed(&slt.dev[i].legacy, NULL);
    slt.dev[i].limit = 0;
  }
  int rc = slc_context_destroy(c);
  if (rc != LDG_OK) return rc;
  slt__store_relaxed(&slt.ctx, NULL);
  slt.n_dev = 0;
  slt__store_relaxed(&slt.bad_calls, 0);
  slt__store_relaxed(&slt.recorded_uses, 0);
  for (int i = 0; i < SL_TORCH_NSTATS; i++) slt__store_relaxed(&slt.calls[i], 0);
  slt.counting = false;
  if (slt.trace != NULL) fclose(slt.trace);
  slt.trace = NULL;
  return LDG_OK;
}
