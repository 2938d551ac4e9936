/*
 * Named atomic operations. Every shared access in the ledger goes through one
 * of these, so `grep ldg__.*acquire` lists every acquire in the code base and
 * no access is implicitly seq_cst: where a seq_cst operation is needed (the
 * store/load handshakes described in ring.c, reserve.c, owned.c, segment.c,
 * registry.c and pool.c) it says so in its name. Every relaxed, acquire,
 * release or acq_rel use in the ledger's .c files has a comment next to it
 * saying what it pairs with under the C11 model (or why it needs nothing: a
 * statistic, a value a CAS checks).
 */
#ifndef STREAMLEDGER_ATOMICS_H
#define STREAMLEDGER_ATOMICS_H

#include <stdatomic.h>

#define ldg__load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define ldg__load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define ldg__load_seq_cst(p) atomic_load_explicit((p), memory_order_seq_cst)

#define ldg__store_relaxed(p, v) \
  atomic_store_explicit((p), (v), memory_order_relaxed)
#define ldg__store_release(p, v) \
  atomic_store_explicit((p), (v), memory_order_release)

#define ldg__fetch_add_relaxed(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define ldg__fetch_add_acq_rel(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_acq_rel)
#define ldg__fetch_add_seq_cst(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_seq_cst)
#define ldg__fetch_sub_relaxed(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define ldg__fetch_sub_acq_rel(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define ldg__fetch_sub_release(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_release)

#define ldg__fetch_add_release(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_release)
#define ldg__fetch_or_acq_rel(p, v) \
  atomic_fetch_or_explicit((p), (v), memory_order_acq_rel)
#define ldg__fetch_and_release(p, v) \
  atomic_fetch_and_explicit((p), (v), memory_order_release)

/* A full fence: the store/load (Dekker) handshake of registry.c. */
#define ldg__fence_seq_cst() atomic_thread_fence(memory_order_seq_cst)

#define ldg__exchange_acq_rel(p, v) \
  atomic_exchange_explicit((p), (v), memory_order_acq_rel)

/* Compare-and-swap; on failure *expected is updated with the value seen. */
#define ldg__cas_acq_rel(p, expected, desired)                          \
  atomic_compare_exchange_strong_explicit((p), (expected), (desired), \
                                          memory_order_acq_rel,       \
                                          memory_order_acquire)
#define ldg__cas_weak_acq_rel(p, expected, desired)                   \
  atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
                                        memory_order_acq_rel,       \
                                        memory_order_acquire)
/* Relaxed CAS: for a word whose own modification order is the whole
 * argument (vindex.c). */
#define ldg__cas_weak_relaxed(p, expected, desired)                   \
  atomic_compare_exchange_weak_explicit((p), (expected), (desired), \
                                        memory_order_relaxed,       \
                                        memory_order_relaxed)
#define ldg__cas_seq_cst(p, expected, desired)                          \
  atomic_compare_exchange_strong_explicit((p), (expected), (desired), \
                                          memory_order_seq_cst,       \
                                          memory_order_seq_cst)

#endif /* STREAMLEDGER_ATOMICS_H */
