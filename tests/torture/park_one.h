/*
 * One thread at a time parks at one point on one stream (owned_test,
 * hot_test): the thread that armed itself (park_me), so that other threads
 * pass the same point. park_init(s, point, hook) installs hook, which calls
 * park_armed (after any parking of its own); the test waits on pk.parked
 * and lets the thread go with pk.go. Include after park_check.h.
 */
#ifndef STREAMLEDGER_TESTS_TORTURE_PARK_ONE_H
#define STREAMLEDGER_TESTS_TORTURE_PARK_ONE_H

#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"

static struct {
  ldg_stream *target;
  _Atomic int point;
  sem_t parked, go;
} pk;
static _Thread_local bool park_me;

/* In a hook: parks the calling thread, once, if it armed itself and
 * (point, s) is the armed point. */
static void park_armed(enum ldg__hook_point point, struct ldg_stream *s) {
  if (s != pk.target || !park_me || (int)point != atomic_load(&pk.point))
    return;
  park_me = false;
  sem_post(&pk.parked);
  sem_wait_or_fail(&pk.go, "parked thread let go");
}

static void park_init(ldg_stream *s, int point, ldg__hook_fn hook) {
  pk.target = s;
  atomic_store(&pk.point, point);
  sem_init(&pk.parked, 0, 0);
  sem_init(&pk.go, 0, 0);
  CHECK(ldg__set_hook(hook, NULL));
}

static void park_done(void) {
  ldg__set_hook(NULL, NULL);
  sem_destroy(&pk.parked);
  sem_destroy(&pk.go);
}

#endif /* STREAMLEDGER_TESTS_TORTURE_PARK_ONE_H */
