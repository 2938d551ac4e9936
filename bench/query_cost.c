/*
 * query_cost — a deterministic driver of the ledger's queries, for
 * counting what one query costs (issue 11): run it under
 *   valgrind --tool=callgrind --toggle-collect=query_loop
 * and divide the instructions by the queries it prints. Not a benchmark:
 * its times are this machine's and only a sanity check. It uses only
 * ledger.h (and, for reader-mutex, bench/mutex_ledger.h), so the same file
 * builds against any commit of the ledger.
 *
 *   query_cost holds N KIND Q     one stream holding N entries (one id, one
 *                                 64-byte range each, as ledger_bench's
 *                                 holds rows), then Q misses of KIND
 *                                 (vector | range), after one warm-up miss.
 *   query_cost reader T R Q       the serving row's streams for T threads
 *                                 (a non-blocking copy stream and a compute
 *                                 stream each), driven in one thread: R
 *                                 requests of every "thread" (copy on a,
 *                                 wait of b on a, two ops on b; b released
 *                                 every 4 requests), then one pair of the
 *                                 reader's queries (holds_vector and
 *                                 holds_host_range, as ledger_bench's reader
 *                                 asks), Q pairs in all. Only the queries
 *                                 are inside query_loop's calls.
 *   query_cost reader-mutex T R Q the same against the mutex design
 *                                 (bench/mutex_ledger.c), its pairs in
 *                                 query_loop_mutex.
 *   query_cost shared T K N       ledger_bench's shared row for T threads,
 *                                 driven in one thread: one stream, every
 *                                 "thread" in turn enqueues one entry (one
 *                                 id, one 4 KiB range) and every K of its
 *                                 ops releases up to the stream's mark; N
 *                                 turns of every thread. For
 *                                 bench/coherence_sim.sh (MODE=shared): the
 *                                 lines the threads take from each other
 *                                 when each op follows another thread's.
 * Prints the queries made and the native ns per query.
 */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ledger/ledger.h"
#include "bench/clock.h"
#include "bench/mutex_ledger.h"

/* ledger_testing.h's counters of what a thread's queries read, where the
 * ledger has them (since the segment summaries): declared here, weak, so
 * that this file still builds against older commits. filters (the
 * published filters' lines, since rdr10): an older ledger returns the
 * first four fields only (through the caller's memory), which reads_now
 * tells by ldg__pubf_widen, a function of rdr10's summary.c. */
typedef struct {
  uint64_t segments, slots, stream_lines, headers, filters;
} query_reads;
extern query_reads ldg__thread_query_reads(void) __attribute__((weak));
extern void ldg__pubf_widen(void) __attribute__((weak)); /* only its address */
/* And what they wrote (summary lines), where counted (since core5d). */
extern uint64_t ldg__thread_query_writes(void) __attribute__((weak));

static uint64_t writes_now(void) {
  return ldg__thread_query_writes == NULL ? 0 : ldg__thread_query_writes();
}

static query_reads reads_now(void) {
  if (ldg__thread_query_reads == NULL) return (query_reads){0, 0, 0, 0, 0};
  query_reads r = ldg__thread_query_reads();
  if (ldg__pubf_widen == NULL) r.filters = 0; /* a ledger before rdr10 */
  return r;
}

static void print_reads(query_reads a, uint64_t w, uint64_t queries) {
  if (ldg__thread_query_reads == NULL) return;
  query_reads b = reads_now();
  double q = (double)queries;
  printf("  per query: %.2f segments; lines enqueuers or releases write: "
         "%.2f slots, %.2f tail/released, %.2f segment headers; "
         "%.2f published filters' lines\n",
         (double)(b.segments - a.segments) / q, (double)(b.slots - a.slots) / q,
         (double)(b.stream_lines - a.stream_lines) / q,
         (double)(b.headers - a.headers) / q,
         (double)(b.filters - a.filters) / q);
  if (ldg__thread_query_writes != NULL)
    printf("  per query: %.2f summary lines written\n",
           (double)(writes_now() - w) / q);
}

#define VEC_BASE(tid) ((uint64_t)((tid) + 1) << 20)
#define HOST_BASE(tid) ((uintptr_t)0x100000000u + (uintptr_t)(tid) * 0x1000000u)

#define CK(call)                                                          \
  do {                                                                    \
    int ck_ = (call);                                                     \
    if (ck_ != LDG_OK) {                                                  \
      fprintf(stderr, "query_cost: %s: %s\n", #call, ldg_strerror(ck_)); \
      exit(1);                                                            \
    }                                                                     \
  } while (0)

/* The reader's own words, each alone on a line (the ledger's globals may
 * sit beside them: bench/coherence_sim.py would count the false sharing
 * of this one-thread driver as the reader's). */
static _Alignas(64) uint64_t rng_line[8] = {0x9e3779b97f4a7c15ull};
#define rng rng_line[0]
static uint64_t xorshift(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static const ldg_keep no_keep = {NULL, NULL};

static int no_drain(void *ctx) {
  (void)ctx;
  return 0;
}
static _Alignas(64) volatile unsigned sink_line[16];
#define sink sink_line[0]

/* Who runs now, for bench/coherence_sim.py (which reads a valgrind
 * --tool=lackey --trace-mem=yes trace of `query_cost reader`, where a
 * store shows its address, not its value): a store to line 0 of this
 * array before the reader's query pair, to line t + 1 before "thread" t's
 * request. Its address, and the stack's and the thread-locals' (which the
 * one real thread shares among the agents, unlike the real ones: left
 * out), are printed when QUERY_COST_AGENTS is set. */
#define QC_AGENTS 65
static volatile int query_cost_agent[QC_AGENTS][16]
    __attribute__((aligned(64)));
static _Thread_local int query_cost_tls;
static void agent_is(int who) { /* -1: the reader; else a thread */
  if (who + 1 < QC_AGENTS) query_cost_agent[who + 1][0] = 1;
}

/* The first line QUERY_COST_AGENTS asks for: the marker array and, to be
 * left out, the stack (a local of this frame: the sim skips 1 MiB below
 * it) and the thread-locals. The caller prints its streams after it. */
static __attribute__((noinline)) void print_agents_marker(void) {
  int local = 0;
  printf("agents: marker %p stack %p tls %p\n", (void *)query_cost_agent,
         (void *)&local, (void *)&query_cost_tls);
}

/* The only code callgrind counts (--toggle-collect=query_loop). kind 0:
 * vector misses; 1: range misses; 2: the reader's pairs over threads. */
__attribute__((noinline)) void query_loop(ldg_ledger *l, int kind, uint64_t q,
                                          int threads) {
  unsigned hits = 0;
  for (uint64_t i = 0; i < q; i++) {
    if (kind == 0) {
      hits += ldg_holds_vector(l, VEC_BASE(1) + (i & 1023));
    } else if (kind == 1) {
      hits += ldg_holds_host_range(l, HOST_BASE(1) + (uintptr_t)(i & 1023) * 64,
                                   64);
    } else {
      uint64_t x = xorshift();
      int tid = (int)(x % (uint64_t)threads);
      uint64_t slot = (x >> 16) & 63;
      hits += ldg_holds_vector(l, VEC_BASE(tid) + slot * 2);
      hits += ldg_holds_host_range(l, HOST_BASE(tid) + slot * 65536 + 4096, 256);
    }
  }
  sink += hits;
}

static int holds(uint64_t n, const char *kind, uint64_t q) {
  int k = strcmp(kind, "vector") == 0 ? 0 : strcmp(kind, "range") == 0 ? 1 : -1;
  if (k < 0) return 2;
  ldg_ledger *l;
  ldg_stream *s;
  CK(ldg_ledger_create(&l));
  CK(ldg_stream_create(l, 0, 0, NULL, NULL, &s));
  for (uint64_t i = 0; i < n; i++) {
    uint64_t vec = VEC_BASE(0) + i;
    ldg_range r = {HOST_BASE(0) + (uintptr_t)i * 64, 64};
    CK(ldg_enqueue(s, no_keep, &vec, 1, &r, 1, NULL));
  }
  query_loop(l, k, 1, 1); /* warm-up (counted: subtract a Q=1 run) */
  query_reads r0 = reads_now();
  uint64_t w0 = writes_now();
  uint64_t t0 = bench_mono_ns();
  query_loop(l, k, q, 1);
  uint64_t t1 = bench_mono_ns();
  if (sink != 0) return 1; /* every query missed */
  printf("holds %s: %" PRIu64 " pending, %" PRIu64 " queries (+1 warm-up), "
         "%.1f ns/query here\n", kind, n, q, (double)(t1 - t0) / (double)q);
  print_reads(r0, w0, q);
  CK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  return 0;
}

/* The reader mode's two designs: the ledger, and (reader-mutex) the mutex
 * design of bench/mutex_ledger.c, whose query pair is query_loop_mutex. */
typedef struct qc_impl {
  int (*ledger_create)(void **out);
  void (*ledger_destroy)(void *l);
  int (*stream_create)(void *l, int device, unsigned flags, ldg_drain_fn d,
                       void *ctx, void **out);
  int (*stream_destroy)(void *s);
  void (*stream_unref)(void *s);
  int (*enqueue)(void *s, ldg_keep k, const uint64_t *v, size_t nv,
                 const ldg_range *r, size_t nr, ldg_seq *out);
  ldg_seq (*mark)(void *s);
  int (*add_wait)(void *b, void *a, ldg_seq upto, ldg_seq *out);
  int (*release)(void *s, ldg_seq upto);
  void (*pair)(void *l, int threads);
} qc_impl;

#define QC_IMPL(P, L, S, PAIR)                                                  \
  static int P##_qc_lc(void **o) {                                             \
    L *x = NULL;                                                               \
    int rc = P##_ledger_create(&x);                                            \
    *o = x;                                                                    \
    return rc;                                                                 \
  }                                                                            \
  static void P##_qc_ld(void *l) { P##_ledger_destroy(l); }                   \
  static int P##_qc_sc(void *l, int dev, unsigned fl, ldg_drain_fn d,          \
                       void *ctx, void **o) {                                  \
    S *x = NULL;                                                               \
    int rc = P##_stream_create(l, dev, fl, d, ctx, &x);                        \
    *o = x;                                                                    \
    return rc;                                                                 \
  }                                                                            \
  static int P##_qc_sd(void *s) { return P##_stream_destroy(s); }             \
  static void P##_qc_su(void *s) { P##_stream_unref(s); }                     \
  static int P##_qc_en(void *s, ldg_keep k, const uint64_t *v, size_t nv,      \
                       const ldg_range *r, size_t nr, ldg_seq *o) {            \
    return P##_enqueue(s, k, v, nv, r, nr, o);                                 \
  }                                                                            \
  static ldg_seq P##_qc_mk(void *s) { return P##_mark(s); }                   \
  static int P##_qc_aw(void *b, void *a, ldg_seq u, ldg_seq *o) {              \
    return P##_add_wait(b, a, u, o);                                           \
  }                                                                            \
  static int P##_qc_rl(void *s, ldg_seq u) { return P##_release(s, u); }      \
  static const qc_impl P##_qc = {P##_qc_lc, P##_qc_ld, P##_qc_sc, P##_qc_sd,   \
                                 P##_qc_su, P##_qc_en, P##_qc_mk, P##_qc_aw,   \
                                 P##_qc_rl, PAIR};

static void ldg_pair(void *l, int threads) { query_loop(l, 2, 1, threads); }

/* The mutex design's query pair, as query_loop's kind 2 (callgrind:
 * --toggle-collect=query_loop_mutex). */
__attribute__((noinline)) void query_loop_mutex(mldg_ledger *l, int threads) {
  uint64_t x = xorshift();
  int tid = (int)(x % (uint64_t)threads);
  uint64_t slot = (x >> 16) & 63;
  unsigned hits = mldg_holds_vector(l, VEC_BASE(tid) + slot * 2);
  hits += mldg_holds_host_range(l, HOST_BASE(tid) + slot * 65536 + 4096, 256);
  sink += hits;
}
static void mldg_pair(void *l, int threads) { query_loop_mutex(l, threads); }

QC_IMPL(ldg, ldg_ledger, ldg_stream, ldg_pair)
QC_IMPL(mldg, mldg_ledger, mldg_stream, mldg_pair)

#define REQ(t) req[(size_t)(t) * 8]
static int reader(const qc_impl *im, int threads, uint64_t r, uint64_t q) {
  void *l;
  CK(im->ledger_create(&l));
  void **a = calloc((size_t)threads, sizeof *a);
  void **b = calloc((size_t)threads, sizeof *b);
  /* Each "thread's" request count alone on a line (REQ: 8 words apart),
   * as in ledger_bench's workers. */
  uint64_t *req = calloc((size_t)threads * 8, sizeof *req);
  if (a == NULL || b == NULL || req == NULL) return 1;
  for (int t = 0; t < threads; t++) {
    CK(im->stream_create(l, t % 4, LDG_STREAM_NONBLOCKING, no_drain, NULL,
                         &a[t]));
    CK(im->stream_create(l, t % 4, 0, NULL, NULL, &b[t]));
  }
  if (getenv("QUERY_COST_AGENTS") != NULL) {
    print_agents_marker();
    for (int t = 0; t < threads; t++)
      printf("agents: thread %d streams %p %p\n", t, (void *)a[t], (void *)b[t]);
    fflush(stdout);
  }
  uint64_t ns = 0;
  query_reads r0 = reads_now();
  uint64_t w0 = writes_now();
  for (uint64_t i = 0; i < q; i++) {
    for (uint64_t k = 0; k < r; k++) {
      for (int t = 0; t < threads; t++) { /* ledger_bench's serving request */
        agent_is(t);
        uint64_t vin = VEC_BASE(t) + (REQ(t) & 63) * 2, vout = vin + 1;
        uint64_t kv[2] = {vin, vout};
        uintptr_t host = HOST_BASE(t) + (uintptr_t)(REQ(t) & 63) * 65536;
        ldg_range hin = {host, 32768}, hout = {host + 32768, 32768};
        CK(im->enqueue(a[t], no_keep, &vin, 1, &hin, 1, NULL));
        CK(im->add_wait(b[t], a[t], im->mark(a[t]), NULL));
        CK(im->enqueue(b[t], no_keep, kv, 2, NULL, 0, NULL));
        CK(im->enqueue(b[t], no_keep, &vout, 1, &hout, 1, NULL));
        if (++REQ(t) % 4 == 0) CK(im->release(b[t], im->mark(b[t])));
      }
    }
    agent_is(-1);
    uint64_t t0 = bench_mono_ns();
    im->pair(l, threads);
    ns += bench_mono_ns() - t0;
  }
  printf("reader: %d threads' streams, %" PRIu64 " requests each between "
         "query pairs, %" PRIu64 " pairs (%" PRIu64 " queries), %.1f ns/query "
         "here\n", threads, r, q, 2 * q, (double)ns / (double)(2 * q));
  if (im == &ldg_qc) print_reads(r0, w0, 2 * q);
  for (int t = 0; t < threads; t++) {
    CK(im->stream_destroy(b[t]));
    CK(im->stream_destroy(a[t]));
    im->stream_unref(b[t]);
    im->stream_unref(a[t]);
  }
  im->ledger_destroy(l);
  free(a);
  free(b);
  free(req);
  return 0;
}

/* ledger_bench's shared row (shared_run), its threads in strict turns. */
static int shared(int threads, uint64_t k, uint64_t n) {
  if (k == 0) {
    fprintf(stderr, "query_cost: shared: RELEASE_EVERY must be at least 1\n");
    return 2;
  }
  uint64_t *ops = calloc((size_t)threads * 8, sizeof *ops);
  if (ops == NULL) return 1;
  ldg_ledger *l;
  ldg_stream *s;
  CK(ldg_ledger_create(&l));
  /* Shared from the start: one real thread would otherwise own it (owned
   * streams), where ledger_bench's threads revoke that at once. */
  CK(ldg_stream_create(l, 0, LDG_STREAM_SHARED, NULL, NULL, &s));
  if (getenv("QUERY_COST_AGENTS") != NULL) {
    print_agents_marker();
    for (int t = 0; t < threads; t++) /* the one stream, as each's */
      printf("agents: thread %d streams %p %p\n", t, (void *)s, (void *)s);
    fflush(stdout);
  }
  uint64_t t0 = bench_mono_ns();
  for (uint64_t i = 0; i < n; i++) {
    for (int t = 0; t < threads; t++) {
      agent_is(t);
      uint64_t *o = &ops[(size_t)t * 8];
      uint64_t vec = VEC_BASE(t) + (*o & 255);
      ldg_range r = {HOST_BASE(t) + (uintptr_t)(*o & 255) * 4096, 4096};
      CK(ldg_enqueue(s, no_keep, &vec, 1, &r, 1, NULL));
      if (++*o % k == 0) CK(ldg_release(s, ldg_mark(s)));
    }
  }
  uint64_t t1 = bench_mono_ns();
  agent_is(-1); /* the end: nothing after it is counted */
  printf("shared: %d threads, release every %" PRIu64 ", %" PRIu64
         " ops, %.1f ns/op here\n", threads, k, n * (uint64_t)threads,
         (double)(t1 - t0) / (double)(n * (uint64_t)threads));
  CK(ldg_stream_destroy(s));
  ldg_stream_unref(s);
  ldg_ledger_destroy(l);
  free(ops);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "shared") == 0)
    return shared(atoi(argv[2]) > 0 ? atoi(argv[2]) : 1,
                  strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
  if (argc == 5 && strcmp(argv[1], "holds") == 0)
    return holds(strtoull(argv[2], NULL, 10), argv[3],
                 strtoull(argv[4], NULL, 10));
  if (argc == 5 && (strcmp(argv[1], "reader") == 0 ||
                    strcmp(argv[1], "reader-mutex") == 0))
    return reader(strcmp(argv[1], "reader") == 0 ? &ldg_qc : &mldg_qc,
                  atoi(argv[2]) > 0 ? atoi(argv[2]) : 1,
                  strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
  fprintf(stderr, "usage: query_cost holds N vector|range Q\n"
                  "       query_cost reader|reader-mutex THREADS "
                  "REQUESTS_PER_PAIR PAIRS\n"
                  "       query_cost shared THREADS RELEASE_EVERY TURNS\n");
  return 2;
}
