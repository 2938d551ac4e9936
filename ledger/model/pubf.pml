/*
 * pubf.pml: the published filters of a stream's newest segments
 * (ledger/summary.c, THE PUBLISHED FILTERS; ring.c's ldg__enqueue_entry
 * widens them, segment.c's ldg__ring_extend links a segment, summary.c's
 * ldg__ring_walk reads them).
 *
 * Two segments, 0 (the stream's first, linked) and 1 (linked by an
 * extender while the others run). Each has two filters of vector ids, each
 * a pair [lo, hi] (empty: lo > hi):
 *   one  widened by the stream's one publisher (LDG__PUB_STORE seqs) with
 *        plain loads and stores: its calls are sequential (E0 below);
 *   any  widened by every other enqueuer with atomic RMWs, word by word
 *        (ldg__lower / ldg__raise: a CAS loop is one atomic step here);
 * and pubf_on, whether the life keeps them (on once the ledger was
 * queried, a hint read once by the linker: either value here).
 * Enqueuers: in segment 0, E0 (the one publisher, id 2), E1 (id 1) and E2
 * (id 3), both CAS publishers, racing on any; in segment 1, E3 (id 2, a CAS
 * publisher), which reaches segment 1 through tailseg once the extender
 * swung it (its reservation read tail_end, raised after the swing:
 * extend_mp.pml). Each widens its segment's filter if the life keeps them,
 * then publishes its slot (FULL with its id), then returns.
 * Linkers: segment 0's resets its filters (the last life left [3, 3]),
 * sets pubf_on, links it; the extender does the same for segment 1, links
 * it after segment 0 (next) and swings tailseg to it.
 * The query picks a probe p in {1, 2, 3} and begins (noting the entries
 * FULL then), reads head (segment 0) and then tailseg (last), and walks
 * from head to last: a segment whose life keeps filters and whose filters
 * (four loads, one at a time) both rule p out is skipped, its slots unread,
 * tail unread; any other segment has its slots read (found: every entry
 * FULL when the query began is FULL still, nothing is released here).
 * Checked (summary.c's claim, as ledger.h needs it): a query never misses
 * an entry published before it began, in a segment it skipped or in one
 * past last. Sequentially consistent: the C argument's orders are
 * happens-before chains (the widening is sequenced before the publication
 * and the enqueue's return, the reset and pubf_on before the linking CAS
 * and the tailseg swing that every enqueuer's reach of its segment reads
 * from), so a weak-memory model adds nothing this one does not check.
 * Address ranges are filtered the same way and not modelled; neither is
 * the block rounding (it only widens), nor own and the jumps of older
 * segments, nor the lazily read tail (it only bounds the slots read).
 *
 * Mutants (each must fail):
 *   BUG_PUBF_PLAIN          any widened with a plain load and a later store
 *                           (two CAS publishers lose one's raise or lower)
 *   BUG_PUBF_AFTER_PUBLISH  the widening after the publication
 *   BUG_PUBF_RESET_LATE     the linker resets the filters after linking (an
 *                           enqueuer's widening is wiped)
 *   BUG_PUBF_ONE_ONLY       the query asks only one
 *   BUG_PUBF_IGNORE_ON      the query trusts the filters of a life that does
 *                           not keep them (its enqueuers widened nothing)
 *   BUG_PUBF_LAST_STALE     the query's last is a tailseg read before it
 *                           began (a cached one): a segment linked since,
 *                           holding a returned entry, is not walked
 *   BUG_PUBF_SKIP_ENDS      a skipped segment ends the walk (the segments
 *                           after it, up to last, are not walked)
 * Probes (each must be reached): PROBE_PUBF_REJECT (a query rules a probe
 * out while an enqueue is in flight), PROBE_PUBF_RACE (E1 and E2 both
 * inside their widening of any at once), PROBE_PUBF_SECOND (a query skips
 * segment 0 and walks segment 1).
 */

#define NONE 4   /* an empty filter's lo (above every id); hi 0 */
#define NE 4     /* enqueuers */

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_PUBF_REJECT
#define P_REJECT(c) PROBE_AT(c)
#else
#define P_REJECT(c) skip
#endif
#ifdef PROBE_PUBF_RACE
#define P_RACE(c) PROBE_AT(c)
#else
#define P_RACE(c) skip
#endif
#ifdef PROBE_PUBF_SECOND
#define P_SECOND(c) PROBE_AT(c)
#else
#define P_SECOND(c) skip
#endif

byte one_lo[2] = 3, one_hi[2] = 3;   /* the last life's filters */
byte any_lo[2] = 3, any_hi[2] = 3;
bit on[2];                     /* pubf_on, for the life */
bit linked[2];                 /* reachable: segment 0 from head, 1 from next */
byte tailseg;                  /* s->tailseg */
byte slot[NE];                 /* entry i: 0 (EMPTY) or the id published */
bit ret[NE];                   /* enqueue i returned */
bit widening[NE];              /* enqueuer i inside its widening */

inline widen_one(g, id) {
  /* ldg__pubf_widen, one: plain loads and stores */
  if :: id < one_lo[g] -> one_lo[g] = id :: else fi;
  if :: id > one_hi[g] -> one_hi[g] = id :: else fi
}

inline widen_any(i, g, id) {
  widening[i] = 1;
  P_RACE(widening[1] && widening[2]);
#ifdef BUG_PUBF_PLAIN
  lo = any_lo[g];              /* load, then a plain store of what was read */
  if :: id < lo -> any_lo[g] = id :: else fi;
  hi = any_hi[g];
  if :: id > hi -> any_hi[g] = id :: else fi;
#else
  atomic { if :: id < any_lo[g] -> any_lo[g] = id :: else fi };   /* ldg__lower */
  atomic { if :: id > any_hi[g] -> any_hi[g] = id :: else fi };   /* ldg__raise */
#endif
  widening[i] = 0
}

inline widen(i, g, id) {
  if
  :: on[g] && i == 0 -> widen_one(g, id)
  :: on[g] && i != 0 -> widen_any(i, g, id)
  :: else -> skip              /* the life keeps no filters */
  fi
}

/* Enqueuer i publishes id into segment g. */
proctype Enqueuer(byte i; byte g; byte id) {
  byte lo, hi;                 /* BUG_PUBF_PLAIN's loads */
  if
  :: g == 0 -> linked[0] == 1
  :: else -> tailseg == 1      /* its reach of segment 1 (acquire) */
  fi;
#ifdef BUG_PUBF_AFTER_PUBLISH
  slot[i] = id;                /* publication */
  widen(i, g, id);
#else
  widen(i, g, id);
  slot[i] = id;                /* publication (store or CAS of FULL) */
#endif
  ret[i] = 1                   /* the enqueue returns */
}

/* ldg__summary_reset, then the link (ldg__ring_init's publication of the
 * stream, or ldg__ring_extend's CAS of next and swing of tailseg). */
inline reset(g) {
  one_lo[g] = NONE; one_hi[g] = 0;
  any_lo[g] = NONE; any_hi[g] = 0;
  if :: on[g] = 1 :: on[g] = 0 fi
}

proctype Linker(byte g) {
  if
  :: g == 1 -> linked[0] == 1  /* linked after segment 0 */
  :: else -> skip
  fi;
#ifdef BUG_PUBF_RESET_LATE
  linked[g] = 1;
  reset(g);
#else
  reset(g);
  linked[g] = 1;
#endif
  if
  :: g == 1 -> tailseg = 1     /* the swing, after the linking CAS */
  :: else -> skip
  fi
}

proctype Query() {
  byte p, g, last, olo, ohi, alo, ahi, i;
  bit was[NE];
  bit walked[2];
  linked[0] == 1;              /* the stream exists */
  if :: p = 1 :: p = 2 :: p = 3 fi;
#ifdef BUG_PUBF_LAST_STALE
  last = tailseg;              /* read before the query began */
#endif
  atomic {                     /* the query begins */
    i = 0;
    do
    :: i < NE -> was[i] = (slot[i] == p); i++
    :: else -> break
    od
  }
#ifndef BUG_PUBF_LAST_STALE
  last = tailseg;              /* after head: the walk's end */
#endif
  g = 0;                       /* head */
  do
  :: true ->
     olo = one_lo[g]; ohi = one_hi[g];   /* relaxed loads, one at a time */
     alo = any_lo[g]; ahi = any_hi[g];
#ifdef BUG_PUBF_ONE_ONLY
     alo = NONE; ahi = 0;
#endif
#ifdef BUG_PUBF_IGNORE_ON
#define TRUSTED 1
#else
#define TRUSTED on[g]
#endif
     if
     :: TRUSTED && (p < olo || p > ohi) && (p < alo || p > ahi) ->
        /* skipped: no slot, no tail read */
        P_REJECT(!(ret[0] && ret[1] && ret[2] && ret[3]));
        P_SECOND(g == 0 && last == 1);
#ifdef BUG_PUBF_SKIP_ENDS
        break;
#endif
     :: else -> walked[g] = 1  /* its slots read: every entry of was found */
     fi;
     if
     :: g == last -> break
     :: else -> g = 1          /* next: linked before tailseg was swung */
     fi
  od;
  /* Entries 0..2 are segment 0's, 3 is segment 1's: each noted FULL when
   * the query began is in a segment the query read. */
  assert(!was[0] || walked[0]);
  assert(!was[1] || walked[0]);
  assert(!was[2] || walked[0]);
  assert(!was[3] || walked[1])
}

init {
  atomic {
    run Linker(0);
    run Linker(1);
    run Enqueuer(0, 0, 2);
    run Enqueuer(1, 0, 1);
    run Enqueuer(2, 0, 3);
    run Enqueuer(3, 1, 2);
    run Query()
  }
}
