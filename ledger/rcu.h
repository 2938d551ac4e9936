/*
 * The ledger's only contact with liburcu (memb flavour, shared library).
 *
 * - Threads are registered on first use and unregistered when they exit, so
 *   callers never register anything themselves.
 * - RCU-published pointers are loaded and stored with C11 atomics (see
 *   atomics.h), never rcu_dereference/rcu_assign_pointer: ThreadSanitizer sees
 *   C11 atomics and does not see liburcu's.
 * - ThreadSanitizer cannot see grace periods either. This file is the one
 *   place that tells it: every read-side unlock releases a token, and every
 *   deferred callback acquires it before freeing, which orders each reader's
 *   accesses before the free that waited for it. Under other builds these
 *   annotations compile to nothing.
 */
#ifndef STREAMLEDGER_RCU_H
#define STREAMLEDGER_RCU_H

#include <stdatomic.h>
#include <stdbool.h>
#include <urcu/urcu-memb.h>

/* Enters a read-side critical section, registering the thread if needed. */
void ldg__rcu_read_lock(void);

/* Leaves it. */
void ldg__rcu_read_unlock(void);

/* Frees through fn after a grace period. Callable inside or outside a
 * read-side section. fn must begin with ldg__rcu_callback_enter(). */
void ldg__call_rcu(struct rcu_head *head, void (*fn)(struct rcu_head *));

/* First statement of every function passed to ldg__call_rcu. */
void ldg__rcu_callback_enter(void);

/* Waits for a grace period (synchronize_rcu): every reader inside a
 * read-side section when it was called has left it, and everything those
 * readers did happens-before the return (for ThreadSanitizer too). Not
 * inside a read-side section. */
void ldg__rcu_synchronize(void);

/* Whether a forked child of a multi-threaded process may start threads:
 * false under ThreadSanitizer (its runtime kills such a child), so the
 * ledger's fork handlers (reclaim.c) then start none. */
bool ldg__rcu_child_threads(void);

/* Waits for every callback queued so far (rcu_barrier). Not inside a
 * read-side section, not from a callback. */
void ldg__rcu_barrier(void);

/* ---- Asymmetric fences (single-issuer streams, reserve.c) -----------------
 * A store->load (Dekker) handshake whose one side is hot and the other rare,
 * done the way liburcu's memb flavour does its read side: the hot side
 * orders its store before its load with a compiler barrier only
 * (ldg__asym_light), and the rare side, between its own store and load,
 * calls ldg__asym_heavy: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which
 * makes every running thread of the process execute a full memory barrier
 * (a thread not running passes one when it is switched in). So for each
 * hot-side pair (store; light; load) the barrier falls either after the
 * store, which the rare side's load then sees, or before the load, which
 * then sees the rare side's store: one side always sees the other.
 * Without membarrier (an old kernel, a seccomp filter) both sides are
 * seq_cst fences, the C11 form of the same handshake.
 * ldg__asym_init (from every ldg_stream_create, before that stream exists:
 * owned streams use it too, owned.c's OWNED STREAMS) picks the mode once
 * per process. */
void ldg__asym_init(void);
void ldg__asym_heavy(void);
/* The light side's seq_cst fence, without membarrier (out of line: gcc
 * refuses atomic_thread_fence in inline code under -fsanitize=thread). */
void ldg__asym_fence(void);

/* 1 when membarrier is in use (set once by ldg__asym_init, before the first
 * stream exists, hence before any ldg__asym_light). */
extern _Atomic int ldg__asym_membarrier;

static inline void ldg__asym_light(void) {
  /* Relaxed: written once, before any single-issuer stream existed. */
  if (__builtin_expect(
          atomic_load_explicit(&ldg__asym_membarrier, memory_order_relaxed),
          1))
    atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
  else
    ldg__asym_fence();
}

#endif /* STREAMLEDGER_RCU_H */
