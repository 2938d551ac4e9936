/*
 * ldg_thread_ops_released, inline, for callers inside this repository that
 * read it on a hot path (cuda/'s keeps frame reads it twice around every
 * enqueue). Not installed (ledger/BUILD public_hdrs): it names the ledger's
 * thread-local counter, which the shared library does not export, so a
 * program outside the repository calls ldg_thread_ops_released (ledger.h),
 * which returns the same value.
 */
#ifndef STREAMLEDGER_THREAD_OPS_H
#define STREAMLEDGER_THREAD_OPS_H

#include <stdint.h>

/* ledger/release.c: operations taken by this thread's release walks and
 * overtaken enqueues. Thread-local: never shared, no atomics. */
extern _Thread_local uint64_t ldg__thread_ops;

/* ldg_thread_ops_released (ledger.h), without the call. */
static inline uint64_t ldg__thread_ops_released(void) {
  return ldg__thread_ops;
}

#endif /* STREAMLEDGER_THREAD_OPS_H */
