/*
 * pub_sb.pml: publication on a stream with one publisher (ledger/ring.c,
 * PUBLICATION ON A STREAM WITH ONE PUBLISHER; release.c, ldg__overtake_one)
 * under a store-buffer memory model, with two releases and the issuer.
 *
 *   issuer   (ldg__publish_one):  store tail = k; fill; store state[k] =
 *            FULL (release); ldg__asym_light (a compiler barrier only);
 *            w = load asked; if w == k: CAS asked k -> 0, won: it takes the
 *            entry back (ldg__take_one; state[k] = EMPTY, plain).
 *   release  R_k owns seq k (it starts once tail >= k is visible: its
 *            ownership comes from a mark, an acquire chain from the tail
 *            store) and reads state[k]: FULL: takes it. EMPTY (the spin is
 *            any delay): ask — CAS asked from w (first 0) to k; failing and
 *            reading w > k: state[k] is FULL (asserted), take it; w < k:
 *            CAS again from w (adopting that ask: whoever takes an ask off
 *            the word takes its entry); w == 0: again; before each retry a
 *            FULL state[k] is taken (nothing asked yet). Asked:
 *            ldg__asym_heavy, read state[k]: EMPTY: leave it (the issuer
 *            takes it); else CAS asked k -> 0, won: take it.
 *
 * Memory: the issuer's plain stores (tail, state) go through a FIFO store
 * buffer (x86-TSO; C11 allows more reordering, but the one the protocol
 * must survive is a store passing a later load, which this keeps) and
 * reach memory at any later step (proctype Flusher). The issuer's loads
 * read its own newest buffered value first. Every CAS is a locked RMW: the
 * issuer's drains its buffer first; the releases write only by CAS, so
 * they have no buffer. ldg__asym_heavy (membarrier): every store buffer
 * drains, in one step. The tail store is in the same FIFO, after
 * state[k - 1]'s FULL: a release owning k sees every earlier publication
 * (the happens-before that ring.c's argument uses for w > k and for an
 * adoption).
 *
 * Checked: every entry taken exactly once (asserted at each take, and all
 * taken at the end); an adopted or w > k slot is FULL.
 *
 * Mutants (each must fail):
 *   BUG_PUB_NO_MEMBARRIER  the release's heavy fence left out: the FULL
 *                          store still buffered, the release reads EMPTY
 *                          and leaves; the issuer read asked before the ask:
 *                          nobody takes the entry.
 *   BUG_PUB_NO_CAS         a release that asked and reads FULL takes the
 *                          entry without the CAS on asked (it clears the
 *                          word with a plain store): the issuer also read
 *                          the ask and took it back: twice.
 *   BUG_PUB_OVERWRITE      the multi-release rule broken: an ask installed
 *                          by a plain store over whatever the word holds
 *                          (no adoption): an earlier release's ask is lost,
 *                          its CAS fails, its entry is taken by nobody.
 * Probes (each must be reached): PROBE_PUB_TAKEBACK (the issuer takes an
 * entry back), PROBE_PUB_ADOPT (a release adopts another's ask),
 * PROBE_PUB_LATER (an ask finds a later seq's), PROBE_PUB_BOTH (the
 * release reads FULL after its fence while its ask is still on the word:
 * the CAS decides).
 */

#define NS 2 /* seqs; release k owns seq k */

#define EMPTY 0
#define FULL 1

#define A_TAIL 0
#define A_STATE1 1 /* state[k] is address k */

byte tail;
byte state[NS + 1];
byte asked;
byte taken[NS + 1];
bool issuer_done;
byte rel_done;

chan sb = [2 * NS + 2] of { byte, byte }; /* the issuer's store buffer */

#define PROBE_AT(c) if :: (c) -> assert(false) :: else fi
#ifdef PROBE_PUB_TAKEBACK
#define P_TAKEBACK PROBE_AT(true)
#else
#define P_TAKEBACK skip
#endif
#ifdef PROBE_PUB_ADOPT
#define P_ADOPT PROBE_AT(true)
#else
#define P_ADOPT skip
#endif
#ifdef PROBE_PUB_LATER
#define P_LATER PROBE_AT(true)
#else
#define P_LATER skip
#endif
#ifdef PROBE_PUB_BOTH
#define P_BOTH(c) PROBE_AT(c)
#else
#define P_BOTH(c) skip
#endif

inline apply(a, v) {
  if
  :: a == A_TAIL -> tail = v
  :: else -> state[a] = v
  fi
}

/* Every buffered store reaches memory (a locked RMW on this thread, or
 * membarrier on every thread). */
inline drain() {
  byte da, dv;
  do
  :: sb ? [da, dv] -> sb ? da, dv; apply(da, dv)
  :: empty(sb) -> break
  od;
  da = 0;
  dv = 0
}

inline take(k) {
  assert(taken[k] == 0);
  taken[k]++
}

proctype Flusher() {
  byte fa, fv;
end:
  do
  :: atomic { nempty(sb) -> sb ? fa, fv; apply(fa, fv); fa = 0; fv = 0 }
  :: atomic { issuer_done && empty(sb) -> break }
  od
}

proctype Issuer() {
  byte k = 1, w;
  do
  :: k <= NS ->
    sb ! A_TAIL, k;     /* the reserving store (release) */
    sb ! k, FULL;       /* the publishing store (release) */
    /* ldg__asym_light: nothing; the load reads memory (no buffered asked). */
    w = asked;
    if
    :: w == k ->
      atomic {
        drain();
        if
        :: asked == k -> asked = 0; take(k); P_TAKEBACK;
           sb ! k, EMPTY /* back to EMPTY (relaxed), as ldg__take_one */
        :: else -> skip
        fi
      }
    :: else -> skip
    fi;
    w = 0;
    k++
  :: else -> break
  od;
  issuer_done = true
}

proctype Release(byte k) {
  byte st, w, from;
  tail >= k; /* owns k: a mark covering it was read */
  st = state[k];
  if
  :: st == FULL -> take(k); goto out
  :: else -> skip
  fi;
  /* The spin: any delay; then ask. */
  w = 0;
  do
  :: atomic {
      from = w;
#ifdef BUG_PUB_OVERWRITE
      asked = k; break
#else
      if
      :: asked == w -> asked = k; break
      :: else -> w = asked
      fi
#endif
    }
    if
    :: w > k ->
      P_LATER;
      st = state[k];
      assert(st == FULL);
      take(k);
      goto out
    :: else -> skip
    fi;
    assert(w != k);
    st = state[k];
    if
    :: st == FULL -> take(k); goto out
    :: else -> skip
    fi
  od;
  if
  :: from != 0 ->
    /* Adopted from's ask: that entry is ours. */
    P_ADOPT;
    assert(from < k && state[from] == FULL);
    take(from)
  :: else -> skip
  fi;
#ifndef BUG_PUB_NO_MEMBARRIER
  atomic { drain() } /* ldg__asym_heavy: membarrier */
#endif
  st = state[k];
  if
  :: st == EMPTY -> skip /* left to the issuer */
  :: else ->
    P_BOTH(asked == k);
#ifdef BUG_PUB_NO_CAS
    atomic { asked = 0; take(k) } /* a plain store, no decision */
#else
    atomic {
      if
      :: asked == k -> asked = 0; take(k)
      :: else -> skip /* the issuer, or an adopter, took it off */
      fi
    }
#endif
  fi;
out:
  rel_done++
}

init {
  atomic {
    run Flusher();
    run Issuer();
    run Release(1);
    run Release(2)
  }
  (issuer_done && rel_done == NS && empty(sb));
  assert(taken[1] == 1 && taken[2] == 1);
  assert(asked == 0)
}
