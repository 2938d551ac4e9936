/* Proves callbacks may re-enter the ledger: keeps that enqueue, release other streams, re-release or destroy or drop the last reference of their own stream, query, quiesce; drains that query and release. */
#include "tests/unit/check.h"

typedef struct env {
  ldg_ledger *l;
  ldg_stream *s, *t;
  rec_log *log;
  rec_keep *extra; /* a keep a hook enqueues */
  long counter;
  int rc;          /* what the hook's ledger call returned */
  bool b1, b2;     /* what the hook's queries answered */
  size_t z;
} env;

static void hook_enqueue_on_t(rec_keep *k) {
  env *e = k->arg;
  uint64_t v = 44;
  e->rc = ldg_enqueue(e->t, count_keep(&e->counter), &v, 1, NULL, 0, NULL);
}

static void hook_release_t(rec_keep *k) {
  env *e = k->arg;
  e->rc = ldg_release(e->t, ldg_mark(e->t));
}

static void hook_destroy_own(rec_keep *k) {
  env *e = k->arg;
  e->rc = ldg_stream_destroy(e->s);
}

static void hook_unref_own(rec_keep *k) {
  env *e = k->arg;
  ldg_stream_unref(e->s);
}

static void hook_release_own_all(rec_keep *k) {
  env *e = k->arg;
  e->rc = ldg_release(e->s, ldg_mark(e->s));
}

static void hook_enqueue_own_and_query(rec_keep *k) {
  env *e = k->arg;
  uint64_t v = 66;
  e->rc = ldg_enqueue(e->s, rec_keep_of(e->extra, e->log, 50), &v, 1, NULL, 0,
                      NULL);
  e->b1 = ldg_holds_vector(e->l, 66);
  e->b2 = ldg_holds_vector(e->l, 61); /* t's entry, untouched */
  e->z = ldg_nonblocking_holding(e->l, 61, NULL, 0);
  ldg_quiesce(); /* allowed: keeps run outside RCU read-side sections */
}

static env make_env(rec_log *log) {
  env e;
  memset(&e, 0, sizeof e);
  e.l = new_ledger();
  e.s = new_stream(e.l, 0, false);
  e.t = new_stream(e.l, 0, true);
  e.log = log;
  rec_log_init(log);
  return e;
}

static void test_keep_enqueues_and_releases_other(void) {
  rec_log log;
  env e = make_env(&log);
  rec_keep k1, k2, kt;
  put_vec(e.s, &k1, &log, 1, 1);
  k1.hook = hook_enqueue_on_t, k1.arg = &e;
  put_vec(e.t, &kt, &log, 10, 10);
  put_vec(e.s, &k2, &log, 2, 2);
  k2.hook = hook_release_t, k2.arg = &e;
  CHECK_OK(ldg_release(e.s, 2));
  CHECK_EQ(e.rc, LDG_OK);
  CHECK_EQ(ldg_mark(e.t), 2);   /* k1's enqueue landed on t as seq 2 */
  CHECK_EQ(kt.releases, 1);     /* k2 released t to its mark */
  CHECK_EQ(e.counter, 1);       /* including the entry k1 enqueued */
  CHECK_EQ(ldg_pending_count(e.t), 0);
  CHECK(!ldg_holds_vector(e.l, 44));
  CHECK_BEFORE(&log, 1, 2);
  ldg_stream_unref(e.s);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  PASS("a keep enqueues on, and releases, another stream");
}

static void test_keep_destroys_own(void) {
  rec_log log;
  env e = make_env(&log);
  rec_keep k1, k2, k3;
  put_vec(e.s, &k1, &log, 1, 1);
  k1.hook = hook_destroy_own, k1.arg = &e;
  put_vec(e.s, &k2, &log, 2, 2);
  put_vec(e.s, &k3, &log, 3, 3);
  e.rc = 12345;
  CHECK_OK(ldg_release(e.s, 1));
  CHECK_EQ(e.rc, LDG_OK);
  CHECK_ORDER(&log, 1, 2, 3);
  CHECK_RC(ldg_stream_check_live(e.s), LDG_EDESTROYED);
  CHECK(!ldg_holds_vector(e.l, 3));
  ldg_stream_unref(e.s);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  CHECK_EQ(log.total, 3);
  PASS("a keep destroys its own stream");
}

static void test_keep_unrefs_own(void) {
  rec_log log;
  /* from a release: the keep drops the caller's only reference */
  env e = make_env(&log);
  rec_keep k1, k2, k3;
  put_vec(e.s, &k1, &log, 1, 1);
  k1.hook = hook_unref_own, k1.arg = &e;
  put_vec(e.s, &k2, &log, 2, 2);
  put_vec(e.s, &k3, &log, 3, 3);
  CHECK_OK(ldg_release(e.s, 1));
  CHECK_ORDER(&log, 1, 2, 3); /* the last unref destroyed it */
  CHECK(!ldg_holds_vector(e.l, 3));
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);

  /* from a destroy: the keep drops the caller's only reference mid-destroy */
  e = make_env(&log);
  put_vec(e.s, &k1, &log, 1, 1);
  k1.hook = hook_unref_own, k1.arg = &e;
  put_vec(e.s, &k2, &log, 2, 2);
  CHECK_OK(ldg_stream_destroy(e.s));
  CHECK_ORDER(&log, 1, 2);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  CHECK_EQ(log.total, 2);
  PASS("a keep drops the last reference of its own stream");
}

static void hook_quiesce(rec_keep *k) {
  (void)k;
  ldg_quiesce(); /* lets a wrongly deferred free of the stream happen now */
}

/* The keep that drops the caller's last reference, inside a release that
 * spans several chunks (150 entries, 64 a chunk) and passes a wait: the
 * walk must hold its own reference until it is done with the stream (a
 * mutant whose borrowed walk took none was caught only by one-chunk
 * releases before; run under ASan, a later keep's ldg_quiesce makes the
 * early free happen before the walk comes back). */
static void test_keep_unrefs_own_in_long_release(void) {
  enum { N = 150, WAIT_AT = 80, A_N = 3 };
  rec_log log;
  env e = make_env(&log);
  static rec_keep k[N], ka[A_N];
  for (int i = 0; i < A_N; i++) put_vec(e.t, &ka[i], &log, 1001 + i, 9);
  for (int i = 1; i <= N; i++) {
    if (i == WAIT_AT) CHECK_OK(ldg_add_wait(e.s, e.t, ldg_mark(e.t), NULL));
    put_vec(e.s, &k[i - 1], &log, i, 1);
  }
  k[4].hook = hook_unref_own, k[4].arg = &e; /* the caller's only ref */
  k[69].hook = hook_quiesce;
  k[120].hook = hook_quiesce;
  CHECK_OK(ldg_release(e.s, ldg_mark(e.s)));
  /* In seq order, t's keeps where the wait was. */
  CHECK_EQ(log.n, N + A_N);
  for (int i = 0; i < WAIT_AT - 1; i++) CHECK_EQ(log.order[i], i + 1);
  for (int i = 0; i < A_N; i++) CHECK_EQ(log.order[WAIT_AT - 1 + i], 1001 + i);
  for (int i = WAIT_AT - 1; i < N; i++) CHECK_EQ(log.order[i + A_N], i + 1);
  CHECK(!ldg_holds_vector(e.l, 1));
  ldg_quiesce();
  CHECK_EQ(ldg_pending_count(e.t), 0);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  PASS("a keep drops the caller's last reference in a long release");
}

/* A keep releases its own stream again, from inside that stream's release:
 * every entry is still released exactly once, in order. */
static void test_keep_rereleases_own(void) {
  rec_log log;
  env e = make_env(&log);
  rec_keep k[5];
  for (int i = 1; i <= 4; i++) put_vec(e.s, &k[i], &log, i, (uint64_t)i);
  k[2].hook = hook_release_own_all, k[2].arg = &e;
  CHECK_OK(ldg_release(e.s, 2));
  CHECK_EQ(e.rc, LDG_OK);
  CHECK_ORDER(&log, 1, 2, 3, 4);
  CHECK_EQ(ldg_pending_count(e.s), 0);
  ldg_stream_unref(e.s);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  CHECK_EQ(log.total, 4);
  PASS("a keep releases its own stream from inside its release");
}

static void test_keep_enqueues_own_queries_quiesces(void) {
  rec_log log;
  env e = make_env(&log);
  rec_keep k1, k2, kt, extra;
  e.extra = &extra;
  put_vec(e.s, &k1, &log, 1, 60);
  k1.hook = hook_enqueue_own_and_query, k1.arg = &e;
  put_vec(e.s, &k2, &log, 2, 60);
  put_vec(e.t, &kt, &log, 3, 61);
  CHECK_OK(ldg_release(e.s, 2));
  CHECK_EQ(e.rc, LDG_OK);
  CHECK(e.b1);
  CHECK(e.b2);
  CHECK_EQ(e.z, 1);
  CHECK_ORDER(&log, 1, 2);
  CHECK_EQ(extra.releases, 0); /* seq 3 > 2: stays */
  CHECK_EQ(ldg_mark(e.s), 3);
  CHECK_EQ(ldg_pending_count(e.s), 1);
  CHECK(ldg_holds_vector(e.l, 66));
  CHECK_OK(ldg_release_all(e.s));
  CHECK_EQ(extra.releases, 1);
  ldg_stream_unref(e.s);
  ldg_stream_unref(e.t);
  ldg_ledger_destroy(e.l);
  CHECK_EQ(log.total, 4);
  PASS("a keep enqueues on its own stream, queries, and quiesces");
}

/* ---- drains ---------------------------------------------------------------- */

typedef struct qdrain {
  ldg_ledger *l;
  ldg_stream *self;
  int calls;
  bool held_vec, held_range, release_self;
  size_t holders, pending;
  int rc;
} qdrain;

static int query_drain(void *ctx) {
  qdrain *d = ctx;
  d->calls++;
  d->held_vec = ldg_holds_vector(d->l, 7);
  d->held_range = ldg_holds_host_range(d->l, 0x3000, 1);
  ldg_stream *out[2] = {NULL, NULL};
  d->holders = ldg_nonblocking_holding(d->l, 7, out, 2);
  for (int i = 0; i < 2; i++) ldg_stream_unref(out[i]);
  d->pending = ldg_pending_count(d->self);
  if (d->release_self) d->rc = ldg_release(d->self, ldg_mark(d->self));
  ldg_quiesce();
  return 0;
}

static void test_drain_reenters(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep k1, k2, k3;
  qdrain d1 = {.l = l}, d2 = {.l = l, .release_self = true};
  ldg_stream *n1 = NULL, *n2 = NULL;
  CHECK_OK(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, query_drain, &d1,
                             &n1));
  CHECK_OK(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, query_drain, &d2,
                             &n2));
  d1.self = n1, d2.self = n2;
  ldg_range r = {0x3000, 16};
  uint64_t v = 7;
  CHECK_OK(ldg_enqueue(n1, rec_keep_of(&k1, &log, 1), &v, 1, &r, 1, NULL));
  put_vec(n1, &k2, &log, 2, 8);
  put_vec(n2, &k3, &log, 3, 7);
  CHECK_OK(ldg_settle_vector(l, 7));
  CHECK_EQ(d1.calls, 1);
  CHECK_EQ(d2.calls, 1);
  CHECK(d1.held_vec); /* the drain runs before anything is released */
  CHECK(d1.held_range);
  CHECK_EQ(d1.pending, 2);
  CHECK_EQ(d2.pending, 1);
  CHECK_GE(d1.holders, 1);
  CHECK_EQ(d2.rc, LDG_OK);
  CHECK_EQ(k1.releases, 1);
  CHECK_EQ(k2.releases, 1);
  CHECK_EQ(k3.releases, 1); /* released once: by its drain, not again */
  CHECK(!ldg_holds_vector(l, 7));
  ldg_stream_unref(n1);
  ldg_stream_unref(n2);
  ldg_ledger_destroy(l);
  CHECK_EQ(log.total, 3);
  PASS("a drain queries and releases its own stream");
}

int main(void) {
  test_keep_enqueues_and_releases_other();
  test_keep_destroys_own();
  test_keep_unrefs_own();
  test_keep_unrefs_own_in_long_release();
  test_keep_rereleases_own();
  test_keep_enqueues_own_queries_quiesces();
  test_drain_reenters();
  return 0;
}
