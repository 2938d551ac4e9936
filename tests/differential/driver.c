/*
 * The call driver (driver.h): ledger calls against both the ledger and a
 * reference model (model.h), compared after every call. The differential
 * test (differential_test.c) draws its calls from a seeded PRNG; the fuzzer
 * (tests/fuzz/ledger_fuzzer.c) from its input.
 *
 * What it does: it issues ledger calls, bad inputs included (NULL handles
 * and out-pointers, NULL arrays with non-zero counts, zero-byte and wrapping
 * ranges, releases and waits past a mark, calls on destroyed streams,
 * injected allocation failures). Every status code must be one the model
 * accepts; after every call the driver compares which keeps ran (each
 * exactly once, in sequence order within one release of one stream), and
 * every stream's mark, pending count and liveness, and the vector,
 * host-range and non-blocking queries. Some keeps re-enter the ledger from
 * the release callback (queries, ldg_release, ldg_enqueue on a side stream);
 * drains re-enter too.
 *
 * Injected ENOMEM: which call allocates is the library's business, so when a
 * call returns LDG_ENOMEM while a failure was injected (and the header lets
 * that call fail so), the driver checks that nothing changed instead.
 *
 * Where the header is silent, the driver accepts either reading or stays
 * away:
 *   - two errors that both apply (say EINVAL and EDESTROYED): either code;
 *   - a range ending exactly at the top (addr + bytes == 2^64): OK or EINVAL
 *     at enqueue (the model follows the answer); never used as a probe;
 *   - ldg_settle_vector drains the holders found when the call starts, each
 *     once, whatever releasing one of them does to the others;
 *   - a keep running during ldg_stream_destroy(s) may see s live or not;
 *   - keeps never release_all/destroy the side stream they enqueue on, and
 *     the driver never drops its last reference to a live stream that a wait
 *     ever named (waits hold references the ledger may drop later, so the
 *     destroy would come at a moment the model cannot know).
 *
 * Single-threaded by design (the concurrency tests live elsewhere); it is not
 * a benchmark. Deterministic from its draws (the seed, or the fuzz input).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger/ledger.h"
#include "ledger/ledger_testing.h"
#include "tests/differential/driver.h"
#include "tests/differential/model.h"

/* Small spaces so that ids and ranges collide often. */
enum {
  VSPACE = 12,        /* vector ids 0..11 are used; 12.. are probed only */
  N_DEV = 3,          /* streams live on devices 0..2; 3 is probed empty */
  MAX_LIVE = 8,       /* live streams besides the side stream (default) */
  MAX_SNAPS = 4,      /* open device snapshots */
  MAX_REFS = 4,       /* references the test holds on one stream */
  LOW_SPAN = 48,      /* host ranges start in [LOW_BASE, LOW_BASE+48) */
  HIGH_SPAN = 40,     /* or in the top HIGH_SPAN bytes of the address space */
  RING = 24,          /* calls remembered for a failure report */
  FILL_MAX = 256,     /* op_fill adds nothing past this much pending work */
  CALL_LEN = 640,
};
#define LOW_BASE ((uintptr_t)0x10000)
#define NONE (-3) /* pick() found no stream */

/* Host ranges that query keeps probe from inside a release. */
#define N_QPROBES 8
static const ldg_range QPROBES[N_QPROBES] = {
    {LOW_BASE + 0, 6},  {LOW_BASE + 8, 6},  {LOW_BASE + 16, 6},
    {LOW_BASE + 24, 6}, {LOW_BASE + 32, 6}, {LOW_BASE + 40, 9},
    {LOW_BASE + 20, 1}, {UINTPTR_MAX - 20, 10},
};

enum { K_PLAIN, K_NULL, K_QUERY, K_REL, K_ENQ };
enum { KS_ENQUEUING, KS_OWNED, KS_REJECTED };

/* One keep handed to ldg_enqueue; ctx points here. */
typedef struct tkeep {
  int id;
  int kind;
  int state;
  int stream;  /* model index of the stream it was enqueued on */
  ldg_seq seq; /* its seq there */
  int lib_count;
  bool model_released;
  /* K_QUERY / K_REL: the stream it re-enters (the keep holds a reference) */
  int target;
  ldg_seq upto;
  bool quiesce;
  uint64_t qvec; /* the vector id and probe range it asks about */
  int qprobe;
  /* K_ENQ: what it enqueues on the side stream */
  size_t n_vec;
  uint64_t vec[3];
  size_t n_range;
  ldg_range range[3];
  /* what the callback saw */
  bool acted;
  int r_rc;
  ldg_seq r_mark;
  size_t r_pending;
  int r_live;
  bool r_has_nb;
  bool r_holds_vec, r_holds_range;
  size_t r_nb_holding;
  int child;
  ldg_seq r_seq;
} tkeep;

/* Test-side state of one model stream (same index). */
typedef struct tstream {
  ldg_stream *h;
  uint64_t ord_epoch; /* keep-order check: the epoch and seq of the last */
  ldg_seq ord_seq;    /* keep of this stream that ran */
  int keep_refs; /* of the test's references (mdl refs_test), those that
                    re-entrant keeps hold; the driver owns the rest */
  bool drain_fail;
  int drain_calls;
  bool pre_destroyed;
  size_t pre_pending;
  ldg_seq pre_mark;
} tstream;

static struct {
  drv_config cfg;
  /* run */
  uint64_t seed;
  long step;
  long checks;
  size_t sum_pending, max_pending;
  long steps;
  long n_steps; /* steps made, for the pending average */
  bool fill;     /* a fill phase: mostly enqueues, many on one hot stream */
  int hot;
  uint64_t rng;
  /* handles */
  ldg_ledger *l;
  ldg_ledger *l2;
  ldg_stream *foreign;
  int side;
  uint64_t last_id;
  /* model and its test-side mirrors */
  mdl m;
  tstream *ts;
  size_t cap_ts;
  ldg_marks **snaps;
  size_t cap_snaps;
  tkeep **k;
  size_t n_k, cap_k;
  /* the call in progress */
  int *lfired;
  size_t n_lfired, cap_lfired;
  uint64_t epoch;
  bool in_call;
  bool reentry;
  bool settling;
  bool inject;
  long injected;
  bool pre_has_nb;
  bool pre_hv[VSPACE + 2];
  size_t pre_nb[VSPACE + 2];
  bool pre_hr[N_QPROBES];
  int *defer;
  size_t n_defer, cap_defer;
  char call[CALL_LEN];
  char ring[RING][CALL_LEN];
  long ring_step[RING];
  size_t ring_n;
} G;

/* ---- Utilities ------------------------------------------------------------ */

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (p == NULL) {
    fprintf(stderr, "differential_test: out of memory\n");
    exit(2);
  }
  return p;
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (q == NULL) {
    fprintf(stderr, "differential_test: out of memory\n");
    exit(2);
  }
  return q;
}

#define GROW(arr, n, cap)                                \
  do {                                                   \
    if ((n) >= (cap)) {                                  \
      size_t c_ = (cap) ? 2 * (cap) : 16;                \
      while (c_ <= (n)) c_ *= 2;                         \
      (arr) = xrealloc((arr), c_ * sizeof *(arr));       \
      memset((arr) + (cap), 0, (c_ - (cap)) * sizeof *(arr)); \
      (cap) = c_;                                        \
    }                                                    \
  } while (0)

static uint64_t rnd64(void) {
  uint64_t z = (G.rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A choice of a call or its arguments: uniform enough in [0, n); n > 0.
 * From the configured source (the fuzzer's input) or the PRNG. */
static uint64_t rnd(uint64_t n) {
  if (G.cfg.draw != NULL) return G.cfg.draw(G.cfg.draw_ctx, n);
  return rnd64() % n;
}

/* A choice that only varies the checks: always the PRNG. */
static uint64_t rnd_check(uint64_t n) { return rnd64() % n; }

static bool chance(unsigned percent) { return rnd(100) < percent; }

static const char *rcname(int rc) {
  switch (rc) {
    case LDG_OK: return "LDG_OK";
    case LDG_EINVAL: return "LDG_EINVAL";
    case LDG_ENOMEM: return "LDG_ENOMEM";
    case LDG_EDESTROYED: return "LDG_EDESTROYED";
    case LDG_EDRAIN: return "LDG_EDRAIN";
    case LDG_EBUSY: return "LDG_EBUSY";
    default: return "(unknown code)";
  }
}

static void mask_str(unsigned mask, char *buf, size_t n) {
  buf[0] = 0;
  for (int c = 0; c <= 5; c++) {
    if (!(mask & (1u << c))) continue;
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s", len ? "|" : "", rcname(-c));
  }
}

static void dump_ring(void) {
  size_t n = G.ring_n < RING ? G.ring_n : RING;
  fprintf(stderr, "  last %zu calls:\n", n);
  for (size_t i = G.ring_n - n; i < G.ring_n; i++)
    fprintf(stderr, "    [%ld] %s\n", G.ring_step[i % RING], G.ring[i % RING]);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  if (G.cfg.draw != NULL) /* the draws are not from the seed */
    fprintf(stderr, "%s: FAIL step=%ld\n  call: %s\n  ",
            G.cfg.name ? G.cfg.name : "driver", G.step, G.call);
  else
    fprintf(stderr, "differential_test: FAIL seed=%" PRIu64 " step=%ld\n  call: %s\n  ",
            G.seed, G.step, G.call);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  dump_ring();
  if (G.cfg.on_fail != NULL) G.cfg.on_fail();
  fprintf(stderr,
          "  reproduce: LDG_DIFF_TRACE=1 differential_test %" PRIu64 " %ld 1\n",
          G.seed, G.steps);
  exit(1);
}

/* Starts the description of the call about to be made. */
static void call_desc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void call_desc(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G.call, sizeof G.call, fmt, ap);
  va_end(ap);
}

/* Appends the outcome and files the call into the ring (and the trace). */
static void call_done(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void call_done(const char *fmt, ...) {
  va_list ap;
  size_t len = strlen(G.call);
  va_start(ap, fmt);
  vsnprintf(G.call + len, sizeof G.call - len, fmt, ap);
  va_end(ap);
  size_t i = G.ring_n++ % RING;
  memcpy(G.ring[i], G.call, sizeof G.call);
  G.ring_step[i] = G.step;
  if (G.cfg.trace) fprintf(stderr, "[%ld] %s\n", G.step, G.call);
}

/* A stream argument, for descriptions. Rotating buffers. */
static const char *sd(int s) {
  static char buf[8][48];
  static int next;
  char *b = buf[next++ & 7];
  if (s == MDL_NULL) return "NULL";
  if (s == MDL_FOREIGN) return "foreign";
  if (s < 0 || (size_t)s >= G.m.n_s) return "?";
  snprintf(b, 48, "s%d(id %" PRIu64 "%s%s)", s, G.m.s[s].id,
           G.m.s[s].nonblocking ? ",nb" : "",
           G.m.s[s].destroyed ? ",destroyed" : "");
  return b;
}

static ldg_stream *hd(int s) {
  if (s == MDL_NULL) return NULL;
  if (s == MDL_FOREIGN) return G.foreign;
  return G.ts[s].h;
}

static void sync_mirrors(void) {
  GROW(G.ts, G.m.n_s, G.cap_ts);
  GROW(G.snaps, G.m.n_snap, G.cap_snaps);
}

/* ---- Callbacks ------------------------------------------------------------ */

static void defer_unref(int s) {
  GROW(G.defer, G.n_defer, G.cap_defer);
  G.defer[G.n_defer++] = s;
}

static tkeep *new_keep(int kind, int stream) {
  GROW(G.k, G.n_k, G.cap_k);
  tkeep *k = xmalloc(sizeof *k);
  k->id = (int)G.n_k;
  k->kind = kind;
  k->state = KS_ENQUEUING;
  k->stream = stream;
  k->target = -1;
  k->child = -1;
  G.k[G.n_k++] = k;
  return k;
}

static void keep_cb(void *ctx) {
  tkeep *k = ctx;
  k->lib_count++;
  if (k->state == KS_ENQUEUING)
    fail("keep K%d ran inside its own ldg_enqueue (single-threaded: no "
         "release can overtake it)", k->id);
  if (k->state == KS_REJECTED)
    fail("keep K%d ran although its ldg_enqueue failed", k->id);
  if (k->lib_count > 1)
    fail("keep K%d (%s seq %" PRIu64 ") ran %d times", k->id, sd(k->stream),
         k->seq, k->lib_count);
  if (!G.in_call) fail("keep K%d ran outside any ledger call", k->id);
  GROW(G.lfired, G.n_lfired, G.cap_lfired);
  G.lfired[G.n_lfired++] = k->id;

  /* Within one release of one stream keeps run in seq order. A re-entrant
   * call from a keep starts a new epoch (it may release the same stream
   * further, legitimately out of the outer order). */
  tstream *t = &G.ts[k->stream];
  if (t->ord_epoch == G.epoch && k->seq <= t->ord_seq)
    fail("keeps of %s out of sequence order within one release: seq %" PRIu64
         " (K%d) ran after seq %" PRIu64,
         sd(k->stream), k->seq, k->id, t->ord_seq);
  t->ord_epoch = G.epoch;
  t->ord_seq = k->seq;

  if (k->kind == K_QUERY || k->kind == K_REL) defer_unref(k->target);
  if (!G.reentry) return;
  ldg_stream *th = k->target >= 0 ? G.ts[k->target].h : NULL;
  switch (k->kind) {
    case K_QUERY:
      G.epoch++;
      k->r_mark = ldg_mark(th);
      k->r_pending = ldg_pending_count(th);
      k->r_live = ldg_stream_check_live(th);
      k->r_has_nb = ldg_has_nonblocking(G.l);
      k->r_holds_vec = ldg_holds_vector(G.l, k->qvec);
      k->r_holds_range = ldg_holds_host_range(G.l, QPROBES[k->qprobe].addr,
                                              QPROBES[k->qprobe].bytes);
      k->r_nb_holding = ldg_nonblocking_holding(G.l, k->qvec, NULL, 0);
      (void)ldg_ledger_bytes(G.l);
      if (k->quiesce) ldg_quiesce(); /* deadlocks inside an RCU section */
      G.epoch++;
      k->acted = true;
      break;
    case K_REL:
      G.epoch++;
      k->r_rc = ldg_release(th, k->upto);
      G.epoch++;
      k->acted = true;
      break;
    case K_ENQ: {
      G.epoch++;
      tkeep *c = new_keep(K_PLAIN, G.side);
      ldg_keep kp = {keep_cb, c};
      ldg_seq sq = 0;
      int rc = ldg_enqueue(G.ts[G.side].h, kp, k->vec, k->n_vec, k->range,
                           k->n_range, &sq);
      c->state = rc == LDG_OK ? KS_OWNED : KS_REJECTED;
      c->seq = sq;
      k->r_rc = rc;
      k->r_seq = sq;
      k->child = c->id;
      G.epoch++;
      k->acted = true;
      break;
    }
    default:
      break;
  }
}

static int drain_cb(void *ctx) {
  int s = (int)(intptr_t)ctx - 1;
  if (s < 0 || (size_t)s >= G.m.n_s)
    fail("drain called with a ctx that names no stream: %p", ctx);
  if (!G.settling)
    fail("drain of %s called outside ldg_settle_vector", sd(s));
  G.ts[s].drain_calls++;
  /* Re-enter: the mark of a non-blocking stream cannot move during a
   * settle (only the side stream, a blocking one, is enqueued on). */
  ldg_seq mk = ldg_mark(G.ts[s].h);
  if (mk != G.m.s[s].mark)
    fail("ldg_mark(%s) from its drain = %" PRIu64 ", model %" PRIu64, sd(s),
         mk, G.m.s[s].mark);
  if (G.ts[s].drain_calls == 1 && G.m.s[s].id % 8 == 3 && chance(30))
    ldg_quiesce();
  return G.ts[s].drain_fail ? 7 : 0;
}

/* ---- Calls ---------------------------------------------------------------- */

/* Before a top-level call: remember what the checks of re-entrant results
 * compare with; maybe arm an allocation failure. */
static void pre_call(bool may_inject) {
  sync_mirrors();
  for (size_t i = 0; i < G.m.n_s; i++) {
    G.ts[i].pre_destroyed = G.m.s[i].destroyed;
    G.ts[i].pre_pending = mdl_pending(&G.m, (int)i);
    G.ts[i].pre_mark = G.m.s[i].mark;
  }
  G.pre_has_nb = mdl_has_nb(&G.m);
  for (uint64_t v = 0; v < VSPACE + 2; v++) {
    G.pre_hv[v] = mdl_holds_vector(&G.m, v);
    G.pre_nb[v] = mdl_nb_holding(&G.m, v, NULL, 0);
  }
  for (int i = 0; i < N_QPROBES; i++)
    G.pre_hr[i] = mdl_holds_range(&G.m, QPROBES[i].addr, QPROBES[i].bytes);
  mdl_clear_fired(&G.m);
  G.n_lfired = 0;
  G.epoch++;
  G.inject = false;
  G.injected = 0;
  if (may_inject && chance(8)) {
    long n = chance(20) ? 0 : 1 + (long)rnd(3);
    G.injected = ldg__fault_injected();
    if (n == 0)
      ldg__fault_fail_all_allocs(true);
    else
      ldg__fault_fail_alloc_at(n);
    G.inject = true;
    size_t len = strlen(G.call);
    if (n == 0)
      snprintf(G.call + len, sizeof G.call - len, "[fail all allocs] ");
    else
      snprintf(G.call + len, sizeof G.call - len, "[fail alloc #%ld] ", n);
  }
  G.in_call = true;
}

static void post_call(void) {
  G.in_call = false;
  if (G.inject) {
    ldg__fault_fail_all_allocs(false);
    ldg__fault_fail_alloc_at(0);
    G.injected = ldg__fault_injected() - G.injected;
  } else {
    G.injected = 0;
  }
}

/* Judges a status code. Returns true when the call took effect (LDG_OK),
 * false when it changed nothing. may_enomem: the header lets it fail so. */
static bool verdict(int rc, unsigned expect, bool may_enomem) {
  char want[128];
  mask_str(expect, want, sizeof want);
  if (rc > 0 || rc < -5)
    fail("returned %d, not a status code (model expects %s)", rc, want);
  if (rc == LDG_ENOMEM) {
    if (!may_enomem)
      fail("returned LDG_ENOMEM, which the header does not allow here%s",
           G.injected ? " (an allocation failure was injected)" : "");
    if (G.injected == 0)
      fail("returned LDG_ENOMEM although no allocation failure was injected "
           "(model expects %s)", want);
    return false; /* the checks that follow verify nothing changed */
  }
  if (!(expect & MDL_BIT(rc)))
    fail("returned %s, model expects %s", rcname(rc), want);
  return rc == LDG_OK;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

static int cmp_seq_keep(const void *a, const void *b) {
  const tkeep *x = G.k[*(const int *)a], *y = G.k[*(const int *)b];
  return (x->r_seq > y->r_seq) - (x->r_seq < y->r_seq);
}

static void check_all(void);

/* After a call, for the bounds on what a query from inside it may see: an
 * entry pending before and after the call (seq <= the mark before it) was
 * pending throughout; one with a larger seq was enqueued during the call
 * (only by keeps, only on the side stream). */
static bool item_vec(const mdl_item *it, uint64_t v) {
  for (size_t j = 0; j < it->n_vec; j++)
    if (it->vec[j] == v) return true;
  return false;
}

static bool item_range(const mdl_item *it, ldg_range p) {
  for (size_t j = 0; j < it->n_range; j++) {
    ldg_range r = it->range[j];
    if (r.addr <= p.addr + (p.bytes - 1) && p.addr <= r.addr + (r.bytes - 1))
      return true;
  }
  return false;
}

/* which: 0 vec v, 1 probe range p. persisting: count streams (nb_only: the
 * non-blocking ones) with such an entry pending throughout; otherwise with
 * such an entry enqueued during the call. */
static size_t streams_naming(int which, uint64_t v, ldg_range p,
                             bool persisting, bool nb_only) {
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_s; i++) {
    const mdl_stream *st = &G.m.s[i];
    if (st->destroyed || (nb_only && !st->nonblocking)) continue;
    for (size_t k = 0; k < st->n_items; k++) {
      const mdl_item *it = &st->items[k];
      if (it->is_wait || (it->seq <= G.ts[i].pre_mark) != persisting) continue;
      if (which == 0 ? item_vec(it, v) : item_range(it, p)) {
        n++;
        break;
      }
    }
  }
  return n;
}

/* After a top-level call and its model update: the keeps that ran must be
 * the ones the model released; then the re-entrant keeps' results. */
static void finish_call(void) {
  size_t nl = G.n_lfired, nm = G.m.n_fired;
  int *a = xmalloc((nl + 1) * sizeof *a), *b = xmalloc((nm + 1) * sizeof *b);
  if (nl) memcpy(a, G.lfired, nl * sizeof *a);
  if (nm) memcpy(b, G.m.fired, nm * sizeof *b);
  qsort(a, nl, sizeof *a, cmp_int);
  qsort(b, nm, sizeof *b, cmp_int);
  size_t i = 0, j = 0;
  while (i < nl || j < nm) {
    if (j == nm || (i < nl && a[i] < b[j])) {
      tkeep *k = G.k[a[i]];
      fail("keep K%d (%s seq %" PRIu64 ") ran; the model holds it "
           "(%zu keeps ran, model %zu)",
           k->id, sd(k->stream), k->seq, nl, nm);
    }
    if (i == nl || b[j] < a[i]) {
      tkeep *k = G.k[b[j]];
      fail("keep K%d (%s seq %" PRIu64 ") did not run; the model released it "
           "(%zu keeps ran, model %zu)",
           k->id, sd(k->stream), k->seq, nl, nm);
    }
    i++;
    j++;
  }
  for (j = 0; j < nm; j++) {
    if (G.k[b[j]]->model_released) {
      fprintf(stderr, "model released K%d twice (internal error)\n", b[j]);
      abort();
    }
    G.k[b[j]]->model_released = true;
  }
  free(a);
  free(b);

  /* The side-stream enqueues made from keeps: apply them in seq order
   * (first: the bounds on re-entrant queries below count them). */
  int *kids = xmalloc((nl + 1) * sizeof *kids);
  size_t nk = 0;
  for (i = 0; i < nl; i++) {
    tkeep *k = G.k[G.lfired[i]];
    if (!k->acted || k->kind != K_ENQ) continue;
    if (k->r_rc == LDG_OK) {
      kids[nk++] = k->id;
    } else if (!(k->r_rc == LDG_ENOMEM && G.inject && G.injected > 0)) {
      fail("K%d: ldg_enqueue(%s) from a keep returned %s", k->id, sd(G.side),
           rcname(k->r_rc));
    }
  }
  qsort(kids, nk, sizeof *kids, cmp_seq_keep);
  for (i = 0; i < nk; i++) {
    tkeep *k = G.k[kids[i]];
    tkeep *c = G.k[k->child];
    ldg_seq want = mdl_enqueue(&G.m, G.side, c->id, -1, 0, k->vec, k->n_vec,
                               k->range, k->n_range);
    if (k->r_seq != want)
      fail("K%d: ldg_enqueue(%s) from a keep got seq %" PRIu64
           ", model %" PRIu64 " (the %zu-th of %zu such enqueues)",
           k->id, sd(G.side), k->r_seq, want, i + 1, nk);
    c->stream = G.side;
  }
  free(kids);

  /* Re-entrant results. Marks of streams other than the side stream cannot
   * move during a call; pending counts only fall; liveness only ends. */
  for (i = 0; i < nl; i++) {
    tkeep *k = G.k[G.lfired[i]];
    if (!k->acted) continue;
    int t = k->target;
    switch (k->kind) {
      case K_QUERY: {
        size_t post = mdl_pending(&G.m, t);
        int pre_live = G.ts[t].pre_destroyed ? LDG_EDESTROYED : LDG_OK;
        int post_live = mdl_check_live(&G.m, t);
        if (k->r_mark != G.m.s[t].mark)
          fail("K%d: ldg_mark(%s) from a keep = %" PRIu64 ", model %" PRIu64,
               k->id, sd(t), k->r_mark, G.m.s[t].mark);
        if (k->r_pending < post || k->r_pending > G.ts[t].pre_pending)
          fail("K%d: ldg_pending_count(%s) from a keep = %zu, model between "
               "%zu and %zu", k->id, sd(t), k->r_pending, post,
               G.ts[t].pre_pending);
        if (k->r_live != pre_live && k->r_live != post_live)
          fail("K%d: ldg_stream_check_live(%s) from a keep = %s", k->id, sd(t),
               rcname(k->r_live));
        if (k->r_has_nb != G.pre_has_nb && k->r_has_nb != mdl_has_nb(&G.m))
          fail("K%d: ldg_has_nonblocking from a keep = %d", k->id,
               k->r_has_nb);
        ldg_range none = {0, 1}, pr = QPROBES[k->qprobe];
        uint64_t v = k->qvec;
        bool must = streams_naming(0, v, none, true, false) > 0;
        bool may = G.pre_hv[v] || streams_naming(0, v, none, false, false);
        if ((must && !k->r_holds_vec) || (!may && k->r_holds_vec))
          fail("K%d: ldg_holds_vector(%" PRIu64 ") from a keep = %d; an entry "
               "naming it was pending %s the call",
               k->id, v, k->r_holds_vec,
               must ? "throughout" : "at no time during");
        must = streams_naming(1, 0, pr, true, false) > 0;
        may = G.pre_hr[k->qprobe] || streams_naming(1, 0, pr, false, false);
        if ((must && !k->r_holds_range) || (!may && k->r_holds_range))
          fail("K%d: ldg_holds_host_range(%#" PRIxPTR ", %zu) from a keep = "
               "%d; an entry overlapping it was pending %s the call",
               k->id, pr.addr, pr.bytes, k->r_holds_range,
               must ? "throughout" : "at no time during");
        size_t lo = streams_naming(0, v, none, true, true);
        if (k->r_nb_holding < lo || k->r_nb_holding > G.pre_nb[v])
          fail("K%d: ldg_nonblocking_holding(%" PRIu64 ") from a keep = %zu, "
               "model between %zu and %zu",
               k->id, v, k->r_nb_holding, lo, G.pre_nb[v]);
        break;
      }
      case K_REL: {
        bool ok = !G.ts[t].pre_destroyed, gone = G.m.s[t].destroyed;
        bool fine = k->r_rc == LDG_EDESTROYED ? gone
                                              : (k->r_rc == LDG_OK && ok);
        if (!fine)
          fail("K%d: ldg_release(%s, %" PRIu64 ") from a keep returned %s",
               k->id, sd(t), k->upto, rcname(k->r_rc));
        break;
      }
      default:
        break;
    }
  }
  sync_mirrors();
  check_all();
}

/* May the test drop one reference to s? Not its last on a live stream that
 * a wait ever named: waits hold references the ledger may drop late, so the
 * destroy that the last reference triggers would come at an unknown time. */
static bool may_unref(int s) {
  const mdl_stream *st = &G.m.s[s];
  if (s == G.side || st->refs_test - G.ts[s].keep_refs <= 0) return false;
  return st->refs_test > 1 || st->destroyed || !st->ever_wait_target;
}

static void do_unref(int s) {
  call_desc("ldg_stream_unref(%s) [refs %d+%d]", sd(s), G.m.s[s].refs_test,
            G.m.s[s].refs_snap);
  pre_call(false);
  ldg_stream_unref(G.ts[s].h);
  post_call();
  mdl_unref(&G.m, s);
  call_done(" -> %s", G.m.s[s].destroyed ? "destroyed" : "live");
  finish_call();
}

/* References held by re-entrant keeps, dropped after the call that ran
 * them; one the policy keeps becomes the driver's. */
static void drain_deferred(void) {
  while (G.n_defer > 0) {
    int s = G.defer[--G.n_defer];
    G.ts[s].keep_refs--;
    if (may_unref(s)) do_unref(s);
  }
}

/* ---- Comparing ------------------------------------------------------------ */

static void check_stream(int s) {
  ldg_stream *h = G.ts[s].h;
  const mdl_stream *st = &G.m.s[s];
  G.checks += 6;
  if (ldg_stream_id(h) != st->id)
    fail("ldg_stream_id(%s) = %" PRIu64, sd(s), ldg_stream_id(h));
  if (ldg_stream_device(h) != st->device)
    fail("ldg_stream_device(%s) = %d", sd(s), ldg_stream_device(h));
  if (ldg_stream_is_nonblocking(h) != st->nonblocking)
    fail("ldg_stream_is_nonblocking(%s) = %d", sd(s),
         ldg_stream_is_nonblocking(h));
  if (ldg_mark(h) != st->mark)
    fail("ldg_mark(%s) = %" PRIu64 ", model %" PRIu64, sd(s), ldg_mark(h),
         st->mark);
  size_t p = ldg_pending_count(h), mp = mdl_pending(&G.m, s);
  if (p != mp) fail("ldg_pending_count(%s) = %zu, model %zu", sd(s), p, mp);
  int live = ldg_stream_check_live(h);
  if (live != mdl_check_live(&G.m, s))
    fail("ldg_stream_check_live(%s) = %s, model %s", sd(s), rcname(live),
         rcname(mdl_check_live(&G.m, s)));
}

static int stream_by_id(uint64_t id) {
  for (size_t i = 0; i < G.m.n_s; i++)
    if (G.m.s[i].id == id) return (int)i;
  return -1;
}

static void check_vec(uint64_t v) {
  G.checks += 2;
  bool hv = ldg_holds_vector(G.l, v);
  if (hv != mdl_holds_vector(&G.m, v))
    fail("ldg_holds_vector(%" PRIu64 ") = %d, model %d", v, hv, !hv);

  int want[64];
  size_t mn = mdl_nb_holding(&G.m, v, want, 64);
  size_t cap = (size_t)rnd_check(mn + 2);
  if (cap > 64) cap = 64;
  ldg_stream *out[64];
  for (size_t i = 0; i < 64; i++) out[i] = NULL;
  size_t n = ldg_nonblocking_holding(G.l, v, cap ? out : NULL, cap);
  size_t got = n < cap ? n : cap;
  int seen[64];
  for (size_t i = 0; i < got; i++) {
    if (out[i] == NULL)
      fail("ldg_nonblocking_holding(%" PRIu64 ", cap %zu) wrote NULL at %zu",
           v, cap, i);
    seen[i] = stream_by_id(ldg_stream_id(out[i]));
  }
  for (size_t i = 0; i < got; i++) ldg_stream_unref(out[i]);
  if (n != mn)
    fail("ldg_nonblocking_holding(%" PRIu64 ") = %zu, model %zu", v, n, mn);
  for (size_t i = 0; i < got; i++) {
    bool ok = false;
    for (size_t j = 0; j < mn; j++) ok |= want[j] == seen[i];
    for (size_t j = 0; j < i; j++)
      if (seen[j] == seen[i])
        fail("ldg_nonblocking_holding(%" PRIu64 ") returned %s twice", v,
             sd(seen[i]));
    if (!ok)
      fail("ldg_nonblocking_holding(%" PRIu64 ") returned %s, which the "
           "model says holds no such work", v,
           seen[i] >= 0 ? sd(seen[i]) : "an unknown stream");
  }
}

static void check_range(uintptr_t a, size_t n) {
  /* A probe ending exactly at (or wrapping past) the top of the address
   * space is not asked about: the header does not say what it means. */
  if (n > 0 && mdl_range_kind((ldg_range){a, n}) != 0) return;
  G.checks++;
  bool got = ldg_holds_host_range(G.l, a, n);
  if (got != mdl_holds_range(&G.m, a, n))
    fail("ldg_holds_host_range(%#" PRIxPTR ", %zu) = %d, model %d", a, n, got,
         !got);
}

static void check_all(void) {
  for (size_t i = 0; i < G.m.n_s; i++)
    if (G.m.s[i].refs_test > 0) check_stream((int)i);
  for (uint64_t v = 0; v < VSPACE + 2; v++) check_vec(v);
  check_vec(1000);
  check_vec(UINT64_MAX);
  G.checks++;
  if (ldg_has_nonblocking(G.l) != mdl_has_nb(&G.m))
    fail("ldg_has_nonblocking = %d, model %d", !mdl_has_nb(&G.m),
         mdl_has_nb(&G.m));

  /* Host ranges: every byte of the low window and the top of the address
   * space (so adjacency is covered), a few wider and zero-length probes,
   * and the neighbours of some pending ranges. */
  for (uintptr_t a = LOW_BASE - 2; a < LOW_BASE + LOW_SPAN + 10; a++)
    check_range(a, 1);
  for (uintptr_t a = LOW_BASE - 8; a < LOW_BASE + LOW_SPAN + 10; a += 7) {
    check_range(a, 3);
    check_range(a, 0);
  }
  check_range(0, 1);
  check_range(LOW_BASE, 0);
  check_range(0, LOW_BASE + LOW_SPAN + 16);
  for (uintptr_t a = UINTPTR_MAX - HIGH_SPAN - 2; a < UINTPTR_MAX; a++)
    check_range(a, 1);
  check_range(UINTPTR_MAX - HIGH_SPAN - 8, HIGH_SPAN);
  check_range(UINTPTR_MAX, 0);
  for (int tries = 0; tries < 3; tries++) {
    int s = (int)rnd_check(G.m.n_s);
    const mdl_stream *st = &G.m.s[s];
    if (st->n_items == 0) continue;
    const mdl_item *it = &st->items[rnd_check(st->n_items)];
    for (size_t j = 0; j < it->n_range; j++) {
      ldg_range r = it->range[j];
      uintptr_t last = r.addr + (r.bytes - 1);
      if (r.addr > 0) check_range(r.addr - 1, 1); /* adjacent before */
      if (r.addr > 4) check_range(r.addr - 4, 4); /* adjacent before */
      if (last < UINTPTR_MAX) check_range(last + 1, 1); /* adjacent after */
      check_range(last, 1);
      check_range(r.addr, 0);
      check_range(last, 0);
      if (r.bytes > 2) check_range(r.addr + 1, r.bytes - 2);
    }
  }
}

/* ---- Random arguments ----------------------------------------------------- */

/* A stream the test holds a reference to, or NONE. */
static int pick(bool allow_side, bool allow_destroyed) {
  int cand[512];
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_s && n < 512; i++) {
    const mdl_stream *st = &G.m.s[i];
    if (st->refs_test - G.ts[i].keep_refs <= 0) continue;
    if (!allow_side && (int)i == G.side) continue;
    if (!allow_destroyed && st->destroyed) continue;
    cand[n++] = (int)i;
  }
  return n ? cand[rnd(n)] : NONE;
}

static size_t count_live(void) {
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_s; i++)
    if (!G.m.s[i].destroyed && (int)i != G.side) n++;
  return n;
}

static size_t count_held_destroyed(void) {
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_s; i++)
    if (G.m.s[i].destroyed && G.m.s[i].refs_test > 0) n++;
  return n;
}

static ldg_range valid_range(void) {
  ldg_range r;
  if (chance(88)) {
    r.addr = LOW_BASE + (uintptr_t)rnd(LOW_SPAN);
    r.bytes = 1 + (size_t)rnd(8);
  } else {
    /* near the top, last byte at most UINTPTR_MAX - 1 */
    r.addr = UINTPTR_MAX - 1 - (uintptr_t)rnd(HIGH_SPAN);
    size_t room = UINTPTR_MAX - 1 - r.addr; /* bytes - 1 <= room */
    r.bytes = 1 + (size_t)rnd((room < 8 ? room : 8) + 1);
  }
  return r;
}

static ldg_seq pick_upto(ldg_seq mark) {
  unsigned r = (unsigned)rnd(100);
  if (r < 60) return rnd(mark + 1);
  if (r < 85) return mark;
  if (r < 95) return mark + 1 + rnd(3);
  return 0;
}

static const char *kind_name(int kind) {
  switch (kind) {
    case K_PLAIN: return "plain";
    case K_NULL: return "null-release";
    case K_QUERY: return "query";
    case K_REL: return "release";
    case K_ENQ: return "enqueue";
    default: return "?";
  }
}

/* ---- Operations ----------------------------------------------------------- */

static void op_create(void) {
  int variant = chance(10) ? 1 + (int)rnd(5) : 0;
  size_t max_live = G.cfg.max_live ? G.cfg.max_live : MAX_LIVE;
  if (variant == 0 && count_live() >= max_live) variant = 1 + (int)rnd(5);
  int device = (int)rnd(N_DEV);
  unsigned flags = chance(45) ? LDG_STREAM_NONBLOCKING : 0;
  bool with_drain = flags ? true : chance(50);
  /* Single-threaded, so every stream keeps the single-issuer promise: the
   * mode must not change a single answer. */
  if (chance(30)) flags |= LDG_STREAM_SINGLE_ISSUER;
  /* Never owned (and, with single-issuer, refused): the mode must not
   * change a single answer either. */
  if (chance(15)) flags |= LDG_STREAM_SHARED;
  bool l_null = variant == 1, out_null = variant == 2;
  if (variant == 3) device = -1 - (int)rnd(3);
  if (variant == 4) flags |= 4u << rnd(4);
  if (variant == 5) {
    flags = LDG_STREAM_NONBLOCKING;
    with_drain = false;
  }
  int idx = (int)G.m.n_s; /* the index it gets if created */
  call_desc("ldg_stream_create(%s, dev %d, flags %#x, drain %s, out %s) ",
            l_null ? "NULL" : "l", device, flags, with_drain ? "yes" : "NULL",
            out_null ? "NULL" : "&s");
  unsigned expect =
      mdl_expect_stream_create(l_null, out_null, device, flags, with_drain);
  ldg_stream *s = NULL;
  pre_call(true);
  int rc = ldg_stream_create(l_null ? NULL : G.l, device, flags,
                             with_drain ? drain_cb : NULL,
                             (void *)(intptr_t)(idx + 1),
                             out_null ? NULL : &s);
  post_call();
  bool ok = verdict(rc, expect, true);
  if (ok) {
    if (s == NULL) fail("returned LDG_OK and a NULL stream");
    uint64_t id = ldg_stream_id(s);
    if (id <= G.last_id || id == 0)
      fail("stream id %" PRIu64 " after %" PRIu64 ": ids start at 1 and are "
           "never reused", id, G.last_id);
    G.last_id = id;
    idx = mdl_stream_add(&G.m, id, device,
                         (flags & LDG_STREAM_NONBLOCKING) != 0);
    sync_mirrors();
    G.ts[idx].h = s;
  }
  call_done("-> %s%s%s", rcname(rc), ok ? " " : "", ok ? sd(idx) : "");
  finish_call();
}

static void op_destroy(void) {
  int s = chance(5) ? MDL_NULL : pick(false, true);
  if (s == NONE) return;
  call_desc("ldg_stream_destroy(%s) ", sd(s));
  unsigned expect = mdl_expect_destroy(&G.m, s);
  pre_call(true);
  int rc = ldg_stream_destroy(hd(s));
  post_call();
  if (verdict(rc, expect, false)) mdl_destroy(&G.m, s);
  call_done("-> %s", rcname(rc));
  finish_call();
}

static void op_ref_unref(bool destroyed_only) {
  if (!destroyed_only && chance(25)) {
    int s = pick(true, true);
    if (s < 0 || G.m.s[s].refs_test >= MAX_REFS) return;
    call_desc("ldg_stream_ref(%s)", sd(s));
    pre_call(false);
    ldg_stream_ref(G.ts[s].h);
    post_call();
    mdl_ref(&G.m, s);
    call_done(" ");
    finish_call();
    return;
  }
  int cand[512];
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_s && n < 512; i++)
    if (may_unref((int)i) && (!destroyed_only || G.m.s[i].destroyed))
      cand[n++] = (int)i;
  if (n == 0) return;
  do_unref(cand[rnd(n)]);
}

static void op_enqueue(void) {
  int s = chance(4) ? MDL_NULL : pick(true, true);
  if (G.fill && chance(60) && G.hot >= 0 && G.m.s[G.hot].refs_test > 0 &&
      !G.m.s[G.hot].destroyed)
    s = G.hot;
  if (s == NONE) s = MDL_NULL;

  /* the keep */
  unsigned kr = (unsigned)rnd(100);
  int kind = kr < 62 ? K_PLAIN : kr < 70 ? K_NULL : kr < 78 ? K_QUERY
           : kr < 89 ? K_REL : K_ENQ;
  tkeep *k = NULL;
  int act = -1;
  ldg_seq act_upto = 0;
  if (kind == K_QUERY || kind == K_REL) {
    int t = pick(kind == K_REL, true);
    if (t < 0 || G.m.s[t].refs_test >= MAX_REFS + 4) {
      kind = K_PLAIN;
    } else {
      k = new_keep(kind, s);
      k->target = t;
      k->quiesce = chance(5); /* ~10 ms each (rcu_barrier) */
      k->qvec = rnd(VSPACE + 2);
      k->qprobe = (int)rnd(N_QPROBES);
      ldg_stream_ref(G.ts[t].h);
      mdl_ref(&G.m, t);
      G.ts[t].keep_refs++;
      if (kind == K_REL) {
        k->upto = rnd(G.m.s[t].mark + 1);
        act = t;
        act_upto = k->upto;
      }
    }
  }
  if (kind == K_ENQ) {
    k = new_keep(kind, s);
    k->n_vec = (size_t)rnd(3);
    for (size_t i = 0; i < k->n_vec; i++) k->vec[i] = rnd(VSPACE);
    k->n_range = (size_t)rnd(3);
    for (size_t i = 0; i < k->n_range; i++) k->range[i] = valid_range();
  }
  if (kind == K_PLAIN) k = new_keep(kind, s);
  ldg_keep keep = {NULL, &G};
  if (k != NULL) keep = (ldg_keep){keep_cb, k};

  /* the operands */
  uint64_t vec[MDL_MAX_VEC];
  ldg_range rg[MDL_MAX_RANGE];
  size_t nv = (size_t)rnd(4), nr = (size_t)rnd(3);
  if (chance(3)) nv = MDL_MAX_VEC;
  for (size_t i = 0; i < MDL_MAX_VEC; i++) vec[i] = rnd(VSPACE);
  for (size_t i = 0; i < MDL_MAX_RANGE; i++) rg[i] = valid_range();
  const uint64_t *vp = vec;
  const ldg_range *rp = rg;
  if (nv == 0 && chance(50)) vp = NULL;
  if (nr == 0 && chance(50)) rp = NULL;
  if (chance(7)) {
    switch (rnd(6)) {
      case 0: nv = 1 + (size_t)rnd(3); vp = NULL; break;
      case 1: nr = 1 + (size_t)rnd(2); rp = NULL; break;
      case 2: nr = 1 + (size_t)rnd(2); rp = rg; rg[rnd(nr)].bytes = 0; break;
      case 3: /* wraps: its last byte would be past UINTPTR_MAX */
        nr = 1 + (size_t)rnd(2);
        rp = rg;
        rg[0].addr = UINTPTR_MAX - (uintptr_t)rnd(16);
        rg[0].bytes = (UINTPTR_MAX - rg[0].addr) + 2 + (size_t)rnd(100);
        break;
      case 4:
        nr = 1;
        rp = rg;
        rg[0].addr = LOW_BASE + (uintptr_t)rnd(LOW_SPAN);
        rg[0].bytes = SIZE_MAX - (size_t)rnd(3);
        break;
      default: /* ends exactly at the top: header silent, either answer */
        nr = 1 + (size_t)rnd(2);
        rp = rg;
        rg[nr - 1].addr = UINTPTR_MAX - (uintptr_t)rnd(16);
        rg[nr - 1].bytes = (UINTPTR_MAX - rg[nr - 1].addr) + 1;
        break;
    }
  }
  bool seq_null = chance(10);

  char ops[256];
  int len = snprintf(ops, sizeof ops, "vec=%s{", vp ? "" : "NULL");
  for (size_t i = 0; vp && i < nv && len < 200; i++)
    len += snprintf(ops + len, sizeof ops - (size_t)len, "%s%" PRIu64,
                    i ? "," : "", vec[i]);
  len += snprintf(ops + len, sizeof ops - (size_t)len, "}/%zu ranges=%s{", nv,
                  rp ? "" : "NULL");
  for (size_t i = 0; rp && i < nr && len < 200; i++)
    len += snprintf(ops + len, sizeof ops - (size_t)len,
                    "%s[%#" PRIxPTR ",+%zu)", i ? "," : "", rg[i].addr,
                    rg[i].bytes);
  snprintf(ops + len, sizeof ops - (size_t)len, "}/%zu", nr);
  char kd[96];
  if (k == NULL)
    snprintf(kd, sizeof kd, "{NULL release}");
  else if (kind == K_QUERY || kind == K_REL)
    snprintf(kd, sizeof kd, "K%d %s(%s%s%" PRIu64 ")", k->id, kind_name(kind),
             sd(k->target), kind == K_REL ? " upto " : "",
             kind == K_REL ? k->upto : (ldg_seq)0);
  else
    snprintf(kd, sizeof kd, "K%d %s", k->id, kind_name(kind));
  call_desc("ldg_enqueue(%s, %s, %s, %s) ", sd(s), kd, ops,
            seq_null ? "NULL" : "&seq");

  unsigned expect = mdl_expect_enqueue(&G.m, s, vp, nv, rp, nr);
  ldg_seq seq = 0;
  pre_call(true);
  int rc = ldg_enqueue(hd(s), keep, vp, nv, rp, nr, seq_null ? NULL : &seq);
  post_call();
  bool ok = verdict(rc, expect, true);
  if (k != NULL) k->state = ok ? KS_OWNED : KS_REJECTED;
  if (ok) {
    ldg_seq want = mdl_enqueue(&G.m, s, k ? k->id : -1, act, act_upto, vp, nv,
                               rp, nr);
    if (!seq_null && seq != want)
      fail("seq_out = %" PRIu64 ", model %" PRIu64, seq, want);
    if (k != NULL) {
      k->stream = s;
      k->seq = want;
    }
  } else if (k != NULL && (kind == K_QUERY || kind == K_REL)) {
    defer_unref(k->target); /* the keep will never drop it */
  }
  /* The ledger copied the operands: scribble over ours. */
  memset(vec, 0xa5, sizeof vec);
  memset(rg, 0x5a, sizeof rg);
  call_done("-> %s seq %" PRIu64, rcname(rc), ok ? G.m.s[s].mark : 0);
  finish_call();
}

static void op_add_wait(void) {
  int b = chance(3) ? MDL_NULL : chance(3) ? MDL_FOREIGN : pick(true, true);
  int a = chance(3) ? MDL_NULL
        : (b != MDL_FOREIGN && chance(3)) ? MDL_FOREIGN : pick(true, true);
  if (b == NONE || a == NONE) return;
  ldg_seq mark_a = a >= 0 ? G.m.s[a].mark : 0;
  ldg_seq upto = pick_upto(mark_a);
  bool seq_null = chance(10);
  call_desc("ldg_add_wait(%s, %s, %" PRIu64 ", %s) ", sd(b), sd(a), upto,
            seq_null ? "NULL" : "&seq");
  unsigned expect = mdl_expect_add_wait(&G.m, b, a, upto);
  ldg_seq seq = 0;
  pre_call(true);
  int rc = ldg_add_wait(hd(b), hd(a), upto, seq_null ? NULL : &seq);
  post_call();
  bool ok = verdict(rc, expect, true);
  if (ok) {
    ldg_seq want = mdl_add_wait(&G.m, b, a, upto);
    if (!seq_null && seq != want)
      fail("seq_out = %" PRIu64 ", model %" PRIu64, seq, want);
  }
  call_done("-> %s", rcname(rc));
  finish_call();
}

static void op_release(bool all) {
  int s = chance(4) ? MDL_NULL : pick(!all, true);
  if (s == NONE) return;
  ldg_seq upto = s >= 0 ? pick_upto(G.m.s[s].mark) : rnd(4);
  unsigned expect;
  if (all) {
    call_desc("ldg_release_all(%s) ", sd(s));
    expect = mdl_expect_release_all(&G.m, s);
  } else {
    call_desc("ldg_release(%s, %" PRIu64 ") ", sd(s), upto);
    expect = mdl_expect_release(&G.m, s, upto);
  }
  pre_call(true);
  int rc = all ? ldg_release_all(hd(s)) : ldg_release(hd(s), upto);
  post_call();
  if (verdict(rc, expect, false)) {
    if (all)
      mdl_release_all(&G.m, s);
    else
      mdl_release(&G.m, s, upto);
  }
  call_done("-> %s (%zu keeps)", rcname(rc), G.n_lfired);
  finish_call();
}

static size_t open_snaps(int *out) {
  size_t n = 0;
  for (size_t i = 0; i < G.m.n_snap; i++)
    if (G.m.snap[i].open) out[n++] = (int)i;
  return n;
}

static void op_device_marks(void) {
  int open[64];
  if (open_snaps(open) >= MAX_SNAPS) return;
  int device = chance(8) ? -1 - (int)rnd(2) : (int)rnd(N_DEV + 1);
  bool l_null = chance(3), out_null = chance(3);
  call_desc("ldg_device_marks(%s, dev %d, %s) ", l_null ? "NULL" : "l", device,
            out_null ? "NULL" : "&m");
  unsigned expect = mdl_expect_device_marks(l_null, out_null, device);
  ldg_marks *mk = NULL;
  pre_call(true);
  int rc = ldg_device_marks(l_null ? NULL : G.l, device, out_null ? NULL : &mk);
  post_call();
  int snap = -1;
  if (verdict(rc, expect, true)) {
    if (mk == NULL) fail("returned LDG_OK and a NULL snapshot");
    snap = mdl_device_marks(&G.m, device);
    sync_mirrors();
    G.snaps[snap] = mk;
    size_t n = ldg_marks_count(mk);
    if (n != G.m.snap[snap].n)
      fail("ldg_marks_count = %zu, model %zu", n, G.m.snap[snap].n);
  }
  call_done("-> %s", rcname(rc));
  if (snap >= 0) {
    size_t len = strlen(G.call);
    snprintf(G.call + len, sizeof G.call - len, " m%d", snap);
  }
  finish_call();
}

static void op_marks_end(bool release) {
  int open[64];
  size_t n = open_snaps(open);
  if (n == 0 && chance(80)) return;
  int snap = (n == 0 || chance(5)) ? -1 : open[rnd(n)];
  if (release) {
    char nm[16] = "NULL";
    if (snap >= 0) snprintf(nm, sizeof nm, "m%d", snap);
    call_desc("ldg_release_marks(%s) ", nm);
    unsigned expect = snap < 0 ? MDL_BIT(LDG_EINVAL) : MDL_BIT(LDG_OK);
    pre_call(true);
    int rc = ldg_release_marks(snap < 0 ? NULL : G.snaps[snap]);
    post_call();
    if (verdict(rc, expect, false)) mdl_release_marks(&G.m, snap);
    call_done("-> %s (%zu keeps)", rcname(rc), G.n_lfired);
  } else {
    char nm[16] = "NULL";
    if (snap >= 0) snprintf(nm, sizeof nm, "m%d", snap);
    call_desc("ldg_marks_discard(%s) ", nm);
    pre_call(true);
    ldg_marks_discard(snap < 0 ? NULL : G.snaps[snap]);
    post_call();
    if (snap >= 0) mdl_marks_discard(&G.m, snap);
    call_done("(%zu keeps)", G.n_lfired);
  }
  finish_call();
}

/* A vector id some pending entry of a live non-blocking stream names, or a
 * random one. */
static uint64_t held_nb_vec(void) {
  for (int tries = 0; tries < 8; tries++) {
    int s = (int)rnd(G.m.n_s);
    const mdl_stream *st = &G.m.s[s];
    if (!st->nonblocking || st->destroyed || st->n_items == 0) continue;
    const mdl_item *it = &st->items[rnd(st->n_items)];
    if (it->n_vec) return it->vec[rnd(it->n_vec)];
  }
  return rnd(VSPACE + 2);
}

static void op_settle(void) {
  uint64_t v = chance(75) ? held_nb_vec() : rnd(VSPACE + 2);
  bool l_null = chance(3);
  sync_mirrors();
  bool *fails = xmalloc((G.m.n_s + 1) * sizeof *fails);
  char fl[128] = "";
  for (size_t i = 0; i < G.m.n_s; i++) {
    G.ts[i].drain_calls = 0;
    G.ts[i].drain_fail = fails[i] = chance(25);
    if (fails[i] && G.m.s[i].nonblocking && !G.m.s[i].destroyed &&
        strlen(fl) < 100)
      snprintf(fl + strlen(fl), sizeof fl - strlen(fl), " s%zu", i);
  }
  int want_holders[512];
  size_t nh = mdl_nb_holding(&G.m, v, want_holders, 512);
  unsigned expect = MDL_BIT(LDG_OK);
  if (l_null) {
    expect = MDL_BIT(LDG_EINVAL);
    nh = 0;
  }
  for (size_t i = 0; i < nh; i++)
    if (fails[want_holders[i]]) expect = MDL_BIT(LDG_EDRAIN);
  call_desc("ldg_settle_vector(%s, %" PRIu64 ") [failing drains:%s] ",
            l_null ? "NULL" : "l", v, fl);
  pre_call(true);
  G.settling = true;
  int rc = ldg_settle_vector(l_null ? NULL : G.l, v);
  G.settling = false;
  post_call();
  bool nothing = !verdict(rc, expect, true) && rc != LDG_EDRAIN;
  if (nothing) nh = 0; /* LDG_EINVAL or LDG_ENOMEM: nothing drained */
  for (size_t i = 0; i < G.m.n_s; i++) {
    int want = 0;
    for (size_t j = 0; j < nh; j++) want += want_holders[j] == (int)i;
    if (G.ts[i].drain_calls != want)
      fail("drain of %s called %d times, model %d (returned %s)", sd((int)i),
           G.ts[i].drain_calls, want, rcname(rc));
  }
  if (!nothing) (void)mdl_settle(&G.m, v, fails);
  free(fails);
  call_done("-> %s (%zu holders, %zu keeps)", rcname(rc), nh, G.n_lfired);
  finish_call();
}

static void op_misc(void) {
  switch (rnd(8)) {
    case 0: {
      call_desc("ldg_stream_check_live(NULL) ");
      int rc = ldg_stream_check_live(NULL);
      if (rc != LDG_EINVAL) fail("returned %s, want LDG_EINVAL", rcname(rc));
      call_done("-> %s", rcname(rc));
      break;
    }
    case 1: {
      call_desc("ldg_ledger_create(NULL) ");
      int rc = ldg_ledger_create(NULL);
      if (rc != LDG_EINVAL) fail("returned %s, want LDG_EINVAL", rcname(rc));
      call_done("-> %s", rcname(rc));
      break;
    }
    case 2:
      call_desc("ldg_stream_unref(NULL); ldg_marks_discard(NULL); "
                "ldg_ledger_destroy(NULL)");
      ldg_stream_unref(NULL);
      ldg_marks_discard(NULL);
      ldg_ledger_destroy(NULL);
      call_done(" ");
      break;
    case 3:
      call_desc("ldg_strerror(each) ");
      for (int c = 1; c >= -8; c--) {
        const char *s = ldg_strerror(c);
        if (s == NULL || (c <= 0 && c >= -5 && s[0] == 0))
          fail("ldg_strerror(%d) is %s", c, s ? "empty" : "NULL");
        for (int d = 0; d > c && c >= -5; d--)
          if (strcmp(ldg_strerror(d), s) == 0)
            fail("ldg_strerror(%d) == ldg_strerror(%d) == \"%s\"", c, d, s);
      }
      call_done(" ");
      break;
    case 4: {
      uint64_t v = rnd(VSPACE);
      call_desc("ldg_nonblocking_holding(l, %" PRIu64 ", NULL, 0) ", v);
      size_t n = ldg_nonblocking_holding(G.l, v, NULL, 0);
      if (n != mdl_nb_holding(&G.m, v, NULL, 0))
        fail("= %zu, model %zu", n, mdl_nb_holding(&G.m, v, NULL, 0));
      call_done("-> %zu", n);
      break;
    }
    case 5:
      call_desc("ldg_ledger_bytes(l) ");
      if (chance(20)) ldg_quiesce();
      call_done("-> %zu", ldg_ledger_bytes(G.l));
      break;
    default:
      /* a release to 0 and a wait on nothing are fine no-ops */
      op_release(false);
      break;
  }
}

/* ---- One seed ------------------------------------------------------------- */

static void step_op(void) {
  size_t pend = mdl_pending_total(&G.m);
  /* Phases of 250 steps: every third one fills (pending work grows into the
   * hundreds, rings grow), the others churn; the last steps fill too, so
   * that ldg_ledger_destroy has work to release. */
  bool fill = (G.step / 250) % 3 == 1 || G.step >= G.steps - 120;
  if (fill && !G.fill) G.hot = chance(50) ? G.side : pick(true, false);
  G.fill = fill;
  unsigned w_enq = pend > 600 ? 5 : fill ? 150 : 30;
  unsigned r = (unsigned)rnd(100 + w_enq - 30);
  if (count_held_destroyed() > 3 && chance(30)) {
    op_ref_unref(true);
    return;
  }
  if (r < w_enq) {
    op_enqueue();
    return;
  }
  r -= w_enq;
  /* In a fill phase most releasing calls become enqueues. */
  bool releasing = r < 28 || (r >= 35 && r < 39) || (r >= 51 && r < 66);
  if (fill && releasing && r >= 24 && chance(80)) {
    op_enqueue();
    return;
  }
  if (fill && r < 13 && chance(80)) {
    op_add_wait();
    return;
  }
  if (r < 13) op_release(false);
  else if (r < 24) op_add_wait();
  else if (r < 28) op_release(true);
  else if (r < 35) {
    if (count_live() < 4 || chance(40)) op_create();
    else op_release(false);
  }
  else if (r < 39) op_destroy();
  else if (r < 45) op_ref_unref(false);
  else if (r < 51) op_device_marks();
  else if (r < 55) op_marks_end(true);
  else if (r < 58) op_marks_end(false);
  else if (r < 66) op_settle();
  else op_misc();
}

/* Not in drv_run's mix (which the differential test's seeds fix): the pool
 * settings. They move no pending work, so no keep may run and every check
 * must still hold afterwards. */
static void op_pool(void) {
  static const size_t limits[4] = {0, 4096, (size_t)1 << 20, SIZE_MAX};
  bool l_null = chance(5);
  switch (rnd(3)) {
    case 0: {
      size_t lim = limits[rnd(4)];
      call_desc("ldg_ledger_set_pool_limit(%s, %zu) ", l_null ? "NULL" : "l",
                lim);
      pre_call(false);
      int rc = ldg_ledger_set_pool_limit(l_null ? NULL : G.l, lim);
      post_call();
      int want = l_null ? LDG_EINVAL : LDG_OK;
      if (rc != want) fail("returned %s, want %s", rcname(rc), rcname(want));
      call_done("-> %s", rcname(rc));
      break;
    }
    case 1:
      call_desc("ldg_ledger_trim(%s) ", l_null ? "NULL" : "l");
      pre_call(false);
      ldg_ledger_trim(l_null ? NULL : G.l);
      post_call();
      call_done(" ");
      break;
    default:
      call_desc("ldg_quiesce(); ldg_ledger_bytes(l) ");
      pre_call(false);
      ldg_quiesce();
      size_t bytes = ldg_ledger_bytes(G.l);
      post_call();
      call_done("-> %zu", bytes);
      break;
  }
  finish_call();
}

/* Not in drv_run's mix either (the differential test has its fill phases):
 * up to 128 plain enqueues on one stream in a row, checked once at the end.
 * Pending work in the hundreds makes rings grow past their first segments,
 * retire them to the pool and reuse them, and releases take many chunks.
 * Entries name 0-3 vector ids and 0-2 ranges, in a pattern that mixes inline
 * and out-of-line payloads. */
static void op_fill(void) {
  int s = pick(true, false);
  if (s == NONE) return;
  size_t n = 1 + (size_t)rnd(128);
  size_t pending = mdl_pending_total(&G.m);
  if (pending >= FILL_MAX) return; /* keeps the checks of one input quick */
  if (n > FILL_MAX - pending) n = FILL_MAX - pending;
  unsigned shape = (unsigned)rnd(4);
  uint64_t v0 = rnd(VSPACE);
  ldg_range r0 = valid_range();
  call_desc("ldg_enqueue(%s, plain, ...) x%zu [shape %u] ", sd(s), n, shape);
  pre_call(false);
  for (size_t i = 0; i < n; i++) {
    uint64_t vec[3];
    ldg_range rg[2];
    size_t nv = (i + shape) % 4, nr = (i / 2 + shape) % 3;
    for (size_t j = 0; j < nv; j++) vec[j] = (v0 + i + j) % VSPACE;
    for (size_t j = 0; j < nr; j++) {
      rg[j] = r0;
      if (r0.addr < UINTPTR_MAX / 2) rg[j].addr += (i + 7 * j) % LOW_SPAN;
    }
    tkeep *k = new_keep(K_PLAIN, s);
    ldg_seq seq = 0;
    int rc = ldg_enqueue(G.ts[s].h, (ldg_keep){keep_cb, k}, nv ? vec : NULL,
                         nv, nr ? rg : NULL, nr, &seq);
    if (rc != LDG_OK) {
      k->state = KS_REJECTED;
      fail("the %zu-th enqueue returned %s", i + 1, rcname(rc));
    }
    ldg_seq want = mdl_enqueue(&G.m, s, k->id, -1, 0, vec, nv, rg, nr);
    if (seq != want)
      fail("the %zu-th enqueue got seq %" PRIu64 ", model %" PRIu64, i + 1,
           seq, want);
    k->state = KS_OWNED;
    k->seq = want;
  }
  post_call();
  call_done("-> LDG_OK x%zu, mark %" PRIu64, n, G.m.s[s].mark);
  finish_call();
}

/* After each step: references re-entrant keeps left to drop, statistics. */
static void after_step(void) {
  drain_deferred();
  size_t p = mdl_pending_total(&G.m);
  G.sum_pending += p;
  if (p > G.max_pending) G.max_pending = p;
  G.n_steps++;
}

static void step_once(void) {
  step_op();
  after_step();
}

void drv_op(enum drv_op op) {
  G.step++;
  switch (op) {
    case DRV_OP_CREATE: op_create(); break;
    case DRV_OP_DESTROY: op_destroy(); break;
    case DRV_OP_REF_UNREF: op_ref_unref(false); break;
    case DRV_OP_UNREF_DESTROYED: op_ref_unref(true); break;
    case DRV_OP_ENQUEUE: op_enqueue(); break;
    case DRV_OP_ADD_WAIT: op_add_wait(); break;
    case DRV_OP_RELEASE: op_release(false); break;
    case DRV_OP_RELEASE_ALL: op_release(true); break;
    case DRV_OP_DEVICE_MARKS: op_device_marks(); break;
    case DRV_OP_RELEASE_MARKS: op_marks_end(true); break;
    case DRV_OP_MARKS_DISCARD: op_marks_end(false); break;
    case DRV_OP_SETTLE: op_settle(); break;
    case DRV_OP_MISC: op_misc(); break;
    case DRV_OP_POOL: op_pool(); break;
    case DRV_OP_FILL: op_fill(); break;
    default:
      fprintf(stderr, "drv_op: no op %d\n", (int)op);
      abort();
  }
  after_step();
}

void drv_run(void) {
  for (G.step = 0; G.step < G.steps; G.step++) step_once();
}

void drv_configure(const drv_config *cfg) { G.cfg = *cfg; }

static void on_alarm(int sig) {
  (void)sig;
  char buf[CALL_LEN + 160];
  int n = snprintf(buf, sizeof buf,
                   "differential_test: TIMEOUT (deadlock?) seed=%" PRIu64
                   " step=%ld in: %s\n",
                   G.seed, G.step, G.call);
  if (n > 0) {
    ssize_t w = write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf);
    (void)w;
  }
  _exit(1);
}

void drv_watchdog(unsigned seconds) {
  signal(SIGALRM, on_alarm);
  alarm(seconds);
}

void drv_begin(uint64_t seed, long steps) {
  memset(&G.m, 0, sizeof G.m);
  G.seed = seed;
  G.steps = steps;
  G.rng = seed * 0x2545f4914f6cdd1dull + 1;
  G.step = -1;
  G.checks = 0;
  G.sum_pending = G.max_pending = 0;
  G.n_steps = 0;
  G.last_id = 0;
  G.n_k = 0;
  G.n_defer = 0;
  G.ring_n = 0;
  G.reentry = true;
  G.epoch = 0;
  G.fill = false;
  G.hot = -1;
  mdl_init(&G.m);

  /* Ledger creation, including under injected failures. */
  call_desc("ldg_ledger_create(&l) under allocation failures");
  for (long n = 1;; n++) {
    ldg_ledger *l = NULL;
    ldg__fault_fail_alloc_at(n);
    long before = ldg__fault_injected();
    int rc = ldg_ledger_create(&l);
    ldg__fault_fail_alloc_at(0);
    long inj = ldg__fault_injected() - before;
    if (rc == LDG_OK) {
      if (l == NULL) fail("LDG_OK and a NULL ledger");
      if (inj == 0) {
        G.l = l;
        break;
      }
      ldg_ledger_destroy(l); /* it coped with a failure: fine, go again */
      continue;
    }
    if (rc != LDG_ENOMEM || inj == 0)
      fail("ldg_ledger_create returned %s with %ld injected failures",
           rcname(rc), inj);
    if (n > 64) fail("ldg_ledger_create still failing after %ld tries", n);
  }
  call_done(" ");
  if (ldg_ledger_create(&G.l2) != LDG_OK) fail("second ledger");
  if (ldg_stream_create(G.l2, 0, 0, NULL, NULL, &G.foreign) != LDG_OK)
    fail("stream of the second ledger");

  /* The side stream: blocking, device 0, never destroyed before the end;
   * re-entrant keeps enqueue on it. It is the first stream: id 1. */
  call_desc("ldg_stream_create(l, dev 0, 0, drain, &side) ");
  ldg_stream *side = NULL;
  pre_call(false);
  int rc = ldg_stream_create(G.l, 0, 0, drain_cb, (void *)(intptr_t)1, &side);
  post_call();
  if (rc != LDG_OK || side == NULL) fail("returned %s", rcname(rc));
  if (ldg_stream_id(side) != 1)
    fail("first stream id is %" PRIu64 ", not 1", ldg_stream_id(side));
  G.last_id = 1;
  G.side = mdl_stream_add(&G.m, 1, 0, false);
  sync_mirrors();
  memset(G.ts, 0, G.cap_ts * sizeof *G.ts);
  G.ts[G.side].h = side;
  call_done("-> %s", sd(G.side));
  finish_call();
}

void drv_end(drv_stats *stats) {
  /* The end: settle open snapshots, then destroy the ledger with work still
   * pending; every keep handed over must have run exactly once. */
  G.reentry = false;
  G.m.actions = false;
  int open[64];
  size_t n = open_snaps(open);
  for (size_t i = 0; i < n; i++) {
    call_desc("ldg_marks_discard(m%d) [end]", open[i]);
    pre_call(false);
    ldg_marks_discard(G.snaps[open[i]]);
    post_call();
    mdl_marks_discard(&G.m, open[i]);
    call_done(" ");
    finish_call();
  }
  drain_deferred();
  size_t pending_at_end = mdl_pending_total(&G.m);
  call_desc("ldg_ledger_destroy(l) [%zu entries pending]", pending_at_end);
  pre_call(false);
  ldg_ledger_destroy(G.l);
  post_call();
  mdl_destroy_all(&G.m);
  call_done(" ");
  /* finish_call's checks would call into the destroyed ledger; compare the
   * keeps only. */
  size_t nl = G.n_lfired;
  for (size_t i = 0; i < G.n_k; i++) {
    tkeep *k = G.k[i];
    int want = k->state == KS_OWNED ? 1 : 0;
    if (k->lib_count != want)
      fail("after ldg_ledger_destroy keep K%d (%s, %s seq %" PRIu64
           ") ran %d times, want %d",
           k->id, kind_name(k->kind), sd(k->stream), k->seq, k->lib_count,
           want);
  }
  for (size_t i = 0; i < G.m.n_fired; i++) G.k[G.m.fired[i]]->model_released = true;
  for (size_t i = 0; i < G.n_k; i++)
    if (G.k[i]->state == KS_OWNED && !G.k[i]->model_released) {
      fprintf(stderr, "model kept K%zu past ledger destroy (internal)\n", i);
      abort();
    }
  /* Handles stay valid until unreferenced. */
  G.n_defer = 0;
  for (size_t i = 0; i < G.m.n_s; i++)
    while (G.m.s[i].refs_test-- > 0) ldg_stream_unref(G.ts[i].h);
  ldg_stream_unref(G.foreign);
  ldg_ledger_destroy(G.l2);
  ldg_quiesce();

  if (stats != NULL) {
    stats->checks = G.checks;
    stats->keeps = G.n_k;
    stats->streams = G.m.n_s;
    stats->pending_avg = G.n_steps ? G.sum_pending / (size_t)G.n_steps : 0;
    stats->pending_max = G.max_pending;
    stats->ran_at_destroy = nl;
  }
  for (size_t i = 0; i < G.n_k; i++) free(G.k[i]);
  mdl_fini(&G.m);
  G.l = G.l2 = NULL;
  G.foreign = NULL;
}

void drv_fini(void) {
  free(G.ts);
  free(G.snaps);
  free(G.k);
  free(G.lfired);
  free(G.defer);
  memset(&G, 0, sizeof G);
}
