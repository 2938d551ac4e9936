/* What marker_bench and engine_bench share: the end-stamp kernel (PTX for
 * GPUs, a host function for the host executor), clocks, percentiles and
 * option parsing. */
#ifndef STREAMLEDGER_BENCH_STAMP_H
#define STREAMLEDGER_BENCH_STAMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* mb_stamp(u64 ns, u64 *out): spins until ns nanoseconds of %globaltimer
 * passed, then, if out is not 0, stores the last %globaltimer value to *out
 * (a device-mapped host word: the kernel's "end stamp"). Hand-written PTX,
 * ISA 7.8 for sm_90 (as tests/cuda/kernels.c); the smoke tests assemble it
 * with ptxas where present. */
extern const char bench_stamp_ptx[];
#define BENCH_STAMP_KERNEL "mb_stamp"

/* Registers mb_stamp with the host executor: its "globaltimer" is
 * CLOCK_MONOTONIC. */
void bench_stamp_register_host(void);

uint64_t bench_now_ns(void);        /* CLOCK_MONOTONIC */
uint64_t bench_thread_cpu_ns(void); /* CLOCK_THREAD_CPUTIME_ID */
/* getrusage(RUSAGE_SELF): every thread's user + system CPU, us resolution;
 * a thread running on another CPU is counted up to its last tick. */
uint64_t bench_process_cpu_ns(void);

int bench_cmp_u64(const void *a, const void *b); /* for qsort */
int bench_cmp_i64(const void *a, const void *b);
/* The p-quantile (0..1) of sorted v[n] (nearest rank); 0 when n is 0. */
double bench_pctl(const uint64_t *v, size_t n, double p);

/* A decimal in 1 .. 100 000 000. */
bool bench_parse_uint(const char *s, unsigned *out);

#endif /* STREAMLEDGER_BENCH_STAMP_H */
