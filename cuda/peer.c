/*
 * Several devices: peer access and copies between devices' buffers
 * (sl_cuda.h, "Several devices"; issue 13).
 *
 * WHY THE COPIES ARE SAFE
 *   Both paths issue through the raw asynchronous calls (stream.c): issue,
 *   then enqueue, the engine's markers, the errors — unchanged. Each
 *   operation's hold names src, dst and (staged) the staging buffer with
 *   its bytes, so none of them can be freed, nor the staging bytes touched
 *   through slc_host_range_settle, before the ledger knows that operation
 *   complete. The staged path reuses one staging buffer for every piece:
 *   all pieces are on one stream, so piece k+1's copy into staging runs
 *   after piece k's copy out of it. The caller's keep rides on the last
 *   operation, which the stream completes last.
 *   Ordering against the work that produced src on another device is the
 *   caller's, as for every copy: an event recorded there and
 *   slc_stream_wait_event on s, which also makes s's completion release
 *   that producer (transitively).
 *
 * THE PEER FLAGS
 *   struct slc__device.peers_on, bit p: this device's context may access
 *   device p's memory. Set (fetch_or, release) only after
 *   cuCtxEnablePeerAccess succeeded or said it already was; read with
 *   acquire by slc_device_peer_access and the copy's choice of path, so a
 *   thread that sees the bit issues its direct copy after the enable. A
 *   thread that does not see it yet stages: slower, never wrong. Bits are
 *   never cleared: peer access lasts as long as the primary contexts the
 *   layer retains, i.e. the slc_context.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda/internal.h"

static int slc__check_pair(const slc_context *c, int device, int peer,
                           const char *call) {
  if (c == NULL) return slc__fail(LDG_EINVAL, call, "context is NULL");
  if (device < 0 || device >= c->n_devices || peer < 0 ||
      peer >= c->n_devices)
    return slc__fail(LDG_EINVAL, call,
                     "devices %d and %d: out of range (%d devices)", device,
                     peer, c->n_devices);
  return LDG_OK;
}

int slc_device_can_access_peer(slc_context *c, int device, int peer,
                               bool *can) {
  static const char fn[] = "slc_device_can_access_peer";
  int rc = slc__check_pair(c, device, peer, fn);
  if (rc != LDG_OK) return rc;
  if (can == NULL) return slc__fail(LDG_EINVAL, fn, "can is NULL");
  int v = 0;
  CUresult r = c->drv.pfn_cuDeviceCanAccessPeer(&v, c->devices[device].dev,
                                                c->devices[peer].dev);
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuDeviceCanAccessPeer", r, "devices %d and %d",
                        device, peer);
  *can = v != 0;
  return LDG_OK;
}

int slc_device_enable_peer_access(slc_context *c, int device, int peer) {
  static const char fn[] = "slc_device_enable_peer_access";
  int rc = slc__check_pair(c, device, peer, fn);
  if (rc != LDG_OK) return rc;
  if (device == peer)
    return slc__fail(LDG_EINVAL, fn, "device %d is its own peer", device);
  /* Retains peer's primary context (its handle is what the driver takes),
   * then makes device's current: the enable is from the current one. */
  rc = slc__make_current(c, peer, fn);
  if (rc == LDG_OK) rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  CUresult r = c->drv.pfn_cuCtxEnablePeerAccess(c->devices[peer].ctx, 0);
  if (r == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) r = CUDA_SUCCESS;
  if (r != CUDA_SUCCESS)
    return slc__fail_cu(c, "cuCtxEnablePeerAccess", r,
                        "device %d to device %d's memory", device, peer);
  /* Release: pairs with the acquire in slc_device_peer_access; the enable
   * happened-before any direct copy chosen by seeing this bit. */
  if (peer < 64)
    (void)slc__fetch_or_acq_rel(&c->devices[device].peers_on,
                                UINT64_C(1) << peer);
  return LDG_OK;
}

bool slc_device_peer_access(const slc_context *c, int device, int peer) {
  if (c == NULL || device < 0 || device >= c->n_devices || peer < 0 ||
      peer >= c->n_devices || peer >= 64)
    return false;
  /* Acquire: pairs with the fetch_or in slc_device_enable_peer_access. */
  uint64_t on = slc__load_acquire(&c->devices[device].peers_on);
  return (on >> peer & 1u) != 0;
}

static int slc__check_dev_buf(const slc_stream *s, const slc_buffer *b,
                              size_t off, size_t bytes, const char *what,
                              const char *call) {
  if (b == NULL) return slc__fail(LDG_EINVAL, call, "%s buffer is NULL", what);
  if (b->c != s->c)
    return slc__fail(LDG_EINVAL, call, "%s buffer is of another context",
                     what);
  if (b->host)
    return slc__fail(LDG_EINVAL, call,
                     "%s buffer is pinned host memory: use slc_buf_copy_async",
                     what);
  if (off > b->bytes || bytes > b->bytes - off)
    return slc__fail(LDG_EINVAL, call,
                     "%s range [%zu, +%zu) outside its %zu bytes", what, off,
                     bytes, b->bytes);
  return LDG_OK;
}

/* One operation of a peer copy: the raw copy of `kind` with a hold naming
 * the buffers (and the staging bytes used). */
enum slc__piece { SLC__D2D, SLC__D2H, SLC__H2D };

static int slc__piece(slc_stream *s, enum slc__piece kind, slc_buffer *dst,
                      size_t doff, slc_buffer *src, size_t soff, size_t n,
                      slc_buffer *staging, const slc_hold *hold,
                      const char *call) {
  slc_buffer *bufs[3] = {dst, src, staging};
  size_t offs[3] = {doff, soff, 0}, lens[3] = {n, n, n};
  struct slc__xhold x;
  int rc = slc__extend_hold(&x, hold, bufs, offs, lens,
                            staging != NULL ? 3 : 2, call);
  if (rc != LDG_OK) return rc;
  if (kind == SLC__D2D)
    rc = slc_copy_dtod_async(s, dst->dptr + doff, src->dptr + soff, n, &x.h);
  else if (kind == SLC__D2H)
    rc = slc_copy_dtoh_async(s, staging->hptr, src->dptr + soff, n, &x.h);
  else
    rc = slc_copy_htod_async(s, dst->dptr + doff, staging->hptr, n, &x.h);
  free(x.owned);
  return rc;
}

int slc_buf_copy_peer_async(slc_stream *s, slc_buffer *dst, size_t dst_offset,
                            slc_buffer *src, size_t src_offset, size_t bytes,
                            slc_buffer *staging, const slc_hold *hold,
                            bool *staged) {
  static const char fn[] = "slc_buf_copy_peer_async";
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  int rc = slc__check_dev_buf(s, dst, dst_offset, bytes, "destination", fn);
  if (rc == LDG_OK)
    rc = slc__check_dev_buf(s, src, src_offset, bytes, "source", fn);
  if (rc != LDG_OK) return rc;
  int other;
  if (dst->device == s->device)
    other = src->device;
  else if (src->device == s->device)
    other = dst->device;
  else
    return slc__fail(LDG_EINVAL, fn,
                     "the stream is on device %d, the buffers on devices %d "
                     "and %d",
                     s->device, dst->device, src->device);
  if (other == s->device || slc_device_peer_access(s->c, s->device, other)) {
    rc = slc__piece(s, SLC__D2D, dst, dst_offset, src, src_offset, bytes,
                    NULL, hold, fn);
    if (rc == LDG_OK && staged != NULL) *staged = false;
    return rc;
  }
  if (staging == NULL || staging->c != s->c || !staging->host ||
      staging->bytes == 0)
    return slc__fail(LDG_EINVAL, fn,
                     "no peer access from device %d to device %d: a pinned "
                     "staging buffer of this context is needed (staging %s)",
                     s->device, other,
                     staging == NULL         ? "is NULL"
                     : staging->c != s->c    ? "is of another context"
                     : !staging->host        ? "is device memory"
                                             : "is empty");
  /* The caller's hold is checked before anything is issued. */
  if (hold != NULL && ((hold->n_vec != 0 && hold->vec_ids == NULL) ||
                       (hold->n_ranges != 0 && hold->ranges == NULL)))
    return slc__fail(LDG_EINVAL, fn, "hold: NULL array with a count");
  size_t done = 0;
  do {
    size_t n = bytes - done < staging->bytes ? bytes - done : staging->bytes;
    const bool last = done + n == bytes;
    rc = slc__piece(s, SLC__D2H, dst, dst_offset + done, src,
                    src_offset + done, n, staging, NULL, fn);
    if (rc == LDG_OK)
      rc = slc__piece(s, SLC__H2D, dst, dst_offset + done, src,
                      src_offset + done, n, staging, last ? hold : NULL, fn);
    if (rc != LDG_OK) return rc;
    done += n;
  } while (done < bytes);
  if (staged != NULL) *staged = true;
  return LDG_OK;
}
