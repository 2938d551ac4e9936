/*
 * Owned streams (ledger/owned.c, OWNED STREAMS): a default stream is
 * reserved on without a locked instruction by the one thread that issues to
 * it, until another thread reserves on it and revokes that for good. Linked
 * with the test hooks to park the owner and the revokers at the protocol's
 * steps. Every case checks that each accepted keep ran exactly once and that
 * no seq was handed out twice (the seqs ldg_enqueue returned).
 *
 *   basics           one thread: seqs from 1, marks, pending counts, waits,
 *                    queries and releases see the owner's otail; the ring
 *                    grows ahead as a shared stream's does; LDG_STREAM_SHARED
 *                    streams are never owned; bad flag combinations refused.
 *   checked-parked   the owner parked after R1 and its check, before its
 *                   store: another thread revokes and takes the contested
 *                    seq; the owner, resumed, finds it taken and reserves
 *                    again on the shared path (no seq twice).
 *   stored-parked    the owner parked after its store, before R2: the
 *                    revoker sees the store, the owner keeps its seq.
 *   no-hole          a revocation while the owner is idle: the contested
 *                    seq goes to the revoker, seqs stay dense.
 *   revoker-stalled  a revoker parked after its membarrier, before it
 *                    installs tail (forever, as far as the others know):
 *                    the owner's next enqueue helps and installs, others
 *                    enqueue and release; the revoker, resumed, loses.
 *   owner-stalled    the owner parked before its store while others
 *                    revoke, enqueue and release to the mark: none waits.
 *   destroy-parked   the owner parked after its store while the stream is
 *                    destroyed: refused (its keep never runs) or released
 *                    by the destroy: never both, never lost.
 *   destroy-race     rounds of an owner, a releaser and a destroyer racing
 *                    freely.
 *   extend-revoked   the owner revoked while it extends the ring (parked
 *                    inside the extension), the revoker parked before it
 *                    installs tail: the owner helps, and never takes the
 *                    shared path before tail is installed.
 *   installer-asked  (pub9) the owner parked before its store, a revoker
 *                    parked after reading otail and before installing
 *                    tail; the owner stores the contested seq and parks
 *                    before R2; a release (tail 0) asks about that seq;
 *                    the installer, let go, wins it and takes its entry
 *                    back (it reads the ask); the owner loses it.
 *   ledger-destroy   ldg_ledger_destroy with 64 owned streams and 64
 *                    unclaimed ones: one heavy barrier (membarrier) for
 *                    all, every keep once.
 *   many-revokers    several threads revoke at once (parked together after
 *                    their membarrier, then let go), with the owner
 *                    enqueuing; then all enqueue freely.
 *   revoke-race      rounds of an owner, two late joiners and a releaser
 *                    racing freely on a fresh stream (revocations at any
 *                    step of the owner's, extensions included).
 *   thread-exit      the owner exits; a new thread (a new token, never the
 *                    old one) revokes and enqueues.
 *   overtake-reserved, overtake-stored
 *                    (pub9: the owner publishes with a plain store) the
 *                    owner parked before (after) its store of FULL while a
 *                    release covers its seq: it asks and leaves the entry
 *                    to the owner, which takes it back (takes it).
 *   overtake-revoked-reserved, overtake-revoked-stored
 *                    the same across a revocation: the owner parked
 *                    mid-publication, a revoker installs tail and
 *                    enqueues the seq after it, a release covers both: the
 *                    owner's seq (below the installed base) is asked about,
 *                    the installer's is not; each keep runs once.
 * Deterministic assertions only: races decide which outcome, never whether
 * the contract holds.
 */
#define PARK_TEST_NAME "owned_test"
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"
#include "tests/torture/park_check.h"
#include "tests/torture/park_one.h"
#include "tests/torture/destroy_race.h"
#include "tests/torture/keep_count.h"

/* Enqueues keep id on s, records its seq. */
static int enq(ldg_stream *s, uint32_t id) {
  ldg_seq q = 0;
  int rc = ldg_enqueue(s, keep_of(id), &(uint64_t){id}, 1, NULL, 0, &q);
  if (rc == LDG_OK) atomic_store(&seq_of[id], q);
  return rc;
}

/* Ids [1, n]: every accepted one (seq_of != 0) ran once, the others never;
 * no seq twice; the accepted seqs are exactly 1..mark when dense. */
static void check_once(uint32_t n, ldg_seq mark, bool dense) {
  static uint8_t seen[MAX_KEEPS];
  CHECK(mark < MAX_KEEPS);
  memset(seen, 0, mark + 1);
  uint32_t accepted = 0;
  for (uint32_t i = 1; i <= n; i++) {
    uint64_t q = atomic_load(&seq_of[i]);
    if (q == 0) {
      if (ran_of(i) != 0) FAIL("refused keep %u ran %u times", i, ran_of(i));
      continue;
    }
    accepted++;
    if (ran_of(i) != 1)
      FAIL("keep %u (seq %llu) ran %u times", i, (unsigned long long)q,
           ran_of(i));
    if (q > mark)
      FAIL("keep %u got seq %llu past the mark %llu", i, (unsigned long long)q,
           (unsigned long long)mark);
    if (seen[q]++)
      FAIL("seq %llu handed out twice (keep %u)", (unsigned long long)q, i);
  }
  if (dense && accepted != mark)
    FAIL("%u accepted enqueues, mark %llu", accepted, (unsigned long long)mark);
}

/* ---- Parking ------------------------------------------------------------- */

/* One thread at a time parks at one point on one stream (park_one.h). A
 * thread may also park at points of its own, in turn (my_stops, my_left:
 * each stop's point, with its semaphores): extend-revoked parks two
 * threads at two points, installer-asked one of them at two. */
struct stop {
  int point;
  sem_t parked, go;
};
static _Thread_local struct stop *my_stops;
static _Thread_local int my_left;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (s == pk.target && my_left > 0 && (int)point == my_stops->point) {
    struct stop *at = my_stops++;
    my_left--;
    sem_post(&at->parked);
    sem_wait_or_fail(&at->go, "parked thread let go");
    return;
  }
  park_armed(point, s);
}

/* Threads park at stops of their own on s (a job's stops), no armed one. */
static void stops_init(ldg_stream *s, struct stop *st, int n) {
  for (int i = 0; i < n; i++) {
    sem_init(&st[i].parked, 0, 0);
    sem_init(&st[i].go, 0, 0);
  }
  pk.target = s;
  atomic_store(&pk.point, -1);
  CHECK(ldg__set_hook(park_hook, NULL));
}

static void stops_done(struct stop *st, int n) {
  ldg__set_hook(NULL, NULL);
  for (int i = 0; i < n; i++) {
    sem_destroy(&st[i].parked);
    sem_destroy(&st[i].go);
  }
}

struct job {
  ldg_stream *s;
  uint32_t first, n; /* ids first .. first + n - 1 */
  int park_at;       /* the enqueue (from 0) that may park; -1: none */
  int rc;            /* the last enqueue's */
  int n_stops;       /* with stops: park at each, in turn, from the
                        park_at'th enqueue on */
  struct stop *stops;
};

static void *enqueuer(void *p) {
  struct job *j = p;
  for (uint32_t i = 0; i < j->n; i++) {
    park_me = (int)i == j->park_at && j->stops == NULL;
    if ((int)i == j->park_at && j->stops != NULL) {
      my_stops = j->stops;
      my_left = j->n_stops;
    }
    j->rc = enq(j->s, j->first + i);
    if (j->rc == LDG_EDESTROYED) break;
    CHECK_RC(j->rc, LDG_OK);
  }
  park_me = false;
  return NULL;
}

static void start(pthread_t *th, struct job *j) {
  CHECK(pthread_create(th, NULL, enqueuer, j) == 0);
}

static ldg_stream *new_stream(ldg_ledger **l) {
  CHECK_RC(ldg_ledger_create(l), LDG_OK);
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(*l, 0, 0, NULL, NULL, &s), LDG_OK);
  return s;
}

static void end_stream(ldg_ledger *l, ldg_stream *s) {
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  CHECK_EQ_U(ldg_pending_count(s), 0);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
}

/* Whether this machine's ledger owns streams at all (membarrier in use). */
static bool owning;

/* ---- basics -------------------------------------------------------------- */

static void test_basics(void) {
  g_case = "basics";
  reset(400);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  ldg_stream *a;
  CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &a), LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(s), owning ? 0 : 2);
  CHECK_EQ_U(ldg_mark(s), 0);
  /* Through several segments (8, then 64 and more): the owner's extension
   * at the end and its growth ahead. */
  for (uint32_t i = 1; i <= 300; i++) {
    ldg_range r = {0x10000u + i * 64u, 64};
    ldg_seq q = 0;
    CHECK_RC(ldg_enqueue(s, keep_of(i), &(uint64_t){1000 + i}, 1, &r, 1, &q),
             LDG_OK);
    atomic_store(&seq_of[i], q);
    CHECK_EQ_U(q, i);
    CHECK_EQ_U(ldg_mark(s), i); /* the owner's otail */
    CHECK(ldg__ring_segments_ahead(s) <= 1);
    CHECK(ldg__ring_tail_end(s) > i);
  }
  CHECK_EQ_U(ldg__ring_owner_state(s), owning ? 16 : 2);
  CHECK(ldg_holds_vector(l, 1300));
  CHECK(ldg_holds_host_range(l, 0x10000u + 300 * 64u, 1));
  CHECK(!ldg_holds_vector(l, 1301));
  CHECK_EQ_U(ldg_pending_count(s), 300);
  /* A wait recorded on s takes a seq of s the owner's way. */
  CHECK_RC(ldg_enqueue(a, keep_of(301), NULL, 0, NULL, 0, NULL), LDG_OK);
  ldg_seq w = 0;
  CHECK_RC(ldg_add_wait(s, a, ldg_mark(a), &w), LDG_OK);
  CHECK_EQ_U(w, 301);
  CHECK_EQ_U(ldg_pending_count(s), 300);     /* waits are not operations */
  CHECK_RC(ldg_release(s, 302), LDG_EINVAL); /* past the mark */
  CHECK_RC(ldg_release(s, 150), LDG_OK);
  for (uint32_t i = 1; i <= 300; i++) CHECK_EQ_U(ran_of(i), i <= 150 ? 1 : 0);
  CHECK_EQ_U(ldg_pending_count(s), 150);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK); /* fires the wait */
  for (uint32_t i = 1; i <= 301; i++) CHECK_EQ_U(ran_of(i), 1);
  CHECK_EQ_U(ldg_pending_count(s), 0);
  CHECK_EQ_U(ldg__ring_owner_state(s), owning ? 16 : 2); /* still owned */
  /* Opting out, and the combinations refused. */
  ldg_stream *sh, *bad;
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &sh), LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(sh), 2);
  CHECK_RC(enq(sh, 302), LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(sh), 2);
  CHECK_EQ_U(ldg_mark(sh), 1);
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED | LDG_STREAM_SINGLE_ISSUER,
                             NULL, NULL, &bad),
           LDG_EINVAL);
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SINGLE_ISSUER, NULL, NULL, &bad),
           LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(bad), 2); /* its own path */
  /* Destroying a stream nobody enqueued on leaves it shared (no barrier). */
  ldg_stream *idle;
  CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &idle), LDG_OK);
  CHECK_RC(ldg_stream_destroy(idle), LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(idle), 2);
  CHECK_RC(enq(idle, 303), LDG_EDESTROYED);
  CHECK_EQ_U(ran_of(303), 0);
  ldg_stream_unref(idle);
  ldg_stream_unref(bad);
  CHECK_RC(ldg_release(sh, ldg_mark(sh)), LDG_OK);
  CHECK_EQ_U(ran_of(302), 1);
  ldg_stream_unref(sh);
  ldg_stream_unref(a);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- checked-parked / stored-parked -------------------------------------- */

/* A fresh stream whose owner (a helper thread, *own on *to: five
 * enqueues, ids 1..5) is parked at point on its sixth (one thread: the
 * same token throughout). */
static ldg_stream *owner_parked_start(int point, ldg_ledger **l,
                                      struct job *own, pthread_t *to) {
  reset(64);
  ldg_stream *s = new_stream(l);
  *own = (struct job){s, 1, 6, 5, 0, 0, NULL};
  park_init(s, point, park_hook);
  start(to, own);
  sem_wait_or_fail(&pk.parked, "owner parked");
  CHECK_EQ_U(ldg__ring_owner_state(s), 16);
  return s;
}

/* Another thread enqueues keep 7 on s, revoking its parked owner. */
static void revoke_with_7(ldg_stream *s) {
  struct job rev = {s, 7, 1, -1, 0, 0, NULL};
  pthread_t tr;
  start(&tr, &rev);
  pthread_join(tr, NULL); /* never waits for the parked owner */
  CHECK_RC(rev.rc, LDG_OK);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
}

/* The owner parks at point on its sixth enqueue; another thread enqueues
 * one keep (revoking) and a release runs to the mark; then the owner goes
 * on. Returns (owner's sixth seq, revoker's). */
static void owner_parked_at(int point, ldg_seq *owner_seq,
                            ldg_seq *revoker_seq) {
  ldg_ledger *l;
  struct job own;
  pthread_t to;
  ldg_stream *s = owner_parked_start(point, &l, &own, &to);
  revoke_with_7(s);
  /* A release to the mark: the seq the owner is filling stays pending. */
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  CHECK_EQ_U(ran_of(7), 1);
  sem_post(&pk.go);
  pthread_join(to, NULL);
  park_done();
  CHECK_RC(own.rc, LDG_OK);
  *owner_seq = atomic_load(&seq_of[6]);
  *revoker_seq = atomic_load(&seq_of[7]);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(7, ldg_mark(s), true);
  end_stream(l, s);
}

static void test_checked_parked(void) {
  g_case = "checked-parked";
  ldg_seq o, r;
  owner_parked_at(LDG__HOOK_OWNED_CHECKED, &o, &r);
  /* The revoker read otail = 5: seq 6 is contested and goes to the
   * revoker; the owner's store of 6 is void, it reserves 7 on the shared
   * path. */
  CHECK_EQ_U(r, 6);
  CHECK_EQ_U(o, 7);
  printf("ok - %s\n", g_case);
}

static void test_stored_parked(void) {
  g_case = "stored-parked";
  ldg_seq o, r;
  owner_parked_at(LDG__HOOK_OWNED_STORED, &o, &r);
  /* The revoker saw the owner's store of 6 (membarrier): 7 is contested,
   * and the revoker's; the owner keeps 6. */
  CHECK_EQ_U(o, 6);
  CHECK_EQ_U(r, 7);
  printf("ok - %s\n", g_case);
}

/* ---- overtake-* (pub9) ----------------------------------------------------- */

/* The owner (a helper thread: five enqueues, parked at point on its sixth,
 * after its reservation: seq 6 is a one-publisher seq); with revoke,
 * another thread enqueues keep 7 meanwhile (revoking: tail installed at
 * 7, its own seq). Then a release to the mark covers the owner's seq
 * mid-publication. */
static void overtake_parked(const char *name, int point, bool revoke) {
  g_case = name;
  ldg_ledger *l;
  struct job own;
  pthread_t to;
  ldg_stream *s = owner_parked_start(point, &l, &own, &to);
  if (revoke) {
    revoke_with_7(s);
    CHECK_EQ_U(atomic_load(&seq_of[7]), 7); /* the base: T + 1 */
  }
  ldg_seq mark = ldg_mark(s);
  CHECK_EQ_U(mark, revoke ? 7 : 6);
  CHECK_RC(ldg_release(s, mark), LDG_OK);
  for (uint32_t i = 1; i <= 5; i++) CHECK_EQ_U(ran_of(i), 1);
  if (revoke) CHECK_EQ_U(ran_of(7), 1); /* CAS-published: taken */
  if (point == LDG__HOOK_ENQUEUE_RESERVED) {
    /* Not published: the release asked about seq 6 (below the installed
     * base, or tail not installed) and left the entry to its owner. An
     * abandon would leave the owner's plain store of FULL to nobody. */
    CHECK_EQ_U(ran_of(6), 0);
    CHECK_EQ_U(ldg__testing_asked(s), 6);
  } else {
    /* FULL stored: the release took it; nothing asked. */
    CHECK_EQ_U(ran_of(6), 1);
    CHECK_EQ_U(ldg__testing_asked(s), 0);
  }
  sem_post(&pk.go);
  pthread_join(to, NULL);
  park_done();
  CHECK_RC(own.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[6]), 6);
  CHECK_EQ_U(ran_of(6), 1); /* taken back by the owner, or by the release */
  CHECK_EQ_U(ldg__testing_asked(s), 0);
  CHECK_EQ_U(ldg_pending_count(s), 0);
  check_once(7, ldg_mark(s), true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

static void test_overtake(void) {
  overtake_parked("overtake-reserved", LDG__HOOK_ENQUEUE_RESERVED, false);
  overtake_parked("overtake-stored", LDG__HOOK_ENQUEUE_STORED, false);
  overtake_parked("overtake-revoked-reserved", LDG__HOOK_ENQUEUE_RESERVED,
                  true);
  overtake_parked("overtake-revoked-stored", LDG__HOOK_ENQUEUE_STORED, true);
}

/* ---- no-hole ------------------------------------------------------------- */

static void test_no_hole(void) {
  g_case = "no-hole";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  struct job own = {s, 1, 10, -1, 0, 0, NULL},
             rev = {s, 11, 10, -1, 0, 0, NULL};
  pthread_t th;
  start(&th, &own);
  pthread_join(th, NULL);
  CHECK_EQ_U(ldg_mark(s), 10);
  start(&th, &rev);
  pthread_join(th, NULL);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  /* The contested seq 11 was the revoker's own: no hole. */
  CHECK_EQ_U(atomic_load(&seq_of[11]), 11);
  CHECK_EQ_U(ldg_mark(s), 20);
  CHECK_EQ_U(ldg_pending_count(s), 20);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(20, 20, true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- revoker-stalled / owner-stalled ------------------------------------- */

static void test_revoker_stalled(void) {
  g_case = "revoker-stalled";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  /* This thread owns s. */
  for (uint32_t i = 1; i <= 3; i++) CHECK_RC(enq(s, i), LDG_OK);
  park_init(s, LDG__HOOK_REVOKE_PENDING, park_hook);
  struct job rev = {s, 10, 1, 0, 0, 0, NULL};
  pthread_t tr;
  start(&tr, &rev);
  sem_wait_or_fail(&pk.parked, "revoker parked");
  CHECK_EQ_U(ldg__ring_owner_state(s), 1); /* PENDING, tail not installed */
  CHECK_EQ_U(ldg_mark(s), 3);
  /* The owner's R1 fails: it helps, installs and takes the contested
   * seq 4 (its own otail was 3): no wait for the parked revoker. */
  CHECK_RC(enq(s, 4), LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[4]), 4);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  struct job other = {s, 5, 3, -1, 0, 0, NULL};
  pthread_t tt;
  start(&tt, &other);
  pthread_join(tt, NULL);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  for (uint32_t i = 1; i <= 7; i++) CHECK_EQ_U(ran_of(i), 1);
  sem_post(&pk.go);
  pthread_join(tr, NULL);
  park_done();
  CHECK_RC(rev.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[10]), 8); /* lost the install: shared */
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(10, ldg_mark(s), true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

static void test_owner_stalled(void) {
  g_case = "owner-stalled";
  reset(2048);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  park_init(s, LDG__HOOK_OWNED_CHECKED, park_hook);
  struct job own = {s, 1, 1, 0, 0, 0, NULL};
  pthread_t to;
  start(&to, &own);
  sem_wait_or_fail(&pk.parked, "owner parked");
  /* Others revoke and enqueue past several segments, releases run to the
   * mark: the seq the owner may still store is decided without it. */
  struct job a = {s, 2, 500, -1, 0, 0, NULL}, b = {s, 502, 500, -1, 0, 0, NULL};
  pthread_t ta, tb;
  start(&ta, &a);
  start(&tb, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  for (uint32_t i = 2; i <= 1001; i++) CHECK_EQ_U(ran_of(i), 1);
  CHECK_EQ_U(ldg_mark(s), 1000);
  sem_post(&pk.go);
  pthread_join(to, NULL);
  park_done();
  CHECK_RC(own.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[1]), 1001);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(1001, ldg_mark(s), true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- destroy-parked / destroy-race --------------------------------------- */

static void test_destroy_parked(void) {
  g_case = "destroy-parked";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  park_init(s, LDG__HOOK_OWNED_STORED, park_hook);
  /* Parked on its second enqueue (the first claimed the stream). */
  struct job own = {s, 1, 2, 1, 0, 0, NULL};
  pthread_t to;
  start(&to, &own);
  sem_wait_or_fail(&pk.parked, "owner parked after its store");
  CHECK_EQ_U(ldg_mark(s), 2);
  /* The destroy (membarrier: the stream is owned) sees seq 2 and abandons
   * its EMPTY slot; seq 1 is released. */
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  CHECK_EQ_U(ran_of(1), 1);
  sem_post(&pk.go);
  pthread_join(to, NULL);
  park_done();
  /* It reads destroyed: refused, its keep never run. */
  CHECK_RC(own.rc, LDG_EDESTROYED);
  CHECK_EQ_U(ran_of(2), 0);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  printf("ok - %s\n", g_case);
}

static void dr_reset(uint32_t n) { reset(n); }

static void dr_check(int round, uint32_t accepted, uint32_t refused_id) {
  (void)round;
  check_once(refused_id, accepted, true);
}

static void test_destroy_race(void) {
  const struct destroy_race cfg = {"destroy-race", 0, SANITIZED ? 30 : 200,
                                   MAX_KEEPS,      enq, dr_reset,
                                   dr_check};
  destroy_race_run(&cfg);
}

/* ---- extend-revoked ------------------------------------------------------ */

/* The owner, its first segment full, extends the ring and is parked inside
 * the extension (a fresh segment allocated, not linked); a revoker sets
 * PENDING, runs membarrier and is parked before it installs tail. The
 * owner, resumed, links the segment, finds it no longer owns s (R1 again)
 * and must not take the shared path while tail is 0 (it would hand out
 * seq 1 again): it helps, installs tail = 9 and takes 9. The revoker,
 * resumed, loses the install and takes 10. */
static void test_extend_revoked(void) {
  g_case = "extend-revoked";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  /* The owner's stop, the revoker's. */
  struct stop st[2] = {{.point = LDG__HOOK_SEGMENT_ALLOCATED},
                       {.point = LDG__HOOK_REVOKE_PENDING}};
  stops_init(s, st, 2);
  /* Eight enqueues fill the first segment; the ninth extends. */
  struct job own = {s, 1, 9, 8, 0, 1, &st[0]};
  struct job rev = {s, 10, 1, 0, 0, 1, &st[1]};
  pthread_t to, tr;
  start(&to, &own);
  sem_wait_or_fail(&st[0].parked, "owner parked in its extension");
  CHECK_EQ_U(ldg_mark(s), 8);
  start(&tr, &rev);
  sem_wait_or_fail(&st[1].parked, "revoker parked before its install");
  CHECK_EQ_U(ldg__ring_owner_state(s), 1);
  sem_post(&st[0].go);
  pthread_join(to, NULL);
  CHECK_RC(own.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[9]), 9);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  sem_post(&st[1].go);
  pthread_join(tr, NULL);
  CHECK_RC(rev.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[10]), 10);
  stops_done(st, 2);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(10, 10, true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- installer-asked (pub9) ---------------------------------------------- */

/* A release asks about the installer's seq while tail is still 0. The
 * owner (ids 1..5, seqs 1..5) is parked on its sixth enqueue after R1 and
 * its check (OWNED_CHECKED); a revoker (keep 7) runs membarrier, reads
 * otail = 5 and is parked before it installs tail (REVOKE_READ): its T + 1
 * is 6. The owner, let go, stores otail = 6 (the store its T missed) and
 * is parked again before R2 (OWNED_STORED). A release to the mark (6, read
 * from otail: tail is 0) finds slot 6 EMPTY and asks about it (tail read
 * 0), leaving the entry to its enqueuer. The revoker, let go, installs
 * tail = 6, wins the contested seq 6 and publishes it both ways (BOTH): it
 * reads the ask and takes its entry back, running keep 7 before
 * ldg_enqueue returns. A CAS alone would leave the entry FULL behind the
 * release, run by nobody (the model's BUG_PUB9_INSTALLER_CAS, mutant
 * pub9-installer-cas). The owner, let go, loses 6 and reserves 7 on the
 * shared path. */
static void test_installer_asked(void) {
  g_case = "installer-asked";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  /* The owner's two stops, the revoker's. */
  struct stop st[3] = {{.point = LDG__HOOK_OWNED_CHECKED},
                       {.point = LDG__HOOK_OWNED_STORED},
                       {.point = LDG__HOOK_REVOKE_READ}};
  stops_init(s, st, 3);
  struct job own = {s, 1, 6, 5, 0, 2, &st[0]};
  struct job rev = {s, 7, 1, 0, 0, 1, &st[2]};
  pthread_t to, tr;
  start(&to, &own);
  sem_wait_or_fail(&st[0].parked, "owner parked before its store");
  CHECK_EQ_U(ldg_mark(s), 5);
  start(&tr, &rev);
  sem_wait_or_fail(&st[2].parked, "revoker parked after reading otail");
  CHECK_EQ_U(ldg__ring_owner_state(s), 1); /* PENDING */
  sem_post(&st[0].go);
  sem_wait_or_fail(&st[1].parked, "owner parked after its store");
  CHECK_EQ_U(ldg_mark(s), 6); /* otail: tail not installed */
  CHECK_RC(ldg_release(s, 6), LDG_OK);
  for (uint32_t i = 1; i <= 5; i++) CHECK_EQ_U(ran_of(i), 1);
  CHECK_EQ_U(ldg__testing_asked(s), 6); /* asked: the entry left to 6's */
  sem_post(&st[2].go);
  pthread_join(tr, NULL);
  CHECK_RC(rev.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[7]), 6); /* the contested seq, won */
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  if (ran_of(7) != 1 || ldg__testing_asked(s) != 0)
    FAIL("the installer's seq 6, asked about by a release that read tail 0: "
         "keep 7 ran %u times before its enqueue returned, s->asked %llu "
         "(the ask not taken back: the entry lost)",
         ran_of(7), (unsigned long long)ldg__testing_asked(s));
  sem_post(&st[1].go);
  pthread_join(to, NULL);
  CHECK_RC(own.rc, LDG_OK);
  CHECK_EQ_U(atomic_load(&seq_of[6]), 7); /* lost 6: the shared path */
  stops_done(st, 3);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(7, 7, true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- many-revokers ------------------------------------------------------- */

enum { REVOKERS = 4 };

static struct {
  _Atomic int parked;
  sem_t go;
  ldg_stream *s;
} mr;

/* Parks every thread that passes REVOKE_PENDING on mr.s once, until all
 * REVOKERS are there (or the owner got past them: they are let go). */
static void many_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (point != LDG__HOOK_REVOKE_PENDING || s != mr.s || !park_me) return;
  park_me = false;
  atomic_fetch_add(&mr.parked, 1);
  sem_wait_or_fail(&mr.go, "revokers let go");
}

static void test_many_revokers(void) {
  g_case = "many-revokers";
  uint32_t per = SANITIZED ? 200 : 2000;
  uint32_t n = (REVOKERS + 1) * per;
  reset(n + 1);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  mr.s = s;
  atomic_store(&mr.parked, 0);
  sem_init(&mr.go, 0, 0);
  /* This thread owns s. */
  for (uint32_t i = 1; i <= 5; i++) CHECK_RC(enq(s, i), LDG_OK);
  CHECK(ldg__set_hook(many_hook, NULL));
  struct job j[REVOKERS];
  pthread_t th[REVOKERS];
  for (int i = 0; i < REVOKERS; i++) {
    j[i] = (struct job){s, 6 + per * (uint32_t)i, per, 0, 0, 0, NULL};
    start(&th[i], &j[i]);
  }
  /* Every revoker past its membarrier, none installed: PENDING. */
  while (atomic_load(&mr.parked) < REVOKERS) sched_yield();
  CHECK_EQ_U(ldg__ring_owner_state(s), 1);
  for (int i = 0; i < REVOKERS; i++) sem_post(&mr.go);
  /* The owner goes on meanwhile: it helps or takes the shared path. */
  uint32_t first = 6 + per * REVOKERS;
  for (uint32_t i = first; i < first + per - 5; i++)
    CHECK_RC(enq(s, i), LDG_OK);
  for (int i = 0; i < REVOKERS; i++) {
    pthread_join(th[i], NULL);
    CHECK_RC(j[i].rc, LDG_OK);
  }
  ldg__set_hook(NULL, NULL);
  sem_destroy(&mr.go);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(first + per - 6, ldg_mark(s), true);
  end_stream(l, s);
  printf("ok - %s (%d revokers at once)\n", g_case, REVOKERS);
}

/* ---- ledger-destroy ------------------------------------------------------ */

/* ldg_ledger_destroy of a ledger with LD_OWNED streams this thread owns
 * (it enqueued one keep on each) and as many nobody enqueued on: the owned
 * ones need the heavy side of the destroy handshake (owned.c, OWNED
 * STREAMS, "Destroy"), and one barrier serves them all (own8 made one per
 * stream); the unclaimed ones need none. Every keep once, every stream
 * destroyed. */
enum { LD_OWNED = 64 };

static void test_ledger_destroy(void) {
  g_case = "ledger-destroy";
  reset(2 * LD_OWNED + 2);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s[2 * LD_OWNED];
  for (uint32_t i = 0; i < 2 * LD_OWNED; i++) {
    CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &s[i]), LDG_OK);
    if (i < LD_OWNED) {
      CHECK_RC(enq(s[i], i + 1), LDG_OK);
      CHECK_EQ_U(ldg__ring_owner_state(s[i]), 16);
    }
  }
  uint64_t before = ldg__testing_asym_heavy_calls();
  ldg_ledger_destroy(l);
  uint64_t calls = ldg__testing_asym_heavy_calls() - before;
  for (uint32_t i = 0; i < 2 * LD_OWNED; i++) {
    if (i < LD_OWNED) CHECK_EQ_U(ran_of(i + 1), 1);
    CHECK_EQ_U(ldg__ring_owner_state(s[i]), i < LD_OWNED ? 16 : 2);
    CHECK_RC(enq(s[i], 2 * LD_OWNED + 1), LDG_EDESTROYED);
    ldg_stream_unref(s[i]);
  }
  CHECK_EQ_U(ran_of(2 * LD_OWNED + 1), 0);
  if (calls != 1)
    FAIL("ldg_ledger_destroy of %d owned streams (and %d unclaimed) made %llu "
         "heavy barriers (membarrier), not 1",
         LD_OWNED, LD_OWNED, (unsigned long long)calls);
  printf("ok - %s (%d owned streams: %llu membarrier)\n", g_case, LD_OWNED,
         (unsigned long long)calls);
}

/* ---- thread-exit --------------------------------------------------------- */

static void test_thread_exit(void) {
  g_case = "thread-exit";
  reset(64);
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  struct job a = {s, 1, 4, -1, 0, 0, NULL}, b = {s, 5, 4, -1, 0, 0, NULL};
  pthread_t th;
  start(&th, &a);
  pthread_join(th, NULL);
  CHECK_EQ_U(ldg__ring_owner_state(s), owning ? 16 : 2);
  /* A new thread, maybe at the old one's TLS address: a new token. */
  start(&th, &b);
  pthread_join(th, NULL);
  CHECK_EQ_U(ldg__ring_owner_state(s), 2);
  CHECK_EQ_U(ldg_mark(s), 8);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_once(8, 8, true);
  end_stream(l, s);
  printf("ok - %s\n", g_case);
}

/* ---- revoke-race --------------------------------------------------------- */

/* Rounds of a fresh stream: its owner enqueues RR_PER keeps (across the
 * first segments' ends: revocations land during the owner's extensions
 * too) while two other threads, started after a varying head start, each
 * enqueue RR_PER and a releaser releases to the mark. Dense seqs, every
 * keep once, every round. */
enum { RR_PER = 200 };

static struct {
  ldg_stream *s;
  atomic_bool stop;
} rr;

static void *rr_releaser(void *arg) {
  (void)arg;
  while (!atomic_load(&rr.stop))
    CHECK_RC(ldg_release(rr.s, ldg_mark(rr.s)), LDG_OK);
  return NULL;
}

static void test_revoke_race(void) {
  g_case = "revoke-race";
  int rounds = SANITIZED ? 40 : 400;
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  for (int r = 0; r < rounds; r++) {
    reset(3 * RR_PER + 1);
    CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &rr.s), LDG_OK);
    atomic_store(&rr.stop, false);
    struct job own = {rr.s, 1, RR_PER, -1, 0, 0, NULL};
    struct job a = {rr.s, 1 + RR_PER, RR_PER, -1, 0, 0, NULL};
    struct job b = {rr.s, 1 + 2 * RR_PER, RR_PER, -1, 0, 0, NULL};
    pthread_t to, ta, tb, tr;
    start(&to, &own);
    CHECK(pthread_create(&tr, NULL, rr_releaser, NULL) == 0);
    /* A varying head start; any value is correct. */
    for (volatile unsigned k = 0; k < (unsigned)(r % 23) * 150u; k++) {
    }
    start(&ta, &a);
    start(&tb, &b);
    pthread_join(to, NULL);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    atomic_store(&rr.stop, true);
    pthread_join(tr, NULL);
    CHECK_RC(ldg_release(rr.s, ldg_mark(rr.s)), LDG_OK);
    check_once(3 * RR_PER, ldg_mark(rr.s), true);
    CHECK_EQ_U(ldg_mark(rr.s), 3 * RR_PER);
    CHECK_EQ_U(ldg_pending_count(rr.s), 0);
    CHECK_RC(ldg_stream_destroy(rr.s), LDG_OK);
    ldg_stream_unref(rr.s);
  }
  ldg_ledger_destroy(l);
  printf("ok - %s (%d rounds)\n", g_case, rounds);
}

int main(void) {
  /* Whether streams are owned here: a fresh stream enqueued on once. */
  ldg_ledger *l;
  ldg_stream *s = new_stream(&l);
  CHECK_RC(enq(s, 1), LDG_OK);
  owning = ldg__ring_owner_state(s) == 16;
  end_stream(l, s);
  printf("# owned streams %s (membarrier %s)\n", owning ? "on" : "off",
         owning ? "in use" : "unavailable");
  test_basics();
  test_no_hole();
  test_thread_exit();
  test_destroy_race();
  test_revoke_race();
  if (!owning) {
    printf("ok - the parked cases skipped: no owned streams here\n");
    return 0;
  }
  test_overtake();
  test_checked_parked();
  test_stored_parked();
  test_revoker_stalled();
  test_owner_stalled();
  test_destroy_parked();
  test_extend_revoked();
  test_installer_asked();
  test_many_revokers();
  test_ledger_destroy();
  return 0;
}
