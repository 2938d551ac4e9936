/*
 * RCU glue: automatic thread registration and the ThreadSanitizer
 * annotations for liburcu's grace periods (see rcu.h).
 */
#include "ledger/rcu.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

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
/* The token every grace period is annotated on. Its value is never used. */
static char ldg__rcu_gp_token;
#define LDG__TSAN_RELEASE() __tsan_release(&ldg__rcu_gp_token)
#define LDG__TSAN_ACQUIRE() __tsan_acquire(&ldg__rcu_gp_token)

/* liburcu is not instrumented, so ThreadSanitizer sees the memory it hands
 * between threads (rcu_barrier's completion, call_rcu's queues) through the
 * malloc/free interceptors without the synchronisation that orders them.
 * Ignore interceptor calls made from inside liburcu. Weak, so a program with
 * its own suppressions keeps them (and should add these lines). */
const char *__tsan_default_suppressions(void) __attribute__((weak));
const char *__tsan_default_suppressions(void) {
  return "called_from_lib:liburcu-memb.so\n"
         "called_from_lib:liburcu-common.so\n";
}
#else
#define LDG__TSAN_RELEASE() ((void)0)
#define LDG__TSAN_ACQUIRE() ((void)0)
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
  urcu_memb_call_rcu(head, fn);
}

void ldg__rcu_callback_enter(void) {
  /* Pairs with every read-side unlock and every ldg__call_rcu: liburcu ran
   * this callback only after a grace period that waited for those readers. */
  LDG__TSAN_ACQUIRE();
}

void ldg__rcu_barrier(void) {
  ldg__rcu_ensure_registered();
  urcu_memb_barrier();
  LDG__TSAN_ACQUIRE();
}
