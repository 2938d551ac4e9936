/*
 * own_sb.pml: owned streams (ledger/owned.c, OWNED STREAMS) under a weak
 * memory model, with the owner's store buffer as destroy_sb.pml models
 * store buffers.
 *
 * The owner of a default stream reserves with no locked instruction:
 *   R1 load owner == me; t = otail; store otail = t + 1 (release, buffered);
 *   compiler barrier; R2 load owner; [seq t + 1 is mine while R2 == me];
 *   load destroyed
 * Its store may sit in its store buffer while its loads go on (the
 * store->load reordering every CPU has). A revoker (another thread's
 * reservation) CASes owner to PENDING, runs membarrier, reads otail = T,
 * installs tail = T + 1 (CAS from 0; one winner) and decides the contested
 * seq T + 1 in `contest` against the owner (CAS each: the owner's claim of
 * its seq q, or the installer's of T + 1; the installer takes T + 1 unless
 * the owner claimed exactly it). A destroyer CASes destroyed, runs
 * membarrier unless owner is SHARED, reads the tail (tail, or otail while
 * tail is 0) and walks the slots (EMPTY -> ABANDONED, FULL: take,
 * RETRACTED: skip).
 *
 * Memory model: as destroy_sb.pml, with one buffered location: the owner's
 * otail (the only plain store of the protocol whose order against a later
 * load matters; every other write is a CAS or a store after one, and goes to
 * memory at once here, which hides behaviours and never adds one).
 *   W  the owner's store of otail goes to its buffer (one entry; a second
 *      store replaces the first) and reaches memory at any later step
 *      (proctype Flusher);
 *   L  the owner's loads of otail read its buffer first; every other load
 *      reads memory;
 *   REL the owner's CASes (contest, slot->state) and its seq_cst RMWs wait
 *      until its buffer drained (x86's locked instructions, C11's release
 *      half);
 *   membarrier (ldg__asym_heavy): the buffer drains, in one step.
 * Every seq has its slot from the start (segments: ring_common.pml; the
 * revoker's extension when T + 1 has none is not modelled).
 *
 * The owner's extension (no room before the store) is a nondeterministic
 * choice to load owner again there, as ldg__ring_reserve_owned does after
 * ldg__ring_extend.
 *
 * Threads: the owner (OWN_OPS enqueues; after its reservation is revoked
 * it takes the shared path, helping the revocation if tail is not installed
 * yet), the revoker (one enqueue), and thread 2: the destroyer, or with
 * OWN_RELEASER a releaser (one release to the mark, no destroy); with
 * OWN_TWO_REVOKERS a second revoker as well (thread 2; the destroyer or
 * releaser is then thread 3: only the owner has a buffer, so thread
 * numbers other than the owner's 0 matter only as "not the owner"). OWN_OPS
 * (default 2): the owner's enqueues. At the end init
 * releases what is left (unless destroyed) and checks that every accepted
 * enqueue was released exactly once and every refused one never, and
 * (assertion at each reservation) that no seq was handed out twice.
 *
 * OWN_PUB (pub9: OWNED STREAMS, "Publication"): the owner's seqs whose R2
 * read its token publish with a plain store of FULL (buffered, in the
 * owner's FIFO with its otail stores), then a load of asked; the contested
 * seq (the installer's, or the owner's kept by an R2 that saw the
 * revocation) publishes both ways (CAS, then the load of asked); shared
 * seqs by CAS. Every walk (releaser, destroyer, init's last release) that
 * finds a slot EMPTY asks (ldg__seq_asks: tail 0, or seq < obase) or
 * abandons; asking is ldg__overtake_one with no spin (CAS asked from w,
 * adopting an earlier ask, w > seq: the slot is FULL; membarrier; second
 * read; CAS asked seq -> 0). Revokers agree on obase by CAS before
 * installing tail. A retraction of a STORE or BOTH seq takes an ask about
 * it off the word. One releaser walks the owner's in-flight seq and the
 * installer's T + 1 in one claim (asserted: an ask it finds on the word is
 * for an earlier, FULL seq; an ask for a later one means its seq is FULL).
 * It never finds its own earlier ask there (a probe for it is not
 * reached): the owner takes an ask off before it reserves again, and the
 * installer's seq is asked about only with tail 0 (owned.c, invariant (a)).
 * Adoption between two releases is pub_sb.pml's.
 * Since pub11 the C publishes shared seqs, and BOTH seqs' slot side, with a
 * store of FULL, and a release that finds such a slot EMPTY asks in the
 * slot (ring.c, PUBLICATION): the CAS EMPTY -> FULL and the walk's CAS
 * EMPTY -> ABANDONED here stand for that handshake, whose outcomes
 * pub_shared.pml checks under store buffers (a FULL slot taken by its
 * release, an EMPTY one left to its enqueuer, which takes the entry).
 *
 * Mutants (each must fail):
 *   BUG_PUB9_BY_MODE             (OWN_PUB) a release asks by the stream's
 *                                current mode (owner not SHARED) instead of
 *                                by seq: an owner's seq abandoned after the
 *                                revocation, its plain store lands on
 *                                ABANDONED, nobody takes the entry
 *   BUG_PUB9_NO_BASE             (OWN_PUB) a release asks only while tail is
 *                                0 (no obase): an owner's seq below the base
 *                                abandoned after the install, lost
 *   BUG_PUB9_INSTALLER_CAS       (OWN_PUB) the installer's seq publishes by
 *                                CAS only (never reads asked): a release
 *                                that asked about it (tail still 0) and read
 *                                EMPTY leaves it to nobody
 *   BUG_OWN_NO_MEMBARRIER        the revoker reads otail with no barrier
 *                                after its CAS to PENDING
 *   BUG_OWN_NO_R2                the owner never checks owner after its store
 *   BUG_OWN_NO_R1                the owner stores without loading owner first
 *                                (it reserves on otail even once revoked)
 *   BUG_OWN_CONTESTED_UNDECIDED  the installer takes T + 1 without the
 *                                contest CAS
 *   BUG_OWN_DESTROY_NO_BARRIER   the destroyer skips membarrier on an owned
 *                                stream
 *   BUG_OWN_EXTEND_TO_SHARED     an owner revoked while it extended the ring
 *                                takes the shared path at once, tail maybe
 *                                not installed (the C's bug fixed in own8:
 *                                seq 1 handed out again)
 * Probes (each must be reached): PROBE_PUB9_ASK_T1 (OWN_PUB: a release asks
 * about the contested seq with tail 0), PROBE_PUB9_TAKEBACK (OWN_PUB: an
 * owner's plain publication is asked and taken back), PROBE_OWN_CONTESTED (the owner's R2 sees
 * the revocation), PROBE_OWN_LOST (the installer took the owner's seq),
 * PROBE_OWN_HELP (the owner installs tail itself), PROBE_OWN_STALE (the
 * revoker or destroyer misses the owner's buffered store).
 */

#ifndef OWN_OPS
#define OWN_OPS 2
#endif
#define NSEQ (OWN_OPS + 3) /* owner ops, two other enqueues, one retake */

#define ST_EMPTY     0
#define ST_FULL      1
#define ST_ABANDONED 2
#define ST_RETRACTED 3

#define O_TOK     16 /* the owner's token */
#define O_PENDING 1
#define O_SHARED  2

#define R_NONE    0
#define R_OK      1
#define R_REFUSED 2

/* Enqueues, by id: the owner's 1..OWN_OPS, the revoker's OWN_OPS + 1, the
 * second revoker's OWN_OPS + 2. */
#define NENQ (OWN_OPS + 2)

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_OWN_CONTESTED
#define P_CONTESTED(c) PROBE_AT(c)
#else
#define P_CONTESTED(c) skip
#endif
#ifdef PROBE_OWN_LOST
#define P_LOST(c) PROBE_AT(c)
#else
#define P_LOST(c) skip
#endif
#ifdef PROBE_OWN_HELP
#define P_HELP(c) PROBE_AT(c)
#else
#define P_HELP(c) skip
#endif
#ifdef PROBE_OWN_STALE
#define P_STALE(c) PROBE_AT(c)
#else
#define P_STALE(c) skip
#endif
#ifdef PROBE_PUB9_ASK_T1
#define P_ASK_T1(c) PROBE_AT(c)
#else
#define P_ASK_T1(c) skip
#endif
#ifdef PROBE_PUB9_TAKEBACK
#define P_TAKEBACK(c) PROBE_AT(c)
#else
#define P_TAKEBACK(c) skip
#endif

/* How a seq is published (LDG__PUB_*). */
#define PUB_CAS   0
#define PUB_STORE 1
#define PUB_BOTH  2

/* Memory. */
byte owner = O_TOK;      /* s->owner: claimed by the owner before the start */
byte otail;              /* s->otail */
byte tail;               /* s->tail */
byte contest;            /* s->contest: 0, or q * 2 + 1 (owner), q * 2 */
byte obase;              /* s->obase: the base the revokers agreed */
byte asked;              /* s->asked */
byte inst_seq;           /* ghost: the seq the installer took (0: none) */
bool destroyed;
byte released;
byte slot[NSEQ + 1];
byte sent[NSEQ + 1];     /* the enqueue id whose entry the slot holds */

/* The owner's store buffer: a FIFO of (address, value), address 0 otail,
 * q > 0 slot[q] (OWN_PUB's plain publication); nb entries; oown the
 * owner's newest otail (its own loads of otail read it: only it writes
 * otail). */
chan sb = [2 * OWN_OPS + 1] of { byte, byte };
byte nb; byte oown;

/* Ghost. */
byte eres[NENQ + 1];     /* R_* */
byte rel[NENQ + 1];      /* times its keep ran */
byte holder[NSEQ + 1];   /* the enqueue id that holds seq (0: none yet) */

#define OWNER_T 0
#define LOAD_OTAIL_OWN oown
#define STALE (oown != otail)
inline apply1() {
  sb ? ba, bv; nb--;
  if
  :: ba == 0 -> otail = bv
  :: else -> slot[ba] = bv
  fi;
  ba = 0; bv = 0
}
byte ba, bv;  /* scratch of apply1 (used inside atomic steps only) */
#define DRAIN atomic { do :: nb > 0 -> apply1() :: else -> break od }
#define STORE_OTAIL(v) atomic { sb ! 0, v; nb++; oown = v }

proctype Flusher() {
end:
  do
  :: atomic { nb > 0 -> apply1() }
  od
}

/* A seq handed out: nobody held it. */
#define HOLD(q, id) atomic { assert(q >= 1 && q <= NSEQ); assert(holder[q] == 0); holder[q] = id }

/* Publication or retraction of seq q by enqueue id, after its load of
 * destroyed (d). Waits for the owner's buffer when run by the owner (REL):
 * harmless for the others (they have none). */
inline publish(q, id, d, me) {
  if
  :: d ->
     atomic { (me != OWNER_T || nb == 0) -> slot[q] = ST_RETRACTED; eres[id] = R_REFUSED }
  :: else ->
     atomic {
       (me != OWNER_T || nb == 0) ->
       sent[q] = id; eres[id] = R_OK;
       if
       :: slot[q] == ST_EMPTY -> slot[q] = ST_FULL
       :: else ->                  /* ABANDONED: ours to release */
          assert(slot[q] == ST_ABANDONED);
          assert(rel[id] == 0); rel[id]++;
          slot[q] = ST_EMPTY
       fi
     }
  fi
}

/* OWN_PUB: seq q published as pm says (LDG__PUB_*); w scratch. The
 * retraction: the exchange (locked), then an ask about q taken off the
 * word (ldg__retract_asked). STORE: buffered store of FULL, then the load
 * of asked (memory: nothing of asked is buffered); naming q, the CAS (it
 * waits for the buffer, as a locked instruction) takes the entry back.
 * CAS, BOTH: the CAS EMPTY -> FULL (ABANDONED: ours); BOTH then reads
 * asked as STORE does. */
inline take_back(q, id, me) {
  atomic {
    (me != OWNER_T || nb == 0) ->
    if
    :: asked == q ->
       asked = 0; assert(rel[id] == 0); rel[id]++; slot[q] = ST_EMPTY;
       P_TAKEBACK(true)
    :: else
    fi
  }
}
inline publish_pub(q, id, d, me, pm, w) {
  if
  :: d ->
     atomic { (me != OWNER_T || nb == 0) -> slot[q] = ST_RETRACTED; eres[id] = R_REFUSED };
     if
     :: pm != PUB_CAS -> atomic { if :: asked == q -> asked = 0 :: else fi }
     :: else
     fi
  :: pm == PUB_STORE && !d ->
     sent[q] = id; eres[id] = R_OK;
     atomic { sb ! q, ST_FULL; nb++ };
     w = asked;
     if :: w == q -> take_back(q, id, me) :: else fi
  :: pm != PUB_STORE && !d ->
     atomic {
       (me != OWNER_T || nb == 0) ->
       sent[q] = id; eres[id] = R_OK;
       if
       :: slot[q] == ST_EMPTY -> slot[q] = ST_FULL; w = 1
       :: else ->                  /* ABANDONED: ours to release */
          assert(slot[q] == ST_ABANDONED);
          assert(rel[id] == 0); rel[id]++;
          slot[q] = ST_EMPTY; w = 0
       fi
     };
     if
     :: w == 1 && pm == PUB_BOTH ->
        w = asked;
        if :: w == q -> take_back(q, id, me) :: else fi
     :: else
     fi
  fi;
  w = 0
}
#ifdef OWN_PUB
#define PUBLISH(q, id, d, me, pm, w) publish_pub(q, id, d, me, pm, w)
#else
#define PUBLISH(q, id, d, me, pm, w) publish(q, id, d, me)
#endif
#ifdef BUG_PUB9_INSTALLER_CAS
#define PUB_INSTALLER PUB_CAS
#else
#define PUB_INSTALLER PUB_BOTH
#endif

/* The revocation, by thread me (ldg__own_slow past the claim): got = the
 * contested seq if this thread installed tail and took it, else 0 (take the
 * shared path). */
inline revoke(me, got, tt, o, c) {
  got = 0;
  atomic {
    (me != OWNER_T || nb == 0) ->    /* seq_cst CAS (REL) */
    o = owner;
    if :: o == O_TOK -> owner = O_PENDING; o = O_PENDING :: else fi
  }
  if
  :: o == O_SHARED || tail != 0 -> skip
  :: else ->
#ifndef BUG_OWN_NO_MEMBARRIER
     DRAIN;                            /* ldg__asym_heavy */
#endif
     atomic {
       tt = (me == OWNER_T -> LOAD_OTAIL_OWN : otail);
       P_STALE(me != OWNER_T && STALE)
     }
     atomic {
       (me != OWNER_T || nb == 0) ->   /* CAS obase 0 -> tt + 1 */
       if
       :: obase == 0 -> obase = tt + 1
       :: else -> tt = obase - 1
       fi
     }
     atomic {
       (me != OWNER_T || nb == 0) ->   /* CAS tail 0 -> tt + 1, seq_cst */
       if
       :: tail == 0 ->
          tail = tt + 1; owner = O_SHARED; got = tt + 1;
          P_HELP(me == OWNER_T)
       :: else
       fi
     }
     if
     :: got != 0 ->
#ifndef BUG_OWN_CONTESTED_UNDECIDED
        atomic {
          (me != OWNER_T || nb == 0) ->
          c = contest;
          if
          :: c == 0 -> contest = got * 2
          :: c == got * 2 + 1 -> got = 0 /* the owner's in-flight op has it */
          :: else
          fi;
          if :: got != 0 -> inst_seq = got :: else fi
        }
#else
        skip
#endif
     :: else
     fi
  fi
}

/* The shared path: a seq_cst RMW of tail (it does not wait for the
 * install: the C's callers come here only once tail is installed). */
inline reserve_shared(me, q) {
  atomic {
    (me != OWNER_T || nb == 0) ->
    tail++; q = tail
  }
}

proctype Owner() {
  byte i = 1, t, q, o, tt, c, got, pm, w;
  bool d, mine, ext_lost;
  do
  :: i > OWN_OPS -> break
  :: else ->
     if
     :: destroyed -> eres[i] = R_REFUSED; goto next   /* early refusal */
     :: else
     fi;
     mine = 0;
     ext_lost = 0;
     pm = PUB_CAS;
#ifndef BUG_OWN_NO_R1
     if
     :: owner == O_TOK ->                               /* R1 */
#else
     if
     :: true ->
#endif
        /* No room: the owner extends the ring and loads owner again (R1
         * again, ldg__ring_reserve_owned); revoked meanwhile, it goes back
         * through the dispatch (to the revocation). */
        if
        :: skip
        :: owner != O_TOK -> ext_lost = 1
        fi;
        if
        :: !ext_lost ->
           t = LOAD_OTAIL_OWN;
           STORE_OTAIL(t + 1);                          /* store otail (buffered) */
#ifndef BUG_OWN_NO_R2
           if
           :: owner == O_TOK -> mine = 1; pm = PUB_STORE /* R2 */
           :: else ->
              P_CONTESTED(true);
              atomic {                                  /* ldg__own_contested */
                nb == 0 ->
                c = contest;
                if
                :: c == 0 -> contest = (t + 1) * 2 + 1; mine = 1
                :: c == (t + 1) * 2 -> mine = 0; P_LOST(true)
                :: else -> mine = 1
                fi;
                pm = PUB_BOTH
              }
           fi;
#else
           mine = 1; pm = PUB_STORE;
#endif
           if
           :: mine -> q = t + 1; HOLD(q, i); d = destroyed  /* light; load destroyed */
           :: else
           fi
        :: else
        fi
     :: else
     fi;
     if
     :: !mine ->
        got = 0;
#ifdef BUG_OWN_EXTEND_TO_SHARED
        /* the C's old dispatch: revoked during the extension, straight to
         * the shared path even while tail is not installed */
        if
        :: !ext_lost -> revoke(OWNER_T, got, tt, o, c)
        :: else
        fi;
#else
        revoke(OWNER_T, got, tt, o, c);
#endif
        if
        :: got != 0 -> q = got; pm = PUB_INSTALLER
        :: else -> reserve_shared(OWNER_T, q); pm = PUB_CAS
        fi;
        HOLD(q, i);
        atomic { nb == 0 -> d = destroyed }             /* seq_cst load */
     :: else
     fi;
     PUBLISH(q, i, d, OWNER_T, pm, w);
next:
     i++
  od
}

proctype Revoker(byte me; byte id) {
  byte q, o, tt, c, got, pm, w;
  bool d;
  if
  :: destroyed -> eres[id] = R_REFUSED
  :: else ->
     revoke(me, got, tt, o, c);
     if
     :: got != 0 -> q = got; pm = PUB_INSTALLER
     :: else -> reserve_shared(me, q); pm = PUB_CAS
     fi;
     HOLD(q, id);
     d = destroyed;                                     /* seq_cst load */
     PUBLISH(q, id, d, me, pm, w)
  fi
}

/* A walk takes the entry of seq k. */
inline take(k) {
  assert(rel[sent[k]] == 0); rel[sent[k]]++; slot[k] = ST_EMPTY
}

/* OWN_PUB: whether the walk asks about seq k found EMPTY (ldg__seq_asks). */
#ifdef BUG_PUB9_BY_MODE
#define ASKS(k) (owner != O_SHARED)
#elif defined(BUG_PUB9_NO_BASE)
#define ASKS(k) (tail == 0)
#else
#define ASKS(k) (tail == 0 || k < obase)
#endif

/* Scratch of the one walk running at a time (the releaser or destroyer,
 * then init's). askq0: ghost, a seq asked about with tail 0. */
byte ww, wfrom, askq0;

/* ldg__overtake_one with no spin: seq k found EMPTY. st = 9 when the slot
 * was settled before the ask (taken or not ours). */
inline ask(k, st) {
  ww = 0;
  do
  :: atomic {
       wfrom = ww;
       if
       :: asked == ww -> asked = k; if :: tail == 0 -> askq0 = k :: else fi; break
       :: else -> ww = asked
       fi
     }
     if
     :: ww > k ->
        atomic { st = slot[k]; assert(st != ST_EMPTY); if :: st == ST_FULL -> take(k) :: else fi };
        st = 9; break
     :: else
     fi;
     assert(ww != k);
     atomic { st = slot[k]; if :: st == ST_FULL -> take(k) :: else fi };
     if :: st != ST_EMPTY -> st = 9; break :: else fi
  od;
  if
  :: st != 9 ->
     if
     :: wfrom != 0 ->   /* adopted: that entry is ours */
        atomic {
          assert(wfrom < k && slot[wfrom] == ST_FULL); take(wfrom)
        }
     :: else
     fi;
     DRAIN;             /* ldg__asym_heavy */
     st = slot[k];
     if
     :: st != ST_EMPTY ->
        atomic {
          if
          :: asked == k -> asked = 0; if :: st == ST_FULL -> take(k) :: else fi
          :: else
          fi
        }
     :: else             /* left to its enqueuer */
     fi
  :: else
  fi;
  ww = 0; wfrom = 0
}

/* The release walk over (released, upto]: claim, then each slot. */
inline walk(upto, q, st) {
  atomic {
    if
    :: released < upto -> q = released + 1; released = upto
    :: else -> q = upto + 1
    fi
  }
  do
  :: q > upto -> break
#ifdef OWN_PUB
  :: q <= upto && slot[q] == ST_EMPTY && ASKS(q) -> ask(q, st); q++
  :: else ->
#else
  :: else ->
#endif
     atomic {
       st = slot[q];
       if
       :: st == ST_EMPTY -> slot[q] = ST_ABANDONED
       :: st == ST_FULL -> assert(rel[sent[q]] == 0); rel[sent[q]]++; slot[q] = ST_EMPTY
       :: else                                         /* RETRACTED */
       fi;
       q++
     }
  od
}

/* The tail as readers read it (ldg__tail_*): tail, or otail while tail is 0. */
inline read_tail(t) {
  t = tail;
  if
  :: t == 0 ->
     atomic { t = otail; P_STALE(STALE) }
  :: else
  fi
}

proctype Destroyer() {
  byte t, q, st;
  destroyed = 1;                                       /* CAS destroyed */
#ifndef BUG_OWN_DESTROY_NO_BARRIER
  if
  :: owner != O_SHARED -> DRAIN                        /* ldg__asym_heavy */
  :: else
  fi;
#endif
  read_tail(t);
  walk(t, q, st)
}

proctype Releaser() {
  byte t, q, st;
  read_tail(t);
  walk(t, q, st)
}

init {
  byte i, t, q, st;
  atomic {
    run Flusher();
    run Owner();
    run Revoker(1, OWN_OPS + 1);
#ifdef OWN_TWO_REVOKERS
    run Revoker(2, OWN_OPS + 2);
#endif
#if defined(OWN_RELEASER)
    run Releaser();
#else
    run Destroyer();
#endif
  }
  (_nr_pr == 2);        /* every worker finished */
  (nb == 0);
  /* Not destroyed: the last release, to the mark. */
  if
  :: !destroyed -> read_tail(t); walk(t, q, st)
  :: else
  fi;
  skip;                 /* (the walk's break lands here, not in the d_step) */
  d_step {
    i = 1;
    do
    :: i <= NENQ ->
       assert(eres[i] != R_OK || rel[i] == 1);
       assert(eres[i] != R_REFUSED || rel[i] == 0);
       i++
    :: else -> break
    od;
#ifdef OWN_PUB
    assert(asked == 0);
#endif
    P_ASK_T1(askq0 != 0 && askq0 == inst_seq)
  }
}
