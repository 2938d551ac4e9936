/*
 * Publication on a shared stream (ledger/ring.c, PUBLICATION, pub11): the
 * enqueuer stores FULL and reads its slot's ask; a release that finds the
 * slot EMPTY asks in the slot, runs membarrier and reads it again. Linked
 * with the test hooks to force the orders; every case ends with every keep
 * run exactly once, nothing pending, no id in the vector index and no ask
 * left on any slot (overtake.h's teardown).
 *
 *   overtake-parked   the enqueuer parked before its store: a release asks,
 *                     leaves, returns without it; the enqueuer then finds
 *                     the ask and releases its entry itself.
 *   overtake-stored   parked between its store and its load of the ask: the
 *                     release reads FULL and takes it, asking nothing.
 *   both-release      the release asked before the store and reads FULL
 *                     after its fence; the enqueuer read the ask and is
 *                     parked before its CAS: the release's CAS wins.
 *   both-enqueuer     the same, the enqueuer's CAS first (parked after it,
 *                     before it takes the entry): the release's CAS fails
 *                     and it leaves the entry, FULL, to the enqueuer.
 *   two-asked         two enqueuers parked before their stores; two
 *                     releases ask about their seqs at once, each in its
 *                     own slot (one word on the stream could not hold
 *                     both); each enqueuer takes its own entry back.
 *   one-release-two   one release asks about two parked enqueuers' seqs
 *                     in turn and returns; they take their entries back in
 *                     the other order.
 *   destroy-reserved  the destroyer asks about a parked enqueuer's seq and
 *                     returns; the enqueuer reads destroyed, retracts,
 *                     takes the ask off: refused, its keep kept.
 *   destroy-stored    parked after its store: the destroyer takes it.
 *   race              two enqueuers and two releasers racing freely over
 *                     many segments (asks in reused slots): every keep
 *                     once, no ask left.
 * Deterministic assertions only: races decide which outcome, never whether
 * the contract holds.
 */
#define PARK_TEST_NAME "shared_pub_test"
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"
#include "tests/torture/park_check.h"
#define MAX_KEEPS (1 << 18)
#include "tests/torture/keep_count.h"
#include "tests/torture/overtake.h"

static const unsigned SH = LDG_STREAM_SHARED;

/* The asks on s as overtake.h's cases count them: 1 per slot asked. */
static uint64_t slot_asks(ldg_stream *s) { return ldg__testing_slot_asks(s); }

static void test_overtake_stored(void) {
  g_case = "overtake-stored";
  ldg_stream *s;
  ldg_ledger *l = ot_setup(&s, 1, SH);
  ot_arm(0, LDG__HOOK_ENQUEUE_STORED, T_ISSUER);
  struct ot_call e = OT_CALL(T_ISSUER, s, 1, 0), r = OT_CALL(T_R1, s, 0, 1);
  pthread_t te, tr;
  ot_start(&e, &te);
  ot_wait_parked(0); /* FULL stored, the ask not read: in a read section */
  uint64_t heavy = ldg__testing_asym_heavy_calls();
  ot_start(&r, &tr);
  ot_join(&r, tr, "overtake-stored: the release returns");
  CHECK_RC(r.rc, LDG_OK);
  /* Read FULL: no ask, no membarrier (ledger.h, table note (j)). */
  CHECK_EQ_U(ldg__testing_asym_heavy_calls() - heavy, 0);
  ran_once_by(1, T_R1);
  CHECK_EQ_U(ldg__testing_slot_asks(s), 0); /* FULL read: nothing asked */
  ot_go(0);
  ot_join(&e, te, "overtake-stored: the enqueuer returns");
  CHECK_RC(e.rc, LDG_OK);
  CHECK_EQ_U(ran_of(1), 1);
  ot_teardown(l, s, 1);
}

/* The release asked (parked before its fence) while the enqueuer was
 * parked before its store; then the enqueuer stores, reads the ask and is
 * parked at `enq_point`: ENQUEUE_ASK_SEEN (before its CAS: the release's
 * CAS then wins) or ENQUEUE_GIVEN_BACK (after winning its CAS: the
 * release's fails). */
static void test_both(bool release_wins) {
  g_case = release_wins ? "both-release" : "both-enqueuer";
  ldg_stream *s;
  ldg_ledger *l = ot_setup(&s, 1, SH);
  ot_arm(0, LDG__HOOK_ENQUEUE_RESERVED, T_ISSUER);
  ot_arm(1, LDG__HOOK_RELEASE_ASKED, T_R1);
  ot_arm(2,
         release_wins ? LDG__HOOK_ENQUEUE_ASK_SEEN
                      : LDG__HOOK_ENQUEUE_GIVEN_BACK,
         T_ISSUER);
  struct ot_call e = OT_CALL(T_ISSUER, s, 1, 0), r = OT_CALL(T_R1, s, 0, 1);
  pthread_t te, tr;
  ot_start(&e, &te);
  ot_wait_parked(0);
  ot_start(&r, &tr);
  ot_wait_parked(1); /* asked, no fence yet */
  CHECK_EQ_U(ldg__testing_slot_asks(s), 1);
  ot_go(0);
  ot_wait_parked(2); /* FULL stored, the ask read */
  ot_go(1);
  ot_join(&r, tr, "both: the release returns");
  CHECK_RC(r.rc, LDG_OK);
  if (release_wins) {
    ran_once_by(1, T_R1);
  } else {
    CHECK_EQ_U(ran_of(1), 0); /* the enqueuer's: its CAS won */
  }
  ot_go(2);
  ot_join(&e, te, "both: the enqueuer returns");
  CHECK_RC(e.rc, LDG_OK);
  ran_once_by(1, release_wins ? T_R1 : T_ISSUER);
  ot_teardown(l, s, 1);
}

/* Two enqueuers parked before their stores (seqs 1 and 2). two_releases:
 * R1 owns seq 1 and is parked with its ask on, while R2 (owning seq 2)
 * asks, finds seq 2 EMPTY after its fence and returns; else one release
 * owns both and asks about each. The enqueuers then go in the order 2, 1,
 * each taking its own entry back. */
static void test_two_asked(bool two_releases) {
  g_case = two_releases ? "two-asked" : "one-release-two";
  ldg_stream *s;
  ldg_ledger *l = ot_setup(&s, 2, SH);
  ot_arm(0, LDG__HOOK_ENQUEUE_RESERVED, T_ISSUER);
  ot_arm(1, LDG__HOOK_ENQUEUE_RESERVED, T_E2);
  struct ot_call e1 = OT_CALL(T_ISSUER, s, 1, 0), e2 = OT_CALL(T_E2, s, 2, 0),
                 r1 = OT_CALL(T_R1, s, 0, two_releases ? 1 : 2),
                 r2 = OT_CALL(T_R2, s, 0, 2);
  pthread_t te1, te2, tr1, tr2;
  ot_start(&e1, &te1);
  ot_wait_parked(0);
  ot_start(&e2, &te2);
  ot_wait_parked(1);
  CHECK_EQ_U(ldg_mark(s), 2);
  if (two_releases) {
    ot_arm(2, LDG__HOOK_RELEASE_ASKED, T_R1);
    ot_start(&r1, &tr1);
    ot_wait_parked(2); /* R1's ask on seq 1's slot, no fence yet */
    ot_start(&r2, &tr2);
    ot_join(&r2, tr2, "two-asked: R2 returns, R1 and the enqueuers parked");
    CHECK_RC(r2.rc, LDG_OK);
    CHECK_EQ_U(ldg__testing_slot_asks(s), 2); /* both asks on at once */
  } else {
    ot_start(&r1, &tr1);
    ot_join(&r1, tr1, "one-release-two: the release returns");
    CHECK_EQ_U(ldg__testing_slot_asks(s), 2);
  }
  CHECK_EQ_U(ran_of(1), 0);
  CHECK_EQ_U(ran_of(2), 0);
  ot_go(1);
  ot_join(&e2, te2, "two-asked: the second enqueuer returns");
  CHECK_RC(e2.rc, LDG_OK);
  CHECK_EQ_U(e2.seq, 2);
  ran_once_by(2, T_E2);
  CHECK_EQ_U(ran_of(1), 0);
  if (two_releases) {
    ot_go(2); /* R1's fence, then seq 1 still EMPTY: left to E1 */
    ot_join(&r1, tr1, "two-asked: R1 returns");
  }
  CHECK_RC(r1.rc, LDG_OK);
  CHECK_EQ_U(ran_of(1), 0);
  CHECK_EQ_U(ldg__testing_slot_asks(s), 1);
  ot_go(0);
  ot_join(&e1, te1, "two-asked: the first enqueuer returns");
  CHECK_RC(e1.rc, LDG_OK);
  CHECK_EQ_U(e1.seq, 1);
  ran_once_by(1, T_ISSUER);
  ot_teardown(l, s, 2);
}

/* ---- race: two enqueuers, two releasers, racing freely ----------------------- */

static struct {
  ldg_stream *s;
  atomic_bool stop;
  uint32_t n;
} ra;

static void *ra_releaser(void *arg) {
  my_tag = (int)(uintptr_t)arg;
  while (!atomic_load(&ra.stop))
    CHECK_RC(ldg_release(ra.s, ldg_mark(ra.s)), LDG_OK);
  return NULL;
}

static void *ra_enqueuer(void *arg) {
  uint32_t first = (uint32_t)(uintptr_t)arg; /* 1 or 2: odd or even ids */
  my_tag = first == 1 ? T_ISSUER : T_E2;
  for (uint32_t i = first; i <= ra.n; i += 2) {
    CHECK_RC(ldg_enqueue(ra.s, keep_of(i), &(uint64_t){i % 64}, 1, NULL, 0,
                         NULL),
             LDG_OK);
  }
  return NULL;
}

static void test_race(void) {
  g_case = "race";
  ra.n = SANITIZED ? 20000 : 200000;
  reset(ra.n + 1);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  CHECK_RC(ldg_stream_create(l, 0, SH, NULL, NULL, &ra.s), LDG_OK);
  atomic_store(&ra.stop, false);
  pthread_t r1, r2, e1, e2;
  CHECK(pthread_create(&r1, NULL, ra_releaser, (void *)(uintptr_t)T_R1) == 0);
  CHECK(pthread_create(&r2, NULL, ra_releaser, (void *)(uintptr_t)T_R2) == 0);
  CHECK(pthread_create(&e1, NULL, ra_enqueuer, (void *)(uintptr_t)1) == 0);
  CHECK(pthread_create(&e2, NULL, ra_enqueuer, (void *)(uintptr_t)2) == 0);
  pthread_join(e1, NULL);
  pthread_join(e2, NULL);
  atomic_store(&ra.stop, true);
  pthread_join(r1, NULL);
  pthread_join(r2, NULL);
  CHECK_RC(ldg_release(ra.s, ldg_mark(ra.s)), LDG_OK);
  for (uint32_t i = 1; i <= ra.n; i++) {
    if (ran_of(i) != 1) FAIL("keep %u ran %u times", i, ran_of(i));
  }
  CHECK_EQ_U(ldg_pending_count(ra.s), 0);
  CHECK_EQ_U(ldg__testing_slot_asks(ra.s), 0);
  ldg_stream_unref(ra.s);
  ldg_ledger_destroy(l);
  printf("ok - %s (%u enqueues by two threads, two releasers)\n", g_case,
         ra.n);
}

int main(void) {
  if (!ldg__set_hook(NULL, NULL)) {
    fprintf(stderr, "shared_pub_test: built without LDG_TEST_HOOKS\n");
    return 1;
  }
  ot_overtake_parked(SH, slot_asks, 1);
  test_overtake_stored();
  test_both(true);
  test_both(false);
  test_two_asked(true);
  test_two_asked(false);
  ot_destroy_publication(false, SH, slot_asks);
  ot_destroy_publication(true, SH, slot_asks);
  test_race();
  return 0;
}
