/*
 * Errors of the cuda/ layer: CUresult -> project code, and the thread-local
 * record of the last failure with the driver's own name and message.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda/internal.h"

static _Thread_local slc_error slc__tls_error;
static _Thread_local struct slc__settle_frame *slc__tls_settle;

const slc_error *slc_last_error(void) { return &slc__tls_error; }

const char *slc_last_error_message(void) { return slc__tls_error.message; }

void slc_clear_error(void) {
  memset(&slc__tls_error, 0, sizeof(slc__tls_error));
}

void slc__error_save(slc_error *out) { *out = slc__tls_error; }

int slc__error_restore(const slc_error *e) {
  slc__tls_error = *e;
  return e->code;
}

void slc__settle_push(struct slc__settle_frame *f) {
  f->prev = slc__tls_settle;
  f->failed = false;
  slc__tls_settle = f;
}

void slc__settle_pop(struct slc__settle_frame *f) { slc__tls_settle = f->prev; }

void slc__drain_failed(void) {
  /* No frame: ldg_settle_vector was called on the layer's ledger directly;
   * the record alone says it. */
  struct slc__settle_frame *f = slc__tls_settle;
  if (f == NULL || f->failed) return;
  f->failed = true;
  f->err = slc__tls_error;
}

int slc_code_of(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return LDG_OK;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NOT_FOUND:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return LDG_EINVAL;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return LDG_ENOMEM;
    case CUDA_ERROR_NO_DEVICE:
      return SLC_ENODEVICE;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return SLC_ENODRIVER;
    default:
      return SLC_EDRIVER;
  }
}

const char *slc_strerror(int code) {
  switch (code) {
    case SLC_EDRIVER:
      return "CUDA driver call failed";
    case SLC_ENODRIVER:
      return "no usable CUDA driver";
    case SLC_ENODEVICE:
      return "no CUDA device";
    default:
      return ldg_strerror(code);
  }
}

static void slc__set_call(const char *call) {
  snprintf(slc__tls_error.call, sizeof(slc__tls_error.call), "%s",
           call != NULL ? call : "?");
}

/* Names for when the driver cannot give its own (a stub library, a table
 * that is not loaded). */
static const char *slc__fallback_name(CUresult r) {
  switch (r) {
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY:
      return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED:
      return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE:
      return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT:
      return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE:
      return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_NOT_READY:
      return "CUDA_ERROR_NOT_READY";
    case CUDA_ERROR_LAUNCH_FAILED:
      return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    default:
      return NULL;
  }
}

int slc__fail_cu_drv(const slc_driver *d, const char *call, CUresult r,
                     const char *detail) {
  const char *name = NULL;
  const char *text = NULL;
  /* The driver's own words; the stubs of an unloaded table leave them NULL. */
  if (d == NULL || d->pfn_cuGetErrorName(r, &name) != CUDA_SUCCESS) name = NULL;
  if (d == NULL || d->pfn_cuGetErrorString(r, &text) != CUDA_SUCCESS)
    text = NULL;
  char namebuf[32];
  if (name == NULL) name = slc__fallback_name(r);
  if (name == NULL) {
    snprintf(namebuf, sizeof(namebuf), "CUresult %d", (int)r);
    name = namebuf;
  }
  slc__tls_error.code = slc_code_of(r);
  slc__tls_error.cu = r;
  slc__set_call(call);
  snprintf(slc__tls_error.message, sizeof(slc__tls_error.message),
           "%s: %s (%s)%s%s", slc__tls_error.call, name,
           text != NULL ? text : "no message from the driver",
           detail != NULL && detail[0] ? ": " : "",
           detail != NULL ? detail : "");
  return slc__tls_error.code;
}

int slc__fail_cu(const slc_context *c, const char *call, CUresult r,
                 const char *detail_fmt, ...) {
  char detail[384] = "";
  if (detail_fmt != NULL) {
    va_list ap;
    va_start(ap, detail_fmt);
    vsnprintf(detail, sizeof(detail), detail_fmt, ap);
    va_end(ap);
  }
  return slc__fail_cu_drv(c != NULL ? &c->drv : NULL, call, r, detail);
}

/* slc__fail and slc_set_error: the refusal's message from a va_list. */
static int slc__vfail(int code, const char *call, const char *fmt,
                      va_list ap) {
  char detail[384] = "";
  if (fmt != NULL) vsnprintf(detail, sizeof(detail), fmt, ap);
  slc__tls_error.code = code;
  slc__tls_error.cu = CUDA_SUCCESS;
  slc__set_call(call);
  snprintf(slc__tls_error.message, sizeof(slc__tls_error.message), "%s: %s%s%s",
           slc__tls_error.call, slc_strerror(code), detail[0] ? ": " : "",
           detail);
  return code;
}

int slc__fail(int code, const char *call, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = slc__vfail(code, call, fmt, ap);
  va_end(ap);
  return rc;
}

int slc_set_error(int code, const char *call, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = slc__vfail(code, call, fmt, ap);
  va_end(ap);
  return rc;
}

int slc_set_error_cu(const slc_context *c, const char *call, CUresult r,
                     const char *detail) {
  return slc__fail_cu(c, call, r, "%s", detail != NULL ? detail : "");
}

/* ---- Test hooks (cuda_testing.h) ----------------------------------------- */

#ifdef SLC_TEST_HOOKS
static _Atomic(slc__hook_fn) slc__hook;
static void *_Atomic slc__hook_arg;

bool slc__set_test_hook(slc__hook_fn fn, void *arg) {
  /* The test installs a hook before starting the threads that pass it. */
  atomic_store_explicit(&slc__hook_arg, arg, memory_order_relaxed);
  atomic_store_explicit(&slc__hook, fn, memory_order_release);
  return true;
}

void slc__test_hook(enum slc__hook_point point) {
  slc__hook_fn fn = atomic_load_explicit(&slc__hook, memory_order_acquire);
  if (fn != NULL)
    fn(point, atomic_load_explicit(&slc__hook_arg, memory_order_relaxed));
}
#else
bool slc__set_test_hook(slc__hook_fn fn, void *arg) {
  (void)fn;
  (void)arg;
  return false;
}
#endif
