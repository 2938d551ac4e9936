/*
 * An embedder's GPU-free test of its own CUDA-layer code, built against the
 * installed tree: the CUDA layer over the host executor (a fake driver whose
 * streams are worker threads). A staging buffer copied asynchronously to a
 * device buffer is released only once the stream is synchronised, after the
 * copy ran; the bytes arrive; nothing of the executor is left at the end.
 * The memory pool, in the same library: a block freed under its pending
 * memset is held, then comes back, and the pool is destroyed clean.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"
#include "pool/sl_pool.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "host consumer: FAILED %s (line %d)\n", #cond,         \
              __LINE__);                                                       \
      return 1;                                                                \
    }                                                                          \
  } while (0)

static int released;

static void free_staging(void *p) {
  /* The copy that reads it has run: nothing of it is queued any more. */
  if (hd_pending_touching(p, 4096) != 0) abort();
  free(p);
  released++;
}

int main(void) {
  slc_driver table;
  CHECK(hd_install(&table, &(hd_config){.devices = 1, .task_delay_us = 2000}) == 0);
  slc_context *c;
  CHECK(slc_context_create(&table, &c) == LDG_OK);
  slc_stream *s;
  CHECK(slc_stream_create(c, 0, 0, &s) == LDG_OK);
  slc_buffer *dev;
  CHECK(slc_buffer_alloc_device(c, 0, 4096, &dev) == LDG_OK);

  unsigned char *staging = malloc(4096);
  CHECK(staging != NULL);
  memset(staging, 0x5a, 4096);
  slc_hold hold = {.keep = {free_staging, staging}};
  CHECK(slc_copy_htod_async(s, slc_buffer_dptr(dev), staging, 4096, &hold) ==
        LDG_OK);
  CHECK(released == 0); /* the copy waits out its delay on the worker */
  CHECK(slc_stream_synchronize(s) == LDG_OK);
  CHECK(released == 1);

  unsigned char back[4096];
  CHECK(slc_copy_dtoh(back, dev, 0, sizeof back) == LDG_OK);
  CHECK(back[0] == 0x5a && back[4095] == 0x5a);

  CHECK(slc_buffer_free(dev) == LDG_OK);

  slp_pool *pool;
  CHECK(slp_pool_create_host(c, NULL, &pool) == LDG_OK);
  slp_block *blk, *dblk;
  CHECK(slp_alloc(pool, s, 4096, &blk) == LDG_OK);
  memset(slp_block_host(blk), 0x3c, 4096);
  slp_pool *dpool;
  CHECK(slp_pool_create_device(c, 0, NULL, &dpool) == LDG_OK);
  CHECK(slp_alloc(dpool, s, 4096, &dblk) == LDG_OK);
  CHECK(slp_copy_async(s, dblk, 0, blk, 0, 4096, NULL) == LDG_OK);
  CHECK(slp_free(blk) == LDG_OK); /* at once: held by the pending copy */
  slp_stats st;
  CHECK(slp_stats_get(pool, &st) == LDG_OK && st.held_frees == 1);
  CHECK(slc_stream_synchronize(s) == LDG_OK);
  CHECK(slp_stats_get(pool, &st) == LDG_OK && st.held_bytes == 0);
  CHECK(slc_copy_dtoh_async(s, back, slp_block_dptr(dblk), sizeof back, NULL) ==
        LDG_OK);
  CHECK(slc_stream_synchronize(s) == LDG_OK);
  CHECK(back[0] == 0x3c && back[4095] == 0x3c);
  CHECK(slp_free(dblk) == LDG_OK);
  CHECK(slp_pool_destroy(pool) == LDG_OK);
  CHECK(slp_pool_destroy(dpool) == LDG_OK);
  CHECK(slc_stream_destroy(s) == LDG_OK);
  slc_stream_unref(s);
  CHECK(slc_context_destroy(c) == LDG_OK);
  CHECK(hd_shutdown() == 0);
  printf("host consumer: OK (the copy ran before its keep)\n");
  return 0;
}
