/*
 * The entry points that record and release: argument checks, then ring.c.
 * Every check happens before anything changes, so a refused call changes
 * nothing and the caller keeps its keep. ldg_enqueue and its checks are in
 * ring.c, in one function with the enqueue itself.
 */
#define _POSIX_C_SOURCE 200809L /* liburcu's headers call clock_gettime on aarch64 */
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

/* ldg_enqueue is in ring.c, beside the enqueue it runs (one function, no
 * call between the checks and the enqueue); its checks are
 * ldg__enqueue_args_ok (internal.h). */

/* Acquire: pairs with the release half of the reserving CAS on tail
 * (ldg__ring_reserve), which followed its acquire of tail_end: a thread that
 * releases to this mark finds every seq up to it linked in a segment. */
ldg_seq ldg_mark(const ldg_stream *s) { return ldg__tail_acquire(s); }

int ldg_add_wait(ldg_stream *b, ldg_stream *a, ldg_seq a_upto,
                 ldg_seq *seq_out) {
  if (b == NULL || a == NULL || a->ledger != b->ledger) return LDG_EINVAL;
  /* An early refusal; acquire pairs with the destroyer's seq_cst CAS. The
   * seq_cst handshake in ldg__enqueue_entry decides a race with destroy. */
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
