/*
 * An embedder's GPU-free test of its own CUDA-layer code, built against the
 * installed tree: the CUDA layer over the host executor (a fake driver whose
 * streams are worker threads). A staging buffer copied asynchronously to a
 * device buffer is released only once the stream is synchronised, after the
 * copy ran; the bytes arrive; nothing of the executor is left at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/host_executor.h"
#include "cuda/sl_cuda.h"

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
  CHECK(slc_stream_destroy(s) == LDG_OK);
  slc_stream_unref(s);
  CHECK(slc_context_destroy(c) == LDG_OK);
  CHECK(hd_shutdown() == 0);
  printf("host consumer: OK (the copy ran before its keep)\n");
  return 0;
}
