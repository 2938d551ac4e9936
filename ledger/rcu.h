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

/* Waits for every callback queued so far (rcu_barrier). Not inside a
 * read-side section, not from a callback. */
void ldg__rcu_barrier(void);

#endif /* STREAMLEDGER_RCU_H */
