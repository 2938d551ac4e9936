/*
 * The progress engine (sl_engine.h): completion markers on streams, turned
 * into ledger releases by engine threads or by callers of
 * slc_engine_poll. One engine per device of the context (DEVICES below);
 * what is said of "the engine" holds for each.
 *
 * WHY A RELEASE IS NEVER EARLY
 *   A marker is (event, mark): the placer reads m = ldg_mark(stream), then
 *   records the event on the stream. Every operation with seq <= m was
 *   issued to the driver before it was enqueued (issue, then enqueue), so
 *   before m was read, so before the record: the driver completes the event
 *   only after all of them. The engine releases the stream to m only after
 *   cuEventQuery said the event completed, and only from a marker whose
 *   event has not been recorded again since (a slot is re-recorded only
 *   after the consumer moved past it). Anything that fails — the record, the
 *   event's creation, a full ring, a query — leaves the work to a later
 *   marker, a tail marker or a synchronisation: later, never earlier.
 *
 * THE RING OF ONE STREAM (struct slc__mq)
 *   Single producer, single consumer, each role held by a try-flag:
 *   - placing: whoever wins it (an issuing thread, or the engine placing a
 *     tail marker) may record one marker; losers skip (the winner's marker,
 *     the next one or a tail marker covers their work). It is held across
 *     one cuEventRecord inside the stream's gate; nobody waits for it.
 *   - the engine's consumer flag (one per device's engine) makes one thread
 *     at a time the consumer of every ring of that device: it reads head..tail, queries, and
 *     advances head. Keeps never run under it: the consumer collects
 *     (ledger stream, mark) pairs, each with a ledger reference, drops the
 *     flag, then releases.
 *   The producer fills slot[tail % cap] and publishes it with a release
 *   store of tail; the consumer reads tail with acquire, and hands the slot
 *   back with a release store of head, which the producer reads with
 *   acquire before reusing it. head and tail are free-running counters
 *   compared by difference.
 *
 * RELEASES, IN ORDER
 *   The consumer raises q->target to the highest completed mark and hands
 *   the stream (with a reference on q and one on the ledger stream) to the
 *   release phase, run after the consumer flag is dropped. There one thread
 *   at a time holds q->releasing and releases to target, again and again
 *   while target grew; a thread that finds the flag taken leaves its target
 *   to the holder. So the engine's releases of one stream never overlap and
 *   its keeps run in sequence order (a sync on another thread may still
 *   release the same stream concurrently: the ledger splits that work), and
 *   a keep that blocks holds up only its own stream. The hand-over is a
 *   Dekker pair, all seq_cst: the consumer stores target then tries the
 *   flag; the holder stores the flag free then re-reads target: one of them
 *   sees the other.
 *
 * PACING: WHY THE ISSUE RATE (sl_engine.h has the rule and the bound)
 *   The engine thread's CPU is its wake-ups: 4-6 us of thread CPU for the
 *   bare wake-up on the H200 KVM guest whatever the primitive or the timer
 *   slack (nanosleep, clock_nanosleep, futex, timerfd, epoll: wake_bench),
 *   9.5-13.5 us for a batch wake-up of the rate scenario in situ (its poll,
 *   query, record and ~10 keeps on lines the issuer wrote), against ~430
 *   instructions for the poll itself (bench/RESULTS.md, issue 9, third and
 *   fifth rounds). So <= 1 us per released operation at 100 k ops/s
 *   needs <= ~0.2 wake-ups per operation, i.e. one per >= 50 us of issued
 *   work, while a waiting issuer's keep must come within ~10 us of its
 *   operation's completion. The two cannot be told apart at a marker's
 *   completion: an empty kernel completes in ~5 us, before the next issue
 *   10 us later, so the streaming issuer too has issued nothing past each
 *   marker, and "work issued past the marker" (the first rounds' signal)
 *   made one wake-up per operation (1.07-1.14 polls per op on the H200,
 *   either placement). What differs is the rate: the latency scenario's
 *   issuer, which waits for each keep, issues every ~25 us (kernel, keep
 *   latency, issue); the streaming one every 10 us. The thread counts the
 *   stream's mark over windows of poll_max_us, which it needs no extra
 *   wake-up for (it polls at least that often while the stream has work)
 *   and which costs the issuer nothing (the mark is the ledger's). The
 *   threshold, one issue per 12.5 us on average over a window (8 per
 *   100 us; the rate, whatever poll_max_us), sits
 *   between the two with margin both ways; a waiting issuer that does
 *   cross it is found out by the same count one window later — it issued
 *   nothing while its keep was held — and backs off (doubling the windows
 *   needed), so such mistakes cost one delayed keep each and grow rare.
 *   The decision is causal only in the direction that matters for
 *   latency: batching never holds a keep past the bound, and leaving it is
 *   immediate. tests/cuda/engine_pace_test.c runs the policy on a
 *   simulated clock and counts wake-ups, markers and delays for each
 *   pattern.
 *   A batched release does not make the thread poll again at once (a
 *   prompt release does: its issuer may issue right away), and a batching
 *   stream's tail or engine-placed marker is placed at the batch's wake-up
 *   (up to poll_us early counts: the wake-up's truncation to whole us).
 *
 * WAKING THE ENGINE THREAD
 *   A thread (struct slc__waiter: one per device, or one for all with
 *   one_thread) parks (futex on its `gen`) only when a poll of its devices
 *   found nothing pending and nothing uncovered (adaptive wait: for
 *   linger_us; until then it naps and issuers, seeing parked == 0, make no
 *   syscall). A Dekker pair whose one side is rare: the thread reads gen,
 *   stores parked = 1, runs the heavy side of the asymmetric fence
 *   (ledger/rcu.h, ldg__asym_heavy: membarrier(PRIVATE_EXPEDITED), every
 *   running thread of the process makes a full barrier), then polls its
 *   devices once more before sleeping; an issuer enqueues, then
 *   (slc__engine_kick) the light side (ldg__asym_light: a compiler barrier)
 *   and loads the parked flag of its stream's device's thread (q->e->w)
 *   and, if set, bumps gen and wakes. The barrier each running issuer makes
 *   falls either after its enqueue's store, which the final poll (after
 *   the call) then sees, or before its load of parked, which then sees 1;
 *   a descheduled issuer passed a barrier when it was switched out, with
 *   the same either-or. So either the final poll sees the new work or the
 *   issuer sees the parked thread and its bump makes the futex wait
 *   return. The issuer pays no fence and no locked instruction: the
 *   layer's ledger streams are owned (ledger/owned.c, OWNED STREAMS: the
 *   issuing thread reserves by a store of otail, no RMW), and the wake-up
 *   costs the thread one membarrier per park (it parks only after
 *   linger_us idle). Which store the final poll must see: slc__mq_consume
 *   reads ldg_mark (ldg__tail_acquire: tail, or otail while tail is 0),
 *   and a mark above placed_mark is uncovered, so the thread does not
 *   park. On an owned stream the enqueue's store is otail's (the owner's
 *   release store, before R2); on a revoked one the seq_cst CAS or
 *   fetch_add of tail, at least every otail the owner stored (OWNED
 *   STREAMS, "Readers of the tail"); either is a store before the
 *   issuer's barrier. An issuer that placed a marker (PLACE_ISSUER) stores
 *   q->tail and placed_mark before the barrier too: the same either-or.
 *   Where membarrier is not in use (ldg__asym_membarrier 0: an old kernel,
 *   a seccomp filter) both sides are seq_cst fences (C11 7.17.4: a fence
 *   pair orders one side's store before the other's load), and every
 *   ledger stream starts shared (own8), so the enqueue is a seq_cst RMW of
 *   tail; an issuer whose only new work is that entry
 *   (slc_stream_record_deferred, slc__engine_kick_enqueued) makes no fence
 *   then either: the RMW takes the fence's place (argued there).
 *   slc_engine_enable picks the mode (ldg__asym_init) before it starts a
 *   thread, so a thread never parks with a fence while a stream created
 *   meanwhile is owned. Under ThreadSanitizer, which models neither
 *   membarrier nor fences, both sides make a seq_cst RMW of one word
 *   instead (slc__fence_seq_cst).
 *
 * DEVICES: ONE ENGINE EACH (issue 13; the evidence: bench/RESULTS.md,
 * "Several GPUs", and tests/cuda/engine_multigpu_test.c)
 *   A stream's markers are queried and recorded in its device's context,
 *   its releases concern only its ledger stream, and its pacing is its
 *   own: nothing of the engine needs two devices at once. One engine for
 *   all made them share (1) the consumer flag: a request thread's
 *   slc_engine_poll_stream on device 1 found it taken by a poll of device
 *   0 and released nothing; (2) the thread: a keep blocking it held up
 *   every device's releases, and it made each stream's context current in
 *   turn, a cuCtxSetCurrent whenever the device changed along its list
 *   (16 per poll for 2 streams on each of 8 devices); (3) the predicted
 *   completion of markers (pred_ns): one long kernel on device 0 made
 *   device 1's waiting issuer wait ~poll_max_us for each of its next ~25
 *   keeps. So each device gets its own list, flag, pred_ns and counters
 *   (struct slc__dev_engine), and a thread (struct slc__waiter) that
 *   polls it; a stream joins the engine of s->device and its ring points
 *   at it (q->e), so the issuing path finds its engine without reading
 *   the context's. The thread keeps the context it made current
 *   (waiter.known) and asks the driver again only after keeps or on_error
 *   ran on it (they may switch): none of its polls switches contexts in a
 *   steady state. slc_engine_poll polls each device's engine in turn (one
 *   context switch per device with work); the counters are per device
 *   and summed by slc_engine_stats_get.
 *
 * REGISTRATION
 *   Every stream is on its context's list (c->streams) from creation to its
 *   last unref, under c->streams_mu. It joins its device's engine's list
 *   at creation if the engine is on, or when slc_engine_enable walks the
 *   context's list (both under streams_mu, so a stream joins exactly once);
 *   it leaves at its last unref. Joining and leaving also take that
 *   engine's consumer flag (waited for: a poll holds it only for queries
 *   and records). A stream that joins late may have issuers running: they
 *   load s->mq with acquire (a release store after the ring, and its
 *   engine pointer q->e, were initialised), and until they see it they
 *   place no marker — their work, like the work
 *   issued before, is above placed_mark (0 at first), so the engine's next
 *   poll covers it with a tail marker (enable wakes a parked thread for
 *   that). After that nobody else touches the ring: the
 *   handle's last reference is gone, so no issuer may use it, and no poll
 *   reaches it. So the ring and its events go there, although the
 *   slc_stream itself may live on (it is freed by its ledger stream's
 *   finalizer, stream.c): a settle's drain and a pending engine release
 *   (which holds its own references on the ledger stream and on the
 *   slc__mq, never on the ring) may still use it, neither touches the
 *   ring. A stream whose last unref met a failed sync leaves too, and waits
 *   in the context's limbo list: its markers could only fail like that
 *   sync, and slc_context_destroy, which stops the engine before anything
 *   else, proves it complete by a sync of its own.
 */
/* syscall (futex) and clock_gettime: GNU and POSIX declarations. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cuda/internal.h"
#include "cuda/sl_engine.h"
#include "ledger/rcu.h" /* the park's asymmetric fence */

#define SLC__MAX_RING 4096
#define SLC__BATCH 64 /* stream releases collected per poll */
/* PACING: a stream that issues a sequence number at least every
 * SLC__PACE_GAP_NS on average over a window of poll_max_us (80 k/s: 8 per
 * 100 us, 16 per the default 200 us), SLC__PACE_NEED0 windows in a row, is
 * batched; less than half that rate in one window ends it. The rate, not a
 * count per window, so that a longer window (fewer wake-ups) does not also
 * lower the threshold towards a waiting issuer's rate (~25 us apart on the
 * H200). A batching that ended in its first window (the issuer was
 * waiting after all) doubles the windows needed next time, up to
 * SLC__PACE_NEED_MAX; one that went on resets them. */
#define SLC__PACE_GAP_NS 12500u
#define SLC__PACE_NEED0 2u
#define SLC__PACE_NEED_MAX 1024u

struct slc__mslot {
  CUevent ev; /* created on first use, destroyed with the ring */
  ldg_seq mark;
  atomic_uint_fast64_t placed_ns; /* atomic: read by progress snapshots */
};

struct slc__mq {
  slc_stream *s;
  struct slc__dev_engine *e; /* its device's engine */
  struct slc__mq *next; /* the engine's list, under its consumer flag */
  unsigned cap;         /* power of two */
  struct slc__mslot *ring;
  atomic_uint_fast64_t head; /* consumer */
  atomic_uint_fast64_t tail; /* producer */
  atomic_int placing;        /* the producer's try-flag */
  atomic_uint_fast64_t placed_mark; /* mark of the newest marker */
  atomic_uint_fast64_t since;       /* ops issued since it (approximate) */
  atomic_uint_fast64_t last_ns;     /* when it was placed */
  ldg_seq collected; /* highest completed mark handed to releasers;
                      * consumer only */
  /* Releasing, one thread at a time per stream (see RELEASES below). */
  atomic_uint_fast64_t target;   /* highest mark to release to */
  atomic_int releasing;          /* the releaser's try-flag */
  atomic_uint_fast64_t released; /* highest mark released to */
  atomic_long refs;              /* the list's, and each pending releaser's */
  atomic_int err;  /* sticky CUresult; 0 = none */
  atomic_int err_unreported; /* err set by a placer, on_error not called */
  int query_fails; /* consecutive; consumer only */
  unsigned misses; /* queries of the oldest marker that found it not done;
                    * consumer only */
  /* PACING (the adaptive thread's; consumer only): the current window of
   * the issue rate, and the stream's state. */
  bool win_open;     /* win_ns, win_mark are set */
  bool batching;     /* taken for a streaming issuer */
  bool confirmed;    /* a window went on streaming since batching began */
  unsigned fast;     /* consecutive fast windows, while not batching */
  unsigned need;     /* fast windows needed to begin batching */
  uint64_t win_ns;   /* when the window began */
  ldg_seq win_mark;  /* the stream's mark then */
};

/* Each device's engine and each thread's waiter on cache lines of its own
 * (two lines: the adjacent-line prefetch), so that one device's thread and
 * issuers, which write its flag and counters, do not slow another's. */
#define SLC__LINE 128

/* One device's engine (DEVICES): its streams, its consumer flag, its
 * counters, and the thread that polls it. */
struct slc__dev_engine {
  _Alignas(SLC__LINE) slc_context *c;
  struct slc__engine *en; /* the context's */
  int device;
  slc_engine_config cfg;  /* a copy of the context's; read-only */
  atomic_int consumer; /* try-flag: 1 while a thread is the consumer */
  struct slc__mq *streams;
  bool has_thread;        /* w runs a thread (not simulated) */
  bool by_engine; /* SLC_ENGINE_PLACE_ENGINE with a thread: issuers place
                   * no marker */
  struct slc__waiter *w;  /* the thread polling this engine; NULL: none */
  uint64_t pred_ns; /* predicted marker completion age; consumer only */
  struct {
    atomic_uint_fast64_t polls, placed, tails, done, skipped, record_failures,
        query_failures, stream_errors, releases, seqs_released, events_live,
        pending, kicks, batch_enters, batch_exits;
  } n;
};

/* One engine thread (WAKING): it polls devices [first, first + count) in
 * turn and waits as WAITING says. One per device; one for all with
 * config.one_thread, or simulated (tests). */
struct slc__waiter {
  _Alignas(SLC__LINE) struct slc__engine *en;
  int first, count;
  bool started; /* thread is running (not simulated) */
  pthread_t thread;
  atomic_int stop;
  atomic_uint gen;    /* futex word of the parked thread */
  atomic_int parked;
  /* The context current on the thread, as far as the engine knows (NULL:
   * unknown, ask the driver). The thread's own: it makes its device's
   * context current once, and again only after keeps it ran (which may
   * switch) or a failure (slc__engine_current). */
  CUcontext known;
  atomic_uint_fast64_t sleeps, parks;
};

/* The context's engine (c->engine): one slc__dev_engine per device of the
 * context, and the threads. */
struct slc__engine {
  slc_context *c;
  slc_engine_config cfg;
  int n_dev;
  struct slc__dev_engine *dev; /* n_dev */
  int n_waiters;
  struct slc__waiter *waiters; /* n_waiters: 0 without a thread */
#ifdef SLC_TEST_HOOKS
  /* Driven by slc__engine_sim_step (cuda_testing.h): no thread, the
   * thread's policy (one simulated thread for every device), the test's
   * clock. */
  bool sim;
  atomic_uint_fast64_t sim_ns;
#endif
};

/* A seq_cst fence for the Dekker pairs below. ThreadSanitizer does not
 * model fences (GCC refuses them under -fsanitize=thread); there, a seq_cst
 * read-modify-write of one shared word by both sides gives the same
 * guarantee: whichever RMW comes second in that word's order synchronises
 * with the first, so one side sees the other's store. No data is published
 * through it (that is all acquire/release), so TSan loses nothing. */
#if defined(__SANITIZE_THREAD__)
#define SLC__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) /* clang */
#define SLC__TSAN 1
#endif
#endif
#ifdef SLC__TSAN
static atomic_uint slc__dekker_word;
#define slc__fence_seq_cst() \
  ((void)atomic_fetch_add_explicit(&slc__dekker_word, 1, memory_order_seq_cst))
#else
#define slc__fence_seq_cst() atomic_thread_fence(memory_order_seq_cst)
#endif
/* The park's Dekker pair (WAKING THE ENGINE THREAD): the thread's heavy
 * side between its store of parked and its final poll, the issuer's light
 * side between its enqueue and its load of parked. */
#ifdef SLC__TSAN
#define slc__park_fence() slc__fence_seq_cst()
#define slc__kick_fence() slc__fence_seq_cst()
#else
#define slc__park_fence() ldg__asym_heavy()
#define slc__kick_fence() ldg__asym_light()
#endif

/* Every keep the layer runs is run with proof that its work completed: a
 * stream whose synchronisation fails keeps what it holds (the limbo list of
 * stream.c) until a later sync proves it complete, and slc_context_destroy
 * finishes such streams only after a successful sync (slc__limbo_finish),
 * before the ledger is destroyed with nothing held. So no path drops an
 * entry without proof any more, and the answer is always LDG_OK; the call
 * stays so that keeps written to check it keep their meaning if such a path
 * ever comes back (it must then set a per-thread status here). */
int slc_keep_status(void) { return LDG_OK; }

/* ---- Keeps by cause -------------------------------------------------------
 * ldg_thread_ops_released counts, per thread, the operations the ledger
 * took. A frame reads it around one layer call; keeps of that call may call
 * the layer again (nested frames), and what those counted is subtracted,
 * so each keep counts once, under the innermost layer call that ran it. */
_Thread_local uint64_t slc__keeps_counted;

void slc__keeps_count(slc_context *c, const struct slc__keeps_frame *f,
                      uint64_t ran, slc_keep_cause cause) {
  uint64_t nested = slc__keeps_counted - f->counted0;
  uint64_t own = ran - nested;
  if (own == 0) return;
  slc__keeps_counted += own;
  slc__fetch_add_relaxed(&c->keeps_by[cause], own);
}

void slc__keeps_run_here(slc_context *c, ldg_keep keep, slc_keep_cause cause) {
  /* Not in ldg_thread_ops_released, so not in slc__keeps_counted either:
   * an enclosing frame neither sees it run nor subtracts it. */
  slc__fetch_add_relaxed(&c->keeps_by[cause], 1);
  if (keep.release != NULL) keep.release(keep.ctx);
}

static uint64_t slc__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The engine's clock: CLOCK_MONOTONIC, or a simulated engine's (tests). */
static uint64_t slc__engine_now(const struct slc__dev_engine *e) {
#ifdef SLC_TEST_HOOKS
  if (e->en->sim) return slc__load_relaxed(&e->en->sim_ns);
#else
  (void)e;
#endif
  return slc__now_ns();
}

static void slc__count(atomic_uint_fast64_t *ctr, uint64_t n) {
  slc__fetch_add_relaxed(ctr, n);
}

static long slc__futex(atomic_uint *addr, int op, unsigned val) {
  return syscall(SYS_futex, (unsigned *)addr, op, val, NULL, NULL, 0);
}

/* Makes e's device context current for the engine's own driver calls,
 * quietly: unlike slc__make_current it never writes the thread's error
 * record (the engine runs inside issuing calls that succeed and inside
 * slc_engine_poll; its failures are counted in its stats and delay
 * releases, nothing more). The device is ready once a stream was created
 * on it. *known: the context current on this thread as far as the caller
 * knows (NULL: ask the driver), updated: an engine thread keeps it across
 * polls (slc__waiter), so that it switches contexts once, not per stream
 * or per poll; other callers start each call from NULL (one
 * cuCtxGetCurrent, and a cuCtxSetCurrent per device whose context was not
 * current). */
static bool slc__engine_current(const struct slc__dev_engine *e,
                                CUcontext *known) {
  const slc_context *c = e->c;
  struct slc__device *dev = &c->devices[e->device];
  /* Acquire: pairs with the release of ready in slc__make_current. */
  if (!slc__load_acquire(&dev->ready)) return false;
  if (*known == dev->ctx) return true;
  CUcontext cur = *known;
  if (cur == NULL && c->drv.pfn_cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
    return false;
  if (cur != dev->ctx && slc__ctx_set(c, dev->ctx) != CUDA_SUCCESS) {
    *known = NULL;
    return false;
  }
  *known = dev->ctx;
  return true;
}

/* ---- The consumer flag --------------------------------------------------- */

static bool slc__consumer_try(struct slc__dev_engine *e) {
  int expected = 0;
  /* Acquire: the previous consumer's ring and list updates happen-before
   * ours (pairs with the release in slc__consumer_drop). */
  return atomic_compare_exchange_strong_explicit(
      &e->consumer, &expected, 1, memory_order_acquire, memory_order_relaxed);
}

static void slc__consumer_drop(struct slc__dev_engine *e) {
  slc__store_release(&e->consumer, 0);
}

/* For registration only: waits out a poll's query phase (no keeps). */
static void slc__consumer_take(struct slc__dev_engine *e) {
  unsigned spins = 0;
  while (!slc__consumer_try(e)) {
    if (++spins < 64) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- Waking the thread ------------------------------------------------- */

/* Bumps gen and wakes w's thread (it was seen parked). */
static void slc__engine_wake(struct slc__dev_engine *e, struct slc__waiter *w) {
  slc__count(&e->n.kicks, 1);
  slc__fetch_add_acq_rel(&w->gen, 1);
  slc__futex(&w->gen, FUTEX_WAKE_PRIVATE, 1);
}

/* Wakes the thread of e's device if it is parked. */
static void slc__engine_kick(struct slc__dev_engine *e) {
  if (!e->has_thread) return;
  struct slc__waiter *w = e->w;
  /* Dekker with slc__engine_main (WAKING THE ENGINE THREAD): our enqueue
   * (or marker) before this light barrier, its parked store before its
   * heavy one (membarrier) and its final poll. Without membarrier both
   * are seq_cst fences. */
  slc__kick_fence();
  if (slc__load_relaxed(&w->parked)) slc__engine_wake(e, w);
}

/* slc__engine_kick after a successful ldg_enqueue on s's ledger stream and
 * nothing else to publish to the thread (slc__engine_after_deferred). The
 * work the thread's final poll must see is that reservation (its mark:
 * WAKING THE ENGINE THREAD). Where membarrier is in use this is
 * slc__engine_kick: a compiler barrier, then the load (the reservation is
 * a store, of otail on an owned stream, before it). Where it is not, every
 * ledger stream is shared (owned.c, OWNED STREAMS) and the enqueue reserved
 * by a seq_cst RMW of tail (CAS or fetch_add), which takes the fence's
 * place: no fence here, and the load of parked is seq_cst. C11 7.17.3:
 * suppose the final poll, which reads ldg_mark (an acquire load of tail)
 * after the thread's fence F, misses the RMW. A load after a seq_cst fence
 * sees the last seq_cst store to its object before the fence in the order
 * S, or a later one, so the RMW does not precede F: F precedes the RMW in
 * S, which precedes our seq_cst load L (sequenced before it, both
 * seq_cst). A load that follows F in S, F being sequenced after the
 * thread's store of parked = 1, reads that store or a later one: L sees 1
 * and we wake the thread (or the 0 stored when it woke from that park: it
 * polls again before parking). So neither mode puts a fence or a locked
 * instruction on slc_stream_record_deferred (the pool's slp_record_use);
 * the seq_cst load is a plain load on x86. Under TSan the thread's "fence"
 * is an RMW of slc__dekker_word, so there the issuer makes that RMW too. */
static void slc__engine_kick_enqueued(struct slc__dev_engine *e) {
  if (!e->has_thread) return;
  struct slc__waiter *w = e->w;
#ifdef SLC__TSAN
  slc__fence_seq_cst();
#else
  /* The compiler's order only (ldg__asym_light's membarrier branch; the
   * RMW orders the rest without membarrier). */
  atomic_signal_fence(memory_order_seq_cst);
#endif
  if (atomic_load_explicit(&w->parked, memory_order_seq_cst))
    slc__engine_wake(e, w);
}

/* ---- Placing a marker (producer) ---------------------------------------- */

/* Errors that the driver reports from then on for every call on the
 * context (the CUDA documentation's "sticky" errors: the context must be
 * destroyed). A record failing with one proves the stream's work will never
 * be known complete through markers, as a failed query does. */
static bool slc__sticky_code(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
      return true;
    default:
      return false;
  }
}

/* Records one marker on q's stream if work was enqueued since the last one
 * and the ring has room. `tail_marker`: placed by the engine. *known: as
 * slc__engine_current. Never waits. */
static void slc__mq_place(struct slc__dev_engine *e, struct slc__mq *q,
                          bool tail_marker, CUcontext *known) {
  int expected = 0;
  /* Acquire pairs with the previous placer's release: its slot writes and
   * placed_mark happen-before ours. */
  if (!atomic_compare_exchange_strong_explicit(&q->placing, &expected, 1,
                                               memory_order_acquire,
                                               memory_order_relaxed))
    return;
  slc_stream *s = q->s;
  uint64_t old = slc__fetch_add_acq_rel(&s->gate, 1);
  if (old & SLC__GATE_DESTROYING) goto out_gate; /* its destroy syncs */
  /* Mark, then record. */
  ldg_seq m = ldg_mark(s->ls);
  if (m <= slc__load_relaxed(&q->placed_mark)) goto out_gate;
  uint64_t tail = slc__load_relaxed(&q->tail);
  /* Acquire pairs with the consumer's release of head: it is done with the
   * slot we are about to reuse. */
  if (tail - slc__load_acquire(&q->head) >= q->cap) {
    slc__count(&e->n.skipped, 1);
    goto out_gate;
  }
  struct slc__mslot *slot = &q->ring[tail & (q->cap - 1)];
  const slc_driver *d = &s->c->drv;
  if (!slc__engine_current(e, known)) {
    slc__count(&e->n.record_failures, 1);
    slc__count(&e->n.skipped, 1);
    goto out_gate;
  }
  if (slot->ev == NULL) {
    if (d->pfn_cuEventCreate(&slot->ev, CU_EVENT_DISABLE_TIMING) !=
        CUDA_SUCCESS) {
      slot->ev = NULL;
      slc__count(&e->n.record_failures, 1);
      slc__count(&e->n.skipped, 1);
      goto out_gate;
    }
    slc__count(&e->n.events_live, 1);
  }
  CUresult rr = d->pfn_cuEventRecord(slot->ev, s->cu);
  if (rr != CUDA_SUCCESS) {
    /* Released later: the next marker covers this work. The event keeps
     * its previous (completed) record, which nobody reads again. */
    slc__count(&e->n.record_failures, 1);
    slc__count(&e->n.skipped, 1);
    /* A sticky-class error: no marker will ever be recorded on this
     * context, so none would be queried and the error never seen. The
     * stream's engine error becomes sticky here, as after failed queries;
     * the next poll reports it (on_error: the consumer's side). Only the
     * first setter reports. Release: err before the unreported flag, which
     * the poll takes with an acquire exchange. */
    int none = 0;
    if (slc__sticky_code(rr) &&
        atomic_compare_exchange_strong_explicit(&q->err, &none, (int)rr,
                                                memory_order_release,
                                                memory_order_relaxed)) {
      slc__count(&e->n.stream_errors, 1);
      slc__store_release(&q->err_unreported, 1);
    }
    goto out_gate;
  }
  slc__stream_exit(s);
  uint64_t now = slc__engine_now(e);
  slot->mark = m;
  atomic_store_explicit(&slot->placed_ns, now, memory_order_relaxed);
  slc__store_release(&q->placed_mark, m);
  atomic_store_explicit(&q->since, 0, memory_order_relaxed);
  atomic_store_explicit(&q->last_ns, now, memory_order_relaxed);
  slc__count(&e->n.placed, 1);
  slc__count(&e->n.pending, 1);
  if (tail_marker) slc__count(&e->n.tails, 1);
  /* Publishes the slot to the consumer (its acquire load of tail). */
  slc__store_release(&q->tail, tail + 1);
  slc__store_release(&q->placing, 0);
  return;
out_gate:
  slc__fetch_sub_release(&s->gate, 1); /* as slc__stream_exit */
  slc__store_release(&q->placing, 0);
}

/* On the issuing path, after an operation was enqueued on the stream of
 * ring q (slc__engine_after_issue, internal.h, loaded it). */
void slc__engine_issued(struct slc__mq *q) {
  struct slc__dev_engine *e = q->e;
  /* SLC_ENGINE_PLACE_ENGINE: the thread places every marker (it sees the
   * work in the stream's mark); the issuer only wakes it if it is parked.
   * Nothing else here: no read-modify-write of a line the thread writes,
   * no clock. */
  if (!e->by_engine) {
    uint64_t n = slc__fetch_add_relaxed(&q->since, 1) + 1;
    CUcontext known = NULL; /* asked: the issuing call made it current */
    if (n >= e->cfg.marker_every_ops ||
        slc__engine_now(e) - slc__load_relaxed(&q->last_ns) >=
            (uint64_t)e->cfg.marker_every_us * 1000u)
      slc__mq_place(e, q, false, &known);
  }
  slc__engine_kick(e);
}

/* After slc_stream_record_deferred's enqueue: no marker and no count
 * toward one (the entry raised the stream's mark, so a poll sees it
 * uncovered: the engine thread's tail marker, a poll's, or the stream's
 * next issuer marker covers it); a parked engine thread is woken, as
 * after any issue, so that uncovered work is never left without a poll. */
void slc__engine_deferred(struct slc__mq *q) {
  slc__engine_kick_enqueued(q->e); /* WAKING THE ENGINE THREAD */
}

/* ---- Consuming (one poll) ------------------------------------------------ */

struct slc__release {
  struct slc__mq *q; /* a reference, dropped after the release phase */
  ldg_stream *ls;    /* a reference, likewise */
};

struct slc__report {
  uint64_t stream_id;
  int device;
  CUresult cu;
};

struct slc__poll {
  size_t released;
  bool busy;      /* another thread was the consumer */
  bool pending;   /* some marker still pending (not errored) */
  bool uncovered; /* some stream has work no marker covers */
  bool more;      /* the batch filled up: poll again */
  bool prompt;    /* a release of a stream whose issuer may be waiting */
  bool thread;    /* polled by the engine thread (its wait policy applies) */
  CUcontext *known; /* the context current (slc__engine_current) */
  uint64_t due_ns; /* adaptive: when the next marker should be done or a
                    * tail marker is due (0: nothing known) */
};

static void slc__due(struct slc__poll *p, uint64_t t) {
  if (p->due_ns == 0 || t < p->due_ns) p->due_ns = t;
}

/* PACING (see sl_engine.h): updates q's issue-rate window at `now`, the
 * stream's mark being m. Windows close at the first poll at least
 * poll_max_us (less poll_us: a wake-up due at the end of a batch may come
 * that much early) after they opened. Consumer only. */
static void slc__mq_pace(struct slc__dev_engine *e, struct slc__mq *q, ldg_seq m,
                         uint64_t now) {
  uint64_t win = (uint64_t)e->cfg.poll_max_us * 1000u;
  uint64_t slack = (uint64_t)e->cfg.poll_us * 1000u;
  if (!q->win_open || m < q->win_mark) {
    q->win_open = true;
    q->win_ns = now;
    q->win_mark = m;
    if (q->need == 0) q->need = SLC__PACE_NEED0;
    return;
  }
  uint64_t elapsed = now - q->win_ns;
  if (elapsed + slack < win) return;
  uint64_t ops = m - q->win_mark;
  q->win_ns = now;
  q->win_mark = m;
  /* ops / elapsed against 1 / SLC__PACE_GAP_NS, without dividing. */
  if (!q->batching) {
    bool fast = ops * SLC__PACE_GAP_NS >= elapsed;
    q->fast = fast ? q->fast + 1 : 0;
    if (q->fast >= q->need) {
      q->batching = true;
      q->confirmed = false;
      q->fast = 0;
      slc__count(&e->n.batch_enters, 1);
    }
  } else if (2 * ops * SLC__PACE_GAP_NS >= elapsed) {
    q->confirmed = true;
  } else {
    q->batching = false;
    slc__count(&e->n.batch_exits, 1);
    if (q->confirmed) q->need = SLC__PACE_NEED0;
    else if (q->need < SLC__PACE_NEED_MAX) q->need *= 2;
  }
}

/* Under the consumer flag: the completed markers of q. */
static void slc__mq_consume(struct slc__dev_engine *e, struct slc__mq *q,
                            struct slc__release *rel, size_t *n_rel,
                            struct slc__report *rep, size_t *n_rep,
                            struct slc__poll *p, uint64_t now) {
  if (slc__load_relaxed(&q->err) != 0) {
    /* Set by a placer whose record failed with a sticky error: reported
     * once, here. Acquire pairs with its release store. */
    if (atomic_exchange_explicit(&q->err_unreported, 0,
                                 memory_order_acquire) != 0)
      rep[(*n_rep)++] = (struct slc__report){
          ldg_stream_id(q->s->ls), q->s->device,
          (CUresult)slc__load_relaxed(&q->err)};
    return;
  }
  slc_stream *s = q->s;
  const slc_driver *d = &s->c->drv;
  uint64_t head = slc__load_relaxed(&q->head);
  /* Acquire pairs with the producer's release of tail: the slots up to it
   * are filled. */
  uint64_t tail = slc__load_acquire(&q->tail);
  ldg_seq done = 0;
  bool collected = false;
  if (head != tail && !slc__engine_current(e, p->known)) {
    slc__count(&e->n.query_failures, 1); /* counted, not sticky */
    tail = head;                          /* try again next poll */
  }
  while (head != tail) {
    struct slc__mslot *slot = &q->ring[head & (q->cap - 1)];
    CUresult r = d->pfn_cuEventQuery(slot->ev);
    if (r == CUDA_ERROR_NOT_READY) {
      q->query_fails = 0; /* the query worked: failures are consecutive */
      q->misses++;
      break;
    }
    if (r != CUDA_SUCCESS) {
      slc__count(&e->n.query_failures, 1);
      int none = 0;
      if (++q->query_fails >= SLC_ENGINE_QUERY_RETRIES &&
          atomic_compare_exchange_strong_explicit(&q->err, &none, (int)r,
                                                  memory_order_release,
                                                  memory_order_relaxed)) {
        slc__count(&e->n.stream_errors, 1);
        rep[(*n_rep)++] = (struct slc__report){ldg_stream_id(s->ls),
                                                s->device, r};
      }
      break;
    }
    q->query_fails = 0;
    /* The age at which markers complete, for the adaptive wait (see
     * WAITING). A marker found done at its first query completed at some
     * unknown earlier age: try 1/8 sooner next time. One that had been
     * found not done completed within the last query period: its age. */
    uint64_t placed = slc__load_relaxed(&slot->placed_ns);
    uint64_t age = now > placed ? now - placed : 0;
    if (q->misses == 0) e->pred_ns -= e->pred_ns / 8;
    else e->pred_ns = age;
    q->misses = 0;
    done = slot->mark;
    head++;
    slc__count(&e->n.done, 1);
    atomic_fetch_sub_explicit(&e->n.pending, 1, memory_order_relaxed);
    /* Hands the slot back to the producer (its acquire load of head). */
    slc__store_release(&q->head, head);
  }
  if (done > q->collected) {
    q->collected = done;
    atomic_store_explicit(&q->target, done, memory_order_seq_cst);
    ldg_stream_ref(s->ls);
    slc__fetch_add_relaxed(&q->refs, 1); /* the list's keeps q alive now */
    rel[(*n_rel)++] = (struct slc__release){q, s->ls};
    collected = true;
  }
  if (slc__load_relaxed(&q->err) != 0) {
    if (collected) p->prompt = true;
    return;
  }
  bool ring_empty = head == slc__load_acquire(&q->tail);
  bool adaptive = p->thread && e->cfg.wait == SLC_ENGINE_WAIT_ADAPTIVE;
  uint64_t period = (uint64_t)e->cfg.marker_every_us * 1000u;
  ldg_seq m = ldg_mark(s->ls);
  if (adaptive) slc__mq_pace(e, q, m, now);
  /* A batching stream's keeps wait for its next batch anyway: the thread
   * need not look again at once (slc__engine_next). */
  if (collected && !q->batching) p->prompt = true;
  uint64_t poll_ns = (uint64_t)e->cfg.poll_us * 1000u;
  uint64_t max_ns = (uint64_t)e->cfg.poll_max_us * 1000u;
  /* The adaptive thread's tail delay: T, at most poll_max_us. */
  uint64_t tail_ns = period < max_ns ? period : max_ns;
  const struct slc__mslot *oldest =
      ring_empty ? NULL : &q->ring[head & (q->cap - 1)];
  /* Streaming: the issue rate says so (PACING), or work was issued past
   * the marker that just completed or past the oldest pending one, so the
   * issuer is not waiting on those keeps: batch them, one wake-up per
   * poll_max_us. Otherwise someone may be waiting: wake up when the oldest
   * marker should be done. */
  bool streaming = (adaptive && q->batching) || (done != 0 && m > done) ||
                   (oldest && m > oldest->mark);
  if (streaming) slc__due(p, now + max_ns);
  if (oldest != NULL) {
    p->pending = true;
    /* Relaxed: placed_ns is the consumer's own slot now (head..tail). */
    uint64_t placed = slc__load_relaxed(&oldest->placed_ns);
    uint64_t age = now > placed ? now - placed : 0;
    if (streaming) {
      /* due above */
    } else if (q->misses == 0) {
      slc__due(p, placed + e->pred_ns); /* when it should complete */
    } else {
      /* Late: query again after a quarter of its age, at least poll_us,
       * at most poll_max_us (a long kernel costs few wake-ups). */
      uint64_t back = age / 4;
      slc__due(p, now + (back < poll_ns ? poll_ns : back > max_ns ? max_ns : back));
    }
  }
  if (p->thread && e->by_engine && m > slc__load_acquire(&q->placed_mark) &&
      slc_stream_check_live(s) == LDG_OK) {
    /* The thread places every marker (SLC_ENGINE_PLACE_ENGINE), one in
     * flight per stream (a later one cannot complete first): for a waiting
     * issuer at once, so its keep waits for one round trip; for a
     * streaming one once poll_max_us passed since the last, so one wake-up
     * per poll_max_us releases one marker's worth and places the next
     * (due above: now + poll_max_us). */
    uint64_t last = slc__load_relaxed(&q->last_ns);
    /* (A batch's wake-up, due at last + poll_max_us, may come up to a
     * poll_us early: the truncation to whole us, a simulated clock.) */
    if (ring_empty && (!streaming || now - last + poll_ns >= max_ns))
      slc__mq_place(e, q, true, p->known);
    if (m > slc__load_acquire(&q->placed_mark)) {
      p->uncovered = true;
      if (ring_empty) slc__due(p, streaming ? last + max_ns : now + poll_ns);
    } else {
      p->pending = true;
      if (!streaming) slc__due(p, now + e->pred_ns);
    }
  } else if (m > slc__load_acquire(&q->placed_mark) &&
             slc_stream_check_live(s) == LDG_OK) {
    /* Uncovered work: a tail marker once T passed since the last marker;
     * or as soon as none is pending (fixed wait, and every
     * slc_engine_poll); or (adaptive thread) once none is pending and
     * min(T, poll_max_us) passed, so that an issuer going on places the
     * next marker itself. */
    uint64_t last = slc__load_relaxed(&q->last_ns);
    if (now - last >= period ||
        (ring_empty && (!adaptive || now - last >= tail_ns)))
      slc__mq_place(e, q, true, p->known);
    if (m > slc__load_acquire(&q->placed_mark)) {
      p->uncovered = true;
      /* Streaming: the issuer's next marker likely comes first. */
      if (!streaming) slc__due(p, last + (adaptive ? tail_ns : period));
    } else {
      p->pending = true; /* our tail marker, due as any other */
      if (!streaming) slc__due(p, now + e->pred_ns);
    }
  }
}

static void slc__mq_unref(struct slc__mq *q) {
  /* acq_rel: every releaser's use of q happens-before the free. */
  if (slc__fetch_sub_acq_rel(&q->refs, 1) == 1) free(q);
}

/* The release phase of one stream (see RELEASES, IN ORDER). No flag of the
 * engine is held; keeps run here. */
static void slc__mq_release(struct slc__dev_engine *e, struct slc__mq *q,
                            ldg_stream *ls) {
  for (;;) {
    int expected = 0;
    if (!atomic_compare_exchange_strong_explicit(&q->releasing, &expected, 1,
                                                 memory_order_seq_cst,
                                                 memory_order_seq_cst))
      return; /* the holder releases to our target too */
    for (;;) {
      ldg_seq t = atomic_load_explicit(&q->target, memory_order_seq_cst);
      ldg_seq done = slc__load_relaxed(&q->released);
      if (t <= done) break;
      if (ldg_release(ls, t) == LDG_OK) {
        slc__count(&e->n.releases, 1);
        slc__count(&e->n.seqs_released, t - done);
      }
      atomic_store_explicit(&q->released, t, memory_order_relaxed);
    }
    atomic_store_explicit(&q->releasing, 0, memory_order_seq_cst);
    if (atomic_load_explicit(&q->target, memory_order_seq_cst) <=
        slc__load_relaxed(&q->released))
      return;
  }
}

/* One poll of one device's engine. *known: as slc__engine_current (reset
 * when keeps or on_error ran: they may switch contexts). */
static void slc__engine_poll(struct slc__dev_engine *e, struct slc__poll *p,
                             bool thread, CUcontext *known) {
  memset(p, 0, sizeof(*p));
  p->thread = thread;
  p->known = known;
  if (!slc__consumer_try(e)) {
    p->busy = true;
    return;
  }
  if (e->streams == NULL) { /* a device nobody uses: not counted */
    slc__consumer_drop(e);
    return;
  }
  slc__count(&e->n.polls, 1);
  struct slc__release rel[SLC__BATCH];
  struct slc__report rep[SLC__BATCH];
  size_t n_rel = 0, n_rep = 0;
  uint64_t now = slc__engine_now(e);
  for (struct slc__mq *q = e->streams; q != NULL; q = q->next) {
    if (n_rel == SLC__BATCH || n_rep == SLC__BATCH) {
      p->more = true;
      break;
    }
    slc__mq_consume(e, q, rel, &n_rel, rep, &n_rep, p, now);
  }
  slc__consumer_drop(e);
  /* No flag held from here on: keeps and callbacks may call anything. */
  for (size_t i = 0; i < n_rep; i++)
    if (e->cfg.on_error != NULL) {
      *known = NULL;
      e->cfg.on_error(e->cfg.on_error_arg, rep[i].stream_id, rep[i].device,
                      rep[i].cu);
    }
  struct slc__keeps_frame kf;
  slc__keeps_begin(&kf);
  for (size_t i = 0; i < n_rel; i++) {
    slc__mq_release(e, rel[i].q, rel[i].ls);
    ldg_stream_unref(rel[i].ls);
    slc__mq_unref(rel[i].q);
  }
  if (ldg_thread_ops_released() != kf.ran0) *known = NULL; /* keeps ran */
  slc__keeps_end(e->c, &kf, thread ? SLC_CAUSE_ENGINE : SLC_CAUSE_POLL);
  p->released = n_rel;
}

/* Polls devices [first, first + count) of en once each, merging what they
 * found into *p as one poll of them all (a thread's wait policy). */
static void slc__engine_poll_range(struct slc__engine *en, int first,
                                   int count, struct slc__poll *p, bool thread,
                                   CUcontext *known) {
  memset(p, 0, sizeof(*p));
  p->thread = thread;
  for (int d = first; d < first + count; d++) {
    struct slc__poll one;
    slc__engine_poll(&en->dev[d], &one, thread, known);
    p->released += one.released;
    p->busy |= one.busy;
    p->pending |= one.pending;
    p->uncovered |= one.uncovered;
    p->more |= one.more;
    p->prompt |= one.prompt;
    if (one.due_ns != 0) slc__due(p, one.due_ns);
  }
}

int slc_engine_poll(slc_context *c, size_t *released) {
  static const char fn[] = "slc_engine_poll";
  if (released != NULL) *released = 0;
  if (c == NULL) return slc__fail(LDG_EINVAL, fn, "context is NULL");
  struct slc__engine *en = slc__load_acquire(&c->engine);
  if (en == NULL)
    return slc__fail(LDG_EINVAL, fn, "the engine is not enabled");
  struct slc__poll p;
  CUcontext known = NULL;
  slc__engine_poll_range(en, 0, en->n_dev, &p, false, &known);
  if (released != NULL) *released = p.released;
  return LDG_OK;
}

/* One stream only, for a thread that wants its own stream's keeps (a pool
 * returning the blocks it freed): the same consume and release as a poll,
 * for q alone. The caller holds a reference on s, so q is on the list. */
int slc_engine_poll_stream(slc_stream *s, size_t *released) {
  static const char fn[] = "slc_engine_poll_stream";
  if (released != NULL) *released = 0;
  if (s == NULL) return slc__fail(LDG_EINVAL, fn, "stream is NULL");
  /* Acquire, as slc__engine_after_issue (a ring attached by a later
   * slc_engine_enable). */
  struct slc__mq *q = slc__load_acquire(&s->mq);
  if (q == NULL)
    return slc__fail(LDG_EINVAL, fn, "the stream is not engine-driven");
  /* q->e and the engine's fields: initialised before q was published. */
  struct slc__dev_engine *e = q->e;
  if (!slc__consumer_try(e)) return LDG_OK; /* that consumer does the work */
  slc__count(&e->n.polls, 1);
  struct slc__release rel[1];
  struct slc__report rep[1];
  size_t n_rel = 0, n_rep = 0;
  struct slc__poll p;
  memset(&p, 0, sizeof(p));
  CUcontext known = NULL;
  p.known = &known;
  slc__mq_consume(e, q, rel, &n_rel, rep, &n_rep, &p, slc__engine_now(e));
  slc__consumer_drop(e);
  if (n_rep != 0 && e->cfg.on_error != NULL)
    e->cfg.on_error(e->cfg.on_error_arg, rep[0].stream_id, rep[0].device,
                    rep[0].cu);
  if (n_rel != 0) {
    struct slc__keeps_frame kf;
    slc__keeps_begin(&kf);
    slc__mq_release(e, rel[0].q, rel[0].ls);
    ldg_stream_unref(rel[0].ls);
    slc__mq_unref(rel[0].q);
    slc__keeps_end(e->c, &kf, SLC_CAUSE_POLL);
  }
  if (released != NULL) *released = n_rel;
  return LDG_OK;
}

/* ---- The engine thread -------------------------------------------------- */

/* What the thread does after a poll (slc__engine_next). */
enum slc__next { SLC__AGAIN, SLC__SLEEP, SLC__PARK, SLC__STOP };

/* The thread's memory between polls. */
struct slc__wait {
  uint64_t last_work; /* when a poll last found work */
  unsigned nap;       /* the next lingering nap, us */
};

/* The thread's wait policy (sl_engine.h, WAITING): after poll p, at `now`,
 * poll again at once, sleep *us, park, or stop. Pure decision: the caller
 * (the thread, or a simulated one in tests) does it. */
static enum slc__next slc__engine_next(struct slc__waiter *wt,
                                       struct slc__wait *w,
                                       const struct slc__poll *p,
                                       uint64_t now, unsigned *us) {
  const slc_engine_config *cfg = &wt->en->cfg;
  const bool adaptive = cfg->wait == SLC_ENGINE_WAIT_ADAPTIVE;
  const unsigned poll = cfg->poll_us, poll_max = cfg->poll_max_us;
  if (p->released != 0 || p->more) {
    w->last_work = now;
    w->nap = poll;
    /* At once after a prompt release (its issuer may issue again right
     * away) or a full batch; a batching stream's release waits for its
     * next batch like the rest of its work (PACING). */
    if (p->more || p->prompt || !adaptive) return SLC__AGAIN;
  }
  bool stopping = slc__load_acquire(&wt->stop) != 0;
  if (p->uncovered && !p->pending && !p->busy && stopping)
    return SLC__STOP; /* streams are gone before the context */
  if (p->pending || p->busy || p->uncovered) {
    *us = poll;
    if (adaptive && !p->busy) {
      /* Until the oldest marker should be done, a tail or a batch is
       * due. */
      uint64_t wait = p->due_ns > now ? (p->due_ns - now) / 1000u : 0;
      *us = wait < poll ? poll : wait > poll_max ? poll_max : (unsigned)wait;
      w->last_work = now;
      w->nap = poll;
    }
    return SLC__SLEEP;
  }
  if (stopping) return SLC__STOP;
  if (adaptive && now - w->last_work < (uint64_t)cfg->linger_us * 1000u) {
    /* Lingers, so that the next issue needs no wake-up (no syscall on
     * the issuing thread), napping longer and longer. */
    *us = w->nap;
    w->nap = w->nap * 2 > poll_max ? poll_max : w->nap * 2;
    return SLC__SLEEP;
  }
  return SLC__PARK;
}

/* One engine thread: polls its devices (one, or all with one_thread). */
static void *slc__engine_main(void *arg) {
  struct slc__waiter *wt = arg;
  struct slc__engine *en = wt->en;
  /* Sleep as long as asked (the default slack of 50 us would triple a 5 us
   * poll period). */
  (void)prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct slc__wait w = {slc__now_ns(), en->cfg.poll_us};
  for (;;) {
    struct slc__poll p;
    unsigned us = 0;
    slc__engine_poll_range(en, wt->first, wt->count, &p, true, &wt->known);
    switch (slc__engine_next(wt, &w, &p, slc__now_ns(), &us)) {
      case SLC__AGAIN:
        continue;
      case SLC__STOP:
        return NULL;
      case SLC__SLEEP: {
        slc__count(&wt->sleeps, 1);
        struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000};
        nanosleep(&ts, NULL);
        continue;
      }
      case SLC__PARK:
        break;
    }
    /* Park (see the argument at the top). */
    unsigned g = slc__load_acquire(&wt->gen);
    atomic_store_explicit(&wt->parked, 1, memory_order_relaxed);
    slc__park_fence(); /* membarrier, or a seq_cst fence without it */
    slc__engine_poll_range(en, wt->first, wt->count, &p, true, &wt->known);
    if (p.released == 0 && !p.more && !p.pending && !p.busy && !p.uncovered &&
        !slc__load_acquire(&wt->stop)) {
      slc__count(&wt->parks, 1);
      slc__futex(&wt->gen, FUTEX_WAIT_PRIVATE, g);
    }
    atomic_store_explicit(&wt->parked, 0, memory_order_relaxed);
  }
}

#ifdef SLC_TEST_HOOKS
/* ---- A simulated thread (cuda_testing.h) --------------------------------- */

static struct slc__wait slc__sim_wait; /* one simulated engine at a time */

void slc__engine_sim_clock(slc_context *c, uint64_t ns) {
  struct slc__engine *en = slc__load_acquire(&c->engine);
  slc__store_release(&en->sim_ns, ns);
}

long slc__engine_sim_step(slc_context *c) {
  struct slc__engine *en = slc__load_acquire(&c->engine);
  struct slc__waiter *wt = &en->waiters[0]; /* one for every device */
  struct slc__poll p;
  unsigned us = 0;
  /* The test's thread: it switches contexts between steps. */
  wt->known = NULL;
  slc__engine_poll_range(en, wt->first, wt->count, &p, true, &wt->known);
  switch (slc__engine_next(wt, &slc__sim_wait, &p,
                           slc__engine_now(&en->dev[0]), &us)) {
    case SLC__AGAIN:
      return 0;
    case SLC__SLEEP:
      slc__count(&wt->sleeps, 1);
      return us != 0 ? (long)us : 1;
    default:
      slc__count(&wt->parks, 1);
      return -1;
  }
}
#endif

/* ---- Enable, stop, registration ------------------------------------------ */

/* A ring for s, not yet reachable by anyone. */
static struct slc__mq *slc__mq_new(struct slc__dev_engine *e, slc_stream *s) {
  struct slc__mq *q = calloc(1, sizeof(*q));
  struct slc__mslot *ring =
      calloc(e->cfg.markers_per_stream, sizeof(struct slc__mslot));
  if (q == NULL || ring == NULL) {
    free(q);
    free(ring);
    return NULL;
  }
  q->s = s;
  q->e = e;
  q->cap = e->cfg.markers_per_stream;
  q->ring = ring;
  atomic_init(&q->last_ns, slc__engine_now(e));
  atomic_init(&q->refs, 1); /* the engine's list */
  return q;
}

/* Under c->streams_mu: q joins the engine's list, then s's issuers see it.
 * Work s already has is uncovered (placed_mark 0): the next poll places a
 * tail marker for it. */
static void slc__mq_attach(struct slc__dev_engine *e, slc_stream *s,
                           struct slc__mq *q) {
  slc__consumer_take(e);
  q->next = e->streams;
  e->streams = q;
  slc__consumer_drop(e);
  /* Release: q's initialisation happens-before an issuer's use of it
   * (acquire load in slc__engine_after_issue). */
  slc__store_release(&s->mq, q);
}

static void slc__streams_link(slc_context *c, slc_stream *s) {
  s->streams_prev = NULL;
  s->streams_next = c->streams;
  if (c->streams != NULL) c->streams->streams_prev = s;
  c->streams = s;
}

static void slc__streams_unlink(slc_context *c, slc_stream *s) {
  if (s->streams_prev != NULL) s->streams_prev->streams_next = s->streams_next;
  else c->streams = s->streams_next;
  if (s->streams_next != NULL) s->streams_next->streams_prev = s->streams_prev;
  s->streams_prev = s->streams_next = NULL;
}

/* n zeroed elements of `size` (a multiple of SLC__LINE), aligned to it. */
static void *slc__lines_alloc(size_t n, size_t size) {
  void *p = aligned_alloc(SLC__LINE, n * size);
  if (p != NULL) memset(p, 0, n * size);
  return p;
}

/* The context's engine: one slc__dev_engine per device and the threads'
 * waiters (one per device, or one for all with one_thread or simulated),
 * no thread started yet. NULL: out of memory. */
static struct slc__engine *slc__engine_new(slc_context *c,
                                           const slc_engine_config *k,
                                           bool sim, uint64_t sim_ns) {
  struct slc__engine *en = calloc(1, sizeof(*en));
  if (en == NULL) return NULL;
  en->c = c;
  en->cfg = *k;
  en->n_dev = c->n_devices;
#ifdef SLC_TEST_HOOKS
  en->sim = sim;
  atomic_init(&en->sim_ns, sim_ns);
#else
  (void)sim_ns;
#endif
  en->n_waiters = !k->thread ? 0 : k->one_thread || sim ? 1 : en->n_dev;
  en->dev = slc__lines_alloc((size_t)en->n_dev, sizeof(*en->dev));
  en->waiters = slc__lines_alloc(
      en->n_waiters != 0 ? (size_t)en->n_waiters : 1, sizeof(*en->waiters));
  if (en->dev == NULL || en->waiters == NULL) {
    free(en->dev);
    free(en->waiters);
    free(en);
    return NULL;
  }
  for (int i = 0; i < en->n_waiters; i++) {
    struct slc__waiter *wt = &en->waiters[i];
    wt->en = en;
    wt->first = en->n_waiters == 1 ? 0 : i;
    wt->count = en->n_waiters == 1 ? en->n_dev : 1;
  }
  for (int d = 0; d < en->n_dev; d++) {
    struct slc__dev_engine *e = &en->dev[d];
    e->c = c;
    e->en = en;
    e->device = d;
    e->cfg = *k;
    e->by_engine = k->thread && k->placement == SLC_ENGINE_PLACE_ENGINE;
    e->w = en->n_waiters == 0 ? NULL
           : en->n_waiters == 1 ? &en->waiters[0]
                                : &en->waiters[d];
    e->has_thread = e->w != NULL && !sim;
  }
  return en;
}

/* Stops and joins the threads started, then frees en. No stream is on
 * any of its lists. */
static void slc__engine_free(struct slc__engine *en) {
  for (int i = 0; i < en->n_waiters; i++) {
    struct slc__waiter *wt = &en->waiters[i];
    if (!wt->started) continue;
    slc__store_release(&wt->stop, 1);
    slc__fetch_add_acq_rel(&wt->gen, 1);
    slc__futex(&wt->gen, FUTEX_WAKE_PRIVATE, 1);
    pthread_join(wt->thread, NULL);
  }
  free(en->dev);
  free(en->waiters);
  free(en);
}

/* Starts the threads (none simulated). false: one could not start (those
 * started are stopped by slc__engine_free). */
static bool slc__engine_start(struct slc__engine *en) {
  for (int i = 0; i < en->n_waiters; i++) {
    struct slc__waiter *wt = &en->waiters[i];
    if (!en->dev[wt->first].has_thread) continue; /* simulated */
    if (pthread_create(&wt->thread, NULL, slc__engine_main, wt) != 0)
      return false;
    wt->started = true;
    char name[16]; /* "slc-engine-N", for a debugger's thread list */
    snprintf(name, sizeof(name), "slc-engine-%d", wt->first);
    (void)pthread_setname_np(wt->thread, name);
  }
  return true;
}

/* slc_engine_enable; `sim`: a simulated thread (tests: no thread started,
 * the thread's policy run by slc__engine_sim_step on the test's clock). */
static int slc__engine_enable(slc_context *c, const slc_engine_config *cfg,
                              bool sim, uint64_t sim_ns) {
  static const char fn[] = "slc_engine_enable";
  if (c == NULL) return slc__fail(LDG_EINVAL, fn, "context is NULL");
  slc_engine_config k = {.thread = true};
  if (cfg != NULL) k = *cfg;
  if (k.marker_every_ops == 0) k.marker_every_ops = 8;
  if (k.marker_every_us == 0) k.marker_every_us = 20;
  if (k.poll_us == 0) k.poll_us = 5;
  if (k.markers_per_stream == 0) k.markers_per_stream = 64;
  if (k.poll_max_us == 0) k.poll_max_us = 200;
  if (k.poll_max_us < k.poll_us) k.poll_max_us = k.poll_us;
  if (k.linger_us == 0) k.linger_us = 2000;
  if (k.wait != SLC_ENGINE_WAIT_ADAPTIVE && k.wait != SLC_ENGINE_WAIT_FIXED)
    return slc__fail(LDG_EINVAL, fn, "wait policy %d is not one of "
                     "SLC_ENGINE_WAIT_ADAPTIVE, SLC_ENGINE_WAIT_FIXED", k.wait);
  if (k.placement != SLC_ENGINE_PLACE_ISSUER &&
      k.placement != SLC_ENGINE_PLACE_ENGINE)
    return slc__fail(LDG_EINVAL, fn, "placement %d is not one of "
                     "SLC_ENGINE_PLACE_ISSUER, SLC_ENGINE_PLACE_ENGINE",
                     k.placement);
  if (k.markers_per_stream > SLC__MAX_RING ||
      (k.markers_per_stream & (k.markers_per_stream - 1)) != 0)
    return slc__fail(LDG_EINVAL, fn,
                     "markers_per_stream %u is not a power of two <= %d",
                     k.markers_per_stream, SLC__MAX_RING);
  pthread_mutex_lock(&c->streams_mu);
  if (slc__load_relaxed(&c->engine) != NULL) {
    pthread_mutex_unlock(&c->streams_mu);
    return slc__fail(LDG_EBUSY, fn, "the engine is already enabled");
  }
  struct slc__engine *en = slc__engine_new(c, &k, sim, sim_ns);
  if (en == NULL) {
    pthread_mutex_unlock(&c->streams_mu);
    return slc__fail(LDG_ENOMEM, fn, "engines of %d devices", c->n_devices);
  }
  /* The streams that exist already join too (REGISTRATION): every ring is
   * allocated first, so a failure leaves nothing half done. */
  size_t n = 0;
  for (slc_stream *s = c->streams; s != NULL; s = s->streams_next) n++;
  struct slc__mq **qs = calloc(n != 0 ? n : 1, sizeof(*qs));
  bool ok = qs != NULL;
  size_t i = 0;
  for (slc_stream *s = c->streams; ok && s != NULL; s = s->streams_next, i++)
    ok = (qs[i] = slc__mq_new(&en->dev[s->device], s)) != NULL;
  /* The asymmetric fence's mode, before any thread parks: a thread that
   * parked with a fence (mode not yet picked) while a stream created since
   * is owned would miss its wake-up (WAKING THE ENGINE THREAD). pthread_once
   * orders the pick before our pthread_create. */
  ldg__asym_init();
  if (ok) ok = slc__engine_start(en);
  if (!ok) {
    for (size_t j = 0; qs != NULL && j < n; j++) {
      if (qs[j] != NULL) free(qs[j]->ring);
      free(qs[j]);
    }
    free(qs);
    slc__engine_free(en);
    pthread_mutex_unlock(&c->streams_mu);
    return slc__fail(LDG_ENOMEM, fn, "%zu marker rings or the threads", n);
  }
  /* Published before any ring is attached. Release: the engine's fields
   * happen-before a poll or stats call that sees it (their acquire loads);
   * an issuer that finds a ring (acquire of s->mq) finds its device's
   * engine through it (q->e). A poll that sees the engine before every
   * ring is attached simply does not poll those streams yet. */
  slc__store_release(&c->engine, en);
  i = 0;
  for (slc_stream *s = c->streams; s != NULL; s = s->streams_next, i++) {
    slc__mq_attach(&en->dev[s->device], s, qs[i]);
    SLC__HOOK(SLC__HOOK_ENGINE_ATTACHED);
  }
  free(qs);
  /* Their work may be uncovered: threads that parked meanwhile look. */
  for (int d = 0; d < en->n_dev; d++) slc__engine_kick(&en->dev[d]);
  pthread_mutex_unlock(&c->streams_mu);
  return LDG_OK;
}

int slc_engine_enable(slc_context *c, const slc_engine_config *cfg) {
  return slc__engine_enable(c, cfg, false, 0);
}

#ifdef SLC_TEST_HOOKS
int slc__engine_enable_sim(slc_context *c, const slc_engine_config *cfg,
                           uint64_t now_ns) {
  slc__sim_wait = (struct slc__wait){now_ns, cfg != NULL && cfg->poll_us != 0
                                                 ? cfg->poll_us
                                                 : 5};
  return slc__engine_enable(c, cfg, true, now_ns);
}
#endif

/* slc_context_destroy, first: every stream left the list at its last unref
 * (limbo streams included), so nothing is pending; the join waits out a
 * release the thread may be running. */
void slc__engine_stop(slc_context *c) {
  struct slc__engine *en = slc__load_acquire(&c->engine);
  if (en == NULL) return;
  slc__engine_free(en); /* every device's thread stopped and joined */
  atomic_store_explicit(&c->engine, NULL, memory_order_relaxed);
}

int slc__engine_register(slc_stream *s) {
  slc_context *c = s->c;
  atomic_init(&s->mq, NULL);
  pthread_mutex_lock(&c->streams_mu);
  /* Relaxed: c->engine is written under streams_mu (slc_engine_enable) or
   * by the context's destroy, which no stream creation may overlap. */
  struct slc__engine *en = slc__load_relaxed(&c->engine);
  if (en != NULL) {
    struct slc__dev_engine *e = &en->dev[s->device]; /* DEVICES */
    struct slc__mq *q = slc__mq_new(e, s);
    if (q == NULL) {
      pthread_mutex_unlock(&c->streams_mu);
      return slc__fail(LDG_ENOMEM, "slc_stream_create", "marker ring");
    }
    slc__mq_attach(e, s, q);
  }
  slc__streams_link(c, s);
  pthread_mutex_unlock(&c->streams_mu);
  return LDG_OK;
}

void slc__engine_unregister(slc_stream *s) {
  slc_context *c = s->c;
  pthread_mutex_lock(&c->streams_mu);
  slc__streams_unlink(c, s);
  /* Relaxed: written under streams_mu. */
  struct slc__mq *q = slc__load_relaxed(&s->mq);
  if (q == NULL) {
    pthread_mutex_unlock(&c->streams_mu);
    return;
  }
  struct slc__dev_engine *e = q->e;
  slc__consumer_take(e);
  for (struct slc__mq **p = &e->streams; *p != NULL; p = &(*p)->next) {
    if (*p == q) {
      *p = q->next;
      break;
    }
  }
  slc__consumer_drop(e);
  atomic_store_explicit(&s->mq, NULL, memory_order_relaxed);
  pthread_mutex_unlock(&c->streams_mu);
  /* Nobody else reaches q's ring now (see REGISTRATION). */
  uint64_t left = slc__load_relaxed(&q->tail) - slc__load_relaxed(&q->head);
  atomic_fetch_sub_explicit(&e->n.pending, left, memory_order_relaxed);
  /* The context made current if it can be, but the events are destroyed
   * either way: cuEventDestroy needs no current context (skipping them
   * when it could not be made current leaked them: the fault sweep). A
   * failed destroy is tried once more; an event whose destroy fails twice
   * is given up, left to the driver's context teardown: the engine holds
   * it no more, so it leaves events_live all the same (nothing of the
   * ledger depends on it). */
  CUcontext known = NULL;
  (void)slc__engine_current(e, &known);
  const slc_driver *d = &s->c->drv;
  for (unsigned i = 0; i < q->cap; i++) {
    CUevent ev = q->ring[i].ev;
    if (ev == NULL) continue;
    if (d->pfn_cuEventDestroy(ev) != CUDA_SUCCESS)
      (void)d->pfn_cuEventDestroy(ev);
    atomic_fetch_sub_explicit(&e->n.events_live, 1, memory_order_relaxed);
  }
  free(q->ring);
  q->ring = NULL;
  q->s = NULL;
  slc__mq_unref(q); /* a releaser still running frees it when done */
}

/* ---- Observability ------------------------------------------------------- */

/* Adds device engine e's counters to *out. */
static void slc__stats_add(const struct slc__dev_engine *e,
                           slc_engine_stats *out) {
  out->polls += slc__load_relaxed(&e->n.polls);
  out->markers_placed += slc__load_relaxed(&e->n.placed);
  out->tail_markers += slc__load_relaxed(&e->n.tails);
  out->markers_done += slc__load_relaxed(&e->n.done);
  out->markers_skipped += slc__load_relaxed(&e->n.skipped);
  out->record_failures += slc__load_relaxed(&e->n.record_failures);
  out->query_failures += slc__load_relaxed(&e->n.query_failures);
  out->stream_errors += slc__load_relaxed(&e->n.stream_errors);
  out->releases += slc__load_relaxed(&e->n.releases);
  out->seqs_released += slc__load_relaxed(&e->n.seqs_released);
  out->events_live += slc__load_relaxed(&e->n.events_live);
  out->markers_pending += slc__load_relaxed(&e->n.pending);
  out->thread_wakes_by_issuers += slc__load_relaxed(&e->n.kicks);
  out->batch_enters += slc__load_relaxed(&e->n.batch_enters);
  out->batch_exits += slc__load_relaxed(&e->n.batch_exits);
}

static void slc__stats_add_waiter(const struct slc__waiter *wt,
                                  slc_engine_stats *out) {
  out->thread_sleeps += slc__load_relaxed(&wt->sleeps);
  out->thread_parks += slc__load_relaxed(&wt->parks);
}

int slc_engine_stats_get(slc_context *c, slc_engine_stats *out) {
  static const char fn[] = "slc_engine_stats_get";
  if (c == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  struct slc__engine *en = slc__load_acquire(&c->engine);
  if (en == NULL) return slc__fail(LDG_EINVAL, fn, "the engine is not enabled");
  memset(out, 0, sizeof(*out));
  for (int d = 0; d < en->n_dev; d++) slc__stats_add(&en->dev[d], out);
  for (int i = 0; i < en->n_waiters; i++)
    slc__stats_add_waiter(&en->waiters[i], out);
  for (int i = 0; i < SLC_CAUSE_COUNT; i++) {
    out->keeps_by_cause[i] = slc__load_relaxed(&c->keeps_by[i]);
    out->keeps_run += out->keeps_by_cause[i];
  }
  return LDG_OK;
}

int slc_engine_device_stats_get(slc_context *c, int device,
                                slc_engine_stats *out) {
  static const char fn[] = "slc_engine_device_stats_get";
  if (c == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, fn, "NULL argument");
  struct slc__engine *en = slc__load_acquire(&c->engine);
  if (en == NULL) return slc__fail(LDG_EINVAL, fn, "the engine is not enabled");
  if (device < 0 || device >= en->n_dev)
    return slc__fail(LDG_EINVAL, fn, "device %d is not one of the context's "
                     "%d", device, en->n_dev);
  memset(out, 0, sizeof(*out));
  slc__stats_add(&en->dev[device], out);
  if (en->dev[device].w != NULL) slc__stats_add_waiter(en->dev[device].w, out);
  return LDG_OK;
}

int slc_stream_progress_get(slc_stream *s, slc_stream_progress *out) {
  if (s == NULL || out == NULL)
    return slc__fail(LDG_EINVAL, "slc_stream_progress_get", "NULL argument");
  memset(out, 0, sizeof(*out));
  out->stream_id = ldg_stream_id(s->ls);
  out->enqueued_mark = ldg_mark(s->ls);
  out->pending = ldg_pending_count(s->ls);
  struct slc__mq *q = slc__load_acquire(&s->mq); /* as after_issue */
  out->engine_driven = q != NULL;
  if (q == NULL) return LDG_OK;
  out->released_mark = slc__load_relaxed(&q->released);
  out->marked = slc__load_acquire(&q->placed_mark);
  uint64_t head = slc__load_acquire(&q->head);
  uint64_t tail = slc__load_acquire(&q->tail);
  out->markers_pending = (size_t)(tail - head);
  /* The oldest slot may be handed back and refilled while we read it: the
   * age is then that of a younger marker (a snapshot's imprecision, never a
   * crash: the slot array lives as long as the stream). */
  if (tail != head) {
    uint64_t placed = slc__load_relaxed(&q->ring[head & (q->cap - 1)].placed_ns);
    uint64_t now = slc__engine_now(q->e);
    out->oldest_marker_age_ns = now > placed ? now - placed : 0;
  }
  out->engine_error = (CUresult)slc__load_acquire(&q->err);
  return LDG_OK;
}

int slc_stream_engine_error(const slc_stream *s, CUresult *cu) {
  if (s == NULL)
    return slc__fail(LDG_EINVAL, "slc_stream_engine_error", "stream is NULL");
  struct slc__mq *q =
      slc__load_acquire(&((slc_stream *)s)->mq); /* as after_issue */
  int err = q != NULL ? slc__load_acquire(&q->err) : 0;
  if (cu != NULL) *cu = (CUresult)err;
  return err != 0 ? SLC_EDRIVER : LDG_OK;
}
