/*
 * Test hooks of the pool (pool/pool.c). Not part of the contract: tests
 * use them to check the contract table of sl_pool.h by counting, not by
 * timing.
 */
#ifndef STREAMLEDGER_POOL_POOL_TESTING_H
#define STREAMLEDGER_POOL_POOL_TESTING_H

#include <stddef.h>
#include <stdint.h>

#include "pool/sl_pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many of the pool's own mutexes (the registry, pool, trim mutexes:
 * any pool's) the calling thread has acquired since it started; a
 * successful try-lock counts. The layer's locks (sl_cuda.h) are not
 * counted. A test reads it before and after a loop. */
uint64_t slp__test_mutexes_taken(void);

/* How many classes' take-mutexes (a dry cache's refill, a large class's
 * borrow, a trim) the calling thread has acquired since it
 * started. Not counted by slp__test_mutexes_taken: they are per class, not
 * the pool's. */
uint64_t slp__test_take_mutexes_taken(void);

/* fn(arg) is called (any thread, any pool; NULL: no more) while a thread
 * refilling its dry cache from a class's shared list holds what it took
 * and the class's take-mutex. */
void slp__test_set_refill_hook(void (*fn)(void *), void *arg);

/* The blocks in the shared list of the class of `bytes`, which another
 * thread's refill could find now. Walks them: only from the hook above, or
 * while no other thread uses the pool. */
size_t slp__test_shared_count(slp_pool *p, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_POOL_POOL_TESTING_H */
