/*
 * "Who holds vector X": every pending operation that names a vector id, on
 * every live stream (blocking ones included), with its stream and sequence
 * number — what a user debugging a stuck buffer needs (issue 9).
 *
 * A query like registry.c's: it walks the registry's live streams and, for
 * each, the unreleased span of its ring (released + 1 .. tail) as
 * ldg__ring_any does, reading only slots whose state is FULL (acquire: their
 * payload was published before), all inside one RCU read-side section, so
 * segments and streams it stands on are not freed under it. It takes no
 * lock and sees, like the other queries, an answer that was true at some
 * instant of the call for each stream. Kept in its own file, apart from the
 * ring and registry protocols, whose walks it repeats in read-only form.
 */
/* liburcu's headers need POSIX declarations (see ring.c). */
#define _POSIX_C_SOURCE 200809L
#include "ledger/atomics.h"
#include "ledger/internal.h"
#include "ledger/rcu.h"

/* Whether the operation in slot names id (its inline or external words). */
static bool ldg__slot_names(const struct ldg__slot *slot, uint64_t id) {
  const uint64_t *w;
  size_t n_vec;
  if (slot->aux == LDG__OP_EXT) {
    w = slot->u.op.d.ext->w;
    n_vec = slot->u.op.d.ext->n_vec;
  } else {
    w = slot->u.op.d.in.w;
    n_vec = slot->u.op.d.in.n_vec;
  }
  for (size_t i = 0; i < n_vec; i++)
    if (w[i] == id) return true;
  return false;
}

/* Appends s's pending operations naming id; returns the new count. */
static size_t ldg__stream_holders(ldg_stream *s, uint64_t id, ldg_holder *out,
                                  size_t cap, size_t n) {
  ldg_seq r = ldg__load_acquire(&s->released);
  ldg_seq t = ldg__load_acquire(&s->tail);
  for (struct ldg__seg *g = ldg__load_acquire(&s->head); g != NULL;
       g = ldg__load_acquire(&g->next)) {
    if (g->base > t) break;
    ldg_seq lo = g->base > r + 1 ? g->base : r + 1;
    ldg_seq last = g->base + g->size - 1;
    ldg_seq hi = last < t ? last : t;
    for (ldg_seq q = lo; q <= hi; q++) {
      const struct ldg__slot *slot = &g->slots[q - g->base];
      if (ldg__load_acquire(&slot->state) != LDG__SLOT_FULL) continue;
      if (slot->kind != LDG__KIND_OP || !ldg__slot_names(slot, id)) continue;
      if (n < cap)
        out[n] = (ldg_holder){s->id, s->device,
                              (s->flags & LDG_STREAM_NONBLOCKING) != 0, q};
      n++;
    }
  }
  return n;
}

size_t ldg_vector_holders(ldg_ledger *l, uint64_t vec_id, ldg_holder *out,
                          size_t cap) {
  if (l == NULL) return 0;
  if (l->vindex != NULL && ldg__vindex_absent(l->vindex, vec_id)) return 0;
  if (out == NULL) cap = 0;
  size_t n = 0;
  ldg__rcu_read_lock();
  for (ldg_stream *s = ldg__load_acquire(&l->reg_head); s != NULL;
       s = ldg__load_acquire(&s->reg_next)) {
    if (ldg__load_acquire(&s->destroyed)) continue; /* holds nothing */
    n = ldg__stream_holders(s, vec_id, out, cap, n);
  }
  ldg__rcu_read_unlock();
  return n;
}
