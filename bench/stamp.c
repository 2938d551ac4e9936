/* See stamp.h. */
#include "bench/stamp.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "cuda/host_executor.h"
#include "bench/clock.h"

const char bench_stamp_ptx[] =
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry mb_stamp(\n"
    "\t.param .u64 mb_stamp_param_0,\n"
    "\t.param .u64 mb_stamp_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<3>;\n"
    "\t.reg .b64 \t%rd<8>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [mb_stamp_param_0];\n"
    "\tld.param.u64 \t%rd2, [mb_stamp_param_1];\n"
    "\tmov.u64 \t%rd3, %globaltimer;\n"
    "$L_spin:\n"
    "\tmov.u64 \t%rd4, %globaltimer;\n"
    "\tsub.s64 \t%rd5, %rd4, %rd3;\n"
    "\tsetp.lt.u64 \t%p1, %rd5, %rd1;\n"
    "\t@%p1 bra \t$L_spin;\n"
    "\tsetp.eq.u64 \t%p2, %rd2, 0;\n"
    "\t@%p2 bra \t$L_done;\n"
    "\tcvta.to.global.u64 \t%rd6, %rd2;\n"
    "\tst.volatile.global.u64 \t[%rd6], %rd4;\n"
    "\tmembar.sys;\n"
    "$L_done:\n"
    "\tret;\n"
    "}\n";

uint64_t bench_now_ns(void) { return bench_mono_ns(); }

uint64_t bench_thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_process_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

static void host_stamp(void *const *params, const hd_dims *dims) {
  (void)dims;
  uint64_t ns = *(const uint64_t *)params[0];
  CUdeviceptr out = *(const CUdeviceptr *)params[1];
  uint64_t t0 = bench_now_ns(), t = t0;
  while (t - t0 < ns) t = bench_now_ns();
  if (out != 0)
    __atomic_store_n((uint64_t *)(uintptr_t)out, t, __ATOMIC_RELEASE);
}

void bench_stamp_register_host(void) {
  static const size_t sizes[] = {sizeof(uint64_t), sizeof(CUdeviceptr)};
  (void)hd_register_kernel(BENCH_STAMP_KERNEL, host_stamp, 2, sizes);
}

int bench_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int bench_cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

double bench_pctl(const uint64_t *v, size_t n, double p) {
  return n == 0 ? 0 : (double)v[(size_t)(p * (double)(n - 1) + 0.5)];
}

bool bench_parse_uint(const char *s, unsigned *out) {
  char *end;
  errno = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (errno || end == s || *end || v == 0 || v > 100000000ul) return false;
  *out = (unsigned)v;
  return true;
}
