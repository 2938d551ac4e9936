/*
 * streamledger's CUDA Driver API layer: the calls a runtime makes instead of
 * the driver's, so that every asynchronous operation is recorded in the
 * ledger (ledger/ledger.h) in the right order and its operands are released
 * exactly when its completion is known.
 *
 * Every driver call is paired with the ledger following SPEC.md section 2:
 *   - Issue, then enqueue: an asynchronous copy, memset or launch is issued to
 *     the driver first and recorded (ldg_enqueue) only once the driver
 *     accepted it. A driver call that fails records nothing and releases
 *     nothing: the caller still owns its keep.
 *   - Mark, then complete: stream synchronize, event record, and device
 *     synchronize read the ledger mark (ldg_mark / ldg_device_marks) before
 *     the driver call, and release to that mark after it succeeded. A failed
 *     synchronisation releases nothing.
 *
 * OBJECTS AND OWNERSHIP
 *   slc_context  the driver table, one ledger, and one primary context per
 *                device (retained on first use of the device). Created with
 *                slc_context_create from a loaded driver table (driver.h: the
 *                real libcuda, or the host executor of tests/cuda/); the
 *                table is copied. Destroyed by slc_context_destroy once every
 *                stream, event, buffer and module of it is gone.
 *   slc_stream   a driver stream plus its ledger stream (ldg_stream).
 *                slc_stream_create gives the caller one reference; events
 *                recorded on it take their own. slc_stream_destroy
 *                synchronises and destroys it, but the handle stays valid
 *                (every later call on it is refused with LDG_EDESTROYED)
 *                until its last reference is dropped with slc_stream_unref
 *                (which destroys it first if needed). The layer's own
 *                state of the stream lives until the ledger lets go of the
 *                ledger stream (settles, pending waits and snapshots hold
 *                it), so a settle never reaches a freed stream.
 *   slc_event    a driver event owned by the layer, with the (stream, mark)
 *                of its last record. slc_event_destroy ends it.
 *   slc_buffer   device memory (cuMemAlloc) or pinned host memory
 *                (cuMemHostAlloc, portable to every context), each a vector
 *                with an id for the ledger (slc_buffer_id). Freed only when
 *                the ledger no longer holds it: slc_buffer_try_free refuses
 *                with LDG_EBUSY, slc_buffer_free settles first (see there).
 *   slc_module   a module loaded from an image (PTX or cubin) on a device.
 *   Keeps: an asynchronous operation takes an slc_hold (keep, vector ids,
 *   host ranges). On LDG_OK the ledger owns the keep and calls it exactly
 *   once, when the operation is known complete; on any error it is never
 *   called and the caller still owns the operands.
 *
 * WHAT A FAILED SYNCHRONISATION RELEASES: nothing, ever. Nothing is released
 *   without a proof of completion (a successful stream, event or device
 *   synchronisation, a complete query, or a wait that such a proof covers).
 *   A failed stream or event sync, query, device sync, settle or destroy
 *   releases nothing. When a stream's last reference goes and the destroy's
 *   synchronisation fails, the handle goes away but the stream is not
 *   destroyed: destroying its ledger stream would fire its waits and release
 *   other streams — on healthy devices, still at work — up to marks nothing
 *   proved. The stream is kept, live, with what it holds (a non-blocking
 *   one still drainable by settles, every one still covered by device
 *   synchronisations), until slc_context_destroy synchronises it and only
 *   then destroys it. A stream whose cuStreamDestroy failed is kept the same
 *   way until the context destroys it. After a device error that never
 *   clears (a sticky error), the work it held is never proved complete: its
 *   buffers cannot be freed (their settle reports the device's error) and so
 *   the context cannot be destroyed; the process must end, as CUDA requires.
 *
 * ERRORS
 *   Actions return LDG_OK (0) or a negative code: the ledger's LDG_E* codes
 *   or the layer's SLC_E* codes below (slc_strerror names every one).
 *   Predicates return bool; constructors return through an out-pointer that
 *   is written only on success. A call that returns an error changed nothing
 *   (exceptions are spelled out: a failed destroy, a failed record after a
 *   successful issue, slc_context_destroy, which resumes where it stopped).
 *   Every CUresult maps to a code (slc_code_of):
 *     CUDA_SUCCESS                                   -> LDG_OK
 *     CUDA_ERROR_INVALID_VALUE, _INVALID_HANDLE,
 *       _INVALID_DEVICE, _INVALID_IMAGE, _NOT_FOUND,
 *       _INVALID_PTX, _UNSUPPORTED_PTX_VERSION       -> LDG_EINVAL
 *     CUDA_ERROR_OUT_OF_MEMORY                       -> LDG_ENOMEM
 *     CUDA_ERROR_NO_DEVICE                           -> SLC_ENODEVICE
 *     CUDA_ERROR_NOT_INITIALIZED, _DEINITIALIZED,
 *       _STUB_LIBRARY, _CALL_REQUIRES_NEWER_DRIVER,
 *       _SYSTEM_NOT_READY, _SYSTEM_DRIVER_MISMATCH,
 *       _COMPAT_NOT_SUPPORTED_ON_DEVICE              -> SLC_ENODRIVER
 *     every other CUresult (launch failures, illegal
 *       addresses, CUDA_ERROR_NOT_READY outside a
 *       query, ...)                                  -> SLC_EDRIVER
 *   The driver's own name and message are kept: whenever a call returns an
 *   error, it first stores a description in a thread-local record that
 *   slc_last_error() returns — the code, the CUresult (CUDA_SUCCESS when the
 *   layer itself refused), the failing call, and a message such as
 *   "cuMemcpyHtoDAsync: CUDA_ERROR_INVALID_VALUE (invalid argument)". It
 *   stays until the next failing call on the same thread. Successful calls
 *   leave it alone, and so does slc_stream_unref, which cannot report (a
 *   failure of its destroy keeps the stream for the context; see above);
 *   calls made by keeps that run inside a call are calls of their own. A
 *   call that fails after running keeps (a settle whose drain failed)
 *   returns the error it met and leaves its record, whatever the keeps did.
 *
 * THREADING
 *   Any thread may use any stream, event, buffer, module or device at any
 *   time, concurrently, except: slc_context_destroy (no other call on the
 *   context), slc_event_destroy / slc_buffer_*free / slc_module_unload (the
 *   last call on that handle; no call on it may run concurrently or later),
 *   and use of a stream handle after its last reference is gone. Streams
 *   may be destroyed while other threads use them: each of their calls then
 *   either completes before the destroy synchronises, or is refused with
 *   LDG_EDESTROYED.
 *   The current context: copies, event records, stream waits, stream and
 *   event syncs and queries leave it as it is (none, or another device's):
 *   the driver reaches the work through the stream or event handle (CUDA
 *   Programming Guide, "Stream and Event Behavior"; checked on the H200 and
 *   by cuda_suite's no_current test). The exception is a stream adopted with
 *   slc_stream_adopt_legacy, whose handle means "the current context's":
 *   calls on it make its device's primary context current. Every other call
 *   that reaches the driver (launches, memsets, allocations, frees, creates
 *   and destroys, device syncs) makes the device's primary context current
 *   on the calling thread (cuCtxGetCurrent, then cuCtxSetCurrent if it
 *   differs) and leaves it current. With slc_context_cache_current on, the
 *   cuCtxGetCurrent is skipped when this thread's cache says the layer left
 *   that context current (see there for what the caller then promises).
 *   Shared state and why it is safe:
 *   - streams: one atomic word per stream (a destroy flag, a "synced" flag
 *     and a count of calls inside the driver on its stream), and one word
 *     per thread naming the stream it is inside. Copies, launches, records,
 *     waits and syncs only write their thread's word (or increment and
 *     decrement the count); destroy sets the flag and waits until the count
 *     is zero and no thread's word names the stream before synchronising
 *     and destroying the driver stream (it runs membarrier(2) first where
 *     the kernel has it: stream.c, THE GATE). A stream's ledger stream is
 *     a default one, owned by the one thread that issues on it (no locked
 *     RMW to record an operation, where the kernel has membarrier:
 *     ledger/owned.c, OWNED STREAMS); the first call to record on it from a
 *     second thread (an adopted stream shared by several threads, say)
 *     revokes that for good with one membarrier(2) call, and destroying a
 *     stream still owned makes one (ledger/ledger.h, table note (k)): a
 *     system call, never a wait for another thread. No lock, and no keep ever
 *     runs while a call is inside, so a keep may call back into any slc_
 *     function on any stream, this one included. A settle that finds a
 *     holder being destroyed waits until that destroy's synchronisation is
 *     decided (succeeded: drained; failed: it drains the stream itself) —
 *     never for the destroy's keeps, which may settle in turn.
 *   - events: one lock word per event (taken with one compare-and-swap,
 *     dropped with a release store; a taker that finds it held yields, then
 *     sleeps: event.c, THE LOCK). The driver event's state (its last
 *     record) and the (stream, mark) the layer keeps for it must change
 *     together: two records racing on one event would otherwise leave the
 *     driver holding one record and the layer the other's mark, and a sync
 *     would release a stream that was never waited for. The lock covers
 *     "read mark, cuEventRecord, store" and "cuStreamWaitEvent, read
 *     (stream, mark)"; the wait is recorded (ldg_add_wait, which runs keeps
 *     when a release of the waiting stream overtakes it) after the unlock,
 *     with the pair read under it. It is never held across a blocking
 *     driver call nor while keeps run: a sync reads the record under the
 *     lock, waits with it unlocked, and releases only if no record came in
 *     between (a generation count); otherwise it releases nothing, which is
 *     always allowed.
 *   - devices: a primary context is retained on first use under a per-device
 *     mutex (once per device, then an acquire load of a ready flag).
 *   - kept streams (failed synchronisation as the last reference went): a
 *     list in the context under a mutex, taken only on that failure path and
 *     by slc_context_destroy, never while keeps run.
 *   - the ledger is lock-free on the enqueue and release paths.
 *   Keeps run on the thread that released, never while the layer holds a
 *   lock. The calls that may run keeps: slc_stream_synchronize,
 *   slc_stream_query, slc_stream_destroy, slc_stream_unref (the last
 *   reference), slc_event_synchronize, slc_event_query, slc_event_record and
 *   slc_event_destroy (when they drop a stream's last reference),
 *   slc_stream_wait_event (a release of the waiting stream overtook the
 *   wait, or that stream was destroyed meanwhile), slc_device_synchronize,
 *   slc_buffer_free, slc_copy_htod, slc_copy_dtoh, slc_host_range_settle,
 *   the asynchronous operations (a release overtook the enqueue, or the
 *   stream was destroyed between the issue and the record),
 *   slc_stream_record_external, slc_stream_record_deferred and the
 *   slc_buf_* operations (likewise:
 *   they issue through the asynchronous operations; slc_buf_copy_peer_async
 *   too), the progress engine's
 *   thread and slc_engine_poll (cuda/sl_engine.h: releases to completed
 *   markers) and slc_context_destroy (kept streams). Keeps may block and
 *   may call any slc_ function — on any stream, event or buffer, their own
 *   stream included (unref, destroy, copies, settles, records, waits,
 *   syncs, frees, slc_engine_poll) — except slc_context_destroy, and except calls
 *   on a handle the running call ends (the buffer slc_buffer_free is
 *   freeing, the event slc_event_destroy is destroying, the stream whose
 *   last reference is going). Keeps run by slc_context_destroy must not
 *   call into its context. (tests/cuda: cuda_suite --keep-reentry runs each
 *   such call, slc_engine_poll, slc_buf_memset_async,
 *   slc_buf_copy_peer_async (staged, from device 1 when there are two) and
 *   slc_stream_record_external included, from a keep on each of these
 *   paths; the engine's through slc_engine_poll, whose release code the
 *   engine thread shares; slc_stream_record_external's and the slc_buf_*
 *   calls' own enqueue paths are not forced there.)
 */
#ifndef STREAMLEDGER_CUDA_SL_CUDA_H
#define STREAMLEDGER_CUDA_SL_CUDA_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/driver.h"
#include "ledger/ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors ----------------------------------------------------------------
 */

enum {
  SLC_EDRIVER = -100,   /* a driver call failed: see slc_last_error()->cu */
  SLC_ENODRIVER = -101, /* no usable driver: libcuda.so.1 missing, a stub, or
                         * too old for an entry the layer needs */
  SLC_ENODEVICE = -102, /* the driver reports no CUDA device */
};

/* What the last failing call on this thread said. */
typedef struct slc_error {
  int code;          /* the code that call returned (LDG_OK: none yet) */
  CUresult cu;       /* the driver's result; CUDA_SUCCESS if not the driver */
  char call[48];     /* the failing driver call or layer function */
  char message[512]; /* "call: CUDA_ERROR_NAME (driver message)[: detail]" */
} slc_error;

/* This thread's record; never NULL. */
const slc_error *slc_last_error(void);

/* Shorthand for slc_last_error()->message. */
const char *slc_last_error_message(void);

/* Resets this thread's record to "no error". */
void slc_clear_error(void);

/* For components built on the layer (pool/): record their own refusal, or
 * (slc_set_error_cu, under Context below) the failure of a driver call of
 * theirs, in this thread's record exactly as the layer's calls do (message
 * "call: <code name>: detail", or the driver's name and message); return
 * the code (slc_set_error_cu: slc_code_of(r)). */
int slc_set_error(int code, const char *call, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The project code of a CUresult (table above). */
int slc_code_of(CUresult r);

/* A short static name for any LDG_E* or SLC_E* code. Never NULL. */
const char *slc_strerror(int code);

/* ---- Context and devices ------------------------------------------------ */

typedef struct slc_context slc_context;

/* See slc_set_error above. */
int slc_set_error_cu(const slc_context *c, const char *call, CUresult r,
                     const char *detail);

/* Creates a context over `driver` (copied): cuInit(0), the driver version,
 * the device count, and a ledger. Primary contexts are retained lazily.
 * SLC_ENODRIVER: driver NULL or not loaded (the record carries its
 * load_error, e.g. "libcuda.so.1 not found (...)"), or cuInit said the driver
 * is unusable. SLC_ENODEVICE: no device. LDG_EINVAL: out NULL. LDG_ENOMEM. */
int slc_context_create(const slc_driver *driver, slc_context **out);

/* Ends the context: synchronises each kept stream (see WHAT A FAILED
 * SYNCHRONISATION RELEASES) and then destroys it (its keeps run here), destroys
 * the ledger, releases the primary contexts and frees c. LDG_EBUSY (and
 * nothing changes) while streams, events, buffers or modules of it are
 * alive. A driver error (a kept stream's sync, its cuStreamDestroy,
 * cuDevicePrimaryCtxRelease) is returned with c still allocated and nothing
 * released that was not proved complete: call slc_context_destroy again
 * (and nothing else on c); it resumes where it stopped. No other call on c
 * may run concurrently or later. NULL is ignored (LDG_OK). */
int slc_context_destroy(slc_context *c);

int slc_device_count(const slc_context *c);
int slc_driver_version(const slc_context *c); /* e.g. 12080 */
const slc_driver *slc_context_driver(const slc_context *c);

/* The context's ledger, for queries (ldg_pending_count, ldg_holds_vector...).
 * Its streams belong to the layer: do not destroy or release them directly. */
ldg_ledger *slc_context_ledger(const slc_context *c);

/* A fresh vector id from the same counter as buffer ids, for vectors the
 * caller manages itself (ids are never reused within a context). */
uint64_t slc_new_vector_id(slc_context *c);

/* Writes the device's name (cuDeviceGetName) into name[len]. */
int slc_device_name(slc_context *c, int device, char *name, size_t len);

/* Makes the device's primary context current on this thread (retaining it
 * on first use). For callers that make driver calls of their own. Always
 * asks the driver (cuCtxGetCurrent), also with slc_context_cache_current
 * on, so it brings this thread's cache up to date.
 * LDG_EINVAL: device out of range. */
int slc_device_make_current(slc_context *c, int device);

/* Opt-in (off by default): the layer's calls on c trust a per-thread cache
 * of the context the layer last made current (or found current) on the
 * calling thread, and skip the cuCtxGetCurrent they make otherwise when it
 * names the device's context: one driver call less on every call that
 * makes a context current (THREADING: launches, memsets, allocations, calls
 * on the adopted legacy stream; copies, records, waits and syncs on other
 * streams make none current and gain nothing) (cuCtxGetCurrent costs 9-14
 * ns on an H200, bench/RESULTS.md). The driver cannot be asked more cheaply, so the cache
 * is not checked against it: turn it on only where the threads that call
 * the layer change their current context through the layer alone
 * (its calls, slc_device_make_current). A thread that changes it by other
 * means (cuCtxSetCurrent, cuCtxPushCurrent / cuCtxPopCurrent, cudaSetDevice,
 * a library that does) must call slc_device_make_current before its next
 * call into the layer; otherwise that call may run with another context
 * current: it fails if the driver needs the stream's context current, and
 * on an adopted legacy default stream it would reach the other device's
 * stream. PyTorch switches devices by itself: leave it off there.
 * May be called at any time (a relaxed flag, read per call).
 * LDG_EINVAL: c NULL. */
int slc_context_cache_current(slc_context *c, bool on);

/* Synchronises one device: takes ldg_device_marks, makes the device current,
 * cuCtxSynchronize, then ldg_release_marks (each stream of the device,
 * non-blocking ones included, released to its mark, waits firing
 * transitively — onto other devices' streams too). Operations enqueued after
 * the snapshot stay held. On failure: ldg_marks_discard, nothing released,
 * the driver's error. Only this device's streams are snapshotted. */
int slc_device_synchronize(slc_context *c, int device);

/* ---- Streams ------------------------------------------------------------ */

typedef struct slc_stream slc_stream;

#define SLC_STREAM_NONBLOCKING 1u /* CU_STREAM_NON_BLOCKING */

/* Creates a driver stream on `device` (cuStreamCreate, CU_STREAM_DEFAULT or
 * CU_STREAM_NON_BLOCKING) and its ledger stream, whose drain is
 * cuStreamSynchronize. LDG_EINVAL: bad device, unknown flag bits, out NULL. */
int slc_stream_create(slc_context *c, int device, unsigned flags,
                      slc_stream **out);

/* Mark, cuStreamSynchronize, release to the mark. A failed sync releases
 * nothing. LDG_EDESTROYED after destroy. */
int slc_stream_synchronize(slc_stream *s);

/* Mark, cuStreamQuery; when the stream is idle (*idle = true), releases to
 * the mark. CUDA_ERROR_NOT_READY is *idle = false and LDG_OK. */
int slc_stream_query(slc_stream *s, bool *idle);

/* Refuses new calls on s, waits for calls already inside the driver on it,
 * cuStreamSynchronize, ldg_stream_destroy (releases everything the stream
 * holds; its waits fire), makes s's context current again (keeps may have
 * switched it), cuStreamDestroy. The handle stays valid.
 * If the synchronisation fails: nothing is released, the stream is live
 * again (calls racing with this destroy may have been refused), and the
 * driver's error is returned; retry, or drop the last reference (the stream
 * is then kept until the context's destroy proves it complete).
 * If only cuStreamDestroy fails, the stream is destroyed in the ledger (its
 * work had completed) and the driver's error is returned; the last
 * reference tries cuStreamDestroy again, then the context's destroy.
 * LDG_EDESTROYED if already destroyed (or being destroyed). */
int slc_stream_destroy(slc_stream *s);

void slc_stream_ref(slc_stream *s);
/* Drops a reference; the last one destroys the stream if it was not (as
 * slc_stream_destroy) and ends the handle. If that destroy's sync fails,
 * the handle goes away but nothing is released: the stream is kept, live,
 * with what it holds, until something proves it complete (a settle or device
 * synchronisation may release what it holds; slc_context_destroy
 * synchronises it, then destroys it). Never changes slc_last_error() (keeps
 * it runs may): call slc_stream_destroy first to see such an error. NULL
 * ignored. */
void slc_stream_unref(slc_stream *s);

/* Adopts a driver stream the layer did not create (the application's,
 * cuBLAS's, TensorRT's, a framework's) without taking ownership: the layer
 * records work on it and synchronises it like its own, but slc_stream_destroy
 * and the last slc_stream_unref (nor slc_context_destroy finishing a stream
 * kept after a failed sync) never destroy the CUstream. The owner must
 * keep it alive until then. Its device is found from its context, which
 * must be a device's primary context; non-blocking if created so.
 * LDG_EINVAL: c or out NULL, a default stream (NULL, CU_STREAM_LEGACY:
 * use slc_stream_adopt_legacy; CU_STREAM_PER_THREAD), another context's
 * stream, a handle the driver does not know (cuStreamGetCtx:
 * CUDA_ERROR_INVALID_HANDLE). */
int slc_stream_adopt(slc_context *c, CUstream cu, slc_stream **out);

/* Adopts device's legacy default stream (the runtime's stream 0, which
 * PyTorch uses by default) as a blocking stream whose handle is
 * CU_STREAM_LEGACY: every driver call on it runs with the device's primary
 * context current (unlike copies, records, waits and syncs on other
 * streams, which make none current: THREADING), so it always names that
 * device's legacy stream. As slc_stream_adopt otherwise: never destroyed by the
 * layer. Its implicit barriers with the device's other blocking streams
 * are not told to the ledger: a sync or event on it releases only what was
 * recorded on this object (adopt.c argues it). Each call makes a new object
 * with its own ledger stream (keep one per device). LDG_EINVAL: c or out
 * NULL, device out of range. May block (retains the primary context on
 * first use). */
int slc_stream_adopt_legacy(slc_context *c, int device, slc_stream **out);
bool slc_stream_is_adopted(const slc_stream *s);


int slc_stream_check_live(const slc_stream *s); /* LDG_OK / LDG_EDESTROYED */
int slc_stream_device(const slc_stream *s);
CUstream slc_stream_handle(const slc_stream *s);    /* for diagnostics */
ldg_stream *slc_stream_ledger(const slc_stream *s); /* for queries */

/* ---- Asynchronous operations ------------------------------------------- */

/* Each issues one driver call on s and then records it with the hold: keep
 * (called once when the operation is known complete), the ids of the
 * vectors it touches and the host byte ranges it reads or writes (SPEC.md
 * ldg_enqueue). hold may be NULL (nothing to keep; the operation is still
 * recorded, so marks count it). The hold's arrays are checked before the
 * issue (a bad one is LDG_EINVAL with nothing issued) and copied.
 * Errors: LDG_EINVAL (s NULL, bad hold), LDG_EDESTROYED, or the driver's
 * (nothing recorded, keep not called).
 * Should recording fail after the driver accepted the operation
 * (LDG_ENOMEM), the layer synchronises the stream before returning
 * LDG_ENOMEM, so the operands are no longer in use when the caller gets its
 * keep back; if that synchronisation fails too, the sync's error is returned
 * and the operands' state is unknown.
 * If s is destroyed between the issue and the record, its destroy
 * synchronised the operation: the keep is called at once and LDG_OK is
 * returned. */

typedef struct slc_hold {
  ldg_keep keep;
  const uint64_t *vec_ids;
  size_t n_vec;
  const ldg_range *ranges;
  size_t n_ranges;
} slc_hold;

int slc_copy_htod_async(slc_stream *s, CUdeviceptr dst, const void *src,
                        size_t bytes, const slc_hold *hold);
int slc_copy_dtoh_async(slc_stream *s, void *dst, CUdeviceptr src, size_t bytes,
                        const slc_hold *hold);
int slc_copy_dtod_async(slc_stream *s, CUdeviceptr dst, CUdeviceptr src,
                        size_t bytes, const slc_hold *hold);
int slc_memset_d8_async(slc_stream *s, CUdeviceptr dst, unsigned char value,
                        size_t bytes, const slc_hold *hold);

typedef struct slc_dim3 {
  unsigned x, y, z;
} slc_dim3;

/* cuLaunchKernel(f, grid, block, shared_bytes, s, params, NULL). f must come
 * from a module of s's device. */
int slc_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
               unsigned shared_bytes, void **params, const slc_hold *hold);

/* Records work that something else issued on s's driver stream (a cuBLAS
 * call, a TensorRT enqueue, a CUDA graph launch) with its hold, as the
 * layer's own calls do after their issue. ORDERING RULE 1 (issue, then
 * record): call it only after that work was issued; work issued after the
 * call is not covered. The hold is released once the stream is known
 * complete past it (sync, event, engine marker, destroy). LDG_EINVAL (s
 * NULL, bad hold). LDG_EDESTROYED: s is destroyed or being destroyed;
 * nothing recorded, the caller keeps its keep and must synchronise its work
 * itself. LDG_ENOMEM: as for the copies, after synchronising the stream. */
int slc_stream_record_external(slc_stream *s, const slc_hold *hold);

/* As slc_stream_record_external, except that the call never places the
 * progress engine's marker (no cuEventRecord on the calling thread, and it
 * does not count toward marker_every_ops): the entry is covered by the
 * stream's next marker — a later operation's, the engine thread's tail
 * marker, or one placed by slc_engine_poll / slc_engine_poll_stream, which
 * place one when the stream has uncovered work and none pending — or by a
 * synchronisation. A parked engine thread is woken as after any issue. For
 * records nobody waits on at once (the pool's slp_record_use: issue 10).
 * Same errors and keeps as slc_stream_record_external. */
int slc_stream_record_deferred(slc_stream *s, const slc_hold *hold);

/* ---- Events -----------------------------------------------------------------
 */

typedef struct slc_event slc_event;

/* cuEventCreate(CU_EVENT_DISABLE_TIMING) on `device`. */
int slc_event_create(slc_context *c, int device, slc_event **out);

/* Under the event's lock: m = ldg_mark(s), cuEventRecord(e, s), then the
 * event remembers (s, m), replacing any earlier record. s must be on the
 * event's device (LDG_EINVAL otherwise). A failed record leaves the
 * previous record in place. */
int slc_event_record(slc_event *e, slc_stream *s);

/* cuEventSynchronize, then releases the recorded stream to the recorded
 * mark. A never-recorded event releases nothing (LDG_OK). A failed sync
 * releases nothing. A record that lands while the sync waits makes it
 * release nothing (conservative). */
int slc_event_synchronize(slc_event *e);

/* cuEventQuery; when complete (*complete = true) releases as a sync does.
 * CUDA_ERROR_NOT_READY is *complete = false and LDG_OK. */
int slc_event_query(slc_event *e, bool *complete);

/* b waits for e's last record: cuStreamWaitEvent(b, e), then
 * ldg_add_wait(b, recorded stream, recorded mark), so that b's completion
 * past the wait releases the recorded stream up to its mark (transitively,
 * across devices too). A never-recorded event waits on nothing. If a release
 * of b overtakes the wait being recorded, the wait fires here and the
 * recorded stream's keeps run on this thread (the event's lock is not
 * held). */
int slc_stream_wait_event(slc_stream *b, slc_event *e);

/* cuEventDestroy and frees the handle (dropping its stream reference).
 * Releases nothing. The last call on e. NULL ignored (LDG_OK). */
int slc_event_destroy(slc_event *e);

/* Whether e was recorded; its recorded stream's ledger id and mark. */
bool slc_event_recorded(slc_event *e, uint64_t *stream_id, ldg_seq *mark);

/* ---- Buffers (vectors) and the settle paths ----------------------------- */

typedef struct slc_buffer slc_buffer;

/* cuMemAlloc on the device's primary context. Gets a fresh vector id. */
int slc_buffer_alloc_device(slc_context *c, int device, size_t bytes,
                            slc_buffer **out);

/* Pinned host memory: cuMemHostAlloc(CU_MEMHOSTALLOC_PORTABLE) under device
 * 0's primary context, usable by copies on every device. Fresh vector id. */
int slc_buffer_alloc_host(slc_context *c, size_t bytes, slc_buffer **out);

uint64_t slc_buffer_id(const slc_buffer *b);
size_t slc_buffer_size(const slc_buffer *b);
bool slc_buffer_is_host(const slc_buffer *b);
int slc_buffer_device(const slc_buffer *b);       /* device 0 for host */
CUdeviceptr slc_buffer_dptr(const slc_buffer *b); /* 0 for host buffers */
void *slc_buffer_host(const slc_buffer *b);       /* NULL for device ones */

/* Whether the ledger holds b: a pending operation names its id or (host
 * buffers) overlaps its bytes. */
bool slc_buffer_held(const slc_buffer *b);

/* Frees b if the ledger does not hold it; LDG_EBUSY (nothing freed, b still
 * valid) if it does. Never synchronises. An error of cuMemFree/cuMemFreeHost
 * is returned and b stays valid. */
int slc_buffer_try_free(slc_buffer *b);

/* Settles b, then frees it. Settling:
 *   1. ldg_settle_vector: each non-blocking stream holding b's id is marked,
 *      synchronised and released to its mark (one being destroyed: once its
 *      destroy's synchronisation succeeded; if that failed, synchronised
 *      here);
 *   2. while the ledger still holds b (blocking streams, and host buffers
 *      named only by range), the devices are synchronised one at a time —
 *      b's own device first, then the others in order — through
 *      slc_device_synchronize, until it is no longer held.
 * A failed synchronisation stops it with that error (nothing freed; the
 * first failing drain's error even if keeps run by the settle failed or
 * settled in turn). If b
 * is still held after every device was synchronised (operations on it were
 * enqueued meanwhile), LDG_EBUSY and nothing is freed. May block. */
int slc_buffer_free(slc_buffer *b);

/* Synchronous copies for the implicit paths: settle the vector's
 * non-blocking holders (ldg_settle_vector, as slc_buffer_free's step 1: a
 * holder being destroyed is waited for), then cuMemcpyHtoD / cuMemcpyDtoH
 * on b's device, which the driver orders after all work of that device's
 * blocking streams (legacy default stream). Ledger entries of blocking
 * streams stay held until their streams or device are synchronised. A
 * failed drain is returned (its own error) and nothing is copied. Work
 * enqueued on b while the settle runs (by keeps it runs, or other threads)
 * is not waited for. LDG_EINVAL: out of b's bounds, a host buffer. */
int slc_copy_htod(slc_buffer *dst, size_t dst_offset, const void *src,
                  size_t bytes);
int slc_copy_dtoh(void *dst, slc_buffer *src, size_t src_offset, size_t bytes);

/* Before the host touches [addr, addr + bytes): if a pending operation
 * holds an overlapping range, synchronises devices as slc_buffer_free's
 * step 2 until none does. LDG_OK when the range is free, LDG_EBUSY if it is
 * still held after every device, or the sync's error. */
int slc_host_range_settle(slc_context *c, const void *addr, size_t bytes);

/* ---- Operations on layer buffers ------------------------------------------
 * These hold their buffers by themselves: each checks the byte ranges
 * against the buffers (LDG_EINVAL: NULL, another context's, out of bounds,
 * a device buffer of another device than the stream's) and records the
 * operation with the caller's hold (may be NULL) plus the id of every buffer
 * it names and, for pinned host buffers, the bytes it uses. Until the
 * operation is known complete, slc_buffer_held is true, slc_buffer_try_free
 * refuses (LDG_EBUSY) and slc_buffer_free settles first — forgetting a
 * buffer in the hold cannot free it under running work. Otherwise as the
 * raw-pointer calls above, which stay for advanced use (memory the layer
 * did not allocate, sub-ranges held by the caller's own ids): with those,
 * the hold is exactly what the caller lists. */

/* dst[dst_offset..+bytes) = src[src_offset..+bytes): host to device, device
 * to host or device to device by the buffers' kinds (host to host:
 * LDG_EINVAL). */
int slc_buf_copy_async(slc_stream *s, slc_buffer *dst, size_t dst_offset,
                       slc_buffer *src, size_t src_offset, size_t bytes,
                       const slc_hold *hold);

/* dst[offset..+bytes) = value; dst a device buffer. */
int slc_buf_memset_async(slc_stream *s, slc_buffer *dst, size_t offset,
                         unsigned char value, size_t bytes,
                         const slc_hold *hold);

/* slc_launch, holding buffers[0..n_buffers) whole (at most 1024): the
 * buffers the kernel's parameters point into. */
int slc_buf_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
                   unsigned shared_bytes, void **params,
                   slc_buffer *const *buffers, size_t n_buffers,
                   const slc_hold *hold);

/* ---- Several devices: peer access, copies between devices ---------------
 * Ordering across devices needs nothing more than events: record an event
 * on a stream of device i, make a stream of device j wait on it
 * (slc_stream_wait_event); j's completion past that wait (its sync, an
 * event, a query, the engine's marker, a device sync of j) releases i's
 * stream up to the event, and along chains of waits through any number of
 * devices (tests/cuda: chain_all_devices). What follows moves data.
 *
 *   function                        may block     lock taken  runs keeps
 *   ------------------------------  ------------  ----------  ----------
 *   slc_device_can_access_peer      no (driver)   none        no
 *   slc_device_enable_peer_access   driver call   device's    no
 *                                                 init mutex
 *                                                 (first use)
 *   slc_device_peer_access          no            none        no
 *   slc_buf_copy_peer_async         as the async  none        as the async
 *                                   operations                operations */

/* *can: whether `device` can access `peer`'s memory directly
 * (cuDeviceCanAccessPeer; false when device == peer). LDG_EINVAL: c or can
 * NULL, a device out of range. */
int slc_device_can_access_peer(slc_context *c, int device, int peer,
                               bool *can);

/* Gives `device`'s primary context access to `peer`'s memory
 * (cuCtxEnablePeerAccess, retaining both primary contexts; leaves device's
 * current). Idempotent: enabled before, by the layer or the application
 * (CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED), is LDG_OK. One direction only:
 * peer's kernels and copies reaching device's memory need the call the
 * other way round. Where the driver cannot (no P2P path:
 * CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) it returns SLC_EDRIVER with that
 * result and changes nothing; copies between the two then go staged (see
 * slc_buf_copy_peer_async). LDG_EINVAL: c NULL, device == peer, a device
 * out of range. Peers with ordinals above 63 are enabled but not
 * remembered: slc_device_peer_access says false for them and copies stage. */
int slc_device_enable_peer_access(slc_context *c, int device, int peer);

/* Whether slc_device_enable_peer_access(c, device, peer) succeeded. */
bool slc_device_peer_access(const slc_context *c, int device, int peer);

/* dst[dst_offset..+bytes) = src[src_offset..+bytes) for device buffers of
 * any two devices, on s, a stream of dst's or src's device. DIRECT (one
 * cuMemcpyDtoDAsync; *staged = false) when both are on s's device or s's
 * device has peer access to the other one (slc_device_enable_peer_access).
 * Otherwise STAGED (*staged = true) through `staging`, a pinned host buffer
 * of the context: for each piece of at most staging's size, a copy of src
 * into staging and a copy of staging into dst, both on s (stream order
 * makes reusing staging safe). Each operation holds src, dst and staging
 * (its bytes too), as slc_buf_copy_async does; the caller's hold (may be
 * NULL) goes with the last one, which completes last. staged may be NULL;
 * staging may be NULL when the direct path is certain.
 * LDG_EINVAL (nothing issued): s, dst or src NULL, a host buffer as dst or
 * src, another context's buffer, ranges outside the buffers, s on neither
 * device, or staging needed and NULL, not a host buffer, or empty.
 * Other errors as slc_copy_dtod_async. A staged copy that fails after its
 * first piece was issued returns the error with the pieces already issued
 * recorded (they hold the buffers until complete; dst is partly written)
 * and the caller's keep not called. */
int slc_buf_copy_peer_async(slc_stream *s, slc_buffer *dst, size_t dst_offset,
                            slc_buffer *src, size_t src_offset, size_t bytes,
                            slc_buffer *staging, const slc_hold *hold,
                            bool *staged);

/* ---- Modules and kernels ------------------------------------------------ */

typedef struct slc_module slc_module;

/* cuModuleLoadDataEx(image) on the device's primary context, with the JIT
 * error log captured: a failure's message carries the log. */
int slc_module_load(slc_context *c, int device, const void *image,
                    slc_module **out);

/* cuModuleGetFunction. */
int slc_module_function(slc_module *m, const char *name, CUfunction *out);

/* cuModuleUnload and frees the handle. No launch of its functions may be
 * pending on a stream not yet synchronised. NULL ignored (LDG_OK). */
int slc_module_unload(slc_module *m);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_CUDA_SL_CUDA_H */
