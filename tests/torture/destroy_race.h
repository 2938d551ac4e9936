/*
 * The destroy-race case shared by single_issuer_test and owned_test: rounds
 * of an enqueuer, a releaser and a destroyer racing freely on a fresh stream
 * (the destroy handshake's contract: every accepted keep ran exactly once,
 * the refused one never). The test gives the stream's flags, how to enqueue
 * keep id, how to forget ids, and what to check after each round.
 * Include after park_check.h (CHECK, SANITIZED, g_case).
 */
#ifndef STREAMLEDGER_TESTS_TORTURE_DESTROY_RACE_H
#define STREAMLEDGER_TESTS_TORTURE_DESTROY_RACE_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ledger/ledger.h"

struct destroy_race {
  const char *name; /* the case's name (g_case) */
  unsigned flags;   /* ldg_stream_create's */
  int rounds;
  uint32_t max_id;                            /* ids 1 .. max_id - 1 */
  int (*enqueue)(ldg_stream *s, uint32_t id); /* ldg_enqueue's rc */
  void (*reset)(uint32_t n);                  /* forget ids 0 .. n - 1 */
  /* After a round: ids 1 .. accepted were accepted, refused_id refused. */
  void (*check)(int round, uint32_t accepted, uint32_t refused_id);
};

static struct {
  const struct destroy_race *cfg;
  ldg_stream *s;
  atomic_bool stop_release;
  atomic_int started;
  uint32_t accepted, refused_id; /* written by the enqueuer */
} dr_;

static void *dr_enqueuer_(void *arg) {
  (void)arg;
  atomic_fetch_add(&dr_.started, 1);
  for (uint32_t id = 1;; id++) {
    if (id == dr_.cfg->max_id - 1) {
      /* Out of ids before the destroyer ran (a loaded machine): wait for
       * it; the next enqueue is then refused. */
      while (ldg_stream_check_live(dr_.s) == LDG_OK) sched_yield();
    }
    int rc = dr_.cfg->enqueue(dr_.s, id);
    if (rc == LDG_EDESTROYED) {
      dr_.refused_id = id;
      return NULL;
    }
    CHECK_RC(rc, LDG_OK);
    dr_.accepted = id;
  }
}

static void *dr_releaser_(void *arg) {
  (void)arg;
  atomic_fetch_add(&dr_.started, 1);
  while (!atomic_load(&dr_.stop_release)) {
    int rc = ldg_release(dr_.s, ldg_mark(dr_.s));
    if (rc == LDG_EDESTROYED) break;
    CHECK_RC(rc, LDG_OK);
  }
  return NULL;
}

/* Runs the rounds; prints the case's line. */
static void destroy_race_run(const struct destroy_race *cfg) {
  g_case = cfg->name;
  dr_.cfg = cfg;
  ldg_ledger *l;
  CHECK_RC(ldg_ledger_create(&l), LDG_OK);
  uint64_t total = 0;
  cfg->reset(cfg->max_id);
  for (int r = 0; r < cfg->rounds; r++) {
    if (r > 0) cfg->reset(dr_.refused_id + 1); /* what the last round used */
    dr_.accepted = 0;
    dr_.refused_id = 0;
    CHECK_RC(ldg_stream_create(l, 0, cfg->flags, NULL, NULL, &dr_.s), LDG_OK);
    atomic_store(&dr_.stop_release, false);
    atomic_store(&dr_.started, 0);
    pthread_t e, rl;
    CHECK(pthread_create(&e, NULL, dr_enqueuer_, NULL) == 0);
    CHECK(pthread_create(&rl, NULL, dr_releaser_, NULL) == 0);
    while (atomic_load(&dr_.started) < 2) sched_yield();
    /* A varying head start; any value is correct. */
    for (volatile unsigned k = 0; k < (unsigned)(r % 17) * 200u; k++) {
    }
    CHECK_RC(ldg_stream_destroy(dr_.s), LDG_OK);
    pthread_join(e, NULL);
    atomic_store(&dr_.stop_release, true);
    pthread_join(rl, NULL);
    CHECK(dr_.refused_id == dr_.accepted + 1);
    cfg->check(r, dr_.accepted, dr_.refused_id);
    total += dr_.accepted;
    ldg_stream_unref(dr_.s);
  }
  ldg_ledger_destroy(l);
  printf("ok - %s (%d rounds, %llu enqueues accepted)\n", g_case, cfg->rounds,
         (unsigned long long)total);
}

#endif /* STREAMLEDGER_TESTS_TORTURE_DESTROY_RACE_H */
