/*
 * LDG_STREAM_SINGLE_ISSUER (ledger.h, ldg_stream_create; ledger/ring.c,
 * SINGLE-ISSUER STREAMS): the reservation by a plain store, the destroy
 * handshake it makes asymmetric, and the debug check of the caller's
 * promise. Linked with the test hooks to force the orders.
 *
 *   basics          seqs, marks, waits, releases and queries as on any
 *                   stream; a refused enqueue after destroy.
 *   handoff         issuers that take turns through a mutex (the promise
 *                   allows it), with a releaser on another thread: every
 *                   keep exactly once, seqs dense.
 *   destroy-parked  an enqueuer parked right after its reserving store while
 *                   another thread destroys the stream: the enqueue is
 *                   refused and its keep never runs, or accepted and
 *                   released by the destroy: exactly one, never lost.
 *   destroy-race    rounds of an enqueuer, a releaser and a destroyer
 *                   racing freely: every accepted keep ran exactly once,
 *                   every refused one never (the handshake's contract).
 *   overlap-aborts  (builds without NDEBUG) a second call recording on the
 *                   stream while the first is inside ldg_enqueue (a hook
 *                   calls it) aborts with a message naming the stream; in a
 *                   forked child.
 * Deterministic assertions only: races decide which outcome, never whether
 * the contract holds.
 */
#define PARK_TEST_NAME "single_issuer_test"
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"
#include "tests/torture/park_check.h"

enum { MAX_KEEPS = 1 << 20 };

/* Times each keep ran, by id. */
static _Atomic uint32_t ran[MAX_KEEPS];

static void count_keep(void *ctx) {
  uintptr_t id = (uintptr_t)ctx;
  atomic_fetch_add_explicit(&ran[id], 1, memory_order_relaxed);
}

static ldg_keep keep_of(uint32_t id) {
  return (ldg_keep){count_keep, (void *)(uintptr_t)id};
}

static void reset_ran(uint32_t n) {
  for (uint32_t i = 0; i < n; i++) atomic_store(&ran[i], 0);
}

static uint32_t ran_of(uint32_t id) { return atomic_load(&ran[id]); }

static const unsigned SI = LDG_STREAM_SINGLE_ISSUER;

/* ---- basics ---------------------------------------------------------------- */

static void test_basics(void) {
  g_case = "basics";
  reset_ran(64);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s, *a;
  CHECK_RC(ldg_stream_create(l, 0, SI, NULL, NULL, &s), LDG_OK);
  CHECK_RC(ldg_stream_create(l, 0, 0, NULL, NULL, &a), LDG_OK);
  CHECK(!ldg_stream_is_nonblocking(s));
  /* Past the first segment (8 slots) and the next: the extension path of
   * the plain-store reservation. */
  for (uint32_t i = 1; i <= 40; i++) {
    uint64_t v = 1000 + i;
    ldg_range r = {0x10000u + i * 64u, 64};
    ldg_seq q = 0;
    CHECK_RC(ldg_enqueue(s, keep_of(i), &v, 1, &r, 1, &q), LDG_OK);
    CHECK_EQ_U(q, i);
    CHECK_EQ_U(ldg_mark(s), i);
  }
  CHECK(ldg_holds_vector(l, 1040));
  CHECK(ldg_holds_host_range(l, 0x10000u + 40 * 64u, 1));
  CHECK_EQ_U(ldg_pending_count(s), 40);
  /* A wait recorded on s (s the waiting stream) takes a seq of s. */
  CHECK_RC(ldg_enqueue(a, keep_of(41), NULL, 0, NULL, 0, NULL), LDG_OK);
  ldg_seq w = 0;
  CHECK_RC(ldg_add_wait(s, a, ldg_mark(a), &w), LDG_OK);
  CHECK_EQ_U(w, 41);
  CHECK_RC(ldg_release(s, 20), LDG_OK);
  for (uint32_t i = 1; i <= 40; i++) CHECK_EQ_U(ran_of(i), i <= 20 ? 1 : 0);
  CHECK_RC(ldg_release(s, ldg_mark(s)), LDG_OK); /* fires the wait */
  for (uint32_t i = 1; i <= 41; i++) CHECK_EQ_U(ran_of(i), 1);
  CHECK_EQ_U(ldg_pending_count(s), 0);
  /* Non-blocking and single-issuer together. */
  ldg_stream *nb;
  CHECK_RC(ldg_stream_create(l, 1, SI | LDG_STREAM_NONBLOCKING, NULL, NULL,
                             &nb),
           LDG_EINVAL); /* still needs its drain */
  CHECK_RC(ldg_stream_create(l, 1, SI | 4u, NULL, NULL, &nb), LDG_EINVAL);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  CHECK_RC(ldg_enqueue(s, keep_of(42), NULL, 0, NULL, 0, NULL),
           LDG_EDESTROYED);
  CHECK_EQ_U(ran_of(42), 0);
  ldg_stream_unref(s);
  ldg_stream_unref(a);
  ldg_ledger_destroy(l);
  printf("ok - %s\n", g_case);
}

/* ---- handoff: issuers taking turns through a mutex ------------------------------ */

enum { HANDOFF_THREADS = 4 };

static struct {
  ldg_stream *s;
  pthread_mutex_t mu;
  uint32_t next_id; /* under mu */
  uint32_t per_thread;
  atomic_bool done;
} ho;

static void *handoff_issuer(void *arg) {
  (void)arg;
  for (uint32_t k = 0; k < ho.per_thread; k++) {
    pthread_mutex_lock(&ho.mu);
    uint32_t id = ++ho.next_id;
    ldg_seq q = 0;
    CHECK_RC(ldg_enqueue(ho.s, keep_of(id), &(uint64_t){id}, 1, NULL, 0, &q),
             LDG_OK);
    CHECK_EQ_U(q, id); /* dense: one seq per call, in the mutex's order */
    pthread_mutex_unlock(&ho.mu);
  }
  return NULL;
}

static void *handoff_releaser(void *arg) {
  (void)arg;
  while (!atomic_load(&ho.done)) CHECK_RC(ldg_release(ho.s, ldg_mark(ho.s)), LDG_OK);
  return NULL;
}

static void test_handoff(void) {
  g_case = "handoff";
  ho.per_thread = SANITIZED ? 2000 : 20000;
  uint32_t n = HANDOFF_THREADS * ho.per_thread;
  reset_ran(n + 1);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  CHECK_RC(ldg_stream_create(l, 0, SI, NULL, NULL, &ho.s), LDG_OK);
  pthread_mutex_init(&ho.mu, NULL);
  ho.next_id = 0;
  atomic_store(&ho.done, false);
  pthread_t th[HANDOFF_THREADS], rel;
  CHECK(pthread_create(&rel, NULL, handoff_releaser, NULL) == 0);
  for (int i = 0; i < HANDOFF_THREADS; i++)
    CHECK(pthread_create(&th[i], NULL, handoff_issuer, NULL) == 0);
  for (int i = 0; i < HANDOFF_THREADS; i++) pthread_join(th[i], NULL);
  atomic_store(&ho.done, true);
  pthread_join(rel, NULL);
  CHECK_EQ_U(ldg_mark(ho.s), n);
  CHECK_RC(ldg_release(ho.s, ldg_mark(ho.s)), LDG_OK);
  for (uint32_t i = 1; i <= n; i++) {
    if (ran_of(i) != 1) FAIL("keep %u ran %u times", i, ran_of(i));
  }
  CHECK_RC(ldg_stream_destroy(ho.s), LDG_OK);
  ldg_stream_unref(ho.s);
  pthread_mutex_destroy(&ho.mu);
  ldg_ledger_destroy(l);
  printf("ok - %s (%u enqueues by %d issuers in turn)\n", g_case, n,
         HANDOFF_THREADS);
}

/* ---- destroy-parked: the handshake with the enqueuer between its store and
 * its load of destroyed ------------------------------------------------------ */

static struct {
  ldg_stream *target;
  sem_t parked, go;
  atomic_bool armed;
} pk;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (point != LDG__HOOK_ENQUEUE_RESERVED || s != pk.target) return;
  if (!atomic_exchange(&pk.armed, false)) return;
  sem_post(&pk.parked);
  sem_wait_or_fail(&pk.go, "destroy-parked: released by the destroyer");
}

struct enq_arg {
  ldg_stream *s;
  uint32_t id;
  int rc;
};

static void *enqueue_one(void *p) {
  struct enq_arg *a = p;
  a->rc = ldg_enqueue(a->s, keep_of(a->id), NULL, 0, NULL, 0, NULL);
  return NULL;
}

static void test_destroy_parked(void) {
  g_case = "destroy-parked";
  reset_ran(8);
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  ldg_stream *s;
  CHECK_RC(ldg_stream_create(l, 0, SI, NULL, NULL, &s), LDG_OK);
  CHECK_RC(ldg_enqueue(s, keep_of(1), NULL, 0, NULL, 0, NULL), LDG_OK);
  sem_init(&pk.parked, 0, 0);
  sem_init(&pk.go, 0, 0);
  pk.target = s;
  atomic_store(&pk.armed, true);
  CHECK(ldg__set_hook(park_hook, NULL));
  struct enq_arg e = {s, 2, 1};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, enqueue_one, &e) == 0);
  sem_wait_or_fail(&pk.parked, "destroy-parked: enqueuer reserved");
  /* The enqueuer stored tail = 2 and has not read destroyed: the destroy
   * (membarrier) must see seq 2 and abandon its EMPTY slot. */
  CHECK_EQ_U(ldg_mark(s), 2);
  CHECK_RC(ldg_stream_destroy(s), LDG_OK);
  CHECK_EQ_U(ran_of(1), 1);
  sem_post(&pk.go);
  pthread_join(th, NULL);
  ldg__set_hook(NULL, NULL);
  /* It now reads destroyed: refused, its keep never run (the seq was
   * dropped: abandoned by the destroyer, retracted by the enqueuer). */
  CHECK_RC(e.rc, LDG_EDESTROYED);
  CHECK_EQ_U(ran_of(2), 0);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  sem_destroy(&pk.parked);
  sem_destroy(&pk.go);
  printf("ok - %s\n", g_case);
}

/* ---- destroy-race: enqueuer, releaser and destroyer racing freely ---------- */

static struct {
  ldg_stream *s;
  atomic_bool stop_release;
  atomic_int started;
  uint32_t base, accepted, refused_id; /* written by the enqueuer */
  unsigned delay;
} dr;

static void *race_enqueuer(void *arg) {
  (void)arg;
  atomic_fetch_add(&dr.started, 1);
  for (uint32_t i = 0;; i++) {
    uint32_t id = dr.base + i;
    if (id == MAX_KEEPS - 1) {
      /* Out of ids before the destroyer ran (a loaded machine): wait for
       * it; the next enqueue is then refused. */
      while (ldg_stream_check_live(dr.s) == LDG_OK) sched_yield();
    }
    int rc = ldg_enqueue(dr.s, keep_of(id), NULL, 0, NULL, 0, NULL);
    if (rc == LDG_EDESTROYED) {
      dr.refused_id = id;
      return NULL;
    }
    CHECK_RC(rc, LDG_OK);
    dr.accepted = i + 1;
  }
}

static void *race_releaser(void *arg) {
  (void)arg;
  atomic_fetch_add(&dr.started, 1);
  while (!atomic_load(&dr.stop_release)) {
    int rc = ldg_release(dr.s, ldg_mark(dr.s));
    if (rc == LDG_EDESTROYED) break;
    CHECK_RC(rc, LDG_OK);
  }
  return NULL;
}

static void test_destroy_race(void) {
  g_case = "destroy-race";
  int rounds = SANITIZED ? 40 : 300;
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  uint64_t accepted_total = 0;
  reset_ran(MAX_KEEPS);
  for (int r = 0; r < rounds; r++) {
    if (r > 0) reset_ran(dr.refused_id + 1); /* what the last round used */
    dr.base = 1;
    dr.accepted = 0;
    dr.refused_id = 0;
    CHECK_RC(ldg_stream_create(l, 0, SI, NULL, NULL, &dr.s), LDG_OK);
    atomic_store(&dr.stop_release, false);
    atomic_store(&dr.started, 0);
    pthread_t e, rl;
    CHECK(pthread_create(&e, NULL, race_enqueuer, NULL) == 0);
    CHECK(pthread_create(&rl, NULL, race_releaser, NULL) == 0);
    while (atomic_load(&dr.started) < 2) sched_yield();
    /* A varying head start; any value is correct. */
    for (volatile unsigned k = 0; k < (unsigned)(r % 17) * 200u; k++) {
    }
    CHECK_RC(ldg_stream_destroy(dr.s), LDG_OK);
    pthread_join(e, NULL);
    atomic_store(&dr.stop_release, true);
    pthread_join(rl, NULL);
    for (uint32_t i = 1; i <= dr.accepted; i++) {
      if (ran_of(i) != 1) FAIL("round %d: accepted keep %u ran %u times", r, i, ran_of(i));
    }
    CHECK(dr.refused_id == dr.accepted + 1);
    CHECK_EQ_U(ran_of(dr.refused_id), 0);
    accepted_total += dr.accepted;
    ldg_stream_unref(dr.s);
  }
  ldg_ledger_destroy(l);
  printf("ok - %s (%d rounds, %llu enqueues accepted)\n", g_case, rounds,
         (unsigned long long)accepted_total);
}

/* ---- overlap-aborts: the debug check of the promise ------------------------ */

static struct {
  ldg_stream *target;
  atomic_bool armed;
} ov;

static void overlap_hook(enum ldg__hook_point point, struct ldg_stream *s,
                         void *arg) {
  (void)arg;
  if (point != LDG__HOOK_ENQUEUE_RESERVED || s != ov.target) return;
  if (!atomic_exchange(&ov.armed, false)) return;
  /* A second call recording on s while the first is inside: the promise
   * broken. */
  (void)ldg_enqueue(s, keep_of(9), NULL, 0, NULL, 0, NULL);
  _exit(4); /* not reached in a build that checks */
}

static void test_overlap_aborts(void) {
  g_case = "overlap-aborts";
#ifdef NDEBUG
  printf("ok - %s # skipped: NDEBUG build (no check)\n", g_case);
#else
  if (getenv("SL_QEMU_USER") != NULL) {
    /* tools/aarch64_job.sh: qemu-user (7.2) asserts when a forked child of
     * a multi-threaded program starts a thread, and the child's ledger
     * starts the segment reclaimer. */
    printf("ok - %s # skipped: under qemu-user (a forked child cannot start "
           "a thread)\n", g_case);
    return;
  }
  int fds[2];
  CHECK(pipe(fds) == 0);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    ldg_ledger *l;
    if (ldg_ledger_create(&l) != LDG_OK) _exit(3);
    ldg_stream *s;
    if (ldg_stream_create(l, 0, SI, NULL, NULL, &s) != LDG_OK) _exit(3);
    ov.target = s;
    atomic_store(&ov.armed, true);
    if (!ldg__set_hook(overlap_hook, NULL)) _exit(3);
    (void)ldg_enqueue(s, keep_of(8), NULL, 0, NULL, 0, NULL);
    _exit(5); /* not reached either */
  }
  close(fds[1]);
  char buf[1024];
  size_t got = 0;
  ssize_t k;
  while (got < sizeof buf - 1 && (k = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0)
    got += (size_t)k;
  buf[got] = '\0';
  close(fds[0]);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
    FAIL("child did not abort: status %#x, stderr \"%s\"", status, buf);
  CHECK(strstr(buf, "single-issuer stream 1") != NULL);
  printf("ok - %s\n", g_case);
#endif
}

int main(void) {
  test_basics();
  test_handoff();
  test_destroy_parked();
  test_destroy_race();
  test_overlap_aborts();
  return 0;
}
