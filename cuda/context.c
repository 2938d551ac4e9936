/*
 * The context (driver table, ledger, devices), device synchronisation,
 * buffers and their settle paths, modules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/internal.h"

/* ---- Context ------------------------------------------------------------ */

int slc_context_create(const slc_driver *driver, slc_context **out) {
  static const char fn[] = "slc_context_create";
  if (out == NULL) return slc__fail(LDG_EINVAL, fn, "out is NULL");
  if (driver == NULL) return slc__fail(SLC_ENODRIVER, fn, "no driver table");
  if (!driver->loaded)
    return slc__fail(
        SLC_ENODRIVER, fn, "%s",
        driver->load_error[0] ? driver->load_error : "driver table not loaded");
  /* Aligned: c->hot is one cache line (sizeof is a multiple of 64). */
  slc_context *c = aligned_alloc(_Alignof(slc_context), sizeof(*c));
  if (c == NULL) return slc__fail(LDG_ENOMEM, fn, "context");
  memset(c, 0, sizeof(*c));
  c->drv = *driver;
  c->hot.cuCtxGetCurrent = driver->pfn_cuCtxGetCurrent;
  c->hot.cuLaunchKernel = driver->pfn_cuLaunchKernel;
  c->hot.cuEventRecord = driver->pfn_cuEventRecord;
  c->hot.cuMemcpyHtoDAsync = driver->pfn_cuMemcpyHtoDAsync;
  c->hot.cuMemcpyDtoHAsync = driver->pfn_cuMemcpyDtoHAsync;
  c->hot.cuMemcpyDtoDAsync = driver->pfn_cuMemcpyDtoDAsync;
  c->hot.cuMemsetD8Async = driver->pfn_cuMemsetD8Async;
  const slc_driver *d = &c->drv;
  int rc;
  CUresult r = d->pfn_cuInit(0);
  if (r != CUDA_SUCCESS) {
    rc = slc__fail_cu(c, "cuInit", r, "driver %s", d->origin);
    goto fail;
  }
  r = d->pfn_cuDriverGetVersion(&c->driver_version);
  if (r != CUDA_SUCCESS) {
    rc = slc__fail_cu(c, "cuDriverGetVersion", r, NULL);
    goto fail;
  }
  r = d->pfn_cuDeviceGetCount(&c->n_devices);
  if (r != CUDA_SUCCESS) {
    rc = slc__fail_cu(c, "cuDeviceGetCount", r, NULL);
    goto fail;
  }
  if (c->n_devices <= 0) {
    rc = slc__fail(SLC_ENODEVICE, fn, "cuDeviceGetCount reports 0 devices");
    goto fail;
  }
  c->devices = calloc((size_t)c->n_devices, sizeof(*c->devices));
  if (c->devices == NULL) {
    rc = slc__fail(LDG_ENOMEM, fn, "devices");
    goto fail;
  }
  for (int i = 0; i < c->n_devices; i++) {
    struct slc__device *dev = &c->devices[i];
    pthread_mutex_init(&dev->init_mu, NULL);
    atomic_init(&dev->ready, 0);
    atomic_init(&dev->peers_on, 0);
    r = d->pfn_cuDeviceGet(&dev->dev, i);
    if (r != CUDA_SUCCESS) {
      rc = slc__fail_cu(c, "cuDeviceGet", r, "ordinal %d", i);
      goto fail;
    }
  }
  rc = ldg_ledger_create(&c->ledger);
  if (rc != LDG_OK) {
    rc = slc__fail(rc, "ldg_ledger_create", NULL);
    goto fail;
  }
  atomic_init(&c->next_vec_id, 1);
  atomic_init(&c->live_handles, 0);
  for (int i = 0; i < SLC_CAUSE_COUNT; i++) atomic_init(&c->keeps_by[i], 0);
  pthread_mutex_init(&c->limbo_mu, NULL);
  c->limbo = NULL;
  pthread_mutex_init(&c->streams_mu, NULL);
  c->streams = NULL;
  atomic_init(&c->hot.cache_current, false);
  *out = c;
  return LDG_OK;
fail:
  if (c->devices != NULL) {
    for (int i = 0; i < c->n_devices; i++)
      pthread_mutex_destroy(&c->devices[i].init_mu);
  }
  free(c->devices);
  free(c);
  return rc;
}

int slc_context_destroy(slc_context *c) {
  if (c == NULL) return LDG_OK;
  long live = slc__load_acquire(&c->live_handles);
  if (live != 0)
    return slc__fail(LDG_EBUSY, "slc_context_destroy",
                     "%ld streams, events, buffers or modules still alive",
                     live);
  /* Each step is done once; after an error c stays and a later call
   * resumes where this one stopped. */
  /* 1. The engine first: every stream left its list at its last unref
   *    (live_handles is 0), so it drives nothing; joining its thread waits
   *    out a release it may still be running (keeps, and a ledger reference
   *    on a stream), so nothing of the engine touches the limbo streams
   *    finished below or the ledger destroyed after. A destroy that fails
   *    later leaves the engine off (slc_engine_enable may start it again). */
  slc__engine_stop(c);
  int rc = slc__limbo_finish(c);
  if (rc != LDG_OK) return rc;
  if (c->ledger != NULL) {
    /* Every stream was destroyed (or finished above): nothing is held. */
    ldg_ledger_destroy(c->ledger);
    c->ledger = NULL;
  }
  const slc_driver *d = &c->drv;
  for (int i = 0; i < c->n_devices; i++) {
    struct slc__device *dev = &c->devices[i];
    if (!slc__load_acquire(&dev->ready)) continue;
    CUcontext cur = NULL;
    if (d->pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx)
      (void)slc__ctx_set(c, NULL);
    CUresult r = d->pfn_cuDevicePrimaryCtxRelease(dev->dev);
    if (r != CUDA_SUCCESS)
      return slc__fail_cu(c, "cuDevicePrimaryCtxRelease", r,
                          "device %d; the context stays: call "
                          "slc_context_destroy again",
                          i);
    slc__store_release(&dev->ready, 0);
  }
  for (int i = 0; i < c->n_devices; i++)
    pthread_mutex_destroy(&c->devices[i].init_mu);
  pthread_mutex_destroy(&c->limbo_mu);
  pthread_mutex_destroy(&c->streams_mu);
  free(c->devices);
  free(c);
  return LDG_OK;
}

int slc_device_count(const slc_context *c) {
  return c != NULL ? c->n_devices : 0;
}

int slc_driver_version(const slc_context *c) {
  return c != NULL ? c->driver_version : 0;
}

const slc_driver *slc_context_driver(const slc_context *c) {
  return c != NULL ? &c->drv : NULL;
}

ldg_ledger *slc_context_ledger(const slc_context *c) {
  return c != NULL ? c->ledger : NULL;
}

uint64_t slc_new_vector_id(slc_context *c) {
  return slc__fetch_add_relaxed(&c->next_vec_id, 1);
}

/* ---- Devices ------------------------------------------------------------ */

_Thread_local CUcontext slc__tls_ctx;

static int slc__check_device(const slc_context *c, int device,
                             const char *call) {
  if (c == NULL) return slc__fail(LDG_EINVAL, call, "context is NULL");
  if (device < 0 || device >= c->n_devices)
    return slc__fail(LDG_EINVAL, call, "device %d out of range (%d devices)",
                     device, c->n_devices);
  return LDG_OK;
}

int slc__make_current_slow(slc_context *c, int device, const char *call) {
  int rc = slc__check_device(c, device, call);
  if (rc != LDG_OK) return rc;
  const slc_driver *d = &c->drv;
  struct slc__device *dev = &c->devices[device];
  /* Pairs with the release store below: ctx is written before ready. */
  if (!slc__load_acquire(&dev->ready)) {
    /* init_mu: first use of the device only. Retaining twice would be
     * harmless for the driver but would leak a reference. */
    pthread_mutex_lock(&dev->init_mu);
    if (!slc__load_relaxed(&dev->ready)) {
      CUcontext ctx = NULL;
      CUresult r = d->pfn_cuDevicePrimaryCtxRetain(&ctx, dev->dev);
      if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&dev->init_mu);
        return slc__fail_cu(c, "cuDevicePrimaryCtxRetain", r,
                            "device %d (for %s)", device, call);
      }
      dev->ctx = ctx;
      slc__store_release(&dev->ready, 1);
    }
    pthread_mutex_unlock(&dev->init_mu);
  }
  CUcontext cur = NULL;
  CUresult r = d->pfn_cuCtxGetCurrent(&cur);
  if (r == CUDA_SUCCESS && cur == dev->ctx) {
    slc__tls_ctx = cur;
    return LDG_OK;
  }
  return slc__set_current(c, device, r, call);
}

int slc__set_current(slc_context *c, int device, CUresult r,
                     const char *call) {
  if (r != CUDA_SUCCESS) {
    slc__tls_ctx = NULL;
    return slc__fail_cu(c, "cuCtxGetCurrent", r, "for %s", call);
  }
  r = slc__ctx_set(c, c->devices[device].ctx);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuCtxSetCurrent", r, "device %d (for %s)", device,
                        call);
  return LDG_OK;
}

int slc_device_make_current(slc_context *c, int device) {
  /* Always asks the driver: the way to bring this thread's cache up to
   * date after a switch made outside the layer. */
  return slc__make_current_slow(c, device, "slc_device_make_current");
}

int slc_context_cache_current(slc_context *c, bool on) {
  if (c == NULL)
    return slc__fail(LDG_EINVAL, "slc_context_cache_current", "context is NULL");
  atomic_store_explicit(&c->hot.cache_current, on, memory_order_relaxed);
  return LDG_OK;
}

int slc_device_name(slc_context *c, int device, char *name, size_t len) {
  static const char fn[] = "slc_device_name";
  int rc = slc__check_device(c, device, fn);
  if (rc != LDG_OK) return rc;
  if (name == NULL || len == 0 || len > 4096)
    return slc__fail(LDG_EINVAL, fn, "bad name buffer");
  CUresult r =
      c->drv.pfn_cuDeviceGetName(name, (int)len, c->devices[device].dev);
  if (r != CUDA_SUCCESS) return slc__fail_cu(c, "cuDeviceGetName", r, NULL);
  return LDG_OK;
}

int slc_device_synchronize(slc_context *c, int device) {
  static const char fn[] = "slc_device_synchronize";
  int rc = slc__check_device(c, device, fn);
  if (rc != LDG_OK) return rc;
  /* Mark, then complete: the snapshot is taken before the context sync. */
  ldg_marks *marks = NULL;
  rc = ldg_device_marks(c->ledger, device, &marks);
  if (rc != LDG_OK) return slc__fail(rc, "ldg_device_marks", NULL);
  rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) {
    ldg_marks_discard(marks);
    return rc;
  }
  CUresult r = c->drv.pfn_cuCtxSynchronize();
  if (r != CUDA_SUCCESS) {
    ldg_marks_discard(marks); /* the sync failed: release nothing */
    return slc__fail_cu(c, "cuCtxSynchronize", r, "device %d", device);
  }
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  rc = ldg_release_marks(marks);
  slc__keeps_end(c, &kf, SLC_CAUSE_SYNC);
  if (rc != LDG_OK) return slc__fail(rc, "ldg_release_marks", NULL);
  return LDG_OK;
}

/* ---- Buffers ------------------------------------------------------------ */

static int slc__buffer_new(slc_context *c, int device, bool host, size_t bytes,
                           slc_buffer **out) {
  slc_buffer *b = calloc(1, sizeof(*b));
  if (b == NULL) return slc__fail(LDG_ENOMEM, "slc_buffer_alloc", NULL);
  b->c = c;
  b->device = device;
  b->host = host;
  b->bytes = bytes;
  b->id = slc_new_vector_id(c);
  *out = b;
  return LDG_OK;
}

int slc_buffer_alloc_device(slc_context *c, int device, size_t bytes,
                            slc_buffer **out) {
  static const char fn[] = "slc_buffer_alloc_device";
  if (out == NULL || bytes == 0)
    return slc__fail(LDG_EINVAL, fn, "out NULL or zero bytes");
  int rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  CUdeviceptr p = 0;
  CUresult r = c->drv.pfn_cuMemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuMemAlloc", r, "%zu bytes on device %d", bytes,
                        device);
  slc_buffer *b = NULL;
  rc = slc__buffer_new(c, device, false, bytes, &b);
  if (rc != LDG_OK) {
    (void)c->drv.pfn_cuMemFree(p);
    return rc;
  }
  b->dptr = p;
  slc__fetch_add_acq_rel(&c->live_handles, 1);
  *out = b;
  return LDG_OK;
}

int slc_buffer_alloc_host(slc_context *c, size_t bytes, slc_buffer **out) {
  static const char fn[] = "slc_buffer_alloc_host";
  if (out == NULL || bytes == 0)
    return slc__fail(LDG_EINVAL, fn, "out NULL or zero bytes");
  int rc = slc__make_current(c, 0, fn);
  if (rc != LDG_OK) return rc;
  void *p = NULL;
  CUresult r = c->drv.pfn_cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuMemHostAlloc", r, "%zu bytes", bytes);
  slc_buffer *b = NULL;
  rc = slc__buffer_new(c, 0, true, bytes, &b);
  if (rc != LDG_OK) {
    (void)c->drv.pfn_cuMemFreeHost(p);
    return rc;
  }
  b->hptr = p;
  slc__fetch_add_acq_rel(&c->live_handles, 1);
  *out = b;
  return LDG_OK;
}

uint64_t slc_buffer_id(const slc_buffer *b) { return b->id; }
size_t slc_buffer_size(const slc_buffer *b) { return b->bytes; }
bool slc_buffer_is_host(const slc_buffer *b) { return b->host; }
int slc_buffer_device(const slc_buffer *b) { return b->device; }
CUdeviceptr slc_buffer_dptr(const slc_buffer *b) { return b->dptr; }
void *slc_buffer_host(const slc_buffer *b) { return b->hptr; }

bool slc_buffer_held(const slc_buffer *b) {
  if (ldg_holds_vector(b->c->ledger, b->id)) return true;
  return b->host &&
         ldg_holds_host_range(b->c->ledger, (uintptr_t)b->hptr, b->bytes);
}

/* Frees the driver memory and the handle; b must no longer be held. */
static int slc__buffer_release(slc_buffer *b, const char *call) {
  slc_context *c = b->c;
  int rc = slc__make_current(c, b->device, call);
  if (rc != LDG_OK) return rc;
  CUresult r = b->host ? c->drv.pfn_cuMemFreeHost(b->hptr)
                       : c->drv.pfn_cuMemFree(b->dptr);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, b->host ? "cuMemFreeHost" : "cuMemFree", r,
                        "vector %llu", (unsigned long long)b->id);
  free(b);
  slc__fetch_sub_acq_rel(&c->live_handles, 1);
  return LDG_OK;
}

int slc_buffer_try_free(slc_buffer *b) {
  static const char fn[] = "slc_buffer_try_free";
  if (b == NULL) return slc__fail(LDG_EINVAL, fn, "buffer is NULL");
  if (slc_buffer_held(b))
    return slc__fail(LDG_EBUSY, fn, "vector %llu is held by pending work",
                     (unsigned long long)b->id);
  return slc__buffer_release(b, fn);
}

/* ldg_settle_vector with the layer's error reporting: a failing drain's
 * record, taken when it failed (keeps the settle ran afterwards may have
 * failed or settled in turn). */
static int slc__settle_vector(slc_context *c, uint64_t id, const char *call) {
  struct slc__settle_frame f;
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  slc__settle_push(&f);
  int rc = ldg_settle_vector(c->ledger, id);
  slc__settle_pop(&f);
  slc__keeps_end(c, &kf, SLC_CAUSE_SYNC);
  if (rc == LDG_EDRAIN) {
    if (f.failed) return slc__error_restore(&f.err);
    return slc__fail(rc, call, "ldg_settle_vector: a drain failed");
  }
  if (rc != LDG_OK) return slc__fail(rc, call, "ldg_settle_vector");
  return LDG_OK;
}

typedef bool (*slc__held_fn)(void *arg);

/* Synchronises devices, `home` first, until held(arg) is false. */
static int slc__settle_devices(slc_context *c, int home, slc__held_fn held,
                               void *arg, const char *call) {
  if (!held(arg)) return LDG_OK;
  for (int k = -1; k < c->n_devices; k++) {
    int dev = k < 0 ? home : k;
    if (k == home) continue;
    int rc = slc_device_synchronize(c, dev);
    if (rc != LDG_OK) return rc;
    if (!held(arg)) return LDG_OK;
  }
  return slc__fail(LDG_EBUSY, call,
                   "still held after synchronising every device (work "
                   "enqueued meanwhile)");
}

static bool slc__buffer_held_cb(void *arg) { return slc_buffer_held(arg); }

int slc_buffer_free(slc_buffer *b) {
  static const char fn[] = "slc_buffer_free";
  if (b == NULL) return slc__fail(LDG_EINVAL, fn, "buffer is NULL");
  slc_context *c = b->c;
  int rc = slc__settle_vector(c, b->id, fn);
  if (rc != LDG_OK) return rc;
  rc = slc__settle_devices(c, b->device, slc__buffer_held_cb, b, fn);
  if (rc != LDG_OK) return rc;
  return slc__buffer_release(b, fn);
}

struct slc__range {
  ldg_ledger *l;
  uintptr_t addr;
  size_t bytes;
};

static bool slc__range_held_cb(void *arg) {
  struct slc__range *r = arg;
  return ldg_holds_host_range(r->l, r->addr, r->bytes);
}

int slc_host_range_settle(slc_context *c, const void *addr, size_t bytes) {
  static const char fn[] = "slc_host_range_settle";
  if (c == NULL) return slc__fail(LDG_EINVAL, fn, "context is NULL");
  struct slc__range r = {c->ledger, (uintptr_t)addr, bytes};
  return slc__settle_devices(c, 0, slc__range_held_cb, &r, fn);
}

static int slc__check_span(const slc_buffer *b, size_t off, size_t bytes,
                           const char *call) {
  if (b == NULL) return slc__fail(LDG_EINVAL, call, "buffer is NULL");
  if (b->host) return slc__fail(LDG_EINVAL, call, "a host buffer");
  if (off > b->bytes || bytes > b->bytes - off)
    return slc__fail(LDG_EINVAL, call,
                     "[%zu, +%zu) outside the %zu bytes of vector %llu", off,
                     bytes, b->bytes, (unsigned long long)b->id);
  return LDG_OK;
}

int slc_copy_htod(slc_buffer *dst, size_t dst_offset, const void *src,
                  size_t bytes) {
  static const char fn[] = "slc_copy_htod";
  int rc = slc__check_span(dst, dst_offset, bytes, fn);
  if (rc != LDG_OK) return rc;
  slc_context *c = dst->c;
  rc = slc__settle_vector(c, dst->id, fn);
  if (rc != LDG_OK) return rc;
  rc = slc__make_current(c, dst->device, fn);
  if (rc != LDG_OK) return rc;
  CUresult r = c->drv.pfn_cuMemcpyHtoD(dst->dptr + dst_offset, src, bytes);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuMemcpyHtoD", r, "%zu bytes to vector %llu", bytes,
                        (unsigned long long)dst->id);
  return LDG_OK;
}

int slc_copy_dtoh(void *dst, slc_buffer *src, size_t src_offset, size_t bytes) {
  static const char fn[] = "slc_copy_dtoh";
  int rc = slc__check_span(src, src_offset, bytes, fn);
  if (rc != LDG_OK) return rc;
  slc_context *c = src->c;
  rc = slc__settle_vector(c, src->id, fn);
  if (rc != LDG_OK) return rc;
  rc = slc__make_current(c, src->device, fn);
  if (rc != LDG_OK) return rc;
  CUresult r = c->drv.pfn_cuMemcpyDtoH(dst, src->dptr + src_offset, bytes);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuMemcpyDtoH", r, "%zu bytes from vector %llu",
                        bytes, (unsigned long long)src->id);
  return LDG_OK;
}

/* ---- Modules ------------------------------------------------------------ */

int slc_module_load(slc_context *c, int device, const void *image,
                    slc_module **out) {
  static const char fn[] = "slc_module_load";
  if (out == NULL || image == NULL)
    return slc__fail(LDG_EINVAL, fn, "image or out is NULL");
  int rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  slc_module *m = calloc(1, sizeof(*m));
  if (m == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  char log[2048];
  log[0] = '\0';
  CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER,
                          CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof(log)};
  CUresult r = c->drv.pfn_cuModuleLoadDataEx(&m->cu, image, 2, opts, vals);
  if (r != CUDA_SUCCESS) {
    free(m);
    log[sizeof(log) - 1] = '\0';
    return slc__fail_cu(c, "cuModuleLoadDataEx", r, "device %d; JIT log: %s",
                        device, log[0] ? log : "(empty)");
  }
  m->c = c;
  m->device = device;
  slc__fetch_add_acq_rel(&c->live_handles, 1);
  *out = m;
  return LDG_OK;
}

int slc_module_function(slc_module *m, const char *name, CUfunction *out) {
  static const char fn[] = "slc_module_function";
  if (m == NULL || name == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  int rc = slc__make_current(m->c, m->device, fn);
  if (rc != LDG_OK) return rc;
  CUfunction f = NULL;
  CUresult r = m->c->drv.pfn_cuModuleGetFunction(&f, m->cu, name);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(m->c, "cuModuleGetFunction", r, "\"%s\"", name);
  *out = f;
  return LDG_OK;
}

int slc_module_unload(slc_module *m) {
  if (m == NULL) return LDG_OK;
  slc_context *c = m->c;
  int rc = slc__make_current(c, m->device, "slc_module_unload");
  if (rc != LDG_OK) return rc;
  CUresult r = c->drv.pfn_cuModuleUnload(m->cu);
  if (r != CUDA_SUCCESS) return slc__fail_cu(c, "cuModuleUnload", r, NULL);
  free(m);
  slc__fetch_sub_acq_rel(&c->live_handles, 1);
  return LDG_OK;
}
