// PyTorch's alloc_fn (sl_torch.h): the one hook that must not return NULL
// for a failure, because CUDAPluggableAllocator::malloc does not check the
// result (a tensor at address 0 would follow, and an illegal-address fault
// in the first kernel that touches it, sticky for the process). It throws
// instead; PyTorch lets the exception through (the allocator's mutex is
// taken only after alloc_fn returned) and Python raises RuntimeError with
// this message. The only C++ of the library.
#include <stdexcept>
#include <string>

#include "ledger/ledger.h"
#include "torch_alloc/sl_torch.h"

extern "C" void *sl_torch_alloc(size_t size, int device, CUstream stream) {
  int rc = LDG_OK;
  void *p = sl_torch_malloc(size, device, stream, &rc);
  if (p != nullptr || size == 0) return p;
  // "CUDA out of memory." is what PyTorch's own message starts with, and
  // what libraries that catch RuntimeError look for.
  std::string msg = rc == LDG_ENOMEM ? "CUDA out of memory. " : "";
  msg += "streamledger pool: ";
  msg += sl_torch_last_error();
  throw std::runtime_error(msg);
}
