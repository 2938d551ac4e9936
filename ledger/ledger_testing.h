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

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_LEDGER_TESTING_H */
