/*
 * A program outside streamledger, built against its installed tree (cc with
 * pkg-config, CMake) or the README's Bazel snippet: the README's example
 * (copy, record, wait, sync), then checks that every keep ran exactly once
 * and that the library it runs with is the one it was compiled against.
 * Exits 0 and prints "consumer: OK" only if all of that holds.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ledger/ledger.h"

static int released;

static void free_staging(void *buf) {
  free(buf);
  released++;
}

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "consumer: FAILED %s (line %d)\n", #cond, __LINE__);    \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  CHECK(ldg_version() == STREAMLEDGER_VERSION);

  ldg_ledger *l;
  ldg_stream *copy, *compute;
  CHECK(ldg_ledger_create(&l) == LDG_OK);
  CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &copy) == LDG_OK);
  CHECK(ldg_stream_create(l, 0, 0, NULL, NULL, &compute) == LDG_OK);

  void *staging = malloc(4096);
  CHECK(staging != NULL);
  ldg_range r = {(uintptr_t)staging, 4096};
  uint64_t vec = 42;
  CHECK(ldg_enqueue(copy, (ldg_keep){free_staging, staging}, &vec, 1, &r, 1,
                    NULL) == LDG_OK);
  ldg_seq e = ldg_mark(copy);
  CHECK(ldg_add_wait(compute, copy, e, NULL) == LDG_OK);
  CHECK(ldg_holds_vector(l, vec));
  ldg_seq m = ldg_mark(compute);
  CHECK(ldg_release(compute, m) == LDG_OK);
  CHECK(released == 1); /* released through the wait */
  CHECK(!ldg_holds_vector(l, vec));

  CHECK(ldg_stream_destroy(copy) == LDG_OK);
  CHECK(ldg_stream_destroy(compute) == LDG_OK);
  ldg_stream_unref(copy);
  ldg_stream_unref(compute);
  ldg_ledger_destroy(l);
  CHECK(released == 1);
  printf("consumer: OK streamledger %s\n", ldg_version_string());
  return 0;
}
