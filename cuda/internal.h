/*
 * Internals of the cuda/ layer: the handle structs and the helpers shared by
 * context.c, stream.c, event.c and error.c. Internal names use slc__.
 */
#ifndef STREAMLEDGER_CUDA_INTERNAL_H
#define STREAMLEDGER_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cuda/cuda_testing.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "ledger/thread_ops.h" /* the keeps frame's counter; ldg__enqueue_checked */

/* Named atomic operations (as ledger/atomics.h): every shared access of the
 * layer goes through one of these; none is implicitly seq_cst. */
#define slc__load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define slc__load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define slc__store_release(p, v) \
  atomic_store_explicit((p), (v), memory_order_release)
#define slc__fetch_add_relaxed(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define slc__fetch_add_acq_rel(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_acq_rel)
#define slc__fetch_sub_acq_rel(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define slc__fetch_sub_release(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_release)
#define slc__fetch_or_acq_rel(p, v) \
  atomic_fetch_or_explicit((p), (v), memory_order_acq_rel)
#define slc__fetch_and_acq_rel(p, v) \
  atomic_fetch_and_explicit((p), (v), memory_order_acq_rel)

struct slc__device {
  CUdevice dev;
  CUcontext ctx;           /* written once under init_mu, before `ready` */
  atomic_int ready;        /* 1 once ctx is retained (release/acquire) */
  pthread_mutex_t init_mu; /* first use only: retaining the primary ctx */
  /* Bit p: this device's context has access to device p's memory
   * (slc_device_enable_peer_access; peers 0..63). Set with release after
   * cuCtxEnablePeerAccess succeeded, read with acquire (peer.c). */
  atomic_uint_fast64_t peers_on;
};

/* What an issue reads of its context, on one cache line: a launch read
 * three (the flag below drv, and the table's cuCtxGetCurrent and
 * cuLaunchKernel entries, 0x260 bytes apart: bench/RESULTS.md, "Issue 11,
 * eleventh session: the launch row (launch11)"). The entries are copies of
 * drv's, made by slc_context_create with the copy of the table, which is
 * never written after: they stay equal to it. */
#define SLC__HOT_ENTRY(name) __typeof__(((slc_driver *)0)->pfn_##name) name
struct slc__hot {
  /* slc_context_cache_current: trust this thread's slc__tls_ctx instead of
   * asking the driver. Relaxed: a flag of the caller's choosing, no data
   * hangs on it. */
  _Alignas(64) atomic_bool cache_current;
  SLC__HOT_ENTRY(cuCtxGetCurrent);
  SLC__HOT_ENTRY(cuLaunchKernel);
  SLC__HOT_ENTRY(cuEventRecord);
  SLC__HOT_ENTRY(cuMemcpyHtoDAsync);
  SLC__HOT_ENTRY(cuMemcpyDtoHAsync);
  SLC__HOT_ENTRY(cuMemcpyDtoDAsync);
  SLC__HOT_ENTRY(cuMemsetD8Async);
};
#undef SLC__HOT_ENTRY
_Static_assert(sizeof(struct slc__hot) == 64,
               "what an issue reads of its context is one cache line");

struct slc_context {
  /* First: the context is allocated aligned (slc_context_create). */
  struct slc__hot hot;
  slc_driver drv; /* copy of the caller's table; read-only */
  ldg_ledger *ledger;
  int n_devices;
  int driver_version;
  struct slc__device *devices;
  atomic_uint_fast64_t next_vec_id;
  /* Streams (until their last unref), events, buffers, modules alive:
   * slc_context_destroy refuses while non-zero. */
  atomic_long live_handles;
  _Atomic(struct slc__engine *) engine; /* engine.c; NULL until enabled */
  /* Keeps run by the layer's calls, by cause (slc_keep_cause; engine.c,
   * slc__keeps_end). Relaxed counters: statistics only. */
  atomic_uint_fast64_t keeps_by[SLC_CAUSE_COUNT];
  /* Streams whose last reference went but whose teardown could not finish
   * (the destroy's synchronisation failed, or cuStreamDestroy did): kept,
   * with their ledger streams and what those hold, until
   * slc_context_destroy proves them complete (see stream.c). limbo_mu
   * guards the list: taken only on those failure paths and by the
   * context's destroy. */
  pthread_mutex_t limbo_mu;
  slc_stream *limbo;
  /* Every stream from its creation to its last unref (a doubly linked
   * list), so that slc_engine_enable drives the streams that exist already
   * (engine.c, REGISTRATION). streams_mu guards the list and each stream's
   * joining or leaving the engine: taken by stream creation, the last
   * unref and slc_engine_enable, never on an issuing or release path. */
  pthread_mutex_t streams_mu;
  slc_stream *streams;
};

/* The stream's gate word: bit 63 "destroying" (no new calls), bit 62
 * "synced" (that destroy's cuStreamSynchronize succeeded: everything ever
 * issued on the stream has completed), the low bits the number of calls
 * currently inside the driver on this stream that entered with the count.
 * Such a call increments it (acq_rel) and backs out if "destroying" was
 * set; it decrements it (release) once its driver call returned, before it
 * touches the ledger or runs a keep. The calls of slc__stream_enter use
 * their thread's word instead where they can (THE GATE'S THREAD WORDS
 * below; stream.c, THE GATE). Destroy sets "destroying" (seq_cst) and
 * waits (acquire) for the count to reach zero and for no thread's word to
 * name the stream: every driver call on the stream then happened-before its
 * cuStreamSynchronize, and no later one starts. If that sync fails the
 * destroy clears "destroying" (the stream is live again); if it succeeds it
 * sets "synced" (acq_rel), which is never cleared. */
#define SLC__GATE_DESTROYING (UINT64_C(1) << 63)
#define SLC__GATE_SYNCED (UINT64_C(1) << 62)
#define SLC__GATE_USERS (SLC__GATE_SYNCED - 1)

/* The struct is also the drain context of its ledger stream, so it lives as
 * long as the ledger stream does: freed by the ledger stream's finalizer
 * (ldg_stream_set_finalizer), never directly. `refs` counts the handle's
 * references; when they are gone the struct gives up its ledger reference
 * (or waits in the context's limbo list for slc_context_destroy). */
struct slc_stream {
  /* What an issue reads, first: the struct is allocated on a cache line
   * of its own (slc__stream_alloc), so these share one. */
  slc_context *c;
  int device;
  unsigned flags;
  CUstream cu;
  ldg_stream *ls; /* one reference, given up when the handle goes */
  /* The device's primary context (c->devices[device].ctx, retained before
   * any stream of the device exists and until the context's destroy):
   * slc__make_current_for compares with it without reading the device. */
  CUcontext ctx;
  atomic_uint_fast64_t gate;
  /* engine.c's marker ring; NULL if not driven. Set (release) under
   * c->streams_mu when the stream joins the engine — at its creation, or
   * later by slc_engine_enable while issuers run (they load it acquire) —
   * and freed at the last unref (slc__engine_unregister), not by the
   * finalizer: see engine.c, REGISTRATION. */
  _Atomic(struct slc__mq *) mq;
  atomic_long refs;
  atomic_int destroyed;   /* 1 once cuStreamDestroy succeeded (adopted: once
                           * it would have; the CUstream is not ours) */
  slc_stream *limbo_next; /* in c->limbo (under c->limbo_mu) */
  slc_stream *streams_prev, *streams_next; /* c->streams, under streams_mu */
  bool adopted; /* slc_stream_adopt: the driver stream is not ours */
};

struct slc_event {
  slc_context *c;
  int device;
  CUevent cu;
  atomic_uint lock;    /* 1 while held (event.c, THE LOCK); guards: */
  slc_stream *stream;  /* last record's stream (a reference), or NULL */
  ldg_seq mark;        /* its mark at that record */
  uint64_t generation; /* bumped by every successful record */
};

struct slc_buffer {
  slc_context *c;
  int device;
  bool host;
  size_t bytes;
  uint64_t id;
  CUdeviceptr dptr;
  void *hptr;
};

struct slc_module {
  slc_context *c;
  int device;
  CUmodule cu;
};

/* ---- Errors (error.c) ---- */

/* Records a driver failure of `call` on this thread; returns its code. */
int slc__fail_cu(const slc_context *c, const char *call, CUresult r,
                 const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* As slc__fail_cu with the driver table directly (c may be unavailable). */
int slc__fail_cu_drv(const slc_driver *d, const char *call, CUresult r,
                     const char *detail);

/* Records a refusal by the layer or the ledger; returns code. */
int slc__fail(int code, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Copies of this thread's record, for the paths that must not leave their
 * own failure in it (slc_stream_unref) or that report an error met before
 * keeps ran (the settles). restore returns the restored code. */
void slc__error_save(slc_error *out);
int slc__error_restore(const slc_error *e);

/* One settle (ldg_settle_vector) of the layer on this thread: a frame on the
 * caller's stack, linked from thread-local storage, into which the drains
 * this settle runs note their failure (the first one's record, taken at the
 * moment it failed). Keeps the settle runs may settle again: a nested call
 * pushes its own frame and pops it before returning, so the outer frame
 * keeps what its own drains said whatever the keeps did. */
struct slc__settle_frame {
  struct slc__settle_frame *prev;
  bool failed;
  slc_error err; /* the first failing drain's record */
};
void slc__settle_push(struct slc__settle_frame *f);
void slc__settle_pop(struct slc__settle_frame *f);
/* A drain failed and recorded why: note it in the innermost frame. */
void slc__drain_failed(void);

/* Test hooks (cuda_testing.h): a call in test builds, nothing otherwise. */
#ifdef SLC_TEST_HOOKS
void slc__test_hook(enum slc__hook_point point);
#define SLC__HOOK(point) slc__test_hook(point)
#else
#define SLC__HOOK(point) ((void)0)
#endif

/* ---- Operations on layer buffers (bufops.c, peer.c) ---- */

#define SLC__INLINE_IDS 8

/* The caller's hold plus the given buffers; `owned` must be freed after. */
struct slc__xhold {
  slc_hold h;
  uint64_t ids_inline[SLC__INLINE_IDS];
  ldg_range ranges_inline[SLC__INLINE_IDS];
  void *owned;
};

/* x = hold (may be NULL) + the ids of bufs[0..n) and, for host buffers,
 * their bytes [offs[i], +lens[i]). LDG_EINVAL (bad hold) or LDG_ENOMEM,
 * with the record set. */
int slc__extend_hold(struct slc__xhold *x, const slc_hold *hold,
                     slc_buffer *const *bufs, const size_t *offs,
                     const size_t *lens, size_t n, const char *call);

/* ---- Devices (context.c) ---- */

/* The context the layer last made current, or found current, on this
 * thread (NULL: unknown). Every cuCtxSetCurrent of the layer goes through
 * slc__ctx_set, which keeps it true; only a context switch made outside the
 * layer makes it stale, which is why it is trusted only when the context
 * asks for it (slc_context_cache_current). */
extern _Thread_local CUcontext slc__tls_ctx;

static inline CUresult slc__ctx_set(const slc_context *c, CUcontext ctx) {
  CUresult r = c->drv.pfn_cuCtxSetCurrent(ctx);
  slc__tls_ctx = r == CUDA_SUCCESS ? ctx : NULL;
  return r;
}

/* Retains the primary context on first use and makes it current. On error
 * the record is set and the code returned. The common case inline — the
 * device's context retained and already current: one acquire load and
 * cuCtxGetCurrent (sl_cuda.h THREADING), or, with slc_context_cache_current
 * on, no driver call when this thread's cache names that context; the rest
 * out of line (context.c). */
int slc__make_current_slow(slc_context *c, int device, const char *call);
/* cuCtxGetCurrent returned r and, if it succeeded, not device's context. */
int slc__set_current(slc_context *c, int device, CUresult r, const char *call);
/* The common case of both below: whether ctx (a device's primary context,
 * retained) is current on this thread — by the cache when it is trusted,
 * else by asking the driver (*r: its answer, for slc__set_current). */
static inline bool slc__ctx_is_current(slc_context *c, CUcontext ctx,
                                       CUresult *r) {
  /* The flag first: off (the default), one load of the line the query's
   * entry is read from anyway, and no read of the cache. */
  if (slc__load_relaxed(&c->hot.cache_current) && slc__tls_ctx == ctx)
    return true;
  CUcontext cur = NULL;
  *r = c->hot.cuCtxGetCurrent(&cur);
  /* Expected current (the hints here and in the gate lay the common path
   * out straight: bench/RESULTS.md, "Issue 11, eleventh session"). */
  if (__builtin_expect(*r != CUDA_SUCCESS || cur != ctx, 0)) return false;
  slc__tls_ctx = cur;
  return true;
}
static inline int slc__make_current(slc_context *c, int device,
                                    const char *call) {
  if (c != NULL && device >= 0 && device < c->n_devices) {
    struct slc__device *dev = &c->devices[device];
    /* Pairs with the release store of ready: ctx is written before it. */
    if (slc__load_acquire(&dev->ready)) {
      CUresult r = CUDA_SUCCESS;
      if (slc__ctx_is_current(c, dev->ctx, &r)) return LDG_OK;
      return slc__set_current(c, device, r, call);
    }
  }
  return slc__make_current_slow(c, device, call);
}

/* slc__make_current(s->c, s->device, call) for a call on s: the same
 * answer without reading the context's device table, whose entry for
 * s->device is ready and names s->ctx for as long as s exists. */
static inline int slc__make_current_for(slc_stream *s, const char *call) {
  CUresult r = CUDA_SUCCESS;
  if (slc__ctx_is_current(s->c, s->ctx, &r)) return LDG_OK;
  return slc__set_current(s->c, s->device, r, call);
}

/* What a call that names s needs current (sl_cuda.h THREADING): nothing
 * when s->cu is a stream of its own — the driver takes the context from the
 * stream for copies, event records, stream waits, queries and syncs, whatever
 * is current (CUDA Programming Guide, "Stream and Event Behavior": they
 * succeed on a stream of a device that is not current; measured on the
 * H200, bench/RESULTS.md "Issue 11, fifth session: the layer") — and the
 * device's primary context for the adopted legacy default stream, whose
 * handle means "the current context's" (adopt.c). Kernel launches and
 * memsets do not use this: a launch on a stream of a device that is not
 * current fails, and the guide does not name memsets. */
static inline int slc__current_for(slc_stream *s, const char *call) {
  if (s->cu != CU_STREAM_LEGACY) return LDG_OK;
  return slc__make_current_for(s, call);
}

/* ---- Streams (stream.c) ---- */

/* One step of a wait for another thread: sched_yield for the first 64
 * steps, then 50 us sleeps. */
void slc__backoff(unsigned *spins);

/* THE GATE'S THREAD WORDS (stream.c, THE GATE): a thread inside a stream's
 * gate is counted either in the stream's gate word (a locked add and sub)
 * or in its own word, `inside`, which names that stream (plain stores; the
 * destroy pays with a barrier on every thread, membarrier). Words are
 * allocated once per thread, on a list that only grows; a word whose
 * thread ended is taken again by a new thread. */
/* Each word has a cache line of its own: the issuing thread stores to it
 * twice per call, so a word sharing its line with another thread's (two
 * 24-byte callocs side by side) moved that line between their cores on
 * every call. The gate's mode rides in the line the call reads anyway. */
struct slc__inside {
  _Alignas(64) _Atomic(slc_stream *) s; /* the stream this thread is
                                         * inside, or NULL */
  atomic_int taken;         /* 1 while a thread owns the word */
  int mode;                 /* slc__gate_mode, fixed before the word is
                             * handed out (SLC__GATE_MEMBARRIER or
                             * _EXCHANGE; the count never reads it) */
  struct slc__inside *next; /* slc__inside_list; set before it is pushed */
};
_Static_assert(sizeof(struct slc__inside) == 64,
               "a thread word is one cache line");
enum { SLC__GATE_COUNT = 1, SLC__GATE_MEMBARRIER, SLC__GATE_EXCHANGE };
extern atomic_int slc__gate_mode; /* 0 until the first thread word */
extern _Thread_local struct slc__inside *slc__tls_inside;
/* This thread's word, made or taken on its first gate; never NULL: where
 * no word can be had (the count mode, no memory) a shared word that names
 * no stream, so that enter takes the count. */
struct slc__inside *slc__inside_get(void);

/* Enters the stream's gate: LDG_OK, or LDG_EDESTROYED (record set). Inline:
 * every call that reaches the driver on a stream makes it. Calls inside
 * one gate never enter another (no keep, no nested issue runs there); if
 * one did, it would use the count (the thread's word is taken), and
 * slc__stream_exit's rule below still balances both. */
int slc__stream_refused(slc_stream *s, const char *call); /* stream.c */
static inline int slc__stream_enter(slc_stream *s, const char *call) {
  struct slc__inside *me = slc__tls_inside;
  if (__builtin_expect(me == NULL, 0)) me = slc__inside_get();
  if (__builtin_expect(slc__load_relaxed(&me->s) == NULL, 1)) {
    uint64_t g;
    /* Expected: membarrier where the kernel has it (slc__inside_get). */
    if (__builtin_expect(me->mode == SLC__GATE_MEMBARRIER, 1)) {
      /* Store, then load, in program order (the compiler barrier); the
       * destroy's membarrier orders them on the CPU: either it sees this
       * word, or this load sees its "destroying". */
      atomic_store_explicit(&me->s, s, memory_order_relaxed);
      atomic_signal_fence(memory_order_seq_cst);
      g = slc__load_relaxed(&s->gate);
    } else {
      /* Seq_cst exchange and load against the destroy's seq_cst or and
       * loads of the words: one of the two sees the other's store. */
      atomic_exchange_explicit(&me->s, s, memory_order_seq_cst);
      g = atomic_load_explicit(&s->gate, memory_order_seq_cst);
    }
    if (__builtin_expect((g & SLC__GATE_DESTROYING) == 0, 1)) return LDG_OK;
    slc__store_release(&me->s, NULL);
    return slc__stream_refused(s, call);
  }
  uint64_t old = slc__fetch_add_acq_rel(&s->gate, 1);
  if (__builtin_expect((old & SLC__GATE_DESTROYING) != 0, 0)) {
    slc__fetch_sub_release(&s->gate, 1);
    return slc__stream_refused(s, call);
  }
  return LDG_OK;
}
/* Leaves the gate: the thread's word if it names s (entered that way),
 * else the count (entered with the count: here, a drain, engine.c). */
static inline void slc__stream_exit(slc_stream *s) {
  struct slc__inside *me = slc__tls_inside;
  /* Release, either way: this call's driver work happens-before the
   * destroy that waits for the word or the count (its acquire loads in
   * slc__wait_users). */
  if (__builtin_expect(me != NULL && slc__load_relaxed(&me->s) == s, 1))
    slc__store_release(&me->s, NULL);
  else
    slc__fetch_sub_release(&s->gate, 1);
}

/* A zeroed stream struct on a cache line of its own (NULL: no memory);
 * free() gives it back. */
slc_stream *slc__stream_alloc(void);

/* Fills s (its cu already set) and registers it: ledger stream, engine,
 * live count. The device's context must be retained (a make-current of
 * device on this thread succeeded). On error frees s (destroying cu unless
 * adopted). */
int slc__stream_init(slc_context *c, slc_stream *s, int device, unsigned flags,
                     bool adopted);

/* The ledger drain of every stream (ctx = the slc_stream). */
int slc__stream_drain(void *ctx);

/* slc_context_destroy, once the engine stopped: proves each limbo stream
 * complete (cuStreamSynchronize), then destroys them in the ledger and the
 * driver (never an adopted CUstream) and drops them. On error nothing more
 * is done and the list stays (the destroy may be retried). No other call on
 * c may run. */
int slc__limbo_finish(slc_context *c);

/* ---- The progress engine (engine.c) ---- */

/* slc_stream_create: joins the context's list of streams and the engine (if
 * enabled). LDG_OK or LDG_ENOMEM (then s is in neither). */
int slc__engine_register(slc_stream *s);
/* The last slc_stream_unref, whether the stream was destroyed or goes to
 * the limbo list: leaves the list and the engine, destroying the marker
 * events. */
void slc__engine_unregister(slc_stream *s);
/* After an operation was enqueued on s: maybe a marker; wakes the engine.
 * Inline, so that a stream without an engine ring (the engine off: the
 * default) pays one load on the issuing path, not a call. */
void slc__engine_issued(struct slc__mq *q);
static inline void slc__engine_after_issue(slc_stream *s) {
  /* Acquire pairs with slc__mq_attach's release: q is initialised, q->e
   * with it. */
  struct slc__mq *q = slc__load_acquire(&s->mq);
  if (q != NULL) slc__engine_issued(q);
}
/* After an entry that places no marker was enqueued on s
 * (slc_stream_record_deferred): wakes a parked engine thread, nothing else.
 * Inline as slc__engine_after_issue: a stream without an engine ring pays
 * one load, not a call. */
void slc__engine_deferred(struct slc__mq *q);
static inline void slc__engine_after_deferred(slc_stream *s) {
  /* Acquire, as slc__engine_after_issue: q initialised, q->e with it. */
  struct slc__mq *q = slc__load_acquire(&s->mq);
  if (q != NULL) slc__engine_deferred(q);
}
/* slc_context_destroy, before it finishes limbo streams: stops (joins) the
 * thread and frees the engine. Idempotent (a retried destroy). */
void slc__engine_stop(slc_context *c);

/* Counting keeps by cause (slc_engine_stats.keeps_by_cause). A layer call
 * that may run keeps takes a frame before the ledger call and ends it
 * after: the keeps the ledger ran on this thread in between
 * (ldg_thread_ops_released), less those that nested frames (keeps calling
 * the layer) already counted, go to `cause`. Thread-local reads and one
 * relaxed add when some ran. */
struct slc__keeps_frame {
  uint64_t ran0, counted0;
};
extern _Thread_local uint64_t slc__keeps_counted; /* engine.c */
void slc__keeps_count(slc_context *c, const struct slc__keeps_frame *f,
                      uint64_t ran, slc_keep_cause cause);
/* Inline: on the issuing path (the overtaken enqueue) a frame costs two
 * thread-local reads and a compare when no keep ran. */
static inline void slc__keeps_begin(struct slc__keeps_frame *f) {
  f->ran0 = ldg__thread_ops_released();
  f->counted0 = slc__keeps_counted;
}
static inline void slc__keeps_end(slc_context *c,
                                  const struct slc__keeps_frame *f,
                                  slc_keep_cause cause) {
  uint64_t ran = ldg__thread_ops_released() - f->ran0;
  if (ran != 0) slc__keeps_count(c, f, ran, cause);
}
/* Runs a keep the ledger refused (its stream was destroyed, so the work is
 * complete) on this thread, and counts it under `cause`. */
void slc__keeps_run_here(slc_context *c, ldg_keep keep, slc_keep_cause cause);

#endif /* STREAMLEDGER_CUDA_INTERNAL_H */
