/*
 * Adopting a driver stream the layer did not create (issue 9 item 2): a
 * stream of the application, cuBLAS, TensorRT, a framework (PyTorch hands
 * its allocator such streams). The layer records work on it and
 * synchronises it, but never destroys it: slc_stream_destroy and the last
 * slc_stream_unref synchronise and release as for any stream and leave the
 * CUstream to its owner.
 */
#include <stdlib.h>

#include "cuda/internal.h"

int slc_stream_adopt(slc_context *c, CUstream cu, slc_stream **out) {
  static const char fn[] = "slc_stream_adopt";
  if (c == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  if (cu == NULL || cu == CU_STREAM_LEGACY || cu == CU_STREAM_PER_THREAD)
    return slc__fail(LDG_EINVAL, fn,
                     "the default streams cannot be adopted (they order "
                     "with every blocking stream; use a stream of its own)");
  const slc_driver *d = &c->drv;
  CUcontext ctx = NULL;
  CUresult r = d->pfn_cuStreamGetCtx(cu, &ctx);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuStreamGetCtx", r, "adopting stream %p",
                        (void *)cu);
  int device = -1;
  for (int i = 0; i < c->n_devices && device < 0; i++) {
    int rc = slc__make_current(c, i, fn);
    if (rc != LDG_OK) return rc;
    if (c->devices[i].ctx == ctx) device = i;
  }
  if (device < 0)
    return slc__fail(LDG_EINVAL, fn,
                     "stream %p belongs to a context that is no device's "
                     "primary context",
                     (void *)cu);
  unsigned flags = 0;
  r = d->pfn_cuStreamGetFlags(cu, &flags);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuStreamGetFlags", r, "adopting stream %p",
                        (void *)cu);
  slc_stream *s = calloc(1, sizeof(*s));
  if (s == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  s->cu = cu;
  int rc = slc__stream_init(
      c, s, device,
      (flags & CU_STREAM_NON_BLOCKING) ? SLC_STREAM_NONBLOCKING : 0, true);
  if (rc != LDG_OK) return rc;
  *out = s;
  return LDG_OK;
}

bool slc_stream_is_adopted(const slc_stream *s) {
  return s != NULL && s->adopted;
}
