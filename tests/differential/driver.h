/*
 * The call driver shared by the differential test (differential_test.c) and
 * the fuzzer (tests/fuzz/ledger_fuzzer.c).
 *
 * It issues ledger calls, bad inputs included, against both //ledger:ledger
 * and the reference model (model.h), judges every status code, and after
 * every call compares which keeps ran and every query (driver.c says what
 * exactly). A mismatch is reported on stderr with the last calls made, and
 * ends the process (see drv_config.on_fail).
 *
 * Where the choices come from: every choice of a call and of its arguments
 * (which stream, which range, whether to pass NULL, whether to inject an
 * allocation failure, ...) is one draw, drv_config.draw. Without one the
 * driver draws from its own PRNG, seeded by drv_begin; that is the
 * differential test. The fuzzer draws from its input instead. The few
 * choices made only to vary the checks (the capacity passed to
 * ldg_nonblocking_holding, which pending ranges' neighbours to probe) always
 * come from the PRNG, so that an input's bytes go to the calls.
 *
 * Single-threaded; one run at a time: drv_begin, then drv_run or drv_op any
 * number of times, then drv_end.
 */
#ifndef STREAMLEDGER_TESTS_DIFFERENTIAL_DRIVER_H
#define STREAMLEDGER_TESTS_DIFFERENTIAL_DRIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

typedef struct drv_config {
  /* Returns a choice in [0, n), n >= 1. NULL: the driver's seeded PRNG. */
  uint64_t (*draw)(void *ctx, uint64_t n);
  void *draw_ctx;
  /* Runs after a mismatch was reported, instead of printing the
   * differential test's "reproduce:" line and exiting with status 1. Must
   * not return. */
  void (*on_fail)(void);
  /* Print every call to stderr as it completes. */
  bool trace;
  /* Who reports a mismatch, when draw is set (the seed says nothing then). */
  const char *name;
  /* Most live streams besides the side stream; beyond it a create becomes
   * one with bad arguments. 0: 8. */
  size_t max_live;
} drv_config;

/* Applies to the runs that begin after it. Copies *cfg. */
void drv_configure(const drv_config *cfg);

/* Starts a run: creates the ledger (also under injected allocation
 * failures), a second ledger with one stream (for the foreign-handle cases)
 * and the side stream that re-entrant keeps enqueue on. seed seeds the PRNG;
 * steps is the length drv_run runs for (0 if only drv_op is used). */
void drv_begin(uint64_t seed, long steps);

/* The differential test's workload: `steps` random steps, each one call
 * chosen with the differential test's weights and phases. */
void drv_run(void);

/* One call of the given kind, its arguments drawn. Some draws make it a
 * no-op (nothing to release, no stream to pick). The last two are not in
 * drv_run's mix (they would change the differential test's sequences). */
enum drv_op {
  DRV_OP_CREATE,          /* ldg_stream_create (bad arguments included) */
  DRV_OP_DESTROY,         /* ldg_stream_destroy */
  DRV_OP_REF_UNREF,       /* ldg_stream_ref or ldg_stream_unref */
  DRV_OP_UNREF_DESTROYED, /* ldg_stream_unref of a destroyed stream */
  DRV_OP_ENQUEUE,         /* ldg_enqueue, with a plain or re-entrant keep */
  DRV_OP_ADD_WAIT,        /* ldg_add_wait */
  DRV_OP_RELEASE,         /* ldg_release */
  DRV_OP_RELEASE_ALL,     /* ldg_release_all */
  DRV_OP_DEVICE_MARKS,    /* ldg_device_marks (+ ldg_marks_count) */
  DRV_OP_RELEASE_MARKS,   /* ldg_release_marks */
  DRV_OP_MARKS_DISCARD,   /* ldg_marks_discard */
  DRV_OP_SETTLE,          /* ldg_settle_vector, some drains failing */
  DRV_OP_MISC,            /* NULL handles, ldg_strerror, bytes, quiesce */
  DRV_OP_POOL,            /* ldg_ledger_set_pool_limit, ldg_ledger_trim */
  DRV_OP_FILL,            /* up to 128 ldg_enqueue on one stream */
  DRV_N_OPS
};
void drv_op(enum drv_op op);

typedef struct drv_stats {
  long checks;           /* comparisons made */
  size_t keeps;          /* keeps handed to ldg_enqueue */
  size_t streams;        /* streams created */
  size_t pending_avg;    /* pending operations per step, on average */
  size_t pending_max;
  size_t ran_at_destroy; /* keeps ldg_ledger_destroy ran */
} drv_stats;

/* Ends the run: discards open snapshots, destroys the ledger with its work
 * still pending, checks that every keep handed over ran exactly once, drops
 * every reference and waits for deferred frees. stats may be NULL. */
void drv_end(drv_stats *stats);

/* Arms (seconds > 0) or disarms (0) a SIGALRM watchdog that reports the call
 * in progress and exits with status 1: a deadlock fails instead of hanging.
 * Not for the fuzzer, whose own -timeout uses SIGALRM. */
void drv_watchdog(unsigned seconds);

/* Frees what the driver keeps between runs. */
void drv_fini(void);

#endif /* STREAMLEDGER_TESTS_DIFFERENTIAL_DRIVER_H */
