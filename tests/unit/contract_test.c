/* Checks ledger.h's CONCURRENCY table row by row, on one thread: every call whose row says "runs callbacks: keeps" runs them on the calling thread, during the call, and each keep re-enters the ledger on the same stream (enqueue and release to a new mark there, a query) — or, where the caller's handle is gone (a last unref, a discarded snapshot), on another stream; every call whose row says "no" runs none (the keeps pending meanwhile fail the test if they run); ldg_enqueue and ldg_add_wait run keeps only when overtaken (//tests/torture:interleave_test forces that, with keeps that re-enter both streams). The "lock taken: none" rows are checked with a parked mutex holder in //tests/torture:interleave_test. */
#include <pthread.h>

#include "tests/unit/check.h"

/* The call under test: keeps must run inside it, on this thread. */
static const char *g_call;
static bool g_in_call;
static pthread_t g_caller;

/* A keep that fails if the table says the call running it runs none. */
typedef struct sentinel {
  int runs;
  bool allowed;
} sentinel;

static void sentinel_release(void *ctx) {
  sentinel *s = ctx;
  if (!s->allowed) {
    fprintf(stderr, "%s ran a keep; its row says it runs no callbacks\n",
            g_call ? g_call : "a call");
    exit(1);
  }
  s->runs++;
}

/* A keep that re-enters the ledger: on `self` (when the handle is still the
 * caller's) or on `other`. */
typedef struct reenter {
  ldg_stream *self;  /* NULL: the handle may be gone, use other only */
  ldg_stream *other;
  bool self_destroyed; /* self is being destroyed: calls are refused */
  int runs;
  long inner;        /* keeps enqueued by this one, released by it */
} reenter;

static void count_inner(void *ctx) { (*(long *)ctx)++; }

static void reenter_release(void *ctx) {
  reenter *r = ctx;
  if (!g_in_call || !pthread_equal(pthread_self(), g_caller)) {
    fprintf(stderr, "a keep of %s ran outside the call or thread\n", g_call);
    exit(1);
  }
  r->runs++;
  ldg_keep inner = {count_inner, &r->inner};
  if (r->self != NULL && !r->self_destroyed) {
    CHECK_OK(ldg_enqueue(r->self, inner, NULL, 0, NULL, 0, NULL));
    CHECK_GE(ldg_pending_count(r->self), 1);
    CHECK_OK(ldg_release(r->self, ldg_mark(r->self)));
  } else if (r->self != NULL) {
    CHECK_EQ(ldg_stream_check_live(r->self), LDG_EDESTROYED);
    CHECK_EQ(ldg_enqueue(r->self, inner, NULL, 0, NULL, 0, NULL),
             LDG_EDESTROYED);
    CHECK_EQ(ldg_release(r->self, ldg_mark(r->self)), LDG_EDESTROYED);
    inner.release(inner.ctx); /* refused: still ours */
  }
  if (r->other != NULL) {
    CHECK_OK(ldg_enqueue(r->other, inner, NULL, 0, NULL, 0, NULL));
    CHECK_OK(ldg_release(r->other, ldg_mark(r->other)));
  }
}

static ldg_keep reenter_keep(reenter *r) {
  return (ldg_keep){reenter_release, r};
}

#define CALL(name, expr)    \
  do {                      \
    g_call = (name);        \
    g_caller = pthread_self(); \
    g_in_call = true;       \
    expr;                   \
    g_in_call = false;      \
  } while (0)

/* Rows with "keeps": release, release_all, release_marks, settle,
 * stream_destroy and ledger_destroy — the keep re-enters the same stream. */
static void rows_that_run_keeps_on_own_stream(void) {
  const char *names[] = {"ldg_release", "ldg_release_all",
                         "ldg_release_marks", "ldg_settle_vector",
                         "ldg_stream_destroy", "ldg_ledger_destroy"};
  for (int row = 0; row < 6; row++) {
    ldg_ledger *l = new_ledger();
    ldg_stream *s = new_stream(l, 0, true); /* non-blocking: settle finds it */
    ldg_stream *t = new_stream(l, 0, false);
    reenter r = {s, t, row >= 4, 0, 0};
    uint64_t vec = 9;
    CHECK_OK(ldg_enqueue(s, reenter_keep(&r), &vec, 1, NULL, 0, NULL));
    ldg_marks *m = NULL;
    switch (row) {
      case 0:
        CALL(names[row], CHECK_OK(ldg_release(s, ldg_mark(s))));
        break;
      case 1:
        CALL(names[row], CHECK_OK(ldg_release_all(s)));
        break;
      case 2:
        CHECK_OK(ldg_device_marks(l, 0, &m));
        CALL(names[row], CHECK_OK(ldg_release_marks(m)));
        break;
      case 3:
        CALL(names[row], CHECK_OK(ldg_settle_vector(l, vec)));
        break;
      case 4:
        CALL(names[row], CHECK_OK(ldg_stream_destroy(s)));
        break;
      case 5:
        r.other = NULL; /* nothing else may run on a ledger being destroyed */
        ldg_stream_unref(t);
        t = NULL;
        CALL(names[row], ldg_ledger_destroy(l));
        l = NULL;
        break;
    }
    CHECK_EQ(r.runs, 1);
    CHECK_EQ(r.inner, 1 + (r.other != NULL ? 1 : 0));
    if (l != NULL) {
      CHECK_EQ(ldg_pending_count(t), 0);
      ldg_stream_unref(s);
      ldg_stream_unref(t);
      ldg_ledger_destroy(l);
    } else {
      ldg_stream_unref(s);
    }
    fprintf(stderr, "ok - row %s: its keep re-entered its own stream\n",
            names[row]);
  }
}

/* Rows with "keeps (e)": a last ldg_stream_unref and a ldg_marks_discard
 * that drops a last reference destroy the stream; the keep re-enters
 * another stream (the caller's handle is gone). And ldg_release firing a
 * wait that holds a stream's last reference. */
static void rows_that_run_keeps_dropping_last_reference(void) {
  for (int row = 0; row < 3; row++) {
    ldg_ledger *l = new_ledger();
    ldg_stream *s = new_stream(l, 0, false), *t = new_stream(l, 1, false);
    ldg_stream *b = new_stream(l, 2, false);
    reenter r = {NULL, t, false, 0, 0};
    CHECK_OK(ldg_enqueue(s, reenter_keep(&r), NULL, 0, NULL, 0, NULL));
    const char *name = NULL;
    if (row == 0) {
      name = "a last ldg_stream_unref";
      CALL(name, ldg_stream_unref(s));
    } else if (row == 1) {
      name = "ldg_marks_discard holding the last reference";
      ldg_marks *m;
      CHECK_OK(ldg_device_marks(l, 0, &m));
      CHECK_EQ(ldg_marks_count(m), 1);
      ldg_stream_unref(s); /* the snapshot holds the last one now */
      CALL(name, ldg_marks_discard(m));
    } else {
      name = "ldg_release firing a wait that holds the last reference";
      CHECK_OK(ldg_add_wait(b, s, ldg_mark(s), NULL));
      ldg_stream_unref(s);
      CALL(name, CHECK_OK(ldg_release(b, ldg_mark(b))));
    }
    CHECK_EQ(r.runs, 1);
    CHECK_EQ(r.inner, 1);
    ldg_stream_unref(t);
    ldg_stream_unref(b);
    ldg_quiesce();
    ldg_ledger_trim(l);
    ldg_quiesce();
    CHECK_EQ(ldg_ledger_bytes(l), 0); /* s was freed: destroyed, unlinked */
    ldg_ledger_destroy(l);
    fprintf(stderr, "ok - row %s: its keep re-entered another stream\n", name);
  }
}

/* Rows with "no": none of these runs a keep, while keeps are pending on
 * every stream of the ledger (they fail the test if run). */
static void rows_that_run_no_callbacks(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *a = new_stream(l, 0, true), *b = new_stream(l, 0, false);
  sentinel sa = {0, false}, sb = {0, false}, sc = {0, false};
  uint64_t vec = 5;
  ldg_range rg = {0x5000, 8};
  g_call = "ldg_enqueue (not overtaken)";
  CHECK_OK(ldg_enqueue(a, (ldg_keep){sentinel_release, &sa}, &vec, 1, &rg, 1,
                       NULL));
  CHECK_OK(ldg_enqueue(b, (ldg_keep){sentinel_release, &sb}, NULL, 0, NULL, 0,
                       NULL));
  g_call = "ldg_mark";
  CHECK_EQ(ldg_mark(a), 1);
  g_call = "ldg_add_wait (not overtaken)";
  CHECK_OK(ldg_add_wait(b, a, ldg_mark(a), NULL));
  CHECK_OK(ldg_add_wait(a, b, ldg_mark(b), NULL));
  g_call = "the queries";
  CHECK_EQ(ldg_pending_count(a), 1);
  CHECK(ldg_holds_vector(l, vec));
  CHECK(ldg_holds_host_range(l, 0x5004, 1));
  CHECK(ldg_has_nonblocking(l));
  ldg_stream *out[1];
  CHECK_EQ(ldg_nonblocking_holding(l, vec, out, 1), 1);
  ldg_stream_unref(out[0]); /* not the last: a is the caller's */
  g_call = "ldg_device_marks";
  ldg_marks *m;
  CHECK_OK(ldg_device_marks(l, 0, &m));
  CHECK_EQ(ldg_marks_count(m), 2);
  g_call = "ldg_stream_create";
  ldg_stream *c = new_stream(l, 0, false);
  CHECK_OK(ldg_enqueue(c, (ldg_keep){sentinel_release, &sc}, NULL, 0, NULL, 0,
                       NULL));
  g_call = "ldg_marks_discard (no last reference)";
  ldg_marks_discard(m);
  g_call = "ldg_stream_unref (not the last)";
  ldg_stream_ref(c);
  ldg_stream_unref(c);
  g_call = "ldg_ledger_index_vectors (refused: streams exist)";
  CHECK_RC(ldg_ledger_index_vectors(l, 8), LDG_EBUSY);
  CHECK_EQ(sa.runs + sb.runs + sc.runs, 0);
  /* Now they may run. */
  sa.allowed = sb.allowed = sc.allowed = true;
  g_call = NULL;
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_stream_unref(c);
  ldg_ledger_destroy(l);
  CHECK_EQ(sa.runs, 1);
  CHECK_EQ(sb.runs, 1);
  CHECK_EQ(sc.runs, 1);
  PASS("rows with no callbacks ran none");
}

/* ldg_ledger_index_vectors' row (may block: the registry mutex, briefly;
 * runs no callbacks), and the queries' rows with the index on: a keep
 * pending on an indexed ledger never runs from them. */
static void index_rows_run_no_callbacks(void) {
  ldg_ledger *l = new_ledger();
  g_call = "ldg_ledger_index_vectors";
  CHECK_OK(ldg_ledger_index_vectors(l, 16));
  ldg_stream *a = new_stream(l, 0, true);
  sentinel sa = {0, false};
  uint64_t vec = 9;
  CHECK_OK(ldg_enqueue(a, (ldg_keep){sentinel_release, &sa}, &vec, 1, NULL, 0,
                       NULL));
  g_call = "the queries, vector index on";
  CHECK(ldg_holds_vector(l, vec));
  CHECK(!ldg_holds_vector(l, vec + 1));
  CHECK_EQ(ldg_vector_holders(l, vec + 1, NULL, 0), 0);
  CHECK_EQ(ldg_nonblocking_holding(l, vec + 1, NULL, 0), 0);
  CHECK_OK(ldg_settle_vector(l, vec + 1)); /* holds nothing: no drain */
  CHECK_EQ(sa.runs, 0);
  sa.allowed = true;
  g_call = NULL;
  ldg_stream_unref(a);
  ldg_ledger_destroy(l);
  CHECK_EQ(sa.runs, 1);
  PASS("index rows ran no callbacks");
}

int main(void) {
  rows_that_run_keeps_on_own_stream();
  rows_that_run_keeps_dropping_last_reference();
  rows_that_run_no_callbacks();
  index_rows_run_no_callbacks();
  PASS("ledger.h's table, row by row");
  return 0;
}
