/* The benchmarks' wall clock, in one place: CLOCK_MONOTONIC in
 * nanoseconds. Header-only so that a benchmark needs no library for it;
 * the including file defines the feature macros clock_gettime needs
 * (_POSIX_C_SOURCE >= 199309L) before its first include. */
#ifndef STREAMLEDGER_BENCH_CLOCK_H
#define STREAMLEDGER_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t bench_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* STREAMLEDGER_BENCH_CLOCK_H */
