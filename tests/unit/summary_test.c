/* Proves the queries' segment summaries (ledger/summary.c): once built, a miss reads no slot and visits fewer segments than the ring has; every pending entry is still found, in every position, after a partial release, behind a reserved but unpublished slot (a paused enqueuer), past an abandoned slot, not once a release claimed it, in out-of-line payloads, after its segment was retired and reused from the pool, after a racing query lowered a summary's upto, in runs naming only ranges; and under concurrent enqueues, releases and queries an entry is found by its own enqueuer between its enqueue and its release. The published filters (enqueuer-kept, summary.c): off in segments linked before the ledger was first queried; then an entry is found as soon as its enqueue returns, before any query summarised its slot, for every kind of publisher and with both filters of a segment in use; a miss they rule out reads only tail; enqueuers widening one filter at once lose none of their entries. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "ledger/ledger_testing.h"
#include "tests/unit/check.h"

#define ABSENT_ID 0x7fffffffffffull
#define FAR_ADDR ((uintptr_t)0x7f0000000000ull)

static uint64_t id_of(uint64_t base, uint64_t i) { return base + i; }
static uintptr_t addr_of(uint64_t base, uint64_t i) {
  return (uintptr_t)(base + i * 64);
}

/* Enqueues entries i in [from, to) naming id_of(vb, i) and 64 bytes at
 * addr_of(ab, i). */
static void fill(ldg_stream *s, long *n, uint64_t vb, uint64_t ab,
                 uint64_t from, uint64_t to) {
  for (uint64_t i = from; i < to; i++) {
    uint64_t id = id_of(vb, i);
    ldg_range r = {addr_of(ab, i), 64};
    CHECK_OK(ldg_enqueue(s, count_keep(n), &id, 1, &r, 1, NULL));
  }
}

static ldg__query_reads reads_of(void (*q)(ldg_ledger *), ldg_ledger *l) {
  ldg__query_reads a = ldg__thread_query_reads();
  q(l);
  ldg__query_reads b = ldg__thread_query_reads();
  return (ldg__query_reads){b.segments - a.segments, b.slots - a.slots,
                            b.stream_lines - a.stream_lines,
                            b.headers - a.headers, b.filters - a.filters};
}

static void miss_vec(ldg_ledger *l) { CHECK(!ldg_holds_vector(l, ABSENT_ID)); }

static void miss(ldg_ledger *l) {
  CHECK(!ldg_holds_vector(l, ABSENT_ID));
  CHECK(!ldg_holds_host_range(l, FAR_ADDR, 4096));
}

/* Entry i of [0, n) is found by every query, with its seq. */
static void check_found(ldg_ledger *l, ldg_stream *s, uint64_t vb,
                        uint64_t ab, uint64_t i, ldg_seq seq) {
  CHECK(ldg_holds_vector(l, id_of(vb, i)));
  CHECK(ldg_holds_host_range(l, addr_of(ab, i) + 63, 1));
  ldg_holder h[2];
  CHECK_EQ(ldg_vector_holders(l, id_of(vb, i), h, 2), 1);
  CHECK_EQ(h[0].seq, seq);
  CHECK_EQ(h[0].stream_id, ldg_stream_id(s));
}

static void check_gone(ldg_ledger *l, uint64_t vb, uint64_t ab, uint64_t i) {
  CHECK(!ldg_holds_vector(l, id_of(vb, i)));
  CHECK(!ldg_holds_host_range(l, addr_of(ab, i), 64));
}

/* Positions worth probing among n: the first and last ones, and a spread. */
static bool probed(uint64_t i, uint64_t n) {
  return i < 20 || i + 20 >= n || i % 97 == 0;
}

static void test_positions(void) {
  enum { N = 40000 };
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  fill(s, &n, 1000, 0x10000, 0, N);
  ldg__query_reads first = reads_of(miss_vec, l);
  /* Nothing summarised yet, and no published filters: the ledger had not
   * been queried when the segments were linked ("On for a life"). */
  CHECK_EQ(first.slots, N);
  CHECK_EQ(first.filters, 0);
  uint64_t nseg = first.segments;
  for (int k = 0; k < 3; k++) miss(l); /* the jumps are built by walks */
  ldg__query_reads later = reads_of(miss, l);
  CHECK_EQ(later.slots, 0);
  CHECK_GE(nseg, 32);
  CHECK_LT(later.segments / 2, nseg / 2);
  for (uint64_t i = 0; i < N; i++) {
    if (!probed(i, N)) continue;
    check_found(l, s, 1000, 0x10000, i, i + 1);
    CHECK(!ldg_holds_vector(l, id_of(1000, N))); /* next to the last */
    CHECK(!ldg_holds_host_range(l, addr_of(0x10000, N), 64));
  }
  /* Released up to the middle of a segment: those before are gone, the
   * others still found; the summaries keep ruling misses out. */
  CHECK_OK(ldg_release(s, N / 2 + 5));
  miss(l);
  for (uint64_t i = 0; i < N; i++) {
    if (!probed(i, N) && (i < N / 2 - 20 || i > N / 2 + 30)) continue;
    if (i < N / 2 + 5)
      check_gone(l, 1000, 0x10000, i);
    else
      check_found(l, s, 1000, 0x10000, i, i + 1);
  }
  /* More behind, in the same and new segments. */
  fill(s, &n, 1000, 0x10000, N, N + 3000);
  for (uint64_t i = N; i < N + 3000; i += 29) {
    miss(l);
    check_found(l, s, 1000, 0x10000, i, i + 1);
  }
  CHECK_EQ(reads_of(miss, l).slots, 0);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, N + 3000);
  PASS("every position found; a miss reads no slot once summarised");
}

/* ---- A paused enqueuer: its slot reserved, not yet published ----------- */

static struct {
  ldg_stream *s; /* the stream whose next call passing `point` parks */
  enum ldg__hook_point point;
  atomic_bool armed;
  sem_t parked, go;
} g_park;

static void park_hook(enum ldg__hook_point point, struct ldg_stream *s,
                      void *arg) {
  (void)arg;
  if (point != g_park.point || s != g_park.s) return;
  bool yes = true;
  if (!atomic_compare_exchange_strong(&g_park.armed, &yes, false)) return;
  sem_post(&g_park.parked);
  while (sem_wait(&g_park.go) != 0) {
  }
}

struct parked_enqueue {
  ldg_stream *s;
  uint64_t id;
  ldg_range r;
  long *n;
  int rc;
  ldg_seq seq;
};

static void *enqueue_main(void *p) {
  struct parked_enqueue *e = p;
  e->rc = ldg_enqueue(e->s, count_keep(e->n), &e->id, 1, &e->r, 1, &e->seq);
  return NULL;
}

/* Starts e on its own thread and returns once it parked after reserving. */
static void park_enqueue(pthread_t *t, struct parked_enqueue *e) {
  g_park.s = e->s;
  g_park.point = LDG__HOOK_ENQUEUE_RESERVED;
  atomic_store(&g_park.armed, true);
  CHECK_EQ(pthread_create(t, NULL, enqueue_main, e), 0);
  while (sem_wait(&g_park.parked) != 0) {
  }
}

static void unpark(pthread_t t) {
  sem_post(&g_park.go);
  CHECK_EQ(pthread_join(t, NULL), 0);
}

static void test_unpublished(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0, na = 0;
  fill(s, &n, 5000, 0x200000, 0, 100);
  struct parked_enqueue e = {s, 4999, {0x1f0000, 64}, &na, -99, 0};
  pthread_t t;
  park_enqueue(&t, &e); /* seq 101, EMPTY */
  /* Published behind it, filling later segments: their jumps must not
   * span the segment with the unpublished slot. */
  fill(s, &n, 5000, 0x200000, 100, 3000);
  for (int k = 0; k < 3; k++) miss(l);
  /* The summary stops at the unpublished slot: those behind it are read
   * (checked last: what matters first is that nothing is hidden). */
  uint64_t behind = reads_of(miss, l).slots;
  CHECK(!ldg_holds_vector(l, 4999)); /* not recorded yet */
  for (uint64_t i = 0; i < 3000; i += 7)
    check_found(l, s, 5000, 0x200000, i, i < 100 ? i + 1 : i + 2);
  unpark(t);
  CHECK_OK(e.rc);
  CHECK_EQ(e.seq, 101);
  /* Published now: whatever the summaries said before, it is found. */
  CHECK(ldg_holds_vector(l, 4999));
  CHECK(ldg_holds_host_range(l, 0x1f0000, 1));
  for (int k = 0; k < 3; k++) miss(l);
  CHECK(ldg_holds_vector(l, 4999));
  CHECK(ldg_holds_host_range(l, 0x1f0000 + 63, 1));
  CHECK_GT(behind, 0);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 3000);
  CHECK_EQ(na, 1);
  PASS("a slot reserved and published after a summary was built is found");
}

static void test_abandoned(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0, na = 0;
  fill(s, &n, 9000, 0x400000, 0, 50);
  struct parked_enqueue e = {s, 8999, {0x3f0000, 64}, &na, -99, 0};
  pthread_t t;
  park_enqueue(&t, &e); /* seq 51 */
  CHECK_OK(ldg_release(s, ldg_mark(s))); /* covers 51: asks, leaves it */
  CHECK_EQ(n, 50);
  fill(s, &n, 9000, 0x400000, 50, 120); /* seqs 52.. */
  for (int k = 0; k < 3; k++) miss(l);
  unpark(t); /* the enqueuer takes its entry back and releases it */
  CHECK_OK(e.rc);
  CHECK_EQ(na, 1);
  CHECK(!ldg_holds_vector(l, 8999));
  for (int k = 0; k < 3; k++) miss(l);
  CHECK_EQ(reads_of(miss, l).slots, 0); /* the summary passed the slot */
  for (uint64_t i = 0; i < 120; i++) {
    if (i < 50)
      check_gone(l, 9000, 0x400000, i);
    else
      check_found(l, s, 9000, 0x400000, i, i + 2);
  }
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 120);
  PASS("a summary passes an abandoned slot and hides nothing behind it");
}

/* A release parked after its claim: released covers the entries, which are
 * still FULL (not taken). Summaries built before still name them. */
struct parked_release {
  ldg_stream *s;
  ldg_seq upto;
  int rc;
};

static void *release_main(void *p) {
  struct parked_release *r = p;
  r->rc = ldg_release(r->s, r->upto);
  return NULL;
}

static void claimed(bool summarised) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  fill(s, &n, 7000, 0x600000, 0, 500);
  /* Summaries naming all 500, or none yet (the first query reads the
   * slots, FULL, at and below released). */
  if (summarised)
    for (int k = 0; k < 3; k++) miss(l);
  struct parked_release r = {s, 300, -99};
  g_park.s = s;
  g_park.point = LDG__HOOK_RELEASE_CLAIMED;
  atomic_store(&g_park.armed, true);
  pthread_t t;
  CHECK_EQ(pthread_create(&t, NULL, release_main, &r), 0);
  while (sem_wait(&g_park.parked) != 0) {
  }
  CHECK_EQ(n, 0); /* nothing taken yet */
  /* The release began: those entries are no longer reported (ledger.h),
   * although the summaries and the slots still name them. */
  for (uint64_t i = 0; i < 500; i += 3) {
    if (i < 300)
      check_gone(l, 7000, 0x600000, i);
    else
      check_found(l, s, 7000, 0x600000, i, i + 1);
  }
  unpark(t);
  CHECK_OK(r.rc);
  CHECK_EQ(n, 300);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 500);
}

static void test_claimed(void) {
  claimed(false);
  claimed(true);
  PASS("entries a release has claimed are not reported, summaries or not");
}

/* ---- Out-of-line payloads and waits ------------------------------------------- */

static void test_ext_and_waits(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *a = new_stream(l, 1, true);
  long n = 0;
  for (uint64_t i = 0; i < 600; i++) {
    uint64_t ids[6];
    for (int k = 0; k < 6; k++) ids[k] = 20000 + i * 6 + (uint64_t)k;
    ldg_range r[2] = {{0x900000 + i * 128, 16}, {0x900000 + i * 128 + 64, 16}};
    CHECK_OK(ldg_enqueue(s, count_keep(&n), ids, 6, r, 2, NULL));
    CHECK_OK(ldg_enqueue(a, count_keep(&n), NULL, 0, NULL, 0, NULL));
    CHECK_OK(ldg_add_wait(s, a, ldg_mark(a), NULL));
  }
  for (int k = 0; k < 3; k++) miss(l);
  CHECK_EQ(reads_of(miss, l).slots, 0);
  for (uint64_t i = 0; i < 600; i += 13) {
    CHECK(ldg_holds_vector(l, 20000 + i * 6 + 5));
    CHECK(ldg_holds_host_range(l, 0x900000 + i * 128 + 64 + 15, 1));
    CHECK(!ldg_holds_host_range(l, 0x900000 + i * 128 + 16, 48)); /* gap */
  }
  CHECK_EQ(ldg_nonblocking_holding(l, 20000, NULL, 0), 0); /* s blocks */
  CHECK_OK(ldg_release_all(s)); /* a too, through the waits */
  CHECK(!ldg_holds_vector(l, 20000 + 5));
  CHECK_OK(ldg_stream_destroy(a));
  ldg_stream_unref(a);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 1200);
  PASS("ids and ranges of out-of-line payloads are summarised; waits are not");
}

/* ---- Reuse ------------------------------------------------------------------------- */

static unsigned long pool_reused(ldg_ledger *l) {
  unsigned long k = 0;
  for (unsigned c = 0; c < 8; c++) k += ldg__pool_reused(l, c);
  return k;
}

static void test_reuse(void) {
  enum { N = 6000 };
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  /* A first life: summaries complete, jumps built, for ids 100 000.. */
  fill(s, &n, 100000, 0x1000000, 0, N);
  for (int k = 0; k < 4; k++) miss(l);
  CHECK_EQ(reads_of(miss, l).slots, 0);
  CHECK_OK(ldg_release_all(s));
  ldg_quiesce(); /* retired segments reach the pool */
  unsigned long reused = pool_reused(l);
  /* Second lives, on this stream and on a new one, naming other ids: a
   * summary left from the first life would rule them out. */
  ldg_stream *s2 = new_stream(l, 0, false);
  fill(s, &n, 300000, 0x3000000, 0, N);
  fill(s2, &n, 500000, 0x5000000, 0, N / 2);
  CHECK_GT(pool_reused(l), reused);
  for (uint64_t i = 0; i < N; i++) {
    if (!probed(i, N)) continue;
    check_found(l, s, 300000, 0x3000000, i, N + i + 1);
    if (i < N / 2) check_found(l, s2, 500000, 0x5000000, i, i + 1);
    check_gone(l, 100000, 0x1000000, i);
  }
  for (int k = 0; k < 3; k++) miss(l);
  for (uint64_t i = 0; i < N; i += 101) {
    check_found(l, s, 300000, 0x3000000, i, N + i + 1);
    if (i < N / 2) check_found(l, s2, 500000, 0x5000000, i, i + 1);
  }
  ldg_stream_unref(s2);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 2 * N + N / 2);
  PASS("a reused segment's summaries start empty");
}

/* ---- upto lowered; runs with nothing but ranges ---------------------------------- */

/* A query stores upto with a plain store, so one that started earlier may
 * store a lower value after a faster one (summary.c): the summaries must
 * then say less, never hide an entry, and be extended again. And a run of
 * slots naming ranges but no vector id must still widen the filter's
 * ranges (the merge is skipped only when a run named nothing). */
static void test_lowered(void) {
  enum { N = 3000 };
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  ldg_stream *r = new_stream(l, 1, false);
  long n = 0;
  fill(s, &n, 700000, 0x7000000, 0, N);
  for (uint64_t i = 0; i < N; i++) { /* ranges only */
    ldg_range rr = {addr_of(0x9000000, i), 64};
    CHECK_OK(ldg_enqueue(r, count_keep(&n), NULL, 0, &rr, 1, NULL));
  }
  for (int k = 0; k < 4; k++) miss(l);
  CHECK_EQ(reads_of(miss, l).slots, 0);
  for (uint32_t to = 0; to <= 16; to += 8) {
    CHECK(ldg__summary_lower_upto(s, to));
    CHECK(ldg__summary_lower_upto(r, to));
    for (uint64_t i = 0; i < N; i++) {
      if (!probed(i, N)) continue;
      check_found(l, s, 700000, 0x7000000, i, i + 1);
      CHECK(ldg_holds_host_range(l, addr_of(0x9000000, i) + 63, 1));
    }
    miss(l); /* extends the summaries again */
    CHECK_EQ(reads_of(miss, l).slots, 0);
  }
  CHECK_OK(ldg_release_all(s));
  CHECK_OK(ldg_release_all(r));
  for (uint64_t i = 0; i < N; i += 97) {
    check_gone(l, 700000, 0x7000000, i);
    CHECK(!ldg_holds_host_range(l, addr_of(0x9000000, i), 64));
  }
  ldg_stream_unref(r);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  CHECK_EQ(n, 2 * N);
  PASS("a lowered upto says less and hides nothing; ranges-only runs are summarised");
}

/* ---- Concurrent: enqueuers check their own entries, a querier summarises ---------- */

enum { CHURNERS = 2 };

struct churn {
  ldg_ledger *l;
  int tid;
  long iters;
  _Atomic long *keeps;
  atomic_int *running;
};

static void atomic_count(void *ctx) {
  atomic_fetch_add((_Atomic long *)ctx, 1);
}

static void *churn_main(void *p) {
  struct churn *c = p;
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(c->l, c->tid, 0, NULL, NULL, &s));
  uint64_t vb = (uint64_t)(c->tid + 1) << 32;
  uintptr_t ab = (uintptr_t)(c->tid + 1) << 36;
  for (long i = 0; i < c->iters; i++) {
    uint64_t id = vb + (uint64_t)i;
    ldg_range r = {ab + (uintptr_t)i * 64, 64};
    CHECK_OK(ldg_enqueue(s, (ldg_keep){atomic_count, c->keeps}, &id, 1, &r, 1,
                         NULL));
    /* Pending and published since before the call: found, whatever the
     * querier summarised meanwhile. */
    CHECK(ldg_holds_vector(c->l, id));
    if (i % 8 == 0) CHECK(ldg_holds_host_range(c->l, r.addr + 32, 8));
    if (i % 37 == 36) CHECK_OK(ldg_release(s, ldg_mark(s)));
  }
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  atomic_fetch_sub(c->running, 1);
  return NULL;
}

static void test_concurrent(void) {
  long iters = UNDER_SANITIZER ? 4000 : 40000;
  ldg_ledger *l = new_ledger();
  _Atomic long keeps = 0;
  atomic_int running = CHURNERS;
  /* A pinned entry, held throughout on a stream of its own. */
  ldg_stream *pin = new_stream(l, 3, false);
  long npin = 0;
  uint64_t pin_id = 77;
  ldg_range pin_r = {0x777000, 64};
  CHECK_OK(ldg_enqueue(pin, count_keep(&npin), &pin_id, 1, &pin_r, 1, NULL));
  pthread_t th[CHURNERS];
  struct churn c[CHURNERS];
  for (int i = 0; i < CHURNERS; i++) {
    c[i] = (struct churn){l, i, iters, &keeps, &running};
    CHECK_EQ(pthread_create(&th[i], NULL, churn_main, &c[i]), 0);
  }
  long q = 0;
  while (atomic_load(&running) > 0) {
    miss(l); /* builds summaries while the churners publish */
    CHECK(ldg_holds_vector(l, pin_id));
    CHECK(ldg_holds_host_range(l, 0x777000, 1));
    q++;
  }
  for (int i = 0; i < CHURNERS; i++) CHECK_EQ(pthread_join(th[i], NULL), 0);
  CHECK_EQ(atomic_load(&keeps), CHURNERS * iters);
  CHECK_OK(ldg_stream_destroy(pin));
  ldg_stream_unref(pin);
  ldg_ledger_destroy(l);
  CHECK_EQ(npin, 1);
  CHECK_GT(q, 0);
  PASS("entries are found by their enqueuers while a querier summarises");
}

/* ---- The published filters (summary.c, THE PUBLISHED FILTERS) ------------------- */

/* Ids and addresses that widen a filter at every step: far below, then far
 * above, everything before (each a block of its own). Each entry's 4096
 * bytes start 2048 below pf_addr(i), a 1 MiB boundary: they straddle two
 * of the filters' address blocks. */
static uint64_t pf_id(uint64_t i) {
  return (i % 2 == 0 ? 0x40000000ull + i * 0x10000 : 0x40000000ull - i * 0x10000);
}
static uintptr_t pf_addr(uint64_t i) {
  return (uintptr_t)(i % 2 == 0 ? 0x400000000ull + i * 0x4000000
                                : 0x400000000ull - i * 0x4000000);
}

/* Enqueues entry i on s (one id, one range). */
static void pf_put(ldg_stream *s, long *n, uint64_t i) {
  uint64_t id = pf_id(i);
  ldg_range r = {pf_addr(i) - 2048, 4096};
  CHECK_OK(ldg_enqueue(s, count_keep(n), &id, 1, &r, 1, NULL));
}

/* Entries 0 .. i are found, by vector and by both ends of their ranges,
 * while the newest segments' filters have not been summarised by any query
 * (upto is not moved by a query they rule out). */
static void pf_found(ldg_ledger *l, uint64_t i) {
  for (uint64_t k = 0; k <= i; k++) {
    CHECK(ldg_holds_vector(l, pf_id(k)));
    CHECK(ldg_holds_host_range(l, pf_addr(k) + 2047, 1)); /* its last byte */
    CHECK(ldg_holds_host_range(l, pf_addr(k) - 2148, 101)); /* its first */
  }
}

static void pf_put_found(ldg_ledger *l, ldg_stream *s, long *n, uint64_t i) {
  pf_put(s, n, i);
  pf_found(l, i);
}

/* A miss the filters rule out, in a stream whose segments are all among
 * its newest: no line enqueuers or releases write (no slot, no tail, no
 * released, no header), only the filters' lines, one per segment. */
static void pf_check_miss_lines(ldg_ledger *l) {
  ldg__query_reads r = reads_of(miss, l);
  CHECK_EQ(r.slots, 0);
  CHECK_EQ(r.stream_lines, 0);
  CHECK_EQ(r.headers, 0);
  CHECK_GE(r.filters, 2);
  CHECK_EQ(r.filters, r.segments);
}

struct pf_other {
  ldg_stream *s;
  long *n;
  uint64_t i;
};

static void *pf_other_main(void *p) {
  struct pf_other *o = p;
  uint64_t id = pf_id(o->i);
  ldg_range r = {pf_addr(o->i) - 2048, 4096};
  CHECK_OK(ldg_enqueue(o->s, count_keep(o->n), &id, 1, &r, 1, NULL));
  return NULL;
}

/* A ledger whose segments linked from now on keep published filters: one
 * query walked a newest segment without them. That walk reads the filters
 * of no segment. */
static ldg_ledger *queried_ledger(void) {
  ldg_ledger *l = new_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  fill(s, &n, 5, 0x5000, 0, 1);
  ldg__query_reads r = reads_of(miss, l);
  CHECK_EQ(r.filters, 0);
  CHECK_EQ(r.slots, 1); /* the first query summarised it */
  CHECK_OK(ldg_stream_destroy(s)); /* releases the entry */
  ldg_stream_unref(s);
  CHECK_EQ(n, 1);
  return l;
}

/* A stream of each kind of publisher (kind 0: owned, its owner widening
 * one; 1: single-issuer, one; 2: shared, any). */
static ldg_stream *pf_stream(ldg_ledger *l, int kind) {
  const unsigned flags[3] = {0, LDG_STREAM_SINGLE_ISSUER, LDG_STREAM_SHARED};
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(l, 0, flags[kind], NULL, NULL, &s));
  return s;
}

static void test_published_filters(void) {
  enum { K = 12 };
  /* Each kind of publisher: an owned stream's owner and a single-issuer
   * stream's caller widen one with plain stores, a shared stream's
   * enqueuers widen any. */
  for (int f = 0; f < 3; f++) {
    ldg_ledger *l = queried_ledger();
    ldg_stream *s = pf_stream(l, f);
    long n = 0;
    for (uint64_t i = 0; i < K; i++) {
      pf_put(s, &n, i);
      /* First, right after an enqueue that may have grown the ring: the
       * walk into a segment just linked reads no header (the extender
       * stored the summaries' copy of next). */
      pf_check_miss_lines(l);
      pf_found(l, i);
    }
    /* A wait names nothing: it widens nothing. */
    CHECK_OK(ldg_add_wait(s, s, 0, NULL));
    pf_check_miss_lines(l);
    /* An id in an entry's block but not held: the filter admits it, the
     * slots say no. */
    CHECK(!ldg_holds_vector(l, pf_id(0) + 1));
    CHECK_OK(ldg_release(s, ldg_mark(s)));
    CHECK_EQ(n, K);
    for (uint64_t i = 0; i < K; i++) CHECK(!ldg_holds_vector(l, pf_id(i)));
    CHECK_OK(ldg_stream_destroy(s));
    ldg_stream_unref(s);
    ldg_ledger_destroy(l);
  }
  /* Both filters of one segment: an owned stream's owner publishes into one
   * and, once another thread enqueued (revoking it), every enqueuer into
   * any. A query must ask both. */
  ldg_ledger *l = queried_ledger();
  ldg_stream *s = new_stream(l, 0, false);
  long n = 0;
  pf_put_found(l, s, &n, 0); /* the owner: one */
  pf_put_found(l, s, &n, 1);
  pthread_t t;
  struct pf_other o = {s, &n, 2};
  CHECK_EQ(pthread_create(&t, NULL, pf_other_main, &o), 0); /* revokes: any */
  CHECK_EQ(pthread_join(t, NULL), 0);
  for (uint64_t i = 3; i < K; i++) pf_put_found(l, s, &n, i); /* any */
  for (uint64_t k = 0; k < K; k++) CHECK(ldg_holds_vector(l, pf_id(k)));
  pf_check_miss_lines(l);
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(n, K);
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  /* Segments older than the newest few are walked through own and the
   * jumps, reading tail: every entry found there too, and a miss, once
   * they are summarised, reads no slot. */
  enum { M = 2000 };
  l = queried_ledger();
  s = new_stream(l, 0, false);
  n = 0;
  fill(s, &n, 1000, 0x10000, 0, M);
  for (uint64_t i = 0; i < M; i++)
    if (probed(i, M)) check_found(l, s, 1000, 0x10000, i, (ldg_seq)i + 1);
  for (int k = 0; k < 3; k++) miss(l);
  ldg__query_reads r = reads_of(miss, l);
  CHECK_EQ(r.slots, 0);
  CHECK_GT(r.stream_lines, 0); /* older segments than the filters cover */
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(n, M);
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("the published filters: off until the ledger was queried; then every "
       "entry found before any query summarised it, for every kind of publisher; "
       "a miss they rule out reads only tail");
}

/* The enqueuer's inline check (ring.c, ldg__pubf_note_entry: at most two
 * ids and one range, nothing written when the filter admits the entry):
 * entries whose first id, or the start of whose range, lies inside the
 * filter while the rest does not must still widen it; and entries the
 * filter admits write nothing. Each is looked for at once, before any query
 * summarised it (a probe the filters rule out skips the segment). For each
 * kind of publisher (one: owned, single-issuer; any: shared). */
#define PI_ID 0x50000040ull             /* block [0x50000040, 0x5000007f] */
#define PI_ADDR ((uintptr_t)0x700000000u) /* block [PI_ADDR, + 1 MiB) */
static void pi_put(ldg_stream *s, long *n, const uint64_t *ids, size_t n_ids,
                   uintptr_t addr, size_t bytes) {
  ldg_range r = {addr, bytes};
  CHECK_OK(ldg_enqueue(s, count_keep(n), ids, n_ids, &r, bytes != 0, NULL));
}

static void test_published_inside(void) {
  for (int f = 0; f < 3; f++) {
    ldg_ledger *l = queried_ledger();
    ldg_stream *s = pf_stream(l, f);
    long n = 0;
    const uint64_t a[1] = {PI_ID + 1};
    pi_put(s, &n, a, 1, PI_ADDR + 4096, 4096); /* widens from empty */
    CHECK(ldg_holds_vector(l, PI_ID + 1));
    /* Inside both: admitted as it is, a probe outside still ruled out. */
    const uint64_t b[1] = {PI_ID + 2};
    pi_put(s, &n, b, 1, PI_ADDR + 65536, 4096);
    CHECK(ldg_holds_vector(l, PI_ID + 2));
    CHECK(ldg_holds_host_range(l, PI_ADDR + 65536 + 4095, 1));
    pf_check_miss_lines(l);
    /* Two ids, the first inside, the last five blocks up. */
    const uint64_t c[2] = {PI_ID + 3, PI_ID + 5 * 64};
    pi_put(s, &n, c, 2, 0, 0);
    CHECK(ldg_holds_vector(l, PI_ID + 5 * 64));
    /* Two ids, the last inside, the first three blocks down. */
    const uint64_t d[2] = {PI_ID - 3 * 64, PI_ID + 4};
    pi_put(s, &n, d, 2, 0, 0);
    CHECK(ldg_holds_vector(l, PI_ID - 3 * 64));
    /* A range that starts inside the block and ends in the next. */
    const uint64_t e[1] = {PI_ID + 5};
    pi_put(s, &n, e, 1, PI_ADDR + (1u << 20) - 2048, 4096);
    CHECK(ldg_holds_host_range(l, PI_ADDR + (1u << 20) + 2047, 1));
    /* An id inside, its range in a block far below. */
    const uint64_t g[1] = {PI_ID + 6};
    pi_put(s, &n, g, 1, PI_ADDR - 8 * (1u << 20), 4096);
    CHECK(ldg_holds_host_range(l, PI_ADDR - 8 * (1u << 20), 1));
    /* No id, a range above everything. */
    pi_put(s, &n, NULL, 0, PI_ADDR + 64 * (1u << 20), 4096);
    CHECK(ldg_holds_host_range(l, PI_ADDR + 64 * (1u << 20) + 4095, 1));
    /* Three ids (the slow path), the middle one outside. */
    const uint64_t h[3] = {PI_ID + 7, PI_ID + 100 * 64, PI_ID + 8};
    pi_put(s, &n, h, 3, PI_ADDR + 8192, 64);
    CHECK(ldg_holds_vector(l, PI_ID + 100 * 64));
    /* Two ranges (the slow path), the second ending in the block after
     * the one it starts in: its top byte is admitted. */
    const uint64_t k[1] = {PI_ID + 9};
    const ldg_range two[2] = {{PI_ADDR + 4096, 64},
                              {PI_ADDR + 128 * (1u << 20) - 2048, 4096}};
    CHECK_OK(ldg_enqueue(s, count_keep(&n), k, 1, two, 2, NULL));
    CHECK(ldg_holds_host_range(l, PI_ADDR + 128 * (1u << 20) + 2047, 1));
    pf_check_miss_lines(l);
    CHECK_OK(ldg_release(s, ldg_mark(s)));
    CHECK_EQ(n, 9);
    CHECK(!ldg_holds_vector(l, PI_ID + 5 * 64));
    CHECK_OK(ldg_stream_destroy(s));
    ldg_stream_unref(s);
    ldg_ledger_destroy(l);
  }
  PASS("the enqueuer's inline check of the published filters: an entry with "
       "an id, the top of its range or a second id outside the filter widens "
       "it, and an entry of three ids or two ranges the out-of-line pass, for "
       "every kind of publisher");
}

/* Several enqueuers widening one shared stream's any filter at once, each
 * checking its entry found as soon as its enqueue returned. */
enum { PF_THREADS = 3 };

struct pf_churn {
  ldg_ledger *l;
  ldg_stream *s;
  int tid;
  long iters;
  _Atomic long *keeps;
};

static void *pf_churn_main(void *p) {
  struct pf_churn *c = p;
  for (long i = 0; i < c->iters; i++) {
    /* Climbing by whole blocks, interleaved with the other threads': most
     * enqueues raise vec_hi and addr_hi while others do too. */
    uint64_t step = (uint64_t)i * PF_THREADS + (uint64_t)c->tid;
    uint64_t id = 0x100000000ull + step * 64;
    ldg_range r = {(uintptr_t)(0x100000000000ull + step * (1u << 20)), 64};
    CHECK_OK(ldg_enqueue(c->s, (ldg_keep){atomic_count, c->keeps}, &id, 1, &r,
                         1, NULL));
    CHECK(ldg_holds_vector(c->l, id));
    CHECK(ldg_holds_host_range(c->l, r.addr, 64));
  }
  return NULL;
}

static void test_published_concurrent(void) {
  long iters = UNDER_SANITIZER ? 1500 : 6000;
  ldg_ledger *l = queried_ledger();
  ldg_stream *s = new_shared_stream(l, 0);
  _Atomic long keeps = 0;
  pthread_t th[PF_THREADS];
  struct pf_churn c[PF_THREADS];
  for (int i = 0; i < PF_THREADS; i++) {
    c[i] = (struct pf_churn){l, s, i, iters, &keeps};
    CHECK_EQ(pthread_create(&th[i], NULL, pf_churn_main, &c[i]), 0);
  }
  for (int i = 0; i < PF_THREADS; i++) CHECK_EQ(pthread_join(th[i], NULL), 0);
  CHECK_EQ(atomic_load(&keeps), 0); /* nothing released while they ran */
  CHECK_OK(ldg_release(s, ldg_mark(s)));
  CHECK_EQ(atomic_load(&keeps), PF_THREADS * iters);
  CHECK_OK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  PASS("enqueuers widening one shared stream's filter at once: each entry "
       "found as soon as its enqueue returned");
}

int main(void) {
  sem_init(&g_park.parked, 0, 0);
  sem_init(&g_park.go, 0, 0);
  CHECK(ldg__set_hook(park_hook, NULL));
  test_positions();
  test_unpublished();
  test_abandoned();
  test_claimed();
  test_ext_and_waits();
  test_reuse();
  test_lowered();
  test_concurrent();
  test_published_filters();
  test_published_inside();
  test_published_concurrent();
  return 0;
}
