/*
 * ring_common.pml: the per-stream ring of ledger/ring.c, in Promela.
 * Included by ring.pml (one stream) and wait.pml (two streams, a wait).
 *
 * Keep in step with ring.c. Each inline below is one C function and each
 * statement that touches shared state is one C atomic access (or one plain
 * access to immutable or owned data, merged with nothing it does not follow):
 *
 *   inline seg_alloc        ldg__seg_alloc (private until linked)
 *   inline call_rcu         ldg__call_rcu(&h->rcu, ldg__seg_free_cb) + the
 *                           grace period of liburcu (see RCU below)
 *   inline advance_head     ldg__ring_advance_head
 *   inline seg_resolve      ldg__seg_resolve
 *   inline ring_extend      ldg__ring_extend
 *   inline ring_reserve     ldg__ring_reserve
 *   inline enqueue          ldg__ring_enqueue (ldg_enqueue, ldg_add_wait)
 *   inline claim            ldg__claim
 *   inline take_chunk       ldg__take_chunk
 *   inline engine           ldg__engine, modes BORROWED (ldg_release,
 *                           ldg__destroy) and OWNED (a wait fired by its
 *                           enqueuer); frames of waits when WAITS is defined
 *   inline destroy          ldg__destroy + ldg__mark_destroyed
 *   inline ring_any         ldg__ring_any (a lock-free query, reader only)
 *
 * MEMORY MODEL. Spin explores interleavings of atomic steps, that is,
 * sequential consistency. Every shared access of ring.c is one step here, so
 * the model checks the protocol as if every atomic in ring.c were seq_cst.
 * That abstracts away the weaker orderings the C code uses where the argument
 * needs no store->load ordering (atomics.h names each one):
 *   acquire:  loads of tailseg, g->next, head (take_chunk, ring_any),
 *             released (claim), destroyed (early checks), slot->state;
 *   relaxed:  the load of tail in ldg__ring_reserve, and the load of released
 *             in ldg__next_seg_size (segment size only: not modelled);
 *   acq_rel:  CAS tailseg, CAS slot->state (EMPTY->FULL, EMPTY->ABANDONED),
 *             exchange slot->state (RETRACTED), weak CAS released;
 *   plain:    segment headers (base, size), slot payloads (entry, kind, wait
 *             target/upto, frame fields): immutable after publication or
 *             owned by one thread.
 * and it relies on seq_cst exactly where ring.c uses it for a store->load
 * (Dekker) handshake: g->resolved add / head / h->resolved / h->next / CAS
 * g->next (WHO MAY RECLAIM A SLOT), and CAS destroyed / load tail against
 * CAS tail / load destroyed (DESTROY). The BUG_* mutants below model what
 * losing such an ordering does (a load satisfied before the store).
 * A weak CAS may fail spuriously; that only repeats a loop iteration with the
 * same values and is not modelled. Allocation never fails here (LDG_ENOMEM is
 * returned before anything is reserved and leaves no trace).
 *
 * RCU. inrcu has one bit per process inside a read-side section
 * (ldg__rcu_read_lock / unlock; never nested in ring.c). call_rcu(g) marks g
 * RETIRED and records the readers inside a section at that moment; g becomes
 * FREED as soon as each of them has left its section: exactly the guarantee
 * of a grace period, with the free as early as liburcu may do it (the worst
 * case). A reader that enters after call_rcu is not waited for. Every access
 * to a segment asserts that it is not FREED (TOUCH).
 *
 * ABSTRACTIONS. Every segment has SZ slots (ring.c: 8, then 64..1024); the
 * chunk bound LDG__BATCH is never reached; keeps are counted when taken
 * (ring.c copies them and runs them after leaving the read-side section);
 * stream references, FINALIZE frames, waits_pending and byte accounting are
 * not modelled; segment ids come from a pool (nalloc) and are never reused.
 */

#define NIL 255

/* slot->state (internal.h) */
#define ST_EMPTY     0
#define ST_FULL      1
#define ST_ABANDONED 2
#define ST_RETRACTED 3

/* segment lifetime (ghost) */
#define SEG_UNUSED  0   /* not yet allocated from the pool */
#define SEG_LIVE    1   /* allocated (maybe not yet linked) */
#define SEG_RETIRED 2   /* passed to call_rcu, grace period running */
#define SEG_FREED   3   /* freed (or an unpublished loser copy destroyed) */

/* slot->kind */
#define K_OP   0
#define K_WAIT 1

/* outcome of an enqueue (ghost) */
#define R_NONE    0
#define R_OK      1
#define R_REFUSED 2   /* LDG_EDESTROYED: the caller keeps its keep */

/* ---- Segments (struct ldg__seg) and slots (struct ldg__slot) ---- */
byte sbase[NSEG];      /* g->base */
byte snext[NSEG];      /* g->next, NIL = NULL */
byte sres[NSEG];       /* g->resolved */
byte sstate[NSEG];     /* ghost: SEG_* */
byte sgp[NSEG];        /* ghost: readers the grace period still waits for */
byte sstream[NSEG];    /* ghost: owning stream */
byte slot[NSEG * SZ];  /* slot->state */
byte sent[NSEG * SZ];  /* payload: the entry (keep, or wait target/upto) */
bit  sfin[NSEG * SZ];  /* ghost: the slot's owner has finished with it */
#ifdef WAITS
/* a wait's slot used as a frame (slot->u.wait.parent*, seg) */
byte fr_ps[NSEG * SZ];
byte fr_pn[NSEG * SZ];
byte fr_pe[NSEG * SZ];
byte fr_pf[NSEG * SZ];
byte fr_seg[NSEG * SZ];
#endif
byte nalloc;           /* next unused segment id of the pool */

/* ---- Streams (struct ldg_stream) ---- */
byte tail[NS];         /* s->tail */
byte released[NS];     /* s->released */
byte head[NS];         /* s->head */
byte tailseg[NS];      /* s->tailseg */
bool destroyed[NS];    /* s->destroyed */

/* ---- Entries (the callers' ldg__entry; ghost bookkeeping) ---- */
byte ekind[NENT + 1];  /* K_OP or K_WAIT; entry ids start at 1 */
byte etarget[NENT + 1];
byte eupto[NENT + 1];
byte rel[NENT + 1];    /* times released (keep run, or wait fired) */
byte eres[NENT + 1];   /* R_* */
byte eseq[NENT + 1];   /* seq it got (0 = none) */
byte estream[NENT + 1];/* stream it is enqueued on */

byte inrcu;            /* processes inside an RCU read-side section */

#define PBIT (1 << _pid)
#define TOUCH(g) assert(g < NSEG && (sstate[g] == SEG_LIVE || sstate[g] == SEG_RETIRED))

/* Locals every process that runs the ring code declares. */
#define RING_LOCALS \
  byte rc_i; \
  byte ah_h, ah_v, ah_n; bit ah_ok; \
  byte sr_before; \
  byte ex_next, ex_fresh; \
  byte rs_g, rs_t, rs_end, rs_seq; bit rs_ok; \
  byte en_idx; bit en_ok; \
  byte cl_r, cl_from; bit cl_ok; \
  byte c_s, c_next, c_end, c_frame, c_upto; \
  byte tc_g, tc_base, tc_taken, tc_st, tc_idx, tc_w, tc_wg, tc_act; \
  byte w_e, f_g; \
  byte q_r, q_t, q_g, q_lo, q_hi, q_q, q_b

inline stream_init(s, g) {   /* ldg__ring_init */
  sbase[g] = 1; snext[g] = NIL; sres[g] = 0; sstate[g] = SEG_LIVE; sstream[g] = s;
  head[s] = g; tailseg[s] = g; tail[s] = 0; released[s] = 0; destroyed[s] = 0
}

/* ---- RCU ---- */
inline rcu_lock() {
  d_step { assert((inrcu & PBIT) == 0); inrcu = inrcu | PBIT }
}

inline rcu_unlock() {
  d_step {
    assert((inrcu & PBIT) != 0);
    inrcu = inrcu & ~PBIT;
    rc_i = 0;
    do
    :: rc_i < NSEG ->
       if
       :: sstate[rc_i] == SEG_RETIRED ->
          sgp[rc_i] = sgp[rc_i] & ~PBIT;
          if
          :: sgp[rc_i] == 0 -> sstate[rc_i] = SEG_FREED
          :: else
          fi
       :: else
       fi;
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* h was unlinked by the winner of the head CAS. Checks the reclaim rule: no
 * slot reclaimed before its entry was released (or handed back) and its
 * resolution counted, and h unreachable from the stream's shared pointers
 * (what call_rcu requires). */
inline call_rcu(h) {
  d_step {
    assert(sstate[h] == SEG_LIVE);
    assert(sres[h] == SZ);
    rc_i = 0;
    do
    :: rc_i < SZ ->
       assert(sfin[h * SZ + rc_i] && slot[h * SZ + rc_i] != ST_EMPTY);
       rc_i++
    :: else -> break
    od;
    rc_i = 0;
#ifndef NO_REACH_CHECK
    assert(head[sstream[h]] != h);
    assert(tailseg[sstream[h]] != h);   /* RCU: unlinked before call_rcu */
#endif
    sstate[h] = SEG_RETIRED;
    sgp[h] = inrcu;
    if
    :: sgp[h] == 0 -> sstate[h] = SEG_FREED
    :: else
    fi
  }
}

inline seg_alloc(s, base, out) {   /* ldg__seg_alloc: memset, base, size */
  d_step {
    assert(nalloc < NSEG);
    out = nalloc;
    nalloc++;
    sbase[out] = base; snext[out] = NIL; sres[out] = 0;
    sstate[out] = SEG_LIVE; sstream[out] = s
  }
}

/* ---- ldg__ring_advance_head ---- */
inline advance_head(s) {
  do
  :: ah_h = head[s];                               /* seq_cst load head */
#ifndef BUG_HEAD_NO_RECHECK
     d_step { TOUCH(ah_h); ah_v = sres[ah_h] }      /* seq_cst load h->resolved */
     if
     :: ah_v != SZ -> break
     :: else
     fi;
#endif
     d_step { TOUCH(ah_h); ah_n = snext[ah_h] }     /* seq_cst load h->next */
     if
     :: ah_n == NIL -> break
     :: else
     fi;
#ifdef FIX_TAILSEG_HELP
     /* Proposed fix (a): swing tailseg past h (acq_rel CAS tailseg h -> next)
      * before h can be retired. */
     d_step { if :: tailseg[s] == ah_h -> tailseg[s] = ah_n :: else fi }
#endif
#ifdef FIX_TAILSEG_CHECK
     /* Proposed fix (b): leave h while tailseg still points at it (seq_cst
      * load; the CAS tailseg in ring_extend made seq_cst): the thread that
      * swings tailseg advances head afterwards. */
     if
     :: tailseg[s] == ah_h -> break
     :: else
     fi;
#endif
     d_step {                                       /* seq_cst CAS head h -> next */
       if
       :: head[s] == ah_h -> head[s] = ah_n; ah_ok = 1
       :: else -> ah_ok = 0
       fi
     }
     if
     :: ah_ok -> call_rcu(ah_h)
     :: else
     fi
  od
}

/* ---- ldg__seg_resolve: k more slots of g resolved ---- */
inline seg_resolve(s, g, k) {
  d_step {                                         /* seq_cst fetch_add */
    TOUCH(g);
    sr_before = sres[g];
    sres[g] = sres[g] + k;
    assert(sres[g] <= SZ)
  }
  if
  :: sr_before + k == SZ -> advance_head(s)
  :: else
  fi
}

/* ---- ldg__ring_extend: g is the tail segment seen, and it is full ---- */
inline ring_extend(s, g) {
  d_step { TOUCH(g); ex_next = snext[g] }          /* acquire load g->next */
  if
  :: ex_next == NIL ->
     d_step { TOUCH(g); rc_i = sbase[g] + SZ }     /* g->base + g->size */
     seg_alloc(s, rc_i, ex_fresh);
     d_step {                                      /* seq_cst CAS g->next */
       TOUCH(g);
       rc_i = 0;
       if
       :: snext[g] == NIL -> snext[g] = ex_fresh; ex_next = ex_fresh
       :: else ->
          ex_next = snext[g];
          sstate[ex_fresh] = SEG_FREED             /* ldg__seg_destroy(fresh) */
       fi
     }
  :: else
  fi;
  d_step {                                         /* acq_rel CAS tailseg g -> next */
    if
    :: tailseg[s] == g -> tailseg[s] = ex_next
    :: else
    fi;
    ex_next = 0; ex_fresh = 0
  }
#ifndef BUG_EXTEND_NO_ADVANCE
  advance_head(s)
#endif
}

/* ---- ldg__ring_reserve (+ the slot lookup of ldg__ring_enqueue) for entry e:
 * out rs_seq, rs_g, en_idx ---- */
inline ring_reserve(s, e) {
  do
  :: rs_g = tailseg[s];                            /* acquire load tailseg */
     d_step {
       rs_t = tail[s];                             /* relaxed load tail */
       TOUCH(rs_g);                                /* g->base + g->size */
       rs_end = sbase[rs_g] + SZ;
       assert(rs_t + 1 >= sbase[rs_g])             /* "tail >= g->base - 1" */
     }
     if
     :: rs_t + 1 < rs_end ->
        d_step {                                   /* seq_cst CAS tail t -> t+1 */
          if
          :: tail[s] == rs_t ->
             assert(rs_t + 1 > tail[s]);           /* tail only grows */
             tail[s] = rs_t + 1; rs_ok = 1; rs_seq = rs_t + 1;
             /* ldg__ring_enqueue: slot = &g->slots[seq - g->base] */
             TOUCH(rs_g);
             en_idx = rs_g * SZ + rs_seq - sbase[rs_g];
             eseq[e] = rs_seq
          :: else -> rs_ok = 0
          fi;
          rs_t = 0; rs_end = 0
        }
        if
        :: rs_ok -> break
        :: else
        fi
     :: else -> rs_t = 0; rs_end = 0; ring_extend(s, rs_g)
     fi
  od
}

/* ---- ldg__claim: out cl_ok, cl_from; the caller owns (cl_from - 1, upto] ---- */
inline claim(s, upto) {
  cl_ok = 0;
  cl_r = released[s];                              /* acquire load released */
  do
  :: cl_r < upto ->
     d_step {                                      /* weak acq_rel CAS released */
       if
       :: released[s] == cl_r ->
          assert(upto > released[s]);              /* released only grows */
          assert(upto <= tail[s]);                 /* never past the mark */
          released[s] = upto; cl_ok = 1
       :: else -> cl_r = released[s]
       fi
     }
     if
     :: cl_ok -> cl_from = cl_r + 1; break
     :: else
     fi
  :: else -> break
  od
}

/* ---- ldg__take_chunk on the cursor c_*; out tc_w (wait slot or NIL), tc_wg ----
 * One step reads the segment header (plain), the slot's state (acquire) and,
 * if FULL, its payload (plain, immutable once FULL) and takes an operation's
 * keep (rel: ghost). */
#define A_DONE    0   /* slot dealt with, or seq skipped */
#define A_NEXTSEG 1   /* seq is past g: go to g->next */
#define A_EMPTY   2   /* reserved, not published: try to abandon it */
#define A_WAIT    3   /* a published wait: stop, it becomes a frame */

#define TAKE_IF_FULL \
  if \
  :: tc_st == ST_FULL && ekind[sent[tc_idx]] == K_WAIT -> tc_act = A_WAIT \
  :: tc_st == ST_FULL && ekind[sent[tc_idx]] != K_WAIT -> \
     assert(rel[sent[tc_idx]] == 0); rel[sent[tc_idx]] = 1; \
     sfin[tc_idx] = 1; tc_taken++; tc_act = A_DONE \
  :: tc_st != ST_FULL -> tc_act = A_DONE   /* retracted: its enqueuer resolved it */ \
  fi

inline take_chunk() {
  tc_taken = 0;
  tc_w = NIL;
  tc_g = head[c_s];                                /* acquire load head */
  do
  :: c_next > c_end -> break
  :: else ->
     d_step {
       TOUCH(tc_g);
       tc_base = sbase[tc_g];
       if
       :: c_next >= tc_base + SZ -> tc_act = A_NEXTSEG
       :: c_next < tc_base ->
          /* retired before head: only retracted slots, resolved by their enqueuers */
          c_next = tc_base; tc_act = A_DONE
       :: else ->
          tc_idx = tc_g * SZ + c_next - tc_base;
          tc_st = slot[tc_idx];                    /* acquire load state */
          if
          :: tc_st == ST_EMPTY -> tc_act = A_EMPTY
          :: else -> c_next++; TAKE_IF_FULL
          fi
       fi;
       tc_base = 0
     }
     if
     :: tc_act == A_NEXTSEG ->
        if
        :: tc_taken != 0 -> seg_resolve(c_s, tc_g, tc_taken)
        :: else
        fi;
        tc_taken = 0;
        d_step {                                   /* acquire load g->next */
          TOUCH(tc_g); tc_g = snext[tc_g];
          assert(tc_g != NIL)                      /* "every seq <= tail has a segment" */
        }
     :: tc_act == A_EMPTY ->
#ifndef BUG_ABANDON_STORE
        d_step {                                   /* acq_rel CAS EMPTY -> ABANDONED */
          TOUCH(tc_g);
          c_next++;
          if
          :: slot[tc_idx] == ST_EMPTY -> slot[tc_idx] = ST_ABANDONED; tc_act = A_DONE
          :: else -> tc_st = slot[tc_idx]; TAKE_IF_FULL   /* published meanwhile */
          fi;
          tc_st = 0
        }
#else
        /* mutant: the EMPTY seen is overwritten with a plain store */
        d_step { TOUCH(tc_g); c_next++; slot[tc_idx] = ST_ABANDONED; tc_act = A_DONE; tc_st = 0 }
#endif
        if
        :: tc_act == A_WAIT -> tc_w = tc_idx; tc_wg = tc_g; break
        :: else
        fi
     :: tc_act == A_WAIT -> tc_w = tc_idx; tc_wg = tc_g; break
     :: tc_act == A_DONE
     fi;
     tc_st = 0; tc_act = 0
  od;
  tc_st = 0; tc_act = 0; tc_idx = 0;
  if
  :: tc_taken != 0 -> seg_resolve(c_s, tc_g, tc_taken)
  :: else
  fi;
  tc_taken = 0; tc_g = 0
}

/* ---- ldg__engine(s, upto, BORROWED or OWNED) ---- */
inline engine(s, upto) {
  c_s = s; c_next = 1; c_end = 0; c_frame = NIL; c_upto = upto;
  claim(c_s, c_upto);
  if
  :: cl_ok -> c_next = cl_from; c_end = c_upto
  :: else
  fi;
  cl_ok = 0; cl_from = 0; cl_r = 0;
  do
  :: c_next <= c_end ->
     rcu_lock();
     take_chunk();
     rcu_unlock();
#ifdef WAITS
     if
     :: tc_w != NIL ->
        /* The wait's slot (taken, unresolved: pinned) becomes the frame.
         * Outside the read-side section. */
        d_step {
          TOUCH(tc_wg);
          assert(tc_wg == tc_w / SZ);
          w_e = sent[tc_w];
          fr_ps[tc_w] = c_s; fr_pn[tc_w] = c_next; fr_pe[tc_w] = c_end;
          fr_pf[tc_w] = c_frame; fr_seg[tc_w] = tc_wg;
          assert(rel[w_e] == 0); rel[w_e] = 1      /* the wait fires */
        }
        c_s = etarget[w_e]; c_upto = eupto[w_e]; c_next = 1; c_end = 0;
        c_frame = tc_w; tc_w = NIL; tc_wg = 0; w_e = 0;
        if
        :: !destroyed[c_s] ->                      /* acquire load a->destroyed */
           claim(c_s, c_upto);
           if
           :: cl_ok -> c_next = cl_from; c_end = c_upto
           :: else
           fi;
           cl_ok = 0; cl_from = 0; cl_r = 0
        :: else
        fi
     :: else
     fi
#endif
  :: else ->
     if
     :: c_frame == NIL -> break
     :: else ->
#ifdef WAITS
        /* Pop: resume the stream holding the wait, then resolve the wait. */
        d_step {
          TOUCH(c_frame / SZ);
          f_g = fr_seg[c_frame];
          sfin[c_frame] = 1;
          rc_i = c_frame;
          c_s = fr_ps[rc_i]; c_next = fr_pn[rc_i]; c_end = fr_pe[rc_i];
          c_frame = fr_pf[rc_i];
          rc_i = 0
        }
        rcu_lock();
        seg_resolve(c_s, f_g, 1);
        rcu_unlock();
        f_g = 0
#else
        assert(false)
#endif
     fi
  od;
  c_s = 0; c_next = 0; c_end = 0; c_frame = 0; c_upto = 0
}

/* ---- ldg__ring_enqueue(s, e): ldg_enqueue (K_OP) or ldg_add_wait (K_WAIT) ---- */
inline enqueue(s, e) {
  if
  :: atomic { destroyed[s] -> eres[e] = R_REFUSED }   /* acquire load: refused early */
  :: else ->
     rcu_lock();
     ring_reserve(s, e);
     if
     :: destroyed[s] ->                            /* seq_cst load destroyed */
        d_step {                                   /* acq_rel exchange RETRACTED */
          TOUCH(rs_g); slot[en_idx] = ST_RETRACTED; sfin[en_idx] = 1;
          eres[e] = R_REFUSED; en_idx = 0
        }
        seg_resolve(s, rs_g, 1);
        rcu_unlock()
     :: else ->
        d_step {
          TOUCH(rs_g);
          sent[en_idx] = e;                        /* ldg__fill_slot (plain writes) */
          eres[e] = R_OK;
          if                                       /* acq_rel CAS EMPTY -> FULL */
          :: slot[en_idx] == ST_EMPTY -> slot[en_idx] = ST_FULL; en_ok = 1
          :: else ->
             /* A release covering seq passed: the entry is ours to release. */
             assert(slot[en_idx] == ST_ABANDONED); en_ok = 0;
             sfin[en_idx] = 1;
             assert(rel[e] == 0); rel[e] = 1       /* run the keep, or fire (below) */
          fi;
          en_idx = 0
        }
        if
        :: en_ok -> rcu_unlock()
        :: else ->
           seg_resolve(s, rs_g, 1);
           rcu_unlock();
#ifdef WAITS
           if
           :: ekind[e] == K_WAIT ->
              if
              :: destroyed[etarget[e]] -> engine(etarget[e], 0)
              :: else -> engine(etarget[e], eupto[e])
              fi
           :: else
           fi;
#endif
           skip
        fi
     fi
  fi;
  rs_g = 0; rs_seq = 0; rs_ok = 0; en_ok = 0
}

/* ---- ldg__destroy ---- */
inline destroy(s) {
#ifndef BUG_DESTROY_ORDER
  d_step {                                         /* seq_cst CAS destroyed */
    if
    :: !destroyed[s] -> destroyed[s] = 1; rs_ok = 1
    :: else -> rs_ok = 0
    fi
  }
  if
  :: rs_ok -> rs_t = tail[s]; engine(s, rs_t)      /* seq_cst load tail */
  :: else
  fi;
#else
  /* mutant: tail read before the flag is set (no store->load order) */
  rs_t = tail[s];
  d_step {
    if
    :: !destroyed[s] -> destroyed[s] = 1; rs_ok = 1
    :: else -> rs_ok = 0
    fi
  }
  if
  :: rs_ok -> engine(s, rs_t)
  :: else
  fi;
#endif
  rs_ok = 0; rs_t = 0
}

/* ---- ldg_release(s, ldg_mark(s)) ---- */
inline release_to_mark(s) {
  rs_t = tail[s];                                  /* ldg_mark: acquire load tail */
  if
  :: destroyed[s] -> skip                          /* LDG_EDESTROYED */
  :: else -> engine(s, rs_t)
  fi;
  rs_t = 0
}

/* ---- ldg__ring_any: a lock-free reader (ldg_holds_*), under RCU ---- */
inline ring_any(s) {
  rcu_lock();
  q_r = released[s];                               /* acquire */
  q_t = tail[s];                                   /* acquire */
  q_g = head[s];                                   /* acquire */
  do
  :: q_g == NIL -> break
  :: else ->
     d_step { TOUCH(q_g); q_b = sbase[q_g] }
     if
     :: q_b > q_t -> break
     :: else
     fi;
     q_lo = (q_b > q_r + 1 -> q_b : q_r + 1);
     q_hi = (q_b + SZ - 1 < q_t -> q_b + SZ - 1 : q_t);
     q_q = q_lo;
     do
     :: q_q <= q_hi ->
        d_step { TOUCH(q_g); rc_i = slot[q_g * SZ + q_q - q_b] }   /* acquire state */
        if
        :: rc_i == ST_FULL -> d_step { TOUCH(q_g); rc_i = sent[q_g * SZ + q_q - q_b]; rc_i = 0 }
        :: else -> rc_i = 0
        fi;
        q_q++
     :: else -> break
     od;
     q_q = 0;
     d_step { TOUCH(q_g); q_g = snext[q_g] }        /* acquire load g->next */
  od;
  rcu_unlock();
  q_r = 0; q_t = 0; q_g = 0; q_lo = 0; q_hi = 0; q_q = 0; q_b = 0
}

/* ---- Quiescent checks, run by init once every worker has finished ---- */

/* No segment leaked or left unfreed, none retired early: the stream holds
 * exactly its head segment (== tailseg), with every handed-out seq resolved. */
inline check_ring(s) {
  d_step {
    assert(inrcu == 0);
    assert(head[s] == tailseg[s]);
    assert(snext[head[s]] == NIL);
    assert(sstate[head[s]] == SEG_LIVE);
    assert(sres[head[s]] == tail[s] + 1 - sbase[head[s]]);
    assert(released[s] <= tail[s]);
    rc_i = 0;
    do
    :: rc_i < nalloc ->
       assert(sstream[rc_i] != s || rc_i == head[s] || sstate[rc_i] == SEG_FREED);
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* No done segment left behind ("WHO MAY RECLAIM A SLOT"): at a quiescent
 * moment the head segment is not both fully resolved and followed. */
inline check_head(s) {
  d_step { assert(sres[head[s]] != SZ || snext[head[s]] == NIL) }
}

/* Every entry the ledger accepted (R_OK) with seq <= released was released
 * exactly once; every refused one never, and no entry is unresolved. */
inline check_entries() {
  d_step {
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       assert(eres[rc_i] != R_NONE);
       assert(eres[rc_i] != R_REFUSED || rel[rc_i] == 0);
       assert(eres[rc_i] != R_OK || eseq[rc_i] > released[estream[rc_i]] || rel[rc_i] == 1);
       assert(eres[rc_i] != R_OK || eseq[rc_i] <= released[estream[rc_i]] || rel[rc_i] == 0);
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}

/* After a final release of every stream: every accepted entry was released
 * exactly once. */
inline check_all_released() {
  d_step {
    rc_i = 1;
    do
    :: rc_i <= NENT ->
       assert(eres[rc_i] != R_OK || (rel[rc_i] == 1 && eseq[rc_i] <= released[estream[rc_i]]));
       rc_i++
    :: else -> break
    od;
    rc_i = 0
  }
}
