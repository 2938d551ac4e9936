/*
 * Operations on layer buffers that hold their buffers by themselves
 * (sl_cuda.h, "Operations on layer buffers"; issue 9 item 3).
 *
 * The raw-pointer calls record exactly the hold the caller lists, so a
 * caller that leaves a buffer out can free it under a running copy. These
 * calls take slc_buffer handles and offsets, check the byte ranges against
 * the buffers, and record the operation with the caller's hold extended by
 * the id of every buffer named (and, for pinned host buffers, the byte range
 * used): slc_buffer_held is then true, slc_buffer_try_free refuses and
 * slc_buffer_free settles, until the operation is known complete. They
 * issue through the raw calls, so every rule of those (issue then enqueue,
 * errors, the engine's markers) holds unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda/internal.h"

/* Checks [off, off + bytes) inside b and, for a device buffer, b on the
 * stream's device. */
static int slc__check_buf(const slc_stream *s, const slc_buffer *b, size_t off,
                          size_t bytes, const char *what, const char *call) {
  if (b == NULL) return slc__fail(LDG_EINVAL, call, "%s buffer is NULL", what);
  if (b->c != s->c)
    return slc__fail(LDG_EINVAL, call, "%s buffer is of another context",
                     what);
  if (off > b->bytes || bytes > b->bytes - off)
    return slc__fail(LDG_EINVAL, call,
                     "%s range [%zu, +%zu) outside its %zu bytes", what, off,
                     bytes, b->bytes);
  if (!b->host && b->device != s->device)
    return slc__fail(LDG_EINVAL, call,
                     "%s buffer is on device %d, the stream on device %d",
                     what, b->device, s->device);
  return LDG_OK;
}

int slc__extend_hold(struct slc__xhold *x, const slc_hold *hold,
                     slc_buffer *const *bufs, const size_t *offs,
                     const size_t *lens, size_t n, const char *call) {
  memset(x, 0, sizeof(*x));
  slc_hold base = {{NULL, NULL}, NULL, 0, NULL, 0};
  if (hold != NULL) base = *hold;
  if ((base.n_vec != 0 && base.vec_ids == NULL) ||
      (base.n_ranges != 0 && base.ranges == NULL))
    return slc__fail(LDG_EINVAL, call, "hold: NULL array with a count");
  size_t n_hosts = 0;
  for (size_t i = 0; i < n; i++) n_hosts += bufs[i]->host && lens[i] > 0;
  const size_t max = (SIZE_MAX / sizeof(ldg_range)) / 4;
  if (base.n_vec > max - n || base.n_ranges > max - n_hosts)
    return slc__fail(LDG_EINVAL, call, "hold: too many ids or ranges");
  size_t n_ids = base.n_vec + n, n_ranges = base.n_ranges + n_hosts;
  uint64_t *ids = x->ids_inline;
  ldg_range *ranges = x->ranges_inline;
  if (n_ids > SLC__INLINE_IDS || n_ranges > SLC__INLINE_IDS) {
    x->owned = malloc(n_ids * sizeof(uint64_t) + n_ranges * sizeof(ldg_range));
    if (x->owned == NULL) return slc__fail(LDG_ENOMEM, call, "hold");
    ranges = x->owned;
    ids = (uint64_t *)(ranges + n_ranges);
  }
  if (base.n_vec) memcpy(ids, base.vec_ids, base.n_vec * sizeof(uint64_t));
  if (base.n_ranges)
    memcpy(ranges, base.ranges, base.n_ranges * sizeof(ldg_range));
  size_t r = base.n_ranges;
  for (size_t i = 0; i < n; i++) {
    ids[base.n_vec + i] = bufs[i]->id;
    if (bufs[i]->host && lens[i] > 0)
      ranges[r++] = (ldg_range){(uintptr_t)bufs[i]->hptr + offs[i], lens[i]};
  }
  x->h = (slc_hold){base.keep, ids, n_ids, ranges, n_ranges};
  return LDG_OK;
}

int slc_buf_copy_async(slc_stream *s, slc_buffer *dst, size_t dst_offset,
                       slc_buffer *src, size_t src_offset, size_t bytes,
                       const slc_hold *hold) {
  static const char fn[] = "slc_buf_copy_async";
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  int rc = slc__check_buf(s, dst, dst_offset, bytes, "destination", fn);
  if (rc == LDG_OK) rc = slc__check_buf(s, src, src_offset, bytes, "source", fn);
  if (rc != LDG_OK) return rc;
  if (dst->host && src->host)
    return slc__fail(LDG_EINVAL, fn,
                     "host to host: copy on the host (after settling)");
  slc_buffer *bufs[] = {dst, src};
  size_t offs[] = {dst_offset, src_offset}, lens[] = {bytes, bytes};
  struct slc__xhold x;
  rc = slc__extend_hold(&x, hold, bufs, offs, lens, dst == src ? 1 : 2, fn);
  if (rc != LDG_OK) return rc;
  if (src->host)
    rc = slc_copy_htod_async(s, dst->dptr + dst_offset,
                             (const char *)src->hptr + src_offset, bytes, &x.h);
  else if (dst->host)
    rc = slc_copy_dtoh_async(s, (char *)dst->hptr + dst_offset,
                             src->dptr + src_offset, bytes, &x.h);
  else
    rc = slc_copy_dtod_async(s, dst->dptr + dst_offset, src->dptr + src_offset,
                             bytes, &x.h);
  free(x.owned);
  return rc;
}

int slc_buf_memset_async(slc_stream *s, slc_buffer *dst, size_t offset,
                         unsigned char value, size_t bytes,
                         const slc_hold *hold) {
  static const char fn[] = "slc_buf_memset_async";
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  int rc = slc__check_buf(s, dst, offset, bytes, "destination", fn);
  if (rc != LDG_OK) return rc;
  if (dst->host)
    return slc__fail(LDG_EINVAL, fn, "a host buffer: memset it on the host");
  struct slc__xhold x;
  rc = slc__extend_hold(&x, hold, &dst, &offset, &bytes, 1, fn);
  if (rc != LDG_OK) return rc;
  rc = slc_memset_d8_async(s, dst->dptr + offset, value, bytes, &x.h);
  free(x.owned);
  return rc;
}

int slc_buf_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
                   unsigned shared_bytes, void **params,
                   slc_buffer *const *buffers, size_t n_buffers,
                   const slc_hold *hold) {
  static const char fn[] = "slc_buf_launch";
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  if (n_buffers != 0 && buffers == NULL)
    return slc__fail(LDG_EINVAL, fn, "buffers NULL with a count");
  if (n_buffers > 1024)
    return slc__fail(LDG_EINVAL, fn, "%zu buffers (at most 1024)", n_buffers);
  size_t *offs = NULL, *lens = NULL;
  if (n_buffers > 0) {
    offs = calloc(2 * n_buffers, sizeof(size_t));
    if (offs == NULL) return slc__fail(LDG_ENOMEM, fn, "buffers");
    lens = offs + n_buffers;
  }
  int rc = LDG_OK;
  for (size_t i = 0; i < n_buffers && rc == LDG_OK; i++) {
    rc = slc__check_buf(s, buffers[i], 0, 0, "a kernel's", fn);
    if (rc == LDG_OK) lens[i] = buffers[i]->bytes; /* the whole buffer */
  }
  struct slc__xhold x = {.owned = NULL};
  if (rc == LDG_OK)
    rc = slc__extend_hold(&x, hold, buffers, offs, lens, n_buffers, fn);
  if (rc == LDG_OK)
    rc = slc_launch(s, f, grid, block, shared_bytes, params, &x.h);
  free(x.owned);
  free(offs);
  return rc;
}
