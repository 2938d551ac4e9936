/*
 * "Who holds vector X": every pending operation that names a vector id, on
 * every live stream (blocking ones included), with its stream and sequence
 * number — what a user debugging a stuck buffer needs (issue 9).
 *
 * A query like registry.c's: it walks the registry's live streams and, for
 * each, the pending entries that ldg__ring_visit (summary.c) finds naming
 * the id, all inside one RCU read-side section, so segments and streams it
 * stands on are not freed under it. It takes no lock and sees, like the
 * other queries, an answer that was true at some instant of the call for
 * each stream.
 */
/* liburcu's headers need POSIX declarations (see ring.c). */
#define _POSIX_C_SOURCE 200809L
#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/rcu.h"

/* Where ldg_vector_holders gathers. */
struct ldg__gather {
  ldg_holder *out;
  size_t cap, n;
};

/* Appends one holder; never stops the walk. */
static bool ldg__gather_one(const ldg_stream *s, ldg_seq seq, void *arg) {
  struct ldg__gather *g = arg;
  if (g->n < g->cap)
    g->out[g->n] = (ldg_holder){s->id, s->device,
                                (s->flags & LDG_STREAM_NONBLOCKING) != 0, seq};
  g->n++;
  return false;
}

size_t ldg_vector_holders(ldg_ledger *l, uint64_t vec_id, ldg_holder *out,
                          size_t cap) {
  if (l == NULL) return 0;
  if (l->vindex != NULL && ldg__vindex_absent(l->vindex, vec_id)) return 0;
  if (out == NULL) cap = 0;
  struct ldg__gather g = {out, cap, 0};
  struct ldg__probe p = {LDG__PROBE_VEC, vec_id, 0, 0};
  ldg__rcu_read_lock();
  for (ldg_stream *s = ldg__load_acquire(&l->reg_head); s != NULL;
       s = ldg__load_acquire(&s->reg_next)) {
    if (ldg__load_acquire(&s->destroyed)) continue; /* holds nothing */
    (void)ldg__ring_visit(s, &p, ldg__gather_one, &g);
  }
  ldg__rcu_read_unlock();
  return g.n;
}
