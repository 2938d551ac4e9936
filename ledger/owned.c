/*
 * The per-stream ring, part 3 of 7: owned streams — the default stream's
 * reservation by its owning thread, the claim, the revocation and the
 * contested seq. The inline paths that ldg__ring_enqueue (ring.c) runs on
 * every op are in owned.h; the slow paths are here. PUBLICATION,
 * PUBLICATION ON A STREAM WITH ONE PUBLISHER and DESTROY are ring.c's;
 * SINGLE-ISSUER STREAMS and RESERVING ON A SHARED STREAM are reserve.c's.
 *
 * OWNED STREAMS (default streams; issue 11's one-thread row)
 *   A default stream is mostly recorded on by one thread. Its reservation
 *   is then the single-issuer one, without the caller's promise: the first
 *   thread to reserve on s claims it (a CAS of s->owner from UNCLAIMED to
 *   its token: a per-thread 64-bit id from a process-wide counter, never
 *   reused, unlike a TLS address), and while it owns s it reserves on its
 *   own word otail:
 *     R1 load owner == my token (acquire); t = otail (relaxed: its own);
 *     check t + 1 < tail_end (else extend, then R1 again); store-release
 *     otail = t + 1; ldg__asym_light (a compiler barrier); R2 load owner:
 *     still mine -> seq t + 1 is reserved.
 *   tail stays 0 while s is owned, and every reader of the tail reads
 *   tail, or otail while tail is 0 (ldg__tail_relaxed/acquire/seq_cst,
 *   internal.h: one helper per order). Only where membarrier is in use
 *   (ldg__asym_membarrier, registered by ldg_stream_create before the
 *   stream exists); otherwise, and with LDG_STREAM_SHARED (for a caller
 *   that relies on each enqueue making a locked RMW of tail; cuda/ did
 *   until its engine's park paid the heavy fence instead: cuda/engine.c),
 *   streams start SHARED. Single-issuer streams keep their own path.
 *   Revocation. A thread that reserves on s while another owns it (or
 *   after it exited: its token is never reused) revokes, for good:
 *     CAS owner token -> PENDING (seq_cst); ldg__asym_heavy (membarrier);
 *     read tail_end E, then otail T (acquire, pairing with the owner's
 *     release store; in that order, see "The first segment" below); if
 *     T + 1 >= E, extend the ring and read again; CAS tail 0 -> T + 1
 *     (seq_cst); store-release owner = SHARED; decide seq T + 1 (below).
 *   A thread that finds PENDING helps: tail installed -> the shared path;
 *   else the same membarrier, reads and CAS. Several helpers each read
 *   their own T after their own barrier; the first CAS defines tail, the
 *   losers take the shared path. Nobody waits for the owner or for another
 *   helper: the owner may be stalled anywhere in its enqueue.
 *   At most one owner reservation is in flight. membarrier runs a full
 *   barrier on every running thread (a switched-out one passed one). The
 *   owner's R1 after that barrier sees PENDING (the CAS came before the
 *   call); its stores before the barrier are seen by the revoker's reads
 *   after the call. The owner's reservations are sequential, so at most one
 *   passed R1 before the barrier and may store after it: the revoker's T is
 *   either the owner's last seq or one below it. The store-buffering
 *   argument of SINGLE-ISSUER STREAMS, with R2 as the load: a reservation
 *   whose R2 read its token stored before the barrier (T covers it); one
 *   whose store T missed reads PENDING or SHARED at R2.
 *   The contested seq T + 1: either nobody's (no reservation in flight, or
 *   the revoker saw its store) or the in-flight owner reservation's. The
 *   installer and that owner decide it in s->contest with one CAS each
 *   (acq_rel, from 0): the owner, when R2 sees the revocation
 *   (ldg__own_contested), claims its seq q (CONTEST_OWNER(q)); the installer
 *   claims T + 1 (CONTEST_INSTALLER(T + 1)). The owner keeps q unless the
 *   word says INSTALLER(q); the installer takes T + 1 as its own
 *   reservation (the seq its enqueue records, reserved by its seq_cst CAS
 *   of tail like a CAS-path seq) unless the word says OWNER(T + 1). Both
 *   CASes run at most once per stream (the owner's next R1 fails), so the
 *   word is decided once; exactly one side holds T + 1, no seq is left a
 *   hole, no slot is touched by the side that lost. An owner whose q went to
 *   the installer reserves again through the dispatch (tail is installed:
 *   the shared path), keeping its keep.
 *   Why not "T + 1 only if T + 1 < tail_end": the in-flight reservation's
 *   check may read a tail_end raised after the revoker's read (another
 *   revoker's extension, or the shared path's once tail is installed), so
 *   it may store T + 1 whatever the revoker read. The revoker therefore
 *   always treats T + 1 as contested and extends the ring until it has a
 *   slot before installing tail = T + 1 (the shared path's invariant: tail
 *   < tail_end, nothing pending, at the install).
 *   An owner revoked while it extended the ring (R1 again fails) goes back
 *   through the dispatch, never straight to the shared path: tail may not
 *   be installed yet (a revoker between its barrier and its CAS), and the
 *   shared path's CAS from 0 would hand out seq 1 again (own8's bug, found
 *   by ledger_bench's shared row; model mutant BUG_OWN_EXTEND_TO_SHARED).
 *   Readers of the tail. tail != 0 only once installed, at T + 1 >= every
 *   otail the owner stored (T + 1 is at least the in-flight one's), so
 *   max(tail, otail) is "tail if nonzero, else otail", and it only grows.
 *   Every seq up to it is held by exactly one enqueuer (an owner
 *   reservation, the installer's, or a shared one) and has a slot (each was
 *   checked below tail_end): ldg_mark, the release walk, destroy, the
 *   queries (summary.c), ldg_pending_count (registry.c; the owner's add to
 *   waits_enqueued is a release after its release store of otail, as after
 *   the CAS before) and segment.c's heuristics (relaxed, hints) read it so.
 *   Publication (pub9; pub11). The owner publishes as a one-publisher
 *   stream does (a plain store of FULL, the load of asked), so the one
 *   locked instruction left per op goes; the shared path's seqs are
 *   published as PUBLICATION says (a store, then the slot's ask). An ask
 *   where the enqueuer does not look is answered by nobody, so the
 *   enqueuer's choice and that of the release finding the slot EMPTY (ask
 *   through s->asked, or through the slot) must agree for every seq, and
 *   the mode changes during the stream's life. The choice is fixed per seq
 *   when it is reserved (ldg__enqueue_entry's pub):
 *     STORE  a seq whose R2 read the owner's token (the owner's, and
 *            below the installed base B = T + 1: R2 before the barrier,
 *            so the store before it, so T covers it);
 *     BOTH   the contested seq B, whoever holds it (the installer, or the
 *            owner whose R2 saw the revocation and kept it), and the owner
 *            seq q = T kept by an R2 that saw the revocation: the store
 *            of FULL, then (light barrier) the load of the slot's ask in
 *            the read-side section and the load of asked, each followed,
 *            if it asks about seq, by the CAS that takes it off
 *            (ldg__publish_shared). Against a release asking in the slot
 *            this is PUBLICATION; against one asking through s->asked the
 *            load of asked after the store is the one-publisher
 *            handshake's store->load pair. So either choice of the release
 *            is right for these seqs;
 *     SLOT   the shared path's seqs, all above B.
 *   The release (ldg__seq_asks) asks through s->asked iff tail reads 0, or
 *   seq < s->obase, and through the slot otherwise.
 *   obase is B, agreed by CAS from 0 by the helpers before any installs
 *   tail (each installs tail = the agreed B: a valid base for all, since
 *   the first's T was read after a barrier that follows the PENDING CAS;
 *   it has a slot, that helper checked it, tail_end only grows; the
 *   first-segment argument below holds for it as for that helper's T).
 *   Tail read 0: the release owns seq through a mark read from otail, so
 *   seq <= the owner's last otail <= B: a STORE or BOTH seq. Tail read
 *   nonzero: obase (acquire after the acquire of tail, which reads the
 *   installing seq_cst CAS or an RMW after it, sequenced after the obase
 *   CAS) is B; seq < B is STORE or BOTH, seq >= B is BOTH or SLOT. A
 *   stream never owned has obase 0: every ask is in the slot. Each seq
 *   thus gets a release choice its enqueuer handles.
 *   Invariants of the one-publisher argument, for the seqs that are asked
 *   about: (a) at most one mid-publication: the owner's calls never
 *   overlap, shared seqs never ask through s->asked; the installer's B may be reserved
 *   while the owner still publishes its last seq T, but a release asks
 *   about B only if it read tail 0, i.e. owns B through the owner's store
 *   of otail = B, made after the owner's enqueue of T returned (so it is
 *   not then in flight); with tail read nonzero B's release asks in the
 *   slot. (b)
 *   The adoption rule (an ask for w < Y on the word means w's enqueue
 *   returned before Y was reserved): among owner seqs as before; for Y =
 *   B asked, "reserved" is the owner's store of otail = B (its enqueues of
 *   every w < B returned before it, and the release's ownership of B
 *   happens after it: acquire of otail); no seq above B ever asks. So the
 *   cases w > Y and w < Y of ldg__overtake_one are argued as there.
 *   The owner's rare paths: R2 seeing PENDING or SHARED publishes BOTH
 *   (its seq may be B or T: either); a contested seq lost reserves again
 *   on the shared path (CAS); a retraction (DESTROY) of a STORE or BOTH
 *   seq takes an ask about it off the word after its exchange, as a
 *   one-publisher retraction does (no seq after it is reserved by the
 *   owner, and B's later seqs never ask, so nobody adopts it).
 *   The first segment. Until faa12 the fast path's argument needed every
 *   raise of tail_end a check read to come with tail >= F - 1 (argued here
 *   for the owner's and the revoker's extensions). The add-first path
 *   (RESERVING ON A SHARED STREAM) needs no such thing: it adds only after
 *   an ARM, whose own CAS on tail read t >= F - 1, after the install.
 *   Destroy. An owner's seq is reserved by a store, so the DESTROY
 *   handshake is the asymmetric one of SINGLE-ISSUER STREAMS: the owner
 *   loads destroyed (acquire) after its store and light barrier, and the
 *   destroyer (ldg__mark_destroyed) runs ldg__asym_heavy between its CAS of
 *   destroyed and its read of the tail unless s is SHARED
 *   (ldg__ring_owner_may_reserve; an UNCLAIMED stream is made SHARED there
 *   by a CAS, so destroying a stream nobody recorded on costs no barrier).
 *   SHARED read (acquire) means tail installed at T + 1, at least every
 *   owner seq (above): the seq_cst read of tail covers them. The installer's
 *   seq is a seq_cst CAS of tail followed by a seq_cst load of destroyed:
 *   DESTROY's own argument.
 *   ldg_ledger_destroy destroys its streams in batches of up to
 *   LDG__DESTROY_BATCH (ldg__destroy_batch, release.c): the CAS of
 *   destroyed on each, then one heavy barrier if any needs it, then each
 *   one's read of the tail and release. Each stream sees its own CAS, a
 *   barrier, its own read, in that order, as ldg__mark_destroyed gives it:
 *   membarrier orders every running thread's accesses against this
 *   thread's, not against one stream's, so the argument above (and the
 *   models' destroyer) holds for each stream of the batch unchanged; the
 *   other streams' steps between them are on other words.
 *   Cost (bench/RESULTS.md, "Issue 11, eighth session", and "(pub9)"):
 *   the single-issuer reservation plus two loads of owner (on the
 *   read-mostly line, which every enqueue reads) and one TLS load, and (pub9) the one-publisher
 *   publication; no locked instruction in either. ldg_enqueue and ldg_add_wait may call
 *   membarrier once per stream (the revocation), the destroy of an owned
 *   stream once, ldg_ledger_destroy once per batch (ledger.h, table note
 *   (k)).
 *   ThreadSanitizer does not see membarrier (as for single-issuer
 *   streams): nothing plain is ordered by it alone. The owner writes its
 *   slot's payload only once its seq is decided (R2, or s->contest), the
 *   installer only the slot it won, and the destroyer reads slot states
 *   through atomics; so TSan has no race to report, and the runs check the
 *   outcome on the real machine.
 *   Model: ledger/model/own_sb.pml (store buffers, membarrier as "the
 *   buffer drains"; owner, revokers, destroyer or releaser), asserting no
 *   seq handed out twice and every accepted entry released once; mutants
 *   BUG_OWN_NO_MEMBARRIER, _NO_R1, _NO_R2, _CONTESTED_UNDECIDED,
 *   _DESTROY_NO_BARRIER, _EXTEND_TO_SHARED fail. Tests:
 *   tests/torture/owned_test.c (installer-asked: a release asks about the
 *   installer's seq B while tail is 0, the installer parked between its
 *   read of otail and its install, LDG__HOOK_REVOKE_READ).
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/owned.h"

static _Atomic uint64_t ldg__own_next = LDG__OWN_FIRST_TOKEN;

/* R2 saw that a revocation began after the owner's store of otail = q: q
 * may be the contested seq (the one after the last the installing revoker
 * saw). The owner claims it in s->contest unless the installer took it
 * first (OWNED STREAMS, "The contested seq"). Runs at most once per
 * stream: the owner's next reservation fails R1. LDG__OWN_KEPT: q is ours,
 * published both ways (OWNED STREAMS, "Publication"). */
__attribute__((noinline)) int ldg__own_contested(ldg_stream *s,
                                                         ldg_seq q,
                                                         ldg_seq *seq) {
  uint64_t cur = 0;
  /* acq_rel: one decision on the word; pairs with the installer's CAS.
   * The seq is ours unless the installer took exactly q. */
  if (ldg__cas_acq_rel(&s->contest, &cur, LDG__CONTEST_OWNER(q)) ||
      cur != LDG__CONTEST_INSTALLER(q)) {
    *seq = q;
    return LDG__OWN_KEPT;
  }
  return LDG__OWN_LOST;
}

/* A reservation on a default stream that this thread does not own and
 * that is not SHARED (OWNED STREAMS): claims it if unclaimed
 * (LDG__OWN_MINE), else revokes the owner's reservation (or helps a
 * revocation under way) and installs tail. LDG_OK: this thread installed
 * tail and took the contested seq (*seq; reserved by a seq_cst CAS of
 * tail, as the CAS path's); LDG__OWN_LOST: take the shared path (tail is
 * installed: every LOST below follows a read of SHARED or of tail != 0);
 * LDG_ENOMEM: the ring could not grow to hold the contested seq. Lock-free:
 * never waits for the owner or for another revoker. */
__attribute__((noinline)) int ldg__own_slow(ldg_stream *s, uint64_t o,
                                                   ldg_seq *seq) {
  if (o == LDG__OWN_UNCLAIMED) {
    if (ldg__own_tok == LDG__OWN_NO_TOKEN) {
      /* Relaxed: uniqueness is the counter's modification order. */
      ldg__own_tok = ldg__fetch_add_relaxed(&ldg__own_next, 1);
    }
    /* acq_rel: one claimer; the failure's acquire reads the word as the
     * dispatch's load did. */
    if (ldg__cas_acq_rel(&s->owner, &o, ldg__own_tok)) return LDG__OWN_MINE;
  }
  if (o >= LDG__OWN_FIRST_TOKEN) {
    /* Revoke. seq_cst: the store side of the handshake with the owner's R2,
     * before our barrier (ldg__asym_heavy). A failure read PENDING (another
     * revoker's) or SHARED. */
    ldg__cas_seq_cst(&s->owner, &o, (uint64_t)LDG__OWN_PENDING);
    if (o == LDG__OWN_SHARED) return LDG__OWN_LOST;
  }
  if (o == LDG__OWN_SHARED) return LDG__OWN_LOST;
  /* PENDING. Installed already: the shared path. seq_cst: a step of S. */
  if (ldg__load_seq_cst(&s->tail) != 0) return LDG__OWN_LOST;
  /* The heavy side: after it, at most one owner reservation is in flight
   * (past R1, its store not seen below), and its R2 sees PENDING. */
  ldg__asym_heavy();
  LDG__HOOK(LDG__HOOK_REVOKE_PENDING, s);
  ldg_seq t;
  for (;;) {
    /* tail_end, then otail (both acquire): an extension by the owner that
     * we see comes with the otail that made it extend (the first-segment
     * argument of OWNED STREAMS; RESERVING ON A SHARED STREAM, reserve.c).
     * otail pairs with the
     * owner's release store. */
    ldg_seq end = ldg__load_acquire(&s->tail_end);
    t = ldg__load_acquire(&s->otail);
    if (t + 1 < end) break;
    /* The contested seq t + 1 needs a slot before tail may reach it. */
    int rc = ldg__ring_extend_outside(s, end);
    if (rc != LDG_OK) return rc;
  }
  LDG__HOOK(LDG__HOOK_REVOKE_READ, s);
  /* The base, agreed before anyone installs it (OWNED STREAMS,
   * "Publication"): the first helper's T + 1, valid for every helper (its
   * T was read after a barrier that follows the PENDING CAS, so it covers
   * every seq whose R2 read the token); it has a slot (that helper checked
   * T + 1 < tail_end, which only grows). acq_rel: the release half pairs
   * with a release's acquire load after its load of tail; the failure's
   * acquire reads the winner's base. */
  ldg_seq base = 0;
  if (!ldg__cas_acq_rel(&s->obase, &base, t + 1)) t = base - 1;
  ldg_seq zero = 0;
  /* seq_cst: a step of S (the shared path's invariant starts here: t + 1 <
   * tail_end, nothing pending); the destroy handshake reads destroyed after
   * it, as after the CAS path's. One installer: tail never returns to 0.
   * Its release half carries obase to a release that reads tail. */
  if (!ldg__cas_seq_cst(&s->tail, &zero, t + 1)) return LDG__OWN_LOST;
  /* Release: a thread that reads SHARED (acquire) sees tail installed. */
  ldg__store_release(&s->owner, (uint64_t)LDG__OWN_SHARED);
  uint64_t cur = 0;
  /* acq_rel: pairs with the owner's CAS in ldg__own_contested. */
  if (!ldg__cas_acq_rel(&s->contest, &cur, LDG__CONTEST_INSTALLER(t + 1)) &&
      cur == LDG__CONTEST_OWNER(t + 1))
    return LDG__OWN_LOST; /* the owner's in-flight reservation got it */
  /* The grow point: as the CAS path's. */
  ldg_seq grow = ldg__load_acquire(&s->grow_at);
  if (__builtin_expect(t + 1 >= grow, 0)) ldg__ring_grow_early(s, t + 1, grow);
  *seq = t + 1;
  return LDG_OK;
}

/* The destroyer, after its CAS of destroyed (release.c): whether it must
 * run the heavy barrier before reading the tail, i.e. whether an owner's
 * reservation may be in flight. An unclaimed stream is made SHARED here (a
 * CAS: a later first enqueuer takes the shared path), so that destroying
 * a stream nobody enqueued on costs no barrier. */
bool ldg__ring_owner_may_reserve(ldg_stream *s) {
  /* Acquire: SHARED read means tail installed (see the dispatch). */
  uint64_t o = ldg__load_acquire(&s->owner);
  if (o == LDG__OWN_UNCLAIMED &&
      ldg__cas_acq_rel(&s->owner, &o, (uint64_t)LDG__OWN_SHARED))
    return false;
  return o != LDG__OWN_SHARED;
}

uint64_t ldg__ring_owner_state(ldg_stream *s) {
  /* Acquire: a test reads it at a quiet moment. */
  uint64_t o = ldg__load_acquire(&s->owner);
  return o >= LDG__OWN_FIRST_TOKEN ? LDG__OWN_FIRST_TOKEN : o;
}
