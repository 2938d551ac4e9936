/* ldg_stream_set_finalizer: the finalizer runs exactly once, when the last
 * reference goes (never at destroy while references remain), after every
 * keep of the stream and after the last drain; on the thread that dropped
 * it, whether an unref, a fired wait, a settle or ldg_ledger_destroy; and it
 * may call back into the ledger. */
#include <stdatomic.h>

#include "tests/unit/check.h"

typedef struct fin {
  int runs;
  int keeps_seen; /* keeps of the stream that had run when it ran */
  int *keeps;     /* the stream's keep counter */
  ldg_ledger *l;  /* when set, the finalizer creates and drops a stream */
  int rc;
} fin;

static void fin_run(void *ctx) {
  fin *f = ctx;
  f->runs++;
  f->keeps_seen = f->keeps != NULL ? *f->keeps : 0;
  if (f->l != NULL) { /* re-enters the ledger */
    ldg_stream *t = NULL;
    f->rc = ldg_stream_create(f->l, 0, 0, NULL, NULL, &t);
    if (f->rc == LDG_OK) {
      f->rc = ldg_enqueue(t, (ldg_keep){NULL, NULL}, NULL, 0, NULL, 0, NULL);
      ldg_stream_unref(t);
    }
  }
}

static void keep_count(void *ctx) { (*(int *)ctx)++; }

typedef struct drainer {
  fin *f;
  int calls;
  int after_finalizer; /* drains called once the finalizer had run */
  ldg_stream *drop;    /* the drain drops this reference (the last one) */
} drainer;

static int drain_fn(void *ctx) {
  drainer *d = ctx;
  d->calls++;
  if (d->f->runs != 0) d->after_finalizer++;
  if (d->drop != NULL) {
    ldg_stream *s = d->drop;
    d->drop = NULL;
    ldg_stream_unref(s);
    CHECK(d->f->runs == 0); /* the settle still holds a reference */
  }
  return 0;
}

int main(void) {
  ldg_ledger *l;
  CHECK(ldg_ledger_create(&l) == LDG_OK);
  CHECK(ldg_stream_set_finalizer(NULL, (ldg_keep){fin_run, NULL}) ==
        LDG_EINVAL);

  /* 1. Last unref of a never-destroyed stream: keeps first, then it. */
  {
    int keeps = 0;
    fin f = {0, 0, &keeps, NULL, 0};
    ldg_stream *s;
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &s) == LDG_OK);
    CHECK(ldg_stream_set_finalizer(s, (ldg_keep){fin_run, &f}) == LDG_OK);
    CHECK(ldg_enqueue(s, (ldg_keep){keep_count, &keeps}, NULL, 0, NULL, 0,
                      NULL) == LDG_OK);
    ldg_stream_ref(s);
    ldg_stream_unref(s);
    CHECK(f.runs == 0);
    ldg_stream_unref(s);
    CHECK(f.runs == 1 && f.keeps_seen == 1);
  }

  /* 2. Destroyed while another reference lives: runs at that unref. */
  {
    fin f = {0};
    ldg_stream *s;
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &s) == LDG_OK);
    CHECK(ldg_stream_set_finalizer(s, (ldg_keep){fin_run, &f}) == LDG_OK);
    ldg_stream_ref(s);
    CHECK(ldg_stream_destroy(s) == LDG_OK);
    ldg_stream_unref(s);
    CHECK(f.runs == 0);
    ldg_stream_unref(s);
    CHECK(f.runs == 1);
  }

  /* 3. A pending wait holds the last reference: it runs when the wait fires,
   *    inside that release, and may re-enter the ledger. */
  {
    int keeps = 0;
    fin f = {0, 0, &keeps, l, -1};
    ldg_stream *a, *b;
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &a) == LDG_OK);
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &b) == LDG_OK);
    CHECK(ldg_stream_set_finalizer(a, (ldg_keep){fin_run, &f}) == LDG_OK);
    CHECK(ldg_enqueue(a, (ldg_keep){keep_count, &keeps}, NULL, 0, NULL, 0,
                      NULL) == LDG_OK);
    CHECK(ldg_add_wait(b, a, ldg_mark(a), NULL) == LDG_OK);
    CHECK(ldg_stream_destroy(a) == LDG_OK); /* keeps run, reference kept */
    ldg_stream_unref(a);                    /* the wait holds the last one */
    CHECK(f.runs == 0 && keeps == 1);
    CHECK(ldg_release(b, ldg_mark(b)) == LDG_OK);
    CHECK(f.runs == 1 && f.rc == LDG_OK);
    ldg_stream_unref(b);
  }

  /* 4. A settle holds a reference while it drains: the drain may drop the
   *    owner's last one; the finalizer runs after the drain returned, and
   *    no drain follows it. */
  {
    fin f = {0};
    drainer d = {&f, 0, 0, NULL};
    ldg_stream *s;
    CHECK(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, drain_fn, &d, &s) ==
          LDG_OK);
    CHECK(ldg_stream_set_finalizer(s, (ldg_keep){fin_run, &f}) == LDG_OK);
    uint64_t v = 7;
    CHECK(ldg_enqueue(s, (ldg_keep){NULL, NULL}, &v, 1, NULL, 0, NULL) ==
          LDG_OK);
    d.drop = s;
    CHECK(ldg_settle_vector(l, v) == LDG_OK);
    CHECK(d.calls == 1 && d.after_finalizer == 0 && f.runs == 1);
    CHECK(ldg_settle_vector(l, v) == LDG_OK); /* gone: nothing drains */
    CHECK(d.calls == 1);
  }

  /* 5. A cycle of pending waits between streams whose owners let go: the
   *    ledger's destroy finalises them, running both finalizers. */
  {
    fin fa = {0}, fb = {0};
    ldg_stream *a, *b;
    CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &a) == LDG_OK);
    CHECK(ldg_stream_create(l, 1, 0, NULL, NULL, &b) == LDG_OK);
    CHECK(ldg_stream_set_finalizer(a, (ldg_keep){fin_run, &fa}) == LDG_OK);
    CHECK(ldg_stream_set_finalizer(b, (ldg_keep){fin_run, &fb}) == LDG_OK);
    CHECK(ldg_enqueue(a, (ldg_keep){NULL, NULL}, NULL, 0, NULL, 0, NULL) ==
          LDG_OK);
    CHECK(ldg_enqueue(b, (ldg_keep){NULL, NULL}, NULL, 0, NULL, 0, NULL) ==
          LDG_OK);
    CHECK(ldg_add_wait(a, b, ldg_mark(b), NULL) == LDG_OK);
    CHECK(ldg_add_wait(b, a, 1, NULL) == LDG_OK);
    ldg_stream_unref(a);
    ldg_stream_unref(b);
    CHECK(fa.runs == 0 && fb.runs == 0);
    ldg_ledger_destroy(l);
    CHECK(fa.runs == 1 && fb.runs == 1);
  }
  ldg_quiesce();
  return 0;
}
