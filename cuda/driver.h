/*
 * The CUDA Driver API entry points the cuda/ layer uses, listed once, and the
 * table of function pointers they are loaded into at run time.
 *
 * Nothing links against libcuda: slc_driver_load opens libcuda.so.1 with
 * dlopen and fills an slc_driver table, so everything builds, and the layer
 * fails cleanly, where no driver is installed. A fake driver (the host
 * executor of tests/cuda/) fills the same table with functions of its own.
 *
 * VERSIONED SYMBOLS
 *   cuda.h renames many entry points with #define (cuMemAlloc -> cuMemAlloc_v2,
 *   cuStreamDestroy -> cuStreamDestroy_v2, ...) and, for some, a later CUDA
 *   release gave the same base name a new ABI (CUDA 13.0's cuCtxSynchronize
 *   takes a context). Each entry below therefore names the exact ABI it is
 *   called with: the base name, the exported symbol of that ABI, and the CUDA
 *   version that introduced it — the same version cudaTypedefs.h uses in its
 *   PFN_<name>_v<version> type, which driver.c checks at compile time.
 *   The loader asks cuGetProcAddress (CUDA >= 11.3; the 5-argument _v2 of
 *   CUDA >= 12.0 when present) for each base name at that version, with
 *   legacy default-stream semantics, and falls back to dlsym of the versioned
 *   symbol when cuGetProcAddress is missing or does not know the entry.
 *
 * THE TABLE
 *   One member per entry, named pfn_<base name> (the prefix keeps cuda.h's
 *   #defines off the member names): d->pfn_cuMemAlloc(&p, n). Every member
 *   is always callable: a table that failed to load, or was only set up with
 *   slc_driver_init_unloaded, holds stubs that return
 *   CUDA_ERROR_NOT_INITIALIZED without touching their arguments, so a call
 *   through it never crashes.
 *
 * THREADING
 *   Loading writes the table; after that the table is read-only and may be
 *   read from any thread. slc_driver_load and slc_driver_unload are not
 *   thread-safe with respect to the same table.
 */
#ifndef STREAMLEDGER_CUDA_DRIVER_H
#define STREAMLEDGER_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, symbol, version, params): the base name, the exported symbol of the
 * ABI used, the CUDA version that introduced that ABI (cudaTypedefs.h), and
 * the parameter list. Every entry returns CUresult. To add an entry, add a
 * line here (driver.c checks its ABI against cudaTypedefs.h) and, if the
 * host executor of tests/cuda/ should implement it, a function there. */
#define SLC_DRIVER_ENTRIES(X)                                                  \
  /* errors */                                                                 \
  X(cuGetErrorName, cuGetErrorName, 6000, (CUresult error, const char **pStr)) \
  X(cuGetErrorString, cuGetErrorString, 6000,                                  \
    (CUresult error, const char **pStr))                                       \
  /* initialisation, devices */                                                \
  X(cuInit, cuInit, 2000, (unsigned int Flags))                                \
  X(cuDriverGetVersion, cuDriverGetVersion, 2020, (int *driverVersion))        \
  X(cuDeviceGetCount, cuDeviceGetCount, 2000, (int *count))                    \
  X(cuDeviceGet, cuDeviceGet, 2000, (CUdevice * device, int ordinal))          \
  X(cuDeviceGetName, cuDeviceGetName, 2000,                                    \
    (char *name, int len, CUdevice dev))                                       \
  X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000,                          \
    (int *pi, CUdevice_attribute attrib, CUdevice dev))                        \
  /* contexts: one primary context per device */                               \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000,                  \
    (CUcontext * pctx, CUdevice dev))                                          \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000,            \
    (CUdevice dev))                                                            \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, (CUcontext ctx))                   \
  X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, (CUcontext * pctx))                \
  X(cuCtxSynchronize, cuCtxSynchronize, 2000, (void))                          \
  /* peer access between devices (copies between them, cuda/peer.c) */        \
  X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, 4000,                        \
    (int *canAccessPeer, CUdevice dev, CUdevice peerDev))                      \
  X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000,                        \
    (CUcontext peerContext, unsigned int Flags))                               \
  /* streams */                                                                \
  X(cuStreamCreate, cuStreamCreate, 2000,                                      \
    (CUstream * phStream, unsigned int Flags))                                 \
  X(cuStreamDestroy, cuStreamDestroy_v2, 4000, (CUstream hStream))             \
  X(cuStreamSynchronize, cuStreamSynchronize, 2000, (CUstream hStream))        \
  X(cuStreamQuery, cuStreamQuery, 2000, (CUstream hStream))                    \
  X(cuStreamWaitEvent, cuStreamWaitEvent, 3020,                                \
    (CUstream hStream, CUevent hEvent, unsigned int Flags))                    \
  X(cuStreamGetCtx, cuStreamGetCtx, 9020, (CUstream hStream, CUcontext * pctx)) \
  X(cuStreamGetFlags, cuStreamGetFlags, 5050,                                  \
    (CUstream hStream, unsigned int *flags))                                   \
  /* completion markers (the progress engine, bench/marker_bench.c) */         \
  X(cuLaunchHostFunc, cuLaunchHostFunc, 10000,                                 \
    (CUstream hStream, CUhostFn fn, void *userData))                           \
  X(cuStreamWriteValue64, cuStreamWriteValue64_v2, 11070,                      \
    (CUstream stream, CUdeviceptr addr, cuuint64_t value, unsigned int flags)) \
  X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer_v2, 3020,             \
    (CUdeviceptr * pdptr, void *p, unsigned int Flags))                        \
  /* events */                                                                 \
  X(cuEventCreate, cuEventCreate, 2000,                                       \
    (CUevent * phEvent, unsigned int Flags))                                   \
  X(cuEventDestroy, cuEventDestroy_v2, 4000, (CUevent hEvent))                 \
  X(cuEventRecord, cuEventRecord, 2000, (CUevent hEvent, CUstream hStream))    \
  X(cuEventSynchronize, cuEventSynchronize, 2000, (CUevent hEvent))            \
  X(cuEventQuery, cuEventQuery, 2000, (CUevent hEvent))                        \
  /* memory */                                                                 \
  X(cuMemAlloc, cuMemAlloc_v2, 3020, (CUdeviceptr * dptr, size_t bytesize))    \
  X(cuMemFree, cuMemFree_v2, 3020, (CUdeviceptr dptr))                         \
  X(cuMemAllocHost, cuMemAllocHost_v2, 3020, (void **pp, size_t bytesize))     \
  X(cuMemHostAlloc, cuMemHostAlloc, 2020,                                      \
    (void **pp, size_t bytesize, unsigned int Flags))                          \
  X(cuMemFreeHost, cuMemFreeHost, 2000, (void *p))                             \
  /* the stream-ordered allocator (bench/pool_bench.c's baseline) */          \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020,                                   \
    (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))                   \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, (CUdeviceptr dptr, CUstream hStream)) \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020,               \
    (CUmemoryPool * pool_out, CUdevice dev))                                   \
  X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020,                       \
    (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                \
  X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020,                       \
    (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                \
  /* copies: asynchronous, and synchronous for the settle paths */             \
  X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, 3020,                             \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,             \
     CUstream hStream))                                                        \
  X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, 3020,                             \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,                  \
     CUstream hStream))                                                        \
  X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2, 3020,                             \
    (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,           \
     CUstream hStream))                                                        \
  X(cuMemcpyHtoD, cuMemcpyHtoD_v2, 3020,                                       \
    (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))            \
  X(cuMemcpyDtoH, cuMemcpyDtoH_v2, 3020,                                       \
    (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))                  \
  X(cuMemsetD8Async, cuMemsetD8Async, 3020,                                    \
    (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream))     \
  /* modules and launches */                                                   \
  X(cuModuleLoadData, cuModuleLoadData, 2000,                                  \
    (CUmodule * module, const void *image))                                    \
  X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010,                              \
    (CUmodule * module, const void *image, unsigned int numOptions,            \
     CUjit_option *options, void **optionValues))                              \
  X(cuModuleGetFunction, cuModuleGetFunction, 2000,                            \
    (CUfunction * hfunc, CUmodule hmod, const char *name))                     \
  X(cuModuleUnload, cuModuleUnload, 2000, (CUmodule hmod))                     \
  X(cuLaunchKernel, cuLaunchKernel, 4000,                                      \
    (CUfunction f, unsigned int gridDimX, unsigned int gridDimY,               \
     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,    \
     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,    \
     void **kernelParams, void **extra))

/* The table. `origin` says where the entries came from, for diagnostics. */
typedef struct slc_driver {
#define SLC__DRIVER_MEMBER(name, sym, ver, params) \
  CUresult(CUDAAPI *pfn_##name) params;
  SLC_DRIVER_ENTRIES(SLC__DRIVER_MEMBER)
#undef SLC__DRIVER_MEMBER
  bool loaded;          /* every entry is a real (or fake) function */
  bool library_missing; /* the load failed because dlopen found no library */
  int driver_version;   /* cuDriverGetVersion, e.g. 12080; 0 if unknown */
  void *dl_handle;      /* dlopen handle; NULL for fakes and failed loads */
  char origin[96];      /* "libcuda.so.1 (cuGetProcAddress_v2)", "host" ... */
  char load_error[256]; /* why loading failed; "" when loaded */
} slc_driver;

/* Number of entries in SLC_DRIVER_ENTRIES. */
size_t slc_driver_entry_count(void);

/* Fills every entry of *d with a stub returning CUDA_ERROR_NOT_INITIALIZED
 * and clears the rest: loaded = false. A fake driver calls this first, then
 * sets the entries it implements and `loaded`. */
void slc_driver_init_unloaded(slc_driver *d);

/* Opens `path` (NULL: "libcuda.so.1") with dlopen and loads every entry.
 * Returns 0 on success (d->loaded). Otherwise returns -1, d holds stubs only,
 * d->loaded is false, d->library_missing says whether dlopen found no
 * library at all, and d->load_error says why, e.g.
 * "libcuda.so.1 not found (libcuda.so.1: cannot open shared object file...)"
 * or "cuMemAlloc: symbol cuMemAlloc_v2 not found". Never crashes, prints
 * nothing. Calls no driver function other than cuDriverGetVersion and
 * cuGetProcAddress (in particular not cuInit). */
int slc_driver_load(slc_driver *d, const char *path);

/* Closes the library (if any) and resets *d to stubs. Only after every use
 * of the table has ended. */
void slc_driver_unload(slc_driver *d);

/* The name of entry i (0 <= i < slc_driver_entry_count()) and whether it is
 * currently a stub; for diagnostics and tests. NULL if i is out of range. */
const char *slc_driver_entry_name(size_t i);
bool slc_driver_entry_is_stub(const slc_driver *d, size_t i);

#ifdef __cplusplus
}
#endif

#endif /* STREAMLEDGER_CUDA_DRIVER_H */
