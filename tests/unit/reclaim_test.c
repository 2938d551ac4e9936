/* The segment reclaimer (ledger/reclaim.c): retired segments come back to
 * the pool through its batches, not through call_rcu (every one counted, and
 * reused, each pop counted by age); a reader inside a read-side section
 * across a retirement keeps the segment out of the pool until it leaves,
 * with the batch already taken (hook RECLAIM_TAKEN; mutant no-grace-period:
 * the batch pooled them at once); ldg_ledger_destroy with segments still on
 * the list, and with a batch held in progress, frees everything (ASan:
 * nothing leaks); enqueue, release, stream create, destroy and unref never
 * wait for the reclaimer's mutex (ledger.h's table; a batch held); the
 * pool's limit in force follows the batches within the bound
 * ldg_ledger_set_pool_limit sets (0, a bound below the floor, SIZE_MAX); a forked child keeps retiring to the list, and its first
 * create starts a reclaimer of its own; ldg_quiesce frees what its own
 * batches trimmed from a pool, however many batches that takes (in a forked
 * child, where only flushes run batches). */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <urcu/urcu-memb.h> /* the fork handlers liburcu asks for */

#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

static void enqueue_n(ldg_stream *s, long n, long *released) {
  for (long i = 0; i < n; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(released), NULL, 0, NULL, 0, NULL));
}

static unsigned long reused_all(ldg_ledger *l) {
  unsigned long k = 0;
  for (unsigned c = 0; c < 8; c++) k += ldg__pool_reused(l, c);
  return k;
}

static unsigned long aged_all(ldg_ledger *l) {
  unsigned long k = 0;
  for (unsigned b = 0; b < 8; b++) k += ldg__pool_reuse_age(l, b);
  return k;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- Hooks ------------------------------------------------------------------ */

static struct {
  ldg_stream *pause_in; /* RELEASE_TAKING on it parks (inside rcu) */
  _Atomic int parked;   /* 1 while parked */
  _Atomic int go;       /* the parked thread may go on */
  _Atomic int taken;    /* RECLAIM_TAKEN passed this many times */
  _Atomic int hold_batch; /* RECLAIM_TAKEN waits while set */
  _Atomic int advances; /* HEAD_ADVANCE passed */
} H;

static void hook(enum ldg__hook_point p, struct ldg_stream *s, void *arg) {
  (void)arg;
  if (p == LDG__HOOK_HEAD_ADVANCE) atomic_fetch_add(&H.advances, 1);
  if (p == LDG__HOOK_RECLAIM_TAKEN) {
    atomic_fetch_add(&H.taken, 1);
    while (atomic_load(&H.hold_batch)) sched_yield();
  }
  if (p == LDG__HOOK_RELEASE_TAKING && s != NULL && s == H.pause_in) {
    atomic_store(&H.parked, 1);
    while (!atomic_load(&H.go)) sched_yield();
    atomic_store(&H.parked, 0);
  }
}

/* Segments come back through the batches, and are reused from the pool. */
static void through_batches(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_quiesce();
  ldg__reclaim_stats a = ldg__reclaim_inspect();
  CHECK(a.running);
  atomic_store(&H.advances, 0);
  long released = 0;
  /* Rounds of 3000 entries (segments of 64 to 1024 slots), each released
   * and flushed: the next round's extensions pop what it retired. */
  for (int r = 0; r < 10; r++) {
    enqueue_n(s, 3000, &released);
    CHECK_OK(ldg_release_all(s));
    ldg_quiesce();
  }
  ldg__reclaim_stats b = ldg__reclaim_inspect();
  /* One thread: every CAS wins; the owner parks some of the segments it
   * unlinks as its spare at once (segment.c, HOT REUSE ON OWNED STREAMS):
   * those never reach the reclaimer. */
  int hot = (int)ldg__ring_hot_reused(s);
  int retired = atomic_load(&H.advances) - hot;
  fprintf(stderr, "through_batches: %d retired (%d more kept hot), %llu "
          "batched in %llu batches, %llu via call_rcu, %lu reused (%lu "
          "aged)\n", retired, hot,
          (unsigned long long)(b.batched - a.batched),
          (unsigned long long)(b.batches - a.batches),
          (unsigned long long)(b.via_call_rcu - a.via_call_rcu), reused_all(l),
          aged_all(l));
  CHECK_GE(retired + hot, 10 * 3);
  CHECK_GE(b.batched - a.batched, (uint64_t)retired);
  CHECK_EQ(b.via_call_rcu, a.via_call_rcu);
  CHECK_GT(b.batches, a.batches);
  /* Each round after the first took segments back from the pool. */
  CHECK_GE(reused_all(l), 9);
  CHECK_EQ(aged_all(l), reused_all(l)); /* every pop counted by age */
  CHECK_EQ(released, 10 * 3000);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("through_batches");
}

struct parked_release {
  ldg_stream *s;
};

static void *release_thread(void *arg) {
  struct parked_release *p = arg;
  CHECK_OK(ldg_release_all(p->s)); /* parks inside its read-side section */
  return NULL;
}

/* A reader inside a read-side section across a retirement keeps the
 * segment out of the pool: the batch is taken, and waits for the reader. */
static void reader_holds(void) {
  ldg_ledger *l = new_ledger();
  /* s1 shared: its 64-slot segment must reach the pool (an owner may keep
   * it hot when the ring filled slowly). */
  ldg_stream *s1 = new_shared_stream(l, 0);
  ldg_stream *s2 = new_stream(l, 0, false);
  long released = 0;
  enqueue_n(s2, 1, &released);
  ldg_quiesce();
  H.pause_in = s2;
  atomic_store(&H.go, 0);
  pthread_t t;
  struct parked_release pr = {s2};
  CHECK_EQ(pthread_create(&t, NULL, release_thread, &pr), 0);
  while (!atomic_load(&H.parked)) sched_yield();
  /* s1 retires its 8-slot first segment and a 64-slot one. */
  int taken0 = atomic_load(&H.taken);
  enqueue_n(s1, 8 + 64 + 1, &released);
  CHECK_OK(ldg_release_all(s1));
  /* The reclaimer takes them (within its lazy wait, 5 ms) ... */
  while (atomic_load(&H.taken) == taken0) sched_yield();
  /* ... and may not pool them while the reader is inside. Watched for
   * 200 ms (without the grace period they were pooled at once). */
  for (int i = 0; i < 40; i++) {
    CHECK_EQ(ldg__pool_count(l, 0), 0);
    CHECK_EQ(ldg__pool_count(l, 3), 0);
    sleep_ms(5);
  }
  atomic_store(&H.go, 1);
  CHECK_EQ(pthread_join(t, NULL), 0);
  H.pause_in = NULL;
  ldg_quiesce();
  CHECK_EQ(ldg__pool_count(l, 0), 1);
  CHECK_EQ(ldg__pool_count(l, 3), 1);
  CHECK_EQ(released, 8 + 64 + 1 + 1);
  ldg_stream_unref(s1);
  ldg_stream_unref(s2);
  ldg_ledger_destroy(l);
  PASS("reader_holds");
}

static void *destroy_thread(void *arg) {
  ldg_ledger_destroy(arg);
  return NULL;
}

/* ldg_ledger_destroy with segments on the list, and with a batch in
 * progress (held at RECLAIM_TAKEN): nothing leaks (ASan). */
static void destroy_pending(void) {
  for (int held = 0; held < 2; held++) {
    ldg_ledger *l = new_ledger();
    ldg_stream *s = new_stream(l, 0, false);
    long released = 0;
    int taken0 = atomic_load(&H.taken);
    if (held) atomic_store(&H.hold_batch, 1);
    enqueue_n(s, 3000, &released);
    CHECK_OK(ldg_release_all(s));
    ldg_stream_unref(s);
    if (held) {
      /* The reclaimer took a batch and holds it; destroy must wait. */
      while (atomic_load(&H.taken) == taken0) sched_yield();
      pthread_t t;
      CHECK_EQ(pthread_create(&t, NULL, destroy_thread, l), 0);
      sleep_ms(20);
      atomic_store(&H.hold_batch, 0);
      CHECK_EQ(pthread_join(t, NULL), 0);
    } else {
      ldg_ledger_destroy(l); /* right away: segments still on the list */
    }
    CHECK_EQ(released, 3000);
  }
  PASS("destroy_pending");
}

/* Makes the reclaimer hold a batch (at RECLAIM_TAKEN, holding its mutex):
 * a new stream of l retires two segments, and this waits until a batch was
 * taken. Returns that stream; H.hold_batch = 0 lets the batch go on. */
static ldg_stream *hold_a_batch(ldg_ledger *l, long *released) {
  ldg_stream *d = new_stream(l, 0, false);
  int taken0 = atomic_load(&H.taken);
  atomic_store(&H.hold_batch, 1);
  enqueue_n(d, 8 + 64 + 1, released);
  CHECK_OK(ldg_release_all(d));
  while (atomic_load(&H.taken) == taken0) sched_yield();
  return d;
}

/* Retires n entries' segments of s in one batch: the reclaimer is held on a
 * batch of another stream's segments while s's pile up on the list; then
 * the next batch takes them all. */
static void one_batch(ldg_ledger *l, ldg_stream *s, long n, long *released) {
  long dummy = 0;
  ldg_stream *d = hold_a_batch(l, &dummy);
  enqueue_n(s, n, released);
  CHECK_OK(ldg_release_all(s));
  atomic_store(&H.hold_batch, 0);
  ldg_quiesce();
  ldg_stream_unref(d);
}

/* ledger.h's table: enqueue, release, stream destroy/unref and (with a
 * reclaimer running) stream create take no lock of the reclaimer's. With a
 * batch held at RECLAIM_TAKEN (the reclaimer holds its mutex there, before
 * its grace period), they complete on this thread, retiring segments
 * (pushed on the list) and waking the reclaimer; a call that waited for
 * the mutex would hang the test. */
static void retire_never_waits(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  ldg_stream *d = hold_a_batch(l, &released);
  ldg__reclaim_stats a = ldg__reclaim_inspect();
  atomic_store(&H.advances, 0);
  for (int r = 0; r < 20; r++) {
    enqueue_n(s, 500, &released);
    CHECK_OK(ldg_release(s, ldg_mark(s)));
  }
  ldg_stream *t = new_stream(l, 0, false);
  enqueue_n(t, 100, &released);
  CHECK_OK(ldg_stream_destroy(t));
  ldg_stream_unref(t);
  CHECK_GT(atomic_load(&H.advances), 10); /* it did retire segments */
  ldg__reclaim_stats b = ldg__reclaim_inspect();
  CHECK_EQ(b.batches, a.batches); /* the held batch has not finished */
  atomic_store(&H.hold_batch, 0);
  ldg_quiesce();
  CHECK_GT(ldg__reclaim_inspect().batched, b.batched);
  CHECK_EQ(released, 8 + 64 + 1 + 20 * 500 + 100);
  ldg_stream_unref(d);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("retire_never_waits");
}

/* The limit in force follows the batches, within the bound. */
static void pool_limits(void) {
  ldg_ledger *l = new_ledger();
  CHECK_EQ(ldg_ledger_set_pool_limit(NULL, 1), LDG_EINVAL);
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  /* 20 000 entries retired at once (in 1024-slot segments, about 1.3 MB):
   * the limit in force grows past the 1 MiB floor, below 32 MiB. */
  one_batch(l, s, 20000, &released);
  size_t grown = ldg__pool_limit_in_force(l);
  fprintf(stderr, "pool_limits: in force %zu after a 20000-entry batch\n",
          grown);
  CHECK_GT(grown, (size_t)1 << 20);
  CHECK_LE(grown, (size_t)32 << 20);
  /* SIZE_MAX: a bound that never overflows (2 x batch is capped). */
  CHECK_OK(ldg_ledger_set_pool_limit(l, SIZE_MAX));
  one_batch(l, s, 20000, &released);
  CHECK_GT(ldg__pool_limit_in_force(l), (size_t)1 << 20);
  CHECK_GT(reused_all(l), 0);
  /* A bound below the floor is the limit, at once and after batches. */
  size_t small = 3 * ldg__pool_seg_bytes(0);
  CHECK_OK(ldg_ledger_set_pool_limit(l, small));
  CHECK_EQ(ldg__pool_limit_in_force(l), small);
  enqueue_n(s, 20000, &released);
  CHECK_OK(ldg_release_all(s));
  ldg_quiesce();
  CHECK_EQ(ldg__pool_limit_in_force(l), small);
  size_t pooled = 0;
  for (unsigned c = 0; c < 8; c++)
    pooled += ldg__pool_count(l, c) * ldg__pool_seg_bytes(c);
  CHECK_LE(pooled, small);
  /* 0: nothing pooled, none kept after the call. */
  CHECK_OK(ldg_ledger_set_pool_limit(l, 0));
  ldg_quiesce();
  CHECK_EQ(ldg__pool_limit_in_force(l), 0);
  enqueue_n(s, 5000, &released);
  CHECK_OK(ldg_release_all(s));
  ldg_quiesce();
  for (unsigned c = 0; c < 8; c++) CHECK_EQ(ldg__pool_count(l, c), 0);
  CHECK_EQ(released, 65000);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("pool_limits");
}

/* Forks as liburcu asks a program that uses call_rcu to (README, "Fork"):
 * its call_rcu fork handlers around fork, so that the child's ldg_quiesce
 * and ldg_ledger_destroy return. In the child the hooks are off. */
static pid_t fork_with_rcu(void) {
  fflush(stderr);
  urcu_memb_call_rcu_before_fork();
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    urcu_memb_call_rcu_after_fork_child();
    ldg__set_hook(NULL, NULL);
  } else {
    urcu_memb_call_rcu_after_fork_parent();
  }
  return pid;
}

/* Waits for the child pid, which must exit 0 (every CHECK held). */
static void child_passed(pid_t pid) {
  int st = 0;
  CHECK_EQ(waitpid(pid, &st, 0), pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ(WEXITSTATUS(st), 0);
}

/* A forked child: its retirements wait on the list until its first create
 * starts a reclaimer of its own, whose batch then runs without any flush
 * from the child (forked by fork_with_rcu). */
static void fork_child(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  enqueue_n(s, 1000, &released);
  CHECK_OK(ldg_release_all(s));
  pid_t pid = fork_with_rcu();
  if (pid == 0) {
    ldg__reclaim_stats a = ldg__reclaim_inspect();
    CHECK(!a.running);
    CHECK(a.listed);
    enqueue_n(s, 1000, &released);
    CHECK_OK(ldg_release_all(s)); /* retires to the list */
    ldg_stream *s2 = new_stream(l, 0, false); /* starts a reclaimer */
    CHECK(ldg__reclaim_inspect().running);
    enqueue_n(s2, 3000, &released);
    CHECK_OK(ldg_release_all(s2));
    /* Its batch comes within 5 ms; 10 s bounds a broken child only. */
    for (int i = 0; i < 2000 && ldg__reclaim_inspect().batches == a.batches;
         i++)
      sleep_ms(5);
    ldg__reclaim_stats c = ldg__reclaim_inspect();
    CHECK_GT(c.batches, a.batches);
    CHECK_GT(c.batched, a.batched);
    CHECK_EQ(c.via_call_rcu, a.via_call_rcu);
    ldg_quiesce();
    CHECK_EQ(released, 5000);
    ldg_stream_unref(s2);
    ldg_stream_unref(s);
    ldg_ledger_destroy(l);
    fprintf(stderr, "ok - fork child\n");
    fflush(stderr);
    _exit(0);
  }
  child_passed(pid);
  /* The parent goes on with its own reclaimer. */
  CHECK(ldg__reclaim_inspect().running);
  enqueue_n(s, 1000, &released);
  CHECK_OK(ldg_release_all(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(released, 2000);
  PASS("fork_child");
}

/* ldg_quiesce runs batches until one trims nothing: a batch that lowers a
 * pool's limit in force retires what the pool holds above it (dirty, freed
 * by the next batch), and that next batch, adapting to the bytes it just
 * freed, may lower the limit again and trim more. The flush ran two batches
 * and returned with the second one's trim still on the list, counted in
 * ldg_ledger_bytes. In a forked child (no reclaimer thread: only flushes
 * run batches, so each batch's content is known), with the pool's bound
 * BD = 2 x M x 704 (M 8-slot segments of 704 bytes):
 *   flush 1: M 8-slot + one 64-slot (4 288) segment: limit BD (2 x bytes,
 *     capped), all pooled;
 *   flush 2, batch A: one 8-slot: limit BD / 2 = M x 704, the pool is 4 288
 *     over: its largest class goes (the 64-slot one);
 *   batch B: 4 288 bytes: limit max(BD / 4, 1 MiB) = 1 MiB, below M x 704:
 *     the 8-slot class goes, all M of them;
 *   batch C (the fix): frees them; its limit, BD (twice what it freed),
 *     trims nothing.
 * Watched failing before the fix: held 8 072 768 against 7 016 768, the
 * M x 704 bytes of batch B's trim still on the list. */
static void flush_trims_all(void) {
  enum { M = 1500 }; /* M x 704 just over the 1 MiB floor */
  size_t b0 = ldg__pool_seg_bytes(0);
  CHECK_GT(M * b0, (size_t)1 << 20);
  size_t bound = 2 * M * b0;
  CHECK_LT(bound, (size_t)4 << 20); /* so B's limit is the floor */
  ldg_ledger *l = new_ledger();
  CHECK_OK(ldg_ledger_set_pool_limit(l, bound));
  /* Created here: a create in the child would start a reclaimer. Shared:
   * every retired segment goes through the batches. s[M - 1] retires its
   * 64-slot segment too; x retires its 8-slot one in flush 2. */
  static ldg_stream *s[M + 1];
  for (int i = 0; i <= M; i++) s[i] = new_shared_stream(l, 0);
  ldg_stream *x = s[M];
  ldg_quiesce();
  pid_t pid = fork_with_rcu();
  if (pid == 0) {
    CHECK(!ldg__reclaim_inspect().running);
    size_t rings = 0;
    for (int i = 0; i <= M; i++) rings += ldg__ring_bytes(s[i]);
    size_t fixed = ldg_ledger_bytes(l) - rings; /* the streams; no pool */
    long released = 0;
    /* All enqueues first, while the pool is empty: no extension pops. */
    for (int i = 0; i < M - 1; i++) enqueue_n(s[i], 9, &released);
    enqueue_n(s[M - 1], 8 + 64 + 1, &released);
    enqueue_n(x, 9, &released);
    for (int i = 0; i < M; i++) CHECK_OK(ldg_release_all(s[i]));
    ldg_quiesce(); /* flush 1 */
    CHECK_EQ(ldg__pool_limit_in_force(l), bound);
    CHECK_EQ(ldg__pool_count(l, 0), M);
    CHECK_EQ(ldg__pool_count(l, 3), 1);
    CHECK_OK(ldg_release_all(x));
    ldg_quiesce(); /* flush 2 */
    CHECK_EQ(ldg__pool_count(l, 0), 0);
    CHECK_EQ(ldg__pool_count(l, 3), 0);
    rings = 0;
    for (int i = 0; i <= M; i++) rings += ldg__ring_bytes(s[i]);
    size_t held = ldg_ledger_bytes(l);
    fprintf(stderr, "flush_trims_all: held %zu, streams %zu + segments %zu\n",
            held, fixed, rings);
    /* Nothing waits for a grace period: the trims are freed. */
    CHECK_EQ(held, fixed + rings);
    /* Batch C's limit: 2 x M x 704, the bound. */
    CHECK_EQ(ldg__pool_limit_in_force(l), bound);
    CHECK_EQ(released, (long)(M - 1) * 9 + 8 + 64 + 1 + 9);
    fflush(stderr);
    _exit(0);
  }
  child_passed(pid);
  for (int i = 0; i <= M; i++) ldg_stream_unref(s[i]);
  ldg_ledger_destroy(l);
  PASS("flush_trims_all");
}

int main(void) {
  CHECK(ldg__set_hook(hook, NULL));
  through_batches();
  reader_holds();
  destroy_pending();
  retire_never_waits();
  pool_limits();
  /* ThreadSanitizer does not support threads started in a child forked
   * from a multi-threaded process (the child's reclaimer and liburcu's
   * call_rcu thread), nor does qemu-user 7.2 (tools/aarch64_job.sh sets
   * SL_QEMU_USER: it asserts in the child): the fork test runs in the
   * other builds. */
  if (UNDER_TSAN || getenv("SL_QEMU_USER") != NULL)
    fprintf(stderr, "ok - fork child, flush_trims_all # skipped: TSan or "
                    "qemu-user\n");
  else {
    fork_child();
    flush_trims_all();
  }
  return 0;
}
