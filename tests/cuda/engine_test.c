/*
 * engine_test: the progress engine (cuda/sl_engine.h) against the host
 * executor, whose streams are worker threads that copy later: a buffer
 * released before its copy ran is poisoned by its keep (the output data
 * shows it) or freed by it (ASan reports the executor's read). No timing is
 * asserted; waits give up after 20 s (a hang guard, reported as a failure).
 *
 * Each test gets a fresh executor and context and must leave nothing: the
 * context's destroy refuses while handles live and hd_shutdown counts leaks.
 * Scaled down under sanitizers. Exit 0 when every test passed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "cuda/host_executor.h"
#include "ledger/ledger_testing.h" /* ldg__ring_owner_state */
#include "ledger/rcu.h"            /* ldg__asym_membarrier */
#include "tests/testing/check.h"

static slc_driver g_drv;
/* Simulated devices of the tests that use two or more (--devices=N: 8 in
 * engine_8dev_test, one engine and thread per device). */
static int g_devices = 2;

static void sleep_us(unsigned us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static int setup(slc_context **c, unsigned delay_us,
                 const slc_engine_config *cfg) {
  hd_config hc = {g_devices, delay_us};
  CHECK(hd_install(&g_drv, &hc) == 0);
  CHECK_RC(slc_context_create(&g_drv, c), LDG_OK);
  CHECK_RC(slc_engine_enable(*c, cfg), LDG_OK);
  return 0;
}

static int teardown(slc_context *c) {
  CHECK_RC(slc_context_destroy(c), LDG_OK);
  long leaked = hd_shutdown();
  if (leaked != 0) fprintf(stderr, "  executor: %ld objects leaked\n", leaked);
  CHECK(leaked == 0);
  return 0;
}

/* A test's start with the engine as cfg says, one stream st on device 0
 * and one 64-byte device buffer b (finish ends it). */
static int start(slc_context **c, const slc_engine_config *cfg,
                 slc_stream **st, slc_buffer **b) {
  if (setup(c, 0, cfg)) return 1;
  CHECK_RC(slc_stream_create(*c, 0, 0, st), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(*c, 0, 64, b), LDG_OK);
  return 0;
}

/* The end of a test with one buffer b and one stream st. */
static int finish(slc_context *c, slc_buffer *b, slc_stream *st) {
  CHECK_RC(slc_buffer_free(b), LDG_OK);
  slc_stream_unref(st);
  return teardown(c);
}

/* Waits (polling the engine when `poll`) until *v reaches want. */
static int wait_for(slc_context *c, atomic_long *v, long want, bool poll) {
  for (long i = 0; i < 200000; i++) {
    if (atomic_load(v) >= want) return 0;
    if (poll) (void)slc_engine_poll(c, NULL);
    sleep_us(100);
  }
  fprintf(stderr, "  gave up waiting: %ld of %ld\n", atomic_load(v), want);
  return 1;
}

/* ---- A serving loop: staging slots recycled by their keeps --------------- */

#define WORDS 256

typedef struct slot {
  slc_buffer *staging; /* pinned: the request's input */
  slc_buffer *out;     /* pinned: the result copied back */
  slc_buffer *dev;
  atomic_int busy;     /* keeps of its request still to run (0: free); the
                        * two may run in either order when two threads
                        * release the stream (an engine release and a
                        * destroy, say) */
  uint32_t seed;
  struct loop *L;
} slot;

typedef struct loop {
  slc_context *c;
  atomic_long released, mismatches, keeps_off_thread;
  pthread_t issuer;
  bool free_in_keep; /* the input keep frees the staging buffer */
  int expect_status; /* what slc_keep_status must say */
  atomic_long bad_status;
} loop;

static void fill(uint32_t *p, uint32_t seed) {
  for (unsigned i = 0; i < WORDS; i++) p[i] = seed * 2654435761u + i;
}

/* The input copy completed: poison (or free) the staging buffer. */
static void input_keep(void *ctx) {
  slot *s = ctx;
  if (s->L->free_in_keep) {
    if (slc_buffer_try_free(s->staging) != LDG_OK) abort();
    s->staging = NULL;
  } else {
    memset(slc_buffer_host(s->staging), 0xEE, WORDS * 4);
  }
  if (slc_keep_status() != s->L->expect_status)
    atomic_fetch_add(&s->L->bad_status, 1);
  if (pthread_equal(pthread_self(), s->L->issuer))
    atomic_fetch_add(&s->L->keeps_off_thread, 1);
  atomic_fetch_add(&s->L->released, 1);
  atomic_fetch_sub(&s->busy, 1);
}

/* The output copy completed: check what came back. */
static void output_keep(void *ctx) {
  slot *s = ctx;
  uint32_t want[WORDS];
  fill(want, s->seed);
  if (memcmp(slc_buffer_host(s->out), want, sizeof(want)) != 0)
    atomic_fetch_add(&s->L->mismatches, 1);
  if (slc_keep_status() != s->L->expect_status)
    atomic_fetch_add(&s->L->bad_status, 1);
  atomic_fetch_add(&s->L->released, 1);
  atomic_fetch_sub(&s->busy, 1);
}

static int slot_init(loop *L, slot *s) {
  memset(s, 0, sizeof(*s));
  s->L = L;
  CHECK_RC(slc_buffer_alloc_host(L->c, WORDS * 4, &s->staging), LDG_OK);
  CHECK_RC(slc_buffer_alloc_host(L->c, WORDS * 4, &s->out), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(L->c, 0, WORDS * 4, &s->dev), LDG_OK);
  return 0;
}

static int slot_fini(slot *s) {
  if (s->staging != NULL) CHECK_RC(slc_buffer_free(s->staging), LDG_OK);
  CHECK_RC(slc_buffer_free(s->out), LDG_OK);
  CHECK_RC(slc_buffer_free(s->dev), LDG_OK);
  return 0;
}

/* One request on slot s: fill the staging, copy in, copy out. No sync. */
static int request(loop *L, slc_stream *st, slot *s, uint32_t seed) {
  if (s->staging == NULL)
    CHECK_RC(slc_buffer_alloc_host(L->c, WORDS * 4, &s->staging), LDG_OK);
  s->seed = seed;
  atomic_store(&s->busy, 2);
  fill(slc_buffer_host(s->staging), seed);
  uint64_t in_ids[] = {slc_buffer_id(s->staging), slc_buffer_id(s->dev)};
  slc_hold in = {{input_keep, s}, in_ids, 2, NULL, 0};
  CHECK_RC(slc_copy_htod_async(st, slc_buffer_dptr(s->dev),
                               slc_buffer_host(s->staging), WORDS * 4, &in),
           LDG_OK);
  uint64_t out_ids[] = {slc_buffer_id(s->out), slc_buffer_id(s->dev)};
  slc_hold out = {{output_keep, s}, out_ids, 2, NULL, 0};
  CHECK_RC(slc_copy_dtoh_async(st, slc_buffer_host(s->out),
                               slc_buffer_dptr(s->dev), WORDS * 4, &out),
           LDG_OK);
  return 0;
}

/* n requests over k slots on one stream; a slot is reused once its output
 * keep ran (the engine thread, or our own polls, release it). */
static int serve(loop *L, slc_stream *st, slot *slots, int k, int n,
                 bool poll) {
  for (int i = 0; i < n; i++) {
    slot *s = &slots[i % k];
    for (long w = 0; atomic_load(&s->busy); w++) {
      if (poll) (void)slc_engine_poll(L->c, NULL);
      sleep_us(20);
      if (w > 1000000) {
        fprintf(stderr, "  slot %d never came back\n", i % k);
        return 1;
      }
    }
    if (request(L, st, s, (uint32_t)i + 1)) return 1;
  }
  return wait_for(L->c, &L->released, 2L * n, poll);
}

static int run_serving(bool thread, bool free_in_keep, unsigned delay_us,
                       slc_engine_placement placement) {
  slc_context *c;
  slc_engine_config cfg = {
      .thread = thread, .marker_every_ops = 4, .placement = placement};
  if (setup(&c, delay_us, &cfg)) return 1;
  loop L = {.c = c, .issuer = pthread_self(), .free_in_keep = free_in_keep};
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &st), LDG_OK);
  enum { K = 4 };
  slot slots[K];
  for (int i = 0; i < K; i++)
    if (slot_init(&L, &slots[i])) return 1;
  const int n = SANITIZED ? 60 : 300;
  if (serve(&L, st, slots, K, n, !thread)) return 1;
  CHECK(atomic_load(&L.mismatches) == 0);
  CHECK(atomic_load(&L.bad_status) == 0);
  /* Thread mode: every keep ran on the engine thread, except those of
   * enqueues a release overtook (counted under SLC_CAUSE_ENQUEUE: the
   * enqueuer runs them; frequent with the thread placing markers, as it
   * reads marks while we enqueue — TSan run 6 of 20 saw one). */
  long on_ours = atomic_load(&L.keeps_off_thread);
  /* The keeps ran inside the engine's last release; its bookkeeping
   * follows when that release returns. */
  slc_stream_progress sp;
  for (int i = 0; i < 200000; i++) {
    CHECK_RC(slc_stream_progress_get(st, &sp), LDG_OK);
    if (sp.released_mark == 2u * (unsigned)n) break;
    sleep_us(100);
  }
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  if (thread) CHECK((uint64_t)on_ours <= es.keeps_by_cause[SLC_CAUSE_ENQUEUE]);
  CHECK(es.markers_placed > 0 && es.markers_done > 0 && es.releases > 0);
  CHECK(es.seqs_released == 2u * (unsigned)n);
  CHECK(es.stream_errors == 0);
  /* Placed by the thread: every marker is the engine's, none the issuer's.
   * (Without a thread the issuer places them whatever placement says.) */
  if (thread && placement == SLC_ENGINE_PLACE_ENGINE)
    CHECK(es.tail_markers == es.markers_placed);
  if (!thread) CHECK(es.tail_markers < es.markers_placed);
  CHECK_RC(slc_stream_progress_get(st, &sp), LDG_OK);
  CHECK(sp.engine_driven && sp.pending == 0);
  CHECK(sp.enqueued_mark == 2u * (unsigned)n);
  CHECK(sp.released_mark == sp.enqueued_mark);
  for (int i = 0; i < K; i++)
    if (slot_fini(&slots[i])) return 1;
  slc_stream_unref(st);
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0 && es.markers_pending == 0);
  return teardown(c);
}

static int t_thread_serving(void) {
  return run_serving(true, false, 200, SLC_ENGINE_PLACE_ISSUER);
}
static int t_poll_serving(void) {
  return run_serving(false, false, 200, SLC_ENGINE_PLACE_ISSUER) ||
         run_serving(false, false, 200, SLC_ENGINE_PLACE_ENGINE);
}
static int t_free_in_keep(void) {
  return run_serving(true, true, 300, SLC_ENGINE_PLACE_ISSUER) ||
         run_serving(true, true, 300, SLC_ENGINE_PLACE_ENGINE);
}
/* The thread places every marker: same results, the issuer records none. */
static int t_engine_places(void) {
  return run_serving(true, false, 200, SLC_ENGINE_PLACE_ENGINE) ||
         run_serving(true, false, 0, SLC_ENGINE_PLACE_ENGINE);
}

/* ---- Tail markers --------------------------------------------------------- */

static void count_keep(void *ctx) { atomic_fetch_add((atomic_long *)ctx, 1); }

static int tail_marker(slc_engine_wait wait) {
  slc_context *c;
  /* N and T large: only a tail marker can release these, and under either
   * wait policy it must not wait for T (100 s; wait_for gives up at 20). */
  slc_engine_config cfg = {.thread = true,
                           .marker_every_ops = 1000,
                           .marker_every_us = 100000000,
                           .wait = wait};
  if (setup(&c, 100, &cfg)) return 1;
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 1, 0, &st), LDG_OK);
  slc_buffer *b;
  CHECK_RC(slc_buffer_alloc_device(c, 1, 64, &b), LDG_OK);
  atomic_long n = 0;
  for (int i = 0; i < 3; i++) {
    slc_hold h = {{count_keep, &n}, NULL, 0, NULL, 0};
    CHECK_RC(slc_memset_d8_async(st, slc_buffer_dptr(b), 1, 64, &h), LDG_OK);
  }
  if (wait_for(c, &n, 3, false)) return 1;
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.tail_markers >= 1);
  return finish(c, b, st);
}

static int t_tail_marker(void) {
  return tail_marker(SLC_ENGINE_WAIT_ADAPTIVE) ||
         tail_marker(SLC_ENGINE_WAIT_FIXED);
}

/* ---- The thread's waits, counted ----------------------------------------- */

/* Waits until the engine thread is parked: it parked at least once and did
 * not park again over 20 ms (awake with nothing pending, it would park
 * within linger_us + poll_max_us, far less). */
static int wait_parked(slc_context *c) {
  slc_engine_stats es;
  for (long i = 0; i < 1000; i++) {
    CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
    uint64_t before = es.thread_parks;
    sleep_us(20000);
    CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
    if (before >= 1 && es.thread_parks == before) return 0;
  }
  fprintf(stderr, "  gave up waiting for the thread to park\n");
  return 1;
}

/* Under either wait the thread parks once nothing is pending (the adaptive
 * one after lingering), an issue to the parked thread wakes it (counted in
 * thread_wakes_by_issuers: the only way it wakes), and the work is
 * released. `deferred`: the issue that meets the parked thread is a
 * slc_stream_record_deferred, whose wake-up has no fence of its own
 * (slc__engine_kick_enqueued): nobody polls here, so without the wake-up
 * the keep never runs. No time is asserted. */
static int wait_counters(slc_engine_wait wait, bool deferred) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .wait = wait, .linger_us = 500};
  slc_stream *st;
  slc_buffer *b;
  if (start(&c, &cfg, &st, &b)) return 1;
  atomic_long n = 0;
  slc_hold h = {{count_keep, &n}, NULL, 0, NULL, 0};
  CHECK_RC(slc_memset_d8_async(st, slc_buffer_dptr(b), 1, 64, &h), LDG_OK);
  if (wait_for(c, &n, 1, false) || wait_parked(c)) return 1;
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  uint64_t wakes = es.thread_wakes_by_issuers;
  if (deferred)
    CHECK_RC(slc_stream_record_deferred(st, &h), LDG_OK);
  else
    CHECK_RC(slc_memset_d8_async(st, slc_buffer_dptr(b), 2, 64, &h), LDG_OK);
  if (wait_for(c, &n, 2, false)) return 1;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.thread_wakes_by_issuers >= wakes + 1);
  CHECK(es.thread_parks >= 1);
  return finish(c, b, st);
}

static int t_wait_counters(void) {
  return wait_counters(SLC_ENGINE_WAIT_ADAPTIVE, false) ||
         wait_counters(SLC_ENGINE_WAIT_FIXED, false) ||
         wait_counters(SLC_ENGINE_WAIT_ADAPTIVE, true) ||
         wait_counters(SLC_ENGINE_WAIT_FIXED, true);
}

/* ---- A parked thread and an owned stream (engine.c, WAKING THE ENGINE
 * THREAD) ------------------------------------------------------------------- */

/* The layer's streams are owned by their one issuing thread where
 * membarrier is in use (their ledger stream is not LDG_STREAM_SHARED): the
 * issue reserves by a store of otail, no locked RMW, and the wake-up of a
 * parked engine thread rests on the thread's membarrier between its store
 * of parked and its final poll. Rounds of one issue (a launch, or a
 * deferred record: slc__engine_kick_enqueued) meet the thread at every
 * point of its poll-then-park: the next issue follows the previous keep
 * after 0..63 yields, and every eighth round only once the thread parked
 * again. Nobody polls: each keep must come from the thread,
 * released after the wake-up of its own issue or seen by the final poll;
 * a lost wake-up leaves it parked and the round gives up after 20 s.
 * Asserted: every keep ran, the stream stayed owned (membarrier in use)
 * and issues woke the parked thread. No time is asserted. */
static int park_owned(bool deferred) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .wait = SLC_ENGINE_WAIT_FIXED};
  slc_stream *st;
  slc_buffer *b;
  if (start(&c, &cfg, &st, &b)) return 1;
  atomic_long n = 0;
  slc_hold h = {{count_keep, &n}, NULL, 0, NULL, 0};
  const long rounds = SANITIZED ? 200 : 2000;
  uint64_t parks0 = 0; /* thread_parks before the previous issue */
  for (long r = 0; r < rounds; r++) {
    slc_engine_stats es;
    CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
    if (r % 8 == 7) {
      /* Parked since the previous issue (it parks once that keep ran:
       * nothing else is pending), and not again over 200 us. */
      uint64_t seen = 0;
      for (long i = 0; i < 100000; i++) {
        seen = es.thread_parks;
        sleep_us(200);
        CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
        if (seen > parks0 && es.thread_parks == seen) break;
      }
      CHECK(es.thread_parks > parks0);
    } else {
      for (long i = 0; i < r % 64; i++) sched_yield();
    }
    parks0 = es.thread_parks;
    if (deferred)
      CHECK_RC(slc_stream_record_deferred(st, &h), LDG_OK);
    else
      CHECK_RC(slc_memset_d8_async(st, slc_buffer_dptr(b), 1, 64, &h),
               LDG_OK);
    if (wait_for(c, &n, r + 1, false)) {
      fprintf(stderr, "  round %ld of %ld: the keep was not released\n", r,
              rounds);
      return 1;
    }
  }
  /* Owned (16) where membarrier is in use; shared (2) otherwise (own8),
   * where the fences' path ran. */
  uint64_t own = ldg__ring_owner_state(slc_stream_ledger(st));
  CHECK(own == (atomic_load(&ldg__asym_membarrier) ? 16u : 2u));
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.thread_wakes_by_issuers >= 1);
  return finish(c, b, st);
}

static int t_park_owned(void) {
  return park_owned(false) || park_owned(true);
}

/* ---- Keeps may call the layer -------------------------------------------- */

typedef struct reentry {
  slc_context *c;
  slc_stream *st;
  slc_buffer *b;
  atomic_long inner, outer;
  atomic_int fail;
} reentry;

static void inner_keep(void *ctx) {
  atomic_fetch_add(&((reentry *)ctx)->inner, 1);
}

/* Issues more work on its own stream and polls, from the engine thread. */
static void outer_keep(void *ctx) {
  reentry *r = ctx;
  slc_hold h = {{inner_keep, r}, NULL, 0, NULL, 0};
  if (slc_memset_d8_async(r->st, slc_buffer_dptr(r->b), 2, 64, &h) != LDG_OK)
    atomic_store(&r->fail, 1);
  if (slc_engine_poll(r->c, NULL) != LDG_OK) atomic_store(&r->fail, 1);
  atomic_fetch_add(&r->outer, 1);
}

static int t_keep_reenters(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .marker_every_ops = 1};
  if (setup(&c, 50, &cfg)) return 1;
  reentry r = {.c = c};
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &r.st), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &r.b), LDG_OK);
  for (int i = 0; i < 20; i++) {
    slc_hold h = {{outer_keep, &r}, NULL, 0, NULL, 0};
    CHECK_RC(slc_memset_d8_async(r.st, slc_buffer_dptr(r.b), 1, 64, &h),
             LDG_OK);
  }
  if (wait_for(c, &r.inner, 20, false)) return 1;
  CHECK(atomic_load(&r.outer) == 20 && atomic_load(&r.fail) == 0);
  CHECK_RC(slc_buffer_free(r.b), LDG_OK);
  slc_stream_unref(r.st);
  return teardown(c);
}

/* ---- A stalled engine thread never blocks issuers ------------------------- */

static atomic_int g_unstall, g_stalled;

static void stall_keep(void *ctx) {
  atomic_store(&g_stalled, 1);
  while (!atomic_load(&g_unstall)) sleep_us(200);
  atomic_fetch_add((atomic_long *)ctx, 1);
}

static int t_stalled_engine(void) {
  slc_context *c;
  /* A ring of 4 markers, one per op placed by the issuer: it fills while
   * the engine is stuck. (With the thread placing them, the default, a
   * stuck thread places none: nothing to fill.) */
  slc_engine_config cfg = {.thread = true,
                           .marker_every_ops = 1,
                           .markers_per_stream = 4,
                           .placement = SLC_ENGINE_PLACE_ISSUER};
  if (setup(&c, 0, &cfg)) return 1;
  slc_stream *a, *b;
  CHECK_RC(slc_stream_create(c, 0, 0, &a), LDG_OK);
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &b), LDG_OK);
  slc_buffer *buf, *buf_b; /* one per stream: the streams do not order */
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &buf), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &buf_b), LDG_OK);
  atomic_long na = 0, nb = 0;
  atomic_store(&g_unstall, 0);
  atomic_store(&g_stalled, 0);
  slc_hold h0 = {{stall_keep, &na}, NULL, 0, NULL, 0};
  CHECK_RC(slc_memset_d8_async(a, slc_buffer_dptr(buf), 0, 64, &h0), LDG_OK);
  /* Wait until the engine thread is stuck in that keep. */
  for (int i = 0; i < 200000 && !atomic_load(&g_stalled); i++) sleep_us(100);
  CHECK(atomic_load(&g_stalled));
  const int more = SANITIZED ? 300 : 2000;
  for (int i = 0; i < more; i++) {
    slc_hold h = {{count_keep, &na}, NULL, 0, NULL, 0};
    CHECK_RC(slc_memset_d8_async(a, slc_buffer_dptr(buf), 1, 64, &h), LDG_OK);
  }
  /* Issuing did not wait for the engine; the ring filled up. */
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.markers_skipped > 0);
  /* Another stream still progresses, by our polls. */
  for (int i = 0; i < 10; i++) {
    slc_hold h = {{count_keep, &nb}, NULL, 0, NULL, 0};
    CHECK_RC(slc_memset_d8_async(b, slc_buffer_dptr(buf_b), 2, 64, &h),
             LDG_OK);
  }
  if (wait_for(c, &nb, 10, true)) return 1;
  /* The stuck stream's later keeps wait behind its stuck one (in order). */
  CHECK(atomic_load(&na) == 0);
  slc_stream_progress sp;
  CHECK_RC(slc_stream_progress_get(a, &sp), LDG_OK);
  /* (The stuck release may already have taken its chunk of entries.) */
  CHECK(sp.pending >= (size_t)more && sp.released_mark == 0);
  atomic_store(&g_unstall, 1);
  if (wait_for(c, &na, more + 1, false)) return 1;
  CHECK_RC(slc_buffer_free(buf), LDG_OK);
  CHECK_RC(slc_buffer_free(buf_b), LDG_OK);
  slc_stream_unref(a);
  slc_stream_unref(b);
  return teardown(c);
}

/* ---- Failing records and queries degrade to "later" ----------------------- */

static int t_failed_records_queries(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = false, .marker_every_ops = 1};
  if (setup(&c, 100, &cfg)) return 1;
  loop L = {.c = c, .issuer = pthread_self()};
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &st), LDG_OK);
  enum { K = 2 };
  slot slots[K];
  for (int i = 0; i < K; i++)
    if (slot_init(&L, &slots[i])) return 1;
  hd_fail_next(HD_FAULT_EVENT_RECORD, CUDA_ERROR_UNKNOWN, 7);
  /* Fewer than SLC_ENGINE_QUERY_RETRIES in a row: transient. */
  hd_fail_next(HD_FAULT_EVENT_QUERY, CUDA_ERROR_UNKNOWN,
               SLC_ENGINE_QUERY_RETRIES - 1);
  if (serve(&L, st, slots, K, 40, true)) return 1;
  CHECK(atomic_load(&L.mismatches) == 0);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.record_failures == 7 && es.markers_skipped >= 7);
  CHECK(es.query_failures == SLC_ENGINE_QUERY_RETRIES - 1);
  CHECK(es.stream_errors == 0);
  CHECK_RC(slc_stream_engine_error(st, NULL), LDG_OK);
  for (int i = 0; i < K; i++)
    if (slot_fini(&slots[i])) return 1;
  slc_stream_unref(st);
  return teardown(c);
}

/* ---- A device error: reported, nothing released without proof ------------ */

static atomic_long g_err_calls;
static uint64_t g_err_stream;
static CUresult g_err_cu;

static void on_error(void *arg, uint64_t stream_id, int device, CUresult cu) {
  (void)arg;
  (void)device;
  g_err_stream = stream_id;
  g_err_cu = cu;
  atomic_fetch_add(&g_err_calls, 1);
}

static int t_sticky_error(void) {
  slc_context *c;
  atomic_store(&g_err_calls, 0);
  slc_engine_config cfg = {
      .thread = true, .marker_every_ops = 1, .on_error = on_error};
  if (setup(&c, 0, &cfg)) return 1;
  loop L = {.c = c, .issuer = pthread_self(), .expect_status = LDG_OK};
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &st), LDG_OK);
  slot s;
  if (slot_init(&L, &s)) return 1;
  hd_hold(true); /* nothing runs: the markers stay pending */
  if (request(&L, st, &s, 7)) return 1;
  hd_set_sticky(CUDA_ERROR_LAUNCH_FAILED);
  hd_hold(false);
  if (wait_for(c, &g_err_calls, 1, false)) {
    /* Seen once in ~40 TSan runs: no marker ever placed, every record
     * failing (1.5 M); printed to find why. */
    slc_engine_stats d;
    if (slc_engine_stats_get(c, &d) == LDG_OK)
      fprintf(stderr,
              "  engine: placed %llu (tails %llu) skipped %llu pending %llu "
              "done %llu; record failures %llu, query failures %llu, "
              "stream errors %llu; polls %llu, parks %llu\n",
              (unsigned long long)d.markers_placed,
              (unsigned long long)d.tail_markers,
              (unsigned long long)d.markers_skipped,
              (unsigned long long)d.markers_pending,
              (unsigned long long)d.markers_done,
              (unsigned long long)d.record_failures,
              (unsigned long long)d.query_failures,
              (unsigned long long)d.stream_errors,
              (unsigned long long)d.polls, (unsigned long long)d.thread_parks);
    return 1;
  }
  sleep_us(20000); /* the engine keeps polling; no more reports, no release */
  CHECK(atomic_load(&g_err_calls) == 1);
  CHECK(g_err_stream == ldg_stream_id(slc_stream_ledger(st)));
  CHECK(g_err_cu == CUDA_ERROR_LAUNCH_FAILED);
  CUresult cu = CUDA_SUCCESS;
  CHECK_RC(slc_stream_engine_error(st, &cu), SLC_EDRIVER);
  CHECK(cu == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(atomic_load(&L.released) == 0);
  slc_stream_progress sp;
  CHECK_RC(slc_stream_progress_get(st, &sp), LDG_OK);
  CHECK(sp.pending == 2 && sp.engine_error == CUDA_ERROR_LAUNCH_FAILED);
  /* The last unref cannot synchronise: nothing is released without proof.
   * The stream waits in the context's limbo list, out of the engine (its
   * marker events are gone). */
  slc_stream_unref(st);
  sleep_us(20000); /* the engine thread would have run a keep by now */
  CHECK(atomic_load(&L.released) == 0);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0 && es.markers_pending == 0);
  CHECK(atomic_load(&g_err_calls) == 1);
  /* The device recovers: freeing the buffers settles them, which
   * synchronises the kept stream; the keeps run with proof (LDG_OK). */
  hd_set_sticky(CUDA_SUCCESS);
  if (slot_fini(&s)) return 1;
  CHECK(atomic_load(&L.released) == 2);
  CHECK(atomic_load(&L.bad_status) == 0);
  return teardown(c); /* finishes the kept stream */
}

/* A marker whose record fails with a sticky-class error (the context is
 * broken: every later record fails too, so no marker would ever be queried)
 * makes the stream's engine error sticky and is reported once, by the next
 * poll; nothing is released without proof; a transient record failure
 * (failed_records_queries) is not sticky. */
static int t_sticky_record(void) {
  slc_context *c;
  atomic_store(&g_err_calls, 0);
  g_err_cu = CUDA_SUCCESS;
  slc_engine_config cfg = {
      .thread = false, .marker_every_ops = 1, .on_error = on_error};
  if (setup(&c, 0, &cfg)) return 1;
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &st), LDG_OK);
  slc_buffer *buf;
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &buf), LDG_OK);
  atomic_long kept = 0;
  slc_hold h = {{count_keep, &kept}, NULL, 0, NULL, 0};
  hd_hold(true);
  hd_fail_next(HD_FAULT_EVENT_RECORD, CUDA_ERROR_LAUNCH_FAILED, 1);
  /* The operation is issued; its marker's record fails. */
  CHECK_RC(slc_memset_d8_async(st, slc_buffer_dptr(buf), 1, 64, &h), LDG_OK);
  CHECK(atomic_load(&g_err_calls) == 0); /* reported by a poll, not here */
  CHECK_RC(slc_engine_poll(c, NULL), LDG_OK);
  CHECK(atomic_load(&g_err_calls) == 1);
  CHECK(g_err_cu == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(g_err_stream == ldg_stream_id(slc_stream_ledger(st)));
  CUresult cu = CUDA_SUCCESS;
  CHECK_RC(slc_stream_engine_error(st, &cu), SLC_EDRIVER);
  CHECK(cu == CUDA_ERROR_LAUNCH_FAILED);
  hd_hold(false);
  /* The engine queries nothing more on it: no release without proof. */
  for (int i = 0; i < 5; i++) CHECK_RC(slc_engine_poll(c, NULL), LDG_OK);
  CHECK(atomic_load(&g_err_calls) == 1); /* once */
  CHECK(atomic_load(&kept) == 0);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.stream_errors == 1 && es.record_failures == 1);
  CHECK_RC(slc_stream_synchronize(st), LDG_OK); /* the proof */
  CHECK(atomic_load(&kept) == 1);
  CHECK_RC(slc_buffer_free(buf), LDG_OK);
  slc_stream_unref(st);
  return teardown(c);
}

/* ---- Operations on layer buffers hold them by themselves ------------------ */

static int t_buffer_ops_hold(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = false};
  if (setup(&c, 100, &cfg)) return 1;
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &st), LDG_OK);
  slc_buffer *staging, *dev, *out;
  CHECK_RC(slc_buffer_alloc_host(c, WORDS * 4, &staging), LDG_OK);
  CHECK_RC(slc_buffer_alloc_host(c, WORDS * 4, &out), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 0, WORDS * 4, &dev), LDG_OK);
  fill(slc_buffer_host(staging), 42);
  hd_hold(true); /* nothing runs yet */
  /* The raw call holds only what the caller lists: nothing here. */
  CHECK_RC(slc_copy_htod_async(st, slc_buffer_dptr(dev),
                               slc_buffer_host(staging), 4, NULL),
           LDG_OK);
  CHECK(!slc_buffer_held(staging) && !slc_buffer_held(dev));
  /* The buffer calls hold their buffers with no hold given. */
  CHECK_RC(slc_buf_copy_async(st, dev, 0, staging, 0, WORDS * 4, NULL),
           LDG_OK);
  CHECK_RC(slc_buf_copy_async(st, out, 0, dev, 0, WORDS * 4, NULL), LDG_OK);
  CHECK(slc_buffer_held(staging) && slc_buffer_held(dev) &&
        slc_buffer_held(out));
  /* A free would be a use-after-free under the pending copy (ASan). */
  CHECK_RC(slc_buffer_try_free(staging), LDG_EBUSY);
  CHECK_RC(slc_buffer_try_free(dev), LDG_EBUSY);
  CHECK(strstr(slc_last_error_message(), "held") != NULL);
  /* The caller's own hold is kept alongside. */
  atomic_long kept = 0;
  slc_hold h = {{count_keep, &kept}, NULL, 0, NULL, 0};
  CHECK_RC(slc_buf_memset_async(st, dev, 8, 0, 4, &h), LDG_OK);
  hd_hold(false);
  /* slc_buffer_free settles the copy first; staging's bytes were read. */
  CHECK_RC(slc_buffer_free(staging), LDG_OK);
  if (wait_for(c, &kept, 1, true)) return 1;
  CHECK_RC(slc_stream_synchronize(st), LDG_OK);
  uint32_t want[WORDS];
  fill(want, 42);
  CHECK(memcmp(slc_buffer_host(out), want, sizeof(want)) == 0);
  CHECK(!slc_buffer_held(dev) && !slc_buffer_held(out));
  CHECK_RC(slc_buffer_try_free(dev), LDG_OK);
  CHECK_RC(slc_buffer_try_free(out), LDG_OK);
  slc_stream_unref(st);
  return teardown(c);
}

static int t_buffer_ops_bad_input(void) {
  slc_context *c;
  /* No engine thread: nothing is released before the checks below. */
  slc_engine_config cfg = {.thread = false};
  if (setup(&c, 0, &cfg)) return 1;
  slc_context *c2;
  CHECK_RC(slc_context_create(&g_drv, &c2), LDG_OK);
  slc_stream *st;
  CHECK_RC(slc_stream_create(c, 0, 0, &st), LDG_OK);
  slc_buffer *h1, *h2, *d0, *d1, *other;
  CHECK_RC(slc_buffer_alloc_host(c, 64, &h1), LDG_OK);
  CHECK_RC(slc_buffer_alloc_host(c, 64, &h2), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &d0), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 1, 64, &d1), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c2, 0, 64, &other), LDG_OK);
  CHECK_RC(slc_buf_copy_async(NULL, d0, 0, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_copy_async(st, NULL, 0, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_copy_async(st, d0, 60, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "outside") != NULL);
  CHECK_RC(slc_buf_copy_async(st, d0, 0, h1, SIZE_MAX, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_copy_async(st, h2, 0, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_copy_async(st, d1, 0, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "device 1") != NULL);
  CHECK_RC(slc_buf_copy_async(st, other, 0, h1, 0, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_memset_async(st, h1, 0, 0, 8, NULL), LDG_EINVAL);
  CHECK_RC(slc_buf_memset_async(st, d0, 0, 0, 65, NULL), LDG_EINVAL);
  slc_hold bad = {{NULL, NULL}, NULL, 2, NULL, 0};
  CHECK_RC(slc_buf_memset_async(st, d0, 0, 0, 8, &bad), LDG_EINVAL);
  slc_dim3 one = {1, 1, 1};
  CHECK_RC(slc_buf_launch(st, NULL, one, one, 0, NULL, NULL, 1, NULL),
           LDG_EINVAL);
  slc_buffer *bl[] = {d0, d1};
  CHECK_RC(slc_buf_launch(st, NULL, one, one, 0, NULL, bl, 2, NULL),
           LDG_EINVAL);
  /* Nothing was issued or recorded by any of them. */
  CHECK(ldg_mark(slc_stream_ledger(st)) == 0);
  CHECK(!slc_buffer_held(h1) && !slc_buffer_held(d0));
  /* The caller's ids and the buffers' together. */
  uint64_t ids[5] = {1001, 1002, 1003, 1004, 1005};
  slc_hold big = {{NULL, NULL}, ids, 5, NULL, 0};
  CHECK_RC(slc_buf_copy_async(st, d0, 0, h1, 0, 8, &big), LDG_OK);
  CHECK(ldg_holds_vector(slc_context_ledger(c), 1005));
  CHECK(slc_buffer_held(h1));
  CHECK_RC(slc_stream_synchronize(st), LDG_OK);
  slc_buffer *all[] = {h1, h2, d0, d1};
  for (int i = 0; i < 4; i++) CHECK_RC(slc_buffer_try_free(all[i]), LDG_OK);
  CHECK_RC(slc_buffer_try_free(other), LDG_OK);
  slc_stream_unref(st);
  CHECK_RC(slc_context_destroy(c2), LDG_OK);
  return teardown(c);
}

/* ---- Streams and work the layer did not create ----------------------------- */

static int t_adopt_external(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .marker_every_ops = 1};
  if (setup(&c, 200, &cfg)) return 1;
  const slc_driver *d = slc_context_driver(c);
  CHECK_RC(slc_device_make_current(c, 1), LDG_OK);
  CUstream raw;
  CHECK(d->pfn_cuStreamCreate(&raw, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  slc_stream *s;
  CHECK_RC(slc_stream_adopt(c, raw, &s), LDG_OK);
  CHECK(slc_stream_is_adopted(s) && slc_stream_device(s) == 1);
  CHECK(slc_stream_handle(s) == raw);
  CHECK(ldg_stream_is_nonblocking(slc_stream_ledger(s)));
  slc_buffer *staging, *dev;
  CHECK_RC(slc_buffer_alloc_host(c, WORDS * 4, &staging), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 1, WORDS * 4, &dev), LDG_OK);
  /* "A library" issues a copy on the stream, then we record its hold. */
  hd_hold(true);
  CHECK_RC(slc_device_make_current(c, 1), LDG_OK);
  CHECK(d->pfn_cuMemcpyHtoDAsync(slc_buffer_dptr(dev),
                                 slc_buffer_host(staging), WORDS * 4,
                                 raw) == CUDA_SUCCESS);
  atomic_long kept = 0;
  uint64_t ids[] = {slc_buffer_id(staging), slc_buffer_id(dev)};
  slc_hold h = {{count_keep, &kept}, ids, 2, NULL, 0};
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK);
  CHECK_RC(slc_buffer_try_free(staging), LDG_EBUSY);
  hd_hold(false);
  if (wait_for(c, &kept, 1, false)) return 1; /* the engine released it */
  CHECK(!slc_buffer_held(staging));
  /* Layer calls on the adopted stream work as on any. */
  CHECK_RC(slc_buf_memset_async(s, dev, 0, 1, 4, NULL), LDG_OK);
  CHECK_RC(slc_stream_destroy(s), LDG_OK);
  /* Destroyed in the layer: refused, the keep stays the caller's. */
  atomic_long late = 0;
  slc_hold hl = {{count_keep, &late}, NULL, 0, NULL, 0};
  CHECK_RC(slc_stream_record_external(s, &hl), LDG_EDESTROYED);
  CHECK(atomic_load(&late) == 0);
  slc_stream_unref(s);
  /* The driver stream is still its owner's. */
  CHECK_RC(slc_device_make_current(c, 1), LDG_OK);
  CHECK(d->pfn_cuStreamSynchronize(raw) == CUDA_SUCCESS);
  CHECK(d->pfn_cuStreamDestroy(raw) == CUDA_SUCCESS);
  CHECK_RC(slc_buffer_try_free(staging), LDG_OK);
  CHECK_RC(slc_buffer_try_free(dev), LDG_OK);
  /* Bad input. */
  slc_stream *x;
  CHECK_RC(slc_stream_adopt(c, NULL, &x), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt(c, CU_STREAM_LEGACY, &x), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt(NULL, raw, &x), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt(c, raw, NULL), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt(c, raw, &x), LDG_EINVAL); /* destroyed handle */
  CHECK(strstr(slc_last_error_message(), "cuStreamGetCtx") != NULL);
  CHECK_RC(slc_stream_record_external(NULL, NULL), LDG_EINVAL);
  return teardown(c);
}

/* A marker event whose cuEventDestroy fails twice, as the stream leaves
 * the engine, is given up (left to the driver's context teardown): it no
 * longer counts in events_live, which then reads 0 again. The context is
 * made over a copy of the driver table whose cuEventDestroy fails while
 * g_destroy_fails is positive. */
static atomic_int g_destroy_fails;
static CUresult CUDAAPI failing_event_destroy(CUevent ev) {
  if (atomic_load(&g_destroy_fails) > 0) {
    atomic_fetch_sub(&g_destroy_fails, 1);
    return CUDA_ERROR_UNKNOWN;
  }
  return g_drv.pfn_cuEventDestroy(ev);
}

static int t_marker_destroy_fails(void) {
  hd_config hc = {2, 0};
  CHECK(hd_install(&g_drv, &hc) == 0);
  slc_driver drv = g_drv;
  drv.pfn_cuEventDestroy = failing_event_destroy;
  slc_context *c;
  CHECK_RC(slc_context_create(&drv, &c), LDG_OK);
  slc_engine_config cfg = {.thread = false, .marker_every_ops = 1};
  CHECK_RC(slc_engine_enable(c, &cfg), LDG_OK);
  slc_stream *s;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &s), LDG_OK);
  atomic_long kept = 0;
  slc_hold h = {{count_keep, &kept}, NULL, 0, NULL, 0};
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK); /* one marker */
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 1);
  atomic_store(&g_destroy_fails, 2); /* the destroy and its retry */
  slc_stream_unref(s); /* synchronised: the keep ran; leaves the engine */
  CHECK(atomic_load(&g_destroy_fails) == 0);
  CHECK(atomic_load(&kept) == 1);
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0);
  CHECK(es.markers_pending == 0);
  CHECK_RC(slc_context_destroy(c), LDG_OK);
  /* The given-up event is the executor's only leftover. */
  CHECK(hd_shutdown() == 1);
  return 0;
}

/* An adopted stream whose last unref meets a failed sync waits in the
 * context's limbo list, out of the engine; slc_context_destroy releases
 * nothing while its sync fails, then finishes it — and never destroys the
 * CUstream, which stays its owner's. */
static int t_adopt_limbo(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .marker_every_ops = 1};
  if (setup(&c, 0, &cfg)) return 1;
  /* The owner (g_drv: outlives c) holds its own primary context. */
  CUdevice dev0;
  CUcontext own;
  CHECK(g_drv.pfn_cuDeviceGet(&dev0, 0) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuDevicePrimaryCtxRetain(&own, dev0) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuCtxSetCurrent(own) == CUDA_SUCCESS);
  CUstream raw;
  CHECK(g_drv.pfn_cuStreamCreate(&raw, CU_STREAM_NON_BLOCKING) ==
        CUDA_SUCCESS);
  slc_stream *s;
  CHECK_RC(slc_stream_adopt(c, raw, &s), LDG_OK);
  atomic_long kept = 0;
  slc_hold h = {{count_keep, &kept}, NULL, 0, NULL, 0};
  hd_set_sticky(CUDA_ERROR_LAUNCH_FAILED); /* before the engine sees it */
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK);
  slc_stream_unref(s); /* the sync fails: kept, nothing released */
  CHECK(atomic_load(&kept) == 0);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0); /* it left the engine */
  CHECK_RC(slc_context_destroy(c), SLC_EDRIVER); /* still no proof */
  CHECK(strstr(slc_last_error_message(), "cuStreamSynchronize") != NULL);
  CHECK(atomic_load(&kept) == 0);
  hd_set_sticky(CUDA_SUCCESS);
  CHECK_RC(slc_context_destroy(c), LDG_OK); /* synchronised, finished */
  CHECK(atomic_load(&kept) == 1);
  /* The driver stream is still its owner's. */
  CHECK(g_drv.pfn_cuCtxSetCurrent(own) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuStreamSynchronize(raw) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuStreamDestroy(raw) == CUDA_SUCCESS);
  CHECK(g_drv.pfn_cuDevicePrimaryCtxRelease(dev0) == CUDA_SUCCESS);
  long leaked = hd_shutdown();
  CHECK(leaked == 0);
  return 0;
}

/* ---- Keeps counted by cause -------------------------------------------- */

typedef struct nested {
  slc_stream *other; /* the outer keep issues 2 ops there, then syncs it */
  CUdeviceptr p;
  atomic_long *count;
  atomic_long n;
  atomic_int fail;
} nested;

static void nested_keep(void *ctx) {
  nested *x = ctx;
  slc_hold h = {{count_keep, x->count}, NULL, 0, NULL, 0};
  for (int i = 0; i < 2; i++)
    if (slc_memset_d8_async(x->other, x->p, 6, 64, &h) != LDG_OK)
      atomic_store(&x->fail, 1);
  if (slc_stream_synchronize(x->other) != LDG_OK) atomic_store(&x->fail, 1);
  atomic_fetch_add(&x->n, 1);
}

static int check_causes(slc_context *c, const uint64_t want[SLC_CAUSE_COUNT]) {
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  uint64_t sum = 0;
  for (int i = 0; i < SLC_CAUSE_COUNT; i++) {
    if (es.keeps_by_cause[i] != want[i])
      fprintf(stderr, "  cause %d: %llu keeps, want %llu\n", i,
              (unsigned long long)es.keeps_by_cause[i],
              (unsigned long long)want[i]);
    CHECK(es.keeps_by_cause[i] == want[i]);
    sum += want[i];
  }
  CHECK(es.keeps_run == sum);
  return 0;
}

/* Each cause releases a known number of operations, one at a time, on a
 * polled engine with N and T too large to mark anything (so only the calls
 * of the test release): counts must match exactly, including a keep
 * released by a poll that synchronises another stream (counted under SYNC,
 * not twice) and a transitive release through a wait (counted under the
 * call that released the waiting stream). Keeps counted before the engine
 * was enabled count too. */
static int t_keeps_by_cause(void) {
  hd_config hc = {1, 20};
  CHECK(hd_install(&g_drv, &hc) == 0);
  slc_context *c;
  CHECK_RC(slc_context_create(&g_drv, &c), LDG_OK);
  slc_stream *a, *b;
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &a), LDG_OK);
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &b), LDG_OK);
  slc_buffer *buf;
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &buf), LDG_OK);
  CUdeviceptr p = slc_buffer_dptr(buf);
  atomic_long n = 0;
  slc_hold h = {{count_keep, &n}, NULL, 0, NULL, 0};
  slc_hold none = {{NULL, NULL}, NULL, 0, NULL, 0};
  uint64_t want[SLC_CAUSE_COUNT] = {0};
  /* Before the engine: 2 released by a stream sync (one keep NULL). */
  CHECK_RC(slc_memset_d8_async(a, p, 1, 64, &h), LDG_OK);
  CHECK_RC(slc_memset_d8_async(a, p, 1, 64, &none), LDG_OK);
  CHECK_RC(slc_stream_synchronize(a), LDG_OK);
  want[SLC_CAUSE_SYNC] += 2;
  slc_engine_config cfg = {.thread = false,
                           .marker_every_ops = 1000000,
                           .marker_every_us = 100000000};
  CHECK_RC(slc_engine_enable(c, &cfg), LDG_OK);
  if (check_causes(c, want)) return 1;
  /* Event: 3 ops before the record, released by its synchronize. */
  slc_event *ev;
  CHECK_RC(slc_event_create(c, 0, &ev), LDG_OK);
  for (int i = 0; i < 3; i++)
    CHECK_RC(slc_memset_d8_async(a, p, 2, 64, &h), LDG_OK);
  CHECK_RC(slc_event_record(ev, a), LDG_OK);
  CHECK_RC(slc_event_synchronize(ev), LDG_OK);
  want[SLC_CAUSE_EVENT] += 3;
  if (check_causes(c, want)) return 1;
  /* Transitive: 2 on a, b waits for them, 1 on b; syncing b releases 3. */
  CHECK_RC(slc_memset_d8_async(a, p, 3, 64, &h), LDG_OK);
  CHECK_RC(slc_memset_d8_async(a, p, 3, 64, &h), LDG_OK);
  CHECK_RC(slc_event_record(ev, a), LDG_OK);
  CHECK_RC(slc_stream_wait_event(b, ev), LDG_OK);
  CHECK_RC(slc_memset_d8_async(b, p, 4, 64, &h), LDG_OK);
  CHECK_RC(slc_stream_synchronize(b), LDG_OK);
  want[SLC_CAUSE_SYNC] += 3;
  if (check_causes(c, want)) return 1;
  /* Poll: 4 ops; the polls place a tail marker and release them. Then a
   * keep released by a poll that issues 2 ops on b and synchronises it:
   * 1 POLL, 2 SYNC (the nested sync's keeps are not counted twice). */
  for (int i = 0; i < 4; i++)
    CHECK_RC(slc_memset_d8_async(a, p, 5, 64, &h), LDG_OK);
  long base = atomic_load(&n);
  if (wait_for(c, &n, base + 4, true)) return 1;
  want[SLC_CAUSE_POLL] += 4;
  if (check_causes(c, want)) return 1;
  nested x = {.other = b, .p = p, .count = &n};
  slc_hold hn = {{nested_keep, &x}, NULL, 0, NULL, 0};
  CHECK_RC(slc_memset_d8_async(a, p, 7, 64, &hn), LDG_OK);
  if (wait_for(c, &x.n, 1, true)) return 1;
  CHECK(atomic_load(&x.fail) == 0);
  want[SLC_CAUSE_POLL] += 1;
  want[SLC_CAUSE_SYNC] += 2;
  if (check_causes(c, want)) return 1;
  /* Destroy: 2 pending on b when it is destroyed. */
  CHECK_RC(slc_memset_d8_async(b, p, 8, 64, &h), LDG_OK);
  CHECK_RC(slc_memset_d8_async(b, p, 8, 64, &h), LDG_OK);
  CHECK_RC(slc_stream_destroy(b), LDG_OK);
  want[SLC_CAUSE_DESTROY] += 2;
  if (check_causes(c, want)) return 1;
  CHECK(atomic_load(&n) == 15); /* the NULL and the nested keep aside */
  CHECK_RC(slc_event_destroy(ev), LDG_OK);
  CHECK_RC(slc_buffer_free(buf), LDG_OK);
  slc_stream_unref(a);
  slc_stream_unref(b);
  return teardown(c);
}

/* Waits until keeps_run reaches want: a keep runs before the call that ran
 * it counts it (the count is taken when the call returns from the ledger). */
static int wait_keeps_run(slc_context *c, uint64_t want, slc_engine_stats *es) {
  for (long i = 0; i < 200000; i++) {
    CHECK_RC(slc_engine_stats_get(c, es), LDG_OK);
    if (es->keeps_run >= want) return 0;
    sleep_us(100);
  }
  fprintf(stderr, "  gave up waiting: keeps_run %llu of %llu\n",
          (unsigned long long)es->keeps_run, (unsigned long long)want);
  return 1;
}

/* The engine thread's releases count under SLC_CAUSE_ENGINE (or, rarely,
 * under ENQUEUE: an issue whose entry the thread's release overtook). */
static int t_keeps_by_engine(void) {
  slc_context *c;
  slc_engine_config cfg = {.thread = true, .marker_every_ops = 1};
  if (setup(&c, 20, &cfg)) return 1;
  slc_stream *a;
  CHECK_RC(slc_stream_create(c, 0, 0, &a), LDG_OK);
  slc_buffer *buf;
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &buf), LDG_OK);
  atomic_long n = 0;
  slc_hold h = {{count_keep, &n}, NULL, 0, NULL, 0};
  for (int i = 0; i < 5; i++)
    CHECK_RC(slc_memset_d8_async(a, slc_buffer_dptr(buf), 1, 64, &h), LDG_OK);
  if (wait_for(c, &n, 5, false)) return 1;
  slc_engine_stats es;
  if (wait_keeps_run(c, 5, &es)) return 1;
  CHECK(es.keeps_run == 5 && es.keeps_by_cause[SLC_CAUSE_ENGINE] +
                                     es.keeps_by_cause[SLC_CAUSE_ENQUEUE] ==
                                 5);
  CHECK(es.keeps_by_cause[SLC_CAUSE_ENGINE] >= 1);
  CHECK_RC(slc_buffer_free(buf), LDG_OK);
  slc_stream_unref(a);
  return teardown(c);
}

/* ---- Streams created before the engine is enabled are driven ----------- */

/* Work issued before slc_engine_enable, on a stream created before it, is
 * released by the engine (a tail marker: placed_mark starts at 0), and that
 * stream's later work gets the issuer's markers; under both driving modes
 * and with the stream still issuing from another thread while the engine
 * is enabled (TSan: the ring's publication to issuers). */
typedef struct early {
  slc_context *c;
  slc_stream *st;
  slc_buffer *buf;
  slc_buffer *churn_buf; /* the churn's own: its streams are not ordered
                          * with st (each is ordered with the next by its
                          * destroy's sync) */
  atomic_long n;
  atomic_int go, fail;
  int ops;
} early;

/* Streams created and dropped while the engine is enabled (the streams
 * mutex): each gets an op (no keep) and is destroyed by its last unref. */
static void *early_churn(void *arg) {
  early *E = arg;
  while (!atomic_load(&E->go)) sched_yield();
  for (int i = 0; i < 20; i++) {
    slc_stream *t;
    if (slc_stream_create(E->c, 0, 0, &t) != LDG_OK) {
      atomic_store(&E->fail, 1);
      return NULL;
    }
    if (slc_memset_d8_async(t, slc_buffer_dptr(E->churn_buf), 2, 64, NULL) !=
        LDG_OK)
      atomic_store(&E->fail, 1);
    slc_stream_unref(t);
  }
  return NULL;
}

static void *early_issuer(void *arg) {
  early *E = arg;
  slc_hold h = {{count_keep, &E->n}, NULL, 0, NULL, 0};
  while (!atomic_load(&E->go)) sched_yield();
  for (int i = 0; i < E->ops; i++)
    if (slc_memset_d8_async(E->st, slc_buffer_dptr(E->buf), 1, 64, &h) !=
        LDG_OK)
      atomic_store(&E->fail, 1);
  return NULL;
}

static int existing_streams(bool thread) {
  hd_config hc = {1, 50};
  CHECK(hd_install(&g_drv, &hc) == 0);
  slc_context *c;
  CHECK_RC(slc_context_create(&g_drv, &c), LDG_OK);
  early E = {.c = c, .ops = SANITIZED ? 50 : 200};
  CHECK_RC(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &E.st), LDG_OK);
  slc_stream *gone; /* created and gone before: not driven, nothing left */
  CHECK_RC(slc_stream_create(c, 0, 0, &gone), LDG_OK);
  slc_stream_unref(gone);
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &E.buf), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 0, 64, &E.churn_buf), LDG_OK);
  slc_hold h = {{count_keep, &E.n}, NULL, 0, NULL, 0};
  for (int i = 0; i < 3; i++)
    CHECK_RC(slc_memset_d8_async(E.st, slc_buffer_dptr(E.buf), 1, 64, &h),
             LDG_OK);
  slc_stream_progress sp;
  CHECK_RC(slc_stream_progress_get(E.st, &sp), LDG_OK);
  CHECK(!sp.engine_driven);
  pthread_t th, churn;
  CHECK(pthread_create(&th, NULL, early_issuer, &E) == 0);
  CHECK(pthread_create(&churn, NULL, early_churn, &E) == 0);
  atomic_store(&E.go, 1);
  slc_engine_config cfg = {.thread = thread, .marker_every_ops = 4};
  CHECK_RC(slc_engine_enable(c, &cfg), LDG_OK);
  CHECK_RC(slc_stream_progress_get(E.st, &sp), LDG_OK);
  CHECK(sp.engine_driven);
  pthread_join(th, NULL);
  pthread_join(churn, NULL);
  CHECK(atomic_load(&E.fail) == 0);
  /* Nobody synchronises: only the engine can release these. */
  if (wait_for(c, &E.n, 3 + E.ops, !thread)) return 1;
  slc_engine_stats es;
  if (wait_keeps_run(c, (uint64_t)(3 + E.ops + 20), &es)) return 1;
  /* ENQUEUE: an issue overtaken by the engine's release (rare, possible). */
  /* + the churn's 20 ops (NULL keeps: counted too), released by their
   * stream's destroy, or by the engine or an overtaken enqueue. */
  CHECK(es.keeps_run == (uint64_t)(3 + E.ops + 20));
  CHECK(es.keeps_by_cause[SLC_CAUSE_SYNC] == 0 &&
        es.keeps_by_cause[SLC_CAUSE_EVENT] == 0);
  CHECK(es.keeps_by_cause[thread ? SLC_CAUSE_ENGINE : SLC_CAUSE_POLL] +
            es.keeps_by_cause[SLC_CAUSE_ENQUEUE] +
            es.keeps_by_cause[SLC_CAUSE_DESTROY] ==
        (uint64_t)(3 + E.ops + 20));
  CHECK(es.keeps_by_cause[SLC_CAUSE_DESTROY] <= 20);
  CHECK(es.markers_done >= 1);
  CHECK_RC(slc_buffer_free(E.buf), LDG_OK);
  CHECK_RC(slc_buffer_free(E.churn_buf), LDG_OK);
  slc_stream_unref(E.st);
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0 && es.markers_pending == 0);
  return teardown(c);
}

static int t_existing_streams(void) {
  return existing_streams(true) || existing_streams(false);
}


/* The legacy default stream (PyTorch's stream 0) adopted per device: work a
 * "runtime" issues on NULL is recorded and released by the engine, by a
 * stream sync and by a device sync; the layer's own calls on it reach the
 * same driver stream (data checked); events order another stream after
 * it; destroying the object leaves the driver's stream alone. */
static int t_adopt_legacy(void) {
  slc_context *c;
  /* No engine thread: releases happen only where this test polls or
   * synchronises, so each step's release is this thread's, deterministic. */
  slc_engine_config cfg = {.thread = false, .marker_every_ops = 1};
  if (setup(&c, 200, &cfg)) return 1;
  const slc_driver *d = slc_context_driver(c);
  slc_stream *s, *s0;
  CHECK_RC(slc_stream_adopt_legacy(c, 1, &s), LDG_OK);
  CHECK_RC(slc_stream_adopt_legacy(c, 0, &s0), LDG_OK);
  CHECK(slc_stream_is_adopted(s) && slc_stream_device(s) == 1);
  CHECK(slc_stream_device(s0) == 0 && s0 != s);
  CHECK(slc_stream_handle(s) == CU_STREAM_LEGACY);
  CHECK(!ldg_stream_is_nonblocking(slc_stream_ledger(s)));
  slc_buffer *staging, *back, *dev;
  CHECK_RC(slc_buffer_alloc_host(c, WORDS * 4, &staging), LDG_OK);
  CHECK_RC(slc_buffer_alloc_host(c, WORDS * 4, &back), LDG_OK);
  CHECK_RC(slc_buffer_alloc_device(c, 1, WORDS * 4, &dev), LDG_OK);
  unsigned *in = slc_buffer_host(staging), *out = slc_buffer_host(back);
  for (unsigned i = 0; i < WORDS; i++) in[i] = 7u * i + 1;
  /* "The runtime" copies on stream 0 of device 1, then we record it. */
  hd_hold(true);
  CHECK_RC(slc_device_make_current(c, 1), LDG_OK);
  CHECK(d->pfn_cuMemcpyHtoDAsync(slc_buffer_dptr(dev), in, WORDS * 4, NULL) ==
        CUDA_SUCCESS);
  atomic_long kept = 0;
  uint64_t ids[] = {slc_buffer_id(staging)};
  slc_hold h = {{count_keep, &kept}, ids, 1, NULL, 0};
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK);
  CHECK_RC(slc_buffer_try_free(staging), LDG_EBUSY);
  hd_hold(false);
  if (wait_for(c, &kept, 1, true)) return 1; /* the engine's marker */
  CHECK(!slc_buffer_held(staging));
  /* The layer's own copy on the object runs after it (same driver stream). */
  CHECK_RC(slc_buf_copy_async(s, back, 0, dev, 0, WORDS * 4, NULL), LDG_OK);
  CHECK_RC(slc_stream_synchronize(s), LDG_OK);
  CHECK(!slc_buffer_held(back));
  for (unsigned i = 0; i < WORDS; i++) CHECK(out[i] == 7u * i + 1);
  /* A device sync covers it as any stream of the device. */
  hd_hold(true);
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK);
  CHECK(atomic_load(&kept) == 1);
  hd_hold(false);
  CHECK_RC(slc_device_synchronize(c, 1), LDG_OK);
  CHECK(atomic_load(&kept) == 2);
  /* An event orders another stream after it; that stream's sync releases
   * it transitively. */
  slc_stream *other;
  slc_event *ev;
  CHECK_RC(slc_stream_create(c, 1, SLC_STREAM_NONBLOCKING, &other), LDG_OK);
  CHECK_RC(slc_event_create(c, 1, &ev), LDG_OK);
  hd_hold(true);
  CHECK_RC(slc_stream_record_external(s, &h), LDG_OK);
  CHECK_RC(slc_event_record(ev, s), LDG_OK);
  CHECK_RC(slc_stream_wait_event(other, ev), LDG_OK);
  hd_hold(false);
  CHECK_RC(slc_stream_synchronize(other), LDG_OK);
  CHECK(atomic_load(&kept) == 3);
  CHECK_RC(slc_event_destroy(ev), LDG_OK);
  slc_stream_unref(other);
  /* Destroyed in the layer; the driver's stream 0 goes on. */
  CHECK_RC(slc_stream_destroy(s), LDG_OK);
  CHECK_RC(slc_stream_record_external(s, NULL), LDG_EDESTROYED);
  slc_stream_unref(s);
  slc_stream_unref(s0);
  CHECK_RC(slc_device_make_current(c, 1), LDG_OK);
  CHECK(d->pfn_cuStreamSynchronize(NULL) == CUDA_SUCCESS);
  CHECK_RC(slc_buffer_try_free(staging), LDG_OK);
  CHECK_RC(slc_buffer_try_free(back), LDG_OK);
  CHECK_RC(slc_buffer_try_free(dev), LDG_OK);
  /* Bad input. */
  slc_stream *x = NULL;
  CHECK_RC(slc_stream_adopt_legacy(NULL, 0, &x), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt_legacy(c, 0, NULL), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt_legacy(c, -1, &x), LDG_EINVAL);
  CHECK_RC(slc_stream_adopt_legacy(c, g_devices, &x), LDG_EINVAL);
  char msg[32];
  snprintf(msg, sizeof(msg), "device %d of %d", g_devices, g_devices);
  CHECK(strstr(slc_last_error_message(), msg) != NULL);
  CHECK_RC(slc_stream_adopt(c, NULL, &x), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "slc_stream_adopt_legacy") != NULL);
  CHECK_RC(slc_stream_adopt(c, CU_STREAM_PER_THREAD, &x), LDG_EINVAL);
  CHECK(x == NULL);
  return teardown(c);
}

/* ---- One stream polled ---------------------------------------------------- */

/* slc_engine_poll_stream releases its stream only, on the calling thread
 * (no engine thread here), and refuses a NULL or not engine-driven stream. */
static int t_poll_stream(void) {
  hd_config hc = {g_devices, 0};
  CHECK(hd_install(&g_drv, &hc) == 0);
  slc_context *c;
  CHECK_RC(slc_context_create(&g_drv, &c), LDG_OK);
  slc_stream *undriven; /* no engine on the context yet */
  CHECK_RC(slc_stream_create(c, 0, 0, &undriven), LDG_OK);
  CHECK_RC(slc_engine_poll_stream(undriven, NULL), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "not engine-driven") != NULL);
  slc_engine_config cfg = {.thread = false};
  CHECK_RC(slc_engine_enable(c, &cfg), LDG_OK);
  size_t released = 99;
  CHECK_RC(slc_engine_poll_stream(NULL, &released), LDG_EINVAL);
  CHECK(released == 0);
  slc_stream *a, *b;
  CHECK_RC(slc_stream_create(c, 0, 0, &a), LDG_OK);
  CHECK_RC(slc_stream_create(c, 0, 0, &b), LDG_OK);
  atomic_long na = 0, nb = 0;
  slc_hold ha = {{count_keep, &na}, NULL, 0, NULL, 0};
  slc_hold hb = {{count_keep, &nb}, NULL, 0, NULL, 0};
  CHECK_RC(slc_stream_record_external(a, &ha), LDG_OK);
  CHECK_RC(slc_stream_record_external(b, &hb), LDG_OK);
  CHECK_RC(slc_device_make_current(c, 0), LDG_OK);
  /* Polls place a tail marker, then find it done (the raw sync lets the
   * executor reach it without releasing anything). */
  for (int i = 0; i < 20000 && atomic_load(&na) == 0; i++) {
    CHECK_RC(slc_engine_poll_stream(a, &released), LDG_OK);
    CHECK(g_drv.pfn_cuStreamSynchronize(slc_stream_handle(a)) ==
          CUDA_SUCCESS);
    CHECK(g_drv.pfn_cuStreamSynchronize(slc_stream_handle(b)) ==
          CUDA_SUCCESS);
  }
  CHECK(atomic_load(&na) == 1);
  CHECK(atomic_load(&nb) == 0); /* b was not polled, so not released */
  CHECK_RC(slc_stream_synchronize(b), LDG_OK);
  CHECK(atomic_load(&nb) == 1);
  /* Counted by cause: a's keep under POLL, b's under SYNC. */
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.keeps_by_cause[SLC_CAUSE_POLL] == 1 &&
        es.keeps_by_cause[SLC_CAUSE_SYNC] == 1 && es.keeps_run == 2);
  slc_stream_unref(undriven);
  slc_stream_unref(a);
  slc_stream_unref(b);
  return teardown(c);
}
/* ---- Bad input -------------------------------------------------------------- */

static int t_bad_input(void) {
  hd_config hc = {1, 0};
  CHECK(hd_install(&g_drv, &hc) == 0);
  slc_context *c;
  CHECK_RC(slc_context_create(&g_drv, &c), LDG_OK);
  slc_stream *before;
  CHECK_RC(slc_stream_create(c, 0, 0, &before), LDG_OK);
  CHECK_RC(slc_engine_enable(NULL, NULL), LDG_EINVAL);
  CHECK_RC(slc_engine_poll(c, NULL), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "not enabled") != NULL);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_EINVAL);
  slc_engine_config bad = {.markers_per_stream = 48};
  CHECK_RC(slc_engine_enable(c, &bad), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "power of two") != NULL);
  bad.markers_per_stream = 8192;
  CHECK_RC(slc_engine_enable(c, &bad), LDG_EINVAL);
  bad.markers_per_stream = 0;
  bad.wait = (slc_engine_wait)7;
  CHECK_RC(slc_engine_enable(c, &bad), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "wait policy 7") != NULL);
  bad.wait = SLC_ENGINE_WAIT_ADAPTIVE;
  bad.placement = (slc_engine_placement)3;
  CHECK_RC(slc_engine_enable(c, &bad), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "placement 3") != NULL);
  CHECK_RC(slc_engine_enable(c, NULL), LDG_OK);
  CHECK_RC(slc_engine_enable(c, NULL), LDG_EBUSY);
  CHECK_RC(slc_engine_stats_get(c, NULL), LDG_EINVAL);
  CHECK_RC(slc_engine_poll(NULL, NULL), LDG_EINVAL);
  CHECK_RC(slc_stream_progress_get(NULL, NULL), LDG_EINVAL);
  CHECK_RC(slc_stream_engine_error(NULL, NULL), LDG_EINVAL);
  /* A stream that existed before is driven too (t_existing_streams). */
  slc_stream_progress sp;
  CHECK_RC(slc_stream_progress_get(before, &sp), LDG_OK);
  CHECK(sp.engine_driven && sp.enqueued_mark == 0);
  slc_stream *after;
  CHECK_RC(slc_stream_create(c, 0, 0, &after), LDG_OK);
  CHECK_RC(slc_stream_progress_get(after, &sp), LDG_OK);
  CHECK(sp.engine_driven && sp.enqueued_mark == 0 && sp.markers_pending == 0);
  size_t released = 99;
  CHECK_RC(slc_engine_poll(c, &released), LDG_OK);
  CHECK(released == 0);
  CHECK(slc_keep_status() == LDG_OK);
  slc_stream_unref(before);
  slc_stream_unref(after);
  return teardown(c);
}

/* ---- Torture ------------------------------------------------------------------
 * Request threads, each with its own slots, creating and destroying streams
 * as they go (sometimes with work pending: the destroy synchronises), some
 * polling, the engine thread running, a snapshot thread reading counters. */

typedef struct torture {
  slc_context *c;
  loop L;
  atomic_long issued;
  atomic_int stop_snap, failed, next_idx;
  int iters;
} torture;

static void *torture_thread(void *arg) {
  torture *T = arg;
  /* Half the threads also poll while they wait for a slot. */
  const bool poll = atomic_fetch_add(&T->next_idx, 1) % 2 == 1;
  enum { K = 3 };
  slot slots[K];
  for (int i = 0; i < K; i++)
    if (slot_init(&T->L, &slots[i])) goto fail;
  for (int round = 0; round < T->iters; round++) {
    slc_stream *st;
    if (slc_stream_create(T->c, round % 2, SLC_STREAM_NONBLOCKING, &st) !=
        LDG_OK)
      goto fail;
    slc_stream_unref(st); /* churn: created and destroyed under the engine */
    if (slc_stream_create(T->c, 0, SLC_STREAM_NONBLOCKING, &st) != LDG_OK)
      goto fail;
    for (int i = 0; i < 8; i++) {
      slot *s = &slots[i % K];
      for (long w = 0; atomic_load(&s->busy); w++) {
        if (poll) (void)slc_engine_poll(T->c, NULL);
        sleep_us(10);
        if (w > 2000000) goto fail;
      }
      if (request(&T->L, st, s, (uint32_t)(round * 8 + i + 1))) goto fail;
      atomic_fetch_add(&T->issued, 2);
    }
    /* Destroy with work possibly pending: the sync releases the rest. */
    if (slc_stream_destroy(st) != LDG_OK) goto fail;
    slc_stream_unref(st);
  }
  /* A destroy's sync returns once every entry's release began: a keep may
   * still be running on the engine thread (ldg_release: concurrent releases
   * split the work). Wait for each slot's keeps before freeing its
   * buffers and leaving (the slots live on this stack). */
  for (int i = 0; i < K; i++)
    for (long w = 0; atomic_load(&slots[i].busy); w++) {
      sleep_us(10);
      if (w > 2000000) goto fail;
    }
  for (int i = 0; i < K; i++)
    if (slot_fini(&slots[i])) goto fail;
  return NULL;
fail:
  atomic_store(&T->failed, 1);
  return NULL;
}

static void *snapshot_thread(void *arg) {
  torture *T = arg;
  while (!atomic_load(&T->stop_snap)) {
    slc_engine_stats es;
    if (slc_engine_stats_get(T->c, &es) != LDG_OK) atomic_store(&T->failed, 1);
    sleep_us(200);
  }
  return NULL;
}

static int run_torture(slc_engine_placement placement) {
  slc_context *c;
  slc_engine_config cfg = {
      .thread = true, .marker_every_ops = 2, .placement = placement};
  if (setup(&c, 20, &cfg)) return 1;
  torture T = {.c = c, .iters = SANITIZED ? 6 : 25};
  T.L.c = c;
  T.L.issuer = pthread_self();
  enum { THREADS = 4 };
  pthread_t th[THREADS], snap;
  CHECK(pthread_create(&snap, NULL, snapshot_thread, &T) == 0);
  for (int i = 0; i < THREADS; i++)
    CHECK(pthread_create(&th[i], NULL, torture_thread, &T) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  atomic_store(&T.stop_snap, 1);
  pthread_join(snap, NULL);
  CHECK(atomic_load(&T.failed) == 0);
  CHECK(atomic_load(&T.L.released) == atomic_load(&T.issued));
  CHECK(atomic_load(&T.L.mismatches) == 0);
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(c, &es), LDG_OK);
  CHECK(es.events_live == 0 && es.markers_pending == 0);
  return teardown(c);
}

static int t_torture(void) {
  return run_torture(SLC_ENGINE_PLACE_ISSUER) ||
         run_torture(SLC_ENGINE_PLACE_ENGINE);
}

/* ---- Main -------------------------------------------------------------------- */

static const test_case tests[] = {
    {"thread_serving", t_thread_serving,
     "engine thread recycles staging buffers, no sync, data checked"},
    {"poll_serving", t_poll_serving,
     "slc_engine_poll from the request loop does the same"},
    {"engine_places", t_engine_places,
     "SLC_ENGINE_PLACE_ENGINE: the thread records every marker, data checked"},
    {"free_in_keep", t_free_in_keep,
     "keeps free their staging buffer (ASan: any early release)"},
    {"tail_marker", t_tail_marker,
     "work after the last marker is released by a tail marker"},
    {"wait_counters", t_wait_counters,
     "both waits park when idle; an issue or a deferred record wakes the "
     "parked thread"},
    {"park_owned", t_park_owned,
     "an owned stream's issue wakes the parked thread: rounds at every "
     "point of its park, no keep lost"},
    {"keep_reenters", t_keep_reenters,
     "keeps on the engine thread issue work and poll"},
    {"stalled_engine", t_stalled_engine,
     "a keep stuck on the engine thread blocks no issuer, no other stream"},
    {"failed_records_queries", t_failed_records_queries,
     "failed records and transient query failures only delay releases"},
    {"sticky_error", t_sticky_error,
     "a device error is reported once, releases nothing, keeps told"},
    {"keeps_by_cause", t_keeps_by_cause,
     "keeps counted exactly by cause: sync, event, poll, destroy, nested"},
    {"keeps_by_engine", t_keeps_by_engine,
     "the engine thread's releases count under SLC_CAUSE_ENGINE"},
    {"existing_streams", t_existing_streams,
     "streams created before slc_engine_enable are driven, issuing meanwhile"},
    {"sticky_record", t_sticky_record,
     "a record failing with a sticky error is reported once, by a poll"},
    {"bad_input", t_bad_input, "every new call refuses bad arguments"},
    {"poll_stream", t_poll_stream,
     "slc_engine_poll_stream releases its stream only, on the caller"},
    {"adopt_external", t_adopt_external,
     "an adopted stream, work issued by others recorded, never destroyed"},
    {"adopt_legacy", t_adopt_legacy,
     "the legacy default stream adopted per device: recorded, released"},
    {"adopt_limbo", t_adopt_limbo,
     "an adopted stream kept after a failed sync: finished, never destroyed"},
    {"marker_destroy_fails", t_marker_destroy_fails,
     "a marker event whose destroy fails twice leaves events_live"},
    {"buffer_ops_hold", t_buffer_ops_hold,
     "slc_buf_* calls hold their buffers: no free under a pending copy"},
    {"buffer_ops_bad_input", t_buffer_ops_bad_input,
     "slc_buf_* refuse bad buffers and ranges, issuing nothing"},
    {"torture", t_torture,
     "request threads, both driving modes, streams created and destroyed"},
};

int main(int argc, char **argv) {
  if (argc > 1 && strncmp(argv[1], "--devices=", 10) == 0) {
    g_devices = atoi(argv[1] + 10);
    if (g_devices < 2 || g_devices > HD_MAX_DEVICES) {
      fprintf(stderr, "--devices: 2 .. %d\n", HD_MAX_DEVICES);
      return 2;
    }
    argc--;
    argv++;
  }
  const char *only = argc > 1 ? argv[1] : NULL;
  return run_test_table("engine_test", tests, TEST_COUNT(tests), only);
}
