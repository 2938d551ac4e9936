/*
 * unlink_sb.pml: the registry's deferred unlink (ledger/registry.c,
 * UNLINKING WITHOUT WAITING; ledger issue 8, defect 4) under a weak memory
 * model, with explicit per-thread store buffers (the rules of
 * destroy_sb.pml).
 *
 * A release path that destroys a stream must not wait for reg_lock, so it
 * pushes the stream on ledger.unlink_pending and leaves the unlink to
 * whoever holds the lock:
 *
 *   pusher  (ldg__registry_unlink):  push; settle
 *   holder  (ldg__registry_unlock):  drain; unlock; settle
 *   settle  (ldg__registry_settle):  loop { seq_cst fence;
 *                                      if load pending == NULL: return;
 *                                      if trylock fails: return;
 *                                      drain; unlock }
 *   drain   (ldg__registry_drain_locked, under the lock): exchange pending
 *           with NULL, unlink what it held
 *
 * The claim: once nobody holds reg_lock, nothing is pending. It is a
 * store-buffering handshake on (pending, lock): if a pusher's trylock fails
 * it read the lock held, so the holder's unlock comes later, and the
 * holder's load after its fence sees the push. Without the fence (either
 * side) the push and the load can pass each other: a stream stays pending
 * with nobody holding the lock, never unlinked (never freed: its life bits
 * wait for the unlink).
 *
 * Memory (as destroy_sb.pml): writes to pending and lock (the push, the
 * drain's exchange, a lock or trylock, an unlock) go to the writer's store
 * buffer and reach memory at a nondeterministic later step; loads read the
 * own buffer first; an RMW waits until no other thread has that location
 * buffered; a seq_cst fence waits until the thread's buffer is empty. The
 * mutex is an atomic word: lock and a trylock that succeeds are acquire
 * RMWs, a trylock that fails only a load (it may read the lock still held
 * while the holder's unlock sits in its buffer), unlock a release store (the guarantees pthreads gives; glibc's happen to be
 * locked instructions on x86, so x86 hides the fences' absence).
 *
 * Threads: a holder (stream create or ledger destroy: lock, then
 * ldg__registry_unlock) and two pushers (destroys on release paths).
 * Checked at the end, buffers drained: nothing pending, every pushed
 * stream unlinked exactly once, the lock free; and mutual exclusion (a
 * lock or trylock that succeeds finds no owner; drains run under it).
 *
 * Mutants (each must fail): BUG_SETTLE_NO_FENCE (the fence removed from
 * ldg__registry_settle, both sides), BUG_PUSHER_NO_FENCE (only after a
 * push), BUG_HOLDER_NO_FENCE (only after an unlock).
 * Probes: PROBE_UL_HANDOFF (a pusher's trylock fails and the holder unlinks
 * its stream), PROBE_UL_STALE (a load misses another thread's buffered
 * write).
 */

#define NT 3           /* thread 0: the holder; 1, 2: pushers */

#if defined(BUG_SETTLE_NO_FENCE)
#define FENCE_PUSHER 0
#define FENCE_HOLDER 0
#elif defined(BUG_PUSHER_NO_FENCE)
#define FENCE_PUSHER 0
#define FENCE_HOLDER 1
#elif defined(BUG_HOLDER_NO_FENCE)
#define FENCE_PUSHER 1
#define FENCE_HOLDER 0
#else
#define FENCE_PUSHER 1
#define FENCE_HOLDER 1
#endif

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_UL_HANDOFF
#define P_HANDOFF(c) PROBE_AT(c)
#else
#define P_HANDOFF(c) skip
#endif
#ifdef PROBE_UL_STALE
#define P_STALE(c) PROBE_AT(c)
#else
#define P_STALE(c) skip
#endif

/* Memory. pending: the unlink stack, as the set of streams on it (bit t
 * for pusher t's stream). */
byte pending;
bit  lock;

/* Store buffers: thread t's pending write to pending / lock. */
bit bp_full[NT]; byte bp_v[NT];
bit bl_full[NT]; bit  bl_v[NT];

/* Ghost. */
byte unlinked;     /* streams unlinked (bit per pusher) */
byte owner = 255;  /* the thread holding the lock (255: none) */
bit  trylock_failed[NT];

#define T (_pid - 2)   /* init runs the flusher (_pid 1) first */

#define OTHERS_P(t) (bp_full[0] && t != 0 || bp_full[1] && t != 1 || bp_full[2] && t != 2)
#define OTHERS_L(t) (bl_full[0] && t != 0 || bl_full[1] && t != 1 || bl_full[2] && t != 2)
#if NT != 3
#error "OTHERS_* are written for three threads"
#endif
#define LOAD_P(t) (bp_full[t] -> bp_v[t] : pending)
#define LOAD_L(t) (bl_full[t] -> bl_v[t] : lock)
#define BUFFER_EMPTY(t) (!bp_full[t] && !bl_full[t])

#define FLUSH_P(t) atomic { bp_full[t] -> pending = bp_v[t]; bp_full[t] = 0 }
#define FLUSH_L(t) atomic { bl_full[t] -> lock = bl_v[t]; bl_full[t] = 0 }
proctype Flusher() {
end:
  do
  :: FLUSH_P(0)
  :: FLUSH_P(1)
  :: FLUSH_P(2)
  :: FLUSH_L(0)
  :: FLUSH_L(1)
  :: FLUSH_L(2)
  od
}

/* ldg__registry_drain_locked: exchange pending with NULL (RMW), unlink. */
inline drain() {
  atomic {
    !OTHERS_P(T) ->
    assert(owner == T);
    d = LOAD_P(T);
    bp_full[T] = 1; bp_v[T] = 0;
    assert((unlinked & d) == 0);
    unlinked = unlinked | d;
    P_HANDOFF(T == 0 && d != 0 && (trylock_failed[1] || trylock_failed[2]))
  }
}

/* pthread_mutex_unlock: a release store. */
inline unlock() {
  atomic { assert(owner == T); owner = 255; bl_full[T] = 1; bl_v[T] = 0 }
}

/* ldg__registry_settle */
inline settle(fenced) {
  do
  :: atomic { (!fenced || BUFFER_EMPTY(T)) ->     /* seq_cst fence */
       d = LOAD_P(T);                             /* relaxed load pending */
       P_STALE(!bp_full[T] && OTHERS_P(T))
     }
     if
     :: d == 0 -> break
     :: else
     fi;
     atomic {
       if
       :: !OTHERS_L(T) && LOAD_L(T) == 0 ->       /* trylock: acquire RMW */
          assert(owner == 255); owner = T; bl_full[T] = 1; bl_v[T] = 1; ok = 1
       :: LOAD_L(T) == 1 ->                       /* fails: only a load */
          ok = 0; trylock_failed[T] = 1
       fi
     }
     if
     :: !ok -> break                              /* its holder settles */
     :: else
     fi;
     drain();
     unlock()
  od
}

proctype Holder() {
  byte d; bit ok;
  atomic {                                        /* lock: acquire RMW */
    !OTHERS_L(T) && LOAD_L(T) == 0 -> assert(owner == 255); owner = T; bl_full[T] = 1; bl_v[T] = 1
  }
  /* ... the holder's own work (stream create, ledger destroy) ... */
  drain();                                        /* ldg__registry_unlock */
  unlock();
  settle(FENCE_HOLDER)
}

proctype Pusher() {
  byte d; bit ok;
  atomic {                                        /* push: acq_rel CAS loop */
    !OTHERS_P(T) ->
    bp_v[T] = LOAD_P(T) | (1 << T); bp_full[T] = 1
  }
  settle(FENCE_PUSHER)
}

init {
  atomic {
    run Flusher();
    run Holder();       /* thread 0 */
    run Pusher();       /* thread 1 */
    run Pusher()        /* thread 2 */
  }
  (_nr_pr == 2);
  (BUFFER_EMPTY(0) && BUFFER_EMPTY(1) && BUFFER_EMPTY(2));
  d_step {
    assert(lock == 0);
    assert(pending == 0);          /* nobody holds the lock: nothing pending */
    assert(unlinked == 6)          /* both pushers' streams, once each */
  }
}
