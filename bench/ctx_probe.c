/*
 * Does a driver call that names a stream or an event need that stream's
 * context current? (bench/RESULTS.md, "Issue 11, fifth session: the layer's
 * record without a context query".) Links libcuda directly, so it is built
 * on the GPU host only:
 *   gcc -O2 bench/ctx_probe.c -I/usr/local/cuda/include -lcuda -o ctx_probe
 * (CI compiles it, //bench:ctx_probe_compiles, without linking.) Prints each
 * call's CUresult with a second context of the same device current, whether
 * the work stayed ordered (the sync waits for a 1 s spin), then the cost of
 * cuCtxGetCurrent and of a record with and without it.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
static const char *ptx =
".version 7.0\n.target sm_70\n.address_size 64\n"
".visible .entry spin(.param .u64 cycles){\n"
".reg .u64 %r<5>; .reg .pred %p;\n"
"ld.param.u64 %r1,[cycles]; mov.u64 %r2,%clock64;\n"
"L: mov.u64 %r3,%clock64; sub.u64 %r4,%r3,%r2; setp.lt.u64 %p,%r4,%r1; @%p bra L;\n"
"ret;}\n";
#define P(name, call) do { CUresult r_ = (call); const char *s_ = 0; cuGetErrorName(r_, &s_); printf("%-44s %s\n", name, s_ ? s_ : "?"); } while (0)
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(void){
  CUdevice d; CUcontext A, B, cur; CUmodule m; CUfunction f; CUstream s; CUevent e, e2;
  P("cuInit", cuInit(0)); P("cuDeviceGet", cuDeviceGet(&d, 0));
  P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&A, d));
  P("cuCtxSetCurrent(A)", cuCtxSetCurrent(A));
  P("cuModuleLoadData", cuModuleLoadData(&m, ptx)); P("cuModuleGetFunction", cuModuleGetFunction(&f, m, "spin"));
  P("cuStreamCreate", cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  P("cuEventCreate", cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  P("cuEventCreate2", cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr dp; P("cuMemAlloc", cuMemAlloc(&dp, 4096)); void *hp; P("cuMemHostAlloc", cuMemHostAlloc(&hp, 4096, 0));
  CUstream s2; P("cuStreamCreate s2", cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  /* a second context on the same device */
  CUctxCreateParams cp = {0};
  CUresult rb = cuCtxCreate(&B, &cp, 0, d); const char *nb=0; cuGetErrorName(rb,&nb); printf("%-44s %s\n","cuCtxCreate(B)", nb);
  for (int mode = 0; mode < 2; mode++) {
    const char *tag = mode == 0 ? "[no ctx current]" : "[other ctx B current]";
    printf("=== %s\n", tag);
    if (mode == 0) {
      /* cuCtxSetCurrent(NULL) pops the top of the thread's stack (B, pushed
       * by cuCtxCreate, then A): until none is current. */
      for (int i = 0; i < 4 && cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur; i++)
        cuCtxSetCurrent(NULL);
    } else {
      cuCtxSetCurrent(B);
    }
    cuCtxGetCurrent(&cur); printf("current=%p A=%p B=%p\n", (void*)cur, (void*)A, (void*)B);
    unsigned long long cyc = 2000000000ull; /* ~1 s */
    void *args[] = {&cyc};
    P("cuLaunchKernel(spin 1s) on s", cuLaunchKernel(f,1,1,1,1,1,1,0,s,args,0));
    P("cuEventRecord(e, s)", cuEventRecord(e, s));
    P("cuEventQuery(e) (expect NOT_READY)", cuEventQuery(e));
    P("cuStreamWaitEvent(s2, e)", cuStreamWaitEvent(s2, e, 0));
    P("cuMemcpyHtoDAsync on s2", cuMemcpyHtoDAsync(dp, hp, 64, s2));
    P("cuEventRecord(e2, s2)", cuEventRecord(e2, s2));
    P("cuEventQuery(e2) (expect NOT_READY)", cuEventQuery(e2));
    P("cuStreamQuery(s2) (expect NOT_READY)", cuStreamQuery(s2));
    double t0 = now();
    P("cuEventSynchronize(e2)", cuEventSynchronize(e2));
    printf("waited %.3f s (expect ~1 s: the spin)\n", (now()-t0)/1e9);
    P("cuStreamSynchronize(s)", cuStreamSynchronize(s));
    cuCtxGetCurrent(&cur); printf("current after=%p\n", (void*)cur);
  }
  /* cost of cuCtxGetCurrent and of records with A current */
  cuCtxSetCurrent(A);
  int N = 200000; double t0 = now();
  for (int i = 0; i < N; i++) cuCtxGetCurrent(&cur);
  printf("cuCtxGetCurrent %.1f ns\n", (now()-t0)/N);
  for (int rep = 0; rep < 3; rep++) {
    t0 = now(); for (int i = 0; i < N; i++) cuEventRecord(e, s);
    double ta = (now()-t0)/N; cuStreamSynchronize(s);
    cuCtxSetCurrent(NULL);
    t0 = now(); for (int i = 0; i < N; i++) cuEventRecord(e, s);
    double tn = (now()-t0)/N; cuStreamSynchronize(s);
    cuCtxSetCurrent(A);
    t0 = now(); for (int i = 0; i < N; i++) { cuCtxGetCurrent(&cur); cuEventRecord(e, s); }
    double tg = (now()-t0)/N; cuStreamSynchronize(s);
    printf("record ns: A current %.1f, none current %.1f, A + GetCurrent %.1f\n", ta, tn, tg);
  }
  return 0;
}
