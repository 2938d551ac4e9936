/*
 * PyTorch's CUDA allocator on the stream-ordered pool (issue 14): the hooks
 * of torch.cuda.memory.CUDAPluggableAllocator, in C, in a self-contained
 * shared library (libsl_torch.so; liburcu linked in, libcuda opened at run
 * time). torch_alloc/sl_torch.c opens with the argument; this header is the
 * contract. README.md, "PyTorch on the pool", lists what happens to every
 * hook PyTorch has.
 *
 *   import torch
 *   a = torch.cuda.memory.CUDAPluggableAllocator(
 *       "libsl_torch.so", "sl_torch_alloc", "sl_torch_free")
 *   torch.cuda.memory.change_current_allocator(a)  # before any CUDA tensor
 *
 * HOW PYTORCH CALLS THE TWO HOOKS (torch/csrc/cuda/CUDAPluggableAllocator.cpp)
 *   alloc(size, device, stream): on the thread that creates a tensor, with
 *   the current device and that device's current stream (stream 0, the
 *   legacy default stream, unless a torch.cuda.stream is set); size 0 for
 *   empty tensors. PyTorch does not check the result: a NULL for a non-zero
 *   size would become a tensor at address 0. So sl_torch_alloc (C++, the
 *   only C++ of the library) throws std::runtime_error instead — Python
 *   sees a RuntimeError whose message starts "CUDA out of memory." for
 *   LDG_ENOMEM (after the pool's own retries: trim, engine poll, syncs of
 *   the streams holding blocks) and carries the layer's message otherwise.
 *   free(ptr, size, device, stream): when the tensor's storage dies, on any
 *   thread, with the size, device and stream of its alloc (PyTorch keeps
 *   them); never for a NULL result.
 *
 * WHY A FREED BLOCK IS NEVER REUSED UNDER PYTORCH'S KERNELS
 *   PyTorch issues its kernels itself: the pool sees none of them. At free,
 *   the shim records a use of the block on its alloc stream, and on every
 *   stream given to sl_torch_record_stream for it, with slp_record_use:
 *   each holds the block until that stream is known complete past the free
 *   (engine marker, sync). Every kernel that used the tensor was issued
 *   before its storage died (issue, then record). Then slp_free: with uses
 *   on the alloc stream only, the block is reused at once by the next alloc
 *   on that stream (stream order, as PyTorch's own allocator does); used on
 *   other streams, it waits for their completion. Reuse on another stream
 *   before the alloc stream's work completed never happens.
 *   Without sl_torch_record_stream, a tensor used on a second stream is as
 *   unprotected as with PyTorch's allocator without record_stream; in
 *   PyTorch 2.11, Tensor.record_stream does nothing for a pluggable
 *   allocator loaded from Python (the hook can be set from C++ only), so
 *   call sl_torch_record_stream (torch_alloc/sl_torch.py: record_stream).
 *
 * OWNERSHIP AND THREADING
 *   One process-wide state, made on the first call: a context over
 *   libcuda.so.1 (or the driver of sl_torch_use_driver), the progress
 *   engine (polled by the hooks; its own thread with
 *   SL_TORCH_ENGINE=thread: sl_torch.c, THE ENGINE), and per device (made on its first alloc) one
 *   device pool and one adopted legacy default stream. PyTorch's streams
 *   are adopted (slc_stream_adopt), never created or destroyed, once each,
 *   and kept until sl_torch_shutdown: a stream handle must stay valid while
 *   the process allocates on it (PyTorch's pooled streams live as long as
 *   the process; a torch.cuda.ExternalStream destroyed by its owner must not
 *   be passed again). Every function may be called from any thread at any
 *   time, except sl_torch_use_driver (before any other) and
 *   sl_torch_shutdown (the last).
 *
 *   function                  may block         lock taken          keeps
 *   ------------------------  ----------------  ------------------  -----
 *   sl_torch_alloc / _malloc  as slp_alloc (a)  init mutex (a)      (b)
 *   sl_torch_free / _checked  no (c)            records mutex (d)   (b)(e)
 *   sl_torch_poll             no                as slc_engine_poll  yes
 *   sl_torch_record_stream    no (a)            records mutex       no
 *   sl_torch_empty_cache      yes: syncs        as slp_trim         yes
 *   sl_torch_memory_stats     no                as slp_stats_get    no
 *   (a) the first call, per process and per device, and the first use of
 *       each stream (slc_stream_adopt: driver queries) take the init mutex
 *       and may block in the driver. (b) as the layer's asynchronous calls:
 *       only when a release overtook the record. (c) if recording a use
 *       fails (out of host memory), the stream is synchronised first.
 *       (d) only while some block has recorded streams. (e) every 64th
 *       free of a thread polls the engine (no engine thread, the default;
 *       sl_torch.c, THE ENGINE): the keeps of completed uses run there.
 *
 * BAD INPUT (each a clear message in slc_last_error(); nothing changed,
 * nothing leaked): a device out of range, CU_STREAM_PER_THREAD, a stream of
 * another device or unknown to the driver: alloc returns NULL (C) / throws
 * (C++). free of an address no pool handed out, of a freed block, with a
 * size or device other than its alloc's: refused (sl_torch_free_checked
 * returns the code; sl_torch_free, which PyTorch calls and which cannot
 * report, also prints one line to stderr and counts it in bad_calls).
 */
#ifndef STREAMLEDGER_TORCH_ALLOC_SL_TORCH_H
#define STREAMLEDGER_TORCH_ALLOC_SL_TORCH_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/driver.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_TORCH_MAX_DEVICES 64
#define SL_TORCH_MAX_STREAMS 4096  /* adopted streams, all devices */
#define SL_TORCH_MAX_RECORDED 16   /* record_stream streams per block */

/* ---- The two hooks of CUDAPluggableAllocator (cudaStream_t is CUstream) - */

/* PyTorch's alloc_fn. NULL for size 0 (an empty tensor owns no memory).
 * Throws std::runtime_error on any failure (see above). */
void *sl_torch_alloc(size_t size, int device, CUstream stream);

/* PyTorch's free_fn. NULL is ignored. Refusals: see BAD INPUT. */
void sl_torch_free(void *ptr, size_t size, int device, CUstream stream);

/* The same, returning instead of throwing or printing: NULL and the code
 * in *rc (may be NULL) / the code. For C callers and tests. */
void *sl_torch_malloc(size_t size, int device, CUstream stream, int *rc);
int sl_torch_free_checked(void *ptr, size_t size, int device,
                          CUstream stream);

/* ---- The optional hooks (CUDAPluggableAllocator's C++ setters take these
 * signatures; from Python, call them through ctypes: sl_torch.py) ------ */

/* record_stream_fn: the block at ptr is used on `stream` too; at its free,
 * a use is recorded there (covering all work issued on it until then).
 * Refused: ptr not an allocated block, a stream of another device. */
void sl_torch_record_stream(void *ptr, CUstream stream);
int sl_torch_record_stream_checked(void *ptr, CUstream stream);

/* reset_fn (torch.cuda.empty_cache): returns every pool's cached memory to
 * the driver (slp_trim to 0: the calling thread's cache and whole free
 * slabs; other threads' caches stay). Like PyTorch's, which synchronises
 * its pending events first, it synchronises the adopted streams that have
 * pending recorded uses between two trims, so blocks freed under work that
 * has since been issued come back too; before the second trim it waits (at
 * most 100 ms) for keeps of that work still running on another thread. */
void sl_torch_empty_cache(void);

/* init_fn: makes the process-wide state now (else the first alloc does).
 * LDG_OK or the context's error. */
int sl_torch_init(int device_count);

/* ---- Statistics (torch.cuda.memory_stats is refused by PyTorch for a
 * pluggable allocator: sl_torch.py builds the same keys from these) ---- */

enum {
  SL_TORCH_ALLOCATED, SL_TORCH_ALLOCATED_PEAK, SL_TORCH_REQUESTED,
  SL_TORCH_HELD, SL_TORCH_HELD_PEAK, SL_TORCH_RESERVED,
  SL_TORCH_RESERVED_PEAK, SL_TORCH_CACHED, SL_TORCH_ALLOCS, SL_TORCH_FREES,
  SL_TORCH_REUSES, SL_TORCH_HELD_FREES, SL_TORCH_SLAB_ALLOCS,
  SL_TORCH_SLAB_FREES, SL_TORCH_OOM_RETRIES, SL_TORCH_OOMS, SL_TORCH_TRIMS,
  SL_TORCH_LIVE_BLOCKS, SL_TORCH_BAD_CALLS, SL_TORCH_RECORDED_USES,
  SL_TORCH_PEAK_ALLOCATED, SL_TORCH_PEAK_HELD, /* at the reserved peak */
  SL_TORCH_PEAK_REQUESTED,
  /* Process-wide, counted only with SL_TORCH_STATS=1 (else 0; sl_torch.c,
   * THE CALL COUNTERS): ns spent inside the alloc and free hooks, hook
   * calls of 20 us or more, and the driver calls the process made through
   * the layer (the hooks' own and the engine's), by kind. */
  SL_TORCH_ALLOC_NS, SL_TORCH_FREE_NS, SL_TORCH_SLOW_HOOKS,
  SL_TORCH_DRV_MEM_ALLOC, SL_TORCH_DRV_MEM_FREE, SL_TORCH_DRV_EVENT_CREATE,
  SL_TORCH_DRV_EVENT_RECORD, SL_TORCH_DRV_EVENT_QUERY,
  SL_TORCH_DRV_STREAM_WAIT, SL_TORCH_DRV_STREAM_QUERY, SL_TORCH_DRV_SYNC,
  SL_TORCH_DRV_HOST_FUNC, SL_TORCH_DRV_WRITE_VALUE, SL_TORCH_DRV_CTX,
  SL_TORCH_NSTATS
};

/* Writes min(n, SL_TORCH_NSTATS) counters of device's pool (zeros before
 * its first alloc; bad_calls, recorded_uses and the call counters are
 * process-wide, reset by sl_torch_shutdown) and
 * returns SL_TORCH_NSTATS, or a negative code (device out of range). */
int sl_torch_memory_stats(int device, uint64_t *out, size_t n);

/* The name of counter i ("allocated_bytes", ...), or NULL. */
const char *sl_torch_stat_name(int i);

/* torch.cuda.reset_peak_memory_stats. */
void sl_torch_reset_peaks(int device);

/* Releases the uses whose streams completed (slc_engine_poll: keeps run
 * here; non-blocking). The hooks poll by themselves every 64 frees of a
 * thread; an application may also call this when idle. LDG_OK. */
int sl_torch_poll(void);

/* This thread's last error message (slc_last_error_message). */
const char *sl_torch_last_error(void);

/* ---- Configuration, tests --------------------------------------------- */

/* Caps device's pool at `bytes` reserved (0: no cap), as
 * torch.cuda.set_per_process_memory_fraction does for PyTorch's; read at
 * the device's first alloc, so LDG_EBUSY afterwards. Also from the
 * environment: SL_TORCH_LIMIT_BYTES (every device). */
int sl_torch_set_limit(int device, size_t bytes);

/* SL_TORCH_TRACE=path (read when the state is made): every successful
 * alloc and free appends "a|f TID STREAM SIZE PTR" to path, at most
 * SL_TORCH_TRACE_MAX events (default 200000), flushed line by line, under
 * a mutex (only then); bench/torch_trace.c replays such a trace on the
 * host executor (sl_torch.c, THE TRACE). An unwritable path: one line on
 * stderr, no trace, the hooks unharmed. */

/* Before any other call: use `driver` (copied; e.g. the host executor)
 * instead of libcuda.so.1. LDG_EBUSY once the state exists. */
int sl_torch_use_driver(const slc_driver *driver);

/* Ends the state: every pool (LDG_EBUSY, nothing changed, while blocks are
 * allocated), adopted stream and the context. The next call starts over.
 * For tests and orderly exits; no other call may run concurrently. */
int sl_torch_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_TORCH_ALLOC_SL_TORCH_H */
