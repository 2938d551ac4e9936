/*
 * arm.pml: the add-first reservation's arming, alone (faa12; ring.c,
 * RESERVING ON A SHARED STREAM: ADD FIRST WHILE ARMED; segment.c, GROWING
 * AHEAD). ring.pml checks the same steps inside the whole ring (segments,
 * slots, releases), which bounds it to two holders; a stale armer beside
 * two landers (what BUG_DISARM_STORE and BUG_DISARM_READ need) is beyond
 * it. Here the ring is four words and a segment end, so three holders and
 * a ticketless enqueuer fit:
 *   tail      (seq_cst fetch_add, seq_cst CAS)       s->tail
 *   tend      (seq_cst raise / acquire or seq_cst load) s->tail_end
 *   gat       (release raise, acq_rel claim / acquire load) s->grow_at
 *   fgen      (seq_cst CAS / seq_cst load)            s->fast_gen
 *   tseg      the newest linked segment's end (tailseg and g->next, whose
 *             own protocol ring.pml and extend_mp.pml check): a link is
 *             one atomic step here.
 * Interleaving semantics: every access above is seq_cst or an acquire
 * load of a word whose writes are seq_cst or release raises, which is
 * what ring.c's argument (the order S) reasons in, as ring.pml does.
 * Geometry (small, with the C's relations): the first segment holds seqs
 * below F = 2 and has no grow point (the C's is smaller than 2 R: its
 * growth is the CAS path's); growth segments hold SZ = 2 R seqs, their
 * grow point is base + (SZ - R) / 2 (ldg__grow_point), the zone is the
 * last R seqs below tail_end.
 * Processes: NH holders (tickets: NH <= R), each OPS reservations, and
 * with TICKETLESS one enqueuer without a ticket (CAS path only, never
 * arms). No out of memory here (reserve_test's edge-enomem).
 * Asserted at every hand-out: the seq is below tail_end (the invariant);
 * an add below the grow_at it read is outside the zone (fact (3)); a
 * CAS-path seq past the first segment is outside the zone (fact (1)).
 * Mutants (each must fail; runs.txt):
 *   BUG_NO_DISARM      a lander in the zone does not disarm
 *   BUG_DISARM_STORE   the lander disarms by a plain store of v + 1
 *   BUG_DISARM_READ    a lander that finds fast_gen even writes nothing
 *   BUG_ARM_NO_CHECK   re-arm after any CAS-path reservation (the first
 *                      segment's too)
 *   BUG_ARM_GEN_LATE   the armer loads fast_gen after its look at tail
 *   BUG_CLAIM_AT_END   the grow claim stores g's end, not g's end - R
 * Probes (reach): PROBE_ARM_ZONE (a lander disarms), PROBE_ARM_REARM (a
 * re-arm after a disarm), PROBE_ARM_FULL (R seqs landed in one zone).
 */

#ifndef R
#define R 3
#endif
#ifndef NH
#define NH 3
#endif
#ifndef OPS
#define OPS 3
#endif
#define F 2
#define SZ (2 * R)
#define GP(end) ((end) - SZ + (SZ - R) / 2)   /* grow point of the segment ending at end */
#ifdef BUG_CLAIM_AT_END
#define CLAIM(end) (end)
#else
#define CLAIM(end) ((end) - R)
#endif

byte tail = 0;
byte tend = F;
byte gat = F;      /* the first segment's: no grow point below its end */
byte fgen = 0;
byte tseg = F;
byte zone_n = 0;   /* ghost: seqs landed in the current zone (PROBE_ARM_FULL) */
byte zone_end = F; /* ghost: the tail_end that zone is below */

#define PROBE(c) if :: (c) -> assert(false) :: else fi

inline raise_tend(x) {
  d_step { if :: tend < x -> tend = x :: else fi }      /* seq_cst CAS up */
}
inline raise_gat(x) {
  d_step { if :: gat < GP(x) -> gat = GP(x) :: else fi } /* release CAS up */
}

/* ldg__ring_extend(s, end): link a segment after the one ending at end,
 * or help one already linked; then raise tail_end, then grow_at. */
inline extend(end) {
  d_step { if :: tseg == end -> tseg = end + SZ :: else fi; te = tseg };
  raise_tend(te);
  raise_gat(te);
  te = 0
}

/* ldg__ring_grow_early(s, seq, g): the first to reach the newest
 * segment's grow point claims it and extends. */
inline grow_early(g) {
  te = tseg;                                      /* acquire load tailseg */
  if
  :: te != F && g == GP(te) ->
     d_step {                                     /* acq_rel CAS grow_at */
       if
       :: gat == g -> gat = CLAIM(te); claimed = 1
       :: else -> claimed = 0
       fi
     };
#ifdef POOL0
     claimed = 0          /* a pool limit of 0: the claim stays, no growth ahead */
#else
     if
     :: claimed -> claimed = 0; extend(te)
     :: else
     fi
#endif
  :: else
  fi;
  te = 0
}

inline handed_out(seq) {
  assert(seq < tend);                             /* the invariant */
  if
  :: seq + R >= tend ->
     if :: zone_end != tend -> zone_end = tend; zone_n = 0 :: else fi;
     zone_n++;
#ifdef PROBE_ARM_FULL
     PROBE(zone_n == R);
#endif
     skip
  :: else
  fi
}

proctype Enqueuer(bit holder; byte ops) {
  byte gen, g, seq, e, t, te, r;
  bit ok, dis, claimed;
  do
  :: ops == 0 -> break
  :: else ->
     ops--;
     gen = fgen;                                  /* seq_cst load fast_gen */
     if
     :: holder && (gen & 1) ->                    /* add first */
        g = gat;                                  /* acquire load grow_at */
        d_step {                                  /* seq_cst fetch_add tail */
          tail++; seq = tail;
          handed_out(seq);
          assert(seq >= g || seq + R < tend)      /* fact (3) */
        };
        if
        :: seq >= g ->                            /* ldg__reserve_past */
           e = tend;                              /* seq_cst load tail_end */
           assert(seq < e);
           if
           :: seq + R >= e ->                     /* in the zone: DISARM */
#ifdef PROBE_ARM_ZONE
              PROBE(true);
#endif
#if defined(BUG_NO_DISARM)
              skip
#elif defined(BUG_DISARM_STORE)
              fgen = gen + 1                      /* mutant: a plain store */
#else
              dis = 1;
              do
              :: dis ->
                 d_step {                         /* seq_cst CAS w -> (w | 1) + 1 */
                   if
                   :: fgen == gen ->
#ifdef BUG_DISARM_READ
                      if :: gen & 1 -> fgen = gen + 1 :: else fi;
#else
                      fgen = (gen | 1) + 1;
#endif
                      dis = 0
                   :: else -> gen = fgen
                   fi
                 }
              :: else -> break
              od
#endif
           :: else
           fi;
           e = 0;
           grow_early(g)
        :: else
        fi
     :: else ->                                   /* ldg__ring_reserve_cas */
        ok = 0;
        do
        :: ok -> break
        :: else ->
           t = tail;                              /* relaxed load tail */
           e = tend;                              /* acquire load tail_end */
           if :: t + 1 < F -> r = 0 :: else -> r = R fi;
           if
           :: t + 1 + r < e ->
              d_step {                            /* seq_cst CAS tail t -> t + 1 */
                if
                :: tail == t ->
                   tail = t + 1; seq = t + 1; ok = 1;
                   handed_out(seq);
                   assert(seq < F || seq + R < tend)   /* fact (1) */
                :: else
                fi
              };
              if                                  /* ARM */
#ifdef BUG_ARM_NO_CHECK
              :: ok && holder && !(gen & 1) ->
#else
              :: ok && holder && r != 0 && !(gen & 1) ->
#endif
#ifdef BUG_ARM_GEN_LATE
                 gen = fgen;                      /* mutant: loaded after the look */
#endif
                 d_step {                         /* seq_cst CAS fast_gen v -> v + 1 */
                   if
                   :: fgen == gen && !(gen & 1) ->
#ifdef PROBE_ARM_REARM
                      PROBE(gen > 0);
#endif
                      fgen = gen + 1
                   :: else
                   fi
                 }
              :: else
              fi;
              if
              :: ok ->
                 g = gat;                         /* acquire load grow_at */
                 if :: seq >= g -> grow_early(g) :: else fi
              :: else
              fi
           :: else -> extend(e)                   /* no headroom: grow at the end */
           fi;
           t = 0; e = 0; r = 0
        od
     fi;
     gen = 0; g = 0; seq = 0; ok = 0
  od
}

init {
  atomic {
#ifdef WARM
    /* A reachable start past the first segment: seq 1 (the first
     * segment's, CAS path), the extension to 8, seq 2 by the CAS path with
     * the reserve (armed: fast_gen 1), seqs 3 and 4 added, 3 the grow point
     * whose claim (POOL0: no growth ahead) left grow_at at 8 - R. */
    tail = 4; tend = F + SZ; tseg = F + SZ; gat = F + SZ - R; fgen = 1;
#endif
#ifdef OPS_EACH
    run Enqueuer(1, OPS_A); run Enqueuer(1, OPS_B); run Enqueuer(1, OPS_C);
#else
    byte i = 0;
    do
    :: i < NH -> run Enqueuer(1, OPS); i++
    :: else -> break
    od;
#endif
#ifdef TICKETLESS
    run Enqueuer(0, TICKETLESS)
#endif
  }
}
