/*
 * What the benchmarks share: the exactly-once guard on keeps (every keep a
 * benchmark hands to a ledger must run exactly once; it checks count, sum and
 * sum of squares of the unique keep ids), and the CPU's name for the report.
 * Not a benchmark API: bench/ only.
 */
#ifndef STREAMLEDGER_BENCH_KEEPS_H
#define STREAMLEDGER_BENCH_KEEPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct keep_sums {
  uint64_t n, sum, sq;
} keep_sums;

/* The keep every benchmark uses: ctx is the keep's unique id. Counts into
 * the calling thread's own sums (no shared write on the timed path). */
void keep_fn(void *ctx);

void sums_add(keep_sums *into, const keep_sums *s);

/* Adds ids [first, last) to *enq. */
void sums_add_range(keep_sums *enq, uint64_t first, uint64_t last);

/* Adds this thread's ran keeps, and `enq` (what it enqueued), to the row's
 * totals; resets the thread's own. Call from each worker before it ends. */
void flush_keeps(const keep_sums *enq);

/* Adds `enq` to the row's enqueued total (for work not done by a worker). */
void add_enqueued(const keep_sums *enq);

/* End of a row: every keep enqueued ran exactly once, or prints who (`prog`,
 * `row`) and aborts. Adds the row to the grand totals and starts a new row. */
void verify_keeps(const char *prog, const char *row);

/* Keeps verified over every row so far. */
uint64_t keeps_verified(void);

/* The CPU's model name from /proc/cpuinfo, or "unknown". */
void cpu_model(char *buf, size_t n);

#endif /* STREAMLEDGER_BENCH_KEEPS_H */
