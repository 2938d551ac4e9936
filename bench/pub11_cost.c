/*
 * pub11_cost: one thread enqueuing on an LDG_STREAM_SHARED stream (the
 * shared path's reservation and publication, which ledger_bench's shared row
 * takes only from 2 threads on: at one thread its stream is owned), with one
 * id and one range per enqueue as that row's, releasing every 16 (as
 * ledger_bench's default). For callgrind (bench/pub11_instr.sh): the
 * instructions of N ops, N from argv[1]. Prints nothing but errors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ledger/ledger.h"

static void nop_keep(void *ctx) { (void)ctx; }

int main(int argc, char **argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  ldg_ledger *l;
  ldg_stream *s;
  if (ldg_ledger_create(&l) != LDG_OK ||
      ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &s) != LDG_OK) {
    fprintf(stderr, "pub11_cost: setup failed\n");
    return 1;
  }
  for (unsigned long i = 1; i <= n; i++) {
    uint64_t vec = 1000 + (i & 255);
    ldg_range r = {(uintptr_t)0x10000000 + (uintptr_t)(i & 255) * 4096, 4096};
    if (ldg_enqueue(s, (ldg_keep){nop_keep, NULL}, &vec, 1, &r, 1, NULL) !=
        LDG_OK) {
      fprintf(stderr, "pub11_cost: enqueue %lu refused\n", i);
      return 1;
    }
    if (i % 16 == 0 && ldg_release(s, ldg_mark(s)) != LDG_OK) {
      fprintf(stderr, "pub11_cost: release refused\n");
      return 1;
    }
  }
  ldg_stream_destroy(s);
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  return 0;
}
