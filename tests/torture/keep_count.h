/*
 * The keep counting shared by the tests that check every keep ran exactly
 * once (owned_test, reserve_test, single_issuer_test): keep_of(id) is a
 * keep that counts its runs in ran[id]; seq_of[id] is where a test records
 * the seq its enqueue of id got; ran_by[id] the tag (my_tag) of the thread
 * that ran keep id, for ids below MAX_BY; reset(n) forgets ids 0 .. n - 1.
 * All atomic: keeps run on whichever thread releases them, and a test may
 * record seqs from several enqueuers at once.
 * Define MAX_KEEPS (the ids' bound) before including it to change the
 * default 1 << 18.
 */
#ifndef STREAMLEDGER_TESTS_TORTURE_KEEP_COUNT_H
#define STREAMLEDGER_TESTS_TORTURE_KEEP_COUNT_H

#include <stdatomic.h>
#include <stdint.h>

#include "ledger/ledger.h"

#ifndef MAX_KEEPS
#define MAX_KEEPS (1 << 18)
#endif

/* Times each keep ran, and the seq each accepted enqueue got, by id. */
static _Atomic uint32_t ran[MAX_KEEPS];
static _Atomic uint64_t seq_of[MAX_KEEPS];

/* Who ran each keep (the running thread's my_tag), for the first MAX_BY. */
enum { MAX_BY = 64 };
static _Atomic int ran_by[MAX_BY];
static _Thread_local int my_tag;

static void count_keep(void *ctx) {
  uintptr_t id = (uintptr_t)ctx;
  atomic_fetch_add_explicit(&ran[id], 1, memory_order_relaxed);
  if (id < MAX_BY) atomic_store(&ran_by[id], my_tag);
}

static inline ldg_keep keep_of(uint32_t id) {
  return (ldg_keep){count_keep, (void *)(uintptr_t)id};
}

static inline void reset(uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    atomic_store(&ran[i], 0);
    atomic_store(&seq_of[i], 0);
  }
}

static inline uint32_t ran_of(uint32_t id) { return atomic_load(&ran[id]); }

#endif /* STREAMLEDGER_TESTS_TORTURE_KEEP_COUNT_H */
