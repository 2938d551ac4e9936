/*
 * The host executor: a fake CUDA driver, an asynchronous executor on host
 * threads that fills the same table (cuda/driver.h) the real libcuda does.
 * Public and supported (Bazel //cuda:host_executor): a program or an
 * embedder's own tests run the CUDA layer with it where there is no GPU, and
 * a premature release shows up as a use-after-free (ASan) or a wrong byte,
 * not as a silent pass. streamledger's CUDA suite (tests/cuda) and
 * bench/cuda_bench (--driver=host) run on it.
 *
 *   slc_driver table;
 *   hd_install(&table, &(hd_config){.devices = 2}); // instead of slc_driver_load
 *   slc_context_create(&table, &ctx);
 *   ...                                    // the layer as on a GPU
 *   slc_context_destroy(ctx);
 *   long leaked = hd_shutdown();           // 0 after a clean run
 *
 * One executor per process (hd_install fails while one runs).
 *
 * Model
 *   - N devices (config), one primary context each; the current context is
 *     thread-local, as in the driver. Calls that need a context fail with
 *     CUDA_ERROR_INVALID_CONTEXT without one, and stream calls also when the
 *     stream's context is not current (stricter than the driver: it catches a
 *     layer that forgets to make the right context current).
 *   - "Device" memory is malloc'd host memory, filled with 0xCD; device
 *     pointers are its addresses. Every device range a call names must lie in
 *     one live allocation, else CUDA_ERROR_INVALID_VALUE (bad pointers). Host
 *     pointers only have to be non-NULL. cuMemFree / cuMemFreeHost free at
 *     once, without waiting for pending work: a free before the work that
 *     uses the memory has run is a real use-after-free that ASan reports.
 *     cuMemAllocAsync allocates at once; cuMemFreeAsync frees when the
 *     stream's worker reaches it (stream-ordered, as the driver).
 *   - Each stream is a worker thread that runs its operations later, in
 *     order: copies are memcpy, memsets memset, launches call a registered
 *     host function with copies of the parameters taken at launch. Events are
 *     records that complete when the worker reaches them; cuStreamWaitEvent
 *     makes the worker wait for the record that was the event's last at the
 *     time of the call; cuEventQuery/Synchronize see the last record (a
 *     never-recorded event is complete). Stream/context synchronise wait for
 *     the workers to drain what was submitted before the call.
 *   - NULL and CU_STREAM_LEGACY name the current context's legacy default
 *     stream: a blocking stream made on first use, never destroyed
 *     (cuStreamDestroy: CUDA_ERROR_INVALID_HANDLE), not a leak. Its implicit
 *     barriers with the other blocking streams are not modelled (fewer
 *     orderings than the driver). CU_STREAM_PER_THREAD: an invalid handle.
 *   - cuStreamDestroy returns without waiting: queued work still runs (a
 *     context sync waits for it; hd_shutdown joins the worker). It, like
 *     the issues, requires the stream's context to be current.
 *   - The synchronous copies (cuMemcpyHtoD/DtoH) follow the legacy default
 *     stream: they first wait for every blocking stream of the current
 *     context to drain.
 *   - cuLaunchHostFunc runs its function on the stream's worker, unlocked;
     cuStreamWriteValue64 stores (release) into pinned host or device memory
     when the worker reaches it; cuMemHostGetDevicePointer maps pinned host
     memory at its own address. The device reports 64-bit stream memory
     operations (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 1, the
     deprecated _V1 attributes 0, as an H200 does).
   - cuModuleLoadData(Ex) accepts any image containing ".entry" (PTX text);
 *     other images fail with CUDA_ERROR_INVALID_PTX and a JIT log line.
 *     cuModuleGetFunction finds the host kernels registered by name.
 * Knobs: a delay before each copy or kernel (widens the window in which a
 * premature release corrupts data), a hold that stops every worker before
 * its next operation, one-shot failures per fault point, and a generic "the
 * n-th call of entry X fails" (hd_fail_nth). Checks: whether a queued copy
 * still touches some memory (hd_pending_touching), frees of memory pending
 * work still touches (hd_early_frees).
 *
 * Threading: every entry point may be called from any thread. One mutex and
 * one condition variable guard the executor's state; no memory operation
 * runs under it.
 */
#ifndef STREAMLEDGER_CUDA_HOST_EXECUTOR_H
#define STREAMLEDGER_CUDA_HOST_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "cuda/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HD_MAX_DEVICES 8
#define HD_MAX_PARAMS 8

typedef struct hd_config {
  int devices;            /* 1 .. HD_MAX_DEVICES */
  unsigned task_delay_us; /* sleep before each copy, memset, kernel */
} hd_config;

/* Starts the executor (again, after hd_shutdown) and fills *table with it:
 * every entry of SLC_DRIVER_ENTRIES is implemented; table->loaded. Returns 0,
 * or -1 if the executor is already running. */
int hd_install(slc_driver *table, const hd_config *cfg);

/* Ends the executor: returns how many streams, events, modules, device and
 * host allocations and retained contexts were still alive (0 after a clean
 * run), and frees them. */
long hd_shutdown(void);

/* Points where a failure can be injected. */
typedef enum hd_fault {
  HD_FAULT_STREAM_SYNC,    /* cuStreamSynchronize: returns without waiting */
  HD_FAULT_STREAM_QUERY,   /* cuStreamQuery */
  HD_FAULT_CTX_SYNC,       /* cuCtxSynchronize: returns without waiting */
  HD_FAULT_EVENT_SYNC,     /* cuEventSynchronize: returns without waiting */
  HD_FAULT_EVENT_QUERY,    /* cuEventQuery */
  HD_FAULT_EVENT_RECORD,   /* cuEventRecord: nothing recorded */
  HD_FAULT_STREAM_WAIT,    /* cuStreamWaitEvent: nothing queued */
  HD_FAULT_COPY,           /* the async copies and memset: nothing queued */
  HD_FAULT_LAUNCH,         /* cuLaunchKernel: nothing queued */
  HD_FAULT_STREAM_CREATE,  /* cuStreamCreate */
  HD_FAULT_STREAM_DESTROY, /* cuStreamDestroy: the stream stays */
  HD_FAULT_MEM_ALLOC,      /* cuMemAlloc, cuMemHostAlloc, cuMemAllocHost */
  HD_FAULT_MARKER,         /* cuLaunchHostFunc, cuStreamWriteValue64 */
  HD_FAULT_COUNT
} hd_fault;

/* The next `times` calls at `point` fail with `code` (0 times disarms). */
void hd_fail_next(hd_fault point, CUresult code, int times);

/* How many injected failures at `point` were not yet consumed. */
int hd_fault_pending(hd_fault point);

/* While on, no worker starts another operation. Turning it off resumes. */
void hd_hold(bool on);

/* A one-shot hook: the next call at `point` runs fn(arg) on the calling
 * thread, outside the executor's lock, before doing anything else — except
 * HD_FAULT_EVENT_RECORD, where it runs after the record was queued. Tests
 * use it to act at the exact moment the layer is inside a driver call (to
 * check the ordering rules). HD_FAULT_STREAM_WAIT has no hook (the layer
 * holds the event's lock there). fn may call the layer and the executor. */
typedef void (*hd_hook_fn)(void *arg);
void hd_set_hook(hd_fault point, hd_hook_fn fn, void *arg);

/* ---- Generic failure injection, by entry point --------------------------
 * Every entry point of SLC_DRIVER_ENTRIES except cuGetErrorName and
 * cuGetErrorString counts its calls; one failure may be armed at a time. */

/* The entries, indexed as in SLC_DRIVER_ENTRIES. */
enum {
#define HD_E_INDEX(name, sym, ver, params) HD_E_##name,
  SLC_DRIVER_ENTRIES(HD_E_INDEX)
#undef HD_E_INDEX
      HD_E_COUNT
};
int hd_entry_index(const char *entry); /* -1 if unknown */
const char *hd_entry_name(int index);  /* NULL if out of range */

/* The n-th counted call of `entry` from now (n >= 1) returns `code` at
 * once, doing nothing (a synchronisation returns without waiting, a
 * destroy destroys nothing). n <= 0 disarms. Replaces an earlier arming.
 * Returns -1 for an unknown entry. */
int hd_fail_nth(const char *entry, long n, CUresult code);
bool hd_nth_armed(void);  /* armed and not yet fired */
long hd_nth_fired(void);  /* failures hd_fail_nth injected since install */

/* Counted calls of `entry` since hd_install or hd_calls_reset. */
long hd_calls(const char *entry);
void hd_calls_reset(void);

/* While on, this thread's calls are neither counted nor failed: for a test's
 * own raw driver calls (completion checks in keeps). */
void hd_uncounted(bool on);

/* ---- Checks of early release ---------------------------------------------- */

/* Copies and memsets, queued or running on any stream, that read or write a
 * byte of [p, p + n): a keep that releases memory while this is not 0 is
 * early, whatever the timing. Kernels are not counted (opaque params). */
long hd_pending_touching(const void *p, size_t n);

/* cuMemFree / cuMemFreeHost calls that freed an allocation a queued or
 * running copy or memset still touched (since install). */
long hd_early_frees(void);

/* A sticky error, as after a kernel fault: from now on every
 * synchronisation and query (after waiting, as the driver would) and every
 * issue returns `code`. CUDA_SUCCESS clears it; hd_shutdown too. */
void hd_set_sticky(CUresult code);

/* ---- Several devices ----------------------------------------------------
 * Up to HD_MAX_DEVICES devices. cuDeviceCanAccessPeer says yes for every
 * pair of distinct devices (an HGX H200 board, NVLink all to all) unless
 * turned off here; cuCtxEnablePeerAccess enables the current context's
 * access to a peer's memory (CUDA_ERROR_PEER_ACCESS_UNSUPPORTED where
 * turned off, _ALREADY_ENABLED the second time; a primary context released
 * to zero forgets its peers, as the driver resets it). Device allocations
 * remember their device. A device-to-device copy between two devices'
 * memory on a stream whose context has no peer access to the other device
 * runs (the driver stages such a copy through host memory itself) and is
 * counted: a layer that meant to copy peer to peer only where it enabled
 * peer access checks that the count stayed 0. */

/* From now on (until hd_shutdown), whether `device` can access `peer`. */
void hd_set_peer_access(int device, int peer, bool can);

/* Device-to-device copies queued without peer access (see above). */
long hd_unpeered_copies(void);

/* The delay before each copy, memset or kernel, from now on. */
void hd_set_delay_us(unsigned us);

/* Launch geometry passed to host kernels. */
typedef struct hd_dims {
  unsigned grid[3], block[3], shared;
} hd_dims;

/* A host kernel: params[i] points to a copy of parameter i (its size as
 * registered), taken when the kernel was launched. */
typedef void (*hd_kernel_fn)(void *const *params, const hd_dims *dims);

/* Registers a kernel under `name` with n_params parameters of the given
 * sizes (n_params <= HD_MAX_PARAMS). Registrations survive hd_shutdown.
 * Returns 0, or -1 if the registry is full or the arguments are bad. */
int hd_register_kernel(const char *name, hd_kernel_fn fn, size_t n_params,
                       const size_t *param_sizes);

/* Operations the workers ran so far (copies, memsets, kernels). */
unsigned long hd_ops_executed(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_CUDA_HOST_EXECUTOR_H */
