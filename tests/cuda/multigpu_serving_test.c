/*
 * multigpu_serving_test: request threads on 8 simulated devices (the host
 * executor), with a device pool and a pinned pool per device and the
 * progress engine (an engine and thread per device), as bench/pool_bench.c
 * --devices runs on a GPU node (issue 13), here with every result checked
 * and every block accounted for, under ASan and TSan too:
 *   grouped  16 threads, thread i serving device i % 8 on its own stream;
 *   spread   8 threads, each with a stream on every device, sending its
 *            requests to the devices in turn (a context switch each).
 * A request: a pinned staging block and a device block from the pools of
 * its device, fill, copy in, add1, copy back; both blocks freed at once,
 * with no synchronise; the copy back's keep (the engine's) checks the data
 * and frees the request's slot. At the end: no wrong result, no block
 * allocated or held, no free under pending work (hd_early_frees), nothing
 * of the executor left.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "pool/sl_pool.h"
#include "tests/cuda/kernels.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define REQUESTS 24
#else
#define REQUESTS 80
#endif
#define DEVICES 8
#define WORDS 256
#define SLOTS 4 /* requests in flight per thread */

#define CHECK(c)                                                           \
  do {                                                                     \
    if (!(c)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, \
              #c, slc_last_error_message());                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static slc_context *ctx;
static slp_pool *dev_pool[DEVICES], *host_pool[DEVICES];
static CUfunction add1[DEVICES];
static atomic_long wrong, checked;

typedef struct request {
  const uint32_t *staging;
  uint32_t seed;
  atomic_int busy;
} request;

/* The copy back completed (on the engine thread): check, free the slot. */
static void request_done(void *arg) {
  request *r = arg;
  for (unsigned i = 0; i < WORDS; i++)
    if (r->staging[i] != r->seed + i + 1) {
      atomic_fetch_add(&wrong, 1);
      break;
    }
  atomic_fetch_add(&checked, 1);
  /* Release: pairs with the request thread's acquire before reuse. */
  atomic_store_explicit(&r->busy, 0, memory_order_release);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits for the slot's keep; a bound against a hang, not a timing check. */
static void wait_slot(request *r) {
  double t0 = now_s();
  while (atomic_load_explicit(&r->busy, memory_order_acquire)) {
    CHECK(now_s() - t0 < 60);
    sched_yield();
  }
}

typedef struct worker {
  int id;
  bool spread;
  pthread_t th;
} worker;

static void *serve(void *arg) {
  worker *w = arg;
  const int ns = w->spread ? DEVICES : 1;
  slc_stream *s[DEVICES];
  int dev[DEVICES];
  for (int k = 0; k < ns; k++) {
    dev[k] = w->spread ? k : w->id % DEVICES;
    CHECK(slc_stream_create(ctx, dev[k], SLC_STREAM_NONBLOCKING, &s[k]) ==
          LDG_OK);
  }
  request rq[SLOTS];
  memset(rq, 0, sizeof(rq));
  for (unsigned n = 0; n < REQUESTS; n++) {
    request *r = &rq[n % SLOTS];
    wait_slot(r);
    const int k = (int)(n % (unsigned)ns), d = dev[k];
    slp_block *stg, *blk;
    CHECK(slp_alloc(host_pool[d], s[k], WORDS * 4, &stg) == LDG_OK);
    CHECK(slp_alloc(dev_pool[d], s[k], WORDS * 4, &blk) == LDG_OK);
    uint32_t *p = slp_block_host(stg);
    r->seed = (uint32_t)w->id * 100003u + n * 7u;
    r->staging = p;
    for (unsigned i = 0; i < WORDS; i++) p[i] = r->seed + i;
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    CHECK(slp_copy_async(s[k], blk, 0, stg, 0, WORDS * 4, NULL) == LDG_OK);
    CUdeviceptr dp = slp_block_dptr(blk);
    unsigned nw = WORDS;
    CHECK(slp_launch(s[k], add1[d], (slc_dim3){1, 1, 1}, (slc_dim3){256, 1, 1},
                     0, (void *[]){&dp, &nw}, &blk, 1, NULL) == LDG_OK);
    CHECK(slp_copy_async(s[k], stg, 0, blk, 0, WORDS * 4,
                         &(slc_hold){.keep = {request_done, r}}) == LDG_OK);
    CHECK(slp_free(stg) == LDG_OK);
    CHECK(slp_free(blk) == LDG_OK);
  }
  for (int i = 0; i < SLOTS; i++) wait_slot(&rq[i]);
  for (int k = 0; k < ns; k++) {
    CHECK(slc_stream_destroy(s[k]) == LDG_OK);
    slc_stream_unref(s[k]);
  }
  return NULL;
}

static void run(const char *what, int threads, bool spread) {
  long before = atomic_load(&checked);
  worker w[16];
  for (int i = 0; i < threads; i++) {
    w[i] = (worker){i, spread, 0};
    CHECK(pthread_create(&w[i].th, NULL, serve, &w[i]) == 0);
  }
  for (int i = 0; i < threads; i++) pthread_join(w[i].th, NULL);
  long done = atomic_load(&checked) - before;
  printf("%s: %d threads, %ld requests checked\n", what, threads, done);
  CHECK(done == (long)threads * REQUESTS);
  for (int d = 0; d < DEVICES; d++) { /* every block came back */
    slp_stats sd, sh;
    CHECK(slp_stats_get(dev_pool[d], &sd) == LDG_OK);
    CHECK(slp_stats_get(host_pool[d], &sh) == LDG_OK);
    CHECK(sd.allocated_bytes == 0 && sh.allocated_bytes == 0);
    CHECK(sd.allocs > 0 && sh.allocs > 0); /* each device served */
  }
}

int main(void) {
  slc_driver drv;
  CHECK(hd_install(&drv, &(hd_config){.devices = DEVICES}) == 0);
  slc_test_register_host_kernels();
  CHECK(slc_context_create(&drv, &ctx) == LDG_OK);
  CHECK(slc_device_count(ctx) == DEVICES);
  CHECK(slc_engine_enable(ctx, NULL) == LDG_OK); /* an engine per GPU */
  slc_module *m[DEVICES];
  for (int d = 0; d < DEVICES; d++) {
    CHECK(slp_pool_create_device(ctx, d, NULL, &dev_pool[d]) == LDG_OK);
    CHECK(slp_pool_create_host(ctx, NULL, &host_pool[d]) == LDG_OK);
    CHECK(slc_module_load(ctx, d, slc_test_ptx, &m[d]) == LDG_OK);
    CHECK(slc_module_function(m[d], "add1", &add1[d]) == LDG_OK);
  }
  run("grouped", 16, false);
  run("spread", 8, true);
  CHECK(atomic_load(&wrong) == 0);
  for (int d = 0; d < DEVICES; d++) {
    CHECK(slp_pool_destroy(dev_pool[d]) == LDG_OK);
    CHECK(slp_pool_destroy(host_pool[d]) == LDG_OK);
    CHECK(slc_module_unload(m[d]) == LDG_OK);
  }
  CHECK(slc_context_destroy(ctx) == LDG_OK);
  CHECK(hd_early_frees() == 0);
  long leaked = hd_shutdown();
  CHECK(leaked == 0);
  printf("PASS\n");
  return 0;
}
