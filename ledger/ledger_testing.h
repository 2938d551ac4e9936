/*
 * Test hooks of the ledger. Not part of the public contract: tests and the
 * fuzzer use them to inject failures and widen race windows.
 */
#ifndef STREAMLEDGER_LEDGER_TESTING_H
#define STREAMLEDGER_LEDGER_TESTING_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes the n-th allocation the ledger attempts from now on (counting from
 * 1, across all threads) fail, and every one after it succeed again. n <= 0
 * disables injection. Returns nothing; see ldg__fault_injected. */
void ldg__fault_fail_alloc_at(long n);

/* Makes every allocation fail while on is true. */
void ldg__fault_fail_all_allocs(bool on);

/* Number of allocations the ledger made fail on purpose so far. */
long ldg__fault_injected(void);

/* ---- Hooks (only in //ledger:ledger_hooks, built with LDG_TEST_HOOKS) ----
 * Points inside the ledger where a test may pause a thread or inject a delay
 * to widen a race window. The hook runs on the thread passing the point; it
 * may sleep or spin. Points marked (rcu) are inside an RCU read-side section:
 * a hook pausing there delays deferred frees (and ldg_quiesce) until it
 * returns, never another thread's enqueue, mark, release or query. */
enum ldg__hook_point {
  LDG__HOOK_ENQUEUE_RESERVED = 1, /* seq reserved, not yet published */
  LDG__HOOK_ENQUEUE_PUBLISHED,    /* slot published */
  LDG__HOOK_SEGMENT_ALLOCATED,    /* (rcu) new segment built, not linked */
  LDG__HOOK_RELEASE_CLAIMED,      /* interval claimed, nothing taken yet */
  LDG__HOOK_RELEASE_TAKING,       /* (rcu) about to take one slot */
  LDG__HOOK_RELEASE_CHUNK_TAKEN,  /* chunk taken, keeps not yet run */
  LDG__HOOK_HEAD_ADVANCE,         /* (rcu) about to retire a segment */
};

struct ldg_stream;
typedef void (*ldg__hook_fn)(enum ldg__hook_point point,
                             struct ldg_stream *s, void *arg);

/* Installs fn (NULL removes it). Returns false if this build has no hooks. */
bool ldg__set_hook(ldg__hook_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_LEDGER_TESTING_H */
