/*
 * The vector index (ldg_ledger_index_vectors): lets ldg_holds_vector,
 * ldg_nonblocking_holding and ldg_vector_holders answer "nobody holds this
 * id" without walking every pending entry (issue 11: a miss cost 3.4 ns per
 * pending entry, 447 us at 128 k). Off unless turned on, before the first
 * stream: it costs a locked read-modify-write per id on every enqueue and
 * every release, which a ledger nobody queries should not pay.
 *
 * THE TABLE
 *   A power-of-two array of 64-bit words, one per bucket; an id hashes to
 *   one bucket and to a 16-bit fingerprint. A word holds
 *     fp    the fingerprint its count belongs to,
 *     count pending indexed entries with that fingerprint (some of them),
 *     over  the other pending indexed entries of the bucket,
 *   and an entry naming k ids is added to k buckets (twice to one bucket if
 *   it names an id twice: it is removed twice too). Add: count + 1 if fp is
 *   the entry's or count is 0 (then fp becomes the entry's), else over + 1.
 *   Remove: count - 1 if fp is the entry's and count > 0, else over - 1.
 *   Each is one CAS on the word, retried.
 *   Invariants (each add and remove keeps both, by cases on the rules):
 *     count + over = the pending indexed entries of the bucket;
 *     over >= those of them whose fingerprint is not fp.
 *   So "over == 0 and (count == 0 or fp differs from id's)" means no
 *   pending entry of the bucket has id's fingerprint, so none names id: a
 *   definite miss (ldg__vindex_absent). Anything else is "maybe", and the
 *   query walks the rings as without an index: answers stay exact, only
 *   their cost depends on the index (O(1) on a definite miss). Counts that
 *   would pass 2^24 - 1 stick at it in over (never decremented again): the
 *   bucket says "maybe" for good, which is always allowed.
 *
 * WHEN AN ENTRY IS ADDED AND REMOVED (ring.c, release.c)
 *   Added by its enqueuer before the publishing store (and after the destroy
 *   handshake: a refused enqueue adds nothing); removed by whoever takes
 *   the entry: the release that took a FULL slot (ldg__take_chunk, before
 *   its keep runs), or the enqueuer whose entry a release that asked gave
 *   back (ldg__take_one, before the keep runs; ring.c, PUBLICATION).
 *   The add is sequenced before the publication, which happens-before the
 *   take (acquire of FULL), which is sequenced before the remove: every
 *   entry's add precedes its remove in the word's modification order. A
 *   query that reads a definite miss at some point of that order is right
 *   at that point: every entry whose add came before it was also removed
 *   before it, hence taken, hence covered by a release (the release raises
 *   `released` before taking); the adds after it belong to enqueues that
 *   publish after it. Only the word's modification order is used, so every
 *   access is relaxed. An entry covered by a release and not yet taken
 *   still counts: "maybe", and the walk, which skips seqs at or below
 *   `released`, answers as ledger.h says (an entry stops being reported
 *   when the release covering it begins). Entries of streams being
 *   destroyed count until their destroy takes them; the walk skips
 *   destroyed streams.
 *
 * WHY ONLY BEFORE THE FIRST STREAM
 *   Every pending entry must have been added, or a miss could be wrong; an
 *   index turned on later would miss the entries already pending. The
 *   setter takes the registry mutex and refuses once a stream id was handed
 *   out; a stream created after it took the mutex after the setter (its
 *   creation links it under that mutex), so every enqueue on it sees the
 *   table. The table is fixed from then on and freed with the ledger.
 *   Sizing: 8 buckets per distinct id expected pending at once keeps about
 *   1 % of buckets "maybe" at that load (a bucket goes "maybe" when it
 *   holds two fingerprints: Poisson(1/8) has two or more 0.7 % of the time).
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
#include <stdlib.h>

#include "ledger/atomics.h"
#include "ledger/internal.h"

#define LDG__VX_MAX 0xffffffull /* count and over: 24 bits each */

struct ldg__vindex {
  uint64_t mask; /* buckets - 1 */
  _Atomic uint64_t w[];
};

static uint64_t ldg__vx_count(uint64_t w) { return w & LDG__VX_MAX; }
static uint64_t ldg__vx_over(uint64_t w) { return (w >> 24) & LDG__VX_MAX; }
static uint64_t ldg__vx_fp(uint64_t w) { return w >> 48; }
static uint64_t ldg__vx_word(uint64_t fp, uint64_t count, uint64_t over) {
  return fp << 48 | over << 24 | count;
}

/* splitmix64's finaliser: ids are often consecutive. */
static uint64_t ldg__vx_hash(uint64_t id) {
  id += 0x9e3779b97f4a7c15ull;
  id = (id ^ (id >> 30)) * 0xbf58476d1ce4e5b9ull;
  id = (id ^ (id >> 27)) * 0x94d049bb133111ebull;
  return id ^ (id >> 31);
}

size_t ldg__vindex_bytes(const struct ldg__vindex *x) {
  return sizeof(*x) + (size_t)(x->mask + 1) * sizeof(x->w[0]);
}

struct ldg__vindex *ldg__vindex_new(size_t ids) {
  /* 8 buckets per id, at least 64, at most 2^28 (2 GiB). */
  if (ids == 0 || ids > ((size_t)1 << 25)) return NULL;
  size_t buckets = 64;
  while (buckets < ids * 8) buckets <<= 1;
  struct ldg__vindex *x =
      ldg__calloc(1, sizeof(*x) + buckets * sizeof(x->w[0]));
  if (x == NULL) return NULL;
  x->mask = buckets - 1;
  return x;
}

void ldg__vindex_free(struct ldg__vindex *x) { ldg__free(x); }

/* Adds (delta = +1) or removes (-1) one entry naming id. */
static void ldg__vx_move(struct ldg__vindex *x, uint64_t id, int delta) {
  uint64_t h = ldg__vx_hash(id);
  uint64_t fp = h >> 48;
  _Atomic uint64_t *p = &x->w[h & x->mask];
  /* Relaxed, load and CAS: only the word's modification order matters
   * (see the top of this file); the CAS checks the value loaded. */
  uint64_t old = ldg__load_relaxed(p);
  for (;;) {
    uint64_t c = ldg__vx_count(old), o = ldg__vx_over(old);
    uint64_t f = ldg__vx_fp(old);
    if (delta > 0) {
      if (c == 0 && o < LDG__VX_MAX) {
        f = fp;
        c = 1;
      } else if (f == fp && c < LDG__VX_MAX) {
        c++;
      } else if (o < LDG__VX_MAX) {
        o++;
      } /* else stuck at "maybe" */
    } else {
      if (f == fp && c > 0) {
        c--;
      } else if (o == 0) {
        abort(); /* the invariants say this entry was counted */
      } else if (o < LDG__VX_MAX) {
        o--;
      } /* else stuck */
    }
    uint64_t want = ldg__vx_word(f, c, o);
    if (ldg__cas_weak_relaxed(p, &old, want)) return;
  }
}

void ldg__vindex_add(struct ldg__vindex *x, const uint64_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) ldg__vx_move(x, ids[i], +1);
}

void ldg__vindex_remove(struct ldg__vindex *x, const uint64_t *ids,
                        size_t n) {
  for (size_t i = 0; i < n; i++) ldg__vx_move(x, ids[i], -1);
}

bool ldg__vindex_absent(const struct ldg__vindex *x, uint64_t id) {
  uint64_t h = ldg__vx_hash(id);
  /* Relaxed: a point in the word's modification order (top of file). */
  uint64_t w = ldg__load_relaxed(&x->w[h & x->mask]);
  return ldg__vx_over(w) == 0 &&
         (ldg__vx_count(w) == 0 || ldg__vx_fp(w) != h >> 48);
}

/* ---- Inspection (ledger_testing.h) ------------------------------------------ */

bool ldg__vindex_says_absent(ldg_ledger *l, uint64_t id) {
  return l->vindex != NULL && ldg__vindex_absent(l->vindex, id);
}
