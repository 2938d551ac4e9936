/*
 * Events owned by the layer, and stream waits on them.
 *
 * An event remembers the (stream, mark) of its last record. The mutex e->mu
 * keeps that pair and the driver event's own last record in step (see
 * sl_cuda.h THREADING): it is held across "mark, cuEventRecord, store" and
 * across "cuStreamWaitEvent, read the pair" — driver calls that only
 * enqueue — and never across a blocking call (cuEventSynchronize) or while
 * keeps may run: ldg_release, slc_stream_unref, and ldg_add_wait (a release
 * of the waiting stream that overtakes the wait makes ldg_add_wait fire it
 * and run keeps) all run unlocked. The wait records the pair it read with
 * the driver's wait, under a stream reference taken with it: a record
 * landing after the unlock changes neither. A sync or query reads the pair
 * and a generation under the mutex, calls the driver unlocked, and releases
 * only if the generation did not move meanwhile.
 */
#include <stdlib.h>

#include "cuda/internal.h"

int slc_event_create(slc_context *c, int device, slc_event **out) {
  static const char fn[] = "slc_event_create";
  if (out == NULL) return slc__fail(LDG_EINVAL, fn, "out is NULL");
  int rc = slc__make_current(c, device, fn);
  if (rc != LDG_OK) return rc;
  slc_event *e = calloc(1, sizeof(*e));
  if (e == NULL) return slc__fail(LDG_ENOMEM, fn, NULL);
  CUresult r = c->drv.pfn_cuEventCreate(&e->cu, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) {
    free(e);
    return slc__fail_cu(c, "cuEventCreate", r, "device %d", device);
  }
  e->c = c;
  e->device = device;
  pthread_mutex_init(&e->mu, NULL);
  slc__fetch_add_acq_rel(&c->live_handles, 1);
  *out = e;
  return LDG_OK;
}

int slc_event_record(slc_event *e, slc_stream *s) {
  static const char fn[] = "slc_event_record";
  if (e == NULL || s == NULL) return slc__fail(LDG_EINVAL, fn, "NULL argument");
  if (s->c != e->c)
    return slc__fail(LDG_EINVAL, fn, "stream and event of different contexts");
  if (s->device != e->device)
    return slc__fail(LDG_EINVAL, fn, "stream on device %d, event on device %d",
                     s->device, e->device);
  pthread_mutex_lock(&e->mu);
  int rc = slc__stream_enter(s, fn);
  if (rc != LDG_OK) {
    pthread_mutex_unlock(&e->mu);
    return rc;
  }
  rc = slc__make_current(e->c, e->device, fn);
  /* Mark, then record: every entry up to m was issued before the record. */
  ldg_seq m = ldg_mark(s->ls);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = e->c->drv.pfn_cuEventRecord(e->cu, s->cu);
  slc__stream_exit(s);
  slc_stream *old = NULL;
  if (rc == LDG_OK && r == CUDA_SUCCESS) {
    /* The event holds a reference to its stream; re-recording on the same
     * stream (the common case) keeps the one it has. Taking one never
     * destroys anything, so it may happen under the mutex. */
    if (e->stream != s) {
      slc_stream_ref(s);
      old = e->stream;
      e->stream = s;
    }
    e->mark = m;
    e->generation++;
  }
  pthread_mutex_unlock(&e->mu);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(e->c, "cuEventRecord", r,
                        "on stream %llu; the previous record stands",
                        (unsigned long long)ldg_stream_id(s->ls));
  }
  /* Outside the mutex: a last reference destroys, and keeps may run. */
  slc_stream_unref(old);
  return LDG_OK;
}

/* Reads the last record; *s gets a reference of its own (or NULL). */
static void slc__event_snapshot(slc_event *e, slc_stream **s, ldg_seq *m,
                                uint64_t *gen) {
  pthread_mutex_lock(&e->mu);
  *s = e->stream;
  *m = e->mark;
  *gen = e->generation;
  if (*s != NULL) slc_stream_ref(*s);
  pthread_mutex_unlock(&e->mu);
}

/* The driver reported the event complete: release the recorded stream to
 * its mark, unless a record came in after the snapshot (then the driver may
 * have waited for that one instead; release nothing). Drops the snapshot's
 * reference. */
static int slc__event_complete(slc_event *e, slc_stream *s, ldg_seq m,
                               uint64_t gen) {
  if (s == NULL) return LDG_OK; /* never recorded: nothing to release */
  pthread_mutex_lock(&e->mu);
  const bool same = e->generation == gen;
  pthread_mutex_unlock(&e->mu);
  int rc = LDG_OK;
  if (same) {
    /* c read first: a keep may destroy e (and free s's handle). */
    slc_context *c = e->c;
    struct slc__keeps_frame kf;
    slc__keeps_begin(&kf);
    rc = ldg_release(s->ls, m);
    slc__keeps_end(c, &kf, SLC_CAUSE_EVENT);
    if (rc == LDG_EDESTROYED) rc = LDG_OK; /* its destroy released all */
    if (rc != LDG_OK) rc = slc__fail(rc, "ldg_release", NULL);
  }
  slc_stream_unref(s);
  return rc;
}

int slc_event_synchronize(slc_event *e) {
  static const char fn[] = "slc_event_synchronize";
  if (e == NULL) return slc__fail(LDG_EINVAL, fn, "event is NULL");
  slc_stream *s;
  ldg_seq m;
  uint64_t gen;
  slc__event_snapshot(e, &s, &m, &gen);
  int rc = slc__make_current(e->c, e->device, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = e->c->drv.pfn_cuEventSynchronize(e->cu);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    slc_stream_unref(s); /* a failed sync releases nothing */
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(e->c, "cuEventSynchronize", r, "nothing released");
  }
  return slc__event_complete(e, s, m, gen);
}

int slc_event_query(slc_event *e, bool *complete) {
  static const char fn[] = "slc_event_query";
  if (e == NULL || complete == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  slc_stream *s;
  ldg_seq m;
  uint64_t gen;
  slc__event_snapshot(e, &s, &m, &gen);
  int rc = slc__make_current(e->c, e->device, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = e->c->drv.pfn_cuEventQuery(e->cu);
  if (rc == LDG_OK && r == CUDA_ERROR_NOT_READY) {
    slc_stream_unref(s);
    *complete = false;
    return LDG_OK;
  }
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    slc_stream_unref(s);
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(e->c, "cuEventQuery", r, "nothing released");
  }
  *complete = true;
  return slc__event_complete(e, s, m, gen);
}

int slc_stream_wait_event(slc_stream *b, slc_event *e) {
  static const char fn[] = "slc_stream_wait_event";
  if (b == NULL || e == NULL) return slc__fail(LDG_EINVAL, fn, "NULL argument");
  if (b->c != e->c)
    return slc__fail(LDG_EINVAL, fn, "stream and event of different contexts");
  pthread_mutex_lock(&e->mu);
  int rc = slc__stream_enter(b, fn);
  if (rc != LDG_OK) {
    pthread_mutex_unlock(&e->mu);
    return rc;
  }
  rc = slc__make_current(b->c, b->device, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = b->c->drv.pfn_cuStreamWaitEvent(b->cu, e->cu, 0);
  slc__stream_exit(b);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    pthread_mutex_unlock(&e->mu);
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(b->c, "cuStreamWaitEvent", r,
                        "stream %llu; nothing recorded",
                        (unsigned long long)ldg_stream_id(b->ls));
  }
  /* The pair read here is the record the driver's wait refers to (the
   * mutex keeps records out until now); the reference keeps a's ledger
   * stream alive past the unlock. */
  slc_stream *a = e->stream;
  ldg_seq m = e->mark;
  const bool waits = a != NULL && m != 0;
  if (waits) slc_stream_ref(a);
  pthread_mutex_unlock(&e->mu);
  if (!waits) return LDG_OK; /* never recorded, or recorded on nothing */
  /* Issue, then enqueue: the wait is recorded once the driver has it.
   * Unlocked: ldg_add_wait may run keeps. */
  /* c read first: a keep may drop b's last reference. */
  slc_context *c = b->c;
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  rc = ldg_add_wait(b->ls, a->ls, m, NULL);
  if (rc == LDG_EDESTROYED) {
    /* b was destroyed after the wait was issued: its destroy synchronised
     * b past the wait, so a has completed up to m. */
    rc = ldg_release(a->ls, m);
    if (rc == LDG_EDESTROYED) rc = LDG_OK;
  }
  slc__keeps_end(c, &kf, SLC_CAUSE_EVENT);
  slc_stream_unref(a);
  if (rc == LDG_ENOMEM)
    return slc__fail(rc, "ldg_add_wait",
                     "the device-side wait was issued; only the transitive "
                     "release through it is lost (conservative)");
  if (rc != LDG_OK) return slc__fail(rc, "ldg_add_wait", NULL);
  return LDG_OK;
}

int slc_event_destroy(slc_event *e) {
  if (e == NULL) return LDG_OK;
  slc_context *c = e->c;
  int rc = slc__make_current(c, e->device, "slc_event_destroy");
  if (rc != LDG_OK) return rc;
  CUresult r = c->drv.pfn_cuEventDestroy(e->cu);
  if (r != CUDA_SUCCESS) return slc__fail_cu(c, "cuEventDestroy", r, NULL);
  slc_stream_unref(e->stream);
  pthread_mutex_destroy(&e->mu);
  free(e);
  slc__fetch_sub_acq_rel(&c->live_handles, 1);
  return LDG_OK;
}

bool slc_event_recorded(slc_event *e, uint64_t *stream_id, ldg_seq *mark) {
  pthread_mutex_lock(&e->mu);
  const bool rec = e->stream != NULL;
  if (rec && stream_id != NULL) *stream_id = ldg_stream_id(e->stream->ls);
  if (rec && mark != NULL) *mark = e->mark;
  pthread_mutex_unlock(&e->mu);
  return rec;
}
