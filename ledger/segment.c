/*
 * The per-stream ring, part 4 of 7: segments — who may reclaim a slot and
 * when, growing the ring, advancing head and retiring segments. ring.c
 * opens with the layout and what each atomic publishes.
 *
 * WHO MAY RECLAIM A SLOT, AND WHEN
 *   A slot is resolved once, by whoever took its entry: the release that took
 *   a FULL slot, the enqueuer of a RETRACTED one or of one a release that
 *   asked gave back (ring.c, PUBLICATION). A wait's
 *   slot is resolved only when its firing has finished (see below). The
 *   resolver also puts the slot's state back to EMPTY — before counting it
 *   resolved, since after that the segment may be retired — (nobody else
 *   looks at it in this life), so a retired segment comes back to the pool clean and
 *   needs no zeroing — except a RETRACTED slot, which the destroyer may
 *   still be about to look at: its segment is marked dirty and freed. Each
 *   resolution adds to g->resolved; a segment is done when all of its seqs
 *   were handed out and resolved. Segments are retired strictly from the
 *   head: whoever completes a segment, or links a successor to a done tail
 *   segment, advances s->head over every done segment that has a successor
 *   and that tailseg no longer points at, one CAS per segment, and the CAS
 *   winner retires the segment (to the reclaimer's list, reclaim.c, which
 *   runs a grace period for it; or, if it is the stream's owner and no
 *   other thread's section may be reading the ring, parks it as the
 *   spare at once: HOT REUSE ON OWNED STREAMS): by then neither root (head,
 *   tailseg) reaches it, so no reader starting later can find it.
 *   Because "done" is stored before head is read, and head is moved before
 *   the next segment's "done" is read (all seq_cst), one of two racing
 *   threads always sees the other's segment done: no done segment is left
 *   behind; likewise an extender swings tailseg before advancing head, and
 *   an advancer reads tailseg after "done" (seq_cst). A segment's slots
 *   serve one run of seqs; it is freed (or pooled for reuse) only after
 *   a grace period, so lock-free readers (queries) that found it under
 *   rcu_read_lock may keep reading its immutable payload.
 *   Consequence used below: while a thread holds a taken-but-unresolved slot,
 *   its segment and every later one stay allocated, with or without RCU.
 *
 * GROWTH AND SHRINKING
 *   The ring grows by appending a segment: ahead of need, by the enqueuer
 *   whose seq reaches the newest segment's grow point (GROWING AHEAD
 *   below), or when the next seq falls past the newest one (the early
 *   grower stalled or out of memory; a single-issuer stream; the first
 *   segment): the enqueuer allocates it (at the end before reserving
 *   anything, so LDG_ENOMEM leaves no trace), CASes it onto tailseg->next
 *   and swings tailseg. A loser of that CAS retires its copy through a grace period
 *   like any retired segment: never linked, but it may have come from the
 *   pool, where a popper may still be reading its link (pool.c). No entry
 *   ever moves, so growing never races with publication or release. A new
 *   segment's size is between 64 and 1024 slots: at least the backlog
 *   (pending entries), doubled if the previous segment was used up within
 *   a millisecond and kept if within 50 ms (a busy stream retires 16 times
 *   fewer segments, which is what loads the reclaimer); a new
 *   stream starts with 8, taken from the pool's class 0 when it has one.
 *   It shrinks as segments are retired: memory held is the pending span
 *   rounded up to segments, plus the newest segment (at most 64 KiB), plus
 *   at most one segment linked ahead of it and at most one spare (prepared,
 *   or kept hot by the owner: usually one of the two, both after a last
 *   entry past the grow point on an owned stream), plus what waits for a
 *   grace period, plus the pools. Retired segments go to
 *   the ledger's pool (pool.c) after their grace period, in the
 *   reclaimer's next batch (reclaim.c: within a few milliseconds on a
 *   busy ledger); extending a ring, or creating a stream, pops one there
 *   before allocating.
 *
 * THE SPARE: THE NEXT SEGMENT, READY BEFORE IT IS NEEDED
 *   Allocating and zeroing a 64 KiB segment on memory another CPU freed takes
 *   7-8 us (issue 11's evidence, bench/RESULTS.md): done by the enqueuer
 *   that crosses a segment's end, it was the p99.9 of enqueue, and done
 *   inside a read-side section it made grace periods spin and send
 *   membarrier IPIs. So a release (ldg_release, ldg_release_all), once the
 *   newest segment is used half way to its grow point (tail past
 *   s->spare_at: GROWING AHEAD below), prepares the next
 *   one, of the size an extension would choose then (or a pooled one down
 *   to the backlog's size): pops it from the pool or allocates and zeroes
 *   it — outside any read-side section — and parks it in s->spare. The
 *   extender takes it, sets its base and links it as before; when there is
 *   no spare, or it is smaller than the backlog has grown to (it goes to
 *   the pool), the extender gets one itself (ldg__seg_get), after looking
 *   once more whether another extender linked one meanwhile. The spare is
 *   just where a clean segment comes from: it is never reachable from head
 *   or tailseg, and no reader can see it.
 *   One preparer per stream at a time. s->spare is NULL, CLAIMED or a
 *   parked segment. A release that finds NULL claims it with a CAS
 *   (NULL -> CLAIMED) before it pops or allocates anything; a release
 *   that finds CLAIMED or a segment, or loses the CAS, returns at once: no
 *   lock and no wait, and racing releases of a shared stream no longer
 *   each allocate a segment only to throw all but one away (issue 11: 24 079
 *   allocated for 5 094 taken). The claimer then parks its segment with a
 *   plain release store over CLAIMED (or, out of memory, stores NULL).
 *   That store overwrites nothing because only the claimer ever changes
 *   CLAIMED: takers (the extender, ldg_ledger_trim, which drops every
 *   parked spare, and ldg_stream_destroy, which drops its stream's) move a parked segment to NULL with a CAS and leave
 *   NULL and CLAIMED alone. (The owner's hot park, HOT REUSE below, is a
 *   CAS from NULL too: a claim and its park in one step.) So each segment parked is taken by exactly one
 *   thread, and none is lost: an extension that meets a claim gets its own
 *   segment, and the claimer's spare waits for the next extension. A
 *   taken spare that is not linked (set aside as too small, dropped by
 *   trim or destroy) is retired through a grace period like a loser's segment: it may
 *   have come from the pool, where a popper may still be reading its link.
 *   The stream's free, past its own grace period, hands its spare to the
 *   pool (or frees it); no claim is left then, since a preparer runs inside
 *   a release, on its caller's reference. Memory: at most one segment (64
 *   KiB) per stream on top of the newest, and only on streams past their
 *   first segment whose last release found the newest segment a quarter used;
 *   none with a pool limit of 0 (the ledger keeps nothing ahead of need).
 *   Model: ledger/model/spare.pml (claim, park, take, drop, pool, grace
 *   periods).
 *
 * GROWING AHEAD: ONE ENQUEUER LINKS THE NEXT SEGMENT, HALF WAY
 *   The herd (issue 11, measured on the H200 at 16 threads on one shared
 *   stream: 26 534 segments built for 4 552 retired). Holders reserve by
 *   fetch_add until the headroom comes down to the reserve (reserve.c), then
 *   all of them take the CAS path at the same moment, and every thread
 *   that finds no room calls ldg__ring_extend: the first takes the spare,
 *   the others pop or allocate and zero a segment each, one links and the
 *   rest retire theirs through a grace period. Each pays 10-30 us inside
 *   its enqueue: that was the p99.9.
 *   Now the ring grows before its end, by one enqueuer, while the others go
 *   on reserving. s->grow_at, on the enqueuers' line beside tail_end, is
 *   the newest segment's grow point, g->base + (g->size - LDG__FAST_R) / 2
 *   (half way to where the zone begins; growth segments only, at least
 *   2 x LDG__FAST_R slots: the first segment has none, grow_at stays at
 *   its end, which no add reaches, so the first extension is the CAS
 *   path's, as reserve.c's argument needs).
 *   - The trigger. The add-first path loads grow_at (acquire) before its
 *     fetch_add and compares its seq with it: one load and one compare.
 *     It also covers the zone (faa12): grow_at is at most tail_end -
 *     LDG__FAST_R once the first segment is outgrown (every write of
 *     grow_at follows, in its writer, a tail_end at least LDG__FAST_R
 *     higher, and the add follows the load), so a seq below grow_at is
 *     outside the zone. At or past grow_at: reserve.c's ldg__reserve_past
 *     reloads tail_end (seq_cst), disarms if the seq is in the zone, and
 *     calls ldg__ring_grow_early. The CAS path makes the same test after
 *     its CAS.
 *   - The claim. ldg__ring_grow_early reads tailseg g (pinned by the
 *     caller's unresolved seq: below the tail_end it read, so g is its
 *     segment or later) and goes on only if grow is g's grow point; then a
 *     CAS of grow_at from it to g's end - LDG__FAST_R (faa12: the start of
 *     g's zone, above the grow point; tail_end is at g's end already)
 *     claims the growth. grow_at only grows (the claim, and raises by CAS
 *     to the next grow point), so it holds each grow point once: one
 *     claimer per grow point; the threads that read it before the claim
 *     lose the CAS or fail the test, and every later enqueue reads the
 *     claimed value and takes the common path until its seq reaches g's
 *     zone (where, if the ring has not grown yet, it disarms).
 *   - The growth. The claimer calls ldg__ring_extend(s, g's end) under RCU:
 *     the spare, else the pool, else a fresh segment, linked after g by
 *     the CAS on g->next (or it helps an extender that was first), tailseg
 *     swung, tail_end raised, then grow_at raised to the new segment's grow
 *     point (ldg__raise_grow_at, also done by every extension and every
 *     helper: the claim is given back by whoever links). Out of memory:
 *     nothing linked, grow_at stays at g's end - LDG__FAST_R.
 *   - A stalled claimer stops nobody. The others reserve on in the
 *     headroom; if they reach the zone, the first to land there disarms,
 *     the CAS path extends at the end as before (and re-arms), and its raise of grow_at opens the new segment's
 *     grow point. The claimer, resumed, finds tailseg past g's end and
 *     only helps (raises). Only then can two threads build a segment for
 *     one end (one loses the link, retired as before).
 *   - Memory ahead: the segment linked after g is the only one past the
 *     newest in use. A link after g needs next == NULL at g (the CAS) and
 *     a thread that saw a seq in g: the claimer's seq >= g's grow point >=
 *     g->base, and an extender at the end saw tail within LDG__FAST_R + 1 of
 *     g's end. So when it is linked, no segment starts past the one after
 *     g, and the next seq goes to g or later: at most one segment (64 KiB)
 *     beyond the newest in use. The spare is prepared (THE SPARE, from a
 *     quarter of the newest segment, so that the claimer finds it) only
 *     while nothing is linked ahead (the preparer checks tailseg against
 *     the tail it read), so the two add up only where a grower that met
 *     a preparer's claim got its own segment and the spare is parked
 *     after, or where the owner keeps a segment it retires as the spare
 *     while one is linked ahead (HOT REUSE: its release_all after the
 *     last entry passed the grow point, tests/unit/memory_test.c
 *     full_pool_round): then one linked and one parked, as the spare's
 *     bound allowed before (one per stream on top of the newest).
 *   With a pool limit of 0 (nothing ahead of need: ledger.h) the claimer
 *   links nothing: the claim stays, and the ring grows at its end.
 *   Private streams pay the one load per enqueue and, once per segment, the
 *   claim CAS; single-issuer streams keep growing at the end (nobody races
 *   them). The invariant of RESERVING ON A SHARED STREAM (reserve.c) is
 *   untouched: the growth only raises tail_end (and the claim's value is
 *   the one fact (3) there needs).
 *   Model: ledger/model/ring.pml, CFG_FFA (and, for the check-then-add
 *   design before faa12, CFG_FF, CFG_FFR, CFG_FFD)
 *   (GROWAHEAD: the early growth racing fetch_adds, the CAS path's extension at the end and
 *   releases), asserting one claim per grow point, grow_at <= tail_end and,
 *   at every link, the next seq in the extended segment or later; the
 *   mutants BUG_GROW_NO_CLAIM (no claim: two early growers for one point)
 *   and BUG_CLAIM_AT_END (the claim at g's end: a seq in the zone takes
 *   the common path) fail; ring_common.pml's seg_of_reserved reads tailseg's prev as the C
 *   does (PROBE_PREV), pinned (TOUCH_PINNED). Tests: tests/torture/reserve_test.c (reserve-parked: a parked
 *   claimer and the extension at the end; grow-ahead; dense).
 *
 * HOT REUSE ON OWNED STREAMS: THE OWNER TAKES BACK WHAT IT UNLINKED
 *   Why (bench/RESULTS.md, "Ninth session"; issue 11). At 16 threads on
 *   private streams the ledger ran 10-20 % below 16 independent processes:
 *   every retired segment waited for a reclaimer batch and a grace period
 *   (>= 2 ms), came back cold or was freed and allocated again (37 % fresh
 *   at 16 threads, page faults), and each grace period interrupted every
 *   worker (membarrier). An unsafe experiment that reused the segment at
 *   once reached the 16-process figure. This makes that reuse safe where
 *   it is cheap to prove: on an owned stream (owned.c, OWNED STREAMS), by
 *   its owner, when no other thread may be reading the ring.
 *   The rule. When the thread that wins the CAS of head past g (ldg__ring_
 *   advance_head) reads its own token in s->owner, it then loads
 *   s->visitors (seq_cst) and s->owner again (seq_cst); if visitors is 0,
 *   the owner is still its token, g is clean (not dirty), not smaller
 *   than the segment after it (a growing ring gets its larger ones from
 *   the extension), the pool limit is not 0 and s not destroyed (hints,
 *   relaxed), it parks g as s's spare (THE SPARE: a CAS from NULL, as a
 *   preparer's claim and park in one step; a claim or a parked spare
 *   there: g is retired as before), without a grace period
 *   (ldg__seg_keep_hot). The next extension takes it and resets what the
 *   pool's pop and the link reset: resolved, next (the extension, for
 *   every spare taken), base, born_ns, prev and the summaries (the link).
 *   Its slots are EMPTY already: each resolver reset its slot before its
 *   add to g->resolved (WHO MAY RECLAIM A SLOT), the owner's seq_cst load
 *   of resolved == size acquired them (a release sequence), and the
 *   parking CAS (acq_rel) passes them to the taker's acquire.
 *   Visitors. s->visitors counts the read-side sections of threads other
 *   than the owner that may load a pointer to one of s's segments or
 *   slots (head, tailseg, next, prev, a slot): ldg__visit_begin
 *   (internal.h) before the section's first such load, ldg__visit_end
 *   (release) after its last use; ldg__ring_read_lock / _unlock are the
 *   RCU read lock with the count, for a section that takes its own. A section needs not count itself when it
 *   reads s->owner as its own token (the owner: its sections run in
 *   sequence with its reuse, see (e)) or SHARED (final: see (d)). Every
 *   such section of ledger/, and the decision:
 *     release.c  ldg__engine: a chunk (ldg__take_chunk: head, the walk,
 *                slots, adoption) and a popped frame's add (the advance
 *                reads head): counted. ldg__take_one: through
 *                ldg__resolve_one (internal.h): counted.
 *     summary.c  ldg__ring_visit (every query: holds_*, vector_holders,
 *                nonblocking_holding, through holders.c and registry.c),
 *                and the testing hook ldg__summary_lower_upto: counted.
 *     segment.c  ldg__ring_grow_early's extension, ldg__ring_prepare_spare
 *                (tailseg, a size), the inspection functions: counted.
 *                ldg__ring_init: the stream is not yet published, nothing
 *                to count (its section is for the pool's pop).
 *     reserve.h  ldg__ring_extend_outside (ring.c, reserve.c and owned.c
 *                call it) and ring.c's ldg__seg_of_reserved's walk
 *                from head: counted (an enqueuer that is not the owner
 *                reads SHARED, or PENDING and counts).
 *     registry.c ldg_ledger_trim's walk: no segment pointer is loaded but
 *                the spare, which ldg__ring_drop_spare takes by CAS (then
 *                it is the taker's alone, retired through a grace
 *                period); ldg_device_marks: marks only. Not counted.
 *     release.c  ldg__destroy's drop of the spare: as the trim's. Not
 *                counted.
 *     pool.c     ldg__pool_pop: segments in the pool, never a stream's
 *                linked or parked ones (a kept segment reaches the pool
 *                only through a grace period, or the stream's free,
 *                after its own). Not counted.
 *     holders.c  through ldg__ring_visit.
 *   (a) The handshake. Owner: W = its CAS of head, then R = its load of
 *   visitors, seq_cst both. Visitor: its increment (seq_cst RMW), then its
 *   first load of head or tailseg, seq_cst (ldg__seg_from_head,
 *   ldg__take_chunk, ldg__ring_advance_head, ldg__ring_extend, the query's
 *   walk, the preparer, the inspection functions; a plain load on x86). In the single order S, either R precedes the increment — then W
 *   precedes the visitor's load, which reads head past g (or later), and
 *   tailseg past g (the extender's swing preceded the owner's seq_cst
 *   check that tailseg is not g) — or the increment precedes R, and R
 *   reads it or a later value of visitors: 0 only if that visitor's
 *   decrement came before (every change of visitors is an RMW, each
 *   thread's +1 before its -1: a 0 at one point of the modification order
 *   means every section counted before it has left), and then R, an
 *   acquire reading the release sequence of that decrement, orders every
 *   read of the section before the reuse. From head a walk follows only
 *   links to later segments (next, the summaries' copy of next and jumps,
 *   which point forward), so a section that read head past g never
 *   reaches g. A visitor counted during the reuse blocks the next one.
 *   (b) Pointers held outside sections are pinned: a taken but unresolved
 *   slot (a release between chunks, a wait's frame, an adopted entry, an
 *   enqueuer's reserved seq) keeps its segment and every later one from
 *   being retired at all (WHO MAY RECLAIM A SLOT). g is done: nobody holds
 *   a slot of it.
 *   (c) g->prev of the segment after g is read only by
 *   ldg__seg_of_reserved, of tailseg, and only when the enqueuer's own
 *   unresolved seq is in that prev (pinned, so not g once g is done).
 *   (d) Who need not count. A revoker CASes owner to PENDING (seq_cst),
 *   then runs its heavy fence X (membarrier: a full barrier on every
 *   running thread, the caller's own a seq_cst fence; owned.c, OWNED
 *   STREAMS) before it touches a segment, and so does a helper that found
 *   PENDING; the installer stores SHARED (release) after X. An owner that
 *   reused g read its token in its second load (seq_cst), so that load
 *   precedes the PENDING CAS in S (it read a value before it), and W
 *   precedes X in S (for a helper: C11's rule for a seq_cst operation
 *   coherence-ordered before one that happens before a seq_cst fence). A
 *   thread whose loads follow X (the revoker, a helper) or a read of
 *   SHARED (acquire: X happens before them) cannot read head from before
 *   W: such a load would be coherence-ordered before W, and the fence
 *   rule (a seq_cst fence that happens before a load coherence-ordered
 *   before a seq_cst store precedes that store in S) would put X before W.
 *   So the owner's second load covers every revocation: an owner that
 *   reads PENDING or SHARED there retires g as before. PENDING read in
 *   ldg__visit_begin: counted (rare, and not covered by hb). Single-issuer
 *   and LDG_STREAM_SHARED streams start SHARED: nothing counts there, and
 *   nothing is reused hot.
 *   (e) The owner's own sections: sequential with its reuse, but a parked
 *   g may be taken at once by another thread's extension (a revoker's,
 *   which relinks it without a grace period) or by trim. So once the
 *   owner's advance has unlinked g (in ldg__seg_resolve, or at the end of
 *   ldg__ring_extend), the owner's code never touches g again: ldg__take_
 *   chunk loads g->next before its add that may complete g; the other
 *   callers (ldg__take_one, the engine's popped frame, an enqueuer's
 *   ldg__resolve_one, ldg__ring_extend's last advance) read nothing of the
 *   segment after it. Across a keep (outside sections) the owner holds
 *   only pinned pointers, as any release ((b)). The one owner: a token is
 *   claimed once per stream (UNCLAIMED -> token) and never comes back
 *   after a revocation.
 *   (f) The spare: parked from NULL only; exactly one taker (THE SPARE):
 *   the extension links it, one found too small and trim retire it
 *   through a grace period, the stream's free (after its own grace
 *   period, which began after the park: the park needs a live reference)
 *   hands it to the pool. So destroy, ldg_ledger_destroy and trim leak
 *   nothing, and LDG_EDESTROYED changes nothing here: a destroyer's walk
 *   is a visitor; a segment parked on a stream destroyed meanwhile is
 *   freed with it.
 *   (g) Other ways to g: the pool never held g since its pop (no popper
 *   reads its link); the reclaimer never sees it; the vector index holds
 *   ids, s->asked a seq, the registry streams.
 *   Memory: the spare's bound (one segment per stream, counted in
 *   ldg_ledger_bytes as any spare); none with a pool limit of 0.
 *   Cost: the owner, per segment, a relaxed load of owner and two seq_cst
 *   loads (plain on x86) and the parking CAS, where the reclaimer's push,
 *   batch, grace period and a pool pop or a fresh segment were. Other
 *   threads' sections on streams not SHARED: two RMWs on the visitors'
 *   line (which nothing else writes: not refs', which the owner's waits
 *   on s write); on SHARED ones a load.
 *   Model: ledger/model/hot_sb.pml (store buffers; the owner, a visitor, a
 *   revoker), asserting that no reader of g sees its reused contents;
 *   mutants BUG_HOT_NO_CHECK, _LATE_COUNT, _RELAXED_OWNER,
 *   _RELAXED_VISITOR, _NO_OWNER_CHECK fail. Tests: tests/torture/
 *   hot_test.c (a parked query, a revoker and a destroyer against the
 *   owner's reuse).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime (here, and in liburcu's headers on aarch64) */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

#define LDG__SEG_MIN 64u
#define LDG__SEG_MAX 1024u
_Static_assert(LDG__SEG_MIN >= 2 * LDG__FAST_R,
               "a growth segment's grow point is below its zone (GROWING "
               "AHEAD; reserve.c, RESERVING ON A SHARED STREAM)");

/* s->spare while a release prepares one: claimed, nothing parked yet. Only
 * its claimer changes it; takers leave it alone. Never dereferenced. */
static struct ldg__seg ldg__spare_claim;
#define LDG__SPARE_CLAIMED (&ldg__spare_claim)

/* ---- Segments ------------------------------------------------------------------ */

uint64_t ldg__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}


size_t ldg__seg_bytes(uint32_t size) {
  return sizeof(struct ldg__seg) + (size_t)size * sizeof(struct ldg__slot);
}

static struct ldg__seg *ldg__seg_alloc(ldg_ledger *l, ldg_seq base,
                                       uint32_t size) {
  size_t bytes = ldg__seg_bytes(size);
  struct ldg__seg *g = ldg__aligned_alloc(LDG__CACHE_LINE, bytes);
  if (g == NULL) return NULL;
  memset(g, 0, bytes); /* every slot EMPTY, every aux 0 */
  g->base = base;
  g->size = size;
  atomic_init(&g->resolved, 0);
  atomic_init(&g->next, NULL);
  g->ledger = l;
  ldg__ledger_ref(l);
  ldg__fetch_add_relaxed(&l->bytes, bytes); /* a statistic */
  return g;
}

/* Frees a segment nobody can reach any more. (Out-of-line payloads were
 * freed when their entries were taken.) */
void ldg__seg_destroy(struct ldg__seg *g) {
  ldg_ledger *l = g->ledger;
  ldg__fetch_sub_relaxed(&l->bytes, ldg__seg_bytes(g->size)); /* statistic */
  ldg__free(g);
  ldg__ledger_unref(l);
}

struct ldg__seg *ldg__seg_of_rcu(struct rcu_head *head) {
  return (struct ldg__seg *)((char *)head - offsetof(struct ldg__seg, rcu));
}

void ldg__seg_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg__seg_destroy(ldg__seg_of_rcu(head));
}

/* g was just unlinked from its stream (or never linked): after a grace
 * period it goes to its ledger's pool (or is freed), in the reclaimer's
 * next batch (reclaim.c). */
static void ldg__seg_retire(struct ldg__seg *g) {
  g->retired_ns = ldg__now_ns(); /* ours: unreachable; for reuse ages */
  ldg__reclaim_retire(g);
}

/* A zeroed segment for seqs from base: from the pool if one of that size is
 * there, else a new one. NULL if out of memory. Under RCU. */
static struct ldg__seg *ldg__seg_get(ldg_stream *s, ldg_seq base,
                                     uint32_t size) {
  struct ldg__seg *g = ldg__pool_pop(s, size);
  if (g == NULL) return ldg__seg_alloc(s->ledger, base, size);
  /* Every slot of a pooled segment is EMPTY already, its ask NONE:
   * whoever resolved it reset them (WHO MAY RECLAIM A SLOT; the ask: the
   * CAS that took it off, ring.c, PUBLICATION), and segments with a
   * retracted slot are never pooled. So no memset: that was 64 KiB at 1024 slots. */
  g->base = base;
  /* Relaxed: g is ours until the seq_cst CAS that links it (or, for a
   * first segment, the registry's release store) publishes it. */
  ldg__store_relaxed(&g->resolved, 0);
  ldg__store_relaxed(&g->next, (struct ldg__seg *)NULL);
  return g;
}

int ldg__ring_init(ldg_stream *s) {
  /* From the pool's smallest class when it has one: the first segments of
   * short-lived streams are what fills it. No visitor count (HOT REUSE): s
   * is not published yet, and the section is the pool pop's. */
  ldg__rcu_read_lock();
  struct ldg__seg *g = ldg__seg_get(s, 1, LDG__SEG_FIRST);
  ldg__rcu_read_unlock();
  if (g == NULL) return LDG_ENOMEM;
  g->sum.born_ns = ldg__now_ns();
  g->prev = NULL;
  g->prev_size = 0;
  g->prev_pubf_on = false;
  ldg__summary_reset(g, 0); /* published with the stream (registry.c) */
  atomic_init(&s->head, g);
  atomic_init(&s->tailseg, g);
  atomic_init(&s->tail, 0);
  atomic_init(&s->otail, 0);
  atomic_init(&s->contest, 0);
  atomic_init(&s->obase, 0);
  atomic_init(&s->tail_end, (ldg_seq)1 + LDG__SEG_FIRST);
  /* No early growth in the first segment (no seq reaches its end): the
   * first extension sets the first grow point. No add is made before that
   * extension (reserve.c, RESERVING ON A SHARED STREAM, fact (2)), so this
   * value is at most tail_end - LDG__FAST_R whenever an add reads it. */
  atomic_init(&s->grow_at, (ldg_seq)1 + LDG__SEG_FIRST);
  atomic_init(&s->fast_gen, 0); /* disarmed: the first segment is the CAS path's */
  atomic_init(&s->released, 0);
  atomic_init(&s->ops_released, 0);
  atomic_init(&s->waits_enqueued, 0);
  atomic_init(&s->spare, NULL);
  /* No spare for the first segment: short-lived streams would allocate
   * one each. The first extension sets it. */
  atomic_init(&s->spare_at, UINT64_MAX);
  return LDG_OK;
}

void ldg__ring_free_all(ldg_stream *s) {
  /* Past the stream's grace period, which began after the spare was
   * parked: no popper that saw it in the pool is still reading it, so it
   * may go back to the pool now (or be freed), as after its own. */
  struct ldg__seg *spare = ldg__load_acquire(&s->spare);
  /* Never LDG__SPARE_CLAIMED here: a preparer runs inside a release, on a
   * reference of its caller; a stream is freed only after its last
   * reference was dropped. */
  if (spare != NULL && spare != LDG__SPARE_CLAIMED) {
    spare->retired_ns = ldg__now_ns(); /* for reuse ages, as a retire */
    ldg__seg_pool_put(spare);
  }
  /* In the stream's free callback, after its grace period (every access
   * to the ring happens-before it); acquire as any walk. */
  struct ldg__seg *g = ldg__load_acquire(&s->head);
  while (g != NULL) {
    struct ldg__seg *next = ldg__load_acquire(&g->next);
    ldg__seg_destroy(g);
    g = next;
  }
}

/* The owner's retirement (HOT REUSE ON OWNED STREAMS): g was just unlinked
 * from head by our CAS, next is the segment after it. Parks g as s's spare,
 * for the next extension, without a grace period, if this thread owns s,
 * no other thread's section may be reading the ring, and g is worth
 * keeping; else the caller retires it. Under RCU. */
static bool ldg__seg_keep_hot(ldg_stream *s, struct ldg__seg *g,
                              const struct ldg__seg *next) {
  const uint64_t tok = ldg__own_tok;
  /* A filter (relaxed): only a thread that read its own token goes on; the
   * decision is the seq_cst load below. */
  if (ldg__load_relaxed(&s->owner) != tok) return false;
  /* Worth keeping: not smaller than the segment after it (a growing ring
   * wants larger ones: the extension sizes its own). Dirty: a slot was
   * retracted (the destroyer may still look at it); relaxed, its store is
   * sequenced before a resolution our seq_cst load of g->resolved read.
   * A pool limit of 0 keeps nothing ahead of need; destroyed: nothing
   * comes next (relaxed, both hints: safety does not depend on them). */
  if (g->size < next->size || ldg__load_relaxed(&g->dirty) ||
      ldg__load_relaxed(&s->ledger->pool_limit) == 0 ||
      ldg__load_relaxed(&s->destroyed))
    return false;
  LDG__HOOK(LDG__HOOK_HOT_CHECK, s);
  /* The handshake. Seq_cst, both, after our seq_cst CAS of head: a visitor
   * that counted itself after this load reads head past g; one counted
   * before it is seen here (or has left: its release decrement, read
   * here, orders its reads before our reuse). */
  if (ldg__load_seq_cst(&s->visitors) != 0) return false;
  /* Still ours: a revoker's seq_cst CAS to PENDING comes after this load in
   * S, and its heavy fence after that, before it touches a segment. */
  if (ldg__load_seq_cst(&s->owner) != tok) return false;
  /* Parked as a preparer parks one, from NULL only (a claim or a parked
   * spare: retire g as usual). acq_rel: the release half publishes g's
   * EMPTY slots (its resolvers' stores, which our load of resolved
   * acquired) to the taker's acquire; the extension resets its header. */
  struct ldg__seg *none = NULL;
  if (!ldg__cas_acq_rel(&s->spare, &none, g)) return false;
  /* Relaxed: written by the owner alone, read by tests. */
  ldg__store_relaxed(&s->hot_reused, ldg__load_relaxed(&s->hot_reused) + 1);
  LDG__HOOK(LDG__HOOK_HOT_REUSED, s);
  return true;
}

/* Retires every done segment at the head that has a successor and that
 * tailseg no longer names. Under RCU:
 * another thread may retire h between our load and our read of it. */
static void ldg__ring_advance_head(ldg_stream *s) {
  for (;;) {
    struct ldg__seg *h = ldg__load_seq_cst(&s->head);
    /* Pairs with the seq_cst add in ldg__seg_resolve: if we miss h's last
     * resolution, its resolver sees our head and retires h itself. */
    if (ldg__load_seq_cst(&h->resolved) != h->size) return;
    /* Pairs with the seq_cst CAS linking a successor in ldg__ring_extend. */
    struct ldg__seg *next = ldg__load_seq_cst(&h->next);
    if (next == NULL) return;
    /* h must be unreachable before it is retired: tailseg may still point at
     * it while an extender is between linking next and swinging tailseg.
     * That extender advances head itself after the swing (seq_cst both
     * ways: one of us sees the other). tailseg never moves back. */
    if (ldg__load_seq_cst(&s->tailseg) == h) return;
    LDG__HOOK(LDG__HOOK_HEAD_ADVANCE, s);
    if (ldg__cas_seq_cst(&s->head, &h, next) && !ldg__seg_keep_hot(s, h, next))
      ldg__seg_retire(h);
  }
}

/* Counts k more slots of g resolved. Under RCU. */
void ldg__seg_resolve(ldg_stream *s, struct ldg__seg *g, uint32_t k) {
  uint32_t before = ldg__fetch_add_seq_cst(&g->resolved, k);
  if (before + k == g->size) ldg__ring_advance_head(s);
}

/* ---- The spare: claim, park, take ------------------------------------------- */

/* Takes s's parked spare, if there is one: the caller owns it, unpublished
 * (never reachable from head or tailseg). NULL when none is parked, or while
 * a release is still preparing one (its claim stays; it parks the segment
 * afterwards, for a later extension). */
static struct ldg__seg *ldg__spare_take(ldg_stream *s) {
  /* Acquire: pairs with the preparer's release store (ldg__ring_prepare_
   * spare), after the spare's zeroed slots and header; a stale value only
   * makes the CAS fail and look again. */
  struct ldg__seg *g = ldg__load_acquire(&s->spare);
  for (;;) {
    if (g == NULL || g == LDG__SPARE_CLAIMED) return NULL;
    /* acq_rel (acquire needed, as above, also on failure, which reads the
     * value parked meanwhile; the release half publishes nothing): one
     * taker wins, the others see NULL, a claim or a later spare. ABA is
     * harmless: a taker reads g only after its CAS found g parked. */
    if (ldg__cas_acq_rel(&s->spare, &g, (struct ldg__seg *)NULL)) return g;
  }
}

/* ---- Growth ------------------------------------------------------------------------ */

/* A stream that used up its last segment within this time is busy: its next
 * segment doubles; within the slower bound it keeps the size. */
#define LDG__SEG_FAST_NS 1000000ull  /* 1 ms: over 64 k entries/s at 64 */
#define LDG__SEG_SLOW_NS 50000000ull /* 50 ms */

/* The least size for the next segment: the backlog, rounded up. */
static uint32_t ldg__backlog_seg_size(const ldg_stream *s, ldg_seq t) {
  ldg_seq r = ldg__load_relaxed(&s->released); /* a size heuristic only */
  ldg_seq backlog = t > r ? t - r : 0;
  uint32_t size = LDG__SEG_MIN;
  while (size < LDG__SEG_MAX && size < backlog) size <<= 1;
  return size;
}

/* The size of the segment to follow prev: at least the backlog (pending
 * entries), and larger for a stream that goes through segments fast, so that
 * busy streams retire 16 times fewer segments. */
static uint32_t ldg__next_seg_size(const ldg_stream *s,
                                   const struct ldg__seg *prev, ldg_seq t,
                                   uint64_t now) {
  uint32_t size = ldg__backlog_seg_size(s, t);
  uint64_t age = now - prev->sum.born_ns;
  uint32_t by_rate = age < LDG__SEG_FAST_NS   ? prev->size * 2
                     : age < LDG__SEG_SLOW_NS ? prev->size
                                              : 0;
  if (by_rate > LDG__SEG_MAX) by_rate = LDG__SEG_MAX;
  return by_rate > size ? by_rate : size;
}

/* Raises a mark that only grows (tail_end, grow_at) to at least to, with
 * order `success` on the CAS that does it. A failed CAS only retries
 * (relaxed): it publishes nothing. */
static inline void ldg__raise_mark(_Atomic ldg_seq *mark, ldg_seq to,
                                   memory_order success) {
  ldg_seq cur = ldg__load_relaxed(mark); /* the CAS checks it */
  while (cur < to && !atomic_compare_exchange_weak_explicit(
                         mark, &cur, to, success, memory_order_relaxed)) {
  }
}

/* Raises tail_end to at least end. */
static void ldg__raise_tail_end(ldg_stream *s, ldg_seq end) {
  /* Publishes that the segments below end are linked and reachable from
   * tailseg (release half; acquire in ldg__ring_reserve). Seq_cst: a step
   * of the order S of RESERVING ON A SHARED STREAM (reserve.c), which a
   * fast-path enqueuer's seq_cst reload of tail_end reads (no cost on x86:
   * a locked cmpxchg either way). */
  ldg__raise_mark(&s->tail_end, end, memory_order_seq_cst);
}

/* ---- Growing ahead ---------------------------------------------------------------- */

/* Where the ring grows past g (GROWING AHEAD): half way to where the
 * reserve begins. Growth segments only (at least 2 x LDG__FAST_R slots). */
static ldg_seq ldg__grow_point(const struct ldg__seg *g) {
  return g->base + (g->size - LDG__FAST_R) / 2;
}

/* Raises grow_at to g's grow point; g is tailseg (or was) and tail_end is
 * already at g's end, so grow_at stays at or below tail_end - LDG__FAST_R
 * (the grow point is at most g's end - LDG__FAST_R). Not for the
 * first segment, which the ring outgrows at its end (RESERVING ON A SHARED
 * STREAM, reserve.c: the first extension is the CAS path's). */
static void ldg__raise_grow_at(ldg_stream *s, const struct ldg__seg *g) {
  if (g->size < 2 * LDG__FAST_R) return;
  /* Release: pairs with the acquire of grow_at in ldg__ring_reserve and
   * ldg__ring_reserve_cas: a reader of the grow point then has tail_end at
   * least g's end, LDG__FAST_R above it (raised before this), before its
   * next step (fact (3) of RESERVING ON A SHARED STREAM, reserve.c). */
  ldg__raise_mark(&s->grow_at, ldg__grow_point(g), memory_order_release);
}

void ldg__ring_grow_early(ldg_stream *s, ldg_seq seq, ldg_seq grow) {
  /* tailseg: acquire, as in ldg__seg_of_reserved: the caller read a
   * tail_end above seq, raised after tailseg covered seq, so g is seq's
   * segment or a later one, pinned by seq (unresolved): no read lock. */
  struct ldg__seg *g = ldg__load_acquire(&s->tailseg);
  /* Still the newest segment's grow point, not claimed (a claim stores
   * g's end - LDG__FAST_R, a later raise the next grow point: grow_at only
   * grows, so it holds each grow point once). seq >= grow >= g->base: seq is in g, the
   * newest segment, so what is linked now is the one segment ahead. */
  if (g->size < 2 * LDG__FAST_R || grow != ldg__grow_point(g)) return;
  ldg_seq end = g->base + g->size;
  /* The claim: one early extender per grow point, no lock: a loser (and
   * every enqueue after the claim, which reads the claimed value) goes on
   * reserving. g's end - LDG__FAST_R, the start of g's zone, not g's end
   * (faa12): an add landing in the zone must take the slow path, by the
   * add-first path's one compare, to disarm (reserve.c, RESERVING ON A SHARED
   * STREAM, fact (3)); and it is above the grow point (g->size >= 2 x
   * LDG__FAST_R), so grow_at still holds each grow point once. tail_end is
   * at g's end already (grow_at was raised after it), so grow_at stays <=
   * tail_end - LDG__FAST_R. acq_rel: the release half publishes that, as
   * ldg__raise_grow_at; the acquire half orders nothing we rely on. */
  if (!ldg__cas_acq_rel(&s->grow_at, &grow, end - LDG__FAST_R)) return;
  /* A pool limit of 0 keeps nothing ahead of need (ledger.h, "Memory"):
   * the claim stays (no enqueue comes back here for this segment) and the
   * ring grows at its end. Relaxed: a setting, read as a hint as in
   * ldg__ring_prepare_spare. */
  if (ldg__load_relaxed(&s->ledger->pool_limit) == 0) return;
  LDG__HOOK(LDG__HOOK_GROW_CLAIMED, s);
  bool v = ldg__ring_read_lock(s); /* HOT REUSE */
  /* Links the spare, a pooled or a fresh segment after g (or helps an
   * extender at the end that was first), swings tailseg, raises tail_end
   * and then grow_at to the new segment's grow point: that raise gives the
   * claim back. Out of memory: nothing linked, grow_at left at the claim;
   * the extension at the end tries again and reports it. */
  (void)ldg__ring_extend(s, end);
  ldg__ring_read_unlock(s, v);
}

/* No seq below the tail_end we saw (end) is free: make sure a segment
 * follows and that tailseg and tail_end moved onto it. Under RCU (tailseg may
 * be retired under us once tail_end has moved past it). */
int ldg__ring_extend(ldg_stream *s, ldg_seq end) {
  /* tailseg: acquire pairs with the swinging CAS (release half), after
   * the segment's header was written; next: with the linking CAS.
   * tailseg seq_cst: a counted visitor's first load (HOT REUSE: a helper
   * of a revocation that read PENDING); a plain load on x86. */
  struct ldg__seg *g = ldg__load_seq_cst(&s->tailseg);
  if (g->base + g->size > end) { /* someone extended; help finish */
    ldg__raise_tail_end(s, g->base + g->size);
    ldg__raise_grow_at(s, g);
    return LDG_OK;
  }
  struct ldg__seg *next = ldg__load_acquire(&g->next);
  if (next == NULL) {
    uint64_t now = ldg__now_ns();
    ldg_seq t = ldg__tail_relaxed(s); /* a size heuristic only */
    struct ldg__seg *fresh = ldg__spare_take(s);
    if (fresh != NULL && fresh->size < ldg__backlog_seg_size(s, t)) {
      /* Smaller than the backlog has grown to: to the pool (which is per
       * size), and one large enough from there. */
      ldg__seg_retire(fresh);
      fresh = NULL;
    }
    if (fresh != NULL) {
      fresh->base = g->base + g->size;
      /* A spare may be a segment its owner kept (HOT REUSE), done and
       * still linked to its old successor. Relaxed: ours until the linking
       * CAS publishes it. */
      ldg__store_relaxed(&fresh->resolved, 0);
      ldg__store_relaxed(&fresh->next, (struct ldg__seg *)NULL);
    } else {
      /* Another extender may have linked one while we looked. */
      next = ldg__load_acquire(&g->next);
      if (next != NULL) goto link;
      fresh = ldg__seg_get(s, g->base + g->size,
                           ldg__next_seg_size(s, g, t, now));
      if (fresh == NULL) return LDG_ENOMEM;
    }
    fresh->sum.born_ns = now;
    fresh->prev = g; /* published by the linking CAS below */
    fresh->prev_size = g->size; /* with prev: fresh->base - g->base */
    fresh->prev_pubf_on = g->pubf_on; /* fixed for g's life (linked) */
    /* A new life for the queries' summaries (summary.c, REUSE AND
     * RETIREMENT): published by the linking CAS below. g's index was
     * written before g was linked (acquire of tailseg above). */
    ldg__summary_reset(fresh, g->sum.index + 1);
    LDG__HOOK(LDG__HOOK_SEGMENT_ALLOCATED, s);
    struct ldg__seg *expected = NULL;
    if (ldg__cas_seq_cst(&g->next, &expected, fresh)) {
      next = fresh;
      /* The queries' copy of next (summary.c, ldg__next), so that a walk
       * passing g to the segment grown ahead reads no header (WHAT A QUERY
       * TOUCHES). Release: fresh's header and reset summaries, written
       * before the CAS above, go with it (acquire in ldg__next). Every
       * writer of the copy stores this same value. */
      ldg__store_release(&g->sum.next, fresh);
      /* Where the next release starts preparing the spare: half way to
       * fresh's grow point (GROWING AHEAD), so that the early extender
       * finds it parked. Relaxed: a hint; a stale one prepares a little
       * early or late. */
      ldg__store_relaxed(&s->spare_at,
                         fresh->base + (fresh->size - LDG__FAST_R) / 4);
      LDG__HOOK(LDG__HOOK_EXTEND_LINKED, s);
    } else {
      /* Another enqueuer linked one first. Ours was never linked, but it
       * may have come from the pool, where a popper (under RCU) may still
       * be reading its link: it goes back through a grace period, like
       * any retired segment (pool.c), never freed at once. */
      ldg__seg_retire(fresh);
      next = expected;
    }
  }
link:;
  struct ldg__seg *seen = g;
  /* Publishes next's initialised header (acquire in ldg__seg_of_reserved);
   * seq_cst: pairs with ldg__ring_advance_head's check of tailseg. */
  ldg__cas_seq_cst(&s->tailseg, &seen, next);
  ldg__raise_tail_end(s, next->base + next->size);
  ldg__raise_grow_at(s, next); /* after tail_end: grow_at <= tail_end */
  /* g may be done already; it could not be retired while it was last. */
  ldg__ring_advance_head(s);
  return LDG_OK;
}

/* ---- The spare: preparing and dropping ---------------------------------------- */

void ldg__ring_prepare_spare(ldg_stream *s) {
  /* Two relaxed loads on the common path: nothing to do until the newest
   * segment is a quarter used, or while a spare waits or is being prepared. All
   * four are hints (relaxed): the claim below decides who prepares, and a
   * spare left on a stream destroyed meanwhile is freed with it. */
  ldg_seq t = ldg__tail_relaxed(s);
  if (t < ldg__load_relaxed(&s->spare_at) ||
      ldg__load_relaxed(&s->spare) != NULL ||
      ldg__load_relaxed(&s->destroyed) ||
      ldg__load_relaxed(&s->ledger->pool_limit) == 0) /* keep nothing ahead */
    return;
  /* The claim: one preparer per stream at a time, before any allocation
   * (racing releases of a shared stream each allocated one, and all but
   * one were thrown away). A CAS, not a lock: a loser returns at once.
   * acq_rel where relaxed would do: the claim publishes nothing (the
   * segment is published by the release store below). */
  struct ldg__seg *none = NULL;
  if (!ldg__cas_acq_rel(&s->spare, &none, LDG__SPARE_CLAIMED)) return;
  uint64_t now = ldg__now_ns();
  bool v = ldg__ring_read_lock(s); /* tailseg may be retired under us */
  /* Acquire: pairs with the swinging CAS, after the header we read.
   * Seq_cst: a visitor's first load after it counted itself (HOT REUSE). */
  struct ldg__seg *g = ldg__load_seq_cst(&s->tailseg);
  if (g->base > t) {
    /* A segment is linked ahead already (GROWING AHEAD; spare_at, a hint,
     * was stale): a spare now would be a second one ahead. Give the claim
     * back (relaxed: publishes nothing). */
    ldg__ring_read_unlock(s, v);
    ldg__store_relaxed(&s->spare, (struct ldg__seg *)NULL);
    return;
  }
  /* The size an extension now would choose; a pooled one down to the
   * backlog's size will do (pooled memory before fresh: the rate part of
   * the size is only a preference). */
  uint32_t size = ldg__next_seg_size(s, g, t, now);
  uint32_t least = ldg__backlog_seg_size(s, t);
  struct ldg__seg *spare = NULL;
  for (uint32_t z = size; spare == NULL && z >= least; z >>= 1)
    spare = ldg__pool_pop(s, z);
  ldg__ring_read_unlock(s, v);
  /* A popped segment's resolved and next: reset by the extension that
   * takes it, as a kept one's (HOT REUSE). */
  if (spare == NULL) {
    /* Outside the read-side section: this is the slow part. Out of memory
     * is no error here: the extender will try (and report) itself. */
    spare = ldg__seg_alloc(s->ledger, 0, size);
    if (spare == NULL) {
      /* Give the claim back. Relaxed: publishes nothing. */
      ldg__store_relaxed(&s->spare, (struct ldg__seg *)NULL);
      return;
    }
  }
  LDG__HOOK(LDG__HOOK_SPARE_READY, s);
  /* Park it. A plain store: while claimed, nobody else writes s->spare
   * (takers and trim leave a claim alone). Release: the zeroed slots and
   * header before the spare can be taken (acquire in ldg__spare_take). */
  ldg__store_release(&s->spare, spare);
}

void ldg__ring_drop_spare(ldg_stream *s) {
  /* A spare still being prepared is left to its preparer (parked after
   * this trim or destroy: as if prepared by a release after it). */
  struct ldg__seg *g = ldg__spare_take(s);
  if (g == NULL) return;
  /* It may have come from the pool, where a popper may still be reading
   * its link: through a grace period, like a loser's segment. */
  ldg__seg_retire(g);
  LDG__HOOK(LDG__HOOK_SPARE_DROPPED, s);
}

/* ---- Inspection (ledger_testing.h) ------------------------------------------ */

bool ldg__ring_tailseg_reachable(ldg_stream *s) {
  bool found = false;
  bool v = ldg__ring_read_lock(s); /* HOT REUSE */
  /* Seq_cst where a visitor's first loads are (HOT REUSE); acquire would
   * do otherwise, as ldg__ring_extend and ldg__take_chunk. */
  struct ldg__seg *t = ldg__load_seq_cst(&s->tailseg);
  for (struct ldg__seg *g = ldg__load_seq_cst(&s->head); g != NULL && !found;
       g = ldg__load_acquire(&g->next)) {
    found = g == t;
  }
  ldg__ring_read_unlock(s, v);
  return found;
}

uint64_t ldg__ring_grow_at(ldg_stream *s) {
  return ldg__load_acquire(&s->grow_at); /* as in ldg__ring_reserve */
}

uint64_t ldg__ring_tail_base(ldg_stream *s) {
  bool v = ldg__ring_read_lock(s); /* tailseg may be retired under a racing reader */
  /* Seq_cst: a visitor's first load (HOT REUSE). */
  uint64_t base = ldg__load_seq_cst(&s->tailseg)->base;
  ldg__ring_read_unlock(s, v);
  return base;
}

unsigned ldg__ring_segments_ahead(ldg_stream *s) {
  /* The last two linked segments' bases: past the mark, only they can be. */
  ldg_seq last = 0, before = 0;
  bool v = ldg__ring_read_lock(s); /* HOT REUSE */
  /* head seq_cst: a visitor's first load (HOT REUSE); next acquire, as
   * ldg__ring_extend and ldg__take_chunk. */
  for (struct ldg__seg *g = ldg__load_seq_cst(&s->head); g != NULL;
       g = ldg__load_acquire(&g->next)) {
    before = last;
    last = g->base;
  }
  ldg__ring_read_unlock(s, v);
  /* After the walk (seq_cst, as ldg_mark's readers): a later tail. */
  ldg_seq t = ldg__tail_seq_cst(s);
  return (unsigned)(last > t) + (unsigned)(before > t);
}

/* Bytes of s's parked spare, 0 when none or claimed. In a read-side
 * section, at a quiet moment (nobody takes it meanwhile). */
static size_t ldg__parked_spare_bytes(ldg_stream *s) {
  /* Acquire: pairs with the parking store or CAS (THE SPARE), so its size
   * is read as parked. */
  struct ldg__seg *p = ldg__load_acquire(&s->spare);
  return p != NULL && p != LDG__SPARE_CLAIMED ? ldg__seg_bytes(p->size) : 0;
}

size_t ldg__ring_bytes(ldg_stream *s) {
  size_t bytes = 0;
  bool v = ldg__ring_read_lock(s); /* HOT REUSE */
  /* As ldg__ring_segments_ahead. */
  for (struct ldg__seg *g = ldg__load_seq_cst(&s->head); g != NULL;
       g = ldg__load_acquire(&g->next)) {
    bytes += ldg__seg_bytes(g->size);
  }
  bytes += ldg__parked_spare_bytes(s);
  ldg__ring_read_unlock(s, v);
  return bytes;
}

size_t ldg__ring_spare_bytes(ldg_stream *s) {
  bool v = ldg__ring_read_lock(s); /* HOT REUSE: an inspection function */
  size_t bytes = ldg__parked_spare_bytes(s);
  ldg__ring_read_unlock(s, v);
  return bytes;
}

uint64_t ldg__ring_hot_reused(ldg_stream *s) {
  return ldg__load_relaxed(&s->hot_reused); /* a statistic */
}

uint64_t ldg__ring_visitors(ldg_stream *s) {
  return ldg__load_acquire(&s->visitors); /* tests, at a quiet moment */
}
