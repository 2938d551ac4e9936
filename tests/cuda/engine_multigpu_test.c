/*
 * engine_multigpu_test: the progress engine on 8 simulated devices (the
 * host executor), one engine per device (issue 13; sl_engine.h, DEVICES):
 *
 *   ctx_switches_poll    slc_engine_poll over 2 streams per device, every
 *                        marker pending: context switches (cuCtxSetCurrent)
 *                        counted per poll, at most one per device, not one
 *                        per stream
 *   ctx_switches_thread  the engine threads polling pending markers: no
 *                        context switch at all once each thread made its
 *                        device's context current (one_thread: one per
 *                        device per poll)
 *   consumer_per_device  while one device's consumer is inside a query,
 *                        another thread's slc_engine_poll_stream of another
 *                        device's stream releases it (the consumer flag is
 *                        per device: it was the context's)
 *   stalled_device       a keep stuck on device 0's engine thread does not
 *                        hold up device 1's releases by its thread
 *   keep_threads         each device's keeps run on that device's thread,
 *                        one thread per device; with one_thread, one thread
 *                        for all; the per-device stats sum to the context's
 *   device_stats_bad_input  slc_engine_device_stats_get refuses bad input
 *
 * Counts, not times: the waits give up after 20 s (a hang guard, reported
 * as a failure). Each test gets a fresh executor and context and must leave
 * nothing. Exit 0 when every test passed.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "tests/testing/check.h"

#define DEVICES 8

static slc_driver g_drv;

static void sleep_us(unsigned us) {
  struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Waits until *v reaches want (a hang guard: 20 s). */
static int wait_for(atomic_long *v, long want) {
  for (long i = 0; i < 200000; i++) {
    if (atomic_load(v) >= want) return 0;
    sleep_us(100);
  }
  fprintf(stderr, "  gave up waiting: %ld of %ld\n", atomic_load(v), want);
  return 1;
}

static void count_keep(void *ctx) { atomic_fetch_add((atomic_long *)ctx, 1); }

/* A context on DEVICES devices, with `per` streams per device, each with
 * its own buffer (two unordered streams must not write one block). Streams
 * are created round-robin over the devices, so that neighbours on any list
 * of them differ in device. */
typedef struct rig {
  slc_context *c;
  int per;
  slc_stream *s[2 * DEVICES];
  slc_buffer *b[2 * DEVICES];
} rig;

static int rig_open(rig *r, int per, const slc_engine_config *cfg) {
  memset(r, 0, sizeof(*r));
  r->per = per;
  hd_config hc = {DEVICES, 0};
  CHECK(hd_install(&g_drv, &hc) == 0);
  CHECK_RC(slc_context_create(&g_drv, &r->c), LDG_OK);
  CHECK_RC(slc_engine_enable(r->c, cfg), LDG_OK);
  for (int i = 0; i < per * DEVICES; i++) {
    CHECK_RC(slc_stream_create(r->c, i % DEVICES, SLC_STREAM_NONBLOCKING,
                               &r->s[i]),
             LDG_OK);
    CHECK_RC(slc_buffer_alloc_device(r->c, i % DEVICES, 64, &r->b[i]), LDG_OK);
  }
  return 0;
}

static int rig_issue(rig *r, int i, void (*fn)(void *), void *arg) {
  slc_hold h = {{fn, arg}, NULL, 0, NULL, 0};
  return slc_memset_d8_async(r->s[i], slc_buffer_dptr(r->b[i]), 1, 64, &h) ==
                 LDG_OK
             ? 0
             : 1;
}

static int rig_close(rig *r) {
  for (int i = 0; i < r->per * DEVICES; i++) {
    CHECK_RC(slc_stream_synchronize(r->s[i]), LDG_OK);
    slc_stream_unref(r->s[i]);
    CHECK_RC(slc_buffer_free(r->b[i]), LDG_OK);
  }
  slc_engine_stats es;
  CHECK_RC(slc_engine_stats_get(r->c, &es), LDG_OK);
  CHECK(es.events_live == 0 && es.markers_pending == 0);
  CHECK_RC(slc_context_destroy(r->c), LDG_OK);
  long leaked = hd_shutdown();
  if (leaked != 0) fprintf(stderr, "  executor: %ld objects leaked\n", leaked);
  CHECK(leaked == 0);
  return 0;
}

/* ---- Context switches ----------------------------------------------------- */

static int t_ctx_switches_poll(void) {
  rig r;
  /* The issuer places a marker per op: every stream has one pending. */
  slc_engine_config cfg = {.thread = false,
                           .marker_every_ops = 1,
                           .placement = SLC_ENGINE_PLACE_ISSUER};
  if (rig_open(&r, 2, &cfg)) return 1;
  atomic_long n = 0;
  hd_hold(true); /* nothing completes: every poll queries every stream */
  for (int i = 0; i < 2 * DEVICES; i++)
    if (rig_issue(&r, i, count_keep, &n)) return 1;
  const long polls = 10;
  hd_calls_reset();
  for (long i = 0; i < polls; i++) CHECK_RC(slc_engine_poll(r.c, NULL), LDG_OK);
  long sets = hd_calls("cuCtxSetCurrent"), gets = hd_calls("cuCtxGetCurrent");
  long queries = hd_calls("cuEventQuery");
  printf("  %d streams on %d devices, per slc_engine_poll: %.1f "
         "cuCtxSetCurrent, %.1f cuCtxGetCurrent, %.1f cuEventQuery\n",
         2 * DEVICES, DEVICES, (double)sets / polls, (double)gets / polls,
         (double)queries / polls);
  CHECK(queries == polls * 2 * DEVICES);
  CHECK(atomic_load(&n) == 0);
  /* One switch per device, not per stream. */
  CHECK(sets <= polls * DEVICES);
  CHECK(gets <= polls * DEVICES);
  hd_hold(false);
  return rig_close(&r);
}

static int ctx_switches_thread(bool one_thread) {
  rig r;
  /* The threads place the markers (the default placement). */
  slc_engine_config cfg = {.thread = true, .one_thread = one_thread};
  if (rig_open(&r, 2, &cfg)) return 1;
  atomic_long n = 0;
  hd_hold(true);
  for (int i = 0; i < 2 * DEVICES; i++)
    if (rig_issue(&r, i, count_keep, &n)) return 1;
  /* Until every stream has its marker: the threads poll them from then on
   * (pending, never complete while held). */
  slc_engine_stats a, z;
  for (int i = 0; i < 200000; i++) {
    CHECK_RC(slc_engine_stats_get(r.c, &a), LDG_OK);
    if (a.markers_pending == 2 * DEVICES) break;
    sleep_us(100);
  }
  CHECK(a.markers_pending == 2 * DEVICES);
  /* The counts are read before the last stats: every switch counted
   * belongs to a poll counted in z (a poll is counted before it switches),
   * or to the one poll of each thread under way when a was read. */
  CHECK_RC(slc_engine_stats_get(r.c, &a), LDG_OK);
  hd_calls_reset();
  for (int i = 0; i < 200000; i++) {
    CHECK_RC(slc_engine_stats_get(r.c, &z), LDG_OK);
    if (z.polls - a.polls >= 400) break;
    sleep_us(100);
  }
  long sets = hd_calls("cuCtxSetCurrent"), gets = hd_calls("cuCtxGetCurrent");
  long queries = hd_calls("cuEventQuery");
  CHECK_RC(slc_engine_stats_get(r.c, &z), LDG_OK);
  double polls = (double)(z.polls - a.polls);
  printf("  %s, %.0f polls (each of one device's engine): %ld "
         "cuCtxSetCurrent, %ld cuCtxGetCurrent, %ld cuEventQuery\n",
         one_thread ? "one engine thread" : "an engine thread per device",
         polls, sets, gets, queries);
  CHECK(z.polls - a.polls >= 400);
  CHECK(atomic_load(&n) == 0);
  if (one_thread) {
    /* One switch per device per poll, not per stream. */
    CHECK(sets <= (long)(z.polls - a.polls) + 1);
  } else {
    /* At most the first make-current of each thread (already done while
     * placing, so none is expected): never one per stream or per poll. */
    CHECK(sets <= DEVICES);
  }
  hd_hold(false);
  if (wait_for(&n, 2 * DEVICES)) return 1;
  return rig_close(&r);
}

static int t_ctx_switches_thread(void) {
  return ctx_switches_thread(false) || ctx_switches_thread(true);
}

/* ---- The consumer flag is per device -------------------------------------- */

typedef struct other_poll {
  slc_stream *s;
  size_t released;
  int rc;
} other_poll;

static void *other_poll_main(void *arg) {
  other_poll *o = arg;
  o->rc = slc_engine_poll_stream(o->s, &o->released);
  return NULL;
}

/* Runs inside device 0's query, on its consumer: another thread polls a
 * device-1 stream, and is waited for. */
static void query_hook(void *arg) {
  pthread_t t;
  if (pthread_create(&t, NULL, other_poll_main, arg) != 0) abort();
  pthread_join(t, NULL);
}

static int t_consumer_per_device(void) {
  rig r;
  slc_engine_config cfg = {.thread = false,
                           .marker_every_ops = 1,
                           .placement = SLC_ENGINE_PLACE_ISSUER};
  if (rig_open(&r, 1, &cfg)) return 1;
  atomic_long n0 = 0, n1 = 0;
  if (rig_issue(&r, 0, count_keep, &n0) || rig_issue(&r, 1, count_keep, &n1))
    return 1;
  /* Both markers complete (raw syncs: nothing released yet). */
  for (int d = 0; d < 2; d++) {
    CHECK_RC(slc_device_make_current(r.c, d), LDG_OK);
    CHECK(g_drv.pfn_cuStreamSynchronize(slc_stream_handle(r.s[d])) ==
          CUDA_SUCCESS);
  }
  other_poll o = {r.s[1], 99, -1};
  hd_set_hook(HD_FAULT_EVENT_QUERY, query_hook, &o);
  size_t released = 0;
  CHECK_RC(slc_engine_poll_stream(r.s[0], &released), LDG_OK);
  printf("  device 0 polled: %zu released; device 1 polled meanwhile by "
         "another thread: rc %d, %zu released\n",
         released, o.rc, o.released);
  CHECK(released == 1 && atomic_load(&n0) == 1);
  CHECK(o.rc == LDG_OK);
  CHECK(o.released == 1 && atomic_load(&n1) == 1);
  return rig_close(&r);
}

/* ---- A stalled device ----------------------------------------------------- */

typedef struct stall {
  atomic_int stalled, unstall;
  atomic_long n0, n1;
  pthread_t t0, t1;
} stall;

static void stall_keep(void *arg) {
  stall *st = arg;
  st->t0 = pthread_self();
  atomic_store(&st->stalled, 1);
  while (!atomic_load(&st->unstall)) sleep_us(200);
  atomic_fetch_add(&st->n0, 1);
}

static void other_keep(void *arg) {
  stall *st = arg;
  st->t1 = pthread_self();
  atomic_fetch_add(&st->n1, 1);
}

static int t_stalled_device(void) {
  rig r;
  slc_engine_config cfg = {.thread = true};
  if (rig_open(&r, 1, &cfg)) return 1;
  stall *st = calloc(1, sizeof(*st));
  CHECK(st != NULL);
  if (rig_issue(&r, 0, stall_keep, st)) return 1;
  for (int i = 0; i < 200000 && !atomic_load(&st->stalled); i++) sleep_us(100);
  CHECK(atomic_load(&st->stalled)); /* device 0's engine thread is stuck */
  if (rig_issue(&r, 1, other_keep, st)) return 1;
  int rc = wait_for(&st->n1, 1); /* nobody polls, nobody synchronises */
  printf("  device 1's keep %s while device 0's thread is stuck in a keep\n",
         rc == 0 ? "ran" : "did not run");
  atomic_store(&st->unstall, 1);
  CHECK(rc == 0);
  CHECK(!pthread_equal(st->t0, st->t1));
  CHECK(wait_for(&st->n0, 1) == 0);
  free(st);
  return rig_close(&r);
}

/* ---- Which thread runs which device's keeps ------------------------------- */

typedef struct tkeep {
  atomic_long n;
  _Atomic(pthread_t) tid;
  atomic_int mixed; /* a keep of the device ran on another thread */
} tkeep;
static pthread_t g_main;

static void thread_keep(void *arg) {
  tkeep *k = arg;
  pthread_t self = pthread_self();
  /* Overtaken enqueues run their keep on the issuer (SLC_CAUSE_ENQUEUE):
   * not the engine's. */
  if (!pthread_equal(self, g_main)) {
    pthread_t none = 0;
    if (!atomic_compare_exchange_strong(&k->tid, &none, self) &&
        !pthread_equal(atomic_load(&k->tid), self))
      atomic_store(&k->mixed, 1);
  }
  atomic_fetch_add(&k->n, 1);
}

static int keep_threads(bool one_thread) {
  rig r;
  slc_engine_config cfg = {.thread = true, .one_thread = one_thread};
  if (rig_open(&r, 1, &cfg)) return 1;
  g_main = pthread_self();
  tkeep k[DEVICES];
  memset(k, 0, sizeof(k));
  const int ops = 20;
  for (int j = 0; j < ops; j++)
    for (int d = 0; d < DEVICES; d++)
      if (rig_issue(&r, d, thread_keep, &k[d])) return 1;
  for (int d = 0; d < DEVICES; d++)
    if (wait_for(&k[d].n, ops)) return 1;
  int distinct = 0;
  for (int d = 0; d < DEVICES; d++) {
    CHECK(atomic_load(&k[d].mixed) == 0);
    CHECK(atomic_load(&k[d].tid) != 0);
    bool seen = false;
    for (int e = 0; e < d; e++)
      seen |= pthread_equal(atomic_load(&k[e].tid), atomic_load(&k[d].tid));
    distinct += !seen;
  }
  printf("  one_thread %d: the keeps of %d devices ran on %d engine "
         "thread(s)\n",
         one_thread, DEVICES, distinct);
  CHECK(distinct == (one_thread ? 1 : DEVICES));
  /* The per-device stats sum to the context's. */
  slc_engine_stats all, dev;
  uint64_t polls = 0, done = 0, placed = 0;
  CHECK_RC(slc_engine_stats_get(r.c, &all), LDG_OK);
  for (int d = 0; d < DEVICES; d++) {
    CHECK_RC(slc_engine_device_stats_get(r.c, d, &dev), LDG_OK);
    CHECK(dev.markers_done >= 1);
    polls += dev.polls;
    done += dev.markers_done;
    placed += dev.markers_placed;
  }
  CHECK_RC(slc_engine_stats_get(r.c, &all), LDG_OK);
  CHECK(done == all.markers_done && placed == all.markers_placed);
  CHECK(polls <= all.polls);
  return rig_close(&r);
}

static int t_keep_threads(void) {
  return keep_threads(false) || keep_threads(true);
}

/* Bad input of the per-device stats. */
static int t_device_stats_bad_input(void) {
  rig r;
  slc_engine_config cfg = {.thread = false};
  hd_config hc = {DEVICES, 0};
  CHECK(hd_install(&g_drv, &hc) == 0);
  CHECK_RC(slc_context_create(&g_drv, &r.c), LDG_OK);
  slc_engine_stats es;
  CHECK_RC(slc_engine_device_stats_get(r.c, 0, &es), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "not enabled") != NULL);
  CHECK_RC(slc_engine_enable(r.c, &cfg), LDG_OK);
  CHECK_RC(slc_engine_device_stats_get(NULL, 0, &es), LDG_EINVAL);
  CHECK_RC(slc_engine_device_stats_get(r.c, 0, NULL), LDG_EINVAL);
  CHECK_RC(slc_engine_device_stats_get(r.c, -1, &es), LDG_EINVAL);
  CHECK_RC(slc_engine_device_stats_get(r.c, DEVICES, &es), LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "device 8") != NULL);
  CHECK_RC(slc_engine_device_stats_get(r.c, DEVICES - 1, &es), LDG_OK);
  CHECK(es.polls == 0 && es.markers_placed == 0);
  CHECK_RC(slc_context_destroy(r.c), LDG_OK);
  CHECK(hd_shutdown() == 0);
  return 0;
}

/* ---- Main ----------------------------------------------------------------- */

static const test_case tests[] = {
    {"ctx_switches_poll", t_ctx_switches_poll,
     "slc_engine_poll: at most one context switch per device per poll"},
    {"ctx_switches_thread", t_ctx_switches_thread,
     "engine threads: no context switch per poll"},
    {"consumer_per_device", t_consumer_per_device,
     "another device's stream is polled while one device's consumer queries"},
    {"stalled_device", t_stalled_device,
     "a keep stuck on device 0's thread holds up no release of device 1"},
    {"keep_threads", t_keep_threads,
     "one engine thread per device (one for all with one_thread)"},
    {"device_stats_bad_input", t_device_stats_bad_input,
     "slc_engine_device_stats_get refuses bad arguments"},
};

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : NULL;
  return run_test_table("engine_multigpu_test", tests, TEST_COUNT(tests), only);
}
