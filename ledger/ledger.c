/*
 * The entry points that record and release: argument checks, then ring.c.
 * Every check happens before anything changes, so a refused call changes
 * nothing and the caller keeps its keep.
 */
#include "ledger/atomics.h"
#include "ledger/internal.h"

const char *ldg_strerror(int code) {
  switch (code) {
    case LDG_OK:
      return "LDG_OK: success";
    case LDG_EINVAL:
      return "LDG_EINVAL: invalid argument";
    case LDG_ENOMEM:
      return "LDG_ENOMEM: out of memory";
    case LDG_EDESTROYED:
      return "LDG_EDESTROYED: stream was destroyed";
    case LDG_EDRAIN:
      return "LDG_EDRAIN: a stream drain failed";
    case LDG_EBUSY:
      return "LDG_EBUSY: still held by pending work";
    default:
      return "unknown streamledger status code";
  }
}

/* Whether [addr, addr + bytes) is non-empty and does not wrap. A range ending
 * exactly at the top of the address space is fine. */
static bool ldg__range_ok(const ldg_range *r) {
  return r->bytes != 0 && r->bytes - 1 <= UINTPTR_MAX - r->addr;
}

int ldg_enqueue(ldg_stream *s, ldg_keep keep, const uint64_t *vec_ids,
                size_t n_vec, const ldg_range *ranges, size_t n_ranges,
                ldg_seq *seq_out) {
  if (s == NULL) return LDG_EINVAL;
  if ((n_vec != 0 && vec_ids == NULL) || (n_ranges != 0 && ranges == NULL)) {
    return LDG_EINVAL;
  }
  /* n_vec + 2 * n_ranges words, counted in bytes, must not overflow. */
  const size_t max_words = (SIZE_MAX / sizeof(uint64_t)) / 4;
  if (n_vec > max_words || n_ranges > max_words) return LDG_EINVAL;
  for (size_t i = 0; i < n_ranges; i++) {
    if (!ldg__range_ok(&ranges[i])) return LDG_EINVAL;
  }
  struct ldg__entry e = {
      .kind = LDG__KIND_OP,
      .keep = keep,
      .vec_ids = vec_ids,
      .n_vec = n_vec,
      .ranges = ranges,
      .n_rng = n_ranges,
  };
  return ldg__ring_enqueue(s, &e, seq_out);
}

/* Acquire: pairs with the release half of the reserving CAS on tail
 * (ldg__ring_reserve), which followed its acquire of tail_end: a thread that
 * releases to this mark finds every seq up to it linked in a segment. */
ldg_seq ldg_mark(const ldg_stream *s) { return ldg__load_acquire(&s->tail); }

int ldg_add_wait(ldg_stream *b, ldg_stream *a, ldg_seq a_upto,
                 ldg_seq *seq_out) {
  if (b == NULL || a == NULL || a->ledger != b->ledger) return LDG_EINVAL;
  /* An early refusal; acquire pairs with the destroyer's seq_cst CAS. The
   * seq_cst handshake in ldg__ring_enqueue decides a race with destroy. */
  if (ldg__load_acquire(&b->destroyed)) return LDG_EDESTROYED;
  if (a_upto > ldg_mark(a)) return LDG_EINVAL;
  /* A wait of a stream on itself is always behind its own mark: it takes a
   * seq but fires nothing, and holds no reference (which would keep the
   * stream alive through its own ring). */
  ldg_stream *target = a == b ? NULL : a;
  struct ldg__entry e = {
      .kind = LDG__KIND_WAIT,
      .target = target,
      .upto = a_upto,
  };
  /* The wait holds a. */
  if (target != NULL) ldg_stream_ref(target);
  int rc = ldg__ring_enqueue(b, &e, seq_out);
  if (rc != LDG_OK) {
    ldg_stream_unref(target); /* never the last: the caller holds one */
  }
  return rc;
}

int ldg_release(ldg_stream *s, ldg_seq upto) {
  if (s == NULL) return LDG_EINVAL;
  /* A refusal only: acquire pairs with the destroyer's seq_cst CAS. A
   * release racing destroy claims an interval disjoint from the
   * destroyer's (release.c), so either order is safe. */
  if (ldg__load_acquire(&s->destroyed)) return LDG_EDESTROYED;
  if (upto > ldg_mark(s)) return LDG_EINVAL;
  ldg__release(s, upto);
  ldg__ring_prepare_spare(s); /* the next segment, off the enqueue path */
  return LDG_OK;
}

int ldg_release_all(ldg_stream *s) {
  if (s == NULL) return LDG_EINVAL;
  if (ldg__load_acquire(&s->destroyed)) return LDG_EDESTROYED; /* as above */
  ldg__release(s, ldg_mark(s));
  ldg__ring_prepare_spare(s);
  return LDG_OK;
}
