/*
 * A stream-ordered memory pool on the ledger (issue 10): device memory per
 * device and pinned host memory, recycled as soon as the ledger releases the
 * last operation that used a block, with a free that never synchronises.
 * pool/pool.c opens with the argument; this header is the contract.
 *
 * THE MODEL
 *   slp_alloc(pool, stream, bytes) hands out a block (slp_block) rounded up
 *   to a size class (or, for a pinned class from 1 MiB on, a spare cached
 *   block of a larger class, at most 3x: see slp_alloc). Operations name
 *   blocks through the pool's calls (slp_copy_async, slp_memset_async,
 *   slp_launch, slp_record_use): each one holds the blocks it names by
 *   itself — it
 *   counts a pending use on each block and records the operation in the
 *   ledger with the block's vector id (and, for host blocks, its bytes)
 *   plus a keep that drops the use. So
 *   there is no record_stream to forget: a block used on any stream is held
 *   until the ledger knows that operation complete.
 *   slp_free returns at once and never synchronises. A block with no pending
 *   use goes back to a free list now; one with pending uses is "held": it
 *   goes back when the keep of its last use runs (a synchronisation, an
 *   event, the progress engine's markers — enable the engine, sl_engine.h,
 *   or held blocks come back only at synchronisations).
 *
 * REUSE RULES
 *   - After completion (every block): a block is handed out again, to any
 *     stream, once every operation recorded on it through the pool is
 *     known complete.
 *   - Stream order (device blocks): a device block freed while its pending
 *     uses are all on its home stream (the stream given to slp_alloc) is
 *     handed out again at once, but only to an slp_alloc on that same
 *     stream, from the freeing thread's cache (as cuMemFreeAsync): the new
 *     owner's work on that stream runs after the old work. Every pool
 *     call that uses such a block on another stream (until its next
 *     slp_alloc) first makes that stream wait for the home stream (an event
 *     record and a stream wait), so reuse elsewhere comes only after that
 *     stream waited on the freeing stream. Pinned host blocks never take this path: the host writes them
 *     without stream order.
 *   - The same for pages (device blocks of 1 MiB to 64 MiB): the pages of
 *     a block listed for s may be carved, before the pool grows, into a
 *     new block for an alloc on s (pool.c, RECLAIM BEFORE GROW); that
 *     block is then as one handed out by stream order (uses elsewhere wait
 *     for s) and free for other streams only after the old work on s.
 *   Why this is safe and what it costs: pool.c.
 *   Raw calls (slc_copy_htod_async with slp_block_dptr...) are NOT seen by
 *   the pool: work issued that way, or by a library, must be announced with
 *   slp_record_use after it was issued, as with PyTorch's record_stream.
 *
 * FOR ALLOCATOR SHIMS AND SEVERAL GPUS (issues 14 and 13)
 *   One device pool per device and one pinned pool serve any number of
 *   GPUs; a framework's streams are adopted (slc_stream_adopt) and passed
 *   to slp_alloc as any stream; a shim that only has the pointer back frees
 *   with slp_free_ptr, and a record-stream hook maps to slp_record_use.
 *
 * OWNERSHIP AND THREADING
 *   A pool belongs to one slc_context and one device (or host memory); it
 *   must be destroyed before the context. Any thread may call any function
 *   concurrently, except slp_pool_destroy (the last call on the pool, with
 *   no other call on it or its blocks running). A block belongs to the
 *   caller from slp_alloc to slp_free; using it after slp_free, or freeing
 *   it twice, is refused while the pool can tell (see Bad input).
 *   The pool keeps a reference on every stream it has seen (to synchronise
 *   only those at out of memory) until the stream is destroyed
 *   (slc_stream_destroy; dropped at the next slp_trim) or the pool is: a
 *   stream the application only unreferences lives until then. Each
 *   thread's cache also references the 8 streams the thread used last
 *   (the ones it polls, see (j)) until they leave those 8, are found
 *   destroyed at a poll, the thread exits or the pool is destroyed.
 *   Keeps of pool operations run where the layer runs keeps (sl_cuda.h): the
 *   engine thread, slc_engine_poll callers, synchronising threads, and
 *   slp_alloc on a cache miss (its thread's own streams, see (j)); a block
 *   whose last keep runs on a thread with a cache of the pool goes back to
 *   that cache, otherwise to the inbox of the thread that freed it (taken
 *   whole by that thread's next alloc of an empty class, or by any thread
 *   before it carves a slab or trims), or the shared list when that thread
 *   has exited. The
 *   caller's own keep in a pool call's hold runs first, then the block's use
 *   is dropped.
 *
 *   function                  may block        lock taken           runs keeps
 *   ------------------------  ---------------  -------------------  ----------
 *   slp_alloc (cache hit)     no               none (g)             (j)
 *   slp_alloc (cache miss)    no (a)           class take (a) (g)   yes (j)
 *   slp_alloc (new slab)      yes: driver (b)  pool, trim, class(k) yes (i)
 *                             and syncs (k)
 *   slp_alloc (out of memory) yes: syncs (c)   pool, trim           yes
 *   slp_free, slp_free_ptr    no               none (d) (g)         no
 *   slp_block_find, getters   no               none                 no
 *   pool calls (copy, launch) as sl_cuda.h     none (g) (h)         (e)
 *   slp_trim                  yes: driver      trim, pool, class(a) no
 *   slp_stats_get             no               registry, pool mu    no
 *   slp_snapshot              no               pool mutex           no
 *   slp_pool_create/destroy   yes: syncs (f)   registry, pool mu    yes (f)
 *   The pool's mutexes are taken only on those rare paths: a new slab or
 *   segment (the driver), trim, out of memory, statistics, snapshots,
 *   create and destroy, and (g) a thread's first call on a pool or first
 *   use of a stream among its 8 latest. Alloc, free and the pool calls
 *   take none otherwise, cache miss included (but (d): a try-lock when
 *   the pool caches more than its release threshold; and (a): a class's
 *   take-mutex, not the pool's); tests/pool's no_mutex_steady counts them
 *   (pool_testing.h).
 *   (a) the thread's inbox (blocks other threads returned for it), tried
 *       first, is taken whole with one CAS; then the class's shared free
 *       list (pool.c, SHARED LISTS): a batch (one block and up to half
 *       the cache's room) popped under the class's take-mutex, the rest
 *       left listed: a thread may wait for another's refill of the same
 *       class (a few pops, no driver call), never for the pool mutex.
 *       The same for the spare block a class of 1 MiB or more borrows
 *       from a larger class before a new slab. Pushes to the shared lists
 *       never lock.
 *   (b) cuMemHostAlloc of a slab (pinned classes of 1 MiB and more,
 *       device blocks above 64 MiB) or cuMemAlloc of a segment of whole
 *       2 MiB pages whose pages slabs share (2 MiB for the small classes,
 *       a device block of up to 64 MiB rounded up to 2 MiB; pool.c, WHERE
 *       BLOCKS LIVE); a slab that fits in a segment's free pages takes
 *       only the pool mutex.
 *   (c) trim, slc_engine_poll, then slc_stream_synchronize of the streams
 *       with pending pool work (see slp_alloc). (d) the thread cache's
 *       overflow goes to the shared list lock-free; above the release
 *       threshold it may trim (try-lock, never waits): then as slp_trim.
 *   (e) only the layer's own cases (ldg_enqueue overtaken by a release).
 *   (f) destroy refuses (LDG_EBUSY) while blocks are allocated; for held
 *       ones it synchronises their streams and waits for the keeps.
 *   (g) once per thread and pool, the registry mutex (its cache), and once
 *       per thread and stream (among its 8 latest), the pool mutex (the
 *       stream registry); the stream that leaves those 8 loses the
 *       cache's reference, its keeps run if that was its last one.
 *   (i) first every thread's inbox goes to the shared lists (lock-free) and
 *       the shared list is tried again; then, while blocks are held,
 *       slc_engine_poll (non-blocking): keeps of completed work run here,
 *       and their blocks are taken if they fit; then (pinned, 1 MiB and
 *       more) a spare block of a larger class (a); then the pool mutex,
 *       and (k).
 *   (k) a device class of 1 MiB to 64 MiB with no free pages first takes
 *       back the pages of cached blocks of classes more than 3x larger and
 *       of idle smaller ones (the trim mutex, their take-mutexes, the pool
 *       mutex; pool.c, RECLAIM BEFORE GROW); if it must still grow, the
 *       segments left empty go to the driver first (cuMemFree), after a
 *       slc_stream_synchronize of s when only work on s keeps one. A carve
 *       over pages of s's pending work records one use on s (no marker).
 *   (h) each use of a block handed out by stream order on another stream
 *       records an event and waits on it: the event's mutex.
 *   (j) a thread that freed 32 blocks under pending work since it last
 *       polled, or at least one and finds its cache empty, releases its
 *       own streams (its 8 latest, engine-driven, with pending work):
 *       each first with slc_stream_query (one cuStreamQuery; an idle
 *       stream is released to the query's mark), a busy one to its
 *       completed markers with slc_engine_poll_stream (and not queried
 *       again for its next 8 polls; SLP_OWN_POLL=marker: always through
 *       the markers); never waits, takes no lock. Their keeps (its own
 *       work's, the caller's keeps of slp_ calls included) run here and
 *       put its blocks back in its own cache.
 *
 * STATISTICS (slp_stats_get) use PyTorch's names where they mean the same:
 *   allocated (in use), reserved (from the driver), held (freed by the
 *   caller, waiting for pending work), cached (in free lists), their peaks,
 *   and counts. slp_snapshot lists live blocks with who holds them.
 *
 * BAD INPUT (each a clear message in slc_last_error(), nothing changed)
 *   zero bytes, more than SLP_MAX_BYTES: LDG_EINVAL. A stream of another
 *   device (device pool) or a destroyed stream: LDG_EINVAL / LDG_EDESTROYED.
 *   slp_free of a block already freed (double free), of a handle or address
 *   that is no block of this pool (foreign): LDG_EINVAL. A pool call naming a
 *   freed block, a block of another device, or a range outside the block's
 *   requested bytes: LDG_EINVAL, nothing issued. A double free after the
 *   block was handed out again cannot be told from a free by its new owner
 *   (as with malloc): free by pointer and the handle's state catch the rest.
 *   Out of memory after every retry: LDG_ENOMEM, with a message saying what
 *   was allocated, cached, held and reserved.
 */
#ifndef STREAMLEDGER_POOL_SL_POOL_H
#define STREAMLEDGER_POOL_SL_POOL_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda/sl_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SLP_MAX_BYTES (UINT64_C(1) << 40) /* one block at most 1 TiB */
#define SLP_MAX_POOLS 64                  /* alive at once, per process */

typedef struct slp_pool slp_pool;
typedef struct slp_block slp_block;

typedef struct slp_config {
  /* Cached bytes above which a thread returning memory to the shared lists
   * trims (0: 1 GiB; SIZE_MAX: never). */
  size_t release_threshold;
  /* The most bytes one thread keeps cached per pool (0: 4 MiB). */
  size_t thread_cache_bytes;
  /* The most bytes the pool reserves from the driver (0: no limit): past
   * it, slp_alloc behaves as at out of memory. */
  size_t limit_bytes;
  /* Under AddressSanitizer, poison device blocks too while they are free
   * (only where device pointers are host addresses: the host executor).
   * Host blocks are always poisoned while free under ASan. */
  bool poison_device;
  /* For tests and debugging (may be NULL): called each time a block goes
   * back to a free list, i.e. becomes reusable by any stream, on the thread
   * that returns it (often a keep's), with no pool lock held. It must not
   * call the pool. Tests check there that no pending work touches it. */
  void (*on_recycle)(void *arg, uintptr_t addr, size_t capacity);
  void *on_recycle_arg;
} slp_config;

/* A pool of device memory of `device` (cuMemAlloc slabs) or of pinned host
 * memory (cuMemHostAlloc(PORTABLE) slabs, usable on every device). cfg NULL:
 * the defaults. LDG_EINVAL: c or out NULL, bad device, more than
 * SLP_MAX_POOLS pools, SLP_OWN_POLL set to an unknown value. LDG_ENOMEM.
 * SLP_SHARED is ignored, whatever its value: its striped mode was removed
 * before any release (pool.c, SHARED LISTS), and every pool pops its
 * shared lists under the class's take-mutex (table note (a)).
 * A tuning and diagnostic knob, read once here from the environment:
 * SLP_OWN_POLL=query|marker (unset or empty: query), how a thread that
 * freed blocks under pending work releases its own streams (slp_alloc,
 * when its cache runs dry or every 32 such frees): query asks
 * each such stream whether it is idle first (cuStreamQuery: one driver
 * call, then every keep up to then runs), and goes through the engine's
 * markers only for a stream found busy; marker always goes through the
 * markers (a query and a record; as before issue 10's sixth session).
 * pool.c, AN IDLE STREAM IN ONE DRIVER CALL. */
int slp_pool_create_device(slc_context *c, int device, const slp_config *cfg,
                           slp_pool **out);
int slp_pool_create_host(slc_context *c, const slp_config *cfg,
                         slp_pool **out);

/* Returns every slab to the driver and frees the pool. LDG_EBUSY (nothing
 * changed) while blocks are allocated. Blocks held by pending work are
 * waited for: the streams with pending pool work are synchronised, then
 * the keeps another thread may still be running (the engine's) are waited
 * for, up to 10 s (then LDG_EBUSY). May block. NULL: LDG_OK.
 * The last call on p; no call on p or its blocks may run concurrently. */
int slp_pool_destroy(slp_pool *p);

bool slp_pool_is_host(const slp_pool *p);
int slp_pool_device(const slp_pool *p); /* -1 for the host pool */

/* A block of at least `bytes` (slp_round_size(bytes): 512 B, two classes
 * per power of two up to 1 MiB, eight above) for work on s (its home
 * stream: see REUSE RULES; the block may be used on any stream of the pool's device, or of
 * any device for host blocks). Served from the thread's blocks listed for
 * s (device pools), its cache, its inbox, the shared free list of its size
 * class, then — after moving every inbox to the shared lists, and an
 * slc_engine_poll if blocks are held — for a pinned class of 1 MiB or
 * more (and device blocks above 64 MiB) a
 * spare block of a larger class up to 3x its size (one listed for s, or
 * one of the larger class's shared list, when the larger class keeps
 * another cached; slp_block_capacity is then the larger class's, and
 * slp_free gives it back to that class), then a new slab: from free pages
 * of a segment, else (device classes of 1 MiB to 64 MiB) from pages taken
 * back from cached blocks of other classes (table note (k)), else a new
 * segment or allocation. At out
 * of memory (driver,
 * or limit_bytes): 1. trims the caches; 2. slc_engine_poll (if the engine
 * is enabled), so that held blocks whose work completed come back;
 * 3. synchronises the streams that have pending pool work (and only them),
 * which returns every held block; 4. while bytes are still held (keeps
 * of that work running on another thread, e.g. the engine's), waits for
 * them, at most 100 ms; retrying after each step. Then
 * LDG_ENOMEM with "out of memory: N bytes requested; allocated A, cached C,
 * held H, reserved R (limit L)". LDG_EINVAL: p, s or out NULL, bytes 0 or
 * > SLP_MAX_BYTES, s of another device (device pools). LDG_EDESTROYED: s
 * destroyed. *out written only on success. */
int slp_alloc(slp_pool *p, slc_stream *s, size_t bytes, slp_block **out);

/* Gives the block back now; never synchronises. LDG_EINVAL: NULL, a
 * pointer that is no block of a pool, a block already freed. */
int slp_free(slp_block *b);

/* The block whose memory starts at addr (a device pointer or host address
 * as returned by the getters), or NULL. Lock-free. */
slp_block *slp_block_find(slp_pool *p, uintptr_t addr);

/* slp_free(slp_block_find(p, addr)), with "no block of this pool starts at
 * 0x..." for a foreign address. For allocator shims that free by pointer. */
int slp_free_ptr(slp_pool *p, uintptr_t addr);

/* The capacity slp_alloc gives a block of `bytes` (its size class, as
 * PyTorch's round_size; a lent block's is larger, see slp_alloc): 0 for 0
 * or more than SLP_MAX_BYTES. Pure. */
size_t slp_round_size(size_t bytes);

CUdeviceptr slp_block_dptr(const slp_block *b); /* 0 for host blocks */
void *slp_block_host(const slp_block *b);       /* NULL for device blocks */
size_t slp_block_size(const slp_block *b);      /* the bytes asked for */
size_t slp_block_capacity(const slp_block *b);  /* its size class's bytes */
uint64_t slp_block_id(const slp_block *b);      /* its ledger vector id */
slp_pool *slp_block_pool(const slp_block *b);
/* The stream given to the slp_alloc that handed it out (its home; NULL for
 * NULL), and whether its owner has it now (allocated, not yet freed). For
 * shims that record work on a block's streams at its free (torch_alloc/).
 * Lock-free; the answer may change at once if other threads use b. */
slc_stream *slp_block_stream(const slp_block *b);
bool slp_block_allocated(const slp_block *b);

/* ---- Operations on blocks: they hold the blocks they name -------------
 * As the slc_buf_* calls of sl_cuda.h, with blocks: ranges are checked
 * against the blocks' requested bytes, every block named is held until the
 * operation is known complete (then, once freed, it returns to a free
 * list), and the caller's hold (may be NULL) is added. Errors as there,
 * plus LDG_EINVAL for a freed block. On any error nothing is issued or
 * held, and the caller's keep is not called. */

/* dst[doff..+bytes) = src[soff..+bytes); host to device, device to host or
 * device to device by the blocks' pools. */
int slp_copy_async(slc_stream *s, slp_block *dst, size_t dst_offset,
                   slp_block *src, size_t src_offset, size_t bytes,
                   const slc_hold *hold);

/* dst[offset..+bytes) = value; dst a device block. */
int slp_memset_async(slc_stream *s, slp_block *dst, size_t offset,
                     unsigned char value, size_t bytes, const slc_hold *hold);

/* slc_launch, holding blocks[0..n_blocks) (at most 64). */
int slp_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
               unsigned shared_bytes, void **params,
               slp_block *const *blocks, size_t n_blocks,
               const slc_hold *hold);

/* Work on the blocks that something else already issued on s (a library
 * call, a raw slc_ call, a CUDA graph): holds them until s is known
 * complete past this point. The pool's record_stream, except that it must
 * come after the work was issued. It places no engine marker itself
 * (slc_stream_record_deferred): the blocks come back once the stream's
 * next marker completes — a later operation's, the engine thread's tail
 * marker, or the one the freeing thread's own poll places (j) — or at a
 * synchronisation of s. */
int slp_record_use(slc_stream *s, slp_block *const *blocks, size_t n_blocks,
                   const slc_hold *hold);

/* ---- Trim, statistics, snapshot -------------------------------------- */

/* Returns cached memory to the driver until at most keep_bytes stay cached:
 * the calling thread's cache, then every slab all of whose blocks are in
 * the shared free lists (every thread's inbox is moved there first; a
 * slab carved from a segment gives its pages back to it, and other
 * classes carve them again; the segment goes back once all its pages are
 * free). Other threads' caches (at most thread_cache_bytes each) stay
 * until those threads allocate, free past their cap, or exit. *released
 * (may be NULL): bytes given back to the driver. */
int slp_trim(slp_pool *p, size_t keep_bytes, size_t *released);

typedef struct slp_stats {
  /* handed out, class sizes; the peaks (and held_peak) may miss up to
   * 64 KiB per thread (threads fold their counts into the pool's every
   * 64 KiB); the byte counts themselves are exact */
  uint64_t allocated_bytes, allocated_peak;
  uint64_t requested_bytes;                 /* handed out, as asked */
  uint64_t held_bytes, held_peak;   /* freed, waiting for pending work */
  uint64_t reserved_bytes, reserved_peak; /* slabs, segments: driver's */
  uint64_t cached_bytes; /* reserved - allocated - held: in free lists */
  uint64_t allocs, frees;      /* successful slp_alloc / slp_free */
  uint64_t reuses;             /* allocs served from a free list */
  uint64_t held_frees;         /* frees that found pending work */
  uint64_t slab_allocs, slab_frees; /* driver allocations and frees */
  uint64_t oom_retries;        /* out-of-memory recovery steps taken */
  uint64_t ooms;               /* allocs that failed with LDG_ENOMEM */
  uint64_t trims;              /* trims that released something */
  uint64_t live_blocks;        /* allocated or held */
  /* When reserved_bytes last reached reserved_peak (the driver allocation
   * that set it, for a block not yet counted as allocated): the allocated,
   * held and requested bytes then, as the shared counters had them (each may miss
   * up to 64 KiB per thread, see above). reserved_peak minus both is what
   * was cached at the peak, the new block's slab included;
   * peak_allocated - peak_requested the rounding then. */
  uint64_t peak_allocated, peak_held, peak_requested;
} slp_stats;

/* Callable from any thread at any time; counters are read atomically, not
 * all at one instant. LDG_EINVAL: NULL. */
int slp_stats_get(slp_pool *p, slp_stats *out);

/* Clears the peaks to the current values (torch.cuda.reset_peak_memory_stats). */
void slp_stats_reset_peaks(slp_pool *p);

/* One live block. */
typedef struct slp_block_info {
  uintptr_t addr;
  size_t bytes, capacity;
  uint64_t vec_id;
  uint64_t stream_id;  /* ledger id of the stream it was allocated on */
  uint64_t age_ns;     /* since slp_alloc */
  bool freed;          /* freed by its owner, held by pending work */
  unsigned pending;    /* pool operations on it not yet known complete */
  size_t holders;      /* ldg_vector_holders: pending ledger entries */
  uint64_t holder_stream_id; /* the first holder's stream (0: none) */
} slp_block_info;

/* Writes up to cap live blocks (allocated, or freed and held) to out and
 * returns how many there are. A snapshot for debugging: blocks change state
 * while it runs. */
size_t slp_snapshot(slp_pool *p, slp_block_info *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_POOL_SL_POOL_H */
