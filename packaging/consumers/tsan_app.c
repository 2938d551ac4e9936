/*
 * Correct use of the ledger by a program built with ThreadSanitizer (the
 * library compiled in, instrumented, as an embedder's TSan build does): four
 * threads each enqueue on their own stream and release to marks they read
 * first; a fifth waits on the others' streams and trims and quiesces while
 * they run, so segments are retired through call_rcu and rcu_barrier runs
 * beside them. Every keep writes the operand it holds and checks it was not
 * released before (no TSan report may name this file or liburcu).
 * Exits 0 and prints "tsan consumer: OK" when every keep ran exactly once.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "ledger/ledger.h"

enum { WORKERS = 4, OPS = 20000, BATCH = 300 };

static ldg_ledger *ledger;
static ldg_stream *streams[WORKERS];
static atomic_long released;
static atomic_int workers_done;

static void release_operand(void *p) {
  int *operand = p;
  if (*operand != 1) abort(); /* released twice, or before it was written */
  *operand = 2;
  free(operand);
  atomic_fetch_add(&released, 1);
}

static void *worker(void *arg) {
  ldg_stream *s = streams[(long)arg];
  for (int i = 1; i <= OPS; i++) {
    int *operand = malloc(sizeof *operand);
    if (operand == NULL) abort();
    *operand = 1; /* "issued" */
    if (ldg_enqueue(s, (ldg_keep){release_operand, operand}, NULL, 0, NULL, 0,
                    NULL) != LDG_OK)
      abort();
    if (i % BATCH == 0 && ldg_release(s, ldg_mark(s)) != LDG_OK) abort();
  }
  if (ldg_release(s, ldg_mark(s)) != LDG_OK) abort();
  atomic_fetch_add(&workers_done, 1);
  return NULL;
}

static void *trimmer(void *arg) {
  (void)arg;
  ldg_stream *b;
  if (ldg_stream_create(ledger, 0, 0, NULL, NULL, &b) != LDG_OK) abort();
  while (atomic_load(&workers_done) < WORKERS) {
    for (int w = 0; w < WORKERS; w++)
      if (ldg_add_wait(b, streams[w], ldg_mark(streams[w]), NULL) != LDG_OK)
        abort();
    if (ldg_release(b, ldg_mark(b)) != LDG_OK) abort();
    ldg_ledger_trim(ledger);
    ldg_quiesce();
  }
  if (ldg_stream_destroy(b) != LDG_OK) abort();
  ldg_stream_unref(b);
  return NULL;
}

int main(void) {
  if (ldg_ledger_create(&ledger) != LDG_OK) return 1;
  for (int w = 0; w < WORKERS; w++)
    if (ldg_stream_create(ledger, 0, 0, NULL, NULL, &streams[w]) != LDG_OK)
      return 1;
  pthread_t t[WORKERS + 1];
  for (long w = 0; w < WORKERS; w++)
    if (pthread_create(&t[w], NULL, worker, (void *)w) != 0) return 1;
  if (pthread_create(&t[WORKERS], NULL, trimmer, NULL) != 0) return 1;
  for (int w = 0; w <= WORKERS; w++) pthread_join(t[w], NULL);
  for (int w = 0; w < WORKERS; w++) {
    if (ldg_stream_destroy(streams[w]) != LDG_OK) return 1;
    ldg_stream_unref(streams[w]);
  }
  ldg_ledger_trim(ledger);
  ldg_ledger_destroy(ledger);
  long n = atomic_load(&released);
  if (n != (long)WORKERS * OPS) {
    fprintf(stderr, "tsan consumer: %ld keeps ran, want %d\n", n, WORKERS * OPS);
    return 1;
  }
  printf("tsan consumer: OK (%ld keeps, each once)\n", n);
  return 0;
}
