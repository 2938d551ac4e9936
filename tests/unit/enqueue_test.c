/* Proves ldg_enqueue: seq = mark + 1, optional seq_out, NULL release, copied arrays, bad input and allocation failure refused with nothing changed and keep not called, range edges, big arrays. */
#include <stdint.h>
#include <time.h>

#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

static void test_seq(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *t = new_stream(l, 0, true);
  long n = 0;
  ldg_seq seq = 0;
  CHECK_EQ(ldg_mark(s), 0);
  CHECK_EQ(ldg_pending_count(s), 0);
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, NULL, 0, &seq));
  CHECK_EQ(seq, 1);
  CHECK_EQ(ldg_mark(s), 1);
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, NULL, 0, NULL));
  CHECK_EQ(ldg_mark(s), 2);
  CHECK_OK(ldg_add_wait(s, t, 0, &seq)); /* a wait takes a seq too */
  CHECK_EQ(seq, 3);
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, NULL, 0, &seq));
  CHECK_EQ(seq, 4);
  CHECK_EQ(ldg_pending_count(s), 3);
  /* per stream */
  CHECK_EQ(ldg_mark(t), 0);
  CHECK_OK(ldg_enqueue(t, count_keep(&n), NULL, 0, NULL, 0, &seq));
  CHECK_EQ(seq, 1);
  CHECK_EQ(ldg_mark(s), 4);
  /* seqs do not restart after a release */
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(n, 3);
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, NULL, 0, &seq));
  CHECK_EQ(seq, 5);
  CHECK_EQ(ldg_pending_count(s), 1);
  ldg_stream_unref(s);
  ldg_stream_unref(t);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 5);
  PASS("seq = previous mark + 1, seq_out optional");
}

static void test_null_release(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  uint64_t v = 5;
  ldg_range r = {0x4000, 64};
  CHECK_OK(ldg_enqueue(s, (ldg_keep){NULL, (void *)0x1}, &v, 1, &r, 1, NULL));
  CHECK_OK(ldg_enqueue(s, (ldg_keep){NULL, NULL}, NULL, 0, NULL, 0, NULL));
  CHECK_EQ(ldg_pending_count(s), 2);
  CHECK(ldg_holds_vector(l, 5));
  CHECK_OK(ldg_release(s, 1));
  CHECK_EQ(ldg_pending_count(s), 1);
  CHECK(!ldg_holds_vector(l, 5));
  CHECK(!ldg_holds_host_range(l, 0x4000, 64));
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("a NULL keep.release is allowed");
}

/* The caller may change and free its arrays right after ldg_enqueue. */
static void test_arrays_copied(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  uint64_t *ids = malloc(3 * sizeof *ids);
  ldg_range *rs = malloc(2 * sizeof *rs);
  CHECK(ids && rs);
  ids[0] = 101, ids[1] = 102, ids[2] = 103;
  rs[0] = (ldg_range){0x10000, 0x100};
  rs[1] = (ldg_range){0x20000, 0x10};
  rec_log log;
  rec_log_init(&log);
  rec_keep k;
  CHECK_OK(ldg_enqueue(s, rec_keep_of(&k, &log, 1), ids, 3, rs, 2, NULL));
  ids[0] = 201, ids[1] = 202, ids[2] = 203;
  rs[0] = (ldg_range){0x90000, 0x100};
  rs[1] = (ldg_range){0xA0000, 0x10};
  for (int pass = 0; pass < 2; pass++) {
    CHECK(ldg_holds_vector(l, 101));
    CHECK(ldg_holds_vector(l, 102));
    CHECK(ldg_holds_vector(l, 103));
    CHECK(ldg_holds_host_range(l, 0x10000, 1));
    CHECK(ldg_holds_host_range(l, 0x100FF, 1));
    CHECK(ldg_holds_host_range(l, 0x2000F, 1));
    CHECK(!ldg_holds_host_range(l, 0x20010, 1));
    if (pass == 0) {
      CHECK(!ldg_holds_vector(l, 201));
      CHECK(!ldg_holds_vector(l, 203));
      CHECK(!ldg_holds_host_range(l, 0x90000, 0x100));
      CHECK(!ldg_holds_host_range(l, 0xA0000, 0x10));
      free(ids); /* under ASan, a ledger still reading these would fail */
      free(rs);
    }
  }
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(k.releases, 1);
  CHECK(!ldg_holds_vector(l, 101));
  CHECK(!ldg_holds_host_range(l, 0x10000, 0x100));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("vec_ids and ranges are copied");
}

typedef struct state {
  ldg_seq mark;
  size_t pending;
} state;

static state state_of(ldg_stream *s) {
  return (state){ldg_mark(s), ldg_pending_count(s)};
}

#define CHECK_UNCHANGED(s, st)                                             \
  do {                                                                     \
    CHECK_EQ(ldg_mark(s), (st).mark);                                      \
    CHECK_EQ(ldg_pending_count(s), (st).pending);                          \
  } while (0)

/* Bad input is LDG_EINVAL: nothing recorded, mark unchanged, keep not called. */
static void test_einval(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  rec_log log;
  rec_log_init(&log);
  rec_keep k0, k1, bad;
  put_vec(s, &k0, &log, 1, 1);
  state st = state_of(s);
  uint64_t v[2] = {77, 78};
  ldg_range good = {0x5000, 16};
  ldg_seq seq = 999;

  CHECK_RC(ldg_enqueue(NULL, rec_keep_of(&bad, &log, 9), v, 2, &good, 1, &seq),
           LDG_EINVAL);
  CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), NULL, 1, &good, 1, &seq),
           LDG_EINVAL);
  CHECK_UNCHANGED(s, st);
  CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), v, 2, NULL, 2, &seq),
           LDG_EINVAL);
  CHECK_UNCHANGED(s, st);
  {
    ldg_range rs[2] = {{0x5000, 16}, {0x6000, 0}}; /* zero-byte range */
    CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), v, 2, rs, 2, &seq),
             LDG_EINVAL);
    CHECK_UNCHANGED(s, st);
  }
  {
    ldg_range rs[1] = {{UINTPTR_MAX - 3, 8}}; /* wraps */
    CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), v, 2, rs, 1, &seq),
             LDG_EINVAL);
    CHECK_UNCHANGED(s, st);
  }
  {
    ldg_range rs[2] = {{0x5000, 16}, {UINTPTR_MAX, 2}}; /* wraps by one */
    CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), v, 2, rs, 2, &seq),
             LDG_EINVAL);
    CHECK_UNCHANGED(s, st);
  }
  {
    ldg_range rs[1] = {{0x100, SIZE_MAX}}; /* wraps, huge */
    CHECK_RC(ldg_enqueue(s, rec_keep_of(&bad, &log, 9), NULL, 0, rs, 1, &seq),
             LDG_EINVAL);
    CHECK_UNCHANGED(s, st);
  }
  CHECK_EQ(seq, 999);
  CHECK_EQ(bad.releases, 0);
  CHECK_EQ(log.total, 0);
  CHECK(!ldg_holds_vector(l, 77));
  CHECK(!ldg_holds_vector(l, 78));
  CHECK(!ldg_holds_host_range(l, 0x5000, 16));

  /* the next good enqueue gets the seq the refused ones did not take */
  put_vec(s, &k1, &log, 2, 2);
  CHECK_EQ(ldg_mark(s), st.mark + 1);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(log.total, 2);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(bad.releases, 0);
  PASS("bad input is LDG_EINVAL and changes nothing");
}

/* Ranges up to the top of the address space (addr + bytes == 2^64) are fine;
 * non-NULL arrays with zero counts are ignored. */
static void test_edges_accepted(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  ldg_range top = {UINTPTR_MAX - 7, 8};
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, &top, 1, NULL));
  CHECK(ldg_holds_host_range(l, UINTPTR_MAX, 1));
  CHECK(ldg_holds_host_range(l, UINTPTR_MAX - 7, 1));
  CHECK(!ldg_holds_host_range(l, UINTPTR_MAX - 8, 1));
  ldg_range last_byte = {UINTPTR_MAX, 1};
  CHECK_OK(ldg_enqueue(s, count_keep(&n), NULL, 0, &last_byte, 1, NULL));
  CHECK_OK(ldg_release(s, 1));
  CHECK(!ldg_holds_host_range(l, UINTPTR_MAX - 7, 7));
  CHECK(ldg_holds_host_range(l, UINTPTR_MAX, 1));
  CHECK_OK(ldg_release_all(s));
  CHECK(!ldg_holds_host_range(l, UINTPTR_MAX, 1));

  uint64_t ignored_id = 55;
  ldg_range ignored_range = {0x7000, 0}; /* would be invalid if read */
  CHECK_OK(ldg_enqueue(s, count_keep(&n), &ignored_id, 0, &ignored_range, 0,
                       NULL));
  CHECK_EQ(ldg_pending_count(s), 1);
  CHECK(!ldg_holds_vector(l, 55));
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(n, 3);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("a range ending at the top of the address space is accepted");
}

/* Entries of every small shape (ids and ranges, inline or not) answer the
 * queries for each of their ids and ranges, and nothing else. */
static void test_shapes(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  for (size_t nv = 0; nv <= 6; nv++) {
    for (size_t nr = 0; nr <= 3; nr++) {
      uint64_t ids[6];
      ldg_range rs[3];
      uint64_t id0 = 1000 * (nv * 4 + nr + 1);
      uintptr_t a0 = (uintptr_t)id0 << 16;
      for (size_t i = 0; i < nv; i++) ids[i] = id0 + 2 * i;
      for (size_t i = 0; i < nr; i++)
        rs[i] = (ldg_range){a0 + i * 0x200, 0x100};
      CHECK_OK(ldg_enqueue(s, count_keep(&n), ids, nv, rs, nr, NULL));
      for (size_t i = 0; i < nv; i++) {
        CHECK(ldg_holds_vector(l, id0 + 2 * i));
        CHECK(!ldg_holds_vector(l, id0 + 2 * i + 1));
      }
      CHECK(!ldg_holds_vector(l, id0 + 2 * nv));
      for (size_t i = 0; i < nr; i++) {
        CHECK(ldg_holds_host_range(l, a0 + i * 0x200 + 0xFF, 1));
        CHECK(!ldg_holds_host_range(l, a0 + i * 0x200 + 0x100, 0x100));
      }
      CHECK(!ldg_holds_host_range(l, a0 + nr * 0x200, 0x100));
      CHECK_OK(ldg_release_all(s));
      for (size_t i = 0; i < nv; i++) CHECK(!ldg_holds_vector(l, id0 + 2 * i));
      for (size_t i = 0; i < nr; i++)
        CHECK(!ldg_holds_host_range(l, a0 + i * 0x200, 0x100));
    }
  }
  CHECK_EQ(n, 7 * 4);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("entries of every small shape answer the queries");
}

#define BIG_IDS 1000
#define BIG_RANGES 100

static uint64_t big_ids[BIG_IDS];
static ldg_range big_ranges[BIG_RANGES];

static void fill_big(void) {
  for (int i = 0; i < BIG_IDS; i++) big_ids[i] = 1000000 + 3 * (uint64_t)i;
  for (int i = 0; i < BIG_RANGES; i++)
    big_ranges[i] = (ldg_range){0x100000 + (uintptr_t)i * 0x1000, 0x800};
}

static void check_big_held(ldg_ledger *l, bool held) {
  for (int i = 0; i < BIG_IDS; i++) {
    CHECK_EQ(ldg_holds_vector(l, big_ids[i]), held);
    CHECK(!ldg_holds_vector(l, big_ids[i] + 1));
  }
  for (int i = 0; i < BIG_RANGES; i++) {
    CHECK_EQ(ldg_holds_host_range(l, big_ranges[i].addr, 1), held);
    CHECK_EQ(ldg_holds_host_range(l, big_ranges[i].addr + 0x7FF, 1), held);
    CHECK(!ldg_holds_host_range(l, big_ranges[i].addr + 0x800, 0x800));
  }
}

static void test_big_arrays(void) {
  fill_big();
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, true);
  rec_log log;
  rec_log_init(&log);
  rec_keep k;
  CHECK_OK(ldg_enqueue(s, rec_keep_of(&k, &log, 1), big_ids, BIG_IDS,
                       big_ranges, BIG_RANGES, NULL));
  check_big_held(l, true);
  ldg_stream *out[1];
  CHECK_EQ(ldg_nonblocking_holding(l, big_ids[BIG_IDS - 1], out, 1), 1);
  CHECK_PTR_EQ(out[0], s);
  ldg_stream_unref(out[0]);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(k.releases, 1);
  check_big_held(l, false);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("1000 vector ids and 100 ranges in one entry");
}

/* Every allocation point of an enqueue, failed in turn, gives LDG_ENOMEM
 * with nothing changed and the keep not called. */
static void test_enomem_each_allocation(void) {
  fill_big();
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  rec_log log;
  rec_log_init(&log);
  rec_keep k0, k[64];
  memset(k, 0, sizeof k);
  put_vec(s, &k0, &log, 1000, 1);
  int failures = 0, oks = 0;
  for (long n = 1; n < 64; n++) {
    state st = state_of(s);
    long before = ldg__fault_injected();
    ldg_seq seq = 777;
    ldg__fault_fail_alloc_at(n);
    int rc = ldg_enqueue(s, rec_keep_of(&k[n], &log, (int)n), big_ids, BIG_IDS,
                         big_ranges, BIG_RANGES, &seq);
    ldg__fault_fail_alloc_at(0);
    long hit = ldg__fault_injected() - before;
    if (rc == LDG_ENOMEM) {
      failures++;
      CHECK_GE(hit, 1);
      CHECK_UNCHANGED(s, st);
      CHECK_EQ(seq, 777);
      CHECK_EQ(k[n].releases, 0);
      CHECK(!ldg_holds_vector(l, big_ids[0]));
      CHECK(!ldg_holds_host_range(l, big_ranges[0].addr, 1));
      continue;
    }
    CHECK_OK(rc);
    oks++;
    CHECK_EQ(seq, st.mark + 1);
    CHECK_EQ(ldg_pending_count(s), st.pending + 1);
    CHECK(ldg_holds_vector(l, big_ids[BIG_IDS - 1]));
    if (hit == 0) break; /* the n-th allocation was never reached */
    /* recovered from the failure internally: allowed; try the next point */
    CHECK_OK(ldg_release_all(s));
  }
  CHECK_GE(failures, 1);
  CHECK_GE(oks, 1);
  CHECK_OK(ldg_release_all(s));
  for (long n = 1; n < 64; n++) CHECK_LE(k[n].releases, 1);
  CHECK_EQ(log.total, oks + 1);
  check_big_held(l, false);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(k0.releases, 1);
  PASS("LDG_ENOMEM at each allocation of an enqueue changes nothing");
}

/* With every allocation failing: a fresh stream refuses big arrays, and a
 * stream that must grow its ring refuses the entry that needs it. */
static void test_enomem_all(void) {
  fill_big();
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  rec_log log;
  rec_log_init(&log);
  rec_keep k;
  ldg_seq seq = 5;
  ldg__fault_fail_all_allocs(true);
  int rc = ldg_enqueue(s, rec_keep_of(&k, &log, 1), big_ids, BIG_IDS,
                       big_ranges, BIG_RANGES, &seq);
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(rc, LDG_ENOMEM);
  CHECK_EQ(seq, 5);
  CHECK_EQ(ldg_mark(s), 0);
  CHECK_EQ(ldg_pending_count(s), 0);
  CHECK_EQ(k.releases, 0);
  CHECK(!ldg_holds_vector(l, big_ids[10]));
  CHECK_OK(ldg_enqueue(s, rec_keep_of(&k, &log, 1), big_ids, BIG_IDS,
                       big_ranges, BIG_RANGES, &seq));
  CHECK_EQ(seq, 1);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(k.releases, 1);

  /* ring growth: pending work must eventually need memory */
  long n_ok = 0, released = 0;
  int last_rc = LDG_OK;
  ldg__fault_fail_all_allocs(true);
  for (long i = 0; i < (1L << 21); i++) {
    ldg_seq m = ldg_mark(s);
    size_t p = ldg_pending_count(s);
    last_rc = ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL);
    if (last_rc != LDG_OK) {
      /* check before allowing allocations again */
      CHECK_EQ(ldg_mark(s), m);
      CHECK_EQ(ldg_pending_count(s), p);
      break;
    }
    n_ok++;
  }
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(last_rc, LDG_ENOMEM);
  CHECK_EQ(released, 0);
  CHECK_EQ(ldg_pending_count(s), n_ok);
  CHECK_EQ(ldg_mark(s), 1 + n_ok);
  CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, &seq));
  CHECK_EQ(seq, 2 + n_ok);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(released, n_ok + 1);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("LDG_ENOMEM with all allocations failing, including ring growth");
}

/* The spare (ledger/segment.c, THE SPARE): a release past a quarter of the
 * newest segment prepares the next one, so the enqueue that grows the ring
 * at the grow point (GROWING AHEAD) allocates nothing (issue 11: that
 * allocation, 7-8 us, was the p99.9 of enqueue). Proven with every
 * allocation failing from the release on: the growing enqueue still
 * succeeds, and no allocation was even attempted. A prepare that cannot
 * allocate is no error; ldg_ledger_trim gives the spare back; the stream's
 * end returns it. Segment ages are kept past 50 ms so the sizes chosen are
 * the backlog's (64 slots, pool class 3). The ring grows at a segment's
 * grow point, half way to R = ldg__fast_reserve() seqs before its end, and
 * the spare is prepared half way to there. */
static void test_spare_takes_growth_off_the_enqueue(void) {
  ldg_ledger *l = new_ledger(); /* its pool has no 64-slot segment yet */
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  const struct timespec t60ms = {0, 60 * 1000 * 1000};
  const long r = (long)ldg__fast_reserve();
  CHECK(r > 0 && r < 64);
  /* seqs 1..8: the first segment; 9 grows the ring by a 64-slot segment
   * (9..72), which grows again at its grow point 9 + (64 - r) / 2 (25),
   * and prepares the spare half way to there: 17. */
  const long cross1 = 9 + (64 - r) / 2, half1 = 9 + (64 - r) / 4;
  for (int i = 0; i < 9; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  CHECK_EQ(ldg__ring_tail_end(s), 73);
  nanosleep(&t60ms, NULL);
  for (long i = 9; i < half1; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));

  /* A release that cannot allocate: no error, no spare. */
  ldg_quiesce();
  size_t before = ldg_ledger_bytes(l);
  ldg__fault_fail_all_allocs(true);
  CHECK_OK(ldg_release_all(s));
  ldg__fault_fail_all_allocs(false);
  CHECK_EQ(released, half1);
  ldg_quiesce();
  CHECK_LE(ldg_ledger_bytes(l), before);

  /* One that can: the spare, one 64-slot segment, counted in the bytes. */
  CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  ldg_quiesce();
  before = ldg_ledger_bytes(l);
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(ldg_ledger_bytes(l), before + ldg__pool_seg_bytes(3));

  /* Seqs up to cross1 - 1 fill, cross1 grows the ring: all with allocation
   * failing. */
  long injected = ldg__fault_injected();
  ldg__fault_fail_all_allocs(true);
  int rc = LDG_OK;
  ldg_seq seq = 0;
  for (long i = half1 + 1; i < cross1 - 1 && rc == LDG_OK; i++)
    rc = ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, &seq);
  CHECK_EQ(ldg__ring_tail_end(s), 73); /* not grown before the grow point */
  if (rc == LDG_OK)
    rc = ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, &seq);
  ldg__fault_fail_all_allocs(false);
  CHECK_OK(rc);
  CHECK_EQ(seq, cross1);
  CHECK_EQ(ldg__ring_tail_end(s), 137); /* grown by the spare */
  CHECK_EQ(ldg__fault_injected(), injected); /* nothing was allocated */
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(released, cross1);

  /* Past a quarter of the new segment (73..136, growing at 73 + (64 - r)
   * / 2: half way to there, 73 + (64 - r) / 4), a release prepares the next
   * spare (pooled or fresh); ldg_ledger_trim gives it back with the pool. */
  const long half2 = 73 + (64 - r) / 4;
  nanosleep(&t60ms, NULL);
  for (long i = cross1; i < half2; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_release_all(s));
  ldg_quiesce();
  before = ldg_ledger_bytes(l);
  size_t pooled = 0;
  for (unsigned c = 0; c < 8; c++)
    pooled += ldg__pool_count(l, c) * ldg__pool_seg_bytes(c);
  ldg_ledger_trim(l);
  ldg_quiesce();
  CHECK_EQ(ldg_ledger_bytes(l), before - pooled - ldg__pool_seg_bytes(3));

  /* And once more, then the stream's end returns it to the pool, and a
   * trim empties that (ASan: no leak). */
  for (long i = half2; i < 130; i++)
    CHECK_OK(ldg_enqueue(s, count_keep(&released), NULL, 0, NULL, 0, NULL));
  CHECK_OK(ldg_release_all(s));
  CHECK_EQ(released, 130);
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_quiesce();
  ldg_ledger_trim(l);
  ldg_quiesce();
  CHECK_EQ(ldg_ledger_bytes(l), 0);
  ldg_ledger_destroy(l);
  PASS("a release prepares the next segment: the enqueue crossing into it allocates nothing");
}

int main(void) {
  test_seq();
  test_null_release();
  test_arrays_copied();
  test_einval();
  test_edges_accepted();
  test_shapes();
  test_big_arrays();
  test_enomem_each_allocation();
  test_enomem_all();
  test_spare_takes_growth_off_the_enqueue();
  return 0;
}
