/* Proves memory follows the work: ldg_ledger_bytes grows with 1 000 000 pending entries and, once they are released and a grace period passed, holds exactly the stream, its newest segment, at most one linked ahead and one spare, and the segment pool within its limit in force (at most 32 MiB by default), nothing waiting for a grace period (also with the pool full and all three segments there), and after ldg_ledger_trim drops below 1/50 of the peak and below 1 MiB (twice in a row); with a pool limit of 0 nothing released stays past a grace period, and the pool holds its limit exactly; short-lived streams reuse pooled first segments; the extender that links a successor to a done newest segment retires it; id/range arrays and destroyed streams are given back too. */
#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

/* TSan is slow; ASan and plain builds run the full size. */
#define N_ENTRIES (UNDER_TSAN ? 200000L : 1000000L)
#define N_WITH_ARRAYS (UNDER_TSAN ? 20000L : 100000L)

/* Waits for deferred frees, empties the segment pool, waits again. */
static void give_back(ldg_ledger *l) {
  ldg_quiesce();
  ldg_ledger_trim(l);
  ldg_quiesce();
}

/* Bytes in l's pools (ldg__pool_count is exact at a quiet moment). */
static size_t pool_bytes(ldg_ledger *l) {
  size_t n = 0;
  for (unsigned c = 0; c < 8; c++)
    n += ldg__pool_count(l, c) * ldg__pool_seg_bytes(c);
  return n;
}

/* What l holds besides s's segments and the pools (s's struct), at a quiet
 * moment: l has no other stream and s no id or range array. */
static size_t fixed_bytes(ldg_ledger *l, ldg_stream *s) {
  return ldg_ledger_bytes(l) - ldg__ring_bytes(s) - pool_bytes(l);
}

/* Once every entry of s (l's only stream) is released and ldg_quiesce has
 * returned, l holds exactly what ledger.h ("Memory") allows with nothing
 * pending: s's fixed bytes, its newest segment, at most one segment linked
 * ahead, at most one spare (prepared, or kept hot by the owner), each at
 * most 1024 slots, and the pool, within its limit in force; nothing waits
 * for a grace period (ldg_quiesce ran the batch of everything the release
 * retired, and then batches until one trimmed nothing from a pool:
 * ledger/reclaim.c, ldg__reclaim_flush).
 * It used to allow 128 KiB on top of the limit in force: two segments, not
 * three. tools/test.sh failed on it once (round 1: 16 955 392 against
 * 16 909 376, at daf8441, before a segment grew to 4 header lines and a
 * stream to 7): 384 (the stream) + 3 x 65 728 (newest, one ahead, the owner's
 * hot spare) + a pool of 16 757 824 (the ring's first segments of 8-512
 * slots and 254 of 1024: as many as fit the 16 MiB in force). Round 1 of
 * the default and asan builds always holds those three segments (its
 * 1 000 000th entry is past the newest segment's grow point; under TSan,
 * 200 000 entries, it holds two, and its peak, 12.9 MB, is below that
 * figure: the failure was not TSan's); it failed only when the last
 * batches left the pool within 64 KiB of its limit. full_pool_round makes
 * both happen every time. */
static void check_released(ldg_ledger *l, ldg_stream *s, size_t fixed) {
  size_t held = ldg_ledger_bytes(l);
  size_t in_force = ldg__pool_limit_in_force(l);
  size_t pool = pool_bytes(l), ring = ldg__ring_bytes(s);
  fprintf(stderr,
          "after release + quiesce %zu: pool %zu (limit %zu), segments %zu\n",
          held, pool, in_force, ring);
  CHECK_EQ(ldg_pending_count(s), 0);
  CHECK_LE(pool, in_force);
  CHECK_LE(ldg__ring_segments_ahead(s), 1);
  CHECK_LE(ring, 3 * ldg__pool_seg_bytes(7));
  CHECK_EQ(held, fixed + ring + pool);
}

static void one_round(ldg_ledger *l, ldg_stream *s, int round) {
  long released = 0;
  give_back(l);
  size_t base = ldg_ledger_bytes(l);
  size_t fixed = fixed_bytes(l, s);
  for (long i = 0; i < 1000; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  size_t at_1000 = ldg_ledger_bytes(l);
  for (long i = 1000; i < N_ENTRIES; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  size_t peak = ldg_ledger_bytes(l);
  CHECK_EQ(ldg_pending_count(s), N_ENTRIES);
  fprintf(stderr, "round %d: base %zu, 1000 pending %zu, %ld pending %zu\n",
          round, base, at_1000, N_ENTRIES, peak);
  /* every entry stores at least its keep */
  CHECK_GE(peak, (size_t)N_ENTRIES * sizeof(ldg_keep));
  CHECK_GT(peak, 20 * at_1000);

  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(released, N_ENTRIES);
  CHECK_EQ(ldg_pending_count(s), 0);
  ldg_quiesce();
  /* Without a trim: the stream's last segments and the pool, within its
   * limit in force, set from the reclaimer's batch (ledger/pool.c, HOW MUCH
   * THE POOL KEEPS), never above the default bound (32 MiB). */
  CHECK_LE(ldg__pool_limit_in_force(l), (size_t)32 << 20);
  check_released(l, s, fixed);
  give_back(l);
  size_t after = ldg_ledger_bytes(l);
  fprintf(stderr, "round %d: after trim %zu\n", round, after);
  CHECK_LT(after, peak / 50);
  CHECK_LT(after, (size_t)1 << 20);
}

/* Entries with out-of-line id and range arrays give those back too. */
static void arrays_round(ldg_ledger *l, ldg_stream *s) {
  enum { IDS = 64, RANGES = 16 };
  uint64_t ids[IDS];
  ldg_range rs[RANGES];
  for (int i = 0; i < IDS; i++) ids[i] = (uint64_t)i + 1;
  for (int i = 0; i < RANGES; i++)
    rs[i] = (ldg_range){0x100000 + (uintptr_t)i * 0x100, 0x80};
  long released = 0;
  for (long i = 0; i < N_WITH_ARRAYS; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), ids, IDS, rs, RANGES,
                         NULL));
  size_t peak = ldg_ledger_bytes(l);
  fprintf(stderr, "arrays: %ld pending %zu\n", N_WITH_ARRAYS, peak);
  CHECK_GE(peak, (size_t)N_WITH_ARRAYS * IDS * sizeof(uint64_t));
  /* release in two steps, by mark */
  ldg_seq half = ldg_mark(s) - (ldg_seq)(N_WITH_ARRAYS / 2);
  CHECK_OK(ldg_release(s, half));
  CHECK_EQ(released, N_WITH_ARRAYS / 2);
  CHECK(ldg_holds_vector(l, IDS));
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(released, N_WITH_ARRAYS);
  CHECK(!ldg_holds_vector(l, 1));
  give_back(l);
  size_t after = ldg_ledger_bytes(l);
  fprintf(stderr, "arrays: after release + quiesce %zu\n", after);
  CHECK_LT(after, peak / 50);
  CHECK_LT(after, (size_t)1 << 20);
}

/* Released entries give their id arrays back even when they sit in the
 * newest ring segment: 50 entries of 20 000 ids (8 MB), released, leave no
 * more than a segment and a handle behind once a grace period has passed. */
static void big_arrays_round(ldg_ledger *l) {
  enum { IDS = 20000, N = 50 };
  static uint64_t ids[IDS];
  for (int i = 0; i < IDS; i++) ids[i] = 5000 + (uint64_t)i;
  give_back(l);
  size_t base = ldg_ledger_bytes(l);
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  for (long i = 0; i < N; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), ids, IDS, NULL, 0, NULL));
  size_t peak = ldg_ledger_bytes(l);
  CHECK_GE(peak - base, (size_t)N * IDS * sizeof(uint64_t));
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(released, N);
  CHECK(!ldg_holds_vector(l, 5000));
  give_back(l);
  size_t after = ldg_ledger_bytes(l);
  fprintf(stderr,
          "big arrays: base %zu, peak %zu, after release + quiesce %zu\n",
          base, peak, after);
  CHECK_LT(after - base, (size_t)128 << 10); /* a segment and a handle */
  CHECK_LT(after, peak / 50);
  ldg_stream_unref(s);
  give_back(l);
  CHECK_LE(ldg_ledger_bytes(l), base);
}

/* With a pool limit of 0, nothing released stays allocated past a grace
 * period: ldg_quiesce alone gives the segments back. */
static void strict_round(void) {
  ldg_ledger *l = new_ledger();
  CHECK_EQ(ldg_ledger_set_pool_limit(NULL, 0), LDG_EINVAL);
  CHECK_OK(ldg_ledger_set_pool_limit(l, 0));
  ldg_stream *s = new_stream(l, 0, false);
  ldg_quiesce();
  size_t base = ldg_ledger_bytes(l);
  long released = 0;
  for (long i = 0; i < N_ENTRIES / 4; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  size_t peak = ldg_ledger_bytes(l);
  CHECK_OK(ldg_release_all(s));
  ldg_quiesce();
  size_t after = ldg_ledger_bytes(l);
  fprintf(stderr, "strict: base %zu, peak %zu, after quiesce %zu\n", base,
          peak, after);
  CHECK_LE(after, base + ((size_t)64 << 10) + 64); /* the newest segment */
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
}

/* Enqueues n entries counted in *released. */
static void enqueue_n(ldg_stream *s, long n, long *released) {
  for (long i = 0; i < n; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(released), NULL, 0, NULL, 0, NULL));
}

/* n shared streams of l into s, each of which retires one 8-slot and one
 * 64-slot segment (classes 0 and 3) and keeps its third, then a grace
 * period: what fits in the pool is there. Shared: every retired segment
 * reaches the pool (an owner may keep its 64-slot one hot when the ring
 * filled slowly). */
static void retire_two_classes(ldg_ledger *l, ldg_stream **s, int n) {
  long released = 0;
  for (int i = 0; i < n; i++) {
    s[i] = new_shared_stream(l, 0);
    /* seq 9 opens a 64-slot segment (backlog 8), seq 73 a third one. */
    enqueue_n(s[i], 8 + 64 + 1, &released);
    CHECK_OK(ldg_release_all(s[i]));
  }
  CHECK_EQ(released, (long)n * (8 + 64 + 1));
  ldg_quiesce();
}

/* Short-lived streams that go past their first (8-slot) segment retire it
 * into pool class 0; new streams take their first segment from there
 * (issue 8, defect 5: they never did, and after ~1 800 such streams the
 * 1 MiB pool was all class 0, leaving no room for a busy stream's
 * segments). Between quiescent points the class holds at most what one
 * round retired, and a busy stream afterwards still gets pooled 64-slot
 * segments back. */
static void short_lived_streams(void) {
  enum { ROUNDS = UNDER_SANITIZER ? 12 : 30, PER = 100 };
  ldg_ledger *l = new_ledger();
  long released = 0;
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < PER; i++) {
      ldg_stream *s = new_stream(l, 0, false);
      enqueue_n(s, 10, &released); /* past the first segment */
      CHECK_OK(ldg_release_all(s));
      ldg_stream_unref(s);
    }
    ldg_quiesce();
    CHECK_LE(ldg__pool_count(l, 0), PER);
  }
  CHECK_EQ(released, 10L * ROUNDS * PER);
  /* Every round after the first found the previous one's in the pool. */
  CHECK_GE(ldg__pool_reused(l, 0), (unsigned long)(ROUNDS - 1) * PER);
  size_t pooled0 = ldg__pool_count(l, 0) * ldg__pool_seg_bytes(0);
  fprintf(stderr, "short-lived: class 0 holds %zu segments (%zu bytes)\n",
          ldg__pool_count(l, 0), pooled0);
  /* A busy stream's retired 64-slot segments are pooled and reused. Not
   * owned (LDG_STREAM_SHARED): an owner keeps one segment per release as
   * its spare at once (ledger/segment.c, HOT REUSE ON OWNED STREAMS), and
   * where segments fill slowly (a sanitizer) that was all the reuse there
   * was; tests/torture/hot_test.c covers that path. */
  ldg_stream *b;
  CHECK_OK(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &b));
  for (int r = 0; r < 4; r++) {
    enqueue_n(b, 300, &released);
    CHECK_OK(ldg_release_all(b));
    ldg_quiesce();
  }
  unsigned long reused_big = 0;
  for (unsigned c = 3; c < 8; c++) reused_big += ldg__pool_reused(l, c);
  CHECK_GT(reused_big, 0);
  ldg_stream_unref(b);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

/* The pool limit bounds the pooled bytes exactly, each segment's own size
 * included (a mutant that checked the bytes pooled so far against the limit,
 * without the segment being added, pooled one more). Three streams each
 * retire one 8-slot and one 64-slot segment; with the limit set to three of
 * the first and two of the second, exactly those are pooled, in whatever
 * order the grace periods end: a third 64-slot segment never fits (it is
 * bigger than three 8-slot ones), an 8-slot one always does. */
static void pool_limit_exact(void) {
  size_t b0 = ldg__pool_seg_bytes(0), b3 = ldg__pool_seg_bytes(3);
  CHECK_GT(b3, 3 * b0);
  size_t limit = 3 * b0 + 2 * b3;
  ldg_ledger *l = new_ledger();
  CHECK_OK(ldg_ledger_set_pool_limit(l, limit));
  ldg_stream *s[3];
  retire_two_classes(l, s, 3);
  CHECK_EQ(ldg__pool_count(l, 0), 3);
  CHECK_EQ(ldg__pool_count(l, 3), 2);
  size_t with_pool = ldg_ledger_bytes(l);
  ldg_ledger_trim(l);
  ldg_quiesce();
  /* What the pool held, as ldg_ledger_bytes counts it: the limit, exactly. */
  CHECK_EQ(with_pool - ldg_ledger_bytes(l), limit);
  for (int i = 0; i < 3; i++) ldg_stream_unref(s[i]);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

/* Lowering the pool limit gives back at once what the pool holds above the
 * new limit (ldg_ledger_set_pool_limit: "the most bytes of retired segments
 * the pool keeps"), not at the ledger's next reclaimer batch, which a quiet
 * ledger may never run; ldg_ledger_bytes drops by it after a grace period.
 * Raising it gives back nothing. */
static void lowered_limit_gives_back(void) {
  ldg_ledger *l = new_ledger(); /* the default bound, 32 MiB */
  ldg_stream *s[4];
  retire_two_classes(l, s, 4);
  size_t b0 = ldg__pool_seg_bytes(0), b3 = ldg__pool_seg_bytes(3);
  CHECK_EQ(ldg__pool_count(l, 0), 4);
  CHECK_EQ(ldg__pool_count(l, 3), 4);
  CHECK_EQ(pool_bytes(l), 4 * b0 + 4 * b3);
  CHECK_OK(ldg_ledger_set_pool_limit(l, (size_t)64 << 20)); /* raised */
  CHECK_EQ(pool_bytes(l), 4 * b0 + 4 * b3);
  size_t with_pool = ldg_ledger_bytes(l);
  /* Below the pool: the largest class goes first, until it fits. */
  size_t limit = 4 * b0 + b3;
  CHECK_OK(ldg_ledger_set_pool_limit(l, limit));
  CHECK_LE(pool_bytes(l), limit);
  CHECK_EQ(ldg__pool_count(l, 0), 4); /* under the limit once class 3 went */
  ldg_quiesce();
  CHECK_EQ(with_pool - ldg_ledger_bytes(l), 4 * b3);
  /* And a limit below the smallest class empties it. */
  CHECK_OK(ldg_ledger_set_pool_limit(l, b0 - 1));
  CHECK_EQ(pool_bytes(l), 0);
  for (int i = 0; i < 4; i++) ldg_stream_unref(s[i]);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

/* ldg_stream_destroy gives back the stream's parked spare at once: a
 * destroyed stream that references keep alive (events, waits, handles)
 * never grows again, so the spare would only wait for the last unref. */
static void destroy_drops_spare(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_shared_stream(l, 0);
  long released = 0;
  /* A release prepares the spare once tail passes a quarter of the newest
   * segment: a few rounds of 16. */
  for (int r = 0; r < 1000 && ldg__ring_spare_bytes(s) == 0; r++) {
    enqueue_n(s, 16, &released);
    CHECK_OK(ldg_release_all(s));
  }
  size_t spare = ldg__ring_spare_bytes(s);
  CHECK_GT(spare, 0);
  size_t ring = ldg__ring_bytes(s);
  ldg_stream_ref(s); /* an event's, say */
  CHECK_OK(ldg_stream_destroy(s));
  CHECK_EQ(ldg__ring_spare_bytes(s), 0);
  CHECK_EQ(ldg__ring_bytes(s), ring - spare);
  ldg_stream_unref(s);
  ldg_stream_unref(s);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

/* A done segment with no successor stays (it is the newest); the extender
 * that links one must retire it, not leave it to the next segment's last
 * resolver (mutant grow-no-advance: it stayed in the ring until then). */
static void extender_retires_done_tail(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  enqueue_n(s, 8, &released);
  CHECK_OK(ldg_release_all(s)); /* the 8-slot first segment is done */
  CHECK_EQ(released, 8);
  ldg_quiesce();
  CHECK_EQ(ldg__pool_count(l, 0), 0); /* still the newest: kept */
  enqueue_n(s, 1, &released);         /* seq 9 links a 64-slot successor */
  CHECK_OK(ldg_release_all(s));       /* 1 of its 64 slots: not done */
  ldg_quiesce();
  CHECK_EQ(ldg__pool_count(l, 0), 1); /* the first went to the pool */
  CHECK_EQ(ldg_pending_count(s), 0);
  ldg_stream_unref(s);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

/* The deterministic case of check_released's failure: a pool filled to its
 * limit in force, and an owned stream holding its newest segment, one
 * linked ahead and one it kept hot, all of 1024 slots. */
static void full_pool_round(void) {
  size_t seg = ldg__pool_seg_bytes(7); /* 1024 slots */
  /* Below the 1 MiB floor: in force whatever the batches bring, and the
   * pool is never trimmed (nothing in it is above the limit). */
  size_t limit = 8 * seg;
  ldg_ledger *l = new_ledger();
  CHECK_OK(ldg_ledger_set_pool_limit(l, limit));
  ldg_stream *s = new_stream(l, 0, false); /* owned by this thread */
  give_back(l);
  size_t fixed = fixed_bytes(l, s);
  long released = 0;
  enqueue_n(s, 16 * 1024, &released);
  /* A segment linked at seq q has at least q slots (the backlog: nothing
   * was released), so from seq 2048 on all have 1024. The ones before
   * depend on how fast the ring filled (segment.c, ldg__next_seg_size):
   * where two in a row have one size (a sanitizer, a loaded machine) the
   * owner keeps the first as its spare. Those go first, with what was
   * kept or prepared meanwhile, and the pool. */
  CHECK_OK(ldg_release(s, 4096));
  ldg_ledger_trim(l);
  ldg_quiesce();
  CHECK_EQ(pool_bytes(l), 0);
  /* Up to the newest segment's grow point: its enqueuer links the next one
   * ahead. */
  long n = 16 * 1024 + (long)(ldg__ring_grow_at(s) - ldg_mark(s));
  enqueue_n(s, n - 16 * 1024, &released);
  CHECK_EQ(ldg__ring_segments_ahead(s), 1);
  uint64_t hot = ldg__ring_hot_reused(s);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(released, n);
  ldg_quiesce();
  CHECK_EQ(ldg__pool_limit_in_force(l), limit);
  /* 11 or more retired, 1 kept hot, 8 pooled: the pool is full. */
  CHECK_EQ(pool_bytes(l), limit);
  CHECK_EQ(ldg__ring_hot_reused(s), hot + 1);
  CHECK_EQ(ldg__ring_bytes(s), 3 * seg); /* newest, ahead, spare */
  check_released(l, s, fixed);
  ldg_stream_unref(s);
  give_back(l);
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
}

int main(void) {
  full_pool_round();
  extender_retires_done_tail();
  strict_round();
  short_lived_streams();
  pool_limit_exact();
  lowered_limit_gives_back();
  destroy_drops_spare();
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  one_round(l, s, 1);
  one_round(l, s, 2); /* nothing kept from the first round */
  arrays_round(l, s);
  /* a destroyed and unreferenced stream leaves nothing behind either */
  give_back(l);
  size_t before_t = ldg_ledger_bytes(l);
  ldg_stream *t = new_stream(l, 0, true);
  long n = 0;
  for (long i = 0; i < N_ENTRIES / 10; i++)
    CHECK_OK(ldg_enqueue(t, count_keep(&n), NULL, 0, NULL, 0, NULL));
  size_t with_t = ldg_ledger_bytes(l);
  CHECK_OK(ldg_stream_destroy(t));
  ldg_stream_unref(t);
  CHECK_EQ(n, N_ENTRIES / 10);
  give_back(l);
  size_t after = ldg_ledger_bytes(l);
  fprintf(stderr, "destroyed stream: %zu -> %zu\n", with_t, after);
  CHECK_LE(after, before_t); /* the stream's memory is all gone */
  big_arrays_round(l);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("memory follows the work");
  return 0;
}
