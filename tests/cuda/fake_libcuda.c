/*
 * libfake_cuda.so: the host executor behind the real driver's loading
 * interface, so that CI exercises the --driver=libcuda path end to end
 * without a GPU: dlopen of a library, cuDriverGetVersion and
 * cuGetProcAddress_v2 by base name and ABI version (as libcuda.so.1 of CUDA
 * 12+ exports them), the probe and one process per test.
 *
 * It exports only those two entry points, so every entry must come through
 * cuGetProcAddress_v2 (there is no dlsym fallback to hide a mistake), and it
 * answers only for the exact ABI version the loader must ask for, with
 * legacy default-stream semantics: a loader asking for the CUDA 13.0
 * cuCtxSynchronize (which takes a context), or for a per-thread-stream
 * variant, gets CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND and fails to load.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/driver.h"
#include "cuda/host_executor.h"
#include "tests/cuda/kernels.h"

static slc_driver fake_table;
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static int fake_ok;

/* Two devices, or SLC_FAKE_CUDA_DEVICES (1..HD_MAX_DEVICES): a dry run
 * of bench/multigpu_run.sh on 8 "GPUs" (bench/multigpu_run_smoke.sh). */
static void fake_init(void) {
  const char *env = getenv("SLC_FAKE_CUDA_DEVICES");
  hd_config cfg = {env != NULL ? atoi(env) : 2, 20};
  fake_ok = hd_install(&fake_table, &cfg) == 0;
  slc_test_register_host_kernels();
}

CUresult CUDAAPI cuDriverGetVersion(int *driverVersion) {
  if (driverVersion == NULL) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn,
                                     int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *status) {
  if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
  pthread_once(&fake_once, fake_init);
  *pfn = NULL;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (fake_ok && flags == CU_GET_PROC_ADDRESS_LEGACY_STREAM) {
#define FAKE_LOOKUP(name, sym, ver, params)                             \
  if (strcmp(symbol, #name) == 0) {                                     \
    if (cudaVersion == (ver)) {                                         \
      *pfn = (void *)fake_table.pfn_##name;                             \
      st = CU_GET_PROC_ADDRESS_SUCCESS;                                 \
    } else {                                                            \
      fprintf(stderr, "fake libcuda: %s asked at version %d, not %d\n", \
              symbol, cudaVersion, (ver));                              \
    }                                                                   \
  }
    SLC_DRIVER_ENTRIES(FAKE_LOOKUP)
#undef FAKE_LOOKUP
  }
  if (status != NULL) *status = st;
  return st == CU_GET_PROC_ADDRESS_SUCCESS ? CUDA_SUCCESS
                                           : CUDA_ERROR_NOT_FOUND;
}
