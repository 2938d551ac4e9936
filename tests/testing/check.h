/*
 * Shared helpers of the table-driven test programs (tests/cuda, tests/pool,
 * tests/torch_alloc): CHECK macros that print file:line, the expression and
 * the library's last error message, then make the enclosing test function
 * return 1 (its state is not torn down; the runner stops there), and the
 * runner of a test table.
 *
 * The message comes from TESTING_LAST_ERROR(), slc_last_error_message() unless
 * the file defines it before including this header (sl_torch_test:
 * sl_torch_last_error()). It is expanded where CHECK is used, so the file
 * includes the header that declares it.
 *
 * (tests/unit/check.h is the unit tests' own: its CHECKs exit instead.)
 */
#ifndef STREAMLEDGER_TESTS_TESTING_CHECK_H
#define STREAMLEDGER_TESTS_TESTING_CHECK_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* SANITIZED: built with ASan or TSan (tests scale their loops down);
 * HAVE_ASAN: with ASan, whose interface (poisoning queries) is included. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define HAVE_ASAN 1
#else
#define HAVE_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

#ifndef TESTING_LAST_ERROR
#define TESTING_LAST_ERROR() slc_last_error_message()
#endif

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "  FAILED %s:%d: %s (last error: %s)\n", __FILE__,   \
              __LINE__, #cond, TESTING_LAST_ERROR());                      \
      return 1;                                                            \
    }                                                                      \
  } while (0)
#define CHECK_RC(call, want) CHECK((call) == (want))
/* The last error message contains sub. */
#define CHECK_MSG(sub) CHECK(strstr(TESTING_LAST_ERROR(), (sub)) != NULL)

/* One row of a test table: fn returns 0 when it passed. */
typedef struct test_case {
  const char *name;
  int (*fn)(void);
  const char *what;
} test_case;

/*
 * Runs the n tests in order, or only the one named only (NULL: all), printing
 * "RUN  name: what" before each and "PASS name" or "FAIL name" after, then
 * "<prog>: all passed" or "<prog>: FAILED" on stdout. Stops at the first
 * failure (its state, the executor included, may be left installed). Returns
 * the failures' codes or-ed together: 0 when every test run passed.
 */
static inline int run_test_table(const char *prog, const test_case *tests,
                                 size_t n, const char *only) {
  int failed = 0;
  for (size_t i = 0; i < n; i++) {
    if (only != NULL && strcmp(only, tests[i].name) != 0) continue;
    printf("RUN  %s: %s\n", tests[i].name, tests[i].what);
    fflush(stdout);
    int rc = tests[i].fn();
    printf("%s %s\n", rc == 0 ? "PASS" : "FAIL", tests[i].name);
    fflush(stdout);
    failed |= rc;
    if (rc != 0) break;
  }
  printf("%s: %s\n", prog, failed ? "FAILED" : "all passed");
  return failed;
}

/* The table's row count. */
#define TEST_COUNT(tests) (sizeof(tests) / sizeof((tests)[0]))

#endif /* STREAMLEDGER_TESTS_TESTING_CHECK_H */
