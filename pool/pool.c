/*
 * The stream-ordered memory pool (sl_pool.h), on the public APIs of cuda/
 * and ledger/ only.
 *
 * WHY A BLOCK IS NEVER REUSED UNDER RUNNING WORK
 *   Every block has one state word: ALLOC (its owner has it), FREE (it is in
 *   a free list) or neither ("held": freed by its owner while operations on
 *   it are pending), and in the low bits the count of pending uses.
 *   - A use (every pool call naming the block) is counted by a CAS that
 *     succeeds only while ALLOC is set, BEFORE the operation is issued, and
 *     dropped by the keep of the ledger entry that records the operation
 *     (or at once if issuing or recording failed: then nothing was issued,
 *     or the layer synchronised the stream before returning).
 *   - The ledger calls that keep only once the operation is known complete
 *     (SPEC.md: issue then enqueue, mark then complete): a stream or device
 *     sync, an event, a completion marker of the engine, or transitively a
 *     stream that waited on it.
 *   - slp_free clears ALLOC by CAS. If the count was 0, no pool operation on
 *     the block is pending: it goes to a free list now. Otherwise the block
 *     is held and the keep whose decrement takes the word from 1 to 0 (no
 *     ALLOC) puts it in a free list. The word's modification order makes the
 *     two cases exclusive: exactly one thread sees the count reach zero
 *     without ALLOC, and only it pushes the block.
 *   - A block enters a free list only with no pending use, so every
 *     operation the pool saw on it has completed; the next owner may use it
 *     on any stream. The pushes publish with release and the pops acquire,
 *     and the keep ran after the completion was proven, so the next owner's
 *     work is issued after that proof.
 *   That is the first rule: reuse, on any stream, only after completion
 *   is known. Under ASan a block is poisoned whenever it enters a free list,
 *   so any access to it before its next allocation — a premature reuse, or
 *   work the pool was not told about — is a reported use-after-poison.
 *
 * THE SECOND RULE: STREAM ORDER, FOR DEVICE BLOCKS
 *   Each block remembers its home stream (slp_alloc's), and its state word
 *   counts, besides all pending uses, those on other streams (a second
 *   field: a use on another stream adds 1 to both with its one CAS, its
 *   keep subtracts both with one decrement). slp_free decides on the word
 *   its CAS replaces, so both counts are of one instant: a use or keep
 *   that changes the word first makes the CAS fail, and it decides again.
 *   (They were two words, the cross count raised before the state's CAS
 *   and read after it: two locked RMWs more per cross-stream use, issue
 *   10.) If no cross use is pending, every pending use is on the home stream:
 *   the same CAS that clears ALLOC sets STREAM, and the block is listed
 *   in the freeing thread's cache, where only an slp_alloc on
 *   the same stream takes it (CAS STREAM -> ALLOC, keeping the count). The
 *   next owner's work on that stream is issued after the pending work, so
 *   the GPU runs it after: the order cuMemFreeAsync relies on. Every use
 *   of such a block on another stream (until its next alloc) first makes
 *   that stream wait for the home stream (an event): reuse elsewhere comes
 *   only after that stream waited on the freeing stream. Device
 *   memory only: the host cannot touch it outside stream order, whereas a
 *   pinned block is written by the host at once. Keeps leave STREAM blocks
 *   alone (their decrement never leaves the bare word 0); a block leaves a
 *   list unused (the list is full, a trim, the thread exits) by the free
 *   path's rule: free now if nothing is pending, else held. Listed blocks
 *   are not poisoned, so ASan checks this rule only through the data (the
 *   tests check it by contents, in stream order).
 *
 * WHERE BLOCKS LIVE AND WHO TAKES WHICH LOCK
 *   Size classes: 512 B, then two per power of two (2^k and 1.5 * 2^k) up
 *   to 1 MiB (rounding wastes at most a third), then eight per power of two
 *   (steps of 2^(k-3)) up to SLP_MAX_BYTES (at most an eighth). A class
 *   below 1 MiB is carved from slabs of about four blocks (64 KiB to
 *   2 MiB, whole 64 KiB pages) and every such slab is a run of pages of a
 *   2 MiB segment that all small classes share (best fit, a page bitmap
 *   under the pool mutex): a class in use costs its slab, not a 2 MiB
 *   driver allocation of its own (issue 14: 8 small classes of the serving
 *   benchmark held 16 MiB for 0.4 MiB in use). A larger class's slab is
 *   one block; on a device, up to SLP__SEG_MAX, it too comes from
 *   segments (best fit over every segment's free pages, else a new one of
 *   the block rounded up to 2 MiB), because the driver gives every
 *   allocation above 1 MiB whole 2 MiB pages: a 2.75 MiB block alone took
 *   4 MiB of device memory, which the pool's reserved count did not see;
 *   now its 1.25 MiB tail holds a 1 MiB block or small slabs, and the
 *   reserved count is what the driver holds (issue 14: the serving
 *   benchmark's device pages at one thread 209 -> 198 MiB, PyTorch's 194;
 *   bench/RESULTS.md). A trimmed slab's pages go
 *   back to their segment, where any class carves them again; the segment
 *   goes back to the driver once empty. A device class of 1 MiB to 64 MiB
 *   that finds no free pages takes back the pages of cached blocks of
 *   other classes before a new segment (RECLAIM BEFORE GROW, below); a
 *   pinned class of 1 MiB or more (no segments) borrows a whole spare
 *   block of a larger class, at most 3x its size, before a new slab
 *   (LARGE BLOCKS LEND ACROSS CLASSES, at slp__borrow); otherwise memory
 *   cached in one class serves no other until a trim returns its slabs
 *   (bench/RESULTS.md, issue 14, measures what each costs the serving
 *   benchmark).
 *   - Thread caches: one per (thread, pool), per class a short stack, owned
 *     by its thread; alloc and free touch only it on the common path.
 *   - Shared lists: per class, a stack of free blocks, pushed without a
 *     lock, popped under the class's take-mutex (SHARED LISTS, below).
 *   - The pool mutex: slab lists, segments and their page bitmaps, the
 *     address map's writers, the stream registry. Never held across a
 *     driver call that may block for long, nor while keeps run. The
 *     registry mutex (process-wide): creating and retiring thread caches,
 *     pool slots. Both, and the trim mutex, only on rare paths (sl_pool.h's
 *     table): alloc, free and the pool calls take none once a thread has
 *     its cache and its streams are registered (counted by
 *     slp__test_mutexes_taken); a dry cache's refill takes its class's
 *     take-mutex (counted apart, slp__test_take_mutexes_taken).
 *   - Trim takes the trim mutex, then one class at a time takes the
 *     class's shared list whole (under its take-mutex),
 *     unlinks each slab all of whose blocks it holds (a slab serves one
 *     class), and pushes the rest back; then,
 *     with only the trim mutex, it frees each unlinked slab (its own
 *     driver allocation) or gives its pages back to its segment, freeing
 *     the segment once empty (the pool mutex for the bitmap).
 *   - free by pointer: an open-addressing map from block address to block,
 *     written under the pool mutex, read lock-free (key with acquire, value
 *     with acquire); a grown table is published with release, and old
 *     tables and slab records are kept until the pool is destroyed, so a
 *     reader never touches freed memory.
 *
 * THE PER-THREAD RETURN PATH
 *   Who runs a held block's last keep puts it back. That was the engine
 *   thread alone, for every request thread: with blocks used on a second
 *   stream it wrote each block's line, a ledger slot, the shared list head
 *   and the held counter that the request threads wrote too, and from 4
 *   threads on it was the bottleneck (bench/RESULTS.md, issue 10). Now:
 *   - a keep that returns a block on a thread with a cache of the pool
 *     (slp__tc_peek: never creates one) pushes it there if it fits, then
 *     stores FREE (release) as its last touch of the pool; the engine's
 *     keeps (no cache) and overflows take the other path, under
 *     p->returning as before, to the inbox of the thread that freed the
 *     block (below) or the shared list;
 *   - a thread whose cache runs dry after freeing blocks under pending
 *     work releases its own streams itself (slp__poll_own: an idle one
 *     with slc_stream_query, a busy one with slc_engine_poll_stream), so
 *     those keeps run on it (while the shared
 *     list has blocks, only every SLP__POLL_DRY held frees);
 *   - held bytes are counted per thread and folded every 64 KiB, as the
 *     allocated bytes are.
 *   A block pushed to a cache before its FREE store is reached by no one
 *   else: only its owner thread pops that cache, and it is that thread.
 *
 * THE OWNER'S INBOX
 *   The keeps the engine thread still wins (at 16 request threads about
 *   half) pushed their blocks to the class's shared list, and every request
 *   thread whose cache ran dry popped that list under its take-mutex (SHARED
 *   LISTS), one CAS per block while the
 *   engine pushed: on the H200 the request threads
 *   waited in futex ~70 % of the time (bench/RESULTS.md, issue 10). Now
 *   slp_free records the freeing thread's inbox in the block (b->inbox,
 *   before its CAS, which the returning keep's decrement reads), and a keep
 *   on a thread without a cache pushes the FREE, poisoned block there
 *   (slp__give_back_to). The owner takes its whole inbox with one CAS when
 *   a class of its cache is empty, before any poll or the shared list. A
 *   block in an inbox is FREE with no pending use: the first rule holds
 *   whoever takes it, so anyone may: before carving a slab, trimming or an
 *   out-of-memory retry, a thread moves every inbox to the shared lists
 *   (slp__inboxes_flush), so blocks freed by a thread that no longer
 *   allocates do not make the others grow the pool. An exiting thread
 *   closes its inbox (SLP__CLOSED: pushers then use the shared list) and
 *   moves what was in it to the shared lists; inboxes are freed only with
 *   the pool, so a late pusher never touches freed memory, and a later
 *   thread reopens a closed one.
 *
 * SHARED LISTS
 *   Each size class has a shared stack of FREE blocks (linked by b->next).
 *   Pushes (a free that overflows its cache, a keep, a flush, a trim's
 *   survivors) are lock-free: link the chain's last block to the head
 *   read, CAS the head to the chain's first (release). ABA-safe: the CAS
 *   only claims "the head is still what my last block points to", true
 *   whatever happened in between; the pusher owns its chain until the CAS
 *   succeeds and never touches it after.
 *   Pops: a batch (one block for the alloc, up to half the cache's room)
 *   under the class's take-mutex, like tcmalloc's central free lists: per
 *   class, and only on a refill of a dry cache, a large class's borrow or
 *   a trim; never the pool's mutex. The rest of the list stays where
 *   other takers find it (they wait for a few pops instead of carving).
 *   Pops are ABA-free: only the mutex holder removes blocks (a trim's
 *   take of the whole list holds it too), so the head it read cannot be
 *   removed and pushed again before its CAS; a push in between fails the
 *   CAS. Memory safe: a listed block's record is never freed (retired
 *   slabs' records live until the pool is destroyed), and the acquire
 *   load of the head pairs with the pushes' release, so the b->next read
 *   is the pusher's. At 1 thread it costs one uncontended lock per refill
 *   (one per half a cache of allocs).
 *   History (issue 10): pool5 took the one list whole by an exchange and
 *   put the rest back, so no take-mutex; but while one thread held the
 *   taken chain, every other thread whose cache ran dry found the class
 *   empty, went on as at a miss and carved: on the H200 at 16 threads
 *   317-357 slabs against 15-16 with the take-mutex, pool_2s 8.2-9.5 M
 *   ops/s against 19.1-24.0 M (bench/RESULTS.md). tests/pool's
 *   refill_leaves_blocks counts what a refill leaves findable. A mode of
 *   8 lock-free stripes per class, each taken whole (SLP_SHARED=striped,
 *   8ac85c5), measured slower than the take-mutex at 1 and 16 threads on
 *   the H200 (123 slabs against 16 at 16 threads; bench/RESULTS.md, pool6)
 *   and cost 8 padded heads per class: removed.
 *   A thread that finds the list empty goes on as at a miss (inboxes, a
 *   poll, a spare block) and may carve only when the class has no listed
 *   block.
 *
 * RECLAIM BEFORE GROW (issue 14: the serving benchmark's first request
 * took a 32 MiB segment for its logits on top of every class's cached
 * blocks, 198 MiB against PyTorch's 194; bench/RESULTS.md, sixth session)
 *   When a device class cls of 1 MiB to 64 MiB (one block per slab) finds
 *   no free run of pages for an alloc on stream s, before a new segment
 *   its thread takes back, into their segments' pages, the cached blocks
 *   (free in the shared lists, or in its own stream-ordered lists) of
 *   - each class more than SLP__LEND_MAX times larger (split: the
 *     previous request's logits give their pages to this one's MLP), and
 *   - each smaller class that is idle: every block of it cached where
 *     this thread reaches it (the MLP's blocks when the logits come);
 *   then carves again, best fit. Classes in between are left alone (they
 *   may peak again at once), and these classes no longer borrow whole
 *   blocks: a lent block kept as a long-lived smaller tensor pinned the
 *   pages a split had freed (the derived trace's peak 180 -> 206 MiB).
 *   The steady state then makes no driver call: after the first request
 *   the same blocks move between the same pages.
 *   Free blocks go by the trim's rule (slp__trim_class). A stream-ordered
 *   block of s (THE SECOND RULE) may still have work pending on s: its
 *   pages are free only for s, as the block itself was. It becomes a
 *   zombie: its word gets SLP__GONE in place of SLP__STREAM by a CAS
 *   against the keeps (which go on counting down and, the word never
 *   being their bare d, return nothing), its slab leaves the slab list
 *   and the address map for p->zombies, and each of its pages gets a lien
 *   (a count per page; one lien stream per segment, lien_s: a block of
 *   another stream is not reclaimed there). A carve for s may take pages
 *   under a lien of s, only for a one-block slab, and then that block
 *   carries the lien: it is allocated with one use pending on s (fresh,
 *   as a stream-ordered block: a use on another stream waits for s first)
 *   whose keep is recorded on s now, behind the zombies' work in s's
 *   order; so it becomes FREE, reusable anywhere, only after that work
 *   completed (the first rule). Any other carve skips lien pages. Under
 *   p->mu, every seg_take first settles the zombies whose word reads the
 *   bare SLP__GONE (acquire, against the last keep's acq_rel decrement):
 *   their liens go and their records are retired, after the keeps' last
 *   touch. slp_snapshot counts the pending zombies, so destroy waits for
 *   them as for held blocks.
 *   If the carve still finds no room, segments with no page used and no
 *   lien go back to the driver before the new one (the new segment
 *   replaces them instead of adding to them); one that only liens of s
 *   keep is waited for first (slc_stream_synchronize of s: growth only;
 *   it also makes the outcome not depend on whether the GPU had finished).
 *   Cost (bench/RESULTS.md): on the 1-thread serving trace, two reclaims
 *   and ~7 segment scans per request and no driver call; the scans count
 *   runs of free pages by bit (trailing ones and zeros), 64 pages a word.
 *
 * OUT OF MEMORY: trim, then slc_engine_poll (held blocks whose work ended
 * come back), then synchronise only the streams the pool saw work on that
 * still have pending entries; retry after each; then LDG_ENOMEM.
 */
/* CLOCK_MONOTONIC_COARSE and nanosleep: GNU and POSIX declarations. */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/sl_engine.h"
#include "pool/pool_testing.h"
#include "pool/sl_pool.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SLP__POISON(a, n) ASAN_POISON_MEMORY_REGION((void *)(a), (n))
#define SLP__UNPOISON(a, n) ASAN_UNPOISON_MEMORY_REGION((void *)(a), (n))
#else
#define SLP__POISON(a, n) ((void)(a), (void)(n))
#define SLP__UNPOISON(a, n) ((void)(a), (void)(n))
#endif

/* Named atomics, as cuda/internal.h and ledger/atomics.h. */
#define slp__load_relaxed(p) atomic_load_explicit((p), memory_order_relaxed)
#define slp__load_acquire(p) atomic_load_explicit((p), memory_order_acquire)
#define slp__store_relaxed(p, v) \
  atomic_store_explicit((p), (v), memory_order_relaxed)
#define slp__store_release(p, v) \
  atomic_store_explicit((p), (v), memory_order_release)
#define slp__fetch_add_relaxed(p, v) \
  atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define slp__fetch_sub_acq_rel(p, v) \
  atomic_fetch_sub_explicit((p), (v), memory_order_acq_rel)
#define slp__cas_weak_acq_rel(p, e, d)                                    \
  atomic_compare_exchange_weak_explicit((p), (e), (d), memory_order_acq_rel, \
                                        memory_order_acquire)

/* Every pool mutex is taken through these: each acquisition is counted
 * per thread, for pool_testing.h's slp__test_mutexes_taken (the tests
 * assert that alloc, use and free on the common and dry-cache paths take
 * none). A thread-local increment beside a mutex: nothing on the paths
 * that take no mutex. */
static _Thread_local uint64_t slp__mutexes_taken;

uint64_t slp__test_mutexes_taken(void) { return slp__mutexes_taken; }

static void slp__lock(pthread_mutex_t *mu) {
  pthread_mutex_lock(mu);
  slp__mutexes_taken++;
}

static bool slp__trylock(pthread_mutex_t *mu) {
  if (pthread_mutex_trylock(mu) != 0) return false;
  slp__mutexes_taken++;
  return true;
}

/* The classes' take-mutexes (SHARED LISTS, mode mutex) are counted apart,
 * for pool_testing.h's slp__test_take_mutexes_taken: the steady state
 * takes them only when a cache runs dry, never a pool-wide one. */
static _Thread_local uint64_t slp__take_mutexes_taken;

uint64_t slp__test_take_mutexes_taken(void) { return slp__take_mutexes_taken; }

static void slp__take_lock(pthread_mutex_t *mu) {
  pthread_mutex_lock(mu);
  slp__take_mutexes_taken++;
}

#define SLP__MIN_SHIFT 9
#define SLP__NCLASS (2 * (20 - SLP__MIN_SHIFT) + 1 + 8 * (40 - 20))
#define SLP__SLAB ((size_t)2 << 20) /* a segment of small-class slabs */
#define SLP__PAGE ((size_t)64 << 10) /* a segment's unit */
/* Device blocks up to this size are carved from segments too (whole 2 MiB
 * driver pages; see WHERE BLOCKS LIVE); larger ones get their own driver
 * allocation, whose page rounding is at most 1/32 of it. */
#define SLP__SEG_MAX ((size_t)64 << 20)
#define SLP__MAGIC 0x736c7062u /* "slpb" */

#define SLP__ALLOC (UINT64_C(1) << 63)
#define SLP__FREE (UINT64_C(1) << 62)
#define SLP__STREAM (UINT64_C(1) << 61) /* in a thread's stream-ordered list */
/* A stream-ordered block whose pages went back to its segment while uses on
 * its home stream were pending (RECLAIM BEFORE GROW): its keeps count down
 * and return nothing; at 0 its pages' liens go. */
#define SLP__GONE (UINT64_C(1) << 60)
/* Pending uses: all of them (bits 0-29) and, of those, the ones on a stream
 * other than the block's home (bits 30-59; see THE SECOND RULE). */
#define SLP__XONE (UINT64_C(1) << 30)
#define SLP__COUNT (SLP__XONE - 1)
#define SLP__XCOUNT (SLP__COUNT * SLP__XONE)
#define SLP__USES (SLP__COUNT | SLP__XCOUNT)
#define SLP__SO_CAP 16 /* stream-ordered blocks per thread and class */

/* A driver allocation, a multiple of 2 MiB, whose 64 KiB pages slabs of
 * any class share (see WHERE BLOCKS LIVE). Under the pool mutex. */
struct slp__seg {
  uintptr_t base;
  size_t bytes;
  unsigned pages;
  struct slp__seg *next;
  /* RECLAIM BEFORE GROW: per page, how many reclaimed blocks with work
   * still pending on lien_s cover it (lien_n: how many such blocks are in
   * this segment; lien_s means something only while lien_n > 0). */
  uint16_t *lien;
  unsigned lien_n;
  slc_stream *lien_s;
  uint64_t used[]; /* bit i: page i belongs to a slab */
};

struct slp__slab {
  uintptr_t base;
  size_t bytes, n;
  int cls;
  struct slp__seg *seg; /* its segment; NULL: a driver allocation of its own */
  size_t scratch; /* trim's count of its blocks found free; trim mutex */
  slp_block *blocks;
  struct slp__slab *next; /* pool's live list or its class's retired list */
};

/* 128 bytes, in slab arrays aligned to 64 (slp__carve): two cache lines,
 * the first read-mostly (fixed while its slab lives: every thread that
 * uses, frees or returns the block reads it), the second written on every
 * alloc, use, free and return. Unpadded (112 bytes at 16-byte alignment)
 * half the blocks straddled three lines and the written fields shared a
 * line with the fixed ones (bench/RESULTS.md, issue 10, fifth session).
 * The type keeps its natural alignment: slp_free reads the magic of any
 * pointer it is given. */
struct slp_block {
  /* Line 1: fixed while the slab lives. */
  uint32_t magic;
  int cls;
  slp_pool *pool;
  struct slp__slab *slab;
  uintptr_t addr;
  size_t cap;
  uint64_t id;
  char pad_[16];
  /* Line 2: the state and what its owner writes. */
  atomic_uint_fast64_t st;
  slc_stream *home; /* the stream of slp_alloc; its owner's */
  atomic_bool fresh; /* handed out by stream order with work pending: every
                      * use on another stream waits for home first */
  slp_block *next; /* free-list link; written before the push that publishes */
  /* The inbox of the thread that freed it last (NULL: none), where a keep
   * on a thread without a cache returns it (THE OWNER'S INBOX). Written by
   * slp_free before the CAS that may make the block held; read by the keep
   * whose decrement returns it, after that CAS. Atomic (relaxed): a double
   * free writes it while a keep may read it (the CASes order the rest). */
  _Atomic(struct slp__inbox *) inbox;
  /* Written by the owner at alloc; atomic for snapshots. */
  atomic_size_t bytes;
  atomic_uint_fast64_t stream_id, alloc_ns;
};
_Static_assert(sizeof(struct slp_block) == 128 &&
                   offsetof(struct slp_block, st) == 64,
               "a block is two cache lines, the state word opening the second");

struct slp__mslot {
  atomic_uintptr_t key;
  _Atomic(slp_block *) val;
};

struct slp__map {
  size_t cap, used;
  struct slp__mslot *slots;
  struct slp__map *retired;
};

/* THE OWNER'S INBOX: a stack of free blocks that other threads returned
 * for this thread. Pushed by CAS (release), taken whole by CAS to NULL
 * (acquire) by anyone: its owner when a class of its cache is empty, any
 * thread before carving a slab or trimming; no pop of one node, so no ABA.
 * SLP__CLOSED: its thread exited; pushers go to the shared list. Inboxes
 * live until the pool is destroyed (p->inboxes) and are reused by later
 * threads (p->inbox_free). */
#define SLP__CLOSED ((slp_block *)1)
struct slp__inbox {
  _Alignas(64) _Atomic(slp_block *) head;
  /* Held bytes that keeps returning blocks here took off (<= 0): on the
   * line their push wrote, not the pool's `held`, which every thread's
   * folds write too; the owner folds it into its d_held at a drain, and
   * slp__allocated_exact adds what is left. */
  atomic_int_fast64_t held;
  struct slp__inbox *next_all;  /* p->inboxes; fixed once published */
  struct slp__inbox *next_free; /* p->inbox_free; registry mutex */
};

/* Counters of one thread cache: written by its thread only. */
struct slp__tcounts {
  atomic_uint_fast64_t allocs, frees, reuses, held_frees;
};

struct slp__tcache {
  slp_pool *pool; /* NULL once the pool was destroyed; registry mutex */
  uint64_t uid;
  struct slp__tcache *prev, *next; /* the pool's list; registry mutex */
  struct {
    slp_block *head;
    unsigned n;
  } cls[SLP__NCLASS];
  size_t bytes;
  /* Device blocks freed with pending uses on their home stream only:
   * reusable at once by an alloc on that stream. Newest at so[k][n-1]. */
  struct {
    slp_block *b[SLP__SO_CAP];
    unsigned n;
  } so[SLP__NCLASS];
  struct slp__tcounts n;
  struct slp__inbox *inbox; /* this thread's (THE OWNER'S INBOX) */
  /* Bytes this thread allocated minus freed (class sizes, asked sizes),
   * not yet folded into the pool's counters (see slp__acct). */
  atomic_int_fast64_t d_alloc, d_req;
  /* Held bytes this thread added (freed under pending work) minus those
   * its keeps returned and those its inbox's count took off (folded here
   * at a drain), not yet folded into p->held (see slp__held_acct). */
  atomic_int_fast64_t d_held;
  /* Frees that found pending work since this thread last polled its own
   * streams (see THE PER-THREAD RETURN PATH). */
  unsigned held_since;
  /* The 8 streams this thread used with the pool last, each with a
   * reference of this cache (dropped when evicted, at a poll that finds it
   * destroyed, at thread exit and at the pool's destroy): they are the
   * streams slp__poll_own releases. gen: the registry's generation when
   * the stream was registered (a stale one is registered again). */
  struct {
    slc_stream *s;
    uint64_t gen;
    uint64_t id; /* ldg_stream_id of s, for slp_alloc's block info */
    /* Own polls left that skip the stream query (slp__poll_own, AN IDLE
     * STREAM IN ONE DRIVER CALL): set when a query found s busy. */
    unsigned query_skip;
  } seen[8];
  unsigned seen_next;
  struct timespec clock; /* where slp_alloc's slp__now_ns writes */
};

struct slp_pool {
  slc_context *c;
  int device; /* -1: host */
  int index;
  uint64_t uid;
  slp_config cfg;
  uint16_t class_cap[SLP__NCLASS]; /* slp__class_cap; fixed at create */
  pthread_mutex_t mu; /* slabs, segments, map writers, stream registry */
  struct slp__slab *slabs;
  struct slp__seg *segs;
  /* RECLAIM BEFORE GROW: slabs of one block whose pages were reclaimed
   * under pending work (SLP__GONE); retired once their keeps ran. */
  struct slp__slab *zombies;
  struct slp__slab *retired[SLP__NCLASS];
  _Atomic(struct slp__map *) map;
  struct slp__tcache *tcaches; /* registry mutex */
  _Atomic(struct slp__inbox *) inboxes; /* every inbox, pushed by CAS */
  struct slp__inbox *inbox_free;        /* closed ones; registry mutex */
  struct slp__tcounts gone;    /* counts of exited threads' caches */
  slc_stream **streams;        /* registry for OOM syncs: a ref each */
  size_t n_streams, cap_streams;
  atomic_uint_fast64_t streams_gen;
  pthread_mutex_t trim_mu;
  bool own_query; /* slp__poll_own asks idle streams first; SLP_OWN_POLL */
  struct {
    _Alignas(64) _Atomic(slp_block *) head;
    _Alignas(64) pthread_mutex_t take_mu; /* takers */
  } shared[SLP__NCLASS]; /* SHARED LISTS */
  _Alignas(64) atomic_int_fast64_t allocated, requested, held, reserved;
  atomic_int_fast64_t allocated_peak, held_peak, reserved_peak;
  /* allocated, held, requested when reserved last set its peak */
  atomic_int_fast64_t at_peak_allocated, at_peak_held, at_peak_requested;
  atomic_uint_fast64_t slab_allocs, slab_frees, oom_retries, ooms, trims;
  /* Keeps between making a held block free and their last touch of the
   * pool: slp_pool_destroy waits for 0 (see slp__unuse). */
  atomic_long returning;
};

/* ---- Process-wide registry -------------------------------------------- */

static pthread_mutex_t slp__reg_mu = PTHREAD_MUTEX_INITIALIZER;
static slp_pool *slp__pools[SLP_MAX_POOLS];
static uint64_t slp__next_uid = 1;
static pthread_once_t slp__key_once = PTHREAD_ONCE_INIT;
static pthread_key_t slp__key;
static _Thread_local struct slp__tcache *slp__tls[SLP_MAX_POOLS];

/* For block ages only: the coarse clock costs a few ns, not ~20. ts: where
 * clock_gettime writes (slp_alloc passes its thread cache's: a local whose
 * address is taken costs the caller a stack slot). */
static uint64_t slp__now_ns(struct timespec *ts) {
  clock_gettime(CLOCK_MONOTONIC_COARSE, ts);
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static void slp__max(atomic_int_fast64_t *peak, int_fast64_t v) {
  int_fast64_t cur = slp__load_relaxed(peak);
  while (v > cur &&
         !atomic_compare_exchange_weak_explicit(
             peak, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void slp__add(atomic_int_fast64_t *ctr, atomic_int_fast64_t *peak,
                     int_fast64_t delta) {
  int_fast64_t v = slp__fetch_add_relaxed(ctr, delta) + delta;
  if (peak != NULL && delta > 0) slp__max(peak, v);
}

/* A pool-wide counter (rare events). */
static void slp__bump(atomic_uint_fast64_t *ctr) {
  slp__fetch_add_relaxed(ctr, 1);
}

/* A thread cache's counter: its thread is the only writer, so a load and a
 * store (relaxed, for the readers in slp_stats_get) and no locked RMW. */
static void slp__own_bump(atomic_uint_fast64_t *ctr) {
  slp__store_relaxed(ctr, slp__load_relaxed(ctr) + 1);
}

static uint64_t slp__clamp(int_fast64_t v) { return v > 0 ? (uint64_t)v : 0; }

/* ---- Size classes --------------------------------------------------------- */

/* Classes 0..SLP__NSMALL-1: 512 B, then two per power of two up to 1 MiB
 * (2^k and 1.5 * 2^k); above 1 MiB eight per power of two (2^k + i *
 * 2^(k-3), i = 1..8): a large block wastes at most 1/8 of its size, as
 * the sizes of the tensors a model allocates (2.75 MiB, 5.5 MiB) fall on
 * or near those steps (issue 14: the serving benchmark's weights wasted
 * 3 MiB in 1.5 * 2^k classes). */
#define SLP__NSMALL (2 * (20 - SLP__MIN_SHIFT) + 1)

static size_t slp__class_size(int c) {
  if (c == 0) return (size_t)1 << SLP__MIN_SHIFT;
  if (c >= SLP__NSMALL) {
    int o = (c - SLP__NSMALL) / 8, i = (c - SLP__NSMALL) % 8;
    return ((size_t)1 << (20 + o)) + (size_t)(i + 1) * ((size_t)1 << (17 + o));
  }
  int j = (c - 1) / 2;
  if (c & 1) return (size_t)3 << (SLP__MIN_SHIFT + j - 1);
  return (size_t)1 << (SLP__MIN_SHIFT + 1 + j);
}

static inline int slp__class_of(size_t bytes) {
  if (bytes <= ((size_t)1 << SLP__MIN_SHIFT)) return 0;
  size_t m = bytes - 1;
  int k = 63 - __builtin_clzll((unsigned long long)m); /* 2^k <= m < b */
  if (k >= 20) /* the step of 2^(k-3) that holds bytes */
    return SLP__NSMALL + 8 * (k - 20) + (int)((m - ((size_t)1 << k)) >> (k - 3));
  /* 2 (k - 9) + 1 for 2^k < bytes <= 1.5 * 2^k, + 2 above: bit k-1 of
   * bytes - 1 says which (no branch; issue 10, sixth session, pool9). */
  return 2 * (k - SLP__MIN_SHIFT) + 1 + (int)((m >> (k - 1)) & 1);
}

size_t slp_round_size(size_t bytes) {
  if (bytes == 0 || (uint64_t)bytes > SLP_MAX_BYTES) return 0;
  return slp__class_size(slp__class_of(bytes));
}

/* Small classes (below 1 MiB) are carved from slabs of about four blocks
 * (at least one page, at most a segment), which share 2 MiB segments;
 * larger classes get a driver allocation per block (a slab of one). */
static bool slp__small(size_t cap) { return cap < ((size_t)1 << 20); }

static size_t slp__slab_bytes(size_t cap) {
  if (!slp__small(cap)) return cap;
  size_t want = 4 * cap < SLP__PAGE ? SLP__PAGE : 4 * cap;
  if (want > SLP__SLAB) want = SLP__SLAB;
  size_t n = want / cap; /* >= 2: cap < 1 MiB */
  return (n * cap + SLP__PAGE - 1) / SLP__PAGE * SLP__PAGE;
}

/* ---- Poisoning ------------------------------------------------------------ */

static bool slp__poisons(const slp_pool *p) {
  return p->device < 0 || p->cfg.poison_device;
}

static void slp__poison(slp_block *b) {
  if (slp__poisons(b->pool)) SLP__POISON(b->addr, b->cap);
}

static void slp__unpoison(slp_block *b) {
  if (slp__poisons(b->pool)) SLP__UNPOISON(b->addr, b->cap);
}

/* ---- Shared lists (SHARED LISTS) ------------------------------------ */

/* The test hook of pool_testing.h: called by a refilling taker while it
 * holds the take-mutex and what it took. */
static void (*_Atomic slp__refill_hook)(void *);
static void *_Atomic slp__refill_hook_arg;

void slp__test_set_refill_hook(void (*fn)(void *), void *arg) {
  atomic_store(&slp__refill_hook_arg, arg);
  atomic_store(&slp__refill_hook, fn);
}

static _Atomic(slp_block *) *slp__shared_head(slp_pool *p, int cls) {
  return &p->shared[cls].head;
}

/* Whether the class's list looked empty (a relaxed load: a hint). */
static bool slp__shared_empty(slp_pool *p, int cls) {
  return slp__load_relaxed(slp__shared_head(p, cls)) == NULL;
}

/* Pushes the chain first..last (linked by next) lock-free. Release: the
 * links and everything before the push (a keep's proof of completion)
 * happen-before the take or pop that acquires the head. */
static void slp__shared_push(slp_pool *p, int cls, slp_block *first,
                             slp_block *last) {
  _Atomic(slp_block *) *head = slp__shared_head(p, cls);
  slp_block *old = slp__load_relaxed(head);
  do {
    last->next = old;
  } while (!slp__cas_weak_acq_rel(head, &old, first));
}

/* Under the class's take-mutex: pops one block (NULL if empty). ABA-free:
 * only the holder of the take-mutex removes blocks, so the head read
 * cannot be removed and pushed again before the CAS; pushers only put new
 * heads in front, which fails the CAS. Acquire (the load and a failed
 * CAS) pairs with the pushers' release: b->next is theirs. */
static slp_block *slp__list_pop_locked(_Atomic(slp_block *) *head) {
  slp_block *b = slp__load_acquire(head);
  while (b != NULL && !slp__cas_weak_acq_rel(head, &b, b->next)) {
  }
  return b;
}

/* Every block of the class's list, as one chain (trim): one exchange
 * under the take-mutex. Acquire pairs with the pushers' release CASes
 * (every write of the head is an RMW: one release sequence). */
static slp_block *slp__shared_take_all(slp_pool *p, int cls) {
  _Atomic(slp_block *) *head = slp__shared_head(p, cls);
  if (slp__load_relaxed(head) == NULL) return NULL;
  slp__take_lock(&p->shared[cls].take_mu);
  slp_block *all = atomic_exchange_explicit(head, NULL, memory_order_acquire);
  pthread_mutex_unlock(&p->shared[cls].take_mu);
  return all;
}

/* A dry cache's refill: one block for the alloc and up to `batch` more
 * pushed to tc's cache by `keep`, popped one by one under the take-mutex;
 * the rest stay listed for the others. NULL if the list looked empty. */
static slp_block *slp__shared_refill(slp_pool *p, int cls, unsigned batch,
                                     void (*keep)(void *, slp_block *),
                                     void *arg) {
  void (*hook)(void *) = atomic_load_explicit(&slp__refill_hook,
                                              memory_order_relaxed);
  _Atomic(slp_block *) *head = slp__shared_head(p, cls);
  if (slp__load_relaxed(head) == NULL) return NULL;
  slp__take_lock(&p->shared[cls].take_mu);
  slp_block *b = slp__list_pop_locked(head);
  for (unsigned i = 0; b != NULL && i < batch; i++) {
    slp_block *x = slp__list_pop_locked(head);
    if (x == NULL) break;
    keep(arg, x);
  }
  if (hook != NULL) hook(atomic_load(&slp__refill_hook_arg));
  pthread_mutex_unlock(&p->shared[cls].take_mu);
  return b;
}

/* A block of class k's list only if another stays there, or `others` are
 * cached elsewhere (a large class's borrow). */
static slp_block *slp__shared_take_spare(slp_pool *p, int k,
                                         unsigned others) {
  _Atomic(slp_block *) *head = slp__shared_head(p, k);
  if (slp__load_relaxed(head) == NULL) return NULL;
  slp__take_lock(&p->shared[k].take_mu);
  slp_block *b = slp__load_acquire(head);
  if (b != NULL && (b->next != NULL || others != 0))
    b = slp__list_pop_locked(head);
  else
    b = NULL;
  pthread_mutex_unlock(&p->shared[k].take_mu);
  return b;
}

size_t slp__test_shared_count(slp_pool *p, size_t bytes) {
  size_t n = 0;
  _Atomic(slp_block *) *head = slp__shared_head(p, slp__class_of(bytes));
  for (slp_block *b = slp__load_acquire(head); b != NULL; b = b->next) n++;
  return n;
}

/* ---- Inboxes (THE OWNER'S INBOX) ----------------------------------------- */

/* Pushes b (FREE, poisoned) to in; false if in is closed. Release: as
 * slp__shared_push, b's history and link before the taker's acquire. */
static bool slp__inbox_push(struct slp__inbox *in, slp_block *b) {
  slp_block *old = slp__load_relaxed(&in->head);
  do {
    if (old == SLP__CLOSED) return false;
    b->next = old;
  } while (!slp__cas_weak_acq_rel(&in->head, &old, b));
  return true;
}

/* Takes in's whole chain (NULL if empty or closed). A CAS of the head seen
 * to NULL, not a pop: the chain is read only after it succeeded, so a head
 * taken and pushed again meanwhile (ABA) hands over the current chain, which
 * is just as valid. Acquire pairs with the pushers' release CASes (every
 * write of head but a reopen, on an empty closed inbox, is an RMW: one
 * release sequence). `close`: leaves SLP__CLOSED instead of NULL. */
static slp_block *slp__inbox_take(struct slp__inbox *in, bool close) {
  slp_block *old = slp__load_acquire(&in->head);
  while (old != SLP__CLOSED && (old != NULL || close) &&
         !slp__cas_weak_acq_rel(&in->head, &old,
                                close ? SLP__CLOSED : NULL)) {
  }
  return old == SLP__CLOSED ? NULL : old;
}

/* in's whole chain to the shared lists of its blocks' classes (`close`: as
 * slp__inbox_take). Returns how many. */
static size_t slp__inbox_to_shared(slp_pool *p, struct slp__inbox *in,
                                   bool close) {
  size_t n = 0;
  for (slp_block *b = slp__inbox_take(in, close), *nx; b != NULL; b = nx) {
    nx = b->next;
    b->next = NULL;
    slp__shared_push(p, b->cls, b, b);
    n++;
  }
  return n;
}

/* Every inbox's blocks to the shared lists (before a new slab, a trim, an
 * out-of-memory retry: blocks returned for a thread that does not allocate
 * again must not make the others grow the pool). Returns how many. */
static size_t slp__inboxes_flush(slp_pool *p) {
  size_t n = 0;
  /* Acquire pairs with the release CAS that published each inbox. */
  for (struct slp__inbox *in = slp__load_acquire(&p->inboxes); in != NULL;
       in = in->next_all) {
    /* Its held count too, into the pool's: a trim reads p->held (cached =
     * reserved - allocated - held) and would keep these slabs. */
    if (slp__load_relaxed(&in->held) != 0)
      slp__add(&p->held, NULL,
               atomic_exchange_explicit(&in->held, 0, memory_order_relaxed));
    if (slp__load_relaxed(&in->head) == NULL) continue;
    n += slp__inbox_to_shared(p, in, false);
  }
  return n;
}

/* ---- Thread caches ---------------------------------------------------- */

/* The most blocks of class cls a thread cache keeps: a quarter of its
 * bytes, at most 256. A table filled at create: every keep that returns a
 * block asks (it was a division and a class-size call per keep). */
static unsigned slp__class_cap(const slp_pool *p, int cls) {
  return p->class_cap[cls];
}

/* Moves every block of tc's class `cls` to the shared list. */
static void slp__tc_flush_class(slp_pool *p, struct slp__tcache *tc, int cls,
                                unsigned keep) {
  unsigned n = tc->cls[cls].n;
  if (n <= keep) return;
  slp_block *first = tc->cls[cls].head, *last = first;
  for (unsigned i = 1; i < n - keep; i++) last = last->next;
  tc->cls[cls].head = last->next;
  tc->cls[cls].n = keep;
  tc->bytes -= (size_t)(n - keep) * slp__class_size(cls);
  slp__shared_push(p, cls, first, last);
}

static void slp__so_flush(slp_pool *p, struct slp__tcache *tc,
                          struct slp__tcache *give_to);

/* Everything tc caches goes to the shared lists (or, for stream-ordered
 * blocks still in use, to the held state). */
static void slp__tc_flush_all(slp_pool *p, struct slp__tcache *tc) {
  slp__so_flush(p, tc, NULL);
  for (int k = 0; k < SLP__NCLASS; k++) slp__tc_flush_class(p, tc, k, 0);
}

static void slp__counts_add(struct slp__tcounts *to,
                            const struct slp__tcounts *from) {
  slp__fetch_add_relaxed(&to->allocs, slp__load_relaxed(&from->allocs));
  slp__fetch_add_relaxed(&to->frees, slp__load_relaxed(&from->frees));
  slp__fetch_add_relaxed(&to->reuses, slp__load_relaxed(&from->reuses));
  slp__fetch_add_relaxed(&to->held_frees,
                         slp__load_relaxed(&from->held_frees));
}

/* Moves tc's stream references into out (room for 8); returns how many.
 * The caller drops them with no pool or registry lock held: a last
 * reference may run keeps. */
static size_t slp__tc_take_streams(struct slp__tcache *tc, slc_stream **out) {
  size_t n = 0;
  for (unsigned i = 0; i < 8; i++)
    if (tc->seen[i].s != NULL) {
      out[n++] = tc->seen[i].s;
      tc->seen[i].s = NULL;
    }
  return n;
}

static void slp__unref_all(slc_stream **v, size_t n) {
  for (size_t i = 0; i < n; i++) slc_stream_unref(v[i]);
}

/* Under the registry mutex: returns tc's blocks and counts to its pool (if
 * alive), unlinks it, frees it; its stream references go to drop (room for
 * 8), *n_drop says how many. */
static void slp__tc_retire(struct slp__tcache *tc, slc_stream **drop,
                           size_t *n_drop) {
  *n_drop = slp__tc_take_streams(tc, drop);
  slp_pool *p = tc->pool;
  if (p != NULL) {
    slp__tc_flush_all(p, tc);
    /* Closed first: a keep that returns a block this thread freed goes to
     * the shared list from now on; what was pushed before goes there too.
     * The inbox waits in p->inbox_free for a later thread. */
    (void)slp__inbox_to_shared(p, tc->inbox, true);
    tc->inbox->next_free = p->inbox_free;
    p->inbox_free = tc->inbox;
    slp__counts_add(&p->gone, &tc->n);
    slp__add(&p->allocated, &p->allocated_peak,
             slp__load_relaxed(&tc->d_alloc));
    slp__add(&p->requested, NULL, slp__load_relaxed(&tc->d_req));
    slp__add(&p->held, &p->held_peak, slp__load_relaxed(&tc->d_held));
    if (tc->prev != NULL) tc->prev->next = tc->next;
    else p->tcaches = tc->next;
    if (tc->next != NULL) tc->next->prev = tc->prev;
  }
  free(tc);
}

static void slp__thread_exit(void *arg) {
  struct slp__tcache **slots = arg;
  for (int i = 0; i < SLP_MAX_POOLS; i++) {
    slc_stream *drop[8];
    size_t n = 0;
    slp__lock(&slp__reg_mu);
    if (slots[i] != NULL) slp__tc_retire(slots[i], drop, &n);
    slots[i] = NULL;
    pthread_mutex_unlock(&slp__reg_mu);
    slp__unref_all(drop, n);
  }
}

static void slp__make_key(void) {
  (void)pthread_key_create(&slp__key, slp__thread_exit);
}

/* slp__tc's first call per thread and pool: creates the cache (tc: a
 * stale one, of a destroyed pool that had this slot, retired here). Out of
 * line, so that the lookup every alloc, free and use makes saves no
 * registers (it was 26 instructions, most of them this one's prologue). */
__attribute__((noinline)) static struct slp__tcache *slp__tc_create(
    slp_pool *p, struct slp__tcache *tc) {
  pthread_once(&slp__key_once, slp__make_key);
  struct slp__tcache *fresh = calloc(1, sizeof(*fresh));
  /* A new inbox, unless a closed one waits (then this one is dropped). */
  size_t in_bytes = (sizeof(struct slp__inbox) + 63) / 64 * 64;
  struct slp__inbox *in = aligned_alloc(64, in_bytes);
  if (fresh == NULL || in == NULL) {
    free(fresh);
    free(in);
    return NULL;
  }
  memset(in, 0, in_bytes);
  slc_stream *drop[8];
  size_t n_drop = 0;
  slp__lock(&slp__reg_mu);
  if (tc != NULL) slp__tc_retire(tc, drop, &n_drop); /* a destroyed pool's */
  if (p->inbox_free != NULL) {
    free(in);
    in = p->inbox_free;
    p->inbox_free = in->next_free;
    /* Reopened: closed inboxes are empty and nobody writes a closed head
     * (pushers and takers leave it), so a store. Relaxed: the blocks later
     * pushed publish themselves with their CASes. */
    slp__store_relaxed(&in->head, NULL);
  } else {
    /* Published with release: next_all is fixed before (the flushers'
     * acquire load). */
    struct slp__inbox *old = slp__load_relaxed(&p->inboxes);
    do {
      in->next_all = old;
    } while (!slp__cas_weak_acq_rel(&p->inboxes, &old, in));
  }
  fresh->inbox = in;
  fresh->pool = p;
  fresh->uid = p->uid;
  fresh->next = p->tcaches;
  if (p->tcaches != NULL) p->tcaches->prev = fresh;
  p->tcaches = fresh;
  slp__tls[p->index] = fresh;
  pthread_mutex_unlock(&slp__reg_mu);
  slp__unref_all(drop, n_drop);
  (void)pthread_setspecific(slp__key, slp__tls);
  return fresh;
}

/* This thread's cache of p; NULL only when out of memory. */
static inline struct slp__tcache *slp__tc(slp_pool *p) {
  struct slp__tcache *tc = slp__tls[p->index];
  if (tc != NULL && tc->uid == p->uid) return tc;
  return slp__tc_create(p, tc);
}

/* ---- The address map --------------------------------------------------- */

static size_t slp__hash(uintptr_t a, size_t cap) {
  return (size_t)(((uint64_t)a >> SLP__MIN_SHIFT) * UINT64_C(0x9E3779B97F4A7C15) >>
                  17) & (cap - 1);
}

static void slp__map_put(struct slp__map *m, uintptr_t key, slp_block *b) {
  for (size_t i = slp__hash(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    uintptr_t k = slp__load_relaxed(&m->slots[i].key);
    if (k == key) {
      slp__store_release(&m->slots[i].val, b);
      return;
    }
    if (k == 0) {
      slp__store_relaxed(&m->slots[i].val, b);
      /* Release: a reader that sees the key sees the value. */
      slp__store_release(&m->slots[i].key, key);
      m->used++;
      return;
    }
  }
}

/* Under p->mu: makes room for n more keys. */
static int slp__map_reserve(slp_pool *p, size_t n) {
  struct slp__map *m = slp__load_relaxed(&p->map);
  if (m != NULL && (m->used + n) * 2 <= m->cap) return LDG_OK;
  size_t cap = m != NULL ? m->cap : 1024;
  size_t live = 0;
  if (m != NULL)
    for (size_t i = 0; i < m->cap; i++)
      live += slp__load_relaxed(&m->slots[i].val) != NULL;
  while ((live + n) * 2 > cap) cap *= 2;
  struct slp__map *g = calloc(1, sizeof(*g));
  if (g != NULL) g->slots = calloc(cap, sizeof(*g->slots));
  if (g == NULL || g->slots == NULL) {
    free(g);
    return LDG_ENOMEM;
  }
  g->cap = cap;
  if (m != NULL)
    for (size_t i = 0; i < m->cap; i++) {
      slp_block *b = slp__load_relaxed(&m->slots[i].val);
      if (b != NULL) slp__map_put(g, slp__load_relaxed(&m->slots[i].key), b);
    }
  g->retired = m; /* readers may still be in it: freed with the pool */
  /* Release: the filled table before its pointer (pairs with the acquire in
   * slp_block_find). */
  slp__store_release(&p->map, g);
  return LDG_OK;
}

slp_block *slp_block_find(slp_pool *p, uintptr_t addr) {
  if (p == NULL || addr == 0) return NULL;
  struct slp__map *m = slp__load_acquire(&p->map);
  if (m == NULL) return NULL;
  for (size_t i = slp__hash(addr, m->cap), n = 0; n < m->cap;
       i = (i + 1) & (m->cap - 1), n++) {
    uintptr_t k = slp__load_acquire(&m->slots[i].key);
    if (k == 0) return NULL;
    if (k == addr) return slp__load_acquire(&m->slots[i].val);
  }
  return NULL;
}

/* ---- Slabs ---------------------------------------------------------------- */

static int slp__current(slp_pool *p) {
  return slc_device_make_current(p->c, p->device < 0 ? 0 : p->device);
}

/* A new reserved total v: the peak, and if v set it, what was allocated,
 * held and requested then (the shared counters: relaxed, approximate, see
 * slp_stats; two threads setting peaks at once may pair one's reserved
 * with the other's counts). */
static void slp__note_reserved_peak(slp_pool *p, int_fast64_t v) {
  int_fast64_t cur = slp__load_relaxed(&p->reserved_peak);
  if (v < cur) return;
  slp__max(&p->reserved_peak, v);
  slp__store_relaxed(&p->at_peak_allocated,
                     slp__load_relaxed(&p->allocated));
  slp__store_relaxed(&p->at_peak_held, slp__load_relaxed(&p->held));
  slp__store_relaxed(&p->at_peak_requested,
                     slp__load_relaxed(&p->requested));
}

/* One driver allocation of `bytes`; CUDA_ERROR_OUT_OF_MEMORY past the
 * pool's limit. */
static CUresult slp__driver_alloc(slp_pool *p, size_t bytes, uintptr_t *out) {
  int_fast64_t r = slp__fetch_add_relaxed(&p->reserved, (int_fast64_t)bytes);
  if (p->cfg.limit_bytes != 0 && (size_t)r + bytes > p->cfg.limit_bytes) {
    slp__fetch_add_relaxed(&p->reserved, -(int_fast64_t)bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  const slc_driver *d = slc_context_driver(p->c);
  CUresult cr;
  if (slp__current(p) != LDG_OK) {
    cr = slc_last_error()->cu != CUDA_SUCCESS ? slc_last_error()->cu
                                               : CUDA_ERROR_INVALID_CONTEXT;
  } else if (p->device < 0) {
    void *h = NULL;
    cr = d->pfn_cuMemHostAlloc(&h, bytes, CU_MEMHOSTALLOC_PORTABLE);
    *out = (uintptr_t)h;
  } else {
    CUdeviceptr dp = 0;
    cr = d->pfn_cuMemAlloc(&dp, bytes);
    *out = (uintptr_t)dp;
  }
  if (cr != CUDA_SUCCESS) {
    slp__fetch_add_relaxed(&p->reserved, -(int_fast64_t)bytes);
    return cr;
  }
  slp__note_reserved_peak(p, r + (int_fast64_t)bytes);
  slp__bump(&p->slab_allocs);
  return CUDA_SUCCESS;
}

static void slp__driver_free(slp_pool *p, uintptr_t base, size_t bytes) {
  SLP__UNPOISON(base, slp__poisons(p) ? bytes : 0);
  const slc_driver *d = slc_context_driver(p->c);
  if (slp__current(p) == LDG_OK) {
    if (p->device < 0)
      (void)d->pfn_cuMemFreeHost((void *)base);
    else
      (void)d->pfn_cuMemFree((CUdeviceptr)base);
  }
  slp__fetch_add_relaxed(&p->reserved, -(int_fast64_t)bytes);
  slp__bump(&p->slab_frees);
}

/* ---- Segments: slabs share driver allocations of whole 2 MiB pages ---- */

/* Whether the slab of a block of cap bytes comes from a segment: every
 * small class, and device blocks up to SLP__SEG_MAX (a pinned host block
 * keeps an allocation of its own: no 2 MiB pages to fill). */
static bool slp__in_seg(const slp_pool *p, size_t cap) {
  return slp__small(cap) || (p->device >= 0 && cap <= SLP__SEG_MAX);
}

/* No page used and none under a lien: the driver may have it back. */
/* Whether no page of g is in use (liens aside). */
static bool slp__seg_unused(const struct slp__seg *g) {
  for (unsigned w = 0; w < (g->pages + 63) / 64; w++)
    if (g->used[w] != 0) return false;
  return true;
}

static bool slp__seg_empty(const struct slp__seg *g) {
  return slp__seg_unused(g) && g->lien_n == 0;
}

static void slp__pages_mark(struct slp__seg *g, unsigned first,
                            unsigned pages, bool used) {
  for (unsigned i = first; i < first + pages; i++) {
    uint64_t bit = UINT64_C(1) << (i % 64);
    g->used[i / 64] = used ? g->used[i / 64] | bit : g->used[i / 64] & ~bit;
  }
}

static void slp__zombies_settle(slp_pool *p);

/* Under p->mu: `pages` free pages in a row, taken from the shortest free
 * run of any segment that holds them (best fit: a large block's tail, the
 * rest of its last 2 MiB page, stays open for the blocks that fit it),
 * marked used; 0 if no segment has room. lien_s: a one-block slab's carve
 * for an alloc on that stream, which may take pages under a lien of that
 * stream (then *lien is set: the block must carry it); NULL: no lien
 * pages (a slab of several blocks, whose others go to free lists). A used
 * word is skipped whole. */
static uintptr_t slp__seg_take(slp_pool *p, unsigned pages,
                               const slc_stream *lien_s,
                               struct slp__seg **seg, bool *lien) {
  slp__zombies_settle(p);
  struct slp__seg *best = NULL;
  unsigned best_at = 0, best_len = UINT_MAX;
  for (struct slp__seg *g = p->segs; g != NULL; g = g->next) {
    const bool liens =
        g->lien_n != 0 && !(lien_s != NULL && g->lien_s == lien_s);
    unsigned run = 0;
    /* A word of 64 pages at a time: all free extends the run, none free
     * ends it, a mix goes page by page (a run ending at page i is
     * i - run .. i - 1). */
    for (unsigned w = 0; w * 64 < g->pages; w++) {
      const unsigned n = g->pages - w * 64 < 64 ? g->pages - w * 64 : 64;
      const uint64_t all = n == 64 ? ~UINT64_C(0) : (UINT64_C(1) << n) - 1;
      uint64_t fr = ~g->used[w] & all;
      for (unsigned b = 0; liens && fr != 0 && b < n; b++)
        if (g->lien[w * 64 + b] != 0) fr &= ~(UINT64_C(1) << b);
      if (fr == all) {
        run += n;
        continue;
      }
      /* A mix: runs of free pages by counting trailing ones and zeros
       * (~(fr >> b) is never 0 here: fr is not all free, and the shift
       * brings zeros in at the top). */
      for (unsigned b = 0; b < n;) {
        unsigned ones = (unsigned)__builtin_ctzll(~(fr >> b));
        run += ones;
        b += ones;
        if (b >= n) break; /* the run goes on into the next word */
        if (run >= pages && run < best_len) {
          best = g;
          best_at = w * 64 + b - run;
          best_len = run;
        }
        run = 0;
        uint64_t rest = fr >> b;
        if (rest == 0) break; /* nothing free in the rest of the word */
        b += (unsigned)__builtin_ctzll(rest);
      }
    }
    if (run >= pages && run < best_len) {
      best = g;
      best_at = g->pages - run;
      best_len = run;
    }
  }
  if (best == NULL) return 0;
  slp__pages_mark(best, best_at, pages, true);
  *lien = false;
  for (unsigned i = best_at; best->lien_n != 0 && i < best_at + pages; i++)
    *lien |= best->lien[i] != 0;
  *seg = best;
  return best->base + best_at * SLP__PAGE;
}

/* Under p->mu: gives a slab's pages back to its segment. Returns the
 * segment, unlinked, if that left it empty and `unlink_empty` (the caller
 * frees it with no lock held), else NULL. */
static struct slp__seg *slp__seg_put(slp_pool *p, struct slp__seg *g,
                                     uintptr_t base, size_t bytes,
                                     bool unlink_empty) {
  slp__pages_mark(g, (unsigned)((base - g->base) / SLP__PAGE),
                  (unsigned)(bytes / SLP__PAGE), false);
  if (!unlink_empty || !slp__seg_empty(g)) return NULL;
  for (struct slp__seg **l = &p->segs; *l != NULL; l = &(*l)->next)
    if (*l == g) {
      *l = g->next;
      return g;
    }
  return NULL;
}

static void slp__seg_free(slp_pool *p, struct slp__seg *g) {
  slp__driver_free(p, g->base, g->bytes);
  free(g->lien);
  free(g);
}

/* RECLAIM BEFORE GROW (below, after the trim it builds on). */
static bool slp__reclaims(const slp_pool *p, int cls);
static bool slp__reclaim(slp_pool *p, struct slp__tcache *tc, int cls,
                         slc_stream *s);
static void slp__grow_room(slp_pool *p, slc_stream *s);
static size_t slp__free_empty_segs(slp_pool *p);

/* Memory for a slab of `bytes`: pages of a segment (slp__in_seg, *seg
 * set; a new segment from the driver if none has room: 2 MiB for a small
 * class, the slab rounded up to 2 MiB for a large one) or a driver
 * allocation of its own (*seg NULL). A large device class reclaims cached
 * blocks of other classes into their segments before a new segment
 * (RECLAIM BEFORE GROW); then *lien says whether its pages carry pending
 * work of s. On success p->mu is held. */
static CUresult slp__slab_mem(slp_pool *p, struct slp__tcache *tc, int cls,
                              slc_stream *s, size_t bytes, bool in_seg,
                              uintptr_t *base, struct slp__seg **seg,
                              bool *lien) {
  *seg = NULL;
  *lien = false;
  const bool reclaims = in_seg && tc != NULL && s != NULL &&
                        slp__reclaims(p, cls);
  if (in_seg) {
    unsigned pages = (unsigned)(bytes / SLP__PAGE);
    slp__lock(&p->mu);
    *base = slp__seg_take(p, pages, reclaims ? s : NULL, seg, lien);
    if (*base != 0) return CUDA_SUCCESS;
    pthread_mutex_unlock(&p->mu);
    if (reclaims && slp__reclaim(p, tc, cls, s)) {
      slp__lock(&p->mu);
      *base = slp__seg_take(p, pages, s, seg, lien);
      if (*base != 0) return CUDA_SUCCESS;
      pthread_mutex_unlock(&p->mu);
    }
    if (reclaims) slp__grow_room(p, s);
  }
  size_t want = !in_seg ? bytes : (bytes + SLP__SLAB - 1) / SLP__SLAB * SLP__SLAB;
  uintptr_t mem = 0;
  CUresult cr = slp__driver_alloc(p, want, &mem);
  if (cr != CUDA_SUCCESS) return cr;
  if (!in_seg) {
    *base = mem;
    slp__lock(&p->mu);
    return CUDA_SUCCESS;
  }
  unsigned pages = (unsigned)(want / SLP__PAGE);
  struct slp__seg *g =
      calloc(1, sizeof(*g) + (pages + 63) / 64 * sizeof(uint64_t));
  if (g == NULL) {
    slp__driver_free(p, mem, want);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  g->base = mem;
  g->bytes = want;
  g->pages = pages;
  slp__pages_mark(g, 0, (unsigned)(bytes / SLP__PAGE), true);
  slp__lock(&p->mu);
  g->next = p->segs;
  p->segs = g;
  *base = mem;
  *seg = g;
  return CUDA_SUCCESS;
}

/* A slab unlinked from the pool (trim): its memory goes back, to its
 * segment (freed to the driver once empty) or to the driver. Returns the
 * bytes given to the driver. No lock held. */
static size_t slp__slab_release(slp_pool *p, struct slp__slab *sl) {
  if (sl->seg == NULL) {
    slp__driver_free(p, sl->base, sl->bytes);
    return sl->bytes;
  }
  slp__lock(&p->mu);
  struct slp__seg *g = slp__seg_put(p, sl->seg, sl->base, sl->bytes, true);
  pthread_mutex_unlock(&p->mu);
  sl->seg = NULL;
  if (g == NULL) return 0;
  size_t bytes = g->bytes;
  slp__seg_free(p, g);
  return bytes;
}

static void slp__unuse_keep(void *ctx);

/* A new slab of class cls for an alloc on s: block 0 is returned (not
 * poisoned, state 0; or, if its pages carry a lien of s, allocated with
 * one use pending on s, its lien, RECLAIM BEFORE GROW), the others are
 * poisoned, FREE, and pushed to tc's cache or the shared list. */
static CUresult slp__carve(slp_pool *p, struct slp__tcache *tc, int cls,
                           slc_stream *s, slp_block **out) {
  size_t cap = slp__class_size(cls), bytes = slp__slab_bytes(cap);
  uintptr_t base = 0;
  struct slp__seg *seg = NULL;
  bool lien = false;
  CUresult cr = slp__slab_mem(p, tc, cls, s, bytes, slp__in_seg(p, cap),
                              &base, &seg, &lien);
  if (cr != CUDA_SUCCESS) return cr;
  /* p->mu held. */
  struct slp__slab *sl = p->retired[cls];
  if (sl != NULL) {
    p->retired[cls] = sl->next;
  } else {
    sl = calloc(1, sizeof(*sl));
    if (sl != NULL) {
      sl->n = bytes / cap;
      /* Aligned to a cache line: see struct slp_block. */
      sl->blocks = aligned_alloc(64, sl->n * sizeof(slp_block));
      if (sl->blocks != NULL) memset(sl->blocks, 0, sl->n * sizeof(slp_block));
      if (sl->blocks == NULL) {
        free(sl);
        sl = NULL;
      }
    }
  }
  if (sl == NULL || slp__map_reserve(p, sl->n) != LDG_OK) {
    if (sl != NULL) {
      sl->next = p->retired[cls];
      p->retired[cls] = sl;
    }
    /* The pages stay with their segment (cached), or the memory goes. */
    if (seg != NULL) (void)slp__seg_put(p, seg, base, bytes, false);
    pthread_mutex_unlock(&p->mu);
    if (seg == NULL) slp__driver_free(p, base, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  sl->seg = seg;
  sl->base = base;
  sl->bytes = bytes;
  sl->cls = cls;
  struct slp__map *m = slp__load_relaxed(&p->map);
  for (size_t i = 0; i < sl->n; i++) {
    slp_block *b = &sl->blocks[i];
    b->magic = SLP__MAGIC;
    b->cls = cls;
    b->pool = p;
    b->slab = sl;
    b->addr = base + i * cap;
    b->cap = cap;
    if (b->id == 0) b->id = slc_new_vector_id(p->c);
    slp__store_relaxed(&b->st, i != 0 ? SLP__FREE : lien ? SLP__ALLOC | 1 : 0);
    slp__map_put(m, b->addr, b);
  }
  sl->next = p->slabs;
  p->slabs = sl;
  pthread_mutex_unlock(&p->mu);
  if (lien) {
    /* Its pages held blocks whose work on s may still run: the block is
     * s's as a stream-ordered block is (a use elsewhere waits for s
     * first: fresh), and it becomes FREE, reusable on any stream, only
     * after the keep recorded here, behind that work in s's order. */
    slp_block *b = &sl->blocks[0];
    b->home = s;
    slp__store_relaxed(&b->fresh, true);
    uint64_t id = b->id;
    slc_hold h = {{slp__unuse_keep, (void *)b}, &id, 1, NULL, false};
    if (slc_stream_record_deferred(s, &h) != LDG_OK) {
      /* Not recorded: the work is waited for here, then nothing pends. */
      (void)slc_stream_synchronize(s);
      slp__fetch_sub_acq_rel(&b->st, 1);
      slp__store_relaxed(&b->fresh, false);
    }
  }
  /* Blocks 1..n-1: poisoned, to the thread cache up to its cap. */
  unsigned room = slp__class_cap(p, cls);
  for (size_t i = 1; i < sl->n; i++) {
    slp_block *b = &sl->blocks[i];
    slp__poison(b);
    if (tc->cls[cls].n < room) {
      b->next = tc->cls[cls].head;
      tc->cls[cls].head = b;
      tc->cls[cls].n++;
      tc->bytes += cap;
    } else {
      b->next = NULL;
      slp__shared_push(p, cls, b, b);
    }
  }
  *out = &sl->blocks[0];
  return CUDA_SUCCESS;
}

static void slp__prune_streams(slp_pool *p);

/* ---- Trim ------------------------------------------------------------------ */

static int_fast64_t slp__cached(slp_pool *p) {
  return slp__load_relaxed(&p->reserved) - slp__load_relaxed(&p->allocated) -
         slp__load_relaxed(&p->held);
}

/* Under trim_mu: takes the class's shared list whole, unlinks each slab
 * all of whose blocks it holds (while more than keep stays cached), pushes
 * the other blocks back (a taker meanwhile finds the list empty: SHARED
 * LISTS). Returns the slabs to free, their bytes in
 * *unlinked (still counted as reserved until freed; a small class's slab
 * frees driver memory only when its segment empties, so a trim to keep > 0
 * may stop with more than keep cached). */
static struct slp__slab *slp__trim_class(slp_pool *p, int k, size_t keep,
                                         size_t *unlinked) {
  slp_block *popped = slp__shared_take_all(p, k);
  if (popped == NULL) return NULL;
  for (slp_block *b = popped; b != NULL; b = b->next) b->slab->scratch++;
  struct slp__slab *done = NULL;
  slp__lock(&p->mu);
  for (struct slp__slab **link = &p->slabs; *link != NULL;) {
    struct slp__slab *sl = *link;
    if (sl->cls == k && sl->scratch == sl->n &&
        slp__cached(p) - (int_fast64_t)*unlinked > (int_fast64_t)keep) {
      *link = sl->next;
      sl->next = done;
      done = sl;
      *unlinked += sl->bytes;
      struct slp__map *m = slp__load_relaxed(&p->map);
      for (size_t i = 0; i < sl->n; i++) {
        slp__store_relaxed(&sl->blocks[i].st, 0); /* retired */
        slp__map_put(m, sl->blocks[i].addr, NULL);
      }
    } else {
      link = &sl->next;
    }
  }
  pthread_mutex_unlock(&p->mu);
  slp_block *keepers = NULL, *last = NULL;
  for (slp_block *nx; popped != NULL; popped = nx) {
    nx = popped->next;
    popped->slab->scratch = 0;
    if (slp__load_relaxed(&popped->st) != SLP__FREE) continue; /* retired */
    popped->next = keepers;
    if (keepers == NULL) last = popped;
    keepers = popped;
  }
  if (keepers != NULL) slp__shared_push(p, k, keepers, last);
  return done;
}

/* Under trim_mu: frees whole free slabs while more than keep is cached,
 * one class at a time (a slab belongs to one class). */
static size_t slp__trim_locked(slp_pool *p, size_t keep) {
  size_t released = 0;
  (void)slp__inboxes_flush(p); /* their slabs may be whole again */
  for (int k = 0; k < SLP__NCLASS; k++) {
    if (slp__shared_empty(p, k)) continue;
    size_t unlinked = 0;
    struct slp__slab *done = slp__trim_class(p, k, keep, &unlinked);
    while (done != NULL) {
      struct slp__slab *sl = done;
      done = sl->next;
      released += slp__slab_release(p, sl);
      slp__lock(&p->mu);
      sl->next = p->retired[sl->cls];
      p->retired[sl->cls] = sl;
      pthread_mutex_unlock(&p->mu);
    }
  }
  /* Segments a reclaim emptied, or whose liens went since. */
  released += slp__free_empty_segs(p);
  if (released > 0) slp__bump(&p->trims);
  return released;
}

int slp_trim(slp_pool *p, size_t keep_bytes, size_t *released) {
  if (p == NULL) return slc_set_error(LDG_EINVAL, "slp_trim", "pool is NULL");
  struct slp__tcache *tc = slp__tc(p);
  if (tc != NULL) slp__tc_flush_all(p, tc);
  slp__lock(&p->trim_mu);
  size_t r = slp__trim_locked(p, keep_bytes);
  pthread_mutex_unlock(&p->trim_mu);
  slp__prune_streams(p);
  if (released != NULL) *released = r;
  return LDG_OK;
}

/* ---- Reclaim before grow (RECLAIM BEFORE GROW, at the top) -------------- */

/* Whether class cls reclaims before it grows: a device block of 1 MiB or
 * more carved from segments, one block per slab (its block can carry a
 * lien; a small slab's other blocks go to free lists). */
static bool slp__reclaims(const slp_pool *p, int cls) {
  size_t cap = slp__class_size(cls);
  return p->device >= 0 && !slp__small(cap) && cap <= SLP__SEG_MAX &&
         slp__slab_bytes(cap) == cap;
}

/* Under p->mu: zombies whose keeps all ran lose their liens and are
 * retired. Acquire (the bare SLP__GONE) pairs with the last keep's acq_rel
 * decrement: its completion proof, and its last touch of the block,
 * happen-before the pages are free of the lien and the record reused. */
static void slp__zombies_settle(slp_pool *p) {
  for (struct slp__slab **l = &p->zombies; *l != NULL;) {
    struct slp__slab *sl = *l;
    if (slp__load_acquire(&sl->blocks[0].st) != SLP__GONE) {
      l = &sl->next;
      continue;
    }
    *l = sl->next;
    struct slp__seg *g = sl->seg;
    unsigned first = (unsigned)((sl->base - g->base) / SLP__PAGE);
    for (unsigned i = first; i < first + sl->bytes / SLP__PAGE; i++)
      g->lien[i]--;
    g->lien_n--;
    sl->seg = NULL;
    slp__store_relaxed(&sl->blocks[0].st, 0); /* retired */
    sl->next = p->retired[sl->cls];
    p->retired[sl->cls] = sl;
  }
}

/* Under p->mu: b (this thread's stream-ordered block, taken off its list,
 * home s) gives its pages back with a lien of s while its uses are
 * pending: its slab becomes a zombie. False (nothing changed) if its
 * segment has liens of another stream, a lien count would overflow, or
 * its uses completed meanwhile (then the caller frees it as usual). */
static bool slp__zombify_locked(slp_pool *p, slp_block *b, slc_stream *s) {
  struct slp__slab *sl = b->slab;
  struct slp__seg *g = sl->seg;
  if (g == NULL || sl->n != 1 || (g->lien_n != 0 && g->lien_s != s))
    return false;
  unsigned first = (unsigned)((sl->base - g->base) / SLP__PAGE),
           n = (unsigned)(sl->bytes / SLP__PAGE);
  if (g->lien == NULL && (g->lien = calloc(g->pages, sizeof(*g->lien))) == NULL)
    return false;
  for (unsigned i = first; i < first + n; i++)
    if (g->lien[i] == UINT16_MAX) return false;
  /* acq_rel against the keeps' decrements: from here they count down a
   * GONE block, whose last keep returns nothing (slp__unuse: the word is
   * never the bare d). */
  uint_fast64_t old = slp__load_relaxed(&b->st);
  do {
    if ((old & SLP__USES) == 0) return false;
  } while (!slp__cas_weak_acq_rel(&b->st, &old,
                                  (old & SLP__USES) | SLP__GONE));
  struct slp__slab **l = &p->slabs;
  while (*l != sl) l = &(*l)->next;
  *l = sl->next;
  slp__map_put(slp__load_relaxed(&p->map), b->addr, NULL);
  slp__pages_mark(g, first, n, false);
  for (unsigned i = first; i < first + n; i++) g->lien[i]++;
  if (g->lien_n++ == 0) g->lien_s = s;
  sl->next = p->zombies;
  p->zombies = sl;
  return true;
}

/* Whether class k is idle: every block of it is cached where this thread
 * can reclaim it (free in a shared list, or in its own stream-ordered
 * list), so none is in use now. (These classes lend no block: see
 * slp__slow_alloc.) A hint: the reclaim's own steps decide per block. */
static bool slp__class_idle(slp_pool *p, struct slp__tcache *tc, int k) {
  bool idle = true;
  slp__lock(&p->mu);
  for (struct slp__slab *sl = p->slabs; sl != NULL && idle; sl = sl->next) {
    if (sl->cls != k) continue;
    slp_block *b = &sl->blocks[0];
    uint_fast64_t st = slp__load_relaxed(&b->st);
    if (st == SLP__FREE) continue;
    bool mine = false;
    for (unsigned j = 0; (st & SLP__STREAM) && j < tc->so[k].n; j++)
      mine |= tc->so[k].b[j] == b;
    idle = mine;
  }
  pthread_mutex_unlock(&p->mu);
  return idle;
}

/* RECLAIM BEFORE GROW: before a large class's new segment (cls, for an
 * alloc on s), cached blocks of other large classes give their pages back
 * to their segments, so that cls can carve them: those of a class more
 * than SLP__LEND_MAX times larger (too large to lend whole: split), and
 * those of a smaller class none of whose blocks is in use now (idle: the
 * serving benchmark's MLP activations when its logits come). Free blocks
 * go by the trim's rule (their slabs unlinked, pages to the segment,
 * which stays); this thread's stream-ordered blocks with work pending on
 * s become zombies whose pages carry a lien of s. Returns whether any
 * page came back. */
#define SLP__LEND_MAX 3

static void slp__so_release(slp_pool *p, struct slp__tcache *tc,
                            slp_block *b);

static bool slp__reclaim(slp_pool *p, struct slp__tcache *tc, int cls,
                         slc_stream *s) {
  size_t x = slp__class_size(cls);
  bool pick[SLP__NCLASS] = {false}, got = false;
  for (int k = slp__class_of((size_t)1 << 20);
       k < SLP__NCLASS && slp__class_size(k) <= SLP__SEG_MAX; k++) {
    size_t ck = slp__class_size(k);
    bool split = ck > SLP__LEND_MAX * x;
    if (k == cls || !slp__reclaims(p, k) || (!split && ck >= x)) continue;
    if (tc->so[k].n == 0 && slp__shared_empty(p, k)) continue;
    if (!split && !slp__class_idle(p, tc, k)) continue;
    pick[k] = true;
    for (unsigned i = 0; i < tc->so[k].n;) {
      slp_block *b = tc->so[k].b[i];
      bool zombie = false;
      if ((slp__load_relaxed(&b->st) & SLP__USES) != 0) {
        if (b->home != s) {
          i++;
          continue;
        }
        slp__lock(&p->mu);
        zombie = slp__zombify_locked(p, b, s);
        pthread_mutex_unlock(&p->mu);
        if (!zombie && (slp__load_relaxed(&b->st) & SLP__USES) != 0) {
          i++;
          continue;
        }
      }
      memmove(&tc->so[k].b[i], &tc->so[k].b[i + 1],
              (tc->so[k].n - i - 1) * sizeof(slp_block *));
      tc->so[k].n--;
      if (zombie)
        got = true;
      else
        slp__so_release(p, NULL, b); /* nothing pending: FREE, shared */
    }
    slp__tc_flush_class(p, tc, k, 0);
  }
  (void)slp__inboxes_flush(p);
  slp__lock(&p->trim_mu);
  for (int k = 0; k < SLP__NCLASS; k++) {
    if (!pick[k] || slp__shared_empty(p, k)) continue;
    size_t unlinked = 0;
    struct slp__slab *done = slp__trim_class(p, k, 0, &unlinked);
    while (done != NULL) {
      struct slp__slab *sl = done;
      done = sl->next;
      slp__lock(&p->mu);
      (void)slp__seg_put(p, sl->seg, sl->base, sl->bytes, false);
      sl->seg = NULL;
      sl->next = p->retired[sl->cls];
      p->retired[sl->cls] = sl;
      pthread_mutex_unlock(&p->mu);
      got = true;
    }
  }
  pthread_mutex_unlock(&p->trim_mu);
  return got;
}

/* Before a new segment after a reclaim that did not make room: segments
 * left with no page in use go back to the driver, so that the new one
 * replaces them instead of adding to them. One kept only by liens of s
 * (s's work on the blocks just reclaimed) is waited for first: this is
 * growth, not the steady state, and the wait makes the outcome the same
 * whether that work had completed or not. */
static void slp__grow_room(slp_pool *p, slc_stream *s) {
  bool wait = false;
  slp__lock(&p->mu);
  slp__zombies_settle(p);
  for (struct slp__seg *g = p->segs; g != NULL && !wait; g = g->next)
    wait = g->lien_n != 0 && g->lien_s == s && slp__seg_unused(g);
  pthread_mutex_unlock(&p->mu);
  if (wait) (void)slc_stream_synchronize(s); /* runs the zombies' keeps */
  (void)slp__free_empty_segs(p);
}

/* Every segment with no page in use and no lien back to the driver (a
 * reclaim's leftovers; a trim's); returns the bytes. */
static size_t slp__free_empty_segs(slp_pool *p) {
  struct slp__seg *gone = NULL;
  size_t bytes = 0;
  slp__lock(&p->mu);
  slp__zombies_settle(p);
  for (struct slp__seg **l = &p->segs; *l != NULL;) {
    struct slp__seg *g = *l;
    if (!slp__seg_empty(g)) {
      l = &g->next;
      continue;
    }
    *l = g->next;
    g->next = gone;
    gone = g;
  }
  pthread_mutex_unlock(&p->mu);
  while (gone != NULL) {
    struct slp__seg *g = gone;
    gone = g->next;
    bytes += g->bytes;
    slp__seg_free(p, g);
  }
  return bytes;
}

/* Drops the registry's references to destroyed streams. The generation
 * bump makes every thread forget what it registered (a new stream may get
 * a freed handle's address). */
static void slp__prune_streams(slp_pool *p) {
  slp__lock(&p->mu);
  size_t n = 0, dead = 0;
  slc_stream **gone = malloc((p->n_streams + 1) * sizeof(*gone));
  for (size_t i = 0; gone != NULL && i < p->n_streams; i++) {
    if (slc_stream_check_live(p->streams[i]) != LDG_OK)
      gone[dead++] = p->streams[i];
    else
      p->streams[n++] = p->streams[i];
  }
  if (gone != NULL) p->n_streams = n;
  if (dead > 0) slp__fetch_add_relaxed(&p->streams_gen, 1);
  pthread_mutex_unlock(&p->mu);
  for (size_t i = 0; i < dead; i++) slc_stream_unref(gone[i]);
  free(gone);
}

/* ---- Returning blocks ---------------------------------------------------- */

/* This thread's cache of p if it has one (never creates one: keeps call
 * this on any thread, the engine's included). */
static struct slp__tcache *slp__tc_peek(const slp_pool *p) {
  struct slp__tcache *tc = slp__tls[p->index];
  return tc != NULL && tc->uid == p->uid ? tc : NULL;
}

/* Whether b fits tc's cache without a flush. */
static bool slp__tc_room(const slp_pool *p, const struct slp__tcache *tc,
                         const slp_block *b) {
  return tc->cls[b->cls].n < slp__class_cap(p, b->cls) &&
         tc->bytes + b->cap <= p->cfg.thread_cache_bytes;
}

static void slp__tc_push(struct slp__tcache *tc, slp_block *b) {
  b->next = tc->cls[b->cls].head;
  tc->cls[b->cls].head = b;
  tc->cls[b->cls].n++;
  tc->bytes += b->cap;
}

static inline void slp__held_acct(slp_pool *p, struct slp__tcache *tc,
                                  int_fast64_t d);

/* tc's inbox into tc's cache (what does not fit: the shared lists). */
static void slp__inbox_drain(slp_pool *p, struct slp__tcache *tc) {
  /* The inbox's held count into this thread's (folded every 64 KiB). */
  int_fast64_t h = atomic_exchange_explicit(&tc->inbox->held, 0,
                                            memory_order_relaxed);
  if (h != 0) slp__held_acct(p, tc, h);
  for (slp_block *b = slp__inbox_take(tc->inbox, false), *nx; b != NULL;
       b = nx) {
    nx = b->next;
    if (slp__tc_room(p, tc, b)) {
      slp__tc_push(tc, b);
    } else {
      b->next = NULL;
      slp__shared_push(p, b->cls, b, b);
    }
  }
}

/* The block is FREE now: to the thread's cache, or the shared list. */
static void slp__give_back(slp_pool *p, struct slp__tcache *tc,
                           slp_block *b) {
  if (p->cfg.on_recycle != NULL)
    p->cfg.on_recycle(p->cfg.on_recycle_arg, b->addr, b->cap);
  slp__poison(b);
  int k = b->cls;
  if (tc != NULL && slp__class_cap(p, k) > 0) {
    slp__tc_push(tc, b);
    if (tc->cls[k].n > slp__class_cap(p, k) ||
        tc->bytes > p->cfg.thread_cache_bytes) {
      slp__tc_flush_class(p, tc, k, tc->cls[k].n / 2);
      if (slp__cached(p) > (int_fast64_t)p->cfg.release_threshold &&
          slp__trylock(&p->trim_mu)) {
        slp__trim_locked(p, p->cfg.release_threshold / 2);
        pthread_mutex_unlock(&p->trim_mu);
      }
    }
    return;
  }
  b->next = NULL;
  slp__shared_push(p, k, b, b);
}

/* A block FREE now, returned by a keep on a thread without room in a cache
 * of the pool: to `in` (the inbox of the thread that freed it), or the
 * shared list if there is none or it is closed. */
static bool slp__give_back_to(slp_pool *p, struct slp__inbox *in,
                              slp_block *b) {
  if (p->cfg.on_recycle != NULL)
    p->cfg.on_recycle(p->cfg.on_recycle_arg, b->addr, b->cap);
  slp__poison(b);
  if (in != NULL && slp__inbox_push(in, b)) return true;
  b->next = NULL;
  slp__shared_push(p, b->cls, b, b);
  return false;
}

/* slp__unuse's last use of a held block on a thread without room for it
 * in a cache of p (the engine thread's keeps): to the inbox of the thread
 * that freed it (THE OWNER'S INBOX: its next alloc of an empty class takes
 * them all with one CAS, where 16 threads convoyed on the shared list's
 * take-mutex, bench/RESULTS.md), else to the shared list. Out of line (a
 * tail call): its registers cost slp__unuse's common path, a request
 * thread's own keep, a six-register frame (issue 10, sixth session,
 * pool9). */
__attribute__((noinline)) static void slp__unuse_away(slp_pool *p,
                                                      struct slp__tcache *tc,
                                                      slp_block *b) {
  /* We announce ourselves in p->returning before the release store of
   * FREE: a destroy that sees the block free (acquire) then sees us there,
   * and waits for our release decrement, after our last touch of p and b. */
  struct slp__inbox *in = tc == NULL ? slp__load_relaxed(&b->inbox) : NULL;
  slp__fetch_add_relaxed(&p->returning, 1);
  /* Read first: once listed, b may be taken, trimmed and its slab re-carved
   * (b->cap rewritten) by other threads. */
  int_fast64_t cap = (int_fast64_t)b->cap;
  slp__store_release(&b->st, SLP__FREE);
  /* Uncounted after it is listed: a reader that sees no bytes held finds
   * the block on a list (a trim after waiting for held == 0 returns it).
   * In the inbox's count if it went there (see slp__inbox.held). Release:
   * pairs with the acquire loads of slp__allocated_exact, so a reader that
   * sees these bytes gone also sees the block listed (out of memory's
   * wait, slp__slow_alloc). */
  if (slp__give_back_to(p, in, b))
    atomic_fetch_add_explicit(&in->held, -cap, memory_order_release);
  else
    atomic_fetch_add_explicit(&p->held, -cap, memory_order_release);
  atomic_fetch_sub_explicit(&p->returning, 1, memory_order_release);
}

/* Drops one pending use (`cross`: on a stream other than the block's home);
 * the last use of a held block returns it. Runs in keeps (any thread):
 * returns to the shared list. A block in a stream-ordered list (STREAM) is
 * left there: its owner reuses or releases it. */
static void slp__unuse(slp_block *b, bool cross) {
  uint_fast64_t d = cross ? 1 + SLP__XONE : 1;
  /* acq_rel: the keep's completion proof happens-before the free-list push
   * (and, for a cross use, before a free that reads no cross use pending
   * and lists the block for its home stream); pairs with slp_free's CAS. */
  uint_fast64_t old = slp__fetch_sub_acq_rel(&b->st, d);
  if (old != d) return; /* allocated, listed, or other uses pending */
  slp_pool *p = b->pool;
  /* The block is ours, in the bare state 0 (live for slp_snapshot). On a
   * thread with a cache of p and room in it (a request thread releasing
   * its own streams: THE PER-THREAD RETURN PATH), it goes there: no shared
   * cache line is written. The release store of FREE is our last touch of
   * p: slp_pool_destroy waits until it sees every block free (acquire). */
  struct slp__tcache *tc = slp__tc_peek(p);
  if (tc == NULL || !slp__tc_room(p, tc, b)) {
    slp__unuse_away(p, tc, b);
    return;
  }
  slp__held_acct(p, tc, -(int_fast64_t)b->cap);
  if (p->cfg.on_recycle != NULL)
    p->cfg.on_recycle(p->cfg.on_recycle_arg, b->addr, b->cap);
  slp__poison(b);
  slp__tc_push(tc, b);
  slp__store_release(&b->st, SLP__FREE);
}

/* Keeps of single-block operations: ctx is the block, its low bit set for a
 * cross-stream use (blocks are 8-byte aligned). */
static void slp__unuse_keep(void *ctx) {
  uintptr_t v = (uintptr_t)ctx;
  slp__unuse((slp_block *)(v & ~(uintptr_t)1), v & 1);
}

/* Counts a use on s (a cross-stream use in both fields); LDG_EINVAL if b
 * is not allocated. */
static int slp__use(slp_block *b, bool cross, const char *fn) {
  uint_fast64_t d = cross ? 1 + SLP__XONE : 1;
  uint_fast64_t old = slp__load_relaxed(&b->st);
  do {
    if (!(old & SLP__ALLOC))
      return slc_set_error(LDG_EINVAL, fn,
                           "block %#lx of the pool is not allocated (used "
                           "after slp_free?)",
                           (unsigned long)b->addr);
    /* 2^30 - 1 uses pending on one block: the ledger holds an entry for
     * each, so memory runs out long before; refused rather than wrapped. */
    if ((old & SLP__COUNT) == SLP__COUNT)
      return slc_set_error(LDG_ENOMEM, fn,
                           "block %#lx has %llu pending uses, the most",
                           (unsigned long)b->addr,
                           (unsigned long long)SLP__COUNT);
    /* acq_rel: pairs with slp_free's CAS and the keeps' decrements. */
  } while (!slp__cas_weak_acq_rel(&b->st, &old, old + d));
  return LDG_OK;
}

/* ---- Stream-ordered lists (device blocks; see THE SECOND RULE) --------- */

/* A listed block leaves its list without being reused: it becomes free now
 * if nothing is pending, else held until its last keep. tc NULL: to the
 * shared list (no trim; for flushes under the registry mutex). */
static void slp__so_release(slp_pool *p, struct slp__tcache *tc,
                            slp_block *b) {
  uint_fast64_t old = slp__load_relaxed(&b->st), nw;
  do {
    nw = (old & SLP__USES) == 0 ? SLP__FREE : (old & SLP__USES);
  } while (!slp__cas_weak_acq_rel(&b->st, &old, nw));
  if (nw == SLP__FREE)
    slp__give_back(p, tc, b);
  else
    slp__held_acct(p, tc, (int_fast64_t)b->cap);
}

static void slp__so_flush(slp_pool *p, struct slp__tcache *tc,
                          struct slp__tcache *give_to) {
  for (int k = 0; k < SLP__NCLASS; k++) {
    for (unsigned i = 0; i < tc->so[k].n; i++)
      slp__so_release(p, give_to, tc->so[k].b[i]);
    tc->so[k].n = 0;
  }
}

/* A block freed with pending uses on its home stream only: listed, to be
 * reused by the next alloc on that stream. */
static void slp__so_push(slp_pool *p, struct slp__tcache *tc, slp_block *b) {
  int k = b->cls;
  if (tc->so[k].n == SLP__SO_CAP) { /* the oldest makes room */
    slp_block *old = tc->so[k].b[0];
    memmove(&tc->so[k].b[0], &tc->so[k].b[1],
            (SLP__SO_CAP - 1) * sizeof(slp_block *));
    tc->so[k].n--;
    slp__so_release(p, tc, old);
  }
  tc->so[k].b[tc->so[k].n++] = b;
}

/* The newest listed block of class k whose home is s, allocated again
 * (its pending uses, all on s, stay counted), or NULL. */
static slp_block *slp__so_take(struct slp__tcache *tc, int k, slc_stream *s) {
  for (unsigned i = tc->so[k].n; i-- > 0;) {
    slp_block *b = tc->so[k].b[i];
    if (b->home != s) continue;
    memmove(&tc->so[k].b[i], &tc->so[k].b[i + 1],
            (tc->so[k].n - i - 1) * sizeof(slp_block *));
    tc->so[k].n--;
    uint_fast64_t old = slp__load_relaxed(&b->st);
    /* acq_rel against the keeps still decrementing the count. */
    while (!slp__cas_weak_acq_rel(&b->st, &old,
                                  (old & SLP__USES) | SLP__ALLOC)) {
    }
    slp__store_relaxed(&b->fresh, (old & SLP__COUNT) != 0);
    return b;
  }
  return NULL;
}

/* ---- Byte accounting ----------------------------------------------------- */

/* Allocated bytes are counted per thread and folded into the pool's shared
 * counters once a thread's balance reaches SLP__FOLD either way (and when
 * the thread exits): one shared cache line written by every alloc and free
 * would serialise the threads; with 4 KiB blocks this writes it once per
 * 16 operations. slp_stats_get adds the unfolded balances, so
 * allocated_bytes is exact; allocated_peak is taken at the folds and at
 * slp_stats_get, so it may miss up to SLP__FOLD per thread. */
#define SLP__FOLD ((int_fast64_t)64 << 10)

static inline void slp__acct(slp_pool *p, struct slp__tcache *tc,
                             int_fast64_t da, int_fast64_t dr) {
  if (tc == NULL) {
    slp__add(&p->allocated, &p->allocated_peak, da);
    slp__add(&p->requested, NULL, dr);
    return;
  }
  int_fast64_t a = slp__load_relaxed(&tc->d_alloc) + da;
  int_fast64_t r = slp__load_relaxed(&tc->d_req) + dr;
  if (a >= SLP__FOLD || a <= -SLP__FOLD) {
    slp__add(&p->allocated, &p->allocated_peak, a);
    slp__add(&p->requested, NULL, r);
    a = r = 0;
  }
  slp__store_relaxed(&tc->d_alloc, a);
  slp__store_relaxed(&tc->d_req, r);
}

/* Held bytes likewise: added by the freeing thread, taken off by the thread
 * whose keep returns the block (into p->held directly when that thread has
 * no cache of p: the engine's). Every held free and every return wrote one
 * shared line before; with 16 request threads and an engine thread that
 * line was written ~6 M times a second (bench/RESULTS.md, issue 10). */
static inline void slp__held_acct(slp_pool *p, struct slp__tcache *tc,
                                  int_fast64_t d) {
  if (tc == NULL) {
    slp__add(&p->held, &p->held_peak, d);
    return;
  }
  int_fast64_t h = slp__load_relaxed(&tc->d_held) + d;
  if (h >= SLP__FOLD || h <= -SLP__FOLD) {
    slp__add(&p->held, &p->held_peak, h);
    h = 0;
  }
  slp__store_relaxed(&tc->d_held, h);
}

/* Exact allocated, requested and held bytes: the shared counters plus every
 * thread's balance. Takes the registry mutex. */
static void slp__allocated_exact(slp_pool *p, int_fast64_t *alloc,
                                 int_fast64_t *req, int_fast64_t *held) {
  slp__lock(&slp__reg_mu);
  int_fast64_t a = slp__load_relaxed(&p->allocated);
  int_fast64_t r = slp__load_relaxed(&p->requested);
  /* Acquire: pairs with the release decrement of a keep that listed a
   * block (slp__unuse): bytes seen returned are bytes seen listed. */
  int_fast64_t h = slp__load_acquire(&p->held);
  for (struct slp__tcache *tc = p->tcaches; tc != NULL; tc = tc->next) {
    a += slp__load_relaxed(&tc->d_alloc);
    r += slp__load_relaxed(&tc->d_req);
    h += slp__load_relaxed(&tc->d_held);
  }
  for (struct slp__inbox *in = slp__load_acquire(&p->inboxes); in != NULL;
       in = in->next_all)
    h += slp__load_acquire(&in->held);
  pthread_mutex_unlock(&slp__reg_mu);
  *alloc = a;
  if (req != NULL) *req = r;
  if (held != NULL) *held = h;
}

/* ---- Alloc and free -------------------------------------------------------- */

static inline int slp__register_stream(slp_pool *p, struct slp__tcache *tc,
                                       slc_stream *s);

static void slp__tc_keep(void *tc, slp_block *b) { slp__tc_push(tc, b); }

/* A dry cache: the class's shared list, one block for this alloc and up to
 * half the cache's room for the next ones (SHARED LISTS). Out of line: slp__take's
 * cache hit, inline in slp_alloc, saves no registers for it. */
__attribute__((noinline)) static slp_block *slp__take_shared(
    slp_pool *p, struct slp__tcache *tc, int cls) {
  return slp__shared_refill(p, cls, slp__class_cap(p, cls) / 2, slp__tc_keep,
                            tc);
}

/* A block of class cls for tc's thread: its cache, else the shared list. */
static inline slp_block *slp__take(slp_pool *p, struct slp__tcache *tc,
                                   int cls) {
  slp_block *b = tc->cls[cls].head;
  if (b == NULL) return slp__take_shared(p, tc, cls);
  tc->cls[cls].head = b->next;
  tc->cls[cls].n--;
  tc->bytes -= b->cap;
  return b;
}

/* Out of line and cold: its message buffer, inlined, gave slp_alloc a
 * stack canary on every call. */
__attribute__((noinline, cold)) static int slp__oom(slp_pool *p, size_t bytes,
                                                    CUresult cr) {
  const char *what = p->device < 0 ? "pinned host pool" : "device pool";
  if (cr != CUDA_ERROR_OUT_OF_MEMORY) {
    char msg[160];
    snprintf(msg, sizeof(msg), "a slab for a %zu-byte block (%s)", bytes,
             what);
    return slc_set_error_cu(p->c,
                            p->device < 0 ? "cuMemHostAlloc" : "cuMemAlloc",
                            cr, msg);
  }
  slp__bump(&p->ooms);
  int_fast64_t alloc, held;
  slp__allocated_exact(p, &alloc, NULL, &held);
  return slc_set_error(
      LDG_ENOMEM, "slp_alloc",
      "%zu bytes requested (%s); allocated %lld, cached "
      "%lld, held by pending work %lld, reserved %lld bytes (limit %zu)",
      bytes, what, (long long)alloc,
      (long long)slp__clamp(slp__load_relaxed(&p->reserved) - alloc - held),
      (long long)slp__clamp(held),
      (long long)slp__load_relaxed(&p->reserved), p->cfg.limit_bytes);
}

/* Synchronises the registered streams with pending work. */
static void slp__sync_holders(slp_pool *p) {
  slp__lock(&p->mu);
  size_t n = p->n_streams;
  slc_stream **v = n ? malloc(n * sizeof(*v)) : NULL;
  if (v == NULL) n = 0;
  for (size_t i = 0; i < n; i++) {
    v[i] = p->streams[i];
    slc_stream_ref(v[i]);
  }
  pthread_mutex_unlock(&p->mu);
  for (size_t i = 0; i < n; i++) {
    if (slc_stream_check_live(v[i]) == LDG_OK &&
        ldg_pending_count(slc_stream_ledger(v[i])) > 0)
      (void)slc_stream_synchronize(v[i]);
    slc_stream_unref(v[i]);
  }
  free(v);
}

/* THE PER-THREAD RETURN PATH. A thread that freed blocks under pending
 * work and finds its cache empty (and the shared list too, or
 * SLP__POLL_DRY held frees since its last poll) first releases its own
 * streams (the ones
 * it used with the pool lately, tc->seen), here: an idle one to the mark
 * of a cuStreamQuery that found it idle, a busy one to its completed
 * engine markers (slc_engine_poll_stream; AN IDLE STREAM IN ONE DRIVER
 * CALL, below): the keeps of its own work run on
 * it and put its blocks back in its own cache (slp__unuse), so block, ring
 * slot and counter lines stay on this core, and the work scales with the
 * request threads instead of resting on the one engine thread (whose keeps
 * still return what it reaches first, to the shared lists). It also
 * polls every SLP__POLL_HELD held frees, so that the thread, not the
 * engine thread (which polls a streaming stream every poll_max_us),
 * reaches most of its completed work first. No lock: the cache holds a
 * reference on each of these streams. Returns whether any stream was
 * released. */
#define SLP__POLL_HELD 32
/* A thread whose cache ran dry polls only after this many held frees
 * since its last poll, while the shared list of the class has blocks
 * (with an empty shared list it polls at once, before the slow path).
 * Issue 10: polling on any held free, a serving thread at one thread,
 * whose blocks the engine thread returns to the shared lists, polled on
 * about every request (a cuEventQuery and the engine's shared lines each
 * time) and ran its checks on the thread that limits the rate
 * (bench/RESULTS.md, "Where the request thread's extra CPU at 1 thread
 * goes"). */
#define SLP__POLL_DRY 8

/* AN IDLE STREAM IN ONE DRIVER CALL (issue 10, sixth session). The poll of
 * a stream through its markers (slc_engine_poll_stream) costs one
 * cuEventQuery for the oldest marker and, once none is pending, one
 * cuEventRecord for a tail marker that covers the rest: 2 driver calls
 * and ~5 000 instructions per own poll here (keeps included), and on the
 * H200 165-259 + 159-252 ns (wake_bench) every time a pool_2s thread's
 * cache (one 64 KiB slab, 16 blocks of 4 KiB) runs dry: 20-30 ns of a
 * 130-220 ns iteration. A stream used only through slp_record_use (the
 * block's second user: no device work at all) or whose work is done needs
 * neither: slc_stream_query (mark, cuStreamQuery, release to the mark when
 * the stream is idle) proves everything recorded before its mark complete
 * with one call, by the layer's rule for a synchronisation (issue, then
 * enqueue: an entry at or below the mark was issued before the query). So
 * the own poll asks that first; a stream found busy goes through its
 * markers (as before) and is not asked again for its next SLP__QUERY_SKIP
 * own polls, so that a stream that is always busy (the serving loop's)
 * pays one query in SLP__QUERY_SKIP + 1 polls, not one per poll.
 * SLP_OWN_POLL=marker (sl_pool.h, a tuning knob read at create) turns the
 * query off, for a side-by-side on the H200. */
#define SLP__QUERY_SKIP 8

static bool slp__poll_own(slp_pool *p, struct slp__tcache *tc) {
  if (tc->held_since == 0) return false;
  tc->held_since = 0;
  size_t released = 0;
  for (unsigned i = 0; i < 8; i++) {
    slc_stream *s = tc->seen[i].s;
    if (s == NULL) continue;
    if (slc_stream_check_live(s) != LDG_OK) { /* destroyed: let it go */
      tc->seen[i].s = NULL;
      slc_stream_unref(s);
      continue;
    }
    slc_stream_progress pr;
    size_t r = 0;
    /* The cache's reference holds s while it is read (no keep runs). */
    if (slc_stream_progress_get(s, &pr) != LDG_OK || !pr.engine_driven ||
        pr.pending == 0 || pr.engine_error != CUDA_SUCCESS)
      continue;
    /* A reference for the poll only: a keep it runs may evict s from seen
     * (two locked RMWs, so not for a stream with nothing pending). */
    slc_stream_ref(s);
    bool idle = false;
    if (p->own_query && tc->seen[i].query_skip == 0) {
      /* AN IDLE STREAM IN ONE DRIVER CALL (below). */
      if (slc_stream_query(s, &idle) != LDG_OK) idle = false;
      if (idle) r = pr.pending; /* released to the mark: all of it */
      else tc->seen[i].query_skip = SLP__QUERY_SKIP;
    } else if (tc->seen[i].query_skip != 0) {
      tc->seen[i].query_skip--;
    }
    if (!idle && slc_engine_poll_stream(s, &r) != LDG_OK) r = 0;
    slc_stream_unref(s);
    released += r;
  }
  return released != 0;
}

#define SLP__OOM_WAIT_ROUNDS 2000 /* 100 ms */

/* One retry at out of memory: a block that came back, else trim every
 * cache to 0 and carve a new slab. */
static CUresult slp__retry(slp_pool *p, struct slp__tcache *tc, int cls,
                           slc_stream *s, slp_block **out, bool *reused) {
  (void)slp__inboxes_flush(p);
  slp_block *b = slp__take(p, tc, cls);
  if (b != NULL) {
    *out = b;
    *reused = true;
    return CUDA_SUCCESS;
  }
  slp__lock(&p->trim_mu);
  slp__trim_locked(p, 0);
  pthread_mutex_unlock(&p->trim_mu);
  return slp__carve(p, tc, cls, s, out);
}

/* LARGE BLOCKS LEND ACROSS CLASSES (issue 14; since the sixth session only
 * classes that do not reclaim: pinned host blocks, device blocks above
 * 64 MiB). A class of 1 MiB or more
 * that has no block for this alloc takes a spare one of a larger class, at
 * most SLP__LEND_MAX times its size, before a new driver allocation: a
 * class whose blocks sit idle (the serving benchmark's 5.5 MiB MLP
 * activations during attention) serves another that peaks then (the
 * 2 MiB activations), so the pool's reserve comes nearer the peak of the
 * classes' sum than the sum of their peaks. The block keeps its class: its
 * capacity is the lender's, and slp_free returns it there. "Spare": the
 * lender keeps at least one more block cached (in this thread's
 * stream-ordered lists or its shared list), so that a lent block that
 * lives long (a key/value cache) does not make the lender's next alloc a
 * driver allocation; lending a lender's last block was measured worse
 * (bench/RESULTS.md, issue 14). Blocks come as an alloc of their own class
 * takes them: by stream order from this thread's list for s, or free from
 * the shared list (pool rules unchanged). Only on the way to a new slab:
 * the fast path is untouched. */
static slp_block *slp__borrow(slp_pool *p, struct slp__tcache *tc, int cls,
                              slc_stream *s) {
  size_t want = slp__class_size(cls);
  if (slp__small(want)) return NULL;
  for (int k = cls + 1;
       k < SLP__NCLASS && slp__class_size(k) <= SLP__LEND_MAX * want; k++) {
    unsigned listed = p->device >= 0 ? tc->so[k].n : 0;
    bool shared = !slp__shared_empty(p, k);
    slp_block *b = NULL;
    if (listed >= 2 || (listed == 1 && shared))
      b = slp__so_take(tc, k, s); /* ALLOC, home s, fresh as it says */
    if (b == NULL && shared) /* FREE: slp_alloc makes s its home */
      b = slp__shared_take_spare(p, k, listed);
    if (b != NULL) return b;
  }
  return NULL;
}

/* Out of line: inlined, its locals and calls made slp_alloc's common path
 * spill registers and keep a stack canary. */
__attribute__((noinline)) static CUresult slp__slow_alloc(
    slp_pool *p, struct slp__tcache *tc, int cls, slc_stream *s,
    slp_block **out, bool *reused) {
  CUresult cr = CUDA_ERROR_OUT_OF_MEMORY;
  /* Before a new slab: blocks returned for other threads (their inboxes;
   * a thread that frees and no longer allocates would otherwise make the
   * others grow the pool). */
  if (slp__inboxes_flush(p) != 0) {
    slp_block *b = slp__take(p, tc, cls);
    if (b != NULL) {
      *out = b;
      *reused = true;
      return CUDA_SUCCESS;
    }
  }
  /* Before a new slab: if blocks are held, let the engine release what
   * completed, here (as PyTorch processes its events on malloc). Without
   * this, a request rate above the engine thread's would grow the pool
   * without bound; with it, the allocating threads help. Non-blocking. */
  if ((slp__load_relaxed(&p->held) > 0 || slp__load_relaxed(&tc->d_held) > 0) &&
      slc_engine_poll(p->c, NULL) == LDG_OK) {
    slp_block *b = slp__take(p, tc, cls);
    if (b != NULL) {
      *out = b;
      *reused = true;
      return CUDA_SUCCESS;
    }
  }
  /* A device class that reclaims takes pages of cached blocks instead
   * (RECLAIM BEFORE GROW, after the carve below finds none). */
  slp_block *lent = slp__reclaims(p, cls) ? NULL : slp__borrow(p, tc, cls, s);
  if (lent != NULL) {
    *out = lent;
    *reused = true;
    return CUDA_SUCCESS;
  }
  for (int step = 0; step < 4; step++) {
    if (step > 0) slp__bump(&p->oom_retries);
    if (step == 1) {
      slp__tc_flush_all(p, tc);
    } else if (step == 2) {
      (void)slc_engine_poll(p->c, NULL);
    } else if (step == 3) {
      slp__sync_holders(p);
    }
    cr = step > 0 ? slp__retry(p, tc, cls, s, out, reused)
                  : slp__carve(p, tc, cls, s, out);
    if (cr != CUDA_ERROR_OUT_OF_MEMORY) return cr;
  }
  /* Last: keeps in flight on other threads. The sync of step 3 proves the
   * work complete, but a release on another thread (the engine thread's)
   * may have taken those entries first and still be returning their
   * blocks: the sync found nothing to run and the take came too early.
   * Wait for them, briefly (at most SLP__OOM_WAIT_ROUNDS x 50 us), while
   * bytes are held, a keep is returning a block or a shared list of the
   * class has blocks; a plain out of memory (nothing held) fails after one
   * more retry, without sleeping. */
  /* The state is read before each retry, and the wait ends only after a
   * retry that followed a quiet reading: no bytes held (acquire: a keep
   * lists its block, in the freeing thread's inbox or a shared list,
   * before its release decrement), no keep between FREE and listed
   * (p->returning) and the class's shared list empty — then that retry,
   * which flushes every inbox, saw every block the keeps gave back. (It
   * used to stop as soon as nothing was held, after a retry that had run
   * before the last keep's push into this thread's inbox: out of memory
   * with the block cached, 3-5 in 100 runs of sl_torch_thread_test's
   * oom_retry under load.) */
  for (int i = 0; i < SLP__OOM_WAIT_ROUNDS; i++) {
    int_fast64_t alloc, held;
    slp__allocated_exact(p, &alloc, NULL, &held);
    const bool quiet = held <= 0 &&
                       slp__load_acquire(&p->returning) == 0 &&
                       slp__shared_empty(p, cls);
    cr = slp__retry(p, tc, cls, s, out, reused);
    if (cr != CUDA_ERROR_OUT_OF_MEMORY || quiet) return cr;
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, NULL);
  }
  return cr;
}

/* A block taken for tc's thread becomes its caller's: its fields, ALLOC,
 * the thread's byte balance and counts. Both paths of slp_alloc. */
__attribute__((always_inline)) static inline void slp__alloc_finish(
    slp_pool *p, struct slp__tcache *tc, slp_block *b, size_t bytes,
    uint64_t stream_id, bool reused) {
  slp__unpoison(b);
  slp__store_relaxed(&b->bytes, bytes);
  slp__store_relaxed(&b->stream_id, stream_id);
  slp__store_relaxed(&b->alloc_ns, slp__now_ns(&tc->clock));
  /* Release: the fields above before the state other threads may read. A
   * block from a stream-ordered list is ALLOC already (slp__so_take). */
  if (!(slp__load_relaxed(&b->st) & SLP__ALLOC))
    slp__store_release(&b->st, SLP__ALLOC);
  slp__acct(p, tc, (int_fast64_t)b->cap, (int_fast64_t)bytes);
  slp__own_bump(&tc->n.allocs);
  if (reused) slp__own_bump(&tc->n.reuses);
}

/* slp_alloc past its cache hit: a stream-ordered block for s, this
 * thread's inbox, an own poll when dry, the shared lists, a new slab, out
 * of memory. Out of line (issue 10, sixth session, pool9): the slow
 * path's out-arguments kept `b` and `reused` on slp_alloc's stack, reloaded
 * at every step of its common path. */
__attribute__((noinline)) static int slp__alloc_miss(
    slp_pool *p, struct slp__tcache *tc, slc_stream *s, size_t bytes, int cls,
    uint64_t stream_id, slp_block **out) {
  /* (Tested here first: the call is ~20 instructions when the list is
   * empty, as in pool_2s, whose blocks are used on a second stream.) */
  slp_block *b =
      p->device >= 0 && tc->so[cls].n != 0 ? slp__so_take(tc, cls, s) : NULL;
  /* Blocks other threads returned for this one, before any poll (a load
   * of a line the engine thread writes, only when the class is empty). */
  if (b == NULL && tc->cls[cls].head == NULL &&
      slp__load_relaxed(&tc->inbox->head) != NULL)
    slp__inbox_drain(p, tc);
  /* Dry: poll own streams, unless few frees were held since the last poll
   * and the shared list has blocks (slp__take below; a peek, as its own). */
  if (b == NULL && tc->cls[cls].head == NULL &&
      (tc->held_since >= SLP__POLL_DRY ||
       slp__shared_empty(p, cls)) &&
      slp__poll_own(p, tc) && p->device >= 0)
    b = slp__so_take(tc, cls, s);
  if (b == NULL) {
    b = slp__take(p, tc, cls);
    if (b != NULL) {
      slp__store_relaxed(&b->fresh, false);
      b->home = s;
    }
  }
  bool reused = b != NULL;
  if (b == NULL) {
    CUresult cr = slp__slow_alloc(p, tc, cls, s, &b, &reused);
    if (cr != CUDA_SUCCESS) return slp__oom(p, bytes, cr);
    if (!(slp__load_relaxed(&b->st) & SLP__ALLOC)) { /* not stream-ordered */
      slp__store_relaxed(&b->fresh, false);
      b->home = s;
    }
  }
  slp__alloc_finish(p, tc, b, bytes, stream_id, reused);
  *out = b;
  return LDG_OK;
}

int slp_alloc(slp_pool *p, slc_stream *s, size_t bytes, slp_block **out) {
  static const char fn[] = "slp_alloc";
  if (p == NULL || s == NULL || out == NULL)
    return slc_set_error(LDG_EINVAL, fn, "NULL argument");
  if (bytes == 0)
    return slc_set_error(LDG_EINVAL, fn, "zero bytes (no block is empty)");
  if ((uint64_t)bytes > SLP_MAX_BYTES)
    return slc_set_error(LDG_EINVAL, fn,
                         "%zu bytes: more than the largest block (%llu)",
                         bytes, (unsigned long long)SLP_MAX_BYTES);
  int rc = slc_stream_check_live(s);
  if (rc != LDG_OK)
    return slc_set_error(rc, fn, "stream %llu is destroyed",
                         (unsigned long long)ldg_stream_id(
                             slc_stream_ledger(s)));
  if (p->device >= 0 && slc_stream_device(s) != p->device)
    return slc_set_error(LDG_EINVAL, fn,
                         "stream on device %d, pool of device %d",
                         slc_stream_device(s), p->device);
  struct slp__tcache *tc = slp__tc(p);
  if (tc == NULL) return slc_set_error(LDG_ENOMEM, fn, "thread cache");
  int slot = slp__register_stream(p, tc, s);
  /* Now: a poll below may evict the slot. */
  uint64_t stream_id = slot >= 0 ? tc->seen[slot].id
                                 : ldg_stream_id(slc_stream_ledger(s));
  int cls = slp__class_of(bytes);
  if (tc->held_since >= SLP__POLL_HELD) (void)slp__poll_own(p, tc);
  /* The cache hit, taken as slp__alloc_miss would take it: a block in the
   * thread's cache of the class and (device pools) no stream-ordered one,
   * which comes first there. */
  slp_block *b = tc->cls[cls].head;
  if (b == NULL || (p->device >= 0 && tc->so[cls].n != 0))
    return slp__alloc_miss(p, tc, s, bytes, cls, stream_id, out);
  tc->cls[cls].head = b->next;
  tc->cls[cls].n--;
  tc->bytes -= b->cap;
  slp__store_relaxed(&b->fresh, false);
  b->home = s;
  slp__alloc_finish(p, tc, b, bytes, stream_id, true);
  *out = b;
  return LDG_OK;
}

static int slp__check_block(const slp_block *b, const char *fn) {
  if (b == NULL) return slc_set_error(LDG_EINVAL, fn, "block is NULL");
  if (b->magic != SLP__MAGIC || b->pool == NULL)
    return slc_set_error(LDG_EINVAL, fn, "%p is not a block of a pool",
                         (const void *)b);
  return LDG_OK;
}

/* A freed block that goes to a list now: FREE (this thread's cache or the
 * shared list) or STREAM (tc's list for its home stream). Out of line: see
 * slp__free_with. */
__attribute__((noinline)) static int slp__free_list(slp_pool *p,
                                                    struct slp__tcache *tc,
                                                    slp_block *b,
                                                    uint_fast64_t nw) {
  if (nw == SLP__FREE) {
    slp__give_back(p, tc, b);
  } else { /* STREAM: stream order, so tc is not NULL */
    slp__own_bump(&tc->n.held_frees);
    slp__so_push(p, tc, b); /* for the next alloc on its home stream */
  }
  return LDG_OK;
}

/* slp_free of a checked block of p; tc: this thread's cache of p (NULL:
 * none, out of memory). Each call it makes is its last act (a tail call):
 * its common path, a held free (pool_2s: the block is used on another
 * stream), saves no register and keeps no frame (issue 10, sixth session,
 * pool9: 14 of its 91 instructions). */
__attribute__((always_inline)) static inline int slp__free_with(
    slp_pool *p, struct slp__tcache *tc, slp_block *b) {
  /* Stream order applies to device blocks whose pending uses are all on
   * their home stream (no host access can race with device memory). */
  bool stream_order = p->device >= 0 && tc != NULL;
  /* Where a keep on another thread returns it if it becomes held: before
   * the CAS below, which that keep's decrement reads. */
  slp__store_relaxed(&b->inbox, tc != NULL ? tc->inbox : NULL);
  /* Acquire: the history of the uses counted in the word we read. */
  uint_fast64_t old = slp__load_acquire(&b->st), nw;
  do {
    if (!(old & SLP__ALLOC))
      return slc_set_error(LDG_EINVAL, "slp_free",
                           "double free: block %#lx (%zu bytes) is not "
                           "allocated",
                           (unsigned long)b->addr, b->cap);
    uint_fast64_t pending = old & SLP__USES;
    if (pending == 0)
      nw = SLP__FREE;
    else if (stream_order && (old & SLP__XCOUNT) == 0)
      nw = pending | SLP__STREAM;
    else
      nw = pending;
    /* acq_rel pairs with slp__use and slp__unuse: a use or a keep that
     * changed the word since we read it makes this CAS fail and us decide
     * again; whichever of us comes second in the word's order sees the
     * other. */
  } while (!slp__cas_weak_acq_rel(&b->st, &old, nw));
  slp__acct(p, tc, -(int_fast64_t)b->cap,
            -(int_fast64_t)slp__load_relaxed(&b->bytes));
  if (tc != NULL) slp__own_bump(&tc->n.frees);
  if (nw == SLP__FREE || (nw & SLP__STREAM))
    return slp__free_list(p, tc, b, nw);
  if (tc != NULL) slp__own_bump(&tc->n.held_frees);
  /* Held: the last keep returns it (it may already have run, so held
   * may dip below zero for an instant: it is read clamped). */
  slp__held_acct(p, tc, (int_fast64_t)b->cap);
  if (tc != NULL) tc->held_since++;
  return LDG_OK;
}

/* slp_free on a thread without a cache of p yet: makes it. */
__attribute__((noinline)) static int slp__free_new_cache(slp_pool *p,
                                                         slp_block *b) {
  return slp__free_with(p, slp__tc(p), b);
}

int slp_free(slp_block *b) {
  int rc = slp__check_block(b, "slp_free");
  if (rc != LDG_OK) return rc;
  slp_pool *p = b->pool;
  struct slp__tcache *tc = slp__tc_peek(p);
  if (tc == NULL) return slp__free_new_cache(p, b);
  return slp__free_with(p, tc, b);
}

int slp_free_ptr(slp_pool *p, uintptr_t addr) {
  if (p == NULL) return slc_set_error(LDG_EINVAL, "slp_free", "pool is NULL");
  slp_block *b = slp_block_find(p, addr);
  if (b == NULL)
    return slc_set_error(LDG_EINVAL, "slp_free",
                         "no block of this pool starts at %#lx (a foreign "
                         "pointer)",
                         (unsigned long)addr);
  return slp_free(b);
}

CUdeviceptr slp_block_dptr(const slp_block *b) {
  return b != NULL && b->pool->device >= 0 ? (CUdeviceptr)b->addr : 0;
}
void *slp_block_host(const slp_block *b) {
  return b != NULL && b->pool->device < 0 ? (void *)b->addr : NULL;
}
size_t slp_block_size(const slp_block *b) {
  return b != NULL ? slp__load_relaxed(&((slp_block *)b)->bytes) : 0;
}
size_t slp_block_capacity(const slp_block *b) { return b ? b->cap : 0; }
uint64_t slp_block_id(const slp_block *b) { return b ? b->id : 0; }
slp_pool *slp_block_pool(const slp_block *b) { return b ? b->pool : NULL; }
slc_stream *slp_block_stream(const slp_block *b) { return b ? b->home : NULL; }
bool slp_block_allocated(const slp_block *b) {
  /* Acquire: pairs with slp_alloc's release store of ALLOC (home written
   * before it). */
  return b != NULL &&
         (slp__load_acquire(&((slp_block *)b)->st) & SLP__ALLOC) != 0;
}
bool slp_pool_is_host(const slp_pool *p) { return p != NULL && p->device < 0; }
int slp_pool_device(const slp_pool *p) { return p != NULL ? p->device : -1; }

/* ---- The stream registry (for targeted syncs at OOM) ------------------ */

/* The slow path of slp__register_stream: s is not among tc's latest
 * streams under the registry's current generation. Registers it (the pool
 * mutex) and gives it a slot, with the cache's reference; returns the
 * slot, or -1 if it could not be registered. */
__attribute__((noinline)) static int slp__register_stream_slow(
    slp_pool *p, struct slp__tcache *tc, slc_stream *s, uint64_t gen) {
  slp__lock(&p->mu);
  bool found = false;
  for (size_t i = 0; i < p->n_streams && !found; i++)
    found = p->streams[i] == s;
  if (!found) {
    if (p->n_streams == p->cap_streams) {
      size_t cap = p->cap_streams ? 2 * p->cap_streams : 16;
      slc_stream **v = realloc(p->streams, cap * sizeof(*v));
      if (v == NULL) {
        pthread_mutex_unlock(&p->mu);
        return -1; /* not registered: an OOM will not sync it */
      }
      p->streams = v;
      p->cap_streams = cap;
    }
    slc_stream_ref(s);
    p->streams[p->n_streams++] = s;
  }
  pthread_mutex_unlock(&p->mu);
  /* This cache's own reference (see seen): kept if s is listed already
   * under an older generation, else taken, the oldest entry's dropped. */
  for (unsigned i = 0; i < 8; i++)
    if (tc->seen[i].s == s) {
      tc->seen[i].gen = gen;
      tc->seen[i].id = ldg_stream_id(slc_stream_ledger(s));
      return (int)i;
    }
  slc_stream_ref(s);
  unsigned i = tc->seen_next;
  slc_stream *old = tc->seen[i].s;
  tc->seen[i].s = s;
  tc->seen[i].gen = gen;
  tc->seen[i].query_skip = 0;
  tc->seen[i].id = ldg_stream_id(slc_stream_ledger(s));
  tc->seen_next = (i + 1) % 8;
  if (old != NULL) slc_stream_unref(old); /* may run keeps: nothing half done */
  return (int)i;
}

/* Registers s (the OOM syncs) and makes it one of tc's 8 latest streams
 * (its own polls); returns its slot in tc->seen, or -1 if it could not be
 * registered. Inline, the slot found without a call: every alloc and use
 * asks (two calls of ~30 instructions per pool_2s iteration before). A
 * stream has at most one slot. */
static inline int slp__register_stream(slp_pool *p, struct slp__tcache *tc,
                                       slc_stream *s) {
  /* Acquire: pairs with slp__prune_streams's bump; a stale slot is
   * registered again. */
  uint64_t gen = slp__load_acquire(&p->streams_gen);
  for (unsigned i = 0; i < 8; i++)
    if (tc->seen[i].s == s) {
      if (tc->seen[i].gen == gen) return (int)i;
      break;
    }
  return slp__register_stream_slow(p, tc, s, gen);
}

/* ---- Operations on blocks ------------------------------------------------- */

#define SLP__MAX_OP_BLOCKS 64

struct slp__opkeep {
  ldg_keep user;
  size_t n;
  uint64_t cross; /* bit i: b[i] used on a stream other than its home */
  slp_block *b[];
};

static void slp__opkeep_run(void *ctx) {
  struct slp__opkeep *k = ctx;
  if (k->user.release != NULL) k->user.release(k->user.ctx);
  for (size_t i = 0; i < k->n; i++) slp__unuse(k->b[i], (k->cross >> i) & 1);
  free(k);
}

/* A use on another stream of a block handed out by stream order: the
 * previous owner's work may still be pending on the home stream, so s
 * waits for it (an event recorded on home, cuStreamWaitEvent on s). A home
 * stream destroyed meanwhile was synchronised: nothing to wait for. */
static int slp__order_fresh(slp_block *b, slc_stream *s) {
  /* Set by the owner's slp_alloc (slp__so_take) before the block reaches
   * any other thread, and kept until the next alloc: EVERY other stream
   * waits, not only the first (that stream's wait orders nothing on the
   * next one; the flag was cleared by the first use until issue 10's
   * test stream_reuse_two_other_streams, where a third stream read the
   * block before the previous owner's memset). The price: an event per
   * use elsewhere of a block reused by stream order while its previous
   * owner's work may be pending (pool_2s's blocks are never: a use on a
   * second stream makes the free hold them). */
  if (!slp__load_relaxed(&b->fresh)) return LDG_OK;
  slc_event *ev;
  int rc = slc_event_create(b->pool->c, slc_stream_device(b->home), &ev);
  if (rc == LDG_OK) {
    rc = slc_event_record(ev, b->home);
    if (rc == LDG_OK) rc = slc_stream_wait_event(s, ev);
    else if (rc == LDG_EDESTROYED) rc = LDG_OK;
    (void)slc_event_destroy(ev);
  }
  return rc;
}

/* An operation's hold: the caller's plus the blocks, and the keep. */
struct slp__xhold {
  slc_hold h;
  uint64_t ids_inline[8];
  ldg_range ranges_inline[8];
  void *owned;
  struct slp__opkeep *k;
  slp_block *const *blocks;
  size_t n, used;
  uint64_t cross;
};

static void slp__xhold_undo(struct slp__xhold *x) {
  for (size_t i = 0; i < x->used; i++)
    slp__unuse(x->blocks[i], (x->cross >> i) & 1);
  free(x->owned);
  free(x->k);
}

/* One block named by an operation on s: a block of a pool, the range
 * [off, +len) inside its requested bytes (len NULL: all of them; *len_out
 * the length), of s's device (device blocks). */
static int slp__check_named(const slp_block *b, slc_stream *s, size_t off,
                            const size_t *len, size_t *len_out,
                            const char *fn) {
  int rc = slp__check_block(b, fn);
  if (rc != LDG_OK) return rc;
  size_t have = slp__load_relaxed(&((slp_block *)b)->bytes);
  size_t l = len ? *len : have;
  if (off > have || l > have - off)
    return slc_set_error(LDG_EINVAL, fn,
                         "range [%zu, +%zu) outside the block's %zu bytes",
                         off, l, have);
  if (b->pool->device >= 0 && b->pool->device != slc_stream_device(s))
    return slc_set_error(LDG_EINVAL, fn,
                         "block of device %d, stream on device %d",
                         b->pool->device, slc_stream_device(s));
  *len_out = l;
  return LDG_OK;
}

/* Checks blocks (with their ranges, lens NULL: whole), counts a use on each
 * and builds the hold. On error nothing is counted. */
static int slp__xhold_make(struct slp__xhold *x, slc_stream *s,
                           const slc_hold *hold, slp_block *const *blocks,
                           const size_t *offs, const size_t *lens, size_t n,
                           const char *fn) {
  /* Not a memset of the whole struct (its inline arrays are ~200 bytes, a
   * quarter of a pool_2s iteration's instructions): each field is written
   * before it is read. */
  x->owned = NULL;
  x->k = NULL;
  x->used = 0;
  x->cross = 0;
  x->blocks = blocks;
  x->n = n;
  if (s == NULL) return slc_set_error(LDG_EINVAL, fn, "stream is NULL");
  if (n > SLP__MAX_OP_BLOCKS)
    return slc_set_error(LDG_EINVAL, fn, "%zu blocks (at most %d)", n,
                         SLP__MAX_OP_BLOCKS);
  if (n != 0 && blocks == NULL)
    return slc_set_error(LDG_EINVAL, fn, "blocks NULL with a count");
  slc_hold base = {{NULL, NULL}, NULL, 0, NULL, 0};
  if (hold != NULL) base = *hold;
  if ((base.n_vec != 0 && base.vec_ids == NULL) ||
      (base.n_ranges != 0 && base.ranges == NULL) || base.n_vec > 4096 ||
      base.n_ranges > 4096)
    return slc_set_error(LDG_EINVAL, fn, "bad hold");
  size_t n_hosts = 0;
  for (size_t i = 0; i < n; i++) {
    const slp_block *b = blocks[i];
    size_t len;
    int rc = slp__check_named(b, s, offs ? offs[i] : 0, lens ? &lens[i] : NULL,
                              &len, fn);
    if (rc != LDG_OK) return rc;
    n_hosts += b->pool->device < 0 && len > 0;
    if (b->home != s) x->cross |= UINT64_C(1) << i;
  }
  size_t n_ids = base.n_vec + n, n_ranges = base.n_ranges + n_hosts;
  uint64_t *ids = x->ids_inline;
  ldg_range *ranges = x->ranges_inline;
  if (n_ids > 8 || n_ranges > 8) {
    x->owned = malloc(n_ids * sizeof(uint64_t) + n_ranges * sizeof(ldg_range));
    if (x->owned == NULL) return slc_set_error(LDG_ENOMEM, fn, "hold");
    ranges = x->owned;
    ids = (uint64_t *)(ranges + n_ranges);
  }
  if (base.n_vec) memcpy(ids, base.vec_ids, base.n_vec * sizeof(uint64_t));
  if (base.n_ranges)
    memcpy(ranges, base.ranges, base.n_ranges * sizeof(ldg_range));
  size_t r = base.n_ranges;
  for (size_t i = 0; i < n; i++) {
    const slp_block *b = blocks[i];
    size_t off = offs ? offs[i] : 0;
    size_t len = lens ? lens[i] : slp__load_relaxed(&((slp_block *)b)->bytes);
    ids[base.n_vec + i] = b->id;
    if (b->pool->device < 0 && len > 0)
      ranges[r++] = (ldg_range){b->addr + off, len};
  }
  ldg_keep keep = base.keep;
  if (n == 1 && keep.release == NULL) {
    keep = (ldg_keep){slp__unuse_keep,
                      (void *)((uintptr_t)blocks[0] | (x->cross & 1))};
  } else if (n > 0) {
    x->k = malloc(sizeof(*x->k) + n * sizeof(slp_block *));
    if (x->k == NULL) {
      free(x->owned);
      x->owned = NULL;
      return slc_set_error(LDG_ENOMEM, fn, "keep");
    }
    x->k->user = base.keep;
    x->k->n = n;
    x->k->cross = x->cross;
    memcpy(x->k->b, blocks, n * sizeof(slp_block *));
    keep = (ldg_keep){slp__opkeep_run, x->k};
  }
  x->h = (slc_hold){keep, ids, n_ids, ranges, n_ranges};
  for (size_t i = 0; i < n; i++) {
    int rc = (x->cross >> i) & 1 ? slp__order_fresh(blocks[i], s) : LDG_OK;
    if (rc != LDG_OK) {
      free(x->owned);
      free(x->k);
      return rc;
    }
  }
  for (size_t i = 0; i < n; i++) {
    int rc = slp__use(blocks[i], (x->cross >> i) & 1, fn);
    if (rc != LDG_OK) {
      slp__xhold_undo(x);
      return rc;
    }
    x->used++;
  }
  struct slp__tcache *tc = n > 0 ? slp__tc(blocks[0]->pool) : NULL;
  if (tc != NULL) (void)slp__register_stream(blocks[0]->pool, tc, s);
  return LDG_OK;
}

/* After the layer's call: on success the ledger owns the keep. */
static int slp__xhold_done(struct slp__xhold *x, int rc) {
  if (rc != LDG_OK) {
    slp__xhold_undo(x);
    return rc;
  }
  free(x->owned);
  return LDG_OK;
}

int slp_copy_async(slc_stream *s, slp_block *dst, size_t dst_offset,
                   slp_block *src, size_t src_offset, size_t bytes,
                   const slc_hold *hold) {
  static const char fn[] = "slp_copy_async";
  slp_block *v[2] = {dst, src};
  size_t offs[2] = {dst_offset, src_offset}, lens[2] = {bytes, bytes};
  if (dst != NULL && src != NULL && dst->magic == SLP__MAGIC &&
      src->magic == SLP__MAGIC && dst->pool->device < 0 &&
      src->pool->device < 0)
    return slc_set_error(LDG_EINVAL, fn, "host to host: copy on the host");
  struct slp__xhold x;
  int rc = slp__xhold_make(&x, s, hold, v, offs, lens, dst == src ? 1 : 2, fn);
  if (rc != LDG_OK) return rc;
  if (src->pool->device < 0)
    rc = slc_copy_htod_async(s, dst->addr + dst_offset,
                             (const void *)(src->addr + src_offset), bytes,
                             &x.h);
  else if (dst->pool->device < 0)
    rc = slc_copy_dtoh_async(s, (void *)(dst->addr + dst_offset),
                             src->addr + src_offset, bytes, &x.h);
  else
    rc = slc_copy_dtod_async(s, dst->addr + dst_offset, src->addr + src_offset,
                             bytes, &x.h);
  return slp__xhold_done(&x, rc);
}

int slp_memset_async(slc_stream *s, slp_block *dst, size_t offset,
                     unsigned char value, size_t bytes, const slc_hold *hold) {
  static const char fn[] = "slp_memset_async";
  if (dst != NULL && dst->magic == SLP__MAGIC && dst->pool->device < 0)
    return slc_set_error(LDG_EINVAL, fn, "a host block: memset it on the host");
  struct slp__xhold x;
  int rc = slp__xhold_make(&x, s, hold, &dst, &offset, &bytes, 1, fn);
  if (rc != LDG_OK) return rc;
  rc = slc_memset_d8_async(s, dst->addr + offset, value, bytes, &x.h);
  return slp__xhold_done(&x, rc);
}

int slp_launch(slc_stream *s, CUfunction f, slc_dim3 grid, slc_dim3 block,
               unsigned shared_bytes, void **params,
               slp_block *const *blocks, size_t n_blocks,
               const slc_hold *hold) {
  struct slp__xhold x;
  int rc = slp__xhold_make(&x, s, hold, blocks, NULL, NULL, n_blocks,
                           "slp_launch");
  if (rc != LDG_OK) return rc;
  rc = slc_launch(s, f, grid, block, shared_bytes, params, &x.h);
  return slp__xhold_done(&x, rc);
}

/* slp_record_use of one block with no hold of the caller (a record_stream
 * hook, pool_2s): the checks, use and hold of slp__xhold_make without
 * building its general hold (231 of the request thread's ~1 150
 * instructions per pool_2s iteration, bench/RESULTS.md). */
static int slp__record_use_one(slc_stream *s, slp_block *b, const char *fn) {
  /* slp__check_named's checks in one test (its range is the whole block,
   * always inside), the detail and the error on the error path: a call
   * with a six-register frame was 45 of the request thread's ~1 030
   * instructions per pool_2s iteration (bench/RESULTS.md, issue 10, sixth
   * session, pool9). */
  int rc;
  if (b == NULL || b->magic != SLP__MAGIC || b->pool == NULL ||
      (b->pool->device >= 0 && b->pool->device != slc_stream_device(s))) {
    size_t l;
    if ((rc = slp__check_named(b, s, 0, NULL, &l, fn)) != LDG_OK) return rc;
  }
  size_t len = slp__load_relaxed(&b->bytes);
  bool cross = b->home != s;
  if (cross && (rc = slp__order_fresh(b, s)) != LDG_OK) return rc;
  /* slp__use's CAS inline (acq_rel, as there: pairs with slp_free's CAS
   * and the keeps' decrements); a block not allocated, a full count or a
   * lost race go to slp__use, which reads the word, decides and counts
   * again (a failed CAS wrote nothing). */
  uint_fast64_t d = cross ? 1 + SLP__XONE : 1;
  uint_fast64_t old = slp__load_relaxed(&b->st);
  if (!(old & SLP__ALLOC) || (old & SLP__COUNT) == SLP__COUNT ||
      !slp__cas_weak_acq_rel(&b->st, &old, old + d)) {
    if ((rc = slp__use(b, cross, fn)) != LDG_OK) return rc;
  }
  struct slp__tcache *tc = slp__tc(b->pool);
  if (tc != NULL) (void)slp__register_stream(b->pool, tc, s);
  uint64_t id = b->id;
  ldg_range r = {b->addr, len};
  bool host = b->pool->device < 0 && len > 0; /* host blocks: their bytes */
  slc_hold h = {{slp__unuse_keep, (void *)((uintptr_t)b | cross)},
                &id, 1, host ? &r : NULL, host};
  /* No marker (slp_record_use below says why). */
  rc = slc_stream_record_deferred(s, &h);
  if (rc != LDG_OK) slp__unuse(b, cross); /* nothing recorded */
  return rc;
}

int slp_record_use(slc_stream *s, slp_block *const *blocks, size_t n_blocks,
                   const slc_hold *hold) {
  if (s != NULL && n_blocks == 1 && blocks != NULL && hold == NULL)
    return slp__record_use_one(s, blocks[0], "slp_record_use");
  struct slp__xhold x;
  int rc = slp__xhold_make(&x, s, hold, blocks, NULL, NULL, n_blocks,
                           "slp_record_use");
  if (rc != LDG_OK) return rc;
  /* No marker of its own (issue 10): a stream used only through
   * record_use (a block's second user) needs one only when someone waits
   * for its blocks: this thread's own poll (slp__poll_own, which places
   * one when none is pending), another operation's, or the engine
   * thread's tail marker. One cuEventRecord per 8 uses was the request
   * thread's largest driver cost and, summed over 16 threads, the
   * driver's ceiling (bench/RESULTS.md, "What pool_2s pays per
   * iteration"). Later, never earlier: the ledger still holds the blocks
   * until s is known complete past this point. */
  rc = slc_stream_record_deferred(s, &x.h);
  return slp__xhold_done(&x, rc);
}

/* ---- Statistics and snapshot ------------------------------------------ */

int slp_stats_get(slp_pool *p, slp_stats *out) {
  if (p == NULL || out == NULL)
    return slc_set_error(LDG_EINVAL, "slp_stats_get", "NULL argument");
  memset(out, 0, sizeof(*out));
  struct slp__tcounts sum;
  memset(&sum, 0, sizeof(sum));
  slp__lock(&slp__reg_mu);
  slp__counts_add(&sum, &p->gone);
  for (struct slp__tcache *tc = p->tcaches; tc != NULL; tc = tc->next)
    slp__counts_add(&sum, &tc->n);
  pthread_mutex_unlock(&slp__reg_mu);
  out->allocs = slp__load_relaxed(&sum.allocs);
  out->frees = slp__load_relaxed(&sum.frees);
  out->reuses = slp__load_relaxed(&sum.reuses);
  out->held_frees = slp__load_relaxed(&sum.held_frees);
  int_fast64_t alloc, req, held;
  slp__allocated_exact(p, &alloc, &req, &held);
  slp__max(&p->allocated_peak, alloc);
  slp__max(&p->held_peak, held);
  out->allocated_bytes = slp__clamp(alloc);
  out->allocated_peak = slp__clamp(slp__load_relaxed(&p->allocated_peak));
  out->requested_bytes = slp__clamp(req);
  out->held_bytes = slp__clamp(held);
  out->held_peak = slp__clamp(slp__load_relaxed(&p->held_peak));
  out->reserved_bytes = slp__clamp(slp__load_relaxed(&p->reserved));
  out->reserved_peak = slp__clamp(slp__load_relaxed(&p->reserved_peak));
  out->cached_bytes =
      slp__clamp(slp__load_relaxed(&p->reserved) - alloc - held);
  out->slab_allocs = slp__load_relaxed(&p->slab_allocs);
  out->slab_frees = slp__load_relaxed(&p->slab_frees);
  out->oom_retries = slp__load_relaxed(&p->oom_retries);
  out->ooms = slp__load_relaxed(&p->ooms);
  out->trims = slp__load_relaxed(&p->trims);
  out->live_blocks = slp_snapshot(p, NULL, 0);
  out->peak_allocated = slp__clamp(slp__load_relaxed(&p->at_peak_allocated));
  out->peak_held = slp__clamp(slp__load_relaxed(&p->at_peak_held));
  out->peak_requested = slp__clamp(slp__load_relaxed(&p->at_peak_requested));
  return LDG_OK;
}

void slp_stats_reset_peaks(slp_pool *p) {
  if (p == NULL) return;
  int_fast64_t alloc, req, held;
  slp__allocated_exact(p, &alloc, &req, &held);
  slp__store_relaxed(&p->allocated_peak, alloc);
  slp__store_relaxed(&p->held_peak, held);
  slp__store_relaxed(&p->reserved_peak, slp__load_relaxed(&p->reserved));
  slp__store_relaxed(&p->at_peak_allocated, alloc);
  slp__store_relaxed(&p->at_peak_held, held);
  slp__store_relaxed(&p->at_peak_requested, req);
}

size_t slp_snapshot(slp_pool *p, slp_block_info *out, size_t cap) {
  if (p == NULL) return 0;
  size_t n = 0;
  struct timespec ts;
  uint64_t now = slp__now_ns(&ts);
  ldg_ledger *l = slc_context_ledger(p->c);
  slp__lock(&p->mu);
  for (struct slp__slab *sl = p->slabs; sl != NULL; sl = sl->next)
    for (size_t i = 0; i < sl->n; i++) {
      slp_block *b = &sl->blocks[i];
      uint_fast64_t st = slp__load_acquire(&b->st);
      /* Free, or listed with nothing pending: not live. The bare state 0
       * (a keep returning it, or block 0 of a slab being carved) is. */
      if ((st & SLP__FREE) || ((st & SLP__STREAM) && (st & SLP__USES) == 0))
        continue;
      if (n < cap && out != NULL) {
        slp_block_info *o = &out[n];
        ldg_holder h = {0};
        o->addr = b->addr;
        o->bytes = slp__load_relaxed(&b->bytes);
        o->capacity = b->cap;
        o->vec_id = b->id;
        o->stream_id = slp__load_relaxed(&b->stream_id);
        uint64_t t = slp__load_relaxed(&b->alloc_ns);
        o->age_ns = now > t ? now - t : 0;
        o->freed = !(st & SLP__ALLOC);
        o->pending = (unsigned)(st & SLP__COUNT);
        o->holders = ldg_vector_holders(l, b->id, &h, 1);
        o->holder_stream_id = o->holders ? h.stream_id : 0;
      }
      n++;
    }
  /* Zombies with work pending (RECLAIM BEFORE GROW): their pages are free
   * for s's carves, but the pool waits for them as for held blocks. */
  for (struct slp__slab *sl = p->zombies; sl != NULL; sl = sl->next) {
    slp_block *b = &sl->blocks[0];
    uint_fast64_t st = slp__load_acquire(&b->st);
    if (st == SLP__GONE) continue;
    if (n < cap && out != NULL) {
      slp_block_info *o = &out[n];
      memset(o, 0, sizeof(*o));
      o->addr = b->addr;
      o->capacity = b->cap;
      o->vec_id = b->id;
      o->freed = true;
      o->pending = (unsigned)(st & SLP__COUNT);
    }
    n++;
  }
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* Blocks an owner holds (ALLOC), not counting held ones. */
static size_t slp__count_allocated(slp_pool *p) {
  size_t n = 0;
  slp__lock(&p->mu);
  for (struct slp__slab *sl = p->slabs; sl != NULL; sl = sl->next)
    for (size_t i = 0; i < sl->n; i++)
      n += (slp__load_acquire(&sl->blocks[i].st) & SLP__ALLOC) != 0;
  pthread_mutex_unlock(&p->mu);
  return n;
}

/* ---- Create and destroy ------------------------------------------------ */

static int slp__create(slc_context *c, int device, const slp_config *cfg,
                       slp_pool **out) {
  static const char fn[] = "slp_pool_create";
  if (c == NULL || out == NULL)
    return slc_set_error(LDG_EINVAL, fn, "NULL argument");
  if (device >= slc_device_count(c))
    return slc_set_error(LDG_EINVAL, fn, "device %d of %d", device,
                         slc_device_count(c));
  /* SLP_OWN_POLL=query|marker (sl_pool.h, a tuning knob): read once here. */
  const char *op = getenv("SLP_OWN_POLL");
  bool own_query = true;
  if (op != NULL && *op != '\0' && strcmp(op, "query") != 0) {
    if (strcmp(op, "marker") != 0)
      return slc_set_error(LDG_EINVAL, fn,
                           "SLP_OWN_POLL=%s: expected query or marker", op);
    own_query = false;
  }
  slp_pool *p = calloc(1, sizeof(*p));
  if (p == NULL) return slc_set_error(LDG_ENOMEM, fn, NULL);
  p->own_query = own_query;
  for (int k = 0; k < SLP__NCLASS; k++)
    pthread_mutex_init(&p->shared[k].take_mu, NULL);
  p->c = c;
  p->device = device;
  if (cfg != NULL) p->cfg = *cfg;
  if (p->cfg.release_threshold == 0) p->cfg.release_threshold = (size_t)1 << 30;
  if (p->cfg.thread_cache_bytes == 0)
    p->cfg.thread_cache_bytes = (size_t)4 << 20;
  for (int k = 0; k < SLP__NCLASS; k++) {
    size_t n = p->cfg.thread_cache_bytes / 4 / slp__class_size(k);
    p->class_cap[k] = (uint16_t)(n > 256 ? 256 : n);
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->trim_mu, NULL);
  slp__lock(&slp__reg_mu);
  p->index = -1;
  for (int i = 0; i < SLP_MAX_POOLS && p->index < 0; i++)
    if (slp__pools[i] == NULL) p->index = i;
  if (p->index >= 0) {
    slp__pools[p->index] = p;
    p->uid = slp__next_uid++;
  }
  pthread_mutex_unlock(&slp__reg_mu);
  if (p->index < 0) {
    free(p);
    return slc_set_error(LDG_EINVAL, fn, "more than %d pools alive",
                         SLP_MAX_POOLS);
  }
  *out = p;
  return LDG_OK;
}

int slp_pool_create_device(slc_context *c, int device, const slp_config *cfg,
                           slp_pool **out) {
  if (device < 0)
    return slc_set_error(LDG_EINVAL, "slp_pool_create", "device %d", device);
  return slp__create(c, device, cfg, out);
}

int slp_pool_create_host(slc_context *c, const slp_config *cfg,
                         slp_pool **out) {
  return slp__create(c, -1, cfg, out);
}

int slp_pool_destroy(slp_pool *p) {
  if (p == NULL) return LDG_OK;
  static const char fn[] = "slp_pool_destroy";
  size_t owned = slp__count_allocated(p);
  if (owned != 0)
    return slc_set_error(LDG_EBUSY, fn, "%zu blocks still allocated", owned);
  /* Held blocks: their streams are synchronised; keeps that a concurrent
   * release (the engine's) is still running finish shortly. */
  if (slp_snapshot(p, NULL, 0) != 0) slp__sync_holders(p);
  for (int i = 0; i < 100000 && (slp_snapshot(p, NULL, 0) != 0 ||
                                 slp__load_acquire(&p->returning) != 0);
       i++) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  size_t live = slp_snapshot(p, NULL, 0);
  if (live != 0)
    return slc_set_error(LDG_EBUSY, fn,
                         "%zu blocks still held by pending work after "
                         "synchronising their streams for 10 s",
                         live);
  /* Every cache's stream references go now (the context may be destroyed
   * next); the caches themselves are freed by their threads. */
  size_t n_tc = 0, n_drop = 0;
  slp__lock(&slp__reg_mu);
  for (struct slp__tcache *tc = p->tcaches; tc != NULL; tc = tc->next) n_tc++;
  slc_stream **drop = malloc((n_tc + 1) * 8 * sizeof(*drop));
  for (struct slp__tcache *tc = p->tcaches; tc != NULL; tc = tc->next) {
    if (drop != NULL) n_drop += slp__tc_take_streams(tc, drop + n_drop);
    tc->pool = NULL; /* freed by its thread (exit, or its next pool) */
  }
  slp__pools[p->index] = NULL;
  pthread_mutex_unlock(&slp__reg_mu);
  slp__unref_all(drop, n_drop);
  free(drop);
  struct slp__tcache *mine = slp__tls[p->index];
  if (mine != NULL && mine->uid == p->uid) {
    slp__tls[p->index] = NULL;
    free(mine);
  }
  while (p->slabs != NULL) {
    struct slp__slab *sl = p->slabs;
    p->slabs = sl->next;
    if (sl->seg == NULL) slp__driver_free(p, sl->base, sl->bytes);
    free(sl->blocks);
    free(sl);
  }
  while (p->zombies != NULL) { /* every keep ran: snapshot saw none */
    struct slp__slab *sl = p->zombies;
    p->zombies = sl->next;
    free(sl->blocks);
    free(sl);
  }
  while (p->segs != NULL) {
    struct slp__seg *g = p->segs;
    p->segs = g->next;
    slp__seg_free(p, g);
  }
  for (int k = 0; k < SLP__NCLASS; k++)
    while (p->retired[k] != NULL) {
      struct slp__slab *sl = p->retired[k];
      p->retired[k] = sl->next;
      free(sl->blocks);
      free(sl);
    }
  for (struct slp__map *m = slp__load_relaxed(&p->map), *nx; m != NULL;
       m = nx) {
    nx = m->retired;
    free(m->slots);
    free(m);
  }
  for (struct slp__inbox *in = slp__load_relaxed(&p->inboxes), *nx;
       in != NULL; in = nx) {
    nx = in->next_all;
    free(in);
  }
  for (size_t i = 0; i < p->n_streams; i++) slc_stream_unref(p->streams[i]);
  free(p->streams);
  pthread_mutex_destroy(&p->trim_mu);
  for (int k = 0; k < SLP__NCLASS; k++)
    pthread_mutex_destroy(&p->shared[k].take_mu);
  pthread_mutex_destroy(&p->mu);
  free(p);
  return LDG_OK;
}
