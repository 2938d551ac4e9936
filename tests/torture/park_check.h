/*
 * Checks shared by the tests that park threads (stall_test,
 * interleave_test, reserve_test, single_issuer_test): FAIL and CHECK macros
 * that name the test and the case being run, then abort (a core shows
 * every thread), a semaphore wait that fails the case after a watchdog
 * delay instead of hanging, and SANITIZED.
 * Define PARK_TEST_NAME before including it.
 */
#ifndef STREAMLEDGER_TESTS_TORTURE_PARK_CHECK_H
#define STREAMLEDGER_TESTS_TORTURE_PARK_CHECK_H

#include <errno.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ledger/ledger.h"

#ifndef PARK_TEST_NAME
#error "define PARK_TEST_NAME before including park_check.h"
#endif

/* SANITIZED: built with ThreadSanitizer or AddressSanitizer (gcc's macros,
 * clang's __has_feature): tests scale their work down. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* A watchdog, not a timing assertion: a call blocked behind a parked thread
 * never finishes; 20 s is far beyond any honest run, sanitizers included. */
#define TIMEOUT_S 20

static const char *g_case = "setup";

static void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void fail_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "\n%s FAILED at %s:%d in case \"%s\": ", PARK_TEST_NAME,
          file, line, g_case);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  abort();
}

#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)
#define CHECK(cond)                        \
  do {                                     \
    if (!(cond)) FAIL("CHECK(%s)", #cond); \
  } while (0)
#define CHECK_RC(call, want)                                                  \
  do {                                                                        \
    int rc_ = (call);                                                         \
    if (rc_ != (want)) {                                                      \
      FAIL("%s returned %d (%s), expected %s", #call, rc_, ldg_strerror(rc_), \
           #want);                                                            \
    }                                                                         \
  } while (0)
#define CHECK_EQ_U(a, b)                                                 \
  do {                                                                   \
    unsigned long long a_ = (unsigned long long)(a),                     \
                       b_ = (unsigned long long)(b);                     \
    if (a_ != b_) FAIL("CHECK(%s == %s): %llu vs %llu", #a, #b, a_, b_); \
  } while (0)

/* Waits for sem; fails the case if that takes TIMEOUT_S. */
static void sem_wait_or_fail(sem_t *sem, const char *what) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += TIMEOUT_S;
  while (sem_timedwait(sem, &until) != 0) {
    if (errno == ETIMEDOUT) FAIL("%s: not within %d s", what, TIMEOUT_S);
  }
}

#endif /* STREAMLEDGER_TESTS_TORTURE_PARK_CHECK_H */
