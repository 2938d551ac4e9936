/*
 * drvtime: splits a benchmark thread's CPU time into the driver's, the
 * benchmark's own work and the rest (streamledger: ledger, layer, pool,
 * engine), for bench/pool_bench.c's multi-GPU serving rows (issue 13: "the
 * ledger's share of host CPU per request").
 *
 * dt_wrap replaces the hot entries of a driver table (issues, records,
 * queries, waits, context switches, allocations) with wrappers that
 * estimate the CPU time the calling thread spends inside them, if the
 * thread is tracked (untracked threads pay one thread-local load): one call
 * in 16, picked at random, is bracketed by two reads of the thread's CPU
 * clock (a system call each, ~0.2 us) and counted 16 times, less the
 * calibrated cost of the reads. CPU time, not wall time: a call that waits
 * on a lock inside the driver, or a thread descheduled on a busy machine,
 * would otherwise count as driver time; sampling keeps the clock reads to
 * about one per request.
 *
 * A tracked thread: dt_track(&t) on the thread (t lives as long as the
 * thread is measured). Its CPU time is read with t's CPU clock, from any
 * thread. sl = cpu - driver - bench, where bench is what the thread added
 * with dt_bench_add (filling and checking data: wall time, they do not
 * block; waiting for a free slot: the thread's CPU clock).
 * Threads that run keeps (the engine thread) are tracked by the first keep
 * they run (dt_track_keep_thread): the caller's counters then say the same
 * for them.
 *
 * Threading: counters are relaxed atomics (a thread adds to its own, any
 * thread reads); dt_wrap before the table is used.
 */
#ifndef STREAMLEDGER_BENCH_DRVTIME_H
#define STREAMLEDGER_BENCH_DRVTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "cuda/driver.h"

typedef struct dt_thread {
  clockid_t cpu;                /* the thread's CPU clock */
  atomic_ullong driver_ns;      /* inside wrapped driver calls */
  atomic_ullong bench_ns;       /* dt_bench_add */
} dt_thread;

/* One reading of a tracked thread. */
typedef struct dt_sample {
  uint64_t cpu_ns, driver_ns, bench_ns;
} dt_sample;

void dt_wrap(slc_driver *d);

/* Tracks the calling thread with t (zeroed here). */
void dt_track(dt_thread *t);
/* Stops tracking the calling thread. */
void dt_untrack(void);
bool dt_tracked(void);

/* If the calling thread is not tracked: tracks it with a slot of the
 * process-wide list of keep threads (at most 64; later ones are not). */
void dt_track_keep_thread(void);

/* Adds ns to the calling thread's benchmark time (tracked threads only). */
void dt_bench_add(uint64_t ns);

uint64_t dt_now_ns(void);
uint64_t dt_thread_cpu_ns(void); /* the calling thread's CPU clock */

dt_sample dt_read(dt_thread *t);

/* The sum of dt_read over the keep threads tracked so far. */
dt_sample dt_read_keep_threads(void);

#endif /* STREAMLEDGER_BENCH_DRVTIME_H */
