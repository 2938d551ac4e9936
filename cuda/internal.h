/*
 * Internals of the cuda/ layer: the handle structs and the helpers shared by
 * context.c, stream.c, event.c and error.c. Internal names use slc__.
 */
#ifndef STREAMLEDGER_CUDA_INTERNAL_H
#define STREAMLEDGER_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cuda/sl_cuda.h"

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
};

struct slc_context {
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
};

/* The stream's gate word: bit 63 "destroying" (no new calls), the low bits
 * the number of calls currently inside the driver on this stream. A call
 * increments it (acq_rel) and backs out if the flag was set; it decrements it
 * (release) once its driver call returned, before it touches the ledger or
 * runs a keep. Destroy sets the flag and waits (acquire) for the count to
 * reach zero: every driver call on the stream then happened-before its
 * cuStreamSynchronize, and no later one starts. */
#define SLC__GATE_DESTROYING (UINT64_C(1) << 63)
#define SLC__GATE_USERS (SLC__GATE_DESTROYING - 1)

struct slc_stream {
  slc_context *c;
  int device;
  unsigned flags;
  CUstream cu;
  ldg_stream *ls; /* one reference, dropped with the handle */
  atomic_uint_fast64_t gate;
  atomic_long refs;
  atomic_int destroyed; /* 1 once the driver stream was destroyed */
  struct slc__mq *mq;   /* engine.c's marker ring; NULL if not driven */
  bool adopted;         /* slc_stream_adopt: the driver stream is not ours */
};

struct slc_event {
  slc_context *c;
  int device;
  CUevent cu;
  pthread_mutex_t mu;  /* see sl_cuda.h THREADING; guards the fields below */
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

/* What the drains run by ldg_settle_vector on this thread reported, so the
 * settle paths can tell a real failure (the record holds the driver's error)
 * from a stream that was being destroyed (its destroy releases it). */
#define SLC__DRAIN_SKIPPED 1
#define SLC__DRAIN_FAILED 2
void slc__drain_note(int what);
int slc__drain_take(void); /* the bits noted since the last take */

/* ---- Devices (context.c) ---- */

/* Retains the primary context on first use and makes it current. On error
 * the record is set and the code returned. */
int slc__make_current(slc_context *c, int device, const char *call);

/* ---- Streams (stream.c) ---- */

/* Enters the stream's gate: LDG_OK, or LDG_EDESTROYED (record set). */
int slc__stream_enter(slc_stream *s, const char *call);
void slc__stream_exit(slc_stream *s);

/* Fills s (its cu already set) and registers it: ledger stream, engine,
 * live count. On error frees s (destroying cu unless adopted). */
int slc__stream_init(slc_context *c, slc_stream *s, int device, unsigned flags,
                     bool adopted);

/* The ledger drain of every stream (ctx = the slc_stream). */
int slc__stream_drain(void *ctx);

/* ---- The progress engine (engine.c) ---- */

/* slc_stream_create: joins the engine (if enabled). LDG_OK or LDG_ENOMEM. */
int slc__engine_register(slc_stream *s);
/* The last slc_stream_unref: leaves it, destroying the marker events. */
void slc__engine_unregister(slc_stream *s);
/* After an operation was enqueued on s: maybe a marker; wakes the engine. */
void slc__engine_after_issue(slc_stream *s);
/* slc_context_destroy: stops the thread and frees the engine. */
void slc__engine_stop(slc_context *c);
/* What slc_keep_status() returns on this thread from now on. */
void slc__set_keep_status(int status);

#endif /* STREAMLEDGER_CUDA_INTERNAL_H */
