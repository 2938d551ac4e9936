/* Proves waits: copy/record/wait/sync releases the never-synchronised stream, only up to a_upto and only once b passes the wait; bad a_upto refused; destroyed a ignored; 100000-stream chains (also on a 64 KiB stack) and cycles terminate; waits hold references. */
#include <limits.h>
#include <pthread.h>

#include "tests/unit/check.h"

/* copy on a, mark of a, b waits on it, work on b, release b fully: the copy
 * on a is released though a was never synchronised. */
static void test_copy_record_wait_sync(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *a = new_stream(l, 0, true); /* copy stream */
  ldg_stream *b = new_stream(l, 0, false);
  rec_log log;
  rec_log_init(&log);
  rec_keep copy, kernel;
  ldg_range host = {0x7000, 4096};
  CHECK_OK(ldg_enqueue(a, rec_keep_of(&copy, &log, 1), (uint64_t[]){42}, 1,
                       &host, 1, NULL));
  ldg_seq ea = ldg_mark(a); /* "record e on a" */
  ldg_seq w = 0;
  CHECK_OK(ldg_add_wait(b, a, ea, &w));
  CHECK_EQ(w, 1);
  put_vec(b, &kernel, &log, 2, 42);
  ldg_seq mb = ldg_mark(b); /* "sync b" */
  CHECK_EQ(mb, 2);
  CHECK_NONE_RELEASED(&log);
  CHECK_OK(ldg_release(b, mb));
  CHECK_EQ(copy.releases, 1);
  CHECK_EQ(kernel.releases, 1);
  CHECK_EQ(ldg_pending_count(a), 0);
  CHECK(!ldg_holds_vector(l, 42));
  CHECK(!ldg_holds_host_range(l, 0x7000, 4096));
  CHECK_EQ(ldg_nonblocking_holding(l, 42, NULL, 0), 0);
  /* the release of a was a real release: releasing a to ea again is a no-op */
  CHECK_OK(ldg_release(a, ea));
  CHECK_EQ(log.total, 2);
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_ledger_destroy(l);
  PASS("copy/record/wait/sync releases the copy stream");
}

/* A wait fires only when b is released past it, and releases a only up to
 * a_upto; a_upto > mark(a) is refused. */
static void test_wait_bounds(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *a = new_stream(l, 0, false);
  ldg_stream *b = new_stream(l, 1, false);
  rec_log log;
  rec_log_init(&log);
  rec_keep ka[4], kb[3];
  put_vec(a, &ka[1], &log, 1, 1);
  ldg_seq a1 = ldg_mark(a);
  put_vec(a, &ka[2], &log, 2, 2);
  put_vec(b, &kb[1], &log, 11, 11);
  ldg_seq mb_before = ldg_mark(b); /* taken before the wait */
  ldg_seq w = 0;
  CHECK_OK(ldg_add_wait(b, a, a1, &w)); /* waits on a's seq 1 only */
  CHECK_EQ(w, mb_before + 1);
  put_vec(a, &ka[3], &log, 3, 3);
  put_vec(b, &kb[2], &log, 12, 12);

  /* bad waits: refused, b's mark unchanged */
  ldg_seq mb = ldg_mark(b);
  CHECK_RC(ldg_add_wait(b, a, ldg_mark(a) + 1, NULL), LDG_EINVAL);
  CHECK_RC(ldg_add_wait(b, a, UINT64_MAX, NULL), LDG_EINVAL);
  CHECK_RC(ldg_add_wait(NULL, a, 0, NULL), LDG_EINVAL);
  CHECK_RC(ldg_add_wait(b, NULL, 0, NULL), LDG_EINVAL);
  CHECK_EQ(ldg_mark(b), mb);
  {
    ldg_ledger *l2 = new_ledger();
    ldg_stream *x = new_stream(l2, 0, false);
    CHECK_RC(ldg_add_wait(b, x, 0, NULL), LDG_EINVAL);
    CHECK_RC(ldg_add_wait(x, a, 0, NULL), LDG_EINVAL);
    CHECK_EQ(ldg_mark(x), 0);
    ldg_stream_unref(x);
    ldg_ledger_destroy(l2);
  }
  CHECK_EQ(ldg_mark(b), mb);

  /* release b to the mark read before the wait: the wait does not fire */
  CHECK_OK(ldg_release(b, mb_before));
  CHECK_ORDER(&log, 11);
  CHECK_EQ(ldg_pending_count(a), 3);

  /* release b fully: a released up to a1 only */
  CHECK_OK(ldg_release(b, ldg_mark(b)));
  CHECK_EQ(log.total, 3);
  CHECK_EQ(ka[1].releases, 1);
  CHECK_EQ(kb[2].releases, 1);
  CHECK_BEFORE(&log, 11, 12);
  CHECK_EQ(ldg_pending_count(a), 2);
  CHECK(ldg_holds_vector(l, 2));
  CHECK(ldg_holds_vector(l, 3));
  CHECK(!ldg_holds_vector(l, 1));

  /* a_upto == 0 waits on nothing; it still takes a seq on b */
  CHECK_OK(ldg_add_wait(b, a, 0, &w));
  CHECK_EQ(w, mb + 1);
  CHECK_OK(ldg_release(b, w));
  CHECK_EQ(ldg_pending_count(a), 2);
  CHECK_EQ(log.total, 3);

  /* b == a is allowed and fires nothing new */
  CHECK_OK(ldg_add_wait(a, a, 2, &w));
  CHECK_EQ(w, 4);
  CHECK_OK(ldg_release(a, 3));
  CHECK_EQ(log.total, 5);
  CHECK_BEFORE(&log, 2, 3);
  CHECK_EQ(rec_pos(&log, 2), 3); /* both after the earlier three */
  CHECK_OK(ldg_release(a, 4));
  CHECK_EQ(log.total, 5);
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_ledger_destroy(l);
  PASS("waits fire past their seq and release only up to a_upto");
}

/* A wait on a destroyed stream is accepted and does nothing when it fires;
 * a wait keeps a alive after the caller dropped its reference. */
static void test_destroyed_and_references(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep ka1, ka2, kb;

  /* destroyed before the wait */
  ldg_stream *a = new_stream(l, 0, false);
  ldg_stream *b = new_stream(l, 0, false);
  put_vec(a, &ka1, &log, 1, 1);
  CHECK_OK(ldg_stream_destroy(a));
  CHECK_EQ(ka1.releases, 1);
  ldg_seq w = 0;
  CHECK_OK(ldg_add_wait(b, a, ldg_mark(a), &w));
  CHECK_EQ(w, 1);
  ldg_stream_unref(a); /* the wait's own reference keeps the handle */
  put_vec(b, &kb, &log, 2, 2);
  CHECK_OK(ldg_release_all(b));
  CHECK_EQ(log.total, 2);
  ldg_stream_unref(b);

  /* destroyed and unreferenced after the wait, before it fires */
  rec_log_init(&log);
  a = new_stream(l, 0, false);
  b = new_stream(l, 0, false);
  put_vec(a, &ka1, &log, 1, 1);
  wait_on(b, a);
  CHECK_OK(ldg_stream_destroy(a));
  ldg_stream_unref(a);
  CHECK_EQ(ka1.releases, 1);
  CHECK_OK(ldg_release_all(b)); /* fires on a destroyed a: nothing, safely */
  CHECK_EQ(log.total, 1);
  ldg_stream_unref(b);

  /* live a, caller's reference dropped before the wait fires: a stays live
   * (the wait holds it), and firing the wait releases it */
  rec_log_init(&log);
  a = new_stream(l, 0, true);
  b = new_stream(l, 0, false);
  put_vec(a, &ka1, &log, 1, 31);
  wait_on(b, a);
  put_vec(a, &ka2, &log, 2, 32);
  ldg_stream_unref(a);
  CHECK_NONE_RELEASED(&log); /* not the last reference: not destroyed */
  CHECK(ldg_holds_vector(l, 31));
  CHECK(ldg_has_nonblocking(l));
  {
    ldg_stream *out[2] = {NULL, NULL};
    CHECK_EQ(ldg_nonblocking_holding(l, 31, out, 2), 1);
    CHECK_OK(ldg_stream_check_live(out[0]));
    CHECK_EQ(ldg_pending_count(out[0]), 2);
    ldg_stream_unref(out[0]);
  }
  CHECK_OK(ldg_release_all(b));
  CHECK_EQ(ka1.releases, 1);
  CHECK(!ldg_holds_vector(l, 31));
  ldg_stream_unref(b);
  ldg_ledger_destroy(l); /* a's last reference goes with b's entry at the latest */
  CHECK_EQ(ka2.releases, 1);
  PASS("waits on destroyed streams; waits hold references");
}

/* a waits on b and b waits on a; also a ring of 1000 streams. */
static void test_cycles(void) {
  ldg_ledger *l = new_ledger();
  rec_log log;
  rec_log_init(&log);
  rec_keep ka, kb;
  ldg_stream *a = new_stream(l, 0, false);
  ldg_stream *b = new_stream(l, 0, false);
  put_vec(a, &ka, &log, 1, 1);
  put_vec(b, &kb, &log, 2, 2);
  wait_on(a, b); /* a seq 2 waits on b up to 1 */
  wait_on(b, a); /* b seq 2 waits on a up to 2 */
  CHECK_OK(ldg_release(b, ldg_mark(b)));
  CHECK_EQ(ka.releases, 1);
  CHECK_EQ(kb.releases, 1);
  CHECK_EQ(ldg_pending_count(a), 0);
  CHECK_EQ(ldg_pending_count(b), 0);
  ldg_stream_unref(a);
  ldg_stream_unref(b);

  enum { K = 1000 };
  static ldg_stream *ring[K];
  static rec_keep kr[K];
  rec_log_init(&log);
  for (int i = 0; i < K; i++) {
    ring[i] = new_stream(l, i % 4, i & 1);
    put_vec(ring[i], &kr[i], &log, i, 1000 + (uint64_t)i);
  }
  /* descending, so each wait covers the next stream's own wait */
  for (int i = K - 1; i >= 0; i--) wait_on(ring[i], ring[(i + 1) % K]);
  CHECK_OK(ldg_release(ring[0], ldg_mark(ring[0])));
  for (int i = 0; i < K; i++) {
    CHECK_EQ(kr[i].releases, 1);
    CHECK_EQ(ldg_pending_count(ring[i]), 0);
  }
  CHECK(!ldg_holds_vector(l, 1000));
  CHECK(!ldg_holds_vector(l, 1000 + K - 1));
  for (int i = 0; i < K; i++) ldg_stream_unref(ring[i]);
  ldg_ledger_destroy(l);
  PASS("cycles of waits terminate and release all");
}

/* ---- chains ---------------------------------------------------------------
 * s_i waits on s_{i-1}; firing the last releases all, iteratively. */

#define CHAIN_N (UNDER_TSAN ? 20000 : 100000)
#define SMALL_STACK (UNDER_SANITIZER ? 256 * 1024 : 64 * 1024)

static ldg_stream **chain;
static long chain_released;

static void build_chain(ldg_ledger *l) {
  chain = calloc(CHAIN_N, sizeof *chain);
  CHECK(chain != NULL);
  chain_released = 0;
  for (long i = 0; i < CHAIN_N; i++) {
    chain[i] = new_stream(l, (int)(i % 3), (i % 5) == 0);
    uint64_t v = 7;
    CHECK_OK(ldg_enqueue(chain[i], count_keep(&chain_released), &v, 1, NULL, 0,
                         NULL));
    if (i > 0) wait_on(chain[i], chain[i - 1]);
  }
  CHECK_EQ(chain_released, 0);
}

enum fire_how { FIRE_RELEASE, FIRE_UNREF_LAST };
static enum fire_how fire_how;

static void *fire_chain(void *arg) {
  (void)arg;
  ldg_stream *last = chain[CHAIN_N - 1];
  if (fire_how == FIRE_RELEASE) {
    CHECK_OK(ldg_release(last, ldg_mark(last)));
  } else {
    ldg_stream_unref(last); /* last reference of a never-destroyed stream */
  }
  CHECK_EQ(chain_released, CHAIN_N);
  return NULL;
}

static void run_on_small_stack(void *(*fn)(void *)) {
  pthread_attr_t attr;
  pthread_t th;
  CHECK_EQ(pthread_attr_init(&attr), 0);
  /* Never below the platform's minimum: 128 KiB on aarch64 (64 KiB pages),
   * where 64 KiB is refused with EINVAL. Still far below what a recursive
   * walk over CHAIN_N streams would need. */
  size_t stack = SMALL_STACK;
  if (stack < (size_t)PTHREAD_STACK_MIN) stack = (size_t)PTHREAD_STACK_MIN;
  CHECK_EQ(pthread_attr_setstacksize(&attr, stack), 0);
  CHECK_EQ(pthread_create(&th, &attr, fn, NULL), 0);
  CHECK_EQ(pthread_join(th, NULL), 0);
  pthread_attr_destroy(&attr);
}

static void test_chain(void) {
  /* 1: main thread, release */
  ldg_ledger *l = new_ledger();
  build_chain(l);
  fire_how = FIRE_RELEASE;
  fire_chain(NULL);
  for (long i = 0; i < CHAIN_N; i += 997)
    CHECK_EQ(ldg_pending_count(chain[i]), 0);
  CHECK(!ldg_holds_vector(l, 7));
  for (long i = 0; i < CHAIN_N; i++) ldg_stream_unref(chain[i]);
  free(chain);
  ldg_ledger_destroy(l);
  PASS("chain of streams released from the last (main thread)");

  /* 2: small stack, release */
  l = new_ledger();
  build_chain(l);
  run_on_small_stack(fire_chain);
  CHECK(!ldg_holds_vector(l, 7));
  CHECK_EQ(ldg_pending_count(chain[0]), 0);
  for (long i = 0; i < CHAIN_N; i++) ldg_stream_unref(chain[i]);
  free(chain);
  ldg_ledger_destroy(l);
  PASS("chain of streams released from the last (small stack)");

  /* 3: small stack; only the waits hold s_0..s_{N-2}; the last unref of s_{N-1}
   * destroys it, and each fired wait drops the last reference of the next */
  l = new_ledger();
  build_chain(l);
  for (long i = 0; i < CHAIN_N - 1; i++) ldg_stream_unref(chain[i]);
  fire_how = FIRE_UNREF_LAST;
  run_on_small_stack(fire_chain);
  CHECK(!ldg_holds_vector(l, 7));
  free(chain);
  ldg_ledger_destroy(l);
  CHECK_EQ(chain_released, CHAIN_N);
  PASS("chain of streams destroyed by the last unref (small stack)");
}

/* A ledger with the pool off (no pool, no spare: retired segments are
 * freed) and two streams on device 0. */
static ldg_ledger *no_pool_pair(ldg_stream **a, ldg_stream **b) {
  ldg_ledger *l = new_ledger();
  CHECK_OK(ldg_ledger_set_pool_limit(l, 0));
  *a = new_stream(l, 0, false);
  *b = new_stream(l, 0, false);
  return l;
}

/* Nothing pending on a and b; after a grace period the ledger (pool off)
 * holds no more than base and the two newest segments of at most 1024
 * slots, with their headers (a slot left unresolved would pin its segment
 * and every later one). Then drops a and b and destroys l. */
static void end_memory_back(ldg_ledger *l, ldg_stream *a, ldg_stream *b,
                            size_t base) {
  CHECK_EQ(ldg_pending_count(a), 0);
  CHECK_EQ(ldg_pending_count(b), 0);
  ldg_quiesce();
  CHECK_LE(ldg_ledger_bytes(l), base + 2 * (1024 * 64 + 1024));
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_ledger_destroy(l);
}

/* Every fired wait's slot is counted resolved, whether the walk of the
 * stream holding it ends right at the wait or goes on past it (release.c,
 * POPPING A FRAME: the two paths that count it): b's rings give their
 * segments back once everything is released. With the pool off, what the
 * ledger holds after a grace period is its streams and their newest
 * segments; a wait slot left unresolved pins its segment and every later
 * one of b (thousands of entries, far over the bound). */
static void test_fired_waits_give_memory_back(void) {
  ldg_stream *a, *b;
  ldg_ledger *l = no_pool_pair(&a, &b);
  ldg_quiesce();
  const size_t base = ldg_ledger_bytes(l);
  const int rounds = UNDER_SANITIZER ? 1500 : 4000;
  long released = 0;
  for (int i = 0; i < rounds; i++) {
    CHECK_OK(ldg_enqueue(a, count_keep(&released), NULL, 0, NULL, 0, NULL));
    ldg_seq w = wait_on(b, a);
    if (i % 2 == 0) {
      /* b's walk ends at the wait: its slot is counted after the pop,
       * alone. */
      CHECK_OK(ldg_release(b, w));
    } else {
      /* b's walk goes on past the wait: its slot is counted with the
       * next chunk. */
      CHECK_OK(
          ldg_enqueue(b, count_keep(&released), NULL, 0, NULL, 0, NULL));
      CHECK_OK(ldg_release(b, ldg_mark(b)));
    }
  }
  CHECK_EQ(released, rounds + rounds / 2);
  end_memory_back(l, a, b, base);
  PASS("fired waits' slots resolved: memory comes back");
}

/* A fired wait in the last slot of b's first segment (8 slots), b's walk
 * going on into the next segment: the popped slot is counted with the next
 * chunk (release.c, POPPING A FRAME), whose walk passes the wait's segment
 * on its way from head. Counted there, the first segment completes and is
 * retired at once (no pool: its memory comes back after a grace period);
 * counted on the wrong segment, or not at all, it stays. */
static void test_popped_wait_at_segment_end(void) {
  ldg_stream *a, *b;
  ldg_ledger *l = no_pool_pair(&a, &b);
  long released = 0;
  for (int i = 0; i < 7; i++) /* seqs 1..7 of b */
    CHECK_OK(ldg_enqueue(b, count_keep(&released), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_enqueue(a, count_keep(&released), NULL, 0, NULL, 0, NULL));
  CHECK_EQ(wait_on(b, a), 8); /* the first segment's last slot */
  for (int i = 0; i < 3; i++) /* seqs 9..11: b's second segment */
    CHECK_OK(ldg_enqueue(b, count_keep(&released), NULL, 0, NULL, 0, NULL));
  ldg_quiesce();
  const size_t before = ldg_ledger_bytes(l);
  CHECK_OK(ldg_release(b, ldg_mark(b)));
  CHECK_EQ(released, 11);
  CHECK_EQ(ldg_pending_count(a), 0);
  CHECK_EQ(ldg_pending_count(b), 0);
  ldg_quiesce();
  /* b's first segment (8 slots of 64 bytes) given back. */
  CHECK_LE(ldg_ledger_bytes(l) + 8 * 64, before);
  /* b goes on: the next segments fill and retire as usual. */
  for (int i = 0; i < 300; i++) {
    CHECK_OK(ldg_enqueue(a, count_keep(&released), NULL, 0, NULL, 0, NULL));
    wait_on(b, a);
    CHECK_OK(ldg_enqueue(b, count_keep(&released), NULL, 0, NULL, 0, NULL));
    if (i % 4 == 3) CHECK_OK(ldg_release(b, ldg_mark(b)));
  }
  CHECK_EQ(released, 11 + 600);
  ldg_stream_unref(a);
  ldg_stream_unref(b);
  ldg_ledger_destroy(l);
  PASS("a popped wait at a segment's end is counted on its own segment");
}

/* While b's walk fires a wait on a, the slots b's chunk took before the
 * wait stay uncounted with the wait's frame (release.c, POPPING A FRAME).
 * A keep of a, run then, sees b's taken operations not pending, records
 * REENTER_OPS more on b (b grows past the pinned segment, to over the
 * memory bound of end_memory_back) and releases them: those later segments
 * are done first and retire only once the outer walk counts the pinned
 * one. Every keep runs once and the memory comes back. */
enum { REENTER_OPS = 4000 };
struct reenter {
  ldg_stream *b;
  long released;
  size_t b_pending_seen;
  int ran;
};

static void reenter_keep(void *ctx) {
  struct reenter *r = ctx;
  r->ran++;
  r->b_pending_seen = ldg_pending_count(r->b);
  for (int i = 0; i < REENTER_OPS; i++)
    CHECK_OK(ldg_enqueue(r->b, count_keep(&r->released), NULL, 0, NULL, 0,
                         NULL));
  CHECK_OK(ldg_release(r->b, ldg_mark(r->b)));
}

static void test_keep_reenters_while_frame_keeps_slots(void) {
  ldg_stream *a, *b;
  ldg_ledger *l = no_pool_pair(&a, &b);
  ldg_quiesce();
  const size_t base = ldg_ledger_bytes(l);
  struct reenter r = {b, 0, 99, 0};
  for (int i = 0; i < 3; i++) /* seqs 1..3 of b */
    CHECK_OK(ldg_enqueue(b, count_keep(&r.released), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_enqueue(a, (ldg_keep){reenter_keep, &r}, NULL, 0, NULL, 0,
                       NULL));
  CHECK_EQ(wait_on(b, a), 4);
  CHECK_OK(ldg_enqueue(b, count_keep(&r.released), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_release(b, 5));
  CHECK_EQ(r.ran, 1);
  CHECK_EQ(r.b_pending_seen, 1); /* seq 5 only: 1..3 taken, 4 a wait */
  CHECK_EQ(r.released, 3 + REENTER_OPS + 1);
  end_memory_back(l, a, b, base);
  PASS("a keep re-entering b while a frame keeps b's slots uncounted");
}

int main(void) {
  test_copy_record_wait_sync();
  test_wait_bounds();
  test_destroyed_and_references();
  test_cycles();
  test_chain();
  test_fired_waits_give_memory_back();
  test_popped_wait_at_segment_end();
  test_keep_reenters_while_frame_keeps_slots();
  return 0;
}
