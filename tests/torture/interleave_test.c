/*
 * interleave_test: forced interleavings, one per defect of issue 8 (and per
 * hole its mutation sweep found), each driven by test hooks
 * (//ledger:ledger_hooks) that park chosen threads at chosen points — no
 * sleeps, no timing assertions; a 20 s watchdog turns a call blocked behind a
 * parked thread into a failure. Run under ASan to catch the use-after-free
 * ones at the faulty access; every case also checks an outcome that the
 * faulty code gets wrong in any build.
 *
 * CASES
 *   destroy-vs-finalize  ldg_ledger_destroy finds a stream whose last
 *                        ldg_stream_unref is finalising it (parked between
 *                        dropping the count to 0 and marking it destroyed):
 *                        it must not revive it (issue 8, defect 1: it took a
 *                        reference 0 -> 1, destroyed and finalised it a
 *                        second time, use-after-free).
 *   pool-pop-vs-link     P, extending stream W, read pool top g2 and is parked
 *                        before reading g2->next; A pops g2 for stream Z and
 *                        is parked before linking it; B links Z's successor
 *                        first; A's link CAS loses. A must give g2 back
 *                        through a grace period, not free it under P
 *                        (defect 2).
 *   release-vs-reglock   a thread is parked inside ldg_stream_create holding
 *                        the registry mutex; ldg_release fires a wait that
 *                        drops the last reference of a never-destroyed
 *                        stream, and ldg_stream_destroy / ldg_stream_unref
 *                        run too: all complete (defect 4: the release blocked
 *                        on the mutex). Then the parked create finishes and
 *                        unlinks what was left pending.
 *   extend-linked        an enqueuer is parked between linking the new tail
 *                        segment and swinging tailseg; others release the
 *                        old tail segment and advance head: the segment
 *                        tailseg names stays reachable from head (a mutant
 *                        without advance_head's tailseg check retired it).
 *   add-wait-reenter     an add_wait(b, a) overtaken by a release of b fires
 *                        the wait itself (ledger.h, defect 3's decision): a's
 *                        keeps run on its thread before it returns, in
 *                        order, and one of them re-enters the ledger on a
 *                        and b (enqueue, release, add_wait).
 *   add-wait-destroys    the same, the caller having dropped a's reference
 *                        while the wait was being added: the add_wait
 *                        destroys a; its keep re-enters b.
 *   enqueue-reenter      the keep of an overtaken ldg_enqueue runs on the
 *                        enqueuer and re-enters the ledger on both streams.
 *   lock-holders         a thread parked holding the registry mutex — in
 *                        ldg_stream_create, in the unlink drain of a
 *                        destroy that won the trylock, in
 *                        ldg_ledger_destroy's walk (of another ledger) —
 *                        stops none of: enqueue, add_wait, release (firing
 *                        waits, finalising a stream), release_all, every
 *                        query, snapshots, release_marks, marks_discard,
 *                        settle, stream destroy, a last unref.
 *   retracted-not-pooled an enqueue parked after reserving the first
 *                        segment's last seq while another links a second
 *                        segment and destroy asks about the seq: the enqueuer
 *                        retracts it and retires the segment, which must not
 *                        be pooled (its slot is RETRACTED, not reset); a new
 *                        stream's first segment is clean (a mutant that did
 *                        not mark it dirty pooled it, and the next stream's
 *                        8th entry was "overtaken" and released at once).
 *   snapshot-vs-finalize a stream's last unref is parked before marking it
 *                        destroyed (count 0, still registered): device_marks
 *                        and nonblocking_holding skip it (mutants chk-tryref,
 *                        chk-tryref-nb took a reference 0 -> 1).
 *   trim-vs-pop          ldg_ledger_trim, parked past its rcu_barrier, empties
 *                        the pool while a popper that read the top segment is
 *                        parked: the segment is not freed under it (gp-trim).
 *   spare-drop-vs-pop    a release pops the popper's top segment as its
 *                        stream's spare; trim drops the spare: not freed
 *                        under the popper (gp-spare-drop).
 *   spare-one-preparer   a release parked with its claimed spare ready: a
 *                        second release of the stream allocates nothing, and
 *                        the next extension takes the parked spare
 *                        (spare-no-claim: every racing release allocated).
 *   spare-claim-vs-extend an extension and releases of the stream complete
 *                        while a release is parked holding the spare's claim
 *                        (no lock or wait added); the claimer's spare is
 *                        parked afterwards and nothing is lost.
 *   spare-aside-vs-pop   the same pooled spare, smaller than the backlog when
 *                        the extension comes, is set aside: through a grace
 *                        period, into the pool (gp-spare-aside).
 *   abandon-vs-publish   a release reads a slot EMPTY and is parked before its
 *                        spin and ask; the enqueuer publishes (a store: no
 *                        ask read); the release's spin reads FULL and takes
 *                        the entry (before pub11: its abandoning CAS failed;
 *                        a plain store, mutant slot-abandon-store, lost it).
 * Exit 0: every case passed. `interleave_test CASE` runs one.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"

#define PARK_TEST_NAME "interleave_test"
#include "tests/torture/park_check.h"

/* ---- Keeps: each counts its runs; a second run fails at once ------------- */

#define MAXK 1024
static _Atomic int g_runs[MAXK];
static _Atomic int g_nk;

static void keep_run(void *ctx) {
  _Atomic int *r = ctx;
  if (atomic_fetch_add(r, 1) != 0) FAIL("keep %td run twice", r - g_runs);
}

static int enq(ldg_stream *s) {
  int k = atomic_fetch_add(&g_nk, 1);
  CHECK(k < MAXK);
  atomic_store(&g_runs[k], 0);
  CHECK_RC(ldg_enqueue(s, (ldg_keep){keep_run, &g_runs[k]}, NULL, 0, NULL, 0,
                       NULL),
           LDG_OK);
  return k;
}

static void expect_runs(int lo, int hi, int want, const char *what) {
  for (int k = lo; k < hi; k++) {
    int r = atomic_load(&g_runs[k]);
    if (r != want) FAIL("%s: keep %d ran %d times, expected %d", what, k, r, want);
  }
}

static ldg_stream *mk(ldg_ledger *l) {
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &s), LDG_OK);
  return s;
}

/* A pool's donor: LDG_STREAM_SHARED, so that the segments it retires reach
 * the pool through the reclaimer (an owner keeps one hot when the segment
 * after it is no larger, which depends on how fast the ring filled:
 * ledger/segment.c, HOT REUSE ON OWNED STREAMS; seen under qemu). */
static ldg_stream *mk_donor(ldg_ledger *l) {
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &s), LDG_OK);
  return s;
}

/* ---- Workers: threads that park (or just report) at one hook point ------- */

struct worker {
  const char *name;
  int point;           /* hook point to stop at; 0: none */
  ldg_stream *stream;  /* only on this stream; NULL: any */
  bool report_only;    /* post `reached` and go on, do not park */
  _Atomic bool armed;
  sem_t reached, go, done;
  void (*fn)(void *);
  void *arg;
  pthread_t t;
};

static _Thread_local struct worker *tl_worker;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  struct worker *w = tl_worker;
  if (w == NULL || (int)point != w->point) return;
  if (w->stream != NULL && s != w->stream) return;
  if (!atomic_exchange(&w->armed, false)) return; /* once */
  sem_post(&w->reached);
  if (w->report_only) return;
  while (sem_wait(&w->go) != 0) {
  }
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  tl_worker = w;
  w->fn(w->arg);
  tl_worker = NULL;
  sem_post(&w->done);
  return NULL;
}

static void worker_start(struct worker *w, const char *name, int point,
                         ldg_stream *s, bool report_only, void (*fn)(void *),
                         void *arg) {
  memset(w, 0, sizeof(*w));
  w->name = name;
  w->point = point;
  w->stream = s;
  w->report_only = report_only;
  atomic_store(&w->armed, point != 0);
  sem_init(&w->reached, 0, 0);
  sem_init(&w->go, 0, 0);
  sem_init(&w->done, 0, 0);
  w->fn = fn;
  w->arg = arg;
  CHECK(pthread_create(&w->t, NULL, worker_main, w) == 0);
}

static void worker_reached(struct worker *w) {
  char what[128];
  snprintf(what, sizeof(what), "%s reaching its hook point", w->name);
  sem_wait_or_fail(&w->reached, what);
}

static void worker_go(struct worker *w) { sem_post(&w->go); }

static void worker_join(struct worker *w) {
  char what[128];
  snprintf(what, sizeof(what), "%s finishing (blocked?)", w->name);
  sem_wait_or_fail(&w->done, what);
  pthread_join(w->t, NULL);
  sem_destroy(&w->reached);
  sem_destroy(&w->go);
  sem_destroy(&w->done);
}

static void give_back_all(ldg_ledger *l) {
  ldg_quiesce();
  ldg_ledger_trim(l);
  ldg_quiesce();
  CHECK_EQ_U(ldg_ledger_bytes(l), 0);
}

static void begin(const char *name) {
  g_case = name;
  atomic_store(&g_nk, 0);
}

static void pass(void) {
  printf("interleave_test: ok   %s\n", g_case);
  fflush(stdout);
}

/* The end of a case: destroys and unrefs the live streams given, checks
 * that every keep ran once, that the ledger gives back every byte, and
 * destroys it. */
static void finish(ldg_ledger *l, ldg_stream **live, int n) {
  for (int i = 0; i < n; i++) {
    CHECK_RC(ldg_stream_destroy(live[i]), LDG_OK);
    ldg_stream_unref(live[i]);
  }
  expect_runs(0, atomic_load(&g_nk), 1, "every keep");
  give_back_all(l);
  ldg_ledger_destroy(l);
  pass();
}

/* ---- destroy-vs-finalize (defect 1) --------------------------------------- */

static void do_unref(void *arg) { ldg_stream_unref(arg); }
static void do_ledger_destroy(void *arg) { ldg_ledger_destroy(arg); }

static void destroy_vs_finalize(void) {
  begin("ldg_ledger_destroy vs the last unref finalising a stream");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *t = mk(l); /* another stream, behind s in the registry */
  int t0 = enq(t), t1 = enq(t);
  ldg_stream *s = mk(l); /* the registry's head */
  int s0 = atomic_load(&g_nk);
  for (int i = 0; i < 3; i++) (void)enq(s);
  /* U drops s's only reference and is parked before marking it destroyed. */
  struct worker u, d;
  worker_start(&u, "the finalising unref", LDG__HOOK_FINALIZE, s, false,
               do_unref, s);
  worker_reached(&u);
  /* D finds s at the head of the registry with no reference left. */
  worker_start(&d, "ldg_ledger_destroy", LDG__HOOK_LEDGER_DESTROY_PICK, s, true,
               do_ledger_destroy, l);
  worker_reached(&d);
  worker_go(&u);
  worker_join(&u);
  worker_join(&d);
  expect_runs(s0, s0 + 3, 1, "s's keeps");
  expect_runs(t0, t1 + 1, 1, "t's keeps (ledger destroy)");
  ldg_stream_unref(t); /* still valid, destroyed, until unreferenced */
  ldg_quiesce();
  pass();
}

/* ---- pool-pop-vs-link (defect 2) ------------------------------------------ */

static void do_enqueue(void *arg) { (void)enq(arg); }

static void pool_pop_vs_link(void) {
  begin("a pooled segment popped, then lost in the link CAS, under a popper");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  /* Put exactly one 64-slot segment (class 3) in the pool: Y's second. */
  ldg_stream *y = mk_donor(l);
  for (int i = 0; i < 8 + 64 + 1; i++) (void)enq(y);
  CHECK_RC(ldg_release_all(y), LDG_OK);
  ldg_quiesce();
  CHECK_EQ_U(ldg__pool_count(l, 3), 1);
  /* W and Z: first segments (8 slots) full; the next enqueue extends each
   * with a 64-slot segment, which it asks the pool for. */
  ldg_stream *w = mk(l), *z = mk(l);
  for (int i = 0; i < 8; i++) {
    (void)enq(w);
    (void)enq(z);
  }
  struct worker p, a;
  /* P (on W) read top == g2, parked before reading g2->next (in RCU). */
  worker_start(&p, "P popping for W", LDG__HOOK_POOL_POP, w, false, do_enqueue,
               w);
  worker_reached(&p);
  /* A (on Z) popped g2, parked before its link CAS. */
  worker_start(&a, "A extending Z", LDG__HOOK_SEGMENT_ALLOCATED, z, false,
               do_enqueue, z);
  worker_reached(&a);
  CHECK_EQ_U(ldg__pool_count(l, 3), 0);
  /* B (this thread) links Z's successor first (the pool is empty now). */
  (void)enq(z);
  worker_go(&a); /* A's CAS loses */
  worker_join(&a);
  worker_go(&p); /* P reads g2->next: g2 must still be allocated */
  worker_join(&p);
  /* g2 went back through a grace period into the pool; nothing lost. */
  ldg_quiesce();
  CHECK_EQ_U(ldg__pool_count(l, 3), 1);
  finish(l, (ldg_stream *[]){y, w, z}, 3);
}

/* ---- release-vs-reglock (defect 4) ---------------------------------------- */

struct create_arg {
  ldg_ledger *l;
  ldg_stream *s;
};

static void do_create(void *arg) {
  struct create_arg *c = arg;
  c->s = mk(c->l);
}

static void do_release_all(void *arg) {
  CHECK_RC(ldg_release(arg, ldg_mark(arg)), LDG_OK);
}

static void do_destroy_unref(void *arg) {
  CHECK_RC(ldg_stream_destroy(arg), LDG_OK);
  ldg_stream_unref(arg);
}

static void release_vs_reglock(void) {
  begin("ldg_release dropping a last reference, registry mutex held");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *a = mk(l), *b = mk(l), *c = mk(l), *e = mk(l);
  int a0 = enq(a), a1 = enq(a);
  CHECK_RC(ldg_add_wait(b, a, ldg_mark(a), NULL), LDG_OK);
  int b0 = enq(b);
  ldg_stream_unref(a); /* the wait holds a's last reference */
  int c0 = enq(c), e0 = enq(e);
  /* C is parked inside ldg_stream_create, holding the registry mutex. */
  struct create_arg ca = {l, NULL};
  struct worker cw, r, dd, uu;
  worker_start(&cw, "ldg_stream_create", LDG__HOOK_REGISTRY_LOCKED, NULL,
               false, do_create, &ca);
  worker_reached(&cw);
  /* R's release fires b's wait, which finalises a (never destroyed). */
  worker_start(&r, "ldg_release(b) finalising a", 0, NULL, false,
               do_release_all, b);
  worker_join(&r);
  expect_runs(a0, a1 + 1, 1, "a's keeps, through b's wait");
  expect_runs(b0, b0 + 1, 1, "b's keep");
  /* Destroy, and a last unref of a never-destroyed stream, complete too. */
  worker_start(&dd, "ldg_stream_destroy(c)", 0, NULL, false, do_destroy_unref,
               c);
  worker_join(&dd);
  expect_runs(c0, c0 + 1, 1, "c's keep");
  worker_start(&uu, "the last ldg_stream_unref(e)", 0, NULL, false, do_unref,
               e);
  worker_join(&uu);
  expect_runs(e0, e0 + 1, 1, "e's keep");
  /* Snapshots skip the destroyed streams still on the list (the new stream
   * is linked already). */
  ldg_marks *m;
  CHECK_RC(ldg_device_marks(l, 0, &m), LDG_OK);
  CHECK_EQ_U(ldg_marks_count(m), 2); /* b and the new stream */
  ldg_marks_discard(m);
  ldg_quiesce(); /* the parked thread is in no read-side section */
  size_t parked_bytes = ldg_ledger_bytes(l);
  worker_go(&cw);
  worker_join(&cw);
  /* The create unlinked what was pending: a, c and e are freed. */
  ldg_quiesce();
  CHECK(ldg_ledger_bytes(l) < parked_bytes);
  CHECK_RC(ldg_device_marks(l, 0, &m), LDG_OK);
  CHECK_EQ_U(ldg_marks_count(m), 2);
  ldg_marks_discard(m);
  finish(l, (ldg_stream *[]){b, ca.s}, 2);
}

/* ---- extend-linked (mutation sweep) --------------------------------------- */

static void extend_linked(void) {
  begin("head advances while an extender is between link and tailseg swing");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = mk(l);
  for (int i = 0; i < 7; i++) (void)enq(s);
  /* E takes the first segment's last seq: then none is free. */
  (void)enq(s);
  struct worker e;
  worker_start(&e, "E extending s", LDG__HOOK_EXTEND_LINKED, s, false,
               do_enqueue, s);
  worker_reached(&e);
  /* The first segment completes; head must not pass the one tailseg names. */
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  CHECK(ldg__ring_tailseg_reachable(s));
  CHECK_EQ_U(ldg_pending_count(s), 0);
  worker_go(&e);
  worker_join(&e);
  CHECK(ldg__ring_tailseg_reachable(s));
  for (int i = 0; i < 100; i++) (void)enq(s);
  finish(l, &s, 1);
}


/* ---- snapshot-vs-finalize (mutation sweep: chk-tryref) -------------------- */

static int drain_ok(void *ctx);

static void snapshot_vs_finalize(void) {
  begin("snapshots and holder queries skip a stream being finalised");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *t = mk(l), *s;
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, drain_ok, NULL, &s),
           LDG_OK);
  uint64_t vec = 41;
  int k = atomic_fetch_add(&g_nk, 1);
  atomic_store(&g_runs[k], 0);
  CHECK_RC(ldg_enqueue(s, (ldg_keep){keep_run, &g_runs[k]}, &vec, 1, NULL, 0,
                       NULL),
           LDG_OK);
  (void)enq(t);
  /* U drops s's only reference and is parked before marking it destroyed:
   * s is still registered, not destroyed, its count 0. */
  struct worker u;
  worker_start(&u, "the finalising unref", LDG__HOOK_FINALIZE, s, false,
               do_unref, s);
  worker_reached(&u);
  /* Neither may take a reference on s (0 -> 1 revives a stream whose
   * finaliser will free it): both skip it. */
  ldg_marks *m;
  CHECK_RC(ldg_device_marks(l, 0, &m), LDG_OK);
  CHECK_EQ_U(ldg_marks_count(m), 1); /* t only */
  ldg_stream *out[2] = {NULL, NULL};
  CHECK_EQ_U(ldg_nonblocking_holding(l, vec, out, 2), 0);
  CHECK(out[0] == NULL);
  worker_go(&u);
  worker_join(&u);
  expect_runs(k, k + 1, 1, "s's keep, by its finaliser");
  CHECK_RC(ldg_release_marks(m), LDG_OK); /* t's entry, to its mark */
  CHECK_EQ_U(ldg_pending_count(t), 0);
  finish(l, &t, 1);
}

/* ---- trim-vs-pop (mutation sweep: gp-trim) --------------------------------- */

/* Puts exactly one 64-slot segment (class 3) in l's pool; returns the
 * stream it came from (its second segment). */
static ldg_stream *pool_one_64(ldg_ledger *l) {
  ldg_stream *y = mk_donor(l);
  for (int i = 0; i < 8 + 64 + 1; i++) (void)enq(y);
  CHECK_RC(ldg_release_all(y), LDG_OK);
  ldg_quiesce();
  CHECK_EQ_U(ldg__pool_count(l, 3), 1);
  return y;
}

/* W's first segment full: its next enqueue extends it, popping class 3. */
static ldg_stream *full_first_segment(ldg_ledger *l) {
  ldg_stream *w = mk(l);
  for (int i = 0; i < 8; i++) (void)enq(w);
  return w;
}

static void do_trim(void *arg) { ldg_ledger_trim(arg); }

/* P enqueues on W (extending it), read the pool's top segment and is
 * parked before reading its link, inside its read-side section. */
static void park_popper(struct worker *p, ldg_stream *w) {
  worker_start(p, "P popping for W", LDG__HOOK_POOL_POP, w, false, do_enqueue,
               w);
  worker_reached(p);
}

static void trim_vs_pop(void) {
  begin("ldg_ledger_trim empties the pool under a parked popper");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *y = pool_one_64(l), *w = full_first_segment(l);
  /* T is past trim's rcu_barrier (which waits for readers), about to empty
   * the pools. */
  struct worker t, p;
  worker_start(&t, "T trimming", LDG__HOOK_POOL_DRAIN, NULL, false, do_trim,
               l);
  worker_reached(&t);
  /* P (on W) read top == g, parked before reading g->next (in RCU). */
  park_popper(&p, w);
  size_t bytes = ldg_ledger_bytes(l);
  worker_go(&t);
  worker_join(&t);
  CHECK_EQ_U(ldg__pool_count(l, 3), 0);
  /* g left the pool but is not freed: P may still read it. */
  CHECK_EQ_U(ldg_ledger_bytes(l), bytes);
  worker_go(&p); /* reads g->next, its CAS fails, it allocates */
  worker_join(&p);
  finish(l, (ldg_stream *[]){y, w}, 2);
}

/* ---- The spare (mutation sweep: gp-spare-drop, spare-no-claim,
 * gp-spare-aside) ------------------------------------------------------------- */

/* Enqueues on s until its mark is upto. */
static void enq_to(ldg_stream *s, ldg_seq upto) {
  while (ldg_mark(s) < upto) (void)enq(s);
}

static void do_release_mark(void *arg) {
  CHECK_RC(ldg_release(arg, ldg_mark(arg)), LDG_OK);
}

/* A fresh stream with its 64-slot second segment (seqs 9..72) used half way
 * to its grow point (9 + (64 - ldg__fast_reserve()) / 2: segment.c,
 * GROWING AHEAD): its next release prepares a spare (THE SPARE, segment.c:
 * from seq 9 + (64 - reserve) / 4). */
static ldg_stream *half_used_second(ldg_ledger *l) {
  ldg_stream *s = mk(l);
  enq_to(s, 9 + (64 - ldg__fast_reserve()) / 4);
  return s;
}

static void spare_drop_vs_pop(void) {
  begin("ldg_ledger_trim drops a pooled spare under a parked popper");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = half_used_second(l); /* before g is pooled */
  ldg_stream *y = pool_one_64(l), *w = full_first_segment(l);
  struct worker p, t;
  park_popper(&p, w);
  /* A release of s pops g (P's top) as its spare. */
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  CHECK_EQ_U(ldg__pool_count(l, 3), 0);
  size_t bytes = ldg_ledger_bytes(l);
  /* T's trim drops g, then waits in rcu_barrier for P. */
  worker_start(&t, "T trimming", LDG__HOOK_SPARE_DROPPED, s, true, do_trim, l);
  worker_reached(&t);
  CHECK_EQ_U(ldg_ledger_bytes(l), bytes); /* dropped, not freed: P reads it */
  worker_go(&p);
  worker_join(&p);
  worker_join(&t);
  finish(l, (ldg_stream *[]){s, y, w}, 3);
}

static void spare_one_preparer(void) {
  begin("one release prepares a stream's spare at a time");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = half_used_second(l);
  /* A claimed s's spare and got a segment (the pool is empty: allocated). */
  struct worker a;
  worker_start(&a, "A preparing s's spare", LDG__HOOK_SPARE_READY, s, false,
               do_release_mark, s);
  worker_reached(&a);
  size_t bytes = ldg_ledger_bytes(l);
  /* Another release finds the claim and prepares nothing. */
  (void)enq(s);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  CHECK_EQ_U(ldg_ledger_bytes(l), bytes);
  worker_go(&a);
  worker_join(&a);
  CHECK_EQ_U(ldg_ledger_bytes(l), bytes); /* A's spare was counted already */
  /* The next extension (seq 73 - reserve) takes A's spare: nothing
   * allocated. */
  enq_to(s, 72 - ldg__fast_reserve());
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  size_t before_ext = ldg_ledger_bytes(l);
  (void)enq(s);
  CHECK_EQ_U(ldg_ledger_bytes(l), before_ext);
  finish(l, &s, 1);
}

static void do_extend_past_73(void *arg) {
  enq_to(arg, 80); /* the grow point, 9 + (64 - reserve) / 2, opens the third segment */
  CHECK_RC(ldg_release(arg, ldg_mark(arg)), LDG_OK);
}

static void spare_claim_vs_extend(void) {
  begin("an extension and releases beside a parked spare preparer");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = half_used_second(l);
  struct worker a, e;
  worker_start(&a, "A preparing s's spare", LDG__HOOK_SPARE_READY, s, false,
               do_release_mark, s);
  worker_reached(&a);
  /* The extension meets the claim: it waits for nothing, gets its own
   * segment; the releases after it find the claim and return. */
  worker_start(&e, "enqueues across the segment end, a release", 0, NULL,
               false, do_extend_past_73, s);
  worker_join(&e);
  CHECK(ldg__ring_tailseg_reachable(s));
  CHECK_EQ_U(ldg_pending_count(s), 0);
  /* A parks its spare for a later extension; trim (in finish) drops it:
   * every byte comes back. */
  worker_go(&a);
  worker_join(&a);
  enq_to(s, 300);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  finish(l, &s, 1);
}

static void spare_aside_vs_pop(void) {
  begin("an extender sets a small pooled spare aside under a parked popper");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  /* S: segments of 8 (seqs 1..8), 64 (9..72), 64 (73..136: opened at the
   * second's grow point 9 + (64 - R) / 2, R = ldg__fast_reserve(), more
   * than 50 ms after the second, so the backlog's size) and, opened at the
   * third's grow point 73 + (64 - R) / 2 within a millisecond of it, 128
   * (137..264); its spare is prepared from seq 137 + (128 - R) / 4 and it
   * grows again at its grow point, 137 + (128 - R) / 2 (segment.c, GROWING
   * AHEAD). The pool is empty meanwhile: all allocated. */
  const struct timespec t60ms = {0, 60 * 1000 * 1000};
  const ldg_seq r = ldg__fast_reserve(), half = 137 + (128 - r) / 4;
  const ldg_seq grow = 137 + (128 - r) / 2;
  /* Not owned (LDG_STREAM_SHARED): its owner would keep the second segment
   * it retires as the spare at once (segment.c, HOT REUSE ON OWNED
   * STREAMS), and the release below would prepare none from the pool. */
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &s),
           LDG_OK);
  enq_to(s, 20);
  nanosleep(&t60ms, NULL);
  enq_to(s, half);
  ldg_stream *y = pool_one_64(l), *w = full_first_segment(l);
  struct worker p;
  park_popper(&p, w);
  /* A release of s to grow - 68 prepares a spare for a small backlog:
   * g, the one pooled segment, P's top. (S's first two segments, retired
   * by it, wait for P's grace period: not pooled yet.) */
  CHECK_RC(ldg_release(s, grow - 68), LDG_OK);
  CHECK_EQ_U(ldg__pool_count(l, 3), 0);
  /* The grow point finds a backlog of 68 > 64: g is set aside (through a
   * grace period: P still reads it) and a 128-slot one got instead. */
  enq_to(s, grow);
  worker_go(&p);
  worker_join(&p);
  ldg_quiesce();
  /* In the pool now: S's 64-slot second segment and g (the third is still
   * pending). */
  CHECK_EQ_U(ldg__pool_count(l, 3), 2);
  finish(l, (ldg_stream *[]){s, y, w}, 3);
}

/* ---- abandon-vs-publish (mutation sweep: slot-abandon-store, before pub11) - */

static void abandon_vs_publish(void) {
  begin("a release that saw a slot EMPTY races its enqueuer's publication");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = mk(l);
  int k0 = enq(s);
  /* E reserved seq 2 and is parked before publishing. */
  struct worker e, r;
  int k1 = atomic_load(&g_nk);
  worker_start(&e, "E enqueueing seq 2", LDG__HOOK_ENQUEUE_RESERVED, s, false,
               do_enqueue, s);
  worker_reached(&e);
  CHECK_EQ_U(ldg_mark(s), 2);
  /* R releases to 2: takes seq 1, reads seq 2's slot EMPTY, is parked
   * before its spin and ask (in RCU). */
  worker_start(&r, "R releasing to 2", LDG__HOOK_RELEASE_SAW_EMPTY, s, false,
               do_release_mark, s);
  worker_reached(&r);
  /* E publishes: it stores FULL, reads no ask; it returns, the entry held. */
  worker_go(&e);
  worker_join(&e);
  expect_runs(k1, k1 + 1, 0, "seq 2's keep, published, before R goes on");
  /* R's spin reads FULL and takes the slot, asking nothing: its keep runs
   * once, now (ring.c, PUBLICATION). */
  worker_go(&r);
  worker_join(&r);
  expect_runs(k0, k1 + 1, 1, "seq 1's and seq 2's keeps, taken by R");
  CHECK_EQ_U(ldg_pending_count(s), 0);
  finish(l, &s, 1);
}

/* ---- add_wait overtaken: its keeps re-enter the ledger (defect 3) -------- */

/* What the keep on a does when the overtaken add_wait(b, a) fires it. */
struct reenter {
  ldg_stream *a, *b; /* a NULL: a is being destroyed, re-enter b only */
  pthread_t on;      /* the thread it must run on */
  _Atomic int ran;
  int k_a, k_b;      /* keeps it enqueued */
};

static void reenter_keep(void *ctx) {
  struct reenter *r = ctx;
  if (!pthread_equal(pthread_self(), r->on)) FAIL("keep not on add_wait's thread");
  if (atomic_fetch_add(&r->ran, 1) != 0) FAIL("re-entering keep run twice");
  if (r->a != NULL) {
    r->k_a = enq(r->a);
    CHECK_RC(ldg_release(r->a, ldg_mark(r->a)), LDG_OK); /* runs k_a here */
    expect_runs(r->k_a, r->k_a + 1, 1, "a's keep enqueued by the keep");
    CHECK_RC(ldg_add_wait(r->b, r->a, ldg_mark(r->a), NULL), LDG_OK);
  }
  r->k_b = enq(r->b);
  CHECK_RC(ldg_release(r->b, ldg_mark(r->b)), LDG_OK); /* fires the new wait */
  expect_runs(r->k_b, r->k_b + 1, 1, "b's keep enqueued by the keep");
  CHECK(ldg_pending_count(r->b) == 0);
}

struct add_wait_arg {
  ldg_stream *b, *a;
  ldg_seq upto;
  struct reenter *r;
  int ran_at_return;
};

static void do_add_wait(void *arg) {
  struct add_wait_arg *w = arg;
  w->r->on = pthread_self();
  CHECK_RC(ldg_add_wait(w->b, w->a, w->upto, NULL), LDG_OK);
  w->ran_at_return = atomic_load(&w->r->ran);
}

/* The overtaken call is an enqueue on b of the re-entering keep itself. */
static void do_enqueue_reenter(void *arg) {
  struct add_wait_arg *w = arg;
  w->r->on = pthread_self();
  CHECK_RC(ldg_enqueue(w->b, (ldg_keep){reenter_keep, w->r}, NULL, 0, NULL, 0,
                       NULL),
           LDG_OK);
  w->ran_at_return = atomic_load(&w->r->ran);
}

static void enqueue_reenter(void) {
  begin("the keep of an overtaken enqueue re-enters both streams");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *a = mk(l), *b = mk(l);
  struct reenter r = {a, b, pthread_self(), 0, -1, -1};
  int b0 = enq(b);
  struct add_wait_arg w = {b, a, 0, &r, -1};
  struct worker wk;
  worker_start(&wk, "enqueue(b)", LDG__HOOK_ENQUEUE_RESERVED, b, false,
               do_enqueue_reenter, &w);
  worker_reached(&wk);
  CHECK_RC(ldg_release(b, ldg_mark(b)), LDG_OK); /* overtakes it */
  expect_runs(b0, b0 + 1, 1, "b's keep before");
  CHECK(atomic_load(&r.ran) == 0);
  worker_go(&wk);
  worker_join(&wk);
  CHECK(w.ran_at_return == 1); /* on the enqueuer, before it returned */
  finish(l, (ldg_stream *[]){a, b}, 2);
}

static void add_wait_overtaken(bool drop_a) {
  begin(drop_a ? "overtaken add_wait holding a's last reference destroys a"
               : "keeps run by an overtaken add_wait re-enter both streams");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *a = mk(l), *b = mk(l);
  struct reenter r = {drop_a ? NULL : a, b, pthread_self(), 0, -1, -1};
  int a0 = enq(a);
  CHECK_RC(ldg_enqueue(a, (ldg_keep){reenter_keep, &r}, NULL, 0, NULL, 0, NULL),
           LDG_OK);
  int a2 = enq(a);
  struct add_wait_arg w = {b, a, ldg_mark(a), &r, -1};
  struct worker wk;
  worker_start(&wk, "add_wait(b, a)", LDG__HOOK_ENQUEUE_RESERVED, b, false,
               do_add_wait, &w);
  worker_reached(&wk);
  if (drop_a) ldg_stream_unref(a); /* the wait holds a's last reference */
  /* A release of b to the mark covering the wait overtakes it. */
  CHECK_RC(ldg_release(b, ldg_mark(b)), LDG_OK);
  CHECK(atomic_load(&r.ran) == 0);
  worker_go(&wk);
  worker_join(&wk);
  /* The add_wait ran a's keeps itself, before returning. */
  CHECK(w.ran_at_return == 1);
  expect_runs(a0, a0 + 1, 1, "a's keep before the re-entering one");
  expect_runs(a2, a2 + 1, 1, "a's keep after the re-entering one");
  /* With drop_a, a is gone (destroyed by the add_wait): only b is left. */
  finish(l, (ldg_stream *[]){b, a}, drop_a ? 1 : 2);
}

static void add_wait_reenter(void) { add_wait_overtaken(false); }
static void add_wait_destroys(void) { add_wait_overtaken(true); }

/* ---- lock-holders: a parked registry-mutex holder stops no other call ---- */

static int drain_ok(void *ctx) {
  (void)ctx;
  return 0;
}

/* Streams made before the holder parks (creating one would wait for it). */
struct battery {
  ldg_ledger *l;
  ldg_stream *p, *q, *nb, *d, *u, *f;
};

static void battery_make(struct battery *bt, ldg_ledger *l) {
  bt->l = l;
  bt->p = mk(l);
  bt->q = mk(l);
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_NONBLOCKING, drain_ok, NULL,
                             &bt->nb),
           LDG_OK);
  bt->d = mk(l);
  bt->u = mk(l);
  bt->f = mk(l);
}

/* Every call ledger.h's table says waits for no mutex, on the same and on
 * other streams; run by a worker under the watchdog. */
static void battery_run(void *arg) {
  struct battery *bt = arg;
  uint64_t vec = 77;
  ldg_range rg = {(uintptr_t)1 << 41, 64};
  int k = atomic_fetch_add(&g_nk, 1);
  atomic_store(&g_runs[k], 0);
  CHECK_RC(ldg_enqueue(bt->nb, (ldg_keep){keep_run, &g_runs[k]}, &vec, 1, &rg,
                       1, NULL),
           LDG_OK);
  int p0 = enq(bt->p);
  CHECK(ldg_holds_vector(bt->l, vec));
  CHECK(ldg_holds_host_range(bt->l, rg.addr, 1));
  CHECK(ldg_has_nonblocking(bt->l));
  ldg_stream *out[2];
  CHECK_EQ_U(ldg_nonblocking_holding(bt->l, vec, out, 2), 1);
  ldg_stream_unref(out[0]);
  CHECK_EQ_U(ldg_pending_count(bt->p), 1);
  CHECK_RC(ldg_settle_vector(bt->l, vec), LDG_OK);
  expect_runs(k, k + 1, 1, "the settled keep");
  /* q waits on p; f's last reference is held by a wait of q. */
  int f0 = enq(bt->f);
  CHECK_RC(ldg_add_wait(bt->q, bt->p, ldg_mark(bt->p), NULL), LDG_OK);
  CHECK_RC(ldg_add_wait(bt->q, bt->f, ldg_mark(bt->f), NULL), LDG_OK);
  ldg_stream_unref(bt->f);
  bt->f = NULL;
  int q0 = enq(bt->q);
  CHECK_RC(ldg_release(bt->q, ldg_mark(bt->q)), LDG_OK);
  expect_runs(p0, p0 + 1, 1, "p's keep, through q's wait");
  expect_runs(f0, f0 + 1, 1, "f's keep, f finalised by q's wait");
  expect_runs(q0, q0 + 1, 1, "q's keep");
  (void)enq(bt->p);
  CHECK_RC(ldg_release_all(bt->p), LDG_OK);
  ldg_marks *m;
  (void)enq(bt->q);
  CHECK_RC(ldg_device_marks(bt->l, 0, &m), LDG_OK);
  CHECK_RC(ldg_release_marks(m), LDG_OK);
  CHECK_EQ_U(ldg_pending_count(bt->q), 0);
  CHECK_RC(ldg_device_marks(bt->l, 0, &m), LDG_OK);
  ldg_marks_discard(m);
  (void)enq(bt->d);
  CHECK_RC(ldg_stream_destroy(bt->d), LDG_OK);
  (void)enq(bt->u);
  ldg_stream_unref(bt->u); /* the last reference: destroys u */
  bt->u = NULL;
  CHECK(!ldg_holds_vector(bt->l, vec));
}

static void battery_end(struct battery *bt) {
  ldg_stream *live[] = {bt->p, bt->q, bt->nb};
  for (int i = 0; i < 3; i++) {
    CHECK_RC(ldg_stream_destroy(live[i]), LDG_OK);
    ldg_stream_unref(live[i]);
  }
  ldg_stream_unref(bt->d);
}

static void run_battery(struct battery *bt) {
  struct worker r;
  worker_start(&r, "calls beside the parked mutex holder", 0, NULL, false,
               battery_run, bt);
  worker_join(&r);
}

static void do_destroy(void *arg) { CHECK_RC(ldg_stream_destroy(arg), LDG_OK); }

static void lock_holders(void) {
  begin("a thread parked holding the registry mutex blocks no other call");
  /* 1. Inside ldg_stream_create. */
  {
    ldg_ledger *l;
    CHECK_RC(ldg_ledger_create(&l), LDG_OK);
    struct battery bt;
    battery_make(&bt, l);
    struct create_arg ca = {l, NULL};
    struct worker c;
    worker_start(&c, "ldg_stream_create", LDG__HOOK_REGISTRY_LOCKED, NULL,
                 false, do_create, &ca);
    worker_reached(&c);
    run_battery(&bt);
    worker_go(&c);
    worker_join(&c);
    battery_end(&bt);
    CHECK_RC(ldg_stream_destroy(ca.s), LDG_OK);
    ldg_stream_unref(ca.s);
    give_back_all(l);
    ldg_ledger_destroy(l);
  }
  /* 2. Inside the unlink drain: a destroy that won the trylock. */
  {
    ldg_ledger *l;
    CHECK_RC(ldg_ledger_create(&l), LDG_OK);
    struct battery bt;
    battery_make(&bt, l);
    ldg_stream *x = mk(l);
    (void)enq(x);
    struct worker c;
    worker_start(&c, "the unlink drain of ldg_stream_destroy",
                 LDG__HOOK_REGISTRY_LOCKED, x, false, do_destroy, x);
    worker_reached(&c);
    run_battery(&bt);
    worker_go(&c);
    worker_join(&c);
    ldg_stream_unref(x);
    battery_end(&bt);
    give_back_all(l);
    ldg_ledger_destroy(l);
  }
  /* 3. Inside ldg_ledger_destroy's walk (of another ledger: nothing else
   * may run on the one being destroyed but the holders' unrefs). */
  {
    ldg_ledger *l, *l2;
    CHECK_RC(ldg_ledger_create(&l), LDG_OK);
    CHECK_RC(ldg_ledger_create(&l2), LDG_OK);
    struct battery bt;
    battery_make(&bt, l);
    /* Parked before its walk takes a reference (ldg_ledger_destroy takes
     * every stream of a batch, h among them). */
    ldg_stream *h = mk(l2), *h2 = mk(l2);
    int h0 = enq(h);
    struct worker c, u;
    worker_start(&c, "ldg_ledger_destroy's walk", LDG__HOOK_REGISTRY_LOCKED,
                 NULL, false, do_ledger_destroy, l2);
    worker_reached(&c);
    run_battery(&bt);
    /* A holder's last unref on the ledger being destroyed completes too. */
    worker_start(&u, "the last unref of a stream of the parked ledger", 0,
                 NULL, false, do_unref, h);
    worker_join(&u);
    expect_runs(h0, h0 + 1, 1, "h's keep");
    worker_go(&c);
    worker_join(&c);
    ldg_stream_unref(h2); /* valid (destroyed) until unreferenced */
    battery_end(&bt);
    give_back_all(l);
    ldg_ledger_destroy(l);
  }
  expect_runs(0, atomic_load(&g_nk), 1, "every keep");
  pass();
}

/* ---- retracted-not-pooled (mutation sweep) -------------------------------- */

static void do_enqueue_refused(void *arg) {
  int k = atomic_fetch_add(&g_nk, 1);
  atomic_store(&g_runs[k], 0);
  CHECK_RC(ldg_enqueue(arg, (ldg_keep){keep_run, &g_runs[k]}, NULL, 0, NULL,
                       0, NULL),
           LDG_EDESTROYED);
  atomic_store(&g_runs[k], 1); /* refused: its owner releases it */
}

static void retracted_not_pooled(void) {
  begin("a segment with a retracted slot is retired but never pooled");
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s = mk(l);
  for (int i = 0; i < 7; i++) (void)enq(s);
  /* E reserves seq 8, the first segment's last, and is parked. */
  struct worker e;
  worker_start(&e, "E enqueueing seq 8", LDG__HOOK_ENQUEUE_RESERVED, s, false,
               do_enqueue_refused, s);
  worker_reached(&e);
  (void)enq(s); /* seq 9: a second segment follows the first */
  /* Destroy asks E about seq 8 and leaves it; E then finds s destroyed: it retracts
   * the slot and completes the first segment, which is retired. */
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  worker_go(&e);
  worker_join(&e);
  ldg_quiesce();
  /* Its slot 8 is RETRACTED, not EMPTY: it must not be reused. */
  CHECK_EQ_U(ldg__pool_count(l, 0), 0);
  /* A new stream's first segment (from the pool, if one were there) is
   * clean: no entry of it is released before its release. */
  ldg_stream *t = mk(l);
  int t0 = atomic_load(&g_nk);
  for (int i = 0; i < 8; i++) (void)enq(t);
  expect_runs(t0, t0 + 8, 0, "a new stream's entries, before any release");
  CHECK_RC(ldg_release(t, ldg_mark(t)), LDG_OK);
  ldg_stream_unref(s);
  ldg_stream_unref(t);
  expect_runs(0, atomic_load(&g_nk), 1, "every keep");
  give_back_all(l);
  ldg_ledger_destroy(l);
  pass();
}

static const struct {
  const char *name;
  void (*run)(void);
} k_cases[] = {
    {"destroy-vs-finalize", destroy_vs_finalize},
    {"pool-pop-vs-link", pool_pop_vs_link},
    {"release-vs-reglock", release_vs_reglock},
    {"extend-linked", extend_linked},
    {"add-wait-reenter", add_wait_reenter},
    {"add-wait-destroys", add_wait_destroys},
    {"enqueue-reenter", enqueue_reenter},
    {"lock-holders", lock_holders},
    {"retracted-not-pooled", retracted_not_pooled},
    {"snapshot-vs-finalize", snapshot_vs_finalize},
    {"trim-vs-pop", trim_vs_pop},
    {"spare-drop-vs-pop", spare_drop_vs_pop},
    {"spare-one-preparer", spare_one_preparer},
    {"spare-aside-vs-pop", spare_aside_vs_pop},
    {"spare-claim-vs-extend", spare_claim_vs_extend},
    {"abandon-vs-publish", abandon_vs_publish},
};

int main(int argc, char **argv) {
  if (argc > 2) {
    fprintf(stderr, "usage: interleave_test [CASE]\n");
    return 2;
  }
  CHECK(ldg__set_hook(park_hook, NULL)); /* the hooks build */
  int ran = 0;
  for (size_t i = 0; i < sizeof(k_cases) / sizeof(k_cases[0]); i++) {
    if (argc == 2 && strcmp(argv[1], k_cases[i].name) != 0) continue;
    k_cases[i].run();
    ran++;
  }
  CHECK(ldg__set_hook(NULL, NULL));
  if (ran == 0) {
    fprintf(stderr, "interleave_test: no case named %s\n", argv[1]);
    return 2;
  }
  printf("interleave_test: PASS, %d cases\n", ran);
  return 0;
}
