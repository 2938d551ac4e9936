/*
 * ledger_fuzzer — a libFuzzer harness for the ledger.
 *
 * The input is a sequence of ledger calls. Each one is made on the ledger
 * and on the reference model of the differential test by the differential
 * test's call driver (tests/differential/driver.h), which judges every status
 * code and, after every call, compares which keeps ran and every query; at
 * the end of the input it destroys the ledger and checks that every keep
 * handed over ran exactly once. A mismatch aborts (libFuzzer saves the input
 * as crash-*); so do ASan and UBSan findings, and LeakSanitizer reports a
 * leak-* input when one input's allocations outlive it.
 *
 * INPUT FORMAT
 *   input  := record*           only the first MAX_RECORDS are used
 *   record := op len arg[len]   op, len: one byte each; a record cut short by
 *                               the end of the input uses what is there
 *   op is the call: 0xff a fill (up to 128 enqueues on one stream), any
 *   other value op % 14 one of enum drv_op's others: create, destroy,
 *   ref/unref, unref of a destroyed stream, enqueue, add_wait, release,
 *   release_all, device_marks, release_marks, marks_discard, settle, misc,
 *   pool.
 *   Every choice the driver then makes for that call is a draw of a value
 *   in [0, n): which stream (or NULL, a destroyed one, one of another
 *   ledger), the keep and what it does when released, vector ids, host
 *   ranges (zero-byte, wrapping, at the top of the address space), marks
 *   (past the mark too), NULL arrays and out-pointers, which drains fail,
 *   and whether and which allocation is made to fail
 *   (ldg__fault_fail_alloc_at, or all of them). A draw takes the next 1 byte
 *   of arg (n <= 2^8), 2 bytes (n <= 2^16) or 8 bytes, little-endian, modulo
 *   n. Draws past the end of arg come from a splitmix64 seeded from the
 *   record, so a two-byte record is a complete, varied call, and a mutation
 *   inside one record does not shift the bytes of the next. A call whose
 *   draws find nothing to act on (no snapshot open, no stream to unref) is
 *   skipped by the driver.
 *
 * BOUNDS, per input: MAX_RECORDS calls (a fill is up to 128 enqueues, and
 * adds none once 256 operations are pending); MAX_LIVE live streams besides
 * the side stream; 4 open snapshots, 8 ids and 8 ranges per entry (the
 * driver's limits); 255 argument bytes per call. Each input runs on a
 * fresh ledger (and a second one for foreign handles) and ends with
 * ldg_ledger_destroy, every reference dropped and ldg_quiesce, so inputs are
 * independent and nothing outlives them.
 *
 * DETERMINISM. One thread; the input fixes every call. Two things inside the
 * ledger depend on time, not on the input: segment sizes (from how fast a
 * segment was used up) and the segment pool (filled by RCU callbacks). Both
 * change only which allocation an injected failure hits, so an input with
 * injected failures may take a different (equally checked) path on a replay.
 *
 * MODES
 *   ledger_fuzzer [libFuzzer flags] DIR...   fuzz, growing the corpus in DIR
 *   ledger_fuzzer FILE...                    replay the inputs (regression)
 *   ledger_fuzzer --write-seeds=DIR          write the seed corpus
 *   LDG_DIFF_TRACE=1 ledger_fuzzer FILE      print every call as it is made
 *
 * liburcu's callback thread sleeps 10 ms (poll(NULL, 0, 10)) every time it
 * wakes, to batch callbacks, and ldg_ledger_destroy waits for it (an
 * rcu_barrier), several times per input: that held the fuzzer to ~30
 * inputs a second, against 300-700 without. This file defines poll(), ahead
 * of libc's, turning that pure delay (no descriptors) into a yield; it
 * changes when callbacks run, not what they do. LDG_FUZZ_RCU_NAP=1 keeps
 * the delay; the regression test replays the corpus both ways.
 */
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/differential/driver.h"

enum {
  MAX_RECORDS = 64,
  MAX_LIVE = 24, /* so one device has more than a snapshot's first 8 */
};

_Static_assert(DRV_N_OPS == 15, "update op_of's letters and the header");
_Static_assert(DRV_OP_FILL == DRV_N_OPS - 1, "see op_of_byte");

/* The call a record's op byte names. 0xff is a fill, rare by design: the
 * hundreds of entries it leaves make every later check of the input walk
 * them (a uniform share cut the fuzzer's speed threefold). */
static enum drv_op op_of_byte(uint8_t b) {
  return b == 0xff ? DRV_OP_FILL : (enum drv_op)(b % DRV_OP_FILL);
}

static uint8_t byte_of_op(enum drv_op op) {
  return op == DRV_OP_FILL ? 0xff : (uint8_t)op;
}

/* ---- Draws from the input ------------------------------------------------ */

typedef struct record {
  const uint8_t *arg;
  size_t len, off;
  uint64_t rng; /* for draws past the end of arg */
} record;

static record cur; /* the record being run (empty outside any) */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Bytes a draw of a value in [0, n) takes from the input. */
static size_t draw_width(uint64_t n) {
  return n <= 0x100u ? 1 : n <= 0x10000u ? 2 : 8;
}

static uint64_t draw_input(void *ctx, uint64_t n) {
  record *r = ctx;
  size_t w = draw_width(n);
  uint64_t v = 0;
  if (r->len - r->off >= w) {
    for (size_t i = 0; i < w; i++) v |= (uint64_t)r->arg[r->off + i] << (8 * i);
    r->off += w;
  } else {
    r->off = r->len;
    v = splitmix64(&r->rng);
  }
  return v % n;
}

/* FNV-1a of the record and its position. */
static uint64_t record_seed(size_t index, uint8_t op, const uint8_t *arg,
                            size_t len) {
  uint64_t h = 0xcbf29ce484222325ull;
  uint8_t head[2] = {(uint8_t)index, op};
  for (size_t i = 0; i < 2; i++) h = (h ^ head[i]) * 0x100000001b3ull;
  for (size_t i = 0; i < len; i++) h = (h ^ arg[i]) * 0x100000001b3ull;
  return h ^ len;
}

/* ---- Running one input --------------------------------------------------- */

static void on_mismatch(void) {
  fprintf(stderr,
          "  reproduce: LDG_DIFF_TRACE=1 ledger_fuzzer CRASH_FILE (the "
          "crash-* input libFuzzer saves)\n");
  fflush(stderr);
  abort();
}

static void configure(uint64_t (*draw)(void *, uint64_t), void *ctx) {
  const char *t = getenv("LDG_DIFF_TRACE");
  drv_config cfg = {0};
  cfg.draw = draw;
  cfg.draw_ctx = ctx;
  cfg.on_fail = on_mismatch;
  cfg.trace = t != NULL && *t != '\0' && strcmp(t, "0") != 0;
  cfg.name = "ledger_fuzzer";
  cfg.max_live = MAX_LIVE;
  drv_configure(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  memset(&cur, 0, sizeof cur);
  drv_begin(1, 0);
  size_t pos = 0;
  for (size_t k = 0; k < MAX_RECORDS && pos < size; k++) {
    uint8_t op = data[pos++];
    size_t len = pos < size ? data[pos++] : 0;
    if (len > size - pos) len = size - pos;
    cur.arg = data + pos;
    cur.len = len;
    cur.off = 0;
    cur.rng = record_seed(k, op, data + pos, len);
    pos += len;
    drv_op(op_of_byte(op));
  }
  memset(&cur, 0, sizeof cur);
  drv_end(NULL);
  return 0;
}

/* ---- The seed corpus ----------------------------------------------------- */

/* Writing a seed runs the calls for real, with a draw function that picks
 * each value from a PRNG (or, at `bad` percent, 0: the first choice, which
 * for every chance() in the driver is the rare branch — NULL handles, bad
 * ranges, injected failures) and writes the bytes that decode to it. */
typedef struct writer {
  uint8_t arg[255];
  size_t len;
  uint64_t rng;
  unsigned bad;
  bool overflow;
} writer;

static uint64_t draw_record(void *ctx, uint64_t n) {
  writer *wr = ctx;
  uint64_t v = splitmix64(&wr->rng) % 100 < wr->bad ? 0
                                                     : splitmix64(&wr->rng) % n;
  size_t w = draw_width(n);
  if (wr->len + w > sizeof wr->arg) {
    wr->overflow = true;
    return v;
  }
  for (size_t i = 0; i < w; i++) wr->arg[wr->len++] = (uint8_t)(v >> (8 * i));
  return v;
}

/* Ops by letter, for the seed plans below. */
static int op_of(char c) {
  static const char letters[DRV_N_OPS + 1] = "CDRUEWLAMKXSZPF";
  const char *p = strchr(letters, c);
  return p != NULL && c != '\0' ? (int)(p - letters) : -1;
}

typedef struct seed_plan {
  const char *name;
  unsigned bad; /* percent of draws forced to the rare branch */
  const char *ops;
} seed_plan;

/* C create, D destroy, R ref/unref, U unref destroyed, E enqueue, W add_wait,
 * L release, A release_all, M device_marks, K release_marks, X
 * marks_discard, S settle, Z misc, P pool, F fill; '*': a random op byte. */
static const seed_plan PLANS[] = {
    {"create", 15, "CCCCCCCCCCCCCC"},
    {"enqueue", 4, "CCEEEEEEEEEEEELL"},
    {"enqueue-bad-args", 30, "CCEEEEEEEEEEEEEE"},
    {"add-wait", 6, "CCCEEEWEWEWWEWLLLL"},
    {"wait-chain", 4, "CCCCEEEEWWWWWWEEWWLLA"},
    {"release", 6, "CCEEEELELELALEEAL"},
    {"destroy", 8, "CCCEEEWDDEEWLADUU"},
    {"refs", 8, "CCRRRRDRRUURRR"},
    {"snapshots", 6, "CCCEEEMEEMKEXMKX"},
    {"settle", 6, "CCCCCEEEEEEEESSSSS"},
    {"misc", 10, "ZZZZZZZZZZZZZZZZ"},
    {"pool", 6, "CEEEEEEEELPPPPEEEEAPP"},
    {"faults", 45, "CCEEEEWWLLMKSSAD"},
    {"fill", 3, "FFLFFLPFFLFFLPFFLFFLPFFL"}, /* the side stream only */
    {"fill-streams", 2, "CCFFLLFFLLZFFLLFFLLZFFLLFF"},
    {"many-streams", 1, "CCCCCCCCCCCCCCCCCCCCCCCCCCCCEEEEEEEMKMKMKMKMKMXSSDDMK"},
    {"mixed", 8, "************************************************"},
    {"long", 5, "****************************************************"
                "************"},
};

static int write_seeds(const char *dir) {
  size_t n_plans = sizeof PLANS / sizeof PLANS[0];
  for (size_t i = 0; i < n_plans; i++) {
    const seed_plan *pl = &PLANS[i];
    uint64_t pick_rng = 0x5eed0000u + i;
    uint8_t *out = malloc(2 + 257 * strlen(pl->ops));
    size_t n = 0;
    writer wr;
    memset(&wr, 0, sizeof wr);
    wr.rng = 0x1234567u * (i + 1);
    wr.bad = pl->bad;
    configure(draw_record, &wr);
    drv_begin(1, 0);
    for (const char *c = pl->ops; *c; c++) {
      int op = *c == '*' ? (int)op_of_byte((uint8_t)splitmix64(&pick_rng))
                         : op_of(*c);
      if (op < 0) {
        fprintf(stderr, "seed plan %s: no op '%c'\n", pl->name, *c);
        return 1;
      }
      wr.len = 0;
      drv_op((enum drv_op)op);
      if (wr.overflow) {
        fprintf(stderr, "seed plan %s: a call drew more than %zu bytes\n",
                pl->name, sizeof wr.arg);
        return 1;
      }
      out[n++] = byte_of_op((enum drv_op)op);
      out[n++] = (uint8_t)wr.len;
      memcpy(out + n, wr.arg, wr.len);
      n += wr.len;
    }
    drv_end(NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%02zu-%s", dir, i + 1, pl->name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(out, 1, n, f) != n || fclose(f) != 0) {
      fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
    printf("%s: %zu calls, %zu bytes\n", path, strlen(pl->ops), n);
    free(out);
  }
  return 0;
}

/* ---- Set-up ---------------------------------------------------------------- */

static bool rcu_nap; /* LDG_FUZZ_RCU_NAP=1: leave liburcu's 10 ms naps */

/* Replaces libc's poll (see the top of this file). Only a pure delay —
 * no descriptors — is changed. */
int poll(struct pollfd *fds, nfds_t nfds, int timeout) {
  if (fds == NULL && nfds == 0 && !rcu_nap) {
    sched_yield();
    return 0;
  }
  struct timespec ts, *tp = NULL;
  if (timeout >= 0) {
    ts.tv_sec = timeout / 1000;
    ts.tv_nsec = (long)(timeout % 1000) * 1000000L;
    tp = &ts;
  }
  return ppoll(fds, nfds, tp, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *nap = getenv("LDG_FUZZ_RCU_NAP");
  rcu_nap = nap != NULL && *nap != '\0' && strcmp(nap, "0") != 0;
  static const char flag[] = "--write-seeds=";
  for (int i = 1; i < *argc; i++) {
    if (strncmp((*argv)[i], flag, sizeof flag - 1) == 0)
      exit(write_seeds((*argv)[i] + sizeof flag - 1));
  }
  configure(draw_input, &cur);
  return 0;
}
