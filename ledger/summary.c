/*
 * The queries' walk of a ring, and the summaries that let it skip segments
 * (issue 11: a holds_vector miss cost 3.4 ns per pending entry, 447 us at
 * 128 k, and a reader re-read every pending slot, the enqueuers' lines, on
 * every query). ring.c opens with the layout; segment.c says who may
 * reclaim a slot and when.
 *
 * QUERY SUMMARIES
 *   Each segment carries, on two cache lines that enqueuers and releases
 *   never touch (struct ldg__summary; its third line, the published
 *   filters, is the enqueuers': below), two filters (struct ldg__filter: the
 *   range of the vector ids, a 128-bit hash set of them, and the range of
 *   the host bytes of some entries):
 *     own   summarises slots [0, upto) of the segment;
 *     span  (once jump is set) summarises this segment and every later one
 *           before jump, the segment 2^L places later in the stream, L =
 *           level(index) (the number of trailing zero bits of the
 *           segment's index, capped): jumps nest like a Fenwick tree, so a
 *           walk over n complete segments takes O(log^2 n) steps.
 *   A filter may only ever say "maybe": the claim each one makes is
 *     (S) every entry of the slots it covers that is pending now, or
 *         becomes pending later, names only ids and ranges the filter
 *         admits.
 *   A query skips slots a filter covers when the filter rules its probe
 *   out, and otherwise reads them one by one as before. Only queries write
 *   these summaries (and the extender the copy of next, once, after its
 *   linking CAS), under rcu_read_lock, with relaxed atomics and release
 *   stores (no locked instruction but where a filter word grows); only the
 *   thread that links a segment resets them (ldg__summary_reset), before
 *   the linking CAS.
 *
 * WHY (S) HOLDS FOR own
 *   A query extends own over a run of slots from upto: slot q is "decided"
 *   when it is FULL (published: its payload is immutable until the segment's
 *   next life; the query adds its ids and ranges), RETRACTED (never
 *   pending; no slot holds ABANDONED since pub11), or q <= released as
 *   the query read it (released only grows: a release covered q and no
 *   query reports q again). The run stops
 *   at the first slot not decided (EMPTY above released: reserved or not,
 *   not yet published; it may become pending). The query then ORs and
 *   widens its findings into own (each word on its own: every field only
 *   grows, so a reader mixing fields of several writers still reads a
 *   superset) and then stores the run's end into upto (release; a plain
 *   store, not a locked CAS: issue 11, "the reader's own cost"). By
 *   induction on the stores of one life: a query that reads upto = u
 *   (acquire) synchronises with the store of u, made after its writer read
 *   the upto u0 it started from (acquire, so the slots below u0 were in own
 *   by the same argument) and merged its findings for [u0, u): it reads own
 *   with every slot below u in it. Racing queries may store out of order
 *   and lower upto; that only says less (own keeps what they merged, and
 *   the next query reads those slots again), never more. A FULL slot's
 *   entry is the same until its segment is retired and reused, and own may
 *   keep the ids of an entry taken since: that is only a "maybe".
 *   A slot left out as "q <= released" had been covered by a release when
 *   the summary came to cover it, and a query reporting it would be one
 *   that read released earlier: the same answer as when a release covers
 *   an entry while a query walks (ledger.h: each answer is one that was
 *   true at some instant of the call).
 *
 * WHY (S) HOLDS FOR span
 *   span is built only over complete segments (upto = size: every slot
 *   decided, own final but for late writers adding what it has already):
 *   the builder reads upto = size (acquire) of the segment, then unions its
 *   own with the spans (or, at level 0, the complete owns) of the segments
 *   at index + 1, + 2, + 4, ..., + 2^(L-1), reached through their jumps
 *   (acquire: each pairs with the release store that set it, after its
 *   span), stores the union into span and then jump (release). Racing
 *   builders store the same jump and fields that each admit everything (S)
 *   needs; a reader that reads jump (acquire) reads fields of its writer or
 *   of a later one. Segments covered by a span are complete, so entries
 *   enqueued later land beyond jump, never under it.
 *
 * THE PUBLISHED FILTERS (issue 11, tenth session: the reader's lines)
 *   own summarises only what some query has read, so every query read the
 *   slots published since the last one on the segment that holds tail:
 *   lines the enqueuers had just written and write again (the take, the
 *   next life), ~10 per enqueuer per query on the serving row, each
 *   turning that enqueuer's next write to it into a coherence miss. So
 *   each segment also carries, on a third summary line, two filters
 *   (struct ldg__pubf: the range of the vector ids and that of the host
 *   bytes) that ENQUEUERS keep: one, of the seqs published by the
 *   stream's one publisher (LDG__PUB_STORE: a single-issuer stream's, an
 *   owned stream's owner's), and any, of every other seq. Their claim:
 *     (P) every entry published into a slot of the segment in this life
 *         names only ids and bytes that one or any admits, from before the
 *         store or CAS that publishes it on.
 *   The enqueuer widens its seq's filter (ldg__pubf_note) after reserving
 *   and before publishing, so before any load of its slot reads FULL and
 *   before its enqueue returns. It loads the four words and stores only
 *   where its entry widens one: once a segment's ids and ranges repeat,
 *   it only reads the line. one is widened with plain (relaxed) stores:
 *   the one-publisher rule (ring.c, PUBLICATION ON A STREAM WITH ONE
 *   PUBLISHER) orders its writers' calls by happens-before, so each reads
 *   what the last one wrote and stores a superset. any is widened with
 *   atomic RMWs, word by word (ldg__lower, ldg__raise): several enqueuers
 *   may widen it at once, and a plain store of what one of them read could
 *   drop another's widening (model BUG_PUBF_PLAIN). Every word only grows
 *   within a life, so a reader mixing words of several writers reads a
 *   superset of each.
 *   The walk. A query reads head, then tailseg (last: the newest segment
 *   then, on the stream's read-mostly line), and walks from head to last.
 *   On each of the newest LDG__PUBF_RECENT + 1 segments (by index against
 *   last's: those enqueuers publish into, and the one grown ahead) whose
 *   life keeps the filters, when neither admits its probe, it skips the
 *   segment: no slot, no released, no tail, and upto stays (the next query
 *   asks the filters again); it moves on through the summaries' copy of
 *   next, which the extender stores after its linking CAS. It reads tail
 *   (as before: every seq up to it is linked, and it bounds the slots
 *   read) only when a segment's slots must be read, and stops at last, or
 *   where tail says nothing later is reserved. So a miss that the filters
 *   rule out reads none of the lines enqueuers write on every enqueue.
 *   Why that answer is one ledger.h allows: an entry whose enqueue
 *   returned before the query began (i) was widened into its filter
 *   before that return, so the query's relaxed loads, which happen after
 *   it, read that widening or a later value of the same word (read-read
 *   coherence), which admits at least as much; (ii) is in a segment at or
 *   before last: its enqueuer reserved its seq against a tail_end raised
 *   after tailseg was swung to a segment that ends above that seq
 *   (segment.c, ldg__raise_tail_end; model extend_mp.pml), and that swing
 *   happens before the query's load of tailseg, which reads it or a later
 *   one; (iii) is not released, so its segment is at or after head. An
 *   entry published while the query runs belongs to an enqueue that
 *   overlaps the call, reported or not. And skipping is the answer reading
 *   the slots would give: a slot the query would read FULL was widened in
 *   before, by (P). Older segments keep the walk of own and the jumps,
 *   which read each slot once and then skip the segment, and runs of
 *   segments in O(log^2), where the filters would cost a line a segment:
 *   a segment's published filters admit everything it ever held, and own,
 *   built from the slots still pending, need not.
 *   On for a life: enqueuers pay for the filters (about 31 instructions a
 *   serving operation, 41 a private one, callgrind: an inline check, loads and
 *   compares, for an operation of at most two ids and one range that the
 *   filter admits already, else an out-of-line pass that gathers its
 *   bounds; ring.c, ldg__pubf_note_entry; 54 before the eleventh
 *   session's inline check) only in ledgers that are queried, and one load
 *   and branch elsewhere. The linker turns them
 *   on for the segment's life, in ldg__summary_reset (pubf_on, on the
 *   header's line for enqueuers and on the summary's for queries), once
 *   the ledger's queried flag is set: by the first query that walked a
 *   newest segment without them (ldg__note_queried). Fixed for the life and
 *   written before the linking CAS, so every enqueuer of the life reads
 *   the same value (its reach of the segment reads from that CAS) and a
 *   query reads the one its walk's acquires pass on: a life whose filters
 *   are off is walked as before (own, then the slots), and in a life that
 *   keeps them every enqueuer widened before publishing. The flag itself
 *   is a hint (relaxed): whichever value a linker reads, its life is
 *   consistent (model BUG_PUBF_IGNORE_ON: a query that trusts the filters
 *   of a life without them misses its entries).
 *   Reuse: reset with the summaries by the thread that links the segment,
 *   before the linking CAS (REUSE AND RETIREMENT below), so before any
 *   enqueuer of the new life reaches the segment (through that CAS,
 *   tailseg, next or prev, with acquire). An enqueuer of the last life
 *   widened before publishing its slot or giving it up (ldg__resolve_one),
 *   both before the segment could be retired: no late write of an old life
 *   lands in a new one (model BUG_PUBF_RESET_LATE: a reset after the link
 *   wipes a widening). Queries read the filters only inside the walk's
 *   read-side section, as the summaries.
 *   Model: ledger/model/pubf.pml (two segments, the walk to last).
 *   Mutants: tools/mutation/mutants.txt
 *   (pubf-*). Test: tests/unit/summary_test.c (test_published_filters,
 *   test_published_concurrent).
 *
 * REUSE AND RETIREMENT
 *   A segment's summaries belong to one life. Queries stand on segments only
 *   inside an RCU read-side section, as before: a segment reached from head,
 *   from next or from jump is not reused until that section ends (segments
 *   are retired from the head in order, so a jump's target, later in the
 *   same stream, is retired after its origin; jump targets of a segment's
 *   earlier life are cleared before it is linked again). So every write of
 *   a summary happens within the life it describes, before the grace period
 *   that precedes the segment's reuse. The thread that links a segment
 *   (ldg__ring_init, ldg__ring_extend; the segment is its own, fresh, pooled
 *   or a spare) resets the summaries and sets index before the linking CAS
 *   (seq_cst, a release), which a query's acquire of head, next or tailseg
 *   pairs with: the query sees the reset, never an earlier life's filter.
 *   A segment never linked (a loser's) keeps a reset it never needed.
 *
 * WHAT A QUERY TOUCHES
 *   Per stream: head, tailseg and owner (the read-mostly line, moved once
 *   per segment; owner is read by ldg__visit_begin, which then counts the
 *   query in visitors, a line of its own, on a stream another thread
 *   owns), tail (the enqueuers' line) only when a segment's slots are
 *   read, the published filters' lines of the newest segments when their
 *   lives keep them (their enqueuers write them only while those filters
 *   grow), and per segment visited its two summary lines, which hold
 *   copies of base and size (set before linking) and of next (stored by
 *   the extender after its linking CAS, or by a query once it read the
 *   header's next set; acquire/release, passing on the linking CAS).
 *   released (the releasers' line) is read only when the walk needs it,
 *   once: a filter admits the probe (then the slots it summarises are read
 *   from released + 1), a slot read is EMPTY (taken, or not yet
 *   published), or a slot matches (an entry at or below released is not
 *   reported). A slot read before released is: an entry FULL above it was
 *   pending when released was read, as ledger.h requires. The walk stops
 *   at last, or at the segment that holds tail. So a miss that the
 *   summaries and the published filters rule out reads no slot, no segment
 *   header, not released and not tail: of the lines enqueuers and releases
 *   write, only the published filters' lines (written while a filter
 *   grows). Slots published since the last query are read only when their
 *   segment's published filters admit the probe, and then once, by the
 *   query that extends the summary over them.
 *   The release protocol is unchanged, the enqueuer's only by the widening
 *   before its publication and the extender's by its store of the copy of
 *   next (queries still only read slot states, with acquire, and FULL
 *   slots' payloads; head moved to another line of the stream, not to
 *   another protocol), so the ring's Promela models are unchanged and
 *   pubf.pml models the filters and the walk to last;
 *   tests/unit/summary_test.c checks (S) in every slot state, across reuse
 *   and with upto lowered as a racing query's late store may, and
 *   tools/mutation/mutants.txt (sum-*) each rule above.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/rcu.h"

/* Jumps span at most 2^LDG__JUMP_MAX segments (the first segment's, index
 * 0, too: it is built only once that many follow). */
#define LDG__JUMP_MAX 16u

static unsigned ldg__level(uint32_t index) {
  if (index == 0) return LDG__JUMP_MAX;
  unsigned l = (unsigned)__builtin_ctz(index);
  return l < LDG__JUMP_MAX ? l : LDG__JUMP_MAX;
}

/* ---- Filters ---------------------------------------------------------------------- */

/* A filter being gathered by one thread. */
struct ldg__flt {
  uint64_t vec_lo, vec_hi, addr_lo, addr_hi, bits;
};

static const struct ldg__flt ldg__flt_empty = {UINT64_MAX, 0, UINT64_MAX, 0,
                                               0};

static uint64_t ldg__vec_bit(uint64_t id) {
  return 1ull << ((id * 0x9e3779b97f4a7c15ull) >> 58); /* one of 64 */
}

/* The ids and ranges of the operation in slot. */
static void ldg__slot_payload(const struct ldg__slot *slot,
                              const uint64_t **w, size_t *n_vec,
                              size_t *n_rng) {
  if (slot->aux == LDG__OP_EXT) {
    *w = slot->u.op.d.ext->w;
    *n_vec = slot->u.op.d.ext->n_vec;
    *n_rng = slot->u.op.d.ext->n_rng;
  } else {
    *w = slot->u.op.d.in.w;
    *n_vec = slot->u.op.d.in.n_vec;
    *n_rng = slot->u.op.d.in.n_rng;
  }
}

static void ldg__flt_add(struct ldg__flt *f, const struct ldg__slot *slot) {
  if (slot->kind != LDG__KIND_OP) return; /* a wait names nothing */
  const uint64_t *w;
  size_t n_vec, n_rng;
  ldg__slot_payload(slot, &w, &n_vec, &n_rng);
  for (size_t i = 0; i < n_vec; i++) {
    if (w[i] < f->vec_lo) f->vec_lo = w[i];
    if (w[i] > f->vec_hi) f->vec_hi = w[i];
    f->bits |= ldg__vec_bit(w[i]);
  }
  for (size_t i = 0; i < n_rng; i++) {
    uint64_t a = w[n_vec + 2 * i], last = a + (w[n_vec + 2 * i + 1] - 1);
    if (a < f->addr_lo) f->addr_lo = a;
    if (last > f->addr_hi) f->addr_hi = last;
  }
}

static void ldg__flt_union(struct ldg__flt *f, const struct ldg__flt *x) {
  if (x->vec_lo < f->vec_lo) f->vec_lo = x->vec_lo;
  if (x->vec_hi > f->vec_hi) f->vec_hi = x->vec_hi;
  if (x->addr_lo < f->addr_lo) f->addr_lo = x->addr_lo;
  if (x->addr_hi > f->addr_hi) f->addr_hi = x->addr_hi;
  f->bits |= x->bits;
}

/* Relaxed loads and stores of a shared filter: what orders them is the
 * acquire of upto or jump before the load, and the release store of upto or the
 * release store of jump after the store (see the top of this file). */
static void ldg__flt_load(struct ldg__flt *f, const struct ldg__filter *x) {
  f->vec_lo = ldg__load_relaxed(&x->vec_lo);
  f->vec_hi = ldg__load_relaxed(&x->vec_hi);
  f->addr_lo = ldg__load_relaxed(&x->addr_lo);
  f->addr_hi = ldg__load_relaxed(&x->addr_hi);
  f->bits = ldg__load_relaxed(&x->bits);
}

static void ldg__flt_store(struct ldg__filter *x, const struct ldg__flt *f) {
  ldg__store_relaxed(&x->vec_lo, f->vec_lo);
  ldg__store_relaxed(&x->vec_hi, f->vec_hi);
  ldg__store_relaxed(&x->addr_lo, f->addr_lo);
  ldg__store_relaxed(&x->addr_hi, f->addr_hi);
  ldg__store_relaxed(&x->bits, f->bits);
}

/* Lowers *x to v (relaxed: x's own modification order is all that counts;
 * the release store of upto publishes it). */
static void ldg__lower(_Atomic uint64_t *x, uint64_t v) {
  uint64_t cur = ldg__load_relaxed(x);
  while (v < cur && !ldg__cas_weak_relaxed(x, &cur, v)) {
  }
}

static void ldg__raise(_Atomic uint64_t *x, uint64_t v) {
  uint64_t cur = ldg__load_relaxed(x);
  while (v > cur && !ldg__cas_weak_relaxed(x, &cur, v)) {
  }
}

/* Widens the shared filter x by f, field by field: other queries may be
 * widening it too, and each field only grows. */
static void ldg__flt_merge(struct ldg__filter *x, const struct ldg__flt *f) {
  ldg__lower(&x->vec_lo, f->vec_lo);
  ldg__raise(&x->vec_hi, f->vec_hi);
  ldg__lower(&x->addr_lo, f->addr_lo);
  ldg__raise(&x->addr_hi, f->addr_hi);
  /* Relaxed: as above. Only when a bit is new: the read is cheaper than
   * the locked OR. */
  if ((ldg__load_relaxed(&x->bits) & f->bits) != f->bits)
    atomic_fetch_or_explicit(&x->bits, f->bits, memory_order_relaxed);
}

/* Whether the shared filter x may admit p, loading only the words p's kind
 * needs (relaxed, as ldg__flt_load). */
static bool ldg__filter_maybe(const struct ldg__filter *x,
                              const struct ldg__probe *p) {
  if (p->kind == LDG__PROBE_VEC) {
    if (p->id < ldg__load_relaxed(&x->vec_lo) ||
        p->id > ldg__load_relaxed(&x->vec_hi))
      return false;
    return (ldg__load_relaxed(&x->bits) & ldg__vec_bit(p->id)) != 0;
  }
  return p->addr <= ldg__load_relaxed(&x->addr_hi) &&
         p->last >= ldg__load_relaxed(&x->addr_lo);
}

bool ldg__probe_matches(const struct ldg__slot *slot,
                        const struct ldg__probe *p) {
  const uint64_t *w;
  size_t n_vec, n_rng;
  ldg__slot_payload(slot, &w, &n_vec, &n_rng);
  if (p->kind == LDG__PROBE_VEC) {
    for (size_t i = 0; i < n_vec; i++)
      if (w[i] == p->id) return true;
    return false;
  }
  for (size_t i = 0; i < n_rng; i++) {
    uint64_t a = w[n_vec + 2 * i], last = a + (w[n_vec + 2 * i + 1] - 1);
    if (a <= p->last && p->addr <= last) return true;
  }
  return false;
}

/* ---- Reset ------------------------------------------------------------------------ */

/* Empties a published filter (relaxed: as the summaries' reset below). */
static void ldg__pubf_reset(struct ldg__pubf *f) {
  ldg__store_relaxed(&f->vec_lo, UINT64_MAX);
  ldg__store_relaxed(&f->vec_hi, 0);
  ldg__store_relaxed(&f->addr_lo, UINT64_MAX);
  ldg__store_relaxed(&f->addr_hi, 0);
}

void ldg__summary_reset(struct ldg__seg *g, uint32_t index) {
  /* Relaxed: g is not reachable yet; the linking CAS (or, for a stream's
   * first segment, the registry's release store of the stream) publishes
   * it. */
  ldg__store_relaxed(&g->sum.upto, 0);
  g->sum.size = g->size;
  g->sum.base = g->base;
  g->sum.index = index;
  ldg__flt_store(&g->sum.own, &ldg__flt_empty);
  ldg__store_relaxed(&g->sum.jump, (struct ldg__seg *)NULL);
  ldg__store_relaxed(&g->sum.next, (struct ldg__seg *)NULL);
  ldg__pubf_reset(&g->sum.one);
  ldg__pubf_reset(&g->sum.any);
  /* On for this life once the ledger was queried ("On for a life");
   * relaxed: a hint, fixed here for the life. */
  bool on = ldg__load_relaxed(&g->ledger->queried);
  g->pubf_on = on;
  g->sum.pubf_on = on;
}

/* ---- The published filters -------------------------------------------------------- */

void ldg__pubf_widen(struct ldg__pubf *f, bool one, uint64_t vlo,
                     uint64_t vhi, uint64_t alo, uint64_t ahi) {
  if (vlo <= vhi) { /* to whole blocks */
    vlo &= ~(uint64_t)(LDG__PUBF_VEC_BLOCK - 1);
    vhi |= LDG__PUBF_VEC_BLOCK - 1;
  }
  if (alo <= ahi) {
    alo &= ~(uint64_t)(LDG__PUBF_ADDR_BLOCK - 1);
    ahi |= LDG__PUBF_ADDR_BLOCK - 1;
  }
  if (one) {
    /* Plain (relaxed) stores: the one publisher's calls are ordered by
     * happens-before, so nobody else writes f meanwhile and each word
     * loaded here is the last one stored (THE PUBLISHED FILTERS). */
    if (vlo < ldg__load_relaxed(&f->vec_lo))
      ldg__store_relaxed(&f->vec_lo, vlo);
    if (vhi > ldg__load_relaxed(&f->vec_hi))
      ldg__store_relaxed(&f->vec_hi, vhi);
    if (alo < ldg__load_relaxed(&f->addr_lo))
      ldg__store_relaxed(&f->addr_lo, alo);
    if (ahi > ldg__load_relaxed(&f->addr_hi))
      ldg__store_relaxed(&f->addr_hi, ahi);
    return;
  }
  /* Several enqueuers may widen any at once: word by word, each only
   * grows (relaxed, as in ldg__flt_merge). */
  ldg__lower(&f->vec_lo, vlo);
  ldg__raise(&f->vec_hi, vhi);
  ldg__lower(&f->addr_lo, alo);
  ldg__raise(&f->addr_hi, ahi);
}

/* Whether the published filter f may admit p (relaxed: THE PUBLISHED
 * FILTERS says why every widening a query must see is read). */
static bool ldg__pubf_maybe(const struct ldg__pubf *f,
                            const struct ldg__probe *p) {
  if (p->kind == LDG__PROBE_VEC)
    return p->id >= ldg__load_relaxed(&f->vec_lo) &&
           p->id <= ldg__load_relaxed(&f->vec_hi);
  return p->addr <= ldg__load_relaxed(&f->addr_hi) &&
         p->last >= ldg__load_relaxed(&f->addr_lo);
}


/* ---- What a walk reads --------------------------------------------------------- */

/* What this thread's queries read (ldg__thread_query_reads): each walk
 * counts in a local and adds it here once (in a shared library every
 * access to a thread-local may be a call). */
static _Thread_local ldg__query_reads ldg__reads;

ldg__query_reads ldg__thread_query_reads(void) { return ldg__reads; }

/* What they wrote (ldg__thread_query_writes), counted where they write:
 * those paths are the rare ones. */
static _Thread_local uint64_t ldg__writes;

uint64_t ldg__thread_query_writes(void) { return ldg__writes; }

/* g's successor, or NULL. From the copy on the summary's line when a query
 * saw it before; else from the header (whose line every release writes;
 * counted in *headers), then copied. */
static struct ldg__seg *ldg__next(struct ldg__seg *g, uint64_t *headers) {
  /* Acquire: pairs with the release store below, by a query that read the
   * header's next with acquire (which pairs with the linking CAS, after
   * the successor's header and reset summaries were written). */
  struct ldg__seg *n = ldg__load_acquire(&g->sum.next);
  if (n != NULL) return n;
  (*headers)++;
  n = ldg__load_acquire(&g->next); /* the linking CAS, as above */
  /* Release: passes on what the acquire above saw. Every writer stores the
   * same value (next is set once per life), and the reset cleared it. */
  if (n != NULL) {
    ldg__store_release(&g->sum.next, n);
    ldg__writes++;
  }
  return n;
}

/* ---- Jumps ------------------------------------------------------------------------ */

/* Whether g is complete: every slot decided, own final. Acquire: pairs with
 * the release store of size into upto, made after its writer's findings
 * went into own (and after its acquire of the upto it started from). */
static bool ldg__complete(const struct ldg__seg *g) {
  return ldg__load_acquire(&g->sum.upto) == g->sum.size;
}

/* g is complete and has no jump yet: builds it if the 2^L segments it spans
 * are all complete and summarised (L >= 1), else leaves it. */
static void ldg__jump_build(struct ldg__seg *g, unsigned level,
                            uint64_t *headers) {
  struct ldg__flt acc, f;
  ldg__flt_load(&acc, &g->sum.own);
  struct ldg__seg *h = ldg__next(g, headers);
  for (unsigned k = 0; k < level; k++) {
    if (h == NULL) return;
    /* h is the segment at index + 2^k, of level k. */
    if (k == 0) {
      if (!ldg__complete(h)) return;
      ldg__flt_load(&f, &h->sum.own);
      h = ldg__next(h, headers);
    } else {
      /* Acquire: pairs with the release store below, by h's builder. */
      struct ldg__seg *j = ldg__load_acquire(&h->sum.jump);
      if (j == NULL) return;
      ldg__flt_load(&f, &h->sum.span);
      h = j;
    }
    ldg__flt_union(&acc, &f);
  }
  if (h == NULL) return; /* the segment after the span is not linked yet */
  ldg__flt_store(&g->sum.span, &acc);
  /* Release: publishes span (acquire in ldg__ring_visit and above). */
  ldg__store_release(&g->sum.jump, h);
  ldg__writes++;
}

/* ---- The walk --------------------------------------------------------------------- */

/* A query walked one of a stream's newest segments without published
 * filters: segments linked from now on keep them ("On for a life").
 * Relaxed: a hint; the load first, so that the line is written once. */
static void ldg__note_queried(ldg_ledger *l) {
  if (!ldg__load_relaxed(&l->queried)) ldg__store_relaxed(&l->queried, true);
}

/* The stream's released mark, read once and only when a walk needs it (a
 * filter or a slot may match, or a slot is EMPTY): a miss that summaries
 * rule out never touches the releasers' line. */
struct ldg__lazy_released {
  const ldg_stream *s;
  bool have;
  ldg_seq r;
  ldg__query_reads rd; /* this walk's reads */
};

static ldg_seq ldg__released(struct ldg__lazy_released *x) {
  if (!x->have) {
    x->rd.stream_lines++;
    /* Acquire: pairs with the claims' CAS; seqs at or below it are skipped
     * (their release began). Read after some slots' states: an entry found
     * FULL above it was pending when it was read. */
    x->r = ldg__load_acquire(&x->s->released);
    x->have = true;
  }
  return x->r;
}

/* The published filters are asked for the newest LDG__PUBF_RECENT + 1
 * segments of a stream (by index, against the walk's last): those its
 * enqueuers publish into. Older ones are left to own and the jumps, which
 * skip long runs of them in O(log^2) (THE PUBLISHED FILTERS, "The walk"). */
#define LDG__PUBF_RECENT 2u

static bool ldg__ring_walk(const ldg_stream *s, const struct ldg__probe *p,
                           ldg__visit_fn fn, void *arg) {
  struct ldg__lazy_released rel = {s, false, 0, {0, 0, 0, 0, 0}};
  /* head: acquire pairs with the seq_cst CASes that moved head (release
   * half), after the segment's header and reset summaries were written.
   * Seq_cst: a visitor's first load after it counted itself (segment.c,
   * HOT REUSE); on x86 a plain load either way. */
  struct ldg__seg *g = ldg__load_seq_cst(&s->head);
  LDG__HOOK(LDG__HOOK_QUERY_HEAD, (ldg_stream *)s);
  /* last: the newest segment now, where the walk ends (THE PUBLISHED
   * FILTERS, "The walk": every entry whose enqueue returned before the
   * query began is at or before it). Acquire: pairs with the seq_cst CAS
   * that swung tailseg (release half), after last's header and reset
   * summaries were written. Read after head: at or after head's segment;
   * the newest segment is never retired, and our read-side section (and
   * visitor count) keeps it this life's once it is not. On the stream's
   * read-mostly line, moved once per segment. */
  const struct ldg__seg *last = ldg__load_acquire(&s->tailseg);
  const ldg_seq last_base = last->sum.base;
  const uint32_t last_index = last->sum.index;
  /* tail: read only when a segment's slots must be read (lazily, below):
   * as ldg_mark, every seq up to it is linked. */
  ldg_seq t = 0;
  bool have_t = false;
  bool found = false;
  while (g != NULL && g->sum.base <= last_base) {
    rel.rd.segments++;
    ldg_seq base = g->sum.base, end = base + g->sum.size;
    /* Acquire: pairs with the release store in ldg__jump_build. */
    struct ldg__seg *j = ldg__load_acquire(&g->sum.jump);
    if (j != NULL && !ldg__filter_maybe(&g->sum.span, p)) {
      g = j; /* nothing of g .. j's predecessor can match */
      continue;
    }
    if (g->sum.index + LDG__PUBF_RECENT >= last_index) {
      /* One of the newest segments: what its enqueuers published is in its
       * published filters (THE PUBLISHED FILTERS) if its life keeps them;
       * if neither admits p, nothing of g can match: on to the next, up to
       * last, without a slot, released or tail. */
      if (g->sum.pubf_on) {
        rel.rd.filters++;
        if (!ldg__pubf_maybe(&g->sum.one, p) &&
            !ldg__pubf_maybe(&g->sum.any, p)) {
          if (g == last) break;
          g = ldg__next(g, &rel.rd.headers);
          continue;
        }
      } else {
        ldg__note_queried(s->ledger);
      }
    }
    if (!have_t) {
      t = ldg__tail_acquire(s);
      have_t = true;
      rel.rd.stream_lines++;
    }
    if (base > t) break; /* nothing reserved here yet, nor later */
    /* upto: acquire, see ldg__complete. */
    uint32_t u = ldg__load_acquire(&g->sum.upto);
    ldg_seq hi = end - 1 < t ? end - 1 : t;
    ldg_seq f = base + u; /* the first slot that may be undecided */
    ldg_seq from = f;
    if (u != 0 && ldg__filter_maybe(&g->sum.own, p)) {
      /* Read the summarised slots too, those still pending. */
      ldg_seq r = ldg__released(&rel);
      from = base > r + 1 ? base : r + 1;
      if (f < from) f = from; /* at or below released: decided */
    }
    struct ldg__flt acc = ldg__flt_empty;
    bool extending = true;
    for (ldg_seq q = from; q <= hi && !found; q++) {
      const struct ldg__slot *slot = &g->slots[q - base];
      rel.rd.slots++;
      /* Acquire: pairs with the publishing CAS, so a FULL slot's payload
       * is read as written. */
      uint32_t state = ldg__load_acquire(&slot->state);
      if (state == LDG__SLOT_EMPTY) {
        ldg_seq r = ldg__released(&rel);
        if (q <= r) {
          /* Taken or covered, and so is everything up to r: decided,
           * never read. */
          if (extending && q == f) f = r + 1 < hi + 1 ? r + 1 : hi + 1;
          q = r; /* the loop moves on to r + 1 */
          continue;
        }
      }
      if (extending && q == f) {
        if (state == LDG__SLOT_FULL) ldg__flt_add(&acc, slot);
        if (state == LDG__SLOT_EMPTY)
          extending = false; /* above released, unpublished: undecided */
        else
          f++;
      }
      if (state != LDG__SLOT_FULL || slot->kind != LDG__KIND_OP) continue;
      if (!ldg__probe_matches(slot, p)) continue;
      if (q <= ldg__released(&rel)) continue; /* its release began */
      if (fn(s, q, arg)) found = true;
    }
    if (f > base + u) {
      /* Our findings first (none when the run was all taken or waits),
       * then upto. Release: publishes the merge and, through our acquire
       * of u, what covered the slots below u (WHY (S) HOLDS FOR own). A
       * plain store: a racing query's may lower it, which only says less. */
      if (acc.bits != 0 || acc.addr_lo <= acc.addr_hi)
        ldg__flt_merge(&g->sum.own, &acc);
      u = (uint32_t)(f - base);
      ldg__store_release(&g->sum.upto, u);
      ldg__writes++;
    }
    if (found) break;
    unsigned level = ldg__level(g->sum.index);
    if (j == NULL && level != 0 && u == g->sum.size)
      ldg__jump_build(g, level, &rel.rd.headers);
    if (end > t) break; /* g holds tail: nothing later is pending */
    g = ldg__next(g, &rel.rd.headers);
  }
  ldg__reads.segments += rel.rd.segments;
  ldg__reads.slots += rel.rd.slots;
  ldg__reads.stream_lines += rel.rd.stream_lines;
  ldg__reads.headers += rel.rd.headers;
  ldg__reads.filters += rel.rd.filters;
  return found;
}

bool ldg__ring_visit(const ldg_stream *s, const struct ldg__probe *p,
                     ldg__visit_fn fn, void *arg) {
  /* A query of a stream another thread owns counts itself in its visitors
   * around the walk (segment.c, HOT REUSE: the summaries a walk writes and
   * the segments it reads stay this life's). The count is the only word
   * of s a query writes; s is otherwise read-only here. */
  ldg_stream *w = (ldg_stream *)s;
  bool v = ldg__visit_begin(w);
  bool found = ldg__ring_walk(s, p, fn, arg);
  ldg__visit_end(w, v);
  return found;
}

/* ---- Test hook (//ledger:ledger_hooks) -------------------------------------------- */

#ifdef LDG_TEST_HOOKS
bool ldg__summary_lower_upto(ldg_stream *s, uint32_t to) {
  uint64_t headers = 0;
  bool v = ldg__ring_read_lock(s); /* as a query: the segments stay */
  for (struct ldg__seg *g = ldg__load_seq_cst(&s->head); g != NULL;
       g = ldg__next(g, &headers)) {
    /* Release: as a query's store of upto (a lower value only says less). */
    if (ldg__load_relaxed(&g->sum.upto) > to)
      ldg__store_release(&g->sum.upto, to);
  }
  ldg__ring_read_unlock(s, v);
  return true;
}
#else
bool ldg__summary_lower_upto(ldg_stream *s, uint32_t to) {
  (void)s;
  (void)to;
  return false;
}
#endif
