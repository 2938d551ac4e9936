/*
 * pubf.pml: the published filters of a segment (ledger/summary.c, THE
 * PUBLISHED FILTERS; ring.c's ldg__enqueue_entry widens them, summary.c's
 * ldg__ring_walk reads them for the segment that holds tail).
 *
 * One segment, already the stream's tail segment, with two filters of
 * vector ids, each a pair [lo, hi] (empty: lo > hi):
 *   one  widened by the stream's one publisher (LDG__PUB_STORE seqs) with
 *        plain loads and stores: its calls are sequential (E0 below);
 *   any  widened by every other enqueuer with atomic RMWs, word by word
 *        (ldg__lower / ldg__raise: a CAS loop is one atomic step here).
 * Enqueuers: E0 (the one publisher, id 2), E1 (id 1) and E2 (id 3), both
 * CAS publishers, racing on any. Each waits until the segment is linked,
 * widens its filter, then publishes its slot (FULL with its id).
 * The linker resets both filters (the last life left [3, 3] in each),
 * turns them on or off for the life (pubf_on: on once the ledger was
 * queried, a hint read once, so either here) and links the segment (the
 * linking CAS), in that order. Enqueuers widen only in a life that keeps
 * the filters; queries trust them only there.
 * The query picks a probe p in {1, 2, 3}, notes the slots FULL when it
 * begins, then loads the four words one at a time and, when neither
 * filter admits p, answers "not held" without reading a slot.
 * Checked (the claim (P) of summary.c, as ledger.h needs it): a query
 * never answers "not held" for an entry published before it began (an
 * entry whose enqueue returned before the query began was published
 * before; nothing is released here). Sequentially consistent: the C
 * argument's orders are happens-before chains (the widening is sequenced
 * before the publication and the enqueue's return, the reset before the
 * linking CAS that every enqueuer's acquire of the segment reads from), so
 * a weak-memory model would add nothing this one does not check. Address
 * ranges are filtered the same way (their own [lo, hi]) and not modelled;
 * neither is the block rounding (it only widens), nor segments below the
 * tail's (they keep own and the jumps).
 *
 * Mutants (each must fail):
 *   BUG_PUBF_PLAIN        any widened with a plain load and a later store
 *                         (two CAS publishers lose one's raise or lower)
 *   BUG_PUBF_AFTER_PUBLISH  the widening after the publication
 *   BUG_PUBF_RESET_LATE   the linker resets the filters after linking (an
 *                         enqueuer's widening is wiped)
 *   BUG_PUBF_ONE_ONLY     the query asks only one
 *   BUG_PUBF_IGNORE_ON    the query trusts the filters of a life that does
 *                         not keep them (its enqueuers widened nothing)
 * Probes (each must be reached): PROBE_PUBF_REJECT (a query rules a probe
 * out while an enqueue is in flight), PROBE_PUBF_RACE (E1 and E2 both
 * inside their widening of any at once).
 */

#define NONE 4   /* an empty filter's lo (above every id); hi 0 */

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

byte one_lo = 3, one_hi = 3;   /* the last life's filters */
byte any_lo = 3, any_hi = 3;
bit linked;
bit on;                        /* pubf_on, for the life */
byte slot[3];                  /* slot i: 0 (EMPTY) or the id published */
bit ret[3];                   /* enqueue i returned */
bit widening[3];               /* enqueuer i inside its widening */

inline widen_one(id) {
  /* ldg__pubf_widen, one: plain loads and stores */
  if :: id < one_lo -> one_lo = id :: else fi;
  if :: id > one_hi -> one_hi = id :: else fi
}

inline widen_any(i, id) {
  widening[i] = 1;
  P_RACE(widening[1] && widening[2]);
#ifdef BUG_PUBF_PLAIN
  lo = any_lo;                 /* load, then a plain store of what was read */
  if :: id < lo -> any_lo = id :: else fi;
  hi = any_hi;
  if :: id > hi -> any_hi = id :: else fi;
#else
  atomic { if :: id < any_lo -> any_lo = id :: else fi };   /* ldg__lower */
  atomic { if :: id > any_hi -> any_hi = id :: else fi };   /* ldg__raise */
#endif
  widening[i] = 0
}

inline widen(i, id) {
  if
  :: i == 0 -> widen_one(id)
  :: else -> widen_any(i, id)
  fi
}

proctype Enqueuer(byte i; byte id) {
  byte lo, hi;                 /* BUG_PUBF_PLAIN's loads */
  linked == 1;                 /* reached the segment (acquire of the link) */
#ifdef BUG_PUBF_AFTER_PUBLISH
  slot[i] = id;                /* publication */
  if :: on -> widen(i, id) :: else fi;
#else
  if :: on -> widen(i, id) :: else fi;
  slot[i] = id;                /* publication (store or CAS of FULL) */
#endif
  ret[i] = 1                  /* the enqueue returns */
}

proctype Linker() {
#ifdef BUG_PUBF_RESET_LATE
  linked = 1;
#endif
  /* ldg__summary_reset: the filters of this life start empty */
  one_lo = NONE; one_hi = 0;
  any_lo = NONE; any_hi = 0;
  if :: on = 1 :: on = 0 fi;
#ifndef BUG_PUBF_RESET_LATE
  linked = 1                   /* the linking CAS */
#endif
}

proctype Query() {
  byte p, olo, ohi, alo, ahi;
  bit was[3];
  linked == 1;                 /* the walk reached the segment */
  if :: p = 1 :: p = 2 :: p = 3 fi;
  atomic {                     /* the query begins */
    was[0] = (slot[0] == p); was[1] = (slot[1] == p); was[2] = (slot[2] == p)
  }
  olo = one_lo; ohi = one_hi;  /* relaxed loads, one at a time */
  alo = any_lo; ahi = any_hi;
#ifdef BUG_PUBF_ONE_ONLY
  alo = NONE; ahi = 0;
#endif
#ifdef BUG_PUBF_IGNORE_ON
#define TRUSTED 1
#else
#define TRUSTED on
#endif
  if
  :: TRUSTED && (p < olo || p > ohi) && (p < alo || p > ahi) ->
     /* "not held", no slot read */
     P_REJECT(!(ret[0] && ret[1] && ret[2]));
     assert(!was[0] && !was[1] && !was[2])
  :: else -> skip            /* reads the slots, as before */
  fi
}

init {
  atomic {
    run Linker();
    run Enqueuer(0, 2);
    run Enqueuer(1, 1);
    run Enqueuer(2, 3);
    run Query()
  }
}
