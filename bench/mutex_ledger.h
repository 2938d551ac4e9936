/*
 * mutex_ledger — the benchmark baseline: a C port of the ORIGINAL ledger
 * design (../shared/seed/ledger-interface.txt, SPOC's Transfer.Ledger).
 *
 * Same functions, signatures and meanings as ledger/ledger.h with the prefix
 * mldg_ instead of ldg_; the shared value types (ldg_keep, ldg_range, ldg_seq,
 * ldg_drain_fn, LDG_* codes) are the ledger's own. See mutex_ledger.c for the
 * design and for where the port deviates from the OCaml original.
 *
 * CONCURRENCY
 *   One pthread mutex per ledger guards every stream, list and counter of
 *   that ledger. Every function takes it (briefly) except the accessors
 *   (id, device, nonblocking: immutable), mldg_has_nonblocking (an atomic
 *   counter, as in the original), mldg_stream_check_live (an atomic flag) and
 *   mldg_stream_ref. Keeps and drains run after the mutex was dropped, on the
 *   calling thread, and may re-enter the ledger. The exceptions are those of
 *   ledger.h: mldg_ledger_destroy runs alone, mldg_release_all only on a
 *   stream nobody else enqueues on.
 *
 * This is a baseline for measurements, not a product: it is kept simple and
 * honest (a plain pthread_mutex_t, no artificial slowness), not tuned.
 */
#ifndef STREAMLEDGER_BENCH_MUTEX_LEDGER_H
#define STREAMLEDGER_BENCH_MUTEX_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger/ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mldg_ledger mldg_ledger;
typedef struct mldg_stream mldg_stream;
typedef struct mldg_marks mldg_marks;

int mldg_ledger_create(mldg_ledger **out);
void mldg_ledger_destroy(mldg_ledger *l);

int mldg_stream_create(mldg_ledger *l, int device, unsigned flags,
                       ldg_drain_fn drain, void *drain_ctx, mldg_stream **out);
int mldg_stream_destroy(mldg_stream *s);
void mldg_stream_ref(mldg_stream *s);
void mldg_stream_unref(mldg_stream *s);
int mldg_stream_check_live(const mldg_stream *s);
uint64_t mldg_stream_id(const mldg_stream *s);
int mldg_stream_device(const mldg_stream *s);
bool mldg_stream_is_nonblocking(const mldg_stream *s);

int mldg_enqueue(mldg_stream *s, ldg_keep keep, const uint64_t *vec_ids,
                 size_t n_vec, const ldg_range *ranges, size_t n_ranges,
                 ldg_seq *seq_out);
ldg_seq mldg_mark(const mldg_stream *s);
int mldg_add_wait(mldg_stream *b, mldg_stream *a, ldg_seq a_upto,
                  ldg_seq *seq_out);
int mldg_release(mldg_stream *s, ldg_seq upto);
int mldg_release_all(mldg_stream *s);

int mldg_device_marks(mldg_ledger *l, int device, mldg_marks **out);
int mldg_release_marks(mldg_marks *m);
void mldg_marks_discard(mldg_marks *m);
size_t mldg_marks_count(const mldg_marks *m);

size_t mldg_pending_count(const mldg_stream *s);
bool mldg_holds_vector(mldg_ledger *l, uint64_t vec_id);
bool mldg_holds_host_range(mldg_ledger *l, uintptr_t addr, size_t bytes);
size_t mldg_nonblocking_holding(mldg_ledger *l, uint64_t vec_id,
                                mldg_stream **out, size_t cap);
bool mldg_has_nonblocking(mldg_ledger *l);
int mldg_settle_vector(mldg_ledger *l, uint64_t vec_id);

/* Bytes this ledger holds for entries and waits: the sizes it asked malloc
 * for (entry headers with their copied id and range arrays, wait records).
 * Nothing is deferred, so this drops as soon as a release returns. */
size_t mldg_ledger_bytes(mldg_ledger *l);

/* Nothing is ever deferred here: a no-op, for symmetry with ldg_quiesce. */
void mldg_quiesce(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_BENCH_MUTEX_LEDGER_H */
