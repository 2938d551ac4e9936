/*
 * Test hooks of the ledger. Not part of the public contract: tests and the
 * fuzzer use them to inject failures and widen race windows.
 */
#ifndef STREAMLEDGER_LEDGER_TESTING_H
#define STREAMLEDGER_LEDGER_TESTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes the n-th allocation the ledger attempts from now on (counting from
 * 1, across all threads) fail, and every one after it succeed again. n <= 0
 * disables injection. Returns nothing; see ldg__fault_injected. */
void ldg__fault_fail_alloc_at(long n);

/* Makes every allocation fail while on is true. */
void ldg__fault_fail_all_allocs(bool on);

/* Number of allocations the ledger made fail on purpose so far. */
long ldg__fault_injected(void);

/* ---- Hooks (only in //ledger:ledger_hooks, built with LDG_TEST_HOOKS) ----
 * Points inside the ledger where a test may pause a thread or inject a delay
 * to widen a race window. The hook runs on the thread passing the point; it
 * may sleep or spin. Points marked (rcu) are inside an RCU read-side section:
 * a hook pausing there delays deferred frees (and ldg_quiesce) until it
 * returns, never another thread's enqueue, mark, release or query. The point
 * marked (lock) holds the registry mutex: a hook pausing there delays other
 * stream creates and ldg_ledger_destroy, never a release, enqueue, destroy,
 * unref or query (ledger.h's table). */
enum ldg__hook_point {
  LDG__HOOK_ENQUEUE_RESERVED = 1, /* seq reserved, not yet published */
  LDG__HOOK_ENQUEUE_PUBLISHED,    /* slot published */
  LDG__HOOK_SEGMENT_ALLOCATED,    /* (rcu) new segment built, not linked */
  LDG__HOOK_RELEASE_CLAIMED,      /* interval claimed, nothing taken yet */
  LDG__HOOK_RELEASE_TAKING,       /* (rcu) about to take one slot */
  LDG__HOOK_RELEASE_CHUNK_TAKEN,  /* chunk taken, keeps not yet run */
  LDG__HOOK_HEAD_ADVANCE,         /* (rcu) about to retire a segment */
  LDG__HOOK_POOL_POP,             /* (rcu) read a pool's top segment, its
                                     link not yet read (s: the stream whose
                                     segment is being got) */
  LDG__HOOK_EXTEND_LINKED,        /* (rcu) successor linked to the tail
                                     segment, tailseg not yet swung */
  LDG__HOOK_FINALIZE,             /* the last reference was dropped, the
                                     stream not yet marked destroyed */
  LDG__HOOK_REGISTRY_LOCKED,      /* (lock) holding the registry mutex: in
                                     ldg_stream_create (s: the new stream),
                                     ldg_ledger_destroy before its walk
                                     takes references (s: NULL) and the
                                     unlink drain (s: the stream being
                                     unlinked) */
  LDG__HOOK_LEDGER_DESTROY_PICK,  /* ldg_ledger_destroy's walk found s
                                     (taken for its batch, or being
                                     finalised: the first such), mutex
                                     released; s only as a value */
  LDG__HOOK_SPARE_READY,          /* a release claimed s's spare and got a
                                     segment (popped or allocated), not yet
                                     parked */
  LDG__HOOK_SPARE_DROPPED,        /* ldg_ledger_trim or ldg_stream_destroy
                                     took s's parked spare and retired it */
  LDG__HOOK_POOL_DRAIN,           /* ldg_ledger_trim, past its rcu_barrier,
                                     about to empty the pools (s: NULL) */
  LDG__HOOK_RELEASE_SAW_EMPTY,    /* (rcu) a release read a slot EMPTY (its
                                     enqueuer has not published), before
                                     its spin and ask */
  LDG__HOOK_RESERVE_RETRY,        /* an enqueue's reserving CAS on tail
                                     failed (another enqueuer took the
                                     seq); it tries again */
  LDG__HOOK_RESERVE_CHECKED,      /* an enqueue holding a fast-path ticket
                                     read s->fast_gen armed (and grow_at)
                                     and has not yet made its fetch_add on
                                     tail (reserve.c, RESERVING ON A SHARED
                                     STREAM: the add-first path) */
  LDG__HOOK_RECLAIM_TAKEN,        /* a batch of retired segments was taken
                                     off the reclaimer's list, its grace
                                     period not begun (reclaim.c; on the
                                     reclaimer thread or a flusher: quiesce,
                                     trim, ledger destroy; s: NULL) */
  LDG__HOOK_GROW_CLAIMED,         /* an enqueuer reached the newest
                                     segment's grow point and claimed the
                                     early growth; nothing linked yet, no
                                     read lock held (segment.c, GROWING
                                     AHEAD) */
  LDG__HOOK_ENQUEUE_STORED,       /* the enqueuer stored FULL and has not
                                     read s->asked (ring.c, PUBLICATION ON
                                     A STREAM WITH ONE PUBLISHER) or, (rcu)
                                     on a shared seq, its slot's ask
                                     (PUBLICATION) */
  LDG__HOOK_RELEASE_ASKING,       /* (rcu) a release still found its slot
                                     EMPTY after its spin, nothing asked
                                     yet */
  LDG__HOOK_RELEASE_ASK_BUSY,     /* (rcu) its ask found s->asked naming
                                     an earlier seq (another release's
                                     ask): it adopts that ask next */
  LDG__HOOK_RELEASE_ASKED,        /* (rcu) its ask is installed (in
                                     s->asked, or a shared seq's in its
                                     slot), the heavy fence not yet made */
  LDG__HOOK_OWNED_CHECKED,        /* the owner of an owned stream passed
                                     R1 (it still owns s) and its check
                                     against tail_end, before its store of
                                     otail (owned.c, OWNED STREAMS) */
  LDG__HOOK_OWNED_STORED,         /* the owner stored otail, before R2 */
  LDG__HOOK_REVOKE_PENDING,       /* a revoker set s->owner to PENDING (or
                                     found it so) and ran membarrier, before
                                     it reads otail and installs tail */
  LDG__HOOK_REVOKE_READ,          /* a revoker read otail (its T) and
                                     checked T + 1 against tail_end, before
                                     it agrees the base (s->obase) and
                                     installs tail: tail still 0 */
  LDG__HOOK_HOT_CHECK,            /* (rcu) the owner unlinked a segment
                                     from head (its CAS) and has not yet
                                     read s->visitors (segment.c, HOT
                                     REUSE ON OWNED STREAMS) */
  LDG__HOOK_HOT_REUSED,           /* (rcu) the owner parked the segment it
                                     unlinked as s's spare, for its next
                                     extension, without a grace period */
  LDG__HOOK_QUERY_HEAD,           /* (rcu) a query counted itself in
                                     s->visitors (or need not) and loaded
                                     s's head, before reading that
                                     segment */
  LDG__HOOK_ENQUEUE_ASK_SEEN,     /* (rcu) a shared seq's enqueuer read its
                                     slot's ask set, before its CAS that
                                     takes it off (ring.c, PUBLICATION) */
  LDG__HOOK_ENQUEUE_GIVEN_BACK,   /* the enqueuer took an ask off (its
                                     entry is its own again: the slot FULL,
                                     unresolved), before ldg__take_one */
  LDG__HOOK_RESERVE_ARMING,       /* a holder's CAS-path reservation had
                                     the reserve and the gen it loaded
                                     first was even: before its CAS that
                                     arms s->fast_gen (reserve.c, RESERVING ON
                                     A SHARED STREAM) */
  LDG__HOOK_RESERVE_DISARMED,     /* an add landed in the zone (the last
                                     LDG__FAST_R seqs below tail_end) and
                                     its CAS disarmed s->fast_gen, before
                                     the early growth */
};

struct ldg_stream;
typedef void (*ldg__hook_fn)(enum ldg__hook_point point,
                             struct ldg_stream *s, void *arg);

/* Installs fn (NULL removes it). Returns false if this build has no hooks. */
bool ldg__set_hook(ldg__hook_fn fn, void *arg);

/* Lowers the upto of every segment of s to at most to, as a query's late
 * store racing a faster one's may (summary.c, WHY (S) HOLDS FOR own): the
 * summaries then say less, never hide an entry. Returns false if this
 * build has no hooks. */
bool ldg__summary_lower_upto(struct ldg_stream *s, uint32_t to);

/* The number of slots of s's segments (head to the newest) whose ask is
 * set (ring.c, PUBLICATION): 0 once every enqueue returned and every
 * release asking finished. For tests, at a quiet moment. */
unsigned ldg__testing_slot_asks(struct ldg_stream *s);

/* The seq s->asked names, 0 if none (ring.c, PUBLICATION ON A STREAM WITH
 * ONE PUBLISHER); for tests, at a quiet moment. */
uint64_t ldg__testing_asked(struct ldg_stream *s);

/* Calls of ldg__asym_heavy (rcu.h: the heavy side of the asymmetric
 * fences, membarrier where it is in use) in this process so far; 0 in a
 * build without hooks. */
uint64_t ldg__testing_asym_heavy_calls(void);

/* ---- Inspection (every build) ---------------------------------------------
 * Segments in l's pool of size class cls (8 << cls slots), and how many
 * segments of that class were taken from it since l was created. Exact only
 * while no segment enters or leaves the pool. */
struct ldg_ledger;
size_t ldg__pool_count(struct ldg_ledger *l, unsigned cls);
unsigned long ldg__pool_reused(struct ldg_ledger *l, unsigned cls);

/* Bytes one pooled segment of class cls accounts for (its header included). */
size_t ldg__pool_seg_bytes(unsigned cls);

/* Pops from l's pools (all classes) of segments retired less than 2^b x
 * 250 us before (b < 7), or longer (b = 7); 0 for other b. */
unsigned long ldg__pool_reuse_age(struct ldg_ledger *l, unsigned b);

/* The pool limit in force for l (ledger/pool.c, HOW MUCH THE POOL KEEPS):
 * what the last reclaimer batch set, never above ldg_ledger_set_pool_limit's
 * bound. */
size_t ldg__pool_limit_in_force(struct ldg_ledger *l);

/* The process's segment reclaimer (ledger/reclaim.c): batches run (each one
 * grace period), segments reclaimed through them, segments retired through
 * call_rcu instead (no reclaimer ever started), whether one runs in this
 * process, whether retirements go to its list (one was started here or
 * before a fork). Statistics, read relaxed: exact only while nothing is
 * retired. */
typedef struct ldg__reclaim_stats {
  uint64_t batches;
  uint64_t batched;
  uint64_t via_call_rcu;
  bool running;
  bool listed;
} ldg__reclaim_stats;
ldg__reclaim_stats ldg__reclaim_inspect(void);

/* Whether s's newest segment (tailseg) is still reachable from its oldest
 * (head): a segment tailseg names is never retired. */
struct ldg_stream;
bool ldg__ring_tailseg_reachable(struct ldg_stream *s);

/* The reservation (reserve.c, RESERVING ON A SHARED STREAM): the fast path's
 * ticket count, which is also the reserve the CAS path leaves below
 * tail_end; s's tail_end (seqs below it have a slot). */
unsigned ldg__fast_reserve(void);
uint64_t ldg__ring_tail_end(struct ldg_stream *s);
/* s's fast_gen: odd while ticket holders reserve by fetch_add (armed),
 * even while they take the CAS path; each arm or disarm raises it. */
uint64_t ldg__ring_fast_gen(struct ldg_stream *s);
/* What a holder whose add landed in the zone does, with `loaded` the
 * fast_gen it loaded before its add: the disarming CAS loop, as
 * ldg__reserve_past makes it (a test stands in for a lander with it). */
void ldg__testing_disarm(struct ldg_stream *s, uint64_t loaded);
/* Owned streams (owned.c, OWNED STREAMS): s's owner word, with every token
 * reported as 16 (0 unclaimed, 1 revocation pending, 2 shared, 16 owned
 * by some thread). */
uint64_t ldg__ring_owner_state(struct ldg_stream *s);
/* Segments s's owner reused at once, without the reclaimer (segment.c, HOT
 * REUSE ON OWNED STREAMS), and the sections of other threads counted in s's
 * visitors now (0 at a quiet moment). */
uint64_t ldg__ring_hot_reused(struct ldg_stream *s);
uint64_t ldg__ring_visitors(struct ldg_stream *s);
/* Gives back this thread's fast-path ticket and never takes one again
 * (want false: its enqueues take the CAS path), or takes one now if one is
 * free (want true). Whether it holds one. */
void ldg__testing_fast_ticket(bool want);
bool ldg__testing_has_fast_ticket(void);

/* Growing ahead (segment.c, GROWING AHEAD): s's grow_at (the seq whose
 * enqueuer links the next segment, or the newest segment's end -
 * ldg__fast_reserve() while that growth is claimed; the first segment's
 * end until the first extension), and how many of s's linked segments
 * start past its mark (tail): at most 1 (the segment linked ahead). Read
 * the segments first, then the mark, so that racing enqueuers only make
 * the count smaller. */
uint64_t ldg__ring_grow_at(struct ldg_stream *s);
/* The first seq of s's newest segment (tailseg's base). */
uint64_t ldg__ring_tail_base(struct ldg_stream *s);
unsigned ldg__ring_segments_ahead(struct ldg_stream *s);
/* Bytes of s's segments: those linked from head (the pending span, the
 * newest, one linked ahead) and its parked spare; what ldg_ledger_bytes
 * counts for them. For tests, at a quiet moment. */
size_t ldg__ring_bytes(struct ldg_stream *s);
/* Bytes of s's parked spare (THE SPARE), 0 when none; at a quiet moment. */
size_t ldg__ring_spare_bytes(struct ldg_stream *s);

/* Whether l's vector index (ldg_ledger_index_vectors) says no pending
 * entry names id (a definite miss, answered without a walk). False when
 * the index is off. */
bool ldg__vindex_says_absent(struct ldg_ledger *l, uint64_t id);

/* What this thread's queries (holds_*, vector_holders, nonblocking_holding)
 * have read so far: segments visited (their summaries), and the lines that
 * enqueuers or releases write: slots (one line each), streams' tail and
 * released words (one line each), segment headers. Thread-local counters,
 * no atomics (summary.c); tests prove with them that a summary is used,
 * benchmarks report them per query. */
typedef struct ldg__query_reads {
  uint64_t segments;
  uint64_t slots;
  uint64_t stream_lines;
  uint64_t headers;
  /* lines of published filters (summary.c), which enqueuers write only
   * while a filter grows: counted apart from the lines above */
  uint64_t filters;
} ldg__query_reads;
ldg__query_reads ldg__thread_query_reads(void);

/* How many times this thread's queries have written a summary's line (a
 * segment's upto with its filter, its copy of next, a jump with its span):
 * lines only queries write, which other readers, and the enqueuer that
 * links the segment again, then read. Thread-local, as above. */
uint64_t ldg__thread_query_writes(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_LEDGER_TESTING_H */
