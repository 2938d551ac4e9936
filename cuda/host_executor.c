/*
 * The host executor: a fake CUDA driver whose streams are worker threads
 * (see host_executor.h for the model).
 *
 * All executor state is guarded by hd.mu; hd.cv is broadcast on every
 * change (a task queued, a task done, a record completed, the hold lifted),
 * and every waiter re-checks its own condition. Copies, memsets and kernels
 * run with hd.mu unlocked, so that the memory they touch is ordered with the
 * host threads only by the executor's own synchronisation (queueing under
 * hd.mu before, completion under hd.mu after) — exactly what the layer must
 * wait for before it releases anything.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "cuda/host_executor.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- State ------------------------------------------------------------------
 */

struct hd_ctx {
  int device;
  int refs;          /* primary context retains */
  unsigned peers_on; /* bit p: cuCtxEnablePeerAccess to device p's context;
                      * cleared when the last retain goes (the driver resets
                      * a primary context then) */
  /* Its legacy default stream (NULL or CU_STREAM_LEGACY while this context
   * is current), made on first use and joined by hd_shutdown; see
   * hd_find_stream. */
  struct hd_stream *legacy;
};

struct hd_alloc {
  struct hd_alloc *next;
  uintptr_t base;
  size_t size;
  bool host; /* pinned host memory (cuMemHostAlloc) vs device memory */
  int device; /* the device whose context allocated it (host: -1) */
};

struct hd_record {
  int refs; /* the event's, and each task or waiter that names it */
  bool done;
};

enum hd_task_kind {
  HD_COPY,
  HD_SET,
  HD_KERNEL,
  HD_RECORD,
  HD_WAIT,
  HD_HOSTFN,  /* cuLaunchHostFunc: fn(arg) on the worker, unlocked */
  HD_WRITE64, /* cuStreamWriteValue64: a release store of value */
  HD_MEMFREE, /* cuMemFreeAsync: frees dst when the worker reaches it */
};

struct hd_kernel {
  char name[64];
  hd_kernel_fn fn;
  size_t n_params;
  size_t sizes[HD_MAX_PARAMS];
};

struct hd_task {
  struct hd_task *next;
  enum hd_task_kind kind;
  void *dst;
  const void *src;
  size_t bytes;
  unsigned char value;
  const struct hd_kernel *kernel;
  hd_dims dims;
  unsigned char *param_copy;
  void *param_ptrs[HD_MAX_PARAMS];
  struct hd_record *rec;
  CUhostFn hostfn; /* HD_HOSTFN */
  void *hostfn_arg;
  uint64_t value64; /* HD_WRITE64, to dst */
};

struct hd_stream {
  struct hd_stream *next; /* hd.streams */
  struct hd_ctx *ctx;
  unsigned flags;
  pthread_t thread;
  struct hd_task *head, *tail;
  unsigned long submitted, completed;
  bool stop;
  bool legacy; /* a context's legacy default stream: never destroyed */
};

struct hd_event {
  struct hd_event *next;
  struct hd_ctx *ctx;
  struct hd_record *latest; /* NULL: never recorded */
};

struct hd_function {
  struct hd_function *next;
  const struct hd_kernel *kernel;
};

struct hd_module {
  struct hd_module *next;
  struct hd_ctx *ctx;
  struct hd_function *functions;
};

#define HD_MAX_KERNELS 16

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool installed;
  bool initialized; /* cuInit called */
  int n_devices;
  unsigned delay_us;
  bool hold;
  struct hd_ctx ctxs[HD_MAX_DEVICES];
  struct hd_alloc *allocs;
  struct hd_stream *streams;
  struct hd_stream *dying; /* destroyed, still running what was queued */
  struct hd_event *events;
  struct hd_module *modules;
  struct {
    int times;
    CUresult code;
  } faults[HD_FAULT_COUNT];
  unsigned long ops;
  CUresult sticky; /* hd_set_sticky */
  struct {
    hd_hook_fn fn;
    void *arg;
  } hooks[HD_FAULT_COUNT];
  /* hd_fail_nth: calls counted per entry, and the one armed failure. */
  long calls[HD_E_COUNT];
  int nth_entry; /* -1: none armed */
  long nth_left; /* counted calls of nth_entry until the failing one */
  CUresult nth_code;
  long nth_fired;
  long early_frees;
  unsigned no_peer[HD_MAX_DEVICES]; /* bit p: device d cannot access p */
  long unpeered_copies;             /* hd_unpeered_copies */
} hd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* Registered kernels: written before any launch, read-only afterwards. */
static pthread_mutex_t hd_kernels_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hd_kernel hd_kernels[HD_MAX_KERNELS];
static size_t hd_n_kernels;

static _Thread_local struct hd_ctx *hd_current;
static _Thread_local bool hd_this_thread_uncounted;

/* The entry points, in the order of SLC_DRIVER_ENTRIES, by name. */
static const char *const hd_entry_names[HD_E_COUNT] = {
#define HD_NAME(name, sym, ver, params) #name,
    SLC_DRIVER_ENTRIES(HD_NAME)
#undef HD_NAME
};

static void hd_lock(void) { pthread_mutex_lock(&hd.mu); }
static void hd_unlock(void) { pthread_mutex_unlock(&hd.mu); }
static void hd_wait(void) { pthread_cond_wait(&hd.cv, &hd.mu); }
static void hd_wake(void) { pthread_cond_broadcast(&hd.cv); }

/* Under hd.mu: consumes an injected failure at `point`, if armed. */
static bool hd_fault_take(hd_fault point, CUresult *code) {
  if (hd.faults[point].times <= 0) return false;
  hd.faults[point].times--;
  *code = hd.faults[point].code;
  return true;
}

void hd_fail_next(hd_fault point, CUresult code, int times) {
  if ((int)point < 0 || point >= HD_FAULT_COUNT) return;
  hd_lock();
  hd.faults[point].times = times;
  hd.faults[point].code = code;
  hd_unlock();
}

int hd_fault_pending(hd_fault point) {
  if ((int)point < 0 || point >= HD_FAULT_COUNT) return 0;
  hd_lock();
  int n = hd.faults[point].times;
  hd_unlock();
  return n;
}

void hd_hold(bool on) {
  hd_lock();
  hd.hold = on;
  hd_wake();
  hd_unlock();
}

void hd_set_hook(hd_fault point, hd_hook_fn fn, void *arg) {
  if ((int)point < 0 || point >= HD_FAULT_COUNT) return;
  hd_lock();
  hd.hooks[point].fn = fn;
  hd.hooks[point].arg = arg;
  hd_unlock();
}

int hd_entry_index(const char *entry) {
  for (int i = 0; entry != NULL && i < HD_E_COUNT; i++)
    if (strcmp(hd_entry_names[i], entry) == 0) return i;
  return -1;
}

const char *hd_entry_name(int index) {
  return index >= 0 && index < HD_E_COUNT ? hd_entry_names[index] : NULL;
}

int hd_fail_nth(const char *entry, long n, CUresult code) {
  int i = hd_entry_index(entry);
  if (i < 0 && n > 0) return -1;
  hd_lock();
  hd.nth_entry = n > 0 ? i : -1;
  hd.nth_left = n;
  hd.nth_code = code;
  hd_unlock();
  return 0;
}

long hd_nth_fired(void) {
  hd_lock();
  long n = hd.nth_fired;
  hd_unlock();
  return n;
}

bool hd_nth_armed(void) {
  hd_lock();
  bool armed = hd.nth_entry >= 0;
  hd_unlock();
  return armed;
}

long hd_calls(const char *entry) {
  int i = hd_entry_index(entry);
  if (i < 0) return -1;
  hd_lock();
  long n = hd.calls[i];
  hd_unlock();
  return n;
}

void hd_calls_reset(void) {
  hd_lock();
  memset(hd.calls, 0, sizeof(hd.calls));
  hd_unlock();
}

void hd_uncounted(bool on) { hd_this_thread_uncounted = on; }

/* At the top of every entry point: counts the call and, if it is the one
 * hd_fail_nth armed, fails it before it does anything. */
static bool hd_entry(int index, CUresult *code) {
  if (hd_this_thread_uncounted) return false;
  hd_lock();
  hd.calls[index]++;
  bool fail = hd.nth_entry == index && --hd.nth_left == 0;
  if (fail) {
    hd.nth_entry = -1;
    hd.nth_fired++;
    *code = hd.nth_code;
  }
  hd_unlock();
  return fail;
}

#define HD_ENTRY(name)                             \
  do {                                             \
    CUresult hd_r_;                                \
    if (hd_entry(HD_E_##name, &hd_r_)) return hd_r_; \
  } while (0)

/* Runs and disarms the hook at `point`, if any. Not under hd.mu. */
static void hd_run_hook(hd_fault point) {
  hd_lock();
  hd_hook_fn fn = hd.hooks[point].fn;
  void *arg = hd.hooks[point].arg;
  hd.hooks[point].fn = NULL;
  hd_unlock();
  if (fn != NULL) fn(arg);
}

void hd_set_sticky(CUresult code) {
  hd_lock();
  hd.sticky = code;
  hd_unlock();
}

void hd_set_delay_us(unsigned us) {
  hd_lock();
  hd.delay_us = us;
  hd_unlock();
}

unsigned long hd_ops_executed(void) {
  hd_lock();
  unsigned long n = hd.ops;
  hd_unlock();
  return n;
}

int hd_register_kernel(const char *name, hd_kernel_fn fn, size_t n_params,
                       const size_t *param_sizes) {
  if (name == NULL || fn == NULL || n_params > HD_MAX_PARAMS ||
      strlen(name) >= sizeof(hd_kernels[0].name) ||
      (n_params > 0 && param_sizes == NULL))
    return -1;
  pthread_mutex_lock(&hd_kernels_mu);
  int rc = -1;
  for (size_t i = 0; i < hd_n_kernels; i++) {
    if (strcmp(hd_kernels[i].name, name) == 0) {
      rc = 0; /* already registered: keep the first */
      goto out;
    }
  }
  if (hd_n_kernels < HD_MAX_KERNELS) {
    struct hd_kernel *k = &hd_kernels[hd_n_kernels];
    snprintf(k->name, sizeof(k->name), "%s", name);
    k->fn = fn;
    k->n_params = n_params;
    for (size_t i = 0; i < n_params; i++) k->sizes[i] = param_sizes[i];
    hd_n_kernels++;
    rc = 0;
  }
out:
  pthread_mutex_unlock(&hd_kernels_mu);
  return rc;
}

/* ---- Records ------------------------------------------------------------ */

static struct hd_record *hd_record_new(void) {
  struct hd_record *r = calloc(1, sizeof(*r));
  if (r != NULL) r->refs = 1;
  return r;
}

/* Under hd.mu. */
static void hd_record_unref(struct hd_record *r) {
  if (r != NULL && --r->refs == 0) free(r);
}

/* ---- Workers ------------------------------------------------------------ */

static void hd_task_free(struct hd_task *t) {
  free(t->param_copy);
  free(t);
}

/* Under hd.mu: removes the allocation starting at base from the list and
 * returns it (NULL if there is none). */
static struct hd_alloc *hd_unlink_alloc(uintptr_t base, bool host) {
  for (struct hd_alloc **p = &hd.allocs; *p != NULL; p = &(*p)->next) {
    if ((*p)->base == base && (*p)->host == host) {
      struct hd_alloc *a = *p;
      *p = a->next;
      return a;
    }
  }
  return NULL;
}

static void hd_sleep_us(unsigned us) {
  if (us == 0) return;
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static void *hd_worker(void *arg) {
  struct hd_stream *s = arg;
  hd_lock();
  for (;;) {
    while (!(s->stop && s->head == NULL) && (s->head == NULL || hd.hold))
      hd_wait();
    if (s->head == NULL) break; /* stopped and drained */
    struct hd_task *t = s->head;
    switch (t->kind) {
      case HD_RECORD:
        t->rec->done = true;
        hd_record_unref(t->rec);
        break;
      case HD_WAIT:
        while (!t->rec->done) hd_wait();
        hd_record_unref(t->rec);
        break;
      case HD_HOSTFN:
        /* As the driver: the function runs on a thread of the executor,
         * and the stream goes on only once it returned. */
        hd_unlock();
        t->hostfn(t->hostfn_arg);
        hd_lock();
        break;
      case HD_MEMFREE: {
        struct hd_alloc *a = hd_unlink_alloc((uintptr_t)t->dst, false);
        if (a != NULL) free((void *)a->base);
        free(a);
        break;
      }
      case HD_WRITE64:
        /* Pairs with the reader's acquire load (a device-mapped host
         * word read with a plain load on a GPU): the stream's earlier
         * work happened-before it. */
        __atomic_store_n((uint64_t *)t->dst, t->value64, __ATOMIC_RELEASE);
        break;
      default: {
        unsigned delay = hd.delay_us;
        hd_unlock();
        hd_sleep_us(delay);
        if (t->kind == HD_COPY) {
          memcpy(t->dst, t->src, t->bytes);
        } else if (t->kind == HD_SET) {
          memset(t->dst, t->value, t->bytes);
        } else {
          t->kernel->fn(t->param_ptrs, &t->dims);
        }
        hd_lock();
        hd.ops++;
        break;
      }
    }
    s->head = t->next;
    if (s->head == NULL) s->tail = NULL;
    s->completed++;
    hd_task_free(t);
    hd_wake();
  }
  hd_unlock();
  return NULL;
}

/* Under hd.mu. */
static void hd_push(struct hd_stream *s, struct hd_task *t) {
  t->next = NULL;
  if (s->tail != NULL) {
    s->tail->next = t;
  } else {
    s->head = t;
  }
  s->tail = t;
  s->submitted++;
  hd_wake();
}

/* Under hd.mu: waits until s completed what was submitted so far. */
static void hd_drain(struct hd_stream *s) {
  unsigned long target = s->submitted;
  while (s->completed < target) hd_wait();
}

/* Under hd.mu: queued or running copies and memsets of any stream that
 * read or write a byte of [p, p + n). */
static long hd_touching_locked(uintptr_t p, size_t n) {
  long k = 0;
  for (int list = 0; list < 2; list++) {
    for (struct hd_stream *s = list ? hd.dying : hd.streams; s != NULL;
         s = s->next) {
      for (struct hd_task *t = s->head; t != NULL; t = t->next) {
        if (t->kind != HD_COPY && t->kind != HD_SET) continue;
        uintptr_t d = (uintptr_t)t->dst, src = (uintptr_t)t->src;
        if ((d < p + n && p < d + t->bytes) ||
            (t->kind == HD_COPY && src < p + n && p < src + t->bytes))
          k++;
      }
    }
  }
  return k;
}

long hd_pending_touching(const void *p, size_t n) {
  if (p == NULL || n == 0) return 0;
  hd_lock();
  long k = hd_touching_locked((uintptr_t)p, n);
  hd_unlock();
  return k;
}

long hd_early_frees(void) {
  hd_lock();
  long n = hd.early_frees;
  hd_unlock();
  return n;
}

/* ---- Lookups (under hd.mu) ---------------------------------------------- */

static void *hd_worker(void *arg);

/* NULL and CU_STREAM_LEGACY name the current context's legacy default
 * stream, as in the driver: a worker like any blocking stream, made on
 * first use and linked in hd.streams (so context syncs and the synchronous
 * copies wait for it). Not modelled: its implicit barriers with the other
 * blocking streams (fewer orderings than the driver, so a test passing here
 * does not rely on them). CU_STREAM_PER_THREAD is not modelled: an invalid
 * handle. */
static struct hd_stream *hd_legacy_stream(void) {
  if (hd_current == NULL) return NULL;
  if (hd_current->legacy != NULL) return hd_current->legacy;
  struct hd_stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->ctx = hd_current;
  s->flags = CU_STREAM_DEFAULT;
  s->legacy = true;
  if (pthread_create(&s->thread, NULL, hd_worker, s) != 0) {
    free(s);
    return NULL;
  }
  s->next = hd.streams;
  hd.streams = s;
  hd_current->legacy = s;
  return s;
}

static struct hd_stream *hd_find_stream(CUstream h) {
  if (h == NULL || h == CU_STREAM_LEGACY) return hd_legacy_stream();
  for (struct hd_stream *s = hd.streams; s != NULL; s = s->next)
    if ((CUstream)s == h) return s;
  return NULL;
}

static struct hd_event *hd_find_event(CUevent h) {
  for (struct hd_event *e = hd.events; e != NULL; e = e->next)
    if ((CUevent)e == h) return e;
  return NULL;
}

static struct hd_module *hd_find_module(CUmodule h) {
  for (struct hd_module *m = hd.modules; m != NULL; m = m->next)
    if ((CUmodule)m == h) return m;
  return NULL;
}

static struct hd_function *hd_find_function(CUfunction h) {
  for (struct hd_module *m = hd.modules; m != NULL; m = m->next)
    for (struct hd_function *f = m->functions; f != NULL; f = f->next)
      if ((CUfunction)f == h) return f;
  return NULL;
}

/* Whether [p, p + n) lies inside one live allocation of the given kind. */
static bool hd_range_ok(uintptr_t p, size_t n, bool host) {
  if (p == 0) return false;
  for (struct hd_alloc *a = hd.allocs; a != NULL; a = a->next) {
    if (a->host != host) continue;
    if (p >= a->base && p - a->base <= a->size && n <= a->size - (p - a->base))
      return true;
  }
  return false;
}

/* A stream a call may issue on, or an error. As the driver (CUDA
 * Programming Guide, "Stream and Event Behavior"; measured on the H200):
 * copies, event records and stream waits reach the context through their
 * stream, whatever is current (none, or another device's), so for those
 * (current_needed false) only the legacy handle, which names the current
 * context's stream, needs one. Kernel launches, memsets (the guide names
 * copies only), host functions and stream memory operations
 * (current_needed true) need the stream's own context
 * current: stricter than the driver, which refuses a launch only when the
 * current context is another device's, so that the layer's launch and the
 * engine's markers are checked to make it current. */
static CUresult hd_stream_for_issue(CUstream h, bool current_needed,
                                    struct hd_stream **out) {
  const bool legacy = h == NULL || h == CU_STREAM_LEGACY;
  if ((current_needed || legacy) && hd_current == NULL)
    return CUDA_ERROR_INVALID_CONTEXT;
  struct hd_stream *s = hd_find_stream(h);
  if (s == NULL) return CUDA_ERROR_INVALID_HANDLE;
  if (current_needed && s->ctx != hd_current)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (hd.sticky != CUDA_SUCCESS) return hd.sticky;
  *out = s;
  return CUDA_SUCCESS;
}

/* ---- Errors ------------------------------------------------------------- */

static const struct {
  CUresult code;
  const char *name, *text;
} hd_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE",
     "invalid device ordinal"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX",
     "a PTX JIT compilation failed"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT",
     "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE",
     "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
     "operation not supported"},
    {CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
     "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static CUresult CUDAAPI hd_cuGetErrorName(CUresult error, const char **pStr) {
  if (pStr == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(hd_errors) / sizeof(hd_errors[0]); i++) {
    if (hd_errors[i].code == error) {
      *pStr = hd_errors[i].name;
      return CUDA_SUCCESS;
    }
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult CUDAAPI hd_cuGetErrorString(CUresult error, const char **pStr) {
  if (pStr == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(hd_errors) / sizeof(hd_errors[0]); i++) {
    if (hd_errors[i].code == error) {
      *pStr = hd_errors[i].text;
      return CUDA_SUCCESS;
    }
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- Initialisation, devices, contexts ---------------------------------- */

static CUresult CUDAAPI hd_cuInit(unsigned int Flags) {
  HD_ENTRY(cuInit);
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  hd.initialized = true;
  hd_unlock();
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuDriverGetVersion(int *driverVersion) {
  HD_ENTRY(cuDriverGetVersion);
  if (driverVersion == NULL) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuDeviceGetCount(int *count) {
  HD_ENTRY(cuDeviceGetCount);
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  CUresult r = hd.initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
  if (r == CUDA_SUCCESS) *count = hd.n_devices;
  hd_unlock();
  return r;
}

static CUresult CUDAAPI hd_cuDeviceGet(CUdevice *device, int ordinal) {
  HD_ENTRY(cuDeviceGet);
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  CUresult r = !hd.initialized ? CUDA_ERROR_NOT_INITIALIZED
               : ordinal < 0 || ordinal >= hd.n_devices
                   ? CUDA_ERROR_INVALID_DEVICE
                   : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) *device = ordinal;
  hd_unlock();
  return r;
}

static bool hd_device_ok(CUdevice dev) {
  hd_lock();
  bool ok = hd.initialized && dev >= 0 && dev < hd.n_devices;
  hd_unlock();
  return ok;
}

static CUresult CUDAAPI hd_cuDeviceGetName(char *name, int len, CUdevice dev) {
  HD_ENTRY(cuDeviceGetName);
  if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!hd_device_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, (size_t)len, "host executor device %d", (int)dev);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuDeviceGetAttribute(int *pi,
                                                CUdevice_attribute attrib,
                                                CUdevice dev) {
  HD_ENTRY(cuDeviceGetAttribute);
  if (pi == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!hd_device_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *pi = 9;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *pi = 0;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = 1024;
      return CUDA_SUCCESS;
    /* Stream memory operations on device-mapped host memory, as an H200
     * with a CUDA 12/13 driver reports them: the _V1 attributes read 0. */
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      *pi = 1;
      return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1:
      *pi = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult CUDAAPI hd_cuDevicePrimaryCtxRetain(CUcontext *pctx,
                                                    CUdevice dev) {
  HD_ENTRY(cuDevicePrimaryCtxRetain);
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!hd_device_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  hd_lock();
  hd.ctxs[dev].refs++;
  *pctx = (CUcontext)&hd.ctxs[dev];
  hd_unlock();
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuDevicePrimaryCtxRelease(CUdevice dev) {
  HD_ENTRY(cuDevicePrimaryCtxRelease);
  if (!hd_device_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  hd_lock();
  CUresult r =
      hd.ctxs[dev].refs > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
  if (r == CUDA_SUCCESS && --hd.ctxs[dev].refs == 0)
    hd.ctxs[dev].peers_on = 0;
  hd_unlock();
  return r;
}

/* Peer access: every pair of distinct devices unless hd_set_peer_access
 * said otherwise (an HGX H200 board: NVLink between all eight). */
static CUresult CUDAAPI hd_cuDeviceCanAccessPeer(int *canAccessPeer,
                                                 CUdevice dev,
                                                 CUdevice peerDev) {
  HD_ENTRY(cuDeviceCanAccessPeer);
  if (canAccessPeer == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!hd_device_ok(dev) || !hd_device_ok(peerDev))
    return CUDA_ERROR_INVALID_DEVICE;
  hd_lock();
  *canAccessPeer = dev != peerDev && !(hd.no_peer[dev] >> peerDev & 1u);
  hd_unlock();
  return CUDA_SUCCESS;
}

/* The current context may access peerContext's memory from now on. */
static CUresult CUDAAPI hd_cuCtxEnablePeerAccess(CUcontext peerContext,
                                                 unsigned int Flags) {
  HD_ENTRY(cuCtxEnablePeerAccess);
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  struct hd_ctx *cur = hd_current;
  if (cur == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  hd_lock();
  struct hd_ctx *peer = NULL;
  for (int i = 0; i < hd.n_devices; i++)
    if (peerContext == (CUcontext)&hd.ctxs[i] && hd.ctxs[i].refs > 0)
      peer = &hd.ctxs[i];
  CUresult r = CUDA_SUCCESS;
  if (peer == NULL || cur->refs == 0)
    r = CUDA_ERROR_INVALID_CONTEXT;
  else if (peer == cur)
    r = CUDA_ERROR_INVALID_DEVICE;
  else if (hd.no_peer[cur->device] >> peer->device & 1u)
    r = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  else if (cur->peers_on >> peer->device & 1u)
    r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  else
    cur->peers_on |= 1u << peer->device;
  hd_unlock();
  return r;
}

void hd_set_peer_access(int device, int peer, bool can) {
  if (device < 0 || device >= HD_MAX_DEVICES || peer < 0 ||
      peer >= HD_MAX_DEVICES)
    return;
  hd_lock();
  if (can)
    hd.no_peer[device] &= ~(1u << peer);
  else
    hd.no_peer[device] |= 1u << peer;
  hd_unlock();
}

long hd_unpeered_copies(void) {
  hd_lock();
  long n = hd.unpeered_copies;
  hd_unlock();
  return n;
}

static CUresult CUDAAPI hd_cuCtxSetCurrent(CUcontext ctx) {
  HD_ENTRY(cuCtxSetCurrent);
  if (ctx == NULL) {
    hd_current = NULL;
    return CUDA_SUCCESS;
  }
  hd_lock();
  CUresult r = CUDA_ERROR_INVALID_CONTEXT;
  for (int i = 0; i < hd.n_devices; i++)
    if (ctx == (CUcontext)&hd.ctxs[i] && hd.ctxs[i].refs > 0) r = CUDA_SUCCESS;
  hd_unlock();
  if (r == CUDA_SUCCESS) hd_current = (struct hd_ctx *)ctx;
  return r;
}

static CUresult CUDAAPI hd_cuCtxGetCurrent(CUcontext *pctx) {
  HD_ENTRY(cuCtxGetCurrent);
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pctx = (CUcontext)hd_current;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuCtxSynchronize(void) {
  HD_ENTRY(cuCtxSynchronize);
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  hd_run_hook(HD_FAULT_CTX_SYNC);
  hd_lock();
  CUresult r = CUDA_SUCCESS;
  if (!hd_fault_take(HD_FAULT_CTX_SYNC, &r)) {
    /* Snapshot what was submitted, then wait for each stream of the ctx. */
    unsigned long n = 0;
    for (struct hd_stream *s = hd.streams; s != NULL; s = s->next) n++;
    for (struct hd_stream *s = hd.dying; s != NULL; s = s->next) n++;
    struct {
      struct hd_stream *s;
      unsigned long target;
    } *snap = calloc(n ? n : 1, sizeof(*snap));
    if (snap == NULL) {
      hd_unlock();
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    unsigned long k = 0;
    for (int list = 0; list < 2; list++)
      for (struct hd_stream *s = list ? hd.dying : hd.streams; s != NULL;
           s = s->next)
        if (s->ctx == hd_current)
          snap[k++] = (__typeof__(*snap)){s, s->submitted};
    /* Destroyed streams stay allocated (on hd.dying) until hd_shutdown. */
    for (unsigned long i = 0; i < k; i++) {
      while (snap[i].s->completed < snap[i].target) hd_wait();
    }
    free(snap);
    if (hd.sticky != CUDA_SUCCESS) r = hd.sticky;
  }
  hd_unlock();
  return r;
}

/* ---- Streams ------------------------------------------------------------ */

static CUresult CUDAAPI hd_cuStreamCreate(CUstream *phStream,
                                          unsigned int Flags) {
  HD_ENTRY(cuStreamCreate);
  if (phStream == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (Flags != CU_STREAM_DEFAULT && Flags != CU_STREAM_NON_BLOCKING)
    return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = CUDA_SUCCESS;
  hd_lock();
  bool fail = hd_fault_take(HD_FAULT_STREAM_CREATE, &r);
  hd_unlock();
  if (fail) return r;
  struct hd_stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  s->ctx = hd_current;
  s->flags = Flags;
  if (pthread_create(&s->thread, NULL, hd_worker, s) != 0) {
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  hd_lock();
  s->next = hd.streams;
  hd.streams = s;
  hd_unlock();
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuStreamDestroy(CUstream hStream) {
  HD_ENTRY(cuStreamDestroy);
  hd_lock();
  struct hd_stream *s = hd_find_stream(hStream);
  CUresult r = CUDA_SUCCESS;
  if (s == NULL || s->legacy) { /* the default stream cannot be destroyed */
    s = NULL;
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (s->ctx != hd_current) {
    /* Stricter than the driver, as for issues: the layer must make the
     * stream's context current (a keep may have switched it). */
    r = CUDA_ERROR_INVALID_CONTEXT;
    s = NULL;
  } else if (!hd_fault_take(HD_FAULT_STREAM_DESTROY, &r)) {
    /* As the driver: returns without waiting for pending work, which still
     * runs (the worker exits once it drained; hd_shutdown joins it; a
     * context sync still waits for it). An idle stream's worker is joined
     * here. Unlinked now, so later calls on the handle fail. */
    for (struct hd_stream **p = &hd.streams; *p != NULL; p = &(*p)->next) {
      if (*p == s) {
        *p = s->next;
        break;
      }
    }
    s->stop = true;
    hd_wake();
    if (s->head == NULL) {
      s->next = NULL; /* idle: its worker exits at once; joined below */
    } else {
      s->next = hd.dying;
      hd.dying = s;
      s = NULL;
    }
  } else {
    s = NULL; /* the injected failure: the stream stays */
  }
  hd_unlock();
  if (s != NULL) {
    pthread_join(s->thread, NULL);
    free(s);
  }
  return r;
}

static CUresult CUDAAPI hd_cuStreamSynchronize(CUstream hStream) {
  HD_ENTRY(cuStreamSynchronize);
  hd_run_hook(HD_FAULT_STREAM_SYNC);
  hd_lock();
  struct hd_stream *s = hd_find_stream(hStream);
  CUresult r = s == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  if (s != NULL && !hd_fault_take(HD_FAULT_STREAM_SYNC, &r)) {
    hd_drain(s);
    if (hd.sticky != CUDA_SUCCESS) r = hd.sticky;
  }
  hd_unlock();
  return r;
}

static CUresult CUDAAPI hd_cuStreamQuery(CUstream hStream) {
  HD_ENTRY(cuStreamQuery);
  hd_run_hook(HD_FAULT_STREAM_QUERY);
  hd_lock();
  struct hd_stream *s = hd_find_stream(hStream);
  CUresult r = s == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  if (s != NULL && !hd_fault_take(HD_FAULT_STREAM_QUERY, &r))
    r = hd.sticky != CUDA_SUCCESS      ? hd.sticky
        : s->completed == s->submitted ? CUDA_SUCCESS
                                       : CUDA_ERROR_NOT_READY;
  hd_unlock();
  return r;
}

static CUresult CUDAAPI hd_cuStreamWaitEvent(CUstream hStream, CUevent hEvent,
                                             unsigned int Flags) {
  HD_ENTRY(cuStreamWaitEvent);
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, false, &s);
  struct hd_event *e = r == CUDA_SUCCESS ? hd_find_event(hEvent) : NULL;
  if (r == CUDA_SUCCESS && e == NULL) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && !hd_fault_take(HD_FAULT_STREAM_WAIT, &r) &&
      e->latest != NULL) {
    /* The event may belong to another context (device): allowed. */
    t->kind = HD_WAIT;
    t->rec = e->latest;
    t->rec->refs++;
    hd_push(s, t);
    t = NULL;
  }
  hd_unlock();
  free(t);
  return r;
}

/* ---- Events ------------------------------------------------------------- */

static CUresult CUDAAPI hd_cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  HD_ENTRY(cuEventCreate);
  if (phEvent == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  struct hd_event *e = calloc(1, sizeof(*e));
  if (e == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  e->ctx = hd_current;
  hd_lock();
  e->next = hd.events;
  hd.events = e;
  hd_unlock();
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuEventDestroy(CUevent hEvent) {
  HD_ENTRY(cuEventDestroy);
  hd_lock();
  struct hd_event *e = hd_find_event(hEvent);
  if (e != NULL) {
    for (struct hd_event **p = &hd.events; *p != NULL; p = &(*p)->next) {
      if (*p == e) {
        *p = e->next;
        break;
      }
    }
    hd_record_unref(e->latest);
  }
  hd_unlock();
  if (e == NULL) return CUDA_ERROR_INVALID_HANDLE;
  free(e);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuEventRecord(CUevent hEvent, CUstream hStream) {
  HD_ENTRY(cuEventRecord);
  struct hd_task *t = calloc(1, sizeof(*t));
  struct hd_record *rec = hd_record_new();
  if (t == NULL || rec == NULL) {
    free(t);
    free(rec);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, false, &s);
  struct hd_event *e = r == CUDA_SUCCESS ? hd_find_event(hEvent) : NULL;
  if (r == CUDA_SUCCESS && e == NULL) r = CUDA_ERROR_INVALID_HANDLE;
  /* As the driver: the event and the stream must share a context. */
  if (r == CUDA_SUCCESS && e->ctx != s->ctx) r = CUDA_ERROR_INVALID_HANDLE;
  if (r == CUDA_SUCCESS && !hd_fault_take(HD_FAULT_EVENT_RECORD, &r)) {
    hd_record_unref(e->latest);
    e->latest = rec; /* the event's reference */
    rec->refs++;     /* the task's */
    t->kind = HD_RECORD;
    t->rec = rec;
    hd_push(s, t);
    t = NULL;
    rec = NULL;
  }
  hd_unlock();
  free(t);
  free(rec);
  if (r == CUDA_SUCCESS) hd_run_hook(HD_FAULT_EVENT_RECORD);
  return r;
}

static CUresult CUDAAPI hd_cuEventSynchronize(CUevent hEvent) {
  HD_ENTRY(cuEventSynchronize);
  hd_run_hook(HD_FAULT_EVENT_SYNC);
  hd_lock();
  struct hd_event *e = hd_find_event(hEvent);
  CUresult r = e == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  if (e != NULL && !hd_fault_take(HD_FAULT_EVENT_SYNC, &r) &&
      e->latest != NULL) {
    struct hd_record *rec = e->latest;
    rec->refs++;
    while (!rec->done) hd_wait();
    hd_record_unref(rec);
    if (hd.sticky != CUDA_SUCCESS) r = hd.sticky;
  }
  hd_unlock();
  return r;
}

static CUresult CUDAAPI hd_cuEventQuery(CUevent hEvent) {
  HD_ENTRY(cuEventQuery);
  hd_run_hook(HD_FAULT_EVENT_QUERY);
  hd_lock();
  struct hd_event *e = hd_find_event(hEvent);
  CUresult r = e == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  if (e != NULL && !hd_fault_take(HD_FAULT_EVENT_QUERY, &r)) {
    if (hd.sticky != CUDA_SUCCESS)
      r = hd.sticky;
    else if (e->latest != NULL && !e->latest->done)
      r = CUDA_ERROR_NOT_READY;
  }
  hd_unlock();
  return r;
}

/* ---- Memory ------------------------------------------------------------- */

static CUresult hd_alloc(void **out, size_t bytes, bool host) {
  if (out == NULL || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = CUDA_SUCCESS;
  hd_lock();
  bool fail = hd_fault_take(HD_FAULT_MEM_ALLOC, &r);
  hd_unlock();
  if (fail) return r;
  struct hd_alloc *a = calloc(1, sizeof(*a));
  void *p = malloc(bytes);
  if (a == NULL || p == NULL) {
    free(a);
    free(p);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(p, 0xCD, bytes); /* never zeroes by accident */
  a->base = (uintptr_t)p;
  a->size = bytes;
  a->host = host;
  a->device = host ? -1 : hd_current->device;
  hd_lock();
  a->next = hd.allocs;
  hd.allocs = a;
  hd_unlock();
  *out = p;
  return CUDA_SUCCESS;
}

static CUresult hd_free(uintptr_t base, bool host) {
  hd_lock();
  struct hd_alloc *a = hd_unlink_alloc(base, host);
  if (a != NULL && hd_touching_locked(a->base, a->size) != 0) hd.early_frees++;
  hd_unlock();
  if (a == NULL) return CUDA_ERROR_INVALID_VALUE;
  /* At once, whatever is pending: a premature free is a use-after-free. */
  free((void *)a->base);
  free(a);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  HD_ENTRY(cuMemAlloc);
  if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  void *p = NULL;
  CUresult r = hd_alloc(&p, bytesize, false);
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

static CUresult CUDAAPI hd_cuMemFree(CUdeviceptr dptr) {
  HD_ENTRY(cuMemFree);
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  return hd_free((uintptr_t)dptr, false);
}

static CUresult CUDAAPI hd_cuMemAllocHost(void **pp, size_t bytesize) {
  HD_ENTRY(cuMemAllocHost);
  return hd_alloc(pp, bytesize, true);
}

static CUresult CUDAAPI hd_cuMemHostAlloc(void **pp, size_t bytesize,
                                          unsigned int Flags) {
  HD_ENTRY(cuMemHostAlloc);
  if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                          CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  return hd_alloc(pp, bytesize, true);
}

static CUresult CUDAAPI hd_cuMemFreeHost(void *p) {
  HD_ENTRY(cuMemFreeHost);
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  return hd_free((uintptr_t)p, true);
}

/* The stream-ordered allocator: memory is available at once (allowed: the
 * driver only promises it by the time the stream gets there); the free is
 * a task, run when the stream's worker reaches it, so a free issued before
 * the work that uses the memory has run stays safe, as with the driver. */
static CUresult CUDAAPI hd_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize,
                                           CUstream hStream) {
  HD_ENTRY(cuMemAllocAsync);
  if (dptr == NULL) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, true, &s);
  hd_unlock();
  if (r != CUDA_SUCCESS) return r;
  void *p = NULL;
  r = hd_alloc(&p, bytesize, false);
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

static CUresult CUDAAPI hd_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  HD_ENTRY(cuMemFreeAsync);
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, true, &s);
  bool live = false;
  for (struct hd_alloc *a = hd.allocs; a != NULL && !live; a = a->next)
    live = a->base == (uintptr_t)dptr && !a->host;
  if (r == CUDA_SUCCESS && !live) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    t->kind = HD_MEMFREE;
    t->dst = (void *)(uintptr_t)dptr;
    hd_push(s, t);
    t = NULL;
  }
  hd_unlock();
  free(t);
  return r;
}

/* The default pool of a device: a handle, whose attributes the executor
 * does not track (every read gives 0; writes are accepted and ignored). */
static CUresult CUDAAPI hd_cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out,
                                                     CUdevice dev) {
  HD_ENTRY(cuDeviceGetDefaultMemPool);
  if (pool_out == NULL || dev < 0 || dev >= hd.n_devices)
    return CUDA_ERROR_INVALID_VALUE;
  *pool_out = (CUmemoryPool)&hd.ctxs[dev];
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuMemPoolGetAttribute(CUmemoryPool pool,
                                                 CUmemPool_attribute attr,
                                                 void *value) {
  HD_ENTRY(cuMemPoolGetAttribute);
  if (pool == NULL || value == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (attr == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
      attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
      attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES)
    *(int *)value = 0;
  else
    *(cuuint64_t *)value = 0;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuMemPoolSetAttribute(CUmemoryPool pool,
                                                 CUmemPool_attribute attr,
                                                 void *value) {
  HD_ENTRY(cuMemPoolSetAttribute);
  (void)attr;
  return pool == NULL || value == NULL ? CUDA_ERROR_INVALID_VALUE
                                       : CUDA_SUCCESS;
}

/* The device of the live device allocation holding p, or -1. */
static int hd_device_of_locked(uintptr_t p) {
  for (struct hd_alloc *a = hd.allocs; a != NULL; a = a->next)
    if (!a->host && p >= a->base && p - a->base < a->size) return a->device;
  return -1;
}

/* A device-to-device copy on s touching another device's memory without
 * peer access from s's context to that device (the driver would stage it
 * through host memory itself; counted, not refused). */
static bool hd_unpeered_locked(const struct hd_stream *s, const void *dst,
                               const void *src) {
  const int devs[2] = {hd_device_of_locked((uintptr_t)dst),
                       hd_device_of_locked((uintptr_t)src)};
  for (int i = 0; i < 2; i++)
    if (devs[i] >= 0 && devs[i] != s->ctx->device &&
        !(s->ctx->peers_on >> devs[i] & 1u))
      return true;
  return false;
}

/* Queues a copy or memset on hStream after checking its device ranges. */
static CUresult hd_queue_mem(CUstream hStream, enum hd_task_kind kind,
                             void *dst, const void *src, size_t n,
                             unsigned char value, bool dst_dev, bool src_dev) {
  hd_run_hook(HD_FAULT_COPY);
  if (dst == NULL || (kind == HD_COPY && src == NULL))
    return CUDA_ERROR_INVALID_VALUE;
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, kind == HD_SET, &s);
  if (r == CUDA_SUCCESS &&
      ((dst_dev && !hd_range_ok((uintptr_t)dst, n, false)) ||
       (src_dev && !hd_range_ok((uintptr_t)src, n, false))))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && dst_dev && src_dev &&
      hd_unpeered_locked(s, dst, src))
    hd.unpeered_copies++;
  if (r == CUDA_SUCCESS && !hd_fault_take(HD_FAULT_COPY, &r)) {
    t->kind = kind;
    t->dst = dst;
    t->src = src;
    t->bytes = n;
    t->value = value;
    hd_push(s, t);
    t = NULL;
  }
  hd_unlock();
  free(t);
  return r;
}

#define HD_DPTR(p) ((void *)(uintptr_t)(p))

static CUresult CUDAAPI hd_cuMemcpyHtoDAsync(CUdeviceptr dstDevice,
                                             const void *srcHost,
                                             size_t ByteCount,
                                             CUstream hStream) {
  HD_ENTRY(cuMemcpyHtoDAsync);
  return hd_queue_mem(hStream, HD_COPY, HD_DPTR(dstDevice), srcHost, ByteCount,
                      0, true, false);
}

static CUresult CUDAAPI hd_cuMemcpyDtoHAsync(void *dstHost,
                                             CUdeviceptr srcDevice,
                                             size_t ByteCount,
                                             CUstream hStream) {
  HD_ENTRY(cuMemcpyDtoHAsync);
  return hd_queue_mem(hStream, HD_COPY, dstHost, HD_DPTR(srcDevice), ByteCount,
                      0, false, true);
}

static CUresult CUDAAPI hd_cuMemcpyDtoDAsync(CUdeviceptr dstDevice,
                                             CUdeviceptr srcDevice,
                                             size_t ByteCount,
                                             CUstream hStream) {
  HD_ENTRY(cuMemcpyDtoDAsync);
  return hd_queue_mem(hStream, HD_COPY, HD_DPTR(dstDevice), HD_DPTR(srcDevice),
                      ByteCount, 0, true, true);
}

static CUresult CUDAAPI hd_cuMemsetD8Async(CUdeviceptr dstDevice,
                                           unsigned char uc, size_t N,
                                           CUstream hStream) {
  HD_ENTRY(cuMemsetD8Async);
  return hd_queue_mem(hStream, HD_SET, HD_DPTR(dstDevice), NULL, N, uc, true,
                      false);
}

/* The legacy default stream: waits for the current context's blocking
 * streams, then copies on the calling thread. */
static CUresult hd_sync_copy(void *dst, const void *src, size_t n, bool dst_dev,
                             bool src_dev) {
  if (dst == NULL || src == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  hd_lock();
  if ((dst_dev && !hd_range_ok((uintptr_t)dst, n, false)) ||
      (src_dev && !hd_range_ok((uintptr_t)src, n, false))) {
    hd_unlock();
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (struct hd_stream *s = hd.streams; s != NULL; s = s->next)
    if (s->ctx == hd_current && s->flags == CU_STREAM_DEFAULT) hd_drain(s);
  hd_unlock();
  memcpy(dst, src, n);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuMemcpyHtoD(CUdeviceptr dstDevice,
                                        const void *srcHost, size_t ByteCount) {
  HD_ENTRY(cuMemcpyHtoD);
  return hd_sync_copy(HD_DPTR(dstDevice), srcHost, ByteCount, true, false);
}

static CUresult CUDAAPI hd_cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice,
                                        size_t ByteCount) {
  HD_ENTRY(cuMemcpyDtoH);
  return hd_sync_copy(dstHost, HD_DPTR(srcDevice), ByteCount, false, true);
}

/* ---- Modules and launches ----------------------------------------------- */

static CUresult hd_module_load(CUmodule *module, const void *image, char *log,
                               size_t log_size) {
  if (module == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (strstr((const char *)image, ".entry") == NULL) {
    if (log != NULL && log_size > 0)
      snprintf(log, log_size, "host executor: no .entry in the image");
    return CUDA_ERROR_INVALID_PTX;
  }
  struct hd_module *m = calloc(1, sizeof(*m));
  if (m == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  m->ctx = hd_current;
  hd_lock();
  m->next = hd.modules;
  hd.modules = m;
  hd_unlock();
  *module = (CUmodule)m;
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuModuleLoadData(CUmodule *module,
                                            const void *image) {
  HD_ENTRY(cuModuleLoadData);
  return hd_module_load(module, image, NULL, 0);
}

static CUresult CUDAAPI hd_cuModuleLoadDataEx(CUmodule *module,
                                              const void *image,
                                              unsigned int numOptions,
                                              CUjit_option *options,
                                              void **optionValues) {
  HD_ENTRY(cuModuleLoadDataEx);
  char *log = NULL;
  size_t log_size = 0;
  for (unsigned i = 0; i < numOptions; i++) {
    if (options == NULL || optionValues == NULL)
      return CUDA_ERROR_INVALID_VALUE;
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) log = optionValues[i];
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      log_size = (size_t)(uintptr_t)optionValues[i];
  }
  return hd_module_load(module, image, log, log_size);
}

static CUresult CUDAAPI hd_cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod,
                                               const char *name) {
  HD_ENTRY(cuModuleGetFunction);
  if (hfunc == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
  const struct hd_kernel *k = NULL;
  pthread_mutex_lock(&hd_kernels_mu);
  for (size_t i = 0; i < hd_n_kernels; i++)
    if (strcmp(hd_kernels[i].name, name) == 0) k = &hd_kernels[i];
  pthread_mutex_unlock(&hd_kernels_mu);
  hd_lock();
  struct hd_module *m = hd_find_module(hmod);
  CUresult r = m == NULL   ? CUDA_ERROR_INVALID_HANDLE
               : k == NULL ? CUDA_ERROR_NOT_FOUND
                           : CUDA_SUCCESS;
  struct hd_function *f = NULL;
  if (r == CUDA_SUCCESS) {
    for (f = m->functions; f != NULL && f->kernel != k; f = f->next) {
    }
    if (f == NULL) {
      f = calloc(1, sizeof(*f));
      if (f == NULL) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
      } else {
        f->kernel = k;
        f->next = m->functions;
        m->functions = f;
      }
    }
  }
  hd_unlock();
  if (r == CUDA_SUCCESS) *hfunc = (CUfunction)f;
  return r;
}

static void hd_module_free(struct hd_module *m) {
  while (m->functions != NULL) {
    struct hd_function *f = m->functions;
    m->functions = f->next;
    free(f);
  }
  free(m);
}

static CUresult CUDAAPI hd_cuModuleUnload(CUmodule hmod) {
  HD_ENTRY(cuModuleUnload);
  hd_lock();
  struct hd_module *m = hd_find_module(hmod);
  if (m != NULL) {
    for (struct hd_module **p = &hd.modules; *p != NULL; p = &(*p)->next) {
      if (*p == m) {
        *p = m->next;
        break;
      }
    }
  }
  hd_unlock();
  if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
  hd_module_free(m);
  return CUDA_SUCCESS;
}

static CUresult CUDAAPI hd_cuLaunchKernel(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
    void **kernelParams, void **extra) {
  HD_ENTRY(cuLaunchKernel);
  hd_run_hook(HD_FAULT_LAUNCH);
  if (extra != NULL) return CUDA_ERROR_NOT_SUPPORTED;
  const unsigned long long threads =
      (unsigned long long)blockDimX * blockDimY * blockDimZ;
  if (gridDimX == 0 || gridDimY == 0 || gridDimZ == 0 || threads == 0 ||
      threads > 1024 || blockDimZ > 64 || sharedMemBytes > 48 * 1024)
    return CUDA_ERROR_INVALID_VALUE;
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, true, &s);
  struct hd_function *fn = r == CUDA_SUCCESS ? hd_find_function(f) : NULL;
  if (r == CUDA_SUCCESS && fn == NULL) r = CUDA_ERROR_INVALID_HANDLE;
  const struct hd_kernel *k = fn != NULL ? fn->kernel : NULL;
  if (r == CUDA_SUCCESS && k->n_params > 0 && kernelParams == NULL)
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && !hd_fault_take(HD_FAULT_LAUNCH, &r)) {
    /* As the driver: parameter values are copied at launch. */
    size_t total = 0;
    for (size_t i = 0; i < k->n_params; i++) total += k->sizes[i];
    t->param_copy = malloc(total ? total : 1);
    if (t->param_copy == NULL) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      size_t off = 0;
      for (size_t i = 0; i < k->n_params; i++) {
        memcpy(t->param_copy + off, kernelParams[i], k->sizes[i]);
        t->param_ptrs[i] = t->param_copy + off;
        off += k->sizes[i];
      }
      t->kind = HD_KERNEL;
      t->kernel = k;
      t->dims = (hd_dims){{gridDimX, gridDimY, gridDimZ},
                          {blockDimX, blockDimY, blockDimZ},
                          sharedMemBytes};
      hd_push(s, t);
      t = NULL;
    }
  }
  hd_unlock();
  if (t != NULL) hd_task_free(t);
  return r;
}

/* ---- Stream attributes and completion markers --------------------------- */

static CUresult CUDAAPI hd_cuStreamGetCtx(CUstream hStream, CUcontext *pctx) {
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  struct hd_stream *s = hd_find_stream(hStream);
  if (s != NULL) *pctx = (CUcontext)s->ctx;
  hd_unlock();
  return s != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult CUDAAPI hd_cuStreamGetFlags(CUstream hStream,
                                            unsigned int *flags) {
  if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
  hd_lock();
  struct hd_stream *s = hd_find_stream(hStream);
  if (s != NULL) *flags = s->flags;
  hd_unlock();
  return s != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Queues a marker task (host function or 64-bit write) on hStream. */
static CUresult hd_queue_marker(CUstream hStream, struct hd_task *t) {
  hd_lock();
  struct hd_stream *s = NULL;
  CUresult r = hd_stream_for_issue(hStream, true, &s);
  if (r == CUDA_SUCCESS && t->kind == HD_WRITE64 &&
      ((uintptr_t)t->dst % 8 != 0 ||
       (!hd_range_ok((uintptr_t)t->dst, 8, true) &&
        !hd_range_ok((uintptr_t)t->dst, 8, false))))
    r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && !hd_fault_take(HD_FAULT_MARKER, &r)) {
    hd_push(s, t);
    t = NULL;
  }
  hd_unlock();
  free(t);
  return r;
}

static CUresult CUDAAPI hd_cuLaunchHostFunc(CUstream hStream, CUhostFn fn,
                                            void *userData) {
  if (fn == NULL) return CUDA_ERROR_INVALID_VALUE;
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  t->kind = HD_HOSTFN;
  t->hostfn = fn;
  t->hostfn_arg = userData;
  return hd_queue_marker(hStream, t);
}

static CUresult CUDAAPI hd_cuStreamWriteValue64(CUstream stream,
                                                CUdeviceptr addr,
                                                cuuint64_t value,
                                                unsigned int flags) {
  if (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
    return CUDA_ERROR_INVALID_VALUE;
  struct hd_task *t = calloc(1, sizeof(*t));
  if (t == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  t->kind = HD_WRITE64;
  t->dst = HD_DPTR(addr);
  t->value64 = value;
  return hd_queue_marker(stream, t);
}

/* Pinned host memory is mapped at its own address (unified addressing). */
static CUresult CUDAAPI hd_cuMemHostGetDevicePointer(CUdeviceptr *pdptr,
                                                     void *p,
                                                     unsigned int Flags) {
  if (pdptr == NULL || p == NULL || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (hd_current == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  hd_lock();
  bool ok = hd_range_ok((uintptr_t)p, 1, true);
  hd_unlock();
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* ---- Install / shutdown ------------------------------------------------- */

int hd_install(slc_driver *table, const hd_config *cfg) {
  int devices = cfg != NULL ? cfg->devices : 1;
  if (table == NULL || devices < 1 || devices > HD_MAX_DEVICES) return -1;
  hd_lock();
  if (hd.installed) {
    hd_unlock();
    return -1;
  }
  hd.installed = true;
  hd.initialized = false;
  hd.n_devices = devices;
  hd.delay_us = cfg != NULL ? cfg->task_delay_us : 0;
  hd.hold = false;
  hd.ops = 0;
  hd.sticky = CUDA_SUCCESS;
  memset(hd.faults, 0, sizeof(hd.faults));
  memset(hd.hooks, 0, sizeof(hd.hooks));
  memset(hd.calls, 0, sizeof(hd.calls));
  hd.nth_entry = -1;
  hd.nth_left = 0;
  hd.nth_fired = 0;
  hd.early_frees = 0;
  hd.unpeered_copies = 0;
  memset(hd.no_peer, 0, sizeof(hd.no_peer));
  for (int i = 0; i < HD_MAX_DEVICES; i++)
    hd.ctxs[i] = (struct hd_ctx){.device = i};
  hd_unlock();
  hd_current = NULL;

  slc_driver_init_unloaded(table);
#define HD_SET(name, sym, ver, params) table->pfn_##name = hd_##name;
  SLC_DRIVER_ENTRIES(HD_SET)
#undef HD_SET
  table->loaded = true;
  table->driver_version = CUDA_VERSION;
  snprintf(table->origin, sizeof(table->origin),
           "host executor (%d devices, fake driver)", devices);
  return 0;
}

long hd_shutdown(void) {
  hd_lock();
  if (!hd.installed) {
    hd_unlock();
    return 0;
  }
  long leaked = 0;
  hd.hold = false;
  struct hd_stream *streams = hd.streams;
  hd.streams = NULL;
  for (struct hd_stream *s = streams; s != NULL; s = s->next) {
    s->stop = true;
    leaked += !s->legacy; /* the default streams are the driver's */
  }
  hd_wake();
  hd_unlock();
  hd_lock();
  struct hd_stream *dying = hd.dying; /* destroyed streams: not leaks */
  hd.dying = NULL;
  hd_unlock();
  for (int list = 0; list < 2; list++) {
    struct hd_stream *s = list == 0 ? streams : dying;
    while (s != NULL) {
      struct hd_stream *next = s->next;
      pthread_join(s->thread, NULL);
      free(s);
      s = next;
    }
  }
  hd_lock();
  while (hd.events != NULL) {
    struct hd_event *e = hd.events;
    hd.events = e->next;
    hd_record_unref(e->latest);
    free(e);
    leaked++;
  }
  while (hd.modules != NULL) {
    struct hd_module *m = hd.modules;
    hd.modules = m->next;
    hd_module_free(m);
    leaked++;
  }
  while (hd.allocs != NULL) {
    struct hd_alloc *a = hd.allocs;
    hd.allocs = a->next;
    free((void *)a->base);
    free(a);
    leaked++;
  }
  for (int i = 0; i < HD_MAX_DEVICES; i++) {
    leaked += hd.ctxs[i].refs;
    hd.ctxs[i].refs = 0;
    hd.ctxs[i].peers_on = 0;
    hd.ctxs[i].legacy = NULL; /* joined above, with the other streams */
  }
  hd.installed = false;
  hd_unlock();
  hd_current = NULL;
  return leaked;
}
