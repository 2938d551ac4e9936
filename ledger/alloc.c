/*
 * Every allocation of the ledger goes through here, so that tests can make
 * any one of them fail (ledger_testing.h) and prove that a failed call
 * changes nothing and leaks nothing.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/ledger_testing.h"

/* Fault injection (tests only). `armed` keeps the normal path to one load.
 * Orderings: armed is stored release after the settings it summarises and
 * loaded acquire before reading them (a thread that sees it armed sees the
 * countdown or `all` set with it); the settings and the count are otherwise
 * relaxed: the countdown's CAS decides which allocation fails on its own
 * (one total order on the counter), and the count is a statistic read after
 * the threads that failed were joined (or by the same thread). */
static _Atomic bool ldg__fault_armed;
static _Atomic bool ldg__fault_all;
static _Atomic long ldg__fault_countdown;
static _Atomic long ldg__fault_count;

void ldg__fault_fail_alloc_at(long n) {
  ldg__store_relaxed(&ldg__fault_countdown, n > 0 ? n : 0); /* by armed */
  ldg__store_release(&ldg__fault_armed, /* acquire in should_fail */
                     n > 0 || ldg__load_relaxed(&ldg__fault_all));
}

void ldg__fault_fail_all_allocs(bool on) {
  ldg__store_relaxed(&ldg__fault_all, on); /* published by armed */
  ldg__store_release(&ldg__fault_armed, /* acquire in should_fail */
                     on || ldg__load_relaxed(&ldg__fault_countdown) > 0);
}

long ldg__fault_injected(void) {
  return ldg__load_relaxed(&ldg__fault_count); /* a statistic, see above */
}

static bool ldg__fault_should_fail(void) {
  /* Acquire: pairs with the release stores of armed above. */
  if (__builtin_expect(!ldg__load_acquire(&ldg__fault_armed), 1)) return false;
  if (ldg__load_relaxed(&ldg__fault_all)) {
    ldg__fetch_add_relaxed(&ldg__fault_count, 1);
    return true;
  }
  long n = ldg__load_relaxed(&ldg__fault_countdown); /* the CAS decides */
  while (n > 0) {
    if (atomic_compare_exchange_weak_explicit(&ldg__fault_countdown, &n, n - 1,
                                              memory_order_relaxed,
                                              memory_order_relaxed)) {
      if (n == 1) {
        ldg__fetch_add_relaxed(&ldg__fault_count, 1);
        return true;
      }
      return false;
    }
  }
  return false;
}

/* Test hooks: compiled in only with LDG_TEST_HOOKS (//ledger:ledger_hooks). */
#ifdef LDG_TEST_HOOKS
static _Atomic(ldg__hook_fn) ldg__hook_fn_installed;
static void *_Atomic ldg__hook_arg;

bool ldg__set_hook(ldg__hook_fn fn, void *arg) {
  ldg__store_relaxed(&ldg__hook_arg, arg); /* published by the store below */
  /* Release: pairs with the acquire in ldg__hook, so a thread calling fn
   * sees its arg. */
  ldg__store_release(&ldg__hook_fn_installed, fn);
  return true;
}

void ldg__hook(int point, ldg_stream *s) {
  ldg__hook_fn fn = ldg__load_acquire(&ldg__hook_fn_installed); /* above */
  if (fn != NULL) {
    /* Relaxed: ordered by the acquire above. */
    fn((enum ldg__hook_point)point, s, ldg__load_relaxed(&ldg__hook_arg));
  }
}
#else
bool ldg__set_hook(ldg__hook_fn fn, void *arg) {
  (void)fn;
  (void)arg;
  return false;
}
#endif

void *ldg__malloc(size_t bytes) {
  if (ldg__fault_should_fail()) return NULL;
  return malloc(bytes);
}

void *ldg__calloc(size_t n, size_t size) {
  if (ldg__fault_should_fail()) return NULL;
  return calloc(n, size);
}

void *ldg__aligned_alloc(size_t align, size_t bytes) {
  if (ldg__fault_should_fail()) return NULL;
  /* aligned_alloc wants a multiple of the alignment. */
  size_t rounded = (bytes + align - 1) / align * align;
  return aligned_alloc(align, rounded);
}

void ldg__free(void *p) { free(p); }
