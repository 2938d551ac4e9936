/*
 * serving_example_test: the serving loop of README.md ("Example: a serving
 * loop on the layer"), kept compiling and passing against the host
 * executor, so the README stays true. A request thread fills a pinned
 * staging buffer, copies it in, runs a kernel, copies the result out, and
 * recycles the staging buffer as soon as the progress engine says the copy
 * that read it completed — it never synchronises. Checks every result.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
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

static atomic_int wrong;

/* README example begins */
#define N 1024 /* words per request */

typedef struct slot {
  slc_buffer *staging, *out; /* pinned host memory */
  atomic_int busy;           /* 2 keeps to go: the copy in, the copy out */
  unsigned id;
} slot;

static void copied_in(void *p) { /* the staging buffer may be refilled */
  atomic_fetch_sub(&((slot *)p)->busy, 1);
}

static void copied_out(void *p) { /* the result is in s->out */
  slot *s = p;
  const unsigned *out = slc_buffer_host(s->out);
  for (unsigned i = 0; i < N; i++)
    if (out[i] != s->id + i + 1) atomic_fetch_add(&wrong, 1);
  atomic_fetch_sub(&s->busy, 1);
}

static void serve(slc_context *c, CUfunction add1, unsigned requests) {
  slc_engine_enable(c, NULL); /* an engine thread releases work as it ends */
  slc_stream *s;
  slc_buffer *dev;
  slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &s);
  slc_buffer_alloc_device(c, 0, N * 4, &dev);
  slot slots[4] = {0};
  for (int k = 0; k < 4; k++) {
    slc_buffer_alloc_host(c, N * 4, &slots[k].staging);
    slc_buffer_alloc_host(c, N * 4, &slots[k].out);
  }
  for (unsigned r = 0; r < requests; r++) {
    slot *sl = &slots[r % 4];
    while (atomic_load(&sl->busy) != 0) sched_yield(); /* no synchronise */
    atomic_store(&sl->busy, 2);
    sl->id = r;
    unsigned *in = slc_buffer_host(sl->staging);
    for (unsigned i = 0; i < N; i++) in[i] = r + i;
    /* The slc_buf_* calls hold the buffers they name by themselves. */
    slc_buf_copy_async(s, dev, 0, sl->staging, 0, N * 4,
                       &(slc_hold){.keep = {copied_in, sl}});
    CUdeviceptr p = slc_buffer_dptr(dev);
    unsigned n = N;
    slc_buf_launch(s, add1, (slc_dim3){N / 256, 1, 1}, (slc_dim3){256, 1, 1},
                   0, (void *[]){&p, &n}, &dev, 1, NULL);
    slc_buf_copy_async(s, sl->out, 0, dev, 0, N * 4,
                       &(slc_hold){.keep = {copied_out, sl}});
  }
  for (int k = 0; k < 4; k++)
    while (atomic_load(&slots[k].busy) != 0) sched_yield();
  for (int k = 0; k < 4; k++) {
    slc_buffer_free(slots[k].staging);
    slc_buffer_free(slots[k].out);
  }
  slc_buffer_free(dev);
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
  /* Every operation was released by the engine (its counters follow the
   * release in which the last keep ran). */
  slc_engine_stats st;
  for (long i = 0; i < 10000000; i++) {
    CHECK(slc_engine_stats_get(c, &st) == LDG_OK);
    if (st.seqs_released == 600) break;
    sched_yield();
  }
  CHECK(st.seqs_released == 600);
  CHECK(slc_module_unload(m) == LDG_OK);
  CHECK(slc_context_destroy(c) == LDG_OK); /* refuses if anything leaked */
  CHECK(hd_shutdown() == 0);
  printf("serving_example_test: 200 requests served, results correct\n");
  return 0;
}
