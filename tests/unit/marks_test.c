/* Proves device snapshots: they cover only their device (non-blocking streams included), release each stream to its mark transitively, leave later entries held, skip streams destroyed since, discard releases nothing, and hold their own references. */
#include "tests/unit/check.h"

static void test_snapshot_covers_device(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep kb1, kb2, kn1, kt1, late_b, late_n;
  ldg_stream *b = new_stream(l, 0, false);
  ldg_stream *n = new_stream(l, 0, true);
  ldg_stream *t = new_stream(l, 1, false); /* other device */
  ldg_stream *e = new_stream(l, 0, false); /* nothing enqueued */
  put_vec(b, &kb1, &log, 1, 1);
  put_vec(b, &kb2, &log, 2, 2);
  put_vec(n, &kn1, &log, 3, 3);
  put_vec(t, &kt1, &log, 4, 4);

  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK(m != NULL);
  CHECK_EQ(ldg_marks_count(m), 3); /* b, n, e */
  put_vec(b, &late_b, &log, 5, 5); /* after the snapshot */
  put_vec(n, &late_n, &log, 6, 6);
  CHECK_NONE_RELEASED(&log);

  CHECK_OK(ldg_release_marks(m));
  CHECK_EQ(kb1.releases, 1);
  CHECK_EQ(kb2.releases, 1);
  CHECK_BEFORE(&log, 1, 2);
  CHECK_EQ(kn1.releases, 1);
  CHECK_EQ(kt1.releases, 0);
  CHECK_EQ(late_b.releases, 0);
  CHECK_EQ(late_n.releases, 0);
  CHECK_EQ(log.total, 3);
  CHECK_EQ(ldg_pending_count(b), 1);
  CHECK_EQ(ldg_pending_count(n), 1);
  CHECK_EQ(ldg_pending_count(t), 1);
  CHECK(ldg_holds_vector(l, 4));
  CHECK(ldg_holds_vector(l, 5));
  CHECK(!ldg_holds_vector(l, 3));

  /* other device; a device without streams */
  CHECK_OK(ldg_device_marks(l, 1, &m));
  CHECK_EQ(ldg_marks_count(m), 1);
  CHECK_OK(ldg_release_marks(m));
  CHECK_EQ(kt1.releases, 1);
  CHECK_EQ(late_b.releases, 0);
  CHECK_OK(ldg_device_marks(l, 9, &m));
  CHECK_EQ(ldg_marks_count(m), 0);
  CHECK_OK(ldg_release_marks(m));
  CHECK_EQ(log.total, 4);

  /* bad arguments */
  CHECK_RC(ldg_device_marks(NULL, 0, &m), LDG_EINVAL);
  CHECK_RC(ldg_device_marks(l, 0, NULL), LDG_EINVAL);
  CHECK_RC(ldg_device_marks(l, -1, &m), LDG_EINVAL);
  CHECK_RC(ldg_release_marks(NULL), LDG_EINVAL);
  ldg_marks_discard(NULL);
  CHECK_EQ(log.total, 4);

  ldg_stream_unref(b);
  ldg_stream_unref(n);
  ldg_stream_unref(t);
  ldg_stream_unref(e);
  ldg_ledger_destroy(l);
  CHECK_EQ(log.total, 6);
  PASS("a snapshot covers its device only and releases to its marks");
}

static void test_discard(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep k1, k2;
  ldg_stream *b = new_stream(l, 2, false);
  ldg_stream *n = new_stream(l, 2, true);
  put_vec(b, &k1, &log, 1, 1);
  put_vec(n, &k2, &log, 2, 2);
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 2, &m));
  CHECK_EQ(ldg_marks_count(m), 2);
  ldg_marks_discard(m);
  CHECK_NONE_RELEASED(&log);
  CHECK_EQ(ldg_pending_count(b), 1);
  CHECK_EQ(ldg_pending_count(n), 1);
  /* the snapshot's references are gone: the caller's unref is the last one
   * and destroys the stream at once */
  ldg_stream_unref(n);
  CHECK_EQ(k2.releases, 1);
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream_unref(b);
  CHECK_EQ(k1.releases, 1);
  ldg_ledger_destroy(l);
  PASS("marks_discard releases nothing and drops its references");
}

/* Streams destroyed after the snapshot are skipped; a stream whose caller
 * dropped its reference stays alive through the snapshot's reference. */
static void test_destroyed_since_and_references(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep kd, kd_late, ku1, kgone;
  ldg_stream *d = new_stream(l, 0, false);
  ldg_stream *u = new_stream(l, 0, true);
  ldg_stream *gone = new_stream(l, 0, false);
  put_vec(d, &kd, &log, 1, 1);
  put_vec(u, &ku1, &log, 2, 2);
  put_vec(gone, &kgone, &log, 3, 3);
  CHECK_OK(ldg_stream_destroy(gone)); /* before the snapshot: not in it */
  CHECK_EQ(kgone.releases, 1);

  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 2);

  put_vec(d, &kd_late, &log, 4, 4);
  CHECK_OK(ldg_stream_destroy(d));
  CHECK_EQ(kd.releases, 1);
  CHECK_EQ(kd_late.releases, 1);
  ldg_stream_unref(d); /* the snapshot still holds it */

  ldg_stream_unref(u); /* caller's only reference; snapshot's remains */
  CHECK_EQ(ku1.releases, 0);
  CHECK(ldg_holds_vector(l, 2));
  CHECK(ldg_has_nonblocking(l));
  CHECK_EQ(log.total, 3);

  CHECK_OK(ldg_release_marks(m)); /* d skipped; u released to its mark */
  CHECK_EQ(ku1.releases, 1);
  CHECK_EQ(log.total, 4);
  CHECK(!ldg_holds_vector(l, 2));
  ldg_stream_unref(gone);
  ldg_ledger_destroy(l);
  CHECK_EQ(log.total, 4);
  PASS("streams destroyed after the snapshot are skipped");
}

/* release_marks is transitive: a device-0 stream that waited on a device-1
 * stream releases it up to the waited mark. */
static void test_transitive(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep ka1, ka2, kb;
  ldg_stream *a = new_stream(l, 1, true);
  ldg_stream *b = new_stream(l, 0, false);
  put_vec(a, &ka1, &log, 1, 1);
  wait_on(b, a);
  put_vec(a, &ka2, &log, 2, 2);
  put_vec(b, &kb, &log, 3, 3);
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 1);
  CHECK_OK(ldg_release_marks(m));
  CHECK_EQ(kb.releases, 1);
  CHECK_EQ(ka1.releases, 1);
  CHECK_EQ(ka2.releases, 0);
  CHECK_EQ(ldg_pending_count(a), 1);
  CHECK(ldg_holds_vector(l, 2));
  CHECK_OK(ldg_stream_destroy(a));
  CHECK_EQ(ka2.releases, 1);
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_ledger_destroy(l);
  PASS("release_marks releases transitively through waits");
}

/* A device with many streams (past any initial snapshot capacity). */
static void test_many_streams(void) {
  enum { NS = 150 };
  ldg_ledger *l = new_ledger();
  static ldg_stream *s[NS];
  static rec_keep k[NS];
  rec_log log;
  rec_log_init(&log);
  for (int i = 0; i < NS; i++) {
    s[i] = new_stream(l, i % 3 == 0 ? 0 : 1, i & 1);
    put_vec(s[i], &k[i], &log, i, (uint64_t)i + 1);
  }
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 1, &m));
  CHECK_EQ(ldg_marks_count(m), NS - NS / 3);
  CHECK_OK(ldg_release_marks(m));
  for (int i = 0; i < NS; i++) CHECK_EQ(k[i].releases, i % 3 == 0 ? 0 : 1);
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), NS / 3);
  ldg_marks_discard(m);
  for (int i = 0; i < NS; i++) CHECK_EQ(k[i].releases, i % 3 == 0 ? 0 : 1);
  for (int i = 0; i < NS; i++) ldg_stream_unref(s[i]); /* last: destroys */
  for (int i = 0; i < NS; i++) CHECK_EQ(k[i].releases, 1);
  ldg_ledger_destroy(l);
  PASS("snapshots of a device with many streams");
}

int main(void) {
  test_snapshot_covers_device();
  test_discard();
  test_destroyed_since_and_references();
  test_transitive();
  test_many_streams();
  return 0;
}
