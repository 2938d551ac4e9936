/*
 * Test hooks of the cuda/ layer. Not part of the contract: the suite uses
 * them to act at a moment no driver call marks. Compiled in only in
 * //cuda:cuda_hooks (SLC_TEST_HOOKS); elsewhere setting one fails.
 */
#ifndef STREAMLEDGER_CUDA_CUDA_TESTING_H
#define STREAMLEDGER_CUDA_CUDA_TESTING_H

#include <stdbool.h>

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

#endif /* STREAMLEDGER_CUDA_CUDA_TESTING_H */
