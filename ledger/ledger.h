/*
 * streamledger — keep the operands of asynchronous GPU work alive until that
 * work is known to be complete.
 *
 * A copy or kernel launch enqueued on a device stream may still read or write
 * its operands after the call that issued it returned. The ledger records each
 * such operation as an entry, with a per-stream sequence number (ldg_seq,
 * starting at 1), that holds the operation's operands through a release
 * callback (ldg_keep). The keep is called exactly once, when completion is
 * known: the stream or its device was synchronised, an event recorded after
 * the work completed, or — transitively — a stream that waited on this one
 * completed past the wait.
 *
 * OWNERSHIP
 *   ldg_ledger_create gives the caller the ledger; ldg_ledger_destroy ends it.
 *   ldg_stream_create gives the caller one reference to a stream. Waits and
 *   device snapshots take references of their own. A stream's memory lives
 *   until its last reference is dropped; dropping the last reference of a
 *   stream never destroyed destroys it first.
 *   On LDG_OK, ldg_enqueue takes ownership of the keep; on any error the caller
 *   still owns it and it is never called.
 *
 * ORDERING RULES (the caller's side of the contract)
 *   1. Issue, then enqueue: record an operation only after it was issued to
 *      the device stream.
 *   2. Mark, then complete: read ldg_mark (or take ldg_device_marks) before
 *      recording the event, synchronising the stream or synchronising the
 *      device, and release to that mark afterwards — never to a mark read
 *      later. Releasing later than necessary is always allowed.
 *
 * CONCURRENCY
 *   Every function may be called from any thread, concurrently with any other
 *   function on the same or other handles, with three exceptions:
 *     - ldg_ledger_destroy: no other call on that ledger or its streams may
 *       run, before it returns or after (except ldg_stream_unref, see there);
 *     - ldg_release_all: other threads must not enqueue on that stream
 *       (it is the destroy path; with concurrent enqueuers use a mark);
 *     - a stream created with LDG_STREAM_SINGLE_ISSUER: the calls that
 *       record on it (ldg_enqueue, ldg_add_wait with it as the waiting
 *       stream) never run concurrently with each other (see
 *       ldg_stream_create).
 *   Threads need no registration: the library registers each calling thread
 *   with RCU on first use and unregisters it when the thread exits (and
 *   likewise takes and gives back one of the 32 tickets that let a thread
 *   reserve on a shared stream without a compare-and-swap loop: threads
 *   beyond 32 work the same, through that loop).
 *
 *   function                     may block  lock taken         runs callbacks
 *   ---------------------------  ---------  -----------------  --------------
 *   ldg_enqueue                  no (j)(k)  none               keep (see (a))
 *   ldg_mark                     no         none               no
 *   ldg_add_wait                 no (b)(j)(k) none             keeps (see (a))
 *   ldg_release, _release_all    no (b)(j)  none (f)           keeps
 *   queries (pending, holds_*,   no         none               no
 *     nonblocking_holding,
 *     has_nonblocking)
 *   ldg_device_marks             no         none               no (g)
 *   ldg_release_marks            no (b)(j)  none (f)           keeps
 *   ldg_marks_discard            no (b)(j)  none (f)           keeps (e)
 *   ldg_settle_vector            yes (c)    none (f)           drains, keeps
 *   ldg_stream_create            yes (d)    registry mutex     no
 *   ldg_stream_destroy           no (b)(j)(k) none (f)         keeps
 *   ldg_stream_unref             no (b)(j)(k) none (f)         keeps (e)
 *   ldg_stream_set_finalizer     no         none               no
 *   ldg_ledger_index_vectors     yes (d)    registry mutex     no
 *   ldg_ledger_create            yes (h)    reclaimer mutex    no
 *   ldg_ledger_destroy           yes        registry mutex,    keeps
 *                                           reclaimer mutex
 *   ldg_ledger_trim, ldg_quiesce yes (i)    reclaimer mutex    no
 *
 *   (a) Only when a release overtook this enqueue or wait (see ldg_enqueue
 *       and ldg_add_wait).
 *   (b) The ledger itself never blocks; the keeps it runs may.
 *   (c) It calls the drains, which synchronise device streams.
 *   (d) Briefly, on the registry's writer mutex; never while holding it
 *       across a callback. ldg_stream_create also starts the segment
 *       reclaimer as (h) does when none runs (in a child forked since).
 *   (e) Only when it drops the last reference of a stream never destroyed
 *       (for ldg_marks_discard: of a stream in the snapshot).
 *   (f) A call that destroys a stream (these may, through a fired wait or a
 *       dropped last reference) only tries the registry mutex, to unlink
 *       it, and never waits for it: a thread holding the mutex delays the
 *       unlink (another holder completes it), never the call.
 *   (g) Except when it fails with LDG_ENOMEM after taking references, one
 *       of which another thread made the last meanwhile: dropping it runs
 *       that stream's keeps (as ldg_marks_discard would).
 *   (h) Starts the process's segment reclaimer thread when none runs (the
 *       first ledger, or the first in a forked child): takes its mutex,
 *       which may wait for a batch in progress (one grace period).
 *   (i) Waits for grace periods (and the reclaimer's batch in progress).
 *   (j) A release that overtakes a publication on any stream (finds its
 *       seq's slot reserved, not yet published, after a short bounded
 *       spin) calls membarrier once for that slot (ledger/ring.c,
 *       PUBLICATION, and PUBLICATION ON A STREAM WITH ONE PUBLISHER; as
 *       ldg_stream_destroy of a single-issuer or owned stream always
 *       does): a system call that waits for
 *       inter-processor interrupts, not for another thread's progress.
 *       Not a block in this table's sense; it never waits for the
 *       enqueuer or another release. These calls release entries, so
 *       this applies to every call that does (a fired wait, a last
 *       unref), ldg_enqueue's release of an overtaken wait included.
 *   (k) May make one membarrier(2) system call
 *       (MEMBARRIER_CMD_PRIVATE_EXPEDITED): ldg_enqueue and ldg_add_wait
 *       at most once per stream, when they revoke the stream's owner (the
 *       first call to record on a default stream from a thread other than
 *       the one that recorded on it until then: ledger/owned.c, OWNED
 *       STREAMS); a destroy (ldg_stream_destroy, the last unref, a fired
 *       wait's) of a stream that is owned or single-issuer;
 *       ldg_ledger_destroy, one for up to 256 such streams (it destroys
 *       its streams in batches, one call for a batch). membarrier waits until every other running thread of
 *       the process has executed a memory barrier (an interrupt each); it
 *       never waits for another thread to make progress in its own code,
 *       and a thread stalled anywhere (in the ledger or not) does not delay
 *       it: hence "no".
 *   Finalizers (ldg_stream_set_finalizer) run wherever a stream's last
 *   reference is dropped: in the calls above that run keeps (a last unref,
 *   a fired wait, a settle's or snapshot's reference), and as (g) says.
 *
 *   Progress: no mutex is waited for on the paths of ldg_enqueue, ldg_mark,
 *   ldg_add_wait, ldg_release, ldg_release_marks, ldg_stream_destroy,
 *   ldg_stream_unref and the queries. A thread stalled anywhere in the
 *   ledger — inside a release, an enqueue, or holding the registry mutex
 *   in ldg_stream_create — never prevents another thread's enqueue or
 *   release from completing. (A stalled enqueuer delays the return of
 *   memory of its own stream, nothing else.)
 *
 *   The library's own thread: one per process, the segment reclaimer
 *   (ledger/reclaim.c), started by the first ldg_ledger_create. It takes
 *   the segments that enqueues and releases retire, in batches, waits one
 *   RCU grace period per batch (at most one per 2 ms) and gives them back
 *   to their ledger's pool. It runs no keeps or drains and never enters a
 *   read-side section. An enqueue or release that retires a segment pushes
 *   it on a lock-free list and, a few times per batch, wakes the reclaimer
 *   (a futex wake: a system call that never waits); it never takes the
 *   reclaimer's mutex. A forked child keeps retiring to the reclaimer's
 *   list, and its first ldg_ledger_create or ldg_stream_create starts its
 *   own reclaimer (README, "Fork": liburcu's call_rcu fork handlers are
 *   the program's to call).
 *
 * CALLBACKS
 *   keep.release and drain run on the thread that released or settled (for
 *   an enqueue or wait a release overtook, the thread of that ldg_enqueue or
 *   ldg_add_wait; for a stream destroyed by dropping its last reference, the
 *   thread that dropped it), never while the ledger holds a lock or is
 *   inside an RCU read-side section. They
 *   may call back into the ledger (any function, on any stream) and may block.
 *   Within one release of one stream, keeps run in sequence order. Each keep
 *   runs exactly once. A keep must not call ldg_ledger_destroy.
 *
 * ERRORS
 *   Actions return LDG_OK (0) or a negative LDG_E* code, predicates return
 *   bool, constructors return through an out-pointer. A call that returns an
 *   error changed nothing. ldg_strerror names every code.
 */
#ifndef STREAMLEDGER_LEDGER_H
#define STREAMLEDGER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger/version.h" /* STREAMLEDGER_VERSION_*, ldg_version */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ldg_ledger ldg_ledger; /* registry of live streams */
typedef struct ldg_stream ldg_stream; /* ledger side of one device stream */
typedef uint64_t ldg_seq;             /* per-stream; 0 = nothing yet */

/* What an entry holds alive. release(ctx) is called exactly once when the
 * work is known complete; a NULL release means there is nothing to drop. */
typedef struct ldg_keep {
  void (*release)(void *ctx);
  void *ctx;
} ldg_keep;

/* A host byte range [addr, addr + bytes) that an operation reads or writes. */
typedef struct ldg_range {
  uintptr_t addr;
  size_t bytes;
} ldg_range;

typedef struct ldg_marks ldg_marks; /* a device snapshot */

/* Synchronises the device stream behind a ledger stream: returns 0 once all
 * work issued to it has completed, anything else if that failed. */
typedef int (*ldg_drain_fn)(void *ctx);

#define LDG_STREAM_NONBLOCKING 1u
#define LDG_STREAM_SINGLE_ISSUER 2u /* opt-in: see ldg_stream_create */
/* Opt-out of owned reservation (see ldg_stream_create). 8, not 4: 4 stays
 * an invalid flag (tests check that an unknown bit is refused). */
#define LDG_STREAM_SHARED 8u

enum {
  LDG_OK = 0,
  LDG_EINVAL = -1,     /* bad argument: NULL handle, bad count, past a mark */
  LDG_ENOMEM = -2,     /* an allocation failed; nothing was recorded */
  LDG_EDESTROYED = -3, /* the stream was destroyed */
  LDG_EDRAIN = -4,     /* a drain callback reported failure */
  LDG_EBUSY = -5,      /* the ledger still holds it (used by cuda/) */
};

/* A short, static, human-readable name for a status code. Never NULL. */
const char *ldg_strerror(int code);

/* ---- Ledger ------------------------------------------------------------ */

/* Creates an empty ledger, and starts the process's segment reclaimer
 * thread if none runs (CONCURRENCY: (h); if the thread cannot be started,
 * segments are retired through liburcu's call_rcu instead and the next
 * create tries again). LDG_EINVAL if out is NULL, LDG_ENOMEM. */
int ldg_ledger_create(ldg_ledger **out);

/* Destroys every stream still live (releasing every keep still held, waits
 * firing), waits for deferred frees, and ends the ledger. No other call on the
 * ledger may run concurrently or later, except ldg_stream_unref on handles the
 * caller still holds: those stay valid (and destroyed) until unreferenced,
 * and may be dropped concurrently — a stream whose last reference another
 * thread is dropping is left to that thread (this call waits, without
 * holding any lock, until that thread has taken it off the registry).
 * NULL is ignored. May block. */
void ldg_ledger_destroy(ldg_ledger *l);

/* ---- Streams ----------------------------------------------------------- */

/* Creates the ledger side of a device stream on `device` (>= 0). flags is 0 or
 * LDG_STREAM_NONBLOCKING with at most one of LDG_STREAM_SINGLE_ISSUER and
 * LDG_STREAM_SHARED. drain
 * synchronises the device stream; it is required for non-blocking streams
 * (ldg_settle_vector calls it) and optional (may be NULL) otherwise. Gives
 * the caller one reference. Stream ids start at 1 and are never reused
 * within a ledger.
 *
 * LDG_STREAM_SINGLE_ISSUER (opt-in, for a stream that one thread at a time
 * issues work to). The caller promises: the calls that record on s —
 * ldg_enqueue(s, ...) and ldg_add_wait(s, a, ...) with s as the waiting
 * stream — never run concurrently with each other; each returns before the
 * next begins, ordered by happens-before (one thread, or threads handing the
 * stream over through a mutex, a queue or a join). Nothing else is
 * restricted: marks, releases, snapshots, queries, waits of other streams
 * on s, destroy and unref may come from any thread, concurrently with those
 * calls, as on any stream. What it buys: an enqueue takes its seq and
 * publishes its entry with plain stores instead of two locked
 * compare-and-swaps (an operation's enqueue then makes no locked
 * read-modify-write unless the vector index is on; a wait keeps one, its
 * count); in
 * exchange, destroying s (ldg_stream_destroy, a last unref,
 * ldg_ledger_destroy) makes one membarrier(2) system call, which interrupts
 * the process's other running threads for a full barrier (ledger/reserve.c,
 * SINGLE-ISSUER STREAMS), and so does a release of s that finds an entry
 * reserved but not yet published, once per such entry (CONCURRENCY, (j)).
 * Breaking the promise is undefined behaviour: two enqueues may take the
 * same seq, so a keep may never run or run twice, and the stream's ring may
 * be freed under a reader. Builds without NDEBUG catch two such calls that
 * overlap in time: the second prints "single-issuer stream" and the stream
 * id to stderr and aborts. (A keep or wait that an overtaken ldg_enqueue or
 * ldg_add_wait runs before returning may record on s: the call is done with
 * s by then.)
 *
 * Default streams (neither flag): owned by the first thread that records on
 * them, until another thread does. While one thread alone records on s,
 * its enqueues and waits take their seqs and publish their entries with
 * plain stores, as a single-issuer stream's do (and a release of s that
 * finds such an entry reserved, not yet published, calls membarrier once
 * for it: table note (j)), with no promise asked of the caller; the first
 * ldg_enqueue or ldg_add_wait on s from another thread revokes that for
 * good (one membarrier(2) call, table note (k)), and s then works as a
 * shared stream (a locked read-modify-write per enqueue). Destroying an
 * owned stream makes one membarrier(2) call, as for a single-issuer one
 * (ledger/owned.c, OWNED STREAMS). Where membarrier is unavailable every
 * default stream is shared from the start.
 * LDG_STREAM_SHARED: never owned (every enqueue a locked read-modify-write
 * of the stream's tail, which a caller may rely on as a full barrier; and
 * no membarrier at revocation or destroy, but where a release or destroy
 * overtakes a publication: table note (j)).
 * LDG_EINVAL: l or out NULL, device < 0, unknown flag bits, a non-blocking
 * stream without a drain, SINGLE_ISSUER with SHARED. LDG_ENOMEM. */
int ldg_stream_create(ldg_ledger *l, int device, unsigned flags,
                      ldg_drain_fn drain, void *drain_ctx, ldg_stream **out);

/* Called once the device stream has been drained: releases everything the
 * stream holds (in sequence order; its waits fire), marks it destroyed and
 * removes it from the registry. The caller's reference is not dropped.
 * An enqueue racing with destroy either lands before it (and is released by
 * it) or is refused with LDG_EDESTROYED.
 * LDG_EINVAL if s is NULL; LDG_EDESTROYED if it was already destroyed. */
int ldg_stream_destroy(ldg_stream *s);

/* Takes one more reference. s must hold at least one already. */
void ldg_stream_ref(ldg_stream *s);

/* Drops one reference; the last one destroys the stream if it was not
 * destroyed (running its keeps on this thread) and frees it after an RCU
 * grace period. NULL is ignored. */
void ldg_stream_unref(ldg_stream *s);

/* Registers finalizer.release(finalizer.ctx) to run exactly once, when the
 * last reference to s is dropped: after s was destroyed and every keep it
 * held ran, and after the last call of its drain returned (the drain runs
 * only under a reference). From then on the ledger never calls drain nor
 * reads drain_ctx, so the finalizer may free the drain's context. It runs on
 * the thread that dropped the last reference (an unref, or a release,
 * settle or snapshot dropping a wait's or its own reference; inside
 * ldg_ledger_destroy for streams it finalises), outside any lock and RCU
 * read-side section; like a keep it may call into the ledger (not on s) and
 * may block. Set it right after ldg_stream_create, before s is shared: it
 * must not race with the last unref. Replaces an earlier one; a NULL
 * release removes it. LDG_EINVAL if s is NULL. */
int ldg_stream_set_finalizer(ldg_stream *s, ldg_keep finalizer);

/* LDG_OK if s is live, LDG_EDESTROYED if destroyed, LDG_EINVAL if NULL. */
int ldg_stream_check_live(const ldg_stream *s);

/* Accessors; valid on destroyed streams too. s must not be NULL. */
uint64_t ldg_stream_id(const ldg_stream *s);
int ldg_stream_device(const ldg_stream *s);
bool ldg_stream_is_nonblocking(const ldg_stream *s);

/* ---- Recording and releasing -------------------------------------------- */

/* Records one operation that was already issued to the device stream. It gets
 * seq = ldg_mark(s) + 1 (written to *seq_out when seq_out is not NULL).
 * vec_ids: ids of the vectors the operation touches (n_vec of them; the array
 * may be NULL only when n_vec is 0). ranges: host byte ranges it reads or
 * writes (each bytes > 0 and not wrapping the address space; NULL only when
 * n_ranges is 0). Both arrays are copied.
 * On LDG_OK the ledger owns keep and will call it exactly once. Normally that
 * happens on the thread that releases the entry; if a release to a mark that
 * covers this seq ran while this enqueue was still publishing (possible only
 * when another thread read the mark concurrently), the keep runs on this
 * thread before ldg_enqueue returns.
 * On error nothing is recorded, the mark does not move and keep is not called
 * — with one exception that only a destroyed stream shows: an enqueue that
 * was under way when another thread destroyed the stream, and is refused with
 * LDG_EDESTROYED, may leave that stream's (frozen) mark one higher.
 * LDG_EINVAL: s NULL, NULL array with a non-zero count, a zero-byte or
 * wrapping range. LDG_EDESTROYED. LDG_ENOMEM. */
int ldg_enqueue(ldg_stream *s, ldg_keep keep, const uint64_t *vec_ids,
                size_t n_vec, const ldg_range *ranges, size_t n_ranges,
                ldg_seq *seq_out);

/* The sequence number of the last operation (or wait) enqueued on s so far:
 * what an event recorded now covers. 0 when nothing was enqueued. On a
 * destroyed stream, the last mark it had (see ldg_enqueue for the one way a
 * refused enqueue can still raise it). s must not be NULL. */
ldg_seq ldg_mark(const ldg_stream *s);

/* Records, after the device-side wait was issued, that b waits for a's work up
 * to a_upto (a mark of a). The wait is an operation on b and takes a sequence
 * number on b (written to *seq_out when not NULL): once b is released past it,
 * a is released up to a_upto, transitively. Until it fires, the wait holds a
 * reference to a: a stream some pending wait points at stays allocated (and,
 * if never destroyed, live) until the wait fires, and a cycle of pending
 * waits between streams whose callers dropped their references lasts until
 * one of them is released or destroyed, or the ledger is destroyed.
 * Like an enqueue, the wait normally fires on the thread that releases b
 * past it; if a release to a mark covering its seq ran while this call was
 * still publishing it (possible only when another thread read b's mark
 * concurrently), this call fires the wait itself before returning: a is
 * released up to a_upto, transitively, and a's keeps run on this thread —
 * and if the wait held a's last reference (the caller dropped its own
 * meanwhile), a is destroyed here too. So a caller must not hold a lock
 * that a keep of a (or of a stream a waits on) takes; those keeps may call
 * back into the ledger on any stream, a and b included.
 * A wait on a destroyed a is accepted and does nothing when it fires; b == a
 * is allowed, takes a seq, holds no reference and fires nothing (it is always
 * behind b's own mark). a_upto == 0 waits on nothing.
 * LDG_EINVAL: b or a NULL, a and b of different ledgers, a_upto > ldg_mark(a).
 * LDG_EDESTROYED: b destroyed. LDG_ENOMEM. */
int ldg_add_wait(ldg_stream *b, ldg_stream *a, ldg_seq a_upto,
                 ldg_seq *seq_out);

/* The work of s up to and including upto is known complete: every entry with
 * seq <= upto is released (its keep runs) and every wait with seq <= upto
 * fires, transitively, iteratively (chains of any length, cycles terminate).
 * Releasing to a mark at or below what was already released changes nothing.
 * Concurrent releases of one stream split the work between them: each entry
 * is released by exactly one of them, so when this call returns every entry
 * up to upto has been released by it, or is being released by a concurrent
 * release of the same stream (or by the enqueue it overtook; see
 * ldg_enqueue). With a single releaser per stream, all of them have run.
 * LDG_EINVAL: s NULL, upto > ldg_mark(s) (releases nothing).
 * LDG_EDESTROYED: s destroyed. */
int ldg_release(ldg_stream *s, ldg_seq upto);

/* Releases everything enqueued on s so far. Only for a stream no other thread
 * enqueues on (the destroy path); otherwise read a mark and release to it.
 * Errors as ldg_release. */
int ldg_release_all(ldg_stream *s);

/* ---- Device snapshots ---------------------------------------------------- */

/* Records (stream, mark) for every live stream of `device`, non-blocking ones
 * included, each with a reference. Take it before the context sync; after the
 * sync succeeded call ldg_release_marks, after it failed ldg_marks_discard.
 * LDG_EINVAL: l or out NULL, device < 0. LDG_ENOMEM. */
int ldg_device_marks(ldg_ledger *l, int device, ldg_marks **out);

/* Releases each stream of the snapshot to its mark (transitively; streams
 * destroyed since are skipped), drops the references and frees the snapshot.
 * Entries enqueued after the snapshot stay held. LDG_EINVAL if m is NULL. */
int ldg_release_marks(ldg_marks *m);

/* The sync failed: drops the references and frees the snapshot, releasing
 * nothing. NULL is ignored. */
void ldg_marks_discard(ldg_marks *m);

/* Number of streams in a snapshot (for diagnostics and tests). */
size_t ldg_marks_count(const ldg_marks *m);

/* ---- Queries ---------------------------------------------------------------
 * Queries take no lock and see a consistent answer for any moment at which no
 * enqueue or release is in flight; under concurrent updates each answer is
 * one that was true at some instant during the call.
 * During a release: the release first raises the stream's released mark to
 * upto, then takes the entries and runs their keeps in chunks. ldg_holds_*
 * and ldg_nonblocking_holding stop reporting an entry when the release
 * covering it begins (the work is known complete); ldg_pending_count counts
 * an operation until its release has taken it. So a keep (or another thread)
 * querying in the middle of a release sees none of its entries held, and a
 * pending count between what the release has not yet taken and zero.
 */

/* Operations of s enqueued and not yet released (waits are not counted).
 * O(1). Under concurrent enqueues it may count an operation being enqueued
 * (or a wait being added) early, never a pending one late. 0 for a
 * destroyed stream. s must not be NULL. */
size_t ldg_pending_count(const ldg_stream *s);

/* Operations (entries, not waits) whose keeps the calling thread has run
 * so far, over all ledgers: every release walk and every overtaken enqueue
 * (ldg_enqueue) on this thread counts the operations it took, whether
 * their keep is NULL or not. Thread-local, no atomics: a caller learns how
 * many keeps one of its calls ran (transitive releases included) as the
 * difference of two readings around it. */
uint64_t ldg_thread_ops_released(void);

/* Whether some live stream of l has a pending entry naming vec_id. Walks
 * the pending entries through the segments' summaries (ledger/summary.c:
 * segments they rule out are skipped, their slots unread), except on a
 * miss of the vector index when it is on (ldg_ledger_index_vectors): then
 * O(1). */
bool ldg_holds_vector(ldg_ledger *l, uint64_t vec_id);

/* One pending operation naming a vector (ldg_vector_holders). */
typedef struct ldg_holder {
  uint64_t stream_id; /* ldg_stream_id */
  int device;
  bool nonblocking;
  ldg_seq seq; /* the operation's sequence number on that stream */
} ldg_holder;

/* Who holds vec_id: every pending operation naming it on every live stream
 * of l, blocking ones included, streams in registry order and each
 * stream's operations in sequence order. Writes up to cap of them to out
 * and returns how many there are (may exceed cap). out may be NULL when
 * cap is 0; l NULL gives 0. (ledger/holders.c) */
size_t ldg_vector_holders(ldg_ledger *l, uint64_t vec_id, ldg_holder *out,
                          size_t cap);

/* Whether some pending entry's host range overlaps [addr, addr + bytes)
 * (half-open: adjacent ranges do not overlap; bytes == 0 never overlaps). */
bool ldg_holds_host_range(ldg_ledger *l, uintptr_t addr, size_t bytes);

/* The live non-blocking streams with pending work naming vec_id, each once.
 * Writes up to cap of them to out, each with a reference the caller drops
 * with ldg_stream_unref, and returns how many there are (may exceed cap).
 * out may be NULL when cap is 0. */
size_t ldg_nonblocking_holding(ldg_ledger *l, uint64_t vec_id,
                               ldg_stream **out, size_t cap);

/* Whether any live stream of l is non-blocking. */
bool ldg_has_nonblocking(ldg_ledger *l);

/* For the implicit paths (a synchronous copy, a free): for each live
 * non-blocking stream holding vec_id, take its mark, call its drain, and
 * release it to that mark. A drain that fails releases nothing for its stream;
 * the others are still settled, and LDG_EDRAIN is returned.
 * LDG_EINVAL if l is NULL. LDG_ENOMEM (nothing drained). May block. */
int ldg_settle_vector(ldg_ledger *l, uint64_t vec_id);

/* ---- Memory ----------------------------------------------------------------
 * A stream's ring grows with what is pending and gives segments back as they
 * are released: held memory is the pending span rounded up to segments (64
 * to 1024 entries of 64 bytes), plus the newest segment, plus what waits for
 * an RCU grace period, plus, per stream, at most one next segment linked
 * ahead (once the newest segment is half used, so that the enqueuers that
 * fill it find the ring grown, without a herd of them each allocating one
 * at its end) and at most one prepared by a release from a quarter on (so
 * that the enqueue that links it does not allocate), or kept by the
 * stream's owning thread from those it retired (ledger/segment.c, HOT
 * REUSE ON OWNED STREAMS): usually one of the two,
 * and neither with a pool limit of 0, which keeps nothing ahead of need.
 * A destroyed stream is still a stream until its last reference goes (a
 * caller's handle, an event's or wait's snapshot): its struct and the
 * segments it still has (the newest and the one linked ahead) are freed
 * then (after a grace period); ldg_stream_destroy gives back its prepared
 * one.
 * One bounded exception: retired segments past their
 * grace period go to a per-ledger pool that growing rings reuse (a steady
 * stream would otherwise allocate, zero and page-fault a fresh segment every
 * 64 entries). They come back in the segment reclaimer's batches (about one
 * per millisecond on a busy ledger), and the pool keeps twice what the last
 * batch brought, at least 1 MiB, at most the ledger's pool limit (32 MiB
 * unless set); ldg_ledger_trim empties it and a limit of 0 turns it off.
 */

/* Bytes the ledger holds for streams and entries (stream structs, ring
 * segments, pooled segments, out-of-line id and range arrays), including
 * memory retired but still waiting for an RCU grace period. */
size_t ldg_ledger_bytes(ldg_ledger *l);

/* Gives back the pooled segments, including those retired before the call
 * and still in their grace period, and every stream's prepared next
 * segment: they are freed after a grace period, so ldg_ledger_trim(l) then
 * ldg_quiesce() leaves nothing pooled or prepared (a release running
 * meanwhile, or one still preparing a segment when trim looks, may prepare
 * or park one again, as after any later release). Blocks (it
 * waits for pending RCU callbacks); may be called from a keep or drain.
 * NULL is ignored. */
void ldg_ledger_trim(ldg_ledger *l);

/* Turns on the vector index: from then on ldg_holds_vector,
 * ldg_nonblocking_holding and ldg_vector_holders answer a miss (no pending
 * entry names the id) in O(1) instead of walking every pending entry of
 * every stream, as long as the index has room: it is sized for about `ids`
 * distinct vector ids pending at once (8 buckets of 8 bytes per id, counted
 * in ldg_ledger_bytes, freed with the ledger). Past that, or when two ids
 * share a bucket, a query walks the rings as without the index: answers are
 * exact either way, only their cost changes. The price: every enqueue and
 * every release does one more atomic read-modify-write per vector id of
 * each entry (ledger/vindex.c). Only before the ledger's first stream is
 * created: LDG_EBUSY after that (or when it is on already). LDG_EINVAL: l
 * NULL, ids 0 or over 2^25. LDG_ENOMEM. */
int ldg_ledger_index_vectors(ldg_ledger *l, size_t ids);

/* Sets the most bytes of retired segments the pool keeps (default 32 MiB):
 * the bound of the limit in force, which follows the reclaimer's batches
 * (twice what the last one returned, at least 1 MiB or this bound if less;
 * ledger/pool.c). Any size is valid; SIZE_MAX lets the limit in force follow
 * the batches unbounded. A bound below what the pool holds gives back the
 * excess at once (whole size classes, largest first; freed after a grace
 * period, without waiting for it). 0 keeps none and empties the pool (as
 * ldg_ledger_trim, so it may block). LDG_EINVAL if l is NULL. */
int ldg_ledger_set_pool_limit(ldg_ledger *l, size_t bytes);

/* Waits until every free deferred to an RCU grace period so far has run
 * (the segment reclaimer's list included: it runs a batch itself, and the
 * batches that free what its batches took out of a pool whose limit in
 * force went down).
 * Blocks. May be called from a keep or drain (they run outside any RCU
 * read-side section). */
void ldg_quiesce(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_LEDGER_H */
