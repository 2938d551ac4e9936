/*
 * What callers inside this repository use of the ledger on a hot path:
 * ldg_thread_ops_released inline (cuda/'s keeps frame reads it twice around
 * every enqueue) and ldg_enqueue without its argument checks (cuda/ checks
 * a hold before its driver call). Not installed (ledger/BUILD public_hdrs):
 * they name the ledger's thread-local counter and an internal function,
 * which the shared library does not export, so a program outside the
 * repository calls ldg_thread_ops_released and ldg_enqueue (ledger.h).
 */
#ifndef STREAMLEDGER_THREAD_OPS_H
#define STREAMLEDGER_THREAD_OPS_H

#include <stdint.h>

#include "ledger/ledger.h"

/* ledger/release.c: operations taken by this thread's release walks and
 * overtaken enqueues. Thread-local: never shared, no atomics. */
extern _Thread_local uint64_t ldg__thread_ops;

/* ldg_thread_ops_released (ledger.h), without the call. */
static inline uint64_t ldg__thread_ops_released(void) {
  return ldg__thread_ops;
}

/* ldg_enqueue (ring.c) for arguments that pass its checks — s not NULL, no
 * NULL array with a count, n_vec and n_ranges at most (SIZE_MAX / 8) / 4,
 * every range non-empty and not wrapping — which the caller made (cuda/'s
 * slc__check_hold, before the driver call): the same results otherwise.
 * Arguments that fail them are undefined behaviour here. */
int ldg__enqueue_checked(ldg_stream *s, ldg_keep keep, const uint64_t *vec_ids,
                         size_t n_vec, const ldg_range *ranges,
                         size_t n_ranges, ldg_seq *seq_out);

#endif /* STREAMLEDGER_THREAD_OPS_H */
