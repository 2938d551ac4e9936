/*
 * RCU glue: automatic thread registration and the ThreadSanitizer
 * annotations for liburcu's grace periods (see rcu.h). Every way the
 * ledger waits for a grace period is here: call_rcu's callbacks
 * (ldg__rcu_callback_enter), rcu_barrier, and synchronize_rcu, which the
 * segment reclaimer (reclaim.c) runs once per batch; each acquires the
 * token every read-side unlock releases.
 */
#define _DEFAULT_SOURCE 1         /* syscall(2), for membarrier */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include "ledger/rcu.h"

#include <linux/membarrier.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ledger/ledger_testing.h"

#if defined(__SANITIZE_THREAD__)
#define LDG__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LDG__TSAN 1
#endif
#endif

#ifdef LDG__TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
/* The token every grace period is annotated on. Its value is never used. */
static char ldg__rcu_gp_token;
#define LDG__TSAN_RELEASE() __tsan_release(&ldg__rcu_gp_token)
#define LDG__TSAN_ACQUIRE() __tsan_acquire(&ldg__rcu_gp_token)

/* liburcu is not instrumented, yet the memory it allocates and frees goes
 * through ThreadSanitizer's malloc interceptors, which record each allocation
 * and free as a write. rcu_barrier allocates its completion and work items on
 * the calling thread, and liburcu's call_rcu thread frees them after a
 * handshake (futexes, atomics) ThreadSanitizer cannot see: a false race,
 * calloc in urcu_memb_barrier against free in call_rcu_thread.
 * So the calling thread's memory accesses are ignored for the duration of
 * the liburcu calls that allocate (barrier, call_rcu): no write is recorded
 * for what liburcu allocates there, and nothing is left for its other thread
 * to race with. Synchronisation is still seen (ignoring covers accesses, not
 * mutexes), and the ledger's own memory never changes hands inside these
 * calls: its ordering is the grace-period token above.
 * An annotation, not a suppression: it needs no library name to match, so it
 * works with liburcu linked statically or shared, with gcc's runtime and with
 * clang's (whose runtime, linked into the executable, defines
 * __tsan_default_suppressions itself, so a library's weak definition of it
 * never took effect), and it leaves a program's own suppressions alone. */
#define LDG__TSAN_IGNORE_BEGIN() __tsan_ignore_thread_begin()
#define LDG__TSAN_IGNORE_END() __tsan_ignore_thread_end()
#else
#define LDG__TSAN_RELEASE() ((void)0)
#define LDG__TSAN_ACQUIRE() ((void)0)
#define LDG__TSAN_IGNORE_BEGIN() ((void)0)
#define LDG__TSAN_IGNORE_END() ((void)0)
#endif

/* Registration: a thread-local flag for the fast check, and a pthread key
 * whose destructor unregisters the thread when it exits. */
static _Thread_local bool ldg__rcu_registered;
static pthread_key_t ldg__rcu_key;
static pthread_once_t ldg__rcu_key_once = PTHREAD_ONCE_INIT;

static void ldg__rcu_thread_exit(void *unused) {
  (void)unused;
  urcu_memb_unregister_thread();
  ldg__rcu_registered = false;
}

static void ldg__rcu_make_key(void) {
  if (pthread_key_create(&ldg__rcu_key, ldg__rcu_thread_exit) != 0) abort();
}

static void ldg__rcu_register_slow(void) {
  (void)pthread_once(&ldg__rcu_key_once, ldg__rcu_make_key);
  urcu_memb_register_thread();
  /* Any non-NULL value makes the destructor run at thread exit. */
  if (pthread_setspecific(ldg__rcu_key, &ldg__rcu_registered) != 0) abort();
  ldg__rcu_registered = true;
}

static inline void ldg__rcu_ensure_registered(void) {
  if (__builtin_expect(!ldg__rcu_registered, 0)) ldg__rcu_register_slow();
}

void ldg__rcu_read_lock(void) {
  ldg__rcu_ensure_registered();
  urcu_memb_read_lock();
}

void ldg__rcu_read_unlock(void) {
  /* Everything this reader did happens-before any free that waits for it. */
  LDG__TSAN_RELEASE();
  urcu_memb_read_unlock();
}

void ldg__call_rcu(struct rcu_head *head, void (*fn)(struct rcu_head *)) {
  ldg__rcu_ensure_registered(); /* call_rcu takes a read lock internally */
  /* The unlinking thread's writes happen-before the callback. */
  LDG__TSAN_RELEASE();
  LDG__TSAN_IGNORE_BEGIN();
  urcu_memb_call_rcu(head, fn);
  LDG__TSAN_IGNORE_END();
}

void ldg__rcu_callback_enter(void) {
  /* Pairs with every read-side unlock and every ldg__call_rcu: liburcu ran
   * this callback only after a grace period that waited for those readers. */
  LDG__TSAN_ACQUIRE();
}

bool ldg__rcu_child_threads(void) {
#ifdef LDG__TSAN
  return false;
#else
  return true;
#endif
}

void ldg__rcu_synchronize(void) {
  /* liburcu allocates nothing here; a thread need not be registered to
   * wait for a grace period. */
  urcu_memb_synchronize_rcu();
  /* Pairs with every read-side unlock (as ldg__rcu_callback_enter): the
   * grace period waited for those readers. */
  LDG__TSAN_ACQUIRE();
}

void ldg__rcu_barrier(void) {
  ldg__rcu_ensure_registered();
  LDG__TSAN_IGNORE_BEGIN();
  urcu_memb_barrier();
  LDG__TSAN_IGNORE_END();
  LDG__TSAN_ACQUIRE();
}

/* ---- Asymmetric fences (rcu.h) ------------------------------------------------ */

_Atomic int ldg__asym_membarrier;
static pthread_once_t ldg__asym_once = PTHREAD_ONCE_INIT;

static long ldg__membarrier(int cmd) {
#ifdef __NR_membarrier
  return syscall(__NR_membarrier, cmd, 0);
#else
  (void)cmd;
  return -1;
#endif
}

static void ldg__asym_pick(void) {
  long mask = ldg__membarrier(MEMBARRIER_CMD_QUERY);
  bool ok = mask >= 0 && (mask & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            ldg__membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  /* Relaxed: pthread_once orders this before every ldg__asym_init's
   * return, hence before any stream exists (rcu.h). */
  atomic_store_explicit(&ldg__asym_membarrier, ok ? 1 : 0,
                        memory_order_relaxed);
}

void ldg__asym_init(void) {
  (void)pthread_once(&ldg__asym_once, ldg__asym_pick);
}

void ldg__asym_fence(void) { atomic_thread_fence(memory_order_seq_cst); }

/* Calls of ldg__asym_heavy, for tests (ledger_testing.h): counted only in
 * //ledger:ledger_hooks. */
#ifdef LDG_TEST_HOOKS
static _Atomic uint64_t ldg__asym_heavy_calls;
#endif

uint64_t ldg__testing_asym_heavy_calls(void) {
#ifdef LDG_TEST_HOOKS
  /* Relaxed: a count, read at a quiet moment. */
  return atomic_load_explicit(&ldg__asym_heavy_calls, memory_order_relaxed);
#else
  return 0;
#endif
}

void ldg__asym_heavy(void) {
#ifdef LDG_TEST_HOOKS
  /* Relaxed: a count (above). */
  atomic_fetch_add_explicit(&ldg__asym_heavy_calls, 1, memory_order_relaxed);
#endif
  /* The fences order this thread's own store before the call and its load
   * after it, for the compiler and for C11 (the system call is a full
   * barrier on this CPU as well). */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&ldg__asym_membarrier, memory_order_relaxed) &&
      ldg__membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    abort(); /* registered by ldg__asym_pick: cannot fail */
  atomic_thread_fence(memory_order_seq_cst);
}
