/*
 * Reference model of the streamledger contract (ledger/ledger.h), for the
 * differential test.
 *
 * Single-threaded, plain arrays, no cleverness: each function transcribes
 * one sentence of the contract. Streams are named by their index in
 * mdl.s[] (never reused, never removed); MDL_NULL stands for a NULL handle
 * and MDL_FOREIGN for a live stream of another ledger.
 *
 * State per stream: mark (last seq handed out), released (high-water mark of
 * what is known complete), destroyed, and the pending items (seq > released),
 * in seq order. An item is an entry (keep id, vec ids, host ranges, and the
 * keep's own re-entrant action "release stream X to u", if any) or a wait
 * (target stream, upto).
 *
 * Releasing (s, upto) is a work list of (stream, upto) pairs: pop one; skip it
 * if the stream is destroyed or already released that far; else raise its
 * high-water mark, drop its items up to upto in seq order, and push each
 * fired wait's (target, upto) and each keep action's (stream, upto). Marks
 * only grow, so this terminates on cycles, and the result is the least fixed
 * point: it does not depend on the order the work list is processed in.
 *
 * Expectations are bitmasks of acceptable status codes (MDL_BIT): where the
 * header does not rank two errors that both apply, either is accepted.
 */
#ifndef STREAMLEDGER_TESTS_DIFFERENTIAL_MODEL_H
#define STREAMLEDGER_TESTS_DIFFERENTIAL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger/ledger.h"

#define MDL_NULL (-1)
#define MDL_FOREIGN (-2)
#define MDL_MAX_VEC 8
#define MDL_MAX_RANGE 8

/* The bit of a status code in an expectation mask. */
#define MDL_BIT(rc) (1u << (unsigned)(-(rc)))

typedef struct mdl_item {
  ldg_seq seq;
  bool is_wait;
  /* entry */
  int keep;            /* keep id; -1 for a keep with a NULL release */
  int act_stream;      /* the keep releases act_stream to act_upto; -1: no */
  ldg_seq act_upto;
  size_t n_vec;
  uint64_t vec[MDL_MAX_VEC];
  size_t n_range;
  ldg_range range[MDL_MAX_RANGE];
  /* wait */
  int target;
  ldg_seq upto;
} mdl_item;

typedef struct mdl_stream {
  uint64_t id;
  int device;
  bool nonblocking;
  bool destroyed;
  int refs_test;         /* references the test holds */
  int refs_snap;         /* references open snapshots hold */
  bool ever_wait_target; /* some wait named it (waits hold references) */
  ldg_seq mark;
  ldg_seq released;
  mdl_item *items; /* pending, seq increasing */
  size_t n_items, cap_items;
} mdl_stream;

typedef struct mdl_snap {
  bool open;
  size_t n;
  int *stream;
  ldg_seq *mark;
} mdl_snap;

typedef struct mdl {
  mdl_stream *s;
  size_t n_s, cap_s;
  mdl_snap *snap;
  size_t n_snap, cap_snap;
  /* Keeps released since mdl_clear_fired, in the model's order. */
  int *fired;
  size_t n_fired, cap_fired;
  /* Whether keeps' re-entrant actions run (off for ledger destroy). */
  bool actions;
  /* The work list of a release. */
  int *w_stream;
  ldg_seq *w_upto;
  size_t n_w, cap_w;
} mdl;

void mdl_init(mdl *m);
void mdl_fini(mdl *m);
void mdl_clear_fired(mdl *m);

/* Streams and references. */
unsigned mdl_expect_stream_create(bool l_null, bool out_null, int device,
                                  unsigned flags, bool has_drain);
int mdl_stream_add(mdl *m, uint64_t id, int device, bool nonblocking);
void mdl_ref(mdl *m, int s);
void mdl_unref(mdl *m, int s); /* the last reference destroys */
unsigned mdl_expect_destroy(const mdl *m, int s);
void mdl_destroy(mdl *m, int s);
void mdl_destroy_all(mdl *m); /* ldg_ledger_destroy */
int mdl_check_live(const mdl *m, int s);

/* Recording and releasing. */
/* 0: valid; 1: zero-byte or wrapping; 2: ends exactly at the top of the
 * address space (addr + bytes == 2^N: not representable, header silent). */
int mdl_range_kind(ldg_range r);
unsigned mdl_expect_enqueue(const mdl *m, int s, const uint64_t *vec,
                            size_t n_vec, const ldg_range *ranges,
                            size_t n_ranges);
ldg_seq mdl_enqueue(mdl *m, int s, int keep, int act_stream, ldg_seq act_upto,
                    const uint64_t *vec, size_t n_vec, const ldg_range *ranges,
                    size_t n_ranges);
unsigned mdl_expect_add_wait(const mdl *m, int b, int a, ldg_seq upto);
ldg_seq mdl_add_wait(mdl *m, int b, int a, ldg_seq upto);
unsigned mdl_expect_release(const mdl *m, int s, ldg_seq upto);
void mdl_release(mdl *m, int s, ldg_seq upto);
unsigned mdl_expect_release_all(const mdl *m, int s);
void mdl_release_all(mdl *m, int s);

/* Device snapshots. */
unsigned mdl_expect_device_marks(bool l_null, bool out_null, int device);
int mdl_device_marks(mdl *m, int device); /* returns the snapshot index */
void mdl_release_marks(mdl *m, int snap);
void mdl_marks_discard(mdl *m, int snap);

/* ldg_settle_vector: holders are the live non-blocking streams holding vec
 * when the call starts; fails[stream] says whose drain fails. Returns the
 * status code. */
int mdl_settle(mdl *m, uint64_t vec, const bool *fails);

/* Queries. */
ldg_seq mdl_mark(const mdl *m, int s);
size_t mdl_pending(const mdl *m, int s);
size_t mdl_pending_total(const mdl *m);
bool mdl_holds_vector(const mdl *m, uint64_t vec);
bool mdl_holds_range(const mdl *m, uintptr_t addr, size_t bytes);
/* Writes up to cap stream indices to out; returns how many there are. */
size_t mdl_nb_holding(const mdl *m, uint64_t vec, int *out, size_t cap);
bool mdl_has_nb(const mdl *m);

#endif /* STREAMLEDGER_TESTS_DIFFERENTIAL_MODEL_H */
