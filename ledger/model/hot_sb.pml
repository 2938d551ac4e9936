/*
 * hot_sb.pml: hot reuse on owned streams (ledger/segment.c, HOT REUSE ON
 * OWNED STREAMS) under a store-buffer memory model: the owner that unlinks
 * segment g from head and reuses it at once, a visitor (another thread's
 * read-side section: a release's chunk, a query) and, with HOT_REVOKER, a
 * revoker that takes the stream away and reads the ring without counting
 * itself.
 *
 *   owner    (ldg__ring_advance_head, ldg__seg_keep_hot): CAS head g -> n
 *            (seq_cst); v = load visitors (seq_cst); o = load owner
 *            (seq_cst); v == 0 and o == its token: g is reused at once,
 *            its slot written with the new life's contents (NEW).
 *   visitor  (ldg__visit_begin, then a walk from head): o = load owner;
 *            unless SHARED, visitors += 1 (seq_cst RMW); h = load head
 *            (seq_cst); h == g: read g's slot, which must still hold this
 *            life's contents (OLD); visitors -= 1 (release RMW).
 *   revoker  (HOT_REVOKER; owned.c, ldg__own_slow): CAS owner token ->
 *            PENDING (seq_cst); membarrier; h = load head; h == g: read
 *            g's slot (OLD asserted); store owner = SHARED (release). The
 *            visitor then may read SHARED and skip its count.
 *
 * Memory: each thread's plain stores go through its own FIFO store buffer
 * (x86-TSO: a store may pass a later load of another address, the
 * reordering C11 allows a non-seq_cst store before a load and the one the
 * handshake must survive) and reach memory at any later step (Flusher). A
 * load reads the thread's own newest buffered value of that address
 * first. A seq_cst RMW (CAS, fetch_add) is locked: it drains the thread's
 * buffer first and writes memory at once. membarrier: every buffer drains,
 * in one step. A seq_cst load after a seq_cst RMW reads memory (the buffer
 * is empty).
 *
 * Checked: the visitor and the revoker never read the reused contents of
 * g (asserted at their read); every process ends.
 *
 * Mutants (each must fail):
 *   BUG_HOT_NO_CHECK        the owner reuses without loading visitors.
 *   BUG_HOT_LATE_COUNT      the visitor loads head before it counts itself.
 *   BUG_HOT_RELAXED_OWNER   the owner's unlink of head is a plain store
 *                           (relaxed/release, not an RMW): buffered past
 *                           its load of visitors.
 *   BUG_HOT_RELAXED_VISITOR the visitor's count is a plain store: buffered
 *                           past its load of head.
 *   BUG_HOT_NO_OWNER_CHECK  (HOT_REVOKER) the owner skips its second load
 *                           of owner: a revoker, which counts nothing, read
 *                           g before the unlink.
 * Probes (each must be reached): PROBE_HOT_REUSED (the owner reuses g),
 * PROBE_HOT_SEEN (a visitor's count stops a reuse), PROBE_HOT_SKIP (with
 * HOT_REVOKER: the visitor reads SHARED and does not count itself).
 */

#define G 1     /* the segment unlinked */
#define N 2     /* its successor */
#define OLD 1   /* g's slot in this life */
#define NEW 2   /* g's slot once reused */

#define TOK 16
#define PENDING 1
#define SHARED 2

#define A_HEAD 0
#define A_VIS 1
#define A_SLOT 2
#define A_OWNER 3

byte head = G;
byte visitors;
byte slot = OLD;
byte owner = TOK;
byte done;

/* One store buffer per thread: 0 owner, 1 visitor, 2 revoker. */
chan sb0 = [2] of { byte, byte };
chan sb1 = [2] of { byte, byte };
chan sb2 = [2] of { byte, byte };

#ifdef HOT_REVOKER
#define NPROC 3
#else
#define NPROC 2
#endif

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_HOT_REUSED
#define P_REUSED PROBE_AT(true)
#else
#define P_REUSED skip
#endif
#ifdef PROBE_HOT_SEEN
#define P_SEEN(c) PROBE_AT(c)
#else
#define P_SEEN(c) skip
#endif
#ifdef PROBE_HOT_SKIP
#define P_SKIP PROBE_AT(true)
#else
#define P_SKIP skip
#endif

inline apply(a, v) {
  if
  :: a == A_HEAD -> head = v
  :: a == A_VIS -> visitors = v
  :: a == A_SLOT -> slot = v
  :: a == A_OWNER -> owner = v
  fi
}

inline drain(b) {
  byte da, dv;
  do
  :: b ? [da, dv] -> b ? da, dv; apply(da, dv)
  :: empty(b) -> break
  od;
  da = 0;
  dv = 0
}

/* x = the thread's view of address a: its newest buffered store of a, else
 * memory. Buffers hold at most two entries. */
inline load(b, a, mem, x) {
  atomic {
    x = mem;
    byte la0, lv0, la1, lv1;
    if
    :: len(b) >= 1 ->
      b ? la0, lv0; b ! la0, lv0; /* rotate: the FIFO order is restored */
      if
      :: len(b) == 2 ->
        b ? la1, lv1; b ! la1, lv1
      :: else -> la1 = 255
      fi;
      if :: la0 == a -> x = lv0 :: else fi;
      if :: la1 == a -> x = lv1 :: else fi
    :: else
    fi;
    la0 = 0; lv0 = 0; la1 = 0; lv1 = 0
  }
}

proctype Flusher() {
  byte fa, fv;
end:
  do
  :: atomic { nempty(sb0) -> sb0 ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { nempty(sb1) -> sb1 ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { nempty(sb2) -> sb2 ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { done == NPROC && empty(sb0) && empty(sb1) && empty(sb2) -> break }
  od
}

proctype Owner() {
  byte v, o;
  /* The unlink: the CAS of head (locked: drains, then writes). */
#ifdef BUG_HOT_RELAXED_OWNER
  sb0 ! A_HEAD, N;
#else
  atomic { drain(sb0); head = N }
#endif
  load(sb0, A_VIS, visitors, v);
#ifdef BUG_HOT_NO_CHECK
  v = 0;
#endif
  load(sb0, A_OWNER, owner, o);
#ifdef BUG_HOT_NO_OWNER_CHECK
  o = TOK;
#endif
  if
  :: v == 0 && o == TOK ->
    P_REUSED;
    sb0 ! A_SLOT, NEW /* the new life's contents */
  :: else ->
    P_SEEN(v != 0) /* retired through a grace period: never rewritten */
  fi;
  done++
}

/* A read of g's slot by a thread that found g from head. */
inline read_g(b, h) {
  if
  :: h == G ->
    byte x;
    load(b, A_SLOT, slot, x);
    assert(x == OLD);
    x = 0
  :: else
  fi
}

proctype Visitor() {
  byte o, h;
  bool counted = false;
  load(sb1, A_OWNER, owner, o);
#ifdef BUG_HOT_LATE_COUNT
  load(sb1, A_HEAD, head, h);
#endif
  if
  :: o == SHARED -> P_SKIP
  :: else ->
    counted = true;
#ifdef BUG_HOT_RELAXED_VISITOR
    byte c;
    load(sb1, A_VIS, visitors, c);
    sb1 ! A_VIS, c + 1;
    c = 0;
#else
    atomic { drain(sb1); visitors++ }
#endif
  fi;
#ifndef BUG_HOT_LATE_COUNT
  load(sb1, A_HEAD, head, h);
#endif
  read_g(sb1, h);
  /* The release decrement: after the reads (an RMW: locked). */
  if
  :: counted -> atomic { drain(sb1); visitors-- }
  :: else
  fi;
  done++
}

#ifdef HOT_REVOKER
proctype Revoker() {
  byte h;
  atomic {
    drain(sb2);
    if
    :: owner == TOK -> owner = PENDING
    :: else
    fi
  }
  /* membarrier: every thread's buffer drains. */
  atomic { drain(sb0); drain(sb1); drain(sb2) }
  load(sb2, A_HEAD, head, h);
  read_g(sb2, h);
  sb2 ! A_OWNER, SHARED;
  done++
}
#endif

init {
  atomic {
    run Flusher();
    run Owner();
    run Visitor();
#ifdef HOT_REVOKER
    run Revoker()
#endif
  }
}
