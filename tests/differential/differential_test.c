/*
 * differential_test — random call sequences against both the ledger and a
 * reference model (model.h), compared after every call.
 *
 * A seeded PRNG (splitmix64) chooses long sequences of ledger calls, bad
 * inputs and injected allocation failures included; the call driver
 * (driver.c, shared with the fuzzer in tests/fuzz/) makes each call on the
 * ledger and the model and compares their answers after every call. Runs
 * alternate phases that fill the rings (hundreds of pending entries) with
 * phases that churn, and end by destroying the ledger with work pending.
 *
 * Single-threaded by design (the concurrency tests live elsewhere); it is not
 * a benchmark. Deterministic from its seed.
 *
 * Usage: differential_test [seed [steps [seeds]]]
 *   env LDG_DIFF_SEED, LDG_DIFF_STEPS, LDG_DIFF_SEEDS; LDG_DIFF_TRACE=1
 *   prints every call. Defaults: 20 seeds (1..20) x 3000 steps; fewer under
 *   sanitizers. Exit 0: pass; 1: mismatch (seed, step and call printed).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests/differential/driver.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DIFF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define DIFF_SANITIZED 1
#endif
#endif
#ifndef DIFF_SANITIZED
#define DIFF_SANITIZED 0
#endif

static long run_seed(uint64_t seed, long steps) {
  drv_stats st;
  drv_watchdog(DIFF_SANITIZED ? 240 : 120);
  drv_begin(seed, steps);
  drv_run();
  drv_end(&st);
  drv_watchdog(0);
  printf("differential_test: seed=%" PRIu64 " steps=%ld checks=%ld keeps=%zu "
         "streams=%zu pending avg=%zu max=%zu ran-at-destroy=%zu ok\n",
         seed, steps, st.checks, st.keeps, st.streams, st.pending_avg,
         st.pending_max, st.ran_at_destroy);
  return st.checks;
}

static long env_long(const char *name, long dflt) {
  const char *v = getenv(name);
  return v && *v ? strtol(v, NULL, 0) : dflt;
}

int main(int argc, char **argv) {
  uint64_t seed0 = (uint64_t)env_long("LDG_DIFF_SEED", 1);
  long steps = env_long("LDG_DIFF_STEPS", DIFF_SANITIZED ? 2000 : 3000);
  long seeds = env_long("LDG_DIFF_SEEDS", DIFF_SANITIZED ? 10 : 20);
  if (argc > 1) {
    seed0 = strtoull(argv[1], NULL, 0);
    seeds = 1;
  }
  if (argc > 2) steps = strtol(argv[2], NULL, 0);
  if (argc > 3) seeds = strtol(argv[3], NULL, 0);
  drv_config cfg = {0};
  cfg.trace = env_long("LDG_DIFF_TRACE", 0) != 0;
  drv_configure(&cfg);
  setvbuf(stdout, NULL, _IOLBF, 0);

  long checks = 0;
  for (long i = 0; i < seeds; i++) checks += run_seed(seed0 + (uint64_t)i, steps);
  printf("differential_test: PASS %ld seeds from %" PRIu64 " x %ld steps, "
         "%ld checks%s\n",
         seeds, seed0, steps, checks,
         DIFF_SANITIZED ? " (sanitizer scale)" : "");
  drv_fini();
  return 0;
}
