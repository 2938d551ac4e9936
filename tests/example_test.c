/*
 * example_test: the copy / record / wait / sync example of README.md, kept
 * compiling and passing so the README stays true. The driver calls are
 * simulated by comments; the ledger calls are the real ones, in the order
 * the two ordering rules require. Proves that syncing the compute stream
 * releases the copy stream's staging buffer, which was never synchronised.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ledger/ledger.h"

#define CHECK(c)                                                        \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

static int freed;

/* README example begins */
static void free_staging(void *buf) {
  free(buf); /* the copy that read it has completed */
  freed++;
}

static int example(void) {
  ldg_ledger *l;
  ldg_stream *copy, *compute;
  ldg_ledger_create(&l);
  ldg_stream_create(l, 0, 0, NULL, NULL, &copy);
  ldg_stream_create(l, 0, 0, NULL, NULL, &compute);

  /* 1. Copy a staging buffer to the device on `copy`: issue, then enqueue. */
  void *staging = malloc(4096);
  /* cuMemcpyHtoDAsync(dst, staging, 4096, copy_stream); */
  ldg_range r = {(uintptr_t)staging, 4096};
  uint64_t vec = 42;
  ldg_enqueue(copy, (ldg_keep){free_staging, staging}, &vec, 1, &r, 1, NULL);

  /* 2. Record an event on `copy`: mark, then record. */
  ldg_seq e = ldg_mark(copy);
  /* cuEventRecord(ev, copy_stream); */

  /* 3. `compute` waits on the event: issue the wait, then record it. */
  /* cuStreamWaitEvent(compute_stream, ev, 0); */
  ldg_add_wait(compute, copy, e, NULL);
  /* cuLaunchKernel(..., compute_stream, ...); then enqueue its keep */

  /* 4. Synchronise `compute`: mark, then sync, then release to the mark. */
  ldg_seq m = ldg_mark(compute);
  /* cuStreamSynchronize(compute_stream); */
  ldg_release(compute, m); /* the copy on `copy` is released too */
  int held = (int)ldg_pending_count(copy); /* 0: staging was freed */

  ldg_stream_unref(copy);
  ldg_stream_unref(compute);
  ldg_ledger_destroy(l);
  return held;
}
/* README example ends */

int main(void) {
  CHECK(example() == 0); /* released by the sync, not by the teardown */
  CHECK(freed == 1);
  printf("example_test: the staging buffer was released by the compute sync\n");
  return 0;
}
