/*
 * pool_example_test: README.md's example of the pool ("Example: serving
 * from the pool"), kept compiling and passing against the host executor, so
 * the README stays true. Each request takes a pinned staging block and a
 * device block, copies in, runs a kernel, copies back, and frees both at
 * once: the pool holds them until the work that uses them is done, and the
 * result is checked in the keep of the copy back. No synchronise.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "pool/sl_pool.h"
#include "cuda/host_executor.h"
#include "tests/cuda/kernels.h"

#define CHECK(c)                                                           \
  do {                                                                     \
    if (!(c)) {                                                            \
      fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, \
              #c, slc_last_error_message());                               \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static atomic_int wrong, done;

/* README example begins */
#define N 1024 /* words per request */

typedef struct request {
  slp_block *staging; /* read by the keep, before the pool takes it back */
  unsigned id;
} request;

static void finished(void *p) { /* the copy back completed */
  request *r = p;
  const unsigned *out = slp_block_host(r->staging);
  for (unsigned i = 0; i < N; i++)
    if (out[i] != r->id + i + 1) atomic_fetch_add(&wrong, 1);
  atomic_fetch_add(&done, 1);
  free(r);
}

static void serve(slc_context *c, CUfunction add1, unsigned requests) {
  slc_engine_enable(c, NULL); /* an engine thread releases work as it ends */
  slp_pool *dev_pool, *pinned_pool;
  slp_pool_create_device(c, 0, NULL, &dev_pool);
  slp_pool_create_host(c, NULL, &pinned_pool);
  slc_stream *s;
  slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &s);
  for (unsigned id = 0; id < requests; id++) {
    request *r = malloc(sizeof(*r)); /* `finished` frees it */
    slp_block *staging, *dev;
    slp_alloc(pinned_pool, s, N * 4, &staging);
    slp_alloc(dev_pool, s, N * 4, &dev);
    *r = (request){staging, id};
    unsigned *in = slp_block_host(staging);
    for (unsigned i = 0; i < N; i++) in[i] = id + i;
    /* The slp_ calls hold the blocks they name: no record_stream. */
    slp_copy_async(s, dev, 0, staging, 0, N * 4, NULL);
    CUdeviceptr p = slp_block_dptr(dev);
    unsigned n = N;
    slp_launch(s, add1, (slc_dim3){N / 256, 1, 1}, (slc_dim3){256, 1, 1}, 0,
               (void *[]){&p, &n}, &dev, 1, NULL);
    slp_copy_async(s, staging, 0, dev, 0, N * 4,
                   &(slc_hold){.keep = {finished, r}});
    slp_free(dev);     /* at once: reused by the next request on s */
    slp_free(staging); /* at once: back in the pool after `finished` */
  }
  while (atomic_load(&done) != (int)requests) sched_yield();
  slp_stats st;
  slp_stats_get(pinned_pool, &st); /* memory_stats, PyTorch's names */
  printf("pinned: %llu allocs, %llu reused, peak %llu bytes reserved\n",
         (unsigned long long)st.allocs, (unsigned long long)st.reuses,
         (unsigned long long)st.reserved_peak);
  slc_stream_destroy(s);      /* synchronises: every block is back */
  slp_pool_destroy(dev_pool); /* refuses while blocks are still out */
  slp_pool_destroy(pinned_pool);
  slc_stream_unref(s);
}
/* README example ends */

int main(void) {
  slc_driver drv;
  hd_config cfg = {1, 20}; /* the executor's copies start 20 us late */
  CHECK(hd_install(&drv, &cfg) == 0);
  slc_test_register_host_kernels();
  slc_context *c;
  CHECK(slc_context_create(&drv, &c) == LDG_OK);
  slc_module *m;
  CUfunction add1;
  CHECK(slc_module_load(c, 0, slc_test_ptx, &m) == LDG_OK);
  CHECK(slc_module_function(m, "add1", &add1) == LDG_OK);
  serve(c, add1, 200);
  CHECK(atomic_load(&wrong) == 0);
  CHECK(slc_module_unload(m) == LDG_OK);
  CHECK(slc_context_destroy(c) == LDG_OK); /* refuses if a pool or stream leaked */
  CHECK(hd_shutdown() == 0);
  printf("pool_example_test: 200 requests served, results correct\n");
  return 0;
}
