/* The benchmarks' exactly-once guard and report helpers (bench_keeps.h). */
#include "bench/bench_keeps.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local keep_sums keeps_ran; /* by the thread running the keep */
static keep_sums total_ran, total_enqueued, grand_ran;
static pthread_mutex_t totals_lock = PTHREAD_MUTEX_INITIALIZER;

void keep_fn(void *ctx) {
  uint64_t id = (uint64_t)(uintptr_t)ctx;
  keeps_ran.n++;
  keeps_ran.sum += id;
  keeps_ran.sq += id * id;
}

void sums_add(keep_sums *into, const keep_sums *s) {
  into->n += s->n;
  into->sum += s->sum;
  into->sq += s->sq;
}

void sums_add_range(keep_sums *enq, uint64_t first, uint64_t last) {
  for (uint64_t id = first; id < last; id++) {
    enq->n++;
    enq->sum += id;
    enq->sq += id * id;
  }
}

void flush_keeps(const keep_sums *enq) {
  pthread_mutex_lock(&totals_lock);
  sums_add(&total_ran, &keeps_ran);
  sums_add(&total_enqueued, enq);
  pthread_mutex_unlock(&totals_lock);
  memset(&keeps_ran, 0, sizeof keeps_ran);
}

void add_enqueued(const keep_sums *enq) {
  pthread_mutex_lock(&totals_lock);
  sums_add(&total_enqueued, enq);
  pthread_mutex_unlock(&totals_lock);
}

void verify_keeps(const char *prog, const char *row) {
  keep_sums none = {0, 0, 0};
  flush_keeps(&none); /* the calling thread's own */
  if (total_ran.n != total_enqueued.n || total_ran.sum != total_enqueued.sum ||
      total_ran.sq != total_enqueued.sq) {
    fprintf(stderr,
            "%s: %s: keeps did not run exactly once: enqueued %" PRIu64
            ", ran %" PRIu64 " (sums %s)\n",
            prog, row, total_enqueued.n, total_ran.n,
            total_ran.sum == total_enqueued.sum ? "equal" : "differ");
    abort();
  }
  sums_add(&grand_ran, &total_ran);
  memset(&total_ran, 0, sizeof total_ran);
  memset(&total_enqueued, 0, sizeof total_enqueued);
}

uint64_t keeps_verified(void) { return grand_ran.n; }

void cpu_model(char *buf, size_t n) {
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *p = strchr(line, ':');
      if (p != NULL) {
        p++;
        while (*p == ' ') p++;
        p[strcspn(p, "\n")] = 0;
        snprintf(buf, n, "%s", p);
      }
      break;
    }
  }
  fclose(f);
}
