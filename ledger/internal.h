/*
 * Internal structures of the ledger. Names with `ldg__` are internal.
 * ring.c opens with the design of the per-stream ring (continued in
 * reserve.c, owned.c, segment.c, pool.c, reclaim.c and release.c, one
 * protocol each); registry.c with the
 * registry and stream lifetimes.
 */
#ifndef STREAMLEDGER_INTERNAL_H
#define STREAMLEDGER_INTERNAL_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger/atomics.h"
#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"
#include "ledger/rcu.h"
#include "ledger/thread_ops.h" /* ldg__thread_ops (ldg_thread_ops_released) */

#define LDG__CACHE_LINE 64

/* Segment sizes are 8 << class slots, class 0..LDG__POOL_CLASSES-1. */
#define LDG__POOL_CLASSES 8
#define LDG__REUSE_AGES 8

/* ---- Slots ------------------------------------------------------------------ */

/* slot.state: the handshake between the enqueuer that fills a slot and the
 * release that covers its seq (see ring.c, "PUBLICATION"). */
enum {
  LDG__SLOT_EMPTY = 0,     /* reserved, not yet published */
  LDG__SLOT_FULL = 1,      /* published; the covering release takes it */
  LDG__SLOT_ABANDONED = 2, /* never stored since pub11 (ring.c,
                              PUBLICATION): what ldg__overtake_* return
                              for "someone else takes the entry" */
  LDG__SLOT_RETRACTED = 3, /* its stream was destroyed before publication:
                              the enqueue was refused */
};

/* slot.kind */
enum { LDG__KIND_OP = 0, LDG__KIND_WAIT = 1 };

/* slot.ask: a release that owns the slot's seq and found it EMPTY asks its
 * enqueuer to take the entry (ring.c, PUBLICATION). Taking the ask off
 * (CAS ASKED -> NONE) takes the entry, and leaves the slot's next life
 * with none. */
enum { LDG__ASK_NONE = 0, LDG__ASK_ASKED = 1 };

/* slot.aux for an operation: where its ids and ranges are. */
enum { LDG__OP_INLINE = 0, LDG__OP_EXT = 1 };

/* slot.aux for a wait being fired: what its frame does when the waited
 * stream's release ends (release.c, "TRANSITIVE RELEASE"). */
enum { LDG__FRAME_FIRED = 0, LDG__FRAME_FINALIZE = 1 };

/* Words of vec ids and (addr, bytes) pairs that fit in a slot. */
#define LDG__INLINE_WORDS 4

/* Ids and ranges that do not fit in the slot: n_vec ids, then n_rng
 * (addr, bytes) pairs. Freed when the entry is released (after a grace
 * period: queries may be reading it). Holds a reference to its ledger. */
struct ldg__ext {
  struct rcu_head rcu;
  ldg_ledger *ledger;
  size_t n_vec;
  size_t n_rng;
  uint64_t w[];
};

struct ldg__seg;

/* One entry, one cache line: concurrent enqueuers on one stream write
 * different lines. kind, aux and the payload are written before the slot is
 * published and never change afterwards, except the payload of a wait that is
 * being fired, which becomes the release's stack frame (no reader looks at a
 * wait's payload). ask: LDG__ASK_*, NONE whenever the slot is resolved
 * (ring.c, PUBLICATION). */
struct ldg__slot {
  alignas(LDG__CACHE_LINE) _Atomic uint32_t state;
  uint8_t kind;
  _Atomic uint8_t ask;
  uint16_t aux;
  union {
    struct {
      ldg_keep keep;
      union {
        struct {
          uint32_t n_vec;
          uint32_t n_rng;
          uint64_t w[LDG__INLINE_WORDS];
        } in;
        struct ldg__ext *ext;
      } d;
    } op;
    struct {
      ldg_stream *target; /* holds a reference; NULL: a wait on itself */
      union {
        ldg_seq upto; /* until the wait fires */
        /* Once a frame: the slots of seg the walk has taken and not yet
         * counted resolved, this one among them (release.c, POPPING A
         * FRAME). */
        uint64_t unresolved;
      };
      /* Frame, while the wait is being fired: the cursor of the stream that
       * holds this wait, to resume once target is released. */
      ldg_stream *parent;
      ldg_seq parent_next;
      ldg_seq parent_end;
      struct ldg__slot *parent_frame;
      struct ldg__seg *seg; /* the segment holding this slot */
    } wait;
  } u;
};

_Static_assert(sizeof(struct ldg__slot) == LDG__CACHE_LINE,
               "one slot per cache line");

/* ---- Query summaries (summary.c) --------------------------------------------- */

/* What a query may find among some entries: every id they name lies in
 * [vec_lo, vec_hi] and has its bit (summary.c's hash) set in bits, every
 * byte of their ranges lies in [addr_lo, addr_hi]. Written by queries only
 * (relaxed: summary.c says what publishes it). Empty: lo > hi, no bits. */
struct ldg__filter {
  _Atomic uint64_t vec_lo, vec_hi;
  _Atomic uint64_t addr_lo, addr_hi;
  _Atomic uint64_t bits;
};

/* What the entries published into a segment may name (summary.c, THE
 * PUBLISHED FILTERS): every id they name lies in [vec_lo, vec_hi], every
 * byte of their ranges in [addr_lo, addr_hi]. Written by enqueuers, before
 * their publication, only to widen it; read by queries. Empty: lo > hi. */
struct ldg__pubf {
  _Atomic uint64_t vec_lo, vec_hi;
  _Atomic uint64_t addr_lo, addr_hi;
};

/* A segment's summaries, on two lines of their own: enqueuers and releases
 * never touch them (summary.c, QUERY SUMMARIES); then the published
 * filters, on a third line that only enqueuers write. */
struct ldg__summary {
  /* Slots [0, upto) are summarised in own (every pending one among them:
   * "published, and the same ever since"). */
  alignas(LDG__CACHE_LINE) _Atomic uint32_t upto;
  /* Copies of the header's size and base, and the segment's place in its
   * stream (0 for the first): written by the thread that links the
   * segment, before the linking CAS; fixed for the segment's life. A walk
   * reads them here rather than on the header's line, which every release
   * writes (resolved). */
  uint32_t size;
  ldg_seq base;
  uint32_t index;
  /* Whether this life keeps the published filters (one, any below): a copy
   * of the header's pubf_on, for queries, written with it. */
  bool pubf_on;
  struct ldg__filter own;
  /* NULL, or the segment 2^level(index) places later: span then
   * summarises this segment and every one before jump. */
  alignas(LDG__CACHE_LINE) _Atomic(struct ldg__seg *) jump;
  /* A copy of the header's next, once a query saw it set (NULL: look
   * there). */
  _Atomic(struct ldg__seg *) next;
  struct ldg__filter span;
  /* Not a summary: the segment's CLOCK_MONOTONIC when linked, which sizes
   * the next one (segment.c), here because the header's line is full
   * (prev took its place there). Written by the linker before the linking
   * CAS, read by the next extension and by a release preparing the spare. */
  uint64_t born_ns;
  /* The published filters (summary.c, THE PUBLISHED FILTERS): one, of the
   * seqs published by the stream's one publisher (LDG__PUB_STORE: plain
   * stores), and any, of every other seq (widened with atomic RMWs). Both
   * only grow within the segment's life; reset with the summaries. A
   * line of their own: an enqueuer writes it only while the filter grows
   * (a segment's first entries), so queries reading it cost it no miss
   * once its ids and ranges repeat. */
  alignas(LDG__CACHE_LINE) struct ldg__pubf one;
  struct ldg__pubf any;
};

/* ---- Segments -------------------------------------------------------------- */

/* A run of `size` consecutive seqs starting at `base`. Segments of one stream
 * form a list from stream.head (oldest not yet retired) to stream.tailseg
 * (newest). Header fields are immutable after publication except next and
 * resolved. */
struct ldg__seg {
  ldg_seq base;
  uint32_t size;
  /* prev's size (0 for a stream's first), written with prev: prev's base
   * is base - prev_size (a segment is linked at the end of the one before:
   * segment.c, ldg__ring_extend), so an enqueuer whose seq is in prev
   * finds its slot without reading prev's header (ring.c,
   * ldg__seg_of_reserved; bench/RESULTS.md, "Issue 11, eleventh session:
   * the launch row (launch11)"); prev_pubf_on below, likewise. In the
   * padding after size. */
  uint32_t prev_size;
  _Atomic(struct ldg__seg *) next;
  ldg_ledger *ledger; /* a reference, for accounting when freed */
  /* The segment this one was linked after (NULL for a stream's first),
   * written before the linking CAS, fixed for the segment's life: an
   * enqueuer whose seq is in it while this one is already tailseg (the
   * ring grew ahead: segment.c, GROWING AHEAD) finds it without a walk
   * (ring.c, ldg__seg_of_reserved). Here, on the line that enqueuer reads
   * base from anyway. */
  struct ldg__seg *prev;
  _Atomic bool dirty; /* a slot was retracted: never pooled, freed */
  /* Whether this life's enqueuers widen the published filters (summary.c,
   * THE PUBLISHED FILTERS, "On for a life"): set by the linker before the
   * linking CAS (ldg__summary_reset), fixed for the life. Here, on the line
   * the enqueuer reads base from anyway. */
  bool pubf_on;
  /* prev's pubf_on (false for a stream's first), written with prev. */
  bool prev_pubf_on;
  /* A retired segment goes through one of two ways to its grace period:
   * call_rcu (rcu), or the reclaimer's list (reclaim.c: retired_next, the
   * list's link, and retired_ns, when, CLOCK_MONOTONIC, for the pool's
   * reuse ages; written by the retirer, which owns the unreachable
   * segment, before its push). Never both at once, so they share the
   * header's last 16 bytes; a segment that came through call_rcu has no
   * age (ldg__seg_pool_cb zeroes retired_ns). */
  union {
    struct rcu_head rcu;
    struct {
      struct ldg__seg *retired_next;
      uint64_t retired_ns;
    };
  };
  struct ldg__summary sum; /* for queries; reset when linked (summary.c) */
  /* Slots whose keep has been taken or refused: added to by every release
   * chunk, so on a line of its own, not on the header's, which every
   * enqueue reads (base, size, prev: ldg__seg_of_reserved). */
  alignas(LDG__CACHE_LINE) _Atomic uint32_t resolved;
  struct ldg__slot slots[];
};
_Static_assert(offsetof(struct ldg__seg, sum) == LDG__CACHE_LINE &&
                   offsetof(struct ldg__seg, pubf_on) < LDG__CACHE_LINE &&
                   offsetof(struct ldg__summary, pubf_on) < LDG__CACHE_LINE &&
                   offsetof(struct ldg__seg, sum.one) ==
                       3 * LDG__CACHE_LINE &&
                   offsetof(struct ldg__seg, resolved) == 4 * LDG__CACHE_LINE &&
                   sizeof(struct ldg__seg) == 5 * LDG__CACHE_LINE,
               "a segment's header: one line, the summaries' two, the "
               "published filters' one, resolved's");

/* ---- Streams and the ledger ---------------------------------------------------- */

struct ldg_stream {
  /* Read-mostly lines: immutable after creation, or written rarely. What
   * an enqueue reads of them (ledger, flags, fast_gen, tailseg, vindex,
   * owner, destroyed) is on the first, the rest (id, drain, finalizer)
   * after it (issue 11, tenth session: one line per enqueue, not two). */
  ldg_ledger *ledger;
  unsigned flags;
  int device;
  /* Shared streams (reserve.c, RESERVING ON A SHARED STREAM: ADD FIRST WHILE
   * ARMED): odd while ticket holders may reserve by fetch_add without
   * looking at tail, even while they take the CAS path; a generation (each
   * write adds 1 or 2 to what it read), so that a CAS from a value loaded
   * earlier fails once anything was written since. Written about once per
   * stalled growth (disarm, re-arm), read by every shared enqueue: here,
   * on the line every enqueue reads anyway. */
  _Atomic uint64_t fast_gen;
  _Atomic(struct ldg__seg *) tailseg; /* newest segment; once per segment */
  /* The oldest segment not retired; moved once per segment, as tailseg.
   * Here, not on the releasers' line, so that a query starts its walk
   * without touching a line every release writes (summary.c). */
  _Atomic(struct ldg__seg *) head;
  /* The ledger's vector index (vindex.c) or NULL, copied at creation
   * (ldg__registry_link): read by every enqueue and taken chunk, beside
   * tailseg rather than on the ledger's line that l->refs shares. */
  struct ldg__vindex *vindex;
  /* Owned streams (owned.c, OWNED STREAMS): LDG__OWN_UNCLAIMED, a thread's
   * token (its owner reserves on otail without a locked RMW),
   * LDG__OWN_PENDING (a revocation began) or LDG__OWN_SHARED (for good;
   * streams start so without membarrier, or with LDG_STREAM_SHARED).
   * Written once per claim and per revocation. Here, on the read-mostly
   * line every enqueue reads anyway, not on the enqueuers' line: every
   * query loads it on every stream it visits (ldg__visit_begin), and there
   * each load took the line from the owner, whose next store of otail
   * missed, on streams the query then skipped by their published filters
   * (issue 11, eleventh session: ~1 miss per serving request at 2 threads,
   * bench/RESULTS.md, "the unpaced reader (rdr11)"). */
  _Atomic uint64_t owner;
  _Atomic bool destroyed;
  uint64_t id;
  ldg_drain_fn drain;
  void *drain_ctx;
  ldg_keep finalizer; /* ldg_stream_set_finalizer; run by the last unref */

  /* Registry links: written under ledger.reg_lock; reg_next is read by
   * lock-free readers under RCU. */
  _Atomic(ldg_stream *) reg_next;
  ldg_stream *reg_prev;
  /* The ledger's stack of destroyed streams waiting to be unlinked
   * (registry.c, UNLINKING WITHOUT WAITING): written by the pusher before
   * its publishing CAS, read by the lock holder that pops the stack. */
  ldg_stream *unlink_next;
  /* LDG__LIFE_* bits: the stream is freed, after a grace period, by whoever
   * sets the second of them. */
  _Atomic uint32_t life;
  struct rcu_head rcu;

  /* The enqueue high-water mark (= ldg_mark), alone on its line (faa12):
   * the add-first reservation of a shared stream (reserve.c, RESERVING ON A
   * SHARED STREAM) takes this line once per op and reads nothing else on
   * it, so that the adds of other threads are the only traffic it sees
   * (runs 11c-11f, bench/RESULTS.md: the add without the load of tail and
   * tail alone on its line, together 84 % of the ceiling at 16 threads,
   * each alone 61-66 %). A single-issuer stream's enqueue now touches two
   * lines (its store of tail, its load of tail_end); an owned stream's
   * one (otail and tail_end, below). */
  alignas(LDG__CACHE_LINE) _Atomic ldg_seq tail;

  /* Enqueuers' line: the end of the seqs that have a segment (tailseg's
   * end, raised after tailseg). */
  alignas(LDG__CACHE_LINE) _Atomic ldg_seq tail_end;
  /* Where the ring grows ahead (segment.c, GROWING AHEAD): the enqueuer
   * whose seq reaches it claims the growth (a CAS to tail_end) and links
   * the next segment; raised to the new segment's grow point after the
   * link. At most tail_end - LDG__FAST_R once the first segment is
   * outgrown (the claim stores the segment's end - LDG__FAST_R: RESERVING
   * ON A SHARED STREAM, reserve.c). On this line: the add-first path loads it
   * (and nothing else here), the CAS path with tail_end; written twice per
   * segment. */
  _Atomic ldg_seq grow_at;
  /* LDG_STREAM_SINGLE_ISSUER streams, in builds without NDEBUG: 1 while
   * a call records on s, to catch a second one overlapping it (reserve.c,
   * SINGLE-ISSUER STREAMS). Unused otherwise. */
  _Atomic uint32_t issuing;
  /* Owned streams (owned.c, OWNED STREAMS; owner is on the read-mostly
   * line): otail, the last seq the owner handed itself (written by the
   * owner only); contest, who got the seq after the last one the
   * installing revoker saw (0 undecided; LDG__CONTEST_* of that seq). Here,
   * on the line every enqueue writes anyway. */
  _Atomic ldg_seq otail;
  _Atomic uint64_t contest;
  /* Streams with one publisher (ldg__one_publisher): the seq a release that
   * owns it and found its slot EMPTY asks about, 0 when none (ring.c,
   * PUBLICATION ON A STREAM WITH ONE PUBLISHER). Read by every such
   * enqueue after its publishing store, written only by overtaking
   * releases and the enqueuer they asked: on this line, which that
   * enqueuer writes anyway. */
  _Atomic ldg_seq asked;

  /* Releasers' line: the release high-water mark and the counts behind
   * ldg_pending_count: operations taken by releases (or by overtaken
   * enqueuers), and waits ever recorded. */
  alignas(LDG__CACHE_LINE) _Atomic ldg_seq released;
  _Atomic uint64_t ops_released;
  _Atomic uint64_t waits_enqueued;
  /* The next segment, zeroed, prepared by a release once tail passes
   * spare_at (a quarter of the newest segment), one release at a time (a claim),
   * and taken by the extender with a CAS (segment.c, THE SPARE). */
  _Atomic(struct ldg__seg *) spare;
  _Atomic ldg_seq spare_at;
  /* Owned streams (owned.c, OWNED STREAMS, "Publication"): the tail a
   * revocation installs (T + 1), agreed by CAS from 0 before any helper
   * installs it; 0 on a stream never revoked. Read by a release that finds
   * a slot EMPTY (ldg__seq_asks); off the enqueuers' line (full). */
  _Atomic ldg_seq obase;

  /* References: waits, snapshots and callers take them. Written twice per
   * wait on this stream as its target (ldg_enqueue_wait, and the release
   * of the wait), by whoever records and releases the waits. */
  alignas(LDG__CACHE_LINE) _Atomic uint64_t refs;
  /* Read-side sections of threads other than the owner that may be using
   * the ring's segments now (segment.c, HOT REUSE ON OWNED STREAMS:
   * ldg__visit_begin). The owner's retirement reads it once per segment;
   * its enqueues never touch this line, nor the read-mostly one. A line
   * of its own: on refs' line every query's two RMWs made the owner's
   * next wait on this stream miss (issue 11, tenth session). */
  alignas(LDG__CACHE_LINE) _Atomic uint64_t visitors;
  /* Segments the owner reused at once, without a grace period (same
   * section): written by the owner alone, read by tests. */
  _Atomic uint64_t hot_reused;
};

_Static_assert(offsetof(struct ldg_stream, vindex) + sizeof(void *) <=
                       LDG__CACHE_LINE &&
                   offsetof(struct ldg_stream, fast_gen) + sizeof(uint64_t) <=
                       LDG__CACHE_LINE &&
                   offsetof(struct ldg_stream, owner) + sizeof(uint64_t) <=
                       LDG__CACHE_LINE &&
                   offsetof(struct ldg_stream, destroyed) + sizeof(bool) <=
                       LDG__CACHE_LINE,
               "what an enqueue reads of the read-mostly part (fast_gen and "
               "destroyed included), and owner, which every query reads, "
               "are one line");
_Static_assert(offsetof(struct ldg_stream, tail_end) ==
                   offsetof(struct ldg_stream, tail) + LDG__CACHE_LINE,
               "tail is alone on its line (faa12)");
_Static_assert(offsetof(struct ldg_stream, released) ==
                   offsetof(struct ldg_stream, tail_end) + LDG__CACHE_LINE,
               "the enqueuers' line (tail_end .. asked) is one cache line");

/* ldg_stream.life */
enum {
  LDG__LIFE_FINALIZED = 1, /* last reference dropped, keeps run */
  LDG__LIFE_UNLINKED = 2,  /* removed from the registry list */
};

struct ldg_ledger {
  /* Guards the registry list for writers: stream create, ledger destroy,
   * and whoever drains unlink_pending — rare paths the contract allows a
   * lock on. Only stream create and ledger destroy wait for it; destroy,
   * unref and the release paths only try it (registry.c, UNLINKING WITHOUT
   * WAITING). Readers never take it: they walk the list under RCU. Never
   * held across a callback. */
  pthread_mutex_t reg_lock;
  _Atomic(ldg_stream *) reg_head;
  /* Destroyed streams still on the list, linked through unlink_next: a
   * lock-free stack that every holder of reg_lock empties. */
  _Atomic(ldg_stream *) unlink_pending;
  _Atomic uint64_t next_id;
  _Atomic size_t n_nonblocking;
  /* The ledger lives while its owner has not destroyed it or any stream
   * struct, segment or payload of it is still allocated. */
  _Atomic uint64_t refs;
  _Atomic bool destroying; /* ldg_ledger_destroy began: pools take nothing */
  /* The vector index (vindex.c), or NULL: set before the first stream and
   * fixed from then on (the registry mutex orders it before every stream's
   * creation, hence before every enqueue); freed with the ledger. Each
   * stream keeps a copy (ldg_stream.vindex): the enqueue and release paths
   * never read this line, which refs (written by every segment and payload
   * allocation) shares. */
  struct ldg__vindex *vindex;
  /* Set by the first query that walked a newest segment without published
   * filters (summary.c, "On for a life"); segments linked after it keep
   * them. Relaxed: a hint, read once per segment linked. */
  _Atomic bool queried;
  alignas(LDG__CACHE_LINE) _Atomic size_t bytes;
  /* Retired segments past their grace period, kept for reuse, one lock-free
   * stack per size (8 << class slots); see pool.c. */
  _Atomic size_t pool_bytes;
  /* The upper bound (ldg_ledger_set_pool_limit, LDG__POOL_DEFAULT_LIMIT
   * unless set) and the limit in force: twice what the last reclaimer batch
   * returned to this ledger, at least LDG__POOL_FLOOR, at most pool_limit
   * (pool.c, HOW MUCH THE POOL KEEPS). */
  _Atomic size_t pool_limit;
  _Atomic size_t pool_auto;
  /* The reclaimer's sum over its batch (reclaim.c); only under its lock. */
  size_t batch_bytes;
  /* Pops by the age of the segment (since its retirement): below 2^i
   * x 250 us for i < 7, the rest in the last (tests, benchmarks). */
  _Atomic unsigned long reuse_age[LDG__REUSE_AGES];
  struct ldg__pool {
    alignas(LDG__CACHE_LINE) _Atomic(struct ldg__seg *) top;
    _Atomic unsigned long reused; /* pops that found a segment (tests) */
  } pools[LDG__POOL_CLASSES];
};

struct ldg_marks {
  size_t n;
  struct {
    ldg_stream *s; /* holds a reference */
    ldg_seq mark;
  } items[];
};

/* Whether s has one publisher at a time: its enqueuer publishes with a
 * plain store, and a release that finds a slot EMPTY asks through s->asked
 * (ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER). Today the
 * single-issuer streams; the condition lives here alone so that another
 * one-publisher mode can reuse the protocol. flags: immutable. A mode whose
 * condition changes over a stream's life must keep, for every seq, the
 * enqueuer's choice (read s->asked, or its slot's ask) and the owning
 * release's (ask through s->asked, or through the slot) the same: an ask
 * where its enqueuer does not look is answered by nobody. */
static inline bool ldg__one_publisher(const ldg_stream *s) {
  return (s->flags & LDG_STREAM_SINGLE_ISSUER) != 0;
}

/* How an enqueue publishes its seq, fixed when the seq is reserved (owned.c,
 * OWNED STREAMS, "Publication"; ring.c, PUBLICATION): every way stores FULL, then
 * reads where a release that found the slot EMPTY asks. SLOT: the slot's
 * ask, in a read-side section (a release asks there: a shared seq); STORE:
 * s->asked (a one-publisher seq); BOTH: both (whatever the release does:
 * the contested seq of a revocation, and the owner's seq whose R2 saw
 * one). */
enum { LDG__PUB_SLOT, LDG__PUB_STORE, LDG__PUB_BOTH };

/* The release that owns seq of s and found its slot EMPTY: whether it asks
 * through s->asked rather than through the slot's ask. The same choice as seq's enqueuer made, for every seq
 * (owned.c, OWNED STREAMS, "Publication"): a single-issuer stream's seqs; on
 * a default stream, with tail not installed every seq (each is the
 * owner's, or the contested one, published both ways); once installed,
 * the seqs below the installed base (the owner's). Acquire, both: tail
 * installed (seq_cst CAS) after obase was agreed, so a tail read nonzero
 * comes with obase. A stream never owned (SHARED from the start, or made
 * so while unclaimed) has obase 0: every ask goes to the slot. */
static inline bool ldg__seq_asks(const ldg_stream *s, ldg_seq seq) {
  if (ldg__one_publisher(s)) return true;
  return ldg__load_acquire(&s->tail) == 0 ||
         seq < ldg__load_acquire(&s->obase);
}

/* ---- Test hooks (ledger_testing.h) ---------------------------------------------- */

#ifdef LDG_TEST_HOOKS
void ldg__hook(int point, ldg_stream *s);
#define LDG__HOOK(point, s) ldg__hook((point), (s))
#else
#define LDG__HOOK(point, s) ((void)0)
#endif

/* ---- alloc.c ---------------------------------------------------------------------- */

void *ldg__malloc(size_t bytes);
void *ldg__calloc(size_t n, size_t size);
void *ldg__aligned_alloc(size_t align, size_t bytes);
void ldg__free(void *p);

/* A new stream's first segment (segment.c), and its end: seqs below
 * LDG__FIRST_END are reserved by the CAS path alone (reserve.c, RESERVING ON A
 * SHARED STREAM). */
#define LDG__SEG_FIRST 8u
#define LDG__FIRST_END ((ldg_seq)1 + LDG__SEG_FIRST)
/* The fast path's tickets, the reserve the CAS path leaves past the first
 * segment, and the zone below tail_end where an add disarms (reserve.c,
 * RESERVING ON A SHARED STREAM): one number, so that the tickets' adds
 * fit in the zone. Growth segments have at least 2 x LDG__FAST_R slots
 * (LDG__SEG_MIN, segment.c), so that a grow point is below the zone. */
#define LDG__FAST_R 32u

/* ---- ring.c: layout, enqueue; owned.c: owned streams ------------------------------ */

/* s->owner (owned.c, OWNED STREAMS): below LDG__OWN_FIRST_TOKEN, a state;
 * from it on, the token of the owning thread (unique per thread, never
 * reused). */
enum {
  LDG__OWN_UNCLAIMED = 0,
  LDG__OWN_PENDING = 1,
  LDG__OWN_SHARED = 2,
  LDG__OWN_FIRST_TOKEN = 16
};
/* s->contest: seq q decided for the owner, or for the installer. */
#define LDG__CONTEST_OWNER(q) (((uint64_t)(q) << 1) | 1u)
#define LDG__CONTEST_INSTALLER(q) ((uint64_t)(q) << 1)

/* This thread's owner token (owned.c, OWNED STREAMS): LDG__OWN_NO_TOKEN
 * until it first claims a stream. */
extern _Thread_local uint64_t ldg__own_tok;

/* A read-side section that may load a pointer to one of s's segments or
 * slots (head, tailseg, next, prev, a slot) begins: unless this thread owns
 * s, or s is SHARED for good, it counts itself in s->visitors, so that the
 * owner does not reuse a segment it just unlinked at once (segment.c, HOT
 * REUSE ON OWNED STREAMS, which lists every section). Call before the
 * section's first such load; returns whether it counted itself, for
 * ldg__visit_end after its last use. */
static inline bool ldg__visit_begin(ldg_stream *s) {
  /* Acquire: SHARED read pairs with the installer's release store, after
   * its heavy fence, which every hot reuse precedes (HOT REUSE, "Who need
   * not count"). Our own token: we are the owner, whose reuse is sequential
   * with this section. */
  uint64_t o = ldg__load_acquire(&s->owner);
  if (o == ldg__own_tok || o == LDG__OWN_SHARED) return false;
  /* Seq_cst: the store side of the handshake with the owner's retirement
   * (its seq_cst CAS of head, then its seq_cst load of visitors); our
   * first load of head or tailseg after it is seq_cst (HOT REUSE). */
  ldg__fetch_add_seq_cst(&s->visitors, 1);
  return true;
}
static inline void ldg__visit_end(ldg_stream *s, bool counted) {
  /* Release: every read of the section happens before the owner's reuse
   * that reads the count this leaves (its seq_cst load acquires). */
  if (counted) ldg__fetch_sub_release(&s->visitors, 1);
}

/* A read-side section on s's ring: the RCU read lock, then the visitor
 * count (HOT REUSE). Returns what ldg__ring_read_unlock takes. A section
 * inside a read lock its caller holds (a query's walk, summary.c) counts
 * itself with ldg__visit_begin / _end alone. */
static inline bool ldg__ring_read_lock(ldg_stream *s) {
  ldg__rcu_read_lock();
  return ldg__visit_begin(s);
}
static inline void ldg__ring_read_unlock(ldg_stream *s, bool counted) {
  ldg__visit_end(s, counted);
  ldg__rcu_read_unlock();
}

/* The stream's tail as its readers see it (ldg_mark, releases, destroy,
 * queries, heuristics): the last seq handed out. On an owned stream tail
 * stays 0 and the owner's otail counts; once installed (revocation), tail
 * is nonzero and at least every otail the owner stored (owned.c, OWNED
 * STREAMS, "Readers of the tail"). One helper per memory order: tail
 * first, then otail with the same order. */
static inline ldg_seq ldg__tail_relaxed(const ldg_stream *s) {
  ldg_seq t = ldg__load_relaxed(&s->tail);
  return t != 0 ? t : ldg__load_relaxed(&s->otail);
}
static inline ldg_seq ldg__tail_acquire(const ldg_stream *s) {
  ldg_seq t = ldg__load_acquire(&s->tail);
  return t != 0 ? t : ldg__load_acquire(&s->otail);
}
static inline ldg_seq ldg__tail_seq_cst(const ldg_stream *s) {
  ldg_seq t = ldg__load_seq_cst(&s->tail);
  return t != 0 ? t : ldg__load_seq_cst(&s->otail);
}

/* What an enqueue records: an operation, or a wait on another stream. */
struct ldg__entry {
  uint16_t kind;
  ldg_keep keep;
  const uint64_t *vec_ids;
  size_t n_vec;
  const ldg_range *ranges;
  size_t n_rng;
  ldg_stream *target;
  ldg_seq upto;
};

/* The destroyer, after its CAS of destroyed: whether an owner's
 * reservation may be in flight on s, so that it must run the heavy barrier
 * before it reads the tail (owned.c, OWNED STREAMS). */
bool ldg__ring_owner_may_reserve(ldg_stream *s);

/* Records e on s. See ldg_enqueue. */
int ldg__ring_enqueue(ldg_stream *s, const struct ldg__entry *e,
                      ldg_seq *seq_out);

/* RCU callback freeing a taken entry's out-of-line payload. */
void ldg__ext_free_cb(struct rcu_head *head);


/* ---- segment.c: segments, growth, head advance and retirement ------------------------ */

/* Creates the first segment of a new stream. LDG_ENOMEM. */
int ldg__ring_init(ldg_stream *s);

/* Frees every segment still held (the stream is being freed). */
void ldg__ring_free_all(ldg_stream *s);

/* Bytes of a segment of `size` slots, header included. */
size_t ldg__seg_bytes(uint32_t size);

/* CLOCK_MONOTONIC in ns: segment ages (sizing, reuse ages, the reclaimer's
 * cadence). */
uint64_t ldg__now_ns(void);

/* Frees a segment nobody can reach any more, now. */
void ldg__seg_destroy(struct ldg__seg *g);

/* The segment of an rcu_head, and the RCU callback that frees it. */
struct ldg__seg *ldg__seg_of_rcu(struct rcu_head *head);
void ldg__seg_free_cb(struct rcu_head *head);

/* Counts k more slots of g resolved; retires done segments. Under RCU. */
void ldg__seg_resolve(ldg_stream *s, struct ldg__seg *g, uint32_t k);

/* Counts one slot of g resolved, outside a read-side section of the
 * caller's (an enqueuer's, or ldg__take_one's): completing g may retire
 * segments. */
static inline void ldg__resolve_one(ldg_stream *s, struct ldg__seg *g) {
  bool v = ldg__ring_read_lock(s); /* the advance reads head */
  ldg__seg_resolve(s, g, 1);
  ldg__ring_read_unlock(s, v);
}

/* The segment of s that holds seq, walking from head. seq's slot is
 * unresolved, so that segment is at or after head and allocated. Under
 * RCU. head and next: acquire pairs with the seq_cst CASes that moved head
 * and linked each segment (release halves), after its header was written. */
static inline struct ldg__seg *ldg__seg_from_head(ldg_stream *s, ldg_seq seq) {
  /* Seq_cst: a visitor's first load of head after it counted itself
   * (segment.c, HOT REUSE: the store-buffering pair); a plain load on
   * x86, as acquire. */
  struct ldg__seg *g = ldg__load_seq_cst(&s->head);
  while (g->base + g->size <= seq) g = ldg__load_acquire(&g->next);
  return g;
}

/* Makes sure a segment follows the one ending at end, and that tailseg and
 * tail_end moved onto it. Under RCU. LDG_ENOMEM. */
int ldg__ring_extend(ldg_stream *s, ldg_seq end);

/* An enqueuer reserved seq >= grow, the grow_at it read (GROWING AHEAD):
 * if grow is still the newest segment's grow point, claims the growth (a
 * CAS: one claimer) and links the next segment ahead of need. Best effort:
 * out of memory leaves it to the extension at the end. seq is reserved and
 * unresolved (its segment and tailseg pinned). Not under RCU. */
void ldg__ring_grow_early(ldg_stream *s, ldg_seq seq, ldg_seq grow);

/* After a release: once a quarter of the newest segment is used and no spare
 * waits or is being prepared (a CAS claims it: no lock, no wait), prepares
 * the next segment (pool or fresh, zeroed) outside any
 * read-side section. Best effort: out of memory leaves no spare. Not under
 * RCU. */
void ldg__ring_prepare_spare(ldg_stream *s);

/* Retires s's parked spare, if any, through a grace period (one still being
 * prepared is left to its preparer). */
void ldg__ring_drop_spare(ldg_stream *s);

/* ---- pool.c: the retired-segment pool --------------------------------------------- */

/* The pool's bound unless set, and the least limit it adapts down to. */
#define LDG__POOL_DEFAULT_LIMIT ((size_t)32 << 20)
#define LDG__POOL_FLOOR ((size_t)1 << 20)

/* A retired segment past its grace period: to its ledger's pool, or freed. */
void ldg__seg_pool_put(struct ldg__seg *g);

/* RCU callback of a retired segment: ldg__seg_pool_put. */
void ldg__seg_pool_cb(struct rcu_head *head);

/* A reclaimer batch just brought `bytes` of l's segments past their grace
 * period: sets l's pool limit in force from it. Returns whether it trimmed
 * the pool (retired pooled segments to the reclaimer's list). */
bool ldg__pool_adapt(ldg_ledger *l, size_t bytes);

/* Pops a pooled segment of that size for s, or NULL. Under RCU. */
struct ldg__seg *ldg__pool_pop(ldg_stream *s, uint32_t size);

/* Empties the ledger's pools. With `now`, frees at once (teardown, after a
 * barrier, no concurrent pop); else after a grace period. */
void ldg__pools_drain(ldg_ledger *l, bool now);

/* Empties whole size classes of the ledger's pools, largest first, until
 * they hold at most bound bytes; freed after a grace period
 * (ldg_ledger_set_pool_limit, lowering the limit). Any thread. */
void ldg__pools_shrink(ldg_ledger *l, size_t bound);

/* ---- reclaim.c: retired segments, in batches --------------------------------- */

/* Starts the process's reclaimer thread if none runs (ldg_ledger_create,
 * ldg_stream_create: may block). */
void ldg__reclaim_start(void);

/* g was just made unreachable: after a grace period it goes to its ledger's
 * pool or is freed (a batch of the reclaimer, or call_rcu when none runs).
 * Never blocks. */
void ldg__reclaim_retire(struct ldg__seg *g);

/* Runs a batch of everything retired so far, after any batch in progress.
 * Blocks. Not inside a read-side section. */
void ldg__reclaim_flush(void);

/* ldg__reclaim_flush, then ldg__rcu_barrier: every deferred free queued so
 * far has run. */
void ldg__reclaim_barrier(void);

/* ---- release.c: claims, chunks, the transitive release engine --------------------- */

/* What the caller of ldg__engine gives it of s (see release.c). */
enum { LDG__TOP_BORROWED, LDG__TOP_OWNED, LDG__TOP_FINALIZE };

/* The release walk of s up to upto, in one of the modes above. */
void ldg__engine(ldg_stream *s, ldg_seq upto, int mode);

/* Releases s up to upto, transitively. The caller holds a reference to s. */
void ldg__release(ldg_stream *s, ldg_seq upto);
/* Fires a wait taken outside a walk (an overtaken enqueuer's, or
 * ldg__take_one's) on target a (NULL: none) up to upto: a skip, as when a
 * walk fires one, if a was destroyed meanwhile (acquire pairs with the
 * destroyer's CAS). The engine takes over the wait's reference. */
static inline void ldg__fire_wait(ldg_stream *a, ldg_seq upto) {
  if (a == NULL) return;
  bool live = !ldg__load_acquire(&a->destroyed);
  ldg__engine(a, live ? upto : 0, LDG__TOP_OWNED);
}

/* Takes the entry of a FULL slot of s (segment g) that the caller won
 * through s->asked (ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER):
 * resolves the slot, then runs its keep or fires its wait. Not under RCU. */
void ldg__take_one(ldg_stream *s, struct ldg__seg *g, struct ldg__slot *slot);

/* s just lost its last reference: destroys it if needed, releasing
 * everything, and frees it. */
void ldg__finalize(ldg_stream *s);

/* Destroys s on behalf of ldg_stream_destroy (caller holds a reference).
 * Returns false if it was destroyed already. */
bool ldg__destroy(ldg_stream *s);

/* Destroys each of ss[0 .. n) not destroyed yet, as ldg__destroy, with one
 * heavy barrier for all of them (owned.c, OWNED STREAMS, "Destroy"): for
 * ldg_ledger_destroy, which holds a reference to each. n <=
 * LDG__DESTROY_BATCH. */
#define LDG__DESTROY_BATCH 256
_Static_assert(LDG__DESTROY_BATCH == 256, "ledger.h, note (k), says 256");
void ldg__destroy_batch(ldg_stream *const *ss, size_t n);

/* ---- summary.c: the queries' walk and the segments' summaries --------------------- */

/* What a query looks for: an operation naming vector id, or one whose host
 * ranges overlap [addr, last] (last = addr + bytes - 1, no wrap). */
enum { LDG__PROBE_VEC, LDG__PROBE_RANGE };
struct ldg__probe {
  int kind;
  uint64_t id;
  uint64_t addr, last;
};

/* Whether the operation in slot (published, kind OP) matches p. */
bool ldg__probe_matches(const struct ldg__slot *slot,
                        const struct ldg__probe *p);

/* Calls fn(s, seq, arg) on every pending operation of s (kind OP, seq not
 * yet released) that matches p, in seq order, until fn returns true;
 * skips what the summaries rule out. Caller is inside an RCU read-side
 * section. Returns whether fn returned true. */
typedef bool (*ldg__visit_fn)(const ldg_stream *s, ldg_seq seq, void *arg);
bool ldg__ring_visit(const ldg_stream *s, const struct ldg__probe *p,
                     ldg__visit_fn fn, void *arg);

/* Empties g's summaries and sets its index, for a new life of g: called on
 * a segment nobody else can reach yet, before the store that links it.
 * Turns the published filters on for the life once g's ledger was queried. */
void ldg__summary_reset(struct ldg__seg *g, uint32_t index);

/* The published filters' grain: ldg__pubf_widen widens them to whole
 * blocks of LDG__PUBF_VEC_BLOCK ids and LDG__PUBF_ADDR_BLOCK bytes (powers
 * of two, so a filter's bounds are block edges), so ids and addresses that
 * climb one by one, as a stream's often do, widen a filter once per block,
 * not once per entry. */
#define LDG__PUBF_VEC_BLOCK 64u
#define LDG__PUBF_ADDR_BLOCK (1u << 20)

/* Widens f to admit [vlo, vhi] and [alo, ahi] (an empty one: nothing),
 * each to whole blocks (the slow side of ldg__pubf_note): plain stores if
 * one (the stream's one publisher), else atomic RMWs. */
void ldg__pubf_widen(struct ldg__pubf *f, bool one, uint64_t vlo,
                     uint64_t vhi, uint64_t alo, uint64_t ahi);

/* What one operation names, for the published filters: its ids lie in
 * [vlo, vhi] and its bytes in [alo, ahi]. Empty: lo > hi. Gathered by
 * ring.c's ldg__pubf_note_entry (inline, up to two ids and one range) or
 * ldg__pubf_note_slow (a second pass, out of line), only in segments whose
 * life keeps the filters. */
struct ldg__pubf_span {
  uint64_t vlo, vhi, alo, ahi;
};

/* The enqueuer of an operation naming x at a seq of g, whose life keeps
 * published filters (g->pubf_on), before its publication (summary.c, THE
 * PUBLISHED FILTERS): widens g's filter of that seq's kind (one: the seq
 * is published with LDG__PUB_STORE) so that it admits x. Loads and
 * compares only while the filter admits x already. Relaxed: summary.c
 * says what orders them. */
static inline __attribute__((always_inline)) void ldg__pubf_note(
    struct ldg__seg *g, const struct ldg__pubf_span *x, bool one) {
  struct ldg__pubf *f = one ? &g->sum.one : &g->sum.any;
  /* One branch for the four words: nothing to store on the common path
   * (a bitwise or of the compares, on purpose: ints, so that clang's
   * -Wbitwise-instead-of-logical sees no boolean operand). The raw bounds:
   * the filter's are block edges, so a value inside them has its whole
   * block inside. */
  if ((int)(x->vlo < ldg__load_relaxed(&f->vec_lo)) |
      (int)(x->vhi > ldg__load_relaxed(&f->vec_hi)) |
      (int)(x->alo < ldg__load_relaxed(&f->addr_lo)) |
      (int)(x->ahi > ldg__load_relaxed(&f->addr_hi)))
    ldg__pubf_widen(f, one, x->vlo, x->vhi, x->alo, x->ahi);
}

/* ---- vindex.c: the vector index ----------------------------------------------------- */

struct ldg__vindex;

/* A table for about `ids` distinct ids pending at once; NULL if ids is 0 or
 * too large, or out of memory. */
struct ldg__vindex *ldg__vindex_new(size_t ids);
void ldg__vindex_free(struct ldg__vindex *x);
size_t ldg__vindex_bytes(const struct ldg__vindex *x);

/* One entry naming ids[0..n) becomes pending / was taken. */
void ldg__vindex_add(struct ldg__vindex *x, const uint64_t *ids, size_t n);
void ldg__vindex_remove(struct ldg__vindex *x, const uint64_t *ids, size_t n);

/* True: no pending indexed entry names id (a definite miss). False:
 * maybe; walk the rings. */
bool ldg__vindex_absent(const struct ldg__vindex *x, uint64_t id);

/* ---- registry.c ------------------------------------------------------------------- */

/* Takes / drops a reference to l (streams, segments and ext blocks hold
 * one). */
void ldg__ledger_ref(ldg_ledger *l);
void ldg__ledger_unref(ldg_ledger *l);

/* s was just marked destroyed (by the caller's CAS): queues it to be
 * unlinked from its ledger's registry and unlinks it now if the registry
 * mutex is free. Never waits for the mutex. */
void ldg__registry_unlink(ldg_stream *s);

/* Takes a reference unless the count already reached zero. */
bool ldg__stream_tryref(ldg_stream *s);

/* Drops a reference; returns true if it was the last one (the caller then
 * owns the stream's finalisation). */
bool ldg__stream_unref_is_last(ldg_stream *s);

/* Sets bit (LDG__LIFE_*) of s; whoever sets the second bit frees s after a
 * grace period. FINALIZED is the last step of finalisation. */
void ldg__stream_life(ldg_stream *s, uint32_t bit);

#endif /* STREAMLEDGER_INTERNAL_H */
