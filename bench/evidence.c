/*
 * Tail evidence for ledger_bench (issue 11). See evidence.h for what is
 * counted and how each enqueue in the tail is attributed.
 */
#include "bench/evidence.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <urcu/urcu-memb.h>
#include <x86intrin.h>

#include "ledger/ledger_testing.h"

#if !defined(__x86_64__)
#error "the evidence binary stamps events with rdtsc and makes raw x86-64 syscalls"
#endif

/* ---- Per-sample flags ------------------------------------------------------ */

enum {
  EV_EXT_FRESH = 1u << 0,  /* extended the ring with a freshly allocated segment */
  EV_EXT_POOL = 1u << 1,   /* extended the ring with a pooled segment */
  EV_HEAD_ADV = 1u << 2,   /* advanced head: retired a segment (call_rcu) */
  EV_FUTEX = 1u << 3,      /* made a futex syscall (waking the call_rcu thread) */
  EV_MEMBAR_OWN = 1u << 4, /* made a membarrier syscall */
  EV_RELEASE = 1u << 5,    /* ran the release engine (an abandoned slot) */
  EV_FAULT = 1u << 6,      /* this thread page-faulted (RUSAGE_THREAD) */
  EV_CSW = 1u << 7,        /* this thread was switched out (RUSAGE_THREAD) */
  EV_MEMBAR_ANY = 1u << 8, /* some thread's membarrier overlapped it */
  EV_EXT_SPARE = 1u << 9,  /* extended the ring with the prepared spare */
  EV_RETRY = 1u << 10,     /* its reserving CAS on tail failed, retried */
  EV_N_FLAGS = 11,
};

static const char *const ev_flag_names[EV_N_FLAGS] = {
    "extended: fresh segment (alloc)",
    "extended: pooled segment",
    "advanced head (call_rcu)",
    "futex syscall by this thread",
    "membarrier by this thread",
    "release engine inside (abandon)",
    "page fault (this thread)",
    "switched out (ctx switch)",
    "a membarrier overlapped it",
    "extended: the prepared spare",
    "reserving CAS on tail retried",
};

typedef struct ev_sample {
  uint64_t t0;
  uint32_t ticks;
  uint32_t reserve_ticks; /* t0 to ENQUEUE_RESERVED; 0 if not seen */
  uint16_t flags;
  uint16_t minflt;
} ev_sample;

/* One per thread that ever sampled; never freed (threads come and go). */
typedef struct ev_buf {
  struct ev_buf *next;
  ev_sample *s;
  size_t n, cap;
} ev_buf;

static pthread_mutex_t ev_bufs_lock = PTHREAD_MUTEX_INITIALIZER;
static ev_buf *ev_bufs;

static _Thread_local ev_buf *tl_buf;
static _Thread_local bool tl_worker;
static _Thread_local bool tl_in_sample;
static _Thread_local unsigned tl_flags;
static _Thread_local uint64_t tl_t_reserved;
static _Thread_local bool tl_alloc_seen;
static _Thread_local bool tl_pool_seen;
static _Thread_local struct rusage tl_ru;

static double ev_ns_per_tick = 1.0;

/* ---- Global counters (relaxed: read only between phases) ------------------- */

enum {
  C_EXT,
  C_EXT_FRESH,
  C_EXT_POOL,
  C_ALLOC_WORKER, /* every segment allocation on a worker (spares too) */
  C_HEAD_ADV,
  C_MEMBAR_WORKER,
  C_MEMBAR_OTHER,
  C_FUTEX_WORKER,
  C_FUTEX_OTHER,
  C_FUTEX_WAKE_WORKER,
  C_RESERVE_RETRY, /* failed reserving CASes on tail (LDG__HOOK_RESERVE_RETRY) */
  C_RESERVE_FAST,  /* reservations by fetch_add (LDG__HOOK_RESERVE_CHECKED) */
  C_EXT_LINKED,    /* segments linked (LDG__HOOK_EXTEND_LINKED) */
  C_GROW_CLAIMED,  /* early growths claimed (LDG__HOOK_GROW_CLAIMED) */
  C_HOT_REUSED,    /* segments kept by their owner (LDG__HOOK_HOT_REUSED) */
  C_N
};
static _Atomic uint64_t ev_count[C_N];
static uint64_t ev_count_at_begin[C_N];

static void count(int c) { atomic_fetch_add_explicit(&ev_count[c], 1, memory_order_relaxed); }

/* ---- syscall(2), as liburcu calls it ------------------------------------------
 * Defined here, so liburcu's calls (membarrier for grace periods, futex to
 * wake and park its call_rcu thread) come through this one: counted, and the
 * membarriers stamped for the overlap test. x86-64 raw syscall. */
typedef struct ev_call {
  uint64_t t0, t1;
} ev_call;
enum { EV_CALLS = 1 << 20 }; /* of one timed phase; later ones are dropped */
static ev_call ev_membar[EV_CALLS]; /* static: used before main (liburcu init) */
static _Atomic size_t ev_n_membar;

static long raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5,
                         long a6) {
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

long syscall(long nr, ...);
long syscall(long nr, ...) {
  va_list ap;
  va_start(ap, nr);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  uint64_t t0 = __rdtsc();
  long ret = raw_syscall6(nr, a1, a2, a3, a4, a5, a6);
  uint64_t t1 = __rdtsc();
  if (nr == SYS_membarrier) {
    count(tl_worker ? C_MEMBAR_WORKER : C_MEMBAR_OTHER);
    if (tl_in_sample) tl_flags |= EV_MEMBAR_OWN;
    size_t i = atomic_fetch_add_explicit(&ev_n_membar, 1, memory_order_relaxed);
    if (i < EV_CALLS) ev_membar[i] = (ev_call){t0, t1};
  } else if (nr == SYS_futex) {
    count(tl_worker ? C_FUTEX_WORKER : C_FUTEX_OTHER);
    if (tl_worker && (a2 & 0x7f) == 1 /* FUTEX_WAKE */) count(C_FUTEX_WAKE_WORKER);
    if (tl_in_sample) tl_flags |= EV_FUTEX;
  }
  if (ret < 0 && ret > -4096) {
    errno = (int)-ret;
    return -1;
  }
  return ret;
}

/* ---- aligned_alloc, wrapped at link time (-Wl,--wrap=aligned_alloc) ----------
 * The ledger allocates segments, and only segments, with aligned_alloc. */
void *__real_aligned_alloc(size_t align, size_t bytes);
void *__wrap_aligned_alloc(size_t align, size_t bytes);
void *__wrap_aligned_alloc(size_t align, size_t bytes) {
  tl_alloc_seen = true;
  if (tl_worker) count(C_ALLOC_WORKER);
  return __real_aligned_alloc(align, bytes);
}

/* ---- The ledger's hook -------------------------------------------------------- */

static void ev_hook(enum ldg__hook_point point, struct ldg_stream *s, void *arg) {
  (void)s;
  (void)arg;
  switch (point) {
    case LDG__HOOK_ENQUEUE_RESERVED:
      if (tl_in_sample) tl_t_reserved = __rdtsc();
      return;
    case LDG__HOOK_POOL_POP:
      tl_pool_seen = true;
      return;
    case LDG__HOOK_SEGMENT_ALLOCATED: {
      /* Since this enqueue began (ev_op_begin): allocated, popped, or
       * neither (the spare a release prepared). */
      unsigned kind = tl_alloc_seen  ? EV_EXT_FRESH
                      : tl_pool_seen ? EV_EXT_POOL
                                     : EV_EXT_SPARE;
      tl_alloc_seen = tl_pool_seen = false;
      count(C_EXT);
      if (kind == EV_EXT_FRESH) count(C_EXT_FRESH);
      if (kind == EV_EXT_POOL) count(C_EXT_POOL);
      if (tl_in_sample) tl_flags |= kind;
      return;
    }
    case LDG__HOOK_HEAD_ADVANCE:
      count(C_HEAD_ADV);
      if (tl_in_sample) tl_flags |= EV_HEAD_ADV;
      return;
    case LDG__HOOK_RELEASE_CLAIMED:
      if (tl_in_sample) tl_flags |= EV_RELEASE;
      return;
    case LDG__HOOK_RESERVE_RETRY:
      count(C_RESERVE_RETRY);
      if (tl_in_sample) tl_flags |= EV_RETRY;
      return;
    case LDG__HOOK_RESERVE_CHECKED:
      count(C_RESERVE_FAST);
      return;
    case LDG__HOOK_EXTEND_LINKED:
      count(C_EXT_LINKED);
      return;
    case LDG__HOOK_GROW_CLAIMED:
      count(C_GROW_CLAIMED);
      return;
    case LDG__HOOK_HOT_REUSED:
      count(C_HOT_REUSED);
      return;
    default:
      return;
  }
}

/* ---- Samples ------------------------------------------------------------------- */

/* The workers' thread ids of the row now running (reset by ev_row_report,
 * which runs after every worker of the row was joined). */
enum { EV_MAX_TASKS = 512 };
static _Atomic int ev_worker_tid[EV_MAX_TASKS];
static _Atomic int ev_n_worker_tid;
static _Thread_local int tl_worker_index = -1;

void ev_worker_start(void) {
  tl_worker = true;
  int i = atomic_fetch_add_explicit(&ev_n_worker_tid, 1, memory_order_relaxed);
  tl_worker_index = i < EV_MAX_TASKS ? i : -1;
  if (i < EV_MAX_TASKS)
    atomic_store_explicit(&ev_worker_tid[i], (int)syscall(SYS_gettid),
                          memory_order_relaxed);
}

void ev_op_begin(void) { tl_alloc_seen = tl_pool_seen = false; }

void ev_sample_begin(void) {
  tl_worker = true;
  getrusage(RUSAGE_THREAD, &tl_ru);
  tl_flags = 0;
  tl_t_reserved = 0;
  tl_in_sample = true;
}

void ev_sample_end(bool timed, uint64_t t0, uint64_t t1) {
  tl_in_sample = false;
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  if (!timed) return;
  unsigned flags = tl_flags;
  long flt = ru.ru_minflt - tl_ru.ru_minflt + ru.ru_majflt - tl_ru.ru_majflt;
  if (flt > 0) flags |= EV_FAULT;
  if (ru.ru_nvcsw != tl_ru.ru_nvcsw || ru.ru_nivcsw != tl_ru.ru_nivcsw) flags |= EV_CSW;
  ev_buf *b = tl_buf;
  if (b == NULL) {
    b = calloc(1, sizeof *b);
    if (b == NULL) abort();
    pthread_mutex_lock(&ev_bufs_lock);
    b->next = ev_bufs;
    ev_bufs = b;
    pthread_mutex_unlock(&ev_bufs_lock);
    tl_buf = b;
  }
  if (b->n == b->cap) {
    b->cap = b->cap ? b->cap * 2 : 65536;
    ev_sample *p = realloc(b->s, b->cap * sizeof *p);
    if (p == NULL) abort();
    b->s = p;
  }
  uint64_t ticks = t1 - t0;
  b->s[b->n++] = (ev_sample){
      .t0 = t0,
      .ticks = ticks > UINT32_MAX ? UINT32_MAX : (uint32_t)ticks,
      .reserve_ticks = tl_t_reserved > t0 ? (uint32_t)(tl_t_reserved - t0) : 0,
      .flags = (uint16_t)flags,
      .minflt = flt > 65535 ? 65535 : (uint16_t)flt,
  };
}

/* ---- /proc/interrupts --------------------------------------------------------- */

enum { IRQ_LOC, IRQ_RES, IRQ_CAL, IRQ_TLB, IRQ_IWI, IRQ_N, IRQ_MAX_CPUS = 1024 };
static const char *const irq_names[IRQ_N] = {"LOC", "RES", "CAL", "TLB", "IWI"};
static const char *const irq_what[IRQ_N] = {
    "local timer", "rescheduling IPI", "function-call IPI (membarrier)",
    "TLB shootdown IPI", "irq-work IPI"};
static uint64_t irq_begin[IRQ_N][IRQ_MAX_CPUS], irq_end[IRQ_N][IRQ_MAX_CPUS];

static void read_interrupts(uint64_t out[IRQ_N][IRQ_MAX_CPUS]) {
  memset(out, 0, sizeof(uint64_t) * IRQ_N * IRQ_MAX_CPUS);
  FILE *f = fopen("/proc/interrupts", "r");
  if (f == NULL) return;
  static char line[1 << 16];
  int col_cpu[IRQ_MAX_CPUS], ncols = 0;
  if (fgets(line, sizeof line, f) != NULL) {
    for (char *save, *t = strtok_r(line, " \t\n", &save); t && ncols < IRQ_MAX_CPUS;
         t = strtok_r(NULL, " \t\n", &save))
      if (strncmp(t, "CPU", 3) == 0) col_cpu[ncols++] = atoi(t + 3);
  }
  while (fgets(line, sizeof line, f) != NULL) {
    char *p = line;
    while (*p == ' ') p++;
    int k = -1;
    for (int i = 0; i < IRQ_N; i++)
      if (strncmp(p, irq_names[i], 3) == 0 && p[3] == ':') k = i;
    if (k < 0) continue;
    p += 4;
    for (int c = 0; c < ncols; c++) {
      char *end;
      unsigned long long v = strtoull(p, &end, 10);
      if (end == p) break;
      if (col_cpu[c] >= 0 && col_cpu[c] < IRQ_MAX_CPUS) out[k][col_cpu[c]] = v;
      p = end;
    }
  }
  fclose(f);
}

/* ---- Threads and CPUs: /proc/self/task/<tid>/{schedstat,status,stat}, /proc/stat
 * Read by the main thread before and after the timed phase (workers parked
 * in a barrier at both points), so a row can tell where its CPUs' time
 * went: the workers' own time on a CPU and their time runnable but waiting
 * (another thread had their CPU), their involuntary switches, and the time
 * every other thread of the process (liburcu's call_rcu thread, which runs
 * the grace periods and the segment callbacks) took, and on which CPU it
 * last ran. /proc/stat adds, per worker CPU, the hypervisor's steal time
 * and the kernel's interrupt time. */

typedef struct ev_task {
  int tid;
  char comm[24];
  uint64_t run_ns, wait_ns, slices; /* schedstat: on CPU, runnable waiting, timeslices */
  uint64_t vcsw, ivcsw;             /* status: voluntary / nonvoluntary switches */
  int cpu;                          /* stat field 39: the CPU it last ran on */
} ev_task;

static ev_task task_begin[EV_MAX_TASKS], task_end[EV_MAX_TASKS];
static int n_task_begin, n_task_end;

static bool read_small(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return false;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = '\0';
  return true;
}

static uint64_t status_field(const char *buf, const char *key) {
  const char *p = strstr(buf, key);
  return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static ev_task read_task(int tid) {
  ev_task t = {.tid = tid, .cpu = -1};
  char path[96], buf[4096];
  snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  if (read_small(path, buf, sizeof buf)) {
    unsigned long long a = 0, b = 0, c = 0;
    if (sscanf(buf, "%llu %llu %llu", &a, &b, &c) == 3) {
      t.run_ns = a;
      t.wait_ns = b;
      t.slices = c;
    }
  }
  snprintf(path, sizeof path, "/proc/self/task/%d/status", tid);
  if (read_small(path, buf, sizeof buf)) {
    t.vcsw = status_field(buf, "\nvoluntary_ctxt_switches:");
    t.ivcsw = status_field(buf, "\nnonvoluntary_ctxt_switches:");
  }
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  if (read_small(path, buf, sizeof buf)) {
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (l != NULL && r != NULL && r > l) {
      size_t len = (size_t)(r - l - 1);
      if (len >= sizeof t.comm) len = sizeof t.comm - 1;
      memcpy(t.comm, l + 1, len);
      /* Fields after ')' start at 3 (state); the CPU is field 39. */
      char *save, *tok = strtok_r(r + 1, " ", &save);
      for (int f = 3; tok != NULL && f < 39; f++) tok = strtok_r(NULL, " ", &save);
      if (tok != NULL) t.cpu = atoi(tok);
    }
  }
  return t;
}

static int read_tasks(ev_task *out) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL && n < EV_MAX_TASKS;)
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out[n++] = read_task(atoi(e->d_name));
  closedir(d);
  return n;
}

/* Each worker's own numbers at the end of its timed phase, read by the
 * worker itself before the closing barrier (after it, it may be gone). The
 * barrier orders these writes before the main thread's report. */
static ev_task worker_end[EV_MAX_TASKS];

void ev_worker_phase_end(bool timed) {
  if (timed && tl_worker_index >= 0)
    worker_end[tl_worker_index] = read_task((int)syscall(SYS_gettid));
}

static const ev_task *find_task(const ev_task *v, int n, int tid) {
  for (int i = 0; i < n; i++)
    if (v[i].tid == tid) return &v[i];
  return NULL;
}

static bool is_worker_tid(int tid) {
  int n = atomic_load_explicit(&ev_n_worker_tid, memory_order_relaxed);
  for (int i = 0; i < n && i < EV_MAX_TASKS; i++)
    if (atomic_load_explicit(&ev_worker_tid[i], memory_order_relaxed) == tid) return true;
  return false;
}

/* /proc/stat, per CPU: user nice system idle iowait irq softirq steal
 * (USER_HZ ticks). */
enum { ST_USER, ST_NICE, ST_SYSTEM, ST_IDLE, ST_IOWAIT, ST_IRQ, ST_SOFTIRQ, ST_STEAL, ST_N };
static uint64_t cpu_begin[IRQ_MAX_CPUS][ST_N], cpu_end[IRQ_MAX_CPUS][ST_N];

static void read_cpu_stat(uint64_t out[IRQ_MAX_CPUS][ST_N]) {
  memset(out, 0, sizeof(uint64_t) * IRQ_MAX_CPUS * ST_N);
  FILE *f = fopen("/proc/stat", "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "cpu", 3) != 0 || line[3] < '0' || line[3] > '9') continue;
    char *p;
    long c = strtol(line + 3, &p, 10);
    if (c < 0 || c >= IRQ_MAX_CPUS) continue;
    for (int k = 0; k < ST_N; k++) out[c][k] = strtoull(p, &p, 10);
  }
  fclose(f);
}

/* ---- Phases and the report ------------------------------------------------------ */

static struct rusage ru_begin, ru_end;
static double membar_per_gp;

void ev_init(double ns_per_tick) {
  ev_ns_per_tick = ns_per_tick;
  if (!ldg__set_hook(ev_hook, NULL)) {
    fprintf(stderr, "ledger_evidence_bench: the ledger has no hooks\n");
    abort();
  }
  /* Membarrier calls per grace period, measured: synchronize_rcu alone. */
  enum { N = 20 };
  uint64_t before = atomic_load(&ev_count[C_MEMBAR_WORKER]) +
                    atomic_load(&ev_count[C_MEMBAR_OTHER]);
  /* A grace period with no registered reader may skip the barriers: be one
   * (outside any read-side section), as the enqueuers are. */
  urcu_memb_register_thread();
  for (int i = 0; i < N; i++) urcu_memb_synchronize_rcu();
  urcu_memb_unregister_thread();
  uint64_t after = atomic_load(&ev_count[C_MEMBAR_WORKER]) +
                   atomic_load(&ev_count[C_MEMBAR_OTHER]);
  membar_per_gp = (double)(after - before) / N;
  printf("evidence: hooks installed; one synchronize_rcu makes %.2f membarrier "
         "call(s) (%" PRIu64 " in %d)\n",
         membar_per_gp, after - before, N);
}

/* The segment reclaimer (ledger/reclaim.c) and the row's ledger's pool
 * pops by age, at the phase's begin and end. */
static ldg__reclaim_stats rc_begin, rc_end;
static struct ldg_ledger *ev_ledger;
static unsigned long age_begin[8], age_end[8];

void ev_set_ledger(struct ldg_ledger *l) { ev_ledger = l; }

void ev_phase_begin(void) {
  for (int c = 0; c < C_N; c++) ev_count_at_begin[c] = atomic_load(&ev_count[c]);
  rc_begin = ldg__reclaim_inspect();
  for (unsigned b = 0; b < 8; b++) age_begin[b] = ldg__pool_reuse_age(ev_ledger, b);
  /* Only the timed phase's membarriers are kept for the overlap test. */
  atomic_store(&ev_n_membar, 0);
  getrusage(RUSAGE_SELF, &ru_begin);
  read_interrupts(irq_begin);
  read_cpu_stat(cpu_begin);
  n_task_begin = read_tasks(task_begin);
}

void ev_phase_end(void) {
  rc_end = ldg__reclaim_inspect();
  for (unsigned b = 0; b < 8; b++) age_end[b] = ldg__pool_reuse_age(ev_ledger, b);
  n_task_end = read_tasks(task_end);
  read_cpu_stat(cpu_end);
  read_interrupts(irq_end);
  getrusage(RUSAGE_SELF, &ru_end);
}

static int cmp_ticks(const void *a, const void *b) {
  uint32_t x = ((const ev_sample *)a)->ticks, y = ((const ev_sample *)b)->ticks;
  return x < y ? -1 : x > y;
}

static int cmp_call(const void *a, const void *b) {
  uint64_t x = ((const ev_call *)a)->t0, y = ((const ev_call *)b)->t0;
  return x < y ? -1 : x > y;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Median, in ns, of the ticks of the samples in s[lo..n) with flag f (or
 * with no flag when f == 0). Returns the count through *cnt. */
static double median_with(const ev_sample *s, size_t lo, size_t n, unsigned f,
                          size_t *cnt, uint32_t *scratch) {
  size_t k = 0;
  for (size_t i = lo; i < n; i++)
    if (f == 0 ? s[i].flags == 0 : (s[i].flags & f) != 0) scratch[k++] = s[i].ticks;
  *cnt = k;
  if (k == 0) return 0;
  qsort(scratch, k, sizeof *scratch, cmp_u32);
  return scratch[k / 2] * ev_ns_per_tick;
}

static uint64_t delta(int c) { return atomic_load(&ev_count[c]) - ev_count_at_begin[c]; }

/* The threads block of a row (see read_tasks). */
static void report_threads(double e, double seconds, const int *cpus, int n_cpus,
                           uint64_t retired, double grace_periods) {
  uint64_t w_run = 0, w_wait = 0, w_slices = 0, w_vcsw = 0, w_ivcsw = 0, w_wait_max = 0;
  uint64_t o_run = 0;
  int n_w = 0, n_o = 0, self = (int)getpid();
  int n_reg = atomic_load_explicit(&ev_n_worker_tid, memory_order_relaxed);
  for (int i = 0; i < n_reg && i < EV_MAX_TASKS; i++) {
    const ev_task *z = &worker_end[i], *a = find_task(task_begin, n_task_begin, z->tid);
    if (a == NULL || z->tid == 0 || z->run_ns < a->run_ns) continue; /* not read */
    n_w++;
    w_run += z->run_ns - a->run_ns;
    w_wait += z->wait_ns - a->wait_ns;
    if (z->wait_ns - a->wait_ns > w_wait_max) w_wait_max = z->wait_ns - a->wait_ns;
    w_slices += z->slices - a->slices;
    w_vcsw += z->vcsw - a->vcsw;
    w_ivcsw += z->ivcsw - a->ivcsw;
  }
  for (int i = 0; i < n_task_end; i++) {
    const ev_task *z = &task_end[i], *a = find_task(task_begin, n_task_begin, z->tid);
    ev_task zero = {0};
    if (a == NULL) a = &zero; /* born during the phase */
    if (is_worker_tid(z->tid)) {
      continue; /* counted above, from its own end */
    } else if (z->tid != self && z->run_ns > a->run_ns) { /* ran in the phase */
      n_o++;
      o_run += z->run_ns - a->run_ns;
    }
  }
  double wall_ns = seconds * 1e9;
  printf("    threads (schedstat over the timed phase): %d workers on CPU %.1f ms "
         "(%.1f %% of workers x wall), runnable but waiting %.2f ms (max one "
         "worker %.2f ms), %" PRIu64 " timeslices, switches voluntary %" PRIu64
         " involuntary %" PRIu64 "\n",
         n_w, (double)w_run / 1e6, n_w ? 100.0 * (double)w_run / (n_w * wall_ns) : 0.0,
         (double)w_wait / 1e6, (double)w_wait_max / 1e6, w_slices, w_vcsw, w_ivcsw);
  printf("    workers' ns per op: on CPU %.2f, wall x workers %.2f (the difference: "
         "time off their CPU)\n",
         (double)w_run / e, n_w * wall_ns / e);
  printf("    other threads (liburcu's call_rcu: grace periods, segment callbacks): "
         "%d, on CPU %.1f ms (%.1f %% of one CPU; %.0f ns per retired segment, "
         "%.2f ns per op)\n",
         n_o, (double)o_run / 1e6, 100.0 * (double)o_run / wall_ns,
         retired ? (double)o_run / (double)retired : 0.0, (double)o_run / e);
  for (int i = 0; i < n_task_end; i++) {
    const ev_task *z = &task_end[i], *a = find_task(task_begin, n_task_begin, z->tid);
    ev_task zero = {0};
    if (a == NULL) a = &zero;
    if (is_worker_tid(z->tid) || z->run_ns <= a->run_ns) continue;
    bool on_worker_cpu = false;
    for (int c = 0; c < n_cpus; c++) on_worker_cpu |= cpus[c] == z->cpu;
    printf("      tid %d %-16s %s: on CPU %.2f ms, waiting %.2f ms, %" PRIu64
           " timeslices, switches %" PRIu64 " / %" PRIu64 " involuntary; last on CPU %d%s\n",
           z->tid, z->comm, z->tid == self ? "(main)" : "(other)",
           (double)(z->run_ns - a->run_ns) / 1e6, (double)(z->wait_ns - a->wait_ns) / 1e6,
           z->slices - a->slices, z->vcsw - a->vcsw, z->ivcsw - a->ivcsw, z->cpu,
           on_worker_cpu ? " (a worker's CPU)" : "");
  }
  printf("    RCU: %" PRIu64 " call_rcu (retired segments; %.5f per op), ~%.0f grace "
         "periods (%.6f per op); %.1f callbacks per grace period\n",
         retired, (double)retired / e, grace_periods, grace_periods / e,
         grace_periods > 0 ? (double)retired / grace_periods : 0.0);
  long hz = sysconf(_SC_CLK_TCK);
  double ms = hz > 0 ? 1000.0 / (double)hz : 10.0;
  uint64_t st[ST_N] = {0};
  for (int i = 0; i < n_cpus; i++)
    if (cpus[i] >= 0 && cpus[i] < IRQ_MAX_CPUS)
      for (int k = 0; k < ST_N; k++) st[k] += cpu_end[cpus[i]][k] - cpu_begin[cpus[i]][k];
  printf("    worker CPUs (/proc/stat, ms summed over them): user %.0f system %.0f "
         "irq %.0f softirq %.0f steal %.0f idle %.0f\n",
         (double)st[ST_USER] * ms, (double)st[ST_SYSTEM] * ms, (double)st[ST_IRQ] * ms,
         (double)st[ST_SOFTIRQ] * ms, (double)st[ST_STEAL] * ms,
         (double)(st[ST_IDLE] + st[ST_IOWAIT]) * ms);
  memset(worker_end, 0, sizeof worker_end);
  atomic_store_explicit(&ev_n_worker_tid, 0, memory_order_relaxed); /* next row */
}

void ev_row_report(const char *label, uint64_t enqueues, double seconds,
                   const int *cpus, int n_cpus) {
  /* Gather the samples of every thread, and the membarriers of the phase. */
  size_t n = 0;
  for (ev_buf *b = ev_bufs; b != NULL; b = b->next) n += b->n;
  ev_sample *s = malloc((n ? n : 1) * sizeof *s);
  uint32_t *scratch = malloc((n ? n : 1) * sizeof *scratch);
  if (s == NULL || scratch == NULL) abort();
  size_t k = 0;
  for (ev_buf *b = ev_bufs; b != NULL; b = b->next) {
    memcpy(s + k, b->s, b->n * sizeof *s);
    k += b->n;
    b->n = 0;
  }
  size_t m_end = atomic_load(&ev_n_membar);
  if (m_end > EV_CALLS) m_end = EV_CALLS;
  ev_call *mb = ev_membar;
  size_t n_mb = m_end;
  qsort(mb, n_mb, sizeof *mb, cmp_call);
  /* Overlap with any membarrier: binary search for the last call starting
   * before the sample ends; calls are short, so look back a few. */
  for (size_t i = 0; i < n; i++) {
    uint64_t a = s[i].t0, z = s[i].t0 + s[i].ticks;
    size_t lo = 0, hi = n_mb;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (mb[mid].t0 <= z) lo = mid + 1; else hi = mid;
    }
    for (size_t j = lo; j-- > 0 && lo - j <= 64;)
      if (mb[j].t1 >= a) {
        s[i].flags |= EV_MEMBAR_ANY;
        break;
      }
  }
  qsort(s, n, sizeof *s, cmp_ticks);

  double e = enqueues ? (double)enqueues : 1;
  uint64_t ext = delta(C_EXT), fresh = delta(C_EXT_FRESH), pooled = delta(C_EXT_POOL);
  long minflt = ru_end.ru_minflt - ru_begin.ru_minflt;
  long majflt = ru_end.ru_majflt - ru_begin.ru_majflt;
  printf("  evidence %s: %" PRIu64 " ops in %.3f s\n", label, enqueues, seconds);
  printf("    segments: %" PRIu64 " extensions (1 per %.0f ops): %" PRIu64
         " fresh (aligned_alloc), %" PRIu64 " from the pool, %" PRIu64
         " spares (prepared, or kept hot); %" PRIu64 " allocated by workers outside extensions"
         " (spares); %" PRIu64 " head advances (retirements, each a call_rcu)\n",
         ext, ext ? e / (double)ext : 0.0, fresh, pooled, ext - fresh - pooled,
         delta(C_ALLOC_WORKER) - fresh, delta(C_HEAD_ADV));
  {
    uint64_t nb = rc_end.batches - rc_begin.batches;
    uint64_t ns = rc_end.batched - rc_begin.batched;
    printf("    reclaimer (ledger/reclaim.c): %" PRIu64 " batches, each one grace period "
           "(%.6f per op), %" PRIu64 " segments through them (%.1f per batch), %" PRIu64
           " retired through call_rcu\n",
           nb, (double)nb / e, ns, nb ? (double)ns / (double)nb : 0.0,
           rc_end.via_call_rcu - rc_begin.via_call_rcu);
    printf("    pooled segments reused, by age since retirement (ms):");
    static const char *const age_name[8] = {"<0.25", "<0.5", "<1", "<2",
                                            "<4",    "<8",   "<16", ">=16"};
    for (unsigned b = 0; b < 8; b++)
      printf(" %s %lu", age_name[b], age_end[b] - age_begin[b]);
    printf("\n");
  }
  /* Extensions that built a segment and linked it, and the ones whose
   * segment lost the link to another extender's (the herd at a segment's
   * end, issue 11's ext7); early growths claimed (GROWING AHEAD). */
  printf("    links: %" PRIu64 " segments linked, %" PRIu64
         " built and not linked (lost the link); %" PRIu64
         " early growths claimed; %.2f extensions per retirement\n",
         delta(C_EXT_LINKED), ext - delta(C_EXT_LINKED), delta(C_GROW_CLAIMED),
         delta(C_HEAD_ADV) ? (double)ext / (double)delta(C_HEAD_ADV) : 0.0);
  /* Segments their owner unlinked and kept as the spare at once, without
   * the reclaimer (ledger/segment.c, HOT REUSE ON OWNED STREAMS). */
  printf("    hot reuse: %" PRIu64 " segments kept by their owner at once "
         "(%.1f %% of head advances; the rest went to the reclaimer)\n",
         delta(C_HOT_REUSED),
         delta(C_HEAD_ADV) ? 100.0 * (double)delta(C_HOT_REUSED) /
                                 (double)delta(C_HEAD_ADV)
                           : 0.0);
  printf("    page faults (process): minor %ld (%.3f per 1000 ops, %.1f per fresh "
         "segment), major %ld; context switches: voluntary %ld, involuntary %ld\n",
         minflt, 1000.0 * (double)minflt / e,
         fresh ? (double)minflt / (double)fresh : 0.0, majflt,
         ru_end.ru_nvcsw - ru_begin.ru_nvcsw, ru_end.ru_nivcsw - ru_begin.ru_nivcsw);
  printf("    reserving CAS on tail: %" PRIu64 " failures (%.3f per op; each "
         "failure is one more locked RMW and one more transfer of tail's line)\n",
         delta(C_RESERVE_RETRY), (double)delta(C_RESERVE_RETRY) / e);
  printf("    reserved by fetch_add (reserve.c, RESERVING ON A SHARED STREAM): %" PRIu64
         " (%.3f per op; the rest by the CAS)\n",
         delta(C_RESERVE_FAST), (double)delta(C_RESERVE_FAST) / e);
  uint64_t mbo = delta(C_MEMBAR_OTHER), mbw = delta(C_MEMBAR_WORKER);
  printf("    syscalls by liburcu (workers | other threads): membarrier %" PRIu64
         " | %" PRIu64 " (%.0f/s; ~%.0f grace periods at %.2f per GP), futex %" PRIu64
         " (wakes %" PRIu64 ") | %" PRIu64 "\n",
         mbw, mbo, (double)(mbw + mbo) / seconds,
         membar_per_gp > 0 ? (double)(mbw + mbo) / membar_per_gp : 0.0, membar_per_gp,
         delta(C_FUTEX_WORKER), delta(C_FUTEX_WAKE_WORKER), delta(C_FUTEX_OTHER));
  printf("    interrupts, per worker CPU per second (all CPUs total):");
  for (int q = 0; q < IRQ_N; q++) {
    uint64_t w = 0, all = 0;
    for (int c = 0; c < IRQ_MAX_CPUS; c++) all += irq_end[q][c] - irq_begin[q][c];
    for (int i = 0; i < n_cpus; i++)
      if (cpus[i] >= 0 && cpus[i] < IRQ_MAX_CPUS) w += irq_end[q][cpus[i]] - irq_begin[q][cpus[i]];
    printf(" %s %.0f (%" PRIu64 ")", irq_names[q],
           n_cpus ? (double)w / n_cpus / seconds : 0.0, all);
  }
  printf("\n      (");
  for (int q = 0; q < IRQ_N; q++) printf("%s%s %s", q ? ", " : "", irq_names[q], irq_what[q]);
  printf(")\n");
  report_threads(e, seconds, cpus, n_cpus, delta(C_HEAD_ADV),
                 membar_per_gp > 0 ? (double)(mbw + mbo) / membar_per_gp : 0.0);
  if (n == 0) {
    printf("    no samples\n");
    free(s);
    free(scratch);
    return;
  }
  size_t i99 = (size_t)(0.99 * (double)(n - 1) + 0.5);
  size_t i999 = (size_t)(0.999 * (double)(n - 1) + 0.5);
  printf("    %zu sampled ops: p50 %.0f ns, p99 %.0f, p99.9 %.0f, max %.0f\n", n,
         s[n / 2].ticks * ev_ns_per_tick, s[i99].ticks * ev_ns_per_tick,
         s[i999].ticks * ev_ns_per_tick, s[n - 1].ticks * ev_ns_per_tick);
  printf("    what the sampled ops were doing (a sample may have several causes):\n");
  printf("      %-34s %9s %9s | %9s %9s | %9s %9s\n", "cause", ">=p99.9 n", "med ns",
         ">=p99 n", "med ns", "all n", "med ns");
  for (int f = 0; f <= EV_N_FLAGS; f++) {
    unsigned bit = f < EV_N_FLAGS ? 1u << f : 0;
    size_t c0, c1, c2;
    double m0 = median_with(s, i999, n, bit, &c0, scratch);
    double m1 = median_with(s, i99, n, bit, &c1, scratch);
    double m2 = median_with(s, 0, n, bit, &c2, scratch);
    if (c2 == 0 && bit != 0) continue;
    printf("      %-34s %9zu %9.0f | %9zu %9.0f | %9zu %9.0f\n",
           f < EV_N_FLAGS ? ev_flag_names[f] : "none of the above", c0, m0, c1, m1, c2, m2);
  }
  /* How much of a tail sample was the reservation (tail CAS / extension). */
  size_t kr = 0, kt = 0;
  for (size_t i = i999; i < n; i++)
    if (s[i].reserve_ticks != 0) scratch[kr++] = s[i].reserve_ticks;
  kt = n - i999;
  if (kr != 0) {
    qsort(scratch, kr, sizeof *scratch, cmp_u32);
    printf("    >=p99.9: median time until the seq was reserved %.0f ns (%zu of %zu "
           "samples saw the reservation)\n",
           scratch[kr / 2] * ev_ns_per_tick, kr, kt);
  }
  size_t flt_tail = 0;
  for (size_t i = i999; i < n; i++) flt_tail += s[i].minflt;
  printf("    >=p99.9: %zu page faults in %zu samples\n", flt_tail, kt);
  free(s);
  free(scratch);
  fflush(stdout);
}
