// sl_torch_entry_test: the hooks exactly as PyTorch holds them — alloc_fn and
// free_fn as std::function over the library's function pointers (PyTorch's
// CUDAPluggableAllocator) — against the host executor: sl_torch_alloc returns
// nullptr only for size 0 and throws std::runtime_error on every failure
// (PyTorch does not check for NULL), with "CUDA out of memory." first for
// LDG_ENOMEM; the free hook takes what the alloc returned. Exit 0 if all hold.
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "cuda/host_executor.h"
#include "ledger/ledger.h"
#include "torch_alloc/sl_torch.h"

#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "FAILED %s:%d: %s (last error: %s)\n", __FILE__, \
                   __LINE__, #cond, sl_torch_last_error());               \
      return 1;                                                           \
    }                                                                     \
  } while (0)

namespace {

// PyTorch's types for the two hooks (cudaStream_t is CUstream).
std::function<void *(size_t, int, CUstream)> alloc_fn = &sl_torch_alloc;
std::function<void(void *, size_t, int, CUstream)> free_fn = &sl_torch_free;

// What alloc_fn threw ("" if nothing), and its result.
std::string try_alloc(size_t size, int device, void **out) {
  *out = nullptr;
  try {
    *out = alloc_fn(size, device, nullptr);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "";
}

int run() {
  slc_driver drv;
  hd_config hc = {1, 0};
  CHECK(hd_install(&drv, &hc) == 0);
  CHECK(sl_torch_use_driver(&drv) == LDG_OK);
  CHECK(sl_torch_set_limit(0, size_t(4) << 20) == LDG_OK);
  // The runtime's current context, as PyTorch's thread has it.
  CUdevice dev;
  CUcontext ctx;
  CHECK(drv.pfn_cuInit(0) == CUDA_SUCCESS);
  CHECK(drv.pfn_cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
  CHECK(drv.pfn_cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(drv.pfn_cuCtxSetCurrent(ctx) == CUDA_SUCCESS);

  void *p = nullptr;
  CHECK(try_alloc(0, 0, &p).empty() && p == nullptr);  // an empty tensor
  const size_t big = size_t(3) << 20;
  CHECK(try_alloc(big, 0, &p).empty() && p != nullptr);
  void *q = nullptr;
  std::string oom = try_alloc(big, 0, &q);  // past the 4 MiB cap
  CHECK(q == nullptr);
  CHECK(oom.rfind("CUDA out of memory. streamledger pool: ", 0) == 0);
  CHECK(oom.find("LDG_ENOMEM") != std::string::npos);
  std::string bad = try_alloc(64, 5, &q);  // no device 5
  CHECK(q == nullptr && !bad.empty());
  CHECK(bad.rfind("CUDA out of memory.", 0) != 0);
  CHECK(bad.find("device 5") != std::string::npos);
  free_fn(p, big, 0, nullptr);
  CHECK(try_alloc(big, 0, &q).empty() && q != nullptr);  // the retry
  free_fn(q, big, 0, nullptr);
  free_fn(nullptr, 0, 0, nullptr);  // never called by PyTorch; harmless

  CHECK(sl_torch_shutdown() == LDG_OK);
  CHECK(drv.pfn_cuDevicePrimaryCtxRelease(dev) == CUDA_SUCCESS);
  long leaked = hd_shutdown();
  CHECK(leaked == 0);
  return 0;
}

}  // namespace

int main() {
  int rc = run();
  std::printf(rc == 0 ? "sl_torch_entry_test: all passed\n"
                      : "sl_torch_entry_test: FAILED\n");
  return rc;
}
