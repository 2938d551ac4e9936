/*
 * The reservation of a shared stream (ledger/reserve.c, RESERVING ON A SHARED
 * STREAM: ADD FIRST WHILE ARMED): fetch_add by ticket holders while
 * s->fast_gen is armed, with no look at tail; the CAS path keeping out of
 * the zone (the last R seqs below tail_end); a lander in the zone disarms,
 * a holder's CAS-path reservation re-arms. Linked with the test hooks to
 * park holders between their load of fast_gen and their add.
 *
 *   edge-parked     An early extender (segment.c, GROWING AHEAD) parked
 *                   right after claiming the growth (grow_at to the
 *                   segment's end - R, the zone's start); the CAS path
 *                   fills up to the zone; R = ldg__fast_reserve() ticket
 *                   holders park between their load of fast_gen (armed)
 *                   and their add, then add: each lands in the zone, below
 *                   tail_end, and the stream ends disarmed; the next
 *                   holder takes the CAS path, grows the ring at its end
 *                   itself and re-arms; every seq dense, every keep once.
 *   edge-enomem     The same edge with allocations failing: a ticketless
 *                   enqueue there is refused (the CAS path keeps out of the
 *                   zone, and cannot grow), the parked
 *                   adds land below the end (they need no memory), then a
 *                   holder's and a ticketless enqueue are refused with
 *                   LDG_ENOMEM, nothing reserved, the stream disarmed; with
 *                   memory back the refused keep is enqueued at the end.
 *   rearm-race      A disarm racing a re-arm: an armer parked before its
 *                   arming CAS, a re-arm and a late lander's disarm meanwhile:
 *                   the armer's CAS fails (fast_gen is a generation).
 *   grow-ahead      one thread with a ticket, a release every 64: the ring
 *                   always grows ahead (never does an enqueue find the
 *                   headroom down to the reserve past the first segment),
 *                   with one segment linked ahead at most, and one at
 *                   times; with a pool limit of 0, never one.
 *   tickets         more threads than tickets, all alive at once: exactly R
 *                   hold one; after they exit, new threads get them back.
 *   dense           many threads, holders and ticketless ones, enqueue on
 *                   one stream across many segments while a releaser
 *                   releases to the mark: every seq handed out once (dense
 *                   from 1 to the mark), every keep run once; at every
 *                   link at most one segment starts past the mark.
 * Its streams are created LDG_STREAM_SHARED: the path under test is the
 * shared one from the first enqueue (a default stream would be owned by
 * its first enqueuer until another thread revokes it: owned.c, OWNED
 * STREAMS, tested in owned_test).
 * Deterministic assertions only: races decide the seqs each thread gets,
 * never whether the contract holds.
 */
#define PARK_TEST_NAME "reserve_test"
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
#include "tests/torture/keep_count.h"

enum { MAX_THREADS = 64 };

/* Keeps 0..n-1 were each enqueued once, got the seqs 1..n between them (so
 * the seqs are dense), and each ran exactly once. */
static void check_dense(uint32_t n) {
  uint8_t *seen = calloc(n + 1, 1);
  CHECK(seen != NULL);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t q = atomic_load(&seq_of[i]);
    if (q < 1 || q > n)
      FAIL("keep %u got seq %llu, outside 1..%u", i, (unsigned long long)q, n);
    if (seen[q]++) FAIL("seq %llu handed out twice", (unsigned long long)q);
    if (ran_of(i) != 1)
      FAIL("keep %u (seq %llu) ran %u times", i, (unsigned long long)q,
           ran_of(i));
  }
  free(seen);
}

static void enq(ldg_stream *s, uint32_t id) {
  ldg_seq seq = 0;
  CHECK_RC(ldg_enqueue(s, keep_of(id), NULL, 0, NULL, 0, &seq), LDG_OK);
  atomic_store(&seq_of[id], seq);
}

/* ---- edge-parked, edge-enomem, rearm-race ---------------------------------- */

static struct {
  ldg_stream *target;
  atomic_bool park_checked, park_grow, park_arming;
  sem_t parked, go, grow_parked, grow_go, arm_parked, arm_go;
} pk;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (s != pk.target) return;
  if (point == LDG__HOOK_RESERVE_CHECKED && atomic_load(&pk.park_checked)) {
    sem_post(&pk.parked);
    sem_wait_or_fail(&pk.go, "edge: released by the main thread");
  } else if (point == LDG__HOOK_GROW_CLAIMED &&
             atomic_exchange(&pk.park_grow, false)) {
    sem_post(&pk.grow_parked);
    sem_wait_or_fail(&pk.grow_go, "edge: extender released");
  } else if (point == LDG__HOOK_RESERVE_ARMING &&
             atomic_exchange(&pk.park_arming, false)) {
    sem_post(&pk.arm_parked);
    sem_wait_or_fail(&pk.arm_go, "rearm-race: armer released");
  }
}

struct parked_arg {
  ldg_stream *s;
  uint32_t id;
  bool had_ticket;
  bool ticketless; /* the CAS path (the R tickets are for the holders) */
  int rc;          /* when want_rc: what ldg_enqueue returned */
  bool want_rc;
};

static void *parked_enqueue(void *p) {
  struct parked_arg *a = p;
  ldg__testing_fast_ticket(!a->ticketless);
  a->had_ticket = ldg__testing_has_fast_ticket();
  if (a->want_rc) {
    ldg_seq seq = 0;
    a->rc = ldg_enqueue(a->s, keep_of(a->id), NULL, 0, NULL, 0, &seq);
    if (a->rc == LDG_OK) atomic_store(&seq_of[a->id], seq);
  } else {
    enq(a->s, a->id);
  }
  return NULL;
}

/* One enqueue on s by a new thread (a holder unless ticketless), joined. */
static struct parked_arg one_thread(ldg_stream *s, uint32_t id,
                                    bool ticketless, bool want_rc) {
  struct parked_arg a = {s, id, false, ticketless, LDG_OK, want_rc};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, parked_enqueue, &a) == 0);
  pthread_join(th, NULL);
  return a;
}

static void edge_begin(ldg_ledger **l, ldg_stream **s) {
  reset(512);
  ldg__testing_fast_ticket(false); /* this thread: the CAS path */
  CHECK_RC(ldg_ledger_create(l), LDG_OK);
  CHECK_RC(ldg_stream_create(*l, 0, LDG_STREAM_SHARED, NULL, NULL, s), LDG_OK);
  sem_init(&pk.parked, 0, 0);
  sem_init(&pk.go, 0, 0);
  sem_init(&pk.grow_parked, 0, 0);
  sem_init(&pk.grow_go, 0, 0);
  sem_init(&pk.arm_parked, 0, 0);
  sem_init(&pk.arm_go, 0, 0);
  atomic_store(&pk.park_checked, false);
  atomic_store(&pk.park_grow, false);
  atomic_store(&pk.park_arming, false);
  pk.target = *s;
  CHECK(ldg__set_hook(park_hook, NULL));
}

static void edge_end(ldg_ledger *l, ldg_stream *s, uint32_t n) {
  ldg__set_hook(NULL, NULL);
  CHECK_EQ_U(ldg_mark(s), n);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_dense(n);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  sem_destroy(&pk.parked);
  sem_destroy(&pk.go);
  sem_destroy(&pk.grow_parked);
  sem_destroy(&pk.grow_go);
  sem_destroy(&pk.arm_parked);
  sem_destroy(&pk.arm_go);
}

/* Past the first segment (seq 9 grew the ring to a 64-slot segment, 9..72,
 * whose grow point is 9 + (64 - R) / 2), armed by a holder's CAS-path
 * reservation (the first segment is never armed), then up to just below
 * the grow point. Returns the next id. */
static uint32_t edge_arm(ldg_stream *s) {
  uint32_t id = 0;
  while (ldg_mark(s) < 7) enq(s, id++);
  /* A holder in the first segment (seq 8): the CAS path, no arming (no
   * reserve there). */
  struct parked_arg a = one_thread(s, id++, false, false);
  CHECK(a.had_ticket);
  CHECK_EQ_U(ldg__ring_fast_gen(s), 0);
  CHECK_EQ_U(ldg_mark(s), 8);
  /* Seq 9: the CAS path grows the ring and reserves with the reserve:
   * arms. */
  a = one_thread(s, id++, false, false);
  CHECK(a.had_ticket);
  CHECK_EQ_U(ldg__ring_fast_gen(s), 1);
  const ldg_seq grow = ldg__ring_grow_at(s);
  CHECK(grow > ldg_mark(s) && grow < ldg__ring_tail_end(s));
  while (ldg_mark(s) + 1 < grow) enq(s, id++);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 0);
  return id;
}

/* A ticketless enqueuer reserves the grow point, claims the growth (grow_at
 * to the segment's end - R: the zone's start) and parks before linking
 * anything; the CAS path (this thread) then fills up to the zone. Returns
 * the thread, its arg in *ext, the end in *end. */
static pthread_t edge_stall(ldg_stream *s, uint32_t *id, struct parked_arg *ext,
                            ldg_seq *end) {
  const uint32_t r = ldg__fast_reserve();
  const ldg_seq grow = ldg__ring_grow_at(s);
  atomic_store(&pk.park_grow, true);
  *ext = (struct parked_arg){s, (*id)++, false, true, LDG_OK, false};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, parked_enqueue, ext) == 0);
  sem_wait_or_fail(&pk.grow_parked, "edge: the grow point claimed");
  CHECK_EQ_U(ldg_mark(s), grow);
  *end = ldg__ring_tail_end(s);
  if (ldg__ring_grow_at(s) != *end - r)
    FAIL("the grow claim stored %llu, not the zone's start %llu (end %llu)",
         (unsigned long long)ldg__ring_grow_at(s),
         (unsigned long long)(*end - r), (unsigned long long)*end);
  /* The CAS path keeps out of the zone: it stops at end - R - 1. */
  while (ldg__ring_tail_end(s) - ldg_mark(s) > r + 1) enq(s, (*id)++);
  CHECK_EQ_U(ldg_mark(s), *end - r - 1);
  CHECK_EQ_U(ldg__ring_tail_end(s), *end);
  CHECK(ldg__ring_fast_gen(s) & 1); /* still armed: nothing landed there */
  return th;
}

/* R holders, each parked between its load of fast_gen (armed) and its
 * add, then let go: they land on the R seqs of the zone, all below end,
 * and each disarms. */
static void edge_land(ldg_stream *s, uint32_t *id, ldg_seq end,
                      struct parked_arg *args, pthread_t *th) {
  const uint32_t r = ldg__fast_reserve();
  const ldg_seq t0 = ldg_mark(s);
  atomic_store(&pk.park_checked, true);
  for (uint32_t i = 0; i < r; i++) {
    args[i] = (struct parked_arg){s, (*id)++, false, false, LDG_OK, false};
    CHECK(pthread_create(&th[i], NULL, parked_enqueue, &args[i]) == 0);
  }
  for (uint32_t i = 0; i < r; i++)
    sem_wait_or_fail(&pk.parked, "edge: a holder read fast_gen armed");
  CHECK_EQ_U(ldg_mark(s), t0); /* none has added */
  atomic_store(&pk.park_checked, false);
  for (uint32_t i = 0; i < r; i++) sem_post(&pk.go);
  for (uint32_t i = 0; i < r; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].had_ticket);
    ldg_seq q = atomic_load(&seq_of[args[i].id]);
    if (q < end - r || q >= end)
      FAIL("a parked add got seq %llu, outside the zone %llu..%llu",
           (unsigned long long)q, (unsigned long long)(end - r),
           (unsigned long long)(end - 1));
  }
  CHECK_EQ_U(ldg_mark(s), end - 1);
  CHECK_EQ_U(ldg__ring_tail_end(s), end); /* the growth is still parked */
  if (ldg__ring_fast_gen(s) & 1)
    FAIL("still armed (fast_gen %llu) with the zone used up: the next add "
         "would get seq %llu = tail_end",
         (unsigned long long)ldg__ring_fast_gen(s), (unsigned long long)end);
}

static void test_edge_parked(void) {
  g_case = "edge-parked";
  const uint32_t r = ldg__fast_reserve();
  CHECK(r >= 1 && r <= MAX_THREADS);
  ldg_ledger *l;
  ldg_stream *s;
  edge_begin(&l, &s);
  uint32_t id = edge_arm(s);
  struct parked_arg ext, args[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  ldg_seq end;
  pthread_t ext_th = edge_stall(s, &id, &ext, &end);
  edge_land(s, &id, end, args, th);
  /* A holder now takes the CAS path (disarmed), grows the ring at its end
   * itself (the claim stops nobody), gets seq end and re-arms. */
  const uint64_t gen = ldg__ring_fast_gen(s);
  struct parked_arg a = one_thread(s, id++, false, false);
  CHECK(a.had_ticket);
  CHECK_EQ_U(atomic_load(&seq_of[a.id]), end);
  CHECK(ldg__ring_tail_end(s) > end);
  CHECK_EQ_U(ldg__ring_fast_gen(s), gen + 1);
  /* The extender, resumed, finds the ring grown past its segment. */
  sem_post(&pk.grow_go);
  pthread_join(ext_th, NULL);
  CHECK(!ext.had_ticket);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 0);
  /* Armed again, adds go on to the next grow point and past it. */
  const ldg_seq grow2 = ldg__ring_grow_at(s);
  while (ldg_mark(s) <= grow2) {
    a = one_thread(s, id++, false, false);
    CHECK(a.had_ticket);
  }
  CHECK_EQ_U(ldg__ring_fast_gen(s), gen + 1);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 1);
  edge_end(l, s, id);
  printf("ok - %s (%u adds parked after reading fast_gen armed, landed in "
         "%llu..%llu; disarmed, grown at the end and re-armed)\n",
         g_case, r, (unsigned long long)(end - r),
         (unsigned long long)(end - 1));
}

static void test_edge_enomem(void) {
  g_case = "edge-enomem";
  ldg_ledger *l;
  ldg_stream *s;
  edge_begin(&l, &s);
  uint32_t id = edge_arm(s);
  struct parked_arg ext, args[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  ldg_seq end;
  pthread_t ext_th = edge_stall(s, &id, &ext, &end);
  /* Allocations fail from here: the parked adds need none (they land below
   * end), the next reservation cannot grow the ring. */
  ldg__fault_fail_all_allocs(true);
  /* The CAS path keeps out of the zone: at end - R - 1 it must grow the
   * ring first, and cannot. */
  struct parked_arg cas = one_thread(s, id, true, true);
  CHECK_RC(cas.rc, LDG_ENOMEM);
  CHECK_EQ_U(ldg_mark(s), end - ldg__fast_reserve() - 1);
  edge_land(s, &id, end, args, th);
  const uint64_t gen = ldg__ring_fast_gen(s);
  const uint32_t refused = id++;
  struct parked_arg a = one_thread(s, refused, false, true);
  CHECK(a.had_ticket);
  CHECK_RC(a.rc, LDG_ENOMEM);
  a = one_thread(s, refused, true, true); /* ticketless: the same */
  CHECK_RC(a.rc, LDG_ENOMEM);
  ldg__fault_fail_all_allocs(false);
  CHECK(ldg__fault_injected() > 0);
  /* Nothing reserved, nothing armed, nothing past the end. */
  CHECK_EQ_U(ldg_mark(s), end - 1);
  CHECK_EQ_U(ldg__ring_tail_end(s), end);
  CHECK_EQ_U(ldg__ring_fast_gen(s), gen);
  CHECK_EQ_U(ran_of(refused), 0);
  /* With memory back, the refused keep's id is enqueued by a holder: seq
   * end, grown at the end, re-armed. */
  a = one_thread(s, refused, false, false);
  CHECK_EQ_U(atomic_load(&seq_of[refused]), end);
  CHECK_EQ_U(ldg__ring_fast_gen(s), gen + 1);
  sem_post(&pk.grow_go);
  pthread_join(ext_th, NULL);
  edge_end(l, s, id);
  printf("ok - %s (LDG_ENOMEM at seq %llu, nothing reserved, disarmed)\n",
         g_case, (unsigned long long)end);
}

/* A disarm racing a re-arm (the generation's reason). An armer loaded
 * fast_gen even, its CAS-path reservation had the reserve, and it parks
 * before its CAS that arms; a lander that loaded fast_gen odd before the
 * first disarm disarms late, with what it loaded. The armer's CAS must then
 * fail: the late landing came after its look at tail.
 *   (1) Nothing else between: the late lander finds fast_gen even (g + 1)
 *       and still writes (g + 3). Writing nothing, or a plain store of
 *       g + 1, would leave g + 1 for the armer's CAS: armed on stale
 *       headroom.
 *   (2) A re-arm between (g + 2, odd), then the late lander: its CAS from g
 *       fails and retries from g + 2, writing g + 3; a plain store of g + 1
 *       would write back the value the armer loaded. */
static void rearm_phase(ldg_stream *s, uint32_t *id, bool rearm_between) {
  const uint64_t g = ldg__ring_fast_gen(s); /* odd: a lander loads it */
  CHECK(g & 1);
  ldg__testing_disarm(s, g); /* a first lander */
  CHECK_EQ_U(ldg__ring_fast_gen(s), g + 1);
  atomic_store(&pk.park_arming, true);
  struct parked_arg armer = {s, (*id)++, false, false, LDG_OK, false};
  pthread_t armer_th;
  CHECK(pthread_create(&armer_th, NULL, parked_enqueue, &armer) == 0);
  sem_wait_or_fail(&pk.arm_parked, "rearm-race: the armer at its CAS");
  if (rearm_between) {
    struct parked_arg a = one_thread(s, (*id)++, false, false); /* re-arms */
    CHECK(a.had_ticket);
    CHECK_EQ_U(ldg__ring_fast_gen(s), g + 2);
  }
  ldg__testing_disarm(s, g); /* the late lander, with what it loaded */
  CHECK_EQ_U(ldg__ring_fast_gen(s), g + 3);
  sem_post(&pk.arm_go);
  pthread_join(armer_th, NULL);
  CHECK(armer.had_ticket);
  if (ldg__ring_fast_gen(s) != g + 3)
    FAIL("%s: the stale armer's CAS succeeded: fast_gen %llu, not %llu",
         rearm_between ? "re-arm between" : "nothing between",
         (unsigned long long)ldg__ring_fast_gen(s),
         (unsigned long long)(g + 3));
  struct parked_arg a = one_thread(s, (*id)++, false, false);
  CHECK(a.had_ticket);
  CHECK_EQ_U(ldg__ring_fast_gen(s), g + 4); /* the next holder re-arms */
}

static void test_rearm_race(void) {
  g_case = "rearm-race";
  ldg_ledger *l;
  ldg_stream *s;
  edge_begin(&l, &s);
  uint32_t id = edge_arm(s);
  rearm_phase(s, &id, false);
  rearm_phase(s, &id, true);
  edge_end(l, s, id);
  printf("ok - %s (a late disarm fails a stale armer, with and without a "
         "re-arm between)\n",
         g_case);
}

/* ---- grow-ahead --------------------------------------------------------------- */

/* A ledger (its pool limit set to 0 when no_pool) with one stream. */
static ldg_stream *grow_stream(ldg_ledger **l, bool no_pool) {
  CHECK_RC(ldg_ledger_create(l), LDG_OK);
  if (no_pool) CHECK_RC(ldg_ledger_set_pool_limit(*l, 0), LDG_OK);
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(*l, 0, LDG_STREAM_SHARED, NULL, NULL, &s),
           LDG_OK);
  return s;
}

/* Releases s to its mark, checks keeps 0..n-1, ends s and l. */
static void grow_done(ldg_ledger *l, ldg_stream *s, uint32_t n) {
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_dense(n);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
}

static void test_grow_ahead(void) {
  g_case = "grow-ahead";
  const uint32_t r = ldg__fast_reserve();
  const uint32_t n = SANITIZED ? 20000 : 100000;
  CHECK(n <= MAX_KEEPS);
  reset(n);
  ldg__testing_fast_ticket(true);
  CHECK(ldg__testing_has_fast_ticket());
  ldg_ledger *l;
  ldg_stream *s = grow_stream(&l, false);
  uint32_t at_reserve = 0, with_one_ahead = 0;
  for (uint32_t id = 0; id < n; id++) {
    enq(s, id);
    ldg_seq t = ldg_mark(s);
    /* Past the first segment, the next enqueue's check must pass: the ring
     * grew before its headroom came down to the reserve. */
    if (t >= 9 && ldg__ring_tail_end(s) - t <= r + 1) at_reserve++;
    unsigned ahead = ldg__ring_segments_ahead(s);
    if (ahead > 1)
      FAIL("%u segments linked past mark %llu", ahead, (unsigned long long)t);
    with_one_ahead += ahead;
    if (id % 64 == 63) CHECK_RC(ldg_release(s, t), LDG_OK);
  }
  CHECK_EQ_U(at_reserve, 0);
  CHECK(with_one_ahead > 0);
  /* Armed once (the first reservation past the first segment), never
   * disarmed: no add reached the zone. */
  CHECK_EQ_U(ldg__ring_fast_gen(s), 1);
  grow_done(l, s, n);

  /* A pool limit of 0 keeps nothing ahead of need (ledger.h, "Memory"):
   * the grow point is claimed, nothing is linked ahead of it, the ring
   * grows at its end (R seqs before it: the reserve's own growth). */
  reset(n);
  s = grow_stream(&l, true);
  for (uint32_t id = 0; id < n; id++) {
    enq(s, id);
    unsigned ahead = ldg__ring_segments_ahead(s);
    ldg_seq t = ldg_mark(s);
    if (ahead > 1 || (ahead == 1 && t + 1 + r < ldg__ring_tail_base(s)))
      FAIL("pool limit 0: %u segments linked past mark %llu, the newest "
           "from %llu",
           ahead, (unsigned long long)t,
           (unsigned long long)ldg__ring_tail_base(s));
    if (id % 64 == 63) CHECK_RC(ldg_release(s, t), LDG_OK);
  }
  /* Each segment's zone is reached (the claim links nothing): disarmed
   * and re-armed at every growth, armed at the end. */
  const uint64_t gen0 = ldg__ring_fast_gen(s);
  CHECK(gen0 > 1 && (gen0 & 1));
  grow_done(l, s, n);
  ldg__testing_fast_ticket(false);
  printf("ok - %s (%u enqueues; one segment ahead after %u of them)\n", g_case,
         n, with_one_ahead);
}

/* ---- tickets and dense -------------------------------------------------------- */

struct shared {
  ldg_stream *s;
  pthread_barrier_t all_in;
  uint32_t per_thread;
  atomic_uint holders;
  atomic_bool stop_release;
};

struct worker_arg {
  struct shared *sh;
  uint32_t first_id;
  bool ticketless;
};

static void *worker(void *p) {
  struct worker_arg *a = p;
  if (a->ticketless) ldg__testing_fast_ticket(false);
  enq(a->sh->s, a->first_id); /* takes a ticket if one is free */
  if (ldg__testing_has_fast_ticket()) atomic_fetch_add(&a->sh->holders, 1);
  pthread_barrier_wait(&a->sh->all_in); /* all alive, tickets taken */
  for (uint32_t k = 1; k < a->sh->per_thread; k++)
    enq(a->sh->s, a->first_id + k);
  return NULL;
}

static void *releaser(void *p) {
  struct shared *sh = p;
  while (!atomic_load(&sh->stop_release)) {
    CHECK_RC(ldg_release(sh->s, ldg_mark(sh->s)), LDG_OK);
    sched_yield();
  }
  return NULL;
}

/* At every link on the stream under test: how many segments start past
 * the mark, at most (GROWING AHEAD: one). */
static ldg_stream *link_target;
static atomic_uint links_seen, most_ahead;

static void link_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (point != LDG__HOOK_EXTEND_LINKED || s != link_target) return;
  unsigned ahead = ldg__ring_segments_ahead(s);
  atomic_fetch_add(&links_seen, 1);
  unsigned cur = atomic_load(&most_ahead);
  while (cur < ahead && !atomic_compare_exchange_weak(&most_ahead, &cur, ahead)) {
  }
}

/* n threads (the first `ticketless` of them without a ticket), per_thread
 * enqueues each, a releaser racing them. Returns the ticket holders. */
static uint32_t run_workers(uint32_t n, uint32_t ticketless,
                            uint32_t per_thread) {
  CHECK(n <= MAX_THREADS && (uint64_t)n * per_thread <= MAX_KEEPS);
  reset(n * per_thread);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  struct shared sh = {.per_thread = per_thread};
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &sh.s),
           LDG_OK);
  atomic_init(&sh.holders, 0);
  atomic_init(&sh.stop_release, false);
  CHECK(pthread_barrier_init(&sh.all_in, NULL, n) == 0);
  link_target = sh.s;
  atomic_store(&links_seen, 0);
  atomic_store(&most_ahead, 0);
  CHECK(ldg__set_hook(link_hook, NULL));
  struct worker_arg args[MAX_THREADS];
  pthread_t th[MAX_THREADS], rel;
  CHECK(pthread_create(&rel, NULL, releaser, &sh) == 0);
  for (uint32_t i = 0; i < n; i++) {
    args[i] = (struct worker_arg){&sh, i * per_thread, i < ticketless};
    CHECK(pthread_create(&th[i], NULL, worker, &args[i]) == 0);
  }
  for (uint32_t i = 0; i < n; i++) pthread_join(th[i], NULL);
  atomic_store(&sh.stop_release, true);
  pthread_join(rel, NULL);
  ldg__set_hook(NULL, NULL);
  /* The segment just linked starts past the mark; none before it does. */
  if (atomic_load(&most_ahead) > 1)
    FAIL("%u segments past the mark at a link", atomic_load(&most_ahead));
  CHECK(atomic_load(&links_seen) > 0);
  CHECK_EQ_U(ldg_mark(sh.s), (uint64_t)n * per_thread);
  CHECK_RC(ldg_release(sh.s, ldg_mark(sh.s)), LDG_OK);
  check_dense(n * per_thread);
  pthread_barrier_destroy(&sh.all_in);
  CHECK_RC(ldg_stream_destroy(sh.s), LDG_OK);
  ldg_stream_unref(sh.s);
  ldg_ledger_destroy(l);
  return atomic_load(&sh.holders);
}

static void test_tickets(void) {
  g_case = "tickets";
  const uint32_t r = ldg__fast_reserve();
  CHECK(r + 4 <= MAX_THREADS);
  /* More threads than tickets, all alive at once: exactly R hold one. */
  CHECK_EQ_U(run_workers(r + 4, 0, 16), r);
  /* They exited and gave their tickets back: R new threads get them. */
  CHECK_EQ_U(run_workers(r, 0, 16), r);
  printf("ok - %s (%u threads for %u tickets, then %u)\n", g_case, r + 4, r,
         r);
}

static void test_dense(void) {
  g_case = "dense";
  /* Segments grow to 1024 slots: 12 x 8192 seqs span about a hundred. */
  const uint32_t n = SANITIZED ? 6 : 12, per = SANITIZED ? 2048 : 8192;
  uint32_t holders = run_workers(n, n / 3, per);
  CHECK_EQ_U(holders, n - n / 3);
  printf("ok - %s (%u threads, %u with tickets, %u enqueues each)\n", g_case,
         n, holders, per);
}

int main(void) {
  test_edge_parked();
  test_edge_enomem();
  test_rearm_race();
  test_grow_ahead();
  test_tickets();
  test_dense();
  printf("reserve_test: PASS\n");
  return 0;
}
