/*
 * atomics_bench — what one locked read-modify-write costs on this host, one
 * thread, its cache line its own (issue 11: the unit of the locked-operation
 * accounting in bench/RESULTS.md, "Issue 11, round 2"). Not a ledger: each
 * row is a loop of N iterations timed with CLOCK_MONOTONIC, the median of
 * --repeat runs, in ns per iteration:
 *
 *   store      one relaxed store (x86: a plain mov)
 *   faa        one fetch_add (x86: lock xadd)
 *   cas        one compare-and-swap that succeeds (x86: lock cmpxchg)
 *   faa+slot   fetch_add, then a 64-byte slot written: the ceiling loop's
 *              step (ledger_bench --workload ceiling), one thread
 *   2cas+slot  two successful CASes on two lines and a 64-byte slot
 *              written: an enqueue's locked skeleton (reserve on tail,
 *              publish on the slot's state), no ledger code around it
 *
 *   bazel run -c opt //bench:atomics_bench -- [--iters N] [--repeat R]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct line {
  alignas(64) _Atomic uint64_t w;
};

struct slot {
  alignas(64) _Atomic uint64_t state;
  uint64_t payload[7];
};

#define NSLOTS 1024 /* 64 KiB: stays in L2, as a ring segment does */

static struct line a_line, b_line;
static struct slot slots[NSLOTS];

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void run_store(uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    atomic_store_explicit(&a_line.w, i, memory_order_relaxed);
}

static void run_faa(uint64_t n) {
  for (uint64_t i = 0; i < n; i++)
    atomic_fetch_add_explicit(&a_line.w, 1, memory_order_relaxed);
}

static void run_cas(uint64_t n) {
  uint64_t v = atomic_load_explicit(&a_line.w, memory_order_relaxed);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t e = v;
    if (!atomic_compare_exchange_strong(&a_line.w, &e, v + 1)) abort();
    v++;
  }
}

static void fill(struct slot *s, uint64_t i) {
  for (int k = 0; k < 7; k++) s->payload[k] = i + (uint64_t)k;
}

static void run_faa_slot(uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uint64_t q = atomic_fetch_add_explicit(&a_line.w, 1, memory_order_relaxed);
    struct slot *s = &slots[q % NSLOTS];
    fill(s, q);
    atomic_store_explicit(&s->state, q, memory_order_release);
  }
}

static void run_2cas_slot(uint64_t n) {
  uint64_t t = atomic_load_explicit(&b_line.w, memory_order_relaxed);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t e = t;
    if (!atomic_compare_exchange_strong(&b_line.w, &e, t + 1)) abort();
    t++;
    struct slot *s = &slots[t % NSLOTS];
    fill(s, t);
    uint64_t st = atomic_load_explicit(&s->state, memory_order_relaxed);
    if (!atomic_compare_exchange_strong(&s->state, &st, st + 1)) abort();
  }
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv) {
  uint64_t iters = 20000000;
  int repeat = 5;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = strtoull(argv[++i], NULL, 10);
    } else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: atomics_bench [--iters N] [--repeat R]\n");
      return 2;
    }
  }
  if (iters == 0 || repeat < 1 || repeat > 99) {
    fprintf(stderr, "atomics_bench: --iters >= 1, --repeat 1..99\n");
    return 2;
  }
  static const struct {
    const char *name;
    void (*fn)(uint64_t);
  } rows[] = {{"store", run_store},       {"faa", run_faa},
              {"cas", run_cas},           {"faa+slot", run_faa_slot},
              {"2cas+slot", run_2cas_slot}};
  printf("atomics_bench: one thread, %llu iterations per run, median of %d "
         "run(s), ns per iteration\n",
         (unsigned long long)iters, repeat);
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    double ns[99];
    rows[r].fn(iters / 10 + 1); /* warm-up */
    for (int k = 0; k < repeat; k++) {
      double t0 = now_ns();
      rows[r].fn(iters);
      ns[k] = (now_ns() - t0) / (double)iters;
    }
    qsort(ns, (size_t)repeat, sizeof ns[0], cmp_double);
    printf("  %-10s %7.2f ns  (min %.2f, max %.2f)\n", rows[r].name,
           ns[repeat / 2], ns[0], ns[repeat - 1]);
  }
  return 0;
}
