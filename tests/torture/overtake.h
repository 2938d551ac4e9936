/*
 * The overtaking tests' parks and calls, shared by single_issuer_test
 * (ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER) and shared_pub_test
 * (PUBLICATION): threads tagged by role make one call each (an enqueue, a
 * release, a destroy), and a hook parks a tagged thread at an armed point
 * until the test lets it go. Include after park_check.h and keep_count.h,
 * in one test file.
 *
 * Parks: a thread tagged `who` passing `point` on the target stream parks
 * once (armed), posts `parked` and waits for `go`. Thread tags: 1 the
 * issuer (a shared stream's first enqueuer), 2 and 3 releases, 4 the
 * destroyer, 5 a shared stream's second enqueuer.
 */
#ifndef STREAMLEDGER_TESTS_TORTURE_OVERTAKE_H
#define STREAMLEDGER_TESTS_TORTURE_OVERTAKE_H

enum {
  T_ISSUER = 1,
  T_R1 = 2,
  T_R2 = 3,
  T_DESTROYER = 4,
  T_E2 = 5, /* a second enqueuer (shared streams) */
  N_PARKS = 4
};

static struct {
  ldg_stream *target;
  struct {
    int point, who;
    atomic_bool armed;
    sem_t parked, go;
  } p[N_PARKS];
} ot;

static void ot_hook(enum ldg__hook_point point, struct ldg_stream *s,
                    void *arg) {
  (void)arg;
  if (s != ot.target) return;
  for (int i = 0; i < N_PARKS; i++) {
    if (ot.p[i].point != (int)point || ot.p[i].who != my_tag) continue;
    if (!atomic_exchange(&ot.p[i].armed, false)) continue;
    sem_post(&ot.p[i].parked);
    sem_wait_or_fail(&ot.p[i].go, "overtaking: a parked thread let go");
  }
}

/* Arms park i: thread `who` at `point`. */
static void ot_arm(int i, int point, int who) {
  ot.p[i].point = point;
  ot.p[i].who = who;
  atomic_store(&ot.p[i].armed, true);
}
static void ot_wait_parked(int i) {
  sem_wait_or_fail(&ot.p[i].parked, "overtaking: thread reached its park");
}
static void ot_go(int i) { sem_post(&ot.p[i].go); }

struct ot_call {
  int tag;
  ldg_stream *s;
  uint32_t id;  /* enqueue: the keep's id; release: unused */
  ldg_seq upto; /* release: upto; 0 = enqueue */
  int rc;
  ldg_seq seq;
  sem_t done;
};

#define OT_CALL(tag_, s_, id_, upto_) \
  {.tag = (tag_), .s = (s_), .id = (id_), .upto = (upto_), .rc = 1}

static void *ot_thread(void *p) {
  struct ot_call *c = p;
  my_tag = c->tag;
  if (c->upto == 0)
    c->rc = ldg_enqueue(c->s, keep_of(c->id), &(uint64_t){c->id}, 1, NULL,
                        0, &c->seq);
  else if (c->tag == T_DESTROYER)
    c->rc = ldg_stream_destroy(c->s);
  else
    c->rc = ldg_release(c->s, c->upto);
  sem_post(&c->done);
  return NULL;
}

static void ot_start(struct ot_call *c, pthread_t *th) {
  sem_init(&c->done, 0, 0);
  CHECK(pthread_create(th, NULL, ot_thread, c) == 0);
}

/* Waits for c's call to return (a watchdog, not a timing assertion). */
static void ot_join(struct ot_call *c, pthread_t th, const char *what) {
  sem_wait_or_fail(&c->done, what);
  pthread_join(th, NULL);
  sem_destroy(&c->done);
}

/* Keep id ran exactly once so far, on the thread tagged tag. */
#define ran_once_by(id, tag)                           \
  do {                                                 \
    CHECK_EQ_U(ran_of(id), 1);                         \
    CHECK_EQ_U(atomic_load(&ran_by[(id)]), (tag));     \
  } while (0)

static ldg_ledger *ot_setup(ldg_stream **s, uint32_t n_keeps, unsigned flags) {
  reset(n_keeps + 1);
  for (int i = 0; i < MAX_BY; i++) atomic_store(&ran_by[i], 0);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  CHECK_RC(ldg_ledger_index_vectors(l, 64), LDG_OK);
  CHECK_RC(ldg_stream_create(l, 0, flags, NULL, NULL, s), LDG_OK);
  ot.target = *s;
  for (int i = 0; i < N_PARKS; i++) {
    atomic_store(&ot.p[i].armed, false);
    sem_init(&ot.p[i].parked, 0, 0);
    sem_init(&ot.p[i].go, 0, 0);
  }
  CHECK(ldg__set_hook(ot_hook, NULL));
  return l;
}

static void ot_teardown(ldg_ledger *l, ldg_stream *s, uint32_t n) {
  ldg__set_hook(NULL, NULL);
  CHECK_EQ_U(ldg__testing_asked(s), 0);
  CHECK_EQ_U(ldg__testing_slot_asks(s), 0); /* every ask taken off */
  CHECK_EQ_U(ldg_pending_count(s), 0);
  for (uint32_t i = 1; i <= n; i++) {
    if (ran_of(i) != 1) FAIL("keep %u ran %u times", i, ran_of(i));
    CHECK(!ldg_holds_vector(l, i));
  }
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  for (int i = 0; i < N_PARKS; i++) {
    sem_destroy(&ot.p[i].parked);
    sem_destroy(&ot.p[i].go);
  }
  printf("ok - %s\n", g_case);
}

/* ---- Cases run on both kinds of stream ------------------------------------
 * asks(s): what is asked on s, 0 when nothing (a one-publisher stream: the
 * seq s->asked names; a shared one: the slots asked, ldg__testing_slot_asks). */

/* The enqueuer parked between its reservation and its publication: a
 * release owning the seq asks, leaves, and returns without it (the stall:
 * it never waits for the enqueuer; asks(s) reads `asked` then); the
 * enqueuer then finds the ask and releases its entry itself. The slot's
 * next life is published and taken as any. */
static void ot_overtake_parked(unsigned flags, uint64_t (*asks)(ldg_stream *),
                               uint64_t asked) {
  g_case = "overtake-parked";
  ldg_stream *s;
  ldg_ledger *l = ot_setup(&s, 3, flags);
  my_tag = T_ISSUER;
  CHECK_RC(ldg_enqueue(s, keep_of(1), &(uint64_t){1}, 1, NULL, 0, NULL),
           LDG_OK);
  ot_arm(0, LDG__HOOK_ENQUEUE_RESERVED, T_ISSUER);
  struct ot_call e = OT_CALL(T_ISSUER, s, 2, 0), r = OT_CALL(T_R1, s, 0, 2);
  pthread_t te, tr;
  ot_start(&e, &te);
  ot_wait_parked(0);
  CHECK_EQ_U(ldg_mark(s), 2);
  uint64_t heavy = ldg__testing_asym_heavy_calls();
  ot_start(&r, &tr);
  ot_join(&r, tr, "overtake-parked: the release returns, enqueuer parked");
  CHECK_RC(r.rc, LDG_OK);
  /* ledger.h, table note (j): one membarrier for the slot it asked about. */
  CHECK_EQ_U(ldg__testing_asym_heavy_calls() - heavy, 1);
  ran_once_by(1, T_R1);
  CHECK_EQ_U(ran_of(2), 0);
  CHECK_EQ_U(asks(s), asked); /* left to the enqueuer */
  ot_go(0);
  ot_join(&e, te, "overtake-parked: the enqueuer returns");
  CHECK_RC(e.rc, LDG_OK);
  CHECK_EQ_U(e.seq, 2);
  ran_once_by(2, T_ISSUER);
  CHECK_RC(ldg_enqueue(s, keep_of(3), &(uint64_t){3}, 1, NULL, 0, NULL),
           LDG_OK);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  ot_teardown(l, s, 3);
}

/* Destroy racing the publication: the enqueuer parked after its
 * reservation (the destroyer asks, leaves; the enqueuer reads destroyed,
 * retracts and takes the ask off: refused, keep kept), or after its store
 * of FULL (the destroyer takes it: accepted, released once). */
static void ot_destroy_publication(bool stored, unsigned flags,
                                   uint64_t (*asks)(ldg_stream *)) {
  g_case = stored ? "destroy-stored" : "destroy-reserved";
  ldg_stream *s;
  ldg_ledger *l = ot_setup(&s, 1, flags);
  ot_arm(0, stored ? LDG__HOOK_ENQUEUE_STORED : LDG__HOOK_ENQUEUE_RESERVED,
         T_ISSUER);
  struct ot_call e = OT_CALL(T_ISSUER, s, 1, 0),
                 d = OT_CALL(T_DESTROYER, s, 0, 1);
  pthread_t te, td;
  ot_start(&e, &te);
  ot_wait_parked(0);
  ot_start(&d, &td);
  ot_join(&d, td, "destroy-publication: destroy returns, enqueuer parked");
  CHECK_RC(d.rc, LDG_OK);
  CHECK_EQ_U(asks(s), stored ? 0 : 1);
  CHECK_EQ_U(ran_of(1), stored ? 1 : 0);
  ot_go(0);
  ot_join(&e, te, "destroy-publication: the enqueuer returns");
  CHECK_RC(e.rc, stored ? LDG_OK : LDG_EDESTROYED);
  CHECK_EQ_U(ran_of(1), stored ? 1 : 0);
  if (!stored) atomic_store(&ran[1], 1); /* refused: kept, as it should */
  ot_teardown(l, s, 1);
}

#endif /* STREAMLEDGER_TESTS_TORTURE_OVERTAKE_H */
