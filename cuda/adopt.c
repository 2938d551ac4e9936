/*
 * Adopting a driver stream the layer did not create (issue 9 item 2): a
 * stream of the application, cuBLAS, TensorRT, a framework (PyTorch hands
 * its allocator such streams). The layer records work on it and
 * synchronises it, but never destroys it: slc_stream_destroy and the last
 * slc_stream_unref synchronise and release as for any stream and leave the
 * CUstream to its owner.
 *
 * THE LEGACY DEFAULT STREAM (slc_stream_adopt_legacy, issue 14)
 *   PyTorch runs on it unless told otherwise (cudaStream_t 0). Its handle
 *   names no context: NULL and CU_STREAM_LEGACY mean "the legacy stream of
 *   the context current on the calling thread", so slc_stream_adopt cannot
 *   find its device and refuses it. slc_stream_adopt_legacy takes the device
 *   from the caller and stores CU_STREAM_LEGACY (explicit: the legacy stream
 *   even in a program built for per-thread default streams). It is sound
 *   because every driver call of the layer on such a stream — issues, event
 *   records, waits, markers, syncs, queries — first makes the stream's
 *   device's primary context current (slc__current_for: the one kind of
 *   stream for which copies, records, waits, syncs and queries do), so
 *   CU_STREAM_LEGACY always means that device's legacy stream, the one
 *   PyTorch's runtime uses (the runtime works in the primary contexts).
 *   What the ledger may conclude from it: only what the layer recorded on
 *   this object. A sync or event on the legacy stream proves complete the
 *   work issued on it before; the stream's implicit barriers (its work waits
 *   for every blocking stream's earlier work, theirs for its) would prove
 *   more, but the ledger is never told of them: no other stream is released
 *   through them, which is always allowed (fewer releases, never earlier).
 *   Device synchronisations cover it as any stream of the device. It is a
 *   blocking stream for the ledger (settles synchronise its device, as for
 *   any blocking holder). Each call makes a new object (its own ledger
 *   stream); two objects on the one legacy stream are sound (each releases
 *   only its own entries) but each pays its own markers: a shim keeps one
 *   per device. CU_STREAM_PER_THREAD is refused: it names a different stream
 *   on every thread, so no one object can stand for it.
 */
#include <stdlib.h>

#include "cuda/internal.h"

int slc_stream_adopt(slc_context *c, CUstream cu, slc_stream **out) {
  static const char fn[] = "slc_stream_adopt";
  if (c == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  if (cu == NULL || cu == CU_STREAM_LEGACY || cu == CU_STREAM_PER_THREAD)
    return slc__fail(LDG_EINVAL, fn,
                     "a default stream names no device: adopt the legacy "
                     "one with slc_stream_adopt_legacy (the per-thread one "
                     "cannot be adopted)");
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
  slc_stream *s = slc__stream_alloc();
  if (s == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  s->cu = cu;
  int rc = slc__stream_init(
      c, s, device,
      (flags & CU_STREAM_NON_BLOCKING) ? SLC_STREAM_NONBLOCKING : 0, true);
  if (rc != LDG_OK) return rc;
  *out = s;
  return LDG_OK;
}

int slc_stream_adopt_legacy(slc_context *c, int device, slc_stream **out) {
  static const char fn[] = "slc_stream_adopt_legacy";
  if (c == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  if (device < 0 || device >= c->n_devices)
    return slc__fail(LDG_EINVAL, fn, "device %d of %d", device, c->n_devices);
  /* Retains the primary context now: every later call on the stream makes
   * it current before naming CU_STREAM_LEGACY (see above). */
  int rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  slc_stream *s = slc__stream_alloc();
  if (s == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  s->cu = CU_STREAM_LEGACY;
  rc = slc__stream_init(c, s, device, 0, true);
  if (rc != LDG_OK) return rc;
  *out = s;
  return LDG_OK;
}

bool slc_stream_is_adopted(const slc_stream *s) {
  return s != NULL && s->adopted;
}
