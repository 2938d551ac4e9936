/*
 * The per-stream ring, part 7 of 7: releasing — claims, taking chunks of
 * entries, and the transitive release engine (release, destroy,
 * finalisation). ring.c opens with the layout and the publication
 * handshake a release takes part in.
 *
 * TRANSITIVE RELEASE, WITHOUT RECURSION OR ALLOCATION
 *   A release walks its interval in chunks: under rcu_read_lock it takes up to
 *   64 entries, in seq order, stopping after a wait; it leaves the read-side
 *   section and runs the keeps. For a wait on stream a up to u, the wait's own
 *   slot (taken, not yet resolved, hence pinned) becomes the stack frame: it
 *   stores where the current stream's walk stopped, and the walk continues on
 *   a's newly claimed interval (released_a, u]. When that finishes, the frame
 *   is popped — the wait's reference to a is dropped, the slot resolved — and
 *   the walk resumes. Chains of any length therefore need no native stack and
 *   no heap, and cycles end because a claim that raises nothing yields an
 *   empty interval. Dropping the last reference of a inside the walk destroys
 *   a in the same loop (the frame turns into a "finalize" frame), so even
 *   destruction cascades stay iterative.
 *
 * A SLOT FOUND EMPTY
 *   The walk owns the seq, but its enqueuer has not published. Every
 *   enqueuer publishes with a plain store, and the walk asks it to take the
 *   entry itself. For a shared seq, in the slot (ldg__overtake_slot: a
 *   bounded spin, the ask by a store, membarrier, a second read, a CAS
 *   deciding; ring.c, PUBLICATION). On a stream with one publisher
 *   (ldg__one_publisher), and for the seqs an owned stream's owner
 *   reserved, through s->asked (ldg__overtake_one:
 *   a bounded spin, the ask by CAS, membarrier, a second read, a CAS
 *   deciding; ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER). Which
 *   seqs ask is ldg__seq_asks (internal.h): the choice the seq's enqueuer
 *   made when it reserved it, whatever the stream's mode is now (tail not
 *   installed, or seq below the installed base; the others ask in the slot; owned.c,
 *   OWNED STREAMS, "Publication"). An ask of another release for an earlier seq that it finds
 *   on the word it adopts, with that entry: the chunk ends at the slot, and
 *   the adopted entry is taken after the chunk's keeps (ldg__take_one: its
 *   slot resolved on its own segment, its keep run or its wait fired by a
 *   nested engine, as an enqueuer does with an entry given back), the
 *   stream held as for a wait. Nothing here waits for another thread.
 *
 * POPPING A FRAME
 *   Two deferrals of g->resolved adds, both on a segment a wait pins:
 *   - A chunk that stops at a wait leaves the slots it took in the wait's
 *     segment (the wait among them) uncounted: the wait's frame keeps the
 *     count (u.wait.unresolved). The wait is taken and unresolved, so that
 *     segment could not be retired before the count anyway: counting its
 *     other slots later changes no retirement.
 *   - The popped frame's count is added in the read-side section that takes
 *     the parent's next chunk, not in a section of its own (or, if the
 *     parent's walk is finished, in one of its own), together with that
 *     chunk's slots of the same segment: one add where there were up to
 *     three. The chunk's walk from head meets the frame's segment before it
 *     reads any slot (the segment holds the seq before the parent's cursor
 *     and is pinned, so it is at or after head), and counts the frame's
 *     slots in the add it makes on leaving that segment, or at the chunk's
 *     end (or leaves them, with its own, to the next wait's frame if that
 *     chunk stops at a wait in the same segment).
 *   Every slot is still counted exactly once, by the walk that took it, on
 *   its own segment, after its relaxed store of EMPTY (sequenced before);
 *   only later, past other loads, CASes and keeps of the walk, in adds that
 *   count several slots, as every chunk's add does. A slot counted late
 *   only keeps its segment pinned longer, and nothing waits for it. Until
 *   the add a wait's slot is taken and unresolved, so its segment stays
 *   pinned (WHO MAY RECLAIM A SLOT, segment.c), and its stream is held by
 *   whoever holds it for its walk (the caller, or the wait that led to it).
 *   A walk through waits (the serving pattern: op on a, wait of b on a, ops
 *   on b) so enters one read-side section fewer per fired wait (with
 *   liburcu's out-of-line read_lock/read_unlock and their __tls_get_addr,
 *   ~85 instructions each: bench/RESULTS.md, "Issue 11, round 2") and makes
 *   one add on b per release where it made one per wait and one more
 *   ("Issue 11, seventh session: serving at one thread"). Model:
 *   ledger/model/ring_common.pml's engine and take_chunk (pop_g, pop_k,
 *   fr_k), wait.pml; mutants BUG_POP_ANY_SEG (the frame's count added in
 *   the chunk's last add, whatever its segment) and BUG_FRAME_KEEP_SHORT
 *   (the frame keeps its segment's taken slots but not the wait's own)
 *   fail.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdio.h>
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

#define LDG__BATCH 64u

/* ---- Release ------------------------------------------------------------------------ */

/* Raises s->released to upto. On success the caller owns (old, upto]. */
static bool ldg__claim(ldg_stream *s, ldg_seq upto, ldg_seq *from) {
  /* The CAS alone makes the intervals disjoint (one modification order of
   * released). acq_rel: each claim happens-after the claims before it,
   * so no release sees a higher mark than its own walk has caught up with;
   * the queries' acquire loads of released pair with the release half. */
  ldg_seq r = ldg__load_acquire(&s->released);
  while (r < upto) {
    if (ldg__cas_weak_acq_rel(&s->released, &r, upto)) {
      *from = r + 1;
      LDG__HOOK(LDG__HOOK_RELEASE_CLAIMED, s);
      return true;
    }
  }
  return false;
}

/* ---- A release that overtakes a one-publisher enqueue ------------------------
 * (ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER) */

/* Re-reads of an EMPTY slot before asking: an enqueuer between its
 * reservation and its publication is usually tens of ns from it; one that
 * is descheduled there is what the ask and the heavy fence are for. */
#define LDG__OVERTAKE_SPINS 64

static inline void ldg__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* An ask another release installed and this one took over (adopted): that
 * release's seq, FULL and now ours, taken after the chunk. */
struct ldg__adopted {
  struct ldg__seg *g;
  struct ldg__slot *slot;
};

/* The slot of seq z of s, unresolved (so its segment is at or after head
 * and allocated). Under RCU. */
static struct ldg__slot *ldg__slot_of_unresolved(ldg_stream *s, ldg_seq z,
                                                 struct ldg__seg **gp) {
  struct ldg__seg *g = ldg__seg_from_head(s, z);
  *gp = g;
  return &g->slots[z - g->base];
}

static __attribute__((noreturn, noinline)) void ldg__ask_broken(
    ldg_stream *s, ldg_seq seq, ldg_seq w, const char *what) {
  fprintf(stderr,
          "streamledger: stream %llu: release of seq %llu found s->asked = "
          "%llu and %s (two publishers at once on a one-publisher stream?)\n",
          (unsigned long long)s->id, (unsigned long long)seq,
          (unsigned long long)w, what);
  abort();
}

/* The release's side: the walk owns seq and read its slot EMPTY. Returns
 * FULL when the walk takes the entry, RETRACTED when the enqueuer resolved
 * it, ABANDONED when someone else takes it (its enqueuer, or a later
 * release that adopted our ask). An ask of another release this one
 * adopted is left in *ad. Never waits for another thread beyond a bounded
 * spin. Under RCU. */
/* The bounded spin before an ask: the state read last (EMPTY: still not
 * published). */
static uint32_t ldg__overtake_spin(struct ldg__slot *slot) {
  uint32_t st = LDG__SLOT_EMPTY;
  for (int i = 0; i < LDG__OVERTAKE_SPINS; i++) {
    ldg__cpu_relax();
    /* Acquire: as the first read of state in ldg__take_chunk. Published
     * before we asked: ours, as always (only we could ask about seq). */
    st = ldg__load_acquire(&slot->state);
    if (st != LDG__SLOT_EMPTY) break;
  }
  return st;
}

static __attribute__((noinline)) uint32_t ldg__overtake_one(
    ldg_stream *s, struct ldg__slot *slot, ldg_seq seq,
    struct ldg__adopted *ad) {
  uint32_t st = ldg__overtake_spin(slot);
  if (st != LDG__SLOT_EMPTY) return st;
  LDG__HOOK(LDG__HOOK_RELEASE_ASKING, s);
  ldg_seq w = 0, from;
  for (;;) {
    from = w;
    /* Install the ask: from 0, or over an earlier seq's ask (adopting
     * it). acq_rel: the release half pairs with the enqueuer's acquire
     * load and CAS (it runs the keep after what we knew); the acquire
     * half with the CAS that installed an ask we adopt. */
    if (ldg__cas_acq_rel(&s->asked, &w, seq)) break;
    if (w > seq) {
      /* A release owns w, so w was reserved, after our enqueuer
       * returned: our slot is published (that store happens before the
       * reservation of w, which happens before the ask we just read). */
      st = ldg__load_acquire(&slot->state);
      if (st == LDG__SLOT_EMPTY) ldg__ask_broken(s, seq, w, "an EMPTY slot");
      return st;
    }
    if (w == seq) ldg__ask_broken(s, seq, w, "our own ask");
    if (w != 0) LDG__HOOK(LDG__HOOK_RELEASE_ASK_BUSY, s);
    /* Not asked yet: a publication meanwhile is ours as above. */
    st = ldg__load_acquire(&slot->state);
    if (st != LDG__SLOT_EMPTY) return st;
  }
  if (from != 0) {
    /* We took an earlier seq's ask off the word: its entry is ours (whoever
     * takes an ask off the word takes the entry). Its enqueuer returned
     * before ours reserved seq, without taking it off (else it would not be
     * there), so that slot is FULL, unresolved, and its asker will lose its
     * CAS. Acquire: as above (the payload happens before our seq). */
    struct ldg__seg *g;
    struct ldg__slot *z = ldg__slot_of_unresolved(s, from, &g);
    if (ldg__load_acquire(&z->state) != LDG__SLOT_FULL)
      ldg__ask_broken(s, seq, from, "adopted an unpublished slot");
    ad->g = g;
    ad->slot = z;
  }
  LDG__HOOK(LDG__HOOK_RELEASE_ASKED, s);
  /* Our ask before the read below: every running thread makes a full
   * barrier here, so the enqueuer's store of FULL is visible to the read,
   * or its read of asked (after the store) sees our ask (rcu.h). */
  ldg__asym_heavy();
  /* Acquire: pairs with the publishing store (the payload). */
  st = ldg__load_acquire(&slot->state);
  /* EMPTY: not published before the fence, so its enqueuer will read our
   * ask and take it off: it releases the entry. */
  if (st == LDG__SLOT_EMPTY) return LDG__SLOT_ABANDONED;
  /* FULL (or RETRACTED): whoever takes the ask off decides, against the
   * enqueuer's same CAS or a later release adopting it. acq_rel: as the
   * enqueuer's CAS. */
  ldg_seq mine = seq;
  if (ldg__cas_acq_rel(&s->asked, &mine, 0)) return st;
  return LDG__SLOT_ABANDONED;
}

/* The release's side of PUBLICATION (ring.c) for a shared seq: the walk
 * owns the slot's seq and read it EMPTY. Returns FULL when the walk takes
 * the entry, RETRACTED when the enqueuer resolved it, ABANDONED when the
 * enqueuer takes it. Never waits for another thread beyond a bounded spin.
 * Under RCU (the walk's section pins the slot while we read and CAS it). */
static __attribute__((noinline)) uint32_t ldg__overtake_slot(
    ldg_stream *s, struct ldg__slot *slot) {
  uint32_t st = ldg__overtake_spin(slot);
  if (st != LDG__SLOT_EMPTY) return st;
  LDG__HOOK(LDG__HOOK_RELEASE_ASKING, s);
  /* Only the owner of the slot's seq asks, once, so a store: nobody else
   * writes the ask until the enqueuer reads it (NONE until now). Release:
   * pairs with the enqueuer's acquire load and CAS (it runs the keep after
   * what we knew: the work our release covers complete). */
  ldg__store_release(&slot->ask, (uint8_t)LDG__ASK_ASKED);
  LDG__HOOK(LDG__HOOK_RELEASE_ASKED, s);
  /* Our ask before the read below: every running thread makes a full
   * barrier here (and the call one on ours), so the enqueuer's store of
   * FULL is visible to the read, or its read of the ask (after the store)
   * sees our ask (rcu.h). */
  ldg__asym_heavy();
  /* Acquire: pairs with the publishing store (the payload), as in
   * ldg__take_chunk. */
  st = ldg__load_acquire(&slot->state);
  /* EMPTY: not published before the fence, so its enqueuer will read our
   * ask and take it off: it releases the entry. */
  if (st == LDG__SLOT_EMPTY) return LDG__SLOT_ABANDONED;
  /* FULL (or RETRACTED): whoever takes the ask off decides, against the
   * enqueuer's same CAS. acq_rel: as the enqueuer's CAS. NONE written:
   * the slot's next life starts with no ask. */
  uint8_t a = LDG__ASK_ASKED;
  if (ldg__cas_acq_rel(&slot->ask, &a, (uint8_t)LDG__ASK_NONE)) return st;
  return LDG__SLOT_ABANDONED;
}

void ldg__take_one(ldg_stream *s, struct ldg__seg *g, struct ldg__slot *slot) {
  /* The slot is FULL and ours: nobody else reads its payload but queries
   * (which read ids and ranges, never keep or wait). */
  if (slot->kind == LDG__KIND_WAIT) {
    ldg_stream *a = slot->u.wait.target;
    ldg_seq u = slot->u.wait.upto;
    /* Relaxed: ordered by the resolve (as in ldg__take_chunk). */
    ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
    ldg__resolve_one(s, g);
    ldg__fire_wait(a, u);
    return;
  }
  ldg_keep keep = slot->u.op.keep;
  struct ldg__vindex *vx = s->vindex;
  if (slot->aux == LDG__OP_EXT) {
    if (vx != NULL)
      ldg__vindex_remove(vx, slot->u.op.d.ext->w, slot->u.op.d.ext->n_vec);
    /* It was FULL: queries may still read it. */
    ldg__call_rcu(&slot->u.op.d.ext->rcu, ldg__ext_free_cb);
  } else if (vx != NULL) {
    ldg__vindex_remove(vx, slot->u.op.d.in.w, slot->u.op.d.in.n_vec);
  }
  /* Relaxed: as in ldg__take_chunk. */
  ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
  ldg__resolve_one(s, g);
  /* Release: pairs with the acquire load in ldg_pending_count. */
  ldg__fetch_add_release(&s->ops_released, 1);
  ldg__thread_ops++;
  if (keep.release != NULL) keep.release(keep.ctx);
}

/* Where a walk stands on one stream: seqs next..end (inclusive) are owned and
 * not yet taken. frame is the wait slot whose firing started this walk, NULL
 * for the walk the caller started. */
struct ldg__cursor {
  ldg_stream *s;
  ldg_seq next;
  ldg_seq end;
  struct ldg__slot *frame;
};

static bool ldg__cursor_done(const struct ldg__cursor *c) {
  return c->next > c->end;
}

/* Slots of segment g (of the stream a walk is on) taken and not yet
 * counted resolved (POPPING A FRAME); g NULL: none. */
struct ldg__unresolved {
  struct ldg__seg *g;
  uint32_t k;
};

/* Takes up to LDG__BATCH keeps of c's interval into keeps, in seq order,
 * stopping right after a wait, which is returned taken but unresolved (it
 * becomes a frame). *pend, on entry: a popped frame's unresolved slots, of
 * a segment of c->s, counted with the chunk's own slots of that segment in
 * one add (POPPING A FRAME). On return: after a wait, the slots of the
 * wait's segment taken and left uncounted, the wait among them (its frame
 * keeps them); else none. Under RCU. Returns the number of keeps. */
static size_t ldg__take_chunk(struct ldg__cursor *c,
                              struct ldg__unresolved *pend, ldg_keep *keeps,
                              struct ldg__slot **wait,
                              struct ldg__adopted *ad) {
  ldg_stream *s = c->s;
  struct ldg__vindex *vx = s->vindex; /* fixed before s was linked */
  size_t n = 0;
  struct ldg__seg *pop_g = pend->g;
  const uint32_t pop_k = pend->k;
  /* The cursor in registers (the atomics below are compiler barriers, so
   * c->next in memory would be stored and reloaded per slot); written back
   * at the end. */
  ldg_seq next = c->next;
  ldg_seq end = c->end; /* lowered to end the chunk after an adoption */
  *wait = NULL;
  /* head and next: acquire pairs with the seq_cst CASes that moved head and
   * linked the segment (release halves), after its header was written.
   * head seq_cst: a visitor's first load after it counted itself (segment.c,
   * HOT REUSE); on x86 a plain load either way. */
  struct ldg__seg *g = ldg__load_seq_cst(&s->head);
  /* Resolved in g, not yet counted: the popped frame's slots, if g holds
   * them. The walk meets pop_g on its way from head (pop_g is pinned, so at
   * or after head; it holds seq next - 1, so it is next's segment or an
   * earlier one) before it reads any slot of the chunk. */
  uint32_t taken = g == pop_g ? pop_k : 0;
  while (next <= end && n < LDG__BATCH) {
    const ldg_seq base = g->base;
    const ldg_seq seg_end = base + g->size;
    if (next >= seg_end) {
      /* next before the add: the add may complete g, and its owner may then
       * reuse g at once (segment.c, HOT REUSE: after its own retirement
       * the owner touches g no more). */
      struct ldg__seg *after = ldg__load_acquire(&g->next);
      if (taken != 0) ldg__seg_resolve(s, g, taken);
      if (g == pop_g) pop_g = NULL; /* counted in the add above */
      g = after;
      if (g == NULL) abort(); /* every seq <= tail has a segment */
      taken = g == pop_g ? pop_k : 0;
      continue;
    }
    if (next < base) {
      /* Segments before head were retired: all their slots, ours included,
       * were resolved by refused (retracted) enqueues. */
      next = base;
      continue;
    }
    /* The slots of g from next: up to the interval's end, g's end, or as
     * many as keeps has room for (each slot takes at most one), with the
     * bounds computed once here rather than tested per slot. */
    ldg_seq stop = end < seg_end ? end + 1 : seg_end;
    if (stop - next > LDG__BATCH - n) stop = next + (LDG__BATCH - n);
    struct ldg__slot *slot = &g->slots[next - base];
    for (; next < stop; slot++) {
      LDG__HOOK(LDG__HOOK_RELEASE_TAKING, s);
      /* Acquire: pairs with the publishing store (release) in
       * ldg__publish_one / ldg__publish_shared, so the payload is read as
       * written. */
      uint32_t st = ldg__load_acquire(&slot->state);
      next++;
      if (__builtin_expect(st != LDG__SLOT_FULL, 0)) {
        if (st == LDG__SLOT_EMPTY) {
          LDG__HOOK(LDG__HOOK_RELEASE_SAW_EMPTY, s);
          if (ldg__seq_asks(s, next - 1)) {
            /* A one-publisher seq (or both ways): ask through s->asked
             * (ring.c, PUBLICATION ON A STREAM WITH ONE PUBLISHER; owned.c,
             * OWNED STREAMS, "Publication", for which seqs). */
            st = ldg__overtake_one(s, slot, next - 1, ad);
            if (__builtin_expect(ad->slot != NULL, 0)) {
              /* Taken after the chunk: end the chunk with this slot. */
              end = next - 1;
              stop = next;
            }
          } else {
            /* A shared seq: ask in the slot (ring.c, PUBLICATION). */
            st = ldg__overtake_slot(s, slot);
          }
        }
        /* FULL: published meanwhile, or ours after our ask; RETRACTED (the
         * enqueuer resolved it) or ABANDONED: someone else takes it. */
        if (st != LDG__SLOT_FULL) continue;
      }
      if (slot->kind == LDG__KIND_WAIT) {
        if (slot->u.wait.target == NULL) { /* a wait on itself: fires nothing */
          /* Relaxed: see the store to EMPTY below. */
          ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
          taken++;
          continue;
        }
        *wait = slot;
        goto out;
      }
      keeps[n++] = slot->u.op.keep;
      if (vx != NULL) { /* taken: out of the vector index (vindex.c) */
        if (slot->aux == LDG__OP_EXT)
          ldg__vindex_remove(vx, slot->u.op.d.ext->w, slot->u.op.d.ext->n_vec);
        else
          ldg__vindex_remove(vx, slot->u.op.d.in.w, slot->u.op.d.in.n_vec);
      }
      if (slot->aux == LDG__OP_EXT) {
        /* Queries may still read it: free after a grace period. */
        ldg__call_rcu(&slot->u.op.d.ext->rcu, ldg__ext_free_cb);
      }
      /* Taken: nobody else touches this slot in this life (queries skip
       * seqs at or below released), so it goes back to EMPTY for reuse.
       * Relaxed: sequenced before our seq_cst add to g->resolved (release
       * sequence), which the retirer reads; the retire happens-before the
       * pool's push (grace period), whose release pairs with the next
       * owner's acquire pop. */
      ldg__store_relaxed(&slot->state, (uint32_t)LDG__SLOT_EMPTY);
      taken++;
    }
  }
out:
  c->next = next;
  if (*wait != NULL) {
    /* The wait pins g until its frame is popped: g's slots taken here wait
     * with it, and are counted with it (POPPING A FRAME). */
    pend->g = g;
    pend->k = taken + 1;
  } else {
    if (taken != 0) ldg__seg_resolve(s, g, taken);
    pend->g = NULL;
    pend->k = 0;
  }
  if (g == pop_g) pop_g = NULL; /* counted above, or left with the wait */
  /* Not met by the walk (it always is: see above): counted alone. */
  if (__builtin_expect(pop_g != NULL, 0))
    ldg__seg_resolve(s, pop_g, pop_k);
  /* Release: pairs with the acquire load in ldg_pending_count. We read
   * these slots FULL (acquire, after their publishers' reservations on
   * tail), so a query that counts them released also sees their seqs in
   * tail. */
  if (n != 0) ldg__fetch_add_release(&s->ops_released, n);
  ldg__thread_ops += n;
  return n;
}

_Thread_local uint64_t ldg__thread_ops;

uint64_t ldg_thread_ops_released(void) { return ldg__thread_ops; }

static void ldg__run_keeps(const ldg_keep *keeps, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (keeps[i].release != NULL) keeps[i].release(keeps[i].ctx);
  }
}

/* Marks s destroyed, the first step of the destroy handshake. False if it
 * was destroyed already. Sets *heavy if the heavy barrier must follow,
 * before the caller reads the tail (leaves it as it was if not). */
static bool ldg__mark_destroyed_only(ldg_stream *s, bool *heavy) {
  bool expected = false;
  /* seq_cst: the destroy handshake (DESTROY above). */
  if (!ldg__cas_seq_cst(&s->destroyed, &expected, true)) return false;
  /* A single-issuer stream's enqueuer, and the owner of an owned stream,
   * order their reserving store before their load of destroyed with a
   * compiler barrier only: the heavy side goes between our CAS and the
   * caller's load of the tail (reserve.c, SINGLE-ISSUER STREAMS; owned.c,
   * OWNED STREAMS). flags: immutable. */
  if ((s->flags & LDG_STREAM_SINGLE_ISSUER) || ldg__ring_owner_may_reserve(s))
    *heavy = true;
  return true;
}

/* Marks s destroyed and unlinks it. False if it was destroyed already. */
static bool ldg__mark_destroyed(ldg_stream *s) {
  bool heavy = false;
  if (!ldg__mark_destroyed_only(s, &heavy)) return false;
  if (heavy) ldg__asym_heavy();
  ldg__registry_unlink(s);
  return true;
}

/* Points c at everything pending on c->s, destroying it first; an empty
 * interval if it was destroyed already (then nothing is pending). */
static void ldg__cursor_destroy(struct ldg__cursor *c) {
  LDG__HOOK(LDG__HOOK_FINALIZE, c->s);
  c->next = 1;
  c->end = 0;
  if (!ldg__mark_destroyed(c->s)) return;
  ldg_seq t = ldg__tail_seq_cst(c->s); /* tail, or the owner's otail */
  ldg_seq from;
  if (ldg__claim(c->s, t, &from)) {
    c->next = from;
    c->end = t;
  }
}

/* The release walk. mode says what the caller gave us of s:
 *   BORROWED  the caller's reference, valid for the call; if the walk must
 *             come back to s after running callbacks it takes its own.
 *   OWNED     one reference the walk drops at the end.
 *   FINALIZE  s has no reference left: destroy it, release all, free it. */
void ldg__engine(ldg_stream *s, ldg_seq upto, int mode) {
  struct ldg__cursor cur = {s, 1, 0, NULL};
  bool own_top = (mode == LDG__TOP_OWNED);
  if (mode == LDG__TOP_FINALIZE) {
    ldg__cursor_destroy(&cur);
  } else {
    ldg_seq from;
    if (ldg__claim(s, upto, &from)) {
      cur.next = from;
      cur.end = upto;
    }
  }

  ldg_keep keeps[LDG__BATCH];
  /* A popped frame's slots, not yet counted resolved, of a segment of the
   * stream the pop resumed (cur.s): see POPPING A FRAME. Between a chunk
   * that stops at a wait and the wait's frame: that wait's. */
  struct ldg__unresolved pend = {NULL, 0};
  for (;;) {
    if (!ldg__cursor_done(&cur)) {
      struct ldg__slot *w;
      struct ldg__adopted ad = {NULL, NULL};
      bool v = ldg__ring_read_lock(cur.s); /* segment.c, HOT REUSE */
      size_t n = ldg__take_chunk(&cur, &pend, keeps, &w, &ad);
      ldg__ring_read_unlock(cur.s, v);
      LDG__HOOK(LDG__HOOK_RELEASE_CHUNK_TAKEN, cur.s);
      if (cur.frame == NULL && mode == LDG__TOP_BORROWED && !own_top &&
          (w != NULL || ad.slot != NULL || !ldg__cursor_done(&cur))) {
        /* We come back to s after callbacks that might drop the caller's
         * last reference. */
        ldg_stream_ref(cur.s);
        own_top = true;
      }
      ldg__run_keeps(keeps, n);
      /* An ask adopted from another release: its entry, taken here. */
      if (__builtin_expect(ad.slot != NULL, 0))
        ldg__take_one(cur.s, ad.g, ad.slot);
      if (w != NULL) {
        ldg_stream *a = w->u.wait.target;
        ldg_seq u = w->u.wait.upto;
        /* The wait's slot (pinned: taken, unresolved) becomes the frame,
         * keeping the slots of its segment left uncounted (upto read: the
         * union's other half). */
        w->u.wait.parent = cur.s;
        w->u.wait.parent_next = cur.next;
        w->u.wait.parent_end = cur.end;
        w->u.wait.parent_frame = cur.frame;
        w->u.wait.seg = pend.g;
        w->u.wait.unresolved = pend.k;
        pend = (struct ldg__unresolved){NULL, 0};
        w->aux = LDG__FRAME_FIRED;
        cur = (struct ldg__cursor){a, 1, 0, w};
        ldg_seq from;
        /* A skip (acquire pairs with the destroyer's CAS): a destroyed a
         * has nothing left to release; if destroy races us, the claims are
         * disjoint. */
        if (!ldg__load_acquire(&a->destroyed) && ldg__claim(a, u, &from)) {
          cur.next = from;
          cur.end = u;
        }
      }
      continue;
    }

    /* cur's interval is finished. */
    if (pend.g != NULL) {
      bool v = ldg__ring_read_lock(cur.s); /* the advance reads head */
      ldg__seg_resolve(cur.s, pend.g, pend.k);
      ldg__ring_read_unlock(cur.s, v);
      pend = (struct ldg__unresolved){NULL, 0};
    }
    if (cur.frame == NULL) {
      if (mode == LDG__TOP_FINALIZE) {
        ldg__stream_life(cur.s, LDG__LIFE_FINALIZED);
        return;
      }
      if (!own_top || !ldg__stream_unref_is_last(cur.s)) return;
      /* Ours was the last reference: destroy and free s in this loop. */
      mode = LDG__TOP_FINALIZE;
      own_top = false;
      ldg__cursor_destroy(&cur);
      continue;
    }
    struct ldg__slot *f = cur.frame;
    if (f->aux == LDG__FRAME_FIRED) {
      if (ldg__stream_unref_is_last(cur.s)) {
        /* The wait held the waited stream's last reference. */
        f->aux = LDG__FRAME_FINALIZE;
        ldg__cursor_destroy(&cur);
        continue;
      }
    } else {
      ldg__stream_life(cur.s, LDG__LIFE_FINALIZED);
    }
    /* Pop: resume the stream holding the wait; the wait's slot and those
     * its frame kept are counted resolved with the parent's next chunk, or
     * alone if the parent's walk is finished (POPPING A FRAME). */
    struct ldg__cursor parent = {f->u.wait.parent, f->u.wait.parent_next,
                                 f->u.wait.parent_end, f->u.wait.parent_frame};
    pend = (struct ldg__unresolved){f->u.wait.seg,
                                    (uint32_t)f->u.wait.unresolved};
    /* Relaxed: as in ldg__take_chunk, ordered by the add that counts the
     * slot resolved (sequenced after this store). */
    ldg__store_relaxed(&f->state, (uint32_t)LDG__SLOT_EMPTY);
    cur = parent;
  }
}

void ldg__release(ldg_stream *s, ldg_seq upto) {
  ldg__engine(s, upto, LDG__TOP_BORROWED);
}

void ldg__finalize(ldg_stream *s) { ldg__engine(s, 0, LDG__TOP_FINALIZE); }

bool ldg__destroy(ldg_stream *s) {
  if (!ldg__mark_destroyed(s)) return false;
  ldg__engine(s, ldg__tail_seq_cst(s), LDG__TOP_BORROWED);
  /* A destroyed stream never grows again, but lives until its last
   * reference goes (an event's, a wait's, a handle's): its parked spare
   * goes now (as ldg_ledger_trim takes it: by CAS, under RCU, no visitor
   * count). An enqueuer that raced the destroy and extends the ring finds
   * none and allocates, as after a trim. */
  ldg__rcu_read_lock();
  ldg__ring_drop_spare(s);
  ldg__rcu_read_unlock();
  return true;
}

void ldg__destroy_batch(ldg_stream *const *ss, size_t n) {
  bool marked[LDG__DESTROY_BATCH];
  bool heavy = false;
  for (size_t i = 0; i < n; i++)
    marked[i] = ldg__mark_destroyed_only(ss[i], &heavy);
  /* One barrier after every CAS of destroyed and before every read of a
   * tail below: each stream's handshake in the order ldg__mark_destroyed
   * gives it (owned.c, OWNED STREAMS, "Destroy"). */
  if (heavy) ldg__asym_heavy();
  for (size_t i = 0; i < n; i++) {
    if (!marked[i]) continue;
    ldg__registry_unlink(ss[i]);
    ldg__engine(ss[i], ldg__tail_seq_cst(ss[i]), LDG__TOP_BORROWED);
  }
}
