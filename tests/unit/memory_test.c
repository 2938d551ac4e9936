/* Proves memory follows the work: ldg_ledger_bytes grows with 1 000 000 pending entries and, once they are released and a grace period passed, holds at most the newest segment plus the bounded segment pool, and after ldg_ledger_trim drops below 1/50 of the peak and below 1 MiB (twice in a row); with a pool limit of 0 nothing released stays past a grace period; id/range arrays and destroyed streams are given back too. */
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

static void one_round(ldg_ledger *l, ldg_stream *s, int round) {
  long released = 0;
  give_back(l);
  size_t base = ldg_ledger_bytes(l);
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
  /* Without a trim: the newest segment (64 KiB) and the pool (1 MiB). */
  size_t pooled = ldg_ledger_bytes(l);
  fprintf(stderr, "round %d: after release + quiesce %zu\n", round, pooled);
  CHECK_LE(pooled, base + ((size_t)1 << 20) + ((size_t)128 << 10));
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

int main(void) {
  strict_round();
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
