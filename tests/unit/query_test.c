/* Proves the queries: holds_vector (pending entries of live streams only), holds_host_range (half-open edges), nonblocking_holding (each stream once, one reference each, count beyond cap), settle_vector (drains only holders, releases to the mark read before the drain, failed drain reported). */
#include "tests/unit/check.h"

static void test_holds_vector(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *t = new_stream(l, 1, true);
  long n = 0;
  CHECK(!ldg_holds_vector(l, 5));
  uint64_t ids[] = {5, 6, 0, UINT64_MAX}; /* no id value is special */
  CHECK_OK(ldg_enqueue(s, count_keep(&n), ids, 4, NULL, 0, NULL));
  CHECK_OK(ldg_enqueue(t, count_keep(&n), ids, 1, NULL, 0, NULL));
  CHECK(ldg_holds_vector(l, 5));
  CHECK(ldg_holds_vector(l, 6));
  CHECK(ldg_holds_vector(l, 0));
  CHECK(ldg_holds_vector(l, UINT64_MAX));
  CHECK(!ldg_holds_vector(l, 7));
  CHECK(!ldg_holds_vector(l, UINT64_MAX - 1));
  CHECK_OK(ldg_release_all(s));
  CHECK(ldg_holds_vector(l, 5)); /* t still holds it */
  CHECK(!ldg_holds_vector(l, 6));
  CHECK(!ldg_holds_vector(l, 0));
  CHECK(!ldg_holds_vector(l, UINT64_MAX));
  CHECK_OK(ldg_stream_destroy(t)); /* destroyed streams hold nothing */
  CHECK(!ldg_holds_vector(l, 5));
  /* a second ledger does not see the first's entries */
  ldg_ledger *l2 = new_ledger();
  CHECK_OK(ldg_enqueue(s, count_keep(&n), ids, 1, NULL, 0, NULL));
  CHECK(ldg_holds_vector(l, 5));
  CHECK(!ldg_holds_vector(l2, 5));
  ldg_ledger_destroy(l2);
  ldg_stream_unref(s);
  ldg_stream_unref(t);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 3);
  PASS("holds_vector sees pending entries of live streams only");
}

static void test_holds_host_range(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  ldg_range r = {1000, 100}; /* [1000, 1100) */
  CHECK(!ldg_holds_host_range(l, 1000, 100));
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, &r, 1, NULL));
  CHECK(!ldg_holds_host_range(l, 900, 100));  /* adjacent before */
  CHECK(!ldg_holds_host_range(l, 1100, 10));  /* adjacent after */
  CHECK(!ldg_holds_host_range(l, 0, 1000));   /* ends exactly at start */
  CHECK(ldg_holds_host_range(l, 999, 2));     /* one byte: 1000 */
  CHECK(ldg_holds_host_range(l, 901, 100));   /* one byte: 1000 */
  CHECK(ldg_holds_host_range(l, 1099, 5));    /* one byte: 1099 */
  CHECK(ldg_holds_host_range(l, 1099, 1));
  CHECK(ldg_holds_host_range(l, 1000, 1));
  CHECK(ldg_holds_host_range(l, 1000, 100));  /* same */
  CHECK(ldg_holds_host_range(l, 500, 2000));  /* containing */
  CHECK(ldg_holds_host_range(l, 1010, 10));   /* contained */
  CHECK(!ldg_holds_host_range(l, 1050, 0));   /* zero-length probe */
  CHECK(!ldg_holds_host_range(l, 1000, 0));
  CHECK(!ldg_holds_host_range(l, 5000, 10));
  /* several ranges in one entry; a gap between them */
  ldg_range rs[2] = {{0x10000, 0x10}, {0x10020, 0x10}};
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, rs, 2, NULL));
  CHECK(ldg_holds_host_range(l, 0x1000F, 1));
  CHECK(!ldg_holds_host_range(l, 0x10010, 0x10)); /* the gap exactly */
  CHECK(ldg_holds_host_range(l, 0x10010, 0x11));
  CHECK(ldg_holds_host_range(l, 0x1002F, 1));
  CHECK(!ldg_holds_host_range(l, 0x10030, 1));
  CHECK_OK(ldg_release(s, 1));
  CHECK(!ldg_holds_host_range(l, 1000, 100)); /* released */
  CHECK(ldg_holds_host_range(l, 0x10000, 1));
  CHECK_OK(ldg_stream_destroy(s));
  CHECK(!ldg_holds_host_range(l, 0x10000, 1));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 2);
  PASS("holds_host_range: half-open overlap");
}

/* ---- nonblocking_holding ------------------------------------------------ */

typedef struct nb_setup {
  ldg_ledger *l;
  ldg_stream *n1, *n2, *n3, *b, *gone;
  rec_log log;
  rec_keep k[16];
} nb_setup;

static void nb_build(nb_setup *x) {
  memset(x, 0, sizeof *x);
  x->l = new_ledger();
  x->n1 = new_stream(x->l, 0, true);
  x->n2 = new_stream(x->l, 1, true);
  x->n3 = new_stream(x->l, 0, true);
  x->b = new_stream(x->l, 0, false);
  x->gone = new_stream(x->l, 0, true);
  uint64_t twice[] = {7, 9, 7};
  put_vec(x->n1, &x->k[0], &x->log, 1, 7);
  CHECK_OK(ldg_enqueue(x->n1, rec_keep_of(&x->k[1], &x->log, 2), twice, 3,
                       NULL, 0, NULL));
  put_vec(x->n1, &x->k[2], &x->log, 3, 7);
  put_vec(x->n2, &x->k[3], &x->log, 4, 7);
  put_vec(x->n3, &x->k[4], &x->log, 5, 7); /* released below */
  put_vec(x->n3, &x->k[5], &x->log, 6, 8);
  put_vec(x->b, &x->k[6], &x->log, 7, 7);  /* blocking */
  put_vec(x->gone, &x->k[7], &x->log, 8, 7);
  CHECK_OK(ldg_release(x->n3, 1));
  CHECK_OK(ldg_stream_destroy(x->gone));
  CHECK_EQ(x->log.total, 2);
}

/* The caller holds its own reference to s plus the one a query gave: the first
 * unref leaves s live, the second is the last and destroys it. */
static void check_one_ref_each(ldg_stream *s, rec_keep *pending_keep) {
  CHECK_EQ(pending_keep->releases, 0);
  ldg_stream_unref(s); /* the caller's own reference */
  CHECK_EQ(pending_keep->releases, 0); /* the query's reference keeps it */
  CHECK_OK(ldg_stream_check_live(s));
  ldg_stream_unref(s); /* the query's: the last */
  CHECK_EQ(pending_keep->releases, 1);
}

static void test_nonblocking_holding(void) {
  nb_setup x;
  nb_build(&x);
  ldg_stream *out[4] = {NULL, NULL, NULL, NULL};
  CHECK_EQ(ldg_nonblocking_holding(x.l, 7, out, 4), 2);
  CHECK(out[2] == NULL && out[3] == NULL);
  CHECK((out[0] == x.n1 && out[1] == x.n2) || (out[0] == x.n2 && out[1] == x.n1));
  CHECK_EQ(ldg_nonblocking_holding(x.l, 8, NULL, 0), 1);
  CHECK_EQ(ldg_nonblocking_holding(x.l, 9, NULL, 0), 1);
  CHECK_EQ(ldg_nonblocking_holding(x.l, 10, out + 2, 2), 0);
  CHECK(out[2] == NULL);
  /* each returned stream got exactly one reference */
  check_one_ref_each(x.n1, &x.k[2]);
  check_one_ref_each(x.n2, &x.k[3]);
  CHECK_EQ(ldg_nonblocking_holding(x.l, 7, NULL, 0), 0);
  CHECK_EQ(x.k[6].releases, 0); /* blocking b still holds 7 */
  CHECK(ldg_holds_vector(x.l, 7));
  ldg_stream_unref(x.n3);
  ldg_stream_unref(x.b);
  ldg_stream_unref(x.gone);
  ldg_ledger_destroy(x.l);
  CHECK_EQ(x.log.total, 8);

  /* more holders than cap: returns 2, writes one, references only that one */
  nb_build(&x);
  out[0] = out[1] = NULL;
  CHECK_EQ(ldg_nonblocking_holding(x.l, 7, out, 1), 2);
  CHECK(out[0] == x.n1 || out[0] == x.n2);
  CHECK(out[1] == NULL);
  ldg_stream *other = out[0] == x.n1 ? x.n2 : x.n1;
  rec_keep *other_last = other == x.n1 ? &x.k[2] : &x.k[3];
  ldg_stream_unref(other); /* no reference was taken: this is the last */
  CHECK_EQ(other_last->releases, 1);
  check_one_ref_each(out[0], out[0] == x.n1 ? &x.k[2] : &x.k[3]);
  /* cap 0: counts only, no references */
  CHECK_EQ(ldg_nonblocking_holding(x.l, 8, NULL, 0), 1);
  ldg_stream_unref(x.n3);
  CHECK_EQ(x.k[5].releases, 1);
  ldg_stream_unref(x.b);
  ldg_stream_unref(x.gone);
  ldg_ledger_destroy(x.l);
  CHECK_EQ(x.log.total, 8);
  PASS("nonblocking_holding: each stream once, one reference each, cap");
}

/* ---- settle_vector ------------------------------------------------------ */

typedef struct drain_ctx {
  ldg_stream *s;
  int calls;
  int fail;              /* return this from the drain */
  rec_keep *enqueue_late; /* if set, enqueue it (naming 7) from the drain */
  rec_log *log;
  size_t pending_seen;
} drain_ctx;

static int test_drain(void *ctx) {
  drain_ctx *d = ctx;
  d->calls++;
  d->pending_seen = ldg_pending_count(d->s);
  if (d->enqueue_late) {
    uint64_t v = 7;
    CHECK_OK(ldg_enqueue(d->s, rec_keep_of(d->enqueue_late, d->log, 99), &v,
                         1, NULL, 0, NULL));
    d->enqueue_late = NULL;
  }
  return d->fail;
}

static ldg_stream *drained_stream(ldg_ledger *l, int dev, unsigned flags,
                                  drain_ctx *d) {
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(l, dev, flags, test_drain, d, &s));
  d->s = s;
  return s;
}

static void test_settle(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep k[8], late;
  drain_ctx d1 = {0}, d2 = {0}, d3 = {0}, db = {0}, dg = {0};
  ldg_stream *n1 = drained_stream(l, 0, LDG_STREAM_NONBLOCKING, &d1);
  ldg_stream *n2 = drained_stream(l, 1, LDG_STREAM_NONBLOCKING, &d2);
  ldg_stream *n3 = drained_stream(l, 0, LDG_STREAM_NONBLOCKING, &d3);
  ldg_stream *b = drained_stream(l, 0, 0, &db);
  ldg_stream *g = drained_stream(l, 0, LDG_STREAM_NONBLOCKING, &dg);
  put_vec(n1, &k[0], &log, 1, 7);
  put_vec(n1, &k[1], &log, 2, 9);
  put_vec(n2, &k[2], &log, 3, 7);
  put_vec(n3, &k[3], &log, 4, 8);
  put_vec(b, &k[4], &log, 5, 7);
  put_vec(g, &k[5], &log, 6, 7);
  CHECK_OK(ldg_stream_destroy(g)); /* destroyed: not drained */
  d1.enqueue_late = &late;
  d1.log = &log;

  CHECK_OK(ldg_settle_vector(l, 7));
  CHECK_EQ(d1.calls, 1);
  CHECK_EQ(d2.calls, 1);
  CHECK_EQ(d3.calls, 0); /* holds 8 only */
  CHECK_EQ(db.calls, 0); /* blocking */
  CHECK_EQ(dg.calls, 0); /* destroyed */
  CHECK_EQ(d1.pending_seen, 2); /* drained before releasing */
  CHECK_EQ(k[0].releases, 1);
  CHECK_EQ(k[1].releases, 1); /* everything up to the mark, not just id 7 */
  CHECK_BEFORE(&log, 1, 2);
  CHECK_EQ(k[2].releases, 1);
  CHECK_EQ(k[3].releases, 0);
  CHECK_EQ(k[4].releases, 0);
  CHECK_EQ(late.releases, 0); /* enqueued during the drain: after the mark */
  CHECK_EQ(ldg_pending_count(n1), 1);
  CHECK_EQ(ldg_mark(n1), 3);
  CHECK(ldg_holds_vector(l, 7));
  CHECK_EQ(ldg_nonblocking_holding(l, 7, NULL, 0), 1); /* n1 (late) */

  /* nobody non-blocking holds 8's neighbour 10: no drain, OK */
  CHECK_OK(ldg_settle_vector(l, 10));
  CHECK_EQ(d1.calls + d2.calls + d3.calls + db.calls, 2);
  CHECK_RC(ldg_settle_vector(NULL, 7), LDG_EINVAL);

  /* a failing drain releases nothing for its stream; the others settle */
  put_vec(n2, &k[6], &log, 7, 7);
  d1.fail = 1;
  CHECK_RC(ldg_settle_vector(l, 7), LDG_EDRAIN);
  CHECK_EQ(d1.calls, 2);
  CHECK_EQ(d2.calls, 2);
  CHECK_EQ(late.releases, 0);
  CHECK_EQ(ldg_pending_count(n1), 1);
  CHECK_EQ(k[6].releases, 1);
  CHECK_EQ(ldg_pending_count(n2), 0);
  d1.fail = 0;
  CHECK_OK(ldg_settle_vector(l, 7));
  CHECK_EQ(d1.calls, 3);
  CHECK_EQ(d2.calls, 2); /* n2 holds nothing now */
  CHECK_EQ(late.releases, 1);
  CHECK_EQ(k[4].releases, 0); /* blocking b is never settled */
  CHECK(ldg_holds_vector(l, 7));
  CHECK_EQ(ldg_nonblocking_holding(l, 7, NULL, 0), 0);

  ldg_stream_unref(n1);
  ldg_stream_unref(n2);
  ldg_stream_unref(n3);
  ldg_stream_unref(b);
  ldg_stream_unref(g);
  ldg_ledger_destroy(l);
  CHECK_EQ(log.total, 8); /* k[0..6] and late */
  PASS("settle_vector drains non-blocking holders and releases to the mark");
}

/* Many non-blocking holders (past any small fixed array): each is drained and
 * released exactly once, non-holders are not drained. */
static void test_settle_many(void) {
  enum { NS = 60 };
  ldg_ledger *l = new_ledger();
  static drain_ctx d[NS];
  static rec_keep k[NS];
  static ldg_stream *s[NS];
  rec_log log;
  rec_log_init(&log);
  memset(d, 0, sizeof d);
  for (int i = 0; i < NS; i++) {
    s[i] = drained_stream(l, i % 2, LDG_STREAM_NONBLOCKING, &d[i]);
    put_vec(s[i], &k[i], &log, i, i % 4 == 3 ? 8 : 7);
  }
  CHECK_EQ(ldg_nonblocking_holding(l, 7, NULL, 0), NS - NS / 4);
  CHECK_OK(ldg_settle_vector(l, 7));
  for (int i = 0; i < NS; i++) {
    CHECK_EQ(d[i].calls, i % 4 == 3 ? 0 : 1);
    CHECK_EQ(k[i].releases, i % 4 == 3 ? 0 : 1);
  }
  CHECK(!ldg_holds_vector(l, 7));
  for (int i = 0; i < NS; i++) ldg_stream_unref(s[i]); /* no leftover refs */
  CHECK_EQ(log.total, NS);
  ldg_ledger_destroy(l);
  PASS("settle_vector with many holders");
}

int main(void) {
  test_holds_vector();
  test_holds_host_range();
  test_nonblocking_holding();
  test_settle();
  test_settle_many();
  return 0;
}
