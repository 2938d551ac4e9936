/*
 * Test hooks of the cuda/ layer. Not part of the contract: the suite uses
 * them to act at a moment no driver call marks. Compiled in only in
 * //cuda:cuda_hooks (SLC_TEST_HOOKS); elsewhere setting one fails.
 */
#ifndef STREAMLEDGER_CUDA_CUDA_TESTING_H
#define STREAMLEDGER_CUDA_CUDA_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda/sl_engine.h"

enum slc__hook_point {
  /* A drain (ldg_settle_vector), or the sync after a record that failed,
   * found its stream being destroyed and is about to wait for that
   * destroy's synchronisation. Runs once per such wait, on the waiting
   * thread, holding nothing. */
  SLC__HOOK_DRAIN_WAITS = 1,
  /* slc_engine_enable gave one stream that existed before it its marker
   * ring; the next streams are not attached yet. Runs on the enabling
   * thread, holding the context's stream-list mutex. */
  SLC__HOOK_ENGINE_ATTACHED = 2,
};

typedef void (*slc__hook_fn)(enum slc__hook_point point, void *arg);

/* Installs fn (NULL removes it). Returns false if this build has no hooks. */
bool slc__set_test_hook(slc__hook_fn fn, void *arg);

/* A simulated engine thread, for tests that count what the thread's wait
 * policy does (sl_engine.h, WAITING and PACING) without timing anything.
 * slc__engine_enable_sim is slc_engine_enable (cfg->thread must be true:
 * the thread's policy and placement) except that no thread starts and the
 * engine reads the clock set by slc__engine_sim_clock (ns, from now_ns on;
 * never lower). slc__engine_sim_step runs what the thread would do at that
 * instant: one poll (keeps run on the caller, counted as the thread's),
 * then its decision: 0 poll again at once, > 0 sleep that many us (counted
 * in thread_sleeps), -1 park until the next issue (thread_parks). One
 * simulated engine per process at a time; the test is its only caller.
 * Only in //cuda:cuda_hooks (elsewhere: not defined). */
int slc__engine_enable_sim(slc_context *c, const slc_engine_config *cfg,
                           uint64_t now_ns);
void slc__engine_sim_clock(slc_context *c, uint64_t ns);
long slc__engine_sim_step(slc_context *c);

#endif /* STREAMLEDGER_CUDA_CUDA_TESTING_H */
