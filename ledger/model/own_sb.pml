/*
 * own_sb.pml: owned streams (ledger/ring.c, OWNED STREAMS) under a weak
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
 * Mutants (each must fail):
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
 * Probes (each must be reached): PROBE_OWN_CONTESTED (the owner's R2 sees
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

/* Memory. */
byte owner = O_TOK;      /* s->owner: claimed by the owner before the start */
byte otail;              /* s->otail */
byte tail;               /* s->tail */
byte contest;            /* s->contest: 0, or q * 2 + 1 (owner), q * 2 */
bool destroyed;
byte released;
byte slot[NSEQ + 1];
byte sent[NSEQ + 1];     /* the enqueue id whose entry the slot holds */

/* The owner's store buffer (otail). */
bit  bo_full; byte bo_v;

/* Ghost. */
byte eres[NENQ + 1];     /* R_* */
byte rel[NENQ + 1];      /* times its keep ran */
byte holder[NSEQ + 1];   /* the enqueue id that holds seq (0: none yet) */

#define OWNER_T 0
#define LOAD_OTAIL_OWN (bo_full -> bo_v : otail)
#define FLUSH_O atomic { bo_full -> otail = bo_v; bo_full = 0 }
#define DRAIN atomic { if :: bo_full -> otail = bo_v; bo_full = 0 :: else fi }

proctype Flusher() {
end:
  do
  :: FLUSH_O
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
     atomic { (me != OWNER_T || !bo_full) -> slot[q] = ST_RETRACTED; eres[id] = R_REFUSED }
  :: else ->
     atomic {
       (me != OWNER_T || !bo_full) ->
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

/* The revocation, by thread me (ldg__own_slow past the claim): got = the
 * contested seq if this thread installed tail and took it, else 0 (take the
 * shared path). */
inline revoke(me, got, tt, o, c) {
  got = 0;
  atomic {
    (me != OWNER_T || !bo_full) ->   /* seq_cst CAS (REL) */
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
       P_STALE(me != OWNER_T && bo_full && bo_v != otail)
     }
     atomic {
       (me != OWNER_T || !bo_full) ->  /* CAS tail 0 -> tt + 1, seq_cst */
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
          (me != OWNER_T || !bo_full) ->
          c = contest;
          if
          :: c == 0 -> contest = got * 2
          :: c == got * 2 + 1 -> got = 0 /* the owner's in-flight op has it */
          :: else
          fi
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
    (me != OWNER_T || !bo_full) ->
    tail++; q = tail
  }
}

proctype Owner() {
  byte i = 1, t, q, o, tt, c, got;
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
           atomic { bo_full = 1; bo_v = t + 1 }         /* store otail (buffered) */
#ifndef BUG_OWN_NO_R2
           if
           :: owner == O_TOK -> mine = 1                /* R2 */
           :: else ->
              P_CONTESTED(true);
              atomic {                                  /* ldg__own_contested */
                !bo_full ->
                c = contest;
                if
                :: c == 0 -> contest = (t + 1) * 2 + 1; mine = 1
                :: c == (t + 1) * 2 -> mine = 0; P_LOST(true)
                :: else -> mine = 1
                fi
              }
           fi;
#else
           mine = 1;
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
        :: got != 0 -> q = got
        :: else -> reserve_shared(OWNER_T, q)
        fi;
        HOLD(q, i);
        atomic { !bo_full -> d = destroyed }            /* seq_cst load */
     :: else
     fi;
     publish(q, i, d, OWNER_T);
next:
     i++
  od
}

proctype Revoker(byte me; byte id) {
  byte q, o, tt, c, got;
  bool d;
  if
  :: destroyed -> eres[id] = R_REFUSED
  :: else ->
     revoke(me, got, tt, o, c);
     if
     :: got != 0 -> q = got
     :: else -> reserve_shared(me, q)
     fi;
     HOLD(q, id);
     d = destroyed;                                     /* seq_cst load */
     publish(q, id, d, me)
  fi
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
  :: else ->
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
     atomic { t = otail; P_STALE(bo_full && bo_v != otail) }
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
  (!bo_full);
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
    od
  }
}
