/*
 * The per-stream ring, part 1 of 7: layout, and the enqueue protocol
 * (publish, overtake, the destroy handshake). A sequence-indexed
 * ring of entries, published and reclaimed under RCU, with atomic high-water
 * marks. The correctness argument is split with the code, one protocol per
 * file, each opening with its part:
 *   ring.c     layout, what each atomic publishes, publication, a release
 *              that overtakes an enqueue, destroy, enqueue without a
 *              read-side section (this file);
 *   reserve.c  reserving a seq: on a single-issuer stream (a store), and
 *              on a shared stream (add first while armed, else the CAS
 *              path: tickets, fast_gen);
 *   owned.c    owned streams: the claim, the owner's reservation, the
 *              revocation and the contested seq;
 *   segment.c  who may reclaim a slot and when: segments, growth, head
 *              advance and retirement;
 *   pool.c     the retired-segment pool;
 *   reclaim.c  retired segments through a grace period, in batches (the
 *              reclaimer thread);
 *   release.c  claims, taking chunks, the transitive release engine;
 *   summary.c  (not part of the ring's protocol: read-only on it) the
 *              queries' walk and the segment summaries they keep.
 * reserve.h and owned.h hold the inline paths of reserve.c and owned.c
 * that the enqueue (below) runs on every op. The Promela model
 * (ledger/model/ring_common.pml) maps its inlines to the C functions of
 * these files.
 *
 * LAYOUT
 *   Every operation or wait enqueued on a stream gets a sequence number (seq,
 *   from 1) and lives in the slot for that seq. Slots come in segments: a
 *   segment holds `size` consecutive seqs starting at `base`, and a stream's
 *   segments form a singly linked list, oldest first:
 *
 *     s->head -> [base 1, size 8] -> [base 9, size 64] -> ... <- s->tailseg
 *
 *   seq lives in the segment with base <= seq < base + size, at slots[seq -
 *   base]. One slot is one cache line. Two atomic high-water marks say where
 *   the stream stands:
 *     s->tail      the last seq handed out (ldg_mark);
 *     s->tail_end  seqs below it have a segment (the end of tailseg, raised
 *                  once tailseg points at that segment);
 *     s->released  every seq <= released is known complete: its entry has
 *                  been, or is being, released by the release that raised
 *                  the mark over it.
 *   Everything in (released, tail] is pending. (On an owned stream the
 *   owner's otail stands for tail until a revocation installs it: OWNED
 *   STREAMS, owned.c; readers read both through ldg__tail_*.)
 *
 * WHAT EACH ATOMIC PUBLISHES
 *   s->tailseg  (seq_cst CAS / acquire or seq_cst load) a fully initialised
 *               segment; seq_cst where ldg__ring_advance_head checks that
 *               tailseg no longer names the segment it retires.
 *   g->next     (seq_cst CAS) the successor segment, initialised.
 *   s->tail_end (seq_cst CAS / acquire or seq_cst load) segments up to it
 *               are linked and tailseg reaches them (seq_cst: a step of the
 *               order S of RESERVING ON A SHARED STREAM, reserve.c, and the
 *               add-first path's reload after its add is a seq_cst load).
 *   s->tail     (seq_cst CAS, or seq_cst fetch_add) a seq is reserved. It is
 *               handed out only if its slot exists (seq < tail_end: the
 *               CAS checks it, the fetch_add is made only while the stream
 *               is armed and the zone below tail_end is kept for at most
 *               one add per ticket: RESERVING ON A SHARED STREAM, reserve.c), so
 *               reserving never fails after the fact and a refused enqueue
 *               leaves no hole. Alone on its cache line (faa12): the adds
 *               take that line once per op.
 *               On a single-issuer stream, a release store (SINGLE-ISSUER
 *               STREAMS, reserve.c). On an owned stream 0 until a revoker
 *               installs it (seq_cst CAS from 0: OWNED STREAMS, owned.c).
 *   s->fast_gen (seq_cst load / seq_cst CAS, +1 or +2) odd: ticket holders
 *               may reserve by fetch_add without looking at tail (armed by
 *               a holder whose CAS-path reservation had the reserve's
 *               headroom, with a CAS from the even value it loaded before
 *               its look at tail); even: they take the CAS path (disarmed
 *               by a holder whose seq landed within LDG__FAST_R of
 *               tail_end). A generation, never repeating a value
 *               (RESERVING ON A SHARED STREAM, reserve.c). On the read-mostly
 *               line: written about once per stalled growth, read by every
 *               shared enqueue.
 *   s->otail    (release store / acquire load) the owner of an owned stream
 *               reserved every seq up to it; written by the owner only.
 *   s->owner    (acq_rel CAS claim, seq_cst CAS to PENDING, release store of
 *               SHARED / acquire loads, and the relaxed R2 ordered by
 *               membarrier) who reserves how (OWNED STREAMS, owned.c).
 *   s->contest  (acq_rel CAS, once per side) who got the contested seq.
 *   slot->state (release store of FULL) the entry's keep, ids, ranges or
 *               wait are written and readable. Payload is immutable once
 *               FULL.
 *   slot->ask   (release store of ASKED / acquire load, acq_rel CAS ASKED
 *               -> NONE; shared seqs) a release that owns the slot's seq
 *               found it EMPTY; whoever takes the ask off takes the entry
 *               (PUBLICATION).
 *   s->asked    (acq_rel CASes / acquire load; streams with one publisher)
 *               the seq a release that owns it found EMPTY asks about;
 *               whoever takes an ask off the word takes that entry
 *               (PUBLICATION ON A STREAM WITH ONE PUBLISHER).
 *   s->grow_at  (release CAS / acquire load) tail_end is at least it +
 *               LDG__FAST_R (once the first segment is outgrown): the
 *               newest segment's grow point, or its end - LDG__FAST_R while
 *               claimed (segment.c, GROWING AHEAD). An add whose seq is
 *               below it is outside the zone (RESERVING ON A SHARED
 *               STREAM, reserve.c): the add-first path's one compare.
 *   s->released (acq_rel CAS) the releaser owns every seq it raised the mark
 *               over: intervals (old, new] of concurrent releases are
 *               disjoint, so each seq is claimed by exactly one release.
 *   g->resolved (seq_cst add) slots of the segment whose entry has been taken
 *               by its one owner; at g->size the segment is done.
 *   s->head     (seq_cst CAS) the oldest segment not retired.
 *   slot->state = EMPTY (relaxed store) by a slot's resolver, before the
 *               add to g->resolved that publishes it; g->dirty (relaxed
 *               store) by a retracting enqueuer, before its resolution.
 *   s->ops_released, s->waits_enqueued (release adds / acquire loads in
 *               ldg_pending_count) operations taken and waits recorded; each
 *               add follows the seq's reservation on tail, so a query that
 *               counts it also sees that seq in tail.
 *   Pool tops, the registry's unlink stack and a stream's life bits are
 *   argued in pool.c and registry.c. Each relaxed or acquire/release
 *   access in the code has a comment saying what it pairs with.
 *
 * PUBLICATION, AND A RELEASE THAT OVERTAKES AN ENQUEUE (pub11)
 *   Enqueue: reserve seq, write the slot, publish. A release owning seq
 *   (its claim covers it; no other release does) may find the slot EMPTY:
 *   the enqueuer is between its reservation and its publication, and a
 *   mark covering seq was read meanwhile. The release must not wait for it
 *   (ledger.h: no call waits for another thread's progress), yet exactly
 *   one side must take the entry. Until pub11 a shared seq was published by
 *   a CAS EMPTY -> FULL, and the release CASed EMPTY -> ABANDONED: two CASes
 *   on one word decided. That CAS was the one locked instruction of a
 *   shared enqueue after its reservation (the lead's run 11a on the H200: a
 *   plain store instead ran the shared row 17 % faster at 2 threads, 21 %
 *   at 16). Now every seq is published by a plain store and the release
 *   that overtakes it asks: a one-publisher seq through the stream (next
 *   section), a shared seq through its own slot (one word cannot hold the
 *   asks of many publishers), in slot->ask:
 *     enqueuer: fill the slot; enter a read-side section (the pin, below);
 *               store state = FULL (release); ldg__asym_light (a compiler
 *               barrier); a = load ask (acquire). NONE: done, a release
 *               takes the entry. ASKED: CAS ask ASKED -> NONE; won: the
 *               entry is ours again (leave the section, then ldg__take_one:
 *               resolve the slot, run the keep or fire the wait, before
 *               ldg_enqueue returns); lost: the release took it. Leave the
 *               section. (ldg__publish_shared)
 *     release:  reads the slot (acquire). FULL: takes it; it asked nothing,
 *               so the enqueuer reads NONE and is done. EMPTY: re-read it a
 *               bounded number of times (64 pauses); still EMPTY: store ask
 *               = ASKED (release: an enqueuer that takes its entry back
 *               acquires what the release knew, the work complete, before
 *               its keep runs; a store, not a CAS: only seq's owner asks,
 *               once, and nobody else writes the ask until the enqueuer
 *               reads it), ldg__asym_heavy (membarrier: every running
 *               thread makes a full barrier, this one too), read state
 *               again. EMPTY: not published before the barrier, so the
 *               enqueuer's load of the ask, after its store, sees ASKED:
 *               the release leaves the entry to it and moves on. FULL (or
 *               RETRACTED): CAS ask ASKED -> NONE; won: it takes the entry
 *               (skips a retracted slot); lost: the enqueuer took the ask
 *               off, and with it the entry. (release.c, ldg__overtake_slot)
 *   Exactly one side takes the entry. The store->load pair is the
 *   asymmetric fence's (rcu.h): the barrier falls after the enqueuer's
 *   store of FULL (the release's second read sees FULL) or before its load
 *   of the ask (which sees ASKED). A release that reads EMPTY after the
 *   barrier makes no CAS, so the enqueuer, which sees its ask, wins its
 *   CAS and takes the entry; an enqueuer that reads NONE makes no CAS, so
 *   the release, which reads FULL, wins its CAS and takes it; when both
 *   see each other the one CAS that takes ASKED off decides. A release that
 *   read FULL before asking asked nothing, and nobody else asks about seq.
 *   The reset. An ask is made at most once per life of a slot (by seq's one
 *   owner), and the CAS that takes it off writes NONE: that CAS is the
 *   taker's reset, made before either side resolves the slot, so the
 *   slot's next life starts with NONE, as a new segment's (zeroed) does.
 *   A retracted slot (below) may end its life either way; its segment is
 *   dirty, never reused (segment.c).
 *   The pin. Once FULL the entry may be taken at once, the slot resolved,
 *   its segment retired and, after a grace period, reused for other seqs or
 *   freed, all before the enqueuer's load of the ask: a load that then read
 *   a later life's ASKED would take another seq's entry (whose own enqueuer
 *   takes it too, or, reading NONE after the CAS, leaves it to nobody), and
 *   a freed segment is no memory at all. So the enqueuer's store of FULL,
 *   its load of the ask and its CAS are inside a read-side section entered
 *   before the store (ldg__ring_read_lock: the RCU read lock, and the
 *   visitor count of HOT REUSE ON OWNED STREAMS, segment.c, where the stream
 *   is owned or being revoked and the owner may reuse a segment without a
 *   grace period). Any retirement of the slot's segment follows a take of
 *   this slot, which follows our store, so its grace period (or the owner's
 *   check of visitors) waits for our section. Only the shared path pays
 *   for it; a one-publisher seq's ask is on the stream, which the
 *   enqueuer's reference pins. The release reads and CASes the slot inside
 *   its walk's section. The cost against the CAS it replaces: the read
 *   lock and unlock (no locked instruction, no shared line written),
 *   instructions measured in bench/RESULTS.md, "(pub11)".
 *   Destroy. The destroyer's walk is a release and asks as above. A
 *   retracting enqueuer (DESTROY below) exchanges its state to RETRACTED (a
 *   locked RMW: its store before its next load), then takes an ASKED off
 *   its slot by the same CAS; the asker, reading RETRACTED after its
 *   barrier, CASes likewise: nothing to take either way, and by the
 *   store->load argument (RETRACTED for FULL) an ask the enqueuer missed is
 *   answered RETRACTED to its asker, which skips the slot. The enqueuer
 *   still holds the slot (unresolved) while it reads the ask: no pin needed.
 *   Queries read state alone (FULL: the payload), never the ask. ABANDONED
 *   is no longer stored in a slot: the value names what ldg__overtake_*
 *   return for "someone else takes the entry".
 *   Owned streams' seqs published both ways (owned.c, OWNED STREAMS,
 *   "Publication", LDG__PUB_BOTH) store FULL as above and read both asks,
 *   the slot's in the section and then s->asked (the light barrier orders both loads after
 *   the store); their release asks in one place, chosen by ldg__seq_asks,
 *   so the argument for that place holds unchanged. For every other seq the
 *   enqueuer reads one place and the release must ask there (an ask where
 *   the enqueuer does not look is answered by nobody): ldg__seq_asks makes
 *   the release's choice match the enqueuer's LDG__PUB_* (internal.h).
 *   No release waits for another thread (the spin is bounded), so ledger.h's
 *   promise holds; a release that asks pays one membarrier (it waits for
 *   IPIs, not for a thread's progress; ledger.h, (j)), on shared streams
 *   too since pub11. ThreadSanitizer sees no membarrier; it needs none,
 *   as for the one-publisher handshake below: the fence decides who takes
 *   the entry, and what one side reads of the other's writes comes through
 *   an acquire/release pair it sees (the payload through state's release
 *   store and the taker's acquire load; what the asking release knew
 *   through its release store of the ask and the enqueuer's acquire load).
 *   Model: ledger/model/pub_shared.pml (two publishers of one stream with
 *   store buffers, two releases whose asks are buffered too, membarrier
 *   drains every buffer, a slot's second life once its first is resolved
 *   and unpinned); mutants BUG_PUB11_NO_MEMBARRIER (an entry taken by
 *   nobody), BUG_PUB11_NO_CAS (the asker takes a FULL slot without its CAS:
 *   twice), BUG_PUB11_ENQ_NO_CAS (the enqueuer takes an ASKED entry back
 *   without its CAS: twice), BUG_PUB11_NO_RESET (the taking CAS leaves ASKED
 *   on the slot: its next life's enqueuer takes that entry too),
 *   BUG_PUB11_NO_PIN (the section ends before the load of the ask: a later
 *   life's ask read). Tests: tests/torture/shared_pub_test.c.

 * PUBLICATION ON A STREAM WITH ONE PUBLISHER (the single-issuer streams,
 * ldg__one_publisher, and the seqs an owned stream's owner reserved:
 * owned.c's OWNED STREAMS, "Publication", says how the two meet; ldg__publish_one
 * here, ldg__overtake_one in release.c, ldg__seq_asks in internal.h)
 *   At most one slot of such a stream is between its reservation and its
 *   publication: the publisher's calls never overlap, and each publishes
 *   (or retracts) before the next reserves. (On an owned stream this holds
 *   of the seqs whose release asks; owned.c, OWNED STREAMS, "Publication".) So the handshake with a release
 *   that finds a slot EMPTY needs no word in the slot (whose reading after
 *   publication would need a read-side section: the slot may be taken and
 *   its segment retired by then; bench/RESULTS.md, core3) but one word on
 *   the stream, s->asked, which the enqueuer's own reference pins. The
 *   enqueue then has no locked operation at all:
 *     enqueuer: fill the slot; store state = FULL (release);
 *               ldg__asym_light (a compiler barrier); w = load asked
 *               (acquire). w != seq: done, a release takes the entry. w ==
 *               seq: CAS asked seq -> 0; won: the entry is ours again
 *               (ldg__take_one: resolve the slot, run the keep or fire the
 *               wait, before ldg_enqueue returns); lost: a release took it.
 *     release:  owns seq (its claim covers it) and reads its slot. FULL: it
 *               takes it (no ask about seq was made, and only the owner of
 *               seq makes one, so its enqueuer read no ask: it is done).
 *               EMPTY: re-read it a bounded number of times (64 pauses);
 *               still EMPTY, ask: CAS asked 0 -> seq (release half: an
 *               enqueuer that takes its entry back acquires what the
 *               release knew, the work complete, before its keep runs),
 *               ldg__asym_heavy (membarrier: every running thread makes a
 *               full barrier), read state again. EMPTY: not published before
 *               the barrier, so the enqueuer's load of asked, after its
 *               store, sees the ask: the release leaves the entry to it and
 *               moves on. FULL (or RETRACTED): CAS asked seq -> 0; won: it
 *               takes the entry (skips a retracted slot); lost: the
 *               enqueuer (or an adopter, below) took the ask off, and with
 *               it the entry.
 *   The store->load pair is the asymmetric fence's (rcu.h): the barrier
 *   falls after the enqueuer's store of FULL (the release's second read
 *   sees it) or before its load of asked (which sees the ask). So an ask
 *   that the enqueuer misses is answered FULL to its release, which takes
 *   the entry; one that the release's read answers EMPTY is seen by the
 *   enqueuer, which takes it; when both see each other, the one CAS that
 *   takes seq off the word decides. Exactly one side takes the entry.
 *   SEVERAL RELEASES. Releases run on any thread and own disjoint seqs, but
 *   two may ask at once: one about X (it read X EMPTY, then was slow), one
 *   about Y > X, which the issuer reserved after its enqueue of X returned.
 *   A word overwritten by the second ask would lose the first. So an ask is
 *   installed only by CAS, and the rule is: whoever takes an ask off the
 *   word takes that entry. A release owning Y whose CAS finds w != 0:
 *     w > Y: a release owns w, so w was reserved, after the enqueue of Y
 *            returned: its store of FULL happens before the reservation of
 *            w, which happens before the CAS that installed w (release)
 *            and our failed CAS that read it (acquire). Our slot is
 *            published: read it and take it; we asked nothing.
 *     w < Y: the enqueue of w returned before Y was reserved, hence before
 *            our ownership of Y, and it did not take the ask off (an ask is
 *            installed once, by w's owner, so it would be gone). The word
 *            now waits only for w's asker, which will find w FULL (it is
 *            published, by the same happens-before) and CAS w -> 0. We do
 *            not wait for it: a CAS w -> Y installs our ask and takes w's
 *            off, so entry w is ours (ldg__take_one after the chunk, the
 *            slot FULL, unresolved, found from head); its asker's CAS
 *            fails and it moves on. Only then, with our ask installed, the
 *            fence and the second read as above.
 *     w changed under our CAS: read our slot again (FULL: ours, nothing
 *            asked) and retry from what we read.
 *   No release waits for another thread (the spin is bounded), so
 *   ledger.h's promise holds: a stalled enqueuer or release never stops
 *   another's call. A release that asks pays one membarrier (it waits for
 *   IPIs, not for a thread's progress; ledger.h, (j)).
 *   A retracting enqueuer (DESTROY) of a one-publisher stream, after its
 *   exchange to RETRACTED, takes an ask about its seq off the word (the
 *   asker, reading RETRACTED, may race it: nothing to take either way); no
 *   seq after a retracted one is reserved, so no release can adopt it.
 *   The slot's state is written by its enqueuer alone before publication
 *   (FULL, RETRACTED), here as on shared seqs.
 *   The destroy handshake's light barrier (reserve.c, SINGLE-ISSUER STREAMS)
 *   is not folded into this one: the enqueuer must read destroyed before it
 *   publishes (a publication cannot be taken back once a release may have
 *   taken it, so a late refusal would need a decision of its own); with
 *   membarrier both are compiler barriers, so there is nothing to save but in
 *   the fallback (two seq_cst fences).
 *   ThreadSanitizer sees no membarrier (nor the compiler barrier's pairing
 *   with it), as for the destroy handshake; it needs none: the fence only
 *   decides who takes the entry, and whatever one side reads of the other's
 *   writes comes through an acquire/release pair it sees (the payload
 *   through state's release store and the taker's acquire load; what the
 *   asking release knew through its CAS on asked and the enqueuer's
 *   acquire load or CAS; an adopted slot through the reservation chain).
 *   The order the fence provides is the model's to check.
 *   Model: ledger/model/pub_sb.pml (the issuer's FULL store buffered past
 *   its load of asked; membarrier drains every buffer; two releases);
 *   mutants BUG_PUB_NO_MEMBARRIER (an entry taken by nobody), BUG_PUB_NO_CAS
 *   (taken twice), BUG_PUB_OVERWRITE (an ask installed over another without
 *   adopting it: taken by nobody). Tests: tests/torture/single_issuer_test
 *   (overtake-*, two-asks-*, destroy-reserved/-stored, race-asks).
 *
 * DESTROY
 *   ldg__destroy sets s->destroyed (seq_cst), then reads tail (seq_cst) and
 *   releases up to it. An enqueuer reads destroyed (seq_cst) after its
 *   reserving CAS (seq_cst). In the single order of seq_cst operations either
 *   the destroyer's read of tail comes after the reservation — the seq is in
 *   the destroyer's interval and is taken or asked about as above — or the
 *   enqueuer's read of destroyed comes after the flag — the enqueuer retracts
 *   the slot (RETRACTED), counts it resolved and refuses with LDG_EDESTROYED,
 *   keeping its keep. (Both can happen: then a destroyer that finds EMPTY
 *   asks, and the enqueuer still retracts; the seq is simply dropped.)
 *   Where the reservation is a store (single-issuer and owned streams) the
 *   handshake is asymmetric: reserve.c, SINGLE-ISSUER STREAMS; owned.c,
 *   OWNED STREAMS, "Destroy".
 *
 * ENQUEUE WITHOUT A READ-SIDE SECTION
 *   The common enqueue takes no RCU read lock. It reserves seq against
 *   tail_end, touching no segment. From then on the slot of seq is
 *   unresolved until this enqueuer publishes it and a release takes it (or
 *   the enqueuer itself resolves it), so by the consequence that closes
 *   WHO MAY RECLAIM A SLOT (segment.c) the segment of seq and every later
 *   one stay allocated. It then loads tailseg,
 *   which is that segment or a later one (tail_end was raised only after
 *   tailseg reached the segment covering seq), so it may read it without
 *   RCU; if tailseg has already moved past seq's segment, the enqueuer finds
 *   it by walking from head under rcu_read_lock (head may be retired under
 *   it). Only extending the ring and resolving a slot (which may retire
 *   segments) enter a read-side section.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/reserve.h"
#include "ledger/owned.h"

/* ---- Out-of-line payloads ------------------------------------------------------- */

static size_t ldg__ext_bytes(size_t words) {
  return sizeof(struct ldg__ext) + words * sizeof(uint64_t);
}

static struct ldg__ext *ldg__ext_new(ldg_ledger *l, size_t n_vec,
                                     size_t n_rng) {
  size_t bytes = ldg__ext_bytes(n_vec + 2 * n_rng);
  struct ldg__ext *x = ldg__malloc(bytes);
  if (x == NULL) return NULL;
  x->ledger = l;
  x->n_vec = n_vec;
  x->n_rng = n_rng;
  ldg__ledger_ref(l);
  ldg__fetch_add_relaxed(&l->bytes, bytes); /* a statistic */
  return x;
}

/* Frees x now: no reader can have seen it (it was never published). */
static void ldg__ext_free_now(struct ldg__ext *x) {
  if (x == NULL) return;
  ldg_ledger *l = x->ledger;
  /* Relaxed: a statistic. */
  ldg__fetch_sub_relaxed(&l->bytes, ldg__ext_bytes(x->n_vec + 2 * x->n_rng));
  ldg__free(x);
  ldg__ledger_unref(l);
}

void ldg__ext_free_cb(struct rcu_head *head) {
  ldg__rcu_callback_enter();
  ldg__ext_free_now(
      (struct ldg__ext *)((char *)head - offsetof(struct ldg__ext, rcu)));
}

/* ---- The reservations' thread-locals (reserve.h, owned.h) ---------------------- */

/* Defined here, in the file of the enqueue that reads them on every op: a
 * thread-local defined in the file that reads it is one instruction there
 * (%fs:offset), an extern one two (its offset loaded first). */

/* This thread's mask on s->fast_gen (RESERVING ON A SHARED STREAM): 1
 * while it holds a ticket, else 0, so that "armed and a holder" is one
 * AND of the loaded generation. */
_Thread_local uint64_t ldg__fast_mask; /* reserve.h */

/* This thread's owner token (owned.c, OWNED STREAMS; owned.h). */
_Thread_local uint64_t ldg__own_tok = LDG__OWN_NO_TOKEN; /* internal.h */

/* ---- The enqueue's handshakes ------------------------------------------------------ */

/* ldg__asym_light for an enqueue whose destroy handshake (or publication)
 * is the asymmetric one: on a single-issuer stream (`single`), whatever the
 * mode, its test; otherwise the seq is an owner's, and a stream is owned
 * only where membarrier is in use (owned.c, OWNED STREAMS), so the
 * membarrier branch, a compiler barrier, without the load of
 * ldg__asym_membarrier that ldg__asym_light tests (a global's line, twice
 * per enqueue: bench/RESULTS.md, "Issue 11, eleventh session: the launch
 * row (launch11)"). */
static inline __attribute__((always_inline)) void ldg__enqueue_light(
    bool single) {
  if (single)
    ldg__asym_light();
  else
    atomic_signal_fence(memory_order_seq_cst); /* the compiler's order only */
}

/* Builds without NDEBUG: catch two calls recording on one single-issuer
 * stream at once (the caller's promise broken). */
#ifndef NDEBUG
static void ldg__issuing_begin(ldg_stream *s) {
  if (!(s->flags & LDG_STREAM_SINGLE_ISSUER)) return;
  /* acq_rel: a check, not a synchronisation the protocol relies on. */
  if (ldg__exchange_acq_rel(&s->issuing, 1u) != 0) {
    fprintf(stderr,
            "streamledger: two calls record on single-issuer stream %llu "
            "at once (LDG_STREAM_SINGLE_ISSUER: the caller promised one "
            "at a time)\n",
            (unsigned long long)s->id);
    abort();
  }
}
static void ldg__issuing_end(ldg_stream *s) {
  /* Release: the next issuer's exchange sees this call done. */
  if (s->flags & LDG_STREAM_SINGLE_ISSUER)
    ldg__store_release(&s->issuing, 0u);
}
#else
#define ldg__issuing_begin(s) ((void)0)
#define ldg__issuing_end(s) ((void)0)
#endif

/* The segment of a seq this thread reserved and has not resolved, its base
 * (*base) and pubf_on (*pubf): it and all later segments are pinned
 * (ENQUEUE WITHOUT A READ-SIDE SECTION). */
static inline __attribute__((always_inline)) struct ldg__seg *
ldg__seg_of_reserved(ldg_stream *s, ldg_seq seq, ldg_seq *base, bool *pubf) {
  /* Acquire: pairs with the seq_cst CAS that swung tailseg (release half),
   * made after the segment's header was written; that swing
   * happens-before the tail_end we reserved against (see above), so the
   * tailseg read here covers seq or is later. head and next: as in
   * ldg__take_chunk. */
  struct ldg__seg *g = ldg__load_acquire(&s->tailseg);
  ldg_seq b = g->base;
  if (b <= seq) {
    *base = b;
    *pubf = g->pubf_on;
    return g;
  }
  /* The ring grew ahead (segment.c, GROWING AHEAD): seq is most often in
   * the segment tailseg was linked after. g->prev and g->prev_size:
   * written before the CAS that linked g, which happens-before the swing
   * we read; g is later than seq's segment, so it and prev (seq's segment
   * or later) are pinned: prev is in the life it had when g was linked
   * after it, whose base was g->base - g->prev_size and whose pubf_on was
   * g->prev_pubf_on, the values reads of prev's header would return
   * (ring_common.pml's PROBE_PREV reads prev's base) — without a read of
   * prev's header line (about one launch in two through cuda/:
   * bench/RESULTS.md, "Issue 11, eleventh session"). */
  b -= g->prev_size;
  if (b <= seq) {
    *base = b;
    *pubf = g->prev_pubf_on;
    return g->prev;
  }
  bool v = ldg__ring_read_lock(s); /* segment.c, HOT REUSE */
  g = ldg__seg_from_head(s, seq);
  ldg__ring_read_unlock(s, v);
  *base = g->base;
  *pubf = g->pubf_on;
  return g;
}

/* ---- Enqueue ------------------------------------------------------------------------- */

static void ldg__fill_slot(struct ldg__slot *slot, const struct ldg__entry *e,
                           struct ldg__ext *ext) {
  slot->kind = e->kind;
  if (e->kind == LDG__KIND_WAIT) {
    slot->aux = LDG__FRAME_FIRED;
    slot->u.wait.target = e->target;
    slot->u.wait.upto = e->upto;
    return;
  }
  slot->u.op.keep = e->keep;
  uint64_t *w;
  /* Expected inline (at most LDG__INLINE_WORDS words): without the hint
   * gcc laid the inline case out of line, two jumps and a code line more
   * per enqueue (bench/RESULTS.md, "Issue 11, eleventh session"). */
  if (__builtin_expect(ext != NULL, 0)) {
    slot->aux = LDG__OP_EXT;
    slot->u.op.d.ext = ext;
    w = ext->w;
  } else {
    slot->aux = LDG__OP_INLINE;
    slot->u.op.d.in.n_vec = (uint32_t)e->n_vec;
    slot->u.op.d.in.n_rng = (uint32_t)e->n_rng;
    w = slot->u.op.d.in.w;
  }
  for (size_t i = 0; i < e->n_vec; i++) w[i] = e->vec_ids[i];
  for (size_t i = 0; i < e->n_rng; i++) {
    w[e->n_vec + 2 * i] = (uint64_t)e->ranges[i].addr;
    w[e->n_vec + 2 * i + 1] = (uint64_t)e->ranges[i].bytes;
  }
}

/* The published filters (summary.c) of an operation at a seq of g, whose
 * life keeps them: its bounds, then the widening of the filter of that
 * seq's kind (one: published with LDG__PUB_STORE), by ldg__pubf_note.
 * Out of line, a second pass over e's ids and ranges, for operations of
 * more than two ids or one range: an enqueue in a segment without
 * published filters pays a load and a branch, nothing else (bench/
 * RESULTS.md, "Issue 11, tenth session: the reader's lines (rdr10)"). */
static __attribute__((noinline)) void ldg__pubf_note_slow(
    struct ldg__seg *g, const uint64_t *vec_ids, size_t n_vec,
    const ldg_range *ranges, size_t n_rng, bool one) {
  struct ldg__pubf_span x = {UINT64_MAX, 0, UINT64_MAX, 0};
  for (size_t i = 0; i < n_vec; i++) {
    uint64_t v = vec_ids[i];
    x.vlo = v < x.vlo ? v : x.vlo;
    x.vhi = v > x.vhi ? v : x.vhi;
  }
  for (size_t i = 0; i < n_rng; i++) {
    uint64_t a = (uint64_t)ranges[i].addr;
    uint64_t last = a + ((uint64_t)ranges[i].bytes - 1); /* checked: no wrap */
    x.alo = a < x.alo ? a : x.alo;
    x.ahi = last > x.ahi ? last : x.ahi;
  }
  ldg__pubf_note(g, &x, one);
}

/* The same, with the common shapes inline (issue 11, eleventh session,
 * rdr11: the call and the second pass cost a queried ledger's enqueue ~54
 * instructions): an operation naming at most two ids and one range (a
 * copy names one of each, a kernel two ids) has its bounds taken here
 * without a loop, and ldg__pubf_note's check (loads and compares, nothing
 * written while the filter admits them, as it does once a segment's ids
 * and ranges repeat) runs inline; anything else goes to
 * ldg__pubf_note_slow. */
static inline __attribute__((always_inline)) void ldg__pubf_note_entry(
    struct ldg__seg *g, const uint64_t *vec_ids, size_t n_vec,
    const ldg_range *ranges, size_t n_rng, bool one) {
  if (__builtin_expect(n_vec > 2 || n_rng > 1, 0)) {
    ldg__pubf_note_slow(g, vec_ids, n_vec, ranges, n_rng, one);
    return;
  }
  struct ldg__pubf_span x = {UINT64_MAX, 0, UINT64_MAX, 0};
  if (n_vec != 0) { /* its ids: the first and the last */
    uint64_t v0 = vec_ids[0], v1 = vec_ids[n_vec - 1];
    x.vlo = v0 < v1 ? v0 : v1;
    x.vhi = v0 < v1 ? v1 : v0;
  }
  if (n_rng == 1) {
    x.alo = (uint64_t)ranges[0].addr;
    x.ahi = x.alo + ((uint64_t)ranges[0].bytes - 1); /* checked: no wrap */
  }
  ldg__pubf_note(g, &x, one);
}

/* The enqueuer's side of PUBLICATION ON A STREAM WITH ONE PUBLISHER, once
 * it read s->asked naming its seq: one CAS against the asking release's
 * (or an adopter's); true if the entry is ours again. */
static __attribute__((noinline)) bool ldg__publish_asked(ldg_stream *s,
                                                         ldg_seq seq) {
  ldg_seq mine = seq;
  /* acq_rel: the CAS alone decides against the release's CAS seq -> 0
   * (one modification order of asked); its acquire half pairs with the
   * release half of the CAS that installed the ask, so the keep we run
   * happens after what that release knew (the work it covered complete). */
  return ldg__cas_acq_rel(&s->asked, &mine, 0);
}

/* Publishes a filled slot of a one-publisher stream with a plain store.
 * True if published (a release takes it); false if a release that asked
 * about seq gave it back to us: the slot is FULL, ours, unresolved. single:
 * s is a single-issuer stream (else seq is an owner's: ldg__enqueue_light). */
static inline __attribute__((always_inline)) bool ldg__publish_one(
    ldg_stream *s, struct ldg__slot *slot, ldg_seq seq, bool single) {
  /* Release: publishes the payload (acquire in the release walk and the
   * queries). A store: before it only this enqueuer writes the slot's
   * state (releases ask through s->asked instead). */
  ldg__store_release(&slot->state, (uint32_t)LDG__SLOT_FULL);
  LDG__HOOK(LDG__HOOK_ENQUEUE_STORED, s);
  /* The store above before the load below: a compiler barrier, whose
   * heavy side an asking release runs between its ask and its second
   * read of state (rcu.h). Acquire: pairs with the asking CAS (see
   * ldg__publish_asked). */
  ldg__enqueue_light(single);
  ldg_seq w = ldg__load_acquire(&s->asked);
  if (__builtin_expect(w != seq, 1)) return true;
  return !ldg__publish_asked(s, seq);
}

/* A retracting enqueuer of a one-publisher stream: a release that asked
 * about seq and read EMPTY left its ask for us; take it off the word (the
 * asker may race us to it: either CAS is fine, there is no entry). */
static __attribute__((noinline)) void ldg__retract_asked(ldg_stream *s,
                                                         ldg_seq seq) {
  /* Acquire: as ldg__publish_one's load (nothing is read after it). */
  if (ldg__load_acquire(&s->asked) == seq) (void)ldg__publish_asked(s, seq);
}

/* The enqueuer's side of PUBLICATION once it read its slot's ask ASKED:
 * one CAS against the asking release's; true if the entry is ours again.
 * The CAS writes NONE: the slot's next life starts with no ask. */
static __attribute__((noinline)) bool ldg__publish_slot_asked(
    ldg_stream *s, struct ldg__slot *slot) {
  (void)s; /* the hook's */
  LDG__HOOK(LDG__HOOK_ENQUEUE_ASK_SEEN, s);
  uint8_t a = LDG__ASK_ASKED;
  /* acq_rel: the CAS alone decides against the release's CAS ASKED ->
   * NONE (one modification order of ask); its acquire half pairs with the
   * release store of the ask, so the keep we run happens after what that
   * release knew (the work it covered complete). */
  return ldg__cas_acq_rel(&slot->ask, &a, (uint8_t)LDG__ASK_NONE);
}

/* Publishes a filled slot of a shared seq (LDG__PUB_SLOT) with a plain
 * store, or a seq published both ways (LDG__PUB_BOTH, which also reads
 * s->asked). True if published (a release takes it); false if the release
 * that asked gave it back to us: FULL, ours, unresolved (PUBLICATION). */
static inline __attribute__((always_inline)) bool ldg__publish_shared(
    ldg_stream *s, struct ldg__slot *slot, ldg_seq seq, bool both) {
  /* The pin: once FULL, the slot may be taken, resolved and its segment
   * retired before our load of its ask below; the read-side section (with
   * the visitor count where hot reuse needs it) keeps the segment from
   * being reused or freed until we have read it (PUBLICATION, "The pin"). */
  bool v = ldg__ring_read_lock(s);
  /* Release: publishes the payload (acquire in the release walk and the
   * queries). A store: before it only this enqueuer writes the slot's
   * state (a release that finds it EMPTY asks instead). */
  ldg__store_release(&slot->state, (uint32_t)LDG__SLOT_FULL);
  LDG__HOOK(LDG__HOOK_ENQUEUE_STORED, s);
  /* The store above before the load below: a compiler barrier, whose
   * heavy side an asking release runs between its ask and its second read
   * of state (rcu.h). Acquire: pairs with the release store of the ask. */
  ldg__asym_light();
  bool mine = false;
  if (__builtin_expect(ldg__load_acquire(&slot->ask) != LDG__ASK_NONE, 0))
    mine = ldg__publish_slot_asked(s, slot);
  ldg__ring_read_unlock(s, v);
  /* Both ways: a release of seq asks in one place only (ldg__seq_asks);
   * the light barrier above orders this load after the store too.
   * Acquire: as ldg__publish_one's. */
  if (__builtin_expect(both, 0) && !mine &&
      ldg__load_acquire(&s->asked) == seq)
    mine = ldg__publish_asked(s, seq);
  return !mine;
}

/* A retracting enqueuer of a shared seq, after its exchange to RETRACTED:
 * a release that asked and read EMPTY left its ask to us; take it off (the
 * asker, reading RETRACTED, may race us to it: nothing to take either
 * way). The slot is ours until we resolve it. */
static __attribute__((noinline)) void ldg__retract_slot_asked(
    ldg_stream *s, struct ldg__slot *slot) {
  /* Acquire: as ldg__publish_shared's load (nothing is read after it). */
  if (ldg__load_acquire(&slot->ask) != LDG__ASK_NONE)
    (void)ldg__publish_slot_asked(s, slot);
}

/* The enqueue, for both kinds. Always inlined into its two callers below,
 * each of which builds e on its own stack with a constant kind: the
 * compiler then keeps e's fields in registers and drops the other kind's
 * branches (bench/RESULTS.md, "Issue 11, sixth session: the one-thread
 * instruction budget"). */
static inline __attribute__((always_inline)) int ldg__enqueue_entry(
    ldg_stream *s, const struct ldg__entry *e, ldg_seq *seq_out) {
  /* Everything that can fail is done before a seq is reserved. */
  struct ldg__ext *ext = NULL;
  if (e->kind == LDG__KIND_OP) {
    /* The caller checked that the word count does not overflow. */
    if (e->n_vec + 2 * e->n_rng > LDG__INLINE_WORDS) {
      ext = ldg__ext_new(s->ledger, e->n_vec, e->n_rng);
      if (ext == NULL) return LDG_ENOMEM;
    }
  }
  /* An early refusal (acquire pairs with the destroyer's CAS); the
   * seq_cst handshake below decides a race. */
  if (ldg__load_acquire(&s->destroyed)) {
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  /* s->flags: immutable after creation (read-mostly line); read where
   * needed rather than kept in a register across the enqueue. */
  ldg__issuing_begin(s);
  ldg_seq seq = 0;
  /* Whether the destroy handshake is asymmetric: a single-issuer stream,
   * or a seq the owner of an owned stream reserved (owned.c, OWNED
   * STREAMS). */
  const bool single = (s->flags & LDG_STREAM_SINGLE_ISSUER) != 0;
  bool asym = single;
  /* How seq is published, fixed with its reservation: the release that
   * finds its slot EMPTY makes the matching choice (ldg__seq_asks). */
  int pub = single ? LDG__PUB_STORE : LDG__PUB_SLOT;
  int rc = __builtin_expect(single, 0)
               ? ldg__ring_reserve_single(s, &seq)
               : ldg__ring_reserve_default(s, &seq, &asym, &pub);
  if (rc != LDG_OK) {
    ldg__issuing_end(s);
    ldg__ext_free_now(ext);
    return rc;
  }
  ldg_seq gbase;
  bool pubf_on;
  struct ldg__seg *g = ldg__seg_of_reserved(s, seq, &gbase, &pubf_on);
  struct ldg__slot *slot = &g->slots[seq - gbase];
  LDG__HOOK(LDG__HOOK_ENQUEUE_RESERVED, s);

  /* The destroy handshake (see DESTROY above): seq_cst after the reserving
   * seq_cst CAS; on a single-issuer stream, after the reserving store and
   * the light side of the asymmetric fence (reserve.c, SINGLE-ISSUER
   * STREAMS), whose heavy side the destroyer runs between its CAS and
   * its load of tail;
   * likewise after an owner's store of otail (owned.c, OWNED STREAMS). */
  bool gone;
  if (asym) {
    ldg__enqueue_light(single);
    /* Relaxed would do for the handshake (the fences order it); acquire
     * pairs with the destroyer's CAS, as the early refusal's. */
    gone = ldg__load_acquire(&s->destroyed);
  } else {
    gone = ldg__load_seq_cst(&s->destroyed);
  }
  if (gone) {
    /* An exchange (a locked RMW: its store before the loads of the asks
     * below, as the light barrier orders a publication's); it publishes
     * nothing: a destroyer that reads RETRACTED (acquire) skips the slot
     * without touching it. */
    ldg__exchange_acq_rel(&slot->state, (uint32_t)LDG__SLOT_RETRACTED);
    /* A release that asked about seq and read EMPTY left the ask to us. */
    if (pub != LDG__PUB_STORE) ldg__retract_slot_asked(s, slot);
    if (pub != LDG__PUB_SLOT) ldg__retract_asked(s, seq);
    /* The destroyer may still be walking to this slot, so its state cannot
     * be reset: the segment will not be reused. Relaxed: sequenced before
     * our seq_cst add to g->resolved, which the retirer reads (ldg__seg_
     * pool_put says how it reaches the pool). */
    ldg__store_relaxed(&g->dirty, true);
    ldg__issuing_end(s);
    ldg__resolve_one(s, g);
    ldg__ext_free_now(ext);
    return LDG_EDESTROYED;
  }

  /* The vector index (vindex.c): before the publication. Plain read: the
   * stream's copy, set before it was linked (registry mutex). */
  struct ldg__vindex *vx = e->kind == LDG__KIND_OP ? s->vindex : NULL;
  if (vx != NULL) ldg__vindex_add(vx, e->vec_ids, e->n_vec);

  if (e->kind == LDG__KIND_WAIT) {
    /* After the reservation: until this add, ldg_pending_count counts the
     * wait as an operation (over, never under). Release: pairs with the
     * acquire load of waits_enqueued in ldg_pending_count, so a query that
     * counts this wait also sees the reserving CAS on tail (sequenced
     * before) and cannot count the wait without its seq. */
    ldg__fetch_add_release(&s->waits_enqueued, 1);
  }
  ldg__fill_slot(slot, e, ext);
  /* The published filters (summary.c), where g's life keeps them: widened
   * before the publication, the filter of seq's kind of publisher. A wait
   * names nothing. pubf_on (g's, or its copy on the next segment's header:
   * ldg__seg_of_reserved): fixed for g's life, written before the CAS
   * that linked g (and the copy before the one that linked the next),
   * which our reach of g read after. */
  if (e->kind == LDG__KIND_OP && pubf_on)
    ldg__pubf_note_entry(g, e->vec_ids, e->n_vec, e->ranges, e->n_rng,
                         pub == LDG__PUB_STORE); /* e's fields, not &e: they stay in registers */
  /* No locked operation either way (PUBLICATION ON A STREAM WITH ONE
   * PUBLISHER; PUBLICATION). */
  bool published = __builtin_expect(pub == LDG__PUB_STORE, 1)
                       ? ldg__publish_one(s, slot, seq, single)
                       : ldg__publish_shared(s, slot, seq,
                                             pub == LDG__PUB_BOTH);
  ldg__issuing_end(s); /* done with s's tail: the keep may record on s */
  if (seq_out != NULL) *seq_out = seq;
  if (__builtin_expect(published, 1)) {
    LDG__HOOK(LDG__HOOK_ENQUEUE_PUBLISHED, s);
    return LDG_OK;
  }
  /* Given back by the release that asked: ours to release. */
  LDG__HOOK(LDG__HOOK_ENQUEUE_GIVEN_BACK, s);
  ldg__take_one(s, g, slot);
  return LDG_OK;
}

/* flatten: the reservation, the segment lookup and the slot fill inline
 * into each caller, as they were when ldg__ring_enqueue was their one
 * caller (two copies are past gcc's own inlining limits). */
__attribute__((flatten)) int ldg__ring_enqueue(ldg_stream *s,
                                               const struct ldg__entry *e,
                                               ldg_seq *seq_out) {
  return ldg__enqueue_entry(s, e, seq_out);
}

/* Whether [addr, addr + bytes) is non-empty and does not wrap. A range ending
 * exactly at the top of the address space is fine. */
static bool ldg__range_ok(const ldg_range *r) {
  return r->bytes != 0 && r->bytes - 1 <= UINTPTR_MAX - r->addr;
}

/* ldg_enqueue's argument checks. Every one happens before anything changes,
 * so a refused call changes nothing and the caller keeps its keep. */
static bool ldg__enqueue_args_ok(const ldg_stream *s, const uint64_t *vec_ids,
                                 size_t n_vec, const ldg_range *ranges,
                                 size_t n_ranges) {
  if (s == NULL) return false;
  if ((n_vec != 0 && vec_ids == NULL) || (n_ranges != 0 && ranges == NULL)) {
    return false;
  }
  /* n_vec + 2 * n_ranges words, counted in bytes, must not overflow. */
  const size_t max_words = (SIZE_MAX / sizeof(uint64_t)) / 4;
  if (n_vec > max_words || n_ranges > max_words) return false;
  for (size_t i = 0; i < n_ranges; i++) {
    if (!ldg__range_ok(&ranges[i])) return false;
  }
  return true;
}

/* The enqueue of an operation, its entry built on this frame with a
 * constant kind (ldg__enqueue_entry says why): the body of both entry
 * points below, each its own flattened copy. */
static inline __attribute__((always_inline)) int ldg__enqueue_op(
    ldg_stream *s, ldg_keep keep, const uint64_t *vec_ids, size_t n_vec,
    const ldg_range *ranges, size_t n_ranges, ldg_seq *seq_out) {
  const struct ldg__entry e = {
      .kind = LDG__KIND_OP,
      .keep = keep,
      .vec_ids = vec_ids,
      .n_vec = n_vec,
      .ranges = ranges,
      .n_rng = n_ranges,
  };
  return ldg__enqueue_entry(s, &e, seq_out);
}

/* ldg_enqueue once its arguments passed ldg__enqueue_args_ok: cuda/'s entry
 * (thread_ops.h), which checks a hold with the same rules before its driver
 * call and would otherwise check it twice (bench/RESULTS.md, "Issue 11,
 * eleventh session: the launch row (launch11)"). Its own flattened copy of
 * the enqueue, as ldg_enqueue's below: ldg_enqueue as its checks and a tail
 * call to this one cost every direct caller ~16 instructions more (two
 * frames; ledger_bench's private row, bench/instr_per_op.sh). */
__attribute__((flatten)) int ldg__enqueue_checked(
    ldg_stream *s, ldg_keep keep, const uint64_t *vec_ids, size_t n_vec,
    const ldg_range *ranges, size_t n_ranges, ldg_seq *seq_out) {
  return ldg__enqueue_op(s, keep, vec_ids, n_vec, ranges, n_ranges, seq_out);
}

/* The public entry point lives here rather than in ledger.c with the other
 * entry points' checks so that the checks, the reservation and the slot
 * fill are one function: no call, no entry built in memory (flatten: as
 * ldg__ring_enqueue). */
__attribute__((flatten)) int ldg_enqueue(ldg_stream *s, ldg_keep keep,
                                         const uint64_t *vec_ids, size_t n_vec,
                                         const ldg_range *ranges,
                                         size_t n_ranges, ldg_seq *seq_out) {
  if (!ldg__enqueue_args_ok(s, vec_ids, n_vec, ranges, n_ranges))
    return LDG_EINVAL;
  return ldg__enqueue_op(s, keep, vec_ids, n_vec, ranges, n_ranges, seq_out);
}

/* ---- Inspection (ledger_testing.h) ------------------------------------------------- */

unsigned ldg__fast_reserve(void) { return LDG__FAST_R; }

uint64_t ldg__testing_asked(ldg_stream *s) {
  /* Acquire: a test reads it at a quiet moment. */
  return ldg__load_acquire(&s->asked);
}

unsigned ldg__testing_slot_asks(ldg_stream *s) {
  unsigned n = 0;
  bool v = ldg__ring_read_lock(s);
  /* Acquire: as in ldg__take_chunk (a test reads them at a quiet moment). */
  for (struct ldg__seg *g = ldg__load_seq_cst(&s->head); g != NULL;
       g = ldg__load_acquire(&g->next)) {
    for (uint32_t i = 0; i < g->size; i++)
      n += ldg__load_acquire(&g->slots[i].ask) != LDG__ASK_NONE;
  }
  ldg__ring_read_unlock(s, v);
  return n;
}

uint64_t ldg__ring_tail_end(ldg_stream *s) {
  /* Acquire: as in ldg__ring_reserve_cas (a test reads it at a quiet
   * moment). */
  return ldg__load_acquire(&s->tail_end);
}

uint64_t ldg__ring_fast_gen(ldg_stream *s) {
  return ldg__load_seq_cst(&s->fast_gen); /* as in ldg__ring_reserve */
}
