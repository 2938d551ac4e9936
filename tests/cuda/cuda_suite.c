/*
 * cuda_suite: the behaviour tests of the cuda/ layer, written once against
 * its API (cuda/sl_cuda.h) and run against either driver:
 *
 *   cuda_suite --driver=host      the host executor (cuda/host_executor.h):
 *                                 streams are worker threads that really copy
 *                                 later, so a premature release corrupts data
 *                                 (poisoned staging) or is a use-after-free
 *                                 that ASan reports. Runs in CI, under ASan and
 *                                 TSan too. Two devices by default.
 *   cuda_suite --driver=libcuda   the real driver (libcuda.so.1): real copies,
 *                                 a real kernel (PTX, tests/cuda/kernels.c).
 *                                 Without a driver it prints
 *                                 "SKIPPED: no CUDA driver (libcuda.so.1 not
 *                                 found)" and exits 0, unless --require-gpu.
 *
 * Each test is one function with a one-line description; it gets a fresh
 * slc_context (and, on the host driver, a fresh executor) and must release
 * everything it made: the context's destroy refuses while handles are alive,
 * and the executor counts what was left. With --fork (the default for
 * libcuda) each test runs in a child process with a time limit, so a test
 * that leaves the GPU in a sticky error state cannot affect the next.
 *
 * Modes: by default every test except those of the two modes below;
 * --keep-reentry runs the keep re-entry matrix (keeps calling back into
 * every slc_ function on every path that runs keeps); --fault-sweep runs the
 * failure-injection sweep (host executor); --hooks-only runs the tests that
 * force an interleaving with the test hooks (they need the hooks build,
 * //tests/cuda:cuda_suite_hooks_test, and are skipped elsewhere).
 *
 * Options: --driver=host|libcuda  --only=a,b  --skip=a,b  --list
 * --fork|--no-fork  --keep-reentry|--fault-sweep|--hooks-only
 *          --require-gpu  --libcuda=PATH  --devices=N (host)  --delay-us=N
 *          (host)  --threads=N --iters=N (stress tests)  --timeout=S (fork)
 * Exit status: 0 when no test failed, 1 otherwise.
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda/cuda_testing.h"
#include "cuda/sl_cuda.h"
#include "cuda/sl_engine.h"
#include "ledger/ledger_testing.h"
#include "cuda/host_executor.h"
#include "tests/cuda/kernels.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SUITE_SANITIZED 1
#else
#define SUITE_SANITIZED 0
#endif

enum { PASS = 0, FAIL = 1, SKIP = 77 };

#define MAX_DEV 16

typedef struct suite {
  bool host;           /* the host executor, else libcuda */
  bool forked;         /* this test runs in a child process */
  const char *libcuda; /* path given to dlopen; NULL: libcuda.so.1 */
  int host_devices;
  unsigned delay_us;
  int threads, iters;
  bool hooks; /* the hooks build: cuda_testing.h and the ledger's hooks */
  slc_driver drv;
  /* Per test. */
  slc_context *c;
  int devices;
  slc_module *mod[MAX_DEV];
  bool abandon; /* the test left the device in an error state (fork only) */
  const char *skip_reason;
} suite;

/* ---- Checks ----------------------------------------------------------------
 */

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "    %s:%d: CHECK failed: %s\n      last error: %s\n", \
              __FILE__, __LINE__, #cond, slc_last_error_message());          \
      return FAIL;                                                           \
    }                                                                        \
  } while (0)

#define CHECK_RC(call, want)                                                  \
  do {                                                                        \
    int rc_ = (call);                                                         \
    if (rc_ != (want)) {                                                      \
      fprintf(stderr,                                                         \
              "    %s:%d: %s\n      returned %d (%s), expected %d (%s)\n"     \
              "      last error: %s\n",                                       \
              __FILE__, __LINE__, #call, rc_, slc_strerror(rc_), (int)(want), \
              slc_strerror(want), slc_last_error_message());                  \
      return FAIL;                                                            \
    }                                                                         \
  } while (0)

#define CHECK_OK(call) CHECK_RC(call, LDG_OK)

/* A driver call the driver must refuse: the host executor with exactly
 * `cu` (mapped by slc_code_of); the real driver with any error, whose name
 * the output records. */
#define CHECK_REFUSED(call, cu_want)                                       \
  do {                                                                     \
    slc_clear_error();                                                     \
    int rc2_ = (call);                                                     \
    CUresult cu_ = slc_last_error()->cu;                                   \
    if (rc2_ == LDG_OK || cu_ == CUDA_SUCCESS ||                           \
        (S->host && (cu_ != (cu_want) || rc2_ != slc_code_of(cu_want)))) { \
      fprintf(stderr,                                                      \
              "    %s:%d: %s\n      returned %d, CUresult %d; expected "   \
              "CUresult %d\n      last error: %s\n",                       \
              __FILE__, __LINE__, #call, rc2_, (int)cu_, (int)(cu_want),   \
              slc_last_error_message());                                   \
      return FAIL;                                                         \
    }                                                                      \
  } while (0)

#define SKIP_IF(cond, why)    \
  do {                        \
    if (cond) {               \
      S->skip_reason = (why); \
      return SKIP;            \
    }                         \
  } while (0)

/* Prints what an expected error said, for the record of the GPU runs. */
static void note_error(const char *what) {
  printf("    %s -> %d: %s\n", what, slc_last_error()->code,
         slc_last_error_message());
}

/* ---- Helpers ------------------------------------------------------------ */

static uint32_t pattern(uint32_t seed, size_t i) {
  return (seed + 1u) * 2654435761u + (uint32_t)i * 40503u + 17u;
}

static void fill(void *p, size_t n_words, uint32_t seed) {
  uint32_t *w = p;
  for (size_t i = 0; i < n_words; i++) w[i] = pattern(seed, i);
}

/* Index of the first word that is not pattern(seed) + add, or n_words. */
static size_t mismatch(const void *p, size_t n_words, uint32_t seed,
                       uint32_t add) {
  const uint32_t *w = p;
  for (size_t i = 0; i < n_words; i++)
    if (w[i] != pattern(seed, i) + add) return i;
  return n_words;
}

static bool all_bytes(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return false;
  return true;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A keep that counts. */
typedef struct counter {
  atomic_int n;
} counter;

static void count_release(void *ctx) {
  atomic_fetch_add(&((counter *)ctx)->n, 1);
}

static int count_of(counter *k) { return atomic_load(&k->n); }

static ldg_keep count_keep(counter *k) { return (ldg_keep){count_release, k}; }

#define POISON 0xA5

/* A pinned staging buffer whose keep poisons it and checks that the copy
 * that read it has completed (a raw driver event recorded right after the
 * copy on the same stream, when set). */
typedef struct staging {
  suite *S;
  slc_buffer *buf;
  size_t bytes;
  CUevent done; /* raw event, or NULL */
  atomic_int released;
  atomic_int early; /* released while `done` was not complete */
} staging;

static void staging_release(void *ctx) {
  staging *st = ctx;
  if (st->done != NULL) {
    if (st->S->host) hd_uncounted(true);
    CUresult r = slc_context_driver(st->S->c)->pfn_cuEventQuery(st->done);
    if (st->S->host) hd_uncounted(false);
    if (r != CUDA_SUCCESS) atomic_fetch_add(&st->early, 1);
  }
  /* The host executor knows exactly: no queued copy may still touch it. */
  if (st->S->host &&
      hd_pending_touching(slc_buffer_host(st->buf), st->bytes) != 0)
    atomic_fetch_add(&st->early, 1);
  memset(slc_buffer_host(st->buf), POISON, st->bytes);
  atomic_fetch_add(&st->released, 1);
}

static int staging_init(suite *S, staging *st, size_t bytes, uint32_t seed) {
  memset(st, 0, sizeof(*st));
  st->S = S;
  st->bytes = bytes;
  int rc = slc_buffer_alloc_host(S->c, bytes, &st->buf);
  if (rc == LDG_OK) fill(slc_buffer_host(st->buf), bytes / 4, seed);
  return rc;
}

static ldg_range range_of(const void *p, size_t bytes) {
  return (ldg_range){(uintptr_t)p, bytes};
}

/* Raw driver events (not the layer's), for completion checks in keeps. */
/* The test's own driver calls are not counted by the host executor's
 * failure injection (hd_fail_nth): only the layer's are. */
static void raw_begin(suite *S) {
  if (S->host) hd_uncounted(true);
}

static void raw_end(suite *S) {
  if (S->host) hd_uncounted(false);
}

static int raw_event(suite *S, int device, CUevent *out) {
  raw_begin(S);
  int rc = slc_device_make_current(S->c, device);
  CUresult r = CUDA_ERROR_INVALID_CONTEXT;
  if (rc == LDG_OK)
    r = slc_context_driver(S->c)->pfn_cuEventCreate(out,
                                                    CU_EVENT_DISABLE_TIMING);
  raw_end(S);
  if (rc != LDG_OK) return rc;
  return r == CUDA_SUCCESS ? LDG_OK : SLC_EDRIVER;
}

static int raw_record(suite *S, CUevent ev, slc_stream *s) {
  raw_begin(S);
  int rc = slc_device_make_current(S->c, slc_stream_device(s));
  CUresult r = CUDA_ERROR_INVALID_CONTEXT;
  if (rc == LDG_OK)
    r = slc_context_driver(S->c)->pfn_cuEventRecord(ev, slc_stream_handle(s));
  raw_end(S);
  if (rc != LDG_OK) return rc;
  return r == CUDA_SUCCESS ? LDG_OK : SLC_EDRIVER;
}

/* Waits for the driver stream itself, leaving the ledger untouched: the
 * work is complete but still held. */
static int raw_stream_sync(suite *S, slc_stream *s) {
  raw_begin(S);
  int rc = slc_device_make_current(S->c, slc_stream_device(s));
  CUresult r = CUDA_ERROR_INVALID_CONTEXT;
  if (rc == LDG_OK)
    r = slc_context_driver(S->c)->pfn_cuStreamSynchronize(
        slc_stream_handle(s));
  raw_end(S);
  if (rc != LDG_OK) return rc;
  return r == CUDA_SUCCESS ? LDG_OK : SLC_EDRIVER;
}

static void raw_event_destroy(suite *S, CUevent ev) {
  raw_begin(S);
  if (ev != NULL) (void)slc_context_driver(S->c)->pfn_cuEventDestroy(ev);
  raw_end(S);
}

static int module_for(suite *S, int device, slc_module **out) {
  if (S->mod[device] == NULL) {
    int rc = slc_module_load(S->c, device, slc_test_ptx, &S->mod[device]);
    if (rc != LDG_OK) return rc;
  }
  *out = S->mod[device];
  return LDG_OK;
}

static int kernel(suite *S, int device, const char *name, CUfunction *f) {
  slc_module *m;
  int rc = module_for(S, device, &m);
  if (rc != LDG_OK) return rc;
  return slc_module_function(m, name, f);
}

/* add1 over n words at p, on s. */
static int launch_add1(suite *S, slc_stream *s, CUdeviceptr p, unsigned n,
                       const slc_hold *h) {
  CUfunction f;
  int rc = kernel(S, slc_stream_device(s), "add1", &f);
  if (rc != LDG_OK) return rc;
  void *params[] = {&p, &n};
  return slc_launch(s, f, (slc_dim3){(n + 255) / 256, 1, 1},
                    (slc_dim3){256, 1, 1}, 0, params, h);
}

/* Keeps s busy for ms milliseconds (a spinning kernel; a sleep on the host
 * executor), so that what follows is really pending for a while. */
static int busy(suite *S, slc_stream *s, unsigned ms, const slc_hold *h) {
  CUfunction f;
  int rc = kernel(S, slc_stream_device(s), "spin", &f);
  if (rc != LDG_OK) return rc;
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  void *params[] = {&ns};
  return slc_launch(s, f, (slc_dim3){1, 1, 1}, (slc_dim3){1, 1, 1}, 0, params,
                    h);
}

static slc_hold hold_keep(ldg_keep k) {
  return (slc_hold){k, NULL, 0, NULL, 0};
}

static size_t pending(slc_stream *s) {
  return ldg_pending_count(slc_stream_ledger(s));
}

/* ---- Tests -------------------------------------------------------------- */

static int t_info(suite *S) {
  const slc_driver *d = slc_context_driver(S->c);
  printf("    driver: %s; version %d; %d device(s)\n", d->origin,
         slc_driver_version(S->c), S->devices);
  for (int i = 0; i < S->devices; i++) {
    char name[128];
    CHECK_OK(slc_device_name(S->c, i, name, sizeof(name)));
    printf("    device %d: %s\n", i, name);
  }
  slc_module *m;
  CHECK_OK(module_for(S, 0, &m)); /* the PTX JIT-compiles for device 0 */
  return PASS;
}

static int t_copy_roundtrip(suite *S) {
  const size_t n = 1u << 20, bytes = n * 4;
  staging src;
  slc_buffer *dst, *A, *B;
  CHECK_OK(staging_init(S, &src, bytes, 7));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &dst));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &A));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &B));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  counter k_dd = {0}, k_k = {0}, k_out = {0};

  uint64_t ids1[] = {slc_buffer_id(src.buf), slc_buffer_id(A)};
  ldg_range r1 = range_of(slc_buffer_host(src.buf), bytes);
  slc_hold h1 = {{staging_release, &src}, ids1, 2, &r1, 1};
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(A), slc_buffer_host(src.buf),
                               bytes, &h1));
  uint64_t ids2[] = {slc_buffer_id(A), slc_buffer_id(B)};
  slc_hold h2 = {count_keep(&k_dd), ids2, 2, NULL, 0};
  CHECK_OK(slc_copy_dtod_async(s, slc_buffer_dptr(B), slc_buffer_dptr(A), bytes,
                               &h2));
  uint64_t ids3[] = {slc_buffer_id(B)};
  slc_hold h3 = {count_keep(&k_k), ids3, 1, NULL, 0};
  CHECK_OK(launch_add1(S, s, slc_buffer_dptr(B), (unsigned)n, &h3));
  uint64_t ids4[] = {slc_buffer_id(B), slc_buffer_id(dst)};
  ldg_range r4 = range_of(slc_buffer_host(dst), bytes);
  slc_hold h4 = {count_keep(&k_out), ids4, 2, &r4, 1};
  CHECK_OK(slc_copy_dtoh_async(s, slc_buffer_host(dst), slc_buffer_dptr(B),
                               bytes, &h4));

  /* Nothing was synchronised: everything is held, whatever the device did. */
  CHECK(pending(s) == 4);
  CHECK(slc_buffer_held(src.buf) && slc_buffer_held(A) && slc_buffer_held(dst));
  CHECK_RC(slc_buffer_try_free(src.buf), LDG_EBUSY);
  CHECK(atomic_load(&src.released) == 0);

  CHECK_OK(slc_stream_synchronize(s));
  CHECK(atomic_load(&src.released) == 1);
  CHECK(count_of(&k_dd) == 1 && count_of(&k_k) == 1 && count_of(&k_out) == 1);
  CHECK(pending(s) == 0);
  CHECK(all_bytes(slc_buffer_host(src.buf), bytes, POISON));
  CHECK(mismatch(slc_buffer_host(dst), n, 7, 1) == n);

  CHECK_OK(slc_buffer_try_free(src.buf));
  CHECK_OK(slc_buffer_try_free(dst));
  CHECK_OK(slc_buffer_try_free(A));
  CHECK_OK(slc_buffer_try_free(B));
  CHECK_OK(slc_stream_destroy(s));
  slc_stream_unref(s);
  return PASS;
}

static int t_memset(suite *S) {
  const size_t bytes = 1u << 16;
  slc_buffer *D, *out;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &out));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &s));
  counter k = {0};
  uint64_t id = slc_buffer_id(D);
  slc_hold h = {count_keep(&k), &id, 1, NULL, 0};
  CHECK_OK(slc_memset_d8_async(s, slc_buffer_dptr(D), 0x5A, bytes, &h));
  CHECK_OK(slc_copy_dtoh_async(s, slc_buffer_host(out), slc_buffer_dptr(D),
                               bytes, NULL));
  CHECK(pending(s) == 2);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&k) == 1 && pending(s) == 0);
  CHECK(all_bytes(slc_buffer_host(out), bytes, 0x5A));
  slc_stream_unref(s); /* the last reference destroys */
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_buffer_try_free(out));
  return PASS;
}

/* Each pinned staging buffer is released only after its copy completed:
 * its keep checks a raw event recorded right after the copy and poisons it;
 * the data that arrived must still be the original. */
static int t_staging_after_copy(suite *S) {
  enum { K = 16 };
  const size_t chunk = 1u << 20, words = chunk / 4;
  slc_buffer *D, *out;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, K * chunk, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, K * chunk, &out));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  staging st[K];
  CHECK_OK(busy(S, s, 20, NULL)); /* the copies queue behind it */
  for (int i = 0; i < K; i++) {
    CHECK_OK(staging_init(S, &st[i], chunk, 100u + (uint32_t)i));
    CHECK_OK(raw_event(S, 0, &st[i].done));
    uint64_t ids[] = {slc_buffer_id(st[i].buf), slc_buffer_id(D)};
    ldg_range r = range_of(slc_buffer_host(st[i].buf), chunk);
    slc_hold h = {{staging_release, &st[i]}, ids, 2, &r, 1};
    CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D) + i * chunk,
                                 slc_buffer_host(st[i].buf), chunk, &h));
    CHECK_OK(raw_record(S, st[i].done, s));
  }
  uint64_t oid[] = {slc_buffer_id(D), slc_buffer_id(out)};
  slc_hold ho = {{NULL, NULL}, oid, 2, NULL, 0};
  CHECK_OK(slc_copy_dtoh_async(s, slc_buffer_host(out), slc_buffer_dptr(D),
                               K * chunk, &ho));
  for (int i = 0; i < K; i++) CHECK(atomic_load(&st[i].released) == 0);
  CHECK_OK(slc_stream_synchronize(s));
  for (int i = 0; i < K; i++) {
    CHECK(atomic_load(&st[i].released) == 1);
    CHECK(atomic_load(&st[i].early) == 0);
    CHECK(all_bytes(slc_buffer_host(st[i].buf), chunk, POISON));
    const uint32_t *o = (const uint32_t *)slc_buffer_host(out) + i * words;
    CHECK(mismatch(o, words, 100u + (uint32_t)i, 0) == words);
    raw_event_destroy(S, st[i].done);
    CHECK_OK(slc_buffer_try_free(st[i].buf));
  }
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_buffer_try_free(out));
  return PASS;
}

/* Pageable staging freed by its keep: on the host executor a premature
 * release is a use-after-free that ASan reports. */
typedef struct freeing {
  void *p;
  counter *count;
} freeing;

static void free_release(void *ctx) {
  freeing *f = ctx;
  free(f->p);
  count_release(f->count);
  free(f);
}

static int t_pageable_freed_in_keep(suite *S) {
  const size_t n = 1u << 18, bytes = n * 4;
  slc_buffer *D, *out;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &out));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  counter freed = {0};
  CHECK_OK(busy(S, s, 10, NULL));
  for (int i = 0; i < 4; i++) {
    freeing *f = malloc(sizeof(*f));
    CHECK(f != NULL);
    f->p = malloc(bytes);
    f->count = &freed;
    CHECK(f->p != NULL);
    fill(f->p, n, 3u + (uint32_t)i);
    uint64_t id = slc_buffer_id(D);
    ldg_range r = range_of(f->p, bytes);
    slc_hold h = {{free_release, f}, &id, 1, &r, 1};
    CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), f->p, bytes, &h));
  }
  CHECK_OK(launch_add1(S, s, slc_buffer_dptr(D), (unsigned)n, NULL));
  CHECK_OK(slc_copy_dtoh_async(s, slc_buffer_host(out), slc_buffer_dptr(D),
                               bytes, NULL));
  CHECK(count_of(&freed) == 0);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&freed) == 4);
  CHECK(mismatch(slc_buffer_host(out), n, 6, 1) == n); /* the last copy, +1 */
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_buffer_try_free(out));
  return PASS;
}

/* README's pattern: copy on `copy`, record, `compute` waits, kernel and copy
 * back on `compute`, sync `compute` only: the copy stream's staging buffer is
 * released transitively. */
static int t_record_wait_sync(suite *S) {
  const size_t n = 1u << 20, bytes = n * 4;
  staging st;
  slc_buffer *D, *out;
  CHECK_OK(staging_init(S, &st, bytes, 11));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &out));
  slc_stream *copy, *compute;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &copy));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &compute));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  CHECK_OK(raw_event(S, 0, &st.done));

  CHECK_OK(busy(S, copy, 30, NULL)); /* without the wait, add1 would race */
  uint64_t ids1[] = {slc_buffer_id(st.buf), slc_buffer_id(D)};
  ldg_range r1 = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h1 = {{staging_release, &st}, ids1, 2, &r1, 1};
  CHECK_OK(slc_copy_htod_async(copy, slc_buffer_dptr(D),
                               slc_buffer_host(st.buf), bytes, &h1));
  CHECK_OK(raw_record(S, st.done, copy));
  CHECK_OK(slc_event_record(e, copy));
  CHECK_OK(slc_stream_wait_event(compute, e));
  uint64_t ids2[] = {slc_buffer_id(D)};
  slc_hold h2 = {{NULL, NULL}, ids2, 1, NULL, 0};
  CHECK_OK(launch_add1(S, compute, slc_buffer_dptr(D), (unsigned)n, &h2));
  uint64_t ids3[] = {slc_buffer_id(D), slc_buffer_id(out)};
  slc_hold h3 = {{NULL, NULL}, ids3, 2, NULL, 0};
  CHECK_OK(slc_copy_dtoh_async(compute, slc_buffer_host(out),
                               slc_buffer_dptr(D), bytes, &h3));
  CHECK(pending(copy) == 2 && pending(compute) == 2);

  CHECK_OK(slc_stream_synchronize(compute));
  CHECK(atomic_load(&st.released) == 1); /* `copy` was never synchronised */
  CHECK(atomic_load(&st.early) == 0);
  CHECK(pending(copy) == 0 && pending(compute) == 0);
  CHECK(mismatch(slc_buffer_host(out), n, 11, 1) == n);

  raw_event_destroy(S, st.done);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(copy);
  slc_stream_unref(compute);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_buffer_try_free(out));
  return PASS;
}

static int t_event_sync_to_mark(suite *S) {
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  counter k1 = {0}, k2 = {0}, k3 = {0};
  slc_hold h1 = hold_keep(count_keep(&k1)), h2 = hold_keep(count_keep(&k2)),
           h3 = hold_keep(count_keep(&k3));
  CHECK_OK(slc_memset_d8_async(s, slc_buffer_dptr(D), 1, 4096, &h1));
  CHECK_OK(slc_event_record(e, s));
  CHECK_OK(busy(S, s, 50, &h2));
  CHECK_OK(slc_memset_d8_async(s, slc_buffer_dptr(D), 2, 4096, &h3));
  uint64_t sid = 0;
  ldg_seq mark = 0;
  CHECK(slc_event_recorded(e, &sid, &mark));
  CHECK(sid == ldg_stream_id(slc_stream_ledger(s)) && mark == 1);

  CHECK_OK(slc_event_synchronize(e));
  CHECK(count_of(&k1) == 1 && count_of(&k2) == 0 && count_of(&k3) == 0);
  CHECK(pending(s) == 2);
  CHECK_OK(slc_event_synchronize(e)); /* again: nothing more */
  CHECK(count_of(&k1) == 1 && pending(s) == 2);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&k2) == 1 && count_of(&k3) == 1 && pending(s) == 0);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

static int t_event_and_stream_query(suite *S) {
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  counter k = {0};
  slc_hold h = hold_keep(count_keep(&k));
  CHECK_OK(busy(S, s, 300, &h));
  CHECK_OK(slc_event_record(e, s));
  bool done = true, idle = true;
  CHECK_OK(slc_event_query(e, &done));
  CHECK(!done && count_of(&k) == 0);
  CHECK_OK(slc_stream_query(s, &idle));
  CHECK(!idle && count_of(&k) == 0 && pending(s) == 1);
  double t0 = now_s();
  while (!done && now_s() - t0 < 60) {
    sleep_ms(2);
    CHECK_OK(slc_event_query(e, &done));
  }
  CHECK(done);
  CHECK(count_of(&k) == 1 && pending(s) == 0);
  counter k2 = {0};
  slc_hold h2 = hold_keep(count_keep(&k2));
  CHECK_OK(busy(S, s, 1, &h2));
  idle = false;
  t0 = now_s();
  while (!idle && now_s() - t0 < 60) {
    CHECK_OK(slc_stream_query(s, &idle));
    if (!idle) sleep_ms(1);
  }
  CHECK(idle && count_of(&k2) == 1 && pending(s) == 0);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(s);
  return PASS;
}

static int t_event_rerecord(suite *S) {
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *a, *b;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &a));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &b));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  counter ka = {0}, kb = {0};
  slc_hold ha = hold_keep(count_keep(&ka)), hb = hold_keep(count_keep(&kb));
  CHECK_OK(slc_memset_d8_async(a, slc_buffer_dptr(D), 1, 2048, &ha));
  CHECK_OK(slc_event_record(e, a));
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(D) + 2048, 2, 2048, &hb));
  CHECK_OK(slc_event_record(e, b)); /* replaces the record on a */
  uint64_t sid = 0;
  CHECK(slc_event_recorded(e, &sid, NULL));
  CHECK(sid == ldg_stream_id(slc_stream_ledger(b)));
  CHECK_OK(slc_event_synchronize(e));
  CHECK(count_of(&kb) == 1);
  CHECK(count_of(&ka) == 0 && pending(a) == 1); /* a was not waited for */
  CHECK_OK(slc_stream_synchronize(a));
  CHECK(count_of(&ka) == 1);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(a);
  slc_stream_unref(b);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

static int t_event_never_recorded(suite *S) {
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *s, *b;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &b));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  counter k = {0};
  slc_hold h = hold_keep(count_keep(&k));
  CHECK_OK(slc_memset_d8_async(s, slc_buffer_dptr(D), 1, 4096, &h));
  CHECK(!slc_event_recorded(e, NULL, NULL));
  CHECK_OK(slc_event_synchronize(e));
  bool done = false;
  CHECK_OK(slc_event_query(e, &done));
  CHECK(done); /* the driver: a never-recorded event is complete */
  CHECK(count_of(&k) == 0 && pending(s) == 1);
  ldg_seq before = ldg_mark(slc_stream_ledger(b));
  CHECK_OK(slc_stream_wait_event(b, e));
  CHECK(ldg_mark(slc_stream_ledger(b)) == before); /* no wait recorded */
  CHECK_OK(slc_stream_synchronize(b));
  CHECK(count_of(&k) == 0);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&k) == 1);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(s);
  slc_stream_unref(b);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* a -> e1 -> b -> e2 -> c: synchronising c releases b and a up to the
 * events, not what a did after e1. */
static int t_wait_chain(suite *S) {
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *a, *b, *c;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &a));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &b));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &c));
  slc_event *e1, *e2;
  CHECK_OK(slc_event_create(S->c, 0, &e1));
  CHECK_OK(slc_event_create(S->c, 0, &e2));
  counter ka = {0}, ka2 = {0}, kb = {0}, kc = {0};
  slc_hold ha = hold_keep(count_keep(&ka)), ha2 = hold_keep(count_keep(&ka2)),
           hb = hold_keep(count_keep(&kb)), hc = hold_keep(count_keep(&kc));
  CHECK_OK(busy(S, a, 20, &ha));
  CHECK_OK(slc_event_record(e1, a));
  CHECK_OK(slc_memset_d8_async(a, slc_buffer_dptr(D), 1, 1024, &ha2));
  CHECK_OK(slc_stream_wait_event(b, e1));
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(D) + 1024, 2, 1024, &hb));
  CHECK_OK(slc_event_record(e2, b));
  CHECK_OK(slc_stream_wait_event(c, e2));
  CHECK_OK(slc_memset_d8_async(c, slc_buffer_dptr(D) + 2048, 3, 1024, &hc));
  CHECK_OK(slc_stream_synchronize(c));
  CHECK(count_of(&kc) == 1 && count_of(&kb) == 1 && count_of(&ka) == 1);
  CHECK(count_of(&ka2) == 0 && pending(a) == 1 && pending(b) == 0);
  CHECK_OK(slc_stream_synchronize(a));
  CHECK(count_of(&ka2) == 1);
  CHECK_OK(slc_event_destroy(e1));
  CHECK_OK(slc_event_destroy(e2));
  slc_stream_unref(a);
  slc_stream_unref(b);
  slc_stream_unref(c);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* A synchronous copy settles the non-blocking streams holding its vector. */
static int t_nonblocking_settle(suite *S) {
  const size_t n = 1u << 18, bytes = n * 4;
  staging st;
  slc_buffer *X;
  CHECK_OK(staging_init(S, &st, bytes, 21));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &X));
  slc_stream *nb;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &nb));
  CHECK_OK(busy(S, nb, 20, NULL));
  uint64_t ids[] = {slc_buffer_id(X), slc_buffer_id(st.buf)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, ids, 2, &r, 1};
  CHECK_OK(slc_copy_htod_async(nb, slc_buffer_dptr(X), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_RC(slc_buffer_try_free(X), LDG_EBUSY);
  uint32_t *back = malloc(bytes);
  CHECK(back != NULL);
  CHECK_OK(slc_copy_dtoh(back, X, 0, bytes)); /* drains nb first */
  CHECK(atomic_load(&st.released) == 1);
  CHECK(mismatch(back, n, 21, 0) == n);
  free(back);
  CHECK(!slc_buffer_held(X));
  /* And the other direction. */
  uint32_t *src = malloc(bytes);
  CHECK(src != NULL);
  fill(src, n, 22);
  counter k = {0};
  uint64_t id = slc_buffer_id(X);
  slc_hold h2 = {count_keep(&k), &id, 1, NULL, 0};
  CHECK_OK(busy(S, nb, 20, NULL));
  CHECK_OK(slc_memset_d8_async(nb, slc_buffer_dptr(X), 0, bytes, &h2));
  CHECK_OK(slc_copy_htod(X, 0, src, bytes)); /* after the memset */
  CHECK(count_of(&k) == 1);
  CHECK_OK(slc_copy_dtoh(src, X, 0, bytes));
  CHECK(mismatch(src, n, 22, 0) == n);
  free(src);
  CHECK_RC(slc_copy_htod(X, 8, NULL, bytes), LDG_EINVAL); /* out of bounds */
  note_error("slc_copy_htod past the end");
  slc_stream_unref(nb);
  CHECK_OK(slc_buffer_try_free(X));
  CHECK_OK(slc_buffer_try_free(st.buf));
  return PASS;
}

static int t_free_settles(suite *S) {
  const size_t bytes = 1u << 16;
  slc_buffer *Y, *Z, *D, *P;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &Y));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &Z));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &P));
  slc_stream *s, *nb;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &nb));
  counter ky = {0}, kz = {0}, kp = {0}, km = {0};
  /* (a) held by a blocking stream: settled by synchronising the device. */
  uint64_t yid = slc_buffer_id(Y);
  slc_hold hy = {count_keep(&ky), &yid, 1, NULL, 0};
  CHECK_OK(busy(S, s, 20, NULL));
  CHECK_OK(slc_memset_d8_async(s, slc_buffer_dptr(Y), 1, bytes, &hy));
  CHECK_RC(slc_buffer_try_free(Y), LDG_EBUSY);
  note_error("slc_buffer_try_free of a held buffer");
  CHECK_OK(slc_buffer_free(Y));
  CHECK(count_of(&ky) == 1);
  /* (b) held by a non-blocking stream: settled by draining it. */
  uint64_t zid = slc_buffer_id(Z);
  slc_hold hz = {count_keep(&kz), &zid, 1, NULL, 0};
  CHECK_OK(busy(S, nb, 20, NULL));
  CHECK_OK(slc_memset_d8_async(nb, slc_buffer_dptr(Z), 1, bytes, &hz));
  CHECK_OK(slc_buffer_free(Z));
  CHECK(count_of(&kz) == 1);
  /* (c) a pinned buffer named only by its bytes. */
  ldg_range rp = range_of(slc_buffer_host(P), bytes);
  slc_hold hp = {count_keep(&kp), NULL, 0, &rp, 1};
  CHECK_OK(busy(S, s, 20, NULL));
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(P), bytes,
                               &hp));
  CHECK(slc_buffer_held(P));
  CHECK_OK(slc_buffer_free(P));
  CHECK(count_of(&kp) == 1);
  /* (d) a pageable host range. */
  void *M = malloc(bytes);
  CHECK(M != NULL);
  memset(M, 3, bytes);
  ldg_range rm = range_of(M, bytes);
  slc_hold hm = {count_keep(&km), NULL, 0, &rm, 1};
  CHECK_OK(busy(S, nb, 20, NULL));
  CHECK_OK(slc_copy_htod_async(nb, slc_buffer_dptr(D), M, bytes, &hm));
  CHECK(ldg_holds_host_range(slc_context_ledger(S->c), (uintptr_t)M, bytes));
  CHECK_OK(slc_host_range_settle(S->c, M, bytes));
  CHECK(count_of(&km) == 1);
  free(M);
  slc_stream_unref(s);
  slc_stream_unref(nb);
  CHECK_OK(slc_buffer_free(D));
  return PASS;
}

static int t_device_sync(suite *S) {
  slc_stream *s1, *s2, *s3 = NULL;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s1));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &s2));
  counter k1 = {0}, k2 = {0}, k3 = {0};
  slc_hold h1 = hold_keep(count_keep(&k1)), h2 = hold_keep(count_keep(&k2)),
           h3 = hold_keep(count_keep(&k3));
  CHECK_OK(busy(S, s1, 20, &h1));
  CHECK_OK(busy(S, s2, 20, &h2));
  if (S->devices >= 2) {
    CHECK_OK(slc_stream_create(S->c, 1, 0, &s3));
    CHECK_OK(busy(S, s3, 20, &h3));
  }
  CHECK_OK(slc_device_synchronize(S->c, 0));
  CHECK(count_of(&k1) == 1 && count_of(&k2) == 1);
  CHECK(pending(s1) == 0 && pending(s2) == 0);
  if (s3 != NULL) {
    CHECK(count_of(&k3) == 0 && pending(s3) == 1); /* only its device */
    CHECK_OK(slc_device_synchronize(S->c, 1));
    CHECK(count_of(&k3) == 1);
    slc_stream_unref(s3);
  }
  CHECK_RC(slc_device_synchronize(S->c, S->devices), LDG_EINVAL);
  slc_stream_unref(s1);
  slc_stream_unref(s2);
  return PASS;
}

/* Cross-device: a copy on device 0, an event on device 0, a stream of device
 * 1 waits on it; synchronising device 1 releases device 0's copy up to the
 * event (transitively), not what device 0 did after it. */
static int t_cross_device_wait(suite *S) {
  SKIP_IF(S->devices < 2, "needs 2 devices");
  const size_t bytes = 1u << 20;
  staging st;
  slc_buffer *D0, *D1;
  CHECK_OK(staging_init(S, &st, bytes, 31));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D0));
  CHECK_OK(slc_buffer_alloc_device(S->c, 1, bytes, &D1));
  slc_stream *a, *b;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &a));
  CHECK_OK(slc_stream_create(S->c, 1, SLC_STREAM_NONBLOCKING, &b));
  slc_event *e0;
  CHECK_OK(slc_event_create(S->c, 0, &e0));
  CHECK_OK(raw_event(S, 0, &st.done));
  CHECK_OK(busy(S, a, 30, NULL));
  uint64_t ids[] = {slc_buffer_id(st.buf), slc_buffer_id(D0)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, ids, 2, &r, 1};
  CHECK_OK(slc_copy_htod_async(a, slc_buffer_dptr(D0), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_OK(raw_record(S, st.done, a));
  CHECK_RC(slc_event_record(e0, b), LDG_EINVAL); /* wrong device */
  note_error("slc_event_record on another device's stream");
  CHECK_OK(slc_event_record(e0, a));
  counter ka2 = {0}, kb = {0};
  slc_hold ha2 = hold_keep(count_keep(&ka2)), hb = hold_keep(count_keep(&kb));
  CHECK_OK(slc_memset_d8_async(a, slc_buffer_dptr(D0), 0, 64, &ha2));
  CHECK_OK(slc_stream_wait_event(b, e0));
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(D1), 1, bytes, &hb));

  CHECK_OK(slc_device_synchronize(S->c, 1));
  CHECK(count_of(&kb) == 1);
  CHECK(atomic_load(&st.released) == 1 && atomic_load(&st.early) == 0);
  CHECK(count_of(&ka2) == 0 && pending(a) == 1);
  CHECK_OK(slc_device_synchronize(S->c, 0));
  CHECK(count_of(&ka2) == 1 && pending(a) == 0);

  raw_event_destroy(S, st.done);
  CHECK_OK(slc_event_destroy(e0));
  slc_stream_unref(a);
  slc_stream_unref(b);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D0));
  CHECK_OK(slc_buffer_try_free(D1));
  return PASS;
}

/* Data across devices: copy to device 0, device 1 waits, copies device 0's
 * buffer into its own (peer / unified addressing), adds 1, copies back. */
static int t_cross_device_copy(suite *S) {
  SKIP_IF(S->devices < 2, "needs 2 devices");
  const size_t n = 1u << 20, bytes = n * 4;
  staging st;
  slc_buffer *D0, *D1, *out;
  CHECK_OK(staging_init(S, &st, bytes, 41));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D0));
  CHECK_OK(slc_buffer_alloc_device(S->c, 1, bytes, &D1));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &out));
  slc_stream *a, *b;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &a));
  CHECK_OK(slc_stream_create(S->c, 1, 0, &b));
  slc_event *e0;
  CHECK_OK(slc_event_create(S->c, 0, &e0));
  CHECK_OK(busy(S, a, 20, NULL));
  uint64_t ids[] = {slc_buffer_id(st.buf), slc_buffer_id(D0)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, ids, 2, &r, 1};
  CHECK_OK(slc_copy_htod_async(a, slc_buffer_dptr(D0), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_OK(slc_event_record(e0, a));
  CHECK_OK(slc_stream_wait_event(b, e0));
  uint64_t ids2[] = {slc_buffer_id(D0), slc_buffer_id(D1)};
  slc_hold h2 = {{NULL, NULL}, ids2, 2, NULL, 0};
  CHECK_OK(slc_copy_dtod_async(b, slc_buffer_dptr(D1), slc_buffer_dptr(D0),
                               bytes, &h2));
  CHECK_OK(launch_add1(S, b, slc_buffer_dptr(D1), (unsigned)n, NULL));
  CHECK_OK(slc_copy_dtoh_async(b, slc_buffer_host(out), slc_buffer_dptr(D1),
                               bytes, NULL));
  CHECK_OK(slc_stream_synchronize(b));
  CHECK(atomic_load(&st.released) == 1 && pending(a) == 0);
  CHECK(mismatch(slc_buffer_host(out), n, 41, 1) == n);
  CHECK_OK(slc_event_destroy(e0));
  slc_stream_unref(a);
  slc_stream_unref(b);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D0));
  CHECK_OK(slc_buffer_try_free(D1));
  CHECK_OK(slc_buffer_try_free(out));
  return PASS;
}

/* ---- Several devices (issue 13) -------------------------------------------
 * Each runs on every device the driver shows: 8 on the host executor in CI
 * (//tests/cuda:cuda_suite_multigpu_test), all GPUs of a node on libcuda. */

/* One stream, event and device buffer per device, for the chains below. */
typedef struct chain {
  int n;
  slc_stream *s[MAX_DEV];
  slc_event *e[MAX_DEV];
  slc_buffer *d[MAX_DEV];
  counter kw[MAX_DEV]; /* work before device d's record */
  counter ka[MAX_DEV]; /* work after it */
  ldg_seq kw_mark[MAX_DEV]; /* the stream's mark just before kw's work */
  CUfunction gate[MAX_DEV]; /* host executor: after each record but the
                             * last device's, until `open` (NULL: none) */
  atomic_int open;
} chain;

/* A host kernel that waits until *flag is set: holds a stream at a point
 * the test chooses (the host executor only; GPUs have no such kernel). */
static void gate_kernel(void *const *params, const hd_dims *dims) {
  (void)dims;
  atomic_int *flag = *(atomic_int *const *)params[0];
  while (!atomic_load(flag)) sleep_ms(1);
}

static int gate_function(suite *S, int device, CUfunction *f) {
  static bool registered; /* registrations survive hd_shutdown */
  if (!registered) {
    const size_t sizes[] = {sizeof(atomic_int *)};
    CHECK(hd_register_kernel("suite_gate", gate_kernel, 1, sizes) == 0);
    registered = true;
  }
  CHECK_OK(kernel(S, device, "suite_gate", f));
  return PASS;
}

static int chain_begin(suite *S, chain *ch, staging *st, uint32_t seed) {
  memset(ch, 0, sizeof(*ch));
  ch->n = S->devices;
  CHECK_OK(staging_init(S, st, 1u << 12, seed));
  return PASS;
}

static int chain_streams(suite *S, chain *ch, int from, int to) {
  for (int d = from; d < to; d++) {
    CHECK_OK(slc_stream_create(S->c, d, SLC_STREAM_NONBLOCKING, &ch->s[d]));
    CHECK_OK(slc_event_create(S->c, d, &ch->e[d]));
    CHECK_OK(slc_buffer_alloc_device(S->c, d, 8192, &ch->d[d]));
  }
  return PASS;
}

/* Device 0 copies st in (its keep checks the copy completed) and records;
 * each device d > 0 waits on d - 1's event, works, records; every device
 * then works past its record. */
static int chain_issue(suite *S, chain *ch, staging *st) {
  const size_t bytes = st->bytes;
  CHECK_OK(raw_event(S, 0, &st->done));
  CHECK_OK(busy(S, ch->s[0], 20, NULL));
  uint64_t ids[] = {slc_buffer_id(st->buf)};
  ldg_range r = range_of(slc_buffer_host(st->buf), bytes);
  slc_hold h = {{staging_release, st}, ids, 1, &r, 1};
  CHECK_OK(slc_copy_htod_async(ch->s[0], slc_buffer_dptr(ch->d[0]),
                               slc_buffer_host(st->buf), bytes, &h));
  CHECK_OK(raw_record(S, st->done, ch->s[0]));
  for (int d = 0; d < ch->n; d++) {
    slc_hold hw = hold_keep(count_keep(&ch->kw[d])),
             ha = hold_keep(count_keep(&ch->ka[d]));
    if (d > 0) CHECK_OK(slc_stream_wait_event(ch->s[d], ch->e[d - 1]));
    ch->kw_mark[d] = ldg_mark(slc_stream_ledger(ch->s[d]));
    CHECK_OK(slc_buf_memset_async(ch->s[d], ch->d[d], 4096, 1, 1024, &hw));
    CHECK_OK(slc_event_record(ch->e[d], ch->s[d]));
    if (ch->gate[d] != NULL) {
      atomic_int *flag = &ch->open;
      void *params[] = {&flag};
      CHECK_OK(slc_launch(ch->s[d], ch->gate[d], (slc_dim3){1, 1, 1},
                          (slc_dim3){1, 1, 1}, 0, params, NULL));
    }
    CHECK_OK(slc_buf_memset_async(ch->s[d], ch->d[d], 6144, 2, 1024, &ha));
  }
  return PASS;
}

/* After the last stream completed past its wait: every earlier device is
 * released up to its event, transitively, and not past it. */
static int chain_check_transitive(suite *S, chain *ch, staging *st) {
  (void)S;
  CHECK(atomic_load(&st->released) == 1 && atomic_load(&st->early) == 0);
  for (int d = 0; d < ch->n; d++) {
    if (count_of(&ch->kw[d]) != 1)
      fprintf(stderr, "    device %d: work before its record not released\n",
              d);
    CHECK(count_of(&ch->kw[d]) == 1);
  }
  for (int d = 0; d + 1 < ch->n; d++)
    CHECK(count_of(&ch->ka[d]) == 0 && pending(ch->s[d]) >= 1);
  return PASS;
}

static int chain_end(suite *S, chain *ch, staging *st) {
  atomic_store(&ch->open, 1);
  for (int d = 0; d < ch->n; d++) CHECK_OK(slc_stream_synchronize(ch->s[d]));
  for (int d = 0; d < ch->n; d++) {
    CHECK(count_of(&ch->ka[d]) == 1 && pending(ch->s[d]) == 0);
    CHECK_OK(slc_event_destroy(ch->e[d]));
    slc_stream_unref(ch->s[d]);
    CHECK_OK(slc_buffer_try_free(ch->d[d]));
  }
  raw_event_destroy(S, st->done);
  CHECK_OK(slc_buffer_try_free(st->buf));
  return PASS;
}

/* A chain of waits through every device: 0 -> 1 -> ... -> N-1. Syncing only
 * the last stream releases every device up to its event. */
static int t_chain_all_devices(suite *S) {
  SKIP_IF(S->devices < 3, "needs 3 devices");
  chain ch;
  staging st;
  CHECK(chain_begin(S, &ch, &st, 53) == PASS);
  CHECK(chain_streams(S, &ch, 0, ch.n) == PASS);
  CHECK(chain_issue(S, &ch, &st) == PASS);
  CHECK(atomic_load(&st.released) == 0 && count_of(&ch.kw[0]) == 0);
  CHECK_OK(slc_stream_synchronize(ch.s[ch.n - 1]));
  CHECK(count_of(&ch.ka[ch.n - 1]) == 1);
  CHECK(chain_check_transitive(S, &ch, &st) == PASS);
  return chain_end(S, &ch, &st);
}

/* The same chain released by the progress engine, with no sync: polled
 * from this thread (no engine thread), markers only as tail markers (every
 * 4096 operations or 60 s otherwise), so a marker covers a stream's work
 * past its record. The earlier devices' streams were created before the
 * engine was enabled: where the engine does not drive them, their release
 * up to their events can only be transitive; where it does (an engine that
 * takes existing streams), their own markers cover work that the gate
 * holds (host executor: a kernel after each earlier record waits until the
 * test opens it), so again only the last stream's markers can release
 * them. Checked by each stream's own engine release mark staying below the
 * work released; nothing past an event is released. */
static int t_chain_all_devices_engine(suite *S) {
  SKIP_IF(S->devices < 3, "needs 3 devices");
  chain ch;
  staging st;
  CHECK(chain_begin(S, &ch, &st, 59) == PASS);
  if (S->host)
    for (int d = 0; d + 1 < ch.n; d++)
      CHECK(gate_function(S, d, &ch.gate[d]) == PASS);
  CHECK(chain_streams(S, &ch, 0, ch.n - 1) == PASS);
  slc_engine_config cfg = {.thread = false,
                           .marker_every_ops = 4096,
                           .marker_every_us = 60u * 1000 * 1000};
  CHECK_OK(slc_engine_enable(S->c, &cfg));
  CHECK(chain_streams(S, &ch, ch.n - 1, ch.n) == PASS);
  CHECK(chain_issue(S, &ch, &st) == PASS);
  /* Until the last device's work past its wait is released (a generous
   * bound against a hang, not a timing assertion). */
  for (double t0 = now_s(); count_of(&ch.kw[ch.n - 1]) == 0;) {
    CHECK_OK(slc_engine_poll(S->c, NULL));
    if (now_s() - t0 > 60) CHECK(!"the engine never released the chain");
    sleep_ms(1);
  }
  int transitive = 0, driven = 0;
  for (int d = 0; d + 1 < ch.n; d++) {
    slc_stream_progress p;
    CHECK_OK(slc_stream_progress_get(ch.s[d], &p));
    CHECK(count_of(&ch.kw[d]) == 1);
    driven += p.engine_driven;
    /* Released past kw_mark, but not by its own markers: transitively. */
    if (p.released_mark <= ch.kw_mark[d]) transitive++;
    else CHECK(p.engine_driven);
    /* Past its event: held by the gate, or by no marker at all. */
    if (S->host || !p.engine_driven) CHECK(count_of(&ch.ka[d]) == 0);
  }
  printf("    %d of %d earlier streams released transitively by the last "
         "one's markers (%d driven by the engine themselves)\n",
         transitive, ch.n - 1, driven);
  /* With the gate, no stream's own marker can complete first. */
  if (S->host) CHECK(transitive == ch.n - 1);
  CHECK(atomic_load(&st.released) == 1 && atomic_load(&st.early) == 0);
  slc_engine_stats es;
  CHECK_OK(slc_engine_stats_get(S->c, &es));
  CHECK(es.releases >= 1);
  return chain_end(S, &ch, &st);
}

/* Peer access: what the driver says, enabling it (idempotent, one
 * direction), refusing it where the devices cannot, bad input. On the host
 * executor device 0 cannot access device 1 (turned off for the test). */
static int t_peer_access(suite *S) {
  SKIP_IF(S->devices < 2, "needs 2 devices");
  const int n = S->devices;
  if (S->host) hd_set_peer_access(0, 1, false);
  for (int i = 0; i < n; i++) {
    char line[160];
    int len = snprintf(line, sizeof(line), "    device %d can access:", i);
    for (int j = 0; j < n; j++) {
      bool can = true;
      CHECK_OK(slc_device_can_access_peer(S->c, i, j, &can));
      if (i == j) CHECK(!can);
      if (S->host) CHECK(can == (i != j && !(i == 0 && j == 1)));
      if (can && len < (int)sizeof(line) - 4)
        len += snprintf(line + len, sizeof(line) - (size_t)len, " %d", j);
      CHECK(!slc_device_peer_access(S->c, i, j));
    }
    printf("%s\n", line);
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      bool can;
      CHECK_OK(slc_device_can_access_peer(S->c, i, j, &can));
      if (can) {
        CHECK_OK(slc_device_enable_peer_access(S->c, i, j));
        CHECK_OK(slc_device_enable_peer_access(S->c, i, j)); /* again */
        CHECK(slc_device_peer_access(S->c, i, j));
      } else {
        CHECK_REFUSED(slc_device_enable_peer_access(S->c, i, j),
                      CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
        note_error("slc_device_enable_peer_access where the devices cannot");
        CHECK(!slc_device_peer_access(S->c, i, j));
      }
    }
  if (S->host) { /* one direction: 1 -> 0 on, 0 -> 1 not */
    CHECK(slc_device_peer_access(S->c, 1, 0));
    CHECK(!slc_device_peer_access(S->c, 0, 1));
  }
  bool can;
  CHECK_RC(slc_device_enable_peer_access(S->c, 1, 1), LDG_EINVAL);
  CHECK_RC(slc_device_enable_peer_access(S->c, 0, n), LDG_EINVAL);
  CHECK_RC(slc_device_enable_peer_access(NULL, 0, 1), LDG_EINVAL);
  CHECK_RC(slc_device_can_access_peer(S->c, -1, 0, &can), LDG_EINVAL);
  CHECK_RC(slc_device_can_access_peer(S->c, 0, 1, NULL), LDG_EINVAL);
  CHECK(!slc_device_peer_access(S->c, 0, n) &&
        !slc_device_peer_access(NULL, 0, 1));
  return PASS;
}

/* Data around every device: device 0's buffer is copied to device 1, 2,
 * ..., each hop on the receiving device after a wait on the previous
 * device's event, each adding 1. Even hops enable peer access where the
 * devices can and copy directly; odd hops stage through a small pinned
 * buffer (several pieces), so a real node runs both paths. On the host
 * executor the odd hops cannot even have peer access; a direct copy never
 * ran without it (hd_unpeered_copies). Syncing the last stream releases
 * every buffer and staging buffer of every device, transitively. */
static int t_peer_copy_ring(suite *S) {
  SKIP_IF(S->devices < 2, "needs 2 devices");
  const int n = S->devices;
  const size_t words = 1u << 14, bytes = words * 4;
  if (S->host)
    for (int d = 1; d < n; d += 2) hd_set_peer_access(d, d - 1, false);
  staging st;
  CHECK_OK(staging_init(S, &st, bytes, 61));
  slc_stream *s[MAX_DEV];
  slc_event *e[MAX_DEV];
  slc_buffer *D[MAX_DEV], *stg[MAX_DEV], *out;
  bool want_staged[MAX_DEV] = {false};
  for (int d = 0; d < n; d++) {
    CHECK_OK(slc_stream_create(S->c, d, SLC_STREAM_NONBLOCKING, &s[d]));
    CHECK_OK(slc_event_create(S->c, d, &e[d]));
    CHECK_OK(slc_buffer_alloc_device(S->c, d, bytes, &D[d]));
    CHECK_OK(slc_buffer_alloc_host(S->c, bytes / 3 + 4, &stg[d]));
    if (d > 0) { /* odd hops stage, even hops go peer to peer if they can */
      bool can;
      CHECK_OK(slc_device_can_access_peer(S->c, d, d - 1, &can));
      if (can && d % 2 == 0)
        CHECK_OK(slc_device_enable_peer_access(S->c, d, d - 1));
      want_staged[d] = !can || d % 2 != 0;
    }
  }
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &out));
  CHECK_OK(raw_event(S, 0, &st.done));
  CHECK_OK(busy(S, s[0], 20, NULL));
  CHECK_OK(slc_buf_copy_async(s[0], D[0], 0, st.buf, 0, bytes,
                              &(slc_hold){.keep = {staging_release, &st}}));
  CHECK_OK(raw_record(S, st.done, s[0]));
  CHECK_OK(slc_event_record(e[0], s[0]));
  long unpeered0 = S->host ? hd_unpeered_copies() : 0;
  for (int d = 1; d < n; d++) {
    CHECK_OK(slc_stream_wait_event(s[d], e[d - 1]));
    bool staged = !want_staged[d];
    size_t before = pending(s[d]);
    CHECK_OK(slc_buf_copy_peer_async(s[d], D[d], 0, D[d - 1], 0, bytes,
                                     stg[d], NULL, &staged));
    CHECK(staged == want_staged[d]);
    /* staged: three pieces, each a copy out and a copy in */
    CHECK(pending(s[d]) - before == (staged ? 6u : 1u));
    CHECK(slc_buffer_held(D[d - 1]) && slc_buffer_held(D[d]));
    CHECK(slc_buffer_held(stg[d]) == staged);
    CHECK_OK(launch_add1(S, s[d], slc_buffer_dptr(D[d]), (unsigned)words,
                         &(slc_hold){.vec_ids = (uint64_t[]){slc_buffer_id(
                                         D[d])},
                                     .n_vec = 1}));
    CHECK_OK(slc_event_record(e[d], s[d]));
  }
  if (S->host) CHECK(hd_unpeered_copies() == unpeered0);
  CHECK_OK(slc_buf_copy_async(s[n - 1], out, 0, D[n - 1], 0, bytes, NULL));
  for (int d = 1; d < n; d++) /* the staging cannot go under its copies */
    if (want_staged[d]) CHECK_RC(slc_buffer_try_free(stg[d]), LDG_EBUSY);
  CHECK_OK(slc_stream_synchronize(s[n - 1]));
  CHECK(atomic_load(&st.released) == 1 && atomic_load(&st.early) == 0);
  CHECK(mismatch(slc_buffer_host(out), words, 61, (uint32_t)(n - 1)) ==
        words);
  for (int d = 0; d < n; d++) {
    CHECK(!slc_buffer_held(D[d]) && !slc_buffer_held(stg[d]));
    CHECK(pending(s[d]) == 0);
  }
  CHECK_OK(slc_buffer_try_free(out));
  for (int d = 0; d < n; d++) {
    CHECK_OK(slc_event_destroy(e[d]));
    slc_stream_unref(s[d]);
    CHECK_OK(slc_buffer_try_free(D[d]));
    CHECK_OK(slc_buffer_try_free(stg[d]));
  }
  raw_event_destroy(S, st.done);
  CHECK_OK(slc_buffer_try_free(st.buf));
  return PASS;
}

/* Bad input to the peer copy: refused with nothing issued. */
static int t_peer_copy_bad_input(suite *S) {
  SKIP_IF(S->devices < 3, "needs 3 devices");
  slc_stream *s1; /* device 1 has no peer access enabled to device 0 */
  slc_buffer *D0, *D1, *D2, *H;
  CHECK_OK(slc_stream_create(S->c, 1, SLC_STREAM_NONBLOCKING, &s1));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D0));
  CHECK_OK(slc_buffer_alloc_device(S->c, 1, 4096, &D1));
  CHECK_OK(slc_buffer_alloc_device(S->c, 2, 4096, &D2));
  CHECK_OK(slc_buffer_alloc_host(S->c, 4096, &H));
  CHECK_RC(slc_buf_copy_peer_async(NULL, D1, 0, D0, 0, 16, H, NULL, NULL),
           LDG_EINVAL);
  CHECK_RC(slc_buf_copy_peer_async(s1, D2, 0, D0, 0, 16, H, NULL, NULL),
           LDG_EINVAL); /* the stream on neither device */
  note_error("slc_buf_copy_peer_async on a third device's stream");
  CHECK_RC(slc_buf_copy_peer_async(s1, D1, 0, H, 0, 16, H, NULL, NULL),
           LDG_EINVAL); /* a host source */
  CHECK_RC(slc_buf_copy_peer_async(s1, D1, 4000, D0, 0, 100, H, NULL, NULL),
           LDG_EINVAL); /* out of bounds */
  CHECK_RC(slc_buf_copy_peer_async(s1, D1, 0, D0, 0, 16, NULL, NULL, NULL),
           LDG_EINVAL); /* no peer access, no staging */
  note_error("slc_buf_copy_peer_async with no peer access and no staging");
  CHECK_RC(slc_buf_copy_peer_async(s1, D1, 0, D0, 0, 16, D2, NULL, NULL),
           LDG_EINVAL); /* device memory as staging */
  CHECK(pending(s1) == 0 && !slc_buffer_held(D0) && !slc_buffer_held(D1));
  if (S->host) { /* the second piece fails: the first stays recorded */
    counter k = {0};
    slc_hold h = hold_keep(count_keep(&k));
    bool staged = false;
    CHECK(hd_fail_nth("cuMemcpyHtoDAsync", 1, CUDA_ERROR_LAUNCH_FAILED) == 0);
    CHECK_RC(slc_buf_copy_peer_async(s1, D1, 0, D0, 0, 16, H, &h, &staged),
             SLC_EDRIVER);
    CHECK(!staged && pending(s1) == 1 && slc_buffer_held(H));
    CHECK_OK(slc_stream_synchronize(s1));
    CHECK(count_of(&k) == 0 && !slc_buffer_held(H));
  }
  CHECK_OK(slc_stream_synchronize(s1));
  slc_stream_unref(s1);
  CHECK_OK(slc_buffer_try_free(D0));
  CHECK_OK(slc_buffer_try_free(D1));
  CHECK_OK(slc_buffer_try_free(D2));
  CHECK_OK(slc_buffer_try_free(H));
  return PASS;
}

static int t_stream_destroy(suite *S) {
  const size_t bytes = 1u << 18;
  staging st;
  slc_buffer *D;
  CHECK_OK(staging_init(S, &st, bytes, 51));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  slc_stream *s, *b;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &b));
  slc_event *e, *e2;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  CHECK_OK(slc_event_create(S->c, 0, &e2));
  CHECK_OK(raw_event(S, 0, &st.done));
  counter k1 = {0}, k2 = {0};
  slc_hold h1 = hold_keep(count_keep(&k1));
  CHECK_OK(busy(S, s, 20, &h1));
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, NULL, 0, &r, 1};
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_OK(raw_record(S, st.done, s));
  CHECK_OK(slc_event_record(e, s));

  CHECK_OK(slc_stream_destroy(s));
  CHECK(count_of(&k1) == 1 && atomic_load(&st.released) == 1);
  CHECK(atomic_load(&st.early) == 0);
  CHECK_RC(slc_stream_check_live(s), LDG_EDESTROYED);
  slc_hold h2 = hold_keep(count_keep(&k2));
  CHECK_RC(slc_memset_d8_async(s, slc_buffer_dptr(D), 0, 64, &h2),
           LDG_EDESTROYED);
  note_error("an operation on a destroyed stream");
  CHECK(count_of(&k2) == 0);
  CHECK_RC(slc_stream_synchronize(s), LDG_EDESTROYED);
  bool idle;
  CHECK_RC(slc_stream_query(s, &idle), LDG_EDESTROYED);
  CHECK_RC(slc_stream_destroy(s), LDG_EDESTROYED);
  CHECK_RC(slc_event_record(e2, s), LDG_EDESTROYED);
  CHECK(!slc_event_recorded(e2, NULL, NULL));
  /* The event recorded before the destroy still works, releasing nothing. */
  CHECK_OK(slc_event_synchronize(e));
  CHECK_OK(slc_stream_wait_event(b, e));
  CHECK_OK(slc_stream_synchronize(b));
  raw_event_destroy(S, st.done);
  CHECK_OK(slc_event_destroy(e));
  CHECK_OK(slc_event_destroy(e2));
  slc_stream_unref(s);
  slc_stream_unref(b);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

static int t_bad_pointers(suite *S) {
  const size_t bytes = 4096;
  slc_buffer *X, *H;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &X));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &H));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  counter k = {0};
  uint64_t id = slc_buffer_id(X);
  slc_hold h = {count_keep(&k), &id, 1, NULL, 0};
  ldg_seq mark0 = ldg_mark(slc_stream_ledger(s));

  CHECK_REFUSED(slc_copy_htod_async(s, 0, slc_buffer_host(H), 64, &h),
                CUDA_ERROR_INVALID_VALUE);
  CHECK(strstr(slc_last_error_message(), "cuMemcpyHtoDAsync") != NULL);
  note_error("cuMemcpyHtoDAsync to device address 0");
  CHECK_REFUSED(slc_copy_dtoh_async(s, slc_buffer_host(H), 0, 64, &h),
                CUDA_ERROR_INVALID_VALUE);
  note_error("cuMemcpyDtoHAsync from device address 0");
  CHECK_REFUSED(slc_copy_dtod_async(s, slc_buffer_dptr(X), 0, 64, &h),
                CUDA_ERROR_INVALID_VALUE);
  note_error("cuMemcpyDtoDAsync from device address 0");
  CHECK_REFUSED(slc_memset_d8_async(s, 0, 0, 64, &h), CUDA_ERROR_INVALID_VALUE);
  note_error("cuMemsetD8Async at device address 0");
  if (S->host) { /* the real driver need not check the end of a range */
    CHECK_RC(slc_copy_htod_async(s, slc_buffer_dptr(X) + bytes - 16,
                                 slc_buffer_host(H), 64, &h),
             LDG_EINVAL);
  }
  /* A bad hold is refused before anything is issued. */
  ldg_range empty = {(uintptr_t)slc_buffer_host(H), 0};
  slc_hold bad = {count_keep(&k), NULL, 0, &empty, 1};
  CHECK_RC(
      slc_copy_htod_async(s, slc_buffer_dptr(X), slc_buffer_host(H), 64, &bad),
      LDG_EINVAL);
  CHECK(slc_last_error()->cu == CUDA_SUCCESS);
  /* Each refusal names its reason (the checks are one inline test; the
   * reason is found again on the refusing path). */
  CHECK(strstr(slc_last_error_message(), "range 0 is empty or wraps") != NULL);
  note_error("a hold with an empty range");
  slc_hold nullids = {count_keep(&k), NULL, 3, NULL, 0};
  CHECK_RC(slc_memset_d8_async(s, slc_buffer_dptr(X), 0, 64, &nullids),
           LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "NULL array with a count") != NULL);
  uint64_t one_id = 1;
  slc_hold huge = {count_keep(&k), &one_id, SIZE_MAX / 8, NULL, 0};
  CHECK_RC(
      slc_copy_htod_async(s, slc_buffer_dptr(X), slc_buffer_host(H), 64, &huge),
      LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "too many ids or ranges") != NULL);
  ldg_range wrap[2] = {{(uintptr_t)slc_buffer_host(H), 64},
                       {UINTPTR_MAX - 10, 64}};
  slc_hold wraps = {count_keep(&k), NULL, 0, wrap, 2};
  CHECK_RC(slc_copy_htod_async(s, slc_buffer_dptr(X), slc_buffer_host(H), 64,
                               &wraps),
           LDG_EINVAL);
  CHECK(strstr(slc_last_error_message(), "range 1 is empty or wraps") != NULL);
  CHECK_RC(
      slc_copy_htod_async(NULL, slc_buffer_dptr(X), slc_buffer_host(H), 64, &h),
      LDG_EINVAL);

  CHECK(count_of(&k) == 0);
  CHECK(ldg_mark(slc_stream_ledger(s)) == mark0 && pending(s) == 0);
  CHECK_OK(slc_stream_synchronize(s)); /* the stream is still fine */
  CHECK(count_of(&k) == 0);
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(X));
  CHECK_OK(slc_buffer_try_free(H));
  return PASS;
}

/* slc_stream_record_deferred and _external: the common hold (keep, ids, no
 * ranges) takes an inline path, every other hold the checking one. Each
 * bad hold is refused by each call with its own reason and the call's
 * name, on either side of the inline path's test; nothing is recorded and
 * no keep runs. Then each shape, on both paths, is recorded once and
 * released once; a destroyed stream refuses both paths. */
typedef int (*record_fn)(slc_stream *, const slc_hold *);

static int t_record_holds(suite *S) {
  slc_buffer *X;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &X));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  const record_fn fns[2] = {slc_stream_record_deferred,
                            slc_stream_record_external};
  const char *const names[2] = {"slc_stream_record_deferred",
                                "slc_stream_record_external"};
  const size_t max_words = (SIZE_MAX / sizeof(uint64_t)) / 4;
  counter k = {0};
  uint64_t ids[2] = {slc_buffer_id(X), slc_buffer_id(X)};
  ldg_range one = {(uintptr_t)&ids[0], sizeof ids};
  ldg_range wrap[2] = {{(uintptr_t)&ids[0], 8}, {UINTPTR_MAX - 10, 64}};
  const struct {
    slc_hold h;
    const char *reason;
  } bad[] = {
      {{count_keep(&k), NULL, 1, NULL, 0}, "NULL array with a count"},
      {{count_keep(&k), NULL, 3, NULL, 0}, "NULL array with a count"},
      {{count_keep(&k), ids, 1, NULL, 2}, "NULL array with a count"},
      {{count_keep(&k), ids, max_words + 1, NULL, 0}, "too many ids"},
      {{count_keep(&k), ids, SIZE_MAX, NULL, 0}, "too many ids"},
      {{count_keep(&k), ids, 1, &one, max_words + 1}, "too many ids"},
      {{count_keep(&k), ids, 1, wrap, 2}, "range 1 is empty or wraps"},
      {{count_keep(&k), NULL, 0, wrap, 2}, "range 1 is empty or wraps"},
  };
  ldg_seq mark0 = ldg_mark(slc_stream_ledger(s));
  for (int f = 0; f < 2; f++) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      slc_clear_error();
      int rc = fns[f](s, &bad[i].h);
      if (rc != LDG_EINVAL ||
          strstr(slc_last_error_message(), bad[i].reason) == NULL ||
          strcmp(slc_last_error()->call, names[f]) != 0) {
        fprintf(stderr,
                "    %s, bad hold %zu: returned %d, last error %s: %s; "
                "expected LDG_EINVAL, %s\n",
                names[f], i, rc, slc_last_error()->call,
                slc_last_error_message(), bad[i].reason);
        return FAIL;
      }
    }
    slc_hold good = {count_keep(&k), ids, 1, NULL, 0};
    CHECK_RC(fns[f](NULL, &good), LDG_EINVAL);
    CHECK(strcmp(slc_last_error()->call, names[f]) == 0);
  }
  CHECK(count_of(&k) == 0);
  CHECK(ldg_mark(slc_stream_ledger(s)) == mark0 && pending(s) == 0);
  /* Every shape, on both paths: inline (ids, zero or more; at the bound's
   * edge the enqueue would read max_words ids, so not here), checking (no
   * hold, no ids, ranges). */
  const slc_hold shapes[] = {
      {count_keep(&k), ids, 1, NULL, 0},
      {count_keep(&k), ids, 2, NULL, 0},
      {count_keep(&k), ids, 0, NULL, 0},
      {count_keep(&k), NULL, 0, NULL, 0},
      {count_keep(&k), ids, 2, &one, 1},
      {count_keep(&k), NULL, 0, &one, 1},
  };
  const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
  for (int f = 0; f < 2; f++) {
    for (int i = 0; i < n_shapes; i++) CHECK_OK(fns[f](s, &shapes[i]));
    CHECK_OK(fns[f](s, NULL));
  }
  CHECK(ldg_mark(slc_stream_ledger(s)) == mark0 + 2 * (n_shapes + 1));
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&k) == 2 * n_shapes);
  CHECK(pending(s) == 0);
  /* Destroyed: each path refuses with LDG_EDESTROYED and runs nothing. */
  CHECK_OK(slc_stream_destroy(s));
  for (int f = 0; f < 2; f++) {
    CHECK_RC(fns[f](s, &shapes[0]), LDG_EDESTROYED);
    CHECK_RC(fns[f](s, &shapes[4]), LDG_EDESTROYED);
  }
  CHECK(count_of(&k) == 2 * n_shapes);
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(X));
  return PASS;
}

static int t_launch_and_module_errors(suite *S) {
  slc_buffer *X;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &X));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CUfunction add1;
  CHECK_OK(kernel(S, 0, "add1", &add1));
  counter k = {0};
  slc_hold h = hold_keep(count_keep(&k));
  CUdeviceptr p = slc_buffer_dptr(X);
  unsigned n = 1024;
  void *params[] = {&p, &n};
  CHECK_REFUSED(slc_launch(s, add1, (slc_dim3){1, 1, 1}, (slc_dim3){2048, 1, 1},
                           0, params, &h),
                CUDA_ERROR_INVALID_VALUE);
  CHECK(strstr(slc_last_error_message(), "cuLaunchKernel") != NULL);
  note_error("cuLaunchKernel with 2048 threads per block");
  if (S->host) {
    hd_fail_next(HD_FAULT_LAUNCH, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 1);
    CHECK_RC(slc_launch(s, add1, (slc_dim3){4, 1, 1}, (slc_dim3){256, 1, 1}, 0,
                        params, &h),
             SLC_EDRIVER);
    CHECK(slc_last_error()->cu == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    note_error("an injected launch failure");
  }
  CHECK(count_of(&k) == 0 && pending(s) == 0);
  CHECK_OK(slc_launch(s, add1, (slc_dim3){4, 1, 1}, (slc_dim3){256, 1, 1}, 0,
                      params, &h));
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&k) == 1);

  slc_module *bad = NULL;
  int rc = slc_module_load(S->c, 0, "this is not PTX", &bad);
  CHECK(rc != LDG_OK && bad == NULL);
  CHECK(slc_last_error()->cu != CUDA_SUCCESS);
  note_error("slc_module_load of a bad image");
  slc_module *m;
  CHECK_OK(module_for(S, 0, &m));
  CUfunction f;
  CHECK_RC(slc_module_function(m, "no_such_kernel", &f), LDG_EINVAL);
  CHECK(slc_last_error()->cu == CUDA_ERROR_NOT_FOUND);
  note_error("cuModuleGetFunction of a missing kernel");
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(X));
  return PASS;
}

/* Injected failures of every synchronisation: each releases nothing. */
static int t_failed_syncs_release_nothing(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  const size_t n = 1u << 16, bytes = n * 4;
  staging st;
  slc_buffer *D, *X;
  CHECK_OK(staging_init(S, &st, bytes, 61));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &X));
  slc_stream *s, *nb;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &nb));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));

  hd_hold(true); /* nothing runs until the end */
  uint64_t ids[] = {slc_buffer_id(st.buf), slc_buffer_id(D)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, ids, 2, &r, 1};
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_OK(slc_event_record(e, s));
  counter kx = {0};
  uint64_t xid = slc_buffer_id(X);
  slc_hold hx = {count_keep(&kx), &xid, 1, NULL, 0};
  CHECK_OK(slc_memset_d8_async(nb, slc_buffer_dptr(X), 0, bytes, &hx));

  hd_fail_next(HD_FAULT_STREAM_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_stream_synchronize(s), SLC_EDRIVER);
  CHECK(slc_last_error()->cu == CUDA_ERROR_LAUNCH_FAILED);
  note_error("a failed cuStreamSynchronize");
  hd_fail_next(HD_FAULT_EVENT_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_event_synchronize(e), SLC_EDRIVER);
  hd_fail_next(HD_FAULT_EVENT_QUERY, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
  bool done = true;
  CHECK_RC(slc_event_query(e, &done), SLC_EDRIVER);
  hd_fail_next(HD_FAULT_STREAM_QUERY, CUDA_ERROR_ILLEGAL_ADDRESS, 1);
  CHECK_RC(slc_stream_query(s, &done), SLC_EDRIVER);
  hd_fail_next(HD_FAULT_CTX_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_device_synchronize(S->c, 0), SLC_EDRIVER);
  note_error("a failed cuCtxSynchronize");
  hd_fail_next(HD_FAULT_STREAM_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_stream_destroy(s), SLC_EDRIVER);
  note_error("a failed destroy");
  CHECK_OK(slc_stream_check_live(s)); /* live again */
  hd_fail_next(HD_FAULT_STREAM_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_buffer_free(X), SLC_EDRIVER); /* the drain of nb failed */
  note_error("slc_buffer_free whose drain failed");
  CHECK(count_of(&kx) == 0 && slc_buffer_held(X));
  hd_fail_next(HD_FAULT_STREAM_SYNC, CUDA_ERROR_LAUNCH_FAILED, 1);
  CHECK_RC(slc_copy_dtoh(slc_buffer_host(st.buf), X, 0, 64), SLC_EDRIVER);
  /* Failed issues record nothing. */
  hd_fail_next(HD_FAULT_EVENT_RECORD, CUDA_ERROR_INVALID_HANDLE, 1);
  slc_event *e2;
  CHECK_OK(slc_event_create(S->c, 0, &e2));
  CHECK_RC(slc_event_record(e2, s), LDG_EINVAL);
  CHECK(!slc_event_recorded(e2, NULL, NULL));
  hd_fail_next(HD_FAULT_STREAM_WAIT, CUDA_ERROR_INVALID_HANDLE, 1);
  ldg_seq m_nb = ldg_mark(slc_stream_ledger(nb));
  CHECK_RC(slc_stream_wait_event(nb, e), LDG_EINVAL);
  CHECK(ldg_mark(slc_stream_ledger(nb)) == m_nb);
  hd_fail_next(HD_FAULT_COPY, CUDA_ERROR_OUT_OF_MEMORY, 1);
  counter kc = {0};
  slc_hold hc = hold_keep(count_keep(&kc));
  CHECK_RC(slc_memset_d8_async(s, slc_buffer_dptr(D), 0, 64, &hc), LDG_ENOMEM);
  CHECK(count_of(&kc) == 0);
  hd_fail_next(HD_FAULT_STREAM_CREATE, CUDA_ERROR_OUT_OF_MEMORY, 1);
  slc_stream *nope = NULL;
  CHECK_RC(slc_stream_create(S->c, 0, 0, &nope), LDG_ENOMEM);
  CHECK(nope == NULL);

  CHECK(atomic_load(&st.released) == 0 && pending(s) == 1);
  CHECK(slc_buffer_held(st.buf));
  hd_hold(false);
  CHECK_OK(slc_event_synchronize(e));
  CHECK(atomic_load(&st.released) == 1);
  uint32_t *back = malloc(bytes);
  CHECK(back != NULL);
  CHECK_OK(slc_copy_dtoh(back, D, 0, bytes));
  CHECK(mismatch(back, n, 61, 0) == n);
  free(back);
  CHECK_OK(slc_buffer_free(X));
  CHECK(count_of(&kx) == 1);
  CHECK_OK(slc_event_destroy(e));
  CHECK_OK(slc_event_destroy(e2));
  CHECK_OK(slc_stream_destroy(s));
  slc_stream_unref(s);
  slc_stream_unref(nb);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* A kernel that faults: the synchronisations fail and release nothing. On a
 * GPU the context is then unusable, so this runs only in its own process. */
static int t_kernel_fault(suite *S) {
  SKIP_IF(!S->host && !S->forked, "needs --fork on a GPU (sticky error)");
  const size_t bytes = 1u << 16;
  staging st;
  slc_buffer *D;
  CHECK_OK(staging_init(S, &st, bytes, 71));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CUfunction trap;
  CHECK_OK(kernel(S, 0, "trap_kernel", &trap));
  counter kt = {0}, k2 = {0};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, NULL, 0, &r, 1};
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(st.buf),
                               bytes, &h));
  slc_hold ht = hold_keep(count_keep(&kt)), h2 = hold_keep(count_keep(&k2));
  CHECK_OK(slc_launch(s, trap, (slc_dim3){1, 1, 1}, (slc_dim3){1, 1, 1}, 0,
                      NULL, &ht));
  int rc = slc_memset_d8_async(s, slc_buffer_dptr(D), 0, 64, &h2);
  CHECK(rc == LDG_OK || slc_last_error()->cu != CUDA_SUCCESS);
  rc = slc_stream_synchronize(s);
  CHECK(rc != LDG_OK && slc_last_error()->cu != CUDA_SUCCESS);
  note_error("cuStreamSynchronize after a trapping kernel");
  CHECK(atomic_load(&st.released) == 0 && count_of(&kt) == 0);
  CHECK(count_of(&k2) == 0);
  rc = slc_device_synchronize(S->c, 0);
  CHECK(rc != LDG_OK);
  note_error("cuCtxSynchronize after a trapping kernel");
  CHECK(atomic_load(&st.released) == 0 && count_of(&kt) == 0);
  if (!S->host) {
    S->abandon = true; /* the context is gone; the process ends */
    return PASS;
  }
  hd_set_sticky(CUDA_SUCCESS);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(atomic_load(&st.released) == 1 && count_of(&kt) == 1);
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* The driver accepted the copy but the ledger could not record it: the layer
 * synchronises, the caller keeps its keep, and the data did arrive. */
static int t_record_enomem(suite *S) {
  SKIP_IF(!S->host, "needs the host executor (ledger allocation faults)");
  const size_t n = 1u << 16, bytes = n * 4;
  slc_buffer *D, *H;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  CHECK_OK(slc_buffer_alloc_host(S->c, bytes, &H));
  fill(slc_buffer_host(H), n, 81);
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(busy(S, s, 20, NULL));
  counter k = {0};
  uint64_t ids[8];
  for (int i = 0; i < 8; i++) ids[i] = slc_buffer_id(D) + 1000u * (uint64_t)i;
  slc_hold h = {count_keep(&k), ids, 8, NULL, 0}; /* out of line: allocates */
  ldg__fault_fail_all_allocs(true);
  int rc =
      slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(H), bytes, &h);
  ldg__fault_fail_all_allocs(false);
  CHECK_RC(rc, LDG_ENOMEM);
  note_error("a copy the ledger could not record");
  CHECK(count_of(&k) == 0);
  CHECK(!slc_buffer_held(D));
  uint32_t *back = malloc(bytes);
  CHECK(back != NULL);
  CHECK_OK(slc_copy_dtoh(back, D, 0, bytes));
  CHECK(mismatch(back, n, 81, 0) == n);
  free(back);
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_buffer_try_free(H));
  return PASS;
}

/* The harness catches a premature release: release on purpose before the
 * copy ran (bypassing the layer), and the poisoned staging arrives. */
static int t_selfcheck_premature_release(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's hold");
  const size_t n = 1u << 14, bytes = n * 4;
  staging st;
  slc_buffer *D;
  CHECK_OK(staging_init(S, &st, bytes, 91));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  slc_stream *s;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  hd_hold(true);
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, NULL, 0, &r, 1};
  CHECK_OK(slc_copy_htod_async(s, slc_buffer_dptr(D), slc_buffer_host(st.buf),
                               bytes, &h));
  ldg_stream *ls = slc_stream_ledger(s);
  CHECK_OK(ldg_release(ls, ldg_mark(ls))); /* the bug */
  CHECK(atomic_load(&st.released) == 1);
  hd_hold(false);
  CHECK_OK(slc_stream_synchronize(s));
  uint32_t *back = malloc(bytes);
  CHECK(back != NULL);
  CHECK_OK(slc_copy_dtoh(back, D, 0, bytes));
  CHECK(mismatch(back, n, 91, 0) == 0); /* detected: the poison arrived */
  CHECK(all_bytes(back, bytes, POISON));
  free(back);
  slc_stream_unref(s);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

static int t_no_driver(suite *S) {
  slc_driver d;
  CHECK(slc_driver_load(&d, "/nonexistent/libcuda.so.1") != 0);
  CHECK(!d.loaded && d.library_missing);
  CHECK(strstr(d.load_error, "not found") != NULL);
  CHECK(d.pfn_cuInit(0) == CUDA_ERROR_NOT_INITIALIZED); /* a stub, no crash */
  CUdeviceptr p = 0;
  CHECK(d.pfn_cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED && p == 0);
  for (size_t i = 0; i < slc_driver_entry_count(); i++)
    CHECK(slc_driver_entry_is_stub(&d, i));
  slc_context *c = NULL;
  CHECK_RC(slc_context_create(&d, &c), SLC_ENODRIVER);
  CHECK(c == NULL && strstr(slc_last_error_message(), "not found") != NULL);
  note_error("slc_context_create without a driver");
  CHECK_RC(slc_context_create(NULL, &c), SLC_ENODRIVER);
  slc_driver_unload(&d);
  /* And the handles of a context that was never made are refused. */
  CHECK_RC(slc_stream_synchronize(NULL), LDG_EINVAL);
  CHECK_RC(slc_event_synchronize(NULL), LDG_EINVAL);
  CHECK_RC(slc_buffer_try_free(NULL), LDG_EINVAL);
  slc_stream *s = NULL;
  CHECK_RC(slc_stream_create(NULL, 0, 0, &s), LDG_EINVAL);
  CHECK_RC(slc_device_synchronize(NULL, 0), LDG_EINVAL);
  (void)S;
  return PASS;
}

/* The CUDA toolkit's stub libcuda exports every symbol and fails cuInit:
 * checks the versioned names of the dlsym fallback, and the clean failure. */
static int t_stub_library(suite *S) {
  static const char *paths[] = {
      "/usr/local/cuda/lib64/stubs/libcuda.so",
      "/usr/local/cuda/lib/stubs/libcuda.so",
      "/usr/local/cuda/targets/x86_64-linux/lib/stubs/libcuda.so",
  };
  const char *path = NULL;
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]) && path == NULL; i++)
    if (access(paths[i], R_OK) == 0) path = paths[i];
  SKIP_IF(path == NULL, "no CUDA toolkit stub libcuda.so here");
  slc_driver d;
  if (slc_driver_load(&d, path) != 0) {
    fprintf(stderr, "    %s\n", d.load_error);
    return FAIL;
  }
  printf("    %s\n", d.origin);
  for (size_t i = 0; i < slc_driver_entry_count(); i++)
    CHECK(!slc_driver_entry_is_stub(&d, i));
  slc_context *c = NULL;
  int rc = slc_context_create(&d, &c);
  CHECK(rc == SLC_ENODRIVER && c == NULL);
  CHECK(slc_last_error()->cu == CUDA_ERROR_STUB_LIBRARY);
  note_error("slc_context_create over the stub library");
  slc_driver_unload(&d);
  (void)S;
  return PASS;
}

/* The ordering rules, each checked at the exact moment it matters: a hook
 * of the host executor acts on another "thread" of work while the layer is
 * inside the driver call. Each case fails if the layer reads its mark or
 * snapshot after the driver call, enqueues before issuing, or releases
 * through an event that was re-recorded while it waited. */
typedef struct hook_ctx {
  suite *S;
  slc_stream *s;
  slc_event *e;
  CUdeviceptr p;
  counter k;
  int rc;
} hook_ctx;

static void hook_memset(void *arg) { /* an operation lands meanwhile */
  hook_ctx *h = arg;
  slc_hold hold = hold_keep(count_keep(&h->k));
  h->rc = slc_memset_d8_async(h->s, h->p, 9, 64, &hold);
}

static void hook_sync(void *arg) { /* another thread marks, syncs, releases */
  hook_ctx *h = arg;
  h->rc = slc_stream_synchronize(h->s);
}

static void hook_rerecord(void *arg) { /* the event is re-recorded */
  hook_ctx *h = arg;
  h->rc = slc_event_record(h->e, h->s);
  /* ... and that record completes before the layer's driver call goes on. */
  const slc_driver *d = slc_context_driver(h->S->c);
  while (d->pfn_cuStreamQuery(slc_stream_handle(h->s)) == CUDA_ERROR_NOT_READY)
    sleep_ms(1);
}

static int t_ordering_rules(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's hooks");
  const size_t bytes = 1u << 14;
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &D));
  slc_stream *s, *s1;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &s));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &s1));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  const CUdeviceptr p = slc_buffer_dptr(D);

  /* 1. Issue, then enqueue: a sync while the copy is being issued must not
   *    release it. */
  staging st;
  CHECK_OK(staging_init(S, &st, bytes, 5));
  hook_ctx h1 = {.s = s};
  hd_set_hook(HD_FAULT_COPY, hook_sync, &h1);
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold hs = {{staging_release, &st}, NULL, 0, &r, 1};
  CHECK_OK(slc_copy_htod_async(s, p, slc_buffer_host(st.buf), bytes, &hs));
  CHECK_OK(h1.rc);
  CHECK(atomic_load(&st.released) == 0 && pending(s) == 1);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(atomic_load(&st.released) == 1);

  /* 2. Stream sync: mark, then sync. */
  hook_ctx h2 = {.s = s, .p = p};
  hd_set_hook(HD_FAULT_STREAM_SYNC, hook_memset, &h2);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK_OK(h2.rc);
  CHECK(count_of(&h2.k) == 0 && pending(s) == 1);
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(count_of(&h2.k) == 1);

  /* 3. Event record: mark, then record. */
  hook_ctx h3 = {.s = s, .p = p};
  hd_set_hook(HD_FAULT_EVENT_RECORD, hook_memset, &h3);
  CHECK_OK(slc_event_record(e, s));
  CHECK_OK(h3.rc);
  CHECK_OK(slc_event_synchronize(e));
  CHECK(count_of(&h3.k) == 0 && pending(s) == 1);
  CHECK_OK(slc_stream_synchronize(s));

  /* 4. Device sync: snapshot, then sync. */
  hook_ctx h4 = {.s = s1, .p = p};
  hd_set_hook(HD_FAULT_CTX_SYNC, hook_memset, &h4);
  CHECK_OK(slc_device_synchronize(S->c, 0));
  CHECK_OK(h4.rc);
  CHECK(count_of(&h4.k) == 0 && pending(s1) == 1);
  CHECK_OK(slc_stream_synchronize(s1));

  /* 5. Event sync and query: recorded on s (busy), re-recorded on the idle
   *    s1 while the layer waits: the driver waited for s1's record, so s's
   *    work must stay held. */
  for (int q = 0; q < 2; q++) {
    counter kb = {0};
    slc_hold hb = hold_keep(count_keep(&kb));
    CHECK_OK(busy(S, s, 100, &hb));
    CHECK_OK(slc_event_record(e, s));
    hook_ctx h5 = {.S = S, .s = s1, .e = e};
    hd_set_hook(q == 0 ? HD_FAULT_EVENT_SYNC : HD_FAULT_EVENT_QUERY,
                hook_rerecord, &h5);
    bool done = false;
    if (q == 0) {
      CHECK_OK(slc_event_synchronize(e));
    } else {
      CHECK_OK(slc_event_query(e, &done));
    }
    CHECK_OK(h5.rc);
    CHECK(q == 0 || done); /* the driver saw s1's completed record */
    CHECK(count_of(&kb) == 0 && pending(s) == 1);
    CHECK_OK(slc_stream_synchronize(s));
    CHECK(count_of(&kb) == 1);
  }

  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(s);
  slc_stream_unref(s1);
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* ---- Threads ------------------------------------------------------------ */

enum { NSTREAMS = 4, MAXTHREADS = 16 };

typedef struct stress {
  suite *S;
  slc_stream *streams[NSTREAMS];
  slc_event *events[MAXTHREADS];
  slc_buffer *region[MAXTHREADS];
  size_t words;
  int threads, iters;
  counter released;
  atomic_int issued;
  atomic_int errors;
} stress;

typedef struct stress_arg {
  stress *st;
  int t;
  bool copied;         /* the thread's region was written at least once */
  uint32_t seed, adds; /* then it holds pattern(seed) + adds at the end */
} stress_arg;

static uint32_t rnd(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

#define STRESS_FAIL(what)                                         \
  do {                                                            \
    fprintf(stderr, "    thread %d: %s failed: %s\n", a->t, what, \
            slc_last_error_message());                            \
    atomic_fetch_add(&st->errors, 1);                             \
    return NULL;                                                  \
  } while (0)

static void *stress_thread(void *p) {
  stress_arg *a = p;
  stress *st = a->st;
  suite *S = st->S;
  uint32_t x = 0x9E3779B9u * (uint32_t)(a->t + 1);
  slc_stream *home = st->streams[a->t % NSTREAMS];
  const size_t bytes = st->words * 4;
  for (int i = 0; i < st->iters; i++) {
    uint32_t op = rnd(&x) % 10;
    if (op < 4) { /* a copy from pageable staging, freed by its keep */
      freeing *f = malloc(sizeof(*f));
      if (f == NULL) STRESS_FAIL("malloc");
      f->p = malloc(bytes);
      f->count = &st->released;
      if (f->p == NULL) STRESS_FAIL("malloc");
      uint32_t seed = (uint32_t)(a->t * 100000 + i);
      fill(f->p, st->words, seed);
      uint64_t id = slc_buffer_id(st->region[a->t]);
      ldg_range r = range_of(f->p, bytes);
      slc_hold h = {{free_release, f}, &id, 1, &r, 1};
      if (slc_copy_htod_async(home, slc_buffer_dptr(st->region[a->t]), f->p,
                              bytes, &h) != LDG_OK) {
        free(f->p);
        free(f);
        STRESS_FAIL("slc_copy_htod_async");
      }
      atomic_fetch_add(&st->issued, 1);
      a->copied = true;
      a->seed = seed;
      a->adds = 0;
    } else if (op == 4) {
      uint64_t id = slc_buffer_id(st->region[a->t]);
      slc_hold h = {count_keep(&st->released), &id, 1, NULL, 0};
      if (launch_add1(S, home, slc_buffer_dptr(st->region[a->t]),
                      (unsigned)st->words, &h) != LDG_OK)
        STRESS_FAIL("slc_launch");
      atomic_fetch_add(&st->issued, 1);
      a->adds++;
    } else if (op == 5) {
      if (slc_event_record(st->events[a->t], home) != LDG_OK)
        STRESS_FAIL("slc_event_record");
    } else if (op == 6) { /* any stream waits on any thread's event */
      slc_stream *b = st->streams[rnd(&x) % NSTREAMS];
      slc_event *e = st->events[rnd(&x) % (uint32_t)st->threads];
      if (slc_stream_wait_event(b, e) != LDG_OK)
        STRESS_FAIL("slc_stream_wait_event");
    } else {
      uint32_t which = rnd(&x) % 5;
      slc_stream *s = st->streams[rnd(&x) % NSTREAMS];
      slc_event *e = st->events[rnd(&x) % (uint32_t)st->threads];
      bool flag;
      int rc = which == 0   ? slc_stream_synchronize(s)
               : which == 1 ? slc_event_synchronize(e)
               : which == 2 ? slc_stream_query(s, &flag)
               : which == 3 ? slc_event_query(e, &flag)
                            : slc_device_synchronize(
                                  S->c, (int)(rnd(&x) % (uint32_t)S->devices));
      if (rc != LDG_OK) STRESS_FAIL("a synchronisation");
    }
  }
  return NULL;
}

/* Threads copy, launch, record, wait and synchronise at once on shared
 * streams (blocking and not, on every device) and events. Every keep runs
 * exactly once, after its work (pageable staging freed by the keeps: a
 * premature release is a use-after-free under ASan), and the data is right. */
static int t_threads(suite *S) {
  stress st;
  memset(&st, 0, sizeof(st));
  st.S = S;
  st.threads = S->threads < MAXTHREADS ? S->threads : MAXTHREADS;
  st.iters = S->iters;
  st.words = 1u << 12;
  for (int i = 0; i < NSTREAMS; i++)
    CHECK_OK(slc_stream_create(S->c, i % S->devices,
                               i & 1 ? SLC_STREAM_NONBLOCKING : 0,
                               &st.streams[i]));
  for (int t = 0; t < st.threads; t++) {
    int dev = slc_stream_device(st.streams[t % NSTREAMS]);
    CHECK_OK(slc_buffer_alloc_device(S->c, dev, st.words * 4, &st.region[t]));
    CHECK_OK(slc_event_create(S->c, dev, &st.events[t]));
    slc_module *m;
    CHECK_OK(module_for(S, dev, &m)); /* loaded before the threads start */
  }
  pthread_t th[MAXTHREADS];
  stress_arg args[MAXTHREADS];
  for (int t = 0; t < st.threads; t++) {
    args[t] = (stress_arg){&st, t, false, 0, 0};
    CHECK(pthread_create(&th[t], NULL, stress_thread, &args[t]) == 0);
  }
  for (int t = 0; t < st.threads; t++) pthread_join(th[t], NULL);
  CHECK(atomic_load(&st.errors) == 0);
  for (int i = 0; i < NSTREAMS; i++)
    CHECK_OK(slc_stream_synchronize(st.streams[i]));
  for (int i = 0; i < NSTREAMS; i++) CHECK(pending(st.streams[i]) == 0);
  CHECK(count_of(&st.released) == atomic_load(&st.issued));
  printf(
      "    %d threads x %d operations: %d copies and launches recorded and "
      "released\n",
      st.threads, st.iters, atomic_load(&st.issued));
  uint32_t *back = malloc(st.words * 4);
  CHECK(back != NULL);
  for (int t = 0; t < st.threads; t++) {
    if (!args[t].copied) continue;
    CHECK_OK(slc_copy_dtoh(back, st.region[t], 0, st.words * 4));
    size_t bad = mismatch(back, st.words, args[t].seed, args[t].adds);
    if (bad != st.words) {
      fprintf(stderr, "    thread %d: word %zu is %u, expected %u\n", t, bad,
              back[bad], pattern(args[t].seed, bad) + args[t].adds);
      free(back);
      return FAIL;
    }
  }
  free(back);
  for (int t = 0; t < st.threads; t++) {
    CHECK_OK(slc_event_destroy(st.events[t]));
    CHECK_OK(slc_buffer_try_free(st.region[t]));
  }
  for (int i = 0; i < NSTREAMS; i++) slc_stream_unref(st.streams[i]);
  return PASS;
}

typedef struct race {
  suite *S;
  slc_stream *x;
  slc_buffer *D;
  atomic_int stop;
  atomic_int issued, refused, errors;
  counter released;
} race;

static void *race_thread(void *p) {
  race *r = p;
  while (!atomic_load(&r->stop)) {
    freeing *f = malloc(sizeof(*f));
    if (f == NULL) break;
    f->p = malloc(256);
    f->count = &r->released;
    if (f->p == NULL) {
      free(f);
      break;
    }
    memset(f->p, 7, 256);
    ldg_range rg = range_of(f->p, 256);
    slc_hold h = {{free_release, f}, NULL, 0, &rg, 1};
    int rc = slc_copy_htod_async(r->x, slc_buffer_dptr(r->D), f->p, 256, &h);
    if (rc == LDG_OK) {
      atomic_fetch_add(&r->issued, 1);
    } else {
      free(f->p);
      free(f);
      if (rc == LDG_EDESTROYED) {
        atomic_fetch_add(&r->refused, 1);
        break;
      }
      atomic_fetch_add(&r->errors, 1);
      break;
    }
    rc = slc_stream_synchronize(r->x);
    if (rc != LDG_OK && rc != LDG_EDESTROYED) atomic_fetch_add(&r->errors, 1);
  }
  return NULL;
}

/* A stream destroyed while threads copy on it: each copy either lands
 * before the destroy (and is released by it or a sync) or is refused with
 * LDG_EDESTROYED and its keep is not called. Three rounds, each with a new
 * stream and new threads: those of a round take the gate words (stream.c,
 * THE GATE) that the threads of the round before left (SLC_GATE chooses
 * the gate's mode: cuda_suite_gate_*_test run this in each). */
static int t_destroy_race(suite *S) {
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 256, &D));
  for (int round = 0; round < 3; round++) {
    race r;
    memset(&r, 0, sizeof(r));
    r.S = S;
    r.D = D;
    CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &r.x));
    enum { T = 3 };
    pthread_t th[T];
    for (int i = 0; i < T; i++)
      CHECK(pthread_create(&th[i], NULL, race_thread, &r) == 0);
    sleep_ms(round == 0 ? 20 : 5);
    CHECK_OK(slc_stream_destroy(r.x));
    atomic_store(&r.stop, 1);
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    CHECK(atomic_load(&r.errors) == 0);
    CHECK(count_of(&r.released) == atomic_load(&r.issued));
    printf("    round %d: %d copies before the destroy, %d refused after it\n",
           round, atomic_load(&r.issued), atomic_load(&r.refused));
    slc_stream_unref(r.x);
  }
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* A call made on another thread from inside a driver call (the executor's
 * hook runs this on the calling thread): started, then — once `ready` says
 * so, if given (a bounded wait) — given 20 ms, after which `early` says
 * whether it had finished. A test checks that it had not, where the layer
 * must hold it back until the driver call returns: that passes whatever
 * the timing; a layer that does not hold it back fails it nearly always. */
typedef struct side_call {
  int (*call)(struct side_call *);
  bool (*ready)(struct side_call *); /* may be NULL */
  void *a, *b;                       /* the call's arguments */
  pthread_t th;
  bool started, was_ready, early;
  int rc;
  atomic_int done;
} side_call;

static void *side_call_main(void *p) {
  side_call *sc = p;
  sc->rc = sc->call(sc);
  atomic_store(&sc->done, 1);
  return NULL;
}

static void side_call_hook(void *arg) {
  side_call *sc = arg;
  if (pthread_create(&sc->th, NULL, side_call_main, sc) != 0) return;
  sc->started = true;
  for (int i = 0; sc->ready != NULL && i < 50000 && !sc->ready(sc); i++)
    sleep_ms(0);
  sc->was_ready = sc->ready == NULL || sc->ready(sc);
  sleep_ms(20);
  sc->early = atomic_load(&sc->done) != 0;
}

/* The gate holds a destroy back while a call is inside the driver on the
 * stream (stream.c, THE GATE; sl_cuda.h THREADING): from inside
 * cuEventRecord, another thread destroys the stream; once its flag is up,
 * the destroy must not finish (synchronise, destroy the driver stream)
 * while the record is inside. Run in each mode of the gate
 * (cuda_suite_gate_*_test). */
static int gate_destroy(side_call *sc) { return slc_stream_destroy(sc->a); }
static bool gate_flag_up(side_call *sc) {
  return slc_stream_check_live(sc->a) == LDG_EDESTROYED;
}

static int t_gate_waits(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's hook");
  side_call sc;
  memset(&sc, 0, sizeof(sc));
  sc.call = gate_destroy;
  sc.ready = gate_flag_up;
  slc_stream *s;
  slc_event *e;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &s));
  sc.a = s;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  hd_set_hook(HD_FAULT_EVENT_RECORD, side_call_hook, &sc);
  CHECK_OK(slc_event_record(e, s)); /* the hook runs inside */
  CHECK(sc.started);
  pthread_join(sc.th, NULL);
  CHECK(sc.was_ready);
  CHECK(!sc.early); /* the destroy waited for the record to leave */
  CHECK_OK(sc.rc);
  CHECK_OK(slc_event_synchronize(e));
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(s);
  return PASS;
}

/* The event's lock (event.c, THE LOCK) keeps two records in one order in
 * the driver and in the layer: from inside the first record's cuEventRecord
 * (on a), a second thread records the same event on b; it must not finish
 * while the first is inside, and afterwards the layer names b, whose
 * record the driver has last. */
static int lock_order_record(side_call *sc) {
  return slc_event_record(sc->a, sc->b);
}

static int t_event_lock_orders(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's hook");
  side_call sc;
  memset(&sc, 0, sizeof(sc));
  sc.call = lock_order_record;
  slc_stream *a, *b;
  slc_event *e;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &a));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &b));
  CHECK_OK(slc_event_create(S->c, 0, &e));
  sc.a = e;
  sc.b = b;
  hd_set_hook(HD_FAULT_EVENT_RECORD, side_call_hook, &sc);
  CHECK_OK(slc_event_record(e, a)); /* the hook runs inside */
  CHECK(sc.started);
  pthread_join(sc.th, NULL);
  CHECK(!sc.early); /* the second record waited for the first */
  CHECK_OK(sc.rc);
  uint64_t sid = 0;
  CHECK(slc_event_recorded(e, &sid, NULL));
  CHECK(sid == ldg_stream_id(slc_stream_ledger(b)));
  CHECK_OK(slc_event_synchronize(e));
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(a);
  slc_stream_unref(b);
  return PASS;
}

/* Tracked copies: the keep checks a raw event recorded right after the copy
 * has completed, then frees the staging. */
typedef struct tracked {
  suite *S;
  CUevent done;
  void *p;
  atomic_int *early;
  counter *count;
} tracked;

static void tracked_release(void *ctx) {
  tracked *t = ctx;
  const slc_driver *d = slc_context_driver(t->S->c);
  raw_begin(t->S);
  if (d->pfn_cuEventQuery(t->done) != CUDA_SUCCESS)
    atomic_fetch_add(t->early, 1);
  (void)d->pfn_cuEventDestroy(t->done);
  raw_end(t->S);
  free(t->p);
  count_release(t->count);
  free(t);
}

typedef struct evrace {
  suite *S;
  slc_stream *s[3];
  slc_event *e;
  slc_buffer *D;
  int iters;
  atomic_int stop, early, errors, issued;
  counter released;
} evrace;

typedef struct evrace_arg {
  evrace *r;
  int role;
} evrace_arg;

static void *evrace_thread(void *p) {
  evrace_arg *a = p;
  evrace *r = a->r;
  suite *S = r->S;
  if (a->role < 2) { /* copy on s[role], then re-record the shared event */
    slc_stream *s = r->s[a->role];
    for (int i = 0; i < r->iters; i++) {
      tracked *t = calloc(1, sizeof(*t));
      if (t == NULL) break;
      t->S = S;
      t->early = &r->early;
      t->count = &r->released;
      t->p = malloc(1024);
      if (t->p == NULL || raw_event(S, 0, &t->done) != LDG_OK) {
        free(t->p);
        free(t);
        atomic_fetch_add(&r->errors, 1);
        break;
      }
      memset(t->p, i & 0xff, 1024);
      ldg_range rg = range_of(t->p, 1024);
      slc_hold h = {{tracked_release, t}, NULL, 0, &rg, 1};
      CUdeviceptr dst = slc_buffer_dptr(r->D) + (CUdeviceptr)a->role * 1024;
      if (slc_copy_htod_async(s, dst, t->p, 1024, &h) != LDG_OK) {
        raw_event_destroy(S, t->done);
        free(t->p);
        free(t);
        atomic_fetch_add(&r->errors, 1);
        break;
      }
      atomic_fetch_add(&r->issued, 1);
      /* Before any completion point can cover the copy (see t_event_race). */
      if (raw_record(S, t->done, s) != LDG_OK ||
          slc_event_record(r->e, s) != LDG_OK) {
        atomic_fetch_add(&r->errors, 1);
        break;
      }
    }
  } else if (a->role == 2) { /* synchronise and query the shared event */
    while (!atomic_load(&r->stop)) {
      bool done;
      if (slc_event_synchronize(r->e) != LDG_OK ||
          slc_event_query(r->e, &done) != LDG_OK) {
        atomic_fetch_add(&r->errors, 1);
        break;
      }
    }
  } else { /* a third stream waits on the event and is synchronised */
    while (!atomic_load(&r->stop)) {
      if (slc_stream_wait_event(r->s[2], r->e) != LDG_OK ||
          slc_stream_synchronize(r->s[2]) != LDG_OK) {
        atomic_fetch_add(&r->errors, 1);
        break;
      }
    }
  }
  return NULL;
}

/* One event re-recorded on two streams while other threads synchronise,
 * query and wait on it: a release through the event must cover only work
 * that has completed (each copy's keep checks its own completion event).
 * A copy is released only through a record made after its raw event was
 * recorded, so the raw check is sound. */
static int t_event_race(suite *S) {
  evrace r;
  memset(&r, 0, sizeof(r));
  r.S = S;
  r.iters = S->iters;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &r.D));
  for (int i = 0; i < 3; i++)
    CHECK_OK(slc_stream_create(S->c, 0, i == 1 ? SLC_STREAM_NONBLOCKING : 0,
                               &r.s[i]));
  CHECK_OK(slc_event_create(S->c, 0, &r.e));
  pthread_t th[4];
  evrace_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (evrace_arg){&r, i};
    CHECK(pthread_create(&th[i], NULL, evrace_thread, &args[i]) == 0);
  }
  pthread_join(th[0], NULL);
  pthread_join(th[1], NULL);
  atomic_store(&r.stop, 1);
  pthread_join(th[2], NULL);
  pthread_join(th[3], NULL);
  CHECK(atomic_load(&r.errors) == 0);
  for (int i = 0; i < 3; i++) CHECK_OK(slc_stream_synchronize(r.s[i]));
  CHECK(count_of(&r.released) == atomic_load(&r.issued));
  CHECK(atomic_load(&r.early) == 0);
  printf("    %d tracked copies, none released before it completed\n",
         atomic_load(&r.issued));
  CHECK_OK(slc_event_destroy(r.e));
  for (int i = 0; i < 3; i++) slc_stream_unref(r.s[i]);
  CHECK_OK(slc_buffer_try_free(r.D));
  return PASS;
}

/* An empty launch of spin on s. */
static int spin0(slc_stream *s, CUfunction f) {
  unsigned long long ns = 0;
  void *params[] = {&ns};
  return slc_launch(s, f, (slc_dim3){1, 1, 1}, (slc_dim3){1, 1, 1}, 0, params,
                    NULL);
}

/* The current context (sl_cuda.h THREADING, slc_context_cache_current),
 * on launches (records, copies and syncs make no context current: see
 * no_current below). Off (the default): every launch asks the driver
 * (cuCtxGetCurrent), so a switch made behind the layer's back is undone by
 * the next launch. On: a thread whose cache names the context asks nothing;
 * the layer's own switches keep the cache true; a switch made outside the
 * layer and not told (slc_device_make_current) leaves the wrong context
 * current, which the host executor refuses on a launch
 * (CUDA_ERROR_INVALID_CONTEXT): the hazard the header names. */
static int t_cache_current(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's call counts");
  SKIP_IF(S->devices < 2, "needs 2 devices");
  slc_stream *s, *s1;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &s));
  CHECK_OK(slc_stream_create(S->c, 1, 0, &s1));
  CUdevice d1;
  CUcontext other, cur;
  CHECK(S->drv.pfn_cuDeviceGet(&d1, 1) == CUDA_SUCCESS);
  CHECK(S->drv.pfn_cuDevicePrimaryCtxRetain(&other, d1) == CUDA_SUCCESS);
  /* The functions first: getting one asks for the context too. */
  CUfunction f0, f1;
  CHECK_OK(kernel(S, 0, "spin", &f0));
  CHECK_OK(kernel(S, 1, "spin", &f1));
  /* Off. */
  hd_calls_reset();
  for (int i = 0; i < 10; i++) CHECK_OK(spin0(s, f0));
  CHECK(hd_calls("cuCtxGetCurrent") == 10 && hd_calls("cuLaunchKernel") == 10);
  CHECK(S->drv.pfn_cuCtxSetCurrent(other) == CUDA_SUCCESS); /* not told */
  CHECK_OK(spin0(s, f0));
  CHECK(S->drv.pfn_cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur != other);
  /* On. */
  CHECK_RC(slc_context_cache_current(NULL, true), LDG_EINVAL);
  CHECK_OK(slc_context_cache_current(S->c, true));
  hd_calls_reset();
  for (int i = 0; i < 10; i++) CHECK_OK(spin0(s, f0));
  CHECK_OK(slc_stream_synchronize(s));
  CHECK(hd_calls("cuCtxGetCurrent") == 0 && hd_calls("cuLaunchKernel") == 10);
  /* The layer's own switches: device 1, then device 0 again. */
  hd_calls_reset();
  CHECK_OK(spin0(s1, f1));
  CHECK_OK(spin0(s, f0));
  CHECK(hd_calls("cuCtxGetCurrent") == 2 && hd_calls("cuCtxSetCurrent") == 2);
  /* A switch outside the layer, not told: the wrong context is current. */
  CHECK(S->drv.pfn_cuCtxSetCurrent(other) == CUDA_SUCCESS);
  CHECK_RC(spin0(s, f0), SLC_EDRIVER);
  CHECK(slc_last_error()->cu == CUDA_ERROR_INVALID_CONTEXT);
  /* Told: slc_device_make_current asks the driver and switches back. */
  CHECK_OK(slc_device_make_current(S->c, 0));
  CHECK_OK(spin0(s, f0));
  CHECK_OK(slc_context_cache_current(S->c, false));
  CHECK(S->drv.pfn_cuCtxSetCurrent(other) == CUDA_SUCCESS);
  CHECK_OK(spin0(s, f0)); /* off again: undone */
  CHECK_OK(slc_stream_synchronize(s));
  CHECK_OK(slc_stream_synchronize(s1));
  slc_stream_unref(s);
  slc_stream_unref(s1);
  CHECK(S->drv.pfn_cuDevicePrimaryCtxRelease(d1) == CUDA_SUCCESS);
  return PASS;
}

/* Copies, event records, stream waits, syncs and queries need no context
 * current and leave it as it is (sl_cuda.h THREADING): on a new thread
 * (none current) and with another device's context current, they run and
 * order their work (the copy back reads what the copy in wrote, through an
 * event wait between two streams); a launch makes its device's context
 * current; on a stream adopted with slc_stream_adopt_legacy, whose handle
 * means "the current context's", a record makes it current too. With the
 * host executor also counted: no context call at all on the first part. */
typedef struct nocur {
  suite *S;
  slc_stream *s, *s2;
  slc_event *e;
  slc_buffer *in, *out, *D;
} nocur;

static int nocur_ops(nocur *n, unsigned char v) {
  memset(slc_buffer_host(n->in), v, 256);
  memset(slc_buffer_host(n->out), 0, 256);
  CHECK_OK(slc_copy_htod_async(n->s, slc_buffer_dptr(n->D),
                               slc_buffer_host(n->in), 256, NULL));
  CHECK_OK(slc_event_record(n->e, n->s));
  CHECK_OK(slc_stream_wait_event(n->s2, n->e));
  CHECK_OK(slc_copy_dtoh_async(n->s2, slc_buffer_host(n->out),
                               slc_buffer_dptr(n->D), 256, NULL));
  bool idle;
  CHECK_OK(slc_stream_query(n->s2, &idle));
  CHECK_OK(slc_event_query(n->e, &idle));
  CHECK_OK(slc_event_synchronize(n->e));
  CHECK_OK(slc_stream_synchronize(n->s2));
  CHECK(all_bytes(slc_buffer_host(n->out), 256, v));
  return PASS;
}

static void *nocur_thread(void *arg) {
  nocur *n = arg;
  suite *S = n->S;
  intptr_t rc = FAIL;
  CUcontext cur = (CUcontext)1, ctx0 = NULL;
  if (S->drv.pfn_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL) {
    fprintf(stderr, "    a new thread has a context current\n");
    return (void *)rc;
  }
  if (S->host) hd_calls_reset();
  if (nocur_ops(n, 0x5a) != PASS) return (void *)rc;
  if (S->host && (hd_calls("cuCtxGetCurrent") != 0 ||
                  hd_calls("cuCtxSetCurrent") != 0)) {
    fprintf(stderr, "    %ld context queries, %ld switches\n",
            hd_calls("cuCtxGetCurrent"), hd_calls("cuCtxSetCurrent"));
    return (void *)rc;
  }
  if (S->drv.pfn_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL) {
    fprintf(stderr, "    a copy, record or sync made a context current\n");
    return (void *)rc;
  }
  /* A launch makes device 0's context current. */
  if (busy(S, n->s, 0, NULL) != LDG_OK ||
      S->drv.pfn_cuCtxGetCurrent(&ctx0) != CUDA_SUCCESS || ctx0 == NULL) {
    fprintf(stderr, "    the launch did not make a context current: %s\n",
            slc_last_error_message());
    return (void *)rc;
  }
  /* Another device's context current: the same calls, and it stays. */
  if (S->devices >= 2) {
    CUcontext ctx1 = NULL;
    if (slc_device_make_current(S->c, 1) != LDG_OK ||
        S->drv.pfn_cuCtxGetCurrent(&ctx1) != CUDA_SUCCESS || ctx1 == ctx0)
      return (void *)rc;
    if (nocur_ops(n, 0xa5) != PASS) return (void *)rc;
    if (S->drv.pfn_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx1) {
      fprintf(stderr, "    the current context changed under device 1\n");
      return (void *)rc;
    }
  }
  /* The adopted legacy stream: a record makes device 0's context current. */
  slc_stream *L = NULL;
  if (S->drv.pfn_cuCtxSetCurrent(NULL) != CUDA_SUCCESS ||
      slc_stream_adopt_legacy(S->c, 0, &L) != LDG_OK)
    return (void *)rc;
  if (S->drv.pfn_cuCtxSetCurrent(NULL) != CUDA_SUCCESS) return (void *)rc;
  if (slc_event_record(n->e, L) != LDG_OK ||
      S->drv.pfn_cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != ctx0) {
    fprintf(stderr, "    a record on the legacy stream: current %p, want %p\n",
            (void *)cur, (void *)ctx0);
    slc_stream_unref(L);
    return (void *)rc;
  }
  if (slc_stream_synchronize(L) == LDG_OK) rc = PASS;
  slc_stream_unref(L);
  return (void *)rc;
}

static int t_no_current(suite *S) {
  nocur n = {.S = S};
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &n.s));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &n.s2));
  CHECK_OK(slc_event_create(S->c, 0, &n.e));
  CHECK_OK(slc_buffer_alloc_host(S->c, 256, &n.in));
  CHECK_OK(slc_buffer_alloc_host(S->c, 256, &n.out));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 256, &n.D));
  CUfunction f; /* load the module here: the thread counts context calls */
  CHECK_OK(kernel(S, 0, "spin", &f));
  pthread_t th;
  CHECK(pthread_create(&th, NULL, nocur_thread, &n) == 0);
  void *ret = NULL;
  pthread_join(th, &ret);
  CHECK((intptr_t)ret == PASS);
  CHECK_OK(slc_event_destroy(n.e));
  slc_stream_unref(n.s);
  slc_stream_unref(n.s2);
  CHECK_OK(slc_buffer_try_free(n.in));
  CHECK_OK(slc_buffer_try_free(n.out));
  CHECK_OK(slc_buffer_try_free(n.D));
  return PASS;
}

/* ---- Issue 15: regressions of the review's findings ---------------------- */

/* A keep that drops a stream reference it was given. */
typedef struct unref_keep {
  slc_stream *s;
  counter n;
} unref_keep;

static void unref_release(void *ctx) {
  unref_keep *u = ctx;
  slc_stream_unref(u->s);
  u->s = NULL;
  count_release(&u->n);
}

/* 1. A settle holds only ledger references to the streams it drains: one
 *    released first runs a keep that drops the last reference of the next
 *    one. Its drain context must still be alive when the settle drains it
 *    (ASan: heap-use-after-free in the drain otherwise). */
static int t_settle_unref_in_keep(suite *S) {
  const size_t bytes = 4096;
  slc_buffer *B;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &B));
  void *out = malloc(bytes);
  CHECK(out != NULL);
  uint64_t id = slc_buffer_id(B);
  for (int mode = 0; mode < 3; mode++) {
    slc_stream *n1, *n2;
    /* The registry lists the newest first: n1 is drained before n2. */
    CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &n2));
    CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &n1));
    counter k2 = {0};
    slc_hold h2 = {count_keep(&k2), &id, 1, NULL, 0};
    /* Each stream writes its own half (both hold B's id): the two are not
     * ordered, and writing the same bytes was a data race in the
     * executor's memory (TSan, cuda_suite_fake_libcuda_test). */
    CHECK_OK(busy(S, n2, 5, NULL));
    CHECK_OK(slc_memset_d8_async(n2, slc_buffer_dptr(B), 1, bytes / 2, &h2));
    unref_keep u = {n2, {0}};
    slc_hold h1 = {{unref_release, &u}, &id, 1, NULL, 0};
    CHECK_OK(slc_memset_d8_async(n1, slc_buffer_dptr(B) + bytes / 2, 2,
                                 bytes / 2, &h1));
    if (mode == 0) {
      CHECK_OK(slc_copy_dtoh(out, B, 0, bytes));
    } else if (mode == 1) {
      CHECK_OK(slc_copy_htod(B, 0, out, bytes));
    } else {
      CHECK_OK(slc_buffer_free(B));
      B = NULL;
    }
    CHECK(count_of(&u.n) == 1 && count_of(&k2) == 1);
    slc_stream_unref(n1);
  }
  free(out);
  return PASS;
}

/* 2. A stream whose last reference goes while its synchronisation fails
 *    stays a live ledger stream (another stream's pending wait holds it):
 *    a later settle drains it, so its drain context must live on. */
static int t_failed_unref_kept_for_waits(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  const size_t bytes = 4096;
  slc_buffer *B;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &B));
  slc_stream *b, *c;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &b));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &c));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  counter kb = {0};
  uint64_t id = slc_buffer_id(B);
  slc_hold hb = {count_keep(&kb), &id, 1, NULL, 0};
  CHECK_OK(busy(S, b, 5, NULL));
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(B), 1, bytes, &hb));
  CHECK_OK(slc_event_record(e, b));
  CHECK_OK(slc_stream_wait_event(c, e)); /* c's wait holds b's ledger side */
  CHECK_OK(slc_event_destroy(e));
  CHECK(hd_fail_nth("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED) == 0);
  slc_stream_unref(b); /* the destroy's sync fails */
  CHECK(hd_nth_fired() == 1);
  CHECK(count_of(&kb) == 0 && slc_buffer_held(B)); /* nothing released */
  CHECK_OK(slc_buffer_free(B)); /* drains b */
  CHECK(count_of(&kb) == 1);
  CHECK_OK(slc_stream_synchronize(c));
  slc_stream_unref(c);
  return PASS;
}

/* 3. A synchronous copy while a non-blocking stream holding the buffer is
 *    being destroyed (its destroy is inside cuStreamSynchronize): the copy
 *    must wait for that synchronisation, not run before the pending work. */
typedef struct destroy_in_sync {
  slc_stream *n;
  atomic_int in_sync;
  int rc;
} destroy_in_sync;

static void dis_sync_hook(void *arg) {
  atomic_store(&((destroy_in_sync *)arg)->in_sync, 1);
}

static void *dis_destroy_thread(void *arg) {
  destroy_in_sync *d = arg;
  d->rc = slc_stream_destroy(d->n);
  return NULL;
}

static void dis_drain_waits(enum slc__hook_point point, void *arg) {
  (void)point;
  (void)arg;
  hd_hold(false); /* the pending work may run now: the destroy's sync ends */
}

/* An issuer racing slc_engine_enable: a stream that existed before the
 * engine gets its marker ring while the enable is still attaching others.
 * The issue lands between (the hook) and must find the engine (it once read
 * the context's engine pointer as NULL there: published after the rings). */
typedef struct {
  slc_stream *s;
  slc_buffer *b;
  int calls, rc;
} attach_issue;

static void ai_hook(enum slc__hook_point point, void *arg) {
  attach_issue *a = arg;
  if (point != SLC__HOOK_ENGINE_ATTACHED || a->calls++ != 0) return;
  a->rc = slc_memset_d8_async(a->s, slc_buffer_dptr(a->b), 1, 64, NULL);
}

static int t_enable_issue_while_attaching(suite *S) {
  SKIP_IF(!S->hooks, "needs the hooks build (cuda_suite_hooks_test)");
  attach_issue a = {NULL, NULL, 0, -1};
  slc_stream *other;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &other));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &a.s));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 64, &a.b));
  CHECK(slc__set_test_hook(ai_hook, &a));
  slc_engine_config cfg = {.thread = false, .marker_every_ops = 1};
  int rc = slc_engine_enable(S->c, &cfg);
  slc__set_test_hook(NULL, NULL);
  CHECK_OK(rc);
  CHECK(a.calls == 2 && a.rc == LDG_OK);
  slc_stream_progress p;
  CHECK_OK(slc_stream_progress_get(a.s, &p));
  CHECK(p.engine_driven);
  CHECK_OK(slc_stream_synchronize(a.s));
  CHECK_OK(slc_buffer_free(a.b));
  slc_stream_unref(a.s);
  slc_stream_unref(other);
  return PASS;
}

static int t_copy_waits_for_destroy(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's hold");
  SKIP_IF(!S->hooks, "needs the hooks build (cuda_suite_hooks_test)");
  const size_t bytes = 4096;
  slc_buffer *B;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &B));
  unsigned char *out = malloc(bytes);
  CHECK(out != NULL);
  destroy_in_sync d = {NULL, 0, -1};
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &d.n));
  for (int mode = 0; mode < 2; mode++) {
    if (mode == 1) { /* again, through slc_copy_htod */
      slc_stream_unref(d.n);
      CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &d.n));
      atomic_store(&d.in_sync, 0);
    }
    counter k = {0};
    uint64_t id = slc_buffer_id(B);
    slc_hold h = {count_keep(&k), &id, 1, NULL, 0};
    hd_hold(true);
    CHECK_OK(slc_memset_d8_async(d.n, slc_buffer_dptr(B), 0xAA, bytes, &h));
    hd_set_hook(HD_FAULT_STREAM_SYNC, dis_sync_hook, &d);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, dis_destroy_thread, &d) == 0);
    while (!atomic_load(&d.in_sync)) sleep_ms(1);
    /* The destroy is in its cuStreamSynchronize, held: the memset pends. */
    CHECK(slc__set_test_hook(dis_drain_waits, NULL));
    memset(out, 0x11, bytes);
    int rc;
    if (mode == 0) {
      rc = slc_copy_dtoh(out, B, 0, bytes);
    } else {
      rc = slc_copy_htod(B, 0, out, 16); /* lands after the memset */
    }
    long pending_then = hd_pending_touching((void *)slc_buffer_dptr(B), 16);
    slc__set_test_hook(NULL, NULL);
    hd_hold(false);
    pthread_join(th, NULL);
    CHECK_OK(rc);
    CHECK_OK(d.rc);
    CHECK(count_of(&k) == 1);
    CHECK(pending_then == 0);
    if (mode == 0) {
      CHECK(all_bytes(out, bytes, 0xAA)); /* not 0xCD: the memset ran first */
    } else {
      CHECK_OK(slc_copy_dtoh(out, B, 0, 32));
      CHECK(all_bytes(out, 16, 0x11) && all_bytes(out + 16, 16, 0xAA));
    }
  }
  slc_stream_unref(d.n);
  free(out);
  CHECK_OK(slc_buffer_try_free(B));
  return PASS;
}

/* 4. A drain fails, then a keep released by the same settle calls back into
 *    the layer (a nested settle, a failing call, slc_clear_error): the
 *    outer copy must still fail with the drain's error and copy nothing. */
typedef struct nested_keep {
  slc_buffer *C;
  int mode;
  counter n;
} nested_keep;

static void nested_release(void *ctx) {
  nested_keep *k = ctx;
  unsigned char src[8] = {0};
  if (k->mode == 0) {
    (void)slc_copy_htod(k->C, 0, src, sizeof(src)); /* a nested settle */
  } else if (k->mode == 1) {
    (void)slc_stream_synchronize(NULL); /* a call that fails */
  } else {
    slc_clear_error();
  }
  count_release(&k->n);
}

static int t_nested_settle_keeps_failure(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  const size_t bytes = 4096;
  slc_buffer *B, *C;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &B));
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, bytes, &C));
  unsigned char *out = malloc(bytes);
  CHECK(out != NULL);
  uint64_t id = slc_buffer_id(B);
  for (int mode = 0; mode < 3; mode++) {
    slc_stream *nk, *nf; /* nf is newer: drained (and failing) first */
    CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &nk));
    CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &nf));
    nested_keep k = {C, mode, {0}};
    slc_hold hk = {{nested_release, &k}, &id, 1, NULL, 0};
    CHECK_OK(slc_memset_d8_async(nk, slc_buffer_dptr(B), 1, 64, &hk));
    CHECK_OK(raw_stream_sync(S, nk)); /* done, still held */
    hd_hold(true);
    counter kf = {0};
    slc_hold hf = {count_keep(&kf), &id, 1, NULL, 0};
    CHECK_OK(slc_memset_d8_async(nf, slc_buffer_dptr(B), 0xAA, bytes, &hf));
    memset(out, 0x11, bytes);
    CHECK(hd_fail_nth("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED) ==
          0);
    int rc = slc_copy_dtoh(out, B, 0, bytes);
    slc_error err = *slc_last_error();
    hd_hold(false);
    if (rc != SLC_EDRIVER || err.cu != CUDA_ERROR_LAUNCH_FAILED ||
        strcmp(err.call, "cuStreamSynchronize") != 0) {
      fprintf(stderr, "    mode %d: returned %d, record %d (%s)\n", mode, rc,
              err.code, err.message);
      return FAIL;
    }
    CHECK(err.code == SLC_EDRIVER);
    CHECK(all_bytes(out, bytes, 0x11)); /* the copy did not run */
    CHECK(count_of(&k.n) == 1 && count_of(&kf) == 0);
    CHECK_OK(slc_stream_synchronize(nf));
    CHECK(count_of(&kf) == 1);
    slc_stream_unref(nk);
    slc_stream_unref(nf);
  }
  free(out);
  CHECK_OK(slc_buffer_try_free(B));
  CHECK_OK(slc_buffer_try_free(C));
  return PASS;
}

/* 5. b (device 1) waits on an event recorded on a (device 0) after a copy
 *    from pinned H; b's synchronisation fails as its last reference goes:
 *    nothing of a may be released (device 0 still copies from H). What b
 *    held is released by the context's destroy, once proven complete. */
static int t_failed_unref_keeps_other_devices(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  SKIP_IF(S->devices < 2, "needs 2 devices");
  const size_t bytes = 1u << 16;
  slc_context *c = NULL; /* its own, to see what its destroy releases */
  CHECK_OK(slc_context_create(&S->drv, &c));
  staging st;
  memset(&st, 0, sizeof(st));
  st.S = S;
  st.bytes = bytes;
  CHECK_OK(slc_buffer_alloc_host(c, bytes, &st.buf));
  fill(slc_buffer_host(st.buf), bytes / 4, 5);
  slc_buffer *D0, *D1;
  CHECK_OK(slc_buffer_alloc_device(c, 0, bytes, &D0));
  CHECK_OK(slc_buffer_alloc_device(c, 1, bytes, &D1));
  slc_stream *a, *b;
  CHECK_OK(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &a));
  CHECK_OK(slc_stream_create(c, 1, SLC_STREAM_NONBLOCKING, &b));
  slc_event *e;
  CHECK_OK(slc_event_create(c, 0, &e));
  hd_hold(true);
  uint64_t ids[] = {slc_buffer_id(st.buf), slc_buffer_id(D0)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold h = {{staging_release, &st}, ids, 2, &r, 1};
  CHECK_OK(slc_copy_htod_async(a, slc_buffer_dptr(D0), slc_buffer_host(st.buf),
                               bytes, &h));
  CHECK_OK(slc_event_record(e, a));
  CHECK_OK(slc_stream_wait_event(b, e));
  counter kb = {0};
  uint64_t id1 = slc_buffer_id(D1);
  slc_hold hb = {count_keep(&kb), &id1, 1, NULL, 0};
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(D1), 1, bytes, &hb));
  CHECK(hd_fail_nth("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED) == 0);
  slc_stream_unref(b);
  CHECK(hd_nth_fired() == 1);
  int released = atomic_load(&st.released), early = atomic_load(&st.early);
  hd_hold(false);
  if (released != 0 || early != 0)
    fprintf(stderr, "    released=%d early=%d, a's copy complete: %s\n",
            released, early, early ? "NO" : "yes");
  CHECK(released == 0 && early == 0); /* a's copy from H still pends */
  CHECK(count_of(&kb) == 0);
  CHECK_OK(slc_stream_synchronize(a));
  CHECK(atomic_load(&st.released) == 1 && atomic_load(&st.early) == 0);
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(a);
  CHECK_OK(slc_buffer_free(D1)); /* settles device 1: proves b complete */
  CHECK(count_of(&kb) == 1);
  CHECK_OK(slc_buffer_try_free(D0));
  CHECK_OK(slc_buffer_try_free(st.buf));
  CHECK_OK(slc_context_destroy(c));
  return PASS;
}

/* A failed synchronisation as the last reference goes, and nothing proves
 * the stream complete before the context's destroy: the destroy
 * synchronises it and releases what it held, leaking nothing. */
static int t_context_destroy_finishes_failed_streams(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  slc_context *c = NULL;
  CHECK_OK(slc_context_create(&S->drv, &c));
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(c, 0, 4096, &D));
  slc_stream *b;
  CHECK_OK(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &b));
  counter kb = {0};
  freeing *f = malloc(sizeof(*f));
  CHECK(f != NULL);
  f->p = malloc(64); /* freed by the keep */
  f->count = &kb;
  CHECK(f->p != NULL);
  ldg_range r = range_of(f->p, 64);
  slc_hold hb = {{free_release, f}, NULL, 0, &r, 1}; /* names no buffer */
  CHECK_OK(slc_memset_d8_async(b, slc_buffer_dptr(D), 1, 4096, &hb));
  CHECK(hd_fail_nth("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED) == 0);
  slc_stream_unref(b);
  CHECK(hd_nth_fired() == 1 && count_of(&kb) == 0);
  /* The test (not the layer) waits for the device before freeing D. */
  raw_begin(S);
  CUresult cr = CUDA_ERROR_INVALID_CONTEXT;
  if (slc_device_make_current(c, 0) == LDG_OK)
    cr = slc_context_driver(c)->pfn_cuCtxSynchronize();
  raw_end(S);
  CHECK(cr == CUDA_SUCCESS);
  CHECK(count_of(&kb) == 0); /* the layer saw no completion */
  CHECK_OK(slc_buffer_try_free(D));
  CHECK_OK(slc_context_destroy(c)); /* synchronises b, then releases it */
  CHECK(count_of(&kb) == 1);
  CHECK(hd_early_frees() == 0);
  return PASS;
}

/* slc_context_destroy: a failing cuDevicePrimaryCtxRelease leaves the
 * context in place, and calling it again finishes the job. */
static int t_context_destroy_retry(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  slc_context *c = NULL;
  CHECK_OK(slc_context_create(&S->drv, &c));
  CHECK_OK(slc_device_make_current(c, 0)); /* retains the primary context */
  CHECK(hd_fail_nth("cuDevicePrimaryCtxRelease", 1, CUDA_ERROR_UNKNOWN) == 0);
  CHECK_RC(slc_context_destroy(c), SLC_EDRIVER);
  CHECK(slc_last_error()->cu == CUDA_ERROR_UNKNOWN);
  CHECK(strstr(slc_last_error_message(), "cuDevicePrimaryCtxRelease") != NULL);
  note_error("slc_context_destroy whose primary context release fails");
  CHECK_OK(slc_context_destroy(c)); /* again: releases it, frees c */
  return PASS;
}

/* Successful calls leave slc_last_error() alone, also when they drop the
 * last reference of a stream whose synchronisation fails. */
static int t_success_keeps_error_record(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's fault injection");
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *x, *y, *z;
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &x));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &y));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &z));
  slc_event *ex, *ey;
  CHECK_OK(slc_event_create(S->c, 0, &ex));
  CHECK_OK(slc_event_create(S->c, 0, &ey));
  uint64_t id = slc_buffer_id(D); /* so that freeing D settles them */
  slc_hold hd = {{NULL, NULL}, &id, 1, NULL, 0};
  CHECK_OK(slc_memset_d8_async(x, slc_buffer_dptr(D), 1, 64, &hd));
  CHECK_OK(slc_memset_d8_async(y, slc_buffer_dptr(D) + 64, 2, 64, &hd));
  CHECK_OK(slc_event_record(ex, x));
  CHECK_OK(slc_event_record(ey, y));
  slc_stream_unref(x); /* the events hold the last references */
  slc_stream_unref(y);
  CHECK_RC(slc_stream_synchronize(NULL), LDG_EINVAL); /* the sentinel */
  for (int i = 0; i < 2; i++) {
    CHECK(hd_fail_nth("cuStreamSynchronize", 1, CUDA_ERROR_LAUNCH_FAILED) ==
          0);
    if (i == 0) {
      CHECK_OK(slc_event_destroy(ex)); /* drops x's last reference */
    } else {
      CHECK_OK(slc_event_record(ey, z)); /* drops y's last reference */
    }
    CHECK(hd_nth_fired() == i + 1);
    CHECK(slc_last_error()->code == LDG_EINVAL);
    CHECK(strcmp(slc_last_error()->call, "slc_stream_synchronize") == 0);
  }
  CHECK_OK(slc_event_destroy(ey));
  CHECK_OK(slc_stream_synchronize(z));
  slc_stream_unref(z);
  CHECK_OK(slc_buffer_free(D));
  return PASS;
}

/* A keep run by a stream's destroy makes another device current: the
 * destroy must make the stream's own context current again before
 * cuStreamDestroy (the host executor refuses it otherwise). */
typedef struct switch_keep {
  slc_context *c;
  int device;
  counter n;
} switch_keep;

static void switch_release(void *ctx) {
  switch_keep *k = ctx;
  (void)slc_device_make_current(k->c, k->device);
  count_release(&k->n);
}

static int t_destroy_after_keep_switches_context(suite *S) {
  SKIP_IF(S->devices < 2, "needs 2 devices");
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *x;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &x));
  switch_keep k = {S->c, 1, {0}};
  slc_hold h = hold_keep((ldg_keep){switch_release, &k});
  CHECK_OK(slc_memset_d8_async(x, slc_buffer_dptr(D), 1, 64, &h));
  CHECK_OK(slc_stream_destroy(x));
  CHECK(count_of(&k.n) == 1);
  slc_stream_unref(x);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* ---- Issue 8, defect 3: ldg_add_wait may run keeps ----------------------- */

/* A release of b overtakes the wait being recorded: ldg_add_wait fires the
 * wait itself and runs a's keeps on this thread. A keep that records and
 * waits on the same event must not find the event's mutex held. */
typedef struct overtake {
  ldg_stream *target; /* the stream whose next enqueue is overtaken */
  atomic_int armed;
} overtake;

static void overtake_hook(enum ldg__hook_point point, struct ldg_stream *s,
                          void *arg) {
  overtake *o = arg;
  if (point != LDG__HOOK_ENQUEUE_RESERVED || s != o->target) return;
  int one = 1;
  if (!atomic_compare_exchange_strong(&o->armed, &one, 0)) return;
  (void)ldg_release(s, ldg_mark(s)); /* covers the reserved seq */
}

typedef struct reenter_event_keep {
  slc_event *e;
  slc_stream *rec_on, *waiter;
  int rc_record, rc_wait;
  counter n;
} reenter_event_keep;

static void reenter_event_release(void *ctx) {
  reenter_event_keep *k = ctx;
  k->rc_record = slc_event_record(k->e, k->rec_on);
  k->rc_wait = slc_stream_wait_event(k->waiter, k->e);
  count_release(&k->n);
}

static int t_add_wait_overtaken_reenters_event(suite *S) {
  SKIP_IF(!S->hooks, "needs the hooks build (cuda_suite_hooks_test)");
  slc_buffer *D;
  CHECK_OK(slc_buffer_alloc_device(S->c, 0, 4096, &D));
  slc_stream *a, *b, *b2;
  CHECK_OK(slc_stream_create(S->c, 0, 0, &a));
  CHECK_OK(slc_stream_create(S->c, 0, SLC_STREAM_NONBLOCKING, &b));
  CHECK_OK(slc_stream_create(S->c, 0, 0, &b2));
  slc_event *e;
  CHECK_OK(slc_event_create(S->c, 0, &e));
  reenter_event_keep k = {e, a, b2, -1, -1, {0}};
  slc_hold h = hold_keep((ldg_keep){reenter_event_release, &k});
  CHECK_OK(slc_memset_d8_async(a, slc_buffer_dptr(D), 1, 64, &h));
  CHECK_OK(slc_event_record(e, a));
  overtake o = {slc_stream_ledger(b), 1};
  CHECK(ldg__set_hook(overtake_hook, &o));
  int rc = slc_stream_wait_event(b, e); /* deadlocked here before the fix */
  ldg__set_hook(NULL, NULL);
  CHECK_OK(rc);
  CHECK(atomic_load(&o.armed) == 0);   /* the overtake happened */
  CHECK(count_of(&k.n) == 1);          /* a's keep ran inside the wait */
  CHECK_OK(k.rc_record);
  CHECK_OK(k.rc_wait);
  CHECK_OK(slc_stream_synchronize(b2));
  CHECK_OK(slc_stream_synchronize(a));
  CHECK_OK(slc_stream_synchronize(b));
  CHECK_OK(slc_event_destroy(e));
  slc_stream_unref(a);
  slc_stream_unref(b);
  slc_stream_unref(b2);
  CHECK_OK(slc_buffer_try_free(D));
  return PASS;
}

/* ---- --keep-reentry: keeps that call back into the layer ------------------
 * For every path that may run keeps (sl_cuda.h "Keeps") and every call the
 * header allows a keep to make, one scenario: stream x has a pending memset
 * whose keep makes the call; another stream z has pending work on the same
 * buffer; the path runs x's keep on this thread. Each keep must run exactly
 * once, the call must return what the header promises (LDG_OK, or
 * LDG_EDESTROYED on a stream being destroyed), nothing may deadlock, and
 * everything is torn down without leaks (ASan, TSan, the executor's count).
 */
enum rpath {
  RP_STREAM_SYNC,
  RP_STREAM_QUERY,
  RP_STREAM_DESTROY,
  RP_STREAM_UNREF,        /* the last reference */
  RP_EVENT_SYNC,
  RP_EVENT_QUERY,
  RP_DEVICE_SYNC,
  RP_BUFFER_FREE,         /* a buffer only x's work holds */
  RP_COPY_DTOH,           /* settle of a buffer x and z hold (x non-blocking) */
  RP_COPY_HTOD,
  RP_RANGE_SETTLE,        /* a host range x's work holds */
  RP_WAIT_TRANSITIVE,     /* w waits on x's event; sync w */
  RP_EVENT_DESTROY_LAST,  /* the event holds x's last reference */
  RP_EVENT_RERECORD_LAST, /* ... and is recorded on z */
  RP_OVERTAKEN_ENQUEUE,   /* hooks: a release of x overtakes x's enqueue */
  RP_OVERTAKEN_WAIT,      /* hooks: a release of z overtakes z's wait on e */
  RP_DESTROYED_AT_ENQUEUE, /* hooks: x destroyed between issue and record */
  RP_ENGINE_POLL,         /* x's marker completed; slc_engine_poll releases
                           * (last: the engine is enabled from here on) */
  RP_COUNT
};

static const char *const rpath_name[RP_COUNT] = {
    "stream_sync",        "stream_query",        "stream_destroy",
    "stream_unref_last",  "event_sync",          "event_query",
    "device_sync",        "buffer_free",         "copy_dtoh_settle",
    "copy_htod_settle",   "host_range_settle",   "wait_transitive",
    "event_destroy_last", "event_rerecord_last", "overtaken_enqueue",
    "overtaken_wait",     "destroyed_at_enqueue", "engine_poll",
};

enum raction {
  RA_NONE,
  RA_UNREF_X, /* the keep's own reference */
  RA_DESTROY_X,
  RA_ASYNC_X,
  RA_SYNC_X,
  RA_QUERY_X,
  RA_RECORD_X, /* the event, on x */
  RA_BUF_ASYNC_X,   /* slc_buf_memset_async on x: holds B by itself */
  RA_RECORD_EXTERNAL_X, /* slc_stream_record_external on x */
  RA_PEER_COPY_X, /* slc_buf_copy_peer_async on x from device 1: staged */
  RA_UNREF_Z,  /* z's last reference */
  RA_DESTROY_Z,
  RA_ASYNC_Z,
  RA_SYNC_Z,
  RA_WAIT_Z, /* z waits on the event */
  RA_EVENT_SYNC,
  RA_EVENT_QUERY,
  RA_COPY_DTOH, /* the buffer x and z hold */
  RA_COPY_HTOD,
  RA_DEVICE_SYNC,
  RA_FREE_B2, /* the buffer only x's work holds */
  RA_RANGE_SETTLE,
  RA_NEW_HANDLES, /* stream, event, buffer: create, use, end */
  RA_ENGINE_POLL, /* slc_engine_poll (engine_poll path only: the engine) */
  RA_COUNT
};

static const char *const raction_name[RA_COUNT] = {
    "none",         "unref_x",     "destroy_x",   "async_x",
    "sync_x",       "query_x",     "record_x",    "buf_async_x",
    "record_external_x",           "peer_copy_x", "unref_z_last",
    "destroy_z",    "async_z",     "sync_z",      "wait_z",
    "event_sync",   "event_query", "copy_dtoh",   "copy_htod",
    "device_sync",  "free_b2",     "range_settle", "new_handles",
    "engine_poll",
};

static bool raction_needs_x(int a) {
  return a >= RA_UNREF_X && a <= RA_PEER_COPY_X;
}

static bool raction_needs_e(int a) {
  return a == RA_RECORD_X || a == RA_WAIT_Z || a == RA_EVENT_SYNC ||
         a == RA_EVENT_QUERY;
}

typedef struct rkit {
  suite *S;
  int path, action;
  slc_stream *x, *z, *w, *v; /* v: where the event is recorded if not x */
  bool kit_has_x, kit_has_z, keep_has_x, keep_has_z;
  slc_event *e;
  bool e_gone;
  slc_buffer *B, *B2, *H;
  slc_buffer *P, *PS; /* RA_PEER_COPY_X: source (device 1 if any), staging */
  counter ran, kz, nested;
  atomic_int nested_issued;
  int rc;
  unsigned char scratch[64];
} rkit;

static int rk_async(rkit *k, slc_stream *s) {
  uint64_t id = slc_buffer_id(k->B);
  slc_hold h = {count_keep(&k->nested), &id, 1, NULL, 0};
  /* Bytes [64, 128) of B: no sync copy of the scenario reads them (a copy
   * does not wait for work enqueued during its settle). */
  int rc = slc_memset_d8_async(s, slc_buffer_dptr(k->B) + 64, 3, 64, &h);
  if (rc == LDG_OK) atomic_fetch_add(&k->nested_issued, 1);
  return rc;
}

/* The slc_buf_ form: B named by handle, held by the call itself. */
static int rk_buf_async(rkit *k, slc_stream *s) {
  slc_hold h = {count_keep(&k->nested), NULL, 0, NULL, 0};
  int rc = slc_buf_memset_async(s, k->B, 64, 3, 64, &h);
  if (rc == LDG_OK) atomic_fetch_add(&k->nested_issued, 1);
  return rc;
}

/* Work "issued by something else" (a raw memset), then recorded. Not
 * issued on a stream being destroyed: its sync may have run already. */
static int rk_record_external(rkit *k, slc_stream *s) {
  int rc = slc_stream_check_live(s);
  if (rc != LDG_OK) return rc;
  raw_begin(k->S);
  rc = slc_device_make_current(k->S->c, slc_stream_device(s));
  CUresult r = CUDA_ERROR_INVALID_CONTEXT;
  if (rc == LDG_OK)
    r = slc_context_driver(k->S->c)->pfn_cuMemsetD8Async(
        slc_buffer_dptr(k->B) + 64, 4, 64, slc_stream_handle(s));
  raw_end(k->S);
  if (r != CUDA_SUCCESS) return SLC_EDRIVER;
  uint64_t id = slc_buffer_id(k->B);
  slc_hold h = {count_keep(&k->nested), &id, 1, NULL, 0};
  rc = slc_stream_record_external(s, &h);
  if (rc == LDG_OK) atomic_fetch_add(&k->nested_issued, 1);
  return rc;
}

/* B[64, 128) = P (device 1's when there are two devices, with no peer
 * access: staged through PS in two pieces; else direct). */
static int rk_peer_copy(rkit *k, slc_stream *s) {
  slc_hold h = {count_keep(&k->nested), NULL, 0, NULL, 0};
  int rc = slc_buf_copy_peer_async(s, k->B, 64, k->P, 0, 64, k->PS, &h, NULL);
  if (rc == LDG_OK) atomic_fetch_add(&k->nested_issued, 1);
  return rc;
}

static int rk_new_handles(rkit *k) {
  slc_context *c = k->S->c;
  slc_stream *s;
  slc_event *e;
  slc_buffer *b;
  int rc = slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &s);
  if (rc != LDG_OK) return rc;
  rc = slc_event_create(c, 0, &e);
  if (rc == LDG_OK) {
    rc = slc_buffer_alloc_device(c, 0, 64, &b);
    if (rc == LDG_OK) {
      uint64_t id = slc_buffer_id(b);
      slc_hold h = {count_keep(&k->nested), &id, 1, NULL, 0};
      rc = slc_memset_d8_async(s, slc_buffer_dptr(b), 1, 64, &h);
      if (rc == LDG_OK) atomic_fetch_add(&k->nested_issued, 1);
      if (rc == LDG_OK) rc = slc_event_record(e, s);
      if (rc == LDG_OK) rc = slc_buffer_free(b); /* settles s */
      else (void)slc_buffer_free(b);
    }
    int rc2 = slc_event_destroy(e);
    if (rc == LDG_OK) rc = rc2;
  }
  int rc3 = slc_stream_destroy(s);
  if (rc == LDG_OK) rc = rc3;
  slc_stream_unref(s);
  return rc;
}

static void rk_keep(void *ctx) {
  rkit *k = ctx;
  slc_context *c = k->S->c;
  bool flag;
  int rc = LDG_OK;
  switch (k->action) {
    case RA_NONE: break;
    case RA_UNREF_X:
      slc_stream_unref(k->x);
      k->keep_has_x = false;
      break;
    case RA_DESTROY_X: rc = slc_stream_destroy(k->x); break;
    case RA_ASYNC_X: rc = rk_async(k, k->x); break;
    case RA_SYNC_X: rc = slc_stream_synchronize(k->x); break;
    case RA_QUERY_X: rc = slc_stream_query(k->x, &flag); break;
    case RA_RECORD_X: rc = slc_event_record(k->e, k->x); break;
    case RA_BUF_ASYNC_X: rc = rk_buf_async(k, k->x); break;
    case RA_RECORD_EXTERNAL_X: rc = rk_record_external(k, k->x); break;
    case RA_PEER_COPY_X: rc = rk_peer_copy(k, k->x); break;
    case RA_UNREF_Z:
      slc_stream_unref(k->z);
      k->keep_has_z = false;
      break;
    case RA_DESTROY_Z: rc = slc_stream_destroy(k->z); break;
    case RA_ASYNC_Z: rc = rk_async(k, k->z); break;
    case RA_SYNC_Z: rc = slc_stream_synchronize(k->z); break;
    case RA_WAIT_Z: rc = slc_stream_wait_event(k->z, k->e); break;
    case RA_EVENT_SYNC: rc = slc_event_synchronize(k->e); break;
    case RA_EVENT_QUERY: rc = slc_event_query(k->e, &flag); break;
    case RA_COPY_DTOH:
      rc = slc_copy_dtoh(k->scratch, k->B, 0, sizeof(k->scratch));
      break;
    case RA_COPY_HTOD:
      rc = slc_copy_htod(k->B, 0, k->scratch, sizeof(k->scratch));
      break;
    case RA_DEVICE_SYNC: rc = slc_device_synchronize(c, 0); break;
    case RA_FREE_B2:
      rc = slc_buffer_free(k->B2);
      if (rc == LDG_OK) k->B2 = NULL;
      break;
    case RA_RANGE_SETTLE:
      rc = slc_host_range_settle(c, slc_buffer_host(k->H), 64);
      break;
    case RA_NEW_HANDLES: rc = rk_new_handles(k); break;
    case RA_ENGINE_POLL: rc = slc_engine_poll(c, NULL); break;
  }
  k->rc = rc;
  if (k->keep_has_x) {
    slc_stream_unref(k->x);
    k->keep_has_x = false;
  }
  count_release(&k->ran);
}

/* One-shot ledger hook of the overtaking paths. */
typedef struct rk_hook {
  rkit *k;
  ldg_stream *target;
  atomic_int armed;
  bool destroy; /* destroy x instead of releasing the target */
} rk_hook;

static void rk_ledger_hook(enum ldg__hook_point point, struct ldg_stream *s,
                           void *arg) {
  rk_hook *h = arg;
  if (point != LDG__HOOK_ENQUEUE_RESERVED || s != h->target) return;
  int one = 1;
  if (!atomic_compare_exchange_strong(&h->armed, &one, 0)) return;
  if (h->destroy) {
    (void)slc_stream_destroy(h->k->x); /* on this thread, gate exited */
  } else {
    (void)ldg_release(s, ldg_mark(s)); /* covers the reserved seq */
  }
}

/* Runs one scenario; returns PASS, FAIL or SKIP (combination not valid). */
static int rk_run(suite *S, int path, int action, bool x_nb, bool x_newer) {
  const bool x_gone = path == RP_STREAM_UNREF ||
                      path == RP_EVENT_DESTROY_LAST ||
                      path == RP_EVENT_RERECORD_LAST;
  const bool hooked = path == RP_OVERTAKEN_ENQUEUE ||
                      path == RP_OVERTAKEN_WAIT ||
                      path == RP_DESTROYED_AT_ENQUEUE;
  const bool e_on_x = path == RP_EVENT_SYNC || path == RP_EVENT_QUERY ||
                      path == RP_WAIT_TRANSITIVE || path == RP_OVERTAKEN_WAIT ||
                      path == RP_EVENT_DESTROY_LAST ||
                      path == RP_EVENT_RERECORD_LAST;
  if (x_gone && raction_needs_x(action)) return SKIP;
  if (path == RP_EVENT_DESTROY_LAST && raction_needs_e(action)) return SKIP;
  /* The outer call frees B2: freeing it under that call is the caller's
   * error (the free must be the last call on a buffer). */
  if (path == RP_BUFFER_FREE && action == RA_FREE_B2) return SKIP;
  /* The overtaking paths release x early on purpose (the hook stands for a
   * release that raced ahead): freeing x's operand there is the test's. */
  if ((path == RP_OVERTAKEN_ENQUEUE || path == RP_OVERTAKEN_WAIT) &&
      action == RA_FREE_B2)
    return SKIP;
  if ((path == RP_COPY_DTOH || path == RP_COPY_HTOD) && !x_nb) return SKIP;
  if (hooked && !S->hooks) return SKIP;
  /* The engine is enabled for the engine_poll path only. */
  if (action == RA_ENGINE_POLL && path != RP_ENGINE_POLL) return SKIP;

  rkit *k = calloc(1, sizeof(*k));
  CHECK(k != NULL);
  k->S = S;
  k->path = path;
  k->action = action;
  slc_context *c = S->c;
  CHECK_OK(slc_buffer_alloc_device(c, 0, 4096, &k->B));
  CHECK_OK(slc_buffer_alloc_device(c, 0, 4096, &k->B2));
  CHECK_OK(slc_buffer_alloc_host(c, 4096, &k->H));
  if (action == RA_PEER_COPY_X) {
    CHECK_OK(slc_buffer_alloc_device(c, S->devices > 1 ? 1 : 0, 64, &k->P));
    CHECK_OK(slc_buffer_alloc_host(c, 32, &k->PS));
  }
  /* Settles drain the newest stream first: both orders. */
  if (x_newer)
    CHECK_OK(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &k->z));
  CHECK_OK(slc_stream_create(c, 0, x_nb ? SLC_STREAM_NONBLOCKING : 0, &k->x));
  if (!x_newer)
    CHECK_OK(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &k->z));
  CHECK_OK(slc_event_create(c, 0, &k->e));
  CHECK_OK(slc_stream_create(c, 0, 0, &k->v));
  k->kit_has_x = k->kit_has_z = true;
  if (raction_needs_x(action)) {
    slc_stream_ref(k->x);
    k->keep_has_x = true;
  }
  if (action == RA_UNREF_Z) { /* the keep gets the kit's reference: last */
    k->kit_has_z = false;
    k->keep_has_z = true;
  }
  uint64_t idz = slc_buffer_id(k->B);
  slc_hold hz = {count_keep(&k->kz), &idz, 1, NULL, 0};
  /* B's second half: the sync copies use [0, 64), keeps' async calls
   * [64, 128). */
  CHECK_OK(slc_memset_d8_async(k->z, slc_buffer_dptr(k->B) + 2048, 2, 2048,
                               &hz));

  uint64_t ids[] = {slc_buffer_id(k->B), slc_buffer_id(k->B2)};
  ldg_range r = range_of(slc_buffer_host(k->H), 4096);
  slc_hold hx = {{rk_keep, k}, ids, 2, &r, 1};
  rk_hook hook = {k, NULL, 1, false};
  if (hooked) {
    hook.target = slc_stream_ledger(path == RP_OVERTAKEN_WAIT ? k->z : k->x);
    hook.destroy = path == RP_DESTROYED_AT_ENQUEUE;
    if (path != RP_OVERTAKEN_WAIT) CHECK(ldg__set_hook(rk_ledger_hook, &hook));
  }
  /* The event on v (not z: it would hold z's last reference) before x's
   * operation: for two paths the keep runs during that operation. */
  if (!e_on_x) CHECK_OK(slc_event_record(k->e, k->v));
  /* x's operation (for two paths, the path itself). */
  CHECK_OK(slc_copy_htod_async(k->x, slc_buffer_dptr(k->B2),
                               slc_buffer_host(k->H), 4096, &hx));
  if (hooked) ldg__set_hook(NULL, NULL);
  if (e_on_x) CHECK_OK(slc_event_record(k->e, k->x));

  /* A sentinel in the error record: successful calls (the path's, and the
   * keep's when it succeeds) must leave it. */
  CHECK_RC(slc_event_synchronize(NULL), LDG_EINVAL);
  bool flag = false;
  switch (path) {
    case RP_STREAM_SYNC: CHECK_OK(slc_stream_synchronize(k->x)); break;
    case RP_STREAM_QUERY:
      CHECK_OK(raw_stream_sync(S, k->x));
      CHECK_OK(slc_stream_query(k->x, &flag));
      CHECK(flag);
      break;
    case RP_STREAM_DESTROY: CHECK_OK(slc_stream_destroy(k->x)); break;
    case RP_STREAM_UNREF:
      k->kit_has_x = false;
      slc_stream_unref(k->x);
      break;
    case RP_EVENT_SYNC: CHECK_OK(slc_event_synchronize(k->e)); break;
    case RP_EVENT_QUERY:
      CHECK_OK(raw_stream_sync(S, k->x));
      CHECK_OK(slc_event_query(k->e, &flag));
      CHECK(flag);
      break;
    case RP_DEVICE_SYNC: CHECK_OK(slc_device_synchronize(c, 0)); break;
    case RP_BUFFER_FREE:
      CHECK_OK(slc_buffer_free(k->B2));
      k->B2 = NULL;
      break;
    case RP_COPY_DTOH: /* B: held by x and z, both drained */
      CHECK_OK(slc_copy_dtoh(k->scratch, k->B, 0, 64));
      break;
    case RP_COPY_HTOD:
      CHECK_OK(slc_copy_htod(k->B, 0, k->scratch, 64));
      break;
    case RP_RANGE_SETTLE:
      CHECK_OK(slc_host_range_settle(c, slc_buffer_host(k->H), 4096));
      break;
    case RP_WAIT_TRANSITIVE:
      CHECK_OK(slc_stream_create(c, 0, 0, &k->w));
      CHECK_OK(slc_stream_wait_event(k->w, k->e));
      CHECK_OK(slc_stream_synchronize(k->w));
      break;
    case RP_EVENT_DESTROY_LAST:
      k->kit_has_x = false;
      slc_stream_unref(k->x); /* the event's reference is the last */
      CHECK_OK(slc_event_destroy(k->e));
      k->e_gone = true;
      break;
    case RP_EVENT_RERECORD_LAST:
      k->kit_has_x = false;
      slc_stream_unref(k->x);
      CHECK_OK(slc_event_record(k->e, k->z)); /* drops x: destroyed */
      break;
    case RP_OVERTAKEN_ENQUEUE: /* done: the keep ran inside the enqueue */
    case RP_DESTROYED_AT_ENQUEUE:
      break;
    case RP_ENGINE_POLL: { /* x's copy placed a marker (every op) */
      CHECK_OK(raw_stream_sync(S, k->x));
      size_t released = 0;
      for (int i = 0; i < 1000 && count_of(&k->ran) == 0; i++)
        CHECK_OK(slc_engine_poll(c, &released));
      break;
    }
    case RP_OVERTAKEN_WAIT:
      CHECK(ldg__set_hook(rk_ledger_hook, &hook));
      CHECK_OK(slc_stream_wait_event(k->z, k->e));
      ldg__set_hook(NULL, NULL);
      CHECK(atomic_load(&hook.armed) == 0);
      break;
  }
  CHECK(count_of(&k->ran) == 1); /* the keep ran, on this path */
  const bool x_may_be_destroyed =
      path == RP_STREAM_DESTROY || path == RP_DESTROYED_AT_ENQUEUE ||
      action == RA_DESTROY_X;
  const bool ok = k->rc == LDG_OK ||
                  (k->rc == LDG_EDESTROYED && x_may_be_destroyed &&
                   raction_needs_x(action));
  if (!ok) {
    fprintf(stderr, "    the keep's call returned %d: %s\n", k->rc,
            slc_last_error_message());
    return FAIL;
  }
  /* (Two paths ran the keep before the sentinel: during x's operation.) */
  if (k->rc == LDG_OK && path != RP_OVERTAKEN_ENQUEUE &&
      path != RP_DESTROYED_AT_ENQUEUE) {
    CHECK(slc_last_error()->code == LDG_EINVAL);
    CHECK(strcmp(slc_last_error()->call, "slc_event_synchronize") == 0);
  }
  /* Tear down: everything completes and is released exactly once. */
  if (k->w != NULL) slc_stream_unref(k->w);
  slc_stream_unref(k->v);
  if (k->kit_has_x) {
    int rc = slc_stream_synchronize(k->x);
    CHECK(rc == LDG_OK || rc == LDG_EDESTROYED);
    slc_stream_unref(k->x);
  }
  if (k->kit_has_z) {
    int rc = slc_stream_synchronize(k->z);
    CHECK(rc == LDG_OK || rc == LDG_EDESTROYED);
    slc_stream_unref(k->z);
  }
  if (!k->e_gone) CHECK_OK(slc_event_destroy(k->e));
  CHECK_OK(slc_buffer_free(k->B));
  if (k->B2 != NULL) CHECK_OK(slc_buffer_free(k->B2));
  CHECK_OK(slc_buffer_free(k->H));
  if (k->P != NULL) CHECK_OK(slc_buffer_free(k->P));
  if (k->PS != NULL) CHECK_OK(slc_buffer_free(k->PS));
  CHECK(count_of(&k->ran) == 1 && count_of(&k->kz) == 1);
  CHECK(count_of(&k->nested) == atomic_load(&k->nested_issued));
  free(k);
  return PASS;
}

static int t_keep_reentry(suite *S) {
  int ran = 0, skipped = 0;
  const bool verbose = getenv("CUDA_SUITE_VERBOSE") != NULL;
  for (int path = 0; path < RP_COUNT; path++) {
    if (path == RP_ENGINE_POLL) {
      /* Polled only (no thread: the keeps run on this thread), a marker
       * after every operation. Every stream is driven from now on. */
      slc_engine_config cfg = {.thread = false, .marker_every_ops = 1};
      CHECK_OK(slc_engine_enable(S->c, &cfg));
    }
    for (int action = 0; action < RA_COUNT; action++) {
      for (int v = 0; v < 4; v++) {
        const bool nb = (v & 1) != 0, newer = (v & 2) != 0;
        if (verbose)
          fprintf(stderr, "    %s / %s / %s%s\n", rpath_name[path],
                  raction_name[action], nb ? "non-blocking" : "blocking",
                  newer ? ", newer" : "");
        int r = rk_run(S, path, action, nb, newer);
        if (r == FAIL) {
          fprintf(stderr, "    path %s, keep calls %s, x %s%s\n",
                  rpath_name[path], raction_name[action],
                  nb ? "non-blocking" : "blocking",
                  newer ? " (created after z)" : "");
          return FAIL;
        }
        if (r == PASS) ran++;
        else skipped++;
      }
    }
  }
  printf("    %d scenarios (%d paths x %d calls x 2 stream kinds x 2 "
         "orders; %d not "
         "applicable%s)\n",
         ran, RP_COUNT, RA_COUNT, skipped,
         S->hooks ? "" : "; the overtaking paths need the hooks build");
  return PASS;
}

/* ---- --fault-sweep: every driver call failing once, at each call site -----
 * A scenario that uses every part of the layer runs once to count the
 * driver calls it makes per entry point; then, for each entry X and each n,
 * it runs again on a fresh executor with the n-th call of X failing
 * (hd_fail_nth). Every call of the scenario that fails must fail with that
 * injected error — its code, the CUresult, the entry's name in the message
 * (slc_last_error()) — and then succeed when retried (the failure was
 * once); a call that returns LDG_OK although the failure hit it swallowed
 * the error (only the void slc_stream_unref, whose failures keep the stream
 * for the context's destroy, and that destroy's tidying up may absorb one).
 * Throughout, no keep may run before the work it holds is done
 * (hd_pending_touching in the staging keep, pageable memory freed by keeps:
 * ASan), no buffer may be freed under pending work (hd_early_frees), every
 * keep runs exactly once, the data arrives, and nothing is left behind
 * (hd_shutdown counts 0). The failures absorbed where allowed are listed.
 * The scenario runs with the progress engine on (polled: no thread, so
 * the driver calls are the same in every run), a marker after every
 * operation, and the slc_buf_* calls: the engine's own failures (a marker
 * not recorded, a poll's query failing) are absorbed by design — the call
 * succeeds, the engine's stats count the failure, and the work is released
 * later, by a later poll or a sync; the sweep checks each of those.
 */
typedef struct sweep {
  suite *S;
  const char *entry; /* the entry failing, or NULL (the counting run) */
  long nth;
  CUresult code;
  int failures_seen; /* calls of the scenario that returned the failure */
  int engine_absorbed; /* calls that succeeded, the engine counting it */
  char where[160];   /* which call of the scenario failed */
  slc_context *c;    /* the scenario's, once created and the engine on */
} sweep;

/* The engine's failure counters (0 before the engine is on). */
static uint64_t sweep_engine_failures(const sweep *w) {
  slc_engine_stats es;
  if (w->c == NULL || slc_engine_stats_get(w->c, &es) != LDG_OK) return 0;
  return es.record_failures + es.query_failures;
}

/* One call failing once: a transient error. A sticky-class code
 * (CUDA_ERROR_LAUNCH_FAILED and the like) would fail every later call of
 * the context too, and a marker record failing with one makes the stream's
 * engine error sticky (engine_test sticky_record): not what this models. */
#define SWEEP_CODE CUDA_ERROR_UNKNOWN

/* A call of the scenario returned rc: LDG_OK, or the injected failure.
 * fired_before: hd_nth_fired() before the call. A call that returns LDG_OK
 * although the injected failure hit it swallowed the driver's error: only
 * slc_context_destroy may, for the calls it makes only to tidy up (taking
 * its contexts off this thread: cuCtxGetCurrent, cuCtxSetCurrent). */
static int sweep_check(sweep *w, const char *call, int rc, bool retried,
                       long fired_before, uint64_t engine_before,
                       const slc_error *record_before) {
  if (rc == LDG_OK) {
    bool tidy = strncmp(call, "slc_context_destroy", 19) == 0 &&
                w->entry != NULL && strncmp(w->entry, "cuCtx", 5) == 0 &&
                strcmp(w->entry, "cuCtxSynchronize") != 0;
    /* The engine absorbed it: counted once, the thread's record intact. */
    const slc_error *now = slc_last_error();
    bool engine = sweep_engine_failures(w) == engine_before + 1 &&
                  now->code == record_before->code &&
                  now->cu == record_before->cu &&
                  strcmp(now->message, record_before->message) == 0;
    if (hd_nth_fired() != fired_before && engine) {
      w->engine_absorbed++;
      snprintf(w->where, sizeof(w->where), "%s (the engine)", call);
      return PASS;
    }
    if (hd_nth_fired() != fired_before && !tidy) {
      fprintf(stderr, "    %s returned LDG_OK although %s failed in it\n",
              call, w->entry);
      return FAIL;
    }
    return PASS;
  }
  const slc_error *e = slc_last_error();
  bool ok = !retried && w->entry != NULL && hd_nth_fired() == 1 &&
            w->failures_seen == 0 && rc == e->code && e->cu == SWEEP_CODE &&
            rc == slc_code_of(SWEEP_CODE) &&
            strstr(e->message, w->entry) != NULL &&
            strstr(e->message, "CUDA_ERROR_UNKNOWN") != NULL;
  if (!ok) {
    fprintf(stderr,
            "    %s%s returned %d (%s)\n      record: code %d, CUresult %d, "
            "\"%s\"\n",
            call, retried ? " (retried)" : "", rc, slc_strerror(rc), e->code,
            (int)e->cu, e->message);
    return FAIL;
  }
  w->failures_seen++;
  snprintf(w->where, sizeof(w->where), "%s", call);
  return PASS;
}

/* call, and once more if it failed with the injected error. */
#define SWEEP_STEP(call)                                                 \
  do {                                                                   \
    long f_ = hd_nth_fired();                                            \
    uint64_t e_ = sweep_engine_failures(w);                              \
    slc_error r_ = *slc_last_error();                                    \
    int rc_ = (call);                                                    \
    if (sweep_check(w, #call, rc_, false, f_, e_, &r_) != PASS)          \
      return FAIL;                                                       \
    if (rc_ != LDG_OK) {                                                 \
      f_ = hd_nth_fired();                                               \
      e_ = sweep_engine_failures(w);                                     \
      r_ = *slc_last_error();                                            \
      rc_ = (call);                                                      \
      if (sweep_check(w, #call, rc_, true, f_, e_, &r_) != PASS)         \
        return FAIL;                                                     \
    }                                                                    \
  } while (0)

/* A destroy whose driver destroy failed has destroyed the stream in the
 * ledger: the retry says so. */
#define SWEEP_DESTROY(s)                                                   \
  do {                                                                     \
    long f_ = hd_nth_fired();                                              \
    uint64_t e_ = sweep_engine_failures(w);                                \
    slc_error r_ = *slc_last_error();                                      \
    int rc_ = slc_stream_destroy(s);                                       \
    if (sweep_check(w, "slc_stream_destroy", rc_, false, f_, e_, &r_) !=   \
        PASS)                                                              \
      return FAIL;                                                         \
    if (rc_ != LDG_OK) {                                                   \
      f_ = hd_nth_fired();                                                 \
      e_ = sweep_engine_failures(w);                                       \
      r_ = *slc_last_error();                                              \
      rc_ = slc_stream_destroy(s);                                         \
      if (rc_ != LDG_EDESTROYED &&                                         \
          sweep_check(w, "slc_stream_destroy", rc_, true, f_, e_, &r_) !=  \
              PASS)                                                        \
        return FAIL;                                                       \
    }                                                                      \
  } while (0)

/* slc_buffer_try_free, and slc_buffer_free if the ledger still holds b. */
static int sweep_try_free(slc_buffer *b) {
  int rc = slc_buffer_try_free(b);
  return rc == LDG_EBUSY ? slc_buffer_free(b) : rc;
}

static int sweep_scenario(sweep *w) {
  suite *S = w->S;
  const size_t n = 4096, bytes = n * 4;
  slc_context *c = NULL;
  SWEEP_STEP(slc_context_create(&S->drv, &c));
  /* Polled only, a marker after every operation (T never). */
  slc_engine_config ecfg = {.thread = false,
                            .marker_every_ops = 1,
                            .marker_every_us = 100000000};
  SWEEP_STEP(slc_engine_enable(c, &ecfg));
  w->c = c;
  const int d1 = slc_device_count(c) > 1 ? 1 : 0;
  char name[64];
  SWEEP_STEP(slc_device_name(c, d1, name, sizeof(name)));
  slc_stream *s0, *n0, *n1;
  SWEEP_STEP(slc_stream_create(c, 0, 0, &s0));
  SWEEP_STEP(slc_stream_create(c, 0, SLC_STREAM_NONBLOCKING, &n0));
  SWEEP_STEP(slc_stream_create(c, d1, SLC_STREAM_NONBLOCKING, &n1));
  slc_event *e0;
  SWEEP_STEP(slc_event_create(c, 0, &e0));
  slc_buffer *D0, *D1;
  SWEEP_STEP(slc_buffer_alloc_device(c, 0, bytes, &D0));
  SWEEP_STEP(slc_buffer_alloc_device(c, d1, bytes, &D1));
  staging st;
  memset(&st, 0, sizeof(st));
  st.S = S;
  st.bytes = bytes;
  SWEEP_STEP(slc_buffer_alloc_host(c, bytes, &st.buf));
  fill(slc_buffer_host(st.buf), n, 3);
  slc_module *m;
  SWEEP_STEP(slc_module_load(c, 0, slc_test_ptx, &m));
  CUfunction add1;
  SWEEP_STEP(slc_module_function(m, "add1", &add1));
  counter k = {0};
  int expect_k = 0;

  /* s0: H -> D0 (staging), add1; e0 after; n0 waits, then overwrites. */
  uint64_t ids[] = {slc_buffer_id(st.buf), slc_buffer_id(D0)};
  ldg_range r = range_of(slc_buffer_host(st.buf), bytes);
  slc_hold hs = {{staging_release, &st}, ids, 2, &r, 1};
  SWEEP_STEP(slc_copy_htod_async(s0, slc_buffer_dptr(D0),
                                 slc_buffer_host(st.buf), bytes, &hs));
  CUdeviceptr p0 = slc_buffer_dptr(D0);
  unsigned nn = (unsigned)n;
  void *params[] = {&p0, &nn};
  uint64_t id0 = slc_buffer_id(D0), id1 = slc_buffer_id(D1);
  slc_hold hk = {count_keep(&k), &id0, 1, NULL, 0};
  SWEEP_STEP(slc_launch(s0, add1, (slc_dim3){(nn + 255) / 256, 1, 1},
                        (slc_dim3){256, 1, 1}, 0, params, &hk));
  expect_k++;
  SWEEP_STEP(slc_event_record(e0, s0));
  SWEEP_STEP(slc_stream_wait_event(n0, e0));
  unsigned char *out = malloc(bytes);
  CHECK(out != NULL);
  SWEEP_STEP(slc_copy_dtoh_async(n0, out, slc_buffer_dptr(D0), bytes, &hk));
  expect_k++;
  SWEEP_STEP(slc_memset_d8_async(n0, slc_buffer_dptr(D0), 0x5A, bytes, &hk));
  expect_k++;
  /* n1: pageable staging freed by its keep (ASan if early). */
  freeing *f = malloc(sizeof(*f));
  CHECK(f != NULL);
  f->p = malloc(bytes);
  f->count = &k;
  CHECK(f->p != NULL);
  memset(f->p, 0x33, bytes);
  ldg_range rf = range_of(f->p, bytes);
  slc_hold hf = {{free_release, f}, &id1, 1, &rf, 1};
  SWEEP_STEP(slc_copy_htod_async(n1, slc_buffer_dptr(D1), f->p, bytes, &hf));
  expect_k++;
  SWEEP_STEP(slc_copy_dtod_async(n1, slc_buffer_dptr(D1),
                                 slc_buffer_dptr(D1) + bytes / 2, 64, &hk));
  expect_k++;
  /* n1: a device-0 buffer copied in, staged (two pieces: no peer access
   * yet), then peer access enabled and copied in directly. */
  slc_buffer *P0, *PS;
  SWEEP_STEP(slc_buffer_alloc_device(c, 0, 256, &P0));
  SWEEP_STEP(slc_buffer_alloc_host(c, 128, &PS));
  SWEEP_STEP(
      slc_buf_copy_peer_async(n1, D1, 1024, P0, 0, 256, PS, &hk, NULL));
  expect_k++;
  if (d1 != 0) SWEEP_STEP(slc_device_enable_peer_access(c, d1, 0));
  SWEEP_STEP(
      slc_buf_copy_peer_async(n1, D1, 2048, P0, 0, 256, NULL, &hk, NULL));
  expect_k++;

  bool flag;
  SWEEP_STEP(slc_stream_query(s0, &flag));
  SWEEP_STEP(slc_event_query(e0, &flag));
  SWEEP_STEP(slc_event_synchronize(e0));
  unsigned char *back = malloc(bytes);
  CHECK(back != NULL);
  SWEEP_STEP(slc_copy_dtoh(back, D0, 0, bytes)); /* settles n0 */
  CHECK(all_bytes(back, bytes, 0x5A));
  /* What n0 copied out before its memset: the staging data, plus 1. */
  CHECK(mismatch(out, n, 3, 1) == n);
  SWEEP_STEP(slc_copy_htod(D1, 0, back, 64)); /* settles n1 */
  SWEEP_STEP(slc_stream_synchronize(s0));
  SWEEP_STEP(slc_device_synchronize(c, d1));
  SWEEP_STEP(slc_host_range_settle(c, slc_buffer_host(st.buf), bytes));
  CHECK(atomic_load(&st.released) == 1 && atomic_load(&st.early) == 0);
  CHECK(count_of(&k) == expect_k);

  /* The engine: slc_buf_* on s0, completed (a raw sync that the sweep
   * neither counts nor fails), then released by polls alone. A failure the
   * engine absorbed (a marker not recorded, a query failed) only delays:
   * another sync and poll release the rest (a tail marker). */
  SWEEP_STEP(slc_buf_memset_async(s0, D0, 0, 0x11, 64, &hk));
  expect_k++;
  slc_buffer *const launch_bufs[] = {D0};
  SWEEP_STEP(slc_buf_launch(s0, add1, (slc_dim3){(nn + 255) / 256, 1, 1},
                            (slc_dim3){256, 1, 1}, 0, params, launch_bufs, 1,
                            &hk));
  expect_k++;
  SWEEP_STEP(slc_buf_copy_async(s0, st.buf, 0, D0, 0, 64, &hk));
  expect_k++;
  CHECK(slc_buffer_held(D0));
  for (int round = 0; count_of(&k) != expect_k; round++) {
    CHECK(round < 3);
    hd_uncounted(true);
    CHECK(S->drv.pfn_cuStreamSynchronize(slc_stream_handle(s0)) ==
          CUDA_SUCCESS);
    hd_uncounted(false);
    size_t released = 0;
    SWEEP_STEP(slc_engine_poll(c, &released));
  }
  CHECK(!slc_buffer_held(D0));
  /* The memset's 0x11 bytes plus 1 per word (add1) copied back: the three
   * ran in order, and before the keeps. */
  const uint32_t *wback = slc_buffer_host(st.buf);
  for (int i = 0; i < 16; i++) CHECK(wback[i] == 0x11111112u);
  SWEEP_STEP(slc_buffer_free(D1));
  SWEEP_STEP(sweep_try_free(P0));
  SWEEP_STEP(sweep_try_free(PS));
  SWEEP_DESTROY(n1);
  slc_stream_unref(n1);
  /* n0 gets work, then its last reference goes (a destroy inside). */
  SWEEP_STEP(slc_memset_d8_async(n0, slc_buffer_dptr(D0), 1, 64, &hk));
  expect_k++;
  slc_stream_unref(n0);
  SWEEP_STEP(slc_event_destroy(e0));
  slc_stream_unref(s0);
  SWEEP_STEP(slc_module_unload(m));
  SWEEP_STEP(sweep_try_free(D0));
  SWEEP_STEP(slc_buffer_free(st.buf));
  w->c = NULL; /* no stats once the context is going */
  SWEEP_STEP(slc_context_destroy(c));
  CHECK(count_of(&k) == expect_k);
  CHECK(hd_early_frees() == 0);
  free(out);
  free(back);
  return PASS;
}

static int t_fault_sweep(suite *S) {
  SKIP_IF(!S->host, "needs the host executor's failure injection");
  /* The suite's own context is not used: each run gets a fresh executor. */
  CHECK_OK(slc_context_destroy(S->c));
  S->c = NULL;
  hd_config cfg = {S->host_devices, S->delay_us};
  sweep w = {S, NULL, 0, SWEEP_CODE, 0, 0, "", NULL};
  hd_calls_reset();
  CHECK(sweep_scenario(&w) == PASS);
  long counts[HD_E_COUNT];
  long total = 0;
  for (int i = 0; i < HD_E_COUNT; i++) {
    counts[i] = hd_calls(hd_entry_name(i));
    total += counts[i];
  }
  printf("    driver calls of one run, by entry:");
  for (int i = 0; i < HD_E_COUNT; i++)
    if (counts[i] != 0) printf(" %s %ld", hd_entry_name(i), counts[i]);
  printf("\n");
  int runs = 0, absorbed = 0, engine = 0;
  for (int i = 0; i < HD_E_COUNT; i++) {
    for (long nth = 1; nth <= counts[i]; nth++) {
      long leaked = hd_shutdown();
      CHECK(leaked == 0);
      CHECK(hd_install(&S->drv, &cfg) == 0);
      w = (sweep){S, hd_entry_name(i), nth, SWEEP_CODE, 0, 0, "", NULL};
      CHECK(hd_fail_nth(w.entry, nth, SWEEP_CODE) == 0);
      int r = sweep_scenario(&w);
      if (r != PASS || hd_nth_armed()) {
        fprintf(stderr, "    with call %ld of %s failing%s\n", nth, w.entry,
                hd_nth_armed() ? " (never reached: the calls changed)" : "");
        return FAIL;
      }
      runs++;
      if (w.engine_absorbed != 0) {
        engine++;
        printf("    absorbed by the engine (counted, released later): call "
               "%ld of %s in %s\n", nth, w.entry, w.where);
      } else if (w.failures_seen == 0) {
        absorbed++;
        printf("    absorbed: call %ld of %s (in slc_stream_unref, kept for "
               "the context's destroy, or in its tidying up)\n",
               nth, w.entry);
      }
    }
  }
  printf("    %ld driver calls per run; %d runs each with one failing, %d "
         "absorbed by the layer, %d by the engine\n",
         total, runs, absorbed, engine);
  /* The engine's paths were swept: its records and queries did fail. */
  CHECK(counts[hd_entry_index("cuEventQuery")] > 0 &&
        counts[hd_entry_index("cuEventRecord")] > 0 && engine > 0);
  return PASS;
}

/* ---- Registry ----------------------------------------------------------- */

/* Which run a test belongs to: the default run, or one of the modes (a
 * test of a mode runs only with that option, or when --only names it). */
enum {
  T_HOOKS = 1,   /* forces an interleaving with the test hooks: also run by
                  * --hooks-only (the plain build skips it, saying so) */
  T_REENTRY = 2, /* --keep-reentry */
  T_SWEEP = 4,   /* --fault-sweep */
};

typedef struct test {
  const char *name;
  int (*fn)(suite *);
  const char *what;
  unsigned flags;
} test;

static const test tests[] = {
    {"info", t_info, "driver, devices, and the PTX module loads", 0},
    {"copy_roundtrip", t_copy_roundtrip,
     "H->D, D->D, add1 kernel, D->H on one stream; sync releases all", 0},
    {"memset", t_memset, "cuMemsetD8Async then D->H on a non-blocking stream", 0},
    {"staging_after_copy", t_staging_after_copy,
     "each pinned staging buffer released only after its copy completed", 0},
    {"pageable_freed_in_keep", t_pageable_freed_in_keep,
     "pageable staging freed by its keep (a use-after-free if early)", 0},
    {"record_wait_sync", t_record_wait_sync,
     "copy/record/wait/sync: the copy stream is released transitively", 0},
    {"event_sync_to_mark", t_event_sync_to_mark,
     "event sync releases to the mark read before the record, no further", 0},
    {"event_and_stream_query", t_event_and_stream_query,
     "queries: not ready releases nothing, complete releases to the mark", 0},
    {"event_rerecord", t_event_rerecord,
     "re-recording an event replaces its stream and mark", 0},
    {"event_never_recorded", t_event_never_recorded,
     "a never-recorded event releases nothing and waits on nothing", 0},
    {"wait_chain", t_wait_chain,
     "waits chain: a -> b -> c, sync c releases b and a up to the events", 0},
    {"nonblocking_settle", t_nonblocking_settle,
     "synchronous copies settle the non-blocking streams holding a vector", 0},
    {"free_settles", t_free_settles,
     "buffer free settles (drain / device sync); try_free says busy", 0},
    {"device_sync", t_device_sync,
     "device sync releases its streams (non-blocking too), only its own", 0},
    {"cross_device_wait", t_cross_device_wait,
     "2 devices: a wait releases across devices; per-device sync", 0},
    {"cross_device_copy", t_cross_device_copy,
     "2 devices: data copied device 0 -> device 1 after a cross wait", 0},
    {"chain_all_devices", t_chain_all_devices,
     "3+ devices: a chain of waits through every device; syncing the last "
     "releases every device up to its event",
     0},
    {"chain_all_devices_engine", t_chain_all_devices_engine,
     "3+ devices: the same chain released by the last stream's engine "
     "markers alone",
     0},
    {"peer_access", t_peer_access,
     "2+ devices: peer access queried, enabled (idempotent, one way), "
     "refused where the devices cannot",
     0},
    {"peer_copy_ring", t_peer_copy_ring,
     "2+ devices: data copied through every device, peer to peer or staged; "
     "one sync releases all",
     0},
    {"peer_copy_bad_input", t_peer_copy_bad_input,
     "3+ devices: bad peer copies refused, nothing issued", 0},
    {"stream_destroy", t_stream_destroy,
     "destroy releases everything; later calls are refused", 0},
    {"bad_pointers", t_bad_pointers,
     "bad device pointers and bad holds: refused, nothing recorded", 0},
    {"record_holds", t_record_holds,
     "record_deferred/_external: every hold shape, each refusal's reason", 0},
    {"launch_and_module_errors", t_launch_and_module_errors,
     "launch and module errors carry the driver's name and message", 0},
    {"failed_syncs_release_nothing", t_failed_syncs_release_nothing,
     "every failing sync/query/destroy/settle releases nothing", 0},
    {"ordering_rules", t_ordering_rules,
     "each ordering rule checked at the moment it matters (hooks)", 0},
    {"kernel_fault", t_kernel_fault,
     "a trapping kernel: the syncs fail and release nothing", 0},
    {"record_enomem", t_record_enomem,
     "issued but not recorded: synchronised, keep returned to the caller", 0},
    {"selfcheck_premature_release", t_selfcheck_premature_release,
     "the harness detects a premature release (poisoned data arrives)", 0},
    {"no_driver", t_no_driver,
     "no libcuda: loading fails cleanly, every call is a clear error", 0},
    {"stub_library", t_stub_library,
     "the toolkit's stub libcuda: every symbol resolves, cuInit refuses", 0},
    {"threads", t_threads,
     "threads copy/launch/record/wait/sync at once on shared handles", 0},
    {"destroy_race", t_destroy_race,
     "a stream destroyed while threads copy on it", 0},
    {"event_race", t_event_race,
     "one event re-recorded while others sync, query and wait on it", 0},
    {"event_lock_orders", t_event_lock_orders,
     "two records of one event: one order in the driver and the layer", 0},
    {"gate_waits", t_gate_waits,
     "a destroy waits for a call inside the driver on its stream", 0},
    {"cache_current", t_cache_current,
     "slc_context_cache_current: no context query on a hit; a switch "
     "outside the layer must be told", 0},
    {"no_current", t_no_current,
     "copies, records, waits and syncs need no context current and keep it",
     0},
    {"settle_unref_in_keep", t_settle_unref_in_keep,
     "a keep run by a settle drops the next drained stream's last reference", 0},
    {"failed_unref_kept_for_waits", t_failed_unref_kept_for_waits,
     "a failed sync as the last reference goes: the stream stays drainable", 0},
    {"enable_issue_while_attaching", t_enable_issue_while_attaching,
     "an issue between two streams' attach by slc_engine_enable finds it",
     T_HOOKS},
    {"copy_waits_for_destroy", t_copy_waits_for_destroy,
     "a sync copy waits for a destroy's sync of a stream holding the buffer",
     T_HOOKS},
    {"nested_settle_keeps_failure", t_nested_settle_keeps_failure,
     "a keep's nested calls do not hide the failed drain of its settle", 0},
    {"failed_unref_keeps_other_devices", t_failed_unref_keeps_other_devices,
     "a failed sync as the last reference goes releases no other device", 0},
    {"context_destroy_finishes_failed_streams",
     t_context_destroy_finishes_failed_streams,
     "the context's destroy proves and releases streams whose sync failed", 0},
    {"context_destroy_retry", t_context_destroy_retry,
     "a failed primary context release leaves the context; a retry ends it", 0},
    {"success_keeps_error_record", t_success_keeps_error_record,
     "successful calls leave slc_last_error() alone", 0},
    {"destroy_after_keep_switches_context",
     t_destroy_after_keep_switches_context,
     "a destroy makes its context current again after the keeps ran", 0},
    {"add_wait_overtaken_reenters_event", t_add_wait_overtaken_reenters_event,
     "an overtaken wait runs keeps outside the event's mutex", T_HOOKS},
    {"keep_reentry", t_keep_reentry,
     "keeps call every allowed slc_ function on every path that runs keeps",
     T_REENTRY},
    {"fault_sweep", t_fault_sweep,
     "each driver call of a scenario failing once: errors reach the caller, "
     "nothing is released early or leaked",
     T_SWEEP},
};

#define N_TESTS (sizeof(tests) / sizeof(tests[0]))

/* ---- Running ------------------------------------------------------------ */

static int suite_begin(suite *S) {
  S->c = NULL;
  S->devices = 0;
  S->abandon = false;
  S->skip_reason = NULL;
  memset(S->mod, 0, sizeof(S->mod));
  if (S->host) {
    hd_config cfg = {S->host_devices, S->delay_us};
    if (hd_install(&S->drv, &cfg) != 0) {
      fprintf(stderr, "    hd_install failed\n");
      return FAIL;
    }
    slc_test_register_host_kernels();
  } else if (!S->drv.loaded && slc_driver_load(&S->drv, S->libcuda) != 0) {
    fprintf(stderr, "    %s\n", S->drv.load_error);
    return FAIL;
  }
  int rc = slc_context_create(&S->drv, &S->c);
  if (rc != LDG_OK) {
    fprintf(stderr, "    slc_context_create: %s\n", slc_last_error_message());
    return FAIL;
  }
  S->devices = slc_device_count(S->c);
  if (S->devices > MAX_DEV) S->devices = MAX_DEV;
  return PASS;
}

static int suite_end(suite *S, int result) {
  if (S->abandon) return result;
  int rc = PASS;
  for (int i = 0; i < MAX_DEV; i++) {
    if (S->mod[i] != NULL && slc_module_unload(S->mod[i]) != LDG_OK) {
      fprintf(stderr, "    slc_module_unload: %s\n", slc_last_error_message());
      rc = FAIL;
    }
    S->mod[i] = NULL;
  }
  if (result == PASS || result == SKIP) {
    if (slc_context_destroy(S->c) != LDG_OK) {
      fprintf(stderr, "    the test left handles alive: %s\n",
              slc_last_error_message());
      rc = FAIL;
    }
  }
  S->c = NULL;
  if (S->host) {
    long leaked = hd_shutdown();
    if (leaked != 0 && (result == PASS || result == SKIP)) {
      fprintf(stderr, "    the host executor had %ld objects left\n", leaked);
      rc = FAIL;
    }
  }
  return result != PASS ? result : rc;
}

static int run_in_process(suite *S, const test *t) {
  int r = suite_begin(S);
  if (r != PASS) return r;
  r = t->fn(S);
  return suite_end(S, r);
}

static unsigned g_timeout_s = 120;

static int run_forked(suite *S, const test *t, char *why, size_t why_len) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, why_len, "fork failed");
    return FAIL;
  }
  if (pid == 0) {
    alarm(g_timeout_s);
    S->forked = true;
    int r = run_in_process(S, t);
    if (r == SKIP && S->skip_reason != NULL)
      fprintf(stdout, "    (skip: %s)\n", S->skip_reason);
    fflush(stdout);
    fflush(stderr);
    _exit(r);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) {
    snprintf(why, why_len, "killed by signal %d%s", WTERMSIG(status),
             WTERMSIG(status) == SIGALRM ? " (time limit)" : "");
    return FAIL;
  }
  int code = WEXITSTATUS(status);
  return code == PASS || code == SKIP ? code : FAIL;
}

static bool selected(const char *only, const char *name) {
  if (only == NULL) return true;
  size_t n = strlen(name);
  for (const char *p = only; *p;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return true;
    p += len + (comma ? 1 : 0);
  }
  return false;
}

static bool opt(const char *arg, const char *name, const char **val) {
  size_t n = strlen(name);
  if (strncmp(arg, name, n) != 0) return false;
  if (arg[n] == '=') {
    *val = arg + n + 1;
    return true;
  }
  if (arg[n] == '\0') {
    *val = NULL;
    return true;
  }
  return false;
}

enum { PROBE_OK = 0, PROBE_ERROR = 1, PROBE_NO_LIBRARY = 2, PROBE_NO_GPU = 3 };

/* Loads the driver and creates a context, then says what happened in msg:
 * PROBE_OK (msg: the driver's origin), PROBE_NO_LIBRARY (no libcuda.so.1),
 * PROBE_NO_GPU (a stub or unusable driver, or no device), PROBE_ERROR. */
static int probe_here(suite *S, char *msg, size_t msg_len) {
  if (!S->drv.loaded && slc_driver_load(&S->drv, S->libcuda) != 0) {
    snprintf(msg, msg_len, "%s", S->drv.load_error);
    return S->drv.library_missing ? PROBE_NO_LIBRARY : PROBE_ERROR;
  }
  slc_context *c = NULL;
  int rc = slc_context_create(&S->drv, &c);
  if (rc != LDG_OK) {
    snprintf(msg, msg_len, "%s", slc_last_error_message());
    return rc == SLC_ENODRIVER || rc == SLC_ENODEVICE ? PROBE_NO_GPU
                                                      : PROBE_ERROR;
  }
  snprintf(msg, msg_len, "%s", S->drv.origin);
  (void)slc_context_destroy(c);
  return PROBE_OK;
}

/* probe_here in a child process: with --fork this process never loads or
 * initialises the driver (CUDA does not survive a fork once initialised);
 * each test's child loads it for itself. */
static int probe(suite *S, char *msg, size_t msg_len) {
  int fds[2];
  if (pipe(fds) != 0) return PROBE_ERROR;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char m[600];
    int code = probe_here(S, m, sizeof(m));
    ssize_t w = write(fds[1], m, strlen(m));
    (void)w;
    _exit(code);
  }
  close(fds[1]);
  ssize_t n = read(fds[0], msg, msg_len - 1);
  msg[n > 0 ? n : 0] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : PROBE_ERROR;
}

/* Under `bazel test`, a line in the test summary as well as in the log. */
static void test_warning(const char *line) {
  const char *path = getenv("TEST_WARNINGS_OUTPUT_FILE");
  if (path == NULL) return;
  FILE *f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%s\n", line);
  fclose(f);
}

int main(int argc, char **argv) {
  suite S;
  memset(&S, 0, sizeof(S));
  S.host = true;
  S.host_devices = 2;
  S.delay_us = 20;
  S.threads = 4;
  S.iters = SUITE_SANITIZED ? 60 : 300;
  const char *only = NULL, *skip = NULL;
  bool list = false, require_gpu = false;
  unsigned mode = 0; /* 0: the default run; else T_HOOKS, T_REENTRY, T_SWEEP */
  int fork_mode = -1; /* default: fork for libcuda, not for host */
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (opt(argv[i], "--driver", &v) && v != NULL) {
      if (strcmp(v, "host") == 0) {
        S.host = true;
      } else if (strcmp(v, "libcuda") == 0) {
        S.host = false;
      } else {
        fprintf(stderr, "unknown driver %s (host or libcuda)\n", v);
        return 2;
      }
    } else if (opt(argv[i], "--only", &v) && v != NULL) {
      only = v;
    } else if (opt(argv[i], "--skip", &v) && v != NULL) {
      skip = v;
    } else if (opt(argv[i], "--list", &v)) {
      list = true;
    } else if (opt(argv[i], "--fork", &v)) {
      fork_mode = 1;
    } else if (opt(argv[i], "--no-fork", &v)) {
      fork_mode = 0;
    } else if (opt(argv[i], "--hooks-only", &v)) {
      mode = T_HOOKS;
    } else if (opt(argv[i], "--keep-reentry", &v)) {
      mode = T_REENTRY;
    } else if (opt(argv[i], "--fault-sweep", &v)) {
      mode = T_SWEEP;
    } else if (opt(argv[i], "--require-gpu", &v)) {
      require_gpu = true;
    } else if (opt(argv[i], "--libcuda", &v) && v != NULL) {
      S.libcuda = v;
    } else if (opt(argv[i], "--devices", &v) && v != NULL) {
      S.host_devices = atoi(v);
    } else if (opt(argv[i], "--delay-us", &v) && v != NULL) {
      S.delay_us = (unsigned)atoi(v);
    } else if (opt(argv[i], "--threads", &v) && v != NULL) {
      S.threads = atoi(v) > 0 ? atoi(v) : 1;
    } else if (opt(argv[i], "--iters", &v) && v != NULL) {
      S.iters = atoi(v) > 0 ? atoi(v) : 1;
    } else if (opt(argv[i], "--timeout", &v) && v != NULL) {
      g_timeout_s = (unsigned)atoi(v);
    } else {
      fprintf(stderr,
              "usage: %s [--driver=host|libcuda] [--only=a,b] [--skip=a,b] "
              "[--list] "
              "[--fork|--no-fork] [--hooks-only|--keep-reentry|--fault-sweep] "
              "[--require-gpu] [--libcuda=PATH] "
              "[--devices=N] [--delay-us=N] [--threads=N] [--iters=N] "
              "[--timeout=S]\n",
              argv[0]);
      return 2;
    }
  }
  if (list) {
    for (size_t i = 0; i < N_TESTS; i++)
      printf("%-30s %s%s\n", tests[i].name, tests[i].what,
             tests[i].flags & T_REENTRY ? " [--keep-reentry]"
             : tests[i].flags & T_SWEEP ? " [--fault-sweep]"
             : tests[i].flags & T_HOOKS ? " [hooks build]"
                                        : "");
    return 0;
  }
  const bool use_fork = fork_mode < 0 ? !S.host : fork_mode == 1;
  S.hooks = slc__set_test_hook(NULL, NULL) && ldg__set_hook(NULL, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);

  char origin[600] = "host executor";
  if (!S.host) {
    int p = use_fork ? probe(&S, origin, sizeof(origin))
                     : probe_here(&S, origin, sizeof(origin));
    if (p == PROBE_NO_LIBRARY && !require_gpu) {
      printf("SKIPPED: no CUDA driver (libcuda.so.1 not found)\n  %s\n",
             origin);
      test_warning(
          "SKIPPED: no CUDA driver (libcuda.so.1 not found); "
          "the real-GPU tests did not run");
      return 0;
    }
    if (p == PROBE_NO_GPU && !require_gpu) {
      printf("SKIPPED: no usable CUDA device (%s)\n", origin);
      test_warning(
          "SKIPPED: no usable CUDA device; the real-GPU tests did "
          "not run");
      return 0;
    }
    if (p != PROBE_OK) {
      printf(
          "FAILED: %s: %s\n",
          p == PROBE_NO_LIBRARY ? "no CUDA driver" : "no usable CUDA context",
          origin);
      return 1;
    }
  }
  printf("cuda_suite: driver %s, %s\n", origin,
         use_fork ? "one process per test" : "in process");

  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < N_TESTS; i++) {
    const test *t = &tests[i];
    if (!selected(only, t->name)) continue;
    if (skip != NULL && selected(skip, t->name)) continue;
    if (only == NULL) {
      const unsigned modes = T_REENTRY | T_SWEEP;
      if (mode == 0 && (t->flags & modes) != 0) continue;
      if (mode != 0 && (t->flags & mode) == 0) continue;
    }
    printf("---- %s: %s\n", t->name, t->what);
    char why[96] = "";
    double t0 = now_s();
    int r;
    if (use_fork) {
      r = run_forked(&S, t, why, sizeof(why));
    } else {
      slc_clear_error();
      r = run_in_process(&S, t);
      if (r == SKIP && S.skip_reason != NULL)
        snprintf(why, sizeof(why), "%s", S.skip_reason);
    }
    double dt = now_s() - t0;
    const char *word = r == PASS ? "PASS" : r == SKIP ? "SKIP" : "FAIL";
    printf("%s %s (%.2f s)%s%s\n", word, t->name, dt, why[0] ? ": " : "", why);
    if (r == PASS)
      passed++;
    else if (r == SKIP)
      skipped++;
    else
      failed++;
  }
  printf("cuda_suite (%s): %d passed, %d failed, %d skipped\n",
         S.host ? "host executor" : "libcuda", passed, failed, skipped);
  if (!S.host) slc_driver_unload(&S.drv);
  return failed == 0 ? 0 : 1;
}
