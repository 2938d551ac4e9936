"""PyTorch on streamledger's pool: switch PyTorch's CUDA allocator to
libsl_torch.so and reach the hooks PyTorch's Python side cannot set.

    import sl_torch
    lib = sl_torch.install("/path/to/libsl_torch.so")  # before any CUDA tensor
    ...
    sl_torch.record_stream(t, s)    # instead of t.record_stream(s) (see below)
    sl_torch.memory_stats(0)        # instead of torch.cuda.memory_stats(0)
    sl_torch.empty_cache()          # instead of torch.cuda.empty_cache()

Why the replacements: torch.cuda.memory.CUDAPluggableAllocator takes only
alloc_fn and free_fn from Python. PyTorch 2.11 then makes Tensor.record_stream
and torch.cuda.empty_cache do nothing for the pluggable allocator (their C++
hooks are unset), and torch.cuda.memory_stats (and memory_allocated,
max_memory_reserved, ...) raise RuntimeError ("does not yet support
getDeviceStats"). The functions here call the library's own hooks through
ctypes instead. README.md, "PyTorch on the pool", lists every hook.
"""
import ctypes
import os

import torch

_lib = None


def library():
    """The loaded libsl_torch.so (after install)."""
    if _lib is None:
        raise RuntimeError("sl_torch.install() was not called")
    return _lib


def install(path=None):
    """Loads libsl_torch.so (default: beside this file, or $SL_TORCH_SO) and
    makes it PyTorch's CUDA allocator. Must run before the first CUDA
    allocation of the process (PyTorch refuses to swap an allocator in use).
    """
    global _lib
    if path is None:
        path = os.environ.get("SL_TORCH_SO") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "libsl_torch.so")
    path = os.path.abspath(path)
    lib = ctypes.CDLL(path)
    lib.sl_torch_last_error.restype = ctypes.c_char_p
    lib.sl_torch_stat_name.restype = ctypes.c_char_p
    lib.sl_torch_stat_name.argtypes = [ctypes.c_int]
    lib.sl_torch_memory_stats.argtypes = [
        ctypes.c_int, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    lib.sl_torch_record_stream_checked.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p]
    lib.sl_torch_reset_peaks.argtypes = [ctypes.c_int]
    lib.sl_torch_set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
    alloc = torch.cuda.memory.CUDAPluggableAllocator(
        path, "sl_torch_alloc", "sl_torch_free")
    torch.cuda.memory.change_current_allocator(alloc)
    _lib = lib
    return lib


def last_error():
    return library().sl_torch_last_error().decode(errors="replace")


def record_stream(tensor, stream):
    """Tensor.record_stream for the pool: the block of `tensor` is not
    reused by any stream until `stream` passed the point where the tensor
    was freed (PyTorch's record_stream semantics)."""
    rc = library().sl_torch_record_stream_checked(
        ctypes.c_void_p(tensor.untyped_storage().data_ptr()),
        ctypes.c_void_p(stream.cuda_stream))
    if rc != 0:
        raise RuntimeError("sl_torch_record_stream: " + last_error())


def empty_cache():
    """torch.cuda.empty_cache for the pool."""
    library().sl_torch_empty_cache()


def raw_stats(device=0):
    """The pool's counters of `device` by their own names."""
    lib = library()
    n = 64  # more than SL_TORCH_NSTATS; an older library returns fewer
    buf = (ctypes.c_uint64 * n)()
    got = lib.sl_torch_memory_stats(device, buf, n)
    if got < 0:
        raise RuntimeError("sl_torch_memory_stats: " + last_error())
    return {lib.sl_torch_stat_name(i).decode(): int(buf[i])
            for i in range(min(got, n))}


def memory_stats(device=0):
    """torch.cuda.memory_stats' keys that the pool can fill (same meaning),
    plus the pool's own counters under "sl_torch.*"."""
    r = raw_stats(device)
    out = {
        "allocated_bytes.all.current": r["allocated_bytes"],
        "allocated_bytes.all.peak": r["allocated_bytes_peak"],
        "requested_bytes.all.current": r["requested_bytes"],
        "reserved_bytes.all.current": r["reserved_bytes"],
        "reserved_bytes.all.peak": r["reserved_bytes_peak"],
        "inactive_split_bytes.all.current": r["cached_bytes"],
        "allocation.all.allocated": r["allocs"],
        "allocation.all.freed": r["frees"],
        "segment.all.allocated": r["slab_allocs"],
        "segment.all.freed": r["slab_frees"],
        "num_alloc_retries": r["oom_retries"],
        "num_ooms": r["ooms"],
    }
    out.update({"sl_torch." + k: v for k, v in r.items()})
    return out


def max_memory_reserved(device=0):
    return raw_stats(device)["reserved_bytes_peak"]


def reset_peak_memory_stats(device=0):
    library().sl_torch_reset_peaks(device)
