/* Proves mark/release: release(upto) releases exactly seq <= upto in seq order, at-or-below the released mark is a no-op, past the mark is LDG_EINVAL, release_all, later entries survive, pending_count counts operations not waits. */
#include "tests/unit/check.h"

#define N 10

static void test_release_upto(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *t = new_stream(l, 0, false);
  rec_log log, tlog;
  rec_log_init(&log);
  rec_log_init(&tlog);
  rec_keep k[N + 1], kt;
  CHECK_EQ(ldg_mark(s), 0);
  CHECK_OK(ldg_release(s, 0)); /* nothing enqueued: 0 is the mark */
  CHECK_RC(ldg_release(s, 1), LDG_EINVAL);
  for (int i = 1; i <= N; i++) CHECK_EQ(put_vec(s, &k[i], &log, i, 100 + i), i);
  put_vec(t, &kt, &tlog, 1, 104); /* another stream naming a released id */
  CHECK_EQ(ldg_pending_count(s), N);

  CHECK_OK(ldg_release(s, 4));
  CHECK_ORDER(&log, 1, 2, 3, 4);
  CHECK_EQ(ldg_pending_count(s), N - 4);
  for (int i = 1; i <= N; i++) CHECK_EQ(k[i].releases, i <= 4);
  CHECK(!ldg_holds_vector(l, 101));
  CHECK(!ldg_holds_vector(l, 103));
  CHECK(ldg_holds_vector(l, 104)); /* still held by t */
  CHECK(ldg_holds_vector(l, 105));
  CHECK(ldg_holds_vector(l, 110));
  CHECK_EQ(ldg_mark(s), N); /* a release does not move the mark */

  /* at or below the released mark: nothing */
  CHECK_OK(ldg_release(s, 4));
  CHECK_OK(ldg_release(s, 2));
  CHECK_OK(ldg_release(s, 0));
  CHECK_ORDER(&log, 1, 2, 3, 4);
  CHECK_EQ(ldg_pending_count(s), N - 4);

  /* past the mark: EINVAL, nothing released */
  CHECK_RC(ldg_release(s, N + 1), LDG_EINVAL);
  CHECK_RC(ldg_release(s, UINT64_MAX), LDG_EINVAL);
  CHECK_ORDER(&log, 1, 2, 3, 4);
  CHECK_EQ(ldg_pending_count(s), N - 4);

  CHECK_OK(ldg_release(s, 5));
  CHECK_ORDER(&log, 1, 2, 3, 4, 5);
  CHECK_OK(ldg_release(s, 8));
  CHECK_ORDER(&log, 1, 2, 3, 4, 5, 6, 7, 8);
  CHECK(ldg_holds_vector(l, 109));
  CHECK_OK(ldg_release_all(s));
  CHECK_ORDER(&log, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
  CHECK_EQ(ldg_pending_count(s), 0);
  CHECK(!ldg_holds_vector(l, 110));
  CHECK_OK(ldg_release_all(s)); /* nothing left: no-op */
  CHECK_OK(ldg_release(s, N));
  CHECK_EQ(log.total, N);
  CHECK_EQ(tlog.total, 0); /* t untouched by releases of s */
  CHECK_EQ(ldg_pending_count(t), 1);

  CHECK_RC(ldg_release(NULL, 0), LDG_EINVAL);
  CHECK_RC(ldg_release_all(NULL), LDG_EINVAL);
  ldg_stream_unref(s);
  ldg_stream_unref(t);
  ldg_ledger_destroy(l);
  CHECK_EQ(tlog.total, 1);
  PASS("release(upto) releases exactly seq <= upto, in order");
}

/* Mark, enqueue more, release to the old mark: the later entries stay. */
static void test_later_entries_survive(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 1, true);
  rec_log log;
  rec_log_init(&log);
  rec_keep k[6];
  put_vec(s, &k[1], &log, 1, 1);
  put_vec(s, &k[2], &log, 2, 2);
  ldg_seq m = ldg_mark(s);
  put_vec(s, &k[3], &log, 3, 3);
  put_vec(s, &k[4], &log, 4, 4);
  CHECK_OK(ldg_release(s, m));
  CHECK_ORDER(&log, 1, 2);
  CHECK_EQ(ldg_pending_count(s), 2);
  CHECK(ldg_holds_vector(l, 3));
  CHECK_EQ(ldg_nonblocking_holding(l, 4, NULL, 0), 1);
  m = ldg_mark(s);
  put_vec(s, &k[5], &log, 5, 5);
  CHECK_OK(ldg_release(s, m));
  CHECK_ORDER(&log, 1, 2, 3, 4);
  CHECK_EQ(ldg_pending_count(s), 1);
  CHECK(ldg_holds_vector(l, 5));
  CHECK_OK(ldg_stream_destroy(s));
  CHECK_ORDER(&log, 1, 2, 3, 4, 5);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("entries enqueued after a mark survive the release to that mark");
}

/* Waits take seqs but are not counted as pending operations. */
static void test_pending_counts_ops_not_waits(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *a = new_stream(l, 0, false);
  ldg_stream *b = new_stream(l, 0, false);
  long n = 0;
  CHECK_OK(ldg_enqueue(a, count_keep(&n), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_enqueue(b, count_keep(&n), NULL, 0, NULL, 0, NULL));
  wait_on(b, a);
  wait_on(b, a);
  CHECK_OK(ldg_enqueue(b, count_keep(&n), NULL, 0, NULL, 0, NULL));
  CHECK_EQ(ldg_mark(b), 4);
  CHECK_EQ(ldg_pending_count(b), 2);
  CHECK_OK(ldg_release(b, 2)); /* entry 1 and the first wait */
  CHECK_EQ(ldg_pending_count(b), 1);
  CHECK_EQ(ldg_pending_count(a), 0);
  CHECK_EQ(n, 2);
  CHECK_OK(ldg_release(b, 3)); /* only a wait: no operation leaves */
  CHECK_EQ(ldg_pending_count(b), 1);
  CHECK_EQ(n, 2);
  CHECK_OK(ldg_release(b, 4));
  CHECK_EQ(ldg_pending_count(b), 0);
  CHECK_EQ(n, 3);
  /* a stream with only waits pending has pending_count 0 */
  ldg_stream *c = new_stream(l, 0, false);
  wait_on(c, a);
  CHECK_EQ(ldg_mark(c), 1);
  CHECK_EQ(ldg_pending_count(c), 0);
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_stream_unref(c);
  ldg_ledger_destroy(l);
  PASS("pending_count counts operations, not waits");
}

int main(void) {
  test_release_upto();
  test_later_entries_survive();
  test_pending_counts_ops_not_waits();
  return 0;
}
