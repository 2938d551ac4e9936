/*
 * Test hooks of the pool (pool/pool.c). Not part of the contract: tests
 * use them to check the contract table of sl_pool.h by counting, not by
 * timing.
 */
#ifndef STREAMLEDGER_POOL_POOL_TESTING_H
#define STREAMLEDGER_POOL_POOL_TESTING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many of the pool's own mutexes (the registry, pool, trim mutexes:
 * any pool's) the calling thread has acquired since it started; a
 * successful try-lock counts. The layer's locks (sl_cuda.h) are not
 * counted. A test reads it before and after a loop. */
uint64_t slp__test_mutexes_taken(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_POOL_POOL_TESTING_H */
