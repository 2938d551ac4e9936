/* Proves the stream rules: ids from 1 never reused, accessors, references, destroy (releases, fires waits, then refuses everything with LDG_EDESTROYED), check_live, has_nonblocking. */
#include "tests/unit/check.h"

#define MAX_IDS 64

static void note_new_id(uint64_t *ids, size_t *n, uint64_t id) {
  CHECK_NE(id, 0);
  for (size_t i = 0; i < *n; i++) CHECK_NE(ids[i], id);
  CHECK_LT(*n, MAX_IDS);
  ids[(*n)++] = id;
}

/* The first stream of a ledger has id 1; no id comes back, whether the
 * previous holder was destroyed, unreferenced, or both. */
static void test_ids(void) {
  for (int round = 0; round < 2; round++) { /* each new ledger starts at 1 */
    ldg_ledger *l = new_ledger();
    uint64_t ids[MAX_IDS];
    size_t n = 0;
    ldg_stream *a = new_stream(l, 0, false);
    CHECK_EQ(ldg_stream_id(a), 1);
    note_new_id(ids, &n, ldg_stream_id(a));
    ldg_stream *b = new_stream(l, 1, true);
    note_new_id(ids, &n, ldg_stream_id(b));

    /* destroy + create: new id */
    CHECK_OK(ldg_stream_destroy(b));
    ldg_stream *c = new_stream(l, 1, true);
    note_new_id(ids, &n, ldg_stream_id(c));
    ldg_stream_unref(b); /* handle gone too */
    ldg_stream *d = new_stream(l, 0, false);
    note_new_id(ids, &n, ldg_stream_id(d));

    /* last unref of a live stream + create: new id */
    ldg_stream_unref(a);
    ldg_quiesce(); /* let its memory be reused if the allocator wants to */
    for (int i = 0; i < 20; i++) {
      ldg_stream *e = new_stream(l, i % 3, i & 1);
      note_new_id(ids, &n, ldg_stream_id(e));
      if (i & 2) CHECK_OK(ldg_stream_destroy(e));
      ldg_stream_unref(e);
      ldg_quiesce();
    }
    ldg_stream_unref(c);
    ldg_stream_unref(d);
    ldg_ledger_destroy(l);
  }
  PASS("ids start at 1 and are never reused");
}

static void test_accessors_and_create_errors(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(l, 3, LDG_STREAM_NONBLOCKING, noop_drain, NULL,
                             &s));
  CHECK_EQ(ldg_stream_device(s), 3);
  CHECK(ldg_stream_is_nonblocking(s));
  ldg_stream *t = new_stream(l, 0, false);
  CHECK_EQ(ldg_stream_device(t), 0);
  CHECK(!ldg_stream_is_nonblocking(t));
  /* a blocking stream may have a drain too */
  ldg_stream *u = NULL;
  CHECK_OK(ldg_stream_create(l, 7, 0, noop_drain, NULL, &u));
  CHECK_EQ(ldg_stream_device(u), 7);
  CHECK(!ldg_stream_is_nonblocking(u));
  uint64_t sid = ldg_stream_id(s);

  /* accessors still answer on a destroyed stream */
  CHECK_OK(ldg_stream_destroy(s));
  CHECK_EQ(ldg_stream_id(s), sid);
  CHECK_EQ(ldg_stream_device(s), 3);
  CHECK(ldg_stream_is_nonblocking(s));

  /* bad arguments: refused, nothing created */
  ldg_stream *x = NULL;
  CHECK_RC(ldg_stream_create(NULL, 0, 0, NULL, NULL, &x), LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, NULL), LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, -1, 0, NULL, NULL, &x), LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, 0, 4u, noop_drain, NULL, &x), LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING | 0x80u, noop_drain,
                             NULL, &x),
           LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, NULL, NULL, &x),
           LDG_EINVAL);
  CHECK(!ldg_has_nonblocking(l)); /* s destroyed; failed creates added none */
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 1); /* only t: failed creates registered none */
  ldg_marks_discard(m);

  /* NULL handles */
  CHECK_RC(ldg_stream_destroy(NULL), LDG_EINVAL);
  CHECK_RC(ldg_stream_check_live(NULL), LDG_EINVAL);
  ldg_stream_unref(NULL); /* ignored */

  ldg_stream_unref(s);
  ldg_stream_unref(t);
  ldg_stream_unref(u);
  ldg_ledger_destroy(l);
  ldg_ledger_destroy(NULL); /* ignored */
  PASS("accessors, create errors, NULL handles");
}

/* ref/unref keep the stream; the last unref of a never-destroyed stream
 * destroys it: its keeps are released in order and its waits fire. */
static void test_refcounts(void) {
  for (int nb = 0; nb < 2; nb++) {
    ldg_ledger *l = new_ledger();
    rec_log log;
    rec_log_init(&log);
    rec_keep k1, k2, k3, ka;
    ldg_stream *a = new_stream(l, 0, false);
    put_vec(a, &ka, &log, 100, 100);
    ldg_stream *s = new_stream(l, 0, nb);
    put_vec(s, &k1, &log, 1, 11);
    wait_on(s, a);
    put_vec(s, &k2, &log, 2, 12);

    ldg_stream_ref(s);
    ldg_stream_ref(s);
    ldg_stream_unref(s);
    ldg_stream_unref(s);
    CHECK_OK(ldg_stream_check_live(s));
    CHECK_NONE_RELEASED(&log);
    CHECK(ldg_holds_vector(l, 11));
    CHECK_EQ(ldg_has_nonblocking(l), nb);

    ldg_stream_ref(s); /* 2 references */
    ldg_stream_unref(s);
    put_vec(s, &k3, &log, 3, 13); /* still usable */
    CHECK_NONE_RELEASED(&log);
    CHECK_EQ(ldg_pending_count(s), 3);

    ldg_stream_unref(s); /* the last: destroys */
    /* s's keeps in seq order; the wait (seq 2) released a's entry */
    CHECK_EQ(k1.releases, 1);
    CHECK_EQ(k2.releases, 1);
    CHECK_EQ(k3.releases, 1);
    CHECK_EQ(ka.releases, 1);
    CHECK_EQ(log.total, 4);
    {
      int pos[4] = {-1, -1, -1, -1};
      for (size_t i = 0; i < log.n; i++)
        if (log.order[i] >= 1 && log.order[i] <= 3) pos[log.order[i]] = (int)i;
      CHECK(pos[1] < pos[2] && pos[2] < pos[3]);
    }
    CHECK(!ldg_holds_vector(l, 11));
    CHECK(!ldg_holds_vector(l, 13));
    CHECK(!ldg_holds_vector(l, 100));
    CHECK(!ldg_has_nonblocking(l));
    CHECK_EQ(ldg_pending_count(a), 0);
    ldg_marks *m = NULL;
    CHECK_OK(ldg_device_marks(l, 0, &m));
    CHECK_EQ(ldg_marks_count(m), 1); /* s left the registry */
    ldg_marks_discard(m);
    ldg_stream_unref(a);
    ldg_ledger_destroy(l);
  }
  PASS("ref/unref; last unref of a live stream destroys it");
}

/* destroy releases everything in seq order and fires waits; then every call
 * on the stream is refused with LDG_EDESTROYED and changes nothing. */
static void test_destroy(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep kb[5], ka1, ka2, late;
  ldg_stream *a = new_stream(l, 0, false);
  ldg_stream *b = new_stream(l, 0, true);
  put_vec(a, &ka1, &log, 100, 21);
  put_vec(b, &kb[0], &log, 1, 22);
  put_vec(b, &kb[1], &log, 2, 22);
  wait_on(b, a);
  put_vec(b, &kb[2], &log, 3, 23);
  put_vec(b, &kb[3], &log, 4, 24);
  put_vec(b, &kb[4], &log, 5, 0);
  put_vec(a, &ka2, &log, 200, 25); /* after the waited mark: stays */
  ldg_seq mb = ldg_mark(b);
  CHECK_EQ(mb, 6);
  uint64_t bid = ldg_stream_id(b);

  CHECK_OK(ldg_stream_check_live(b));
  CHECK_OK(ldg_stream_destroy(b));
  for (int i = 0; i < 5; i++) CHECK_EQ(kb[i].releases, 1);
  CHECK_EQ(ka1.releases, 1);
  CHECK_EQ(ka2.releases, 0);
  {
    int got[5], n = 0;
    for (size_t i = 0; i < log.n; i++)
      if (log.order[i] < 100) got[n++] = log.order[i];
    CHECK_EQ(n, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ(got[i], i + 1);
  }
  CHECK_EQ(log.total, 6);
  CHECK_EQ(ldg_pending_count(a), 1);
  CHECK(ldg_holds_vector(l, 25));
  CHECK(!ldg_holds_vector(l, 21));
  CHECK(!ldg_holds_vector(l, 22));
  CHECK(!ldg_holds_vector(l, 24));
  CHECK(!ldg_has_nonblocking(l));
  CHECK_EQ(ldg_nonblocking_holding(l, 22, NULL, 0), 0);

  /* everything later is refused and changes nothing */
  CHECK_RC(ldg_stream_check_live(b), LDG_EDESTROYED);
  uint64_t v = 22;
  ldg_range r = {0x1000, 16};
  ldg_seq seq = 12345;
  CHECK_RC(ldg_enqueue(b, rec_keep_of(&late, &log, 9), &v, 1, &r, 1, &seq),
           LDG_EDESTROYED);
  CHECK_EQ(late.releases, 0);
  CHECK_EQ(seq, 12345);
  CHECK_RC(ldg_enqueue(b, (ldg_keep){NULL, NULL}, NULL, 0, NULL, 0, NULL),
           LDG_EDESTROYED);
  CHECK(!ldg_holds_vector(l, 22));
  CHECK(!ldg_holds_host_range(l, 0x1000, 16));
  CHECK_RC(ldg_add_wait(b, a, ldg_mark(a), NULL), LDG_EDESTROYED);
  CHECK_RC(ldg_add_wait(b, a, 0, NULL), LDG_EDESTROYED);
  CHECK_RC(ldg_release(b, mb), LDG_EDESTROYED);
  CHECK_RC(ldg_release(b, 0), LDG_EDESTROYED);
  CHECK_RC(ldg_release_all(b), LDG_EDESTROYED);
  CHECK_RC(ldg_stream_destroy(b), LDG_EDESTROYED); /* second destroy */
  CHECK_RC(ldg_stream_check_live(b), LDG_EDESTROYED);
  CHECK_EQ(ldg_mark(b), mb); /* the last mark it had */
  CHECK_EQ(ldg_pending_count(b), 0);
  CHECK_EQ(ldg_stream_id(b), bid);
  CHECK_EQ(late.releases, 0);
  CHECK_EQ(log.total, 6);
  CHECK_EQ(ka2.releases, 0);
  ldg_marks *m = NULL;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 1); /* only a */
  ldg_marks_discard(m);

  /* a destroy also ends a stream whose keeps were all released already */
  CHECK_OK(ldg_release_all(a));
  CHECK_EQ(ka2.releases, 1);
  CHECK_OK(ldg_stream_destroy(a));
  CHECK_RC(ldg_stream_check_live(a), LDG_EDESTROYED);
  CHECK_EQ(log.total, 7);
  ldg_stream_unref(b);
  ldg_stream_unref(a);
  ldg_ledger_destroy(l);
  CHECK_EQ(late.releases, 0);
  PASS("destroy releases all, fires waits, then refuses with EDESTROYED");
}

static void test_has_nonblocking(void) {
  ldg_ledger *l = new_ledger();
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream *b = new_stream(l, 0, false);
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream *n1 = new_stream(l, 0, true);
  CHECK(ldg_has_nonblocking(l));
  ldg_stream *n2 = new_stream(l, 1, true);
  CHECK(ldg_has_nonblocking(l));
  CHECK_OK(ldg_stream_destroy(n1));
  CHECK(ldg_has_nonblocking(l));
  CHECK_RC(ldg_stream_destroy(n1), LDG_EDESTROYED); /* must not count twice */
  CHECK(ldg_has_nonblocking(l));
  ldg_stream_unref(n2); /* last reference, never destroyed */
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream *n3 = new_stream(l, 2, true);
  CHECK(ldg_has_nonblocking(l));
  CHECK_OK(ldg_stream_destroy(n3));
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream_unref(n3); /* after destroy: no change */
  ldg_stream_unref(n1);
  CHECK(!ldg_has_nonblocking(l));
  ldg_stream_unref(b);
  CHECK(!ldg_has_nonblocking(l));
  ldg_ledger_destroy(l);
  PASS("has_nonblocking follows create/destroy/unref");
}

int main(void) {
  test_ids();
  test_accessors_and_create_errors();
  test_refcounts();
  test_destroy();
  test_has_nonblocking();
  return 0;
}
