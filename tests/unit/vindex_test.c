/* Proves the vector index (ldg_ledger_index_vectors, ledger/vindex.c): bad and late calls are refused and change nothing; with the index on, every holds/holders/nonblocking answer equals that of a ledger without it over a seeded random run (tiny index: shared buckets; large: definite misses); the index says "absent" for an id only when no pending entry names it, and for every id once everything is released; under concurrent enqueues, releases (some overtaking enqueues) and queries, an id a pinned entry holds is never reported missing, and every count returns to zero. */
#include <pthread.h>
#include <stdatomic.h>

#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void test_config(void) {
  CHECK_RC(ldg_ledger_index_vectors(NULL, 10), LDG_EINVAL);
  ldg_ledger *l = new_ledger();
  CHECK_RC(ldg_ledger_index_vectors(l, 0), LDG_EINVAL);
  CHECK_RC(ldg_ledger_index_vectors(l, ((size_t)1 << 25) + 1), LDG_EINVAL);
  CHECK(!ldg__vindex_says_absent(l, 5)); /* off */
  size_t before = ldg_ledger_bytes(l);
  CHECK_OK(ldg_ledger_index_vectors(l, 100)); /* 1024 buckets of 8 bytes */
  CHECK_LE(before + 1024 * 8, ldg_ledger_bytes(l));
  CHECK(ldg__vindex_says_absent(l, 5));
  size_t with = ldg_ledger_bytes(l);
  CHECK_RC(ldg_ledger_index_vectors(l, 100), LDG_EBUSY); /* on already */
  CHECK_EQ(ldg_ledger_bytes(l), with);
  ldg_ledger_destroy(l);

  /* After the first stream: refused, nothing changes, queries still walk. */
  l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long released = 0;
  CHECK_OK(ldg_enqueue(s, count_keep(&released), (uint64_t[]){5}, 1, NULL, 0,
                       NULL));
  before = ldg_ledger_bytes(l);
  CHECK_RC(ldg_ledger_index_vectors(l, 100), LDG_EBUSY);
  CHECK_EQ(ldg_ledger_bytes(l), before);
  CHECK(!ldg__vindex_says_absent(l, 6));
  CHECK(ldg_holds_vector(l, 5));
  CHECK(!ldg_holds_vector(l, 6));
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(released, 1);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("index: bad and late calls refused, changing nothing");
}

/* One ledger of the comparison: plain (no index) or indexed. */
#define NS 4
#define IDS 200
struct side {
  ldg_ledger *l;
  ldg_stream *s[NS];
  long released;
};

static void side_init(struct side *d, size_t index_ids) {
  d->l = new_ledger();
  if (index_ids != 0) CHECK_OK(ldg_ledger_index_vectors(d->l, index_ids));
  for (int i = 0; i < NS; i++) d->s[i] = new_stream(d->l, 0, i % 2 == 1);
  d->released = 0;
}

/* Both sides answer every query alike; the index says absent only for ids
 * nobody holds. */
static void compare(struct side *plain, struct side *idx) {
  for (uint64_t id = 0; id < IDS + 5; id++) {
    bool h = ldg_holds_vector(plain->l, id);
    CHECK_EQ(ldg_holds_vector(idx->l, id), h);
    CHECK_EQ(ldg_vector_holders(idx->l, id, NULL, 0),
             ldg_vector_holders(plain->l, id, NULL, 0));
    CHECK_EQ(ldg_nonblocking_holding(idx->l, id, NULL, 0),
             ldg_nonblocking_holding(plain->l, id, NULL, 0));
    if (h) CHECK(!ldg__vindex_says_absent(idx->l, id));
  }
}

static void run_compare(size_t index_ids, const char *name) {
  struct side plain, idx;
  side_init(&plain, 0);
  side_init(&idx, index_ids);
  uint64_t rng = 0x5eed0001u + index_ids;
  const int steps = UNDER_SANITIZER ? 600 : 3000;
  for (int step = 0; step < steps; step++) {
    uint64_t r = xorshift(&rng);
    int k = (int)(r % NS);
    unsigned what = (unsigned)((r >> 8) % 10);
    if (what < 6) { /* an operation naming 0..6 ids (over 4 words: out of line) */
      uint64_t ids[6];
      size_t n = (size_t)((r >> 16) % 7);
      for (size_t i = 0; i < n; i++) ids[i] = xorshift(&rng) % IDS;
      CHECK_OK(ldg_enqueue(plain.s[k], count_keep(&plain.released), ids, n,
                           NULL, 0, NULL));
      CHECK_OK(ldg_enqueue(idx.s[k], count_keep(&idx.released), ids, n, NULL,
                           0, NULL));
    } else if (what < 8) { /* release part of a stream */
      ldg_seq m = ldg_mark(plain.s[k]);
      ldg_seq upto = m == 0 ? 0 : (ldg_seq)((r >> 20) % (m + 1));
      CHECK_OK(ldg_release(plain.s[k], upto));
      CHECK_OK(ldg_release(idx.s[k], upto));
    } else if (what < 9) { /* a wait of k on another stream */
      int j = (int)((r >> 24) % NS);
      CHECK_OK(ldg_add_wait(plain.s[k], plain.s[j], ldg_mark(plain.s[j]), NULL));
      CHECK_OK(ldg_add_wait(idx.s[k], idx.s[j], ldg_mark(idx.s[j]), NULL));
    } else { /* destroy it (releasing all) and make a new one */
      struct side *sides[2] = {&plain, &idx};
      for (int d = 0; d < 2; d++) {
        CHECK_OK(ldg_stream_destroy(sides[d]->s[k]));
        ldg_stream_unref(sides[d]->s[k]);
        sides[d]->s[k] = new_stream(sides[d]->l, 0, k % 2 == 1);
      }
    }
    CHECK_EQ(idx.released, plain.released);
    if (step % 10 == 0) compare(&plain, &idx);
  }
  compare(&plain, &idx);
  for (int i = 0; i < NS; i++) {
    CHECK_OK(ldg_release_all(plain.s[i]));
    CHECK_OK(ldg_release_all(idx.s[i]));
  }
  CHECK_EQ(idx.released, plain.released);
  /* Every count back to zero: every id is a definite miss. */
  for (uint64_t id = 0; id < IDS + 5; id++)
    CHECK(ldg__vindex_says_absent(idx.l, id));
  for (int i = 0; i < NS; i++) {
    ldg_stream_unref(plain.s[i]);
    ldg_stream_unref(idx.s[i]);
  }
  ldg_ledger_destroy(plain.l);
  ldg_ledger_destroy(idx.l);
  PASS(name);
}

/* ---- Concurrent ------------------------------------------------------------ */

#define PINNED 7u /* held by one entry for the whole run */

/* Keeps of the shared stream run on whichever worker releases it. */
static void atomic_count(void *ctx) { atomic_fetch_add((_Atomic long *)ctx, 1); }

struct conc {
  ldg_ledger *l;
  ldg_stream *shared; /* every worker enqueues and releases here */
  ldg_stream *own[4];
  int workers;
  long iters;
  _Atomic long released[4];
  _Atomic int running;
};

struct warg {
  struct conc *c;
  int tid;
};

static void *worker(void *p) {
  struct warg *a = p;
  struct conc *c = a->c;
  uint64_t rng = 0x9e3779b9u * (uint64_t)(a->tid + 1);
  for (long i = 0; i < c->iters; i++) {
    uint64_t ids[3] = {PINNED, 100 + (uint64_t)a->tid, xorshift(&rng) % 64};
    ldg_stream *s = (i % 3 == 0) ? c->shared : c->own[a->tid];
    ldg_keep k = {atomic_count, &c->released[a->tid]};
    CHECK_OK(ldg_enqueue(s, k, ids, 3, NULL, 0, NULL));
    if (i % 8 == 7) {
      /* A mark read now may overtake another worker's enqueue on the
       * shared stream (that enqueuer then takes its own entry back). */
      CHECK_OK(ldg_release(c->shared, ldg_mark(c->shared)));
      CHECK_OK(ldg_release(c->own[a->tid], ldg_mark(c->own[a->tid])));
    }
  }
  atomic_fetch_sub(&c->running, 1);
  return NULL;
}

static void run_concurrent(size_t index_ids, const char *name) {
  struct conc c = {0};
  c.l = new_ledger();
  CHECK_OK(ldg_ledger_index_vectors(c.l, index_ids));
  c.workers = 3;
  c.iters = UNDER_SANITIZER ? 3000 : 30000;
  ldg_stream *pin = new_stream(c.l, 0, false);
  long pin_released = 0;
  CHECK_OK(ldg_enqueue(pin, count_keep(&pin_released), (uint64_t[]){PINNED}, 1,
                       NULL, 0, NULL));
  c.shared = new_stream(c.l, 0, true);
  for (int t = 0; t < c.workers; t++) c.own[t] = new_stream(c.l, 1, false);
  atomic_store(&c.running, c.workers);
  pthread_t th[4];
  struct warg args[4];
  for (int t = 0; t < c.workers; t++) {
    args[t] = (struct warg){&c, t};
    CHECK_EQ(pthread_create(&th[t], NULL, worker, &args[t]), 0);
  }
  /* The reader: the pinned entry is pending throughout. */
  long queries = 0;
  while (atomic_load(&c.running) > 0 || queries < 100) {
    CHECK(ldg_holds_vector(c.l, PINNED));
    CHECK(!ldg__vindex_says_absent(c.l, PINNED));
    CHECK_LE(1, ldg_vector_holders(c.l, PINNED, NULL, 0));
    queries++;
  }
  for (int t = 0; t < c.workers; t++) CHECK_EQ(pthread_join(th[t], NULL), 0);
  CHECK(ldg_holds_vector(c.l, PINNED));
  CHECK_OK(ldg_release(c.shared, ldg_mark(c.shared)));
  long total = 0;
  for (int t = 0; t < c.workers; t++) {
    CHECK_OK(ldg_release(c.own[t], ldg_mark(c.own[t])));
    total += atomic_load(&c.released[t]);
  }
  CHECK_EQ(total, (long)c.workers * c.iters);
  CHECK(ldg_holds_vector(c.l, PINNED));
  CHECK_OK(ldg_release(pin, ldg_mark(pin)));
  CHECK_EQ(pin_released, 1);
  for (uint64_t id = 0; id < 200; id++) {
    CHECK(ldg__vindex_says_absent(c.l, id));
    CHECK(!ldg_holds_vector(c.l, id));
  }
  ldg_stream_unref(pin);
  ldg_stream_unref(c.shared);
  for (int t = 0; t < c.workers; t++) ldg_stream_unref(c.own[t]);
  ldg_ledger_destroy(c.l);
  PASS(name);
}

int main(void) {
  test_config();
  run_compare(1, "index of 64 buckets (ids share them) answers as no index");
  run_compare(4096, "large index answers as no index");
  run_concurrent(1, "concurrent, 64 buckets: a held id is never missed");
  run_concurrent(1024, "concurrent, large index: a held id is never missed");
  return 0;
}
