/*
 * The suite's kernels, for real GPUs as PTX text and for the host executor as
 * host functions of the same names and parameters.
 *
 * The PTX was produced once from kernels.cu with
 *   nvcc -ptx -arch=compute_90 -o kernels.ptx tests/cuda/kernels.cu   (CUDA 13.0)
 * then its `.version 9.0` lowered to `.version 7.8` (the kernels use nothing
 * newer, `ptxas -arch=sm_90` accepts it) so that any driver from CUDA 11.8 on
 * can JIT it for sm_90 (H100/H200) and newer GPUs. It is loaded with
 * cuModuleLoadDataEx (slc_module_load).
 */
#include "tests/cuda/kernels.h"

#include <stdint.h>
#include <time.h>

#include "cuda/host_executor.h"

const char slc_test_ptx[] =
    "\n"
    ".version 7.8\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    "\t// .globl\tadd1\n"
    "\n"
    ".visible .entry add1(\n"
    "\t.param .u64 add1_param_0,\n"
    "\t.param .u32 add1_param_1\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .b32 \t%r<8>;\n"
    "\t.reg .b64 \t%rd<5>;\n"
    "\n"
    "\tld.param.u64 \t%rd1, [add1_param_0];\n"
    "\tld.param.u32 \t%r2, [add1_param_1];\n"
    "\tmov.u32 \t%r3, %ctaid.x;\n"
    "\tmov.u32 \t%r4, %ntid.x;\n"
    "\tmov.u32 \t%r5, %tid.x;\n"
    "\tmad.lo.s32 \t%r1, %r3, %r4, %r5;\n"
    "\tsetp.ge.u32 \t%p1, %r1, %r2;\n"
    "\t@%p1 bra \t$L__BB0_2;\n"
    "\n"
    "\tcvta.to.global.u64 \t%rd2, %rd1;\n"
    "\tmul.wide.u32 \t%rd3, %r1, 4;\n"
    "\tadd.s64 \t%rd4, %rd2, %rd3;\n"
    "\tld.global.u32 \t%r6, [%rd4];\n"
    "\tadd.s32 \t%r7, %r6, 1;\n"
    "\tst.global.u32 \t[%rd4], %r7;\n"
    "\n"
    "$L__BB0_2:\n"
    "\tret;\n"
    "\n"
    "}\n"
    "\t// .globl\tspin\n"
    ".visible .entry spin(\n"
    "\t.param .u64 spin_param_0\n"
    ")\n"
    "{\n"
    "\t.reg .pred \t%p<2>;\n"
    "\t.reg .b64 \t%rd<6>;\n"
    "\n"
    "\tld.param.u64 \t%rd2, [spin_param_0];\n"
    "\t// begin inline asm\n"
    "\tmov.u64 %rd3, %globaltimer;\n"
    "\t// end inline asm\n"
    "\n"
    "$L__BB1_1:\n"
    "\t// begin inline asm\n"
    "\tmov.u64 %rd4, %globaltimer;\n"
    "\t// end inline asm\n"
    "\tsub.s64 \t%rd5, %rd4, %rd3;\n"
    "\tsetp.lt.u64 \t%p1, %rd5, %rd2;\n"
    "\t@%p1 bra \t$L__BB1_1;\n"
    "\n"
    "\tret;\n"
    "\n"
    "}\n"
    "\t// .globl\ttrap_kernel\n"
    ".visible .entry trap_kernel()\n"
    "{\n"
    "\n"
    "\t// begin inline asm\n"
    "\ttrap;\n"
    "\t// end inline asm\n"
    "\tret;\n"
    "\n"
    "}\n";

/* add1(unsigned *data, unsigned n): data[i] += 1 for i < n. The host version
 * ignores the geometry and covers all n (the suite launches enough threads). */
static void host_add1(void *const *params, const hd_dims *dims) {
  (void)dims;
  CUdeviceptr p = *(const CUdeviceptr *)params[0];
  unsigned n = *(const unsigned *)params[1];
  unsigned *data = (unsigned *)(uintptr_t)p;
  for (unsigned i = 0; i < n; i++) data[i] += 1u;
}

/* spin(unsigned long long ns): keeps its stream busy for ns nanoseconds. */
static void host_spin(void *const *params, const hd_dims *dims) {
  (void)dims;
  unsigned long long ns = *(const unsigned long long *)params[0];
  struct timespec ts = {(time_t)(ns / 1000000000ull),
                        (long)(ns % 1000000000ull)};
  nanosleep(&ts, NULL);
}

/* trap_kernel(): the GPU version faults (a sticky error); the host version
 * makes the executor report CUDA_ERROR_LAUNCH_FAILED from then on. */
static void host_trap(void *const *params, const hd_dims *dims) {
  (void)params;
  (void)dims;
  hd_set_sticky(CUDA_ERROR_LAUNCH_FAILED);
}

void slc_test_register_host_kernels(void) {
  static const size_t add1_sizes[] = {sizeof(CUdeviceptr), sizeof(unsigned)};
  static const size_t spin_sizes[] = {sizeof(unsigned long long)};
  (void)hd_register_kernel("add1", host_add1, 2, add1_sizes);
  (void)hd_register_kernel("spin", host_spin, 1, spin_sizes);
  (void)hd_register_kernel("trap_kernel", host_trap, 0, NULL);
}
