/*
 * pub_shared.pml: publication on a shared stream (ledger/ring.c,
 * PUBLICATION, pub11; ldg__publish_shared, release.c's ldg__overtake_slot)
 * under a store-buffer memory model: two publishers of one stream, two
 * releases, and a slot's second life.
 *
 *   seqs 1, 2, 3 in slots 1, 2, 1: seq 3 is slot 1's second life, reserved
 *   only once seq 1 is resolved and nobody holds slot 1 in a read-side
 *   section (the grace period before a retired segment is reused).
 *   PA publishes seq 1; PB seq 2, then seq 3. R1 owns seq 1; R2 owns seq 2,
 *   then seq 3 (a walk, in order).
 *
 *   enqueuer (ldg__publish_shared): enter the section (pin); store
 *            state = FULL (release); ldg__asym_light (nothing here);
 *            a = load ask; ASKED: CAS ask ASKED -> NONE, won: the entry is
 *            its own again (ldg__take_one); leave the section.
 *   release  (ldg__overtake_slot) owns seq k (it starts once k's
 *            reservation is done, a locked RMW) and reads state: FULL:
 *            takes it. EMPTY (the spin is any delay): store ask = ASKED
 *            (release); ldg__asym_heavy; read state: EMPTY: leave it;
 *            else CAS ask ASKED -> NONE, won: take it (a RETRACTED slot is
 *            not modelled: ring.c argues it with this argument).
 *   A taker resets state to EMPTY (relaxed) and resolves the slot (a
 *   seq_cst add: its buffer drains first).
 *
 * Memory: every process's plain stores (the publishers' state, the
 * releases' ask and state) go through its own FIFO store buffer (x86-TSO;
 * C11 allows more, but the reordering the protocol must survive is a store
 * passing a later load, which this keeps) and reach memory at any later
 * step (proctype Flusher). No process loads an address it has a store to
 * buffered (the model's shape: each load is of a word the loader has not
 * written since its last drain), so loads read memory. Every CAS is a
 * locked RMW: its thread's buffer drains first. ldg__asym_heavy
 * (membarrier): every buffer drains, in one step.
 *
 * Checked: every entry taken exactly once (asserted at each take, and all
 * at the end); an enqueuer takes back only its own seq's entry (the slot
 * still holds its life).
 *
 * Mutants (each must fail):
 *   BUG_PUB11_NO_MEMBARRIER  the release's heavy fence left out: its ask
 *                            still buffered, the FULL store too; it reads
 *                            EMPTY and leaves, the enqueuer read NONE:
 *                            taken by nobody.
 *   BUG_PUB11_NO_CAS         a release that asked and reads FULL takes the
 *                            entry with a plain store of NONE, no CAS: the
 *                            enqueuer read the ask and took it back: twice.
 *   BUG_PUB11_ENQ_NO_CAS     the enqueuer that reads ASKED takes its entry
 *                            back with a plain store of NONE: the release
 *                            read FULL and won its CAS: twice.
 *   BUG_PUB11_NO_RESET       the enqueuer's winning CAS leaves ASKED on the
 *                            slot (no reset for its next life): the next
 *                            life's enqueuer reads it and takes its entry
 *                            back while its release takes it: twice.
 *   BUG_PUB11_NO_PIN         the enqueuer leaves its read-side section
 *                            right after its store of FULL: its slot is
 *                            taken and reused before its load of the ask,
 *                            which reads the next life's ask: it takes
 *                            another seq's entry.
 * Probes (each must be reached): PROBE_PUB11_TAKEBACK (an enqueuer takes
 * its entry back), PROBE_PUB11_BOTH (a release reads FULL after its fence
 * while its ask is still on: the CAS decides), PROBE_PUB11_REUSE (slot 1's
 * second life published).
 */

#define NSEQ 3
#define NONE 0
#define ASKED 1
#define EMPTY 0
#define FULL 1

/* Addresses in a store buffer: state[s] is s, ask[s] is 2 + s. */
#define A_ASK(s) (2 + (s))

byte state[3]; /* by slot 1..2 */
byte ask[3];
byte pin[3];   /* read-side sections holding the slot */
byte life[3];  /* the seq the slot holds now */
bool reserved[NSEQ + 1];
bool resolved[NSEQ + 1];
byte taken[NSEQ + 1];
byte done;

chan sbA = [4] of { byte, byte };
chan sbB = [4] of { byte, byte };
chan sb1 = [4] of { byte, byte };
chan sb2 = [4] of { byte, byte };

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_PUB11_TAKEBACK
#define P_TAKEBACK PROBE_AT(true)
#else
#define P_TAKEBACK skip
#endif
#ifdef PROBE_PUB11_BOTH
#define P_BOTH(c) PROBE_AT(c)
#else
#define P_BOTH(c) skip
#endif
#ifdef PROBE_PUB11_REUSE
#define P_REUSE PROBE_AT(true)
#else
#define P_REUSE skip
#endif

inline apply(a, v) {
  if
  :: a <= 2 -> state[a] = v
  :: else -> ask[a - 2] = v
  fi
}

inline drain_one(sb) {
  do
  :: sb ? [da, dv] -> sb ? da, dv; apply(da, dv)
  :: empty(sb) -> break
  od;
  da = 0;
  dv = 0
}

/* membarrier: every buffer drains. */
inline drain_all() {
  drain_one(sbA);
  drain_one(sbB);
  drain_one(sb1);
  drain_one(sb2)
}

inline take(k) {
  assert(taken[k] == 0);
  taken[k]++
}

/* The taker's reset of state (relaxed, buffered) and its resolve (a
 * seq_cst add: the buffer drains first). */
inline resolve(sb, sl, k) {
  sb ! sl, EMPTY;
  atomic { drain_one(sb); resolved[k] = true }
}

proctype Flusher() {
  byte fa, fv;
end:
  do
  :: atomic { nempty(sbA) -> sbA ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { nempty(sbB) -> sbB ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { nempty(sb1) -> sb1 ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { nempty(sb2) -> sb2 ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { done == 4 && empty(sbA) && empty(sbB) && empty(sb1) &&
              empty(sb2) -> break }
  od
}

/* An enqueue of seq k into slot sl through buffer sb (reserved already:
 * the reservation is a locked RMW, after which k's release may start). */
inline publish(sb, k, sl) {
  pin[sl]++;                 /* ldg__ring_read_lock */
  sb ! sl, FULL;             /* the publishing store (release) */
#ifdef BUG_PUB11_NO_PIN
  pin[sl]--;
#endif
  /* ldg__asym_light: nothing; the load reads memory. */
  a = ask[sl];
  if
  :: a == ASKED ->
#ifdef BUG_PUB11_ENQ_NO_CAS
    sb ! A_ASK(sl), NONE;
    mine = true
#else
    atomic {
      drain_one(sb);
      if
      :: ask[sl] == ASKED ->
#ifndef BUG_PUB11_NO_RESET
        ask[sl] = NONE;
#endif
        mine = true
      :: else -> skip /* the release took it */
      fi
    }
#endif
  :: else -> skip
  fi;
  a = 0;
#ifndef BUG_PUB11_NO_PIN
  pin[sl]--;                 /* ldg__ring_read_unlock */
#endif
  if
  :: mine ->
    /* ldg__take_one: the slot must still hold our seq. */
    assert(life[sl] == k);
    P_TAKEBACK;
    take(k);
    resolve(sb, sl, k)
  :: else -> skip
  fi;
  mine = false
}

proctype PA() {
  byte a, da, dv;
  bool mine;
  atomic { drain_one(sbA); reserved[1] = true }
  publish(sbA, 1, 1);
  done++
}

proctype PB() {
  byte a, da, dv;
  bool mine;
  atomic { drain_one(sbB); reserved[2] = true }
  publish(sbB, 2, 2);
  /* Slot 1's next life: seq 1 resolved, no section holds the slot (its
   * grace period, whose membarrier drains every buffer). */
  atomic {
    resolved[1] && pin[1] == 0 ->
    drain_all();             /* the grace period (memb: membarrier) */
    life[1] = 3;
    reserved[3] = true
  }
  P_REUSE;
  publish(sbB, 3, 1);
  done++
}

/* The walk's step on seq k in slot sl, through buffer sb (under the walk's
 * read-side section). */
inline release_one(sb, k, sl) {
  reserved[k];               /* owns k: a mark covering it */
  pin[sl]++;
  st = state[sl];
  if
  :: st == FULL -> take(k); pin[sl]--; resolve(sb, sl, k)
  :: else ->
    /* The spin: any delay; then ask. */
    sb ! A_ASK(sl), ASKED;
#ifndef BUG_PUB11_NO_MEMBARRIER
    atomic { drain_all() }   /* ldg__asym_heavy: membarrier */
#endif
    st = state[sl];
    if
    :: st == EMPTY -> pin[sl]-- /* left to the enqueuer */
    :: else ->
      P_BOTH(ask[sl] == ASKED);
#ifdef BUG_PUB11_NO_CAS
      sb ! A_ASK(sl), NONE;
      take(k);
      pin[sl]--;
      resolve(sb, sl, k)
#else
      atomic {
        drain_one(sb);
        if
        :: ask[sl] == ASKED -> ask[sl] = NONE; mine = true
        :: else -> skip /* the enqueuer took it off */
        fi
      }
      pin[sl]--;
      if
      :: mine -> take(k); resolve(sb, sl, k)
      :: else -> skip
      fi;
      mine = false
#endif
    fi
  fi;
  st = 0
}

proctype R1() {
  byte st, da, dv;
  bool mine;
  release_one(sb1, 1, 1);
  done++
}

proctype R2() {
  byte st, da, dv;
  bool mine;
  release_one(sb2, 2, 2);
  release_one(sb2, 3, 1);
  done++
}

init {
  atomic {
    life[1] = 1;
    life[2] = 2;
    run Flusher();
    run PA();
    run PB();
    run R1();
    run R2()
  }
  /* All done; or stuck (timeout: seq 1 never resolved, so slot 1 never
   * reused): an entry then was taken by nobody, which the assertion says. */
  if
  :: (done == 4 && empty(sbA) && empty(sbB) && empty(sb1) && empty(sb2))
  :: timeout
  fi;
  assert(taken[1] == 1 && taken[2] == 1 && taken[3] == 1)
}
