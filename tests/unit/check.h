/*
 * Shared helpers of the unit tests: CHECK macros that print file:line and the
 * values and exit(1) on failure, and a keep recorder (keeps whose ctx points to
 * a struct that counts its releases and logs their order).
 *
 * Each test program is one feature; it exits 0 when every CHECK held. A keep
 * released a second time fails the program at once, wherever that happens.
 */
#ifndef STREAMLEDGER_TESTS_UNIT_CHECK_H
#define STREAMLEDGER_TESTS_UNIT_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ledger.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__,     \
              #cond);                                                      \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* Integer comparisons; both sides are printed as signed and hex. */
#define CHECK_CMP_(a, op, b)                                               \
  do {                                                                     \
    long long ck_a_ = (long long)(a), ck_b_ = (long long)(b);              \
    if (!(ck_a_ op ck_b_)) {                                               \
      fprintf(stderr,                                                      \
              "%s:%d: CHECK(%s %s %s) failed: %lld (0x%llx) vs %lld "      \
              "(0x%llx)\n",                                                \
              __FILE__, __LINE__, #a, #op, #b, ck_a_,                      \
              (unsigned long long)ck_a_, ck_b_, (unsigned long long)ck_b_); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define CHECK_EQ(a, b) CHECK_CMP_(a, ==, b)
#define CHECK_NE(a, b) CHECK_CMP_(a, !=, b)
/* Unsigned comparisons (sizes, byte counts). */
#define CHECK_UCMP_(a, op, b)                                              \
  do {                                                                     \
    unsigned long long ck_a_ = (unsigned long long)(a),                    \
                       ck_b_ = (unsigned long long)(b);                    \
    if (!(ck_a_ op ck_b_)) {                                               \
      fprintf(stderr, "%s:%d: CHECK(%s %s %s) failed: %llu vs %llu\n",     \
              __FILE__, __LINE__, #a, #op, #b, ck_a_, ck_b_);              \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define CHECK_LT(a, b) CHECK_UCMP_(a, <, b)
#define CHECK_LE(a, b) CHECK_UCMP_(a, <=, b)
#define CHECK_GT(a, b) CHECK_UCMP_(a, >, b)
#define CHECK_GE(a, b) CHECK_UCMP_(a, >=, b)

#define CHECK_PTR_EQ(a, b)                                                 \
  do {                                                                     \
    const void *ck_a_ = (a), *ck_b_ = (b);                                 \
    if (ck_a_ != ck_b_) {                                                  \
      fprintf(stderr, "%s:%d: CHECK(%s == %s) failed: %p vs %p\n",         \
              __FILE__, __LINE__, #a, #b, ck_a_, ck_b_);                   \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* A status code, printed with its name. */
#define CHECK_RC(expr, want)                                               \
  do {                                                                     \
    int ck_got_ = (expr), ck_want_ = (want);                               \
    if (ck_got_ != ck_want_) {                                             \
      fprintf(stderr, "%s:%d: %s returned %d (%s), want %d (%s)\n",        \
              __FILE__, __LINE__, #expr, ck_got_, ldg_strerror(ck_got_),   \
              ck_want_, ldg_strerror(ck_want_));                           \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define CHECK_OK(expr) CHECK_RC(expr, LDG_OK)

/* ---- Keep recorder ------------------------------------------------------ */

#define REC_MAX 8192

/* The log shared by the keeps of one test: how many released, in what order. */
typedef struct rec_log {
  long total;           /* releases so far, all keeps of this log */
  size_t n;             /* tags logged in order[] (capped at REC_MAX) */
  int order[REC_MAX];   /* tags in release order */
} rec_log;

/* One keep: its ctx points here. */
typedef struct rec_keep {
  rec_log *log;
  int tag;
  int releases;                       /* must end at 0 or 1 */
  void (*hook)(struct rec_keep *k);   /* optional: runs inside the release */
  void *arg;                          /* for hook */
} rec_keep;

static inline void rec_release(void *ctx) {
  rec_keep *k = (rec_keep *)ctx;
  k->releases++;
  if (k->releases != 1) {
    fprintf(stderr, "keep %d released %d times\n", k->tag, k->releases);
    exit(1);
  }
  if (k->log) {
    k->log->total++;
    if (k->log->n < REC_MAX) k->log->order[k->log->n++] = k->tag;
  }
  if (k->hook) k->hook(k);
}

static inline void rec_log_init(rec_log *log) { memset(log, 0, sizeof *log); }

/* Initialises k and returns the ldg_keep that records into log under tag. */
static inline ldg_keep rec_keep_of(rec_keep *k, rec_log *log, int tag) {
  memset(k, 0, sizeof *k);
  k->log = log;
  k->tag = tag;
  return (ldg_keep){rec_release, k};
}

/* Checks that log holds exactly the tags want[0..n) in that order. */
static inline void check_order_(const char *file, int line, const rec_log *log,
                                const int *want, size_t n) {
  bool ok = log->n == n && log->total == (long)n;
  for (size_t i = 0; ok && i < n; i++) ok = log->order[i] == want[i];
  if (!ok) {
    fprintf(stderr, "%s:%d: release order mismatch\n  want:", file, line);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n  got: ");
    for (size_t i = 0; i < log->n; i++) fprintf(stderr, " %d", log->order[i]);
    fprintf(stderr, " (total %ld)\n", log->total);
    exit(1);
  }
}
#define CHECK_ORDER(log, ...)                                              \
  check_order_(__FILE__, __LINE__, (log), (const int[]){__VA_ARGS__},      \
               sizeof((const int[]){__VA_ARGS__}) / sizeof(int))
/* Position of tag in the log's order, -1 if absent. */
static inline int rec_pos(const rec_log *log, int tag) {
  for (size_t i = 0; i < log->n; i++)
    if (log->order[i] == tag) return (int)i;
  return -1;
}
/* Tag a was released, and before tag b. */
#define CHECK_BEFORE(log, a, b)                                            \
  do {                                                                     \
    CHECK_NE(rec_pos((log), (a)), -1);                                     \
    CHECK_NE(rec_pos((log), (b)), -1);                                     \
    CHECK_LT(rec_pos((log), (a)), rec_pos((log), (b)));                    \
  } while (0)
#define CHECK_NONE_RELEASED(log) CHECK_EQ((log)->total, 0)

/* A bulk keep: ctx points to a long counter. */
static inline void count_release(void *ctx) { (*(long *)ctx)++; }
static inline ldg_keep count_keep(long *counter) {
  return (ldg_keep){count_release, counter};
}

/* ---- Small builders ------------------------------------------------------ */

static inline int noop_drain(void *ctx) {
  (void)ctx;
  return 0;
}

static inline ldg_ledger *new_ledger(void) {
  ldg_ledger *l = NULL;
  CHECK_OK(ldg_ledger_create(&l));
  CHECK(l != NULL);
  return l;
}

/* A stream of device dev; non-blocking ones get a drain that does nothing. */
static inline ldg_stream *new_stream(ldg_ledger *l, int dev, bool nonblocking) {
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(l, dev, nonblocking ? LDG_STREAM_NONBLOCKING : 0,
                             nonblocking ? noop_drain : NULL, NULL, &s));
  CHECK(s != NULL);
  return s;
}

/* A blocking stream created LDG_STREAM_SHARED: never owned, so the segments
 * it retires always go through the reclaimer to the pool (never kept hot by
 * an owner: ledger/segment.c, HOT REUSE ON OWNED STREAMS, which keeps one
 * only when the segment after it is no larger, a size that depends on how
 * fast the ring filled). For tests that count what reaches the pool. */
static inline ldg_stream *new_shared_stream(ldg_ledger *l, int dev) {
  ldg_stream *s = NULL;
  CHECK_OK(ldg_stream_create(l, dev, LDG_STREAM_SHARED, NULL, NULL, &s));
  CHECK(s != NULL);
  return s;
}

/* Enqueues a recorded keep naming one vector id (0 ids if vec == 0); returns
 * its seq after checking it is mark + 1. */
static inline ldg_seq put_vec(ldg_stream *s, rec_keep *k, rec_log *log,
                              int tag, uint64_t vec) {
  ldg_seq before = ldg_mark(s), seq = 0;
  CHECK_OK(ldg_enqueue(s, rec_keep_of(k, log, tag), &vec, vec ? 1 : 0, NULL,
                       0, &seq));
  CHECK_EQ(seq, before + 1);
  CHECK_EQ(ldg_mark(s), seq);
  return seq;
}

/* Adds a wait of b on a up to a's current mark; returns the wait's seq. */
static inline ldg_seq wait_on(ldg_stream *b, ldg_stream *a) {
  ldg_seq before = ldg_mark(b), seq = 0;
  CHECK_OK(ldg_add_wait(b, a, ldg_mark(a), &seq));
  CHECK_EQ(seq, before + 1);
  CHECK_EQ(ldg_mark(b), seq);
  return seq;
}

#define PASS(name) fprintf(stderr, "ok - %s\n", name)

#endif /* STREAMLEDGER_TESTS_UNIT_CHECK_H */
