/*
 * Events owned by the layer, and stream waits on them.
 *
 * An event remembers the (stream, mark) of its last record. Its lock
 * (e->lock) keeps that pair and the driver event's own last record in step
 * (see sl_cuda.h THREADING): it is held across "mark, cuEventRecord, store"
 * and across "cuStreamWaitEvent, read the pair" — driver calls that only
 * enqueue — and never across a blocking call (cuEventSynchronize) or while
 * keeps may run: ldg_release, slc_stream_unref, and ldg_add_wait (a release
 * of the waiting stream that overtakes the wait makes ldg_add_wait fire it
 * and run keeps) all run unlocked. The wait records the pair it read with
 * the driver's wait, under a stream reference taken with it: a record
 * landing after the unlock changes neither. A sync or query reads the pair
 * and a generation under the lock, calls the driver unlocked, and releases
 * only if the generation did not move meanwhile.
 *
 * THE LOCK
 *   One word: taken by a compare-and-swap 0 -> 1 (acquire), dropped by a
 *   store of 0 (release), which pairs with the next taker's acquire: what
 *   one holder wrote, the next one reads. A pthread mutex costs a second
 *   locked instruction (its unlock is an exchange), and a record on one
 *   thread pays for every locked instruction it makes (bench/RESULTS.md,
 *   "Issue 11, round 3"). A taker that finds it held yields, then sleeps
 *   50 us between tries (as a stream destroy waits for its gate): a holder
 *   is inside one enqueuing driver call or reads three fields, and never
 *   waits for anything while it holds the lock, so it always drops it.
 */
#include <stdlib.h>

#include "cuda/internal.h"

static void slc__event_lock(slc_event *e) {
  unsigned expected = 0;
  /* Acquire: pairs with the release store of the previous holder's unlock. */
  if (atomic_compare_exchange_strong_explicit(&e->lock, &expected, 1,
                                              memory_order_acquire,
                                              memory_order_relaxed))
    return;
  unsigned spins = 0;
  for (;;) {
    expected = 0;
    /* Relaxed read first: try the CAS only once the word looks free. */
    if (slc__load_relaxed(&e->lock) == 0 &&
        atomic_compare_exchange_weak_explicit(&e->lock, &expected, 1,
                                              memory_order_acquire,
                                              memory_order_relaxed))
      return;
    slc__backoff(&spins);
  }
}

static void slc__event_unlock(slc_event *e) {
  slc__store_release(&e->lock, 0); /* pairs with the next taker's acquire */
}

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
  atomic_init(&e->lock, 0);
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
  slc__event_lock(e);
  int rc = slc__stream_enter(s, fn);
  if (rc != LDG_OK) {
    slc__event_unlock(e);
    return rc;
  }
  rc = slc__current_for(s, fn);
  /* Mark, then record: every entry up to m was issued before the record. */
  ldg_seq m = ldg_mark(s->ls);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = e->c->hot.cuEventRecord(e->cu, s->cu);
  slc__stream_exit(s);
  slc_stream *old = NULL;
  if (rc == LDG_OK && r == CUDA_SUCCESS) {
    /* The event holds a reference to its stream; re-recording on the same
     * stream (the common case) keeps the one it has. Taking one never
     * destroys anything, so it may happen under the lock. */
    if (e->stream != s) {
      slc_stream_ref(s);
      old = e->stream;
      e->stream = s;
    }
    e->mark = m;
    e->generation++;
  }
  slc__event_unlock(e);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(e->c, "cuEventRecord", r,
                        "on stream %llu; the previous record stands",
                        (unsigned long long)ldg_stream_id(s->ls));
  }
  /* Outside the lock: a last reference destroys, and keeps may run. */
  if (old != NULL) slc_stream_unref(old);
  return LDG_OK;
}

/* Reads the last record; *s gets a reference of its own (or NULL). */
static void slc__event_snapshot(slc_event *e, slc_stream **s, ldg_seq *m,
                                uint64_t *gen) {
  slc__event_lock(e);
  *s = e->stream;
  *m = e->mark;
  *gen = e->generation;
  if (*s != NULL) slc_stream_ref(*s);
  slc__event_unlock(e);
}

/* The driver reported the event complete: release the recorded stream to
 * its mark, unless a record came in after the snapshot (then the driver may
 * have waited for that one instead; release nothing). Drops the snapshot's
 * reference. */
static int slc__event_complete(slc_event *e, slc_stream *s, ldg_seq m,
                               uint64_t gen) {
  if (s == NULL) return LDG_OK; /* never recorded: nothing to release */
  slc__event_lock(e);
  const bool same = e->generation == gen;
  slc__event_unlock(e);
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
  /* No context made current: the driver reaches the event through its
   * handle (sl_cuda.h THREADING). */
  CUresult r = e->c->drv.pfn_cuEventSynchronize(e->cu);
  if (r != CUDA_SUCCESS) {
    slc_stream_unref(s); /* a failed sync releases nothing */
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
  CUresult r = e->c->drv.pfn_cuEventQuery(e->cu); /* as in the sync */
  if (r == CUDA_ERROR_NOT_READY) {
    slc_stream_unref(s);
    *complete = false;
    return LDG_OK;
  }
  if (r != CUDA_SUCCESS) {
    slc_stream_unref(s);
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
  slc__event_lock(e);
  int rc = slc__stream_enter(b, fn);
  if (rc != LDG_OK) {
    slc__event_unlock(e);
    return rc;
  }
  rc = slc__current_for(b, fn);
  CUresult r = CUDA_SUCCESS;
  if (rc == LDG_OK) r = b->c->drv.pfn_cuStreamWaitEvent(b->cu, e->cu, 0);
  slc__stream_exit(b);
  if (rc != LDG_OK || r != CUDA_SUCCESS) {
    slc__event_unlock(e);
    if (rc != LDG_OK) return rc;
    return slc__fail_cu(b->c, "cuStreamWaitEvent", r,
                        "stream %llu; nothing recorded",
                        (unsigned long long)ldg_stream_id(b->ls));
  }
  /* The pair read here is the record the driver's wait refers to (the
   * lock keeps records out until now); the reference keeps a's ledger
   * stream alive past the unlock. */
  slc_stream *a = e->stream;
  ldg_seq m = e->mark;
  const bool waits = a != NULL && m != 0;
  if (waits) slc_stream_ref(a);
  slc__event_unlock(e);
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
  free(e);
  slc__fetch_sub_acq_rel(&c->live_handles, 1);
  return LDG_OK;
}

bool slc_event_recorded(slc_event *e, uint64_t *stream_id, ldg_seq *mark) {
  slc__event_lock(e);
  const bool rec = e->stream != NULL;
  if (rec && stream_id != NULL) *stream_id = ldg_stream_id(e->stream->ls);
  if (rec && mark != NULL) *mark = e->mark;
  slc__event_unlock(e);
  return rec;
}
