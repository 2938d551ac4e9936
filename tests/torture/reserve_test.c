/*
 * The reservation of a shared stream (ledger/ring.c, RESERVING ON A SHARED
 * STREAM): fetch_add by ticket holders while the ring has headroom past the
 * reserve, the CAS path keeping out of the reserve. Linked with the test
 * hooks to park fast-path enqueuers between their check and their add.
 *
 *   reserve-parked  An early extender (segment.c, GROWING AHEAD) parked
 *                   right after claiming the growth at the grow point; the
 *                   others still reserve past it, up to the last tail where
 *                   the check passes (R + 2 seqs of headroom), where R =
 *                   ldg__fast_reserve() ticket holders park between their
 *                   check and their add; a ticketless enqueuer then gets
 *                   one seq, and its next enqueue grows the ring at its end
 *                   itself (the parked claim stops nobody): the R pending
 *                   adds land below tail_end (one seq short, the parked
 *                   adds would run past it). The parked extender, resumed,
 *                   links nothing more (no segment past the mark), and the
 *                   next grow point grows the ring again; every seq dense,
 *                   every keep once.
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
 * its first enqueuer until another thread revokes it: ring.c, OWNED
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

/* ---- reserve-parked --------------------------------------------------------- */

static struct {
  ldg_stream *target;
  atomic_bool park_checked, park_grow;
  sem_t parked, go, grow_parked, grow_go;
} pk;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (s != pk.target) return;
  if (point == LDG__HOOK_RESERVE_CHECKED && atomic_load(&pk.park_checked)) {
    sem_post(&pk.parked);
    sem_wait_or_fail(&pk.go, "reserve-parked: released by the main thread");
  } else if (point == LDG__HOOK_GROW_CLAIMED &&
             atomic_exchange(&pk.park_grow, false)) {
    sem_post(&pk.grow_parked);
    sem_wait_or_fail(&pk.grow_go, "reserve-parked: extender released");
  }
}

struct parked_arg {
  ldg_stream *s;
  uint32_t id;
  bool had_ticket;
  bool ticketless; /* the CAS path (all R tickets are for the holders) */
};

static void *parked_enqueue(void *p) {
  struct parked_arg *a = p;
  ldg__testing_fast_ticket(!a->ticketless);
  a->had_ticket = ldg__testing_has_fast_ticket();
  enq(a->s, a->id);
  return NULL;
}

static void test_reserve_parked(void) {
  g_case = "reserve-parked";
  const uint32_t r = ldg__fast_reserve();
  CHECK(r >= 1 && r <= MAX_THREADS);
  reset(512);
  ldg__testing_fast_ticket(false); /* this thread: the CAS path */
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &s),
           LDG_OK);
  sem_init(&pk.parked, 0, 0);
  sem_init(&pk.go, 0, 0);
  sem_init(&pk.grow_parked, 0, 0);
  sem_init(&pk.grow_go, 0, 0);
  atomic_store(&pk.park_checked, false);
  atomic_store(&pk.park_grow, false);
  pk.target = s;
  CHECK(ldg__set_hook(park_hook, NULL));

  /* Past the first segment (seq 9 grew the ring to a 64-slot segment,
   * 9..72, whose grow point is 9 + (64 - R) / 2), up to just below the
   * grow point. */
  uint32_t id = 0;
  while (ldg_mark(s) < 9) enq(s, id++);
  const ldg_seq grow = ldg__ring_grow_at(s);
  CHECK(grow > ldg_mark(s) && grow < ldg__ring_tail_end(s));
  while (ldg_mark(s) + 1 < grow) enq(s, id++);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 0);

  /* A ticketless enqueuer (the R tickets are for the holders below; the
   * fast path's way to the claim is grow-ahead's) reserves the grow point,
   * claims the growth and parks before linking anything. */
  atomic_store(&pk.park_grow, true);
  struct parked_arg ext = {s, id++, false, true};
  pthread_t ext_th;
  CHECK(pthread_create(&ext_th, NULL, parked_enqueue, &ext) == 0);
  sem_wait_or_fail(&pk.grow_parked, "reserve-parked: the grow point claimed");
  CHECK_EQ_U(ldg_mark(s), grow);
  CHECK(ldg__ring_grow_at(s) > grow); /* claimed: nobody else grows early */
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 0);

  /* Others go on reserving past it, up to the last tail at which a
   * fast-path check passes: R + 2 seqs of headroom (t + 1 + R <
   * tail_end). */
  while (ldg__ring_tail_end(s) - ldg_mark(s) > r + 2) enq(s, id++);
  const ldg_seq end = ldg__ring_tail_end(s), t0 = ldg_mark(s);
  CHECK_EQ_U(end - t0, r + 2);

  /* R ticket holders, each parked between its check (passed at t0) and its
   * add. */
  atomic_store(&pk.park_checked, true);
  struct parked_arg args[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  for (uint32_t i = 0; i < r; i++) {
    args[i] = (struct parked_arg){s, id++, false, false};
    CHECK(pthread_create(&th[i], NULL, parked_enqueue, &args[i]) == 0);
  }
  for (uint32_t i = 0; i < r; i++)
    sem_wait_or_fail(&pk.parked, "reserve-parked: a holder checked");
  CHECK_EQ_U(ldg_mark(s), t0); /* none has added */

  /* The CAS path takes t0 + 1, the last seq below the reserve, without
   * growing the ring ... */
  enq(s, id++);
  CHECK_EQ_U(atomic_load(&seq_of[id - 1]), t0 + 1);
  CHECK_EQ_U(ldg__ring_tail_end(s), end);
  /* ... and the next seq only after growing it, itself, with the early
   * extender still parked: the R seqs below end are left to the R pending
   * adds. */
  enq(s, id++);
  CHECK_EQ_U(atomic_load(&seq_of[id - 1]), t0 + 2);
  if (ldg__ring_tail_end(s) <= end)
    FAIL("the CAS path took seq %llu of the reserve (tail_end %llu) with %u "
         "fetch_adds pending",
         (unsigned long long)(t0 + 2), (unsigned long long)end, r);

  /* The parked adds: each lands below tail_end (the ledger aborts on a seq
   * past it: ring.c, ldg__reserve_past). */
  atomic_store(&pk.park_checked, false);
  for (uint32_t i = 0; i < r; i++) sem_post(&pk.go);
  for (uint32_t i = 0; i < r; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].had_ticket);
    CHECK(atomic_load(&seq_of[args[i].id]) > t0 + 2);
  }
  /* The early extender, resumed, finds the ring grown past its segment:
   * it links nothing (nothing starts past the mark), and the extension at
   * the end gave the claim back: grow_at is the new segment's grow point. */
  const ldg_seq end2 = ldg__ring_tail_end(s), grow2 = ldg__ring_grow_at(s);
  CHECK(grow2 > end && grow2 < end2);
  sem_post(&pk.grow_go);
  pthread_join(ext_th, NULL);
  CHECK(!ext.had_ticket);
  CHECK_EQ_U(atomic_load(&seq_of[ext.id]), grow);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 0);
  CHECK_EQ_U(ldg__ring_tail_end(s), end2);
  CHECK_EQ_U(ldg__ring_grow_at(s), grow2);

  /* Up to the new grow point and one past: the ring grew there, one
   * segment ahead, before the headroom came near the reserve. */
  while (ldg_mark(s) < grow2) enq(s, id++);
  CHECK_EQ_U(ldg__ring_segments_ahead(s), 1);
  CHECK(ldg__ring_tail_end(s) > end2);
  CHECK(ldg__ring_grow_at(s) >= end2); /* the next segment's grow point */

  ldg__set_hook(NULL, NULL);
  CHECK_EQ_U(ldg_mark(s), id);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK);
  check_dense(id);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  sem_destroy(&pk.parked);
  sem_destroy(&pk.go);
  sem_destroy(&pk.grow_parked);
  sem_destroy(&pk.grow_go);
  printf("ok - %s (early extender parked at %llu; %u fetch_adds parked at "
         "%llu seqs of headroom)\n",
         g_case, (unsigned long long)grow, r, (unsigned long long)(end - t0));
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
  test_reserve_parked();
  test_grow_ahead();
  test_tickets();
  test_dense();
  printf("reserve_test: PASS\n");
  return 0;
}
