/*
 * extend_mp.pml: growing a ring publishes the new segment through tail_end
 * (ledger/segment.c, ldg__ring_extend and ldg__raise_tail_end; reserve.h,
 * ldg__ring_reserve; ring.c, ldg__seg_of_reserved), under a weak memory model
 * with explicit store buffers (the rules of destroy_sb.pml).
 *
 * A message-passing pattern:
 *
 *   extender  CAS tailseg old -> new (seq_cst);  CAS tail_end -> new's end
 *             (release)
 *   reserver  load tail_end (acquire); CAS tail t -> t + 1 where t + 1 <
 *             tail_end;  load tailseg (acquire): seq's segment or a later
 *             one, read without RCU
 *
 * The release on tail_end is what makes a reserver that saw the new end see
 * the new tailseg too. ring_common.pml runs under sequential consistency
 * and cannot tell; x86 keeps stores in order, and TSan does not simulate
 * stale loads. Here a store that is not a release may reach memory before
 * the thread's earlier buffered stores (one buffer per location, flushed in
 * any order), so with tail_end relaxed the reserver can see the new end
 * with the old tailseg: its seq lies past that segment's slots (a write out
 * of bounds in C).
 *
 * Memory: writes to tailseg and tail_end go to the writer's buffer (one
 * entry per location) and reach memory at any later step, in any order;
 * a release write first waits until the thread's buffer is empty; loads read
 * the own buffer first, and are not reordered with each other (so this does
 * not model a weakened acquire on the reader's side).
 *
 * Segments: 0 = [1, 2], 1 = [3, 4] (SZ = 2). The stream starts with
 * tailseg = 0, tail_end = 3, tail = 2 (segment 0 full); the extender links
 * segment 1; the reserver reserves seq 3 once tail_end allows it.
 * Checked: the segment the reserver finds holds its seq.
 * Mutant: BUG_MP_TAIL_END (the CAS on tail_end relaxed) must fail.
 * Probe: PROBE_MP_STALE (the reserver reads the old tail_end while the
 * extender's new one sits in its buffer: the buffers are exercised).
 */

#define SZ 2
#define NT 2   /* thread 0: extender, 1: reserver */

#ifdef BUG_MP_TAIL_END
#define REL_TAIL_END 0
#else
#define REL_TAIL_END 1
#endif

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_MP_STALE
#define P_STALE(c) PROBE_AT(c)
#else
#define P_STALE(c) skip
#endif

byte sbase[2];       /* g->base (immutable once published) */
byte tailseg;        /* s->tailseg */
byte tail_end;       /* s->tail_end */
byte tail;           /* s->tail (the reserver's own RMW: straight to memory) */

bit bs_full[NT]; byte bs_v[NT];   /* buffered write to tailseg */
bit be_full[NT]; byte be_v[NT];   /* buffered write to tail_end */

#define T (_pid - 2)   /* init runs the flusher (_pid 1) first */
#define LOAD_S(t) (bs_full[t] -> bs_v[t] : tailseg)
#define LOAD_E(t) (be_full[t] -> be_v[t] : tail_end)
#define BUFFER_EMPTY(t) (!bs_full[t] && !be_full[t])

proctype Flusher() {
end:
  do
  :: atomic { bs_full[0] -> tailseg = bs_v[0]; bs_full[0] = 0 }
  :: atomic { be_full[0] -> tail_end = be_v[0]; be_full[0] = 0 }
  od
}

/* ldg__ring_extend (segment 1 linked on segment 0's next, not modelled:
 * its seq_cst CAS is before the tailseg CAS in the same thread and the
 * reserver does not walk) then ldg__raise_tail_end. */
proctype Extender() {
  atomic { bs_full[T] = 1; bs_v[T] = 1 }           /* seq_cst CAS tailseg 0 -> 1 */
  atomic {                                         /* CAS tail_end 3 -> 5 */
    (!REL_TAIL_END || BUFFER_EMPTY(T)) ->
    be_full[T] = 1; be_v[T] = sbase[1] + SZ
  }
}

/* ldg__ring_reserve, then ldg__seg_of_reserved's fast path. */
proctype Reserver() {
  byte end, seq, g;
  do
  :: atomic {                                           /* acquire load tail_end */
       end = LOAD_E(T);
       P_STALE(be_full[0] && end == 3)
     }
     if
     :: tail + 1 < end -> break
     :: else                                            /* (would extend itself) */
     fi
  od;
  atomic { seq = tail + 1; tail = seq }                 /* CAS tail */
  g = LOAD_S(T);                                        /* acquire load tailseg */
  if
  :: sbase[g] <= seq ->                            /* "return g" */
     assert(seq < sbase[g] + SZ)                   /* seq's slot is in g */
  :: else                                          /* walks from head (not modelled) */
  fi
}

init {
  d_step {
    sbase[0] = 1; sbase[1] = 3;
    tailseg = 0; tail_end = 3; tail = 2
  }
  atomic {
    run Flusher();
    run Extender();
    run Reserver()
  }
}
